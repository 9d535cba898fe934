//! What the server holds, kept current through its change hint: the WatchChanges stream where
//! the server offers it, else polling GetChangeHint; on a move, one ListClientRevisions listing
//! (never a read per object). Reconciles compare their last written revision with this view and
//! read a single object only when the two disagree.
//!
//! Each change is routed to the one resource it names ([`Route::Resource`]); a write this
//! reconciler's manager made routes nowhere, and everything is reconciled ([`Route::All`]) only
//! after a listing that replaced the whole view: at the start and when the server asks for a
//! resync. A change to an object outside this reconciler's scope (another shard's kind or
//! namespace) routes nowhere.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use nauthera_client::CallError;
use nauthera_proto::v1;
use tokio::sync::{broadcast, watch};

use crate::reconcile::decide::{LastWrite, ServerView, Writer, writer};
use crate::server::admin::AdminApi;
use crate::server::client_revisions::ClientRevisions;

/// A client's place on the server: issuer, namespace, name.
pub type RefKey = (String, String, String);

fn key_of(reference: &v1::ObjectRef) -> RefKey {
    (
        reference.issuer.clone(),
        reference.namespace.clone(),
        reference.name.clone(),
    )
}

/// Where a server change sends the reconciler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Reconcile the one resource of this kind that the change names.
    Resource {
        kind: v1::ObjectKind,
        namespace: String,
        name: String,
    },
    /// Reconcile the one resource of this kind it names once the echo window has passed, like a
    /// watch event: the route follows a write whose status echo should reach the cache first.
    /// Another reconciler's server write (it records its claim in the resource's status right
    /// after, and a decision made before the claim is in the cache would write over it), and a
    /// manifest the resource depends on registering (the dependent's own echoes fold in).
    Held {
        kind: v1::ObjectKind,
        namespace: String,
        name: String,
    },
    /// Reconcile every resource of a namespace (its labels moved, or a client under a namespace
    /// limit went away).
    Namespace { namespace: String },
    /// Reconcile every resource: a listing replaced the whole view.
    All,
}

impl Route {
    /// The route to a resource whose object `writer` changed.
    fn to(kind: v1::ObjectKind, namespace: String, name: String, writer: Writer) -> Route {
        match writer {
            Writer::OtherReconciler => Route::Held {
                kind,
                namespace,
                name,
            },
            Writer::Own | Writer::Other => Route::Resource {
                kind,
                namespace,
                name,
            },
        }
    }

    fn client(key: &RefKey, writer: Writer) -> Route {
        Route::to(v1::ObjectKind::Client, key.1.clone(), key.2.clone(), writer)
    }
}

/// The route of one change event: the resource it names, unless the write was this reconciler's
/// own (its manager), which it already recorded when the server answered.
pub fn route_event(event: &v1::ChangeEvent, manager: &str) -> Option<Route> {
    if event.resync_required {
        return Some(Route::All);
    }
    let reference = event.r#ref.as_ref()?;
    let written = event.written.clone().unwrap_or_default();
    let last = LastWrite {
        manager: &written.manager,
        actor: &written.actor,
        generation: written.generation,
    };
    let by = writer(&last, manager);
    if by == Writer::Own {
        return None;
    }
    let kind = v1::ObjectKind::try_from(event.kind).ok()?;
    Some(Route::to(
        kind,
        reference.namespace.clone(),
        reference.name.clone(),
        by,
    ))
}

/// A client whose revision a new listing moved, and the manager its last write named (`None`
/// when the listing no longer holds it).
#[derive(Debug, PartialEq, Eq)]
pub struct Moved {
    pub key: RefKey,
    pub manager: Option<String>,
}

#[derive(Debug, Default)]
struct Listing {
    /// A listing has completed since the start (or the last resync).
    complete: bool,
    hint: Option<v1::ChangeHint>,
    /// The revision of each client the listing holds.
    revisions: ClientRevisions,
    /// The server's history restarted (its epoch changed) since the previous listing.
    history_restarted: bool,
}

/// The revisions the server holds, as far as the change hint has told.
#[derive(Debug, Default)]
pub struct ServerRevisions {
    listing: RwLock<Listing>,
    /// The kinds the server does not list (brandings, identity providers, organizations): the
    /// revision of each object as its change events and the reconciler's reads told it since the
    /// start or the last resync (`None`: deleted).
    objects: RwLock<HashMap<(i32, RefKey), Option<String>>>,
}

