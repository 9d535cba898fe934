//! `managementPolicy: Observe` end to end: an observed manifest shows what the server holds (its
//! revision, who wrote it, the fields that differ) and never writes, holds no finalizer and gets
//! no Secret; a person's change shows through the change feed; every kind can be observed. Set
//! to `Manage`, the object is adopted at the revision the status showed: an identical one
//! without a write, a differing one with exactly one write over that revision, and one a person
//! changed since is reported as a drift, not written over.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_fake_server::Actor;
use nauthera_proto::v1;
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::{
    AdoptedSecret, Branding, IdentityProvider, OIDCClient, Organization,
};
use nauthera_tests::e2e::{
    ISSUER, MANAGER, Stack, dashboard_person, generated_client_with, status_of,
};

fn observed_client(name: &str) -> String {
    generated_client_with(name, "Delete", "  managementPolicy: Observe\n")
}

fn another_redirect(spec: &mut v1::ClientSpec) {
    spec.redirect_uris
        .push("https://elsewhere.example.test/callback".to_owned());
}

/// Waits until the client is observed at `revision`.
async fn wait_observed(stack: &Stack, name: &str, revision: &str) -> OIDCClient {
    stack
        .wait_for(name, &format!("observed at {revision}"), |c| {
            c.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Observed)
                    && s.observed.as_ref().is_some_and(|o| o.revision == revision)
            })
        })
        .await
}

async fn an_observed_client_shows_what_the_server_holds_and_never_writes() {
    let stack = Stack::start().await;
    let made = stack.dashboard_client("web", another_redirect).await;
    let writes = stack.server.counters().writes_by(MANAGER);

    stack.apply(&observed_client("web")).await;
    let web = wait_observed(&stack, "web", &made).await;
    let status = status_of(&web);
    assert_eq!(status.cause, Some(Cause::Differs));
    assert_eq!(status.revision, None);
    let observed = status.observed.as_deref().unwrap();
    assert_eq!(observed.actor.as_deref(), Some("user:alice@example.com"));
    assert!(observed.written_at.is_some());
    assert!(
        observed
            .differences
            .iter()
            .any(|f| f.contains("redirectUris")),
        "{:?}",
        observed.differences
    );
    let message = status.message.as_deref().unwrap();
    for part in [made.as_str(), "user:alice@example.com", "redirectUris"] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    assert!(
        web.metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .is_empty(),
        "{:?}",
        web.metadata.finalizers
    );
    assert!(stack.secret("web").await.is_none(), "no Secret is written");

    // A person's change shows through the change feed.
    let changed = stack
        .server
        .edit_client(&stack.object_ref("web"), &dashboard_person(), |spec| {
            spec.scopes.push("email".to_owned());
        })
        .unwrap();
    let web = wait_observed(&stack, "web", &changed).await;
    let observed = status_of(&web).observed.as_deref().unwrap();
    assert!(
        observed.differences.iter().any(|f| f.contains("scopes")),
        "{:?}",
        observed.differences
    );

    // Other kinds: an organization the server holds, a branding it does not.
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: Organization
metadata:
  name: acme
spec:
  slug: acme
  issuer: {ISSUER}
  displayName: Acme
  managementPolicy: Observe
"
        ))
        .await;
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: look
spec:
  issuer: {ISSUER}
  managementPolicy: Observe
  branding:
    texts:
      title: Look
"
        ))
        .await;
    // An identity provider's upstream Secret is not even read: it need not exist.
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: IdentityProvider
metadata:
  name: corp
spec:
  issuer: {ISSUER}
  kind: oidc
  displayName: Corp SSO
  upstreamUrl: https://sso.corp.example.test
  clientId: nauthera
  secretRef:
    name: corp-idp
    key: clientSecret
  scopes: [openid, email]
  managementPolicy: Observe
"
        ))
        .await;
    let organization = stack
        .wait_reason_of::<Organization>("acme", Reason::Observed)
        .await;
    let status = organization.status.unwrap();
    assert!(
        status
            .observed
            .as_ref()
            .is_some_and(|o| !o.absent && !o.revision.is_empty()),
        "{status:?}"
    );
    let branding = stack
        .wait_reason_of::<Branding>("look", Reason::Observed)
        .await;
    assert_eq!(branding.status.unwrap().cause, Some(Cause::NotOnServer));
    assert!(stack.server.branding(&stack.object_ref("look")).is_none());
    let provider = stack
        .wait_reason_of::<IdentityProvider>("corp", Reason::Observed)
        .await;
    assert_eq!(provider.status.unwrap().cause, Some(Cause::NotOnServer));

    // Deleting an observed manifest touches nothing on the server.
    stack.delete_oidc_client("web").await;
    stack.wait_gone("web").await;
    assert_eq!(
        stack
            .server
            .client(&stack.object_ref("web"))
            .unwrap()
            .revision,
        changed
    );
    assert_eq!(
        stack.server.counters().writes_by(MANAGER),
        writes,
        "the audit log shows a write by the reconciler"
    );
}
nauthera_tests::e2e_test!(an_observed_client_shows_what_the_server_holds_and_never_writes);

