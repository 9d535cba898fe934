//! The benchmark's figures: what one size measured against its floors, as JSON and as a table.

use std::collections::BTreeMap;

use comfy_table::{Table, presets::ASCII_MARKDOWN};
use serde::{Deserialize, Serialize};

use super::floor::ColdStartFloor;
use super::measure::{Calls, Resident, quantile};
use super::workload::{Composition, WorkloadKind};

/// One run of the program. Every part has a default, so that the JSON of an earlier run, with
/// fewer figures, can be read back (`--replot`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Report {
    /// When the run started (RFC 3339).
    pub started_at: String,
    /// `release` or `debug`: the profile of the binaries measured.
    pub profile: String,
    pub cores: usize,
    /// The reconciler's settings the run used (its production defaults unless said otherwise).
    pub reconciler_settings: BTreeMap<String, String>,
    pub sizes: Vec<SizeReport>,
    /// The median and spread of each size measured more than once (`--repeat`).
    pub repeated: Vec<super::repeated::Repeated>,
    /// The plugin against kubectl on workloads with no reconciler (the largest sizes).
    pub plugin_only: Vec<PluginReport>,
}

/// What a real control plane ran as.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RealPlaneFacts {
    pub version: String,
    pub api_server_flags: Vec<String>,
}

/// Everything measured at one size of one workload.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SizeReport {
    /// `clients` or `mixed` (`docs/performance.md` says what each holds).
    pub workload: WorkloadKind,
    /// The control plane measured on: `emulator` or `real` (empty in reports from before the
    /// real plane was measured, which ran on the emulator).
    pub plane: String,
    /// The real control plane's version and kube-apiserver flags (ports and file paths
    /// included, no credentials); none on the emulator.
    pub real_plane: Option<RealPlaneFacts>,
    /// N, the `--clients` value: the number of manifests of every kind (for the clients
    /// workload, the number of OIDCClients).
    pub clients: usize,
    /// How many manifests of each kind the workload holds.
    pub composition: Composition,
    pub namespaces: usize,
    /// How long creating the workload took (not measured against anything).
    pub setup_seconds: f64,
    pub cold_start: ColdStart,
    pub steady: Option<Steady>,
    pub drift: Option<DriftLatency>,
    pub memory: Memory,
    pub plugin: Option<PluginReport>,
    /// The cold start's cost divided by N (absent before the cold start is measured).
    pub per_object: Option<PerObject>,
    /// The controller-runtime peer on the same workload (`--peer`, clients workload only).
    pub peer: Option<super::peer::PeerReport>,
    /// Why a part was not measured, or anything else a reader must know.
    pub notes: Vec<String>,
}

/// A size's cost per object: the cold start's wall and CPU time and the peak resident set,
/// each divided by N. The fixed cost (start-up, caches' base) is in it, so it falls with N
/// where the cost grows less than linearly.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct PerObject {
    pub wall_ms: f64,
    /// The reconciler's own CPU (stand-ins apart), when the cold start finished.
    pub cpu_ms: Option<f64>,
    /// The floor's CPU, its stand-ins included, when measured.
    pub floor_cpu_ms: Option<f64>,
    pub peak_kib: f64,
}

