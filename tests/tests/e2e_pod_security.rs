//! Pod security and least privilege, judged by the real kube-apiserver. Every shipped Deployment
//! (`deploy/base`, each overlay rendered with `kubectl kustomize`, the chart with each documented
//! set of values rendered with `helm template`) is admitted by the PodSecurity admission in a
//! `nauthera-system` labelled `restricted`, without a warning. The reconciler's ServiceAccount
//! under the shipped RBAC may do exactly what the table in `docs/security.md` promises, as
//! `kubectl auth can-i --list` shows it, and not the things that table says it may not; with
//! `rbac.workloadRestart` and with shards, exactly what their tables add. Limited to two
//! namespaces (the chart's `namespaces`), the reconciler works under the namespaced grant, the
//! API server's audit log shows none of its requests for a namespaced kind outside them, and
//! can-i shows exactly that mode's table: no Secrets in `kube-system` or any other namespace.
//!
//! Real plane only: the emulator has neither the PodSecurity admission nor
//! SelfSubjectRulesReview, which `kubectl auth can-i --list` asks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::OIDCClient;
use nauthera_tests::binaries::workspace_root;
use nauthera_tests::cluster::{Sharing, TestCluster};
use nauthera_tests::control_plane::real::{RealPlane, add_api_server_flags};
use nauthera_tests::e2e::{
    RECONCILER_ACCOUNT, RECONCILER_NAMESPACE, Stack, StackOptions, generated_client, kubectl_as,
    secret_ref_client, shipped_rbac,
};
use nauthera_tests::helm::helm_path;
use nauthera_tests::manifests;
use serde_json::{Value, json};

fn helm_template(values: &[String]) -> Vec<Value> {
    let home = tempfile::tempdir().unwrap();
    let chart = workspace_root().join("charts/nauthera-reconciler");
    let output = Command::new(helm_path())
        .args([
            "template",
            "nauthera-reconciler",
            chart.to_str().unwrap(),
            "--namespace",
            RECONCILER_NAMESPACE,
        ])
        .args(values)
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .expect("helm runs");
    assert!(
        output.status.success(),
        "helm template {values:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    manifests::documents(&String::from_utf8(output.stdout).unwrap()).unwrap()
}

/// Every Deployment shipped, named by where it comes from: `deploy/base`, each overlay, and the
/// chart with its defaults and each documented set of values.
fn shipped_deployments() -> Vec<(String, Value)> {
    let root = workspace_root();
    let mut sources = vec![(
        "deploy/base".to_owned(),
        manifests::kustomize(&root.join("deploy/base")).unwrap(),
    )];
    let overlays = root.join("deploy/overlays");
    let mut dirs: Vec<_> = std::fs::read_dir(&overlays)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| dir.join("kustomization.yaml").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = format!(
            "deploy/overlays/{}",
            dir.file_name().unwrap().to_str().unwrap()
        );
        sources.push((name, manifests::kustomize(&dir).unwrap()));
    }
    sources.push(("chart (default values)".to_owned(), helm_template(&[])));
    let examples = root.join("charts/nauthera-reconciler/examples");
    let mut files: Vec<_> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let name = format!("chart -f {}", file.file_name().unwrap().to_str().unwrap());
        sources.push((
            name,
            helm_template(&["-f".to_owned(), file.display().to_string()]),
        ));
    }
    let mut deployments = Vec::new();
    for (source, objects) in sources {
        let found: Vec<Value> = objects
            .into_iter()
            .filter(|o| o["kind"] == "Deployment")
            .collect();
        assert!(!found.is_empty(), "{source} renders no Deployment");
        for deployment in found {
            let name = deployment["metadata"]["name"].as_str().unwrap().to_owned();
            deployments.push((format!("{source}: deployment/{name}"), deployment));
        }
    }
    deployments
}

