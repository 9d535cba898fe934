//! What the reconciler remembers between reconciles, in memory only: minted secrets not yet
//! delivered, and the backoff of retried failures. Lost on restart by design: a secret minted by a
//! previous process is not recoverable, so a new one is minted instead.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;
use nauthera_shared::resources::ResourceStatus;

use crate::kubernetes::kube_io::WrittenStatus;
use crate::reconcile::decide::{Backoff, SentValue};

/// A client secret. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: String) -> SecretValue {
        SecretValue(value)
    }

    /// The value, for the one place that writes it into a Secret or a request.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A digest of the value, to tell a changed value from the same one read again; kept in
    /// memory only, never written or shown anywhere.
    pub fn digest(&self) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(self.0.as_bytes()).into()
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

/// A secret the server minted and the reconciler has not yet written into its Secret.
#[derive(Clone, Debug)]
pub struct Minted {
    pub value: SecretValue,
    pub client_id: String,
    pub secret_name: String,
    /// Why it was minted, when it replaces another: told once it is delivered.
    pub rotation: Option<crate::reconcile::decide::Rotation>,
    /// The rotation request (`nauthera.io/rotate`) it carries out, if one waited when it was
    /// minted.
    pub request: Option<crate::reconcile::decide::RotationRequest>,
}

#[derive(Clone, Copy, Debug)]
struct Retry {
    attempts: u32,
    not_before: Timestamp,
    /// The generation that failed; an edit starts afresh.
    generation: i64,
}

/// Per-resource memory, keyed by the resource's uid.
#[derive(Debug, Default)]
pub struct Memory {
    minted: Mutex<HashMap<String, Minted>>,
    retries: Mutex<HashMap<String, Retry>>,
    /// Since when a resource (of a generation) waits for a manifest it depends on.
    waiting: Mutex<HashMap<String, (i64, Timestamp)>>,
    /// The status this leader last wrote, until the watch cache shows it. The cache can lag
    /// behind a write, and a reconcile that read the old status would repeat a call it has just
    /// made; the status belongs to the reconciler alone, so what it wrote last is the truth.
    statuses: Mutex<HashMap<String, ResourceStatus>>,
    /// The resources whose deletion this leader finished, and when: a reconcile from a watch
    /// cache that still shows one with its finalizer must not delete it on the server again.
    deletions_finished: Mutex<HashMap<String, Timestamp>>,
    /// The value of the team's Secret the server holds (sent, or read at the version sent),
    /// by its digest, and the Secret's latest version known to hold it: a new version whose
    /// value is the same (a label or an annotation changed) sends nothing.
    sent_values: Mutex<HashMap<String, SentValue>>,
    /// The objects this process left on the server with `deletionPolicy: Orphan`, by kind and
    /// server key: a manifest that declares one again re-adopts an orphan (its creation time,
    /// kept to the second, cannot always tell that apart from its own lost answer).
    orphaned: Mutex<std::collections::HashSet<(i32, crate::server::changes::RefKey)>>,
}

/// How long a finished deletion is remembered: far longer than any watch cache lags behind.
const DELETION_REMEMBERED: jiff::SignedDuration = jiff::SignedDuration::from_secs(600);

impl Memory {
    pub fn minted(&self, uid: &str) -> Option<Minted> {
        self.minted.lock().ok()?.get(uid).cloned()
    }

    pub fn remember_minted(&self, uid: &str, minted: Minted) {
        if let Ok(mut map) = self.minted.lock() {
            map.insert(uid.to_owned(), minted);
        }
    }

    pub fn forget_minted(&self, uid: &str) {
        if let Ok(mut map) = self.minted.lock() {
            map.remove(uid);
        }
    }

    /// When a retried failure of this generation allows the next attempt. A new generation (an
    /// edit) is not held up by the backoff of an older one.
    pub fn retry_not_before(&self, uid: &str, generation: i64) -> Option<Timestamp> {
        let map = self.retries.lock().ok()?;
        let retry = map.get(uid)?;
        (retry.generation == generation).then_some(retry.not_before)
    }

    /// Records one more retried failure of `generation`; returns how long to wait.
    pub fn failed(
        &self,
        uid: &str,
        generation: i64,
        now: Timestamp,
        backoff: &Backoff,
        jitter: f64,
    ) -> Duration {
        let Ok(mut map) = self.retries.lock() else {
            return backoff.cap;
        };
        let attempts = map
            .get(uid)
            .filter(|r| r.generation == generation)
            .map_or(0, |r| r.attempts);
        let delay = backoff.delay(attempts, jitter);
        let not_before = jiff::SignedDuration::try_from(delay)
            .ok()
            .and_then(|d| now.checked_add(d).ok())
            .unwrap_or(now);
        map.insert(
            uid.to_owned(),
            Retry {
                attempts: attempts.saturating_add(1),
                not_before,
                generation,
            },
        );
        delay
    }

