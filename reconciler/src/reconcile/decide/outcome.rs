//! What the outcome of a step means: the reason, cause, message, field updates and events.

use std::borrow::Cow;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nauthera_client::causes::{cause_of_connect, cause_of_error};
use nauthera_client::{CallError, ConnectError, ServerError};
use nauthera_shared::RESTORE_ANNOTATION;
use nauthera_shared::branding::BrandingError;
use nauthera_shared::catalog::{Cause, EventReason, Reason, ServerReason};
use nauthera_shared::resources::{Drift, LocalRef, RestoreOutcome, RestoreRecord, SupersededDrift};

use super::{
    DriftUpdate, EventNote, FieldUpdates, Manifest, Missing, Rotation, SecretMode, Update,
};

/// What a step's outcome means for the resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub reason: Reason,
    /// The bounded `cause` label.
    pub cause: Cause,
    /// The stable reason of the server's answer this verdict comes from, if any.
    pub server_reason: Option<ServerReason>,
    /// The condition message. Never carries a secret.
    pub message: String,
    /// The reconciler retries on its own, with backoff.
    pub retried: bool,
    /// Look again with backoff even though the failure waits for a person (a foreign Secret, a
    /// missing referenced Secret): what fixes it is not a change the reconciler is told about.
    pub keep_trying: bool,
    /// Record `status.lastAttemptTime`: a write the server refused, which is sent again after
    /// five minutes. Retried failures and reads do not record it, so they write no status.
    pub record_attempt: bool,
    pub fields: FieldUpdates,
    /// Events of the step itself (the transition's event is added by `events_for`).
    pub events: Vec<EventNote>,
}

impl Verdict {
    pub(super) fn new(reason: Reason, cause: Cause, message: String) -> Verdict {
        Verdict {
            reason,
            cause,
            server_reason: None,
            message,
            retried: false,
            keep_trying: false,
            record_attempt: false,
            fields: FieldUpdates::default(),
            events: Vec::new(),
        }
    }

    fn event(mut self, reason: EventReason, note: impl Into<String>) -> Verdict {
        self.events.push(EventNote {
            reason,
            note: note.into(),
        });
        self
    }

    /// The verdict with its message and event notes [`printable`], as status, events and log
    /// lines take them; borrowed when they are already.
    pub fn printable(&self) -> Cow<'_, Verdict> {
        let plain = |text: &str| matches!(printable(text), Cow::Borrowed(_));
        if plain(&self.message) && self.events.iter().all(|e| plain(&e.note)) {
            return Cow::Borrowed(self);
        }
        let mut verdict = self.clone();
        verdict.message = printable(&self.message).into_owned();
        for event in &mut verdict.events {
            event.note = printable(&event.note).into_owned();
        }
        Cow::Owned(verdict)
    }
}

/// A text fit for a status message, an event or a log line: control characters (C0, DEL, C1)
/// and bidirectional formatting characters, which terminals and pages act on, written as
/// escapes (`\n`, `\u{1b}`). Messages quote what the server answered and what manifests hold
/// (an issuer, a claim name), and neither is sure to be printable.
pub fn printable(text: &str) -> Cow<'_, str> {
    let bidi = |c: char| {
        matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    let acted_on = |c: char| c.is_control() || bidi(c);
    if !text.chars().any(acted_on) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if acted_on(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A written client, as `ApplyClient` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub client_id: String,
    pub revision: String,
    pub generation_in_force: i64,
    pub created: bool,
}

/// Why a minted secret could not be written into its Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretWriteFailure {
    /// A Secret of that name exists and this resource does not own it.
    Foreign { owner: Option<String> },
    /// Kubernetes RBAC forbids the write.
    Forbidden { message: String },
    /// Any other failure; retried.
    Other { message: String },
}

/// The outcome of a write of the declared state, with the delivery of a minted secret when one
/// came back (`delivery: None` when there was nothing to deliver). `rotation`: why the write
/// minted a new secret (a rotation of a secret workloads held is told by [`super::rotated`]).
pub fn after_apply(
    applied: &Applied,
    secret_name: Option<&str>,
    delivery: Option<Result<(), SecretWriteFailure>>,
    restore: bool,
    rotation: Option<&Rotation>,
) -> Verdict {
    let mut applied_note = format!(
        "{} generation {} as revision {}",
        if applied.created {
            "registered"
        } else {
            "wrote"
        },
        applied.generation_in_force,
        applied.revision,
    );
    if !applied.client_id.is_empty() {
        applied_note.push_str(&format!(" (client id {})", applied.client_id));
    }
    let mut verdict = match (delivery, secret_name) {
        (Some(Err(failure)), Some(name)) => after_secret_failure(&failure, name),
        // A first secret is told with the write; one that replaces another in its own event.
        (Some(Ok(())), Some(name)) if rotation.is_none() => {
            applied_note.push_str(&format!("; wrote the client secret into Secret {name}"));
            in_force(applied.generation_in_force, &applied.revision, restore).with_secret_ref(name)
        }
        (Some(Ok(())), Some(name)) => {
            let note = if rotation == Some(&Rotation::NeverDelivered) {
                format!(
                    "minted a new client secret and wrote it into Secret {name}: the one minted \
                     before was lost undelivered (a restart, or an answer lost on its way back)"
                )
            } else if rotation == Some(&Rotation::Adopted) {
                format!(
                    "minted a new client secret with the adoption and wrote it into Secret \
                     {name}: the server no longer accepts the one it held before"
                )
            } else {
                format!("wrote the client secret into Secret {name}")
            };
            in_force(applied.generation_in_force, &applied.revision, restore)
                .event(EventReason::SecretDelivered, note)
                .with_secret_ref(name)
        }
        _ => in_force(applied.generation_in_force, &applied.revision, restore),
    };
    verdict.fields.client_id = Some(applied.client_id.clone()).filter(|id| !id.is_empty());
    verdict.fields.revision = Some(applied.revision.clone());
    verdict.fields.generation_in_force = Some(applied.generation_in_force);
    verdict.fields.drift = DriftUpdate::Clear;
    verdict.events.insert(
        0,
        EventNote {
            reason: EventReason::Applied,
            note: applied_note,
        },
    );
    verdict
}

