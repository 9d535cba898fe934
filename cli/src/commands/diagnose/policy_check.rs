//! The ClientPolicies' verdicts in words: for a manifest before it is applied (`diagnose -f`)
//! and for the live object (the PolicyRules check); and a client's approvals (the Approvals
//! check). The verdicts themselves come from [`crate::model::policies`].

use jiff::Timestamp;
use nauthera_shared::policy::waiting_for;

use super::check_status::CheckStatus;
use crate::cluster::facts::AccessVerdict;
use crate::model::policies::{
    APPROVALS_RESOURCE, APPROVER_ROLE, ApprovalFact, ApprovalVerdict, Coverage, Evaluation,
    POLICIES_RESOURCE, PolicyOutcome, PolicyVerdict,
};
use crate::model::view::ResourceView;
use crate::output::timefmt::{seconds_between, short_duration};

/// Whether the resource is judged before it is applied or as the cluster holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    BeforeApply,
    Live,
}

/// The check's outcome and its findings; sub-items are indented by two spaces.
pub fn policy_findings(outcome: &PolicyOutcome, moment: Moment) -> (CheckStatus, Vec<String>) {
    let evaluation = match outcome {
        PolicyOutcome::NotInstalled => {
            return (
                CheckStatus::Passed,
                vec!["the ClientPolicy CRD is not installed: no policy applies".to_owned()],
            );
        }
        PolicyOutcome::Unlisted { why } => {
            return (
                CheckStatus::Warning,
                vec![format!(
                    "{why}; the policies were not checked: ask for list on {POLICIES_RESOURCE} \
                     (a ClusterRole), or ask the security team which policies cover it"
                )],
            );
        }
        PolicyOutcome::Evaluated(evaluation) => evaluation,
    };
    let mut findings = Vec::new();
    let mut status = CheckStatus::Passed;
    let mut worse = |next: CheckStatus| {
        if rank(next) > rank(status) {
            status = next;
        }
    };
    let covering = evaluation
        .verdicts
        .iter()
        .filter(|v| v.coverage == Coverage::Covers)
        .count();
    let uncertain: Vec<(&str, &str)> = evaluation
        .verdicts
        .iter()
        .filter_map(|v| match &v.coverage {
            Coverage::Unknown { why } => Some((v.policy.as_str(), why.as_str())),
            Coverage::Covers => None,
        })
        .collect();
    // The policies that may cover it once its namespace's labels are known are said once, with
    // why; "none covers it" counts only the others.
    if let Some(finding) = uncertain_finding(&uncertain) {
        worse(CheckStatus::Warning);
        findings.push(finding);
    }
    let certain = evaluation.policies.saturating_sub(uncertain.len());
    if covering == 0 {
        if evaluation.policies == 0 {
            findings.push("no ClientPolicy in the cluster".to_owned());
        } else if certain > 0 {
            findings.push(format!(
                "none of the {certain} {}{} covers it ({})",
                if uncertain.is_empty() { "" } else { "other " },
                plural_policies(certain),
                judged_as(evaluation)
            ));
        }
    }
    for verdict in &evaluation.verdicts {
        match &verdict.coverage {
            Coverage::Unknown { .. } => {}
            Coverage::Covers => {
                if verdict.violated() {
                    worse(CheckStatus::Failed);
                }
                policy_lines(&mut findings, verdict, evaluation, moment);
            }
        }
    }
    if covering > 0 {
        findings.insert(0, format!("judged as {}", judged_as(evaluation)));
    }
    if let Some(why) = &evaluation.count_problem {
        worse(CheckStatus::Warning);
        findings.push(format!("{why}; the namespace limit was not checked"));
    }
    if let Some(approval) = &evaluation.approval {
        findings.push(approval_line(approval, evaluation, moment));
    }
    for broken in &evaluation.broken {
        worse(CheckStatus::Warning);
        findings.push(format!(
            "ClientPolicy {} is refused ({}, cause {}): {}; it enforces nothing until fixed \
             (kubectl get clientpolicy {} -o yaml)",
            broken.policy, broken.reason, broken.cause, broken.problem, broken.policy
        ));
    }
    (status, findings)
}

