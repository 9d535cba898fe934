//! Drift end to end: an edit, a delete and a backup restore on the server are reported
//! (`Drifted`, naming the server's revision, who changed it and which fields differ) and never
//! written over; the restore annotation writes the declared state back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use nauthera_fake_server::Actor;
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::RESTORE_ANNOTATION;
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::resources::OIDCClient;
use nauthera_tests::e2e::{
    MANAGER, POLL_INTERVAL_SECONDS, Stack, generated_client, secret_value, sha256_hex, status_of,
};

fn alice() -> Actor {
    Actor::dashboard("alice@example.com").because("emergency redirect")
}

async fn an_edit_on_the_server_is_reported_not_written_over_and_restored_on_request() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    let registered = stack.wait_reason("web", Reason::Registered).await;
    let written = status_of(&registered).revision.clone().unwrap();

    let held = stack
        .server
        .edit_client(&stack.object_ref("web"), &alice(), |spec| {
            spec.redirect_uris
                .push("https://elsewhere.example.test/callback".to_owned());
        })
        .unwrap();
    let web = stack.wait_reason("web", Reason::Drifted).await;
    let status = status_of(&web);
    assert_eq!(status.phase, Some(Phase::Error));
    let drift = status.drift.as_ref().expect("status.drift is set");
    assert_eq!(drift.server_revision, held);
    assert!(!drift.removed);
    assert_eq!(drift.actor.as_deref(), Some("user:alice@example.com"));
    assert!(drift.changed_at.is_some());
    assert!(
        drift.fields.iter().any(|f| f.contains("redirectUris")),
        "{:?}",
        drift.fields
    );
    let message = status.message.as_deref().unwrap();
    for part in [
        held.as_str(),
        written.as_str(),
        "user:alice@example.com",
        "redirectUris",
        RESTORE_ANNOTATION,
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    let event = stack.wait_event("web", "Drifted").await;
    assert_eq!(event.type_, "Warning");
    stack
        .reconciler()
        .wait_metric(
            "nauthera_operator_resources",
            &[("reason", "drifted")],
            |drifted| drifted == 1.0,
        )
        .await;

    // Nothing is written over: a few poll intervals later the server still holds the edit.
    let writes = stack.server.counters().writes_by(MANAGER);
    tokio::time::sleep(Duration::from_secs(3 * POLL_INTERVAL_SECONDS + 1)).await;
    assert_eq!(stack.server.counters().writes_by(MANAGER), writes);
    assert_eq!(
        stack
            .server
            .client(&stack.object_ref("web"))
            .unwrap()
            .revision,
        held
    );

    // Restore on request.
    stack.annotate_restore("web").await;
    let restored = stack
        .wait_for("web", "restored and registered", |c| {
            let s = c.status.as_ref();
            s.and_then(|s| s.phase) == Some(Phase::Registered)
                && s.is_some_and(|s| s.drift.is_none())
                && !c
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(RESTORE_ANNOTATION))
        })
        .await;
    let event = stack.wait_event("web", "Restored").await;
    assert_eq!(event.type_, "Normal");
    let server = stack.server.client(&stack.object_ref("web")).unwrap();
    assert_eq!(
        server.spec.unwrap().redirect_uris,
        vec!["https://web.example.test/callback".to_owned()],
        "the declared state is back"
    );
    assert_eq!(
        status_of(&restored).revision.as_deref(),
        Some(server.revision.as_str())
    );
}
nauthera_tests::e2e_test!(
    an_edit_on_the_server_is_reported_not_written_over_and_restored_on_request
);

