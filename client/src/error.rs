//! Typed errors of the AdminService client: why a connection could not be made, and what the
//! server said when it refused a call.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use nauthera_proto::tonic_types::StatusExt;
use nauthera_proto::v1::{ErrorMetadataKey, FieldViolation};
use nauthera_shared::catalog::ServerReason;
use tonic::{Code, Status};

/// Why no connection to the server could be made. Never carries key material. `problem` says
/// what went wrong as a closed set; `cause` says it for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The client certificate or its key is missing, unreadable or invalid, or the server
    /// rejected the certificate (expired, revoked, bad).
    #[error("client certificate or key unavailable ({}): {cause}", path.display())]
    CredentialUnavailable {
        path: PathBuf,
        problem: ConnectProblem,
        cause: String,
    },
    /// The CA file is missing, unreadable or invalid, or a trust anchor is missing on either
    /// side (the server does not know the CA of the client certificate, or `ca.crt` does not
    /// hold the CA of the server's certificate).
    #[error("trust anchor unavailable ({}): {cause}", path.display())]
    TrustAnchorUnavailable {
        path: PathBuf,
        problem: ConnectProblem,
        cause: String,
    },
    /// The connection or the TLS handshake failed (refused, timed out, reset).
    #[error("server {address} unreachable: {cause}")]
    Unreachable {
        address: String,
        problem: ConnectProblem,
        cause: String,
    },
}

/// What went wrong while connecting, as a closed set (the catalog's causes follow from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnectProblem {
    /// The connection could not be made or was lost: refused, reset, timed out.
    Transport,
    /// The TLS handshake failed for a reason not named below (a protocol or name mismatch,
    /// the server's own certificate expired).
    TlsHandshake,
    /// A certificate, key or CA file cannot be read.
    Unreadable,
    /// A certificate, key or CA file is not valid PEM, or the key does not fit.
    Malformed,
    /// The client certificate has expired (the server's `certificate_expired` alert).
    Expired,
    /// The server says the client certificate was revoked (`certificate_revoked`).
    Revoked,
    /// The server rejected the client certificate (`bad_certificate`, `unsupported_certificate`,
    /// `certificate_unknown`).
    Rejected,
    /// The server does not know the CA that issued the client certificate (`unknown_ca`).
    UnknownCa,
    /// The server's certificate is not signed by a CA in `ca.crt`.
    ServerNotTrusted,
}

impl ConnectError {
    /// What went wrong.
    pub fn problem(&self) -> ConnectProblem {
        match self {
            ConnectError::CredentialUnavailable { problem, .. }
            | ConnectError::TrustAnchorUnavailable { problem, .. }
            | ConnectError::Unreachable { problem, .. } => *problem,
        }
    }

    /// The condition reason this error stands for: `Unreachable`, `CredentialUnavailable` or
    /// `TrustAnchorUnavailable`.
    pub fn reason_name(&self) -> &'static str {
        match self {
            ConnectError::CredentialUnavailable { .. } => "CredentialUnavailable",
            ConnectError::TrustAnchorUnavailable { .. } => "TrustAnchorUnavailable",
            ConnectError::Unreachable { .. } => "Unreachable",
        }
    }
}

/// The metadata key the server uses for `key` in `google.rpc.ErrorInfo` (for example
/// `generation_in_force`).
pub fn metadata_key_name(key: ErrorMetadataKey) -> String {
    key.as_str_name()
        .trim_start_matches("ERROR_METADATA_KEY_")
        .to_ascii_lowercase()
}

/// A call the server answered with an error, decoded from its `google.rpc.Status` details.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerError {
    pub code: Code,
    /// The status message, for people.
    pub message: String,
    /// The stable reason (`ErrorInfo.reason`); `None` when absent or unknown to this client.
    pub reason: Option<ServerReason>,
    /// The `cause` metadata: why, in a few words.
    pub cause: Option<String>,
    /// The `google.rpc.BadRequest` field violations.
    pub violations: Vec<FieldViolation>,
    /// The declared generation the server keeps in force; `None` when it holds no version.
    pub generation_in_force: Option<i64>,
    /// The revision the server holds (`revision` metadata); `Some("")` when it holds none.
    pub held_revision: Option<String>,
    /// All `ErrorInfo` metadata.
    pub metadata: BTreeMap<String, String>,
}

