//! Adoption with plain values: when a resource is held, what adopting writes, and the verdicts.

use nauthera_shared::catalog::{Cause, EventReason, Reason};
use nauthera_shared::resources::{
    AdoptSecret, AdoptedSecret, LocalRef, ResourceStatus, ServerObject,
};

use super::super::tests::{at, observed as facts_of, violation};
use super::super::{
    Applied, DriftUpdate, SecretMode, SecretState, ServerView, Step, Update, next_step,
    status_after,
};
use super::*;

const COMMAND: &str = "kubectl nauthera adopt oidcclient/web -n team-a";

fn foreign(revision: &str, differences: &[&str]) -> ServerObject {
    ServerObject {
        revision: revision.into(),
        client_id: Some("cid-1".into()),
        manager: Some("dashboard".into()),
        actor: Some("user:alice@example.com".into()),
        differences: differences.iter().map(|d| (*d).to_owned()).collect(),
        ..ServerObject::default()
    }
}

fn held_status(object: ServerObject) -> ResourceStatus {
    status_after(None, &adoption_required(object, COMMAND), 1, at(0)).unwrap()
}

fn request(revision: &str, secret: Result<AdoptSecret, String>) -> AdoptRequest {
    AdoptRequest {
        revision: revision.into(),
        secret,
        requested_by: Some("kubectl-nauthera".into()),
    }
}

fn generate() -> SecretMode {
    SecretMode::Generate {
        secret_name: "web".into(),
    }
}

#[test]
fn a_foreign_object_is_held_naming_writer_revision_and_the_command() {
    let verdict = adoption_required(foreign("r4", &["spec.scopes"]), COMMAND);
    assert_eq!(verdict.reason, Reason::AdoptionRequired);
    assert_eq!(verdict.cause, Cause::ForeignObject);
    for part in [
        "revision r4",
        "user:alice@example.com (manager dashboard)",
        "spec.scopes",
        COMMAND,
        "nauthera.io/adopt=r4",
    ] {
        assert!(verdict.message.contains(part), "{}", verdict.message);
    }
    assert_eq!(verdict.fields.revision, None);
    assert!(matches!(verdict.fields.observed, Update::Set(_)));
}

#[test]
fn held_for_adoption_waits_reads_again_when_moved_and_creates_when_gone() {
    let status = held_status(foreign("r4", &[]));
    let mut facts = facts_of(Some(&status));
    facts.server = ServerView::Holds {
        revision: "r4".into(),
    };
    assert_eq!(next_step(&facts), Step::Wait { after: None });
    // A new generation is not written over it: only looked at again.
    facts.generation = 2;
    assert_eq!(next_step(&facts), Step::LookBeforeCreate);
    facts.generation = 1;
    facts.server = ServerView::Holds {
        revision: "r5".into(),
    };
    assert_eq!(next_step(&facts), Step::LookBeforeCreate);
    facts.server = ServerView::Absent;
    assert_eq!(
        next_step(&facts),
        Step::Apply {
            if_revision: None,
            rotate: None,
            restore: false
        }
    );
}

#[test]
fn the_adopt_annotation_adopts_the_revision_shown_and_refuses_any_other() {
    let status = held_status(foreign("r4", &[]));
    let mut facts = facts_of(Some(&status));
    facts.adopt_request = Some(request("r4", Ok(AdoptSecret::Keep)));
    assert_eq!(
        next_step(&facts),
        Step::Adopt {
            revision: "r4".into(),
            secret: AdoptSecret::Keep,
            handover: false
        }
    );
    facts.adopt_request = Some(request("r3", Ok(AdoptSecret::Replace)));
    assert_eq!(
        next_step(&facts),
        Step::RefuseAdoption {
            refusal: AdoptRefusal::Mismatch { named: "r3".into() }
        }
    );
    facts.adopt_request = Some(request("r4", Err("Maybe".into())));
    assert_eq!(
        next_step(&facts),
        Step::RefuseAdoption {
            refusal: AdoptRefusal::SecretChoice {
                value: "Maybe".into()
            }
        }
    );
    // A ClientPolicy holds an adoption as it holds a write.
    facts.adopt_request = Some(request("r4", Ok(AdoptSecret::Keep)));
    facts.policy = crate::reconcile::decide::PolicyGate::Violation(violation(
        nauthera_shared::policy::Rule::GrantTypes,
    ));
    assert_eq!(next_step(&facts), Step::HoldByPolicy);
}

