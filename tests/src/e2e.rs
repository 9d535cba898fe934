//! The end-to-end stack: a cluster (the emulator, or a real one through the real-cluster switch)
//! with the CRDs and the RBAC rendered from `deploy/base`, a fake nauthera-server in this process
//! (so tests drive its controls directly), and the real reconciler binary running as its own
//! ServiceAccount under exactly the shipped RBAC. Helpers wait for what a user would see: status,
//! events, metrics, `/readyz`, and the plugin through real `kubectl`.
//!
//! On a real cluster the reconciler's Lease and state live in the shared `nauthera-system`
//! namespace, so run the end-to-end tests there one at a time (`--test-threads=1`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Event, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use nauthera_fake_server::{FakeServer, FakeServerConfig, Method, OrganizationConfig, TestPki};
use nauthera_proto::v1::ObjectRef;
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::grants::GrantEntry;
use nauthera_shared::resources::{
    Branding, IdentityProvider, OIDCClient, Organization, ResourceStatus,
};
use sha2::Digest;
use tokio::io::AsyncWriteExt;

use crate::binaries::{Binary, workspace_root};
use crate::cluster::{Sharing, TestCluster};
use crate::manifests;
use crate::process::{ChildProcess, http_get};

/// The issuer of the organization every stack's server holds.
pub const ISSUER: &str = "https://login.example.com/acme";
/// Its slug.
pub const ORGANIZATION: &str = "acme";
/// The identity the reconciler's client certificate carries (a SAN), as `allowedClients` lists it.
pub const RECONCILER_IDENTITY: &str = "dns:nauthera-reconciler.nauthera-system.svc";
/// The namespace, ServiceAccount and manager name of the shipped deployment.
pub const RECONCILER_NAMESPACE: &str = "nauthera-system";
pub const RECONCILER_ACCOUNT: &str = "nauthera-reconciler";
pub const MANAGER: &str = "nauthera-reconciler";
/// The certificate Secret the tests' reconciler is configured to name (not the install default,
/// so a page that shows it shows the configuration).
pub const RECONCILER_TLS_SECRET: &str = "reconciler-client-cert";
/// How long a test waits for a state before it fails.
pub const WAIT: Duration = Duration::from_secs(90);
/// The reconciler's probe and change-poll intervals in the tests, in seconds.
pub const PROBE_INTERVAL_SECONDS: u64 = 2;
pub const POLL_INTERVAL_SECONDS: u64 = 1;

const START_TIMEOUT: Duration = Duration::from_secs(60);
/// An executable that runs the reconciler instead of the harness running it directly (a
/// profiler's wrapper script); for profiling only, as the measured process is then the wrapper.
pub const RECONCILER_WRAPPER: &str = "NAUTHERA_RECONCILER_WRAPPER";
/// How long a started reconciler may take to bind its two listeners.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

/// What the stack's server holds and admits.
#[derive(Clone, Debug)]
pub struct StackOptions {
    pub organizations: Vec<OrganizationConfig>,
    /// The server's `allowedClients`; the reconciler's identity granted everything when `None`.
    pub grants: Option<Vec<GrantEntry>>,
    /// Methods answered with `Unimplemented` from the start.
    pub unimplemented: Vec<Method>,
    /// Whether to start the reconciler and wait for `/readyz` (else start none).
    pub start_reconciler: bool,
    /// Environment that every replica gets on top of (or instead of) the tests' short intervals.
    pub reconciler_env: Vec<(String, String)>,
    /// Whether the test may share a real cluster with others running at the same time.
    pub sharing: Sharing,
    /// A folder of CRDs to install instead of `deploy/crds` (a previous release's).
    pub crds: Option<PathBuf>,
    /// A control plane of the stack's own (the benchmark's), instead of the emulator or the
    /// shared one.
    pub own_plane: Option<crate::control_plane::real::RealPlane>,
}

/// The replicas' environment for a Lease of `duration` seconds, a renew deadline of
/// `renew_deadline` seconds and a retry period of 1 s: a takeover within seconds.
pub fn short_lease(duration: u64, renew_deadline: u64) -> Vec<(String, String)> {
    vec![
        ("NAUTHERA_LEASE_DURATION".to_owned(), duration.to_string()),
        (
            "NAUTHERA_LEASE_RENEW_DEADLINE".to_owned(),
            renew_deadline.to_string(),
        ),
        ("NAUTHERA_LEASE_RETRY_PERIOD".to_owned(), "1".to_owned()),
    ]
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            organizations: vec![OrganizationConfig {
                slug: ORGANIZATION.to_owned(),
                issuer: ISSUER.to_owned(),
                display_name: "Acme".to_owned(),
                fapi_mode: Default::default(),
            }],
            grants: None,
            unimplemented: Vec::new(),
            start_reconciler: true,
            reconciler_env: Vec::new(),
            sharing: Sharing::Together,
            crds: None,
            own_plane: None,
        }
    }
}

/// The four kinds of manifest, as the helpers read them.
pub trait Declared:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + serde::Serialize
{
    fn declared_status(&self) -> Option<&ResourceStatus>;
}

macro_rules! declared {
    ($($kind:ty),*) => {
        $(impl Declared for $kind {
            fn declared_status(&self) -> Option<&ResourceStatus> {
                self.status.as_ref()
            }
        })*
    };
}

