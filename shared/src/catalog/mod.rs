//! The reason catalog: the single source of every condition reason, its Ready status, phase, event
//! reason, metric label, runbook page and the checks `kubectl nauthera diagnose` runs.
//!
//! Everything here is plain data and pure functions. The reconciler takes its condition reasons,
//! event reasons and metric labels from [`Reason::entry`]; the plugin takes the runbook and the
//! [`DiagnoseCheck`] of each step; `nauthera-generate` writes the runbook pages under
//! `docs/runbooks/` from the same entries.

mod cause;
mod entries;
mod event;
mod markdown;
mod placeholder;
mod runbook;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use cause::{Cause, RETRIED_CODES, code_label, is_retried};
pub use event::{EventReason, EventType};
pub use markdown::{GENERATE_COMMAND, gitops_text, runbook_index, runbook_page};
pub use placeholder::{Facts, Placeholder, placeholders_in, render, unknown_placeholders};
pub use runbook::{DiagnoseCheck, DiagnosisStep, Runbook};

/// The folder of the generated runbook pages, relative to the repository root.
pub const RUNBOOK_DIR: &str = "docs/runbooks";

/// Where the runbook pages are published; a reason's page is this base followed by
/// `<Reason>.md`.
pub const RUNBOOK_URL_BASE: &str =
    "https://github.com/nauthera/nauthera-kubernetes/blob/main/docs/runbooks/";

/// How long a refused declared state waits before it is sent again when nothing changes.
pub const REFUSAL_RESEND_AFTER: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// The runbook page of a reason, relative to the repository root: `docs/runbooks/<Reason>.md`.
pub fn runbook_path(reason: Reason) -> String {
    format!("{RUNBOOK_DIR}/{}.md", reason.as_str())
}

/// The published runbook page of a reason, for condition messages, alerts and the plugin.
pub fn runbook_url(reason: Reason) -> String {
    format!("{RUNBOOK_URL_BASE}{}.md", reason.as_str())
}

/// Why a resource is in the state it is in. The string form (`as_str`) is what appears in
/// conditions and runbook file names; events and metrics use [`ReasonEntry::event`] and
/// [`ReasonEntry::metric_label`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Reason {
    /// The declared generation is in force on the server.
    Registered,
    /// Waiting: a transient failure is being retried, or the first reconcile has not finished.
    Pending,
    /// The server (or the reconciler itself, for an unencodable branding) refused the declared state.
    Refused,
    /// The client secret is minted but the Secret could not be written.
    SecretUndeliverable,
    /// The Secret named by `spec.secret.secretRef` is missing or lacks the key.
    SecretRefUnavailable,
    /// Changed or removed on the server by something else; not written over.
    Drifted,
    /// The declared state was written back over a drift on request (the restore annotation).
    Restored,
    /// The server cannot be reached.
    Unreachable,
    /// The client certificate or key cannot be read.
    CredentialUnavailable,
    /// The CA bundle cannot be read.
    TrustAnchorUnavailable,
    /// The manifest is being deleted and the deletion policy is being carried out.
    Deleting,
    /// `deletionPolicy: Delete` removed the object from the server.
    Deleted,
    /// `deletionPolicy: Orphan` left the object registered on the server.
    Orphaned,
    /// `deletionPolicy: Delete` left a drifted object in place on the server.
    DeletionSkippedDrifted,
    /// A ClientPolicy does not allow what the manifest declares: nothing of it is sent.
    PolicyViolation,
    /// A ClientPolicy requires an approval of this generation before it is sent.
    WaitingForApproval,
    /// The object on the server is another reconciler's: it is never written over.
    ManagedElsewhere,
    /// A ClientPolicy the API server would not enforce as generated (a namespace selector it
    /// refuses, a check over its CEL cost limit): the reconciler refuses it, and it enforces
    /// nothing until fixed. A reason of ClientPolicies, not of the resources they cover.
    PolicyRefused,
}

impl Reason {
    /// Every reason, in catalog order (the order of the runbook index).
    pub const ALL: [Reason; 18] = [
        Reason::Registered,
        Reason::Pending,
        Reason::Refused,
        Reason::SecretUndeliverable,
        Reason::SecretRefUnavailable,
        Reason::Drifted,
        Reason::Restored,
        Reason::Unreachable,
        Reason::CredentialUnavailable,
        Reason::TrustAnchorUnavailable,
        Reason::Deleting,
        Reason::Deleted,
        Reason::Orphaned,
        Reason::DeletionSkippedDrifted,
        Reason::PolicyViolation,
        Reason::WaitingForApproval,
        Reason::ManagedElsewhere,
        Reason::PolicyRefused,
    ];

