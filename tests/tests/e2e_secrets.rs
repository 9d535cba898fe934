//! Secrets end to end: a foreign Secret at the name, a Secret write denied by RBAC, and a secret
//! the team holds (`secretRef`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_shared::catalog::{Cause, Phase, Reason};
use nauthera_shared::resources::IdentityProvider;
use nauthera_tests::e2e::{
    ISSUER, Stack, generated_client, secret_ref_client, secret_value, sha256_hex, status_of,
};

async fn a_foreign_secret_is_never_written_and_the_client_recovers_once_it_is_removed() {
    let stack = Stack::start().await;
    stack
        .apply(
            "apiVersion: v1
kind: Secret
metadata:
  name: web
type: Opaque
stringData:
  note: the team's own data
",
        )
        .await;
    stack.apply(&generated_client("web")).await;

    let web = stack.wait_reason("web", Reason::SecretUndeliverable).await;
    let status = status_of(&web);
    assert_eq!(status.phase, Some(Phase::Error), "{status:?}");
    let message = status.message.as_deref().unwrap();
    assert!(
        message.contains("Secret web") && message.contains("not owned"),
        "{message}"
    );
    // The client is registered on the server; only the delivery failed.
    assert!(stack.server.client(&stack.object_ref("web")).is_some());
    let event = stack.wait_event("web", "SecretUndeliverable").await;
    assert_eq!(event.type_, "Warning");
    let foreign = stack.secret("web").await.unwrap();
    assert_eq!(
        secret_value(&foreign, "note").as_deref(),
        Some("the team's own data")
    );
    assert!(
        secret_value(&foreign, "clientSecret").is_none(),
        "never written over"
    );
    assert!(foreign.metadata.owner_references.is_none());
    stack
        .reconciler()
        .wait_metric(
            "nauthera_operator_reconciles_total",
            &[
                ("reason", Reason::SecretUndeliverable.metric_label()),
                ("cause", "foreign_secret"),
            ],
            |counted| counted >= 1.0,
        )
        .await;

    // The team removes its Secret: the minted secret (kept in memory) is delivered.
    stack
        .secrets()
        .delete("web", &Default::default())
        .await
        .unwrap();
    let web = stack.wait_reason("web", Reason::Registered).await;
    let secret = stack.secret("web").await.unwrap();
    assert_eq!(
        secret.metadata.owner_references.as_ref().unwrap()[0].uid,
        web.metadata.uid.clone().unwrap()
    );
    let value = secret_value(&secret, "clientSecret").unwrap();
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        Some(sha256_hex(value.as_bytes())),
        "the delivered secret is the one the server holds"
    );
    stack.wait_event("web", "SecretDelivered").await;
}
nauthera_tests::e2e_test!(
    a_foreign_secret_is_never_written_and_the_client_recovers_once_it_is_removed
);

async fn a_secret_write_denied_by_rbac_is_pending_then_delivered_once_the_permission_is_granted() {
    let stack = Stack::start().await;
    let shipped = stack.shipped_cluster_role();
    let mut reduced = shipped.clone();
    for rule in reduced["rules"].as_array_mut().unwrap() {
        if rule["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "secrets")
        {
            rule["verbs"]
                .as_array_mut()
                .unwrap()
                .retain(|v| v != "create");
        }
    }
    stack.apply_cluster_role(&reduced).await;
    stack.apply(&generated_client("web")).await;
    let web = stack.wait_reason("web", Reason::SecretUndeliverable).await;
    let status = status_of(&web);
    let message = status.message.as_deref().unwrap();
    assert!(message.contains("forbidden"), "{message}");
    assert_eq!(
        status.phase,
        Some(Phase::Pending),
        "the runbook: Pending while the write is retried (a missing permission): {status:?}"
    );
    assert!(
        stack.secret("web").await.is_none(),
        "nothing could be written"
    );
    let event = stack.wait_event("web", "SecretUndeliverable").await;
    assert_eq!(event.type_, "Warning");
    let writes = stack.server.counters().writes_by("nauthera-reconciler");

    // The platform team grants the permission again: the minted secret is delivered, no new one.
    stack.apply_cluster_role(&shipped).await;
    stack.wait_reason("web", Reason::Registered).await;
    let secret = stack.secret("web").await.unwrap();
    let value = secret_value(&secret, "clientSecret").unwrap();
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        Some(sha256_hex(value.as_bytes())),
        "the secret minted before is the one delivered"
    );
    assert_eq!(
        stack.server.counters().writes_by("nauthera-reconciler"),
        writes,
        "no new secret was minted"
    );
}
nauthera_tests::e2e_test!(
    a_secret_write_denied_by_rbac_is_pending_then_delivered_once_the_permission_is_granted
);

