//! How users name the kinds on the command line (`oidcclient/shop`, `oidcc`, `brandings`,
//! `norg/acme`, ...); the kinds and their names are the shared table of kinds.

use crate::error::CliError;

pub use nauthera_shared::kinds::Kind;

/// A kind by any of its names, case-insensitive, with or without `.nauthera.io`.
pub fn parse_kind(text: &str) -> Result<Kind, CliError> {
    Kind::named(text).ok_or_else(|| CliError::Usage(format!("unknown kind `{text}`; {}", usage())))
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
                kind: parse_kind(kind)?,
                name: Some(name.to_owned()),
            }),
            Some(_) => Err(CliError::Usage(format!(
                "`{text}` is not KIND/NAME; write it like oidcclient/shop"
            ))),
            None => Ok(Target {
                kind: parse_kind(text)?,
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
                assert_eq!(parse_kind(name).unwrap(), kind);
            }
        }
        assert_eq!(
            parse_kind("oidcclients.nauthera.io").unwrap(),
            Kind::OidcClient
        );
        assert!(parse_kind("pods").is_err());
    }

    /// A misspelt kind is answered with names kubectl knows: the CRDs' short names, as
    /// deploy/crds declares them, not the plugin's own abbreviations.
    #[test]
    fn an_unknown_kind_suggests_the_crds_short_names() {
        let Err(CliError::Usage(message)) = parse_kind("oidcclinet") else {
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
                kind: Kind::OidcClient,
                name: Some("shop".into())
            }
        );
        assert_eq!(Target::parse("norg").unwrap().name, None);
        assert!(Target::parse("oidcclient/").is_err());
        assert!(Target::parse("oidcclient/a/b").is_err());
        assert!(Target::parse_named("branding").is_err());
    }
}
