//! Registering an OIDCClient with a generated secret, end to end: the real reconciler as its own
//! ServiceAccount under the shipped RBAC, against the fake server and the cluster. What a user
//! sees: the status, the Secret, the events, the metrics, `/readyz`; and a steady state that writes
//! nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use nauthera_fake_server::Method;
use nauthera_shared::catalog::{ConditionType, Phase, Reason};
use nauthera_tests::e2e::{
    self, ISSUER, MANAGER, POLL_INTERVAL_SECONDS, PROBE_INTERVAL_SECONDS, Stack, generated_client,
    secret_value, sha256_hex, status_of,
};

async fn registers_with_a_generated_secret_then_writes_nothing_in_a_steady_state() {
    let stack = Stack::start().await;
    let reconciler = stack.reconciler();
    let (code, body) = reconciler.readyz().await;
    assert_eq!(
        (code, body.as_str()),
        (
            200,
            format!(
                "control plane: ok\nleader election: leading (Lease {}/nauthera-reconciler)\n",
                stack.reconciler_namespace()
            )
            .as_str()
        )
    );

    stack.apply(&generated_client("web")).await;
    let web = stack.wait_reason("web", Reason::Registered).await;
    let status = status_of(&web);
    assert_eq!(status.phase, Some(Phase::Registered));
    assert_eq!(status.observed_generation, web.metadata.generation);
    assert_eq!(status.generation_in_force, web.metadata.generation);
    let ready = status.condition(ConditionType::Ready).unwrap();
    assert_eq!(ready.status, "True");
    assert_eq!(ready.reason, "Registered");
    let held = stack.server.client(&stack.object_ref("web")).unwrap();
    assert_eq!(status.client_id.as_deref(), Some(held.client_id.as_str()));
    assert_eq!(status.revision.as_deref(), Some(held.revision.as_str()));
    assert_eq!(
        status.secret_ref.as_ref().map(|r| r.name.as_str()),
        Some("web")
    );
    assert!(
        web.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == nauthera_shared::FINALIZER)),
        "the finalizer guards the deletion policy"
    );

    // The Secret: owned by the OIDCClient, with the client id and the secret the server holds.
    let secret = stack.secret("web").await.expect("the Secret is delivered");
    let owner = &secret.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "OIDCClient");
    assert_eq!(owner.name, "web");
    assert_eq!(Some(&owner.uid), web.metadata.uid.as_ref());
    assert_eq!(owner.controller, Some(true));
    assert_eq!(
        secret_value(&secret, "clientId").as_deref(),
        Some(held.client_id.as_str())
    );
    let client_secret = secret_value(&secret, "clientSecret").expect("a client secret");
    assert!(!client_secret.is_empty());
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        Some(sha256_hex(client_secret.as_bytes())),
        "the delivered secret is the one the server holds"
    );

    // What a user reads with `kubectl describe`: one event for the registration and its Secret.
    let event = stack.wait_event("web", "Registered").await;
    assert_eq!(event.type_, "Normal", "{event:?}");
    assert!(
        event
            .message
            .starts_with("registered generation 1 as revision")
            && event
                .message
                .contains("wrote the client secret into Secret web"),
        "{event:?}"
    );
    let events = stack.events_for("OIDCClient", "web").await;
    assert_eq!(events.len(), 1, "one event per registration: {events:#?}");

    // Metrics (recorded just after the status and the event).
    reconciler
        .wait_metric(
            "nauthera_operator_resources",
            &[("kind", "OIDCClient"), ("phase", "Registered")],
            |registered| registered == 1.0,
        )
        .await;
    let metrics = reconciler.metrics().await;
    let metric = |name: &str, labels: &[(&str, &str)]| e2e::metric_sum(&metrics, name, labels);
    assert!(
        metric(
            "nauthera_operator_reconciles_total",
            &[
                ("kind", "OIDCClient"),
                ("reason", Reason::Registered.metric_label())
            ]
        ) >= 1.0,
        "{metrics}"
    );
    assert!(
        metric(
            "nauthera_operator_server_calls_total",
            &[("method", "ApplyClient"), ("code", "Ok")]
        ) >= 1.0,
        "{metrics}"
    );
    assert_eq!(
        metric(
            "nauthera_operator_resources",
            &[("kind", "OIDCClient"), ("phase", "Registered")]
        ),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric("nauthera_operator_control_plane_up", &[]),
        1.0,
        "{metrics}"
    );
    assert_eq!(metric("nauthera_operator_build_info", &[]), 1.0);
    assert!(metrics.contains("nauthera_operator_reconcile_duration_seconds_bucket"));

    // A steady state: several probe and poll intervals with no server write, no status write and
    // no new event. (Waiting is the point here: nothing is expected to happen.)
    let writes = stack.server.counters().writes_by(MANAGER);
    let version = web.metadata.resource_version.clone();
    let events = stack.events_for("OIDCClient", "web").await.len();
    let probes = stack.server.counters().calls_of(Method::GetServerInfo);
    tokio::time::sleep(Duration::from_secs(
        3 * PROBE_INTERVAL_SECONDS.max(POLL_INTERVAL_SECONDS) + 1,
    ))
    .await;
    let counters = stack.server.counters();
    assert!(
        counters.calls_of(Method::GetServerInfo) > probes,
        "the probe kept running: {counters:?}"
    );
    assert_eq!(
        counters.writes_by(MANAGER),
        writes,
        "no server writes in a steady state: {counters:?}"
    );
    let after = stack.oidc_client("web").await.unwrap();
    assert_eq!(
        after.metadata.resource_version, version,
        "no status writes in a steady state: {:?}",
        after.status
    );
    assert_eq!(
        stack.events_for("OIDCClient", "web").await.len(),
        events,
        "no events in a steady state"
    );
    // One write in all: the creation (the secret came with it).
    assert_eq!(counters.writes_by(MANAGER), 1, "{counters:?}");
}
nauthera_tests::e2e_test!(registers_with_a_generated_secret_then_writes_nothing_in_a_steady_state);

