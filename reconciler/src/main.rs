//! `nauthera-reconciler`: makes Kubernetes manifests the source of truth for nauthera-server.
//!
//! Four rooms: `reconcile` (the core: one pipeline over every kind, its pure decisions, the
//! kinds), `server` (the edge to nauthera-server), `kubernetes` (the edge to the API server) and
//! `process` (settings, start-up, controllers, shards, probes, metrics around the core); and
//! `export`, the one-shot `nauthera-reconciler export` that writes manifests of what the server
//! holds.

mod export;
mod kubernetes;
mod process;
mod reconcile;
mod server;

use std::process::ExitCode;

use clap::Parser;

use crate::process::config::{Args, PodFacts};

fn main() -> ExitCode {
    let mut argv = std::env::args_os();
    if argv.nth(1).is_some_and(|first| first == export::SUBCOMMAND) {
        // `export ARGS`: clap sees `export` as the program's name.
        return export::main(std::env::args_os().skip(1));
    }
    let args = Args::parse();
    let config = match args.into_config(PodFacts::from_environment()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("nauthera-reconciler: {error}");
            return ExitCode::from(2);
        }
    };
    process::logging::init(config.log_format);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        server = %config.connect.address,
        manager = %config.manager,
        namespaces = %watched_namespaces(&config.namespaces),
        shard = %config.scope.shard_name(),
        scope = %config.scope.describe(),
        state = %config.state_configmap,
        leader_election = config.leader_election,
        lease = %config.lease_name,
        namespace = %config.own_namespace,
        identity = %config.identity,
        metrics = %config.metrics_address,
        probes = %config.probe_address,
        concurrency = config.concurrency,
        "starting"
    );
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("nauthera-reconciler: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(process::run::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %error, "stopped");
            eprintln!("nauthera-reconciler: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The namespaces watched, for the start-up line: a list, or "all".
fn watched_namespaces(namespaces: &[String]) -> String {
    if namespaces.is_empty() {
        "all".to_owned()
    } else {
        namespaces.join(",")
    }
}
