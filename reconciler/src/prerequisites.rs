//! The order between manifests: a resource is sent to the server only once the manifests it
//! depends on are registered (the Organization manifest that serves its issuer, the Branding its
//! `brandingRef` names). Kept from the manifests' watches: who provides what and whether it is
//! registered. Who depends on a provider is found in the watch caches when asked (a provider
//! registering, a deletion naming what still depends on it): nothing is kept per dependent, so
//! ten thousand clients cost no memory here.

use std::collections::HashMap;
use std::sync::RwLock;

use jiff::Timestamp;
use nauthera_proto::v1::ObjectKind;
use tokio::sync::broadcast;

use crate::changes::Route;

/// What a manifest can depend on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Prerequisite {
    /// The organization that serves this issuer URL.
    Organization { issuer: String },
    /// A branding of this name in this namespace.
    Branding { namespace: String, name: String },
}

impl Prerequisite {
    /// The organization serving `issuer`; a trailing slash names the same one, as on the server.
    pub fn organization(issuer: &str) -> Prerequisite {
        Prerequisite::Organization {
            issuer: issuer.trim_end_matches('/').to_owned(),
        }
    }
}

/// A manifest: its kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Manifest {
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
}

impl Manifest {
    pub fn new(kind: ObjectKind, namespace: &str, name: &str) -> Manifest {
        Manifest {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// `Kind namespace/name`, as messages name a manifest.
    pub fn describe(&self) -> String {
        format!("{} {}/{}", kind_name(self.kind), self.namespace, self.name)
    }
}

/// The manifest kind's name.
pub fn kind_name(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Client => "OIDCClient",
        ObjectKind::Branding => "Branding",
        ObjectKind::IdentityProvider => "IdentityProvider",
        ObjectKind::Organization => "Organization",
        ObjectKind::Unspecified => "object",
    }
}

/// A manifest that provides a prerequisite, and since when the server holds what it declared
/// (`None`: not registered yet).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Provider {
    manifest: Manifest,
    registered_at: Option<Timestamp>,
}

/// Where a resource stands with its prerequisites.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// A prerequisite declared by a manifest that is not registered yet: wait for it.
    pub waiting_for: Option<Manifest>,
    /// Since when this generation waits (filled in by the reconcile, which remembers it).
    pub waiting_since: Option<Timestamp>,
    /// The latest time one of its prerequisites' manifests registered: a refusal older than that
    /// (a missing reference, say) is sent again.
    pub ready_at: Option<Timestamp>,
}

#[derive(Debug, Default)]
struct Index {
    providers: HashMap<Prerequisite, Provider>,
    provided_by: HashMap<Manifest, Prerequisite>,
    /// Organization slug → its manifest, since the server's changes name an organization by
    /// slug.
    slugs: HashMap<String, Manifest>,
}

/// Finds, in one kind's watch cache, the manifests that need a prerequisite.
pub type DependentsOf = Box<dyn Fn(&Prerequisite) -> Vec<Manifest> + Send + Sync>;

/// The prerequisites of every watched manifest.
pub struct Prerequisites {
    index: RwLock<Index>,
    dependents_of: RwLock<Vec<DependentsOf>>,
    routes: broadcast::Sender<Route>,
}

