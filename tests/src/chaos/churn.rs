//! The churn: creates, updates (including moves of a client's secretName, clients whose Secret
//! takes a declared shape on every other generation, and new upstream secrets) and deletes
//! across the kinds, applied to the cluster the way a GitOps tool applies
//! them (server-side apply), at a steady rate while a scenario's faults act.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use serde::Serialize;
use serde_json::{Value, json};

use super::random::Random;
use super::world::{
    CHAOS_ISSUER, CHAOS_SLUG, CollectedDeletion, Declared, Kind, Policy, Propagation,
    SERVER_ISSUER, World,
};

/// The field manager the churn applies with.
const FIELD_MANAGER: &str = "nauthera-chaos";
/// The label every object of the run carries.
pub const CHAOS_LABEL: &str = "nauthera.io/chaos";
/// The key of an identity provider's upstream client secret in its Secret.
pub const UPSTREAM_KEY: &str = "clientSecret";

/// What the churn did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChurnCounts {
    pub creates: u64,
    pub updates: u64,
    pub secret_name_moves: u64,
    pub upstream_secret_changes: u64,
    /// Rotations of a generated secret asked for (`nauthera.io/rotate`).
    pub rotations: u64,
    pub deletes: u64,
}

impl ChurnCounts {
    pub fn operations(&self) -> u64 {
        self.creates
            + self.updates
            + self.secret_name_moves
            + self.upstream_secret_changes
            + self.rotations
            + self.deletes
    }
}

/// Applies the world's changes to one namespace.
pub struct Churn {
    client: kube::Client,
    namespace: String,
    pub random: Random,
    /// The number of manifests the churn keeps around.
    target: usize,
}

impl Churn {
    pub fn new(client: kube::Client, namespace: &str, seed: u64, target: usize) -> Churn {
        Churn {
            client,
            namespace: namespace.to_owned(),
            random: Random::new(seed),
            target: target.max(4),
        }
    }

    /// The run's Organization and `target` manifests of the other kinds.
    pub async fn populate(&mut self, world: &mut World) -> anyhow::Result<()> {
        let mut counts = ChurnCounts::default();
        let organization = Declared {
            kind: Kind::Organization,
            name: CHAOS_SLUG.to_owned(),
            issuer: CHAOS_ISSUER.to_owned(),
            policy: Policy::Orphan,
            version: 1,
            secret_name: None,
            upstream_secret: None,
            earns_refusal: false,
        };
        self.apply(&organization).await?;
        world.live.insert(
            (Kind::Organization, organization.name.clone()),
            organization,
        );
        counts.creates += 1;
        while world.live.len() < self.target {
            self.create(world, &mut counts).await?;
        }
        Ok(())
    }

    /// One random operation, keeping the number of manifests near the target.
    pub async fn step(
        &mut self,
        world: &mut World,
        counts: &mut ChurnCounts,
    ) -> anyhow::Result<()> {
        let live = world.live.len();
        let draw = self.random.unit();
        let create_share = if live < self.target * 8 / 10 {
            0.7
        } else if live > self.target * 12 / 10 {
            0.1
        } else {
            0.3
        };
        if draw < create_share {
            return self.create(world, counts).await;
        }
        let draw = (draw - create_share) / (1.0 - create_share);
        let Some(key) = self.pick(world) else {
            return self.create(world, counts).await;
        };
        if draw < 0.35 {
            self.delete(world, &key, counts).await
        } else {
            self.update(world, &key, counts).await
        }
    }

    /// A live manifest other than the run's Organization, at random.
    fn pick(&mut self, world: &World) -> Option<(Kind, String)> {
        let keys: Vec<&(Kind, String)> = world
            .live
            .keys()
            .filter(|(kind, _)| *kind != Kind::Organization)
            .collect();
        if keys.is_empty() {
            return None;
        }
        Some(keys[self.random.below(keys.len())].clone())
    }

    async fn create(&mut self, world: &mut World, counts: &mut ChurnCounts) -> anyhow::Result<()> {
        let draw = self.random.unit();
        let kind = if draw < 0.1 {
            Kind::Branding
        } else if draw < 0.2 {
            Kind::IdentityProvider
        } else {
            Kind::OIDCClient
        };
        let policy = if self.random.unit() < 0.15 {
            Policy::Orphan
        } else {
            Policy::Delete
        };
        self.create_with(world, kind, policy, counts).await
    }

    /// A new manifest of `kind` with the deletion policy `policy`.
    pub async fn create_with(
        &mut self,
        world: &mut World,
        kind: Kind,
        policy: Policy,
        counts: &mut ChurnCounts,
    ) -> anyhow::Result<()> {
        let name = world.fresh_name(kind);
        let declared = Declared {
            kind,
            issuer: if self.random.unit() < 0.3 {
                CHAOS_ISSUER.to_owned()
            } else {
                SERVER_ISSUER.to_owned()
            },
            policy,
            version: 1,
            secret_name: None,
            upstream_secret: (kind == Kind::IdentityProvider).then(|| self.random.secret("up")),
            earns_refusal: kind == Kind::Branding && self.random.unit() < 0.2,
            name,
        };
        if let Some(value) = &declared.upstream_secret {
            self.write_upstream_secret(&declared, value).await?;
        }
        self.apply(&declared).await?;
        counts.creates += 1;
        world
            .live
            .insert((declared.kind, declared.name.clone()), declared);
        Ok(())
    }

