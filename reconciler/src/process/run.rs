//! Wiring: the HTTP servers and the probe run on every replica; leader election on a Lease; the
//! controllers, the change follower and the state publisher run only while this replica leads,
//! and are stopped the moment the lease is lost. Only the controllers of the kinds in the
//! shard's scope run.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::control_plane::ShardOverlap;
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;

use crate::kubernetes::caches::{DeliveredSecrets, SecretReferences};
use crate::kubernetes::events::{EventQueue, EventRecorder, Reporter};
use crate::kubernetes::leader::{self, Leadership, LeaseSettings, Standing};
use crate::kubernetes::state::{self, Publisher};
use crate::process::config::Config;
use crate::process::controllers::{self, DeliveredStream, Wiring};
use crate::process::http;
use crate::process::memory::Memory;
use crate::process::metrics::Metrics;
use crate::process::probe::{self, ProbeState};
use crate::process::shard::{self, ShardScope};
use crate::reconcile::context::{Context, random_jitter, system_clock};
use crate::reconcile::decide::Backoff;
use crate::reconcile::policies::Policies;
use crate::reconcile::prerequisites::Prerequisites;
use crate::server::admin::Admin;
use crate::server::changes::{Route, Router, ServerRevisions, StartGate, follow_changes};

/// How many routes a controller may fall behind before it reconciles everything instead.
const ROUTE_BUFFER: usize = 4096;
/// How many events may wait to be written, and how many are written at once.
const EVENT_QUEUE: usize = 4096;
const EVENT_WRITERS: usize = 2;
/// How long controllers wait for the server's first listing before they start without it.
const FIRST_LISTING_WAIT: Duration = Duration::from_secs(30);

/// Runs until the process is told to stop.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let metrics_listener = http::bind(
        config.metrics_address,
        &crate::process::config::setting("metrics-address"),
    )
    .await?;
    let probe_listener = http::bind(
        config.probe_address,
        &crate::process::config::setting("probe-address"),
    )
    .await?;
    // The bound addresses, which differ from the settings when those ask for port 0.
    tracing::info!(
        metrics = %metrics_listener.local_addr()?,
        probes = %probe_listener.local_addr()?,
        "listening"
    );
    let client = Client::try_default()
        .await
        .map_err(|error| anyhow::anyhow!("cannot configure the Kubernetes client: {error}"))?;
    let admin = Arc::new(
        Admin::new(config.connect.clone(), metrics.clone())
            .with_namespace_mapping(config.namespace_mapping.clone()),
    );
    let (probe_sender, probe_receiver) = watch::channel(ProbeState::default());
    let (alive, liveness) = watch::channel(None::<String>);
    let lease = LeaseSettings {
        name: config.lease_name.clone(),
        namespace: config.own_namespace.clone(),
        identity: config.identity.clone(),
        timing: config.lease_timing,
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), &config.own_namespace);
    let (standing_sender, mut standing) = watch::channel(if config.leader_election {
        Standing::Starting
    } else {
        Standing::Leading {
            until: leader::far_future(),
        }
    });

    // The tasks every replica runs; none of them ends while the process works.
    let mut always = JoinSet::new();
    always.spawn(log_end(
        "metrics server",
        http::serve_metrics(metrics_listener, metrics.clone()),
    ));
    always.spawn(log_end(
        "probe server",
        http::serve_probes(
            probe_listener,
            http::ProbeSources {
                probe: probe_receiver.clone(),
                standing: standing.clone(),
                lease: lease.clone(),
                liveness,
            },
        ),
    ));
    {
        let admin = admin.clone();
        let metrics = metrics.clone();
        let certificate = config.connect.tls.cert.clone();
        let (interval, retry) = (config.probe_interval, config.probe_retry_interval);
        let connection_failed = admin.connection_failures();
        always.spawn(async move {
            probe::run(
                admin.as_ref(),
                &certificate,
                interval,
                retry,
                &metrics,
                &probe_sender,
                &connection_failed,
            )
            .await;
        });
    }

    if config.leader_election {
        always.spawn(leader::elect(
            leases.clone(),
            lease.clone(),
            standing_sender.clone(),
        ));
    }
    const ALWAYS: &str = "the probe, metrics or probe server, or leader election";

    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        // Wait to lead.
        while !standing.borrow_and_update().leads() {
            tokio::select! {
                changed = standing.changed() => if changed.is_err() {
                    alive.send_replace(Some("leader election".to_owned()));
                    anyhow::bail!("leader election stopped");
                },
                () = &mut shutdown => return Ok(()),
                Some(_) = always.join_next() => {
                    alive.send_replace(Some(ALWAYS.to_owned()));
                    anyhow::bail!("{ALWAYS} stopped");
                }
            }
        }
        tracing::info!(identity = %config.identity, "leading: reconciling");
        let mut leading = lead(
            &config,
            client.clone(),
            admin.clone(),
            metrics.clone(),
            Leadership::new(standing.clone()),
            probe_receiver.clone(),
        );
        // Lead until the term ends without a renewal, or the process stops.
        let stop = loop {
            let term_end = match &*standing.borrow() {
                Standing::Leading { until } => *until,
                _ => tokio::time::Instant::now(),
            };
            tokio::select! {
                changed = standing.changed() => {
                    if changed.is_err() || !standing.borrow_and_update().leads() {
                        break false;
                    }
                }
                () = tokio::time::sleep_until(term_end) => {
                    if !standing.borrow().leads() {
                        break false;
                    }
                }
                () = &mut shutdown => break true,
                Some(_) = always.join_next() => {
                    alive.send_replace(Some(ALWAYS.to_owned()));
                    break true;
                }
                Some(ended) = leading.join_next() => {
                    // Controllers and the change follower run until aborted; one that ends has
                    // failed, and this replica no longer reconciles: let the kubelet restart it.
                    if let Err(error) = &ended {
                        tracing::error!(error = %error, "a leader task failed");
                    }
                    alive.send_replace(Some("a controller or the change follower".to_owned()));
                }
            }
        };
        // Stop every write at once: abort the tasks rather than wait for them.
        leading.abort_all();
        while leading.join_next().await.is_some() {}
        if stop {
            if config.leader_election {
                leader::release(&leases, &lease).await;
            }
            tracing::info!("stopping");
            return Ok(());
        }
        tracing::warn!(identity = %config.identity, "no longer leading: stopped writing");
    }
}

