//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! Fields are tracked as leaf paths. Objects are granular (each key owned separately); lists
//! and scalars are owned whole (lists are treated as atomic, `x-kubernetes-list-type: map`
//! lists included), which is what a single manager per list needs.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::status::Cause;

pub type FieldPath = Vec<String>;
pub type FieldSet = BTreeSet<FieldPath>;

/// Which part of an object a write may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything but `status` (resources with a status subresource).
    MainWithoutStatus,
    /// The whole object (resources without a status subresource).
    Whole,
    /// Only `status` (the status subresource).
    Status,
    /// The replicas, through the scale subresource (what it changes is all outside `status`).
    Scale,
}

impl Scope {
    pub fn subresource(self) -> Option<&'static str> {
        match self {
            Scope::Status => Some("status"),
            Scope::Scale => Some("scale"),
            Scope::MainWithoutStatus | Scope::Whole => None,
        }
    }
}

/// Metadata the system sets; never owned by a manager.
const SYSTEM_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

/// The leaf paths of the fields an object sets within a scope.
pub fn fields_of(object: &Value, scope: Scope) -> FieldSet {
    let mut fields = FieldSet::new();
    let Some(map) = object.as_object() else {
        return fields;
    };
    for (key, value) in map {
        let included = match scope {
            Scope::Status => key == "status",
            Scope::MainWithoutStatus | Scope::Scale => {
                !matches!(key.as_str(), "apiVersion" | "kind" | "status")
            }
            Scope::Whole => !matches!(key.as_str(), "apiVersion" | "kind"),
        };
        if !included {
            continue;
        }
        if key == "metadata" {
            if let Some(meta) = value.as_object() {
                for (meta_key, meta_value) in meta {
                    if !SYSTEM_METADATA.contains(&meta_key.as_str()) {
                        collect(
                            meta_value,
                            vec!["metadata".into(), meta_key.clone()],
                            &mut fields,
                        );
                    }
                }
            }
        } else {
            collect(value, vec![key.clone()], &mut fields);
        }
    }
    fields
}

fn collect(value: &Value, path: FieldPath, fields: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let mut child_path = path.clone();
                child_path.push(key.clone());
                collect(child, child_path, fields);
            }
        }
        _ => {
            fields.insert(path);
        }
    }
}

pub fn value_at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object, |current, key| current.get(key))
}

/// Removes a leaf and then any parent objects it leaves empty.
fn remove_at(object: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = &mut *object;
    for key in parents {
        match current.get_mut(key) {
            Some(next) => current = next,
            None => return,
        }
    }
    if let Some(map) = current.as_object_mut() {
        map.remove(last);
    }
    if parents.len() > 1
        && value_at(object, parents)
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
    {
        remove_at(object, parents);
    }
}

/// The leaf paths whose values differ between two versions of an object, within a scope.
pub fn changed_fields(old: &Value, new: &Value, scope: Scope) -> FieldSet {
    let old_fields = fields_of(old, scope);
    let new_fields = fields_of(new, scope);
    let mut changed: FieldSet = new_fields
        .iter()
        .filter(|p| value_at(old, p) != value_at(new, p))
        .cloned()
        .collect();
    changed.extend(old_fields.difference(&new_fields).cloned());
    changed
}

/// `fieldsV1` notation: `{"f:spec": {"f:issuer": {}}}`.
pub fn to_fields_v1(fields: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in fields {
        let mut current = &mut root;
        for key in path {
            let entry = current
                .entry(format!("f:{key}"))
                .or_insert_with(|| json!({}));
            let Value::Object(next) = entry else { break };
            current = next;
        }
    }
    Value::Object(root)
}

/// Reads `fieldsV1` back into leaf paths; keyed list items (`k:`, `v:`, `i:`) count as their list.
pub fn from_fields_v1(value: &Value) -> FieldSet {
    let mut fields = FieldSet::new();
    walk_fields_v1(value, Vec::new(), &mut fields);
    fields
}

