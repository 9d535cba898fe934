//! Adoption end to end: a manifest for a client a person made in the dashboard is held as
//! `AdoptionRequired`, naming who wrote it and its revision, and never written over, not even
//! by a new generation; `nauthera.io/adopt=<revision>` writes once over exactly that revision and
//! delivers a new secret, or with `nauthera.io/adopt-secret: Keep` writes nothing for an identical
//! client and delivers nothing until a rotation; a stale revision is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::api::{Api, Patch, PatchParams};
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::{AdoptedSecret, OIDCClient};
use nauthera_shared::{ADOPT_ANNOTATION, ADOPT_SECRET_ANNOTATION, ROTATE_ANNOTATION};
use nauthera_tests::e2e::{
    MANAGER, Stack, dashboard_person, generated_client_with, secret_value, status_of,
};

/// Sets annotations as the field manager `manager`.
async fn annotate(stack: &Stack, name: &str, manager: &str, annotations: serde_json::Value) {
    let patch = serde_json::json!({ "metadata": { "annotations": annotations } });
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    Api::<OIDCClient>::namespaced(stack.client(), stack.namespace())
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        .expect("the annotation is set");
}

async fn wait_held(stack: &Stack, name: &str, revision: &str, cause: Cause) -> OIDCClient {
    stack
        .wait_for(name, &format!("held at {revision} ({cause:?})"), |c| {
            c.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::AdoptionRequired)
                    && s.cause == Some(cause)
                    && s.observed.as_ref().is_some_and(|o| o.revision == revision)
            })
        })
        .await
}

fn refused_revisions(stack: &Stack) -> u64 {
    stack
        .server
        .counters()
        .refusals
        .get("REVISION_MISMATCH")
        .copied()
        .unwrap_or(0)
}

async fn a_dashboard_client_is_held_until_adopted_then_written_once_with_a_new_secret() {
    let stack = Stack::start().await;
    let made = stack
        .dashboard_client("web", |spec| {
            spec.redirect_uris
                .push("https://elsewhere.example.test/callback".to_owned());
        })
        .await;
    let writes = stack.server.counters().writes_by(MANAGER);
    let refused = refused_revisions(&stack);

    stack
        .apply(&generated_client_with("web", "Delete", ""))
        .await;
    let web = wait_held(&stack, "web", &made, Cause::ForeignObject).await;
    let status = status_of(&web);
    assert_eq!(status.revision, None);
    let message = status.message.as_deref().unwrap();
    for part in [
        made.as_str(),
        "user:alice@example.com",
        "redirectUris",
        "kubectl nauthera adopt oidcclient/web",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    let event = stack.wait_event("web", "AdoptionRequired").await;
    assert_eq!(event.type_, "Warning");

    // A new generation is not written over it either.
    stack
        .apply(&generated_client_with(
            "web",
            "Delete",
            "  postLogoutRedirectUris: [https://web.example.test/bye]\n",
        ))
        .await;
    stack
        .wait_for("web", "generation 2 held", |c| {
            c.status.as_ref().is_some_and(|s| {
                s.observed_generation == Some(2) && s.reason == Some(Reason::AdoptionRequired)
            })
        })
        .await;
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes);
    assert_eq!(
        stack
            .server
            .client(&stack.object_ref("web"))
            .unwrap()
            .revision,
        made
    );

    annotate(
        &stack,
        "web",
        "platform-oncall",
        serde_json::json!({ ADOPT_ANNOTATION: made }),
    )
    .await;
    let web = stack
        .wait_for("web", "adopted with its Secret", |c| {
            c.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Registered)
                    && s.last_adoption.is_some()
                    && s.secret_ref.is_some()
            })
        })
        .await;
    let status = status_of(&web);
    let adoption = status.last_adoption.as_deref().unwrap();
    assert!(adoption.written);
    assert_eq!(adoption.from_revision, made);
    assert_eq!(adoption.secret, AdoptedSecret::Minted);
    assert_eq!(
        adoption.from_actor.as_deref(),
        Some("user:alice@example.com")
    );
    assert_eq!(adoption.requested_by.as_deref(), Some("platform-oncall"));
    assert!(status.observed.is_none());
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes + 1);
    assert_eq!(refused_revisions(&stack), refused);
    let held = stack.server.client(&stack.object_ref("web")).unwrap();
    assert_eq!(held.revision, adoption.revision);
    assert_eq!(
        held.spec.unwrap().post_logout_redirect_uris,
        vec!["https://web.example.test/bye".to_owned()]
    );
    let secret = stack.secret("web").await.expect("the Secret is delivered");
    assert!(secret_value(&secret, "clientSecret").is_some());
    let event = stack.wait_event("web", "Adopted").await;
    for part in [made.as_str(), "user:alice@example.com", "minted"] {
        assert!(
            event.message.contains(part),
            "{part:?} missing from: {}",
            event.message
        );
    }
}
nauthera_tests::e2e_test!(
    a_dashboard_client_is_held_until_adopted_then_written_once_with_a_new_secret
);

