//! The status every kind shares. `spec` belongs to the manifest; `status` to the reconciler.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::catalog::{Cause, ConditionType, Phase, Progress, Reason, ServerReason};

use super::common::LocalRef;

/// What the reconciler last found and did. Every field is optional: a resource the reconciler has
/// not judged yet has only the CRD's default, `observedGeneration: 0` (so GitOps tools read it as
/// in progress), and each kind fills in the fields that apply to it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Kubernetes conditions, one per type: `Ready`, and `Reconciling` and `Stalled` for GitOps
    /// tools (kstatus), each with the reason, the message and the generation judged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// `Registered`, `Pending` or `Error`; `Observed` under `managementPolicy: Observe`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    #[schemars(schema_with = "phase_schema")]
    pub phase: Option<Phase>,
    /// The reason of the `Ready` condition, repeated here so that printer columns can show it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    #[schemars(schema_with = "reason_schema")]
    pub reason: Option<Reason>,
    /// The message of the `Ready` condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the reason applies, in one catalog word (`edited`, `backup_restore`, `outside_grant`,
    /// ...): the `cause` label of the reconciler's metrics. Absent when nothing went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "cause_field")]
    #[schemars(schema_with = "cause_schema")]
    pub cause: Option<Cause>,
    /// The stable reason the server gave with its answer (an `ErrorReason` name such as
    /// `OUTSIDE_GRANT`), when the reason comes from one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "server_reason_field"
    )]
    #[schemars(schema_with = "server_reason_schema")]
    pub server_reason: Option<ServerReason>,
    /// The OAuth client id the server assigned (OIDCClient).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The organization's slug on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
    /// The revision the reconciler last wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The declared generation the server keeps in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_in_force: Option<i64>,
    /// The Secret the client secret was delivered into (OIDCClient with `secret.generate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalRef>,
    /// The `resourceVersion` of the Secret the manifest references (`spec.secret.secretRef`,
    /// an identity provider's `spec.secretRef`) whose value the server holds: another version is
    /// sent again, also one written while the reconciler was down. Never the value itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_version: Option<String>,
    /// When the client secret in force was last set: a generated one written into its Secret
    /// (the first delivery and every rotation), or the team's value sent to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_set_time: Option<Time>,
    /// When the next scheduled rotation of the generated secret falls (`spec.secret.rotation`);
    /// absent without a schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_rotation: Option<Time>,
    /// The last rotation of the generated secret the reconciler carried out on request
    /// (`nauthera.io/rotate`) or on schedule: what waits for a rotation reads this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rotation: Option<Box<RotationRecord>>,
    /// Set while the object on the server was changed or removed by something else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Box<Drift>>,
    /// The last drift a new generation of the manifest was written over: the change that was
    /// discarded, who made it, and what replaced it. Boxed, as are the other records most
    /// statuses lack: ten thousand cached statuses would carry their room for nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_drift: Option<Box<SupersededDrift>>,
    /// When the reconciler last called the server for this resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_time: Option<Time>,
    /// The last restore request the reconciler carried out: what waits for a restore reads this,
    /// never event times (repeated events fold into one series that keeps its first time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restore: Option<Box<RestoreRecord>>,
    /// The ClientPolicy rule that holds the declared generation back (`PolicyViolation`,
    /// `WaitingForApproval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Box<PolicyHold>>,
    /// What the last approved write carried of the fields an approval policy lists: a change to
    /// them needs a new approval, a change elsewhere does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Box<ApprovalRecord>>,
    /// The manager of the reconciler that writes this status: another reconciler (an
    /// overlapping shard) leaves the resource alone unless `nauthera.io/take-over-from` names
    /// this manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
    /// Set while the object on the server is another reconciler's (`ManagedElsewhere`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_elsewhere: Option<Box<ManagedElsewhere>>,
    /// The last handover to this resource (`nauthera.io/take-over-from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_take_over: Option<Box<TakeOverRecord>>,
    /// The last restart of the workloads that read the delivered Secret, after a new client
    /// secret replaced one they held (`spec.secret.restart: Rollout`): which were restarted,
    /// which were not and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_workload_restart: Option<Box<super::WorkloadRestartRecord>>,
    /// What the server holds of the object and where it differs from the manifest: set under
    /// `managementPolicy: Observe` and while an object somebody else wrote waits for adoption
    /// (`AdoptionRequired`); cleared once the reconciler manages the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Box<super::ServerObject>>,
    /// The last adoption of an object somebody else wrote (`nauthera.io/adopt`, or a handover
    /// from `managementPolicy: Observe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_adoption: Option<Box<super::AdoptionRecord>>,
    /// In memory only, never written or read: set while this status is kept without its
    /// conditions ([`ResourceStatus::abridge`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub abridged: Option<Abridged>,
}

