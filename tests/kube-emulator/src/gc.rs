//! Owner-reference garbage collection, in the background: when an owner is gone, dependents
//! whose owners are all gone are deleted and the others lose the dangling reference.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::objects::{self, DeleteOptions, FOREGROUND_DELETION};
use crate::registry::ResourceKey;
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

/// A foreground deletion (an object marked for deletion, held by `foregroundDeletion`): its
/// dependents are deleted (or, with other living owners, lose the reference), then the
/// finalizer goes, and with it the object if no other finalizer holds it. Dependents held by
/// finalizers of their own are not waited for.
pub fn finish_foreground(store: &mut Store, resource: &ResourceKey, owner: &Value) {
    let held = |value: &Value| {
        value.pointer("/metadata/deletionTimestamp").is_some()
            && value
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|f| f.as_str() == Some(FOREGROUND_DELETION)))
    };
    if !held(owner) {
        return;
    }
    let owner_uid = owner["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for (dependent_resource, dependent) in store.dependents_of(&owner_uid) {
        let Some(info) = store.registry.get(&dependent_resource).cloned() else {
            continue;
        };
        let others: Vec<Value> = dependent
            .value
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["uid"].as_str() != Some(owner_uid.as_str()))
            .filter(|r| r["uid"].as_str().is_some_and(|uid| store.uid_exists(uid)))
            .collect();
        let (namespace, name) = object_key(&dependent.value);
        if others.is_empty() {
            let _ = objects::delete(store, &info, &namespace, &name, &DeleteOptions::default());
        } else {
            let mut value = dependent.value.clone();
            value["metadata"]["ownerReferences"] = Value::Array(others);
            value["metadata"]["resourceVersion"] = json!(store.next_revision().to_string());
            store.put(&dependent_resource, value);
        }
    }
    // The object as it is now: the finalizer removed from its latest state.
    let (namespace, name) = object_key(owner);
    let Some(latest) = store.get(resource, &namespace, &name) else {
        return;
    };
    if !held(&latest.value) {
        return;
    }
    let mut value = latest.value.clone();
    let remaining: Vec<Value> = value["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f.as_str() != Some(FOREGROUND_DELETION))
        .collect();
    let finished = remaining.is_empty();
    value["metadata"]["finalizers"] = Value::Array(remaining);
    value["metadata"]["resourceVersion"] = json!(store.next_revision().to_string());
    store.put(resource, value);
    if finished && let Some(info) = store.registry.get(resource).cloned() {
        objects::remove_now(store, &info, &namespace, &name);
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
    // Foreground deletions whose marking event was among those missed.
    for resource in store.resources_with_objects() {
        let marked: Vec<Value> = store
            .list(&resource, None, None)
            .filter(|s| s.value.pointer("/metadata/deletionTimestamp").is_some())
            .map(|s| s.value.clone())
            .collect();
        for owner in marked {
            finish_foreground(store, &resource, &owner);
        }
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
            Ok(event) => {
                let Ok(mut store) = store.lock() else { return };
                finish_foreground(&mut store, &event.resource, &event.object.value);
            }
            Err(RecvError::Lagged(_)) => {
                let Ok(mut store) = store.lock() else { return };
                sweep(&mut store);
            }
            Err(RecvError::Closed) => return,
        }
    }
}
