//! The fake server's configuration: what it serves, whom it admits, and where it listens. The
//! binary reads it from YAML; tests build it in code.

use std::net::SocketAddr;
use std::path::PathBuf;

use nauthera_proto::v1::FapiMode;
use nauthera_shared::grants::{GrantEntry, Operation, WILDCARD};
use serde::{Deserialize, Serialize};

use crate::method::Method;

/// The FAPI mode of an organization, as the configuration spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FapiModeSetting {
    #[default]
    Off,
    Fapi1Advanced,
    Fapi2Security,
}

impl FapiModeSetting {
    pub fn to_proto(self) -> FapiMode {
        match self {
            FapiModeSetting::Off => FapiMode::Off,
            FapiModeSetting::Fapi1Advanced => FapiMode::Fapi1Advanced,
            FapiModeSetting::Fapi2Security => FapiMode::Fapi2Security,
        }
    }
}

/// An organization the server holds from the start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrganizationConfig {
    pub slug: String,
    pub issuer: String,
    #[serde(default)]
    pub display_name: String,
    #[serde(default)]
    pub fapi_mode: FapiModeSetting,
}

/// The configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FakeServerConfig {
    /// The gRPC address; port 0 picks a free port.
    #[serde(default = "loopback_any_port")]
    pub listen: SocketAddr,
    /// The control API's address (binary only); port 0 picks a free port.
    #[serde(default = "loopback_any_port")]
    pub control_listen: SocketAddr,
    /// Where the binary reads or writes certificates (binary only).
    #[serde(default)]
    pub certificate_dir: Option<PathBuf>,
    /// The DNS name in the server certificate the binary generates.
    #[serde(default = "default_server_name")]
    pub server_name: String,
    /// The identity of the client certificate the binary generates for the reconciler.
    #[serde(default = "default_client_identity")]
    pub client_identity: String,
    /// More client certificates the binary generates, one folder each under the client folder,
    /// so that several reconcilers authenticate as several identities.
    #[serde(default)]
    pub client_identities: Vec<ClientIdentityConfig>,
    /// What `ServerInfo.build` says.
    #[serde(default = "default_build")]
    pub build: String,
    #[serde(default)]
    pub organizations: Vec<OrganizationConfig>,
    /// Like `server.grpc.tls.allowed_clients`.
    #[serde(default)]
    pub allowed_clients: Vec<GrantEntry>,
    /// Methods answered with `Unimplemented`, to play an older server.
    #[serde(default)]
    pub unimplemented: Vec<Method>,
    /// How many changes `WatchChanges` can replay.
    #[serde(default = "default_change_history")]
    pub change_history: usize,
}

/// One more client certificate: its identity, written into `<client folder>/<label>/`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientIdentityConfig {
    /// The folder's name: lower-case letters, digits and '-' (for example `prod-us`).
    pub label: String,
    /// The certificate's SAN (`dns:`, `uri:` or `email:`), as `allowed_clients` lists it.
    pub identity: String,
}

fn loopback_any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn default_server_name() -> String {
    crate::pki::DEFAULT_SERVER_NAME.to_owned()
}

/// The identity the reconciler's certificate carries by default.
pub const DEFAULT_CLIENT_IDENTITY: &str = "dns:nauthera-operator.nauthera.svc";

fn default_client_identity() -> String {
    DEFAULT_CLIENT_IDENTITY.to_owned()
}

fn default_build() -> String {
    "nauthera-server 0.14.2 (fake)".to_owned()
}

fn default_change_history() -> usize {
    1000
}

/// The configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the configuration is not valid: {0}")]
    Parse(String),
    #[error("the configuration is not valid: {0}")]
    Invalid(String),
}

impl Default for FakeServerConfig {
    fn default() -> Self {
        FakeServerConfig {
            listen: loopback_any_port(),
            control_listen: loopback_any_port(),
            certificate_dir: None,
            server_name: default_server_name(),
            client_identity: default_client_identity(),
            client_identities: Vec::new(),
            build: default_build(),
            organizations: Vec::new(),
            allowed_clients: Vec::new(),
            unimplemented: Vec::new(),
            change_history: default_change_history(),
        }
    }
}

