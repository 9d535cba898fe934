//! Shards of one cluster: this reconciler's [`Scope`] (its kinds and namespaces) as the
//! controllers and the change routing apply it, and the overlaps with the other shards that
//! publish their state in the same namespace.
//!
//! A resource outside the scope is not touched at all: no status, no finalizer, no server call.
//! Overlapping shards keep running: the server's managers keep each from writing over the
//! other's objects; the overlap is reported (a warning, a gauge, the published state) for a
//! person to fix.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::control_plane::{ControlPlaneState, STATE_KEY, STATE_LABEL, ShardOverlap};
use nauthera_shared::topology::{Scope, ScopeKind, with_name_label};
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::policies::Policies;

/// The scope as the running reconciler applies it: a namespace selector is judged on the labels
/// of the namespace watch the ClientPolicies already run on.
pub struct ShardScope {
    scope: Scope,
    policies: Arc<Policies>,
    /// Moves whenever the namespace watch saw labels change, for the overlaps to be judged again.
    namespaces_moved: watch::Sender<u64>,
}

impl std::fmt::Debug for ShardScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardScope")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl ShardScope {
    pub fn new(scope: Scope, policies: Arc<Policies>) -> ShardScope {
        ShardScope {
            scope,
            policies,
            namespaces_moved: watch::channel(0).0,
        }
    }

    /// Whether this reconciler reconciles the kind at all (its controller runs).
    pub fn covers_kind(&self, kind: ObjectKind) -> bool {
        ScopeKind::of_object_kind(kind).is_some_and(|kind| self.scope.covers_kind(kind))
    }

    /// Whether this reconciler reconciles a resource of the kind in the namespace now.
    pub fn covers(&self, kind: ObjectKind, namespace: &str) -> bool {
        let Some(kind) = ScopeKind::of_object_kind(kind) else {
            return false;
        };
        if self.scope.namespace_selector.is_none() {
            return self.scope.covers(kind, namespace, None);
        }
        let labels = self.policies.namespace_labels(namespace);
        self.scope.covers(kind, namespace, labels.as_ref())
    }

    /// Whether a namespace's labels moving from `before` to `after` (`None`: not there) moves it
    /// into or out of the scope; counts the move for the overlaps either way.
    pub fn namespace_moved(
        &self,
        namespace: &str,
        before: Option<&BTreeMap<String, String>>,
        after: Option<&BTreeMap<String, String>>,
    ) -> bool {
        self.namespaces_moved.send_modify(|count| *count += 1);
        coverage_moved(&self.scope, namespace, before, after)
    }
}

/// Whether a change of a namespace's labels moves it into or out of `scope`.
pub fn coverage_moved(
    scope: &Scope,
    namespace: &str,
    before: Option<&BTreeMap<String, String>>,
    after: Option<&BTreeMap<String, String>>,
) -> bool {
    if scope.namespace_selector.is_none() {
        return false;
    }
    let covered = |labels: Option<&BTreeMap<String, String>>| {
        let labels = labels.map(|labels| with_name_label(namespace, labels));
        scope.covers_namespace(namespace, labels.as_ref())
    };
    covered(before) != covered(after)
}

/// The overlaps of `own` with the other shards' scopes (by their state ConfigMap's name), judged
/// on the namespaces the cluster has; in the other shards' name order.
pub fn find_overlaps(
    own: &Scope,
    others: &BTreeMap<String, Scope>,
    known: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<ShardOverlap> {
    let mut overlaps: Vec<ShardOverlap> = others
        .values()
        .filter_map(|other| {
            let overlap = own.overlap(other, known)?;
            Some(ShardOverlap::new(other.shard_name(), &overlap))
        })
        .collect();
    overlaps.sort_by(|a, b| a.shard.cmp(&b.shard));
    overlaps
}

/// What changed between two reports of overlaps, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OverlapNews {
    /// A new overlap, or one that covers other kinds or namespaces now.
    Overlapping(ShardOverlap),
    /// The shard no longer overlaps.
    Ended(String),
}

pub fn overlap_news(previous: &[ShardOverlap], current: &[ShardOverlap]) -> Vec<OverlapNews> {
    let mut news: Vec<OverlapNews> = current
        .iter()
        .filter(|overlap| !previous.contains(overlap))
        .cloned()
        .map(OverlapNews::Overlapping)
        .collect();
    news.extend(
        previous
            .iter()
            .filter(|old| !current.iter().any(|now| now.shard == old.shard))
            .map(|old| OverlapNews::Ended(old.shard.clone())),
    );
    news
}

