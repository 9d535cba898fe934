//! The install on a real API server: `deploy/overlays/production`, `deploy/overlays/shards`,
//! `deploy/overlays/downstream-cluster`, `deploy/overlays/namespaced` (its namespaces made first)
//! and `deploy/overlays/workload-restart`, rendered by `kubectl kustomize`, are accepted by a
//! server-side dry run and then by a server-side apply, with the cert-manager and Prometheus
//! Operator CRDs installed first from those projects' own Go modules. The reconciler then runs
//! under the ServiceAccount and RBAC the overlays applied (as a pod would, with a token of that
//! account) and registers `examples/`.
//!
//! Only a real control plane judges this (the emulator accepts what it does not know to refuse),
//! and the overlays install into `nauthera-system` under the shipped names, which this test binary
//! has to itself.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use nauthera_tests::binaries::workspace_root;
use nauthera_tests::e2e::{RECONCILER_NAMESPACE, Stack, StackOptions, kubectl};
use nauthera_tests::{installed, manifests};
use tokio::io::AsyncWriteExt;

const OVERLAYS: [&str; 5] = [
    "production",
    "shards",
    "downstream-cluster",
    "namespaced",
    "workload-restart",
];

async fn the_overlays_install_on_a_real_api_server_and_the_reconciler_registers_the_examples() {
    let stack = Stack::start_with(StackOptions {
        organizations: Vec::new(),
        start_reconciler: false,
        ..StackOptions::default()
    })
    .await;
    let client = stack.client();
    installed::install_third_party_crds(&client).await;
    // The namespace first, as an administrator creates it: a dry run creates nothing, so the
    // objects in a namespace it would create could not be judged.
    // deploy/overlays/namespaced grants in team-a and team-b, which a platform has already.
    let namespaces = [RECONCILER_NAMESPACE, "team-a", "team-b"].map(|name| {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": { "name": name },
        }))
        .unwrap()
    });
    manifests::apply_all(&client, &namespaces, None)
        .await
        .expect("the namespaces are created");

    for overlay in OVERLAYS {
        let rendered = render(overlay).await;
        for dry_run in [true, false] {
            let (ok, output) = kubectl_apply(&stack, &rendered, dry_run).await;
            assert!(
                ok,
                "deploy/overlays/{overlay} (dry run: {dry_run}) is refused by the API server:\n{output}"
            );
        }
    }

    // The reconciler as its pod would run it: the applied ServiceAccount's token, the applied
    // RBAC, its Lease in nauthera-system, watching the examples' namespace.
    let _reconciler = installed::start_installed_reconciler(&stack).await;
    installed::apply_examples_and_wait_registered(&stack).await;
}
nauthera_tests::e2e_test!(real_only: the_overlays_install_on_a_real_api_server_and_the_reconciler_registers_the_examples);

async fn render(overlay: &str) -> String {
    let output = tokio::process::Command::new(kubectl())
        .arg("kustomize")
        .arg(workspace_root().join("deploy/overlays").join(overlay))
        .output()
        .await
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl kustomize deploy/overlays/{overlay}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `kubectl apply --server-side` (with `--dry-run=server` when asked) of `yaml` as the
/// administrator; whether it succeeded and what it printed.
async fn kubectl_apply(stack: &Stack, yaml: &str, dry_run: bool) -> (bool, String) {
    let mut command = tokio::process::Command::new(kubectl());
    command
        .arg("--kubeconfig")
        .arg(stack.cluster.kubeconfig())
        .args([
            "apply",
            "--server-side",
            "--field-manager=install-test",
            "-f",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if dry_run {
        command.arg("--dry-run=server");
    }
    let mut child = command.spawn().expect("kubectl runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .await
        .unwrap();
    let output = child.wait_with_output().await.unwrap();
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}