impl FakeServerConfig {
    /// Parses and checks YAML.
    pub fn from_yaml(text: &str) -> Result<FakeServerConfig, ConfigError> {
        let config: FakeServerConfig =
            serde_saphyr::from_str(text).map_err(|error| ConfigError::Parse(error.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads a YAML file.
    pub fn from_file(path: &std::path::Path) -> Result<FakeServerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        FakeServerConfig::from_yaml(&text)
    }

    /// Checks what serde cannot: unique slugs and issuers, prefixed identities.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (index, org) in self.organizations.iter().enumerate() {
            let earlier = &self.organizations[..index];
            if earlier.iter().any(|other| other.slug == org.slug) {
                return Err(ConfigError::Invalid(format!(
                    "organizations[{index}]: slug {} appears twice",
                    org.slug
                )));
            }
            if earlier.iter().any(|other| other.issuer == org.issuer) {
                return Err(ConfigError::Invalid(format!(
                    "organizations[{index}]: issuer {} appears twice",
                    org.issuer
                )));
            }
        }
        for (index, entry) in self.allowed_clients.iter().enumerate() {
            check_identity(
                &format!("allowed_clients[{index}].identity"),
                &entry.identity,
            )?;
        }
        for (index, client) in self.client_identities.iter().enumerate() {
            let place = format!("client_identities[{index}]");
            check_identity(&format!("{place}.identity"), &client.identity)?;
            let label = &client.label;
            let valid = !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-');
            if !valid {
                return Err(ConfigError::Invalid(format!(
                    "{place}.label {label:?} must be lower-case letters, digits and '-' (a folder name)"
                )));
            }
            if self.client_identities[..index]
                .iter()
                .any(|other| other.label == *label)
            {
                return Err(ConfigError::Invalid(format!(
                    "{place}: label {label} appears twice"
                )));
            }
        }
        Ok(())
    }

    /// A configuration for tests: one organization `acme` (issuer
    /// `https://login.example.com/acme`) and the default client identity granted everything.
    pub fn for_tests() -> FakeServerConfig {
        FakeServerConfig {
            organizations: vec![OrganizationConfig {
                slug: "acme".to_owned(),
                issuer: "https://login.example.com/acme".to_owned(),
                display_name: "Acme".to_owned(),
                fapi_mode: FapiModeSetting::Off,
            }],
            allowed_clients: vec![grant_everything(DEFAULT_CLIENT_IDENTITY)],
            ..FakeServerConfig::default()
        }
    }
}

/// Checks that an identity is a SAN as `allowed_clients` spells it.
fn check_identity(place: &str, identity: &str) -> Result<(), ConfigError> {
    if ["dns:", "uri:", "email:"]
        .iter()
        .any(|prefix| identity.starts_with(prefix))
    {
        Ok(())
    } else {
        Err(ConfigError::Invalid(format!(
            "{place} {identity:?} must start with dns:, uri: or email:"
        )))
    }
}

/// A grant of every operation on every organization and namespace.
pub fn grant_everything(identity: &str) -> GrantEntry {
    GrantEntry {
        identity: identity.to_owned(),
        operations: Operation::ALL.to_vec(),
        organizations: vec![WILDCARD.to_owned()],
        namespaces: vec![WILDCARD.to_owned()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_documented_config_parses() {
        let config = FakeServerConfig::from_yaml(
            r#"
listen: 127.0.0.1:0
control_listen: 127.0.0.1:0
certificate_dir: ./certs
client_identity: dns:nauthera-operator.nauthera.svc
organizations:
  - slug: acme
    issuer: https://login.example.com/acme
    fapi_mode: fapi2_security
allowed_clients:
  - identity: dns:nauthera-operator.nauthera.svc
    operations: [clients, brandings]
    organizations: ["*"]
    namespaces: [team-a]
unimplemented: [WatchChanges]
"#,
        )
        .unwrap();
        assert_eq!(
            config.organizations[0].fapi_mode,
            FapiModeSetting::Fapi2Security
        );
        assert_eq!(
            config.allowed_clients[0].operations,
            vec![Operation::Clients, Operation::Brandings]
        );
        assert_eq!(config.unimplemented, vec![Method::WatchChanges]);
        assert_eq!(config.change_history, 1000);
    }

    #[test]
    fn an_unprefixed_identity_is_refused_with_its_place() {
        let error = FakeServerConfig::from_yaml(
            "allowed_clients:\n  - identity: nauthera-operator\n    operations: [clients]\n",
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("allowed_clients[0].identity"),
            "{error}"
        );
    }

    #[test]
    fn more_client_identities_parse_and_are_checked() {
        let config = FakeServerConfig::from_yaml(
            "client_identities:\n  - label: prod-us\n    identity: dns:reconciler.prod-us.svc\n",
        )
        .unwrap();
        assert_eq!(
            config.client_identities,
            vec![ClientIdentityConfig {
                label: "prod-us".to_owned(),
                identity: "dns:reconciler.prod-us.svc".to_owned(),
            }]
        );
        assert!(FakeServerConfig::default().client_identities.is_empty());
        for (yaml, place) in [
            (
                "client_identities:\n  - label: a\n    identity: reconciler\n",
                "client_identities[0].identity",
            ),
            (
                "client_identities:\n  - label: ../up\n    identity: dns:a\n",
                "client_identities[0].label",
            ),
            (
                "client_identities:\n  - label: a\n    identity: dns:a\n  - label: a\n    identity: dns:b\n",
                "client_identities[1]",
            ),
        ] {
            let error = FakeServerConfig::from_yaml(yaml).unwrap_err();
            assert!(error.to_string().contains(place), "{yaml}: {error}");
        }
    }

    #[test]
    fn an_unknown_key_is_refused() {
        assert!(FakeServerConfig::from_yaml("listen_port: 1\n").is_err());
    }
}
