//! `kubectl-nauthera __complete -- WORDS...`: completions in the format kubectl expects from a
//! plugin's `kubectl_complete-nauthera` helper (one candidate a line, then `:<directive>`), so
//! that `kubectl nauthera <TAB>` completes subcommands, flags, kinds, names and namespaces.
//! Deciding what to complete is pure; only names and namespaces are read from the cluster.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

use crate::Outcome;
use crate::cli::kinds::Kind;
use crate::cli::{ColorChoice, GlobalArgs, Output, OutputFormat};
use crate::cluster::{Cluster, Scope};
use crate::error::CliError;
use crate::output;

/// Cobra's shell directives.
const NO_SPACE: u8 = 2;
const NO_FILE_COMPLETION: u8 = 4;
const DEFAULT: u8 = 0;

/// The command line's definition: subcommands and flags are completed from it, never retyped.
fn definition() -> clap::Command {
    let mut command = <crate::cli::Cli as clap::CommandFactory>::command();
    // Built, so that every subcommand carries the global flags.
    command.build();
    command
}

/// The values a flag of this type takes, as the command line spells them.
fn values<T: clap::ValueEnum>() -> Vec<String> {
    T::value_variants()
        .iter()
        .filter_map(|value| value.to_possible_value())
        .map(|value| value.get_name().to_owned())
        .collect()
}

/// The subcommands users type (not the hidden helpers).
fn subcommands(command: &clap::Command) -> Vec<String> {
    command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
        .map(|sub| sub.get_name().to_owned())
        .collect()
}

/// `--long` of every flag `command` takes, the global ones included.
fn long_flags(command: &clap::Command) -> Vec<String> {
    let mut flags: Vec<String> = command
        .get_arguments()
        .filter(|arg| !arg.is_positional() && !arg.is_hide_set())
        .filter_map(|arg| arg.get_long().map(|long| format!("--{long}")))
        .collect();
    flags.extend(["--help".to_owned(), "--version".to_owned()]);
    flags.dedup();
    flags
}

/// Whether `flag` (`-n`, `--namespace`) takes its value in the next word, in the root command
/// or any subcommand.
fn takes_value(command: &clap::Command, flag: &str) -> bool {
    value_name(command, flag).is_some()
}

/// The value name of `flag` (`-n`, `--namespace`) when it takes a value, in the root command or
/// any subcommand, as its definition gives it (`NAMESPACE`, `FILE`, ...).
fn value_name(command: &clap::Command, flag: &str) -> Option<String> {
    let matches = |arg: &&clap::Arg| {
        let long = flag
            .strip_prefix("--")
            .is_some_and(|long| arg.get_long() == Some(long));
        let short = flag
            .strip_prefix('-')
            .filter(|short| short.len() == 1)
            .is_some_and(|short| arg.get_short().map(String::from).as_deref() == Some(short));
        (long || short) && arg.get_action().takes_values()
    };
    let arg = command.get_arguments().find(matches).or_else(|| {
        command
            .get_subcommands()
            .find_map(|sub| sub.get_arguments().find(matches))
    })?;
    Some(
        arg.get_value_names()
            .and_then(|names| names.first())
            .map(ToString::to_string)
            .unwrap_or_default(),
    )
}

/// What the words call for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// Fixed candidates.
    Words(Vec<String>, u8),
    /// Names of a kind, as `kind/name`.
    Names(Kind),
    Namespaces,
    /// Let the shell complete file names.
    Files,
}

/// The connection flags among the words, for the lookups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Connection {
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
    pub namespace: Option<String>,
}

/// Decides what to complete for `words`, whose last one is being typed.
pub fn wanted(words: &[String]) -> (Wanted, Connection) {
    let (typed, done) = match words.split_last() {
        Some((last, done)) => (last.as_str(), done),
        None => ("", &[][..]),
    };
    let command = definition();
    let names = subcommands(&command);
    let (connection, subcommand) = read_typed(&command, &names, done);
    let words = |items: &[&str], directive: u8| {
        Wanted::Words(
            items
                .iter()
                .filter(|item| item.starts_with(typed))
                .map(|item| (*item).to_owned())
                .collect(),
            directive,
        )
    };
    let previous = done.last().map(String::as_str);
    let wanted = match previous {
        Some("-o" | "--output") => {
            let formats = values::<OutputFormat>();
            words(
                &formats.iter().map(String::as_str).collect::<Vec<_>>(),
                NO_FILE_COMPLETION,
            )
        }
        Some("--color") => {
            let choices = values::<ColorChoice>();
            words(
                &choices.iter().map(String::as_str).collect::<Vec<_>>(),
                NO_FILE_COMPLETION,
            )
        }
        // What a flag takes, from its definition's value name.
        Some(flag) if flag.starts_with('-') && takes_value(&command, flag) => {
            match value_name(&command, flag).as_deref() {
                Some("NAMESPACE") => Wanted::Namespaces,
                Some("FILE") => Wanted::Files,
                _ => Wanted::Words(Vec::new(), NO_FILE_COMPLETION),
            }
        }
        _ if typed.starts_with('-') => {
            let flags = match subcommand.and_then(|name| command.find_subcommand(name)) {
                Some(sub) => long_flags(sub),
                None => long_flags(&command),
            };
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            words(&flags, NO_FILE_COMPLETION)
        }
        _ => match subcommand {
            None => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                words(&names, NO_FILE_COMPLETION)
            }
            Some("completion") => words(
                &["bash", "zsh", "fish", "elvish", "powershell"],
                NO_FILE_COMPLETION,
            ),
            Some(name) => match typed.split_once('/') {
                Some((kind, _)) => match crate::cli::kinds::parse_kind(kind) {
                    Ok(kind) if approvable(name, kind) => Wanted::Names(kind),
                    _ => Wanted::Words(Vec::new(), NO_FILE_COMPLETION),
                },
                // Every name a kind is taken by: singular, plural and short names.
                None => {
                    let kinds: Vec<String> = Kind::ALL
                        .iter()
                        .filter(|kind| approvable(name, **kind))
                        .flat_map(|kind| kind.names())
                        .map(|name| format!("{name}/"))
                        .collect();
                    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
                    words(&kinds, NO_SPACE | NO_FILE_COMPLETION)
                }
            },
        },
    };
    (wanted, connection)
}

