//! Objects somebody else wrote: held until a person adopts them (`nauthera.io/adopt`), and
//! taken at exactly the revision named (or the one `managementPolicy: Observe` showed).

use nauthera_shared::catalog::{Cause, EventReason, Reason};
use nauthera_shared::resources::{AdoptSecret, AdoptedSecret, AdoptionRecord, ServerObject};
use nauthera_shared::{ADOPT_ANNOTATION, ADOPT_SECRET_ANNOTATION};

use super::observe::{describe_differences, describe_object};
use super::{
    Applied, DriftReport, DriftUpdate, EventNote, SecretMode, SecretState, Update, Verdict, drifted,
};

/// `nauthera.io/adopt` on a resource: the revision a person adopts, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdoptRequest {
    /// The revision named.
    pub revision: String,
    /// `nauthera.io/adopt-secret` (`Replace` when absent); `Err` with the value when it is
    /// neither `Replace` nor `Keep`.
    pub secret: Result<AdoptSecret, String>,
    /// The field manager that set the annotation, as the managedFields record it.
    pub requested_by: Option<String>,
}

/// Why an adoption asked for is not carried out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdoptRefusal {
    /// The annotation names another revision than the server holds (as last read).
    Mismatch { named: String },
    /// `nauthera.io/adopt-secret` holds neither `Replace` nor `Keep`.
    SecretChoice { value: String },
    /// The adoption would mint a new generated secret, but the Secret it goes into cannot take
    /// it: another owner's (`owner`, or none: a Secret released by an earlier manifest), or one
    /// the reconciler may not read (`forbidden`). Minting then would replace the secret the
    /// server's users hold with one nobody receives.
    SecretUnavailable {
        secret: String,
        owner: Option<String>,
        forbidden: bool,
    },
}

/// The command that adopts the object, as messages name it.
pub fn adopt_command(kind: &str, name: &str, namespace: &str) -> String {
    format!("kubectl nauthera adopt {kind}/{name} -n {namespace}")
}

/// A Manage manifest for an object the server holds, last written by a person or a tool that
/// is not a reconciler of manifests: held, never written over, until a person adopts it.
pub fn adoption_required(object: ServerObject, command: &str) -> Verdict {
    let message = format!(
        "the server already holds this object, and this resource never wrote it: {}; {}; not \
         written over: `{command}` adopts it (annotates {ADOPT_ANNOTATION}={})",
        describe_object(&object),
        describe_differences(&object),
        object.revision
    );
    held(Cause::ForeignObject, message, object)
}

/// An adoption a person asked for that is not carried out: nothing is written.
pub fn adoption_refused(object: ServerObject, refusal: &AdoptRefusal, command: &str) -> Verdict {
    match refusal {
        AdoptRefusal::Mismatch { named } => {
            let message = format!(
                "{ADOPT_ANNOTATION} names revision {named}, but the server holds {}; nothing \
                 written: look at what it holds now and adopt that revision (`{command}`)",
                describe_object(&object)
            );
            held(Cause::RevisionMismatch, message, object)
        }
        AdoptRefusal::SecretChoice { value } => {
            let message = format!(
                "{ADOPT_SECRET_ANNOTATION} is {value:?}, which is neither Replace nor Keep; \
                 nothing written: set it to Replace (mint a new secret) or Keep (keep the one the \
                 server holds), or remove it; the server holds {}",
                describe_object(&object)
            );
            held(Cause::ForeignObject, message, object)
        }
        AdoptRefusal::SecretUnavailable {
            secret,
            owner,
            forbidden,
        } => {
            let why = match (forbidden, owner) {
                (true, _) => "the reconciler may not read it".to_owned(),
                (false, Some(owner)) => format!("it is owned by {owner}"),
                (false, None) => "it has no owner (released by an earlier manifest, or made by \
                    hand)"
                    .to_owned(),
            };
            let message = format!(
                "adopting would mint a new client secret into Secret {secret}, but {why}; nothing \
                 written and the secret the server holds is unchanged: delete or rename that \
                 Secret, set spec.secret.secretName, or adopt keeping the server's secret \
                 ({ADOPT_SECRET_ANNOTATION}=Keep); the server holds {}",
                describe_object(&object)
            );
            held(Cause::ForeignSecret, message, object)
        }
    }
}

/// Whether an adoption may mint a generated secret into its Secret, from what the Secret holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MintCheck {
    /// The Secret is free for it (absent, or this resource's own).
    Free,
    /// The Secret was not read yet: read it first.
    ReadFirst,
    /// The Secret cannot take it: nothing is minted.
    Refused(AdoptRefusal),
}

/// Whether an adoption that mints a generated secret into `secret_name` may go ahead.
pub fn mint_check(secret_name: &str, state: &SecretState) -> MintCheck {
    let refused = |owner: Option<String>, forbidden| {
        MintCheck::Refused(AdoptRefusal::SecretUnavailable {
            secret: secret_name.to_owned(),
            owner,
            forbidden,
        })
    };
    match state {
        SecretState::Unknown => MintCheck::ReadFirst,
        SecretState::Forbidden => refused(None, true),
        SecretState::Foreign { owner } => refused(owner.clone(), false),
        SecretState::Released { .. } => refused(None, false),
        SecretState::NotApplicable
        | SecretState::Absent
        | SecretState::Owned { .. }
        | SecretState::OtherShape => MintCheck::Free,
    }
}

