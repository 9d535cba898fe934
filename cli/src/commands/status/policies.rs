//! The status report's ClientPolicies section: per policy, the resources it holds back, from
//! the resources' own statuses (`status.policy`), cross-checked with the counts each policy's
//! status keeps.

use std::collections::BTreeMap;

use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::{ClientPolicy, ClientPolicyStatus};
use serde::Serialize;

use super::rows::ResourceRow;
use crate::cli::kinds::Kind;
use crate::model::policies::PolicyListing;

/// The section `status -o json` prints as `policies`; `null` when there is nothing to say.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoliciesReport {
    /// Whether the ClientPolicies could be listed.
    pub listed: bool,
    /// Why they could not, when not.
    pub note: Option<String>,
    /// Policies that hold something back first, then the others, each in name order.
    pub items: Vec<PolicyHolds>,
}

/// One ClientPolicy and what it holds back.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyHolds {
    /// The policy, as the resources' statuses name it (empty when a status names none).
    pub name: String,
    /// Whether the ClientPolicy exists; `null` when the policies could not be listed.
    pub found: Option<bool>,
    /// Its `Ready` condition: compiled and its admission policy in place.
    pub ready: Option<bool>,
    pub ready_message: Option<String>,
    /// The counts its status keeps, cluster-wide.
    pub violations: Option<u32>,
    pub awaiting_approval: Option<u32>,
    /// With every namespace in scope: whether those counts agree with the resources' statuses.
    pub counts_agree: Option<bool>,
    /// The resources in scope it holds back, by their own statuses.
    pub held: Vec<Held>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub reason: Reason,
    pub rule: String,
    pub field: Option<String>,
}

impl PolicyHolds {
    fn count(&self, reason: Reason) -> usize {
        self.held
            .iter()
            .filter(|held| held.reason == reason)
            .count()
    }

    pub fn held_violations(&self) -> usize {
        self.count(Reason::PolicyViolation)
    }

    pub fn held_awaiting(&self) -> usize {
        self.count(Reason::WaitingForApproval)
    }
}

/// The rows a policy holds back, by the policy their statuses name (empty when they name none).
fn held_by_policy(rows: &[ResourceRow]) -> BTreeMap<String, Vec<Held>> {
    let mut by_policy: BTreeMap<String, Vec<Held>> = BTreeMap::new();
    for row in rows {
        let Some(reason) = row
            .reason
            .filter(|r| matches!(r, Reason::PolicyViolation | Reason::WaitingForApproval))
        else {
            continue;
        };
        let (policy, rule, field) = match &row.policy {
            Some(hold) => (hold.policy.clone(), hold.rule.clone(), hold.field.clone()),
            None => (String::new(), String::new(), None),
        };
        by_policy.entry(policy).or_default().push(Held {
            kind: row.kind,
            namespace: row.namespace.clone(),
            name: row.name.clone(),
            reason,
            rule,
            field,
        });
    }
    by_policy
}

/// What the policies hold back among `rows`; `None` when no policy exists and nothing is held.
pub fn section(
    listing: &PolicyListing,
    rows: &[ResourceRow],
    every_namespace: bool,
) -> Option<PoliciesReport> {
    let mut by_policy = held_by_policy(rows);
    let (listed, note, policies): (bool, Option<String>, &[ClientPolicy]) = match listing {
        PolicyListing::Listed(policies) => (true, None, policies),
        PolicyListing::NotInstalled if by_policy.is_empty() => return None,
        PolicyListing::NotInstalled => (
            false,
            Some("the ClientPolicy CRD is not installed".to_owned()),
            &[],
        ),
        PolicyListing::Forbidden(why) | PolicyListing::Failed(why) => (
            false,
            Some(format!("{why}; the policies themselves are not shown")),
            &[],
        ),
    };
    if listed && policies.is_empty() && by_policy.is_empty() {
        return None;
    }
    let mut items: Vec<PolicyHolds> = policies
        .iter()
        .map(|policy| {
            let name = kube::ResourceExt::name_any(policy);
            let status = policy.status.as_ref();
            let ready = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
            PolicyHolds {
                held: by_policy.remove(&name).unwrap_or_default(),
                name,
                found: Some(true),
                ready: ready.map(|c| c.status == "True"),
                ready_message: ready
                    .filter(|c| c.status != "True" && !c.message.is_empty())
                    .map(|c| c.message.clone()),
                // Every reconciler's counts: the unsharded one's and each shard's entry.
                violations: status.map(ClientPolicyStatus::total_violations),
                awaiting_approval: status.map(ClientPolicyStatus::total_awaiting_approval),
                counts_agree: None,
            }
        })
        .collect();
    // Policies the statuses name that are not (or could not be) listed.
    items.extend(by_policy.into_iter().map(|(name, held)| PolicyHolds {
        name,
        found: listed.then_some(false),
        ready: None,
        ready_message: None,
        violations: None,
        awaiting_approval: None,
        counts_agree: None,
        held,
    }));
    for item in &mut items {
        if every_namespace
            && let (Some(violations), Some(awaiting)) = (item.violations, item.awaiting_approval)
        {
            item.counts_agree = Some(
                violations as usize == item.held_violations()
                    && awaiting as usize == item.held_awaiting(),
            );
        }
        item.held
            .sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
    }
    items.sort_by(|a, b| (a.held.is_empty(), &a.name).cmp(&(b.held.is_empty(), &b.name)));
    Some(PoliciesReport {
        listed,
        note,
        items,
    })
}
