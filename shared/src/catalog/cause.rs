//! Causes: the bounded `cause` label of `nauthera_operator_reconciles_total`, and how the
//! server's answers map onto it.

use nauthera_proto::v1::ErrorReason;

use crate::client::ConnectProblem;
use serde::{Deserialize, Serialize};

use super::words::words;
use tonic::Code;

words! {
    /// Why a reason applies, in one bounded word. The reconciler reports it as the `cause` metric
    /// label and in condition messages; the plugin picks diagnosis steps by it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum Cause {
        /// Nothing went wrong.
        None = "none",
        /// The server objected to one or more fields (`INVALID_FIELD`, `InvalidArgument`).
        FieldViolation = "field_violation",
        /// The reconciler's certificate identity is not allowed (`IDENTITY_NOT_ALLOWED`, or
        /// `PermissionDenied` without a stable reason).
        IdentityNotAllowed = "identity_not_allowed",
        /// The grant lacks the operation (`OPERATION_NOT_GRANTED`).
        OperationNotGranted = "operation_not_granted",
        /// The organization or namespace is outside the grant (`OUTSIDE_GRANT`).
        OutsideGrant = "outside_grant",
        /// No organization serves the issuer (`UNKNOWN_ISSUER`).
        UnknownIssuer = "unknown_issuer",
        /// The name or client id is reserved by the server (`RESERVED_NAME`).
        ReservedName = "reserved_name",
        /// The organization's FAPI mode requires more (`FAPI_REQUIREMENTS`).
        FapiRequirements = "fapi_requirements",
        /// The server holds another revision than the one named (`REVISION_MISMATCH`).
        RevisionMismatch = "revision_mismatch",
        /// The write would overwrite another manager's or a person's change (`MANAGER_CONFLICT`).
        ManagerConflict = "manager_conflict",
        /// A referenced object does not exist on the server (`REFERENCE_NOT_FOUND`).
        ReferenceNotFound = "reference_not_found",
        /// Something this resource names is not there yet: a manifest it depends on (the
        /// Organization manifest that serves its issuer, or the Branding its `spec.brandingRef`
        /// names) is not Registered, or the Branding or Secret it names does not exist. It waits as
        /// Pending instead of being sent to the server, and proceeds by itself as soon as that is
        /// there; a registered resource whose Branding goes away says so with it.
        ReferenceNotReady = "reference_not_ready",
        /// The server keeps an organization while it still holds clients, brandings or identity
        /// providers (`ORGANIZATION_NOT_EMPTY`); its deletion is retried until they are gone.
        OrganizationNotEmpty = "organization_not_empty",
        /// The server is older than the call (`Unimplemented`).
        Unimplemented = "unimplemented",
        /// Any other objection of the server (a code with no stable reason).
        ServerObjection = "server_objection",
        /// The reconciler itself cannot encode `spec.branding` into the server's format.
        UnencodableBranding = "unencodable_branding",
        /// The Secret to write exists and is not owned by this resource.
        ForeignSecret = "foreign_secret",
        /// Kubernetes RBAC forbids the reconciler the Secret write or read.
        Forbidden = "forbidden",
        /// A referenced Secret, or its key, does not exist.
        SecretRefMissing = "secret_ref_missing",
        /// A failure that is retried with backoff (retried codes, timeouts, lost connections).
        Transient = "transient",
        /// The TLS handshake with the server failed (certificate not trusted, expired, wrong name).
        TlsHandshake = "tls_handshake",
        /// A certificate, key or CA file cannot be read.
        Unreadable = "unreadable",
        /// A certificate, key or CA file is not valid PEM, or the key does not match.
        Malformed = "malformed",
        /// The reconciler's client certificate has expired (the server said so with the
        /// `certificate_expired` alert).
        Expired = "expired",
        /// The server says the reconciler's client certificate was revoked.
        Revoked = "revoked",
        /// The server rejected the reconciler's client certificate (`bad_certificate`,
        /// `unsupported_certificate`, `certificate_unknown`).
        Rejected = "rejected",
        /// A trust anchor is missing: the server does not know the CA that issued the client
        /// certificate (`unknown_ca`), or `ca.crt` does not hold the CA of the server's certificate.
        Untrusted = "untrusted",
        /// The object was changed on the server by something else.
        Edited = "edited",
        /// The object was removed from the server by something else.
        Removed = "removed",
        /// The server's history restarted (a restore from a backup, a new database).
        BackupRestore = "backup_restore",
        /// A ClientPolicy rule does not allow a field's value.
        PolicyRule = "policy_rule",
        /// The namespace holds as many OIDCClients as a ClientPolicy allows.
        NamespaceLimit = "namespace_limit",
        /// A ClientPolicy requires an approval (a new client, or a change to a listed field).
        ApprovalRequired = "approval_required",
        /// Another reconciler's manager wrote the object before this resource ever did (two
        /// clusters or shards declare the same object).
        Claimed = "claimed",
        /// Another reconciler's manager wrote over this resource's last write (a handover).
        TakenOver = "taken_over",
        /// A ClientPolicy's namespace selector holds a label key, value or operator the API server
        /// refuses (it would refuse the generated ValidatingAdmissionPolicy).
        InvalidSelector = "invalid_selector",
        /// A check generated from a ClientPolicy could cost more than the API server lets one CEL
        /// expression cost, on a resource within its CRD's bounds.
        CostLimit = "cost_limit",
        /// A check generated from a ClientPolicy does not compile, or its pattern would not mean
        /// the same to the API server and the reconciler.
        UncompilableRule = "uncompilable_rule",
        /// The value in the Secret the manifest references (`spec.secret.secretRef`, an identity
        /// provider's `secretRef`) changed, and the write sent the new value.
        SecretChanged = "secret_changed",
        /// A new generation declares what a drift had changed on the server: the change is kept,
        /// and adopted as the declared state.
        DriftKept = "drift_kept",
    }
}