impl Verdict {
    /// The generated secret in force is in this Secret (delivered earlier).
    fn with_secret_ref_kept(mut self, name: &str) -> Verdict {
        self.fields.secret_ref = Update::Set(LocalRef {
            name: name.to_owned(),
        });
        self
    }

    /// The generated secret was delivered into this Secret, now.
    fn with_secret_ref(mut self, name: &str) -> Verdict {
        self.fields.secret_ref = Update::Set(LocalRef {
            name: name.to_owned(),
        });
        self.fields.secret_set = true;
        self
    }
}

/// The declared generation is in force (after a write, a delivery, or a drift check that found
/// nothing changed).
pub fn in_force(generation: i64, revision: &str, restore: bool) -> Verdict {
    if restore {
        Verdict::new(
            Reason::Restored,
            Cause::None,
            format!(
                "restored: the declared generation {generation} is in force again as revision \
                 {revision}"
            ),
        )
    } else {
        Verdict::new(
            Reason::Registered,
            Cause::None,
            format!("generation {generation} is in force as revision {revision}"),
        )
    }
}

/// A restore's verdict says who asked for it; and when the restore had to create the client
/// again and the server gave it a new id, a Warning says so, with both ids (never a secret), as
/// the applications configured with the old id stop working.
pub fn restore_told(
    mut verdict: Verdict,
    requested_by: Option<&str>,
    previous_client_id: Option<&str>,
    applied: &Applied,
) -> Verdict {
    if let Some(requester) = requested_by {
        verdict.message = format!("{} (requested by {requester})", verdict.message);
    }
    let new_id = applied.client_id.as_str();
    if let Some(old_id) = previous_client_id.filter(|old| applied.created && *old != new_id) {
        verdict = verdict.event(
            EventReason::ClientIdChanged,
            format!(
                "the restore created the client again and the server gave it client id \
                 {new_id} (it was {old_id}): give the new id to every application configured \
                 with the old one"
            ),
        );
    }
    verdict
}

/// A restore written: who asked is told ([`restore_told`]), and the request is recorded as
/// answered by the revision written over the drifted one (`overwritten`).
pub fn restored(
    verdict: Verdict,
    request: Option<String>,
    requested_by: Option<String>,
    previous_client_id: Option<&str>,
    applied: &Applied,
    overwritten: Option<&str>,
) -> Verdict {
    let mut verdict = restore_told(
        verdict,
        requested_by.as_deref(),
        previous_client_id,
        applied,
    );
    verdict.fields.last_restore = Some(RestoreRecord {
        request,
        requested_by,
        outcome: RestoreOutcome::Restored,
        revision: Some(applied.revision.clone()),
        overwritten_revision: Some(overwritten.unwrap_or_default().to_owned()),
        completed_at: None,
    });
    verdict
}

/// A write keeps the organization the server placed the object in (its slug); an empty one is
/// none.
pub fn in_organization(mut verdict: Verdict, organization: String) -> Verdict {
    verdict.fields.slug = Some(organization).filter(|s| !s.is_empty());
    verdict
}

/// The minted secret held in memory was written into its Secret.
pub fn secret_delivered(generation: i64, revision: &str, secret_name: &str) -> Verdict {
    in_force(generation, revision, false)
        .event(
            EventReason::SecretDelivered,
            format!("wrote the client secret into Secret {secret_name}"),
        )
        .with_secret_ref(secret_name)
}

