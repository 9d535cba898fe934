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
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// How long a resource's watch events are left to settle before its reconcile.
pub const ECHO_WINDOW: Duration = Duration::from_millis(200);

/// Above this many entries' room, an emptied hold gives its room back.
const SHRUNK_BELOW: usize = 1024;

/// How a watch event came: in a listing (the start, a relist after a broken watch) or as a
/// change happened. A change goes before what a listing holds: the echoes of a reconcile (whose
/// written status is kept in memory until they are reconciled) and a person's edit do not wait
/// behind a cold start's backlog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    Listed,
    Live,
}

/// The resources whose watch events are held, each until `window` has passed since its latest.
/// A resource due stays held until it is taken: while the controller is busy (a cold start), every
/// resource waits here, one shared key each, rather than in the work queue.
#[derive(Debug)]
pub struct Held<Key> {
    window: Duration,
    due: HashMap<Arc<Key>, Instant>,
    /// The holds of live events in the order made, which is the order of their due times (the
    /// window is the same for all); an entry a later hold of the same key replaced is skipped
    /// when reached.
    live: VecDeque<(Instant, Arc<Key>)>,
    /// The same for the holds of listed resources, taken once no live one is due.
    listed: VecDeque<(Instant, Arc<Key>)>,
}

impl<Key: Clone + Eq + Hash> Held<Key> {
    pub fn new(window: Duration) -> Held<Key> {
        Held {
            window,
            due: HashMap::new(),
            live: VecDeque::new(),
            listed: VecDeque::new(),
        }
    }

    /// A watch event for `key` at `now`: its reconcile waits for the window to pass with no other.
    pub fn hold(&mut self, key: Key, now: Instant, arrival: Arrival) {
        let due = now + self.window;
        // A key held again keeps its one shared copy: while a cold start's backlog waits, the
        // entries its echoes replaced cost a pointer each.
        let key = match self.due.get_key_value(&key) {
            Some((held, _)) => held.clone(),
            None => Arc::new(key),
        };
        self.due.insert(key.clone(), due);
        match arrival {
            Arrival::Live => self.live.push_back((due, key)),
            Arrival::Listed => self.listed.push_back((due, key)),
        }
    }

    /// A reconcile of `key` was asked for at once (a route): it reads the cache after every event
    /// held for it, so they need no reconcile of their own.
    pub fn release(&mut self, key: &Key) {
        self.due.remove(key);
    }

    /// When the next held resource is due, if any.
    pub fn next_due(&mut self) -> Option<Instant> {
        let live = first_held(&mut self.live, &self.due);
        let listed = first_held(&mut self.listed, &self.due);
        live.into_iter().chain(listed).min()
    }

    /// At most `at_most` of the resources due at `now`, the live ones first, each kind in the
    /// order their windows ended; the others stay held, and a new event for one of them holds it
    /// anew.
    pub fn take_due(&mut self, now: Instant, at_most: usize) -> Vec<Key> {
        let mut taken = Vec::new();
        take_due_from(&mut self.live, &mut self.due, now, at_most, &mut taken);
        take_due_from(&mut self.listed, &mut self.due, now, at_most, &mut taken);
        if self.live.is_empty() && self.listed.is_empty() && self.due.capacity() > SHRUNK_BELOW {
            // A cold start's backlog is gone: its room goes back to the allocator.
            self.live.shrink_to_fit();
            self.listed.shrink_to_fit();
            self.due.shrink_to_fit();
        }
        taken
    }
}

/// The due time of the first entry of `order` that no later hold replaced, dropping those that
/// one did.
fn first_held<Key: Eq + Hash>(
    order: &mut VecDeque<(Instant, Arc<Key>)>,
    due: &HashMap<Arc<Key>, Instant>,
) -> Option<Instant> {
    while let Some((at, key)) = order.front() {
        if due.get(key) == Some(at) {
            return Some(*at);
        }
        order.pop_front();
    }
    None
}

