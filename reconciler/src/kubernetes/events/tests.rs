//! The series decision with plain values and a passed-in clock, the event's wire shape, and the
//! writes against the API emulator on loopback.

use kube::api::ListParams;

use super::*;

const NAMESPACE: &str = "team-a";

fn reporter() -> Arc<Reporter> {
    Arc::new(Reporter {
        controller: "nauthera-reconciler".to_owned(),
        instance: "nauthera-reconciler-0".to_owned(),
    })
}

fn object(name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("nauthera.io/v1alpha1".to_owned()),
        kind: Some("OIDCClient".to_owned()),
        namespace: Some(NAMESPACE.to_owned()),
        name: Some(name.to_owned()),
        uid: Some(uid.to_owned()),
        ..ObjectReference::default()
    }
}

fn web() -> ObjectReference {
    object("web", "uid-web")
}

fn drifted(note: &str) -> SeriesKey {
    SeriesKey::new(reporter(), &web(), EventReason::Drifted, note)
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

/// Observes with names `e1`, `e2`, … in the order new events are made.
struct Names(u32);

impl Names {
    fn observe(&mut self, recent: &mut RecentEvents, key: SeriesKey, now: Timestamp) -> Write {
        recent.observe(key, now, || {
            self.0 += 1;
            format!("e{}", self.0)
        })
    }
}

fn create(name: &str) -> Write {
    Write::Create {
        name: name.to_owned(),
    }
}

fn repeat(name: &str, count: i32) -> Write {
    Write::Repeat {
        name: name.to_owned(),
        count,
    }
}

const ALICE: &str = "changed on the server by user:alice@example.com (revision 7)";
const BOB: &str = "changed on the server by user:bob@example.com (revision 9)";

#[test]
fn an_identical_repeat_counts_on_the_first_event() {
    let mut recent = RecentEvents::default();
    let mut names = Names(0);
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(0)),
        create("e1")
    );
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(10)),
        repeat("e1", 2)
    );
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(20)),
        repeat("e1", 3)
    );
    assert_eq!(recent.len(), 1);
}

#[test]
fn a_different_note_is_a_new_event_and_the_first_series_goes_on() {
    let mut recent = RecentEvents::default();
    let mut names = Names(0);
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(0)),
        create("e1")
    );
    assert_eq!(
        names.observe(&mut recent, drifted(BOB), at(1)),
        create("e2")
    );
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(2)),
        repeat("e1", 2)
    );
    assert_eq!(
        names.observe(&mut recent, drifted(BOB), at(3)),
        repeat("e2", 2)
    );
}

#[test]
fn every_other_part_of_the_key_makes_a_new_event_too() {
    let mut recent = RecentEvents::default();
    let mut names = Names(0);
    let other_instance = Arc::new(Reporter {
        instance: "nauthera-reconciler-1".to_owned(),
        ..(*reporter()).clone()
    });
    let other_controller = Arc::new(Reporter {
        controller: "another-manager".to_owned(),
        ..(*reporter()).clone()
    });
    let keys = [
        drifted(ALICE),
        SeriesKey::new(reporter(), &web(), EventReason::Restored, ALICE),
        SeriesKey::new(
            reporter(),
            &object("api", "uid-api"),
            EventReason::Drifted,
            ALICE,
        ),
        // The same name recreated: another uid, another object.
        SeriesKey::new(
            reporter(),
            &object("web", "uid-web-2"),
            EventReason::Drifted,
            ALICE,
        ),
        SeriesKey::new(other_instance, &web(), EventReason::Drifted, ALICE),
        SeriesKey::new(other_controller, &web(), EventReason::Drifted, ALICE),
    ];
    for (index, key) in keys.into_iter().enumerate() {
        assert_eq!(
            names.observe(&mut recent, key, at(0)),
            create(&format!("e{}", index + 1))
        );
    }
}

