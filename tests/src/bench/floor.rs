//! The floors: what the same work costs when done directly, with no reconciler. The cold-start
//! floor makes each manifest's write through the project's AdminService client, then one status
//! patch (and one Secret create for a generated secret), at the reconciler's concurrency: for the
//! mixed workload the Organizations first, then the Brandings, then the rest, as the order
//! between kinds demands. The drift floor takes the server's change stream as a bare subscriber
//! and answers each change with one status patch.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use nauthera_client::convert::{
    apply_branding_request, apply_client_request, apply_identity_provider_request,
    apply_organization_request,
};
use nauthera_client::{AdminClient, ConnectSettings, TlsFiles};
use nauthera_fake_server::Actor;
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::resources::{
    Branding, Drift, IdentityProvider, LocalRef, OIDCClient, Organization, ResourceStatus,
    ready_condition,
};

use super::measure::{Calls, all_requests, difference, own_cpu_seconds};
use super::observer::Observer;
use super::workload::{BENCH_LABEL, ClientItem, Composition, Key};
use crate::e2e::{Declared, MANAGER, Stack};

/// What the cold-start floor took and asked for.
#[derive(Debug)]
pub struct ColdStartFloor {
    pub elapsed: Duration,
    /// The CPU time the floor took, its stand-ins and the benchmark's watches included.
    pub cpu_seconds: f64,
    pub server_calls: Calls,
    pub kube_requests: Calls,
}

/// An AdminService client with the reconciler's certificate.
pub async fn admin_client(stack: &Stack) -> anyhow::Result<AdminClient> {
    let settings = ConnectSettings::new(
        stack.server.address().to_string(),
        TlsFiles::in_dir(&stack.tls_dir),
    )
    .with_server_name(stack.pki.server_name.clone());
    AdminClient::connect(settings)
        .await
        .context("the floor cannot connect to the fake server")
}

/// Registers every manifest of the stack's workload directly (and delivers each generated
/// Secret); returns when the last one is done. `expected` is what the workload holds.
pub async fn cold_start(
    stack: &Stack,
    concurrency: usize,
    expected: &Composition,
) -> anyhow::Result<ColdStartFloor> {
    let emulator = stack
        .cluster
        .emulator()
        .context("the benchmark runs on the emulator")?;
    let admin = admin_client(stack).await?;
    let calls_before = stack.server.counters().calls;
    let requests_before = all_requests(emulator);
    let started = Instant::now();
    let cpu_before = own_cpu_seconds()?;
    let kube = stack.client();
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
            async move { register_organization(&admin, &kube, &organization).await }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    futures::stream::iter(brandings)
        .map(|branding| {
            let admin = admin.clone();
            let kube = kube.clone();
            async move { register_branding(&admin, &kube, &branding).await }
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
                        register_identity_provider(&admin, &kube, &provider).await
                    }
                    Rest::Client(client) => register_one(&admin, &kube, &client).await,
                }
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let elapsed = started.elapsed();
    let cpu_seconds = own_cpu_seconds()? - cpu_before;
    Ok(ColdStartFloor {
        elapsed,
        cpu_seconds,
        server_calls: difference(&stack.server.counters().calls, &calls_before),
        kube_requests: difference(&all_requests(emulator), &requests_before),
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

async fn register_organization(
    admin: &AdminClient,
    kube: &kube::Client,
    organization: &Organization,
) -> anyhow::Result<()> {
    let request = apply_organization_request(organization, MANAGER, None)?;
    let held = admin.apply_organization(request).await.with_context(|| {
        format!(
            "the floor's ApplyOrganization of {}",
            organization.spec.slug
        )
    })?;
    let status = registered_status(
        organization.metadata.generation,
        held.revision,
        held.generation_in_force,
        |status| status.slug = Some(held.slug),
    );
    patch_status(kube, organization, &status).await
}

async fn register_branding(
    admin: &AdminClient,
    kube: &kube::Client,
    branding: &Branding,
) -> anyhow::Result<()> {
    let request = apply_branding_request(branding, MANAGER, None)?;
    let held = admin
        .apply_branding(request)
        .await
        .with_context(|| format!("the floor's ApplyBranding of {}", branding.name_any()))?;
    let status = registered_status(
        branding.metadata.generation,
        held.revision,
        held.generation_in_force,
        |_| {},
    );
    patch_status(kube, branding, &status).await
}

/// Reads the provider's upstream secret once, writes the provider with it.
async fn register_identity_provider(
    admin: &AdminClient,
    kube: &kube::Client,
    provider: &IdentityProvider,
) -> anyhow::Result<()> {
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
    let status = registered_status(
        provider.metadata.generation,
        held.revision,
        held.generation_in_force,
        |status| status.secret_version = secret.metadata.resource_version.clone(),
    );
    patch_status(kube, provider, &status).await
}

async fn register_one(
    admin: &AdminClient,
    kube: &kube::Client,
    client: &OIDCClient,
) -> anyhow::Result<()> {
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
    patch_status(kube, client, &status).await?;
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
    Ok(())
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
