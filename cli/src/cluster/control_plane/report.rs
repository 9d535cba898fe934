//! The control plane in a report: who publishes, what the probe and the certificate say, how
//! fresh it all is, and what needs attention, one sentence each. `status` shows it for every
//! shard; `diagnose` reads the probe and the certificate from it.

use jiff::Timestamp;
use nauthera_shared::catalog::Reason;
use nauthera_shared::control_plane::{ControlPlaneState, ShardOverlap};
use nauthera_shared::grants::GrantEntry;
use nauthera_shared::topology::Scope;
use serde::Serialize;

use super::{ControlPlaneFacts, Freshness, Replicas};
use crate::output::timefmt::{seconds_between, short_duration};

/// A client certificate that expires sooner than this is called out.
pub const CERTIFICATE_WARNING_SECONDS: i64 = 14 * 86_400;

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

pub fn control_plane_report(facts: &ControlPlaneFacts, now: Timestamp) -> ControlPlaneReport {
    let state = facts.state.as_ref();
    let freshness = state.map(|state| super::freshness(state, &facts.namespace, &facts.lease, now));
    let probe = state.map(|state| probe_report(state, freshness.as_ref(), now));
    let certificate = state.and_then(|state| certificate_report(state, now));
    let findings = findings(facts, freshness.as_ref(), certificate.as_ref(), now);
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

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

/// The probe's outcome, as of when it is known to hold.
fn probe_report(
    state: &ControlPlaneState,
    freshness: Option<&Freshness>,
    now: Timestamp,
) -> ProbeReport {
    let as_of = freshness.and_then(Freshness::as_of).or(state.changed_at);
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
}

/// The client certificate, when the reconciler could read it.
fn certificate_report(state: &ControlPlaneState, now: Timestamp) -> Option<CertificateReport> {
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
}

/// What needs attention about the control plane, one sentence each: the state, the replicas,
/// the probe, the freshness, the shards' overlaps, the certificate.
fn findings(
    facts: &ControlPlaneFacts,
    freshness: Option<&Freshness>,
    certificate: Option<&CertificateReport>,
    now: Timestamp,
) -> Vec<String> {
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
    if let Some(state) = &facts.state {
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
        if let Some(finding) = freshness.and_then(|f| f.finding(now)) {
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
    if let Some(certificate) = certificate {
        match certificate.state {
            CertificateState::Valid => {}
            CertificateState::Expiring => findings.push(format!(
                "the client certificate expires in {} ({}): check that cert-manager renews it",
                short_duration(certificate.expires_in_seconds),
                certificate.not_after
            )),
            CertificateState::Expired => findings.push(format!(
                "the client certificate expired at {}: the server refuses the reconciler until it \
                 is renewed",
                certificate.not_after
            )),
        }
    }
    findings
}
