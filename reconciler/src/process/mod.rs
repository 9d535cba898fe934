//! The process around the core: settings, start-up and leadership, the controllers that feed the
//! pipeline, shards, probes, the HTTP endpoints, metrics, logging and memory.

pub(crate) mod admission;
pub(crate) mod config;
pub(crate) mod controllers;
pub(crate) mod echoes;
pub(crate) mod http;
pub(crate) mod logging;
pub(crate) mod memory;
pub(crate) mod metrics;
pub(crate) mod probe;
pub(crate) mod run;
pub(crate) mod shard;
pub(crate) mod work_queue;
