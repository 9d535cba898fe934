//! A Kubernetes API emulator on loopback: the project's envtest.
//!
//! [`Emulator::start`] serves the Kubernetes REST API over HTTPS on 127.0.0.1 (a CA made at
//! start; kubectl sends bearer tokens only over TLS) with discovery, OpenAPI v3, CustomResourceDefinitions
//! with structural schemas, CRUD, merge / JSON / server-side apply patches, watches with
//! bookmarks and 410 Gone, finalizers, garbage collection and RBAC. See the README for what is
//! and is not implemented.

mod admission;
mod admission_policy;
mod authz;
mod cel;
mod cel_cost;
mod discovery;
mod event_validation;
mod events;
mod gc;
mod ids;
pub mod kubeconfig;
mod managed_fields;
mod objects;
mod protobuf;
mod re2;
mod registry;
mod requests;
mod schema;
mod selector;
mod server;
mod status;
mod store;
mod strategic;
mod table;
mod tls;
mod validation_rules;
mod watch;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::json;
use tokio::task::JoinHandle;

pub use authz::UserInfo;
pub use requests::RequestKey;
pub use status::ApiError;

use crate::admission::FieldValidation;
use crate::authz::Tokens;
use crate::objects::WriteContext;
use crate::registry::ResourceKey;
use crate::server::AppState;
use crate::store::Store;

/// Why the emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot seed the built-in objects: {0}")]
    Seed(#[source] ApiError),
}

/// Settings of an emulator; `Options::default()` suits tests.
#[derive(Debug, Clone)]
pub struct Options {
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// The port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// How often admission policies and bindings are loaded into force after they change: the
    /// API server's refresh period (one second), so a new policy is enforced a moment after it
    /// is written, not at once.
    pub policy_refresh_interval: Duration,
    /// Log files served as pods' logs (`pods/<name>/log`), by (namespace, pod name). Nothing
    /// runs pods here: whoever starts the emulator says which file stands for which pod.
    pub pod_logs: BTreeMap<(String, String), PathBuf>,
    /// Compacts the history after serving each page of a list that has more to come, as if
    /// every paged listing were slower than the server's compaction: each later page then meets
    /// `410 Expired`, as it does when a client pages through more than a busy cluster keeps.
    pub compact_between_pages: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(1),
            port: 0,
            policy_refresh_interval: Duration::from_secs(1),
            pod_logs: BTreeMap::new(),
            compact_between_pages: false,
        }
    }
}

/// The superuser's name; it is in `system:masters`, which RBAC always allows.
pub const SUPERUSER: &str = "emulator-admin";

