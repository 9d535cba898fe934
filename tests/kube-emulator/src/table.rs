//! `meta.k8s.io/v1` Table responses (what `kubectl get` asks for): columns from a CRD's
//! `additionalPrinterColumns` (simple JSONPath) or per built-in kind.

use serde_json::{Value, json};

use crate::ids::human_age;
use crate::registry::{PrinterColumn, ResourceInfo};

/// How much of each object a row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

fn column(name: &str, column_type: &str, json_path: &str, priority: i64) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        column_type: column_type.into(),
        format: String::new(),
        description: String::new(),
        priority,
        json_path: json_path.into(),
    }
}

/// The columns after NAME for a resource at a version.
pub fn columns(info: &ResourceInfo, version: &str) -> Vec<PrinterColumn> {
    if let Some(custom) = info.printer_columns.get(version) {
        if custom.is_empty() {
            return vec![column("Age", "date", ".metadata.creationTimestamp", 0)];
        }
        return custom.clone();
    }
    let age = column("Age", "date", ".metadata.creationTimestamp", 0);
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "secrets") => vec![
            column("Type", "string", ".type", 0),
            column("Data", "integer", "#count(.data)", 0),
            age,
        ],
        ("", "configmaps") => vec![column("Data", "integer", "#count(.data)", 0), age],
        ("", "namespaces") => vec![column("Status", "string", ".status.phase", 0), age],
        ("", "events") => vec![
            column("Last Seen", "date", ".lastTimestamp", 0),
            column("Type", "string", ".type", 0),
            column("Reason", "string", ".reason", 0),
            column("Object", "string", "#object(.involvedObject)", 0),
            column("Message", "string", ".message", 0),
        ],
        ("events.k8s.io", "events") => vec![
            column("Type", "string", ".type", 0),
            column("Reason", "string", ".reason", 0),
            column("Object", "string", "#object(.involvedObject)", 0),
            column("Note", "string", ".message", 0),
            age,
        ],
        ("coordination.k8s.io", "leases") => {
            vec![column("Holder", "string", ".spec.holderIdentity", 0), age]
        }
        ("apps", "deployments") => vec![
            column(
                "Ready",
                "string",
                "#ready(.status.readyReplicas,.spec.replicas)",
                0,
            ),
            column("Up-to-date", "integer", ".status.updatedReplicas", 0),
            column("Available", "integer", ".status.availableReplicas", 0),
            age,
        ],
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![column(
                "Created At",
                "date",
                ".metadata.creationTimestamp",
                0,
            )]
        }
        _ => vec![age],
    }
}

/// Evaluates the simple JSONPath of printer columns: `.a.b`, `.a[0]`, `.a[*].b` and
/// `.a[?(@.type=="Ready")].status`. Returns every match.
pub fn json_path<'a>(object: &'a Value, path: &str) -> Vec<&'a Value> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut current = vec![object];
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let key = &after[..end];
            current = current.into_iter().filter_map(|v| v.get(key)).collect();
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else {
                return Vec::new();
            };
            let inside = &after[..end];
            rest = &after[end + 1..];
            current = current
                .into_iter()
                .filter_map(Value::as_array)
                .flat_map(|items| select(items, inside))
                .collect();
        } else {
            return Vec::new();
        }
    }
    current
}

fn select<'a>(items: &'a [Value], selector: &str) -> Vec<&'a Value> {
    if selector == "*" {
        return items.iter().collect();
    }
    if let Ok(index) = selector.parse::<usize>() {
        return items.get(index).into_iter().collect();
    }
    let Some(filter) = selector
        .strip_prefix("?(")
        .and_then(|s| s.strip_suffix(')'))
    else {
        return Vec::new();
    };
    let Some((left, right)) = filter.split_once("==") else {
        return Vec::new();
    };
    let field = left.trim().trim_start_matches('@');
    let wanted = right.trim().trim_matches(|c| c == '"' || c == '\'');
    items
        .iter()
        .filter(|item| {
            json_path(item, field).first().is_some_and(|v| match v {
                Value::String(s) => s == wanted,
                other => *other == wanted,
            })
        })
        .collect()
}