async fn an_edit_is_written_as_a_new_generation() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    let first = stack.wait_reason("web", Reason::Registered).await;
    let first_revision = status_of(&first).revision.clone().unwrap();
    let secret_before = stack.secret("web").await.unwrap();

    stack
        .apply(&generated_client("web").replace("displayName: web", "displayName: Web application"))
        .await;
    let second = stack
        .wait_for("web", "registered at generation 2", |c| {
            e2e::is_registered(c) && c.metadata.generation == Some(2)
        })
        .await;
    let status = status_of(&second);
    assert_eq!(status.generation_in_force, Some(2));
    assert_ne!(status.revision.as_deref(), Some(first_revision.as_str()));
    let held = stack.server.client(&stack.object_ref("web")).unwrap();
    assert_eq!(
        held.spec.as_ref().unwrap().display_name,
        "Web application",
        "the server holds the new generation"
    );
    assert_eq!(held.generation_in_force, 2);
    // An edit does not mint a new secret.
    let secret_after = stack.secret("web").await.unwrap();
    assert_eq!(
        secret_value(&secret_before, "clientSecret"),
        secret_value(&secret_after, "clientSecret")
    );
    assert_eq!(stack.server.counters().writes_by(MANAGER), 2);
}
nauthera_tests::e2e_test!(an_edit_is_written_as_a_new_generation);

/// The issue asks for the Secret to carry the issuer and the discovery URL besides the client id
/// and secret, so that a workload needs nothing else.
async fn the_delivered_secret_names_the_issuer_and_the_discovery_url() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    let secret = stack.secret("web").await.unwrap();
    let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
    let values: Vec<String> = secret
        .data
        .as_ref()
        .unwrap()
        .values()
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .collect();
    assert!(
        values.iter().any(|v| v == ISSUER),
        "no key holds the issuer; keys: {keys:?}"
    );
    let discovery = format!("{ISSUER}/.well-known/openid-configuration");
    assert!(
        values.contains(&discovery),
        "no key holds the discovery URL {discovery}; keys: {keys:?}"
    );
}
nauthera_tests::e2e_test!(the_delivered_secret_names_the_issuer_and_the_discovery_url);

/// In JSON, every line has one `message` (the text of the line; a verdict's own text is
/// `detail`), and fields are JSON values rather than Rust debug strings.
async fn json_log_lines_carry_one_message_and_plain_values() {
    let stack = Stack::start_with(e2e::StackOptions {
        reconciler_env: vec![("NAUTHERA_LOG_FORMAT".into(), "json".into())],
        ..e2e::StackOptions::default()
    })
    .await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    // The verdict's line is written just after the status.
    stack
        .eventually("a reconciled line for web", async || {
            stack.reconciler().log().lines().any(|line| {
                line.contains("\"message\":\"reconciled\"") && line.contains("\"name\":\"web\"")
            })
        })
        .await;
    let log = stack.reconciler().log();
    let mut reconciled = 0;
    for line in log.lines().filter(|line| line.starts_with('{')) {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert_eq!(
            line.matches("\"message\":").count(),
            1,
            "one message per line: {line}"
        );
        for (key, field) in value.as_object().unwrap() {
            if let Some(text) = field.as_str() {
                assert!(
                    !text.starts_with('[') && !text.contains("Some(") && !text.contains(" { "),
                    "{key} is a debug string: {line}"
                );
            }
        }
        if value["message"] == "reconciled" && value["name"] == "web" {
            reconciled += 1;
            assert_eq!(value["reason"], "Registered", "{line}");
            assert!(value["detail"].is_string(), "{line}");
        }
    }
    assert!(reconciled > 0, "no reconciled line for web in:\n{log}");
}
nauthera_tests::e2e_test!(json_log_lines_carry_one_message_and_plain_values);
