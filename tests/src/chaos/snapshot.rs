//! Reads everything the invariants look at, at one moment.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};

use super::invariants::{SecretShown, Shown, Snapshot};
use super::world::Kind;
use crate::e2e::{Declared, Stack};

async fn shown_of<K: Declared>(
    stack: &Stack,
    kind: Kind,
    into: &mut BTreeMap<(Kind, String), Shown>,
) -> anyhow::Result<()> {
    let listed = Api::<K>::namespaced(stack.client(), stack.namespace())
        .list(&ListParams::default())
        .await?;
    for resource in listed.items {
        let status = resource.declared_status();
        let shown = Shown {
            reason: status.and_then(|s| s.reason).map(|r| r.to_string()),
            observed_generation: status.and_then(|s| s.observed_generation),
            generation: resource.meta().generation,
            client_id: status.and_then(|s| s.client_id.clone()),
            message: status.and_then(|s| s.message.clone()),
            rotation_pending: resource
                .meta()
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(nauthera_shared::ROTATE_ANNOTATION)),
        };
        let name = resource.meta().name.clone().unwrap_or_default();
        into.insert((kind, name), shown);
    }
    Ok(())
}

/// The label the reconciler marks a Secret released from a manifest deleted with `Orphan` with.
const RELEASED_LABEL: &str = "nauthera.io/released";

pub async fn take(stack: &Stack) -> anyhow::Result<Snapshot> {
    let namespace = stack.namespace().to_owned();
    let mut shown = BTreeMap::new();
    shown_of::<OIDCClient>(stack, Kind::OIDCClient, &mut shown).await?;
    shown_of::<Branding>(stack, Kind::Branding, &mut shown).await?;
    shown_of::<IdentityProvider>(stack, Kind::IdentityProvider, &mut shown).await?;
    shown_of::<Organization>(stack, Kind::Organization, &mut shown).await?;
    let secrets = Api::<Secret>::namespaced(stack.client(), &namespace)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|secret| SecretShown {
            name: secret.metadata.name.clone().unwrap_or_default(),
            owner_client: secret
                .metadata
                .owner_references
                .unwrap_or_default()
                .into_iter()
                .find(|owner| owner.kind == "OIDCClient")
                .map(|owner| owner.name),
            released: secret
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(RELEASED_LABEL))
                .is_some_and(|v| v == "true"),
            data: secret
                .data
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(key, bytes)| Some((key, String::from_utf8(bytes.0).ok()?)))
                .collect(),
        })
        .collect();
    let mut client_hashes = BTreeMap::new();
    let mut provider_hashes = BTreeMap::new();
    for hash in stack.server.secret_hashes() {
        if hash.namespace != namespace {
            continue;
        }
        match hash.kind {
            "client" => client_hashes.insert(hash.name, hash.sha256),
            _ => provider_hashes.insert(hash.name, hash.sha256),
        };
    }
    Ok(Snapshot {
        namespace,
        shown,
        secrets,
        held: stack.server.held_objects(),
        client_hashes,
        provider_hashes,
        audit: stack.server.audit_events(),
    })
}
