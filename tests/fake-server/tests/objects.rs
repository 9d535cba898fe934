//! State and rules: revisions and preconditions, managers, secrets, field rules and audit.

#![allow(clippy::unwrap_used)]

mod support;

use nauthera_client::{AdminClient, ServerError};
use nauthera_fake_server::{FakeServerConfig, FapiModeSetting, OrganizationConfig};
use nauthera_proto::v1::{self, AuditOutcome, ObjectKind, client_spec};
use nauthera_shared::catalog::ServerReason;
use support::*;

fn refusal(error: nauthera_client::CallError) -> ServerError {
    error.server().cloned().expect("the server answered")
}

async fn create_web(client: &AdminClient) -> v1::ApplyClientResponse {
    client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap()
}

#[tokio::test]
async fn every_write_moves_the_revision_and_the_change_hint() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let before = client.get_change_hint().await.unwrap();
    let first = create_web(&client).await.client.unwrap();
    let mut request = apply(acme("team-a", "web"), web_spec(), 2);
    request.if_revision = if_revision(&first.revision);
    let second = client.apply_client(request).await.unwrap().client.unwrap();
    let after = client.get_change_hint().await.unwrap();
    assert_ne!(first.revision, second.revision);
    assert_eq!(after.epoch, before.epoch);
    assert_eq!(after.sequence, before.sequence + 2);
    assert_eq!(second.generation_in_force, 2);
    assert_eq!(second.client_id, first.client_id);
    let written = second.last_write.unwrap();
    assert_eq!(written.manager, MANAGER);
    assert_eq!(written.actor, OPERATOR);
    assert_eq!(written.generation, 2);
}

#[tokio::test]
async fn a_precondition_on_another_revision_or_none_is_refused_with_the_held_revision() {
    let harness = Harness::start().await;
    let client = harness.operator().await;

    let mut request = apply(acme("team-a", "web"), web_spec(), 1);
    request.if_revision = if_revision("r-that-never-was");
    let none_held = refusal(client.apply_client(request).await.unwrap_err());
    assert_eq!(none_held.code, tonic::Code::FailedPrecondition);
    assert_eq!(none_held.reason, Some(ServerReason::RevisionMismatch));
    assert_eq!(none_held.held_revision.as_deref(), Some(""));
    assert_eq!(none_held.generation_in_force, None);

    let mut create = apply(acme("team-a", "web"), web_spec(), 1);
    create.if_revision = if_absent();
    let created = client
        .apply_client(create.clone())
        .await
        .unwrap()
        .client
        .unwrap();

    let again = refusal(client.apply_client(create).await.unwrap_err());
    assert_eq!(again.reason, Some(ServerReason::RevisionMismatch));
    assert_eq!(
        again.held_revision.as_deref(),
        Some(created.revision.as_str())
    );

    let mut stale = apply(acme("team-a", "web"), web_spec(), 2);
    stale.if_revision = if_revision("r-stale");
    let other = refusal(client.apply_client(stale).await.unwrap_err());
    assert_eq!(other.reason, Some(ServerReason::RevisionMismatch));
    assert_eq!(
        other.held_revision.as_deref(),
        Some(created.revision.as_str())
    );
    assert_eq!(other.generation_in_force, Some(1));
    assert!(other.cause.is_some());
}

