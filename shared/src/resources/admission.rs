//! What the API server would refuse at admission, checked without a cluster: for
//! `kubectl nauthera diagnose -f`, and for tests of the schemas themselves.
//!
//! The checks are the kind's OpenAPI schema as generated into its CRD (types, enums, lengths,
//! patterns, required and unknown fields) and its CEL rules (`x-kubernetes-validations`), which
//! each kind mirrors in Rust (`rule_outcomes`); a test fails when a rule has no mirror. Whether a
//! branding can be encoded is not an admission question: see `crate::branding::encode`.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{IdentityProvider, OIDCClient, Organization, crds};

/// One reason the API server would refuse a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The field, in the manifest's naming (`spec.redirectUris[0]`); `kind`, `apiVersion` or
    /// `metadata.name` for the envelope.
    pub field: String,
    /// What is wrong, for people.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl Violation {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The outcome of one CEL rule, evaluated in Rust.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RuleOutcome {
    /// Where the rule sits in the schema: `spec` or `spec.secret`.
    pub at: &'static str,
    /// The rule's text, exactly as in the schema.
    pub rule: &'static str,
    /// Whether the object satisfies it.
    pub holds: bool,
}

impl RuleOutcome {
    pub(crate) fn new(at: &'static str, rule: &'static str, holds: bool) -> Self {
        Self { at, rule, holds }
    }
}

/// Checks a manifest of one of this project's kinds (as JSON; a YAML document read into a
/// `serde_json::Value` works) the way the API server would admit it. `old` is the object in the
/// cluster, if any, for rules that compare with it (an organization's slug is immutable). Returns
/// nothing when the manifest would be admitted.
pub fn admission_violations(document: &Value, old: Option<&Value>) -> Vec<Violation> {
    let expected_version = format!("{}/{}", crate::GROUP, crate::VERSION);
    let kind = document
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(crd) = crds().into_iter().find(|crd| crd.spec.names.kind == kind) else {
        return vec![Violation::new(
            "kind",
            format!(
                "{kind:?} is not a kind of {expected_version}; expected OIDCClient, Branding, IdentityProvider or Organization"
            ),
        )];
    };
    let mut violations = Vec::new();
    if document.get("apiVersion").and_then(Value::as_str) != Some(&expected_version) {
        violations.push(Violation::new(
            "apiVersion",
            format!("must be {expected_version}"),
        ));
    }
    if document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        violations.push(Violation::new("metadata.name", "required"));
    }
    violations.extend(metadata_violations(document.get("metadata")));
    let schema = crd
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| {
            s.open_api_v3_schema
                .as_ref()
                .and_then(|schema| serde_json::to_value(schema).ok())
        });
    let Some(schema) = schema else {
        return violations;
    };
    // The API server checks the envelope itself; the schema covers the rest.
    let mut body = document.clone();
    if let Some(fields) = body.as_object_mut() {
        for envelope in ["apiVersion", "kind", "metadata"] {
            fields.remove(envelope);
        }
    }
    schema_violations(&schema, &body, "", &mut violations);
    if violations.is_empty() {
        for outcome in rule_outcomes(kind, document, old)
            .into_iter()
            .filter(|o| !o.holds)
        {
            let (field, message) = match rule_declaration(&schema, outcome) {
                // The field the rule names (`fieldPath`), as the API server reports it.
                Some(declared) => (
                    format!(
                        "{}{}",
                        outcome.at,
                        declared["fieldPath"].as_str().unwrap_or_default()
                    ),
                    declared["message"].as_str().unwrap_or(outcome.rule),
                ),
                None => (outcome.at.to_owned(), outcome.rule),
            };
            violations.push(Violation::new(field, message));
        }
    }
    violations
}

/// The metadata as the API server reads it, an `ObjectMeta`: a field of the wrong type (a
/// `namespace` that is a list) is refused. Unknown fields are dropped by the API server, and a
/// missing or empty name is reported as `metadata.name` already.
fn metadata_violations(metadata: Option<&Value>) -> Vec<Violation> {
    let Some(metadata) = metadata.filter(|m| !m.is_null()) else {
        return Vec::new();
    };
    let Some(fields) = metadata.as_object() else {
        return vec![Violation::new("metadata", "must be an object")];
    };
    fields
        .iter()
        .filter(|(name, value)| *name != "name" || value.is_string())
        .filter_map(|(name, value)| {
            let single = Value::Object([(name.clone(), value.clone())].into_iter().collect());
            let error = serde_json::from_value::<ObjectMeta>(single).err()?;
            let message: String = error.to_string().chars().take(200).collect();
            Some(Violation::new(format!("metadata.{name}"), message))
        })
        .collect()
}

