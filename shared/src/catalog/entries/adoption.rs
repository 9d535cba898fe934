//! Objects the server holds that this reconciler does not manage (yet): Observed,
//! AdoptionRequired.

use super::{AUDIT_OBJECT, DESCRIBE, EVENTS, audit_how};
use crate::catalog::{
    Cause, DiagnoseCheck, DiagnosisStep, Phase, Progress, ReadyStatus, Reason, ReasonEntry, Runbook,
};

/// The object as the server holds it, from the resource's status.
const OBSERVED_STATUS: &str = "kubectl -n <ns> get <kind> <name> -o jsonpath='{.status.observed}'";

pub(in crate::catalog) static OBSERVED: ReasonEntry = ReasonEntry {
    reason: Reason::Observed,
    ready: ReadyStatus::False,
    phase: Phase::Observed,
    phase_while_retried: None,
    metric_label: "observed",
    causes: &[Cause::Identical, Cause::Differs, Cause::NotOnServer],
    progress: Progress::Observing,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "Observed only: the reconciler reads the object and never writes it",
        summary: "The manifest sets `managementPolicy: Observe`: the reconciler reads the object \
            it names on the server and reports what the server holds and where it differs from \
            the manifest, and writes nothing; Ready=False (not managed), phase Observed.",
        meaning: &[
            "An observed manifest describes an object the reconciler does not manage: nothing \
             is applied, deleted or minted, and no finalizer holds the manifest. The reconciler \
             reads the object when the server's change feed names it (and when the manifest \
             changes) and records under `status.observed` the revision the server holds, who \
             wrote it last (manager and actor) and when, and the fields where the manifest and \
             the server differ.",
            "The `cause` says how they compare: `identical` (the manifest declares what the \
             server holds), `differs` (`status.observed.differences` lists the fields), or \
             `not_on_server` (the server holds no object of this name).",
            "GitOps tools do not read it as managed: `Reconciling` and `Stalled` are False and \
             `Ready` is False with reason `Observed`. Argo CD shows it Suspended; kstatus (Flux's \
             `wait: true`) reads a False `Ready` as InProgress, so leave observed manifests out \
             of a Kustomization whose health Flux waits for; `kubectl wait \
             --for=condition=Ready` does not pass for an object nobody manages.",
        ],
        impact: &[
            "Nothing: the object on the server is whatever its writers make it. A client with a \
             generated secret gets no Secret while it is observed.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "What the server holds: the revision, who wrote it last and when, and the \
                    fields that differ from the manifest.",
                command: OBSERVED_STATUS,
                check: DiagnoseCheck::ServerObject,
            },
            DiagnosisStep {
                text: concat!(
                    "The server's audit records for the object: every write with its manager \
                     and actor.",
                    audit_how!()
                ),
                command: AUDIT_OBJECT,
                check: DiagnoseCheck::AuditLog,
            },
        ],
        mitigation: &[
            "To manage the object from this manifest, first make the manifest declare what you \
             want (the differences listed are what would be written), then set \
             `managementPolicy: Manage` (or remove the field). The reconciler takes the object \
             over from the revision the status showed: when the manifest declares what the \
             server holds, nothing is written; otherwise the declared state is written over \
             that revision only. A change on the server after that revision is reported as a \
             drift, never written over unseen. A client's generated secret is kept (no Secret is \
             delivered until `kubectl nauthera rotate <kind>/<name> -n <ns>`).",
            "To start from what the server holds, `kubectl nauthera export` writes observed \
             manifests of every object the reconciler's grant covers.",
        ],
        escalation: &[
            "An observed object that keeps changing without a known author is a question for \
             the team that owns the identity platform: attach `status.observed` and the audit \
             records.",
        ],
    },
};

