//! The controllers, one per kind and scope (every namespace, or each configured one). Each is fed
//! by its manifests' watch cache, by the server changes routed to it, by the Secrets it delivers
//! (kinds that deliver one) and by changes to the Secrets its manifests reference. A resource
//! outside the shard's scope (a namespace its selector does not select) is left untouched.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context as TaskContext, Poll};

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use nauthera_client::wire::KindWire;
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::kinds::Kind;
use nauthera_shared::resources::ResourceStatus;
use tokio::sync::{broadcast, mpsc};
use tokio::task::{AbortHandle, JoinError, JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_stream::wrappers::{BroadcastStream, ReceiverStream};

use crate::kubernetes::caches::{SecretReferences, SecretSummaries};
use crate::kubernetes::kube_io::{self, MANAGED_BY, MANAGED_BY_LABEL};
use crate::process::admission::{ADMITTED_PER_WORKER, Admission};
use crate::process::echoes::{Arrival, ECHO_WINDOW, Held};
use crate::process::shard::ShardScope;
use crate::process::work_queue::{self, Action, Request};
use crate::reconcile::context::{Context, ReconcileError};
use crate::reconcile::decide::Manifest;
use crate::reconcile::managed::Managed;
use crate::reconcile::pipeline;
use crate::reconcile::policies::{CountedClient, Policies};
use crate::reconcile::prerequisites::Prerequisites;
use crate::server::admin::AdminApi;
use crate::server::changes::{Route, StartGate};
use nauthera_shared::guard::Guarded;

/// A watch stream of the Secrets this reconciler delivered, for the controller that owns them.
pub type DeliveredStream = BoxStream<'static, Result<Secret, watcher::Error>>;

/// What every controller is wired to.
#[derive(Clone)]
pub struct Wiring {
    pub client: Client,
    pub routes: broadcast::Sender<Route>,
    pub references: Arc<SecretReferences>,
    pub prerequisites: Arc<Prerequisites>,
    pub gate: Arc<StartGate>,
    pub policies: Arc<Policies>,
    /// The kinds and namespaces this reconciler reconciles.
    pub shard: Arc<ShardScope>,
    pub concurrency: u16,
}

fn api_in<K>(client: &Client, scope: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match scope {
        None => Api::all(client.clone()),
        Some(namespace) => Api::namespaced(client.clone(), namespace),
    }
}

/// The delivered Secrets of one scope, by their label: a cache reconciles read (a summary of
/// each, see [`SecretSummary`](crate::kubernetes::caches::SecretSummary)), and a stream that triggers the
/// owner when one is changed, deleted or emptied.
pub fn delivered_secrets(
    client: &Client,
    scope: Option<&str>,
    routes: broadcast::Sender<Route>,
) -> (Arc<SecretSummaries>, DeliveredStream) {
    let label = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    let summaries = Arc::new(SecretSummaries::default());
    let cache = summaries.clone();
    let stream = watcher(
        api_in(client, scope),
        watcher::Config::default().labels(&label),
    )
    .default_backoff()
    .inspect(move |event| match event {
        Ok(event) => cache.follow(event),
        // Refused: a Secret deleted from now on goes unseen, so the owners of those cached are
        // looked at once (they read their Secret, and say so when that is refused too).
        Err(error) if watch_forbidden(error) => {
            for (namespace, owner) in cache.deny() {
                if *owner.kind == *nauthera_shared::resources::OIDCClient::kind(&()) {
                    let _ = routes.send(Route::Resource {
                        kind: ObjectKind::Client,
                        namespace,
                        name: owner.name.into(),
                    });
                }
            }
        }
        Err(_) => {}
    })
    // Deleted ones too: the owner writes its Secret again.
    .touched_objects()
    // The owner's reconcile needs only to know which Secret moved: no value travels further.
    .map_ok(|mut secret| {
        secret.data = None;
        secret.string_data = None;
        secret
    })
    .boxed();
    (summaries, stream)
}

/// Whether a watch failed because the reconciler's role does not allow it.
fn watch_forbidden(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 403,
        watcher::Error::WatchError(status) => status.code == 403,
        _ => false,
    }
}

