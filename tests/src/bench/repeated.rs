//! Several runs of one size (`--repeat`) summed up: the median of each ratio and its spread.
//!
//! On two shared cores one run's ratio moves more from run to run than a change to the core
//! does; each run pairs the reconciler with floors measured right after it, so the median of the
//! paired ratios is what a target is read against.

use comfy_table::Table;
use serde::{Deserialize, Serialize};

use super::report::SizeReport;
use super::workload::WorkloadKind;

/// The median, the smallest and the largest of one measure over the runs that measured it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// How many runs measured it (a cold start that did not finish has no ratio).
    pub runs: usize,
}

impl Spread {
    /// None when no run measured it. The median of an even count is the mean of the middle two.
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Option<Spread> {
        let mut values: Vec<f64> = values
            .into_iter()
            .flatten()
            .filter(|v| v.is_finite())
            .collect();
        values.sort_by(f64::total_cmp);
        let (&min, &max) = (values.first()?, values.last()?);
        let middle = values.len() / 2;
        let median = if values.len().is_multiple_of(2) {
            (values[middle - 1] + values[middle]) / 2.0
        } else {
            values[middle]
        };
        Some(Spread {
            median,
            min,
            max,
            runs: values.len(),
        })
    }
}

/// The runs of one workload at one size on one plane.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Repeated {
    pub workload: WorkloadKind,
    pub plane: String,
    pub clients: usize,
    pub runs: usize,
    /// Cold-start wall time over the full floor's.
    pub wall_ratio: Option<Spread>,
    /// Reconciler and stand-ins' CPU over the full floor's.
    pub cpu_ratio: Option<Spread>,
    /// The CPU ratio's two halves: the reconciler's own process against the floor's own, and
    /// the stand-ins serving each (runs whose floor ran as a process of its own).
    pub own_cpu_ratio: Option<Spread>,
    pub stand_ins_cpu_ratio: Option<Spread>,
    pub reconciler_cpu_seconds: Option<Spread>,
    pub reconciles_per_object: Option<Spread>,
    pub peak_mib: Option<Spread>,
    pub drift_p95_ms: Option<Spread>,
    /// The reconciler over the controller-runtime peer (`--peer`).
    pub peer_cpu_ratio: Option<Spread>,
    pub peer_peak_rss_ratio: Option<Spread>,
    pub peer_wall_ratio: Option<Spread>,
    pub peer_drift_p95_ratio: Option<Spread>,
}

/// One summary per workload, size and plane measured more than once, in the order first met.
pub fn summarize(sizes: &[SizeReport]) -> Vec<Repeated> {
    let mut groups: Vec<Vec<&SizeReport>> = Vec::new();
    for size in sizes {
        let same = |other: &&SizeReport| {
            other.workload == size.workload
                && other.clients == size.clients
                && other.plane_name() == size.plane_name()
        };
        match groups.iter_mut().find(|group| same(&group[0])) {
            Some(group) => group.push(size),
            None => groups.push(vec![size]),
        }
    }
    groups
        .into_iter()
        .filter(|runs| runs.len() > 1)
        .map(|runs| {
            let spread = |value: fn(&SizeReport) -> Option<f64>| {
                Spread::of(runs.iter().map(|size| value(size)))
            };
            let peer = |value: fn(&super::peer::PeerRatios) -> Option<f64>| {
                Spread::of(
                    runs.iter()
                        .map(|size| size.peer.as_ref().and_then(|p| value(&p.ratios))),
                )
            };
            Repeated {
                workload: runs[0].workload,
                plane: runs[0].plane_name().to_owned(),
                clients: runs[0].clients,
                runs: runs.len(),
                wall_ratio: spread(|s| s.cold_start.ratio),
                cpu_ratio: spread(|s| s.cold_start.cpu.as_ref().and_then(|c| c.ratio)),
                own_cpu_ratio: spread(|s| s.cold_start.cpu.as_ref()?.own_ratio()),
                stand_ins_cpu_ratio: spread(|s| s.cold_start.cpu.as_ref()?.stand_ins_ratio()),
                reconciler_cpu_seconds: spread(|s| {
                    s.cold_start.cpu.as_ref().map(|c| c.reconciler_seconds)
                }),
                reconciles_per_object: spread(|s| {
                    s.cold_start
                        .finished
                        .then_some(s.cold_start.reconciles_per_object)
                }),
                peak_mib: spread(|s| {
                    (s.memory.cold_start_peak_kib > 0)
                        .then(|| s.memory.cold_start_peak_kib as f64 / 1024.0)
                }),
                drift_p95_ms: spread(|s| {
                    s.drift
                        .as_ref()
                        .filter(|d| d.detected > 0)
                        .map(|d| d.latency_ms.p95)
                }),
                peer_cpu_ratio: peer(|r| r.cpu),
                peer_peak_rss_ratio: peer(|r| r.peak_rss),
                peer_wall_ratio: peer(|r| r.wall),
                peer_drift_p95_ratio: peer(|r| r.drift_p95),
            }
        })
        .collect()
}

