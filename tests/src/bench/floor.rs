//! The floors: what the same work costs when done directly, with no reconciler. The full
//! cold-start floor makes every write a registration requires, at the reconciler's concurrency and
//! with its client libraries: per manifest the finalizer patch (before the server write, so that a
//! deletion in between cannot leave a server object behind), the server write through the
//! project's AdminService client, the Secret create (OIDCClients with a generated secret), the
//! status patch and one Event. For the mixed workload the Organizations go first, then the
//! Brandings, then the rest, as the order between kinds demands. It runs as a process of its own,
//! as the reconciler does, so that its own CPU time and what serving it cost the stand-ins are
//! told apart the same way. The registration-only floor of earlier rounds leaves out the finalizer
//! and the Event; it is kept as a second row. The drift floor takes the server's change stream as
//! a bare subscriber and answers each change with one status patch.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use nauthera_client::convert::{
    apply_branding_request, apply_client_request, apply_identity_provider_request,
    apply_organization_request,
};
use nauthera_client::{AdminClient, ConnectSettings, TlsFiles};
use nauthera_fake_server::Actor;
use nauthera_shared::FINALIZER;
use nauthera_shared::catalog::{EventReason, EventType, Phase, Reason};
use nauthera_shared::resources::{
    Branding, Drift, IdentityProvider, LocalRef, OIDCClient, Organization, ResourceStatus,
    ready_condition,
};
use serde::{Deserialize, Serialize};

use super::measure::{Calls, RequestCounter, difference, own_cpu_seconds};
use super::observer::Observer;
use super::workload::{BENCH_LABEL, ClientItem, Composition, Key};
use crate::cluster::client_from;
use crate::e2e::{Declared, MANAGER, Stack};

/// Which writes a cold-start floor makes per manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorWrites {
    /// Every write the contract requires: the finalizer patch, the server write, the Secret
    /// create (OIDCClients), the status patch and one Event.
    Full,
    /// The server write, the Secret create and the status patch only: the floor of earlier
    /// rounds, kept so that their figures still compare.
    RegistrationOnly,
}

/// What the cold-start floor took and asked for.
#[derive(Debug)]
pub struct ColdStartFloor {
    pub elapsed: Duration,
    /// The CPU time the floor took, its stand-ins and the benchmark's watches included.
    pub cpu_seconds: f64,
    /// The floor's own process alone, as the reconciler's is counted: the rest of `cpu_seconds`
    /// is what serving it cost the stand-ins (and the watches).
    pub own_cpu_seconds: f64,
    pub server_calls: Calls,
    pub kube_requests: Calls,
}

/// What the floor's process needs to reach a stack: its API server and its AdminService.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FloorTarget {
    pub kubeconfig: PathBuf,
    pub server_address: String,
    pub tls_dir: PathBuf,
    pub server_name: String,
}

impl FloorTarget {
    pub fn of(stack: &Stack) -> FloorTarget {
        FloorTarget {
            kubeconfig: stack.cluster.kubeconfig().to_path_buf(),
            server_address: stack.server.address().to_string(),
            tls_dir: stack.tls_dir.clone(),
            server_name: stack.pki.server_name.clone(),
        }
    }
}

/// What the floor's process reports of itself: its wall time from the first listing to the
/// last write, and its whole CPU time.
#[derive(Debug, Serialize, Deserialize)]
pub struct FloorRun {
    pub elapsed_seconds: f64,
    pub cpu_seconds: f64,
}

/// An AdminService client with the reconciler's certificate.
pub async fn admin_client(stack: &Stack) -> anyhow::Result<AdminClient> {
    connect_admin(&FloorTarget::of(stack)).await
}

async fn connect_admin(target: &FloorTarget) -> anyhow::Result<AdminClient> {
    let settings = ConnectSettings::new(
        target.server_address.clone(),
        TlsFiles::in_dir(&target.tls_dir),
    )
    .with_server_name(target.server_name.clone());
    AdminClient::connect(settings)
        .await
        .context("the floor cannot connect to the fake server")
}

