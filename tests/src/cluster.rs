//! A cluster for one test on the [`Plane`] it runs on: its own emulator, or a namespace of the
//! real control plane this test binary shares (built from source, or the existing cluster
//! [`KUBECONFIG_ENV`] names).
//!
//! Either way each test gets a fresh namespace. On a real cluster the namespace is deleted when
//! the test's [`TestCluster`] is dropped (the `nauthera.io` finalizers its reconciler can no
//! longer remove are removed first, so the deletion finishes), unless the test failed and
//! [`KEEP_ENV`] is set, so the state can be inspected. Tests must use only what a real API server
//! offers: the emulator's own controls are reached through [`TestCluster::emulator`], which is
//! `None` on a real cluster.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use nauthera_kube_emulator::Emulator;

pub use crate::control_plane::KUBECONFIG_ENV;
use crate::control_plane::Plane;
use crate::control_plane::real::RealPlane;
/// Set (to anything) to keep a failed test's namespace on a real cluster.
pub const KEEP_ENV: &str = "NAUTHERA_TEST_KEEP_NAMESPACE";

/// A cluster for one test, with a namespace of its own.
pub struct TestCluster {
    /// Held while the test runs on a shared real cluster (see [`Sharing`]); released last.
    sharing: Option<SharingGuard>,
    emulator: Option<Emulator>,
    /// Whether the cluster is the control plane built from source (not an existing one).
    built: bool,
    /// Whether the cluster is a control plane of its own that is stopped after it, so nothing
    /// need be cleaned up.
    disposable: bool,
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
    /// Starts an emulator or connects to the real control plane (as [`Plane::current`] says), and
    /// creates a fresh namespace.
    pub async fn start() -> anyhow::Result<TestCluster> {
        TestCluster::start_sharing(Sharing::Together).await
    }

    /// Like [`TestCluster::start`], saying whether the test may share a real cluster with others
    /// running at the same time.
    pub async fn start_sharing(sharing: Sharing) -> anyhow::Result<TestCluster> {
        TestCluster::start_on(&fresh_namespace_name(), false, sharing, None).await
    }

    /// A cluster on `plane`, a control plane of this cluster's own (see
    /// [`crate::control_plane::real::FreshPlane`]): nothing is cleaned up when it is dropped.
    pub async fn start_alone_on(plane: &RealPlane) -> anyhow::Result<TestCluster> {
        TestCluster::start_on(&fresh_namespace_name(), false, Sharing::Alone, Some(plane)).await
    }

    /// Like [`TestCluster::start`], with the test namespace named `namespace` (two emulators
    /// standing for two clusters that both have it).
    pub async fn start_in(namespace: &str) -> anyhow::Result<TestCluster> {
        TestCluster::start_on(namespace, false, Sharing::Together, None).await
    }

    /// Like [`TestCluster::start_in`] on a second cluster: a second real control plane of this
    /// test binary when the test runs on a real one (an emulator of its own either way).
    pub async fn start_second_in(namespace: &str) -> anyhow::Result<TestCluster> {
        TestCluster::start_on(namespace, true, Sharing::Together, None).await
    }

