//! One plain view of a resource of any kind: what status, diagnose and restore need, taken from
//! the typed resources so the commands never look at raw JSON.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use nauthera_shared::catalog::{Cause, Phase, Reason, ServerReason};
use nauthera_shared::resources::{
    Branding, IdentityProvider, ManagementPolicy, OIDCClient, Organization, ResourceStatus,
    SecretKeyRef, ServerObject,
};

use crate::cli::kinds::Kind;

/// The Secret a resource writes or reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretUse {
    /// None (a public client, a branding, an organization).
    None,
    /// The reconciler delivers a generated client secret into this Secret.
    Generated { name: String },
    /// The team holds this Secret; the reconciler only reads the key.
    Referenced { name: String, key: String },
}

impl SecretUse {
    pub fn name(&self) -> Option<&str> {
        match self {
            SecretUse::None => None,
            SecretUse::Generated { name } | SecretUse::Referenced { name, .. } => Some(name),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ResourceView {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `metadata.resourceVersion` as read: the precondition of a write that must not act on a
    /// status shown before a change.
    pub resource_version: Option<String>,
    pub generation: Option<i64>,
    pub created: Option<Timestamp>,
    pub deleting: bool,
    pub annotations: BTreeMap<String, String>,
    pub issuer: String,
    /// `spec.slug` of an Organization.
    pub own_slug: Option<String>,
    pub secret: SecretUse,
    /// `spec.managementPolicy`: whether the reconciler manages the object or only observes it.
    pub policy: ManagementPolicy,
    /// `None` until the reconciler wrote a status.
    pub status: Option<ResourceStatus>,
}

impl ResourceView {
    fn new(
        kind: Kind,
        meta: &ObjectMeta,
        issuer: &str,
        policy: ManagementPolicy,
        status: Option<&ResourceStatus>,
    ) -> ResourceView {
        ResourceView {
            kind,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone(),
            generation: meta.generation,
            created: meta.creation_timestamp.as_ref().map(|time| time.0),
            deleting: meta.deletion_timestamp.is_some(),
            // Only the project's own: kubectl's last-applied copy of the manifest would double
            // what a listing holds.
            annotations: meta
                .annotations
                .iter()
                .flatten()
                .filter(|(key, _)| key.starts_with(nauthera_shared::ANNOTATION_PREFIX))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
            issuer: issuer.to_owned(),
            own_slug: None,
            secret: SecretUse::None,
            policy,
            status: status.cloned(),
        }
    }

    pub fn of_client(client: &OIDCClient) -> ResourceView {
        let mut view = Self::new(
            Kind::OidcClient,
            &client.metadata,
            &client.spec.issuer,
            client.spec.management_policy,
            client.status.as_ref(),
        );
        view.secret = match &client.spec.secret {
            Some(secret) if secret.generate => SecretUse::Generated {
                name: client
                    .status
                    .as_ref()
                    .and_then(|status| status.secret_ref.as_ref())
                    .map(|local| local.name.clone())
                    .or_else(|| secret.secret_name.clone())
                    .unwrap_or_else(|| view.name.clone()),
            },
            Some(secret) => secret
                .secret_ref
                .as_ref()
                .map_or(SecretUse::None, referenced),
            None => SecretUse::None,
        };
        view
    }

    pub fn of_branding(branding: &Branding) -> ResourceView {
        Self::new(
            Kind::Branding,
            &branding.metadata,
            &branding.spec.issuer,
            branding.spec.management_policy,
            branding.status.as_ref(),
        )
    }

    pub fn of_identity_provider(provider: &IdentityProvider) -> ResourceView {
        let mut view = Self::new(
            Kind::IdentityProvider,
            &provider.metadata,
            &provider.spec.issuer,
            provider.spec.management_policy,
            provider.status.as_ref(),
        );
        view.secret = provider
            .spec
            .secret_ref
            .as_ref()
            .map_or(SecretUse::None, referenced);
        view
    }

    pub fn of_organization(organization: &Organization) -> ResourceView {
        let mut view = Self::new(
            Kind::Organization,
            &organization.metadata,
            &organization.spec.issuer,
            organization.spec.management_policy,
            organization.status.as_ref(),
        );
        view.own_slug = Some(organization.spec.slug.clone());
        view
    }

    /// `oidcclient/shop`.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.kind.singular(), self.name)
    }

    /// The reason the status names; a resource without one has not been reconciled yet.
    pub fn reason(&self) -> Option<Reason> {
        self.status.as_ref().and_then(|status| status.reason)
    }

    /// Where a request made by `annotation` stands while it is not carried out: the reason,
    /// and whether the annotation is still there.
    pub fn request_state(&self, annotation: &str) -> String {
        format!(
            "reason {}, annotation {}",
            self.reason().map_or("-", |reason| reason.as_str()),
            if self.annotations.contains_key(annotation) {
                "present"
            } else {
                "removed"
            },
        )
    }

    /// The drift a new generation was written over, in a sentence: who made the change, which
    /// fields were kept and which discarded, and both revisions.
    pub fn superseded_drift(&self) -> Option<String> {
        let last = self.status.as_ref()?.last_drift.as_ref()?;
        let drift = &last.drift;
        let who = drift.author();
        let discarded = last.discarded();
        let what = if drift.removed {
            "its removal of the object".to_owned()
        } else if drift.fields.is_empty() {
            format!("revision {}", drift.server_revision)
        } else if last.kept.is_empty() {
            format!(
                "revision {}: {}",
                drift.server_revision,
                drift.fields.join(", ")
            )
        } else if discarded.is_empty() {
            format!(
                "revision {}: kept {}",
                drift.server_revision,
                last.kept.join(", ")
            )
        } else {
            format!(
                "revision {}: kept {}; discarded {}",
                drift.server_revision,
                last.kept.join(", "),
                discarded.join(", ")
            )
        };
        let verb = if !drift.removed && !last.kept.is_empty() && discarded.is_empty() {
            "adopted"
        } else {
            "discarded"
        };
        Some(format!(
            "generation {} {verb} a change by {who}{} ({what}), written as revision {}{}",
            last.generation,
            drift
                .changed_at
                .as_ref()
                .map(|time| format!(" made at {}", time.0))
                .unwrap_or_default(),
            last.revision,
            last.superseded_at
                .as_ref()
                .map(|time| format!(" at {}", time.0))
                .unwrap_or_default(),
        ))
    }

    /// When a new generation was last written over a drift.
    pub fn superseded_at(&self) -> Option<Timestamp> {
        let last = self.status.as_ref()?.last_drift.as_ref()?;
        last.superseded_at.as_ref().map(|time| time.0)
    }

    /// The cause the reconciler recorded with the reason.
    pub fn cause(&self) -> Option<Cause> {
        self.status.as_ref().and_then(|status| status.cause)
    }

    /// The server's stable reason the reconciler recorded, when the reason comes from one.
    pub fn server_reason(&self) -> Option<ServerReason> {
        self.status.as_ref().and_then(|status| status.server_reason)
    }

    pub fn phase(&self) -> Option<Phase> {
        self.status.as_ref().and_then(|status| status.phase)
    }

    pub fn ready_condition(&self) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|condition| condition.type_ == "Ready")
    }

