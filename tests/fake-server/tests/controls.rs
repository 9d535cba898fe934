//! Test controls: faults, latency, an older server, out-of-band changes, backup restores, the
//! change stream, and the counters.

#![allow(clippy::unwrap_used)]

mod support;

use nauthera_shared::catalog::ServerReason;
use std::time::Duration;

use nauthera_client::CallError;
use nauthera_fake_server::{Actor, FakeServerConfig, Fault, FaultCode, Method};
use nauthera_proto::v1::{self, ObjectKind};
use support::*;

#[tokio::test]
async fn each_fault_kind_is_answered_before_the_call_takes_effect() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    for (fault, code) in [
        (FaultCode::Unavailable, tonic::Code::Unavailable),
        (FaultCode::Aborted, tonic::Code::Aborted),
        (FaultCode::Internal, tonic::Code::Internal),
        (FaultCode::Unknown, tonic::Code::Unknown),
        (FaultCode::ResourceExhausted, tonic::Code::ResourceExhausted),
    ] {
        harness
            .server
            .inject_fault(Some(Method::ApplyClient), Fault::times(fault, 1));
        let hint = harness.server.change_hint();
        let error = client
            .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
            .await
            .unwrap_err();
        let server = error.server().expect("an answer, not a transport failure");
        assert_eq!(server.code, code);
        assert!(error.is_retryable(), "{code:?} is retried");
        if code == tonic::Code::ResourceExhausted {
            assert_eq!(server.reason, Some(ServerReason::RateLimited));
        }
        assert_eq!(harness.server.change_hint(), hint, "nothing was written");
        assert!(harness.server.client(&acme("team-a", "web")).is_none());
    }
    // The count ran out: the next call goes through.
    client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap();
    let counters = harness.server.counters();
    assert_eq!(counters.faults["ApplyClient"], 5);
    assert_eq!(counters.calls_of(Method::ApplyClient), 6);
    assert_eq!(counters.writes_by(MANAGER), 1);
}

#[tokio::test]
async fn a_fault_for_every_method_and_a_probable_fault() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    harness
        .server
        .inject_fault(None, Fault::always(FaultCode::Unavailable));
    assert!(client.get_change_hint().await.is_err());
    assert!(client.get_server_info().await.is_err());
    harness.server.clear_faults();
    assert!(client.get_server_info().await.is_ok());

    harness.server.inject_fault(
        Some(Method::GetChangeHint),
        Fault::with_probability(FaultCode::Aborted, 0.0),
    );
    for _ in 0..5 {
        assert!(client.get_change_hint().await.is_ok());
    }
    harness.server.inject_fault(
        Some(Method::GetChangeHint),
        Fault::with_probability(FaultCode::Aborted, 1.0),
    );
    let error = client.get_change_hint().await.unwrap_err();
    assert_eq!(error.server().unwrap().code, tonic::Code::Aborted);
}

#[tokio::test]
async fn latency_delays_the_answer() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    harness.server.set_latency(
        Some(Method::GetServerInfo),
        Some(Duration::from_millis(300)),
    );
    let started = std::time::Instant::now();
    client.get_server_info().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    harness
        .server
        .set_latency(Some(Method::GetServerInfo), None);
    let started = std::time::Instant::now();
    client.get_server_info().await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(300));
}

#[tokio::test]
async fn an_older_server_answers_unimplemented_and_omits_the_feature() {
    let mut config = FakeServerConfig::for_tests();
    config.unimplemented = vec![Method::WatchChanges];
    let harness = Harness::start_with(config).await;
    let client = harness.operator().await;
    let error = client.watch_changes(None).await.unwrap_err();
    assert!(error.is_unimplemented());
    assert!(!error.is_retryable());
    let info = client.get_server_info().await.unwrap();
    assert!(!info.features.contains(&"watch_changes".to_owned()));
    assert!(info.features.contains(&"audit_events".to_owned()));

    harness
        .server
        .set_unimplemented(Method::ListClientRevisions, true);
    let error = client
        .list_client_revisions(Default::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, CallError::Server(server) if server.code == tonic::Code::Unimplemented)
    );
}

#[tokio::test]
async fn out_of_band_delete_is_seen_by_the_reconciler_and_audited() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let created = client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap()
        .client
        .unwrap();
    let hint = client.get_change_hint().await.unwrap();
    harness
        .server
        .delete_object(
            ObjectKind::Client,
            &acme("team-a", "web"),
            &Actor::dashboard("carol@example.com").because("decommissioned"),
        )
        .unwrap();
    let moved = client.get_change_hint().await.unwrap();
    assert_eq!(moved.sequence, hint.sequence + 1);
    let error = client.get_client(acme("team-a", "web")).await.unwrap_err();
    assert_eq!(error.server().unwrap().code, tonic::Code::NotFound);
    let events = client
        .list_audit_events(v1::ListAuditEventsRequest {
            organization: "acme".into(),
            client_id: created.client_id,
            ..Default::default()
        })
        .await
        .unwrap()
        .events;
    assert_eq!(events[0].action, "client.deleted");
    assert_eq!(events[0].actor, "user:carol@example.com");
    assert_eq!(events[0].cause, "decommissioned");
    assert_eq!(events[0].manager, "");
}