/// The minted secret could not be written; it is kept in memory and the write retried.
pub fn after_secret_failure(failure: &SecretWriteFailure, secret_name: &str) -> Verdict {
    let (cause, retried, detail) = match failure {
        SecretWriteFailure::Foreign { owner } => (
            Cause::ForeignSecret,
            false,
            format!(
                "Secret {secret_name} exists and is not owned by this resource ({}); it is never \
                 written over: delete or rename it, or set spec.secret.secretName",
                owner
                    .as_deref()
                    .map_or_else(|| "it has no owner".to_owned(), |o| format!("owner {o}"))
            ),
        ),
        // Retried on its own (phase Pending) until the role allows the write.
        SecretWriteFailure::Forbidden { message } => (
            Cause::Forbidden,
            true,
            format!(
                "writing Secret {secret_name} is forbidden: {message}; grant the reconciler get, \
                 create and patch on secrets"
            ),
        ),
        SecretWriteFailure::Other { message } => (
            Cause::Transient,
            true,
            format!("writing Secret {secret_name} failed: {message}; retried with backoff"),
        ),
    };
    let mut verdict = Verdict::new(
        Reason::SecretUndeliverable,
        cause,
        format!("the client secret is minted but undelivered: {detail}"),
    );
    verdict.retried = retried;
    verdict.keep_trying = true;
    verdict
}

/// The Secret a generated secret goes into may not be read: the reconciler cannot tell whether
/// the client secret is delivered, nor deliver it. Retried until the permission is back.
pub fn secret_unreadable(secret_name: &str) -> Verdict {
    let mut verdict = Verdict::new(
        Reason::SecretUndeliverable,
        Cause::Forbidden,
        format!(
            "reading Secret {secret_name} is forbidden, so whether it holds the client secret \
             cannot be told; grant the reconciler get, list, watch, create and patch on secrets"
        ),
    );
    verdict.retried = true;
    verdict.keep_trying = true;
    verdict
}

/// The Secret named by `spec.secret.secretRef` is missing or lacks the key (or may not be read).
pub fn secret_ref_unavailable(
    field: &str,
    name: &str,
    key: &str,
    problem: SecretRefProblem,
) -> Verdict {
    let (cause, detail) = match problem {
        // A reference to a Secret not made yet waits for it, as one to a manifest does.
        SecretRefProblem::Missing => {
            let mut verdict = Verdict::new(
                Reason::Pending,
                Cause::ReferenceNotReady,
                format!(
                    "waiting for Secret {name}, which {field} names and which does not exist; \
                     nothing is sent to the server until it is created with the key {key}"
                ),
            );
            verdict.keep_trying = true;
            return verdict;
        }
        // So does one to a key not put in yet (a Secret written in parts, or by a tool that
        // fills it in later): a change to the Secret wakes the resource.
        SecretRefProblem::NoKey => {
            let mut verdict = Verdict::new(
                Reason::Pending,
                Cause::ReferenceNotReady,
                format!(
                    "waiting for the key {key} in Secret {name}, which {field} names: the Secret \
                     exists without it; nothing is sent to the server until the key is there"
                ),
            );
            verdict.keep_trying = true;
            return verdict;
        }
        SecretRefProblem::EmptyKey => (
            Cause::SecretRefMissing,
            format!("key {key} of Secret {name} is empty; put the secret's value in it"),
        ),
        SecretRefProblem::NotText => (
            Cause::SecretRefMissing,
            format!("key {key} of Secret {name} is not UTF-8 text; a secret is sent as text"),
        ),
        SecretRefProblem::Forbidden => (
            Cause::Forbidden,
            format!("reading Secret {name} is forbidden; grant the reconciler get on secrets"),
        ),
    };
    let mut verdict = Verdict::new(
        Reason::SecretRefUnavailable,
        cause,
        format!("{field}: {detail}; nothing was sent to the server"),
    );
    verdict.keep_trying = true;
    verdict
}

/// Why a referenced Secret could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretRefProblem {
    Missing,
    NoKey,
    /// The key is there with an empty value.
    EmptyKey,
    /// The value is not UTF-8 text.
    NotText,
    Forbidden,
}

/// The refusal text: gRPC code, stable reason in parentheses, cause, field violations and the
/// generation the server keeps in force.
pub fn refusal_message(error: &ServerError, method: &str) -> String {
    let mut message = format!("{method} refused: {:?}", error.code);
    if let Some(reason) = error.reason {
        message.push_str(&format!(" ({reason})"));
    }
    match (&error.cause, error.message.is_empty()) {
        (Some(cause), _) => message.push_str(&format!(": {cause}")),
        (None, false) => message.push_str(&format!(": {}", error.message)),
        (None, true) => {}
    }
    if error.is_unimplemented() {
        message.push_str(&format!(
            "; the server is older than this call ({method}): upgrade the server"
        ));
    }
    for violation in &error.violations {
        message.push_str(&format!("; {}: {}", violation.field, violation.description));
    }
    // Without a stable reason the server said nothing about the generation it keeps (a
    // transient failure, say), so nothing is claimed about it.
    match (error.generation_in_force, error.reason) {
        (Some(generation), _) => message.push_str(&format!("; generation in force: {generation}")),
        (None, Some(_)) => message.push_str("; generation in force: none"),
        (None, None) => {}
    }
    message
}