/// Starts the work only the leader does.
fn lead(
    config: &Config,
    client: Client,
    admin: Arc<Admin>,
    metrics: Metrics,
    leadership: Leadership,
    probe: watch::Receiver<ProbeState>,
) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    let revisions = Arc::new(ServerRevisions::default());
    // Every controller hears every route and takes those of its kind and scope.
    let (routes, _) = broadcast::channel::<Route>(ROUTE_BUFFER);
    let recorder = EventRecorder::new(
        client.clone(),
        Reporter {
            controller: config.manager.clone(),
            instance: config.identity.clone(),
        },
    );
    let events = EventQueue::start(recorder, &mut tasks, EVENT_WRITERS, EVENT_QUEUE);
    let policy_reporting = crate::reconcile::policies::PolicyReporting {
        events: events.clone(),
        metrics: metrics.clone(),
    };
    // One controller per kind and scope: every namespace, or each configured one.
    let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    let gate = Arc::new(StartGate::new(FIRST_LISTING_WAIT));
    let references = Arc::new(SecretReferences::default());
    let prerequisites = Arc::new(Prerequisites::new(routes.clone()));
    let policies = Arc::new(Policies::new(routes.clone()));
    let shard = Arc::new(ShardScope::new(config.scope.clone(), policies.clone()));
    let runs = |kind: ObjectKind| shard.covers_kind(kind);
    let wiring = Wiring {
        policies: policies.clone(),
        shard: shard.clone(),
        client: client.clone(),
        routes: routes.clone(),
        references: references.clone(),
        prerequisites: prerequisites.clone(),
        gate: gate.clone(),
        concurrency: config.concurrency,
    };
    // The delivered Secrets are watched once per scope (when OIDCClients are reconciled): the
    // watch both triggers the owner's reconcile and fills the cache its reconciles read.
    let (stores, delivered): (Vec<_>, Vec<_>) = scopes
        .iter()
        .filter(|_| runs(ObjectKind::Client))
        .map(|scope| {
            controllers::delivered_secrets(&client, scope.as_deref(), wiring.routes.clone())
        })
        .unzip();
    let context = Arc::new(Context {
        client: client.clone(),
        admin: admin.clone(),
        manager: config.manager.clone(),
        namespace_mapped: !config.namespace_mapping.is_identity(),
        events,
        metrics,
        memory: Memory::default(),
        revisions: revisions.clone(),
        delivered: DeliveredSecrets::new(stores),
        references,
        prerequisites,
        policies: policies.clone(),
        leadership: leadership.clone(),
        backoff: Backoff {
            cap: config.retry_backoff_max.max(Backoff::default().base),
            ..Backoff::default()
        },
        clock: system_clock,
        jitter: random_jitter,
        min_rotation_interval: config.min_rotation_interval,
    });
    let moves = shard.clone();
    tasks.spawn(crate::reconcile::policies::follow_policy_inputs(
        policies.clone(),
        client.clone(),
        scopes.clone(),
        Box::new(move |namespace, before, after| moves.namespace_moved(namespace, before, after)),
    ));
    tasks.spawn(crate::reconcile::policies::run_policy_controller(
        policies,
        client.clone(),
        config.manager.clone(),
        config.scope.shard.clone(),
        leadership,
        policy_reporting,
    ));
    spawn_controllers(&mut tasks, &wiring, &context, scopes, delivered.into_iter());
    // Started after every controller subscribed, so none misses the first listing's route.
    spawn_change_routing(
        &mut tasks,
        config,
        admin,
        revisions,
        routes,
        shard.clone(),
        gate,
    );
    // The other shards' published states, for the overlaps this one reports in its own.
    let (overlaps_sender, overlaps) = watch::channel(Vec::<ShardOverlap>::new());
    tasks.spawn(shard::follow_shards(
        Api::namespaced(client.clone(), &config.own_namespace),
        Api::namespaced(client.clone(), &config.own_namespace),
        config.state_configmap.clone(),
        shard.clone(),
        context.metrics.clone(),
        overlaps_sender,
        // A Lease that stopped being renewed is noticed within about a lease duration.
        config.lease_timing.duration,
    ));
    spawn_state_publisher(&mut tasks, config, client, probe, overlaps);
    tasks
}