#[tokio::test]
async fn overwriting_another_managers_or_a_persons_change_needs_its_revision() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    create_web(&client).await;

    // The same manager may write again without a precondition.
    client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 2))
        .await
        .unwrap();

    let mut other_manager = apply(acme("team-a", "web"), web_spec(), 3);
    other_manager.manager = "terraform".into();
    let conflict = refusal(client.apply_client(other_manager).await.unwrap_err());
    assert_eq!(conflict.reason, Some(ServerReason::ManagerConflict));
    assert_eq!(conflict.metadata["manager"], MANAGER);
    assert_eq!(conflict.metadata["actor"], OPERATOR);
    assert_eq!(conflict.generation_in_force, Some(2));

    let person = nauthera_fake_server::Actor::dashboard("alice@example.com");
    let revision = harness
        .server
        .edit_client(&acme("team-a", "web"), &person, |spec| {
            spec.display_name = "Changed by hand".into()
        })
        .unwrap();
    let conflict = refusal(
        client
            .apply_client(apply(acme("team-a", "web"), web_spec(), 3))
            .await
            .unwrap_err(),
    );
    assert_eq!(conflict.reason, Some(ServerReason::ManagerConflict));
    assert_eq!(conflict.metadata["manager"], "");
    assert_eq!(conflict.metadata["actor"], "user:alice@example.com");
    assert_eq!(conflict.held_revision.as_deref(), Some(revision.as_str()));

    // Naming the revision restores the declared state.
    let mut restore = apply(acme("team-a", "web"), web_spec(), 3);
    restore.if_revision = if_revision(&revision);
    let restored = client.apply_client(restore).await.unwrap().client.unwrap();
    assert_eq!(restored.spec.unwrap().display_name, "Web");
}

#[tokio::test]
async fn a_generated_secret_is_returned_exactly_once_and_only_its_hash_is_kept() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let created = create_web(&client).await;
    assert!(created.created);
    assert_eq!(created.secret.len(), 64);
    let stored_hash = harness
        .server
        .client_secret_hash(&acme("team-a", "web"))
        .unwrap();
    assert_ne!(stored_hash, created.secret);
    assert!(
        !format!("{:?}", harness.server.client(&acme("team-a", "web"))).contains(&created.secret)
    );

    let updated = client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 2))
        .await
        .unwrap();
    assert!(!updated.created);
    assert!(updated.secret.is_empty());
    let read = client.get_client(acme("team-a", "web")).await.unwrap();
    assert_eq!(
        read.spec.unwrap().secret,
        Some(client_spec::Secret::GenerateSecret(true))
    );
    assert!(read.secret_set_at.is_some());

    let mut rotate = apply(acme("team-a", "web"), web_spec(), 2);
    rotate.rotate_secret = true;
    let rotated = client.apply_client(rotate).await.unwrap();
    assert_eq!(rotated.secret.len(), 64);
    assert_ne!(rotated.secret, created.secret);
    assert_ne!(
        harness
            .server
            .client_secret_hash(&acme("team-a", "web"))
            .unwrap(),
        stored_hash
    );
}

#[tokio::test]
async fn a_provided_secret_is_never_returned() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let mut spec = web_spec();
    spec.secret = Some(client_spec::Secret::ProvidedSecret(
        "team-held-secret".into(),
    ));
    let response = client
        .apply_client(apply(acme("team-a", "sealed"), spec, 1))
        .await
        .unwrap();
    assert!(response.secret.is_empty());
    let held = response.client.unwrap().spec.unwrap();
    assert_eq!(
        held.secret,
        Some(client_spec::Secret::GenerateSecret(false))
    );

    let mut rotate = apply(acme("team-a", "sealed"), web_spec(), 2);
    rotate.spec.as_mut().unwrap().secret = Some(client_spec::Secret::ProvidedSecret(
        "team-held-secret".into(),
    ));
    rotate.rotate_secret = true;
    let error = refusal(client.apply_client(rotate).await.unwrap_err());
    assert_eq!(error.reason, Some(ServerReason::InvalidField));
    assert_eq!(error.violations[0].field, "rotate_secret");
}

async fn field_refusal(client: &AdminClient, name: &str, spec: v1::ClientSpec) -> ServerError {
    refusal(
        client
            .apply_client(apply(acme("team-a", name), spec, 1))
            .await
            .unwrap_err(),
    )
}