impl std::fmt::Debug for Prerequisites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prerequisites")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Prerequisites {
    /// Routes go to the controllers through `routes`.
    pub fn new(routes: broadcast::Sender<Route>) -> Prerequisites {
        Prerequisites {
            index: RwLock::default(),
            dependents_of: RwLock::default(),
            routes,
        }
    }

    /// Adds the search of one kind's watch cache for the manifests that need a prerequisite.
    pub fn find_dependents_with(&self, search: DependentsOf) {
        if let Ok(mut searches) = self.dependents_of.write() {
            searches.push(search);
        }
    }

    /// Records what a manifest provides now (`None`: nothing, or it is gone). When a provider it
    /// had before registers, stops registering or goes, the manifests waiting on it are routed.
    pub fn record_provider(
        &self,
        manifest: &Manifest,
        provides: Option<Prerequisite>,
        registered_at: Option<Timestamp>,
        slug: Option<&str>,
    ) {
        let mut moved = Vec::new();
        {
            let Ok(mut index) = self.index.write() else {
                return;
            };
            if let Some(slug) = slug {
                index.slugs.insert(slug.to_owned(), manifest.clone());
            } else {
                index.slugs.retain(|_, m| m != manifest);
            }
            let previous = index.provided_by.get(manifest).cloned();
            if let Some(gone) = previous.filter(|p| Some(p) != provides.as_ref()) {
                index.provided_by.remove(manifest);
                if index
                    .providers
                    .get(&gone)
                    .is_some_and(|p| p.manifest == *manifest)
                {
                    index.providers.remove(&gone);
                    moved.push(gone);
                }
            }
            if let Some(prerequisite) = provides {
                let provider = Provider {
                    manifest: manifest.clone(),
                    registered_at,
                };
                let before = index.providers.insert(prerequisite.clone(), provider);
                // First sight routes nothing: every manifest is reconciled at the start anyway.
                if before.is_some_and(|b| b.registered_at != registered_at) {
                    moved.push(prerequisite.clone());
                }
                index.provided_by.insert(manifest.clone(), prerequisite);
            }
        }
        for prerequisite in moved {
            self.route(self.dependents(&prerequisite));
        }
    }

    /// A manifest that needed `needs` is gone: its providers are routed, so that a deletion
    /// waiting for its dependents to go (an organization that still holds objects) is tried
    /// again.
    pub fn dependent_gone(&self, needs: &[Prerequisite]) {
        let providers: Vec<Manifest> = {
            let Ok(index) = self.index.read() else {
                return;
            };
            needs
                .iter()
                .filter_map(|p| index.providers.get(p).map(|p| p.manifest.clone()))
                .collect()
        };
        self.route(providers);
    }

    /// Where a resource that needs `needs` stands.
    pub fn standing(&self, needs: &[Prerequisite]) -> Standing {
        let Ok(index) = self.index.read() else {
            return Standing::default();
        };
        let mut standing = Standing::default();
        for prerequisite in needs {
            let Some(provider) = index.providers.get(prerequisite) else {
                continue;
            };
            match provider.registered_at {
                None => {
                    if standing.waiting_for.is_none() {
                        standing.waiting_for = Some(provider.manifest.clone());
                    }
                }
                Some(at) => standing.ready_at = standing.ready_at.max(Some(at)),
            }
        }
        standing
    }

    /// The manifests that depend on a prerequisite, from the watch caches.
    pub fn dependents(&self, prerequisite: &Prerequisite) -> Vec<Manifest> {
        let Ok(searches) = self.dependents_of.read() else {
            return Vec::new();
        };
        let mut found: Vec<Manifest> = searches
            .iter()
            .flat_map(|search| search(prerequisite))
            .collect();
        found.sort();
        found
    }

    /// The Organization manifest that declares this slug.
    pub fn organization(&self, slug: &str) -> Option<Manifest> {
        self.index.read().ok()?.slugs.get(slug).cloned()
    }

    fn route(&self, manifests: impl IntoIterator<Item = Manifest>) {
        for manifest in manifests {
            let _ = self.routes.send(Route::Resource {
                kind: manifest.kind,
                namespace: manifest.namespace,
                name: manifest.name,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuer() -> Prerequisite {
        Prerequisite::organization("https://login.example.test/acme/")
    }

    fn routed(receiver: &mut broadcast::Receiver<Route>) -> Vec<Route> {
        std::iter::from_fn(|| receiver.try_recv().ok()).collect()
    }

    fn route(manifest: &Manifest) -> Route {
        Route::Resource {
            kind: manifest.kind,
            namespace: manifest.namespace.clone(),
            name: manifest.name.clone(),
        }
    }

    #[test]
    fn a_provider_that_registers_routes_exactly_the_manifests_waiting_on_it() {
        let (sender, mut receiver) = broadcast::channel(16);
        let index = Prerequisites::new(sender);
        let organization = Manifest::new(ObjectKind::Organization, "platform", "acme");
        let web = Manifest::new(ObjectKind::Client, "team-a", "web");
        // One kind's cache: `web` needs the organization, nothing else needs anything.
        let cached = web.clone();
        index.find_dependents_with(Box::new(move |p| {
            if *p == issuer() {
                vec![cached.clone()]
            } else {
                Vec::new()
            }
        }));
        index.record_provider(&organization, Some(issuer()), None, Some("acme"));
        assert!(
            routed(&mut receiver).is_empty(),
            "first sight routes nothing"
        );
        assert_eq!(
            index.standing(&[issuer()]).waiting_for,
            Some(organization.clone())
        );
        assert_eq!(index.organization("acme"), Some(organization.clone()));

        let at = Timestamp::from_second(1_000).unwrap();
        index.record_provider(&organization, Some(issuer()), Some(at), Some("acme"));
        assert_eq!(routed(&mut receiver), vec![route(&web)]);
        assert_eq!(
            index.standing(&[issuer()]),
            Standing {
                waiting_for: None,
                waiting_since: None,
                ready_at: Some(at),
            }
        );
        // The same again routes nothing.
        index.record_provider(&organization, Some(issuer()), Some(at), Some("acme"));
        assert!(routed(&mut receiver).is_empty());
        assert_eq!(index.dependents(&issuer()), vec![web.clone()]);

        // A dependent that goes routes its provider (a deletion waiting on it).
        index.dependent_gone(&[issuer()]);
        assert_eq!(routed(&mut receiver), vec![route(&organization)]);

        // A provider that goes routes what waited on it: nothing to wait for any more.
        index.record_provider(&organization, None, None, None);
        assert_eq!(routed(&mut receiver), vec![route(&web)]);
        assert_eq!(index.standing(&[issuer()]), Standing::default());
        assert_eq!(index.organization("acme"), None);
    }

    #[test]
    fn nothing_declared_means_nothing_to_wait_for() {
        let (sender, _receiver) = broadcast::channel(16);
        let index = Prerequisites::new(sender);
        assert_eq!(index.standing(&[issuer()]), Standing::default());
        assert!(index.dependents(&issuer()).is_empty());
    }
}
