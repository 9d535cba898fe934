//! Real `kubectl` against the emulator, with a kubeconfig the emulator wrote and HOME pointed
//! at a temporary directory so no user configuration leaks in.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use nauthera_kube_emulator::Emulator;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const KUBECTL: &str = "/usr/bin/kubectl";

struct Kubectl {
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn new(emulator: &Emulator, token: &str, namespace: &str) -> Self {
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig");
        emulator
            .write_kubeconfig(&kubeconfig, token, namespace)
            .unwrap();
        Self { home, kubeconfig }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(KUBECTL);
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    async fn output(&self, args: &[&str]) -> Output {
        tokio::time::timeout(Duration::from_secs(30), self.command(args).output())
            .await
            .unwrap()
            .unwrap()
    }

    /// Runs kubectl and returns stdout, failing the test with stderr when it fails.
    async fn ok(&self, args: &[&str]) -> String {
        let output = self.output(args).await;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {stderr}\n{stdout}"
        );
        stdout
    }

    async fn fails(&self, args: &[&str]) -> String {
        let output = self.output(args).await;
        assert!(
            !output.status.success(),
            "kubectl {args:?} succeeded unexpectedly"
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.home.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.kubectl.example.com
spec:
  group: kubectl.example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer}
              color: {type: string, enum: [red, blue]}
          status:
            type: object
            properties:
              phase: {type: string}
"#;

const WIDGET: &str = r#"
apiVersion: kubectl.example.com/v1
kind: Widget
metadata: {name: w1, labels: {app: demo}}
spec: {size: 3}
"#;

fn kubectl_available() -> bool {
    Path::new(KUBECTL).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_and_writes_through_the_emulator() {
    if !kubectl_available() {
        eprintln!("{KUBECTL} is not installed; skipping");
        return;
    }
    let emulator = Emulator::start().await.unwrap();
    let kubectl = Kubectl::new(&emulator, emulator.superuser_token(), "demo");
    kubectl.ok(&["create", "namespace", "demo"]).await;

    // Client-side apply of a CRD and a custom resource.
    let crd = kubectl.file("crd.yaml", CRD);
    assert!(kubectl.ok(&["apply", "-f", &crd]).await.contains("created"));
    let widget = kubectl.file("widget.yaml", WIDGET);
    assert!(
        kubectl
            .ok(&["apply", "-f", &widget])
            .await
            .contains("widget.kubectl.example.com/w1 created")
    );
    assert!(
        kubectl
            .ok(&["apply", "-f", &widget])
            .await
            .contains("unchanged")
    );

    // Tables with printer columns, by plural and short name.
    let table = kubectl.ok(&["get", "widgets"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "PHASE", "AGE"]);
    assert!(lines.next().unwrap().starts_with("w1 "), "{table}");
    assert!(
        kubectl
            .ok(&["get", "wd", "-A"])
            .await
            .starts_with("NAMESPACE")
    );

    // Output formats.
    let json: Value =
        serde_json::from_str(&kubectl.ok(&["get", "widget", "w1", "-o", "json"]).await).unwrap();
    assert_eq!(json["spec"]["size"], 3);
    assert!(
        kubectl
            .ok(&["get", "widget", "w1", "-o", "yaml"])
            .await
            .contains("kind: Widget")
    );
    assert_eq!(
        kubectl
            .ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"])
            .await,
        "3"
    );

    // label, annotate, patch (main resource and status).
    kubectl.ok(&["label", "widget", "w1", "tier=gold"]).await;
    kubectl
        .ok(&["annotate", "widget", "w1", "note=hello"])
        .await;
    kubectl
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":5}}"#,
        ])
        .await;
    kubectl
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"phase":"Ready"}}"#,
        ])
        .await;
    let facts = kubectl
        .ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.labels.tier} {.metadata.annotations.note} {.spec.size} {.status.phase} {.metadata.generation}"])
        .await;
    assert_eq!(facts, "gold hello 5 Ready 2");
    assert!(
        kubectl
            .ok(&["get", "widgets", "-l", "tier=gold", "-o", "name"])
            .await
            .contains("widget.kubectl.example.com/w1")
    );

    // Schema errors come back the way kubectl prints them.
    let invalid = kubectl
        .fails(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"color":"green"}}"#,
        ])
        .await;
    assert!(
        invalid.contains("spec.color: Unsupported value: \"green\""),
        "{invalid}"
    );

    // Server-side apply.
    let ssa = kubectl.file("ssa.yaml", &WIDGET.replace("size: 3", "size: 4"));
    assert!(
        kubectl
            .ok(&["apply", "--server-side", "--force-conflicts", "-f", &ssa])
            .await
            .contains("serverside-applied")
    );
    let managers = kubectl
        .ok(&[
            "get",
            "widget",
            "w1",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ])
        .await;
    assert!(managers.contains("kubectl"), "{managers}");

    // describe, with the object's events.
    let uid = kubectl
        .ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.uid}"])
        .await;
    let event = format!(
        "apiVersion: v1\nkind: Event\nmetadata: {{name: w1.first}}\ninvolvedObject: {{apiVersion: kubectl.example.com/v1, kind: Widget, name: w1, namespace: demo, uid: {uid}}}\nreason: Registered\nmessage: the widget is registered\ntype: Normal\ncount: 1\nsource: {{component: widget-controller}}\n"
    );
    let event = kubectl.file("event.yaml", &event);
    kubectl.ok(&["create", "-f", &event]).await;
    let described = kubectl.ok(&["describe", "widget", "w1"]).await;
    assert!(described.contains("Name:         w1"), "{described}");
    assert!(
        described.contains("the widget is registered"),
        "{described}"
    );

    // get -w sees a change.
    let mut watch = kubectl
        .command(&["get", "widgets", "-w"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut rows = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(10), rows.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.starts_with("NAME"), "{first}");
    tokio::time::timeout(Duration::from_secs(10), rows.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    kubectl
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":42}}"#,
        ])
        .await;
    let changed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let line = rows.next_line().await.unwrap().unwrap();
            if line.contains("42") {
                return line;
            }
        }
    })
    .await
    .unwrap();
    assert!(changed.starts_with("w1"), "{changed}");
    watch.kill().await.unwrap();

    // Secrets (kubectl sends these as protobuf) and built-in tables.
    kubectl
        .ok(&[
            "create",
            "secret",
            "generic",
            "creds",
            "--from-literal=password=hunter2",
        ])
        .await;
    assert_eq!(
        kubectl
            .ok(&["get", "secret", "creds", "-o", "jsonpath={.data.password}"])
            .await,
        "aHVudGVyMg=="
    );
    let secrets = kubectl.ok(&["get", "secrets"]).await;
    assert!(
        secrets.contains("creds") && secrets.contains("Opaque"),
        "{secrets}"
    );
    assert!(
        kubectl
            .ok(&["describe", "secret", "creds"])
            .await
            .contains("password:  7 bytes")
    );
    assert!(kubectl.ok(&["get", "namespaces"]).await.contains("demo "));

    // Client-side apply of a built-in kind sends a strategic merge patch: keyed lists merge.
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - {name: app, image: \"nginx:1\", ports: [{containerPort: 80}]}\n      - {name: sidecar, image: \"busybox:1\"}\n";
    let first = kubectl.file("deployment.yaml", deployment);
    kubectl.ok(&["apply", "-f", &first]).await;
    let second = kubectl.file(
        "deployment2.yaml",
        &deployment.replace("nginx:1", "nginx:2"),
    );
    assert!(
        kubectl
            .ok(&["apply", "-f", &second])
            .await
            .contains("configured")
    );
    let containers = kubectl
        .ok(&["get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[*].image} {.spec.template.spec.containers[0].ports[0].containerPort} {.metadata.generation}"])
        .await;
    assert_eq!(containers, "nginx:2 busybox:1 80 2");
    assert!(
        kubectl
            .ok(&["get", "all"])
            .await
            .contains("deployment.apps/web")
    );

    // delete.
    assert!(
        kubectl
            .ok(&["delete", "widget", "w1"])
            .await
            .contains("deleted")
    );
    let missing = kubectl.fails(&["get", "widget", "w1"]).await;
    assert!(
        missing.contains("NotFound") && missing.contains("\"w1\" not found"),
        "{missing}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_follows_rbac() {
    if !kubectl_available() {
        eprintln!("{KUBECTL} is not installed; skipping");
        return;
    }
    let emulator = Emulator::start().await.unwrap();
    let admin = Kubectl::new(&emulator, emulator.superuser_token(), "team");
    admin.ok(&["create", "namespace", "team"]).await;
    admin.ok(&["create", "serviceaccount", "bot"]).await;
    assert_eq!(
        admin
            .ok(&["auth", "can-i", "delete", "secrets"])
            .await
            .trim(),
        "yes"
    );

    let bot = Kubectl::new(
        &emulator,
        &emulator.token_for_service_account("team", "bot"),
        "team",
    );
    let output = bot.output(&["auth", "can-i", "list", "secrets"]).await;
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "no");
    assert!(!output.status.success());
    let forbidden = bot.fails(&["get", "secrets"]).await;
    assert!(
        forbidden.contains("User \"system:serviceaccount:team:bot\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\""),
        "{forbidden}"
    );

    let rbac = admin.file(
        "rbac.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: read-secrets, namespace: team}\nrules:\n- {apiGroups: [\"\"], resources: [secrets], verbs: [get, list]}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: bot-reads, namespace: team}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-secrets}\nsubjects:\n- {kind: ServiceAccount, name: bot, namespace: team}\n",
    );
    let before = admin
        .output(&[
            "auth",
            "can-i",
            "list",
            "secrets",
            "--as",
            "system:serviceaccount:team:bot",
        ])
        .await;
    assert_eq!(
        String::from_utf8_lossy(&before.stdout).trim(),
        "no",
        "impersonation answers for the bot"
    );
    admin.ok(&["apply", "-f", &rbac]).await;
    assert_eq!(
        bot.ok(&["auth", "can-i", "list", "secrets"]).await.trim(),
        "yes"
    );
    assert_eq!(
        admin
            .ok(&[
                "auth",
                "can-i",
                "list",
                "secrets",
                "--as",
                "system:serviceaccount:team:bot"
            ])
            .await
            .trim(),
        "yes"
    );
    bot.ok(&["get", "secrets"]).await;

    // Imperative RBAC (kubectl sends these as protobuf) and whoami.
    admin
        .ok(&[
            "create",
            "clusterrole",
            "ns-reader",
            "--verb=get,list",
            "--resource=namespaces",
        ])
        .await;
    admin
        .ok(&[
            "create",
            "clusterrolebinding",
            "devs-read-ns",
            "--clusterrole=ns-reader",
            "--group=devs",
        ])
        .await;
    admin
        .ok(&[
            "create",
            "role",
            "cm-writer",
            "--verb=create",
            "--resource=configmaps",
        ])
        .await;
    admin
        .ok(&[
            "create",
            "rolebinding",
            "bot-writes-cm",
            "--role=cm-writer",
            "--serviceaccount=team:bot",
        ])
        .await;
    assert_eq!(
        bot.ok(&["auth", "can-i", "create", "configmaps"])
            .await
            .trim(),
        "yes"
    );
    let alice = [
        "auth",
        "can-i",
        "list",
        "namespaces",
        "--as",
        "alice",
        "--as-group",
        "devs",
    ];
    assert_eq!(admin.ok(&alice).await.trim(), "yes");
    let whoami = bot.ok(&["auth", "whoami"]).await;
    assert!(
        whoami.contains("system:serviceaccount:team:bot")
            && whoami.contains("system:serviceaccounts:team"),
        "{whoami}"
    );
}

