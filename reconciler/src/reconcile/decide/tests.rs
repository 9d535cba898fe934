//! Plain-value tests of the decisions: no clock, no server, no Kubernetes.

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nauthera_client::{CallError, ConnectError, ConnectProblem, ServerError};
use nauthera_proto::tonic_types::{ErrorDetails, StatusExt};
use nauthera_proto::v1::{ErrorReason, ObjectKind};
use nauthera_shared::catalog::{Cause, EventReason, Phase, Reason};
use nauthera_shared::resources::{DeletionPolicy, Drift, ResourceStatus};
use tonic::Code;

use super::outcome::{AdoptedFrom, failure_verdict, in_force, printable, restore_told};
use super::provided::secret_value_sent;
use super::*;

pub(super) fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

pub(super) fn registered(generation: i64, revision: &str) -> ResourceStatus {
    let verdict = in_force(generation, revision, false);
    let mut status = status_after(None, &verdict, generation, at(0)).unwrap();
    status.revision = Some(revision.into());
    status.generation_in_force = Some(generation);
    status.client_id = Some("cid".into());
    status
}

pub(super) fn observed(status: Option<&ResourceStatus>) -> Observed<'_> {
    Observed {
        generation: 1,
        deleting: false,
        has_finalizer: true,
        deletion_finished: false,
        restore_requested: false,
        rotation_request: None,
        delivered_request: None,
        scheduled: None,
        take_over_from: None,
        observes: false,
        adopt_request: None,
        deletion_policy: DeletionPolicy::Delete,
        status,
        secret_mode: SecretMode::None,
        secret_pending: false,
        unrecorded_secrets: Vec::new(),
        secret_state: SecretState::NotApplicable,
        provided_secret_changed: false,
        server: ServerView::Unknown,
        retry_not_before: None,
        prerequisites: Standing::default(),
        policy: PolicyGate::Open,
        now: at(100),
    }
}

fn apply(if_revision: Option<&str>) -> Step {
    Step::Apply {
        if_revision: if_revision.map(str::to_owned),
        rotate: None,
        restore: false,
    }
}

fn server_error(code: Code, reason: Option<&str>, metadata: &[(&str, &str)]) -> ServerError {
    let status = match reason {
        Some(reason) => {
            let mut details = ErrorDetails::with_error_info(
                reason,
                nauthera_proto::ERROR_DOMAIN,
                metadata
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<HashMap<_, _>>(),
            );
            if code == Code::InvalidArgument {
                details.add_bad_request_violation(
                    "spec.redirect_uris[0]",
                    "redirect URI must use https",
                );
            }
            tonic::Status::with_error_details(code, "refused", details)
        }
        None => tonic::Status::new(code, "it failed"),
    };
    ServerError::from_status(&status)
}

#[test]
fn the_server_holds_another_revision_only_when_it_names_one() {
    let holds = |revision: &str| ServerView::Holds {
        revision: revision.to_owned(),
    };
    assert!(holds("r2").holds_other_than(Some("r1")));
    assert!(holds("r2").holds_other_than(None));
    assert!(!holds("r1").holds_other_than(Some("r1")));
    for view in [
        ServerView::Unknown,
        ServerView::Absent,
        ServerView::Unchecked,
    ] {
        assert!(!view.holds_other_than(Some("r1")), "{view:?}");
    }
}

#[test]
fn only_steps_that_write_pass_the_write_gate() {
    for step in [
        Step::AddFinalizer,
        apply(Some("r1")),
        Step::DeliverSecret,
        Step::Delete {
            if_revision: "r1".into(),
        },
        Step::Release {
            reason: Reason::Orphaned,
        },
        Step::LookBeforeCreate,
        Step::LetGo,
    ] {
        assert!(step.writes(), "{}", step.label());
    }
    for step in [
        Step::ReadSecret,
        Step::CheckDrift,
        Step::HoldByPolicy,
        Step::ReportSecretForbidden,
        Step::Wait { after: None },
    ] {
        assert!(!step.writes(), "{}", step.label());
    }
}

#[test]
fn the_next_step_follows_the_resource() {
    let in_force_1 = registered(1, "r1");
    let mut in_force_after_failed_check = registered(1, "r1");
    in_force_after_failed_check.reason = Some(Reason::Pending);
    in_force_after_failed_check.phase = Some(Phase::Pending);
    let mut restored_1 = registered(1, "r1");
    restored_1.reason = Some(Reason::Restored);
    let mut drifted_status = registered(1, "r1");
    drifted_status.drift = Some(Box::new(Drift {
        server_revision: "r9".into(),
        ..Drift::default()
    }));
    let mut removed_status = registered(1, "r1");
    removed_status.drift = Some(Box::new(Drift {
        removed: true,
        ..Drift::default()
    }));

    type Case<'a> = (&'a str, Box<dyn Fn(&mut Observed<'a>) + 'a>, Step);
    let cases: Vec<Case> = vec![
        (
            "a new resource first gets the finalizer",
            Box::new(|o| o.has_finalizer = false),
            Step::AddFinalizer,
        ),
        (
            "a new resource is created only where nothing is held",
            Box::new(|_| {}),
            apply(None),
        ),
        (
            "a new generation names the revision last written",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.generation = 2;
            }),
            apply(Some("r1")),
        ),
        (
            "the steady state does nothing",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.server = ServerView::Holds {
                    revision: "r1".into(),
                };
            }),
            Step::Wait { after: None },
        ),
        (
            "a check that failed and was retried is made again, though the listing agrees",
            Box::new(|o| {
                o.status = Some(&in_force_after_failed_check);
                o.server = ServerView::Holds {
                    revision: "r1".into(),
                };
            }),
            Step::CheckDrift,
        ),
        (
            "a restore in force is settled: nothing is checked",
            Box::new(|o| {
                o.status = Some(&restored_1);
                o.server = ServerView::Holds {
                    revision: "r1".into(),
                };
            }),
            Step::Wait { after: None },
        ),
        (
            "a listing with another revision is checked",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.server = ServerView::Holds {
                    revision: "r2".into(),
                };
            }),
            Step::CheckDrift,
        ),
        (
            "a listing without the object is checked",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.server = ServerView::Absent;
            }),
            Step::CheckDrift,
        ),
        (
            "a drift is not written over",
            Box::new(|o| o.status = Some(&drifted_status)),
            Step::Wait { after: None },
        ),
        (
            "a drift that moved on is looked at again",
            Box::new(|o| {
                o.status = Some(&drifted_status);
                o.server = ServerView::Holds {
                    revision: "r10".into(),
                };
            }),
            Step::CheckDrift,
        ),
        (
            "a drift that is undone is looked at again",
            Box::new(|o| {
                o.status = Some(&drifted_status);
                o.server = ServerView::Holds {
                    revision: "r1".into(),
                };
            }),
            Step::CheckDrift,
        ),
        (
            "a drifted object that is then removed is looked at again",
            Box::new(|o| {
                o.status = Some(&drifted_status);
                o.server = ServerView::Absent;
            }),
            Step::CheckDrift,
        ),
        (
            "a drift the listing still shows waits for a person",
            Box::new(|o| {
                o.status = Some(&drifted_status);
                o.server = ServerView::Holds {
                    revision: "r9".into(),
                };
            }),
            Step::Wait { after: None },
        ),
        (
            "a removal the listing still shows waits for a person",
            Box::new(|o| {
                o.status = Some(&removed_status);
                o.server = ServerView::Absent;
            }),
            Step::Wait { after: None },
        ),
        (
            "a restore writes over the revision the server holds",
            Box::new(|o| {
                o.status = Some(&drifted_status);
                o.restore_requested = true;
            }),
            Step::Apply {
                if_revision: Some("r9".into()),
                rotate: None,
                restore: true,
            },
        ),
        (
            "a restore of a removed object creates it again",
            Box::new(|o| {
                o.status = Some(&removed_status);
                o.restore_requested = true;
            }),
            Step::Apply {
                if_revision: None,
                rotate: None,
                restore: true,
            },
        ),
        (
            "an edit of a drifted manifest is written over the server's revision",
            Box::new(|o| {
                o.status = Some(&drifted_status);
                o.generation = 2;
            }),
            apply(Some("r9")),
        ),
        (
            "a restore with nothing drifted only clears the annotation",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.restore_requested = true;
            }),
            Step::ClearRestoreAnnotation,
        ),
        (
            "a minted secret in memory is delivered first",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.secret_pending = true;
            }),
            Step::DeliverSecret,
        ),
        (
            "a generated secret lost with a restart is minted again",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.secret_mode = SecretMode::Generate {
                    secret_name: "app".into(),
                };
                o.secret_state = SecretState::Absent;
            }),
            Step::Apply {
                if_revision: Some("r1".into()),
                rotate: Some(Rotation::NeverDelivered),
                restore: false,
            },
        ),
        (
            "the Secret of a generated secret is read only once the client is in force",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.secret_mode = SecretMode::Generate {
                    secret_name: "app".into(),
                };
                o.secret_state = SecretState::Unknown;
            }),
            Step::ReadSecret,
        ),
        (
            "a new client with a generated secret is written without reading its Secret",
            Box::new(|o| {
                o.secret_mode = SecretMode::Generate {
                    secret_name: "app".into(),
                };
                o.secret_state = SecretState::Unknown;
            }),
            apply(None),
        ),
        (
            "a changed secret the team holds is sent again",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.secret_mode = SecretMode::Provided;
                o.provided_secret_changed = true;
            }),
            apply(Some("r1")),
        ),
        (
            "a foreign Secret is not a reason to mint again",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.secret_mode = SecretMode::Generate {
                    secret_name: "app".into(),
                };
                o.secret_state = SecretState::Foreign { owner: None };
            }),
            Step::Wait { after: None },
        ),
        (
            "a retried failure waits out its backoff",
            Box::new(|o| o.retry_not_before = Some(at(130))),
            Step::Wait {
                after: Some(Duration::from_secs(30)),
            },
        ),
        (
            "a backoff that has passed does not hold anything up",
            Box::new(|o| o.retry_not_before = Some(at(50))),
            apply(None),
        ),
        (
            "deletion with Delete names the revision last written",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.deleting = true;
            }),
            Step::Delete {
                if_revision: "r1".into(),
            },
        ),
        (
            "deletion with Orphan leaves the object",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.deleting = true;
                o.deletion_policy = DeletionPolicy::Orphan;
            }),
            Step::Release {
                reason: Reason::Orphaned,
            },
        ),
        (
            "deletion of a drifted object leaves it in place",
            Box::new(|o| {
                o.status = Some(&drifted_status);
                o.deleting = true;
            }),
            Step::Release {
                reason: Reason::DeletionSkippedDrifted,
            },
        ),
        (
            "deletion of something the listing says the server does not hold deletes nothing",
            Box::new(|o| {
                o.deleting = true;
                o.server = ServerView::Absent;
            }),
            Step::Release {
                reason: Reason::Deleted,
            },
        ),
        (
            "deletion with no write recorded looks first when the server holds the object",
            Box::new(|o| {
                o.deleting = true;
                o.server = ServerView::Holds {
                    revision: "r1".into(),
                };
            }),
            Step::LookBeforeRelease,
        ),
        (
            "deletion with no write recorded looks first when the kind is not listed",
            Box::new(|o| {
                o.deleting = true;
                o.server = ServerView::Unchecked;
            }),
            Step::LookBeforeRelease,
        ),
        (
            "deletion with no write recorded looks first when there is no listing yet",
            Box::new(|o| o.deleting = true),
            Step::LookBeforeRelease,
        ),
        (
            "deletion with Orphan and no write recorded lets go without a look",
            Box::new(|o| {
                o.deleting = true;
                o.server = ServerView::Unchecked;
                o.deletion_policy = DeletionPolicy::Orphan;
            }),
            Step::Release {
                reason: Reason::Orphaned,
            },
        ),
        (
            "deletion when the listing holds another revision looks first",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.deleting = true;
                o.server = ServerView::Holds {
                    revision: "r5".into(),
                };
            }),
            Step::CheckDrift,
        ),
        (
            "a deletion this reconciler finished is not sent again from a stale cache",
            Box::new(|o| {
                o.status = Some(&in_force_1);
                o.deleting = true;
                o.deletion_finished = true;
            }),
            Step::Wait { after: None },
        ),
        (
            "deletion without the finalizer is not ours to do",
            Box::new(|o| {
                o.deleting = true;
                o.has_finalizer = false;
            }),
            Step::Wait { after: None },
        ),
    ];
    for (name, change, expected) in cases {
        let mut o = observed(None);
        change(&mut o);
        assert_eq!(next_step(&o), expected, "{name}");
    }
}

