//! The running fake: a TLS listener on loopback that admits only client certificates from the
//! trusted CAs, the AdminService behind it, and the handle tests drive it with.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nauthera_client::wire::KindWire;
use nauthera_proto::v1::admin_service_server::AdminServiceServer;
use nauthera_proto::v1::{self, ObjectKind, ObjectRef};
use nauthera_shared::grants::GrantEntry;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

mod held;
pub use held::HeldObject;

use crate::config::FakeServerConfig;

/// The hash of one secret the server holds; never the secret.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SecretHash {
    /// `client` or `identity_provider`.
    pub kind: &'static str,
    pub issuer: String,
    pub namespace: String,
    pub name: String,
    pub sha256: String,
}
use crate::controls::{Controls, Counters, Fault, FaultCode};
use crate::core::{Actor, Core, Target};
use crate::kinds::{
    StoredBranding, StoredClient, StoredIdentityProvider, StoredKind, StoredOrganization,
};
use crate::method::Method;
use crate::pki::ServerTls;
use crate::service::{Service, Shared};
use crate::state::{Backup, organization_ref};

/// The fake could not start or listen again.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("the server's TLS material is not usable: {0}")]
    Tls(String),
}

/// A test control could not act.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("the server holds no {0}")]
    NotFound(String),
}

struct Running {
    shutdown: oneshot::Sender<()>,
    server: JoinHandle<()>,
    accept: JoinHandle<()>,
}

/// A running fake nauthera-server and its test controls.
pub struct FakeServer {
    shared: Arc<Shared>,
    address: SocketAddr,
    tls: Mutex<ServerTls>,
    running: tokio::sync::Mutex<Option<Running>>,
}

impl std::fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeServer")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Actor {
    /// A person editing through the dashboard: actor `user:<email>`, no manager.
    pub fn dashboard(user: &str) -> Actor {
        Actor {
            actor: format!("user:{user}"),
            cause: String::new(),
        }
    }

    /// The same actor with a cause for the audit log.
    pub fn because(mut self, cause: &str) -> Actor {
        self.cause = cause.to_owned();
        self
    }
}

fn not_found(kind: ObjectKind, reference: &ObjectRef) -> ControlError {
    ControlError::NotFound(format!(
        "{kind:?} {}/{}",
        reference.namespace, reference.name
    ))
}

fn acceptor(tls: &ServerTls) -> Result<TlsAcceptor, StartError> {
    let invalid = |what: &str| StartError::Tls(what.to_owned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = CertificateDer::pem_slice_iter(tls.cert.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid("the server certificate is not PEM"))?;
    let key = PrivateKeyDer::from_pem_slice(tls.cert.key_pem.as_bytes())
        .map_err(|_| invalid("the server key is not PEM"))?;
    let mut roots = RootCertStore::empty();
    for pem in &tls.client_ca_pems {
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|_| invalid("a client CA is not PEM"))?;
            roots
                .add(cert)
                .map_err(|error| StartError::Tls(format!("a client CA is not usable: {error}")))?;
        }
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|error| StartError::Tls(format!("no client verifier: {error}")))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| StartError::Tls(error.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|error| {
            StartError::Tls(format!("the server certificate is not usable: {error}"))
        })?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

async fn listen(
    shared: Arc<Shared>,
    address: SocketAddr,
    tls: &ServerTls,
) -> Result<(SocketAddr, Running), StartError> {
    let acceptor = acceptor(tls)?;
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| StartError::Listen { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| StartError::Listen { address, source })?;
    let (connections, incoming) = tokio::sync::mpsc::channel(16);
    let accept = tokio::spawn(async move {
        loop {
            let tcp = match listener.accept().await {
                Ok((tcp, _)) => tcp,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            // As gRPC servers do by default (tonic's own listener, grpc-go): with Nagle's
            // algorithm on, a response's last frames can wait for the client's delayed
            // acknowledgement, tens of milliseconds a call.
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::warn!(%error, "cannot turn off Nagle's algorithm on a connection");
            }
            let acceptor = acceptor.clone();
            let connections = connections.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = connections.send(Ok::<_, std::io::Error>(stream)).await;
                    }
                    Ok(Err(error)) => tracing::info!(%error, "TLS handshake refused"),
                    Err(_) => tracing::info!("TLS handshake timed out"),
                }
            });
        }
    });
    let (shutdown, shutdown_signal) = oneshot::channel::<()>();
    let service = AdminServiceServer::new(Service { shared });
    let server = tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(ReceiverStream::new(incoming), async {
                let _ = shutdown_signal.await;
            })
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the fake server stopped serving");
        }
    });
    Ok((
        bound,
        Running {
            shutdown,
            server,
            accept,
        },
    ))
}

