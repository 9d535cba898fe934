//! `deploy/` renders with `kubectl kustomize`, and what it renders keeps the promises the runbooks
//! make: probes, a TLS folder mounted without subPath, a restricted security context, alerts that
//! link to existing runbooks and use the catalog's metric labels. Every overlay (and through the
//! overlays every component) puts each namespaced object in the namespace the reconciler runs in,
//! the README's install section names what the overlay expects to find in the cluster, and the
//! image build leaves `target/` out of its context. The RBAC keeps approvals the security team's,
//! and the example ClientPolicy (`examples/policies/`, which `kubectl apply -f examples/` leaves
//! out) is valid and judges none of the examples the sandbox applies.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use nauthera_shared::catalog::{Reason, runbook_url};
use nauthera_shared::grants::GrantEntry;
use nauthera_tests::binaries::workspace_root;
use nauthera_tests::rendered::{describe, env_value, misplaced};
use serde_json::Value;

/// Where the base puts the reconciler, and so every overlay that does not set `namespace:`.
const BASE_NAMESPACE: &str = "nauthera-system";

fn render(path: &str) -> Vec<Value> {
    render_dir(&workspace_root().join(path))
}

fn render_dir(dir: &Path) -> Vec<Value> {
    nauthera_tests::manifests::kustomize(dir).expect("kustomize renders the folder")
}

/// The `kustomization.yaml` of a folder.
fn kustomization(dir: &Path) -> Value {
    let path = dir.join("kustomization.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The folders directly under `deploy/<folder>` that hold a `kustomization.yaml`.
fn kustomizations_under(folder: &str) -> Vec<PathBuf> {
    let parent = workspace_root().join("deploy").join(folder);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&parent)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", parent.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|dir| dir.join("kustomization.yaml").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// The namespace an overlay's objects belong in: the one it sets, else the base's.
fn namespace_of(overlay: &Path) -> String {
    kustomization(overlay)["namespace"]
        .as_str()
        .unwrap_or(BASE_NAMESPACE)
        .to_owned()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

#[test]
fn base_renders_the_reconciler_with_its_crds_and_least_privilege_rbac() {
    let objects = render("deploy/base");
    let crds = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .count();
    assert_eq!(
        crds,
        nauthera_shared::resources::crds().len(),
        "the base installs every CRD (the four kinds, ClientPolicy, ClientApproval)"
    );
    assert_eq!(misplaced(&objects, BASE_NAMESPACE), Vec::<String>::new());

    let deployment = find(&objects, "Deployment", "nauthera-reconciler");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "nauthera-reconciler");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(container["resources"]["requests"]["cpu"].is_string());
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"][0],
        "ALL"
    );
    let mounts = container["volumeMounts"].as_array().expect("volume mounts");
    let tls = mounts
        .iter()
        .find(|m| m["name"] == "tls")
        .expect("the TLS Secret is mounted");
    assert!(
        tls.get("subPath").is_none(),
        "a subPath mount never sees renewed certificates"
    );
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        "nauthera-reconciler-tls"
    );

    let role = find(&objects, "ClusterRole", "nauthera-reconciler");
    let rules = role["rules"].as_array().expect("rules");
    for rule in rules {
        for field in ["apiGroups", "resources", "verbs"] {
            assert!(
                !listed(rule, field).contains(&"*"),
                "no wildcard {field}: {rule}"
            );
        }
        // It deletes a Secret it delivered once the manifest names another, and the admission
        // policy it generated once its ClientPolicy has no rule to check at admission.
        let deletable = [
            "secrets",
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
        ];
        assert!(
            !listed(rule, "verbs").contains(&"delete")
                || listed(rule, "resources")
                    .iter()
                    .all(|r| deletable.contains(r)),
            "the reconciler deletes nothing but Secrets and its admission policies: {rule}"
        );
    }
    let secrets = rules
        .iter()
        .find(|rule| listed(rule, "resources").contains(&"secrets"))
        .expect("a rule for Secrets");
    for verb in nauthera_shared::access::GENERATED_SECRET_VERBS {
        assert!(
            listed(secrets, "verbs").contains(&verb),
            "the reconciler needs {verb} on Secrets: {secrets}"
        );
    }
    let service = find(&objects, "Service", "nauthera-reconciler-metrics");
    assert_eq!(service["spec"]["ports"][0]["port"], 8080);
}

