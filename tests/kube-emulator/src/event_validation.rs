//! Validation of Events, as the API server's `ValidateEventCreate` and `ValidateEventUpdate` do
//! it (`pkg/apis/core/validation/events.go`), on the stored core form whichever API the client
//! wrote through.
//!
//! Every Event passes the legacy checks: one without an `eventTime` (an old-style event) only
//! needs its namespace to agree with `involvedObject.namespace`; one with an `eventTime` also
//! needs a reporting controller (a qualified name), a reporting instance, an action and a
//! reason (each at most 128 characters) and a note of at most 1024. Writes through
//! `events.k8s.io/v1` are held to more: on create a DNS-subdomain name, an `eventTime`, a
//! `type` of `Normal` or `Warning`, a `series` of at least 2 with a `lastObservedTime`, and none
//! of the deprecated fields; on update the series is checked when it changes and everything
//! else is immutable. Field paths are the core ones (`involvedObject`, `message`, ...) except the
//! reporting controller's, named as the API the client used names it.

use serde_json::Value;

use crate::status::Cause;

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;
const QUALIFIED_NAME_LIMIT: usize = 63;
const SUBDOMAIN_LIMIT: usize = 253;

const QUALIFIED_NAME_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The API an Event was written through: core `v1` keeps the legacy rules alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventApi {
    Core,
    EventsV1,
}

fn text<'a>(event: &'a Value, pointer: &str) -> &'a str {
    event
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether a time field is set (a zero Go time reads as absent or null).
fn is_set(event: &Value, pointer: &str) -> bool {
    event
        .pointer(pointer)
        .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
}

/// A string as Go's `%q` prints it.
fn quoted(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn required(field: &str) -> Cause {
    Cause {
        kind: "FieldValueRequired",
        message: "Required value".into(),
        field: field.into(),
    }
}

/// An invalid value, `rendered` as the API server renders it (a quoted string, a number, JSON).
fn invalid(field: &str, rendered: &str, detail: &str) -> Cause {
    Cause {
        kind: "FieldValueInvalid",
        message: format!("Invalid value: {rendered}: {detail}"),
        field: field.into(),
    }
}

fn invalid_text(field: &str, value: &str, detail: &str) -> Cause {
    invalid(field, &quoted(value), detail)
}

fn is_qualified_name_part(name: &str) -> bool {
    let bytes = name.as_bytes();
    let alphanumeric = |b: &u8| b.is_ascii_alphanumeric();
    match bytes {
        [] => false,
        [only] => alphanumeric(only),
        [first, middle @ .., last] => {
            alphanumeric(first)
                && alphanumeric(last)
                && middle
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
    }
}

fn is_dns_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let plain = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match bytes {
        [] => false,
        [only] => plain(only),
        [first, middle @ .., last] => {
            plain(first) && plain(last) && middle.iter().all(|b| plain(b) || *b == b'-')
        }
    }
}

/// `IsDNS1123Subdomain`'s messages.
fn subdomain_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > SUBDOMAIN_LIMIT {
        problems.push(format!("must be no more than {SUBDOMAIN_LIMIT} characters"));
    }
    if !value.split('.').all(is_dns_label) {
        problems.push(SUBDOMAIN_MESSAGE.to_owned());
    }
    problems
}

