//! Every rotation of a generated secret is visible: a deleted Secret minted again, a new
//! `spec.secret.secretName`, a Secret name somebody else holds, and a manifest that stops
//! generating a secret. Each says which Secret, which workloads read it and how to restart them,
//! and no Secret is left holding a value the server no longer accepts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::OIDCClient;
use nauthera_tests::e2e::{ISSUER, Stack, client_manifest, secret_value, sha256_hex, status_of};

/// A generated client whose secret goes into Secret `secret_name`.
fn client_into(name: &str, secret_name: &str) -> String {
    client_manifest(
        name,
        &format!(
            "  displayName: {name}
  redirectUris:
    - https://{name}.example.test/callback
  grantTypes: [authorization_code]
  responseTypes: [code]
  scopes: [openid]
  tokenEndpointAuthMethod: client_secret_basic
  secret:
    generate: true
    secretName: {secret_name}
"
        ),
    )
}

/// A Deployment that reads Secret `secret` into its environment.
fn deployment_reading(name: &str, secret: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: app
          image: registry.example.test/{name}:1
          env:
            - name: CLIENT_SECRET
              valueFrom:
                secretKeyRef: {{name: {secret}, key: clientSecret}}
"
    )
}

/// The client secret in Secret `name`, checked to be the one the server holds for `client`.
async fn secret_in_force(stack: &Stack, client: &str, name: &str) -> String {
    let secret = stack.secret(name).await.expect("the Secret exists");
    let value = secret_value(&secret, "clientSecret").expect("it holds a client secret");
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref(client)),
        Some(sha256_hex(value.as_bytes())),
        "Secret {name} holds the secret the server accepts"
    );
    value
}

fn delivered_into(client: &OIDCClient) -> Option<String> {
    status_of(client)
        .secret_ref
        .as_ref()
        .map(|r| r.name.clone())
}

async fn a_deleted_secret_is_minted_again_and_the_event_names_who_must_restart() {
    let stack = Stack::start().await;
    stack.apply(&deployment_reading("shop", "web")).await;
    stack.apply(&client_into("web", "web")).await;
    let web = stack.wait_reason("web", Reason::Registered).await;
    let first_set = status_of(&web)
        .secret_set_time
        .clone()
        .expect("the delivery time");
    let first = secret_in_force(&stack, "web", "web").await;
    let registered = stack.wait_event("web", "Registered").await;
    assert!(
        registered
            .message
            .contains("wrote the client secret into Secret web"),
        "the first delivery is told with the registration: {registered:?}"
    );

    // Status times have a resolution of a second: let one pass, so the new time is later.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    stack
        .secrets()
        .delete("web", &Default::default())
        .await
        .unwrap();
    let event = stack.wait_event("web", "SecretRotated").await;
    assert_eq!(event.type_, "Warning");
    let namespace = stack.namespace();
    for expected in [
        "Secret web was deleted",
        "a new client secret was minted into Secret web",
        "read by Deployment/shop",
        &format!("kubectl -n {namespace} rollout restart deployment/shop"),
    ] {
        assert!(
            event.message.contains(expected),
            "{expected}: {}",
            event.message
        );
    }
    let web = stack
        .wait_for("web", "set again", |client| {
            status_of(client)
                .secret_set_time
                .as_ref()
                .is_some_and(|t| t.0 > first_set.0)
        })
        .await;
    assert_eq!(status_of(&web).reason, Some(Reason::Registered));
    let second = secret_in_force(&stack, "web", "web").await;
    assert_ne!(first, second, "a new secret");
    let events = stack.events_for("OIDCClient", "web").await;
    assert!(
        events
            .iter()
            .all(|e| !e.message.contains(&first) && !e.message.contains(&second)),
        "no event shows a secret"
    );
    assert!(
        !events
            .iter()
            .any(|e| e.message.contains("lost undelivered")),
        "a deleted Secret is not a secret lost on its way: {events:#?}"
    );
    // diagnose shows when the secret was set, and the rotation among the events.
    let diagnosis = stack.plugin(&["diagnose", "oidcclient/web"]).await;
    for expected in ["client secret last set into Secret web", "SecretRotated"] {
        assert!(
            diagnosis.stdout.contains(expected),
            "{expected}: {}",
            diagnosis.all()
        );
    }
    assert!(
        !diagnosis.all().contains(&second),
        "no secret in the output"
    );
}
nauthera_tests::e2e_test!(a_deleted_secret_is_minted_again_and_the_event_names_who_must_restart);

