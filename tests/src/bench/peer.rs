//! The controller-runtime peer (`bench/peer/`, Go): the same registrations done by the stack a
//! user would otherwise run, measured the way the reconciler is (`nauthera-bench --peer`): cold
//! start wall and CPU, peak and idle resident set, reconciles per object (controller-runtime's own
//! `controller_runtime_reconcile_total`), steady-state calls and drift latency.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use comfy_table::Table;
use serde::{Deserialize, Serialize};

use super::drift;
use super::measure::{self, Calls, RequestCounter, difference, resident};
use super::observer::Observer;
use super::report::{Quantiles, SizeReport, ratio};
use super::run::BenchStack;
use super::workload::{ClientItem, Workload, kinds_of};
use crate::e2e::Stack;
use crate::process::{ChildProcess, http_get};

/// How long the peer has to start listening (it compiles the contract first).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The repository root.
fn root() -> PathBuf {
    crate::gitops::root()
}

/// The peer's binary, built on first use by `bench/peer/build.sh`; `None` when Go is absent.
pub fn binary() -> anyhow::Result<Option<&'static Path>> {
    static BUILT: OnceLock<Result<Option<PathBuf>, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let output = Command::new("bash")
            .arg(root().join("bench/peer/build.sh"))
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("running bench/peer/build.sh: {e}"))?;
        match output.status.code() {
            Some(0) => Ok(Some(
                PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join("bin/peer"),
            )),
            // Go is not installed: said on stderr by the script.
            Some(3) => Ok(None),
            _ => Err(format!("bench/peer/build.sh failed ({})", output.status)),
        }
    });
    match built {
        Ok(path) => Ok(path.as_deref()),
        Err(error) => bail!("{error}"),
    }
}

/// A running peer.
pub struct Peer {
    process: ChildProcess,
    metrics: String,
}

impl Peer {
    /// Starts the peer against the stack's server and cluster, with the reconciler's certificate
    /// and ServiceAccount, reconciling `namespaces` (all when empty) at `concurrency`.
    pub async fn start(
        program: &Path,
        stack: &Stack,
        concurrency: usize,
        namespaces: &[String],
    ) -> anyhow::Result<Peer> {
        let mut args = vec![
            format!("--proto-root={}", root().join("proto").display()),
            format!("--server-address={}", stack.server.address()),
            format!("--server-name={}", stack.pki.server_name),
            format!("--tls-dir={}", stack.tls_dir.display()),
            format!("--concurrency={concurrency}"),
            format!("--lease-namespace={}", stack.reconciler_namespace()),
            // The reconciler's ServiceAccount, which the peer runs as, may hold this Lease only.
            "--lease-name=nauthera-reconciler".to_owned(),
            format!("--namespaces={}", namespaces.join(",")),
        ];
        if stack.cluster.emulator().is_some() {
            // The emulator decodes JSON bodies only; on a real API server the peer keeps
            // client-go's default (protobuf for built-in kinds), as a user's would.
            args.push("--kube-content-type=application/json".to_owned());
        }
        let kubeconfig = stack.cluster.dir().join("reconciler.kubeconfig");
        let env = [("KUBECONFIG".to_owned(), kubeconfig.display().to_string())];
        let mut process = ChildProcess::start_silent(
            "peer",
            program,
            &args,
            &env,
            stack.cluster.dir(),
            serde_json::Value::Null,
        )?;
        process.announcement = process.logged("listening", START_TIMEOUT).await?;
        let metrics = process.announced("metrics")?;
        Ok(Peer { process, metrics })
    }

    pub fn pid(&self) -> anyhow::Result<u32> {
        self.process.pid().context("the peer has no process id")
    }

    /// `controller_runtime_reconcile_total` of the OIDCClient controller, every result.
    pub async fn reconciles(&self) -> f64 {
        let text = http_get(&self.metrics, "/metrics")
            .await
            .map(|(_, body)| body)
            .unwrap_or_default();
        crate::e2e::metric_sum(
            &text,
            "controller_runtime_reconcile_total",
            &[("controller", "oidcclient")],
        )
    }

    /// The reconcile count once it has not moved for a second (or after `at_most`).
    async fn quiet_reconciles(&self, at_most: Duration) -> f64 {
        const QUIET: Duration = Duration::from_secs(1);
        let deadline = Instant::now() + at_most;
        let mut count = self.reconciles().await;
        let mut since = Instant::now();
        while Instant::now() < deadline && since.elapsed() < QUIET {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = self.reconciles().await;
            if now != count {
                count = now;
                since = Instant::now();
            }
        }
        count
    }

    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    pub async fn stop(self) {
        self.process.stop(Duration::from_secs(5)).await;
    }
}

