//! Writes the generated files (CRDs under `deploy/crds/`, runbook pages under `docs/runbooks/`),
//! or with `--check` lists the stale ones and exits 1.
//!
//! `cargo run -p nauthera-shared --bin nauthera-generate [-- --check] [-- --root DIR]`

use std::path::PathBuf;
use std::process::ExitCode;

use nauthera_shared::generate::{self, COMMAND};

const USAGE: &str = "usage: nauthera-generate [--check] [--root DIR]

Writes the CRDs under deploy/crds/ and the runbook pages under docs/runbooks/ from the code.
  --check     write nothing; list the stale files and exit 1 if there are any
  --root DIR  the repository root (default: the workspace this binary was built from)";

enum Mode {
    Write,
    Check,
}

fn main() -> ExitCode {
    match try_main() {
        Ok(code) => code,
        Err(message) => {
            eprintln!("nauthera-generate: {message}");
            ExitCode::from(2)
        }
    }
}

fn try_main() -> Result<ExitCode, String> {
    let mut mode = Mode::Write;
    // The crate sits one folder below the repository root.
    let mut root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => mode = Mode::Check,
            "--root" => {
                root = args
                    .next()
                    .map(PathBuf::from)
                    .ok_or("--root needs a folder")?;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    match mode {
        Mode::Check => {
            let stale = generate::stale_files(&root).map_err(|e| e.to_string())?;
            if stale.is_empty() {
                println!("generated files are up to date");
                return Ok(ExitCode::SUCCESS);
            }
            eprintln!("stale generated files:");
            for file in &stale {
                eprintln!("  {file}");
            }
            eprintln!("run `{COMMAND}` and commit the result");
            Ok(ExitCode::from(1))
        }
        Mode::Write => {
            let changed = generate::write_all(&root).map_err(|e| e.to_string())?;
            if changed.is_empty() {
                println!("generated files are up to date");
            }
            for file in &changed {
                println!("updated {file}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
