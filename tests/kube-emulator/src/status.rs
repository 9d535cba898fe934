//! Errors as the API server reports them: a `meta.k8s.io/v1` `Status` with a code, a stable
//! reason and details naming the object and the offending fields.

use serde_json::{Value, json};

/// The stable `reason` values of a failure `Status` that the emulator answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusReason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    AlreadyExists,
    Conflict,
    Invalid,
    RequestEntityTooLarge,
    Expired,
    MethodNotAllowed,
    UnsupportedMediaType,
    NotAcceptable,
    InternalError,
}

impl StatusReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "BadRequest",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden => "Forbidden",
            Self::NotFound => "NotFound",
            Self::AlreadyExists => "AlreadyExists",
            Self::Conflict => "Conflict",
            Self::Invalid => "Invalid",
            Self::RequestEntityTooLarge => "RequestEntityTooLarge",
            Self::Expired => "Expired",
            Self::MethodNotAllowed => "MethodNotAllowed",
            Self::UnsupportedMediaType => "UnsupportedMediaType",
            Self::NotAcceptable => "NotAcceptable",
            Self::InternalError => "InternalError",
        }
    }

    pub fn code(self) -> u16 {
        match self {
            Self::BadRequest => 400,
            Self::Unauthorized => 401,
            Self::Forbidden => 403,
            Self::NotFound => 404,
            Self::AlreadyExists | Self::Conflict => 409,
            Self::Invalid => 422,
            Self::RequestEntityTooLarge => 413,
            Self::Expired => 410,
            Self::MethodNotAllowed => 405,
            Self::UnsupportedMediaType => 415,
            Self::NotAcceptable => 406,
            Self::InternalError => 500,
        }
    }
}

/// One entry of `details.causes`: which field failed and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The cause type, e.g. `FieldValueRequired`, `FieldValueInvalid`, `FieldManagerConflict`
    /// (empty: none, as in an admission policy's refusal).
    pub kind: &'static str,
    pub message: String,
    /// The field path in the API server's notation, e.g. `spec.issuer`.
    pub field: String,
}

/// A failed request, rendered as a `Status` body (boxed: errors travel far and rarely).
#[derive(Debug, Clone)]
pub struct ApiError(Box<ApiErrorDetails>);

impl std::ops::Deref for ApiError {
    type Target = ApiErrorDetails;

    fn deref(&self) -> &ApiErrorDetails {
        &self.0
    }
}

impl std::ops::DerefMut for ApiError {
    fn deref_mut(&mut self) -> &mut ApiErrorDetails {
        &mut self.0
    }
}

/// What a failure says.
#[derive(Debug, Clone)]
pub struct ApiErrorDetails {
    pub reason: StatusReason,
    pub message: String,
    pub name: Option<String>,
    pub group: Option<String>,
    /// The kind (for Invalid) or the resource plural (for the other reasons), as the server says it.
    pub kind: Option<String>,
    pub causes: Vec<Cause>,
    /// `metadata.continue`: where an expired listing may go on from.
    pub continue_token: Option<String>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(reason: StatusReason, message: impl Into<String>) -> Self {
        Self(Box::new(ApiErrorDetails {
            reason,
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            continue_token: None,
        }))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusReason::BadRequest, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusReason::InternalError, message)
    }

    /// `404 NotFound` for a named object: `secrets "x" not found`.
    pub fn not_found(resource: &ResourceName<'_>, name: &str) -> Self {
        Self::new(
            StatusReason::NotFound,
            format!("{} \"{name}\" not found", resource.qualified()),
        )
        .with_details(name, resource)
    }

    pub fn already_exists(resource: &ResourceName<'_>, name: &str) -> Self {
        Self::new(
            StatusReason::AlreadyExists,
            format!("{} \"{name}\" already exists", resource.qualified()),
        )
        .with_details(name, resource)
    }

    /// `409 Conflict` for a stale resourceVersion.
    pub fn stale(resource: &ResourceName<'_>, name: &str) -> Self {
        Self::new(
            StatusReason::Conflict,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                resource.qualified()
            ),
        )
        .with_details(name, resource)
    }

    /// `422 Invalid` naming every failing field.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        // Each distinct cause once in the message, as the API server's aggregate prints them.
        let mut summary: Vec<String> = Vec::new();
        for cause in &causes {
            let line = format!("{}: {}", cause.field, cause.message);
            if !summary.contains(&line) {
                summary.push(line);
            }
        }
        let message = match summary.len() {
            1 => format!("{qualified} \"{name}\" is invalid: {}", summary[0]),
            _ => format!(
                "{qualified} \"{name}\" is invalid: [{}]",
                summary.join(", ")
            ),
        };
        Self(Box::new(ApiErrorDetails {
            reason: StatusReason::Invalid,
            message,
            name: Some(name.to_owned()),
            group: Some(group.to_owned()),
            kind: Some(kind.to_owned()),
            causes,
            continue_token: None,
        }))
    }

    /// `410 Expired` for a watch or list from a resourceVersion older than the kept history.
    pub fn expired(requested: u64, oldest: u64) -> Self {
        Self::new(
            StatusReason::Expired,
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// `410 Expired` for a later page of a list whose snapshot is older than the kept history,
    /// with the server's words and a token for the rest of the list as it stands now.
    pub fn expired_continue(rest: String) -> Self {
        let mut error = Self::new(
            StatusReason::Expired,
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter, or use the continue token \
             in this response to retrieve the remainder of the results. Continuing with the \
             provided token results in an inconsistent list - objects that were created, \
             modified, or deleted between the time the first chunk was returned and now may show \
             up in the list.",
        );
        error.continue_token = Some(rest);
        error
    }

    fn with_details(mut self, name: &str, resource: &ResourceName<'_>) -> Self {
        self.name = Some(name.to_owned());
        self.group = Some(resource.group.to_owned());
        self.kind = Some(resource.plural.to_owned());
        self
    }

    pub fn code(&self) -> u16 {
        self.reason.code()
    }

    /// The `Status` object the API server sends for this failure.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason.as_str(),
            "code": self.code(),
        });
        let mut details = serde_json::Map::new();
        if let Some(name) = &self.name {
            details.insert("name".into(), json!(name));
        }
        if let Some(group) = self.group.as_ref().filter(|g| !g.is_empty()) {
            details.insert("group".into(), json!(group));
        }
        if let Some(kind) = &self.kind {
            details.insert("kind".into(), json!(kind));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| {
                    // Empty parts are left out, as Go's `omitempty` does.
                    let mut cause = serde_json::Map::new();
                    for (key, value) in [
                        ("reason", c.kind),
                        ("message", &c.message),
                        ("field", &c.field),
                    ] {
                        if !value.is_empty() {
                            cause.insert(key.into(), json!(value));
                        }
                    }
                    Value::Object(cause)
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        if let Some(token) = &self.continue_token {
            status["metadata"]["continue"] = json!(token);
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code(),
            self.reason.as_str(),
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

/// A resource's group and plural, for messages such as `oidcclients.nauthera.io "x" not found`.
#[derive(Debug, Clone, Copy)]
pub struct ResourceName<'a> {
    pub group: &'a str,
    pub plural: &'a str,
}

impl ResourceName<'_> {
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}
