//! The status report: a pure function of the control-plane facts, the resources and the time.

use std::collections::BTreeMap;

use jiff::Timestamp;
use nauthera_shared::catalog::{Cause, Phase, Reason};
use nauthera_shared::control_plane::ShardOverlap;
use nauthera_shared::grants::GrantEntry;
use nauthera_shared::resources::{Drift, PolicyHold, RestoreRecord, SupersededDrift};
use nauthera_shared::topology::Scope;
use serde::Serialize;

use super::policies::PoliciesReport;
use crate::control_plane::{self, ControlPlaneFacts, Freshness, Replicas};
use crate::grant_check::{self, GrantCheck, ReportedGrants};
use crate::kinds::Kind;
use crate::timefmt::seconds_between;
use crate::view::{OrganizationDirectory, ResourceView};

/// A client certificate that expires sooner than this is called out.
pub const CERTIFICATE_WARNING_SECONDS: i64 = 14 * 86_400;
/// How long the table keeps showing a drift that a new generation was written over.
const SUPERSEDED_SHOWN_SECONDS: i64 = 86_400;
/// At most this many people are named in the drift summary.
const ACTORS_SHOWN: usize = 5;

/// The document `status -o json|yaml` prints (its shape is documented in the README).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// `kubectl-nauthera/v1`.
    pub api_version: &'static str,
    /// `StatusReport`.
    pub kind: &'static str,
    pub generated_at: Timestamp,
    /// The namespace looked at, or `*` for every namespace.
    pub scope: String,
    pub control_plane: ControlPlaneReport,
    /// The other shards publishing in the reconciler's namespace, one block each.
    pub shards: Vec<ControlPlaneReport>,
    pub resources: Vec<ResourceRow>,
    /// Kinds whose CRD is not installed.
    pub not_installed: Vec<Kind>,
    /// What the ClientPolicies hold back; `null` when the cluster has none and nothing is held.
    pub policies: Option<PoliciesReport>,
    pub summary: Summary,
    /// Whether anything needs attention (also exit code 1).
    pub attention: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneReport {
    pub namespace: String,
    /// The cluster name the reconciler was given (several clusters on one server).
    pub cluster_name: Option<String>,
    /// The part of the cluster the reconciler reconciles, when it is limited or a shard.
    pub scope: Option<Scope>,
    /// The other shards whose scopes overlap this one, as the reconciler published them.
    pub overlaps: Vec<ShardOverlap>,
    /// Whether the reconciler's published state was found.
    pub state_found: bool,
    pub reconciler: Option<Replicas>,
    pub leader: Option<String>,
    pub reconciler_version: Option<String>,
    pub server_address: Option<String>,
    pub server_build: Option<String>,
    pub identity: Option<String>,
    pub grants: Vec<GrantEntry>,
    pub probe: Option<ProbeReport>,
    pub certificate: Option<CertificateReport>,
    /// When the published state's content last changed.
    pub state_updated_at: Option<Timestamp>,
    /// How fresh the published state is, from the leader Lease; `None` without a state.
    pub freshness: Option<Freshness>,
    /// What needs attention about the control plane, one sentence each.
    pub findings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    /// What people read: `ok` when the server answered, else the failure's reason (the
    /// published `reason` of a probe that answered is the healthy `Registered`).
    pub outcome: &'static str,
    pub reason: Option<Reason>,
    pub message: Option<String>,
    /// Since when the probe finds this outcome.
    pub since: Option<Timestamp>,
    pub since_seconds: Option<i64>,
    /// As of when the outcome is known to hold: the leader's last Lease renewal while the state
    /// is current (the leader republishes on any change), else the state's last change.
    pub time: Option<Timestamp>,
    pub age_seconds: Option<i64>,
    /// While the probe fails: when the server last answered.
    pub last_success_time: Option<Timestamp>,
}

