//! What the run watches while it goes: who holds the reconciler's Lease from when (to check that
//! only the leader wrote), and every value a Secret of the namespace ever held (for the dead-value
//! check and the leak scan).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::task::JoinHandle;

/// The key both a generated client secret and an upstream secret are kept under.
const SECRET_KEY: &str = "clientSecret";

/// The Lease the replicas elect their leader on.
const LEASE: &str = "nauthera-reconciler";

/// One leadership: `holder` from `acquired` (the time the Lease records, the acquirer's clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leadership {
    pub holder: String,
    pub acquired: jiff::Timestamp,
}

/// What the watches recorded.
#[derive(Debug, Default)]
pub struct Observed {
    /// Leaderships in the order they began.
    pub leaderships: Vec<Leadership>,
    /// Every secret value a Secret of the namespace held.
    pub secret_values: BTreeSet<String>,
}

/// The running watches; they stop when dropped.
pub struct Observer {
    pub observed: Arc<Mutex<Observed>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Observer {
    /// Watches the Lease in `lease_namespace` and the Secrets of `namespace`.
    pub fn start(client: &kube::Client, namespace: &str, lease_namespace: &str) -> Observer {
        let observed = Arc::new(Mutex::new(Observed::default()));
        let leases: Api<Lease> = Api::namespaced(client.clone(), lease_namespace);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let tasks = vec![
            tokio::spawn(watch_leases(leases, Arc::clone(&observed))),
            tokio::spawn(watch_secrets(secrets, Arc::clone(&observed))),
        ];
        Observer { observed, tasks }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Observed> {
        self.observed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn watch_leases(api: Api<Lease>, observed: Arc<Mutex<Observed>>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={LEASE}"));
    // Backing off, so that an API server that is down is not asked again in a tight loop.
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        let Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) = event else {
            continue;
        };
        let Some(spec) = lease.spec else { continue };
        let (Some(holder), Some(acquired)) = (spec.holder_identity, spec.acquire_time) else {
            continue;
        };
        if holder.is_empty() {
            continue;
        }
        let leadership = Leadership {
            holder,
            acquired: acquired.0,
        };
        let mut observed = observed.lock().unwrap_or_else(|p| p.into_inner());
        if observed.leaderships.last() != Some(&leadership) {
            observed.leaderships.push(leadership);
        }
    }
}

async fn watch_secrets(api: Api<Secret>, observed: Arc<Mutex<Observed>>) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let secret = match event {
            Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret)) => secret,
            _ => continue,
        };
        let values: Vec<String> = secret
            .data
            .unwrap_or_default()
            .into_iter()
            // A client id is not a secret (statuses show it); a client secret and an upstream
            // secret are both kept under this key.
            .filter(|(key, _)| key == SECRET_KEY)
            .filter_map(|(_, bytes)| String::from_utf8(bytes.0).ok())
            .filter(|value| value.len() >= 16)
            .collect();
        observed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .secret_values
            .extend(values);
    }
}

/// Who led at `time` by the recorded leaderships: the holder of the last one acquired at or
/// before it.
pub fn leader_at(leaderships: &[Leadership], time: jiff::Timestamp) -> Option<&str> {
    leaderships
        .iter()
        .filter(|l| l.acquired <= time)
        .max_by_key(|l| l.acquired)
        .map(|l| l.holder.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn the_leader_at_a_time_is_the_last_to_acquire_before_it() {
        let leaderships = vec![
            Leadership {
                holder: "a".to_owned(),
                acquired: at(10),
            },
            Leadership {
                holder: "b".to_owned(),
                acquired: at(20),
            },
        ];
        assert_eq!(leader_at(&leaderships, at(5)), None);
        assert_eq!(leader_at(&leaderships, at(15)), Some("a"));
        assert_eq!(leader_at(&leaderships, at(20)), Some("b"));
        assert_eq!(leader_at(&leaderships, at(99)), Some("b"));
    }
}
