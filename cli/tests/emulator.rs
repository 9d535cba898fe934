//! The built plugin against the Kubernetes API emulator: CRDs from `deploy/crds/`, resources with
//! the statuses the reconciler would write, its published state, and the plugin run both as its
//! own binary and through real `kubectl` with the binary's folder on PATH. Output is checked for
//! shape, exit codes and that no secret value ever appears.

// Tests may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use nauthera_kube_emulator::{Emulator, Options};
use nauthera_shared::resources::OIDCClient;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const PLUGIN: &str = env!("CARGO_BIN_EXE_kubectl-nauthera");
/// A client secret value planted in Secrets; no output may contain it.
const SECRET_VALUE: &str = "planted-client-secret-9f8e7d";
const ISSUER: &str = "https://id.example.com/acme";

struct Cluster {
    emulator: Emulator,
    client: Client,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

async fn start() -> Cluster {
    start_with(Options::default()).await
}

async fn start_with(options: Options) -> Cluster {
    let emulator = Emulator::start_with(options).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emulator
        .write_kubeconfig(&kubeconfig, emulator.superuser_token(), "team-a")
        .unwrap();
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = Client::try_from(config).unwrap();
    let cluster = Cluster {
        emulator,
        client,
        kubeconfig,
        dir,
    };
    install_crds(&cluster.client).await;
    for namespace in ["nauthera-system", "team-a", "team-b", "ops"] {
        let api: Api<Namespace> = Api::all(cluster.client.clone());
        api.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
        )
        .await
        .unwrap();
    }
    cluster
}

async fn install_crds(client: &Client) {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut installed = 0;
    for entry in std::fs::read_dir(&folder).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".nauthera.io.yaml") {
            continue;
        }
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        api.create(&PostParams::default(), &crd).await.unwrap();
        installed += 1;
    }
    // The four kinds, ClientPolicy and ClientApproval.
    assert_eq!(installed, 6);
    // Served once the kind answers a list.
    let clients: Api<OIDCClient> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while clients.list(&Default::default()).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "CRDs never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a resource of any kind and writes its status as the reconciler would.
async fn put(client: &Client, plural: &str, namespace: &str, object: Value, status: Option<Value>) {
    let resource = kube::api::ApiResource {
        group: "nauthera.io".into(),
        version: "v1alpha1".into(),
        api_version: "nauthera.io/v1alpha1".into(),
        kind: object["kind"].as_str().unwrap().into(),
        plural: plural.into(),
    };
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource);
    let object: kube::api::DynamicObject = serde_json::from_value(object).unwrap();
    let name = object.metadata.name.clone().unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
    if let Some(status) = status {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap();
    }
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

fn ago(seconds: i64) -> String {
    (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(seconds)).to_string()
}

fn status(reason: &str, phase: &str, extra: Value) -> Value {
    let mut status = json!({
        "observedGeneration": 1,
        "phase": phase,
        "reason": reason,
        "message": format!("{reason} for the test"),
        "revision": "r1",
        "generationInForce": 1,
        "slug": "acme",
        "conditions": [{
            "type": "Ready",
            "status": if reason == "Registered" { "True" } else { "False" },
            "reason": reason,
            "message": format!("{reason} for the test"),
            "observedGeneration": 1,
            "lastTransitionTime": ago(120),
        }]
    });
    if let (Some(status), Some(extra)) = (status.as_object_mut(), extra.as_object()) {
        status.extend(extra.clone());
    }
    status
}

fn client_manifest(name: &str, namespace: &str, secret: Value) -> Value {
    json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": "OIDCClient",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "issuer": ISSUER,
            "redirectUris": ["https://app.example.com/callback"],
            "secret": secret
        }
    })
}

