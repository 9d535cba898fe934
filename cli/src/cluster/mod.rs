//! Cluster access, the Kubernetes edge: a client built from the kubeconfig the way kubectl builds
//! it and the reads of resources every command shares (here), what the reconciler publishes and
//! what of it needs attention ([`control_plane`]), what surrounds a resource: Secrets, access
//! reviews, events, log lines and pod templates ([`facts`]), and what the policy checks read
//! ([`policies`]). Each read comes back as plain facts or the sentence saying why it could not be
//! made.

pub mod control_plane;
pub mod facts;
mod paging;
pub mod policies;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config};
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use serde::de::DeserializeOwned;

use crate::cli::GlobalArgs;
use crate::cli::kinds::Kind;
use crate::error::{CliError, api_code};
use crate::model::view::ResourceView;
use crate::output;
use paging::{AfterFailure, Paging};

/// Which namespaces a command looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    Namespace(String),
}

/// A connected cluster and the namespace the user means.
#[derive(Clone)]
pub struct Cluster {
    pub client: Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    pub scope: Scope,
}

/// The kubeconfig overrides kubectl users script with: the server, its certificate check,
/// impersonation and the request timeout.
fn overrides(config: &mut Config, args: &GlobalArgs) -> Result<(), CliError> {
    if let Some(server) = &args.server {
        config.cluster_url = server.parse().map_err(|_| {
            CliError::Usage(format!(
                "--server: `{server}` is not a URL; give https://HOST:PORT"
            ))
        })?;
    }
    if let Some(name) = &args.tls_server_name {
        config.tls_server_name = Some(name.clone());
    }
    if args.insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
    }
    if let Some(user) = &args.as_user {
        config.auth_info.impersonate = Some(user.clone());
    }
    if !args.as_groups.is_empty() {
        config.auth_info.impersonate_groups = Some(args.as_groups.clone());
    }
    if let Some(uid) = &args.as_uid {
        config.auth_info.impersonate_uid = Some(uid.clone());
    }
    if let Some(timeout) = args.request_timeout {
        let limit = (!timeout.is_zero()).then_some(timeout);
        config.connect_timeout = limit;
        config.read_timeout = limit;
        config.write_timeout = limit;
    }
    Ok(())
}

/// Objects per page of a listing: kubectl's own page size.
const LIST_PAGE: u32 = 500;