/// The CEL rules of a kind, evaluated on a document that passed its schema.
pub(crate) fn rule_outcomes(kind: &str, document: &Value, old: Option<&Value>) -> Vec<RuleOutcome> {
    fn typed<T: DeserializeOwned>(value: &Value) -> Option<T> {
        serde_json::from_value(value.clone()).ok()
    }
    match kind {
        "OIDCClient" => typed::<OIDCClient>(document)
            .map(|client| client.spec.rule_outcomes())
            .unwrap_or_default(),
        "IdentityProvider" => typed::<IdentityProvider>(document)
            .map(|provider| provider.spec.rule_outcomes())
            .unwrap_or_default(),
        "Organization" => typed::<Organization>(document)
            .map(|organization| {
                let old = old.and_then(typed::<Organization>);
                organization
                    .spec
                    .rule_outcomes(old.as_ref().map(|o| &o.spec))
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The rule as the schema declares it at its place (its message and field path).
fn rule_declaration(schema: &Value, outcome: RuleOutcome) -> Option<&Value> {
    let node = outcome
        .at
        .split('.')
        .try_fold(schema, |node, name| node.get("properties")?.get(name))?;
    node.get("x-kubernetes-validations")?
        .as_array()?
        .iter()
        .find(|rule| rule["rule"] == outcome.rule)
}

/// The OpenAPI checks the generated schemas use, as the API server applies them.
fn schema_violations(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let field = || path.strip_prefix('.').unwrap_or(path).to_owned();
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) {
            out.push(Violation::new(field(), "must not be null"));
        }
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        out.push(Violation::new(
            field(),
            format!("{value} is not one of {}", allowed.join(", ")),
        ));
    }
    let limit = |key: &str| {
        schema
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    match (schema.get("type").and_then(Value::as_str), value) {
        (Some("string"), Value::String(text)) => {
            let chars = text.chars().count();
            if let Some(max) = limit("maxLength").filter(|&max| chars > max) {
                out.push(Violation::new(
                    field(),
                    format!("{chars} characters, at most {max} allowed"),
                ));
            }
            if let Some(min) = limit("minLength").filter(|&min| chars < min) {
                out.push(Violation::new(
                    field(),
                    format!("{chars} characters, at least {min} required"),
                ));
            }
            // The API server reads a pattern as Go's RE2 does (ASCII `\s`, `\d`, `\w`).
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
                && compiled_pattern(pattern).is_some_and(|re| !re.is_match(text))
            {
                let shown: String = text.chars().take(80).collect();
                out.push(Violation::new(
                    field(),
                    format!("{shown:?} does not match {pattern}"),
                ));
            }
            // The API server checks a `date-time` string as RFC 3339, as a `Time` is read back.
            if schema.get("format").and_then(Value::as_str) == Some("date-time")
                && text.parse::<jiff::Timestamp>().is_err()
            {
                let shown: String = text.chars().take(80).collect();
                out.push(Violation::new(
                    field(),
                    format!("{shown:?} is not a date-time (RFC 3339, e.g. 2026-12-01T10:00:00Z)"),
                ));
            }
        }
        (Some("boolean"), Value::Bool(_)) => {}
        (Some("integer"), Value::Number(n)) if n.is_i64() || n.is_u64() => {}
        (Some("array"), Value::Array(items)) => {
            if let Some(max) = limit("maxItems").filter(|&max| items.len() > max) {
                out.push(Violation::new(
                    field(),
                    format!("{} entries, at most {max} allowed", items.len()),
                ));
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    schema_violations(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        (Some("object"), Value::Object(fields)) => {
            let required = schema.get("required").and_then(Value::as_array);
            for name in required.into_iter().flatten().filter_map(Value::as_str) {
                if !fields.contains_key(name) {
                    out.push(Violation::new(
                        format!("{}.{name}", field()).trim_start_matches('.'),
                        "required",
                    ));
                }
            }
            if let Some(max) = limit("maxProperties").filter(|&max| fields.len() > max) {
                out.push(Violation::new(
                    field(),
                    format!("{} entries, at most {max} allowed", fields.len()),
                ));
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (name, value) in fields {
                // A name a path could not show (empty, or with `.`, `[` or `]`) is quoted.
                let child = if name.is_empty() || name.contains(['.', '[', ']']) {
                    format!("{path}[{name:?}]")
                } else {
                    format!("{path}.{name}")
                };
                match (properties.and_then(|p| p.get(name)), additional) {
                    (Some(property), _) | (None, Some(property)) => {
                        schema_violations(property, value, &child, out);
                    }
                    (None, None) if properties.is_some() => out.push(Violation::new(
                        child.strip_prefix('.').unwrap_or(&child),
                        "unknown field (check its spelling)",
                    )),
                    (None, None) => {}
                }
            }
        }
        (Some(expected), _) => out.push(Violation::new(
            field(),
            format!("{value} is not of type {expected}"),
        )),
        (None, _) => {}
    }
}

/// A schema pattern compiled as the API server reads it, once per pattern (the schemas' patterns
/// are few and fixed).
fn compiled_pattern(pattern: &str) -> Option<regex::Regex> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock, PoisonError};
    static COMPILED: OnceLock<Mutex<HashMap<String, Option<regex::Regex>>>> = OnceLock::new();
    let mut compiled = COMPILED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    compiled
        .entry(pattern.to_owned())
        .or_insert_with(|| crate::re2::compile(pattern).ok())
        .clone()
}
