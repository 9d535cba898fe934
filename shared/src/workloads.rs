//! Which workloads mount or read a Secret, so they can be restarted when it changes: pure over
//! the pod templates, with the one listing the reconciler and the plugin both make.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use kube::api::{Api, ListParams};
use serde::Serialize;

/// A workload's pod template, from whichever kind holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodTemplate {
    pub kind: &'static str,
    pub name: String,
    pub spec: Option<PodSpec>,
    /// A Deployment whose rollout is paused (`spec.paused`): a restart would wait for a person.
    pub paused: bool,
    /// The delivery the reconciler last restarted it for (`nauthera.io/restarted-for` on the pod
    /// template).
    pub restarted_for: Option<String>,
}

/// The `nauthera.io/restarted-for` annotation of a pod template.
fn restarted_for(template: &PodTemplateSpec) -> Option<String> {
    template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(crate::RESTARTED_FOR_ANNOTATION)
        .cloned()
}

impl PodTemplate {
    pub fn of_deployment(item: &Deployment) -> Self {
        PodTemplate {
            kind: "Deployment",
            name: item.metadata.name.clone().unwrap_or_default(),
            spec: item
                .spec
                .as_ref()
                .and_then(|spec| spec.template.spec.clone()),
            paused: item
                .spec
                .as_ref()
                .and_then(|spec| spec.paused)
                .unwrap_or(false),
            restarted_for: item
                .spec
                .as_ref()
                .and_then(|spec| restarted_for(&spec.template)),
        }
    }

    pub fn of_stateful_set(item: &StatefulSet) -> Self {
        PodTemplate {
            kind: "StatefulSet",
            name: item.metadata.name.clone().unwrap_or_default(),
            spec: item
                .spec
                .as_ref()
                .and_then(|spec| spec.template.spec.clone()),
            paused: false,
            restarted_for: item
                .spec
                .as_ref()
                .and_then(|spec| restarted_for(&spec.template)),
        }
    }

    pub fn of_daemon_set(item: &DaemonSet) -> Self {
        PodTemplate {
            kind: "DaemonSet",
            name: item.metadata.name.clone().unwrap_or_default(),
            spec: item
                .spec
                .as_ref()
                .and_then(|spec| spec.template.spec.clone()),
            paused: false,
            restarted_for: item
                .spec
                .as_ref()
                .and_then(|spec| restarted_for(&spec.template)),
        }
    }
}

/// A listing of one workload kind that failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot list {resource} in namespace {namespace}: {error}")]
pub struct ListFailure {
    /// The resource, as RBAC names it (`deployments`).
    pub resource: &'static str,
    pub namespace: String,
    #[source]
    pub error: kube::Error,
}

/// The pod templates of the Deployments, StatefulSets and DaemonSets in `namespace`: three
/// listings, made only when a Secret's readers are wanted (a rotation, a diagnosis).
pub async fn pod_templates(
    client: &kube::Client,
    namespace: &str,
) -> Result<Vec<PodTemplate>, ListFailure> {
    let params = ListParams::default();
    let fail = |resource: &'static str| {
        move |error| ListFailure {
            resource,
            namespace: namespace.to_owned(),
            error,
        }
    };
    let mut templates = Vec::new();
    let deployments = Api::<Deployment>::namespaced(client.clone(), namespace)
        .list(&params)
        .await
        .map_err(fail("deployments"))?;
    templates.extend(deployments.items.iter().map(PodTemplate::of_deployment));
    let stateful_sets = Api::<StatefulSet>::namespaced(client.clone(), namespace)
        .list(&params)
        .await
        .map_err(fail("statefulsets"))?;
    templates.extend(stateful_sets.items.iter().map(PodTemplate::of_stateful_set));
    let daemon_sets = Api::<DaemonSet>::namespaced(client.clone(), namespace)
        .list(&params)
        .await
        .map_err(fail("daemonsets"))?;
    templates.extend(daemon_sets.items.iter().map(PodTemplate::of_daemon_set));
    Ok(templates)
}

