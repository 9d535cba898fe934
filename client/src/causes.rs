//! How the server's answers map onto the model's causes: a stable reason when the answer
//! carries one, else its gRPC code; a connection that could not be made by its problem. The
//! contract's `ErrorReason` meets the model's `ServerReason` by name, so neither list is
//! written twice.

use nauthera_proto::v1::ErrorReason;
use nauthera_shared::catalog::{Cause, ServerReason};
use tonic::Code;

use crate::ConnectProblem;

/// The model's reason of a contract reason; `None` for the unspecified one.
pub fn server_reason(reason: ErrorReason) -> Option<ServerReason> {
    ServerReason::parse(reason.as_str_name())
}

/// The contract's reason of a model reason.
pub fn error_reason(reason: ServerReason) -> ErrorReason {
    ErrorReason::from_str_name(reason.as_str()).unwrap_or(ErrorReason::Unspecified)
}

/// The cause of a connection that could not be made.
pub const fn cause_of_connect(problem: ConnectProblem) -> Cause {
    match problem {
        ConnectProblem::Transport => Cause::Transient,
        ConnectProblem::TlsHandshake => Cause::TlsHandshake,
        ConnectProblem::Unreadable => Cause::Unreadable,
        ConnectProblem::Malformed => Cause::Malformed,
        ConnectProblem::Expired => Cause::Expired,
        ConnectProblem::Revoked => Cause::Revoked,
        ConnectProblem::Rejected => Cause::Rejected,
        ConnectProblem::UnknownCa | ConnectProblem::ServerNotTrusted => Cause::Untrusted,
    }
}

/// The cause of a server error: its stable reason when it has one, else its gRPC code.
pub fn cause_of_error(reason: Option<ServerReason>, code: Code) -> Cause {
    reason.map_or_else(|| cause_of_code(code), Cause::from_server_reason)
}

/// The cause of a gRPC code that came without a stable reason.
pub const fn cause_of_code(code: Code) -> Cause {
    match code {
        Code::Ok => Cause::None,
        Code::InvalidArgument | Code::OutOfRange => Cause::FieldViolation,
        // Without a stable reason, a refusal of the caller means the server (or a proxy that
        // terminated TLS) did not see an allowed identity.
        Code::PermissionDenied | Code::Unauthenticated => Cause::IdentityNotAllowed,
        Code::Unimplemented => Cause::Unimplemented,
        Code::NotFound => Cause::Removed,
        Code::Aborted
        | Code::Internal
        | Code::Unknown
        | Code::ResourceExhausted
        | Code::Unavailable
        | Code::DeadlineExceeded
        | Code::Cancelled => Cause::Transient,
        Code::FailedPrecondition | Code::AlreadyExists | Code::DataLoss => Cause::ServerObjection,
    }
}

/// The gRPC codes the reconciler retries with exponential backoff and jitter, without waiting
/// for a change of the manifest.
pub const RETRIED_CODES: [Code; 5] = [
    Code::Aborted,
    Code::Internal,
    Code::Unknown,
    Code::ResourceExhausted,
    Code::Unavailable,
];

