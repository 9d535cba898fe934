//! The control-plane probe end to end: `/readyz` fails with each reason of the status page
//! (`Unreachable`, `Refused`, `CredentialUnavailable`, `TrustAnchorUnavailable`) and recovers,
//! a rotated client certificate is picked up without a restart, and the published state is
//! written only when what it shows changes, while the plugin still finds it current.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use nauthera_fake_server::{ClientCertOptions, Method, grant_everything, pki};
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::control_plane::{ControlPlaneState, STATE_CONFIGMAP, STATE_KEY};
use nauthera_tests::e2e::{
    PROBE_INTERVAL_SECONDS, RECONCILER_IDENTITY, Stack, StackOptions, generated_client, status_of,
};
use nauthera_tests::proxy::CuttableProxy;
use serde_json::Value;

async fn control_plane_up(stack: &Stack) -> f64 {
    stack
        .reconciler()
        .metric("nauthera_operator_control_plane_up", &[])
        .await
}

async fn an_unreachable_server_fails_readiness_until_it_is_back() {
    let stack = Stack::start().await;
    let reconciler = stack.reconciler();
    stack.server.go_unreachable().await;
    let body = reconciler.wait_readyz(503, "Unreachable").await;
    assert!(body.starts_with("control plane: Unreachable"), "{body}");
    assert_eq!(control_plane_up(&stack).await, 0.0);
    // Liveness is not readiness.
    let (code, _) = nauthera_tests::process::http_get(&reconciler.probe_address, "/healthz")
        .await
        .unwrap();
    assert_eq!(code, 200);

    stack.server.restart().await.unwrap();
    reconciler.wait_readyz(200, "control plane: ok").await;
    assert_eq!(control_plane_up(&stack).await, 1.0);
}
nauthera_tests::e2e_test!(an_unreachable_server_fails_readiness_until_it_is_back);

async fn an_identity_the_server_refuses_fails_readiness_with_refused() {
    let stack = Stack::start().await;
    stack
        .server
        .set_allowed_clients(vec![grant_everything("dns:someone-else.example.test")]);
    let body = stack.reconciler().wait_readyz(503, "Refused").await;
    assert!(
        body.contains("PermissionDenied") && body.contains("(IDENTITY_NOT_ALLOWED)"),
        "{body}"
    );
    stack
        .server
        .set_allowed_clients(vec![grant_everything(RECONCILER_IDENTITY)]);
    stack.reconciler().wait_readyz(200, "ok").await;
}
nauthera_tests::e2e_test!(an_identity_the_server_refuses_fails_readiness_with_refused);

async fn an_unreadable_key_is_credential_unavailable_and_a_missing_ca_trust_anchor_unavailable() {
    let stack = Stack::start().await;
    let reconciler = stack.reconciler();
    let key = stack.tls_dir.join("tls.key");
    let saved_key = std::fs::read(&key).unwrap();
    std::fs::remove_file(&key).unwrap();
    let body = reconciler.wait_readyz(503, "CredentialUnavailable").await;
    assert!(body.contains("tls.key"), "the body names the file: {body}");
    std::fs::write(&key, &saved_key).unwrap();
    reconciler.wait_readyz(200, "ok").await;

    let ca = stack.tls_dir.join("ca.crt");
    let saved_ca = std::fs::read(&ca).unwrap();
    std::fs::remove_file(&ca).unwrap();
    let body = reconciler.wait_readyz(503, "TrustAnchorUnavailable").await;
    assert!(body.contains("ca.crt"), "the body names the file: {body}");
    std::fs::write(&ca, &saved_ca).unwrap();
    reconciler.wait_readyz(200, "ok").await;
}
nauthera_tests::e2e_test!(
    an_unreadable_key_is_credential_unavailable_and_a_missing_ca_trust_anchor_unavailable
);

async fn a_rotated_client_certificate_is_used_without_a_restart() {
    let stack = Stack::start().await;
    let reconciler = stack.reconciler();
    // The server now admits only the identity of the renewed certificate.
    let renewed_identity = "dns:nauthera-reconciler-renewed.nauthera-system.svc";
    stack
        .server
        .set_allowed_clients(vec![grant_everything(renewed_identity)]);
    reconciler.wait_readyz(503, "Refused").await;

    let renewed = stack
        .pki
        .ca
        .issue_client(&ClientCertOptions::identity(renewed_identity))
        .unwrap();
    pki::rotate_client_certificate(&stack.tls_dir, &renewed).unwrap();
    reconciler.wait_readyz(200, "control plane: ok").await;
    let starts = reconciler
        .log()
        .lines()
        .filter(|l| l.contains("\"message\":\"starting\""))
        .count();
    assert_eq!(starts, 1, "the reconciler was not restarted");
}
nauthera_tests::e2e_test!(a_rotated_client_certificate_is_used_without_a_restart);

