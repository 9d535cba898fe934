//! The Helm chart `charts/nauthera-reconciler/`, checked with the real Helm: `helm.sh/helm/v4` at
//! the release `tests/helm/go.mod` pins, built from source on first use (`tests/helm/build.sh`).
//!
//! One source of truth with `deploy/`: `helm template` with the values that correspond to an
//! overlay renders the same objects as `kubectl kustomize` of that overlay (compared parsed), for
//! every overlay. Every documented set of values lints (also `--strict`) and renders with each
//! object in the release's namespace; `values.schema.json` refuses typos and wrong types; every
//! value is documented in the chart's README and in the schema. `helm install` into the real
//! control plane (after the cert-manager and Prometheus Operator CRDs, from their Go modules)
//! succeeds, as do upgrades to every documented set of values, and the reconciler, run under the
//! ServiceAccount and RBAC the chart installed, registers `examples/`. That test owns
//! `nauthera-system` of this test binary's control plane.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nauthera_shared::resources::OIDCClient;
use nauthera_tests::binaries::workspace_root;
use nauthera_tests::e2e::{RECONCILER_NAMESPACE, Stack, StackOptions, kubectl};
use nauthera_tests::helm::helm_path;
use nauthera_tests::installed::{self, EXAMPLES_NAMESPACE};
use nauthera_tests::manifests;
use nauthera_tests::rendered::{env_value, misplaced};
use serde_json::Value;

const CHART: &str = "charts/nauthera-reconciler";
const RELEASE: &str = "nauthera-reconciler";
/// The label `deploy/base` (and the shards overlay) puts on what it installs.
const PART_OF: &str = "app.kubernetes.io/part-of";

fn chart_dir() -> PathBuf {
    workspace_root().join(CHART)
}

/// What a helm run printed and whether it succeeded.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `helm` with `args` and a home of its own (`HELM_*_HOME` under `home`, so nothing of the
/// user's Helm configuration, repositories or plugins takes part).
fn helm_in(home: &Path, args: &[&str]) -> Run {
    let output = Command::new(helm_path())
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("HELM_NAMESPACE")
        .env_remove("HELM_KUBECONTEXT")
        .stdin(Stdio::null())
        .output()
        .expect("helm runs");
    Run {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn helm(args: &[&str]) -> Run {
    let home = tempfile::tempdir().unwrap();
    helm_in(home.path(), args)
}

/// `helm template` of the chart into `namespace`, with the CRDs, and `values` (`-f FILE`,
/// `--set ...`); the rendered text.
fn template_text(namespace: &str, values: &[String]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        RELEASE,
        chart.to_str().unwrap(),
        "--namespace",
        namespace,
        "--include-crds",
    ];
    args.extend(values.iter().map(String::as_str));
    let run = helm(&args);
    assert!(run.ok, "helm {}: {}", args.join(" "), run.stderr);
    run.stdout
}

fn template(namespace: &str, values: &[String]) -> Vec<Value> {
    nauthera_tests::manifests::documents(&template_text(namespace, values))
        .expect("the rendering is YAML")
}

fn kustomize(overlay: &str) -> Vec<Value> {
    let dir = workspace_root().join("deploy/overlays").join(overlay);
    nauthera_tests::manifests::kustomize(&dir).expect("kustomize renders the overlay")
}

/// The documented sets of values: the defaults, and each file under the chart's `examples/`, by
/// name (`default`, `shards`, ...), as helm arguments.
fn documented_values() -> Vec<(String, Vec<String>)> {
    let dir = chart_dir().join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no values", dir.display());
    let mut sets = vec![("default".to_owned(), Vec::new())];
    for file in files {
        let name = file.file_stem().unwrap().to_str().unwrap().to_owned();
        sets.push((name, vec!["-f".to_owned(), file.display().to_string()]));
    }
    sets
}

/// The values that say to the chart what an overlay of `deploy/overlays` says: the defaults for
/// `production`, else `examples/<overlay>.yaml`; with the Namespace, which every overlay creates.
fn values_of_overlay(overlay: &str) -> Vec<String> {
    let mut values = vec!["--set".to_owned(), "namespace.create=true".to_owned()];
    if overlay != "production" {
        let file = chart_dir().join("examples").join(format!("{overlay}.yaml"));
        assert!(
            file.is_file(),
            "deploy/overlays/{overlay} has no values in {}: every overlay is expressed by the chart",
            file.display()
        );
        values.extend(["-f".to_owned(), file.display().to_string()]);
    }
    values
}

fn overlays() -> Vec<String> {
    let dir = workspace_root().join("deploy/overlays");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("kustomization.yaml").is_file())
        .map(|path| path.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert!(names.iter().any(|name| name == "production"));
    names
}

fn describe(object: &Value) -> String {
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .map_or(String::new(), |n| format!("{n}/"));
    format!(
        "{} {namespace}{}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Numbers as values, not as spellings: `1.0` in a generated CRD is the `1` kustomize prints.
fn normalized(value: Value) -> Value {
    match value {
        Value::Number(number) => match number.as_f64() {
            Some(float)
                if !number.is_i64()
                    && !number.is_u64()
                    && float.fract() == 0.0
                    && float.abs() < 9.0e15 =>
            {
                // An integral value within f64's exact range, so the cast loses nothing.
                Value::from(float as i64)
            }
            _ => Value::Number(number),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(normalized).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, normalized(v))).collect())
        }
        other => other,
    }
}

