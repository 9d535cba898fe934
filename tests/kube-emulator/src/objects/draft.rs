//! Writes prepared outside the store's lock. The API server does a write's work (decoding,
//! admission, validation, field ownership) for many requests at once and serializes only the
//! commit to storage; with one lock around the whole write the emulator served a single write
//! at a time and became what a benchmark measured. A [`Draft`] reads the store through brief
//! locks and keeps what it would store; [`commit`] then checks, under the lock, that nothing it
//! read has changed, and stores it. A draft that read something since changed is prepared again,
//! the way the API server retries an update whose object moved in storage.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};

use super::Written;
use crate::registry::{ResourceInfo, ResourceKey};
use crate::store::{Store, Stored};

/// What a write reads of the store and how it stores: the store itself, under its lock, or a
/// [`Draft`].
pub trait Access {
    fn get(&mut self, resource: &ResourceKey, namespace: &str, name: &str) -> Option<Arc<Stored>>;
    /// The registered resource under `key`.
    fn info(&mut self, key: &ResourceKey) -> Option<ResourceInfo>;
    /// The resource of a kind served at `group/version`.
    fn resource_for_kind(&mut self, group: &str, version: &str, kind: &str)
    -> Option<ResourceInfo>;
    /// Every object of a resource. Not recorded as read: what lists serve (admission policies
    /// and their parameters) may change while a write is prepared, as the API server's
    /// informers may lag.
    fn list_all(&mut self, resource: &ResourceKey) -> Vec<Arc<Stored>>;
    /// The admission policies and bindings in force (not recorded as read either).
    fn loaded_policies(&mut self) -> Arc<crate::admission_policy::Loaded>;
    /// The revision the next write gets (a draft's is provisional).
    fn next_revision(&mut self) -> u64;
    fn put(&mut self, resource: &ResourceKey, value: Value) -> Arc<Stored>;
    /// Registers the resource a CustomResourceDefinition defines.
    fn register(&mut self, info: ResourceInfo);
    /// Removes an object whose last finalizer is gone, with what depends on it.
    fn remove_now(&mut self, info: &ResourceInfo, namespace: &str, name: &str);
}

impl Access for Store {
    fn get(&mut self, resource: &ResourceKey, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        Store::get(self, resource, namespace, name)
    }

    fn info(&mut self, key: &ResourceKey) -> Option<ResourceInfo> {
        self.registry.get(key).cloned()
    }

    fn resource_for_kind(
        &mut self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Option<ResourceInfo> {
        self.registry.find_kind(group, version, kind).cloned()
    }

    fn list_all(&mut self, resource: &ResourceKey) -> Vec<Arc<Stored>> {
        Store::list(self, resource, None, None).cloned().collect()
    }

    fn loaded_policies(&mut self) -> Arc<crate::admission_policy::Loaded> {
        self.admission.clone()
    }

    fn next_revision(&mut self) -> u64 {
        Store::next_revision(self)
    }

    fn put(&mut self, resource: &ResourceKey, value: Value) -> Arc<Stored> {
        Store::put(self, resource, value)
    }

    fn register(&mut self, info: ResourceInfo) {
        self.registry.register(info);
    }

    fn remove_now(&mut self, info: &ResourceInfo, namespace: &str, name: &str) {
        super::remove_now(self, info, namespace, name);
    }
}

/// One object a draft read, and what it found.
struct Read {
    resource: ResourceKey,
    namespace: String,
    name: String,
    found: Option<Arc<Stored>>,
}

/// A write prepared without holding the store's lock.
pub struct Draft<'a> {
    store: &'a Mutex<Store>,
    reads: Vec<Read>,
    /// Where the one object it stores goes.
    stored_under: Option<ResourceKey>,
    /// It did what only the locked store can do (register a resource, remove an object, store
    /// twice): it is carried out under the lock instead.
    needs_lock: bool,
}

