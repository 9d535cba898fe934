//! The echo debounce of a controller's Kubernetes watches. A reconcile's own writes (finalizer,
//! server write, Secret, status) come back as watch events within milliseconds of each other;
//! held until none has come for a short window, they fold into a single next reconcile instead
//! of one each. Held routes wait the same way: a server change another reconciler made (its
//! status write, its claim, follows within the window, and deciding before it reaches the cache
//! would write over it), and a prerequisite registered. Any other route (a person's change on
//! the server, a referenced Secret) names a resource whose reconcile is wanted at once, and no
//! echo of the reconciler's own writes comes that way (its own server writes route nowhere).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// How long a resource's watch events are left to settle before its reconcile.
pub const ECHO_WINDOW: Duration = Duration::from_millis(200);

/// The resources whose watch events are held, each until `window` has passed since its latest.
#[derive(Debug)]
pub struct Held<Key> {
    window: Duration,
    due: HashMap<Key, Instant>,
    /// Every hold in the order made, which is the order of their due times (the window is the
    /// same for all); an entry a later hold of the same key replaced is skipped when reached.
    order: VecDeque<(Instant, Key)>,
}

impl<Key: Clone + Eq + Hash> Held<Key> {
    pub fn new(window: Duration) -> Held<Key> {
        Held {
            window,
            due: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// A watch event for `key` at `now`: its reconcile waits for the window to pass with no other.
    pub fn hold(&mut self, key: Key, now: Instant) {
        let due = now + self.window;
        self.due.insert(key.clone(), due);
        self.order.push_back((due, key));
    }

    /// A reconcile of `key` was asked for at once (a route): it reads the cache after every event
    /// held for it, so they need no reconcile of their own.
    pub fn release(&mut self, key: &Key) {
        self.due.remove(key);
    }

    /// When the next held resource is due, if any.
    pub fn next_due(&mut self) -> Option<Instant> {
        self.skip_replaced();
        self.order.front().map(|(due, _)| *due)
    }

    /// The resources due at `now`, in the order their windows ended.
    pub fn take_due(&mut self, now: Instant) -> Vec<Key> {
        let mut taken = Vec::new();
        while let Some((due, _)) = self.order.front() {
            if *due > now {
                break;
            }
            if let Some((due, key)) = self.order.pop_front()
                && self.due.get(&key) == Some(&due)
            {
                self.due.remove(&key);
                taken.push(key);
            }
        }
        taken
    }

    fn skip_replaced(&mut self) {
        while let Some((due, key)) = self.order.front() {
            if self.due.get(key) == Some(due) {
                return;
            }
            self.order.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_echoes_of_one_reconcile_fold_into_one_reconcile() {
        let start = Instant::now();
        let mut held = Held::new(200 * MS);
        // Finalizer, Secret and status echoes of one reconcile, 3 ms apart.
        for at in [0, 3, 6] {
            held.hold("web", start + at * MS);
        }
        assert_eq!(held.next_due(), Some(start + 206 * MS));
        assert!(held.take_due(start + 205 * MS).is_empty());
        assert_eq!(held.take_due(start + 206 * MS), vec!["web"]);
        assert_eq!(held.next_due(), None);
    }

    #[test]
    fn each_resource_settles_on_its_own() {
        let start = Instant::now();
        let mut held = Held::new(200 * MS);
        held.hold("web", start);
        held.hold("api", start + 50 * MS);
        held.hold("web", start + 100 * MS);
        assert_eq!(held.take_due(start + 250 * MS), vec!["api"]);
        assert_eq!(held.next_due(), Some(start + 300 * MS));
        assert_eq!(held.take_due(start + 300 * MS), vec!["web"]);
    }

    #[test]
    fn a_route_takes_what_is_held_for_its_resource() {
        let start = Instant::now();
        let mut held = Held::new(200 * MS);
        held.hold("web", start);
        held.hold("api", start);
        held.release(&"web");
        assert_eq!(held.take_due(start + 200 * MS), vec!["api"]);
        assert_eq!(held.next_due(), None);
        // An echo after the route's reconcile is held as any other.
        held.hold("web", start + 210 * MS);
        assert_eq!(held.take_due(start + 410 * MS), vec!["web"]);
    }
}