#[test]
fn every_rotation_says_why_and_a_secret_left_with_a_dead_value_is_removed() {
    let mut delivered = registered(1, "r1");
    delivered.secret_ref = Some(nauthera_shared::resources::LocalRef { name: "app".into() });
    let generate = |name: &str| SecretMode::Generate {
        secret_name: name.into(),
    };
    let renamed = || Rotation::Renamed { from: "app".into() };
    type Change<'a> = Box<dyn Fn(&mut Observed<'a>) + 'a>;
    let cases: Vec<(&str, Change<'_>, Step)> = vec![
        (
            "a deleted Secret is a rotation of a delivered secret",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.secret_mode = generate("app");
                o.secret_state = SecretState::Absent;
            }),
            Step::Apply {
                if_revision: Some("r1".into()),
                rotate: Some(Rotation::Deleted),
                restore: false,
            },
        ),
        (
            "an emptied Secret is one too",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.secret_mode = generate("app");
                o.secret_state = SecretState::Owned { has_value: false };
            }),
            Step::Apply {
                if_revision: Some("r1".into()),
                rotate: Some(Rotation::Emptied),
                restore: false,
            },
        ),
        (
            "a new Secret name is read before the write that rotates into it",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.generation = 2;
                o.secret_mode = generate("app-v2");
                o.secret_state = SecretState::Unknown;
            }),
            Step::ReadSecret,
        ),
        (
            "a free new Secret name rotates with the generation's write",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.generation = 2;
                o.secret_mode = generate("app-v2");
                o.secret_state = SecretState::Absent;
            }),
            Step::Apply {
                if_revision: Some("r1".into()),
                rotate: Some(renamed()),
                restore: false,
            },
        ),
        (
            "a new Secret name somebody else holds mints nothing",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.generation = 2;
                o.secret_mode = generate("app-v2");
                o.secret_state = SecretState::Foreign {
                    owner: Some("Deployment/x".into()),
                };
            }),
            Step::ReportSecretNameTaken {
                owner: Some("Deployment/x".into()),
            },
        ),
        (
            "a renamed Secret in force but not yet delivered is rotated into",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.secret_mode = generate("app-v2");
                o.secret_state = SecretState::Absent;
            }),
            Step::Apply {
                if_revision: Some("r1".into()),
                rotate: Some(renamed()),
                restore: false,
            },
        ),
        (
            "once the new Secret holds the secret, the old one is removed",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.secret_mode = generate("app-v2");
                o.secret_state = SecretState::Owned { has_value: true };
            }),
            Step::RemoveStaleSecret { name: "app".into() },
        ),
        (
            "a manifest that no longer generates a secret removes the Secret it had",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.secret_mode = SecretMode::Provided;
            }),
            Step::RemoveStaleSecret { name: "app".into() },
        ),
        (
            "but not before its new generation is in force",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.generation = 2;
                o.secret_mode = SecretMode::Provided;
            }),
            apply(Some("r1")),
        ),
        (
            "the Secret in force and delivered is left alone",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.secret_mode = generate("app");
                o.secret_state = SecretState::Owned { has_value: true };
            }),
            Step::Wait { after: None },
        ),
        (
            "a Secret in another shape than the template declares is rewritten, nothing minted",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.secret_mode = generate("app");
                o.secret_state = SecretState::OtherShape;
            }),
            Step::ReshapeSecret,
        ),
        (
            "a new template is written to the server first (its generation), then reshaped",
            Box::new(|o| {
                o.status = Some(&delivered);
                o.generation = 2;
                o.secret_mode = generate("app");
                o.secret_state = SecretState::OtherShape;
            }),
            apply(Some("r1")),
        ),
    ];
    for (name, change, expected) in cases {
        let mut o = observed(None);
        change(&mut o);
        assert_eq!(next_step(&o), expected, "{name}");
    }
}

#[test]
fn a_rotation_event_names_the_secret_its_readers_and_how_to_restart_them() {
    use nauthera_shared::workloads::Consumer;
    let applied = Applied {
        client_id: "cid".into(),
        revision: "r2".into(),
        generation_in_force: 1,
        created: false,
    };
    let web = Consumer {
        kind: "Deployment".into(),
        name: "web".into(),
        uses: vec!["volume creds".into()],
    };
    let delivered = after_apply(
        &applied,
        Some("app"),
        Some(Ok(())),
        false,
        Some(&Rotation::Deleted),
    );
    let verdict = rotated(
        delivered.clone(),
        &Rotation::Deleted,
        "app",
        "team-a",
        &Readers::Found(vec![web.clone()]),
        None,
    );
    let event = verdict
        .events
        .iter()
        .find(|e| e.reason == EventReason::SecretRotated)
        .expect("a SecretRotated event");
    assert!(
        event.note.starts_with("Secret app was deleted"),
        "{}",
        event.note
    );
    assert!(
        event
            .note
            .contains("read by Deployment/web: restart them (kubectl -n team-a rollout restart deployment/web)"),
        "{}",
        event.note
    );
    assert!(
        !verdict
            .events
            .iter()
            .any(|e| e.reason == EventReason::SecretDelivered),
        "the rotation replaces the delivery event"
    );

    // A secret nobody held is a delivery, and says why it was minted again.
    let never = after_apply(
        &applied,
        Some("app"),
        Some(Ok(())),
        false,
        Some(&Rotation::NeverDelivered),
    );
    let never = rotated(
        never,
        &Rotation::NeverDelivered,
        "app",
        "team-a",
        &Readers::Found(Vec::new()),
        None,
    );
    assert!(
        never.events.iter().any(
            |e| e.reason == EventReason::SecretDelivered && e.note.contains("lost undelivered")
        )
    );

    // A rename names the old Secret's fate and who still reads it.
    let renamed = Rotation::Renamed { from: "app".into() };
    let verdict = rotated(
        delivered.clone(),
        &renamed,
        "app-v2",
        "team-a",
        &Readers::Unlisted("listing deployments is forbidden".into()),
        Some((&Readers::Found(vec![web]), &StaleRemoval::Removed)),
    );
    let note = &verdict
        .events
        .iter()
        .find(|e| e.reason == EventReason::SecretRotated)
        .unwrap()
        .note;
    assert!(
        note.contains("moved from Secret app to Secret app-v2"),
        "{note}"
    );
    assert!(
        note.contains("could not be listed (listing deployments is forbidden)"),
        "{note}"
    );
    assert!(
        note.contains("Secret app, which held the one before, was removed"),
        "{note}"
    );
    assert!(
        note.contains("Deployment/web still read Secret app"),
        "{note}"
    );

    // A removal that failed keeps the old name in the status, so it is tried again.
    let failed = StaleRemoval::Failed {
        forbidden: true,
        message: "forbidden".into(),
    };
    let kept = with_stale_removal(delivered.clone(), "app", &failed, Some("app-v2"));
    assert_eq!(kept.fields.secret_ref, Update::Keep);
    assert!(kept.keep_trying);
    assert!(
        kept.message
            .contains("grant the reconciler delete on secrets"),
        "{}",
        kept.message
    );
    let done = with_stale_removal(delivered, "app", &StaleRemoval::Removed, None);
    assert_eq!(done.fields.secret_ref, Update::Clear);
    let status = status_after(None, &done, 1, at(5)).unwrap();
    assert_eq!(status.secret_ref, None);
}