impl PerObject {
    pub fn of(size: &SizeReport) -> Option<PerObject> {
        let n = size.clients as f64;
        let cold = &size.cold_start;
        (size.clients > 0 && cold.finished).then(|| PerObject {
            wall_ms: cold.seconds * 1000.0 / n,
            cpu_ms: cold
                .cpu
                .as_ref()
                .map(|cpu| cpu.reconciler_seconds * 1000.0 / n),
            floor_cpu_ms: cold.cpu.as_ref().map(|cpu| cpu.floor_seconds * 1000.0 / n),
            peak_kib: size.memory.cold_start_peak_kib as f64 / n,
        })
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ColdStart {
    /// Whether every manifest was Registered (every client with its Secret) before the timeout.
    pub finished: bool,
    /// Until the last manifest was done, or until the timeout.
    pub seconds: f64,
    pub timeout_seconds: f64,
    /// Manifests Registered (clients with their Secret) at the end.
    pub complete: usize,
    /// The same, per kind (`OIDCClient`, `Branding`, ...).
    pub complete_by_kind: BTreeMap<String, usize>,
    pub floor_seconds: f64,
    /// The full floor's CPU time, reported whether or not the cold start finished.
    pub floor_cpu_seconds: f64,
    /// `seconds / floor_seconds`, when finished.
    pub ratio: Option<f64>,
    /// The CPU time it took, when finished: on two shared cores the wall time follows it, and
    /// it moves less from run to run.
    pub cpu: Option<ColdStartCpu>,
    pub reconciles: f64,
    pub reconciles_per_object: f64,
    pub server_calls: Calls,
    pub floor_server_calls: Calls,
    /// The reconciler's Kubernetes requests, keyed `verb resource`.
    pub kube_requests: Calls,
    pub floor_kube_requests: Calls,
    /// The floor of earlier rounds, which leaves out the finalizer patch and the Event.
    pub registration_floor: RegistrationFloor,
}

/// The registration-only floor (the server write, the status patch and the Secret create per
/// manifest, no finalizer, no Event) and the cold start against it, so that earlier rounds'
/// ratios still compare. Every other ratio is against the full floor.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RegistrationFloor {
    pub seconds: f64,
    /// The cold start's wall time over this floor's, when finished.
    pub ratio: Option<f64>,
    /// Its CPU time, its stand-ins and the benchmark's watches included.
    pub cpu_seconds: f64,
    /// Reconciler and stand-ins together over this floor's CPU, when finished.
    pub cpu_ratio: Option<f64>,
    pub server_calls: Calls,
    pub kube_requests: Calls,
}

impl RegistrationFloor {
    /// The floor as measured, against the cold start's wall and CPU seconds (when finished).
    pub fn against(
        floor: ColdStartFloor,
        seconds: Option<f64>,
        cpu_seconds: Option<f64>,
    ) -> RegistrationFloor {
        let wall = floor.elapsed.as_secs_f64();
        RegistrationFloor {
            seconds: wall,
            ratio: seconds.and_then(|s| ratio(s, wall)),
            cpu_seconds: floor.cpu_seconds,
            cpu_ratio: cpu_seconds.and_then(|s| ratio(s, floor.cpu_seconds)),
            server_calls: floor.server_calls,
            kube_requests: floor.kube_requests,
        }
    }
}

/// The CPU time of a cold start and of its floor, in seconds.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ColdStartCpu {
    pub reconciler_seconds: f64,
    /// The benchmark's own process: the emulator, the fake server and its watches.
    pub stand_ins_seconds: f64,
    /// The real control plane's own processes (kube-apiserver, etcd, kube-controller-manager)
    /// during the reconciler's cold start; none on the emulator, whose CPU is in
    /// `stand_ins_seconds`. Shown beside the ratio, never in it.
    pub plane_seconds: Option<f64>,
    /// The floor's, its stand-ins and the same watches included.
    pub floor_seconds: f64,
    /// The floor's own process alone, the counterpart of `reconciler_seconds` (none in the
    /// figures of runs before the floor ran as a process of its own).
    pub floor_own_seconds: Option<f64>,
    /// The real control plane's own processes during the floor's cold start.
    pub floor_plane_seconds: Option<f64>,
    /// Reconciler and stand-ins together, against the floor.
    pub ratio: Option<f64>,
}

impl ColdStartCpu {
    /// The floor's stand-ins alone (its whole without its own process), when the floor ran as a
    /// process of its own.
    pub fn floor_stand_ins_seconds(&self) -> Option<f64> {
        self.floor_own_seconds.map(|own| self.floor_seconds - own)
    }

    /// The reconciler's own process against the floor's own: one half of the CPU ratio's gap.
    pub fn own_ratio(&self) -> Option<f64> {
        ratio(self.reconciler_seconds, self.floor_own_seconds?)
    }