async fn every_shipped_deployment_is_admitted_by_restricted_pod_security() {
    audit_service_accounts();
    // Alone: it makes the namespace `nauthera-system` of this test binary's control plane.
    let cluster = TestCluster::start_sharing(Sharing::Alone).await.unwrap();
    let kubeconfig = cluster.kubeconfig();
    let namespace = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": RECONCILER_NAMESPACE,
            "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/warn": "restricted",
                "pod-security.kubernetes.io/audit": "restricted",
            },
        },
    });
    let applied = kubectl_as(
        kubeconfig,
        &["apply", "--server-side", "-f", "-"],
        Some(&namespace.to_string()),
    );
    assert!(applied.ok(), "{}", applied.stderr);

    // The check has teeth: a pod without the restricted settings (root allowed, no seccomp
    // profile, capabilities kept) is refused by the same admission.
    let unrestricted = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "unrestricted", "namespace": RECONCILER_NAMESPACE },
        "spec": { "containers": [{ "name": "c", "image": "example.invalid/c" }] },
    });
    let refused = kubectl_as(
        kubeconfig,
        &["create", "--dry-run=server", "-f", "-"],
        Some(&unrestricted.to_string()),
    );
    assert!(!refused.ok(), "an unrestricted pod was admitted");
    assert!(
        refused
            .stderr
            .contains("violates PodSecurity \"restricted:latest\""),
        "{}",
        refused.stderr
    );

    let deployments = shipped_deployments();
    let mut accounts = BTreeSet::new();
    for (_, deployment) in &deployments {
        let spec = &deployment["spec"]["template"]["spec"];
        accounts.insert(
            spec["serviceAccountName"]
                .as_str()
                .unwrap_or("default")
                .to_owned(),
        );
    }
    // A Pod names a ServiceAccount that must exist to be admitted.
    for account in &accounts {
        if account != "default" {
            let made = kubectl_as(
                kubeconfig,
                &[
                    "create",
                    "serviceaccount",
                    account,
                    "-n",
                    RECONCILER_NAMESPACE,
                ],
                None,
            );
            assert!(made.ok(), "{}", made.stderr);
        }
    }
    for (described, deployment) in &deployments {
        let mut deployment = deployment.clone();
        deployment["metadata"]["namespace"] = RECONCILER_NAMESPACE.into();
        // The Deployment: PodSecurity only warns about workload objects, so no warning is the
        // check.
        let created = kubectl_as(
            kubeconfig,
            &["create", "--dry-run=server", "-f", "-"],
            Some(&deployment.to_string()),
        );
        assert!(created.ok(), "{described}: {}", created.stderr);
        assert!(
            !created.stderr.contains("Warning"),
            "{described} draws a warning: {}",
            created.stderr
        );
        // A Pod of its template: the enforcing check.
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": deployment["metadata"]["name"],
                "namespace": RECONCILER_NAMESPACE,
                "labels": deployment["spec"]["template"]["metadata"]["labels"],
            },
            "spec": deployment["spec"]["template"]["spec"],
        });
        let created = kubectl_as(
            kubeconfig,
            &["create", "--dry-run=server", "-f", "-"],
            Some(&pod.to_string()),
        );
        assert!(created.ok(), "{described}, its Pod: {}", created.stderr);
        assert!(
            !created.stderr.contains("Warning"),
            "{described}, its Pod, draws a warning: {}",
            created.stderr
        );
    }
    // Base, four overlays (shards has two), the chart's defaults and five value sets at least.
    assert!(deployments.len() >= 11, "{}", deployments.len());
    let cleaned = kubectl_as(
        kubeconfig,
        &["delete", "namespace", RECONCILER_NAMESPACE, "--wait=false"],
        None,
    );
    assert!(cleaned.ok(), "{}", cleaned.stderr);
}

/// One permission: where, the resource (`resource.group`, as `kubectl auth can-i --list` names
/// it), a resource name or none, one verb.
type Permission = (Where, String, String, String);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Where {
    /// Granted in every namespace, or cluster-scoped: shown whatever namespace is asked.
    Everywhere,
    /// Granted by the Role in the reconciler's namespace.
    ItsNamespace,
    /// Granted in each namespace the reconciler is limited to (`namespaces`), nowhere else.
    Listed,
}

