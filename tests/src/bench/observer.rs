//! What a person watching the cluster sees: one watch per kind of manifest the workload holds
//! (labelled as the workload's) and one on Secrets, folded into counts the benchmark waits on. It
//! costs the emulator one watcher more per kind, the same for every run of a workload it
//! measures; no object is ever polled.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::guard::Guarded;
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::workload::{BENCH_LABEL, Key, Kind};
use crate::e2e::Declared;

/// A manifest of one of the four kinds, as the observer reads it.
trait Observed: Declared + Send + Sync + 'static {
    const KIND: Kind;

    /// The Secret a generated secret is delivered into, which the manifest waits for.
    fn delivered_secret(&self) -> Option<Key> {
        None
    }
}

impl Observed for OIDCClient {
    const KIND: Kind = Kind::OIDCClient;

    fn delivered_secret(&self) -> Option<Key> {
        let secret = self.spec.secret.as_ref().filter(|s| s.generate)?;
        Some(Key {
            namespace: self.metadata.namespace.clone()?,
            name: secret
                .secret_name
                .clone()
                .or_else(|| self.metadata.name.clone())?,
        })
    }
}

impl Observed for Branding {
    const KIND: Kind = Kind::Branding;
}

impl Observed for IdentityProvider {
    const KIND: Kind = Kind::IdentityProvider;
}

impl Observed for Organization {
    const KIND: Kind = Kind::Organization;
}

/// What the watches show of one manifest.
#[derive(Debug, Default)]
struct Facts {
    reason: Option<Reason>,
    /// `Registered` (phase and reason) for its generation.
    registered: bool,
    /// The generated secret's Secret it waits for.
    secret: Option<Key>,
}

/// What the watches have shown so far.
#[derive(Debug, Default)]
pub struct Seen {
    manifests: HashMap<(Kind, Key), Facts>,
    secrets: HashSet<Key>,
    /// For each Secret a client waits for, that client.
    waiting_on_secret: HashMap<Key, Key>,
    /// Manifests Registered for their generation (clients with a generated secret: and whose
    /// Secret exists).
    pub complete: usize,
    complete_by_kind: BTreeMap<Kind, usize>,
}

impl Seen {
    fn is_complete(&self, kind: Kind, key: &Key) -> bool {
        self.manifests.get(&(kind, key.clone())).is_some_and(|f| {
            f.registered && f.secret.as_ref().is_none_or(|s| self.secrets.contains(s))
        })
    }

    /// Applies one change of a manifest's facts, keeping the counts current.
    fn update(&mut self, kind: Kind, key: &Key, change: impl FnOnce(&mut Seen)) {
        let before = self.is_complete(kind, key);
        change(self);
        let after = self.is_complete(kind, key);
        let by_kind = self.complete_by_kind.entry(kind).or_default();
        match (before, after) {
            (false, true) => {
                self.complete += 1;
                *by_kind += 1;
            }
            (true, false) => {
                self.complete -= 1;
                *by_kind -= 1;
            }
            _ => {}
        }
    }

    fn manifest_seen<K: Observed>(&mut self, manifest: &K) {
        let Some(key) = key_of(manifest) else { return };
        let status = manifest.declared_status();
        let facts = Facts {
            reason: status.and_then(|s| s.reason),
            registered: status.is_some_and(|s| {
                s.phase == Some(Phase::Registered)
                    && s.reason == Some(Reason::Registered)
                    && s.observed_generation == manifest.meta().generation
            }),
            secret: manifest.delivered_secret(),
        };
        self.update(K::KIND, &key, |seen| {
            if let Some(secret) = &facts.secret {
                seen.waiting_on_secret.insert(secret.clone(), key.clone());
            }
            seen.manifests.insert((K::KIND, key.clone()), facts);
        });
    }

    fn manifest_gone<K: Observed>(&mut self, manifest: &K) {
        let Some(key) = key_of(manifest) else { return };
        self.update(K::KIND, &key, |seen| {
            if let Some(facts) = seen.manifests.remove(&(K::KIND, key.clone()))
                && let Some(secret) = facts.secret
            {
                seen.waiting_on_secret.remove(&secret);
            }
        });
    }

    fn secret_seen(&mut self, secret: &Secret, present: bool) {
        let Some(key) = key_of(secret) else { return };
        let change = |seen: &mut Seen| {
            if present {
                seen.secrets.insert(key.clone());
            } else {
                seen.secrets.remove(&key);
            }
        };
        match self.waiting_on_secret.get(&key).cloned() {
            Some(client) => self.update(Kind::OIDCClient, &client, change),
            None => change(self),
        }
    }

