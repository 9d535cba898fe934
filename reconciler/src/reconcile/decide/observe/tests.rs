//! Observe-only resources with plain values: the step, the verdict and the status.

use nauthera_shared::catalog::{Cause, Phase, Reason};
use nauthera_shared::resources::{ResourceStatus, ServerObject};

use super::super::tests::{at, observed as observing, registered, violation};
use super::super::{ServerView, Step, next_step, status_after};
use super::observed;

fn dashboard_object(revision: &str, differences: &[&str]) -> ServerObject {
    ServerObject {
        revision: revision.into(),
        client_id: Some("cid-1".into()),
        manager: Some("dashboard".into()),
        actor: Some("user:alice@example.com".into()),
        differences: differences.iter().map(|d| (*d).to_owned()).collect(),
        ..ServerObject::default()
    }
}

fn observed_status(object: ServerObject) -> ResourceStatus {
    status_after(None, &observed(object), 1, at(0)).unwrap()
}

#[test]
fn the_verdict_names_revision_writer_and_differences_and_sets_nothing_written() {
    let verdict = observed(dashboard_object("r4", &["spec.redirectUris"]));
    assert_eq!(verdict.reason, Reason::Observed);
    assert_eq!(verdict.cause, Cause::Differs);
    for part in [
        "revision r4",
        "user:alice@example.com (manager dashboard)",
        "spec.redirectUris",
        "nothing is written",
    ] {
        assert!(verdict.message.contains(part), "{}", verdict.message);
    }
    assert_eq!(verdict.fields.revision, None);
    assert_eq!(verdict.fields.generation_in_force, None);

    assert_eq!(
        observed(dashboard_object("r4", &[])).cause,
        Cause::Identical
    );
    let absent = observed(ServerObject {
        absent: true,
        ..ServerObject::default()
    });
    assert_eq!(absent.cause, Cause::NotOnServer);
    assert!(absent.message.contains("no object of this name"));
}

#[test]
fn the_status_of_an_observed_resource_holds_the_object_and_no_revision_of_its_own() {
    // Managed before (revision and generation in force), then observed: what this resource
    // wrote no longer says what holds.
    let before = registered(1, "r1");
    let status = status_after(
        Some(&before),
        &observed(dashboard_object("r2", &[])),
        2,
        at(5),
    )
    .unwrap();
    assert_eq!(status.reason, Some(Reason::Observed));
    assert_eq!(status.phase, Some(Phase::Observed));
    assert_eq!(status.revision, None);
    assert_eq!(status.generation_in_force, None);
    let shown = status.observed.as_deref().unwrap();
    assert_eq!(shown.revision, "r2");
    assert_eq!(shown.observed_at.as_ref().map(|t| t.0), Some(at(5)));

    // Read again unchanged: nothing to write.
    assert_eq!(
        status_after(
            Some(&status),
            &observed(dashboard_object("r2", &[])),
            2,
            at(9)
        ),
        None
    );
    // Moved: the time it was read moves with it.
    let moved = status_after(
        Some(&status),
        &observed(dashboard_object("r3", &[])),
        2,
        at(9),
    )
    .unwrap();
    assert_eq!(
        moved
            .observed
            .as_deref()
            .unwrap()
            .observed_at
            .as_ref()
            .map(|t| t.0),
        Some(at(9))
    );
}

#[test]
fn an_observed_resource_drops_its_finalizer_and_reads_only_when_the_server_moved() {
    let mut facts = observing(None);
    facts.observes = true;
    assert_eq!(next_step(&facts), Step::RemoveFinalizer);
    facts.has_finalizer = false;
    // Nothing read yet.
    assert_eq!(next_step(&facts), Step::Observe);

    let status = observed_status(dashboard_object("r4", &[]));
    let mut facts = observing(Some(&status));
    facts.observes = true;
    facts.has_finalizer = false;
    for (server, step) in [
        (ServerView::Unknown, Step::Wait { after: None }),
        (
            ServerView::Holds {
                revision: "r4".into(),
            },
            Step::Wait { after: None },
        ),
        (
            ServerView::Holds {
                revision: "r5".into(),
            },
            Step::Observe,
        ),
        (ServerView::Absent, Step::Observe),
        (ServerView::Unchecked, Step::Observe),
    ] {
        facts.server = server.clone();
        assert_eq!(next_step(&facts), step, "{server:?}");
    }
    // A new generation compares another manifest: read again.
    facts.server = ServerView::Unknown;
    facts.generation = 2;
    assert_eq!(next_step(&facts), Step::Observe);
}

#[test]
fn an_observed_resource_never_writes_even_when_deleted_or_held_by_policy() {
    let status = observed_status(dashboard_object("r4", &["spec.scopes"]));
    let mut facts = observing(Some(&status));
    facts.observes = true;
    facts.has_finalizer = false;
    facts.deleting = true;
    assert_eq!(next_step(&facts), Step::Wait { after: None });
    facts.deleting = false;
    facts.restore_requested = true;
    facts.generation = 2;
    facts.policy = crate::reconcile::decide::PolicyGate::Violation(violation(
        nauthera_shared::policy::Rule::GrantTypes,
    ));
    // Nothing is sent, so no policy holds it: the new generation is only compared.
    assert_eq!(next_step(&facts), Step::Observe);
}

#[test]
fn a_failed_read_is_read_again() {
    let status = ResourceStatus {
        reason: Some(Reason::Unreachable),
        observed_generation: Some(1),
        observed: Some(Box::new(dashboard_object("r4", &[]))),
        ..ResourceStatus::default()
    };
    let mut facts = observing(Some(&status));
    facts.observes = true;
    facts.has_finalizer = false;
    assert_eq!(next_step(&facts), Step::Observe);
}
