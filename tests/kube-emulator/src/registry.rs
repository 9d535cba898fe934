//! The kinds the emulator serves: built-in resources and those registered by
//! CustomResourceDefinitions.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::status::{ApiError, ApiResult, Cause};

/// How a resource is stored and served: a kind in one group, served at one or more versions.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    pub group: String,
    /// Served versions, the preferred one first.
    pub versions: Vec<String>,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub status_subresource: bool,
    /// The `scale` subresource (Deployments, StatefulSets, CRDs that declare one).
    pub scale: Option<ScaleSubresource>,
    /// Whether `metadata.generation` is kept (custom resources and workloads).
    pub has_generation: bool,
    /// Create-only review resources (SubjectAccessReview and friends) are answered, never stored.
    pub review_only: bool,
    /// Defined by a CustomResourceDefinition (replace then needs a resourceVersion).
    pub custom: bool,
    /// `openAPIV3Schema` per version, for custom resources. Shared: every request clones the
    /// info of its resource, and a schema is the bulk of it.
    pub schemas: Arc<BTreeMap<String, Value>>,
    /// `additionalPrinterColumns` per version, for custom resources.
    pub printer_columns: Arc<BTreeMap<String, Vec<PrinterColumn>>>,
    /// Where objects are stored when another resource holds them (events.k8s.io Events are
    /// stored as core Events).
    pub storage: Option<ResourceKey>,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub column_type: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// Where a resource keeps what its `scale` subresource shows, as JSON paths (`.spec.replicas`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleSubresource {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub selector: Option<ScaleSelector>,
    /// The replicas when the object names none (the API server defaults built-in workloads
    /// to 1).
    pub default_replicas: i64,
}

/// Where the label selector a Scale reports comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ScaleSelector {
    /// A `LabelSelector` object (built-in workloads' `.spec.selector`).
    Object(String),
    /// A selector already in string form (a CRD's `labelSelectorPath`).
    Text(String),
}

/// The group and plural that name a resource regardless of version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    pub group: String,
    pub plural: String,
}

impl ResourceInfo {
    /// The key its objects are stored under.
    pub fn key(&self) -> ResourceKey {
        self.storage.clone().unwrap_or_else(|| self.registry_key())
    }

    /// The key it is served under.
    pub fn registry_key(&self) -> ResourceKey {
        ResourceKey {
            group: self.group.clone(),
            plural: self.plural.clone(),
        }
    }

    /// Whether objects are converted from another resource's stored form.
    pub fn converted(&self) -> bool {
        self.storage.is_some()
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_owned()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    pub fn preferred_version(&self) -> &str {
        self.versions.first().map_or("v1", String::as_str)
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        if self.review_only {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }

    pub fn schema(&self, version: &str) -> Option<&Value> {
        self.schemas.get(version)
    }
}

fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short_names: &[&str],
) -> ResourceInfo {
    ResourceInfo {
        group: group.to_owned(),
        versions: vec![version.to_owned()],
        kind: kind.to_owned(),
        list_kind: format!("{kind}List"),
        plural: plural.to_owned(),
        singular: kind.to_lowercase(),
        short_names: short_names.iter().map(|s| (*s).to_owned()).collect(),
        categories: Vec::new(),
        namespaced,
        status_subresource: false,
        scale: None,
        has_generation: false,
        review_only: false,
        custom: false,
        schemas: Arc::default(),
        printer_columns: Arc::default(),
        storage: None,
    }
}

/// Built-in kinds: stored faithfully, with the behaviour the project relies on.
pub fn builtins() -> Vec<ResourceInfo> {
    let scale = || ScaleSubresource {
        spec_replicas: ".spec.replicas".into(),
        status_replicas: ".status.replicas".into(),
        selector: Some(ScaleSelector::Object(".spec.selector".into())),
        default_replicas: 1,
    };
    let workload = |kind: &str, plural: &str, short: &[&str]| ResourceInfo {
        status_subresource: true,
        has_generation: true,
        categories: vec!["all".into()],
        ..builtin("apps", "v1", kind, plural, true, short)
    };
    let review = |group: &str, kind: &str, plural: &str, namespaced: bool| ResourceInfo {
        review_only: true,
        ..builtin(group, "v1", kind, plural, namespaced, &[])
    };
    vec![
        ResourceInfo {
            status_subresource: true,
            ..builtin("", "v1", "Namespace", "namespaces", false, &["ns"])
        },
        builtin("", "v1", "Secret", "secrets", true, &[]),
        builtin("", "v1", "ConfigMap", "configmaps", true, &["cm"]),
        builtin("", "v1", "ServiceAccount", "serviceaccounts", true, &["sa"]),
        builtin("", "v1", "Event", "events", true, &["ev"]),
        ResourceInfo {
            status_subresource: true,
            categories: vec!["all".into()],
            ..builtin("", "v1", "Pod", "pods", true, &["po"])
        },
        ResourceInfo {
            status_subresource: true,
            categories: vec!["all".into()],
            ..builtin("", "v1", "Service", "services", true, &["svc"])
        },
        ResourceInfo {
            storage: Some(ResourceKey {
                group: String::new(),
                plural: "events".into(),
            }),
            ..builtin("events.k8s.io", "v1", "Event", "events", true, &["ev"])
        },
        builtin("coordination.k8s.io", "v1", "Lease", "leases", true, &[]),
        ResourceInfo {
            scale: Some(scale()),
            ..workload("Deployment", "deployments", &["deploy"])
        },
        ResourceInfo {
            scale: Some(scale()),
            ..workload("StatefulSet", "statefulsets", &["sts"])
        },
        workload("DaemonSet", "daemonsets", &["ds"]),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            true,
            &[],
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
            &[],
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
            &[],
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            &[],
        ),
        ResourceInfo {
            status_subresource: true,
            has_generation: true,
            ..builtin(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                false,
                &["crd", "crds"],
            )
        },
        ResourceInfo {
            status_subresource: true,
            has_generation: true,
            categories: vec!["api-extensions".into()],
            ..builtin(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicy",
                "validatingadmissionpolicies",
                false,
                &[],
            )
        },
        ResourceInfo {
            has_generation: true,
            categories: vec!["api-extensions".into()],
            ..builtin(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
                false,
                &[],
            )
        },
        review(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            false,
        ),
        review(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "subjectaccessreviews",
            false,
        ),
        review(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
            true,
        ),
        review(
            "authentication.k8s.io",
            "SelfSubjectReview",
            "selfsubjectreviews",
            false,
        ),
    ]
}