impl ServerRevisions {
    /// What the server holds for one client.
    pub fn view_of(&self, issuer: &str, namespace: &str, name: &str) -> ServerView {
        let Ok(listing) = self.listing.read() else {
            return ServerView::Unknown;
        };
        if !listing.complete {
            return ServerView::Unknown;
        }
        match listing.revisions.get(issuer, namespace, name) {
            Some(revision) => ServerView::Holds {
                revision: revision.to_owned(),
            },
            None => ServerView::Absent,
        }
    }

    /// What the server holds for an object of a kind it does not list: unchecked until a change
    /// event or a read told.
    pub fn view_of_object(&self, kind: v1::ObjectKind, key: &RefKey) -> ServerView {
        let Ok(objects) = self.objects.read() else {
            return ServerView::Unknown;
        };
        match objects.get(&(kind as i32, key.clone())) {
            Some(Some(revision)) => ServerView::Holds {
                revision: revision.clone(),
            },
            Some(None) => ServerView::Absent,
            None => ServerView::Unchecked,
        }
    }

    /// Records what a read or a write found the server holding. For a client it corrects a
    /// listing the change hint has not caught up with yet (the stream broke, the listing is
    /// retried): a decision that waits behind the check (a rotation request) then sees the view
    /// agree instead of checking again.
    pub fn note(&self, kind: v1::ObjectKind, key: RefKey, revision: Option<String>) {
        if kind == v1::ObjectKind::Client {
            if let Ok(mut listing) = self.listing.write()
                && listing.complete
            {
                match revision {
                    Some(revision) => listing.revisions.insert(key, revision),
                    None => listing.revisions.remove(&key),
                }
            }
            return;
        }
        if let Ok(mut objects) = self.objects.write() {
            objects.insert((kind as i32, key), revision);
        }
    }

    /// Forgets what changes told of the unlisted kinds: after a resync they are read again.
    fn forget_objects(&self) {
        if let Ok(mut objects) = self.objects.write() {
            objects.clear();
        }
    }

    /// Whether the server's history restarted (a restore from a backup) since the previous
    /// listing.
    pub fn history_restarted(&self) -> bool {
        self.listing
            .read()
            .map(|listing| listing.history_restarted)
            .unwrap_or(false)
    }

    fn hint(&self) -> Option<v1::ChangeHint> {
        self.listing.read().ok().and_then(|l| l.hint.clone())
    }

    /// Replaces the view with a complete listing, wholesale: what it moved is not asked (every
    /// resource is reconciled after it), so the listing's strings move into the view uncopied.
    pub fn replace(&self, hint: Option<v1::ChangeHint>, clients: Vec<v1::ClientRevision>) {
        self.install(hint, clients, false);
    }

    /// Replaces the view with a listing that catches up on changes the stream missed; returns
    /// the clients whose revision it moved.
    pub fn catch_up(
        &self,
        hint: Option<v1::ChangeHint>,
        clients: Vec<v1::ClientRevision>,
    ) -> Vec<Moved> {
        self.install(hint, clients, true)
    }