fn team_secret(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1
kind: Secret
metadata:
  name: {name}
type: Opaque
stringData:
  clientSecret: {value}
"
    )
}

async fn a_secret_ref_registers_the_teams_value_and_never_writes_it() {
    let stack = Stack::start().await;
    stack
        .apply(&team_secret("worker-credentials", "team-held-value-1"))
        .await;
    stack
        .apply(&secret_ref_client("worker", "worker-credentials"))
        .await;
    stack.wait_reason("worker", Reason::Registered).await;
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("worker")),
        Some(sha256_hex(b"team-held-value-1"))
    );
    let secret = stack.secret("worker-credentials").await.unwrap();
    assert!(
        secret.metadata.owner_references.is_none(),
        "the team's Secret is not taken over"
    );
    assert_eq!(
        secret
            .data
            .as_ref()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
        vec!["clientSecret".to_owned()],
        "the team's Secret is never written"
    );
}
nauthera_tests::e2e_test!(a_secret_ref_registers_the_teams_value_and_never_writes_it);

async fn a_changed_secret_ref_value_is_sent_again() {
    let stack = Stack::start().await;
    stack
        .apply(&team_secret("worker-credentials", "team-held-value-1"))
        .await;
    stack
        .apply(&secret_ref_client("worker", "worker-credentials"))
        .await;
    stack.wait_reason("worker", Reason::Registered).await;

    stack
        .apply(&team_secret("worker-credentials", "team-held-value-2"))
        .await;
    let expected = sha256_hex(b"team-held-value-2");
    stack
        .eventually("the server holds the team's new secret", async || {
            stack.server.client_secret_hash(&stack.object_ref("worker")) == Some(expected.clone())
        })
        .await;
    stack.wait_reason("worker", Reason::Registered).await;
}
nauthera_tests::e2e_test!(a_changed_secret_ref_value_is_sent_again);

async fn a_missing_secret_ref_is_waited_for_until_the_secret_appears() {
    let stack = Stack::start().await;
    stack
        .apply(&secret_ref_client("worker", "worker-credentials"))
        .await;
    let worker = stack
        .wait_for("worker", "waiting for its Secret", |c| {
            c.status.as_ref().and_then(|s| s.cause) == Some(Cause::ReferenceNotReady)
        })
        .await;
    assert_eq!(status_of(&worker).reason, Some(Reason::Pending));
    let message = status_of(&worker).message.clone().unwrap();
    assert!(
        message.contains("Secret worker-credentials") && message.contains("does not exist"),
        "{message}"
    );
    assert_eq!(status_of(&worker).cause, Some(Cause::ReferenceNotReady));
    assert!(
        stack.server.client(&stack.object_ref("worker")).is_none(),
        "nothing is sent without the secret"
    );

    stack
        .apply(&team_secret("worker-credentials", "team-held-value-1"))
        .await;
    stack.wait_reason("worker", Reason::Registered).await;
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("worker")),
        Some(sha256_hex(b"team-held-value-1"))
    );
}
nauthera_tests::e2e_test!(a_missing_secret_ref_is_waited_for_until_the_secret_appears);