/// The verdict of a failed call: the control-plane reasons for a connection that could not be
/// made, `Pending` (retried with backoff) for the codes the catalog retries, `Refused` (phase
/// Error, resent on the next edit or after five minutes) for the rest.
pub fn failure_verdict(error: &CallError, method: &str) -> Verdict {
    let mut verdict = match error {
        CallError::Connect(connect) => {
            let reason = match connect {
                ConnectError::Unreachable { .. } => Reason::Unreachable,
                ConnectError::CredentialUnavailable { .. } => Reason::CredentialUnavailable,
                ConnectError::TrustAnchorUnavailable { .. } => Reason::TrustAnchorUnavailable,
            };
            let cause = cause_of_connect(connect.problem());
            let mut verdict = Verdict::new(
                reason,
                cause,
                format!("{method} not sent: {connect}; retried with backoff"),
            );
            verdict.retried = true;
            verdict
        }
        CallError::Server(server) if server.is_retryable() => {
            let mut verdict = Verdict::new(
                Reason::Pending,
                Cause::Transient,
                format!("{}; retried with backoff", refusal_message(server, method)),
            );
            verdict.retried = true;
            verdict
        }
        CallError::Server(server) => {
            let cause = cause_of_error(server.reason, server.code);
            let when = if cause == Cause::ReferenceNotFound {
                "sent again as soon as a manifest it depends on registers, on the next edit, or \
                 after five minutes"
            } else {
                "sent again on the next edit or after five minutes"
            };
            Verdict::new(
                Reason::Refused,
                cause,
                format!("{}; {when}", refusal_message(server, method)),
            )
        }
    };
    if let Some(generation) = error.server().and_then(|s| s.generation_in_force) {
        verdict.fields.generation_in_force = Some(generation);
    }
    verdict.server_reason = error.reason();
    verdict
}

/// The failure of a write; a precondition that no longer holds means something else changed the
/// object: the caller checks the drift instead.
pub fn after_apply_failure(error: &CallError, method: &str) -> Verdict {
    let mut verdict = failure_verdict(error, method);
    verdict.record_attempt = !verdict.retried && error.server().is_some();
    verdict
}

/// Whether a write or delete was refused because the server holds another revision (or none).
pub fn is_conflict(error: &CallError) -> bool {
    matches!(
        error.reason(),
        Some(ServerReason::RevisionMismatch | ServerReason::ManagerConflict)
    )
}

/// A drift check could not be completed: the failure is reported, the drift kept as it was.
pub fn after_drift_check_failure(error: &CallError, method: &str) -> Verdict {
    let mut verdict = failure_verdict(error, method);
    verdict.fields.generation_in_force = None;
    verdict
}

/// A change on the server that the reconciler did not make.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DriftReport {
    /// The revision the server holds; empty when removed.
    pub server_revision: String,
    pub removed: bool,
    pub changed_at: Option<Timestamp>,
    pub manager: Option<String>,
    pub actor: Option<String>,
    /// Differing fields, in the manifest's naming.
    pub fields: Vec<String>,
    /// The server's history restarted (a restore from a backup), not a single edit.
    pub backup_restore: bool,
}

/// The object drifted: reported, never written over.
pub fn drifted(report: &DriftReport, written_revision: Option<&str>) -> Verdict {
    let cause = if report.backup_restore {
        Cause::BackupRestore
    } else if report.removed {
        Cause::Removed
    } else {
        Cause::Edited
    };
    let mut message = if report.removed {
        "removed from the server by something else".to_owned()
    } else {
        format!(
            "changed on the server by something else: it holds revision {}, not {}",
            report.server_revision,
            written_revision.unwrap_or("the one last written")
        )
    };
    if let Some(at) = report.changed_at {
        message.push_str(&format!("; changed at {at}"));
    }
    match (&report.actor, &report.manager) {
        (Some(actor), Some(manager)) if !manager.is_empty() => {
            message.push_str(&format!("; by {actor} (manager {manager})"));
        }
        (Some(actor), _) => message.push_str(&format!("; by {actor}")),
        (None, Some(manager)) if !manager.is_empty() => {
            message.push_str(&format!("; by manager {manager}"));
        }
        _ => {}
    }
    if report.backup_restore {
        message.push_str("; the server's history restarted (a restore from a backup?)");
    }
    if !report.fields.is_empty() {
        message.push_str(&format!(
            "; fields that differ: {}",
            report.fields.join(", ")
        ));
    }
    message.push_str(&format!(
        "; not written over: put the change in the manifest, or annotate {RESTORE_ANNOTATION}=true \
         to write the declared state back"
    ));
    let mut verdict = Verdict::new(Reason::Drifted, cause, message);
    verdict.fields.drift = DriftUpdate::Set(Drift {
        server_revision: report.server_revision.clone(),
        removed: report.removed,
        changed_at: report.changed_at.map(Time),
        manager: report.manager.clone().filter(|m| !m.is_empty()),
        actor: report.actor.clone(),
        fields: report.fields.iter().take(64).cloned().collect(),
        detected_at: None,
    });
    verdict
}

