//! The ClientPolicy controller: keeps the ValidatingAdmissionPolicy and binding generated from
//! each policy in place (written again when someone edits or deletes them) and its status: whether
//! it compiled, the admission policy, and the resources it holds back.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use nauthera_shared::catalog::{Cause, ConditionType, Progress, Reason, runbook_url};
use nauthera_shared::policy::admission::{
    GENERATED_BY, GENERATED_LABEL, admission_name, admission_objects,
};
use nauthera_shared::policy::{CompiledPolicy, PolicyError};
use nauthera_shared::resources::{
    ClientPolicy, ClientPolicyStatus, HELD_LISTED, ShardHolds, progress_conditions, set_conditions,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::Policies;
use crate::kubernetes::events::EventQueue;
use crate::kubernetes::leader::Leadership;
use crate::process::metrics::Metrics;

/// Holds that change together (a policy edited, a namespace relabelled) are told in one status
/// write.
const STATUS_DEBOUNCE: Duration = Duration::from_millis(500);

/// Why a policy's `Ready` condition says what it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PolicyState {
    /// Compiled, and its admission policy and binding are in place.
    AdmissionPolicyInPlace,
    /// Compiled; none of its rules is a check of one object (only a namespace limit or
    /// approvals), so there is no admission policy: the reconciler enforces it alone.
    EnforcedByReconciler,
    /// Refused (the catalog's `PolicyRefused`): the API server would not enforce what it
    /// generates. It enforces nothing until fixed.
    Refused,
}

impl PolicyState {
    const fn as_str(self) -> &'static str {
        match self {
            PolicyState::AdmissionPolicyInPlace => "AdmissionPolicyInPlace",
            PolicyState::EnforcedByReconciler => "EnforcedByReconciler",
            PolicyState::Refused => Reason::PolicyRefused.as_str(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum PolicyControllerError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

struct PolicyContext {
    policies: Arc<Policies>,
    client: Client,
    events: EventQueue,
    metrics: Metrics,
    manager: String,
    /// This reconciler's shard: its counts go in its own entry of `status.shards`.
    shard: Option<String>,
    leadership: Leadership,
    admission: Store<ValidatingAdmissionPolicy>,
    bindings: Store<ValidatingAdmissionPolicyBinding>,
    /// What was last written of each generated object: the digest of what was sent and the
    /// generation the API server gave it, so an unchanged policy writes nothing and an edited
    /// or deleted object is written again.
    written: Mutex<HashMap<String, (String, Option<i64>)>>,
}

impl fmt::Debug for PolicyContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyContext").finish_non_exhaustive()
    }
}

/// How the policy controller reports: its events and counters.
#[derive(Clone, Debug)]
pub struct PolicyReporting {
    pub events: EventQueue,
    pub metrics: Metrics,
}

/// Runs the controller until the leader steps down.
pub async fn run_policy_controller(
    policies: Arc<Policies>,
    client: Client,
    manager: String,
    shard: Option<String>,
    leadership: Leadership,
    reporting: PolicyReporting,
) {
    let generated = watcher::Config::default().labels(&format!("{GENERATED_LABEL}={GENERATED_BY}"));
    let (admission, admission_writer) = reflector::store();
    let admission_changes = reflector::reflector(
        admission_writer,
        watcher(
            Api::<ValidatingAdmissionPolicy>::all(client.clone()),
            generated.clone(),
        ),
    )
    .default_backoff()
    .touched_objects();
    let (bindings, binding_writer) = reflector::store();
    let binding_changes = reflector::reflector(
        binding_writer,
        watcher(
            Api::<ValidatingAdmissionPolicyBinding>::all(client.clone()),
            generated,
        ),
    )
    .default_backoff()
    .touched_objects();
    let touched = policies
        .take_touched()
        .map(UnboundedReceiverStream::new)
        .map(|names| {
            names
                .map(|name| ObjectRef::<ClientPolicy>::new(&name))
                .boxed()
        })
        .unwrap_or_else(|| futures::stream::empty().boxed());
    let context = Arc::new(PolicyContext {
        policies,
        client: client.clone(),
        events: reporting.events,
        metrics: reporting.metrics,
        manager,
        shard,
        leadership,
        admission,
        bindings,
        written: Mutex::default(),
    });
    Controller::new(Api::<ClientPolicy>::all(client), watcher::Config::default())
        .with_config(controller::Config::default().debounce(STATUS_DEBOUNCE))
        .owns_stream(admission_changes)
        .owns_stream(binding_changes)
        .reconcile_on(touched)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Err(controller::Error::ObjectNotFound(_)) | Ok(_) => {}
                Err(error) => tracing::debug!(error = %error, "ClientPolicy controller"),
            }
        })
        .await;
}

