//! Changes made behind the manifests' back: Drifted, Restored.

use super::{AUDIT_OBJECT, DESCRIBE, SECRET_CONSUMERS, audit_how};
use crate::catalog::{
    Cause, DiagnoseCheck, DiagnosisStep, Phase, Progress, ReadyStatus, Reason, ReasonEntry, Runbook,
};

pub(in crate::catalog) static DRIFTED: ReasonEntry = ReasonEntry {
    reason: Reason::Drifted,
    ready: ReadyStatus::False,
    phase: Phase::Error,
    phase_while_retried: None,
    metric_label: "drifted",
    causes: &[
        Cause::Edited,
        Cause::Removed,
        Cause::BackupRestore,
        Cause::RevisionMismatch,
        Cause::ManagerConflict,
    ],
    progress: Progress::AwaitsDecision,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "Changed on the server behind the manifest's back",
        summary: "The object was changed or removed on the server by something other than the \
            reconciler, which does not write over it; Ready=False, phase Error.",
        meaning: &[
            "The reconciler records the revision the server returned for its last write. When \
             the server's change hint moves and the object's revision no longer matches \
             (`edited`), or the object is gone (`removed`), something else changed it: a person \
             through the dashboard or the admin API, another tool, or a restore of the server \
             from an older backup (`backup_restore`). Only the server's facts make a drift a \
             restore: a new change-hint epoch, the audit log's `restore from backup` cause, or \
             an older write of the reconciler's own back in force; edits by several people close \
             together stay separate edits. The cause is in `status.cause`. \
             A write refused because the server holds another revision, or none, means the same \
             (`revision_mismatch`, `manager_conflict`).",
            "The status says what the reconciler found under `status.drift`: the revision the \
             server holds, when it changed, who changed it (the manager the write named and the \
             actor from the server's audit log), and which fields differ; or that the object is \
             gone.",
        ],
        impact: &[
            "The live object differs from what the team declared: redirect URIs, scopes or the \
             sign-in page may not be theirs. A removed client means its users cannot sign in.",
            "Writing the declared state back could undo an emergency change somebody made on \
             purpose, so the reconciler leaves the object alone and waits for a person to \
             decide.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "Both revisions: the one the reconciler wrote (`status.revision`) and the \
                    one the server holds (`status.drift.serverRevision`), and when it changed.",
                command: DESCRIBE,
                check: DiagnoseCheck::DriftRevisions,
            },
            DiagnosisStep {
                text: "Who changed it (manager, actor) and which fields differ.",
                command: "kubectl -n <ns> get <kind> <name> -o jsonpath='{.status.drift}'",
                check: DiagnoseCheck::DriftWho,
            },
            DiagnosisStep {
                text: concat!(
                    "The server's audit log for the client: every write with its manager, actor \
                     and cause, newest first.",
                    audit_how!()
                ),
                command: AUDIT_OBJECT,
                check: DiagnoseCheck::AuditLog,
            },
            DiagnosisStep {
                text: "How many resources drifted, how many of them by a restore of the server \
                    (cause `backup_restore`), and who made the other changes.",
                command: "kubectl get oidcclients,brandings,identityproviders,organizations -A | grep Drifted",
                check: DiagnoseCheck::DriftCount,
            },
        ],
        mitigation: &[
            "Keep the change: put it into the manifest. Its next generation is written to the \
             server and the resource returns to `Registered`. The reconciler compares each field \
             the drift changed with what the new generation declares: a field it declares as the \
             server held it is kept (a Normal `DriftAdopted` event names it, and the write's \
             cause is `drift_kept` when every changed field is kept); any other field is written \
             over and its change discarded (a Warning `DriftSuperseded` event names those \
             fields). `status.lastDrift` records who made the change, the fields it had changed, \
             which were kept (`kept`) and both revisions (`kubectl nauthera status` and \
             `diagnose` show it).",
            "Undo the change: `kubectl nauthera restore <kind>/<name> -n <ns>`, or \
             `kubectl -n <ns> annotate <kind> <name> nauthera.io/restore=true`. The reconciler \
             writes the declared state, records a `Restored` event and removes the annotation. \
             A removed client is created again with a new secret, delivered into its Secret: \
             restart the workloads that use it (`kubectl nauthera restore` names them).",
            "Many at once after a restore of the server: once the restore is understood, \
             `kubectl nauthera restore --all-drifted` writes every drifted resource back.",
        ],
        escalation: &[
            "A change nobody can explain is a security matter: send the audit records to the \
             team that owns the identity platform before restoring anything. Many resources \
             drifting at once after a database restore go to whoever ran the restore.",
        ],
    },
};

pub(in crate::catalog) static RESTORED: ReasonEntry = ReasonEntry {
    reason: Reason::Restored,
    ready: ReadyStatus::True,
    phase: Phase::Registered,
    phase_while_retried: None,
    metric_label: "restored",
    causes: &[Cause::Edited, Cause::Removed, Cause::BackupRestore],
    progress: Progress::Settled,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "Written back over a drift on request",
        summary: "The reconciler wrote the declared state over a drifted object because the \
            resource carried `nauthera.io/restore=true`; the condition then returns to \
            Registered.",
        meaning: &[
            "Someone asked for a drift to be undone, with `kubectl nauthera restore` or the \
             annotation `nauthera.io/restore=true`. The reconciler wrote the declared generation \
             over the server's object (or created it again if it had been removed), recorded a \
             `Restored` event, removed the annotation and set the condition back to \
             `Registered`. The server's audit log records the write under the reconciler's \
             manager name.",
            "`status.lastRestore` says which request was carried out: the \
             `nauthera.io/restore-request` annotation that came with it (`kubectl nauthera \
             restore` sets one per run and waits for it there), the revision written, the \
             drifted revision it wrote over and when. A request that finds nothing drifted is \
             answered there too, with outcome `NotDrifted`, and writes nothing to the server.",
        ],
        impact: &[
            "The change made on the server is gone. A client that had been removed was created \
             again with a new secret, so workloads holding the old one fail until they read the \
             new one.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "Which restore request was carried out, and when: `status.lastRestore`.",
                command: "kubectl -n <ns> get <kind> <name> -o jsonpath='{.status.lastRestore}'",
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "The `Restored` event: when, and which revision was written.",
                command: "kubectl -n <ns> get events --field-selector involvedObject.name=<name>,reason=Restored",
                check: DiagnoseCheck::Events,
            },
            DiagnosisStep {
                text: "The condition is `Registered` again and `status.revision` is the new \
                    revision.",
                command: DESCRIBE,
                check: DiagnoseCheck::ConditionMessage,
            },
            DiagnosisStep {
                text: "The pods that mount the client's Secret and may need a restart.",
                command: SECRET_CONSUMERS,
                check: DiagnoseCheck::SecretConsumers,
            },
        ],
        mitigation: &[
            "If the client was created again, restart the workloads that read its Secret only at \
             start-up.",
            "If the restore undid a change that was needed after all, put that change into the \
             manifest; it is written with the next generation.",
        ],
        escalation: &[
            "None, usually. If the same object drifts again soon after, someone or something \
             keeps changing it on the server: find them in the audit log (see \
             [Drifted](Drifted.md)) and take it to the team that owns the identity platform.",
        ],
    },
};
