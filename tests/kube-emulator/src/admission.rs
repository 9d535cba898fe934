//! What happens to an object on its way into storage, per kind: name rules, Secret
//! `stringData`, CustomResourceDefinition registration, rules and status, namespaces, admission
//! policy objects, and the structural schema of custom resources. (Admission policies themselves
//! are evaluated later, on the object as it will be stored: see `admission_policy`.)

use base64::Engine;
use serde_json::{Value, json};

use crate::registry::{ResourceInfo, resource_from_crd};
use crate::schema;
use crate::status::{ApiError, ApiResult, Cause};

/// How the request asked unknown fields to be treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn parse(value: Option<&str>) -> ApiResult<Self> {
        match value {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, not {other:?}"
            ))),
        }
    }
}

const DNS_SUBDOMAIN_HELP: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS_LABEL_HELP: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

/// Checks a name against the rule of its kind.
pub fn validate_name(info: &ResourceInfo, name: &str) -> Option<Cause> {
    let invalid = |help: &str| Cause {
        kind: "FieldValueInvalid",
        message: format!("Invalid value: {name:?}: {help}"),
        field: "metadata.name".into(),
    };
    if info.group.is_empty() && info.plural == "namespaces" {
        return (!is_dns_label(name)).then(|| invalid(DNS_LABEL_HELP));
    }
    if info.group == "rbac.authorization.k8s.io" || info.plural == "events" {
        let bad = name.is_empty() || name == "." || name == ".." || name.contains(['/', '%']);
        return bad.then(|| invalid("may not be '.' or '..' and may not contain '/' or '%'"));
    }
    (!is_dns_subdomain(name)).then(|| invalid(DNS_SUBDOMAIN_HELP))
}

/// What admission found worth telling the client.
#[derive(Debug, Default)]
pub struct Admitted {
    /// `Warning` headers (unknown fields under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
    /// The resource a CustomResourceDefinition defines, to register once stored.
    pub defines: Option<ResourceInfo>,
}

/// Kind-specific defaulting and validation of an object about to be stored.
pub fn admit(
    info: &ResourceInfo,
    version: &str,
    object: &mut Value,
    old: Option<&Value>,
    validation: FieldValidation,
) -> ApiResult<Admitted> {
    let mut admitted = Admitted::default();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "secrets") => {
            fold_string_data(object, &name)?;
            check_immutable(info, old, object, &name)?;
        }
        ("", "configmaps") => check_immutable(info, old, object, &name)?,
        ("", "events") => crate::events::canonical(object),
        ("", "namespaces") => prepare_namespace(object, old, &name),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let defined = resource_from_crd(object)?;
            let causes = crate::validation_rules::check_definition(object);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    "CustomResourceDefinition",
                    "apiextensions.k8s.io",
                    &name,
                    causes,
                ));
            }
            let status = crd_status(object, &defined);
            // Keep the conditions (and their transition times) while the names hold.
            if object.pointer("/status/acceptedNames") != status.get("acceptedNames")
                || object.pointer("/status/storedVersions") != status.get("storedVersions")
            {
                object["status"] = status;
            }
            admitted.defines = Some(defined);
        }
        ("admissionregistration.k8s.io", _) => {
            crate::admission_policy::admit_configuration(info, object)?;
        }
        _ => {}
    }
    if let Some(schema) = info
        .schema(version)
        .or_else(|| info.schema(info.preferred_version()))
    {
        let removed = schema::prune_root(object, schema);
        if !removed.is_empty() {
            match validation {
                FieldValidation::Strict => {
                    let fields: Vec<String> = removed
                        .iter()
                        .map(|f| format!("unknown field \"{f}\""))
                        .collect();
                    return Err(ApiError::bad_request(format!(
                        "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                        info.kind,
                        info.api_version(version),
                        info.kind,
                        fields.join(", ")
                    )));
                }
                FieldValidation::Warn => {
                    admitted
                        .warnings
                        .extend(removed.iter().map(|f| format!("unknown field \"{f}\"")));
                }
                FieldValidation::Ignore => {}
            }
        }
        schema::apply_defaults(object, schema);
        let causes = schema::validate_root(object, schema, old);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&info.kind, &info.group, &name, causes));
        }
    }
    Ok(admitted)
}