/// The strings of a rule's list field (`apiGroups`, `resources`, `verbs`, `resourceNames`).
fn listed<'a>(rule: &'a Value, field: &str) -> Vec<&'a str> {
    rule[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Whether a Role or ClusterRole lets its subjects use `verb` on `resource` of `group`, as the
/// API server's authorizer reads it: `*` stands for any group, resource or verb.
fn grants(role: &Value, group: &str, resource: &str, verb: &str) -> bool {
    role["rules"].as_array().into_iter().flatten().any(|rule| {
        let has = |field: &str, value: &str| {
            let values = listed(rule, field);
            values.contains(&value) || values.contains(&"*")
        };
        has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
    })
}

/// The verbs that change an object.
const WRITE_VERBS: [&str; 6] = [
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "escalate",
];

/// Every Role and ClusterRole that `deploy/base` and every overlay render, by name.
fn shipped_roles() -> Vec<(String, Value)> {
    let mut roles = Vec::new();
    let overlays = kustomizations_under("overlays");
    let dirs = std::iter::once(workspace_root().join("deploy/base")).chain(overlays);
    for dir in dirs {
        for object in render_dir(&dir) {
            if object["kind"] == "Role" || object["kind"] == "ClusterRole" {
                roles.push((format!("{}: {}", dir.display(), describe(&object)), object));
            }
        }
    }
    roles
}

#[test]
fn the_reconciler_manages_its_admission_policies_and_only_reads_policies_and_approvals() {
    let objects = render("deploy/base");
    let role = find(&objects, "ClusterRole", "nauthera-reconciler");
    let admission = "admissionregistration.k8s.io";
    for resource in [
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    ] {
        // Server-side apply creates and patches; the watch feeds its cache; delete removes what
        // a policy no longer needs.
        for verb in ["get", "list", "watch", "create", "patch", "delete"] {
            assert!(
                grants(role, admission, resource, verb),
                "the reconciler needs {verb} on {resource}"
            );
        }
        for verb in ["update", "deletecollection"] {
            assert!(
                !grants(role, admission, resource, verb),
                "the reconciler does not {verb} {resource}"
            );
        }
    }
    for verb in ["get", "patch"] {
        assert!(
            grants(role, "nauthera.io", "clientpolicies/status", verb),
            "the reconciler counts what a policy holds back in its status ({verb})"
        );
    }
    for (group, resource) in [
        ("nauthera.io", "clientpolicies"),
        ("nauthera.io", "clientapprovals"),
        ("", "namespaces"),
    ] {
        for verb in ["get", "list", "watch"] {
            assert!(
                grants(role, group, resource, verb),
                "the reconciler needs {verb} on {resource}"
            );
        }
        // A policy's spec is the security team's, and so is every approval.
        for verb in WRITE_VERBS {
            assert!(
                !grants(role, group, resource, verb),
                "the reconciler only reads {resource}, yet may {verb} them"
            );
        }
    }
    assert!(
        !grants(role, "nauthera.io", "clientpolicies/finalizers", "update"),
        "what the reconciler generates is owned without blockOwnerDeletion"
    );
}

#[test]
fn only_the_security_role_may_approve_and_write_policies() {
    let objects = render("deploy/base");
    let security = find(&objects, "ClusterRole", "nauthera-client-policy-admin");
    for verb in [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ] {
        assert!(
            grants(security, "nauthera.io", "clientpolicies", verb),
            "the security team needs {verb} on clientpolicies"
        );
    }
    for verb in ["get", "list", "watch", "create", "delete"] {
        assert!(
            grants(security, "nauthera.io", "clientapprovals", verb),
            "the security team needs {verb} on clientapprovals"
        );
    }
    assert!(
        !grants(security, "nauthera.io", "clientapprovals", "update")
            && !grants(security, "nauthera.io", "clientapprovals", "patch"),
        "approvals are records, never edited"
    );
    for verb in WRITE_VERBS {
        assert!(
            !grants(security, "nauthera.io", "clientpolicies/status", verb),
            "a policy's status is the reconciler's"
        );
    }
    let read = |group: &str, resource: &str| {
        ["get", "list", "watch"]
            .iter()
            .all(|verb| grants(security, group, resource, verb))
    };
    for resource in [
        "oidcclients",
        "brandings",
        "identityproviders",
        "organizations",
    ] {
        assert!(
            read("nauthera.io", resource),
            "the security team reads {resource}"
        );
    }
    for resource in [
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    ] {
        let group = "admissionregistration.k8s.io";
        assert!(
            read(group, resource),
            "the security team sees the generated {resource}"
        );
        assert!(
            WRITE_VERBS
                .iter()
                .all(|verb| !grants(security, group, resource, verb)),
            "the generated {resource} are the reconciler's to write"
        );
    }

    // Teams read the policies, for `kubectl nauthera diagnose -f`, and write none of them.
    let reader = find(&objects, "ClusterRole", "nauthera-client-policy-reader");
    for verb in ["get", "list", "watch"] {
        assert!(grants(reader, "nauthera.io", "clientpolicies", verb));
        assert!(grants(reader, "", "namespaces", verb));
    }
    assert!(
        !grants(reader, "nauthera.io", "clientapprovals", "get"),
        "teams do without approvals"
    );

    // No other role that deploy/ ships, in the base or any overlay, approves or writes policies.
    let roles = shipped_roles();
    assert!(roles.iter().any(|(name, _)| name.contains("overlays")));
    for (name, role) in roles
        .iter()
        .filter(|(_, role)| role["metadata"]["name"] != "nauthera-client-policy-admin")
    {
        for verb in WRITE_VERBS {
            for resource in ["clientapprovals", "clientpolicies"] {
                assert!(
                    !grants(role, "nauthera.io", resource, verb),
                    "{name} may {verb} {resource}: only the security team's role may"
                );
            }
        }
        let aggregates = role["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .any(|(label, _)| label.starts_with("rbac.authorization.k8s.io/aggregate-to-"));
        assert!(
            !aggregates || !grants(role, "nauthera.io", "clientapprovals", "get"),
            "{name} aggregates into a built-in role and names clientapprovals"
        );
    }
}

#[test]
fn the_crd_kustomization_installs_every_crd_at_its_scope() {
    let rendered = render("deploy/crds");
    let names: BTreeSet<&str> = rendered
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    let crds = nauthera_shared::resources::crds();
    let expected: BTreeSet<String> = crds
        .iter()
        .filter_map(|crd| crd.metadata.name.clone())
        .collect();
    assert_eq!(
        names,
        expected.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        "deploy/crds/kustomization.yaml lists every CRD of shared/src/resources"
    );
    let scope =
        |name: &str| find(&rendered, "CustomResourceDefinition", name)["spec"]["scope"].clone();
    assert_eq!(scope("clientpolicies.nauthera.io"), "Cluster");
    assert_eq!(scope("clientapprovals.nauthera.io"), "Namespaced");
    for kind in [
        "oidcclients",
        "brandings",
        "identityproviders",
        "organizations",
    ] {
        assert_eq!(scope(&format!("{kind}.nauthera.io")), "Namespaced");
    }
}

/// The example policies: `examples/policies/`, a folder of its own so that `kubectl apply -f
/// examples/` (and the sandbox) leaves them out.
fn example_policies() -> Vec<(String, Value)> {
    let dir = workspace_root().join("examples/policies");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut documents = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.display().to_string();
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        documents.extend(
            docs.into_iter()
                .filter(|d| !d.is_null())
                .map(|d| (name.clone(), d)),
        );
    }
    assert!(!documents.is_empty(), "examples/policies holds no policy");
    documents
}

/// Fails when `input` holds anything `output` does not hold with the same value.
fn assert_subset(input: &Value, output: &Value, path: &str) {
    match (input, output) {
        (Value::Object(input), Value::Object(output)) => {
            for (key, value) in input {
                let out = output
                    .get(key)
                    .unwrap_or_else(|| panic!("{path}.{key}: unknown field (dropped when read)"));
                assert_subset(value, out, &format!("{path}.{key}"));
            }
        }
        (Value::Array(input), Value::Array(output)) => {
            assert_eq!(input.len(), output.len(), "{path}: list length");
            for (i, (a, b)) in input.iter().zip(output).enumerate() {
                assert_subset(a, b, &format!("{path}[{i}]"));
            }
        }
        _ => assert_eq!(input, output, "{path}"),
    }
}

/// The top-level examples (what `kubectl apply -f examples/` and the sandbox apply).
fn applied_examples() -> Vec<Value> {
    let dir = workspace_root().join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            serde_saphyr::from_multiple::<Value>(&text).unwrap()
        })
        .filter(|d| !d.is_null())
        .collect()
}

