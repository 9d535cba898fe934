//! `kubectl nauthera adopt`, run through real kubectl on both control planes: a manifest for a
//! client somebody else wrote last is held (`AdoptionRequired`); the plugin refuses what is not
//! waiting for adoption, shows the object and changes nothing on `--dry-run`, then annotates the
//! revision shown and waits until the reconciler took the object over with one write and
//! delivered a new secret.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_fake_server::Actor;
use nauthera_shared::ADOPT_ANNOTATION;
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::AdoptedSecret;
use nauthera_tests::e2e::{
    Stack, generated_client, generated_client_with, secret_value, sha256_hex, status_of,
};

/// A client on the server whose last write was a person's in the dashboard, and no manifest
/// for it: made through a manifest that orphans it, which is then deleted, and edited by hand.
async fn dashboard_client(stack: &Stack, name: &str) -> String {
    stack
        .apply(&generated_client_with(name, "Orphan", ""))
        .await;
    stack.wait_reason(name, Reason::Registered).await;
    stack.delete_oidc_client(name).await;
    stack.wait_gone(name).await;
    stack
        .server
        .edit_client(
            &stack.object_ref(name),
            &Actor::dashboard("alice@example.com").because("made in the dashboard"),
            |spec| spec.display_name = format!("{name} (dashboard)"),
        )
        .unwrap()
}

/// Writes to the server by the reconciler's certificate since the audit event `after`.
fn writes_since(stack: &Stack, after: usize) -> usize {
    stack
        .server
        .audit_events()
        .iter()
        .skip(after)
        .filter(|event| !event.revision.is_empty() && !event.manager.is_empty())
        .count()
}

async fn a_dashboard_client_is_adopted_with_one_write_and_a_new_secret() {
    let stack = Stack::start().await;
    let revision = dashboard_client(&stack, "legacy").await;
    stack.apply(&generated_client("legacy")).await;
    let held = stack.wait_reason("legacy", Reason::AdoptionRequired).await;
    let status = status_of(&held);
    assert_eq!(status.cause, Some(Cause::ForeignObject));
    let observed = status.observed.as_deref().expect("status.observed");
    assert_eq!(observed.revision, revision);
    let before = stack.server.audit_events().len();

    // Not waiting for adoption: refused with exit 2 and a way forward.
    stack.apply(&generated_client("fresh")).await;
    stack.wait_reason("fresh", Reason::Registered).await;
    let refused = stack.plugin(&["adopt", "oidcclient/fresh", "--yes"]).await;
    assert_eq!(refused.code, 2, "{}", refused.all());
    assert!(
        refused.stderr.contains("not waiting for adoption"),
        "{}",
        refused.all()
    );

    // A dry run shows the object and what adoption does, and changes nothing.
    let dry = stack
        .plugin(&["adopt", "oidcclient/legacy", "--dry-run"])
        .await;
    assert_eq!(dry.code, 1, "{}", dry.all());
    for expected in [
        format!("the server holds revision {revision}"),
        "user:alice@example.com".to_owned(),
        "spec.displayName".to_owned(),
        "a new client secret is minted and delivered into Secret legacy".to_owned(),
    ] {
        assert!(dry.stdout.contains(&expected), "{expected}: {}", dry.all());
    }
    let unchanged = stack.wait_reason("legacy", Reason::AdoptionRequired).await;
    assert!(
        unchanged
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(ADOPT_ANNOTATION)),
        "a dry run sets no annotation"
    );

    let run = stack
        .plugin(&["adopt", "oidcclient/legacy", "--yes", "-o", "json"])
        .await;
    assert_eq!(run.code, 0, "{}", run.all());
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["kind"], "AdoptReport");
    assert_eq!(report["outcome"], "adopted");
    assert_eq!(report["request"], revision.as_str());
    assert_eq!(report["adoption"]["fromRevision"], revision.as_str());
    assert_eq!(report["adoption"]["written"], true);

    let adopted = stack.wait_reason("legacy", Reason::Registered).await;
    let status = status_of(&adopted);
    let record = status
        .last_adoption
        .as_deref()
        .expect("status.lastAdoption");
    assert_eq!(record.from_revision, revision);
    assert_eq!(record.secret, AdoptedSecret::Minted);
    assert!(record.written);
    assert!(status.observed.is_none(), "status.observed is cleared");
    assert_eq!(
        writes_since(&stack, before),
        1,
        "one write over the revision adopted"
    );
    let secret = stack
        .secret("legacy")
        .await
        .expect("the Secret is delivered");
    let value = secret_value(&secret, "clientSecret").expect("a client secret");
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("legacy")),
        Some(sha256_hex(value.as_bytes())),
        "the delivered secret is the one the server accepts"
    );
    assert!(!run.all().contains(&value), "no secret in the output");
}
nauthera_tests::e2e_test!(a_dashboard_client_is_adopted_with_one_write_and_a_new_secret);

async fn a_status_shown_before_a_change_is_never_adopted_blindly() {
    let stack = Stack::start().await;
    let shown = dashboard_client(&stack, "legacy").await;
    stack.apply(&generated_client("legacy")).await;
    stack.wait_reason("legacy", Reason::AdoptionRequired).await;
    // Somebody changes the object after it was shown: an adoption naming the old revision
    // writes nothing and says so.
    let moved = stack
        .server
        .edit_client(
            &stack.object_ref("legacy"),
            &Actor::dashboard("bob@example.com").because("another edit"),
            |spec| spec.display_name = "changed again".to_owned(),
        )
        .unwrap();
    assert_ne!(moved, shown);
    let patch = serde_json::json!({ "metadata": { "annotations": { ADOPT_ANNOTATION: shown } } });
    stack
        .oidc_clients()
        .patch(
            "legacy",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let mismatch = stack
        .wait_for("legacy", "revision_mismatch", |client| {
            status_of(client).cause == Some(Cause::RevisionMismatch)
        })
        .await;
    assert_eq!(
        status_of(&mismatch)
            .observed
            .as_deref()
            .map(|o| o.revision.clone()),
        Some(moved.clone())
    );
    // The plugin adopts the revision the status shows now.
    let run = stack
        .plugin(&["adopt", "oidcclient/legacy", "--yes", "--keep-secret"])
        .await;
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(
        run.stdout.contains(&format!("adopted revision {moved}")),
        "{}",
        run.all()
    );
    let adopted = stack.wait_reason("legacy", Reason::Registered).await;
    assert_eq!(
        status_of(&adopted)
            .last_adoption
            .as_deref()
            .map(|r| r.secret),
        Some(AdoptedSecret::Kept)
    );
}
nauthera_tests::e2e_test!(a_status_shown_before_a_change_is_never_adopted_blindly);
