//! One run: the stack, two replicas, the churn, then each scenario in turn, then the leak scan.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use nauthera_fake_server::grant_everything;
use tokio::time::Instant;

use super::Config;
use super::churn::{Churn, ChurnCounts, pause};
use super::invariants::{self, Snapshot, Verdict};
use super::kubernetes;
use super::leaks::{self, Known, Source};
use super::observe::Observer;
use super::replicas::{IDENTITIES, Replica, certificate_identity};
use super::report::{LeakReport, Report, ScenarioReport};
use super::scenario::{self, Disruption, Scenario, Side};
use super::snapshot;
use super::world::World;
use crate::control_plane::Plane;
use crate::control_plane::real::OwnedPlane;
use crate::e2e::{Stack, StackOptions, short_lease};

const POLL: Duration = Duration::from_millis(250);

struct Run<'a> {
    config: &'a Config,
    // Fields drop in order: the observer's watches end before the stack's API server does.
    observer: Observer,
    /// The real control plane of a Kubernetes-side scenario.
    plane: Option<&'a OwnedPlane>,
    stack: Stack,
    replicas: Vec<Replica>,
    world: World,
    churn: Churn,
    organizations_at_start: BTreeSet<String>,
    started: jiff::Timestamp,
}

/// Runs every configured scenario and the leak scan: the server-side scenarios on one emulator,
/// each Kubernetes-side one on a real control plane of its own (started with its flags).
pub async fn run(config: &Config) -> anyhow::Result<Report> {
    let began = Instant::now();
    let mut report = Report {
        resources: config.resources,
        seed: config.seed,
        ..Report::default()
    };
    let mut leaks = Vec::new();
    let (server_side, kubernetes_side): (Vec<Scenario>, Vec<Scenario>) = config
        .scenarios
        .iter()
        .partition(|s| s.side() == Side::Server);
    if !server_side.is_empty() {
        leaks.push(run_on(config, &server_side, None, &mut report).await?);
    }
    for scenario in kubernetes_side {
        let plane = OwnedPlane::start(kubernetes::api_server_flags(scenario)).await?;
        let alone = [scenario];
        let work = run_on(config, &alone, Some(&plane), &mut report);
        leaks.push(Plane::Real.run(plane.plane.clone().scope(work)).await?);
    }
    report.leaks = LeakReport::merged(leaks);
    report.duration_seconds = began.elapsed().as_secs_f64();
    Ok(report)
}

/// One stack (on the emulator, or on `plane`), populated and converged, then `scenarios` in
/// turn into `report`; returns its leak scan.
async fn run_on(
    config: &Config,
    scenarios: &[Scenario],
    plane: Option<&OwnedPlane>,
    report: &mut Report,
) -> anyhow::Result<LeakReport> {
    let mut run = Run::start(config, plane).await?;
    run.churn.populate(&mut run.world).await?;
    let converged = run.converge().await?;
    if converged.is_none() {
        bail!(
            "the first {} manifests did not converge without faults: {:#?}",
            config.resources,
            run.failing().await?
        );
    }
    for scenario in scenarios {
        let scenario_report = run.scenario(*scenario).await?;
        eprintln!("{}", scenario_report.one_line());
        report.scenarios.push(scenario_report);
    }
    let leaks = run.scan_for_leaks().await?;
    report.replica_starts += run.replicas.iter().map(|r| r.starts).sum::<u64>();
    Ok(leaks)
}

