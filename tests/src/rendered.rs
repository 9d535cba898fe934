//! Checks of the objects an install renders (kustomize overlays, the Helm chart): where each
//! lands, and what its Deployment is told.

use serde_json::Value;

/// Kinds that live outside namespaces. Any other kind is taken as namespaced, so a new kind that
/// is cluster-scoped has to be added here before its objects pass.
const CLUSTER_SCOPED_KINDS: [&str; 7] = [
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "ClusterIssuer",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// The value of an environment variable of a Deployment's container.
pub fn env_value<'a>(deployment: &'a Value, name: &str) -> Option<&'a str> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|variable| variable["name"] == name)?["value"]
        .as_str()
}

/// An object as `Kind name`.
pub fn describe(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Every way the rendered `objects` are not where a reconciler running in `namespace` needs them,
/// one sentence each: a namespaced object in another (or no) namespace, a cluster-scoped one with
/// a namespace, the Namespace itself under another name, a binding to a ServiceAccount elsewhere,
/// a certificate for an identity in another namespace.
pub fn misplaced(objects: &[Value], namespace: &str) -> Vec<String> {
    // The grants in the namespaces a reconciler is limited to (deploy/overlays/namespaced) are
    // the only objects elsewhere.
    let limited_to: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .filter_map(|deployment| env_value(deployment, "NAUTHERA_NAMESPACES"))
        .flat_map(|list| list.split(','))
        .collect();
    let mut problems = Vec::new();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = describe(object);
        let actual = object["metadata"]["namespace"].as_str();
        if kind == "RoleBinding" && actual.is_some_and(|n| limited_to.contains(&n)) {
            // A grant in a namespace the reconciler is limited to.
        } else if CLUSTER_SCOPED_KINDS.contains(&kind) {
            if let Some(actual) = actual {
                problems.push(format!(
                    "{name} is cluster-scoped but names namespace {actual}"
                ));
            }
        } else if actual != Some(namespace) {
            problems.push(format!(
                "{name} lands in {} instead of {namespace}",
                actual.map_or("the namespace of the user's context".to_owned(), |a| {
                    format!("namespace {a}")
                })
            ));
        }
        if kind == "Namespace" && object["metadata"]["name"] != namespace {
            problems.push(format!("{name} is created instead of {namespace}"));
        }
        for subject in object["subjects"].as_array().into_iter().flatten() {
            if subject["kind"] == "ServiceAccount" && subject["namespace"] != namespace {
                problems.push(format!(
                    "{name} binds the ServiceAccount {} in {} instead of {namespace}",
                    subject["name"], subject["namespace"]
                ));
            }
        }
        if kind == "Certificate" {
            // `<service>.<namespace>.svc`, or `<service>.<namespace>.<cluster>.svc` for a
            // downstream cluster's identity.
            let in_namespace = |dns: &str| {
                let labels: Vec<&str> = dns.split('.').collect();
                labels.len() >= 3 && labels[1] == namespace && labels.last() == Some(&"svc")
            };
            let names = object["spec"]["dnsNames"].as_array().into_iter().flatten();
            for dns in names.chain([&object["spec"]["commonName"]]) {
                if dns.as_str().is_some_and(|dns| !in_namespace(dns)) {
                    problems.push(format!("{name} is for {dns}, not a name in {namespace}"));
                }
            }
        }
    }
    problems
}
