//! `nauthera-reconciler`: makes Kubernetes manifests the source of truth for nauthera-server.

mod admin;
mod caches;
mod changes;
mod config;
mod context;
mod controllers;
mod decide;
mod events;
mod http;
mod kinds;
mod kube_io;
mod leader;
mod logging;
mod managed;
mod memory;
mod metrics;
mod namespace_map;
mod pipeline;
mod policies;
mod prerequisites;
mod probe;
mod run;
mod server_calls;
mod shard;
mod state;
#[cfg(test)]
mod test_cluster;

use std::process::ExitCode;

use clap::Parser;

use crate::config::{Args, PodFacts};

fn main() -> ExitCode {
    let args = Args::parse();
    let config = match args.into_config(PodFacts::from_environment()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("nauthera-reconciler: {error}");
            return ExitCode::from(2);
        }
    };
    logging::init(config.log_format);
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
    match runtime.block_on(run::run(config)) {
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
