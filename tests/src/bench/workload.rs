//! The benchmark's workloads, created the way a GitOps tool applies them: every manifest exists
//! before the reconciler starts.
//!
//! - `clients`: N confidential OIDCClients with generated secrets, spread round-robin over the
//!   namespaces, all at the issuer of the organization the fake server holds from the start.
//! - `mixed`: N manifests of all four kinds. Organizations the server does not hold at start
//!   (one per 1,000 manifests, at least one), Brandings (5%), IdentityProviders (2%, kind `oidc`,
//!   each with the Secret of its upstream client secret), and OIDCClients with generated secrets
//!   for the rest, spread over the namespaces and the organizations' issuers; a third of the
//!   clients name a Branding of their namespace and issuer in `brandingRef`. The reconciler has to
//!   order them: everything waits for its Organization, a client for its Branding.
//! - `templated`: the `clients` workload, each client delivering its secret in a declared shape
//!   (`spec.secret.template`: a renamed key, an oauth2-proxy config file rendered from the facts,
//!   a label and an annotation). Against `clients` it measures what rendering costs: the
//!   MiniJinja rendering of each Secret, the larger Secrets written, and the shape's digest kept
//!   in each cached Secret summary.
//!
//! Every figure is computed from the index of an object (no per-object lookups), so generating
//! 10,000 manifests costs nothing next to creating them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use nauthera_proto::v1::ObjectRef;
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use serde::{Deserialize, Serialize};

use crate::e2e::ISSUER;

/// The label every object of the workload carries (`true`).
pub const BENCH_LABEL: &str = "nauthera.io/bench";
/// How many creates the harness keeps in flight while it sets the workload up.
const SETUP_CONCURRENCY: usize = 32;
/// The key of an identity provider's upstream client secret in its Secret.
pub const UPSTREAM_SECRET_KEY: &str = "clientSecret";

/// Which manifests a run registers.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// N OIDCClients with generated secrets at the issuer of the organization the server holds
    /// (the workload of every figure so far).
    #[default]
    Clients,
    /// N manifests (at least 4) of the four kinds: Organizations the server does not hold yet
    /// (1 per 1,000, at least 1), Brandings (5%), IdentityProviders (2%, each with its upstream
    /// Secret), and OIDCClients with generated secrets (the rest, a third with a brandingRef);
    /// clients and brandings wait for their Organization, a client for its Branding.
    Mixed,
    /// The clients workload with every Secret in a declared shape (`spec.secret.template`): a
    /// renamed key, a rendered oauth2-proxy config file, a label and an annotation.
    Templated,
}

impl WorkloadKind {
    /// `clients` or `mixed`, as the command line and the report spell it.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Clients => "clients",
            WorkloadKind::Mixed => "mixed",
            WorkloadKind::Templated => "templated",
        }
    }

    /// The fewest manifests the workload can be made of.
    pub fn minimum_size(self) -> usize {
        match self {
            WorkloadKind::Clients | WorkloadKind::Templated => 1,
            // One of each kind.
            WorkloadKind::Mixed => 4,
        }
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The four kinds of manifest, as the observer and the report name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Kind {
    Organization,
    Branding,
    IdentityProvider,
    OIDCClient,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::Organization,
        Kind::Branding,
        Kind::IdentityProvider,
        Kind::OIDCClient,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Organization => "Organization",
            Kind::Branding => "Branding",
            Kind::IdentityProvider => "IdentityProvider",
            Kind::OIDCClient => "OIDCClient",
        }
    }
}

/// One object of the workload: its namespace and name (a client's generated Secret has the same
/// name).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub namespace: String,
    pub name: String,
}

/// One OIDCClient of the workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientItem {
    pub key: Key,
    pub issuer: String,
    /// The Branding of its namespace and issuer it names in `brandingRef`, if any.
    pub branding: Option<String>,
    /// Its Secret is of a declared shape (`spec.secret.template`).
    pub templated: bool,
}

