//! Deleting a manifest: Deleting, and the outcomes Deleted, Orphaned, DeletionSkippedDrifted.

use super::{AUDIT_ORGANIZATION, DESCRIBE, EVENTS, RESOURCE_LOGS, STATUS, audit_how};
use crate::catalog::{
    Cause, DiagnoseCheck, DiagnosisStep, Phase, Progress, ReadyStatus, Reason, ReasonEntry, Runbook,
};

/// The server's audit records of a deletion, for the outcome pages.
const AUDIT_DELETION: DiagnosisStep = DiagnosisStep {
    text: concat!(
        "The server's audit records of the object: the deletion, or the last write, with \
         manager and actor.",
        audit_how!()
    ),
    command: AUDIT_ORGANIZATION,
    check: DiagnoseCheck::AuditLog,
};

pub(in crate::catalog) static DELETING: ReasonEntry = ReasonEntry {
    reason: Reason::Deleting,
    ready: ReadyStatus::False,
    phase: Phase::Pending,
    phase_while_retried: None,
    metric_label: "deleting",
    causes: &[
        Cause::None,
        Cause::Transient,
        Cause::OrganizationNotEmpty,
        Cause::Forbidden,
    ],
    progress: Progress::Reconciling,
    progress_by_cause: &[(Cause::Forbidden, Progress::Stalled)],
    runbook: Runbook {
        title: "The manifest is being deleted",
        summary: "The manifest is marked for deletion and the reconciler is carrying out its \
            `deletionPolicy` before it releases the finalizer; Ready=False, phase Pending.",
        meaning: &[
            "Deleting a manifest the reconciler registered has defined consequences, carried out \
             before the finalizer `nauthera.io/finalizer` is removed:",
            "- `deletionPolicy: Delete` removes the object from the server, but only while the \
             server still holds the revision the reconciler wrote; a drifted object is left in \
             place ([DeletionSkippedDrifted](DeletionSkippedDrifted.md)).\n\
             - `deletionPolicy: Orphan` leaves the object registered on the server \
             ([Orphaned](Orphaned.md)).",
            "Either way an event records the outcome, and the server's audit trail records any \
             deletion under the reconciler's manager name. While the server cannot be reached, \
             or a retried code persists, the resource stays here with its finalizer.",
            "When the object stays on the server (`Orphan`, or a drifted object left in place), \
             the Secret a generated secret was delivered into is released first: its owner \
             reference to the manifest is removed, so the garbage collector keeps the only copy \
             of a secret the server still accepts. If that write fails (cause `transient`, or \
             `forbidden` when the reconciler's role lacks `patch` on secrets), the resource \
             stays here and the release is retried with backoff.",
            "Kubernetes' own propagation policy (`kubectl delete \
             --cascade=background|foreground|orphan`) tells kube-controller-manager's garbage \
             collector what to do with the manifest's dependents, an OIDCClient's generated \
             Secret among them, while the reconciler carries out `deletionPolicy`: both act on \
             the same Secret at the same moment. The outcomes:",
            "- `Orphan` with `--cascade=background` (the default): the object stays registered; \
             the Secret is released first and kept, holding the client secret the server \
             accepts.\n\
             - `Orphan` with `--cascade=orphan`: the same. The garbage collector may remove the \
             owner reference first; the reconciler labels the Secret released all the same, so \
             that the manifest applied again takes it back.\n\
             - `Orphan` with `--cascade=foreground`: whoever deleted it asked for the dependents \
             to be deleted first, so the reconciler leaves the Secret to the garbage collector \
             rather than race it. The object stays registered, the Secret is deleted, and the \
             `Orphaned` event says that no copy of the client secret the server still accepts \
             stays in the cluster.\n\
             - `Delete` with `--cascade=background` or `--cascade=foreground`: the object is \
             deleted on the server and the garbage collector deletes the Secret (before the \
             manifest goes in the foreground, after it in the background): no Secret is left \
             with a secret that no longer works.\n\
             - `Delete` with `--cascade=orphan`: the object is deleted on the server and the \
             Secret stays, as asked, owned by nobody, with a client secret that no longer \
             works; delete it once no workload reads it.",
            "Either way the manifest goes once both are done. The reconciler removes only its \
             own finalizer, never the garbage collector's `orphan` or `foregroundDeletion`, and \
             its write carries the resourceVersion it read, so it never undoes one the collector \
             made meanwhile.",
            "An Organization stays here as well while the server refuses to delete it because \
             it still holds clients, brandings or identity providers (`ORGANIZATION_NOT_EMPTY`, \
             cause `organization_not_empty`): the server keeps an organization until it is \
             empty. The condition message names the manifests in the cluster that still declare \
             objects under the organization's issuer, and the reconciler retries the deletion \
             with backoff until the organization is empty.",
        ],
        impact: &[
            "The manifest does not go away until the policy is carried out, and it holds up the \
             deletion of its namespace meanwhile. Until the server's object is removed, end \
             users can still sign in through it.",
            "With `organization_not_empty` the Organization manifest, and the organization on \
             the server, stay until every client, branding and identity provider under it is \
             gone, including objects no manifest declares.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The message says what the deletion waits for; for an Organization that \
                    is not empty (`organization_not_empty`), the manifests that still declare \
                    objects under its issuer.",
                command: DESCRIBE,
                check: DiagnoseCheck::ConditionMessage,
            },
            DiagnosisStep {
                text: "Whether the reconciler reaches the server at all.",
                command: STATUS,
                check: DiagnoseCheck::ProbeState,
            },
            DiagnosisStep {
                text: "The reconciler's lines about the resource: each delete attempt with the \
                    server's answer.",
                command: RESOURCE_LOGS,
                check: DiagnoseCheck::ReconcilerLogs,
            },
            DiagnosisStep {
                text: "For `organization_not_empty`: every OIDCClient, Branding and \
                    IdentityProvider manifest in the cluster under the organization's issuer.",
                command: r#"kubectl get oidcclients.nauthera.io,brandings.nauthera.io,identityproviders.nauthera.io -A -o custom-columns=KIND:.kind,NAMESPACE:.metadata.namespace,NAME:.metadata.name,PHASE:.status.phase,ISSUER:.spec.issuer | grep -wF "$(kubectl -n <ns> get organizations.nauthera.io <name> -o jsonpath='{.spec.issuer}' | sed 's:/*$::')""#,
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: concat!(
                    "For `organization_not_empty`: what the organization still holds on the \
                     server, including objects made through the dashboard that no manifest \
                     declares: a `client.applied`, `branding.applied` or \
                     `identity_provider.applied` record without a later `*.deleted` record of \
                     the same object. Page on with `pageToken` for older records.",
                    audit_how!()
                ),
                command: AUDIT_ORGANIZATION,
                check: DiagnoseCheck::AuditLog,
            },
        ],
        mitigation: &[
            "Usually nothing: it completes within a reconcile. If the server cannot be reached, \
             fix that first (see [Unreachable](Unreachable.md)); the deletion then continues by \
             itself.",
            "`organization_not_empty`: empty the organization first. Delete the manifests the \
             message names: with `deletionPolicy: Delete` their objects go from the server; \
             with `deletionPolicy: Orphan` (or when the manifest is gone already) delete their \
             objects on the server through the dashboard or the admin API. Objects no manifest \
             declares (made through the dashboard) must be removed on the server the same way. \
             The reconciler retries the organization's deletion by itself and completes it once \
             the organization is empty; nothing needs to be applied again.",
            r#"To give up on the server's object and release the manifest at once, remove the finalizer: `kubectl -n <ns> patch <kind> <name> --type=json -p '[{"op": "remove", "path": "/metadata/finalizers"}]'`. The object stays on the server as with `Orphan`, but no event records it, so write it down."#,
        ],
        escalation: &[
            "If a deletion hangs while the control plane is healthy, report it with the \
             condition message, the resource's events and the reconciler's lines about it.",
            "If the server still refuses an organization as not empty when neither the \
             manifests nor the audit records show anything left under it, report it to the \
             server's maintainers with the condition message and the audit records.",
        ],
    },
};

