//! The shape of a generated secret's Secret (`spec.secret.template`): a template that does not
//! render refuses the generation before anything is sent, and a Secret rewritten in a new shape
//! (with the secret it held) is told.

use nauthera_shared::catalog::{Cause, EventReason, Reason};
use nauthera_shared::secret_render::TemplateProblem;

use super::outcome::in_force;
use super::{SecretWriteFailure, Verdict};

/// A template that does not render: nothing is sent to the server (and nothing minted) until
/// the manifest is fixed. The message names the field; it never holds a rendered text.
pub fn invalid_secret_template(problem: &TemplateProblem) -> Verdict {
    Verdict::new(
        Reason::Refused,
        Cause::InvalidSecretTemplate,
        format!(
            "{problem}; nothing was sent to the server; fix the manifest (kubectl nauthera \
             diagnose -f checks it before it is applied)"
        ),
    )
}

/// The Secret was rewritten in the declared shape with the client secret it held.
pub fn secret_reshaped(generation: i64, revision: &str, secret_name: &str) -> Verdict {
    let mut verdict = in_force(generation, revision, false);
    verdict.events.push(super::EventNote {
        reason: EventReason::SecretReshaped,
        note: format!(
            "rewrote Secret {secret_name} in the shape spec.secret.template declares; the client \
             secret in it is the same"
        ),
    });
    verdict.fields.secret_ref = super::Update::Set(nauthera_shared::resources::LocalRef {
        name: secret_name.to_owned(),
    });
    verdict
}

/// The Secret could not be rewritten in the declared shape; it keeps the client secret in force
/// in its old shape, and the rewrite is retried.
pub fn secret_reshape_failed(failure: &SecretWriteFailure, secret_name: &str) -> Verdict {
    let (cause, detail) = match failure {
        SecretWriteFailure::Foreign { .. } => (
            Cause::ForeignSecret,
            format!("Secret {secret_name} is not owned by this resource"),
        ),
        SecretWriteFailure::Forbidden { message } => (
            Cause::Forbidden,
            format!(
                "writing Secret {secret_name} is forbidden: {message}; grant the reconciler get, \
                 create, patch and delete on secrets"
            ),
        ),
        SecretWriteFailure::Other { message } => (
            Cause::Transient,
            format!("writing Secret {secret_name} failed: {message}; retried with backoff"),
        ),
    };
    let mut verdict = Verdict::new(
        Reason::SecretUndeliverable,
        cause,
        format!(
            "the Secret holds the client secret in force in the shape of an earlier \
             spec.secret.template: {detail}"
        ),
    );
    verdict.retried = true;
    verdict.keep_trying = true;
    verdict
}