impl ClientItem {
    /// The server's reference of this client.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            issuer: self.issuer.clone(),
            namespace: self.key.namespace.clone(),
            name: self.key.name.clone(),
        }
    }
}

/// One Organization of the mixed workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrganizationItem {
    pub key: Key,
    pub slug: String,
    pub issuer: String,
}

/// One Branding or IdentityProvider of the mixed workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedItem {
    pub key: Key,
    pub issuer: String,
}

/// How many manifests of each kind a workload holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Composition {
    pub organizations: usize,
    pub brandings: usize,
    pub identity_providers: usize,
    pub clients: usize,
    /// Clients that name a Branding in `brandingRef`.
    pub clients_with_branding_ref: usize,
    /// Secrets the workload creates (the identity providers' upstream client secrets).
    pub upstream_secrets: usize,
}

impl Composition {
    /// Every manifest, of every kind.
    pub fn manifests(&self) -> usize {
        self.organizations + self.brandings + self.identity_providers + self.clients
    }

    /// How many manifests of `kind`.
    pub fn of(&self, kind: Kind) -> usize {
        match kind {
            Kind::Organization => self.organizations,
            Kind::Branding => self.brandings,
            Kind::IdentityProvider => self.identity_providers,
            Kind::OIDCClient => self.clients,
        }
    }

    /// `Organization 1, Branding 50, IdentityProvider 20, OIDCClient 929 (310 with brandingRef)`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = Kind::ALL
            .iter()
            .filter(|k| self.of(**k) > 0)
            .map(|k| format!("{} {}", k.name(), self.of(*k)))
            .collect();
        if self.clients_with_branding_ref > 0
            && let Some(last) = parts.last_mut()
        {
            last.push_str(&format!(
                " ({} with brandingRef)",
                self.clients_with_branding_ref
            ));
        }
        parts.join(", ")
    }
}

/// `a / b` rounded to the nearest whole number.
fn rounded_share(a: usize, b: usize) -> usize {
    (a + b / 2) / b
}

/// N manifests of one workload over `namespaces` namespaces.
#[derive(Clone, Debug)]
pub struct Workload {
    pub kind: WorkloadKind,
    /// N: the number of manifests (of every kind).
    pub size: usize,
    pub namespaces: usize,
}

impl Workload {
    /// The namespaces, `bench-00` and on.
    pub fn namespace_names(&self) -> Vec<String> {
        (0..self.namespace_count())
            .map(|i| format!("bench-{i:02}"))
            .collect()
    }

    fn namespace_count(&self) -> usize {
        self.namespaces.max(1)
    }

    fn namespace(&self, index: usize) -> String {
        format!("bench-{:02}", index % self.namespace_count())
    }

    /// How many of each kind.
    pub fn composition(&self) -> Composition {
        match self.kind {
            WorkloadKind::Clients | WorkloadKind::Templated => Composition {
                clients: self.size,
                ..Composition::default()
            },
            WorkloadKind::Mixed => {
                let n = self.size;
                let organizations = rounded_share(n, 1000).max(1);
                let brandings = rounded_share(n, 20).max(1);
                let identity_providers = rounded_share(n, 50).max(1);
                let clients = n.saturating_sub(organizations + brandings + identity_providers);
                let mut composition = Composition {
                    organizations,
                    brandings,
                    identity_providers,
                    clients,
                    clients_with_branding_ref: 0,
                    upstream_secrets: identity_providers,
                };
                composition.clients_with_branding_ref = (0..clients)
                    .filter(|j| self.branding_of_client(&composition, *j).is_some())
                    .count();
                composition
            }
        }
    }

    /// The slug of organization `i` (`bench-org-<i>`).
    fn organization_slug(i: usize) -> String {
        format!("bench-org-{i}")
    }

    /// The issuer of organization `i`.
    fn organization_issuer(i: usize) -> String {
        format!(
            "https://login.example.com/{}",
            Workload::organization_slug(i)
        )
    }