/// Starts the controllers of the kinds this shard reconciles, in each scope, and follows what
/// they need of the kinds it does not.
fn spawn_controllers(
    tasks: &mut JoinSet<()>,
    wiring: &Wiring,
    context: &Arc<Context<Admin>>,
    scopes: Vec<Option<String>>,
    mut delivered: impl Iterator<Item = DeliveredStream>,
) {
    let runs = |kind: ObjectKind| wiring.shard.covers_kind(kind);
    for scope in scopes {
        if runs(ObjectKind::Client) {
            controllers::spawn::<OIDCClient, _>(
                tasks,
                wiring,
                scope.clone(),
                context.clone(),
                delivered.next(),
            );
        }
        if runs(ObjectKind::Organization) {
            controllers::spawn::<Organization, _>(
                tasks,
                wiring,
                scope.clone(),
                context.clone(),
                None,
            );
        }
        if runs(ObjectKind::Branding) {
            controllers::spawn::<Branding, _>(tasks, wiring, scope.clone(), context.clone(), None);
        }
        if runs(ObjectKind::IdentityProvider) {
            controllers::spawn::<IdentityProvider, _>(
                tasks,
                wiring,
                scope.clone(),
                context.clone(),
                None,
            );
        }
        // What this shard's resources wait for, when another shard reconciles it.
        if !runs(ObjectKind::Organization) {
            tasks.spawn(controllers::follow_providers::<Organization>(
                wiring.clone(),
                scope.clone(),
            ));
        }
        if runs(ObjectKind::Client) && !runs(ObjectKind::Branding) {
            tasks.spawn(controllers::follow_providers::<Branding>(
                wiring.clone(),
                scope.clone(),
            ));
        }
        // OIDCClients and identity providers read the Secrets they reference.
        if runs(ObjectKind::Client) || runs(ObjectKind::IdentityProvider) {
            tasks.spawn(controllers::follow_referenced_secrets(
                wiring.clone(),
                scope,
            ));
        }
    }
}