    pub fn message(&self) -> Option<&str> {
        self.status
            .as_ref()
            .and_then(|status| status.message.as_deref())
            .or_else(|| {
                self.ready_condition()
                    .map(|condition| condition.message.as_str())
            })
            .filter(|message| !message.is_empty())
    }

    pub fn is_drifted(&self) -> bool {
        self.reason() == Some(Reason::Drifted)
    }

    /// Whether the manifest says `managementPolicy: Observe`.
    pub fn observes(&self) -> bool {
        self.policy.observes()
    }

    /// What the server holds of an object the reconciler observes or waits to adopt
    /// (`status.observed`).
    pub fn server_object(&self) -> Option<&ServerObject> {
        self.status.as_ref()?.observed.as_deref()
    }

    /// When the drift happened: the server's change time, else when the reconciler noticed, else
    /// when the condition moved.
    pub fn drift_time(&self) -> Option<Timestamp> {
        let status = self.status.as_ref()?;
        let drift = status.drift.as_ref();
        drift
            .and_then(|drift| drift.changed_at.as_ref().or(drift.detected_at.as_ref()))
            .map(|time| time.0)
            .or_else(|| {
                self.ready_condition()
                    .map(|condition| condition.last_transition_time.0)
            })
    }

    /// The revision the reconciler wrote and the one the server holds (the same unless drifted).
    pub fn revisions(&self) -> (Option<String>, Option<String>) {
        let Some(status) = &self.status else {
            return (None, None);
        };
        let declared = status.revision.clone();
        let server = match &status.drift {
            Some(drift) if drift.removed => Some("(removed)".to_owned()),
            Some(drift) if !drift.server_revision.is_empty() => Some(drift.server_revision.clone()),
            Some(_) => None,
            None => declared.clone(),
        };
        (declared, server)
    }
}

fn referenced(reference: &SecretKeyRef) -> SecretUse {
    SecretUse::Referenced {
        name: reference.name.clone(),
        key: reference.key.clone(),
    }
}

/// Which organization (slug) serves an issuer, from the Organization resources known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrganizationDirectory {
    by_issuer: BTreeMap<String, String>,
}

impl OrganizationDirectory {
    pub fn from_views<'a>(views: impl IntoIterator<Item = &'a ResourceView>) -> Self {
        let by_issuer = views
            .into_iter()
            .filter_map(|view| {
                let slug = view.own_slug.as_ref()?;
                Some((normalize_issuer(&view.issuer), slug.clone()))
            })
            .collect();
        OrganizationDirectory { by_issuer }
    }

    pub fn slug_for_issuer(&self, issuer: &str) -> Option<&str> {
        self.by_issuer
            .get(&normalize_issuer(issuer))
            .map(String::as_str)
    }

    /// The organization a resource belongs to: an Organization's own slug, else the slug its
    /// status records, else the Organization resource that declares its issuer.
    pub fn organization_of(&self, view: &ResourceView) -> Option<String> {
        view.own_slug
            .clone()
            .or_else(|| view.status.as_ref().and_then(|status| status.slug.clone()))
            .or_else(|| self.slug_for_issuer(&view.issuer).map(str::to_owned))
    }
}