#[test]
fn a_delivery_records_when_the_secret_was_set() {
    let applied = Applied {
        client_id: "cid".into(),
        revision: "r1".into(),
        generation_in_force: 1,
        created: true,
    };
    let delivered = after_apply(&applied, Some("app"), Some(Ok(())), false, None);
    let status = status_after(None, &delivered, 1, at(7)).unwrap();
    assert_eq!(status.secret_set_time, Some(Time(at(7))));
    let undelivered = after_apply(
        &applied,
        Some("app"),
        Some(Err(SecretWriteFailure::Other {
            message: "timeout".into(),
        })),
        false,
        None,
    );
    let status = status_after(None, &undelivered, 1, at(7)).unwrap();
    assert_eq!(status.secret_set_time, None);
}

#[test]
fn a_refusal_is_sent_again_on_the_next_edit_or_after_five_minutes() {
    let error = CallError::Server(server_error(
        Code::InvalidArgument,
        Some("INVALID_FIELD"),
        &[("cause", "redirect URI must use https")],
    ));
    let verdict = after_apply_failure(&error, "ApplyClient");
    let refused = status_after(None, &verdict, 1, at(0)).unwrap();
    assert_eq!(refused.phase, Some(Phase::Error));

    let mut o = observed(Some(&refused));
    o.now = at(60);
    assert_eq!(
        next_step(&o),
        Step::Wait {
            after: Some(Duration::from_secs(240))
        }
    );
    o.now = at(300);
    assert_eq!(next_step(&o), apply(None));
    o.now = at(60);
    o.generation = 2;
    assert_eq!(next_step(&o), apply(None));
}

#[test]
fn a_missing_reference_is_sent_again_once_a_manifest_it_depends_on_registers() {
    let error = CallError::Server(server_error(
        Code::FailedPrecondition,
        Some("REFERENCE_NOT_FOUND"),
        &[("reference", "portal")],
    ));
    let verdict = after_apply_failure(&error, "ApplyClient");
    assert_eq!(verdict.cause, Cause::ReferenceNotFound);
    assert!(
        verdict
            .message
            .contains("sent again as soon as a manifest it depends on registers"),
        "{}",
        verdict.message
    );
    let refused = status_after(None, &verdict, 1, at(0)).unwrap();
    let mut o = observed(Some(&refused));
    o.now = at(60);
    // Registered before the refusal: the refusal stands.
    o.prerequisites.ready_at = Some(at(-10));
    assert!(matches!(next_step(&o), Step::Wait { after: Some(_) }));
    // Registered since: sent again now.
    o.prerequisites.ready_at = Some(at(30));
    assert_eq!(next_step(&o), apply(None));
    // Registered in the same second as the refusal (status times are whole seconds): it may
    // have come after, so sent again.
    o.prerequisites.ready_at = Some(at(0));
    assert_eq!(next_step(&o), apply(None));
}

#[test]
fn a_refusal_gives_way_to_a_manifest_it_depends_on_seen_after_it() {
    // Applied together, the client's watch event came first: written, refused for the issuer
    // no organization serves yet; then the Organization manifest is seen, not registered.
    let error = CallError::Server(server_error(
        Code::FailedPrecondition,
        Some("UNKNOWN_ISSUER"),
        &[],
    ));
    let refused =
        status_after(None, &after_apply_failure(&error, "ApplyClient"), 1, at(0)).unwrap();
    let organization = Manifest::new(ObjectKind::Organization, "platform", "globex");
    let mut o = observed(Some(&refused));
    o.now = at(60);
    assert!(matches!(next_step(&o), Step::Wait { after: Some(_) }));
    o.prerequisites.waiting_for = Some(organization.clone());
    o.prerequisites.waiting_since = Some(at(50));
    assert_eq!(
        next_step(&o),
        Step::AwaitPrerequisite {
            manifest: organization
        }
    );
}

#[test]
fn nothing_is_written_while_a_manifest_it_depends_on_is_not_registered() {
    let organization = Manifest::new(ObjectKind::Organization, "platform", "acme");
    let mut o = observed(None);
    o.prerequisites.waiting_for = Some(organization.clone());
    // Quietly at first: applied together, the organization usually registers at once.
    o.prerequisites.waiting_since = Some(at(99));
    assert_eq!(
        next_step(&o),
        Step::Wait {
            after: Some(Duration::from_secs(2))
        }
    );
    o.prerequisites.waiting_since = Some(at(97));
    assert_eq!(
        next_step(&o),
        Step::AwaitPrerequisite {
            manifest: organization.clone()
        }
    );
    let verdict = awaiting_prerequisite(&organization);
    assert_eq!(
        (verdict.reason, verdict.cause),
        (Reason::Pending, Cause::ReferenceNotReady)
    );
    assert!(
        verdict.message.contains("Organization platform/acme"),
        "{}",
        verdict.message
    );

    // What needs no write goes on: the finalizer, a registered resource, a deletion.
    o.has_finalizer = false;
    assert_eq!(next_step(&o), Step::AddFinalizer);
    let registered = registered(1, "r1");
    let mut o = observed(Some(&registered));
    o.prerequisites.waiting_for = Some(organization.clone());
    assert_eq!(next_step(&o), Step::Wait { after: None });
    o.deleting = true;
    assert_eq!(
        next_step(&o),
        Step::Delete {
            if_revision: "r1".into()
        }
    );
}

#[test]
fn a_deletion_names_the_manifests_that_still_depend_on_it() {
    let dependents: Vec<Manifest> = (0..12)
        .map(|i| Manifest::new(ObjectKind::Client, "team-a", &format!("app-{i:02}")))
        .collect();
    let deleted = naming_dependents(
        after_delete(&DeleteOutcome::Deleted { was_there: true }),
        &dependents[..1],
    );
    assert!(
        deleted
            .message
            .ends_with("still referenced by OIDCClient team-a/app-00, which keep their reference to an object the server no longer holds"),
        "{}",
        deleted.message
    );

    let error = CallError::Server(server_error(
        Code::FailedPrecondition,
        Some("ORGANIZATION_NOT_EMPTY"),
        &[("organization", "acme")],
    ));
    let waiting = naming_dependents(
        after_delete_failure(&error, "DeleteOrganization"),
        &dependents,
    );
    assert_eq!(
        (waiting.reason, waiting.cause, waiting.retried),
        (Reason::Deleting, Cause::OrganizationNotEmpty, true)
    );
    assert!(
        waiting
            .message
            .contains("OIDCClient team-a/app-09, and 2 more"),
        "{}",
        waiting.message
    );
    assert!(!waiting.message.contains("app-10"), "{}", waiting.message);
}

#[test]
fn refusal_messages_carry_code_reason_cause_fields_and_generation() {
    let error = server_error(
        Code::InvalidArgument,
        Some("INVALID_FIELD"),
        &[
            ("cause", "redirect URI must use https"),
            ("generation_in_force", "3"),
        ],
    );
    assert_eq!(
        refusal_message(&error, "ApplyClient"),
        "ApplyClient refused: InvalidArgument (INVALID_FIELD): redirect URI must use https; \
         spec.redirect_uris[0]: redirect URI must use https; generation in force: 3"
    );
    let verdict = failure_verdict(&CallError::Server(error), "ApplyClient");
    assert_eq!(verdict.reason, Reason::Refused);
    assert_eq!(verdict.cause, Cause::FieldViolation);
    assert!(!verdict.retried);
    assert_eq!(verdict.fields.generation_in_force, Some(3));

    let older = server_error(Code::Unimplemented, None, &[]);
    let text = refusal_message(&older, "ListClientRevisions");
    assert!(
        text.ends_with(
            "the server is older than this call (ListClientRevisions): upgrade the server"
        ),
        "{text}"
    );
    let fresh = server_error(Code::FailedPrecondition, Some("UNKNOWN_ISSUER"), &[]);
    let text = refusal_message(&fresh, "ApplyClient");
    assert!(text.ends_with("generation in force: none"), "{text}");
}

