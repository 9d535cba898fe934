//! The declared world: every manifest the churn created, changed or deleted, and what each one
//! earns. The invariants compare the cluster and the server against it.

use std::collections::{BTreeMap, BTreeSet};

use nauthera_shared::catalog::Reason;

pub use crate::bench::workload::Kind;

/// The issuers the churn places objects at: the organization the server holds from the start,
/// and the one the run's own Organization manifest declares.
pub const SERVER_ISSUER: &str = crate::e2e::ISSUER;
pub const CHAOS_SLUG: &str = "chaos";
pub const CHAOS_ISSUER: &str = "https://login.example.com/chaos";

/// What happens to the server's object when the manifest is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Delete,
    Orphan,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Delete => "Delete",
            Policy::Orphan => "Orphan",
        }
    }
}

/// Kubernetes' propagation policy of a deletion (`kubectl delete --cascade=...`): what the
/// garbage collector does with the manifest's dependents (a client's Secret).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are deleted once the manifest is gone (the default).
    Background,
    /// Dependents are deleted first (`foregroundDeletion` finalizer).
    Foreground,
    /// Dependents lose their owner reference and stay (`orphan` finalizer).
    Orphan,
}

impl Propagation {
    pub const ALL: [Propagation; 3] = [
        Propagation::Background,
        Propagation::Foreground,
        Propagation::Orphan,
    ];
}

/// A manifest deleted with a propagation policy while the garbage collector raced the
/// reconciler.
#[derive(Clone, Debug)]
pub struct CollectedDeletion {
    pub declared: Declared,
    pub propagation: Propagation,
}

/// One manifest as the churn last declared it.
#[derive(Clone, Debug)]
pub struct Declared {
    pub kind: Kind,
    pub name: String,
    pub issuer: String,
    pub policy: Policy,
    /// Bumped by every update; part of the spec, so each update is a new generation.
    pub version: u32,
    /// A client's `spec.secret.secretName` (the client's name when `None`).
    pub secret_name: Option<String>,
    /// An identity provider's upstream client secret, as its team's Secret holds it.
    pub upstream_secret: Option<String>,
    /// A Branding with an escape sequence in a text: refused, for good.
    pub earns_refusal: bool,
}

impl Declared {
    /// The reason this manifest earns once everything has settled.
    pub fn expected_reason(&self) -> Reason {
        if self.earns_refusal {
            Reason::Refused
        } else {
            Reason::Registered
        }
    }

    /// The Secret a client's generated secret is delivered into.
    pub fn delivered_secret(&self) -> Option<String> {
        (self.kind == Kind::OIDCClient).then(|| {
            self.secret_name
                .clone()
                .unwrap_or_else(|| self.name.clone())
        })
    }

    /// The name of the Secret an identity provider reads its upstream secret from.
    pub fn upstream_secret_name(&self) -> String {
        format!("{}-upstream", self.name)
    }

    /// The key the server holds this object under.
    pub fn held_key(&self, namespace: &str) -> HeldKey {
        match self.kind {
            Kind::Organization => (
                server_kind(self.kind),
                CHAOS_SLUG.to_owned(),
                String::new(),
                CHAOS_SLUG.to_owned(),
            ),
            kind => (
                server_kind(kind),
                slug_of(&self.issuer).to_owned(),
                namespace.to_owned(),
                self.name.clone(),
            ),
        }
    }
}

/// The slug of the organization serving one of the run's issuers.
fn slug_of(issuer: &str) -> &'static str {
    if issuer == CHAOS_ISSUER {
        CHAOS_SLUG
    } else {
        crate::e2e::ORGANIZATION
    }
}

/// `(kind, organization, namespace, name)` as the fake server's `HeldObject` spells it.
pub type HeldKey = (&'static str, String, String, String);

/// The fake server's word for a kind.
pub fn server_kind(kind: Kind) -> &'static str {
    match kind {
        Kind::Organization => "organization",
        Kind::Branding => "branding",
        Kind::IdentityProvider => "identity_provider",
        Kind::OIDCClient => "client",
    }
}

