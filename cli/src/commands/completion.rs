//! `kubectl nauthera completion bash|zsh|fish|...`: a completion script for the plugin binary.

use clap::CommandFactory;

use crate::Outcome;
use crate::cli::{Cli, CompletionArgs};
use crate::error::CliError;
use crate::output;

/// The binary's own name: the script completes `kubectl-nauthera ...` (the command line's
/// `bin_name` is `kubectl nauthera`, which shells cannot register).
const BIN_NAME: &str = "kubectl-nauthera";

pub fn run(args: &CompletionArgs) -> Result<Outcome, CliError> {
    output::print(&script(args.shell))?;
    Ok(Outcome::AllGood)
}

pub fn script(shell: clap_complete::Shell) -> String {
    let mut command = Cli::command();
    let mut buffer = Vec::new();
    clap_complete::generate(shell, &mut command, BIN_NAME, &mut buffer);
    String::from_utf8_lossy(&buffer).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_naming_the_subcommands() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let text = script(shell);
            assert!(text.contains("kubectl-nauthera"), "{shell}");
            for subcommand in ["status", "diagnose", "restore", "approve"] {
                assert!(text.contains(subcommand), "{shell} lacks {subcommand}");
            }
        }
    }
}
