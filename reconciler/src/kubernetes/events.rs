//! Kubernetes events that tell the current facts. An `events.k8s.io/v1` Event is written for
//! every distinct fact; only an identical repeat (same object, type, reason, action, reporter and
//! note) within the series window folds into the existing event as a series, the way kube's
//! recorder folds repeats. kube's recorder keys a series without the note, so a second drift by
//! another person only bumped the count of the first event and `kubectl describe` kept showing
//! the first, stale note.
//!
//! The decision (new event or repeat of which event) is [`RecentEvents`], a plain bounded cache
//! driven by a passed-in clock; [`EventRecorder`] only writes what it decides.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nauthera_shared::catalog::{EventReason, EventType};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::kubernetes::kube_io::unread;

/// The action of every event: what the reconciler was doing.
pub const ACTION: &str = "Reconcile";
/// The longest note written, in characters.
pub const NOTE_CHARS: usize = 1000;
/// The API server's limit on a note, in bytes.
const NOTE_BYTES: usize = 1024;
/// How long after its last occurrence an identical event still counts as a repeat (kube's
/// recorder uses the same window).
pub const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);
/// How many recent series are remembered; the least recently seen is forgotten first.
pub const SERIES_CAPACITY: usize = 4096;
/// The longest object name (a DNS subdomain).
const NAME_LIMIT: usize = 253;

/// Who writes the events: the manager's name and this replica's identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reporter {
    pub controller: String,
    pub instance: String,
}

/// The object an event is about, as far as it tells one object from another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Regarding {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

impl From<&ObjectReference> for Regarding {
    fn from(reference: &ObjectReference) -> Regarding {
        Regarding {
            api_version: reference.api_version.clone(),
            kind: reference.kind.clone(),
            namespace: reference.namespace.clone(),
            name: reference.name.clone(),
            uid: reference.uid.clone(),
        }
    }
}

/// What makes two events the same fact: equal keys fold into one series.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    regarding: Regarding,
    type_: EventType,
    reason: EventReason,
    action: &'static str,
    reporter: Arc<Reporter>,
    /// The note as written (capped).
    note: String,
}

/// What a series is remembered by: a digest of its key, so that a remembered series costs a few
/// dozen bytes whatever its object and note (a cold start fills the cache with one series per
/// registration).
type KeyDigest = [u8; 16];

impl SeriesKey {
    fn digest(&self) -> KeyDigest {
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        let regarding = &self.regarding;
        for part in [
            &regarding.api_version,
            &regarding.kind,
            &regarding.namespace,
            &regarding.name,
            &regarding.uid,
        ] {
            match part {
                Some(text) => {
                    field(b"+");
                    field(text.as_bytes());
                }
                None => field(b"-"),
            }
        }
        field(event_type(self.type_).as_bytes());
        field(self.reason.as_str().as_bytes());
        field(self.action.as_bytes());
        field(self.reporter.controller.as_bytes());
        field(self.reporter.instance.as_bytes());
        field(self.note.as_bytes());
        let full = hasher.finalize();
        let mut digest = KeyDigest::default();
        let size = digest.len();
        digest.copy_from_slice(&full[..size]);
        digest
    }

    pub fn new(
        reporter: Arc<Reporter>,
        regarding: &ObjectReference,
        reason: EventReason,
        note: &str,
    ) -> SeriesKey {
        SeriesKey {
            regarding: Regarding::from(regarding),
            type_: reason.event_type(),
            reason,
            action: ACTION,
            reporter,
            note: capped_note(note),
        }
    }
}

/// What to write for an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// A new event with this name.
    Create { name: String },
    /// Another occurrence of the event with this name: its series count becomes `count`.
    Repeat { name: String, count: i32 },
}

/// One remembered series.
#[derive(Debug)]
struct Series {
    name: String,
    count: i32,
    last_observed: Timestamp,
    /// Its place in the order of use.
    tick: u64,
}

