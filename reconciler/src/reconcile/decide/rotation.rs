//! What a rotation of a generated secret tells people: which Secret holds the new one, why it was
//! minted, which workloads read it (with the command that restarts each), and what became of a
//! Secret left holding a value the server no longer accepts.

use nauthera_shared::catalog::{Cause, EventReason, Reason};
use nauthera_shared::resources::LocalRef;
use nauthera_shared::workloads::Consumer;

use super::outcome::in_force;
use super::{EventNote, Rotation, Update, Verdict};

/// The workloads that read a Secret, as far as the reconciler can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readers {
    Found(Vec<Consumer>),
    /// The workloads could not be listed; why.
    Unlisted(String),
    /// Found, and restarted by the reconciler (`spec.secret.restart: Rollout`): the restart's
    /// own events tell how it went.
    Restarting(Vec<Consumer>),
}

/// What became of a Secret that holds a generated secret the server no longer accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StaleRemoval {
    Removed,
    /// Nothing of this resource's to remove: gone already, or no longer owned by it (released,
    /// or taken over by someone).
    Nothing,
    Failed {
        forbidden: bool,
        message: String,
    },
}

/// At most this many workloads are named in a note; the rest are counted.
const NAMED_READERS: usize = 5;

/// A rotation of a secret workloads held: the verdict's delivery event becomes a `SecretRotated`
/// Warning naming the Secret, why the secret was minted again and who must restart. A secret
/// that never reached anyone keeps its `SecretDelivered` event. `old`: for a renamed Secret, the
/// workloads still reading the old one and what became of it.
pub fn rotated(
    mut verdict: Verdict,
    rotation: &Rotation,
    secret_name: &str,
    namespace: &str,
    readers: &Readers,
    old: Option<(&Readers, &StaleRemoval)>,
) -> Verdict {
    if !rotation.replaces_a_delivered_secret() {
        return verdict;
    }
    let Some(delivered) = verdict
        .events
        .iter_mut()
        .find(|event| event.reason == EventReason::SecretDelivered)
    else {
        // Not delivered: the failure is the verdict's news; the rotation is told on delivery.
        return verdict;
    };
    let why = match rotation {
        Rotation::Deleted => format!("Secret {secret_name} was deleted"),
        Rotation::Emptied => format!("Secret {secret_name} lost its client secret"),
        Rotation::Renamed { from } => {
            format!("spec.secret.secretName moved from Secret {from} to Secret {secret_name}")
        }
        Rotation::TakenOver { from_manager } => format!(
            "the object was taken over from manager {from_manager}, whose cluster holds the \
             secret in force"
        ),
        Rotation::Requested { by, at } => format!(
            "a rotation was requested (nauthera.io/rotate) by {}{}",
            by.as_deref().unwrap_or("an unknown field manager"),
            at.map(|at| format!(" at {}", at.round(jiff::Unit::Second).unwrap_or(at)))
                .unwrap_or_default()
        ),
        Rotation::Scheduled { every } => format!(
            "the client secret in Secret {secret_name} was older than spec.secret.rotation.every \
             ({every})"
        ),
        Rotation::NeverDelivered | Rotation::Adopted => {
            unreachable!("kept as SecretDelivered above")
        }
    };
    let mut note = format!(
        "{why}: a new client secret was minted into Secret {secret_name}; the server no longer \
         accepts the one before"
    );
    note.push_str(&readers_sentence(
        readers,
        secret_name,
        namespace,
        Use::Restart,
    ));
    if let (Rotation::Renamed { from }, Some((old_readers, removal))) = (rotation, old) {
        note.push_str(&removal_sentence(from, removal));
        if matches!(old_readers, Readers::Found(found) if !found.is_empty()) {
            note.push_str(&readers_sentence(
                old_readers,
                from,
                namespace,
                Use::Repoint,
            ));
        }
    }
    *delivered = EventNote {
        reason: EventReason::SecretRotated,
        note,
    };
    verdict
}

/// A verdict that leaves a Secret with a dead value behind: once it is removed (or nothing is
/// left to remove) the status names only the Secret in force (`current`), else it keeps naming
/// the stale one, so that the removal is tried again.
pub fn with_stale_removal(
    mut verdict: Verdict,
    stale: &str,
    removal: &StaleRemoval,
    current: Option<&str>,
) -> Verdict {
    match removal {
        StaleRemoval::Removed | StaleRemoval::Nothing => {
            verdict.fields.secret_ref = match current {
                Some(name) => Update::Set(LocalRef {
                    name: name.to_owned(),
                }),
                None => Update::Clear,
            };
        }
        StaleRemoval::Failed { .. } => {
            verdict.fields.secret_ref = Update::Keep;
            verdict.keep_trying = true;
            verdict.message.push_str(&removal_sentence(stale, removal));
        }
    }
    verdict
}

