//! Shards of one cluster: this reconciler's [`Scope`] (its kinds and namespaces) as the
//! controllers and the change routing apply it, and the overlaps with the other shards that
//! publish their state in the same namespace.
//!
//! A resource outside the scope is not touched at all: no status, no finalizer, no server call.
//! Overlapping shards keep running: the server's managers keep each from writing over the
//! other's objects; the overlap is reported (a warning, a gauge, the published state) for a
//! person to fix. A state whose leader no longer renews its Lease (a shard stopped or removed,
//! its ConfigMap left behind) is no overlap: it is told once in the log, and counts again as
//! soon as a leader renews that Lease.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use nauthera_client::wire::kind_of;
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::control_plane::{ControlPlaneState, STATE_KEY, STATE_LABEL, ShardOverlap};
use nauthera_shared::topology::{Scope, with_name_label};
use tokio::sync::watch;

use crate::process::metrics::Metrics;
use crate::reconcile::policies::Policies;

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
        kind_of(kind).is_some_and(|kind| self.scope.covers_kind(kind))
    }

    /// Whether this reconciler reconciles a resource of the kind in the namespace now.
    pub fn covers(&self, kind: ObjectKind, namespace: &str) -> bool {
        let Some(kind) = kind_of(kind) else {
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
/// Another reconciler's published scope, with the Lease its leader renews.
#[derive(Clone, Debug, PartialEq)]
pub struct Published {
    pub scope: Scope,
    pub lease_name: Option<String>,
}

fn published(config_map: &ConfigMap) -> Option<Published> {
    let text = config_map.data.as_ref()?.get(STATE_KEY)?;
    let state: ControlPlaneState = serde_json::from_str(text).ok()?;
    Some(Published {
        scope: state.scope_or_everything(),
        lease_name: state.lease_name.clone().filter(|name| !name.is_empty()),
    })
}

/// Whether a Lease has a leader renewing it as of `now`: a holder, and a renewal within twice
/// its duration (the margin absorbs a slow renewal and clock skew between nodes).
pub fn lease_renewed(spec: Option<&LeaseSpec>, now: Timestamp) -> bool {
    let Some(spec) = spec else {
        return false;
    };
    if spec.holder_identity.as_deref().is_none_or(str::is_empty) {
        return false;
    }
    let Some(renewed) = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|time| time.0)
    else {
        return false;
    };
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15).max(1));
    now.duration_since(renewed).as_secs() <= 2 * duration
}

/// The published scopes whose leader runs (its Lease renewed); a state that names no Lease
/// (leader election off) counts, since nothing says it stopped. `leases` by name.
/// `None`: the Leases cannot be read, and every state counts.
pub fn running_scopes(
    published: &BTreeMap<String, Published>,
    leases: Option<&BTreeMap<String, LeaseSpec>>,
    now: Timestamp,
) -> BTreeMap<String, Scope> {
    published
        .iter()
        .filter(|(_, state)| match (&state.lease_name, leases) {
            (Some(name), Some(leases)) => lease_renewed(leases.get(name), now),
            _ => true,
        })
        .map(|(name, state)| (name.clone(), state.scope.clone()))
        .collect()
}

/// Whether a watch failed because the reconciler may not list or watch what it watches.
fn forbidden(error: &watcher::Error) -> bool {
    matches!(
        error,
        watcher::Error::InitialListFailed(kube::Error::Api(status))
            | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            if status.code == 403
    )
}

/// A map kept from a watch: emptied at a relisting, replaced when the listing is done.
struct Followed<T> {
    current: BTreeMap<String, T>,
    listing: BTreeMap<String, T>,
    listed: bool,
}

impl<T> Default for Followed<T> {
    fn default() -> Self {
        Followed {
            current: BTreeMap::new(),
            listing: BTreeMap::new(),
            listed: false,
        }
    }
}

impl<T> Followed<T> {
    /// Takes one watch event, `value` of its object (`None`: left out).
    fn take<K: ResourceExt>(&mut self, event: Event<K>, value: impl Fn(&K) -> Option<T>) {
        match event {
            Event::Init => self.listing.clear(),
            Event::InitApply(object) => {
                if let Some(value) = value(&object) {
                    self.listing.insert(object.name_any(), value);
                }
            }
            Event::InitDone => {
                self.current = std::mem::take(&mut self.listing);
                self.listed = true;
            }
            Event::Apply(object) => match value(&object) {
                Some(value) => {
                    self.current.insert(object.name_any(), value);
                }
                None => {
                    self.current.remove(&object.name_any());
                }
            },
            Event::Delete(object) => {
                self.current.remove(&object.name_any());
            }
        }
    }
}

