//! Strategic merge patch, as kubectl sends it for built-in kinds: a JSON merge patch in which
//! lists of the well-known keyed kinds (containers, env, ports, volumes, volumeMounts,
//! ownerReferences, conditions, ...) are merged item by item on their merge key, with the
//! `$patch: delete|replace` and `$setElementOrder`/`$retainKeys` directives understood (the
//! order `$setElementOrder` gives is the order of the merged list, as in the API server).
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

/// A list a `$setElementOrder` directive orders: its field, the directive's items and the live
/// list before merging.
type LiveOrder<'a> = (&'a str, &'a [Value], Option<Vec<Value>>);

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
    // The live order of each list a `$setElementOrder` directive orders, before merging.
    let live_orders: Vec<LiveOrder<'_>> = patch_map
        .iter()
        .filter_map(|(key, order)| {
            let field = key.strip_prefix("$setElementOrder/")?;
            let order = order.as_array()?;
            let live = target_map.get(field).and_then(Value::as_array).cloned();
            Some((field, order.as_slice(), live))
        })
        .collect();
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
    for (field, order, live) in live_orders {
        if let Some(Value::Array(merged)) = target_map.get_mut(field) {
            set_element_order(field, merged, order, live.as_deref().unwrap_or_default());
        }
    }
}

/// Puts a merged list in the order a `$setElementOrder/<field>` directive gives, as the API
/// server does: the items it names in its order, and the others (only in the live list) slotted
/// in among them where the live order puts them. Items are told apart by their merge key, or
/// are themselves for a list of scalars.
fn set_element_order(field: &str, merged: &mut Vec<Value>, order: &[Value], live: &[Value]) {
    let key = merge_key(field, order);
    let identity = |item: &Value| -> Option<Value> {
        match key {
            Some(key) => item.get(key).cloned(),
            None if is_scalar(item) => Some(item.clone()),
            None => None,
        }
    };
    let wanted: Vec<Value> = order.iter().filter_map(identity).collect();
    if wanted.len() != order.len() || !merged.iter().all(|item| identity(item).is_some()) {
        // Not a directive this list can follow (items without the merge key: the API server
        // refuses such a patch, the emulator leaves the order as merged).
        return;
    }
    let live: Vec<Option<Value>> = live.iter().map(identity).collect();
    let position_in = |list: &[Value], item: &Value| {
        identity(item).and_then(|id| list.iter().position(|w| *w == id))
    };
    let live_position = |item: &Value| {
        identity(item).and_then(|id| live.iter().position(|l| l.as_ref() == Some(&id)))
    };
    let (mut named, mut server_only): (Vec<Value>, Vec<Value>) = std::mem::take(merged)
        .into_iter()
        .partition(|item| position_in(&wanted, item).is_some());
    named.sort_by_key(|item| position_in(&wanted, item));
    server_only.sort_by_key(|item| live_position(item).unwrap_or(usize::MAX));
    // Each server-only item goes before the first named item the live order puts after it.
    let mut server_only = server_only.into_iter().peekable();
    for item in named {
        while let Some(next) = server_only.peek() {
            let before = match (live_position(next), live_position(&item)) {
                (Some(a), Some(b)) => a < b,
                _ => false,
            };
            if !before {
                break;
            }
            merged.extend(server_only.next());
        }
        merged.push(item);
    }
    merged.extend(server_only);
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
    fn set_element_order_orders_the_merged_list() {
        // kubectl apply adding an env var back before the one `kubectl set env` added.
        let mut deployment =
            json!({"containers": [{"name": "web", "env": [{"name": "FOO", "value": "bar"}]}]});
        let patch = json!({"$setElementOrder/containers": [{"name": "web"}],
            "containers": [{"name": "web", "$setElementOrder/env": [{"name": "A"}, {"name": "FOO"}],
                "env": [{"name": "A", "value": "1"}]}]});
        apply(&mut deployment, &patch);
        assert_eq!(
            deployment["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "FOO", "value": "bar"}])
        );
        // Server-only items keep their place among the named ones.
        let mut list = json!({"ports": [{"port": 1}, {"port": 2}, {"port": 3}, {"port": 4}]});
        apply(
            &mut list,
            &json!({"$setElementOrder/ports": [{"port": 3}, {"port": 1}]}),
        );
        let ports: Vec<i64> = list["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["port"].as_i64().unwrap())
            .collect();
        assert_eq!(ports, [2, 3, 1, 4]);
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