/// The objects by kind, namespace and name; two of one name fail.
fn by_name(objects: Vec<Value>, source: &str) -> BTreeMap<String, Value> {
    let mut named = BTreeMap::new();
    for object in objects {
        let key = describe(&object);
        assert!(
            named.insert(key.clone(), normalized(object)).is_none(),
            "{source} renders {key} twice"
        );
    }
    named
}

/// Where `a` and `b` differ, as paths with both values.
fn differences(a: &Value, b: &Value, path: &str, found: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (x, y) = (
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                );
                differences(x, y, &format!("{path}.{key}"), found);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                differences(x, y, &format!("{path}[{i}]"), found);
            }
        }
        _ if a != b => found.push(format!("{path}: chart {a}, kustomize {b}")),
        _ => {}
    }
}

/// Fails naming every object only one side renders and every field the two differ in.
fn assert_same_objects(chart: Vec<Value>, kustomize: Vec<Value>, what: &str) {
    let chart = by_name(chart, "the chart");
    let kustomize = by_name(kustomize, "kustomize");
    let mut problems = Vec::new();
    for name in chart.keys().filter(|name| !kustomize.contains_key(*name)) {
        problems.push(format!("only the chart renders {name}"));
    }
    for name in kustomize.keys().filter(|name| !chart.contains_key(*name)) {
        problems.push(format!("only kustomize renders {name}"));
    }
    for (name, object) in &chart {
        if let Some(other) = kustomize.get(name) {
            let mut found = Vec::new();
            differences(object, other, "", &mut found);
            problems.extend(found.into_iter().map(|f| format!("{name}: {f}")));
        }
    }
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
}