impl ServerError {
    /// Decodes a status the server sent.
    pub fn from_status(status: &Status) -> ServerError {
        let details = status.get_error_details();
        let metadata: BTreeMap<String, String> = details
            .error_info()
            .map(|info| {
                info.metadata
                    .iter()
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let reason = details
            .error_info()
            .and_then(|info| ServerReason::parse(&info.reason));
        let violations = details
            .bad_request()
            .map(|bad_request| {
                bad_request
                    .field_violations
                    .iter()
                    .map(|violation| FieldViolation {
                        field: violation.field.clone(),
                        description: violation.description.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let get = |key| metadata.get(&metadata_key_name(key)).cloned();
        ServerError {
            code: status.code(),
            message: status.message().to_owned(),
            reason,
            cause: get(ErrorMetadataKey::Cause),
            violations,
            generation_in_force: get(ErrorMetadataKey::GenerationInForce)
                .and_then(|value| value.parse().ok()),
            held_revision: get(ErrorMetadataKey::Revision),
            metadata,
        }
    }

    /// A metadata value by its key.
    pub fn metadata_value(&self, key: ErrorMetadataKey) -> Option<&str> {
        self.metadata
            .get(&metadata_key_name(key))
            .map(String::as_str)
    }

    /// Whether the call may succeed when sent again unchanged (with backoff): `Aborted`,
    /// `Internal`, `Unknown`, `ResourceExhausted`, `Unavailable`.
    pub fn is_retryable(&self) -> bool {
        is_retryable_code(self.code)
    }

    /// Whether the server is older than the call.
    pub fn is_unimplemented(&self) -> bool {
        self.code == Code::Unimplemented
    }

    /// The gRPC code's name, as used in metric labels (`PermissionDenied`, ...).
    pub fn code_name(&self) -> String {
        format!("{:?}", self.code)
    }
}

/// Whether a gRPC code is one the reconciler retries with backoff.
pub fn is_retryable_code(code: Code) -> bool {
    crate::causes::RETRIED_CODES.contains(&code)
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.code)?;
        if let Some(reason) = self.reason {
            write!(f, " ({})", reason.as_str())?;
        }
        match &self.cause {
            Some(cause) => write!(f, ": {cause}")?,
            None if !self.message.is_empty() => write!(f, ": {}", self.message)?,
            None => {}
        }
        for violation in &self.violations {
            write!(f, "; {}: {}", violation.field, violation.description)?;
        }
        if let Some(generation) = self.generation_in_force {
            write!(f, "; generation in force {generation}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ServerError {}

/// Why a call failed: no connection, or the server's answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Server(#[from] ServerError),
}

impl CallError {
    /// Maps a status returned by a call. A status that carries a source error was made by the
    /// transport on this side (connection refused, handshake or stream failure), not by the
    /// server: it becomes a [`ConnectError`].
    pub fn from_status(status: Status, address: &str) -> CallError {
        match std::error::Error::source(&status) {
            Some(source) => CallError::Connect(connect_error_in_chain(source, address)),
            None => CallError::Server(ServerError::from_status(&status)),
        }
    }

    /// Whether sending the call again may succeed: the server was unreachable, or its code is
    /// retryable. A missing credential or trust anchor is not retried until the files change.
    pub fn is_retryable(&self) -> bool {
        match self {
            CallError::Connect(ConnectError::Unreachable { .. }) => true,
            CallError::Connect(_) => false,
            CallError::Server(error) => error.is_retryable(),
        }
    }

    /// Whether the server is older than the call.
    pub fn is_unimplemented(&self) -> bool {
        matches!(self, CallError::Server(error) if error.is_unimplemented())
    }

    /// The server's error, when it answered.
    pub fn server(&self) -> Option<&ServerError> {
        match self {
            CallError::Server(error) => Some(error),
            CallError::Connect(_) => None,
        }
    }

    /// A bounded label for metrics and logs: the gRPC code's name when the server answered
    /// (`PermissionDenied`, ...), else the connection reason (`Unreachable`, ...).
    pub fn code_name(&self) -> String {
        match self {
            CallError::Server(error) => error.code_name(),
            CallError::Connect(error) => error.reason_name().to_owned(),
        }
    }

    /// The server's stable reason, when it answered with one.
    pub fn reason(&self) -> Option<ServerReason> {
        self.server().and_then(|error| error.reason)
    }
}

/// Finds a [`ConnectError`] our connector produced anywhere in an error chain, or describes the
/// chain as an unreachable server. An alert the server sent after the handshake (TLS 1.3 judges
/// the client certificate then) reaches the chain only as text, as HTTP/2 keeps just the kind
/// and message of an I/O error: [`connection_verdict`](crate::connection_verdict) finds
/// it on a connection of its own.
pub(crate) fn connect_error_in_chain(
    error: &(dyn std::error::Error + 'static),
    address: &str,
) -> ConnectError {
    let mut causes = Vec::new();
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<ConnectError>() {
            return found.clone();
        }
        let text = error.to_string();
        if !causes.contains(&text) {
            causes.push(text);
        }
        current = error.source();
    }
    ConnectError::Unreachable {
        address: address.to_owned(),
        problem: ConnectProblem::Transport,
        cause: causes.join(": "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nauthera_proto::tonic_types::{ErrorDetails, StatusExt};
    use std::collections::HashMap;

    fn refusal() -> Status {
        let mut details = ErrorDetails::with_error_info(
            "FAPI_REQUIREMENTS",
            nauthera_proto::ERROR_DOMAIN,
            HashMap::from([
                ("cause".to_owned(), "FAPI 2.0 applies".to_owned()),
                ("generation_in_force".to_owned(), "3".to_owned()),
                ("revision".to_owned(), "r7".to_owned()),
            ]),
        );
        details.add_bad_request_violation("spec.require_pkce", "PKCE is required");
        Status::with_error_details(Code::FailedPrecondition, "refused", details)
    }

    #[test]
    fn a_refusal_is_decoded_field_by_field() {
        let error = ServerError::from_status(&refusal());
        assert_eq!(error.code, Code::FailedPrecondition);
        assert_eq!(error.reason, Some(ServerReason::FapiRequirements));
        assert_eq!(error.cause.as_deref(), Some("FAPI 2.0 applies"));
        assert_eq!(error.generation_in_force, Some(3));
        assert_eq!(error.held_revision.as_deref(), Some("r7"));
        assert_eq!(error.violations.len(), 1);
        assert_eq!(error.violations[0].field, "spec.require_pkce");
        assert!(!error.is_retryable());
        let text = error.to_string();
        assert!(text.contains("FAPI_REQUIREMENTS") && text.contains("spec.require_pkce"));
    }

    #[test]
    fn a_status_without_details_has_no_reason() {
        let error = ServerError::from_status(&Status::unavailable("down"));
        assert_eq!(error.reason, None);
        assert!(error.is_retryable());
        assert_eq!(error.code_name(), "Unavailable");
    }

    #[test]
    fn retryable_codes_are_exactly_the_transient_ones() {
        for code in [
            Code::Aborted,
            Code::Internal,
            Code::Unknown,
            Code::ResourceExhausted,
            Code::Unavailable,
        ] {
            assert!(is_retryable_code(code), "{code:?}");
        }
        for code in [
            Code::PermissionDenied,
            Code::FailedPrecondition,
            Code::InvalidArgument,
            Code::Unimplemented,
            Code::NotFound,
        ] {
            assert!(!is_retryable_code(code), "{code:?}");
        }
    }

    #[test]
    fn a_transport_status_becomes_a_connect_error() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let status = Status::from_error(Box::new(io));
        let error = CallError::from_status(status, "127.0.0.1:1");
        assert!(
            matches!(&error, CallError::Connect(ConnectError::Unreachable { cause, .. }) if cause.contains("refused")),
            "{error:?}"
        );
        assert!(error.is_retryable());
        assert_eq!(error.code_name(), "Unreachable");
        let answered = CallError::from_status(refusal(), "127.0.0.1:1");
        assert_eq!(answered.code_name(), "FailedPrecondition");
        assert_eq!(answered.reason(), Some(ServerReason::FapiRequirements));
    }

    #[test]
    fn metadata_keys_are_the_lower_case_names() {
        assert_eq!(
            metadata_key_name(ErrorMetadataKey::GenerationInForce),
            "generation_in_force"
        );
        assert_eq!(metadata_key_name(ErrorMetadataKey::FapiMode), "fapi_mode");
    }
}