    /// The reason a client shows now.
    pub fn reason(&self, key: &Key) -> Option<Reason> {
        self.manifests
            .get(&(Kind::OIDCClient, key.clone()))
            .and_then(|f| f.reason)
    }

    /// How many manifests show `reason`.
    pub fn count(&self, reason: Reason) -> usize {
        self.manifests
            .values()
            .filter(|f| f.reason == Some(reason))
            .count()
    }

    /// How many manifests of each kind are complete.
    pub fn complete_by_kind(&self) -> BTreeMap<Kind, usize> {
        self.complete_by_kind.clone()
    }

    /// Up to `limit` manifests the watches show but that are not complete, with what the
    /// watches show of each, in a stable order.
    pub fn incomplete(&self, limit: usize) -> Vec<Incomplete> {
        let mut found: Vec<_> = self
            .manifests
            .iter()
            .filter(|((kind, key), _)| !self.is_complete(*kind, key))
            .map(|((kind, key), facts)| {
                let secret = facts.secret.as_ref().map_or_else(String::new, |s| {
                    let shown = if self.secrets.contains(s) {
                        "seen"
                    } else {
                        "not seen"
                    };
                    format!(", its Secret {}/{} {shown}", s.namespace, s.name)
                });
                let reason = facts.reason.map_or("no reason", Reason::as_str);
                let registered = if facts.registered { "" } else { "not " };
                Incomplete {
                    kind: *kind,
                    key: key.clone(),
                    secret: facts.secret.clone(),
                    shown: format!("{reason}, {registered}Registered for its generation{secret}"),
                }
            })
            .collect();
        found.sort_by(|a, b| (a.kind, &a.key).cmp(&(b.kind, &b.key)));
        found.truncate(limit);
        found
    }
}

/// A manifest the watches show but that is not complete.
#[derive(Debug, PartialEq, Eq)]
pub struct Incomplete {
    pub kind: Kind,
    pub key: Key,
    /// The Secret it waits for, if any.
    pub secret: Option<Key>,
    /// What the watches show of it.
    pub shown: String,
}

fn key_of<K: Resource>(object: &K) -> Option<Key> {
    Some(Key {
        namespace: object.meta().namespace.clone()?,
        name: object.meta().name.clone()?,
    })
}

/// The watches and what they have shown.
pub struct Observer {
    seen: watch::Receiver<Seen>,
    tasks: Vec<JoinHandle<()>>,
}

/// Watches the workload's manifests of one kind. They are decoded without their managed fields,
/// as the reconciler decodes them: what the benchmark's watch costs is not what it measures.
fn watch_kind<K: Observed>(client: &kube::Client, sender: watch::Sender<Seen>) -> JoinHandle<()> {
    let api: Api<Guarded<K>> = Api::all(client.clone());
    let labelled = watcher::Config::default().labels(&format!("{BENCH_LABEL}=true"));
    tokio::spawn(async move {
        let mut events = watcher::watcher(api, labelled).default_backoff().boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Apply(Guarded(Ok(m))) | Event::InitApply(Guarded(Ok(m)))) => {
                    sender.send_modify(|seen| seen.manifest_seen(&m));
                }
                Ok(Event::Delete(Guarded(Ok(m)))) => {
                    sender.send_modify(|seen| seen.manifest_gone(&m))
                }
                Ok(Event::Apply(_) | Event::InitApply(_) | Event::Delete(_)) => {
                    eprintln!(
                        "the benchmark's {} watch met a manifest it cannot read",
                        K::KIND.name()
                    )
                }
                Ok(Event::Init | Event::InitDone) => {}
                Err(error) => eprintln!("the benchmark's {} watch failed: {error}", K::KIND.name()),
            }
        }
    })
}

