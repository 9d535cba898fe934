//! The scenarios: what each one does to the server, the replicas or their certificates while the
//! churn runs, and how it ends (the faults stop; the run then measures how long the product takes
//! to converge).

use std::time::Duration;

use nauthera_fake_server::{ClientCertOptions, Fault, FaultCode, Method, TestCa};
use serde::Serialize;

use super::replicas::{Replica, certificate_identity};
use crate::e2e::Stack;

/// One way of breaking things.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    #[value(name = "faults-20")]
    #[serde(rename = "faults-20")]
    /// Every AdminService method fails 20 % of its calls (codes in turn; open change streams
    /// also break mid-stream as often).
    Faults20,
    /// The same at 50 %.
    #[value(name = "faults-50")]
    #[serde(rename = "faults-50")]
    Faults50,
    /// 30 % of the writes of every kind take effect and then lose their answer.
    LostAnswers,
    /// The server stops answering (connections stay open) for 3 s in every 5 s.
    HungServer,
    /// `kill -9` of the leader every few seconds; it starts again at once, like a crashing pod.
    KillLeader,
    /// The leader is cut off from the Kubernetes API for longer than its Lease, again and again.
    LeaderPartition,
    /// Both replicas' client certificates are renewed in place every 2 s.
    CertificateRotated,
    /// Both replicas' client certificates are replaced by expired ones until the faults stop.
    CertificateExpired,
    /// Both replicas' client certificates are replaced by ones from a CA the server does not
    /// trust until the faults stop.
    CertificateForeignCa,
    /// Kubernetes side, on a real control plane of its own: etcd stopped (`SIGSTOP`) for the
    /// run's outage in the middle of the churn, then continued.
    EtcdStopped,
    /// kube-apiserver killed and started again (same flags, port and etcd) twice during the
    /// churn: every watch breaks.
    ApiServerRestarted,
    /// etcd compacted by the API server every 2 s, with its watch cache off, and the replicas'
    /// connections broken every few seconds: their watches resume from compacted revisions and
    /// meet 410 Gone.
    Compaction,
    /// The API server admits one mutating and two other requests at a time (priority and
    /// fairness off): the reconciler meets 429 with Retry-After.
    Throttled,
    /// The leader's path to the real API server (not to the server) cut for longer than its
    /// Lease, again and again: the other replica takes the Lease over.
    ApiCut,
    /// OIDCClients of both deletion policies, with generated Secrets, deleted with each of
    /// Kubernetes' propagation policies in turn (`--cascade=background|foreground|orphan`), so
    /// that kube-controller-manager's garbage collector acts on their Secrets while the
    /// reconciler carries out the deletion.
    GcOrphan,
}

/// Where a scenario runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// The server side, on the Kubernetes API emulator (one for all of them).
    Server,
    /// The Kubernetes side, on a real control plane of its own, started with the scenario's
    /// API-server flags.
    Kubernetes,
}

impl Scenario {
    /// The server-side scenarios, the default run.
    pub const ALL: [Scenario; 9] = [
        Scenario::Faults20,
        Scenario::Faults50,
        Scenario::LostAnswers,
        Scenario::HungServer,
        Scenario::KillLeader,
        Scenario::LeaderPartition,
        Scenario::CertificateRotated,
        Scenario::CertificateExpired,
        Scenario::CertificateForeignCa,
    ];

    /// The Kubernetes-side scenarios, each on a real control plane of its own.
    pub const KUBERNETES: [Scenario; 6] = [
        Scenario::EtcdStopped,
        Scenario::ApiServerRestarted,
        Scenario::Compaction,
        Scenario::Throttled,
        Scenario::ApiCut,
        Scenario::GcOrphan,
    ];

    pub fn side(self) -> Side {
        if Scenario::KUBERNETES.contains(&self) {
            Side::Kubernetes
        } else {
            Side::Server
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Faults20 => "faults-20",
            Scenario::Faults50 => "faults-50",
            Scenario::LostAnswers => "lost-answers",
            Scenario::HungServer => "hung-server",
            Scenario::KillLeader => "kill-leader",
            Scenario::LeaderPartition => "leader-partition",
            Scenario::CertificateRotated => "certificate-rotated",
            Scenario::CertificateExpired => "certificate-expired",
            Scenario::CertificateForeignCa => "certificate-foreign-ca",
            Scenario::EtcdStopped => "etcd-stopped",
            Scenario::ApiServerRestarted => "api-server-restarted",
            Scenario::Compaction => "compaction",
            Scenario::Throttled => "throttled",
            Scenario::ApiCut => "api-cut",
            Scenario::GcOrphan => "gc-orphan",
        }
    }
}

/// What a scenario did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Disruption {
    /// Faults the server answered instead of (or after) a call, or mid-stream, in all.
    pub faults_answered: u64,
    pub hangs: u64,
    pub kills: u64,
    pub partitions: u64,
    pub certificates_replaced: u64,
    /// Kubernetes side: times etcd was stopped, and for how long in all.
    pub etcd_stops: u64,
    pub etcd_stopped_seconds: f64,
    pub api_server_restarts: u64,
    /// Times every replica's connections to the API server were broken.
    pub watch_breaks: u64,
    /// 410 Gone met by a watch of the namespace's ConfigMaps (which nothing writes, so its
    /// revision only ages) resuming after each break.
    pub gone: u64,
    /// Times the Lease changed hands from the faults' start until convergence.
    pub lease_handovers: u64,
    /// Requests the API server answered 429 (its `apiserver_request_total{code="429"}`).
    pub throttled: u64,
    /// Manifests deleted with each propagation policy while the garbage collector raced the
    /// reconciler (`gc-orphan`).
    pub deletions: Propagations,
}

