//! The watches that feed the policy caches: ClientPolicies (compiled as they come), the labels of
//! Namespaces and the ClientApprovals. Each change routes the reconciles it can affect. The
//! namespace labels also decide the shard's namespace selector: each move is told to it
//! ([`NamespaceMoved`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::policy::CompiledPolicy;
use nauthera_shared::resources::{ClientApproval, ClientPolicy};

use super::{Approval, Loaded, Policies};
use crate::server::changes::Route;

/// Told that a namespace's labels moved from `before` to `after` (`None`: not there); answers
/// whether that moved the namespace into or out of the shard's scope (the shard's
/// `ShardScope::namespace_moved`, passed in so that this module does not depend on the shard,
/// which reads the labels kept here).
pub type NamespaceMoved = Box<
    dyn Fn(&str, Option<&BTreeMap<String, String>>, Option<&BTreeMap<String, String>>) -> bool
        + Send
        + Sync,
>;

/// Follows policies, namespace labels and approvals (in each scope: every namespace, or the
/// configured ones) until the leader steps down.
pub async fn follow_policy_inputs(
    policies: Arc<Policies>,
    client: Client,
    scopes: Vec<Option<String>>,
    namespace_moved: NamespaceMoved,
) {
    let approvals = futures::future::join_all(scopes.iter().map(|scope| {
        let api: Api<ClientApproval> = match scope {
            None => Api::all(client.clone()),
            Some(namespace) => Api::namespaced(client.clone(), namespace),
        };
        follow_approvals(&policies, api, scope.clone())
    }));
    tokio::join!(
        follow_policies(&policies, Api::all(client.clone())),
        follow_namespaces(&policies, &namespace_moved, Api::all(client.clone())),
        approvals,
        mark_approvals_loaded(&policies, scopes.len()),
    );
}

/// Whether a watch failed because its kind is not installed (an older CRD set): nothing of it
/// exists, so there is nothing to wait for.
fn not_installed(error: &watcher::Error) -> bool {
    matches!(
        error,
        watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404
    )
}

/// Whether a watch failed because the reconciler's role does not allow it.
fn forbidden(error: &watcher::Error) -> bool {
    matches!(
        error,
        watcher::Error::InitialListFailed(kube::Error::Api(status))
            | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            | watcher::Error::WatchFailed(kube::Error::Api(status)) if status.code == 403
    )
}

fn mark(policies: &Policies, part: impl Fn(&mut Loaded)) {
    policies.loaded.send_if_modified(|loaded| {
        let before = *loaded;
        part(loaded);
        before != *loaded
    });
}

async fn follow_policies(policies: &Policies, api: Api<ClientPolicy>) {
    let mut listing: Vec<ClientPolicy> = Vec::new();
    let mut events =
        std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
    let mut told_missing = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(policy)) => listing.push(policy),
            Ok(Event::InitDone) => {
                let changed = replace_all(policies, std::mem::take(&mut listing));
                policies.keep_client_index();
                // The first listing comes before any decision: nothing to judge again.
                let relisted = policies.loaded.borrow().policies;
                mark(policies, |l| l.policies = true);
                if changed && relisted {
                    policies.route(Route::All);
                }
            }
            Ok(Event::Apply(policy)) => {
                if upsert(policies, &policy) {
                    policies.keep_client_index();
                    policies.route(Route::All);
                }
            }
            Ok(Event::Delete(policy)) => {
                if remove(policies, &policy.name_any()) {
                    policies.keep_client_index();
                    policies.route(Route::All);
                }
            }
            Err(error) if not_installed(&error) => {
                if !told_missing {
                    tracing::warn!("the ClientPolicy CRD is not installed: no policy is enforced");
                    told_missing = true;
                }
                mark(policies, |l| l.policies = true);
            }
            Err(error) if forbidden(&error) => tracing::error!(
                error = %error,
                "the reconciler may not list ClientPolicies: nothing is reconciled until it may \
                 (the ClusterRole in deploy/base/rbac.yaml grants it), so that no policy is \
                 bypassed"
            ),
            Err(error) => tracing::warn!(error = %error, "watching ClientPolicies"),
        }
    }
}

/// What identifies the compiled form of a policy: a new generation (or a new object) is compiled
/// again; a status write is not.
fn version_of(policy: &ClientPolicy) -> (Option<String>, Option<i64>) {
    (policy.metadata.uid.clone(), policy.metadata.generation)
}

