//! Writes every generated file, or with `--check` lists the stale ones and exits 1: the CRDs
//! under `deploy/crds/` and `charts/nauthera-reconciler/crds/` and the runbook pages under
//! `docs/runbooks/` (from the code and the catalog), then the GitOps files (each kind's Argo CD
//! `health_test.yaml` and `action_test.yaml` from its scripts and captured objects, the
//! `argocd-cm` component, the reason table of `docs/gitops.md`).
//!
//! `cargo run -p nauthera-tests --bin nauthera-generate [-- --check] [-- --root DIR]`

use std::process::ExitCode;

use nauthera_shared::catalog::GENERATE_COMMAND;
use nauthera_shared::generate;
use nauthera_tests::gitops;

const USAGE: &str = "usage: nauthera-generate [--check] [--root DIR]

Writes the CRDs, the runbook pages and the GitOps files generated from the code, the catalog and
the captured objects.
  --check     write nothing; list the stale files and exit 1 if there are any
  --root DIR  the repository root (default: the workspace this binary was built from)";

fn main() -> ExitCode {
    let mut check = false;
    let mut root = gitops::root();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--root" => match args.next() {
                Some(dir) => root = dir.into(),
                None => {
                    eprintln!("nauthera-generate: --root needs a folder\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("nauthera-generate: unknown argument `{other}`\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let result = if check { stale(&root) } else { write(&root) };
    match result {
        Ok(paths) if paths.is_empty() => {
            println!("generated files are up to date");
            ExitCode::SUCCESS
        }
        Ok(paths) if check => {
            eprintln!("stale generated files:");
            for path in &paths {
                eprintln!("  {path}");
            }
            eprintln!("run `{GENERATE_COMMAND}` and commit the result");
            ExitCode::FAILURE
        }
        Ok(paths) => {
            for path in &paths {
                println!("updated {path}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("nauthera-generate: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// The files that differ from what would be generated, in the order they are generated.
fn stale(root: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let mut paths: Vec<String> = generate::stale_files(root)?
        .iter()
        .map(ToString::to_string)
        .collect();
    paths.extend(
        gitops::stale(root)?
            .into_iter()
            .map(|file| file.path.display().to_string()),
    );
    Ok(paths)
}

/// Writes what changed: the catalog's files first, since the GitOps files read the catalog.
fn write(root: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let mut paths: Vec<String> = generate::write_all(root)?
        .iter()
        .map(ToString::to_string)
        .collect();
    paths.extend(
        gitops::write_all(root)?
            .into_iter()
            .map(|path| path.display().to_string()),
    );
    Ok(paths)
}