/// The server holds a write by this reconciler's own manager that its status does not record:
/// the answer was lost on the way back, or the process stopped before recording it, or the
/// manifest was deleted with `Orphan` and declared again. Never drift: it is taken as this
/// resource's own write, in force when it holds the declared generation and state, and written
/// over on the next apply otherwise.
pub fn adopted(
    held: &Applied,
    generation: i64,
    matches_declared: bool,
    from: AdoptedFrom,
) -> Verdict {
    let mut verdict = if matches_declared && held.generation_in_force == generation {
        let mut verdict = in_force(generation, &held.revision, false);
        verdict.fields.generation_in_force = Some(generation);
        let client_id = if held.client_id.is_empty() {
            String::new()
        } else {
            format!(", client id {}", held.client_id)
        };
        let how = match from {
            AdoptedFrom::LostAnswer => {
                "this reconciler wrote it, but its answer never arrived".to_owned()
            }
            AdoptedFrom::Orphan => "an orphan re-adopted: a manifest of this name deleted with \
                 deletionPolicy Orphan left it on the server, and this manifest declares it \
                 again; nothing was written"
                .to_owned(),
        };
        verdict.event(
            EventReason::Applied,
            format!(
                "adopted revision {} (generation {generation}{client_id}): {how}",
                held.revision
            ),
        )
    } else {
        let mut verdict = Verdict::new(
            Reason::Pending,
            Cause::None,
            format!(
                "revision {} on the server is this reconciler's own earlier write (generation \
                 {}); generation {generation} is written over it",
                held.revision, held.generation_in_force
            ),
        );
        verdict.retried = true;
        verdict
    };
    verdict.fields.client_id = Some(held.client_id.clone()).filter(|id| !id.is_empty());
    verdict.fields.revision = Some(held.revision.clone());
    verdict.fields.drift = DriftUpdate::Clear;
    verdict
}

/// Where a write of this reconciler's own manager that the status does not record comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdoptedFrom {
    /// This manifest's own write, whose answer was lost (or not recorded before a restart).
    LostAnswer,
    /// A write made before this manifest existed: an earlier manifest of the same name, deleted
    /// with `deletionPolicy: Orphan`.
    Orphan,
}

/// Which of the two a write is, for a manifest that recorded no revision: an object this
/// process orphaned, or a write made before the manifest was created (a second earlier at
/// least, as a creation time is kept to the second), is an earlier manifest's.
pub fn adopted_from(
    recorded_revision: Option<&str>,
    written_at: Option<Timestamp>,
    manifest_created: Option<Timestamp>,
    orphaned_here: bool,
) -> AdoptedFrom {
    if recorded_revision.is_some() {
        return AdoptedFrom::LostAnswer;
    }
    let before = match (written_at, manifest_created) {
        (Some(written), Some(created)) => written.as_second() < created.as_second(),
        _ => false,
    };
    if orphaned_here || before {
        AdoptedFrom::Orphan
    } else {
        AdoptedFrom::LostAnswer
    }
}

/// A released Secret (left by `Orphan` with the client secret the server still accepts) taken
/// back by the manifest that declares its client again: owned by it again, and in its status.
pub fn secret_reclaimed(
    generation: i64,
    revision: &str,
    secret_name: &str,
    client_id: &str,
) -> Verdict {
    in_force(generation, revision, false)
        .event(
            EventReason::SecretDelivered,
            format!(
                "took back Secret {secret_name}, released when the earlier manifest of this name \
                 was deleted with deletionPolicy Orphan: it holds the client secret of client id \
                 {client_id}, which the server still accepts, and is owned by this manifest again"
            ),
        )
        .with_secret_ref_kept(secret_name)
}

/// A drift check found the server holds the revision last written: nothing drifted.
pub fn no_drift(generation: i64, revision: &str) -> Verdict {
    let mut verdict = in_force(generation, revision, false);
    verdict.fields.drift = DriftUpdate::Clear;
    verdict
}

/// What deleting the object on the server came to.
#[derive(Clone, Debug, PartialEq)]
pub enum DeleteOutcome {
    /// Deleted, or already gone.
    Deleted { was_there: bool },
    /// The server holds another revision: looked at before anything is deleted.
    Conflict { held_revision: Option<String> },
}

/// The outcome of carrying out the deletion policy.
pub fn after_delete(outcome: &DeleteOutcome) -> Verdict {
    match outcome {
        DeleteOutcome::Deleted { was_there: true } => Verdict::new(
            Reason::Deleted,
            Cause::None,
            "deletionPolicy Delete: the object was removed from the server".to_owned(),
        ),
        DeleteOutcome::Deleted { was_there: false } => Verdict::new(
            Reason::Deleted,
            Cause::None,
            "deletionPolicy Delete: the server no longer held the object".to_owned(),
        ),
        // Another revision may be this reconciler's own write whose answer was lost: it is
        // looked at first (adopted and then deleted, or reported as drift and left in place).
        DeleteOutcome::Conflict { held_revision } => {
            let mut verdict = Verdict::new(
                Reason::Deleting,
                Cause::RevisionMismatch,
                format!(
                    "deletionPolicy Delete waits: the server holds {} rather than the revision \
                     this resource recorded; looking at who wrote it before deleting; retried \
                     with backoff",
                    match held_revision.as_deref() {
                        Some("") | None => "another revision".to_owned(),
                        Some(revision) => format!("revision {revision}"),
                    }
                ),
            );
            verdict.retried = true;
            verdict.record_attempt = false;
            verdict
        }
    }
}