#[tokio::test]
async fn field_rules_name_each_field() {
    let harness = Harness::start().await;
    let client = harness.operator().await;

    let mut http = web_spec();
    http.redirect_uris = vec![
        "http://app.example.com/cb".into(),
        "http://127.0.0.1:8080/cb".into(),
    ];
    let error = field_refusal(&client, "web", http).await;
    assert_eq!(error.code, tonic::Code::InvalidArgument);
    assert_eq!(error.reason, Some(ServerReason::InvalidField));
    assert_eq!(error.violations.len(), 1);
    assert_eq!(error.violations[0].field, "spec.redirect_uris[0]");

    let mut no_code = web_spec();
    no_code.response_types.clear();
    no_code.redirect_uris.clear();
    let error = field_refusal(&client, "web", no_code).await;
    let fields: Vec<_> = error.violations.iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, vec!["spec.response_types", "spec.redirect_uris"]);

    let public_machine = v1::ClientSpec {
        grant_types: vec!["client_credentials".into()],
        token_endpoint_auth_method: "none".into(),
        ..Default::default()
    };
    let error = field_refusal(&client, "batch", public_machine).await;
    assert_eq!(error.violations[0].field, "spec.token_endpoint_auth_method");
    assert!(error.violations[0].description.contains("confidential"));
    assert!(harness.server.client(&acme("team-a", "web")).is_none());
}

#[tokio::test]
async fn reserved_names_and_unknown_issuers_are_refused_by_reason() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let reserved = field_refusal(&client, "admin", web_spec()).await;
    assert_eq!(reserved.code, tonic::Code::InvalidArgument);
    assert_eq!(reserved.reason, Some(ServerReason::ReservedName));
    assert_eq!(reserved.metadata["name"], "admin");

    let mut unknown = acme("team-a", "web");
    unknown.issuer = "https://login.example.com/acmee".into();
    let error = refusal(
        client
            .apply_client(apply(unknown, web_spec(), 1))
            .await
            .unwrap_err(),
    );
    assert_eq!(error.code, tonic::Code::FailedPrecondition);
    assert_eq!(error.reason, Some(ServerReason::UnknownIssuer));
    assert_eq!(error.metadata["issuer"], "https://login.example.com/acmee");

    let mut branded = web_spec();
    branded.branding_ref = "missing".into();
    let error = field_refusal(&client, "web", branded).await;
    assert_eq!(error.reason, Some(ServerReason::ReferenceNotFound));
    assert_eq!(error.metadata["reference"], "missing");
}

#[tokio::test]
async fn fapi_mode_requirements_are_refused_with_the_mode_and_the_generation_in_force() {
    let mut config = FakeServerConfig::for_tests();
    config.organizations.push(OrganizationConfig {
        slug: "bank".into(),
        issuer: "https://login.example.com/bank".into(),
        display_name: "Bank".into(),
        fapi_mode: FapiModeSetting::Fapi2Security,
    });
    let harness = Harness::start_with(config).await;
    let client = harness.operator().await;
    let mut reference = acme("team-a", "payments");
    reference.issuer = "https://login.example.com/bank".into();
    let compliant = v1::ClientSpec {
        redirect_uris: vec!["https://pay.example.com/cb".into()],
        grant_types: vec!["authorization_code".into()],
        response_types: vec!["code".into()],
        token_endpoint_auth_method: "private_key_jwt".into(),
        require_pkce: true,
        ..Default::default()
    };
    client
        .apply_client(apply(reference.clone(), compliant.clone(), 4))
        .await
        .unwrap();

    let mut weaker = compliant;
    weaker.require_pkce = false;
    weaker.token_endpoint_auth_method = "client_secret_basic".into();
    weaker.secret = Some(client_spec::Secret::GenerateSecret(true));
    weaker.grant_types.push("refresh_token".into());
    let error = refusal(
        client
            .apply_client(apply(reference.clone(), weaker, 5))
            .await
            .unwrap_err(),
    );
    assert_eq!(error.code, tonic::Code::FailedPrecondition);
    assert_eq!(error.reason, Some(ServerReason::FapiRequirements));
    assert_eq!(error.metadata["fapi_mode"], "FAPI_MODE_FAPI2_SECURITY");
    let fields: Vec<_> = error.violations.iter().map(|v| v.field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "spec.token_endpoint_auth_method",
            "spec.require_pkce",
            "spec.grant_types[1]"
        ]
    );
    assert_eq!(error.generation_in_force, Some(4));
    assert_eq!(
        harness
            .server
            .client(&reference)
            .unwrap()
            .generation_in_force,
        4
    );
}