    /// The Organizations, each in a namespace of its own as far as there are namespaces.
    pub fn organizations(&self) -> Vec<OrganizationItem> {
        (0..self.composition().organizations)
            .map(|i| OrganizationItem {
                key: Key {
                    namespace: self.namespace(i),
                    name: Workload::organization_slug(i),
                },
                slug: Workload::organization_slug(i),
                issuer: Workload::organization_issuer(i),
            })
            .collect()
    }

    /// Object `i` of a kind sits in namespace `i mod namespaces` and at the issuer of
    /// organization `(i / namespaces) mod organizations`: any run of `namespaces × organizations`
    /// consecutive indices covers every pair of namespace and issuer once.
    fn pair(&self, composition: &Composition, i: usize) -> (usize, usize) {
        let namespaces = self.namespace_count();
        let organizations = composition.organizations.max(1);
        (i % namespaces, (i / namespaces) % organizations)
    }

    fn issuer(&self, composition: &Composition, i: usize) -> String {
        match self.kind {
            WorkloadKind::Clients | WorkloadKind::Templated => ISSUER.to_owned(),
            WorkloadKind::Mixed => Workload::organization_issuer(self.pair(composition, i).1),
        }
    }

    /// The Branding (by index) that client `j` names, if it names one: every third client, when
    /// its namespace and issuer have a Branding. Brandings and clients share the placement of
    /// [`Workload::pair`], so the Brandings of client `j`'s pair are those whose index is
    /// congruent to `j` modulo `namespaces × organizations`; the clients of a pair take them in
    /// turn.
    fn branding_of_client(&self, composition: &Composition, j: usize) -> Option<usize> {
        if self.kind != WorkloadKind::Mixed || !j.is_multiple_of(3) {
            return None;
        }
        let pairs = self.namespace_count() * composition.organizations.max(1);
        let pair = j % pairs;
        if pair >= composition.brandings {
            return None;
        }
        let of_pair = (composition.brandings - pair).div_ceil(pairs);
        Some(pair + pairs * ((j / pairs) % of_pair))
    }

    fn branding_name(b: usize) -> String {
        format!("branding-{b:05}")
    }

    /// The Brandings.
    pub fn brandings(&self) -> Vec<IssuedItem> {
        let composition = self.composition();
        (0..composition.brandings)
            .map(|b| IssuedItem {
                key: Key {
                    namespace: self.namespace(b),
                    name: Workload::branding_name(b),
                },
                issuer: self.issuer(&composition, b),
            })
            .collect()
    }

    /// The IdentityProviders; provider `idp-<i>` reads its upstream secret from the Secret
    /// `idp-<i>-upstream` of its namespace.
    pub fn identity_providers(&self) -> Vec<IssuedItem> {
        let composition = self.composition();
        (0..composition.identity_providers)
            .map(|p| IssuedItem {
                key: Key {
                    namespace: self.namespace(p),
                    name: format!("idp-{p:05}"),
                },
                issuer: self.issuer(&composition, p),
            })
            .collect()
    }

    /// Every OIDCClient, in creation order.
    pub fn clients(&self) -> Vec<ClientItem> {
        let composition = self.composition();
        (0..composition.clients)
            .map(|j| ClientItem {
                key: Key {
                    namespace: self.namespace(j),
                    name: format!("client-{j:06}"),
                },
                issuer: self.issuer(&composition, j),
                branding: self
                    .branding_of_client(&composition, j)
                    .map(Workload::branding_name),
                templated: self.kind == WorkloadKind::Templated,
            })
            .collect()
    }

    fn metadata(key: &Key) -> serde_json::Value {
        serde_json::json!({
            "name": key.name,
            "namespace": key.namespace,
            "labels": { BENCH_LABEL: "true" },
        })
    }