/// What an abridged status keeps of its conditions: when each last moved (`Ready`,
/// `Reconciling`, `Stalled`); the rest follows from the reason, the cause, the message and the
/// generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Abridged {
    since: [jiff::Timestamp; 3],
}

/// The other reconciler that wrote the object last.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedElsewhere {
    /// The manager its write named.
    pub manager: String,
    /// Its certificate identity, as the server recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The revision it wrote.
    pub revision: String,
    /// The declared generation its write named (of its own manifest).
    #[serde(default)]
    pub generation: i64,
    /// When it wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_at: Option<Time>,
}

impl ManagedElsewhere {
    /// `manager NAME (IDENTITY)`, as messages name the other reconciler.
    pub fn writer(&self) -> String {
        match &self.actor {
            Some(actor) => format!("manager {} ({actor})", self.manager),
            None => format!("manager {}", self.manager),
        }
    }
}

/// A handover this resource carried out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TakeOverRecord {
    /// The manager the object was taken from.
    pub from_manager: String,
    /// The revision written over.
    pub from_revision: String,
    /// The revision written.
    pub revision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
}

/// The policy rule that holds a resource back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyHold {
    /// The ClientPolicy.
    pub policy: String,
    /// The rule, as `spec.rules` names it (`redirectUris`, `approval`, ...).
    pub rule: String,
    /// The manifest field the rule constrains (`spec.redirectUris`), if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// The approvable fields of the generation last written under an approval policy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    /// The generation written.
    pub generation: i64,
    /// The fields the covering approval policies list, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// SHA-256 of those fields' values, hex.
    pub digest: String,
    /// SHA-256 of each field's value, hex, by field: which of them a later generation changes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub field_digests: BTreeMap<String, String>,
}

/// A drift that a new generation of the manifest was written over, as the Drifted runbook says
/// a change kept by putting it in the manifest is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SupersededDrift {
    /// The drift as it stood (revision, who, when, fields that differed).
    pub drift: Drift,
    /// The generation written over it.
    pub generation: i64,
    /// The revision that generation was written as.
    pub revision: String,
    /// The fields of the drift that generation declares as the server held them: the change
    /// to them was kept (adopted as the declared state), not discarded. The other fields of
    /// `drift.fields` were discarded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub kept: Vec<String>,
    /// When it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_at: Option<Time>,
}

impl SupersededDrift {
    /// The fields of the drift the generation wrote over (not kept).
    pub fn discarded(&self) -> Vec<&str> {
        self.drift
            .fields
            .iter()
            .filter(|field| !self.kept.contains(field))
            .map(String::as_str)
            .collect()
    }
}