impl<'a> Draft<'a> {
    pub fn new(store: &'a Mutex<Store>) -> Draft<'a> {
        Draft {
            store,
            reads: Vec::new(),
            stored_under: None,
            needs_lock: false,
        }
    }

    fn locked<T>(&mut self, read: impl FnOnce(&Store) -> T) -> Option<T> {
        match self.store.lock() {
            Ok(store) => Some(read(&store)),
            Err(_) => {
                self.needs_lock = true;
                None
            }
        }
    }
}

impl Access for Draft<'_> {
    fn get(&mut self, resource: &ResourceKey, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        let found = self.locked(|store| store.get(resource, namespace, name))?;
        self.reads.push(Read {
            resource: resource.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            found: found.clone(),
        });
        found
    }

    fn info(&mut self, key: &ResourceKey) -> Option<ResourceInfo> {
        self.locked(|store| store.registry.get(key).cloned())?
    }

    fn resource_for_kind(
        &mut self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Option<ResourceInfo> {
        self.locked(|store| store.registry.find_kind(group, version, kind).cloned())?
    }

    fn list_all(&mut self, resource: &ResourceKey) -> Vec<Arc<Stored>> {
        self.locked(|store| store.list(resource, None, None).cloned().collect())
            .unwrap_or_default()
    }

    fn loaded_policies(&mut self) -> Arc<crate::admission_policy::Loaded> {
        self.locked(|store| store.admission.clone())
            .unwrap_or_default()
    }

    fn next_revision(&mut self) -> u64 {
        self.locked(Store::next_revision).unwrap_or_default()
    }

    fn put(&mut self, resource: &ResourceKey, value: Value) -> Arc<Stored> {
        if self.stored_under.replace(resource.clone()).is_some() {
            self.needs_lock = true;
        }
        // Encoded when committed, with its final resourceVersion.
        Arc::new(Stored {
            value,
            json: Bytes::new(),
        })
    }

    fn register(&mut self, _: ResourceInfo) {
        self.needs_lock = true;
    }

    fn remove_now(&mut self, _: &ResourceInfo, _: &str, _: &str) {
        self.needs_lock = true;
    }
}

/// What committing a draft came to.
pub enum Committed {
    Done(Written),
    /// Something the draft read changed since: prepare it again.
    Stale,
    /// The draft did what only the locked store can do: carry the write out under the lock.
    NeedsLock,
}

/// Stores what a draft prepared, if everything it read is still as it found it.
pub fn commit(store: &mut Store, draft: Draft<'_>, written: Written) -> Committed {
    if draft.needs_lock {
        return Committed::NeedsLock;
    }
    let unchanged = draft.reads.iter().all(|read| {
        let now = store.get(&read.resource, &read.namespace, &read.name);
        match (&now, &read.found) {
            (Some(now), Some(found)) => Arc::ptr_eq(now, found),
            (None, None) => true,
            _ => false,
        }
    });
    if !unchanged {
        return Committed::Stale;
    }
    let Some(resource) = draft.stored_under else {
        return Committed::Done(written);
    };
    let mut value =
        Arc::try_unwrap(written.object).map_or_else(|shared| shared.value.clone(), |s| s.value);
    value["metadata"]["resourceVersion"] = json!(store.next_revision().to_string());
    Committed::Done(Written {
        object: store.put(&resource, value),
        ..written
    })
}

#[cfg(test)]
mod tests {
    use super::super::{PatchKind, WriteContext, create, patch};
    use super::*;

    fn context() -> WriteContext {
        WriteContext {
            manager: "test".into(),
            dry_run: false,
            force: false,
            validation: Default::default(),
            group: String::new(),
            version: "v1".into(),
            requester: None,
        }
    }

    fn resource(store: &Store, plural: &str) -> ResourceInfo {
        store
            .registry
            .find("", "v1", plural)
            .cloned()
            .expect("a built-in resource")
    }

