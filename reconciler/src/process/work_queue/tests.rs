use std::sync::Mutex;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::*;

fn at(start: Instant, millis: u64) -> Instant {
    start + Duration::from_millis(millis)
}

#[test]
fn requests_run_in_order_once_each_and_never_beside_themselves() {
    let mut queue = WorkQueue::default();
    queue.request("web");
    queue.request("api");
    // Asked for twice while waiting: it waits once.
    queue.request("web");
    assert_eq!(queue.start(2), Some("web"));
    assert_eq!(queue.start(2), Some("api"));
    // Two workers, both busy.
    queue.request("db");
    assert_eq!(queue.start(2), None);
    // Asked for while it runs: not beside itself, but right after.
    queue.request("web");
    let now = Instant::now();
    queue.finished("api", Action::await_change(), now);
    assert_eq!(queue.start(2), Some("db"));
    assert_eq!(queue.start(3), None, "web still runs");
    queue.finished("web", Action::await_change(), now);
    assert_eq!(queue.start(3), Some("web"));
    queue.finished("web", Action::await_change(), now);
    queue.finished("db", Action::await_change(), now);
    assert_eq!(queue.start(3), None);
    assert!(queue.idle());
}

#[test]
fn a_requeue_waits_for_its_time_and_a_request_meanwhile_goes_first() {
    let start = Instant::now();
    let mut queue = WorkQueue::default();
    queue.request("web");
    assert_eq!(queue.start(1), Some("web"));
    queue.finished("web", Action::requeue(Duration::from_millis(500)), start);
    assert_eq!(queue.next_due(), Some(at(start, 500)));
    queue.take_due(at(start, 499));
    assert_eq!(queue.start(1), None, "not due yet");
    queue.take_due(at(start, 500));
    assert_eq!(queue.start(1), Some("web"));
    assert_eq!(queue.next_due(), None);

    // A change before the time: reconciled at once, and the timer is gone.
    queue.finished("web", Action::requeue(Duration::from_secs(5)), start);
    queue.request("web");
    assert_eq!(queue.next_due(), None);
    assert_eq!(queue.start(1), Some("web"));
    // A zero delay is a request now.
    queue.finished("web", Action::requeue(Duration::ZERO), start);
    assert_eq!(queue.next_due(), None);
    assert_eq!(queue.start(1), Some("web"));
}

#[test]
fn the_earlier_of_two_times_stands() {
    let start = Instant::now();
    let mut queue = WorkQueue::default();
    for (key, delay) in [("web", 300), ("api", 100)] {
        queue.request(key);
        assert_eq!(queue.start(2), Some(key));
        queue.finished(key, Action::requeue(Duration::from_millis(delay)), start);
    }
    assert_eq!(queue.next_due(), Some(at(start, 100)));
    // A later requeue does not put an earlier one off; an earlier one brings it forward.
    queue.request_at("api", at(start, 900));
    queue.request_at("web", at(start, 50));
    assert_eq!(queue.next_due(), Some(at(start, 50)));
    queue.take_due(at(start, 100));
    assert_eq!(queue.start(2), Some("web"));
    assert_eq!(queue.start(2), Some("api"));
    assert_eq!(queue.next_due(), None);
    // One asked for again while running runs after it, and its own requeue is not needed.
    queue.request("web");
    queue.finished("web", Action::requeue(Duration::from_secs(60)), start);
    assert_eq!(queue.next_due(), None);
    assert_eq!(queue.start(2), Some("web"));
}

fn config_map(name: &str) -> ConfigMap {
    let mut map = ConfigMap::default();
    map.metadata.name = Some(name.to_owned());
    map.metadata.namespace = Some("team".to_owned());
    map
}

fn key(name: &str) -> ObjectRef<ConfigMap> {
    ObjectRef::new(name).within("team")
}

