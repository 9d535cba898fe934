//! Watches: newline-delimited JSON events from a resourceVersion (or the current state first
//! when none is given), selector transitions, bookmarks, `sendInitialEvents`, timeouts, and
//! `410 Expired` as an ERROR event for a resourceVersion older than the kept history.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::registry::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{Event, EventType, Store, Stored};
use crate::table::{self, IncludeObject};

/// Which objects a watch or list is about.
#[derive(Debug, Clone)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn matches(&self, object: &Value) -> bool {
        let namespace_ok = self.namespace.as_deref().is_none_or(|ns| {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                == ns
        });
        namespace_ok && self.labels.matches(object) && self.fields.matches(object)
    }
}

/// How objects are encoded for the client: as stored (rewritten to the requested version) or
/// as Table rows.
#[derive(Debug, Clone)]
pub struct Encoding {
    pub info: ResourceInfo,
    pub version: String,
    pub table: Option<IncludeObject>,
    /// `Accept: …;as=PartialObjectMetadata[List]`: each object as its metadata only.
    pub metadata_only: bool,
}

impl Encoding {
    pub fn object_bytes(&self, stored: &Stored) -> Bytes {
        if self.metadata_only {
            let partial = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": stored.value["metadata"],
            });
            return Bytes::from(serde_json::to_vec(&partial).unwrap_or_default());
        }
        if let Some(include) = self.table {
            let revision = stored
                .value
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return table::TableWriter::new(&self.info, &self.version, include).table(
                std::iter::once(stored),
                revision,
                None,
            );
        }
        if self.info.converted() {
            let converted = crate::events::from_core(stored.value.clone());
            return Bytes::from(serde_json::to_vec(&converted).unwrap_or_default());
        }
        let wanted = self.info.api_version(&self.version);
        if stored.value["apiVersion"].as_str() == Some(wanted.as_str()) {
            return stored.json.clone();
        }
        let mut value = stored.value.clone();
        value["apiVersion"] = json!(wanted);
        Bytes::from(serde_json::to_vec(&value).unwrap_or_default())
    }
}

/// A watch request's parameters.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    pub filter: Filter,
    pub encoding: Encoding,
    /// `None` (or "0") starts with the current state as ADDED events.
    pub resource_version: Option<u64>,
    pub send_initial_events: bool,
    pub bookmarks: bool,
    pub timeout: Duration,
    pub bookmark_interval: Duration,
}

fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut line = BytesMut::with_capacity(object.len() + 32);
    line.put_slice(b"{\"type\":\"");
    line.put_slice(kind.as_bytes());
    line.put_slice(b"\",\"object\":");
    line.put_slice(object);
    line.put_slice(b"}\n");
    line.freeze()
}

pub fn error_line(error: &ApiError) -> Bytes {
    event_line(
        "ERROR",
        &serde_json::to_vec(&error.to_status()).unwrap_or_default(),
    )
}

fn bookmark_line(encoding: &Encoding, revision: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"kind": encoding.info.kind, "apiVersion": encoding.info.api_version(&encoding.version), "metadata": metadata});
    event_line("BOOKMARK", &serde_json::to_vec(&object).unwrap_or_default())
}

/// The event a watcher with this filter sees for a change, if any (objects entering or leaving
/// the selection are ADDED or DELETED).
fn visible(filter: &Filter, event: &Event) -> Option<EventType> {
    let now = filter.matches(&event.object.value);
    let before = event
        .previous
        .as_ref()
        .is_some_and(|p| filter.matches(&p.value));
    match event.kind {
        EventType::Added => now.then_some(EventType::Added),
        EventType::Deleted => (before || now).then_some(EventType::Deleted),
        EventType::Modified => match (before, now) {
            (true, true) => Some(EventType::Modified),
            (false, true) => Some(EventType::Added),
            (true, false) => Some(EventType::Deleted),
            (false, false) => None,
        },
    }
}

/// Starts a watch; the returned channel yields the response body's chunks.
pub fn start(
    store: Arc<Mutex<Store>>,
    request: WatchRequest,
    mut compactions: tokio::sync::watch::Receiver<u64>,
) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel::<Bytes>(1024);
    let key = request.encoding.info.key();
    let setup = {
        let Ok(mut guard) = store.lock() else {
            return rx;
        };
        let current = guard.revision();
        let initial_state = request.send_initial_events || request.resource_version.is_none();
        let from = if initial_state {
            current
        } else {
            request.resource_version.unwrap_or(current)
        };
        guard.watch_from(&key, from).map(|(backlog, receiver)| {
            let initial: Vec<Arc<Stored>> = if initial_state {
                guard
                    .list(&key, request.filter.namespace.as_deref(), None)
                    .filter(|s| request.filter.matches(&s.value))
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            };
            (initial, backlog, receiver, current.max(from))
        })
    };
    compactions.mark_unchanged();
    tokio::spawn(async move {
        let (initial, backlog, mut receiver, mut seen) = match setup {
            Ok(parts) => parts,
            Err(error) => {
                let _ = tx.send(error_line(&error)).await;
                return;
            }
        };
        let encoding = &request.encoding;
        for stored in &initial {
            if tx
                .send(event_line("ADDED", &encoding.object_bytes(stored)))
                .await
                .is_err()
            {
                return;
            }
        }
        if request.send_initial_events
            && request.bookmarks
            && tx.send(bookmark_line(encoding, seen, true)).await.is_err()
        {
            return;
        }
        for event in &backlog {
            if let Some(kind) = visible(&request.filter, event)
                && tx
                    .send(event_line(
                        kind.as_str(),
                        &encoding.object_bytes(&event.object),
                    ))
                    .await
                    .is_err()
            {
                return;
            }
            seen = seen.max(event.revision);
        }
        let deadline = tokio::time::sleep(request.timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(request.bookmark_interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                received = receiver.recv() => match received {
                    Ok(event) => {
                        seen = seen.max(event.revision);
                        if event.resource != key {
                            continue;
                        }
                        if let Some(kind) = visible(&request.filter, &event)
                            && tx.send(event_line(kind.as_str(), &encoding.object_bytes(&event.object))).await.is_err() {
                                return;
                            }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let _ = tx.send(error_line(&ApiError::expired(seen, seen + 1))).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticker.tick(), if request.bookmarks => {
                    // With nothing queued, every change up to the store's revision was seen.
                    let revision = match store.lock() {
                        Ok(guard) if receiver.is_empty() => guard.revision(),
                        _ => seen,
                    };
                    seen = seen.max(revision);
                    if tx.send(bookmark_line(encoding, seen, false)).await.is_err() {
                        return;
                    }
                }
                _ = compactions.changed() => return,
                () = &mut deadline => return,
                () = tx.closed() => return,
            }
        }
    });
    rx
}
