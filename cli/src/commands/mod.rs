//! One module per subcommand, each with a thin `run`.

mod adopt;
mod approve;
mod complete;
mod completion;
mod diagnose;
mod export;
mod restore;
mod rotate;
mod status;

use crate::Outcome;
use crate::cli::{Cli, Command};
use crate::error::CliError;

pub async fn run(cli: Cli) -> Result<Outcome, CliError> {
    match &cli.command {
        Command::Status(args) => status::run(&cli.global, args).await,
        Command::Diagnose(args) => diagnose::run(&cli.global, args).await,
        Command::Restore(args) => restore::run(&cli.global, args).await,
        Command::Adopt(args) => adopt::run(&cli.global, args).await,
        Command::Rotate(args) => rotate::run(&cli.global, args).await,
        Command::Approve(args) => approve::run(&cli.global, args).await,
        Command::Export(args) => export::run(&cli.global, args).await,
        Command::Completion(args) => completion::run(args),
        Command::Complete { words } => complete::run(&cli.global, words).await,
    }
}
