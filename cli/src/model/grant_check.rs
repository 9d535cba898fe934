//! Grant checks: whether the grant the server reported for the reconciler's identity covers a
//! resource's operation, organization and namespace, before the server refuses it, and which
//! `allowedClients` entry would.

use nauthera_shared::control_plane::ControlPlaneState;
use nauthera_shared::grants::{self, GrantDecision, GrantEntry, Operation};
use nauthera_shared::topology::NamespaceMapping;
use serde::Serialize;

/// The identity and grants as the server reported them.
#[derive(Clone, Copy, Debug)]
pub struct ReportedGrants<'a> {
    pub identity: &'a str,
    pub entries: &'a [GrantEntry],
    /// How the reconciler's cluster names its namespaces on the server: grants list those.
    pub mapping: &'a NamespaceMapping,
}

impl<'a> ReportedGrants<'a> {
    /// The grants in the published state, or why there are none to check against.
    pub fn from_state(state: Option<&'a ControlPlaneState>) -> Result<Self, String> {
        let state = state.ok_or_else(|| {
            "the reconciler's state is not published, so its grant is unknown".to_owned()
        })?;
        if state.identity.is_empty() {
            return Err("the server has not reported the reconciler's identity yet".to_owned());
        }
        if state.grants.is_empty() && !state.is_up() && state.last_success_time.is_none() {
            return Err("the server has never answered the reconciler's probe".to_owned());
        }
        Ok(ReportedGrants {
            identity: &state.identity,
            entries: &state.grants,
            mapping: &state.namespace_mapping,
        })
    }
}

/// The outcome of one grant check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum GrantCheck {
    /// The grant covers the resource.
    Covered,
    /// The server will refuse it.
    #[serde(rename_all = "camelCase")]
    Outside {
        /// The server's stable reason (`OUTSIDE_GRANT`, `OPERATION_NOT_GRANTED`,
        /// `IDENTITY_NOT_ALLOWED`).
        reason: String,
        /// What is missing, in words.
        cause: String,
        /// The `allowedClients` entry that would cover it.
        proposed_entry: GrantEntry,
    },
    /// Cannot tell.
    Unknown { why: String },
}

impl GrantCheck {
    pub fn is_outside(&self) -> bool {
        matches!(self, GrantCheck::Outside { .. })
    }

    /// The short word for a table cell.
    pub fn label(&self) -> &'static str {
        match self {
            GrantCheck::Covered => "ok",
            GrantCheck::Outside { .. } => "outside",
            GrantCheck::Unknown { .. } => "unknown",
        }
    }
}

/// Checks one call: `operation` on `organization` (if known) in `namespace`.
pub fn check(
    grants: Result<ReportedGrants<'_>, String>,
    operation: Operation,
    organization: Option<&str>,
    namespace: &str,
) -> GrantCheck {
    let grants = match grants {
        Ok(grants) => grants,
        Err(why) => return GrantCheck::Unknown { why },
    };
    let Some(organization) = organization else {
        return GrantCheck::Unknown {
            why: "no Organization resource declares this issuer and the status names no \
                  organization, so the organization is unknown"
                .to_owned(),
        };
    };
    let namespace = grants.mapping.to_server(namespace);
    let namespace = namespace.as_str();
    let decision = grants::decide(
        grants.entries,
        grants.identity,
        operation,
        organization,
        Some(namespace),
    );
    match decision {
        GrantDecision::Covered => GrantCheck::Covered,
        refused => GrantCheck::Outside {
            reason: refused
                .reason()
                .map(|reason| reason.as_str().to_owned())
                .unwrap_or_default(),
            cause: refused.cause(),
            proposed_entry: grants::propose_entry(
                grants.entries,
                grants.identity,
                operation,
                organization,
                Some(namespace),
            ),
        },
    }
}

