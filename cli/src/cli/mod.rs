//! The command line, as kubectl users expect it: the connection flags and `-o` work before or
//! after the subcommand. How users name kinds and resources (`oidcc/shop`) is [`kinds`].

pub mod kinds;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Status, restore, adoption and diagnosis of nauthera resources (OIDCClient, Branding,
/// IdentityProvider, Organization) and of the reconciler that registers them; approvals of the
/// OIDCClients a ClientPolicy holds for approval.
#[derive(Debug, Parser)]
#[command(name = "kubectl-nauthera", bin_name = "kubectl nauthera", version)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The kubeconfig cluster to use (default: the context's).
    #[arg(long, global = true, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The kubeconfig user to use (default: the context's).
    #[arg(long, global = true, value_name = "NAME")]
    pub user: Option<String>,
    /// The API server's address, instead of the kubeconfig cluster's.
    #[arg(short = 's', long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// The name the API server's certificate must carry, instead of its address's host.
    #[arg(long, global = true, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// Do not check the API server's certificate (insecure).
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Act as this user (impersonation, as `kubectl --as`).
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Act with this group (repeat for several; as `kubectl --as-group`).
    #[arg(long = "as-group", global = true, value_name = "GROUP")]
    pub as_groups: Vec<String>,
    /// Act with this uid (as `kubectl --as-uid`).
    #[arg(long = "as-uid", global = true, value_name = "UID")]
    pub as_uid: Option<String>,
    /// How long one request to the API server may take (`30s`, `1m`); `0` waits without limit.
    #[arg(long, global = true, value_name = "DURATION", value_parser = nauthera_shared::duration::parse)]
    pub request_timeout: Option<Duration>,
    /// The namespace (default: the context's namespace).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Every namespace; wins over `-n`, as in kubectl.
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Output format: table, wide, json, yaml, name, or jsonpath=TEMPLATE (as kubectl).
    #[arg(
        short = 'o',
        long,
        global = true,
        value_parser = parse_output,
        default_value = "table",
        value_name = "FORMAT"
    )]
    pub output: Output,
    /// Tables without their headers: the resources' rows alone (as `kubectl get --no-headers`).
    #[arg(long, global = true)]
    pub no_headers: bool,
    /// When to use colours; `NO_COLOR` in the environment always turns them off.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// The namespace the reconciler runs in (where it publishes its state).
    #[arg(
        long,
        global = true,
        value_name = "NAMESPACE",
        env = "NAUTHERA_RECONCILER_NAMESPACE",
        default_value = "nauthera-system"
    )]
    pub reconciler_namespace: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// A table for people.
    Table,
    /// The table with more columns.
    Wide,
    /// The report as JSON (see the README for its shape).
    Json,
    /// The same report as YAML.
    Yaml,
    /// The resources' names alone, as `kind.nauthera.io/name` (as `kubectl get -o name`).
    Name,
    /// `jsonpath=TEMPLATE` over the JSON report, as `kubectl get -o jsonpath`.
    #[value(skip)]
    JsonPath,
}

/// What `-o` asks for: a format, and the template of `jsonpath=`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub format: OutputFormat,
    pub jsonpath: Option<crate::output::jsonpath::Template>,
}

impl Output {
    pub fn of(format: OutputFormat) -> Output {
        Output {
            format,
            jsonpath: None,
        }
    }
}