    /// The stand-ins serving the reconciler against the same serving the floor: the other half.
    pub fn stand_ins_ratio(&self) -> Option<f64> {
        ratio(self.stand_ins_seconds, self.floor_stand_ins_seconds()?)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Steady {
    pub window_seconds: f64,
    pub server_calls_per_minute: BTreeMap<String, f64>,
    /// The least a reconciler must call: its control-plane probe.
    pub floor_server_calls_per_minute: BTreeMap<String, f64>,
    pub server_writes: u64,
    /// Kubernetes writes other than Lease renewals, keyed `verb resource`.
    pub kube_writes: Calls,
    pub lease_writes: u64,
    pub reconciles: f64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DriftLatency {
    pub edits: usize,
    /// Edits whose Drifted status was seen before the timeout.
    pub detected: usize,
    pub latency_ms: Quantiles,
    pub floor_latency_ms: Quantiles,
    /// `latency p95 / floor p95`.
    pub ratio_p95: Option<f64>,
    pub reconciles_per_edit: Quantiles,
    pub server_calls_per_edit: Quantiles,
}

#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct Quantiles {
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
}

impl Quantiles {
    /// The median, the 95th percentile (nearest rank) and the largest of some values (0 for none).
    pub fn of(mut values: Vec<f64>) -> Quantiles {
        values.sort_by(f64::total_cmp);
        Quantiles {
            p50: quantile(&values, 0.5),
            p95: quantile(&values, 0.95),
            max: values.last().copied().unwrap_or_default(),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Memory {
    /// The reconciler's peak resident set (VmHWM) when the cold start ended.
    pub cold_start_peak_kib: u64,
    /// The reconciler idle with every client Registered.
    pub idle: Option<Resident>,
    /// A bare kube-rs reflector holding the same manifests (of every kind the workload holds)
    /// and Secrets.
    pub floor: Option<Resident>,
    /// `idle.rss / floor.rss`.
    pub ratio_idle: Option<f64>,
}

/// `kubectl nauthera status -A` against `kubectl get oidcclients -A`, table and JSON.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PluginReport {
    /// The control plane the commands read from (`emulator` in reports from before there was a
    /// choice).
    pub plane: String,
    pub clients: usize,
    pub runs: usize,
    pub commands: Vec<CommandFigures>,
    /// Per output format: the plugin's median CPU time and peak memory over kubectl's.
    pub ratios: Vec<PluginRatio>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct CommandFigures {
    pub command: String,
    pub format: String,
    pub median_cpu_seconds: f64,
    pub median_wall_seconds: f64,
    pub median_peak_kib: u64,
    /// Runs that ended in an error (the medians are of the other runs).
    pub failed_runs: usize,
    /// The last line of the first failed run's error output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct PluginRatio {
    pub format: String,
    /// `through kubectl` (what a user runs) or `alone` (the plugin's own process).
    pub plugin: String,
    /// None when a run of either command failed: a failed run's cost says nothing.
    pub cpu: Option<f64>,
    pub peak_memory: Option<f64>,
}

/// `a / b`, when `b` is not zero.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

fn number(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn optional_ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}x"))
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn calls(calls: &Calls) -> String {
    calls
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl SizeReport {
    /// The plane measured on (`emulator` for reports from before there was a choice).
    pub fn plane_name(&self) -> &str {
        if self.plane.is_empty() {
            "emulator"
        } else {
            &self.plane
        }
    }
}

impl Report {
    /// The figures as Markdown tables: one row per measure and size, grouped by plane.
    pub fn table(&self) -> String {
        let mut table = Table::new();
        table.load_style(ASCII_MARKDOWN);
        table.set_header(vec![
            "N",
            "plane",
            "workload",
            "measure",
            "reconciler",
            "floor",
            "ratio",
        ]);
        let mut planes: Vec<&str> = Vec::new();
        for size in &self.sizes {
            if !planes.contains(&size.plane_name()) {
                planes.push(size.plane_name());
            }
        }
        let grouped = planes.iter().flat_map(|plane| {
            self.sizes
                .iter()
                .filter(move |size| size.plane_name() == *plane)
        });
        for size in grouped {
            let n = size.clients.to_string();
            let plane = size.plane_name().to_owned();
            let workload = size.workload.name().to_owned();
            if size.workload == WorkloadKind::Mixed {
                table.add_row(vec![
                    n.clone(),
                    plane.clone(),
                    workload.clone(),
                    "manifests".into(),
                    size.composition.describe(),
                    String::new(),
                    String::new(),
                ]);
            }
            let cold = &size.cold_start;
            let measured = if cold.finished {
                format!("{} s", number(cold.seconds))
            } else {
                format!(
                    "{} of {} after {} s (timeout)",
                    cold.complete,
                    size.clients,
                    number(cold.seconds)
                )
            };
            table.add_row(vec![
                n.clone(),
                plane.clone(),
                workload.clone(),
                "cold start".into(),
                measured,
                format!("{} s", number(cold.floor_seconds)),
                optional_ratio(cold.ratio),
            ]);
            if let Some(cpu) = &cold.cpu {
                table.add_row(vec![
                    n.clone(),
                    plane.clone(),
                    workload.clone(),
                    "cold start CPU (reconciler + stand-ins)".into(),
                    format!(
                        "{} s + {} s",
                        number(cpu.reconciler_seconds),
                        number(cpu.stand_ins_seconds)
                    ),
                    match cpu.floor_own_seconds.zip(cpu.floor_stand_ins_seconds()) {
                        Some((own, stand_ins)) => {
                            format!("{} s + {} s", number(own), number(stand_ins))
                        }
                        None => format!("{} s", number(cpu.floor_seconds)),
                    },
                    optional_ratio(cpu.ratio),
                ]);
                if cpu.plane_seconds.is_some() || cpu.floor_plane_seconds.is_some() {
                    let seconds =
                        |s: Option<f64>| s.map_or(String::new(), |s| format!("{} s", number(s)));
                    table.add_row(vec![
                        n.clone(),
                        plane.clone(),
                        workload.clone(),
                        "cold start CPU of the control plane (kube-apiserver, etcd, kube-controller-manager)".into(),
                        seconds(cpu.plane_seconds),
                        seconds(cpu.floor_plane_seconds),
                        String::new(),
                    ]);
                }
            }
            let registration = &cold.registration_floor;
            table.add_row(vec![
                n.clone(),
                plane.clone(),
                workload.clone(),
                "cold start against the registration-only floor (wall; CPU)".into(),
                String::new(),
                format!(
                    "{} s; {} s",
                    number(registration.seconds),
                    number(registration.cpu_seconds)
                ),
                format!(
                    "{}; {}",
                    optional_ratio(registration.ratio),
                    optional_ratio(registration.cpu_ratio)
                ),
            ]);
            table.add_row(vec![
                n.clone(),
                plane.clone(),
                workload.clone(),
                "reconciles per object".into(),
                number(cold.reconciles_per_object),
                "1".into(),
                format!("{:.2}x", cold.reconciles_per_object),
            ]);
            table.add_row(vec![
                n.clone(),
                plane.clone(),
                workload.clone(),
                "cold start server calls".into(),
                calls(&cold.server_calls),
                calls(&cold.floor_server_calls),
                String::new(),
            ]);
            table.add_row(vec![
                n.clone(),
                plane.clone(),
                workload.clone(),
                "cold start Kubernetes requests".into(),
                calls(&cold.kube_requests),
                calls(&cold.floor_kube_requests),
                String::new(),
            ]);
            if let Some(steady) = &size.steady {
                // `+ 0.0` turns the empty sum's -0.0 into 0.
                let per_minute: f64 = steady.server_calls_per_minute.values().sum::<f64>() + 0.0;
                let floor: f64 = steady.floor_server_calls_per_minute.values().sum::<f64>() + 0.0;
                table.add_row(vec![
                    n.clone(),
                    plane.clone(),
                    workload.clone(),
                    format!(
                        "steady server calls/min ({} s)",
                        number(steady.window_seconds)
                    ),
                    format!(
                        "{} ({})",
                        number(per_minute),
                        steady
                            .server_calls_per_minute
                            .iter()
                            .map(|(k, v)| format!("{k} {}", number(*v)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    number(floor),
                    optional_ratio(ratio(per_minute, floor)),
                ]);
                table.add_row(vec![
                    n.clone(),
                    plane.clone(),
                    workload.clone(),
                    "steady writes (server; Kubernetes but Leases)".into(),
                    format!(
                        "{}; {} ({}), Lease {}",
                        steady.server_writes,
                        steady.kube_writes.values().sum::<u64>(),
                        calls(&steady.kube_writes),
                        steady.lease_writes
                    ),
                    "0; 0".into(),
                    String::new(),
                ]);
            }
            if let Some(drift) = &size.drift {
                table.add_row(vec![
                    n.clone(),
                    plane.clone(),
                    workload.clone(),
                    format!("drift latency p50/p95/max ({} edits)", drift.edits),
                    format!(
                        "{:.0}/{:.0}/{:.0} ms ({} seen)",
                        drift.latency_ms.p50,
                        drift.latency_ms.p95,
                        drift.latency_ms.max,
                        drift.detected
                    ),
                    format!(
                        "{:.0}/{:.0}/{:.0} ms",
                        drift.floor_latency_ms.p50,
                        drift.floor_latency_ms.p95,
                        drift.floor_latency_ms.max
                    ),
                    optional_ratio(drift.ratio_p95),
                ]);
                table.add_row(vec![
                    n.clone(),
                    plane.clone(),
                    workload.clone(),
                    "per edit: reconciles, server calls (p50/max)".into(),
                    format!(
                        "{}/{}, {}/{}",
                        number(drift.reconciles_per_edit.p50),
                        number(drift.reconciles_per_edit.max),
                        number(drift.server_calls_per_edit.p50),
                        number(drift.server_calls_per_edit.max)
                    ),
                    "1, 0".into(),
                    String::new(),
                ]);
            }
            let memory = &size.memory;
            table.add_row(vec![
                n.clone(),
                plane.clone(),
                workload.clone(),
                "memory: cold-start peak; idle RSS".into(),
                format!(
                    "{}; {}",
                    mib(memory.cold_start_peak_kib),
                    memory.idle.map_or_else(|| "-".into(), |r| mib(r.rss_kib))
                ),
                memory
                    .floor
                    .map_or_else(|| "-".into(), |r| format!("{} (reflector)", mib(r.rss_kib))),
                optional_ratio(memory.ratio_idle),
            ]);
            if let Some(cost) = &size.per_object {
                let cpu = |ms: Option<f64>| ms.map_or_else(|| "-".into(), |ms| format!("{ms:.3}"));
                table.add_row(vec![
                    n.clone(),
                    plane.clone(),
                    workload.clone(),
                    "per object: wall ms; CPU ms; peak KiB".into(),
                    format!(
                        "{:.3}; {}; {:.2}",
                        cost.wall_ms,
                        cpu(cost.cpu_ms),
                        cost.peak_kib
                    ),
                    format!(
                        "{:.3}; {} (stand-ins included)",
                        cold.floor_seconds * 1000.0 / size.clients.max(1) as f64,
                        cpu(cost.floor_cpu_ms)
                    ),
                    String::new(),
                ]);
            }
            if let Some(plugin) = &size.plugin {
                plugin_rows(&mut table, plugin);
            }
            if let Some(peer) = &size.peer {
                super::peer::rows(&mut table, size, peer);
            }
        }
        for repeated in &self.repeated {
            super::repeated::rows(&mut table, repeated);
        }
        for plugin in &self.plugin_only {
            plugin_rows(&mut table, plugin);
        }
        let mut text = table.to_string();
        for size in &self.sizes {
            for note in &size.notes {
                text.push_str(&format!(
                    "\nN={} ({} workload): {note}",
                    size.clients, size.workload
                ));
            }
        }
        text
    }
}

fn plugin_rows(table: &mut Table, plugin: &PluginReport) {
    for ratio in &plugin.ratios {
        let of = |wanted: fn(&str) -> bool| {
            plugin
                .commands
                .iter()
                .find(|c| c.format == ratio.format && wanted(&c.command))
                .cloned()
                .unwrap_or_default()
        };
        let ours = if ratio.plugin == "alone" {
            of(|c| c.contains("(alone)"))
        } else {
            of(|c| c.starts_with("kubectl nauthera"))
        };
        let theirs = of(|c| c.starts_with("kubectl get"));
        table.add_row(vec![
            plugin.clients.to_string(),
            if plugin.plane.is_empty() {
                "emulator".to_owned()
            } else {
                plugin.plane.clone()
            },
            WorkloadKind::Clients.name().to_owned(),
            format!(
                "plugin status -A {}, {} (CPU; peak)",
                ratio.plugin, ratio.format
            ),
            format!(
                "{} s; {}",
                number(ours.median_cpu_seconds),
                mib(ours.median_peak_kib)
            ),
            format!(
                "{} s; {} (kubectl get)",
                number(theirs.median_cpu_seconds),
                mib(theirs.median_peak_kib)
            ),
            match (ratio.cpu, ratio.peak_memory) {
                (Some(cpu), Some(peak)) => format!("{cpu:.2}x; {peak:.2}x"),
                _ => failures(&[&ours, &theirs], plugin.runs),
            },
        ]);
    }
}

/// Why a plugin ratio is missing: the failed runs of each command, with what the first said.
fn failures(commands: &[&CommandFigures], runs: usize) -> String {
    commands
        .iter()
        .filter(|command| command.failed_runs > 0)
        .map(|command| {
            format!(
                "{}: {} of {runs} runs failed ({})",
                command.command,
                command.failed_runs,
                command
                    .first_failure
                    .as_deref()
                    .unwrap_or("no error output")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
