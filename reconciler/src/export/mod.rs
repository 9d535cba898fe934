//! `nauthera-reconciler export`: a one-shot run that lists what nauthera-server holds within
//! this reconciler's grant and writes it as manifests (docs/export.md). It takes the
//! reconciler's server flags and environment, so it runs where the certificate is (in the
//! reconciler's pod, through `kubectl nauthera export`). It only reads: no write reaches the
//! server or the cluster.
//!
//! `args` is its command line, `manifests` the pure conversion back into manifests; this file
//! is the I/O around them and the exit codes.

mod args;
mod manifests;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use nauthera_client::{AdminClient, CallError, ListError, Listing, list_all};
use nauthera_proto::v1;
use nauthera_shared::catalog::ServerReason;
use nauthera_shared::kinds::Kind;

use crate::process::config::{ConfigError, ServerSettings};
use args::ExportArgs;
use manifests::{Held, Options, kind_name};

/// The subcommand's name, the first argument that selects it.
pub const SUBCOMMAND: &str = "export";

/// How the export ended, as its exit code says.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// A flag or setting cannot be used.
    #[error("{0}")]
    Usage(String),
    /// The server cannot be reached, or the certificate files cannot be used.
    #[error("{0}")]
    Unreachable(String),
    /// The server refused the caller's identity or a filter outside its grant.
    #[error("{0}")]
    Refused(String),
    /// The server is older than the listings.
    #[error("{0}")]
    TooOld(String),
    /// Anything else: the output cannot be written, say.
    #[error("{0}")]
    Other(String),
}

impl Failure {
    fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            Failure::Other(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable(_) => 3,
            Failure::Refused(_) => 4,
            Failure::TooOld(_) => 5,
        })
    }
}

impl From<ConfigError> for Failure {
    fn from(error: ConfigError) -> Failure {
        Failure::Usage(error.to_string())
    }
}

/// Runs the export with the arguments after the binary's name (`export` first).
pub fn main(argv: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args = match ExportArgs::try_parse_from(argv) {
        Ok(args) => args,
        Err(error) => {
            // Help and version go to stdout with success, as clap prints them.
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("nauthera-reconciler export: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("nauthera-reconciler export: {failure}");
            failure.exit_code()
        }
    }
}

async fn run(args: ExportArgs) -> Result<(), Failure> {
    let ExportArgs {
        server,
        namespaces,
        organizations,
        manage,
        secrets,
        organization_namespace,
        output,
    } = args;
    let ServerSettings {
        connect,
        namespace_mapping,
        ..
    } = server.into_settings()?;
    for namespace in namespaces.iter().chain(&organization_namespace) {
        if !manifests::is_dns_label(namespace) {
            return Err(Failure::Usage(format!(
                "`{namespace}` is not a namespace name (--namespace, --organization-namespace): \
                 use up to 63 lower-case letters, digits and '-'"
            )));
        }
    }
    let client = AdminClient::connect(connect).await.map_err(|error| {
        Failure::Unreachable(format!(
            "{error}; check --server-address and the TLS files (--tls-dir), as for the reconciler"
        ))
    })?;
    let request = v1::ListObjectsRequest {
        organizations,
        namespaces: namespaces
            .iter()
            .map(|namespace| namespace_mapping.to_server(namespace))
            .collect(),
        ..Default::default()
    };
    let mut not_granted = Vec::new();
    let held = Held {
        organizations: listed(&client, &request, &mut not_granted).await?,
        brandings: listed(&client, &request, &mut not_granted).await?,
        identity_providers: listed(&client, &request, &mut not_granted).await?,
        clients: listed(&client, &request, &mut not_granted).await?,
    };
    let options = Options {
        manage,
        secrets,
        organization_namespace,
        mapping: namespace_mapping,
    };
    let exported =
        manifests::manifests(&held, &options).map_err(|error| Failure::Usage(error.to_string()))?;
    let yaml = manifests::render(&exported.manifests);
    match &output {
        Some(path) => std::fs::write(path, &yaml)
            .map_err(|error| Failure::Other(format!("cannot write {}: {error}", path.display())))?,
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(yaml.as_bytes())
                .and_then(|()| stdout.flush())
            {
                // A reader that stopped reading (`| head`) is not a failure of the export.
                Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(Failure::Other(format!("cannot write to stdout: {error}")));
                }
                _ => {}
            }
        }
    }
    for kind in &not_granted {
        eprintln!(
            "nauthera-reconciler export: no {} exported: the grant does not allow the operation \
             {}",
            kind_name(*kind),
            kind.operation().as_str()
        );
    }
    for problem in &exported.unconvertible {
        eprintln!("nauthera-reconciler export: left out {problem}");
    }
    eprintln!("{}", summary(&exported));
    Ok(())
}

