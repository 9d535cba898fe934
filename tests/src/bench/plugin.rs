//! `kubectl nauthera status -A` against `kubectl get oidcclients -A`, in table and JSON form, on
//! the same emulator: each command run in turn, several times, under the measuring wrapper.

use std::path::Path;

use super::measure::{Usage, measured, median};
use super::report::{CommandFigures, PluginRatio, PluginReport, ratio};
use crate::binaries::Binary;
use crate::e2e::kubectl;

/// What runs a command: kubectl (which execs the plugin for `kubectl nauthera`), or the plugin's
/// binary alone, without kubectl's own start-up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Program {
    Kubectl,
    PluginAlone,
}

/// One command the comparison runs.
struct Command {
    label: &'static str,
    format: &'static str,
    program: Program,
    args: &'static [&'static str],
}

const COMMANDS: [Command; 6] = [
    Command {
        label: "kubectl nauthera status -A",
        format: "table",
        program: Program::Kubectl,
        args: &["nauthera", "status", "-A"],
    },
    Command {
        label: "kubectl-nauthera status -A (alone)",
        format: "table",
        program: Program::PluginAlone,
        args: &["status", "-A"],
    },
    Command {
        label: "kubectl get oidcclients -A",
        format: "table",
        program: Program::Kubectl,
        args: &["get", "oidcclients", "-A"],
    },
    Command {
        label: "kubectl nauthera status -A -o json",
        format: "json",
        program: Program::Kubectl,
        args: &["nauthera", "status", "-A", "-o", "json"],
    },
    Command {
        label: "kubectl-nauthera status -A -o json (alone)",
        format: "json",
        program: Program::PluginAlone,
        args: &["status", "-A", "-o", "json"],
    },
    Command {
        label: "kubectl get oidcclients -A -o json",
        format: "json",
        program: Program::Kubectl,
        args: &["get", "oidcclients", "-A", "-o", "json"],
    },
];

/// Runs the comparison on the cluster `kubeconfig` names; `home` keeps kubectl's discovery cache
/// between runs, as a user's does. One unmeasured round warms it first.
pub fn compare(
    bench_exe: &Path,
    kubeconfig: &Path,
    home: &Path,
    clients: usize,
    runs: usize,
) -> anyhow::Result<PluginReport> {
    let plugin = Binary::Plugin.path()?;
    let plugin_dir = plugin.parent().map(Path::to_path_buf).unwrap_or_default();
    let env = vec![
        (
            "PATH".to_owned(),
            format!(
                "{}:{}",
                plugin_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        ),
        ("HOME".to_owned(), home.display().to_string()),
        ("NO_COLOR".to_owned(), "1".to_owned()),
    ];
    let kubectl = kubectl();
    let run = |command: &Command| -> anyhow::Result<Usage> {
        let mut args: Vec<String> = command.args.iter().map(|a| (*a).to_owned()).collect();
        args.push("--kubeconfig".to_owned());
        args.push(kubeconfig.display().to_string());
        let program = match command.program {
            Program::Kubectl => &kubectl,
            Program::PluginAlone => &plugin,
        };
        measured(bench_exe, program, &args, &env)
    };
    for command in &COMMANDS {
        run(command)?;
    }
    let mut usages: Vec<Vec<Usage>> = vec![Vec::new(); COMMANDS.len()];
    for _ in 0..runs.max(1) {
        for (i, command) in COMMANDS.iter().enumerate() {
            usages[i].push(run(command)?);
        }
    }
    let commands: Vec<CommandFigures> = COMMANDS
        .iter()
        .zip(&usages)
        .map(|(command, usages)| figures(command, usages))
        .collect();
    let figures_of = |format: &str, program: Program, args_start: &str| {
        COMMANDS
            .iter()
            .position(|c| c.format == format && c.program == program && c.args[0] == args_start)
            .map(|i| commands[i].clone())
            .unwrap_or_default()
    };
    let mut ratios = Vec::new();
    for format in ["table", "json"] {
        let theirs = figures_of(format, Program::Kubectl, "get");
        for (plugin, ours) in [
            (
                "through kubectl",
                figures_of(format, Program::Kubectl, "nauthera"),
            ),
            ("alone", figures_of(format, Program::PluginAlone, "status")),
        ] {
            let measured = ours.failed_runs == 0 && theirs.failed_runs == 0;
            ratios.push(PluginRatio {
                format: format.to_owned(),
                plugin: plugin.to_owned(),
                cpu: ratio(ours.median_cpu_seconds, theirs.median_cpu_seconds).filter(|_| measured),
                peak_memory: ratio(ours.median_peak_kib as f64, theirs.median_peak_kib as f64)
                    .filter(|_| measured),
            });
        }
    }
    Ok(PluginReport {
        clients,
        runs: runs.max(1),
        commands,
        ratios,
        ..PluginReport::default()
    })
}

/// The medians of the runs that succeeded, and what the first failed run said.
fn figures(command: &Command, usages: &[Usage]) -> CommandFigures {
    // The plugin exits 1 when something needs attention; 2 and above are errors.
    let (succeeded, failed): (Vec<&Usage>, Vec<&Usage>) =
        usages.iter().partition(|u| (0..=1).contains(&u.exit_code));
    let values =
        |f: fn(&Usage) -> f64| median(&mut succeeded.iter().map(|u| f(u)).collect::<Vec<_>>());
    CommandFigures {
        command: command.label.to_owned(),
        format: command.format.to_owned(),
        median_cpu_seconds: values(|u| u.cpu_seconds),
        median_wall_seconds: values(|u| u.wall_seconds),
        median_peak_kib: values(|u| u.peak_kib as f64) as u64,
        failed_runs: failed.len(),
        first_failure: failed.first().map(|u| {
            if u.last_error_line.is_empty() {
                format!("exit code {}", u.exit_code)
            } else {
                format!("exit code {}: {}", u.exit_code, u.last_error_line)
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(cpu_seconds: f64, exit_code: i32, last_error_line: &str) -> Usage {
        Usage {
            cpu_seconds,
            wall_seconds: cpu_seconds,
            peak_kib: 1000,
            exit_code,
            stdout_bytes: 10,
            last_error_line: last_error_line.to_owned(),
        }
    }

    #[test]
    fn failed_runs_are_counted_apart_and_say_why() {
        let figures = figures(
            &COMMANDS[0],
            &[
                usage(1.0, 0, ""),
                usage(9.0, 2, "error: listing failed (410)"),
                usage(3.0, 1, "warning: attention"),
                usage(7.0, 2, "error: another"),
            ],
        );
        assert_eq!(figures.failed_runs, 2);
        // The median of the runs that succeeded only (the lower middle of 1 and 3).
        assert_eq!(figures.median_cpu_seconds, 1.0);
        assert_eq!(
            figures.first_failure.as_deref(),
            Some("exit code 2: error: listing failed (410)")
        );
        let clean = super::figures(&COMMANDS[0], &[usage(2.0, 0, "")]);
        assert_eq!((clean.failed_runs, clean.first_failure), (0, None));
    }
}