    fn install(
        &self,
        hint: Option<v1::ChangeHint>,
        clients: Vec<v1::ClientRevision>,
        track_moves: bool,
    ) -> Vec<Moved> {
        let Ok(mut listing) = self.listing.write() else {
            return Vec::new();
        };
        let previous_epoch = listing.hint.as_ref().map(|h| h.epoch.clone());
        let epoch = hint.as_ref().map(|h| h.epoch.clone());
        listing.history_restarted = listing.history_restarted
            || matches!((&previous_epoch, &epoch), (Some(a), Some(b)) if a != b);
        listing.hint = hint;
        if !track_moves {
            // Nothing is compared with the previous view: it goes first, so that the two are
            // never held at once.
            listing.revisions = ClientRevisions::default();
        }
        let mut moved = Vec::new();
        let mut revisions = ClientRevisions::default();
        for client in clients {
            let Some(reference) = client.r#ref else {
                continue;
            };
            let key = (reference.issuer, reference.namespace, reference.name);
            if track_moves
                && listing.revisions.get(&key.0, &key.1, &key.2) != Some(client.revision.as_str())
            {
                moved.push(Moved {
                    key: key.clone(),
                    manager: client.last_write.map(|w| w.manager),
                });
            }
            revisions.insert(key, client.revision);
        }
        if track_moves {
            moved.extend(
                listing
                    .revisions
                    .iter()
                    .filter(|((issuer, namespace, name), _)| {
                        revisions.get(issuer, namespace, name).is_none()
                    })
                    .map(|((issuer, namespace, name), _)| Moved {
                        key: (issuer.to_owned(), namespace.to_owned(), name.to_owned()),
                        manager: None,
                    }),
            );
        }
        listing.revisions = revisions;
        listing.complete = true;
        moved
    }

    /// Takes one change event into the view. Returns whether it concerned a client.
    pub fn apply_event(&self, event: &v1::ChangeEvent) -> bool {
        let Ok(mut listing) = self.listing.write() else {
            return false;
        };
        if event.hint.is_some() {
            listing.hint = event.hint.clone();
        }
        let Some(reference) = event.r#ref.as_ref() else {
            return false;
        };
        let key = key_of(reference);
        if event.kind != v1::ObjectKind::Client as i32 {
            drop(listing);
            if let Ok(mut objects) = self.objects.write() {
                let revision = (!event.revision.is_empty()).then(|| event.revision.clone());
                objects.insert((event.kind, key), revision);
            }
            return false;
        }
        if event.revision.is_empty() {
            listing.revisions.remove(&key);
        } else {
            listing.revisions.insert(key, event.revision.clone());
        }
        true
    }
}

/// Lists every client revision the reconciler may see, page by page.
pub async fn list_all<A: AdminApi>(
    admin: &A,
    namespaces: &[String],
) -> Result<(Option<v1::ChangeHint>, Vec<v1::ClientRevision>), CallError> {
    let mut clients = Vec::new();
    let mut page_token = String::new();
    let mut hint = None;
    loop {
        let page = admin
            .list_client_revisions(v1::ListClientRevisionsRequest {
                organizations: Vec::new(),
                namespaces: namespaces.to_vec(),
                page_size: 0,
                page_token: page_token.clone(),
            })
            .await?;
        if hint.is_none() {
            hint = page.change_hint;
        }
        clients.extend(page.clients);
        if page.next_page_token.is_empty() {
            return Ok((hint, clients));
        }
        page_token = page.next_page_token;
    }
}

/// Holds the controllers back until the server's first listing is in, so that their first
/// reconciles already compare against it and need no second round; after `wait` runs out (the
/// server does not answer) they start anyway, and the listing, once in, reconciles everything.
#[derive(Debug)]
pub struct StartGate {
    listed: watch::Sender<bool>,
    started: AtomicBool,
    wait: Duration,
}

impl StartGate {
    pub fn new(wait: Duration) -> StartGate {
        StartGate {
            listed: watch::channel(false).0,
            started: AtomicBool::new(false),
            wait,
        }
    }

    /// Returns once the first listing is in, or the wait ran out.
    pub async fn wait(&self) {
        let mut listed = self.listed.subscribe();
        let _ = tokio::time::timeout(self.wait, listed.wait_for(|listed| *listed)).await;
        self.started.store(true, Ordering::SeqCst);
    }

    /// A wholesale listing replaced the view: whether controllers already run on an older one
    /// (then everything is reconciled).
    fn listed(&self) -> bool {
        let started = self.started.load(Ordering::SeqCst);
        self.listed.send_replace(true);
        started
    }
}

/// Whether the reconciler's scope covers a resource of a kind in a namespace.
pub type Covers<'a> = &'a (dyn Fn(v1::ObjectKind, &str) -> bool + Send + Sync);

/// Where [`follow_changes`] sends its routes, whose writes route nowhere, and which resources
/// are this reconciler's to reconcile.
pub struct Router<'a> {
    pub routes: &'a broadcast::Sender<Route>,
    pub manager: &'a str,
    pub gate: &'a StartGate,
    pub covers: Covers<'a>,
}