/// Every served kind, keyed by group and plural.
#[derive(Debug, Clone)]
pub struct Registry {
    resources: BTreeMap<ResourceKey, ResourceInfo>,
}

impl Default for Registry {
    fn default() -> Self {
        let resources = builtins()
            .into_iter()
            .map(|r| (r.registry_key(), r))
            .collect();
        Self { resources }
    }
}

impl Registry {
    /// The resource served at `group/version` under `plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceInfo> {
        let key = ResourceKey {
            group: group.to_owned(),
            plural: plural.to_owned(),
        };
        self.resources
            .get(&key)
            .filter(|r| r.versions.iter().any(|v| v == version))
    }

    pub fn get(&self, key: &ResourceKey) -> Option<&ResourceInfo> {
        self.resources.get(key)
    }

    /// The resource of a kind served at `group/version`.
    pub fn find_kind(&self, group: &str, version: &str, kind: &str) -> Option<&ResourceInfo> {
        self.resources.values().find(|r| {
            r.group == group
                && r.kind == kind
                && r.versions.iter().any(|v| v == version)
                && !r.converted()
        })
    }

    pub fn all(&self) -> impl Iterator<Item = &ResourceInfo> {
        self.resources.values()
    }

    /// Groups with their versions, the preferred version first; the core group is left out.
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in self.resources.values().filter(|r| !r.group.is_empty()) {
            let versions = groups.entry(r.group.clone()).or_default();
            for v in &r.versions {
                if !versions.contains(v) {
                    versions.push(v.clone());
                }
            }
        }
        for versions in groups.values_mut() {
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        groups
    }

    pub fn register(&mut self, info: ResourceInfo) {
        self.resources.insert(info.registry_key(), info);
    }

    pub fn unregister(&mut self, key: &ResourceKey) {
        self.resources.remove(key);
    }
}