pub(in crate::catalog) static ADOPTION_REQUIRED: ReasonEntry = ReasonEntry {
    reason: Reason::AdoptionRequired,
    ready: ReadyStatus::False,
    phase: Phase::Error,
    phase_while_retried: None,
    metric_label: "adoption_required",
    causes: &[
        Cause::ForeignObject,
        Cause::RevisionMismatch,
        Cause::ForeignSecret,
    ],
    progress: Progress::AwaitsDecision,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "The server already holds this object, written by somebody else",
        summary: "The manifest declares an object the server already holds, last written by a \
            person or a tool rather than this reconciler; it is not written over until a person \
            adopts it at the revision they saw; Ready=False, phase Error.",
        meaning: &[
            "Before the first write of a manifest the reconciler looks at the server. When it \
             holds an object of the same issuer, namespace and name that somebody else wrote \
             (through the dashboard, the admin API or dynamic registration: a write that names \
             no declared generation), writing the manifest over it could undo what its users \
             depend on. So the reconciler holds: `status.observed` names the revision, who \
             wrote it and when, and the fields where the manifest differs (cause \
             `foreign_object`).",
            "With cause `revision_mismatch`, `nauthera.io/adopt` names a revision the server no \
             longer holds: somebody changed the object after the person looked. Nothing is \
             written; look again and adopt the revision the status shows now.",
            "With cause `foreign_secret`, the adoption would mint a new client secret, but the \
             Secret it goes into (`spec.secret.secretName`, else the resource's name) is not \
             this resource's: another owner's, one left by an earlier manifest, or one the \
             reconciler may not read. Nothing is minted, so the secret the server's users hold \
             keeps working; the adoption goes ahead once the Secret is free.",
            "An object another reconciler writes (a write that names another manager and a \
             declared generation) is `ManagedElsewhere` instead, with its own take-over path.",
        ],
        impact: &[
            "Nothing of this manifest is in force on the server; the object keeps what it holds, \
             and a client with a generated secret has no Secret yet.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The object on the server: its revision, who wrote it last and when, and \
                    the fields where the manifest differs; and the revision \
                    `nauthera.io/adopt` names, if any.",
                command: OBSERVED_STATUS,
                check: DiagnoseCheck::ServerObject,
            },
            DiagnosisStep {
                text: concat!(
                    "The server's audit records for the object: who made it, and every change \
                     since.",
                    audit_how!()
                ),
                command: AUDIT_OBJECT,
                check: DiagnoseCheck::AuditLog,
            },
            DiagnosisStep {
                text: "The events: an `Adopted` event once the object is taken over.",
                command: EVENTS,
                check: DiagnoseCheck::Events,
            },
            DiagnosisStep {
                text: "The resource with its conditions and annotations.",
                command: DESCRIBE,
                check: DiagnoseCheck::None,
            },
        ],
        mitigation: &[
            "Take it over: `kubectl nauthera adopt <kind>/<name> -n <ns>` shows what the server \
             holds, the fields the manifest changes and what becomes of the secret, asks, then \
             sets `nauthera.io/adopt` to the revision shown, only on the resource as it was \
             shown (a change in between is a conflict: run it again). The reconciler reads the \
             object once and, when the server still holds that revision, writes the declared \
             state over exactly that revision (nothing, when the manifest declares what the \
             server holds and no secret is to be written), records `status.lastAdoption` and \
             an `Adopted` event naming whom it was adopted from. The annotation may stay in the \
             manifest in Git: once carried out, it is answered by `status.lastAdoption`.",
            "The secret (`nauthera.io/adopt-secret`, `Replace` by default): a client with \
             `spec.secret.generate` gets a new secret, minted with the adoption and delivered \
             into its Secret (restart what used the old one); `--keep-secret` \
             (`nauthera.io/adopt-secret=Keep`) keeps the one the server holds, and no Secret is \
             delivered until `kubectl nauthera rotate <kind>/<name> -n <ns>` or the rotation \
             schedule. A client with `spec.secret.secretRef` sends the team's secret, or with \
             `Keep` takes that Secret to hold the secret in force and sends it once its value \
             changes.",
            "With cause `revision_mismatch` the object changed after the person looked: \
             nothing was written; look at `status.observed` again and run `kubectl nauthera \
             adopt` once more, which names the revision the server holds now.",
            "Until a person adopts it, a new generation of the manifest is not written over the \
             object either; \
             an object removed from the server meanwhile is created as any new manifest.",
            "Look first without taking anything: set `managementPolicy: Observe`; the resource \
             then reports the object as `Observed`.",
            "Not the object you meant: rename the manifest (a client of another name is another \
             object), or delete it; a manifest that never wrote the object never deletes it.",
        ],
        escalation: &[
            "An object nobody recognises under a name your team declares is a question for the \
             team that owns the identity platform: attach the audit records before adopting it.",
        ],
    },
};