impl<'a> Run<'a> {
    async fn start(config: &'a Config, plane: Option<&'a OwnedPlane>) -> anyhow::Result<Run<'a>> {
        let grants = IDENTITIES
            .iter()
            .map(|identity| grant_everything(&certificate_identity(identity)))
            .collect();
        let stack = Stack::try_start(StackOptions {
            grants: Some(grants),
            start_reconciler: false,
            reconciler_env: short_lease(config.lease.as_secs(), config.renew_deadline.as_secs()),
            ..StackOptions::default()
        })
        .await?;
        let observer = Observer::start(
            &stack.client(),
            stack.namespace(),
            stack.reconciler_namespace(),
        );
        let mut replicas = Vec::new();
        for identity in IDENTITIES {
            let mut replica = Replica::new(&stack, identity, config.retry_backoff_max).await?;
            replica.start(&stack).await?;
            replicas.push(replica);
            if replicas.len() == 1 {
                wait_for_a_leader(&observer).await?;
            }
        }
        stack.show_deployment_ready(2).await?;
        let organizations_at_start = stack
            .server
            .held_objects()
            .into_iter()
            .filter(|h| h.kind == "organization")
            .map(|h| h.name)
            .collect();
        let churn = Churn::new(
            stack.client(),
            stack.namespace(),
            config.seed,
            config.resources,
        );
        Ok(Run {
            config,
            observer,
            plane,
            stack,
            replicas,
            world: World::default(),
            churn,
            organizations_at_start,
            started: jiff::Timestamp::now(),
        })
    }

    fn leader(&self) -> Option<String> {
        self.observer
            .lock()
            .leaderships
            .last()
            .map(|l| l.holder.clone())
    }

    async fn scenario(&mut self, scenario: Scenario) -> anyhow::Result<ScenarioReport> {
        self.stack.server.reset_counters();
        let mut disruption = Disruption::default();
        let mut churned = ChurnCounts::default();
        scenario::begin(scenario, &self.stack, &mut self.replicas, &mut disruption)?;
        let leaderships_before = self.observer.lock().leaderships.len();
        let witness = match scenario {
            Scenario::Compaction => Some(kubernetes::Witness::start(&self.stack).await?),
            _ => None,
        };
        let mut end = Instant::now() + self.config.fault_phase;
        let interval = match (scenario.side(), self.plane) {
            (Side::Kubernetes, Some(_)) => kubernetes::tick_interval(scenario, self.config),
            _ => scenario::tick_interval(scenario, self.config.lease),
        };
        let mut next_tick = interval.map(|i| Instant::now() + i / 2);
        let mut next_step = Instant::now();
        while Instant::now() < end {
            if next_tick.is_some_and(|t| Instant::now() >= t) {
                let leader = self.leader();
                match (scenario.side(), self.plane) {
                    (Side::Kubernetes, Some(_)) if scenario == Scenario::GcOrphan => {
                        kubernetes::race_the_collector(
                            &mut self.churn,
                            &mut self.world,
                            &mut churned,
                            &mut disruption,
                        )
                        .await?;
                    }
                    (Side::Kubernetes, Some(plane)) => {
                        // The churn waits while the control plane is down, and then has its
                        // whole phase still.
                        let began = Instant::now();
                        let target = kubernetes::Target {
                            plane,
                            witness: witness.as_ref(),
                            outage: self.config.outage,
                        };
                        kubernetes::tick(
                            scenario,
                            &target,
                            &self.stack,
                            &mut self.replicas,
                            leader.as_deref(),
                            &mut disruption,
                        )
                        .await?;
                        end += began.elapsed();
                        next_step = next_step.max(Instant::now());
                    }
                    _ => {
                        scenario::tick(
                            scenario,
                            &self.stack,
                            &mut self.replicas,
                            leader.as_deref(),
                            &mut disruption,
                        )
                        .await?
                    }
                }
                next_tick = interval.map(|i| Instant::now() + i);
            }
            if Instant::now() >= next_step {
                self.churn.step(&mut self.world, &mut churned).await?;
                next_step += pause(self.config.churn_per_second);
            }
            let wake = next_tick.map_or(next_step, |t| t.min(next_step)).min(end);
            tokio::time::sleep_until(wake).await;
        }
        scenario::end(scenario, &self.stack, &mut self.replicas)?;
        disruption.faults_answered = self.stack.server.counters().faults.values().sum();
        let converged_after = self.converge().await?;
        disruption.lease_handovers =
            (self.observer.lock().leaderships.len() - leaderships_before) as u64;
        disruption.gone = witness.as_ref().map_or(0, kubernetes::Witness::gone);
        drop(witness);
        let snapshot = snapshot::take(&self.stack).await?;
        let mut verdicts = self.verdicts(&snapshot);
        if converged_after.is_none() {
            self.explain_unsettled(&snapshot);
        }
        self.stack.server.reset_counters();
        let audited_before = self.stack.server.audit_events().len();
        tokio::time::sleep(self.config.steady_window).await;
        let steady_writes = self.stack.server.counters().total_writes();
        let mut steady = Vec::new();
        if steady_writes > 0 {
            steady.push(format!(
                "{steady_writes} writes in {:?} after converging",
                self.config.steady_window
            ));
            // Which ones, so that a failure says what was still moving.
            let audited = self.stack.server.audit_events();
            for event in audited.iter().skip(audited_before) {
                steady.push(describe_audit_event(event));
                if let Some(reference) = &event.r#ref {
                    self.print_logs_about(&event.action, &reference.name);
                }
            }
        }
        verdicts.push(invariants::verdict("no write in the steady state", steady));
        if scenario == Scenario::Throttled {
            disruption.throttled = kubernetes::throttled(&self.stack).await?;
        }
        verdicts.push(invariants::verdict(
            "converged after the faults stopped",
            converged_after
                .is_none()
                .then(|| format!("not within {:?}", self.config.converge_timeout))
                .into_iter()
                .collect(),
        ));
        Ok(ScenarioReport {
            scenario,
            census: self.world.census(),
            churn: churned,
            disruption,
            converged_after_seconds: converged_after.map(|d| d.as_secs_f64()),
            steady_writes,
            objects_lost: invariants::objects_missing(&self.world, &snapshot),
            objects_duplicated: verdicts
                .iter()
                .filter(|v| v.invariant == "no duplicate object on the server")
                .map(|v| v.violations as u64)
                .sum(),
            verdicts,
        })
    }

    fn verdicts(&self, snapshot: &Snapshot) -> Vec<Verdict> {
        let leaderships = self.observer.lock().leaderships.clone();
        invariants::state_verdicts(
            &self.world,
            snapshot,
            &self.organizations_at_start,
            &leaderships,
            self.started,
            &IDENTITIES,
        )
    }

    /// Waits until the state-based invariants hold; how long that took, or `None` at the timeout.
    async fn converge(&mut self) -> anyhow::Result<Option<Duration>> {
        let began = Instant::now();
        while began.elapsed() < self.config.converge_timeout {
            let snapshot = snapshot::take(&self.stack).await?;
            if self.verdicts(&snapshot).iter().all(|v| v.holds) {
                return Ok(Some(began.elapsed()));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(None)
    }

    async fn failing(&self) -> anyhow::Result<Vec<Verdict>> {
        let snapshot = snapshot::take(&self.stack).await?;
        Ok(self
            .verdicts(&snapshot)
            .into_iter()
            .filter(|v| !v.holds)
            .collect())
    }

    /// Prints what the replicas logged about the first resource that did not settle, and about
    /// the first object left on the server after its manifest was deleted.
    fn explain_unsettled(&self, snapshot: &Snapshot) {
        let unsettled = self.world.live.iter().find(|(key, declared)| {
            snapshot.shown.get(*key).and_then(|s| s.reason.clone())
                != Some(declared.expected_reason().to_string())
        });
        let held: BTreeSet<String> = snapshot.held.iter().map(|h| h.name.clone()).collect();
        let left = self
            .world
            .deleted
            .iter()
            .find(|d| held.contains(&d.name))
            .map(|d| (d.kind, d.name.clone()));
        for (kind, name) in unsettled
            .map(|(key, _)| key.clone())
            .into_iter()
            .chain(left)
        {
            self.print_logs_about(kind.name(), &name);
        }
    }

    /// The last lines each replica logged about one resource, for a failure to explain itself.
    fn print_logs_about(&self, kind: &str, name: &str) {
        let needle = format!("\"name\":\"{name}\"");
        for replica in &self.replicas {
            let logs = replica.all_logs();
            let lines: Vec<&str> = logs.lines().filter(|l| l.contains(&needle)).collect();
            eprintln!(
                "--- {kind} {name}: the last lines replica {} logged about it:\n{}",
                replica.identity,
                lines[lines.len().saturating_sub(15)..].join("\n")
            );
        }
    }

    /// Everything a person or a tool can read after the run.
    async fn readable(&self) -> anyhow::Result<Vec<Source>> {
        let mut sources: Vec<Source> = self
            .replicas
            .iter()
            .map(|r| Source {
                name: format!("reconciler {} logs", r.identity),
                text: r.all_logs(),
            })
            .collect();
        for replica in &self.replicas {
            if let Some(process) = &replica.process {
                sources.push(Source {
                    name: format!("reconciler {} /metrics", replica.identity),
                    text: process.metrics().await,
                });
            }
        }
        sources.push(self.events().await?);
        let statuses = self.statuses().await?;
        sources.push(Source {
            name: "statuses".to_owned(),
            text: statuses,
        });
        let status = self.stack.plugin(&["status", "-A", "-o", "json"]).await;
        sources.push(Source {
            name: "kubectl nauthera status -A -o json".to_owned(),
            text: status.all(),
        });
        let targets: Vec<String> = self
            .world
            .live
            .keys()
            .take(12)
            .map(|(kind, name)| format!("{}/{name}", kind.name().to_lowercase()))
            .collect();
        for target in targets {
            let run = self.stack.plugin(&["diagnose", &target]).await;
            sources.push(Source {
                name: format!("kubectl nauthera diagnose {target}"),
                text: run.all(),
            });
        }
        Ok(sources)
    }

    async fn events(&self) -> anyhow::Result<Source> {
        let mut text = String::new();
        let mut namespaces = vec![self.stack.namespace()];
        // On a real plane the reconciler is installed in the test's namespace.
        if self.stack.reconciler_namespace() != self.stack.namespace() {
            namespaces.push(self.stack.reconciler_namespace());
        }
        for namespace in namespaces {
            let events = Api::<Event>::namespaced(self.stack.client(), namespace)
                .list(&ListParams::default())
                .await?;
            text.push_str(&serde_json::to_string(&events.items)?);
        }
        Ok(Source {
            name: "Events".to_owned(),
            text,
        })
    }

    async fn statuses(&self) -> anyhow::Result<String> {
        use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
        let client = self.stack.client();
        let namespace = self.stack.namespace();
        let lp = ListParams::default();
        let mut text = serde_json::to_string(
            &Api::<OIDCClient>::namespaced(client.clone(), namespace)
                .list(&lp)
                .await?
                .items,
        )?;
        text.push_str(&serde_json::to_string(
            &Api::<Branding>::namespaced(client.clone(), namespace)
                .list(&lp)
                .await?
                .items,
        )?);
        text.push_str(&serde_json::to_string(
            &Api::<IdentityProvider>::namespaced(client.clone(), namespace)
                .list(&lp)
                .await?
                .items,
        )?);
        text.push_str(&serde_json::to_string(
            &Api::<Organization>::namespaced(client, namespace)
                .list(&lp)
                .await?
                .items,
        )?);
        Ok(text)
    }

    /// The secrets of the run: every secret value a Secret held, every private key.
    fn known_secrets(&self) -> Vec<Known> {
        let mut known: Vec<Known> = self
            .observer
            .lock()
            .secret_values
            .iter()
            .map(|value| Known {
                what: "a secret value a Secret held".to_owned(),
                value: value.clone(),
            })
            .collect();
        for replica in &self.replicas {
            known.extend(replica.private_keys.iter().map(|key| Known {
                what: format!("a private key of {}", replica.identity),
                value: key.clone(),
            }));
        }
        known.push(Known {
            what: "the server's private key".to_owned(),
            value: self.stack.pki.server.key_pem.clone(),
        });
        known
    }

    async fn scan_for_leaks(&self) -> anyhow::Result<LeakReport> {
        let known = self.known_secrets();
        let sources = self.readable().await?;
        let scan = leaks::scan(&sources, &known);
        // A planted secret proves the scan looks where it says: an Event whose note carries one
        // delivered secret in base64 must be found.
        let planted = known
            .iter()
            .find(|k| !k.value.contains("-----BEGIN"))
            .context("the run delivered no secret to plant")?;
        self.plant(&planted.value).await?;
        let planted_scan = leaks::scan(&[self.events().await?], std::slice::from_ref(planted));
        Ok(LeakReport {
            scan,
            planted_found: planted_scan.leaks.iter().any(|l| l.source == "Events"),
        })
    }

    async fn plant(&self, value: &str) -> anyhow::Result<()> {
        use base64::Engine as _;
        let event: Event = serde_json::from_value(serde_json::json!({
            "metadata": { "generateName": "planted-" },
            // The API server requires an event's object to be in the event's namespace.
            "involvedObject": {
                "kind": "Namespace",
                "name": self.stack.namespace(),
                "namespace": self.stack.namespace(),
            },
            "reason": "Planted",
            "message": format!("a planted leak: {}", base64::engine::general_purpose::STANDARD.encode(value)),
            "type": "Normal",
        }))?;
        Api::<Event>::namespaced(self.stack.client(), self.stack.namespace())
            .create(&PostParams::default(), &event)
            .await?;
        Ok(())
    }
}

async fn wait_for_a_leader(observer: &Observer) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while observer.lock().leaderships.is_empty() {
        if Instant::now() > deadline {
            bail!("no replica took the Lease within 60 s");
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// One audit record, as a failure names it: what, on which object, by whom, with what outcome.
fn describe_audit_event(event: &nauthera_proto::v1::AuditEvent) -> String {
    let object = event
        .r#ref
        .as_ref()
        .map(|r| format!("{}/{}", r.namespace, r.name))
        .unwrap_or_default();
    format!(
        "  {} {object} (generation {}) by manager {:?} as {:?}: {:?} {} {}",
        event.action,
        event.generation,
        event.manager,
        event.actor,
        event.outcome(),
        event.reason,
        event.cause
    )
}