fn cell(object: &Value, column: &PrinterColumn) -> Value {
    let path = column.json_path.as_str();
    if let Some(inner) = path
        .strip_prefix("#count(")
        .and_then(|p| p.strip_suffix(')'))
    {
        let count = json_path(object, inner)
            .first()
            .and_then(|v| v.as_object())
            .map_or(0, |m| m.len());
        return json!(count);
    }
    if let Some(inner) = path
        .strip_prefix("#object(")
        .and_then(|p| p.strip_suffix(')'))
    {
        let target = json_path(object, inner)
            .first()
            .copied()
            .cloned()
            .unwrap_or(Value::Null);
        let kind = target["kind"].as_str().unwrap_or_default().to_lowercase();
        return json!(format!(
            "{kind}/{}",
            target["name"].as_str().unwrap_or_default()
        ));
    }
    if let Some(inner) = path
        .strip_prefix("#ready(")
        .and_then(|p| p.strip_suffix(')'))
    {
        let (ready, wanted) = inner.split_once(',').unwrap_or((inner, ""));
        let number = |p: &str| {
            json_path(object, p)
                .first()
                .and_then(|v| v.as_i64())
                .unwrap_or(0)
        };
        return json!(format!("{}/{}", number(ready), number(wanted)));
    }
    let found = json_path(object, path);
    let value = match found.as_slice() {
        [] => return Value::Null,
        [one] => (*one).clone(),
        many => json!(many.iter().map(|v| plain(v)).collect::<Vec<_>>().join(",")),
    };
    match column.column_type.as_str() {
        "date" => value.as_str().map_or(Value::Null, |t| json!(human_age(t))),
        "string" => match value {
            Value::String(_) => value,
            other => json!(plain(&other)),
        },
        _ => value,
    }
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn column_definition(column: &PrinterColumn) -> Value {
    json!({
        "name": column.name,
        "type": if column.column_type == "date" { "string" } else { column.column_type.as_str() },
        "format": column.format,
        "description": column.description,
        "priority": column.priority,
    })
}

/// The definitions of the NAME column and the resource's own columns.
pub fn column_definitions(info: &ResourceInfo, version: &str) -> Vec<Value> {
    // Event tables lead with when and what; their names are for `-o wide`.
    let name_priority = if info.plural == "events" && info.group.is_empty() {
        1
    } else {
        0
    };
    let mut definitions = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": name_priority,
        "description": "Name must be unique within a namespace."
    })];
    definitions.extend(columns(info, version).iter().map(column_definition));
    definitions
}

/// One row of the table for an object.
pub fn row(info: &ResourceInfo, version: &str, object: &Value, include: IncludeObject) -> Value {
    let mut cells = vec![
        object
            .pointer("/metadata/name")
            .cloned()
            .unwrap_or(Value::Null),
    ];
    cells.extend(columns(info, version).iter().map(|c| cell(object, c)));
    let embedded = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => object.clone(),
        IncludeObject::Metadata => {
            let mut metadata = object["metadata"].clone();
            if let Some(map) = metadata.as_object_mut() {
                map.remove("managedFields");
            }
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
        }
    };
    json!({"cells": cells, "object": embedded})
}

/// A whole Table for a list of objects.
pub fn table<'a>(
    info: &ResourceInfo,
    version: &str,
    objects: impl Iterator<Item = &'a Value>,
    include: IncludeObject,
    resource_version: &str,
    continue_token: Option<&str>,
) -> Value {
    let rows: Vec<Value> = objects.map(|o| row(info, version, o, include)).collect();
    let mut metadata = json!({"resourceVersion": resource_version});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": column_definitions(info, version),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_follows_fields_indexes_and_filters() {
        let object = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "Drifted"},
            {"type": "Other", "status": "True"}
        ]}, "spec": {"uris": ["a", "b"]}});
        let first = |p: &str| json_path(&object, p).first().map(|v| (*v).clone());
        assert_eq!(
            first(".status.conditions[?(@.type==\"Ready\")].reason"),
            Some(json!("Drifted"))
        );
        assert_eq!(first(".spec.uris[1]"), Some(json!("b")));
        assert_eq!(json_path(&object, ".status.conditions[*].type").len(), 2);
        assert!(json_path(&object, ".spec.missing").is_empty());
    }

    #[test]
    fn printer_columns_become_cells() {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "additionalPrinterColumns": [
                        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"},
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1}]}]}
        });
        let info = crate::registry::resource_from_crd(&crd).unwrap();
        let object = json!({"metadata": {"name": "w"}, "spec": {"size": 3},
            "status": {"conditions": [{"type": "Ready", "reason": "Registered"}]}});
        let row = row(&info, "v1", &object, IncludeObject::Metadata);
        assert_eq!(row["cells"], json!(["w", "Registered", 3]));
        assert_eq!(column_definitions(&info, "v1")[2]["priority"], 1);
    }
}
