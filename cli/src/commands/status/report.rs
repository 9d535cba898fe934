//! The status report: a pure function of the control-plane facts, the resources and the time.

use std::collections::BTreeMap;

use jiff::Timestamp;
use nauthera_shared::catalog::{Phase, Reason};
use serde::Serialize;

use super::policies::PoliciesReport;
use super::rows::{ResourceRow, resource_row};
use crate::cli::kinds::Kind;
use crate::cluster::control_plane::ControlPlaneFacts;
use crate::cluster::control_plane::report::{ControlPlaneReport, control_plane_report};
use crate::model::drift::{DriftSummary, drift_summary};
use crate::model::view::{OrganizationDirectory, ResourceView};

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
    /// The resources the reconciler manages (`managementPolicy: Manage`), those waiting for
    /// adoption among them.
    pub resources: Vec<ResourceRow>,
    /// The resources under `managementPolicy: Observe`: the reconciler reads their objects and
    /// writes nothing. The same rows as `resources`, each with `serverObject`.
    pub observed: Vec<ResourceRow>,
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
pub struct Summary {
    pub total: usize,
    /// Counts by phase; `None` (not reconciled yet) is counted under `Unreconciled`.
    pub by_phase: BTreeMap<String, usize>,
    pub by_reason: BTreeMap<String, usize>,
    pub outside_grant: usize,
    pub drift: DriftSummary,
    /// Resources under `managementPolicy: Observe`.
    pub observed: usize,
    /// Resources whose object waits for a person to adopt it (`AdoptionRequired`).
    pub awaiting_adoption: usize,
}

/// Builds the report from views already read.
#[cfg(test)]
pub fn build(
    facts: &ControlPlaneFacts,
    views: Vec<ResourceView>,
    organizations: &OrganizationDirectory,
    not_installed: Vec<Kind>,
    scope: String,
    now: Timestamp,
) -> StatusReport {
    let mut rows = Rows::new(facts, organizations, now);
    // Each view is let go once its row is made, so the two are not held whole at once.
    views.into_iter().for_each(|view| rows.add(view));
    rows.report(not_installed, scope)
}

/// The report's rows, made one resource at a time as the listing is read: a view is let go
/// once its row is made (only a drifted one is kept, for the drift summary), so a listing of a
/// hundred thousand resources is never held whole beside its rows.
pub struct Rows<'a> {
    facts: &'a ControlPlaneFacts,
    organizations: &'a OrganizationDirectory,
    now: Timestamp,
    resources: Vec<ResourceRow>,
    observed: Vec<ResourceRow>,
    drifted: Vec<ResourceView>,
}

impl<'a> Rows<'a> {
    pub fn new(
        facts: &'a ControlPlaneFacts,
        organizations: &'a OrganizationDirectory,
        now: Timestamp,
    ) -> Rows<'a> {
        Rows {
            facts,
            organizations,
            now,
            resources: Vec::new(),
            observed: Vec::new(),
            drifted: Vec::new(),
        }
    }

    pub fn add(&mut self, view: ResourceView) {
        let row = resource_row(&view, self.facts, self.organizations, self.now);
        if row.observes() {
            self.observed.push(row);
        } else {
            self.resources.push(row);
        }
        if view.is_drifted() {
            self.drifted.push(view);
        }
    }

    /// Puts the rows in the listing's stable order: kind, namespace, name.
    pub fn sort(&mut self) {
        for rows in [&mut self.resources, &mut self.observed] {
            rows.sort_by(|a, b| {
                (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name))
            });
        }
    }

    pub fn report(self, not_installed: Vec<Kind>, scope: String) -> StatusReport {
        let Rows {
            facts,
            now,
            resources,
            observed,
            drifted,
            ..
        } = self;
        let control_plane = control_plane_report(facts, now);
        let shards: Vec<ControlPlaneReport> = facts
            .shards
            .iter()
            .map(|shard| control_plane_report(shard, now))
            .collect();
        let summary = summarize(&resources, &observed, drift_summary(&drifted));
        let attention = !control_plane.findings.is_empty()
            || shards.iter().any(|shard| !shard.findings.is_empty())
            || resources.iter().chain(&observed).any(|row| row.attention)
            || !not_installed.is_empty();
        StatusReport {
            api_version: crate::output::REPORT_API_VERSION,
            kind: "StatusReport",
            generated_at: now,
            scope,
            control_plane,
            shards,
            resources,
            observed,
            not_installed,
            policies: None,
            summary,
            attention,
        }
    }
}

fn summarize(rows: &[ResourceRow], observed: &[ResourceRow], drift: DriftSummary) -> Summary {
    let mut by_phase = BTreeMap::new();
    let mut by_reason = BTreeMap::new();
    for row in rows.iter().chain(observed) {
        let phase = row.phase.map_or("Unreconciled", Phase::as_str);
        *by_phase.entry(phase.to_owned()).or_insert(0) += 1;
        let reason = row.reason.map_or("Unreconciled", Reason::as_str);
        *by_reason.entry(reason.to_owned()).or_insert(0) += 1;
    }
    Summary {
        total: rows.len() + observed.len(),
        by_phase,
        by_reason,
        outside_grant: rows
            .iter()
            .chain(observed)
            .filter(|row| row.grant.is_outside())
            .count(),
        drift,
        observed: observed.len(),
        awaiting_adoption: rows.iter().filter(|row| row.awaits_adoption()).count(),
    }
}