/// The outcome of removing a Secret left with a dead value, on its own (a removal after a
/// rotation failed before or was cut short).
pub fn stale_secret_removed(
    generation: i64,
    revision: &str,
    stale: &str,
    removal: &StaleRemoval,
    readers: &Readers,
    current: Option<&str>,
    namespace: &str,
) -> Verdict {
    let verdict = in_force(generation, revision, false);
    let verdict = with_removal_told(verdict, stale, removal, readers, current, namespace);
    with_stale_removal(verdict, stale, removal, current)
}

/// A removal outside a rotation's event (the manifest stopped generating a secret, or an
/// earlier removal is finished) is told in a `SecretRemoved` event, naming the workloads that
/// still read the removed Secret.
pub fn with_removal_told(
    mut verdict: Verdict,
    stale: &str,
    removal: &StaleRemoval,
    readers: &Readers,
    current: Option<&str>,
    namespace: &str,
) -> Verdict {
    if *removal != StaleRemoval::Removed {
        return verdict;
    }
    let instead = match current {
        Some(name) => format!("the manifest now names Secret {name}"),
        None => "the manifest no longer generates a client secret".to_owned(),
    };
    let mut note = format!(
        "removed Secret {stale}: it held a generated client secret the server no longer \
         accepts ({instead})"
    );
    if matches!(readers, Readers::Found(found) if !found.is_empty()) {
        note.push_str(&readers_sentence(readers, stale, namespace, Use::Repoint));
    }
    verdict.events.push(EventNote {
        reason: EventReason::SecretRemoved,
        note,
    });
    verdict
}

/// `spec.secret.secretName` names a Secret this resource does not own: no secret is minted (the
/// one in force stays where it was delivered) until the name is free. `written`: the rest of the
/// generation is in force; otherwise nothing was sent.
pub fn secret_name_taken(
    secret_name: &str,
    owner: Option<&str>,
    delivered_into: &str,
    written: bool,
) -> Verdict {
    let owner = owner.map_or_else(|| "it has no owner".to_owned(), |o| format!("owner {o}"));
    let sent = if written {
        "no new secret was minted"
    } else {
        "nothing was sent to the server"
    };
    let mut verdict = Verdict {
        keep_trying: true,
        ..Verdict::new(
            Reason::SecretUndeliverable,
            Cause::ForeignSecret,
            format!(
                "spec.secret.secretName: Secret {secret_name} exists and is not owned by this \
                 resource ({owner}); it is never written over: delete or rename it, or choose \
                 another name; {sent}, and the client secret in force stays in Secret \
                 {delivered_into}"
            ),
        )
    };
    verdict.fields.secret_ref = Update::Keep;
    verdict
}

/// What the workloads reading a Secret must do.
#[derive(Clone, Copy)]
enum Use {
    /// Restart to read the new value.
    Restart,
    /// Read the Secret the manifest names now: the one they read is removed.
    Repoint,
}

fn readers_sentence(readers: &Readers, secret: &str, namespace: &str, need: Use) -> String {
    let found = match readers {
        Readers::Unlisted(why) => {
            return format!(
                "; the workloads that read Secret {secret} could not be listed ({why}): restart \
                 those that do"
            );
        }
        Readers::Found(found) if found.is_empty() => {
            return format!(
                "; no Deployment, StatefulSet or DaemonSet in namespace {namespace} reads Secret \
                 {secret}"
            );
        }
        Readers::Found(found) | Readers::Restarting(found) => found,
    };
    let named = found
        .iter()
        .take(NAMED_READERS)
        .map(|consumer| format!("{}/{}", consumer.kind, consumer.name))
        .collect::<Vec<_>>()
        .join(", ");
    let more = match found.len().saturating_sub(NAMED_READERS) {
        0 => String::new(),
        rest => format!(" and {rest} more"),
    };
    match need {
        Use::Restart if matches!(readers, Readers::Restarting(_)) => format!(
            "; read by {named}{more}: spec.secret.restart: Rollout restarts them (see the \
             WorkloadsRestarted and WorkloadsNotRestarted events)"
        ),
        Use::Restart => {
            let commands = found
                .iter()
                .take(NAMED_READERS)
                .map(|consumer| consumer.restart_command(namespace))
                .collect::<Vec<_>>()
                .join("; ");
            format!("; read by {named}{more}: restart them ({commands})")
        }
        Use::Repoint => format!(
            "; {named}{more} still read Secret {secret}: change them to read the Secret the \
             manifest names"
        ),
    }
}

fn removal_sentence(stale: &str, removal: &StaleRemoval) -> String {
    match removal {
        StaleRemoval::Removed => {
            format!("; Secret {stale}, which held the one before, was removed")
        }
        StaleRemoval::Nothing => String::new(),
        StaleRemoval::Failed { forbidden, message } => format!(
            "; Secret {stale} still holds a client secret the server no longer accepts, and \
             removing it failed: {message}; {}",
            if *forbidden {
                "grant the reconciler delete on secrets; retried with backoff"
            } else {
                "retried with backoff"
            }
        ),
    }
}
