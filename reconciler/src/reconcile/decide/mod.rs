//! The reconciler's decisions, as pure functions of plain values: which step comes next for a
//! resource ([`next_step`]), what each outcome of that step means ([`Verdict`]), and which status
//! and events follow ([`status_after`], [`events_for`]). No I/O here: the clock, the backoff
//! jitter and everything read from the server or from Kubernetes are passed in.

mod adoption;
mod backoff;
mod elsewhere;
mod observe;
mod outcome;
mod policy;
mod provided;
mod restart;
mod rotation;
mod rotation_triggers;
mod shape;
mod step;

pub use adoption::{
    AdoptRefusal, AdoptRequest, MintCheck, adopt_command, adopted_in_place, adoption_plan,
    adoption_record, adoption_refused, adoption_required, handover_overtaken, mint_check,
    with_adoption,
};
pub use backoff::Backoff;
pub use elsewhere::{
    LastWrite, Writer, claimed_status, elsewhere_gone, elsewhere_record, managed_elsewhere,
    released_elsewhere, take_over_refused, taken_over, writer,
};
pub use observe::observed;
pub use outcome::{
    AfterReleaseLook, Applied, DeleteOutcome, DriftReport, ReleaseLook, SecretFate, SecretHeld,
    SecretRefProblem, SecretRelease, SecretWriteFailure, Verdict, adopted, adopted_from,
    after_apply, after_apply_failure, after_delete, after_delete_failure,
    after_drift_check_failure, after_release_look, after_secret_failure, awaiting_missing,
    awaiting_prerequisite, drifted, in_organization, is_conflict, naming_dependents, no_drift,
    reference_missing, refusal_message, released, released_with_secret, restored, secret_delivered,
    secret_fate, secret_reclaimed, secret_ref_unavailable, secret_to_release, secret_unreadable,
    superseding_drift, unencodable_branding,
};
pub use policy::{PolicyGate, held_by_policy, with_approval};
pub use provided::{
    ProvidedSecret, SentValue, ValueSent, provided_value_changed, resend_over, with_value_sent,
};
pub use restart::{RestartOutcome, RestartPlan, restart_plan, with_restarts};
pub use rotation::{
    Readers, StaleRemoval, rotated, secret_name_taken, stale_secret_removed, with_removal_told,
    with_stale_removal,
};
pub use rotation_triggers::{
    RotationRequest, ScheduledRotation, rotation_answered, rotation_waits_after,
    with_rotation_recorded,
};
pub use shape::{invalid_secret_template, secret_reshape_failed, secret_reshaped};
pub use step::{
    Manifest, Missing, Observed, Rotation, SecretMode, SecretState, ServerView, Standing, Step,
    next_step, requested_mint_check, stale_secret,
};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nauthera_shared::catalog::{Cause, EventReason, Reason};
use nauthera_shared::resources::{
    AdoptionRecord, ApprovalRecord, ManagedElsewhere, PolicyHold, ResourceStatus, RestoreOutcome,
    RestoreRecord, RotationRecord, ServerObject, SupersededDrift, TakeOverRecord,
    reason_conditions, set_conditions,
};