/// A delete that failed: a retried code keeps the resource `Deleting` (retried with backoff),
/// anything else is reported like any failure (a refusal, an unreachable server).
pub fn after_delete_failure(error: &CallError, method: &str) -> Verdict {
    let mut verdict = failure_verdict(error, method);
    // An organization that still holds objects is deleted once they are gone: retried.
    if verdict.cause == Cause::OrganizationNotEmpty {
        verdict.reason = Reason::Deleting;
        verdict.retried = true;
        verdict.record_attempt = false;
        verdict.message = format!(
            "deletionPolicy Delete waits: {}; retried with backoff",
            error
                .server()
                .map_or_else(|| error.to_string(), |s| refusal_message(s, method))
        );
        return verdict;
    }
    if verdict.reason == Reason::Pending {
        verdict.reason = Reason::Deleting;
        verdict.message = format!(
            "deletionPolicy Delete is being carried out: {}",
            verdict.message
        );
    }
    verdict
}

/// The deletion policy needed no server call: orphaned, drifted, or nothing registered.
pub fn released(reason: Reason) -> Verdict {
    let message = match reason {
        Reason::Orphaned => "deletionPolicy Orphan: the object stays registered on the server",
        Reason::DeletionSkippedDrifted => {
            "deletionPolicy Delete: the object drifted on the server, so it was left in place"
        }
        _ => "nothing was registered on the server, so nothing was deleted",
    };
    let cause = match reason {
        Reason::DeletionSkippedDrifted => Cause::Edited,
        _ => Cause::None,
    };
    Verdict::new(reason, cause, message.to_owned())
}

/// What the read a Delete-policy deletion makes before letting go of a manifest with no
/// revision recorded found on the server.
#[derive(Debug)]
pub enum ReleaseLook {
    /// The server holds nothing of that name.
    Nothing,
    /// The server holds an object: what that means for the resource, as a drift check says it
    /// (an own write whose answer was lost is adopted, and deleted on the next step; anyone
    /// else's is reported and left in place).
    Held(Box<Verdict>),
    /// The read failed.
    Failed(CallError),
}

/// What follows the look: let the manifest go with this verdict, or record the verdict and
/// decide again.
#[derive(Debug, PartialEq)]
pub enum AfterReleaseLook {
    LetGo(Verdict),
    Record(Verdict),
}

/// Nothing recorded means only that no answer was recorded (a status write can be lost): the
/// server is read before the manifest goes, so an own write is deleted rather than left behind.
/// An unreachable or failing server holds the deletion, as it holds any delete; a server that
/// refuses to read the object could not have taken a write of it from this reconciler either.
pub fn after_release_look(look: ReleaseLook, method: &str) -> AfterReleaseLook {
    match look {
        ReleaseLook::Nothing => AfterReleaseLook::LetGo(released(Reason::Deleted)),
        ReleaseLook::Held(verdict) => AfterReleaseLook::Record(*verdict),
        ReleaseLook::Failed(CallError::Server(refusal)) if !refusal.is_retryable() => {
            AfterReleaseLook::LetGo(Verdict::new(
                Reason::Deleted,
                Cause::None,
                format!(
                    "no registration was recorded, and the server refused to read the object \
                     ({}): nothing was deleted",
                    refusal_message(&refusal, method)
                ),
            ))
        }
        ReleaseLook::Failed(error) => {
            AfterReleaseLook::Record(after_delete_failure(&error, method))
        }
    }
}