    /// A store with namespace `team` and ConfigMap `team/settings` holding `a: "1"`.
    fn seeded() -> Mutex<Store> {
        let mut store = Store::default();
        let namespaces = resource(&store, "namespaces");
        let configmaps = resource(&store, "configmaps");
        create(
            &mut store,
            &namespaces,
            "",
            json!({"metadata": {"name": "team"}}),
            &context(),
        )
        .unwrap();
        create(
            &mut store,
            &configmaps,
            "team",
            json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}),
            &context(),
        )
        .unwrap();
        Mutex::new(store)
    }

    fn merge(store: &mut dyn Access, info: &ResourceInfo, body: &str) -> Written {
        patch(
            store,
            info,
            "team",
            "settings",
            None,
            PatchKind::Merge,
            body.as_bytes(),
            &context(),
        )
        .unwrap()
    }

    #[test]
    fn a_draft_is_stored_with_the_next_revision_when_nothing_it_read_changed() {
        let shared = seeded();
        let configmaps = resource(&shared.lock().unwrap(), "configmaps");
        let before = shared.lock().unwrap().revision();
        let mut draft = Draft::new(&shared);
        let written = merge(&mut draft, &configmaps, r#"{"data": {"b": "2"}}"#);
        // Nothing is stored until the commit.
        assert_eq!(shared.lock().unwrap().revision(), before);
        let Committed::Done(written) = commit(&mut shared.lock().unwrap(), draft, written) else {
            panic!("the draft read nothing that changed");
        };
        let store = shared.lock().unwrap();
        assert_eq!(store.revision(), before + 1);
        assert_eq!(
            written.object.value["metadata"]["resourceVersion"],
            json!((before + 1).to_string())
        );
        let stored = store.get(&configmaps.key(), "team", "settings").unwrap();
        assert_eq!(stored.value["data"], json!({"a": "1", "b": "2"}));
        // Encoded for lists and watches, with its final resourceVersion.
        let encoded: Value = serde_json::from_slice(&stored.json).unwrap();
        assert_eq!(encoded, stored.value);
    }

    #[test]
    fn a_draft_whose_object_changed_meanwhile_is_stale_and_changes_nothing() {
        let shared = seeded();
        let configmaps = resource(&shared.lock().unwrap(), "configmaps");
        let mut draft = Draft::new(&shared);
        let written = merge(&mut draft, &configmaps, r#"{"data": {"b": "2"}}"#);
        // Another write lands first.
        merge(
            &mut *shared.lock().unwrap(),
            &configmaps,
            r#"{"data": {"c": "3"}}"#,
        );
        let revision = shared.lock().unwrap().revision();
        let committed = commit(&mut shared.lock().unwrap(), draft, written);
        assert!(matches!(committed, Committed::Stale));
        let store = shared.lock().unwrap();
        assert_eq!(store.revision(), revision);
        let stored = store.get(&configmaps.key(), "team", "settings").unwrap();
        assert_eq!(stored.value["data"], json!({"a": "1", "c": "3"}));
    }

    #[test]
    fn a_create_raced_by_another_is_stale() {
        let shared = seeded();
        let configmaps = resource(&shared.lock().unwrap(), "configmaps");
        let body = json!({"metadata": {"name": "fresh"}, "data": {}});
        let mut draft = Draft::new(&shared);
        let written = create(&mut draft, &configmaps, "team", body.clone(), &context()).unwrap();
        create(
            &mut *shared.lock().unwrap(),
            &configmaps,
            "team",
            body,
            &context(),
        )
        .unwrap();
        let committed = commit(&mut shared.lock().unwrap(), draft, written);
        assert!(matches!(committed, Committed::Stale));
    }

    #[test]
    fn what_only_the_locked_store_does_is_left_to_it() {
        let shared = Mutex::new(Store::default());
        let mut draft = Draft::new(&shared);
        let info = resource(&shared.lock().unwrap(), "namespaces");
        draft.register(info);
        let written = Written {
            object: Arc::new(Stored {
                value: json!({}),
                json: Bytes::new(),
            }),
            created: true,
            warnings: Vec::new(),
        };
        let committed = commit(&mut shared.lock().unwrap(), draft, written);
        assert!(matches!(committed, Committed::NeedsLock));
    }
}