fn walk_fields_v1(value: &Value, path: FieldPath, fields: &mut FieldSet) {
    let Some(map) = value.as_object() else { return };
    let mut has_children = false;
    for (key, child) in map {
        if let Some(name) = key.strip_prefix("f:") {
            has_children = true;
            let mut child_path = path.clone();
            child_path.push(name.to_owned());
            walk_fields_v1(child, child_path, fields);
        } else if key != "." {
            has_children = true;
            if !path.is_empty() {
                fields.insert(path.clone());
            }
        }
    }
    if !has_children && !path.is_empty() {
        fields.insert(path);
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedEntry {
    pub manager: String,
    pub apply: bool,
    pub api_version: String,
    pub time: String,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl ManagedEntry {
    fn same_slot(&self, manager: &str, apply: bool, subresource: Option<&str>) -> bool {
        self.manager == manager && self.apply == apply && self.subresource.as_deref() == subresource
    }

    pub fn to_json(&self) -> Value {
        let mut entry = json!({
            "manager": self.manager,
            "operation": if self.apply { "Apply" } else { "Update" },
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&self.fields),
        });
        if let Some(sub) = &self.subresource {
            entry["subresource"] = json!(sub);
        }
        entry
    }
}

pub fn read_entries(object: &Value) -> Vec<ManagedEntry> {
    let Some(entries) = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            Some(ManagedEntry {
                manager: entry["manager"].as_str()?.to_owned(),
                apply: entry["operation"].as_str() == Some("Apply"),
                api_version: entry["apiVersion"].as_str().unwrap_or_default().to_owned(),
                time: entry["time"].as_str().unwrap_or_default().to_owned(),
                subresource: entry["subresource"].as_str().map(str::to_owned),
                fields: from_fields_v1(&entry["fieldsV1"]),
            })
        })
        .collect()
}

pub fn write_entries(object: &mut Value, entries: &[ManagedEntry]) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let entries: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(ManagedEntry::to_json)
        .collect();
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Who wrote what in an ordinary (non-apply) write: the changed fields move to `manager`.
pub struct UpdateOwnership<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub time: &'a str,
    pub scope: Scope,
}

impl UpdateOwnership<'_> {
    pub fn record(&self, entries: &mut Vec<ManagedEntry>, old: &Value, new: &Value) {
        let changed = changed_fields(old, new, self.scope);
        if changed.is_empty() {
            return;
        }
        let present: FieldSet = changed
            .iter()
            .filter(|p| value_at(new, p).is_some())
            .cloned()
            .collect();
        for entry in entries.iter_mut() {
            entry
                .fields
                .retain(|owned| !changed.iter().any(|c| overlaps(c, owned)));
        }
        let subresource = self.scope.subresource();
        match entries
            .iter_mut()
            .find(|e| e.same_slot(self.manager, false, subresource))
        {
            Some(entry) => {
                entry.fields.extend(present);
                entry.time = self.time.to_owned();
                entry.api_version = self.api_version.to_owned();
            }
            None if !present.is_empty() => entries.push(ManagedEntry {
                manager: self.manager.to_owned(),
                apply: false,
                api_version: self.api_version.to_owned(),
                time: self.time.to_owned(),
                subresource: subresource.map(str::to_owned),
                fields: present,
            }),
            None => {}
        }
        entries.retain(|e| !e.fields.is_empty());
    }
}

/// A server-side apply request.
pub struct Apply<'a> {
    pub manager: &'a str,
    pub force: bool,
    pub api_version: &'a str,
    pub time: &'a str,
    pub scope: Scope,
}

/// The outcome of a server-side apply: the merged object and its new ownership.
#[derive(Debug)]
pub struct Applied {
    pub object: Value,
    pub entries: Vec<ManagedEntry>,
}

impl Apply<'_> {
    /// Merges `config` into `live` for this manager, or names every conflicting field.
    pub fn merge(&self, live: &Value, config: &Value) -> Result<Applied, Vec<Cause>> {
        let applied = fields_of(config, self.scope);
        let subresource = self.scope.subresource();
        let mut entries = read_entries(live);

        let mut conflicts = Vec::new();
        for entry in entries
            .iter()
            .filter(|e| e.manager != self.manager && e.subresource.as_deref() == subresource)
        {
            for path in &applied {
                let clash = entry.fields.iter().any(|owned| {
                    overlaps(owned, path) && value_at(live, owned) != value_at(config, owned)
                });
                if clash {
                    conflicts.push((
                        entry.manager.clone(),
                        entry.api_version.clone(),
                        path.clone(),
                    ));
                }
            }
        }
        if !conflicts.is_empty() && !self.force {
            return Err(conflicts
                .into_iter()
                .map(|(manager, api_version, path)| Cause {
                    kind: "FieldManagerConflict",
                    message: format!("conflict with \"{manager}\" using {api_version}"),
                    field: format!(".{}", path.join(".")),
                })
                .collect());
        }

        let previous: FieldSet = entries
            .iter()
            .find(|e| e.same_slot(self.manager, true, subresource))
            .map(|e| e.fields.clone())
            .unwrap_or_default();
        let others: FieldSet = entries
            .iter()
            .filter(|e| !e.same_slot(self.manager, true, subresource))
            .flat_map(|e| e.fields.iter().cloned())
            .collect();

        let mut object = live.clone();
        for dropped in previous.difference(&applied) {
            if !others.iter().any(|o| overlaps(o, dropped)) {
                remove_at(&mut object, dropped);
            }
        }
        for path in &applied {
            match value_at(config, path) {
                Some(Value::Null) | None => remove_at(&mut object, path),
                Some(value) => set_at(&mut object, path, value.clone()),
            }
        }

        if self.force {
            for entry in entries.iter_mut().filter(|e| e.manager != self.manager) {
                entry.fields.retain(|owned| {
                    !applied.iter().any(|p| {
                        overlaps(p, owned) && value_at(live, owned) != value_at(config, owned)
                    })
                });
            }
        }
        match entries
            .iter_mut()
            .find(|e| e.same_slot(self.manager, true, subresource))
        {
            Some(entry) => {
                entry.fields = applied;
                entry.time = self.time.to_owned();
                entry.api_version = self.api_version.to_owned();
            }
            None => entries.push(ManagedEntry {
                manager: self.manager.to_owned(),
                apply: true,
                api_version: self.api_version.to_owned(),
                time: self.time.to_owned(),
                subresource: subresource.map(str::to_owned),
                fields: applied,
            }),
        }
        entries.retain(|e| !e.fields.is_empty());
        Ok(Applied { object, entries })
    }
}

