//! The grant model of `server.grpc.tls.allowed_clients`: which certificate identity may perform
//! which operations, for which organizations and Kubernetes namespaces.
//!
//! nauthera-server decides with these rules; the fake server enforces them, and the kubectl plugin
//! uses them to say which resources fall outside the reconciler's grant and which entry would fix
//! it. Everything here is pure.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::catalog::ServerReason;

/// Matches every organization or every namespace in a grant.
pub const WILDCARD: &str = "*";

/// An operation a grant can allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Clients,
    Brandings,
    IdentityProviders,
    Organizations,
}

impl Operation {
    /// Every operation, in the order the server documents them.
    pub const ALL: [Operation; 4] = [
        Operation::Clients,
        Operation::Brandings,
        Operation::IdentityProviders,
        Operation::Organizations,
    ];

    /// The name used in `allowed_clients` and in error metadata (`clients`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Clients => "clients",
            Operation::Brandings => "brandings",
            Operation::IdentityProviders => "identity_providers",
            Operation::Organizations => "organizations",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation name that is not one of `clients`, `brandings`, `identity_providers`,
/// `organizations`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown operation {0:?}; use one of clients, brandings, identity_providers, organizations"
)]
pub struct UnknownOperation(pub String);

impl FromStr for Operation {
    type Err = UnknownOperation;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|operation| operation.as_str() == name)
            .ok_or_else(|| UnknownOperation(name.to_owned()))
    }
}

/// One `allowed_clients` entry: an identity (a certificate SAN such as
/// `dns:nauthera-operator.nauthera.svc`) and what it may do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantEntry {
    pub identity: String,
    #[serde(default)]
    pub operations: Vec<Operation>,
    /// Organization slugs; `*` for all.
    #[serde(default)]
    pub organizations: Vec<String>,
    /// Kubernetes namespaces; `*` for all.
    #[serde(default)]
    pub namespaces: Vec<String>,
}

/// What a grant says about one operation on one organization and namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantDecision {
    /// The grant covers the call.
    Covered,
    /// No entry lists the identity.
    IdentityNotAllowed { identity: String },
    /// The identity's entries do not grant the operation.
    OperationNotGranted { operation: Operation },
    /// The operation is granted, but not for this organization and/or namespace (each `Some` is a
    /// part that is outside).
    OutsideGrant {
        organization: Option<String>,
        namespace: Option<String>,
    },
}

impl GrantDecision {
    /// Whether the call is allowed.
    pub fn is_covered(&self) -> bool {
        matches!(self, GrantDecision::Covered)
    }

    /// The server's stable reason for a refusal; `None` when covered.
    pub fn reason(&self) -> Option<ServerReason> {
        match self {
            GrantDecision::Covered => None,
            GrantDecision::IdentityNotAllowed { .. } => Some(ServerReason::IdentityNotAllowed),
            GrantDecision::OperationNotGranted { .. } => Some(ServerReason::OperationNotGranted),
            GrantDecision::OutsideGrant { .. } => Some(ServerReason::OutsideGrant),
        }
    }

    /// A short sentence for people, naming what is missing.
    pub fn cause(&self) -> String {
        match self {
            GrantDecision::Covered => "covered by the grant".to_owned(),
            GrantDecision::IdentityNotAllowed { identity } => {
                format!("identity {identity} is not listed in allowed_clients")
            }
            GrantDecision::OperationNotGranted { operation } => {
                format!("operation {operation} is not granted")
            }
            GrantDecision::OutsideGrant {
                organization,
                namespace,
            } => match (organization, namespace) {
                (Some(org), Some(ns)) => {
                    format!("organization {org} and namespace {ns} are outside the grant")
                }
                (Some(org), None) => format!("organization {org} is outside the grant"),
                (None, Some(ns)) => format!("namespace {ns} is outside the grant"),
                (None, None) => "outside the grant".to_owned(),
            },
        }
    }
}

fn list_covers(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == WILDCARD || item == value)
}

impl GrantEntry {
    /// Whether this entry covers `operation` on `organization` and `namespace`. A `namespace` of
    /// `None` is not checked (calls that name no namespace, such as reading an organization).
    pub fn covers(
        &self,
        operation: Operation,
        organization: &str,
        namespace: Option<&str>,
    ) -> GrantDecision {
        if !self.operations.contains(&operation) {
            return GrantDecision::OperationNotGranted { operation };
        }
        let organization_outside =
            (!list_covers(&self.organizations, organization)).then(|| organization.to_owned());
        let namespace_outside = namespace
            .filter(|namespace| !list_covers(&self.namespaces, namespace))
            .map(str::to_owned);
        if organization_outside.is_none() && namespace_outside.is_none() {
            GrantDecision::Covered
        } else {
            GrantDecision::OutsideGrant {
                organization: organization_outside,
                namespace: namespace_outside,
            }
        }
    }
}