#[test]
fn failures_map_onto_reasons_causes_and_retries() {
    let grant = CallError::Server(server_error(
        Code::PermissionDenied,
        Some("OUTSIDE_GRANT"),
        &[("namespace", "team-a")],
    ));
    let cases = [
        (
            grant,
            Reason::Refused,
            Cause::OutsideGrant,
            false,
            Phase::Error,
        ),
        (
            CallError::Server(server_error(Code::Unavailable, None, &[])),
            Reason::Pending,
            Cause::Transient,
            true,
            Phase::Pending,
        ),
        (
            CallError::Server(server_error(
                Code::ResourceExhausted,
                Some("RATE_LIMITED"),
                &[],
            )),
            Reason::Pending,
            Cause::Transient,
            true,
            Phase::Pending,
        ),
        (
            CallError::Server(server_error(Code::PermissionDenied, None, &[])),
            Reason::Refused,
            Cause::IdentityNotAllowed,
            false,
            Phase::Error,
        ),
        (
            CallError::Connect(ConnectError::Unreachable {
                address: "s:1".into(),
                problem: ConnectProblem::Transport,
                cause: "connection refused".into(),
            }),
            Reason::Unreachable,
            Cause::Transient,
            true,
            Phase::Pending,
        ),
        (
            CallError::Connect(ConnectError::CredentialUnavailable {
                path: "/tls/tls.key".into(),
                problem: ConnectProblem::Unreadable,
                cause: "No such file or directory (os error 2)".into(),
            }),
            Reason::CredentialUnavailable,
            Cause::Unreadable,
            true,
            Phase::Pending,
        ),
        (
            CallError::Connect(ConnectError::TrustAnchorUnavailable {
                path: "/tls/ca.crt".into(),
                problem: ConnectProblem::Malformed,
                cause: "no certificates in the file".into(),
            }),
            Reason::TrustAnchorUnavailable,
            Cause::Malformed,
            true,
            Phase::Pending,
        ),
        // The server's alerts about the client certificate, and a missing trust anchor.
        (
            CallError::Connect(ConnectError::CredentialUnavailable {
                path: "/tls/tls.crt".into(),
                problem: ConnectProblem::Expired,
                cause: "the server rejected the client certificate as expired".into(),
            }),
            Reason::CredentialUnavailable,
            Cause::Expired,
            true,
            Phase::Pending,
        ),
        (
            CallError::Connect(ConnectError::CredentialUnavailable {
                path: "/tls/tls.crt".into(),
                problem: ConnectProblem::Revoked,
                // Words in a message never decide the cause.
                cause: "expired? no such file?".into(),
            }),
            Reason::CredentialUnavailable,
            Cause::Revoked,
            true,
            Phase::Pending,
        ),
        (
            CallError::Connect(ConnectError::TrustAnchorUnavailable {
                path: "/tls/tls.crt".into(),
                problem: ConnectProblem::UnknownCa,
                cause: "the server does not trust the CA that issued the client certificate".into(),
            }),
            Reason::TrustAnchorUnavailable,
            Cause::Untrusted,
            true,
            Phase::Pending,
        ),
        (
            CallError::Connect(ConnectError::Unreachable {
                address: "s:1".into(),
                problem: ConnectProblem::TlsHandshake,
                cause: "TLS handshake failed".into(),
            }),
            Reason::Unreachable,
            Cause::TlsHandshake,
            true,
            Phase::Pending,
        ),
    ];
    for (error, reason, cause, retried, phase) in cases {
        let verdict = failure_verdict(&error, "ApplyClient");
        assert_eq!(
            (verdict.reason, verdict.cause, verdict.retried),
            (reason, cause, retried),
            "{error}"
        );
        let status = status_after(None, &verdict, 1, at(0)).unwrap();
        assert_eq!(status.phase, Some(phase), "{error}");
    }
}

#[test]
fn conflicts_are_told_apart() {
    let mismatch = CallError::Server(server_error(
        Code::FailedPrecondition,
        Some("REVISION_MISMATCH"),
        &[("revision", "r9")],
    ));
    assert!(is_conflict(&mismatch));
    let fapi = CallError::Server(server_error(
        Code::FailedPrecondition,
        Some("FAPI_REQUIREMENTS"),
        &[],
    ));
    assert!(!is_conflict(&fapi));
    assert_eq!(
        ErrorReason::from_str_name("MANAGER_CONFLICT"),
        Some(ErrorReason::ManagerConflict)
    );
}

#[test]
fn the_same_verdict_again_writes_nothing_and_records_nothing() {
    let status = registered(1, "r1");
    let verdict = no_drift(1, "r1");
    assert_eq!(status_after(Some(&status), &verdict, 1, at(500)), None);
    assert!(events_for(Some(&status), &verdict).is_empty());

    // A retried failure once recorded does not write or record again.
    let unavailable = failure_verdict(
        &CallError::Server(server_error(Code::Unavailable, None, &[])),
        "ApplyClient",
    );
    let retrying = status_after(Some(&status), &unavailable, 2, at(10)).unwrap();
    assert_eq!(events_for(Some(&status), &unavailable).len(), 1);
    assert_eq!(retrying.last_attempt_time, None);
    assert_eq!(status_after(Some(&retrying), &unavailable, 2, at(20)), None);
    assert!(events_for(Some(&retrying), &unavailable).is_empty());
}

#[test]
fn the_transition_time_moves_only_on_a_real_change() {
    let status = registered(1, "r1");
    let first = status.conditions[0].last_transition_time.clone();
    // Registered again at generation 2: Ready stays True, the time stays.
    let applied = Applied {
        client_id: "cid".into(),
        revision: "r2".into(),
        generation_in_force: 2,
        created: false,
    };
    let next = status_after(
        Some(&status),
        &after_apply(&applied, None, None, false, None),
        2,
        at(50),
    )
    .unwrap();
    assert_eq!(next.conditions[0].last_transition_time, first);
    assert_eq!(next.revision.as_deref(), Some("r2"));
    assert_eq!(next.conditions[0].observed_generation, Some(2));
    // Drifted: Ready turns False, the time moves.
    let report = DriftReport {
        server_revision: "r9".into(),
        ..DriftReport::default()
    };
    let drifted_status =
        status_after(Some(&next), &drifted(&report, Some("r2")), 2, at(60)).unwrap();
    assert_eq!(drifted_status.conditions[0].status, "False");
    assert_eq!(
        drifted_status.conditions[0].last_transition_time,
        Time(at(60))
    );
    assert_eq!(
        drifted_status.drift.as_ref().unwrap().detected_at,
        Some(Time(at(60)))
    );
    // The same drift seen later keeps when it was first noticed.
    assert_eq!(
        status_after(
            Some(&drifted_status),
            &drifted(&report, Some("r2")),
            2,
            at(90)
        ),
        None
    );
}

#[test]
fn drift_messages_name_revision_time_author_and_fields() {
    let report = DriftReport {
        server_revision: "r9".into(),
        removed: false,
        changed_at: Some(at(0)),
        manager: Some("dashboard".into()),
        actor: Some("user:alice@example.com".into()),
        fields: vec!["spec.redirectUris".into(), "spec.scopes".into()],
        backup_restore: false,
    };
    let verdict = drifted(&report, Some("r1"));
    assert_eq!(verdict.reason, Reason::Drifted);
    assert_eq!(verdict.cause, Cause::Edited);
    for part in [
        "holds revision r9, not r1",
        "changed at 2027-01-15T08:00:00Z",
        "by user:alice@example.com (manager dashboard)",
        "fields that differ: spec.redirectUris, spec.scopes",
        "nauthera.io/restore=true",
    ] {
        assert!(
            verdict.message.contains(part),
            "{part}: {}",
            verdict.message
        );
    }
    let status = status_after(None, &verdict, 1, at(5)).unwrap();
    assert_eq!(status.phase, Some(Phase::Error));
    let removed = drifted(
        &DriftReport {
            removed: true,
            ..DriftReport::default()
        },
        Some("r1"),
    );
    assert_eq!(removed.cause, Cause::Removed);
    assert!(removed.message.starts_with("removed from the server"));
}