/// A new generation written over a drift, not on a restore request: the Drifted runbook's rule.
/// Each field the drift changed is compared with what the new generation declares
/// (`still_differs`: the fields in which the server's drifted state differs from it, read before
/// the write; `None` when that could not be read): a field it declares as the server held it is
/// kept, adopted as the declared state (a Normal `DriftAdopted` event); any other is discarded (a
/// Warning `DriftSuperseded` event naming them). Both name who made the change and both
/// revisions, and `status.lastDrift` keeps them.
pub fn superseding_drift(
    mut verdict: Verdict,
    drift: &Drift,
    still_differs: Option<&[String]>,
) -> Verdict {
    let Some(revision) = verdict.fields.revision.clone() else {
        return verdict;
    };
    let generation = verdict.fields.generation_in_force.unwrap_or_default();
    let who = drift.author();
    let when = drift
        .changed_at
        .as_ref()
        .map(|time| format!(" at {}", time.0))
        .unwrap_or_default();
    let kept: Vec<String> = match still_differs {
        Some(differs) if !drift.removed => drift
            .fields
            .iter()
            .filter(|field| !differs.contains(field))
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    let discarded: Vec<&String> = drift.fields.iter().filter(|f| !kept.contains(f)).collect();
    if !kept.is_empty() {
        verdict.events.push(EventNote {
            reason: EventReason::DriftAdopted,
            note: format!(
                "generation {generation} declares what {who} changed on the server{when} \
                 (revision {}): kept and adopted as the declared state: {}; written as revision \
                 {revision}",
                drift.server_revision,
                kept.join(", ")
            ),
        });
    }
    let what = if drift.removed {
        Some("it had removed the object".to_owned())
    } else if drift.fields.is_empty() {
        Some(format!("revision {}", drift.server_revision))
    } else if discarded.is_empty() {
        None
    } else {
        Some(format!(
            "revision {}; discarded: {}",
            drift.server_revision,
            discarded
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    match what {
        Some(what) => verdict.events.push(EventNote {
            reason: EventReason::DriftSuperseded,
            note: format!(
                "generation {generation} was written as revision {revision} over the change \
                 {who} made on the server{when} ({what}); put a change in the manifest to keep it"
            ),
        }),
        // Every change kept: the write is told as such.
        None if verdict.reason == Reason::Registered => verdict.cause = Cause::DriftKept,
        None => {}
    }
    verdict.fields.last_drift = Some(SupersededDrift {
        drift: drift.clone(),
        generation,
        revision,
        kept,
        superseded_at: None,
    });
    verdict
}

/// The Secret at the name a deletion releases, as the deletion finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretHeld {
    /// There is no Secret of that name.
    Absent,
    /// Owned by the manifest being deleted.
    Owned,
    /// Delivered by the reconciler and owned by nothing, not released: the garbage collector
    /// removed its owner reference (a deletion with `--cascade=orphan`).
    OrphanedByCollector,
    /// Somebody else's, or released already.
    Other,
}

/// What a deletion that leaves the object on the server does with the Secret it releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretFate {
    /// Release it: no owner reference, labelled released.
    Release,
    /// Leave it to the garbage collector: the deletion asked for dependents to be deleted
    /// first (`foregroundDeletion`), and the reconciler does not race the collector for it.
    LeaveToCollector,
    /// Nothing there to keep: said, since no copy of the secret stays in the cluster.
    Absent,
    /// Not this manifest's: left alone.
    NotOurs,
}

/// The decision for the Secret a deletion releases; `foreground` when the manifest carries the
/// `foregroundDeletion` finalizer (deleted with `--cascade=foreground`).
pub fn secret_fate(held: SecretHeld, foreground: bool) -> SecretFate {
    match held {
        SecretHeld::Absent => SecretFate::Absent,
        SecretHeld::Other => SecretFate::NotOurs,
        SecretHeld::Owned if foreground => SecretFate::LeaveToCollector,
        SecretHeld::Owned | SecretHeld::OrphanedByCollector => SecretFate::Release,
    }
}

/// What became of the Secret a resource owned, when its object stays on the server (`Orphan`, or
/// a drifted object left in place) and the manifest goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretRelease {
    /// Released: it keeps the client secret the server still accepts.
    Released { secret_name: String },
    /// Left to the garbage collector, which a foreground deletion has delete it.
    LeftToCollector { secret_name: String },
    /// There was no Secret to keep (deleted before the release, or never delivered).
    Absent { secret_name: String },
    /// The release failed: the finalizer stays, so the garbage collector cannot take it.
    Failed {
        secret_name: String,
        forbidden: bool,
        message: String,
    },
}

/// The Secret a deletion releases before the manifest goes: the one a generated secret was
/// delivered into, when the object stays on the server (`Orphan`, or a drifted object left in
/// place) and was registered. Else the garbage collector would take the only copy of a secret
/// the server still accepts.
pub fn secret_to_release(reason: Reason, mode: SecretMode, registered: bool) -> Option<String> {
    let SecretMode::Generate { secret_name } = mode else {
        return None;
    };
    (matches!(reason, Reason::Orphaned | Reason::DeletionSkippedDrifted) && registered)
        .then_some(secret_name)
}

/// The outcome of a deletion that leaves the object on the server, with the Secret's release.
pub fn released_with_secret(reason: Reason, release: &SecretRelease) -> Verdict {
    match release {
        SecretRelease::Released { secret_name } => {
            let mut verdict = released(reason);
            verdict.message = format!(
                "{}; Secret {secret_name} is kept with the client secret the server still \
                 accepts: no longer owned by the manifest, labelled nauthera.io/released=true",
                verdict.message
            );
            verdict
        }
        SecretRelease::LeftToCollector { secret_name } => {
            let mut verdict = released(reason);
            verdict.message = format!(
                "{}; Secret {secret_name} is deleted by the garbage collector, as a foreground \
                 deletion asks for the manifest's dependents: no copy of the client secret the \
                 server still accepts stays in the cluster",
                verdict.message
            );
            verdict
        }
        SecretRelease::Absent { secret_name } => {
            let mut verdict = released(reason);
            verdict.message = format!(
                "{}; Secret {secret_name} no longer exists (a foreground deletion, for one, has \
                 the garbage collector delete it first): no copy of the client secret the server \
                 still accepts stays in the cluster",
                verdict.message
            );
            verdict
        }
        SecretRelease::Failed {
            secret_name,
            forbidden,
            message,
        } => {
            let (cause, hint) = if *forbidden {
                (
                    Cause::Forbidden,
                    "grant the reconciler get and patch on secrets",
                )
            } else {
                (Cause::Transient, "retried with backoff")
            };
            let mut verdict = Verdict::new(
                Reason::Deleting,
                cause,
                format!(
                    "the object stays on the server, so Secret {secret_name} must outlive the \
                     manifest, but releasing it from its owner failed: {message}; the finalizer \
                     stays until it is released ({hint})"
                ),
            );
            verdict.retried = true;
            verdict.record_attempt = false;
            verdict
        }
    }
}

/// A manifest this one depends on is not registered yet: nothing is sent until it is.
pub fn awaiting_prerequisite(manifest: &Manifest) -> Verdict {
    Verdict::new(
        Reason::Pending,
        Cause::ReferenceNotReady,
        format!(
            "waiting for {} to be Registered; nothing is sent to the server until then",
            manifest.describe()
        ),
    )
}

/// The field that names a manifest of this kind, for messages about a missing one.
fn naming_field(manifest: &Manifest) -> &'static str {
    match manifest.kind {
        nauthera_proto::v1::ObjectKind::Branding => "spec.brandingRef",
        _ => "spec.issuer",
    }
}