/// A workload that uses the Secret, and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Consumer {
    pub kind: String,
    pub name: String,
    /// `volume client-secret`, `env CLIENT_SECRET (container app)`, `envFrom (container app)`.
    pub uses: Vec<String>,
}

impl Consumer {
    /// The command that restarts it.
    pub fn restart_command(&self, namespace: &str) -> String {
        format!(
            "kubectl -n {namespace} rollout restart {}/{}",
            self.kind.to_ascii_lowercase(),
            self.name
        )
    }
}

/// The workloads whose pod template mounts `secret` (volume or projected volume) or reads it into
/// the environment (`env.valueFrom.secretKeyRef`, `envFrom.secretRef`).
pub fn consumers(templates: &[PodTemplate], secret: &str) -> Vec<Consumer> {
    templates
        .iter()
        .filter_map(|template| {
            let spec = template.spec.as_ref()?;
            let uses = uses_of(spec, secret);
            (!uses.is_empty()).then(|| Consumer {
                kind: template.kind.to_owned(),
                name: template.name.clone(),
                uses,
            })
        })
        .collect()
}

fn uses_of(spec: &PodSpec, secret: &str) -> Vec<String> {
    let mut uses = Vec::new();
    for volume in spec.volumes.iter().flatten() {
        let direct = volume
            .secret
            .as_ref()
            .and_then(|source| source.secret_name.as_deref())
            == Some(secret);
        let projected = volume.projected.as_ref().is_some_and(|projected| {
            projected
                .sources
                .iter()
                .flatten()
                .any(|source| source.secret.as_ref().is_some_and(|s| s.name == secret))
        });
        if direct || projected {
            uses.push(format!("volume {}", volume.name));
        }
    }
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    for container in containers {
        for env in container.env.iter().flatten() {
            let reads = env
                .value_from
                .as_ref()
                .and_then(|from| from.secret_key_ref.as_ref())
                .is_some_and(|key| key.name == secret);
            if reads {
                uses.push(format!("env {} (container {})", env.name, container.name));
            }
        }
        for from in container.env_from.iter().flatten() {
            if from.secret_ref.as_ref().is_some_and(|r| r.name == secret) {
                uses.push(format!("envFrom (container {})", container.name));
            }
        }
    }
    uses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(kind: &'static str, name: &str, spec: serde_json::Value) -> PodTemplate {
        PodTemplate {
            kind,
            name: name.into(),
            spec: Some(serde_json::from_value(spec).unwrap()),
            paused: false,
            restarted_for: None,
        }
    }

    #[test]
    fn volumes_env_and_env_from_are_found_and_others_are_not() {
        let templates = vec![
            template(
                "Deployment",
                "web",
                serde_json::json!({
                    "containers": [{"name": "app", "env": [
                        {"name": "CLIENT_SECRET", "valueFrom": {"secretKeyRef": {"name": "shop", "key": "clientSecret"}}},
                        {"name": "OTHER", "value": "x"}
                    ]}],
                    "volumes": [{"name": "creds", "secret": {"secretName": "shop"}}]
                }),
            ),
            template(
                "StatefulSet",
                "worker",
                serde_json::json!({
                    "containers": [{"name": "w", "envFrom": [{"secretRef": {"name": "shop"}}]}],
                    "volumes": [{"name": "all", "projected": {"sources": [{"secret": {"name": "shop"}}]}}]
                }),
            ),
            template(
                "DaemonSet",
                "agent",
                serde_json::json!({
                    "containers": [{"name": "a"}],
                    "volumes": [{"name": "creds", "secret": {"secretName": "other"}}]
                }),
            ),
        ];
        let found = consumers(&templates, "shop");
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].uses,
            vec!["volume creds", "env CLIENT_SECRET (container app)"]
        );
        assert_eq!(found[1].uses, vec!["volume all", "envFrom (container w)"]);
        assert_eq!(
            found[1].restart_command("team-a"),
            "kubectl -n team-a rollout restart statefulset/worker"
        );
    }
}