pub(in crate::catalog) static DELETED: ReasonEntry = ReasonEntry {
    reason: Reason::Deleted,
    ready: ReadyStatus::False,
    phase: Phase::Pending,
    phase_while_retried: None,
    metric_label: "deleted",
    causes: &[Cause::None],
    progress: Progress::Reconciling,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "Removed from the server",
        summary: "`deletionPolicy: Delete` removed the object from the server before the manifest \
            went away; recorded as a Normal event.",
        meaning: &[
            "The manifest was deleted with `deletionPolicy: Delete` and the server still held \
             the revision the reconciler wrote. The reconciler deleted the object on that \
             condition, recorded a `Deleted` event and released the finalizer. The server's \
             audit log records the deletion under the reconciler's manager name. An OIDCClient's \
             generated Secret is owned by the resource and is garbage-collected with it, unless \
             the manifest was deleted with `kubectl delete --cascade=orphan`: then the Secret \
             stays, owned by nobody, with a client secret that no longer works.",
        ],
        impact: &[
            "The object no longer exists on the server. For a client, nobody can sign in through \
             it any more and its secret is void.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The `Deleted` event, while events are kept.",
                command: EVENTS,
                check: DiagnoseCheck::Events,
            },
            AUDIT_DELETION,
        ],
        mitigation: &[
            "If the deletion was a mistake, apply the manifest again. A new client gets a new \
             client id and a new secret, so every place that held the old ones needs the new \
             ones.",
        ],
        escalation: &[
            "None, usually. An unexpected deletion goes to whoever deleted the manifest; the \
             Kubernetes audit log names them.",
        ],
    },
};