/// Routes a change to a Secret that manifests reference to those manifests. Secrets are watched
/// only in the namespaces (of the scope) where a manifest references one, metadata only and
/// without those this reconciler delivered: the value is read when the manifest is reconciled.
pub async fn follow_referenced_secrets(wiring: Wiring, scope: Option<String>) {
    let mut namespaces = wiring.references.namespaces();
    let mut watches: HashMap<String, AbortHandle> = HashMap::new();
    let mut tasks = JoinSet::new();
    loop {
        let wanted: BTreeSet<String> = namespaces
            .borrow_and_update()
            .iter()
            .filter(|ns| scope.as_ref().is_none_or(|scope| scope == *ns))
            .cloned()
            .collect();
        watches.retain(|namespace, watch| {
            let keep = wanted.contains(namespace);
            if !keep {
                watch.abort();
                wiring.references.forget_namespace(namespace);
            }
            keep
        });
        for namespace in wanted {
            if let Entry::Vacant(slot) = watches.entry(namespace) {
                let namespace = slot.key().clone();
                slot.insert(tasks.spawn(follow_secrets_in(wiring.clone(), namespace)));
            }
        }
        tokio::select! {
            changed = namespaces.changed() => if changed.is_err() { return },
            // Reap the aborted watches.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

async fn follow_secrets_in(wiring: Wiring, namespace: String) {
    let selector = format!("{MANAGED_BY_LABEL}!={MANAGED_BY}");
    let secrets: Api<PartialObjectMeta<Secret>> = api_in(&wiring.client, Some(&namespace));
    let mut changes = watcher(secrets, watcher::Config::default().labels(&selector))
        .default_backoff()
        .boxed();
    while let Some(change) = changes.next().await {
        let (secret, present) = match change {
            Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret)) => (secret, true),
            Ok(watcher::Event::Delete(secret)) => (secret, false),
            _ => continue,
        };
        let Some(name) = secret.metadata.name else {
            continue;
        };
        let version = secret.metadata.resource_version.filter(|_| present);
        if wiring.references.version(&namespace, &name) == version {
            continue;
        }
        wiring.references.seen(&namespace, &name, version);
        for (kind, manifest) in wiring.references.referencing(&namespace, &name) {
            let _ = wiring.routes.send(Route::Resource {
                kind,
                namespace: namespace.clone(),
                name: manifest,
            });
        }
    }
}

/// Starts the controller of one kind in one scope. It begins once the server's first listing is
/// in (or its wait ran out), so that first reconciles already compare against it.
///
/// Its Kubernetes watches (the manifests, the Secrets it delivered) and the held routes (another
/// reconciler's server write, a prerequisite registered) wait for the echo window (see
/// [`echoes`](crate::process::echoes)); any other route (a person's change on the server, a
/// referenced Secret) reconciles the resource it names at once and takes what was held for it.
pub fn spawn<K: Managed, A: AdminApi>(
    tasks: &mut JoinSet<()>,
    wiring: &Wiring,
    scope: Option<String>,
    context: Arc<Context<A>>,
    delivered: Option<DeliveredStream>,
) {
    let (manifests, writer) = reflector::store::<Guarded<K>>();
    wiring
        .prerequisites
        .find_dependents_with(dependents_in(manifests.clone()));
    let held = Arc::new(Mutex::new(Held::new(ECHO_WINDOW)));
    let watched = watch_manifests::<K, A>(wiring, scope.clone(), writer, context.clone())
        .map_ok(|(manifest, arrival)| vec![(work_queue::key_of(&manifest), arrival)]);
    let elsewhere = routed::<K>(wiring, scope.clone(), manifests.clone(), Timing::Settled)
        .map(|reference| Ok(vec![(reference, Arrival::Live)]));
    let watched = futures::stream::select(watched, elsewhere).boxed();
    // A delivered Secret that is changed, deleted or emptied reconciles its owner.
    let echoes = match delivered {
        Some(delivered) => {
            futures::stream::select(watched, delivered.map_ok(|secret| owners::<K>(&secret)))
                .boxed()
        }
        None => watched,
    };
    let releasing = held.clone();
    let named = routed::<K>(wiring, scope.clone(), manifests.clone(), Timing::AtOnce)
        .inspect(move |reference| held_by::<K>(&releasing).release(reference));
    // A receiver that fell behind has lost routes: everything is reconciled instead.
    let everything = BroadcastStream::new(wiring.routes.subscribe()).filter_map(|route| {
        std::future::ready(matches!(route, Ok(Route::All) | Err(_)).then_some(()))
    });
    let gate = wiring.gate.clone();
    let loaded = wiring.policies.clone();
    let shard = wiring.shard.clone();
    let concurrency = wiring.concurrency;
    tasks.spawn(async move {
        // The watches are decoded and held on a task of their own (it ends with this one), so
        // that the controller's own task only schedules; the cache fills while the gate is closed.
        let admission = Arc::new(Admission::new(
            usize::from(concurrency) * ADMITTED_PER_WORKER,
        ));
        let (settled, _watching) = settle_on_own_task::<K>(echoes, held, admission.clone());
        let finding = admission.clone();
        gate.wait().await;
        // A decision before the policies are listed could send what one does not allow.
        loaded.wait_loaded().await;
        // Every trigger comes as a reference: the settled watch events and the routes.
        let requests = futures::stream::select(
            futures::stream::select(settled, named).map(Request::One),
            everything.map(|()| Request::All),
        );
        work_queue::run(
            manifests,
            requests,
            usize::from(concurrency),
            move |guard| {
                admission.started(&work_queue::key_of(&guard));
                // Judged when the reconcile runs, on the namespace labels of now: a resource
                // whose namespace left the selector is no longer touched (its finalizer and
                // its server object stay as they are).
                let in_scope = guard
                    .namespace()
                    .is_some_and(|namespace| shard.covers(K::KIND.object_kind(), &namespace));
                let context = context.clone();
                async move {
                    if !in_scope {
                        return Action::await_change();
                    }
                    match reconcile_guarded::<K, A>(guard.clone(), context.clone()).await {
                        Ok(action) => action,
                        Err(error) => error_policy(&guard, &error, &context),
                    }
                }
            },
            // A server change or a Secret naming no manifest of this kind.
            move |reference| {
                finding.started(reference);
                tracing::debug!(kind = K::KIND.as_str(), %reference, "a change names no manifest");
            },
        )
        .await;
    });
}

fn held_by<K: Managed>(
    held: &Mutex<Held<ObjectRef<Guarded<K>>>>,
) -> std::sync::MutexGuard<'_, Held<ObjectRef<Guarded<K>>>> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A reference as a trigger keeps it: the name and namespace, which are all a lookup in the
/// cache compares. Its resourceVersion and uid are dropped: at a cold start every manifest's
/// trigger waits in the echo window and then in the work queue, which hold it two or three times
/// over.
fn trigger<K: Managed>(mut reference: ObjectRef<Guarded<K>>) -> ObjectRef<Guarded<K>> {
    reference.extra = Default::default();
    reference
}

/// A resource to reconcile and how its event came.
type Trigger<K> = (ObjectRef<Guarded<K>>, Arrival);

/// The manifests of the kind that own a delivered Secret.
fn owners<K: Managed>(secret: &Secret) -> Vec<Trigger<K>> {
    secret
        .owner_references()
        .iter()
        .filter_map(|owner| ObjectRef::from_owner_ref(secret.namespace().as_deref(), owner, ()))
        .map(|owner| (trigger(owner), Arrival::Live))
        .collect()
}

/// Drives the watch events on a task of their own, holds the resources they name until
/// [`ECHO_WINDOW`] has passed without another event for one, and hands them over as `admission`
/// has room (see [`admission`](crate::process::admission)). The watch is read on while the
/// controller is busy or not yet started: what is due waits in the hold.
fn settle_on_own_task<K: Managed>(
    events: BoxStream<'static, Result<Vec<Trigger<K>>, watcher::Error>>,
    held: Arc<Mutex<Held<ObjectRef<Guarded<K>>>>>,
    admission: Arc<Admission<ObjectRef<Guarded<K>>>>,
) -> (ReceiverStream<ObjectRef<Guarded<K>>>, OwnedTask<()>) {
    // Only admitted resources travel, so a send never waits for long.
    let (sender, receiver) = mpsc::channel(admission.room());
    let task = tokio::spawn(async move {
        let mut events = events;
        let mut watching = true;
        loop {
            let next_due = held_by::<K>(&held).next_due();
            let room = admission.room();
            tokio::select! {
                event = events.next(), if watching => match event {
                    Some(Ok(references)) => {
                        let now = Instant::now();
                        let mut holding = held_by::<K>(&held);
                        for (reference, arrival) in references {
                            holding.hold(reference, now, arrival);
                        }
                    }
                    Some(Err(error)) => {
                        tracing::warn!(kind = K::KIND.as_str(), error = %error, "watch");
                    }
                    None => watching = false,
                },
                () = tokio::time::sleep_until(next_due.unwrap_or_else(Instant::now)), if next_due.is_some() && room > 0 => {
                    let due = held_by::<K>(&held).take_due(Instant::now(), room);
                    for reference in due {
                        if admission.admit(reference.clone()) && sender.send(reference).await.is_err() {
                            return;
                        }
                    }
                }
                () = admission.freed(), if next_due.is_some() && room == 0 => {}
                else => return,
            }
        }
    });
    (ReceiverStream::new(receiver), OwnedTask(task))
}

/// The namespace limit of ClientPolicies counts the clients of a scope from its watch cache.
fn count_clients_from<K: Managed>(
    wiring: &Wiring,
    scope: Option<String>,
    manifests: reflector::Store<Guarded<K>>,
) {
    wiring.policies.count_clients_from(
        scope,
        Box::new(move || {
            manifests
                .state()
                .iter()
                .filter_map(|guard| guard.0.as_ref().ok())
                .map(|resource| (resource.namespace().unwrap_or_default(), counted(resource)))
                .collect()
        }),
    );
}

/// The watch of a kind's manifests in a scope, into the cache `writer` fills; each event also
/// updates the indexes kept from the manifests (the Secrets they reference, what they provide,
/// the clients a namespace limit counts, what the policies hold) and drops the copy of a written
/// status the cache now shows.
fn watch_manifests<K: Managed, A: AdminApi>(
    wiring: &Wiring,
    scope: Option<String>,
    writer: reflector::store::Writer<Guarded<K>>,
    context: Arc<Context<A>>,
) -> impl futures::Stream<Item = Result<(Guarded<K>, Arrival), watcher::Error>> + Send + 'static {
    // The namespace limit of ClientPolicies counts clients; every Branding is known once listed.
    let counts_clients = K::KIND == Kind::OidcClient;
    let lists_brandings = K::KIND == Kind::Branding;
    if counts_clients {
        count_clients_from(wiring, scope.clone(), writer.as_reader());
    }
    let references = wiring.references.clone();
    let prerequisites = wiring.prerequisites.clone();
    let policies = wiring.policies.clone();
    let relisted_scope = scope.clone();
    reflector::reflector(
        writer,
        watcher(
            api_in::<Guarded<K>>(&wiring.client, scope.as_deref()),
            watcher::Config::default().any_semantic(),
        )
        .modify(slim_cached),
    )
    .default_backoff()
    .inspect(move |event| {
        // `live`: a change as it happens, not the initial listing.
        let (guard, present, live) = match event {
            Ok(watcher::Event::Apply(guard)) => (guard, true, true),
            Ok(watcher::Event::InitApply(guard)) => (guard, true, false),
            Ok(watcher::Event::Delete(guard)) => (guard, false, true),
            // A new listing: the namespace limit's index takes it from the cache.
            Ok(watcher::Event::InitDone) if counts_clients => {
                policies.clients_listed(relisted_scope.as_deref());
                return;
            }
            // From now on a Branding this scope does not hold does not exist.
            Ok(watcher::Event::InitDone) if lists_brandings => {
                prerequisites.brandings_listed(relisted_scope.as_deref());
                return;
            }
            _ => return,
        };
        if let Ok(resource) = &guard.0 {
            if let Some(uid) = resource.meta().uid.as_deref() {
                context.memory.cache_shows(uid, resource.status());
            }
            record_references(&references, &prerequisites, resource, present, live);
            if counts_clients {
                policies.client_seen(
                    &resource.namespace().unwrap_or_default(),
                    counted(resource),
                    present,
                );
            }
            if !present {
                policies.resource_gone(
                    K::KIND.object_kind(),
                    &resource.namespace().unwrap_or_default(),
                    &resource.name_any(),
                );
            }
        }
    })
    .try_filter_map(|event| {
        std::future::ready(Ok(match event {
            watcher::Event::Apply(guard) => Some((guard, Arrival::Live)),
            watcher::Event::InitApply(guard) => Some((guard, Arrival::Listed)),
            _ => None,
        }))
    })
}