impl std::fmt::Debug for Router<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("manager", &self.manager)
            .finish_non_exhaustive()
    }
}

impl Router<'_> {
    fn send(&self, route: Route) {
        // An organization's change names no namespace (its slug locates the manifest): the
        // controller that finds the manifest checks its namespace against the scope instead.
        if let Route::Resource {
            kind, namespace, ..
        }
        | Route::Held {
            kind, namespace, ..
        } = &route
            && !namespace.is_empty()
            && !(self.covers)(*kind, namespace)
        {
            return;
        }
        tracing::debug!(?route, "a server change routed");
        // No receiver yet (the controllers start alongside) is not an error: they list anyway.
        let _ = self.routes.send(route);
    }

    /// After a listing that replaced the view wholesale: everything, when controllers already
    /// run on an older one.
    fn listed_wholesale(&self) {
        if self.gate.listed() {
            self.send(Route::All);
        }
    }

    /// After a catch-up listing: the clients it moved that this reconciler did not write.
    fn listed(&self, moved: Vec<Moved>) {
        for moved in moved {
            // A listing names the manager only: any other than none is another reconciler's.
            let by = match moved.manager.as_deref() {
                Some(manager) if manager == self.manager => continue,
                Some(manager) if !manager.is_empty() => Writer::OtherReconciler,
                _ => Writer::Other,
            };
            self.send(Route::client(&moved.key, by));
        }
    }
}