    async fn start_on(
        namespace: &str,
        second: bool,
        sharing: Sharing,
        own_plane: Option<&RealPlane>,
    ) -> anyhow::Result<TestCluster> {
        // A plane of the stack's own (the benchmark's), or the one the work runs in (a
        // Kubernetes-side chaos scenario's).
        let scoped = RealPlane::scoped().filter(|_| !second && Plane::current() == Plane::Real);
        let own_plane = own_plane.or(scoped.as_ref());
        let sharing = match (Plane::current(), own_plane) {
            (_, Some(_)) | (Plane::Emulator, None) => None,
            (Plane::Real, None) => Some(sharing.acquire().await),
        };
        let dir = tempfile::tempdir().context("cannot create a temporary folder")?;
        let namespace = namespace.to_owned();
        let (emulator, kubeconfig) = if let Some(plane) = own_plane {
            let path = dir.path().join("kubeconfig");
            std::fs::write(&path, plane.kubeconfig(&namespace))
                .context("cannot write the control plane's kubeconfig")?;
            (None, path)
        } else {
            match (Plane::current(), std::env::var_os(KUBECONFIG_ENV)) {
                (Plane::Real, Some(_)) if second => {
                    anyhow::bail!("a second cluster needs the control plane built from source")
                }
                (Plane::Real, Some(path)) => (None, PathBuf::from(path)),
                (Plane::Real, None) => {
                    let plane = if second {
                        RealPlane::second().await?
                    } else {
                        RealPlane::shared().await?
                    };
                    let path = dir.path().join("kubeconfig");
                    std::fs::write(&path, plane.kubeconfig(&namespace))
                        .context("cannot write the control plane's kubeconfig")?;
                    (None, path)
                }
                (Plane::Emulator, _) => {
                    let emulator = Emulator::start()
                        .await
                        .context("cannot start the emulator")?;
                    let path = dir.path().join("kubeconfig");
                    emulator
                        .write_kubeconfig(&path, emulator.superuser_token(), &namespace)
                        .context("cannot write the emulator's kubeconfig")?;
                    (Some(emulator), path)
                }
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
        let built = emulator.is_none()
            && (own_plane.is_some() || std::env::var_os(KUBECONFIG_ENV).is_none());
        Ok(TestCluster {
            sharing,
            emulator,
            built,
            disposable: own_plane.is_some(),
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

    /// The plane the cluster is on.
    pub fn plane(&self) -> Plane {
        if self.emulator.is_some() {
            Plane::Emulator
        } else {
            Plane::Real
        }
    }

    /// Whether nothing but this harness runs the cluster's workloads (the emulator, or the
    /// control plane built from source without a Deployment controller), so the harness reports
    /// them as the kubelet would.
    pub fn harness_runs_workloads(&self) -> bool {
        self.emulator.is_some() || self.built
    }

    /// Where the test's reconciler is installed (its ServiceAccount, Role, Lease and state):
    /// `nauthera-system` on an emulator of its own; the test's namespace on a shared real
    /// cluster, so that tests running at once each have their own.
    pub fn reconciler_namespace(&self) -> &str {
        if self.emulator.is_some() {
            crate::e2e::RECONCILER_NAMESPACE
        } else {
            &self.namespace
        }
    }

    /// The install's objects as this cluster takes them: unchanged on an emulator; on a shared
    /// real cluster, the namespaced ones moved into [`TestCluster::reconciler_namespace`] and the
    /// cluster-scoped ones renamed after the test and labelled with [`TEST_LABEL`] (bindings
    /// follow), so that no two tests share or remove each other's.
    pub fn relocate(&self, objects: Vec<DynamicObject>) -> Vec<DynamicObject> {
        if self.emulator.is_some() {
            return objects;
        }
        let renamed: Vec<String> = objects
            .iter()
            .filter(|o| kind_of(o) == "ClusterRole")
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        let namespace = &self.namespace;
        objects
            .into_iter()
            .filter(|o| kind_of(o) != "Namespace")
            .map(|mut object| {
                let kind = kind_of(&object).to_owned();
                if object.metadata.namespace.as_deref() == Some(crate::e2e::RECONCILER_NAMESPACE) {
                    object.metadata.namespace = Some(namespace.clone());
                }
                if kind == "ClusterRole" || kind == "ClusterRoleBinding" {
                    object.metadata.name =
                        Some(self.cluster_name(object.metadata.name.as_deref().unwrap_or("")));
                    object
                        .metadata
                        .labels
                        .get_or_insert_default()
                        .insert(TEST_LABEL.to_owned(), namespace.clone());
                }
                if let Some(role) = object.data.get_mut("roleRef")
                    && role["kind"] == "ClusterRole"
                    && let Some(name) = role["name"].as_str()
                    && renamed.iter().any(|r| r == name)
                {
                    role["name"] = self.cluster_name(name).into();
                }
                if let Some(subjects) = object
                    .data
                    .get_mut("subjects")
                    .and_then(|s| s.as_array_mut())
                {
                    for subject in subjects {
                        if subject["namespace"] == crate::e2e::RECONCILER_NAMESPACE {
                            subject["namespace"] = namespace.clone().into();
                        }
                    }
                }
                object
            })
            .collect()
    }

    /// The name a cluster-scoped object of the install has in this test (see
    /// [`TestCluster::relocate`]).
    pub fn cluster_name(&self, name: &str) -> String {
        if self.emulator.is_some() {
            name.to_owned()
        } else {
            format!("{name}-{}", self.namespace)
        }
    }

    /// Writes a kubeconfig for the person `user` in `groups`, in the test's namespace: a token the
    /// emulator issues for them, or on a real cluster the administrator impersonating them (as
    /// `kubectl --as --as-group` does), so the API server's RBAC judges that person.
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str]) -> anyhow::Result<PathBuf> {
        let path = self.dir.path().join(format!("{user}.kubeconfig"));
        if let Some(emulator) = &self.emulator {
            let token = emulator.token_for_user(user, groups);
            emulator.write_kubeconfig(&path, &token, &self.namespace)?;
            return Ok(path);
        }
        let mut kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        let current = kubeconfig.current_context.clone().unwrap_or_default();
        let admin = kubeconfig
            .contexts
            .iter()
            .find(|c| c.name == current)
            .and_then(|c| c.context.as_ref())
            .and_then(|c| c.user.clone())
            .context("the kubeconfig's current context names no user")?;
        for named in &mut kubeconfig.auth_infos {
            if named.name == admin
                && let Some(auth) = named.auth_info.as_mut()
            {
                auth.impersonate = Some(user.to_owned());
                auth.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
            }
        }
        for named in &mut kubeconfig.contexts {
            if named.name == current
                && let Some(context) = named.context.as_mut()
            {
                context.namespace = Some(self.namespace.clone());
            }
        }
        std::fs::write(&path, serde_json::to_string(&kubeconfig)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// The address the API server listens on (a proxy in front of it can cut a client off).
    pub fn api_address(&self) -> anyhow::Result<std::net::SocketAddr> {
        if let Some(emulator) = &self.emulator {
            return Ok(emulator.address());
        }
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        let server = kubeconfig
            .clusters
            .iter()
            .find_map(|c| c.cluster.as_ref()?.server.clone())
            .context("the kubeconfig names no server")?;
        let url = url::Url::parse(&server).with_context(|| format!("the server {server}"))?;
        let host = url.host_str().context("the server URL has no host")?;
        let port = url.port_or_known_default().unwrap_or(443);
        use std::net::ToSocketAddrs;
        (host, port)
            .to_socket_addrs()?
            .next()
            .with_context(|| format!("{host}:{port} resolves to no address"))
    }

    /// Whether other tests' objects may be on the cluster (a shared real one), so the test's
    /// reconciler must be kept to the test's namespace.
    pub fn is_shared(&self) -> bool {
        self.emulator.is_none() && !self.disposable
    }

    /// The emulator, when the test runs on one.
    pub fn emulator(&self) -> Option<&Emulator> {
        self.emulator.as_ref()
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if self.emulator.is_some() || self.disposable {
            return; // the cluster and everything in it go away with it
        }
        if std::thread::panicking() && std::env::var_os(KEEP_ENV).is_some() {
            eprintln!(
                "keeping namespace {} for inspection ({KEEP_ENV} is set)",
                self.namespace
            );
            return;
        }
        // Drop cannot await; kubectl deletes without blocking the test's runtime. The namespace
        // goes first, then the finalizers of a reconciler that no longer runs, so that what the
        // deletion marked is released and the namespace finishes deleting.
        let kubectl = |args: &[&str]| {
            std::process::Command::new(crate::e2e::kubectl())
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .arg("--cache-dir")
                .arg(self.dir.path().join("kubectl-cache"))
                .args(args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .output()
        };
        // The test's namespace and those it made, labelled as its own.
        let mut namespaces = vec![self.namespace.clone()];
        if let Ok(labelled) = kubectl(&[
            "get",
            "namespaces",
            "-l",
            &format!("{TEST_LABEL}={}", self.namespace),
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ]) {
            namespaces.extend(
                String::from_utf8_lossy(&labelled.stdout)
                    .split_whitespace()
                    .map(str::to_owned),
            );
        }
        for namespace in &namespaces {
            let _ = kubectl(&[
                "delete",
                "namespace",
                namespace,
                "--wait=false",
                "--ignore-not-found",
            ]);
            let held = kubectl(&[
                "get",
                MANAGED_KINDS,
                "-n",
                namespace,
                "-o",
                "name",
                "--ignore-not-found",
            ]);
            if let Ok(held) = held {
                for object in String::from_utf8_lossy(&held.stdout).lines() {
                    let _ = kubectl(&[
                        "patch",
                        object,
                        "-n",
                        namespace,
                        "--type=merge",
                        "-p",
                        r#"{"metadata":{"finalizers":null}}"#,
                    ]);
                }
            }
        }
        if matches!(self.sharing, Some(SharingGuard::Alone(_))) {
            // What it made outside its namespace (labelled namespaces a selector matches) is gone
            // before the next test that runs alone looks.
            for namespace in &namespaces[1..] {
                let _ = kubectl(&[
                    "wait",
                    "--for=delete",
                    &format!("namespace/{namespace}"),
                    "--timeout=60s",
                ]);
            }
            // Alone on the cluster, the test made the cluster-wide policies there are; they go
            // before the next test runs, with the admission policies they own.
            let _ = kubectl(&[
                "delete",
                "clientpolicies.nauthera.io",
                "--all",
                "--cascade=foreground",
                "--timeout=60s",
                "--ignore-not-found",
            ]);
        }
        let _ = kubectl(&[
            "delete",
            TEST_CLUSTER_KINDS,
            "-l",
            &format!("{TEST_LABEL}={}", self.namespace),
            "--wait=false",
            "--ignore-not-found",
        ]);
    }
}

/// Whether a test can share a real cluster with the tests running beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// Everything the test makes is in its namespace or named after it.
    Together,
    /// The test makes what every reconciler on the cluster sees or every namespace is judged by
    /// (ClientPolicies and their admission policies, namespaces and selectors): it runs alone,
    /// and its ClientPolicies are removed when it ends.
    Alone,
}

/// What a test holds while it runs on a shared real cluster.
enum SharingGuard {
    Together(#[allow(dead_code)] tokio::sync::OwnedRwLockReadGuard<()>),
    Alone(#[allow(dead_code)] tokio::sync::OwnedRwLockWriteGuard<()>),
}

impl Sharing {
    async fn acquire(self) -> SharingGuard {
        static SHARED: std::sync::LazyLock<std::sync::Arc<tokio::sync::RwLock<()>>> =
            std::sync::LazyLock::new(Default::default);
        match self {
            Sharing::Together => SharingGuard::Together(SHARED.clone().read_owned().await),
            Sharing::Alone => SharingGuard::Alone(SHARED.clone().write_owned().await),
        }
    }
}

fn kind_of(object: &DynamicObject) -> &str {
    object
        .types
        .as_ref()
        .map(|t| t.kind.as_str())
        .unwrap_or_default()
}

/// The kinds whose manifests carry the reconciler's finalizer.
const MANAGED_KINDS: &str = "oidcclients.nauthera.io,brandings.nauthera.io,\
                             identityproviders.nauthera.io,organizations.nauthera.io";
/// The cluster-scoped kinds a test may create on a shared real control plane, labelled with
/// [`TEST_LABEL`] so that they go with the test.
const TEST_CLUSTER_KINDS: &str = "clusterroles,clusterrolebindings";
/// The label that ties an object outside a test's namespace to that test.
pub const TEST_LABEL: &str = "nauthera.io/test-namespace";

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
