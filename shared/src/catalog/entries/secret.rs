//! Client secrets: SecretUndeliverable, SecretRefUnavailable.

use super::{DESCRIBE, RESOURCE_LOGS, SECRET_CONSUMERS};
use crate::catalog::{
    Cause, DiagnoseCheck, DiagnosisStep, Phase, Progress, ReadyStatus, Reason, ReasonEntry, Runbook,
};

pub(in crate::catalog) static SECRET_UNDELIVERABLE: ReasonEntry = ReasonEntry {
    reason: Reason::SecretUndeliverable,
    ready: ReadyStatus::False,
    phase: Phase::Error,
    phase_while_retried: Some(Phase::Pending),
    metric_label: "secret_undeliverable",
    causes: &[Cause::ForeignSecret, Cause::Forbidden, Cause::Transient],
    progress: Progress::Stalled,
    progress_by_cause: &[(Cause::Transient, Progress::Reconciling)],
    runbook: Runbook {
        title: "The client secret could not be written into its Secret",
        summary: "The server minted an OIDCClient's secret and the reconciler could not write it \
            into the Secret; Ready=False, phase Error, or Pending while the write is retried.",
        meaning: &[
            "The client is registered and the server minted its secret, which it returns \
             exactly once. Writing it into the Secret named by `spec.secret.secretName` (or, \
             without one, by the resource's name) failed. The cause says why:",
            "- `foreign_secret`: a Secret of that name exists and this OIDCClient does not own \
             it. The reconciler never writes over a Secret it does not own.\n\
             - `forbidden`: the reconciler's RBAC does not allow it to create, patch or read \
             Secrets in the namespace. A registered client says so too once its role loses \
             `get`, `list` or `watch` on secrets: the reconciler can no longer tell whether the \
             Secret still holds the client secret, so it stops claiming `Registered` until the \
             permission is back.\n\
             - `transient`: the write failed for another reason; it is retried with backoff \
             and the phase is Pending meanwhile.",
            "The reconciler keeps the minted secret in memory only, and retries the write from \
             there. If it restarts, or loses its lease, before the write succeeds, the secret is \
             lost with it: the next reconcile has the server mint a new one, and the previous \
             one stops working.",
        ],
        impact: &[
            "The team's workload has no client secret, or an old one the server no longer \
             accepts, so its token requests fail and its users cannot sign in through it. A \
             secret minted again after a restart makes every copy taken by other means stale.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The message names the Secret and the cause.",
                command: DESCRIBE,
                check: DiagnoseCheck::ConditionMessage,
            },
            DiagnosisStep {
                text: "Who owns the Secret: an owner other than this OIDCClient, or none, makes \
                    it foreign.",
                command: "kubectl -n <ns> get secret <secret> -o jsonpath='{.metadata.ownerReferences}'",
                check: DiagnoseCheck::SecretOwner,
            },
            DiagnosisStep {
                text: "Whether the reconciler's ServiceAccount may create and patch Secrets in \
                    the namespace.",
                command: "kubectl auth can-i create secrets -n <ns> --as=system:serviceaccount:<reconciler-ns>:<reconciler-sa> && kubectl auth can-i patch secrets -n <ns> --as=system:serviceaccount:<reconciler-ns>:<reconciler-sa>",
                check: DiagnoseCheck::ReconcilerCanI,
            },
            DiagnosisStep {
                text: "The reconciler's lines about the resource, with the error of each write \
                    of its Secret.",
                command: RESOURCE_LOGS,
                check: DiagnoseCheck::ReconcilerLogs,
            },
            DiagnosisStep {
                text: "The pods that mount the Secret and will need the secret once it is \
                    written.",
                command: SECRET_CONSUMERS,
                check: DiagnoseCheck::SecretConsumers,
            },
        ],
        mitigation: &[
            "A foreign Secret: delete or rename it, or set `spec.secret.secretName` to a free \
             name. If the team keeps the client secret itself, for instance in a Secret a \
             SealedSecret produces, name that Secret in `spec.secret.secretRef` instead of \
             setting `generate: true`; the reconciler then reads it and writes nothing.",
            "Missing permission: give the reconciler's ServiceAccount get, list, watch, create \
             and patch on Secrets, as the RBAC under `deploy/` does, in every namespace it \
             manages.",
            "A changed `spec.secret.secretName` that names a foreign Secret mints nothing: the \
             client secret in force stays in the Secret `status.secretRef` names until the new \
             name is free; then one write rotates the secret into it, the old Secret is removed \
             and a `SecretRotated` event names the workloads that read either Secret.",
            "Once the write succeeds the condition returns to `Registered` and a \
             `SecretDelivered` event is recorded (`SecretRotated` when it replaces a secret \
             workloads held, with their restart commands). Restart the workloads that read the \
             Secret only at start-up.",
        ],
        escalation: &[
            "A foreign Secret is the application team's; the reconciler's permissions are the \
             platform team's. If the write keeps failing with neither cause, report it with the \
             condition message and the reconciler's log lines about the Secret. Never attach the \
             Secret's data.",
        ],
    },
};