#[test]
fn a_delivered_secret_is_registered_and_an_undelivered_one_is_kept_and_named() {
    let applied = Applied {
        client_id: "cid".into(),
        revision: "r1".into(),
        generation_in_force: 1,
        created: true,
    };
    let delivered = after_apply(&applied, Some("app-secret"), Some(Ok(())), false, None);
    assert_eq!(delivered.reason, Reason::Registered);
    // A first registration is one event that tells the write and the delivery.
    let events = events_for(None, &delivered);
    assert_eq!(
        events.iter().map(|e| e.reason).collect::<Vec<_>>(),
        vec![EventReason::Registered]
    );
    assert_eq!(
        events[0].note,
        "registered generation 1 as revision r1 (client id cid); wrote the client secret into \
         Secret app-secret"
    );
    // A later generation of a registered resource is an Applied event alone.
    let registered = status_after(None, &delivered, 1, at(0)).unwrap();
    let edit = Applied {
        revision: "r2".into(),
        generation_in_force: 2,
        created: false,
        ..applied.clone()
    };
    let events = events_for(
        Some(&registered),
        &after_apply(&edit, None, None, false, None),
    );
    assert_eq!(
        events.iter().map(|e| e.reason).collect::<Vec<_>>(),
        vec![EventReason::Applied]
    );
    // A resource that was failing enters Registered with the write's note.
    let mut refused = registered.clone();
    refused.reason = Some(Reason::Refused);
    let events = events_for(Some(&refused), &after_apply(&edit, None, None, false, None));
    assert_eq!(
        events.iter().map(|e| e.reason).collect::<Vec<_>>(),
        vec![EventReason::Registered]
    );
    assert!(
        events[0]
            .note
            .starts_with("wrote generation 2 as revision r2")
    );
    let status = status_after(None, &delivered, 1, at(0)).unwrap();
    assert_eq!(status.secret_ref.unwrap().name, "app-secret");

    let foreign = after_apply(
        &applied,
        Some("app-secret"),
        Some(Err(SecretWriteFailure::Foreign {
            owner: Some("Deployment/web".into()),
        })),
        false,
        None,
    );
    assert_eq!(foreign.reason, Reason::SecretUndeliverable);
    assert_eq!(foreign.cause, Cause::ForeignSecret);
    assert!(
        foreign.keep_trying,
        "the minted secret is kept and the write retried"
    );
    assert!(foreign.message.contains("owner Deployment/web"));
    // The write still happened: its revision is recorded.
    let status = status_after(None, &foreign, 1, at(0)).unwrap();
    assert_eq!(status.revision.as_deref(), Some("r1"));
    assert_eq!(status.phase, Some(Phase::Error));
    assert_eq!(status.secret_ref, None);

    let forbidden = after_secret_failure(
        &SecretWriteFailure::Forbidden {
            message: "secrets is forbidden".into(),
        },
        "app-secret",
    );
    assert_eq!(forbidden.cause, Cause::Forbidden);
    assert_eq!(
        status_after(None, &forbidden, 1, at(0)).unwrap().phase,
        Some(Phase::Pending),
        "retried until the role allows the write"
    );

    let flaky = after_secret_failure(
        &SecretWriteFailure::Other {
            message: "timeout".into(),
        },
        "app-secret",
    );
    assert_eq!(
        status_after(None, &flaky, 1, at(0)).unwrap().phase,
        Some(Phase::Pending)
    );
}

#[test]
fn a_restore_records_restored_and_clears_the_drift() {
    let mut status = registered(1, "r1");
    status.drift = Some(Box::new(Drift {
        server_revision: "r9".into(),
        ..Drift::default()
    }));
    let applied = Applied {
        client_id: "cid".into(),
        revision: "r10".into(),
        generation_in_force: 1,
        created: false,
    };
    let verdict = after_apply(&applied, None, None, true, None);
    assert_eq!(verdict.reason, Reason::Restored);
    let next = status_after(Some(&status), &verdict, 1, at(5)).unwrap();
    assert_eq!(next.drift, None);
    assert_eq!(next.phase, Some(Phase::Registered));
    assert_eq!(next.conditions[0].status, "True");
    assert!(
        events_for(Some(&status), &verdict)
            .iter()
            .any(|e| e.reason == EventReason::Restored)
    );
}

#[test]
fn a_delete_refused_for_another_revision_waits_and_looks() {
    let verdict = after_delete(&DeleteOutcome::Conflict {
        held_revision: Some("r9".into()),
    });
    assert_eq!(verdict.reason, Reason::Deleting);
    assert!(verdict.retried, "retried, not released");
    assert!(
        verdict.message.contains("revision r9"),
        "{}",
        verdict.message
    );
}

#[test]
fn deletion_outcomes() {
    let cases = [
        (
            after_delete(&DeleteOutcome::Deleted { was_there: true }),
            Reason::Deleted,
        ),
        (released(Reason::Orphaned), Reason::Orphaned),
    ];
    for (verdict, reason) in cases {
        assert_eq!(verdict.reason, reason);
        assert_eq!(
            events_for(None, &verdict)[0].reason,
            reason.event(),
            "{reason}"
        );
    }
}

#[test]
fn a_deletion_with_nothing_recorded_lets_go_only_of_what_it_read() {
    let method = "GetBranding";
    // The server holds nothing: nothing to delete.
    let AfterReleaseLook::LetGo(gone) = after_release_look(ReleaseLook::Nothing, method) else {
        panic!("nothing on the server lets go");
    };
    assert_eq!((gone.reason, gone.cause), (Reason::Deleted, Cause::None));
    // The server holds an object: what the read says is recorded, and decided on again.
    let adopted_write = in_force(1, "r7", false);
    assert_eq!(
        after_release_look(ReleaseLook::Held(Box::new(adopted_write.clone())), method),
        AfterReleaseLook::Record(adopted_write)
    );
    // Unreachable or failing: the deletion waits for the server, as any delete does.
    for (error, reason) in [
        (
            CallError::Connect(ConnectError::Unreachable {
                address: "s:1".into(),
                problem: ConnectProblem::Transport,
                cause: "connection refused".into(),
            }),
            Reason::Unreachable,
        ),
        (
            CallError::Server(server_error(Code::Unavailable, None, &[])),
            Reason::Deleting,
        ),
    ] {
        let AfterReleaseLook::Record(waits) =
            after_release_look(ReleaseLook::Failed(error), method)
        else {
            panic!("a failed read holds the deletion");
        };
        assert_eq!(waits.reason, reason, "{}", waits.message);
        assert!(waits.retried);
    }
    // A server that refuses to read the object never took a write of it either.
    let refused = CallError::Server(server_error(Code::PermissionDenied, None, &[]));
    let AfterReleaseLook::LetGo(refused) = after_release_look(ReleaseLook::Failed(refused), method)
    else {
        panic!("a refused read lets go");
    };
    assert_eq!(refused.reason, Reason::Deleted);
    assert!(
        refused.message.contains("GetBranding refused")
            && refused.message.contains("nothing was deleted"),
        "{}",
        refused.message
    );
}

#[test]
fn secret_ref_problems_name_the_secret() {
    let verdict = secret_ref_unavailable(
        "spec.secret.secretRef",
        "creds",
        "clientSecret",
        SecretRefProblem::NoKey,
    );
    // A key not put in yet is waited for, as a Secret not made yet is.
    assert_eq!(
        (verdict.reason, verdict.cause),
        (Reason::Pending, Cause::ReferenceNotReady)
    );
    assert!(
        verdict
            .message
            .contains("waiting for the key clientSecret in Secret creds")
            && verdict.message.contains("spec.secret.secretRef")
            && verdict.message.contains("nothing is sent"),
        "{}",
        verdict.message
    );
    assert!(!verdict.record_attempt);
    assert!(verdict.keep_trying);
    let empty = secret_ref_unavailable(
        "spec.secret.secretRef",
        "creds",
        "clientSecret",
        SecretRefProblem::EmptyKey,
    );
    assert!(
        empty
            .message
            .contains("key clientSecret of Secret creds is empty"),
        "{}",
        empty.message
    );
    assert_eq!(
        (empty.reason, empty.cause),
        (Reason::SecretRefUnavailable, Cause::SecretRefMissing)
    );
}

#[test]
fn a_released_secret_is_named_and_a_failed_release_holds_the_manifest() {
    let released = released_with_secret(
        Reason::Orphaned,
        &SecretRelease::Released {
            secret_name: "web".into(),
        },
    );
    assert_eq!(released.reason, Reason::Orphaned);
    assert!(!released.retried);
    assert!(
        released.message.contains("Secret web is kept"),
        "{}",
        released.message
    );

    let forbidden = released_with_secret(
        Reason::Orphaned,
        &SecretRelease::Failed {
            secret_name: "web".into(),
            forbidden: true,
            message: "secrets \"web\" is forbidden".into(),
        },
    );
    assert_eq!(forbidden.reason, Reason::Deleting);
    assert_eq!(forbidden.cause, Cause::Forbidden);
    assert!(forbidden.retried, "retried, with the finalizer kept");
    assert!(
        forbidden.message.contains("patch on secrets"),
        "{}",
        forbidden.message
    );

    let transient = released_with_secret(
        Reason::DeletionSkippedDrifted,
        &SecretRelease::Failed {
            secret_name: "web".into(),
            forbidden: false,
            message: "connection reset".into(),
        },
    );
    assert_eq!(transient.cause, Cause::Transient);
    assert!(transient.retried);
}

