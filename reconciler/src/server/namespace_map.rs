//! The cluster's namespaces as the server names them. Every request leaves with its Kubernetes
//! namespaces mapped (`team-a` → `prod-eu/team-a`) and every answer comes back mapped the other
//! way, here at the edge, so that the rest of the reconciler speaks only of Kubernetes
//! namespaces and no call can forget the mapping. What the answers name of other clusters'
//! namespaces is dropped: a listing leaves their objects out, a change event keeps only its
//! hint.

use nauthera_proto::v1;
use nauthera_shared::topology::NamespaceMapping;

/// A request whose namespaces are mapped before it is sent.
pub trait Outgoing {
    fn to_server(&mut self, mapping: &NamespaceMapping);
}

/// An answer whose namespaces are mapped back.
pub trait Incoming {
    fn map_back(&mut self, mapping: &NamespaceMapping);
}

fn reference_to_server(reference: &mut Option<v1::ObjectRef>, mapping: &NamespaceMapping) {
    if let Some(reference) = reference {
        reference.to_server(mapping);
    }
}

impl Outgoing for v1::ObjectRef {
    fn to_server(&mut self, mapping: &NamespaceMapping) {
        self.namespace = mapping.to_server(&self.namespace);
    }
}

/// The Kubernetes namespace of a reference the server returned; `false` when it is another
/// cluster's (the reference is left as the server sent it). An organization's reference names
/// only its slug: kept.
fn reference_from_server(reference: &mut v1::ObjectRef, mapping: &NamespaceMapping) -> bool {
    if mapping.is_identity() || reference.namespace.is_empty() {
        return true;
    }
    match mapping.from_server(&reference.namespace) {
        Some(namespace) => {
            reference.namespace = namespace.to_owned();
            true
        }
        None => false,
    }
}

macro_rules! outgoing_with_ref {
    ($($message:ty),* $(,)?) => {
        $(impl Outgoing for $message {
            fn to_server(&mut self, mapping: &NamespaceMapping) {
                reference_to_server(&mut self.r#ref, mapping);
            }
        })*
    };
}

outgoing_with_ref!(
    v1::ApplyClientRequest,
    v1::DeleteClientRequest,
    v1::ApplyBrandingRequest,
    v1::DeleteBrandingRequest,
    v1::ApplyIdentityProviderRequest,
    v1::DeleteIdentityProviderRequest,
);

impl Outgoing for v1::ApplyOrganizationRequest {
    fn to_server(&mut self, mapping: &NamespaceMapping) {
        self.namespace = mapping.to_server(&self.namespace);
    }
}

impl Outgoing for v1::DeleteOrganizationRequest {
    fn to_server(&mut self, mapping: &NamespaceMapping) {
        if !self.namespace.is_empty() {
            self.namespace = mapping.to_server(&self.namespace);
        }
    }
}

impl Outgoing for v1::ListClientRevisionsRequest {
    fn to_server(&mut self, mapping: &NamespaceMapping) {
        for namespace in &mut self.namespaces {
            *namespace = mapping.to_server(namespace);
        }
    }
}

macro_rules! incoming_with_ref {
    ($($message:ty),* $(,)?) => {
        $(impl Incoming for $message {
            fn map_back(&mut self, mapping: &NamespaceMapping) {
                if let Some(reference) = &mut self.r#ref {
                    reference_from_server(reference, mapping);
                }
            }
        })*
    };
}

incoming_with_ref!(v1::Client, v1::Branding, v1::IdentityProvider);

/// Answers that name no namespace.
macro_rules! incoming_unchanged {
    ($($message:ty),* $(,)?) => {
        $(impl Incoming for $message {
            fn map_back(&mut self, _: &NamespaceMapping) {}
        })*
    };
}

incoming_unchanged!(v1::DeleteClientResponse, v1::DeleteObjectResponse);

impl Incoming for v1::ApplyClientResponse {
    fn map_back(&mut self, mapping: &NamespaceMapping) {
        if let Some(client) = &mut self.client {
            client.map_back(mapping);
        }
    }
}

impl Incoming for v1::Organization {
    fn map_back(&mut self, mapping: &NamespaceMapping) {
        if let Some(namespace) = mapping.from_server(&self.namespace)
            && !mapping.is_identity()
        {
            self.namespace = namespace.to_owned();
        }
    }
}

