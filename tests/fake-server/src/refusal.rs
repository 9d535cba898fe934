//! A refusal the way nauthera-server sends one: a gRPC code, a stable reason, metadata and field
//! violations, encoded as `google.rpc.Status` details.

use std::collections::{BTreeMap, HashMap};

use nauthera_client::metadata_key_name;
use nauthera_proto::tonic_types::{ErrorDetails, StatusExt};
use nauthera_proto::v1::{ErrorMetadataKey, ErrorReason, FieldViolation};
use tonic::{Code, Status};

/// A refused call.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub code: Code,
    pub reason: ErrorReason,
    pub cause: String,
    pub metadata: BTreeMap<String, String>,
    pub violations: Vec<FieldViolation>,
}

impl Refusal {
    pub fn new(code: Code, reason: ErrorReason, cause: impl Into<String>) -> Refusal {
        Refusal {
            code,
            reason,
            cause: cause.into(),
            metadata: BTreeMap::new(),
            violations: Vec::new(),
        }
    }

    /// Adds one metadata entry.
    pub fn with(mut self, key: ErrorMetadataKey, value: impl Into<String>) -> Refusal {
        self.metadata.insert(metadata_key_name(key), value.into());
        self
    }

    /// Adds field violations.
    pub fn with_violations(mut self, violations: Vec<FieldViolation>) -> Refusal {
        self.violations.extend(violations);
        self
    }

    /// An `INVALID_FIELD` refusal of these violations.
    pub fn invalid_fields(violations: Vec<FieldViolation>) -> Refusal {
        let cause = violations
            .iter()
            .map(|violation| format!("{}: {}", violation.field, violation.description))
            .collect::<Vec<_>>()
            .join("; ");
        Refusal::new(Code::InvalidArgument, ErrorReason::InvalidField, cause)
            .with_violations(violations)
    }

    /// One invalid field.
    pub fn invalid_field(field: &str, description: &str) -> Refusal {
        Refusal::invalid_fields(vec![violation(field, description)])
    }

    /// `OBJECT_NOT_FOUND`.
    pub fn not_found(what: &str) -> Refusal {
        Refusal::new(
            Code::NotFound,
            ErrorReason::ObjectNotFound,
            format!("{what} does not exist"),
        )
    }

    /// The metadata value of a key.
    pub fn metadata_value(&self, key: ErrorMetadataKey) -> Option<&str> {
        self.metadata
            .get(&metadata_key_name(key))
            .map(String::as_str)
    }

    /// The status sent to the caller.
    pub fn to_status(&self) -> Status {
        let mut metadata: HashMap<String, String> = self
            .metadata
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        metadata.insert(
            metadata_key_name(ErrorMetadataKey::Cause),
            self.cause.clone(),
        );
        let mut details = ErrorDetails::with_error_info(
            self.reason.as_str_name(),
            nauthera_proto::ERROR_DOMAIN,
            metadata,
        );
        for violation in &self.violations {
            details.add_bad_request_violation(&violation.field, &violation.description);
        }
        let message = format!("{}: {}", self.reason.as_str_name(), self.cause);
        Status::with_error_details(self.code, message, details)
    }
}

/// A field violation.
pub fn violation(field: impl Into<String>, description: impl Into<String>) -> FieldViolation {
    FieldViolation {
        field: field.into(),
        description: description.into(),
    }
}