/// Compiles a policy into the cache; whether it changed what is enforced.
fn upsert(policies: &Policies, policy: &ClientPolicy) -> bool {
    let name = policy.name_any();
    let known = policies
        .compiled
        .read()
        .ok()
        .and_then(|c| c.get(&name).map(|p| (p.uid.clone(), p.generation)));
    let broken_known = policies
        .broken
        .read()
        .ok()
        .and_then(|b| b.get(&name).map(|_| ()))
        .is_some();
    if known == Some(version_of(policy)) {
        return false;
    }
    match CompiledPolicy::compile(policy) {
        Ok(compiled) => {
            if let Ok(mut broken) = policies.broken.write() {
                broken.remove(&name);
            }
            if let Ok(mut all) = policies.compiled.write() {
                all.insert(name, Arc::new(compiled));
            }
            true
        }
        Err(problem) => {
            tracing::warn!(policy = %name, problem = %problem, "a ClientPolicy does not compile; it enforces nothing until fixed");
            if let Ok(mut broken) = policies.broken.write() {
                broken.insert(name.clone(), problem);
            }
            let removed = policies
                .compiled
                .write()
                .ok()
                .and_then(|mut all| all.remove(&name))
                .is_some();
            removed || !broken_known
        }
    }
}

fn remove(policies: &Policies, name: &str) -> bool {
    let removed = policies
        .compiled
        .write()
        .ok()
        .and_then(|mut all| all.remove(name))
        .is_some();
    if let Ok(mut broken) = policies.broken.write() {
        broken.remove(name);
    }
    removed
}

/// Replaces the cache with a complete listing; whether anything changed.
fn replace_all(policies: &Policies, listing: Vec<ClientPolicy>) -> bool {
    let names: Vec<String> = listing.iter().map(ResourceExt::name_any).collect();
    let stale: Vec<String> = policies
        .compiled
        .read()
        .map(|c| c.keys().filter(|k| !names.contains(k)).cloned().collect())
        .unwrap_or_default();
    let mut changed = false;
    for name in stale {
        changed |= remove(policies, &name);
    }
    for policy in &listing {
        changed |= upsert(policies, policy);
    }
    changed
}

async fn follow_namespaces(
    policies: &Policies,
    namespace_moved: &NamespaceMoved,
    api: Api<PartialObjectMeta<Namespace>>,
) {
    let mut listing: HashMap<String, BTreeMap<String, String>> = HashMap::new();
    let mut events =
        std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(namespace)) => {
                listing.insert(namespace.name_any(), namespace.labels().clone());
            }
            Ok(Event::InitDone) => {
                // Each namespace whose labels the listing changed, and whether that moved it
                // into or out of the shard's scope (one gone meanwhile included).
                let changed: Vec<(String, bool)> = {
                    let Ok(mut labels) = policies.namespace_labels.write() else {
                        continue;
                    };
                    let mut changed: Vec<(String, bool)> = listing
                        .iter()
                        .filter(|(name, l)| labels.get(*name) != Some(l))
                        .map(|(name, l)| {
                            let moved = namespace_moved(name, labels.get(name), Some(l));
                            (name.clone(), moved)
                        })
                        .collect();
                    changed.extend(
                        labels
                            .iter()
                            .filter(|(name, _)| !listing.contains_key(*name))
                            .map(|(name, l)| {
                                let moved = namespace_moved(name, Some(l), None);
                                (name.clone(), moved)
                            }),
                    );
                    *labels = std::mem::take(&mut listing);
                    changed
                };
                let relisted = policies.loaded.borrow().namespaces;
                mark(policies, |l| l.namespaces = true);
                for (namespace, moved) in changed.into_iter().filter(|_| relisted) {
                    route_namespace(policies, namespace, moved);
                }
            }
            Ok(Event::Apply(namespace)) => {
                let name = namespace.name_any();
                let labels = namespace.labels().clone();
                let Some(before) = policies
                    .namespace_labels
                    .write()
                    .ok()
                    .map(|mut all| all.insert(name.clone(), labels.clone()))
                else {
                    continue;
                };
                if before.as_ref() != Some(&labels) {
                    let moved = namespace_moved(&name, before.as_ref(), Some(&labels));
                    route_namespace(policies, name, moved);
                }
            }
            Ok(Event::Delete(namespace)) => {
                let name = namespace.name_any();
                let before = policies
                    .namespace_labels
                    .write()
                    .ok()
                    .and_then(|mut all| all.remove(&name));
                // Its resources go with it; nothing to route.
                namespace_moved(&name, before.as_ref(), None);
            }
            Err(error) => tracing::warn!(error = %error, "watching Namespaces"),
        }
    }
}