/// Whether a route's reconcile comes at once or after the echo window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timing {
    AtOnce,
    /// After the echo window ([`Route::Held`]).
    Settled,
}

/// The manifests of the kind that routes of this timing name (a resource, or every one of a
/// namespace), within the scope and the shard.
fn routed<K: Managed>(
    wiring: &Wiring,
    scope: Option<String>,
    cached: reflector::Store<Guarded<K>>,
    timing: Timing,
) -> impl futures::Stream<Item = ObjectRef<Guarded<K>>> + Send + 'static {
    let shard = wiring.shard.clone();
    let locator = wiring.prerequisites.clone();
    BroadcastStream::new(wiring.routes.subscribe()).flat_map(move |route| {
        let targets: Vec<(String, String)> = match route {
            Ok(Route::Resource {
                kind,
                namespace,
                name,
            }) if kind == K::KIND.object_kind() && timing == Timing::AtOnce => {
                K::locate(&locator, namespace, name).into_iter().collect()
            }
            Ok(Route::Held {
                kind,
                namespace,
                name,
            }) if kind == K::KIND.object_kind() && timing == Timing::Settled => {
                K::locate(&locator, namespace, name).into_iter().collect()
            }
            Ok(Route::Namespace { namespace }) if timing == Timing::AtOnce => cached
                .state()
                .iter()
                .filter(|guard| guard.namespace().as_deref() == Some(namespace.as_str()))
                .map(|guard| (namespace.clone(), guard.name_any()))
                .collect(),
            _ => Vec::new(),
        };
        let refs: Vec<ObjectRef<Guarded<K>>> = targets
            .into_iter()
            .filter(|(namespace, _)| scope.as_ref().is_none_or(|ns| ns == namespace))
            .filter(|(namespace, _)| shard.covers(K::KIND.object_kind(), namespace))
            .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace))
            .collect();
        futures::stream::iter(refs)
    })
}

