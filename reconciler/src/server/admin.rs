//! The AdminService at the edge: a small trait the pipeline calls ([`AdminApi`]), so that unit
//! tests can answer with plain values, and its real implementation ([`Admin`]) over the shared
//! mTLS client. Every real call is counted (`server_calls_total{method,code}`) and logged as one
//! `grpc_call` line with method, code and duration; nothing of a request or response is logged,
//! so a secret never reaches a log.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::server::namespace_map::{Incoming, Outgoing};
use futures::Stream;
use nauthera_client::causes::code_label;
use nauthera_client::{
    AdminClient, CallError, ConnectError, ConnectProblem, ConnectSettings, connection_verdict,
};
use nauthera_proto::v1;
use nauthera_shared::kinds::Kind;
use nauthera_shared::topology::NamespaceMapping;
use tokio::sync::{Mutex, Notify};

use crate::process::metrics::Metrics;

/// A stream of change events.
pub type ChangeEvents = Pin<Box<dyn Stream<Item = Result<v1::ChangeEvent, CallError>> + Send>>;

/// The AdminService calls the reconciler makes.
pub trait AdminApi: Send + Sync + 'static {
    /// Drops the connection so that the next call connects anew, reading the TLS files again.
    fn reconnect(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
    fn get_server_info(&self) -> impl Future<Output = Result<v1::ServerInfo, CallError>> + Send;
    fn get_change_hint(&self) -> impl Future<Output = Result<v1::ChangeHint, CallError>> + Send;
    fn watch_changes(
        &self,
        since: Option<v1::ChangeHint>,
    ) -> impl Future<Output = Result<ChangeEvents, CallError>> + Send;
    fn apply_client(
        &self,
        request: v1::ApplyClientRequest,
    ) -> impl Future<Output = Result<v1::ApplyClientResponse, CallError>> + Send;
    fn get_client(
        &self,
        reference: v1::ObjectRef,
    ) -> impl Future<Output = Result<v1::Client, CallError>> + Send;
    fn delete_client(
        &self,
        request: v1::DeleteClientRequest,
    ) -> impl Future<Output = Result<v1::DeleteClientResponse, CallError>> + Send;
    fn list_client_revisions(
        &self,
        request: v1::ListClientRevisionsRequest,
    ) -> impl Future<Output = Result<v1::ListClientRevisionsResponse, CallError>> + Send;
    fn list_audit_events(
        &self,
        request: v1::ListAuditEventsRequest,
    ) -> impl Future<Output = Result<v1::ListAuditEventsResponse, CallError>> + Send;

    // The other kinds' calls answer `Unimplemented` unless implemented: a test double of the
    // client calls needs none of them.
    fn apply_branding(
        &self,
        _request: v1::ApplyBrandingRequest,
    ) -> impl Future<Output = Result<v1::Branding, CallError>> + Send {
        async { Err(unimplemented(Kind::Branding.methods().apply)) }
    }
    fn get_branding(
        &self,
        _reference: v1::ObjectRef,
    ) -> impl Future<Output = Result<v1::Branding, CallError>> + Send {
        async { Err(unimplemented(Kind::Branding.methods().get)) }
    }
    fn delete_branding(
        &self,
        _request: v1::DeleteBrandingRequest,
    ) -> impl Future<Output = Result<v1::DeleteObjectResponse, CallError>> + Send {
        async { Err(unimplemented(Kind::Branding.methods().delete)) }
    }
    fn apply_identity_provider(
        &self,
        _request: v1::ApplyIdentityProviderRequest,
    ) -> impl Future<Output = Result<v1::IdentityProvider, CallError>> + Send {
        async { Err(unimplemented(Kind::IdentityProvider.methods().apply)) }
    }
    fn get_identity_provider(
        &self,
        _reference: v1::ObjectRef,
    ) -> impl Future<Output = Result<v1::IdentityProvider, CallError>> + Send {
        async { Err(unimplemented(Kind::IdentityProvider.methods().get)) }
    }
    fn delete_identity_provider(
        &self,
        _request: v1::DeleteIdentityProviderRequest,
    ) -> impl Future<Output = Result<v1::DeleteObjectResponse, CallError>> + Send {
        async { Err(unimplemented(Kind::IdentityProvider.methods().delete)) }
    }
    fn apply_organization(
        &self,
        _request: v1::ApplyOrganizationRequest,
    ) -> impl Future<Output = Result<v1::Organization, CallError>> + Send {
        async { Err(unimplemented(Kind::Organization.methods().apply)) }
    }
    fn get_organization(
        &self,
        _slug: String,
    ) -> impl Future<Output = Result<v1::Organization, CallError>> + Send {
        async { Err(unimplemented(Kind::Organization.methods().get)) }
    }
    fn delete_organization(
        &self,
        _request: v1::DeleteOrganizationRequest,
    ) -> impl Future<Output = Result<v1::DeleteObjectResponse, CallError>> + Send {
        async { Err(unimplemented(Kind::Organization.methods().delete)) }
    }
}

