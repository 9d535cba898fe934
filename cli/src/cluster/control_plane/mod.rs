//! Reading what the reconciler publishes: its state ConfigMap, the leader Lease that says how fresh
//! that state is, and its Deployment's readiness. Shards of one cluster each publish a state of
//! their own (`nauthera-reconciler-state-<shard>`, same label) in the same namespace: all of them
//! are read. What of it needs attention, in the words `status` and `diagnose` both show, is
//! [`report`].

#[cfg(test)]
pub mod fixtures;
pub mod report;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use nauthera_shared::control_plane::{ControlPlaneState, STATE_CONFIGMAP, STATE_KEY, STATE_LABEL};
use serde::Serialize;

use crate::cli::kinds::Kind;
use crate::cluster::Cluster;
use crate::error::{api_code, describe_kube_error};
use crate::output::timefmt::{seconds_between, short_duration};

/// The reconciler's Deployment and ServiceAccount name in the standard install.
pub const RECONCILER_NAME: &str = "nauthera-reconciler";

/// Ready and desired replicas of the reconciler's Deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replicas {
    pub desired: i32,
    pub ready: i32,
}

/// Everything known about the control plane without server credentials: the reconciler's state
/// (the one without a shard name, else the first shard's), and the other shards publishing in
/// the same namespace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ControlPlaneFacts {
    pub namespace: String,
    pub state: Option<ControlPlaneState>,
    /// Why the state could not be read, when it could not.
    pub state_problem: Option<String>,
    pub replicas: Option<Replicas>,
    pub replicas_problem: Option<String>,
    /// The leader Lease the state names.
    pub lease: LeaseRead,
    /// The other shards' states in the same namespace, in their ConfigMaps' name order.
    pub shards: Vec<ControlPlaneFacts>,
}

/// A shard's Deployment in the conventional install: `nauthera-reconciler-<shard>`.
pub fn shard_deployment_name(shard: &str) -> String {
    format!("{RECONCILER_NAME}-{shard}")
}

/// The leader Lease as the plugin found it.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LeaseRead {
    /// Not read: no state, or a state that names no Lease.
    #[default]
    NotRead,
    Found(LeaseFacts),
    NotFound,
    /// The user may not read it.
    Forbidden(String),
    /// Reading it failed otherwise.
    Failed(String),
}

/// What the plugin reads in the Lease.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeaseFacts {
    /// `spec.holderIdentity`; `None` (or empty) when released.
    pub holder: Option<String>,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub duration_seconds: Option<i32>,
}

impl LeaseFacts {
    pub fn of(lease: &Lease) -> LeaseFacts {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaseFacts {
            holder: spec.holder_identity.filter(|holder| !holder.is_empty()),
            acquire_time: spec.acquire_time.map(|time| time.0),
            renew_time: spec.renew_time.map(|time| time.0),
            duration_seconds: spec.lease_duration_seconds,
        }
    }
}

/// A Lease renewed longer ago than its duration plus this has no leader renewing it (the margin
/// absorbs clock skew between the cluster and the plugin's machine).
pub const LEASE_MARGIN_SECONDS: i64 = 30;
/// The reconciler's default lease duration, for a Lease that does not say its own.
pub const DEFAULT_LEASE_SECONDS: i64 = 15;

/// How fresh the published state is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum Freshness {
    /// The state's leader holds the Lease and renewed it recently: nothing the state shows has
    /// changed as of that renewal.
    #[serde(rename_all = "camelCase")]
    Current { as_of: Timestamp },
    /// No leader is publishing it; `as_of` is the last time it is known to have been current.
    #[serde(rename_all = "camelCase")]
    Stale {
        as_of: Option<Timestamp>,
        why: String,
    },
    /// Cannot tell (the Lease cannot be read, or the state names none).
    Unknown { why: String },
}

impl Freshness {
    /// The time as of which the state is known to hold.
    pub fn as_of(&self) -> Option<Timestamp> {
        match self {
            Freshness::Current { as_of } => Some(*as_of),
            Freshness::Stale { as_of, .. } => *as_of,
            Freshness::Unknown { .. } => None,
        }
    }

    /// The finding, when no leader is publishing the state.
    pub fn finding(&self, now: Timestamp) -> Option<String> {
        let Freshness::Stale { as_of, why } = self else {
            return None;
        };
        Some(match as_of {
            Some(as_of) => format!(
                "the published state is {} old: no leader is publishing it ({why})",
                short_duration(seconds_between(*as_of, now))
            ),
            None => format!("no leader is publishing the state ({why})"),
        })
    }
}

