//! `nauthera-reconciler`: makes Kubernetes manifests the source of truth for nauthera-server.

mod config;
// The pipeline that uses every decision lands in the next commit.
#[allow(dead_code, unused_imports)]
mod decide;
mod logging;

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
        server = %config.connect.address,
        manager = %config.manager,
        namespaces = ?config.namespaces,
        leader_election = config.leader_election,
        lease = %config.lease_name,
        namespace = %config.own_namespace,
        identity = %config.identity,
        metrics = %config.metrics_address,
        probes = %config.probe_address,
        concurrency = config.concurrency,
        probe_interval = ?config.probe_interval,
        probe_retry_interval = ?config.probe_retry_interval,
        change_poll_interval = ?config.change_poll_interval,
        "configuration checked"
    );
    ExitCode::SUCCESS
}
