//! One run of the benchmark at one size of one workload: the floors on a stack of their own, then
//! the reconciler on a fresh stack with the same workload: cold start, steady state, drift,
//! memory, the plugin (on the clients workload).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::resources::{
    Branding, IdentityProvider, OIDCClient, Organization, ResourceStatus, ready_condition,
};

use super::drift;
use super::floor::{self, FloorWrites};
use super::measure::{self, RequestCounter, difference, resident};
use super::observer::{Incomplete, Observer};
use super::plugin;
use super::report::{
    ColdStart, ColdStartCpu, DriftLatency, Memory, PerObject, Quantiles, RealPlaneFacts,
    RegistrationFloor, SizeReport, Steady, ratio,
};
use super::workload::{ClientItem, Key, Kind, Workload, WorkloadKind, kinds_of};
use crate::control_plane::Plane;
use crate::control_plane::real::FreshPlane;
use crate::e2e::{Declared, RECONCILER_IDENTITY, Reconciler, Stack, StackOptions};

/// What a run measures and how long it waits.
#[derive(Clone, Debug)]
pub struct Settings {
    pub namespaces: usize,
    /// The reconciler's concurrency, which the cold-start floor uses too.
    pub concurrency: usize,
    pub cold_start_timeout: Duration,
    /// How long the reconciler is left alone after its cold start before the steady window.
    pub settle: Duration,
    pub steady_window: Duration,
    pub drift_edits: usize,
    pub drift_timeout: Duration,
    /// How long after a drift is seen its trailing reconciles and calls are still counted.
    pub drift_settle: Duration,
    pub plugin_runs: usize,
    /// The reconciler's probe interval and change-poll interval, in seconds (production defaults).
    pub probe_interval_seconds: u64,
    pub probe_retry_seconds: u64,
    pub change_poll_seconds: u64,
    /// This program, which also serves as the measuring wrapper and the memory floor.
    pub bench_exe: PathBuf,
    /// A ClientPolicy covering every client (with rules all of them keep) is in place before
    /// the reconciler starts, so the cold start judges every client.
    pub client_policy: bool,
    /// Measure the controller-runtime peer after the reconciler (clients workload only).
    pub peer: bool,
}

