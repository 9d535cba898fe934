//! The Kubernetes-side scenarios' faults, acted on the run's own real control plane: its etcd
//! stopped, its API server killed and started again, its etcd compacted under resumed watches,
//! its API server throttling, the leader's path to it cut, its garbage collector acting on the
//! Secrets of manifests deleted with each propagation policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::Config;
use super::churn::{Churn, ChurnCounts};
use super::replicas::Replica;
use super::scenario::{self, Disruption, Scenario};
use super::world::{Kind, Policy, Propagation, World};
use crate::control_plane::real::{OwnedPlane, PlaneProcess};
use crate::e2e::Stack;
use crate::proxy::CuttableProxy;

/// How long the API server may take to be ready again once etcd is continued.
const READY_AGAIN: Duration = Duration::from_secs(120);

/// The flags the scenario's API server runs with (after the harness's own, so they win).
pub fn api_server_flags(scenario: Scenario) -> &'static [&'static str] {
    match scenario {
        // The compactor has no minimum interval (0 turns it off); the watch cache off, watches
        // are served by etcd, so a resumed one meets etcd's compaction as 410 Gone.
        Scenario::Compaction => &["--etcd-compaction-interval=2s", "--watch-cache=false"],
        // The in-flight limits apply only with priority and fairness off; the administrator
        // (system:masters: the churn, the checks) and watches are exempt, the reconciler's
        // ServiceAccount is not.
        Scenario::Throttled => &[
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=2",
            "--max-mutating-requests-inflight=1",
        ],
        _ => &[],
    }
}

/// How often [`tick`] acts (the first time after half of it).
pub fn tick_interval(scenario: Scenario, config: &Config) -> Option<Duration> {
    match scenario {
        // Once, in the middle of the churn.
        Scenario::EtcdStopped => Some(config.fault_phase),
        // At a quarter and at three quarters of the churn.
        Scenario::ApiServerRestarted => Some(config.fault_phase / 2),
        // Longer than two compaction intervals, so that a watch resumed after a break has its
        // revision compacted by the next one.
        Scenario::Compaction => Some(Duration::from_secs(5)),
        // Every combination of deletion and propagation policy about once in 8 s.
        Scenario::GcOrphan => Some(Duration::from_millis(1300)),
        scenario => scenario::tick_interval(scenario, config.lease),
    }
}

/// What the Kubernetes-side faults act on, besides the stack and its replicas.
pub struct Target<'a> {
    pub plane: &'a OwnedPlane,
    /// The compaction scenario's witness watch, broken with the replicas' connections.
    pub witness: Option<&'a Witness>,
    /// How long etcd stays stopped.
    pub outage: Duration,
}