/// Follows the manifests of a kind this reconciler does not reconcile (another shard's, with
/// `--kinds`) for what they provide only: an Organization's issuer, a Branding. This shard's
/// resources then wait for them to register, as they would for its own, and are routed the
/// moment the other shard records them registered. No cache is kept: each event updates the
/// prerequisites' index.
pub async fn follow_providers<K: Managed>(wiring: Wiring, scope: Option<String>) {
    let events = watcher(
        api_in::<Guarded<K>>(&wiring.client, scope.as_deref()),
        watcher::Config::default().any_semantic(),
    )
    .modify(slim_manifest)
    .default_backoff();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let (guard, present, live) = match event {
            Ok(watcher::Event::Apply(guard)) => (guard, true, true),
            Ok(watcher::Event::InitApply(guard)) => (guard, true, false),
            Ok(watcher::Event::Delete(guard)) => (guard, false, true),
            Ok(watcher::Event::InitDone) if K::KIND.object_kind() == ObjectKind::Branding => {
                wiring.prerequisites.brandings_listed(scope.as_deref());
                continue;
            }
            Ok(_) => continue,
            Err(error) => {
                tracing::debug!(kind = K::KIND.as_str(), error = %error, "watching the manifests other shards reconcile");
                continue;
            }
        };
        if let Ok(resource) = &guard.0 {
            record_references(
                &wiring.references,
                &wiring.prerequisites,
                resource,
                present,
                live,
            );
        }
    }
}

