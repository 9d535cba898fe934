//! Secrets the team holds (an IdentityProvider's upstream `secretRef`, an OIDCClient's
//! `spec.secret.secretRef`) end to end: only a change of the value sent causes a write (a label or
//! an annotation on the Secret does not), and a changed value is told, never shown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use nauthera_fake_server::Method;
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::IdentityProvider;
use nauthera_tests::e2e::{
    ISSUER, POLL_INTERVAL_SECONDS, Stack, secret_ref_client, sha256_hex, status_of,
};

fn team_secret(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1
kind: Secret
metadata:
  name: {name}
stringData:
  clientSecret: {value}
"
    )
}

fn github(secret: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: IdentityProvider
metadata:
  name: github
spec:
  issuer: {ISSUER}
  kind: github
  displayName: GitHub
  clientId: nauthera-acme
  secretRef:
    name: {secret}
    key: clientSecret
  scopes: [read:user]
"
    )
}

async fn touch(stack: &Stack, secret: &str, metadata: serde_json::Value) {
    Api::<Secret>::namespaced(stack.client(), stack.namespace())
        .patch(
            secret,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({ "metadata": metadata })),
        )
        .await
        .expect("the Secret is patched");
}

async fn labels_and_annotations_on_a_referenced_secret_write_nothing_a_new_value_is_told() {
    let stack = Stack::start().await;
    stack
        .apply(&team_secret("github-oauth-app", "upstream-value-1"))
        .await;
    stack
        .apply(&team_secret("worker-credentials", "worker-value-1"))
        .await;
    stack.apply(&github("github-oauth-app")).await;
    stack
        .apply(&secret_ref_client("worker", "worker-credentials"))
        .await;
    let provider = stack
        .wait_reason_of::<IdentityProvider>("github", Reason::Registered)
        .await;
    let worker = stack.wait_reason("worker", Reason::Registered).await;
    let provider_revision = provider.status.unwrap().revision.unwrap();
    let worker_revision = status_of(&worker).revision.clone().unwrap();
    let counters = stack.server.counters();
    let (provider_calls, client_calls) = (
        counters.calls_of(Method::ApplyIdentityProvider),
        counters.calls_of(Method::ApplyClient),
    );

    touch(
        &stack,
        "github-oauth-app",
        serde_json::json!({ "labels": { "touched": "yes" } }),
    )
    .await;
    touch(
        &stack,
        "worker-credentials",
        serde_json::json!({ "annotations": { "team.example.test/owner": "reports" } }),
    )
    .await;
    // Both reconciled by now (the Secret watch routes at once), and neither wrote.
    tokio::time::sleep(Duration::from_secs(3 * POLL_INTERVAL_SECONDS + 2)).await;
    let counters = stack.server.counters();
    assert_eq!(
        counters.calls_of(Method::ApplyIdentityProvider),
        provider_calls,
        "a label on the upstream secret's Secret wrote the identity provider again"
    );
    assert_eq!(
        counters.calls_of(Method::ApplyClient),
        client_calls,
        "an annotation on the client's secretRef Secret wrote the client again"
    );
    let github = stack.object_ref("github");
    assert_eq!(
        stack
            .server
            .identity_provider(&github)
            .map(|p| p.revision)
            .as_deref(),
        Some(provider_revision.as_str())
    );
    assert_eq!(
        stack
            .server
            .client(&stack.object_ref("worker"))
            .map(|c| c.revision)
            .as_deref(),
        Some(worker_revision.as_str())
    );

    // A new value is sent, and told by name, never by value.
    stack
        .apply(&team_secret("github-oauth-app", "upstream-value-2"))
        .await;
    stack
        .eventually("the new upstream secret is sent", async || {
            stack.server.identity_provider_secret_hash(&github)
                == Some(sha256_hex(b"upstream-value-2"))
        })
        .await;
    let mut changed = None;
    stack
        .eventually(
            "a SecretChanged event on the identity provider",
            async || {
                changed = stack
                    .events_for("IdentityProvider", "github")
                    .await
                    .into_iter()
                    .find(|e| e.reason == "SecretChanged");
                changed.is_some()
            },
        )
        .await;
    let changed = changed.unwrap();
    assert_eq!(changed.type_, "Normal");
    for part in [
        "upstream client secret",
        "Secret github-oauth-app",
        "key clientSecret",
        "spec.secretRef",
    ] {
        assert!(
            changed.message.contains(part),
            "{part}: {}",
            changed.message
        );
    }
    let provider = stack
        .wait_for_kind::<IdentityProvider>("github", "cause secret_changed", |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.cause == Some(Cause::SecretChanged))
        })
        .await;
    let status = serde_json::to_string(&provider.status).unwrap();
    let events = format!("{:?}", stack.events_for("IdentityProvider", "github").await);
    let log = stack.reconciler().log();
    for text in [status.as_str(), events.as_str(), log.as_str()] {
        assert!(!text.contains("upstream-value"), "a secret value shows");
    }
}
nauthera_tests::e2e_test!(
    labels_and_annotations_on_a_referenced_secret_write_nothing_a_new_value_is_told
);