/// How fresh `state` is, from the Lease it names (`lease`, read in `namespace`) as of `now`.
pub fn freshness(
    state: &ControlPlaneState,
    namespace: &str,
    lease: &LeaseRead,
    now: Timestamp,
) -> Freshness {
    let Some(name) = state.lease_name.as_deref().filter(|name| !name.is_empty()) else {
        return Freshness::Unknown {
            why: "the state names no Lease (the reconciler runs without leader election, or is \
                  older than this plugin), so how fresh it is is unknown"
                .to_owned(),
        };
    };
    let lease_ref = format!("Lease {namespace}/{name}");
    let facts = match lease {
        LeaseRead::Found(facts) => facts,
        LeaseRead::NotRead => {
            return Freshness::Unknown {
                why: format!("{lease_ref} was not read"),
            };
        }
        LeaseRead::Forbidden(detail) => {
            return Freshness::Unknown {
                why: format!(
                    "you may not read {lease_ref} ({detail}), so how fresh the state is is \
                     unknown; ask for get on leases in {namespace}"
                ),
            };
        }
        LeaseRead::Failed(detail) => {
            return Freshness::Unknown {
                why: format!(
                    "cannot read {lease_ref} ({detail}), so how fresh the state is is unknown"
                ),
            };
        }
        LeaseRead::NotFound => {
            return Freshness::Stale {
                as_of: state.changed_at,
                why: format!("{lease_ref} does not exist"),
            };
        }
    };
    let later = |time: Option<Timestamp>| match (state.changed_at, time) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let held_for = facts
        .duration_seconds
        .filter(|seconds| *seconds > 0)
        .map_or(DEFAULT_LEASE_SECONDS, i64::from);
    let recent = |time: Timestamp| seconds_between(time, now) <= held_for + LEASE_MARGIN_SECONDS;
    let renewed = facts.renew_time.or(facts.acquire_time);
    match facts.holder.as_deref() {
        Some(holder) if holder == state.leader => match renewed {
            Some(renewed) if recent(renewed) => Freshness::Current {
                as_of: later(Some(renewed)).unwrap_or(renewed),
            },
            _ => Freshness::Stale {
                as_of: later(renewed),
                why: format!(
                    "its leader {holder} last renewed {lease_ref} {}, and it holds for {held_for}s",
                    renewed.map_or_else(
                        || "never".to_owned(),
                        |at| format!("{} ago", short_duration(seconds_between(at, now)))
                    )
                ),
            },
        },
        // Released: the last leader stopped; its state was current until then.
        None => Freshness::Stale {
            as_of: later(renewed),
            why: format!(
                "{lease_ref} has no holder{}",
                renewed
                    .map(|at| format!(" since {} ago", short_duration(seconds_between(at, now))))
                    .unwrap_or_default()
            ),
        },
        // Another replica took over; it publishes its own state as it starts leading.
        Some(holder) => {
            let acquired = facts.acquire_time.or(facts.renew_time);
            match acquired {
                Some(acquired) if recent(acquired) => Freshness::Unknown {
                    why: format!(
                        "{holder} took {lease_ref} over from {} {} ago and has not published its \
                         state yet",
                        state.leader,
                        short_duration(seconds_between(acquired, now))
                    ),
                },
                _ => Freshness::Stale {
                    as_of: later(acquired),
                    why: format!(
                        "{lease_ref} is held by {holder}, which has not published a state; this \
                         one is {}'s",
                        state.leader
                    ),
                },
            }
        }
    }
}

impl ControlPlaneFacts {
    /// The published state of the reconciler that reconciles a resource of this kind in this
    /// namespace: the one whose manager wrote its status (`status_manager`), else the one whose
    /// scope lists it (a selector's namespaces are not known here), else the main state.
    pub fn state_for(
        &self,
        kind: Kind,
        namespace: &str,
        status_manager: Option<&str>,
    ) -> Option<&ControlPlaneState> {
        let states = || {
            std::iter::once(self)
                .chain(&self.shards)
                .filter_map(|facts| facts.state.as_ref())
        };
        status_manager
            .and_then(|manager| states().find(|state| state.manager == manager))
            .or_else(|| {
                states().find(|state| state.scope_or_everything().covers(kind, namespace, None))
            })
            .or(self.state.as_ref())
    }

