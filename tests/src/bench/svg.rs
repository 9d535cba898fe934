//! The plot in `docs/performance.md`: cold start against its floor, and reconciles per object,
//! at each size measured. Plain SVG, written by hand: two panels of bars on a shared size axis.

use std::fmt::Write;

use super::report::{Report, SizeReport};
use super::workload::WorkloadKind;

const PANEL_WIDTH: f64 = 360.0;
const PANEL_HEIGHT: f64 = 240.0;
const MARGIN: f64 = 48.0;

struct Bar {
    label: &'static str,
    value: f64,
    colour: &'static str,
    /// Drawn hatched: the value is a lower bound (the run hit its timeout).
    at_least: bool,
}

/// The label under a group: `N = 1000`, and the workload's name unless it is the clients one.
fn group_label(size: &SizeReport) -> String {
    match size.workload {
        WorkloadKind::Clients => format!("N = {}", size.clients),
        other => format!("N = {} {other}", size.clients),
    }
}

/// One group of bars a size: the reconciler's figure beside its floor's.
fn groups(report: &Report, figures: fn(&SizeReport) -> (f64, f64)) -> Vec<(String, Vec<Bar>)> {
    report
        .sizes
        .iter()
        .map(|size| {
            let (reconciler, floor) = figures(size);
            let bars = vec![
                Bar {
                    label: "reconciler",
                    value: reconciler,
                    colour: "#c0392b",
                    at_least: !size.cold_start.finished,
                },
                Bar {
                    label: "floor",
                    value: floor,
                    colour: "#7f8c8d",
                    at_least: false,
                },
            ];
            (group_label(size), bars)
        })
        .collect()
}

/// The SVG document for a report.
pub fn plot(report: &Report) -> String {
    let cold = groups(report, |s| {
        (s.cold_start.seconds, s.cold_start.floor_seconds)
    });
    // The floor reconciles nothing: it does each object's work once.
    let reconciles = groups(report, |s| (s.cold_start.reconciles_per_object, 1.0));
    let width = 2.0 * (PANEL_WIDTH + MARGIN) + MARGIN;
    let height = PANEL_HEIGHT + 2.0 * MARGIN + 24.0;
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="#ffffff"/>
<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#c0392b"/><line x1="0" y1="0" x2="0" y2="6" stroke="#ffffff" stroke-width="3"/></pattern></defs>
"##
    );
    panel(&mut svg, MARGIN, "Cold start (seconds)", &cold);
    panel(
        &mut svg,
        2.0 * MARGIN + PANEL_WIDTH,
        "Reconciles per object",
        &reconciles,
    );
    let legend_y = height - 12.0;
    let _ = writeln!(
        svg,
        r##"<rect x="{MARGIN}" y="{}" width="10" height="10" fill="#c0392b"/><text x="{}" y="{legend_y}">reconciler</text><rect x="{}" y="{}" width="10" height="10" fill="#7f8c8d"/><text x="{}" y="{legend_y}">floor (same work, done directly)</text><rect x="{}" y="{}" width="10" height="10" fill="url(#hatch)"/><text x="{}" y="{legend_y}">stopped at the timeout (at least this)</text>"##,
        legend_y - 9.0,
        MARGIN + 14.0,
        MARGIN + 90.0,
        legend_y - 9.0,
        MARGIN + 104.0,
        MARGIN + 300.0,
        legend_y - 9.0,
        MARGIN + 314.0,
    );
    svg.push_str("</svg>\n");
    svg
}

fn panel(svg: &mut String, left: f64, title: &str, groups: &[(String, Vec<Bar>)]) {
    let top = MARGIN;
    let bottom = top + PANEL_HEIGHT;
    let max = groups
        .iter()
        .flat_map(|(_, bars)| bars.iter().map(|b| b.value))
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let scale = nice_ceiling(max);
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="{}" font-size="13" font-weight="bold">{title}</text>"##,
        left,
        top - 16.0
    );
    for step in 0..=4 {
        let value = scale * f64::from(step) / 4.0;
        let y = bottom - PANEL_HEIGHT * f64::from(step) / 4.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#dddddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + PANEL_WIDTH,
            left - 4.0,
            y + 4.0,
            short(value)
        );
    }
    let group_width = PANEL_WIDTH / groups.len().max(1) as f64;
    for (index, (label, bars)) in groups.iter().enumerate() {
        let group_left = left + group_width * index as f64;
        let bar_width = group_width * 0.7 / bars.len().max(1) as f64;
        for (b, bar) in bars.iter().enumerate() {
            let x = group_left + group_width * 0.15 + bar_width * b as f64;
            let h = PANEL_HEIGHT * bar.value / scale;
            let fill = if bar.at_least {
                "url(#hatch)".to_owned()
            } else {
                bar.colour.to_owned()
            };
            let _ = writeln!(
                svg,
                r##"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{fill}"><title>{}: {}</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle">{}{}</text>"##,
                bottom - h,
                bar_width - 2.0,
                bar.label,
                short(bar.value),
                x + bar_width / 2.0 - 1.0,
                bottom - h - 3.0,
                if bar.at_least { "≥" } else { "" },
                short(bar.value)
            );
        }
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            group_left + group_width / 2.0,
            bottom + 16.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<line x1="{left}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="#333333"/>"##,
        left + PANEL_WIDTH
    );
}

/// The smallest of 1, 2, 2.5, 5 times a power of ten that is at least `value`.
fn nice_ceiling(value: f64) -> f64 {
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|candidate| *candidate >= value)
        .unwrap_or(10.0 * power)
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

    #[test]
    fn scales_round_up_to_readable_steps() {
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(220.0), 250.0);
        assert_eq!(nice_ceiling(0.9), 1.0);
        assert_eq!(nice_ceiling(39.0), 50.0);
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(short(3.75), "3.75");
        assert_eq!(short(2.5), "2.5");
        assert_eq!(short(35.59), "35.6");
        assert_eq!(short(900.0), "900");
        assert_eq!(short(229.4), "229");
    }

    #[test]
    fn every_size_has_its_bars() {
        let mut report = Report::default();
        for (clients, workload, seconds, finished) in [
            (1000, WorkloadKind::Clients, 12.0, true),
            (10000, WorkloadKind::Clients, 900.0, false),
            (1000, WorkloadKind::Mixed, 14.0, true),
        ] {
            let mut size = SizeReport {
                clients,
                workload,
                ..SizeReport::default()
            };
            size.cold_start.finished = finished;
            size.cold_start.seconds = seconds;
            size.cold_start.floor_seconds = 3.0;
            size.cold_start.reconciles_per_object = 2.5;
            report.sizes.push(size);
        }
        let svg = plot(&report);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("N = 1000<").count(), 2);
        assert_eq!(svg.matches("N = 10000<").count(), 2);
        assert_eq!(svg.matches("N = 1000 mixed<").count(), 2);
        assert_eq!(svg.matches("<title>reconciler: 12</title>").count(), 1);
        assert!(
            svg.contains(">≥900<") && svg.matches('≥').count() == 2,
            "only the unfinished cold start (and its reconciles) is a lower bound"
        );
    }
}