/// `IsQualifiedName`'s messages.
fn qualified_name_problems(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut problems = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_owned());
            } else {
                problems.extend(
                    subdomain_problems(prefix)
                        .into_iter()
                        .map(|p| format!("prefix part {p}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MESSAGE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > QUALIFIED_NAME_LIMIT {
        problems.push(format!(
            "name part must be no more than {QUALIFIED_NAME_LIMIT} characters"
        ));
    }
    if !is_qualified_name_part(name) {
        problems.push(format!("name part {QUALIFIED_NAME_MESSAGE}"));
    }
    problems
}

/// The checks every Event passes, whichever API wrote it.
fn legacy(event: &Value, api: EventApi) -> Vec<Cause> {
    let mut causes = Vec::new();
    let controller_field = match api {
        EventApi::Core => "reportingComponent",
        EventApi::EventsV1 => "reportingController",
    };
    let namespace = text(event, "/metadata/namespace");
    let involved = text(event, "/involvedObject/namespace");
    let mismatch = || {
        invalid_text(
            "involvedObject.namespace",
            involved,
            "does not match event.namespace",
        )
    };
    if !is_set(event, "/eventTime") {
        let agrees = if involved.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == involved
        };
        if !agrees {
            causes.push(mismatch());
        }
    } else {
        if involved.is_empty() && namespace != "default" && namespace != "kube-system" {
            causes.push(mismatch());
        }
        let controller = text(event, "/reportingComponent");
        if controller.is_empty() {
            causes.push(required(controller_field));
        }
        for problem in qualified_name_problems(controller) {
            causes.push(invalid_text(controller_field, controller, &problem));
        }
        for (field, limit) in [
            ("reportingInstance", REPORTING_INSTANCE_LIMIT),
            ("action", ACTION_LIMIT),
            ("reason", REASON_LIMIT),
        ] {
            let value = text(event, &format!("/{field}"));
            if value.is_empty() {
                causes.push(required(field));
            }
            if value.len() > limit {
                causes.push(invalid_text(
                    field,
                    "",
                    &format!("can have at most {limit} characters"),
                ));
            }
        }
        if text(event, "/message").len() > NOTE_LIMIT {
            causes.push(invalid_text(
                "message",
                "",
                &format!("can have at most {NOTE_LIMIT} characters"),
            ));
        }
    }
    for problem in subdomain_problems(namespace) {
        causes.push(invalid_text("namespace", namespace, &problem));
    }
    causes
}

fn series(event: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(series) = event.get("series").filter(|s| !s.is_null()) else {
        return causes;
    };
    if series["count"].as_i64().unwrap_or(0) < 2 {
        causes.push(invalid_text("series.count", "", "should be at least 2"));
    }
    if !is_set(series, "/lastObservedTime") {
        causes.push(required("series.lastObservedTime"));
    }
    causes
}

/// A new Event.
pub fn validate_create(event: &Value, api: EventApi) -> Vec<Cause> {
    let mut causes = legacy(event, api);
    if api == EventApi::Core {
        return causes;
    }
    let name = text(event, "/metadata/name");
    for problem in subdomain_problems(name) {
        causes.push(invalid_text("metadata.name", name, &problem));
    }
    causes.extend(series(event));
    if !is_set(event, "/eventTime") {
        causes.push(required("eventTime"));
    }
    let kind = text(event, "/type");
    if kind != "Normal" && kind != "Warning" {
        causes.push(invalid_text(
            "type",
            "",
            &format!("has invalid value: {kind}"),
        ));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if is_set(event, &format!("/{field}")) {
            causes.push(invalid_text(field, "", "needs to be unset"));
        }
    }
    if event["count"].as_i64().unwrap_or(0) != 0 {
        causes.push(invalid_text("count", "", "needs to be unset"));
    }
    if !text(event, "/source/component").is_empty() || !text(event, "/source/host").is_empty() {
        causes.push(invalid_text("source", "", "needs to be unset"));
    }
    causes
}

/// A changed Event; `old` as stored.
pub fn validate_update(event: &Value, old: &Value, api: EventApi) -> Vec<Cause> {
    let mut causes = legacy(event, api);
    if api == EventApi::Core {
        return causes;
    }
    if zeroless(event.get("series")) != zeroless(old.get("series")) {
        causes.extend(series(event));
    }
    // In the API server's order (reason is checked twice there, and so reported twice); the
    // reporting controller is stored as `reportingComponent`.
    for (field, stored, render) in [
        ("involvedObject", "involvedObject", Render::Reference),
        ("reason", "reason", Render::Text),
        ("message", "message", Render::Text),
        ("source", "source", Render::Source),
        ("firstTimestamp", "firstTimestamp", Render::Time),
        ("lastTimestamp", "lastTimestamp", Render::Time),
        ("count", "count", Render::Number),
        ("reason", "reason", Render::Text),
        ("type", "type", Render::Text),
        ("eventTime", "eventTime", Render::Time),
        ("action", "action", Render::Text),
        ("related", "related", Render::OptionalReference),
        ("reportingController", "reportingComponent", Render::Text),
        ("reportingInstance", "reportingInstance", Render::Text),
    ] {
        let (now, before) = (event.get(stored), old.get(stored));
        let kept = if field == "eventTime" {
            same_microsecond(now, before)
        } else {
            zeroless(now) == zeroless(before)
        };
        if !kept {
            causes.push(invalid(field, &render.of(now), "field is immutable"));
        }
    }
    causes
}

/// A value as Go compares it after decoding: absent, null, empty and zero fields alike.
fn zeroless(value: Option<&Value>) -> Value {
    match value {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if s.is_empty() => Value::Null,
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => Value::Null,
        Some(Value::Object(map)) => {
            let kept: serde_json::Map<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), zeroless(Some(v))))
                .filter(|(_, v)| !v.is_null())
                .collect();
            if kept.is_empty() {
                Value::Null
            } else {
                Value::Object(kept)
            }
        }
        Some(other) => other.clone(),
    }
}

/// How the API server prints a value of each field's Go type.
#[derive(Debug, Clone, Copy)]
enum Render {
    Text,
    Number,
    Time,
    /// An internal `core.ObjectReference`: JSON with the Go field names.
    Reference,
    OptionalReference,
    /// An internal `core.EventSource`.
    Source,
}

impl Render {
    fn of(self, value: Option<&Value>) -> String {
        let value = value.filter(|v| !v.is_null());
        let field = |name: &str| {
            quoted(
                value
                    .and_then(|v| v.get(name))
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )
        };
        match self {
            Self::Text => quoted(value.and_then(Value::as_str).unwrap_or_default()),
            Self::Number => value.and_then(Value::as_i64).unwrap_or(0).to_string(),
            Self::Time => value.map_or_else(|| "null".to_owned(), Value::to_string),
            Self::OptionalReference if value.is_none() => "null".to_owned(),
            Self::Reference | Self::OptionalReference => format!(
                "{{\"Kind\":{},\"Namespace\":{},\"Name\":{},\"UID\":{},\"APIVersion\":{},\"ResourceVersion\":{},\"FieldPath\":{}}}",
                field("kind"),
                field("namespace"),
                field("name"),
                field("uid"),
                field("apiVersion"),
                field("resourceVersion"),
                field("fieldPath")
            ),
            Self::Source => format!(
                "{{\"Component\":{},\"Host\":{}}}",
                field("component"),
                field("host")
            ),
        }
    }
}

