//! Discovery (`/api`, `/apis`, `/apis/<group>`, `/api/v1`, `/apis/<group>/<version>`, and the
//! aggregated `/api` and `/apis` kubectl asks for), `/version` and OpenAPI v3 (`/openapi/v3` and
//! one document per group-version).

use serde_json::{Value, json};

use crate::registry::{Registry, ResourceInfo};

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "gitVersion": "v1.34.0-nauthera-emulator",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let entries: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = entries.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": entries, "preferredVersion": preferred})
}

pub fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(name, versions)| group_json(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let groups = registry.groups();
    let versions = groups.get(name)?;
    let mut group = group_json(name, versions);
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    Some(group)
}

fn served_at<'a>(
    registry: &'a Registry,
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'a ResourceInfo> + 'a {
    registry
        .all()
        .filter(move |r| r.group == group && r.versions.iter().any(|v| v == version))
}

/// The APIResourceList of a group-version, or `None` when nothing is served there.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for info in served_at(registry, group, version) {
        let mut entry = json!({
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": info.verbs(),
        });
        if !info.short_names.is_empty() {
            entry["shortNames"] = json!(info.short_names);
        }
        if !info.categories.is_empty() {
            entry["categories"] = json!(info.categories);
        }
        resources.push(entry);
        if info.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", info.plural),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if info.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", info.plural),
                "singularName": "",
                "namespaced": info.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        if info.group.is_empty() && info.plural == "serviceaccounts" {
            resources.push(json!({
                "name": "serviceaccounts/token",
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}

/// The media type of aggregated discovery (`/api` and `/apis` in one answer each), which a client
/// asks for in its Accept header and the server names in its Content-Type when it answers so.
pub const AGGREGATED_MEDIA_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an Accept header asks for aggregated discovery (v2, the one version served here).
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let parameters: Vec<&str> = media.split(';').map(str::trim).collect();
        ["g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"]
            .iter()
            .all(|wanted| parameters.contains(wanted))
    })
}

