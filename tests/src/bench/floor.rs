//! The floors: what the same work costs when done directly, with no reconciler. The cold-start
//! floor makes each client's ApplyClient call through the project's AdminService client, then one
//! status patch and one Secret create, at the reconciler's concurrency. The drift floor takes the
//! server's change stream as a bare subscriber and answers each change with one status patch.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use nauthera_fake_server::Actor;
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::client::{AdminClient, ConnectSettings, TlsFiles};
use nauthera_shared::convert::apply_client_request;
use nauthera_shared::resources::{Drift, LocalRef, OIDCClient, ResourceStatus, ready_condition};

use super::measure::{Calls, all_requests, difference};
use super::observer::Observer;
use super::workload::{BENCH_LABEL, Key};
use crate::e2e::{MANAGER, Stack};

/// What the cold-start floor took and asked for.
#[derive(Debug)]
pub struct ColdStartFloor {
    pub elapsed: Duration,
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

/// Registers every client of the stack's workload directly and delivers its Secret; returns when
/// the last one is done.
pub async fn cold_start(
    stack: &Stack,
    concurrency: usize,
    expected: usize,
) -> anyhow::Result<ColdStartFloor> {
    let emulator = stack
        .cluster
        .emulator()
        .context("the benchmark runs on the emulator")?;
    let admin = admin_client(stack).await?;
    let calls_before = stack.server.counters().calls;
    let requests_before = all_requests(emulator);
    let started = Instant::now();
    let clients: Api<OIDCClient> = Api::all(stack.client());
    let listed = clients
        .list(&ListParams::default().labels(&format!("{BENCH_LABEL}=true")))
        .await
        .context("the floor cannot list the workload")?
        .items;
    if listed.len() != expected {
        bail!(
            "the floor found {} of the workload's {expected} clients",
            listed.len()
        );
    }
    futures::stream::iter(listed)
        .map(|client| {
            let admin = admin.clone();
            let kube = stack.client();
            async move { register_one(&admin, &kube, &client).await }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let elapsed = started.elapsed();
    Ok(ColdStartFloor {
        elapsed,
        server_calls: difference(&stack.server.counters().calls, &calls_before),
        kube_requests: difference(&all_requests(emulator), &requests_before),
    })
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
    let generation = client.metadata.generation;
    let status = ResourceStatus {
        observed_generation: generation,
        conditions: vec![ready_condition(
            Reason::Registered,
            format!("generation {} is in force", generation.unwrap_or_default()),
            generation,
            now(),
        )],
        phase: Some(Phase::Registered),
        reason: Some(Reason::Registered),
        client_id: Some(held.client_id.clone()),
        revision: Some(held.revision.clone()),
        generation_in_force: Some(held.generation_in_force),
        secret_ref: Some(LocalRef { name: name.clone() }),
        last_attempt_time: Some(now()),
        ..ResourceStatus::default()
    };
    let api: Api<OIDCClient> = Api::namespaced(kube.clone(), &namespace);
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await
    .with_context(|| format!("the floor's status patch of {namespace}/{name}"))?;
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

/// For each key in turn: an out-of-band edit on the server, the change read from a bare
/// WatchChanges subscription, one status patch to Drifted, and the time until a watcher sees it.
pub async fn drift(
    stack: &Stack,
    observer: &Observer,
    keys: &[Key],
    timeout: Duration,
) -> anyhow::Result<Vec<Duration>> {
    let admin = admin_client(stack).await?;
    let mut changes = admin
        .watch_changes(None)
        .await
        .context("the floor cannot watch changes")?;
    let mut latencies = Vec::new();
    for key in keys {
        let edited = Instant::now();
        let revision = stack
            .server
            .edit_client(
                &key.object_ref(),
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
            drift: Some(Drift {
                server_revision: revision,
                actor: Some("user:floor@example.com".to_owned()),
                fields: vec!["spec.displayName".to_owned()],
                detected_at: Some(now()),
                ..Drift::default()
            }),
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