/// How a missing manifest went, in words: `which does not exist`, or how its deletion ended.
fn how_it_went(missing: &Missing) -> &'static str {
    match missing.went {
        Some(Reason::Deleted) => {
            "which was deleted (deletionPolicy Delete removed it from the server)"
        }
        Some(Reason::Orphaned) => {
            "which was deleted with deletionPolicy Orphan (the server still holds it)"
        }
        Some(Reason::DeletionSkippedDrifted) => {
            "which was deleted (the server kept its drifted object)"
        }
        _ => "which does not exist",
    }
}

/// A manifest this one names does not exist (never applied, or deleted): nothing is sent until
/// it is applied and registered.
pub fn awaiting_missing(missing: &Missing) -> Verdict {
    Verdict::new(
        Reason::Pending,
        Cause::ReferenceNotReady,
        format!(
            "waiting for {}, which {} names and {}; nothing is sent to the server until it is \
             applied and Registered",
            missing.manifest.describe(),
            naming_field(&missing.manifest),
            how_it_went(missing).trim_start_matches("which "),
        ),
    )
}

/// The declared generation is in force, but a manifest it names is gone: said at once, with
/// what the server does with the reference now. Only a `Registered` verdict changes: a failure
/// or a drift says what it says.
pub fn reference_missing(mut verdict: Verdict, missing: &Missing) -> Verdict {
    if verdict.reason != Reason::Registered {
        return verdict;
    }
    let server = match missing.went {
        Some(Reason::Orphaned) | Some(Reason::DeletionSkippedDrifted) => {
            "the server still shows that branding on this client's sign-in pages, but no \
             manifest declares it any more"
        }
        Some(Reason::Deleted) => {
            "the server keeps this client's reference to a branding it no longer holds and \
             shows the organization's default sign-in pages"
        }
        _ => {
            "the server shows the branding of that name if it holds one, else the \
             organization's default sign-in pages"
        }
    };
    verdict.reason = Reason::Pending;
    verdict.cause = Cause::ReferenceNotReady;
    verdict.message = format!(
        "{}; but {} names {}, {}: {server}; apply it again, or remove {}",
        verdict.message,
        naming_field(&missing.manifest),
        missing.manifest.describe(),
        how_it_went(missing),
        naming_field(&missing.manifest),
    );
    verdict
}

/// The branding cannot be encoded into the server's format: refused here, nothing was sent.
pub fn unencodable_branding(error: &BrandingError) -> Verdict {
    Verdict::new(
        Reason::Refused,
        Cause::UnencodableBranding,
        format!("{error}; nothing was sent to the server; fix the manifest"),
    )
}

/// A deletion outcome of a manifest others depend on, naming them: a branding the server let go
/// while clients still reference it, an organization that still holds their objects.
pub fn naming_dependents(mut verdict: Verdict, dependents: &[Manifest]) -> Verdict {
    if dependents.is_empty() {
        return verdict;
    }
    let names = describe_all(dependents);
    if verdict.cause == Cause::OrganizationNotEmpty {
        verdict.message = format!(
            "{}; manifests that declare objects under its issuer: {names}",
            verdict.message
        );
    } else if verdict.reason == Reason::Deleted {
        verdict.message = format!(
            "{}; still referenced by {names}, which keep their reference to an object the \
             server no longer holds",
            verdict.message
        );
    }
    verdict
}

/// Names manifests, at most ten and a count of the rest.
fn describe_all(manifests: &[Manifest]) -> String {
    const SHOWN: usize = 10;
    let mut names: Vec<String> = manifests
        .iter()
        .take(SHOWN)
        .map(Manifest::describe)
        .collect();
    if manifests.len() > SHOWN {
        names.push(format!("and {} more", manifests.len() - SHOWN));
    }
    names.join(", ")
}
