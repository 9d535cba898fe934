//! The order between manifests: a resource is sent to the server only once the manifests it
//! depends on are registered (the Organization manifest that serves its issuer, the Branding its
//! `brandingRef` names). Kept from the manifests' watches: who provides what and whether it is
//! registered. Who depends on a provider is found in the watch caches when asked (a provider
//! registering, a deletion naming what still depends on it): nothing is kept per dependent, so
//! ten thousand clients cost no memory here.

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use jiff::Timestamp;
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::catalog::Reason;
use tokio::sync::broadcast;

use crate::reconcile::decide::{Manifest, Missing, Standing};
use crate::server::changes::Route;

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

/// A manifest that provides a prerequisite, and since when the server holds what it declared
/// (`None`: not registered yet).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Provider {
    manifest: Manifest,
    registered_at: Option<Timestamp>,
}

impl Index {
    fn brandings_listed(&self, namespace: &str) -> bool {
        self.brandings_listed.contains(&None)
            || self.brandings_listed.contains(&Some(namespace.to_owned()))
    }
}

#[derive(Debug, Default)]
struct Index {
    providers: HashMap<Prerequisite, Provider>,
    provided_by: HashMap<Manifest, Prerequisite>,
    /// Organization slug → its manifest, since the server's changes name an organization by
    /// slug.
    slugs: HashMap<String, Manifest>,
    /// How the last manifest providing a prerequisite went, while none provides it again.
    gone: HashMap<Prerequisite, Reason>,
    /// The scopes (`None`: every namespace) whose Brandings were listed: a Branding not seen
    /// there does not exist. Before that, nothing is called missing.
    brandings_listed: HashSet<Option<String>>,
    /// The prerequisites some manifest was judged without, because no manifest declared them
    /// then: the first manifest to declare one is news to those, even in a watch's initial
    /// listing (the kinds come through separate watches, so a dependent's may list first).
    judged_without: HashSet<Prerequisite>,
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
        live: bool,
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
                // A manifest that provides it anew; the echoes of one that is being deleted
                // keep how it went.
                if before.is_none() {
                    index.gone.remove(&prerequisite);
                }
                // First sight in the initial listing routes nothing, unless a manifest was judged
                // without it already: every manifest is reconciled at the start anyway. A
                // provider created later is news to the manifests that were judged without it
                // (applied together, their watch events came first).
                let judged_without = index.judged_without.remove(&prerequisite);
                let news = before.is_none() && (live || judged_without);
                if news || before.is_some_and(|b| b.registered_at != registered_at) {
                    moved.push(prerequisite.clone());
                }
                index.provided_by.insert(manifest.clone(), prerequisite);
            }
        }
        for prerequisite in moved {
            self.route(self.dependents(&prerequisite));
        }
    }

    /// The manifest providing `prerequisite` finished its deletion with this outcome: the
    /// manifests that name it say how it went.
    pub fn record_gone(&self, prerequisite: Prerequisite, outcome: Reason) {
        if let Ok(mut index) = self.index.write() {
            index.gone.insert(prerequisite, outcome);
        }
    }

    /// A scope's Brandings were listed (`None`: every namespace): from now on a Branding not
    /// seen in it does not exist.
    pub fn brandings_listed(&self, scope: Option<&str>) {
        if let Ok(mut index) = self.index.write() {
            index.brandings_listed.insert(scope.map(str::to_owned));
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
        let mut undeclared = Vec::new();
        for prerequisite in needs {
            let Some(provider) = index.providers.get(prerequisite) else {
                if !index.judged_without.contains(prerequisite) {
                    undeclared.push(prerequisite.clone());
                }
                // An issuer no manifest declares is the server's own organization; a Branding
                // is only ever declared by a manifest, so one not there is missing.
                if let Prerequisite::Branding { namespace, name } = prerequisite
                    && standing.missing.is_none()
                    && index.brandings_listed(namespace)
                {
                    standing.missing = Some(Missing {
                        manifest: Manifest::new(ObjectKind::Branding, namespace, name),
                        went: index.gone.get(prerequisite).copied(),
                    });
                }
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
        drop(index);
        if !undeclared.is_empty()
            && let Ok(mut index) = self.index.write()
        {
            index.judged_without.extend(undeclared);
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

    /// Held for the echo window: a dependent reconciling when its prerequisite registers folds
    /// this route with the echoes of its own writes.
    fn route(&self, manifests: impl IntoIterator<Item = Manifest>) {
        for manifest in manifests {
            let _ = self.routes.send(Route::Held {
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
        Route::Held {
            kind: manifest.kind,
            namespace: manifest.namespace.clone(),
            name: manifest.name.clone(),
        }
    }

    /// An Organization `acme`, and one kind's cache in which `web` needs its issuer and nothing
    /// else needs anything.
    fn needing_the_issuer(index: &Prerequisites) -> (Manifest, Manifest) {
        let organization = Manifest::new(ObjectKind::Organization, "platform", "acme");
        let web = Manifest::new(ObjectKind::Client, "team-a", "web");
        let cached = web.clone();
        index.find_dependents_with(Box::new(move |p| {
            if *p == issuer() {
                vec![cached.clone()]
            } else {
                Vec::new()
            }
        }));
        (organization, web)
    }

    #[test]
    fn a_provider_that_registers_routes_exactly_the_manifests_waiting_on_it() {
        let (sender, mut receiver) = broadcast::channel(16);
        let index = Prerequisites::new(sender);
        let (organization, web) = needing_the_issuer(&index);
        index.record_provider(&organization, Some(issuer()), None, Some("acme"), false);
        assert!(
            routed(&mut receiver).is_empty(),
            "first sight in the initial listing routes nothing"
        );
        assert_eq!(
            index.standing(&[issuer()]).waiting_for,
            Some(organization.clone())
        );
        assert_eq!(index.organization("acme"), Some(organization.clone()));

        let at = Timestamp::from_second(1_000).unwrap();
        index.record_provider(&organization, Some(issuer()), Some(at), Some("acme"), false);
        assert_eq!(routed(&mut receiver), vec![route(&web)]);
        assert_eq!(
            index.standing(&[issuer()]),
            Standing {
                waiting_for: None,
                missing: None,
                waiting_since: None,
                ready_at: Some(at),
            }
        );
        // The same again routes nothing.
        index.record_provider(&organization, Some(issuer()), Some(at), Some("acme"), false);
        assert!(routed(&mut receiver).is_empty());
        assert_eq!(index.dependents(&issuer()), vec![web.clone()]);

        // A dependent that goes routes its provider (a deletion waiting on it).
        index.dependent_gone(&[issuer()]);
        assert_eq!(routed(&mut receiver), vec![route(&organization)]);

        // A provider that goes routes what waited on it: nothing to wait for any more.
        index.record_provider(&organization, None, None, None, false);
        assert_eq!(routed(&mut receiver), vec![route(&web)]);
        assert_eq!(index.standing(&[issuer()]), Standing::default());
        assert_eq!(index.organization("acme"), None);
    }

    #[test]
    fn a_provider_created_after_the_start_is_news_to_the_manifests_that_need_it() {
        let (routes, mut receiver) = broadcast::channel(16);
        let index = Prerequisites::new(routes);
        let (organization, web) = needing_the_issuer(&index);
        // Applied together with `web`, whose watch event came first: `web` looks again.
        index.record_provider(&organization, Some(issuer()), None, Some("acme"), true);
        assert_eq!(routed(&mut receiver), vec![route(&web)]);
        // The same again: no news.
        index.record_provider(&organization, Some(issuer()), None, Some("acme"), true);
        assert!(routed(&mut receiver).is_empty());
    }

    #[test]
    fn a_provider_listed_after_a_manifest_was_judged_without_it_is_news() {
        let (routes, mut receiver) = broadcast::channel(16);
        let index = Prerequisites::new(routes);
        let (organization, web) = needing_the_issuer(&index);
        // `web`'s watch listed first, and it was judged with no manifest declaring its issuer.
        assert_eq!(index.standing(&[issuer()]), Standing::default());
        index.record_provider(&organization, Some(issuer()), None, Some("acme"), false);
        assert_eq!(routed(&mut receiver), vec![route(&web)]);
        // Once known, a provider listed again is no news.
        index.record_provider(&organization, None, None, None, false);
        routed(&mut receiver);
        index.record_provider(&organization, Some(issuer()), None, Some("acme"), false);
        assert!(routed(&mut receiver).is_empty());
    }

    #[test]
    fn a_branding_no_manifest_declares_is_missing_once_the_brandings_are_listed() {
        let (sender, _receiver) = broadcast::channel(16);
        let index = Prerequisites::new(sender);
        let needs = [Prerequisite::Branding {
            namespace: "team-a".to_owned(),
            name: "sign-in".to_owned(),
        }];
        let branding = Manifest::new(ObjectKind::Branding, "team-a", "sign-in");
        assert_eq!(
            index.standing(&needs),
            Standing::default(),
            "not listed yet: nothing is called missing"
        );
        index.brandings_listed(Some("team-b"));
        assert_eq!(index.standing(&needs).missing, None, "another scope");
        index.brandings_listed(Some("team-a"));
        assert_eq!(
            index.standing(&needs).missing,
            Some(Missing {
                manifest: branding.clone(),
                went: None
            })
        );
        index.record_provider(&branding, Some(needs[0].clone()), None, None, false);
        let standing = index.standing(&needs);
        assert_eq!(standing.missing, None);
        assert_eq!(standing.waiting_for, Some(branding.clone()));

        // Deleted: the referrers say how it went.
        index.record_gone(needs[0].clone(), Reason::Deleted);
        index.record_provider(&branding, None, None, None, false);
        assert_eq!(
            index.standing(&needs).missing,
            Some(Missing {
                manifest: branding.clone(),
                went: Some(Reason::Deleted)
            })
        );
        // Declared again: what went before is forgotten.
        index.record_provider(&branding, Some(needs[0].clone()), None, None, false);
        index.record_provider(&branding, None, None, None, false);
        assert_eq!(index.standing(&needs).missing.unwrap().went, None);
    }

    #[test]
    fn nothing_declared_means_nothing_to_wait_for() {
        let (sender, _receiver) = broadcast::channel(16);
        let index = Prerequisites::new(sender);
        assert_eq!(index.standing(&[issuer()]), Standing::default());
        assert!(index.dependents(&issuer()).is_empty());
    }
}