#[test]
fn the_example_policy_is_valid_and_leaves_the_applied_examples_alone() {
    use std::collections::BTreeMap;

    use nauthera_shared::policy::{CompiledPolicy, NAMESPACE_NAME_LABEL, admission, cel_object};
    use nauthera_shared::resources::{ClientPolicy, PolicyKind, admission_violations};

    let examples = applied_examples();
    assert!(
        examples.iter().all(|e| e["kind"] != "ClientPolicy"),
        "a ClientPolicy among the examples the sandbox applies would judge them"
    );
    let namespaces: BTreeMap<&str, BTreeMap<String, String>> = examples
        .iter()
        .filter(|e| e["kind"] == "Namespace")
        .map(|e| {
            let name = e["metadata"]["name"].as_str().unwrap();
            let mut labels: BTreeMap<String, String> =
                serde_json::from_value(e["metadata"]["labels"].clone()).unwrap_or_default();
            labels.insert(NAMESPACE_NAME_LABEL.to_owned(), name.to_owned());
            (name, labels)
        })
        .collect();

    for (file, document) in example_policies() {
        assert_eq!(document["kind"], "ClientPolicy", "{file}");
        let refused: Vec<String> = admission_violations(&document, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            refused,
            Vec::<String>::new(),
            "{file}: the API server would refuse it"
        );
        let policy: ClientPolicy =
            serde_json::from_value(document.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_subset(&document, &serde_json::to_value(&policy).unwrap(), &file);
        let compiled = CompiledPolicy::compile(&policy).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            admission::admission_objects(&policy, &compiled).is_some(),
            "{file}: kubectl apply checks its rules"
        );

        let mut clients = 0;
        for example in &examples {
            let Some(kind) = example["kind"].as_str().and_then(PolicyKind::from_kind) else {
                continue;
            };
            let namespace = example["metadata"]["namespace"].as_str().unwrap();
            let labels = &namespaces[namespace];
            let issuer = example["spec"]["issuer"].as_str().unwrap();
            let name = describe(example);
            assert!(
                !compiled.covers(kind, labels, issuer),
                "{file} covers the example {name}, which the sandbox applies"
            );
            // In a namespace it covers, the confidential web client complies with every rule
            // (and, being new, waits for an approval).
            if example["metadata"]["name"] == "billing-web" {
                let mut production = labels.clone();
                production.extend(
                    policy
                        .spec
                        .coverage
                        .namespace_selector
                        .iter()
                        .flat_map(|s| s.match_labels.clone().unwrap_or_default()),
                );
                assert!(compiled.covers(kind, &production, issuer), "{file}");
                assert_eq!(
                    compiled.violations(kind, &cel_object(example)),
                    Vec::new(),
                    "{file}: the example {name} breaks a rule"
                );
                clients += 1;
            }
        }
        assert_eq!(
            clients, 1,
            "the example billing-web is checked against {file}"
        );
    }
}