    /// Reads the states in `namespace` (every ConfigMap with the state's label, or the one
    /// [`STATE_CONFIGMAP`] when the user may not list them); when none is there, looks for the
    /// state's label in every namespace (a reconciler installed elsewhere) and takes that
    /// namespace if exactly one holds states.
    pub async fn gather(cluster: &Cluster, namespace: &str) -> ControlPlaneFacts {
        let mut namespace = namespace.to_owned();
        let mut found = states_in(cluster, &namespace).await;
        if let Ok(states) = &found
            && states.is_empty()
            && let Some((elsewhere, states)) = find_by_label(cluster).await
        {
            namespace = elsewhere;
            found = Ok(states);
        }
        let namespace = namespace.as_str();
        let mut states = match found {
            Ok(states) => states,
            Err(error) => {
                let (detail, hint) = describe_kube_error(&error);
                let mut facts = ControlPlaneFacts {
                    namespace: namespace.to_owned(),
                    state_problem: Some(format!(
                        "cannot read ConfigMap {STATE_CONFIGMAP} in namespace {namespace}: \
                         {detail}; {hint}"
                    )),
                    ..ControlPlaneFacts::default()
                };
                read_deployment(cluster, &mut facts, None).await;
                return facts;
            }
        };
        if states.is_empty() {
            let mut facts = ControlPlaneFacts {
                namespace: namespace.to_owned(),
                state_problem: Some(format!(
                    "ConfigMap {STATE_CONFIGMAP} not found in namespace {namespace}: the \
                     reconciler has no leader yet, runs elsewhere (--reconciler-namespace), or is \
                     not installed"
                )),
                ..ControlPlaneFacts::default()
            };
            read_deployment(cluster, &mut facts, None).await;
            return facts;
        }
        // The reconciler without a shard name first, then the shards by name.
        states.sort_by_key(|config_map| {
            let name = config_map.metadata.name.clone().unwrap_or_default();
            (name != STATE_CONFIGMAP, name)
        });
        let mut all = Vec::with_capacity(states.len());
        for config_map in &states {
            all.push(facts_of(cluster, namespace, config_map).await);
        }
        let mut main = all.remove(0);
        main.shards = all;
        main
    }
}

/// The facts of one published state: the state, its Lease and its Deployment.
async fn facts_of(cluster: &Cluster, namespace: &str, config_map: &ConfigMap) -> ControlPlaneFacts {
    let mut facts = ControlPlaneFacts {
        namespace: namespace.to_owned(),
        ..ControlPlaneFacts::default()
    };
    match parse_state(config_map) {
        Ok(state) => facts.state = Some(state),
        Err(problem) => facts.state_problem = Some(problem),
    }
    if let Some(name) = facts
        .state
        .as_ref()
        .and_then(|state| state.lease_name.as_deref())
        .filter(|name| !name.is_empty())
    {
        facts.lease = match cluster.namespaced::<Lease>(namespace).get_opt(name).await {
            Ok(Some(lease)) => LeaseRead::Found(LeaseFacts::of(&lease)),
            Ok(None) => LeaseRead::NotFound,
            Err(error) => {
                let (detail, _) = describe_kube_error(&error);
                if api_code(&error) == Some(403) {
                    LeaseRead::Forbidden(detail)
                } else {
                    LeaseRead::Failed(detail)
                }
            }
        };
    }
    let shard = facts
        .state
        .as_ref()
        .and_then(|state| state.scope.as_ref())
        .and_then(|scope| scope.shard.clone());
    read_deployment(cluster, &mut facts, shard.as_deref()).await;
    facts
}

/// The reconciler's Deployment: a shard's own (`nauthera-reconciler-<shard>`) when there is one,
/// else the standard install's.
async fn read_deployment(cluster: &Cluster, facts: &mut ControlPlaneFacts, shard: Option<&str>) {
    let namespace = facts.namespace.clone();
    let api = cluster.namespaced::<Deployment>(&namespace);
    let mut names = Vec::new();
    if let Some(shard) = shard {
        names.push(shard_deployment_name(shard));
    }
    names.push(RECONCILER_NAME.to_owned());
    for name in &names {
        match api.get_opt(name).await {
            Ok(Some(deployment)) => {
                facts.replicas = Some(replicas_of(&deployment));
                return;
            }
            Ok(None) => {}
            Err(error) => {
                let (detail, _) = describe_kube_error(&error);
                facts.replicas_problem = Some(format!(
                    "cannot read Deployment {name} in namespace {namespace}: {detail}"
                ));
                return;
            }
        }
    }
    facts.replicas_problem = Some(format!(
        "Deployment {} not found in namespace {namespace}",
        names.join(" or ")
    ));
}

