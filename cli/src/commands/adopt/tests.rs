use super::plan::{AdoptOutcome, SecretPlan, Standing, adoptable, standing};
use super::*;
use crate::cli::kinds::Kind;
use crate::model::view::fixtures::{at, holding, view};
use crate::model::view::{ResourceView, SecretUse};
use crate::output::snapshot::assert_snapshot;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::{AdoptedSecret, ManagedElsewhere};

/// A client made in the dashboard, whose manifest waits for adoption.
fn waiting(name: &str, differences: &[&str]) -> ResourceView {
    let mut client = holding(
        Kind::OidcClient,
        name,
        Reason::AdoptionRequired,
        Cause::ForeignObject,
        differences,
        1_800_000_000,
    );
    client.secret = SecretUse::Generated {
        name: format!("{name}-oidc"),
    };
    client
}

#[test]
fn a_waiting_client_with_a_generated_secret_gets_one_write_and_a_new_secret() {
    let plan = adoptable(&waiting("shop", &[]), false).unwrap();
    assert_eq!(plan.revision, "r4");
    assert_eq!(plan.writer, "user:alice@example.com");
    assert_eq!(
        plan.secret,
        SecretPlan::Mint {
            secret: "shop-oidc".into()
        }
    );
    // Minting the secret is a write even when no field differs.
    assert!(plan.writes);
    assert_eq!(plan.minted_into(), Some("shop-oidc"));
}

#[test]
fn an_identical_object_whose_secret_is_kept_writes_nothing() {
    let plan = adoptable(&waiting("shop", &[]), true).unwrap();
    assert_eq!(
        plan.secret,
        SecretPlan::KeepGenerated {
            secret: "shop-oidc".into()
        }
    );
    assert!(!plan.writes);
    // The manifest's own annotation counts as much as the flag.
    let mut kept = waiting("shop", &[]);
    kept.annotations.insert(
        nauthera_shared::ADOPT_SECRET_ANNOTATION.into(),
        "Keep".into(),
    );
    let plan = adoptable(&kept, false).unwrap();
    assert!(!plan.writes && !plan.set_keep);
    // A field that differs is written, the secret kept or not.
    assert!(
        adoptable(&waiting("shop", &["spec.redirectUris"]), true)
            .unwrap()
            .writes
    );
}

#[test]
fn a_team_secret_is_sent_or_taken_as_in_force() {
    let mut referenced = waiting("reports", &[]);
    referenced.secret = SecretUse::Referenced {
        name: "reports-credentials".into(),
        key: "clientSecret".into(),
    };
    let sent = adoptable(&referenced, false).unwrap();
    assert!(matches!(sent.secret, SecretPlan::Send { .. }) && sent.writes);
    let kept = adoptable(&referenced, true).unwrap();
    assert!(matches!(kept.secret, SecretPlan::KeepReferenced { .. }) && !kept.writes);
    // A branding has no secret: only its fields decide.
    let branding = holding(
        Kind::Branding,
        "look",
        Reason::AdoptionRequired,
        Cause::ForeignObject,
        &[],
        100,
    );
    let plan = adoptable(&branding, false).unwrap();
    assert_eq!(plan.secret, SecretPlan::None);
    assert!(!plan.writes);
}

#[test]
fn each_refusal_says_what_to_do_instead() {
    let observed = holding(
        Kind::OidcClient,
        "shop",
        Reason::Observed,
        Cause::Differs,
        &["spec.scopes"],
        100,
    );
    let refusal = adoptable(&observed, false).unwrap_err();
    assert!(refusal.contains("managementPolicy: Manage"), "{refusal}");
    assert!(refusal.contains("from revision r4"), "{refusal}");

    let mut elsewhere = view(
        Kind::OidcClient,
        "team-a",
        "shop",
        Reason::ManagedElsewhere,
        0,
    );
    elsewhere.status.as_mut().unwrap().managed_elsewhere = Some(Box::new(ManagedElsewhere {
        manager: "nauthera-reconciler/west".into(),
        actor: None,
        revision: "r2".into(),
        generation: 1,
        written_at: None,
    }));
    let refusal = adoptable(&elsewhere, false).unwrap_err();
    assert!(
        refusal.contains("nauthera.io/take-over-from=nauthera-reconciler/west"),
        "{refusal}"
    );

    let registered = view(Kind::OidcClient, "team-a", "shop", Reason::Registered, 0);
    let refusal = adoptable(&registered, false).unwrap_err();
    assert!(refusal.contains("is Registered, not waiting"), "{refusal}");

    let mut fresh = registered.clone();
    fresh.status = None;
    assert!(adoptable(&fresh, false).unwrap_err().contains("no status"));

    let mut deleting = waiting("shop", &[]);
    deleting.deleting = true;
    assert!(
        adoptable(&deleting, false)
            .unwrap_err()
            .contains("being deleted")
    );

    let mut unnamed = waiting("shop", &[]);
    unnamed.status.as_mut().unwrap().observed = None;
    assert!(
        adoptable(&unnamed, false)
            .unwrap_err()
            .contains("names no revision")
    );
}

