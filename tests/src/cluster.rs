//! The real-cluster switch: end-to-end tests run against the Kubernetes API emulator by default,
//! or against a real cluster when [`KUBECONFIG_ENV`] names a kubeconfig for one.
//!
//! Either way each test gets a fresh namespace. On a real cluster the namespace is deleted when
//! the test's [`TestCluster`] is dropped, unless the test failed and [`KEEP_ENV`] is set, so the
//! state can be inspected. Tests must use only what a real API server offers: the emulator's own
//! controls are reached through [`TestCluster::emulator`], which is `None` on a real cluster.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use nauthera_kube_emulator::Emulator;

/// Names the kubeconfig of a real cluster to run the end-to-end tests on.
pub const KUBECONFIG_ENV: &str = "NAUTHERA_TEST_KUBECONFIG";
/// Set (to anything) to keep a failed test's namespace on a real cluster.
pub const KEEP_ENV: &str = "NAUTHERA_TEST_KEEP_NAMESPACE";

/// A cluster for one test, with a namespace of its own.
pub struct TestCluster {
    emulator: Option<Emulator>,
    kubeconfig: PathBuf,
    namespace: String,
    client: kube::Client,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("emulated", &self.emulator.is_some())
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl TestCluster {
    /// Starts an emulator, or connects to the cluster [`KUBECONFIG_ENV`] names, and creates a
    /// fresh namespace.
    pub async fn start() -> anyhow::Result<TestCluster> {
        TestCluster::start_in(&fresh_namespace_name()).await
    }

    /// Like [`TestCluster::start`], with the test namespace named `namespace` (two emulators
    /// standing for two clusters that both have it).
    pub async fn start_in(namespace: &str) -> anyhow::Result<TestCluster> {
        let dir = tempfile::tempdir().context("cannot create a temporary folder")?;
        let namespace = namespace.to_owned();
        let (emulator, kubeconfig) = match std::env::var_os(KUBECONFIG_ENV) {
            Some(path) => (None, PathBuf::from(path)),
            None => {
                let emulator = Emulator::start()
                    .await
                    .context("cannot start the emulator")?;
                let path = dir.path().join("kubeconfig");
                emulator
                    .write_kubeconfig(&path, emulator.superuser_token(), &namespace)
                    .context("cannot write the emulator's kubeconfig")?;
                (Some(emulator), path)
            }
        };
        let client = client_from(&kubeconfig).await?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let object = serde_json::from_value(serde_json::json!({
            "metadata": { "name": namespace, "labels": { "nauthera.io/test": "e2e" } }
        }))?;
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("cannot create the test namespace {namespace}"))?;
        Ok(TestCluster {
            emulator,
            kubeconfig,
            namespace,
            client,
            dir,
        })
    }

    /// A client with the kubeconfig's (administrator's) identity.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The test's own namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The administrator's kubeconfig, for `kubectl` and the binaries.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A temporary folder that lives as long as the cluster.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The emulator, when the test runs on one.
    pub fn emulator(&self) -> Option<&Emulator> {
        self.emulator.as_ref()
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if self.emulator.is_some() {
            return; // the emulator and everything in it go away with it
        }
        if std::thread::panicking() && std::env::var_os(KEEP_ENV).is_some() {
            eprintln!(
                "keeping namespace {} for inspection ({KEEP_ENV} is set)",
                self.namespace
            );
            return;
        }
        // Drop cannot await; kubectl deletes without blocking the test's runtime.
        let _ = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args([
                "delete",
                "namespace",
                &self.namespace,
                "--wait=false",
                "--ignore-not-found",
            ])
            .status();
    }
}

/// A kube client for the current context of a kubeconfig file.
pub async fn client_from(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let file = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("cannot read the kubeconfig {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("the kubeconfig {} is not usable", kubeconfig.display()))?;
    kube::Client::try_from(config).context("cannot build a Kubernetes client")
}

fn fresh_namespace_name() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let unique =
        nanos ^ std::process::id().rotate_left(16) ^ COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("e2e-{unique:08x}")
}