#[test]
fn a_refusal_names_both_revisions_and_writes_nothing() {
    let verdict = adoption_refused(
        foreign("r5", &[]),
        &AdoptRefusal::Mismatch { named: "r4".into() },
        COMMAND,
    );
    assert_eq!(verdict.reason, Reason::AdoptionRequired);
    assert_eq!(verdict.cause, Cause::RevisionMismatch);
    assert!(
        verdict.message.contains("names revision r4"),
        "{}",
        verdict.message
    );
    assert!(
        verdict.message.contains("holds revision r5"),
        "{}",
        verdict.message
    );
    assert_eq!(verdict.fields.revision, None);
}

#[test]
fn a_deleted_manifest_held_for_adoption_leaves_the_object_alone() {
    let status = held_status(foreign("r4", &[]));
    let mut facts = facts_of(Some(&status));
    facts.deleting = true;
    facts.server = ServerView::Holds {
        revision: "r4".into(),
    };
    assert_eq!(
        next_step(&facts),
        Step::Release {
            reason: Reason::Deleted
        }
    );
}

#[test]
fn what_an_adoption_writes_follows_the_differences_and_the_secret_choice() {
    let plan = |differs, mode: &SecretMode, secret| {
        let plan = adoption_plan(differs, mode, secret);
        (plan.write, plan.rotate, plan.send_provided, plan.secret)
    };
    use AdoptSecret::{Keep, Replace};
    let none = SecretMode::None;
    let provided = SecretMode::Provided;
    assert_eq!(
        plan(false, &none, Replace),
        (false, false, false, AdoptedSecret::None)
    );
    assert_eq!(
        plan(true, &none, Keep),
        (true, false, false, AdoptedSecret::None)
    );
    assert_eq!(
        plan(false, &generate(), Replace),
        (true, true, false, AdoptedSecret::Minted)
    );
    assert_eq!(
        plan(false, &generate(), Keep),
        (false, false, false, AdoptedSecret::Kept)
    );
    assert_eq!(
        plan(true, &generate(), Keep),
        (true, false, false, AdoptedSecret::Kept)
    );
    assert_eq!(
        plan(false, &provided, Replace),
        (true, false, true, AdoptedSecret::Provided)
    );
    assert_eq!(
        plan(false, &provided, Keep),
        (false, false, false, AdoptedSecret::Kept)
    );
}

#[test]
fn adopted_in_place_is_registered_with_its_record_and_event() {
    let object = foreign("r4", &[]);
    let record = adoption_record(
        &object,
        AdoptedSecret::Kept,
        Some("kubectl-nauthera".into()),
    );
    let held = Applied {
        client_id: "cid-1".into(),
        revision: "r4".into(),
        generation_in_force: 0,
        created: false,
    };
    let verdict = adopted_in_place(&held, 3, &object, record);
    assert_eq!(verdict.reason, Reason::Registered);
    assert_eq!(verdict.fields.revision.as_deref(), Some("r4"));
    assert_eq!(verdict.fields.generation_in_force, Some(3));
    assert_eq!(verdict.fields.observed, Update::Clear);
    let adoption = verdict.fields.last_adoption.as_ref().unwrap();
    assert!(!adoption.written);
    assert_eq!(adoption.from_revision, "r4");
    assert_eq!(adoption.revision, "r4");
    assert_eq!(
        adoption.from_actor.as_deref(),
        Some("user:alice@example.com")
    );
    assert_eq!(adoption.requested_by.as_deref(), Some("kubectl-nauthera"));
    let event = verdict
        .events
        .iter()
        .find(|e| e.reason == EventReason::Adopted)
        .unwrap();
    for part in [
        "revision r4",
        "user:alice@example.com",
        "nothing was written",
        "kept",
    ] {
        assert!(event.note.contains(part), "{}", event.note);
    }

    // In the status: observed cleared, the record kept with its time.
    let before = held_status(object);
    let status = status_after(Some(&before), &verdict, 3, at(7)).unwrap();
    assert!(status.observed.is_none());
    assert_eq!(status.revision.as_deref(), Some("r4"));
    assert_eq!(
        status
            .last_adoption
            .as_deref()
            .unwrap()
            .completed_at
            .as_ref()
            .map(|t| t.0),
        Some(at(7))
    );
}