impl Cause {
    /// The cause of a connection that could not be made.
    pub const fn from_connect(problem: ConnectProblem) -> Cause {
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
    pub fn from_error(reason: ErrorReason, code: Code) -> Cause {
        Cause::from_error_reason(reason).unwrap_or_else(|| Cause::from_code(code))
    }

    /// Like [`Cause::from_error`], with the reason as the name in `google.rpc.ErrorInfo`
    /// (`"OUTSIDE_GRANT"`). A reason this build does not know falls back to the code, as the
    /// contract asks.
    pub fn from_error_info(reason: Option<&str>, code: Code) -> Cause {
        let reason = reason
            .and_then(ErrorReason::from_str_name)
            .unwrap_or(ErrorReason::Unspecified);
        Cause::from_error(reason, code)
    }

    /// The cause a stable reason names; `None` for `ERROR_REASON_UNSPECIFIED`.
    pub const fn from_error_reason(reason: ErrorReason) -> Option<Cause> {
        Some(match reason {
            ErrorReason::Unspecified => return None,
            ErrorReason::IdentityNotAllowed => Cause::IdentityNotAllowed,
            ErrorReason::OperationNotGranted => Cause::OperationNotGranted,
            ErrorReason::OutsideGrant => Cause::OutsideGrant,
            ErrorReason::RevisionMismatch => Cause::RevisionMismatch,
            ErrorReason::ManagerConflict => Cause::ManagerConflict,
            ErrorReason::UnknownIssuer => Cause::UnknownIssuer,
            ErrorReason::ReservedName => Cause::ReservedName,
            ErrorReason::FapiRequirements => Cause::FapiRequirements,
            ErrorReason::InvalidField => Cause::FieldViolation,
            ErrorReason::ObjectNotFound => Cause::Removed,
            ErrorReason::ReferenceNotFound => Cause::ReferenceNotFound,
            ErrorReason::RateLimited => Cause::Transient,
            ErrorReason::OrganizationNotEmpty => Cause::OrganizationNotEmpty,
        })
    }

    /// The cause of a gRPC code that came without a stable reason.
    pub const fn from_code(code: Code) -> Cause {
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
            Code::FailedPrecondition | Code::AlreadyExists | Code::DataLoss => {
                Cause::ServerObjection
            }
        }
    }

    /// Whether the cause is about the reconciler's identity or grant (the platform team's), not
    /// the manifest (the application team's).
    pub const fn is_grant(self) -> bool {
        matches!(
            self,
            Cause::IdentityNotAllowed | Cause::OperationNotGranted | Cause::OutsideGrant
        )
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

/// Whether a call that failed with `code` is retried with backoff.
pub fn is_retried(code: Code) -> bool {
    RETRIED_CODES.contains(&code)
}

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
    fn every_error_reason_value_is_mapped() {
        // Walk the generated enum by number, so a reason added to the proto fails here until it
        // is added to the list above (and to the match, which the compiler enforces).
        let known: Vec<ErrorReason> = (0..64)
            .filter_map(|n| ErrorReason::try_from(n).ok())
            .collect();
        assert_eq!(known, ALL_ERROR_REASONS.to_vec());
        for reason in ALL_ERROR_REASONS {
            let cause = Cause::from_error_reason(reason);
            assert_eq!(
                cause.is_none(),
                reason == ErrorReason::Unspecified,
                "{reason:?}"
            );
        }
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
                Cause::from_error(reason, code),
                cause,
                "{reason:?} {code:?}"
            );
        }
    }

    #[test]
    fn error_info_names_parse_and_unknown_names_fall_back_to_the_code() {
        assert_eq!(
            Cause::from_error_info(Some("OUTSIDE_GRANT"), Code::PermissionDenied),
            Cause::OutsideGrant
        );
        assert_eq!(
            Cause::from_error_info(Some("A_REASON_FROM_A_NEWER_SERVER"), Code::InvalidArgument),
            Cause::FieldViolation
        );
        assert_eq!(
            Cause::from_error_info(None, Code::Unavailable),
            Cause::Transient
        );
    }

    #[test]
    fn exactly_the_five_documented_codes_are_retried() {
        let retried: Vec<Code> = (0..17)
            .map(Code::from_i32)
            .filter(|c| is_retried(*c))
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
            assert_eq!(Cause::from_code(code), Cause::Transient, "{code:?}");
        }
    }

    #[test]
    fn code_labels_are_the_camel_case_names() {
        for n in 0..17 {
            let code = Code::from_i32(n);
            assert_eq!(code_label(code), format!("{code:?}"));
        }
    }

    #[test]
    fn cause_labels_are_unique_bounded_snake_case() {
        let mut seen = std::collections::BTreeSet::new();
        for cause in Cause::ALL {
            let label = cause.as_str();
            assert!(seen.insert(label), "duplicate cause label {label}");
            assert!(label.len() <= 32, "{label}");
            assert!(
                label.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{label}"
            );
        }
    }

    #[test]
    fn grant_causes_are_the_three_grant_reasons() {
        let grant: Vec<Cause> = Cause::ALL.into_iter().filter(|c| c.is_grant()).collect();
        assert_eq!(
            grant,
            vec![
                Cause::IdentityNotAllowed,
                Cause::OperationNotGranted,
                Cause::OutsideGrant
            ]
        );
    }
}
