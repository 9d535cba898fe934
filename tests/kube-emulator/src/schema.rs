//! Structural schemas of custom resources: pruning of unknown fields, defaulting and validation
//! of types, required fields, enums, bounds and CEL rules (see `validation_rules`), the way the
//! API server applies them. `format` is not validated.

use serde_json::{Map, Value};

use crate::status::Cause;

/// Fields of `metadata` an API server keeps; anything else there is dropped.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "selfLink",
];

fn preserves_unknown(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true)
}

fn is_embedded(schema: &Value) -> bool {
    schema["x-kubernetes-embedded-resource"].as_bool() == Some(true)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Removes fields the schema does not declare (and nulls of non-nullable fields); returns the
/// paths removed, for strict field validation.
pub fn prune_root(object: &mut Value, schema: &Value) -> Vec<String> {
    let mut removed = Vec::new();
    let Some(map) = object.as_object_mut() else {
        return removed;
    };
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|key, _| {
            let keep = OBJECT_META_FIELDS.contains(&key.as_str());
            if !keep {
                removed.push(join("metadata", key));
            }
            keep
        });
    }
    if preserves_unknown(schema) {
        return removed;
    }
    let properties = schema["properties"].as_object();
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match properties.and_then(|p| p.get(&key)) {
            Some(child_schema) => {
                if let Some(child) = map.get_mut(&key) {
                    if child.is_null() && child_schema["nullable"].as_bool() != Some(true) {
                        map.remove(&key);
                    } else {
                        prune(child, child_schema, &key, &mut removed);
                    }
                }
            }
            None => {
                map.remove(&key);
                removed.push(key);
            }
        }
    }
    removed
}

fn prune(value: &mut Value, schema: &Value, path: &str, removed: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if is_embedded(schema)
                && let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut)
            {
                meta.retain(|key, _| OBJECT_META_FIELDS.contains(&key.as_str()));
            }
            let properties = schema["properties"].as_object();
            let additional = &schema["additionalProperties"];
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child_path = join(path, &key);
                let child_schema = properties.and_then(|p| p.get(&key)).or(match additional {
                    Value::Object(_) => Some(additional),
                    _ => None,
                });
                match child_schema {
                    Some(child_schema) => {
                        let Some(child) = map.get_mut(&key) else {
                            continue;
                        };
                        if child.is_null() && child_schema["nullable"].as_bool() != Some(true) {
                            map.remove(&key);
                        } else {
                            prune(child, child_schema, &child_path, removed);
                        }
                    }
                    None if preserves_unknown(schema)
                        || additional.as_bool() == Some(true)
                        || (is_embedded(schema)
                            && matches!(key.as_str(), "apiVersion" | "kind" | "metadata")) => {}
                    None => {
                        map.remove(&key);
                        removed.push(child_path);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (index, item) in items.iter_mut().enumerate() {
                    prune(item, item_schema, &format!("{path}[{index}]"), removed);
                }
            }
        }
        _ => {}
    }
}