    /// The condition reason, CamelCase.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Registered => "Registered",
            Reason::Pending => "Pending",
            Reason::Refused => "Refused",
            Reason::SecretUndeliverable => "SecretUndeliverable",
            Reason::SecretRefUnavailable => "SecretRefUnavailable",
            Reason::Drifted => "Drifted",
            Reason::Restored => "Restored",
            Reason::Unreachable => "Unreachable",
            Reason::CredentialUnavailable => "CredentialUnavailable",
            Reason::TrustAnchorUnavailable => "TrustAnchorUnavailable",
            Reason::Deleting => "Deleting",
            Reason::Deleted => "Deleted",
            Reason::Orphaned => "Orphaned",
            Reason::DeletionSkippedDrifted => "DeletionSkippedDrifted",
            Reason::PolicyViolation => "PolicyViolation",
            Reason::WaitingForApproval => "WaitingForApproval",
            Reason::ManagedElsewhere => "ManagedElsewhere",
            Reason::PolicyRefused => "PolicyRefused",
        }
    }

    /// The catalog entry of this reason.
    pub fn entry(self) -> &'static ReasonEntry {
        match self {
            Reason::Registered => &entries::REGISTERED,
            Reason::Pending => &entries::PENDING,
            Reason::Refused => &entries::REFUSED,
            Reason::SecretUndeliverable => &entries::SECRET_UNDELIVERABLE,
            Reason::SecretRefUnavailable => &entries::SECRET_REF_UNAVAILABLE,
            Reason::Drifted => &entries::DRIFTED,
            Reason::Restored => &entries::RESTORED,
            Reason::Unreachable => &entries::UNREACHABLE,
            Reason::CredentialUnavailable => &entries::CREDENTIAL_UNAVAILABLE,
            Reason::TrustAnchorUnavailable => &entries::TRUST_ANCHOR_UNAVAILABLE,
            Reason::Deleting => &entries::DELETING,
            Reason::Deleted => &entries::DELETED,
            Reason::Orphaned => &entries::ORPHANED,
            Reason::DeletionSkippedDrifted => &entries::DELETION_SKIPPED_DRIFTED,
            Reason::PolicyViolation => &entries::POLICY_VIOLATION,
            Reason::WaitingForApproval => &entries::WAITING_FOR_APPROVAL,
            Reason::ManagedElsewhere => &entries::MANAGED_ELSEWHERE,
            Reason::PolicyRefused => &entries::POLICY_REFUSED,
        }
    }

    /// The event recorded on the transition into this reason.
    pub fn event(self) -> EventReason {
        self.entry().event
    }

    /// The `reason` label value of `nauthera_operator_reconciles_total`.
    pub fn metric_label(self) -> &'static str {
        self.entry().metric_label
    }

    /// Whether the reason comes from the control-plane probe (the reconciler cannot call the
    /// server at all) rather than from one resource. On these runbook pages `<secret>` is the
    /// reconciler's certificate Secret.
    pub const fn is_control_plane(self) -> bool {
        matches!(
            self,
            Reason::Unreachable | Reason::CredentialUnavailable | Reason::TrustAnchorUnavailable
        )
    }

    /// Whether the reason is a ClientPolicy's rather than a resource's.
    pub const fn is_policy_own(self) -> bool {
        matches!(self, Reason::PolicyRefused)
    }

    /// Whether the reason is one of the outcomes of deleting a manifest (recorded as events; the
    /// resource is gone soon after).
    pub const fn is_deletion_outcome(self) -> bool {
        matches!(
            self,
            Reason::Deleted | Reason::Orphaned | Reason::DeletionSkippedDrifted
        )
    }

    /// The Ready condition status this reason sets.
    pub fn ready(self) -> ReadyStatus {
        self.entry().ready
    }

    /// The phase this reason sets; `retried` selects the phase while the reconciler retries on
    /// its own (for reasons that have one), see [`ReasonEntry::phase_for`].
    pub fn phase(self, retried: bool) -> Phase {
        self.entry().phase_for(retried)
    }

    /// What GitOps tools read from this reason with `cause`: see [`ReasonEntry::progress_for`].
    pub fn progress(self, cause: Cause) -> Progress {
        self.entry().progress_for(cause)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no reason of the catalog.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a reason of the catalog; expected one of Registered, Pending, Refused, ...")]
pub struct UnknownReason(pub String);

impl FromStr for Reason {
    type Err = UnknownReason;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reason::ALL
            .into_iter()
            .find(|reason| reason.as_str() == s)
            .ok_or_else(|| UnknownReason(s.to_owned()))
    }
}

