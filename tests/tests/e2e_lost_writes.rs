//! Writes whose answer never arrived: the server committed them, but the reconciler did not hear
//! so (a lost answer, a process killed right after the write). Each ends `Registered` with its
//! Secret delivered and is never reported as drift: the reconciler adopts its own write and mints
//! the secret that was lost with the answer again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use nauthera_fake_server::{Fault, FaultCode, Method};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::Branding;
use nauthera_tests::e2e::{
    Declared, ISSUER, MANAGER, Stack, StackOptions, generated_client, secret_value, sha256_hex,
    short_lease, status_of,
};

/// The client ends registered with the secret the server holds in its Secret, and no event ever
/// called it drifted.
async fn registered_with_its_secret_and_never_drifted(stack: &Stack, name: &str) {
    // Registered first with the adopted revision, then again once the new secret is written.
    stack
        .eventually("the client is registered with its Secret", async || {
            let client = stack.wait_reason(name, Reason::Registered).await;
            let held = stack.server.client(&stack.object_ref(name)).unwrap();
            status_of(&client).revision.as_deref() == Some(held.revision.as_str())
                && status_of(&client).secret_ref.is_some()
        })
        .await;
    let secret = stack.secret(name).await.expect("the Secret is delivered");
    let value = secret_value(&secret, "clientSecret").unwrap();
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref(name)),
        Some(sha256_hex(value.as_bytes())),
        "the Secret holds the secret in force"
    );
    // Events are recorded after the status they go with: wait for the one this looks for.
    let minted_again = |events: &[nauthera_tests::e2e::EventSeen]| {
        events.iter().any(|e| {
            e.reason == "SecretDelivered" && e.message.contains("minted a new client secret")
        })
    };
    stack
        .eventually("the events are recorded", async || {
            minted_again(&stack.events_for("OIDCClient", name).await)
        })
        .await;
    let events = stack.events_for("OIDCClient", name).await;
    assert!(
        !events.iter().any(|e| e.reason == "Drifted"),
        "the reconciler's own write was reported as drift: {events:?}"
    );
    assert!(
        minted_again(&events),
        "an event says the secret was minted again: {events:?}"
    );
    assert!(
        events.iter().all(|e| !e.message.contains(&value)),
        "no event shows the secret"
    );
}

async fn a_write_whose_answer_is_lost_is_adopted_and_its_secret_minted_again() {
    let stack = Stack::start().await;
    stack.server.inject_fault(
        Some(Method::ApplyClient),
        Fault::losing_answers(FaultCode::Unavailable, 1),
    );
    stack.apply(&generated_client("web")).await;
    registered_with_its_secret_and_never_drifted(&stack, "web").await;
    // Events are recorded after the status this waited for.
    stack
        .eventually("an event says the lost write was adopted", async || {
            stack
                .events_for("OIDCClient", "web")
                .await
                .iter()
                .any(|e| e.message.contains("adopted revision"))
        })
        .await;
    // The creation, then the new secret: nothing written twice for nothing.
    assert_eq!(stack.server.counters().writes_by(MANAGER), 2);
}
nauthera_tests::e2e_test!(a_write_whose_answer_is_lost_is_adopted_and_its_secret_minted_again);

async fn a_reconciler_killed_right_after_a_write_is_followed_without_drift() {
    let mut stack = Stack::start_with(StackOptions {
        // A killed leader releases nothing: a short lease lets the next one take over soon.
        reconciler_env: short_lease(4, 3),
        ..StackOptions::default()
    })
    .await;
    // The server commits the write and then hangs: the process dies before any answer.
    stack.server.inject_fault(
        Some(Method::ApplyClient),
        Fault::hanging_after_effect(FaultCode::Unavailable, 1, Duration::from_secs(600)),
    );
    stack.apply(&generated_client("web")).await;
    stack
        .eventually("the server holds the client", async || {
            stack.server.client(&stack.object_ref("web")).is_some()
        })
        .await;
    stack.reconciler.take().unwrap().kill().await;

    let next = stack.start_replica("replica-b").await.unwrap();
    next.wait_ready().await.unwrap();
    stack.reconciler = Some(next);
    registered_with_its_secret_and_never_drifted(&stack, "web").await;
}
nauthera_tests::e2e_test!(a_reconciler_killed_right_after_a_write_is_followed_without_drift);

/// Waits until the server holds client `web` as `written` says (watched closely: the reconciler
/// retries within a second), then answers every call of `methods` with Unavailable, so that the
/// reconciler cannot learn of its write.
async fn once_written_fail(
    stack: &Stack,
    what: &str,
    written: impl Fn(&nauthera_proto::v1::Client) -> bool,
    methods: &[Method],
) {
    let reference = stack.object_ref("web");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !stack.server.client(&reference).is_some_and(|c| written(&c)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} never reached the server"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for method in methods {
        stack
            .server
            .inject_fault(Some(*method), Fault::always(FaultCode::Unavailable));
    }
}

