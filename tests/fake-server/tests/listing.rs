//! The listings of whole objects: what they return (never a secret), grant filtering, stable
//! paging, reads left out of the audit log, and an older server without them.

#![allow(clippy::unwrap_used)]

mod support;

use nauthera_client::{AdminClient, LIST_OBJECTS_FEATURE, ListError, ServerError, list_all};
use nauthera_fake_server::{FakeServerConfig, Method};
use nauthera_proto::v1::{self, client_spec};
use nauthera_shared::catalog::ServerReason;
use nauthera_shared::grants::{GrantEntry, Operation};
use support::*;

fn refusal(error: nauthera_client::CallError) -> ServerError {
    error.server().cloned().expect("the server answered")
}

fn request() -> v1::ListObjectsRequest {
    v1::ListObjectsRequest::default()
}

fn provided_spec() -> v1::ClientSpec {
    v1::ClientSpec {
        secret: Some(client_spec::Secret::ProvidedSecret(
            "a-team-secret-never-listed".into(),
        )),
        ..web_spec()
    }
}

async fn create(client: &AdminClient, namespace: &str, name: &str) -> v1::Client {
    client
        .apply_client(apply(acme(namespace, name), web_spec(), 1))
        .await
        .unwrap()
        .client
        .unwrap()
}

fn names(clients: &[v1::Client]) -> Vec<String> {
    clients
        .iter()
        .map(|c| {
            let reference = c.r#ref.clone().unwrap();
            format!("{}/{}", reference.namespace, reference.name)
        })
        .collect()
}

#[tokio::test]
async fn clients_are_listed_whole_as_get_returns_them_without_a_secret() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let generated = create(&client, "team-a", "web").await;
    client
        .apply_client(apply(acme("team-a", "api"), provided_spec(), 3))
        .await
        .unwrap();
    let audit_before = harness.server.audit_events().len();

    let page = client.list_clients(request()).await.unwrap();
    assert_eq!(names(&page.clients), ["team-a/api", "team-a/web"]);
    assert!(page.next_page_token.is_empty());
    assert_eq!(page.change_hint, Some(harness.server.change_hint()));
    let web = page
        .clients
        .iter()
        .find(|c| c.client_id == generated.client_id);
    assert_eq!(web, Some(&generated));
    let api = client.get_client(acme("team-a", "api")).await.unwrap();
    assert_eq!(page.clients[0], api);
    assert_eq!(
        api.spec.unwrap().secret,
        Some(client_spec::Secret::GenerateSecret(false)),
        "a provided secret is never returned"
    );
    assert!(!format!("{page:?}").contains("a-team-secret-never-listed"));
    assert_eq!(
        harness.server.audit_events().len(),
        audit_before,
        "a listing is a read, not audited"
    );
    let info = client.get_server_info().await.unwrap();
    assert!(info.features.contains(&LIST_OBJECTS_FEATURE.to_owned()));
}

#[tokio::test]
async fn every_kind_is_listed() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    client
        .apply_branding(v1::ApplyBrandingRequest {
            r#ref: Some(acme("team-a", "blue")),
            document: Some(v1::BrandingDocument {
                colors: [("primary".to_owned(), "#0000ff".to_owned())].into(),
                ..Default::default()
            }),
            generation: 1,
            manager: MANAGER.into(),
            if_revision: None,
        })
        .await
        .unwrap();
    client
        .apply_identity_provider(v1::ApplyIdentityProviderRequest {
            r#ref: Some(acme("team-a", "github")),
            spec: Some(v1::IdentityProviderSpec {
                kind: v1::IdentityProviderKind::Github.into(),
                upstream_client_id: "gh-id".into(),
                upstream_client_secret: "gh-secret-never-listed".into(),
                ..Default::default()
            }),
            generation: 1,
            manager: MANAGER.into(),
            if_revision: None,
        })
        .await
        .unwrap();
    let brandings = list_all::<v1::Branding>(&client, request()).await.unwrap();
    assert_eq!(brandings.len(), 1);
    assert_eq!(
        brandings[0],
        client.get_branding(acme("team-a", "blue")).await.unwrap()
    );
    let providers = list_all::<v1::IdentityProvider>(&client, request())
        .await
        .unwrap();
    assert_eq!(providers.len(), 1);
    assert_eq!(
        providers[0].spec.as_ref().unwrap().upstream_client_secret,
        ""
    );
    let organizations = list_all::<v1::Organization>(&client, request())
        .await
        .unwrap();
    assert_eq!(
        organizations,
        vec![client.get_organization("acme").await.unwrap()]
    );
}

