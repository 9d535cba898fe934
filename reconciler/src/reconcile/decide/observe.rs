//! `managementPolicy: Observe`: what the server holds of the object, told in the status and
//! never written.

use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::ServerObject;

use super::{Update, Verdict};

/// How the manifest and the object on the server compare.
pub fn comparison(object: &ServerObject) -> Cause {
    if object.absent {
        Cause::NotOnServer
    } else if object.differences.is_empty() {
        Cause::Identical
    } else {
        Cause::Differs
    }
}

/// The revision, its writer and when, as messages name them.
pub fn describe_object(object: &ServerObject) -> String {
    let at = object
        .written_at
        .as_ref()
        .map(|time| format!(" at {}", time.0))
        .unwrap_or_default();
    format!(
        "revision {}, written by {}{at}",
        object.revision,
        object.writer()
    )
}

/// The fields that differ, or that none does.
pub fn describe_differences(object: &ServerObject) -> String {
    if object.differences.is_empty() {
        "the manifest declares what the server holds".to_owned()
    } else {
        format!(
            "fields that differ from the manifest: {}",
            object.differences.join(", ")
        )
    }
}

/// An observed object as read: its revision, writer and differences, and that nothing is
/// written. The status keeps it under `status.observed`.
pub fn observed(object: ServerObject) -> Verdict {
    let cause = comparison(&object);
    let message = if object.absent {
        "observed only (managementPolicy Observe): the server holds no object of this name; \
         nothing is written (set managementPolicy Manage to create it)"
            .to_owned()
    } else {
        format!(
            "observed only (managementPolicy Observe): the server holds {}; {}; nothing is \
             written (set managementPolicy Manage to manage it from this revision)",
            describe_object(&object),
            describe_differences(&object)
        )
    };
    let mut verdict = Verdict::new(Reason::Observed, cause, message);
    verdict.fields.observed = Update::Set(object);
    verdict
}

#[cfg(test)]
mod tests;
