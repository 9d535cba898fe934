//! Every refusal cause end to end, each with the message the Refused runbook describes: the gRPC
//! code, the stable reason in parentheses, the cause, the field violations and the generation the
//! server keeps in force; and the resend after an edit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_fake_server::{Method, OrganizationConfig, grant_everything};
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::grants::{GrantEntry, Operation};
use nauthera_tests::e2e::{
    ISSUER, MANAGER, ORGANIZATION, RECONCILER_IDENTITY, Stack, StackOptions, generated_client,
    status_of,
};

/// Waits for `Refused` (phase Error) and returns the message, after checking the Warning event and
/// the metric with this cause.
async fn refused(stack: &Stack, name: &str, cause: &str) -> String {
    let client = stack.wait_reason(name, Reason::Refused).await;
    let status = status_of(&client);
    assert_eq!(status.phase, Some(Phase::Error), "{status:?}");
    let event = stack.wait_event(name, "Refused").await;
    assert_eq!(event.type_, "Warning");
    stack
        .reconciler()
        .wait_metric(
            "nauthera_operator_reconciles_total",
            &[
                ("kind", "OIDCClient"),
                ("reason", Reason::Refused.metric_label()),
                ("cause", cause),
            ],
            |counted| counted >= 1.0,
        )
        .await;
    status.message.clone().unwrap()
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
}

async fn a_field_violation_names_the_field_and_is_sent_again_after_an_edit() {
    let stack = Stack::start().await;
    // refresh_token without authorization_code: the schema allows it, the server does not.
    let manifest = |grants: &str| {
        format!(
            "apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata:
  name: batch
spec:
  issuer: {ISSUER}
  grantTypes: [{grants}]
  responseTypes: []
  scopes: [jobs]
  tokenEndpointAuthMethod: client_secret_post
  secret:
    generate: true
"
        )
    };
    stack
        .apply(&manifest("client_credentials, refresh_token"))
        .await;
    let message = refused(&stack, "batch", "field_violation").await;
    assert_mentions(
        &message,
        &[
            "InvalidArgument",
            "(INVALID_FIELD)",
            "spec.grant_types",
            "refresh_token needs authorization_code",
            "generation in force: none",
            "sent again on the next edit or after five minutes",
        ],
    );
    assert!(stack.server.client(&stack.object_ref("batch")).is_none());
    let calls = stack
        .reconciler()
        .metric(
            "nauthera_operator_server_calls_total",
            &[("method", "ApplyClient"), ("code", "InvalidArgument")],
        )
        .await;
    assert!(calls >= 1.0);

    // The team fixes the manifest: sent again at once.
    stack.apply(&manifest("client_credentials")).await;
    stack.wait_reason("batch", Reason::Registered).await;
    assert!(stack.server.client(&stack.object_ref("batch")).is_some());
}
nauthera_tests::e2e_test!(a_field_violation_names_the_field_and_is_sent_again_after_an_edit);

async fn a_refused_edit_names_the_generation_the_server_keeps_in_force() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    // Generation 2 adds grant types the server refuses together (the schema admits them).
    stack
        .apply(&generated_client("web").replace(
            "grantTypes: [authorization_code]",
            "grantTypes: [authorization_code, client_credentials, refresh_token]\n  responseTypes: []",
        ).replace("  responseTypes: [code]\n", ""))
        .await;
    let message = refused(&stack, "web", "field_violation").await;
    assert_mentions(
        &message,
        &[
            "InvalidArgument",
            "(INVALID_FIELD)",
            "generation in force: 1",
        ],
    );
    let web = stack.oidc_client("web").await.unwrap();
    assert_eq!(status_of(&web).generation_in_force, Some(1));
    assert_eq!(web.metadata.generation, Some(2));
}
nauthera_tests::e2e_test!(a_refused_edit_names_the_generation_the_server_keeps_in_force);

async fn an_unknown_issuer_is_refused_with_its_stable_reason() {
    let stack = Stack::start().await;
    stack
        .apply(
            &generated_client("web")
                .replace(ISSUER, "https://login.example.com/nobody-serves-this"),
        )
        .await;
    let message = refused(&stack, "web", "unknown_issuer").await;
    assert_mentions(
        &message,
        &[
            "FailedPrecondition",
            "(UNKNOWN_ISSUER)",
            "no organization serves the issuer",
        ],
    );
    // The team corrects the issuer.
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
}
nauthera_tests::e2e_test!(an_unknown_issuer_is_refused_with_its_stable_reason);

