//! The README's first command: the sandbox starts everything, applies the examples, prints how to
//! use it, looks like a real install to kubectl and the plugin while it runs, and leaves nothing
//! listening when it stops.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nauthera_tests::binaries::{Binary, workspace_root};
use nauthera_tests::e2e::kubectl;

/// The summary's last line: everything is up.
const READY_LINE: &str = "Ctrl-C stops everything.";
/// Building the binaries, then starting everything and registering the examples.
const START_TIMEOUT: Duration = Duration::from_secs(600);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn sandbox_starts_everything_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    // Built here, before the sandbox builds them too (a no-op then), so its folder is known.
    let plugin_dir = Binary::Plugin
        .path()
        .expect("the plugin builds")
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let sandbox = Command::new(env!("CARGO_BIN_EXE_nauthera-sandbox"))
        .arg("--dir")
        .arg(dir.path().join("sandbox"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sandbox starts");
    // Whatever fails below, the sandbox does not outlive the test.
    let mut sandbox = KillOnDrop(sandbox);
    let sandbox = &mut sandbox.0;
    let stderr = sandbox.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = BufReader::new(stderr).read_to_string(&mut text);
        text
    });
    let (lines, received) = mpsc::channel();
    let stdout = sandbox.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });

    // The summary, while the sandbox runs.
    let mut summary = String::new();
    let deadline = std::time::Instant::now() + START_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match received.recv_timeout(left) {
            Ok(line) => {
                summary.push_str(&line);
                summary.push('\n');
                if line.trim() == READY_LINE {
                    break;
                }
            }
            Err(_) => {
                let _ = sandbox.kill();
                let _ = sandbox.wait();
                panic!(
                    "the sandbox printed no summary:\n{summary}\n{}",
                    stderr.join().unwrap_or_default()
                );
            }
        }
    }
    let kubeconfig = summary
        .lines()
        .find_map(|l| l.trim().strip_prefix("export KUBECONFIG="))
        .map(PathBuf::from)
        .expect("the summary says where the kubeconfig is");
    let shell = Shell::new(&kubeconfig, &plugin_dir);
    let live = LiveChecks::run(&shell);

    // SIGTERM, as Ctrl-C would: the sandbox stops every child and ends successfully.
    let stopped = Command::new("kill")
        .arg(sandbox.id().to_string())
        .status()
        .expect("kill runs");
    assert!(stopped.success());
    let status = wait_with_timeout(sandbox, STOP_TIMEOUT);
    reader.join().unwrap();
    let rest: Vec<String> = received.try_iter().collect();
    let stdout = format!("{summary}{}", rest.join("\n"));
    let stderr = stderr.join().unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "the sandbox did not stop cleanly ({status:?}):\n{stdout}\n{stderr}"
    );
    live.assert_passed(&stdout, &stderr);

    for expected in [
        "kubectl get oidcclients -A",
        "kubectl nauthera status -A",
        "kubectl logs -n nauthera-system deploy/nauthera-reconciler",
        "export KUBECONFIG=",
    ] {
        assert!(
            stdout.contains(expected),
            "the summary lacks {expected:?}:\n{stdout}"
        );
    }
    assert!(dir.path().join("sandbox/kubeconfig").exists());
    // Every example of every kind registers: what depends on the Organization and the Branding
    // waited for them instead of being refused.
    for (kind, name) in [
        ("Organization", "acme"),
        ("Branding", "acme-sign-in"),
        ("IdentityProvider", "github"),
        ("OIDCClient", "billing-web"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(kind) && l.contains(name) && l.ends_with("Registered")),
            "{kind} {name} is not shown Registered:\n{stdout}"
        );
    }

    // Every address the summary announced is closed again: no process was left behind.
    let addresses: Vec<&str> = stdout
        .split_whitespace()
        .filter_map(|word| {
            let word = word
                .trim_start_matches("https://")
                .trim_start_matches("http://");
            let address = word.split('/').next()?;
            address.starts_with("127.0.0.1:").then_some(address)
        })
        .collect();
    assert!(
        addresses.len() >= 4,
        "the summary names every listener: {stdout}"
    );
    for address in addresses {
        assert!(
            std::net::TcpStream::connect(address).is_err(),
            "{address} still accepts connections after the sandbox stopped"
        );
    }
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// What the README's user runs against the live sandbox, and what it printed.
struct LiveChecks {
    status: Output,
    logs: Output,
    logs_tail: Output,
    pods: Output,
    apply: Output,
}

