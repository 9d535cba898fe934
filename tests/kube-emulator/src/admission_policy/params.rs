//! A binding's parameter objects (`paramRef`) for a policy with a `paramKind`, found the way the
//! API server's `CollectParams` finds them: by name or by label selector, in the request's
//! namespace unless the binding names one, with `parameterNotFoundAction` deciding whether none
//! found denies.

use serde_json::Value;

use super::matching::selects;
use crate::objects::Access;

/// The params to evaluate the policy with, each once (`None`: `params` is null); empty when
/// none were found and that is allowed. The error configures the binding wrongly.
pub fn collect(
    store: &mut dyn Access,
    policy_spec: &Value,
    param_ref: &Value,
    namespace: &str,
) -> Result<Vec<Option<Value>>, String> {
    let param_kind = &policy_spec["paramKind"];
    if param_kind.is_null() || param_ref.is_null() {
        return Ok(vec![None]);
    }
    let api_version = param_kind["apiVersion"].as_str().unwrap_or_default();
    let kind = param_kind["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let info = store
        .resource_for_kind(group, version, kind)
        .ok_or_else(|| {
            format!(
                "paramKind kind `&ParamKind{{APIVersion:{api_version},Kind:{kind},}}` not known"
            )
        })?;
    let wanted_namespace = param_ref["namespace"].as_str().unwrap_or_default();
    let namespace = if info.namespaced {
        match (wanted_namespace, namespace) {
            ("", "") => {
                return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
            }
            ("", request_namespace) => request_namespace,
            (named, _) => named,
        }
    } else if !wanted_namespace.is_empty() {
        return Err(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
        );
    } else {
        ""
    };
    let name = param_ref["name"].as_str().unwrap_or_default();
    let selector = &param_ref["selector"];
    let found: Vec<Option<Value>> = match (name.is_empty(), selector.is_null()) {
        (false, false) => {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        (false, true) => store
            .get(&info.key(), namespace, name)
            .map(|stored| Some(stored.value.clone()))
            .into_iter()
            .collect(),
        (true, false) => store
            .list_all(&info.key())
            .into_iter()
            .filter(|stored| {
                stored
                    .value
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    == namespace
                    && selects(selector, stored.value.pointer("/metadata/labels"))
            })
            .map(|stored| Some(stored.value.clone()))
            .collect(),
        (true, true) => return Err("one of name or selector must be provided".into()),
    };
    if found.is_empty() && param_ref["parameterNotFoundAction"].as_str() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found)
}