#[test]
fn a_generation_written_over_a_drift_names_what_it_discards() {
    let drift = Drift {
        server_revision: "r5".into(),
        actor: Some("user:alice@example.com".into()),
        fields: vec!["spec.redirectUris".into()],
        changed_at: Some(Time(at(10))),
        ..Drift::default()
    };
    let written = in_force(2, "r6", false);
    let mut written = written;
    written.fields.revision = Some("r6".into());
    written.fields.generation_in_force = Some(2);
    let verdict = superseding_drift(written.clone(), &drift, None);
    let event = verdict
        .events
        .iter()
        .find(|e| e.reason == EventReason::DriftSuperseded)
        .expect("a DriftSuperseded event");
    for part in [
        "generation 2",
        "r6",
        "user:alice@example.com",
        "r5",
        "spec.redirectUris",
    ] {
        assert!(event.note.contains(part), "{part}: {}", event.note);
    }
    let last = verdict.fields.last_drift.clone().expect("status.lastDrift");
    assert_eq!((last.generation, last.revision.as_str()), (2, "r6"));
    assert_eq!(last.drift, drift);
    let status = status_after(None, &verdict, 2, at(20)).unwrap();
    assert_eq!(status.last_drift.unwrap().superseded_at, Some(Time(at(20))));
    // Nothing written: nothing superseded.
    let unwritten = superseding_drift(
        awaiting_prerequisite(&Manifest::new(ObjectKind::Organization, "ops", "acme")),
        &drift,
        None,
    );
    assert!(unwritten.fields.last_drift.is_none());
    assert!(unwritten.events.is_empty());

    // The new generation declares one changed field as the server held it, not the other.
    let drift = Drift {
        fields: vec![
            "spec.branding.colors.primary".into(),
            "spec.branding.texts.title".into(),
        ],
        ..drift
    };
    let still_differs = vec!["spec.branding.texts.title".to_owned()];
    let verdict = superseding_drift(written.clone(), &drift, Some(&still_differs));
    let adopted = verdict
        .events
        .iter()
        .find(|e| e.reason == EventReason::DriftAdopted)
        .expect("a DriftAdopted event");
    assert!(
        adopted.note.contains("kept") && adopted.note.contains("spec.branding.colors.primary"),
        "{}",
        adopted.note
    );
    assert!(!adopted.note.contains("texts.title"), "{}", adopted.note);
    let superseded = verdict
        .events
        .iter()
        .find(|e| e.reason == EventReason::DriftSuperseded)
        .expect("a DriftSuperseded event");
    assert!(
        superseded
            .note
            .contains("discarded: spec.branding.texts.title")
            && !superseded.note.contains("colors.primary"),
        "{}",
        superseded.note
    );
    let last = verdict.fields.last_drift.clone().unwrap();
    assert_eq!(last.kept, vec!["spec.branding.colors.primary".to_owned()]);
    assert_eq!(last.discarded(), vec!["spec.branding.texts.title"]);
    assert_eq!(verdict.cause, Cause::None);

    // Every changed field kept: no Warning, and the write is told as keeping the drift.
    let verdict = superseding_drift(written, &drift, Some(&[]));
    assert!(
        !verdict
            .events
            .iter()
            .any(|e| e.reason == EventReason::DriftSuperseded),
        "{:?}",
        verdict.events
    );
    assert_eq!(verdict.cause, Cause::DriftKept);
    assert_eq!(EventReason::DriftAdopted.event_type().as_str(), "Normal");
}

#[test]
fn what_the_server_and_the_manifest_say_is_recorded_printable() {
    // A refusal quoting the manifest: a claim name and an issuer with terminal escapes, a bidi
    // override and line breaks.
    let mut error = server_error(Code::InvalidArgument, Some("INVALID_FIELD"), &[]);
    error.cause = Some("no organization serves https://x.test/acme\u{1b}[8m".into());
    error.violations[0].field = "spec.claim_mapping[email\u{1b}[2K]".into();
    error.violations[0].description = "not a claim\r\nSet-Cookie: x \u{202e}txet\u{0}".into();
    let verdict = failure_verdict(&CallError::Server(error), "ApplyIdentityProvider");
    let shown = verdict.printable();
    let message = shown.message.as_str();
    assert!(
        !message.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "{message:?}"
    );
    for part in [
        "https://x.test/acme\\u{1b}[8m",
        "spec.claim_mapping[email\\u{1b}[2K]",
        "not a claim\\r\\nSet-Cookie: x \\u{202e}txet\\u{0}",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message:?}");
    }
    let events = events_for(None, &shown);
    assert!(events.iter().all(|e| e.note == message), "{events:?}");

    // The escaped message is what the status holds, so the same refusal again changes nothing
    // and records no second event.
    let status = status_after(None, &shown, 1, at(0)).unwrap();
    assert_eq!(status.message.as_deref(), Some(message));
    assert_eq!(status_after(Some(&status), &shown, 1, at(5)), None);
    assert!(events_for(Some(&status), &shown).is_empty());

    // A printable verdict is not copied; other text is kept as it is.
    let plain = in_force(1, "r1", false);
    assert!(matches!(plain.printable(), std::borrow::Cow::Borrowed(_)));
    assert_eq!(
        printable("Bücher & Söhne 請求 🚀"),
        "Bücher & Söhne 請求 🚀"
    );
    assert_eq!(printable("a\tb\u{7f}c\u{85}"), "a\\tb\\u{7f}c\\u{85}");
}

pub(super) fn violation(rule: nauthera_shared::policy::Rule) -> nauthera_shared::policy::Violation {
    nauthera_shared::policy::Violation {
        policy: "web-rules".into(),
        rule,
        field: "spec.grantTypes".into(),
        message: "ClientPolicy web-rules, rule grantTypes: spec.grantTypes may only hold authorization_code".into(),
    }
}

#[test]
fn a_policy_holds_back_only_generations_not_in_force() {
    let gate = PolicyGate::Violation(violation(nauthera_shared::policy::Rule::GrantTypes));
    // A new client is not sent.
    let mut new = observed(None);
    new.policy = gate.clone();
    assert_eq!(next_step(&new), Step::HoldByPolicy);
    // A new generation of a registered client is not sent either.
    let in_force_1 = registered(1, "r1");
    let mut changed = observed(Some(&in_force_1));
    changed.generation = 2;
    changed.policy = gate.clone();
    assert_eq!(next_step(&changed), Step::HoldByPolicy);
    // The generation in force is not judged again: its secret is still delivered.
    let mut rotating = observed(Some(&in_force_1));
    rotating.secret_mode = SecretMode::Generate {
        secret_name: "web".into(),
    };
    rotating.secret_state = SecretState::Absent;
    rotating.policy = gate.clone();
    assert!(matches!(
        next_step(&rotating),
        Step::Apply {
            rotate: Some(_),
            ..
        }
    ));
    // The generation in force is told about a policy made since, once settled; and that
    // status is settled in turn (no drift check each time).
    let mut steady = observed(Some(&in_force_1));
    steady.policy = gate.clone();
    assert_eq!(next_step(&steady), Step::HoldByPolicy);
    let told = status_after(
        Some(&in_force_1),
        &held_by_policy(&gate, 1, Some(&in_force_1), "").unwrap(),
        1,
        at(3),
    )
    .unwrap();
    assert!(
        told.message
            .as_deref()
            .unwrap()
            .contains("generation 1 stays in force")
    );
    let mut held = observed(Some(&told));
    held.policy = gate.clone();
    assert_eq!(next_step(&held), Step::HoldByPolicy);
    // The policy gone: a look at the server brings it back to Registered.
    let open = observed(Some(&told));
    assert_eq!(next_step(&open), Step::CheckDrift);
    // Deleting is never held.
    let mut deleting = observed(Some(&in_force_1));
    deleting.deleting = true;
    deleting.generation = 2;
    deleting.policy = gate;
    assert_eq!(
        next_step(&deleting),
        Step::Delete {
            if_revision: "r1".into()
        }
    );
}

#[test]
fn a_held_generation_says_which_rule_and_what_stays_in_force() {
    let in_force_1 = registered(1, "r1");
    let gate = PolicyGate::Violation(violation(nauthera_shared::policy::Rule::GrantTypes));
    let verdict = held_by_policy(&gate, 2, Some(&in_force_1), "approve").unwrap();
    assert_eq!(verdict.reason, Reason::PolicyViolation);
    assert_eq!(verdict.cause, Cause::PolicyRule);
    assert!(
        verdict
            .message
            .ends_with("generation 2 is not sent and the server keeps generation 1 in force"),
        "{}",
        verdict.message
    );
    let status = status_after(Some(&in_force_1), &verdict, 2, at(5)).unwrap();
    let hold = status.policy.as_deref().unwrap();
    assert_eq!(
        (hold.policy.as_str(), hold.rule.as_str()),
        ("web-rules", "grantTypes")
    );
    assert_eq!(status.generation_in_force, Some(1));
    assert_eq!(status.phase, Some(Phase::Error));
    // The same hold again changes nothing: no status write, no event.
    assert!(status_after(Some(&status), &verdict, 2, at(9)).is_none());
    assert!(events_for(Some(&status), &verdict).is_empty());
    // Complying clears the hold.
    let registered_2 = status_after(Some(&status), &in_force(2, "r2", false), 2, at(10)).unwrap();
    assert!(registered_2.policy.is_none());

    let limit = PolicyGate::Violation(violation(
        nauthera_shared::policy::Rule::MaxClientsPerNamespace,
    ));
    let verdict = held_by_policy(&limit, 1, None, "approve").unwrap();
    assert_eq!(verdict.cause, Cause::NamespaceLimit);
    assert!(
        verdict
            .message
            .ends_with("nothing is registered on the server")
    );

    let waiting = PolicyGate::AwaitingApproval {
        policies: vec!["reviewed".into()],
        fields: vec!["redirectUris".into()],
        new_client: false,
    };
    let verdict = held_by_policy(
        &waiting,
        3,
        Some(&in_force_1),
        "kubectl nauthera approve oidcclient/web -n team-a",
    )
    .unwrap();
    assert_eq!(verdict.reason, Reason::WaitingForApproval);
    assert_eq!(verdict.cause, Cause::ApprovalRequired);
    assert!(verdict.message.contains("a change to redirectUris needs an approval of generation 3 (kubectl nauthera approve oidcclient/web -n team-a)"), "{}", verdict.message);
    assert!(held_by_policy(&PolicyGate::Open, 3, None, "").is_none());
}