declared!(OIDCClient, Branding, IdentityProvider, Organization);

/// One test's stack.
pub struct Stack {
    // Fields drop in this order: the replicas (and their logs) before the cluster's folder.
    /// The first replica, when started.
    pub reconciler: Option<Reconciler>,
    pub server: Arc<FakeServer>,
    /// Shared with the stacks of other clusters that call the same server.
    pub pki: Arc<TestPki>,
    /// The reconciler's `tls.crt`, `tls.key`, `ca.crt` (a mounted cert-manager Secret).
    pub tls_dir: PathBuf,
    /// The kubeconfig of the reconciler's ServiceAccount.
    pub reconciler_kubeconfig: PathBuf,
    reconciler_env: Vec<(String, String)>,
    home: tempfile::TempDir,
    pub cluster: TestCluster,
}

/// One running reconciler replica.
pub struct Reconciler {
    process: Option<ChildProcess>,
    pub identity: String,
    pub probe_address: String,
    pub metrics_address: String,
    log: PathBuf,
}

/// What a plugin run printed and how it ended.
#[derive(Debug)]
pub struct PluginRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl PluginRun {
    /// Standard output and standard error together.
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    /// Whether the command succeeded.
    pub fn ok(&self) -> bool {
        self.code == 0
    }
}

/// One event recorded on an object.
#[derive(Clone, Debug)]
pub struct EventSeen {
    pub type_: String,
    pub reason: String,
    pub message: String,
}

impl Stack {
    /// A stack with the default server (organization `acme`, everything granted) and a ready
    /// reconciler.
    pub async fn start() -> Stack {
        Stack::start_with(StackOptions::default()).await
    }

    /// A stack with the default server that runs alone on a shared real cluster: for tests that
    /// make ClientPolicies, which every reconciler there sees and every namespace is judged by.
    pub async fn start_alone() -> Stack {
        Stack::start_with(StackOptions {
            sharing: Sharing::Alone,
            ..StackOptions::default()
        })
        .await
    }

    /// A stack with chosen server settings.
    pub async fn start_with(options: StackOptions) -> Stack {
        match Stack::try_start(options).await {
            Ok(stack) => stack,
            Err(error) => panic!("cannot start the end-to-end stack: {error:#}"),
        }
    }

    /// A stack with chosen server settings, or why it could not start.
    pub async fn try_start(options: StackOptions) -> anyhow::Result<Stack> {
        // Build the binaries before anything listens, so no timeout runs while cargo works.
        Binary::Reconciler.path()?;
        let cluster = match &options.own_plane {
            Some(plane) => TestCluster::start_alone_on(plane).await?,
            None => TestCluster::start_sharing(options.sharing).await?,
        };
        let client = cluster.client();
        match &options.crds {
            Some(dir) => manifests::install_crds_from(&client, dir).await?,
            None => manifests::install_crds(&client).await?,
        }
        manifests::apply_all(&client, &cluster.relocate(shipped_rbac()?), None).await?;
        let reconciler_kubeconfig = cluster.dir().join("reconciler.kubeconfig");
        write_service_account_kubeconfig(&cluster, &reconciler_kubeconfig).await?;

        let pki = TestPki::new()?;
        let config = FakeServerConfig {
            organizations: options.organizations,
            allowed_clients: options.grants.unwrap_or_else(|| {
                vec![nauthera_fake_server::grant_everything(RECONCILER_IDENTITY)]
            }),
            unimplemented: options.unimplemented,
            ..FakeServerConfig::default()
        };
        let server = Arc::new(FakeServer::start(&config, pki.server_tls()).await?);
        let tls_dir = cluster.dir().join("reconciler-tls");
        pki.write_client_dir(&tls_dir, RECONCILER_IDENTITY)?;
        let home = tempfile::tempdir()?;
        let mut stack = Stack {
            cluster,
            server,
            pki: Arc::new(pki),
            tls_dir,
            reconciler_kubeconfig,
            reconciler: None,
            reconciler_env: options.reconciler_env,
            home,
        };
        if options.start_reconciler {
            let reconciler = stack.start_replica("replica-a").await?;
            reconciler.wait_ready().await?;
            stack.reconciler = Some(reconciler);
            stack.show_deployment_ready(1).await?;
        }
        Ok(stack)
    }

