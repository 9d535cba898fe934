//! Mutual TLS: who gets in, how identities are read, what the client reports when it cannot
//! connect, and certificate rotation without restarting anything.

#![allow(clippy::unwrap_used)]

mod support;

use nauthera_shared::catalog::ServerReason;
use std::time::Duration;

use nauthera_client::{
    AdminClient, CallError, ConnectError, ConnectProblem, TlsFiles, connection_verdict,
    read_certificate_info,
};
use nauthera_fake_server::pki::{self, ClientCertOptions, TestCa};
use support::*;

#[tokio::test]
async fn a_trusted_client_is_seen_with_its_dns_identity() {
    let harness = Harness::start().await;
    let info = harness.operator().await.get_server_info().await.unwrap();
    assert_eq!(info.identity, OPERATOR);
    assert_eq!(info.api_version, "nauthera.admin.v1");
    assert!(info.build.contains("fake"));
    assert_eq!(info.grants.len(), 1);
    assert!(info.features.contains(&"watch_changes".to_owned()));
}

#[tokio::test]
async fn uri_and_email_identities_are_read_from_the_san() {
    let mut config = nauthera_fake_server::FakeServerConfig::for_tests();
    config
        .allowed_clients
        .push(nauthera_fake_server::grant_everything(
            "uri:spiffe://cluster/ns/nauthera/sa/op",
        ));
    config
        .allowed_clients
        .push(nauthera_fake_server::grant_everything(
            "email:ops@example.com",
        ));
    let harness = Harness::start_with(config).await;
    for identity in [
        "uri:spiffe://cluster/ns/nauthera/sa/op",
        "email:ops@example.com",
    ] {
        let info = harness
            .client(identity)
            .await
            .get_server_info()
            .await
            .unwrap();
        assert_eq!(info.identity, identity);
    }
}

/// With TLS 1.3 a rejected client certificate shows on the first call.
async fn first_call_error(harness: &Harness, dir: &std::path::Path) -> ConnectError {
    let result = match AdminClient::connect(harness.settings(dir)).await {
        Err(error) => return error,
        Ok(client) => client.get_server_info().await,
    };
    match result {
        Err(CallError::Connect(error)) => error,
        other => panic!("expected a connection failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_certificate_from_another_ca_fails_at_the_handshake() {
    let harness = Harness::start().await;
    let other_ca = TestCa::new("another CA").unwrap();
    let cert = other_ca
        .issue_client(&ClientCertOptions::identity(OPERATOR))
        .unwrap();
    let dir = harness.dir.path().join("foreign");
    pki::write_tls_dir(&dir, &cert, &[harness.pki.ca.cert_pem()]).unwrap();
    let error = first_call_error(&harness, &dir).await;
    assert!(
        matches!(&error, ConnectError::Unreachable { cause, .. } if cause.contains("UnknownCA")),
        "{error}"
    );
    assert_eq!(
        harness
            .server
            .counters()
            .calls_of(nauthera_fake_server::Method::GetServerInfo),
        0
    );
}

#[tokio::test]
async fn an_expired_certificate_fails_at_the_handshake() {
    let harness = Harness::start().await;
    let cert = harness.pki.ca.issue_expired_client(OPERATOR).unwrap();
    let dir = harness.dir.path().join("expired");
    pki::write_tls_dir(&dir, &cert, &[harness.pki.ca.cert_pem()]).unwrap();
    let error = first_call_error(&harness, &dir).await;
    assert!(
        matches!(&error, ConnectError::Unreachable { cause, .. } if cause.contains("CertificateExpired")),
        "{error}"
    );
    // The call sees the server's alert only as text; a check of the connection names it.
    let verdict = connection_verdict(&harness.settings(&dir)).await;
    assert!(
        matches!(
            &verdict,
            Some(ConnectError::CredentialUnavailable { problem: ConnectProblem::Expired, cause, .. })
                if cause.contains("issued by") && cause.contains("as expired")
        ),
        "{verdict:?}"
    );
    // A working connection has nothing to explain.
    let good = harness.client_dir(OPERATOR);
    assert_eq!(connection_verdict(&harness.settings(&good)).await, None);
    let info = read_certificate_info(&dir.join("tls.crt")).unwrap();
    assert!(info.not_after < jiff::Timestamp::now());
    assert_eq!(info.identities, vec![OPERATOR.to_owned()]);
}

#[tokio::test]
async fn a_server_the_ca_did_not_sign_is_not_trusted() {
    let harness = Harness::start().await;
    let other_ca = TestCa::new("another CA").unwrap();
    let cert = harness
        .pki
        .ca
        .issue_client(&ClientCertOptions::identity(OPERATOR))
        .unwrap();
    let dir = harness.dir.path().join("wrong-anchor");
    pki::write_tls_dir(&dir, &cert, &[other_ca.cert_pem()]).unwrap();
    let error = AdminClient::connect(harness.settings(&dir))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ConnectError::TrustAnchorUnavailable { problem: ConnectProblem::ServerNotTrusted, ref cause, .. }
                if cause.contains("not signed by a CA in")
        ),
        "{error}"
    );
}

