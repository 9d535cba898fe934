//! `cargo run --release -p nauthera-tests --bin nauthera-bench`: the reconciler and the plugin
//! measured against their floors at several sizes. Prints a table, writes the figures as JSON and
//! a plot as SVG. `docs/performance.md` explains each figure.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use nauthera_tests::bench::{self, run::Settings, workload::WorkloadKind};
use nauthera_tests::control_plane::Plane;

/// Measures cold start, steady state, drift latency, memory and the plugin against their floors.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    helper: Option<Helper>,
    /// The workloads to measure, comma-separated, each at every size of --clients (for example
    /// `clients,mixed,templated`). The plugin is compared with kubectl on the clients workload only.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "clients")]
    workload: Vec<WorkloadKind>,
    /// The control planes to measure every size on, comma-separated: `emulator` (in this
    /// process) and `real` (kube-apiserver, etcd and kube-controller-manager built from source,
    /// a fresh one for each stack; their CPU is reported apart). `emulator,real` puts both
    /// side by side in one report.
    #[arg(long, value_delimiter = ',', default_value = "emulator", value_parser = parse_plane)]
    control_plane: Vec<Plane>,
    /// Sizes N to measure the reconciler at, comma-separated: the number of manifests (of every
    /// kind, for the mixed workload; OIDCClients, for the clients workload).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    clients: Vec<usize>,
    /// How many times each size is measured, each run with its own floors right after it; with
    /// more than one, the table and the JSON (`repeated`) add the median of each ratio and its
    /// spread, the figure a target is read against on a shared machine.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    repeat: u64,
    /// Numbers of OIDCClients to compare the plugin with kubectl at, with no reconciler run
    /// (0 for none).
    #[arg(long, value_delimiter = ',', default_value = "100000")]
    plugin_only: Vec<usize>,
    /// How many namespaces the manifests are spread over.
    #[arg(long, default_value_t = 10)]
    namespaces: usize,
    /// The reconciler's concurrency (the cold-start floor uses the same).
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// How long the cold start may take before it is reported unfinished (e.g. 15m, 90s).
    #[arg(long, default_value = "15m", value_parser = nauthera_shared::duration::parse)]
    cold_start_timeout: Duration,
    /// How long the reconciler is left alone after its cold start before the steady window.
    #[arg(long, default_value = "15s", value_parser = nauthera_shared::duration::parse)]
    settle: Duration,
    /// The steady-state window.
    #[arg(long, default_value = "60s", value_parser = nauthera_shared::duration::parse)]
    steady_window: Duration,
    /// How many out-of-band edits the drift measure makes, one at a time.
    #[arg(long, default_value_t = 20)]
    drift_edits: usize,
    /// How long one edit may take to show as Drifted.
    #[arg(long, default_value = "60s", value_parser = nauthera_shared::duration::parse)]
    drift_timeout: Duration,
    /// How long after a drift shows its trailing reconciles and calls are still counted.
    #[arg(long, default_value = "2s", value_parser = nauthera_shared::duration::parse)]
    drift_settle: Duration,
    /// How many measured runs of each plugin and kubectl command (0 skips the comparison).
    #[arg(long, default_value_t = 5)]
    plugin_runs: usize,
    /// Put a ClientPolicy covering every client (with rules they all keep) in place before the
    /// reconciler starts, to measure what judging them costs.
    #[arg(long)]
    client_policy: bool,
    /// After the reconciler at each size of the clients workload, run the controller-runtime
    /// peer (bench/peer/, built with Go) on a fresh stack with the same workload, measured the
    /// same way, and report the reconciler's figures over the peer's.
    #[arg(long)]
    peer: bool,
    /// Where the figures go as JSON.
    #[arg(long, default_value = "target/nauthera-bench/results.json")]
    json: PathBuf,
    /// Where the plot goes as SVG: one panel per measure against N, on log axes.
    #[arg(long, default_value = "target/nauthera-bench/cold-start.svg")]
    svg: PathBuf,
    /// Draw the plot (`--svg`) from the figures of an earlier run's JSON, measuring nothing.
    #[arg(long, value_name = "JSON")]
    replot: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Helper {
    /// Runs a command and prints its CPU time and peak memory as JSON (used by the benchmark).
    #[command(hide = true)]
    Measure {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// The full cold-start floor (or the registration-only one) as a process of its own: registers
    /// the workload directly and prints its wall and CPU time as JSON (used by the benchmark).
    #[command(hide = true)]
    ColdStartFloor {
        /// The stack to reach, as JSON (`bench::floor::FloorTarget`).
        #[arg(long, value_parser = parse_json::<bench::floor::FloorTarget>)]
        target: bench::floor::FloorTarget,
        /// What the workload holds, as JSON (`bench::workload::Composition`).
        #[arg(long, value_parser = parse_json::<bench::workload::Composition>)]
        composition: bench::workload::Composition,
        #[arg(long)]
        concurrency: usize,
        /// Leave out the finalizer and the Event, as the floor of earlier rounds did.
        #[arg(long)]
        registration_only: bool,
    },
    /// Fills a bare reflector's caches and prints its resident set as JSON (the memory floor).
    #[command(hide = true)]
    ReflectorFloor {
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Also cache Organizations, Brandings and IdentityProviders (the mixed workload).
        #[arg(long)]
        all_kinds: bool,
    },
}

fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|error| format!("not the expected JSON: {error}"))
}