/// Registers every manifest of the stack's workload directly (and delivers each generated
/// Secret) from a process of its own, `bench_exe cold-start-floor`, as the reconciler runs in
/// one; returns when the last one is done. `expected` is what the workload holds.
pub async fn cold_start(
    stack: &Stack,
    bench_exe: &Path,
    concurrency: usize,
    expected: &Composition,
    writes: FloorWrites,
) -> anyhow::Result<ColdStartFloor> {
    let requests = RequestCounter::of(&stack.cluster);
    let calls_before = stack.server.counters().calls;
    let requests_before = requests.all().await?;
    let cpu_before = own_cpu_seconds()?;
    let mut command = tokio::process::Command::new(bench_exe);
    command
        .arg("cold-start-floor")
        .arg("--target")
        .arg(serde_json::to_string(&FloorTarget::of(stack))?)
        .arg("--composition")
        .arg(serde_json::to_string(expected)?)
        .arg("--concurrency")
        .arg(concurrency.to_string());
    if writes == FloorWrites::RegistrationOnly {
        command.arg("--registration-only");
    }
    // Awaited, not blocked on: the stand-ins in this process serve the floor meanwhile.
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .await
        .context("cannot run the cold-start floor")?;
    if !output.status.success() {
        bail!("the cold-start floor failed ({})", output.status);
    }
    let run: FloorRun = serde_json::from_slice(&output.stdout)
        .context("the cold-start floor printed no figures")?;
    let stand_ins_seconds = own_cpu_seconds()? - cpu_before;
    Ok(ColdStartFloor {
        elapsed: Duration::from_secs_f64(run.elapsed_seconds),
        cpu_seconds: run.cpu_seconds + stand_ins_seconds,
        own_cpu_seconds: run.cpu_seconds,
        server_calls: difference(&stack.server.counters().calls, &calls_before),
        kube_requests: difference(&requests.all().await?, &requests_before),
    })
}