impl FakeServer {
    /// Starts serving `config` on `config.listen` with `tls`.
    pub async fn start(
        config: &FakeServerConfig,
        tls: ServerTls,
    ) -> Result<FakeServer, StartError> {
        let (changes, _) = broadcast::channel(1024);
        let mut core = Core::new(
            config.build.clone(),
            config.allowed_clients.clone(),
            config.change_history,
            changes,
        );
        for org in &config.organizations {
            core.seed_organization(
                &org.slug,
                v1::OrganizationSpec {
                    issuer: org.issuer.clone(),
                    display_name: org.display_name.clone(),
                    branding: None,
                    fapi_mode: org.fapi_mode.to_proto() as i32,
                },
            );
        }
        let controls = Controls {
            unimplemented: config.unimplemented.iter().copied().collect(),
            ..Controls::default()
        };
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            controls: Mutex::new(controls),
            stopped: watch::Sender::new(0),
            hung: watch::Sender::new(None),
            breaks: watch::Sender::new(None),
        });
        let (address, running) = listen(Arc::clone(&shared), config.listen, &tls).await?;
        Ok(FakeServer {
            shared,
            address,
            tls: Mutex::new(tls),
            running: tokio::sync::Mutex::new(Some(running)),
        })
    }

    /// The gRPC address (`127.0.0.1:<port>`); the same across restarts.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Whether the server is listening.
    pub async fn is_listening(&self) -> bool {
        self.running.lock().await.is_some()
    }

    /// Stops listening: new connections are refused, open ones are closed, streams end. The
    /// state is kept.
    pub async fn go_unreachable(&self) {
        let Some(running) = self.running.lock().await.take() else {
            return;
        };
        running.accept.abort();
        let _ = running.accept.await;
        self.shared.stopped.send_modify(|stops| *stops += 1);
        let _ = running.shutdown.send(());
        let mut server = running.server;
        if tokio::time::timeout(Duration::from_secs(5), &mut server)
            .await
            .is_err()
        {
            server.abort();
        }
    }

    /// Stops (if listening) and listens again on the same port with the same state, reading the
    /// TLS material set by [`FakeServer::set_tls`] (the real server reads it only at start).
    pub async fn restart(&self) -> Result<(), StartError> {
        self.go_unreachable().await;
        let tls = self.lock_tls().clone();
        let (_, running) = listen(Arc::clone(&self.shared), self.address, &tls).await?;
        *self.running.lock().await = Some(running);
        Ok(())
    }

    fn lock_tls(&self) -> std::sync::MutexGuard<'_, ServerTls> {
        self.tls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Replaces the server certificate and trusted client CAs, used from the next restart.
    pub fn set_tls(&self, tls: ServerTls) {
        *self.lock_tls() = tls;
    }

    // ----- a hang and broken streams --------------------------------------------------------

    /// Stops answering for `duration` without closing connections, as a server stuck in a
    /// long pause does: every call that arrives (or is still before its effect) waits, then
    /// proceeds as usual (counted, faults applied); open streams send nothing and then every
    /// held change in order. Replaces a running hang; a zero `duration` ends it. Connections
    /// are still accepted and HTTP/2 pings still answered: only the service is stuck.
    pub fn hang_for(&self, duration: Duration) {
        let now = tokio::time::Instant::now();
        // A duration too long to add is a hang for good (until `end_hang`).
        let until = now
            .checked_add(duration)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600));
        self.shared.hung.send_replace(Some(until));
    }

    /// Ends a hang now: the calls and streams it held go on at once.
    pub fn end_hang(&self) {
        self.shared.hung.send_replace(None);
    }

    /// Whether a hang holds calls now.
    pub fn is_hung(&self) -> bool {
        self.shared
            .hung
            .borrow()
            .is_some_and(|until| tokio::time::Instant::now() < until)
    }

    /// Ends every WatchChanges stream open now with `code`, as a proxy or a restarting handler
    /// would break them; each one counts as a fault of `WatchChanges`. Streams opened later are
    /// not affected.
    pub fn break_streams(&self, code: FaultCode) {
        self.shared.breaks.send_replace(Some(code));
    }

    // ----- controls before a call takes effect ----------------------------------------------

    /// Answers calls of `method` (every method when `None`) with a fault.
    pub fn inject_fault(&self, method: Option<Method>, fault: Fault) {
        self.shared.controls().faults.insert(method, fault);
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.shared.controls().faults.clear();
    }

    /// Delays calls of `method` (every method when `None`); `None` removes the delay.
    pub fn set_latency(&self, method: Option<Method>, latency: Option<Duration>) {
        let mut controls = self.shared.controls();
        match latency {
            Some(latency) => controls.latency.insert(method, latency),
            None => controls.latency.remove(&method),
        };
    }

    /// Makes `method` answer `Unimplemented` (an older server), or implemented again.
    pub fn set_unimplemented(&self, method: Method, unimplemented: bool) {
        let mut controls = self.shared.controls();
        if unimplemented {
            controls.unimplemented.insert(method);
        } else {
            controls.unimplemented.remove(&method);
        }
    }

    /// Replaces `allowed_clients`.
    pub fn set_allowed_clients(&self, entries: Vec<GrantEntry>) {
        self.shared.core().allowed = entries;
    }

    /// The counters.
    pub fn counters(&self) -> Counters {
        self.shared.controls().counters.clone()
    }

    /// Sets every counter to zero.
    pub fn reset_counters(&self) {
        self.shared.controls().counters = Counters::default();
    }

    // ----- reading the state ----------------------------------------------------------------

    /// The current change hint.
    pub fn change_hint(&self) -> v1::ChangeHint {
        self.shared.core().history.hint()
    }

    /// A client as the server holds it.
    pub fn client(&self, reference: &ObjectRef) -> Option<v1::Client> {
        self.read::<StoredClient>(reference)
    }

    /// A branding as the server holds it.
    pub fn branding(&self, reference: &ObjectRef) -> Option<v1::Branding> {
        self.read::<StoredBranding>(reference)
    }

    /// An identity provider as the server holds it.
    pub fn identity_provider(&self, reference: &ObjectRef) -> Option<v1::IdentityProvider> {
        self.read::<StoredIdentityProvider>(reference)
    }

    /// An organization as the server holds it.
    pub fn organization(&self, slug: &str) -> Option<v1::Organization> {
        self.read::<StoredOrganization>(&organization_ref(slug))
    }

    fn read<K: StoredKind>(&self, reference: &ObjectRef) -> Option<K::Message> {
        let target = Target::named(K::KIND.object_kind(), reference);
        self.shared.core().read::<K>(&target)
    }

    /// Every audit event, oldest first.
    pub fn audit_events(&self) -> Vec<v1::AuditEvent> {
        self.shared.core().audit.events().to_vec()
    }

    /// The sha-256 (hex) of every secret the server holds (clients' and identity providers'),
    /// for checks that every delivered Secret holds the one in force.
    pub fn secret_hashes(&self) -> Vec<SecretHash> {
        let core = self.shared.core();
        // Objects are keyed by their organization's slug; the hash names the issuer it serves.
        let of = |kind: &'static str,
                  (slug, namespace, name): &(String, String, String),
                  hash: &Option<String>| {
            hash.clone().map(|sha256| SecretHash {
                kind,
                issuer: core.objects.issuer_of(slug),
                namespace: namespace.clone(),
                name: name.clone(),
                sha256,
            })
        };
        let clients = core
            .objects
            .clients
            .iter()
            .filter_map(|(key, client)| of("client", key, &client.secret_hash));
        let providers = core
            .objects
            .identity_providers
            .iter()
            .filter_map(|(key, provider)| of("identity_provider", key, &provider.secret_hash));
        clients.chain(providers).collect()
    }

    /// The sha-256 (hex) of a client's current secret, to check which secret is in force.
    pub fn client_secret_hash(&self, reference: &ObjectRef) -> Option<String> {
        let target = Target::Object(reference.clone());
        let core = self.shared.core();
        core.stored::<StoredClient>(&target)?.secret_hash.clone()
    }

    /// The sha-256 (hex) of an identity provider's upstream client secret, to check which one
    /// the server holds.
    pub fn identity_provider_secret_hash(&self, reference: &ObjectRef) -> Option<String> {
        let target = Target::Object(reference.clone());
        let core = self.shared.core();
        core.stored::<StoredIdentityProvider>(&target)?
            .secret_hash
            .clone()
    }

    // ----- out-of-band changes --------------------------------------------------------------

    /// Changes an object as a person would in the dashboard; returns the new revision.
    fn edit<K: StoredKind>(
        &self,
        reference: &ObjectRef,
        by: &Actor,
        edit: impl FnOnce(&mut K::Spec),
    ) -> Result<String, ControlError> {
        let kind = K::KIND.object_kind();
        let target = Target::named(kind, reference);
        self.shared
            .core()
            .edit_out_of_band::<K>(&target, by, edit)
            .ok_or_else(|| not_found(kind, reference))
    }

    /// Changes a client as a person would in the dashboard; returns the new revision.
    pub fn edit_client(
        &self,
        reference: &ObjectRef,
        by: &Actor,
        edit: impl FnOnce(&mut v1::ClientSpec),
    ) -> Result<String, ControlError> {
        self.edit::<StoredClient>(reference, by, edit)
    }

    /// Changes a branding as a person would in the dashboard; returns the new revision.
    pub fn edit_branding(
        &self,
        reference: &ObjectRef,
        by: &Actor,
        edit: impl FnOnce(&mut v1::BrandingDocument),
    ) -> Result<String, ControlError> {
        self.edit::<StoredBranding>(reference, by, edit)
    }

    /// Changes an identity provider as a person would in the dashboard.
    pub fn edit_identity_provider(
        &self,
        reference: &ObjectRef,
        by: &Actor,
        edit: impl FnOnce(&mut v1::IdentityProviderSpec),
    ) -> Result<String, ControlError> {
        self.edit::<StoredIdentityProvider>(reference, by, edit)
    }

    /// Changes an organization as a person would in the dashboard.
    pub fn edit_organization(
        &self,
        slug: &str,
        by: &Actor,
        edit: impl FnOnce(&mut v1::OrganizationSpec),
    ) -> Result<String, ControlError> {
        self.edit::<StoredOrganization>(&organization_ref(slug), by, edit)
    }

    /// Deletes an object as a person would in the dashboard. For an organization, `reference.name`
    /// is its slug.
    pub fn delete_object(
        &self,
        kind: ObjectKind,
        reference: &ObjectRef,
        by: &Actor,
    ) -> Result<(), ControlError> {
        let target = Target::named(kind, reference);
        let mut core = self.shared.core();
        let deleted = match kind {
            ObjectKind::Client => core.delete_out_of_band::<StoredClient>(&target, by),
            ObjectKind::Branding => core.delete_out_of_band::<StoredBranding>(&target, by),
            ObjectKind::IdentityProvider => {
                core.delete_out_of_band::<StoredIdentityProvider>(&target, by)
            }
            ObjectKind::Organization => core.delete_out_of_band::<StoredOrganization>(&target, by),
            ObjectKind::Unspecified => false,
        };
        if deleted {
            Ok(())
        } else {
            Err(not_found(kind, reference))
        }
    }

    /// Takes a backup of every object.
    pub fn backup(&self) -> Backup {
        self.shared.core().backup()
    }

    /// Restores a backup (a new epoch; many revisions move at once). Returns how many objects
    /// changed.
    pub fn restore(&self, backup: &Backup, by: &Actor) -> usize {
        self.shared.core().restore(backup, by)
    }
}
