//! The plot in `docs/performance.md`: one small panel per measure against N, both axes
//! logarithmic, so how each cost grows with N is visible (a straight line of slope 1 is linear
//! growth). Each panel draws the reconciler and whatever it is compared with in the report (its
//! floors), one line per workload. Plain SVG, written by hand.

use std::fmt::Write;

use super::peer::PeerReport;
use super::report::{PerObject, Report, SizeReport};
use super::workload::WorkloadKind;

const PANEL_WIDTH: f64 = 300.0;
const PANEL_HEIGHT: f64 = 200.0;
const MARGIN: f64 = 56.0;
const COLUMNS: usize = 3;

/// Who a line stands for: the reconciler, or what it is measured against.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Reconciler,
    /// The reconciler idle after its cold start (the memory panel).
    ReconcilerIdle,
    Floor,
    /// A bare reflector holding the same objects (the memory floor).
    Reflector,
    /// The controller-runtime peer doing the same job (`--peer`).
    Peer,
}

impl Role {
    const ALL: [Role; 5] = [
        Role::Reconciler,
        Role::ReconcilerIdle,
        Role::Floor,
        Role::Reflector,
        Role::Peer,
    ];

    fn label(self) -> &'static str {
        match self {
            Role::Reconciler => "reconciler",
            Role::ReconcilerIdle => "reconciler, idle",
            Role::Floor => "floor (same work, done directly)",
            Role::Reflector => "bare reflector (memory floor)",
            Role::Peer => "controller-runtime peer",
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Role::Reconciler => "#c0392b",
            Role::ReconcilerIdle => "#e67e22",
            Role::Floor => "#7f8c8d",
            Role::Reflector => "#2c3e50",
            Role::Peer => "#2980b9",
        }
    }
}

/// How a plane's lines are stroked: the real control plane's wider and paler, so both planes'
/// lines of one role and workload stay apart.
fn plane_stroke(plane: &str) -> &'static str {
    if plane == "real" {
        r#"stroke-width="5" stroke-opacity="0.45""#
    } else {
        r#"stroke-width="2""#
    }
}

/// The dash pattern of a workload's lines: the clients workload solid.
fn dashes(workload: WorkloadKind) -> &'static str {
    match workload {
        WorkloadKind::Clients => "",
        WorkloadKind::Mixed => "6 3",
        WorkloadKind::Templated => "2 2",
    }
}

/// One measured value of a size; `at_least` when the run stopped at its timeout.
#[derive(Clone, Copy)]
struct Value {
    value: f64,
    at_least: bool,
}

fn value(value: f64) -> Option<Value> {
    Some(Value {
        value,
        at_least: false,
    })
}

/// What a size measured for one panel, by role (absent where not measured).
type Values = Vec<(Role, Option<Value>)>;

/// One panel: a title and the values of a size.
struct Measure {
    title: &'static str,
    values: fn(&SizeReport) -> Values,
}

