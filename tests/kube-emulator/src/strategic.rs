//! Strategic merge patch, as kubectl sends it for built-in kinds: a JSON merge patch in which
//! lists of the well-known keyed kinds (containers, env, ports, volumes, volumeMounts,
//! ownerReferences, conditions, ...) are merged item by item on their merge key, with the
//! `$patch: delete|replace` and `$setElementOrder`/`$retainKeys` directives understood.
//! Other lists are replaced, as in a merge patch.

use serde_json::{Map, Value};

/// The merge key of a list field, by the field's name.
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    let key = match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "volumeDevices"
        | "hostAliases" => "name",
        "volumeMounts" => "mountPath",
        "ports" => {
            if items.iter().all(|i| i.get("containerPort").is_some()) {
                "containerPort"
            } else {
                "port"
            }
        }
        "ownerReferences" => "uid",
        "conditions" => "type",
        _ => return None,
    };
    items
        .iter()
        .all(|item| item.get(key).is_some_and(is_scalar) || item.get("$patch").is_some())
        .then_some(key)
}

/// Whether a value can be a merge key: a string, number or boolean (an object or a list would
/// never match the item it was stored as, once its directives are gone).
fn is_scalar(value: &Value) -> bool {
    matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

fn without_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), without_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_directives).collect()),
        other => other.clone(),
    }
}

/// Applies a strategic merge patch to `target`.
pub fn apply(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = without_directives(patch);
        return;
    };
    match patch_map.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = without_directives(patch);
            return;
        }
        Some("delete") => {
            *target = Value::Object(Map::new());
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(target_map) = target.as_object_mut() else {
        return;
    };
    for (key, value) in patch_map {
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null => {
                target_map.remove(key);
            }
            Value::Object(_) => apply(target_map.entry(key.clone()).or_insert(Value::Null), value),
            Value::Array(items) => match merge_key(key, items) {
                // A keyed list merges into the live one, or into none (so that a `$patch:
                // delete` item is not added where there was no list).
                Some(merge_key) => {
                    let live = target_map.entry(key.clone()).or_insert(Value::Null);
                    if !live.is_array() {
                        *live = Value::Array(Vec::new());
                    }
                    if let Some(live) = live.as_array_mut() {
                        merge_list(live, items, merge_key);
                    }
                }
                None => {
                    target_map.insert(key.clone(), without_directives(value));
                }
            },
            other => {
                target_map.insert(key.clone(), other.clone());
            }
        }
    }
}

fn merge_list(live: &mut Vec<Value>, items: &[Value], key: &str) {
    for item in items {
        // A directive without a merge key names no item.
        let Some(wanted) = item.get(key).filter(|v| is_scalar(v)) else {
            continue;
        };
        let position = live
            .iter()
            .position(|existing| existing.get(key) == Some(wanted));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(index), true) => {
                live.remove(index);
            }
            (None, true) => {}
            (Some(index), false) => apply(&mut live[index], item),
            // A new item is the item applied to nothing: without its directives and its nulls
            // (as in a merge patch), so that applying the patch again changes nothing.
            (None, false) => {
                let mut added = Value::Object(Map::new());
                apply(&mut added, item);
                live.push(added);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keyed_lists_merge_item_by_item() {
        let mut deployment = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "v1", "ports": [{"containerPort": 80}]},
            {"name": "sidecar", "image": "s1"}
        ]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
            "containers": [{"name": "app", "image": "v2"}, {"name": "sidecar", "$patch": "delete"}]
        }}}});
        apply(&mut deployment, &patch);
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"],
            json!([{"name": "app", "image": "v2", "ports": [{"containerPort": 80}]}])
        );
    }

    #[test]
    fn other_lists_are_replaced_and_nulls_delete() {
        let mut config = json!({"data": {"a": "1", "b": "2"}, "metadata": {"finalizers": ["x"]}});
        apply(
            &mut config,
            &json!({"data": {"a": null}, "metadata": {"finalizers": ["y"]}}),
        );
        assert_eq!(
            config,
            json!({"data": {"b": "2"}, "metadata": {"finalizers": ["y"]}})
        );
    }
}
