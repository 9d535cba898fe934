//! The status report's rows: one resource each, as `status` lists it and `status -w` prints each
//! change.

use jiff::Timestamp;
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::resources::{
    AdoptionRecord, Drift, ManagementPolicy, PolicyHold, RestoreRecord, ServerObject,
    SupersededDrift,
};
use serde::Serialize;

use crate::cli::kinds::Kind;
use crate::cluster::control_plane::ControlPlaneFacts;
use crate::model::grant_check::{self, GrantCheck, ReportedGrants};
use crate::model::view::{OrganizationDirectory, ResourceView};
use crate::output::timefmt::seconds_between;

/// How long the table keeps showing a drift that a new generation was written over.
const SUPERSEDED_SHOWN_SECONDS: i64 = 86_400;

/// A row per resource is held for the whole listing (a hundred thousand at a time), so what
/// few rows carry sits behind a `Box`: a row is a third of the size it would be inline.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRow {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// `spec.managementPolicy`: `Manage`, or `Observe` (the row is then under `observed`).
    pub management_policy: ManagementPolicy,
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
    /// When `spec.secret.rotation` rotates the generated secret next (`status.nextRotation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_rotation: Option<Timestamp>,
    /// Seconds until then; zero or less when due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_rotation_in_seconds: Option<i64>,
    pub organization: Option<String>,
    pub issuer: String,
    /// When the Ready condition last changed status.
    pub condition_since: Option<Timestamp>,
    pub condition_age_seconds: Option<i64>,
    pub grant: GrantCheck,
    pub drift: Option<Box<Drift>>,
    /// The drift a new generation was last written over, and who made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_drift: Option<Box<SupersededDrift>>,
    /// The same, in a sentence, when it happened within the last day (the table shows it).
    #[serde(skip)]
    pub recently_superseded: Option<String>,
    /// The last restore request carried out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_restore: Option<Box<RestoreRecord>>,
    /// The other reconciler that manages the object on the server (`ManagedElsewhere`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub managed_elsewhere: Option<Box<nauthera_shared::resources::ManagedElsewhere>>,
    /// The ClientPolicy rule that holds it back (`PolicyViolation`, `WaitingForApproval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Box<PolicyHold>>,
    /// What the server holds of an object observed, or waiting for a person to adopt it
    /// (`status.observed`): revision, writer, when, the fields that differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_object: Option<Box<ServerObject>>,
    /// The last adoption carried out (`status.lastAdoption`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_adoption: Option<Box<AdoptionRecord>>,
    pub deleting: bool,
    pub attention: bool,
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
    // An observed object is as it should be while the reconciler can read it.
    let settled = phase == Some(Phase::Registered)
        || (view.observes() && view.reason() == Some(Reason::Observed));
    let attention = !settled || grant.is_outside();
    let secret_set_time = status.and_then(|status| status.secret_set_time.as_ref().map(|t| t.0));
    let next_rotation = status.and_then(|status| status.next_rotation.as_ref().map(|t| t.0));
    ResourceRow {
        kind: view.kind,
        namespace: view.namespace.clone(),
        name: view.name.clone(),
        management_policy: view.policy,
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
        next_rotation,
        next_rotation_in_seconds: next_rotation.map(|at| seconds_between(now, at)),
        organization,
        issuer: view.issuer.clone(),
        condition_since,
        condition_age_seconds: condition_since.map(|since| seconds_between(since, now)),
        grant,
        drift: status.and_then(|status| status.drift.clone()),
        last_drift: status.and_then(|status| status.last_drift.clone()),
        recently_superseded: view
            .superseded_at()
            .filter(|at| seconds_between(*at, now) < SUPERSEDED_SHOWN_SECONDS)
            .and_then(|_| view.superseded_drift()),
        last_restore: status.and_then(|status| status.last_restore.clone()),
        managed_elsewhere: status.and_then(|status| status.managed_elsewhere.clone()),
        policy: status.and_then(|status| status.policy.clone()),
        server_object: view.server_object().cloned().map(Box::new),
        last_adoption: status.and_then(|status| status.last_adoption.clone()),
        deleting: view.deleting,
        attention,
    }
}

impl ResourceRow {
    /// Whether the manifest says `managementPolicy: Observe`.
    pub fn observes(&self) -> bool {
        self.management_policy.observes()
    }

    /// Whether the row waits for a person to adopt the object the server holds.
    pub fn awaits_adoption(&self) -> bool {
        self.reason == Some(Reason::AdoptionRequired)
    }

    /// How the manifest compares with the server, in a few words: `identical`, `2 fields
    /// differ`, `not on the server`; `-` before the first read.
    pub fn comparison(&self) -> String {
        match &self.server_object {
            None => "-".to_owned(),
            Some(object) if object.absent => "not on the server".to_owned(),
            Some(object) => match object.differences.len() {
                0 => "identical".to_owned(),
                1 => "1 field differs".to_owned(),
                n => format!("{n} fields differ"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::view::fixtures::{at, view};

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