const MEASURES: [Measure; 6] = [
    Measure {
        title: "Cold start, wall (s)",
        values: |size| {
            let cold = &size.cold_start;
            vec![
                (
                    Role::Reconciler,
                    Some(Value {
                        value: cold.seconds,
                        at_least: !cold.finished,
                    }),
                ),
                (Role::Floor, value(cold.floor_seconds)),
                (
                    Role::Peer,
                    peer(size).map(|peer| Value {
                        value: peer.cold_start_seconds,
                        at_least: !peer.finished,
                    }),
                ),
            ]
        },
    },
    Measure {
        // The reconciler's CPU with its stand-ins' against the floor's with the same stand-ins,
        // as the ratio in the table.
        title: "Cold start, CPU (s)",
        values: |size| {
            let cpu = size.cold_start.cpu.as_ref();
            vec![
                (
                    Role::Reconciler,
                    cpu.and_then(|cpu| value(cpu.reconciler_seconds + cpu.stand_ins_seconds)),
                ),
                (Role::Floor, cpu.and_then(|cpu| value(cpu.floor_seconds))),
            ]
        },
    },
    Measure {
        title: "Memory, resident (MiB)",
        values: |size| {
            let memory = &size.memory;
            vec![
                (
                    Role::Reconciler,
                    value(memory.cold_start_peak_kib as f64 / 1024.0),
                ),
                (
                    Role::ReconcilerIdle,
                    memory
                        .idle
                        .and_then(|idle| value(idle.rss_kib as f64 / 1024.0)),
                ),
                (
                    Role::Reflector,
                    memory
                        .floor
                        .and_then(|floor| value(floor.rss_kib as f64 / 1024.0)),
                ),
                (
                    Role::Peer,
                    peer(size).and_then(|peer| value(peer.peak_kib as f64 / 1024.0)),
                ),
            ]
        },
    },
    Measure {
        // The floor does each object's work once.
        title: "Reconciles per object",
        values: |size| {
            vec![
                (
                    Role::Reconciler,
                    Some(Value {
                        value: size.cold_start.reconciles_per_object,
                        at_least: !size.cold_start.finished,
                    }),
                ),
                (Role::Floor, value(1.0)),
                (
                    Role::Peer,
                    peer(size).map(|peer| Value {
                        value: peer.reconciles_per_object,
                        at_least: !peer.finished,
                    }),
                ),
            ]
        },
    },
    Measure {
        title: "Drift latency, p95 (ms)",
        values: |size| {
            let drift = size.drift.as_ref();
            vec![
                (
                    Role::Reconciler,
                    drift.and_then(|drift| value(drift.latency_ms.p95)),
                ),
                (
                    Role::Floor,
                    drift.and_then(|drift| value(drift.floor_latency_ms.p95)),
                ),
                (
                    Role::Peer,
                    peer(size)
                        .and_then(|peer| peer.drift_latency_ms.as_ref())
                        .and_then(|latency| value(latency.p95)),
                ),
            ]
        },
    },
    Measure {
        // The floor's with its stand-ins, the reconciler's and the peer's without: the CPU
        // panel has the reconciler's and the floor's with the stand-ins.
        title: "Cold-start CPU per object (ms)",
        values: |size| {
            // Worked out again, so an earlier run's JSON without it is drawn too.
            let cost = PerObject::of(size);
            vec![
                (
                    Role::Reconciler,
                    cost.as_ref().and_then(|cost| cost.cpu_ms).and_then(value),
                ),
                (
                    Role::Floor,
                    cost.as_ref()
                        .and_then(|cost| cost.floor_cpu_ms)
                        .and_then(value),
                ),
                (
                    Role::Peer,
                    peer(size)
                        .filter(|peer| peer.finished && size.clients > 0)
                        .and_then(|peer| peer.cold_start_cpu_seconds)
                        .and_then(|cpu| value(cpu * 1000.0 / size.clients as f64)),
                ),
            ]
        },
    },
];

/// The peer's figures of a size, when `--peer` measured it.
fn peer(size: &SizeReport) -> Option<&PeerReport> {
    size.peer.as_ref()
}

/// One line of a panel: a role on one workload, a point per size measured.
struct Line {
    role: Role,
    workload: WorkloadKind,
    /// `emulator` or `real`: the real plane's lines are drawn wider and paler.
    plane: String,
    points: Vec<(f64, Value)>,
}

/// The lines of a measure: only positive values can stand on a logarithmic axis.
fn lines(report: &Report, measure: &Measure) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::new();
    for size in &report.sizes {
        for (role, value) in (measure.values)(size) {
            let Some(value) = value.filter(|v| v.value > 0.0 && v.value.is_finite()) else {
                continue;
            };
            let point = (size.clients as f64, value);
            match lines.iter_mut().find(|line| {
                line.role == role
                    && line.workload == size.workload
                    && line.plane == size.plane_name()
            }) {
                Some(line) => line.points.push(point),
                None => lines.push(Line {
                    role,
                    workload: size.workload,
                    plane: size.plane_name().to_owned(),
                    points: vec![point],
                }),
            }
        }
    }
    for line in &mut lines {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    lines
}