/// The control plane as a healthy leader published it (in the form of an older reconciler: a
/// probe time, `updatedAt` and no Lease, which this plugin still reads), a ready Deployment, an
/// Organization, and resources in every interesting state.
/// The control-plane state in its ConfigMap, as the leader publishes it, and the reconciler's
/// Deployment with one ready replica.
async fn publish_state(client: &Client, state: &Value) {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "nauthera-system");
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "nauthera-reconciler-state",
                             "labels": {"app.kubernetes.io/component": "nauthera-reconciler-state"}},
                "data": {"state.json": state.to_string()}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "nauthera-system");
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(deployment("nauthera-reconciler", "tls")).unwrap(),
        )
        .await
        .unwrap();
    deployments
        .patch_status(
            "nauthera-reconciler",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 1, "readyReplicas": 1}})),
        )
        .await
        .unwrap();
}

async fn populate(cluster: &Cluster) {
    let client = &cluster.client;
    let state = json!({
        "leader": "nauthera-reconciler-0",
        "reconcilerVersion": "0.1.0",
        "serverAddress": "https://nauthera-server:8443",
        "serverBuild": "nauthera-server 1.4.2",
        "identity": "dns:nauthera-operator.nauthera.svc",
        "grants": [{
            "identity": "dns:nauthera-operator.nauthera.svc",
            "operations": ["clients", "organizations"],
            "organizations": ["acme"],
            "namespaces": ["team-a", "ops"]
        }],
        "probeReason": "Registered",
        "probeTime": now(),
        "lastSuccessTime": now(),
        "certificateNotAfter": (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * 60)).to_string(),
        "certificateIdentities": ["dns:nauthera-operator.nauthera.svc"],
        "updatedAt": now(),
    });
    publish_state(client, &state).await;

    put(
        client,
        "organizations",
        "ops",
        json!({"apiVersion": "nauthera.io/v1alpha1", "kind": "Organization",
               "metadata": {"name": "acme", "namespace": "ops"},
               "spec": {"slug": "acme", "issuer": ISSUER}}),
        Some(status("Registered", "Registered", json!({}))),
    )
    .await;
    put(
        client,
        "oidcclients",
        "team-a",
        client_manifest("shop", "team-a", json!({"generate": true})),
        Some(status(
            "Registered",
            "Registered",
            json!({"clientId": "c-shop"}),
        )),
    )
    .await;
    put(
        client,
        "oidcclients",
        "team-a",
        client_manifest(
            "billing",
            "team-a",
            json!({"generate": true, "secretName": "billing-oidc"}),
        ),
        Some(status(
            "Drifted",
            "Error",
            json!({"clientId": "c-billing", "drift": {
                "serverRevision": "",
                "removed": true,
                "changedAt": ago(300),
                "manager": "dashboard",
                "actor": "alice@example.com",
                "fields": ["spec.redirectUris"]
            }}),
        )),
    )
    .await;
    put(
        client,
        "oidcclients",
        "team-a",
        client_manifest("web", "team-a", json!({"generate": true})),
        Some(status(
            "Drifted",
            "Error",
            json!({"drift": {"serverRevision": "r5", "changedAt": ago(280), "manager": "dashboard"}}),
        )),
    )
    .await;
    put(
        client,
        "oidcclients",
        "team-a",
        client_manifest("taken", "team-a", json!({"generate": true})),
        Some(status("SecretUndeliverable", "Error", json!({}))),
    )
    .await;
    put(
        client,
        "brandings",
        "team-b",
        json!({"apiVersion": "nauthera.io/v1alpha1", "kind": "Branding",
               "metadata": {"name": "look", "namespace": "team-b"},
               "spec": {"issuer": ISSUER, "branding": {"texts": {"title": "Acme"}}}}),
        Some(status("Refused", "Error", json!({}))),
    )
    .await;
    // A Secret nobody owns, in the way of `taken`, holding a value that must never be printed.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "team-a");
    for name in ["taken", "billing-oidc"] {
        secrets
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "stringData": {"clientSecret": SECRET_VALUE}
                }))
                .unwrap(),
            )
            .await
            .unwrap();
    }
    // A workload that mounts billing's Secret.
    let team_deployments: Api<Deployment> = Api::namespaced(client.clone(), "team-a");
    team_deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(deployment("billing-web", "billing-oidc")).unwrap(),
        )
        .await
        .unwrap();
}

