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