/// A running emulator. Dropping it stops the server.
pub struct Emulator {
    state: Arc<AppState>,
    address: SocketAddr,
    ca_pem: String,
    superuser_token: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    collector: JoinHandle<()>,
    policies: JoinHandle<()>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Emulator {
    /// Starts an emulator on a free port of 127.0.0.1.
    pub async fn start() -> Result<Self, StartError> {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Result<Self, StartError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port))
            .await
            .map_err(StartError::Bind)?;
        let address = listener.local_addr().map_err(StartError::Bind)?;
        let tls = tls::generate()?;
        let listener = tls::TlsListener::new(listener, tls.config).map_err(StartError::Bind)?;
        let store = Arc::new(Mutex::new(Store::default()));
        let superuser_token = ids::new_token();
        let mut tokens = Tokens::default();
        tokens.insert(
            superuser_token.clone(),
            UserInfo::user(SUPERUSER, &["system:masters"]),
        );
        let (compactions, _) = tokio::sync::watch::channel(0);
        let state = Arc::new(AppState {
            store: store.clone(),
            tokens: RwLock::new(tokens),
            compactions,
            bookmark_interval: options.bookmark_interval,
            address: address.to_string(),
            requests: Default::default(),
            pod_logs: options.pod_logs,
            compact_between_pages: options.compact_between_pages,
        });
        seed(&state).map_err(StartError::Seed)?;
        let policies = tokio::spawn(admission_policy::loader::run(
            store.clone(),
            options.policy_refresh_interval,
        ));
        let collector = tokio::spawn(gc::run(store));
        let router = axum::Router::new()
            .fallback(server::handle)
            .with_state(state.clone());
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serve = axum::serve(listener, router).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(error) = serve.await {
                tracing::error!(%error, "the emulator's server stopped");
            }
        });
        Ok(Self {
            state,
            address,
            ca_pem: tls.ca_pem,
            superuser_token,
            shutdown: Some(shutdown),
            server: Some(server),
            collector,
            policies,
        })
    }

    /// `https://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("https://{}", self.address)
    }

    /// The PEM of the CA that signed the serving certificate (also in written kubeconfigs).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// A token for the superuser (`system:masters`), for test setup.
    pub fn superuser_token(&self) -> &str {
        &self.superuser_token
    }

    /// Mints a token for `system:serviceaccount:<namespace>:<name>`.
    pub fn token_for_service_account(&self, namespace: &str, name: &str) -> String {
        self.mint(UserInfo::service_account(namespace, name))
    }

    /// Mints a token for a user in groups (`system:authenticated` is always added).
    pub fn token_for_user(&self, name: &str, groups: &[&str]) -> String {
        self.mint(UserInfo::user(name, groups))
    }

    fn mint(&self, user: UserInfo) -> String {
        let token = ids::new_token();
        if let Ok(mut tokens) = self.state.tokens.write() {
            tokens.insert(token.clone(), user);
        }
        token
    }

    /// Writes a kubeconfig for a token with a default namespace (file mode 0600).
    pub fn write_kubeconfig(
        &self,
        path: impl AsRef<Path>,
        token: &str,
        namespace: &str,
    ) -> std::io::Result<()> {
        kubeconfig::write(
            path.as_ref(),
            &self.base_url(),
            &self.ca_pem,
            token,
            namespace,
        )
    }

    /// The kubeconfig text for a token and namespace.
    pub fn kubeconfig(&self, token: &str, namespace: &str) -> String {
        kubeconfig::render(&self.base_url(), &self.ca_pem, token, namespace)
    }

    /// Forgets the change history and closes every open watch: watchers resuming from any
    /// resourceVersion handed out before get `410 Gone` and must list again. Returns the
    /// first resourceVersion still valid.
    pub fn compact_history(&self) -> u64 {
        self.state.compact().unwrap_or_default()
    }

    /// How many resource requests were served so far, by user, verb and resource (discovery,
    /// OpenAPI and health requests are not counted).
    pub fn request_counts(&self) -> std::collections::BTreeMap<RequestKey, u64> {
        self.state.requests.snapshot()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.lock().map(|s| s.revision()).unwrap_or_default()
    }

    /// Stops serving and waits for the server to finish.
    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }

    fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        // Open watches would hold graceful shutdown; end them.
        self.state.compactions.send_modify(|n| *n += 1);
        self.collector.abort();
        self.policies.abort();
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The namespaces and RBAC objects every cluster starts with.
fn seed(state: &AppState) -> Result<(), ApiError> {
    let mut store = state.lock()?;
    let context = WriteContext {
        manager: "nauthera-kube-emulator".into(),
        dry_run: false,
        force: false,
        validation: FieldValidation::Ignore,
        group: String::new(),
        version: "v1".into(),
        requester: None,
    };
    let info = |group: &str, plural: &str, store: &Store| {
        store
            .registry
            .get(&ResourceKey {
                group: group.into(),
                plural: plural.into(),
            })
            .cloned()
    };
    let missing = || ApiError::internal("a built-in kind is missing from the registry");
    let namespaces = info("", "namespaces", &store).ok_or_else(missing)?;
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        objects::create(
            &mut *store,
            &namespaces,
            "",
            json!({"metadata": {"name": name}}),
            &context,
        )?;
    }
    let rbac = "rbac.authorization.k8s.io";
    let cluster_roles = info(rbac, "clusterroles", &store).ok_or_else(missing)?;
    let all = json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]);
    objects::create(
        &mut *store,
        &cluster_roles,
        "",
        json!({"metadata": {"name": "cluster-admin"}, "rules": all}),
        &context,
    )?;
    let bindings = info(rbac, "clusterrolebindings", &store).ok_or_else(missing)?;
    let binding = json!({
        "metadata": {"name": "cluster-admin"},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": rbac, "kind": "Group", "name": "system:masters"}]
    });
    objects::create(&mut *store, &bindings, "", binding, &context)?;
    Ok(())
}