/// What the words typed before the last say: the connection flags, and the subcommand among
/// `names`.
fn read_typed<'a>(
    command: &clap::Command,
    names: &'a [String],
    done: &[String],
) -> (Connection, Option<&'a str>) {
    let mut connection = Connection::default();
    let mut subcommand: Option<&str> = None;
    let mut index = 0;
    while index < done.len() {
        let word = done[index].as_str();
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) if word.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (word, None),
        };
        if flag.starts_with('-') && takes_value(command, flag) {
            let value = inline.or_else(|| done.get(index + 1).cloned());
            if !word.contains('=') {
                index += 1;
            }
            match flag {
                "--kubeconfig" => connection.kubeconfig = value,
                "--context" => connection.context = value,
                "-n" | "--namespace" => connection.namespace = value,
                _ => {}
            }
        } else if !word.starts_with('-') && subcommand.is_none() {
            subcommand = names.iter().map(String::as_str).find(|name| *name == word);
        }
        index += 1;
    }
    (connection, subcommand)
}

/// `approve` takes OIDCClients only; the other subcommands every kind.
/// Whether the subcommand takes a resource of this kind: approvals and rotations are for
/// OIDCClients only.
fn approvable(subcommand: &str, kind: Kind) -> bool {
    !matches!(subcommand, "approve" | "rotate") || kind == Kind::OidcClient
}

/// The completion output: candidates that start with what is typed, then the directive.
pub fn format(candidates: &[String], typed: &str, directive: u8) -> String {
    let mut out = String::new();
    for candidate in candidates.iter().filter(|c| c.starts_with(typed)) {
        out.push_str(candidate);
        out.push('\n');
    }
    out.push_str(&format!(":{directive}\n"));
    out
}

pub async fn run(global: &GlobalArgs, words: &[String]) -> Result<Outcome, CliError> {
    let typed = words.last().map(String::as_str).unwrap_or("");
    let (wanted, connection) = wanted(words);
    let (candidates, directive) = match wanted {
        Wanted::Words(words, directive) => (words, directive),
        Wanted::Files => (Vec::new(), DEFAULT),
        Wanted::Names(kind) => (
            lookup_names(global, &connection, kind).await,
            NO_FILE_COMPLETION,
        ),
        Wanted::Namespaces => (
            lookup_namespaces(global, &connection).await,
            NO_FILE_COMPLETION,
        ),
    };
    output::print(&format(&candidates, typed, directive))?;
    Ok(Outcome::AllGood)
}

fn connection_args(global: &GlobalArgs, connection: &Connection) -> GlobalArgs {
    GlobalArgs {
        kubeconfig: connection
            .kubeconfig
            .clone()
            .map(Into::into)
            .or_else(|| global.kubeconfig.clone()),
        context: connection
            .context
            .clone()
            .or_else(|| global.context.clone()),
        namespace: connection
            .namespace
            .clone()
            .or_else(|| global.namespace.clone()),
        all_namespaces: false,
        output: Output::of(OutputFormat::Table),
        color: ColorChoice::Never,
        ..global.clone()
    }
}

/// Names are a convenience: any failure completes nothing.
async fn lookup_names(global: &GlobalArgs, connection: &Connection, kind: Kind) -> Vec<String> {
    let Ok(cluster) = Cluster::connect(&connection_args(global, connection)).await else {
        return Vec::new();
    };
    let scope = Scope::Namespace(cluster.namespace.clone());
    match cluster.list_kind(kind, &scope).await {
        Ok(Some(views)) => views
            .iter()
            .map(|view| format!("{}/{}", kind.singular(), view.name))
            .collect(),
        _ => Vec::new(),
    }
}

