//! Rotation of a generated client secret on request (`nauthera.io/rotate`, as `kubectl
//! nauthera rotate` sets it) and on a schedule (`spec.secret.rotation`). A request mints one
//! new secret, delivered with the request's nonce, and is answered in `status.lastRotation`;
//! one whose answer is lost is finished and never carried out twice. A schedule rotates inside
//! its window and not outside it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use nauthera_fake_server::{Fault, FaultCode, Method};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::{OIDCClient, RotationOutcome};
use nauthera_shared::{ROTATE_ANNOTATION, ROTATION_REQUEST_ANNOTATION};
use nauthera_tests::e2e::{
    MANAGER, Stack, StackOptions, client_manifest, generated_client, secret_ref_client,
    secret_value, sha256_hex, status_of,
};

/// Sets `nauthera.io/rotate` to `nonce` as the field manager `manager`.
async fn ask_rotation(stack: &Stack, name: &str, nonce: &str, manager: &str) {
    let patch = serde_json::json!({ "metadata": { "annotations": { ROTATE_ANNOTATION: nonce } } });
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    Api::<OIDCClient>::namespaced(stack.client(), stack.namespace())
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        .expect("the annotation is set");
}

/// Waits until the request is answered in the status and its annotation is gone.
async fn wait_answered(stack: &Stack, name: &str, nonce: &str) -> OIDCClient {
    stack
        .wait_for(name, "the rotation request is answered", |client| {
            let answered = status_of(client)
                .last_rotation
                .as_ref()
                .is_some_and(|last| last.request.as_deref() == Some(nonce));
            let cleared = client
                .metadata
                .annotations
                .as_ref()
                .is_none_or(|a| !a.contains_key(ROTATE_ANNOTATION));
            answered && cleared
        })
        .await
}

/// The client secret in Secret `name`, checked to be the one the server accepts.
async fn secret_in_force(stack: &Stack, name: &str) -> String {
    let secret = stack.secret(name).await.expect("the Secret exists");
    let value = secret_value(&secret, "clientSecret").expect("it holds a client secret");
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref(name)),
        Some(sha256_hex(value.as_bytes())),
        "Secret {name} holds the secret the server accepts"
    );
    value
}

/// The request whose secret the delivered Secret holds.
async fn delivered_request(stack: &Stack, name: &str) -> Option<String> {
    stack
        .secret(name)
        .await?
        .metadata
        .annotations?
        .get(ROTATION_REQUEST_ANNOTATION)
        .cloned()
}

async fn a_requested_rotation_mints_one_secret_and_says_who_asked() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    let before = stack.wait_reason("web", Reason::Registered).await;
    let old = secret_in_force(&stack, "web").await;
    let set_before = status_of(&before).secret_set_time.clone().unwrap();
    let writes = stack.server.counters().writes_by(MANAGER);

    // A dry run shows the Secret that changes and changes nothing.
    let dry = stack
        .plugin(&["rotate", "oidcclient/web", "--dry-run"])
        .await;
    assert_eq!(dry.code, 1, "{}", dry.all());
    assert!(dry.all().contains("Secret web"), "{}", dry.all());
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes);

    let rotated = stack
        .plugin(&[
            "rotate",
            "oidcclient/web",
            "--yes",
            "--timeout",
            "60s",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(rotated.code, 0, "{}", rotated.all());
    let report: serde_json::Value = serde_json::from_str(&rotated.stdout).unwrap();
    assert_eq!(report["outcome"], "rotated", "{}", rotated.all());
    let request = report["request"].as_str().unwrap().to_owned();
    let after = wait_answered(&stack, "web", &request).await;
    let new = secret_in_force(&stack, "web").await;
    assert_ne!(new, old, "a new secret is delivered");
    assert!(
        !rotated.all().contains(&new) && !rotated.all().contains(&old),
        "the plugin never shows a secret"
    );
    let last = status_of(&after).last_rotation.clone().unwrap();
    assert_eq!(last.outcome, RotationOutcome::Requested);
    let requested_by = last.requested_by.clone().expect("who asked is recorded");
    assert!(status_of(&after).secret_set_time.clone().unwrap().0 >= set_before.0);
    assert_eq!(
        delivered_request(&stack, "web").await.as_deref(),
        Some(request.as_str())
    );
    assert_eq!(
        stack.server.counters().writes_by(MANAGER),
        writes + 1,
        "one write, one new secret"
    );
    let event = stack.wait_event("web", "SecretRotated").await;
    assert!(
        event.message.contains("requested") && event.message.contains(&requested_by),
        "{}",
        event.message
    );
    let events = stack.events_for("OIDCClient", "web").await;
    assert!(
        events
            .iter()
            .all(|e| !e.message.contains(&new) && !e.message.contains(&old)),
        "no event shows a secret"
    );
    // Nothing more happens: the request is done.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes + 1);
}
nauthera_tests::e2e_test!(a_requested_rotation_mints_one_secret_and_says_who_asked);

async fn a_requested_rotation_whose_answer_is_lost_is_finished_and_never_done_twice() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    let old = secret_in_force(&stack, "web").await;
    let writes = stack.server.counters().writes_by(MANAGER);

    // The server mints and commits, and its answer never arrives.
    stack.server.inject_fault(
        Some(Method::ApplyClient),
        Fault::losing_answers(FaultCode::Unavailable, 1),
    );
    ask_rotation(&stack, "web", "n-lost", "e2e-rotate").await;
    wait_answered(&stack, "web", "n-lost").await;
    let new = secret_in_force(&stack, "web").await;
    assert_ne!(new, old);
    assert_eq!(
        delivered_request(&stack, "web").await.as_deref(),
        Some("n-lost")
    );
    // The lost secret reached nobody: one more was minted and delivered, and that finished
    // the request. No third.
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes + 2);
    let client = stack.wait_reason("web", Reason::Registered).await;
    assert!(
        status_of(&client).drift.is_none(),
        "its own write is no drift"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        stack.server.counters().writes_by(MANAGER),
        writes + 2,
        "the request is carried out once"
    );
    assert!(
        !stack
            .events_for("OIDCClient", "web")
            .await
            .iter()
            .any(|e| e.reason == "Drifted"),
        "the lost write is not reported as drift"
    );
}
nauthera_tests::e2e_test!(
    a_requested_rotation_whose_answer_is_lost_is_finished_and_never_done_twice
);