/// Issuer URLs compare without a trailing slash.
pub fn normalize_issuer(issuer: &str) -> String {
    issuer.trim_end_matches('/').to_owned()
}

#[cfg(test)]
pub mod fixtures {
    //! Resources as the reconciler would leave them, for the tests of every command.

    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use nauthera_shared::catalog::Cause;
    use nauthera_shared::resources::{Drift, ServerObject, ready_condition};

    pub fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    /// A resource with a status of `reason` whose condition moved at `since`.
    pub fn view(
        kind: Kind,
        namespace: &str,
        name: &str,
        reason: Reason,
        since: i64,
    ) -> ResourceView {
        let phase = reason.phase(false);
        let status = ResourceStatus {
            observed_generation: Some(2),
            conditions: vec![ready_condition(
                reason,
                format!("{reason} message"),
                Some(2),
                Time(at(since)),
            )],
            phase: Some(phase),
            reason: Some(reason),
            message: Some(format!("{reason} message")),
            revision: Some("r7".into()),
            generation_in_force: Some(2),
            slug: Some("acme".into()),
            ..ResourceStatus::default()
        };
        ResourceView {
            kind,
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: Some("1001".into()),
            generation: Some(2),
            created: Some(at(since - 3600)),
            deleting: false,
            annotations: BTreeMap::new(),
            issuer: "https://id.example.com/acme".into(),
            own_slug: (kind == Kind::Organization).then(|| "acme".to_owned()),
            secret: SecretUse::None,
            policy: ManagementPolicy::Manage,
            status: Some(status),
        }
    }

    /// A resource whose manifest names an object the server holds, written by the dashboard at
    /// `written_at` and differing in `differences`, under `reason` (`Observed`,
    /// `AdoptionRequired`) and `cause`.
    pub fn holding(
        kind: Kind,
        name: &str,
        reason: Reason,
        cause: Cause,
        differences: &[&str],
        written_at: i64,
    ) -> ResourceView {
        let mut view = view(kind, "team-a", name, reason, written_at + 30);
        if reason == Reason::Observed {
            view.policy = ManagementPolicy::Observe;
        }
        if let Some(status) = view.status.as_mut() {
            status.cause = Some(cause);
            status.revision = None;
            status.generation_in_force = None;
            status.observed = Some(Box::new(ServerObject {
                revision: "r4".into(),
                absent: false,
                client_id: (kind == Kind::OidcClient).then(|| format!("{name}-id")),
                manager: None,
                actor: Some("user:alice@example.com".into()),
                written_at: Some(Time(at(written_at))),
                differences: differences.iter().map(|d| (*d).to_owned()).collect(),
                observed_at: Some(Time(at(written_at + 30))),
            }));
        }
        view
    }

    /// A drifted resource whose server object changed at `changed_at`.
    pub fn drifted(namespace: &str, name: &str, changed_at: i64) -> ResourceView {
        let mut view = view(
            Kind::OidcClient,
            namespace,
            name,
            Reason::Drifted,
            changed_at + 30,
        );
        if let Some(status) = view.status.as_mut() {
            status.drift = Some(Box::new(Drift {
                server_revision: "r9".into(),
                removed: false,
                changed_at: Some(Time(at(changed_at))),
                manager: Some("dashboard".into()),
                actor: Some("alice@example.com".into()),
                fields: vec!["spec.redirectUris".into()],
                detected_at: Some(Time(at(changed_at + 30))),
            }));
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn the_directory_finds_organizations_by_issuer_with_or_without_a_trailing_slash() {
        let mut organization = view(Kind::Organization, "ops", "acme", Reason::Registered, 0);
        organization.issuer = "https://id.example.com/acme/".into();
        let directory = OrganizationDirectory::from_views([&organization]);
        assert_eq!(
            directory.slug_for_issuer("https://id.example.com/acme"),
            Some("acme")
        );
        let mut client = view(Kind::OidcClient, "team-a", "shop", Reason::Pending, 0);
        client.status = None;
        assert_eq!(directory.organization_of(&client).as_deref(), Some("acme"));
        client.issuer = "https://id.example.com/globex".into();
        assert_eq!(directory.organization_of(&client), None);
    }

    #[test]
    fn revisions_show_the_server_side_of_a_drift() {
        let drifted = drifted("team-a", "shop", 100);
        assert_eq!(
            drifted.revisions(),
            (Some("r7".to_owned()), Some("r9".to_owned()))
        );
        assert_eq!(drifted.drift_time(), Some(at(100)));
        let registered = view(Kind::OidcClient, "team-a", "shop", Reason::Registered, 0);
        assert_eq!(
            registered.revisions(),
            (Some("r7".to_owned()), Some("r7".to_owned()))
        );
    }
}
