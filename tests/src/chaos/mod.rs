//! The reliability suite's chaos program (`nauthera-chaos`, docs/reliability.md): a churn of
//! creates, updates and deletes across the four kinds while a scenario breaks the server, the
//! replicas, their network or their certificates; then the faults stop and the invariants are
//! checked: every resource settled with no manual restore, the server holding exactly what the
//! manifests declare, every Secret holding the value in force, only the leader writing, no write
//! in the steady state, and no secret in anything a person can read.

pub mod churn;
pub mod invariants;
pub mod kubernetes;
pub mod leaks;
pub mod observe;
mod random;
pub mod replicas;
pub mod report;
mod run;
pub mod scenario;
pub mod snapshot;
pub mod world;

use std::time::Duration;

pub use report::{Report, ScenarioReport};
pub use run::run;
pub use scenario::Scenario;

/// How big and how long a run is.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many manifests the churn keeps around (of every kind).
    pub resources: usize,
    /// Churn operations per second while the faults act.
    pub churn_per_second: f64,
    /// How long each scenario's faults act.
    pub fault_phase: Duration,
    /// How long the run watches for writes once everything converged.
    pub steady_window: Duration,
    /// How long convergence may take after the faults stop before the scenario fails.
    pub converge_timeout: Duration,
    pub scenarios: Vec<Scenario>,
    pub seed: u64,
    /// The replicas' Lease duration and renew deadline.
    pub lease: Duration,
    pub renew_deadline: Duration,
    /// The replicas' longest wait before retrying a failed reconcile: convergence after the
    /// faults stop takes up to this long for a resource that failed many times in a row.
    pub retry_backoff_max: Duration,
    /// How long the `etcd-stopped` scenario keeps etcd stopped.
    pub outage: Duration,
}

impl Config {
    /// The configuration `cargo test` runs: every scenario, small and short.
    pub fn bounded() -> Config {
        Config {
            resources: 16,
            churn_per_second: 4.0,
            fault_phase: Duration::from_secs(7),
            steady_window: Duration::from_secs(3),
            converge_timeout: Duration::from_secs(90),
            scenarios: Scenario::ALL.to_vec(),
            seed: 1,
            lease: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(2),
            retry_backoff_max: Duration::from_secs(4),
            outage: Duration::from_secs(10),
        }
    }

    /// The configuration `cargo test` runs on the Kubernetes side: every Kubernetes-side
    /// scenario, each on a control plane of its own, smaller and shorter still (etcd stopped for
    /// 10 s, where the documented run stops it for 30 s).
    pub fn bounded_kubernetes() -> Config {
        Config {
            resources: 12,
            fault_phase: Duration::from_secs(10),
            scenarios: Scenario::KUBERNETES.to_vec(),
            ..Config::bounded()
        }
    }
}