/// A Secret that exists without the key the manifest names (a tool that fills it in later):
/// the client waits as Pending naming the Secret and the key, nothing reaches the server, and
/// the key put in wakes it.
async fn a_secret_ref_without_its_key_waits_until_the_key_appears() {
    let stack = Stack::start().await;
    stack
        .apply(
            "apiVersion: v1
kind: Secret
metadata:
  name: worker-credentials
stringData:
  username: reports
",
        )
        .await;
    stack
        .apply(&secret_ref_client("worker", "worker-credentials"))
        .await;
    let worker = stack
        .wait_for("worker", "waiting for the key", |c| {
            c.status.as_ref().and_then(|s| s.cause) == Some(Cause::ReferenceNotReady)
        })
        .await;
    let status = status_of(&worker);
    assert_eq!(status.reason, Some(Reason::Pending), "{status:?}");
    assert_eq!(status.phase, Some(Phase::Pending), "{status:?}");
    let message = status.message.clone().unwrap();
    assert!(
        message.contains("key clientSecret")
            && message.contains("Secret worker-credentials")
            && message.contains("spec.secret.secretRef"),
        "{message}"
    );
    assert!(
        stack.server.client(&stack.object_ref("worker")).is_none(),
        "nothing is sent without the key"
    );

    // The key put in (a change of the Secret, not of the manifest) wakes the client.
    stack
        .apply(&team_secret("worker-credentials", "team-held-value-3"))
        .await;
    stack.wait_reason("worker", Reason::Registered).await;
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("worker")),
        Some(sha256_hex(b"team-held-value-3"))
    );
}
nauthera_tests::e2e_test!(a_secret_ref_without_its_key_waits_until_the_key_appears);

fn identity_provider(secret: &str) -> String {
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

/// An IdentityProvider whose upstream Secret is not there, then there without the key: it waits
/// as Pending naming each in turn, registers nothing, and goes on once the key is there.
async fn an_identity_provider_waits_for_its_secret_and_its_key() {
    let stack = Stack::start().await;
    stack.apply(&identity_provider("github-oauth-app")).await;
    let waiting = |what: &'static str| {
        let stack = &stack;
        async move {
            stack
                .wait_for_kind::<IdentityProvider>("github", what, |p| {
                    p.status.as_ref().is_some_and(|s| {
                        s.cause == Some(Cause::ReferenceNotReady)
                            && s.message.as_deref().is_some_and(|m| m.contains(what))
                    })
                })
                .await
        }
    };
    let absent = waiting("does not exist").await;
    let status = absent.status.as_ref().unwrap();
    assert_eq!(status.reason, Some(Reason::Pending), "{status:?}");
    assert!(
        status
            .message
            .as_deref()
            .unwrap()
            .contains("Secret github-oauth-app"),
        "{status:?}"
    );

    stack
        .apply(
            "apiVersion: v1
kind: Secret
metadata:
  name: github-oauth-app
stringData:
  clientId: nauthera-acme
",
        )
        .await;
    let keyless = waiting("key clientSecret").await;
    assert_eq!(
        keyless.status.as_ref().unwrap().reason,
        Some(Reason::Pending)
    );
    let github = stack.object_ref("github");
    assert!(
        stack.server.identity_provider(&github).is_none(),
        "nothing is registered without the secret"
    );

    stack
        .apply(&team_secret("github-oauth-app", "upstream-value-1"))
        .await;
    stack
        .wait_reason_of::<IdentityProvider>("github", Reason::Registered)
        .await;
    assert_eq!(
        stack.server.identity_provider_secret_hash(&github),
        Some(sha256_hex(b"upstream-value-1"))
    );
}
nauthera_tests::e2e_test!(an_identity_provider_waits_for_its_secret_and_its_key);

/// Every Secret permission revoked: a new client and a registered one whose Secret is deleted
/// meanwhile both say SecretUndeliverable (cause forbidden) while it lasts, and recover once the
/// permission is back.
async fn losing_the_secret_permission_shows_in_status() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("old")).await;
    stack.wait_reason("old", Reason::Registered).await;
    let shipped = stack.shipped_cluster_role();
    let mut reduced = shipped.clone();
    reduced["rules"].as_array_mut().unwrap().retain(|rule| {
        !rule["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "secrets")
    });
    stack.apply_cluster_role(&reduced).await;

    stack.apply(&generated_client("new")).await;
    stack
        .secrets()
        .delete("old", &Default::default())
        .await
        .expect("the administrator deletes the Secret");
    for name in ["new", "old"] {
        let client = stack.wait_reason(name, Reason::SecretUndeliverable).await;
        let status = status_of(&client);
        assert_eq!(
            status.cause,
            Some(nauthera_shared::catalog::Cause::Forbidden),
            "{name}: {status:?}"
        );
    }

    stack.apply_cluster_role(&shipped).await;
    for name in ["new", "old"] {
        stack.wait_reason(name, Reason::Registered).await;
        assert!(stack.secret(name).await.is_some(), "{name}: delivered");
    }
}
nauthera_tests::e2e_test!(losing_the_secret_permission_shows_in_status);
