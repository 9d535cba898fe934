//! The `scale` subresource: an `autoscaling/v1` Scale read from an object (Deployments,
//! StatefulSets, custom resources declaring one) and written back into its replicas field.

use serde_json::{Value, json};

use super::{
    Access, Ownership, PatchKind, WriteContext, Written, apply_json_patch, check_resource_version,
    commit, resource_name,
};
use crate::managed_fields::Scope;
use crate::registry::{ResourceInfo, ScaleSelector, ScaleSubresource};
use crate::status::{ApiError, ApiResult, Cause, StatusReason};

/// How a scale write changes the Scale.
#[derive(Debug, Clone, Copy)]
pub enum ScaleChange<'a> {
    /// PUT of a whole Scale.
    Replace(&'a Value),
    /// PATCH of the current Scale.
    Patch(PatchKind, &'a [u8]),
}

/// `.spec.replicas` as a JSON pointer.
fn pointer(path: &str) -> String {
    path.trim().replace('.', "/")
}

fn read_replicas(object: &Value, path: &str) -> Option<i64> {
    object.pointer(&pointer(path)).and_then(Value::as_i64)
}

/// A `LabelSelector` in the string form of the API server's `labels.Selector`: requirements
/// sorted by key, values sorted.
pub fn selector_string(selector: &Value) -> String {
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector["matchLabels"].as_object() {
        for (key, value) in labels {
            let value = value.as_str().unwrap_or_default();
            requirements.push((key.clone(), format!("{key}={value}")));
        }
    }
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let mut values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        values.dedup();
        let text = match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        requirements.push((key.to_owned(), text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

/// The Scale of an object, as the API server reports it.
pub fn to_scale(scale: &ScaleSubresource, object: &Value) -> Value {
    let meta = &object["metadata"];
    let mut metadata = json!({});
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = meta.get(key) {
            metadata[key] = value.clone();
        }
    }
    let replicas = read_replicas(object, &scale.spec_replicas).unwrap_or(scale.default_replicas);
    // ScaleSpec leaves a zero out; ScaleStatus always has its replicas.
    let spec = if replicas == 0 {
        json!({})
    } else {
        json!({"replicas": replicas})
    };
    let mut status =
        json!({"replicas": read_replicas(object, &scale.status_replicas).unwrap_or(0)});
    let selector = match &scale.selector {
        Some(ScaleSelector::Object(path)) => object
            .pointer(&pointer(path))
            .filter(|s| s.is_object())
            .map(selector_string),
        Some(ScaleSelector::Text(path)) => object
            .pointer(&pointer(path))
            .and_then(Value::as_str)
            .map(str::to_owned),
        None => None,
    };
    if let Some(selector) = selector.filter(|s| !s.is_empty()) {
        status["selector"] = json!(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    })
}

fn invalid(name: &str, cause: Cause) -> ApiError {
    ApiError::invalid("Scale", "autoscaling", name, vec![cause])
}

/// Writes a Scale into the object's replicas: a replace or a patch of the current Scale, with
/// its resourceVersion as a precondition. Only the replicas change; the managed fields record
/// the write as the manager's on the `scale` subresource.
pub fn write(
    store: &mut dyn Access,
    info: &ResourceInfo,
    namespace: &str,
    name: &str,
    change: ScaleChange<'_>,
    ctx: &WriteContext,
) -> ApiResult<Written> {
    let Some(scale) = &info.scale else {
        return Err(ApiError::not_found(
            &crate::status::ResourceName {
                group: &info.group,
                plural: &format!("{}/scale", info.plural),
            },
            name,
        ));
    };
    let live = store
        .get(&info.key(), namespace, name)
        .ok_or_else(|| ApiError::not_found(&resource_name(info), name))?;
    let current = to_scale(scale, &live.value);
    let wanted = match change {
        ScaleChange::Replace(body) => body.clone(),
        ScaleChange::Patch(kind, body) => {
            let mut patched = current.clone();
            match kind {
                PatchKind::Json => {
                    let operations: json_patch::Patch =
                        serde_json::from_slice(body).map_err(|e| {
                            ApiError::bad_request(format!("the JSON patch is malformed: {e}"))
                        })?;
                    apply_json_patch(&mut patched, operations)?;
                }
                PatchKind::Merge | PatchKind::Strategic => {
                    let merge: Value = serde_json::from_slice(body).map_err(|e| {
                        ApiError::bad_request(format!("the merge patch is not JSON: {e}"))
                    })?;
                    json_patch::merge(&mut patched, &merge);
                }
                PatchKind::Apply => {
                    return Err(ApiError::new(
                        StatusReason::UnsupportedMediaType,
                        "the emulator does not take server-side apply on the scale subresource; send a merge patch",
                    ));
                }
            }
            patched
        }
    };
    if !wanted.is_object() {
        return Err(ApiError::bad_request("the Scale must be a JSON object"));
    }
    for (key, expected) in [("apiVersion", "autoscaling/v1"), ("kind", "Scale")] {
        if let Some(given) = wanted[key]
            .as_str()
            .filter(|g| !g.is_empty() && g != &expected)
        {
            return Err(ApiError::bad_request(format!(
                "the scale subresource takes an autoscaling/v1 Scale, not {key} {given:?}"
            )));
        }
    }
    if let Some(given) = wanted
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty() && *n != name)
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        )));
    }
    let replicas = match wanted.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(value) => value.as_i64().ok_or_else(|| {
            invalid(
                name,
                Cause {
                    kind: "FieldValueInvalid",
                    message: format!("Invalid value: {value}: must be an integer"),
                    field: "spec.replicas".into(),
                },
            )
        })?,
    };
    if replicas < 0 {
        return Err(invalid(
            name,
            Cause {
                kind: "FieldValueInvalid",
                message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                field: "spec.replicas".into(),
            },
        ));
    }
    if i32::try_from(replicas).is_err() {
        return Err(invalid(
            name,
            Cause {
                kind: "FieldValueInvalid",
                message: format!("Invalid value: {replicas}: must be a 32-bit integer"),
                field: "spec.replicas".into(),
            },
        ));
    }
    check_resource_version(info, name, &wanted, &live.value)?;
    let mut object = live.value.clone();
    set_at(&mut object, &scale.spec_replicas, json!(replicas));
    commit(
        store,
        info,
        &live.value,
        object,
        Scope::Scale,
        ctx,
        Ownership::Update,
    )
}