/// A client as the namespace limit counts it.
fn counted<K: Managed>(resource: &K) -> CountedClient {
    CountedClient {
        name: resource.name_any(),
        issuer: resource.issuer().to_owned(),
        created: resource.meta().creation_timestamp.as_ref().map(|t| t.0),
        deleting: resource.meta().deletion_timestamp.is_some(),
    }
}

/// Keeps the indexes of what a manifest references up to date: the Secret it reads, the
/// manifests it needs registered first, what it provides to others.
fn record_references<K: Managed>(
    references: &SecretReferences,
    prerequisites: &Prerequisites,
    resource: &K,
    present: bool,
    live: bool,
) {
    let namespace = resource.namespace().unwrap_or_default();
    let name = resource.name_any();
    let secret = resource.provided_secret().filter(|_| present);
    references.record(
        K::KIND.object_kind(),
        &namespace,
        &name,
        secret.map(|r| r.name.as_str()),
    );
    let manifest = Manifest::new(K::KIND.object_kind(), &namespace, &name);
    if present {
        prerequisites.record_provider(
            &manifest,
            resource.provides(),
            registered_at(resource.status()),
            resource.slug(),
            live,
        );
    } else {
        prerequisites.dependent_gone(&resource.needs());
        prerequisites.record_provider(&manifest, None, None, None, live);
    }
}