fn take_due_from<Key: Clone + Eq + Hash>(
    order: &mut VecDeque<(Instant, Arc<Key>)>,
    due: &mut HashMap<Arc<Key>, Instant>,
    now: Instant,
    at_most: usize,
    taken: &mut Vec<Key>,
) {
    while let Some((at, _)) = order.front() {
        if *at > now || taken.len() >= at_most {
            return;
        }
        if let Some((at, key)) = order.pop_front()
            && due.get(&key) == Some(&at)
        {
            due.remove(&key);
            taken.push(Arc::unwrap_or_clone(key));
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
            held.hold("web", start + at * MS, Arrival::Live);
        }
        assert_eq!(held.next_due(), Some(start + 206 * MS));
        assert!(held.take_due(start + 205 * MS, usize::MAX).is_empty());
        assert_eq!(held.take_due(start + 206 * MS, usize::MAX), vec!["web"]);
        assert_eq!(held.next_due(), None);
    }

    #[test]
    fn each_resource_settles_on_its_own() {
        let start = Instant::now();
        let mut held = Held::new(200 * MS);
        held.hold("web", start, Arrival::Live);
        held.hold("api", start + 50 * MS, Arrival::Live);
        held.hold("web", start + 100 * MS, Arrival::Live);
        assert_eq!(held.take_due(start + 250 * MS, usize::MAX), vec!["api"]);
        assert_eq!(held.next_due(), Some(start + 300 * MS));
        assert_eq!(held.take_due(start + 300 * MS, usize::MAX), vec!["web"]);
    }

    #[test]
    fn a_route_takes_what_is_held_for_its_resource() {
        let start = Instant::now();
        let mut held = Held::new(200 * MS);
        held.hold("web", start, Arrival::Live);
        held.hold("api", start, Arrival::Live);
        held.release(&"web");
        assert_eq!(held.take_due(start + 200 * MS, usize::MAX), vec!["api"]);
        assert_eq!(held.next_due(), None);
        // An echo after the route's reconcile is held as any other.
        held.hold("web", start + 210 * MS, Arrival::Live);
        assert_eq!(held.take_due(start + 410 * MS, usize::MAX), vec!["web"]);
    }

    #[test]
    fn resources_due_beyond_what_is_taken_stay_held_in_order() {
        let start = Instant::now();
        let mut held = Held::new(200 * MS);
        for name in ["a", "b", "c"] {
            held.hold(name, start, Arrival::Live);
        }
        assert_eq!(held.take_due(start + 200 * MS, 2), vec!["a", "b"]);
        // `c` waits on; a new event for it holds it anew, once.
        held.hold("c", start + 250 * MS, Arrival::Live);
        assert!(held.take_due(start + 300 * MS, 2).is_empty());
        assert_eq!(held.take_due(start + 450 * MS, 2), vec!["c"]);
        assert_eq!(held.next_due(), None);
    }

    #[test]
    fn a_live_change_goes_before_what_a_listing_holds() {
        let start = Instant::now();
        let mut held = Held::new(200 * MS);
        held.hold("listed-1", start, Arrival::Listed);
        held.hold("listed-2", start, Arrival::Listed);
        held.hold("echo", start + 10 * MS, Arrival::Live);
        assert_eq!(held.next_due(), Some(start + 200 * MS));
        assert_eq!(held.take_due(start + 200 * MS, 1), vec!["listed-1"]);
        // Once the live one is due as well, it goes first.
        assert_eq!(held.take_due(start + 210 * MS, 1), vec!["echo"]);
        // A live event for a listed resource moves it to the live ones.
        held.hold("listed-2", start + 220 * MS, Arrival::Live);
        held.hold("listed-3", start + 220 * MS, Arrival::Listed);
        assert_eq!(
            held.take_due(start + 420 * MS, 5),
            vec!["listed-2", "listed-3"]
        );
        assert_eq!(held.next_due(), None);
    }
}
