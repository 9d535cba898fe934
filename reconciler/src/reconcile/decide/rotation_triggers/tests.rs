//! Plain-value tests of the rotations a request or the schedule starts.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nauthera_shared::catalog::EventReason;
use nauthera_shared::resources::{
    DeletionPolicy, LocalRef, Planned, ResourceStatus, RotationOutcome, RotationRecord,
};

use super::super::outcome::in_force;
use super::super::*;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

/// Registered at generation 1 as revision r1, its secret delivered into Secret `app`.
fn delivered() -> ResourceStatus {
    let verdict = in_force(1, "r1", false);
    let mut status = status_after(None, &verdict, 1, at(0)).unwrap();
    status.revision = Some("r1".into());
    status.generation_in_force = Some(1);
    status.client_id = Some("cid".into());
    status.secret_ref = Some(LocalRef { name: "app".into() });
    status.secret_set_time = Some(Time(at(0)));
    status
}

fn request(nonce: &str) -> RotationRequest {
    RotationRequest {
        request: nonce.into(),
        requested_by: Some("kubectl-nauthera".into()),
        requested_at: Some(at(50)),
    }
}

fn observed(status: &ResourceStatus) -> Observed<'_> {
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
        status: Some(status),
        secret_mode: SecretMode::Generate {
            secret_name: "app".into(),
        },
        secret_pending: false,
        unrecorded_secrets: Vec::new(),
        secret_state: SecretState::Owned { has_value: true },
        provided_secret_changed: false,
        server: ServerView::Holds {
            revision: "r1".into(),
        },
        retry_not_before: None,
        prerequisites: Standing::default(),
        policy: PolicyGate::Open,
        now: at(100),
    }
}

fn requested() -> Rotation {
    Rotation::Requested {
        by: Some("kubectl-nauthera".into()),
        at: Some(at(50)),
    }
}

