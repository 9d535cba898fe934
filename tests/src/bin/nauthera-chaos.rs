//! `cargo run --release -p nauthera-tests --bin nauthera-chaos`: the reliability suite's chaos
//! program (docs/reliability.md). Runs each scenario against the real binaries, checks the
//! invariants, scans for leaked secrets, prints the figures and exits 1 if anything broke.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use nauthera_tests::chaos::scenario::Side;
use nauthera_tests::chaos::{self, Config, Scenario};

/// Churn under faults, crashes, partitions and certificate trouble, with invariants checked.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// How many manifests (of every kind) the churn keeps around.
    #[arg(long, default_value_t = 300)]
    resources: usize,
    /// Churn operations per second while the faults act.
    #[arg(long, default_value_t = 10.0)]
    churn_per_second: f64,
    /// How long each scenario's faults act (e.g. 30s).
    #[arg(long, default_value = "30s", value_parser = nauthera_shared::duration::parse)]
    fault_phase: Duration,
    /// How long the run watches for writes once everything converged.
    #[arg(long, default_value = "10s", value_parser = nauthera_shared::duration::parse)]
    steady_window: Duration,
    /// How long convergence may take after the faults stop.
    #[arg(long, default_value = "3m", value_parser = nauthera_shared::duration::parse)]
    converge_timeout: Duration,
    /// The scenarios, comma-separated (default: the server-side ones, in this order). The
    /// Kubernetes-side ones (etcd-stopped, api-server-restarted, compaction, throttled, api-cut,
    /// gc-orphan)
    /// each start a real control plane of their own.
    #[arg(long, value_enum, value_delimiter = ',')]
    scenario: Vec<Scenario>,
    /// Every Kubernetes-side scenario, after those `--scenario` names.
    #[arg(long)]
    kubernetes_side: bool,
    /// How long the etcd-stopped scenario keeps etcd stopped.
    #[arg(long, default_value = "30s", value_parser = nauthera_shared::duration::parse)]
    outage: Duration,
    /// The churn's seed: a run's operations are reproducible from it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The replicas' Lease duration and renew deadline.
    #[arg(long, default_value = "6s", value_parser = nauthera_shared::duration::parse)]
    lease: Duration,
    #[arg(long, default_value = "3s", value_parser = nauthera_shared::duration::parse)]
    renew_deadline: Duration,
    /// The replicas' longest wait before retrying a failed reconcile (the reconciler's
    /// --retry-backoff-max; its default is 5m).
    #[arg(long, default_value = "10s", value_parser = nauthera_shared::duration::parse)]
    retry_backoff_max: Duration,
    /// Write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Replace the figures sections of this Markdown file (between the `chaos-figures` markers,
    /// and the `chaos-kubernetes-figures` ones for the Kubernetes side),
    /// for example docs/reliability.md.
    #[arg(long)]
    update_doc: Option<PathBuf>,
}

/// The figures sections of `--update-doc`: the server side's and the Kubernetes side's.
const SECTIONS: [(Side, &str, &str); 2] = [
    (
        Side::Server,
        "<!-- chaos-figures:begin -->",
        "<!-- chaos-figures:end -->",
    ),
    (
        Side::Kubernetes,
        "<!-- chaos-kubernetes-figures:begin -->",
        "<!-- chaos-kubernetes-figures:end -->",
    ),
];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = Config {
        resources: args.resources,
        churn_per_second: args.churn_per_second,
        fault_phase: args.fault_phase,
        steady_window: args.steady_window,
        converge_timeout: args.converge_timeout,
        scenarios: scenarios(&args),
        seed: args.seed,
        lease: args.lease,
        renew_deadline: args.renew_deadline,
        retry_backoff_max: args.retry_backoff_max,
        outage: args.outage,
    };
    let report = chaos::run(&config).await?;
    let figures = report.markdown();
    println!("{figures}");
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.update_doc {
        let mut text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        // Each side's section is replaced only by a run of that side.
        for (side, begin_marker, end_marker) in SECTIONS {
            if !config.scenarios.iter().any(|s| s.side() == side) {
                continue;
            }
            let (Some(begin), Some(end)) = (text.find(begin_marker), text.find(end_marker)) else {
                anyhow::bail!(
                    "{} has no {begin_marker} ... {end_marker} section to replace",
                    path.display()
                );
            };
            let figures = report.markdown_of(&[side]);
            text = format!(
                "{}{begin_marker}\n{figures}{}",
                &text[..begin],
                &text[end..]
            );
        }
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let failures = report.failures();
    if !failures.is_empty() {
        eprintln!("broken:");
        for failure in &failures {
            eprintln!("  {failure}");
        }
        std::process::exit(1);
    }
    Ok(())
}

/// The scenarios named, the server-side ones when none is, and the Kubernetes-side ones asked
/// for.
fn scenarios(args: &Args) -> Vec<Scenario> {
    let mut scenarios = args.scenario.clone();
    if scenarios.is_empty() && !args.kubernetes_side {
        scenarios = Scenario::ALL.to_vec();
    }
    if args.kubernetes_side {
        scenarios.extend(
            Scenario::KUBERNETES
                .into_iter()
                .filter(|s| !args.scenario.contains(s)),
        );
    }
    scenarios
}
