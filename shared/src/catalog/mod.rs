//! The reason catalog: the single source of every condition reason, its Ready status, phase, event
//! reason, metric label, runbook page and the checks `kubectl nauthera diagnose` runs.
//!
//! Everything here is plain data and pure functions. The reconciler takes its condition reasons,
//! event reasons and metric labels from [`Reason::entry`]; the plugin takes the runbook and the
//! [`DiagnoseCheck`] of each step; `nauthera-generate` writes the runbook pages under
//! `docs/runbooks/` from the same entries.

mod alerts;
mod cause;
mod entries;
mod event;
mod markdown;
mod placeholder;
mod reasons;
mod runbook;
pub(crate) mod words;

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use words::words;

pub use alerts::{ALERTS, AlertRunbook};
pub use cause::{Cause, ServerReason};
pub use event::EventType;
pub use markdown::{
    GENERATE_COMMAND, alert_runbook_page, gitops_text, runbook_index, runbook_page,
};
pub use placeholder::{Facts, Placeholder, placeholders_in, render, unknown_placeholders};
pub use reasons::{EventReason, Reason};
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

impl Reason {
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

words! {
    /// The coarse state shown in `kubectl get` and summarised by the plugin.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum Phase {
        Registered = "Registered",
        Pending = "Pending",
        Error = "Error",
        /// `managementPolicy: Observe`: read and reported, not managed.
        Observed = "Observed",
    }
}

words! {
    /// The condition types the reconciler sets, in the order the status lists them.
    /// `Reconciling` and `Stalled` are the two that kstatus
    /// (`sigs.k8s.io/cli-utils/pkg/kstatus/status`, which Flux, `kubectl` waiters and kustomize
    /// read) judges a custom resource by; `Ready` is the one people and `kubectl wait` read.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum ConditionType {
        /// The declared state is in force on the server and delivered.
        Ready = "Ready",
        /// The reconciler works on the generation, or waits for something that comes by itself.
        Reconciling = "Reconciling",
        /// Only a person can move the resource on.
        Stalled = "Stalled",
    }
}

words! {
    /// What a reason tells GitOps tools: which of the kstatus conditions is True. kstatus reads
    /// `Reconciling=True` as InProgress and `Stalled=True` as Failed; with neither, and
    /// `status.observedGeneration` equal to `metadata.generation`, the resource is Current.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum Progress {
        /// Nothing left to do: the generation is in force (`Ready=True`); kstatus says Current,
        /// Argo CD Healthy.
        Settled = "Settled",
        /// The reconciler works on it, or waits for something that comes by itself (a
        /// prerequisite, the server, a retried failure, a deletion finishing):
        /// `Reconciling=True`, InProgress; Argo CD Progressing.
        Reconciling = "Reconciling",
        /// Only a person can move it on by fixing something (the manifest, the grant, RBAC, a
        /// foreign Secret, another manager's claim): `Stalled=True`, Failed; Argo CD Degraded.
        Stalled = "Stalled",
        /// Only a person's decision moves it on, and the resource waits for it as it is
        /// (approve the generation, restore or keep a drift; Argo CD offers the action):
        /// `Stalled=True`, Failed; Argo CD Suspended.
        AwaitsDecision = "AwaitsDecision",
        /// Looked at, not managed (`managementPolicy: Observe`): nothing for the reconciler to
        /// do, but nothing in force either. `Reconciling` and `Stalled` are False, `Ready`
        /// False, which kstatus reads as InProgress (its last rule reads `Ready`; cli-utils
        /// `checkReadyCondition`); Argo CD Suspended (it resumes when a person manages it).
        Observing = "Observing",
    }
}

impl Progress {
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
            Progress::Reconciling | Progress::Observing => "InProgress",
            Progress::Stalled | Progress::AwaitsDecision => "Failed",
        }
    }

    /// The health Argo CD shows with the health checks under `deploy/argocd/`.
    pub const fn argocd_health(self) -> &'static str {
        match self {
            Progress::Settled => "Healthy",
            Progress::Reconciling => "Progressing",
            Progress::Stalled => "Degraded",
            Progress::AwaitsDecision | Progress::Observing => "Suspended",
        }
    }
}

words! {
    /// The status of a condition, as Kubernetes spells it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum ReadyStatus {
        True = "True",
        False = "False",
        Unknown = "Unknown",
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