    async fn update(
        &mut self,
        world: &mut World,
        key: &(Kind, String),
        counts: &mut ChurnCounts,
    ) -> anyhow::Result<()> {
        let Some(mut declared) = world.live.get(key).cloned() else {
            return Ok(());
        };
        let draw = self.random.unit();
        match declared.kind {
            Kind::OIDCClient if draw < 0.3 => {
                declared.secret_name = Some(format!("{}-s{}", declared.name, declared.version));
                counts.secret_name_moves += 1;
            }
            // A rotation on request, as `kubectl nauthera rotate` asks for it: the manifest
            // itself does not change.
            Kind::OIDCClient if draw < 0.5 => {
                counts.rotations += 1;
                return self.ask_rotation(&declared, counts.rotations).await;
            }
            Kind::IdentityProvider if draw < 0.5 => {
                let value = self.random.secret("up");
                self.write_upstream_secret(&declared, &value).await?;
                declared.upstream_secret = Some(value);
                counts.upstream_secret_changes += 1;
                world.live.insert(key.clone(), declared);
                return Ok(());
            }
            _ => counts.updates += 1,
        }
        declared.version += 1;
        self.apply(&declared).await?;
        world.live.insert(key.clone(), declared);
        Ok(())
    }

    async fn delete(
        &mut self,
        world: &mut World,
        key: &(Kind, String),
        counts: &mut ChurnCounts,
    ) -> anyhow::Result<()> {
        let Some(declared) = world.live.remove(key) else {
            return Ok(());
        };
        self.api(declared.kind)
            .delete(&declared.name, &DeleteParams::default())
            .await
            .with_context(|| format!("cannot delete {} {}", declared.kind.name(), declared.name))?;
        counts.deletes += 1;
        match declared.policy {
            Policy::Delete => world.deleted.push(declared),
            Policy::Orphan => world.orphaned.push(declared),
        }
        Ok(())
    }

    /// Deletes a manifest with Kubernetes' propagation policy `propagation`
    /// (`kubectl delete --cascade=...`).
    pub async fn delete_propagating(
        &mut self,
        world: &mut World,
        key: &(Kind, String),
        propagation: Propagation,
        counts: &mut ChurnCounts,
    ) -> anyhow::Result<()> {
        let Some(declared) = world.live.remove(key) else {
            return Ok(());
        };
        let params = match propagation {
            Propagation::Background => DeleteParams::background(),
            Propagation::Foreground => DeleteParams::foreground(),
            Propagation::Orphan => DeleteParams::orphan(),
        };
        self.api(declared.kind)
            .delete(&declared.name, &params)
            .await
            .with_context(|| format!("cannot delete {} {}", declared.kind.name(), declared.name))?;
        counts.deletes += 1;
        world.collected.push(CollectedDeletion {
            declared: declared.clone(),
            propagation,
        });
        match declared.policy {
            Policy::Delete => world.deleted.push(declared),
            Policy::Orphan => world.orphaned.push(declared),
        }
        Ok(())
    }

    fn api(&self, kind: Kind) -> Api<DynamicObject> {
        let resource = match kind {
            Kind::Organization => ApiResource::erase::<Organization>(&()),
            Kind::Branding => ApiResource::erase::<Branding>(&()),
            Kind::IdentityProvider => ApiResource::erase::<IdentityProvider>(&()),
            Kind::OIDCClient => ApiResource::erase::<OIDCClient>(&()),
        };
        Api::namespaced_with(self.client.clone(), &self.namespace, &resource)
    }

    async fn apply(&self, declared: &Declared) -> anyhow::Result<()> {
        let manifest = manifest(declared);
        self.api(declared.kind)
            .patch(
                &declared.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&manifest),
            )
            .await
            .with_context(|| format!("cannot apply {} {}", declared.kind.name(), declared.name))?;
        Ok(())
    }

    async fn ask_rotation(&self, declared: &Declared, number: u64) -> anyhow::Result<()> {
        let patch = json!({ "metadata": { "annotations": {
            nauthera_shared::ROTATE_ANNOTATION: format!("chaos-rotate-{number}"),
        } } });
        self.api(declared.kind)
            .patch(
                &declared.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .with_context(|| format!("cannot ask a rotation of {}", declared.name))?;
        Ok(())
    }

    async fn write_upstream_secret(&self, declared: &Declared, value: &str) -> anyhow::Result<()> {
        let secret = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": declared.upstream_secret_name(),
                "labels": { CHAOS_LABEL: "true" },
            },
            "stringData": { UPSTREAM_KEY: value },
        });
        Api::<Secret>::namespaced(self.client.clone(), &self.namespace)
            .patch(
                &declared.upstream_secret_name(),
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&secret),
            )
            .await
            .context("cannot write an identity provider's upstream Secret")?;
        Ok(())
    }
}