async fn reconcile(
    policy: Arc<ClientPolicy>,
    ctx: Arc<PolicyContext>,
) -> Result<Action, PolicyControllerError> {
    if ctx.leadership.gate().is_err() || policy.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = policy.name_any();
    let generated = admission_name(&name);
    let mut refused = None;
    let (state, message, admission_policy) = match CompiledPolicy::compile(&policy) {
        Err(problem) => {
            // What it generated before would enforce rules its owner has since changed.
            remove_generated(&ctx, &generated).await?;
            let message = refusal_message(&problem);
            refused = Some(problem.cause);
            (PolicyState::Refused, message, None)
        }
        Ok(compiled) => match admission_objects(&policy, &compiled) {
            Some((admission, binding)) => {
                write_if_changed(&ctx, &ctx.admission, &admission).await?;
                write_if_changed(&ctx, &ctx.bindings, &binding).await?;
                (
                    PolicyState::AdmissionPolicyInPlace,
                    format!(
                        "kubectl apply checks its rules through the ValidatingAdmissionPolicy {generated}; the reconciler checks them before every write"
                    ),
                    Some(generated),
                )
            }
            None => {
                remove_generated(&ctx, &generated).await?;
                (
                    PolicyState::EnforcedByReconciler,
                    "its rules (a namespace limit, approvals) need more than one object, so the reconciler enforces them before every write".to_owned(),
                    None,
                )
            }
        },
    };
    let held = ctx.policies.held_by(&name);
    let count = |reason: &str| held.iter().filter(|h| h.reason == reason).count() as u32;
    let holds = ShardHolds {
        violations: count("PolicyViolation"),
        awaiting_approval: count("WaitingForApproval"),
        held: held.iter().take(HELD_LISTED).cloned().collect(),
    };
    let live = policy.status.clone().unwrap_or_default();
    if let Some(cause) = refused {
        ctx.metrics
            .reconciled("ClientPolicy", Reason::PolicyRefused, cause);
        // An event on the transition into the refusal, and on each new refusal.
        let told = live.conditions.iter().any(|c| {
            c.type_ == "Ready"
                && c.reason == Reason::PolicyRefused.as_str()
                && c.message == message
                && c.observed_generation == policy.metadata.generation
        });
        if !told {
            ctx.events
                .send(
                    policy.object_ref(&()),
                    Reason::PolicyRefused.event(),
                    &message,
                    jiff::Timestamp::now(),
                )
                .await;
        }
    }
    let conditions = policy_conditions(
        &live.conditions,
        state,
        refused,
        message,
        policy.metadata.generation,
        jiff::Timestamp::now(),
    );
    let own = OwnStatus {
        observed_generation: policy.metadata.generation,
        conditions,
        admission_policy,
        holds,
    };
    if own != OwnStatus::of(&live, ctx.shard.as_deref()) {
        let patch = serde_json::json!({
            "apiVersion": ClientPolicy::api_version(&()),
            "kind": ClientPolicy::kind(&()),
            "status": own.apply_configuration(ctx.shard.as_deref()),
        });
        Api::<ClientPolicy>::all(ctx.client.clone())
            .patch_status(
                &name,
                &PatchParams::apply(&ctx.manager).force(),
                &Patch::Apply(&patch),
            )
            .await?;
    }
    Ok(Action::await_change())
}

/// A policy's conditions in `state`, from the live ones: `Ready` (True unless refused, the state
/// as its reason) and the two kstatus reads: `Stalled` while refused (only its owner's fix moves
/// it on; the catalog's progress of `PolicyRefused` with `cause`), never `Reconciling` (a policy
/// is judged in one pass). `lastTransitionTime` moves only where a status changed.
fn policy_conditions(
    live: &[Condition],
    state: PolicyState,
    cause: Option<Cause>,
    message: String,
    generation: Option<i64>,
    now: jiff::Timestamp,
) -> Vec<Condition> {
    let progress = match (state, cause) {
        (PolicyState::Refused, cause) => {
            Reason::PolicyRefused.progress(cause.unwrap_or(Cause::None))
        }
        _ => Progress::Settled,
    };
    let ready = Condition {
        type_: ConditionType::Ready.as_str().to_owned(),
        status: if state == PolicyState::Refused {
            "False"
        } else {
            "True"
        }
        .to_owned(),
        reason: state.as_str().to_owned(),
        message,
        observed_generation: generation,
        last_transition_time: Time(now),
    };
    let [reconciling, stalled] = progress_conditions(progress, &ready);
    let mut conditions = live.to_vec();
    set_conditions(&mut conditions, [ready, reconciling, stalled]);
    conditions
}