/// Kustomize's CRDs without the label `deploy/base` puts on them: the chart's `crds/` are the
/// generated files of `deploy/crds/` byte for byte, which Helm installs as they are (it renders
/// no template there). That label is the one difference, and it must be there to be taken off.
fn without_crd_label(objects: Vec<Value>) -> Vec<Value> {
    objects
        .into_iter()
        .map(|mut object| {
            if object["kind"] == "CustomResourceDefinition" {
                let name = describe(&object);
                let labels = object["metadata"]["labels"]
                    .as_object_mut()
                    .unwrap_or_else(|| panic!("kustomize's {name} has no labels"));
                assert_eq!(
                    labels.remove(PART_OF),
                    Some(Value::from("nauthera")),
                    "{name}"
                );
                if labels.is_empty() {
                    object["metadata"].as_object_mut().unwrap().remove("labels");
                }
            }
            object
        })
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

#[test]
fn helm_is_built_from_the_pinned_module_and_says_its_release() {
    let go_mod = std::fs::read_to_string(workspace_root().join("tests/helm/go.mod")).unwrap();
    let pinned = go_mod
        .lines()
        .find_map(|line| line.trim().strip_prefix("helm.sh/helm/v4 "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("tests/helm/go.mod requires helm.sh/helm/v4");
    assert!(
        go_mod
            .lines()
            .any(|line| line.trim() == "tool helm.sh/helm/v4/cmd/helm"),
        "tests/helm/go.mod names helm as its tool"
    );
    let run = helm(&[
        "version",
        "--template",
        "{{ .Version }} {{ .GitTreeState }}",
    ]);
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(run.stdout.trim(), format!("{pinned} clean"));
}

#[test]
fn the_chart_follows_the_workspace_version() {
    let text = std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap();
    let chart: Value = serde_saphyr::from_str(&text).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["name"], "nauthera-reconciler");
    assert_eq!(chart["version"], version);
    assert_eq!(chart["appVersion"], format!("v{version}"));
}

#[test]
fn the_chart_lints_strictly_with_each_documented_set_of_values() {
    let chart = chart_dir();
    for (name, values) in documented_values() {
        for strict in [false, true] {
            let mut args = vec![
                "lint",
                chart.to_str().unwrap(),
                "--namespace",
                "nauthera-system",
            ];
            if strict {
                args.push("--strict");
            }
            args.extend(values.iter().map(String::as_str));
            let run = helm(&args);
            assert!(
                run.ok,
                "helm lint (strict: {strict}) with the {name} values:\n{}{}",
                run.stdout, run.stderr
            );
            for level in ["[WARNING]", "[ERROR]"] {
                assert!(
                    !run.stdout.contains(level),
                    "helm lint with the {name} values:\n{}",
                    run.stdout
                );
            }
        }
    }
}

#[test]
fn each_overlay_and_its_values_render_the_same_objects() {
    for overlay in overlays() {
        let chart = template("nauthera-system", &values_of_overlay(&overlay));
        assert_same_objects(
            chart,
            without_crd_label(kustomize(&overlay)),
            &format!("the chart with its values for deploy/overlays/{overlay} renders otherwise"),
        );
    }
}

#[test]
fn the_default_values_are_the_production_overlay_without_the_namespace() {
    // helm install keeps the release in its namespace, so that comes first and the chart leaves
    // it alone unless asked.
    let chart = template("nauthera-system", &[]);
    assert!(chart.iter().all(|object| object["kind"] != "Namespace"));
    let production: Vec<Value> = without_crd_label(kustomize("production"))
        .into_iter()
        .filter(|object| object["kind"] != "Namespace")
        .collect();
    assert_same_objects(chart, production, "the default rendering");
}

#[test]
fn every_documented_set_of_values_puts_everything_in_the_release_namespace() {
    for (name, mut values) in documented_values() {
        values.extend(["--set".to_owned(), "namespace.create=true".to_owned()]);
        let text = template_text("team-ops", &values);
        assert!(
            !text.contains("nauthera-system"),
            "the {name} values name nauthera-system when released into team-ops"
        );
        let objects = nauthera_tests::manifests::documents(&text).expect("the rendering is YAML");
        assert_eq!(
            misplaced(&objects, "team-ops"),
            Vec::<String>::new(),
            "the {name} values"
        );
        let namespace = find(&objects, "Namespace", "team-ops");
        assert_eq!(
            namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
            "restricted"
        );
        for deployment in objects.iter().filter(|o| o["kind"] == "Deployment") {
            let pod = &deployment["spec"]["template"]["spec"];
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
            let container = &pod["containers"][0];
            assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
            assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
            assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
            let mounts = container["volumeMounts"].as_array().unwrap();
            assert!(mounts.iter().all(|m| m.get("subPath").is_none()));
        }
    }
}

#[test]
fn an_existing_secret_replaces_the_certificate() {
    let file = chart_dir().join("examples/existing-secret.yaml");
    let objects = template(
        "nauthera-system",
        &["-f".to_owned(), file.display().to_string()],
    );
    assert!(objects.iter().all(|o| o["kind"] != "Certificate"));
    let deployment = find(&objects, "Deployment", "nauthera-reconciler");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        "reconciler-client-cert"
    );
    assert_eq!(
        env_value(deployment, "NAUTHERA_TLS_SECRET"),
        Some("reconciler-client-cert")
    );
}

#[test]
fn the_switches_leave_out_what_they_name() {
    let file = chart_dir().join("examples/no-monitoring.yaml");
    let objects = template(
        "nauthera-system",
        &["-f".to_owned(), file.display().to_string()],
    );
    assert!(
        objects.iter().all(|o| !o["apiVersion"]
            .as_str()
            .unwrap()
            .starts_with("monitoring.coreos.com/")),
        "no Prometheus Operator objects without monitoring"
    );
    find(&objects, "Service", "nauthera-reconciler-metrics");

    let set = |pairs: &[&str]| -> Vec<String> {
        pairs
            .iter()
            .flat_map(|pair| ["--set".to_owned(), (*pair).to_owned()])
            .collect()
    };
    let objects = template("nauthera-system", &set(&["rbac.create=false"]));
    let kinds: Vec<String> = objects.iter().map(describe).collect();
    for gone in [
        "ClusterRole nauthera-reconciler",
        "ClusterRoleBinding nauthera-reconciler",
        "Role nauthera-system/nauthera-reconciler",
        "RoleBinding nauthera-system/nauthera-reconciler",
    ] {
        assert!(
            !kinds.iter().any(|k| k == gone),
            "rbac.create=false renders {gone}"
        );
    }
    assert!(
        kinds
            .iter()
            .any(|k| k == "ClusterRole nauthera-client-policy-admin")
    );
    // The permission to restart workloads is opt-in, and goes with the rest of the RBAC.
    let restart_role = "ClusterRole nauthera-reconciler-workload-restart";
    let restart_binding = "ClusterRoleBinding nauthera-reconciler-workload-restart";
    for (values, rendered) in [
        (&[][..], false),
        (&["rbac.workloadRestart=true"][..], true),
        (
            &["rbac.workloadRestart=true", "rbac.create=false"][..],
            false,
        ),
    ] {
        let kinds: Vec<String> = template("nauthera-system", &set(values))
            .iter()
            .map(describe)
            .collect();
        for name in [restart_role, restart_binding] {
            assert_eq!(
                kinds.iter().any(|k| k == name),
                rendered,
                "{values:?} renders {name}: {rendered}"
            );
        }
    }
    let objects = template("nauthera-system", &set(&["rbac.clientPolicyRoles=false"]));
    assert!(objects.iter().all(|o| {
        !o["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("nauthera-client-policy-")
    }));
    find(&objects, "ClusterRole", "nauthera-reconciler");

    // Settings that deploy/ has no overlay for land where they say.
    let objects = template(
        "nauthera-system",
        &[
            "--set".to_owned(),
            "image.tag=v9.9.9,image.pullPolicy=IfNotPresent,replicas=3,logFormat=text".to_owned(),
            "--set".to_owned(),
            "tls.identity=reconciler.example.org,monitoring.labels.release=prometheus".to_owned(),
            "--set-json".to_owned(),
            r#"extraEnv=[{"name":"NAUTHERA_CONCURRENCY","value":"8"}]"#.to_owned(),
            "--set-json".to_owned(),
            r#"kinds=["OIDCClient","Branding"]"#.to_owned(),
            "--set".to_owned(),
            "podAnnotations.team=identity".to_owned(),
        ],
    );
    let deployment = find(&objects, "Deployment", "nauthera-reconciler");
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        "ghcr.io/nauthera/nauthera-reconciler:v9.9.9"
    );
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["args"][0], "--log-format=text");
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(pod["metadata"]["annotations"]["team"], "identity");
    assert_eq!(env_value(deployment, "NAUTHERA_CONCURRENCY"), Some("8"));
    assert_eq!(
        env_value(deployment, "NAUTHERA_KINDS"),
        Some("OIDCClient,Branding")
    );
    let certificate = find(&objects, "Certificate", "nauthera-reconciler");
    assert_eq!(certificate["spec"]["dnsNames"][0], "reconciler.example.org");
    assert_eq!(certificate["spec"]["commonName"], "reconciler.example.org");
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        let object = find(&objects, kind, "nauthera-reconciler");
        assert_eq!(object["metadata"]["labels"]["release"], "prometheus");
        assert_eq!(
            object["metadata"]["labels"]["app.kubernetes.io/name"],
            "nauthera-reconciler"
        );
    }
}

