//! Diagnosis as a pure function: the catalog's runbook for the resource's reason, its text filled
//! with the live facts, and each step's check evaluated over facts gathered beforehand.

use jiff::Timestamp;
use nauthera_shared::catalog::{
    Cause, DiagnoseCheck, Facts, Phase, Placeholder, Reason, render, runbook_url,
};
use nauthera_shared::resources::ResourceStatus;
use serde::Serialize;

use super::check_status::CheckStatus;
use super::policy_check::{ApprovalFacts, Moment, approvals_findings, policy_findings};
use crate::cli::kinds::Kind;
use crate::cluster::control_plane::report::{CERTIFICATE_WARNING_SECONDS, control_plane_report};
use crate::cluster::control_plane::{ControlPlaneFacts, RECONCILER_NAME};
use crate::cluster::facts::{AccessVerdict, EventFact, SecretFacts};
use crate::model::drift::{DriftVerdict, drift_summary};
use crate::model::grant_check::{self, GrantCheck, ReportedGrants, entry_yaml};
use crate::model::policies::{ApprovalVerdict, PolicyOutcome};
use crate::model::view::{ResourceView, SecretUse};
use crate::output::timefmt::{seconds_between, short_duration};
use nauthera_shared::workloads::Consumer;

/// How many recent events a diagnosis shows.
const RECENT_EVENTS: usize = 10;

/// Everything gathered about one resource before its diagnosis.
#[derive(Clone, Debug)]
pub struct DiagnoseFacts {
    pub view: ResourceView,
    pub control_plane: ControlPlaneFacts,
    pub organization: Option<String>,
    /// The Secret in question, if the resource has one.
    pub secret: Option<Result<SecretFacts, String>>,
    /// The access reviews for the reconciler's ServiceAccount on Secrets in the namespace.
    pub access: Vec<AccessVerdict>,
    pub events: Result<Vec<EventFact>, String>,
    pub consumers: Result<Vec<Consumer>, String>,
    /// Every drifted resource visible, for the drift count.
    pub drifted: Vec<ResourceView>,
    /// The reconciler's recent lines about the resource, or why they could not be read.
    pub logs: Result<Vec<String>, String>,
    /// The ClientPolicies' verdicts on the live object; `None` when not gathered or its kind
    /// is not one policies cover.
    pub policy: Option<PolicyOutcome>,
    /// The client's ClientApprovals and whether the caller may approve; `None` for other kinds
    /// or when not gathered.
    pub approvals: Option<ApprovalFacts>,
    pub now: Timestamp,
}