/// Whole powers of ten around the values: at least one decade.
fn decades(values: impl Iterator<Item = f64>) -> (i32, i32) {
    let (low, high) = values.fold((f64::INFINITY, 0.0_f64), |(low, high), v| {
        (low.min(v), high.max(v))
    });
    if !low.is_finite() {
        return (0, 1);
    }
    let low = low.log10().floor() as i32;
    let high = (high.log10().ceil() as i32).max(low + 1);
    (low, high)
}

/// The SVG document for a report: the panels in a grid, the legend beneath.
pub fn plot(report: &Report) -> String {
    let rows = MEASURES.len().div_ceil(COLUMNS);
    let width = COLUMNS as f64 * (PANEL_WIDTH + MARGIN) + MARGIN;
    let legend_top = rows as f64 * (PANEL_HEIGHT + 2.0 * MARGIN) + 8.0;
    let workloads = workloads(report);
    let has_real = report.sizes.iter().any(|size| size.plane_name() == "real");
    let legend_lines = Role::ALL.len() + workloads.len() + usize::from(has_real);
    let height = legend_top + 16.0 * legend_lines as f64 + 8.0;
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="#ffffff"/>
"##
    );
    let (n_low, n_high) = decades(report.sizes.iter().map(|size| size.clients as f64));
    for (index, measure) in MEASURES.iter().enumerate() {
        let left = MARGIN + (index % COLUMNS) as f64 * (PANEL_WIDTH + MARGIN);
        let top = MARGIN + (index / COLUMNS) as f64 * (PANEL_HEIGHT + 2.0 * MARGIN);
        panel(
            &mut svg,
            (left, top),
            measure.title,
            &lines(report, measure),
            (n_low, n_high),
        );
    }
    legend(&mut svg, legend_top, &workloads, has_real);
    svg.push_str("</svg>\n");
    svg
}

/// The workloads the report measured, in the order met.
fn workloads(report: &Report) -> Vec<WorkloadKind> {
    let mut workloads = Vec::new();
    for size in &report.sizes {
        if !workloads.contains(&size.workload) {
            workloads.push(size.workload);
        }
    }
    workloads
}

fn legend(svg: &mut String, top: f64, workloads: &[WorkloadKind], report_has_real: bool) {
    let mut y = top;
    for role in Role::ALL {
        let _ = writeln!(
            svg,
            r##"<line x1="{MARGIN}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="{}" stroke-width="2"/><text x="{}" y="{y:.1}">{}</text>"##,
            y - 4.0,
            MARGIN + 24.0,
            y - 4.0,
            role.colour(),
            MARGIN + 30.0,
            role.label()
        );
        y += 16.0;
    }
    for workload in workloads {
        let _ = writeln!(
            svg,
            r##"<line x1="{MARGIN}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#333333" stroke-width="2" stroke-dasharray="{}"/><text x="{}" y="{y:.1}">{} workload</text>"##,
            y - 4.0,
            MARGIN + 24.0,
            y - 4.0,
            dashes(*workload),
            MARGIN + 30.0,
            workload.name()
        );
        y += 16.0;
    }
    if report_has_real {
        let _ = writeln!(
            svg,
            r##"<line x1="{MARGIN}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#333333" {}/><text x="{}" y="{y:.1}">the real control plane (thin: the emulator)</text>"##,
            y - 4.0,
            MARGIN + 24.0,
            y - 4.0,
            plane_stroke("real"),
            MARGIN + 30.0,
        );
    }
    let _ = writeln!(
        svg,
        r##"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="#ffffff" stroke="#c0392b" stroke-width="1.5"/><text x="{:.1}" y="{:.1}">stopped at the timeout (at least this)</text>"##,
        MARGIN + 300.0,
        top - 4.0,
        MARGIN + 310.0,
        top
    );
}