fn filled(names: &[&str]) -> (Store<ConfigMap>, Writer<ConfigMap>) {
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for name in names {
        writer.apply_watcher_event(&watcher::Event::InitApply(config_map(name)));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    (store, writer)
}

/// A reconcile that reports the name of what it was given and asks for nothing more.
fn reporting(
    reconciled: mpsc::UnboundedSender<String>,
) -> impl Fn(Arc<ConfigMap>) -> std::future::Ready<Action> {
    move |object| {
        let _ = reconciled.send(object.metadata.name.clone().unwrap_or_default());
        std::future::ready(Action::await_change())
    }
}

#[test]
fn a_request_starts_its_reconcile_without_a_timer() {
    // A runtime without timers: a request that waited on one would panic.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (store, _writer) = filled(&["web", "api"]);
        let (requests, received) = mpsc::unbounded_channel();
        let (reconciled, mut reconciles) = mpsc::unbounded_channel();
        let missing = Arc::new(Mutex::new(Vec::new()));
        let running = tokio::spawn(run(
            store,
            UnboundedReceiverStream::new(received),
            2,
            reporting(reconciled),
            {
                let missing = missing.clone();
                move |key: &ObjectRef<ConfigMap>| missing.lock().unwrap().push(key.name.clone())
            },
        ));
        requests.send(Request::One(key("web"))).unwrap();
        assert_eq!(reconciles.recv().await.as_deref(), Some("web"));
        requests.send(Request::One(key("gone"))).unwrap();
        requests.send(Request::All).unwrap();
        let mut all = vec![
            reconciles.recv().await.unwrap(),
            reconciles.recv().await.unwrap(),
        ];
        all.sort();
        assert_eq!(all, ["api", "web"]);
        assert_eq!(*missing.lock().unwrap(), ["gone"]);
        drop(requests);
        running.await.unwrap();
    });
}

#[tokio::test]
async fn a_resource_is_never_reconciled_twice_at_once() {
    let (store, _writer) = filled(&["web"]);
    let (requests, received) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let (reconciled, mut reconciles) = mpsc::unbounded_channel();
    let running = tokio::spawn(run(
        store,
        UnboundedReceiverStream::new(received),
        4,
        {
            let release = release.clone();
            move |_: Arc<ConfigMap>| {
                let (release, reconciled) = (release.clone(), reconciled.clone());
                async move {
                    let _ = reconciled.send(());
                    release.notified().await;
                    Action::await_change()
                }
            }
        },
        |_: &ObjectRef<ConfigMap>| {},
    ));
    requests.send(Request::One(key("web"))).unwrap();
    reconciles.recv().await.unwrap();
    // Two more requests while it runs: one more reconcile, after this one.
    requests.send(Request::One(key("web"))).unwrap();
    requests.send(Request::One(key("web"))).unwrap();
    tokio::task::yield_now().await;
    assert!(reconciles.try_recv().is_err(), "not beside the running one");
    release.notify_one();
    reconciles.recv().await.unwrap();
    release.notify_one();
    drop(requests);
    running.await.unwrap();
    assert!(
        reconciles.try_recv().is_err(),
        "two requests while running make one reconcile"
    );
}

#[tokio::test]
async fn nothing_starts_before_the_cache_is_filled() {
    let (store, mut writer) = reflector::store::<ConfigMap>();
    let (requests, received) = mpsc::unbounded_channel();
    let (reconciled, mut reconciles) = mpsc::unbounded_channel();
    let running = tokio::spawn(run(
        store,
        UnboundedReceiverStream::new(received),
        1,
        reporting(reconciled),
        |_: &ObjectRef<ConfigMap>| panic!("looked up before the cache was filled"),
    ));
    requests.send(Request::One(key("web"))).unwrap();
    tokio::task::yield_now().await;
    assert!(reconciles.try_recv().is_err());
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitApply(config_map("web")));
    writer.apply_watcher_event(&watcher::Event::InitDone);
    assert_eq!(reconciles.recv().await.as_deref(), Some("web"));
    drop(requests);
    running.await.unwrap();
}