async fn a_removed_client_is_reported_and_a_restore_delivers_a_new_secret() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    let registered = stack.wait_reason("web", Reason::Registered).await;
    let old_id = status_of(&registered).client_id.clone().unwrap();
    let old_secret = secret_value(&stack.secret("web").await.unwrap(), "clientSecret").unwrap();

    stack
        .server
        .delete_object(ObjectKind::Client, &stack.object_ref("web"), &alice())
        .unwrap();
    let web = stack.wait_reason("web", Reason::Drifted).await;
    let drift = status_of(&web).drift.clone().unwrap();
    assert!(drift.removed, "{drift:?}");
    let message = status_of(&web).message.clone().unwrap();
    assert!(message.contains("removed"), "{message}");
    assert!(
        stack.server.client(&stack.object_ref("web")).is_none(),
        "not recreated on its own"
    );

    stack
        .annotate_restore_as::<OIDCClient>("web", "restore-desk")
        .await;
    stack.wait_event("web", "Restored").await;
    let restored = stack
        .wait_for("web", "registered again", |c| {
            c.status.as_ref().and_then(|s| s.phase) == Some(Phase::Registered)
        })
        .await;
    // Who asked is recorded, and the new client id is told as loudly as the new secret.
    let record = status_of(&restored).last_restore.clone().unwrap();
    assert_eq!(
        record.requested_by.as_deref(),
        Some("restore-desk"),
        "{record:?}"
    );
    let new_id = status_of(&restored).client_id.clone().unwrap();
    assert_ne!(
        new_id, old_id,
        "the server gave the recreated client a new id"
    );
    // Events are recorded after the status this waited for.
    stack.wait_event("web", "ClientIdChanged").await;
    stack.wait_event("web", "Restored").await;
    let events = stack.events_for("OIDCClient", "web").await;
    let changed = events
        .iter()
        .find(|e| e.reason == "ClientIdChanged")
        .unwrap_or_else(|| panic!("no ClientIdChanged event: {events:#?}"));
    assert!(
        changed.type_ == "Warning"
            && changed.message.contains(&new_id)
            && changed.message.contains(&old_id),
        "{changed:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.reason == "Restored" && e.message.contains("requested by restore-desk")),
        "{events:#?}"
    );
    let secret = stack.secret("web").await.unwrap();
    let new_secret = secret_value(&secret, "clientSecret").unwrap();
    assert_ne!(
        new_secret, old_secret,
        "a recreated client has a new secret"
    );
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        Some(sha256_hex(new_secret.as_bytes())),
        "the Secret holds the recreated client's secret"
    );
    let held = stack.server.client(&stack.object_ref("web")).unwrap();
    assert_eq!(
        secret_value(&secret, "clientId").as_deref(),
        Some(held.client_id.as_str())
    );
}
nauthera_tests::e2e_test!(a_removed_client_is_reported_and_a_restore_delivers_a_new_secret);

async fn a_backup_restore_on_the_server_drifts_many_at_once() {
    let stack = Stack::start().await;
    for name in ["one", "two", "three"] {
        stack.apply(&generated_client(name)).await;
    }
    for name in ["one", "two", "three"] {
        stack.wait_reason(name, Reason::Registered).await;
    }
    let backup = stack.server.backup();
    // New generations after the backup, so the restore brings back older revisions.
    for name in ["one", "two", "three"] {
        stack
            .apply(&generated_client(name).replace(
                &format!("displayName: {name}"),
                &format!("displayName: {name} v2"),
            ))
            .await;
    }
    for name in ["one", "two", "three"] {
        stack
            .wait_for(name, "registered at generation 2", |c| {
                nauthera_tests::e2e::is_registered(c) && c.metadata.generation == Some(2)
            })
            .await;
    }
    let writes = stack.server.counters().writes_by(MANAGER);
    let changed = stack.server.restore(
        &backup,
        &Actor::dashboard("dba@example.com").because("restore from backup"),
    );
    assert!(changed >= 3);
    for name in ["one", "two", "three"] {
        let client = stack.wait_reason(name, Reason::Drifted).await;
        let message = status_of(&client).message.clone().unwrap();
        assert!(
            message.contains("restore from a backup"),
            "{name}: {message}"
        );
        assert!(
            status_of(&client)
                .drift
                .as_ref()
                .unwrap()
                .fields
                .iter()
                .any(|f| f.contains("displayName")),
            "{name}: {:?}",
            status_of(&client).drift
        );
    }
    stack
        .reconciler()
        .wait_metric(
            "nauthera_operator_reconciles_total",
            &[
                ("reason", Reason::Drifted.metric_label()),
                ("cause", "backup_restore"),
            ],
            |restores| restores >= 3.0,
        )
        .await;
    let metric = stack
        .reconciler()
        .metric(
            "nauthera_operator_resources",
            &[("kind", "OIDCClient"), ("reason", "drifted")],
        )
        .await;
    assert_eq!(metric, 3.0, "many drifted at once shows in the metrics");
    assert_eq!(
        stack.server.counters().writes_by(MANAGER),
        writes,
        "nothing written over"
    );
    // The plugin calls it what it likely is: a restore, not a person.
    let run = stack.plugin(&["status", "-o", "json"]).await;
    assert_eq!(run.code, 1, "{}", run.all());
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["summary"]["drift"]["count"], 3, "{report}");
    assert_eq!(
        report["summary"]["drift"]["verdict"], "serverRestore",
        "{}",
        report["summary"]
    );
}
nauthera_tests::e2e_test!(a_backup_restore_on_the_server_drifts_many_at_once);

