//! Where a reconciler sits among others: the cluster it runs in, the part of that cluster it
//! reconciles (its shard), and how its Kubernetes namespaces map into the server's namespace
//! space. Every reconciler of one server needs its own manager name and certificate identity;
//! reconcilers of different clusters also need different namespace mappings, or two namespaces of
//! the same name in two clusters would declare the same server objects.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use crate::kinds::Kind;
use crate::policy::{NAMESPACE_NAME_LABEL, parse_label_selector, selector_matches};

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

/// How a reconciler without a shard name is named where shards are listed (not a DNS label, so
/// no shard can be called that).
pub const UNSHARDED: &str = "(unsharded)";

/// A namespace selector as it was written (`team in (a,b),tier=prod`), with its parsed form. It
/// travels as the text, and is parsed again when read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NamespaceSelector {
    text: String,
    parsed: LabelSelector,
}

impl NamespaceSelector {
    /// Reads a selector in the text form `kubectl get -l` takes.
    pub fn parse(text: &str) -> Result<NamespaceSelector, String> {
        let text = text.trim();
        Ok(NamespaceSelector {
            parsed: parse_label_selector(text)?,
            text: text.to_owned(),
        })
    }

    /// The selector as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn parsed(&self) -> &LabelSelector {
        &self.parsed
    }

    /// Whether a namespace with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        selector_matches(&self.parsed, labels)
    }
}

impl TryFrom<String> for NamespaceSelector {
    type Error = String;

    fn try_from(text: String) -> Result<NamespaceSelector, String> {
        NamespaceSelector::parse(&text)
    }
}

impl From<NamespaceSelector> for String {
    fn from(selector: NamespaceSelector) -> String {
        selector.text
    }
}

impl fmt::Display for NamespaceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn all_kinds() -> Vec<Kind> {
    Kind::ALL.to_vec()
}

fn is_all_kinds(kinds: &[Kind]) -> bool {
    Kind::ALL.iter().all(|kind| kinds.contains(kind))
}

/// The part of a cluster one reconciler reconciles: the kinds, and the namespaces (those listed,
/// those a selector selects, both, or every namespace when neither is given). A reconciler with
/// a shard name leads on a Lease and publishes a state of its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    /// The shard's name (`--shard`); `None` for a reconciler that is no shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// The namespaces listed (`--namespace`); empty: not limited by a list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// The namespaces' selector (`--namespace-selector`); with a list too, a namespace must be
    /// listed and selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<NamespaceSelector>,
    /// The kinds, in [`Kind::ALL`]'s order; every kind when a document leaves them out.
    #[serde(default = "all_kinds")]
    pub kinds: Vec<Kind>,
}

impl Default for Scope {
    fn default() -> Scope {
        Scope::everything()
    }
}

/// What two scopes both cover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// The kinds both cover, in [`Kind::ALL`]'s order.
    pub kinds: Vec<Kind>,
    pub namespaces: OverlapNamespaces,
}

/// The namespaces two scopes both cover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OverlapNamespaces {
    /// Every namespace, now and to come: neither scope is limited by namespace.
    Every,
    /// These, in name order: the intersection of the lists, or the namespaces of the cluster
    /// that both select.
    These(Vec<String>),
}

impl Scope {
    /// Every kind in every namespace, as a reconciler without limits reconciles.
    pub fn everything() -> Scope {
        Scope {
            shard: None,
            namespaces: Vec::new(),
            namespace_selector: None,
            kinds: all_kinds(),
        }
    }

    /// The shard's name, or [`UNSHARDED`].
    pub fn shard_name(&self) -> &str {
        self.shard.as_deref().unwrap_or(UNSHARDED)
    }

    /// Whether it is limited at all (a shard name alone limits nothing).
    pub fn is_limited(&self) -> bool {
        !self.covers_every_namespace() || !is_all_kinds(&self.kinds)
    }

    pub fn covers_kind(&self, kind: Kind) -> bool {
        self.kinds.contains(&kind)
    }

    /// Whether it covers every namespace, including those not created yet.
    pub fn covers_every_namespace(&self) -> bool {
        self.namespaces.is_empty() && self.namespace_selector.is_none()
    }

