//! The AdminService over the core: identity from the client certificate, then the test controls
//! (a hang, latency, `Unimplemented`, faults) before the call takes effect, then the call's rules.

use std::sync::{Arc, Mutex, MutexGuard};

use nauthera_client::certificate_identities;
use nauthera_proto::v1::admin_service_server::AdminService;
use nauthera_proto::v1::{self, ChangeEvent};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::controls::{Controls, FaultCode, Injected, Stage};
use crate::core::{Applied, Caller, Core, Listed, Target};
use crate::kinds::{
    StoredBranding, StoredClient, StoredIdentityProvider, StoredKind, StoredOrganization,
};
use crate::method::Method;
use crate::refusal::Refusal;
use crate::state::random_unit;

mod feed;

/// What the service and the handle share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub core: Mutex<Core>,
    pub controls: Mutex<Controls>,
    /// Bumped when the server stops listening, so open streams end.
    pub stopped: watch::Sender<u64>,
    /// Until when the server is hung (`None`: it is not). Calls and open streams wait on it; a
    /// change wakes them, so a hang ended early releases them at once.
    pub hung: watch::Sender<Option<Instant>>,
    /// The code of the last `break_streams` (`None` before any); each change ends every stream
    /// open at that moment.
    pub breaks: watch::Sender<Option<FaultCode>>,
}

impl Shared {
    pub fn core(&self) -> MutexGuard<'_, Core> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.core
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn controls(&self) -> MutexGuard<'_, Controls> {
        self.controls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Returns once the server is not hung: at once when it is not, else when the hang's time is
    /// up or it is ended or moved. No polling: it sleeps to the hang's end and wakes on a change.
    pub async fn while_hung(&self) {
        let mut hung = self.hung.subscribe();
        loop {
            let Some(until) = *hung.borrow_and_update() else {
                return;
            };
            if Instant::now() >= until {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(until) => {}
                changed = hung.changed() => if changed.is_err() {
                    return;
                },
            }
        }
    }