/// The status a verdict leads to, from the status the resource has. Returns `None` when nothing
/// would change, so that the caller skips the write (no status writes in a steady state).
pub fn status_after(
    old: Option<&ResourceStatus>,
    verdict: &Verdict,
    generation: i64,
    now: Timestamp,
) -> Option<ResourceStatus> {
    let old = old.cloned().unwrap_or_default();
    let mut new = old.clone();
    let fields = &verdict.fields;
    if let Some(client_id) = &fields.client_id {
        new.client_id = Some(client_id.clone());
    }
    if let Some(revision) = &fields.revision {
        new.revision = Some(revision.clone());
    }
    if let Some(slug) = &fields.slug {
        new.slug = Some(slug.clone());
    }
    if let Some(generation_in_force) = fields.generation_in_force {
        new.generation_in_force = Some(generation_in_force);
    }
    match &fields.secret_ref {
        Update::Keep => {}
        Update::Clear => new.secret_ref = None,
        Update::Set(secret_ref) => new.secret_ref = Some(secret_ref.clone()),
    }
    if fields.secret_set {
        new.secret_set_time = Some(Time(now));
    }
    if let Some(version) = &fields.secret_version {
        new.secret_version = Some(version.clone());
    }
    if let Some(superseded) = &fields.last_drift {
        new.last_drift = Some(Box::new(SupersededDrift {
            superseded_at: Some(Time(now)),
            ..superseded.clone()
        }));
    }
    if let Some(restore) = &fields.last_restore {
        new.last_restore = Some(Box::new(RestoreRecord {
            completed_at: Some(Time(now)),
            ..restore.clone()
        }));
    }
    if let Some(rotation) = &fields.last_rotation {
        new.last_rotation = Some(Box::new(RotationRecord {
            time: Some(Time(now)),
            ..rotation.clone()
        }));
    }
    match &fields.next_rotation {
        Update::Keep => {}
        Update::Clear => new.next_rotation = None,
        Update::Set(at) => new.next_rotation = Some(Time(*at)),
    }
    match &fields.drift {
        DriftUpdate::Keep => {}
        DriftUpdate::Clear => new.drift = None,
        DriftUpdate::Set(report) => {
            // Keep when it was first noticed while the same change stands.
            let detected_at = match &old.drift {
                Some(previous)
                    if previous.server_revision == report.server_revision
                        && previous.removed == report.removed =>
                {
                    previous.detected_at.clone()
                }
                _ => Some(Time(now)),
            };
            let mut drift = report.clone();
            drift.detected_at = detected_at;
            new.drift = Some(Box::new(drift));
        }
    }
    if let Some(approval) = &fields.approval {
        new.approval = Some(Box::new(approval.clone()));
    }
    // A hold lasts as long as the verdicts that say so, and so does another manager's claim.
    new.policy = fields.policy.clone().map(Box::new);
    new.managed_elsewhere = fields.managed_elsewhere.clone().map(Box::new);
    if let Some(record) = &fields.last_take_over {
        new.last_take_over = Some(Box::new(TakeOverRecord {
            completed_at: Some(Time(now)),
            ..record.clone()
        }));
    }
    if let Some(record) = &fields.last_workload_restart {
        new.last_workload_restart = Some(Box::new(
            nauthera_shared::resources::WorkloadRestartRecord {
                completed_at: Some(Time(now)),
                ..record.clone()
            },
        ));
    }
    match &fields.observed {
        // What the server holds while nothing of this resource's is in force there: the
        // revision and generation recorded before (under Manage) no longer say what holds.
        Update::Set(object) => {
            // The time it was read stays while the server holds the same.
            let observed_at = match old.observed.as_deref() {
                Some(previous) if same_read(previous, object) => previous.observed_at.clone(),
                _ => Some(Time(now)),
            };
            new.observed = Some(Box::new(ServerObject {
                observed_at,
                ..object.clone()
            }));
            if fields.revision.is_none() {
                new.revision = None;
                new.generation_in_force = None;
                new.drift = None;
            }
        }
        Update::Clear => new.observed = None,
        // Managed from now on: what was observed before no longer holds.
        Update::Keep if fields.revision.is_some() => new.observed = None,
        Update::Keep => {}
    }
    if let Some(record) = &fields.last_adoption {
        new.last_adoption = Some(Box::new(AdoptionRecord {
            completed_at: Some(Time(now)),
            ..record.clone()
        }));
    }
    if verdict.record_attempt {
        new.last_attempt_time = Some(Time(now));
    }
    new.observed_generation = Some(generation);
    new.phase = Some(verdict.reason.phase(verdict.retried));
    new.reason = Some(verdict.reason);
    new.message = Some(verdict.message.clone());
    new.cause = Some(verdict.cause).filter(|cause| *cause != Cause::None);
    new.server_reason = verdict.server_reason;
    let conditions = reason_conditions(
        verdict.reason,
        verdict.cause,
        verdict.message.clone(),
        Some(generation),
        Time(now),
    );
    set_conditions(&mut new.conditions, conditions);
    (new != old).then_some(new)
}

/// Whether two reads found the object as it was (whenever each was made).
fn same_read(a: &ServerObject, b: &ServerObject) -> bool {
    let unread = |object: &ServerObject| ServerObject {
        observed_at: None,
        ..object.clone()
    };
    unread(a) == unread(b)
}