/// The reconciler's reconcile count once it has stopped moving (no reconcile for half a second).
async fn settled_reconciles(stack: &Stack) -> f64 {
    const COUNT: &str = "nauthera_operator_reconcile_duration_seconds_count";
    let mut last = stack.reconciler().metric(COUNT, &[]).await;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = stack.reconciler().metric(COUNT, &[]).await;
        if now == last {
            return now;
        }
        last = now;
    }
}

async fn an_edit_on_the_server_reconciles_only_the_client_it_names() {
    let stack = Stack::start().await;
    let names = ["web", "api", "admin-ui", "billing", "reports", "mobile"];
    for name in names {
        stack.apply(&generated_client(name)).await;
    }
    for name in names {
        stack.wait_reason(name, Reason::Registered).await;
    }
    let before = tokio::time::timeout(Duration::from_secs(60), settled_reconciles(&stack))
        .await
        .expect("the reconciler goes quiet once every client is registered");

    stack
        .server
        .edit_client(&stack.object_ref("api"), &alice(), |spec| {
            spec.display_name.push_str(" (edited)");
        })
        .unwrap();
    stack.wait_reason("api", Reason::Drifted).await;
    let after = tokio::time::timeout(Duration::from_secs(60), settled_reconciles(&stack))
        .await
        .expect("the reconciler goes quiet after the drift");

    // The change routed to `api`, and the echo of its own status write: never the other five.
    let caused = after - before;
    assert!(
        (1.0..=2.0).contains(&caused),
        "one edit caused {caused} reconciles with {} clients",
        names.len()
    );
    for name in names.iter().filter(|n| **n != "api") {
        let client = stack.oidc_client(name).await.unwrap();
        assert_eq!(
            status_of(&client).reason,
            Some(Reason::Registered),
            "{name}"
        );
    }
}
nauthera_tests::e2e_test!(an_edit_on_the_server_reconciles_only_the_client_it_names);

async fn a_second_drift_by_another_person_is_a_new_event_with_its_own_note() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;

    let alices = stack
        .server
        .edit_client(&stack.object_ref("web"), &alice(), |spec| {
            spec.display_name.push_str(" (alice)");
        })
        .unwrap();
    stack.wait_reason("web", Reason::Drifted).await;
    stack.wait_event("web", "Drifted").await;

    stack.annotate_restore("web").await;
    stack.wait_event("web", "Restored").await;
    stack
        .wait_for("web", "restored and registered", |c| {
            c.status.as_ref().and_then(|s| s.phase) == Some(Phase::Registered)
        })
        .await;

    let bob = Actor::dashboard("bob@example.com").because("rename");
    let bobs = stack
        .server
        .edit_client(&stack.object_ref("web"), &bob, |spec| {
            spec.display_name.push_str(" (bob)");
        })
        .unwrap();
    stack.wait_reason("web", Reason::Drifted).await;

    // Both facts are on the object: bob's drift did not fold into alice's event.
    let mut drifts = Vec::new();
    stack
        .eventually("two Drifted events", async || {
            drifts = stack
                .events_for("OIDCClient", "web")
                .await
                .into_iter()
                .filter(|e| e.reason == "Drifted")
                .collect();
            drifts.len() >= 2
        })
        .await;
    assert_eq!(drifts.len(), 2, "{drifts:#?}");
    let by = |actor: &str, revision: &str| {
        drifts
            .iter()
            .filter(|e| e.message.contains(actor) && e.message.contains(revision))
            .count()
    };
    assert_eq!(by("user:alice@example.com", &alices), 1, "{drifts:#?}");
    assert_eq!(by("user:bob@example.com", &bobs), 1, "{drifts:#?}");
    assert!(drifts.iter().all(|e| e.type_ == "Warning"), "{drifts:#?}");
}
nauthera_tests::e2e_test!(a_second_drift_by_another_person_is_a_new_event_with_its_own_note);

