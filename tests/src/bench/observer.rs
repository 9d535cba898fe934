//! What a person watching the cluster sees: one watch on the workload's OIDCClients and one on
//! Secrets, folded into counts the benchmark waits on. It costs the emulator one more watcher,
//! the same for every run it measures.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::OIDCClient;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::workload::{BENCH_LABEL, Key};
use crate::e2e::is_registered;

/// What the watches have shown so far.
#[derive(Debug, Default)]
pub struct Seen {
    reasons: HashMap<Key, Option<Reason>>,
    registered: HashSet<Key>,
    secrets: HashSet<Key>,
    /// Clients Registered for their generation whose Secret exists.
    pub complete: usize,
}

impl Seen {
    fn is_complete(&self, key: &Key) -> bool {
        self.registered.contains(key) && self.secrets.contains(key)
    }

    /// Applies one change of a key's facts, keeping `complete` current.
    fn update(&mut self, key: &Key, change: impl FnOnce(&mut Seen)) {
        let before = self.is_complete(key);
        change(self);
        match (before, self.is_complete(key)) {
            (false, true) => self.complete += 1,
            (true, false) => self.complete -= 1,
            _ => {}
        }
    }

    fn client_seen(&mut self, client: &OIDCClient) {
        let Some(key) = key_of(client) else { return };
        let reason = client.status.as_ref().and_then(|s| s.reason);
        let registered = is_registered(client);
        self.update(&key, |seen| {
            seen.reasons.insert(key.clone(), reason);
            if registered {
                seen.registered.insert(key.clone());
            } else {
                seen.registered.remove(&key);
            }
        });
    }

    fn client_gone(&mut self, client: &OIDCClient) {
        let Some(key) = key_of(client) else { return };
        self.update(&key, |seen| {
            seen.reasons.remove(&key);
            seen.registered.remove(&key);
        });
    }

    fn secret_seen(&mut self, secret: &Secret, present: bool) {
        let Some(key) = key_of(secret) else { return };
        self.update(&key, |seen| {
            if present {
                seen.secrets.insert(key.clone());
            } else {
                seen.secrets.remove(&key);
            }
        });
    }

    /// The reason a client shows now.
    pub fn reason(&self, key: &Key) -> Option<Reason> {
        self.reasons.get(key).copied().flatten()
    }

    /// How many clients show `reason`.
    pub fn count(&self, reason: Reason) -> usize {
        self.reasons
            .values()
            .filter(|r| **r == Some(reason))
            .count()
    }
}

fn key_of<K: Resource>(object: &K) -> Option<Key> {
    Some(Key {
        namespace: object.meta().namespace.clone()?,
        name: object.meta().name.clone()?,
    })
}

/// The two watches and what they have shown.
pub struct Observer {
    seen: watch::Receiver<Seen>,
    tasks: Vec<JoinHandle<()>>,
}

impl Observer {
    /// Starts watching the workload's OIDCClients and the Secrets of every namespace.
    pub fn start(client: &kube::Client) -> Observer {
        let (sender, seen) = watch::channel(Seen::default());
        let clients: Api<OIDCClient> = Api::all(client.clone());
        let secrets: Api<Secret> = Api::all(client.clone());
        let labelled = watcher::Config::default().labels(&format!("{BENCH_LABEL}=true"));
        let client_sender = sender.clone();
        let client_task = tokio::spawn(async move {
            let mut events = watcher::watcher(clients, labelled).boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(Event::Apply(c) | Event::InitApply(c)) => {
                        client_sender.send_modify(|seen| seen.client_seen(&c));
                    }
                    Ok(Event::Delete(c)) => client_sender.send_modify(|seen| seen.client_gone(&c)),
                    Ok(Event::Init | Event::InitDone) => {}
                    Err(error) => eprintln!("the benchmark's OIDCClient watch failed: {error}"),
                }
            }
        });
        let secret_task = tokio::spawn(async move {
            let mut events = watcher::watcher(secrets, watcher::Config::default()).boxed();
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
        });
        Observer {
            seen,
            tasks: vec![client_task, secret_task],
        }
    }

    /// How many clients are Registered with their Secret delivered.
    pub fn complete(&self) -> usize {
        self.seen.borrow().complete
    }

    /// How many clients show `reason`.
    pub fn count(&self, reason: Reason) -> usize {
        self.seen.borrow().count(reason)
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