fn panel(
    svg: &mut String,
    (left, top): (f64, f64),
    title: &str,
    lines: &[Line],
    (n_low, n_high): (i32, i32),
) {
    let bottom = top + PANEL_HEIGHT;
    let (y_low, y_high) = decades(
        lines
            .iter()
            .flat_map(|line| line.points.iter().map(|(_, v)| v.value)),
    );
    let x =
        |n: f64| left + PANEL_WIDTH * (n.log10() - f64::from(n_low)) / f64::from(n_high - n_low);
    let y =
        |v: f64| bottom - PANEL_HEIGHT * (v.log10() - f64::from(y_low)) / f64::from(y_high - y_low);
    let _ = writeln!(
        svg,
        r##"<text x="{left}" y="{}" font-size="13" font-weight="bold">{title}</text>"##,
        top - 12.0
    );
    for power in y_low..=y_high {
        let at = y(10f64.powi(power));
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{at:.1}" x2="{}" y2="{at:.1}" stroke="#dddddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + PANEL_WIDTH,
            left - 4.0,
            at + 4.0,
            power_label(power)
        );
    }
    for power in n_low..=n_high {
        let at = x(10f64.powi(power));
        let _ = writeln!(
            svg,
            r##"<line x1="{at:.1}" y1="{top}" x2="{at:.1}" y2="{bottom}" stroke="#eeeeee"/><text x="{at:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            bottom + 14.0,
            power_label(power)
        );
    }
    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">N</text><line x1="{left}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="#333333"/><line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333333"/>"##,
        left + PANEL_WIDTH / 2.0,
        bottom + 28.0,
        left + PANEL_WIDTH,
    );
    if lines.is_empty() {
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#999999">not measured</text>"##,
            left + PANEL_WIDTH / 2.0,
            top + PANEL_HEIGHT / 2.0
        );
    }
    for line in lines {
        let colour = line.role.colour();
        let points: Vec<String> = line
            .points
            .iter()
            .map(|(n, v)| format!("{:.1},{:.1}", x(*n), y(v.value)))
            .collect();
        let _ = writeln!(
            svg,
            r##"<polyline points="{}" fill="none" stroke="{colour}" {} stroke-dasharray="{}"/>"##,
            points.join(" "),
            plane_stroke(&line.plane),
            dashes(line.workload)
        );
        for (n, v) in &line.points {
            let fill = if v.at_least { "#ffffff" } else { colour };
            let _ = writeln!(
                svg,
                r##"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{fill}" stroke="{colour}" stroke-width="1.5"><title>{} ({}{}), N = {n}: {}{}</title></circle>"##,
                x(*n),
                y(v.value),
                line.role.label(),
                line.workload.name(),
                if line.plane == "real" {
                    ", real plane"
                } else {
                    ""
                },
                if v.at_least { "≥" } else { "" },
                short(v.value)
            );
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" font-size="9" fill="{colour}">{}{}</text>"##,
                x(*n) + 5.0,
                y(v.value) - 5.0,
                if v.at_least { "≥" } else { "" },
                short(v.value)
            );
        }
    }
}

/// `0.1`, `1`, `10`, `1k`, `100k`, `1M`.
fn power_label(power: i32) -> String {
    match power {
        i32::MIN..=-1 => format!("{}", 10f64.powi(power)),
        0..=2 => format!("{}", 10i64.pow(power as u32)),
        3..=5 => format!("{}k", 10i64.pow(power as u32 - 3)),
        _ => format!("{}M", 10i64.pow(power as u32 - 6)),
    }
}