fn deployment(name: &str, secret: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "app", "image": "example/app:1"}],
                    "volumes": [{"name": "creds", "secret": {"secretName": secret}}]
                }
            }
        }
    })
}

async fn plugin(cluster: &Cluster, args: &[&str], stdin: Option<&str>) -> Run {
    let mut command = tokio::process::Command::new(PLUGIN);
    command
        .args(args)
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run(command, stdin).await
}

async fn run(mut command: tokio::process::Command, stdin: Option<&str>) -> Run {
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.unwrap();
    }
    drop(input);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the plugin finishes")
        .unwrap();
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        !run.all().contains(SECRET_VALUE),
        "a secret value leaked:\n{}",
        run.all()
    );
    assert!(!run.all().contains("panicked"), "{}", run.all());
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_diagnose_and_manifests_against_the_emulator() {
    let cluster = start().await;
    populate(&cluster).await;

    // status -A: drift and a grant finding need attention (exit 1).
    let all = plugin(&cluster, &["status", "-A"], None).await;
    assert_eq!(all.code, 1, "{}", all.all());
    for expected in [
        "1/1 ready, leader nauthera-reconciler-0",
        "nauthera-server 1.4.2",
        "OIDCClient    team-a     billing",
        "r1 (server (removed))",
        "Branding      team-b     look",
        "2 resources drifted",
        "OPERATION_NOT_GRANTED",
        "namespaces: [\"team-a\", \"ops\", \"team-b\"]",
    ] {
        assert!(
            all.stdout.contains(expected),
            "missing {expected:?} in\n{}",
            all.stdout
        );
    }

    // The JSON shape.
    let json = plugin(&cluster, &["status", "-A", "-o", "json"], None).await;
    assert_eq!(json.code, 1);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["scope"], "*");
    assert_eq!(
        report["controlPlane"]["identity"],
        "dns:nauthera-operator.nauthera.svc"
    );
    assert_eq!(report["controlPlane"]["reconciler"]["ready"], 1);
    assert_eq!(report["resources"].as_array().unwrap().len(), 6);
    assert_eq!(report["summary"]["drift"]["count"], 2);
    assert_eq!(report["summary"]["outsideGrant"], 1);
    let look = report["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == "look")
        .unwrap();
    assert_eq!(look["grant"]["status"], "outside");
    assert_eq!(look["grant"]["reason"], "OPERATION_NOT_GRANTED");
    let yaml = plugin(&cluster, &["status", "-A", "-o", "yaml"], None).await;
    let from_yaml: Value = serde_saphyr::from_str(&yaml.stdout).unwrap();
    assert_eq!(from_yaml["summary"], report["summary"]);

    // A reader that goes away (`| head`) is a clean exit, with nothing on standard error.
    let mut child = tokio::process::Command::new(PLUGIN)
        .args(["status", "-A"])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let closed = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(closed.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&closed.stderr), "");

    // A wrong --reconciler-namespace still finds the state by its label.
    let elsewhere = plugin(
        &cluster,
        &[
            "status",
            "-A",
            "-o",
            "json",
            "--reconciler-namespace",
            "wrong",
        ],
        None,
    )
    .await;
    let found: Value = serde_json::from_str(&elsewhere.stdout).unwrap();
    assert_eq!(found["controlPlane"]["namespace"], "nauthera-system");
    assert_eq!(found["controlPlane"]["stateFound"], true);

    // One registered resource in the context's namespace: all good (exit 0).
    let one = plugin(&cluster, &["status", "oidcclient/shop"], None).await;
    assert_eq!(one.code, 0, "{}", one.all());
    assert!(one.stdout.contains("shop") && !one.stdout.contains("billing"));
    let wide = plugin(&cluster, &["status", "oidcc", "-o", "wide"], None).await;
    assert!(wide.stdout.contains("CLIENT ID") && wide.stdout.contains("c-shop"));

    // A missing resource is an error (exit 2) that says what to do.
    let missing = plugin(&cluster, &["status", "oidcclient/nope"], None).await;
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("not found in namespace team-a"),
        "{}",
        missing.stderr
    );

    // diagnose a drifted client: revisions, who, how many, and the runbook.
    let drifted = plugin(&cluster, &["diagnose", "oidcclient/billing"], None).await;
    assert_eq!(drifted.code, 1, "{}", drifted.all());
    for expected in [
        "OIDCClient team-a/billing: Drifted",
        "the object is gone from the server",
        "changed by manager dashboard, actor alice@example.com",
        "2 resources drifted",
        "docs/runbooks/Drifted.md",
    ] {
        assert!(
            drifted.stdout.contains(expected),
            "missing {expected:?} in\n{}",
            drifted.stdout
        );
    }

    // diagnose a foreign Secret: its owner, and can-i for the reconciler's ServiceAccount.
    let foreign = plugin(
        &cluster,
        &["diagnose", "oidcclient/taken", "-o", "json"],
        None,
    )
    .await;
    assert_eq!(foreign.code, 1, "{}", foreign.all());
    let diagnosis: Value = serde_json::from_str(&foreign.stdout).unwrap();
    let steps = diagnosis["diagnoses"][0]["steps"].as_array().unwrap();
    let step = |check: &str| steps.iter().find(|step| step["check"] == check).unwrap();
    assert_eq!(step("SecretOwner")["status"], "failed");
    assert!(
        step("SecretOwner")["findings"][0]
            .as_str()
            .unwrap()
            .contains("no owner")
    );
    assert_eq!(step("ReconcilerCanI")["status"], "failed");

    // diagnose --all covers everything not Registered.
    let every = plugin(&cluster, &["diagnose", "--all", "-A"], None).await;
    assert_eq!(every.code, 1);
    assert!(
        every
            .stdout
            .contains("4 resources diagnosed, 4 need attention"),
        "{}",
        every.stdout
    );

    // diagnose -f on a good and a bad manifest.
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(
        &good,
        format!(
            "apiVersion: nauthera.io/v1alpha1\nkind: OIDCClient\nmetadata: {{name: fresh}}\n\
             spec:\n  issuer: {ISSUER}\n  redirectUris: [https://fresh.example.com/cb]\n  \
             secret: {{generate: true}}\n"
        ),
    )
    .unwrap();
    let good_run = plugin(&cluster, &["diagnose", "-f", good.to_str().unwrap()], None).await;
    assert_eq!(good_run.code, 0, "{}", good_run.all());
    assert!(
        good_run.stdout.contains("Secret fresh is free"),
        "{}",
        good_run.stdout
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        format!(
            "apiVersion: nauthera.io/v1alpha1\nkind: OIDCClient\nmetadata: {{name: taken, namespace: team-a}}\n\
             spec:\n  issuer: {ISSUER}\n  redirectUri: [https://x.example.com]\n  \
             secret: {{generate: true, secretRef: {{name: other}}}}\n"
        ),
    )
    .unwrap();
    let bad_run = plugin(&cluster, &["diagnose", "-f", bad.to_str().unwrap()], None).await;
    assert_eq!(bad_run.code, 1, "{}", bad_run.all());
    // What the API server refuses comes first (it checks the CRD's rules only once the schema
    // holds), and what the cluster holds beside it.
    for expected in [
        "spec.redirectUri: unknown field",
        "Secret taken exists and is not owned",
    ] {
        assert!(
            bad_run.stdout.contains(expected),
            "missing {expected:?} in\n{}",
            bad_run.stdout
        );
    }

    // Through real kubectl, with the plugin's folder on PATH.
    let folder = Path::new(PLUGIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        folder.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut kubectl = tokio::process::Command::new("kubectl");
    kubectl
        .args(["nauthera", "status", "-A", "-o", "json"])
        .env("PATH", &path)
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let through_kubectl = run(kubectl, None).await;
    assert_eq!(through_kubectl.code, 1, "{}", through_kubectl.all());
    let again: Value = serde_json::from_str(&through_kubectl.stdout).unwrap();
    assert_eq!(again["summary"], report["summary"]);

    // `kubectl nauthera <TAB>`: kubectl runs kubectl_complete-nauthera from PATH.
    let helper_dir = tempfile::tempdir().unwrap();
    let helper = helper_dir.path().join("kubectl_complete-nauthera");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("kubectl_complete-nauthera"),
        &helper,
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let complete = |words: &[&str]| {
        let mut kubectl = tokio::process::Command::new("kubectl");
        kubectl
            .arg("__complete")
            .arg("nauthera")
            .args(words)
            .env("PATH", format!("{}:{path}", helper_dir.path().display()))
            .env("KUBECONFIG", &cluster.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        kubectl
    };
    let names = run(complete(&["-n", "team-a", "restore", "oidcclient/b"]), None).await;
    assert_eq!(names.stdout, "oidcclient/billing\n:4\n", "{}", names.all());
    let namespaces = run(complete(&["status", "-n", "te"]), None).await;
    assert!(
        namespaces.stdout.starts_with("team-a\nteam-b\n"),
        "{}",
        namespaces.all()
    );
}

/// Plays the reconciler's part of a restore: when the annotation appears, write the declared
/// state (here: the status), record a `Restored` event and remove the annotation.
async fn restore_like_the_reconciler(client: Client, namespace: &'static str) {
    let api: Api<OIDCClient> = Api::namespaced(client.clone(), namespace);
    loop {
        for item in api.list(&Default::default()).await.unwrap().items {
            let annotations = item.metadata.annotations.clone().unwrap_or_default();
            if !annotations.contains_key("nauthera.io/restore") {
                continue;
            }
            let name = item.metadata.name.clone().unwrap();
            let overwritten = item
                .status
                .as_ref()
                .and_then(|s| s.drift.as_ref())
                .map(|d| d.server_revision.clone());
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    "nauthera.io/restore": null, "nauthera.io/restore-request": null
                }}})),
            )
            .await
            .unwrap();
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "phase": "Registered", "reason": "Restored", "revision": "r2", "drift": null,
                    "lastRestore": {
                        "request": annotations.get("nauthera.io/restore-request"),
                        "outcome": "Restored", "revision": "r2",
                        "overwrittenRevision": overwritten,
                    },
                }})),
            )
            .await
            .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn annotated(item: &OIDCClient) -> bool {
    item.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("nauthera.io/restore"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_against_the_emulator() {
    let cluster = start().await;
    populate(&cluster).await;
    let clients: Api<OIDCClient> = Api::namespaced(cluster.client.clone(), "team-a");

    // --dry-run shows the plan, names the workload to restart and changes nothing.
    let dry = plugin(&cluster, &["restore", "--all-drifted", "--dry-run"], None).await;
    assert_eq!(dry.code, 1, "{}", dry.all());
    for expected in [
        "removed from the server",
        "fields that differ: spec.redirectUris",
        "new secret in Secret billing-oidc",
        "kubectl -n team-a rollout restart deployment/billing-web",
        "nothing was changed",
    ] {
        assert!(
            dry.stdout.contains(expected),
            "missing {expected:?} in\n{}",
            dry.stdout
        );
    }
    assert!(!annotated(&clients.get("billing").await.unwrap()));

    // Several without --yes and without an answer: refused, nothing changed (exit 2).
    let unanswered = plugin(
        &cluster,
        &["restore", "oidcclient/billing", "oidcclient/web"],
        None,
    )
    .await;
    assert_eq!(unanswered.code, 2, "{}", unanswered.all());
    assert!(
        unanswered.stderr.contains("pass --yes"),
        "{}",
        unanswered.stderr
    );
    // Answered no: cancelled (exit 1), nothing changed.
    let declined = plugin(
        &cluster,
        &["restore", "oidcc/billing", "oidcc/web"],
        Some("n\n"),
    )
    .await;
    assert_eq!(declined.code, 1, "{}", declined.all());
    assert!(!annotated(&clients.get("web").await.unwrap()));

    // One resource, no reconciler acting: the annotation is applied and the wait times out.
    let timed_out = plugin(
        &cluster,
        &["restore", "oidcclient/web", "--timeout", "2s"],
        None,
    )
    .await;
    assert_eq!(timed_out.code, 1, "{}", timed_out.all());
    assert!(
        timed_out.stdout.contains("not restored within"),
        "{}",
        timed_out.stdout
    );
    assert!(annotated(&clients.get("web").await.unwrap()));

    // With the reconciler's part played: confirmed with "y", both restored (exit 0).
    let reconciler = tokio::spawn(restore_like_the_reconciler(
        cluster.client.clone(),
        "team-a",
    ));
    let confirmed = plugin(
        &cluster,
        &[
            "restore",
            "oidcclient/billing",
            "oidcclient/web",
            "--timeout",
            "20s",
        ],
        Some("y\n"),
    )
    .await;
    assert_eq!(confirmed.code, 0, "{}", confirmed.all());
    assert!(
        confirmed
            .stdout
            .contains("restored oidcclient/billing in team-a: the declared state was written back over the removed object (revision r2)"),
        "{}",
        confirmed.stdout
    );
    assert!(
        confirmed
            .stderr
            .contains("nauthera.io/restore-request=restore-"),
        "{}",
        confirmed.stderr
    );
    assert!(
        confirmed.stdout.contains("Restart the workloads"),
        "{}",
        confirmed.stdout
    );

    // Nothing drifted any more: --all-drifted has nothing to do (exit 0).
    let nothing = plugin(&cluster, &["restore", "--all-drifted", "--yes"], None).await;
    assert_eq!(nothing.code, 0, "{}", nothing.all());
    assert!(nothing.stdout.contains("Nothing to restore"));
    reconciler.abort();
}

#[tokio::test]
async fn errors_and_completion_need_no_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(PLUGIN);
    command
        .args(["status", "--kubeconfig"])
        .arg(dir.path().join("absent"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let absent = run(command, None).await;
    assert_eq!(absent.code, 2);
    assert!(
        absent
            .stderr
            .starts_with("error: cannot read the kubeconfig"),
        "{}",
        absent.stderr
    );
    assert!(absent.stderr.contains("--kubeconfig"));

    let mut command = tokio::process::Command::new(PLUGIN);
    command
        .args(["status", "pods/x"])
        .env("KUBECONFIG", dir.path().join("absent"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let unknown = run(command, None).await;
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("unknown kind `pods`"),
        "{}",
        unknown.stderr
    );

    let mut command = tokio::process::Command::new(PLUGIN);
    command
        .args(["completion", "bash"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let completion = run(command, None).await;
    assert_eq!(completion.code, 0);
    assert!(completion.stdout.contains("kubectl-nauthera"));

    let mut command = tokio::process::Command::new(PLUGIN);
    command
        .args(["diagnose", "-f", "-", "--local"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let local = run(
        command,
        Some(&format!(
            "apiVersion: nauthera.io/v1alpha1\nkind: Organization\nmetadata: {{name: acme}}\nspec: {{slug: acme, issuer: {ISSUER}}}\n---\n\
             apiVersion: nauthera.io/v1alpha1\nkind: Branding\nmetadata: {{name: b}}\nspec: {{issuer: {ISSUER}, branding: {{}}}}\n"
        )),
    )
    .await;
    assert_eq!(local.code, 0, "{}", local.all());
    assert!(
        local.stdout.contains("served by organization acme"),
        "{}",
        local.stdout
    );
}

/// `diagnose --all` over one resource per reason of the catalog: every runbook renders with its
/// checks gathered from the cluster, and the exit code says attention.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnose_every_reason_of_the_catalog() {
    let cluster = start().await;
    populate(&cluster).await;
    for reason in nauthera_shared::catalog::Reason::ALL {
        let name = format!("r-{}", reason.as_str().to_ascii_lowercase());
        let phase = reason.phase(false);
        put(
            &cluster.client,
            "oidcclients",
            "team-b",
            client_manifest(&name, "team-b", json!({"generate": true})),
            Some(status(reason.as_str(), phase.as_str(), json!({}))),
        )
        .await;
    }
    let run = plugin(
        &cluster,
        &["diagnose", "--all", "-n", "team-b", "-o", "json"],
        None,
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let diagnoses = report["diagnoses"].as_array().unwrap();
    for reason in nauthera_shared::catalog::Reason::ALL {
        let name = format!("r-{}", reason.as_str().to_ascii_lowercase());
        let found = diagnoses.iter().find(|d| d["name"] == name.as_str());
        if reason.phase(false) == nauthera_shared::catalog::Phase::Registered {
            // --all leaves Registered resources out; diagnose them by name.
            assert!(found.is_none(), "{name}");
            let one = plugin(
                &cluster,
                &[
                    "diagnose",
                    &format!("oidcclient/{name}"),
                    "-n",
                    "team-b",
                    "-o",
                    "json",
                ],
                None,
            )
            .await;
            assert!(one.code == 0 || one.code == 1, "{}", one.all());
            let one: Value = serde_json::from_str(&one.stdout).unwrap();
            assert_eq!(one["diagnoses"][0]["reason"], reason.as_str());
            continue;
        }
        let diagnosis = found.unwrap_or_else(|| panic!("{name} not diagnosed"));
        assert_eq!(diagnosis["reason"], reason.as_str());
        assert_eq!(
            diagnosis["runbook"],
            nauthera_shared::catalog::runbook_url(reason).as_str()
        );
        assert_eq!(
            diagnosis["steps"].as_array().unwrap().len(),
            reason.entry().runbook.diagnosis.len(),
            "{name}"
        );
    }
}

/// A state as the leader publishes it now: since-when times and the Lease it renews.
async fn publish_with_lease(client: &Client, renewed_seconds_ago: i64) {
    let state = json!({
        "leader": "nauthera-reconciler-0",
        "reconcilerVersion": "0.1.0",
        "serverAddress": "https://nauthera-server:8443",
        "serverBuild": "nauthera-server 1.4.2",
        "identity": "dns:nauthera-operator.nauthera.svc",
        "grants": [{
            "identity": "dns:nauthera-operator.nauthera.svc",
            "operations": ["clients"],
            "organizations": ["*"],
            "namespaces": ["*"]
        }],
        "probeReason": "Registered",
        "probeSince": ago(3 * 3600),
        "certificateNotAfter": (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * 60)).to_string(),
        "leaseName": "nauthera-reconciler",
        "changedAt": ago(3 * 3600),
    });
    publish_state(client, &state).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "nauthera-system");
    leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "nauthera-reconciler"},
                "spec": {
                    "holderIdentity": "nauthera-reconciler-0",
                    "leaseDurationSeconds": 15,
                    "acquireTime": ago(86_400),
                    "renewTime": ago(renewed_seconds_ago),
                }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
}

/// The state written hours ago is current as of the Lease its leader renews; a Lease nobody
/// renews makes it stale (exit 1); a user who may not read Leases is told that freshness is
/// unknown, and the command still works (exit 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_lease_says_how_fresh_the_state_is() {
    let cluster = start().await;
    publish_with_lease(&cluster.client, 1).await;

    let current = plugin(&cluster, &["status", "-o", "json"], None).await;
    assert_eq!(current.code, 0, "{}", current.all());
    let report: Value = serde_json::from_str(&current.stdout).unwrap();
    let control = &report["controlPlane"];
    assert_eq!(control["freshness"]["status"], "current", "{control}");
    assert_eq!(control["findings"], json!([]), "{control}");
    assert!(control["probe"]["sinceSeconds"].as_i64().unwrap() >= 3 * 3600);
    assert!(control["probe"]["ageSeconds"].as_i64().unwrap() < 60);
    let table = plugin(&cluster, &["status"], None).await;
    assert!(
        table
            .stdout
            .contains("Probe:        ok since 3h ago (as of "),
        "{}",
        table.stdout
    );

    // A user who may read the state, the Deployment and the resources, but not Leases.
    for (namespace, rules) in [
        (
            "nauthera-system",
            json!([
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},
            ]),
        ),
        (
            "team-a",
            json!([{"apiGroups": ["nauthera.io"], "resources": ["*"], "verbs": ["get", "list"]}]),
        ),
    ] {
        let roles: Api<Role> = Api::namespaced(cluster.client.clone(), namespace);
        let role = json!({"metadata": {"name": "viewer"}, "rules": rules});
        roles
            .create(
                &PostParams::default(),
                &serde_json::from_value(role).unwrap(),
            )
            .await
            .unwrap();
        let bindings: Api<RoleBinding> = Api::namespaced(cluster.client.clone(), namespace);
        let binding = json!({
            "metadata": {"name": "viewer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "viewer"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}],
        });
        bindings
            .create(
                &PostParams::default(),
                &serde_json::from_value(binding).unwrap(),
            )
            .await
            .unwrap();
    }
    let viewer_config = cluster.dir.path().join("viewer.kubeconfig");
    let emulator = &cluster.emulator;
    emulator
        .write_kubeconfig(
            &viewer_config,
            &emulator.token_for_user("viewer", &[]),
            "team-a",
        )
        .unwrap();
    let mut command = tokio::process::Command::new(PLUGIN);
    command
        .args(["status", "-o", "json"])
        .env("KUBECONFIG", &viewer_config)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let viewer = run(command, None).await;
    assert_eq!(viewer.code, 0, "{}", viewer.all());
    let report: Value = serde_json::from_str(&viewer.stdout).unwrap();
    let control = &report["controlPlane"];
    assert_eq!(control["stateFound"], true, "{control}");
    assert_eq!(control["freshness"]["status"], "unknown", "{control}");
    assert!(
        control["freshness"]["why"]
            .as_str()
            .unwrap()
            .starts_with("you may not read Lease nauthera-system/nauthera-reconciler"),
        "{control}"
    );

    // The leader stops renewing: the state is stale, whatever its content says.
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "nauthera-system");
    leases
        .patch(
            "nauthera-reconciler",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"renewTime": ago(600)}})),
        )
        .await
        .unwrap();
    let stale = plugin(&cluster, &["status"], None).await;
    assert_eq!(stale.code, 1, "{}", stale.all());
    assert!(
        stale.stdout.contains(
            "the published state is 10m old: no leader is publishing it (its leader \
             nauthera-reconciler-0 last renewed Lease nauthera-system/nauthera-reconciler 10m ago"
        ),
        "{}",
        stale.stdout
    );
}

