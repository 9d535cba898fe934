//! Deleting a manifest end to end: `deletionPolicy: Delete` removes the client from the server,
//! `Orphan` leaves it, and a drifted client is left in place and reported.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_fake_server::Actor;
use nauthera_shared::catalog::Reason;
use nauthera_tests::e2e::{Stack, generated_client, generated_client_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_policy_removes_the_client_from_the_server() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    assert!(stack.server.client(&stack.object_ref("web")).is_some());

    stack.delete_oidc_client("web").await;
    stack.wait_gone("web").await;
    assert!(
        stack.server.client(&stack.object_ref("web")).is_none(),
        "the client is gone from the server"
    );
    let event = stack.wait_event("web", "Deleted").await;
    assert_eq!(event.type_, "Normal");
    let audit = stack.server.audit_events();
    let deletes = audit
        .iter()
        .filter(|e| {
            e.action == "client.deleted"
                && e.manager == "nauthera-reconciler"
                && e.outcome == nauthera_proto::v1::AuditOutcome::Deleted as i32
        })
        .count();
    assert_eq!(
        deletes, 1,
        "one delete by the manager in the audit log: {audit:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_policy_leaves_the_client_registered() {
    let stack = Stack::start().await;
    stack
        .apply(&generated_client_with("web", "Orphan", ""))
        .await;
    stack.wait_reason("web", Reason::Registered).await;

    stack.delete_oidc_client("web").await;
    stack.wait_gone("web").await;
    assert!(
        stack.server.client(&stack.object_ref("web")).is_some(),
        "the client stays on the server"
    );
    let event = stack.wait_event("web", "Orphaned").await;
    assert_eq!(event.type_, "Normal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_client_is_left_in_place_when_its_manifest_is_deleted() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    let held = stack
        .server
        .edit_client(
            &stack.object_ref("web"),
            &Actor::dashboard("alice@example.com"),
            |spec| spec.display_name = "Changed by hand".to_owned(),
        )
        .unwrap();
    stack.wait_reason("web", Reason::Drifted).await;

    stack.delete_oidc_client("web").await;
    stack.wait_gone("web").await;
    let server = stack.server.client(&stack.object_ref("web")).unwrap();
    assert_eq!(server.revision, held, "the drifted client is left in place");
    let event = stack.wait_event("web", "DeletionSkippedDrifted").await;
    assert_eq!(event.type_, "Warning");
}

/// One deletion, one outcome: a client the reconciler removed itself is never reported as a
/// drifted one left in place. Several deletions in a row make the race likely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_client_is_not_reported_as_left_in_place() {
    let stack = Stack::start().await;
    let names = ["one", "two", "three", "four", "five"];
    for name in names {
        stack.apply(&generated_client(name)).await;
    }
    for name in names {
        stack.wait_reason(name, Reason::Registered).await;
    }
    for name in names {
        stack.delete_oidc_client(name).await;
    }
    for name in names {
        stack.wait_gone(name).await;
        stack.wait_event(name, "Deleted").await;
    }
    // Let any second reconcile of a deleted object finish before reading the events.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    for name in names {
        let events = stack.events_for("OIDCClient", name).await;
        assert!(
            !events.iter().any(|e| e.reason == "DeletionSkippedDrifted"),
            "{name}: a client it deleted itself is reported as left in place: {events:#?}"
        );
    }
}