fn resource_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        // `kubectl auth can-i --list` puts the group between a resource and its subresource.
        match resource.split_once('/') {
            Some((resource, subresource)) => format!("{resource}.{group}/{subresource}"),
            None => format!("{resource}.{group}"),
        }
    }
}

/// The table between the `<table>:begin` and `<table>:end` markers of `docs/security.md` (the
/// default install's is `permissions`), one permission per verb.
fn promised(table: &str) -> BTreeSet<Permission> {
    let path = workspace_root().join("docs/security.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let rows = text
        .split(&format!("<!-- {table}:begin -->"))
        .nth(1)
        .and_then(|rest| rest.split(&format!("<!-- {table}:end -->")).next())
        .unwrap_or_else(|| panic!("docs/security.md holds the table {table}"));
    let mut promised = BTreeSet::new();
    for line in rows.lines().map(str::trim).filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells[0] == "Where" || cells[0].starts_with("---") {
            continue;
        }
        assert_eq!(cells.len(), 5, "{line}");
        let place = match cells[0] {
            "all namespaces" | "cluster" => Where::Everywhere,
            "its namespace" => Where::ItsNamespace,
            "listed namespaces" => Where::Listed,
            other => panic!("docs/security.md: unknown place {other:?} in {line}"),
        };
        for verb in cells[4].split(',').map(str::trim) {
            promised.insert((
                place,
                resource_name(cells[1], cells[2]),
                cells[3].to_owned(),
                verb.to_owned(),
            ));
        }
    }
    assert!(!promised.is_empty(), "{table}");
    promised
}