/// The entries that list `identity`.
pub fn entries_for<'a>(entries: &'a [GrantEntry], identity: &str) -> Vec<&'a GrantEntry> {
    entries
        .iter()
        .filter(|entry| entry.identity == identity)
        .collect()
}

/// Decides a call the way the server does: covered when any entry of `identity` covers it;
/// otherwise the refusal closest to being covered (an entry that grants the operation, with the
/// fewest parts outside it).
pub fn decide(
    entries: &[GrantEntry],
    identity: &str,
    operation: Operation,
    organization: &str,
    namespace: Option<&str>,
) -> GrantDecision {
    let own = entries_for(entries, identity);
    if own.is_empty() {
        return GrantDecision::IdentityNotAllowed {
            identity: identity.to_owned(),
        };
    }
    own.iter()
        .map(|entry| entry.covers(operation, organization, namespace))
        .min_by_key(decision_distance)
        .unwrap_or(GrantDecision::OperationNotGranted { operation })
}

fn decision_distance(decision: &GrantDecision) -> u8 {
    match decision {
        GrantDecision::Covered => 0,
        GrantDecision::OutsideGrant {
            organization,
            namespace,
        } => 1 + u8::from(organization.is_some()) + u8::from(namespace.is_some()),
        GrantDecision::OperationNotGranted { .. } => 4,
        GrantDecision::IdentityNotAllowed { .. } => 5,
    }
}