/// The probe's outcome in one word, the same in every view: `ok`, a failure's reason, `not run`.
pub fn probe_outcome(reason: Option<Reason>) -> &'static str {
    match reason {
        Some(Reason::Registered) => "ok",
        Some(reason) => reason.as_str(),
        None => "not run",
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CertificateState {
    Valid,
    Expiring,
    Expired,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateReport {
    pub not_after: Timestamp,
    pub expires_in_seconds: i64,
    pub state: CertificateState,
    pub identities: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRow {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// `None` until the reconciler wrote a status.
    pub phase: Option<Phase>,
    pub reason: Option<Reason>,
    pub message: Option<String>,
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    pub generation_in_force: Option<i64>,
    /// The revision the reconciler wrote.
    pub declared_revision: Option<String>,
    /// The revision the server holds (`(removed)` when gone).
    pub server_revision: Option<String>,
    pub client_id: Option<String>,
    /// When the client secret in force was last set (delivered, rotated, or the team's value
    /// sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_set_time: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_set_age_seconds: Option<i64>,
    pub organization: Option<String>,
    pub issuer: String,
    /// When the Ready condition last changed status.
    pub condition_since: Option<Timestamp>,
    pub condition_age_seconds: Option<i64>,
    pub grant: GrantCheck,
    pub drift: Option<Drift>,
    /// The drift a new generation was last written over, and who made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_drift: Option<SupersededDrift>,
    /// The same, in a sentence, when it happened within the last day (the table shows it).
    #[serde(skip)]
    pub recently_superseded: Option<String>,
    /// The last restore request carried out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_restore: Option<RestoreRecord>,
    /// The other reconciler that manages the object on the server (`ManagedElsewhere`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub managed_elsewhere: Option<nauthera_shared::resources::ManagedElsewhere>,
    /// The ClientPolicy rule that holds it back (`PolicyViolation`, `WaitingForApproval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyHold>,
    pub deleting: bool,
    pub attention: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub total: usize,
    /// Counts by phase; `None` (not reconciled yet) is counted under `Unreconciled`.
    pub by_phase: BTreeMap<String, usize>,
    pub by_reason: BTreeMap<String, usize>,
    pub outside_grant: usize,
    pub drift: DriftSummary,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DriftVerdict {
    /// Nothing drifted.
    None,
    /// One resource changed on the server.
    OneChange,
    /// Several, each a change of its own (by the people the audit log names).
    SeparateChanges,
    /// At least one drift comes from a restore of the server: its history restarted, or the
    /// audit log gives the write the restore cause. The reconciler says so in the drift's cause;
    /// how close together the drifts are says nothing about it.
    ServerRestore,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftSummary {
    pub count: usize,
    pub verdict: DriftVerdict,
    /// The drifts whose cause is a restore of the server (`backup_restore`).
    pub by_restore: usize,
    /// Who made the other changes, as the audit log names them (at most five, then a count).
    pub actors: Vec<String>,
    pub more_actors: usize,
    pub first: Option<Timestamp>,
    pub last: Option<Timestamp>,
}

/// Builds the report.
pub fn build(
    facts: &ControlPlaneFacts,
    views: Vec<ResourceView>,
    organizations: &OrganizationDirectory,
    not_installed: Vec<Kind>,
    scope: String,
    now: Timestamp,
) -> StatusReport {
    let control_plane = control_plane_report(facts, now);
    let shards: Vec<ControlPlaneReport> = facts
        .shards
        .iter()
        .map(|shard| control_plane_report(shard, now))
        .collect();
    let drift = drift_summary(&views);
    // Each view is let go once its row is made, so the two are not held whole at once.
    let resources: Vec<ResourceRow> = views
        .into_iter()
        .map(|view| resource_row(&view, facts, organizations, now))
        .collect();
    let summary = summarize(&resources, drift);
    let attention = !control_plane.findings.is_empty()
        || shards.iter().any(|shard| !shard.findings.is_empty())
        || resources.iter().any(|row| row.attention)
        || !not_installed.is_empty();
    StatusReport {
        api_version: crate::output::REPORT_API_VERSION,
        kind: "StatusReport",
        generated_at: now,
        scope,
        control_plane,
        shards,
        resources,
        not_installed,
        policies: None,
        summary,
        attention,
    }
}

pub fn control_plane_report(facts: &ControlPlaneFacts, now: Timestamp) -> ControlPlaneReport {
    let mut findings = Vec::new();
    if let Some(problem) = &facts.state_problem {
        findings.push(problem.clone());
    }
    match (&facts.replicas, &facts.replicas_problem) {
        (Some(replicas), _) if replicas.ready == 0 => findings.push(format!(
            "no replica of the reconciler is ready (0/{})",
            replicas.desired
        )),
        (None, Some(problem)) => findings.push(problem.clone()),
        _ => {}
    }
    let state = facts.state.as_ref();
    let non_empty = |text: &str| (!text.is_empty()).then(|| text.to_owned());
    let freshness =
        state.map(|state| control_plane::freshness(state, &facts.namespace, &facts.lease, now));
    let probe = state.map(|state| {
        let as_of = freshness
            .as_ref()
            .and_then(Freshness::as_of)
            .or(state.changed_at);
        ProbeReport {
            outcome: probe_outcome(state.probe_reason),
            reason: state.probe_reason,
            message: non_empty(&state.probe_message),
            since: state.probe_since,
            since_seconds: state.probe_since.map(|since| seconds_between(since, now)),
            time: as_of,
            age_seconds: as_of.map(|time| seconds_between(time, now)),
            last_success_time: state.last_success_time,
        }
    });
    if let Some(state) = state {
        match state.probe_reason {
            Some(Reason::Registered) => {}
            Some(reason) => findings.push(format!(
                "the control-plane probe fails with {reason}{}; see `kubectl nauthera diagnose` \
                 and the {reason} runbook",
                non_empty(&state.probe_message)
                    .map(|message| format!(": {message}"))
                    .unwrap_or_default()
            )),
            None => findings.push("the control-plane probe has not run yet".to_owned()),
        }
        if let Some(finding) = freshness.as_ref().and_then(|f| f.finding(now)) {
            findings.push(finding);
        }
        for overlap in &state.overlaps {
            findings.push(format!(
                "{}: the shard that writes an object first keeps it (the other shows \
                 ManagedElsewhere); narrow the shards' --namespace, --namespace-selector or \
                 --kinds so that each resource has one shard",
                overlap.describe()
            ));
        }
    }
    let certificate = state.and_then(|state| {
        let not_after = state.certificate_not_after?;
        let expires_in_seconds = seconds_between(now, not_after);
        let certificate_state = if expires_in_seconds <= 0 {
            CertificateState::Expired
        } else if expires_in_seconds <= CERTIFICATE_WARNING_SECONDS {
            CertificateState::Expiring
        } else {
            CertificateState::Valid
        };
        Some(CertificateReport {
            not_after,
            expires_in_seconds,
            state: certificate_state,
            identities: state.certificate_identities.clone(),
        })
    });
    if let Some(certificate) = &certificate {
        match certificate.state {
            CertificateState::Valid => {}
            CertificateState::Expiring => findings.push(format!(
                "the client certificate expires in {} ({}): check that cert-manager renews it",
                crate::timefmt::short_duration(certificate.expires_in_seconds),
                certificate.not_after
            )),
            CertificateState::Expired => findings.push(format!(
                "the client certificate expired at {}: the server refuses the reconciler until it \
                 is renewed",
                certificate.not_after
            )),
        }
    }
    ControlPlaneReport {
        namespace: facts.namespace.clone(),
        cluster_name: state.and_then(|state| state.cluster_name.clone()),
        scope: state.and_then(|state| state.scope.clone()),
        overlaps: state
            .map(|state| state.overlaps.clone())
            .unwrap_or_default(),
        state_found: state.is_some(),
        reconciler: facts.replicas,
        leader: state.and_then(|state| non_empty(&state.leader)),
        reconciler_version: state.and_then(|state| non_empty(&state.reconciler_version)),
        server_address: state.and_then(|state| non_empty(&state.server_address)),
        server_build: state.and_then(|state| non_empty(&state.server_build)),
        identity: state.and_then(|state| non_empty(&state.identity)),
        grants: state.map(|state| state.grants.clone()).unwrap_or_default(),
        probe,
        certificate,
        state_updated_at: state.and_then(|state| state.changed_at),
        freshness,
        findings,
    }
}

pub fn resource_row(
    view: &ResourceView,
    facts: &ControlPlaneFacts,
    organizations: &OrganizationDirectory,
    now: Timestamp,
) -> ResourceRow {
    let organization = organizations.organization_of(view);
    let grant = grant_check::check(
        ReportedGrants::from_state(facts.state_for(
            view.kind,
            &view.namespace,
            view.status.as_ref().and_then(|s| s.manager.as_deref()),
        )),
        view.kind.operation(),
        organization.as_deref(),
        &view.namespace,
    );
    let status = view.status.as_ref();
    let (declared_revision, server_revision) = view.revisions();
    let condition_since = view
        .ready_condition()
        .map(|condition| condition.last_transition_time.0);
    let phase = view.phase();
    let attention = phase != Some(Phase::Registered) || grant.is_outside();
    let secret_set_time = status.and_then(|status| status.secret_set_time.as_ref().map(|t| t.0));
    ResourceRow {
        kind: view.kind,
        namespace: view.namespace.clone(),
        name: view.name.clone(),
        phase,
        reason: view.reason(),
        message: view.message().map(str::to_owned),
        generation: view.generation,
        observed_generation: status.and_then(|status| status.observed_generation),
        generation_in_force: status.and_then(|status| status.generation_in_force),
        declared_revision,
        server_revision,
        client_id: status.and_then(|status| status.client_id.clone()),
        secret_set_time,
        secret_set_age_seconds: secret_set_time.map(|at| seconds_between(at, now)),
        organization,
        issuer: view.issuer.clone(),
        condition_since,
        condition_age_seconds: condition_since.map(|since| seconds_between(since, now)),
        grant,
        drift: status.and_then(|status| status.drift.as_deref().cloned()),
        last_drift: status.and_then(|status| status.last_drift.as_deref().cloned()),
        recently_superseded: view
            .superseded_at()
            .filter(|at| seconds_between(*at, now) < SUPERSEDED_SHOWN_SECONDS)
            .and_then(|_| view.superseded_drift()),
        last_restore: status.and_then(|status| status.last_restore.as_deref().cloned()),
        managed_elsewhere: status.and_then(|status| status.managed_elsewhere.as_deref().cloned()),
        policy: status.and_then(|status| status.policy.as_deref().cloned()),
        deleting: view.deleting,
        attention,
    }
}

fn summarize(rows: &[ResourceRow], drift: DriftSummary) -> Summary {
    let mut by_phase = BTreeMap::new();
    let mut by_reason = BTreeMap::new();
    for row in rows {
        let phase = row.phase.map_or("Unreconciled", Phase::as_str);
        *by_phase.entry(phase.to_owned()).or_insert(0) += 1;
        let reason = row.reason.map_or("Unreconciled", Reason::as_str);
        *by_reason.entry(reason.to_owned()).or_insert(0) += 1;
    }
    Summary {
        total: rows.len(),
        by_phase,
        by_reason,
        outside_grant: rows.iter().filter(|row| row.grant.is_outside()).count(),
        drift,
    }
}

/// How many drifted, and why: a restore of the server only where the reconciler found one (the
/// drift's cause), else separate changes by the people who made them.
pub fn drift_summary(views: &[ResourceView]) -> DriftSummary {
    let drifted: Vec<&ResourceView> = views.iter().filter(|view| view.is_drifted()).collect();
    let mut times: Vec<Timestamp> = drifted
        .iter()
        .filter_map(|view| view.drift_time())
        .collect();
    times.sort();
    let by_restore = drifted
        .iter()
        .filter(|view| view.cause() == Some(Cause::BackupRestore))
        .count();
    let mut actors: Vec<String> = drifted
        .iter()
        .filter(|view| view.cause() != Some(Cause::BackupRestore))
        .filter_map(|view| view.status.as_ref()?.drift.as_ref()?.actor.clone())
        .collect();
    actors.sort();
    actors.dedup();
    let more_actors = actors.len().saturating_sub(ACTORS_SHOWN);
    actors.truncate(ACTORS_SHOWN);
    let verdict = match drifted.len() {
        0 => DriftVerdict::None,
        _ if by_restore > 0 => DriftVerdict::ServerRestore,
        1 => DriftVerdict::OneChange,
        _ => DriftVerdict::SeparateChanges,
    };
    DriftSummary {
        count: drifted.len(),
        verdict,
        by_restore,
        actors,
        more_actors,
        first: times.first().copied(),
        last: times.last().copied(),
    }
}

impl DriftSummary {
    /// The people named, for a sentence: "alice, bob and 2 more".
    pub fn describe_actors(&self) -> Option<String> {
        if self.actors.is_empty() {
            return None;
        }
        let mut text = self.actors.join(", ");
        if self.more_actors > 0 {
            text.push_str(&format!(" and {} more", self.more_actors));
        }
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::fixtures::{at, drifted, view};

    #[test]
    fn only_a_restore_cause_makes_drifts_a_restore_however_close_together() {
        assert_eq!(drift_summary(&[]).verdict, DriftVerdict::None);
        let one = [drifted("a", "x", 1000)];
        assert_eq!(drift_summary(&one).verdict, DriftVerdict::OneChange);
        // Three edits by different people within a minute: separate changes, named.
        let mut close = [
            drifted("a", "x", 1000),
            drifted("b", "y", 1020),
            drifted("c", "z", 1040),
        ];
        for (view, actor) in close.iter_mut().zip(["alice", "bob", "carol"]) {
            if let Some(drift) = view.status.as_mut().and_then(|s| s.drift.as_mut()) {
                drift.actor = Some(actor.into());
            }
        }
        let summary = drift_summary(&close);
        assert_eq!(summary.verdict, DriftVerdict::SeparateChanges);
        assert_eq!(summary.by_restore, 0);
        assert_eq!(
            summary.describe_actors().as_deref(),
            Some("alice, bob, carol")
        );
        assert_eq!(summary.first, Some(at(1000)));
        assert_eq!(summary.last, Some(at(1040)));
        // One drift the reconciler attributes to a restore of the server makes it a restore.
        let mut restored = drifted("d", "w", 90_000);
        restored.status.as_mut().unwrap().cause = Some(Cause::BackupRestore);
        let mut all = close.to_vec();
        all.push(restored);
        let summary = drift_summary(&all);
        assert_eq!(summary.verdict, DriftVerdict::ServerRestore);
        assert_eq!(summary.by_restore, 1);
    }

    #[test]
    fn a_resource_without_status_needs_attention() {
        let mut pending = view(Kind::OidcClient, "a", "x", Reason::Registered, 0);
        pending.status = None;
        let row = resource_row(
            &pending,
            &ControlPlaneFacts::default(),
            &OrganizationDirectory::default(),
            at(100),
        );
        assert!(row.attention);
        assert_eq!(row.phase, None);
    }
}