    /// A second cluster calling this stack's server: its own cluster (an emulator, or the second real control plane) with the CRDs and the
    /// shipped RBAC, a namespace of the same name as this one's, and a ready reconciler with its
    /// own client certificate (`client_identity`) and `env` (its manager, cluster name). The
    /// server's grants are the caller's to set.
    pub async fn downstream(
        &self,
        client_identity: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Stack> {
        let cluster = TestCluster::start_second_in(self.namespace()).await?;
        let client = cluster.client();
        manifests::install_crds(&client).await?;
        manifests::apply_all(&client, &cluster.relocate(shipped_rbac()?), None).await?;
        let reconciler_kubeconfig = cluster.dir().join("reconciler.kubeconfig");
        write_service_account_kubeconfig(&cluster, &reconciler_kubeconfig).await?;
        let tls_dir = cluster.dir().join("reconciler-tls");
        self.pki.write_client_dir(&tls_dir, client_identity)?;
        let mut stack = Stack {
            cluster,
            server: self.server.clone(),
            pki: self.pki.clone(),
            tls_dir,
            reconciler_kubeconfig,
            reconciler: None,
            reconciler_env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            home: tempfile::tempdir()?,
        };
        let reconciler = stack.start_replica("replica-a").await?;
        reconciler.wait_ready().await?;
        stack.reconciler = Some(reconciler);
        stack.show_deployment_ready(1).await?;
        Ok(stack)
    }

    /// Starts one more reconciler replica with this Lease identity (not waiting for `/readyz`).
    pub async fn start_replica(&self, identity: &str) -> anyhow::Result<Reconciler> {
        self.start_replica_with(identity, &self.reconciler_kubeconfig)
            .await
    }

    /// Starts a replica that reaches the Kubernetes API only through `proxy`, so that a test can
    /// cut it off.
    pub async fn start_replica_through(
        &self,
        identity: &str,
        proxy: &crate::proxy::CuttableProxy,
    ) -> anyhow::Result<Reconciler> {
        let path = self.kubeconfig_through(identity, proxy)?;
        self.start_replica_with(identity, &path).await
    }

    /// Starts a replica that reaches the server at `server` (a proxy in front of it that a
    /// test can cut), with `env` on top of the stack's.
    pub async fn start_replica_reaching_server_at(
        &self,
        identity: &str,
        server: std::net::SocketAddr,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Reconciler> {
        let mut extra = vec![("NAUTHERA_SERVER_ADDRESS".to_owned(), server.to_string())];
        extra.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        self.start_replica_with_env(identity, &self.reconciler_kubeconfig, &extra)
            .await
    }

    /// Starts a replica with its own kubeconfig (for example one through a proxy, see
    /// [`Stack::kubeconfig_through`]) and `env` on top of the stack's (for example its own
    /// `NAUTHERA_TLS_DIR`, so that each replica carries its own certificate identity).
    pub async fn start_replica_configured(
        &self,
        identity: &str,
        kubeconfig: &Path,
        env: &[(String, String)],
    ) -> anyhow::Result<Reconciler> {
        self.start_replica_with_env(identity, kubeconfig, env).await
    }

    /// Writes a kubeconfig of the reconciler's ServiceAccount that reaches the Kubernetes API
    /// through `proxy`, named after `identity`.
    pub fn kubeconfig_through(
        &self,
        identity: &str,
        proxy: &crate::proxy::CuttableProxy,
    ) -> anyhow::Result<PathBuf> {
        let mut kubeconfig = kube::config::Kubeconfig::read_from(&self.reconciler_kubeconfig)?;
        for cluster in &mut kubeconfig.clusters {
            if let Some(cluster) = cluster.cluster.as_mut() {
                cluster.server = Some(format!("https://{}", proxy.address()));
            }
        }
        let path = self.cluster.dir().join(format!("{identity}.kubeconfig"));
        // It holds the ServiceAccount's token: readable by its owner only.
        crate::control_plane::real::write_private(&path, &serde_json::to_string(&kubeconfig)?)?;
        Ok(path)
    }

    /// Starts a replica that runs `program` (another release's reconciler) under the
    /// ServiceAccount's kubeconfig, with `env` on top of the stack's.
    pub async fn start_replica_running(
        &self,
        identity: &str,
        program: &Path,
        env: &[(String, String)],
    ) -> anyhow::Result<Reconciler> {
        self.start_replica_program(identity, &self.reconciler_kubeconfig, env, Some(program))
            .await
    }

    async fn start_replica_with(
        &self,
        identity: &str,
        kubeconfig: &Path,
    ) -> anyhow::Result<Reconciler> {
        self.start_replica_with_env(identity, kubeconfig, &[]).await
    }

    async fn start_replica_with_env(
        &self,
        identity: &str,
        kubeconfig: &Path,
        extra_env: &[(String, String)],
    ) -> anyhow::Result<Reconciler> {
        self.start_replica_program(identity, kubeconfig, extra_env, None)
            .await
    }

    async fn start_replica_program(
        &self,
        identity: &str,
        kubeconfig: &Path,
        extra_env: &[(String, String)],
        program: Option<&Path>,
    ) -> anyhow::Result<Reconciler> {
        let mut env: Vec<(String, String)> = [
            ("KUBECONFIG", kubeconfig.display().to_string()),
            ("HOME", self.home.path().display().to_string()),
            ("NAUTHERA_SERVER_ADDRESS", self.server.address().to_string()),
            ("NAUTHERA_TLS_SERVER_NAME", self.pki.server_name.clone()),
            ("NAUTHERA_TLS_DIR", self.tls_dir.display().to_string()),
            ("NAUTHERA_TLS_SECRET", RECONCILER_TLS_SECRET.to_owned()),
            (
                "NAUTHERA_LEASE_NAMESPACE",
                self.reconciler_namespace().to_owned(),
            ),
            ("NAUTHERA_IDENTITY", identity.to_owned()),
            // Port 0, then the addresses it logs: no port is picked here for another to take.
            ("NAUTHERA_PROBE_ADDRESS", "127.0.0.1:0".to_owned()),
            ("NAUTHERA_METRICS_ADDRESS", "127.0.0.1:0".to_owned()),
            (
                "NAUTHERA_PROBE_INTERVAL",
                PROBE_INTERVAL_SECONDS.to_string(),
            ),
            ("NAUTHERA_PROBE_RETRY_INTERVAL", "1".to_owned()),
            (
                "NAUTHERA_CHANGE_POLL_INTERVAL",
                POLL_INTERVAL_SECONDS.to_string(),
            ),
            ("RUST_LOG", "info".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for (name, value) in self.reconciler_env.iter().chain(extra_env) {
            env.retain(|(existing, _)| existing != name);
            env.push((name.clone(), value.clone()));
        }
        let scoped = env
            .iter()
            .any(|(k, _)| k == "NAUTHERA_NAMESPACES" || k == "NAUTHERA_NAMESPACE_SELECTOR");
        if self.cluster.is_shared() && !scoped {
            // A real cluster holds other namespaces the test must not touch.
            env.push((
                "NAUTHERA_NAMESPACES".to_owned(),
                self.namespace().to_owned(),
            ));
        }
        // A profiler's wrapper script may stand in for the binary (docs/performance.md).
        let program = match (program, std::env::var_os(RECONCILER_WRAPPER)) {
            (Some(program), _) => program.to_path_buf(),
            (None, Some(wrapper)) => PathBuf::from(wrapper),
            (None, None) => Binary::Reconciler.path()?,
        };
        let process = ChildProcess::start_logging(
            &format!("reconciler-{identity}"),
            &program,
            &env,
            self.cluster.dir(),
            "listening",
            LISTEN_TIMEOUT,
        )
        .await?;
        let log = process.log_path().to_path_buf();
        Ok(Reconciler {
            identity: identity.to_owned(),
            probe_address: process.announced("probes")?,
            metrics_address: process.announced("metrics")?,
            process: Some(process),
            log,
        })
    }

    /// Stores the shipped Deployment with `replicas` ready, as the kubelet would report the pods
    /// these processes stand for (the plugin reads it), where nothing else runs workloads (the
    /// emulator, the control plane built from source). Nothing on an existing cluster.
    pub async fn show_deployment_ready(&self, replicas: i32) -> anyhow::Result<()> {
        if !self.cluster.harness_runs_workloads() {
            return Ok(());
        }
        show_deployment_ready(&self.client(), self.reconciler_namespace(), replicas).await
    }

    /// Where the reconciler's ServiceAccount, Role, Lease and state are (see
    /// [`TestCluster::reconciler_namespace`]).
    pub fn reconciler_namespace(&self) -> &str {
        self.cluster.reconciler_namespace()
    }

    /// The reconciler's ClusterRole as shipped, under the name it has in this test's cluster.
    pub fn shipped_cluster_role(&self) -> serde_json::Value {
        self.shipped_cluster_role_named(RECONCILER_ACCOUNT)
    }

    /// A ClusterRole of `deploy/base` by its shipped name, under the name it has in this test's
    /// cluster.
    pub fn shipped_cluster_role_named(&self, name: &str) -> serde_json::Value {
        let rbac = self
            .cluster
            .relocate(shipped_rbac().expect("deploy/base renders"));
        let wanted = self.cluster.cluster_name(name);
        let role = rbac
            .into_iter()
            .find(|o| {
                o.types.as_ref().is_some_and(|t| t.kind == "ClusterRole")
                    && o.metadata.name.as_deref() == Some(wanted.as_str())
            })
            .unwrap_or_else(|| panic!("deploy/base has the ClusterRole {name}"));
        serde_json::to_value(role).expect("serializes")
    }

    /// Replaces a ClusterRole of the install (as the administrator), e.g. with fewer permissions.
    pub async fn apply_cluster_role(&self, role: &serde_json::Value) {
        let object: DynamicObject = serde_json::from_value(role.clone()).expect("a ClusterRole");
        manifests::apply_all(&self.client(), &[object], None)
            .await
            .expect("the ClusterRole is applied");
    }

    /// A kubeconfig for the person `user` in `groups` (see [`TestCluster::user_kubeconfig`]).
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str]) -> PathBuf {
        self.cluster
            .user_kubeconfig(user, groups)
            .expect("a user's kubeconfig is written")
    }

    /// The first replica.
    pub fn reconciler(&self) -> &Reconciler {
        self.reconciler
            .as_ref()
            .expect("the stack was started with a reconciler")
    }

    /// The test's namespace.
    pub fn namespace(&self) -> &str {
        self.cluster.namespace()
    }

    /// An administrator's client.
    pub fn client(&self) -> kube::Client {
        self.cluster.client()
    }

    /// OIDCClients in the test's namespace.
    pub fn oidc_clients(&self) -> Api<OIDCClient> {
        Api::namespaced(self.client(), self.namespace())
    }

    /// Secrets in the test's namespace.
    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client(), self.namespace())
    }