#[test]
fn production_overlay_adds_the_certificate_and_alerts_that_link_to_runbooks() {
    let objects = render("deploy/overlays/production");
    let certificate = find(&objects, "Certificate", "nauthera-reconciler");
    assert_eq!(certificate["spec"]["secretName"], "nauthera-reconciler-tls");
    assert_eq!(
        certificate["spec"]["dnsNames"][0],
        "nauthera-reconciler.nauthera-system.svc"
    );
    assert!(
        certificate["spec"]["usages"]
            .as_array()
            .expect("usages")
            .contains(&Value::from("client auth"))
    );
    find(&objects, "ServiceMonitor", "nauthera-reconciler");

    let rule = find(&objects, "PrometheusRule", "nauthera-reconciler");
    let alerts = rule["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("alert rules");
    assert!(alerts.len() >= 4);
    let mut runbooks: Vec<String> = Reason::ALL.iter().map(|r| runbook_url(*r)).collect();
    runbooks.extend(
        nauthera_shared::catalog::ALERTS
            .iter()
            .map(|alert| alert.url()),
    );
    let index = runbook_url(Reason::Registered).replace("Registered.md", "README.md");
    let labels: Vec<&str> = Reason::ALL.iter().map(|r| r.entry().metric_label).collect();
    for alert in alerts {
        let url = alert["annotations"]["runbook_url"]
            .as_str()
            .expect("every alert links a runbook");
        assert!(
            runbooks.iter().any(|r| r == url) || url == index,
            "{url} is no runbook page"
        );
        let expr = alert["expr"].as_str().expect("expr");
        for part in expr.split("reason=\"").skip(1) {
            let label = part.split('"').next().unwrap_or_default();
            assert!(
                labels.contains(&label),
                "{label} is not a metric label of the catalog"
            );
        }
    }
}

/// A Deployment without what makes a shard's differ: names, labels, selector and the
/// environment variables named.
fn without_shard_settings(deployment: &Value, variables: &[&str]) -> Value {
    let mut deployment = deployment.clone();
    for path in [
        "/metadata/name",
        "/metadata/labels",
        "/spec/selector",
        "/spec/template/metadata/labels",
    ] {
        if let Some(value) = deployment.pointer_mut(path) {
            *value = Value::Null;
        }
    }
    if let Some(env) = deployment
        .pointer_mut("/spec/template/spec/containers/0/env")
        .and_then(Value::as_array_mut)
    {
        env.retain(|variable| {
            !variables
                .iter()
                .any(|name| variable["name"].as_str() == Some(*name))
        });
    }
    deployment
}

#[test]
fn the_shards_overlay_leaves_every_namespace_to_one_shard_with_its_own_lease_and_state() {
    use nauthera_shared::topology::{NamespaceSelector, Scope};

    let objects = render("deploy/overlays/shards");
    let base = find(&objects, "Deployment", "nauthera-reconciler");
    let shard = find(&objects, "Deployment", "nauthera-reconciler-batch");
    assert_eq!(env_value(shard, "NAUTHERA_SHARD"), Some("batch"));
    assert_eq!(env_value(base, "NAUTHERA_SHARD"), None);
    // Two Deployments whose selectors match each other's pods would fight over them.
    assert_ne!(base["spec"]["selector"], shard["spec"]["selector"]);
    assert_eq!(
        shard["spec"]["selector"]["matchLabels"],
        shard["spec"]["template"]["metadata"]["labels"]
    );
    // Everything but the shard settings is the base's, so that the copy never falls behind.
    let settings = ["NAUTHERA_SHARD", "NAUTHERA_NAMESPACE_SELECTOR"];
    assert_eq!(
        without_shard_settings(shard, &settings),
        without_shard_settings(base, &settings)
    );

    // The selectors split the namespaces: each one, labelled or not, is exactly one shard's.
    let scope_of = |deployment: &Value| Scope {
        namespace_selector: Some(
            NamespaceSelector::parse(env_value(deployment, "NAUTHERA_NAMESPACE_SELECTOR").unwrap())
                .unwrap(),
        ),
        ..Scope::everything()
    };
    let (base_scope, shard_scope) = (scope_of(base), scope_of(shard));
    let labelled = |value: Option<&str>| {
        value
            .map(|v| [("nauthera.io/shard".to_owned(), v.to_owned())].into())
            .unwrap_or_default()
    };
    for value in [None, Some("batch"), Some("web")] {
        let labels = labelled(value);
        let covered = [&base_scope, &shard_scope]
            .iter()
            .filter(|scope| scope.covers_namespace("team-a", Some(&labels)))
            .count();
        assert_eq!(covered, 1, "a namespace labelled {value:?}");
    }

    // The shard's Role names its Lease and published state (the base Role names the base's).
    let role = find(&objects, "Role", "nauthera-reconciler-batch");
    let names_of = |resource: &str| -> Vec<&str> {
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|rule| listed(rule, "resources").contains(&resource))
            .flat_map(|rule| listed(rule, "resourceNames"))
            .collect()
    };
    assert_eq!(names_of("leases"), ["nauthera-reconciler-batch"]);
    assert_eq!(
        names_of("configmaps"),
        [nauthera_shared::control_plane::state_configmap_name(Some(
            "batch"
        ))]
    );
    let binding = find(&objects, "RoleBinding", "nauthera-reconciler-batch");
    assert_eq!(binding["roleRef"]["name"], "nauthera-reconciler-batch");
    assert_eq!(binding["subjects"][0]["name"], "nauthera-reconciler");
    // Its metrics are scraped as the base's are.
    let service = find(&objects, "Service", "nauthera-reconciler-batch-metrics");
    assert_eq!(
        service["spec"]["selector"],
        shard["spec"]["template"]["metadata"]["labels"]
    );
    assert_eq!(
        service["metadata"]["labels"]["app.kubernetes.io/name"],
        "nauthera-reconciler"
    );
}

