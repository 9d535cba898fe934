//! Owner-reference garbage collection, in the background: when an owner is gone, dependents
//! whose owners are all gone are deleted and the others lose the dangling reference.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::objects::{self, DeleteOptions};
use crate::store::{EventType, Store, object_key};

/// Settles the dependents of a removed owner.
pub fn collect_dependents(store: &mut Store, owner_uid: &str) {
    for (resource, dependent) in store.dependents_of(owner_uid) {
        let Some(info) = store.registry.get(&resource).cloned() else {
            continue;
        };
        let refs = dependent
            .value
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let living: Vec<Value> = refs
            .into_iter()
            .filter(|r| r["uid"].as_str().is_some_and(|uid| store.uid_exists(uid)))
            .collect();
        let (namespace, name) = object_key(&dependent.value);
        if living.is_empty() {
            // Already gone or already being deleted: either way nothing more to do here.
            let _ = objects::delete(store, &info, &namespace, &name, &DeleteOptions::default());
        } else {
            let mut value = dependent.value.clone();
            value["metadata"]["ownerReferences"] = Value::Array(living);
            value["metadata"]["resourceVersion"] = json!(store.next_revision().to_string());
            store.put(&resource, value);
        }
    }
}

/// Settles every object whose owners include one that no longer exists.
pub fn sweep(store: &mut Store) {
    let mut missing = Vec::new();
    for resource in store.resources_with_objects() {
        for stored in store.list(&resource, None, None) {
            if let Some(refs) = stored
                .value
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
            {
                for uid in refs.iter().filter_map(|r| r["uid"].as_str()) {
                    if !store.uid_exists(uid) {
                        missing.push(uid.to_owned());
                    }
                }
            }
        }
    }
    missing.sort();
    missing.dedup();
    for uid in missing {
        collect_dependents(store, &uid);
    }
}

/// Runs the collector until the store's event channel closes.
pub async fn run(store: Arc<Mutex<Store>>) {
    let mut events = match store.lock() {
        Ok(store) => store.subscribe(),
        Err(_) => return,
    };
    loop {
        match events.recv().await {
            Ok(event) if event.kind == EventType::Deleted => {
                let uid = event.object.uid().to_owned();
                let Ok(mut store) = store.lock() else { return };
                collect_dependents(&mut store, &uid);
            }
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => {
                let Ok(mut store) = store.lock() else { return };
                sweep(&mut store);
            }
            Err(RecvError::Closed) => return,
        }
    }
}