    /// The server's reference of an OIDCClient of this namespace at the default issuer.
    pub fn object_ref(&self, name: &str) -> ObjectRef {
        ObjectRef {
            issuer: ISSUER.to_owned(),
            namespace: self.namespace().to_owned(),
            name: name.to_owned(),
        }
    }

    /// A client the server holds whose last write is a person's in the dashboard
    /// (`user:alice@example.com`), and no manifest for it: declared once by a manifest deleted
    /// with `Orphan` (the Secret its secret was released into removed too), then edited with
    /// `edit`. Returns the revision the server holds.
    pub async fn dashboard_client(
        &self,
        name: &str,
        edit: impl FnOnce(&mut nauthera_proto::v1::ClientSpec),
    ) -> String {
        self.apply(&generated_client_with(name, "Orphan", "")).await;
        self.wait_reason(name, Reason::Registered).await;
        self.delete_oidc_client(name).await;
        self.wait_gone(name).await;
        self.secrets()
            .delete(name, &DeleteParams::default())
            .await
            .expect("the released Secret is removed");
        self.server
            .edit_client(&self.object_ref(name), &dashboard_person(), edit)
            .expect("the person's edit is accepted")
    }

    /// Applies YAML documents (server-side apply) into the test's namespace.
    pub async fn apply(&self, yaml: &str) {
        self.apply_in(self.namespace(), yaml).await;
    }