async fn an_identical_observed_client_set_to_manage_is_adopted_without_a_write() {
    let stack = Stack::start().await;
    // The person's edit changes nothing the manifest declares.
    let made = stack
        .dashboard_client("web", |spec| spec.display_name = "web".into())
        .await;
    stack.apply(&observed_client("web")).await;
    let web = wait_observed(&stack, "web", &made).await;
    assert_eq!(status_of(&web).cause, Some(Cause::Identical));
    let writes = stack.server.counters().writes_by(MANAGER);

    stack
        .apply(&generated_client_with("web", "Delete", ""))
        .await;
    let web = stack.wait_reason("web", Reason::Registered).await;
    let status = status_of(&web);
    assert_eq!(status.revision.as_deref(), Some(made.as_str()));
    assert_eq!(status.generation_in_force, Some(2));
    assert!(status.observed.is_none());
    let adoption = status
        .last_adoption
        .as_deref()
        .expect("the adoption is recorded");
    assert!(!adoption.written);
    assert_eq!(adoption.from_revision, made);
    assert_eq!(adoption.secret, AdoptedSecret::Kept);
    assert_eq!(adoption.requested_by, None);
    let event = stack.wait_event("web", "Adopted").await;
    assert!(
        event.message.contains("nothing was written"),
        "{}",
        event.message
    );
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes);
    // The secret the server holds is kept: none is delivered until a rotation.
    assert!(stack.secret("web").await.is_none());
}
nauthera_tests::e2e_test!(an_identical_observed_client_set_to_manage_is_adopted_without_a_write);

async fn a_differing_observed_client_set_to_manage_is_written_once_over_the_revision_shown() {
    let stack = Stack::start().await;
    let made = stack.dashboard_client("web", another_redirect).await;
    stack.apply(&observed_client("web")).await;
    wait_observed(&stack, "web", &made).await;
    let writes = stack.server.counters().writes_by(MANAGER);

    stack
        .apply(&generated_client_with("web", "Delete", ""))
        .await;
    let web = stack
        .wait_for("web", "adopted with a write", |c| {
            c.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Registered)
                    && s.last_adoption.as_ref().is_some_and(|a| a.written)
            })
        })
        .await;
    let adoption = status_of(&web).last_adoption.as_deref().unwrap();
    assert_eq!(adoption.from_revision, made);
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes + 1);
    let held = stack.server.client(&stack.object_ref("web")).unwrap();
    assert_eq!(held.revision, adoption.revision);
    assert_eq!(
        held.spec.unwrap().redirect_uris,
        vec!["https://web.example.test/callback".to_owned()]
    );
    // The write named the revision shown: the server kept the audit record of exactly one write
    // by the reconciler after the person's.
    let ours: Vec<_> = stack
        .server
        .audit_events()
        .into_iter()
        .filter(|e| e.manager == MANAGER && e.revision == adoption.revision)
        .collect();
    assert_eq!(ours.len(), 1, "{ours:#?}");
}
nauthera_tests::e2e_test!(
    a_differing_observed_client_set_to_manage_is_written_once_over_the_revision_shown
);

async fn a_change_between_observation_and_handover_is_reported_not_written_over() {
    let mut stack = Stack::start().await;
    let made = stack.dashboard_client("web", another_redirect).await;
    stack.apply(&observed_client("web")).await;
    wait_observed(&stack, "web", &made).await;
    let writes = stack.server.counters().writes_by(MANAGER);

    // While no reconciler runs, a person changes the client and the manifest says Manage.
    stack.reconciler.take().unwrap().stop().await;
    let bob = Actor::dashboard("bob@example.com");
    let changed = stack
        .server
        .edit_client(&stack.object_ref("web"), &bob, |spec| {
            spec.scopes.push("email".to_owned());
        })
        .unwrap();
    stack
        .apply(&generated_client_with("web", "Delete", ""))
        .await;
    let next = stack.start_replica("replica-b").await.unwrap();
    next.wait_ready().await.unwrap();
    stack.reconciler = Some(next);

    let web = stack.wait_reason("web", Reason::Drifted).await;
    let status = status_of(&web);
    let drift = status.drift.as_deref().unwrap();
    assert_eq!(drift.server_revision, changed);
    assert_eq!(drift.actor.as_deref(), Some("user:bob@example.com"));
    let message = status.message.as_deref().unwrap();
    assert!(
        message.contains(&made) && message.contains(&changed),
        "{message}"
    );
    assert!(status.last_adoption.is_none());
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes);
    assert_eq!(
        stack
            .server
            .client(&stack.object_ref("web"))
            .unwrap()
            .revision,
        changed
    );
}
nauthera_tests::e2e_test!(a_change_between_observation_and_handover_is_reported_not_written_over);