/// How long to wait between operations for `per_second` of them.
pub fn pause(per_second: f64) -> Duration {
    Duration::from_secs_f64(1.0 / per_second.max(0.1))
}

/// The manifest of one declared object, as its team writes it.
pub fn manifest(declared: &Declared) -> Value {
    let name = &declared.name;
    let version = declared.version;
    let spec = match declared.kind {
        Kind::Organization => json!({
            "slug": CHAOS_SLUG,
            "issuer": CHAOS_ISSUER,
            "displayName": format!("Chaos organization v{version}"),
            "fapiMode": "Disabled",
        }),
        Kind::Branding => json!({
            "issuer": declared.issuer,
            "branding": {
                "colors": { "primary": "#1a73e8", "background": "#ffffff" },
                // An escape sequence in a text is admitted by the API and refused by the
                // branding encoder: the manifest earns Refused, naming the field.
                "texts": { "title": if declared.earns_refusal {
                    format!("Sign in to {name} \u{1b}[2J(v{version})")
                } else {
                    format!("Sign in to {name} (v{version})")
                } },
            },
            "deletionPolicy": declared.policy.as_str(),
        }),
        Kind::IdentityProvider => json!({
            "issuer": declared.issuer,
            "kind": "oidc",
            "displayName": format!("Upstream {name} v{version}"),
            "upstreamUrl": format!("https://{name}.upstream.example.test"),
            "clientId": format!("chaos-{name}"),
            "secretRef": { "name": declared.upstream_secret_name(), "key": UPSTREAM_KEY },
            "scopes": ["openid", "email"],
            "deletionPolicy": declared.policy.as_str(),
        }),
        Kind::OIDCClient => {
            let mut secret = BTreeMap::from([("generate".to_owned(), json!(true))]);
            if let Some(secret_name) = &declared.secret_name {
                secret.insert("secretName".to_owned(), json!(secret_name));
            }
            // Every other generation delivers its secret in a declared shape, so that updates
            // rewrite Secrets into and out of a template (the leak scan covers the rendering);
            // the client secret stays under `clientSecret`, where the invariants read it.
            if version.is_multiple_of(2) {
                secret.insert(
                    "template".to_owned(),
                    json!({
                        "files": {
                            "app.env": "CLIENT_ID={{ clientId }}\nCLIENT_SECRET={{ clientSecret }}\nTOKEN_URL={{ tokenEndpoint }}\n",
                        },
                        "labels": { "chaos.example.test/templated": "true" },
                        "annotations": { "chaos.example.test/version": version.to_string() },
                    }),
                );
            }
            json!({
                "issuer": declared.issuer,
                "displayName": format!("Chaos app {name} v{version}"),
                "redirectUris": [format!("https://{name}.example.test/callback")],
                "grantTypes": ["authorization_code", "refresh_token"],
                "responseTypes": ["code"],
                "scopes": ["openid", "profile"],
                "tokenEndpointAuthMethod": "client_secret_basic",
                "secret": secret,
                "deletionPolicy": declared.policy.as_str(),
            })
        }
    };
    json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": declared.kind.name(),
        "metadata": { "name": name, "labels": { CHAOS_LABEL: "true" } },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(kind: Kind) -> Declared {
        Declared {
            kind,
            name: "x-00001".to_owned(),
            issuer: SERVER_ISSUER.to_owned(),
            policy: Policy::Delete,
            version: 2,
            secret_name: Some("x-00001-s1".to_owned()),
            upstream_secret: Some("up-secret".to_owned()),
            earns_refusal: false,
        }
    }

    #[test]
    fn every_kind_of_manifest_decodes_into_its_resource_type() {
        let client: OIDCClient =
            serde_json::from_value(manifest(&declared(Kind::OIDCClient))).unwrap();
        assert_eq!(
            client
                .spec
                .secret
                .as_ref()
                .and_then(|s| s.secret_name.as_deref()),
            Some("x-00001-s1")
        );
        let template = client
            .spec
            .secret
            .as_ref()
            .and_then(|s| s.template.as_ref());
        assert!(
            template.is_some_and(|t| t.files.contains_key("app.env")),
            "an even version is templated"
        );
        let _: Branding = serde_json::from_value(manifest(&declared(Kind::Branding))).unwrap();
        let provider: IdentityProvider =
            serde_json::from_value(manifest(&declared(Kind::IdentityProvider))).unwrap();
        assert!(
            !serde_json::to_string(&provider)
                .unwrap()
                .contains("up-secret")
        );
        let _: Organization =
            serde_json::from_value(manifest(&declared(Kind::Organization))).unwrap();
    }
}
