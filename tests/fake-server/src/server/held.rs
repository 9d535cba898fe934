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
        let keys = objects
            .organizations
            .keys()
            .map(|key| ("organization", key))
            .chain(objects.clients.keys().map(|key| ("client", key)))
            .chain(objects.brandings.keys().map(|key| ("branding", key)))
            .chain(
                objects
                    .identity_providers
                    .keys()
                    .map(|key| ("identity_provider", key)),
            );
        keys.map(|(kind, (slug, namespace, name))| HeldObject {
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
        .collect()
    }
}