/// A restore request (the annotation `nauthera.io/restore=true`) as the reconciler carried it out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreRecord {
    /// The `nauthera.io/restore-request` annotation that came with the request, which
    /// `kubectl nauthera restore` sets to tell its request from any earlier one; absent when the
    /// request had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Who asked: the field manager that set the restore annotation, as the API server's
    /// managedFields record it (`kubectl-nauthera`, `kubectl-annotate`, a GitOps controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// `Restored`: the declared state was written back over the drift; `NotDrifted`: nothing
    /// had drifted when the request was carried out, so nothing was written.
    pub outcome: RestoreOutcome,
    /// The revision the restore wrote (`Restored`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The drifted revision it wrote over; empty when the object had been removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwritten_revision: Option<String>,
    /// When the request was carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
}

/// A rotation of the generated client secret, on request or on schedule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotationRecord {
    /// The value of the `nauthera.io/rotate` annotation the request came with; absent for a
    /// scheduled rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Who asked: the field manager that set the annotation, as the API server's managedFields
    /// record it (`kubectl-nauthera`, `kubectl-annotate`, a GitOps controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// `Requested`: a new secret was minted and delivered on request; `Scheduled`: on
    /// `spec.secret.rotation`; `NotGenerated`: asked where the secret is not generated (it comes
    /// from `secretRef`, or there is none), so nothing was minted.
    pub outcome: RotationOutcome,
    /// When the rotation was carried out (the request answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
}

/// What a rotation came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RotationOutcome {
    #[default]
    Requested,
    Scheduled,
    NotGenerated,
}

/// What a restore request came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RestoreOutcome {
    #[default]
    Restored,
    NotDrifted,
}

impl ResourceStatus {
    /// Leaves out the conditions when they say only what the reason, the cause, the message and
    /// the generation say ([`reason_conditions`]), as every status this reconciler writes does,
    /// and keeps when each moved: a watch cache of 100,000 manifests keeps each status for as
    /// long as the manifest lives, and three conditions are about 0.7 KB of it, in ten
    /// allocations. [`ResourceStatus::unabridge`] gives back exactly the status as it was; any
    /// other status is kept whole.
    pub fn abridge(&mut self) {
        if self.abridged.is_some() {
            return;
        }
        let [ready, reconciling, stalled] = self.conditions.as_slice() else {
            return;
        };
        let since = [ready, reconciling, stalled].map(|c| c.last_transition_time.0);
        if self.conditions_since(since).as_ref().map(|c| &c[..]) != Some(&self.conditions[..]) {
            return;
        }
        self.conditions = Vec::new();
        self.abridged = Some(Abridged { since });
    }

    /// The status as it was before [`ResourceStatus::abridge`].
    pub fn unabridge(&mut self) {
        let Some(Abridged { since }) = self.abridged.take() else {
            return;
        };
        if let Some(conditions) = self.conditions_since(since) {
            self.conditions = conditions.to_vec();
        }
    }

    /// The conditions this status's reason, cause, message and generation make, each moved at
    /// its time of `since`.
    fn conditions_since(&self, since: [jiff::Timestamp; 3]) -> Option<[Condition; 3]> {
        let (reason, message) = (self.reason?, self.message.clone()?);
        let cause = self.cause.unwrap_or(Cause::None);
        let mut conditions = reason_conditions(
            reason,
            cause,
            message,
            self.observed_generation,
            Time(since[0]),
        );
        for (condition, at) in conditions.iter_mut().zip(since) {
            condition.last_transition_time = Time(at);
        }
        Some(conditions)
    }

    /// When the `Ready` condition last moved, abridged or not.
    pub fn ready_since(&self) -> Option<jiff::Timestamp> {
        match &self.abridged {
            Some(abridged) => Some(abridged.since[0]),
            None => self
                .condition(ConditionType::Ready)
                .map(|ready| ready.last_transition_time.0),
        }
    }

    /// The condition of a type, if set.
    pub fn condition(&self, type_: ConditionType) -> Option<&Condition> {
        let name = type_.as_str();
        self.conditions.iter().find(|c| c.type_ == name)
    }
}

