//! Readings the benchmark takes: a process's resident set from `/proc`, the fake server's and the
//! emulator's counters as differences between two moments, the reconciler's reconcile count, and
//! a child's CPU time and peak memory through a measuring wrapper process.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nauthera_kube_emulator::{Emulator, RequestKey};
use serde::{Deserialize, Serialize};

use crate::e2e::{RECONCILER_ACCOUNT, RECONCILER_NAMESPACE, Reconciler, metric_sum};

/// The user the reconciler's requests come from.
pub fn reconciler_user() -> String {
    format!("system:serviceaccount:{RECONCILER_NAMESPACE}:{RECONCILER_ACCOUNT}")
}

/// A process's resident set now and at its peak, in KiB.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Resident {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

/// Reads `VmRSS` and `VmHWM` of a running process.
pub fn resident(pid: u32) -> anyhow::Result<Resident> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let field = |name: &str| -> anyhow::Result<u64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .with_context(|| format!("/proc/{pid}/status has no {name}"))
    };
    Ok(Resident {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

/// The CPU time (user and system, every thread) a process has used so far, in seconds. `/proc`
/// counts it in ticks of 1/100 s (Linux's `USER_HZ`).
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after it start at the state.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |index: usize| -> anyhow::Result<u64> {
        fields
            .get(index)
            .and_then(|field| field.parse().ok())
            .with_context(|| format!("/proc/{pid}/stat has no CPU time"))
    };
    // utime and stime are fields 14 and 15; the rest begins at field 3.
    Ok((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// The CPU time this process (the benchmark, with the emulator, the fake server and its
/// watches) has used so far, in seconds.
pub fn own_cpu_seconds() -> anyhow::Result<f64> {
    cpu_seconds(std::process::id())
}

/// Server calls per method (gRPC name).
pub type Calls = BTreeMap<String, u64>;

/// `after - before`, per key, keeping only keys that moved.
pub fn difference(after: &Calls, before: &Calls) -> Calls {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// Kubernetes requests of the reconciler's user, keyed `verb resource`.
pub fn reconciler_requests(emulator: &Emulator) -> Calls {
    let user = reconciler_user();
    emulator
        .request_counts()
        .into_iter()
        .filter(|(RequestKey { user: u, .. }, _)| *u == user)
        .map(|(key, count)| (format!("{} {}", key.verb, key.resource), count))
        .collect()
}

/// Kubernetes requests of every user, keyed `verb resource`.
pub fn all_requests(emulator: &Emulator) -> Calls {
    let mut all = Calls::new();
    for (key, count) in emulator.request_counts() {
        *all.entry(format!("{} {}", key.verb, key.resource))
            .or_default() += count;
    }
    all
}

/// Where a run's Kubernetes request counts come from: the emulator's tally by user, or on a real
/// control plane the API server's `/metrics` (`apiserver_request_total`), which counts every
/// client's requests together (no user label): on a plane of the run's own those are the
/// reconciler's or the floor's, the benchmark's watches and kube-controller-manager's.
pub enum RequestCounter<'a> {
    Emulator(&'a Emulator),
    ApiServer(kube::Client),
}

impl<'a> RequestCounter<'a> {
    /// The counter of `cluster`'s plane.
    pub fn of(cluster: &'a crate::cluster::TestCluster) -> RequestCounter<'a> {
        match cluster.emulator() {
            Some(emulator) => RequestCounter::Emulator(emulator),
            None => RequestCounter::ApiServer(cluster.client()),
        }
    }

    /// The reconciler's requests (on a real plane, every client's: see [`RequestCounter`]).
    pub async fn reconciler(&self) -> anyhow::Result<Calls> {
        match self {
            RequestCounter::Emulator(emulator) => Ok(reconciler_requests(emulator)),
            RequestCounter::ApiServer(client) => api_server_requests(client).await,
        }
    }

    /// Every client's requests.
    pub async fn all(&self) -> anyhow::Result<Calls> {
        match self {
            RequestCounter::Emulator(emulator) => Ok(all_requests(emulator)),
            RequestCounter::ApiServer(client) => api_server_requests(client).await,
        }
    }
}

/// The API server's request counts so far, keyed `verb resource` as the emulator keys them.
pub async fn api_server_requests(client: &kube::Client) -> anyhow::Result<Calls> {
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await
        .context("cannot read the API server's /metrics")?;
    Ok(parse_request_totals(&text))
}

/// `apiserver_request_total` lines summed by verb and resource (with its subresource), the
/// verbs named as RBAC names them.
fn parse_request_totals(text: &str) -> Calls {
    let mut calls = Calls::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or_default()
        };
        let verb = match label("verb") {
            "POST" => "create",
            "PUT" => "update",
            "PATCH" | "APPLY" => "patch",
            "DELETE" => "delete",
            "DELETECOLLECTION" => "deletecollection",
            "GET" => "get",
            "LIST" => "list",
            "WATCH" | "WATCHLIST" => "watch",
            _ => continue,
        };
        let resource = match (label("resource"), label("subresource")) {
            ("", _) => continue,
            (resource, "") => resource.to_owned(),
            (resource, sub) => format!("{resource}/{sub}"),
        };
        let count = value.trim().parse::<f64>().unwrap_or_default() as u64;
        *calls.entry(format!("{verb} {resource}")).or_default() += count;
    }
    calls
}

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The writes among requests keyed `verb resource`.
pub fn writes(requests: &Calls) -> Calls {
    requests
        .iter()
        .filter(|(key, _)| {
            key.split_once(' ')
                .is_some_and(|(verb, _)| WRITE_VERBS.contains(&verb))
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// How many reconciles the replica has started, of every kind and outcome (the reconcile timer
/// counts each one, including those that end without a verdict).
pub async fn reconciles(reconciler: &Reconciler) -> f64 {
    metric_sum(
        &reconciler.metrics().await,
        "nauthera_operator_reconcile_duration_seconds_count",
        &[],
    )
}

/// The replica's reconcile count once it has not moved for a second (or after `at_most`).
pub async fn quiet_reconciles(reconciler: &Reconciler, at_most: std::time::Duration) -> f64 {
    const QUIET: std::time::Duration = std::time::Duration::from_secs(1);
    let deadline = tokio::time::Instant::now() + at_most;
    let mut count = reconciles(reconciler).await;
    let mut since = tokio::time::Instant::now();
    while tokio::time::Instant::now() < deadline && since.elapsed() < QUIET {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let now = reconciles(reconciler).await;
        if now != count {
            count = now;
            since = tokio::time::Instant::now();
        }
    }
    count
}

/// What one measured run of a command cost.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Usage {
    /// User plus system CPU time of the command and everything it ran.
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    /// The largest resident set of the command (or of what it exec'd), in KiB.
    pub peak_kib: u64,
    pub exit_code: i32,
    pub stdout_bytes: u64,
    /// The last line the command wrote to its error output (where a failing command says why),
    /// shortened; empty when it wrote none.
    #[serde(default)]
    pub last_error_line: String,
}

/// Runs `program` under the measuring wrapper (`bench_exe measure -- program args`), which has no
/// other child, so its children's resource usage is exactly the command's.
pub fn measured(
    bench_exe: &Path,
    program: &Path,
    args: &[String],
    env: &[(String, String)],
) -> anyhow::Result<Usage> {
    let output = Command::new(bench_exe)
        .arg("measure")
        .arg("--")
        .arg(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", bench_exe.display()))?;
    if !output.status.success() {
        bail!("the measuring wrapper failed ({})", output.status);
    }
    serde_json::from_slice(&output.stdout).context("the measuring wrapper printed no usage")
}

/// The wrapper's side: runs the command with its output counted and discarded, then prints its
/// [`Usage`] as one JSON line.
pub fn measure_child(command: &[String]) -> anyhow::Result<()> {
    let (program, args) = command
        .split_first()
        .context("measure needs a command to run")?;
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {program}"))?;
    let mut stdout = child.stdout.take().context("no stdout")?;
    let stderr = child.stderr.take().context("no stderr")?;
    // Read beside standard output, so that neither pipe fills while the other is drained.
    let last_error_line = std::thread::spawn(move || last_line(std::io::BufReader::new(stderr)));
    let stdout_bytes = std::io::copy(&mut stdout, &mut std::io::sink())?;
    let status = child.wait()?;
    let last_error_line = last_error_line.join().unwrap_or_default();
    let wall = started.elapsed();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .context("getrusage failed")?;
    let seconds = |t: nix::sys::time::TimeVal| {
        Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000).as_secs_f64()
    };
    let usage = Usage {
        cpu_seconds: seconds(usage.user_time()) + seconds(usage.system_time()),
        wall_seconds: wall.as_secs_f64(),
        peak_kib: usage.max_rss().max(0) as u64,
        exit_code: status.code().unwrap_or(-1),
        stdout_bytes,
        last_error_line,
    };
    println!("{}", serde_json::to_string(&usage)?);
    Ok(())
}

/// The last non-empty line of `text`, at most [`ERROR_LINE_CHARS`] characters of it.
fn last_line(text: impl std::io::BufRead) -> String {
    let last = text
        .lines()
        .map_while(Result::ok)
        .filter(|line| !line.trim().is_empty())
        .last()
        .unwrap_or_default();
    last.trim().chars().take(ERROR_LINE_CHARS).collect()
}

/// Enough of an error line to name the cause in a report.
const ERROR_LINE_CHARS: usize = 300;

/// The median of some values (the lower middle one for an even count); 0 for none.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[(values.len() - 1) / 2]
}

/// The value at quantile `q` (nearest rank) of sorted values; 0 for none.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_error_line_is_the_last_one_written_and_shortened() {
        let text = "warning: first\nerror: the cause\n\n  \n";
        assert_eq!(last_line(text.as_bytes()), "error: the cause");
        assert_eq!(last_line("".as_bytes()), "");
        let long = "x".repeat(ERROR_LINE_CHARS * 2);
        assert_eq!(last_line(long.as_bytes()).len(), ERROR_LINE_CHARS);
    }

    #[test]
    fn api_server_request_totals_are_keyed_as_the_emulator_keys_them() {
        let text = r#"# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="nauthera.io",resource="oidcclients",scope="resource",subresource="status",verb="APPLY",version="v1alpha1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 9
apiserver_request_total_other{verb="GET",resource="pods"} 4
"#;
        assert_eq!(
            parse_request_totals(text),
            Calls::from([
                ("create secrets".into(), 4),
                ("patch oidcclients/status".into(), 7),
            ])
        );
    }

    #[test]
    fn differences_keep_what_moved() {
        let before = Calls::from([("A".into(), 2), ("B".into(), 5)]);
        let after = Calls::from([("A".into(), 2), ("B".into(), 9), ("C".into(), 1)]);
        assert_eq!(
            difference(&after, &before),
            Calls::from([("B".into(), 4), ("C".into(), 1)])
        );
    }

    #[test]
    fn writes_are_the_mutating_verbs() {
        let requests = Calls::from([
            ("get secrets".into(), 3),
            ("patch oidcclients/status".into(), 2),
            ("watch oidcclients".into(), 1),
            ("create events".into(), 1),
        ]);
        assert_eq!(
            writes(&requests),
            Calls::from([
                ("patch oidcclients/status".into(), 2),
                ("create events".into(), 1)
            ])
        );
    }

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let sorted: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(quantile(&sorted, 0.5), 10.0);
        assert_eq!(quantile(&sorted, 0.95), 19.0);
        assert_eq!(quantile(&sorted, 1.0), 20.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn the_own_process_has_a_resident_set() {
        let own = resident(std::process::id()).unwrap();
        assert!(own.rss_kib > 0 && own.hwm_kib >= own.rss_kib);
    }
}