impl Cluster {
    /// `--kubeconfig` (else `$KUBECONFIG`, else `~/.kube/config`), `--context`, `--cluster`,
    /// `--user`, the overrides above, `-n`, `-A` (which wins over `-n`).
    pub async fn connect(args: &GlobalArgs) -> Result<Cluster, CliError> {
        let (kubeconfig, where_) = match &args.kubeconfig {
            Some(path) => (
                Kubeconfig::read_from(path),
                format!("--kubeconfig {}", path.display()),
            ),
            None => (
                Kubeconfig::read(),
                "$KUBECONFIG or ~/.kube/config".to_owned(),
            ),
        };
        let kubeconfig = kubeconfig.map_err(|source| CliError::Kubeconfig {
            where_: where_.clone(),
            source,
        })?;
        let options = KubeConfigOptions {
            context: args.context.clone(),
            cluster: args.cluster.clone(),
            user: args.user.clone(),
        };
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|source| CliError::Kubeconfig { where_, source })?;
        overrides(&mut config, args)?;
        let namespace = args
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config).map_err(CliError::Client)?;
        let scope = if args.all_namespaces {
            Scope::All
        } else {
            Scope::Namespace(namespace.clone())
        };
        Ok(Cluster {
            client,
            namespace,
            scope,
        })
    }

    pub fn api<K>(&self, scope: &Scope) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match scope {
            Scope::All => Api::all(self.client.clone()),
            Scope::Namespace(namespace) => Api::namespaced(self.client.clone(), namespace),
        }
    }

    pub fn namespaced<K>(&self, namespace: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Every resource of `kind` in `scope`; `Ok(None)` when the kind is not installed.
    pub async fn list_kind(
        &self,
        kind: Kind,
        scope: &Scope,
    ) -> Result<Option<Vec<ResourceView>>, CliError> {
        let mut views = Vec::new();
        let installed = self
            .visit_kind(kind, scope, &mut |view| views.push(view))
            .await?;
        Ok(installed.then_some(views))
    }

    /// Hands every resource of `kind` in `scope` to `visit`, a page at a time; `Ok(false)` when
    /// the kind is not installed.
    pub async fn visit_kind(
        &self,
        kind: Kind,
        scope: &Scope,
        visit: &mut impl FnMut(ResourceView),
    ) -> Result<bool, CliError> {
        match kind {
            Kind::OidcClient => self.list(kind, scope, ResourceView::of_client, visit).await,
            Kind::Branding => {
                self.list(kind, scope, ResourceView::of_branding, visit)
                    .await
            }
            Kind::IdentityProvider => {
                self.list(kind, scope, ResourceView::of_identity_provider, visit)
                    .await
            }
            Kind::Organization => {
                self.list(kind, scope, ResourceView::of_organization, visit)
                    .await
            }
        }
    }

    /// Lists in pages, as kubectl does, handing on only the view of each object: a page's
    /// objects are dropped before the next page is read.
    async fn list<K>(
        &self,
        kind: Kind,
        scope: &Scope,
        view: fn(&K) -> ResourceView,
        visit: &mut impl FnMut(ResourceView),
    ) -> Result<bool, CliError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let api = self.api::<K>(scope);
        let what = || format!("listing {}{}", kind.plural(), scope_words(scope));
        let mut params = ListParams::default().limit(LIST_PAGE);
        let mut paging = Paging::default();
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                Err(error) => match paging.after_failure(&error) {
                    AfterFailure::NotInstalled => return Ok(false),
                    AfterFailure::GoOnFrom(token) => {
                        if paging.expirations == 1 {
                            output::progress(&format!(
                                "warning: {} outlasted the history the API server keeps (410 \
                                 Expired); the rest was read as it stands now, so a resource \
                                 changed meanwhile may show its state from before or after the \
                                 change",
                                what()
                            ));
                        }
                        params = params.continue_token(&token);
                        continue;
                    }
                    AfterFailure::Fail => return Err(CliError::kube(what(), &error)),
                },
            };
            paging.page_read();
            page.items.iter().map(view).for_each(&mut *visit);
            match page.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(true),
            }
        }
    }

    /// The changes of one kind in `scope` (of one name, when given) as views, after the current
    /// state: each resource as it is after a change, and as it was when it is deleted.
    pub fn watch_views(
        &self,
        kind: Kind,
        scope: &Scope,
        name: Option<&str>,
    ) -> BoxStream<'static, Result<ResourceView, String>> {
        match kind {
            Kind::OidcClient => self.watch(kind, scope, name, ResourceView::of_client),
            Kind::Branding => self.watch(kind, scope, name, ResourceView::of_branding),
            Kind::IdentityProvider => {
                self.watch(kind, scope, name, ResourceView::of_identity_provider)
            }
            Kind::Organization => self.watch(kind, scope, name, ResourceView::of_organization),
        }
    }

    fn watch<K>(
        &self,
        kind: Kind,
        scope: &Scope,
        name: Option<&str>,
        view: fn(&K) -> ResourceView,
    ) -> BoxStream<'static, Result<ResourceView, String>>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + 'static,
    {
        let config = match name {
            Some(name) => watcher::Config::default().fields(&format!("metadata.name={name}")),
            None => watcher::Config::default(),
        };
        let what = format!("watching {}{}", kind.plural(), scope_words(scope));
        watcher(self.api::<K>(scope), config)
            .default_backoff()
            .filter_map(move |event| {
                let what = what.clone();
                async move {
                    match event {
                        // The current state was shown before the watch began.
                        Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) => {
                            Some(Ok(view(&object)))
                        }
                        Ok(_) => None,
                        Err(error) => Some(Err(format!("{what}: {error}; retrying"))),
                    }
                }
            })
            .boxed()
    }

    /// One resource; `Ok(None)` when it does not exist.
    pub async fn get_view(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ResourceView>, CliError> {
        let what = || {
            format!(
                "reading {}/{name} in namespace {namespace}",
                kind.singular()
            )
        };
        let result = match kind {
            Kind::OidcClient => self
                .namespaced::<OIDCClient>(namespace)
                .get_opt(name)
                .await
                .map(|item| item.as_ref().map(ResourceView::of_client)),
            Kind::Branding => self
                .namespaced::<Branding>(namespace)
                .get_opt(name)
                .await
                .map(|item| item.as_ref().map(ResourceView::of_branding)),
            Kind::IdentityProvider => self
                .namespaced::<IdentityProvider>(namespace)
                .get_opt(name)
                .await
                .map(|item| item.as_ref().map(ResourceView::of_identity_provider)),
            Kind::Organization => self
                .namespaced::<Organization>(namespace)
                .get_opt(name)
                .await
                .map(|item| item.as_ref().map(ResourceView::of_organization)),
        };
        match result {
            Ok(view) => Ok(view),
            Err(error) if api_code(&error) == Some(404) => Ok(None),
            Err(error) => Err(CliError::kube(what(), &error)),
        }
    }

    /// One resource that must exist.
    pub async fn require_view(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<ResourceView, CliError> {
        self.get_view(kind, namespace, name).await?.ok_or_else(|| {
            CliError::Usage(format!(
                "{}/{name} not found in namespace {namespace}; check the name, or pass -n with \
                 its namespace",
                kind.singular()
            ))
        })
    }

    /// Every resource of the given kinds in `scope`, in a stable order; kinds that are not
    /// installed are named in the second value.
    pub async fn list_views(
        &self,
        kinds: &[Kind],
        scope: &Scope,
    ) -> Result<(Vec<ResourceView>, Vec<Kind>), CliError> {
        let mut views = Vec::new();
        let missing = self
            .visit_views(kinds, scope, &mut |view| views.push(view))
            .await?;
        sort_views(&mut views);
        Ok((views, missing))
    }

    /// Hands every resource of the given kinds in `scope` to `visit` as it is read, kind by
    /// kind, without holding the listing; returns the kinds that are not installed.
    pub async fn visit_views(
        &self,
        kinds: &[Kind],
        scope: &Scope,
        visit: &mut impl FnMut(ResourceView),
    ) -> Result<Vec<Kind>, CliError> {
        let mut missing = Vec::new();
        for kind in kinds {
            if !self.visit_kind(*kind, scope, visit).await? {
                missing.push(*kind);
            }
        }
        Ok(missing)
    }

    /// The Organizations that map issuers to slugs: every namespace when allowed, else the
    /// current one.
    pub async fn organizations(&self) -> Vec<ResourceView> {
        if let Ok(Some(all)) = self.list_kind(Kind::Organization, &Scope::All).await {
            return all;
        }
        self.list_kind(
            Kind::Organization,
            &Scope::Namespace(self.namespace.clone()),
        )
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
    }
}

pub fn sort_views(views: &mut [ResourceView]) {
    views.sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
}

fn scope_words(scope: &Scope) -> String {
    match scope {
        Scope::All => " in every namespace".to_owned(),
        Scope::Namespace(namespace) => format!(" in namespace {namespace}"),
    }
}
