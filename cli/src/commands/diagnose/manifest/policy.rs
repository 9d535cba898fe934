//! `diagnose -f`'s policy check: the ClientPolicies that would cover each manifest once applied,
//! judged on the manifest as the API server would store it. [`gather`] reads the cluster; the
//! judgement itself ([`outcome`]) is pure.

use std::collections::BTreeMap;

use jiff::Timestamp;
use nauthera_shared::resources::{ApprovalRecord, OIDCClient};
use serde_json::Value;

use super::parse::ParsedDocument;
use crate::cli::kinds::Kind;
use crate::cluster::Cluster;
use crate::cluster::policies::{counted_clients, list_policies, namespace_labels};
use crate::model::policies::{
    self, CountedClient, Judged, NamespaceLabels, Policies, PolicyOutcome,
};
use crate::model::view::ResourceView;

/// What the policy check compares the manifests against.
#[derive(Clone, Debug, Default)]
pub struct ManifestPolicies {
    pub policies: Policies,
    /// Namespace labels, by namespace.
    pub labels: BTreeMap<String, NamespaceLabels>,
    /// The OIDCClients of each namespace that the limit counts: the cluster's and the new ones
    /// the files declare (in the files' order), or why the cluster's could not be listed.
    pub clients: BTreeMap<String, Result<Vec<CountedClient>, String>>,
    /// The OIDCClients the manifests would change, as the cluster holds them, by (namespace,
    /// name).
    pub existing: BTreeMap<(String, String), ExistingClient>,
}

/// An OIDCClient of the cluster that a manifest would change.
#[derive(Clone, Debug, PartialEq)]
pub struct ExistingClient {
    pub created: Option<Timestamp>,
    pub generation: i64,
    /// Its `spec` as stored: applying the same one makes no new generation.
    pub spec: Value,
    pub written: bool,
    pub recorded: Option<ApprovalRecord>,
}

/// The policies' verdict on one manifest; `None` when they are not asked (`--local`) or do not
/// cover its kind.
pub fn outcome(
    parsed: &ParsedDocument,
    view: &ResourceView,
    context: &ManifestPolicies,
) -> Option<PolicyOutcome> {
    let kind = view.kind.policy_kind()?;
    let object = parsed.object.as_ref()?;
    context.policies.outcome(|set| {
        let key = (view.namespace.clone(), view.name.clone());
        let existing = context.existing.get(&key);
        let place = CountedClient {
            name: view.name.clone(),
            issuer: view.issuer.clone(),
            created: existing.and_then(|e| e.created),
            order: parsed.position,
            deleting: false,
        };
        // Applying a changed spec makes the next generation; the same spec, none.
        let generation = match existing {
            Some(e) if object.get("spec") == Some(&e.spec) => e.generation,
            Some(e) => e.generation + 1,
            None => 1,
        };
        let labels = context
            .labels
            .get(&view.namespace)
            .cloned()
            .unwrap_or_else(|| NamespaceLabels::of(&view.namespace, BTreeMap::new()));
        let clients = match context.clients.get(&view.namespace) {
            Some(Ok(clients)) => Ok(clients.as_slice()),
            Some(Err(why)) => Err(why.as_str()),
            None => Ok(&[][..]),
        };
        policies::evaluate(
            set,
            &Judged {
                kind,
                namespace: &view.namespace,
                issuer: &view.issuer,
                object,
                place: &place,
                generation,
                written: existing.is_some_and(|e| e.written),
                recorded: existing.and_then(|e| e.recorded.as_ref()),
                approved: &[],
            },
            &labels,
            clients,
        )
    })
}

/// Lists the policies and, when there are any, reads what judging the manifests needs: their
/// namespaces' labels and OIDCClients, and the clients they would change.
pub async fn gather(cluster: &Cluster, parsed: &[ParsedDocument]) -> ManifestPolicies {
    let policies = Policies::from_listing(&list_policies(cluster).await);
    let mut context = ManifestPolicies {
        policies,
        ..ManifestPolicies::default()
    };
    if context.policies.listed().is_none() {
        return context;
    }
    let views: Vec<&ResourceView> = parsed
        .iter()
        .filter_map(|document| document.view.as_ref().ok())
        .filter(|view| view.kind.policy_kind().is_some())
        .collect();
    for view in &views {
        if !context.labels.contains_key(&view.namespace) {
            let labels = namespace_labels(cluster, &view.namespace).await;
            context.labels.insert(view.namespace.clone(), labels);
        }
        if view.kind != Kind::OidcClient {
            continue;
        }
        if !context.clients.contains_key(&view.namespace) {
            let clients = counted_clients(cluster, &view.namespace).await;
            context.clients.insert(view.namespace.clone(), clients);
        }
        let key = (view.namespace.clone(), view.name.clone());
        if context.existing.contains_key(&key) {
            continue;
        }
        let stored = cluster
            .namespaced::<OIDCClient>(&view.namespace)
            .get_opt(&view.name)
            .await
            .ok()
            .flatten();
        if let Some(client) = stored {
            let status = client.status.as_ref();
            context.existing.insert(
                key,
                ExistingClient {
                    created: client.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    generation: client.metadata.generation.unwrap_or(1),
                    spec: serde_json::to_value(&client.spec).unwrap_or(Value::Null),
                    written: status.is_some_and(|s| s.revision.is_some()),
                    recorded: status.and_then(|s| s.approval.as_deref().cloned()),
                },
            );
        }
    }
    // The files' new clients come after the cluster's, in the files' order.
    for (position, document) in parsed.iter().enumerate() {
        let Ok(view) = &document.view else { continue };
        if view.kind != Kind::OidcClient {
            continue;
        }
        let key = (view.namespace.clone(), view.name.clone());
        if context.existing.contains_key(&key) {
            continue;
        }
        if let Some(Ok(clients)) = context.clients.get_mut(&view.namespace)
            && !clients.iter().any(|c| c.name == view.name)
        {
            clients.push(CountedClient {
                name: view.name.clone(),
                issuer: view.issuer.clone(),
                created: None,
                order: position,
                deleting: false,
            });
        }
    }
    context
}
