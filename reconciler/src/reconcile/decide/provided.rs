//! The value of a Secret the team holds (`spec.secret.secretRef`, an identity provider's
//! `secretRef`): whether what was read differs from what the server holds, and how a write that
//! sent a new value is told.

use nauthera_shared::catalog::{Cause, EventReason, Reason};

use super::{EventNote, Verdict};

/// A value of the team's Secret, as the reconciler remembers it: the Secret's version it was
/// read at and a digest of it (in memory only; never written or shown).
#[derive(Clone, PartialEq, Eq)]
pub struct SentValue {
    pub version: String,
    pub digest: [u8; 32],
}

impl std::fmt::Debug for SentValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentValue")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Whether the value read (`read`) differs from the one the server holds. `sent_version` is the
/// Secret's version whose value the last write sent (`status.secretVersion`); `known` what this
/// process knows of that value. The same version is the same value; another version whose value
/// has the digest of the one the server holds is a change of the Secret's labels or annotations
/// only, which sends nothing. Without a digest (a new process) another version counts as a
/// change.
pub fn provided_value_changed(
    sent_version: Option<&str>,
    known: Option<&SentValue>,
    read: &SentValue,
) -> bool {
    if sent_version == Some(read.version.as_str()) {
        return false;
    }
    match known {
        Some(known) if known.version == read.version => false,
        Some(known) => known.digest != read.digest,
        None => true,
    }
}

/// The team's value a write sent.
#[derive(Clone, Copy, Debug)]
pub struct ValueSent<'a> {
    /// The Secret's version the value was read at.
    pub version: &'a str,
    /// Whether the value is new to the server (the first one, or a changed one).
    pub changed: bool,
    /// Whether the object was registered before this write.
    pub registered_before: bool,
    pub secret: ProvidedSecret<'a>,
}

/// What a write records of the team's value it sent (`None`: it sent none): the secret counts as
/// set when the value is new to the server, a changed value sent to an object registered before
/// is told ([`secret_value_sent`]), and the version sent is kept.
pub fn with_value_sent(mut verdict: Verdict, sent: Option<ValueSent<'_>>) -> Verdict {
    let Some(sent) = sent else {
        verdict.fields.secret_version = None;
        return verdict;
    };
    verdict.fields.secret_set |= sent.changed;
    if sent.changed && sent.registered_before {
        verdict = secret_value_sent(verdict, &sent.secret);
    }
    verdict.fields.secret_version = Some(sent.version.to_owned());
    verdict
}

/// The revision to send the team's value again over, when a write found the server holding
/// this reconciler's own earlier write whose answer was lost, and adopted it: which value that
/// write carried is not known, so the one read now (`read_version`) is sent again at once, once,
/// rather than recorded as sent or left for a later reconcile to find. Not when the status
/// records that very version as sent.
pub fn resend_over(
    adopted: &Verdict,
    already_resent: bool,
    read_version: Option<&str>,
    sent_version: Option<&str>,
) -> Option<String> {
    if already_resent || adopted.reason != Reason::Registered {
        return None;
    }
    let read = read_version?;
    if sent_version == Some(read) {
        return None;
    }
    adopted.fields.revision.clone()
}

/// Where the team's secret is: the field that names the Secret, the Secret and its key, and
/// what the secret is (`client secret`, `upstream client secret`).
#[derive(Clone, Copy, Debug)]
pub struct ProvidedSecret<'a> {
    pub field: &'a str,
    pub secret: &'a str,
    pub key: &'a str,
    pub what: &'a str,
}

/// A write that sent a changed value of the team's secret, to an object registered before:
/// said in a `SecretChanged` event (never the value), with the cause `secret_changed`.
pub fn secret_value_sent(mut verdict: Verdict, provided: &ProvidedSecret<'_>) -> Verdict {
    let Some(revision) = verdict.fields.revision.clone() else {
        return verdict;
    };
    if verdict.reason == Reason::Registered {
        verdict.cause = Cause::SecretChanged;
    }
    verdict.events.push(EventNote {
        reason: EventReason::SecretChanged,
        note: format!(
            "the {what} in Secret {secret} (key {key}, named by {field}) changed; its new value \
             was sent to the server, which holds it as of revision {revision}",
            what = provided.what,
            secret = provided.secret,
            key = provided.key,
            field = provided.field,
        ),
    });
    verdict
}