async fn adopting_an_identical_client_keeping_its_secret_writes_nothing_until_a_rotation() {
    let stack = Stack::start().await;
    let made = stack
        .dashboard_client("web", |spec| spec.display_name = "web".into())
        .await;
    let writes = stack.server.counters().writes_by(MANAGER);
    let secret_before = stack.server.client_secret_hash(&stack.object_ref("web"));

    // As a manifest in Git carries it: the annotations applied with the manifest.
    let manifest = generated_client_with("web", "Delete", "").replace(
        "  name: web\n",
        &format!(
            "  name: web\n  annotations:\n    {ADOPT_ANNOTATION}: \"{made}\"\n    \
             {ADOPT_SECRET_ANNOTATION}: Keep\n"
        ),
    );
    stack.apply(&manifest).await;
    let web = stack.wait_reason("web", Reason::Registered).await;
    let status = status_of(&web);
    let adoption = status.last_adoption.as_deref().expect("adopted");
    assert!(!adoption.written);
    assert_eq!(adoption.secret, AdoptedSecret::Kept);
    assert_eq!(status.revision.as_deref(), Some(made.as_str()));
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes);
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        secret_before
    );
    stack.wait_event("web", "Adopted").await;
    assert!(stack.secret("web").await.is_none(), "nothing is delivered");

    // A rotation mints one and delivers it.
    annotate(
        &stack,
        "web",
        "platform-oncall",
        serde_json::json!({ ROTATE_ANNOTATION: "first" }),
    )
    .await;
    stack
        .eventually("the rotation delivers a Secret", async || {
            stack.secret("web").await.is_some()
        })
        .await;
    let secret = stack.secret("web").await.unwrap();
    assert!(secret_value(&secret, "clientSecret").is_some());
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes + 1);
    assert_ne!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        secret_before
    );
}
nauthera_tests::e2e_test!(
    adopting_an_identical_client_keeping_its_secret_writes_nothing_until_a_rotation
);

async fn an_adoption_naming_a_stale_revision_is_refused_and_writes_nothing() {
    let stack = Stack::start().await;
    let made = stack
        .dashboard_client("web", |spec| spec.display_name = "web".into())
        .await;
    stack
        .apply(&generated_client_with("web", "Delete", ""))
        .await;
    wait_held(&stack, "web", &made, Cause::ForeignObject).await;
    let writes = stack.server.counters().writes_by(MANAGER);

    // The person changes it again: the status follows through the change feed.
    let changed = stack
        .server
        .edit_client(&stack.object_ref("web"), &dashboard_person(), |spec| {
            spec.scopes.push("email".to_owned());
        })
        .unwrap();
    wait_held(&stack, "web", &changed, Cause::ForeignObject).await;

    annotate(
        &stack,
        "web",
        "platform-oncall",
        serde_json::json!({ ADOPT_ANNOTATION: made }),
    )
    .await;
    let web = wait_held(&stack, "web", &changed, Cause::RevisionMismatch).await;
    let message = status_of(&web).message.clone().unwrap();
    assert!(
        message.contains(&made) && message.contains(&changed),
        "{message}"
    );
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
nauthera_tests::e2e_test!(an_adoption_naming_a_stale_revision_is_refused_and_writes_nothing);