/// A Deployment without what makes a shard's differ: names, labels, selector and the shard's
/// settings.
fn without_shard_settings(deployment: &Value) -> Value {
    let mut deployment = deployment.clone();
    for path in [
        "/metadata/name",
        "/metadata/labels",
        "/spec/selector",
        "/spec/template/metadata/labels",
    ] {
        *deployment.pointer_mut(path).unwrap() = Value::Null;
    }
    let settings = [
        "NAUTHERA_SHARD",
        "NAUTHERA_NAMESPACE_SELECTOR",
        "NAUTHERA_KINDS",
    ];
    deployment
        .pointer_mut("/spec/template/spec/containers/0/env")
        .and_then(Value::as_array_mut)
        .unwrap()
        .retain(|variable| !settings.iter().any(|s| variable["name"] == *s));
    deployment
}

#[test]
fn each_shard_gets_its_own_deployment_lease_state_and_metrics() {
    let objects = template(
        "nauthera-system",
        &[
            "--set".to_owned(),
            "namespaceSelector=nauthera.io/shard notin (batch\\,web),clusterName=prod-eu".to_owned(),
            "--set-json".to_owned(),
            r#"shards=[{"name":"batch","namespaceSelector":"nauthera.io/shard=batch"},{"name":"web","namespaceSelector":"nauthera.io/shard=web","kinds":["OIDCClient"]}]"#.to_owned(),
        ],
    );
    let base = find(&objects, "Deployment", "nauthera-reconciler");
    assert_eq!(
        env_value(base, "NAUTHERA_NAMESPACE_SELECTOR"),
        Some("nauthera.io/shard notin (batch,web)")
    );
    assert_eq!(env_value(base, "NAUTHERA_SHARD"), None);
    for (shard, selector, kinds) in [
        ("batch", "nauthera.io/shard=batch", None),
        ("web", "nauthera.io/shard=web", Some("OIDCClient")),
    ] {
        let name = format!("nauthera-reconciler-{shard}");
        let deployment = find(&objects, "Deployment", &name);
        assert_eq!(env_value(deployment, "NAUTHERA_SHARD"), Some(shard));
        assert_eq!(
            env_value(deployment, "NAUTHERA_NAMESPACE_SELECTOR"),
            Some(selector)
        );
        assert_eq!(env_value(deployment, "NAUTHERA_KINDS"), kinds);
        assert_eq!(
            env_value(deployment, "NAUTHERA_CLUSTER_NAME"),
            Some("prod-eu")
        );
        assert_eq!(
            deployment["spec"]["selector"]["matchLabels"],
            deployment["spec"]["template"]["metadata"]["labels"]
        );
        assert_ne!(deployment["spec"]["selector"], base["spec"]["selector"]);
        // Everything else is the unsharded reconciler's.
        assert_eq!(
            without_shard_settings(deployment),
            without_shard_settings(base)
        );

        let role = find(&objects, "Role", &name);
        let names = |resource: &str| -> Vec<&str> {
            role["rules"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|rule| rule["resources"][0] == resource)
                .flat_map(|rule| rule["resourceNames"].as_array().unwrap())
                .map(|name| name.as_str().unwrap())
                .collect()
        };
        assert_eq!(names("leases"), [name.as_str()]);
        assert_eq!(
            names("configmaps"),
            [nauthera_shared::control_plane::state_configmap_name(Some(shard)).as_str()]
        );
        let binding = find(&objects, "RoleBinding", &name);
        assert_eq!(binding["roleRef"]["name"], name.as_str());
        assert_eq!(binding["subjects"][0]["name"], "nauthera-reconciler");
        let service = find(&objects, "Service", &format!("{name}-metrics"));
        assert_eq!(
            service["spec"]["selector"],
            deployment["spec"]["template"]["metadata"]["labels"]
        );
        assert_eq!(
            service["metadata"]["labels"]["app.kubernetes.io/name"], "nauthera-reconciler",
            "the ServiceMonitor scrapes the shard's metrics too"
        );
    }
    // One certificate for all of them, of the cluster's identity.
    let certificate = find(&objects, "Certificate", "nauthera-reconciler");
    assert_eq!(
        certificate["spec"]["dnsNames"][0],
        "nauthera-reconciler.nauthera-system.prod-eu.svc"
    );
}