/// Sets a value at a dotted path, making the objects on the way.
fn set_at(object: &mut Value, path: &str, value: Value) {
    let keys: Vec<&str> = path.split('.').filter(|k| !k.is_empty()).collect();
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    let mut current = object;
    for key in parents {
        if !current[*key].is_object() {
            current[*key] = json!({});
        }
        current = &mut current[*key];
    }
    current[*last] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_read_like_the_api_server_writes_them() {
        let selector = json!({
            "matchLabels": {"tier": "web", "app": "shop"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "NotIn", "values": ["b"]},
                {"key": "canary", "operator": "Exists"}
            ]
        });
        assert_eq!(
            selector_string(&selector),
            "app=shop,canary,env in (dev,prod),!legacy,tier=web,zone notin (b)"
        );
    }

    #[test]
    fn a_deployment_reads_as_a_scale() {
        let scale = crate::registry::builtins()
            .into_iter()
            .find(|r| r.plural == "deployments")
            .and_then(|r| r.scale)
            .unwrap();
        let deployment = json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "7",
                "creationTimestamp": "2025-01-01T00:00:00Z", "labels": {"a": "b"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": 2}
        });
        assert_eq!(
            to_scale(&scale, &deployment),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "7",
                    "creationTimestamp": "2025-01-01T00:00:00Z"},
                "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=web"}})
        );
        // No replicas stored: the API server's default; none running: a zero status.
        let bare = json!({"metadata": {"name": "web"}, "spec": {}});
        let seen = to_scale(&scale, &bare);
        assert_eq!(seen["spec"], json!({"replicas": 1}));
        assert_eq!(seen["status"], json!({"replicas": 0}));
    }
}