pub(in crate::catalog) static SECRET_REF_UNAVAILABLE: ReasonEntry = ReasonEntry {
    reason: Reason::SecretRefUnavailable,
    ready: ReadyStatus::False,
    phase: Phase::Pending,
    phase_while_retried: None,
    metric_label: "secret_ref_unavailable",
    causes: &[Cause::SecretRefMissing, Cause::Forbidden],
    progress: Progress::Stalled,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "The referenced Secret cannot be read",
        summary: "The Secret the manifest references (an OIDCClient's `spec.secret.secretRef`, an \
            IdentityProvider's `secretRef`) holds no usable value under the key, or may not be \
            read; Ready=False, phase Pending until it can be read.",
        meaning: &[
            "The manifest says the team holds the secret itself, in a Secret the reconciler \
             reads and never writes: an OIDCClient with `spec.secret.secretRef`, or an \
             IdentityProvider whose `secretRef` holds its upstream client secret. That Secret \
             holds an empty or non-text value under the key the manifest names \
             (`secret_ref_missing`), or the reconciler may not read it (`forbidden`). A Secret \
             that does not exist at all, or exists without that key (yet), is not this reason: \
             the resource waits for it as [Pending](Pending.md) (`reference_not_ready`), naming \
             the Secret and the key; nothing is sent (nothing registered, nothing minted) until \
             the key is there, and a change to the Secret wakes the resource.",
            "Nothing is sent to the server until the Secret can be read. The reconciler watches \
             Secrets, so one that appears later is picked up without an edit of the manifest. A \
             Secret another controller produces (a SealedSecret, an external secrets operator) \
             often appears shortly after the manifest, so a brief spell of this reason is \
             expected then.",
        ],
        impact: &[
            "A new client or identity provider is not registered, so nobody can sign in through \
             it. One registered before stays at its last generation in force, and a secret \
             rotated in the Secret does not reach the server.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The message names the Secret, the key and the cause.",
                command: DESCRIBE,
                check: DiagnoseCheck::ConditionMessage,
            },
            DiagnosisStep {
                text: "Whether the Secret exists and which keys it holds; `describe` shows key \
                    names and sizes, never values.",
                command: "kubectl -n <ns> describe secret <secret>",
                check: DiagnoseCheck::SecretRefPresent,
            },
            DiagnosisStep {
                text: "Whether whatever produces the Secret reports a problem.",
                command: "kubectl -n <ns> get events --field-selector involvedObject.name=<secret>",
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "Whether the reconciler's ServiceAccount may read Secrets in the namespace.",
                command: "kubectl auth can-i get secrets -n <ns> --as=system:serviceaccount:<reconciler-ns>:<reconciler-sa>",
                check: DiagnoseCheck::ReconcilerCanI,
            },
        ],
        mitigation: &[
            "Create the Secret with the key the manifest names, or correct the name or key in the \
             manifest.",
            "A SealedSecret or another producer: fix whatever keeps it from producing the \
             Secret; the reconciler picks the Secret up as soon as it exists.",
            "Missing permission: give the reconciler's ServiceAccount get, list and watch on \
             Secrets in the namespace.",
        ],
        escalation: &[
            "The Secret and its producer belong to the application team; the reconciler's \
             permissions to the platform team. Never attach the Secret's data to a report.",
        ],
    },
};