#[test]
fn a_written_adoption_records_the_new_revision_and_a_failed_one_records_nothing() {
    let object = foreign("r4", &["spec.scopes"]);
    let record = adoption_record(&object, AdoptedSecret::Minted, Some("alice".into()));
    let mut written = Verdict::new(Reason::Registered, Cause::None, "in force".into());
    written.fields.revision = Some("r5".into());
    let verdict = with_adoption(written, &object, record.clone());
    let adoption = verdict.fields.last_adoption.as_ref().unwrap();
    assert!(adoption.written);
    assert_eq!(adoption.revision, "r5");
    let note = &verdict.events.last().unwrap().note;
    assert!(note.contains("written over it as revision r5"), "{note}");
    assert!(note.contains("minted"), "{note}");

    let refused = Verdict::new(Reason::Refused, Cause::None, "no".into());
    let verdict = with_adoption(refused, &object, record);
    assert!(verdict.fields.last_adoption.is_none());
    assert!(verdict.events.is_empty());
}

#[test]
fn an_observed_object_is_handed_over_at_the_revision_shown_keeping_its_secret() {
    let shown = foreign("r4", &[]);
    let status = status_after(
        None,
        &crate::reconcile::decide::observed(shown.clone()),
        1,
        at(0),
    )
    .unwrap();
    let mut facts = facts_of(Some(&status));
    assert_eq!(
        next_step(&facts),
        Step::Adopt {
            revision: "r4".into(),
            secret: AdoptSecret::Keep,
            handover: true
        }
    );
    // Observed as absent: created as any new manifest.
    let absent = status_after(
        None,
        &crate::reconcile::decide::observed(ServerObject {
            absent: true,
            ..ServerObject::default()
        }),
        1,
        at(0),
    )
    .unwrap();
    facts.status = Some(&absent);
    facts.server = ServerView::Absent;
    assert_eq!(
        next_step(&facts),
        Step::Apply {
            if_revision: None,
            rotate: None,
            restore: false
        }
    );

    // The server moved on since: reported as a drift naming the new revision and its writer.
    let now_held = ServerObject {
        actor: Some("user:bob@example.com".into()),
        ..foreign("r6", &["spec.redirectUris"])
    };
    let verdict = handover_overtaken(&shown, &now_held);
    assert_eq!(verdict.reason, Reason::Drifted);
    assert!(
        verdict.message.contains("revision r4"),
        "{}",
        verdict.message
    );
    assert!(
        verdict.message.contains("revision r6"),
        "{}",
        verdict.message
    );
    assert!(
        verdict.message.contains("user:bob@example.com"),
        "{}",
        verdict.message
    );
    assert!(matches!(verdict.fields.drift, DriftUpdate::Set(_)));
    assert_eq!(verdict.fields.revision, None);
}

#[test]
fn a_kept_secret_is_not_minted_for_an_absent_secret_but_a_rotation_request_mints_one() {
    let object = foreign("r4", &[]);
    let held = Applied {
        client_id: "cid-1".into(),
        revision: "r4".into(),
        generation_in_force: 0,
        created: false,
    };
    let record = adoption_record(&object, AdoptedSecret::Kept, None);
    let verdict = adopted_in_place(&held, 1, &object, record);
    let status = status_after(None, &verdict, 1, at(0)).unwrap();
    let mut facts = facts_of(Some(&status));
    facts.secret_mode = generate();
    facts.secret_state = SecretState::Absent;
    facts.server = ServerView::Holds {
        revision: "r4".into(),
    };
    assert_eq!(next_step(&facts), Step::Wait { after: None });

    facts.rotation_request = Some(crate::reconcile::decide::RotationRequest {
        request: "now".into(),
        requested_by: Some("alice".into()),
        requested_at: None,
    });
    assert!(matches!(
        next_step(&facts),
        Step::Apply {
            rotate: Some(crate::reconcile::decide::Rotation::Requested { .. }),
            ..
        }
    ));

    // Once a Secret was delivered, the usual rule: a deleted one is minted again.
    let mut delivered = status.clone();
    delivered.secret_ref = Some(LocalRef { name: "web".into() });
    let mut facts = facts_of(Some(&delivered));
    facts.secret_mode = generate();
    facts.secret_state = SecretState::Absent;
    assert!(matches!(
        next_step(&facts),
        Step::Apply {
            rotate: Some(crate::reconcile::decide::Rotation::Deleted),
            ..
        }
    ));
}