impl LiveChecks {
    fn run(shell: &Shell) -> LiveChecks {
        LiveChecks {
            status: shell.kubectl(&["nauthera", "status", "-A"]),
            logs: shell.kubectl(&[
                "logs",
                "-n",
                "nauthera-system",
                "deploy/nauthera-reconciler",
            ]),
            logs_tail: shell.kubectl(&[
                "logs",
                "-n",
                "nauthera-system",
                "deploy/nauthera-reconciler",
                "--tail=2",
            ]),
            pods: shell.kubectl(&[
                "get",
                "pods",
                "-n",
                "nauthera-system",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}",
            ]),
            apply: shell.kubectl(&[
                "apply",
                "-f",
                &workspace_root().join("examples").display().to_string(),
                "-R",
            ]),
        }
    }

    /// Checked once the sandbox stopped, so that a failure does not leave it running.
    fn assert_passed(&self, stdout: &str, stderr: &str) {
        let context = format!("the sandbox printed:\n{stdout}\n{stderr}");
        let status = text(&self.status);
        assert!(
            self.status.status.success(),
            "kubectl nauthera status -A failed ({}):\n{status}\n{context}",
            self.status.status
        );
        assert!(
            status.contains("1/1 ready, leader nauthera-reconciler-"),
            "the reconciler is not shown ready, led by its pod:\n{status}"
        );

        let logs = text(&self.logs);
        assert!(self.logs.status.success(), "kubectl logs failed:\n{logs}");
        let records: Vec<serde_json::Value> = String::from_utf8_lossy(&self.logs.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        assert!(
            records.iter().any(|r| r["message"] == "listening")
                && records.iter().any(|r| r["message"] == "reconciled"),
            "kubectl logs does not print the reconciler's log:\n{logs}"
        );
        let tail = String::from_utf8_lossy(&self.logs_tail.stdout);
        assert!(
            self.logs_tail.status.success() && tail.lines().count() == 2,
            "kubectl logs --tail=2:\n{}",
            text(&self.logs_tail)
        );

        let pods = String::from_utf8_lossy(&self.pods.stdout);
        let pod = pods.lines().next().unwrap_or_default();
        assert!(
            pods.lines().count() == 1
                && pod.starts_with("nauthera-reconciler-")
                && pod.ends_with(" Running"),
            "one running reconciler pod:\n{}",
            text(&self.pods)
        );
        let pod_name = pod.split_whitespace().next().unwrap_or_default();
        assert!(
            status.contains(&format!("leader {pod_name},")),
            "the leader is the pod {pod_name}:\n{status}"
        );

        let apply_err = String::from_utf8_lossy(&self.apply.stderr);
        assert!(
            self.apply.status.success() && !apply_err.to_lowercase().contains("warning"),
            "applying the examples again is not clean:\n{}",
            text(&self.apply)
        );
    }
}

/// A shell as the summary sets it up: its KUBECONFIG, the plugin's folder first on PATH, and a
/// HOME of its own so no user configuration leaks in.
struct Shell {
    kubeconfig: PathBuf,
    path: String,
    home: tempfile::TempDir,
}

impl Shell {
    fn new(kubeconfig: &Path, plugin_dir: &Path) -> Shell {
        Shell {
            kubeconfig: kubeconfig.to_path_buf(),
            path: format!(
                "{}:{}",
                plugin_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        let mut child = Command::new(kubectl())
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .env("HOME", self.home.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        // Read both pipes while waiting, so a long output cannot block kubectl.
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = out.read_to_end(&mut bytes);
            bytes
        });
        let err = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = err.read_to_end(&mut bytes);
            bytes
        });
        let status = wait_with_timeout(&mut child, Duration::from_secs(120))
            .unwrap_or_else(|| panic!("kubectl {args:?} did not end within two minutes"));
        Output {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        }
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Waits for the child up to `timeout`; kills it and answers `None` when it is still running.
fn wait_with_timeout(
    child: &mut std::process::Child,
    timeout: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
