//! The table of kinds: for each kind of manifest, every name it goes by and what it is to the
//! AdminService, the grant and the policies. Every list of kinds in the project derives from
//! [`Kind::ALL`] and [`Kind::facts`]; a fifth kind is one row here (the compiler then names each
//! match that must decide something about it) and a module in the reconciler.

use kube::CustomResourceExt;
use serde::{Deserialize, Serialize};

use crate::catalog::words::words;
use crate::grants::Operation;
use crate::resources::{Branding, IdentityProvider, OIDCClient, Organization, PolicyKind};

words! {
    /// A kind of manifest. Its wire form is the Kubernetes kind (`OIDCClient`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum Kind {
        #[serde(rename = "OIDCClient")]
        OidcClient = "OIDCClient",
        Branding = "Branding",
        IdentityProvider = "IdentityProvider",
        Organization = "Organization",
    }
}

/// What one kind is called and what it is, one row per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindFacts {
    /// The name kubectl takes (`kubectl get oidcclient`), also the runbooks' `<kind>`.
    pub singular: &'static str,
    /// The resource's plural, in URLs and admission rules.
    pub plural: &'static str,
    /// The plugin's own short form (`br/`, `idp/`, `org/`): inside the plugin only this
    /// project's kinds are meant, so it need not avoid other CRDs' names as the CRDs' short
    /// names (`nbrand`, ...) must in kubectl.
    pub abbreviation: &'static str,
    /// The AdminService's name of the kind (its `ObjectKind` value).
    pub object_kind: &'static str,
    /// The grant operation the reconciler needs for the kind.
    pub operation: Operation,
    /// The kind a ClientPolicy names to cover it; `None` where policies cover nothing.
    pub policy_kind: Option<PolicyKind>,
    /// The AdminService methods that write, read, delete and list objects of the kind.
    pub methods: KindMethods,
}

/// The AdminService methods of one kind, as the contract names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindMethods {
    pub apply: &'static str,
    pub get: &'static str,
    pub delete: &'static str,
    /// The read-only listing of whole objects (feature `list_objects`).
    pub list: &'static str,
}

