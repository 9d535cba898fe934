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

/// Runs `diagnose -o json` on one OIDCClient, checks the report against the catalog entry of
/// `reason` and the exit code, and returns standard output.
async fn diagnosed(stack: &Stack, name: &str, reason: Reason, code: i32) -> String {
    let target = format!("oidcclient/{name}");
    let run = stack
        .plugin(&["diagnose", &target, "-n", stack.namespace(), "-o", "json"])
        .await;
    assert_eq!(run.code, code, "{name} ({reason}): {}", run.all());
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let diagnosis = &report["diagnoses"][0];
    assert_eq!(diagnosis["reason"], reason.as_str(), "{diagnosis}");
    assert_eq!(
        diagnosis["steps"].as_array().map(Vec::len),
        Some(reason.entry().runbook.diagnosis.len()),
        "one step per runbook diagnosis step: {diagnosis}"
    );
    run.stdout
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
    let revision = stack
        .dashboard_client("legacy", |spec| {
            spec.display_name = "legacy (dashboard)".into()
        })
        .await;
    stack.apply(&generated_client("legacy")).await;
    let held = stack.wait_reason("legacy", Reason::AdoptionRequired).await;
    let status = status_of(&held);
    assert_eq!(status.cause, Some(Cause::ForeignObject));
    let observed = status.observed.as_deref().expect("status.observed");
    assert_eq!(observed.revision, revision);

    // diagnose runs the runbook's steps and names the command that adopts it.
    let diagnosis = diagnosed(&stack, "legacy", Reason::AdoptionRequired, 1).await;
    assert!(
        diagnosis.contains("kubectl nauthera adopt oidcclient/legacy"),
        "{diagnosis}"
    );

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

    // Counted from here: the other client's registration above is a write of its own.
    let before = stack.server.audit_events().len();
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
    let shown = stack
        .dashboard_client("legacy", |spec| {
            spec.display_name = "legacy (dashboard)".into()
        })
        .await;
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

async fn an_observed_client_is_shown_apart_and_diagnosed_without_a_write() {
    let stack = Stack::start().await;
    let revision = stack
        .dashboard_client("portal", |spec| {
            spec.display_name = "portal (dashboard)".into()
        })
        .await;
    let before = writes_since(&stack, 0);
    stack
        .apply(&generated_client_with(
            "portal",
            "Delete",
            "  managementPolicy: Observe\n",
        ))
        .await;
    let observed = stack.wait_reason("portal", Reason::Observed).await;
    assert_eq!(status_of(&observed).cause, Some(Cause::Differs));
    // The display name differs from the dashboard's: diagnose says so (exit 1), and how to
    // hand it over.
    let diagnosis = diagnosed(&stack, "portal", Reason::Observed, 1).await;
    for expected in [
        format!("the server holds revision {revision}"),
        "spec.displayName".to_owned(),
        "set managementPolicy: Manage".to_owned(),
    ] {
        assert!(diagnosis.contains(&expected), "{expected}: {diagnosis}");
    }
    // adopt refuses it and points at the handover.
    let refused = stack.plugin(&["adopt", "oidcclient/portal", "--yes"]).await;
    assert_eq!(refused.code, 2, "{}", refused.all());
    assert!(
        refused.stderr.contains("managementPolicy: Manage"),
        "{}",
        refused.all()
    );
    // status lists it apart from the managed resources.
    let status = stack.plugin(&["status", "-o", "json"]).await;
    let report: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    let rows = report["observed"].as_array().unwrap();
    assert!(
        rows.iter()
            .any(|row| row["name"] == "portal"
                && row["serverObject"]["revision"] == revision.as_str()),
        "{}",
        status.stdout
    );
    assert!(
        report["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["name"] != "portal")
    );
    assert_eq!(writes_since(&stack, 0), before, "nothing is written");
}
nauthera_tests::e2e_test!(an_observed_client_is_shown_apart_and_diagnosed_without_a_write);