/// The resources of a Role's or ClusterRole's rules, with their group (`resource.group`).
fn rule_resources(role: &Value) -> BTreeSet<String> {
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|rule| {
            let group = rule["apiGroups"][0].as_str().unwrap_or_default().to_owned();
            rule["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |r| format!("{}.{group}", r.as_str().unwrap_or_default()))
        })
        .collect()
}

#[test]
fn a_reconciler_limited_to_namespaces_is_granted_namespaced_objects_there_only() {
    let objects = template(
        "nauthera-system",
        &[
            "--set".to_owned(),
            "namespaces={team-a,team-b},rbac.workloadRestart=true".to_owned(),
        ],
    );
    let deployment = find(&objects, "Deployment", "nauthera-reconciler");
    assert_eq!(
        env_value(deployment, "NAUTHERA_NAMESPACES"),
        Some("team-a,team-b")
    );
    // Nothing namespaced stays in the ClusterRole bound cluster-wide, and nothing is lost: the
    // two ClusterRoles hold the default one's rules between them.
    let cluster_wide = find(&objects, "ClusterRole", "nauthera-reconciler");
    let namespaced = find(&objects, "ClusterRole", "nauthera-reconciler-namespaced");
    assert_eq!(
        rule_resources(cluster_wide),
        [
            "clientpolicies.nauthera.io",
            "clientpolicies/status.nauthera.io",
            "namespaces.",
            "validatingadmissionpolicies.admissionregistration.k8s.io",
            "validatingadmissionpolicybindings.admissionregistration.k8s.io",
        ]
        .map(str::to_owned)
        .into()
    );
    let defaults = template("nauthera-system", &[]);
    let mut rules = cluster_wide["rules"].as_array().unwrap().clone();
    rules.splice(
        0..0,
        namespaced["rules"].as_array().unwrap().iter().cloned(),
    );
    assert_eq!(
        Value::from(rules),
        find(&defaults, "ClusterRole", "nauthera-reconciler")["rules"]
    );
    // Bound in each listed namespace, never cluster-wide.
    for role in [
        "nauthera-reconciler-namespaced",
        "nauthera-reconciler-workload-restart",
    ] {
        for namespace in ["team-a", "team-b"] {
            let binding = objects
                .iter()
                .find(|o| describe(o) == format!("RoleBinding {namespace}/{role}"))
                .unwrap_or_else(|| panic!("no RoleBinding {role} in {namespace}"));
            assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
            assert_eq!(binding["roleRef"]["name"], role);
            assert_eq!(binding["subjects"][0]["namespace"], "nauthera-system");
        }
        assert!(
            objects
                .iter()
                .filter(|o| o["kind"] == "ClusterRoleBinding")
                .all(|o| o["roleRef"]["name"] != role),
            "{role} is bound cluster-wide"
        );
    }
    // Shards share the ServiceAccount, so they cannot be limited this way.
    let run = helm(&[
        "template",
        RELEASE,
        chart_dir().to_str().unwrap(),
        "--set",
        "namespaces={team-a}",
        "--set-json",
        r#"shards=[{"name":"batch","namespaceSelector":"a=b"}]"#,
    ]);
    assert!(!run.ok);
    assert!(
        run.stderr.contains("namespaces and shards"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_schema_refuses_typos_and_wrong_types() {
    let cases: [(&[&str], &str); 12] = [
        (
            &["--set", "servr.address=x:1"],
            "additional properties 'servr' not allowed",
        ),
        (
            &["--set", "tls.certManager.enable=false"],
            "additional properties 'enable' not allowed",
        ),
        (
            &["--set", "replicas=two"],
            "at '/replicas': got string, want integer",
        ),
        (
            &["--set", "rbac.create=maybe"],
            "at '/rbac/create': got string, want boolean",
        ),
        (
            &[
                "--set-json",
                r#"shards=[{"name":"batch","namespaceSelecter":"a=b"}]"#,
            ],
            "additional properties 'namespaceSelecter' not allowed",
        ),
        (
            &["--set-json", r#"shards=[{"namespaceSelector":"a=b"}]"#],
            "missing property 'name'",
        ),
        (&["--set", "logFormat=yaml"], "at '/logFormat'"),
        (&["--set", "kinds={Secret}"], "at '/kinds/0'"),
        (&["--set", "clusterName=Prod EU"], "at '/clusterName'"),
        (&["--set", "namespaces={team_a}"], "at '/namespaces/0'"),
        (
            &["--set", "namespaces=team-a"],
            "at '/namespaces': got string, want array",
        ),
        (
            &["--set", "tls.certManager.duration=90d"],
            "at '/tls/certManager/duration'",
        ),
    ];
    let chart = chart_dir();
    for (values, said) in cases {
        let mut args = vec!["template", RELEASE, chart.to_str().unwrap()];
        args.extend(values);
        let run = helm(&args);
        assert!(!run.ok, "{values:?} is accepted");
        assert!(
            run.stderr
                .contains("values don't meet the specifications of the schema")
                && run.stderr.contains(said),
            "{values:?}: {}",
            run.stderr
        );
    }
    // The same places with right values render.
    let run = helm(&[
        "template",
        RELEASE,
        chart.to_str().unwrap(),
        "--set",
        "replicas=3,logFormat=text,clusterName=prod-eu,tls.certManager.duration=720h",
        "--set-json",
        r#"shards=[{"name":"batch","namespaceSelector":"a=b","kinds":["Branding"]}]"#,
    ]);
    assert!(run.ok, "{}", run.stderr);
}

/// The keys a schema documents: its properties (those of an object with properties of its own
/// instead of the object), and the properties of a list's items as `key[].property`. A property
/// given by `$ref` (a Kubernetes type, durations, labels) is one key.
fn schema_keys(node: &Value, prefix: &str, keys: &mut Vec<String>) {
    for (name, property) in node["properties"].as_object().into_iter().flatten() {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        if property["properties"].is_object() {
            schema_keys(property, &key, keys);
        } else {
            keys.push(key.clone());
        }
        schema_keys(&property["items"], &format!("{key}[]"), keys);
    }
}

/// The keys of values.yaml, down to where the schema stops giving properties, with their
/// defaults.
fn value_keys(values: &Value, schema: &Value, prefix: &str, keys: &mut BTreeMap<String, Value>) {
    for (name, value) in values.as_object().into_iter().flatten() {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let property = &schema["properties"][name];
        if value.is_object() && property["properties"].is_object() {
            value_keys(value, property, &key, keys);
        } else {
            keys.insert(key, value.clone());
        }
    }
}

/// The README's rows of values: key and default cell.
fn readme_rows(readme: &str) -> BTreeMap<String, String> {
    let mut rows = BTreeMap::new();
    for line in readme.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | `key` | default | description |
        if cells.len() != 5 || !cells[1].starts_with('`') {
            continue;
        }
        let key = cells[1].trim_matches('`').to_owned();
        if key.contains('/') || key.ends_with(".yaml") {
            continue; // the table of values files
        }
        assert!(
            rows.insert(key.clone(), cells[2].to_owned()).is_none(),
            "the README lists {key} twice"
        );
    }
    rows
}

#[test]
fn every_value_is_documented_in_the_readme_and_the_schema() {
    let dir = chart_dir();
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("values.yaml")).unwrap()).unwrap();
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("values.schema.json")).unwrap())
            .unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();

    let mut in_values = BTreeMap::new();
    value_keys(&values, &schema, "", &mut in_values);
    let mut in_schema = Vec::new();
    schema_keys(&schema, "", &mut in_schema);
    let in_schema: BTreeSet<String> = in_schema.into_iter().collect();
    let rows = readme_rows(&readme);
    assert!(in_values.len() > 20, "{in_values:?}");

    for key in in_values.keys() {
        assert!(in_schema.contains(key), "values.schema.json lacks {key}");
        assert!(rows.contains_key(key), "the chart's README lacks {key}");
    }
    for key in &in_schema {
        assert!(rows.contains_key(key), "the chart's README lacks {key}");
        assert!(
            key.contains("[]") || in_values.contains_key(key),
            "values.yaml has no default for {key}"
        );
    }
    for (key, default) in &rows {
        assert!(
            in_schema.contains(key),
            "the README documents {key}, which is no value"
        );
        match in_values.get(key) {
            // The default, written as YAML.
            Some(value) => {
                let written = default
                    .strip_prefix('`')
                    .and_then(|d| d.strip_suffix('`'))
                    .unwrap_or_else(|| panic!("{key}: the README's default {default} is no code"));
                let read: Value = serde_saphyr::from_str(written)
                    .unwrap_or_else(|e| panic!("{key}: the README's default {written}: {e}"));
                assert_eq!(&read, value, "{key}: the README's default");
            }
            None => assert!(
                !default.starts_with('`'),
                "{key} has no default in values.yaml"
            ),
        }
    }

    // The documented sets of values are in the README too.
    for (name, _) in documented_values().iter().skip(1) {
        assert!(
            readme.contains(&format!("`examples/{name}.yaml`")),
            "the chart's README does not describe examples/{name}.yaml"
        );
    }
}

