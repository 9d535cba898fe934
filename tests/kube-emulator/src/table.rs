//! `meta.k8s.io/v1` Table responses (what `kubectl get` asks for): columns from a CRD's
//! `additionalPrinterColumns` (simple JSONPath) or per built-in kind.

use bytes::Bytes;
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value, json};

use crate::ids::human_age_at;
use crate::registry::{PrinterColumn, ResourceInfo};
use crate::store::Stored;

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
            // As the API server prints it: a series' last observation, else the last time,
            // else the first, else the time of an event written through events.k8s.io.
            column(
                "Last Seen",
                "date",
                "#first(.series.lastObservedTime,.lastTimestamp,.firstTimestamp,.eventTime)",
                0,
            ),
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
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => vec![
            column("Validations", "integer", "#count(.spec.validations)", 0),
            column("ParamKind", "string", ".spec.paramKind.kind", 0),
            age,
        ],
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => vec![
            column("PolicyName", "string", ".spec.policyName", 0),
            column("ParamRef", "string", ".spec.paramRef.name", 0),
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

fn cell(object: &Value, column: &PrinterColumn, now: i64) -> Value {
    let path = column.json_path.as_str();
    if let Some(inner) = path
        .strip_prefix("#count(")
        .and_then(|p| p.strip_suffix(')'))
    {
        let count = json_path(object, inner).first().map_or(0, |v| match v {
            Value::Object(map) => map.len(),
            Value::Array(items) => items.len(),
            _ => 0,
        });
        return json!(count);
    }
    if let Some(inner) = path
        .strip_prefix("#object(")
        .and_then(|p| p.strip_suffix(')'))
    {
        let target = json_path(object, inner)
            .first()
            .copied()
            .unwrap_or(&Value::Null);
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
    let found = match path
        .strip_prefix("#first(")
        .and_then(|p| p.strip_suffix(')'))
    {
        Some(paths) => paths
            .split(',')
            .map(|p| json_path(object, p))
            .find(|found| found.iter().any(|v| !v.is_null()))
            .unwrap_or_default(),
        None => json_path(object, path),
    };
    let value = match found.as_slice() {
        [] => return Value::Null,
        [one] => (*one).clone(),
        many => json!(many.iter().map(|v| plain(v)).collect::<Vec<_>>().join(",")),
    };
    match column.column_type.as_str() {
        "date" => value
            .as_str()
            .map_or(Value::Null, |t| json!(human_age_at(t, now))),
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

/// A map written without one of its keys, in its own order, without copying it.
struct Without<'a> {
    map: &'a Map<String, Value>,
    skipped: &'a str,
}

impl Serialize for Without<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(None)?;
        for (key, value) in self.map.iter().filter(|(k, _)| *k != self.skipped) {
            out.serialize_entry(key, value)?;
        }
        out.end()
    }
}

fn write_json(out: &mut Vec<u8>, value: &impl Serialize) {
    // Writing JSON values into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Writes Tables of one resource at one version: the columns are worked out once, and each row
/// is written straight into the response from the stored object and its stored encoding.
pub struct TableWriter {
    columns: Vec<PrinterColumn>,
    definitions: Vec<u8>,
    include: IncludeObject,
    /// Ages are taken against one instant for the whole table.
    now: i64,
}

impl TableWriter {
    pub fn new(info: &ResourceInfo, version: &str, include: IncludeObject) -> Self {
        let mut definitions = Vec::new();
        write_json(&mut definitions, &column_definitions(info, version));
        Self {
            columns: columns(info, version),
            definitions,
            include,
            now: jiff::Timestamp::now().as_second(),
        }
    }

    /// One row: the cells, then the object as `includeObject` asks.
    fn write_row(&self, out: &mut Vec<u8>, stored: &Stored) {
        let object = &stored.value;
        out.extend_from_slice(b"{\"cells\":[");
        write_json(
            out,
            object.pointer("/metadata/name").unwrap_or(&Value::Null),
        );
        for column in &self.columns {
            out.push(b',');
            write_json(out, &cell(object, column, self.now));
        }
        out.extend_from_slice(b"],\"object\":");
        match self.include {
            IncludeObject::None => out.extend_from_slice(b"null"),
            IncludeObject::Object => out.extend_from_slice(&stored.json),
            IncludeObject::Metadata => {
                out.extend_from_slice(
                    b"{\"apiVersion\":\"meta.k8s.io/v1\",\"kind\":\"PartialObjectMetadata\",\"metadata\":",
                );
                match object.get("metadata").and_then(Value::as_object) {
                    Some(map) => write_json(
                        out,
                        &Without {
                            map,
                            skipped: "managedFields",
                        },
                    ),
                    None => write_json(out, object.get("metadata").unwrap_or(&Value::Null)),
                }
                out.push(b'}');
            }
        }
        out.push(b'}');
    }

    /// A whole Table for a list of objects.
    pub fn table<'a>(
        &self,
        objects: impl ExactSizeIterator<Item = &'a Stored>,
        resource_version: &str,
        continue_token: Option<&str>,
    ) -> Bytes {
        let mut metadata = json!({"resourceVersion": resource_version});
        if let Some(token) = continue_token {
            metadata["continue"] = json!(token);
        }
        // A row is about as long as the object's metadata; this saves most regrowth.
        let mut out = Vec::with_capacity(self.definitions.len() + 64 + objects.len() * 256);
        out.extend_from_slice(b"{\"apiVersion\":\"meta.k8s.io/v1\",\"columnDefinitions\":");
        out.extend_from_slice(&self.definitions);
        out.extend_from_slice(b",\"kind\":\"Table\",\"metadata\":");
        write_json(&mut out, &metadata);
        out.extend_from_slice(b",\"rows\":[");
        for (index, stored) in objects.enumerate() {
            if index > 0 {
                out.push(b',');
            }
            self.write_row(&mut out, stored);
        }
        out.extend_from_slice(b"]}");
        Bytes::from(out)
    }
}

/// The Table of one Scale (`kubectl get --subresource=scale`), with the API server's columns.
pub fn scale_table(scale: &Value) -> Value {
    let mut metadata = scale["metadata"].clone();
    if let Some(map) = metadata.as_object_mut() {
        map.remove("managedFields");
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": scale.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "priority": 0,
                "description": "Name must be unique within a namespace."},
            {"name": "Desired", "type": "integer", "format": "", "priority": 0,
                "description": "replicas is the desired number of instances for the scaled object."},
            {"name": "Available", "type": "integer", "format": "", "priority": 0,
                "description": "replicas is the actual number of observed instances of the scaled object."},
        ],
        "rows": [{
            "cells": [
                scale.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
                scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0)),
                scale.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            ],
            "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata},
        }],
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
    fn an_event_with_only_an_event_time_shows_when_it_was_last_seen() {
        let info = crate::registry::builtins()
            .into_iter()
            .find(|info| info.group.is_empty() && info.plural == "events")
            .unwrap();
        let last_seen = columns(&info, "v1").remove(0);
        let now = jiff::Timestamp::now().as_second();
        let ago = |seconds: i64| {
            jiff::Timestamp::from_second(now - seconds)
                .unwrap()
                .strftime("%Y-%m-%dT%H:%M:%S.000000Z")
                .to_string()
        };
        let event = json!({"eventTime": ago(190), "lastTimestamp": null});
        assert_eq!(cell(&event, &last_seen, now), json!("3m10s"));
        let series =
            json!({"eventTime": ago(600), "series": {"count": 3, "lastObservedTime": ago(5)}});
        assert_eq!(cell(&series, &last_seen, now), json!("5s"));
    }

    fn widget_info() -> ResourceInfo {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "additionalPrinterColumns": [
                        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"},
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]}]}
        });
        crate::registry::resource_from_crd(&crd).unwrap()
    }

    fn widget(name: &str, created: &str) -> std::sync::Arc<Stored> {
        Stored::new(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "team", "resourceVersion": "5",
                "creationTimestamp": created, "labels": {"app": "demo"},
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
            "spec": {"size": 3},
            "status": {"conditions": [{"type": "Ready", "reason": "Registered"}]}}))
    }

    #[test]
    fn printer_columns_become_cells_and_rows_carry_the_metadata() {
        let info = widget_info();
        let created = jiff::Timestamp::now()
            .checked_sub(jiff::SignedDuration::from_secs(190))
            .unwrap()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let (a, b) = (widget("a", &created), widget("b", "not a time"));
        let writer = TableWriter::new(&info, "v1", IncludeObject::Metadata);
        let bytes = writer.table([&*a, &*b].into_iter(), "9", Some("next-page"));
        let table: Value = serde_json::from_slice(&bytes).unwrap();
        let age = table["rows"][0]["cells"][3].as_str().unwrap().to_owned();
        assert!(["3m10s", "3m11s"].contains(&age.as_str()), "{age}");
        let metadata = json!({"name": "a", "namespace": "team", "resourceVersion": "5",
            "creationTimestamp": created, "labels": {"app": "demo"}});
        assert_eq!(
            table,
            json!({
                "kind": "Table",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "9", "continue": "next-page"},
                "columnDefinitions": [
                    {"name": "Name", "type": "string", "format": "name", "priority": 0,
                        "description": "Name must be unique within a namespace."},
                    {"name": "Ready", "type": "string", "format": "", "priority": 0, "description": ""},
                    {"name": "Size", "type": "integer", "format": "", "priority": 1, "description": ""},
                    {"name": "Age", "type": "string", "format": "", "priority": 0, "description": ""},
                ],
                "rows": [
                    {"cells": ["a", "Registered", 3, age],
                        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}},
                    {"cells": ["b", "Registered", 3, "<unknown>"],
                        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                            "metadata": {"name": "b", "namespace": "team", "resourceVersion": "5",
                                "creationTimestamp": "not a time", "labels": {"app": "demo"}}}},
                ],
            })
        );
    }

    #[test]
    fn include_object_picks_what_rows_embed() {
        let info = widget_info();
        let a = widget("a", "2025-01-01T00:00:00Z");
        let embedded = |include| {
            let bytes =
                TableWriter::new(&info, "v1", include).table(std::iter::once(&*a), "1", None);
            serde_json::from_slice::<Value>(&bytes).unwrap()["rows"][0]["object"].clone()
        };
        assert_eq!(embedded(IncludeObject::None), Value::Null);
        assert_eq!(embedded(IncludeObject::Object), a.value);
        let empty = TableWriter::new(&info, "v1", IncludeObject::Metadata).table(
            std::iter::empty(),
            "1",
            None,
        );
        let empty: Value = serde_json::from_slice(&empty).unwrap();
        assert_eq!(empty["rows"], json!([]));
        assert!(empty["metadata"].get("continue").is_none());
    }

    #[test]
    fn built_in_kinds_have_their_columns() {
        let secrets = crate::registry::builtins()
            .into_iter()
            .find(|r| r.plural == "secrets")
            .unwrap();
        let secret = Stored::new(json!({"metadata": {"name": "s"}, "type": "Opaque",
            "data": {"a": "", "b": ""}}));
        let bytes = TableWriter::new(&secrets, "v1", IncludeObject::None).table(
            std::iter::once(&*secret),
            "1",
            None,
        );
        let table: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(table["rows"][0]["cells"], json!(["s", "Opaque", 2, null]));
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Type", "Data", "Age"]);
    }
}
