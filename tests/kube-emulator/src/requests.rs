//! A tally of the resource requests the emulator served, by who asked, the verb and the resource,
//! so a benchmark can say how many Kubernetes requests a program made, of which kind.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// What one tally line counts: the requests of one user with one verb on one resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    /// The authenticated user (after impersonation), e.g. `system:serviceaccount:ns:name`.
    pub user: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// The resource as RBAC names it: `oidcclients`, `oidcclients/status`, `leases`, ...
    pub resource: String,
}

/// The running tally.
#[derive(Debug, Default)]
pub struct RequestTally {
    counts: Mutex<BTreeMap<RequestKey, u64>>,
}

impl RequestTally {
    pub fn record(&self, user: &str, verb: &str, plural: &str, subresource: Option<&str>) {
        let resource = match subresource {
            Some(sub) => format!("{plural}/{sub}"),
            None => plural.to_owned(),
        };
        let key = RequestKey {
            user: user.to_owned(),
            verb: verb.to_owned(),
            resource,
        };
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(key).or_default() += 1;
        }
    }

    pub fn snapshot(&self) -> BTreeMap<RequestKey, u64> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_user_verb_and_resource() {
        let tally = RequestTally::default();
        tally.record("bot", "patch", "oidcclients", Some("status"));
        tally.record("bot", "patch", "oidcclients", Some("status"));
        tally.record("bot", "get", "secrets", None);
        let counts = tally.snapshot();
        let key = |verb: &str, resource: &str| RequestKey {
            user: "bot".into(),
            verb: verb.into(),
            resource: resource.into(),
        };
        assert_eq!(counts.get(&key("patch", "oidcclients/status")), Some(&2));
        assert_eq!(counts.get(&key("get", "secrets")), Some(&1));
        assert_eq!(counts.len(), 2);
    }
}