    /// The manifest of one client, as an application team writes it.
    pub fn client_manifest(item: &ClientItem) -> anyhow::Result<OIDCClient> {
        let name = &item.key.name;
        let mut spec = serde_json::json!({
            "issuer": item.issuer,
            "displayName": format!("Web app {name}"),
            "redirectUris": [format!("https://{name}.example.test/callback")],
            "postLogoutRedirectUris": [format!("https://{name}.example.test/")],
            "grantTypes": ["authorization_code", "refresh_token"],
            "responseTypes": ["code"],
            "scopes": ["openid", "profile", "email"],
            "tokenEndpointAuthMethod": "client_secret_basic",
            "secret": { "generate": true },
            "deletionPolicy": "Delete",
        });
        if let Some(branding) = &item.branding {
            spec["brandingRef"] = serde_json::json!({ "name": branding });
        }
        if item.templated {
            // The client secret stays under `clientSecret`, where the observer looks for it.
            spec["secret"]["template"] = serde_json::json!({
                "keys": { "clientId": "OAUTH2_PROXY_CLIENT_ID" },
                "files": {
                    "oauth2-proxy.cfg": "provider = \"oidc\"\noidc_issuer_url = \"{{ issuer }}\"\nclient_id = \"{{ clientId }}\"\nclient_secret = \"{{ clientSecret }}\"\nredeem_url = \"{{ tokenEndpoint }}\"\n",
                },
                "labels": { "app.kubernetes.io/part-of": name },
                "annotations": { "reflector.v1.k8s.emberstack.com/reflection-allowed": "true" },
            });
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "OIDCClient",
            "metadata": Workload::metadata(&item.key),
            "spec": spec,
        }))
        .context("the workload's manifest is an OIDCClient")
    }

    /// The manifest of one organization, as a platform team writes it.
    pub fn organization_manifest(item: &OrganizationItem) -> anyhow::Result<Organization> {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "Organization",
            "metadata": Workload::metadata(&item.key),
            "spec": {
                "slug": item.slug,
                "issuer": item.issuer,
                "displayName": format!("Bench organization {}", item.slug),
                "fapiMode": "Disabled",
            }
        }))
        .context("the workload's manifest is an Organization")
    }

    /// The manifest of one sign-in branding: a few colors and texts.
    pub fn branding_manifest(item: &IssuedItem) -> anyhow::Result<Branding> {
        let name = &item.key.name;
        serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "Branding",
            "metadata": Workload::metadata(&item.key),
            "spec": {
                "issuer": item.issuer,
                "branding": {
                    "colors": {
                        "primary": "#1a73e8",
                        "background": "#ffffff",
                        "text": "#202124",
                    },
                    "texts": {
                        "title": format!("Sign in ({name})"),
                        "welcome": "Welcome back.",
                        "footer": "Bench Corporation",
                    },
                },
                "deletionPolicy": "Delete",
            }
        }))
        .context("the workload's manifest is a Branding")
    }

    /// The name of the Secret that holds a provider's upstream client secret.
    pub fn upstream_secret_name(provider: &Key) -> String {
        format!("{}-upstream", provider.name)
    }

    /// The manifest of one upstream OIDC identity provider.
    pub fn identity_provider_manifest(item: &IssuedItem) -> anyhow::Result<IdentityProvider> {
        let name = &item.key.name;
        serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "IdentityProvider",
            "metadata": Workload::metadata(&item.key),
            "spec": {
                "issuer": item.issuer,
                "kind": "oidc",
                "displayName": format!("Upstream {name}"),
                "upstreamUrl": format!("https://{name}.upstream.example.test"),
                "clientId": format!("bench-{name}"),
                "secretRef": {
                    "name": Workload::upstream_secret_name(&item.key),
                    "key": UPSTREAM_SECRET_KEY,
                },
                "scopes": ["openid", "email", "profile"],
                "claimMapping": { "email": "email", "name": "name" },
                "deletionPolicy": "Delete",
            }
        }))
        .context("the workload's manifest is an IdentityProvider")
    }

    /// The Secret a team holds a provider's upstream client secret in.
    pub fn upstream_secret(provider: &Key) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(Workload::upstream_secret_name(provider)),
                namespace: Some(provider.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    BENCH_LABEL.to_owned(),
                    "true".to_owned(),
                )])),
                ..Default::default()
            },
            string_data: Some(BTreeMap::from([(
                UPSTREAM_SECRET_KEY.to_owned(),
                format!("bench-upstream-secret-of-{}", provider.name),
            )])),
            ..Secret::default()
        }
    }

    /// Creates the namespaces and every object of the workload; returns how long it took.
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
        let organizations = self
            .organizations()
            .iter()
            .map(Workload::organization_manifest)
            .collect::<anyhow::Result<Vec<_>>>()?;
        create_all(client, organizations).await?;
        let brandings = self
            .brandings()
            .iter()
            .map(Workload::branding_manifest)
            .collect::<anyhow::Result<Vec<_>>>()?;
        create_all(client, brandings).await?;
        let providers = self.identity_providers();
        create_all(
            client,
            providers
                .iter()
                .map(|p| Workload::upstream_secret(&p.key))
                .collect(),
        )
        .await?;
        let providers = providers
            .iter()
            .map(Workload::identity_provider_manifest)
            .collect::<anyhow::Result<Vec<_>>>()?;
        create_all(client, providers).await?;
        // Clients are made as they are created, not all at once: at 10,000 their manifests
        // would otherwise sit in memory twice.
        futures::stream::iter(self.clients())
            .map(|item| {
                let client = client.clone();
                async move {
                    let api: Api<OIDCClient> = Api::namespaced(client, &item.key.namespace);
                    api.create(&PostParams::default(), &Workload::client_manifest(&item)?)
                        .await
                        .with_context(|| {
                            format!(
                                "cannot create OIDCClient {}/{}",
                                item.key.namespace, item.key.name
                            )
                        })?;
                    Ok::<_, anyhow::Error>(())
                }
            })
            .buffer_unordered(SETUP_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(started.elapsed())
    }

    /// Checks that the workload can be made at its size.
    pub fn check(&self) -> anyhow::Result<()> {
        let minimum = self.kind.minimum_size();
        if self.size < minimum {
            bail!(
                "the {} workload needs at least {minimum} manifests, not {}",
                self.kind,
                self.size
            );
        }
        Ok(())
    }
}

