//! The AdminService methods, named as gRPC names them (`ApplyClient`, ...).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One AdminService method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Method {
    GetServerInfo,
    GetChangeHint,
    WatchChanges,
    ApplyClient,
    GetClient,
    DeleteClient,
    ListClientRevisions,
    ApplyBranding,
    GetBranding,
    DeleteBranding,
    ApplyIdentityProvider,
    GetIdentityProvider,
    DeleteIdentityProvider,
    ApplyOrganization,
    GetOrganization,
    DeleteOrganization,
    ListAuditEvents,
    ListClients,
    ListBrandings,
    ListIdentityProviders,
    ListOrganizations,
}

impl Method {
    pub const ALL: [Method; 21] = [
        Method::GetServerInfo,
        Method::GetChangeHint,
        Method::WatchChanges,
        Method::ApplyClient,
        Method::GetClient,
        Method::DeleteClient,
        Method::ListClientRevisions,
        Method::ApplyBranding,
        Method::GetBranding,
        Method::DeleteBranding,
        Method::ApplyIdentityProvider,
        Method::GetIdentityProvider,
        Method::DeleteIdentityProvider,
        Method::ApplyOrganization,
        Method::GetOrganization,
        Method::DeleteOrganization,
        Method::ListAuditEvents,
        Method::ListClients,
        Method::ListBrandings,
        Method::ListIdentityProviders,
        Method::ListOrganizations,
    ];

    /// The gRPC method name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::GetServerInfo => "GetServerInfo",
            Method::GetChangeHint => "GetChangeHint",
            Method::WatchChanges => "WatchChanges",
            Method::ApplyClient => "ApplyClient",
            Method::GetClient => "GetClient",
            Method::DeleteClient => "DeleteClient",
            Method::ListClientRevisions => "ListClientRevisions",
            Method::ApplyBranding => "ApplyBranding",
            Method::GetBranding => "GetBranding",
            Method::DeleteBranding => "DeleteBranding",
            Method::ApplyIdentityProvider => "ApplyIdentityProvider",
            Method::GetIdentityProvider => "GetIdentityProvider",
            Method::DeleteIdentityProvider => "DeleteIdentityProvider",
            Method::ApplyOrganization => "ApplyOrganization",
            Method::GetOrganization => "GetOrganization",
            Method::DeleteOrganization => "DeleteOrganization",
            Method::ListAuditEvents => "ListAuditEvents",
            Method::ListClients => "ListClients",
            Method::ListBrandings => "ListBrandings",
            Method::ListIdentityProviders => "ListIdentityProviders",
            Method::ListOrganizations => "ListOrganizations",
        }
    }

    /// The method of a name the table of kinds gives (`Kind::methods`), each of which is one.
    pub fn of_kind(name: &'static str) -> Method {
        name.parse()
            .expect("the table of kinds names AdminService methods")
    }

    /// The feature `ServerInfo.features` names for an optional method, if it is one. The four
    /// listings of whole objects share one.
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Method::ListClients
            | Method::ListBrandings
            | Method::ListIdentityProviders
            | Method::ListOrganizations => Some(nauthera_client::LIST_OBJECTS_FEATURE),
            Method::WatchChanges => Some("watch_changes"),
            Method::ListAuditEvents => Some("audit_events"),
            Method::ListClientRevisions => Some("list_client_revisions"),
            Method::GetChangeHint => Some("change_hint"),
            _ => None,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not an AdminService method.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown AdminService method {0:?} (use the gRPC name, e.g. ApplyClient)")]
pub struct UnknownMethod(pub String);

impl FromStr for Method {
    type Err = UnknownMethod;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Method::ALL
            .into_iter()
            .find(|method| method.as_str() == name)
            .ok_or_else(|| UnknownMethod(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use nauthera_shared::kinds::Kind;

    use super::*;

    #[test]
    fn every_method_the_table_of_kinds_names_is_one() {
        for kind in Kind::ALL {
            let methods = kind.methods();
            for name in [methods.apply, methods.get, methods.delete, methods.list] {
                assert_eq!(Method::of_kind(name).as_str(), name);
            }
        }
    }
}