fn parse_plane(text: &str) -> Result<Plane, String> {
    Plane::parse(text).ok_or_else(|| format!("`{text}` is not a control plane: emulator or real"))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nauthera-bench: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    match args.helper {
        Some(Helper::Measure { command }) => return bench::measure::measure_child(&command),
        Some(Helper::ColdStartFloor {
            target,
            composition,
            concurrency,
            registration_only,
        }) => {
            let writes = if registration_only {
                bench::floor::FloorWrites::RegistrationOnly
            } else {
                bench::floor::FloorWrites::Full
            };
            let run =
                bench::floor::register_all(&target, concurrency, &composition, writes).await?;
            println!("{}", serde_json::to_string(&run)?);
            return Ok(());
        }
        Some(Helper::ReflectorFloor {
            kubeconfig,
            all_kinds,
        }) => {
            let resident = bench::memory_floor::reflect(&kubeconfig, all_kinds).await?;
            println!("{}", serde_json::to_string(&resident)?);
            return Ok(());
        }
        None => {}
    }
    if let Some(json) = &args.replot {
        return bench::replot(json, &args.svg);
    }
    let settings = Settings {
        namespaces: args.namespaces,
        concurrency: args.concurrency,
        cold_start_timeout: args.cold_start_timeout,
        settle: args.settle,
        steady_window: args.steady_window,
        drift_edits: args.drift_edits,
        drift_timeout: args.drift_timeout,
        drift_settle: args.drift_settle,
        plugin_runs: args.plugin_runs,
        probe_interval_seconds: 60,
        probe_retry_seconds: 15,
        change_poll_seconds: 10,
        bench_exe: std::env::current_exe().context("cannot find this program's path")?,
        client_policy: args.client_policy,
        peer: args.peer,
    };
    // Each workload once, in the order given.
    let mut workloads: Vec<WorkloadKind> = Vec::new();
    for kind in &args.workload {
        if !workloads.contains(kind) {
            workloads.push(*kind);
        }
    }
    let mut planes: Vec<Plane> = Vec::new();
    for plane in &args.control_plane {
        if !planes.contains(plane) {
            planes.push(*plane);
        }
    }
    let report = bench::run(
        &settings,
        &planes,
        &workloads,
        &args.clients,
        args.repeat as usize,
        &args.plugin_only,
        |report| bench::write(report, &args.json, &args.svg),
    )
    .await?;
    println!("{}", report.table());
    eprintln!(
        "[nauthera-bench] figures in {}, plot in {}",
        args.json.display(),
        args.svg.display()
    );
    Ok(())
}
