//! Held back by a ClientPolicy: where a generation stands with the policies that cover it (worked
//! out before the decision, from the policy caches) and the verdicts that say so.

use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::policy::{Rule, Violation, waiting_for};
use nauthera_shared::resources::{ApprovalRecord, PolicyHold, ResourceStatus};

use super::outcome::Verdict;

/// Where the declared generation stands with the ClientPolicies that cover it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PolicyGate {
    /// Nothing holds it back. `approval`: what the write keeps in `status.approval` when an
    /// approval policy covers the resource.
    #[default]
    Open,
    OpenApproved {
        approval: ApprovalRecord,
    },
    /// A rule does not allow it (the first, in policy and rule order).
    Violation(Violation),
    /// An approval of this generation is required and not there.
    AwaitingApproval {
        policies: Vec<String>,
        fields: Vec<String>,
        new_client: bool,
    },
}

impl PolicyGate {
    /// Whether the gate holds the generation back.
    pub fn holds(&self) -> bool {
        matches!(
            self,
            PolicyGate::Violation(_) | PolicyGate::AwaitingApproval { .. }
        )
    }

    /// What a write under this gate keeps in `status.approval`.
    pub fn approval_record(&self) -> Option<&ApprovalRecord> {
        match self {
            PolicyGate::OpenApproved { approval } => Some(approval),
            _ => None,
        }
    }
}

/// What an approval policy lists is kept with the write that put it in force.
pub fn with_approval(mut verdict: Verdict, gate: &PolicyGate) -> Verdict {
    if verdict.fields.generation_in_force.is_some() {
        verdict.fields.approval = gate.approval_record().cloned();
    }
    verdict
}

/// The verdict of a generation a policy holds back: nothing of it is sent; a registered object
/// keeps the generation in force. `command`: how to approve it, for the message.
pub fn held_by_policy(
    gate: &PolicyGate,
    generation: i64,
    status: Option<&ResourceStatus>,
    approve_command: &str,
) -> Option<Verdict> {
    let in_force = status
        .filter(|s| s.revision.is_some())
        .and_then(|s| s.generation_in_force);
    let kept = match in_force {
        Some(kept) if kept == generation => {
            format!(
                "generation {kept} stays in force on the server (written before the rule held it)"
            )
        }
        Some(kept) => format!("the server keeps generation {kept} in force"),
        None => "nothing is registered on the server".to_owned(),
    };
    let (reason, cause, message, hold) = match gate {
        PolicyGate::Violation(violation) => (
            Reason::PolicyViolation,
            if violation.rule == Rule::MaxClientsPerNamespace {
                Cause::NamespaceLimit
            } else {
                Cause::PolicyRule
            },
            if in_force == Some(generation) {
                format!(
                    "{}; {kept}, and a new generation is sent once the manifest complies",
                    violation.message
                )
            } else {
                format!(
                    "{}; generation {generation} is not sent and {kept}",
                    violation.message
                )
            },
            PolicyHold {
                policy: violation.policy.clone(),
                rule: violation.rule.as_str().to_owned(),
                field: Some(violation.field.clone()),
            },
        ),
        PolicyGate::AwaitingApproval {
            policies,
            fields,
            new_client,
        } => {
            let what = waiting_for(*new_client, fields);
            (
                Reason::WaitingForApproval,
                Cause::ApprovalRequired,
                format!(
                    "ClientPolicy {}, rule approval: {what} needs an approval of generation \
                     {generation} ({approve_command}); it is not sent until then and {kept}",
                    policies.join(", ")
                ),
                PolicyHold {
                    policy: policies.first().cloned().unwrap_or_default(),
                    rule: Rule::Approval.as_str().to_owned(),
                    field: None,
                },
            )
        }
        PolicyGate::Open | PolicyGate::OpenApproved { .. } => return None,
    };
    let mut verdict = Verdict::new(reason, cause, message);
    verdict.fields.policy = Some(hold);
    Some(verdict)
}
