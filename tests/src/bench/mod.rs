//! The benchmark program's parts (`nauthera-bench`): the reconciler and the plugin measured at
//! several sizes, each figure against a floor measured in the same run. See
//! `docs/performance.md` for what each figure means and how to reproduce it.

pub mod drift;
pub mod floor;
pub mod measure;
pub mod memory_floor;
pub mod observer;
pub mod peer;
pub mod plugin;
pub mod repeated;
pub mod report;
pub mod run;
pub mod svg;
pub mod workload;

use std::path::Path;

use anyhow::Context;

use crate::control_plane::Plane;
use report::Report;
use run::Settings;
use workload::{Workload, WorkloadKind};

/// Measures every size of every workload on every plane `repeat` times (each size for each
/// workload and plane in turn, so a stopped run keeps them all at the smaller sizes), then the
/// plugin-only sizes on every plane; after each one `written` gets the report so far, so a long
/// run that is stopped keeps what it measured. Sizes measured more than once are summed up as
/// medians (`Report::repeated`).
pub async fn run(
    settings: &Settings,
    planes: &[Plane],
    workloads: &[WorkloadKind],
    sizes: &[usize],
    repeat: usize,
    plugin_only: &[usize],
    written: impl Fn(&Report) -> anyhow::Result<()>,
) -> anyhow::Result<Report> {
    // A size too small for a workload fails before anything runs, not after an hour.
    for &kind in workloads {
        for &size in sizes.iter().filter(|n| **n > 0) {
            Workload {
                kind,
                size,
                namespaces: settings.namespaces,
            }
            .check()?;
        }
    }
    let mut report = Report {
        started_at: jiff::Timestamp::now().to_string(),
        profile: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .to_owned(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        reconciler_settings: settings.reconciler_env().into_iter().collect(),
        ..Report::default()
    };
    // A size of 0 stands for none (`--plugin-only 0` skips the plugin-only sizes).
    for &clients in sizes.iter().filter(|n| **n > 0) {
        // Round by round, so that a slow spell of the shared machine falls on every workload and
        // plane alike rather than on one of them.
        for _ in 0..repeat.max(1) {
            for &kind in workloads {
                for &plane in planes {
                    report
                        .sizes
                        .push(run::size(settings, plane, kind, clients).await?);
                    report.repeated = repeated::summarize(&report.sizes);
                    written(&report)?;
                }
            }
        }
    }
    for &clients in plugin_only.iter().filter(|n| **n > 0) {
        for &plane in planes {
            report
                .plugin_only
                .push(run::plugin_only(settings, plane, clients).await?);
            written(&report)?;
        }
    }
    Ok(report)
}

/// Writes the report's JSON and its plot, creating their folders.
pub fn write(report: &Report, json: &Path, svg_path: &Path) -> anyhow::Result<()> {
    for path in [json, svg_path] {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
    }
    std::fs::write(json, serde_json::to_string_pretty(report)? + "\n")
        .with_context(|| format!("cannot write {}", json.display()))?;
    std::fs::write(svg_path, svg::plot(report))
        .with_context(|| format!("cannot write {}", svg_path.display()))?;
    Ok(())
}

/// Draws the plot of an earlier run from its JSON, measuring nothing.
pub fn replot(json: &Path, svg_path: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(json).with_context(|| format!("cannot read {}", json.display()))?;
    let report: Report = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a report of this program", json.display()))?;
    std::fs::write(svg_path, svg::plot(&report))
        .with_context(|| format!("cannot write {}", svg_path.display()))
}
