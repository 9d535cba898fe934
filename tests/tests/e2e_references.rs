//! References between kinds end to end: a Branding or a Secret a manifest names that does not
//! exist yet is waited for as `Pending`, naming it, and nothing is sent to the server until it
//! exists; a Branding that goes away is said at once by the clients that name it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_fake_server::Method;
use nauthera_shared::catalog::{Cause, Phase, Reason};
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient};
use nauthera_tests::e2e::{ISSUER, Stack, generated_client_with, status_of};

fn branding(name: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: {name}
spec:
  issuer: {ISSUER}
  branding:
    colors:
      primary: \"#112233\"
"
    )
}

fn identity_provider(name: &str, secret: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: IdentityProvider
metadata:
  name: {name}
spec:
  issuer: {ISSUER}
  kind: github
  displayName: GitHub
  clientId: nauthera-acme
  secretRef:
    name: {secret}
    key: clientSecret
  scopes: [read:user]
"
    )
}

fn upstream_secret(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1
kind: Secret
metadata:
  name: {name}
stringData:
  clientSecret: {value}
"
    )
}

/// Whether a resource waits, naming what it waits for.
fn waits_naming(status: Option<&nauthera_shared::resources::ResourceStatus>, named: &str) -> bool {
    status.is_some_and(|s| {
        s.reason == Some(Reason::Pending)
            && s.cause == Some(Cause::ReferenceNotReady)
            && s.message.as_deref().is_some_and(|m| m.contains(named))
    })
}

async fn references_to_what_does_not_exist_yet_wait_as_pending_and_nothing_is_sent() {
    let stack = Stack::start().await;
    let namespace = stack.namespace().to_owned();
    stack
        .apply(&generated_client_with(
            "billing-web",
            "Delete",
            "  brandingRef:\n    name: acme-sign-in\n",
        ))
        .await;
    stack
        .apply(&identity_provider("github", "github-oauth-app"))
        .await;

    let named = format!("Branding {namespace}/acme-sign-in");
    let client = stack
        .wait_for("billing-web", "waiting for its Branding", |c| {
            waits_naming(c.status.as_ref(), &named)
        })
        .await;
    let message = status_of(&client).message.clone().unwrap();
    assert!(message.contains("does not exist"), "{message}");
    assert_eq!(status_of(&client).phase, Some(Phase::Pending));
    let provider = stack
        .wait_for_kind::<IdentityProvider>("github", "waiting for its Secret", |p| {
            waits_naming(p.status.as_ref(), "Secret github-oauth-app")
        })
        .await;
    assert!(provider.status.unwrap().revision.is_none());

    let counters = stack.server.counters();
    assert_eq!(counters.calls_of(Method::ApplyClient), 0, "nothing sent");
    assert_eq!(counters.calls_of(Method::ApplyIdentityProvider), 0);
    assert!(
        !counters.refusals.contains_key("REFERENCE_NOT_FOUND"),
        "{:?}",
        counters.refusals
    );
    let events = stack.events_for("OIDCClient", "billing-web").await;
    assert!(
        !events.iter().any(|e| e.reason == "Refused"),
        "never refused: {events:#?}"
    );

    // What they wait for appears: both proceed by themselves.
    stack.apply(&branding("acme-sign-in")).await;
    stack
        .apply(&upstream_secret("github-oauth-app", "upstream-value-1"))
        .await;
    stack.wait_reason("billing-web", Reason::Registered).await;
    stack
        .wait_reason_of::<IdentityProvider>("github", Reason::Registered)
        .await;
    assert!(
        !stack
            .server
            .counters()
            .refusals
            .contains_key("REFERENCE_NOT_FOUND")
    );
}
nauthera_tests::e2e_test!(
    references_to_what_does_not_exist_yet_wait_as_pending_and_nothing_is_sent
);

async fn a_client_says_at_once_that_the_branding_it_names_is_gone() {
    let stack = Stack::start().await;
    let namespace = stack.namespace().to_owned();
    stack.apply(&branding("acme-sign-in")).await;
    stack
        .wait_reason_of::<Branding>("acme-sign-in", Reason::Registered)
        .await;
    stack
        .apply(&generated_client_with(
            "billing-web",
            "Delete",
            "  brandingRef:\n    name: acme-sign-in\n",
        ))
        .await;
    let registered = stack.wait_reason("billing-web", Reason::Registered).await;
    let revision = status_of(&registered).revision.clone();

    stack.delete_manifest::<Branding>("acme-sign-in").await;
    stack.wait_gone_of::<Branding>("acme-sign-in").await;
    let named = format!("Branding {namespace}/acme-sign-in");
    let client = stack
        .wait_for("billing-web", "saying its Branding is gone", |c| {
            waits_naming(c.status.as_ref(), &named)
        })
        .await;
    let status = status_of(&client);
    let message = status.message.clone().unwrap();
    for part in [
        "removed it from the server",
        "organization's default sign-in pages",
        "spec.brandingRef",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_ne!(ready.status, "True", "{ready:?}");
    assert_eq!(status.revision, revision, "nothing was written");

    // Declared again: the client is registered again, without a write of its own.
    stack.apply(&branding("acme-sign-in")).await;
    let back = stack
        .wait_for("billing-web", "registered again", |c: &OIDCClient| {
            c.status.as_ref().and_then(|s| s.reason) == Some(Reason::Registered)
        })
        .await;
    assert_eq!(status_of(&back).revision, revision);
}
nauthera_tests::e2e_test!(a_client_says_at_once_that_the_branding_it_names_is_gone);