#[test]
fn a_repeat_after_the_window_is_a_new_event() {
    let mut recent = RecentEvents::default();
    let mut names = Names(0);
    let window = SERIES_WINDOW.as_secs();
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(0)),
        create("e1")
    );
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(window - 1)),
        repeat("e1", 2),
        "the window runs from the last occurrence"
    );
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(2 * window - 2)),
        repeat("e1", 3)
    );
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(3 * window - 2)),
        create("e2")
    );
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(3 * window)),
        repeat("e2", 2)
    );
}

#[test]
fn series_past_the_window_are_forgotten() {
    let mut recent = RecentEvents::default();
    let mut names = Names(0);
    for index in 0..100 {
        names.observe(&mut recent, drifted(&format!("note {index}")), at(index));
    }
    assert_eq!(recent.len(), 100);
    let later = SERIES_WINDOW.as_secs() + 50;
    names.observe(&mut recent, drifted("another"), at(later));
    assert_eq!(recent.len(), 50, "those last seen a window ago are gone");
}

#[test]
fn the_cache_is_bounded_and_forgets_the_least_recently_seen() {
    let mut recent = RecentEvents::new(2, SERIES_WINDOW);
    let mut names = Names(0);
    assert_eq!(
        names.observe(&mut recent, drifted("one"), at(0)),
        create("e1")
    );
    assert_eq!(
        names.observe(&mut recent, drifted("two"), at(1)),
        create("e2")
    );
    assert_eq!(
        names.observe(&mut recent, drifted("one"), at(2)),
        repeat("e1", 2)
    );
    assert_eq!(
        names.observe(&mut recent, drifted("three"), at(3)),
        create("e3")
    );
    assert_eq!(recent.len(), 2);
    assert_eq!(
        names.observe(&mut recent, drifted("one"), at(4)),
        repeat("e1", 3),
        "seen recently, kept"
    );
    assert_eq!(
        names.observe(&mut recent, drifted("two"), at(5)),
        create("e4"),
        "the least recently seen was evicted"
    );
    assert_eq!(recent.len(), 2);
}

#[test]
fn many_distinct_notes_stay_within_the_capacity() {
    let mut recent = RecentEvents::default();
    let mut names = Names(0);
    for index in 0..(SERIES_CAPACITY + 1000) {
        names.observe(&mut recent, drifted(&format!("note {index}")), at(0));
    }
    assert_eq!(recent.len(), SERIES_CAPACITY);
    assert_eq!(recent.by_use.len(), SERIES_CAPACITY);
}

#[test]
fn a_forgotten_series_starts_again() {
    let mut recent = RecentEvents::default();
    let mut names = Names(0);
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(0)),
        create("e1")
    );
    recent.forget(&drifted(ALICE));
    assert_eq!(recent.len(), 0);
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(1)),
        create("e2")
    );
}

#[test]
fn a_clock_that_steps_back_still_repeats() {
    let mut recent = RecentEvents::default();
    let mut names = Names(0);
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(100)),
        create("e1")
    );
    assert_eq!(
        names.observe(&mut recent, drifted(ALICE), at(90)),
        repeat("e1", 2)
    );
}

#[test]
fn notes_are_capped_in_characters_and_bytes() {
    assert_eq!(capped_note(ALICE), ALICE);
    assert_eq!(capped_note(&"a".repeat(1500)).chars().count(), NOTE_CHARS);
    let wide = capped_note(&"é".repeat(1000));
    assert!(wide.len() <= 1024, "{}", wide.len());
    assert_eq!(wide.chars().count(), 512);
    // Two notes that differ only past the cap are the same event.
    let long = "x".repeat(NOTE_CHARS);
    assert_eq!(
        drifted(&format!("{long} alice")),
        drifted(&format!("{long} bob"))
    );
}

#[test]
fn event_names_are_the_object_name_and_hex() {
    let name = event_name("web", Timestamp::from_nanosecond(255).unwrap(), 0xab);
    assert_eq!(name, "web.ff00ab");
    let long = format!("{}-x", "a".repeat(300));
    let name = event_name(&long, at(0), 1);
    assert!(name.len() <= 253, "{}", name.len());
    let dotted = event_name(&format!("{}.b", "a".repeat(231)), at(0), 1);
    assert!(dotted.len() <= 253);
    let (prefix, _) = dotted.rsplit_once('.').unwrap();
    assert!(
        prefix.ends_with(|c: char| c.is_ascii_alphanumeric()),
        "{dotted}"
    );
}