/// The floor's process: registers every manifest `expected` counts, at `concurrency`, and
/// reports its wall and CPU time.
pub async fn register_all(
    target: &FloorTarget,
    concurrency: usize,
    expected: &Composition,
    writes: FloorWrites,
) -> anyhow::Result<FloorRun> {
    let kube = client_from(&target.kubeconfig).await?;
    let admin = connect_admin(target).await?;
    let started = Instant::now();
    let organizations: Vec<Organization> =
        listed(&kube, expected.organizations, "Organization").await?;
    let brandings: Vec<Branding> = listed(&kube, expected.brandings, "Branding").await?;
    let providers: Vec<IdentityProvider> =
        listed(&kube, expected.identity_providers, "IdentityProvider").await?;
    let clients: Vec<OIDCClient> = listed(&kube, expected.clients, "OIDCClient").await?;
    // What depends on an organization waits for it, and a client for its branding: each stage
    // starts when the one before has finished, as a perfect reconciler would have to.
    futures::stream::iter(organizations)
        .map(|organization| {
            let admin = admin.clone();
            let kube = kube.clone();
            async move { register_organization(&admin, &kube, &organization, writes).await }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    futures::stream::iter(brandings)
        .map(|branding| {
            let admin = admin.clone();
            let kube = kube.clone();
            async move { register_branding(&admin, &kube, &branding, writes).await }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let rest = providers
        .into_iter()
        .map(Rest::Provider)
        .chain(clients.into_iter().map(Rest::Client));
    futures::stream::iter(rest)
        .map(|manifest| {
            let admin = admin.clone();
            let kube = kube.clone();
            async move {
                match manifest {
                    Rest::Provider(provider) => {
                        register_identity_provider(&admin, &kube, &provider, writes).await
                    }
                    Rest::Client(client) => register_one(&admin, &kube, &client, writes).await,
                }
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(FloorRun {
        elapsed_seconds: started.elapsed().as_secs_f64(),
        cpu_seconds: own_cpu_seconds()?,
    })
}

/// What is registered after the Organizations and the Brandings.
enum Rest {
    Provider(IdentityProvider),
    Client(OIDCClient),
}

/// The workload's manifests of one kind, in one list (no list for a kind the workload holds
/// none of, so the clients workload's floor asks for what it always did).
async fn listed<K: Declared>(
    kube: &kube::Client,
    expected: usize,
    kind: &str,
) -> anyhow::Result<Vec<K>> {
    if expected == 0 {
        return Ok(Vec::new());
    }
    let api: Api<K> = Api::all(kube.clone());
    let items = api
        .list(&ListParams::default().labels(&format!("{BENCH_LABEL}=true")))
        .await
        .with_context(|| format!("the floor cannot list the workload's {kind}s"))?
        .items;
    if items.len() != expected {
        bail!(
            "the floor found {} of the workload's {expected} {kind}s",
            items.len()
        );
    }
    Ok(items)
}

/// The status a reconciler leaves on a registered manifest of any kind; `extra` fills what is
/// particular to the kind.
fn registered_status(
    generation: Option<i64>,
    revision: String,
    generation_in_force: i64,
    extra: impl FnOnce(&mut ResourceStatus),
) -> ResourceStatus {
    let mut status = ResourceStatus {
        observed_generation: generation,
        conditions: vec![ready_condition(
            Reason::Registered,
            format!("generation {} is in force", generation.unwrap_or_default()),
            generation,
            now(),
        )],
        phase: Some(Phase::Registered),
        reason: Some(Reason::Registered),
        revision: Some(revision),
        generation_in_force: Some(generation_in_force),
        last_attempt_time: Some(now()),
        ..ResourceStatus::default()
    };
    extra(&mut status);
    status
}

/// One status patch, as the reconciler makes it.
async fn patch_status<K: Declared>(
    kube: &kube::Client,
    manifest: &K,
    status: &ResourceStatus,
) -> anyhow::Result<()> {
    let namespace = manifest.namespace().context("a namespaced manifest")?;
    let name = manifest.name_any();
    let api: Api<K> = Api::namespaced(kube.clone(), &namespace);
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await
    .with_context(|| {
        format!(
            "the floor's status patch of {} {namespace}/{name}",
            K::kind(&())
        )
    })?;
    Ok(())
}

/// The finalizer patch, as the reconciler makes it: a merge patch of the metadata that names the
/// resourceVersion read, so that a concurrent change is not lost.
async fn add_finalizer<K: Declared>(kube: &kube::Client, manifest: &K) -> anyhow::Result<()> {
    let namespace = manifest.namespace().context("a namespaced manifest")?;
    let name = manifest.name_any();
    let api: Api<K> = Api::namespaced(kube.clone(), &namespace);
    let patch = serde_json::json!({ "metadata": {
        "finalizers": [FINALIZER],
        "resourceVersion": manifest.resource_version(),
    }});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| {
            format!(
                "the floor's finalizer patch of {} {namespace}/{name}",
                K::kind(&())
            )
        })?;
    Ok(())
}

/// The one `Registered` Event of a registration, written through `events.k8s.io/v1` as the
/// reconciler writes it.
async fn record_registered<K: Declared>(
    kube: &kube::Client,
    manifest: &K,
    revision: &str,
) -> anyhow::Result<()> {
    let namespace = manifest.namespace().context("a namespaced manifest")?;
    let name = manifest.name_any();
    let now = jiff::Timestamp::now();
    let reason = EventReason::Registered;
    let event = Event {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace.clone()),
            ..Default::default()
        },
        action: Some("Reconcile".to_owned()),
        reason: Some(reason.as_str().to_owned()),
        note: Some(format!(
            "generation {} is in force at revision {revision}",
            manifest.meta().generation.unwrap_or_default()
        )),
        type_: Some(
            match reason.event_type() {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_owned(),
        ),
        event_time: Some(MicroTime(now)),
        regarding: Some(manifest.object_ref(&())),
        reporting_controller: Some(MANAGER.to_owned()),
        reporting_instance: Some("floor".to_owned()),
        ..Event::default()
    };
    let events: Api<Event> = Api::namespaced(kube.clone(), &namespace);
    events
        .create(&PostParams::default(), &event)
        .await
        .with_context(|| format!("the floor's Event for {namespace}/{name}"))?;
    Ok(())
}

/// One manifest's registration: `register` makes the server write (and what the kind needs
/// with it) and returns the status and the revision written; the full floor wraps it in the
/// finalizer patch before and the Event after.
async fn registration<K, F>(
    kube: &kube::Client,
    manifest: &K,
    writes: FloorWrites,
    register: F,
) -> anyhow::Result<()>
where
    K: Declared,
    F: Future<Output = anyhow::Result<ResourceStatus>>,
{
    if writes == FloorWrites::Full {
        add_finalizer(kube, manifest).await?;
    }
    let status = register.await?;
    patch_status(kube, manifest, &status).await?;
    if writes == FloorWrites::Full {
        record_registered(
            kube,
            manifest,
            status.revision.as_deref().unwrap_or_default(),
        )
        .await?;
    }
    Ok(())
}

async fn register_organization(
    admin: &AdminClient,
    kube: &kube::Client,
    organization: &Organization,
    writes: FloorWrites,
) -> anyhow::Result<()> {
    registration(kube, organization, writes, async {
        let request = apply_organization_request(organization, MANAGER, None)?;
        let held = admin.apply_organization(request).await.with_context(|| {
            format!(
                "the floor's ApplyOrganization of {}",
                organization.spec.slug
            )
        })?;
        Ok(registered_status(
            organization.metadata.generation,
            held.revision,
            held.generation_in_force,
            |status| status.slug = Some(held.slug),
        ))
    })
    .await
}

async fn register_branding(
    admin: &AdminClient,
    kube: &kube::Client,
    branding: &Branding,
    writes: FloorWrites,
) -> anyhow::Result<()> {
    registration(kube, branding, writes, async {
        let request = apply_branding_request(branding, MANAGER, None)?;
        let held = admin
            .apply_branding(request)
            .await
            .with_context(|| format!("the floor's ApplyBranding of {}", branding.name_any()))?;
        Ok(registered_status(
            branding.metadata.generation,
            held.revision,
            held.generation_in_force,
            |_| {},
        ))
    })
    .await
}

/// Reads the provider's upstream secret once, writes the provider with it.
async fn register_identity_provider(
    admin: &AdminClient,
    kube: &kube::Client,
    provider: &IdentityProvider,
    writes: FloorWrites,
) -> anyhow::Result<()> {
    registration(kube, provider, writes, async {
        let namespace = provider.namespace().context("a namespaced provider")?;
        let name = provider.name_any();
        let reference = provider
            .spec
            .secret_ref
            .as_ref()
            .context("the workload's providers name their upstream Secret")?;
        let secrets: Api<Secret> = Api::namespaced(kube.clone(), &namespace);
        let secret = secrets.get(&reference.name).await.with_context(|| {
            format!(
                "the floor's read of the Secret {namespace}/{}",
                reference.name
            )
        })?;
        let value = secret
            .data
            .as_ref()
            .and_then(|data| data.get(&reference.key))
            .map(|value| String::from_utf8_lossy(&value.0).into_owned())
            .with_context(|| format!("the Secret {} has no {}", reference.name, reference.key))?;
        let request = apply_identity_provider_request(provider, Some(&value), MANAGER, None)?;
        let held = admin
            .apply_identity_provider(request)
            .await
            .with_context(|| format!("the floor's ApplyIdentityProvider of {namespace}/{name}"))?;
        Ok(registered_status(
            provider.metadata.generation,
            held.revision,
            held.generation_in_force,
            |status| status.secret_version = secret.metadata.resource_version.clone(),
        ))
    })
    .await
}

/// The client's server write, then its generated Secret (the status names it, so it exists
/// first).
async fn register_one(
    admin: &AdminClient,
    kube: &kube::Client,
    client: &OIDCClient,
    writes: FloorWrites,
) -> anyhow::Result<()> {
    registration(kube, client, writes, async {
        let namespace = client.namespace().context("a namespaced client")?;
        let name = client.name_any();
        let request = apply_client_request(client, None, MANAGER, None)?;
        let applied = admin
            .apply_client(request)
            .await
            .with_context(|| format!("the floor's ApplyClient of {namespace}/{name}"))?;
        let held = applied.client.unwrap_or_default();
        let status = registered_status(
            client.metadata.generation,
            held.revision.clone(),
            held.generation_in_force,
            |status| {
                status.client_id = Some(held.client_id.clone());
                status.secret_ref = Some(LocalRef { name: name.clone() });
            },
        );
        let secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                owner_references: client.controller_owner_ref(&()).map(|o| vec![o]),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                (
                    "clientSecret".to_owned(),
                    ByteString(applied.secret.into_bytes()),
                ),
                (
                    "clientId".to_owned(),
                    ByteString(held.client_id.into_bytes()),
                ),
            ])),
            ..Secret::default()
        };
        let secrets: Api<Secret> = Api::namespaced(kube.clone(), &namespace);
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .with_context(|| format!("the floor's Secret create for {namespace}/{name}"))?;
        Ok(status)
    })
    .await
}

/// For each client in turn: an out-of-band edit on the server, the change read from a bare
/// WatchChanges subscription, one status patch to Drifted, and the time until a watcher sees it.
pub async fn drift(
    stack: &Stack,
    observer: &Observer,
    clients: &[ClientItem],
    timeout: Duration,
) -> anyhow::Result<Vec<Duration>> {
    let admin = admin_client(stack).await?;
    let mut changes = admin
        .watch_changes(None)
        .await
        .context("the floor cannot watch changes")?;
    let mut latencies = Vec::new();
    for client in clients {
        let key: &Key = &client.key;
        let edited = Instant::now();
        let revision = stack
            .server
            .edit_client(
                &client.object_ref(),
                &Actor::dashboard("floor@example.com"),
                |s| {
                    s.display_name.push_str(" (edited)");
                },
            )
            .map_err(|e| anyhow::anyhow!("the floor cannot edit {}: {e}", key.name))?;
        loop {
            let event = tokio::time::timeout(timeout, changes.next())
                .await
                .context("no change event within the timeout")??
                .context("the change stream ended")?;
            if event
                .r#ref
                .as_ref()
                .is_some_and(|r| r.name == key.name && r.namespace == key.namespace)
            {
                break;
            }
        }
        let drifted = ResourceStatus {
            phase: Some(Phase::Error),
            reason: Some(Reason::Drifted),
            drift: Some(Box::new(Drift {
                server_revision: revision,
                actor: Some("user:floor@example.com".to_owned()),
                fields: vec!["spec.displayName".to_owned()],
                detected_at: Some(now()),
                ..Drift::default()
            })),
            ..ResourceStatus::default()
        };
        let api: Api<OIDCClient> = Api::namespaced(stack.client(), &key.namespace);
        api.patch_status(
            &key.name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": drifted })),
        )
        .await
        .with_context(|| format!("the floor's drift patch of {}", key.name))?;
        let seen = observer
            .wait_until(edited + timeout, |seen| {
                seen.reason(key) == Some(Reason::Drifted)
            })
            .await
            .context("the floor's drift was not seen within the timeout")?;
        latencies.push(seen - edited);
    }
    Ok(latencies)
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}
