//! A drift kept by putting it in the manifest: a new generation compares each field the drift
//! changed with what it now declares. Fields it keeps are adopted (a Normal `DriftAdopted`
//! event), fields it overrides are discarded (a Warning `DriftSuperseded` event naming them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_fake_server::Actor;
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::Branding;
use nauthera_tests::e2e::{EventSeen, ISSUER, Stack};

fn branding(primary: &str, title: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: sign-in
spec:
  issuer: {ISSUER}
  branding:
    colors:
      primary: \"{primary}\"
    texts:
      title: {title}
"
    )
}

async fn drift(stack: &Stack, primary: &str, title: &str) {
    stack
        .server
        .edit_branding(
            &stack.object_ref("sign-in"),
            &Actor::dashboard("bob@example.com"),
            |document| {
                document.colors.insert("primary".into(), primary.into());
                document.texts.insert("title".into(), title.into());
            },
        )
        .unwrap();
    stack
        .wait_reason_of::<Branding>("sign-in", Reason::Drifted)
        .await;
}

async fn events(stack: &Stack, reason: &str) -> Vec<EventSeen> {
    stack
        .events_for("Branding", "sign-in")
        .await
        .into_iter()
        .filter(|e| e.reason == reason)
        .collect()
}

async fn generation_registered(stack: &Stack, generation: i64) -> Branding {
    stack
        .wait_for_kind::<Branding>("sign-in", "the new generation registered", |b| {
            b.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Registered) && s.generation_in_force == Some(generation)
            })
        })
        .await
}

async fn a_drift_put_in_the_manifest_is_adopted_and_only_what_it_overrides_is_discarded() {
    let stack = Stack::start().await;
    stack.apply(&branding("#112233", "Welcome")).await;
    stack
        .wait_reason_of::<Branding>("sign-in", Reason::Registered)
        .await;

    // Everything the drift changed is put in the manifest: kept, no Warning.
    drift(&stack, "#ff0000", "Hello").await;
    stack.apply(&branding("#ff0000", "Hello")).await;
    let kept = generation_registered(&stack, 2).await;
    let status = kept.status.unwrap();
    assert_eq!(status.cause, Some(Cause::DriftKept));
    let last = status.last_drift.unwrap();
    assert_eq!(last.discarded(), Vec::<&str>::new(), "{last:?}");
    assert!(
        last.kept
            .iter()
            .any(|f| f == "spec.branding.colors.primary"),
        "{last:?}"
    );
    stack
        .eventually("a DriftAdopted event", async || {
            !events(&stack, "DriftAdopted").await.is_empty()
        })
        .await;
    let adopted = events(&stack, "DriftAdopted").await.remove(0);
    assert_eq!(adopted.type_, "Normal");
    for part in [
        "user:bob@example.com",
        "spec.branding.colors.primary",
        "kept",
    ] {
        assert!(
            adopted.message.contains(part),
            "{part}: {}",
            adopted.message
        );
    }
    assert!(
        events(&stack, "DriftSuperseded").await.is_empty(),
        "nothing was discarded"
    );
    let run = stack.plugin(&["status", "branding", "-o", "json"]).await;
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let resource = &report["resources"][0];
    assert_eq!(
        resource["lastDrift"]["kept"][0], "spec.branding.colors.primary",
        "{resource}"
    );
    let table = stack.plugin(&["status", "branding"]).await;
    assert!(
        table
            .stdout
            .contains("generation 2 adopted a change by user:bob@example.com")
            && !table.stdout.contains("discarded a change"),
        "{}",
        table.all()
    );

    // Half of it kept: the other half is named as discarded, and only it.
    drift(&stack, "#00ff00", "Howdy").await;
    stack.apply(&branding("#00ff00", "Welcome back")).await;
    let mixed = generation_registered(&stack, 3).await;
    let last = mixed.status.unwrap().last_drift.unwrap();
    assert_eq!(
        last.discarded(),
        vec!["spec.branding.texts.title"],
        "{last:?}"
    );
    stack
        .eventually("a DriftSuperseded event", async || {
            !events(&stack, "DriftSuperseded").await.is_empty()
        })
        .await;
    let superseded = events(&stack, "DriftSuperseded").await.remove(0);
    assert_eq!(superseded.type_, "Warning");
    assert!(
        superseded
            .message
            .contains("discarded: spec.branding.texts.title")
            && !superseded.message.contains("colors.primary"),
        "{}",
        superseded.message
    );
}
nauthera_tests::e2e_test!(
    a_drift_put_in_the_manifest_is_adopted_and_only_what_it_overrides_is_discarded
);