/// Three people change three clients within seconds of each other: three separate changes by
/// the people named, never "a restore", which only a new server history or the audit log's
/// restore cause means.
async fn edits_by_several_people_at_once_are_not_called_a_restore() {
    let stack = Stack::start().await;
    let names = ["one", "two", "three"];
    for name in names {
        stack.apply(&generated_client(name)).await;
    }
    for name in names {
        stack.wait_reason(name, Reason::Registered).await;
    }
    for (name, person) in names.iter().zip(["alice", "bob", "carol"]) {
        let actor = Actor::dashboard(&format!("{person}@example.com"))
            .because("restored the old display name from my notes");
        stack
            .server
            .edit_client(&stack.object_ref(name), &actor, |spec| {
                spec.display_name.push_str(" (edited)");
            })
            .unwrap();
    }
    for name in names {
        stack.wait_reason(name, Reason::Drifted).await;
        let client = stack.oidc_client(name).await.unwrap();
        assert_eq!(
            status_of(&client).cause,
            Some(nauthera_shared::catalog::Cause::Edited),
            "{name}: {:?}",
            status_of(&client)
        );
    }
    let run = stack.plugin(&["status", "-o", "json"]).await;
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let drift = &report["summary"]["drift"];
    assert_eq!(drift["verdict"], "separateChanges", "{drift}");
    assert_eq!(drift["byRestore"], 0, "{drift}");
    assert_eq!(
        drift["actors"],
        serde_json::json!([
            "user:alice@example.com",
            "user:bob@example.com",
            "user:carol@example.com"
        ]),
        "{drift}"
    );
    let table = stack.plugin(&["status"]).await;
    assert!(
        !table.stdout.contains("restore of the server"),
        "{}",
        table.stdout
    );
}
nauthera_tests::e2e_test!(edits_by_several_people_at_once_are_not_called_a_restore);

/// A manifest edit while drifted is written over the person's change, as the Drifted runbook
/// says, and never silently: a Warning event and `status.lastDrift` name who made the discarded
/// change, its fields and both revisions; `status` and `diagnose` show it.
async fn a_new_generation_over_a_drift_says_what_it_discards() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    let held = stack
        .server
        .edit_client(&stack.object_ref("web"), &alice(), |spec| {
            spec.redirect_uris
                .push("https://elsewhere.example.test/callback".to_owned());
        })
        .unwrap();
    stack.wait_reason("web", Reason::Drifted).await;

    stack
        .apply(&generated_client("web").replace("displayName: web", "displayName: Web shop"))
        .await;
    let web = stack
        .wait_for("web", "registered at generation 2", |c| {
            nauthera_tests::e2e::is_registered(c) && c.metadata.generation == Some(2)
        })
        .await;
    let status = status_of(&web);
    let last = status.last_drift.as_ref().expect("status.lastDrift is set");
    assert_eq!(last.drift.server_revision, held);
    assert_eq!(last.drift.actor.as_deref(), Some("user:alice@example.com"));
    assert!(
        last.drift.fields.iter().any(|f| f.contains("redirectUris")),
        "{last:?}"
    );
    assert_eq!(last.generation, 2);
    assert_eq!(Some(&last.revision), status.revision.as_ref());
    assert!(last.superseded_at.is_some());

    let event = stack.wait_event("web", "DriftSuperseded").await;
    assert_eq!(event.type_, "Warning");
    for part in [
        "user:alice@example.com",
        held.as_str(),
        last.revision.as_str(),
        "spec.redirectUris",
    ] {
        assert!(
            event.message.contains(part),
            "{part:?} missing: {}",
            event.message
        );
    }

    let shown = stack.plugin(&["status"]).await;
    assert!(
        shown
            .stdout
            .contains("discarded a change by user:alice@example.com"),
        "{}",
        shown.all()
    );
    let diagnosed = stack.plugin(&["diagnose", "oidcclient/web"]).await;
    assert!(
        diagnosed
            .stdout
            .contains("generation 2 discarded a change by user:alice@example.com"),
        "{}",
        diagnosed.all()
    );
}
nauthera_tests::e2e_test!(a_new_generation_over_a_drift_says_what_it_discards);