/// The `allowed_clients` entry that would cover `operation` on `organization` and `namespace` for
/// `identity`: the identity's closest entry extended with what is missing, or a new entry when the
/// identity has none. When already covered, the covering entry is returned unchanged.
pub fn propose_entry(
    entries: &[GrantEntry],
    identity: &str,
    operation: Operation,
    organization: &str,
    namespace: Option<&str>,
) -> GrantEntry {
    let closest = entries_for(entries, identity)
        .into_iter()
        .min_by_key(|entry| decision_distance(&entry.covers(operation, organization, namespace)));
    let mut entry = closest.cloned().unwrap_or_else(|| GrantEntry {
        identity: identity.to_owned(),
        operations: Vec::new(),
        organizations: Vec::new(),
        namespaces: Vec::new(),
    });
    if !entry.operations.contains(&operation) {
        entry.operations.push(operation);
    }
    if !list_covers(&entry.organizations, organization) {
        entry.organizations.push(organization.to_owned());
    }
    if let Some(namespace) = namespace
        && !list_covers(&entry.namespaces, namespace)
    {
        entry.namespaces.push(namespace.to_owned());
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPERATOR: &str = "dns:nauthera-operator.nauthera.svc";

    fn entry(operations: &[Operation], organizations: &[&str], namespaces: &[&str]) -> GrantEntry {
        GrantEntry {
            identity: OPERATOR.to_owned(),
            operations: operations.to_vec(),
            organizations: organizations.iter().map(|s| s.to_string()).collect(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn an_entry_covers_listed_operation_organization_and_namespace() {
        let grant = entry(&[Operation::Clients], &["acme"], &["team-a"]);
        assert_eq!(
            grant.covers(Operation::Clients, "acme", Some("team-a")),
            GrantDecision::Covered
        );
    }

    #[test]
    fn wildcards_cover_every_organization_and_namespace() {
        let grant = entry(&[Operation::Clients], &["*"], &["*"]);
        assert!(
            grant
                .covers(Operation::Clients, "globex", Some("anything"))
                .is_covered()
        );
    }

    #[test]
    fn a_missing_operation_is_named() {
        let grant = entry(&[Operation::Clients], &["*"], &["*"]);
        let decision = grant.covers(Operation::Brandings, "acme", Some("team-a"));
        assert_eq!(
            decision,
            GrantDecision::OperationNotGranted {
                operation: Operation::Brandings
            }
        );
        assert_eq!(decision.reason(), Some(ServerReason::OperationNotGranted));
    }

    #[test]
    fn an_outside_organization_and_namespace_are_named_separately() {
        let grant = entry(&[Operation::Clients], &["acme"], &["team-a"]);
        assert_eq!(
            grant.covers(Operation::Clients, "globex", Some("team-a")),
            GrantDecision::OutsideGrant {
                organization: Some("globex".into()),
                namespace: None
            }
        );
        assert_eq!(
            grant.covers(Operation::Clients, "acme", Some("team-b")),
            GrantDecision::OutsideGrant {
                organization: None,
                namespace: Some("team-b".into())
            }
        );
        let both = grant.covers(Operation::Clients, "globex", Some("team-b"));
        assert_eq!(both.reason(), Some(ServerReason::OutsideGrant));
        assert!(both.cause().contains("globex") && both.cause().contains("team-b"));
    }

    #[test]
    fn no_namespace_means_the_namespace_is_not_checked() {
        let grant = entry(&[Operation::Organizations], &["acme"], &["team-a"]);
        assert!(
            grant
                .covers(Operation::Organizations, "acme", None)
                .is_covered()
        );
    }

    #[test]
    fn an_unlisted_identity_is_not_allowed() {
        let entries = vec![entry(&[Operation::Clients], &["*"], &["*"])];
        let decision = decide(
            &entries,
            "dns:someone-else",
            Operation::Clients,
            "acme",
            None,
        );
        assert_eq!(decision.reason(), Some(ServerReason::IdentityNotAllowed));
    }

    #[test]
    fn any_entry_of_the_identity_may_cover_the_call() {
        let entries = vec![
            entry(&[Operation::Brandings], &["*"], &["*"]),
            entry(&[Operation::Clients], &["acme"], &["team-a"]),
        ];
        assert!(
            decide(
                &entries,
                OPERATOR,
                Operation::Clients,
                "acme",
                Some("team-a")
            )
            .is_covered()
        );
        assert_eq!(
            decide(
                &entries,
                OPERATOR,
                Operation::Clients,
                "acme",
                Some("team-b")
            ),
            GrantDecision::OutsideGrant {
                organization: None,
                namespace: Some("team-b".into())
            }
        );
        assert_eq!(
            decide(&entries, OPERATOR, Operation::Organizations, "acme", None),
            GrantDecision::OperationNotGranted {
                operation: Operation::Organizations
            }
        );
    }

    #[test]
    fn the_proposal_extends_the_closest_entry() {
        let entries = vec![entry(&[Operation::Clients], &["acme"], &["team-a"])];
        let proposal = propose_entry(
            &entries,
            OPERATOR,
            Operation::Clients,
            "acme",
            Some("team-b"),
        );
        assert_eq!(
            proposal,
            entry(&[Operation::Clients], &["acme"], &["team-a", "team-b"])
        );
        assert!(
            proposal
                .covers(Operation::Clients, "acme", Some("team-b"))
                .is_covered()
        );
    }

    #[test]
    fn the_proposal_adds_a_missing_operation_and_keeps_wildcards() {
        let entries = vec![entry(&[Operation::Clients], &["*"], &["*"])];
        let proposal = propose_entry(
            &entries,
            OPERATOR,
            Operation::Brandings,
            "acme",
            Some("team-a"),
        );
        assert_eq!(
            proposal,
            entry(&[Operation::Clients, Operation::Brandings], &["*"], &["*"])
        );
    }

    #[test]
    fn the_proposal_for_an_unknown_identity_is_a_new_entry() {
        let proposal = propose_entry(
            &[],
            "dns:new.example",
            Operation::IdentityProviders,
            "acme",
            Some("team-a"),
        );
        assert_eq!(proposal.identity, "dns:new.example");
        assert_eq!(proposal.operations, vec![Operation::IdentityProviders]);
        assert_eq!(proposal.organizations, vec!["acme".to_owned()]);
        assert_eq!(proposal.namespaces, vec!["team-a".to_owned()]);
    }

    #[test]
    fn a_covered_call_proposes_the_covering_entry_unchanged() {
        let entries = vec![entry(&[Operation::Clients], &["acme"], &["team-a"])];
        assert_eq!(
            propose_entry(
                &entries,
                OPERATOR,
                Operation::Clients,
                "acme",
                Some("team-a")
            ),
            entries[0]
        );
    }

    #[test]
    fn operations_round_trip_through_names() {
        for operation in Operation::ALL {
            assert_eq!(operation.as_str().parse::<Operation>(), Ok(operation));
        }
        assert!("client".parse::<Operation>().is_err());
    }
}