/// One recurring fault; while it acts the churn waits (a person's writes would fail too).
pub async fn tick(
    scenario: Scenario,
    target: &Target<'_>,
    stack: &Stack,
    replicas: &mut [Replica],
    leader: Option<&str>,
    disruption: &mut Disruption,
) -> anyhow::Result<()> {
    let Target {
        plane,
        witness,
        outage,
    } = *target;
    match scenario {
        Scenario::EtcdStopped => {
            let began = Instant::now();
            plane.stop(PlaneProcess::Etcd).await?;
            disruption.etcd_stops += 1;
            tokio::time::sleep(outage).await;
            plane.resume(PlaneProcess::Etcd).await?;
            disruption.etcd_stopped_seconds += began.elapsed().as_secs_f64();
            wait_ready(stack).await?;
        }
        Scenario::ApiServerRestarted => {
            plane.restart(PlaneProcess::ApiServer).await?;
            disruption.api_server_restarts += 1;
        }
        Scenario::Compaction => {
            // A moment's cut; healing closes every connection, so every watch resumes.
            let proxies = replicas
                .iter()
                .map(|r| &r.proxy)
                .chain(witness.map(|w| &w.proxy));
            for proxy in proxies.clone() {
                proxy.cut();
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            for proxy in proxies {
                proxy.heal();
            }
            disruption.watch_breaks += 1;
        }
        scenario => scenario::tick(scenario, stack, replicas, leader, disruption).await?,
    }
    Ok(())
}

/// The combinations `gc-orphan` deletes in turn: each deletion policy with each propagation
/// policy.
const RACES: [(Policy, Propagation); 6] = [
    (Policy::Orphan, Propagation::Background),
    (Policy::Orphan, Propagation::Foreground),
    (Policy::Orphan, Propagation::Orphan),
    (Policy::Delete, Propagation::Background),
    (Policy::Delete, Propagation::Foreground),
    (Policy::Delete, Propagation::Orphan),
];

/// One deletion racing the garbage collector: the oldest live OIDCClient (registered, its secret
/// delivered, most likely) of the next combination's deletion policy, deleted with its
/// propagation policy, and a fresh client of that policy in its place, registered by its turn.
/// With no client of that policy yet, one is created and the combination waits a turn.
pub async fn race_the_collector(
    churn: &mut Churn,
    world: &mut World,
    churned: &mut ChurnCounts,
    disruption: &mut Disruption,
) -> anyhow::Result<()> {
    let d = &disruption.deletions;
    let done = d.background + d.foreground + d.orphan;
    let (policy, propagation) = RACES[done as usize % RACES.len()];
    let victim = world
        .live
        .values()
        .find(|d| d.kind == Kind::OIDCClient && d.policy == policy)
        .map(|d| (d.kind, d.name.clone()));
    if let Some(key) = victim {
        churn
            .delete_propagating(world, &key, propagation, churned)
            .await?;
        let counted = &mut disruption.deletions;
        *match propagation {
            Propagation::Background => &mut counted.background,
            Propagation::Foreground => &mut counted.foreground,
            Propagation::Orphan => &mut counted.orphan,
        } += 1;
    }
    churn
        .create_with(world, Kind::OIDCClient, policy, churned)
        .await
}

/// Requests the API server answered 429, by its own count.
pub async fn throttled(stack: &Stack) -> anyhow::Result<u64> {
    let metrics = stack
        .client()
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await?;
    let count = crate::e2e::metric_sum(&metrics, "apiserver_request_total", &[("code", "429")]);
    Ok(count as u64)
}

async fn wait_ready(stack: &Stack) -> anyhow::Result<()> {
    let client = stack.client();
    let deadline = Instant::now() + READY_AGAIN;
    loop {
        let ready = client
            .request_text(http::Request::get("/readyz").body(Vec::new())?)
            .await;
        if matches!(ready.as_deref(), Ok("ok")) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the API server is not ready {READY_AGAIN:?} after etcd continued");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A watch of the namespace's ConfigMaps (which nothing writes, so its revision only ages, as
/// the replicas' watches of quiet kinds do) through a proxy broken with the replicas', so that it
/// resumes as theirs do: it counts the 410 Gone its resumptions meet, showing that the compaction
/// scenario's fault happened. It stops when dropped.
pub struct Witness {
    proxy: CuttableProxy,
    gone: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Witness {
    pub async fn start(stack: &Stack) -> anyhow::Result<Witness> {
        let proxy = CuttableProxy::start(stack.cluster.api_address()?).await?;
        let kubeconfig = kube::config::Kubeconfig::read_from(stack.cluster.kubeconfig())?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        config.cluster_url = format!("https://{}", proxy.address())
            .parse()
            .context("the proxy's URL")?;
        let client = kube::Client::try_from(config)?;
        let api: Api<ConfigMap> = Api::namespaced(client, stack.namespace());
        let gone = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&gone);
        let task = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                // 410 arrives as an error event of an open watch, or as the answer to the
                // watch request itself.
                let gone = match &event {
                    Err(watcher::Error::WatchError(status)) => status.code == 410,
                    Err(
                        watcher::Error::WatchStartFailed(kube::Error::Api(status))
                        | watcher::Error::WatchFailed(kube::Error::Api(status)),
                    ) => status.code == 410,
                    _ => false,
                };
                if gone {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                if event.is_err() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
        Ok(Witness { proxy, gone, task })
    }

    pub fn gone(&self) -> u64 {
        self.gone.load(Ordering::Relaxed)
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        self.task.abort();
    }
}