#[tokio::test]
async fn pages_are_walked_and_a_write_between_pages_shifts_nothing() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    for name in ["c", "e", "g", "i"] {
        create(&client, "team-a", name).await;
    }
    let first = client
        .list_clients(v1::ListObjectsRequest {
            page_size: 2,
            ..request()
        })
        .await
        .unwrap();
    assert_eq!(names(&first.clients), ["team-a/c", "team-a/e"]);
    assert!(!first.next_page_token.is_empty());
    // Written before the cursor: an offset would repeat `e`; a key does not.
    create(&client, "team-a", "a").await;
    let second = client
        .list_clients(v1::ListObjectsRequest {
            page_size: 2,
            page_token: first.next_page_token.clone(),
            ..request()
        })
        .await
        .unwrap();
    assert_eq!(names(&second.clients), ["team-a/g", "team-a/i"]);
    assert!(second.next_page_token.is_empty());

    let all = list_all::<v1::Client>(
        &client,
        v1::ListObjectsRequest {
            page_size: 2,
            ..request()
        },
    )
    .await
    .unwrap();
    assert_eq!(all.len(), 5);

    let bad = refusal(
        client
            .list_clients(v1::ListObjectsRequest {
                page_token: "not-a-token".into(),
                ..request()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(bad.code, tonic::Code::InvalidArgument);
}

fn team_a_only() -> GrantEntry {
    GrantEntry {
        identity: "dns:team-a.example".into(),
        operations: vec![Operation::Clients],
        organizations: vec!["acme".into()],
        namespaces: vec!["team-a".into()],
    }
}

#[tokio::test]
async fn a_listing_holds_only_what_the_grant_covers_and_refuses_filters_outside_it() {
    let mut config = FakeServerConfig::for_tests();
    config.allowed_clients.push(team_a_only());
    let harness = Harness::start_with(config).await;
    let operator = harness.operator().await;
    create(&operator, "team-a", "web").await;
    create(&operator, "team-b", "web").await;

    let limited = harness.client("dns:team-a.example").await;
    let listed = list_all::<v1::Client>(&limited, request()).await.unwrap();
    assert_eq!(names(&listed), ["team-a/web"]);
    let everything = list_all::<v1::Client>(&operator, request()).await.unwrap();
    assert_eq!(names(&everything), ["team-a/web", "team-b/web"]);
    let filtered = list_all::<v1::Client>(
        &operator,
        v1::ListObjectsRequest {
            namespaces: vec!["team-b".into()],
            ..request()
        },
    )
    .await
    .unwrap();
    assert_eq!(names(&filtered), ["team-b/web"]);

    let outside = refusal(
        limited
            .list_clients(v1::ListObjectsRequest {
                namespaces: vec!["team-b".into()],
                ..request()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(outside.reason, Some(ServerReason::OutsideGrant));
    assert_eq!(outside.metadata["namespace"], "team-b");

    let not_granted = refusal(limited.list_brandings(request()).await.unwrap_err());
    assert_eq!(not_granted.reason, Some(ServerReason::OperationNotGranted));
    assert_eq!(not_granted.metadata["operation"], "brandings");
}

#[tokio::test]
async fn an_older_server_without_the_listings_is_named_as_older() {
    let harness = Harness::start().await;
    harness
        .server
        .set_unimplemented(Method::ListOrganizations, true);
    let client = harness.operator().await;
    let info = client.get_server_info().await.unwrap();
    assert!(!info.features.contains(&LIST_OBJECTS_FEATURE.to_owned()));
    let error = list_all::<v1::Organization>(&client, request())
        .await
        .unwrap_err();
    assert!(matches!(error, ListError::ServerTooOld { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("older"), "{message}");
    assert!(message.contains("ListOrganizations"), "{message}");
}