fn parse_output(text: &str) -> Result<Output, String> {
    if let Some(template) = text.strip_prefix("jsonpath=") {
        return Ok(Output {
            format: OutputFormat::JsonPath,
            jsonpath: Some(crate::output::jsonpath::Template::parse(template)?),
        });
    }
    <OutputFormat as ValueEnum>::from_str(text, true)
        .map(Output::of)
        .map_err(|_| {
            format!("`{text}` is not an output format; use table, wide, json, yaml, name or jsonpath=TEMPLATE")
        })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colours when standard output is a terminal.
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The control plane and every resource: phase, reason, revisions, grant check, summary.
    Status(StatusArgs),
    /// The runbook of a resource's reason, with live facts and each check run.
    Diagnose(DiagnoseArgs),
    /// Write the declared state back over drifted resources (the restore annotation).
    Restore(RestoreArgs),
    /// Take over an object the server holds that somebody else wrote (the adopt annotation).
    Adopt(AdoptArgs),
    /// Mint a new generated client secret for an OIDCClient (the rotate annotation).
    Rotate(RotateArgs),
    /// Approve a generation of an OIDCClient that a ClientPolicy holds for approval.
    Approve(ApproveArgs),
    /// Write manifests of what the server holds (through `kubectl exec` into the reconciler).
    Export(ExportArgs),
    /// Print a shell completion script.
    Completion(CompletionArgs),
    /// Completions for kubectl's plugin completion (`kubectl_complete-nauthera`).
    #[command(name = "__complete", hide = true)]
    Complete {
        /// The words after `kubectl nauthera`, the last one being typed.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  kubectl nauthera status -A                 every resource in every namespace
  kubectl nauthera status oidcclient/shop    one resource in the current namespace
  kubectl nauthera status -A -o json | jq '.resources[] | select(.grant.status == \"outside\")'

Exit codes: 0 all good, 1 something needs attention, 2 an error.")]
pub struct StatusArgs {
    /// KIND or KIND/NAME (oidcclient, branding, identityprovider, organization, or their short
    /// names); every kind when absent.
    pub target: Option<String>,
    /// After the report, print a row for each change, as `kubectl get -w`, until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  kubectl nauthera diagnose oidcclient/shop -n team-a
  kubectl nauthera diagnose --all -A
  kubectl nauthera diagnose -f client.yaml          check a manifest before applying it, also
                                                    against the ClientPolicies that cover it
  kubectl nauthera diagnose -f manifests/ -R        every manifest under a directory
  kustomize build . | kubectl nauthera diagnose -f - --local

Exit codes: 0 all good, 1 something needs attention, 2 an error.")]
pub struct DiagnoseArgs {
    /// KIND/NAME of the resource to diagnose.
    #[arg(conflicts_with_all = ["all", "file"])]
    pub target: Option<String>,
    /// Every resource in scope that is not Registered.
    #[arg(long, conflicts_with = "file")]
    pub all: bool,
    /// Check manifests before they are applied: a file, a directory (its .yaml, .yml and .json
    /// files), or `-` for standard input; repeat for several.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: Vec<PathBuf>,
    /// With -f: also the directories inside the directories named, as `kubectl apply -R`.
    #[arg(short = 'R', long, requires = "file")]
    pub recursive: bool,
    /// With -f: check only the files, without the cluster.
    #[arg(long, requires = "file")]
    pub local: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  kubectl nauthera restore oidcclient/shop -n team-a
  kubectl nauthera restore --all-drifted -A --dry-run
  kubectl nauthera restore --all-drifted -A --yes --timeout 5m

Exit codes: 0 all restored (or nothing to restore), 1 not restored (timeout, cancelled, dry run
with something to restore), 2 an error.")]
pub struct RestoreArgs {
    /// KIND/NAME of each resource to restore.
    #[arg(conflicts_with = "all_drifted")]
    pub targets: Vec<String>,
    /// Every drifted resource in scope.
    #[arg(long)]
    pub all_drifted: bool,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Show what would be written back and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long to wait for the resources to be restored (e.g. 90s, 2m).
    #[arg(long, value_parser = nauthera_shared::duration::parse, default_value = "2m")]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Only a resource whose reason is AdoptionRequired is adopted here: its manifest declares an
object the server already holds, last written by a person or a tool. The object is shown as the
status reports it (revision, writer, the fields the manifest changes), then nauthera.io/adopt is
set to that revision on the resource as it was shown (a change in between is a conflict, never
adopted blindly). The reconciler writes the declared state over exactly that revision, or nothing
when the manifest declares what the server holds, and records status.lastAdoption. A client with
spec.secret.generate gets a new secret minted and delivered unless --keep-secret
(nauthera.io/adopt-secret=Keep) keeps the one the server holds; a spec.secret.secretRef is sent,
or with --keep-secret taken to hold the secret in force. An observed resource (managementPolicy:
Observe) is handed over by setting managementPolicy: Manage instead.

Examples:
  kubectl nauthera adopt oidcclient/shop -n team-a --dry-run
  kubectl nauthera adopt oidcclient/shop -n team-a
  kubectl nauthera adopt oidcclient/shop -n team-a --keep-secret --yes --timeout 5m

Exit codes: 0 adopted, 1 not adopted (the object changed meanwhile, timeout, cancelled, dry run),
2 an error (refused: not waiting for adoption; a conflict: the resource changed after it was
shown)."
)]
pub struct AdoptArgs {
    /// KIND/NAME of the resource whose object to adopt.
    pub target: String,
    /// Keep the secret the server holds (nauthera.io/adopt-secret=Keep): no new client secret
    /// is minted; nothing is delivered until kubectl nauthera rotate.
    #[arg(long)]
    pub keep_secret: bool,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Show what the adoption would do and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long to wait for the reconciler to adopt the object (e.g. 90s, 2m).
    #[arg(long, value_parser = nauthera_shared::duration::parse, default_value = "2m")]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Only a client secret the server generates (spec.secret.generate: true) is
rotated here; one from spec.secret.secretRef is rotated by whoever holds that Secret. The
reconciler writes the new secret into the client's Secret, records the request in
status.lastRotation and removes the annotation; the workloads that read the Secret are named
with the command that restarts each.

Examples:
  kubectl nauthera rotate oidcclient/shop -n team-a
  kubectl nauthera rotate oidcclient/shop -n team-a --dry-run
  kubectl nauthera rotate oidcclient/shop -n team-a --yes --timeout 5m

Exit codes: 0 rotated, 1 not rotated (timeout, cancelled, dry run), 2 an error (refused: the
secret is not generated; the client is observed, waits for adoption, is drifted or is being deleted)."
)]
pub struct RotateArgs {
    /// oidcclient/NAME: the client whose generated secret to rotate.
    pub target: String,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Show what would change and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long to wait for the new secret to be delivered (e.g. 90s, 2m).
    #[arg(long, value_parser = nauthera_shared::duration::parse, default_value = "2m")]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Creates the ClientApproval <client>-<generation> in the client's namespace, which
the reconciler waits for when a ClientPolicy requires approvals. Only the security team's role
(ClusterRole nauthera-client-policy-admin) may create ClientApprovals.

Examples:
  kubectl nauthera diagnose oidcclient/shop -n team-a     what is waiting, and why
  kubectl nauthera approve oidcclient/shop -n team-a      approve its current generation
  kubectl nauthera approve oidcclient/shop -n team-a --generation 4

Exit codes: 0 approved (or already approved), 2 an error (not allowed, no such client)."
)]
pub struct ApproveArgs {
    /// oidcclient/NAME: the client to approve (only OIDCClients wait for approvals).
    pub target: String,
    /// The generation to approve (default: the client's current metadata.generation, as
    /// `kubectl nauthera diagnose` shows it).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub generation: Option<i64>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Runs `nauthera-reconciler export` in the reconciler's pod (kubectl exec -n
<reconciler namespace> deploy/nauthera-reconciler -c reconciler), where its certificate is, and
writes the manifests of what nauthera-server holds within the reconciler's grant: Organizations,
Brandings, IdentityProviders and OIDCClients, as one YAML stream to commit. No secret is ever
exported: a secret a manifest needs is a secretRef placeholder named in a comment above it. With
-n only that namespace's objects are exported; without it, every namespace the grant covers.
Needs `create pods/exec` in the reconciler's namespace. See docs/export.md.

Examples:
  kubectl nauthera export > nauthera.yaml                      observe everything
  kubectl nauthera export -n team-a --output-file team-a.yaml
  kubectl nauthera export --manage --organization-namespace platform

Exit codes: 0 written, 2 an error (no reconciler, exec not allowed, the export failed)."
)]
pub struct ExportArgs {
    /// Export only objects of this organization slug (repeat for more).
    #[arg(long = "organization", value_name = "SLUG")]
    pub organizations: Vec<String>,
    /// Emit managed manifests that adopt the revision exported (`nauthera.io/adopt`), keeping
    /// the secrets in force; default: `managementPolicy: Observe`.
    #[arg(long)]
    pub manage: bool,
    /// How a generated client secret is declared: `generate: true`, or a `secretRef`
    /// placeholder the team fills.
    #[arg(long, value_enum, default_value_t = ExportSecrets::Generate, value_name = "HOW")]
    pub secrets: ExportSecrets,
    /// The namespace of Organizations no manifest declared.
    #[arg(long, value_name = "NS")]
    pub organization_namespace: Option<String>,
    /// Write the manifests to this file instead of stdout (`-o` is the plugin's format flag).
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// The reconciler's shard: export through Deployment `nauthera-reconciler-<shard>`.
    #[arg(long, value_name = "NAME")]
    pub shard: Option<String>,
}