/// A create whose answer was lost, then the manifest deleted (Delete policy) before the
/// reconciler could adopt the write: the object the server holds is looked at, adopted and
/// deleted, not left behind as if nothing had been registered.
async fn a_manifest_deleted_after_a_lost_create_answer_deletes_the_object() {
    let stack = Stack::start().await;
    let reference = stack.object_ref("web");
    stack.server.inject_fault(
        Some(Method::ApplyClient),
        Fault::losing_answers(FaultCode::Unavailable, 1),
    );
    stack.apply(&generated_client("web")).await;
    // The create took effect; from now on nothing can be written or read, so the reconciler
    // cannot learn of its write before the manifest goes.
    once_written_fail(
        &stack,
        "the create",
        |_| true,
        &[Method::ApplyClient, Method::GetClient, Method::DeleteClient],
    )
    .await;
    let client = stack.oidc_client("web").await.unwrap();
    assert!(
        client
            .status
            .as_ref()
            .and_then(|s| s.revision.as_ref())
            .is_none(),
        "the reconciler must not know of its write yet: {:?}",
        client.status
    );
    stack.delete_oidc_client("web").await;
    // Still held while the server cannot be asked: the finalizer stays.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        stack.oidc_client("web").await.is_some(),
        "the finalizer was released unseen"
    );

    stack.server.clear_faults();
    stack.wait_gone("web").await;
    assert!(
        stack.server.client(&reference).is_none(),
        "the object the lost create made is deleted with its manifest"
    );
    let deleted = stack
        .server
        .audit_events()
        .into_iter()
        .any(|e| e.action == "client.deleted" && e.manager == MANAGER);
    assert!(deleted, "the reconciler deleted it");
}
nauthera_tests::e2e_test!(a_manifest_deleted_after_a_lost_create_answer_deletes_the_object);

/// An update whose answer was lost, then the manifest deleted before the reconciler learned of
/// it: the delete meets a revision it did not record, looks, adopts its own write and deletes it,
/// instead of leaving it in place as drift.
async fn a_manifest_deleted_after_a_lost_update_answer_deletes_the_object() {
    let stack = Stack::start().await;
    let reference = stack.object_ref("web");
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    stack.server.inject_fault(
        Some(Method::ApplyClient),
        Fault::losing_answers(FaultCode::Unavailable, 1),
    );
    stack
        .apply(&nauthera_tests::e2e::generated_client_with(
            "web",
            "Delete",
            "  postLogoutRedirectUris:\n    - https://web.example.test/\n",
        ))
        .await;
    once_written_fail(
        &stack,
        "the update",
        |client| client.generation_in_force >= 2,
        &[Method::ApplyClient, Method::GetClient],
    )
    .await;
    stack.delete_oidc_client("web").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stack.server.clear_faults();
    stack.wait_gone("web").await;
    assert!(
        stack.server.client(&reference).is_none(),
        "the object is deleted with its manifest, not left in place as drift"
    );
    let events = stack.events_for("OIDCClient", "web").await;
    assert!(
        !events
            .iter()
            .any(|e| e.reason == "Drifted" || e.reason == "DeletionSkippedDrifted"),
        "the reconciler's own write was taken for drift: {events:?}"
    );
}
nauthera_tests::e2e_test!(a_manifest_deleted_after_a_lost_update_answer_deletes_the_object);

/// A Branding (a kind the server does not list, so a reconciler knows of one only by a change
/// it saw or a read) whose create committed while its reconciler died, its manifest then deleted
/// with the Delete policy: the next reconciler has no revision recorded and has seen nothing of
/// it, and reads the server before the manifest goes, so the object is adopted and deleted, not
/// left behind as if nothing had been registered.
async fn a_branding_deleted_after_a_lost_create_is_read_and_deleted() {
    let mut stack = Stack::start_with(StackOptions {
        // A killed leader releases nothing: a short lease lets the next one take over soon.
        reconciler_env: short_lease(4, 3),
        ..StackOptions::default()
    })
    .await;
    let reference = stack.object_ref("look");
    // The server commits the create and then hangs: the process dies before any answer.
    stack.server.inject_fault(
        Some(Method::ApplyBranding),
        Fault::hanging_after_effect(FaultCode::Unavailable, 1, Duration::from_secs(600)),
    );
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: look
spec:
  issuer: {ISSUER}
  branding:
    texts:
      title: Look
  deletionPolicy: Delete
"
        ))
        .await;
    stack
        .eventually("the server holds the branding", async || {
            stack.server.branding(&reference).is_some()
        })
        .await;
    stack.reconciler.take().unwrap().kill().await;
    let branding = stack.manifest::<Branding>("look").await.unwrap();
    assert!(
        branding
            .declared_status()
            .and_then(|s| s.revision.as_ref())
            .is_none(),
        "no revision may be recorded: {:?}",
        branding.declared_status()
    );
    stack.delete_manifest::<Branding>("look").await;
    // The next reconciler cannot read the server at first: the manifest must wait for it.
    for method in [
        Method::ApplyBranding,
        Method::GetBranding,
        Method::DeleteBranding,
    ] {
        stack
            .server
            .inject_fault(Some(method), Fault::always(FaultCode::Unavailable));
    }
    let reads_before = stack.server.counters().calls_of(Method::GetBranding);
    let next = stack.start_replica("replica-b").await.unwrap();
    next.wait_ready().await.unwrap();
    stack.reconciler = Some(next);
    stack
        .eventually(
            "the next reconciler tried to read the branding",
            async || stack.server.counters().calls_of(Method::GetBranding) > reads_before,
        )
        .await;
    assert!(
        stack.manifest::<Branding>("look").await.is_some(),
        "the finalizer was released without reading the server"
    );

    stack.server.clear_faults();
    stack.wait_gone_of::<Branding>("look").await;
    assert!(
        stack.server.branding(&reference).is_none(),
        "the object the lost create made is deleted with its manifest"
    );
    let deleted = stack
        .server
        .audit_events()
        .into_iter()
        .any(|e| e.action == "branding.deleted" && e.manager == MANAGER);
    assert!(deleted, "the reconciler deleted it");
    let events = stack.events_for("Branding", "look").await;
    assert!(
        !events.iter().any(|e| e.reason == "Drifted"),
        "the reconciler's own write was taken for drift: {events:?}"
    );
}
nauthera_tests::e2e_test!(a_branding_deleted_after_a_lost_create_is_read_and_deleted);