/// Every manifest the run declared, live and deleted.
#[derive(Debug, Default)]
pub struct World {
    pub live: BTreeMap<(Kind, String), Declared>,
    /// Deleted with the Delete policy: the server must not hold them.
    pub deleted: Vec<Declared>,
    /// Deleted with the Orphan policy: the server may hold them (if they were registered).
    pub orphaned: Vec<Declared>,
    /// Deleted with a propagation policy named (also in `deleted` or `orphaned`).
    pub collected: Vec<CollectedDeletion>,
    next: u64,
}

impl World {
    /// A fresh name for a manifest of `kind` (never reused, so no deleted object is adopted).
    pub fn fresh_name(&mut self, kind: Kind) -> String {
        self.next += 1;
        let prefix = match kind {
            Kind::Organization => "org",
            Kind::Branding => "br",
            Kind::IdentityProvider => "idp",
            Kind::OIDCClient => "app",
        };
        format!("{prefix}-{:05}", self.next)
    }

    pub fn live_of(&self, kind: Kind) -> Vec<&Declared> {
        self.live.values().filter(|d| d.kind == kind).collect()
    }

    /// How many live manifests of each kind, `OIDCClient 40, Branding 5, ...`.
    pub fn census(&self) -> BTreeMap<&'static str, usize> {
        let mut census = BTreeMap::new();
        for declared in self.live.values() {
            *census.entry(declared.kind.name()).or_default() += 1;
        }
        census
    }

    /// The keys the server must hold, may hold, and must not hold.
    pub fn held_expectations(&self, namespace: &str) -> HeldExpectations {
        let mut must = BTreeSet::new();
        let mut may = BTreeSet::new();
        for declared in self.live.values() {
            if declared.earns_refusal {
                continue;
            }
            must.insert(declared.held_key(namespace));
        }
        for declared in &self.orphaned {
            may.insert(declared.held_key(namespace));
        }
        let must_not = self.deleted.iter().map(|d| d.held_key(namespace)).collect();
        HeldExpectations {
            must,
            may,
            must_not,
        }
    }
}

/// What the server's set of objects must look like.
#[derive(Debug, Default)]
pub struct HeldExpectations {
    pub must: BTreeSet<HeldKey>,
    pub may: BTreeSet<HeldKey>,
    pub must_not: BTreeSet<HeldKey>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str, policy: Policy) -> Declared {
        Declared {
            kind: Kind::OIDCClient,
            name: name.to_owned(),
            issuer: SERVER_ISSUER.to_owned(),
            policy,
            version: 1,
            secret_name: None,
            upstream_secret: None,
            earns_refusal: false,
        }
    }

    #[test]
    fn the_server_must_hold_live_manifests_and_not_deleted_ones() {
        let mut world = World::default();
        let live = client("app-1", Policy::Delete);
        world
            .live
            .insert((Kind::OIDCClient, live.name.clone()), live);
        world.deleted.push(client("app-2", Policy::Delete));
        world.orphaned.push(client("app-3", Policy::Orphan));
        let mut refused = client("br-4", Policy::Delete);
        refused.kind = Kind::Branding;
        refused.earns_refusal = true;
        world
            .live
            .insert((Kind::Branding, refused.name.clone()), refused);
        let expected = world.held_expectations("ns");
        let key = |name: &str| {
            (
                "client",
                "acme".to_owned(),
                "ns".to_owned(),
                name.to_owned(),
            )
        };
        assert!(expected.must.contains(&key("app-1")));
        assert!(
            !expected.must.iter().any(|k| k.3 == "br-4"),
            "a refused manifest is never held"
        );
        assert!(expected.must_not.contains(&key("app-2")));
        assert!(expected.may.contains(&key("app-3")));
    }

    #[test]
    fn fresh_names_are_never_reused() {
        let mut world = World::default();
        let a = world.fresh_name(Kind::OIDCClient);
        let b = world.fresh_name(Kind::OIDCClient);
        assert_ne!(a, b);
    }
}