async fn lookup_namespaces(global: &GlobalArgs, connection: &Connection) -> Vec<String> {
    let Ok(cluster) = Cluster::connect(&connection_args(global, connection)).await else {
        return Vec::new();
    };
    let api: Api<Namespace> = Api::all(cluster.client.clone());
    api.list(&ListParams::default())
        .await
        .map(|list| {
            list.items
                .into_iter()
                .filter_map(|namespace| namespace.metadata.name)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        let mut words: Vec<String> = line.split(' ').map(str::to_owned).collect();
        if line.is_empty() {
            words = vec![String::new()];
        }
        words
    }

    fn fixed(line: &str) -> (Vec<String>, u8) {
        match wanted(&words(line)).0 {
            Wanted::Words(words, directive) => (words, directive),
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn subcommands_flags_and_values() {
        assert_eq!(
            fixed("").0,
            vec![
                "status",
                "diagnose",
                "restore",
                "adopt",
                "rotate",
                "approve",
                "export",
                "completion"
            ]
        );
        assert_eq!(fixed("ap").0, vec!["approve"]);
        assert!(fixed("export --ma").0.contains(&"--manage".to_owned()));
        assert_eq!(fixed("ad").0, vec!["adopt"]);
        assert!(fixed("adopt --").0.contains(&"--keep-secret".to_owned()));
        assert!(fixed("approve --g").0.contains(&"--generation".to_owned()));
        assert_eq!(fixed("st").0, vec!["status"]);
        assert_eq!(
            fixed("status -o ").0,
            vec!["table", "wide", "json", "yaml", "name"]
        );
        assert_eq!(fixed("status -o j").0, vec!["json"]);
        assert!(fixed("restore --d").0.contains(&"--dry-run".to_owned()));
        assert!(!fixed("status --d").0.contains(&"--dry-run".to_owned()));
        assert_eq!(fixed("completion b").0, vec!["bash"]);
        // The connection flags come from the command line's definition.
        for flag in [
            "--as",
            "--as-group",
            "--request-timeout",
            "--cluster",
            "--user",
        ] {
            assert!(fixed("status --").0.contains(&flag.to_owned()), "{flag}");
        }
        assert_eq!(fixed("status --request-timeout ").0, Vec::<String>::new());
        let (_, connection) = wanted(&words("--as jane -n team-a status "));
        assert_eq!(connection.namespace.as_deref(), Some("team-a"));
    }

    #[test]
    fn kinds_then_names_then_namespaces() {
        let (kinds, directive) = fixed("diagnose o");
        assert_eq!(
            kinds,
            vec![
                "oidcclient/",
                "oidcclients/",
                "oidcc/",
                "organization/",
                "organizations/",
                "org/"
            ]
        );
        assert_eq!(directive, NO_SPACE | NO_FILE_COMPLETION);
        for (typed, kind) in [
            ("nbr", "nbrand/"),
            ("nid", "nidp/"),
            ("nor", "norg/"),
            ("id", "idp/"),
        ] {
            assert!(
                fixed(&format!("status {typed}"))
                    .0
                    .contains(&kind.to_owned()),
                "{typed}"
            );
        }
        assert_eq!(fixed("status br").0, vec!["branding/", "brandings/", "br/"]);
        // Only OIDCClients are approved.
        assert_eq!(
            fixed("approve o").0,
            vec!["oidcclient/", "oidcclients/", "oidcc/"]
        );
        assert_eq!(fixed("approve br/").0, Vec::<String>::new());
        assert_eq!(
            wanted_of("-n team-a approve oidcc/sh"),
            Wanted::Names(Kind::OidcClient)
        );
        let (names, _) = wanted(&words("restore idp/gi"));
        assert_eq!(names, Wanted::Names(Kind::IdentityProvider));
        let (names, connection) = wanted(&words("-n team-a restore oidcc/sh"));
        assert_eq!(names, Wanted::Names(Kind::OidcClient));
        assert_eq!(connection.namespace.as_deref(), Some("team-a"));
        assert_eq!(wanted_of("status --namespace "), Wanted::Namespaces);
        assert_eq!(wanted_of("diagnose -f "), Wanted::Files);
        // From the flags' definitions: every namespace flag, every file flag.
        assert_eq!(
            wanted_of("status --reconciler-namespace "),
            Wanted::Namespaces
        );
        assert_eq!(wanted_of("status -n "), Wanted::Namespaces);
        assert_eq!(wanted_of("status --kubeconfig "), Wanted::Files);
        assert_eq!(wanted_of("diagnose --filename "), Wanted::Files);
        assert_eq!(
            wanted_of("status --context "),
            Wanted::Words(Vec::new(), NO_FILE_COMPLETION)
        );
        let (_, connection) = wanted(&words("--context=prod --kubeconfig /k status "));
        assert_eq!(connection.context.as_deref(), Some("prod"));
        assert_eq!(connection.kubeconfig.as_deref(), Some("/k"));
    }

    fn wanted_of(line: &str) -> Wanted {
        wanted(&words(line)).0
    }

    #[test]
    fn the_output_filters_and_ends_with_the_directive() {
        let names = vec!["oidcclient/shop".to_owned(), "oidcclient/web".to_owned()];
        assert_eq!(format(&names, "oidcclient/s", 4), "oidcclient/shop\n:4\n");
        assert_eq!(format(&[], "", 0), ":0\n");
    }
}
