//! A manifest deleted with `deletionPolicy: Orphan` and applied again: it re-adopts its object
//! without a write the server refuses, says it re-adopted an orphan, and takes back the Secret
//! the orphan's client secret was released into, so that a later `Delete` leaves nothing behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::api::{Api, DeleteParams};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::OIDCClient;
use nauthera_tests::e2e::{MANAGER, Stack, generated_client_with, secret_value, status_of};

const RELEASED_LABEL: &str = "nauthera.io/released";

fn refused_revisions(stack: &Stack) -> u64 {
    stack
        .server
        .counters()
        .refusals
        .get("REVISION_MISMATCH")
        .copied()
        .unwrap_or(0)
}

async fn an_orphan_applied_again_takes_its_secret_back_and_a_later_delete_leaves_nothing() {
    let stack = Stack::start().await;
    stack
        .apply(&generated_client_with("shop", "Orphan", ""))
        .await;
    let first = stack.wait_reason("shop", Reason::Registered).await;
    let client_id = status_of(&first).client_id.clone().unwrap();
    let value = secret_value(&stack.secret("shop").await.unwrap(), "clientSecret").unwrap();

    stack.delete_oidc_client("shop").await;
    stack.wait_gone("shop").await;
    let released = stack.secret("shop").await.expect("the Secret outlives it");
    assert_eq!(
        released
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(RELEASED_LABEL))
            .map(String::as_str),
        Some("true")
    );
    assert!(stack.server.client(&stack.object_ref("shop")).is_some());
    let refused_before = refused_revisions(&stack);
    let writes_before = stack.server.counters().writes_by(MANAGER);

    // Applied again: the orphan is re-adopted, its Secret taken back, nothing refused.
    stack
        .apply(&generated_client_with("shop", "Orphan", ""))
        .await;
    let again = stack
        .wait_for("shop", "registered with its Secret back", |c| {
            c.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Registered)
                    && s.secret_ref.as_ref().map(|r| r.name.as_str()) == Some("shop")
            })
        })
        .await;
    assert_eq!(
        status_of(&again).client_id.as_deref(),
        Some(client_id.as_str())
    );
    let secret = stack.secret("shop").await.unwrap();
    let owners = secret.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(
        owners.iter().map(|o| o.uid.as_str()).collect::<Vec<_>>(),
        vec![again.metadata.uid.as_deref().unwrap()],
        "owned by the manifest again"
    );
    assert!(
        !secret
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(RELEASED_LABEL)),
        "{:?}",
        secret.metadata.labels
    );
    assert_eq!(
        secret_value(&secret, "clientSecret").as_deref(),
        Some(value.as_str()),
        "the client secret the server accepts is kept"
    );
    // Events are recorded after the status this waited for.
    stack
        .eventually(
            "the adoption and the Secret taken back are told",
            async || {
                let events = stack.events_for("OIDCClient", "shop").await;
                events
                    .iter()
                    .any(|e| e.message.contains("adopted revision"))
                    && events.iter().any(|e| e.reason == "SecretDelivered")
            },
        )
        .await;
    let events = stack.events_for("OIDCClient", "shop").await;
    let adopted = events
        .iter()
        .find(|e| e.message.contains("adopted revision"))
        .unwrap_or_else(|| panic!("an adoption event: {events:#?}"));
    assert!(
        adopted.message.contains("orphan re-adopted") && !adopted.message.contains("never arrived"),
        "{}",
        adopted.message
    );
    assert!(
        events
            .iter()
            .any(|e| e.reason == "SecretDelivered" && e.message.contains("took back Secret shop")),
        "{events:#?}"
    );
    assert_eq!(
        refused_revisions(&stack),
        refused_before,
        "the re-adoption made a write the server refused"
    );
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes_before);

    // Switched to Delete and deleted: the server's client and the Secret both go.
    stack
        .apply(&generated_client_with("shop", "Delete", ""))
        .await;
    stack
        .wait_for("shop", "generation 2 in force", |c| {
            c.status
                .as_ref()
                .is_some_and(|s| s.generation_in_force == Some(2))
        })
        .await;
    stack.delete_oidc_client("shop").await;
    stack.wait_gone("shop").await;
    assert!(stack.server.client(&stack.object_ref("shop")).is_none());
    stack
        .eventually("the Secret goes with the manifest", async || {
            stack.secret("shop").await.is_none()
        })
        .await;
}
nauthera_tests::e2e_test!(
    an_orphan_applied_again_takes_its_secret_back_and_a_later_delete_leaves_nothing
);