/// `kubectl auth can-i --list` as `user` in `namespace`: every (resource, name, verb) and every
/// non-resource (URL, verb), one per entry.
fn can_i_list(
    kubeconfig: &Path,
    user: &str,
    namespace: &str,
) -> BTreeSet<(String, String, String)> {
    let run = kubectl_as(
        kubeconfig,
        &["auth", "can-i", "--list", "--as", user, "-n", namespace],
        None,
    );
    assert!(run.ok(), "{}", run.stderr);
    let mut lines = run.stdout.lines();
    let header = lines.next().expect("a header");
    let column = |title: &str| header.find(title).unwrap_or_else(|| panic!("{header}"));
    let (urls, names, verbs) = (
        column("Non-Resource URLs"),
        column("Resource Names"),
        column("Verbs"),
    );
    let cell = |line: &str, from: usize, to: usize| -> String {
        line.get(from..to.min(line.len()))
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let list = |text: String| -> Vec<String> {
        text.trim_matches(|c| c == '[' || c == ']')
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let mut found = BTreeSet::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let resource = cell(line, 0, urls);
        let url = list(cell(line, urls, names));
        let names = list(cell(line, names, verbs));
        let verbs = list(cell(line, verbs, line.len()));
        let (subjects, names) = if resource.is_empty() {
            (url, vec![String::new()])
        } else if names.is_empty() {
            (vec![resource], vec![String::new()])
        } else {
            (vec![resource], names)
        };
        for subject in &subjects {
            for name in &names {
                for verb in &verbs {
                    found.insert((subject.clone(), name.clone(), verb.clone()));
                }
            }
        }
    }
    found
}

/// The ServiceAccount, Roles and bindings the chart renders with `values`.
fn chart_rbac(values: &[&str]) -> Vec<DynamicObject> {
    const KINDS: [&str; 5] = [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ];
    let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
    helm_template(&values)
        .into_iter()
        .filter(|o| KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
        .map(|o| serde_json::from_value(o).unwrap())
        .collect()
}

/// Installs `rbac` (relocated into a namespace of its own) and compares what `kubectl auth can-i
/// --list` shows the reconciler's ServiceAccount may do with `tables` of `docs/security.md`
/// together, in its namespace and in another; returns the cluster and the account.
async fn assert_exactly_promised(
    source: &str,
    rbac: Vec<DynamicObject>,
    tables: &[&str],
) -> (TestCluster, String) {
    let cluster = TestCluster::start().await.unwrap();
    let client = cluster.client();
    manifests::install_crds(&client).await.unwrap();
    manifests::apply_all(&client, &cluster.relocate(rbac), None)
        .await
        .unwrap();
    let home = cluster.reconciler_namespace().to_owned();
    let account = assert_shown_as_promised(
        &cluster,
        source,
        tables,
        &[
            (&home, &[Where::Everywhere, Where::ItsNamespace]),
            ("default", &[Where::Everywhere]),
        ],
    );
    (cluster, account)
}

/// Compares what `kubectl auth can-i --list` shows the reconciler's ServiceAccount may do in each
/// namespace with the rows of `tables` whose place applies there; returns the account.
fn assert_shown_as_promised(
    cluster: &TestCluster,
    source: &str,
    tables: &[&str],
    namespaces: &[(&str, &[Where])],
) -> String {
    let kubeconfig = cluster.kubeconfig();
    let home = cluster.reconciler_namespace();
    let account = format!("system:serviceaccount:{home}:{RECONCILER_ACCOUNT}");
    // What any ServiceAccount of that namespace may do without a binding of its own: the same
    // groups (system:serviceaccounts, of the namespace, authenticated), so the same defaults.
    let nobody = format!("system:serviceaccount:{home}:nobody");
    let promised: BTreeSet<Permission> = tables.iter().flat_map(|t| promised(t)).collect();
    for (namespace, places) in namespaces {
        let granted = can_i_list(kubeconfig, &account, namespace);
        let defaults = can_i_list(kubeconfig, &nobody, namespace);
        let shown: BTreeSet<_> = granted.difference(&defaults).cloned().collect();
        let expected: BTreeSet<_> = promised
            .iter()
            .filter(|(place, ..)| places.contains(place))
            .map(|(_, resource, name, verb)| (resource.clone(), name.clone(), verb.clone()))
            .collect();
        let more: Vec<_> = shown.difference(&expected).collect();
        let missing: Vec<_> = expected.difference(&shown).collect();
        assert!(
            more.is_empty() && missing.is_empty(),
            "{source}, in namespace {namespace}: granted beyond docs/security.md {tables:?}: \
             {more:?}; promised but not granted: {missing:?}"
        );
    }
    account
}

async fn the_reconciler_may_do_exactly_what_the_security_doc_promises() {
    audit_service_accounts();
    assert!(promised("permissions").len() > 20);
    let (_chart, _) = assert_exactly_promised("the chart", chart_rbac(&[]), &["permissions"]).await;
    // What the settings that add permissions add, each beside the defaults.
    let restart = ["--set", "rbac.workloadRestart=true"];
    let (_restart, _) = assert_exactly_promised(
        "the chart with rbac.workloadRestart=true",
        chart_rbac(&restart),
        &["permissions", "permissions-workload-restart"],
    )
    .await;
    let shards = workspace_root().join("charts/nauthera-reconciler/examples/shards.yaml");
    let (_shards, _) = assert_exactly_promised(
        "the chart -f examples/shards.yaml",
        chart_rbac(&["-f", shards.to_str().unwrap()]),
        &["permissions", "permissions-shards"],
    )
    .await;
    let (cluster, account) =
        assert_exactly_promised("deploy/base", shipped_rbac().unwrap(), &["permissions"]).await;
    let kubeconfig = cluster.kubeconfig();

    // What the table leaves out is refused by the authorizer, asked one by one.
    let (elsewhere, kube_system) = ("default", "kube-system");
    let refused: [(&str, &[&str]); 12] = [
        ("update secrets", &["update", "secrets", "-n", elsewhere]),
        (
            "exec into a pod",
            &["create", "pods/exec", "-n", kube_system],
        ),
        ("read pods", &["get", "pods", "-n", kube_system]),
        (
            "mint a ServiceAccount token",
            &["create", "serviceaccounts/token", "-n", kube_system],
        ),
        (
            "read ConfigMaps elsewhere",
            &["get", "configmaps", "-n", kube_system],
        ),
        (
            "write Leases elsewhere",
            &["update", "leases.coordination.k8s.io", "-n", kube_system],
        ),
        (
            "escalate a ClusterRole",
            &["escalate", "clusterroles.rbac.authorization.k8s.io"],
        ),
        (
            "bind a ClusterRole",
            &["bind", "clusterroles.rbac.authorization.k8s.io"],
        ),
        ("impersonate a user", &["impersonate", "users"]),
        (
            "restart a Deployment",
            &["patch", "deployments.apps", "-n", elsewhere],
        ),
        (
            "write a CRD",
            &["patch", "customresourcedefinitions.apiextensions.k8s.io"],
        ),
        (
            "approve a client",
            &["create", "clientapprovals.nauthera.io", "-n", elsewhere],
        ),
    ];
    for (what, args) in refused {
        let mut full = vec!["auth", "can-i"];
        full.extend_from_slice(args);
        full.extend(["--as", account.as_str()]);
        let run = kubectl_as(kubeconfig, &full, None);
        assert_eq!(
            run.stdout.trim(),
            "no",
            "{what}: {} {}",
            run.stdout,
            run.stderr
        );
    }
    // And what it grants is allowed (the answers above come from the same authorizer).
    let run = kubectl_as(
        kubeconfig,
        &[
            "auth",
            "can-i",
            "patch",
            "oidcclients.nauthera.io",
            "--subresource=status",
            "-n",
            elsewhere,
            "--as",
            &account,
        ],
        None,
    );
    assert_eq!(run.stdout.trim(), "yes", "{}", run.stderr);
}

/// The kube-apiserver flags of this test binary: every ServiceAccount's requests in the audit
/// log (metadata only), which the API server writes into its own log. Each test sets them before
/// it starts a cluster, so whichever starts the control plane starts it with them.
fn audit_service_accounts() {
    let policy = workspace_root().join("tests/control-plane/audit-service-accounts.yaml");
    add_api_server_flags(&[
        &format!("--audit-policy-file={}", policy.display()),
        "--audit-log-path=-",
    ])
    .unwrap();
}

/// One request the audit log recorded: verb, resource, the namespace it named (none: across
/// the cluster, or a cluster-scoped object), the answer's code.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Audited {
    verb: String,
    resource: String,
    namespace: Option<String>,
    code: u16,
}

/// The requests `user` made, as the shared control plane's audit log has them so far.
async fn audited_requests(user: &str) -> Vec<Audited> {
    let plane = RealPlane::shared().await.unwrap();
    let log = std::fs::read_to_string(plane.dir.join("kube-apiserver.log")).unwrap();
    log.lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["kind"] == "Event" && event["user"]["username"] == user)
        .filter(|event| event["stage"] == "ResponseComplete")
        .map(|event| Audited {
            verb: event["verb"].as_str().unwrap_or_default().to_owned(),
            resource: event["objectRef"]["resource"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            namespace: event["objectRef"]["namespace"].as_str().map(str::to_owned),
            code: event["responseStatus"]["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or_default(),
        })
        .collect()
}

/// The resources the reconciler reads or writes that live in namespaces.
const NAMESPACED_RESOURCES: [&str; 13] = [
    "oidcclients",
    "brandings",
    "identityproviders",
    "organizations",
    "clientapprovals",
    "secrets",
    "events",
    "deployments",
    "statefulsets",
    "daemonsets",
    "configmaps",
    "leases",
    "serviceaccounts",
];

async fn a_reconciler_limited_to_namespaces_is_granted_nothing_elsewhere() {
    audit_service_accounts();
    let stack = Stack::start_with(StackOptions {
        start_reconciler: false,
        ..StackOptions::default()
    })
    .await;
    let home = stack.namespace().to_owned();
    let other = format!("{home}-b");
    let namespaces: Api<Namespace> = Api::all(stack.client());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": other } })).unwrap(),
        )
        .await
        .unwrap();
    // The chart's RBAC limited to both, in place of the default install's: its ClusterRole loses
    // the namespaced rules, and the ClusterRoleBinding of the same name now binds only that.
    let listed = format!("namespaces={{{home},{other}}}");
    let rbac = chart_rbac(&["--set", &listed]);
    assert!(
        rbac.iter()
            .any(|o| o.metadata.name.as_deref() == Some("nauthera-reconciler-namespaced")),
        "the chart renders the namespaced grant"
    );
    manifests::apply_all(&stack.client(), &stack.cluster.relocate(rbac), None)
        .await
        .unwrap();
    let reconciler = stack
        .start_replica_configured(
            "replica-a",
            &stack.reconciler_kubeconfig,
            &[("NAUTHERA_NAMESPACES".to_owned(), format!("{home},{other}"))],
        )
        .await
        .unwrap();
    reconciler.wait_ready().await.unwrap();

    // It registers a client in each and delivers or reads their Secrets.
    stack.apply(&generated_client("web")).await;
    stack
        .apply_in(
            &other,
            &format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: upstream\nstringData:\n  \
                 clientSecret: limited-namespaces-value\n---\n{}",
                secret_ref_client("worker", "upstream")
            ),
        )
        .await;
    stack.wait_reason("web", Reason::Registered).await;
    assert!(
        stack.secret("web").await.is_some(),
        "the client secret is delivered"
    );
    let others: Api<OIDCClient> = Api::namespaced(stack.client(), &other);
    stack
        .eventually(
            "the client in the second namespace is registered",
            async || {
                others
                    .get("worker")
                    .await
                    .ok()
                    .and_then(|c| c.status?.reason)
                    == Some(Reason::Registered)
            },
        )
        .await;

    // Every request it made for a namespaced kind named a listed namespace (its Lease and
    // state: its own), and none was refused.
    let account = format!("system:serviceaccount:{home}:{RECONCILER_ACCOUNT}");
    let requests = audited_requests(&account).await;
    assert!(
        requests.iter().any(|r| r.resource == "secrets"),
        "the audit log holds the reconciler's requests: {requests:?}"
    );
    let refused: BTreeSet<_> = requests.iter().filter(|r| r.code == 403).collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
    let elsewhere: BTreeSet<_> = requests
        .iter()
        .filter(|r| NAMESPACED_RESOURCES.contains(&r.resource.as_str()))
        .filter(|r| {
            r.namespace
                .as_deref()
                .is_none_or(|n| n != home && n != other)
        })
        .collect();
    assert!(
        elsewhere.is_empty(),
        "requests across the cluster or in another namespace: {elsewhere:?}"
    );
    let cluster_wide: BTreeSet<_> = requests
        .iter()
        .filter(|r| r.namespace.is_none())
        .map(|r| format!("{} {}", r.verb, r.resource))
        .collect();
    eprintln!("across the cluster: {cluster_wide:?}");

    // And the authorizer shows what docs/security.md promises for this mode, nothing more.
    assert_shown_as_promised(
        &stack.cluster,
        "the chart with namespaces",
        &["permissions-namespaced"],
        &[
            (
                &home,
                &[Where::Everywhere, Where::ItsNamespace, Where::Listed],
            ),
            (&other, &[Where::Everywhere, Where::Listed]),
            ("default", &[Where::Everywhere]),
            ("kube-system", &[Where::Everywhere]),
        ],
    );
    let kubeconfig = stack.cluster.kubeconfig();
    for args in [
        &["get", "secrets", "-n", "kube-system"][..],
        &["list", "secrets", "-n", "default"],
        &["watch", "secrets", "--all-namespaces"],
        &["patch", "oidcclients.nauthera.io", "-n", "default"],
    ] {
        let mut full = vec!["auth", "can-i"];
        full.extend_from_slice(args);
        full.extend(["--as", account.as_str()]);
        let run = kubectl_as(kubeconfig, &full, None);
        assert_eq!(run.stdout.trim(), "no", "{args:?}: {}", run.stderr);
    }

    reconciler.stop().await;
    namespaces
        .delete(&other, &Default::default())
        .await
        .unwrap();
}

nauthera_tests::e2e_test!(
    real_only: every_shipped_deployment_is_admitted_by_restricted_pod_security,
    the_reconciler_may_do_exactly_what_the_security_doc_promises,
    a_reconciler_limited_to_namespaces_is_granted_nothing_elsewhere
);
