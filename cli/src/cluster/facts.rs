//! The gathering edge of diagnose and restore: Secrets (names of keys only, never values),
//! access reviews, events, the reconciler's log lines and pod templates, each read turned into
//! plain facts or the reason it could not be read.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod, Secret};
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::api::{Api, ListParams, LogParams, PostParams};
use serde::Serialize;

use crate::cli::kinds::Kind;
use crate::cluster::Cluster;
use crate::cluster::control_plane::RECONCILER_NAME;
use crate::error::{api_code, describe_kube_error};
use nauthera_shared::workloads::{self, PodTemplate};

/// A Secret's existence, owners and key names. Values are never read into this.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretFacts {
    pub name: String,
    pub exists: bool,
    pub owners: Vec<Owner>,
    pub keys: Vec<String>,
    /// The keys whose value is empty (listed in `keys` too).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub empty_keys: Vec<String>,
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
            empty_keys: Vec::new(),
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
            let empty_keys = keys
                .iter()
                .filter(|key| {
                    let data = secret.data.as_ref().and_then(|d| d.get(*key));
                    let text = secret.string_data.as_ref().and_then(|d| d.get(*key));
                    data.is_none_or(|v| v.0.is_empty()) && text.is_none_or(String::is_empty)
                })
                .cloned()
                .collect();
            Ok(SecretFacts {
                name: name.to_owned(),
                exists: true,
                owners,
                keys,
                empty_keys,
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
    // A real API server serves each event through both APIs: the uid tells them apart.
    let mut seen = std::collections::HashSet::new();
    match cluster
        .namespaced::<NewEvent>(namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => {
            for event in &list.items {
                let Some(regarding) = event.regarding.as_ref() else {
                    continue;
                };
                if regarding.name.as_deref() != Some(name)
                    || regarding.kind.as_deref() != Some(kind.as_str())
                {
                    continue;
                }
                if let Some(uid) = &event.metadata.uid {
                    seen.insert(uid.clone());
                }
                facts.push(new_event_fact(event));
            }
        }
        Err(error) => problems.push(describe_kube_error(&error).0),
    }
    match cluster
        .namespaced::<CoreEvent>(namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => facts.extend(list.items.iter().filter_map(|event| {
            let involved = &event.involved_object;
            let already = event
                .metadata
                .uid
                .as_ref()
                .is_some_and(|uid| seen.contains(uid));
            (!already
                && involved.name.as_deref() == Some(name)
                && involved.kind.as_deref() == Some(kind.as_str()))
            .then(|| core_event_fact(event))
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

/// An event of the `events.k8s.io` API.
fn new_event_fact(event: &NewEvent) -> EventFact {
    EventFact {
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
    }
}

/// An event of the core `v1` API.
fn core_event_fact(event: &CoreEvent) -> EventFact {
    EventFact {
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
    }
}

/// How far back the reconciler's logs are read, and how many lines about a resource are kept.
const LOG_SINCE_SECONDS: i64 = 3600;
const LOG_TAIL_LINES: i64 = 5000;
pub const LOG_LINES_KEPT: usize = 20;

/// The reconciler's recent log lines about `namespace`/`name`, from the leader's pod when known,
/// else from every pod whose name starts with the Deployment's; an error when the user may not
/// read them.
pub async fn reconciler_log_lines(
    cluster: &Cluster,
    reconciler_namespace: &str,
    leader: Option<&str>,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Vec<String>, String> {
    let pods: Api<Pod> = cluster.namespaced(reconciler_namespace);
    let params = LogParams {
        since_seconds: Some(LOG_SINCE_SECONDS),
        tail_lines: Some(LOG_TAIL_LINES),
        ..LogParams::default()
    };
    // The leader's identity is its pod's name when it runs in a pod; when there is no such pod
    // (it moved, or the identity was set by hand), the Deployment's pods are read instead.
    if let Some(leader) = leader.filter(|leader| !leader.is_empty()) {
        match pods.logs(leader, &params).await {
            Ok(log) => return Ok(lines_about(&log, kind, namespace, name, LOG_LINES_KEPT)),
            Err(error) if api_code(&error) == Some(404) => {}
            Err(error) => return Err(log_read_error(leader, reconciler_namespace, &error)),
        }
    }
    let names: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .map_err(|error| {
            let (detail, hint) = describe_kube_error(&error);
            format!("cannot list pods in {reconciler_namespace}: {detail}; {hint}")
        })?
        .items
        .into_iter()
        .filter_map(|pod| pod.metadata.name)
        .filter(|pod| pod.starts_with(RECONCILER_NAME))
        .collect();
    if names.is_empty() {
        return Err(format!(
            "no reconciler pod found in {reconciler_namespace}; check where it runs with \
             kubectl -n {reconciler_namespace} get deploy,pods"
        ));
    }
    let mut lines = Vec::new();
    for pod in names {
        let log = pods
            .logs(&pod, &params)
            .await
            .map_err(|error| log_read_error(&pod, reconciler_namespace, &error))?;
        lines.extend(lines_about(&log, kind, namespace, name, LOG_LINES_KEPT));
    }
    Ok(lines)
}

/// Why a pod's log could not be read, and what to do: advice about logs, never about CRDs.
pub fn log_read_error(pod: &str, namespace: &str, error: &kube::Error) -> String {
    let detail = match error {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    };
    let hint = match api_code(error) {
        Some(403) => format!(
            "reading logs needs get on pods/log in {namespace}; ask for it, or read the logs \
             where the cluster keeps them"
        ),
        Some(404) => format!(
            "the pod is gone (restarted or rescheduled): run diagnose again, or kubectl -n \
             {namespace} logs deploy/{RECONCILER_NAME}"
        ),
        Some(400) => "the pod has no container running yet (starting, or crash-looping): \
                      kubectl describe the pod"
            .to_owned(),
        _ => "check that the cluster is reachable, then run diagnose again".to_owned(),
    };
    format!("cannot read the logs of pod {pod} in {namespace}: {detail}; {hint}")
}

/// The last `keep` of the reconciler's lines about the resource.
pub fn lines_about(log: &str, kind: Kind, namespace: &str, name: &str, keep: usize) -> Vec<String> {
    let about: Vec<&str> = log
        .lines()
        .filter(|line| is_about(line, kind, namespace, name))
        .collect();
    about[about.len().saturating_sub(keep)..]
        .iter()
        .map(|line| (*line).to_owned())
        .collect()
}

/// Whether a reconciler's JSON log line is about the resource: by its structured `namespace` and
/// `name` fields (and `kind`, when the line names one), never by the words of its message.
fn is_about(line: &str, kind: Kind, namespace: &str, name: &str) -> bool {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(line) else {
        return false;
    };
    let field = |key: &str| fields.get(key).and_then(serde_json::Value::as_str);
    field("namespace") == Some(namespace)
        && field("name") == Some(name)
        && field("kind").is_none_or(|logged| logged == kind.as_str())
}

/// The pod templates of the Deployments, StatefulSets and DaemonSets in `namespace`.
pub async fn pod_templates(cluster: &Cluster, namespace: &str) -> Result<Vec<PodTemplate>, String> {
    workloads::pod_templates(&cluster.client, namespace)
        .await
        .map_err(|failure| {
            let (detail, hint) = describe_kube_error(&failure.error);
            format!(
                "cannot list {} in namespace {namespace}: {detail}; {hint}",
                failure.resource
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_about_the_resource_by_their_fields() {
        let log = r#"{"message":"reconciled","kind":"OIDCClient","namespace":"team-a","name":"shop","reason":"Registered"}
{"message":"reconciled","kind":"OIDCClient","namespace":"team-a","name":"shop-2"}
{"message":"reconciled","kind":"OIDCClient","namespace":"team-b","name":"shop"}
{"message":"reconciled","kind":"Branding","namespace":"team-a","name":"shop"}
{"message":"grpc_call","method":"ApplyClient","detail":"team-a shop"}
not json: team-a shop
{"message":"cannot read the manifest","namespace":"team-a","name":"shop"}
"#;
        let lines = lines_about(log, Kind::OidcClient, "team-a", "shop", 20);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[1].contains("cannot read the manifest"));
        assert_eq!(
            lines_about(log, Kind::OidcClient, "team-a", "shop", 1).len(),
            1
        );
    }

    #[test]
    fn a_log_that_cannot_be_read_gets_advice_about_logs() {
        let api = |code: u16, message: &str| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure(message, "").with_code(code),
            ))
        };
        let gone = log_read_error(
            "replica-a",
            "nauthera-system",
            &api(404, "pods \"replica-a\" not found"),
        );
        assert!(gone.contains("the pod is gone"), "{gone}");
        assert!(!gone.contains("CRD"), "{gone}");
        let denied = log_read_error("r-1", "nauthera-system", &api(403, "forbidden"));
        assert!(
            denied.contains("get on pods/log in nauthera-system"),
            "{denied}"
        );
    }
}