/// The summary's rows: the median in the reconciler column, the spread beside it.
pub fn rows(table: &mut Table, repeated: &Repeated) {
    // Each measure with the unit its figures are shown in (`x` for a ratio).
    let measures = [
        ("cold start wall / full floor", repeated.wall_ratio, "x"),
        ("cold start CPU / full floor", repeated.cpu_ratio, "x"),
        ("own CPU / the floor's own", repeated.own_cpu_ratio, "x"),
        (
            "stand-ins' CPU / the floor's stand-ins'",
            repeated.stand_ins_cpu_ratio,
            "x",
        ),
        (
            "reconciler CPU seconds",
            repeated.reconciler_cpu_seconds,
            "",
        ),
        ("reconciles per object", repeated.reconciles_per_object, ""),
        ("cold-start peak MiB", repeated.peak_mib, ""),
        ("drift p95 ms", repeated.drift_p95_ms, ""),
        ("vs peer: CPU", repeated.peer_cpu_ratio, "x"),
        ("vs peer: peak RSS", repeated.peer_peak_rss_ratio, "x"),
        ("vs peer: cold start wall", repeated.peer_wall_ratio, "x"),
        ("vs peer: drift p95", repeated.peer_drift_p95_ratio, "x"),
    ];
    for (measure, spread, unit) in measures {
        let Some(spread) = spread else { continue };
        table.add_row(vec![
            repeated.clients.to_string(),
            repeated.plane.clone(),
            repeated.workload.name().to_owned(),
            format!(
                "median of {} runs (of {}): {measure}",
                spread.runs, repeated.runs
            ),
            format!(
                "{:.2}{unit} ({:.2}{unit} to {:.2}{unit})",
                spread.median, spread.min, spread.max
            ),
            String::new(),
            String::new(),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::{ColdStart, ColdStartCpu, Memory};

    #[test]
    fn the_median_of_an_odd_count_is_the_middle_and_of_an_even_count_the_mean_of_two() {
        let odd = Spread::of([Some(1.6), Some(1.1), None, Some(1.3)]).unwrap();
        assert_eq!(
            odd,
            Spread {
                median: 1.3,
                min: 1.1,
                max: 1.6,
                runs: 3
            }
        );
        let even = Spread::of([Some(2.0), Some(1.0), Some(4.0), Some(3.0)]).unwrap();
        assert_eq!(even.median, 2.5);
        assert_eq!((even.min, even.max, even.runs), (1.0, 4.0, 4));
    }

    #[test]
    fn nothing_measured_has_no_spread() {
        assert_eq!(Spread::of([None, None]), None);
        assert_eq!(Spread::of([Some(f64::NAN)]), None);
        assert_eq!(Spread::of(Vec::new()), None);
    }

    fn run(clients: usize, plane: &str, wall: Option<f64>, cpu: f64, peak_kib: u64) -> SizeReport {
        SizeReport {
            workload: WorkloadKind::Clients,
            plane: plane.to_owned(),
            clients,
            cold_start: ColdStart {
                finished: wall.is_some(),
                ratio: wall,
                reconciles_per_object: 2.0,
                cpu: wall.map(|_| ColdStartCpu {
                    reconciler_seconds: 10.0 * cpu,
                    stand_ins_seconds: 15.0,
                    floor_seconds: 15.0,
                    floor_own_seconds: Some(5.0),
                    ratio: Some(cpu),
                    ..ColdStartCpu::default()
                }),
                ..ColdStart::default()
            },
            memory: Memory {
                cold_start_peak_kib: peak_kib,
                ..Memory::default()
            },
            ..SizeReport::default()
        }
    }

    #[test]
    fn runs_are_grouped_by_workload_size_and_plane_and_single_runs_are_left_out() {
        let sizes = [
            run(10_000, "emulator", Some(1.5), 1.6, 51 * 1024),
            run(10_000, "real", Some(1.2), 1.4, 52 * 1024),
            run(10_000, "emulator", Some(1.1), 1.2, 53 * 1024),
            // Reports from before there was a choice of plane ran on the emulator.
            run(10_000, "", None, 9.0, 52 * 1024),
            run(1_000, "emulator", Some(1.0), 1.0, 20 * 1024),
        ];
        let summary = summarize(&sizes);
        assert_eq!(summary.len(), 1, "{summary:?}");
        let emulator = &summary[0];
        assert_eq!(
            (emulator.clients, emulator.plane.as_str(), emulator.runs),
            (10_000, "emulator", 3)
        );
        // The unfinished run has no ratio and no CPU, but its peak counts.
        let wall = emulator.wall_ratio.unwrap();
        assert_eq!((wall.median, wall.runs), (1.3, 2));
        assert_eq!(emulator.cpu_ratio.unwrap().median, 1.4);
        assert_eq!(emulator.reconciler_cpu_seconds.unwrap().median, 14.0);
        // Own 16 and 12 s against the floor's own 5; stand-ins 15 against the floor's 10.
        let own = emulator.own_cpu_ratio.unwrap();
        assert!((own.median - 2.8).abs() < 1e-9, "{own:?}");
        assert_eq!(own.runs, 2);
        assert_eq!(emulator.stand_ins_cpu_ratio.unwrap().median, 1.5);
        assert_eq!(emulator.reconciles_per_object.unwrap().runs, 2);
        let peak = emulator.peak_mib.unwrap();
        assert_eq!(
            (peak.median, peak.min, peak.max, peak.runs),
            (52.0, 51.0, 53.0, 3)
        );
        assert_eq!(emulator.drift_p95_ms, None);
        assert_eq!(emulator.peer_cpu_ratio, None);
    }

    #[test]
    fn the_rows_show_each_measured_median_with_its_spread() {
        let sizes = [
            run(10_000, "emulator", Some(1.5), 1.6, 51 * 1024),
            run(10_000, "emulator", Some(1.1), 1.2, 53 * 1024),
        ];
        let mut table = Table::new();
        rows(&mut table, &summarize(&sizes)[0]);
        let text = table.to_string();
        assert!(
            text.contains("median of 2 runs (of 2): cold start CPU / full floor"),
            "{text}"
        );
        assert!(text.contains("1.40x (1.20x to 1.60x)"), "{text}");
        assert!(
            text.contains("own CPU / the floor's own") && text.contains("2.80x (2.40x to 3.20x)"),
            "{text}"
        );
        assert!(text.contains("52.00 (51.00 to 53.00)"), "{text}");
        assert!(!text.contains("vs peer"), "{text}");
    }
}