async fn an_identity_the_server_does_not_allow_is_refused_and_resent_after_an_edit() {
    let stack = Stack::start().await;
    stack
        .server
        .set_allowed_clients(vec![grant_everything("dns:someone-else.example.test")]);
    stack.apply(&generated_client("web")).await;
    let message = refused(&stack, "web", "identity_not_allowed").await;
    assert_mentions(&message, &["PermissionDenied", "(IDENTITY_NOT_ALLOWED)"]);
    let denied = stack
        .reconciler()
        .metric(
            "nauthera_operator_server_calls_total",
            &[("code", "PermissionDenied")],
        )
        .await;
    assert!(denied >= 1.0);
    // The probe sees it too.
    stack.reconciler().wait_readyz(503, "Refused").await;

    // The platform team lists the identity; the next edit is sent again.
    stack
        .server
        .set_allowed_clients(vec![grant_everything(RECONCILER_IDENTITY)]);
    stack
        .apply(&generated_client("web").replace("displayName: web", "displayName: Web"))
        .await;
    stack.wait_reason("web", Reason::Registered).await;
    stack.reconciler().wait_readyz(200, "ok").await;
}
nauthera_tests::e2e_test!(
    an_identity_the_server_does_not_allow_is_refused_and_resent_after_an_edit
);

async fn a_grant_without_the_clients_operation_is_refused() {
    let stack = Stack::start_with(StackOptions {
        grants: Some(vec![GrantEntry {
            identity: RECONCILER_IDENTITY.to_owned(),
            operations: vec![Operation::Brandings],
            organizations: vec!["*".to_owned()],
            namespaces: vec!["*".to_owned()],
        }]),
        ..StackOptions::default()
    })
    .await;
    stack.apply(&generated_client("web")).await;
    let message = refused(&stack, "web", "operation_not_granted").await;
    assert_mentions(&message, &["PermissionDenied", "(OPERATION_NOT_GRANTED)"]);
    assert_eq!(stack.server.counters().writes_by(MANAGER), 0);
}
nauthera_tests::e2e_test!(a_grant_without_the_clients_operation_is_refused);

async fn an_organization_outside_the_grant_is_refused() {
    let mut organizations = StackOptions::default().organizations;
    organizations.push(OrganizationConfig {
        slug: "globex".to_owned(),
        issuer: "https://login.example.com/globex".to_owned(),
        display_name: "Globex".to_owned(),
        fapi_mode: Default::default(),
    });
    let stack = Stack::start_with(StackOptions {
        organizations,
        grants: Some(vec![GrantEntry {
            identity: RECONCILER_IDENTITY.to_owned(),
            operations: vec![Operation::Clients],
            organizations: vec![ORGANIZATION.to_owned()],
            namespaces: vec!["*".to_owned()],
        }]),
        ..StackOptions::default()
    })
    .await;
    stack
        .apply(&generated_client("web").replace(ISSUER, "https://login.example.com/globex"))
        .await;
    let message = refused(&stack, "web", "outside_grant").await;
    assert_mentions(&message, &["PermissionDenied", "(OUTSIDE_GRANT)", "globex"]);
    // A client of the granted organization is registered meanwhile.
    stack.apply(&generated_client("api")).await;
    stack.wait_reason("api", Reason::Registered).await;
}
nauthera_tests::e2e_test!(an_organization_outside_the_grant_is_refused);

async fn an_older_server_answers_unimplemented_and_the_message_says_so() {
    let stack = Stack::start().await;
    stack.server.set_unimplemented(Method::ApplyClient, true);
    stack.apply(&generated_client("web")).await;
    let message = refused(&stack, "web", "unimplemented").await;
    assert_mentions(
        &message,
        &["Unimplemented", "the server is older than this call"],
    );
}
nauthera_tests::e2e_test!(an_older_server_answers_unimplemented_and_the_message_says_so);