/// The label the API server gives every namespace, its name as the value.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A namespace as the API server prepares it: created `Active` with the `kubernetes` finalizer
/// (added to any the client sent), its finalizers kept as they were on an update (only the
/// `finalize` subresource changes them), and the label `kubernetes.io/metadata.name` set to its
/// name on every write, whatever the client sent in it or whether it removed it.
fn prepare_namespace(object: &mut Value, old: Option<&Value>, name: &str) {
    match old {
        None => {
            object["status"] = json!({"phase": "Active"});
            let mut finalizers: Vec<Value> = object
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if !finalizers.iter().any(|f| f == "kubernetes") {
                finalizers.push(json!("kubernetes"));
            }
            if !object["spec"].is_object() {
                object["spec"] = json!({});
            }
            object["spec"]["finalizers"] = Value::Array(finalizers);
        }
        Some(old) => match old.pointer("/spec/finalizers") {
            Some(finalizers) => {
                if !object["spec"].is_object() {
                    object["spec"] = json!({});
                }
                object["spec"]["finalizers"] = finalizers.clone();
            }
            None => {
                if let Some(spec) = object["spec"].as_object_mut() {
                    spec.remove("finalizers");
                }
            }
        },
    }
    if !object["metadata"]["labels"].is_object() {
        object["metadata"]["labels"] = json!({});
    }
    object["metadata"]["labels"][NAMESPACE_NAME_LABEL] = json!(name);
}

/// A Secret or ConfigMap marked `immutable: true` keeps its data and the mark.
fn check_immutable(
    info: &ResourceInfo,
    old: Option<&Value>,
    object: &Value,
    name: &str,
) -> ApiResult<()> {
    let Some(old) = old.filter(|o| o["immutable"].as_bool() == Some(true)) else {
        return Ok(());
    };
    let mut causes = Vec::new();
    for field in ["data", "binaryData", "immutable"] {
        if old.get(field) != object.get(field) {
            causes.push(Cause {
                kind: "FieldValueForbidden",
                message: "Forbidden: field is immutable when `immutable` is set".into(),
                field: field.into(),
            });
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&info.kind, "", name, causes))
    }
}

/// `stringData` is written into `data` (base64) and never stored; `data` must be base64.
fn fold_string_data(object: &mut Value, name: &str) -> ApiResult<()> {
    let engine = base64::engine::general_purpose::STANDARD;
    let Some(map) = object.as_object_mut() else {
        return Ok(());
    };
    let string_data = map.remove("stringData");
    if map
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        map.insert("type".into(), json!("Opaque"));
    }
    let data = map.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    let mut causes = Vec::new();
    if let Some(data) = data.as_object() {
        for (key, value) in data {
            let valid = value.as_str().is_some_and(|v| engine.decode(v).is_ok());
            if !valid {
                causes.push(Cause {
                    kind: "FieldValueInvalid",
                    message: "Invalid value: \"<secret contents redacted>\": a valid base64 string is required".into(),
                    field: format!("data[{key}]"),
                });
            }
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid("Secret", "", name, causes));
    }
    if let (Some(Value::Object(strings)), Some(data)) = (string_data, data.as_object_mut()) {
        for (key, value) in strings {
            let text = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            data.insert(key, json!(engine.encode(text)));
        }
    }
    if data.as_object().is_some_and(serde_json::Map::is_empty) {
        map.remove("data");
    }
    Ok(())
}

fn crd_status(crd: &Value, defined: &ResourceInfo) -> Value {
    let now = crate::ids::now_rfc3339();
    let condition = |kind: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": now})
    };
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .map(|v| v["name"].clone())
        .collect();
    let mut accepted = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    accepted["listKind"] = json!(defined.list_kind);
    accepted["singular"] = json!(defined.singular);
    json!({
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": accepted,
        "storedVersions": storage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtins;

    fn secrets() -> ResourceInfo {
        builtins()
            .into_iter()
            .find(|r| r.plural == "secrets")
            .unwrap()
    }

    #[test]
    fn string_data_is_folded_into_data() {
        let mut secret = json!({"metadata": {"name": "s"}, "stringData": {"password": "hunter2"}});
        admit(&secrets(), "v1", &mut secret, None, FieldValidation::Warn).unwrap();
        assert_eq!(secret["data"]["password"], "aHVudGVyMg==");
        assert!(secret.get("stringData").is_none());
        assert_eq!(secret["type"], "Opaque");
    }

    #[test]
    fn data_that_is_not_base64_is_invalid() {
        let mut secret = json!({"metadata": {"name": "s"}, "data": {"k": "not base64!"}});
        let err = admit(&secrets(), "v1", &mut secret, None, FieldValidation::Warn).unwrap_err();
        assert_eq!(err.code(), 422);
        assert!(
            !err.message.contains("not base64!"),
            "secret contents leaked: {}",
            err.message
        );
    }

    #[test]
    fn names_follow_their_kind_rule() {
        assert!(validate_name(&secrets(), "ok-name.x").is_none());
        assert!(validate_name(&secrets(), "Bad_Name").is_some());
        let roles = builtins()
            .into_iter()
            .find(|r| r.plural == "clusterroles")
            .unwrap();
        assert!(validate_name(&roles, "system:controller").is_none());
    }
}
