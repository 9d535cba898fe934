//! The AdminService client: gRPC over mutual TLS with the ring provider, reading the client
//! certificate, key and CA from files on every connection attempt, with typed errors.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use nauthera_client::{AdminClient, ConnectSettings, TlsFiles};
//! let settings = ConnectSettings::new("nauthera-server.nauthera.svc:8443", TlsFiles::in_dir("/tls"));
//! let client = AdminClient::connect(settings).await?;
//! let info = client.get_server_info().await?;
//! println!("{} answered as {}", info.build, info.identity);
//! # Ok(()) }
//! ```

pub mod causes;
mod certificate;
pub mod convert;
mod error;
mod listing;
mod pem;
mod tls;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use nauthera_proto::v1::admin_service_client::AdminServiceClient;
use nauthera_proto::v1::{self};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint, Uri};

pub use certificate::{
    CertificateError, CertificateInfo, certificate_identities, certificate_info,
    read_certificate_info,
};
pub use error::{
    CallError, ConnectError, ConnectProblem, ServerError, is_retryable_code, metadata_key_name,
};
pub use listing::{LIST_OBJECTS_FEATURE, ListError, Listing, list_all};
pub use tls::TlsFiles;

/// Where the server is and how to authenticate to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectSettings {
    /// `host:port` (an `https://host:port` URL is accepted too).
    pub address: String,
    /// The name the server's certificate must carry; the address's host when `None`.
    pub server_name: Option<String>,
    pub tls: TlsFiles,
    /// How long one TCP connection and TLS handshake may take.
    pub connect_timeout: Duration,
    /// How long one call may take; unlimited when `None`.
    pub request_timeout: Option<Duration>,
}

impl ConnectSettings {
    /// Settings with a 10 s connect timeout and a 30 s request timeout.
    pub fn new(address: impl Into<String>, tls: TlsFiles) -> ConnectSettings {
        ConnectSettings {
            address: address.into(),
            server_name: None,
            tls,
            // In a cluster a connection and its handshake take milliseconds; one that takes
            // seconds is not coming, and a probe must say so within seconds.
            connect_timeout: Duration::from_secs(5),
            request_timeout: Some(Duration::from_secs(30)),
        }
    }

    /// The same settings with a TLS server name.
    pub fn with_server_name(mut self, server_name: impl Into<String>) -> ConnectSettings {
        self.server_name = Some(server_name.into());
        self
    }

    /// `host:port` without a scheme.
    fn authority(&self) -> &str {
        let address = self.address.trim_end_matches('/');
        address
            .strip_prefix("https://")
            .or_else(|| address.strip_prefix("http://"))
            .unwrap_or(address)
    }

    fn host(&self) -> &str {
        let authority = self.authority();
        if let Some(rest) = authority.strip_prefix('[') {
            return rest.split(']').next().unwrap_or(rest);
        }
        authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
    }
}