#[test]
fn an_object_managed_elsewhere_is_left_alone_until_a_person_hands_it_over() {
    let elsewhere = nauthera_shared::resources::ManagedElsewhere {
        manager: "nauthera-reconciler/prod-us".into(),
        revision: "r7".into(),
        ..Default::default()
    };
    let verdict = managed_elsewhere(&elsewhere, None, true);
    let claimed = status_after(None, &verdict, 1, at(0)).unwrap();
    assert_eq!(claimed.reason, Some(Reason::ManagedElsewhere));
    assert_eq!(claimed.phase, Some(Phase::Error));
    assert_eq!(claimed.managed_elsewhere.as_deref(), Some(&elsewhere));
    let holds = |revision: &str| ServerView::Holds {
        revision: revision.into(),
    };

    let mut observed = observed(Some(&claimed));
    observed.server = holds("r7");
    assert_eq!(next_step(&observed), Step::Wait { after: None });
    // A new generation of this manifest is not written over the other's.
    observed.generation = 2;
    assert_eq!(next_step(&observed), Step::Wait { after: None });
    // The other reconciler wrote again: look, so the status names what the server holds.
    observed.server = holds("r8");
    assert_eq!(next_step(&observed), Step::CheckDrift);
    // It is gone: declared from here.
    observed.server = ServerView::Absent;
    assert_eq!(next_step(&observed), apply(None));

    // A handover from the manager that wrote last, with a new secret of its own.
    observed.server = holds("r7");
    observed.take_over_from = Some("nauthera-reconciler/prod-us".into());
    observed.secret_mode = SecretMode::Generate {
        secret_name: "web-oidc".into(),
    };
    assert_eq!(
        next_step(&observed),
        Step::TakeOver {
            from: Box::new(elsewhere.clone()),
            rotate: Some(Rotation::TakenOver {
                from_manager: "nauthera-reconciler/prod-us".into()
            }),
        }
    );
    // A policy that holds the declared generation back holds the handover back too.
    observed.policy = PolicyGate::Violation(violation(nauthera_shared::policy::Rule::GrantTypes));
    assert_eq!(next_step(&observed), Step::HoldByPolicy);
    observed.policy = PolicyGate::Open;
    // Naming another manager takes nothing.
    observed.take_over_from = Some("someone-else".into());
    assert_eq!(
        next_step(&observed),
        Step::RefuseTakeOver {
            named: "someone-else".into()
        }
    );
    // Deleting the manifest leaves the other's object alone.
    observed.deleting = true;
    assert_eq!(next_step(&observed), Step::LetGo);
    // Any other verdict clears the record.
    let registered = status_after(Some(&claimed), &in_force(1, "r9", false), 1, at(1)).unwrap();
    assert_eq!(registered.managed_elsewhere, None);
}

#[test]
fn a_reference_to_a_manifest_or_secret_that_does_not_exist_waits_and_names_it() {
    let branding = Manifest::new(ObjectKind::Branding, "team-a", "sign-in");
    let missing = Missing {
        manifest: branding.clone(),
        went: None,
    };
    let mut o = observed(None);
    o.prerequisites.missing = Some(missing.clone());
    o.prerequisites.waiting_since = Some(at(99));
    assert!(matches!(next_step(&o), Step::Wait { after: Some(_) }));
    o.prerequisites.waiting_since = Some(at(90));
    assert_eq!(
        next_step(&o),
        Step::AwaitMissing {
            missing: missing.clone()
        }
    );
    let verdict = awaiting_missing(&missing);
    assert_eq!(
        (verdict.reason, verdict.cause),
        (Reason::Pending, Cause::ReferenceNotReady)
    );
    for part in [
        "Branding team-a/sign-in",
        "spec.brandingRef",
        "does not exist",
    ] {
        assert!(verdict.message.contains(part), "{}", verdict.message);
    }

    let secret = secret_ref_unavailable(
        "spec.secretRef",
        "github-oauth-app",
        "clientSecret",
        SecretRefProblem::Missing,
    );
    assert_eq!(
        (secret.reason, secret.cause),
        (Reason::Pending, Cause::ReferenceNotReady)
    );
    assert!(
        secret.message.contains("Secret github-oauth-app")
            && secret.message.contains("nothing is sent"),
        "{}",
        secret.message
    );
}

#[test]
fn a_registered_resource_says_at_once_that_what_it_names_is_gone() {
    let registered = registered(1, "r1");
    let gone = Missing {
        manifest: Manifest::new(ObjectKind::Branding, "team-a", "sign-in"),
        went: Some(Reason::Deleted),
    };
    let mut o = observed(Some(&registered));
    o.server = ServerView::Holds {
        revision: "r1".into(),
    };
    assert_eq!(next_step(&o), Step::Wait { after: None });
    o.prerequisites.missing = Some(gone.clone());
    assert_eq!(next_step(&o), Step::CheckDrift, "looked at, not left alone");

    let verdict = reference_missing(no_drift(1, "r1"), &gone);
    assert_eq!(
        (verdict.reason, verdict.cause),
        (Reason::Pending, Cause::ReferenceNotReady)
    );
    for part in [
        "generation 1 is in force as revision r1",
        "Branding team-a/sign-in",
        "deletionPolicy Delete removed it from the server",
        "organization's default sign-in pages",
    ] {
        assert!(
            verdict.message.contains(part),
            "{part}: {}",
            verdict.message
        );
    }
    let orphaned = reference_missing(
        no_drift(1, "r1"),
        &Missing {
            went: Some(Reason::Orphaned),
            ..gone.clone()
        },
    );
    assert!(
        orphaned
            .message
            .contains("the server still shows that branding"),
        "{}",
        orphaned.message
    );
    // The Pending it leaves is looked at again (not settled), and stays Pending while it lasts.
    let pending = status_after(Some(&registered), &verdict, 1, at(1)).unwrap();
    let mut o = observed(Some(&pending));
    o.server = ServerView::Holds {
        revision: "r1".into(),
    };
    o.prerequisites.missing = Some(gone);
    assert_eq!(next_step(&o), Step::CheckDrift);
    // A drift or a failure says what it says.
    let drift = drifted(&DriftReport::default(), Some("r1"));
    assert_eq!(
        reference_missing(drift.clone(), o.prerequisites.missing.as_ref().unwrap()),
        drift
    );
}

#[test]
fn only_a_changed_value_of_the_teams_secret_counts_not_its_labels() {
    let value = |version: &str, byte: u8| SentValue {
        version: version.into(),
        digest: [byte; 32],
    };
    // The version sent, read again: the same value, whatever this process knows.
    assert!(!provided_value_changed(Some("7"), None, &value("7", 1)));
    // A new version with the value the server holds: a label or an annotation changed.
    let known = value("7", 1);
    assert!(!provided_value_changed(
        Some("7"),
        Some(&known),
        &value("8", 1)
    ));
    assert!(!provided_value_changed(
        Some("7"),
        Some(&value("8", 1)),
        &value("8", 1)
    ));
    // A new value.
    assert!(provided_value_changed(
        Some("7"),
        Some(&known),
        &value("9", 2)
    ));
    // Nothing known of the value (a new process) and another version: counted as a change.
    assert!(provided_value_changed(Some("7"), None, &value("9", 1)));
    // Never sent.
    assert!(provided_value_changed(None, None, &value("1", 1)));
    // The digest never shows.
    assert!(!format!("{known:?}").contains("digest"));
}

#[test]
fn a_changed_team_secret_is_told_by_name_never_by_value() {
    let applied = Applied {
        client_id: String::new(),
        revision: "r3".into(),
        generation_in_force: 1,
        created: false,
    };
    let verdict = after_apply(&applied, None, None, false, None);
    let told = secret_value_sent(
        verdict,
        &ProvidedSecret {
            field: "spec.secretRef",
            secret: "github-oauth-app",
            key: "clientSecret",
            what: "upstream client secret",
        },
    );
    assert_eq!(told.reason, Reason::Registered);
    assert_eq!(told.cause, Cause::SecretChanged);
    let event = told
        .events
        .iter()
        .find(|e| e.reason == EventReason::SecretChanged)
        .unwrap();
    for part in [
        "upstream client secret",
        "Secret github-oauth-app",
        "key clientSecret",
        "spec.secretRef",
        "revision r3",
    ] {
        assert!(event.note.contains(part), "{part}: {}", event.note);
    }
    assert_eq!(EventReason::SecretChanged.event_type().as_str(), "Normal");
}

