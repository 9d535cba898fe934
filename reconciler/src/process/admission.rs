//! How many settled resources a controller's work queue holds at once. The queue keeps each
//! resource it is handed in a queue and a set until a worker takes it, and those keep their grown
//! capacity. At a cold start the watch hands over every manifest long before the few workers
//! reach them, so the queue would hold them all. Instead the settle
//! task admits resources up to a bound, and the rest wait in the echo hold, one entry each; a
//! reconcile that starts makes room for the next.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// How many resources are admitted per worker: enough that a worker never waits for the settle
/// task to hand over the next one.
pub const ADMITTED_PER_WORKER: usize = 8;

/// The resources handed to the work queue whose reconcile has not started yet.
#[derive(Debug)]
pub struct Admission<Key> {
    limit: usize,
    admitted: Mutex<HashSet<Key>>,
    freed: Notify,
}

impl<Key: Eq + Hash> Admission<Key> {
    pub fn new(limit: usize) -> Admission<Key> {
        Admission {
            limit: limit.max(1),
            admitted: Mutex::new(HashSet::new()),
            freed: Notify::new(),
        }
    }

    /// How many more resources may be handed over now.
    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.admitted().len())
    }

    /// Admits `key` for the work queue. `false` when it waits there already: its reconcile has
    /// not started, and will read the cache this change is in, so it needs no second one.
    pub fn admit(&self, key: Key) -> bool {
        self.admitted().insert(key)
    }

    /// The reconcile of `key` started, or the controller found no manifest for it: it no longer
    /// takes room, and a change after this point is admitted again.
    pub fn started(&self, key: &Key) {
        if self.admitted().remove(key) {
            self.freed.notify_one();
        }
    }

    /// Resolves once room was made after the last call.
    pub async fn freed(&self) {
        self.freed.notified().await;
    }

    fn admitted(&self) -> MutexGuard<'_, HashSet<Key>> {
        self.admitted.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn resources_are_admitted_up_to_the_bound_and_a_started_one_makes_room() {
        let admission = Admission::new(2);
        assert!(admission.admit("web"));
        assert!(admission.admit("api"));
        assert_eq!(admission.room(), 0);
        admission.started(&"web");
        assert_eq!(admission.room(), 1);
        // One the work queue still holds is not handed over twice.
        assert!(!admission.admit("api"));
        // Once its reconcile started, a new change is admitted again.
        admission.started(&"api");
        assert!(admission.admit("api"));
        // A reconcile nobody admitted (a route that goes straight to the controller) frees
        // nothing.
        admission.started(&"db");
        assert_eq!(admission.room(), 1);
    }

    #[tokio::test]
    async fn a_started_reconcile_wakes_the_waiting_settle_task() {
        let admission = std::sync::Arc::new(Admission::new(1));
        assert!(admission.admit("web"));
        let waiting = tokio::spawn({
            let admission = admission.clone();
            async move { admission.freed().await }
        });
        admission.started(&"web");
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(admission.room(), 1);
    }
}