/// The state ConfigMap's resourceVersion and the document in it.
async fn published(stack: &Stack) -> Option<(String, ControlPlaneState)> {
    let config_maps: Api<ConfigMap> = Api::namespaced(stack.client(), stack.reconciler_namespace());
    let config_map = config_maps.get_opt(STATE_CONFIGMAP).await.ok()??;
    let version = config_map.metadata.resource_version.clone()?;
    let text = config_map.data?.remove(STATE_KEY)?;
    Some((version, serde_json::from_str(&text).ok()?))
}

/// Waits until the published state satisfies `check`; returns it with its resourceVersion.
async fn wait_published(
    stack: &Stack,
    what: &str,
    check: impl Fn(&ControlPlaneState) -> bool,
) -> (String, ControlPlaneState) {
    let mut found = None;
    stack
        .eventually(what, async || {
            found = published(stack).await.filter(|(_, state)| check(state));
            found.is_some()
        })
        .await;
    found.unwrap()
}

/// `kubectl nauthera status -A -o json`: its exit code and the control plane of its report.
async fn plugin_control_plane(stack: &Stack) -> (i32, Value) {
    let run = stack.plugin(&["status", "-A", "-o", "json"]).await;
    let report: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}):\n{}", run.all()));
    (run.code, report["controlPlane"].clone())
}

async fn the_state_is_written_when_the_probe_outcome_changes_and_not_at_every_probe() {
    let stack = Stack::start().await;
    let (version, state) = wait_published(&stack, "the state says the server answers", |state| {
        state.is_up()
    })
    .await;
    assert_eq!(state.leader, "replica-a");
    assert_eq!(state.lease_name.as_deref(), Some("nauthera-reconciler"));
    assert_eq!(state.last_success_time, None, "it answers at every probe");
    assert!(state.probe_since.is_some() && state.changed_at.is_some());

    // A steady state: several probe intervals, the probe answered each time, nothing written.
    // (Waiting is the point here: nothing is expected to happen.)
    let probes = stack.server.counters().calls_of(Method::GetServerInfo);
    tokio::time::sleep(Duration::from_secs(3 * PROBE_INTERVAL_SECONDS + 1)).await;
    assert!(
        stack.server.counters().calls_of(Method::GetServerInfo) >= probes + 2,
        "the probe kept running: {:?}",
        stack.server.counters()
    );
    let (still, same) = published(&stack).await.unwrap();
    assert_eq!(still, version, "no write in a steady state: {same:?}");
    assert_eq!(same, state);

    // The plugin, through kubectl, finds it current as of the Lease, not stale.
    let (code, control) = plugin_control_plane(&stack).await;
    assert_eq!(code, 0, "{control}");
    assert_eq!(control["freshness"]["status"], "current", "{control}");
    assert_eq!(control["findings"], serde_json::json!([]), "{control}");
    assert_eq!(control["probe"]["reason"], "Registered");
    assert_eq!(
        control["probe"]["outcome"], "ok",
        "the word status shows: {control}"
    );
    assert!(
        control["probe"]["ageSeconds"].as_i64().unwrap() <= 15,
        "as of a recent Lease renewal: {control}"
    );
    assert!(
        control["probe"]["sinceSeconds"].as_i64().unwrap() >= 3 * PROBE_INTERVAL_SECONDS as i64,
        "{control}"
    );
    let table = stack.plugin(&["status", "-A"]).await;
    assert_eq!(table.code, 0, "{}", table.all());
    assert!(
        table.stdout.contains("Probe:        ok since "),
        "{}",
        table.stdout
    );
    assert!(
        !table.stdout.contains("no leader is publishing"),
        "{}",
        table.stdout
    );

    // The server goes away: a new outcome, written once, with when the server last answered.
    stack.server.go_unreachable().await;
    let (down_version, down) = wait_published(&stack, "the state says Unreachable", |state| {
        state.probe_reason == Some(Reason::Unreachable)
    })
    .await;
    assert_ne!(down_version, version);
    assert!(down.probe_since > state.probe_since, "{down:?}");
    assert!(
        down.last_success_time
            .is_some_and(|last| Some(last) <= down.probe_since && Some(last) >= state.probe_since),
        "{down:?}"
    );
    // Retries with the same outcome write nothing either (the retry interval is a second).
    let failures = || {
        stack
            .reconciler()
            .log()
            .matches("the control-plane probe failed")
            .count()
    };
    let before = failures();
    stack
        .eventually("the probe keeps retrying", async || {
            failures() >= before + 2
        })
        .await;
    let (still, same) = published(&stack).await.unwrap();
    assert_eq!(
        still, down_version,
        "no write while the outcome stays: {same:?}"
    );
    let (code, control) = plugin_control_plane(&stack).await;
    assert_eq!(code, 1, "{control}");
    assert_eq!(control["probe"]["reason"], "Unreachable", "{control}");
    assert_eq!(control["freshness"]["status"], "current", "{control}");

    // Back: written again.
    stack.server.restart().await.unwrap();
    let (_, up) = wait_published(&stack, "the state says the server answers again", |state| {
        state.is_up()
    })
    .await;
    assert!(up.probe_since > down.probe_since, "{up:?}");
    assert_eq!(up.last_success_time, None);
}
nauthera_tests::e2e_test!(
    the_state_is_written_when_the_probe_outcome_changes_and_not_at_every_probe
);

