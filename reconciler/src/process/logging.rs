//! Log lines through `tracing`: JSON in a cluster, text for people. The level comes from
//! `RUST_LOG` (`info` when unset).

use tracing_subscriber::EnvFilter;

use crate::process::config::LogFormat;

/// Installs the global subscriber. Call once, at start.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
        LogFormat::Text => builder.init(),
    }
}
