//! Objects another reconciler manages: recognising its writes, saying so, and handing an object
//! over on request.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nauthera_shared::catalog::{Cause, EventReason, Reason};
use nauthera_shared::resources::{ManagedElsewhere, ResourceStatus, TakeOverRecord};
use nauthera_shared::topology::TAKE_OVER_ANNOTATION;

use super::{DriftUpdate, Verdict};

/// Who the server says wrote an object last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LastWrite<'a> {
    pub manager: &'a str,
    pub actor: &'a str,
    /// The declared generation the write named; 0 for a write that named none.
    pub generation: i64,
}

/// Whose write the server holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// This reconciler's own manager, with its identity.
    Own,
    /// Another reconciler: a write that names another manager and a declared generation, as
    /// only a reconciler of manifests does.
    OtherReconciler,
    /// A person (the dashboard) or a tool that names no declared generation: a drift.
    Other,
}

/// Tells the writer of the last write apart by its manager. The manager name is what tells
/// reconcilers apart: the replicas of one reconciler share it whatever certificate identity
/// each has (a per-pod certificate, or a new one after every restart), so the actor never
/// decides.
pub fn writer(last: &LastWrite<'_>, own_manager: &str) -> Writer {
    let declared = !last.manager.is_empty() && last.generation > 0;
    if last.manager == own_manager {
        Writer::Own
    } else if declared {
        Writer::OtherReconciler
    } else {
        Writer::Other
    }
}

/// The object is another reconciler's: said, never written over. `written_revision`: the
/// revision this resource last wrote (a handover away from it), `None` when it never wrote one
/// (two clusters or shards declare the same object).
pub fn managed_elsewhere(
    elsewhere: &ManagedElsewhere,
    written_revision: Option<&str>,
    namespace_mapped: bool,
) -> Verdict {
    let by = elsewhere.writer();
    let at = elsewhere
        .written_at
        .as_ref()
        .map(|time| format!(" at {}", time.0))
        .unwrap_or_default();
    let mut message = format!(
        "the object on the server is managed by another reconciler: {by} wrote revision {}{at} \
         (its generation {})",
        elsewhere.revision, elsewhere.generation
    );
    let cause = match written_revision {
        Some(revision) => {
            message.push_str(&format!(
                "; it wrote over revision {revision} of this resource (a handover)"
            ));
            Cause::TakenOver
        }
        None => {
            message.push_str("; this resource never wrote it: two manifests declare one object");
            if !namespace_mapped {
                message.push_str(
                    " (in two clusters, give each its own --cluster-name so their namespaces \
                     differ on the server)",
                );
            }
            Cause::Claimed
        }
    };
    message.push_str(&format!(
        "; not written over: annotate {TAKE_OVER_ANNOTATION}={} to take it over",
        elsewhere.manager
    ));
    let mut verdict = Verdict::new(Reason::ManagedElsewhere, cause, message);
    verdict.fields.managed_elsewhere = Some(elsewhere.clone());
    verdict.fields.drift = DriftUpdate::Clear;
    verdict
}

/// A take-over annotation that names another manager than the one that wrote last: nothing is
/// written, so that a handover never takes what the person did not see.
pub fn take_over_refused(elsewhere: &ManagedElsewhere, named: &str, cause: Cause) -> Verdict {
    let message = format!(
        "{TAKE_OVER_ANNOTATION} names manager {named:?}, but manager {} wrote the object last \
         (revision {}): not taken over; set the annotation to {} to take it from that manager",
        elsewhere.manager, elsewhere.revision, elsewhere.manager
    );
    let mut verdict = Verdict::new(Reason::ManagedElsewhere, cause, message);
    verdict.fields.managed_elsewhere = Some(elsewhere.clone());
    verdict
}

/// A write that took the object over: recorded, and told in a `TakenOver` event.
pub fn taken_over(mut verdict: Verdict, from: &ManagedElsewhere) -> Verdict {
    let Some(revision) = verdict.fields.revision.clone() else {
        return verdict;
    };
    let note = format!(
        "took the object over from manager {} (its revision {}), as revision {revision}",
        from.manager, from.revision
    );
    verdict.events.push(super::EventNote {
        reason: EventReason::TakenOver,
        note,
    });
    verdict.fields.last_take_over = Some(TakeOverRecord {
        from_manager: from.manager.clone(),
        from_revision: from.revision.clone(),
        revision,
        completed_at: None,
    });
    verdict
}

/// The manifest of an object another reconciler manages is deleted: the object stays theirs.
pub fn released_elsewhere(elsewhere: &ManagedElsewhere) -> Verdict {
    Verdict::new(
        Reason::Orphaned,
        Cause::None,
        format!(
            "the object on the server is managed by manager {}, so it was left in place",
            elsewhere.manager
        ),
    )
}

