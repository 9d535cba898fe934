//! The run's figures: printed as a table, written as JSON, and as the figures section of
//! docs/reliability.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::churn::ChurnCounts;
use super::invariants::Verdict;
use super::leaks::Scan;
use super::scenario::{Disruption, Scenario, Side};

/// What one scenario did and found.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    pub scenario: Scenario,
    /// Live manifests of each kind at the end.
    pub census: BTreeMap<&'static str, usize>,
    pub churn: ChurnCounts,
    pub disruption: Disruption,
    /// From the moment the faults stopped until every state invariant held.
    pub converged_after_seconds: Option<f64>,
    pub steady_writes: u64,
    pub objects_lost: u64,
    pub objects_duplicated: u64,
    pub verdicts: Vec<Verdict>,
}

impl ScenarioReport {
    pub fn holds(&self) -> bool {
        self.verdicts.iter().all(|v| v.holds)
    }

    /// `all 9 hold`, or how many broke.
    fn invariants_cell(&self) -> String {
        if self.holds() {
            format!("all {} hold", self.verdicts.len())
        } else {
            let broken = self.verdicts.iter().filter(|v| !v.holds).count();
            format!("{broken} broken")
        }
    }

    /// `faults-20: 120 operations, 48 faults, converged in 2.1 s, every invariant holds`.
    pub fn one_line(&self) -> String {
        let converged = match self.converged_after_seconds {
            Some(seconds) => format!("converged in {seconds:.1} s"),
            None => "did not converge".to_owned(),
        };
        let broken: Vec<String> = self
            .verdicts
            .iter()
            .filter(|v| !v.holds)
            .map(|v| format!("{} ({})", v.invariant, v.problems.join(" | ")))
            .collect();
        let verdict = if broken.is_empty() {
            "every invariant holds".to_owned()
        } else {
            format!("BROKEN: {}", broken.join("; "))
        };
        let d = &self.disruption;
        let faults = match self.scenario.side() {
            Side::Server => format!("{} faults, {} kills", d.faults_answered, d.kills),
            Side::Kubernetes => format!(
                "{} etcd stops ({:.0} s), {} API server restarts, {} watch breaks ({} 410 Gone met), {} partitions, {} Lease handovers, {} answers 429, {}/{}/{} deletions background/foreground/orphan",
                d.etcd_stops,
                d.etcd_stopped_seconds,
                d.api_server_restarts,
                d.watch_breaks,
                d.gone,
                d.partitions,
                d.lease_handovers,
                d.throttled,
                d.deletions.background,
                d.deletions.foreground,
                d.deletions.orphan
            ),
        };
        format!(
            "{}: {} operations, {faults}, {converged}, {verdict}",
            self.scenario.name(),
            self.churn.operations(),
        )
    }
}

/// The leak scan and its planted secret.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LeakReport {
    pub scan: Scan,
    /// Whether the secret planted in an Event was found (it must be).
    pub planted_found: bool,
}

impl LeakReport {
    /// The scans of several stacks as one: every source, every leak; the plant found in each.
    pub fn merged(reports: Vec<LeakReport>) -> LeakReport {
        let planted_found = !reports.is_empty() && reports.iter().all(|r| r.planted_found);
        let mut scan = Scan::default();
        for report in reports {
            scan.sources += report.scan.sources;
            scan.bytes_scanned += report.scan.bytes_scanned;
            scan.secrets_searched += report.scan.secrets_searched;
            scan.leaks.extend(report.scan.leaks);
        }
        LeakReport {
            scan,
            planted_found,
        }
    }
}

/// The whole run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub resources: usize,
    pub seed: u64,
    pub scenarios: Vec<ScenarioReport>,
    pub leaks: LeakReport,
    /// Processes started over the run (two, and one per kill).
    pub replica_starts: u64,
    pub duration_seconds: f64,
}

impl Report {
    /// Every invariant of every scenario holds, nothing leaked, and the plant was found.
    pub fn holds(&self) -> bool {
        self.scenarios.iter().all(ScenarioReport::holds)
            && self.leaks.scan.leaks.is_empty()
            && self.leaks.planted_found
    }

    /// What broke, one line each (empty when everything holds).
    pub fn failures(&self) -> Vec<String> {
        let mut failures: Vec<String> = self
            .scenarios
            .iter()
            .flat_map(|s| {
                s.verdicts.iter().filter(|v| !v.holds).map(move |v| {
                    format!(
                        "{}: {}: {}",
                        s.scenario.name(),
                        v.invariant,
                        v.problems.join(" | ")
                    )
                })
            })
            .collect();
        failures.extend(
            self.leaks
                .scan
                .leaks
                .iter()
                .map(|leak| format!("leak: {} in {} ({})", leak.what, leak.source, leak.form)),
        );
        if !self.leaks.planted_found {
            failures.push("the leak scan did not find the planted secret".to_owned());
        }
        failures
    }