/// The gauge's value for an overlap: how many namespaces both reconcile (every namespace the
/// cluster has when neither is limited by namespace).
pub fn overlap_gauge(overlap: &ShardOverlap, known_namespaces: usize) -> i64 {
    let count = overlap.namespace_count().unwrap_or(known_namespaces);
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// The scope a published state declares; `None` for one that cannot be read.
fn scope_of(config_map: &ConfigMap) -> Option<Scope> {
    let text = config_map.data.as_ref()?.get(STATE_KEY)?;
    let state: ControlPlaneState = serde_json::from_str(text).ok()?;
    Some(state.scope_or_everything())
}

/// Follows the other reconcilers' published states in this namespace (one watch on their label)
/// and the namespace labels, and reports the overlaps with this scope whenever they change:
/// a log line per change, the gauge, and `overlaps` for the published state. Runs while leading.
pub async fn follow_shards(
    configmaps: Api<ConfigMap>,
    own_configmap: String,
    shard: Arc<ShardScope>,
    metrics: Metrics,
    overlaps: watch::Sender<Vec<ShardOverlap>>,
) {
    metrics.shard_overlaps_reset();
    // Selectors are judged on the namespaces: wait for their listing.
    shard.policies.wait_loaded().await;
    let (key, value) = STATE_LABEL;
    let label = format!("{key}={value}");
    let mut events = std::pin::pin!(
        watcher::watcher(configmaps, watcher::Config::default().labels(&label)).default_backoff()
    );
    let mut namespaces_moved = shard.namespaces_moved.subscribe();
    let mut others: BTreeMap<String, Scope> = BTreeMap::new();
    let mut listing: BTreeMap<String, Scope> = BTreeMap::new();
    let mut reported: Vec<ShardOverlap> = Vec::new();
    let mut listed = false;
    let mut told_forbidden = false;
    loop {
        tokio::select! {
            event = events.next() => {
                let Some(event) = event else { return };
                let keep = |map: &mut BTreeMap<String, Scope>, config_map: &ConfigMap| {
                    let name = config_map.name_any();
                    if name == own_configmap {
                        return;
                    }
                    match scope_of(config_map) {
                        Some(scope) => map.insert(name, scope),
                        None => {
                            tracing::debug!(configmap = %name, "a published state this reconciler cannot read; left out of the overlaps");
                            map.remove(&name)
                        }
                    };
                };
                match event {
                    Ok(Event::Init) => listing.clear(),
                    Ok(Event::InitApply(config_map)) => keep(&mut listing, &config_map),
                    Ok(Event::InitDone) => {
                        others = std::mem::take(&mut listing);
                        listed = true;
                    }
                    Ok(Event::Apply(config_map)) => keep(&mut others, &config_map),
                    Ok(Event::Delete(config_map)) => {
                        others.remove(&config_map.name_any());
                    }
                    Err(error) => {
                        let forbidden = matches!(
                            &error,
                            watcher::Error::InitialListFailed(kube::Error::Api(status))
                                | watcher::Error::WatchStartFailed(kube::Error::Api(status))
                                if status.code == 403
                        );
                        if forbidden && !told_forbidden {
                            told_forbidden = true;
                            tracing::warn!(error = %error, "the reconciler may not list the published states in its namespace: overlaps with other shards are not detected (deploy/base/rbac.yaml grants list and watch on configmaps)");
                        } else if !forbidden {
                            tracing::debug!(error = %error, "watching the published states");
                        }
                        continue;
                    }
                }
            }
            changed = namespaces_moved.changed() => if changed.is_err() { return },
        }
        if !listed {
            continue;
        }
        let known = shard.policies.known_namespaces();
        let current = find_overlaps(&shard.scope, &others, &known);
        if current == reported {
            continue;
        }
        for news in overlap_news(&reported, &current) {
            match news {
                OverlapNews::Overlapping(overlap) => {
                    metrics.shard_overlap(&overlap.shard, overlap_gauge(&overlap, known.len()));
                    tracing::warn!(
                        shard = %shard.scope.shard_name(),
                        other = %overlap.shard,
                        "{}; both keep running and the server's managers keep each from writing \
                         over the other's objects: narrow the scopes (--namespace, \
                         --namespace-selector, --kinds) so that each resource has one shard",
                        overlap.describe()
                    );
                }
                OverlapNews::Ended(other) => {
                    metrics.shard_overlap_gone(&other);
                    tracing::info!(shard = %shard.scope.shard_name(), other = %other, "no longer overlaps");
                }
            }
        }
        overlaps.send_replace(current.clone());
        reported = current;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nauthera_shared::topology::NamespaceSelector;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn shard(name: &str, namespaces: &[&str], selector: Option<&str>) -> Scope {
        Scope {
            shard: Some(name.to_owned()),
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            namespace_selector: selector.map(|s| NamespaceSelector::parse(s).unwrap()),
            ..Scope::everything()
        }
    }

    #[test]
    fn overlaps_are_found_per_other_shard_and_only_where_both_reconcile() {
        let known = BTreeMap::from([
            ("a-1".to_owned(), labels(&[("team", "a")])),
            ("b-1".to_owned(), labels(&[("team", "b")])),
        ]);
        let own = shard("a", &[], Some("team=a"));
        let others = BTreeMap::from([
            (
                "nauthera-reconciler-state-b".to_owned(),
                shard("b", &[], Some("team=b")),
            ),
            (
                "nauthera-reconciler-state-c".to_owned(),
                shard("c", &["a-1", "b-1"], None),
            ),
            ("nauthera-reconciler-state".to_owned(), Scope::everything()),
        ]);
        let overlaps = find_overlaps(&own, &others, &known);
        let shown: Vec<(&str, Vec<&str>)> = overlaps
            .iter()
            .map(|o| {
                (
                    o.shard.as_str(),
                    o.namespaces.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            vec![("(unsharded)", vec!["a-1"]), ("c", vec!["a-1"])],
            "b selects other namespaces"
        );
        assert_eq!(overlap_gauge(&overlaps[0], known.len()), 1);
    }

    #[test]
    fn each_change_of_the_overlaps_is_news_once() {
        let overlap = |shard: &str, namespaces: &[&str]| ShardOverlap {
            shard: shard.to_owned(),
            kinds: vec![ScopeKind::OidcClient],
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            ..ShardOverlap::default()
        };
        let first = vec![overlap("b", &["x"])];
        assert_eq!(
            overlap_news(&[], &first),
            vec![OverlapNews::Overlapping(overlap("b", &["x"]))]
        );
        assert_eq!(overlap_news(&first, &first), vec![]);
        let grown = vec![overlap("b", &["x", "y"]), overlap("c", &["z"])];
        assert_eq!(
            overlap_news(&first, &grown),
            vec![
                OverlapNews::Overlapping(overlap("b", &["x", "y"])),
                OverlapNews::Overlapping(overlap("c", &["z"])),
            ]
        );
        assert_eq!(
            overlap_news(&grown, &[overlap("c", &["z"])]),
            vec![OverlapNews::Ended("b".into())]
        );
        let every = ShardOverlap {
            every_namespace: true,
            ..overlap("d", &[])
        };
        assert_eq!(overlap_gauge(&every, 7), 7);
    }

    #[test]
    fn only_a_selector_moves_namespaces_into_and_out_of_the_scope() {
        let selected = shard("a", &[], Some("team=a"));
        let team_a = labels(&[("team", "a")]);
        let team_b = labels(&[("team", "b")]);
        assert!(coverage_moved(&selected, "x", None, Some(&team_a)));
        assert!(coverage_moved(&selected, "x", Some(&team_a), Some(&team_b)));
        assert!(coverage_moved(&selected, "x", Some(&team_a), None));
        assert!(!coverage_moved(&selected, "x", Some(&team_b), None));
        assert!(!coverage_moved(
            &selected,
            "x",
            Some(&team_a),
            Some(&labels(&[("team", "a"), ("tier", "prod")]))
        ));
        let listed = shard("a", &["x"], None);
        assert!(!coverage_moved(&listed, "x", None, Some(&team_a)));
        // By the name label, which the watch's labels may lack.
        let by_name = shard("a", &[], Some("kubernetes.io/metadata.name in (x)"));
        assert!(coverage_moved(&by_name, "x", None, Some(&labels(&[]))));
    }
}