/// Whether two times are the same to the microsecond (the API server tolerates finer changes).
fn same_microsecond(a: Option<&Value>, b: Option<&Value>) -> bool {
    let micros = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_microsecond())
    };
    let present = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
    match (micros(a), micros(b)) {
        (Some(a), Some(b)) => a == b,
        _ => present(a) == present(b) && a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn new_style() -> Value {
        json!({"metadata": {"name": "web.1", "namespace": "team"}, "eventTime": "2025-01-01T00:00:00.000000Z",
            "involvedObject": {"kind": "OIDCClient", "name": "web", "namespace": "team"},
            "reportingComponent": "nauthera-reconciler", "reportingInstance": "pod-1",
            "action": "Reconcile", "reason": "Registered", "type": "Normal", "message": "ok"})
    }

    fn fields(causes: &[Cause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn a_well_formed_event_passes_both_apis() {
        assert!(validate_create(&new_style(), EventApi::EventsV1).is_empty());
        assert!(validate_create(&new_style(), EventApi::Core).is_empty());
        let old_style = json!({"metadata": {"name": "e", "namespace": "team"}, "reason": "R",
            "involvedObject": {"namespace": "team"}, "count": 3, "source": {"component": "c"}});
        assert!(validate_create(&old_style, EventApi::Core).is_empty());
    }

    #[test]
    fn reporting_fields_are_bounded_and_named_per_api() {
        let mut event = new_style();
        event["reportingComponent"] = json!("my controller");
        event["reportingInstance"] = json!("i".repeat(129));
        event["action"] = json!("");
        let found = fields(&validate_create(&event, EventApi::EventsV1));
        assert_eq!(
            found[0],
            format!(
                "reportingController: Invalid value: \"my controller\": name part {QUALIFIED_NAME_MESSAGE}"
            )
        );
        assert_eq!(
            found[1],
            "reportingInstance: Invalid value: \"\": can have at most 128 characters"
        );
        assert_eq!(found[2], "action: Required value");
        assert_eq!(found.len(), 3, "{found:?}");
        let core = fields(&validate_create(&event, EventApi::Core));
        assert!(core[0].starts_with("reportingComponent: "), "{core:?}");
        event["reportingComponent"] = json!("c".repeat(64));
        let long = fields(&validate_create(&event, EventApi::EventsV1));
        assert!(
            long[0].ends_with("name part must be no more than 63 characters"),
            "{long:?}"
        );
    }

    #[test]
    fn the_new_api_refuses_deprecated_fields_and_checks_series() {
        let mut event = new_style();
        event["count"] = json!(2);
        event["source"] = json!({"component": "x"});
        event["type"] = json!("Info");
        event["series"] = json!({"count": 1});
        let found = fields(&validate_create(&event, EventApi::EventsV1));
        assert_eq!(
            found,
            [
                "series.count: Invalid value: \"\": should be at least 2",
                "series.lastObservedTime: Required value",
                "type: Invalid value: \"\": has invalid value: Info",
                "count: Invalid value: \"\": needs to be unset",
                "source: Invalid value: \"\": needs to be unset",
            ]
        );
        // An event regarding a cluster-scoped object lives in default or kube-system.
        let mut cluster_scoped = new_style();
        cluster_scoped["involvedObject"]["namespace"] = Value::Null;
        assert_eq!(
            fields(&validate_create(&cluster_scoped, EventApi::EventsV1)),
            ["involvedObject.namespace: Invalid value: \"\": does not match event.namespace"]
        );
        cluster_scoped["metadata"]["namespace"] = json!("default");
        assert!(validate_create(&cluster_scoped, EventApi::EventsV1).is_empty());
    }

    #[test]
    fn updates_through_the_new_api_keep_what_was_recorded() {
        let old = new_style();
        let mut repeated = old.clone();
        repeated["series"] = json!({"count": 2, "lastObservedTime": "2025-01-01T00:00:01.000000Z"});
        assert!(validate_update(&repeated, &old, EventApi::EventsV1).is_empty());
        let mut changed = repeated.clone();
        changed["reason"] = json!("Other");
        changed["reportingComponent"] = json!("someone-else");
        let found = fields(&validate_update(&changed, &old, EventApi::EventsV1));
        assert_eq!(
            found,
            [
                "reason: Invalid value: \"Other\": field is immutable",
                "reason: Invalid value: \"Other\": field is immutable",
                "reportingController: Invalid value: \"someone-else\": field is immutable",
            ]
        );
        assert!(validate_update(&changed, &old, EventApi::Core).is_empty());
    }
}