    /// The figures as a Markdown section.
    pub fn markdown(&self) -> String {
        self.markdown_of(&[Side::Server, Side::Kubernetes])
    }

    /// The figures of the scenarios of `sides` (and the run's leak scan) as a Markdown section.
    pub fn markdown_of(&self, sides: &[Side]) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "{} manifests kept by the churn (seed {}), {} replica processes started, {:.0} s in all.\n",
            self.resources, self.seed, self.replica_starts, self.duration_seconds
        );
        let server_side: Vec<&ScenarioReport> = self
            .scenarios
            .iter()
            .filter(|s| s.scenario.side() == Side::Server && sides.contains(&Side::Server))
            .collect();
        let kubernetes_side: Vec<&ScenarioReport> = self
            .scenarios
            .iter()
            .filter(|s| s.scenario.side() == Side::Kubernetes && sides.contains(&Side::Kubernetes))
            .collect();
        if !server_side.is_empty() {
            server_table(&mut text, &server_side);
        }
        if !kubernetes_side.is_empty() {
            if !server_side.is_empty() {
                text.push('\n');
            }
            kubernetes_table(&mut text, &kubernetes_side);
        }
        let scan = &self.leaks.scan;
        let _ = writeln!(
            text,
            "\nLeak scan: {} sources ({} bytes) searched for {} secret values and private keys \
             (raw, base64, base64url, {}-character prefixes): {} found; the planted one {}.",
            scan.sources,
            scan.bytes_scanned,
            scan.secrets_searched,
            super::leaks::PREFIX_LENGTH,
            scan.leaks.len(),
            if self.leaks.planted_found {
                "was found"
            } else {
                "was NOT found"
            },
        );
        text
    }
}

/// A disruption column: its header, and its cell for one scenario.
type Column = (&'static str, fn(&Disruption) -> String);

/// The server-side scenarios' figures (on the emulator).
fn server_table(text: &mut String, scenarios: &[&ScenarioReport]) {
    let columns: [Column; 5] = [
        ("faults answered", |d| d.faults_answered.to_string()),
        ("hangs", |d| d.hangs.to_string()),
        ("kills", |d| d.kills.to_string()),
        ("partitions", |d| d.partitions.to_string()),
        ("certificates replaced", |d| {
            d.certificates_replaced.to_string()
        }),
    ];
    scenario_table(text, "scenario", &columns, scenarios);
}

/// The Kubernetes-side scenarios' figures (each on a real control plane of its own).
fn kubernetes_table(text: &mut String, scenarios: &[&ScenarioReport]) {
    let columns: [Column; 9] = [
        ("etcd stops", |d| d.etcd_stops.to_string()),
        ("etcd stopped", |d| {
            format!("{:.0} s", d.etcd_stopped_seconds)
        }),
        ("API server restarts", |d| d.api_server_restarts.to_string()),
        ("watch breaks", |d| d.watch_breaks.to_string()),
        ("410 Gone met", |d| d.gone.to_string()),
        ("partitions", |d| d.partitions.to_string()),
        ("Lease handovers", |d| d.lease_handovers.to_string()),
        ("answers 429", |d| d.throttled.to_string()),
        ("deletions (background/foreground/orphan)", |d| {
            let p = &d.deletions;
            format!("{}/{}/{}", p.background, p.foreground, p.orphan)
        }),
    ];
    scenario_table(text, "scenario (real control plane)", &columns, scenarios);
}

/// One table of scenario figures: what every scenario reports, with the `columns` of its side's
/// disruptions after the churn.
fn scenario_table(
    text: &mut String,
    first: &str,
    columns: &[Column],
    scenarios: &[&ScenarioReport],
) {
    let mut header = vec![
        first,
        "manifests at the end",
        "churn (create/update/secretName/upstream/rotate/delete)",
    ];
    header.extend(columns.iter().map(|(name, _)| *name));
    header.extend([
        "converged after",
        "steady writes",
        "lost",
        "duplicated",
        "invariants",
    ]);
    let _ = writeln!(text, "| {} |", header.join(" | "));
    let _ = writeln!(text, "|{}", "---|".repeat(header.len()));
    for s in scenarios {
        let census: Vec<String> = s.census.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let c = &s.churn;
        let mut cells = vec![
            s.scenario.name().to_owned(),
            census.join(", "),
            format!(
                "{}/{}/{}/{}/{}/{}",
                c.creates,
                c.updates,
                c.secret_name_moves,
                c.upstream_secret_changes,
                c.rotations,
                c.deletes
            ),
        ];
        cells.extend(columns.iter().map(|(_, cell)| cell(&s.disruption)));
        cells.extend([
            s.converged_after_seconds
                .map_or("not converged".to_owned(), |v| format!("{v:.1} s")),
            s.steady_writes.to_string(),
            s.objects_lost.to_string(),
            s.objects_duplicated.to_string(),
            s.invariants_cell(),
        ]);
        let _ = writeln!(text, "| {} |", cells.join(" | "));
    }
}