/// Searches one kind's watch cache for the manifests that need a prerequisite.
fn dependents_in<K: Managed>(
    manifests: reflector::Store<Guarded<K>>,
) -> crate::reconcile::prerequisites::DependentsOf {
    Box::new(move |prerequisite| {
        manifests
            .state()
            .iter()
            .filter_map(|guard| guard.0.as_ref().ok())
            .filter(|resource| resource.needs().contains(prerequisite))
            .map(|resource| {
                Manifest::new(
                    K::KIND.object_kind(),
                    &resource.namespace().unwrap_or_default(),
                    &resource.name_any(),
                )
            })
            .collect()
    })
}

/// Since when the server holds what a manifest declared, as far as its status tells: `None`
/// until something was written; else when its Ready condition last moved. An observed object
/// the server holds counts: what depends on it is written into it.
fn registered_at(status: Option<&ResourceStatus>) -> Option<jiff::Timestamp> {
    let status = status?;
    let observed_held = status.reason == Some(nauthera_shared::catalog::Reason::Observed)
        && status.observed.as_ref().is_some_and(|o| !o.absent);
    if status.revision.is_none() && !observed_held {
        return None;
    }
    Some(status.ready_since().unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

/// Drops what the reconciler never reads from a cached manifest: its managed fields (but the
/// entries that own a pending restore or rotate annotation, or an adopt annotation: who asked),
/// labels,
/// and every annotation but its own (`kubectl apply` keeps a whole copy of the manifest in one).
/// The creation time stays: a namespace limit keeps the clients created first.
fn slim_manifest<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = meta.managed_fields.take().and_then(|entries| {
        let requester: Vec<_> = entries
            .into_iter()
            .filter(|entry| {
                kube_io::owns_restore_annotation(entry)
                    || kube_io::owns_rotate_annotation(entry)
                    || kube_io::owns_adopt_annotation(entry)
            })
            .collect();
        Some(requester).filter(|kept| !kept.is_empty())
    });
    meta.labels = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| key.starts_with("nauthera.io/"));
    }
}

/// A manifest as the watch cache keeps it: slim ([`slim_manifest`]), its status abridged
/// ([`ResourceStatus::abridge`]; reconciles read it whole through the memory's `status_or`).
fn slim_cached<K: Managed>(guard: &mut Guarded<K>) {
    slim_manifest(guard);
    if let Some(status) = guard
        .0
        .as_mut()
        .ok()
        .and_then(|resource| resource.status_mut())
    {
        status.abridge();
    }
}

/// A spawned task that is aborted when its handle is dropped, so that work a controller started
/// ends with the controller (a leader that steps down aborts its controllers).
struct OwnedTask<T>(JoinHandle<T>);

impl<T> Drop for OwnedTask<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Future for OwnedTask<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