/// A namespace's labels moved: its resources are judged again, if any policy selects by them or
/// the move took the namespace into (or out of) the shard's scope.
fn route_namespace(policies: &Policies, namespace: String, shard_moved: bool) {
    let selecting = shard_moved
        || policies
            .all()
            .iter()
            .any(|p| p.coverage.namespace_selector.is_some());
    if selecting {
        policies.route(Route::Namespace { namespace });
    }
}

async fn follow_approvals(policies: &Policies, api: Api<ClientApproval>, scope: Option<String>) {
    let mut listing: Vec<ClientApproval> = Vec::new();
    let mut events =
        std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
    let mut loaded = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(approval)) => listing.push(approval),
            Ok(Event::InitDone) => {
                // An approval deleted while the watch was down is gone: what the listing lacks
                // in the scope is forgotten. The first listing comes before any decision: nothing
                // to route.
                let listed = std::mem::take(&mut listing);
                for gone in approvals_missing_from(policies, scope.as_deref(), &listed) {
                    keep_approval(policies, &gone, false, loaded);
                }
                for approval in listed {
                    keep_approval(policies, &approval, true, loaded);
                }
                if !loaded {
                    loaded = true;
                    policies.approval_scopes_loaded();
                }
            }
            Ok(Event::Apply(approval)) => keep_approval(policies, &approval, true, true),
            Ok(Event::Delete(approval)) => keep_approval(policies, &approval, false, true),
            Err(error) if not_installed(&error) => {
                if !loaded {
                    loaded = true;
                    policies.approval_scopes_loaded();
                }
            }
            Err(error) => tracing::warn!(error = %error, "watching ClientApprovals"),
        }
    }
}

/// The approvals kept for a scope that a complete listing of it lacks.
fn approvals_missing_from(
    policies: &Policies,
    scope: Option<&str>,
    listed: &[ClientApproval],
) -> Vec<ClientApproval> {
    let Ok(all) = policies.approvals.read() else {
        return Vec::new();
    };
    let present = |namespace: &str, name: &str| {
        listed
            .iter()
            .any(|a| a.namespace().as_deref() == Some(namespace) && a.name_any() == name)
    };
    all.iter()
        .filter(|((namespace, _), _)| scope.is_none_or(|s| s == namespace))
        .flat_map(|((namespace, client), kept)| {
            kept.iter()
                .filter(|a| !present(namespace, &a.name))
                .map(|a| {
                    let mut gone = ClientApproval::new(
                        &a.name,
                        nauthera_shared::resources::ClientApprovalSpec {
                            client: client.clone(),
                            generation: a.generation,
                            uid: a.uid.clone(),
                        },
                    );
                    gone.metadata.namespace = Some(namespace.clone());
                    gone
                })
        })
        .collect()
}

/// Waits for every scope's approvals to be listed, then marks them loaded.
async fn mark_approvals_loaded(policies: &Policies, scopes: usize) {
    let mut listed = policies.approvals_listed.subscribe();
    let _ = listed.wait_for(|n| *n >= scopes).await;
    mark(policies, |l| l.approvals = true);
}

/// Keeps (or forgets) an approval, and routes its client when that changes anything (and
/// `route`).
fn keep_approval(policies: &Policies, approval: &ClientApproval, present: bool, route: bool) {
    let namespace = approval.namespace().unwrap_or_default();
    let client = approval.spec.client.clone();
    let entry = Approval {
        name: approval.name_any(),
        generation: approval.spec.generation,
        uid: approval.spec.uid.clone(),
    };
    let changed = {
        let Ok(mut all) = policies.approvals.write() else {
            return;
        };
        let list = all.entry((namespace.clone(), client.clone())).or_default();
        let before = list.clone();
        list.retain(|a| a.name != entry.name);
        if present {
            list.push(entry);
        }
        let changed = *list != before;
        if list.is_empty() {
            all.remove(&(namespace.clone(), client.clone()));
        }
        changed
    };
    if changed && route {
        policies.route(Route::Resource {
            kind: ObjectKind::Client,
            namespace,
            name: client,
        });
    }
}
