//! The benchmark's workload: N confidential OIDCClients with generated secrets, spread round-robin
//! over several namespaces, created the way a GitOps tool applies them.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use nauthera_proto::v1::ObjectRef;
use nauthera_shared::resources::OIDCClient;

use crate::e2e::ISSUER;

/// The label every object of the workload carries (`true`).
pub const BENCH_LABEL: &str = "nauthera.io/bench";
/// How many creates the harness keeps in flight while it sets the workload up.
const SETUP_CONCURRENCY: usize = 32;

/// One object of the workload: its namespace and name (its generated Secret has the same name).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub namespace: String,
    pub name: String,
}

impl Key {
    /// The server's reference of this client.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            issuer: ISSUER.to_owned(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// N clients over `namespaces` namespaces.
#[derive(Clone, Debug)]
pub struct Workload {
    pub clients: usize,
    pub namespaces: usize,
}

impl Workload {
    /// The namespaces, `bench-00` and on.
    pub fn namespace_names(&self) -> Vec<String> {
        (0..self.namespaces.max(1))
            .map(|i| format!("bench-{i:02}"))
            .collect()
    }

    /// Every object's key, in creation order.
    pub fn keys(&self) -> Vec<Key> {
        let namespaces = self.namespace_names();
        (0..self.clients)
            .map(|i| Key {
                namespace: namespaces[i % namespaces.len()].clone(),
                name: format!("client-{i:06}"),
            })
            .collect()
    }

    /// The manifest of one client, as an application team writes it.
    pub fn manifest(key: &Key) -> anyhow::Result<OIDCClient> {
        let name = &key.name;
        serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "OIDCClient",
            "metadata": {
                "name": name,
                "namespace": key.namespace,
                "labels": { BENCH_LABEL: "true" },
            },
            "spec": {
                "issuer": ISSUER,
                "displayName": format!("Web app {name}"),
                "redirectUris": [format!("https://{name}.example.test/callback")],
                "postLogoutRedirectUris": [format!("https://{name}.example.test/")],
                "grantTypes": ["authorization_code", "refresh_token"],
                "responseTypes": ["code"],
                "scopes": ["openid", "profile", "email"],
                "tokenEndpointAuthMethod": "client_secret_basic",
                "secret": { "generate": true },
                "deletionPolicy": "Delete",
            }
        }))
        .context("the workload's manifest is an OIDCClient")
    }

    /// Creates the namespaces and every client; returns how long it took.
    pub async fn create(&self, client: &kube::Client) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for name in self.namespace_names() {
            let namespace = serde_json::from_value(serde_json::json!({
                "metadata": { "name": name, "labels": { BENCH_LABEL: "true" } }
            }))?;
            namespaces
                .create(&PostParams::default(), &namespace)
                .await
                .with_context(|| format!("cannot create the namespace {name}"))?;
        }
        futures::stream::iter(self.keys())
            .map(|key| {
                let client = client.clone();
                async move {
                    let api: Api<OIDCClient> = Api::namespaced(client, &key.namespace);
                    api.create(&PostParams::default(), &Workload::manifest(&key)?)
                        .await
                        .with_context(|| {
                            format!("cannot create OIDCClient {}/{}", key.namespace, key.name)
                        })?;
                    Ok::<_, anyhow::Error>(())
                }
            })
            .buffer_unordered(SETUP_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(started.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_spread_over_the_namespaces() {
        let workload = Workload {
            clients: 5,
            namespaces: 2,
        };
        let keys = workload.keys();
        assert_eq!(keys.len(), 5);
        assert_eq!(keys[0].namespace, "bench-00");
        assert_eq!(keys[1].namespace, "bench-01");
        assert_eq!(keys[4].name, "client-000004");
        assert!(Workload::manifest(&keys[0]).is_ok());
    }
}