/// Fills in `default` values of absent fields, recursively.
pub fn apply_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema["properties"].as_object() {
                for (key, child_schema) in properties {
                    if !map.contains_key(key)
                        && let Some(default) = child_schema.get("default")
                    {
                        map.insert(key.clone(), default.clone());
                    }
                }
                for (key, child) in map.iter_mut() {
                    if let Some(child_schema) = properties.get(key) {
                        apply_defaults(child, child_schema);
                    }
                }
            } else if let Some(additional) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for child in map.values_mut() {
                    apply_defaults(child, additional);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    apply_defaults(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// One walk of validation: the schema's own checks, or the CEL rules, which the API server runs
/// after them as a pass of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Schema,
    Rules,
}

/// Causes after which the API server runs no rule: a wrong type, a value not in the enum, a
/// missing required field, a string or list over its limit.
const BLOCKING: &[&str] = &[
    "FieldValueTypeInvalid",
    "FieldValueNotSupported",
    "FieldValueRequired",
    "FieldValueTooLong",
    "FieldValueTooMany",
];

/// Validates a whole object (its root fields other than apiVersion, kind and metadata); `old`
/// is the stored object on an update (for transition rules, and to ratchet what it leaves as
/// it was). The schema's checks come first; the CEL rules run only when none of them found a
/// blocking problem, as in the API server, which otherwise says so in a cause of its own.
pub fn validate_root(object: &Value, schema: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_object_root(object, schema, old, Pass::Schema, &mut causes);
    if crate::validation_rules::has_rules(schema) {
        if causes.iter().any(|c| BLOCKING.contains(&c.kind)) {
            causes.push(Cause {
                kind: "FieldValueInvalid",
                message: "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
                field: "<nil>".into(),
            });
        } else {
            validate_object_root(object, schema, old, Pass::Rules, &mut causes);
        }
    }
    causes
}

fn validate_object_root(
    object: &Value,
    schema: &Value,
    old: Option<&Value>,
    pass: Pass,
    causes: &mut Vec<Cause>,
) {
    let Some(map) = object.as_object() else {
        return;
    };
    if pass == Pass::Schema
        && let Some(required) = schema["required"].as_array()
    {
        for field in required.iter().filter_map(Value::as_str) {
            if !matches!(field, "apiVersion" | "kind" | "metadata") && !map.contains_key(field) {
                causes.push(required_cause(field));
            }
        }
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (key, child) in map {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(child_schema) = properties.get(key) {
                validate(
                    child,
                    child_schema,
                    key,
                    old.and_then(|o| o.get(key)),
                    pass,
                    causes,
                );
            }
        }
    }
    if pass == Pass::Rules {
        crate::validation_rules::evaluate(object, schema, "", old, causes);
    }
}

fn required_cause(field: &str) -> Cause {
    Cause {
        kind: "FieldValueRequired",
        message: "Required value".into(),
        field: field.to_owned(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as the API server quotes it in messages.
pub fn quoted(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Object(_) | Value::Array(_) => format!("\"{}\"", type_name(value)),
        other => other.to_string(),
    }
}

fn type_matches(value: &Value, expected: &str) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "number" => value.is_number(),
        _ => true,
    }
}

fn invalid(path: &str, value: &Value, detail: String) -> Cause {
    Cause {
        kind: "FieldValueInvalid",
        message: format!("Invalid value: {}: {detail}", quoted(value)),
        field: path.to_owned(),
    }
}

fn validate(
    value: &Value,
    schema: &Value,
    path: &str,
    old: Option<&Value>,
    pass: Pass,
    causes: &mut Vec<Cause>,
) {
    // Ratcheting, as the API server does by default since 1.30: a value an update leaves as it
    // was is not validated again, so a status write does not judge the spec and a rule added
    // later does not refuse writes that leave an older value alone. Transition rules are the
    // exception: they still run.
    if let Some(old) = old.filter(|old| *old == value) {
        if pass == Pass::Rules {
            transition_rules(value, schema, path, old, causes);
        }
        return;
    }
    if pass == Pass::Rules {
        // The schema pass found nothing blocking: only the walk and the rules are left.
        match value {
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                    for (index, item) in items.iter().enumerate() {
                        let path = format!("{path}[{index}]");
                        validate(item, item_schema, &path, None, pass, causes);
                    }
                }
            }
            Value::Object(map) => validate_object(map, schema, path, old, pass, causes),
            _ => {}
        }
        if !value.is_null() && schema["x-kubernetes-int-or-string"].as_bool() != Some(true) {
            crate::validation_rules::evaluate(value, schema, path, old, causes);
        }
        return;
    }
    if value.is_null() {
        if schema["nullable"].as_bool() != Some(true) {
            causes.push(Cause {
                kind: "FieldValueTypeInvalid",
                message: format!(
                    "Invalid value: \"null\": {path} in body must be of type {}: \"null\"",
                    schema["type"].as_str().unwrap_or("object")
                ),
                field: path.to_owned(),
            });
        }
        return;
    }
    if schema["x-kubernetes-int-or-string"].as_bool() == Some(true) {
        if !(value.is_string() || type_matches(value, "integer")) {
            causes.push(Cause {
                kind: "FieldValueTypeInvalid",
                message: format!(
                    "Invalid value: {}: {path} in body must be of type integer,string: {}",
                    quoted(value),
                    quoted(&Value::String(type_name(value).into()))
                ),
                field: path.to_owned(),
            });
        }
        return;
    }
    if let Some(expected) = schema["type"].as_str()
        && !type_matches(value, expected)
    {
        causes.push(Cause {
            kind: "FieldValueTypeInvalid",
            message: format!(
                "Invalid value: \"{}\": {path} in body must be of type {expected}: \"{}\"",
                type_name(value),
                type_name(value)
            ),
            field: path.to_owned(),
        });
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(quoted).collect();
        causes.push(Cause {
            kind: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {}: supported values: {}",
                quoted(value),
                supported.join(", ")
            ),
            field: path.to_owned(),
        });
    }
    match value {
        Value::String(text) => {
            if let Some(pattern) = schema["pattern"].as_str()
                && !matches_pattern(pattern, text)
            {
                causes.push(invalid(
                    path,
                    value,
                    format!("{path} in body should match '{pattern}'"),
                ));
            }
            let length = text.chars().count() as u64;
            if let Some(max) = schema["maxLength"].as_u64().filter(|max| length > *max) {
                causes.push(Cause {
                    kind: "FieldValueTooLong",
                    message: format!("Too long: may not be more than {max} bytes"),
                    field: path.to_owned(),
                });
            }
            if let Some(min) = schema["minLength"].as_u64().filter(|min| length < *min) {
                causes.push(invalid(
                    path,
                    value,
                    format!("{path} in body should be at least {min} chars long"),
                ));
            }
        }
        Value::Number(number) => {
            let n = number.as_f64().unwrap_or(0.0);
            if let Some(min) = schema["minimum"].as_f64().filter(|min| n < *min) {
                causes.push(invalid(
                    path,
                    value,
                    format!("{path} in body should be greater than or equal to {min}"),
                ));
            }
            if let Some(max) = schema["maximum"].as_f64().filter(|max| n > *max) {
                causes.push(invalid(
                    path,
                    value,
                    format!("{path} in body should be less than or equal to {max}"),
                ));
            }
        }
        Value::Array(items) => {
            let count = items.len() as u64;
            if let Some(max) = schema["maxItems"].as_u64().filter(|max| count > *max) {
                causes.push(Cause {
                    kind: "FieldValueTooMany",
                    message: format!("Too many: {count}: must have at most {max} items"),
                    field: path.to_owned(),
                });
            }
            if let Some(min) = schema["minItems"].as_u64().filter(|min| count < *min) {
                causes.push(invalid(
                    path,
                    value,
                    format!("{path} in body should have at least {min} items"),
                ));
            }
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (index, item) in items.iter().enumerate() {
                    let path = format!("{path}[{index}]");
                    validate(item, item_schema, &path, None, pass, causes);
                }
            }
        }
        Value::Object(map) => validate_object(map, schema, path, old, pass, causes),
        _ => {}
    }
}