/// A Secret the reconciler wrote whose status write never came (its term ended in between, as
/// under API server throttling): owned by the client, with the reconciler's label, holding a
/// value the server no longer accepts, and named by neither the manifest nor the status. It is
/// removed, and the Secret in force is left alone.
async fn a_secret_written_but_never_recorded_is_removed() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    let in_force = secret_in_force(&stack, "web").await;
    // A copy of the delivered Secret under another name, with a dead value: what a term that
    // ended between writing a renamed Secret and recording it leaves behind.
    let mut left = stack.secret("web").await.unwrap();
    left.metadata = kube::api::ObjectMeta {
        name: Some("web-left".into()),
        namespace: left.metadata.namespace.clone(),
        labels: left.metadata.labels.clone(),
        annotations: left.metadata.annotations.clone(),
        owner_references: left.metadata.owner_references.clone(),
        ..kube::api::ObjectMeta::default()
    };
    left.data.get_or_insert_default().insert(
        "clientSecret".into(),
        k8s_openapi::ByteString(b"a-dead-value".to_vec()),
    );
    stack
        .secrets()
        .create(&kube::api::PostParams::default(), &left)
        .await
        .expect("the Secret left behind is written");
    stack
        .eventually("the Secret left behind is removed", async || {
            stack.secret("web-left").await.is_none()
        })
        .await;
    let event = stack.wait_event("web", "SecretRemoved").await;
    assert!(
        event.message.contains("removed Secret web-left"),
        "{}",
        event.message
    );
    assert_eq!(secret_in_force(&stack, "web").await, in_force);
    let client = stack.wait_reason("web", Reason::Registered).await;
    assert_eq!(
        status_of(&client)
            .secret_ref
            .as_ref()
            .map(|r| r.name.as_str()),
        Some("web")
    );
}
nauthera_tests::e2e_test!(a_secret_written_but_never_recorded_is_removed);

