//! Deleting a manifest end to end: `deletionPolicy: Delete` removes the client from the server,
//! `Orphan` leaves it, and a drifted client is left in place and reported.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use nauthera_fake_server::{Actor, Method};
use nauthera_proto::v1::{AuditOutcome, ObjectRef};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::OIDCClient;
use nauthera_tests::cluster::{Sharing, TEST_LABEL};
use nauthera_tests::e2e::{
    Stack, StackOptions, generated_client, generated_client_with, is_registered, secret_value,
    sha256_hex,
};

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
    // Its Secret holds a value nothing accepts any more: collected with its owner.
    stack
        .eventually("the Secret collected", async || {
            stack.secret("web").await.is_none()
        })
        .await;
    let event = stack.wait_event("web", "Deleted").await;
    assert_eq!(event.type_, "Normal");
    // Let a second reconcile of the deleted object, if any, reach the server.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let audit = stack.server.audit_events();
    let deletes = audit
        .iter()
        .filter(|e| {
            e.action == "client.deleted"
                && e.manager == "nauthera-reconciler"
                && e.outcome == AuditOutcome::Deleted as i32
        })
        .count();
    assert_eq!(
        deletes, 1,
        "one delete by the manager in the audit log: {audit:#?}"
    );
    let refused = audit
        .iter()
        .filter(|e| e.action == "client.deleted" && e.outcome != AuditOutcome::Deleted as i32)
        .count();
    assert_eq!(refused, 0, "no refused delete in the audit log: {audit:#?}");
    assert_eq!(
        stack.server.counters().calls_of(Method::DeleteClient),
        1,
        "one DeleteClient call for one deletion"
    );
}
nauthera_tests::e2e_test!(delete_policy_removes_the_client_from_the_server);

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
    assert!(
        event.message.contains("Secret web is kept"),
        "the event says the Secret stays: {}",
        event.message
    );

    // The Secret holds the only copy of a secret the server still accepts: released, not
    // collected with its owner.
    let secret = stack.secret("web").await.expect("the Secret is kept");
    let value = secret_value(&secret, "clientSecret").expect("the client secret is kept");
    assert!(
        secret
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "no owner reference is left for the garbage collector"
    );
    let labels = secret.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("nauthera.io/released").map(String::as_str),
        Some("true")
    );
    assert!(!labels.contains_key("app.kubernetes.io/managed-by"));
    assert_eq!(
        secret
            .metadata
            .annotations
            .unwrap_or_default()
            .get("nauthera.io/released-from")
            .map(String::as_str),
        Some("OIDCClient/web")
    );
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        Some(sha256_hex(value.as_bytes())),
        "the kept Secret holds the secret the server accepts"
    );
}
nauthera_tests::e2e_test!(orphan_policy_leaves_the_client_registered);

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
    let secret = stack
        .secret("web")
        .await
        .expect("its Secret is kept with it");
    assert!(
        secret
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
}
nauthera_tests::e2e_test!(a_drifted_client_is_left_in_place_when_its_manifest_is_deleted);

/// One deletion, one outcome: a client the reconciler removed itself is never reported as a
/// drifted one left in place. Several deletions in a row make the race likely.
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
    assert_eq!(
        stack.server.counters().calls_of(Method::DeleteClient),
        names.len() as u64,
        "one DeleteClient call per deletion"
    );
}
nauthera_tests::e2e_test!(a_deleted_client_is_not_reported_as_left_in_place);

/// A change that arrives while the delete is in flight (here the client's Secret deleted by
/// hand) reconciles the manifest again as soon as the first reconcile lets it go, from a watch
/// cache that may still hold it with its finalizer: the deletion is finished, and the server
/// gets no second delete.
async fn a_change_during_the_delete_sends_no_second_delete() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    stack.server.set_latency(
        Some(Method::DeleteClient),
        Some(std::time::Duration::from_millis(800)),
    );
    stack.delete_oidc_client("web").await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    stack
        .secrets()
        .delete("web", &Default::default())
        .await
        .expect("the Secret is deleted");
    stack.wait_gone("web").await;
    stack.wait_event("web", "Deleted").await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(
        stack.server.counters().calls_of(Method::DeleteClient),
        1,
        "one DeleteClient call for one deletion: {:#?}",
        stack.server.audit_events()
    );
}
nauthera_tests::e2e_test!(a_change_during_the_delete_sends_no_second_delete);

/// A namespace deleted with manifests in it finishes deleting: the reconciler (running from
/// another namespace, as installed) honours each deletion policy and releases its finalizers, and
/// the namespace controller removes the rest.
async fn a_namespace_deleted_with_manifests_in_it_finishes_deleting() {
    let mut stack = Stack::start_with(StackOptions {
        start_reconciler: false,
        // The reconciler follows namespaces by a selector, which sees every namespace.
        sharing: Sharing::Alone,
        ..StackOptions::default()
    })
    .await;
    let apps = format!("{}-apps", stack.namespace());
    let namespaces: Api<Namespace> = Api::all(stack.client());
    let labelled = serde_json::json!({
        "metadata": { "name": apps, "labels": { TEST_LABEL: stack.namespace() } }
    });
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(labelled).unwrap(),
        )
        .await
        .unwrap();
    let selector = format!("{TEST_LABEL}={}", stack.namespace());
    let reconciler = stack
        .start_replica_configured(
            "replica-a",
            &stack.reconciler_kubeconfig,
            &[("NAUTHERA_NAMESPACE_SELECTOR".to_owned(), selector)],
        )
        .await
        .unwrap();
    reconciler.wait_ready().await.unwrap();
    stack.reconciler = Some(reconciler);

    let in_apps = |yaml: String| {
        yaml.replacen(
            "metadata:\n",
            &format!("metadata:\n  namespace: {apps}\n"),
            1,
        )
    };
    stack.apply(&in_apps(generated_client("web"))).await;
    stack
        .apply(&in_apps(generated_client_with("kept", "Orphan", "")))
        .await;
    let clients: Api<OIDCClient> = Api::namespaced(stack.client(), &apps);
    stack
        .eventually("both clients registered", async || {
            let listed = clients.list(&ListParams::default()).await.unwrap().items;
            listed.len() == 2 && listed.iter().all(is_registered)
        })
        .await;

    namespaces
        .delete(&apps, &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually("the namespace deleted", async || {
            namespaces.get_opt(&apps).await.unwrap().is_none()
        })
        .await;
    let in_apps_ref = |name: &str| ObjectRef {
        namespace: apps.clone(),
        ..stack.object_ref(name)
    };
    assert!(
        stack.server.client(&in_apps_ref("web")).is_none(),
        "deletionPolicy Delete removed the client from the server"
    );
    assert!(
        stack.server.client(&in_apps_ref("kept")).is_some(),
        "deletionPolicy Orphan left the client on the server"
    );
}
nauthera_tests::e2e_test!(a_namespace_deleted_with_manifests_in_it_finishes_deleting);
