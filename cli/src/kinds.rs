//! The four kinds and how users name them on the command line (`oidcclient/shop`, `oidcc`,
//! `brandings`, `norg/acme`, ...).

use std::fmt;

use nauthera_shared::grants::Operation;
use serde::Serialize;

use crate::error::CliError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Kind {
    OIDCClient,
    Branding,
    IdentityProvider,
    Organization,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::OIDCClient,
        Kind::Branding,
        Kind::IdentityProvider,
        Kind::Organization,
    ];

    /// The Kubernetes kind.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::OIDCClient => "OIDCClient",
            Kind::Branding => "Branding",
            Kind::IdentityProvider => "IdentityProvider",
            Kind::Organization => "Organization",
        }
    }

    /// The name kubectl takes (`kubectl get oidcclient`), also the runbooks' `<kind>`.
    pub const fn singular(self) -> &'static str {
        match self {
            Kind::OIDCClient => "oidcclient",
            Kind::Branding => "branding",
            Kind::IdentityProvider => "identityprovider",
            Kind::Organization => "organization",
        }
    }

    pub const fn plural(self) -> &'static str {
        match self {
            Kind::OIDCClient => "oidcclients",
            Kind::Branding => "brandings",
            Kind::IdentityProvider => "identityproviders",
            Kind::Organization => "organizations",
        }
    }

    /// The CRD's short name, which kubectl knows too (`kubectl get nbrand`): read from the
    /// resource's own declaration in shared, the one the CRDs in deploy/crds are generated from.
    pub fn short_name(self) -> &'static str {
        use kube::CustomResourceExt;
        use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
        let names = match self {
            Kind::OIDCClient => OIDCClient::shortnames(),
            Kind::Branding => Branding::shortnames(),
            Kind::IdentityProvider => IdentityProvider::shortnames(),
            Kind::Organization => Organization::shortnames(),
        };
        names
            .first()
            .copied()
            .expect("every CRD declares a short name")
    }

    /// The plugin's own short forms (`br/`, `idp/`, `org/`): inside the plugin only this
    /// project's kinds are meant, so they need not avoid other CRDs' names as the CRDs' short
    /// names (`nbrand`, ...) must in kubectl.
    pub const fn abbreviation(self) -> &'static str {
        match self {
            Kind::OIDCClient => "oidcc",
            Kind::Branding => "br",
            Kind::IdentityProvider => "idp",
            Kind::Organization => "org",
        }
    }

    /// Every name the plugin takes the kind by, kubectl's first.
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

    /// The grant operation the reconciler needs for this kind.
    pub const fn operation(self) -> Operation {
        match self {
            Kind::OIDCClient => Operation::Clients,
            Kind::Branding => Operation::Brandings,
            Kind::IdentityProvider => Operation::IdentityProviders,
            Kind::Organization => Operation::Organizations,
        }
    }

    /// A kind by any of its names, case-insensitive, with or without `.nauthera.io`.
    pub fn parse(text: &str) -> Result<Kind, CliError> {
        let lower = text.to_ascii_lowercase();
        let name = lower.strip_suffix(".nauthera.io").unwrap_or(&lower);
        Kind::ALL
            .into_iter()
            .find(|kind| kind.names().contains(&name) || kind.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| CliError::Usage(format!("unknown kind `{text}`; {}", Kind::usage())))
    }

    /// What the plugin suggests for a kind it does not know: the kinds' names and the CRDs'
    /// short names, which kubectl knows too (not the plugin's own `br`, `idp`, `org`).
    fn usage() -> String {
        let list = |names: Vec<&str>| match names.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        format!(
            "use {} (or {})",
            list(Kind::ALL.map(Kind::singular).to_vec()),
            list(Kind::ALL.map(Kind::short_name).to_vec())
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `KIND` or `KIND/NAME` from the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub kind: Kind,
    pub name: Option<String>,
}

impl Target {
    pub fn parse(text: &str) -> Result<Target, CliError> {
        match text.split_once('/') {
            Some((kind, name)) if !name.is_empty() && !name.contains('/') => Ok(Target {
                kind: Kind::parse(kind)?,
                name: Some(name.to_owned()),
            }),
            Some(_) => Err(CliError::Usage(format!(
                "`{text}` is not KIND/NAME; write it like oidcclient/shop"
            ))),
            None => Ok(Target {
                kind: Kind::parse(text)?,
                name: None,
            }),
        }
    }

    /// `KIND/NAME`, the name required.
    pub fn parse_named(text: &str) -> Result<(Kind, String), CliError> {
        match Target::parse(text)? {
            Target {
                kind,
                name: Some(name),
            } => Ok((kind, name)),
            Target { .. } => Err(CliError::Usage(format!(
                "`{text}` names no resource; write KIND/NAME, like oidcclient/shop"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_by_every_name() {
        for kind in Kind::ALL {
            for name in [
                kind.singular(),
                kind.plural(),
                kind.short_name(),
                kind.as_str(),
            ] {
                assert_eq!(Kind::parse(name).unwrap(), kind);
            }
        }
        assert_eq!(
            Kind::parse("oidcclients.nauthera.io").unwrap(),
            Kind::OIDCClient
        );
        assert!(Kind::parse("pods").is_err());
    }

    /// A misspelt kind is answered with names kubectl knows: the CRDs' short names, as
    /// deploy/crds declares them, not the plugin's own abbreviations.
    #[test]
    fn an_unknown_kind_suggests_the_crds_short_names() {
        let Err(CliError::Usage(message)) = Kind::parse("oidcclinet") else {
            panic!("oidcclinet is not a kind");
        };
        assert_eq!(
            message,
            "unknown kind `oidcclinet`; use oidcclient, branding, identityprovider or \
             organization (or oidcc, nbrand, nidp or norg)"
        );
        for kind in Kind::ALL {
            let crd = std::fs::read_to_string(format!(
                "{}/../deploy/crds/{}.nauthera.io.yaml",
                env!("CARGO_MANIFEST_DIR"),
                kind.plural()
            ))
            .unwrap();
            assert!(
                crd.contains(&format!("- {}\n", kind.short_name())),
                "{kind}'s CRD lacks the short name {}",
                kind.short_name()
            );
        }
    }

    #[test]
    fn targets_parse() {
        assert_eq!(
            Target::parse("oidcc/shop").unwrap(),
            Target {
                kind: Kind::OIDCClient,
                name: Some("shop".into())
            }
        );
        assert_eq!(Target::parse("norg").unwrap().name, None);
        assert!(Target::parse("oidcclient/").is_err());
        assert!(Target::parse("oidcclient/a/b").is_err());
        assert!(Target::parse_named("branding").is_err());
    }
}
