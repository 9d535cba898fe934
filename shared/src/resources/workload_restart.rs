//! `spec.secret.restart`: what happens to the workloads that read a delivered Secret when a new
//! client secret replaces the one they held, and `status.lastWorkloadRestart`, what became of
//! them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What happens to the workloads that read the delivered Secret when a new client secret
/// replaces the one they held (the Secret deleted or emptied, `secretName` changed). `Rollout`:
/// once per delivery, after the Secret is written, the reconciler restarts every Deployment,
/// StatefulSet and DaemonSet of the namespace that mounts or reads the Secret, as `kubectl
/// rollout restart` does (a paused Deployment is left alone); `status.lastWorkloadRestart` and
/// the events `WorkloadsRestarted` and `WorkloadsNotRestarted` say which were restarted and which
/// not. It needs patch on those kinds (kustomize component `deploy/components/workload-restart`,
/// Helm value `rbac.workloadRestart`); without it the reconciler says the permission is missing.
/// Absent: the `SecretRotated` event names the workloads with the command that restarts each.
/// Needs `generate: true`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum WorkloadRestart {
    /// Once per delivery of a new secret, after the Secret is written, the reconciler restarts
    /// every Deployment, StatefulSet and DaemonSet of the namespace that mounts or reads the
    /// Secret, the way `kubectl rollout restart` does (annotation
    /// `kubectl.kubernetes.io/restartedAt` on the pod template). A paused Deployment is left
    /// alone. Needs `patch` on deployments, statefulsets and daemonsets (the kustomize component
    /// `deploy/components/workload-restart`, or the Helm value `rbac.workloadRestart`).
    Rollout,
}

/// The last restart of workloads after a new client secret was delivered
/// (`spec.secret.restart: Rollout`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRestartRecord {
    /// The Secret the new client secret was delivered into.
    pub secret: String,
    /// The delivery the restart was for (`SECRET@RESOURCEVERSION`), as the annotation
    /// `nauthera.io/restarted-for` on each restarted pod template records it.
    pub delivery: String,
    /// The workloads restarted (`Deployment/web`), or already restarted for this delivery.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarted: Vec<String>,
    /// The workloads that read the Secret and were not restarted, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_restarted: Vec<WorkloadNotRestarted>,
    /// When the restart was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
}

/// A workload that reads the Secret and was not restarted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadNotRestarted {
    /// `Deployment/web`.
    pub workload: String,
    pub why: NotRestartedBecause,
    /// What to do about it.
    pub message: String,
}

/// Why a workload that reads the Secret was not restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum NotRestartedBecause {
    /// The reconciler may not patch the workload's kind (RBAC): the install lacks the
    /// workload-restart permission.
    Forbidden,
    /// The Deployment's rollout is paused (`spec.paused`): it is not touched; resuming it rolls
    /// out the new secret.
    RolloutPaused,
    /// The patch failed otherwise (the workload was deleted meanwhile, the API server failed).
    PatchFailed,
}
