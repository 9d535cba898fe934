//! The memory floor: a bare kube-rs reflector, in a process of its own, holding every manifest of
//! the workload's kinds and every Secret of the cluster as any controller's cache would, with
//! nothing else. Its resident set is what holding the objects costs before a controller does any
//! work.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};

use super::measure::{Resident, resident};
use crate::cluster::client_from;

/// Starts one reflector for a kind; returns how to wait for its first listing and how many
/// objects its store holds.
fn reflect_kind<K>(
    client: &kube::Client,
) -> (
    BoxFuture<'static, anyhow::Result<()>>,
    Box<dyn Fn() -> usize>,
)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let stream = reflector(
        writer,
        watcher(Api::<K>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff()
    .for_each(|_| std::future::ready(()));
    tokio::spawn(stream);
    let ready = store.clone();
    (
        Box::pin(async move {
            ready
                .wait_until_ready()
                .await
                .context("the reflector's cache closed")
        }),
        Box::new(move || store.state().len()),
    )
}

/// Fills the caches (OIDCClients and Secrets; with `all_kinds` also Organizations, Brandings and
/// IdentityProviders), then reports this process's resident set as one JSON line.
pub async fn reflect(kubeconfig: &Path, all_kinds: bool) -> anyhow::Result<Resident> {
    let client = client_from(kubeconfig).await?;
    let mut caches = vec![
        ("OIDCClients", reflect_kind::<OIDCClient>(&client)),
        ("Secrets", reflect_kind::<Secret>(&client)),
    ];
    if all_kinds {
        caches.push(("Organizations", reflect_kind::<Organization>(&client)));
        caches.push(("Brandings", reflect_kind::<Branding>(&client)));
        caches.push((
            "IdentityProviders",
            reflect_kind::<IdentityProvider>(&client),
        ));
    }
    let mut counts = Vec::new();
    tokio::time::timeout(Duration::from_secs(600), async {
        for (name, (ready, len)) in caches {
            ready.await?;
            counts.push((name, len));
        }
        Ok::<_, anyhow::Error>(())
    })
    .await
    .context("the reflector did not fill its caches within ten minutes")??;
    // Let the allocator settle after the initial lists, as a controller would be a moment later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    eprintln!(
        "reflector floor: {} cached",
        counts
            .iter()
            .map(|(name, len)| format!("{} {name}", len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    resident(std::process::id())
}
