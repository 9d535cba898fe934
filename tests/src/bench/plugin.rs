//! `kubectl nauthera status -A` against `kubectl get oidcclients -A`, in table and JSON form, on
//! the same emulator: each command run in turn, several times, under the measuring wrapper.

use std::path::Path;

use super::measure::{Usage, measured, median};
use super::report::{CommandFigures, PluginRatio, PluginReport};
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
            ratios.push(PluginRatio {
                format: format.to_owned(),
                plugin: plugin.to_owned(),
                cpu: ours.median_cpu_seconds / theirs.median_cpu_seconds.max(f64::MIN_POSITIVE),
                peak_memory: ours.median_peak_kib as f64 / theirs.median_peak_kib.max(1) as f64,
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

fn figures(command: &Command, usages: &[Usage]) -> CommandFigures {
    let values = |f: fn(&Usage) -> f64| median(&mut usages.iter().map(f).collect::<Vec<_>>());
    CommandFigures {
        command: command.label.to_owned(),
        format: command.format.to_owned(),
        median_cpu_seconds: values(|u| u.cpu_seconds),
        median_wall_seconds: values(|u| u.wall_seconds),
        median_peak_kib: values(|u| u.peak_kib as f64) as u64,
        // The plugin exits 1 when something needs attention; 2 and above are errors.
        failed_runs: usages
            .iter()
            .filter(|u| !(0..=1).contains(&u.exit_code))
            .count(),
    }
}