fn unimplemented(method: &str) -> CallError {
    CallError::Server(nauthera_client::ServerError::from_status(
        &tonic::Status::unimplemented(format!("{method} is not implemented here")),
    ))
}

/// The real AdminService. Connects on first use and again after a connection failure, reading
/// the three TLS files each time, so a renewed certificate is used without a restart.
pub struct Admin {
    settings: ConnectSettings,
    client: Mutex<Option<AdminClient>>,
    metrics: Metrics,
    /// What a check of the connection found after a bare transport failure, and when: reused
    /// for a few seconds, so an outage does not double every failed call.
    explained: Mutex<Option<(Instant, Option<ConnectError>)>>,
    /// Woken on every failed connection, so the probe looks at once instead of at its next
    /// interval and readiness follows within seconds.
    connection_failed: Arc<Notify>,
    /// How the cluster's namespaces are named on the server: applied to every request and
    /// answer here, and nowhere else.
    mapping: NamespaceMapping,
}

/// How long a connection check answers for the calls that fail after it.
const CHECK_REUSED: Duration = Duration::from_secs(5);

impl Admin {
    pub fn new(settings: ConnectSettings, metrics: Metrics) -> Admin {
        Admin {
            settings,
            client: Mutex::new(None),
            metrics,
            explained: Mutex::new(None),
            connection_failed: Arc::new(Notify::new()),
            mapping: NamespaceMapping::IDENTITY,
        }
    }

    /// This client with the cluster's namespace mapping.
    pub fn with_namespace_mapping(mut self, mapping: NamespaceMapping) -> Admin {
        self.mapping = mapping;
        self
    }

    fn outgoing<T: Outgoing>(&self, mut request: T) -> T {
        request.to_server(&self.mapping);
        request
    }

    #[allow(clippy::result_large_err)] // `CallError` is the shared client's type.
    fn incoming<T: Incoming>(&self, result: Result<T, CallError>) -> Result<T, CallError> {
        result.map(|mut answer| {
            answer.map_back(&self.mapping);
            answer
        })
    }

    /// What the probe waits on besides its interval: a call whose connection failed.
    pub fn connection_failures(&self) -> Arc<Notify> {
        self.connection_failed.clone()
    }

    /// A transport failure explained by a check of the connection: the TLS alert the server
    /// sent about the client certificate, which the failed call itself never sees.
    async fn explain(&self, error: ConnectError) -> ConnectError {
        if error.problem() != ConnectProblem::Transport {
            return error;
        }
        let mut slot = self.explained.lock().await;
        let found = match slot.as_ref() {
            Some((at, found)) if at.elapsed() < CHECK_REUSED => found.clone(),
            _ => {
                let found = connection_verdict(&self.settings).await;
                *slot = Some((Instant::now(), found.clone()));
                found
            }
        };
        found.unwrap_or(error)
    }

    /// Drops the connection, so that the next call connects anew and re-reads the files.
    pub async fn reset(&self) {
        *self.client.lock().await = None;
    }

    async fn client(&self) -> Result<AdminClient, ConnectError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref() {
            return Ok(client.clone());
        }
        // Boxed, as the other rare paths below: a future holds room for every await it can
        // reach, and each caller's future holds its callee's, so the connection's setup would
        // otherwise be carried (and copied) through every call's future.
        let client = Box::pin(AdminClient::connect(self.settings.clone())).await?;
        *slot = Some(client.clone());
        Ok(client)
    }

    async fn call<T, F, Fut>(&self, method: &'static str, call: F) -> Result<T, CallError>
    where
        F: FnOnce(AdminClient) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        let start = Instant::now();
        let result = match self.client().await {
            // The call itself boxed too: one allocation against copying its few kilobytes of
            // state up through the reconcile's futures.
            Ok(client) => Box::pin(call(client)).await,
            Err(error) => Err(CallError::Connect(error)),
        };
        let result = match result {
            Err(CallError::Connect(error)) => {
                self.connection_failed.notify_one();
                Err(CallError::Connect(Box::pin(self.explain(error)).await))
            }
            other => other,
        };
        let code = call_code(&result);
        self.metrics.server_call(method, code);
        let duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        match &result {
            Ok(_) => tracing::info!(method, code, duration_ms, "grpc_call"),
            Err(CallError::Server(error)) => tracing::info!(
                method,
                code,
                duration_ms,
                reason = error.reason.map(|r| r.as_str()),
                "grpc_call"
            ),
            Err(CallError::Connect(error)) => {
                tracing::info!(method, code, duration_ms, error = %error, "grpc_call");
            }
        }
        if matches!(result, Err(CallError::Connect(_))) {
            self.reset().await;
        }
        result
    }
}