/// The transition rules of an unchanged value and of everything under it. List items are left
/// out: an update's items are not paired with the stored ones, so their transition rules never
/// apply (as in `validate`).
fn transition_rules(
    value: &Value,
    schema: &Value,
    path: &str,
    old: &Value,
    causes: &mut Vec<Cause>,
) {
    if let Value::Object(map) = value {
        let properties = schema["properties"].as_object();
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        for (key, child) in map {
            if let Some(child_schema) = properties.and_then(|p| p.get(key)).or(additional) {
                transition_rules(child, child_schema, &join(path, key), child, causes);
            }
        }
    }
    crate::validation_rules::evaluate_transitions(value, schema, path, old, causes);
}

/// Whether `text` matches a schema `pattern`; compiled patterns are kept, and a pattern that
/// does not compile matches nothing (the API server refuses such a CRD up front).
fn matches_pattern(pattern: &str, text: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static COMPILED: OnceLock<Mutex<HashMap<String, Option<regex::Regex>>>> = OnceLock::new();
    let Ok(mut compiled) = COMPILED.get_or_init(Mutex::default).lock() else {
        return false;
    };
    compiled
        .entry(pattern.to_owned())
        .or_insert_with(|| regex::Regex::new(&crate::re2::translate(pattern)).ok())
        .as_ref()
        .is_some_and(|re| re.is_match(text))
}