/// How `kubectl nauthera export` declares a generated client secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportSecrets {
    /// `secret: {generate: true}`.
    Generate,
    /// A `secretRef` placeholder to `<client>-client-secret`.
    SecretRef,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    pub shell: clap_complete::Shell,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_work_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "kubectl-nauthera",
            "status",
            "oidcclient/shop",
            "-n",
            "team-a",
            "-o",
            "json",
        ])
        .unwrap();
        assert_eq!(cli.global.namespace.as_deref(), Some("team-a"));
        assert_eq!(cli.global.output.format, OutputFormat::Json);
        let cli = Cli::try_parse_from([
            "kubectl-nauthera",
            "status",
            "-o",
            "jsonpath={.resources[*].name}",
        ])
        .unwrap();
        assert_eq!(cli.global.output.format, OutputFormat::JsonPath);
        assert!(Cli::try_parse_from(["kubectl-nauthera", "status", "-o", "jsonpath={.a"]).is_err());
        assert!(Cli::try_parse_from(["kubectl-nauthera", "status", "-o", "xml"]).is_err());
    }

    #[test]
    fn all_namespaces_and_a_namespace_are_both_accepted() {
        let cli = Cli::try_parse_from(["kubectl-nauthera", "status", "-n", "a", "-A"]).unwrap();
        assert!(cli.global.all_namespaces);
    }

    #[test]
    fn connection_flags_and_durations_read_as_kubectl_writes_them() {
        let cli = Cli::try_parse_from([
            "kubectl-nauthera",
            "restore",
            "oidcclient/web",
            "--as",
            "jane",
            "--as-group",
            "devs",
            "--as-group",
            "ops",
            "--request-timeout",
            "1m30s",
            "--timeout",
            "90s",
        ])
        .unwrap();
        assert_eq!(cli.global.as_user.as_deref(), Some("jane"));
        assert_eq!(cli.global.as_groups, ["devs", "ops"]);
        assert_eq!(cli.global.request_timeout, Some(Duration::from_secs(90)));
        let Command::Restore(restore) = cli.command else {
            panic!("a restore")
        };
        assert_eq!(restore.timeout, Duration::from_secs(90));
        assert!(
            Cli::try_parse_from(["kubectl-nauthera", "status", "--request-timeout", "soon"])
                .is_err()
        );
    }
}
