//! The shape of a runbook page and the checks `kubectl nauthera diagnose` can run for its steps.

use serde::{Deserialize, Serialize};

use super::words::words;

/// One runbook page. Text is markdown and may use the placeholders of
/// [`Placeholder`](super::Placeholder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Runbook {
    /// A short heading, without the reason's name.
    pub title: &'static str,
    /// One sentence: what happened and what state the resource is in.
    pub summary: &'static str,
    /// Paragraphs: what the reason means and which causes lead to it.
    pub meaning: &'static [&'static str],
    /// Paragraphs: who is affected and how.
    pub impact: &'static [&'static str],
    /// Numbered steps, each with a command a person can paste.
    pub diagnosis: &'static [DiagnosisStep],
    /// Bullets: what to do, by cause.
    pub mitigation: &'static [&'static str],
    /// Paragraphs: who to hand it to, and what to attach.
    pub escalation: &'static [&'static str],
}

/// One diagnosis step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiagnosisStep {
    /// What to look at and what it tells.
    pub text: &'static str,
    /// A command a person can paste (after filling placeholders).
    pub command: &'static str,
    /// What the plugin runs for this step; [`DiagnoseCheck::None`] for a manual step.
    pub check: DiagnoseCheck,
}

words! {
    /// A check `kubectl nauthera diagnose` knows how to run and fill with live facts.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum DiagnoseCheck {
        /// The Ready condition's reason and message, and the status fields next to it.
        ConditionMessage = "ConditionMessage",
        /// The recent events of the resource.
        Events = "Events",
        /// Whether the Secret to write exists, and who owns it.
        SecretOwner = "SecretOwner",
        /// The workloads in the namespace that mount or read the Secret.
        SecretConsumers = "SecretConsumers",
        /// Whether the referenced Secret exists and holds the key.
        SecretRefPresent = "SecretRefPresent",
        /// `kubectl auth can-i` for the reconciler's ServiceAccount on Secrets in the namespace.
        ReconcilerCanI = "ReconcilerCanI",
        /// Whether the grant the server reported covers the operation, organization and namespace,
        /// and the `allowed_clients` entry that would.
        GrantCovers = "GrantCovers",
        /// The revision the reconciler wrote and the one the server holds.
        DriftRevisions = "DriftRevisions",
        /// Who changed a drifted object (manager, actor) and when, as recorded in its status.
        DriftWho = "DriftWho",
        /// How many resources drifted, how many by a restore of the server, and by whom.
        DriftCount = "DriftCount",
        /// The reconciler's log lines about the resource.
        ReconcilerLogs = "ReconcilerLogs",
        /// The control-plane probe: its reason, since when it holds, which server build answered.
        ProbeState = "ProbeState",
        /// The expiry and identity of the reconciler's client certificate.
        CertificateExpiry = "CertificateExpiry",
        /// `nauthera_operator_reconciles_total` by kind, reason and cause.
        ReconcileMetrics = "ReconcileMetrics",
        /// `nauthera_operator_server_calls_total` by method and code.
        ServerCallMetrics = "ServerCallMetrics",
        /// The server's audit records for the object. The plugin holds no server credentials, so it
        /// prints the query filled in for a person to run.
        AuditLog = "AuditLog",
        /// The ClientPolicies that cover the resource, each rule's verdict on the manifest, and the
        /// namespace's count against a limit.
        PolicyRules = "PolicyRules",
        /// The ClientApprovals of the client, the generation waiting, and whether the caller may
        /// approve.
        Approvals = "Approvals",
        /// Who manages the object elsewhere (manager, identity, revision, when), and this
        /// reconciler's own manager and cluster name.
        OtherManager = "OtherManager",
        /// What the server holds of an observed or not yet adopted object (revision, writer,
        /// when, the fields that differ) and the revision `nauthera.io/adopt` names.
        ServerObject = "ServerObject",
        /// A manual step; the plugin shows the command only.
        None = "None",
    }
}

impl DiagnoseCheck {
    /// What the plugin does for a step with this check, for the runbook pages; `None` for a
    /// manual step.
    pub const fn describe(self) -> Option<&'static str> {
        Some(match self {
            DiagnoseCheck::ConditionMessage => "shows the Ready condition and the status fields",
            DiagnoseCheck::Events => "lists the resource's recent events",
            DiagnoseCheck::SecretOwner => "shows whether the Secret exists and who owns it",
            DiagnoseCheck::SecretConsumers => "names the workloads that mount or read the Secret",
            DiagnoseCheck::SecretRefPresent => {
                "checks that the referenced Secret exists and holds the key"
            }
            DiagnoseCheck::ReconcilerCanI => {
                "runs the access review for the reconciler's ServiceAccount"
            }
            DiagnoseCheck::GrantCovers => {
                "compares the grant the server reported with the resource and prints the \
                 `allowed_clients` entry that would cover it"
            }
            DiagnoseCheck::DriftRevisions => {
                "shows the revision the reconciler wrote and the one the server holds"
            }
            DiagnoseCheck::DriftWho => "shows who changed the object on the server, and when",
            DiagnoseCheck::DriftCount => "counts the drifted resources and when each drifted",
            DiagnoseCheck::ReconcilerLogs => "shows the reconciler's recent lines about it",
            DiagnoseCheck::ProbeState => {
                "shows the control-plane probe's reason, since when it holds and the server build"
            }
            DiagnoseCheck::CertificateExpiry => {
                "shows the client certificate's identity and expiry"
            }
            DiagnoseCheck::ReconcileMetrics => "reads the reconcile counters by reason and cause",
            DiagnoseCheck::ServerCallMetrics => "reads the server call counters by method and code",
            DiagnoseCheck::AuditLog => {
                "prints this audit query for the object's organization and client id"
            }
            DiagnoseCheck::PolicyRules => {
                "evaluates every ClientPolicy that covers the resource on its manifest, rule by \
                 rule, and counts the namespace against a limit"
            }
            DiagnoseCheck::Approvals => {
                "lists the client's ClientApprovals, the generation waiting, and whether you may \
                 approve it"
            }
            DiagnoseCheck::OtherManager => {
                "names the manager that wrote the object last, its identity and when, beside \
                 this reconciler's own manager and cluster name"
            }
            DiagnoseCheck::ServerObject => {
                "shows the revision the server holds, who wrote it and when, the fields that \
                 differ from the manifest, and the revision `nauthera.io/adopt` names"
            }
            DiagnoseCheck::None => return None,
        })
    }
}