/// An `allowedClients` entry as it is written in the server's configuration.
pub fn entry_yaml(entry: &GrantEntry) -> String {
    let list = |items: &[String]| {
        items
            .iter()
            .map(|item| format!("\"{item}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let operations: Vec<String> = entry
        .operations
        .iter()
        .map(|operation| operation.as_str().to_owned())
        .collect();
    format!(
        "- identity: \"{}\"\n  operations: [{}]\n  organizations: [{}]\n  namespaces: [{}]\n",
        entry.identity,
        list(&operations),
        list(&entry.organizations),
        list(&entry.namespaces)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDENTITY: &str = "dns:nauthera-operator.nauthera.svc";

    fn state(grants: Vec<GrantEntry>) -> ControlPlaneState {
        ControlPlaneState {
            identity: IDENTITY.into(),
            grants,
            last_success_time: Some(jiff::Timestamp::UNIX_EPOCH),
            ..ControlPlaneState::default()
        }
    }

    fn entry(organizations: &[&str], namespaces: &[&str]) -> GrantEntry {
        GrantEntry {
            identity: IDENTITY.into(),
            operations: vec![Operation::Clients],
            organizations: organizations.iter().map(|s| s.to_string()).collect(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_covered_resource_is_ok() {
        let state = state(vec![entry(&["acme"], &["team-a"])]);
        let grants = ReportedGrants::from_state(Some(&state));
        assert_eq!(
            check(grants, Operation::Clients, Some("acme"), "team-a"),
            GrantCheck::Covered
        );
    }

    #[test]
    fn a_mapped_cluster_is_checked_and_proposed_in_server_namespaces() {
        let mut state = state(vec![entry(&["acme"], &["prod-eu/team-a"])]);
        state.namespace_mapping = NamespaceMapping::for_cluster(Some("prod-eu"), None);
        let grants = || ReportedGrants::from_state(Some(&state));
        assert_eq!(
            check(grants(), Operation::Clients, Some("acme"), "team-a"),
            GrantCheck::Covered
        );
        let GrantCheck::Outside { proposed_entry, .. } =
            check(grants(), Operation::Clients, Some("acme"), "team-b")
        else {
            panic!("team-b is outside");
        };
        assert_eq!(
            proposed_entry,
            entry(&["acme"], &["prod-eu/team-a", "prod-eu/team-b"])
        );
        // A grant naming the bare namespace covers another cluster's, not this one's.
        let mut bare = state.clone();
        bare.grants = vec![entry(&["acme"], &["team-a"])];
        assert!(
            check(
                ReportedGrants::from_state(Some(&bare)),
                Operation::Clients,
                Some("acme"),
                "team-a"
            )
            .is_outside()
        );
    }

    #[test]
    fn an_outside_namespace_names_the_entry_that_would_cover_it() {
        let state = state(vec![entry(&["acme"], &["team-a"])]);
        let grants = ReportedGrants::from_state(Some(&state));
        let outcome = check(grants, Operation::Clients, Some("acme"), "team-b");
        let GrantCheck::Outside {
            reason,
            cause,
            proposed_entry,
        } = outcome
        else {
            panic!("expected outside, got {outcome:?}");
        };
        assert_eq!(reason, "OUTSIDE_GRANT");
        assert!(cause.contains("team-b"));
        assert_eq!(proposed_entry, entry(&["acme"], &["team-a", "team-b"]));
        assert_eq!(
            entry_yaml(&proposed_entry),
            "- identity: \"dns:nauthera-operator.nauthera.svc\"\n  operations: [\"clients\"]\n  organizations: [\"acme\"]\n  namespaces: [\"team-a\", \"team-b\"]\n"
        );
    }

    #[test]
    fn a_missing_operation_is_named() {
        let state = state(vec![entry(&["*"], &["*"])]);
        let outcome = check(
            ReportedGrants::from_state(Some(&state)),
            Operation::Brandings,
            Some("acme"),
            "team-a",
        );
        assert!(
            matches!(outcome, GrantCheck::Outside { ref reason, .. } if reason == "OPERATION_NOT_GRANTED")
        );
    }

    #[test]
    fn without_state_or_organization_the_check_is_unknown() {
        assert!(matches!(
            check(
                ReportedGrants::from_state(None),
                Operation::Clients,
                Some("acme"),
                "a"
            ),
            GrantCheck::Unknown { .. }
        ));
        let state = state(vec![entry(&["*"], &["*"])]);
        assert!(matches!(
            check(
                ReportedGrants::from_state(Some(&state)),
                Operation::Clients,
                None,
                "a"
            ),
            GrantCheck::Unknown { .. }
        ));
        let never_answered = ControlPlaneState {
            identity: IDENTITY.into(),
            ..ControlPlaneState::default()
        };
        assert!(ReportedGrants::from_state(Some(&never_answered)).is_err());
        // A server that answers and grants nothing: the state carries no last success while up.
        let answering = ControlPlaneState {
            probe_reason: Some(nauthera_shared::catalog::Reason::Registered),
            ..never_answered
        };
        let grants = ReportedGrants::from_state(Some(&answering)).unwrap();
        assert!(grants.entries.is_empty());
    }
}