/// The claims of a JWT-shaped token.
fn claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_and_scales_workloads() {
    if !kubectl_available() {
        eprintln!("{KUBECTL} is not installed; skipping");
        return;
    }
    let emulator = Emulator::start().await.unwrap();
    let kubectl = Kubectl::new(&emulator, emulator.superuser_token(), "shop");
    kubectl.ok(&["create", "namespace", "shop"]).await;

    // kubectl sends these as protobuf.
    assert_eq!(
        kubectl
            .ok(&["create", "deployment", "web", "--image=nginx", "--port=80"])
            .await
            .trim(),
        "deployment.apps/web created"
    );
    let deployment: Value = serde_json::from_str(
        &kubectl
            .ok(&["get", "deployment", "web", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(
        deployment["metadata"]["labels"],
        serde_json::json!({"app": "web"})
    );
    assert_eq!(deployment["metadata"]["generation"], 1);
    assert_eq!(
        deployment["spec"],
        serde_json::json!({
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx",
                    "ports": [{"containerPort": 80}], "resources": {}}]}
            }
        })
    );
    kubectl
        .ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"])
        .await;
    assert_eq!(
        kubectl
            .ok(&["get", "service", "web", "-o", "jsonpath={.spec.selector.app} {.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.type}"])
            .await,
        "web 80 8080 ClusterIP"
    );

    // scale sends a merge patch to the scale subresource.
    assert_eq!(
        kubectl
            .ok(&["scale", "deployment/web", "--replicas=3"])
            .await
            .trim(),
        "deployment.apps/web scaled"
    );
    assert_eq!(
        kubectl
            .ok(&[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.spec.replicas} {.metadata.generation}"
            ])
            .await,
        "3 2"
    );
    let scale: Value = serde_json::from_str(
        &kubectl
            .ok(&[
                "get",
                "deployment",
                "web",
                "--subresource=scale",
                "-o",
                "json",
            ])
            .await,
    )
    .unwrap();
    assert_eq!(
        (
            &scale["kind"],
            &scale["apiVersion"],
            &scale["spec"]["replicas"],
            &scale["status"]["selector"]
        ),
        (
            &serde_json::json!("Scale"),
            &serde_json::json!("autoscaling/v1"),
            &serde_json::json!(3),
            &serde_json::json!("app=web")
        )
    );
    let table = kubectl
        .ok(&["get", "deployment", "web", "--subresource=scale"])
        .await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [vec!["NAME", "DESIRED", "AVAILABLE"], vec!["web", "3", "0"]]
    );
    // With a precondition kubectl reads the Scale and replaces it.
    let stale = kubectl
        .fails(&[
            "scale",
            "deployment/web",
            "--current-replicas=2",
            "--replicas=5",
        ])
        .await;
    assert!(
        stale.contains("Expected replicas to be 2, was 3"),
        "{stale}"
    );
    kubectl
        .ok(&[
            "scale",
            "deployment/web",
            "--current-replicas=3",
            "--replicas=5",
        ])
        .await;
    let facts = kubectl
        .ok(&["get", "deployment", "web", "--show-managed-fields", "-o",
            "jsonpath={.spec.replicas} {.metadata.managedFields[?(@.subresource==\"scale\")].manager}"])
        .await;
    assert_eq!(facts, "5 kubectl");
    let negative = kubectl
        .fails(&["scale", "deployment/web", "--replicas=-1"])
        .await;
    assert!(negative.contains("replicas"), "{negative}");

    // A StatefulSet applied from a manifest scales the same way; a DaemonSet has no scale.
    let statefulset = kubectl.file(
        "statefulset.yaml",
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  serviceName: db\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    spec: {containers: [{name: db, image: postgres}]}\n",
    );
    kubectl.ok(&["apply", "-f", &statefulset]).await;
    assert_eq!(
        kubectl
            .ok(&["scale", "statefulset/db", "--replicas=2"])
            .await
            .trim(),
        "statefulset.apps/db scaled"
    );
    assert_eq!(
        kubectl
            .ok(&[
                "get",
                "statefulset",
                "db",
                "-o",
                "jsonpath={.spec.replicas}"
            ])
            .await,
        "2"
    );

    // Scaling is its own permission.
    kubectl.ok(&["create", "serviceaccount", "viewer"]).await;
    kubectl
        .ok(&[
            "create",
            "role",
            "read-deployments",
            "--verb=get,list",
            "--resource=deployments",
        ])
        .await;
    kubectl
        .ok(&[
            "create",
            "rolebinding",
            "viewer-reads",
            "--role=read-deployments",
            "--serviceaccount=shop:viewer",
        ])
        .await;
    let viewer = Kubectl::new(
        &emulator,
        &emulator.token_for_service_account("shop", "viewer"),
        "shop",
    );
    viewer.ok(&["get", "deployment", "web"]).await;
    let denied = viewer
        .fails(&["scale", "deployment/web", "--replicas=1"])
        .await;
    assert!(
        denied.contains("cannot patch resource \"deployments/scale\" in API group \"apps\""),
        "{denied}"
    );
}