/// Creates namespaced objects of one kind, several at a time.
async fn create_all<K>(client: &kube::Client, objects: Vec<K>) -> anyhow::Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    futures::stream::iter(objects)
        .map(|object| {
            let client = client.clone();
            async move {
                let namespace = object.meta().namespace.clone().unwrap_or_default();
                let name = object.meta().name.clone().unwrap_or_default();
                let api: Api<K> = Api::namespaced(client, &namespace);
                api.create(&PostParams::default(), &object)
                    .await
                    .with_context(|| {
                        format!("cannot create {} {namespace}/{name}", K::kind(&()))
                    })?;
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The kinds a workload's manifests are of, for the observer.
pub fn kinds_of(kind: WorkloadKind) -> &'static [Kind] {
    match kind {
        WorkloadKind::Clients | WorkloadKind::Templated => &[Kind::OIDCClient],
        WorkloadKind::Mixed => &Kind::ALL,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    #[test]
    fn clients_are_spread_over_the_namespaces() {
        let workload = Workload {
            kind: WorkloadKind::Clients,
            size: 5,
            namespaces: 2,
        };
        let clients = workload.clients();
        assert_eq!(clients.len(), 5);
        assert_eq!(clients[0].key.namespace, "bench-00");
        assert_eq!(clients[1].key.namespace, "bench-01");
        assert_eq!(clients[4].key.name, "client-000004");
        assert!(
            clients
                .iter()
                .all(|c| c.issuer == ISSUER && c.branding.is_none())
        );
        assert!(Workload::client_manifest(&clients[0]).is_ok());
        let templated = Workload {
            kind: WorkloadKind::Templated,
            size: 3,
            namespaces: 2,
        };
        let client = Workload::client_manifest(&templated.clients()[0]).unwrap();
        let template = client.spec.secret.and_then(|s| s.template).unwrap();
        assert!(template.files.contains_key("oauth2-proxy.cfg"));
        assert!(nauthera_shared::secret_render::check(&template, ISSUER).is_ok());
        assert!(workload.organizations().is_empty() && workload.brandings().is_empty());
        assert_eq!(workload.composition().manifests(), 5);
    }

    #[test]
    fn the_mixed_workload_holds_every_kind_in_its_shares() {
        for (size, organizations, brandings, providers) in [
            (1000, 1, 50, 20),
            (10_000, 10, 500, 200),
            (12, 1, 1, 1),
            (4, 1, 1, 1),
        ] {
            let workload = Workload {
                kind: WorkloadKind::Mixed,
                size,
                namespaces: 10,
            };
            let composition = workload.composition();
            assert_eq!(composition.manifests(), size, "{composition:?}");
            assert_eq!(composition.organizations, organizations);
            assert_eq!(composition.brandings, brandings);
            assert_eq!(composition.identity_providers, providers);
            assert_eq!(workload.clients().len(), composition.clients);
            assert_eq!(workload.brandings().len(), brandings);
            assert_eq!(workload.identity_providers().len(), providers);
        }
    }

    #[test]
    fn mixed_clients_name_a_branding_of_their_namespace_and_issuer() {
        for (size, namespaces) in [(1000, 10), (10_000, 10), (12, 3), (300, 7)] {
            let workload = Workload {
                kind: WorkloadKind::Mixed,
                size,
                namespaces,
            };
            let brandings: HashMap<Key, String> = workload
                .brandings()
                .into_iter()
                .map(|b| (b.key, b.issuer))
                .collect();
            let organizations: HashSet<String> = workload
                .organizations()
                .into_iter()
                .map(|o| o.issuer)
                .collect();
            let clients = workload.clients();
            let mut referencing = 0;
            let mut issuers = HashSet::new();
            for client in &clients {
                assert!(organizations.contains(&client.issuer));
                issuers.insert(client.issuer.clone());
                if let Some(branding) = &client.branding {
                    referencing += 1;
                    let key = Key {
                        namespace: client.key.namespace.clone(),
                        name: branding.clone(),
                    };
                    assert_eq!(brandings.get(&key), Some(&client.issuer), "{client:?}");
                }
            }
            assert_eq!(
                issuers.len(),
                organizations.len(),
                "every issuer has clients"
            );
            assert_eq!(
                referencing,
                workload.composition().clients_with_branding_ref
            );
            assert!(referencing > 0);
            if size >= 1000 {
                // A third of the clients, give or take the rounding.
                assert!(referencing * 3 >= clients.len() - 3, "{referencing}");
            }
            for item in workload.brandings() {
                assert!(organizations.contains(&item.issuer));
                assert!(Workload::branding_manifest(&item).is_ok());
            }
            for item in workload.identity_providers() {
                assert!(Workload::identity_provider_manifest(&item).is_ok());
            }
            for item in workload.organizations() {
                assert!(Workload::organization_manifest(&item).is_ok());
            }
            for client in clients.iter().take(6) {
                let manifest = Workload::client_manifest(client).unwrap();
                assert_eq!(
                    manifest.spec.branding_ref.map(|r| r.name),
                    client.branding.clone()
                );
            }
        }
    }

    #[test]
    fn a_mixed_workload_needs_one_of_each_kind() {
        let workload = |size| Workload {
            kind: WorkloadKind::Mixed,
            size,
            namespaces: 3,
        };
        assert!(workload(3).check().is_err());
        assert!(workload(4).check().is_ok());
    }
}
