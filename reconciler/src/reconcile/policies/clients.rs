//! What the namespace limit counts from: each namespace's OIDCClients in creation order (then
//! name), kept from their watch. A watch event finds its client by name and a count walks only
//! the clients created before the one judged, so neither grows with the namespace.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;

/// An OIDCClient as the namespace limit counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountedClient {
    pub name: String,
    pub issuer: String,
    pub created: Option<Timestamp>,
    pub deleting: bool,
}

/// The index of every namespace's clients.
#[derive(Debug, Default)]
pub struct ClientIndex {
    namespaces: HashMap<String, NamespaceClients>,
    /// One copy of each issuer, shared by its clients (a cluster has few).
    issuers: HashSet<Arc<str>>,
}

#[derive(Debug, Default)]
struct NamespaceClients {
    /// (creation time, name) → the client.
    in_order: BTreeMap<(Option<Timestamp>, String), Counted>,
    /// name → its creation time, the other half of its key above.
    created: HashMap<String, Option<Timestamp>>,
}

#[derive(Debug)]
struct Counted {
    issuer: Arc<str>,
    deleting: bool,
}

impl ClientIndex {
    /// A client as its watch saw it: present (added or changed) or gone.
    pub fn seen(&mut self, namespace: &str, client: CountedClient, present: bool) {
        let clients = self.namespaces.entry(namespace.to_owned()).or_default();
        // A client's creation time never changes, but a name can come back as a new object.
        let removed = clients
            .created
            .remove(&client.name)
            .and_then(|created| clients.in_order.remove(&(created, client.name.clone())));
        if present {
            let issuer = match self.issuers.get(client.issuer.as_str()) {
                Some(issuer) => issuer.clone(),
                None => {
                    let issuer: Arc<str> = client.issuer.into();
                    self.issuers.insert(issuer.clone());
                    issuer
                }
            };
            clients.created.insert(client.name.clone(), client.created);
            clients.in_order.insert(
                (client.created, client.name),
                Counted {
                    issuer,
                    deleting: client.deleting,
                },
            );
        }
        if clients.in_order.is_empty() {
            self.namespaces.remove(namespace);
        }
        if let Some(removed) = removed {
            self.forget_issuer_if_unused(removed.issuer);
        }
    }

    /// The clients of a scope (every namespace, or one) are listed anew: the index forgets them,
    /// and the listing fills it again.
    pub fn relisted(&mut self, scope: Option<&str>) {
        match scope {
            None => {
                self.namespaces.clear();
                self.issuers.clear();
            }
            Some(namespace) => {
                if let Some(clients) = self.namespaces.remove(namespace) {
                    for (_, counted) in clients.in_order {
                        self.forget_issuer_if_unused(counted.issuer);
                    }
                }
            }
        }
    }

    /// How many clients of the namespace that `covers` (by issuer) were created before the one
    /// at `(created, name)`; those being deleted no longer count.
    pub fn created_before(
        &self,
        namespace: &str,
        created: Option<Timestamp>,
        name: &str,
        covers: impl Fn(&str) -> bool,
    ) -> usize {
        let Some(clients) = self.namespaces.get(namespace) else {
            return 0;
        };
        clients
            .in_order
            .range(..(created, name.to_owned()))
            .filter(|((_, other), counted)| !counted.deleting && other != name)
            .filter(|(_, counted)| covers(&counted.issuer))
            .count()
    }

    fn forget_issuer_if_unused(&mut self, issuer: Arc<str>) {
        // The set's copy and this one: no client names it any more.
        if Arc::strong_count(&issuer) == 2 {
            self.issuers.remove(&issuer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str, issuer: &str, created: i64, deleting: bool) -> CountedClient {
        CountedClient {
            name: name.into(),
            issuer: issuer.into(),
            created: Some(Timestamp::from_second(created).unwrap()),
            deleting,
        }
    }

    const ACME: &str = "https://login.example.test/acme";
    const OTHER: &str = "https://login.example.test/other";

    #[test]
    fn a_count_sees_earlier_covered_clients_that_stay() {
        let mut index = ClientIndex::default();
        index.seen("team-a", client("first", ACME, 10, false), true);
        index.seen("team-a", client("second", ACME, 20, false), true);
        index.seen("team-a", client("leaving", ACME, 1, true), true);
        index.seen("team-a", client("foreign", OTHER, 2, false), true);
        index.seen("team-b", client("elsewhere", ACME, 1, false), true);
        let at = |created: i64| Some(Timestamp::from_second(created).unwrap());
        let acme = |issuer: &str| issuer == ACME;
        assert_eq!(index.created_before("team-a", at(10), "first", acme), 0);
        assert_eq!(index.created_before("team-a", at(20), "second", acme), 1);
        assert_eq!(index.created_before("team-a", at(30), "third", |_| true), 3);
        // The same creation time: the name decides.
        assert_eq!(index.created_before("team-a", at(10), "aaa", acme), 0);
        assert_eq!(index.created_before("team-a", at(10), "zzz", acme), 1);
        assert_eq!(index.created_before("team-c", at(10), "web", acme), 0);
    }

    #[test]
    fn a_client_moves_or_goes_by_its_name_and_unused_issuers_are_dropped() {
        let mut index = ClientIndex::default();
        index.seen("team-a", client("web", ACME, 10, false), true);
        // Deleted and created again under the same name: a new creation time.
        index.seen("team-a", client("web", OTHER, 50, false), true);
        let at = |created: i64| Some(Timestamp::from_second(created).unwrap());
        assert_eq!(index.created_before("team-a", at(40), "api", |_| true), 0);
        assert_eq!(index.created_before("team-a", at(60), "api", |_| true), 1);
        assert_eq!(index.issuers.len(), 1, "{:?}", index.issuers);
        index.seen("team-a", client("web", OTHER, 50, false), false);
        assert!(index.namespaces.is_empty());
        assert!(index.issuers.is_empty());

        index.seen("team-a", client("web", ACME, 10, false), true);
        index.seen("team-b", client("api", ACME, 10, false), true);
        index.relisted(Some("team-a"));
        assert_eq!(index.issuers.len(), 1);
        index.relisted(None);
        assert!(index.namespaces.is_empty() && index.issuers.is_empty());
    }
}
