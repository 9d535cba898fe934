use super::*;
use crate::model::view::fixtures::{at, drifted, view};
use crate::output::snapshot::assert_snapshot;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::RotationRecord;

fn generated(name: &str) -> ResourceView {
    let mut client = view(Kind::OidcClient, "team-a", name, Reason::Registered, 0);
    client.secret = SecretUse::Generated {
        name: format!("{name}-oidc"),
    };
    client
}

#[test]
fn only_a_generated_secret_is_rotated_here_and_each_refusal_says_what_to_do() {
    assert_eq!(rotatable(&generated("web")), Ok("web-oidc".to_owned()));

    let mut referenced = generated("reports");
    referenced.secret = SecretUse::Referenced {
        name: "reports-credentials".into(),
        key: "clientSecret".into(),
    };
    let refusal = rotatable(&referenced).unwrap_err();
    assert!(refusal.contains("spec.secret.secretRef"), "{refusal}");
    assert!(refusal.contains("Secret reports-credentials"), "{refusal}");

    let public = view(Kind::OidcClient, "team-a", "spa", Reason::Registered, 0);
    assert!(rotatable(&public).unwrap_err().contains("no client secret"));

    let mut moved = drifted("team-a", "billing", 1_800_000_000);
    moved.secret = SecretUse::Generated {
        name: "billing".into(),
    };
    let refusal = rotatable(&moved).unwrap_err();
    assert!(
        refusal.contains("kubectl nauthera restore oidcclient/billing -n team-a"),
        "{refusal}"
    );
}

#[test]
fn an_observed_client_or_one_waiting_for_adoption_is_not_rotated() {
    use crate::model::view::fixtures::holding;
    use nauthera_shared::catalog::Cause;
    for (reason, cause, expected) in [
        (
            Reason::Observed,
            Cause::Identical,
            "managementPolicy: Manage",
        ),
        (
            Reason::AdoptionRequired,
            Cause::ForeignObject,
            "kubectl nauthera adopt oidcclient/web -n team-a",
        ),
    ] {
        let mut client = holding(Kind::OidcClient, "web", reason, cause, &[], 1_800_000_000);
        client.secret = SecretUse::Generated { name: "web".into() };
        let refusal = rotatable(&client).unwrap_err();
        assert!(refusal.contains(expected), "{refusal}");
    }
}

#[test]
fn only_the_status_naming_this_request_ends_the_wait() {
    let mut client = generated("web");
    let record = |request: &str, outcome| RotationRecord {
        request: Some(request.to_owned()),
        requested_by: Some("kubectl-nauthera".into()),
        outcome,
        time: Some(Time(at(1_800_000_000))),
    };
    client.status.as_mut().unwrap().last_rotation =
        Some(Box::new(record("rotate-1", Carried::Requested)));
    assert!(matches!(
        standing(&client, "rotate-2", "web-oidc"),
        Standing::Waiting(_)
    ));
    client.status.as_mut().unwrap().last_rotation =
        Some(Box::new(record("rotate-2", Carried::Requested)));
    assert!(matches!(
        standing(&client, "rotate-2", "web-oidc"),
        Standing::Done(RotateOutcome::Rotated, _)
    ));
    client.status.as_mut().unwrap().last_rotation =
        Some(Box::new(record("rotate-2", Carried::NotGenerated)));
    assert!(matches!(
        standing(&client, "rotate-2", "web-oidc"),
        Standing::Done(RotateOutcome::NotRotated, _)
    ));
}

#[test]
fn the_patch_sets_only_the_annotation() {
    assert_eq!(
        rotate_patch("rotate-1"),
        serde_json::json!({"metadata": {"annotations": {"nauthera.io/rotate": "rotate-1"}}})
    );
}

#[test]
fn plan_and_result_snapshot() {
    let read = RotatePlan {
        namespace: "team-a".into(),
        name: "web".into(),
        secret: "web-oidc".into(),
        secret_age_seconds: Some(90 * 86_400),
        readers: vec![Consumer {
            kind: "Deployment".into(),
            name: "web".into(),
            uses: vec!["env CLIENT_SECRET".into()],
        }],
    };
    let unread = RotatePlan {
        readers: Vec::new(),
        secret_age_seconds: None,
        ..read.clone()
    };
    let text = format!(
        "{}---\n{}---\n{}---\n{}",
        render_plan(&read, Painter::PLAIN),
        render_plan(&unread, Painter::PLAIN),
        render_result(
            &read,
            RotateOutcome::Rotated,
            "a new client secret is in Secret web-oidc; the server no longer accepts the one before",
            Painter::PLAIN
        ),
        render_result(
            &unread,
            RotateOutcome::TimedOut,
            "not rotated within 2m: reason Registered, annotation present",
            Painter::PLAIN
        ),
    );
    assert_snapshot("rotate.txt", &text);
}