/// The server's TLS alerts about the client certificate are named: an expired certificate is
/// CredentialUnavailable (`expired`), one from a CA the server does not trust
/// TrustAnchorUnavailable (`untrusted`), each naming the certificate and its issuer, in /readyz
/// and in the condition of a resource written meanwhile.
async fn a_rejected_client_certificate_is_named_not_unreachable() {
    let stack = Stack::start().await;
    let reconciler = stack.reconciler();
    let good = std::fs::read(stack.tls_dir.join("tls.crt")).unwrap();
    let good_key = std::fs::read(stack.tls_dir.join("tls.key")).unwrap();

    let expired = stack
        .pki
        .ca
        .issue_expired_client(RECONCILER_IDENTITY)
        .unwrap();
    pki::rotate_client_certificate(&stack.tls_dir, &expired).unwrap();
    let body = reconciler.wait_readyz(503, "CredentialUnavailable").await;
    assert!(body.contains("expired"), "{body}");
    assert!(body.contains("issued by CN=nauthera test CA"), "{body}");
    stack.apply(&generated_client("web")).await;
    let web = stack
        .wait_reason("web", Reason::CredentialUnavailable)
        .await;
    let status = status_of(&web);
    assert_eq!(status.cause, Some(Cause::Expired), "{status:?}");
    assert!(
        status
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("issued by"),
        "{status:?}"
    );

    let foreign = pki::TestCa::new("somebody else's CA")
        .unwrap()
        .issue_client(&ClientCertOptions::identity(RECONCILER_IDENTITY))
        .unwrap();
    pki::rotate_client_certificate(&stack.tls_dir, &foreign).unwrap();
    let body = reconciler.wait_readyz(503, "TrustAnchorUnavailable").await;
    assert!(body.contains("does not trust the CA"), "{body}");
    assert!(body.contains("somebody else's CA"), "{body}");

    std::fs::write(stack.tls_dir.join("tls.key"), good_key).unwrap();
    std::fs::write(stack.tls_dir.join("tls.crt"), good).unwrap();
    reconciler.wait_readyz(200, "ok").await;
    stack.wait_reason("web", Reason::Registered).await;
}
nauthera_tests::e2e_test!(a_rejected_client_certificate_is_named_not_unreachable);

/// A connection to the server that silently stops answering (a partition: nothing is refused,
/// nothing arrives) is found by HTTP/2 keepalive, and the failed change stream brings the probe
/// forward: /readyz turns within seconds although the probe interval is a minute. After the
/// partition heals, it turns back.
async fn a_silent_partition_from_the_server_shows_in_readiness_within_seconds() {
    let stack = Stack::start_with(StackOptions {
        start_reconciler: false,
        ..StackOptions::default()
    })
    .await;
    let proxy = CuttableProxy::start(stack.server.address()).await.unwrap();
    // The production probe interval: readiness may not wait for it.
    let replica = stack
        .start_replica_reaching_server_at(
            "replica-a",
            proxy.address(),
            &[
                ("NAUTHERA_PROBE_INTERVAL", "60"),
                ("NAUTHERA_PROBE_RETRY_INTERVAL", "2"),
            ],
        )
        .await
        .unwrap();
    replica.wait_readyz(200, "control plane: ok").await;
    // Let the first probe's answer settle, so that the next scheduled probe is a minute away.
    tokio::time::sleep(Duration::from_secs(2)).await;

    proxy.cut();
    let cut_at = tokio::time::Instant::now();
    loop {
        let (status, body) = replica.readyz().await;
        if status == 503 && body.contains("Unreachable") {
            break;
        }
        assert!(
            // Within 15 s, with room for a loaded machine.
            cut_at.elapsed() < Duration::from_secs(20),
            "/readyz still {status} {body:?} {:?} after the partition began",
            cut_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    proxy.heal();
    replica.wait_readyz(200, "control plane: ok").await;
}
nauthera_tests::e2e_test!(a_silent_partition_from_the_server_shows_in_readiness_within_seconds);