/// Keeps `view` current and routes every change it learns of. Runs until dropped.
pub async fn follow_changes<A: AdminApi>(
    admin: &A,
    view: &ServerRevisions,
    namespaces: &[String],
    poll_interval: Duration,
    router: &Router<'_>,
) {
    let mut stream_supported = true;
    // The first listing, and one after a resync, replace the view wholesale; a listing after a
    // broken stream or a moved hint only fills in what was missed.
    let mut wholesale = true;
    loop {
        match list_all(admin, namespaces).await {
            Ok((hint, clients)) => {
                if wholesale {
                    view.forget_objects();
                    view.replace(hint, clients);
                    router.listed_wholesale();
                } else {
                    router.listed(view.catch_up(hint, clients));
                }
                wholesale = false;
            }
            Err(error) => {
                tracing::warn!(error = %error, "listing client revisions failed; trying again");
                tokio::time::sleep(poll_interval).await;
                continue;
            }
        }
        if stream_supported {
            match admin.watch_changes(view.hint()).await {
                Ok(mut events) => {
                    while let Some(event) = events.next().await {
                        match event {
                            Ok(event) if event.resync_required => {
                                wholesale = true;
                                break;
                            }
                            Ok(event) => {
                                view.apply_event(&event);
                                if let Some(route) = route_event(&event, router.manager) {
                                    router.send(route);
                                }
                            }
                            Err(error) => {
                                tracing::info!(error = %error, "the change stream ended; listing again");
                                tokio::time::sleep(poll_interval.min(Duration::from_secs(1))).await;
                                break;
                            }
                        }
                    }
                    continue;
                }
                Err(error) if error.is_unimplemented() => {
                    tracing::info!("the server cannot stream changes; polling the change hint");
                    stream_supported = false;
                }
                Err(error) => {
                    tracing::info!(error = %error, "watching changes failed; listing again");
                    tokio::time::sleep(poll_interval).await;
                    continue;
                }
            }
        }
        // Poll the hint until it moves.
        loop {
            tokio::time::sleep(poll_interval).await;
            match admin.get_change_hint().await {
                Ok(hint) if Some(&hint) != view.hint().as_ref() => break,
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(error = %error, "polling the change hint failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use crate::server::admin::ChangeEvents;

    /// A server that cannot stream: its hint moves when `sequence` does, and its listing holds
    /// `revision` for one client.
    struct PollingServer {
        sequence: AtomicU64,
        revision: Mutex<String>,
        lists: AtomicU64,
    }

    #[allow(clippy::result_large_err)] // `CallError` is the shared client's type.
    fn unimplemented<T>() -> Result<T, CallError> {
        Err(CallError::Server(
            nauthera_client::ServerError::from_status(&tonic::Status::unimplemented(
                "not in this version",
            )),
        ))
    }

    impl AdminApi for PollingServer {
        async fn get_server_info(&self) -> Result<v1::ServerInfo, CallError> {
            unimplemented()
        }
        async fn get_change_hint(&self) -> Result<v1::ChangeHint, CallError> {
            Ok(hint("e1", self.sequence.load(Ordering::SeqCst)))
        }
        async fn watch_changes(
            &self,
            _since: Option<v1::ChangeHint>,
        ) -> Result<ChangeEvents, CallError> {
            unimplemented()
        }
        async fn apply_client(
            &self,
            _request: v1::ApplyClientRequest,
        ) -> Result<v1::ApplyClientResponse, CallError> {
            unimplemented()
        }
        async fn get_client(&self, _reference: v1::ObjectRef) -> Result<v1::Client, CallError> {
            unimplemented()
        }
        async fn delete_client(
            &self,
            _request: v1::DeleteClientRequest,
        ) -> Result<v1::DeleteClientResponse, CallError> {
            unimplemented()
        }
        async fn list_client_revisions(
            &self,
            _request: v1::ListClientRevisionsRequest,
        ) -> Result<v1::ListClientRevisionsResponse, CallError> {
            self.lists.fetch_add(1, Ordering::SeqCst);
            Ok(v1::ListClientRevisionsResponse {
                clients: vec![v1::ClientRevision {
                    r#ref: Some(reference("web")),
                    client_id: "cid".into(),
                    revision: self.revision.lock().unwrap().clone(),
                    last_write: None,
                }],
                next_page_token: String::new(),
                change_hint: Some(hint("e1", self.sequence.load(Ordering::SeqCst))),
            })
        }
        async fn list_audit_events(
            &self,
            _request: v1::ListAuditEventsRequest,
        ) -> Result<v1::ListAuditEventsResponse, CallError> {
            unimplemented()
        }
    }

    #[tokio::test]
    async fn without_a_stream_the_hint_is_polled_and_a_move_lists_again() {
        let server = PollingServer {
            sequence: AtomicU64::new(1),
            revision: Mutex::new("r1".into()),
            lists: AtomicU64::new(0),
        };
        let view = ServerRevisions::default();
        let (routes, mut routed) = broadcast::channel(16);
        // The controllers started before the first listing came in (their wait ran out).
        let gate = StartGate::new(Duration::ZERO);
        gate.wait().await;
        let router = Router {
            routes: &routes,
            manager: "nauthera-reconciler",
            gate: &gate,
            covers: &|_, _| true,
        };
        let seen = |revision: &str| ServerView::Holds {
            revision: revision.into(),
        };
        let follow = follow_changes(&server, &view, &[], Duration::from_millis(10), &router);
        let check = async {
            assert_eq!(routed.recv().await.unwrap(), Route::All);
            assert_eq!(
                view.view_of("https://login.example.test/acme", "team-a", "web"),
                seen("r1")
            );
            // Polls that find the same hint list nothing.
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(server.lists.load(Ordering::SeqCst), 1);
            *server.revision.lock().unwrap() = "r2".into();
            server.sequence.store(2, Ordering::SeqCst);
            // The moved hint costs one listing, and only the client it moved is reconciled.
            assert_eq!(
                routed.recv().await.unwrap(),
                Route::client(&key_of(&reference("web")), Writer::Other)
            );
            assert_eq!(server.lists.load(Ordering::SeqCst), 2);
            assert_eq!(
                view.view_of("https://login.example.test/acme", "team-a", "web"),
                seen("r2")
            );
        };
        tokio::select! {
            () = follow => panic!("following changes ended"),
            () = check => {}
            () = tokio::time::sleep(Duration::from_secs(10)) => panic!("no change seen in time"),
        }
    }

    #[tokio::test]
    async fn controllers_wait_for_the_first_listing_which_then_reconciles_nothing_more() {
        let gate = StartGate::new(Duration::from_secs(3600));
        let (routes, mut routed) = broadcast::channel(16);
        let router = Router {
            routes: &routes,
            manager: "nauthera-reconciler",
            gate: &gate,
            covers: &|_, _| true,
        };
        let waiting = gate.wait();
        tokio::pin!(waiting);
        assert!(
            futures::poll!(waiting.as_mut()).is_pending(),
            "no controller starts before the listing"
        );
        router.listed_wholesale();
        waiting.await;
        assert!(
            routed.try_recv().is_err(),
            "the first reconciles see the listing: nothing to reconcile again"
        );
        // A later wholesale listing (a resync) reconciles everything.
        router.listed_wholesale();
        assert_eq!(routed.try_recv().unwrap(), Route::All);
    }

    fn change(name: &str, manager: &str) -> v1::ChangeEvent {
        v1::ChangeEvent {
            hint: Some(hint("e1", 2)),
            resync_required: false,
            kind: v1::ObjectKind::Client as i32,
            r#ref: Some(reference(name)),
            client_id: "cid".into(),
            revision: "r2".into(),
            written: Some(v1::WriteInfo {
                manager: manager.into(),
                ..v1::WriteInfo::default()
            }),
        }
    }

    #[test]
    fn a_change_routes_to_the_resource_it_names_unless_this_reconciler_wrote_it() {
        let manager = "nauthera-reconciler";
        assert_eq!(
            route_event(&change("web", ""), manager),
            Some(Route::Resource {
                kind: v1::ObjectKind::Client,
                namespace: "team-a".into(),
                name: "web".into(),
            })
        );
        assert!(route_event(&change("web", "terraform"), manager).is_some());
        assert_eq!(route_event(&change("web", manager), manager), None);
        // Another reconciler's write (a manager naming a declared generation) waits for the
        // echo window, so that its status claim is in the cache before the decision.
        let mut elsewhere = change("web", "nauthera-reconciler-batch");
        if let Some(written) = elsewhere.written.as_mut() {
            written.generation = 3;
        }
        assert_eq!(
            route_event(&elsewhere, manager),
            Some(Route::Held {
                kind: v1::ObjectKind::Client,
                namespace: "team-a".into(),
                name: "web".into(),
            })
        );
        let resync = v1::ChangeEvent {
            resync_required: true,
            ..v1::ChangeEvent::default()
        };
        assert_eq!(route_event(&resync, manager), Some(Route::All));
    }

    #[test]
    fn changes_outside_the_scope_route_nowhere() {
        let gate = StartGate::new(Duration::ZERO);
        let (routes, mut routed) = broadcast::channel(16);
        let router = Router {
            routes: &routes,
            manager: "nauthera-reconciler",
            gate: &gate,
            covers: &|kind, namespace| kind == v1::ObjectKind::Client && namespace == "team-a",
        };
        let moved = |namespace: &str| Moved {
            key: (
                "https://login.example.test/acme".into(),
                namespace.into(),
                "web".into(),
            ),
            manager: Some("terraform".into()),
        };
        router.listed(vec![moved("team-b"), moved("team-a")]);
        assert_eq!(
            routed.try_recv().unwrap(),
            Route::client(&moved("team-a").key, Writer::OtherReconciler)
        );
        assert!(routed.try_recv().is_err(), "team-b is another shard's");
        let mut branding = change("look", "terraform");
        branding.kind = v1::ObjectKind::Branding as i32;
        router.send(route_event(&branding, "nauthera-reconciler").unwrap());
        assert!(routed.try_recv().is_err(), "brandings are another shard's");
        // An organization's change names its slug, no namespace: it goes on to be located.
        let mut organization = change("acme", "dashboard");
        organization.kind = v1::ObjectKind::Organization as i32;
        organization.r#ref = Some(v1::ObjectRef {
            name: "acme".into(),
            ..v1::ObjectRef::default()
        });
        let route = route_event(&organization, "nauthera-reconciler").unwrap();
        router.send(route.clone());
        assert_eq!(routed.try_recv().unwrap(), route);
        // Everything still means everything this reconciler covers.
        router.send(Route::All);
        assert_eq!(routed.try_recv().unwrap(), Route::All);
    }

    #[test]
    fn a_catch_up_listing_reports_what_it_moved_with_the_writer() {
        let view = ServerRevisions::default();
        let revision = |name: &str, revision: &str, manager: &str| v1::ClientRevision {
            r#ref: Some(reference(name)),
            client_id: "cid".into(),
            revision: revision.into(),
            last_write: Some(v1::WriteInfo {
                manager: manager.into(),
                ..v1::WriteInfo::default()
            }),
        };
        let first = view.catch_up(
            Some(hint("e1", 1)),
            vec![revision("web", "r1", "m"), revision("api", "r1", "m")],
        );
        assert_eq!(first.len(), 2);
        let second = view.catch_up(
            Some(hint("e1", 3)),
            vec![revision("web", "r2", ""), revision("new", "r1", "m")],
        );
        let moved: Vec<(&str, Option<&str>)> = second
            .iter()
            .map(|m| (m.key.2.as_str(), m.manager.as_deref()))
            .collect();
        assert_eq!(
            moved,
            vec![("web", Some("")), ("new", Some("m")), ("api", None)]
        );
    }

    fn reference(name: &str) -> v1::ObjectRef {
        v1::ObjectRef {
            issuer: "https://login.example.test/acme".into(),
            namespace: "team-a".into(),
            name: name.into(),
        }
    }

    fn hint(epoch: &str, sequence: u64) -> v1::ChangeHint {
        v1::ChangeHint {
            epoch: epoch.into(),
            sequence,
        }
    }

    #[test]
    fn the_view_knows_nothing_before_the_first_listing() {
        let view = ServerRevisions::default();
        assert_eq!(
            view.view_of("https://login.example.test/acme", "team-a", "web"),
            ServerView::Unknown
        );
        view.replace(
            Some(hint("e1", 4)),
            vec![v1::ClientRevision {
                r#ref: Some(reference("web")),
                client_id: "cid".into(),
                revision: "r1".into(),
                last_write: None,
            }],
        );
        assert_eq!(
            view.view_of("https://login.example.test/acme", "team-a", "web"),
            ServerView::Holds {
                revision: "r1".into()
            }
        );
        assert_eq!(
            view.view_of("https://login.example.test/acme", "team-a", "api"),
            ServerView::Absent
        );
        assert!(!view.history_restarted());
    }

    #[test]
    fn change_events_update_and_remove_clients_and_a_new_epoch_is_noticed() {
        let view = ServerRevisions::default();
        view.replace(Some(hint("e1", 1)), Vec::new());
        let event = |revision: &str| v1::ChangeEvent {
            hint: Some(hint("e1", 2)),
            resync_required: false,
            kind: v1::ObjectKind::Client as i32,
            r#ref: Some(reference("web")),
            client_id: "cid".into(),
            revision: revision.into(),
            written: None,
        };
        assert!(view.apply_event(&event("r2")));
        assert_eq!(
            view.view_of("https://login.example.test/acme", "team-a", "web"),
            ServerView::Holds {
                revision: "r2".into()
            }
        );
        assert!(view.apply_event(&event("")));
        assert_eq!(
            view.view_of("https://login.example.test/acme", "team-a", "web"),
            ServerView::Absent
        );
        assert_eq!(view.hint(), Some(hint("e1", 2)));
        view.replace(Some(hint("e2", 1)), Vec::new());
        assert!(view.history_restarted());
    }

    #[test]
    fn a_client_read_or_written_corrects_a_listing_that_lags_behind() {
        let view = ServerRevisions::default();
        let key = || key_of(&reference("web"));
        let web = || view.view_of("https://login.example.test/acme", "team-a", "web");
        // Before the first listing a read tells nothing lasting: the listing decides.
        view.note(v1::ObjectKind::Client, key(), Some("r1".into()));
        assert_eq!(web(), ServerView::Unknown);
        view.replace(Some(hint("e1", 1)), Vec::new());
        // The create's change was missed (the stream broke): the check found it.
        view.note(v1::ObjectKind::Client, key(), Some("r1".into()));
        assert_eq!(
            web(),
            ServerView::Holds {
                revision: "r1".into()
            }
        );
        // The next listing holds the same: nothing moved, so nothing is routed again.
        let moved = view.catch_up(
            Some(hint("e1", 2)),
            vec![v1::ClientRevision {
                r#ref: Some(reference("web")),
                client_id: "cid".into(),
                revision: "r1".into(),
                last_write: None,
            }],
        );
        assert!(moved.is_empty(), "{moved:?}");
        view.note(v1::ObjectKind::Client, key(), None);
        assert_eq!(web(), ServerView::Absent);
    }
}