    /// The optional features this server offers: those none of whose methods was made
    /// `Unimplemented`, each once.
    pub fn features(&self) -> Vec<String> {
        let controls = self.controls();
        let missing: Vec<&str> = controls
            .unimplemented
            .iter()
            .filter_map(|method| method.feature())
            .collect();
        let mut features: Vec<String> = Vec::new();
        for feature in Method::ALL.into_iter().filter_map(Method::feature) {
            if !missing.contains(&feature) && !features.iter().any(|known| known == feature) {
                features.push(feature.to_owned());
            }
        }
        features
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Service {
    pub shared: Arc<Shared>,
}

/// The status a fault answers with. The real server explains its rate limit; the other faults come
/// bare, the way a proxy or a crashing handler would answer.
fn fault_status(fault: Injected) -> Status {
    if fault.code == tonic::Code::ResourceExhausted {
        return Refusal::new(fault.code, v1::ErrorReason::RateLimited, fault.message).to_status();
    }
    Status::new(fault.code, fault.message)
}

impl Service {
    /// Holds a call while the server is hung. A call still held when the server stops listening
    /// fails instead, so that it does not keep the graceful shutdown waiting for the hang's end.
    async fn hold_while_hung(&self) -> Result<(), Status> {
        let mut stopped = self.shared.stopped.subscribe();
        tokio::select! {
            () = self.shared.while_hung() => Ok(()),
            _ = stopped.changed() => Err(Status::unavailable("the server stopped listening")),
        }
    }

    /// Waits out a hang, counts the call, applies latency, `Unimplemented` and faults, and finds
    /// the caller.
    async fn begin<T>(&self, method: Method, request: &Request<T>) -> Result<Caller, Status> {
        self.hold_while_hung().await?;
        let latency = {
            let mut controls = self.shared.controls();
            *controls
                .counters
                .calls
                .entry(method.as_str().to_owned())
                .or_default() += 1;
            controls.latency_of(method)
        };
        if let Some(latency) = latency {
            tokio::time::sleep(latency).await;
        }
        // A hang that began while the call was delayed holds it too: it takes effect after.
        self.hold_while_hung().await?;
        {
            let mut controls = self.shared.controls();
            if controls.unimplemented.contains(&method) {
                return Err(Status::unimplemented(format!(
                    "{method} is not implemented by this server version"
                )));
            }
            if let Some(fault) = controls.take_fault(method, random_unit(), Stage::BeforeEffect) {
                return Err(fault_status(fault));
            }
        }
        let identities = request
            .peer_certs()
            .and_then(|certs| {
                certs
                    .first()
                    .map(|cert| certificate_identities(cert.as_ref()))
            })
            .unwrap_or_default();
        let core = self.shared.core();
        Ok(Caller::from_identities(identities, &core.allowed))
    }

    fn answer<T>(&self, result: Result<T, Refusal>) -> Result<Response<T>, Status> {
        match result {
            Ok(value) => Ok(Response::new(value)),
            Err(refusal) => {
                *self
                    .shared
                    .controls()
                    .counters
                    .refusals
                    .entry(refusal.reason.as_str_name().to_owned())
                    .or_default() += 1;
                Err(refusal.to_status())
            }
        }
    }

    /// Counts a write that took effect; a lost-answer fault then answers instead of the result,
    /// as when a response is lost on its way back after the server committed the write.
    async fn answer_write<T>(
        &self,
        method: Method,
        manager: &str,
        took_effect: bool,
        result: Result<T, Refusal>,
    ) -> Result<Response<T>, Status> {
        if took_effect {
            self.count_write(manager);
        }
        let lost = result.is_ok().then(|| {
            self.shared
                .controls()
                .take_fault(method, random_unit(), Stage::AfterEffect)
        });
        if let Some(Some(fault)) = lost {
            if let Some(delay) = fault.delay {
                tokio::time::sleep(delay).await;
            }
            return Err(Status::new(fault.code, fault.message));
        }
        self.answer(result)
    }

    /// An apply of kind `K`; `answer` makes the response of what was applied.
    async fn apply<K: StoredKind, T>(
        &self,
        request: Request<K::Apply>,
        answer: impl FnOnce(Applied<K::Message>) -> T,
    ) -> Result<Response<T>, Status> {
        let method = Method::of_kind(K::KIND.methods().apply);
        let caller = self.begin(method, &request).await?;
        let request = request.into_inner();
        let manager = K::apply_write(&request).manager;
        let result = self.shared.core().apply::<K>(&caller, request).map(answer);
        let took_effect = result.is_ok();
        self.answer_write(method, &manager, took_effect, result)
            .await
    }

    /// A get of kind `K`; `target` is what the request names.
    async fn get<K: StoredKind, R>(
        &self,
        request: Request<R>,
        target: impl FnOnce(R) -> Target,
    ) -> Result<Response<K::Message>, Status> {
        let caller = self
            .begin(Method::of_kind(K::KIND.methods().get), &request)
            .await?;
        let target = target(request.into_inner());
        let result = self.shared.core().get::<K>(&caller, &target);
        self.answer(result)
    }

    /// A delete of kind `K`; `answer` makes the response of whether there was something to
    /// delete.
    async fn delete<K: StoredKind, T>(
        &self,
        request: Request<K::Delete>,
        answer: impl FnOnce(bool) -> T,
    ) -> Result<Response<T>, Status> {
        let method = Method::of_kind(K::KIND.methods().delete);
        let caller = self.begin(method, &request).await?;
        let manager = K::delete_write(request.get_ref()).manager;
        let result = self.shared.core().delete::<K>(&caller, request.get_ref());
        let took_effect = result == Ok(true);
        self.answer_write(method, &manager, took_effect, result.map(answer))
            .await
    }

    /// A listing of kind `K`: a read, like a get, so nothing is audited.
    async fn list<K: Listed>(
        &self,
        request: Request<v1::ListObjectsRequest>,
    ) -> Result<Response<K::Page>, Status> {
        let caller = self
            .begin(Method::of_kind(K::KIND.methods().list), &request)
            .await?;
        let result = self.shared.core().list::<K>(&caller, request.get_ref());
        self.answer(result)
    }

    fn count_write(&self, manager: &str) {
        *self
            .shared
            .controls()
            .counters
            .writes
            .entry(manager.to_owned())
            .or_default() += 1;
    }
}

fn deleted_object(deleted: bool) -> v1::DeleteObjectResponse {
    v1::DeleteObjectResponse { deleted }
}

/// What a get of an object names: its reference.
fn object(reference: Option<v1::ObjectRef>) -> Target {
    Target::Object(reference.unwrap_or_default())
}

type ChangeStream = ReceiverStream<Result<ChangeEvent, Status>>;

#[tonic::async_trait]
impl AdminService for Service {
    async fn get_server_info(
        &self,
        request: Request<v1::GetServerInfoRequest>,
    ) -> Result<Response<v1::ServerInfo>, Status> {
        let caller = self.begin(Method::GetServerInfo, &request).await?;
        let features = self.shared.features();
        let result = self.shared.core().server_info(&caller, features);
        self.answer(result)
    }

    async fn get_change_hint(
        &self,
        request: Request<v1::GetChangeHintRequest>,
    ) -> Result<Response<v1::ChangeHint>, Status> {
        let caller = self.begin(Method::GetChangeHint, &request).await?;
        let result = self.shared.core().change_hint(&caller);
        self.answer(result)
    }

    type WatchChangesStream = ChangeStream;

    async fn watch_changes(
        &self,
        request: Request<v1::WatchChangesRequest>,
    ) -> Result<Response<ChangeStream>, Status> {
        let caller = self.begin(Method::WatchChanges, &request).await?;
        let since = request.into_inner().since;
        let watched = self.shared.core().watch(&caller, since.as_ref());
        let (first, changes) = match watched {
            Ok(watched) => watched,
            Err(refusal) => return self.answer(Err(refusal)),
        };
        let (sender, receiver) = mpsc::channel(64);
        let feed = feed::Feed::new(Arc::clone(&self.shared), sender);
        tokio::spawn(feed.run(first, changes));
        Ok(Response::new(ReceiverStream::new(receiver)))
    }

    async fn apply_client(
        &self,
        request: Request<v1::ApplyClientRequest>,
    ) -> Result<Response<v1::ApplyClientResponse>, Status> {
        self.apply::<StoredClient, _>(request, |applied| v1::ApplyClientResponse {
            client: Some(applied.message),
            created: applied.created,
            secret: applied.secret,
        })
        .await
    }

    async fn get_client(
        &self,
        request: Request<v1::GetClientRequest>,
    ) -> Result<Response<v1::Client>, Status> {
        self.get::<StoredClient, _>(request, |r| object(r.r#ref))
            .await
    }

    async fn delete_client(
        &self,
        request: Request<v1::DeleteClientRequest>,
    ) -> Result<Response<v1::DeleteClientResponse>, Status> {
        self.delete::<StoredClient, _>(request, |deleted| v1::DeleteClientResponse { deleted })
            .await
    }

    async fn list_client_revisions(
        &self,
        request: Request<v1::ListClientRevisionsRequest>,
    ) -> Result<Response<v1::ListClientRevisionsResponse>, Status> {
        let caller = self.begin(Method::ListClientRevisions, &request).await?;
        let result = self
            .shared
            .core()
            .list_client_revisions(&caller, request.get_ref());
        self.answer(result)
    }

    async fn apply_branding(
        &self,
        request: Request<v1::ApplyBrandingRequest>,
    ) -> Result<Response<v1::Branding>, Status> {
        self.apply::<StoredBranding, _>(request, |applied| applied.message)
            .await
    }

    async fn get_branding(
        &self,
        request: Request<v1::GetBrandingRequest>,
    ) -> Result<Response<v1::Branding>, Status> {
        self.get::<StoredBranding, _>(request, |r| object(r.r#ref))
            .await
    }

    async fn delete_branding(
        &self,
        request: Request<v1::DeleteBrandingRequest>,
    ) -> Result<Response<v1::DeleteObjectResponse>, Status> {
        self.delete::<StoredBranding, _>(request, deleted_object)
            .await
    }

    async fn apply_identity_provider(
        &self,
        request: Request<v1::ApplyIdentityProviderRequest>,
    ) -> Result<Response<v1::IdentityProvider>, Status> {
        self.apply::<StoredIdentityProvider, _>(request, |applied| applied.message)
            .await
    }

    async fn get_identity_provider(
        &self,
        request: Request<v1::GetIdentityProviderRequest>,
    ) -> Result<Response<v1::IdentityProvider>, Status> {
        self.get::<StoredIdentityProvider, _>(request, |r| object(r.r#ref))
            .await
    }

    async fn delete_identity_provider(
        &self,
        request: Request<v1::DeleteIdentityProviderRequest>,
    ) -> Result<Response<v1::DeleteObjectResponse>, Status> {
        self.delete::<StoredIdentityProvider, _>(request, deleted_object)
            .await
    }

    async fn apply_organization(
        &self,
        request: Request<v1::ApplyOrganizationRequest>,
    ) -> Result<Response<v1::Organization>, Status> {
        self.apply::<StoredOrganization, _>(request, |applied| applied.message)
            .await
    }

    async fn get_organization(
        &self,
        request: Request<v1::GetOrganizationRequest>,
    ) -> Result<Response<v1::Organization>, Status> {
        self.get::<StoredOrganization, _>(request, |r| Target::organization(&r.slug, ""))
            .await
    }

    async fn delete_organization(
        &self,
        request: Request<v1::DeleteOrganizationRequest>,
    ) -> Result<Response<v1::DeleteObjectResponse>, Status> {
        self.delete::<StoredOrganization, _>(request, deleted_object)
            .await
    }

    async fn list_audit_events(
        &self,
        request: Request<v1::ListAuditEventsRequest>,
    ) -> Result<Response<v1::ListAuditEventsResponse>, Status> {
        let caller = self.begin(Method::ListAuditEvents, &request).await?;
        let result = self
            .shared
            .core()
            .list_audit_events(&caller, request.get_ref());
        self.answer(result)
    }

    async fn list_clients(
        &self,
        request: Request<v1::ListObjectsRequest>,
    ) -> Result<Response<v1::ListClientsResponse>, Status> {
        self.list::<StoredClient>(request).await
    }

    async fn list_brandings(
        &self,
        request: Request<v1::ListObjectsRequest>,
    ) -> Result<Response<v1::ListBrandingsResponse>, Status> {
        self.list::<StoredBranding>(request).await
    }

    async fn list_identity_providers(
        &self,
        request: Request<v1::ListObjectsRequest>,
    ) -> Result<Response<v1::ListIdentityProvidersResponse>, Status> {
        self.list::<StoredIdentityProvider>(request).await
    }

    async fn list_organizations(
        &self,
        request: Request<v1::ListObjectsRequest>,
    ) -> Result<Response<v1::ListOrganizationsResponse>, Status> {
        self.list::<StoredOrganization>(request).await
    }
}