async fn a_rotation_of_a_secret_the_team_holds_is_answered_without_a_write() {
    let stack = Stack::start().await;
    let team_secret = "apiVersion: v1
kind: Secret
metadata:
  name: reports-credentials
stringData:
  clientSecret: team-held-value-1
";
    stack.apply(team_secret).await;
    stack
        .apply(&secret_ref_client("reports", "reports-credentials"))
        .await;
    stack.wait_reason("reports", Reason::Registered).await;
    let writes = stack.server.counters().writes_by(MANAGER);
    // The plugin refuses, saying where the secret comes from.
    let refused = stack
        .plugin(&["rotate", "oidcclient/reports", "--yes"])
        .await;
    assert_eq!(refused.code, 2, "{}", refused.all());
    assert!(
        refused.all().contains("spec.secret.secretRef"),
        "{}",
        refused.all()
    );
    // The annotation set by hand is answered, and nothing is written.
    ask_rotation(&stack, "reports", "n-ref", "e2e-rotate").await;
    let client = wait_answered(&stack, "reports", "n-ref").await;
    assert_eq!(
        status_of(&client).last_rotation.as_ref().unwrap().outcome,
        RotationOutcome::NotGenerated
    );
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes);
}
nauthera_tests::e2e_test!(a_rotation_of_a_secret_the_team_holds_is_answered_without_a_write);

/// A generated client rotated every `every`, in `window` (YAML lines under `window:`) if any.
fn scheduled_client(name: &str, every: &str, window: Option<&str>) -> String {
    let window = window
        .map(|lines| format!("      window:\n{lines}"))
        .unwrap_or_default();
    client_manifest(
        name,
        &format!(
            "  displayName: {name}
  redirectUris:
    - https://{name}.example.test/callback
  tokenEndpointAuthMethod: client_secret_basic
  secret:
    generate: true
    rotation:
      every: {every}
{window}"
        ),
    )
}

/// Rotations of a few seconds: the minimum lowered for the test.
fn short_rotations() -> StackOptions {
    StackOptions {
        reconciler_env: vec![("NAUTHERA_MIN_ROTATION_INTERVAL".to_owned(), "1s".to_owned())],
        ..StackOptions::default()
    }
}

async fn a_schedule_rotates_inside_its_window() {
    let stack = Stack::start_with(short_rotations()).await;
    let window = "        start: \"00:00\"\n        end: \"24:00\"\n";
    stack
        .apply(&scheduled_client("web", "3s", Some(window)))
        .await;
    let first = stack.wait_reason("web", Reason::Registered).await;
    let set_first = status_of(&first).secret_set_time.clone().unwrap().0;
    assert!(
        status_of(&first).next_rotation.is_some(),
        "status.nextRotation says when"
    );
    let rotated = stack
        .wait_for("web", "a scheduled rotation", |client| {
            status_of(client)
                .last_rotation
                .as_ref()
                .is_some_and(|last| last.outcome == RotationOutcome::Scheduled)
                && status_of(client)
                    .secret_set_time
                    .as_ref()
                    .is_some_and(|t| t.0 > set_first)
        })
        .await;
    let next = status_of(&rotated).next_rotation.clone().unwrap().0;
    let set = status_of(&rotated).secret_set_time.clone().unwrap().0;
    assert!(next > set, "the next rotation comes after this one");
    stack
        .eventually("the Secret holds the secret in force", async || {
            let Some(secret) = stack.secret("web").await else {
                return false;
            };
            secret_value(&secret, "clientSecret").is_some_and(|value| {
                stack.server.client_secret_hash(&stack.object_ref("web"))
                    == Some(sha256_hex(value.as_bytes()))
            })
        })
        .await;
    stack.wait_event("web", "SecretRotated").await;
}
nauthera_tests::e2e_test!(a_schedule_rotates_inside_its_window);

async fn a_schedule_waits_outside_its_window() {
    let stack = Stack::start_with(short_rotations()).await;
    // A window on the day after tomorrow only (UTC): closed now, and for at least a day.
    let day = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .checked_add(jiff::Span::new().days(2))
        .unwrap()
        .weekday();
    let window =
        format!("        days: [{day:?}]\n        start: \"00:00\"\n        end: \"24:00\"\n");
    stack
        .apply(&scheduled_client("web", "2s", Some(&window)))
        .await;
    let client = stack.wait_reason("web", Reason::Registered).await;
    let writes = stack.server.counters().writes_by(MANAGER);
    // Several times `every`: nothing rotates while the window is closed.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes);
    let now = stack.oidc_client("web").await.unwrap();
    assert_eq!(
        status_of(&now).secret_set_time,
        status_of(&client).secret_set_time,
        "the secret in force stays"
    );
    let next = status_of(&now).next_rotation.clone().unwrap().0;
    assert!(
        next > jiff::Timestamp::now() + jiff::SignedDuration::from_hours(20),
        "the next rotation waits for the window: {next}"
    );
    assert!(status_of(&now).last_rotation.is_none());
}
nauthera_tests::e2e_test!(a_schedule_waits_outside_its_window);