/// A change on the server that the reconciler did not make, and did not write over.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    /// The revision the server holds; empty when the object was removed.
    #[serde(default)]
    pub server_revision: String,
    /// Whether the object is gone from the server.
    #[serde(default)]
    pub removed: bool,
    /// When the server says the object changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_at: Option<Time>,
    /// The manager the change named (empty for the dashboard or a tool that names none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
    /// Who made the change, from the server's audit log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The fields that differ from the manifest, in the manifest's naming (`spec.redirectUris`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub fields: Vec<String>,
    /// When the reconciler noticed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_at: Option<Time>,
}

impl Drift {
    /// Who made the change, as well as it is known: the actor from the audit log, else the
    /// manager the write named.
    pub fn author(&self) -> String {
        self.actor
            .clone()
            .or_else(|| self.manager.clone().filter(|m| !m.is_empty()))
            .unwrap_or_else(|| "something else".to_owned())
    }
}

/// Reads a phase or reason this version does not know (written by a newer reconciler) as absent
/// rather than failing the whole object, which would stop a watch or the plugin.
fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let value = Option::<serde_json::Value>::deserialize(deserializer)?;
    Ok(value.and_then(|value| serde_json::from_value(value).ok()))
}

/// The serialized names of `Phase`, for the schema. A unit test checks every phase against it.
const PHASE_NAMES: [&str; 4] = ["Registered", "Pending", "Error", "Observed"];

fn phase_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": PHASE_NAMES })
}

// A plain string rather than an enum: the reason catalog grows, and an older CRD must still accept
// the status a newer reconciler writes.
fn cause_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "description": "Why the reason applies (see the cause column of the reason catalog)."
    })
}

/// A cause as its catalog word; one this version does not know reads as absent.
mod cause_field {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::catalog::Cause;

    pub fn serialize<S: Serializer>(
        cause: &Option<Cause>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match cause {
            Some(cause) => serializer.serialize_str(cause.as_str()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Cause>, D::Error> {
        let word = Option::<String>::deserialize(deserializer)?;
        Ok(word.and_then(|word| Cause::ALL.into_iter().find(|cause| cause.as_str() == word)))
    }
}

fn server_reason_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "description": "The stable reason the server gave with its answer (an `ErrorReason` name such as `OUTSIDE_GRANT`), when the reason comes from one."
    })
}

/// A server reason as its `ErrorReason` name; one this version does not know, or the
/// unspecified one, reads as absent.
mod server_reason_field {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::catalog::ServerReason;

    pub fn serialize<S: Serializer>(
        reason: &Option<ServerReason>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match reason {
            Some(reason) => serializer.serialize_str(reason.as_str()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<ServerReason>, D::Error> {
        let word = Option::<String>::deserialize(deserializer)?;
        Ok(word.as_deref().and_then(ServerReason::parse))
    }
}

fn reason_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "description": "The reason of the Ready condition (see the reason catalog)."
    })
}

/// The `Ready` condition for `reason` at time `now`; its status is the one the catalog gives the
/// reason (`Unknown` while pending). `lastTransitionTime` is `now` here; `set_condition` keeps
/// the previous one when the status did not change.
pub fn ready_condition(
    reason: Reason,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: Time,
) -> Condition {
    Condition {
        type_: ConditionType::Ready.as_str().to_owned(),
        status: reason.ready().as_str().to_owned(),
        reason: reason.as_str().to_owned(),
        message: message.into(),
        observed_generation,
        last_transition_time: now,
    }
}

/// The conditions of a reason with its cause: `Ready` (as [`ready_condition`]), and the two
/// kstatus reads, `Reconciling` and `Stalled`, True as the catalog says the reason and cause are
/// ([`Reason::progress`]). Each carries the reason and the generation judged; the True one (or
/// `Ready`) also the message.
pub fn reason_conditions(
    reason: Reason,
    cause: Cause,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: Time,
) -> [Condition; 3] {
    let ready = ready_condition(reason, message, observed_generation, now);
    let [reconciling, stalled] = progress_conditions(reason.progress(cause), &ready);
    [ready, reconciling, stalled]
}

