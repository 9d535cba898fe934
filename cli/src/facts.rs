//! The gathering edge of diagnose and restore: Secrets (names of keys only, never values),
//! access reviews, events and pod templates, each read turned into plain facts or the reason it
//! could not be read.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Secret};
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::api::{Api, ListParams, PostParams};
use serde::Serialize;

use crate::cluster::Cluster;
use crate::error::describe_kube_error;
use crate::kinds::Kind;
use crate::workloads::PodTemplate;

/// A Secret's existence, owners and key names. Values are never read into this.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretFacts {
    pub name: String,
    pub exists: bool,
    pub owners: Vec<Owner>,
    pub keys: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub kind: String,
    pub name: String,
    pub uid: String,
}

impl SecretFacts {
    /// Whether the resource `kind/name` (or its uid) owns the Secret.
    pub fn owned_by(&self, kind: Kind, name: &str, uid: &str) -> bool {
        self.owners.iter().any(|owner| {
            (owner.kind == kind.as_str() && owner.name == name)
                || (!uid.is_empty() && owner.uid == uid)
        })
    }
}

pub async fn secret(cluster: &Cluster, namespace: &str, name: &str) -> Result<SecretFacts, String> {
    match cluster.namespaced::<Secret>(namespace).get_opt(name).await {
        Ok(None) => Ok(SecretFacts {
            name: name.to_owned(),
            exists: false,
            owners: Vec::new(),
            keys: Vec::new(),
        }),
        Ok(Some(secret)) => {
            let owners = secret
                .metadata
                .owner_references
                .iter()
                .flatten()
                .map(|owner| Owner {
                    kind: owner.kind.clone(),
                    name: owner.name.clone(),
                    uid: owner.uid.clone(),
                })
                .collect();
            let mut keys: Vec<String> = secret
                .data
                .iter()
                .flat_map(BTreeMap::keys)
                .chain(secret.string_data.iter().flat_map(BTreeMap::keys))
                .cloned()
                .collect();
            keys.sort();
            keys.dedup();
            Ok(SecretFacts {
                name: name.to_owned(),
                exists: true,
                owners,
                keys,
            })
        }
        Err(error) => {
            let (detail, hint) = describe_kube_error(&error);
            Err(format!(
                "cannot read Secret {name} in namespace {namespace}: {detail}; {hint}"
            ))
        }
    }
}

/// One verb of an access review.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessVerdict {
    pub verb: String,
    /// `None` when the review itself could not be made.
    pub allowed: Option<bool>,
    pub detail: String,
}

/// `kubectl auth can-i <verb> secrets -n <namespace> --as=<user>` for each verb.
pub async fn can_i_secrets(
    cluster: &Cluster,
    user: &str,
    service_account_namespace: &str,
    namespace: &str,
    verbs: &[&str],
) -> Vec<AccessVerdict> {
    let api: Api<SubjectAccessReview> = Api::all(cluster.client.clone());
    let mut verdicts = Vec::new();
    for verb in verbs {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.to_owned()),
                groups: Some(vec![
                    "system:serviceaccounts".to_owned(),
                    format!("system:serviceaccounts:{service_account_namespace}"),
                    "system:authenticated".to_owned(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_owned()),
                    verb: Some((*verb).to_owned()),
                    resource: Some("secrets".to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let verdict = match api.create(&PostParams::default(), &review).await {
            Ok(answer) => {
                let status = answer.status.unwrap_or_default();
                AccessVerdict {
                    verb: (*verb).to_owned(),
                    allowed: Some(status.allowed),
                    detail: status.reason.unwrap_or_default(),
                }
            }
            Err(error) => {
                let (detail, hint) = describe_kube_error(&error);
                AccessVerdict {
                    verb: (*verb).to_owned(),
                    allowed: None,
                    detail: format!("cannot run the access review: {detail}; {hint}"),
                }
            }
        };
        verdicts.push(verdict);
    }
    verdicts
}

/// An event about a resource, from either events API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventFact {
    pub time: Option<Timestamp>,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

/// The events about `kind/name` in `namespace`, oldest first, from `events.k8s.io/v1` and
/// `v1`; an error only when neither could be read.
pub async fn events(
    cluster: &Cluster,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Vec<EventFact>, String> {
    let mut facts = Vec::new();
    let mut problems = Vec::new();
    match cluster
        .namespaced::<NewEvent>(namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => facts.extend(list.items.iter().filter_map(|event| {
            let regarding = event.regarding.as_ref()?;
            (regarding.name.as_deref() == Some(name)
                && regarding.kind.as_deref() == Some(kind.as_str()))
            .then(|| EventFact {
                time: event
                    .event_time
                    .as_ref()
                    .map(|time| time.0)
                    .or_else(|| event.deprecated_last_timestamp.as_ref().map(|t| t.0))
                    .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0)),
                type_: event.type_.clone().unwrap_or_default(),
                reason: event.reason.clone().unwrap_or_default(),
                message: event.note.clone().unwrap_or_default(),
                count: event
                    .series
                    .as_ref()
                    .map_or(event.deprecated_count.unwrap_or(1), |series| series.count),
            })
        })),
        Err(error) => problems.push(describe_kube_error(&error).0),
    }
    match cluster
        .namespaced::<CoreEvent>(namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => facts.extend(list.items.iter().filter_map(|event| {
            let involved = &event.involved_object;
            (involved.name.as_deref() == Some(name)
                && involved.kind.as_deref() == Some(kind.as_str()))
            .then(|| EventFact {
                time: event
                    .last_timestamp
                    .as_ref()
                    .map(|time| time.0)
                    .or_else(|| event.event_time.as_ref().map(|time| time.0))
                    .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0)),
                type_: event.type_.clone().unwrap_or_default(),
                reason: event.reason.clone().unwrap_or_default(),
                message: event.message.clone().unwrap_or_default(),
                count: event.count.unwrap_or(1),
            })
        })),
        Err(error) => problems.push(describe_kube_error(&error).0),
    }
    if problems.len() == 2 {
        return Err(format!(
            "cannot list events in namespace {namespace}: {}",
            problems.join("; ")
        ));
    }
    facts.sort_by_key(|event| event.time);
    facts.dedup();
    Ok(facts)
}

/// The pod templates of the Deployments, StatefulSets and DaemonSets in `namespace`.
pub async fn pod_templates(cluster: &Cluster, namespace: &str) -> Result<Vec<PodTemplate>, String> {
    let params = ListParams::default();
    let fail = |what: &str, error: kube::Error| {
        let (detail, hint) = describe_kube_error(&error);
        format!("cannot list {what} in namespace {namespace}: {detail}; {hint}")
    };
    let mut templates = Vec::new();
    let deployments = cluster
        .namespaced::<Deployment>(namespace)
        .list(&params)
        .await;
    templates.extend(
        deployments
            .map_err(|error| fail("deployments", error))?
            .items
            .iter()
            .map(PodTemplate::of_deployment),
    );
    let stateful_sets = cluster
        .namespaced::<StatefulSet>(namespace)
        .list(&params)
        .await;
    templates.extend(
        stateful_sets
            .map_err(|error| fail("statefulsets", error))?
            .items
            .iter()
            .map(PodTemplate::of_stateful_set),
    );
    let daemon_sets = cluster
        .namespaced::<DaemonSet>(namespace)
        .list(&params)
        .await;
    templates.extend(
        daemon_sets
            .map_err(|error| fail("daemonsets", error))?
            .items
            .iter()
            .map(PodTemplate::of_daemon_set),
    );
    Ok(templates)
}