impl Observer {
    /// Starts watching the workload's manifests of `kinds` and the Secrets of every namespace.
    pub fn start(client: &kube::Client, kinds: &[Kind]) -> Observer {
        let (sender, seen) = watch::channel(Seen::default());
        let mut tasks: Vec<JoinHandle<()>> = kinds
            .iter()
            .map(|kind| match kind {
                Kind::OIDCClient => watch_kind::<OIDCClient>(client, sender.clone()),
                Kind::Branding => watch_kind::<Branding>(client, sender.clone()),
                Kind::IdentityProvider => watch_kind::<IdentityProvider>(client, sender.clone()),
                Kind::Organization => watch_kind::<Organization>(client, sender.clone()),
            })
            .collect();
        let secrets: Api<Secret> = Api::all(client.clone());
        tasks.push(tokio::spawn(async move {
            let mut events = watcher::watcher(secrets, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(Event::Apply(s) | Event::InitApply(s)) => {
                        let present = s.metadata.deletion_timestamp.is_none();
                        sender.send_modify(|seen| seen.secret_seen(&s, present));
                    }
                    Ok(Event::Delete(s)) => sender.send_modify(|seen| seen.secret_seen(&s, false)),
                    Ok(Event::Init | Event::InitDone) => {}
                    Err(error) => eprintln!("the benchmark's Secret watch failed: {error}"),
                }
            }
        }));
        Observer { seen, tasks }
    }

    /// How many manifests are Registered (clients with their Secret delivered).
    pub fn complete(&self) -> usize {
        self.seen.borrow().complete
    }

    /// How many manifests of each kind are complete.
    pub fn complete_by_kind(&self) -> BTreeMap<Kind, usize> {
        self.seen.borrow().complete_by_kind()
    }

    /// How many manifests show `reason`.
    pub fn count(&self, reason: Reason) -> usize {
        self.seen.borrow().count(reason)
    }

    /// Up to `limit` manifests the watches show as not complete, with what they show.
    pub fn incomplete(&self, limit: usize) -> Vec<Incomplete> {
        self.seen.borrow().incomplete(limit)
    }

    /// Waits until `done` holds or `deadline` passes; returns when it held, if it did.
    pub async fn wait_until(
        &self,
        deadline: Instant,
        done: impl FnMut(&Seen) -> bool,
    ) -> Option<Instant> {
        let mut seen = self.seen.clone();
        let waited = tokio::time::timeout_at(deadline.into(), seen.wait_for(done)).await;
        matches!(waited, Ok(Ok(_))).then(Instant::now)
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nauthera_shared::resources::ResourceStatus;

    fn registered<K: Observed>(mut manifest: K, yes: bool) -> K {
        manifest.meta_mut().generation = Some(1);
        let status = ResourceStatus {
            observed_generation: Some(1),
            phase: Some(if yes {
                Phase::Registered
            } else {
                Phase::Pending
            }),
            reason: Some(if yes {
                Reason::Registered
            } else {
                Reason::Pending
            }),
            ..ResourceStatus::default()
        };
        let mut value = serde_json::to_value(&manifest).unwrap();
        value["status"] = serde_json::to_value(status).unwrap();
        serde_json::from_value(value).unwrap()
    }

    fn client(name: &str) -> OIDCClient {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "OIDCClient",
            "metadata": { "name": name, "namespace": "bench-00" },
            "spec": {
                "issuer": "https://login.example.com/acme",
                "redirectUris": ["https://app.example.test/cb"],
                "tokenEndpointAuthMethod": "client_secret_basic",
                "secret": { "generate": true },
            }
        }))
        .unwrap()
    }

    fn organization(name: &str) -> Organization {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "Organization",
            "metadata": { "name": name, "namespace": "bench-00" },
            "spec": { "slug": name, "issuer": "https://login.example.com/acme" }
        }))
        .unwrap()
    }

    fn secret(name: &str) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("bench-00".to_owned()),
                ..Default::default()
            },
            ..Secret::default()
        }
    }

    #[test]
    fn a_client_is_complete_with_its_secret_whichever_shows_first() {
        let mut seen = Seen::default();
        seen.secret_seen(&secret("a"), true);
        seen.manifest_seen(&registered(client("a"), true));
        seen.manifest_seen(&registered(client("b"), true));
        assert_eq!(seen.complete, 1);
        assert_eq!(
            seen.incomplete(5),
            [Incomplete {
                kind: Kind::OIDCClient,
                key: Key {
                    namespace: "bench-00".into(),
                    name: "b".into()
                },
                secret: Some(Key {
                    namespace: "bench-00".into(),
                    name: "b".into()
                }),
                shown: "Registered, Registered for its generation, its Secret bench-00/b not seen"
                    .into()
            }]
        );
        seen.secret_seen(&secret("b"), true);
        assert_eq!(seen.complete, 2);
        assert!(seen.incomplete(5).is_empty());
        seen.secret_seen(&secret("b"), false);
        assert_eq!(seen.complete, 1);
        seen.manifest_seen(&registered(client("a"), false));
        assert_eq!(seen.complete, 0);
        assert_eq!(seen.count(Reason::Pending), 1);
    }

    #[test]
    fn other_kinds_are_complete_when_registered() {
        let mut seen = Seen::default();
        seen.manifest_seen(&registered(organization("acme"), false));
        assert_eq!(seen.complete, 0);
        seen.manifest_seen(&registered(organization("acme"), true));
        assert_eq!(seen.complete, 1);
        assert_eq!(seen.complete_by_kind()[&Kind::Organization], 1);
        seen.manifest_gone(&organization("acme"));
        assert_eq!(seen.complete, 0);
    }
}