/// What the peer measured at one size, and the reconciler's figures over the peer's.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerReport {
    /// Whether every client was Registered with its Secret before the timeout.
    pub finished: bool,
    pub cold_start_seconds: f64,
    /// The peer process's own CPU time for the cold start.
    pub cold_start_cpu_seconds: Option<f64>,
    /// The real control plane's own processes during the peer's cold start (none on the
    /// emulator).
    pub cold_start_plane_cpu_seconds: Option<f64>,
    pub reconciles: f64,
    pub reconciles_per_object: f64,
    pub server_calls: Calls,
    pub kube_requests: Calls,
    pub peak_kib: u64,
    pub idle_kib: Option<u64>,
    pub steady_server_calls_per_minute: Option<Calls>,
    /// Kubernetes writes in the steady window (Leases included, as `<verb> <resource>`; on a
    /// real plane every client's, kube-controller-manager's too).
    pub steady_kube_writes: Option<Calls>,
    pub steady_reconciles: Option<f64>,
    pub drift_latency_ms: Option<Quantiles>,
    pub drift_detected: usize,
    pub drift_reconciles_per_edit: Option<Quantiles>,
    pub drift_server_calls_per_edit: Option<Quantiles>,
    pub ratios: PeerRatios,
    pub notes: Vec<String>,
}

/// The reconciler's figure over the peer's (the targets in brackets): CPU (at most 0.5),
/// peak resident set (at most 0.5), cold-start wall (at most 1), drift p95 (at most 1).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerRatios {
    pub cpu: Option<f64>,
    pub peak_rss: Option<f64>,
    pub wall: Option<f64>,
    pub drift_p95: Option<f64>,
}

fn log(message: &str) {
    eprintln!("[nauthera-bench] {message}");
}

/// The peer's run on a stack the caller started with the same workload created, the same drift
/// edits, the same settle and steady windows as the reconciler's.
pub struct PeerRun<'a> {
    pub stack: &'a BenchStack,
    pub workload: &'a Workload,
    pub concurrency: usize,
    pub cold_start_timeout: Duration,
    pub settle: Duration,
    pub steady_window: Duration,
    pub drift_timeout: Duration,
    pub drift_settle: Duration,
    pub drifted: &'a [ClientItem],
}

impl PeerRun<'_> {
    pub async fn measure(&self, program: &Path) -> anyhow::Result<PeerReport> {
        let stack: &Stack = self.stack;
        let requests = RequestCounter::of(&stack.cluster);
        let manifests = self.workload.composition().manifests();
        let observer = Observer::start(&stack.client(), kinds_of(self.workload.kind));
        let calls_before = stack.server.counters().calls;
        let requests_before = requests.reconciler().await?;
        let plane_before = self.stack.plane_cpu_seconds()?;
        let started = Instant::now();
        let peer = Peer::start(program, stack, self.concurrency, &[]).await?;
        let pid = peer.pid()?;
        let finished = observer
            .wait_until(started + self.cold_start_timeout, |seen| {
                seen.complete >= manifests
            })
            .await;
        let mut report = PeerReport {
            finished: finished.is_some(),
            cold_start_seconds: finished
                .map_or_else(|| started.elapsed(), |at| at - started)
                .as_secs_f64(),
            cold_start_cpu_seconds: finished
                .is_some()
                .then(|| measure::cpu_seconds(pid))
                .transpose()?,
            ..PeerReport::default()
        };
        if finished.is_some() {
            report.cold_start_plane_cpu_seconds = plane_before
                .zip(self.stack.plane_cpu_seconds()?)
                .map(|(before, after)| after - before);
        }
        report.reconciles = peer.quiet_reconciles(self.settle).await;
        report.reconciles_per_object = report.reconciles / self.workload.size.max(1) as f64;
        report.server_calls = difference(&stack.server.counters().calls, &calls_before);
        report.kube_requests = difference(&requests.reconciler().await?, &requests_before);
        report.peak_kib = resident(pid)?.hwm_kib;
        if finished.is_none() {
            report.notes.push(format!(
                "the peer's cold start did not finish within {} s ({} of {manifests} complete); \
                 its log ends: {}",
                self.cold_start_timeout.as_secs(),
                observer.complete(),
                peer.log_tail()
            ));
            peer.stop().await;
            return Ok(report);
        }

        log("the peer's steady state");
        tokio::time::sleep(self.settle).await;
        let calls_before = stack.server.counters().calls;
        let requests_before = requests.reconciler().await?;
        let reconciles_before = peer.reconciles().await;
        tokio::time::sleep(self.steady_window).await;
        let minutes = self.steady_window.as_secs_f64() / 60.0;
        report.steady_server_calls_per_minute = Some(
            difference(&stack.server.counters().calls, &calls_before)
                .into_iter()
                .map(|(method, n)| (method, (n as f64 / minutes).round() as u64))
                .collect(),
        );
        report.steady_kube_writes = Some(measure::writes(&difference(
            &requests.reconciler().await?,
            &requests_before,
        )));
        report.steady_reconciles = Some(peer.reconciles().await - reconciles_before);
        report.idle_kib = Some(resident(pid)?.rss_kib);

        log(&format!(
            "the peer's drift latency, {} edits",
            self.drifted.len()
        ));
        let edits = drift::edit_each(
            stack,
            &observer,
            self.drifted,
            self.drift_timeout,
            self.drift_settle,
            || peer.reconciles(),
        )
        .await?;
        report.drift_detected = edits.latencies.len();
        if !self.drifted.is_empty() {
            report.drift_latency_ms = Some(edits.latency_ms());
            report.drift_reconciles_per_edit = Some(edits.reconciles_per_edit());
            report.drift_server_calls_per_edit = Some(edits.server_calls_per_edit());
        }
        peer.stop().await;
        Ok(report)
    }
}

