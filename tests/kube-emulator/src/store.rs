//! Storage: every object under one global revision counter, the history of changes for
//! watches, and the fan-out of new changes to live watchers.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::registry::{Registry, ResourceKey};
use crate::status::ApiError;

/// A stored object and its JSON encoding, made once per revision so lists and watches are
/// served by copying bytes.
#[derive(Debug)]
pub struct Stored {
    pub value: Value,
    pub json: Bytes,
}

impl Stored {
    pub fn new(value: Value) -> Arc<Self> {
        let json = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        Arc::new(Self { value, json })
    }

    pub fn uid(&self) -> &str {
        self.value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as watchers see it.
#[derive(Debug)]
pub struct Event {
    pub revision: u64,
    pub resource: ResourceKey,
    pub kind: EventType,
    pub object: Arc<Stored>,
    /// The object before this change (for selector transitions).
    pub previous: Option<Arc<Stored>>,
}

/// The changes after a revision and the receiver of those to come.
pub type WatchStart = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);

/// The namespace and name of an object (empty namespace for cluster-scoped ones).
pub type ObjectKey = (String, String);

/// Events kept before the oldest ones are compacted away on their own.
const HISTORY_LIMIT: usize = 250_000;

pub struct Store {
    pub registry: Registry,
    revision: u64,
    objects: HashMap<ResourceKey, BTreeMap<ObjectKey, Arc<Stored>>>,
    uids: HashMap<String, (ResourceKey, ObjectKey)>,
    history: VecDeque<Arc<Event>>,
    /// Every change after this revision is in `history`.
    compacted_at: u64,
    /// Every change, for the garbage collector.
    events: broadcast::Sender<Arc<Event>>,
    /// The changes of each watched resource: a watch wakes for its own resource only, as the
    /// API server's watch cache serves each resource apart.
    watched: HashMap<ResourceKey, broadcast::Sender<Arc<Event>>>,
    /// The admission policies and bindings in force: loaded from the stored ones a moment after
    /// they change, as the API server's informers load them (see `admission_policy::loader`).
    pub admission: Arc<crate::admission_policy::Loaded>,
}

/// How many changes of one resource a watch may fall behind before it is expired.
const WATCH_BUFFER: usize = 32_768;

impl Default for Store {
    fn default() -> Self {
        let (events, _) = broadcast::channel(65_536);
        Self {
            registry: Registry::default(),
            revision: 1,
            objects: HashMap::new(),
            uids: HashMap::new(),
            history: VecDeque::new(),
            compacted_at: 1,
            events,
            watched: HashMap::new(),
            admission: Arc::default(),
        }
    }
}

pub fn object_key(value: &Value) -> ObjectKey {
    let text = |p: &str| {
        value
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    (text("/metadata/namespace"), text("/metadata/name"))
}

impl Store {
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The next revision, for an object about to be written.
    pub fn next_revision(&self) -> u64 {
        self.revision + 1
    }

    pub fn get(&self, resource: &ResourceKey, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        self.objects
            .get(resource)?
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Objects of a resource in key order, in one namespace or all (`None`), after `after`.
    pub fn list<'a>(
        &'a self,
        resource: &ResourceKey,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = &'a Arc<Stored>> + 'a {
        use std::ops::Bound;
        let start = match after {
            Some(key) => Bound::Excluded(key.clone()),
            None => match namespace {
                Some(ns) => Bound::Included((ns.to_owned(), String::new())),
                None => Bound::Unbounded,
            },
        };
        self.objects
            .get(resource)
            .into_iter()
            .flat_map(move |objects| objects.range((start.clone(), Bound::Unbounded)))
            .take_while(move |((ns, _), _)| namespace.is_none_or(|wanted| ns == wanted))
            .map(|(_, stored)| stored)
    }

    /// The objects of `resource` as they stood at `revision`, in key order after `after`: the
    /// later pages of a list show the snapshot of its first page, as the API server serves them,
    /// so that a watch started from the list's resourceVersion misses no change made while the
    /// pages were read. `410 Expired` once the history no longer reaches back to `revision`.
    pub fn list_at<'a>(
        &'a self,
        resource: &ResourceKey,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
        revision: u64,
    ) -> Result<impl Iterator<Item = &'a Arc<Stored>> + 'a, ApiError> {
        use std::ops::Bound;
        if revision < self.compacted_at {
            return Err(ApiError::expired(revision, self.compacted_at));
        }
        // Each object changed since `revision`, with what it was then (none: created since);
        // walking the changes newest first leaves the oldest change's "before" in place.
        let start = self.history.partition_point(|e| e.revision <= revision);
        let mut then: BTreeMap<ObjectKey, Option<&'a Arc<Stored>>> = BTreeMap::new();
        for event in self.history.range(start..).rev() {
            if &event.resource == resource {
                then.insert(object_key(&event.object.value), event.previous.as_ref());
            }
        }
        let from = match after {
            Some(key) => Bound::Excluded(key.clone()),
            None => match namespace {
                Some(ns) => Bound::Included((ns.to_owned(), String::new())),
                None => Bound::Unbounded,
            },
        };
        let in_namespace = move |key: &ObjectKey| namespace.is_none_or(|wanted| key.0 == wanted);
        let now = self
            .list(resource, namespace, after)
            .map(|stored| (object_key(&stored.value), stored));
        let changed: Vec<Then<'a>> = then
            .range((from, Bound::Unbounded))
            .take_while(|(key, _)| in_namespace(key))
            .map(|(key, stored)| (key.clone(), *stored))
            .collect();
        Ok(Snapshot {
            now: now.peekable(),
            changed: changed.into_iter().peekable(),
        })
    }

    pub fn resources_with_objects(&self) -> Vec<ResourceKey> {
        self.objects
            .iter()
            .filter(|(_, o)| !o.is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Writes an object whose `metadata.resourceVersion` is `next_revision()`.
    pub fn put(&mut self, resource: &ResourceKey, value: Value) -> Arc<Stored> {
        self.revision += 1;
        let key = object_key(&value);
        let stored = Stored::new(value);
        let previous = self
            .objects
            .entry(resource.clone())
            .or_default()
            .insert(key.clone(), stored.clone());
        self.uids
            .insert(stored.uid().to_owned(), (resource.clone(), key));
        let kind = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(resource, kind, stored.clone(), previous);
        stored
    }

    /// Removes an object; its last state, stamped with the deletion's revision, is returned.
    pub fn remove(
        &mut self,
        resource: &ResourceKey,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<Stored>> {
        let previous = self
            .objects
            .get_mut(resource)?
            .remove(&(namespace.to_owned(), name.to_owned()))?;
        self.uids.remove(previous.uid());
        self.revision += 1;
        let mut last = previous.value.clone();
        last["metadata"]["resourceVersion"] = Value::String(self.revision.to_string());
        let stored = Stored::new(last);
        self.record(resource, EventType::Deleted, stored.clone(), Some(previous));
        Some(stored)
    }

    fn record(
        &mut self,
        resource: &ResourceKey,
        kind: EventType,
        object: Arc<Stored>,
        previous: Option<Arc<Stored>>,
    ) {
        let event = Arc::new(Event {
            revision: self.revision,
            resource: resource.clone(),
            kind,
            object,
            previous,
        });
        self.history.push_back(event.clone());
        while self.history.len() > HISTORY_LIMIT {
            if let Some(oldest) = self.history.pop_front() {
                self.compacted_at = oldest.revision;
            }
        }
        // No receivers is fine: nobody watches.
        if let Some(watchers) = self.watched.get(resource) {
            let _ = watchers.send(event.clone());
        }
        let _ = self.events.send(event);
    }

    /// Changes of a resource after `revision` plus a receiver for the ones to come, taken
    /// together so none is missed; `410 Expired` when `revision` is older than the history.
    pub fn watch_from(
        &mut self,
        resource: &ResourceKey,
        revision: u64,
    ) -> Result<WatchStart, ApiError> {
        if revision < self.compacted_at {
            return Err(ApiError::expired(revision, self.compacted_at));
        }
        let start = self.history.partition_point(|e| e.revision <= revision);
        let backlog = self
            .history
            .range(start..)
            .filter(|e| &e.resource == resource)
            .cloned()
            .collect();
        let receiver = self
            .watched
            .entry(resource.clone())
            .or_insert_with(|| broadcast::channel(WATCH_BUFFER).0)
            .subscribe();
        Ok((backlog, receiver))
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// Forgets all history: every resourceVersion handed out so far becomes too old to watch
    /// from, the way an etcd compaction expires them.
    pub fn compact(&mut self) {
        self.history.clear();
        self.revision += 1;
        self.compacted_at = self.revision;
    }

    /// Objects whose owner references name `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<(ResourceKey, Arc<Stored>)> {
        let mut found = Vec::new();
        for (resource, objects) in &self.objects {
            for stored in objects.values() {
                let owned = stored
                    .value
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"].as_str() == Some(uid)));
                if owned {
                    found.push((resource.clone(), stored.clone()));
                }
            }
        }
        found
    }

    pub fn uid_exists(&self, uid: &str) -> bool {
        self.uids.contains_key(uid)
    }

    /// Every namespaced object in a namespace, across resources.
    pub fn in_namespace(&self, namespace: &str) -> Vec<(ResourceKey, Arc<Stored>)> {
        let mut found = Vec::new();
        for (resource, objects) in &self.objects {
            for ((ns, _), stored) in objects {
                if ns == namespace {
                    found.push((resource.clone(), stored.clone()));
                }
            }
        }
        found
    }
}

/// An object's key and what it was at a revision (none: created since).
type Then<'a> = (ObjectKey, Option<&'a Arc<Stored>>);

/// The objects as they are now merged with what the ones changed since a revision were then.
struct Snapshot<'a, Now: Iterator<Item = (ObjectKey, &'a Arc<Stored>)>> {
    now: std::iter::Peekable<Now>,
    changed: std::iter::Peekable<std::vec::IntoIter<Then<'a>>>,
}

impl<'a, Now: Iterator<Item = (ObjectKey, &'a Arc<Stored>)>> Iterator for Snapshot<'a, Now> {
    type Item = &'a Arc<Stored>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let take_changed = match (self.now.peek(), self.changed.peek()) {
                (_, None) => return self.now.next().map(|(_, stored)| stored),
                (None, Some(_)) => true,
                (Some((now, _)), Some((changed, _))) => changed <= now,
            };
            if !take_changed {
                return self.now.next().map(|(_, stored)| stored);
            }
            let (key, then) = self.changed.next()?;
            // An object changed since shows only as it was then (or not at all, if created since).
            if self.now.peek().is_some_and(|(now, _)| *now == key) {
                self.now.next();
            }
            if then.is_some() {
                return then;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> ResourceKey {
        ResourceKey {
            group: String::new(),
            plural: "configmaps".into(),
        }
    }

    fn object(name: &str, store: &Store) -> Value {
        json!({"metadata": {"namespace": "ns", "name": name, "uid": name,
            "resourceVersion": store.next_revision().to_string()}})
    }

    #[test]
    fn watch_replays_changes_after_a_revision_and_expires_after_compaction() {
        let mut store = Store::default();
        let a = object("a", &store);
        store.put(&key(), a);
        let after_a = store.revision();
        let b = object("b", &store);
        store.put(&key(), b);
        store.remove(&key(), "ns", "a");
        let (backlog, _) = store.watch_from(&key(), after_a).unwrap();
        let kinds: Vec<EventType> = backlog.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventType::Added, EventType::Deleted]);
        store.compact();
        let err = store.watch_from(&key(), after_a).unwrap_err();
        assert_eq!(err.code(), 410);
        assert!(store.watch_from(&key(), store.revision()).is_ok());
    }

    #[test]
    fn list_stays_in_its_namespace_and_pages_after_a_key() {
        let mut store = Store::default();
        for (ns, name) in [("a", "1"), ("b", "1"), ("b", "2"), ("c", "1")] {
            let value =
                json!({"metadata": {"namespace": ns, "name": name, "uid": format!("{ns}{name}")}});
            store.put(&key(), value);
        }
        let names: Vec<ObjectKey> = store
            .list(&key(), Some("b"), None)
            .map(|s| object_key(&s.value))
            .collect();
        assert_eq!(names, [("b".into(), "1".into()), ("b".into(), "2".into())]);
        let after = ("b".to_owned(), "1".to_owned());
        assert_eq!(store.list(&key(), None, Some(&after)).count(), 2);
    }

    #[test]
    fn a_later_page_shows_the_first_pages_snapshot() {
        let mut store = Store::default();
        for name in ["a", "b", "c"] {
            let value = object(name, &store);
            store.put(&key(), value);
        }
        let first_page = store.revision();
        let mut a = object("a", &store);
        a["data"] = json!({"changed": "yes"});
        store.put(&key(), a);
        store.remove(&key(), "ns", "b");
        let ab = object("ab", &store);
        store.put(&key(), ab);
        let d = object("d", &store);
        store.put(&key(), d);
        let listed = |at: u64, after: Option<&ObjectKey>| -> Vec<(String, bool)> {
            store
                .list_at(&key(), Some("ns"), after, at)
                .unwrap()
                .map(|s| (object_key(&s.value).1, s.value.get("data").is_some()))
                .collect()
        };
        let then = |name: &str| (name.to_owned(), false);
        assert_eq!(listed(first_page, None), [then("a"), then("b"), then("c")]);
        let after_a = ("ns".to_owned(), "a".to_owned());
        assert_eq!(listed(first_page, Some(&after_a)), [then("b"), then("c")]);
        let now: Vec<String> = listed(store.revision(), None)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(now, ["a", "ab", "c", "d"]);
        store.compact();
        let err = store.list_at(&key(), None, None, first_page).err().unwrap();
        assert_eq!(err.code(), 410);
    }
}
