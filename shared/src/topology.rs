//! Where a reconciler sits among others: the cluster it runs in, the part of that cluster it
//! reconciles (its shard), and how its Kubernetes namespaces map into the server's namespace
//! space. Every reconciler of one server needs its own manager name and certificate identity;
//! reconcilers of different clusters also need different namespace mappings, or two namespaces of
//! the same name in two clusters would declare the same server objects.

use serde::{Deserialize, Serialize};

/// The annotation a person sets on a resource to take its server object over from the manager
/// named in the value (the one `status.managedElsewhere.manager` names). The reconciler writes
/// over that manager's last revision only while that manager is still the last writer, then
/// removes the annotation; the other reconciler then finds the object managed elsewhere.
pub const TAKE_OVER_ANNOTATION: &str = "nauthera.io/take-over-from";

/// The longest cluster name: it becomes part of every server namespace.
pub const MAX_CLUSTER_NAME: usize = 63;

/// How this reconciler's Kubernetes namespaces are named on the server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceMapping {
    /// Put before every Kubernetes namespace (`prod-eu/` makes `team-a` `prod-eu/team-a`);
    /// empty: the server namespace is the Kubernetes namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
}

impl NamespaceMapping {
    /// No mapping: the namespaces are the same on both sides.
    pub const IDENTITY: NamespaceMapping = NamespaceMapping {
        prefix: String::new(),
    };

    /// The mapping of a cluster: `<cluster>/` unless another prefix is given.
    pub fn for_cluster(cluster: Option<&str>, prefix: Option<&str>) -> NamespaceMapping {
        let prefix = match (prefix, cluster) {
            (Some(prefix), _) => prefix.to_owned(),
            (None, Some(cluster)) => format!("{cluster}/"),
            (None, None) => String::new(),
        };
        NamespaceMapping { prefix }
    }

    pub fn is_identity(&self) -> bool {
        self.prefix.is_empty()
    }

    /// The server namespace of a Kubernetes namespace: what every call names, and what the
    /// server's grants must list.
    pub fn to_server(&self, namespace: &str) -> String {
        format!("{}{namespace}", self.prefix)
    }

    /// The Kubernetes namespace of a server namespace, when it is one of this cluster's: `None`
    /// for another cluster's namespace (another prefix, or none).
    pub fn from_server<'a>(&self, namespace: &'a str) -> Option<&'a str> {
        namespace
            .strip_prefix(self.prefix.as_str())
            .filter(|rest| !rest.is_empty())
    }
}

/// Checks a cluster name: a DNS label, so that it reads the same in every namespace it prefixes.
pub fn check_cluster_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= MAX_CLUSTER_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a cluster name: use up to {MAX_CLUSTER_NAME} lower-case letters, \
             digits and '-', starting and ending with a letter or digit (for example prod-eu)"
        ))
    }
}

/// Checks a namespace prefix: it must not be empty and must end in a separator (`/`, `-` or
/// `.`), so that one cluster's prefix never reads as another's namespace (`prod` and `prod-eu`).
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    let ends_in_separator = prefix.ends_with(['/', '-', '.']);
    let printable = prefix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/-._".contains(c));
    if prefix.len() > 1 && ends_in_separator && printable {
        Ok(())
    } else {
        Err(format!(
            "{prefix:?} is not a namespace prefix: use letters, digits, '/', '-', '.' or '_', \
             ending in '/', '-' or '.' (for example prod-eu/)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_name_prefixes_every_namespace_and_only_its_own_map_back() {
        let mapping = NamespaceMapping::for_cluster(Some("prod-eu"), None);
        assert_eq!(mapping.to_server("team-a"), "prod-eu/team-a");
        assert_eq!(mapping.from_server("prod-eu/team-a"), Some("team-a"));
        assert_eq!(mapping.from_server("prod-us/team-a"), None);
        assert_eq!(mapping.from_server("team-a"), None);
        assert_eq!(mapping.from_server("prod-eu/"), None);
        let prefixed = NamespaceMapping::for_cluster(Some("prod-eu"), Some("eu-"));
        assert_eq!(prefixed.to_server("team-a"), "eu-team-a");
    }

    #[test]
    fn without_a_mapping_namespaces_are_the_same_on_both_sides() {
        let mapping = NamespaceMapping::for_cluster(None, None);
        assert!(mapping.is_identity());
        assert_eq!(mapping.to_server("team-a"), "team-a");
        assert_eq!(
            mapping.from_server("prod-eu/team-a"),
            Some("prod-eu/team-a")
        );
    }

    #[test]
    fn names_and_prefixes_are_checked() {
        assert!(check_cluster_name("prod-eu").is_ok());
        for bad in ["", "Prod", "prod_eu", "-prod", "prod-", &"a".repeat(64)] {
            assert!(check_cluster_name(bad).is_err(), "{bad}");
        }
        assert!(check_prefix("prod-eu/").is_ok());
        assert!(check_prefix("eu-").is_ok());
        for bad in ["", "/", "prod", "prod eu/", "prod*/"] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
    }
}
