//! The control-plane probe end to end: `/readyz` fails with each reason of the status page
//! (`Unreachable`, `Refused`, `CredentialUnavailable`, `TrustAnchorUnavailable`) and recovers,
//! and a rotated client certificate is picked up without a restart.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_fake_server::{ClientCertOptions, grant_everything, pki};
use nauthera_tests::e2e::{RECONCILER_IDENTITY, Stack};

async fn control_plane_up(stack: &Stack) -> f64 {
    stack
        .reconciler()
        .metric("nauthera_operator_control_plane_up", &[])
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