#[tokio::test]
async fn watch_changes_streams_every_change_and_replays_from_a_hint() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let start = client.get_change_hint().await.unwrap();
    let mut stream = client.watch_changes(Some(start.clone())).await.unwrap();
    let created = client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap()
        .client
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!event.resync_required);
    assert_eq!(event.kind, ObjectKind::Client as i32);
    assert_eq!(event.client_id, created.client_id);
    assert_eq!(event.revision, created.revision);
    assert_eq!(event.hint.as_ref().unwrap().sequence, start.sequence + 1);
    assert_eq!(event.written.unwrap().manager, MANAGER);

    harness
        .server
        .edit_client(
            &acme("team-a", "web"),
            &Actor::dashboard("dave@example.com"),
            |spec| spec.display_name = "by hand".into(),
        )
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(event.written.unwrap().actor, "user:dave@example.com");

    // A new stream from the start hint replays both changes.
    let mut replay = client.watch_changes(Some(start)).await.unwrap();
    for expected in 1..=2 {
        let event = replay.next().await.unwrap().unwrap();
        assert_eq!(
            event.hint.unwrap().sequence,
            harness.server.change_hint().sequence - 2 + expected
        );
    }
}

#[tokio::test]
async fn a_hint_too_old_or_of_another_epoch_requires_a_resync() {
    let mut config = FakeServerConfig::for_tests();
    config.change_history = 2;
    let harness = Harness::start_with(config).await;
    let client = harness.operator().await;
    let start = client.get_change_hint().await.unwrap();
    for name in ["a", "b", "c"] {
        client
            .apply_client(apply(acme("team-a", name), web_spec(), 1))
            .await
            .unwrap();
    }
    let mut stream = client.watch_changes(Some(start.clone())).await.unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(first.resync_required);
    assert_eq!(first.hint, Some(harness.server.change_hint()));

    let mut foreign = start;
    foreign.epoch = "another-epoch".into();
    let mut stream = client.watch_changes(Some(foreign)).await.unwrap();
    assert!(stream.next().await.unwrap().unwrap().resync_required);
}

#[tokio::test]
async fn a_backup_restore_moves_many_revisions_at_once_in_a_new_epoch() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    for name in ["one", "two", "three"] {
        client
            .apply_client(apply(acme("team-a", name), web_spec(), 1))
            .await
            .unwrap();
    }
    let backup = harness.server.backup();
    let mut written = Vec::new();
    for name in ["one", "two", "three"] {
        let held = harness.server.client(&acme("team-a", name)).unwrap();
        let mut request = apply(acme("team-a", name), web_spec(), 2);
        request.if_revision = if_revision(&held.revision);
        written.push(client.apply_client(request).await.unwrap().client.unwrap());
    }
    client
        .apply_client(apply(acme("team-a", "four"), web_spec(), 1))
        .await
        .unwrap();
    let before = client.get_change_hint().await.unwrap();
    let mut stream = client.watch_changes(Some(before.clone())).await.unwrap();

    let changed = harness.server.restore(
        &backup,
        &Actor {
            actor: "user:ops@example.com".into(),
            cause: String::new(),
        },
    );
    assert_eq!(changed, 4);

    let after = client.get_change_hint().await.unwrap();
    assert_ne!(after.epoch, before.epoch);
    let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(event.resync_required);

    let listed = client
        .list_client_revisions(Default::default())
        .await
        .unwrap();
    assert_eq!(listed.clients.len(), 3);
    for declared in &written {
        let held = listed
            .clients
            .iter()
            .find(|held| held.client_id == declared.client_id)
            .expect("the client is back");
        assert_ne!(declared.revision, held.revision, "every client drifted");
    }
    // The reconciler's precondition now fails for each of them.
    let mut request = apply(acme("team-a", "one"), web_spec(), 3);
    request.if_revision = if_revision(&written[0].revision);
    let error = client.apply_client(request).await.unwrap_err();
    assert_eq!(error.reason(), Some(ServerReason::RevisionMismatch));
    let events = harness.server.audit_events();
    let restored: Vec<_> = events
        .iter()
        .filter(|event| event.cause == "restore from backup")
        .collect();
    assert_eq!(restored.len(), 4);
    assert!(
        restored
            .iter()
            .all(|event| event.actor == "user:ops@example.com")
    );
    // A client the restore removed is named by the client id it had.
    assert!(
        restored
            .iter()
            .any(|event| event.action == "client.deleted" && !event.client_id.is_empty())
    );
}

#[tokio::test]
async fn a_steady_state_makes_no_writes() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap();
    harness.server.reset_counters();
    for _ in 0..3 {
        client.get_change_hint().await.unwrap();
        client
            .list_client_revisions(Default::default())
            .await
            .unwrap();
    }
    let counters = harness.server.counters();
    assert_eq!(counters.total_writes(), 0);
    assert_eq!(counters.calls_of(Method::GetChangeHint), 3);
    assert_eq!(counters.calls_of(Method::ListClientRevisions), 3);
    client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 2))
        .await
        .unwrap();
    assert_eq!(harness.server.counters().writes_by(MANAGER), 1);
}

#[tokio::test]
async fn open_streams_end_when_the_server_becomes_unreachable() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let mut stream = client.watch_changes(None).await.unwrap();
    harness.server.go_unreachable().await;
    let ended = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("the stream ends");
    assert!(matches!(ended, Ok(None) | Err(_)));
}

#[tokio::test]
async fn editing_a_missing_object_changes_nothing() {
    let harness = Harness::start().await;
    let hint = harness.server.change_hint();
    let error = harness
        .server
        .edit_client(
            &acme("team-a", "nobody"),
            &Actor::dashboard("eve@example.com"),
            |_| {},
        )
        .unwrap_err();
    assert!(error.to_string().contains("nobody"));
    assert_eq!(harness.server.change_hint(), hint);
}