#[test]
fn another_reconcilers_object_keeps_its_own_path_whatever_the_adopt_annotation_says() {
    let elsewhere = nauthera_shared::resources::ManagedElsewhere {
        manager: "nauthera-reconciler/east".into(),
        revision: "r4".into(),
        generation: 3,
        ..Default::default()
    };
    let verdict = crate::reconcile::decide::managed_elsewhere(&elsewhere, None, true);
    let status = status_after(None, &verdict, 1, at(0)).unwrap();
    let mut facts = facts_of(Some(&status));
    facts.server = ServerView::Holds {
        revision: "r4".into(),
    };
    facts.adopt_request = Some(request("r4", Ok(AdoptSecret::Replace)));
    assert_eq!(next_step(&facts), Step::Wait { after: None });
    facts.take_over_from = Some("nauthera-reconciler/east".into());
    assert!(matches!(next_step(&facts), Step::TakeOver { .. }));
}

#[test]
fn an_adoption_mints_only_into_a_secret_that_can_take_it() {
    let status = held_status(foreign("r4", &[]));
    let mut facts = facts_of(Some(&status));
    facts.secret_mode = generate();
    facts.adopt_request = Some(request("r4", Ok(AdoptSecret::Replace)));
    let adopt = Step::Adopt {
        revision: "r4".into(),
        secret: AdoptSecret::Replace,
        handover: false,
    };
    facts.secret_state = SecretState::Unknown;
    assert_eq!(next_step(&facts), Step::ReadSecret);
    facts.secret_state = SecretState::Absent;
    assert_eq!(next_step(&facts), adopt);
    // Another owner's Secret, one released by an earlier manifest, or one that may not be read:
    // nothing is minted, so the server's secret stays what its users hold.
    for (state, owner, forbidden) in [
        (
            SecretState::Foreign {
                owner: Some("ConfigMap/other".into()),
            },
            Some("ConfigMap/other".to_owned()),
            false,
        ),
        (
            SecretState::Released {
                client_id: "cid-1".into(),
            },
            None,
            false,
        ),
        (SecretState::Forbidden, None, true),
    ] {
        facts.secret_state = state;
        assert_eq!(
            next_step(&facts),
            Step::RefuseAdoption {
                refusal: AdoptRefusal::SecretUnavailable {
                    secret: "web".into(),
                    owner,
                    forbidden,
                }
            }
        );
    }
    // Keeping the server's secret mints nothing, whatever the Secret holds.
    facts.adopt_request = Some(request("r4", Ok(AdoptSecret::Keep)));
    assert!(matches!(next_step(&facts), Step::Adopt { .. }));
    // A manifest that looks first, asking to adopt and mint, reads its Secret before the look.
    let mut fresh = facts_of(None);
    fresh.has_finalizer = true;
    fresh.secret_mode = generate();
    fresh.server = ServerView::Holds {
        revision: "r4".into(),
    };
    fresh.adopt_request = Some(request("r4", Ok(AdoptSecret::Replace)));
    fresh.secret_state = SecretState::Unknown;
    assert_eq!(next_step(&fresh), Step::ReadSecret);
    fresh.secret_state = SecretState::Absent;
    assert_eq!(next_step(&fresh), Step::LookBeforeCreate);

    let refused = adoption_refused(
        foreign("r4", &[]),
        &AdoptRefusal::SecretUnavailable {
            secret: "web".into(),
            owner: None,
            forbidden: false,
        },
        COMMAND,
    );
    assert_eq!(refused.reason, Reason::AdoptionRequired);
    assert_eq!(refused.cause, Cause::ForeignSecret);
    assert!(
        refused.message.contains("Secret web") && refused.message.contains("Keep"),
        "{}",
        refused.message
    );
    assert_eq!(refused.fields.revision, None);
}