/// The policies that may cover the resource once its namespace's labels are known, said once,
/// with why they are not; `None` when there are none.
fn uncertain_finding(uncertain: &[(&str, &str)]) -> Option<String> {
    let (_, why) = uncertain.first()?;
    let names: Vec<&str> = uncertain.iter().map(|(policy, _)| *policy).collect();
    Some(format!(
        "{why}: cannot tell whether {} {} it, since {} namespaces by label",
        plural_policies(names.len()),
        if names.len() == 1 {
            format!("{} covers", names[0])
        } else {
            format!("{} cover", names.join(", "))
        },
        if names.len() == 1 {
            "it selects"
        } else {
            "they select"
        },
    ))
}

fn rank(status: CheckStatus) -> u8 {
    match status {
        CheckStatus::Passed | CheckStatus::Info | CheckStatus::Manual => 0,
        CheckStatus::Warning => 1,
        CheckStatus::Failed => 2,
    }
}

/// `OIDCClient, issuer ..., namespace team-a (labels a=b, ...)`.
fn plural_policies(count: usize) -> &'static str {
    if count == 1 {
        "ClientPolicy"
    } else {
        "ClientPolicies"
    }
}

fn judged_as(evaluation: &Evaluation) -> String {
    let labels: Vec<String> = evaluation
        .namespace_labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    format!(
        "{}, issuer {}, namespace {} with labels {}",
        evaluation.kind,
        evaluation.issuer,
        evaluation.namespace,
        labels.join(", ")
    )
}

fn policy_lines(
    findings: &mut Vec<String>,
    verdict: &PolicyVerdict,
    evaluation: &Evaluation,
    moment: Moment,
) {
    let verdict_word = if verdict.violated() {
        match moment {
            Moment::BeforeApply => "does not allow it",
            Moment::Live => "holds it back",
        }
    } else {
        "allows it"
    };
    findings.push(format!(
        "ClientPolicy {} covers it and {verdict_word}:",
        verdict.policy
    ));
    for rule in verdict.refused() {
        let message = rule.message.as_deref().unwrap_or_default();
        findings.push(match moment {
            Moment::BeforeApply => {
                format!("  refused: {message} (kubectl apply refuses it with this message)")
            }
            Moment::Live => format!("  refused: {message}"),
        });
    }
    let allowed: Vec<&str> = verdict
        .rules
        .iter()
        .filter(|rule| rule.allowed)
        .map(|rule| rule.rule.as_str())
        .collect();
    if !allowed.is_empty() {
        findings.push(format!("  allowed by rules {}", allowed.join(", ")));
    }
    if let Some(limit) = &verdict.limit {
        let namespace = &evaluation.namespace;
        let counted = if evaluation.exists {
            format!(
                "{} of the {} other covered OIDCClients of namespace {namespace} were created \
                 before this one",
                limit.earlier, limit.covered
            )
        } else {
            format!(
                "namespace {namespace} holds {} other covered OIDCClient{} and a new client is \
                 counted last",
                limit.earlier,
                if limit.earlier == 1 { "" } else { "s" }
            )
        };
        let fits = if limit.fits {
            "it fits".to_owned()
        } else {
            format!(
                "it does not fit, so the reconciler holds it (PolicyViolation): {}; delete \
                 OIDCClients the namespace no longer needs, or ask the security team to raise \
                 maxClientsPerNamespace",
                limit.message.as_deref().unwrap_or_default()
            )
        };
        findings.push(format!(
            "  rule maxClientsPerNamespace ({} allowed): {counted}: {fits}",
            limit.max
        ));
    }
    if let Some(fields) = &verdict.approval_fields {
        findings.push(if fields.is_empty() {
            "  rule approval: new clients need an approval".to_owned()
        } else {
            format!(
                "  rule approval: new clients, and changes to {}, need an approval",
                fields.join(", ")
            )
        });
    }
}

fn approval_line(approval: &ApprovalVerdict, evaluation: &Evaluation, moment: Moment) -> String {
    let command = nauthera_shared::policy::approve_command(&evaluation.name, &evaluation.namespace);
    match approval {
        ApprovalVerdict::Unchanged => "approval: the fields the policies list are as last \
            approved and written: no new approval needed"
            .to_owned(),
        ApprovalVerdict::Approved { generation } => {
            format!("approval: generation {generation} is approved")
        }
        ApprovalVerdict::Required {
            generation,
            policies,
            fields,
            new_client,
        } => {
            let what = waiting_for(*new_client, fields);
            match moment {
                Moment::BeforeApply => format!(
                    "approval required: {what} needs an approval (ClientPolicy {}); once applied \
                     it waits (WaitingForApproval) until the security team runs {command}",
                    policies.join(", ")
                ),
                Moment::Live => format!(
                    "approval required: {what} needs an approval of generation {generation} \
                     (ClientPolicy {}): {command} --generation {generation}",
                    policies.join(", ")
                ),
            }
        }
    }
}