/// Follows the other reconcilers' published states in this namespace (one watch on their label),
/// the Leases their leaders renew and the namespace labels, and reports the overlaps with this
/// scope whenever they change: a log line per change, the gauge, and `overlaps` for the
/// published state. Runs while leading; `recheck` is how often a Lease that stopped being
/// renewed is noticed.
pub async fn follow_shards(
    configmaps: Api<ConfigMap>,
    leases: Api<Lease>,
    own_configmap: String,
    shard: Arc<ShardScope>,
    metrics: Metrics,
    overlaps: watch::Sender<Vec<ShardOverlap>>,
    recheck: Duration,
) {
    metrics.shard_overlaps_reset();
    // Selectors are judged on the namespaces: wait for their listing.
    shard.policies.wait_loaded().await;
    let (key, value) = STATE_LABEL;
    let label = format!("{key}={value}");
    let mut states = std::pin::pin!(
        watcher::watcher(configmaps, watcher::Config::default().labels(&label)).default_backoff()
    );
    let mut lease_events =
        std::pin::pin!(watcher::watcher(leases, watcher::Config::default()).default_backoff());
    let mut namespaces_moved = shard.namespaces_moved.subscribe();
    let mut ticks = tokio::time::interval(recheck);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut others: Followed<Published> = Followed::default();
    let mut renewals: Followed<LeaseSpec> = Followed::default();
    let mut leases_readable = true;
    let mut reported: Vec<ShardOverlap> = Vec::new();
    let mut stopped: Vec<String> = Vec::new();
    let mut told_forbidden = false;
    loop {
        tokio::select! {
            event = states.next() => {
                let Some(event) = event else { return };
                match event {
                    Ok(event) => others.take(event, |config_map: &ConfigMap| {
                        if config_map.name_any() == own_configmap {
                            return None;
                        }
                        let read = published(config_map);
                        if read.is_none() {
                            tracing::debug!(configmap = %config_map.name_any(), "a published state this reconciler cannot read; left out of the overlaps");
                        }
                        read
                    }),
                    Err(error) if forbidden(&error) => {
                        if !told_forbidden {
                            told_forbidden = true;
                            tracing::warn!(error = %error, "the reconciler may not list the published states in its namespace: overlaps with other shards are not detected (deploy/base/rbac.yaml grants list and watch on configmaps)");
                        }
                        continue;
                    }
                    Err(error) => {
                        tracing::debug!(error = %error, "watching the published states");
                        continue;
                    }
                }
            }
            event = lease_events.next() => {
                let Some(event) = event else { return };
                match event {
                    Ok(event) => renewals.take(event, |lease: &Lease| lease.spec.clone()),
                    Err(error) => {
                        if forbidden(&error) && leases_readable {
                            leases_readable = false;
                            tracing::warn!(error = %error, "the reconciler may not list the Leases in its namespace: a stopped shard's published state still counts as an overlap (deploy/base/rbac.yaml grants list and watch on leases)");
                        }
                        continue;
                    }
                }
            }
            _ = ticks.tick() => {}
            changed = namespaces_moved.changed() => if changed.is_err() { return },
        }
        if !others.listed {
            continue;
        }
        let leases = (leases_readable && renewals.listed).then_some(&renewals.current);
        let running = running_scopes(&others.current, leases, Timestamp::now());
        let now_stopped: Vec<String> = others
            .current
            .keys()
            .filter(|name| !running.contains_key(*name))
            .cloned()
            .collect();
        for name in now_stopped.iter().filter(|name| !stopped.contains(name)) {
            let lease = others.current[name]
                .lease_name
                .as_deref()
                .unwrap_or_default();
            tracing::info!(configmap = %name, lease = %lease, "a published state whose Lease no leader renews (its shard stopped, or was removed): not counted as an overlap; delete the ConfigMap if the shard is gone");
        }
        stopped = now_stopped;
        let known = shard.policies.known_namespaces();
        let current = find_overlaps(&shard.scope, &running, &known);
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
    use nauthera_shared::kinds::Kind;

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
            kinds: vec![Kind::OidcClient],
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

    fn lease(holder: Option<&str>, renewed: Option<i64>) -> LeaseSpec {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            renew_time: renewed.map(|at| MicroTime(Timestamp::from_second(at).unwrap())),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_lease_is_renewed_while_a_holder_renews_it_within_twice_its_duration() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert!(lease_renewed(Some(&lease(Some("pod-a"), Some(990))), now));
        assert!(lease_renewed(Some(&lease(Some("pod-a"), Some(970))), now));
        assert!(!lease_renewed(Some(&lease(Some("pod-a"), Some(969))), now));
        // Released at a clean stop, or never renewed, or gone.
        assert!(!lease_renewed(Some(&lease(None, Some(999))), now));
        assert!(!lease_renewed(Some(&lease(Some(""), Some(999))), now));
        assert!(!lease_renewed(Some(&lease(Some("pod-a"), None)), now));
        assert!(!lease_renewed(None, now));
    }

    #[test]
    fn a_state_whose_lease_nobody_renews_is_no_running_shard() {
        let now = Timestamp::from_second(1_000).unwrap();
        let state = |name: &str, lease: Option<&str>| {
            (
                format!("nauthera-reconciler-state-{name}"),
                Published {
                    scope: shard(name, &[], None),
                    lease_name: lease.map(str::to_owned),
                },
            )
        };
        let published = BTreeMap::from([
            state("b", Some("nauthera-reconciler-b")),
            state("gone", Some("nauthera-reconciler-gone")),
            state("stopped", Some("nauthera-reconciler-stopped")),
            state("unelected", None),
        ]);
        let leases = BTreeMap::from([
            (
                "nauthera-reconciler-b".to_owned(),
                lease(Some("pod-b"), Some(995)),
            ),
            (
                "nauthera-reconciler-stopped".to_owned(),
                lease(None, Some(900)),
            ),
        ]);
        let running = running_scopes(&published, Some(&leases), now);
        let names: Vec<&str> = running.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "nauthera-reconciler-state-b",
                "nauthera-reconciler-state-unelected"
            ]
        );
        // Leases that cannot be read say nothing: every state counts.
        assert_eq!(running_scopes(&published, None, now).len(), 4);
    }
}