/// The part of a policy's status this reconciler writes: what every reconciler of the cluster
/// agrees on (the generation, `Ready`, the admission policy) and its own counts, at the top for
/// the unsharded reconciler and in `status.shards.<shard>` for a shard. Server-side apply keeps
/// the other shards' entries, so shards never write over each other.
#[derive(Debug, PartialEq)]
struct OwnStatus {
    observed_generation: Option<i64>,
    conditions: Vec<Condition>,
    admission_policy: Option<String>,
    holds: ShardHolds,
}

impl OwnStatus {
    /// What the live status holds of this reconciler's part.
    fn of(live: &ClientPolicyStatus, shard: Option<&str>) -> OwnStatus {
        let holds = match shard {
            Some(shard) => live.shards.get(shard).cloned().unwrap_or_default(),
            None => ShardHolds {
                violations: live.violations,
                awaiting_approval: live.awaiting_approval,
                held: live.held.clone(),
            },
        };
        OwnStatus {
            observed_generation: live.observed_generation,
            conditions: live.conditions.clone(),
            admission_policy: live.admission_policy.clone(),
            holds,
        }
    }

    /// The status to apply: a shard's leaves the top-level counts out, since applying them (even
    /// as zero) would take them from the unsharded reconciler.
    fn apply_configuration(self, shard: Option<&str>) -> serde_json::Value {
        let mut status = ClientPolicyStatus {
            observed_generation: self.observed_generation,
            conditions: self.conditions,
            admission_policy: self.admission_policy,
            ..ClientPolicyStatus::default()
        };
        let Some(shard) = shard else {
            status.violations = self.holds.violations;
            status.awaiting_approval = self.holds.awaiting_approval;
            status.held = self.holds.held;
            return serde_json::json!(status);
        };
        status.shards.insert(shard.to_owned(), self.holds);
        let mut value = serde_json::json!(status);
        if let Some(fields) = value.as_object_mut() {
            fields.remove("violations");
            fields.remove("awaitingApproval");
        }
        value
    }
}

/// Writes a generated object unless the API server holds what was last written of it.
async fn write_if_changed<K>(
    ctx: &PolicyContext,
    live: &Store<K>,
    desired: &K,
) -> Result<(), PolicyControllerError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + fmt::Debug
        + Serialize
        + DeserializeOwned,
{
    let name = desired.name_any();
    let key = format!("{}/{name}", K::kind(&()));
    let digest: String = Sha256::digest(serde_json::to_vec(desired).unwrap_or_default())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let held_generation = live
        .get(&ObjectRef::new(&name))
        .map(|object| object.meta().generation);
    let remembered = ctx.written.lock().ok().and_then(|w| w.get(&key).cloned());
    if let (Some(generation), Some((sent, written_generation))) = (&held_generation, &remembered)
        && *sent == digest
        && generation == written_generation
    {
        return Ok(());
    }
    let written = Api::<K>::all(ctx.client.clone())
        .patch(
            &name,
            &PatchParams::apply(&ctx.manager).force(),
            &Patch::Apply(desired),
        )
        .await?;
    if let Ok(mut remembered) = ctx.written.lock() {
        remembered.insert(key, (digest, written.meta().generation));
    }
    Ok(())
}