    /// [`Stack::apply`] into another namespace of the cluster.
    pub async fn apply_in(&self, namespace: &str, yaml: &str) {
        let objects: Vec<DynamicObject> = manifests::documents(yaml)
            .expect("the test's YAML parses")
            .into_iter()
            .map(|d| serde_json::from_value(d).expect("a Kubernetes object"))
            .collect();
        if let Err(error) = manifests::apply_all(&self.client(), &objects, Some(namespace)).await {
            panic!("cannot apply in {namespace}:\n{yaml}\n{error:#}");
        }
    }

    /// The OIDCClient, if it exists.
    pub async fn oidc_client(&self, name: &str) -> Option<OIDCClient> {
        self.oidc_clients()
            .get_opt(name)
            .await
            .expect("the API answers")
    }

    /// Waits until the OIDCClient satisfies `done`; on timeout fails with its status.
    pub async fn wait_for(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&OIDCClient) -> bool,
    ) -> OIDCClient {
        self.wait_for_kind(name, what, done).await
    }

    /// Waits until the OIDCClient's Ready reason is `reason` (for the current generation) and
    /// returns it.
    pub async fn wait_reason(&self, name: &str, reason: Reason) -> OIDCClient {
        self.wait_reason_of(name, reason).await
    }

    /// A manifest of any kind in the test's namespace, if it exists.
    pub async fn manifest<K: Declared>(&self, name: &str) -> Option<K> {
        Api::<K>::namespaced(self.client(), self.namespace())
            .get_opt(name)
            .await
            .expect("the API answers")
    }

    /// Waits until a manifest of any kind satisfies `done`; on timeout fails with its status.
    pub async fn wait_for_kind<K: Declared>(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&K) -> bool,
    ) -> K {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let current = self.manifest::<K>(name).await;
            if let Some(resource) = &current
                && done(resource)
            {
                return resource.clone();
            }
            if tokio::time::Instant::now() > deadline {
                let status = current
                    .as_ref()
                    .map(|r| serde_json::to_string_pretty(&r.declared_status()).unwrap_or_default())
                    .unwrap_or_else(|| "(the object does not exist)".to_owned());
                panic!(
                    "{} {name} is not {what} after {WAIT:?}; its status:\n{status}",
                    K::kind(&())
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until a manifest's Ready reason is `reason` (for its current generation).
    pub async fn wait_reason_of<K: Declared>(&self, name: &str, reason: Reason) -> K {
        self.wait_for_kind(name, &format!("{reason}"), |resource: &K| {
            let status = resource.declared_status();
            status.and_then(|s| s.reason) == Some(reason)
                && status.and_then(|s| s.observed_generation) == resource.meta().generation
        })
        .await
    }

    /// Waits until the OIDCClient is gone from the cluster.
    pub async fn wait_gone(&self, name: &str) {
        self.wait_gone_of::<OIDCClient>(name).await;
    }

    /// Waits until a manifest of any kind is gone from the cluster.
    pub async fn wait_gone_of<K: Declared>(&self, name: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while let Some(resource) = self.manifest::<K>(name).await {
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "{} {name} is still there after {WAIT:?}: {:?}",
                    K::kind(&()),
                    resource.declared_status()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until `check` holds; on timeout fails naming `what`, with the reconciler's log.
    pub async fn eventually(&self, what: &str, check: impl AsyncFnMut() -> bool) {
        let mut check = check;
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if check().await {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("{what}: not after {WAIT:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sets `nauthera.io/restore=true` on an OIDCClient, as a person (or the plugin) does.
    pub async fn annotate_restore(&self, name: &str) {
        self.annotate_restore_of::<OIDCClient>(name).await;
    }

    /// Sets `nauthera.io/restore=true` on a manifest of any kind.
    pub async fn annotate_restore_of<K: Declared>(&self, name: &str) {
        self.annotate_restore_as::<K>(name, "e2e-restore").await;
    }

    /// Sets `nauthera.io/restore=true` as the field manager `manager` (who asked, as the API
    /// server's managedFields record it).
    pub async fn annotate_restore_as<K: Declared>(&self, name: &str, manager: &str) {
        let patch = serde_json::json!({
            "metadata": { "annotations": { nauthera_shared::RESTORE_ANNOTATION: "true" } }
        });
        let params = PatchParams {
            field_manager: Some(manager.to_owned()),
            ..PatchParams::default()
        };
        Api::<K>::namespaced(self.client(), self.namespace())
            .patch(name, &params, &Patch::Merge(&patch))
            .await
            .expect("the annotation is set");
    }

    /// Deletes an OIDCClient (the finalizer keeps it until the reconciler lets it go).
    pub async fn delete_oidc_client(&self, name: &str) {
        self.delete_manifest::<OIDCClient>(name).await;
    }

    /// Deletes a manifest of any kind (the finalizer keeps it until the reconciler lets it go).
    pub async fn delete_manifest<K: Declared>(&self, name: &str) {
        Api::<K>::namespaced(self.client(), self.namespace())
            .delete(name, &DeleteParams::default())
            .await
            .expect("the delete is accepted");
    }

    /// A Secret of the test's namespace, if it exists.
    pub async fn secret(&self, name: &str) -> Option<Secret> {
        self.secrets().get_opt(name).await.expect("the API answers")
    }

    /// The events recorded on an object of the test's namespace, oldest first.
    pub async fn events_for(&self, kind: &str, name: &str) -> Vec<EventSeen> {
        let events: Api<Event> = Api::namespaced(self.client(), self.namespace());
        let mut listed: Vec<Event> = events
            .list(&ListParams::default())
            .await
            .expect("events are listed")
            .items
            .into_iter()
            .filter(|e| {
                e.involved_object.name.as_deref() == Some(name)
                    && e.involved_object.kind.as_deref() == Some(kind)
            })
            .collect();
        listed.sort_by_key(|e| e.metadata.resource_version.clone().unwrap_or_default());
        listed
            .into_iter()
            .map(|e| EventSeen {
                type_: e.type_.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                message: e.message.unwrap_or_default(),
            })
            .collect()
    }

    /// Waits until an event with this reason is recorded on the OIDCClient and returns it.
    pub async fn wait_event(&self, name: &str, reason: &str) -> EventSeen {
        self.wait_event_of("OIDCClient", name, reason).await
    }

    /// Waits until the resource of `kind` has an event with `reason` (events are recorded after
    /// the status a test may have waited for).
    pub async fn wait_event_of(&self, kind: &str, name: &str, reason: &str) -> EventSeen {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let events = self.events_for(kind, name).await;
            if let Some(event) = events.iter().find(|e| e.reason == reason) {
                return event.clone();
            }
            if tokio::time::Instant::now() > deadline {
                panic!("no {reason} event on {kind} {name} after {WAIT:?}; events: {events:#?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Runs `kubectl nauthera ARGS` through real kubectl, the plugin's folder first on PATH, as
    /// the administrator, in the test's namespace unless the arguments say otherwise.
    pub async fn plugin(&self, args: &[&str]) -> PluginRun {
        self.plugin_with_input(args, None).await
    }

    /// Like [`Stack::plugin`], with `input` on standard input (closed when `None`).
    pub async fn plugin_with_input(&self, args: &[&str], input: Option<&str>) -> PluginRun {
        let mut command = self.plugin_command(args);
        command.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = command.spawn().expect("kubectl runs");
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(input.as_bytes())
                .await
                .expect("stdin is written");
        }
        let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("the plugin ends within two minutes")
            .expect("the plugin's output is read");
        PluginRun {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Starts `kubectl nauthera ARGS` that runs until stopped (`status -w`): its standard
    /// output is piped, and it is killed when the child is dropped.
    pub fn plugin_spawn(&self, args: &[&str]) -> tokio::process::Child {
        let mut command = self.plugin_command(args);
        command.stdin(Stdio::null());
        command.spawn().expect("kubectl runs")
    }

    /// The plugin through real kubectl, the plugin's folder first on PATH, as the
    /// administrator, in the test's namespace unless the arguments say otherwise.
    /// Runs `kubectl ARGS` as the plugin runs (the stack's kubeconfig, the test's own HOME).
    pub async fn kubectl(&self, args: &[&str]) -> PluginRun {
        let output = self
            .kubectl_command(args)
            .stdin(Stdio::null())
            .output()
            .await
            .expect("kubectl runs");
        PluginRun {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    fn plugin_command(&self, args: &[&str]) -> tokio::process::Command {
        let mut with_verb = vec!["nauthera"];
        with_verb.extend_from_slice(args);
        self.kubectl_command(&with_verb)
    }

    fn kubectl_command(&self, args: &[&str]) -> tokio::process::Command {
        let plugin_dir = Binary::Plugin
            .path()
            .expect("the plugin builds")
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let path = format!(
            "{}:{}",
            plugin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = tokio::process::Command::new(kubectl());
        command
            .args(args)
            .arg("--kubeconfig")
            .arg(self.cluster.kubeconfig())
            .env("PATH", path)
            .env("HOME", self.home.path())
            .env("NO_COLOR", "1")
            .env("NAUTHERA_RECONCILER_NAMESPACE", self.reconciler_namespace())
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if !args.iter().any(|a| *a == "-A" || *a == "-n") {
            command.args(["-n", self.namespace()]);
        }
        command
    }

    /// Every replica's log tail, for a failure message.
    pub fn logs(&self) -> String {
        match &self.reconciler {
            Some(reconciler) => reconciler.log_tail(),
            None => "(no reconciler)".to_owned(),
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- the stack's namespace: {} (server at {})",
                self.namespace(),
                self.server.address()
            );
        }
    }
}

impl Reconciler {
    /// Waits until `/readyz` answers 200.
    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        loop {
            if let Ok((200, _)) = http_get(&self.probe_address, "/readyz").await {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "the reconciler {} is not ready after {START_TIMEOUT:?}; its log:\n{}",
                    self.identity,
                    self.log_tail()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// `/readyz`: the status code and the body.
    pub async fn readyz(&self) -> (u16, String) {
        http_get(&self.probe_address, "/readyz")
            .await
            .expect("the probe server answers")
    }

    /// Waits until `/readyz` answers `code` with a body that contains `text`.
    pub async fn wait_readyz(&self, code: u16, text: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let (status, body) = self.readyz().await;
            if status == code && body.contains(text) {
                return body;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "/readyz answers {status} {body:?}, not {code} with {text:?}, after {WAIT:?}"
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> String {
        let (status, body) = http_get(&self.metrics_address, "/metrics")
            .await
            .expect("the metrics server answers");
        assert_eq!(status, 200, "/metrics answers 200");
        body
    }

    /// The sum of a metric's series whose labels include every `labels` pair.
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_sum(&self.metrics().await, name, labels)
    }

    /// Waits until [`Reconciler::metric`] is what `expected` accepts: a reconcile records its
    /// metrics just after the status and the events a test may have waited for.
    pub async fn wait_metric(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        expected: impl Fn(f64) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let metrics = self.metrics().await;
            let value = metric_sum(&metrics, name, labels);
            if expected(value) {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("{name} {labels:?} is {value} after {WAIT:?}:\n{metrics}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The replica's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(ChildProcess::pid)
    }

    /// The whole log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Where the process's log is written (it stays after the process ends).
    pub fn log_path(&self) -> PathBuf {
        self.log.clone()
    }

    /// The last lines of the log, headed by the replica's identity.
    pub fn log_tail(&self) -> String {
        let text = self.log();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "--- reconciler {} log (last 60 lines):\n{}",
            self.identity,
            lines[lines.len().saturating_sub(60)..].join("\n")
        )
    }

    /// Stops the replica (SIGTERM, then a kill after five seconds).
    pub async fn stop(mut self) {
        if let Some(process) = self.process.take() {
            process.stop(Duration::from_secs(5)).await;
        }
    }

    /// Kills the replica at once (SIGKILL): nothing of its memory survives, nothing is released.
    pub async fn kill(mut self) {
        if let Some(process) = self.process.take() {
            process.kill().await;
        }
    }
}

impl Drop for Reconciler {
    fn drop(&mut self) {
        if std::thread::panicking() && self.process.is_some() {
            eprintln!("{}", self.log_tail());
        }
    }
}

/// The sum of the values of a metric's series (exact name, then `{`) whose labels include every
/// pair of `labels`.
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            if !(rest.is_empty() || rest.starts_with('{')) {
                return None;
            }
            labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// The hex sha-256 of a secret value, as the fake server keeps it.
pub fn sha256_hex(value: &[u8]) -> String {
    sha2::Sha256::digest(value)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A value of a Secret's data, as text.
pub fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The status of an OIDCClient, which a waited-for one has.
pub fn status_of(client: &OIDCClient) -> &ResourceStatus {
    client.status.as_ref().expect("the OIDCClient has a status")
}

/// Whether the OIDCClient is `Registered` (phase and reason) for its current generation.
pub fn is_registered(client: &OIDCClient) -> bool {
    client.status.as_ref().is_some_and(|s| {
        s.phase == Some(Phase::Registered)
            && s.reason == Some(Reason::Registered)
            && s.observed_generation == client.metadata.generation
    })
}

/// An OIDCClient `name` of the test issuer: `spec` holds its other spec lines, indented by two.
pub fn client_manifest(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata:
  name: {name}
spec:
  issuer: {ISSUER}
{spec}"
    )
}

/// A confidential OIDCClient whose secret comes from the team's Secret `secret`.
pub fn secret_ref_client(name: &str, secret: &str) -> String {
    client_manifest(
        name,
        &format!(
            "  displayName: Reports worker
  grantTypes: [client_credentials]
  responseTypes: []
  scopes: [reports.read]
  tokenEndpointAuthMethod: client_secret_post
  secret:
    secretRef:
      name: {secret}
      key: clientSecret
"
        ),
    )
}

pub fn generated_client(name: &str) -> String {
    generated_client_with(name, "Delete", "")
}

/// [`generated_client`] with a deletion policy and extra lines under `spec:` (indented by two).
pub fn generated_client_with(name: &str, deletion_policy: &str, extra_spec: &str) -> String {
    client_manifest(
        name,
        &format!(
            "  displayName: {name}
  redirectUris:
    - https://{name}.example.test/callback
  grantTypes: [authorization_code]
  responseTypes: [code]
  scopes: [openid, profile]
  tokenEndpointAuthMethod: client_secret_basic
  secret:
    generate: true
  deletionPolicy: {deletion_policy}
{extra_spec}"
        ),
    )
}

/// The RBAC of `deploy/base` as `kubectl kustomize` renders it (Namespace, ServiceAccount, Roles
/// and bindings; not the Deployment, the Service or the CRDs).
pub fn shipped_rbac() -> anyhow::Result<Vec<DynamicObject>> {
    let rendered = rendered()?;
    const KINDS: [&str; 6] = [
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ];
    rendered
        .iter()
        .filter(|o| KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
        .map(|o| serde_json::from_value(o.clone()).context("a rendered object"))
        .collect()
}

/// `deploy/base` as `kubectl kustomize` renders it, once per process.
fn rendered() -> anyhow::Result<&'static [serde_json::Value]> {
    static RENDERED: OnceLock<Result<Vec<serde_json::Value>, String>> = OnceLock::new();
    RENDERED
        .get_or_init(|| render_base().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|e| anyhow::anyhow!("{e}"))
}

fn render_base() -> anyhow::Result<Vec<serde_json::Value>> {
    crate::manifests::kustomize(&workspace_root().join("deploy/base"))
}

/// Stores the shipped Deployment in `namespace` with `replicas` and a status of `replicas` ready,
/// as the Deployment controller would report the pods these processes stand for: only for a
/// cluster where nothing runs the Deployment (the emulator, the control plane built from source).
pub async fn show_deployment_ready(
    client: &kube::Client,
    namespace: &str,
    replicas: i32,
) -> anyhow::Result<()> {
    let mut object = shipped_deployment()?;
    object.data["spec"]["replicas"] = replicas.into();
    object.metadata.namespace = Some(namespace.to_owned());
    manifests::apply_all(client, &[object], None).await?;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), namespace);
    let status = serde_json::json!({ "status": {
        "observedGeneration": 1,
        "replicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "updatedReplicas": replicas,
    }});
    deployments
        .patch_status(
            RECONCILER_ACCOUNT,
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .context("cannot set the Deployment's status")?;
    Ok(())
}

/// The Deployment of `deploy/base` as rendered.
pub fn shipped_deployment() -> anyhow::Result<DynamicObject> {
    let deployment = rendered()?
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .context("deploy/base renders no Deployment")?;
    Ok(serde_json::from_value(deployment.clone())?)
}

/// Runs kubectl as the user of `kubeconfig`, with `input` on its standard input.
pub fn kubectl_as(kubeconfig: &Path, args: &[&str], input: Option<&str>) -> PluginRun {
    let mut child = std::process::Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut stdin = child.stdin.take().expect("kubectl's standard input");
    if let Some(input) = input {
        std::io::Write::write_all(&mut stdin, input.as_bytes()).expect("kubectl reads its input");
    }
    drop(stdin);
    let output = child.wait_with_output().expect("kubectl ends");
    PluginRun {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The kubectl the tests run: the system one, else the first on PATH.
pub fn kubectl() -> PathBuf {
    let system = PathBuf::from("/usr/bin/kubectl");
    if system.exists() {
        system
    } else {
        PathBuf::from("kubectl")
    }
}

/// Writes a kubeconfig for `system:serviceaccount:nauthera-system:nauthera-reconciler`: the
/// emulator's token for it, or one from the TokenRequest API on a real cluster.
async fn write_service_account_kubeconfig(
    cluster: &TestCluster,
    path: &Path,
) -> anyhow::Result<()> {
    if let Some(emulator) = cluster.emulator() {
        let token = emulator.token_for_service_account(RECONCILER_NAMESPACE, RECONCILER_ACCOUNT);
        emulator.write_kubeconfig(path, &token, RECONCILER_NAMESPACE)?;
        return Ok(());
    }
    write_token_kubeconfig(
        &cluster.client(),
        cluster.kubeconfig(),
        cluster.reconciler_namespace(),
        path,
        3600,
    )
    .await
}

/// Asks the TokenRequest API for a token of the reconciler's ServiceAccount in `namespace` that
/// lasts `expiration_seconds`, and writes `admin_kubeconfig` with that token as its current user
/// (and that namespace) to `path`.
pub async fn write_token_kubeconfig(
    client: &kube::Client,
    admin_kubeconfig: &Path,
    namespace: &str,
    path: &Path,
    expiration_seconds: i64,
) -> anyhow::Result<()> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(expiration_seconds),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer = accounts
        .create_token_request(RECONCILER_ACCOUNT, &PostParams::default(), &request)
        .await
        .context("cannot request a token for the reconciler's ServiceAccount")?;
    let token = answer
        .status
        .context("the TokenRequest has no status")?
        .token;
    let mut kubeconfig = kube::config::Kubeconfig::read_from(admin_kubeconfig)?;
    let context_name = kubeconfig
        .current_context
        .clone()
        .context("the kubeconfig has no current context")?;
    for named in &mut kubeconfig.contexts {
        if named.name == context_name
            && let Some(context) = named.context.as_mut()
        {
            context.user = Some("nauthera-reconciler".to_owned());
            context.namespace = Some(namespace.to_owned());
        }
    }
    kubeconfig.auth_infos.push(kube::config::NamedAuthInfo {
        name: "nauthera-reconciler".to_owned(),
        auth_info: Some(kube::config::AuthInfo {
            token: Some(token.into()),
            ..kube::config::AuthInfo::default()
        }),
        other: Default::default(),
    });
    // It holds the token: readable by its owner only (mode 0600).
    crate::control_plane::real::write_private(path, &serde_json::to_string(&kubeconfig)?)
}

/// The person who edits objects in the dashboard in the tests.
pub fn dashboard_person() -> nauthera_fake_server::Actor {
    nauthera_fake_server::Actor::dashboard("alice@example.com")
}