/// The recently written events, by series key: bounded in number, and forgotten once the
/// series window has passed since their last occurrence.
#[derive(Debug)]
pub struct RecentEvents {
    capacity: usize,
    window: SignedDuration,
    series: HashMap<KeyDigest, Series>,
    /// The keys in the order they were last seen, oldest first.
    by_use: BTreeMap<u64, KeyDigest>,
    next_tick: u64,
}

impl Default for RecentEvents {
    fn default() -> RecentEvents {
        RecentEvents::new(SERIES_CAPACITY, SERIES_WINDOW)
    }
}

impl RecentEvents {
    pub fn new(capacity: usize, window: SignedDuration) -> RecentEvents {
        RecentEvents {
            capacity: capacity.max(1),
            window,
            series: HashMap::new(),
            by_use: BTreeMap::new(),
            next_tick: 0,
        }
    }

    /// How many series are remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Decides what an event observed at `now` writes, and remembers it: a repeat of a series
    /// seen within the window, otherwise a new event named by `new_name`.
    pub fn observe(
        &mut self,
        key: SeriesKey,
        now: Timestamp,
        new_name: impl FnOnce() -> String,
    ) -> Write {
        self.expire(now);
        let key = key.digest();
        let tick = self.next_tick;
        self.next_tick += 1;
        if let Some(series) = self.series.get_mut(&key)
            && series.last_observed + self.window > now
        {
            series.count = series.count.saturating_add(1);
            series.last_observed = now;
            if let Some(key) = self.by_use.remove(&series.tick) {
                self.by_use.insert(tick, key);
            }
            series.tick = tick;
            return Write::Repeat {
                name: series.name.clone(),
                count: series.count,
            };
        }
        self.forget_digest(&key);
        let name = new_name();
        self.by_use.insert(tick, key);
        self.series.insert(
            key,
            Series {
                name: name.clone(),
                count: 1,
                last_observed: now,
                tick,
            },
        );
        while self.series.len() > self.capacity {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.series.remove(&oldest);
        }
        Write::Create { name }
    }

    /// Forgets a series, so that the next identical event is a new one (its event could not be
    /// written, or is gone).
    pub fn forget(&mut self, key: &SeriesKey) {
        self.forget_digest(&key.digest());
    }

    fn forget_digest(&mut self, key: &KeyDigest) {
        if let Some(series) = self.series.remove(key) {
            self.by_use.remove(&series.tick);
        }
    }

    /// Forgets the series whose last occurrence is a window or more before `now`. The oldest
    /// come first; a clock that stepped back only leaves a few for later.
    fn expire(&mut self, now: Timestamp) {
        while let Some(entry) = self.by_use.first_entry() {
            let expired = self
                .series
                .get(entry.get())
                .is_none_or(|series| series.last_observed + self.window <= now);
            if !expired {
                break;
            }
            let key = entry.remove();
            self.series.remove(&key);
        }
    }
}

/// The note as written: at most [`NOTE_CHARS`] characters and the API server's byte limit.
pub fn capped_note(note: &str) -> String {
    let mut bytes = 0;
    note.chars()
        .take(NOTE_CHARS)
        .take_while(|c| {
            bytes += c.len_utf8();
            bytes <= NOTE_BYTES
        })
        .collect()
}

/// A new event's name: `<object name>.<hex>`, the hex from the time and a random salt so that
/// two events of one object never collide; shortened to a valid object name.
pub fn event_name(object: &str, now: Timestamp, salt: u16) -> String {
    let suffix = format!(".{:x}{salt:04x}", now.as_nanosecond());
    let room = NAME_LIMIT.saturating_sub(suffix.len());
    let prefix: String = object.chars().take(room).collect();
    let prefix = prefix.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{prefix}{suffix}")
}

/// A new event, as kube's recorder writes it, with this name.
pub fn new_event(
    reporter: &Reporter,
    regarding: &ObjectReference,
    key: &SeriesKey,
    name: String,
    now: Timestamp,
) -> Event {
    let type_ = event_type(key.type_);
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        action: Some(key.action.to_owned()),
        reason: Some(key.reason.as_str().to_owned()),
        note: Some(key.note.clone()),
        type_: Some(type_.to_owned()),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding.clone()),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(reporter.instance.clone()),
        ..Event::default()
    }
}