    /// Forgets the backoff after an outcome that is not retried.
    /// Since when this generation of a resource waits for a manifest it depends on (`now` the
    /// first time it is asked); `waiting: false` forgets it.
    pub fn waiting_since(
        &self,
        uid: &str,
        generation: i64,
        waiting: bool,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let mut map = self.waiting.lock().ok()?;
        if !waiting {
            map.remove(uid);
            return None;
        }
        let entry = map.entry(uid.to_owned()).or_insert((generation, now));
        if entry.0 != generation {
            *entry = (generation, now);
        }
        Some(entry.1)
    }

    pub fn succeeded(&self, uid: &str) {
        if let Ok(mut map) = self.retries.lock() {
            map.remove(uid);
        }
    }

    /// The status last written, or the one read when nothing was written since. Once the read
    /// one shows what was written, the watch cache has caught up and the copy is dropped.
    /// `read` is the status as the watch cache keeps it, perhaps abridged; the status returned
    /// is whole.
    pub fn status_or(&self, uid: &str, read: Option<&ResourceStatus>) -> Option<ResourceStatus> {
        self.cache_shows(uid, read);
        let mut status = match self.statuses.lock() {
            Ok(map) => map.get(uid).or(read).cloned(),
            Err(_) => read.cloned(),
        };
        if let Some(status) = status.as_mut() {
            status.unabridge();
        }
        status
    }

    /// The watch cache shows `status` for the resource: once that is the status written last,
    /// the copy is dropped at once rather than at the next reconcile, when a cold start would
    /// have kept every resource's copy until its second reconcile.
    pub fn cache_shows(&self, uid: &str, status: Option<&ResourceStatus>) {
        if let Ok(mut map) = self.statuses.lock()
            && map.get(uid).is_some_and(|written| Some(written) == status)
        {
            map.remove(uid);
        }
    }

    /// Keeps a written status until the watch cache shows it, as the API server returns it
    /// (times to the second) and the cache keeps it (abridged), so the two compare equal.
    pub fn remember_status(&self, uid: &str, written: &WrittenStatus) {
        // Read from the text written, not copied from the status: the text is what a cache
        // read gives. A text that does not read back is not remembered: the cache's copy holds.
        let Ok(mut status) = serde_json::from_str::<ResourceStatus>(written.text()) else {
            return;
        };
        status.abridge();
        if let Ok(mut map) = self.statuses.lock() {
            map.insert(uid.to_owned(), status);
        }
    }

    /// Forgets everything about a resource whose deletion this reconciler finished, and
    /// remembers that it did (uids are never reused, so this holds up no other resource).
    pub fn finished_deletion(&self, uid: &str, now: Timestamp) {
        self.forget(uid);
        if let Ok(mut map) = self.deletions_finished.lock() {
            map.retain(|_, at| at.duration_until(now) < DELETION_REMEMBERED);
            map.insert(uid.to_owned(), now);
        }
    }

    /// Whether this reconciler finished the resource's deletion.
    pub fn deletion_finished(&self, uid: &str) -> bool {
        self.deletions_finished
            .lock()
            .is_ok_and(|map| map.contains_key(uid))
    }

    /// What is known of the value of the team's Secret the server holds.
    pub fn sent_value(&self, uid: &str) -> Option<SentValue> {
        self.sent_values.lock().ok()?.get(uid).cloned()
    }

    pub fn remember_sent_value(&self, uid: &str, value: SentValue) {
        if let Ok(mut map) = self.sent_values.lock() {
            map.insert(uid.to_owned(), value);
        }
    }

    /// An object left on the server by `Orphan`.
    pub fn orphaned(
        &self,
        kind: nauthera_proto::v1::ObjectKind,
        key: crate::server::changes::RefKey,
    ) {
        if let Ok(mut set) = self.orphaned.lock() {
            set.insert((kind as i32, key));
        }
    }

    /// Whether this process left the object on the server by `Orphan`; forgotten once asked
    /// with `take`.
    pub fn was_orphaned(
        &self,
        kind: nauthera_proto::v1::ObjectKind,
        key: &crate::server::changes::RefKey,
        take: bool,
    ) -> bool {
        let Ok(mut set) = self.orphaned.lock() else {
            return false;
        };
        let entry = (kind as i32, key.clone());
        if take {
            set.remove(&entry)
        } else {
            set.contains(&entry)
        }
    }

