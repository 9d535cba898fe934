//! DELETE: preconditions, finalizers and deletionTimestamp, orphaning, namespaces that
//! terminate, and what goes with a CustomResourceDefinition.

use super::*;

/// How dependents are treated when their owner goes (`propagationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Dependents are collected after the owner is gone.
    #[default]
    Background,
    /// The owner is held by the `foregroundDeletion` finalizer while the collector deletes its
    /// dependents (`gc::finish_foreground`).
    Foreground,
    /// Dependents lose their owner reference and stay.
    Orphan,
}

/// The finalizer a foreground deletion holds its object with until its dependents are gone.
pub const FOREGROUND_DELETION: &str = "foregroundDeletion";

/// Body and query options of a DELETE.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Propagation,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    pub fn from_body(
        body: &Value,
        query_propagation: Option<&str>,
        dry_run: bool,
    ) -> ApiResult<Self> {
        let policy = body["propagationPolicy"].as_str().or(query_propagation);
        let propagation = match policy {
            None | Some("Background") => Propagation::Background,
            Some("Foreground") => Propagation::Foreground,
            Some("Orphan") => Propagation::Orphan,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy must be Orphan, Background or Foreground, not {other:?}"
                )));
            }
        };
        let orphan = body["orphanDependents"].as_bool() == Some(true);
        Ok(Self {
            propagation: if orphan {
                Propagation::Orphan
            } else {
                propagation
            },
            precondition_uid: body
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_owned),
            precondition_resource_version: body
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned),
            dry_run: dry_run || body["dryRun"].as_array().is_some_and(|d| !d.is_empty()),
        })
    }
}

/// What a DELETE did.
#[derive(Debug)]
pub enum Deleted {
    /// Gone now; the last state.
    Removed(Arc<Stored>),
    /// Still held by finalizers; now marked with a deletionTimestamp.
    Pending(Arc<Stored>),
}

/// Deletes an object, or marks it for deletion while finalizers remain.
pub fn delete(
    store: &mut Store,
    info: &ResourceInfo,
    namespace: &str,
    name: &str,
    options: &DeleteOptions,
) -> ApiResult<Deleted> {
    let live = store
        .get(&info.key(), namespace, name)
        .ok_or_else(|| ApiError::not_found(&resource_name(info), name))?;
    if options
        .precondition_uid
        .as_deref()
        .is_some_and(|uid| uid != live.uid())
    {
        return Err(ApiError::new(
            StatusReason::Conflict,
            format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                options.precondition_uid.as_deref().unwrap_or_default(),
                live.uid()
            ),
        ));
    }
    if options
        .precondition_resource_version
        .as_deref()
        .is_some_and(|rv| Some(rv) != text(&live.value, "/metadata/resourceVersion"))
    {
        return Err(ApiError::stale(&resource_name(info), name));
    }
    if options.dry_run {
        return Ok(Deleted::Removed(live));
    }
    if options.propagation == Propagation::Orphan {
        orphan_dependents(store, live.uid());
    }
    let is_namespace = info.group.is_empty() && info.plural == "namespaces";
    let foreground = options.propagation == Propagation::Foreground && !is_namespace;
    if !finalizers(&live.value).is_empty() || is_namespace || foreground {
        if live.value.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(Deleted::Pending(live));
        }
        let mut marked = live.value.clone();
        if foreground {
            let mut held = finalizers(&live.value);
            held.push(FOREGROUND_DELETION.to_owned());
            marked["metadata"]["finalizers"] = json!(held);
        }
        marked["metadata"]["deletionTimestamp"] = json!(ids::now_rfc3339());
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        // Marking for deletion bumps the generation, as the API server does for kinds without
        // graceful deletion.
        if let Some(generation) = marked
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
        {
            marked["metadata"]["generation"] = json!(generation + 1);
        }
        if is_namespace {
            marked["status"] = json!({"phase": "Terminating"});
        }
        marked["metadata"]["resourceVersion"] = json!(store.next_revision().to_string());
        let stored = store.put(&info.key(), marked);
        if is_namespace {
            empty_namespace(store, name);
            if let Some(removed) = finish_namespace(store, name) {
                return Ok(Deleted::Removed(removed));
            }
        }
        return Ok(Deleted::Pending(stored));
    }
    remove_now(store, info, namespace, name)
        .map(Deleted::Removed)
        .ok_or_else(|| ApiError::not_found(&resource_name(info), name))
}

/// Removes an object from storage and settles what depends on it at once: the custom
/// resources of a definition and a terminating namespace that is now empty. Owner references
/// are collected separately, in the background (see `gc`).
pub fn remove_now(
    store: &mut Store,
    info: &ResourceInfo,
    namespace: &str,
    name: &str,
) -> Option<Arc<Stored>> {
    let removed = store.remove(&info.key(), namespace, name)?;
    if info.group == "apiextensions.k8s.io"
        && info.plural == "customresourcedefinitions"
        && let Ok(defined) = crate::registry::resource_from_crd(&removed.value)
    {
        let key = defined.key();
        let doomed: Vec<(String, String)> = store
            .list(&key, None, None)
            .map(|s| crate::store::object_key(&s.value))
            .collect();
        for (ns, object_name) in doomed {
            store.remove(&key, &ns, &object_name);
        }
        store.registry.unregister(&key);
    }
    if info.namespaced {
        finish_namespace(store, namespace);
    }
    Some(removed)
}

/// Deletes everything in a namespace being terminated (finalizers still hold their objects).
fn empty_namespace(store: &mut Store, namespace: &str) {
    for (resource, stored) in store.in_namespace(namespace) {
        let Some(info) = store.registry.get(&resource).cloned() else {
            continue;
        };
        let name = text(&stored.value, "/metadata/name")
            .unwrap_or_default()
            .to_owned();
        let _ = delete(store, &info, namespace, &name, &DeleteOptions::default());
    }
}

/// Removes a terminating namespace once nothing is left in it.
fn finish_namespace(store: &mut Store, namespace: &str) -> Option<Arc<Stored>> {
    let namespaces = crate::registry::ResourceKey {
        group: String::new(),
        plural: "namespaces".into(),
    };
    let ns = store.get(&namespaces, "", namespace)?;
    if ns.value.pointer("/metadata/deletionTimestamp").is_none()
        || !store.in_namespace(namespace).is_empty()
    {
        return None;
    }
    store.remove(&namespaces, "", namespace)
}

/// Drops owner references to `uid` from its dependents (propagationPolicy=Orphan).
fn orphan_dependents(store: &mut Store, uid: &str) {
    for (resource, dependent) in store.dependents_of(uid) {
        let mut value = dependent.value.clone();
        if let Some(refs) = value
            .pointer_mut("/metadata/ownerReferences")
            .and_then(Value::as_array_mut)
        {
            refs.retain(|r| r["uid"].as_str() != Some(uid));
        }
        value["metadata"]["resourceVersion"] = json!(store.next_revision().to_string());
        store.put(&resource, value);
    }
}