fn set_at(object: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = object;
    for key in parents {
        if !current.is_object() {
            *current = json!({});
        }
        let Some(map) = current.as_object_mut() else {
            return;
        };
        current = map.entry(key.clone()).or_insert_with(|| json!({}));
    }
    if !current.is_object() {
        *current = json!({});
    }
    if let Some(map) = current.as_object_mut() {
        map.insert(last.clone(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(manager: &str, force: bool) -> Apply<'_> {
        Apply {
            manager,
            force,
            api_version: "v1",
            time: "t",
            scope: Scope::Whole,
        }
    }

    #[test]
    fn fields_v1_round_trips() {
        let object = json!({"metadata": {"name": "x", "labels": {"a": "1"}}, "data": {"k": "v"}});
        let fields = fields_of(&object, Scope::Whole);
        let v1 = to_fields_v1(&fields);
        assert_eq!(
            v1,
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:data": {"f:k": {}}})
        );
        assert_eq!(from_fields_v1(&v1), fields);
    }

    #[test]
    fn a_field_the_manager_stops_applying_is_removed() {
        let live = json!({"metadata": {"name": "x"}});
        let first = apply("a", false)
            .merge(&live, &json!({"data": {"k": "1", "j": "2"}}))
            .unwrap();
        let mut live = first.object;
        write_entries(&mut live, &first.entries);
        let second = apply("a", false)
            .merge(&live, &json!({"data": {"k": "1"}}))
            .unwrap();
        assert_eq!(second.object["data"], json!({"k": "1"}));
    }

    #[test]
    fn another_managers_field_conflicts_unless_forced() {
        let live = json!({"metadata": {"name": "x"}});
        let first = apply("a", false)
            .merge(&live, &json!({"data": {"k": "1"}}))
            .unwrap();
        let mut live = first.object;
        write_entries(&mut live, &first.entries);
        let causes = apply("b", false)
            .merge(&live, &json!({"data": {"k": "2"}}))
            .unwrap_err();
        assert_eq!(causes[0].field, ".data.k");
        assert!(causes[0].message.contains("\"a\""));
        // Same value: shared ownership, no conflict.
        assert!(
            apply("b", false)
                .merge(&live, &json!({"data": {"k": "1"}}))
                .is_ok()
        );
        let forced = apply("b", true)
            .merge(&live, &json!({"data": {"k": "2"}}))
            .unwrap();
        assert_eq!(forced.object["data"]["k"], "2");
        assert!(forced.entries.iter().all(|e| e.manager == "b"));
    }

    #[test]
    fn an_update_takes_ownership_of_changed_fields() {
        let old = json!({"data": {"k": "1"}});
        let new = json!({"data": {"k": "2"}});
        let mut entries = vec![ManagedEntry {
            manager: "a".into(),
            apply: true,
            api_version: "v1".into(),
            time: "t".into(),
            subresource: None,
            fields: fields_of(&old, Scope::Whole),
        }];
        UpdateOwnership {
            manager: "b",
            api_version: "v1",
            time: "t",
            scope: Scope::Whole,
        }
        .record(&mut entries, &old, &new);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].manager, "b");
    }
}