fn event_type(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// The patch that records another occurrence of an event.
pub fn repeat_patch(count: i32, now: Timestamp) -> serde_json::Value {
    serde_json::json!({
        "series": EventSeries {
            count,
            last_observed_time: MicroTime(now),
        }
    })
}

/// Writes events through `events.k8s.io/v1`. Clones share the recent series.
#[derive(Clone)]
pub struct EventRecorder {
    client: kube::Client,
    reporter: Arc<Reporter>,
    recent: Arc<Mutex<RecentEvents>>,
}

impl EventRecorder {
    pub fn new(client: kube::Client, reporter: Reporter) -> EventRecorder {
        EventRecorder {
            client,
            reporter: Arc::new(reporter),
            recent: Arc::default(),
        }
    }

    /// Writes an event about `regarding` observed at `now`: a new event, or the next count of an
    /// identical one. An identical event that is gone from the cluster starts a new one.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        reason: EventReason,
        note: &str,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        let key = SeriesKey::new(self.reporter.clone(), regarding, reason, note);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let object = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        // At most twice: a repeat of an event that is gone is written again as a new one.
        for _ in 0..2 {
            let write = self.recent().observe(key.clone(), now, || {
                event_name(object, now, rand::random::<u16>())
            });
            match write {
                Write::Create { name } => {
                    let event = new_event(&self.reporter, regarding, &key, name, now);
                    let created = unread::create(&events, &PostParams::default(), &event).await;
                    if created.is_err() {
                        self.recent().forget(&key);
                    }
                    return created;
                }
                Write::Repeat { name, count } => {
                    let patch = repeat_patch(count, now);
                    match unread::patch(
                        &events,
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    {
                        Err(kube::Error::Api(status)) if status.code == 404 => {
                            self.recent().forget(&key);
                        }
                        result => return result,
                    }
                }
            }
        }
        Ok(())
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, RecentEvents> {
        // The cache holds no invariant a panic elsewhere could break.
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One event waiting to be written.
#[derive(Debug)]
struct QueuedEvent {
    regarding: ObjectReference,
    reason: EventReason,
    note: String,
    now: Timestamp,
}

/// Events on their way out, so that a reconcile does not wait for its events: a few workers
/// write them in the order they came. A full queue makes the sender wait, so memory stays
/// bounded and no event is dropped; a failed write is logged and not retried.
#[derive(Clone, Debug)]
pub struct EventQueue {
    sender: mpsc::Sender<QueuedEvent>,
}

impl EventQueue {
    /// Starts `workers` writers on `tasks` (stopped with them) behind a queue of `capacity`.
    pub fn start(
        recorder: EventRecorder,
        tasks: &mut JoinSet<()>,
        workers: usize,
        capacity: usize,
    ) -> EventQueue {
        let (sender, receiver) = mpsc::channel::<QueuedEvent>(capacity);
        let receiver = Arc::new(tokio::sync::Mutex::new(receiver));
        for _ in 0..workers.max(1) {
            let receiver = receiver.clone();
            let recorder = recorder.clone();
            tasks.spawn(async move {
                loop {
                    let Some(event) = receiver.lock().await.recv().await else {
                        return;
                    };
                    let written = recorder
                        .publish(&event.regarding, event.reason, &event.note, event.now)
                        .await;
                    if let Err(error) = written {
                        tracing::warn!(
                            reason = event.reason.as_str(),
                            resource = event.regarding.name.as_deref().unwrap_or_default(),
                            error = %error,
                            "recording an event failed"
                        );
                    }
                }
            });
        }
        EventQueue { sender }
    }

    /// Queues an event about `regarding`, observed at `now`.
    pub async fn send(
        &self,
        regarding: ObjectReference,
        reason: EventReason,
        note: &str,
        now: Timestamp,
    ) {
        let event = QueuedEvent {
            regarding,
            reason,
            note: note.to_owned(),
            now,
        };
        // Closed only while the leader's tasks stop; the event goes with them.
        let _ = self.sender.send(event).await;
    }
}

#[cfg(test)]
mod tests;