/// The field updates a verdict carries; `None` keeps the field as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldUpdates {
    pub client_id: Option<String>,
    pub slug: Option<String>,
    pub revision: Option<String>,
    pub generation_in_force: Option<i64>,
    /// The Secret the generated secret in force is delivered into.
    pub secret_ref: Update<nauthera_shared::resources::LocalRef>,
    /// The version of the referenced Secret whose value was sent.
    pub secret_version: Option<String>,
    /// The client secret in force was set now (delivered, or the team's value sent).
    pub secret_set: bool,
    pub drift: DriftUpdate,
    /// The restore request this verdict carried out.
    pub last_restore: Option<RestoreRecord>,
    /// The rotation this verdict delivered (on request or on schedule).
    pub last_rotation: Option<RotationRecord>,
    /// When the schedule rotates the secret next (whole seconds, as the status keeps time).
    pub next_rotation: Update<Timestamp>,
    /// The drift this verdict's write superseded.
    pub last_drift: Option<SupersededDrift>,
    /// The ClientPolicy rule that holds the generation back; any other verdict clears it.
    pub policy: Option<PolicyHold>,
    /// What a write under an approval policy carried of the fields it lists.
    pub approval: Option<ApprovalRecord>,
    /// The reconciler that manages the object elsewhere; any other verdict clears it.
    pub managed_elsewhere: Option<ManagedElsewhere>,
    /// The handover this verdict's write carried out.
    pub last_take_over: Option<TakeOverRecord>,
    /// The restart of the workloads that read a Secret holding a new client secret.
    pub last_workload_restart: Option<nauthera_shared::resources::WorkloadRestartRecord>,
    /// What the server holds of an object this resource observes or waits to adopt. Set, it
    /// also clears the revision and generation recorded (unless the verdict records one);
    /// kept, it is cleared by any verdict that records a revision.
    pub observed: Update<ServerObject>,
    /// The adoption this verdict carried out.
    pub last_adoption: Option<AdoptionRecord>,
}

/// The status after a restore request found nothing drifted: the request is answered, nothing
/// else changes.
pub fn restore_not_needed(
    old: Option<&ResourceStatus>,
    request: Option<String>,
    requested_by: Option<String>,
    now: Timestamp,
) -> ResourceStatus {
    let mut status = old.cloned().unwrap_or_default();
    status.last_restore = Some(Box::new(RestoreRecord {
        request,
        requested_by,
        outcome: RestoreOutcome::NotDrifted,
        revision: None,
        overwritten_revision: None,
        completed_at: Some(Time(now)),
    }));
    status
}

/// What happens to a status field that a verdict may set or clear.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Update<T> {
    #[default]
    Keep,
    Clear,
    Set(T),
}

/// What happens to `status.drift`.
pub type DriftUpdate = Update<nauthera_shared::resources::Drift>;

/// One Kubernetes event to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventNote {
    pub reason: EventReason,
    pub note: String,
}

/// The events a verdict records: its own (applied, secret delivered, restored, deletion
/// outcomes) and the transition into a new reason or message. The same reason and message again
/// records nothing, so a retried failure does not flood the resource's events. A write that puts
/// the declared generation in force is one event: `Registered` when the resource enters it (its
/// note the write's), `Applied` when it was registered already (the message moved only because
/// the revision did).
pub fn events_for(old: Option<&ResourceStatus>, verdict: &Verdict) -> Vec<EventNote> {
    let mut events = verdict.events.clone();
    let old_reason = old.and_then(|s| s.reason);
    let old_message = old.and_then(|s| s.message.as_deref());
    let transition =
        old_reason != Some(verdict.reason) || old_message != Some(verdict.message.as_str());
    let event = verdict.reason.event();
    if !transition || events.iter().any(|e| e.reason == event) {
        return events;
    }
    let applied = events.iter_mut().find(|e| e.reason == EventReason::Applied);
    match applied {
        Some(applied) if event == EventReason::Registered => {
            if old_reason != Some(Reason::Registered) {
                applied.reason = EventReason::Registered;
            }
        }
        _ => events.push(EventNote {
            reason: event,
            note: verdict.message.clone(),
        }),
    }
    events
}

#[cfg(test)]
mod tests;