/// The reconciler's figures of `size` over the peer's.
pub fn ratios(size: &SizeReport, peer: &PeerReport) -> PeerRatios {
    let cold = &size.cold_start;
    PeerRatios {
        cpu: cold
            .cpu
            .as_ref()
            .zip(peer.cold_start_cpu_seconds)
            .and_then(|(cpu, peer)| ratio(cpu.reconciler_seconds, peer)),
        peak_rss: ratio(size.memory.cold_start_peak_kib as f64, peer.peak_kib as f64),
        wall: (cold.finished && peer.finished)
            .then(|| ratio(cold.seconds, peer.cold_start_seconds))
            .flatten(),
        drift_p95: size
            .drift
            .as_ref()
            .zip(peer.drift_latency_ms)
            .filter(|(drift, _)| drift.detected == drift.edits)
            .filter(|_| peer.drift_detected == size.drift.as_ref().map_or(0, |d| d.edits))
            .and_then(|(drift, peer)| ratio(drift.latency_ms.p95, peer.p95)),
    }
}

fn two(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn against(ratio: Option<f64>, target: f64) -> String {
    match ratio {
        Some(r) if r <= target => format!("{r:.2}x (target <= {target}: met)"),
        Some(r) => format!("{r:.2}x (target <= {target}: not met)"),
        None => "n/a".to_owned(),
    }
}

/// The rows of the table that set the reconciler against the peer: the reconciler in the
/// reconciler column, the peer in the floor column.
pub fn rows(table: &mut Table, size: &SizeReport, peer: &PeerReport) {
    let n = size.clients.to_string();
    let plane = size.plane_name().to_owned();
    let workload = size.workload.name().to_owned();
    let mut row = |measure: &str, reconciler: String, peer: String, ratio: String| {
        table.add_row(vec![
            n.clone(),
            plane.clone(),
            workload.clone(),
            format!("vs controller-runtime peer: {measure}"),
            reconciler,
            peer,
            ratio,
        ]);
    };
    let cold = &size.cold_start;
    let peer_wall = if peer.finished {
        format!("{} s", two(peer.cold_start_seconds))
    } else {
        format!("unfinished after {} s", two(peer.cold_start_seconds))
    };
    row(
        "cold start wall",
        format!("{} s", two(cold.seconds)),
        peer_wall,
        against(peer.ratios.wall, 1.0),
    );
    row(
        "cold start CPU (own process)",
        cold.cpu.as_ref().map_or("n/a".to_owned(), |c| {
            format!("{} s", two(c.reconciler_seconds))
        }),
        peer.cold_start_cpu_seconds
            .map_or("n/a".to_owned(), |s| format!("{} s", two(s))),
        against(peer.ratios.cpu, 0.5),
    );
    if let Some(peer_plane) = peer.cold_start_plane_cpu_seconds {
        row(
            "cold start CPU of the control plane",
            cold.cpu
                .as_ref()
                .and_then(|c| c.plane_seconds)
                .map_or("n/a".to_owned(), |s| format!("{} s", two(s))),
            format!("{} s", two(peer_plane)),
            String::new(),
        );
    }
    row(
        "peak RSS",
        format!(
            "{} MiB",
            two(size.memory.cold_start_peak_kib as f64 / 1024.0)
        ),
        format!("{} MiB", two(peer.peak_kib as f64 / 1024.0)),
        against(peer.ratios.peak_rss, 0.5),
    );
    row(
        "idle RSS",
        size.memory.idle.map_or("n/a".to_owned(), |r| {
            format!("{} MiB", two(r.rss_kib as f64 / 1024.0))
        }),
        peer.idle_kib.map_or("n/a".to_owned(), |k| {
            format!("{} MiB", two(k as f64 / 1024.0))
        }),
        String::new(),
    );
    row(
        "reconciles per object",
        two(cold.reconciles_per_object),
        two(peer.reconciles_per_object),
        String::new(),
    );
    row(
        "drift p95",
        size.drift.as_ref().map_or("n/a".to_owned(), |d| {
            format!("{} ms", two(d.latency_ms.p95))
        }),
        peer.drift_latency_ms
            .map_or("n/a".to_owned(), |q| format!("{} ms", two(q.p95))),
        against(peer.ratios.drift_p95, 1.0),
    );
    if let Some(calls) = &peer.steady_server_calls_per_minute {
        row(
            "steady server calls/min",
            size.steady.as_ref().map_or("n/a".to_owned(), |s| {
                two(s.server_calls_per_minute.values().sum::<f64>() + 0.0)
            }),
            format!("{}", calls.values().sum::<u64>()),
            String::new(),
        );
    }
}