/// `kubectl set env` and `kubectl set image` send strategic merge patches of a Deployment's
/// containers, keyed by name; the merged lists come back in the order kubectl asked for
/// (`$setElementOrder`), as a real API server orders them. Each step was checked against a real
/// kube-apiserver 1.34.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_set_env_and_set_image_edit_containers_by_name() {
    if !kubectl_available() {
        eprintln!("{KUBECTL} is not installed; skipping");
        return;
    }
    let emulator = Emulator::start().await.unwrap();
    let kubectl = Kubectl::new(&emulator, emulator.superuser_token(), "default");
    let containers = |name: &str| {
        let name = name.to_owned();
        let kubectl = &kubectl;
        async move {
            kubectl
                .ok(&[
                    "get",
                    "deployment",
                    &name,
                    "-o",
                    "jsonpath={range .spec.template.spec.containers[*]}{.name}={.image} env={.env[*].name};{end}",
                ])
                .await
        }
    };

    // `kubectl create deployment` names the container after the image, not the Deployment: on
    // any API server `set image web=...` then finds no container `web`, `set env` or not.
    kubectl
        .ok(&["create", "deployment", "web", "--image=nginx:1"])
        .await;
    kubectl
        .ok(&["set", "env", "deployment/web", "FOO=bar"])
        .await;
    let missing = kubectl
        .fails(&["set", "image", "deployment/web", "web=nginx:2"])
        .await;
    assert!(
        missing.contains("unable to find container named \"web\""),
        "{missing}"
    );
    kubectl
        .ok(&["set", "image", "deployment/web", "nginx=nginx:2"])
        .await;
    assert_eq!(containers("web").await, "nginx=nginx:2 env=FOO;");

    // A Deployment whose container is named `web`: set env, set image, remove a variable, then
    // apply the manifest again: its variable comes back first, where the manifest puts it.
    let manifest = kubectl.file(
        "api.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec:\n  selector: {matchLabels: {app: api}}\n  template:\n    metadata: {labels: {app: api}}\n    spec:\n      initContainers:\n      - {name: init, image: \"busybox:1\"}\n      containers:\n      - name: web\n        image: \"nginx:1\"\n        env: [{name: A, value: \"1\"}]\n      - {name: side, image: \"envoy:1\"}\n",
    );
    kubectl.ok(&["apply", "-f", &manifest]).await;
    kubectl
        .ok(&["set", "env", "deployment/api", "FOO=bar"])
        .await;
    assert_eq!(
        containers("api").await,
        "web=nginx:1 env=A FOO;side=envoy:1 env=FOO;"
    );
    kubectl
        .ok(&[
            "set",
            "image",
            "deployment/api",
            "web=nginx:2",
            "init=busybox:2",
        ])
        .await;
    kubectl.ok(&["set", "env", "deployment/api", "A-"]).await;
    assert_eq!(
        containers("api").await,
        "web=nginx:2 env=FOO;side=envoy:1 env=FOO;"
    );
    kubectl.ok(&["apply", "-f", &manifest]).await;
    assert_eq!(
        containers("api").await,
        "web=nginx:1 env=A FOO;side=envoy:1 env=FOO;"
    );
    assert_eq!(
        kubectl
            .ok(&[
                "get",
                "deployment",
                "api",
                "-o",
                "jsonpath={.spec.template.spec.initContainers[0].image} {.spec.template.spec.initContainers[0].env[0].name}",
            ])
            .await,
        "busybox:1 FOO"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_token_authenticates_as_the_service_account() {
    if !kubectl_available() {
        eprintln!("{KUBECTL} is not installed; skipping");
        return;
    }
    let emulator = Emulator::start().await.unwrap();
    let admin = Kubectl::new(&emulator, emulator.superuser_token(), "team");
    admin.ok(&["create", "namespace", "team"]).await;
    admin.ok(&["create", "serviceaccount", "bot"]).await;

    let token = admin
        .ok(&["create", "token", "bot"])
        .await
        .trim()
        .to_owned();
    let claims = claims(&token);
    assert_eq!(claims["sub"], "system:serviceaccount:team:bot");
    assert_eq!(
        claims["aud"],
        serde_json::json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(claims["kubernetes.io"]["serviceaccount"]["name"], "bot");
    let lifetime = claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap();
    assert_eq!(lifetime, 3600);
    let short = admin
        .ok(&["create", "token", "bot", "--duration=15m"])
        .await;
    let short = self::claims(short.trim());
    assert_eq!(
        short["exp"].as_i64().unwrap() - short["iat"].as_i64().unwrap(),
        900
    );

    // The token is the account: its identity, its groups and its RBAC.
    let bot = Kubectl::new(&emulator, &token, "team");
    let whoami = bot.ok(&["auth", "whoami", "-o", "json"]).await;
    let review: Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(
        review["status"]["userInfo"],
        serde_json::json!({"username": "system:serviceaccount:team:bot",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]})
    );
    let forbidden = bot.fails(&["get", "configmaps"]).await;
    assert!(
        forbidden.contains(
            "User \"system:serviceaccount:team:bot\" cannot list resource \"configmaps\""
        ),
        "{forbidden}"
    );
    admin
        .ok(&[
            "create",
            "role",
            "cm-reader",
            "--verb=list",
            "--resource=configmaps",
        ])
        .await;
    admin
        .ok(&[
            "create",
            "rolebinding",
            "bot-reads",
            "--role=cm-reader",
            "--serviceaccount=team:bot",
        ])
        .await;
    bot.ok(&["get", "configmaps"]).await;

    // What the API server refuses.
    let too_short = admin
        .fails(&["create", "token", "bot", "--duration=1m"])
        .await;
    assert!(
        too_short.contains("spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"),
        "{too_short}"
    );
    let missing = admin.fails(&["create", "token", "nobody"]).await;
    assert!(
        missing.contains("serviceaccounts \"nobody\" not found"),
        "{missing}"
    );
    // A token for another audience does not authenticate to the API.
    let elsewhere = admin
        .ok(&[
            "create",
            "token",
            "bot",
            "--audience=https://vault.example.com",
        ])
        .await;
    let elsewhere = Kubectl::new(&emulator, elsewhere.trim(), "team");
    assert!(
        elsewhere
            .fails(&["auth", "whoami"])
            .await
            .contains("Unauthorized")
    );

    // A token bound to a Secret ends with it; every token of the account ends with the account.
    admin.ok(&["create", "secret", "generic", "session"]).await;
    let bound = admin
        .ok(&[
            "create",
            "token",
            "bot",
            "--bound-object-kind=Secret",
            "--bound-object-name=session",
        ])
        .await;
    assert_eq!(
        self::claims(bound.trim())["kubernetes.io"]["secret"]["name"],
        "session"
    );
    let bound = Kubectl::new(&emulator, bound.trim(), "team");
    bound.ok(&["auth", "whoami"]).await;
    admin.ok(&["delete", "secret", "session"]).await;
    assert!(
        bound
            .fails(&["auth", "whoami"])
            .await
            .contains("Unauthorized")
    );
    bot.ok(&["auth", "whoami"]).await;
    admin.ok(&["delete", "serviceaccount", "bot"]).await;
    assert!(
        bot.fails(&["auth", "whoami"])
            .await
            .contains("Unauthorized")
    );
    admin.ok(&["create", "serviceaccount", "bot"]).await;
    assert!(
        bot.fails(&["auth", "whoami"])
            .await
            .contains("Unauthorized"),
        "a new account of the same name is not the old one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_pages_a_large_table() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};

    if !kubectl_available() {
        eprintln!("{KUBECTL} is not installed; skipping");
        return;
    }
    // More than two of kubectl's 500-object pages, and fewer pages than its client-side rate
    // limit lets through at once.
    const COUNT: usize = 1_234;
    let emulator = Emulator::start().await.unwrap();
    let kubectl = Kubectl::new(&emulator, emulator.superuser_token(), "bulk");
    kubectl.ok(&["create", "namespace", "bulk"]).await;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(
            &emulator.kubeconfig(emulator.superuser_token(), "bulk"),
        )
        .unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config).unwrap(), "bulk");
    futures::stream::iter(0..COUNT)
        .map(|i| {
            let maps = maps.clone();
            async move {
                let data: serde_json::Map<String, Value> = (0..i % 4)
                    .map(|k| (format!("key{k}"), Value::String(i.to_string())))
                    .collect();
                let map: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("cm-{i:05}"), "labels": {"shard": (i % 10).to_string()}},
                    "data": data,
                }))
                .unwrap();
                maps.create(&PostParams::default(), &map).await.unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;

    let table = kubectl.ok(&["get", "configmaps"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"]);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), COUNT);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row[0], format!("cm-{i:05}"), "rows come in name order");
        assert_eq!(row[1], (i % 4).to_string(), "{row:?}");
        assert!(
            row[2].ends_with('s') || row[2].ends_with('m'),
            "an age: {row:?}"
        );
    }
    // One page or many, the same table; a selector, the selected rows.
    let unpaged = kubectl
        .ok(&["get", "configmaps", "--chunk-size=0", "--no-headers"])
        .await;
    let names = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .filter(|n| n != "NAME")
            .collect()
    };
    assert_eq!(names(&unpaged), names(&table));
    let selected = kubectl
        .ok(&[
            "get",
            "configmaps",
            "-l",
            "shard=3",
            "--no-headers",
            "--chunk-size=100",
        ])
        .await;
    let expected: Vec<String> = (0..COUNT)
        .filter(|i| i % 10 == 3)
        .map(|i| format!("cm-{i:05}"))
        .collect();
    assert_eq!(names(&selected), expected);
    let wide = kubectl
        .ok(&[
            "get",
            "configmaps",
            "-A",
            "--show-labels",
            "--chunk-size=1000",
        ])
        .await;
    let first: Vec<&str> = wide.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!((first[0], first[1], first[2]), ("bulk", "cm-00000", "0"));
    assert_eq!(first.last(), Some(&"shard=0"));
    assert_eq!(wide.lines().count(), COUNT + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_reads_the_file_attached_to_a_pod() {
    if !kubectl_available() {
        eprintln!("{KUBECTL} is not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("web.log");
    std::fs::write(&log, "first\nsecond\nthird\n").unwrap();
    let options = nauthera_kube_emulator::Options {
        pod_logs: [(
            ("default".to_owned(), "web-5d8f-abcde".to_owned()),
            log.clone(),
        )]
        .into(),
        ..Default::default()
    };
    let emulator = Emulator::start_with(options).await.unwrap();
    let admin = Kubectl::new(&emulator, emulator.superuser_token(), "default");
    let manifests = admin.file(
        "web.yaml",
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: web}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-5d8f-abcde, labels: {app: web}}
spec: {containers: [{name: app, image: web}]}
---
apiVersion: v1
kind: Pod
metadata: {name: quiet}
spec: {containers: [{name: app, image: web}, {name: side, image: side}]}
"#,
    );
    admin.ok(&["apply", "-f", &manifests]).await;

    // kubectl finds the Deployment's pod by its selector, then reads pods/log.
    assert_eq!(
        admin.ok(&["logs", "deploy/web"]).await,
        "first\nsecond\nthird\n"
    );
    assert_eq!(
        admin.ok(&["logs", "web-5d8f-abcde", "--tail=1"]).await,
        "third\n"
    );
    assert_eq!(
        admin
            .ok(&["logs", "pod/web-5d8f-abcde", "-c", "app", "--since=1h"])
            .await,
        "first\nsecond\nthird\n"
    );
    // The file is read at each request.
    std::fs::write(&log, "first\nsecond\nthird\nfourth\n").unwrap();
    assert_eq!(
        admin.ok(&["logs", "web-5d8f-abcde", "--tail=2"]).await,
        "third\nfourth\n"
    );
    // A pod without a file has an empty log; a wrong container or an unknown pod is refused.
    assert_eq!(admin.ok(&["logs", "quiet", "-c", "side"]).await, "");
    let wrong = admin.fails(&["logs", "web-5d8f-abcde", "-c", "nope"]).await;
    assert!(wrong.contains("container nope is not valid"), "{wrong}");
    let missing = admin.fails(&["logs", "nobody"]).await;
    assert!(missing.contains("pods \"nobody\" not found"), "{missing}");

    // RBAC: pods/log is its own resource.
    let token = emulator.token_for_user("reader", &[]);
    let reader = Kubectl::new(&emulator, &token, "default");
    let role = admin.file(
        "role.yaml",
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pods-only}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pods-only}
subjects: [{kind: User, name: reader}]
"#,
    );
    admin.ok(&["apply", "-f", &role]).await;
    let denied = reader.fails(&["logs", "web-5d8f-abcde"]).await;
    assert!(
        denied.contains("cannot get resource \"pods/log\""),
        "{denied}"
    );
    admin
        .ok(&[
            "patch",
            "role",
            "pods-only",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["pods/log"],"verbs":["get"]}}]"#,
        ])
        .await;
    assert_eq!(
        reader.ok(&["logs", "web-5d8f-abcde", "--tail=1"]).await,
        "fourth\n"
    );
}