/// A listing of more pages than the API server keeps history for: each later page's continue
/// token has expired (410) by the time it is sent. The plugin goes on with the token the server
/// gives for the rest, says so, and shows every resource once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_outlasts_the_servers_history_shows_every_resource_once() {
    let cluster = start_with(Options {
        compact_between_pages: true,
        ..Options::default()
    })
    .await;
    // Three pages of 500 in every namespace.
    let mut names = Vec::new();
    for index in 0..1_100 {
        let namespace = ["team-a", "team-b", "ops"][index % 3];
        let name = format!("client-{index:04}");
        put(
            &cluster.client,
            "oidcclients",
            namespace,
            client_manifest(&name, namespace, json!({"generate": true})),
            None,
        )
        .await;
        names.push(format!("{namespace}/{name}"));
    }
    names.sort();

    let json = plugin(&cluster, &["status", "-A", "-o", "json"], None).await;
    assert!(json.code < 2, "{}", json.all());
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    let mut listed: Vec<String> = report["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            format!(
                "{}/{}",
                row["namespace"].as_str().unwrap(),
                row["name"].as_str().unwrap()
            )
        })
        .collect();
    listed.sort();
    assert_eq!(listed, names, "every resource, once");
    let warnings: Vec<&str> = json
        .stderr
        .lines()
        .filter(|line| line.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", json.stderr);
    assert!(
        warnings[0].contains("listing oidcclients in every namespace")
            && warnings[0].contains("410 Expired"),
        "{}",
        warnings[0]
    );

    let table = plugin(
        &cluster,
        &["status", "oidcclients", "-A", "--no-headers"],
        None,
    )
    .await;
    assert!(table.code < 2, "{}", table.all());
    assert_eq!(
        table.stdout.lines().count(),
        names.len(),
        "{}",
        table.stderr
    );
}
