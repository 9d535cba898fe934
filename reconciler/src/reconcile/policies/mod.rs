//! The ClientPolicies as the reconciler enforces them: compiled once from their watch, with the
//! namespace labels and the approvals they are judged against, and the resources each holds back
//! (for the policies' status). The decision itself is [`crate::reconcile::decide::PolicyGate`], worked out
//! here from the caches.

mod clients;
mod controller;
mod watch;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use jiff::Timestamp;
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::policy::{
    ApprovalStanding, Approvals, CompiledPolicy, NAMESPACE_NAME_LABEL, PolicyError, Subject,
    approval_standing, covering, violations,
};
use nauthera_shared::resources::{ApprovalRecord, HeldResource, PolicyKind};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, watch as tokio_watch};

use crate::reconcile::decide::PolicyGate;
use crate::server::changes::Route;
use clients::ClientIndex;

pub use clients::CountedClient;
pub use controller::{PolicyReporting, run_policy_controller};
pub use watch::follow_policy_inputs;

/// The parts of the policy caches that must be listed before the first decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Loaded {
    policies: bool,
    namespaces: bool,
    approvals: bool,
}

/// An approval of one generation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Approval {
    /// The ClientApproval's own name.
    name: String,
    generation: i64,
    uid: Option<String>,
}

/// The OIDCClients of one watch cache, each with its namespace.
pub type ClientSource = Box<dyn Fn() -> Vec<(String, CountedClient)> + Send + Sync>;

/// A resource, as the holds and the routes name it.
pub type ResourceKey = (ObjectKind, String, String);

/// The policy caches and the holds.
pub struct Policies {
    compiled: RwLock<BTreeMap<String, Arc<CompiledPolicy>>>,
    /// Policies that do not compile, by name: they enforce nothing until fixed.
    broken: RwLock<BTreeMap<String, PolicyError>>,
    namespace_labels: RwLock<HashMap<String, BTreeMap<String, String>>>,
    /// (namespace, client) → its approvals.
    approvals: RwLock<HashMap<(String, String), Vec<Approval>>>,
    /// Every namespace's OIDCClients in creation order, for the namespace limit: kept only while
    /// a policy sets one (most clusters have none, and it costs about 240 bytes a client).
    clients: RwLock<Option<ClientIndex>>,
    /// Where the index is filled from when a policy starts to limit: each scope's OIDCClient
    /// watch cache.
    client_sources: RwLock<Vec<(Option<String>, ClientSource)>>,
    /// What each held resource is held by: the policy, and the resource as its status lists it.
    holds: RwLock<HashMap<ResourceKey, (String, HeldResource)>>,
    /// The policies whose holds changed, for their status.
    touched: mpsc::UnboundedSender<String>,
    touched_receiver: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    loaded: tokio_watch::Sender<Loaded>,
    /// How many scopes' approvals are listed.
    approvals_listed: tokio_watch::Sender<usize>,
    routes: broadcast::Sender<Route>,
}

impl Policies {
    pub fn new(routes: broadcast::Sender<Route>) -> Policies {
        let (touched, receiver) = mpsc::unbounded_channel();
        Policies {
            compiled: RwLock::default(),
            broken: RwLock::default(),
            namespace_labels: RwLock::default(),
            approvals: RwLock::default(),
            clients: RwLock::default(),
            client_sources: RwLock::default(),
            holds: RwLock::default(),
            touched,
            touched_receiver: Mutex::new(Some(receiver)),
            loaded: tokio_watch::channel(Loaded::default()).0,
            approvals_listed: tokio_watch::channel(0).0,
            routes,
        }
    }

    /// Waits until policies, namespaces and approvals are listed: a decision made before could
    /// send what a policy does not allow.
    pub async fn wait_loaded(&self) {
        let mut loaded = self.loaded.subscribe();
        let _ = loaded
            .wait_for(|l| l.policies && l.namespaces && l.approvals)
            .await;
    }

    /// Names the watch cache of one scope's OIDCClients, which fills the namespace limit's index
    /// when a policy starts to limit.
    pub fn count_clients_from(&self, scope: Option<String>, source: ClientSource) {
        if let Ok(mut sources) = self.client_sources.write() {
            sources.retain(|(known, _)| *known != scope);
            sources.push((scope, source));
        }
    }

    /// Keeps the index the namespace limit counts from, as the OIDCClients' watch sees them.
    pub fn client_seen(&self, namespace: &str, client: CountedClient, present: bool) {
        if let Ok(mut clients) = self.clients.write()
            && let Some(index) = clients.as_mut()
        {
            index.seen(namespace, client, present);
        }
    }