#[tokio::test]
async fn missing_or_invalid_files_are_told_apart_and_never_quoted() {
    let harness = Harness::start().await;
    let dir = harness.client_dir(OPERATOR);
    let settings = harness.settings(&dir);

    std::fs::remove_file(dir.join("ca.crt")).unwrap();
    let error = AdminClient::connect(settings.clone()).await.unwrap_err();
    assert!(
        matches!(error, ConnectError::TrustAnchorUnavailable { ref path, .. } if path.ends_with("ca.crt")),
        "{error}"
    );

    std::fs::write(dir.join("ca.crt"), harness.pki.ca.cert_pem()).unwrap();
    let secret_looking =
        "-----BEGIN PRIVATE KEY-----\nnot base64 at all: SECRETSECRET\n-----END PRIVATE KEY-----\n";
    std::fs::write(dir.join("tls.key"), secret_looking).unwrap();
    let error = AdminClient::connect(settings.clone()).await.unwrap_err();
    assert!(
        matches!(error, ConnectError::CredentialUnavailable { ref path, .. } if path.ends_with("tls.key")),
        "{error}"
    );
    assert!(!error.to_string().contains("SECRETSECRET"));
    assert!(!format!("{error:?}").contains("SECRETSECRET"));

    std::fs::remove_file(dir.join("tls.crt")).unwrap();
    let error = AdminClient::connect(settings).await.unwrap_err();
    assert!(
        matches!(error, ConnectError::CredentialUnavailable { ref path, .. } if path.ends_with("tls.crt")),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_reported_and_a_restart_keeps_state_and_port() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let created = client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap();
    let address = harness.server.address();

    harness.server.go_unreachable().await;
    let error = client.get_server_info().await.unwrap_err();
    assert!(
        matches!(error, CallError::Connect(ConnectError::Unreachable { .. })),
        "{error}"
    );
    assert!(error.is_retryable());
    let dir = harness.client_dir(OPERATOR);
    let error = AdminClient::connect(harness.settings(&dir))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ConnectError::Unreachable { ref cause, .. } if cause.contains("refused")),
        "{error}"
    );

    harness.server.restart().await.unwrap();
    assert_eq!(harness.server.address(), address);
    // The same client reconnects by itself.
    assert!(
        eventually(Duration::from_secs(5), async || client
            .get_server_info()
            .await
            .is_ok())
        .await
    );
    let held = client.get_client(acme("team-a", "web")).await.unwrap();
    assert_eq!(held.revision, created.client.unwrap().revision);
}

#[tokio::test]
async fn a_rotated_client_certificate_is_used_on_the_next_connection() {
    let mut config = nauthera_fake_server::FakeServerConfig::for_tests();
    config
        .allowed_clients
        .push(nauthera_fake_server::grant_everything(
            "dns:renewed.nauthera.svc",
        ));
    let harness = Harness::start_with(config).await;
    let dir = harness.client_dir(OPERATOR);
    let client = AdminClient::connect(harness.settings(&dir)).await.unwrap();
    assert_eq!(client.get_server_info().await.unwrap().identity, OPERATOR);

    let renewed = harness
        .pki
        .ca
        .issue_client(&ClientCertOptions::identity("dns:renewed.nauthera.svc"))
        .unwrap();
    pki::rotate_client_certificate(&dir, &renewed).unwrap();

    // A new connection (the probe's next attempt) reads the files again.
    let fresh = AdminClient::connect(harness.settings(&dir)).await.unwrap();
    assert_eq!(
        fresh.get_server_info().await.unwrap().identity,
        "dns:renewed.nauthera.svc"
    );

    // The existing client reads them when it reconnects, here after the server restarted.
    harness.server.restart().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), async || {
            client
                .get_server_info()
                .await
                .is_ok_and(|info| info.identity == "dns:renewed.nauthera.svc")
        })
        .await
    );
    let info = read_certificate_info(&TlsFiles::in_dir(&dir).cert).unwrap();
    assert_eq!(info.identities, vec!["dns:renewed.nauthera.svc".to_owned()]);
    assert!(info.not_after > jiff::Timestamp::now());
}