/// `kubectl delete --cascade=orphan` of a manifest with `deletionPolicy: Orphan`: the garbage
/// collector removes the Secret's owner reference, maybe before the reconciler releases it; the
/// Secret is labelled released all the same, with the client secret the server still accepts.
async fn an_orphan_deleted_with_orphan_propagation_keeps_its_secret_released() {
    let stack = Stack::start().await;
    stack
        .apply(&generated_client_with("shop", "Orphan", ""))
        .await;
    stack.wait_reason("shop", Reason::Registered).await;
    let value = secret_value(&stack.secret("shop").await.unwrap(), "clientSecret").unwrap();

    Api::<OIDCClient>::namespaced(stack.client(), stack.namespace())
        .delete("shop", &DeleteParams::orphan())
        .await
        .expect("the delete is accepted");
    stack.wait_gone("shop").await;
    let secret = stack.secret("shop").await.expect("the Secret outlives it");
    assert!(
        secret
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty),
        "{:?}",
        secret.metadata.owner_references
    );
    assert_eq!(
        secret
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(RELEASED_LABEL))
            .map(String::as_str),
        Some("true"),
        "released, so that a manifest applied again takes it back"
    );
    assert_eq!(
        secret_value(&secret, "clientSecret").as_deref(),
        Some(value.as_str())
    );
    assert!(stack.server.client(&stack.object_ref("shop")).is_some());
    stack
        .eventually("the Orphaned event names the Secret kept", async || {
            stack
                .events_for("OIDCClient", "shop")
                .await
                .iter()
                .any(|e| e.reason == "Orphaned" && e.message.contains("Secret shop is kept"))
        })
        .await;
}
nauthera_tests::e2e_test!(an_orphan_deleted_with_orphan_propagation_keeps_its_secret_released);

/// `kubectl delete --cascade=foreground` of a manifest with `deletionPolicy: Orphan`: the person
/// asked for the manifest's dependents to be deleted first, so the garbage collector deletes the
/// Secret and the reconciler does not race it for it; the object stays registered on the server,
/// and the Orphaned event says that no copy of its client secret stays in the cluster.
async fn an_orphan_deleted_in_the_foreground_loses_its_secret_and_says_so() {
    let stack = Stack::start().await;
    stack
        .apply(&generated_client_with("shop", "Orphan", ""))
        .await;
    stack.wait_reason("shop", Reason::Registered).await;
    assert!(stack.secret("shop").await.is_some());

    Api::<OIDCClient>::namespaced(stack.client(), stack.namespace())
        .delete("shop", &DeleteParams::foreground())
        .await
        .expect("the delete is accepted");
    stack.wait_gone("shop").await;
    stack
        .eventually("the collector deletes the Secret", async || {
            stack.secret("shop").await.is_none()
        })
        .await;
    assert!(
        stack.server.client(&stack.object_ref("shop")).is_some(),
        "the object stays registered"
    );
    stack
        .eventually("the Orphaned event says no copy stays", async || {
            stack
                .events_for("OIDCClient", "shop")
                .await
                .iter()
                .any(|e| {
                    e.reason == "Orphaned"
                        && e.message.contains("Secret shop")
                        && e.message.contains("no copy of the client secret")
                })
        })
        .await;
}
nauthera_tests::e2e_test!(an_orphan_deleted_in_the_foreground_loses_its_secret_and_says_so);