/// An AdminService client. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct AdminClient {
    inner: AdminServiceClient<Channel>,
    address: String,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminClient")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl AdminClient {
    /// Reads the TLS files and connects. Later reconnections (after the server restarts, say)
    /// read the files again, so renewed certificates are picked up without a new client.
    ///
    /// With TLS 1.3 the server checks the client certificate after the client considers the
    /// handshake done, so a rejected certificate shows on the first call, as
    /// [`CallError::Connect`] with [`ConnectError::Unreachable`].
    pub async fn connect(settings: ConnectSettings) -> Result<AdminClient, ConnectError> {
        // Check the files once up front for a precise error before any network traffic.
        settings.tls.client_config()?;
        let (endpoint, connector, address) = prepare(&settings)?;
        let channel = endpoint
            .connect_with_connector(connector.into_service())
            .await
            .map_err(|error| error::connect_error_in_chain(&error, &address))?;
        Ok(AdminClient {
            inner: AdminServiceClient::new(channel),
            address,
        })
    }

    /// A client that connects on its first call, so it can be made while the server or the
    /// files are not there yet; each call then reports what is missing as
    /// [`CallError::Connect`]. Fails only on an invalid address or server name.
    pub fn connect_lazy(settings: ConnectSettings) -> Result<AdminClient, ConnectError> {
        let (endpoint, connector, address) = prepare(&settings)?;
        let channel = endpoint.connect_with_connector_lazy(connector.into_service());
        Ok(AdminClient {
            inner: AdminServiceClient::new(channel),
            address,
        })
    }

    /// The server's `host:port`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The generated client, for calls this wrapper does not cover.
    pub fn raw(&self) -> AdminServiceClient<Channel> {
        self.inner.clone()
    }

    fn call_error(&self, status: tonic::Status) -> CallError {
        CallError::from_status(status, &self.address)
    }

    /// Streams changes after `since` (from the current hint when `None`). Errors on the stream
    /// are mapped like call errors.
    pub async fn watch_changes(
        &self,
        since: Option<v1::ChangeHint>,
    ) -> Result<ChangeStream, CallError> {
        let stream = self
            .inner
            .clone()
            .watch_changes(v1::WatchChangesRequest { since })
            .await
            .map_err(|status| self.call_error(status))?
            .into_inner();
        Ok(ChangeStream {
            inner: stream,
            address: self.address.clone(),
        })
    }
}

/// A stream of change events.
pub struct ChangeStream {
    inner: tonic::Streaming<v1::ChangeEvent>,
    address: String,
}

impl std::fmt::Debug for ChangeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeStream")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl ChangeStream {
    /// The next event; `Ok(None)` when the server ended the stream.
    pub async fn next(&mut self) -> Result<Option<v1::ChangeEvent>, CallError> {
        self.inner
            .message()
            .await
            .map_err(|status| CallError::from_status(status, &self.address))
    }
}

/// The unary calls, one row each: the method, what it takes, what it answers and the request it
/// sends (`request` itself where the caller builds it).
macro_rules! unary_calls {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $arg_ty:ty),*) -> $response:ty = $request:expr;)*) => {
        impl AdminClient {
            $(
                $(#[$doc])*
                pub async fn $name(&self, $($arg: $arg_ty),*) -> Result<$response, CallError> {
                    self.inner
                        .clone()
                        .$name($request)
                        .await
                        .map(tonic::Response::into_inner)
                        .map_err(|status| self.call_error(status))
                }
            )*
        }
    };
}