/// The object another reconciler managed is gone from the server: declared from here next.
pub fn elsewhere_gone(elsewhere: &ManagedElsewhere) -> Verdict {
    let mut verdict = Verdict::new(
        Reason::Pending,
        Cause::None,
        format!(
            "the object manager {} wrote is gone from the server; this resource declares it next",
            elsewhere.manager
        ),
    );
    verdict.retried = true;
    // Kept, so that the next step looks at the object as someone else's that is gone.
    verdict.fields.managed_elsewhere = Some(elsewhere.clone());
    verdict
}

/// Whose resource this is, by the manager that writes its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatusClaim {
    /// This reconciler's (or nobody's yet).
    Ours,
    /// Another reconciler writes its status (an overlapping shard): left alone.
    Another { manager: String },
    /// Another reconciler wrote it, and a person hands it over to this one: its object is taken
    /// over from the revision that reconciler recorded.
    HandedOver { from: ManagedElsewhere },
}

/// Decides whether this reconciler may act on the resource at all.
pub fn status_claim(
    status: Option<&ResourceStatus>,
    own_manager: &str,
    take_over_from: Option<&str>,
) -> StatusClaim {
    let Some(status) = status else {
        return StatusClaim::Ours;
    };
    let Some(owner) = status.manager.as_deref().filter(|m| *m != own_manager) else {
        return StatusClaim::Ours;
    };
    match (take_over_from, &status.revision) {
        (Some(named), Some(revision)) if named == owner => StatusClaim::HandedOver {
            from: ManagedElsewhere {
                manager: owner.to_owned(),
                revision: revision.clone(),
                generation: status.generation_in_force.unwrap_or_default(),
                ..ManagedElsewhere::default()
            },
        },
        // Nothing on the server came from it: simply this reconciler's from now on.
        (Some(named), None) if named == owner => StatusClaim::Ours,
        _ => StatusClaim::Another {
            manager: owner.to_owned(),
        },
    }
}

/// The status a reconcile works from, once the resource is claimed: one handed over to this
/// reconciler names the reconciler it is taken over from, unless it names one already. `Err`
/// with the manager of another reconciler that keeps the resource.
pub fn claimed_status(
    status: Option<ResourceStatus>,
    own_manager: &str,
    take_over_from: Option<&str>,
) -> Result<Option<ResourceStatus>, String> {
    match status_claim(status.as_ref(), own_manager, take_over_from) {
        StatusClaim::Ours => Ok(status),
        StatusClaim::Another { manager } => Err(manager),
        StatusClaim::HandedOver { from } => Ok(status.map(|mut status| {
            if status.managed_elsewhere.is_none() {
                status.managed_elsewhere = Some(Box::new(from));
            }
            status
        })),
    }
}