/// The coarse state shown in `kubectl get` and summarised by the plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    Registered,
    Pending,
    Error,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Registered, Phase::Pending, Phase::Error];

    pub const fn as_str(self) -> &'static str {
        match self {
            Phase::Registered => "Registered",
            Phase::Pending => "Pending",
            Phase::Error => "Error",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The condition types the reconciler sets. `Reconciling` and `Stalled` are the two that kstatus
/// (`sigs.k8s.io/cli-utils/pkg/kstatus/status`, which Flux, `kubectl` waiters and kustomize read)
/// judges a custom resource by; `Ready` is the one people and `kubectl wait` read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ConditionType {
    /// The declared state is in force on the server and delivered.
    Ready,
    /// The reconciler works on the generation, or waits for something that comes by itself.
    Reconciling,
    /// Only a person can move the resource on.
    Stalled,
}

impl ConditionType {
    /// Every type, in the order the status lists them.
    pub const ALL: [ConditionType; 3] = [
        ConditionType::Ready,
        ConditionType::Reconciling,
        ConditionType::Stalled,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Reconciling => "Reconciling",
            ConditionType::Stalled => "Stalled",
        }
    }
}

/// What a reason tells GitOps tools: which of the kstatus conditions is True. kstatus reads
/// `Reconciling=True` as InProgress and `Stalled=True` as Failed; with neither, and
/// `status.observedGeneration` equal to `metadata.generation`, the resource is Current.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Progress {
    /// Nothing left to do: the generation is in force (`Ready=True`); kstatus says Current,
    /// Argo CD Healthy.
    Settled,
    /// The reconciler works on it, or waits for something that comes by itself (a prerequisite,
    /// the server, a retried failure, a deletion finishing): `Reconciling=True`, InProgress;
    /// Argo CD Progressing.
    Reconciling,
    /// Only a person can move it on by fixing something (the manifest, the grant, RBAC, a
    /// foreign Secret, another manager's claim): `Stalled=True`, Failed; Argo CD Degraded.
    Stalled,
    /// Only a person's decision moves it on, and the resource waits for it as it is (approve
    /// the generation, restore or keep a drift; Argo CD offers the action): `Stalled=True`,
    /// Failed; Argo CD Suspended.
    AwaitsDecision,
}

impl Progress {
    pub const ALL: [Progress; 4] = [
        Progress::Settled,
        Progress::Reconciling,
        Progress::Stalled,
        Progress::AwaitsDecision,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Progress::Settled => "Settled",
            Progress::Reconciling => "Reconciling",
            Progress::Stalled => "Stalled",
            Progress::AwaitsDecision => "AwaitsDecision",
        }
    }

    /// Whether the `Reconciling` condition is True.
    pub const fn reconciling(self) -> bool {
        matches!(self, Progress::Reconciling)
    }

    /// Whether the `Stalled` condition is True.
    pub const fn stalled(self) -> bool {
        matches!(self, Progress::Stalled | Progress::AwaitsDecision)
    }

    /// The kstatus result of a resource whose status judged its current generation.
    pub const fn kstatus(self) -> &'static str {
        match self {
            Progress::Settled => "Current",
            Progress::Reconciling => "InProgress",
            Progress::Stalled | Progress::AwaitsDecision => "Failed",
        }
    }

    /// The health Argo CD shows with the health checks under `deploy/argocd/`.
    pub const fn argocd_health(self) -> &'static str {
        match self {
            Progress::Settled => "Healthy",
            Progress::Reconciling => "Progressing",
            Progress::Stalled => "Degraded",
            Progress::AwaitsDecision => "Suspended",
        }
    }
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The status of a condition, as Kubernetes spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ReadyStatus {
    True,
    False,
    Unknown,
}

impl ReadyStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            ReadyStatus::True => "True",
            ReadyStatus::False => "False",
            ReadyStatus::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for ReadyStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything the project says about one reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasonEntry {
    pub reason: Reason,
    /// The Ready condition's status.
    pub ready: ReadyStatus,
    /// The phase once the reconciler has stopped retrying on its own and waits for a change.
    pub phase: Phase,
    /// The phase while the reconciler still retries on its own (with backoff), where that
    /// differs: `Refused` is Error, or Pending while a retried code is retried.
    pub phase_while_retried: Option<Phase>,
    /// The event recorded on the transition into this reason.
    pub event: EventReason,
    /// The value of the `reason` label of `nauthera_operator_reconciles_total`.
    pub metric_label: &'static str,
    /// The causes reported with this reason (the `cause` label).
    pub causes: &'static [Cause],
    /// What GitOps tools read from this reason (the `Reconciling` and `Stalled` conditions), for
    /// every cause `progress_by_cause` does not list.
    pub progress: Progress,
    /// The causes (of `causes`) whose progress differs from `progress`.
    pub progress_by_cause: &'static [(Cause, Progress)],
    pub runbook: Runbook,
}