impl Settings {
    /// The reconciler's environment for the run.
    pub fn reconciler_env(&self) -> Vec<(String, String)> {
        [
            ("NAUTHERA_CONCURRENCY", self.concurrency.to_string()),
            (
                "NAUTHERA_PROBE_INTERVAL",
                self.probe_interval_seconds.to_string(),
            ),
            (
                "NAUTHERA_PROBE_RETRY_INTERVAL",
                self.probe_retry_seconds.to_string(),
            ),
            (
                "NAUTHERA_CHANGE_POLL_INTERVAL",
                self.change_poll_seconds.to_string(),
            ),
            ("NAUTHERA_LOG_FORMAT", "json".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

fn stack_options(settings: &Settings, workload: WorkloadKind) -> StackOptions {
    let options = StackOptions {
        start_reconciler: false,
        reconciler_env: settings.reconciler_env(),
        ..StackOptions::default()
    };
    match workload {
        // The server holds the organization every client names.
        WorkloadKind::Clients | WorkloadKind::Templated => options,
        // The workload's Organization manifests create every organization, so the server starts
        // with none; the reconciler's identity may do all four operations anywhere.
        WorkloadKind::Mixed => StackOptions {
            organizations: Vec::new(),
            grants: Some(vec![nauthera_fake_server::grant_everything(
                RECONCILER_IDENTITY,
            )]),
            ..options
        },
    }
}

/// A stack of the benchmark: on the emulator, or on a real control plane of its own that is
/// stopped after it (so no stack sees an earlier one's objects).
pub struct BenchStack {
    // The stack drops before its control plane.
    stack: Stack,
    plane: Option<FreshPlane>,
}

impl std::ops::Deref for BenchStack {
    type Target = Stack;
    fn deref(&self) -> &Stack {
        &self.stack
    }
}

impl BenchStack {
    pub async fn start(
        settings: &Settings,
        workload: WorkloadKind,
        plane: Plane,
    ) -> anyhow::Result<BenchStack> {
        let own = match plane {
            Plane::Emulator => None,
            Plane::Real => Some(FreshPlane::start().await?),
        };
        let options = StackOptions {
            own_plane: own.as_ref().map(|own| own.plane.clone()),
            ..stack_options(settings, workload)
        };
        Ok(BenchStack {
            stack: Stack::try_start(options).await?,
            plane: own,
        })
    }

    /// The CPU time the real control plane's processes have used so far (none on the
    /// emulator, which runs in the benchmark's own process).
    pub fn plane_cpu_seconds(&self) -> anyhow::Result<Option<f64>> {
        self.plane.as_ref().map(FreshPlane::cpu_seconds).transpose()
    }
}

fn since(before: Option<f64>, after: Option<f64>) -> Option<f64> {
    Some(after? - before?)
}

/// Evenly spread clients of the workload for the drift edits.
fn drift_clients(workload: &Workload, edits: usize) -> Vec<ClientItem> {
    let clients = workload.clients();
    let edits = edits.min(clients.len());
    (0..edits)
        .map(|i| clients[i * clients.len() / edits].clone())
        .collect()
}

/// A policy with a rule of every kind the workload's clients are judged by, which all of them
/// keep (and a namespace limit none reaches, so that the count runs too).
async fn create_client_policy(client: &kube::Client) -> anyhow::Result<()> {
    let policy: nauthera_shared::resources::ClientPolicy =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "ClientPolicy",
            "metadata": { "name": "bench" },
            "spec": { "rules": {
                "redirectUris": { "hosts": ["*.example.test"], "pathPrefixes": ["/callback"] },
                "postLogoutRedirectUris": { "hosts": ["*.example.test"] },
                "grantTypes": ["authorization_code", "refresh_token"],
                "responseTypes": ["code"],
                "tokenEndpointAuthMethods": ["client_secret_basic", "private_key_jwt"],
                "scopes": ["openid", "profile", "email"],
                "requirePkce": true,
                "secretSource": "Generated",
                "maxClientsPerNamespace": 100000,
            }},
        }))?;
    kube::Api::<nauthera_shared::resources::ClientPolicy>::all(client.clone())
        .create(&kube::api::PostParams::default(), &policy)
        .await
        .context("cannot create the benchmark's ClientPolicy")?;
    Ok(())
}

fn log(message: &str) {
    eprintln!("[nauthera-bench] {message}");
}

/// Everything at N = `clients` manifests of `kind`.
pub async fn size(
    settings: &Settings,
    plane: Plane,
    kind: WorkloadKind,
    clients: usize,
) -> anyhow::Result<SizeReport> {
    let workload = Workload {
        kind,
        size: clients,
        namespaces: settings.namespaces,
    };
    workload.check()?;
    let composition = workload.composition();
    let manifests = composition.manifests();
    let kinds = kinds_of(kind);
    let drifted = drift_clients(&workload, settings.drift_edits);
    let mut report = SizeReport {
        workload: kind,
        plane: plane.name().to_owned(),
        clients,
        composition,
        namespaces: workload.namespace_names().len(),
        ..SizeReport::default()
    };
    let label = format!("N={clients} ({kind}, {} plane)", plane.name());

    log(&format!("{label}: the registration-only floor"));
    let registration_floor = {
        let floor_stack = BenchStack::start(settings, kind, plane).await?;
        workload.create(&floor_stack.client()).await?;
        let _watches = Observer::start(&floor_stack.client(), kinds);
        floor::cold_start(
            &floor_stack,
            &settings.bench_exe,
            settings.concurrency,
            &composition,
            FloorWrites::RegistrationOnly,
        )
        .await?
    };

    log(&format!("{label}: the full floor"));
    let floor_stack = BenchStack::start(settings, kind, plane).await?;
    workload.create(&floor_stack.client()).await?;
    let floor_observer = Observer::start(&floor_stack.client(), kinds);
    let floor_plane_before = floor_stack.plane_cpu_seconds()?;
    let cold_floor = floor::cold_start(
        &floor_stack,
        &settings.bench_exe,
        settings.concurrency,
        &composition,
        FloorWrites::Full,
    )
    .await?;
    let floor_plane_seconds = since(floor_plane_before, floor_stack.plane_cpu_seconds()?);
    let drift_floor = floor::drift(
        &floor_stack,
        &floor_observer,
        &drifted,
        settings.drift_timeout,
    )
    .await?;
    drop(floor_observer);
    drop(floor_stack);

    log(&format!("{label}: the reconciler's cold start"));
    let stack = BenchStack::start(settings, kind, plane).await?;
    report.setup_seconds = workload.create(&stack.client()).await?.as_secs_f64();
    if settings.client_policy {
        create_client_policy(&stack.client()).await?;
    }
    stack.show_deployment_ready(1).await?;
    report.real_plane = stack.plane.as_ref().map(|own| RealPlaneFacts {
        version: own.plane.version.clone(),
        api_server_flags: own.plane.api_server_flags.clone(),
    });
    let observer = Observer::start(&stack.client(), kinds);
    let requests = RequestCounter::of(&stack.cluster);
    let calls_before = stack.server.counters().calls;
    let requests_before = requests.reconciler().await?;
    let started = Instant::now();
    let stand_ins_before = measure::own_cpu_seconds()?;
    let plane_before = stack.plane_cpu_seconds()?;
    let replica = stack.start_replica("bench").await?;
    let pid = replica.pid().context("the reconciler has no process id")?;
    let finished = observer
        .wait_until(started + settings.cold_start_timeout, |seen| {
            seen.complete >= manifests
        })
        .await;
    let elapsed = finished.map_or_else(|| started.elapsed(), |at| at - started);
    let cpu = match finished {
        Some(_) => {
            let reconciler_seconds = measure::cpu_seconds(pid)?;
            let stand_ins_seconds = measure::own_cpu_seconds()? - stand_ins_before;
            Some(ColdStartCpu {
                reconciler_seconds,
                stand_ins_seconds,
                plane_seconds: since(plane_before, stack.plane_cpu_seconds()?),
                floor_seconds: cold_floor.cpu_seconds,
                floor_own_seconds: Some(cold_floor.own_cpu_seconds),
                floor_plane_seconds,
                ratio: ratio(
                    reconciler_seconds + stand_ins_seconds,
                    cold_floor.cpu_seconds,
                ),
            })
        }
        None => None,
    };
    let registration_floor = RegistrationFloor::against(
        registration_floor,
        finished.map(|_| elapsed.as_secs_f64()),
        cpu.as_ref()
            .map(|cpu| cpu.reconciler_seconds + cpu.stand_ins_seconds),
    );
    // The echoes of the last writes are still being reconciled when the last manifest shows as
    // Registered; they belong to the cold start's cost, so it is counted once they are done.
    let reconciles = measure::quiet_reconciles(&replica, settings.settle).await;
    report.cold_start = ColdStart {
        finished: finished.is_some(),
        seconds: elapsed.as_secs_f64(),
        timeout_seconds: settings.cold_start_timeout.as_secs_f64(),
        complete: observer.complete(),
        complete_by_kind: observer
            .complete_by_kind()
            .into_iter()
            .map(|(kind, n)| (kind.name().to_owned(), n))
            .collect(),
        floor_seconds: cold_floor.elapsed.as_secs_f64(),
        floor_cpu_seconds: cold_floor.cpu_seconds,
        ratio: finished
            .and_then(|_| ratio(elapsed.as_secs_f64(), cold_floor.elapsed.as_secs_f64())),
        cpu,
        reconciles,
        reconciles_per_object: reconciles / clients.max(1) as f64,
        server_calls: difference(&stack.server.counters().calls, &calls_before),
        floor_server_calls: cold_floor.server_calls,
        kube_requests: difference(&requests.reconciler().await?, &requests_before),
        floor_kube_requests: cold_floor.kube_requests,
        registration_floor,
    };
    report.memory = Memory {
        cold_start_peak_kib: resident(pid)?.hwm_kib,
        ..Memory::default()
    };
    report.per_object = PerObject::of(&report);

    if finished.is_some() {
        report.steady = Some(steady(settings, &stack, &replica, &requests).await?);
        let idle = resident(pid)?;
        report.memory.idle = Some(idle);
        report.drift = Some(
            drift(
                settings,
                &stack,
                &replica,
                &observer,
                &drifted,
                &drift_floor,
            )
            .await?,
        );
        let floor = memory_floor(settings, &stack, kind)?;
        report.memory.floor = Some(floor);
        report.memory.ratio_idle = ratio(idle.rss_kib as f64, floor.rss_kib as f64);
    } else {
        let by_kind = observer.complete_by_kind();
        let done = Kind::ALL
            .iter()
            .filter(|k| composition.of(**k) > 0)
            .map(|k| {
                format!(
                    "{} {} of {}",
                    k.name(),
                    by_kind.get(k).copied().unwrap_or(0),
                    composition.of(*k)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        report.notes.push(format!(
            "the cold start did not finish within {} s ({} of {manifests} Registered, clients \
             with their Secret: {done}; {} Pending, {} Refused), so the steady state, drift \
             latency and idle memory are not measured at this size",
            settings.cold_start_timeout.as_secs(),
            observer.complete(),
            observer.count(Reason::Pending),
            observer.count(Reason::Refused),
        ));
        for incomplete in observer.incomplete(5) {
            let live = live_facts(&stack.client(), &incomplete).await;
            report.notes.push(format!(
                "not complete: {} {}/{}: the watches show {}; the API server holds {live}",
                incomplete.kind.name(),
                incomplete.key.namespace,
                incomplete.key.name,
                incomplete.shown,
            ));
        }
    }
    // The plugin reads what the reconciler left; stopping it first keeps a cold start that did
    // not finish from competing with the commands measured.
    replica.stop().await;
    if settings.plugin_runs > 0 {
        if kind == WorkloadKind::Clients {
            log(&format!("{label}: the plugin against kubectl"));
            report.plugin = Some(plugin_comparison(settings, &stack, plane, clients)?);
        } else {
            report.notes.push(
                "the plugin is compared with kubectl on the clients workload only (`kubectl get \
                 oidcclients` shows one kind of the four)"
                    .to_owned(),
            );
        }
    }
    if settings.peer {
        peer_run(settings, plane, &workload, &drifted, &mut report).await?;
    }
    Ok(report)
}

/// The controller-runtime peer on a fresh stack (on the same plane) with the same workload
/// (`--peer`).
async fn peer_run(
    settings: &Settings,
    plane: Plane,
    workload: &Workload,
    drifted: &[ClientItem],
    report: &mut SizeReport,
) -> anyhow::Result<()> {
    if workload.kind != WorkloadKind::Clients {
        report.notes.push(
            "the controller-runtime peer reconciles OIDCClients only: measured on the clients \
             workload"
                .to_owned(),
        );
        return Ok(());
    }
    let Some(program) = super::peer::binary()? else {
        report
            .notes
            .push("the controller-runtime peer was not measured: Go is not installed".to_owned());
        return Ok(());
    };
    log(&format!(
        "N={} ({} plane): the controller-runtime peer",
        workload.size,
        plane.name()
    ));
    let stack = BenchStack::start(settings, workload.kind, plane).await?;
    workload.create(&stack.client()).await?;
    stack.show_deployment_ready(1).await?;
    let mut peer = super::peer::PeerRun {
        stack: &stack,
        workload,
        concurrency: settings.concurrency,
        cold_start_timeout: settings.cold_start_timeout,
        settle: settings.settle,
        steady_window: settings.steady_window,
        drift_timeout: settings.drift_timeout,
        drift_settle: settings.drift_settle,
        drifted,
    }
    .measure(program)
    .await?;
    peer.ratios = super::peer::ratios(report, &peer);
    report.peer = Some(peer);
    Ok(())
}

async fn steady(
    settings: &Settings,
    stack: &Stack,
    replica: &Reconciler,
    requests: &RequestCounter<'_>,
) -> anyhow::Result<Steady> {
    log("steady state");
    tokio::time::sleep(settings.settle).await;
    let calls_before = stack.server.counters();
    let requests_before = requests.reconciler().await?;
    let reconciles_before = measure::reconciles(replica).await;
    tokio::time::sleep(settings.steady_window).await;
    let calls_after = stack.server.counters();
    let requests = difference(&requests.reconciler().await?, &requests_before);
    let minutes = settings.steady_window.as_secs_f64() / 60.0;
    let kube_writes = measure::writes(&requests);
    let lease_writes: u64 = kube_writes
        .iter()
        .filter(|(key, _)| key.ends_with(" leases"))
        .map(|(_, v)| v)
        .sum();
    Ok(Steady {
        window_seconds: settings.steady_window.as_secs_f64(),
        server_calls_per_minute: difference(&calls_after.calls, &calls_before.calls)
            .into_iter()
            .map(|(method, n)| (method, n as f64 / minutes))
            .collect(),
        floor_server_calls_per_minute: [(
            "GetServerInfo".to_owned(),
            60.0 / settings.probe_interval_seconds.max(1) as f64,
        )]
        .into(),
        server_writes: calls_after.total_writes() - calls_before.total_writes(),
        kube_writes: kube_writes
            .into_iter()
            .filter(|(key, _)| !key.ends_with(" leases"))
            .collect(),
        lease_writes,
        reconciles: measure::reconciles(replica).await - reconciles_before,
    })
}

async fn drift(
    settings: &Settings,
    stack: &Stack,
    replica: &Reconciler,
    observer: &Observer,
    clients: &[ClientItem],
    floor: &[Duration],
) -> anyhow::Result<DriftLatency> {
    log(&format!("drift latency, {} edits", clients.len()));
    let edits = drift::edit_each(
        stack,
        observer,
        clients,
        settings.drift_timeout,
        settings.drift_settle,
        || measure::reconciles(replica),
    )
    .await?;
    let latency_ms = edits.latency_ms();
    let floor_latency_ms = Quantiles::of(floor.iter().map(|d| d.as_secs_f64() * 1000.0).collect());
    Ok(DriftLatency {
        edits: clients.len(),
        detected: edits.latencies.len(),
        latency_ms,
        floor_latency_ms,
        ratio_p95: ratio(latency_ms.p95, floor_latency_ms.p95),
        reconciles_per_edit: edits.reconciles_per_edit(),
        server_calls_per_edit: edits.server_calls_per_edit(),
    })
}

/// Runs the reflector floor as a process of its own and reads what it reports.
fn memory_floor(
    settings: &Settings,
    stack: &Stack,
    kind: WorkloadKind,
) -> anyhow::Result<measure::Resident> {
    log("memory floor");
    let mut command = std::process::Command::new(&settings.bench_exe);
    command
        .arg("reflector-floor")
        .arg("--kubeconfig")
        .arg(stack.cluster.kubeconfig());
    if kind != WorkloadKind::Clients {
        command.arg("--all-kinds");
    }
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run the reflector floor")?;
    if !output.status.success() {
        bail!("the reflector floor failed ({})", output.status);
    }
    serde_json::from_slice(&output.stdout).context("the reflector floor printed no resident set")
}

/// What the API server holds of one manifest (and of a client's Secret), read directly, to tell
/// a manifest the reconciler left unfinished from a change the benchmark's watches did not show.
async fn live_facts(client: &kube::Client, incomplete: &Incomplete) -> String {
    let key = &incomplete.key;
    let manifest = match incomplete.kind {
        Kind::Organization => live_status::<Organization>(client, key).await,
        Kind::Branding => live_status::<Branding>(client, key).await,
        Kind::IdentityProvider => live_status::<IdentityProvider>(client, key).await,
        Kind::OIDCClient => live_status::<OIDCClient>(client, key).await,
    };
    let Some(secret) = &incomplete.secret else {
        return manifest;
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
    let secret = match secrets.get_metadata_opt(&secret.name).await {
        Ok(Some(_)) => "present".to_owned(),
        Ok(None) => "absent".to_owned(),
        Err(error) => format!("unreadable ({error})"),
    };
    format!("{manifest}, its Secret {secret}")
}

async fn live_status<K: Declared>(client: &kube::Client, key: &Key) -> String {
    let api: Api<K> = Api::namespaced(client.clone(), &key.namespace);
    match api.get_opt(&key.name).await {
        Ok(Some(manifest)) => {
            let status = manifest.declared_status();
            format!(
                "generation {:?}, status {:?} for generation {:?}",
                manifest.meta().generation,
                status.and_then(|s| s.reason).map(Reason::as_str),
                status.and_then(|s| s.observed_generation),
            )
        }
        Ok(None) => "no such manifest".to_owned(),
        Err(error) => format!("an error ({error})"),
    }
}

fn plugin_comparison(
    settings: &Settings,
    stack: &Stack,
    plane: Plane,
    clients: usize,
) -> anyhow::Result<super::report::PluginReport> {
    let home = tempfile::tempdir()?;
    Ok(super::report::PluginReport {
        plane: plane.name().to_owned(),
        ..plugin::compare(
            &settings.bench_exe,
            stack.cluster.kubeconfig(),
            home.path(),
            clients,
            settings.plugin_runs,
        )?
    })
}

/// The plugin against kubectl at a size too large for a reconciler run: the workload is created
/// and given a Registered status by the harness, as a reconciler would have left it.
pub async fn plugin_only(
    settings: &Settings,
    plane: Plane,
    clients: usize,
) -> anyhow::Result<super::report::PluginReport> {
    log(&format!(
        "N={clients} ({} plane): the plugin against kubectl (no reconciler)",
        plane.name()
    ));
    let workload = Workload {
        kind: WorkloadKind::Clients,
        size: clients,
        namespaces: settings.namespaces,
    };
    let stack = BenchStack::start(settings, WorkloadKind::Clients, plane).await?;
    workload.create(&stack.client()).await?;
    register_statuses(&stack, &workload).await?;
    stack.show_deployment_ready(1).await?;
    plugin_comparison(settings, &stack, plane, clients)
}

/// Writes the status a reconciler leaves on a Registered client, for every client.
async fn register_statuses(stack: &Stack, workload: &Workload) -> anyhow::Result<()> {
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(workload.clients())
        .enumerate()
        .map(|(i, client)| {
            let key = client.key;
            let api: Api<OIDCClient> = Api::namespaced(stack.client(), &key.namespace);
            async move {
                let status = ResourceStatus {
                    observed_generation: Some(1),
                    phase: Some(Phase::Registered),
                    reason: Some(Reason::Registered),
                    client_id: Some(format!("c-{i:08x}")),
                    revision: Some(format!("{}", i + 1)),
                    generation_in_force: Some(1),
                    conditions: vec![ready_condition(
                        Reason::Registered,
                        "generation 1 is in force",
                        Some(1),
                        Time(jiff::Timestamp::now()),
                    )],
                    ..ResourceStatus::default()
                };
                api.patch_status(
                    &key.name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({ "status": status })),
                )
                .await
                .with_context(|| format!("cannot set the status of {}", key.name))?;
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}
