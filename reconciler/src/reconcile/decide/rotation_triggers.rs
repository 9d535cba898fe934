//! What starts a rotation of a generated secret other than a lost Secret: a person's request
//! (`nauthera.io/rotate`) and the schedule (`spec.secret.rotation`), and what is recorded of each.
//! A request is carried out once: the nonce it came with is written onto the delivered Secret
//! with the new value, so a retry after a lost answer or a failed clean-up sees it done.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nauthera_shared::resources::{Planned, ResourceStatus, RotationOutcome, RotationRecord};

use nauthera_shared::catalog::Reason;

use super::{Rotation, Step, Update, Verdict};

/// A rotation asked for with `nauthera.io/rotate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotationRequest {
    /// The annotation's value, the request's nonce.
    pub request: String,
    /// The field manager that set the annotation, as the managedFields record it.
    pub requested_by: Option<String>,
    /// When it set it.
    pub requested_at: Option<Timestamp>,
}

/// Where the schedule stands for the secret in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledRotation {
    /// `spec.secret.rotation.every`, as declared.
    pub every: String,
    pub planned: Planned,
}

impl ScheduledRotation {
    /// The instant `status.nextRotation` names: now when due.
    pub fn next(&self, now: Timestamp) -> Timestamp {
        match self.planned {
            Planned::Due => now,
            Planned::At(at) => at,
        }
    }
}

/// A delivered rotation is recorded in `status.lastRotation`: the request it carried out (or
/// the schedule), and who asked. A rotation for another reason (a deleted Secret) while a
/// request waits carries the request out as well: its new secret is delivered.
pub fn with_rotation_recorded(
    mut verdict: Verdict,
    rotation: Option<&Rotation>,
    request: Option<&RotationRequest>,
) -> Verdict {
    if !verdict.fields.secret_set {
        return verdict;
    }
    let record = match (request, rotation) {
        (Some(request), _) => RotationRecord {
            request: Some(request.request.clone()),
            requested_by: request.requested_by.clone(),
            outcome: RotationOutcome::Requested,
            time: None,
        },
        (None, Some(Rotation::Scheduled { .. })) => RotationRecord {
            outcome: RotationOutcome::Scheduled,
            ..RotationRecord::default()
        },
        _ => return verdict,
    };
    verdict.fields.last_rotation = Some(record);
    verdict
}

/// The status after a rotation request is answered without a new secret: carried out already
/// (its secret is in the Secret; an answer lost on the way), or not possible here (the secret
/// is not generated). `None` when the status records the answer already.
pub fn rotation_answered(
    old: Option<&ResourceStatus>,
    request: &RotationRequest,
    generated: bool,
    now: Timestamp,
) -> Option<ResourceStatus> {
    let mut status = old.cloned().unwrap_or_default();
    let recorded = status
        .last_rotation
        .as_ref()
        .is_some_and(|last| last.request.as_deref() == Some(request.request.as_str()));
    if recorded {
        return None;
    }
    status.last_rotation = Some(Box::new(RotationRecord {
        request: Some(request.request.clone()),
        requested_by: request.requested_by.clone(),
        outcome: if generated {
            RotationOutcome::Requested
        } else {
            RotationOutcome::NotGenerated
        },
        time: Some(Time(now)),
    }));
    Some(status)
}

#[cfg(test)]
mod tests;

/// Whether a reconcile must follow at once: a rotation request waits, and the step just taken
/// came before the decision that carries it out and settled the resource without carrying it
/// out. A drift check (made because the listing lagged behind the server) that found the server
/// as written; a write of the declared state without a rotation; or a rotation's write that met
/// a conflict and found the server holding this reconciler's own earlier write (a term that ended
/// between the server minting and the Secret being written, or an answer lost), adopted without
/// a new secret, while the Secret still holds the value before it; or a delivery of a secret
/// minted before the request came. Nothing else would bring the reconcile that answers the
/// request: no watch event follows the reconciler's own status write, and the listing catching
/// up with its own write routes nowhere.
pub fn rotation_waits_after(
    step: &Step,
    request: Option<&RotationRequest>,
    verdict: &Verdict,
) -> bool {
    let Some(request) = request else {
        return false;
    };
    let before_rotation = matches!(
        step,
        Step::CheckDrift | Step::Apply { .. } | Step::LookBeforeCreate | Step::DeliverSecret
    );
    let answered = verdict
        .fields
        .last_rotation
        .as_ref()
        .is_some_and(|record| record.request.as_deref() == Some(request.request.as_str()));
    before_rotation
        && !answered
        && !verdict.retried
        && verdict.reason == Reason::Registered
        && !matches!(verdict.fields.drift, Update::Set(_))
}