/// The state ConfigMaps in a namespace: every one with the state's label, or (when the user may
/// not list ConfigMaps) the standard one alone.
async fn states_in(cluster: &Cluster, namespace: &str) -> Result<Vec<ConfigMap>, kube::Error> {
    let (key, value) = STATE_LABEL;
    let params = ListParams::default().labels(&format!("{key}={value}"));
    let api = cluster.namespaced::<ConfigMap>(namespace);
    match api.list(&params).await {
        Ok(list) => Ok(list.items),
        Err(_) => Ok(api.get_opt(STATE_CONFIGMAP).await?.into_iter().collect()),
    }
}

/// The state ConfigMaps of the one namespace in the cluster that holds ConfigMaps with the
/// state's label, if the user may list ConfigMaps everywhere and exactly one namespace does.
async fn find_by_label(cluster: &Cluster) -> Option<(String, Vec<ConfigMap>)> {
    let (key, value) = STATE_LABEL;
    let params = ListParams::default().labels(&format!("{key}={value}"));
    let api: Api<ConfigMap> = Api::all(cluster.client.clone());
    let items = api.list(&params).await.ok()?.items;
    let namespace = items.first()?.metadata.namespace.clone()?;
    items
        .iter()
        .all(|item| item.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .then_some((namespace, items))
}

/// The published state out of the ConfigMap: the JSON document under `state.json`.
pub fn parse_state(config_map: &ConfigMap) -> Result<ControlPlaneState, String> {
    let name = config_map
        .metadata
        .name
        .as_deref()
        .unwrap_or(STATE_CONFIGMAP);
    let text = config_map
        .data
        .as_ref()
        .and_then(|data| data.get(STATE_KEY));
    match text {
        Some(text) => serde_json::from_str(text).map_err(|error| {
            format!(
                "ConfigMap {name} key {STATE_KEY} is not the state this plugin reads ({error}); \
                 is the plugin older than the reconciler?"
            )
        }),
        None => Err(format!(
            "ConfigMap {name} has no key {STATE_KEY}; is the plugin older than the reconciler?"
        )),
    }
}

pub fn replicas_of(deployment: &Deployment) -> Replicas {
    Replicas {
        desired: deployment
            .spec
            .as_ref()
            .and_then(|spec| spec.replicas)
            .unwrap_or(1),
        ready: deployment
            .status
            .as_ref()
            .and_then(|status| status.ready_replicas)
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nauthera_shared::catalog::Reason;

    fn config_map(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_contract_document_is_read() {
        let state = ControlPlaneState {
            leader: "pod-0".into(),
            probe_reason: Some(Reason::Unreachable),
            ..ControlPlaneState::default()
        };
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(parse_state(&config_map(&[(STATE_KEY, &json)])), Ok(state));
        assert!(parse_state(&config_map(&[(STATE_KEY, "{")])).is_err());
        assert!(parse_state(&config_map(&[])).is_err());
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    fn published(changed: i64) -> ControlPlaneState {
        ControlPlaneState {
            leader: "pod-a".into(),
            lease_name: Some("nauthera-reconciler".into()),
            tls_secret: None,
            changed_at: Some(at(changed)),
            ..ControlPlaneState::default()
        }
    }

    fn held(holder: Option<&str>, acquired: i64, renewed: i64) -> LeaseRead {
        LeaseRead::Found(LeaseFacts {
            holder: holder.map(str::to_owned),
            acquire_time: Some(at(acquired)),
            renew_time: Some(at(renewed)),
            duration_seconds: Some(15),
        })
    }

    fn fresh(state: &ControlPlaneState, lease: &LeaseRead, now: i64) -> Freshness {
        freshness(state, "nauthera-system", lease, at(now))
    }

    #[test]
    fn the_state_is_current_as_of_its_leaders_last_renewal() {
        // Written a day ago, renewed two seconds ago by the same leader: current as of then.
        let state = published(-86_400);
        let lease = held(Some("pod-a"), -90_000, -2);
        assert_eq!(
            fresh(&state, &lease, 0),
            Freshness::Current { as_of: at(-2) }
        );
        assert_eq!(fresh(&state, &lease, 0).finding(at(0)), None);
        // Within the lease duration plus the margin, still current.
        assert_eq!(
            fresh(&state, &held(Some("pod-a"), -90_000, -45), 0),
            Freshness::Current { as_of: at(-45) }
        );
    }

    #[test]
    fn a_lease_its_leader_stopped_renewing_is_stale() {
        let state = published(-86_400);
        let stale = fresh(&state, &held(Some("pod-a"), -90_000, -46), 0);
        assert_eq!(stale.as_of(), Some(at(-46)));
        assert_eq!(
            stale.finding(at(0)).unwrap(),
            "the published state is 46s old: no leader is publishing it (its leader pod-a last \
             renewed Lease nauthera-system/nauthera-reconciler 46s ago, and it holds for 15s)"
        );
    }

    #[test]
    fn a_released_or_missing_lease_means_nobody_publishes() {
        let state = published(-86_400);
        let released = fresh(&state, &held(None, -90_000, -600), 0);
        assert_eq!(
            released.finding(at(0)).unwrap(),
            "the published state is 10m old: no leader is publishing it (Lease \
             nauthera-system/nauthera-reconciler has no holder since 10m ago)"
        );
        let missing = fresh(&state, &LeaseRead::NotFound, 0);
        assert_eq!(missing.as_of(), Some(at(-86_400)));
        assert!(
            missing
                .finding(at(0))
                .unwrap()
                .starts_with("the published state is 24h old: no leader is publishing it")
        );
    }

    #[test]
    fn another_holder_gets_a_lease_duration_to_publish_its_own_state() {
        let state = published(-86_400);
        let moving = fresh(&state, &held(Some("pod-b"), -5, -1), 0);
        assert!(
            matches!(&moving, Freshness::Unknown { why } if why.contains("pod-b took")),
            "{moving:?}"
        );
        assert_eq!(moving.finding(at(0)), None);
        let stuck = fresh(&state, &held(Some("pod-b"), -300, -1), 0);
        assert_eq!(
            stuck.as_of(),
            Some(at(-300)),
            "current until pod-b took over"
        );
        assert_eq!(
            stuck.finding(at(0)).unwrap(),
            "the published state is 5m old: no leader is publishing it (Lease \
             nauthera-system/nauthera-reconciler is held by pod-b, which has not published a \
             state; this one is pod-a's)"
        );
    }

    #[test]
    fn an_unreadable_or_unnamed_lease_leaves_freshness_unknown() {
        let state = published(-86_400);
        let forbidden = fresh(&state, &LeaseRead::Forbidden("forbidden (403)".into()), 0);
        assert!(
            matches!(&forbidden, Freshness::Unknown { why } if why.starts_with(
                "you may not read Lease nauthera-system/nauthera-reconciler (forbidden (403))"
            )),
            "{forbidden:?}"
        );
        assert_eq!(forbidden.finding(at(0)), None);
        let unnamed = ControlPlaneState {
            lease_name: None,
            ..published(-86_400)
        };
        assert!(matches!(
            fresh(&unnamed, &LeaseRead::NotRead, 0),
            Freshness::Unknown { .. }
        ));
    }

    #[test]
    fn a_resource_is_checked_against_the_shard_that_lists_its_namespace() {
        use nauthera_shared::topology::Scope;
        let shard = |name: &str, namespaces: &[&str]| ControlPlaneFacts {
            state: Some(ControlPlaneState {
                leader: format!("{name}-0"),
                manager: format!("nauthera-reconciler-{name}"),
                scope: Some(Scope {
                    shard: Some(name.into()),
                    namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
                    ..Scope::everything()
                }),
                ..ControlPlaneState::default()
            }),
            ..ControlPlaneFacts::default()
        };
        let facts = ControlPlaneFacts {
            shards: vec![shard("b", &["team-b"])],
            ..shard("a", &["team-a"])
        };
        let leader = |kind, namespace| {
            facts
                .state_for(kind, namespace, None)
                .map(|state| state.leader.clone())
        };
        assert_eq!(leader(Kind::OidcClient, "team-b").as_deref(), Some("b-0"));
        assert_eq!(leader(Kind::Branding, "team-a").as_deref(), Some("a-0"));
        assert_eq!(
            leader(Kind::OidcClient, "team-z").as_deref(),
            Some("a-0"),
            "no shard lists it: the main state"
        );
        // A shard by selector: the manager that writes the resource's status says whose it is.
        let by_manager = facts
            .state_for(Kind::OidcClient, "team-z", Some("nauthera-reconciler-b"))
            .map(|state| state.leader.as_str());
        assert_eq!(by_manager, Some("b-0"));
        let unknown = facts
            .state_for(Kind::OidcClient, "team-b", Some("someone-else"))
            .map(|state| state.leader.as_str());
        assert_eq!(
            unknown,
            Some("b-0"),
            "an unknown manager: the scopes decide"
        );
    }
}
