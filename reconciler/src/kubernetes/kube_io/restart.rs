//! Restarting the workloads that read a Secret, the way `kubectl rollout restart` does: one
//! merge patch of the pod template's annotations. Nothing here decides which.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use nauthera_shared::workloads::Consumer;
use nauthera_shared::{RESTARTED_AT_ANNOTATION, RESTARTED_FOR_ANNOTATION};

use crate::reconcile::decide::{RestartOutcome, RestartPlan};

/// The workload kinds a restart patches, as `PodTemplate::kind` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    DaemonSet,
}

impl WorkloadKind {
    /// The kind of a pod template's `kind` (`Deployment`, `StatefulSet`, `DaemonSet`).
    pub fn of(kind: &str) -> Option<WorkloadKind> {
        match kind {
            "Deployment" => Some(WorkloadKind::Deployment),
            "StatefulSet" => Some(WorkloadKind::StatefulSet),
            "DaemonSet" => Some(WorkloadKind::DaemonSet),
            _ => None,
        }
    }

    /// The resource, as RBAC names it.
    pub fn resource(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "deployments",
            WorkloadKind::StatefulSet => "statefulsets",
            WorkloadKind::DaemonSet => "daemonsets",
        }
    }
}

/// The patch `kubectl rollout restart` makes, with the delivery it restarts for beside it: a
/// new pod template, so the workload's controller rolls out new pods.
pub fn restart_patch(restarted_at: &str, delivery: &str) -> serde_json::Value {
    serde_json::json!({
        "spec": {"template": {"metadata": {"annotations": {
            RESTARTED_AT_ANNOTATION: restarted_at,
            RESTARTED_FOR_ANNOTATION: delivery,
        }}}}
    })
}

/// Restarts one workload (see [`restart_patch`]).
pub async fn restart_workload(
    client: &kube::Client,
    namespace: &str,
    kind: WorkloadKind,
    name: &str,
    restarted_at: &str,
    delivery: &str,
) -> Result<(), kube::Error> {
    let patch = Patch::Merge(restart_patch(restarted_at, delivery));
    let params = PatchParams::default();
    match kind {
        WorkloadKind::Deployment => {
            Api::<Deployment>::namespaced(client.clone(), namespace)
                .patch(name, &params, &patch)
                .await?;
        }
        WorkloadKind::StatefulSet => {
            Api::<StatefulSet>::namespaced(client.clone(), namespace)
                .patch(name, &params, &patch)
                .await?;
        }
        WorkloadKind::DaemonSet => {
            Api::<DaemonSet>::namespaced(client.clone(), namespace)
                .patch(name, &params, &patch)
                .await?;
        }
    }
    Ok(())
}

/// Carries out a restart plan: patches the workloads planned for a restart, one after the
/// other, and says what came of each (a workload of a kind it does not patch is left out).
pub async fn restart_planned(
    client: &kube::Client,
    namespace: &str,
    planned: Vec<(Consumer, RestartPlan)>,
    restarted_at: &str,
    delivery: &str,
) -> Vec<(Consumer, RestartOutcome)> {
    let mut outcomes = Vec::new();
    for (consumer, plan) in planned {
        let outcome = match (plan, WorkloadKind::of(&consumer.kind)) {
            (RestartPlan::AlreadyRestarted, _) => RestartOutcome::AlreadyRestarted,
            (RestartPlan::Paused, _) => RestartOutcome::Paused,
            (RestartPlan::Restart, None) => continue,
            (RestartPlan::Restart, Some(kind)) => {
                let patched = restart_workload(
                    client,
                    namespace,
                    kind,
                    &consumer.name,
                    restarted_at,
                    delivery,
                )
                .await;
                match patched {
                    Ok(()) => RestartOutcome::Restarted,
                    Err(kube::Error::Api(status)) if status.code == 403 => {
                        RestartOutcome::Forbidden {
                            resource: kind.resource(),
                        }
                    }
                    Err(error) => RestartOutcome::Failed(error.to_string()),
                }
            }
        };
        outcomes.push((consumer, outcome));
    }
    outcomes
}

/// The delivery a Secret holds now (`SECRET@RESOURCEVERSION`): read right after a delivery,
/// the delivery's own. Its metadata only: the value is not read again. `None` when it cannot be
/// read.
pub async fn delivery_of(secrets: &Api<Secret>, name: &str) -> Option<String> {
    let secret = secrets.get_metadata_opt(name).await.ok()??;
    let version = secret.metadata.resource_version?;
    Some(format!("{name}@{version}"))
}
