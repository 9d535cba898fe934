use clap::Parser;

use super::*;
use crate::cli::{Cli, Command};

fn parsed(argv: &[&str]) -> (GlobalArgs, ExportArgs) {
    let mut full = vec!["kubectl-nauthera"];
    full.extend_from_slice(argv);
    let cli = Cli::try_parse_from(full).unwrap();
    match cli.command {
        Command::Export(args) => (cli.global, args),
        other => panic!("an export: {other:?}"),
    }
}

#[test]
fn the_export_runs_in_the_reconciler_pod_with_its_flags_passed_through() {
    let (global, args) = parsed(&[
        "export",
        "-n",
        "team-a",
        "--organization",
        "acme",
        "--manage",
        "--secrets",
        "secret-ref",
        "--organization-namespace",
        "platform",
        "--output-file",
        "out.yaml",
        "--context",
        "prod",
        "--as",
        "jane",
    ]);
    assert_eq!(
        exec_args(&global, &args, "nauthera-reconciler").join(" "),
        "--context prod --as jane exec -n nauthera-system deploy/nauthera-reconciler \
         -c reconciler -- nauthera-reconciler export --namespace team-a --organization acme \
         --manage --secrets secret-ref --organization-namespace platform"
    );
}

#[test]
fn without_a_namespace_every_namespace_is_exported_and_observe_is_the_default() {
    let (global, args) = parsed(&["export", "--reconciler-namespace", "ops"]);
    assert_eq!(
        exec_args(&global, &args, "nauthera-reconciler-team-a").join(" "),
        "exec -n ops deploy/nauthera-reconciler-team-a -c reconciler -- nauthera-reconciler \
         export --secrets generate"
    );
    let (global, args) = parsed(&["export", "-A", "-n", "team-a"]);
    assert!(!exec_args(&global, &args, "x").contains(&"--namespace".to_owned()));
}

#[test]
fn the_output_file_is_written_here_never_in_the_pod() {
    let (global, args) = parsed(&["export", "--output-file", "/tmp/x.yaml"]);
    let argv = exec_args(&global, &args, "nauthera-reconciler");
    assert!(!argv.iter().any(|arg| arg.contains("output")), "{argv:?}");
}