/// Deletions by Kubernetes propagation policy.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Propagations {
    pub background: u64,
    pub foreground: u64,
    pub orphan: u64,
}

const WRITES: [Method; 8] = [
    Method::ApplyClient,
    Method::DeleteClient,
    Method::ApplyBranding,
    Method::DeleteBranding,
    Method::ApplyIdentityProvider,
    Method::DeleteIdentityProvider,
    Method::ApplyOrganization,
    Method::DeleteOrganization,
];

const CODES: [FaultCode; 5] = [
    FaultCode::Unavailable,
    FaultCode::Aborted,
    FaultCode::Internal,
    FaultCode::Unknown,
    FaultCode::ResourceExhausted,
];

/// Sets the scenario's standing faults (those that act by themselves until cleared).
pub fn begin(
    scenario: Scenario,
    stack: &Stack,
    replicas: &mut [Replica],
    disruption: &mut Disruption,
) -> anyhow::Result<()> {
    match scenario {
        Scenario::Faults20 | Scenario::Faults50 => {
            let probability = if scenario == Scenario::Faults20 {
                0.2
            } else {
                0.5
            };
            // Every method's own fault; opening a change stream falls to this one.
            stack.server.inject_fault(
                None,
                Fault::with_probability(FaultCode::Unavailable, probability),
            );
            for (index, method) in Method::ALL.into_iter().enumerate() {
                let fault = if method == Method::WatchChanges {
                    Fault::breaking_streams(CODES[index % CODES.len()], probability)
                } else {
                    Fault::with_probability(CODES[index % CODES.len()], probability)
                };
                stack.server.inject_fault(Some(method), fault);
            }
        }
        Scenario::LostAnswers => {
            for method in WRITES {
                stack.server.inject_fault(
                    Some(method),
                    Fault {
                        probability: Some(0.3),
                        ..Fault::losing_answers(FaultCode::Unavailable, u32::MAX)
                    },
                );
            }
        }
        Scenario::CertificateExpired | Scenario::CertificateForeignCa => {
            let foreign = TestCa::new("somebody else's CA")?;
            for replica in replicas.iter_mut() {
                let identity = certificate_identity(&replica.identity);
                let certificate = if scenario == Scenario::CertificateExpired {
                    stack.pki.ca.issue_expired_client(&identity)?
                } else {
                    foreign.issue_client(&ClientCertOptions::identity(&identity))?
                };
                replica.install_certificate(&certificate)?;
                disruption.certificates_replaced += 1;
            }
        }
        Scenario::HungServer
        | Scenario::KillLeader
        | Scenario::LeaderPartition
        | Scenario::CertificateRotated
        | Scenario::EtcdStopped
        | Scenario::ApiServerRestarted
        | Scenario::Compaction
        | Scenario::Throttled
        | Scenario::ApiCut
        | Scenario::GcOrphan => {}
    }
    Ok(())
}

/// How often [`tick`] acts.
pub fn tick_interval(scenario: Scenario, lease: Duration) -> Option<Duration> {
    match scenario {
        Scenario::HungServer => Some(Duration::from_secs(5)),
        Scenario::KillLeader => Some(Duration::from_secs(3)),
        // Cut for longer than the Lease, then healed for as long.
        Scenario::LeaderPartition | Scenario::ApiCut => Some(lease + Duration::from_secs(2)),
        Scenario::CertificateRotated => Some(Duration::from_secs(2)),
        _ => None,
    }
}

/// One recurring action of the scenario.
pub async fn tick(
    scenario: Scenario,
    stack: &Stack,
    replicas: &mut [Replica],
    leader: Option<&str>,
    disruption: &mut Disruption,
) -> anyhow::Result<()> {
    match scenario {
        Scenario::HungServer => {
            stack.server.hang_for(Duration::from_secs(3));
            disruption.hangs += 1;
        }
        Scenario::KillLeader => {
            if let Some(replica) = replicas
                .iter_mut()
                .find(|r| Some(r.identity.as_str()) == leader)
            {
                replica.kill().await;
                disruption.kills += 1;
                replica.start(stack).await?;
            }
        }
        Scenario::LeaderPartition | Scenario::ApiCut => {
            let any_cut = replicas.iter().any(|r| r.proxy.is_cut());
            if any_cut {
                for replica in replicas.iter() {
                    replica.proxy.heal();
                }
            } else if let Some(replica) = replicas
                .iter()
                .find(|r| Some(r.identity.as_str()) == leader)
            {
                replica.proxy.cut();
                disruption.partitions += 1;
            }
        }
        Scenario::CertificateRotated => {
            for replica in replicas.iter_mut() {
                let renewed = stack.pki.ca.issue_client(&ClientCertOptions::identity(
                    &certificate_identity(&replica.identity),
                ))?;
                replica.install_certificate(&renewed)?;
                disruption.certificates_replaced += 1;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Stops every fault: the server answers again, the replicas reach the API, and their
/// certificates are good.
pub fn end(scenario: Scenario, stack: &Stack, replicas: &mut [Replica]) -> anyhow::Result<()> {
    stack.server.clear_faults();
    stack.server.end_hang();
    for replica in replicas.iter_mut() {
        replica.proxy.heal();
        if matches!(
            scenario,
            Scenario::CertificateExpired | Scenario::CertificateForeignCa
        ) {
            let good =
                stack
                    .pki
                    .ca
                    .issue_client(&ClientCertOptions::identity(&certificate_identity(
                        &replica.identity,
                    )))?;
            replica.install_certificate(&good)?;
        }
    }
    Ok(())
}
