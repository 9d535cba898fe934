//! The work queue a controller's workers take resources from. A resource asked for now goes to
//! the back of the queue at once; one asked for while it is being reconciled runs again once
//! that reconcile ends (never two at a time); a requeue after a delay waits on a timer, and an
//! earlier request replaces it. kube-runtime's scheduler put every request on a timer wheel of
//! 1 ms ticks, even one due at once, so a person's change waited up to 2 ms before its reconcile
//! could start (docs/performance.md).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::time::Instant;

/// What a reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Reconcile again after `delay` (at once for zero), unless a change comes first.
    pub fn requeue(delay: Duration) -> Action {
        Action {
            requeue_after: Some(delay),
        }
    }

    /// Reconcile again only when something changes.
    pub fn await_change() -> Action {
        Action {
            requeue_after: None,
        }
    }
}

/// A request for the controller.
#[derive(Debug)]
pub enum Request<Key> {
    /// Reconcile this resource now.
    One(Key),
    /// Reconcile every resource in the cache now.
    All,
}

/// The bookkeeping of the queue, apart from any I/O: which resources wait, which run, which
/// run again after, and which wait for a time.
#[derive(Debug)]
pub struct WorkQueue<Key> {
    ready: VecDeque<Key>,
    queued: HashSet<Key>,
    running: HashSet<Key>,
    again: HashSet<Key>,
    timed: BTreeMap<(Instant, u64), Key>,
    due: HashMap<Key, (Instant, u64)>,
    sequence: u64,
}

impl<Key> Default for WorkQueue<Key> {
    fn default() -> WorkQueue<Key> {
        WorkQueue {
            ready: VecDeque::new(),
            queued: HashSet::new(),
            running: HashSet::new(),
            again: HashSet::new(),
            timed: BTreeMap::new(),
            due: HashMap::new(),
            sequence: 0,
        }
    }
}

impl<Key: Clone + Eq + Hash> WorkQueue<Key> {
    /// Asks for `key` to be reconciled now.
    pub fn request(&mut self, key: Key) {
        if self.running.contains(&key) {
            self.again.insert(key);
            return;
        }
        if let Some(slot) = self.due.remove(&key) {
            self.timed.remove(&slot);
        }
        if self.queued.insert(key.clone()) {
            self.ready.push_back(key);
        }
    }

    /// Asks for `key` to be reconciled at `at`, unless it waits for an earlier time or none.
    fn request_at(&mut self, key: Key, at: Instant) {
        if self.queued.contains(&key) || self.due.get(&key).is_some_and(|(due, _)| *due <= at) {
            return;
        }
        if let Some(slot) = self.due.remove(&key) {
            self.timed.remove(&slot);
        }
        self.sequence += 1;
        let slot = (at, self.sequence);
        self.timed.insert(slot, key.clone());
        self.due.insert(key, slot);
    }

    /// The next resource to reconcile while fewer than `workers` run: it counts as running
    /// from now on.
    pub fn start(&mut self, workers: usize) -> Option<Key> {
        if self.running.len() >= workers {
            return None;
        }
        let key = self.ready.pop_front()?;
        self.queued.remove(&key);
        self.running.insert(key.clone());
        Some(key)
    }

    /// The reconcile of `key` ended asking for `action` at `now`.
    pub fn finished(&mut self, key: Key, action: Action, now: Instant) {
        self.running.remove(&key);
        if self.again.remove(&key) {
            self.request(key);
            return;
        }
        match action.requeue_after {
            Some(delay) if delay.is_zero() => self.request(key),
            Some(delay) => self.request_at(key, now + delay),
            None => {}
        }
    }

    /// When the first timed request falls due.
    pub fn next_due(&self) -> Option<Instant> {
        self.timed.keys().next().map(|(at, _)| *at)
    }

    /// Moves the timed requests due by `now` to the queue.
    pub fn take_due(&mut self, now: Instant) {
        while let Some(entry) = self.timed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.due.remove(&key);
            self.request(key);
        }
    }

    /// Whether nothing runs.
    pub fn idle(&self) -> bool {
        self.running.is_empty()
    }
}

/// Runs a controller: reconciles what `requests` ask for with at most `workers` at a time,
/// each resource read from `store` when its reconcile starts. A resource the cache does not
/// hold is handed to `missing`. Returns once `requests` ended and the reconciles running then
/// are done, or at once when the cache's writer is gone before it filled.
pub async fn run<K, Reconcile>(
    store: Store<K>,
    requests: impl Stream<Item = Request<ObjectRef<K>>>,
    workers: usize,
    reconcile: impl Fn(Arc<K>) -> Reconcile,
    mut missing: impl FnMut(&ObjectRef<K>),
) where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash + Default,
    Reconcile: Future<Output = Action>,
{
    let mut queue = WorkQueue::default();
    let mut running = FuturesUnordered::new();
    let mut requests = std::pin::pin!(requests.fuse());
    let mut filled = std::pin::pin!(store.wait_until_ready());
    let mut ready = false;
    let mut open = true;
    loop {
        while ready && let Some(key) = queue.start(workers) {
            match store.get(&key) {
                Some(object) => {
                    let reconciling = reconcile(object);
                    running.push(async move { (key, reconciling.await) });
                }
                None => {
                    missing(&key);
                    queue.finished(key, Action::await_change(), Instant::now());
                }
            }
        }
        if !open && queue.idle() {
            return;
        }
        let due = queue.next_due();
        tokio::select! {
            Some((key, action)) = running.next(), if !running.is_empty() => {
                queue.finished(key, action, Instant::now());
            }
            request = requests.next(), if open => match request {
                Some(Request::One(key)) => queue.request(key),
                Some(Request::All) => {
                    for object in store.state() {
                        queue.request(key_of(&*object));
                    }
                }
                None => open = false,
            },
            () = wait_until(due) => queue.take_due(Instant::now()),
            filled_now = &mut filled, if !ready => match filled_now {
                Ok(()) => ready = true,
                Err(_) => return,
            },
        }
    }
}

/// The key of `object` in the queue: its name and namespace, which are all a lookup in the cache
/// compares. Its uid and resourceVersion are left out: a queued key would only hold them.
pub fn key_of<K: Resource>(object: &K) -> ObjectRef<K>
where
    K::DynamicType: Default,
{
    let meta = object.meta();
    let mut key = ObjectRef::new(meta.name.as_deref().unwrap_or_default());
    key.namespace = meta.namespace.clone();
    key
}

/// Resolves at `due`; never without one. The timer is made only when there is a time to wait
/// for: a request due now needs none.
async fn wait_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
