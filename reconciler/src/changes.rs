//! What the server holds, kept current through its change hint: the WatchChanges stream where
//! the server offers it, else polling GetChangeHint; on a move, one ListClientRevisions listing
//! (never a read per object). Reconciles compare their last written revision with this view and
//! read a single object only when the two disagree.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use futures::StreamExt;
use nauthera_proto::v1;
use nauthera_shared::client::CallError;
use tokio::sync::watch;

use crate::admin::AdminApi;
use crate::decide::ServerView;

/// A client's place on the server: issuer, namespace, name.
pub type RefKey = (String, String, String);

fn key_of(reference: &v1::ObjectRef) -> RefKey {
    (
        reference.issuer.clone(),
        reference.namespace.clone(),
        reference.name.clone(),
    )
}

#[derive(Debug, Default)]
struct Listing {
    /// A listing has completed since the start (or the last resync).
    complete: bool,
    hint: Option<v1::ChangeHint>,
    /// The revision of each client the listing holds.
    revisions: HashMap<RefKey, String>,
    /// The server's history restarted (its epoch changed) since the previous listing.
    history_restarted: bool,
}

/// The revisions the server holds, as far as the change hint has told.
#[derive(Debug, Default)]
pub struct ServerRevisions {
    listing: RwLock<Listing>,
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
        let key = (issuer.to_owned(), namespace.to_owned(), name.to_owned());
        match listing.revisions.get(&key) {
            Some(revision) => ServerView::Holds {
                revision: revision.clone(),
            },
            None => ServerView::Absent,
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

    /// Replaces the view with a complete listing.
    pub fn replace(&self, hint: Option<v1::ChangeHint>, clients: Vec<v1::ClientRevision>) {
        let Ok(mut listing) = self.listing.write() else {
            return;
        };
        let previous_epoch = listing.hint.as_ref().map(|h| h.epoch.clone());
        let epoch = hint.as_ref().map(|h| h.epoch.clone());
        listing.history_restarted = listing.history_restarted
            || matches!((&previous_epoch, &epoch), (Some(a), Some(b)) if a != b);
        listing.hint = hint;
        listing.revisions = clients
            .into_iter()
            .filter_map(|c| Some((key_of(c.r#ref.as_ref()?), c.revision)))
            .collect();
        listing.complete = true;
    }

    /// Takes one change event into the view. Returns whether it concerned a client.
    pub fn apply_event(&self, event: &v1::ChangeEvent) -> bool {
        let Ok(mut listing) = self.listing.write() else {
            return false;
        };
        if event.hint.is_some() {
            listing.hint = event.hint.clone();
        }
        if event.kind != v1::ObjectKind::Client as i32 {
            return false;
        }
        let Some(reference) = event.r#ref.as_ref() else {
            return false;
        };
        let key = key_of(reference);
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

/// Keeps `view` current and bumps `trigger` whenever it may have changed. Runs until dropped.
pub async fn follow_changes<A: AdminApi>(
    admin: &A,
    view: &ServerRevisions,
    namespaces: &[String],
    poll_interval: Duration,
    trigger: &watch::Sender<u64>,
) {
    let bump = || trigger.send_modify(|n| *n = n.wrapping_add(1));
    let mut stream_supported = true;
    loop {
        match list_all(admin, namespaces).await {
            Ok((hint, clients)) => {
                view.replace(hint, clients);
                bump();
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
                            Ok(event) if event.resync_required => break,
                            Ok(event) => {
                                if view.apply_event(&event) {
                                    bump();
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

    use crate::admin::ChangeEvents;

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
            nauthera_shared::client::ServerError::from_status(&tonic::Status::unimplemented(
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
        let (trigger, mut triggered) = watch::channel(0u64);
        let seen = |revision: &str| ServerView::Holds {
            revision: revision.into(),
        };
        let follow = follow_changes(&server, &view, &[], Duration::from_millis(10), &trigger);
        let check = async {
            triggered.changed().await.unwrap();
            assert_eq!(
                view.view_of("https://login.example.test/acme", "team-a", "web"),
                seen("r1")
            );
            // Polls that find the same hint list nothing.
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(server.lists.load(Ordering::SeqCst), 1);
            *server.revision.lock().unwrap() = "r2".into();
            server.sequence.store(2, Ordering::SeqCst);
            triggered.changed().await.unwrap();
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
}
