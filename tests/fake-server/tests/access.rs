//! Access control like `server.grpc.tls.allowed_clients`: each outcome, with its metadata.

#![allow(clippy::unwrap_used)]

mod support;

use nauthera_client::ServerError;
use nauthera_fake_server::FakeServerConfig;
use nauthera_proto::v1::{self, Operation as ProtoOperation};
use nauthera_shared::catalog::ServerReason;
use nauthera_shared::grants::{GrantEntry, Operation};
use support::*;

fn limited() -> FakeServerConfig {
    let mut config = FakeServerConfig::for_tests();
    config
        .organizations
        .push(nauthera_fake_server::OrganizationConfig {
            slug: "globex".into(),
            issuer: "https://login.example.com/globex".into(),
            display_name: String::new(),
            fapi_mode: Default::default(),
        });
    config.allowed_clients = vec![GrantEntry {
        identity: OPERATOR.into(),
        operations: vec![Operation::Clients],
        organizations: vec!["acme".into()],
        namespaces: vec!["team-a".into()],
    }];
    config
}

fn refusal(error: nauthera_client::CallError) -> ServerError {
    error.server().cloned().expect("the server answered")
}

#[tokio::test]
async fn server_info_reports_identity_and_grants_as_seen() {
    let harness = Harness::start_with(limited()).await;
    let info = harness.operator().await.get_server_info().await.unwrap();
    assert_eq!(info.identity, OPERATOR);
    assert_eq!(
        info.grants,
        vec![v1::Grant {
            identity: OPERATOR.into(),
            operations: vec![ProtoOperation::Clients as i32],
            organizations: vec!["acme".into()],
            namespaces: vec!["team-a".into()],
        }]
    );
    assert!(info.change_hint.is_some());
}

#[tokio::test]
async fn a_granted_call_is_allowed() {
    let harness = Harness::start_with(limited()).await;
    let response = harness
        .operator()
        .await
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap();
    assert!(response.created);
}

#[tokio::test]
async fn an_unknown_identity_is_not_allowed() {
    let harness = Harness::start_with(limited()).await;
    let error = harness
        .client("dns:intruder.example")
        .await
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap_err();
    let error = refusal(error);
    assert_eq!(error.code, tonic::Code::PermissionDenied);
    assert_eq!(error.reason, Some(ServerReason::IdentityNotAllowed));
    assert_eq!(error.metadata["identity"], "dns:intruder.example");
}

#[tokio::test]
async fn a_missing_operation_is_named() {
    let harness = Harness::start_with(limited()).await;
    let error = harness
        .operator()
        .await
        .apply_branding(v1::ApplyBrandingRequest {
            r#ref: Some(acme("team-a", "default")),
            document: Some(Default::default()),
            generation: 1,
            manager: MANAGER.into(),
            if_revision: None,
        })
        .await
        .unwrap_err();
    let error = refusal(error);
    assert_eq!(error.code, tonic::Code::PermissionDenied);
    assert_eq!(error.reason, Some(ServerReason::OperationNotGranted));
    assert_eq!(error.metadata["operation"], "brandings");
    assert_eq!(error.metadata["identity"], OPERATOR);
}

#[tokio::test]
async fn an_organization_or_namespace_outside_the_grant_is_named() {
    let harness = Harness::start_with(limited()).await;
    let client = harness.operator().await;
    let other_namespace = refusal(
        client
            .apply_client(apply(acme("team-b", "web"), web_spec(), 1))
            .await
            .unwrap_err(),
    );
    assert_eq!(other_namespace.reason, Some(ServerReason::OutsideGrant));
    assert_eq!(other_namespace.metadata["namespace"], "team-b");
    assert!(!other_namespace.metadata.contains_key("organization"));

    let mut globex = acme("team-a", "web");
    globex.issuer = "https://login.example.com/globex".into();
    let other_org = refusal(
        client
            .apply_client(apply(globex, web_spec(), 1))
            .await
            .unwrap_err(),
    );
    assert_eq!(other_org.reason, Some(ServerReason::OutsideGrant));
    assert_eq!(other_org.metadata["organization"], "globex");
    assert!(!other_org.metadata.contains_key("namespace"));

    // Reads are checked the same way.
    let read = refusal(client.get_client(acme("team-b", "web")).await.unwrap_err());
    assert_eq!(read.reason, Some(ServerReason::OutsideGrant));
}

#[tokio::test]
async fn a_widened_grant_takes_effect_at_once() {
    let harness = Harness::start_with(limited()).await;
    let client = harness.operator().await;
    assert!(
        client
            .apply_client(apply(acme("team-b", "web"), web_spec(), 1))
            .await
            .is_err()
    );
    let entries = limited().allowed_clients;
    let proposal = nauthera_shared::grants::propose_entry(
        &entries,
        OPERATOR,
        Operation::Clients,
        "acme",
        Some("team-b"),
    );
    harness.server.set_allowed_clients(vec![proposal]);
    assert!(
        client
            .apply_client(apply(acme("team-b", "web"), web_spec(), 1))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn client_revisions_list_only_what_the_grant_covers() {
    let mut config = limited();
    config
        .allowed_clients
        .push(nauthera_fake_server::grant_everything("dns:admin.example"));
    let harness = Harness::start_with(config).await;
    let admin = harness.client("dns:admin.example").await;
    for namespace in ["team-a", "team-b"] {
        admin
            .apply_client(apply(acme(namespace, "web"), web_spec(), 1))
            .await
            .unwrap();
    }
    let operator = harness.operator().await;
    let listed = operator
        .list_client_revisions(Default::default())
        .await
        .unwrap();
    assert_eq!(listed.clients.len(), 1);
    assert_eq!(
        listed.clients[0].r#ref.as_ref().unwrap().namespace,
        "team-a"
    );
    assert_eq!(listed.change_hint, Some(harness.server.change_hint()));

    let outside = refusal(
        operator
            .list_client_revisions(v1::ListClientRevisionsRequest {
                namespaces: vec!["team-b".into()],
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(outside.reason, Some(ServerReason::OutsideGrant));

    let paged = admin
        .list_client_revisions(v1::ListClientRevisionsRequest {
            page_size: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(paged.clients.len(), 1);
    let rest = admin
        .list_client_revisions(v1::ListClientRevisionsRequest {
            page_size: 1,
            page_token: paged.next_page_token,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(rest.clients.len(), 1);
    assert!(rest.next_page_token.is_empty());
}