/// One malformed object must not break the watch: it is logged and waits for a change.
async fn reconcile_guarded<K: Managed, A: AdminApi>(
    guard: Arc<Guarded<K>>,
    context: Arc<Context<A>>,
) -> Result<Action, ReconcileError> {
    // Each reconcile is a task of its own: the controller polls its reconciles inside its one
    // task, which would put every reconcile of a kind on a single core. The task holds the
    // cached manifest and lends it to the reconcile: a copy of it cost about twenty allocations.
    OwnedTask(tokio::spawn(async move {
        match &guard.0 {
            Ok(resource) => pipeline::reconcile(resource, context).await,
            Err(invalid) => {
                tracing::warn!(
                    kind = K::KIND.as_str(),
                    namespace = invalid.metadata.namespace.as_deref().unwrap_or_default(),
                    name = invalid.metadata.name.as_deref().unwrap_or_default(),
                    error = %invalid,
                    "cannot read the manifest; waiting for it to change"
                );
                Ok(Action::await_change())
            }
        }
    }))
    .await?
}

fn error_policy<K: Managed, A: AdminApi>(
    guard: &Guarded<K>,
    error: &ReconcileError,
    context: &Context<A>,
) -> Action {
    tracing::warn!(
        kind = K::KIND.as_str(),
        namespace = guard.namespace().unwrap_or_default(),
        name = guard.name_any(),
        error = %error,
        "reconcile failed; retried with backoff"
    );
    let uid = guard.uid().unwrap_or_default();
    let generation = guard.meta().generation.unwrap_or(0);
    Action::requeue(context.requeue_after_error(&uid, generation))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn work_a_controller_started_ends_with_it() {
        let (started, mut running) = tokio::sync::oneshot::channel::<()>();
        let task = OwnedTask(tokio::spawn(async move {
            let _held = started;
            std::future::pending::<()>().await;
        }));
        drop(task);
        // The sender is dropped only when the task is aborted.
        assert!(
            tokio::time::timeout(Duration::from_secs(5), &mut running)
                .await
                .is_ok_and(|result| result.is_err())
        );
    }

    #[test]
    fn a_trigger_keeps_what_a_cache_lookup_compares_and_nothing_more() {
        use nauthera_shared::resources::OIDCClient;
        let manifest: Guarded<OIDCClient> = serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "OIDCClient",
            "metadata": {
                "name": "web", "namespace": "team", "uid": "7d1c", "resourceVersion": "42"
            },
            "spec": {},
        }))
        .unwrap();
        let full = ObjectRef::from_obj(&manifest);
        let kept = trigger(full.clone());
        assert_eq!(
            kept, full,
            "the same resource to the cache and the work queue"
        );
        let built = work_queue::key_of(&manifest);
        assert_eq!(built, full);
        assert!(built.extra.uid.is_none() && built.extra.resource_version.is_none());
        assert_eq!(
            (kept.name.as_str(), kept.namespace.as_deref()),
            ("web", Some("team"))
        );
        assert_eq!(full.extra.uid.as_deref(), Some("7d1c"));
        assert!(kept.extra.uid.is_none() && kept.extra.resource_version.is_none());
    }

    #[tokio::test]
    async fn watch_events_for_one_resource_settle_into_one_reconcile() {
        use nauthera_shared::resources::OIDCClient;
        let named = |name: &str| ObjectRef::<Guarded<OIDCClient>>::new(name).within("team");
        // A window long enough that the events given at once fall in it.
        let held = Arc::new(Mutex::new(Held::new(Duration::from_millis(50))));
        let live = |name: &str| (named(name), Arrival::Live);
        let events = futures::stream::iter([
            Ok(vec![live("web")]),
            Ok(vec![live("web"), live("api")]),
            Ok(vec![live("web")]),
        ])
        .chain(futures::stream::pending())
        .boxed();
        let (settled, _task) =
            settle_on_own_task::<OIDCClient>(events, held, Arc::new(Admission::new(8)));
        let first_two =
            tokio::time::timeout(Duration::from_secs(5), settled.take(2).collect::<Vec<_>>())
                .await
                .expect("both resources settle");
        // Three events for `web` gave one reconcile: the second to come is `api`'s.
        let mut names: Vec<String> = first_two.into_iter().map(|r| r.name).collect();
        names.sort();
        assert_eq!(names, ["api", "web"]);
    }

    #[tokio::test]
    async fn the_settle_task_hands_over_only_what_the_admission_has_room_for() {
        use nauthera_shared::resources::OIDCClient;
        let named = |name: &str| ObjectRef::<Guarded<OIDCClient>>::new(name).within("team");
        let held = Arc::new(Mutex::new(Held::new(Duration::from_millis(10))));
        let admission = Arc::new(Admission::new(1));
        let listed = |name: &str| (named(name), Arrival::Listed);
        let events = futures::stream::iter([Ok(vec![listed("web"), listed("api")])])
            .chain(futures::stream::pending())
            .boxed();
        let (mut settled, _task) =
            settle_on_own_task::<OIDCClient>(events, held, admission.clone());
        let within = Duration::from_secs(5);
        let first = tokio::time::timeout(within, settled.next())
            .await
            .unwrap()
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(300), settled.next())
                .await
                .is_err(),
            "the second waits while the first has not started"
        );
        admission.started(&first);
        let second = tokio::time::timeout(within, settled.next())
            .await
            .unwrap()
            .unwrap();
        let mut names = [first.name, second.name];
        names.sort();
        assert_eq!(names, ["api", "web"]);
    }

    #[test]
    fn a_cached_manifest_keeps_its_status_abridged() {
        let whole = crate::process::memory::tests::registered_status();
        let mut client: nauthera_shared::resources::OIDCClient =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "nauthera.io/v1alpha1",
                "kind": "OIDCClient",
                "metadata": { "name": "web", "namespace": "team-a" },
                "spec": { "issuer": "https://login.example.test/acme" },
                "status": whole,
            }))
            .unwrap();
        client.metadata.uid = Some("u1".into());
        let mut cached = Guarded(Ok(client));
        slim_cached(&mut cached);
        let kept = cached.0.as_ref().unwrap().status.as_ref().unwrap();
        assert!(kept.abridged.is_some());
        assert!(kept.conditions.is_empty());
        assert_eq!(
            registered_at(Some(kept)),
            Some(jiff::Timestamp::from_second(1_000).unwrap()),
            "told abridged or not"
        );
        let memory = crate::process::memory::Memory::default();
        assert_eq!(memory.status_or("u1", Some(kept)), Some(whole));
    }

    #[test]
    fn cached_manifests_keep_only_what_deciding_reads() {
        let mut client: nauthera_shared::resources::OIDCClient =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "nauthera.io/v1alpha1",
                "kind": "OIDCClient",
                "metadata": {
                    "name": "web",
                    "annotations": {
                        "kubectl.kubernetes.io/last-applied-configuration": "{…}",
                        "nauthera.io/restore": "true",
                    },
                },
                "spec": { "issuer": "https://login.example.test/acme" },
            }))
            .unwrap();
        slim_manifest(&mut client);
        assert_eq!(
            client
                .metadata
                .annotations
                .unwrap()
                .into_keys()
                .collect::<Vec<_>>(),
            vec!["nauthera.io/restore".to_owned()]
        );
    }

    #[test]
    fn an_observed_provider_the_server_holds_counts_as_registered() {
        use nauthera_shared::catalog::Reason;
        use nauthera_shared::resources::ServerObject;
        let observed = |absent: bool| ResourceStatus {
            reason: Some(Reason::Observed),
            observed: Some(Box::new(ServerObject {
                revision: if absent { String::new() } else { "r1".into() },
                absent,
                ..ServerObject::default()
            })),
            ..ResourceStatus::default()
        };
        assert!(registered_at(Some(&observed(false))).is_some());
        assert_eq!(registered_at(Some(&observed(true))), None);
        let held = ResourceStatus {
            reason: Some(Reason::AdoptionRequired),
            ..observed(false)
        };
        assert_eq!(registered_at(Some(&held)), None);
        assert_eq!(registered_at(None), None);
    }
}