/// Every object of kind `T` the request selects; none, noted in `not_granted`, when the grant
/// does not allow the kind's operation.
async fn listed<T: Listing>(
    client: &AdminClient,
    request: &v1::ListObjectsRequest,
    not_granted: &mut Vec<Kind>,
) -> Result<Vec<T>, Failure> {
    match list_all::<T>(client, request.clone()).await {
        Ok(objects) => Ok(objects),
        Err(ListError::Call(error))
            if error.reason() == Some(ServerReason::OperationNotGranted) =>
        {
            not_granted.push(T::KIND);
            Ok(Vec::new())
        }
        Err(error) => Err(failure(error)),
    }
}

/// What a failed listing means to the person running the export.
fn failure(error: ListError) -> Failure {
    match error {
        ListError::ServerTooOld { .. } => Failure::TooOld(error.to_string()),
        ListError::Call(CallError::Connect(error)) => Failure::Unreachable(format!(
            "{error}; check --server-address and the TLS files (--tls-dir), as for the reconciler"
        )),
        ListError::Call(CallError::Server(error)) => match error.reason {
            Some(ServerReason::IdentityNotAllowed) => Failure::Refused(format!(
                "the server refused this certificate's identity ({error}); list it in the \
                 server's allowed_clients, as for the reconciler"
            )),
            Some(ServerReason::OutsideGrant) => Failure::Refused(format!(
                "the server refused a filter outside the grant ({error}); name only \
                 organizations and namespaces the reconciler's grant covers"
            )),
            _ => Failure::Other(format!("the server refused the listing: {error}")),
        },
        ListError::RepeatedPageToken { .. } => Failure::Other(error.to_string()),
    }
}

/// The line on stderr after the manifests: how many of each kind, and what was left out.
fn summary(exported: &manifests::Exported) -> String {
    let count = |kind: Kind| {
        exported
            .manifests
            .iter()
            .filter(|manifest| manifest.kind == kind)
            .count()
    };
    let mut line = format!(
        "exported {} Organization(s), {} Branding(s), {} IdentityProvider(s), {} OIDCClient(s)",
        count(Kind::Organization),
        count(Kind::Branding),
        count(Kind::IdentityProvider),
        count(Kind::OidcClient),
    );
    if exported.other_clusters > 0 {
        line.push_str(&format!(
            "; skipped {} object(s) of other clusters' namespaces",
            exported.other_clusters
        ));
    }
    if !exported.unconvertible.is_empty() {
        line.push_str(&format!(
            "; left out {} object(s) this version cannot express",
            exported.unconvertible.len()
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use nauthera_client::{ConnectError, ConnectProblem, ServerError};

    use super::*;

    fn refused(code: tonic::Code, reason: ServerReason) -> ListError {
        ListError::Call(CallError::Server(ServerError {
            code,
            message: "refused".into(),
            reason: Some(reason),
            cause: None,
            violations: Vec::new(),
            generation_in_force: None,
            held_revision: None,
            metadata: Default::default(),
        }))
    }

    #[test]
    fn each_failure_has_its_exit_code_and_says_what_to_do() {
        let identity = failure(refused(
            tonic::Code::PermissionDenied,
            ServerReason::IdentityNotAllowed,
        ));
        assert!(matches!(identity, Failure::Refused(_)));
        assert!(
            identity.to_string().contains("allowed_clients"),
            "{identity}"
        );
        let outside = failure(refused(
            tonic::Code::PermissionDenied,
            ServerReason::OutsideGrant,
        ));
        assert!(outside.to_string().contains("grant covers"), "{outside}");
        assert_eq!(outside.exit_code(), ExitCode::from(4));

        let unreachable = failure(ListError::Call(CallError::Connect(
            ConnectError::Unreachable {
                address: "server:8443".into(),
                problem: ConnectProblem::Transport,
                cause: "connection refused".into(),
            },
        )));
        assert_eq!(unreachable.exit_code(), ExitCode::from(3));
        assert!(unreachable.to_string().contains("--server-address"));

        let older = failure(ListError::ServerTooOld {
            address: "server:8443".into(),
            method: "ListClients",
            feature: nauthera_client::LIST_OBJECTS_FEATURE,
        });
        assert_eq!(older.exit_code(), ExitCode::from(5));
        for failure in [identity, outside, unreachable, older] {
            assert_eq!(failure.to_string().lines().count(), 1, "{failure}");
        }
    }

    #[test]
    fn the_summary_counts_each_kind_and_what_was_left_out() {
        let exported = manifests::Exported {
            manifests: Vec::new(),
            other_clusters: 2,
            unconvertible: vec!["OIDCClient team-a/odd: ...".into()],
        };
        let line = summary(&exported);
        assert!(line.starts_with("exported 0 Organization(s)"), "{line}");
        assert!(line.contains("skipped 2 object(s) of other clusters' namespaces"));
        assert!(line.contains("left out 1 object(s)"));
    }
}