/// What the Approvals check gathers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalFacts {
    /// The client's ClientApprovals, or why they could not be listed.
    pub approvals: Result<Vec<ApprovalFact>, String>,
    /// The caller's `can-i create clientapprovals.nauthera.io`.
    pub may_approve: AccessVerdict,
}

/// The Approvals check: the client's approvals, the generation waiting, and whether the caller
/// may approve it.
pub fn approvals_findings(
    facts: Option<&ApprovalFacts>,
    view: &ResourceView,
    now: Timestamp,
) -> (CheckStatus, Vec<String>) {
    let Some(facts) = facts else {
        return (
            CheckStatus::Info,
            vec![format!(
                "only OIDCClients need approvals; {} needs none",
                view.reference()
            )],
        );
    };
    let generation = view.generation.unwrap_or_default();
    let command = format!(
        "kubectl nauthera approve oidcclient/{} -n {} --generation {generation}",
        view.name, view.namespace
    );
    let mut findings = Vec::new();
    let mut status = CheckStatus::Info;
    let approved = match &facts.approvals {
        Err(why) => {
            status = CheckStatus::Warning;
            findings.push(why.clone());
            false
        }
        Ok(approvals) => {
            findings.extend(approval_lines(approvals, view, now));
            approvals
                .iter()
                .any(|a| a.generation == generation && a.counts_for(&view.uid))
        }
    };
    let waiting = view.reason() == Some(nauthera_shared::catalog::Reason::WaitingForApproval);
    if approved {
        status = CheckStatus::Passed;
        findings.push(format!(
            "generation {generation} (metadata.generation) is approved{}",
            if waiting {
                ": the reconciler sends it on its next pass"
            } else {
                ""
            }
        ));
    } else if waiting {
        status = CheckStatus::Warning;
        findings.push(format!(
            "generation {generation} (metadata.generation) waits for an approval"
        ));
    } else {
        findings.push(format!(
            "generation {generation} (metadata.generation) is not waiting for an approval"
        ));
    }
    findings.push(may_approve_line(
        &facts.may_approve,
        view,
        approved || !waiting,
        &command,
    ));
    (status, findings)
}

/// The client's ClientApprovals, one line each, saying which do not count.
fn approval_lines(approvals: &[ApprovalFact], view: &ResourceView, now: Timestamp) -> Vec<String> {
    if approvals.is_empty() {
        return vec![format!(
            "no ClientApproval names {} in namespace {}",
            view.name, view.namespace
        )];
    }
    approvals
        .iter()
        .map(|approval| {
            let age = approval.created.map_or_else(
                || "age unknown".to_owned(),
                |at| format!("{} old", short_duration(seconds_between(at, now))),
            );
            let counts = if approval.counts_for(&view.uid) {
                String::new()
            } else {
                "; it names another uid (a client deleted and created again under this name), \
                 so it does not count"
                    .to_owned()
            };
            format!(
                "ClientApproval {} approves generation {} ({age}){counts}",
                approval.name, approval.generation
            )
        })
        .collect()
}

/// Whether the caller may approve, and the command when an approval is wanted (`settled`: the
/// generation is approved or not waiting).
fn may_approve_line(
    can_i: &AccessVerdict,
    view: &ResourceView,
    settled: bool,
    command: &str,
) -> String {
    match can_i.allowed {
        Some(true) => {
            if settled {
                format!("you may create {APPROVALS_RESOURCE} in {}", view.namespace)
            } else {
                format!(
                    "you may approve it (create {APPROVALS_RESOURCE} in {}): {command}",
                    view.namespace
                )
            }
        }
        Some(false) => format!(
            "you may not create {APPROVALS_RESOURCE} in {}: approving needs the security \
             team's role ({APPROVER_ROLE}); ask them to review and run {command}",
            view.namespace
        ),
        None => can_i.detail.clone(),
    }
}