#[test]
fn the_downstream_overlay_names_its_cluster_and_an_identity_the_grant_example_lists() {
    let objects = render("deploy/overlays/downstream-cluster");
    let deployment = find(&objects, "Deployment", "nauthera-reconciler");
    assert_eq!(
        env_value(deployment, "NAUTHERA_CLUSTER_NAME"),
        Some("prod-eu")
    );
    let certificate = find(&objects, "Certificate", "nauthera-reconciler");
    let identity = certificate["spec"]["dnsNames"][0].as_str().unwrap();
    assert_eq!(identity, "nauthera-reconciler.nauthera-system.prod-eu.svc");
    assert_eq!(certificate["spec"]["commonName"], identity);
    // docs/multi-cluster.md's grant for this cluster is for this identity.
    let guide = std::fs::read_to_string(workspace_root().join("docs/multi-cluster.md")).unwrap();
    assert!(
        guide.contains(&format!("identity: \"dns:{identity}\"")),
        "docs/multi-cluster.md grants dns:{identity}"
    );
}

#[test]
fn the_namespace_check_names_each_misplaced_object() {
    let objects: Vec<Value> = serde_json::from_value(serde_json::json!([
        {"kind": "Deployment", "metadata": {"name": "a", "namespace": "nauthera-system"}},
        {"kind": "Certificate", "metadata": {"name": "b"},
         "spec": {"dnsNames": ["nauthera-reconciler.nauthera-system.svc"]}},
        {"kind": "ServiceMonitor", "metadata": {"name": "c", "namespace": "default"}},
        {"kind": "ClusterRole", "metadata": {"name": "d"}},
        {"kind": "ClusterIssuer", "metadata": {"name": "e", "namespace": "nauthera-system"}},
        {"kind": "ClusterRoleBinding", "metadata": {"name": "f"},
         "subjects": [{"kind": "ServiceAccount", "name": "r", "namespace": "elsewhere"}]},
    ]))
    .unwrap();
    assert_eq!(
        misplaced(&objects, "nauthera-system"),
        [
            "Certificate b lands in the namespace of the user's context instead of nauthera-system",
            "ServiceMonitor c lands in namespace default instead of nauthera-system",
            "ClusterIssuer e is cluster-scoped but names namespace nauthera-system",
            "ClusterRoleBinding f binds the ServiceAccount \"r\" in \"elsewhere\" instead of \
             nauthera-system",
        ]
    );
    let moved = misplaced(&objects[..2], "team-ops");
    assert!(
        moved
            .iter()
            .any(|p| p.contains("is for \"nauthera-reconciler.nauthera-system.svc\"")),
        "a certificate for another namespace's identity is named: {moved:?}"
    );
}