impl Incoming for v1::ListClientRevisionsResponse {
    fn map_back(&mut self, mapping: &NamespaceMapping) {
        self.clients.retain_mut(|client| match &mut client.r#ref {
            Some(reference) => reference_from_server(reference, mapping),
            None => true,
        });
    }
}

impl Incoming for v1::ChangeEvent {
    fn map_back(&mut self, mapping: &NamespaceMapping) {
        let ours = match &mut self.r#ref {
            Some(reference) => reference_from_server(reference, mapping),
            None => true,
        };
        if !ours {
            // Another cluster's object: only the hint counts.
            self.r#ref = None;
            self.client_id.clear();
        }
    }
}

impl Incoming for v1::AuditEvent {
    fn map_back(&mut self, mapping: &NamespaceMapping) {
        if let Some(reference) = &mut self.r#ref {
            reference_from_server(reference, mapping);
        }
    }
}

impl Incoming for v1::ListAuditEventsResponse {
    fn map_back(&mut self, mapping: &NamespaceMapping) {
        for event in &mut self.events {
            event.map_back(mapping);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eu() -> NamespaceMapping {
        NamespaceMapping::for_cluster(Some("prod-eu"), None)
    }

    fn reference(namespace: &str) -> v1::ObjectRef {
        v1::ObjectRef {
            issuer: "https://id.example.com/acme".into(),
            namespace: namespace.into(),
            name: "web".into(),
        }
    }

    #[test]
    fn requests_leave_with_the_server_namespace() {
        let mut apply = v1::ApplyClientRequest {
            r#ref: Some(reference("team-a")),
            ..Default::default()
        };
        apply.to_server(&eu());
        assert_eq!(apply.r#ref.unwrap().namespace, "prod-eu/team-a");
        let mut organization = v1::ApplyOrganizationRequest {
            namespace: "ops".into(),
            ..Default::default()
        };
        organization.to_server(&eu());
        assert_eq!(organization.namespace, "prod-eu/ops");
        let mut listing = v1::ListClientRevisionsRequest {
            namespaces: vec!["team-a".into(), "team-b".into()],
            ..Default::default()
        };
        listing.to_server(&eu());
        assert_eq!(listing.namespaces, ["prod-eu/team-a", "prod-eu/team-b"]);
    }

    #[test]
    fn answers_come_back_in_kubernetes_namespaces_without_other_clusters() {
        let revision = |namespace: &str| v1::ClientRevision {
            r#ref: Some(reference(namespace)),
            ..Default::default()
        };
        let mut listing = v1::ListClientRevisionsResponse {
            clients: vec![
                revision("prod-eu/team-a"),
                revision("prod-us/team-a"),
                revision("team-a"),
            ],
            ..Default::default()
        };
        listing.map_back(&eu());
        assert_eq!(listing.clients.len(), 1);
        assert_eq!(
            listing.clients[0].r#ref.as_ref().unwrap().namespace,
            "team-a"
        );

        let mut theirs = v1::ChangeEvent {
            r#ref: Some(reference("prod-us/team-a")),
            client_id: "c-1".into(),
            hint: Some(v1::ChangeHint {
                epoch: "e".into(),
                sequence: 7,
            }),
            ..Default::default()
        };
        theirs.map_back(&eu());
        assert_eq!(theirs.r#ref, None);
        assert!(theirs.hint.is_some());
        let mut ours = v1::ChangeEvent {
            r#ref: Some(reference("prod-eu/team-a")),
            ..Default::default()
        };
        ours.map_back(&eu());
        assert_eq!(ours.r#ref.unwrap().namespace, "team-a");
        // An organization's change names its slug only.
        let mut organization = v1::ChangeEvent {
            r#ref: Some(v1::ObjectRef {
                name: "acme".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        organization.map_back(&eu());
        assert_eq!(organization.r#ref.unwrap().name, "acme");
    }

    #[test]
    fn without_a_mapping_nothing_changes() {
        let identity = NamespaceMapping::IDENTITY;
        let mut apply = v1::ApplyClientRequest {
            r#ref: Some(reference("team-a")),
            ..Default::default()
        };
        apply.to_server(&identity);
        assert_eq!(apply.r#ref.as_ref().unwrap().namespace, "team-a");
        let mut listing = v1::ListClientRevisionsResponse {
            clients: vec![v1::ClientRevision {
                r#ref: Some(reference("prod-us/team-a")),
                ..Default::default()
            }],
            ..Default::default()
        };
        listing.map_back(&identity);
        assert_eq!(listing.clients.len(), 1);
    }
}
