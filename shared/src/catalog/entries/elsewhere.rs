//! Another reconciler's object: ManagedElsewhere.

use super::{AUDIT_OBJECT, DESCRIBE, EVENTS, STATUS, audit_how};
use crate::catalog::{
    Cause, DiagnoseCheck, DiagnosisStep, Phase, Progress, ReadyStatus, Reason, ReasonEntry, Runbook,
};

pub(in crate::catalog) static MANAGED_ELSEWHERE: ReasonEntry = ReasonEntry {
    reason: Reason::ManagedElsewhere,
    ready: ReadyStatus::False,
    phase: Phase::Error,
    phase_while_retried: None,
    metric_label: "managed_elsewhere",
    causes: &[Cause::Claimed, Cause::TakenOver],
    progress: Progress::Stalled,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "Another reconciler manages the object on the server",
        summary: "The object this resource declares is written on the server by another \
            reconciler (another manager, in another cluster or shard), so this reconciler never \
            writes over it; Ready=False, phase Error.",
        meaning: &[
            "Every reconciler writes with its own manager name (`--manager`) and certificate \
             identity, and the server records both with every write. When the last write of \
             the object was made by another reconciler (a write that names a manager other than \
             this one's, and a declared generation), the object is that reconciler's: writing \
             over it would start a fight in which each undoes the other. The manager name alone \
             tells reconcilers apart (the replicas of one reconciler share it, whatever \
             certificate each has), so two reconcilers must never share one. \
             `status.managedElsewhere` names that manager, its identity, the revision and when \
             it wrote it.",
            "The `cause` metric label says how it came to this:",
            "- `claimed`: the other reconciler wrote the object before this resource ever did. \
             Two clusters (or two shards of one) declare the same issuer, namespace and name. \
             When they are different clusters, each needs its own cluster name \
             (`--cluster-name`), so that their namespaces map to different server namespaces \
             (`prod-eu/team-a`, `prod-us/team-a`); when it is one object declared twice, one of \
             the two manifests should go.\n\
             - `taken_over`: this reconciler wrote the object, and another reconciler wrote over \
             it since: a person handed it over with the `nauthera.io/take-over-from` \
             annotation there.",
        ],
        impact: &[
            "Nothing of this manifest is in force on the server: the object holds what the other \
             reconciler declares. For an OIDCClient with a generated secret, this namespace's \
             Secret holds no secret the server accepts once the other reconciler rotated it or \
             took it over.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The condition message and `status.managedElsewhere`: the other manager, \
                    its identity, its revision and when it wrote, beside this reconciler's own \
                    manager and namespace mapping (none: a collision between clusters is likely).",
                command: DESCRIBE,
                check: DiagnoseCheck::OtherManager,
            },
            DiagnosisStep {
                text: "The control plane of each cluster or shard: its cluster name, its scope, \
                    and overlaps with other shards.",
                command: STATUS,
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: concat!(
                    "The server's audit records: every write of the object, by manager and \
                     identity.",
                    audit_how!()
                ),
                command: AUDIT_OBJECT,
                check: DiagnoseCheck::AuditLog,
            },
            DiagnosisStep {
                text: "The events: a `ManagedElsewhere` event whenever another manager writes \
                    the object.",
                command: EVENTS,
                check: DiagnoseCheck::Events,
            },
        ],
        mitigation: &[
            "A collision between clusters: give each cluster's reconciler its own \
             `--cluster-name`, and list the mapped namespaces in the server's grants. The \
             manifests then declare different objects.",
            "The same object declared twice on purpose (a move to another cluster): hand it \
             over. Once the other side is ready to let go, run `kubectl -n <ns> annotate <kind> \
             <name> nauthera.io/take-over-from=<manager>` here, with the manager \
             `status.managedElsewhere` names. The reconciler writes the declared state over that \
             manager's revision, records a `TakenOver` event and removes the annotation; the \
             other reconciler's resource then shows `ManagedElsewhere` (cause `taken_over`) and \
             is best deleted with `deletionPolicy: Orphan`. A client with a generated secret \
             gets a new one, delivered here: restart the workloads that read it.",
            "Deleting this resource never deletes the other reconciler's object.",
        ],
        escalation: &[
            "A manager nobody recognises writing your objects is a security question: send the \
             audit records to the team that owns the identity platform before taking anything \
             over.",
        ],
    },
};