    /// Whether it covers a namespace with these labels (`None`: not known, which a selector
    /// never selects).
    pub fn covers_namespace(
        &self,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        let listed = self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace);
        let selected = match &self.namespace_selector {
            None => true,
            Some(selector) => labels.is_some_and(|labels| selector.matches(labels)),
        };
        listed && selected
    }

    /// Whether it covers a resource of this kind in a namespace with these labels.
    pub fn covers(
        &self,
        kind: Kind,
        namespace: &str,
        namespace_labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        self.covers_kind(kind) && self.covers_namespace(namespace, namespace_labels)
    }

    /// What both cover, judged on the namespaces the cluster has (`known`, with their labels)
    /// where a selector decides; `None` when they share no kind or no namespace.
    pub fn overlap(
        &self,
        other: &Scope,
        known: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Option<Overlap> {
        let kinds: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|kind| self.covers_kind(*kind) && other.covers_kind(*kind))
            .collect();
        if kinds.is_empty() {
            return None;
        }
        if self.covers_every_namespace() && other.covers_every_namespace() {
            return Some(Overlap {
                kinds,
                namespaces: OverlapNamespaces::Every,
            });
        }
        // Listed namespaces are covered whether or not they exist yet; selected ones only as
        // the cluster has them.
        let candidates: BTreeSet<&str> =
            match (self.namespaces.is_empty(), other.namespaces.is_empty()) {
                (false, _) => self.namespaces.iter().map(String::as_str).collect(),
                (true, false) => other.namespaces.iter().map(String::as_str).collect(),
                (true, true) => known.keys().map(String::as_str).collect(),
            };
        let namespaces: Vec<String> = candidates
            .into_iter()
            .filter(|namespace| {
                let labels = known
                    .get(*namespace)
                    .map(|labels| with_name_label(namespace, labels));
                self.covers_namespace(namespace, labels.as_ref())
                    && other.covers_namespace(namespace, labels.as_ref())
            })
            .map(str::to_owned)
            .collect();
        (!namespaces.is_empty()).then_some(Overlap {
            kinds,
            namespaces: OverlapNamespaces::These(namespaces),
        })
    }

    /// The scope in a line, for people: `OIDCClient, Branding in namespaces team-a, team-b`.
    pub fn describe(&self) -> String {
        let kinds = if is_all_kinds(&self.kinds) {
            "every kind".to_owned()
        } else {
            self.kinds
                .iter()
                .map(|kind| kind.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let namespaces = match (&self.namespaces[..], &self.namespace_selector) {
            ([], None) => "every namespace".to_owned(),
            ([], Some(selector)) => format!("namespaces selected by {selector}"),
            (listed, None) => format!("namespaces {}", listed.join(", ")),
            (listed, Some(selector)) => {
                format!("namespaces {} selected by {selector}", listed.join(", "))
            }
        };
        format!("{kinds} in {namespaces}")
    }
}

/// A namespace's labels with the name label the API server sets on every namespace.
pub fn with_name_label(
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels = labels.clone();
    labels
        .entry(NAMESPACE_NAME_LABEL.to_owned())
        .or_insert_with(|| namespace.to_owned());
    labels
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

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn scope(shard: &str, namespaces: &[&str], selector: Option<&str>, kinds: &[Kind]) -> Scope {
        Scope {
            shard: Some(shard.to_owned()),
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            namespace_selector: selector.map(|s| NamespaceSelector::parse(s).unwrap()),
            kinds: if kinds.is_empty() {
                Kind::ALL.to_vec()
            } else {
                kinds.to_vec()
            },
        }
    }

    fn cluster() -> BTreeMap<String, BTreeMap<String, String>> {
        BTreeMap::from([
            (
                "team-a".to_owned(),
                labels(&[("team", "a"), ("tier", "prod")]),
            ),
            (
                "team-b".to_owned(),
                labels(&[("team", "b"), ("tier", "prod")]),
            ),
            ("team-c".to_owned(), labels(&[("team", "c")])),
            ("kube-system".to_owned(), labels(&[])),
        ])
    }

    #[test]
    fn a_scope_covers_its_kinds_in_its_listed_and_selected_namespaces() {
        let everything = Scope::everything();
        assert!(everything.covers(Kind::Branding, "anything", None));
        assert!(!everything.is_limited());
        let listed = scope("a", &["team-a"], None, &[Kind::OidcClient]);
        assert!(listed.covers(Kind::OidcClient, "team-a", None));
        assert!(!listed.covers(Kind::Branding, "team-a", None));
        assert!(!listed.covers(Kind::OidcClient, "team-b", None));
        let selected = scope("b", &[], Some("tier=prod"), &[]);
        let prod = labels(&[("tier", "prod")]);
        assert!(selected.covers(Kind::Organization, "team-b", Some(&prod)));
        assert!(!selected.covers(Kind::Organization, "team-c", Some(&labels(&[]))));
        assert!(
            !selected.covers(Kind::Organization, "team-b", None),
            "a namespace whose labels are not known yet is not selected"
        );
        let both = scope("c", &["team-a"], Some("tier=prod"), &[]);
        assert!(both.covers(Kind::Branding, "team-a", Some(&prod)));
        assert!(!both.covers(Kind::Branding, "team-b", Some(&prod)));
        assert!(both.is_limited());
    }

    #[test]
    fn disjoint_scopes_do_not_overlap() {
        let known = cluster();
        let a = scope("a", &["team-a"], None, &[]);
        let b = scope("b", &["team-b", "team-c"], None, &[]);
        assert_eq!(a.overlap(&b, &known), None);
        let by_team_a = scope("a", &[], Some("team=a"), &[]);
        let by_team_b = scope("b", &[], Some("team in (b,c)"), &[]);
        assert_eq!(by_team_a.overlap(&by_team_b, &known), None);
        // The same namespaces, other kinds.
        let clients = scope("a", &[], None, &[Kind::OidcClient]);
        let organizations = scope("b", &[], None, &[Kind::Organization]);
        assert_eq!(clients.overlap(&organizations, &known), None);
    }

    #[test]
    fn an_overlap_names_the_kinds_and_namespaces_both_cover() {
        let known = cluster();
        let lists = scope("a", &["team-a", "team-b", "team-x"], None, &[]);
        let other = scope(
            "b",
            &["team-b", "team-x"],
            None,
            &[Kind::Branding, Kind::OidcClient],
        );
        assert_eq!(
            lists.overlap(&other, &known),
            Some(Overlap {
                kinds: vec![Kind::OidcClient, Kind::Branding],
                namespaces: OverlapNamespaces::These(vec!["team-b".into(), "team-x".into()]),
            }),
            "listed namespaces count whether or not they exist yet"
        );
        let prod = scope("a", &[], Some("tier=prod"), &[]);
        let not_c = scope("b", &[], Some("team notin (c)"), &[]);
        assert_eq!(
            prod.overlap(&not_c, &known).map(|o| o.namespaces),
            Some(OverlapNamespaces::These(vec![
                "team-a".into(),
                "team-b".into()
            ]))
        );
        // A selector against a list: the listed namespaces it selects.
        assert_eq!(
            prod.overlap(&lists, &known).map(|o| o.namespaces),
            Some(OverlapNamespaces::These(vec![
                "team-a".into(),
                "team-b".into()
            ]))
        );
        // A reconciler without limits overlaps everything another covers.
        let everything = Scope::everything();
        assert_eq!(
            everything.overlap(&prod, &known).map(|o| o.namespaces),
            Some(OverlapNamespaces::These(vec![
                "team-a".into(),
                "team-b".into()
            ]))
        );
        assert_eq!(
            everything.overlap(&scope("b", &[], None, &[Kind::Organization]), &known),
            Some(Overlap {
                kinds: vec![Kind::Organization],
                namespaces: OverlapNamespaces::Every,
            })
        );
        // Namespaces select by their name label too, which the API server always sets.
        let named = scope(
            "b",
            &[],
            Some("kubernetes.io/metadata.name=kube-system"),
            &[],
        );
        assert_eq!(
            named.overlap(&everything, &known).map(|o| o.namespaces),
            Some(OverlapNamespaces::These(vec!["kube-system".into()]))
        );
    }

    #[test]
    fn kinds_are_named_as_manifests_spell_them_and_a_scope_reads_back() {
        assert_eq!(Kind::named("oidcclient"), Some(Kind::OidcClient));
        assert_eq!(Kind::named(" Organization "), Some(Kind::Organization));
        assert_eq!(Kind::named("Secret"), None);
        let written = scope(
            "a",
            &["team-a"],
            Some("team in (a,b), tier=prod"),
            &[Kind::Branding],
        );
        let json = serde_json::to_value(&written).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "shard": "a",
                "namespaces": ["team-a"],
                "namespaceSelector": "team in (a,b), tier=prod",
                "kinds": ["Branding"],
            })
        );
        assert_eq!(serde_json::from_value::<Scope>(json).unwrap(), written);
        let bare: Scope = serde_json::from_value(serde_json::json!({"shard": "b"})).unwrap();
        assert_eq!(bare.kinds, Kind::ALL.to_vec());
        assert!(bare.covers_every_namespace());
        assert!(
            serde_json::from_value::<Scope>(serde_json::json!({"namespaceSelector": "a in ("}))
                .is_err()
        );
        assert_eq!(
            written.describe(),
            "Branding in namespaces team-a selected by team in (a,b), tier=prod"
        );
        assert_eq!(
            Scope::everything().describe(),
            "every kind in every namespace"
        );
        assert_eq!(Scope::everything().shard_name(), UNSHARDED);
    }
}
