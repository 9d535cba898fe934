//! The order between manifests: a resource is sent to the server only once the manifests it
//! depends on are registered (the Organization manifest that serves its issuer, the Branding its
//! `brandingRef` names). Kept from the manifests' watches: who provides what, whether it is
//! registered, and who waits on it, so that a provider registering reconciles exactly the
//! resources waiting on it, and a deletion can name the resources that still depend on it.

use std::collections::{BTreeSet, HashMap};
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
    /// The latest time one of its prerequisites' manifests registered: a refusal older than that
    /// (a missing reference, say) is sent again.
    pub ready_at: Option<Timestamp>,
}

#[derive(Debug, Default)]
struct Index {
    providers: HashMap<Prerequisite, Provider>,
    provided_by: HashMap<Manifest, Prerequisite>,
    needs: HashMap<Manifest, Vec<Prerequisite>>,
    waiting: HashMap<Prerequisite, BTreeSet<Manifest>>,
    /// Organization slug → its manifest, since the server's changes name an organization by
    /// slug.
    slugs: HashMap<String, Manifest>,
}

/// The prerequisites of every watched manifest.
#[derive(Debug)]
pub struct Prerequisites {
    index: RwLock<Index>,
    routes: broadcast::Sender<Route>,
}

impl Prerequisites {
    /// Routes go to the controllers through `routes`.
    pub fn new(routes: broadcast::Sender<Route>) -> Prerequisites {
        Prerequisites {
            index: RwLock::default(),
            routes,
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
        let mut routed = Vec::new();
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
                    routed.extend(index.waiting.get(&gone).cloned().unwrap_or_default());
                }
            }
            if let Some(prerequisite) = provides {
                let provider = Provider {
                    manifest: manifest.clone(),
                    registered_at,
                };
                let before = index.providers.insert(prerequisite.clone(), provider);
                // First sight routes nothing: every manifest is reconciled at the start anyway.
                let moved = before.is_some_and(|b| b.registered_at != registered_at);
                if moved {
                    routed.extend(
                        index
                            .waiting
                            .get(&prerequisite)
                            .cloned()
                            .unwrap_or_default(),
                    );
                }
                index.provided_by.insert(manifest.clone(), prerequisite);
            }
        }
        self.route(routed);
    }

    /// Records what a manifest needs now (empty once it is gone). A manifest that goes routes
    /// the providers it needed: a deletion waiting for its dependents to go (an organization that
    /// still holds objects) is tried again.
    pub fn record_needs(&self, manifest: &Manifest, needs: Vec<Prerequisite>, present: bool) {
        let mut routed = Vec::new();
        {
            let Ok(mut index) = self.index.write() else {
                return;
            };
            let previous = index.needs.remove(manifest).unwrap_or_default();
            for prerequisite in &previous {
                if let Some(set) = index.waiting.get_mut(prerequisite) {
                    set.remove(manifest);
                    if set.is_empty() {
                        index.waiting.remove(prerequisite);
                    }
                }
                if !present && let Some(provider) = index.providers.get(prerequisite) {
                    routed.push(provider.manifest.clone());
                }
            }
            if present {
                for prerequisite in &needs {
                    index
                        .waiting
                        .entry(prerequisite.clone())
                        .or_default()
                        .insert(manifest.clone());
                }
                index.needs.insert(manifest.clone(), needs);
            }
        }
        self.route(routed);
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

    /// The manifests that depend on a prerequisite.
    pub fn dependents(&self, prerequisite: &Prerequisite) -> Vec<Manifest> {
        self.index
            .read()
            .ok()
            .and_then(|index| index.waiting.get(prerequisite).cloned())
            .map(|set| set.into_iter().collect())
            .unwrap_or_default()
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

    #[test]
    fn a_provider_that_registers_routes_exactly_the_manifests_waiting_on_it() {
        let (sender, mut receiver) = broadcast::channel(16);
        let index = Prerequisites::new(sender);
        let organization = Manifest::new(ObjectKind::Organization, "platform", "acme");
        let web = Manifest::new(ObjectKind::Client, "team-a", "web");
        let other = Manifest::new(ObjectKind::Client, "team-b", "other");
        index.record_provider(&organization, Some(issuer()), None, Some("acme"));
        index.record_needs(&web, vec![issuer()], true);
        index.record_needs(
            &other,
            vec![Prerequisite::organization(
                "https://login.example.test/other",
            )],
            true,
        );
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
        assert_eq!(
            routed(&mut receiver),
            vec![Route::Resource {
                kind: ObjectKind::Client,
                namespace: "team-a".into(),
                name: "web".into(),
            }]
        );
        assert_eq!(
            index.standing(&[issuer()]),
            Standing {
                waiting_for: None,
                ready_at: Some(at),
            }
        );
        // The same again routes nothing.
        index.record_provider(&organization, Some(issuer()), Some(at), Some("acme"));
        assert!(routed(&mut receiver).is_empty());
        assert_eq!(index.dependents(&issuer()), vec![web.clone()]);

        // A dependent that goes routes its provider (a deletion waiting on it).
        index.record_needs(&web, Vec::new(), false);
        assert_eq!(
            routed(&mut receiver),
            vec![Route::Resource {
                kind: ObjectKind::Organization,
                namespace: "platform".into(),
                name: "acme".into(),
            }]
        );
        assert!(index.dependents(&issuer()).is_empty());
    }

    #[test]
    fn nothing_declared_means_nothing_to_wait_for() {
        let (sender, _receiver) = broadcast::channel(16);
        let index = Prerequisites::new(sender);
        assert_eq!(index.standing(&[issuer()]), Standing::default());
        let organization = Manifest::new(ObjectKind::Organization, "platform", "acme");
        index.record_provider(&organization, Some(issuer()), None, Some("acme"));
        index.record_provider(&organization, None, None, None);
        assert_eq!(index.standing(&[issuer()]), Standing::default());
        assert_eq!(index.organization("acme"), None);
    }
}