/// The `code` label of `nauthera_operator_server_calls_total`: the code's CamelCase name.
pub const fn code_label(code: Code) -> &'static str {
    match code {
        Code::Ok => "Ok",
        Code::Cancelled => "Cancelled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_ERROR_REASONS: [ErrorReason; 14] = [
        ErrorReason::Unspecified,
        ErrorReason::IdentityNotAllowed,
        ErrorReason::OperationNotGranted,
        ErrorReason::OutsideGrant,
        ErrorReason::RevisionMismatch,
        ErrorReason::ManagerConflict,
        ErrorReason::UnknownIssuer,
        ErrorReason::ReservedName,
        ErrorReason::FapiRequirements,
        ErrorReason::InvalidField,
        ErrorReason::ObjectNotFound,
        ErrorReason::ReferenceNotFound,
        ErrorReason::RateLimited,
        ErrorReason::OrganizationNotEmpty,
    ];

    #[test]
    fn every_error_reason_value_is_a_model_reason() {
        // Walk the generated enum by number, so a reason added to the contract fails here until
        // the model's `ServerReason` declares its name.
        let known: Vec<ErrorReason> = (0..64)
            .filter_map(|n| ErrorReason::try_from(n).ok())
            .collect();
        assert_eq!(known, ALL_ERROR_REASONS.to_vec());
        for reason in ALL_ERROR_REASONS {
            let model = server_reason(reason);
            assert_eq!(
                model.is_none(),
                reason == ErrorReason::Unspecified,
                "{reason:?}"
            );
            if let Some(model) = model {
                assert_eq!(error_reason(model), reason);
            }
        }
        assert_eq!(ServerReason::ALL.len(), ALL_ERROR_REASONS.len() - 1);
    }

    #[test]
    fn stable_reasons_win_over_codes() {
        let cases = [
            (
                ErrorReason::IdentityNotAllowed,
                Code::PermissionDenied,
                Cause::IdentityNotAllowed,
            ),
            (
                ErrorReason::OperationNotGranted,
                Code::PermissionDenied,
                Cause::OperationNotGranted,
            ),
            (
                ErrorReason::OutsideGrant,
                Code::PermissionDenied,
                Cause::OutsideGrant,
            ),
            (
                ErrorReason::RevisionMismatch,
                Code::FailedPrecondition,
                Cause::RevisionMismatch,
            ),
            (
                ErrorReason::ManagerConflict,
                Code::FailedPrecondition,
                Cause::ManagerConflict,
            ),
            (
                ErrorReason::UnknownIssuer,
                Code::FailedPrecondition,
                Cause::UnknownIssuer,
            ),
            (
                ErrorReason::ReservedName,
                Code::InvalidArgument,
                Cause::ReservedName,
            ),
            (
                ErrorReason::FapiRequirements,
                Code::FailedPrecondition,
                Cause::FapiRequirements,
            ),
            (
                ErrorReason::InvalidField,
                Code::InvalidArgument,
                Cause::FieldViolation,
            ),
            (ErrorReason::ObjectNotFound, Code::NotFound, Cause::Removed),
            (
                ErrorReason::ReferenceNotFound,
                Code::FailedPrecondition,
                Cause::ReferenceNotFound,
            ),
            (
                ErrorReason::RateLimited,
                Code::ResourceExhausted,
                Cause::Transient,
            ),
            (
                ErrorReason::OrganizationNotEmpty,
                Code::FailedPrecondition,
                Cause::OrganizationNotEmpty,
            ),
            (
                ErrorReason::Unspecified,
                Code::Unimplemented,
                Cause::Unimplemented,
            ),
            (
                ErrorReason::Unspecified,
                Code::PermissionDenied,
                Cause::IdentityNotAllowed,
            ),
            (
                ErrorReason::Unspecified,
                Code::FailedPrecondition,
                Cause::ServerObjection,
            ),
            (ErrorReason::Unspecified, Code::Internal, Cause::Transient),
        ];
        for (reason, code, cause) in cases {
            assert_eq!(
                cause_of_error(server_reason(reason), code),
                cause,
                "{reason:?} {code:?}"
            );
        }
    }

    #[test]
    fn error_info_names_parse_and_unknown_names_fall_back_to_the_code() {
        assert_eq!(
            cause_of_error(ServerReason::parse("OUTSIDE_GRANT"), Code::PermissionDenied),
            Cause::OutsideGrant
        );
        assert_eq!(
            cause_of_error(
                ServerReason::parse("A_REASON_FROM_A_NEWER_SERVER"),
                Code::InvalidArgument
            ),
            Cause::FieldViolation
        );
        assert_eq!(cause_of_error(None, Code::Unavailable), Cause::Transient);
    }

    #[test]
    fn exactly_the_five_documented_codes_are_retried() {
        let retried: Vec<Code> = (0..17)
            .map(Code::from_i32)
            .filter(|c| crate::is_retryable_code(*c))
            .collect();
        assert_eq!(
            retried,
            vec![
                Code::Unknown,
                Code::ResourceExhausted,
                Code::Aborted,
                Code::Internal,
                Code::Unavailable
            ]
        );
        for code in RETRIED_CODES {
            assert_eq!(cause_of_code(code), Cause::Transient, "{code:?}");
        }
    }

    #[test]
    fn code_labels_are_the_camel_case_names() {
        for n in 0..17 {
            let code = Code::from_i32(n);
            assert_eq!(code_label(code), format!("{code:?}"));
        }
    }
}