#[test]
fn an_own_write_older_than_the_manifest_is_an_orphan_re_adopted_and_its_secret_taken_back() {
    assert_eq!(
        adopted_from(None, Some(at(1)), Some(at(5)), false),
        AdoptedFrom::Orphan
    );
    assert_eq!(
        adopted_from(None, Some(at(6)), Some(at(5)), false),
        AdoptedFrom::LostAnswer
    );
    // Within the second the creation time is kept to: only what this process orphaned counts.
    let within = at(5)
        .checked_add(jiff::SignedDuration::from_millis(300))
        .unwrap();
    assert_eq!(
        adopted_from(None, Some(within), Some(at(5)), false),
        AdoptedFrom::LostAnswer
    );
    assert_eq!(
        adopted_from(None, Some(within), Some(at(5)), true),
        AdoptedFrom::Orphan
    );
    assert_eq!(
        adopted_from(Some("r1"), Some(at(1)), Some(at(5)), true),
        AdoptedFrom::LostAnswer
    );
    let held = Applied {
        client_id: "cid".into(),
        revision: "r4".into(),
        generation_in_force: 1,
        created: false,
    };
    let orphan = adopted(&held, 1, true, AdoptedFrom::Orphan);
    assert_eq!(orphan.reason, Reason::Registered);
    let note = &orphan.events[0].note;
    assert!(
        note.contains("orphan re-adopted") && !note.contains("never arrived"),
        "{note}"
    );
    let lost = adopted(&held, 1, true, AdoptedFrom::LostAnswer);
    assert!(lost.events[0].note.contains("never arrived"));

    // Nothing recorded and the server may hold it: look before creating.
    let mut o = observed(None);
    o.server = ServerView::Holds {
        revision: "r4".into(),
    };
    assert_eq!(next_step(&o), Step::LookBeforeCreate);
    o.server = ServerView::Unchecked;
    assert_eq!(next_step(&o), Step::LookBeforeCreate);
    o.server = ServerView::Absent;
    assert_eq!(next_step(&o), apply(None));

    // In force, with the Secret released by the orphan holding its client: taken back.
    let mut status = status_after(None, &orphan, 1, at(0)).unwrap();
    status.client_id = Some("cid".into());
    let mut o = observed(Some(&status));
    o.secret_mode = SecretMode::Generate {
        secret_name: "web-oidc".into(),
    };
    o.server = ServerView::Holds {
        revision: "r4".into(),
    };
    o.secret_state = SecretState::Released {
        client_id: "cid".into(),
    };
    assert_eq!(
        next_step(&o),
        Step::ReclaimSecret {
            name: "web-oidc".into()
        }
    );
    // A released Secret of another client is not taken.
    o.secret_state = SecretState::Released {
        client_id: "other".into(),
    };
    assert_eq!(next_step(&o), Step::Wait { after: None });
    let reclaimed = secret_reclaimed(1, "r4", "web-oidc", "cid");
    assert_eq!(
        reclaimed.fields.secret_ref,
        Update::Set(nauthera_shared::resources::LocalRef {
            name: "web-oidc".into()
        })
    );
    assert!(
        !reclaimed.fields.secret_set,
        "the secret itself did not change"
    );
}

#[test]
fn a_restore_names_who_asked_and_a_recreated_client_its_new_id() {
    let applied = Applied {
        client_id: "cid-new".into(),
        revision: "r9".into(),
        generation_in_force: 2,
        created: true,
    };
    let restored = after_apply(&applied, None, None, true, None);
    let told = restore_told(
        restored.clone(),
        Some("kubectl-nauthera"),
        Some("cid-old"),
        &applied,
    );
    assert!(
        told.message.ends_with("(requested by kubectl-nauthera)"),
        "{}",
        told.message
    );
    let changed = told
        .events
        .iter()
        .find(|e| e.reason == EventReason::ClientIdChanged)
        .expect("the new client id is told");
    assert!(changed.note.contains("cid-new") && changed.note.contains("cid-old"));
    // The same id, or an update of a client that was still there: nothing to tell.
    let kept = Applied {
        created: false,
        ..applied.clone()
    };
    let told = restore_told(restored, None, Some("cid-old"), &kept);
    assert!(
        told.events
            .iter()
            .all(|e| e.reason != EventReason::ClientIdChanged)
    );
    assert!(!told.message.contains("requested by"));
}

#[test]
fn a_write_that_found_its_own_lost_write_sends_the_value_read_again_once() {
    let applied = Applied {
        client_id: String::new(),
        revision: "r5".into(),
        generation_in_force: 1,
        created: false,
    };
    let adopted = after_apply(&applied, None, None, false, None);
    assert_eq!(
        resend_over(&adopted, false, Some("v2"), Some("v1")),
        Some("r5".to_owned())
    );
    // Once only; never what the status records as sent; nothing when nothing was read.
    assert_eq!(resend_over(&adopted, true, Some("v2"), Some("v1")), None);
    assert_eq!(resend_over(&adopted, false, Some("v2"), Some("v2")), None);
    assert_eq!(resend_over(&adopted, false, None, Some("v1")), None);
    // Not adopted: nothing to send over.
    let orphaned = released(Reason::Orphaned);
    assert_eq!(resend_over(&orphaned, false, Some("v2"), Some("v1")), None);
}

#[test]
fn a_write_records_the_value_it_sent_and_tells_a_changed_one() {
    let applied = Applied {
        client_id: String::new(),
        revision: "r3".into(),
        generation_in_force: 2,
        created: false,
    };
    let secret = ProvidedSecret {
        field: "spec.secretRef",
        secret: "github-oauth-app",
        key: "clientSecret",
        what: "upstream client secret",
    };
    let sent = |changed, registered_before| ValueSent {
        version: "v7",
        changed,
        registered_before,
        secret,
    };
    let written = after_apply(&applied, None, None, false, None);
    let changed = with_value_sent(written.clone(), Some(sent(true, true)));
    assert!(changed.fields.secret_set);
    assert_eq!(changed.fields.secret_version.as_deref(), Some("v7"));
    assert_eq!(changed.cause, Cause::SecretChanged);
    // The first value of a new object is set, not told as a change.
    let first = with_value_sent(written.clone(), Some(sent(true, false)));
    assert!(first.fields.secret_set);
    assert!(
        first
            .events
            .iter()
            .all(|e| e.reason != EventReason::SecretChanged)
    );
    let same = with_value_sent(written.clone(), Some(sent(false, true)));
    assert!(!same.fields.secret_set);
    assert_eq!(same.fields.secret_version.as_deref(), Some("v7"));
    let none = with_value_sent(written, None);
    assert_eq!(none.fields.secret_version, None);
    assert!(!none.fields.secret_set);
}

#[test]
fn only_a_registered_object_left_on_the_server_releases_its_generated_secret() {
    let generate = || SecretMode::Generate {
        secret_name: "web-oidc".into(),
    };
    assert_eq!(
        secret_to_release(Reason::Orphaned, generate(), true),
        Some("web-oidc".to_owned())
    );
    assert_eq!(
        secret_to_release(Reason::DeletionSkippedDrifted, generate(), true),
        Some("web-oidc".to_owned())
    );
    assert_eq!(secret_to_release(Reason::Orphaned, generate(), false), None);
    assert_eq!(secret_to_release(Reason::Deleted, generate(), true), None);
    assert_eq!(
        secret_to_release(Reason::Orphaned, SecretMode::Provided, true),
        None
    );
}

#[test]
fn a_write_in_force_keeps_what_the_approval_listed_and_a_restore_its_answer() {
    let approval = ApprovalRecord {
        generation: 2,
        fields: vec!["spec.redirectUris".into()],
        digest: "d".into(),
        ..ApprovalRecord::default()
    };
    let gate = PolicyGate::OpenApproved {
        approval: approval.clone(),
    };
    let applied = Applied {
        client_id: "cid".into(),
        revision: "r9".into(),
        generation_in_force: 2,
        created: false,
    };
    let written = after_apply(&applied, None, None, true, None);
    assert_eq!(
        with_approval(written.clone(), &gate).fields.approval,
        Some(approval)
    );
    assert_eq!(
        with_approval(written.clone(), &PolicyGate::Open)
            .fields
            .approval,
        None
    );
    // Nothing put in force: nothing kept.
    let orphaned = released(Reason::Orphaned);
    assert_eq!(with_approval(orphaned, &gate).fields.approval, None);

    let answered = restored(
        written,
        Some("2026-12-04T20:00:00Z".into()),
        Some("kubectl-nauthera".into()),
        Some("cid"),
        &applied,
        Some("r8"),
    );
    assert!(
        answered
            .message
            .ends_with("(requested by kubectl-nauthera)")
    );
    let record = answered.fields.last_restore.unwrap();
    assert_eq!(record.outcome, RestoreOutcome::Restored);
    assert_eq!(record.revision.as_deref(), Some("r9"));
    assert_eq!(record.overwritten_revision.as_deref(), Some("r8"));
    assert_eq!(record.requested_by.as_deref(), Some("kubectl-nauthera"));
}

#[test]
fn a_foreground_deletion_leaves_the_secret_to_the_collector_and_an_orphaned_one_is_released() {
    // Background: released before the manifest goes, so the collector keeps it.
    assert_eq!(secret_fate(SecretHeld::Owned, false), SecretFate::Release);
    // `--cascade=foreground`: the person asked for dependents to go; no race with the collector.
    assert_eq!(
        secret_fate(SecretHeld::Owned, true),
        SecretFate::LeaveToCollector
    );
    // `--cascade=orphan`: the collector removed the owner reference first; still labelled.
    assert_eq!(
        secret_fate(SecretHeld::OrphanedByCollector, false),
        SecretFate::Release
    );
    assert_eq!(secret_fate(SecretHeld::Absent, true), SecretFate::Absent);
    assert_eq!(secret_fate(SecretHeld::Other, false), SecretFate::NotOurs);
    assert_eq!(secret_fate(SecretHeld::Other, true), SecretFate::NotOurs);
}

#[test]
fn an_orphan_whose_secret_the_collector_takes_says_no_copy_stays() {
    for release in [
        SecretRelease::LeftToCollector {
            secret_name: "web".into(),
        },
        SecretRelease::Absent {
            secret_name: "web".into(),
        },
    ] {
        let verdict = released_with_secret(Reason::Orphaned, &release);
        assert_eq!(verdict.reason, Reason::Orphaned);
        assert!(!verdict.retried, "the manifest goes");
        assert!(
            verdict.message.contains("stays registered on the server")
                && verdict.message.contains("Secret web")
                && verdict.message.contains("no copy of the client secret"),
            "{}",
            verdict.message
        );
    }
}