unary_calls! {
    /// Describes the server and the caller as the server sees it.
    get_server_info() -> v1::ServerInfo = v1::GetServerInfoRequest {};
    /// The current change hint.
    get_change_hint() -> v1::ChangeHint = v1::GetChangeHintRequest {};
    /// Creates or updates a client; the response holds a generated secret at most once.
    apply_client(request: v1::ApplyClientRequest) -> v1::ApplyClientResponse = request;
    /// Reads one client.
    get_client(reference: v1::ObjectRef) -> v1::Client =
        v1::GetClientRequest { r#ref: Some(reference) };
    /// Deletes a client.
    delete_client(request: v1::DeleteClientRequest) -> v1::DeleteClientResponse = request;
    /// Lists client revisions for drift checks.
    list_client_revisions(request: v1::ListClientRevisionsRequest)
        -> v1::ListClientRevisionsResponse = request;
    /// Creates or updates a branding.
    apply_branding(request: v1::ApplyBrandingRequest) -> v1::Branding = request;
    /// Reads one branding.
    get_branding(reference: v1::ObjectRef) -> v1::Branding =
        v1::GetBrandingRequest { r#ref: Some(reference) };
    /// Deletes a branding.
    delete_branding(request: v1::DeleteBrandingRequest) -> v1::DeleteObjectResponse = request;
    /// Creates or updates an identity provider.
    apply_identity_provider(request: v1::ApplyIdentityProviderRequest)
        -> v1::IdentityProvider = request;
    /// Reads one identity provider.
    get_identity_provider(reference: v1::ObjectRef) -> v1::IdentityProvider =
        v1::GetIdentityProviderRequest { r#ref: Some(reference) };
    /// Deletes an identity provider.
    delete_identity_provider(request: v1::DeleteIdentityProviderRequest)
        -> v1::DeleteObjectResponse = request;
    /// Creates or updates an organization.
    apply_organization(request: v1::ApplyOrganizationRequest) -> v1::Organization = request;
    /// Reads one organization by slug.
    get_organization(slug: &str) -> v1::Organization =
        v1::GetOrganizationRequest { slug: slug.to_owned() };
    /// Deletes an organization.
    delete_organization(request: v1::DeleteOrganizationRequest)
        -> v1::DeleteObjectResponse = request;
    /// Lists audit events, newest first.
    list_audit_events(request: v1::ListAuditEventsRequest) -> v1::ListAuditEventsResponse = request;
    /// One page of whole clients, never with a secret (feature `list_objects`; see
    /// [`list_all`] for every page).
    list_clients(request: v1::ListObjectsRequest) -> v1::ListClientsResponse = request;
    /// One page of whole brandings (feature `list_objects`).
    list_brandings(request: v1::ListObjectsRequest) -> v1::ListBrandingsResponse = request;
    /// One page of whole identity providers, never with a secret (feature `list_objects`).
    list_identity_providers(request: v1::ListObjectsRequest)
        -> v1::ListIdentityProvidersResponse = request;
    /// One page of whole organizations (feature `list_objects`).
    list_organizations(request: v1::ListObjectsRequest) -> v1::ListOrganizationsResponse = request;
}

/// What a connection the way calls make it finds, for a call that failed with a bare transport
/// error: with TLS 1.3 the server judges the client certificate after the handshake, and the
/// alert it sends reaches only the connection, not the call, which sees "connection closed".
/// Opens one connection, sends the HTTP/2 preface and reads the server's answer; returns the
/// named problem (an expired, revoked or untrusted certificate, a handshake failure), or `None`
/// when the connection works or fails only as a transport.
pub async fn connection_verdict(settings: &ConnectSettings) -> Option<ConnectError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The client preface, then an empty SETTINGS frame.
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
    let (_, connector, address) = prepare(settings).ok()?;
    let mut stream = match connector.connect().await {
        Ok(stream) => stream.into_inner(),
        Err(error) if error.problem() == ConnectProblem::Transport => return None,
        Err(error) => return Some(error),
    };
    let exchange = async {
        stream.write_all(PREFACE).await?;
        stream.flush().await?;
        let mut answer = [0u8; 64];
        stream.read(&mut answer).await
    };
    match tokio::time::timeout(settings.connect_timeout, exchange).await {
        Ok(Err(error)) => error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .map(|tls| tls::classify(tls, &address, Some(&settings.tls))),
        _ => None,
    }
}

/// HTTP/2 pings on every connection, and how long one may go unanswered.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(4);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(4);

/// The endpoint and connector of a client.
fn prepare(settings: &ConnectSettings) -> Result<(Endpoint, Connector, String), ConnectError> {
    let address = settings.authority().to_owned();
    let unreachable = |cause: String| ConnectError::Unreachable {
        address: address.clone(),
        problem: ConnectProblem::TlsHandshake,
        cause,
    };
    let server_name = settings
        .server_name
        .clone()
        .unwrap_or_else(|| settings.host().to_owned());
    let server_name = ServerName::try_from(server_name)
        .map_err(|error| unreachable(format!("invalid TLS server name: {error}")))?;
    let uri: Uri = format!("http://{address}")
        .parse()
        .map_err(|error| unreachable(format!("invalid address: {error}")))?;
    let origin: Uri = format!("https://{address}")
        .parse()
        .map_err(|error| unreachable(format!("invalid address: {error}")))?;
    // The connector does TLS itself, so the endpoint speaks plain HTTP/2 over it while requests
    // carry the https origin.
    let mut endpoint = Endpoint::from(uri)
        .origin(origin)
        .connect_timeout(settings.connect_timeout)
        .tcp_nodelay(true)
        // A connection that silently stops answering (a partition, a dead node) is found within
        // interval + timeout, also while no call is open on it.
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    if let Some(timeout) = settings.request_timeout {
        endpoint = endpoint.timeout(timeout);
    }
    let connector = Connector {
        address: address.clone(),
        server_name,
        tls: settings.tls.clone(),
        connect_timeout: settings.connect_timeout,
    };
    Ok((endpoint, connector, address))
}

/// Opens one TLS connection, reading the files again each time.
#[derive(Clone)]
struct Connector {
    address: String,
    server_name: ServerName<'static>,
    tls: TlsFiles,
    connect_timeout: Duration,
}

impl Connector {
    /// The connector as the service tonic calls for every connection attempt.
    fn into_service(
        self,
    ) -> impl tower::Service<
        Uri,
        Response = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>,
        Error = ConnectError,
        Future = impl Future<
            Output = Result<TokioIo<tokio_rustls::client::TlsStream<TcpStream>>, ConnectError>,
        > + Send,
    > + Send
    + 'static {
        tower::service_fn(move |_: Uri| {
            let connector = self.clone();
            async move { connector.connect().await }
        })
    }

    async fn connect(
        &self,
    ) -> Result<TokioIo<tokio_rustls::client::TlsStream<TcpStream>>, ConnectError> {
        let config = self.tls.client_config()?;
        let unreachable = |problem: ConnectProblem, cause: String| ConnectError::Unreachable {
            address: self.address.clone(),
            problem,
            cause,
        };
        let handshake = async {
            let tcp = TcpStream::connect(self.address.as_str())
                .await
                .map_err(|error| {
                    unreachable(
                        ConnectProblem::Transport,
                        format!("connection failed: {error}"),
                    )
                })?;
            tcp.set_nodelay(true).map_err(|error| {
                unreachable(
                    ConnectProblem::Transport,
                    format!("connection failed: {error}"),
                )
            })?;
            TlsConnector::from(Arc::new(config))
                .connect(self.server_name.clone(), tcp)
                .await
                .map_err(|error| {
                    match error
                        .get_ref()
                        .and_then(|e| e.downcast_ref::<rustls::Error>())
                    {
                        Some(tls) => tls::classify(tls, &self.address, Some(&self.tls)),
                        None => unreachable(
                            ConnectProblem::Transport,
                            format!("TLS handshake failed: {error}"),
                        ),
                    }
                })
        };
        let stream = tokio::time::timeout(self.connect_timeout, handshake)
            .await
            .map_err(|_| {
                unreachable(
                    ConnectProblem::Transport,
                    format!("no connection within {:?}", self.connect_timeout),
                )
            })??;
        Ok(TokioIo::new(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_taken_from_the_address() {
        let tls = TlsFiles::in_dir("/tls");
        let host = |address: &str| ConnectSettings::new(address, tls.clone()).host().to_owned();
        assert_eq!(host("127.0.0.1:8443"), "127.0.0.1");
        assert_eq!(host("https://server.example:8443/"), "server.example");
        assert_eq!(host("[::1]:8443"), "::1");
    }

    #[test]
    fn tls_files_in_a_folder_use_the_secret_names() {
        let files = TlsFiles::in_dir("/etc/nauthera/tls");
        assert!(files.cert.ends_with("tls.crt"));
        assert!(files.key.ends_with("tls.key"));
        assert!(files.ca.ends_with("ca.crt"));
    }

    #[tokio::test]
    async fn missing_files_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let settings = ConnectSettings::new("127.0.0.1:1", TlsFiles::in_dir(dir.path()));
        let error = AdminClient::connect(settings).await.unwrap_err();
        assert!(
            matches!(error, ConnectError::CredentialUnavailable { ref path, .. } if path.ends_with("tls.crt")),
            "{error}"
        );
    }
}