    /// Forgets everything about a resource that is gone.
    pub fn forget(&self, uid: &str) {
        self.forget_minted(uid);
        if let Ok(mut map) = self.sent_values.lock() {
            map.remove(uid);
        }
        if let Ok(mut map) = self.waiting.lock() {
            map.remove(uid);
        }
        self.succeeded(uid);
        if let Ok(mut map) = self.statuses.lock() {
            map.remove(uid);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_secret_value_never_shows_in_debug_output() {
        let minted = Minted {
            value: SecretValue::new("s3cr3t-value".into()),
            client_id: "cid".into(),
            secret_name: "app".into(),
            rotation: None,
            request: None,
        };
        let text = format!("{minted:?}");
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("<redacted>"));
    }

    #[test]
    fn the_status_written_last_wins_over_a_stale_read() {
        let memory = Memory::default();
        let read = ResourceStatus {
            revision: Some("r1".into()),
            ..ResourceStatus::default()
        };
        assert_eq!(memory.status_or("u", Some(&read)), Some(read.clone()));
        let written = ResourceStatus {
            revision: Some("r2".into()),
            ..ResourceStatus::default()
        };
        memory.remember_status("u", &WrittenStatus::of(&written).unwrap());
        assert_eq!(memory.status_or("u", Some(&read)), Some(written.clone()));
        // The cache caught up: the copy is dropped, and a later read is taken as it is.
        assert_eq!(memory.status_or("u", Some(&written)), Some(written.clone()));
        assert_eq!(memory.status_or("u", Some(&read)), Some(read.clone()));
        // The watch shows the written status before any reconcile reads it: the copy goes then.
        memory.remember_status("u", &WrittenStatus::of(&written).unwrap());
        memory.cache_shows("u", Some(&read));
        assert_eq!(memory.status_or("u", Some(&read)), Some(written.clone()));
        memory.cache_shows("u", Some(&written));
        assert_eq!(memory.status_or("u", Some(&read)), Some(read));
        memory.remember_status("u", &WrittenStatus::of(&ResourceStatus::default()).unwrap());
        memory.forget("u");
        assert_eq!(memory.status_or("u", None), None);
    }

    /// A status as the reconciler writes it for a client registered at second 1,000.
    pub(crate) fn registered_status() -> ResourceStatus {
        use nauthera_shared::catalog::{Cause, Reason};
        use nauthera_shared::resources::reason_conditions;
        let time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::from_second(1_000).unwrap(),
        );
        ResourceStatus {
            reason: Some(Reason::Registered),
            message: Some("registered".into()),
            observed_generation: Some(1),
            conditions: reason_conditions(
                Reason::Registered,
                Cause::None,
                "registered",
                Some(1),
                time,
            )
            .to_vec(),
            revision: Some("r2".into()),
            ..ResourceStatus::default()
        }
    }

    #[test]
    fn the_cache_keeps_statuses_abridged_and_reconciles_read_them_whole() {
        let written = registered_status();
        let mut cached = written.clone();
        cached.abridge();
        assert!(cached.abridged.is_some());
        let memory = Memory::default();
        memory.remember_status("u", &WrittenStatus::of(&written).unwrap());
        assert_eq!(memory.status_or("u", None), Some(written.clone()));
        memory.cache_shows("u", Some(&cached));
        assert!(
            memory.statuses.lock().unwrap().is_empty(),
            "the cache shows it"
        );
        assert_eq!(memory.status_or("u", Some(&cached)), Some(written));
    }

    #[test]
    fn a_finished_deletion_is_remembered_for_a_while() {
        let memory = Memory::default();
        let start = Timestamp::from_second(1_000).unwrap();
        memory.remember_status("u", &WrittenStatus::of(&ResourceStatus::default()).unwrap());
        memory.finished_deletion("u", start);
        assert!(memory.deletion_finished("u"));
        assert!(!memory.deletion_finished("v"));
        assert_eq!(memory.status_or("u", None), None, "the rest is forgotten");
        // Another deletion long after drops the old entry: the set stays small.
        memory.finished_deletion("v", Timestamp::from_second(1_000 + 601).unwrap());
        assert!(!memory.deletion_finished("u"));
        assert!(memory.deletion_finished("v"));
    }

    #[test]
    fn retries_back_off_and_success_resets_them() {
        let memory = Memory::default();
        let backoff = Backoff::default();
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(
            memory.failed("u", 1, now, &backoff, 0.0),
            Duration::from_millis(500)
        );
        assert_eq!(
            memory.failed("u", 1, now, &backoff, 0.0),
            Duration::from_secs(1)
        );
        assert_eq!(
            memory.retry_not_before("u", 1),
            Some(Timestamp::from_second(1_001).unwrap())
        );
        // An edit is not held up by the backoff of the generation before it.
        assert_eq!(memory.retry_not_before("u", 2), None);
        assert_eq!(
            memory.failed("u", 2, now, &backoff, 0.0),
            Duration::from_millis(500)
        );
        memory.succeeded("u");
        assert_eq!(memory.retry_not_before("u", 2), None);
    }
}