    /// Whether any policy is in force (most clusters have none: nothing to judge).
    pub fn any(&self) -> bool {
        self.compiled.read().is_ok_and(|c| !c.is_empty())
    }

    /// The policies in name order.
    pub fn all(&self) -> Vec<Arc<CompiledPolicy>> {
        self.compiled
            .read()
            .map(|c| c.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The labels of a namespace, with its name label (which the API server always sets).
    fn labels_of(&self, namespace: &str) -> BTreeMap<String, String> {
        let mut labels = self
            .namespace_labels
            .read()
            .ok()
            .and_then(|l| l.get(namespace).cloned())
            .unwrap_or_default();
        labels
            .entry(NAMESPACE_NAME_LABEL.to_owned())
            .or_insert_with(|| namespace.to_owned());
        labels
    }

    /// The labels of a namespace as the watch last saw it, with its name label; `None` when the
    /// watch has not seen it (for the shard's namespace selector).
    pub fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespace_labels
            .read()
            .ok()?
            .get(namespace)
            .map(|labels| nauthera_shared::topology::with_name_label(namespace, labels))
    }

    /// Every namespace the watch knows, with its labels (for the shards' overlaps).
    pub fn known_namespaces(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.namespace_labels
            .read()
            .map(|all| all.iter().map(|(n, l)| (n.clone(), l.clone())).collect())
            .unwrap_or_default()
    }

    /// The OIDCClients of a scope (every namespace, or one) were listed anew: the index takes
    /// that scope's clients from its watch cache, which holds the new listing now.
    pub fn clients_listed(&self, scope: Option<&str>) {
        let Ok(mut clients) = self.clients.write() else {
            return;
        };
        let Some(index) = clients.as_mut() else {
            return;
        };
        index.relisted(scope);
        if let Ok(sources) = self.client_sources.read() {
            for (_, source) in sources.iter().filter(|(s, _)| s.as_deref() == scope) {
                for (namespace, client) in source() {
                    index.seen(&namespace, client, true);
                }
            }
        }
    }

    /// Keeps the namespace limit's index while some policy sets a limit, filled from the watch
    /// caches when the first one does, and drops it when none does any more.
    pub fn keep_client_index(&self) {
        let limited = self
            .all()
            .iter()
            .any(|p| p.max_clients_per_namespace.is_some());
        let Ok(mut clients) = self.clients.write() else {
            return;
        };
        match (limited, clients.is_some()) {
            (true, false) => {
                let mut index = ClientIndex::default();
                if let Ok(sources) = self.client_sources.read() {
                    for (namespace, client) in sources.iter().flat_map(|(_, source)| source()) {
                        index.seen(&namespace, client, true);
                    }
                }
                *clients = Some(index);
            }
            (false, true) => *clients = None,
            _ => {}
        }
    }

    /// Where a generation of a resource stands with the policies that cover it.
    pub fn gate(&self, resource: &Judged<'_>) -> PolicyGate {
        let policies = self.all();
        if policies.is_empty() {
            return PolicyGate::Open;
        }
        let labels = self.labels_of(resource.namespace);
        let subject = Subject {
            kind: resource.kind,
            namespace: resource.namespace,
            namespace_labels: &labels,
            issuer: resource.issuer,
            object: resource.object,
        };
        let covering = covering(&policies, &subject);
        if covering.is_empty() {
            return PolicyGate::Open;
        }
        let earlier = |policy: &CompiledPolicy| self.created_before(policy, resource, &labels);
        if let Some(violation) = violations(&covering, &subject, &earlier).into_iter().next() {
            return PolicyGate::Violation(violation);
        }
        if resource.kind != PolicyKind::OidcClient || resource.in_force {
            return PolicyGate::Open;
        }
        let approved = self.approved_generations(resource.namespace, resource.name, resource.uid);
        let spec = resource.object.get("spec").unwrap_or(&Value::Null);
        match approval_standing(
            &covering,
            spec,
            resource.generation,
            resource.written,
            resource.recorded,
            Approvals {
                generations: &approved,
            },
        ) {
            ApprovalStanding::NotRequired => PolicyGate::Open,
            ApprovalStanding::Unchanged { record } | ApprovalStanding::Approved { record } => {
                PolicyGate::OpenApproved { approval: record }
            }
            ApprovalStanding::Waiting {
                policies,
                fields,
                new_client,
            } => PolicyGate::AwaitingApproval {
                policies,
                fields,
                new_client,
            },
        }
    }

    /// How many OIDCClients of the namespace that the policy covers were created before this one
    /// (by creation time, then name); those being deleted no longer count.
    fn created_before(
        &self,
        policy: &CompiledPolicy,
        resource: &Judged<'_>,
        labels: &BTreeMap<String, String>,
    ) -> usize {
        let Ok(clients) = self.clients.read() else {
            return 0;
        };
        let Some(clients) = clients.as_ref() else {
            return 0;
        };
        clients.created_before(
            resource.namespace,
            resource.created,
            resource.name,
            |issuer| policy.covers(PolicyKind::OidcClient, labels, issuer),
        )
    }

    fn approved_generations(&self, namespace: &str, client: &str, uid: Option<&str>) -> Vec<i64> {
        let Ok(approvals) = self.approvals.read() else {
            return Vec::new();
        };
        approvals
            .get(&(namespace.to_owned(), client.to_owned()))
            .into_iter()
            .flatten()
            .filter(|a| a.uid.is_none() || a.uid.as_deref() == uid)
            .map(|a| a.generation)
            .collect()
    }

    /// Records whether a resource is held, and by what, after its verdict.
    pub fn record_hold(&self, key: ResourceKey, held: Option<(String, HeldResource)>) {
        let Ok(mut holds) = self.holds.write() else {
            return;
        };
        let before = match &held {
            Some(held) => holds.insert(key, held.clone()),
            None => holds.remove(&key),
        };
        if before == held {
            return;
        }
        for (policy, _) in [before, held].into_iter().flatten() {
            let _ = self.touched.send(policy);
        }
    }

    /// A resource is gone: it holds nothing back any more, and under a namespace limit the
    /// clients waiting behind it may take its place.
    pub fn resource_gone(&self, kind: ObjectKind, namespace: &str, name: &str) {
        self.record_hold((kind, namespace.to_owned(), name.to_owned()), None);
        let limited = self
            .all()
            .iter()
            .any(|p| p.max_clients_per_namespace.is_some());
        if kind == ObjectKind::Client && limited {
            self.route(Route::Namespace {
                namespace: namespace.to_owned(),
            });
        }
    }

    /// The resources a policy holds back, in kind, namespace and name order.
    pub fn held_by(&self, policy: &str) -> Vec<HeldResource> {
        let Ok(holds) = self.holds.read() else {
            return Vec::new();
        };
        let mut held: Vec<HeldResource> = holds
            .values()
            .filter(|(by, _)| by == policy)
            .map(|(_, held)| held.clone())
            .collect();
        held.sort();
        held
    }

    /// The policies whose holds changed, once (for the policy controller).
    pub fn take_touched(&self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.touched_receiver.lock().ok()?.take()
    }

    fn approval_scopes_loaded(&self) {
        self.approvals_listed.send_modify(|listed| *listed += 1);
    }

    fn route(&self, route: Route) {
        let _ = self.routes.send(route);
    }
}

/// What the gate needs of one resource.
#[derive(Clone, Copy, Debug)]
pub struct Judged<'a> {
    pub kind: PolicyKind,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
    pub created: Option<Timestamp>,
    pub issuer: &'a str,
    pub generation: i64,
    /// Something of the resource is on the server.
    pub written: bool,
    /// The generation judged is the one in force.
    pub in_force: bool,
    /// `status.approval`.
    pub recorded: Option<&'a ApprovalRecord>,
    /// The whole object as stored, defaults filled in.
    pub object: &'a Value,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policies_with(spec: serde_json::Value) -> Policies {
        let policies = Policies::new(broadcast::channel(16).0);
        let policy: nauthera_shared::resources::ClientPolicy = serde_json::from_value(json!({
            "apiVersion": "nauthera.io/v1alpha1", "kind": "ClientPolicy",
            "metadata": {"name": "p", "uid": "u", "generation": 1},
            "spec": spec,
        }))
        .unwrap();
        policies.compiled.write().unwrap().insert(
            "p".into(),
            Arc::new(CompiledPolicy::compile(&policy).unwrap()),
        );
        policies.keep_client_index();
        policies
    }

    fn judged<'a>(name: &'a str, created: i64, object: &'a Value) -> Judged<'a> {
        Judged {
            kind: PolicyKind::OidcClient,
            namespace: "team-a",
            name,
            uid: Some("client-uid"),
            created: Some(Timestamp::from_second(created).unwrap()),
            issuer: "https://login.example.test/acme",
            generation: 1,
            written: false,
            in_force: false,
            recorded: None,
            object,
        }
    }

    #[test]
    fn the_limit_counts_earlier_clients_that_are_not_being_deleted() {
        let policies = policies_with(json!({"rules": {"maxClientsPerNamespace": 1}}));
        let client = |name: &str, created: i64, deleting: bool| CountedClient {
            name: name.into(),
            issuer: "https://login.example.test/acme".into(),
            created: Some(Timestamp::from_second(created).unwrap()),
            deleting,
        };
        policies.client_seen("team-a", client("first", 10, false), true);
        policies.client_seen("team-a", client("second", 20, false), true);
        policies.client_seen("team-a", client("gone", 5, false), true);
        policies.client_seen("team-a", client("gone", 5, false), false);
        policies.client_seen("team-a", client("leaving", 1, true), true);
        policies.client_seen("team-b", client("elsewhere", 1, false), true);
        let object = json!({"kind": "OIDCClient", "spec": {}});
        assert_eq!(
            policies.gate(&judged("first", 10, &object)),
            PolicyGate::Open
        );
        assert!(matches!(
            policies.gate(&judged("second", 20, &object)),
            PolicyGate::Violation(v) if v.rule == nauthera_shared::policy::Rule::MaxClientsPerNamespace
        ));
        // The same creation time: the name decides.
        assert!(policies.gate(&judged("aaa", 10, &object)) == PolicyGate::Open);
    }

    #[test]
    fn the_limit_index_is_kept_only_while_a_policy_limits() {
        let policies = Policies::new(broadcast::channel(16).0);
        let cached = Arc::new(Mutex::new(vec![(
            "team-a".to_owned(),
            CountedClient {
                name: "first".into(),
                issuer: "https://login.example.test/acme".into(),
                created: Some(Timestamp::from_second(10).unwrap()),
                deleting: false,
            },
        )]));
        let source = cached.clone();
        policies.count_clients_from(None, Box::new(move || source.lock().unwrap().clone()));
        policies.keep_client_index();
        assert!(
            policies.clients.read().unwrap().is_none(),
            "no policy limits"
        );

        let limited = policies_with(json!({"rules": {"maxClientsPerNamespace": 1}}));
        let policy = limited.compiled.read().unwrap().clone();
        *policies.compiled.write().unwrap() = policy;
        policies.keep_client_index();
        let object = json!({"kind": "OIDCClient", "spec": {}});
        assert!(matches!(
            policies.gate(&judged("second", 20, &object)),
            PolicyGate::Violation(_)
        ));
        // A relisting takes the scope from the cache as it is now.
        cached.lock().unwrap().clear();
        policies.clients_listed(None);
        assert_eq!(
            policies.gate(&judged("second", 20, &object)),
            PolicyGate::Open
        );

        policies.compiled.write().unwrap().clear();
        policies.keep_client_index();
        assert!(policies.clients.read().unwrap().is_none());
    }

    #[test]
    fn an_approval_counts_for_its_generation_and_client_uid() {
        let policies = policies_with(json!({"rules": {"approval": {}}}));
        let object = json!({"kind": "OIDCClient", "spec": {}});
        assert!(matches!(
            policies.gate(&judged("web", 1, &object)),
            PolicyGate::AwaitingApproval {
                new_client: true,
                ..
            }
        ));
        let approve = |uid: Option<&str>| {
            policies.approvals.write().unwrap().insert(
                ("team-a".into(), "web".into()),
                vec![Approval {
                    name: "web-1".into(),
                    generation: 1,
                    uid: uid.map(str::to_owned),
                }],
            );
        };
        approve(Some("another-uid"));
        assert!(policies.gate(&judged("web", 1, &object)).holds());
        approve(Some("client-uid"));
        assert!(matches!(
            policies.gate(&judged("web", 1, &object)),
            PolicyGate::OpenApproved { .. }
        ));
        approve(None);
        assert!(!policies.gate(&judged("web", 1, &object)).holds());
    }

    #[test]
    fn holds_tell_the_policies_they_name_once() {
        let policies = Policies::new(broadcast::channel(16).0);
        let mut touched = policies.take_touched().unwrap();
        let key = (ObjectKind::Client, "team-a".to_owned(), "web".to_owned());
        let held = HeldResource {
            kind: "OIDCClient".into(),
            namespace: "team-a".into(),
            name: "web".into(),
            reason: "PolicyViolation".into(),
            rule: "scopes".into(),
        };
        policies.record_hold(key.clone(), Some(("p".into(), held.clone())));
        policies.record_hold(key.clone(), Some(("p".into(), held.clone())));
        assert_eq!(policies.held_by("p"), vec![held]);
        policies.record_hold(key, None);
        assert!(policies.held_by("p").is_empty());
        assert_eq!(touched.try_recv().unwrap(), "p");
        assert_eq!(touched.try_recv().unwrap(), "p");
        assert!(touched.try_recv().is_err());
    }
}
