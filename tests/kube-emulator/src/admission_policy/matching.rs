//! Which requests a policy's `matchConstraints` and a binding's `matchResources` select: the
//! namespace and object selectors, the (exclude) resource rules with their operations, scope and
//! resource names, and `matchPolicy: Equivalent` across the versions a resource is served at. As
//! the API server's `matching` and webhook `predicates` packages decide.

use serde_json::Value;

use super::Request;

/// Whether `constraints` (a `MatchResources`) select the request. A binding without
/// `resourceRules` selects whatever its policy does. `namespace_labels` reads the labels of the
/// request's Namespace object; `None` when it does not exist.
pub fn matches(
    constraints: &Value,
    request: &Request<'_>,
    namespace_labels: &dyn Fn() -> Option<Value>,
    is_binding: bool,
) -> Result<bool, String> {
    if !namespace_selected(constraints, request, namespace_labels)? {
        return Ok(false);
    }
    let object_selector = &constraints["objectSelector"];
    if !selector_is_empty(object_selector) {
        let labels = |o: Option<&Value>| o.and_then(|o| o.pointer("/metadata/labels")).cloned();
        let selected = [request.object, request.old_object]
            .into_iter()
            .any(|o| o.is_some() && selects(object_selector, labels(o).as_ref()));
        if !selected {
            return Ok(false);
        }
    }
    let equivalent = constraints["matchPolicy"].as_str() != Some("Exact");
    if rules_match(&constraints["excludeResourceRules"], request, equivalent) {
        return Ok(false);
    }
    if is_binding && constraints["resourceRules"].is_null() {
        return Ok(true);
    }
    Ok(rules_match(
        &constraints["resourceRules"],
        request,
        equivalent,
    ))
}

/// Cluster-scoped objects other than namespaces are never exempted by a namespace selector; a
/// Namespace being written is matched by its own new labels.
fn namespace_selected(
    constraints: &Value,
    request: &Request<'_>,
    namespace_labels: &dyn Fn() -> Option<Value>,
) -> Result<bool, String> {
    let is_namespace = request.is_namespace();
    if request.namespace.is_empty() && !is_namespace {
        return Ok(true);
    }
    let selector = &constraints["namespaceSelector"];
    if selector_is_empty(selector) {
        return Ok(true);
    }
    let labels = if is_namespace && request.subresource.is_empty() && request.object.is_some() {
        request
            .object
            .and_then(|o| o.pointer("/metadata/labels"))
            .cloned()
    } else {
        match namespace_labels() {
            Some(labels) => Some(labels),
            None => return Err(format!("namespaces \"{}\" not found", request.namespace)),
        }
    };
    Ok(selects(selector, labels.as_ref()))
}

fn selector_is_empty(selector: &Value) -> bool {
    let empty = |key: &str| match &selector[key] {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    };
    empty("matchLabels") && empty("matchExpressions")
}

/// Whether a `metav1.LabelSelector` selects `labels` (every requirement holds).
pub fn selects(selector: &Value, labels: Option<&Value>) -> bool {
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let match_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(key, value)| label(key).is_some() && label(key) == value.as_str());
    let expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|expression| {
            let key = expression["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = expression["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match expression["operator"].as_str() {
                Some("In") => label(key).is_some_and(|l| values.contains(&l)),
                Some("NotIn") => !label(key).is_some_and(|l| values.contains(&l)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                // Refused when the policy was written.
                _ => false,
            }
        });
    match_labels && expressions
}

fn rules_match(rules: &Value, request: &Request<'_>, equivalent: bool) -> bool {
    let rules = rules.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut versions = vec![request.version];
    if equivalent {
        versions.extend(
            request
                .info
                .versions
                .iter()
                .map(String::as_str)
                .filter(|v| *v != request.version),
        );
    }
    versions.iter().any(|version| {
        rules
            .iter()
            .any(|rule| rule_matches(rule, request, version))
    })
}

fn strings(value: &Value) -> impl Iterator<Item = &str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn exact_or_wildcard(items: &Value, wanted: &str) -> bool {
    strings(items).any(|item| item == "*" || item == wanted)
}