/// Routes the server's changes to the controllers, as the change feed (or its polling) tells
/// them.
fn spawn_change_routing(
    tasks: &mut JoinSet<()>,
    config: &Config,
    admin: Arc<Admin>,
    revisions: Arc<ServerRevisions>,
    routes: broadcast::Sender<Route>,
    shard: Arc<ShardScope>,
    gate: Arc<StartGate>,
) {
    let namespaces = config.namespaces.clone();
    let interval = config.change_poll_interval;
    let manager = config.manager.clone();
    tasks.spawn(async move {
        let covers = |kind: ObjectKind, namespace: &str| shard.covers(kind, namespace);
        let router = Router {
            routes: &routes,
            manager: &manager,
            gate: &gate,
            covers: &covers,
        };
        follow_changes(admin.as_ref(), &revisions, &namespaces, interval, &router).await;
    });
}

/// Publishes this reconciler's state (its scope, its overlaps, how fresh it is) in its
/// ConfigMap, for the plugin and the other shards.
fn spawn_state_publisher(
    tasks: &mut JoinSet<()>,
    config: &Config,
    client: Client,
    probe: watch::Receiver<ProbeState>,
    overlaps: watch::Receiver<Vec<ShardOverlap>>,
) {
    let configmaps: Api<ConfigMap> = Api::namespaced(client, &config.own_namespace);
    let leader = config.identity.clone();
    let manager = config.manager.clone();
    let address = config.connect.address.clone();
    // The Lease that says how fresh the state is; none is renewed without leader election.
    let lease = config.leader_election.then(|| config.lease_name.clone());
    let tls_secret = config.tls_secret.clone();
    let cluster_name = config.cluster_name.clone();
    let namespace_mapping = config.namespace_mapping.clone();
    // A reconciler limited in any way (or a shard) says so; one of every kind in every
    // namespace publishes what older ones did.
    let scope =
        (config.scope.shard.is_some() || config.scope.is_limited()).then(|| config.scope.clone());
    let state_configmap = config.state_configmap.clone();
    tasks.spawn(async move {
        let publisher = Publisher {
            leader: &leader,
            manager: &manager,
            server_address: &address,
            lease: lease.as_deref(),
            tls_secret: tls_secret.as_deref(),
            cluster_name: cluster_name.as_deref(),
            namespace_mapping: &namespace_mapping,
            scope: scope.as_ref(),
            configmap: &state_configmap,
        };
        publish_state(&configmaps, &publisher, probe, overlaps).await;
    });
}

/// Publishes the control-plane state when its content changes (once when the term starts): a
/// probe with the same outcome writes nothing, since the Lease renewals say the state is current.
/// New overlaps with other shards are published too.
async fn publish_state(
    configmaps: &Api<ConfigMap>,
    publisher: &Publisher<'_>,
    mut probe: watch::Receiver<ProbeState>,
    mut overlaps: watch::Receiver<Vec<ShardOverlap>>,
) {
    let mut published = None;
    let mut overlaps_open = true;
    loop {
        let current = state::control_plane_state(
            publisher,
            &probe.borrow_and_update().clone(),
            &overlaps.borrow_and_update().clone(),
        );
        if let Some(next) =
            state::next_publication(published.as_ref(), current, jiff::Timestamp::now())
        {
            match state::publish(configmaps, publisher, &next).await {
                Ok(()) => published = Some(next),
                Err(error) => {
                    tracing::warn!(error = %error, "publishing the control-plane state failed");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    continue;
                }
            }
        }
        tokio::select! {
            changed = probe.changed() => if changed.is_err() { return },
            // The overlaps' follower never ends while leading; if it did, the probe goes on.
            changed = overlaps.changed(), if overlaps_open => {
                overlaps_open = changed.is_ok();
            }
        }
    }
}

async fn log_end(what: &'static str, serve: impl Future<Output = std::io::Result<()>>) {
    if let Err(error) = serve.await {
        tracing::error!(error = %error, "{what} stopped");
    }
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