/// A change to the observed facts, for a table of cases.
type Change = Box<dyn Fn(&mut Observed<'_>)>;

#[test]
fn a_request_mints_once_and_is_then_only_answered() {
    let status = delivered();
    let cases: Vec<(&str, Change, Step)> = vec![
        (
            "a request the Secret does not hold yet mints a new secret",
            Box::new(|o| o.rotation_request = Some(request("n1"))),
            Step::Apply {
                if_revision: Some("r1".into()),
                rotate: Some(requested()),
                restore: false,
            },
        ),
        (
            "the Secret holds that request's secret (an answer or a clean-up lost): only answered",
            Box::new(|o| {
                o.rotation_request = Some(request("n1"));
                o.delivered_request = Some("n1".into());
            }),
            Step::ClearRotateAnnotation,
        ),
        (
            "a Secret holding an earlier request's secret does not answer a new one",
            Box::new(|o| {
                o.rotation_request = Some(request("n2"));
                o.delivered_request = Some("n1".into());
            }),
            Step::Apply {
                if_revision: Some("r1".into()),
                rotate: Some(requested()),
                restore: false,
            },
        ),
        (
            "the Secret is read before anything is decided",
            Box::new(|o| {
                o.rotation_request = Some(request("n1"));
                o.secret_state = SecretState::Unknown;
            }),
            Step::ReadSecret,
        ),
        (
            "the server holds a revision not recorded (the lost answer): looked at first",
            Box::new(|o| {
                o.rotation_request = Some(request("n1"));
                o.server = ServerView::Holds {
                    revision: "r2".into(),
                };
            }),
            Step::CheckDrift,
        ),
        (
            "a secret the team holds is never rotated here: the request is answered",
            Box::new(|o| {
                o.rotation_request = Some(request("n1"));
                o.secret_mode = SecretMode::Provided;
                o.secret_state = SecretState::NotApplicable;
            }),
            Step::ClearRotateAnnotation,
        ),
        (
            "a minted secret waiting for its Secret is delivered first",
            Box::new(|o| {
                o.rotation_request = Some(request("n1"));
                o.secret_pending = true;
            }),
            Step::DeliverSecret,
        ),
        (
            "a deleted Secret is minted again, which carries the request out too",
            Box::new(|o| {
                o.rotation_request = Some(request("n1"));
                o.secret_state = SecretState::Absent;
            }),
            Step::Apply {
                if_revision: Some("r1".into()),
                rotate: Some(Rotation::Deleted),
                restore: false,
            },
        ),
    ];
    for (name, change, expected) in cases {
        let mut o = observed(&status);
        change(&mut o);
        assert_eq!(next_step(&o), expected, "{name}");
    }
}

#[test]
fn a_request_the_status_answered_is_only_cleared() {
    let mut status = delivered();
    status.last_rotation = Some(Box::new(RotationRecord {
        request: Some("n1".into()),
        requested_by: None,
        outcome: RotationOutcome::Requested,
        time: Some(Time(at(60))),
    }));
    let mut o = observed(&status);
    o.rotation_request = Some(request("n1"));
    o.secret_state = SecretState::Unknown;
    assert_eq!(next_step(&o), Step::ClearRotateAnnotation);
    assert_eq!(
        rotation_answered(Some(&status), &request("n1"), true, at(100)),
        None,
        "no status write for an answer recorded"
    );
}

#[test]
fn an_answer_without_a_mint_says_why() {
    let status = delivered();
    let answered = rotation_answered(Some(&status), &request("n1"), false, at(100)).unwrap();
    let record = answered.last_rotation.unwrap();
    assert_eq!(record.outcome, RotationOutcome::NotGenerated);
    assert_eq!(record.request.as_deref(), Some("n1"));
    assert_eq!(record.requested_by.as_deref(), Some("kubectl-nauthera"));
    assert_eq!(record.time, Some(Time(at(100))));
    let done = rotation_answered(Some(&status), &request("n1"), true, at(100)).unwrap();
    assert_eq!(
        done.last_rotation.unwrap().outcome,
        RotationOutcome::Requested
    );
}

#[test]
fn the_schedule_rotates_when_due_and_otherwise_waits_until_then() {
    let status = delivered();
    let mut o = observed(&status);
    o.scheduled = Some(ScheduledRotation {
        every: "90d".into(),
        planned: Planned::Due,
    });
    assert_eq!(
        next_step(&o),
        Step::Apply {
            if_revision: Some("r1".into()),
            rotate: Some(Rotation::Scheduled {
                every: "90d".into()
            }),
            restore: false,
        }
    );
    o.scheduled = Some(ScheduledRotation {
        every: "90d".into(),
        planned: Planned::At(at(160)),
    });
    assert_eq!(
        next_step(&o),
        Step::Wait {
            after: Some(Duration::from_secs(60))
        }
    );
    // Far away: looked at again within a day, without a call to the server.
    o.scheduled = Some(ScheduledRotation {
        every: "90d".into(),
        planned: Planned::At(at(100 + 80 * 86_400)),
    });
    assert_eq!(
        next_step(&o),
        Step::Wait {
            after: Some(Duration::from_secs(86_400))
        }
    );
    // A request goes before the schedule.
    o.rotation_request = Some(request("n1"));
    assert!(matches!(
        next_step(&o),
        Step::Apply {
            rotate: Some(Rotation::Requested { .. }),
            ..
        }
    ));
}

#[test]
fn a_delivered_rotation_is_recorded_with_who_asked() {
    let applied = Applied {
        client_id: "cid".into(),
        revision: "r2".into(),
        generation_in_force: 1,
        created: false,
    };
    let verdict = after_apply(
        &applied,
        Some("app"),
        Some(Ok(())),
        false,
        Some(&requested()),
    );
    let verdict = with_rotation_recorded(verdict, Some(&requested()), Some(&request("n1")));
    let status = status_after(Some(&delivered()), &verdict, 1, at(100)).unwrap();
    let record = status.last_rotation.clone().unwrap();
    assert_eq!(record.request.as_deref(), Some("n1"));
    assert_eq!(record.requested_by.as_deref(), Some("kubectl-nauthera"));
    assert_eq!(record.outcome, RotationOutcome::Requested);
    assert_eq!(
        status.secret_set_time,
        Some(Time(at(100))),
        "secretSetTime moves"
    );

    // Not delivered: nothing recorded, the request waits.
    let failed = after_apply(
        &applied,
        Some("app"),
        Some(Err(SecretWriteFailure::Other {
            message: "timeout".into(),
        })),
        false,
        Some(&requested()),
    );
    let failed = with_rotation_recorded(failed, Some(&requested()), Some(&request("n1")));
    assert_eq!(failed.fields.last_rotation, None);

    // A scheduled one is recorded as such.
    let scheduled = Rotation::Scheduled { every: "1d".into() };
    let verdict = after_apply(&applied, Some("app"), Some(Ok(())), false, Some(&scheduled));
    let verdict = with_rotation_recorded(verdict, Some(&scheduled), None);
    assert_eq!(
        verdict.fields.last_rotation.map(|r| r.outcome),
        Some(RotationOutcome::Scheduled)
    );
}

#[test]
fn the_rotated_event_says_who_asked_and_when_and_who_reads_the_secret() {
    let applied = Applied {
        client_id: "cid".into(),
        revision: "r2".into(),
        generation_in_force: 1,
        created: false,
    };
    let verdict = after_apply(
        &applied,
        Some("app"),
        Some(Ok(())),
        false,
        Some(&requested()),
    );
    let verdict = rotated(
        verdict,
        &requested(),
        "app",
        "team-a",
        &Readers::Found(Vec::new()),
        None,
    );
    let event = verdict
        .events
        .iter()
        .find(|e| e.reason == EventReason::SecretRotated)
        .expect("a SecretRotated event");
    assert!(event.note.contains("requested"), "{}", event.note);
    assert!(event.note.contains("by kubectl-nauthera"), "{}", event.note);
    assert!(event.note.contains(&at(50).to_string()), "{}", event.note);
    assert!(
        event
            .note
            .contains("no Deployment, StatefulSet or DaemonSet"),
        "{}",
        event.note
    );
}

/// The throttled scenario's lost rotation: a term ended after the server minted the requested
/// secret and before the Secret was written. The next term's first decision (its listing not in
/// yet) writes the rotation again over the revision the status records, meets a conflict, and
/// the check adopts the server's revision, the reconciler's own write: that verdict carries the
/// request out with no new secret while the Secret holds the value before, so the request is
/// decided again at once (it was left for a watch event that never came).
#[test]
fn a_rotation_request_behind_a_step_that_did_not_carry_it_out_is_decided_at_once() {
    let status = delivered();
    let mut first = observed(&status);
    first.server = ServerView::Unknown;
    first.rotation_request = Some(request("n2"));
    first.delivered_request = Some("n1".into());
    let step = next_step(&first);
    assert_eq!(
        step,
        Step::Apply {
            if_revision: Some("r1".into()),
            rotate: Some(requested()),
            restore: false,
        }
    );
    let held = Applied {
        client_id: "cid".into(),
        revision: "r2".into(),
        generation_in_force: 1,
        created: false,
    };
    let own_write_adopted = adopted(
        &held,
        1,
        true,
        super::super::outcome::AdoptedFrom::LostAnswer,
    );
    assert_eq!(own_write_adopted.reason, Reason::Registered);
    let waiting = first.rotation_request.clone();
    assert!(rotation_waits_after(
        &step,
        waiting.as_ref(),
        &own_write_adopted
    ));
    // Decided again over the adopted revision: the Secret does not hold the request's secret.
    let mut status = status;
    status.revision = Some("r2".into());
    let mut again = observed(&status);
    again.server = ServerView::Holds {
        revision: "r2".into(),
    };
    again.rotation_request = waiting.clone();
    again.delivered_request = Some("n1".into());
    assert_eq!(
        next_step(&again),
        Step::Apply {
            if_revision: Some("r2".into()),
            rotate: Some(requested()),
            restore: false,
        }
    );

    // Carried out (the delivery recorded the request): nothing follows.
    let delivered = with_rotation_recorded(
        after_apply(&held, Some("app"), Some(Ok(())), false, Some(&requested())),
        Some(&requested()),
        waiting.as_ref(),
    );
    assert!(!rotation_waits_after(&step, waiting.as_ref(), &delivered));
    // A check that found the server as written, or a write without a rotation, while a request
    // waits: decided at once.
    let agreed = no_drift(1, "r2");
    assert!(rotation_waits_after(
        &Step::CheckDrift,
        waiting.as_ref(),
        &agreed
    ));
    let declared = Step::Apply {
        if_revision: Some("r1".into()),
        rotate: None,
        restore: false,
    };
    assert!(rotation_waits_after(&declared, waiting.as_ref(), &agreed));
    // Nothing waits; or the step is not one before the rotation's decision (no loop).
    assert!(!rotation_waits_after(&Step::CheckDrift, None, &agreed));
    assert!(!rotation_waits_after(
        &Step::HoldByPolicy,
        waiting.as_ref(),
        &agreed
    ));
    // A drift is reported and waits for a person; a failed step is retried with backoff.
    let report = DriftReport {
        server_revision: "r3".into(),
        manager: Some("dashboard".into()),
        ..DriftReport::default()
    };
    assert!(!rotation_waits_after(
        &Step::CheckDrift,
        waiting.as_ref(),
        &drifted(&report, Some("r2"))
    ));
    let mut failed = no_drift(1, "r2");
    failed.retried = true;
    assert!(!rotation_waits_after(
        &Step::CheckDrift,
        waiting.as_ref(),
        &failed
    ));
}

/// The throttled scenario's dead value: a term ended after the server minted a secret for a new
/// `spec.secret.secretName` and after the Secret was written, before the status recorded it;
/// the next term rotated again from the Secret the status named. The Secret written in between,
/// owned by the resource and recorded nowhere, is removed once the secret in force is settled.
#[test]
fn a_secret_delivered_by_a_term_that_ended_before_its_status_is_removed() {
    let mut status = delivered();
    status.secret_ref = Some(LocalRef {
        name: "app-s9".into(),
    });
    let mut settled = observed(&status);
    settled.secret_mode = SecretMode::Generate {
        secret_name: "app-s9".into(),
    };
    settled.unrecorded_secrets = vec!["app-s2".into(), "app-s9".into()];
    assert_eq!(
        next_step(&settled),
        Step::RemoveStaleSecret {
            name: "app-s2".into()
        }
    );
    // Only the Secret in force: nothing to remove.
    settled.unrecorded_secrets = vec!["app-s9".into()];
    assert_eq!(next_step(&settled), Step::Wait { after: None });
    // While the status still records another Secret, the rename (or its clean-up) comes first.
    let mut moving = observed(&status);
    moving.secret_mode = SecretMode::Generate {
        secret_name: "app-s10".into(),
    };
    moving.secret_state = SecretState::Absent;
    moving.unrecorded_secrets = vec!["app-s2".into(), "app-s9".into()];
    assert!(matches!(
        next_step(&moving),
        Step::Apply {
            rotate: Some(Rotation::Renamed { .. }),
            ..
        }
    ));
    // The removal is told, and the status keeps naming the Secret in force.
    let verdict = stale_secret_removed(
        1,
        "r1",
        "app-s2",
        &StaleRemoval::Removed,
        &Readers::Found(Vec::new()),
        Some("app-s9"),
        "team-a",
    );
    assert_eq!(
        verdict.fields.secret_ref,
        Update::Set(LocalRef {
            name: "app-s9".into()
        })
    );
    assert!(
        verdict
            .events
            .iter()
            .any(|event| event.reason == EventReason::SecretRemoved
                && event.note.contains("removed Secret app-s2"))
    );
}
