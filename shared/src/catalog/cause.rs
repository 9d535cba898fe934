//! Causes: the bounded `cause` label of `nauthera_operator_reconciles_total`, and the server's
//! stable reasons they come from. How a gRPC code or a failed connection maps onto a cause is
//! the client's part (`nauthera_client::causes`).

use serde::{Deserialize, Serialize};

use super::words::words;

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
        /// names) is not Registered, or the Branding or Secret it names does not exist (or the
        /// Secret lacks the key it names). It waits as
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
        /// A file of `spec.secret.template` does not render: the reconciler sends nothing.
        InvalidSecretTemplate = "invalid_secret_template",
        /// The Secret to write exists and is not owned by this resource.
        ForeignSecret = "foreign_secret",
        /// Kubernetes RBAC forbids the reconciler the Secret write or read.
        Forbidden = "forbidden",
        /// The key of a referenced Secret holds an empty or non-text value.
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
        /// Observed: the manifest declares what the server holds.
        Identical = "identical",
        /// Observed: the manifest and the server differ in the fields `status.observed` lists.
        Differs = "differs",
        /// Observed: the server holds no object of this name.
        NotOnServer = "not_on_server",
        /// The server holds an object of this name that somebody else wrote (not this
        /// reconciler, and not another reconciler of manifests): adopted only on request.
        ForeignObject = "foreign_object",
    }
}

words! {
    /// The stable reasons the server gives with a refusal (`google.rpc.ErrorInfo.reason`, the
    /// contract's `ErrorReason` names), as the model keeps them in `status.serverReason`. The
    /// contract's unspecified reason is no reason at all, so it has no word here.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum ServerReason {
        IdentityNotAllowed = "IDENTITY_NOT_ALLOWED",
        OperationNotGranted = "OPERATION_NOT_GRANTED",
        OutsideGrant = "OUTSIDE_GRANT",
        RevisionMismatch = "REVISION_MISMATCH",
        ManagerConflict = "MANAGER_CONFLICT",
        UnknownIssuer = "UNKNOWN_ISSUER",
        ReservedName = "RESERVED_NAME",
        FapiRequirements = "FAPI_REQUIREMENTS",
        InvalidField = "INVALID_FIELD",
        ObjectNotFound = "OBJECT_NOT_FOUND",
        ReferenceNotFound = "REFERENCE_NOT_FOUND",
        RateLimited = "RATE_LIMITED",
        OrganizationNotEmpty = "ORGANIZATION_NOT_EMPTY",
    }
}

impl ServerReason {
    /// The reason of its contract name; `None` for a name this version does not know.
    pub fn parse(name: &str) -> Option<ServerReason> {
        ServerReason::ALL
            .into_iter()
            .find(|reason| reason.as_str() == name)
    }
}

impl Cause {
    /// The cause a stable reason names.
    pub const fn from_server_reason(reason: ServerReason) -> Cause {
        match reason {
            ServerReason::IdentityNotAllowed => Cause::IdentityNotAllowed,
            ServerReason::OperationNotGranted => Cause::OperationNotGranted,
            ServerReason::OutsideGrant => Cause::OutsideGrant,
            ServerReason::RevisionMismatch => Cause::RevisionMismatch,
            ServerReason::ManagerConflict => Cause::ManagerConflict,
            ServerReason::UnknownIssuer => Cause::UnknownIssuer,
            ServerReason::ReservedName => Cause::ReservedName,
            ServerReason::FapiRequirements => Cause::FapiRequirements,
            ServerReason::InvalidField => Cause::FieldViolation,
            ServerReason::ObjectNotFound => Cause::Removed,
            ServerReason::ReferenceNotFound => Cause::ReferenceNotFound,
            ServerReason::RateLimited => Cause::Transient,
            ServerReason::OrganizationNotEmpty => Cause::OrganizationNotEmpty,
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn server_reasons_parse_by_their_contract_names() {
        for reason in ServerReason::ALL {
            assert_eq!(ServerReason::parse(reason.as_str()), Some(reason));
        }
        assert_eq!(ServerReason::parse("ERROR_REASON_UNSPECIFIED"), None);
        assert_eq!(ServerReason::parse("A_REASON_FROM_A_NEWER_SERVER"), None);
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