#[test]
fn the_patch_names_the_revision_shown_on_the_resource_as_shown() {
    let plan = adoptable(&waiting("shop", &[]), false).unwrap();
    assert_eq!(
        plan.patch(),
        serde_json::json!({"metadata": {
            "annotations": {"nauthera.io/adopt": "r4"},
            "resourceVersion": "1001",
        }})
    );
    let plan = adoptable(&waiting("shop", &[]), true).unwrap();
    assert_eq!(
        plan.patch()["metadata"]["annotations"],
        serde_json::json!({"nauthera.io/adopt": "r4", "nauthera.io/adopt-secret": "Keep"})
    );
}

#[test]
fn only_a_status_naming_this_revision_ends_the_wait() {
    let shown = waiting("shop", &["spec.redirectUris"]);
    let plan = adoptable(&shown, false).unwrap();
    let mut client = shown.clone();
    client
        .annotations
        .insert(nauthera_shared::ADOPT_ANNOTATION.into(), "r4".into());
    assert!(matches!(standing(&client, &plan), Standing::Waiting(_)));

    // An earlier adoption of another revision is not this one.
    let record = |from: &str| AdoptionRecord {
        from_revision: from.into(),
        from_actor: Some("user:alice@example.com".into()),
        from_manager: None,
        revision: "r5".into(),
        written: true,
        secret: AdoptedSecret::Minted,
        requested_by: Some("kubectl-nauthera".into()),
        completed_at: Some(Time(at(1_800_000_100))),
    };
    client.status.as_mut().unwrap().last_adoption = Some(Box::new(record("r1")));
    assert!(matches!(standing(&client, &plan), Standing::Waiting(_)));
    client.status.as_mut().unwrap().last_adoption = Some(Box::new(record("r4")));
    let Standing::Done(AdoptOutcome::Adopted, detail, Some(_)) = standing(&client, &plan) else {
        panic!("adopted");
    };
    assert_eq!(
        detail,
        "adopted revision r4 from user:alice@example.com: the declared state was written over \
         it as revision r5; a new client secret was minted and delivered into Secret shop-oidc"
    );

    // The object changed after it was shown: the reconciler names the new revision.
    let mut moved = client.clone();
    let status = moved.status.as_mut().unwrap();
    status.last_adoption = None;
    status.cause = Some(Cause::RevisionMismatch);
    status.observed.as_mut().unwrap().revision = "r6".into();
    let Standing::Done(AdoptOutcome::NotAdopted, detail, None) = standing(&moved, &plan) else {
        panic!("not adopted");
    };
    assert!(detail.contains("server holds revision r6"), "{detail}");
}

#[test]
fn plan_and_result_snapshot() {
    let mut minted = adoptable(&waiting("shop", &["spec.redirectUris"]), false).unwrap();
    minted.readers = vec![Consumer {
        kind: "Deployment".into(),
        name: "shop".into(),
        uses: vec!["env CLIENT_SECRET".into()],
    }];
    let unread = adoptable(&waiting("web", &[]), false).unwrap();
    let kept = adoptable(&waiting("web", &[]), true).unwrap();
    let text = format!(
        "{}---\n{}---\n{}---\n{}---\n{}---\n{}",
        render_plan(&minted, Painter::PLAIN),
        render_plan(&unread, Painter::PLAIN),
        render_plan(&kept, Painter::PLAIN),
        render_result(
            &minted,
            AdoptOutcome::Adopted,
            "adopted revision r4 from user:alice@example.com: the declared state was written \
             over it as revision r5; a new client secret was minted and delivered into Secret \
             shop-oidc",
            Painter::PLAIN
        ),
        render_result(
            &kept,
            AdoptOutcome::Adopted,
            "adopted revision r4 from user:alice@example.com: nothing was written: the manifest \
             declares what the server holds; revision r4 is in force; the client secret the \
             server held was kept (none is delivered until kubectl nauthera rotate)",
            Painter::PLAIN
        ),
        render_result(
            &unread,
            AdoptOutcome::NotAdopted,
            "the object changed after revision r4 was shown: the server holds revision r6 \
             (written by user:bob@example.com); nothing was written; look at it again and run \
             kubectl nauthera adopt oidcclient/web -n team-a once more",
            Painter::PLAIN
        ),
    );
    assert_snapshot("adopt.txt", &text);
}

#[test]
fn the_report_names_no_secret_value_only_where_it_goes() {
    let plan = adoptable(&waiting("shop", &[]), false).unwrap();
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(
        json["secret"],
        serde_json::json!({"action": "mint", "secret": "shop-oidc"})
    );
    assert_eq!(json["writes"], true);
    assert_eq!(json["revision"], "r4");
    assert!(json.get("resourceVersion").is_none());
}
