//! The revision of every client the server holds, by issuer, namespace and name. There is one
//! entry per client the reconciler may see, so each level's text is kept once: an issuer and a
//! namespace once for all their clients, a name and a revision boxed (no spare capacity), where
//! a key of three owned strings repeated the issuer and the namespace for every client.

use std::collections::HashMap;

use super::changes::RefKey;

type Names = HashMap<Box<str>, Box<str>>;

#[derive(Debug, Default)]
pub struct ClientRevisions {
    by_issuer: HashMap<Box<str>, HashMap<Box<str>, Names>>,
}

impl ClientRevisions {
    pub fn get(&self, issuer: &str, namespace: &str, name: &str) -> Option<&str> {
        self.by_issuer
            .get(issuer)?
            .get(namespace)?
            .get(name)
            .map(|revision| &**revision)
    }

    pub fn insert(&mut self, (issuer, namespace, name): RefKey, revision: String) {
        // Looked up first, so that an issuer's and a namespace's text are boxed once.
        let namespaces = match self.by_issuer.get_mut(issuer.as_str()) {
            Some(namespaces) => namespaces,
            None => self.by_issuer.entry(issuer.into_boxed_str()).or_default(),
        };
        let names = match namespaces.get_mut(namespace.as_str()) {
            Some(names) => names,
            None => namespaces.entry(namespace.into_boxed_str()).or_default(),
        };
        names.insert(name.into_boxed_str(), revision.into_boxed_str());
    }

    pub fn remove(&mut self, (issuer, namespace, name): &RefKey) {
        let Some(namespaces) = self.by_issuer.get_mut(issuer.as_str()) else {
            return;
        };
        let Some(names) = namespaces.get_mut(namespace.as_str()) else {
            return;
        };
        names.remove(name.as_str());
        if names.is_empty() {
            namespaces.remove(namespace.as_str());
            if namespaces.is_empty() {
                self.by_issuer.remove(issuer.as_str());
            }
        }
    }

    /// Every client held: its issuer, namespace and name, and its revision.
    pub fn iter(&self) -> impl Iterator<Item = ((&str, &str, &str), &str)> {
        self.by_issuer.iter().flat_map(|(issuer, namespaces)| {
            namespaces.iter().flat_map(move |(namespace, names)| {
                names
                    .iter()
                    .map(move |(name, revision)| ((&**issuer, &**namespace, &**name), &**revision))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(issuer: &str, namespace: &str, name: &str) -> RefKey {
        (issuer.to_owned(), namespace.to_owned(), name.to_owned())
    }

    #[test]
    fn clients_are_found_by_issuer_namespace_and_name() {
        let mut revisions = ClientRevisions::default();
        revisions.insert(
            key("https://a.test/acme", "team-a", "web"),
            "e-1".to_owned(),
        );
        revisions.insert(
            key("https://a.test/acme", "team-a", "api"),
            "e-2".to_owned(),
        );
        revisions.insert(
            key("https://a.test/beta", "team-a", "web"),
            "e-3".to_owned(),
        );
        revisions.insert(
            key("https://a.test/acme", "team-a", "web"),
            "e-4".to_owned(),
        );
        assert_eq!(
            revisions.get("https://a.test/acme", "team-a", "web"),
            Some("e-4")
        );
        assert_eq!(
            revisions.get("https://a.test/beta", "team-a", "web"),
            Some("e-3")
        );
        assert_eq!(revisions.get("https://a.test/acme", "team-b", "web"), None);
        let mut all: Vec<_> = revisions.iter().collect();
        all.sort();
        assert_eq!(
            all,
            [
                (("https://a.test/acme", "team-a", "api"), "e-2"),
                (("https://a.test/acme", "team-a", "web"), "e-4"),
                (("https://a.test/beta", "team-a", "web"), "e-3"),
            ]
        );
    }

    #[test]
    fn removing_the_last_client_of_an_issuer_drops_its_levels() {
        let mut revisions = ClientRevisions::default();
        revisions.insert(
            key("https://a.test/acme", "team-a", "web"),
            "e-1".to_owned(),
        );
        revisions.remove(&key("https://a.test/acme", "team-a", "api"));
        revisions.remove(&key("https://a.test/acme", "team-b", "web"));
        assert_eq!(
            revisions.get("https://a.test/acme", "team-a", "web"),
            Some("e-1")
        );
        revisions.remove(&key("https://a.test/acme", "team-a", "web"));
        assert_eq!(revisions.get("https://a.test/acme", "team-a", "web"), None);
        assert!(revisions.by_issuer.is_empty());
    }
}
