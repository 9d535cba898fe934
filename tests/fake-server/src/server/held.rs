//! What the server holds, by key: for checks that the server holds exactly what the manifests
//! declare (no duplicate, nothing left behind after a delete).

use super::FakeServer;

/// One object the server holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct HeldObject {
    /// `organization`, `client`, `branding` or `identity_provider`.
    pub kind: &'static str,
    /// The slug of the organization it belongs to (its own, for an organization).
    pub organization: String,
    /// Empty for an organization.
    pub namespace: String,
    /// The slug for an organization.
    pub name: String,
}

impl FakeServer {
    /// Every object the server holds, of every kind, in key order.
    pub fn held_objects(&self) -> Vec<HeldObject> {
        let core = self.shared.core();
        let objects = &core.objects;
        let keyed = |kind: &'static str, keys: Vec<&(String, String, String)>| {
            keys.into_iter()
                .map(move |(slug, namespace, name)| HeldObject {
                    kind,
                    // An organization's key holds its slug in the place of the name.
                    organization: if slug.is_empty() {
                        name.clone()
                    } else {
                        slug.clone()
                    },
                    namespace: namespace.clone(),
                    name: name.clone(),
                })
                .collect::<Vec<_>>()
        };
        let mut held = keyed("organization", objects.organizations.keys().collect());
        held.extend(keyed("client", objects.clients.keys().collect()));
        held.extend(keyed("branding", objects.brandings.keys().collect()));
        held.extend(keyed(
            "identity_provider",
            objects.identity_providers.keys().collect(),
        ));
        held
    }
}
