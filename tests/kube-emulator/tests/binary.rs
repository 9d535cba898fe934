//! The `nauthera-kube-emulator` binary: prints one JSON line saying where it listens, and the
//! kubeconfig it wrote works.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn binary_prints_its_address_and_writes_a_working_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig_path = dir.path().join("kubeconfig");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_nauthera-kube-emulator"))
        .arg("--kubeconfig")
        .arg(&kubeconfig_path)
        .args(["--namespace", "kube-system"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let announced: serde_json::Value = serde_json::from_str(&line).unwrap();
    let url = announced["listening"].as_str().unwrap();
    assert!(url.starts_with("https://127.0.0.1:"), "{line}");
    assert_eq!(
        announced["kubeconfig"],
        kubeconfig_path.display().to_string()
    );

    let kubeconfig = Kubeconfig::read_from(&kubeconfig_path).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(config.cluster_url.to_string().trim_end_matches('/'), url);
    assert_eq!(config.default_namespace, "kube-system");
    let client = Client::try_from(config).unwrap();
    let namespaces = Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        namespaces
            .items
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some("default"))
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kubeconfig_path)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the kubeconfig holds a token: owner only");
    }
    child.kill().await.unwrap();
}