fn short(value: f64) -> String {
    if value >= 100.0 || value == value.trunc() {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        // Two decimals at most, without trailing zeros: 3.75, 2.5, 0.96.
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::{ColdStartCpu, Quantiles};

    #[test]
    fn decades_cover_the_values() {
        assert_eq!(decades([1000.0, 100_000.0].into_iter()), (3, 5));
        assert_eq!(decades([250.0, 251.0].into_iter()), (2, 3));
        assert_eq!(decades([1.0].into_iter()), (0, 1));
        assert_eq!(decades([0.8, 2.0].into_iter()), (-1, 1));
        assert_eq!(decades(std::iter::empty()), (0, 1));
    }

    #[test]
    fn axes_are_labelled_in_powers_of_ten() {
        assert_eq!(power_label(-1), "0.1");
        assert_eq!(power_label(0), "1");
        assert_eq!(power_label(3), "1k");
        assert_eq!(power_label(5), "100k");
        assert_eq!(power_label(6), "1M");
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(short(3.75), "3.75");
        assert_eq!(short(2.5), "2.5");
        assert_eq!(short(35.59), "35.6");
        assert_eq!(short(900.0), "900");
        assert_eq!(short(229.4), "229");
    }

    fn size(clients: usize, workload: WorkloadKind, seconds: f64, finished: bool) -> SizeReport {
        let mut size = SizeReport {
            clients,
            workload,
            ..SizeReport::default()
        };
        size.cold_start.finished = finished;
        size.cold_start.seconds = seconds;
        size.cold_start.floor_seconds = seconds / 2.0;
        size.cold_start.reconciles_per_object = 2.0;
        size.memory.cold_start_peak_kib = clients as u64 * 3;
        size.cold_start.cpu = finished.then(|| ColdStartCpu {
            reconciler_seconds: clients as f64 / 1000.0,
            floor_seconds: clients as f64 / 2000.0,
            ..ColdStartCpu::default()
        });
        size
    }

    #[test]
    fn every_measure_has_a_panel_and_every_size_a_point() {
        let report = Report {
            sizes: vec![
                size(1000, WorkloadKind::Clients, 2.0, true),
                size(10_000, WorkloadKind::Clients, 20.0, true),
                size(100_000, WorkloadKind::Clients, 900.0, false),
                size(1000, WorkloadKind::Mixed, 3.0, true),
            ],
            ..Report::default()
        };
        let svg = plot(&report);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for measure in &MEASURES {
            assert_eq!(svg.matches(&format!(">{}<", measure.title)).count(), 1);
        }
        // Drift was not measured.
        assert_eq!(svg.matches(">not measured<").count(), 1);
        assert!(svg.contains("<title>reconciler (clients), N = 1000: 1</title>"));
        assert!(svg.contains("<title>reconciler (clients), N = 10000: 20</title>"));
        assert!(
            svg.contains("<title>floor (same work, done directly) (mixed), N = 1000: 1.5</title>")
        );
        assert!(
            svg.contains("<title>reconciler (clients), N = 100000: ≥900</title>")
                && svg.matches('≥').count() == 4,
            "only the unfinished cold start (and its reconciles) is a lower bound, in title and label"
        );
        assert!(svg.contains(">100k<") && svg.contains(">1k<"));
        assert!(svg.contains("mixed workload<"));
    }

    #[test]
    fn the_peer_is_drawn_where_it_was_measured() {
        let mut measured = size(10_000, WorkloadKind::Clients, 12.0, true);
        measured.peer = Some(PeerReport {
            finished: true,
            cold_start_seconds: 87.0,
            cold_start_cpu_seconds: Some(42.0),
            reconciles_per_object: 2.4,
            peak_kib: 359 * 1024,
            drift_latency_ms: Some(Quantiles::of(vec![3.3])),
            ..PeerReport::default()
        });
        let report = Report {
            sizes: vec![size(1000, WorkloadKind::Clients, 2.0, true), measured],
            ..Report::default()
        };
        let svg = plot(&report);
        let peer = "<title>controller-runtime peer (clients), N = 10000: ";
        for value in ["87<", "359<", "2.4<", "3.3<", "4.2<"] {
            assert!(svg.contains(&format!("{peer}{value}")), "{value}");
        }
        assert_eq!(
            svg.matches(peer).count(),
            5,
            "no point where the peer did not run"
        );
    }

    #[test]
    fn values_that_cannot_stand_on_a_log_axis_are_left_out() {
        let mut empty = size(1000, WorkloadKind::Clients, 0.0, true);
        empty.cold_start.floor_seconds = 0.0;
        let report = Report {
            sizes: vec![empty],
            ..Report::default()
        };
        let svg = plot(&report);
        assert!(!svg.contains("<title>reconciler (clients), N = 1000: 0</title>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