/// The `code` label of a call's outcome; a connection that could not be made counts as
/// `Unavailable`, the code gRPC gives it.
fn call_code<T>(result: &Result<T, CallError>) -> &'static str {
    match result {
        Ok(_) => code_label(tonic::Code::Ok),
        Err(CallError::Server(error)) => code_label(error.code),
        Err(CallError::Connect(_)) => code_label(tonic::Code::Unavailable),
    }
}

/// The calls that name objects: each sends its argument with the namespaces mapped out and maps
/// them back into the answer. One row per call: its method, argument, answer and wire name.
macro_rules! mapped_calls {
    ($( $method:ident($argument:ident: $request:ty) -> $answer:ty = $wire:expr; )+) => {
        $(
            async fn $method(&self, $argument: $request) -> Result<$answer, CallError> {
                let $argument = self.outgoing($argument);
                let answer = self
                    .call($wire, |c| async move { c.$method($argument).await })
                    .await;
                self.incoming(answer)
            }
        )+
    };
}

impl AdminApi for Admin {
    mapped_calls! {
        apply_client(request: v1::ApplyClientRequest) -> v1::ApplyClientResponse
            = Kind::OidcClient.methods().apply;
        get_client(reference: v1::ObjectRef) -> v1::Client
            = Kind::OidcClient.methods().get;
        delete_client(request: v1::DeleteClientRequest) -> v1::DeleteClientResponse
            = Kind::OidcClient.methods().delete;
        list_client_revisions(request: v1::ListClientRevisionsRequest)
            -> v1::ListClientRevisionsResponse
            = "ListClientRevisions";
        apply_branding(request: v1::ApplyBrandingRequest) -> v1::Branding
            = Kind::Branding.methods().apply;
        get_branding(reference: v1::ObjectRef) -> v1::Branding
            = Kind::Branding.methods().get;
        delete_branding(request: v1::DeleteBrandingRequest) -> v1::DeleteObjectResponse
            = Kind::Branding.methods().delete;
        apply_identity_provider(request: v1::ApplyIdentityProviderRequest)
            -> v1::IdentityProvider
            = Kind::IdentityProvider.methods().apply;
        get_identity_provider(reference: v1::ObjectRef) -> v1::IdentityProvider
            = Kind::IdentityProvider.methods().get;
        delete_identity_provider(request: v1::DeleteIdentityProviderRequest)
            -> v1::DeleteObjectResponse
            = Kind::IdentityProvider.methods().delete;
        apply_organization(request: v1::ApplyOrganizationRequest) -> v1::Organization
            = Kind::Organization.methods().apply;
        delete_organization(request: v1::DeleteOrganizationRequest) -> v1::DeleteObjectResponse
            = Kind::Organization.methods().delete;
    }
    async fn reconnect(&self) {
        self.reset().await;
    }

    async fn get_server_info(&self) -> Result<v1::ServerInfo, CallError> {
        self.call(
            "GetServerInfo",
            |c| async move { c.get_server_info().await },
        )
        .await
    }

    async fn get_change_hint(&self) -> Result<v1::ChangeHint, CallError> {
        self.call(
            "GetChangeHint",
            |c| async move { c.get_change_hint().await },
        )
        .await
    }

    async fn watch_changes(
        &self,
        since: Option<v1::ChangeHint>,
    ) -> Result<ChangeEvents, CallError> {
        let stream = self
            .call(
                "WatchChanges",
                |c| async move { c.watch_changes(since).await },
            )
            .await?;
        let mapping = self.mapping.clone();
        let events = futures::stream::unfold(stream, move |mut stream| {
            let mapping = mapping.clone();
            async move {
                match stream.next().await {
                    Ok(Some(mut event)) => {
                        event.map_back(&mapping);
                        Some((Ok(event), stream))
                    }
                    Ok(None) => None,
                    Err(error) => Some((Err(error), stream)),
                }
            }
        });
        Ok(Box::pin(events))
    }

    async fn list_audit_events(
        &self,
        request: v1::ListAuditEventsRequest,
    ) -> Result<v1::ListAuditEventsResponse, CallError> {
        let answer = self
            .call("ListAuditEvents", |c| async move {
                c.list_audit_events(request).await
            })
            .await;
        self.incoming(answer)
    }

    async fn get_organization(&self, slug: String) -> Result<v1::Organization, CallError> {
        let answer = self
            .call(Kind::Organization.methods().get, |c| async move {
                c.get_organization(&slug).await
            })
            .await;
        self.incoming(answer)
    }
}