/// Deletes the admission policy and binding of a policy that has none (any more).
async fn remove_generated(ctx: &PolicyContext, name: &str) -> Result<(), PolicyControllerError> {
    let held = ctx.admission.get(&ObjectRef::new(name)).is_some()
        || ctx.bindings.get(&ObjectRef::new(name)).is_some();
    if !held {
        return Ok(());
    }
    for result in [
        Api::<ValidatingAdmissionPolicyBinding>::all(ctx.client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
        Api::<ValidatingAdmissionPolicy>::all(ctx.client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
    ] {
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    if let Ok(mut written) = ctx.written.lock() {
        written.retain(|key, _| !key.ends_with(&format!("/{name}")));
    }
    Ok(())
}

/// The `Ready` message of a refused policy: the cause, the field at fault and what is wrong,
/// and what it means.
fn refusal_message(problem: &PolicyError) -> String {
    format!(
        "refused (cause {}): {}; the policy enforces nothing until it is fixed (see {})",
        problem.cause,
        problem.describe(),
        runbook_url(Reason::PolicyRefused)
    )
}

fn error_policy(
    policy: Arc<ClientPolicy>,
    error: &PolicyControllerError,
    _ctx: Arc<PolicyContext>,
) -> Action {
    tracing::warn!(policy = %policy.name_any(), error = %error, "ClientPolicy reconcile failed; retried");
    Action::requeue(Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    use nauthera_shared::resources::HeldResource;

    use super::*;

    fn at(second: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(second).unwrap()
    }

    fn statuses(conditions: &[Condition]) -> Vec<(&str, &str, &str)> {
        conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect()
    }

    #[test]
    fn a_policy_in_force_is_ready_and_a_refused_one_stalled() {
        let in_force = policy_conditions(
            &[],
            PolicyState::AdmissionPolicyInPlace,
            None,
            "in place".into(),
            Some(3),
            at(10),
        );
        assert_eq!(
            statuses(&in_force),
            [
                ("Ready", "True", "AdmissionPolicyInPlace"),
                ("Reconciling", "False", "AdmissionPolicyInPlace"),
                ("Stalled", "False", "AdmissionPolicyInPlace"),
            ]
        );
        assert!(in_force.iter().all(|c| c.observed_generation == Some(3)));
        let refused = policy_conditions(
            &in_force,
            PolicyState::Refused,
            Some(Cause::CostLimit),
            "refused (cause cost_limit)".into(),
            Some(4),
            at(20),
        );
        assert_eq!(
            statuses(&refused),
            [
                ("Ready", "False", "PolicyRefused"),
                ("Reconciling", "False", "PolicyRefused"),
                ("Stalled", "True", "PolicyRefused"),
            ]
        );
        assert_eq!(refused[2].message, "refused (cause cost_limit)");
        let times: Vec<i64> = refused
            .iter()
            .map(|c| c.last_transition_time.0.as_second())
            .collect();
        assert_eq!(times, [20, 10, 20]);
        // The same verdict again changes nothing, not even a time.
        let again = policy_conditions(
            &refused,
            PolicyState::Refused,
            Some(Cause::CostLimit),
            "refused (cause cost_limit)".into(),
            Some(4),
            at(30),
        );
        assert_eq!(again, refused);
    }

    fn held(namespace: &str) -> HeldResource {
        HeldResource {
            kind: "OIDCClient".into(),
            namespace: namespace.into(),
            name: "web".into(),
            reason: "PolicyViolation".into(),
            rule: "redirectUris".into(),
        }
    }

    fn own(namespace: &str) -> OwnStatus {
        OwnStatus {
            observed_generation: Some(2),
            conditions: Vec::new(),
            admission_policy: Some("nauthera-p".into()),
            holds: ShardHolds {
                violations: 1,
                awaiting_approval: 0,
                held: vec![held(namespace)],
            },
        }
    }

    #[test]
    fn a_shard_applies_only_its_entry_and_leaves_the_counts_above_alone() {
        let applied = own("team-a").apply_configuration(Some("a"));
        assert!(applied.get("violations").is_none(), "{applied}");
        assert!(applied.get("awaitingApproval").is_none(), "{applied}");
        assert!(applied.get("held").is_none(), "{applied}");
        assert_eq!(applied["shards"]["a"]["violations"], 1);
        assert_eq!(applied["shards"]["a"]["held"][0]["namespace"], "team-a");

        let unsharded = own("team-c").apply_configuration(None);
        assert_eq!(unsharded["violations"], 1);
        assert_eq!(unsharded["awaitingApproval"], 0);
        assert!(unsharded.get("shards").is_none(), "{unsharded}");
    }

    #[test]
    fn another_shards_entry_is_not_a_reason_to_write() {
        // The live status as server-side apply merged it: shard b's entry beside shard a's.
        let mut live: ClientPolicyStatus =
            serde_json::from_value(own("team-a").apply_configuration(Some("a"))).unwrap();
        live.shards.insert(
            "b".into(),
            ShardHolds {
                violations: 3,
                ..ShardHolds::default()
            },
        );
        assert_eq!(OwnStatus::of(&live, Some("a")), own("team-a"));
        assert_ne!(OwnStatus::of(&live, Some("b")), own("team-a"));
        assert_eq!(live.total_violations(), 4);
        assert_eq!(OwnStatus::of(&live, None).holds, ShardHolds::default());
    }
}