fn validate_object(
    map: &Map<String, Value>,
    schema: &Value,
    path: &str,
    old: Option<&Value>,
    pass: Pass,
    causes: &mut Vec<Cause>,
) {
    if pass == Pass::Schema
        && let Some(required) = schema["required"].as_array()
    {
        for field in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(field) {
                causes.push(required_cause(&join(path, field)));
            }
        }
    }
    let properties = schema["properties"].as_object();
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (key, child) in map {
        let child_schema = properties.and_then(|p| p.get(key)).or(additional);
        if let Some(child_schema) = child_schema {
            validate(
                child,
                child_schema,
                &join(path, key),
                old.and_then(|o| o.get(key)),
                pass,
                causes,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["issuer"],
                    "properties": {
                        "issuer": {"type": "string"},
                        "replicas": {"type": "integer", "default": 1},
                        "policy": {"type": "string", "enum": ["Delete", "Orphan"]},
                        "url": {"type": "string", "pattern": "^https://[^\\s/?#]+(/[^\\s?#]*)?$"},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "uris": {"type": "array", "items": {"type": "string"}}
                    }
                },
                "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
            }
        })
    }

    #[test]
    fn prunes_unknown_fields_but_keeps_preserved_ones() {
        let mut object = json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "bogus": 1},
            "spec": {"issuer": "i", "unknown": true, "extra": {"anything": {"goes": 1}},
                "labels": {"a": "b"}},
            "top": 1
        });
        let removed = prune_root(&mut object, &schema());
        assert_eq!(removed, ["metadata.bogus", "spec.unknown", "top"]);
        assert_eq!(object["spec"]["extra"]["anything"]["goes"], 1);
        assert_eq!(object["spec"]["labels"]["a"], "b");
    }

    #[test]
    fn defaults_fill_absent_fields_only() {
        let mut object = json!({"spec": {"issuer": "i"}});
        apply_defaults(&mut object, &schema());
        assert_eq!(object["spec"]["replicas"], 1);
        let mut object = json!({"spec": {"issuer": "i", "replicas": 3}});
        apply_defaults(&mut object, &schema());
        assert_eq!(object["spec"]["replicas"], 3);
    }

    #[test]
    fn reports_required_type_and_enum_violations_by_field() {
        let object = json!({"spec": {"replicas": "many", "policy": "Keep", "uris": ["a", 2], "url": "http://x"}});
        let causes = validate_root(&object, &schema(), None);
        let fields: Vec<(&str, &str)> = causes.iter().map(|c| (c.field.as_str(), c.kind)).collect();
        assert!(
            fields.contains(&("spec.issuer", "FieldValueRequired")),
            "{fields:?}"
        );
        assert!(
            fields.contains(&("spec.replicas", "FieldValueTypeInvalid")),
            "{fields:?}"
        );
        assert!(
            fields.contains(&("spec.policy", "FieldValueNotSupported")),
            "{fields:?}"
        );
        assert!(
            fields.contains(&("spec.uris[1]", "FieldValueTypeInvalid")),
            "{fields:?}"
        );
        assert!(
            fields.contains(&("spec.url", "FieldValueInvalid")),
            "{fields:?}"
        );
        let fine = json!({"spec": {"issuer": "i", "url": "https://id.example.com/org"}});
        assert!(validate_root(&fine, &schema(), None).is_empty());
        let missing_spec = validate_root(&json!({}), &schema(), None);
        assert_eq!(missing_spec[0].field, "spec");
    }

    #[test]
    fn an_update_ratchets_what_it_leaves_as_it_was() {
        let mut schema = schema();
        schema["properties"]["spec"]["x-kubernetes-validations"] =
            json!([{"rule": "self.issuer.startsWith('https://')", "message": "https only"}]);
        // Stored before the rules tightened: an invalid policy and an issuer the rule refuses.
        let stored = json!({"spec": {"issuer": "http://a", "policy": "Keep"}});
        let status_write = json!({"spec": {"issuer": "http://a", "policy": "Keep"},
            "status": {"phase": "Registered"}});
        assert!(validate_root(&status_write, &schema, Some(&stored)).is_empty());
        // What an edit changes is judged (the spec's rule, a new policy); what it leaves is not.
        let fields = |object: Value| -> Vec<String> {
            validate_root(&object, &schema, Some(&stored))
                .into_iter()
                .map(|c| c.field)
                .collect()
        };
        assert_eq!(
            fields(json!({"spec": {"issuer": "http://b", "policy": "Keep"}})),
            ["spec"]
        );
        // A value outside the enum blocks the rules, as the API server says in a cause.
        assert_eq!(
            fields(json!({"spec": {"issuer": "https://b", "policy": "Drop"}})),
            ["spec.policy", "<nil>"]
        );
        assert_eq!(validate_root(&status_write, &schema, None).len(), 2);
    }

    #[test]
    fn transition_rules_run_on_what_an_update_leaves_as_it_was() {
        let mut schema = schema();
        // Passes only on a change: an unchanged spec is still judged by it, and fails.
        schema["properties"]["spec"]["x-kubernetes-validations"] = json!([
            {"rule": "self != oldSelf", "message": "must change"},
            {"rule": "self.issuer.startsWith('https://')", "message": "https only"}
        ]);
        schema["properties"]["spec"]["properties"]["policy"]["x-kubernetes-validations"] =
            json!([{"rule": "self == oldSelf", "message": "immutable"}]);
        let stored = json!({"spec": {"issuer": "http://a", "policy": "Delete"}});
        let causes = validate_root(&stored, &schema, Some(&stored));
        let messages: Vec<&str> = causes.iter().map(|c| c.message.as_str()).collect();
        assert_eq!(causes.len(), 1, "{messages:?}");
        assert!(messages[0].contains("must change"), "{messages:?}");
        assert_eq!(causes[0].field, "spec");
    }
}