async fn the_chart_installs_on_a_real_api_server_and_the_reconciler_registers_the_examples() {
    let stack = Stack::start_with(StackOptions {
        organizations: Vec::new(),
        start_reconciler: false,
        ..StackOptions::default()
    })
    .await;
    let client = stack.client();
    installed::install_third_party_crds(&client).await;
    // The namespace first, as the chart's README says: helm keeps the release in it.
    let namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": RECONCILER_NAMESPACE,
            "labels": { "pod-security.kubernetes.io/enforce": "restricted" },
        },
    }))
    .unwrap();
    manifests::apply_all(&client, &[namespace], None)
        .await
        .expect("the namespace is created");

    let home = stack.cluster.dir().join("helm");
    let kubeconfig = stack.cluster.kubeconfig().to_str().unwrap().to_owned();
    let chart = chart_dir().to_str().unwrap().to_owned();
    let run_helm = async |args: Vec<String>| {
        let home = home.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            helm_in(&home, &args)
        })
        .await
        .unwrap()
    };
    let release_args = |command: &str, values: &[String]| -> Vec<String> {
        let mut args: Vec<String> = [
            command,
            RELEASE,
            &chart,
            "--namespace",
            RECONCILER_NAMESPACE,
            "--kubeconfig",
            &kubeconfig,
        ]
        .map(str::to_owned)
        .to_vec();
        args.extend(values.iter().cloned());
        args
    };

    let run = run_helm(release_args("install", &[])).await;
    assert!(run.ok, "helm install: {}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("- identity: \"dns:nauthera-reconciler.nauthera-system.svc\""),
        "the notes show the allowed_clients entry: {}",
        run.stdout
    );
    // The namespaces examples/namespaced.yaml limits the reconciler to exist first, as the
    // chart's README says.
    let limited_to = ["team-a", "team-b"].map(|name| {
        serde_json::from_value::<kube::api::DynamicObject>(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": { "name": name },
        }))
        .unwrap()
    });
    manifests::apply_all(&client, &limited_to, None)
        .await
        .expect("the namespaces are created");
    // Every documented set of values as an upgrade (the API server judges each), then back.
    for (name, values) in documented_values().into_iter().skip(1) {
        let run = run_helm(release_args("upgrade", &values)).await;
        assert!(
            run.ok,
            "helm upgrade to the {name} values: {}{}",
            run.stdout, run.stderr
        );
    }
    let run = run_helm(release_args("upgrade", &["--reset-values".to_owned()])).await;
    assert!(run.ok, "helm upgrade back to the defaults: {}", run.stderr);
    let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    for namespace in ["team-a", "team-b"] {
        namespaces
            .delete(namespace, &Default::default())
            .await
            .expect("the namespace is removed");
    }
    let run = run_helm(vec![
        "status".to_owned(),
        RELEASE.to_owned(),
        "--namespace".to_owned(),
        RECONCILER_NAMESPACE.to_owned(),
        "--kubeconfig".to_owned(),
        kubeconfig.clone(),
        "--output".to_owned(),
        "json".to_owned(),
    ])
    .await;
    assert!(run.ok, "helm status: {}", run.stderr);
    let status: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(status["info"]["status"], "deployed");
    assert_eq!(status["version"], documented_values().len() + 1);

    // What the release left on the server is what the default rendering holds.
    let rendered = template(RECONCILER_NAMESPACE, &[]);
    for object in rendered
        .iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition")
    {
        let (kind, name) = (
            object["kind"].as_str().unwrap(),
            object["metadata"]["name"].as_str().unwrap(),
        );
        let mut args = vec!["--kubeconfig", &kubeconfig, "get", kind, name, "-o", "name"];
        if let Some(namespace) = object["metadata"]["namespace"].as_str() {
            args.extend(["--namespace", namespace]);
        }
        let output = tokio::process::Command::new(kubectl())
            .args(&args)
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{kind} {name} is not on the server: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // The chart's CRDs as an update of the installed ones: the API server takes them.
    let output = tokio::process::Command::new(kubectl())
        .args(["--kubeconfig", &kubeconfig, "apply", "--server-side"])
        .args(["--field-manager=helm-test", "--dry-run=server", "-f"])
        .arg(chart_dir().join("crds"))
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "the chart's CRDs: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    // The reconciler as its pod would run it: the installed ServiceAccount's token, the RBAC the
    // chart installed, its Lease in nauthera-system, watching the examples' namespace.
    let reconciler = installed::start_installed_reconciler(&stack).await;

    installed::apply_examples_and_wait_registered(&stack).await;
    drop(reconciler);

    // helm uninstall leaves the CRDs, and so every declared resource.
    let run = run_helm(vec![
        "uninstall".to_owned(),
        RELEASE.to_owned(),
        "--namespace".to_owned(),
        RECONCILER_NAMESPACE.to_owned(),
        "--kubeconfig".to_owned(),
        kubeconfig.clone(),
    ])
    .await;
    assert!(run.ok, "helm uninstall: {}", run.stderr);
    let clients = kube::Api::<OIDCClient>::namespaced(client.clone(), EXAMPLES_NAMESPACE)
        .list(&Default::default())
        .await
        .expect("the OIDCClients are still served");
    assert!(!clients.items.is_empty());
}
nauthera_tests::e2e_test!(real_only: the_chart_installs_on_a_real_api_server_and_the_reconciler_registers_the_examples);