/// The aggregated discovery of the core group (`/api`) or of every other group (`/apis`): each
/// group's versions, each with its resources and their subresources, built from the same
/// resource lists the per-version endpoints serve.
pub fn aggregated(registry: &Registry, core: bool) -> Value {
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_owned()])]
    } else {
        registry.groups().into_iter().collect()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|version| {
                    let resources = resource_list(registry, group, version)
                        .map(|list| aggregated_resources(&list, group, version))
                        .unwrap_or_default();
                    json!({"version": version, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": group}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// An APIResourceList's entries regrouped as aggregated discovery has them: `plural/sub` entries
/// become subresources of their resource.
fn aggregated_resources(list: &Value, group: &str, version: &str) -> Vec<Value> {
    let entries = list["resources"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let response_kind = |entry: &Value| {
        json!({
            "group": entry.get("group").unwrap_or(&json!(group)),
            "version": entry.get("version").unwrap_or(&json!(version)),
            "kind": entry["kind"],
        })
    };
    let mut resources: Vec<Value> = Vec::new();
    for entry in entries {
        let name = entry["name"].as_str().unwrap_or_default();
        match name.split_once('/') {
            None => {
                let scope = if entry["namespaced"] == json!(true) {
                    "Namespaced"
                } else {
                    "Cluster"
                };
                let mut resource = json!({
                    "resource": name,
                    "responseKind": response_kind(entry),
                    "scope": scope,
                    "singularResource": entry["singularName"],
                    "verbs": entry["verbs"],
                });
                for optional in ["shortNames", "categories"] {
                    if let Some(value) = entry.get(optional) {
                        resource[optional] = value.clone();
                    }
                }
                resources.push(resource);
            }
            Some((parent, subresource)) => {
                let sub = json!({
                    "subresource": subresource,
                    "responseKind": response_kind(entry),
                    "verbs": entry["verbs"],
                });
                if let Some(resource) = resources.iter_mut().find(|r| r["resource"] == parent) {
                    match resource["subresources"].as_array_mut() {
                        Some(subresources) => subresources.push(sub),
                        None => resource["subresources"] = json!([sub]),
                    }
                }
            }
        }
    }
    resources
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The OpenAPI v3 index: one document per served group-version.
pub fn openapi_index(registry: &Registry, revision: u64) -> Value {
    let mut paths = serde_json::Map::new();
    for info in registry.all() {
        for version in &info.versions {
            let path = gv_path(&info.group, version);
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={revision:016X}")}),
            );
        }
    }
    json!({"paths": paths})
}

fn schema_name(info: &ResourceInfo, version: &str) -> String {
    let reversed: Vec<&str> = if info.group.is_empty() {
        vec!["io", "k8s", "api", "core"]
    } else {
        info.group.split('.').rev().collect()
    };
    format!("{}.{version}.{}", reversed.join("."), info.kind)
}

fn query_parameter(name: &str, kind: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": kind, "uniqueItems": true}})
}

/// One group-version's OpenAPI v3 document, with the schemas of its kinds and the paths
/// kubectl inspects for server-side field validation and dry runs.
pub fn openapi_document(registry: &Registry, path: &str) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", version] => (String::new(), (*version).to_owned()),
        ["apis", group, version] => ((*group).to_owned(), (*version).to_owned()),
        _ => return None,
    };
    let mut schemas = serde_json::Map::new();
    let mut paths = serde_json::Map::new();
    let mut any = false;
    for info in served_at(registry, &group, &version) {
        any = true;
        let gvk = json!({"group": info.group, "version": version, "kind": info.kind});
        let mut schema = info.schema(&version).cloned().unwrap_or_else(
            || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties
                .entry("apiVersion")
                .or_insert_with(|| json!({"type": "string"}));
            properties
                .entry("kind")
                .or_insert_with(|| json!({"type": "string"}));
            properties
                .entry("metadata")
                .or_insert_with(|| json!({"type": "object"}));
        }
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(schema_name(info, &version), schema);
        let base = format!("/{}", gv_path(&group, &version));
        let collection = if info.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", info.plural)
        } else {
            format!("{base}/{}", info.plural)
        };
        let write_parameters = json!([
            query_parameter("dryRun", "string"),
            query_parameter("fieldManager", "string"),
            query_parameter("fieldValidation", "string"),
            query_parameter("force", "boolean"),
        ]);
        let operation = |verb: &str| {
            json!({"x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk,
                "parameters": write_parameters, "responses": {"200": {"description": "OK"}}})
        };
        if info.review_only {
            paths.insert(collection, json!({"post": operation("post")}));
            continue;
        }
        paths.insert(
            collection.clone(),
            json!({"get": operation("list"), "post": operation("post")}),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({"get": operation("get"), "put": operation("put"), "patch": operation("patch"), "delete": operation("delete")}),
        );
        if info.status_subresource {
            paths.insert(
                format!("{collection}/{{name}}/status"),
                json!({"get": operation("get"), "put": operation("put"), "patch": operation("patch")}),
            );
        }
        if info.scale.is_some() {
            let scale = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
            let operation = |verb: &str| {
                json!({"x-kubernetes-action": verb, "x-kubernetes-group-version-kind": scale,
                    "parameters": write_parameters, "responses": {"200": {"description": "OK"}}})
            };
            paths.insert(
                format!("{collection}/{{name}}/scale"),
                json!({"get": operation("get"), "put": operation("put"), "patch": operation("patch")}),
            );
        }
        if info.group.is_empty() && info.plural == "serviceaccounts" {
            let token =
                json!({"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"});
            paths.insert(
                format!("{collection}/{{name}}/token"),
                json!({"post": {"x-kubernetes-action": "post", "x-kubernetes-group-version-kind": token,
                    "parameters": write_parameters, "responses": {"201": {"description": "Created"}}}}),
            );
        }
    }
    any.then(|| {
        json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.34.0"},
            "paths": paths,
            "components": {"schemas": schemas},
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_and_group_discovery_list_builtins() {
        let registry = Registry::default();
        let core = resource_list(&registry, "", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"secrets") && names.contains(&"namespaces/status"));
        assert!(names.contains(&"serviceaccounts/token"));
        let apps = resource_list(&registry, "apps", "v1").unwrap();
        let scales: Vec<&str> = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "Scale" && r["group"] == "autoscaling")
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(scales, ["deployments/scale", "statefulsets/scale"]);
        let groups = group_list(&registry);
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "coordination.k8s.io")
        );
        assert!(resource_list(&registry, "nope.io", "v1").is_none());
    }

    #[test]
    fn aggregated_discovery_is_answered_only_when_asked_for() {
        // kubectl's Accept header, then a plain client's.
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
             application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,\
             application/json"
        ));
        assert!(!wants_aggregated("application/json, */*"));
        assert!(!wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        ));

        let registry = Registry::default();
        let core = aggregated(&registry, true);
        let resources = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap();
        let service_accounts = resources
            .iter()
            .find(|r| r["resource"] == "serviceaccounts")
            .unwrap();
        assert_eq!(service_accounts["scope"], "Namespaced");
        assert_eq!(service_accounts["responseKind"]["kind"], "ServiceAccount");
        assert_eq!(service_accounts["subresources"][0]["subresource"], "token");
        assert_eq!(
            service_accounts["subresources"][0]["responseKind"],
            json!({"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"})
        );
        let groups = aggregated(&registry, false);
        let apps = groups["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .unwrap();
        let deployments = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        let subresources: Vec<&Value> = deployments["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| &s["subresource"])
            .collect();
        assert_eq!(subresources, [&json!("status"), &json!("scale")]);
    }

    #[test]
    fn openapi_documents_declare_field_validation_on_patch() {
        let registry = Registry::default();
        let document = openapi_document(&registry, "api/v1").unwrap();
        let patch = &document["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "ConfigMap"
        );
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
    }
}