/// The `Reconciling` and `Stalled` conditions that go with a `Ready` condition, for a resource
/// whose progress is `progress`: the one that is True repeats `Ready`'s reason and message, a
/// False one its reason alone. Also for kinds whose `Ready` reasons are their own (ClientPolicy).
pub fn progress_conditions(progress: Progress, ready: &Condition) -> [Condition; 2] {
    let condition = |type_: ConditionType, on: bool| Condition {
        type_: type_.as_str().to_owned(),
        status: if on { "True" } else { "False" }.to_owned(),
        reason: ready.reason.clone(),
        message: if on {
            ready.message.clone()
        } else {
            String::new()
        },
        observed_generation: ready.observed_generation,
        last_transition_time: ready.last_transition_time.clone(),
    };
    [
        condition(ConditionType::Reconciling, progress.reconciling()),
        condition(ConditionType::Stalled, progress.stalled()),
    ]
}

/// Puts every condition of `new` into `conditions` with [`set_condition`]; returns whether
/// anything changed.
pub fn set_conditions(
    conditions: &mut Vec<Condition>,
    new: impl IntoIterator<Item = Condition>,
) -> bool {
    let mut changed = false;
    for condition in new {
        changed |= set_condition(conditions, condition);
    }
    changed
}

/// Puts `condition` into `conditions`, replacing the one of the same type. `lastTransitionTime`
/// moves only when the status changes: a new reason or message keeps the previous time (the
/// Kubernetes convention). Returns whether anything changed, so that callers can skip a no-op
/// status write.
pub fn set_condition(conditions: &mut Vec<Condition>, mut condition: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            if existing.status == condition.status {
                condition.last_transition_time = existing.last_transition_time.clone();
            }
            let changed = *existing != condition;
            *existing = condition;
            changed
        }
        None => {
            conditions.push(condition);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn ready(reason: Reason, message: &str, now: i64) -> Condition {
        ready_condition(reason, message, Some(1), at(now))
    }

    /// A status as the reconciler writes it for `reason` and `cause`.
    fn written(reason: Reason, cause: Cause) -> ResourceStatus {
        let message = format!("{reason} because {cause:?}");
        ResourceStatus {
            reason: Some(reason),
            cause: Some(cause).filter(|cause| *cause != Cause::None),
            message: Some(message.clone()),
            conditions: reason_conditions(reason, cause, message, Some(3), at(10)).to_vec(),
            observed_generation: Some(3),
            revision: Some("e-1".to_owned()),
            ..ResourceStatus::default()
        }
    }

    #[test]
    fn every_status_the_reconciler_writes_is_abridged_and_given_back_exactly() {
        for reason in Reason::ALL {
            let causes = std::iter::once(Cause::None).chain(reason.entry().causes.iter().copied());
            for cause in causes {
                let whole = written(reason, cause);
                let mut kept = whole.clone();
                kept.abridge();
                assert!(kept.conditions.is_empty(), "{reason} {cause:?}");
                assert_eq!(kept.ready_since(), whole.ready_since());
                kept.abridge();
                kept.unabridge();
                assert_eq!(kept, whole, "{reason} {cause:?}");
            }
        }
    }

    #[test]
    fn conditions_that_moved_at_different_times_come_back_with_their_own() {
        let mut whole = written(Reason::Registered, Cause::None);
        whole.conditions[0].last_transition_time = at(20);
        whole.conditions[1].last_transition_time = at(20);
        let mut kept = whole.clone();
        kept.abridge();
        assert!(kept.abridged.is_some());
        assert_eq!(kept.ready_since(), Some(at(20).0));
        kept.unabridge();
        assert_eq!(kept, whole);
    }

    #[test]
    fn a_status_that_says_more_than_its_reason_is_kept_whole() {
        let own_message = ResourceStatus {
            message: Some("another message".to_owned()),
            ..written(Reason::Registered, Cause::None)
        };
        let mut other_stalled = written(Reason::Refused, Cause::None);
        other_stalled.conditions[2].message = "stalled for another reason".to_owned();
        let mut older_generation = written(Reason::Registered, Cause::None);
        older_generation.conditions[0].observed_generation = Some(2);
        let mut ready_only = written(Reason::Registered, Cause::None);
        ready_only.conditions.truncate(1);
        let without_reason = ResourceStatus {
            reason: None,
            ..written(Reason::Registered, Cause::None)
        };
        let statuses = [
            own_message,
            other_stalled,
            older_generation,
            ready_only,
            without_reason,
        ];
        for whole in statuses {
            let mut kept = whole.clone();
            kept.abridge();
            assert_eq!(kept, whole);
            kept.unabridge();
            assert_eq!(kept, whole);
        }
    }

    #[test]
    fn the_status_is_the_catalogs() {
        assert_eq!(ready(Reason::Registered, "", 1).status, "True");
        assert_eq!(ready(Reason::Refused, "", 1).status, "False");
        assert_eq!(ready(Reason::Pending, "", 1).status, "Unknown");
    }

    #[test]
    fn a_new_condition_is_added() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            ready(Reason::Registered, "ok", 10)
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].type_, "Ready");
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].reason, "Registered");
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn a_status_change_moves_the_transition_time() {
        let mut conditions = vec![ready(Reason::Registered, "ok", 10)];
        assert!(set_condition(
            &mut conditions,
            ready(Reason::Drifted, "changed", 20)
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "False");
        assert_eq!(conditions[0].last_transition_time, at(20));
    }

    #[test]
    fn a_reason_or_message_change_keeps_the_transition_time() {
        let mut conditions = vec![ready(Reason::Unreachable, "down", 10)];
        assert!(set_condition(
            &mut conditions,
            ready(Reason::Refused, "no", 20)
        ));
        assert_eq!(conditions[0].reason, "Refused");
        assert_eq!(conditions[0].message, "no");
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn the_same_condition_again_changes_nothing() {
        let mut conditions = vec![ready(Reason::Registered, "ok", 10)];
        assert!(!set_condition(
            &mut conditions,
            ready(Reason::Registered, "ok", 30)
        ));
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    fn conditions(reason: Reason, cause: Cause, now: i64) -> Vec<Condition> {
        reason_conditions(reason, cause, format!("{reason} message"), Some(2), at(now)).to_vec()
    }

    fn statuses(conditions: &[Condition]) -> Vec<(&str, &str)> {
        conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect()
    }

    #[test]
    fn in_force_is_ready_and_neither_reconciling_nor_stalled() {
        let all = conditions(Reason::Registered, Cause::None, 1);
        assert_eq!(
            statuses(&all),
            [
                ("Ready", "True"),
                ("Reconciling", "False"),
                ("Stalled", "False")
            ]
        );
        assert!(all.iter().all(|c| c.reason == "Registered"));
        assert!(all.iter().all(|c| c.observed_generation == Some(2)));
        assert_eq!(all[0].message, "Registered message");
        assert_eq!(all[1].message, "");
    }

    #[test]
    fn waiting_for_what_comes_by_itself_is_reconciling() {
        for (reason, cause) in [
            (Reason::Pending, Cause::ReferenceNotReady),
            (Reason::Pending, Cause::Transient),
            (Reason::Unreachable, Cause::Transient),
            (Reason::SecretUndeliverable, Cause::Transient),
        ] {
            let all = conditions(reason, cause, 1);
            assert_eq!(all[1].status, "True", "{reason} {cause}");
            assert_eq!(all[2].status, "False", "{reason} {cause}");
            assert_eq!(all[1].message, format!("{reason} message"));
        }
    }

    #[test]
    fn what_needs_a_person_is_stalled_with_the_reason_and_message() {
        for (reason, cause) in [
            (Reason::Refused, Cause::FieldViolation),
            (Reason::Drifted, Cause::Edited),
            (Reason::PolicyViolation, Cause::PolicyRule),
            (Reason::WaitingForApproval, Cause::ApprovalRequired),
            (Reason::SecretUndeliverable, Cause::ForeignSecret),
            (Reason::ManagedElsewhere, Cause::Claimed),
        ] {
            let all = conditions(reason, cause, 1);
            assert_eq!(
                statuses(&all),
                [
                    ("Ready", "False"),
                    ("Reconciling", "False"),
                    ("Stalled", "True")
                ],
                "{reason} {cause}"
            );
            assert_eq!(all[2].reason, reason.as_str());
            assert_eq!(all[2].message, format!("{reason} message"));
        }
    }

    #[test]
    fn transition_times_move_only_for_the_conditions_whose_status_changed() {
        let mut live = conditions(Reason::Pending, Cause::Transient, 10);
        assert!(set_conditions(
            &mut live,
            conditions(Reason::Refused, Cause::FieldViolation, 20)
        ));
        // Ready: Unknown -> False; Reconciling: True -> False; Stalled: False -> True.
        assert!(live.iter().all(|c| c.last_transition_time == at(20)));
        assert!(set_conditions(
            &mut live,
            conditions(Reason::Drifted, Cause::Edited, 30)
        ));
        assert!(live.iter().all(|c| c.last_transition_time == at(20)));
        assert!(!set_conditions(
            &mut live,
            conditions(Reason::Drifted, Cause::Edited, 40)
        ));
        assert!(set_conditions(
            &mut live,
            conditions(Reason::Registered, Cause::None, 50)
        ));
        let times: Vec<&Time> = live.iter().map(|c| &c.last_transition_time).collect();
        assert_eq!(times, [&at(50), &at(20), &at(50)]);
    }

    #[test]
    fn an_unknown_phase_or_reason_reads_as_absent() {
        let status: ResourceStatus = serde_json::from_value(serde_json::json!({
            "phase": "Hibernating", "reason": "SomethingNew", "revision": "r-1",
            "conditions": [{
                "type": "Ready", "status": "False", "reason": "SomethingNew", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"
            }]
        }))
        .unwrap();
        assert_eq!((status.phase, status.reason), (None, None));
        assert_eq!(status.revision.as_deref(), Some("r-1"));
        assert_eq!(
            status.condition(ConditionType::Ready).unwrap().reason,
            "SomethingNew"
        );
    }

    #[test]
    fn every_phase_is_in_the_schema() {
        for phase in Phase::ALL {
            let name = serde_json::to_value(phase).unwrap();
            assert!(PHASE_NAMES.contains(&name.as_str().unwrap()));
        }
    }

    /// Conditions write the words' `as_str`; a manifest's status is read back through serde.
    #[test]
    fn the_words_conditions_write_are_their_serde_names() {
        for type_ in ConditionType::ALL {
            assert_eq!(serde_json::to_value(type_).unwrap(), type_.as_str());
        }
        for reason in Reason::ALL {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
    }

    #[test]
    fn status_serializes_in_camel_case_and_skips_empty_fields() {
        let status = ResourceStatus {
            observed_generation: Some(3),
            phase: Some(Phase::Error),
            reason: Some(Reason::Drifted),
            generation_in_force: Some(2),
            drift: Some(Box::new(Drift {
                removed: true,
                ..Drift::default()
            })),
            ..ResourceStatus::default()
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "observedGeneration": 3,
                "phase": "Error",
                "reason": "Drifted",
                "generationInForce": 2,
                "drift": { "serverRevision": "", "removed": true }
            })
        );
        let back: ResourceStatus = serde_json::from_value(json).unwrap();
        assert_eq!(back, status);
    }
}