#[tokio::test]
async fn audit_events_record_writes_and_refusals_and_filter_by_client() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let created = create_web(&client).await.client.unwrap();
    let mut http = web_spec();
    http.redirect_uris = vec!["http://app.example.com/cb".into()];
    field_refusal(&client, "web", http).await;
    client
        .apply_client(apply(acme("team-a", "other"), web_spec(), 1))
        .await
        .unwrap();
    let person = nauthera_fake_server::Actor::dashboard("bob@example.com").because("hotfix");
    harness
        .server
        .edit_client(&acme("team-a", "web"), &person, |spec| {
            spec.scopes.push("email".into())
        })
        .unwrap();

    let events = client
        .list_audit_events(v1::ListAuditEventsRequest {
            organization: "acme".into(),
            client_id: created.client_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .events;
    assert_eq!(events.len(), 3, "{events:#?}");
    let (edit, refused, applied) = (&events[0], &events[1], &events[2]);
    assert!(
        edit.id > refused.id && refused.id > applied.id,
        "newest first"
    );

    assert_eq!(applied.action, "client.applied");
    assert_eq!(applied.outcome, AuditOutcome::Applied as i32);
    assert_eq!(applied.kind, ObjectKind::Client as i32);
    assert_eq!(applied.manager, MANAGER);
    assert_eq!(applied.actor, OPERATOR);
    assert_eq!(applied.revision, created.revision);
    assert_eq!(applied.generation, 1);
    assert!(applied.time.is_some());

    assert_eq!(refused.action, "client.applied");
    assert_eq!(refused.outcome, AuditOutcome::Refused as i32);
    assert_eq!(refused.reason, "INVALID_FIELD");
    assert_eq!(refused.violations[0].field, "spec.redirect_uris[0]");
    assert!(refused.cause.contains("https"));
    assert!(refused.revision.is_empty());

    assert_eq!(edit.manager, "");
    assert_eq!(edit.actor, "user:bob@example.com");
    assert_eq!(edit.cause, "hotfix");

    let all = client
        .list_audit_events(v1::ListAuditEventsRequest {
            organization: "acme".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .events;
    assert!(all.len() > events.len());
    assert!(
        all.iter()
            .any(|event| event.r#ref.as_ref().unwrap().name == "other")
    );
}

#[tokio::test]
async fn deletes_honour_preconditions_and_are_recorded() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let created = create_web(&client).await.client.unwrap();
    let stale = refusal(
        client
            .delete_client(v1::DeleteClientRequest {
                r#ref: Some(acme("team-a", "web")),
                if_revision: if_revision("r-stale"),
                manager: MANAGER.into(),
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(stale.reason, Some(ServerReason::RevisionMismatch));
    let deleted = client
        .delete_client(v1::DeleteClientRequest {
            r#ref: Some(acme("team-a", "web")),
            if_revision: if_revision(&created.revision),
            manager: MANAGER.into(),
        })
        .await
        .unwrap();
    assert!(deleted.deleted);
    let absent = client
        .delete_client(v1::DeleteClientRequest {
            r#ref: Some(acme("team-a", "web")),
            if_revision: None,
            manager: MANAGER.into(),
        })
        .await
        .unwrap();
    assert!(!absent.deleted);
    let gone = refusal(client.get_client(acme("team-a", "web")).await.unwrap_err());
    assert_eq!(gone.code, tonic::Code::NotFound);
    assert_eq!(gone.reason, Some(ServerReason::ObjectNotFound));
    let events = harness.server.audit_events();
    let last = events.last().unwrap();
    assert_eq!(last.action, "client.deleted");
    assert_eq!(last.outcome, AuditOutcome::Deleted as i32);
    assert_eq!(last.client_id, created.client_id);
}

#[tokio::test]
async fn brandings_identity_providers_and_organizations_follow_the_same_rules() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let document = v1::BrandingDocument {
        colors: [("primary".to_owned(), "#0044ff".to_owned())].into(),
        ..Default::default()
    };
    let branding = client
        .apply_branding(v1::ApplyBrandingRequest {
            r#ref: Some(acme("team-a", "default")),
            document: Some(document.clone()),
            generation: 1,
            manager: MANAGER.into(),
            if_revision: if_absent(),
        })
        .await
        .unwrap();
    assert_eq!(branding.organization, "acme");
    let bad_colour = refusal(
        client
            .apply_branding(v1::ApplyBrandingRequest {
                r#ref: Some(acme("team-a", "default")),
                document: Some(v1::BrandingDocument {
                    colors: [("primary".to_owned(), "blue".to_owned())].into(),
                    ..Default::default()
                }),
                generation: 2,
                manager: MANAGER.into(),
                if_revision: if_revision(&branding.revision),
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(bad_colour.violations[0].field, "document.colors[primary]");
    assert_eq!(bad_colour.generation_in_force, Some(1));

    let provider = client
        .apply_identity_provider(v1::ApplyIdentityProviderRequest {
            r#ref: Some(acme("team-a", "github")),
            spec: Some(v1::IdentityProviderSpec {
                kind: v1::IdentityProviderKind::Github as i32,
                upstream_client_id: "abc".into(),
                upstream_client_secret: "upstream-secret".into(),
                ..Default::default()
            }),
            generation: 1,
            manager: MANAGER.into(),
            if_revision: None,
        })
        .await
        .unwrap();
    assert!(provider.spec.unwrap().upstream_client_secret.is_empty());

    let organization = client
        .apply_organization(v1::ApplyOrganizationRequest {
            slug: "initech".into(),
            spec: Some(v1::OrganizationSpec {
                issuer: "https://login.example.com/initech".into(),
                fapi_mode: v1::FapiMode::Off as i32,
                ..Default::default()
            }),
            namespace: "platform".into(),
            generation: 1,
            manager: MANAGER.into(),
            if_revision: if_absent(),
        })
        .await
        .unwrap();
    assert_eq!(organization.namespace, "platform");
    assert_eq!(
        client.get_organization("initech").await.unwrap().revision,
        organization.revision
    );
    let seeded = refusal(
        client
            .apply_organization(v1::ApplyOrganizationRequest {
                slug: "acme".into(),
                spec: Some(v1::OrganizationSpec {
                    issuer: ACME_ISSUER.into(),
                    ..Default::default()
                }),
                namespace: "platform".into(),
                generation: 1,
                manager: MANAGER.into(),
                if_revision: None,
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(seeded.reason, Some(ServerReason::ManagerConflict));
    assert!(
        client
            .delete_organization(v1::DeleteOrganizationRequest {
                slug: "initech".into(),
                if_revision: if_revision(&organization.revision),
                manager: MANAGER.into(),
                namespace: "platform".into(),
            })
            .await
            .unwrap()
            .deleted
    );
    let held = refusal(
        client
            .delete_organization(v1::DeleteOrganizationRequest {
                slug: "acme".into(),
                if_revision: None,
                manager: MANAGER.into(),
                namespace: String::new(),
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(held.code, tonic::Code::FailedPrecondition);
    assert_eq!(held.reason, Some(ServerReason::OrganizationNotEmpty));
    assert_eq!(held.metadata["organization"], "acme");
}