fn rule_matches(rule: &Value, request: &Request<'_>, version: &str) -> bool {
    let scope = match rule["scope"].as_str() {
        None | Some("*") => true,
        Some("Namespaced") => !request.is_namespace() && !request.namespace.is_empty(),
        Some("Cluster") => request.is_namespace() || request.namespace.is_empty(),
        Some(_) => false,
    };
    let operation =
        strings(&rule["operations"]).any(|op| op == "*" || op == request.operation.as_str());
    let resource = strings(&rule["resources"]).any(|entry| {
        let (resource, subresource) = entry.split_once('/').unwrap_or((entry, ""));
        (resource == "*" || resource == request.info.plural)
            && (subresource == "*" || subresource == request.subresource)
    });
    let named = match rule["resourceNames"].as_array() {
        Some(names) if !names.is_empty() => names.iter().any(|n| n.as_str() == Some(request.name)),
        _ => true,
    };
    scope
        && operation
        && exact_or_wildcard(&rule["apiGroups"], &request.info.group)
        && exact_or_wildcard(&rule["apiVersions"], version)
        && resource
        && named
}

#[cfg(test)]
mod tests {
    use super::super::{Operation, Request};
    use super::*;
    use crate::authz::UserInfo;
    use crate::registry::builtins;
    use serde_json::json;

    fn request<'a>(
        info: &'a crate::registry::ResourceInfo,
        user: &'a UserInfo,
        object: &'a Value,
        subresource: &'a str,
    ) -> Request<'a> {
        Request {
            operation: Operation::Update,
            info,
            version: "v1",
            subresource,
            namespace: "team",
            name: "settings",
            object: Some(object),
            old_object: Some(object),
            user,
            dry_run: false,
            kind: None,
        }
    }

    #[test]
    fn resource_rules_follow_resources_subresources_and_operations() {
        let pods = builtins().into_iter().find(|r| r.plural == "pods").unwrap();
        let user = UserInfo::user("u", &[]);
        let object = json!({"metadata": {"name": "settings", "labels": {"app": "web"}}});
        let main = request(&pods, &user, &object, "");
        let status = request(&pods, &user, &object, "status");
        let rule = |resources: Value, operations: Value| {
            json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": resources, "operations": operations}]})
        };
        let no_namespace = || None;
        let check = |c: &Value, r: &Request<'_>| matches(c, r, &no_namespace, false).unwrap();
        assert!(check(&rule(json!(["pods"]), json!(["UPDATE"])), &main));
        assert!(!check(&rule(json!(["pods"]), json!(["UPDATE"])), &status));
        assert!(check(&rule(json!(["pods/status"]), json!(["*"])), &status));
        assert!(check(&rule(json!(["*/*"]), json!(["*"])), &status));
        assert!(!check(&rule(json!(["*"]), json!(["*"])), &status));
        assert!(!check(
            &rule(json!(["pods"]), json!(["CREATE", "DELETE"])),
            &main
        ));
        let mut excluded = rule(json!(["*"]), json!(["*"]));
        excluded["excludeResourceRules"] = excluded["resourceRules"].clone();
        assert!(!check(&excluded, &main));
        let mut selected = rule(json!(["pods"]), json!(["*"]));
        selected["objectSelector"] =
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]});
        assert!(check(&selected, &main));
        selected["objectSelector"] = json!({"matchLabels": {"app": "db"}});
        assert!(!check(&selected, &main));
    }

    #[test]
    fn namespace_selectors_read_the_namespace_labels() {
        let pods = builtins().into_iter().find(|r| r.plural == "pods").unwrap();
        let user = UserInfo::user("u", &[]);
        let object = json!({"metadata": {"name": "settings"}});
        let constraints = json!({"namespaceSelector": {"matchLabels": {"env": "prod"}},
            "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}]});
        let prod = || Some(json!({"env": "prod"}));
        let dev = || Some(json!({"env": "dev"}));
        let r = request(&pods, &user, &object, "");
        assert!(matches(&constraints, &r, &prod, false).unwrap());
        assert!(!matches(&constraints, &r, &dev, false).unwrap());
        // A cluster-scoped object is never exempted by a namespace selector.
        let roles = builtins()
            .into_iter()
            .find(|r| r.plural == "clusterroles")
            .unwrap();
        let cluster = Request {
            namespace: "",
            ..request(&roles, &user, &object, "")
        };
        assert!(matches(&constraints, &cluster, &dev, false).unwrap());
    }
}
