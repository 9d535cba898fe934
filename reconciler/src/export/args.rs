//! The export's command line: the reconciler's server flags (and their `NAUTHERA_*`
//! environment variables, so it runs as is in the reconciler's pod) and its own options.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::process::config::ServerArgs;

/// Writes manifests (Organizations, Brandings, IdentityProviders, OIDCClients) of what
/// nauthera-server holds within this reconciler's grant, as one YAML stream a team can commit.
/// No secret is ever exported. See docs/export.md.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "nauthera-reconciler export",
    bin_name = "nauthera-reconciler export",
    version,
    after_help = "Exit codes: 0 written; 2 a flag or setting cannot be used; 3 the server cannot \
                  be reached or the certificate files cannot be used; 4 the server refused the \
                  grant; 5 the server is older than the export; 1 anything else."
)]
pub struct ExportArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Export only objects declared in this namespace of this cluster (repeat for more); every
    /// namespace the grant covers when not set.
    #[arg(long = "namespace", value_name = "NS")]
    pub namespaces: Vec<String>,
    /// Export only objects of this organization slug (repeat for more); every organization the
    /// grant covers when not set.
    #[arg(long = "organization", value_name = "SLUG")]
    pub organizations: Vec<String>,
    /// Emit `managementPolicy: Manage` with `nauthera.io/adopt: <revision>` (and
    /// `nauthera.io/adopt-secret: Keep` where the object has a secret), so that applying the
    /// manifests adopts each object at the revision exported, writing nothing while it is
    /// unchanged. Without it: `managementPolicy: Observe`, no annotations.
    #[arg(long)]
    pub manage: bool,
    /// How a client's generated secret is declared: `generate` (`secret: {generate: true}`) or
    /// `secret-ref` (a `secretRef` to `<client>-client-secret`, key `clientSecret`, which the
    /// team fills). A client with a provided secret always gets such a `secretRef`.
    #[arg(long, value_enum, default_value_t = SecretsChoice::Generate, value_name = "HOW")]
    pub secrets: SecretsChoice,
    /// The namespace for Organizations the server holds that no manifest declared (created in
    /// the dashboard, say). Without it, exporting such an organization fails, naming this flag.
    #[arg(long, value_name = "NS")]
    pub organization_namespace: Option<String>,
    /// Write the manifests to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// How a client's generated secret appears in its manifest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum SecretsChoice {
    /// `secret: {generate: true}`: the server's generated secret, as it is made.
    #[default]
    Generate,
    /// A `secretRef` placeholder the team fills with the secret in force.
    SecretRef,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_flags_and_the_export_options_parse_together() {
        let args = ExportArgs::try_parse_from([
            "nauthera-reconciler export",
            "--server-address",
            "server:8443",
            "--tls-dir",
            "/tls",
            "--namespace",
            "team-a",
            "--namespace",
            "team-b",
            "--organization",
            "acme",
            "--manage",
            "--secrets",
            "secret-ref",
            "--organization-namespace",
            "platform",
            "--output",
            "out.yaml",
        ])
        .unwrap();
        assert_eq!(args.namespaces, ["team-a", "team-b"]);
        assert_eq!(args.organizations, ["acme"]);
        assert!(args.manage);
        assert_eq!(args.secrets, SecretsChoice::SecretRef);
        assert_eq!(args.organization_namespace.as_deref(), Some("platform"));
        assert_eq!(args.server.server_address, "server:8443");
    }

    #[test]
    fn observe_and_generate_are_the_defaults() {
        let args = ExportArgs::try_parse_from([
            "nauthera-reconciler export",
            "--server-address",
            "server:8443",
        ])
        .unwrap();
        assert!(!args.manage);
        assert_eq!(args.secrets, SecretsChoice::Generate);
        assert!(args.output.is_none());
    }
}