pub(in crate::catalog) static ORPHANED: ReasonEntry = ReasonEntry {
    reason: Reason::Orphaned,
    ready: ReadyStatus::False,
    phase: Phase::Pending,
    phase_while_retried: None,
    metric_label: "orphaned",
    causes: &[Cause::None],
    progress: Progress::Reconciling,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "Left registered on the server",
        summary: "`deletionPolicy: Orphan` left the object registered on the server when the \
            manifest went away; recorded as a Normal event.",
        meaning: &[
            "The manifest was deleted with `deletionPolicy: Orphan`. The reconciler released it \
             without calling the server, recorded an `Orphaned` event, and no longer manages the \
             object: changes to it on the server are nobody's drift from now on.",
        ],
        impact: &[
            "The object keeps working on the server at its last generation, and nothing keeps \
             it in line with a manifest any more.",
            "The Secret a generated secret was delivered into stays, with the client secret the \
             server still accepts: the reconciler removed its owner reference before it let the \
             manifest go, so it is not garbage-collected, and labelled it \
             `nauthera.io/released=true` with the annotation `nauthera.io/released-from` naming \
             the manifest. Nobody manages it any more: delete it once no workload needs it.",
            "Not when the manifest was deleted with `kubectl delete --cascade=foreground`: that \
             asks for its dependents to be deleted first, so the garbage collector deletes the \
             Secret and the event says that no copy of the client secret stays in the cluster. \
             The client keeps working on the server with a secret no Secret holds: delete it \
             there, or apply the manifest again and rotate its secret (`kubectl nauthera \
             rotate`) to have a new one delivered.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The `Orphaned` event, while events are kept.",
                command: EVENTS,
                check: DiagnoseCheck::Events,
            },
            AUDIT_DELETION,
        ],
        mitigation: &[
            "Nothing, if orphaning was intended. To remove the object after all, delete it on the \
             server through the admin API or the dashboard.",
            "To manage it again, apply the manifest again under the same name. The reconciler \
             re-adopts the orphan without writing to the server (an `Applied` event says \
             \"an orphan re-adopted\"), and an OIDCClient takes its released Secret back: owned \
             by the manifest again, the `nauthera.io/released` label removed, the client secret \
             the server accepts kept (a `SecretDelivered` event says \"took back Secret\"). A \
             later deletion then follows the manifest's deletion policy as usual.",
        ],
        escalation: &["None: orphaning is a choice made in the manifest."],
    },
};

pub(in crate::catalog) static DELETION_SKIPPED_DRIFTED: ReasonEntry = ReasonEntry {
    reason: Reason::DeletionSkippedDrifted,
    ready: ReadyStatus::False,
    phase: Phase::Error,
    phase_while_retried: None,
    metric_label: "deletion_skipped_drifted",
    causes: &[Cause::Edited, Cause::BackupRestore, Cause::RevisionMismatch],
    progress: Progress::Reconciling,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "The deletion left a drifted object in place",
        summary: "`deletionPolicy: Delete` did not remove the object because the server holds a \
            revision the reconciler did not write; recorded as a Warning event.",
        meaning: &[
            "The manifest was deleted with `deletionPolicy: Delete`, but the object on the \
             server had been changed by something else since the reconciler's last write. \
             Deleting it could destroy a change made on purpose, so the reconciler left it in \
             place, recorded a `DeletionSkippedDrifted` event naming the revision it found, and \
             released the manifest.",
        ],
        impact: &[
            "The object stays on the server, unmanaged, in whatever state the other change left \
             it: people can still sign in through it, and nothing will remove it.",
            "The Secret a generated secret was delivered into stays too, released from the \
             manifest (labelled `nauthera.io/released=true`), as the object may still accept \
             its secret. Delete it together with the object once the decision is made.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The event names the revision the server holds.",
                command: "kubectl -n <ns> get events --field-selector involvedObject.name=<name>,reason=DeletionSkippedDrifted",
                check: DiagnoseCheck::Events,
            },
            AUDIT_DELETION,
        ],
        mitigation: &[
            "Decide with whoever made the change: delete the object on the server through the \
             admin API or the dashboard, or keep it and declare it in a manifest again.",
        ],
        escalation: &[
            "A change nobody can explain is a security matter, as for [Drifted](Drifted.md): \
             send the audit records to the team that owns the identity platform.",
        ],
    },
};
