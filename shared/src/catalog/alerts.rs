//! The alerts of the shipped PrometheusRule that watch something other than a reason (a
//! reason's alert links the reason's page): each with its runbook page, generated beside the
//! reasons' pages as `docs/runbooks/<Alert>.md`.

use super::{DiagnoseCheck, DiagnosisStep, RUNBOOK_DIR, RUNBOOK_URL_BASE, Runbook};

/// An alert and its runbook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlertRunbook {
    /// The alert's name in the PrometheusRule, and the page's name.
    pub alert: &'static str,
    /// The metric its expression reads.
    pub metric: &'static str,
    pub runbook: Runbook,
}

impl AlertRunbook {
    /// `docs/runbooks/<Alert>.md`, relative to the repository root.
    pub fn path(&self) -> String {
        format!("{RUNBOOK_DIR}/{}.md", self.alert)
    }

    /// The published page, for the alert's `runbook_url`.
    pub fn url(&self) -> String {
        format!("{RUNBOOK_URL_BASE}{}.md", self.alert)
    }
}

/// Every such alert.
pub static ALERTS: [AlertRunbook; 1] = [SECRET_ROTATION_OVERDUE];

static SECRET_ROTATION_OVERDUE: AlertRunbook = AlertRunbook {
    alert: "NautheraSecretRotationOverdue",
    metric: "nauthera_operator_secrets_rotation_overdue",
    runbook: Runbook {
        title: "A scheduled rotation of a client secret is past due",
        summary: "A generated client secret is older than its `spec.secret.rotation` allows: \
            its scheduled rotation (`status.nextRotation`) is more than 15 minutes past and the \
            secret in force was not replaced.",
        meaning: &[
            "An OIDCClient with `spec.secret.rotation: {every, window}` has its generated secret \
             rotated once the secret in force (`status.secretSetTime`) is older than `every`, \
             inside the window when one is given: the server mints a new secret, the reconciler \
             writes it into the client's Secret, `status.secretSetTime` moves and \
             `status.nextRotation` names the next one. A due rotation is carried out within \
             seconds.",
            "`nauthera_operator_secrets_rotation_overdue{kind}` counts the clients whose \
             `status.nextRotation` is more than 15 minutes past. Such a rotation could not be \
             carried out: the server refuses the write (`Refused`), the Secret cannot be \
             written (`SecretUndeliverable`), the client is drifted or managed by another \
             reconciler (a rotation writes nothing over either), a ClientPolicy holds the \
             client back, or the reconciler is not running or not leading. \
             `nauthera_operator_secret_oldest_age_seconds{kind}` shows the age of the oldest \
             secret in force.",
        ],
        impact: &[
            "Nothing breaks at once: the secret in force still works. It is older than the \
             team's or the security team's policy allows, and stays so until the cause is \
             fixed.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "Which clients are past due: the NEXT ROTATION column says `due`.",
                command: "kubectl nauthera status oidcclients -A -o wide",
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "The client's reason: its runbook says why nothing is written.",
                command: "kubectl nauthera diagnose oidcclient/<name> -n <ns>",
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "The schedule, when the secret was set and when the rotation fell due.",
                command: "kubectl -n <ns> get oidcclient <name> -o jsonpath='{.spec.secret.rotation} {.status.secretSetTime} {.status.nextRotation}'",
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "Whether a reconciler leads and reaches the server.",
                command: "kubectl nauthera status",
                check: DiagnoseCheck::None,
            },
        ],
        mitigation: &[
            "Fix what the client's reason names (its runbook says how); the rotation follows \
             by itself within seconds.",
            "A drifted client: restore it (`kubectl nauthera restore oidcclient/<name> -n \
             <ns>`) or put the change into its manifest; the rotation follows.",
            "To rotate now regardless of the schedule: `kubectl nauthera rotate \
             oidcclient/<name> -n <ns>`.",
        ],
        escalation: &[
            "The platform team that runs the reconciler, with the output of `kubectl nauthera \
             status -A -o wide` and the reconciler's log lines for the client.",
        ],
    },
};