/// `status.managedElsewhere` from the last write the server reports.
pub fn elsewhere_record(
    last: &LastWrite<'_>,
    revision: &str,
    written_at: Option<Timestamp>,
) -> ManagedElsewhere {
    ManagedElsewhere {
        manager: last.manager.to_owned(),
        actor: Some(last.actor.to_owned()).filter(|a| !a.is_empty()),
        revision: revision.to_owned(),
        generation: last.generation,
        written_at: written_at.map(Time),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str = "nauthera-reconciler/prod-eu";

    fn last(manager: &'static str, actor: &'static str, generation: i64) -> LastWrite<'static> {
        LastWrite {
            manager,
            actor,
            generation,
        }
    }

    #[test]
    fn a_write_naming_a_manager_and_a_generation_is_a_reconcilers() {
        assert_eq!(
            writer(
                &last("nauthera-reconciler/prod-eu", "dns:eu.example", 3),
                OWN
            ),
            Writer::Own
        );
        assert_eq!(
            writer(
                &last("nauthera-reconciler/prod-us", "dns:us.example", 1),
                OWN
            ),
            Writer::OtherReconciler
        );
        // Another replica of this reconciler (its own certificate): still this reconciler.
        assert_eq!(
            writer(
                &last("nauthera-reconciler/prod-eu", "dns:replica-b.example", 1),
                OWN
            ),
            Writer::Own
        );
        // A person through the dashboard, a tool without generations: drift.
        assert_eq!(
            writer(&last("", "user:alice@example.com", 0), OWN),
            Writer::Other
        );
        assert_eq!(writer(&last("terraform", "dns:tf", 0), OWN), Writer::Other);
    }

    fn elsewhere() -> ManagedElsewhere {
        ManagedElsewhere {
            manager: "nauthera-reconciler/prod-us".into(),
            actor: Some("dns:us.example".into()),
            revision: "r9".into(),
            generation: 2,
            written_at: None,
        }
    }

    #[test]
    fn the_message_tells_a_collision_from_a_handover() {
        let claimed = managed_elsewhere(&elsewhere(), None, false);
        assert_eq!(claimed.reason, Reason::ManagedElsewhere);
        assert_eq!(claimed.cause, Cause::Claimed);
        assert!(
            claimed
                .message
                .contains("manager nauthera-reconciler/prod-us (dns:us.example)")
        );
        assert!(
            claimed.message.contains("--cluster-name"),
            "{}",
            claimed.message
        );
        assert!(claimed.message.ends_with(
            "annotate nauthera.io/take-over-from=nauthera-reconciler/prod-us to take it over"
        ));
        let mapped = managed_elsewhere(&elsewhere(), None, true);
        assert!(!mapped.message.contains("--cluster-name"));
        let handed = managed_elsewhere(&elsewhere(), Some("r4"), true);
        assert_eq!(handed.cause, Cause::TakenOver);
        assert!(handed.message.contains("wrote over revision r4"));
        assert_eq!(handed.fields.managed_elsewhere, Some(elsewhere()));
    }

    #[test]
    fn a_resource_another_reconciler_writes_is_left_alone_unless_handed_over() {
        let mut status = ResourceStatus {
            manager: Some("nauthera-reconciler/shard-a".into()),
            revision: Some("r3".into()),
            generation_in_force: Some(2),
            ..ResourceStatus::default()
        };
        let mine = "nauthera-reconciler/shard-b";
        assert_eq!(status_claim(None, mine, None), StatusClaim::Ours);
        assert_eq!(
            status_claim(Some(&status), mine, None),
            StatusClaim::Another {
                manager: "nauthera-reconciler/shard-a".into()
            }
        );
        assert_eq!(
            status_claim(Some(&status), mine, Some("someone-else")),
            StatusClaim::Another {
                manager: "nauthera-reconciler/shard-a".into()
            }
        );
        let StatusClaim::HandedOver { from } =
            status_claim(Some(&status), mine, Some("nauthera-reconciler/shard-a"))
        else {
            panic!("handed over");
        };
        assert_eq!((from.revision.as_str(), from.generation), ("r3", 2));
        assert_eq!(
            status_claim(Some(&status), "nauthera-reconciler/shard-a", None),
            StatusClaim::Ours
        );
        status.revision = None;
        assert_eq!(
            status_claim(Some(&status), mine, Some("nauthera-reconciler/shard-a")),
            StatusClaim::Ours
        );
    }

    #[test]
    fn a_status_handed_over_names_the_reconciler_it_is_taken_over_from() {
        let shard_a = "nauthera-reconciler/shard-a";
        let mine = "nauthera-reconciler/shard-b";
        let status = ResourceStatus {
            manager: Some(shard_a.into()),
            revision: Some("r3".into()),
            generation_in_force: Some(2),
            ..ResourceStatus::default()
        };
        assert_eq!(
            claimed_status(Some(status.clone()), mine, None),
            Err(shard_a.to_owned())
        );
        assert_eq!(claimed_status(None, mine, None), Ok(None));
        let handed = claimed_status(Some(status.clone()), mine, Some(shard_a))
            .unwrap()
            .unwrap();
        let from = handed.managed_elsewhere.unwrap();
        assert_eq!(
            (
                from.manager.as_str(),
                from.revision.as_str(),
                from.generation
            ),
            (shard_a, "r3", 2)
        );
        // One it names already is kept.
        let named = ResourceStatus {
            managed_elsewhere: Some(Box::new(ManagedElsewhere {
                manager: shard_a.into(),
                revision: "r1".into(),
                ..ManagedElsewhere::default()
            })),
            ..status
        };
        let kept = claimed_status(Some(named), mine, Some(shard_a))
            .unwrap()
            .unwrap();
        assert_eq!(kept.managed_elsewhere.unwrap().revision, "r1");
    }

    #[test]
    fn a_take_over_of_another_manager_is_refused_and_a_done_one_recorded() {
        let refused = take_over_refused(&elsewhere(), "someone-else", Cause::Claimed);
        assert_eq!(refused.reason, Reason::ManagedElsewhere);
        assert!(refused.message.contains("names manager \"someone-else\""));
        let mut written = Verdict::new(Reason::Registered, Cause::None, "in force".into());
        written.fields.revision = Some("r10".into());
        let taken = taken_over(written, &elsewhere());
        assert_eq!(taken.events[0].reason, EventReason::TakenOver);
        assert!(taken.events[0].note.contains(
            "from manager nauthera-reconciler/prod-us (its revision r9), as revision r10"
        ));
        let record = taken.fields.last_take_over.unwrap();
        assert_eq!(
            (record.from_revision.as_str(), record.revision.as_str()),
            ("r9", "r10")
        );
    }
}