#[test]
fn a_new_event_has_the_fields_kube_writes() {
    let key = drifted(ALICE);
    let event = new_event(&reporter(), &web(), &key, "web.1".to_owned(), at(0));
    let json = serde_json::to_value(&event).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": { "name": "web.1", "namespace": NAMESPACE },
            "action": "Reconcile",
            "reason": "Drifted",
            "note": ALICE,
            "type": "Warning",
            "eventTime": "2023-11-14T22:13:20.000000Z",
            "regarding": {
                "apiVersion": "nauthera.io/v1alpha1",
                "kind": "OIDCClient",
                "namespace": NAMESPACE,
                "name": "web",
                "uid": "uid-web",
            },
            "reportingController": "nauthera-reconciler",
            "reportingInstance": "nauthera-reconciler-0",
        })
    );
    let normal = new_event(
        &reporter(),
        &web(),
        &SeriesKey::new(reporter(), &web(), EventReason::Registered, "ok"),
        "web.2".to_owned(),
        at(0),
    );
    assert_eq!(normal.type_.as_deref(), Some("Normal"));
}

#[test]
fn a_repeat_patches_only_the_series() {
    assert_eq!(
        repeat_patch(2, at(0)),
        serde_json::json!({
            "series": { "count": 2, "lastObservedTime": "2023-11-14T22:13:20.000000Z" }
        })
    );
}

async fn cluster() -> (nauthera_kube_emulator::Emulator, kube::Client) {
    crate::kubernetes::test_cluster::cluster(NAMESPACE, crate::kubernetes::test_cluster::Crds::None)
        .await
}

/// The events on `web`, oldest first, as (note, series count).
async fn notes(events: &Api<Event>) -> Vec<(String, Option<i32>)> {
    let mut listed = events.list(&ListParams::default()).await.unwrap().items;
    listed.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    listed
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web"))
        .map(|e| {
            (
                e.note.unwrap_or_default(),
                e.series.map(|series| series.count),
            )
        })
        .collect()
}

#[tokio::test]
async fn events_are_written_per_note_and_repeats_counted() {
    let (_emulator, client) = cluster().await;
    let recorder = EventRecorder::new(client.clone(), (*reporter()).clone());
    let events: Api<Event> = Api::namespaced(client, NAMESPACE);

    recorder
        .publish(&web(), EventReason::Drifted, ALICE, at(0))
        .await
        .unwrap();
    recorder
        .publish(&web(), EventReason::Drifted, BOB, at(1))
        .await
        .unwrap();
    assert_eq!(
        notes(&events).await,
        vec![(ALICE.to_owned(), None), (BOB.to_owned(), None)],
        "another note is another event"
    );

    recorder
        .publish(&web(), EventReason::Drifted, BOB, at(2))
        .await
        .unwrap();
    assert_eq!(
        notes(&events).await,
        vec![(ALICE.to_owned(), None), (BOB.to_owned(), Some(2))],
        "an identical repeat counts on its event"
    );
    let bob = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|e| e.note.as_deref() == Some(BOB))
        .unwrap();
    assert_eq!(
        bob.series.as_ref().map(|s| s.last_observed_time.0),
        Some(at(2))
    );
    assert_eq!(bob.event_time.map(|t| t.0), Some(at(1)));

    // A repeat of an event that is gone is written again as a new one.
    events
        .delete(bob.metadata.name.as_deref().unwrap(), &Default::default())
        .await
        .unwrap();
    recorder
        .publish(&web(), EventReason::Drifted, BOB, at(3))
        .await
        .unwrap();
    assert_eq!(
        notes(&events).await,
        vec![(ALICE.to_owned(), None), (BOB.to_owned(), None)]
    );
}
