//! `kubectl-nauthera`: the kubectl plugin of nauthera (`kubectl nauthera status|restore|diagnose`).
//!
//! `main` only parses the command line and turns the outcome into an exit code: 0 when all is
//! good, 1 when something needs attention, 2 on an error. A closed pipe (`| head`) is a clean exit.
//!
//! The plugin is made of its verbs (`commands`, one room each), the command line they share
//! (`cli`), cluster access (`cluster`: the client and every read), the plain values and the
//! judgements over them that more than one verb uses (`model`), and how results are written
//! (`output`).

mod cli;
mod cluster;
mod commands;
mod error;
mod model;
mod output;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;
use crate::error::CliError;

/// What a command found, for the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Everything is as it should be (exit 0).
    AllGood,
    /// Something needs a person's attention (exit 1).
    Attention,
}

impl Outcome {
    pub fn from_attention(attention: bool) -> Self {
        if attention {
            Outcome::Attention
        } else {
            Outcome::AllGood
        }
    }
}

/// The exit code of an error.
const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match try_main(cli) {
        Ok(Outcome::AllGood) => ExitCode::SUCCESS,
        Ok(Outcome::Attention) => ExitCode::from(1),
        Err(error) if error.is_broken_pipe() => ExitCode::SUCCESS,
        Err(error) => {
            // Writing to a closed stderr can fail too; there is nobody left to tell.
            let _ = writeln!(std::io::stderr(), "error: {error}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn try_main(cli: Cli) -> Result<Outcome, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)?;
    runtime.block_on(commands::run(cli))
}