impl ReasonEntry {
    /// The phase to show: the retry phase while the reconciler retries on its own, if any.
    pub const fn phase_for(&self, retried: bool) -> Phase {
        match (retried, self.phase_while_retried) {
            (true, Some(phase)) => phase,
            _ => self.phase,
        }
    }

    /// What GitOps tools read from this reason with `cause`: Settled (Current), Reconciling
    /// (InProgress) or Stalled (Failed).
    pub fn progress_for(&self, cause: Cause) -> Progress {
        self.progress_by_cause
            .iter()
            .find(|(listed, _)| *listed == cause)
            .map_or(self.progress, |(_, progress)| *progress)
    }

    /// "Error" or "Error (Pending while retried)", as the runbook pages say it.
    pub fn phase_text(&self) -> String {
        match self.phase_while_retried {
            Some(retried) => format!("{} ({} while retried)", self.phase, retried),
            None => self.phase.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_is_exactly_ready_true() {
        for reason in Reason::ALL {
            let entry = reason.entry();
            for &cause in entry.causes {
                let settled = entry.progress_for(cause) == Progress::Settled;
                assert_eq!(
                    settled,
                    entry.ready == ReadyStatus::True,
                    "{reason} with {cause}"
                );
            }
        }
    }

    #[test]
    fn causes_with_their_own_progress_are_causes_of_the_reason() {
        for reason in Reason::ALL {
            let entry = reason.entry();
            for (cause, progress) in entry.progress_by_cause {
                assert!(entry.causes.contains(cause), "{reason}: {cause}");
                assert_ne!(
                    *progress, entry.progress,
                    "{reason}: {cause} says nothing new"
                );
            }
        }
    }

    #[test]
    fn what_needs_a_person_stalls_and_what_comes_by_itself_reconciles() {
        let cases = [
            (Reason::Registered, Cause::None, Progress::Settled),
            (Reason::Restored, Cause::Edited, Progress::Settled),
            (Reason::Pending, Cause::None, Progress::Reconciling),
            (Reason::Pending, Cause::Transient, Progress::Reconciling),
            (
                Reason::Pending,
                Cause::ReferenceNotReady,
                Progress::Reconciling,
            ),
            (Reason::Unreachable, Cause::Transient, Progress::Reconciling),
            (
                Reason::SecretUndeliverable,
                Cause::Transient,
                Progress::Reconciling,
            ),
            (
                Reason::SecretUndeliverable,
                Cause::ForeignSecret,
                Progress::Stalled,
            ),
            (Reason::Refused, Cause::FieldViolation, Progress::Stalled),
            (Reason::Refused, Cause::OutsideGrant, Progress::Stalled),
            (Reason::Drifted, Cause::Edited, Progress::AwaitsDecision),
            (
                Reason::PolicyViolation,
                Cause::PolicyRule,
                Progress::Stalled,
            ),
            (
                Reason::WaitingForApproval,
                Cause::ApprovalRequired,
                Progress::AwaitsDecision,
            ),
            (Reason::ManagedElsewhere, Cause::Claimed, Progress::Stalled),
            (Reason::PolicyRefused, Cause::CostLimit, Progress::Stalled),
            (
                Reason::CredentialUnavailable,
                Cause::Unreadable,
                Progress::Reconciling,
            ),
            (
                Reason::CredentialUnavailable,
                Cause::Expired,
                Progress::Stalled,
            ),
            (
                Reason::Deleting,
                Cause::OrganizationNotEmpty,
                Progress::Reconciling,
            ),
            (Reason::Deleting, Cause::Forbidden, Progress::Stalled),
        ];
        for (reason, cause, progress) in cases {
            assert_eq!(reason.progress(cause), progress, "{reason} with {cause}");
        }
    }

    #[test]
    fn the_gitops_text_names_the_causes_that_differ() {
        let text = gitops_text(Reason::SecretUndeliverable.entry());
        assert_eq!(
            text,
            "`Stalled=True` (kstatus Failed, Argo CD Degraded); with `transient`: \
             `Reconciling=True` (kstatus InProgress, Argo CD Progressing)"
        );
    }
}