#[test]
fn every_overlay_puts_each_namespaced_object_in_its_namespace() {
    let overlays = kustomizations_under("overlays");
    assert!(!overlays.is_empty(), "deploy/overlays holds no overlay");
    let mut problems = Vec::new();
    for overlay in &overlays {
        let namespace = namespace_of(overlay);
        let objects = render_dir(overlay);
        assert!(
            objects.iter().any(|o| o["kind"] == "Namespace"),
            "{} creates no Namespace",
            overlay.display()
        );
        for problem in misplaced(&objects, &namespace) {
            problems.push(format!("{}: {problem}", overlay.display()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn only_the_workload_restart_component_lets_the_reconciler_patch_workloads() {
    const WORKLOADS: [&str; 3] = ["deployments", "statefulsets", "daemonsets"];
    let patches_workloads = |objects: &[Value]| {
        objects
            .iter()
            .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
            .filter(|role| WORKLOADS.iter().any(|r| grants(role, "apps", r, "patch")))
            .map(describe)
            .collect::<Vec<_>>()
    };
    // The default install lists workloads (to name them in events) and never changes them.
    for overlay in ["deploy/base", "deploy/overlays/production"] {
        assert_eq!(
            patches_workloads(&render(overlay)),
            Vec::<String>::new(),
            "{overlay}"
        );
    }
    let objects = render("deploy/overlays/workload-restart");
    let role = find(
        &objects,
        "ClusterRole",
        "nauthera-reconciler-workload-restart",
    );
    for resource in WORKLOADS {
        assert!(
            grants(role, "apps", resource, "patch"),
            "{resource}: {role}"
        );
        for verb in WRITE_VERBS.iter().filter(|v| **v != "patch") {
            assert!(
                !grants(role, "apps", resource, verb),
                "{verb} {resource}: {role}"
            );
        }
    }
    assert_eq!(
        listed(&role["rules"][0], "verbs"),
        ["patch"],
        "patch alone: {role}"
    );
    let binding = find(
        &objects,
        "ClusterRoleBinding",
        "nauthera-reconciler-workload-restart",
    );
    assert_eq!(
        binding["roleRef"]["name"],
        "nauthera-reconciler-workload-restart"
    );
    assert_eq!(binding["subjects"][0]["name"], "nauthera-reconciler");
    assert_eq!(binding["subjects"][0]["namespace"], BASE_NAMESPACE);
    // Everything else is the production overlay's.
    let production = render("deploy/overlays/production");
    assert_eq!(objects.len(), production.len() + 2);
}

#[test]
fn every_component_is_rendered_by_an_overlay() {
    let mut used = BTreeSet::new();
    for overlay in kustomizations_under("overlays") {
        for component in kustomization(&overlay)["components"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let dir = overlay.join(component.as_str().expect("a component path"));
            used.insert(dir.canonicalize().expect("the component exists"));
        }
    }
    for component in kustomizations_under("components") {
        // Argo CD's component patches Argo CD's own installation, not the reconciler's:
        // tests/tests/gitops.rs renders it onto an argocd-cm.
        if component.ends_with("argocd") {
            continue;
        }
        assert!(
            used.contains(&component.canonicalize().unwrap()),
            "no overlay uses {}, so nothing checks where its objects land",
            component.display()
        );
    }
}

/// The README's install section: from its heading to the next one.
fn install_section() -> String {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let start = readme
        .find("\n## Install\n")
        .expect("the README has an Install section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_owned()
}

#[test]
fn the_install_section_names_what_the_production_overlay_expects() {
    let install = install_section();
    let objects = render("deploy/overlays/production");
    let certificate = find(&objects, "Certificate", "nauthera-reconciler");
    let issuer = &certificate["spec"]["issuerRef"];
    let issuer_kind = issuer["kind"].as_str().unwrap();
    let issuer_name = issuer["name"].as_str().unwrap();
    assert!(
        install.contains(&format!("{issuer_kind} `{issuer_name}`")),
        "the install section names the {issuer_kind} {issuer_name} the Certificate uses"
    );
    for object in &objects {
        let group = object["apiVersion"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap();
        if group == "monitoring.coreos.com" {
            let kind = object["kind"].as_str().unwrap();
            assert!(
                install.contains(kind) && install.contains("Prometheus Operator"),
                "the install section says that {kind} needs the Prometheus Operator's CRDs"
            );
        }
    }

    // The allowed_clients entry, in the shape the plugin proposes one, for the certificate's
    // identity.
    let identity = format!(
        "dns:{}",
        certificate["spec"]["dnsNames"][0].as_str().unwrap()
    );
    let block = install
        .split("```yaml\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .find(|block| block.contains("identity:"))
        .expect("the install section shows an allowed_clients entry in a yaml block");
    let entries: Vec<GrantEntry> = serde_saphyr::from_str(block).expect("the entry parses");
    assert_eq!(entries.len(), 1, "{block}");
    assert_eq!(entries[0].identity, identity);
    assert!(!entries[0].operations.is_empty());
    assert!(!entries[0].organizations.is_empty());
    assert!(!entries[0].namespaces.is_empty());
    assert!(block.starts_with(&format!("- identity: \"{identity}\"\n")));
}

/// The `.dockerignore` patterns of a build context, as Docker reads them: one per line, `#`
/// comments and blank lines skipped, a leading or trailing `/` dropped.
fn ignore_patterns(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            // Exceptions and character classes would need more than the matcher below does.
            assert!(
                !line.starts_with('!') && !line.contains(['[', '\\']),
                "{line:?}: the check understands *, ? and ** only"
            );
            line.trim_matches('/').to_owned()
        })
        .collect()
}

/// One path segment against one pattern segment: `*` is any run of characters, `?` one.
fn segment_matches(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.split_first(), name.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => (0..=name.len()).any(|i| segment_matches(rest, &name[i..])),
        (Some((b'?', rest)), Some((_, tail))) => segment_matches(rest, tail),
        (Some((p, rest)), Some((n, tail))) => p == n && segment_matches(rest, tail),
        _ => false,
    }
}

/// A path against a pattern, segment by segment; `**` is any number of segments, none included.
fn glob_matches(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|i| glob_matches(rest, &path[i..])),
        Some((first, rest)) => path.split_first().is_some_and(|(name, tail)| {
            segment_matches(first.as_bytes(), name.as_bytes()) && glob_matches(rest, tail)
        }),
    }
}

/// Whether Docker leaves `path` (relative to the context) out: a pattern matches it or one of
/// the folders it is in.
fn ignored(patterns: &[String], path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    patterns.iter().any(|pattern| {
        let pattern: Vec<&str> = pattern.split('/').collect();
        (1..=segments.len()).any(|n| glob_matches(&pattern, &segments[..n]))
    })
}

#[test]
fn the_ignore_matcher_follows_docker() {
    let patterns = ignore_patterns("# build output\n/target/\n**/*.swp\n.idea\n\n");
    assert!(ignored(&patterns, "target"));
    assert!(ignored(&patterns, "target/release/nauthera-reconciler"));
    assert!(ignored(&patterns, "a.swp"));
    assert!(ignored(&patterns, "shared/src/.lib.rs.swp"));
    assert!(ignored(&patterns, ".idea/workspace.xml"));
    assert!(
        !ignored(&patterns, "tests/target"),
        "a pattern is anchored at the root"
    );
    assert!(!ignored(&patterns, "targets"));
    assert!(!ignored(&patterns, "a.swp.rs"));
}

#[test]
fn the_image_build_context_leaves_out_target_and_keeps_what_the_dockerfile_copies() {
    let root = workspace_root();
    let dockerfile = std::fs::read_to_string(root.join("deploy/Dockerfile")).unwrap();
    // The Dockerfile documents its build command; the context is its last word, taken from the
    // repository root.
    let command = dockerfile
        .lines()
        .find(|line| line.contains("docker build"))
        .expect("the Dockerfile documents how to build it");
    let context = root.join(command.split_whitespace().last().unwrap());
    let ignore_file = context.join(".dockerignore");
    let text = std::fs::read_to_string(&ignore_file).unwrap_or_else(|e| {
        panic!(
            "{} is the context's ignore file: {e}",
            ignore_file.display()
        )
    });
    let patterns = ignore_patterns(&text);

    for left_out in [
        "target",
        "target/release/nauthera-reconciler",
        ".git",
        ".git/HEAD",
        ".sandbox/kubeconfig",
        "shared/src/.lib.rs.swp",
        "README.md~",
        ".idea/workspace.xml",
        ".vscode/settings.json",
        "cli/.DS_Store",
    ] {
        assert!(
            ignored(&patterns, left_out),
            "{left_out} is sent with the context"
        );
    }

    // What the build stage copies from the context (not from another stage) must be there: every
    // file the repository holds under each source.
    let listing = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&context)
        .output()
        .expect("git runs");
    assert!(listing.status.success(), "git ls-files needs a checkout");
    let tracked: Vec<String> = String::from_utf8(listing.stdout)
        .unwrap()
        .split('\0')
        .filter(|path| !path.is_empty())
        .map(str::to_owned)
        .collect();
    assert!(tracked.iter().any(|path| path == "Cargo.lock"));
    let mut sources = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        let Some(arguments) = line.strip_prefix("COPY ") else {
            continue;
        };
        let words: Vec<&str> = arguments.split_whitespace().collect();
        if words.iter().any(|word| word.starts_with("--from")) {
            continue;
        }
        let paths: Vec<&str> = words.into_iter().filter(|w| !w.starts_with("--")).collect();
        let (_destination, copied) = paths.split_last().expect("COPY names a source");
        sources.extend(
            copied
                .iter()
                .map(|source| source.trim_matches('/').to_owned()),
        );
    }
    assert!(
        !sources.is_empty(),
        "the build stage copies from the context"
    );
    for source in &sources {
        let under = |path: &&String| {
            source == "." || *path == source || path.starts_with(&format!("{source}/"))
        };
        let dropped: Vec<&String> = tracked
            .iter()
            .filter(under)
            .filter(|path| ignored(&patterns, path))
            .collect();
        assert!(
            dropped.is_empty(),
            "COPY {source} needs files the ignore file leaves out: {dropped:?}"
        );
    }
}
