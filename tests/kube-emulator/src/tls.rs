//! TLS for the emulator: a CA and a serving certificate for 127.0.0.1 made at start, and a
//! listener that hands axum finished TLS connections. (kubectl sends bearer tokens only over
//! TLS, so the emulator serves HTTPS and puts its CA in the kubeconfigs it writes.)

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Why certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot generate the emulator's certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot configure TLS: {0}")]
    Configure(#[from] rustls::Error),
}

/// The CA clients trust and the server configuration that presents a certificate it signed.
pub struct ServingTls {
    pub ca_pem: String,
    pub config: Arc<rustls::ServerConfig>,
}

pub fn generate() -> Result<ServingTls, TlsError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "nauthera-kube-emulator CA");
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);

    let mut leaf_params = CertificateParams::new(vec!["localhost".to_owned()])?;
    leaf_params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "nauthera-kube-emulator");
    let leaf_key = KeyPair::generate()?;
    let leaf_cert = leaf_params.signed_by(&leaf_key, &issuer)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf_cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(ServingTls {
        ca_pem: ca_cert.pem(),
        config: Arc::new(config),
    })
}

/// Accepts TCP connections and completes TLS handshakes in the background, so one slow
/// client never holds up the others.
pub struct TlsListener {
    connections: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, connections) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = tx.closed() => return,
                };
                let (tcp, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::debug!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                if tx.is_closed() {
                    return;
                }
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let handshake =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await;
                    if let Ok(Ok(stream)) = handshake {
                        let _ = tx.send((stream, peer)).await;
                    }
                });
            }
        });
        Ok(Self { connections, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.connections.recv().await {
            Some(connection) => connection,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