fn held(cause: Cause, message: String, object: ServerObject) -> Verdict {
    let mut verdict = Verdict::new(Reason::AdoptionRequired, cause, message);
    verdict.fields.observed = Update::Set(object);
    verdict.fields.drift = DriftUpdate::Clear;
    verdict
}

/// What an adoption writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdoptionPlan {
    /// One write over the adopted revision; none when the manifest declares what the server
    /// holds and no secret must be sent.
    pub write: bool,
    /// The write mints a new generated secret.
    pub rotate: bool,
    /// The write sends the team's secret (`secretRef`).
    pub send_provided: bool,
    pub secret: AdoptedSecret,
}

/// What adopting an object takes: `differs` when the manifest declares something else than
/// the server holds.
pub fn adoption_plan(differs: bool, mode: &SecretMode, secret: AdoptSecret) -> AdoptionPlan {
    let (rotate, send_provided, adopted) = match (mode, secret) {
        (SecretMode::Generate { .. }, AdoptSecret::Replace) => (true, false, AdoptedSecret::Minted),
        (SecretMode::Generate { .. }, AdoptSecret::Keep) => (false, false, AdoptedSecret::Kept),
        (SecretMode::Provided, AdoptSecret::Replace) => (false, true, AdoptedSecret::Provided),
        (SecretMode::Provided, AdoptSecret::Keep) => (false, false, AdoptedSecret::Kept),
        (SecretMode::None, _) => (false, false, AdoptedSecret::None),
    };
    AdoptionPlan {
        write: differs || rotate || send_provided,
        rotate,
        send_provided,
        secret: adopted,
    }
}

/// The record of an adoption of `object` (its revision in force afterwards filled in by the
/// verdict).
pub fn adoption_record(
    object: &ServerObject,
    secret: AdoptedSecret,
    requested_by: Option<String>,
) -> AdoptionRecord {
    AdoptionRecord {
        from_revision: object.revision.clone(),
        from_actor: object.actor.clone().filter(|a| !a.is_empty()),
        from_manager: object.manager.clone().filter(|m| !m.is_empty()),
        revision: object.revision.clone(),
        written: false,
        secret,
        requested_by,
        completed_at: None,
    }
}

/// The manifest declares what the server holds and no secret is sent: adopted without a
/// write, the revision held taken as the one in force for the declared generation.
pub fn adopted_in_place(
    held: &Applied,
    generation: i64,
    object: &ServerObject,
    record: AdoptionRecord,
) -> Verdict {
    let mut verdict = Verdict::new(
        Reason::Registered,
        Cause::None,
        format!(
            "generation {generation} is in force as revision {} (adopted from {} without a \
             write: the manifest declares what the server held)",
            held.revision,
            object.writer()
        ),
    );
    verdict.fields.client_id = Some(held.client_id.clone()).filter(|id| !id.is_empty());
    verdict.fields.revision = Some(held.revision.clone());
    verdict.fields.generation_in_force = Some(generation);
    verdict.fields.drift = DriftUpdate::Clear;
    with_adoption(verdict, object, record)
}

/// A verdict of the write (or none) that adopted the object: the record, the `Adopted` event,
/// and `status.observed` cleared. A write that did not go through (its verdict records no
/// revision) is returned as it is.
pub fn with_adoption(
    mut verdict: Verdict,
    object: &ServerObject,
    mut record: AdoptionRecord,
) -> Verdict {
    let Some(revision) = verdict.fields.revision.clone() else {
        return verdict;
    };
    record.written = revision != record.from_revision;
    record.revision = revision.clone();
    let written = if record.written {
        format!("the declared state was written over it as revision {revision}")
    } else {
        "nothing was written: the manifest declares what the server held".to_owned()
    };
    let secret = match record.secret {
        AdoptedSecret::None => "",
        AdoptedSecret::Minted => "; a new client secret was minted and delivered",
        AdoptedSecret::Kept => {
            "; the client secret the server held was kept (none is delivered until a rotation)"
        }
        AdoptedSecret::Provided => "; the team's secret (secretRef) was sent",
    };
    let requested = record
        .requested_by
        .as_deref()
        .map(|by| format!(" on the request of {by}"))
        .unwrap_or_else(|| " from managementPolicy Observe".to_owned());
    verdict.events.push(EventNote {
        reason: EventReason::Adopted,
        note: format!(
            "adopted revision {} from {}{requested}: {written}{secret}",
            record.from_revision,
            object.writer()
        ),
    });
    verdict.fields.last_adoption = Some(record);
    verdict.fields.observed = Update::Clear;
    verdict
}

/// A handover from `managementPolicy: Observe` found the server moved on from the revision
/// the status showed: nothing is written over; the change is reported as a drift.
pub fn handover_overtaken(shown: &ServerObject, now_held: &ServerObject) -> Verdict {
    let report = DriftReport {
        server_revision: now_held.revision.clone(),
        removed: false,
        changed_at: now_held.written_at.as_ref().map(|t| t.0),
        manager: now_held.manager.clone().filter(|m| !m.is_empty()),
        actor: now_held.actor.clone().filter(|a| !a.is_empty()),
        fields: now_held.differences.clone(),
        backup_restore: false,
    };
    let mut verdict = drifted(&report, Some(shown.revision.as_str()));
    verdict.message = format!(
        "handed over from managementPolicy Observe at revision {}, but {}",
        shown.revision, verdict.message
    );
    verdict
}

#[cfg(test)]
mod tests;
