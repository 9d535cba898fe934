//! The memory floor: a bare kube-rs reflector, in a process of its own, holding every OIDCClient
//! and Secret of the cluster as any controller's cache would, with nothing else. Its resident set
//! is what holding the objects costs before a controller does any work.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use nauthera_shared::resources::OIDCClient;

use super::measure::{Resident, resident};
use crate::cluster::client_from;

/// Fills the two caches, then reports this process's resident set as one JSON line.
pub async fn reflect(kubeconfig: &Path) -> anyhow::Result<Resident> {
    let client = client_from(kubeconfig).await?;
    let (clients, clients_writer) = reflector::store::<OIDCClient>();
    let (secrets, secrets_writer) = reflector::store::<Secret>();
    let client_stream = reflector(
        clients_writer,
        watcher(
            Api::<OIDCClient>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .for_each(|_| std::future::ready(()));
    let secret_stream = reflector(
        secrets_writer,
        watcher(Api::<Secret>::all(client), watcher::Config::default()),
    )
    .default_backoff()
    .for_each(|_| std::future::ready(()));
    tokio::spawn(client_stream);
    tokio::spawn(secret_stream);
    tokio::time::timeout(Duration::from_secs(600), async {
        clients.wait_until_ready().await?;
        secrets.wait_until_ready().await
    })
    .await
    .context("the reflector did not fill its caches within ten minutes")?
    .context("the reflector's caches closed")?;
    // Let the allocator settle after the initial lists, as a controller would be a moment later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    eprintln!(
        "reflector floor: {} OIDCClients, {} Secrets cached",
        clients.state().len(),
        secrets.state().len()
    );
    resident(std::process::id())
}