#[tokio::test]
async fn a_ca_rotation_works_with_both_cas_distributed() {
    let harness = Harness::start().await;
    let new_ca = TestCa::new("new CA").unwrap();
    // The server trusts both CAs and presents a certificate from the new one.
    let mut tls = harness.pki.server_tls();
    tls.client_ca_pems.push(new_ca.cert_pem().to_owned());
    tls.cert = new_ca
        .issue_server(&[harness.pki.server_name.as_str(), "127.0.0.1"])
        .unwrap();
    harness.server.set_tls(tls);
    harness.server.restart().await.unwrap();

    // An old client certificate with both CAs in ca.crt still works.
    let dir = harness.client_dir(OPERATOR);
    pki::write_ca_bundle(&dir, &[harness.pki.ca.cert_pem(), new_ca.cert_pem()]).unwrap();
    let info = AdminClient::connect(harness.settings(&dir))
        .await
        .unwrap()
        .get_server_info()
        .await
        .unwrap();
    assert_eq!(info.identity, OPERATOR);

    // A new one from the new CA works too.
    let cert = new_ca
        .issue_client(&ClientCertOptions::identity(OPERATOR))
        .unwrap();
    pki::rotate_client_certificate(&dir, &cert).unwrap();
    let client = AdminClient::connect(harness.settings(&dir)).await.unwrap();
    assert!(client.get_server_info().await.is_ok());

    // Only the old CA in ca.crt no longer trusts the server.
    pki::write_ca_bundle(&dir, &[harness.pki.ca.cert_pem()]).unwrap();
    assert!(AdminClient::connect(harness.settings(&dir)).await.is_err());
}

#[tokio::test]
async fn a_certificate_without_an_allowed_identity_is_refused_by_reason() {
    let harness = Harness::start().await;
    let error = harness
        .client("dns:stranger.example")
        .await
        .get_server_info()
        .await
        .unwrap_err();
    let server = error.server().expect("the server answered");
    assert_eq!(server.code, tonic::Code::PermissionDenied);
    assert_eq!(server.reason, Some(ServerReason::IdentityNotAllowed));
    assert_eq!(
        server.metadata.get("identity").map(String::as_str),
        Some("dns:stranger.example")
    );
}

#[tokio::test]
async fn files_gone_before_a_reconnection_are_reported_by_kind_on_the_call() {
    let harness = Harness::start().await;
    let dir = harness.client_dir(OPERATOR);
    let client = AdminClient::connect(harness.settings(&dir)).await.unwrap();
    client.get_server_info().await.unwrap();

    std::fs::remove_file(dir.join("tls.key")).unwrap();
    harness.server.restart().await.unwrap();
    let error = client.get_server_info().await.unwrap_err();
    assert!(
        matches!(&error, CallError::Connect(ConnectError::CredentialUnavailable { path, .. }) if path.ends_with("tls.key")),
        "{error:?}"
    );
    assert!(!error.is_retryable());

    harness.pki.write_client_dir(&dir, OPERATOR).unwrap();
    std::fs::write(dir.join("ca.crt"), "not a certificate").unwrap();
    let error = client.get_server_info().await.unwrap_err();
    assert!(
        matches!(
            &error,
            CallError::Connect(ConnectError::TrustAnchorUnavailable { .. })
        ),
        "{error:?}"
    );

    std::fs::write(dir.join("ca.crt"), harness.pki.ca.cert_pem()).unwrap();
    assert!(client.get_server_info().await.is_ok());
}

#[tokio::test]
async fn a_lazy_client_can_be_made_before_its_files_exist() {
    let harness = Harness::start().await;
    let dir = harness.dir.path().join("later");
    let client = AdminClient::connect_lazy(harness.settings(&dir)).unwrap();
    let error = client.get_server_info().await.unwrap_err();
    assert!(
        matches!(
            &error,
            CallError::Connect(ConnectError::CredentialUnavailable { .. })
        ),
        "{error:?}"
    );
    harness.pki.write_client_dir(&dir, OPERATOR).unwrap();
    assert_eq!(client.get_server_info().await.unwrap().identity, OPERATOR);
}