impl Kind {
    /// The row of the kind.
    pub const fn facts(self) -> &'static KindFacts {
        match self {
            Kind::OidcClient => &KindFacts {
                singular: "oidcclient",
                plural: "oidcclients",
                abbreviation: "oidcc",
                object_kind: "OBJECT_KIND_CLIENT",
                methods: KindMethods {
                    apply: "ApplyClient",
                    get: "GetClient",
                    delete: "DeleteClient",
                    list: "ListClients",
                },
                operation: Operation::Clients,
                policy_kind: Some(PolicyKind::OidcClient),
            },
            Kind::Branding => &KindFacts {
                singular: "branding",
                plural: "brandings",
                abbreviation: "br",
                object_kind: "OBJECT_KIND_BRANDING",
                methods: KindMethods {
                    apply: "ApplyBranding",
                    get: "GetBranding",
                    delete: "DeleteBranding",
                    list: "ListBrandings",
                },
                operation: Operation::Brandings,
                policy_kind: Some(PolicyKind::Branding),
            },
            Kind::IdentityProvider => &KindFacts {
                singular: "identityprovider",
                plural: "identityproviders",
                abbreviation: "idp",
                object_kind: "OBJECT_KIND_IDENTITY_PROVIDER",
                methods: KindMethods {
                    apply: "ApplyIdentityProvider",
                    get: "GetIdentityProvider",
                    delete: "DeleteIdentityProvider",
                    list: "ListIdentityProviders",
                },
                operation: Operation::IdentityProviders,
                policy_kind: Some(PolicyKind::IdentityProvider),
            },
            Kind::Organization => &KindFacts {
                singular: "organization",
                plural: "organizations",
                abbreviation: "org",
                object_kind: "OBJECT_KIND_ORGANIZATION",
                methods: KindMethods {
                    apply: "ApplyOrganization",
                    get: "GetOrganization",
                    delete: "DeleteOrganization",
                    list: "ListOrganizations",
                },
                operation: Operation::Organizations,
                policy_kind: None,
            },
        }
    }

    pub const fn singular(self) -> &'static str {
        self.facts().singular
    }

    pub const fn plural(self) -> &'static str {
        self.facts().plural
    }

    pub const fn abbreviation(self) -> &'static str {
        self.facts().abbreviation
    }

    /// The AdminService's name of the kind (`OBJECT_KIND_CLIENT`).
    pub const fn object_kind_name(self) -> &'static str {
        self.facts().object_kind
    }

    pub const fn operation(self) -> Operation {
        self.facts().operation
    }

    pub const fn methods(self) -> KindMethods {
        self.facts().methods
    }

    pub const fn policy_kind(self) -> Option<PolicyKind> {
        self.facts().policy_kind
    }

    /// The CRD's short name, which kubectl knows too (`kubectl get nbrand`): read from the
    /// resource's own declaration, the one the CRDs in deploy/crds are generated from.
    pub fn short_name(self) -> &'static str {
        let names = match self {
            Kind::OidcClient => OIDCClient::shortnames(),
            Kind::Branding => Branding::shortnames(),
            Kind::IdentityProvider => IdentityProvider::shortnames(),
            Kind::Organization => Organization::shortnames(),
        };
        names.first().copied().unwrap_or(self.facts().singular)
    }

    /// Every name the kind goes by in kubectl and the plugin, kubectl's first.
    pub fn names(self) -> Vec<&'static str> {
        let mut names = vec![
            self.singular(),
            self.plural(),
            self.short_name(),
            self.abbreviation(),
        ];
        names.dedup();
        names
    }

    /// The kind by any of its names (`OIDCClient`, `oidcclients`, `nbrand`, `idp`), in any
    /// case, with or without `.nauthera.io`.
    pub fn named(text: &str) -> Option<Kind> {
        let lower = text.trim().to_ascii_lowercase();
        let name = lower.strip_suffix(".nauthera.io").unwrap_or(&lower);
        Kind::ALL
            .into_iter()
            .find(|kind| kind.names().contains(&name) || kind.as_str().eq_ignore_ascii_case(name))
    }

    /// The kind a ClientPolicy covers by this name.
    pub const fn of_policy_kind(policy_kind: PolicyKind) -> Kind {
        match policy_kind {
            PolicyKind::OidcClient => Kind::OidcClient,
            PolicyKind::Branding => Kind::Branding,
            PolicyKind::IdentityProvider => Kind::IdentityProvider,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn each_kind_has_names_and_objects_of_its_own() {
        let mut names = BTreeSet::new();
        for kind in Kind::ALL {
            for name in kind.names() {
                assert!(names.insert(name), "{kind}: {name} is taken");
            }
            assert_eq!(kind.singular(), kind.as_str().to_ascii_lowercase());
            assert_eq!(Kind::named(kind.as_str()), Some(kind));
            if let Some(policy_kind) = kind.facts().policy_kind {
                assert_eq!(Kind::of_policy_kind(policy_kind), kind);
                assert_eq!(policy_kind.as_str(), kind.as_str());
            }
        }
        assert_eq!(Kind::named("brandings.nauthera.io"), Some(Kind::Branding));
        assert_eq!(Kind::named("pods"), None);
    }

    /// The table says what the CRDs (generated from the resources' declarations) say.
    #[test]
    fn the_table_agrees_with_the_crds() {
        for kind in Kind::ALL {
            let crd = match kind {
                Kind::OidcClient => OIDCClient::crd(),
                Kind::Branding => Branding::crd(),
                Kind::IdentityProvider => IdentityProvider::crd(),
                Kind::Organization => Organization::crd(),
            };
            let names = crd.spec.names;
            assert_eq!(names.kind, kind.as_str());
            assert_eq!(names.plural, kind.plural());
            assert_eq!(names.singular.as_deref(), Some(kind.singular()));
            assert!(
                names
                    .short_names
                    .unwrap_or_default()
                    .contains(&kind.short_name().to_owned())
            );
        }
    }

    #[test]
    fn the_wire_form_is_the_kubernetes_kind() {
        assert_eq!(
            serde_json::to_string(&Kind::OidcClient).unwrap(),
            r#""OIDCClient""#
        );
        assert_eq!(
            serde_json::from_str::<Kind>(r#""IdentityProvider""#).unwrap(),
            Kind::IdentityProvider
        );
    }
}