/// Kubernetes version ordering: GA before beta before alpha, higher numbers first.
pub fn version_priority(version: &str) -> (u8, u64, u64) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let minor_of = |t: &str| t.parse().unwrap_or(0);
    if tail.is_empty() {
        (3, major, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, major, minor_of(n))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, major, minor_of(n))
    } else {
        (0, major, 0)
    }
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn strings_at(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn required(field: &str) -> Cause {
    Cause {
        kind: "FieldValueRequired",
        message: "Required value".into(),
        field: field.into(),
    }
}

/// Reads a CustomResourceDefinition into the resource it defines, or says which fields are wrong.
pub fn resource_from_crd(crd: &Value) -> ApiResult<ResourceInfo> {
    let name = str_at(crd, "/metadata/name").unwrap_or_default();
    let mut causes = Vec::new();
    let group = str_at(crd, "/spec/group").unwrap_or_default();
    let kind = str_at(crd, "/spec/names/kind").unwrap_or_default();
    let plural = str_at(crd, "/spec/names/plural").unwrap_or_default();
    for (value, field) in [
        (group, "spec.group"),
        (kind, "spec.names.kind"),
        (plural, "spec.names.plural"),
    ] {
        if value.is_empty() {
            causes.push(required(field));
        }
    }
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause {
            kind: "FieldValueInvalid",
            message: format!(
                "Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
            ),
            field: "metadata.name".into(),
        });
    }
    let scope = str_at(crd, "/spec/scope").unwrap_or_default();
    let namespaced = match scope {
        "Namespaced" => true,
        "Cluster" => false,
        "" => {
            causes.push(required("spec.scope"));
            true
        }
        other => {
            causes.push(Cause {
                kind: "FieldValueNotSupported",
                message: format!(
                    "Unsupported value: \"{other}\": supported values: \"Cluster\", \"Namespaced\""
                ),
                field: "spec.scope".into(),
            });
            true
        }
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(required("spec.versions"));
    }
    let storage_count = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if !versions.is_empty() && storage_count != 1 {
        causes.push(Cause {
            kind: "FieldValueInvalid",
            message: format!("Invalid value: {storage_count}: must have exactly one version marked as storage version"),
            field: "spec.versions".into(),
        });
    }
    let mut served = Vec::new();
    let mut schemas = BTreeMap::new();
    let mut printer_columns = BTreeMap::new();
    let mut status_subresource = false;
    let mut scale = None;
    for version in &versions {
        let Some(version_name) = version["name"].as_str() else {
            causes.push(required("spec.versions[].name"));
            continue;
        };
        if version["served"].as_bool() == Some(true) {
            served.push(version_name.to_owned());
        }
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            schemas.insert(version_name.to_owned(), schema.clone());
        }
        if version.pointer("/subresources/status").is_some() {
            status_subresource = true;
        }
        if let Some(declared) = version.pointer("/subresources/scale") {
            let path = |key: &str| declared[key].as_str().unwrap_or_default().to_owned();
            scale = Some(ScaleSubresource {
                spec_replicas: path("specReplicasPath"),
                status_replicas: path("statusReplicasPath"),
                selector: declared["labelSelectorPath"]
                    .as_str()
                    .map(|p| ScaleSelector::Text(p.to_owned())),
                default_replicas: 0,
            });
        }
        let columns = version["additionalPrinterColumns"]
            .as_array()
            .map(|cols| cols.iter().map(printer_column).collect())
            .unwrap_or_default();
        printer_columns.insert(version_name.to_owned(), columns);
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "CustomResourceDefinition",
            "apiextensions.k8s.io",
            name,
            causes,
        ));
    }
    served.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    Ok(ResourceInfo {
        group: group.to_owned(),
        versions: served,
        kind: kind.to_owned(),
        list_kind: str_at(crd, "/spec/names/listKind")
            .map_or_else(|| format!("{kind}List"), str::to_owned),
        plural: plural.to_owned(),
        singular: str_at(crd, "/spec/names/singular")
            .map_or_else(|| kind.to_lowercase(), str::to_owned),
        short_names: strings_at(crd, "/spec/names/shortNames"),
        categories: strings_at(crd, "/spec/names/categories"),
        namespaced,
        status_subresource,
        scale,
        has_generation: true,
        review_only: false,
        custom: true,
        schemas: Arc::new(schemas),
        printer_columns: Arc::new(printer_columns),
        storage: None,
    })
}

fn printer_column(column: &Value) -> PrinterColumn {
    let text = |key: &str| column[key].as_str().unwrap_or_default().to_owned();
    PrinterColumn {
        name: text("name"),
        column_type: text("type"),
        format: text("format"),
        description: text("description"),
        priority: column["priority"].as_i64().unwrap_or(0),
        json_path: text("jsonPath"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_sort_ga_then_beta_then_alpha() {
        let mut versions = vec!["v1alpha1", "v2", "v1beta2", "v1", "v1beta1"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(versions, ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1"]);
    }

    #[test]
    fn crd_with_wrong_name_is_invalid() {
        let crd = json!({
            "metadata": {"name": "wrong"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": true, "storage": true}]}
        });
        let err = resource_from_crd(&crd).unwrap_err();
        assert_eq!(err.causes[0].field, "metadata.name");
    }

    #[test]
    fn crd_reads_names_scope_and_subresources() {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}]}
        });
        let info = resource_from_crd(&crd).unwrap();
        assert!(!info.namespaced);
        assert!(info.status_subresource);
        assert_eq!(info.short_names, ["wd"]);
        assert_eq!(info.printer_columns["v1"][0].json_path, ".spec.size");
        assert_eq!(info.list_kind, "WidgetList");
    }
}