async fn a_new_secret_name_rotates_into_it_and_removes_the_old_secret() {
    let stack = Stack::start().await;
    stack.apply(&deployment_reading("shop", "web-v1")).await;
    stack.apply(&client_into("web", "web-v1")).await;
    stack.wait_reason("web", Reason::Registered).await;
    let old = secret_in_force(&stack, "web", "web-v1").await;
    let writes = stack.server.counters().writes_by("nauthera-reconciler");

    stack.apply(&client_into("web", "web-v2")).await;
    let web = stack
        .wait_for("web", "delivered into web-v2", |client| {
            delivered_into(client).as_deref() == Some("web-v2")
                && status_of(client).observed_generation == client.metadata.generation
        })
        .await;
    assert_eq!(status_of(&web).reason, Some(Reason::Registered));
    let new = secret_in_force(&stack, "web", "web-v2").await;
    assert_ne!(old, new);
    assert!(
        stack.secret("web-v1").await.is_none(),
        "the Secret with the dead value is removed"
    );
    assert_eq!(
        stack.server.counters().writes_by("nauthera-reconciler"),
        writes + 1,
        "one write carries the new generation and the new secret"
    );
    let event = stack.wait_event("web", "SecretRotated").await;
    for expected in [
        "moved from Secret web-v1 to Secret web-v2",
        "Secret web-v1, which held the one before, was removed",
        "Deployment/shop still read Secret web-v1",
        "no Deployment, StatefulSet or DaemonSet",
    ] {
        assert!(
            event.message.contains(expected),
            "{expected}: {}",
            event.message
        );
    }
}
nauthera_tests::e2e_test!(a_new_secret_name_rotates_into_it_and_removes_the_old_secret);

async fn a_new_secret_name_somebody_else_holds_keeps_the_secret_in_force() {
    let stack = Stack::start().await;
    stack.apply(&client_into("web", "web-v1")).await;
    stack.wait_reason("web", Reason::Registered).await;
    let old = secret_in_force(&stack, "web", "web-v1").await;
    stack
        .apply(
            "apiVersion: v1
kind: Secret
metadata:
  name: web-v2
type: Opaque
stringData:
  note: the team's own data
",
        )
        .await;
    let writes = stack.server.counters().writes_by("nauthera-reconciler");

    stack.apply(&client_into("web", "web-v2")).await;
    let web = stack.wait_reason("web", Reason::SecretUndeliverable).await;
    let status = status_of(&web);
    assert_eq!(status.cause, Some(Cause::ForeignSecret));
    let message = status.message.clone().unwrap();
    assert!(
        message.contains("spec.secret.secretName: Secret web-v2 exists and is not owned")
            && message.contains("stays in Secret web-v1"),
        "{message}"
    );
    assert_eq!(
        stack.server.counters().writes_by("nauthera-reconciler"),
        writes,
        "nothing was sent: the secret in force is kept"
    );
    assert_eq!(secret_in_force(&stack, "web", "web-v1").await, old);
    assert_eq!(delivered_into(&web).as_deref(), Some("web-v1"));

    // The name is freed: the rotation goes ahead and the old Secret goes.
    stack
        .secrets()
        .delete("web-v2", &Default::default())
        .await
        .unwrap();
    stack
        .wait_for("web", "delivered into web-v2", |client| {
            delivered_into(client).as_deref() == Some("web-v2")
                && status_of(client).reason == Some(Reason::Registered)
        })
        .await;
    secret_in_force(&stack, "web", "web-v2").await;
    stack
        .eventually("Secret web-v1 is removed", async || {
            stack.secret("web-v1").await.is_none()
        })
        .await;
}
nauthera_tests::e2e_test!(a_new_secret_name_somebody_else_holds_keeps_the_secret_in_force);

async fn a_manifest_that_stops_generating_a_secret_removes_the_one_it_had() {
    let stack = Stack::start().await;
    stack.apply(&client_into("web", "web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    stack
        .apply(
            "apiVersion: v1
kind: Secret
metadata:
  name: web-team
type: Opaque
stringData:
  clientSecret: the-teams-own-value
",
        )
        .await;
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata:
  name: web
spec:
  issuer: {ISSUER}
  displayName: web
  redirectUris:
    - https://web.example.test/callback
  grantTypes: [authorization_code]
  responseTypes: [code]
  scopes: [openid]
  tokenEndpointAuthMethod: client_secret_basic
  secret:
    secretRef:
      name: web-team
      key: clientSecret
"
        ))
        .await;
    let web = stack
        .wait_for("web", "without a delivered Secret", |client| {
            delivered_into(client).is_none()
                && status_of(client).reason == Some(Reason::Registered)
                && status_of(client).observed_generation == client.metadata.generation
        })
        .await;
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        Some(sha256_hex(b"the-teams-own-value"))
    );
    assert!(status_of(&web).secret_set_time.is_some());
    assert!(
        stack.secret("web").await.is_none(),
        "the generated Secret with its dead value is removed"
    );
    let event = stack.wait_event("web", "SecretRemoved").await;
    assert!(
        event
            .message
            .contains("the manifest no longer generates a client secret"),
        "{}",
        event.message
    );
    assert!(
        stack.secret("web-team").await.is_some(),
        "the team's Secret stays"
    );
}
nauthera_tests::e2e_test!(a_manifest_that_stops_generating_a_secret_removes_the_one_it_had);
