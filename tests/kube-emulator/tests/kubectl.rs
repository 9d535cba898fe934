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