impl DiagnoseFacts {
    /// The published state of the reconciler (the shard) this resource is left to.
    fn reconciler_state(&self) -> Option<&nauthera_shared::control_plane::ControlPlaneState> {
        let manager = self.view.status.as_ref().and_then(|s| s.manager.as_deref());
        self.control_plane
            .state_for(self.view.kind, &self.view.namespace, manager)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    pub number: usize,
    pub check: DiagnoseCheck,
    pub status: CheckStatus,
    /// The step's runbook text, placeholders filled.
    pub text: String,
    pub command: String,
    pub findings: Vec<String>,
    pub runbook: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    pub kind: crate::cli::kinds::Kind,
    pub namespace: String,
    pub name: String,
    /// The status's reason; `Pending` is used for a resource the reconciler has not seen yet.
    pub reason: Reason,
    pub reconciled: bool,
    pub phase: Option<Phase>,
    pub message: Option<String>,
    pub title: String,
    pub summary: String,
    pub runbook: String,
    pub steps: Vec<StepResult>,
    pub mitigation: Vec<String>,
    pub escalation: Vec<String>,
    pub attention: bool,
}

/// The placeholder facts of a resource.
pub fn placeholder_facts(facts: &DiagnoseFacts) -> Facts {
    let view = &facts.view;
    let mut filled = Facts::install_defaults()
        .with(Placeholder::Namespace, &view.namespace)
        .with(Placeholder::Name, &view.name)
        .with(Placeholder::Kind, view.kind.singular())
        .with(
            Placeholder::ReconcilerNamespace,
            &facts.control_plane.namespace,
        )
        .with(Placeholder::ReconcilerServiceAccount, RECONCILER_NAME);
    // The reconciler's own certificate Secret, as its configuration names it; never the
    // resource's Secret.
    if let Some(tls_secret) = facts
        .control_plane
        .state
        .as_ref()
        .and_then(|state| state.tls_secret.as_ref())
    {
        filled.set(Placeholder::ReconcilerTlsSecret, tls_secret);
    }
    if let Some(secret) = view.secret.name() {
        filled.set(Placeholder::Secret, secret);
    }
    if let Some(filter) = audit_filter(view) {
        filled.set(Placeholder::AuditFilter, filter);
    }
    if let Some(slug) = &facts.organization {
        filled.set(Placeholder::Slug, slug);
    }
    if let Some(generation) = view.generation {
        filled.set(Placeholder::Generation, generation.to_string());
    }
    if let Some(policy) = holding_policy(facts) {
        filled.set(Placeholder::Policy, policy);
    }
    if let Some(elsewhere) = view
        .status
        .as_ref()
        .and_then(|s| s.managed_elsewhere.as_deref())
    {
        filled.set(Placeholder::Manager, elsewhere.manager.clone());
    }
    filled
}

/// The fields of a ListAuditEvents request that select the resource's records: a client by the
/// id the server assigned (or, for an object observed or waiting for adoption, the id the
/// server holds; none yet: nothing to select), every other kind by kind and name.
fn audit_filter(view: &ResourceView) -> Option<String> {
    if view.kind == Kind::OidcClient {
        let client_id = view
            .status
            .as_ref()?
            .client_id
            .as_ref()
            .or_else(|| view.server_object()?.client_id.as_ref())?;
        return Some(format!(r#""clientId": "{client_id}""#));
    }
    let object_kind = view.kind.object_kind_name();
    Some(format!(
        r#""kind": "{object_kind}", "name": "{}""#,
        view.name
    ))
}

/// The ClientPolicy that holds the resource back: as its status names it, else the first the
/// live evaluation finds holding it.
fn holding_policy(facts: &DiagnoseFacts) -> Option<String> {
    let named = facts
        .view
        .status
        .as_ref()
        .and_then(|status| status.policy.as_ref())
        .map(|hold| hold.policy.clone())
        .filter(|policy| !policy.is_empty());
    named.or_else(|| {
        let Some(PolicyOutcome::Evaluated(evaluation)) = &facts.policy else {
            return None;
        };
        let violated = evaluation
            .verdicts
            .iter()
            .find(|verdict| verdict.violated())
            .map(|verdict| verdict.policy.clone());
        violated.or_else(|| match &evaluation.approval {
            Some(ApprovalVerdict::Required { policies, .. }) => policies.first().cloned(),
            _ => None,
        })
    })
}

pub fn diagnose(facts: &DiagnoseFacts) -> Diagnosis {
    let view = &facts.view;
    let reason = view.reason().unwrap_or(Reason::Pending);
    let entry = reason.entry();
    let filled = placeholder_facts(facts);
    let url = runbook_url(reason);
    let steps: Vec<StepResult> = entry
        .runbook
        .diagnosis
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let (status, findings) = evaluate(step.check, facts);
            StepResult {
                number: index + 1,
                check: step.check,
                status,
                text: render(step.text, &filled),
                command: render(step.command, &filled),
                findings,
                runbook: format!("{url}#diagnosis"),
            }
        })
        .collect();
    // An observed object is as its manifest asks while the reconciler can read it: the checks
    // say whether it needs a look.
    let settled =
        view.phase() == Some(Phase::Registered) || (view.observes() && reason == Reason::Observed);
    let attention = !settled || steps.iter().any(|step| step.status.needs_attention());
    Diagnosis {
        kind: view.kind,
        namespace: view.namespace.clone(),
        name: view.name.clone(),
        reason,
        reconciled: view.status.is_some(),
        phase: view.phase(),
        message: view.message().map(str::to_owned),
        title: entry.runbook.title.to_owned(),
        summary: render(entry.runbook.summary, &filled),
        runbook: url,
        steps,
        mitigation: entry
            .runbook
            .mitigation
            .iter()
            .map(|text| render(text, &filled))
            .collect(),
        escalation: entry
            .runbook
            .escalation
            .iter()
            .map(|text| render(text, &filled))
            .collect(),
        attention,
    }
}

/// One check over the gathered facts.
pub fn evaluate(check: DiagnoseCheck, facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    match check {
        DiagnoseCheck::ConditionMessage => condition(facts),
        DiagnoseCheck::Events => events(facts),
        DiagnoseCheck::SecretOwner => secret_owner(facts),
        DiagnoseCheck::SecretConsumers => secret_consumers(facts),
        DiagnoseCheck::SecretRefPresent => secret_ref_present(facts),
        DiagnoseCheck::ReconcilerCanI => can_i(facts),
        DiagnoseCheck::GrantCovers => grant(facts),
        DiagnoseCheck::DriftRevisions => drift_revisions(facts),
        DiagnoseCheck::DriftWho => drift_who(facts),
        DiagnoseCheck::DriftCount => drift_count(facts),
        DiagnoseCheck::ProbeState => probe(facts),
        DiagnoseCheck::CertificateExpiry => certificate(facts),
        DiagnoseCheck::ReconcilerLogs => logs(facts),
        DiagnoseCheck::PolicyRules => policy_rules(facts),
        DiagnoseCheck::Approvals => {
            approvals_findings(facts.approvals.as_ref(), &facts.view, facts.now)
        }
        DiagnoseCheck::OtherManager => other_manager(facts),
        DiagnoseCheck::ServerObject => server_object(facts),
        DiagnoseCheck::ReconcileMetrics
        | DiagnoseCheck::ServerCallMetrics
        | DiagnoseCheck::AuditLog
        | DiagnoseCheck::None => (CheckStatus::Manual, Vec::new()),
    }
}

/// What the server holds of an observed or not yet adopted object, and the adoption asked for.
fn server_object(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    use nauthera_shared::resources::AdoptSecret;
    use nauthera_shared::{ADOPT_ANNOTATION, ADOPT_SECRET_ANNOTATION};
    let view = &facts.view;
    let reference = format!("{} -n {}", view.reference(), view.namespace);
    let Some(observed) = view.server_object() else {
        let adopted = view
            .status
            .as_ref()
            .and_then(|status| status.last_adoption.as_deref())
            .map(|record| {
                format!(
                    "; it adopted revision {} (in force: {}, {})",
                    record.from_revision,
                    record.revision,
                    if record.written {
                        "written"
                    } else {
                        "nothing written"
                    }
                )
            })
            .unwrap_or_default();
        return (
            CheckStatus::Passed,
            vec![format!(
                "the reconciler manages the object (status.observed is empty){adopted}"
            )],
        );
    };
    let observing = view.reason() == Some(Reason::Observed);
    let mut findings = Vec::new();
    if observed.absent {
        findings.push(if observing {
            "the server holds no object of this name: with managementPolicy: Manage the \
             reconciler creates it as a new object"
                .to_owned()
        } else {
            "the server holds no object of this name".to_owned()
        });
    } else {
        let at = observed
            .written_at
            .as_ref()
            .map(|at| {
                format!(
                    " at {} ({} ago)",
                    at.0,
                    short_duration(seconds_between(at.0, facts.now))
                )
            })
            .unwrap_or_default();
        findings.push(format!(
            "the server holds revision {}{}, written by {}{at}",
            observed.revision,
            observed
                .client_id
                .as_ref()
                .map(|id| format!(" (client id {id})"))
                .unwrap_or_default(),
            observed.writer()
        ));
        if observed.differences.is_empty() {
            findings.push("the manifest declares what the server holds".to_owned());
        } else {
            findings.push(format!(
                "the manifest differs in {}: what taking the object over writes",
                observed.differences.join(", ")
            ));
        }
        if let Some(at) = &observed.observed_at {
            findings.push(format!(
                "read {} ago",
                short_duration(seconds_between(at.0, facts.now))
            ));
        }
    }
    let named = view.annotations.get(ADOPT_ANNOTATION);
    let stale = named.is_some_and(|revision| !observed.absent && *revision != observed.revision);
    match named {
        Some(revision) if stale => findings.push(format!(
            "{ADOPT_ANNOTATION} names revision {revision}, which the server no longer holds: \
             look at revision {} and, if it is still wanted, kubectl nauthera adopt {reference}",
            observed.revision
        )),
        Some(revision) => findings.push(format!("{ADOPT_ANNOTATION} names revision {revision}")),
        None => {}
    }
    let secret_choice = view.annotations.get(ADOPT_SECRET_ANNOTATION);
    let bad_choice = secret_choice.is_some_and(|value| AdoptSecret::parse(value).is_none());
    if let Some(value) = secret_choice {
        if bad_choice {
            findings.push(format!(
                "{ADOPT_SECRET_ANNOTATION} is `{value}`: it takes Replace (the default) or Keep"
            ));
        } else {
            findings.push(format!("{ADOPT_SECRET_ANNOTATION} is {value}"));
        }
    }
    if observing {
        if !observed.absent {
            findings.push(format!(
                "to manage it from this manifest, set managementPolicy: Manage: the reconciler \
                 takes it over from revision {}, {}",
                observed.revision,
                if observed.differences.is_empty() {
                    "writing nothing"
                } else {
                    "writing the fields that differ over that revision only"
                }
            ));
        }
    } else if view.reason() == Some(Reason::AdoptionRequired) && !observed.absent && named.is_none()
    {
        findings.push(format!(
            "to take it over: kubectl nauthera adopt {reference} (shows what it writes, then \
             adopts revision {})",
            observed.revision
        ));
    }
    let outcome = if stale || bad_choice {
        CheckStatus::Failed
    } else if observed.differences.is_empty() && !observed.absent && (observing || named.is_some())
    {
        CheckStatus::Passed
    } else {
        CheckStatus::Warning
    };
    (outcome, findings)
}

/// The reconciler that manages the object elsewhere, beside this one's own manager and mapping.
fn other_manager(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let status = facts.view.status.as_ref();
    let Some(elsewhere) = status.and_then(|s| s.managed_elsewhere.as_deref()) else {
        return (
            CheckStatus::Passed,
            vec![
                "no other reconciler manages the object (status.managedElsewhere is empty)"
                    .to_owned(),
            ],
        );
    };
    let mut findings = vec![format!(
        "{} wrote revision {}{} (its generation {})",
        elsewhere.writer(),
        elsewhere.revision,
        elsewhere
            .written_at
            .as_ref()
            .map(|at| format!(
                " at {} ({} ago)",
                at.0,
                short_duration(seconds_between(at.0, facts.now))
            ))
            .unwrap_or_default(),
        elsewhere.generation
    )];
    let Some(own) = facts.reconciler_state() else {
        findings
            .push("this reconciler's manager is unknown: its state is not published".to_owned());
        return (CheckStatus::Failed, findings);
    };
    let mapping = if own.namespace_mapping.is_identity() {
        "no cluster name: namespaces are the same on the server".to_owned()
    } else {
        format!(
            "namespace {} is {} on the server",
            facts.view.namespace,
            own.namespace_mapping.to_server(&facts.view.namespace)
        )
    };
    findings.push(format!(
        "this reconciler writes as manager {}{}; {mapping}",
        own.manager,
        own.cluster_name
            .as_ref()
            .map(|cluster| format!(" in cluster {cluster}"))
            .unwrap_or_default()
    ));
    if own.manager == elsewhere.manager {
        findings.push(
            "both use one manager name from different identities: give each reconciler its own \
             --manager"
                .to_owned(),
        );
    } else if status.and_then(|s| s.cause) == Some(Cause::Claimed)
        && own.namespace_mapping.is_identity()
    {
        findings.push(
            "two manifests declare one object: if the other is in another cluster, give each \
             cluster its own --cluster-name"
                .to_owned(),
        );
    }
    (CheckStatus::Failed, findings)
}

fn policy_rules(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    match &facts.policy {
        Some(outcome) => policy_findings(outcome, Moment::Live),
        None if facts.view.kind.policy_kind().is_none() => (
            CheckStatus::Info,
            vec![format!(
                "ClientPolicies do not cover {}s",
                facts.view.kind.singular()
            )],
        ),
        None => (
            CheckStatus::Warning,
            vec!["the policies were not evaluated".to_owned()],
        ),
    }
}

fn condition(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let view = &facts.view;
    let Some(status) = &view.status else {
        return (
            CheckStatus::Warning,
            vec![
                "no status yet: the reconciler has not processed this resource; check that it \
                 runs and watches this namespace (kubectl nauthera status)"
                    .to_owned(),
            ],
        );
    };
    let mut findings = Vec::new();
    if let Some(condition) = view.ready_condition() {
        findings.push(format!(
            "Ready={} reason={} since {} ({} ago)",
            condition.status,
            condition.reason,
            condition.last_transition_time.0,
            short_duration(seconds_between(condition.last_transition_time.0, facts.now))
        ));
        if !condition.message.is_empty() {
            findings.push(format!("message: {}", condition.message));
        }
    } else if let Some(message) = view.message() {
        findings.push(format!("message: {message}"));
    }
    if let Some(reason) = view.server_reason() {
        let cause = Cause::from_server_reason(reason);
        findings.push(format!(
            "the server's stable reason: {reason} (cause {})",
            cause.as_str()
        ));
    }
    if let Some(superseded) = view.superseded_drift() {
        findings.push(superseded);
    }
    if let Some(hold) = &status.policy {
        findings.push(format!(
            "held back by ClientPolicy {}, rule {}{}",
            hold.policy,
            hold.rule,
            hold.field
                .as_ref()
                .map(|field| format!(" (field {field})"))
                .unwrap_or_default()
        ));
    }
    findings.extend(written_lines(view, status, facts.now));
    let outcome = match status.phase {
        Some(Phase::Registered) => CheckStatus::Passed,
        Some(Phase::Pending) | Some(Phase::Observed) => CheckStatus::Warning,
        Some(Phase::Error) | None => CheckStatus::Failed,
    };
    (outcome, findings)
}

/// What the reconciler wrote of the resource: generations, revision, client id, when the client
/// secret was set, and whether the newest generation is processed yet.
fn written_lines(view: &ResourceView, status: &ResourceStatus, now: Timestamp) -> Vec<String> {
    let mut findings = Vec::new();
    let number = |value: Option<i64>| value.map_or_else(|| "-".to_owned(), |n| n.to_string());
    findings.push(format!(
        "generation {}, observed {}, in force on the server {}",
        number(view.generation),
        number(status.observed_generation),
        number(status.generation_in_force)
    ));
    if let Some(revision) = &status.revision {
        findings.push(format!("revision written: {revision}"));
    }
    if let Some(client_id) = &status.client_id {
        findings.push(format!("client id: {client_id}"));
    }
    // When the secret in force was set, and where a generated one went: a rotation since a
    // workload started means it holds a value the server no longer accepts.
    if let Some(set) = &status.secret_set_time {
        let into = status
            .secret_ref
            .as_ref()
            .map(|secret| format!(" into Secret {}", secret.name))
            .unwrap_or_default();
        findings.push(format!(
            "client secret last set{into} at {} ({} ago); workloads started before then hold an \
             older one",
            set.0,
            short_duration(seconds_between(set.0, now))
        ));
    }
    if view.generation.is_some() && status.observed_generation < view.generation {
        findings.push("the newest generation has not been processed yet".to_owned());
    }
    findings
}

fn events(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    match &facts.events {
        Err(problem) => (CheckStatus::Warning, vec![problem.clone()]),
        Ok(events) if events.is_empty() => (
            CheckStatus::Info,
            vec!["no events (they expire after an hour by default)".to_owned()],
        ),
        Ok(events) => {
            let start = events.len().saturating_sub(RECENT_EVENTS);
            let lines = events[start..]
                .iter()
                .map(|event| {
                    format!(
                        "{} ago  {}  {}{}  {}",
                        event.time.map_or_else(
                            || "?".to_owned(),
                            |time| short_duration(seconds_between(time, facts.now))
                        ),
                        event.type_,
                        event.reason,
                        if event.count > 1 {
                            format!(" (x{})", event.count)
                        } else {
                            String::new()
                        },
                        event.message
                    )
                })
                .collect();
            (CheckStatus::Info, lines)
        }
    }
}

fn logs(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    match &facts.logs {
        Ok(lines) if lines.is_empty() => (
            CheckStatus::Info,
            vec!["no reconciler log line about it in the last hour".to_owned()],
        ),
        Ok(lines) => (CheckStatus::Info, lines.clone()),
        Err(why) => (
            CheckStatus::Manual,
            vec![format!("{why}; run the command above")],
        ),
    }
}

fn secret_owner(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let view = &facts.view;
    let Some(secret) = &facts.secret else {
        return (
            CheckStatus::Info,
            vec!["this resource writes no Secret".to_owned()],
        );
    };
    let secret = match secret {
        Ok(secret) => secret,
        Err(problem) => return (CheckStatus::Warning, vec![problem.clone()]),
    };
    if !secret.exists {
        return (
            CheckStatus::Passed,
            vec![format!(
                "Secret {} does not exist: the reconciler creates it, owned by {}",
                secret.name,
                view.reference()
            )],
        );
    }
    if secret.owned_by(view.kind, &view.name, &view.uid) {
        return (
            CheckStatus::Passed,
            vec![format!(
                "Secret {} is owned by {}",
                secret.name,
                view.reference()
            )],
        );
    }
    let owners = if secret.owners.is_empty() {
        "no owner (created by hand or by another tool)".to_owned()
    } else {
        secret
            .owners
            .iter()
            .map(|owner| format!("{}/{}", owner.kind, owner.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    (
        CheckStatus::Failed,
        vec![
            format!(
                "Secret {} exists and belongs to {owners}: the reconciler never writes over a \
                 Secret it does not own",
                secret.name
            ),
            "choose another name in spec.secret.secretName, or delete that Secret if nothing \
             needs it"
                .to_owned(),
        ],
    )
}

fn secret_consumers(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let Some(secret) = facts.view.secret.name() else {
        return (
            CheckStatus::Info,
            vec!["this resource has no Secret".to_owned()],
        );
    };
    match &facts.consumers {
        Err(problem) => (CheckStatus::Warning, vec![problem.clone()]),
        Ok(consumers) if consumers.is_empty() => (
            CheckStatus::Info,
            vec![format!(
                "no Deployment, StatefulSet or DaemonSet in {} uses Secret {secret}",
                facts.view.namespace
            )],
        ),
        Ok(consumers) => (
            CheckStatus::Info,
            consumers
                .iter()
                .map(|consumer| {
                    format!(
                        "{}/{} uses Secret {secret} ({}); restart: {}",
                        consumer.kind,
                        consumer.name,
                        consumer.uses.join(", "),
                        consumer.restart_command(&facts.view.namespace)
                    )
                })
                .collect(),
        ),
    }
}

fn secret_ref_present(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let SecretUse::Referenced { name, key } = &facts.view.secret else {
        return (
            CheckStatus::Info,
            vec!["this resource references no Secret".to_owned()],
        );
    };
    match &facts.secret {
        Some(Ok(secret)) if !secret.exists => (
            CheckStatus::Failed,
            vec![format!(
                "Secret {name} does not exist in namespace {}; create it (or check the \
                 SealedSecret or tool that should)",
                facts.view.namespace
            )],
        ),
        Some(Ok(secret)) if !secret.keys.iter().any(|k| k == key) => (
            CheckStatus::Failed,
            vec![format!(
                "Secret {name} has no key {key} (it has: {}): the resource waits as Pending \
                 until it is there; put the key in the Secret, or fix secretRef.key",
                if secret.keys.is_empty() {
                    "none".to_owned()
                } else {
                    secret.keys.join(", ")
                }
            )],
        ),
        Some(Ok(secret)) if secret.empty_keys.iter().any(|k| k == key) => (
            CheckStatus::Failed,
            vec![format!(
                "key {key} of Secret {name} is empty; put the secret's value in it"
            )],
        ),
        Some(Ok(_)) => (
            CheckStatus::Passed,
            vec![format!("Secret {name} exists and holds key {key}")],
        ),
        Some(Err(problem)) => (CheckStatus::Warning, vec![problem.clone()]),
        None => (
            CheckStatus::Warning,
            vec!["the Secret was not read".to_owned()],
        ),
    }
}

fn can_i(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    if facts.access.is_empty() {
        return (
            CheckStatus::Info,
            vec!["no access review was needed".to_owned()],
        );
    }
    let subject = format!(
        "system:serviceaccount:{}:{RECONCILER_NAME}",
        facts.control_plane.namespace
    );
    let mut findings = Vec::new();
    let mut outcome = CheckStatus::Passed;
    for verdict in &facts.access {
        match verdict.allowed {
            Some(true) => findings.push(format!("{} secrets: yes", verdict.verb)),
            Some(false) => {
                outcome = CheckStatus::Failed;
                findings.push(format!(
                    "{} secrets: no{}",
                    verdict.verb,
                    if verdict.detail.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", verdict.detail)
                    }
                ));
            }
            None => {
                if outcome == CheckStatus::Passed {
                    outcome = CheckStatus::Warning;
                }
                findings.push(format!("{} secrets: {}", verdict.verb, verdict.detail));
            }
        }
    }
    findings.insert(
        0,
        format!("as {subject} in namespace {}:", facts.view.namespace),
    );
    if outcome == CheckStatus::Failed {
        findings.push(format!(
            "grant them with a Role on secrets in {} bound to ServiceAccount {}/{RECONCILER_NAME}",
            facts.view.namespace, facts.control_plane.namespace
        ));
    }
    (outcome, findings)
}

fn grant(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let view = &facts.view;
    let outcome = grant_check::check(
        ReportedGrants::from_state(facts.reconciler_state()),
        view.kind.operation(),
        facts.organization.as_deref(),
        &view.namespace,
    );
    let call = format!(
        "operation {} on organization {} in namespace {}",
        view.kind.operation(),
        facts.organization.as_deref().unwrap_or("(unknown)"),
        view.namespace
    );
    match outcome {
        GrantCheck::Covered => (
            CheckStatus::Passed,
            vec![format!("the reported grant covers {call}")],
        ),
        GrantCheck::Unknown { why } => (
            CheckStatus::Warning,
            vec![format!("cannot check {call}: {why}")],
        ),
        GrantCheck::Outside {
            reason,
            cause,
            proposed_entry,
        } => {
            let mut findings = vec![
                format!("{reason}: {cause} ({call})"),
                "this allowedClients entry of the server's configuration would cover it:"
                    .to_owned(),
            ];
            findings.extend(
                entry_yaml(&proposed_entry)
                    .lines()
                    .map(|line| format!("  {line}")),
            );
            (CheckStatus::Failed, findings)
        }
    }
}

fn drift_revisions(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let view = &facts.view;
    let drift = view
        .status
        .as_ref()
        .and_then(|status| status.drift.as_ref());
    let (declared, server) = view.revisions();
    let declared = declared.unwrap_or_else(|| "-".to_owned());
    match drift {
        None => (
            CheckStatus::Passed,
            vec![format!("no drift recorded; revision written: {declared}")],
        ),
        Some(drift) => {
            let mut findings = vec![format!(
                "revision written by the reconciler: {declared}; on the server: {}",
                server.unwrap_or_else(|| "-".to_owned())
            )];
            if drift.removed {
                findings.push("the object is gone from the server".to_owned());
            }
            if let Some(changed) = &drift.changed_at {
                findings.push(format!(
                    "changed at {} ({} ago)",
                    changed.0,
                    short_duration(seconds_between(changed.0, facts.now))
                ));
            }
            (CheckStatus::Failed, findings)
        }
    }
}

fn drift_who(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let Some(drift) = facts
        .view
        .status
        .as_ref()
        .and_then(|status| status.drift.as_ref())
    else {
        return (CheckStatus::Passed, vec!["no drift recorded".to_owned()]);
    };
    let mut findings = vec![format!(
        "changed by manager {}, actor {}",
        drift.manager.as_deref().unwrap_or("(none named)"),
        drift
            .actor
            .as_deref()
            .unwrap_or("(unknown: see the audit log)")
    )];
    if let Some(changed) = &drift.changed_at {
        findings.push(format!("at {}", changed.0));
    }
    if !drift.fields.is_empty() {
        findings.push(format!("fields that differ: {}", drift.fields.join(", ")));
    }
    if let Some(detected) = &drift.detected_at {
        findings.push(format!("noticed by the reconciler at {}", detected.0));
    }
    (CheckStatus::Failed, findings)
}

fn drift_count(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let summary = drift_summary(&facts.drifted);
    let who = summary
        .describe_actors()
        .map(|actors| format!(" by {actors}"))
        .unwrap_or_default();
    let mut findings = vec![match summary.verdict {
        DriftVerdict::None => "no resource is drifted".to_owned(),
        DriftVerdict::OneChange => format!("one resource drifted: changed on the server{who}"),
        DriftVerdict::SeparateChanges => format!(
            "{} resources drifted: separate changes on the server{who}",
            summary.count
        ),
        DriftVerdict::ServerRestore => format!(
            "{} resources drifted, {} by a restore of the server (its history restarted, or its \
             audit log says so)",
            summary.count, summary.by_restore
        ),
    }];
    for view in &facts.drifted {
        findings.push(format!(
            "{} {}/{} drifted {}",
            view.kind,
            view.namespace,
            view.name,
            view.drift_time().map_or_else(
                || "(time unknown)".to_owned(),
                |time| format!("{} ago", short_duration(seconds_between(time, facts.now)))
            )
        ));
    }
    let outcome = if summary.count == 0 {
        CheckStatus::Passed
    } else {
        CheckStatus::Info
    };
    (outcome, findings)
}

fn probe(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let report = control_plane_report(&facts.control_plane, facts.now);
    let Some(probe) = &report.probe else {
        return (CheckStatus::Warning, report.findings.clone());
    };
    let mut findings = vec![format!(
        "probe: {}{}{}{}",
        probe.outcome,
        probe
            .since_seconds
            .map(|since| format!(" since {} ago", short_duration(since)))
            .unwrap_or_default(),
        match (&report.freshness, probe.age_seconds) {
            (Some(crate::cluster::control_plane::Freshness::Unknown { .. }), _) => {
                " (freshness unknown)".to_owned()
            }
            (_, Some(age)) => format!(" (as of {} ago)", short_duration(age)),
            _ => String::new(),
        },
        probe
            .message
            .as_ref()
            .map(|message| format!(": {message}"))
            .unwrap_or_default()
    )];
    findings.push(format!(
        "server build: {}",
        report
            .server_build
            .as_deref()
            .unwrap_or("none has answered yet")
    ));
    if let Some(success) = probe.last_success_time {
        findings.push(format!(
            "last answered {} ago",
            short_duration(seconds_between(success, facts.now))
        ));
    }
    let outcome = if probe.reason == Some(Reason::Registered) {
        CheckStatus::Passed
    } else {
        CheckStatus::Failed
    };
    (outcome, findings)
}

fn certificate(facts: &DiagnoseFacts) -> (CheckStatus, Vec<String>) {
    let Some(state) = facts.reconciler_state() else {
        return (
            CheckStatus::Warning,
            vec![
                facts
                    .control_plane
                    .state_problem
                    .clone()
                    .unwrap_or_else(|| "the reconciler's state is not published".to_owned()),
            ],
        );
    };
    let Some(not_after) = state.certificate_not_after else {
        return (
            CheckStatus::Failed,
            vec!["the reconciler could not read its client certificate".to_owned()],
        );
    };
    let left = seconds_between(facts.now, not_after);
    let mut findings = vec![format!(
        "identities: {}",
        if state.certificate_identities.is_empty() {
            "none".to_owned()
        } else {
            state.certificate_identities.join(", ")
        }
    )];
    let outcome = if left <= 0 {
        findings.push(format!("expired at {not_after}"));
        CheckStatus::Failed
    } else if left <= CERTIFICATE_WARNING_SECONDS {
        findings.push(format!(
            "expires at {not_after}, in {}",
            short_duration(left)
        ));
        CheckStatus::Warning
    } else {
        findings.push(format!(
            "valid until {not_after} ({} left)",
            short_duration(left)
        ));
        CheckStatus::Passed
    };
    if !state.identity.is_empty() && !state.certificate_identities.contains(&state.identity) {
        findings.push(format!(
            "the server saw identity {}, which is not among the certificate's",
            state.identity
        ));
    }
    (outcome, findings)
}
