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
    let plugin_dir = plugin_dir();
    let sandbox = Running::start(&dir.path().join("sandbox"), &[]);
    let kubeconfig = sandbox
        .summary
        .lines()
        .find_map(|l| l.trim().strip_prefix("export KUBECONFIG="))
        .map(PathBuf::from)
        .expect("the summary says where the kubeconfig is");
    let shell = Shell::new(&kubeconfig, &plugin_dir);
    let live = LiveChecks::run(&shell);
    let restarted = restart_after_kill(&shell, &sandbox.summary);

    let (status, stdout, stderr) = sandbox.stop();
    assert!(
        status.is_some_and(|s| s.success()),
        "the sandbox did not stop cleanly ({status:?}):\n{stdout}\n{stderr}"
    );
    live.assert_passed(&stdout, &stderr);
    assert!(
        restarted.is_ok(),
        "{}\n{stdout}\n{stderr}",
        restarted.unwrap_err()
    );
    assert!(
        stderr.contains("exited with code 137; restarting it (restart 1)"),
        "{stderr}"
    );

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
    assert_secret_files_private(&dir.path().join("sandbox"));
    assert_examples_registered(&stdout);

    assert_listeners_closed(&stdout, 4);
}

/// Kills the reconciler the summary names (SIGKILL): its Pod shows the exit and a restart, as
/// a kubelet would, and the restarted reconciler is shown ready again.
fn restart_after_kill(shell: &Shell, summary: &str) -> Result<(), String> {
    let pid = summary
        .split(", pid ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or_else(|| format!("the summary names no pid:\n{summary}"))?;
    let killed = Command::new("kill").args(["-9", pid]).status().unwrap();
    assert!(killed.success(), "kill -9 {pid}");
    let container = "{.items[0].status.containerStatuses[0]}";
    let deadline = std::time::Instant::now() + START_TIMEOUT;
    loop {
        let pod = shell.kubectl(&[
            "get",
            "pods",
            "-n",
            "nauthera-system",
            "-o",
            &format!("jsonpath={container}"),
        ]);
        let state: serde_json::Value = serde_json::from_slice(&pod.stdout).unwrap_or_default();
        if state["restartCount"] == 1
            && state["ready"] == true
            && state["lastState"]["terminated"]["exitCode"] == 137
        {
            break;
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("the Pod shows no restart: {state}\n{}", text(&pod)));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let status = shell.kubectl(&["nauthera", "status", "-A"]);
    let status = text(&status);
    if !status.contains("1/1 ready") {
        return Err(format!(
            "the restarted reconciler is not shown ready:\n{status}"
        ));
    }
    Ok(())
}

/// Every file in the sandbox folder that holds a token (the kubeconfigs) or a private key is
/// readable by its owner only (mode 0600), and the ones the sandbox always writes are there.
fn assert_secret_files_private(sandbox: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fn files(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, found);
            } else {
                found.push(path);
            }
        }
    }
    let mut all = Vec::new();
    files(sandbox, &mut all);
    let secret: Vec<&PathBuf> = all
        .iter()
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name == "kubeconfig"
                || name.ends_with(".kubeconfig")
                || name.ends_with(".key")
                || std::fs::read_to_string(path).is_ok_and(|text| text.contains("PRIVATE KEY-----"))
        })
        .collect();
    for expected in [
        "kubeconfig",
        "reconciler.kubeconfig",
        "certs/server.key",
        "certs/client/tls.key",
    ] {
        assert!(
            secret.contains(&&sandbox.join(expected)),
            "the sandbox folder lacks {expected}: {all:#?}"
        );
    }
    for path in secret {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode,
            0o600,
            "{} holds a token or a key but has mode {mode:o}",
            path.display()
        );
    }
}

/// `--clusters 2`: two emulators and two reconcilers with cluster names, their own managers and
/// identities, calling one server. Each cluster's examples register as their own objects on the
/// server (`prod-eu/nauthera-examples/...` and `prod-us/nauthera-examples/...`), each written by
/// its cluster's manager only; the plugin in each cluster names its cluster and finds every
/// resource inside the grant.
#[test]
fn sandbox_with_two_clusters_maps_each_clusters_namespaces_on_one_server() {
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = plugin_dir();
    let sandbox = Running::start(&dir.path().join("sandbox"), &["--clusters", "2"]);
    let summary = sandbox.summary.clone();
    let kubeconfigs: Vec<PathBuf> = summary
        .lines()
        .filter_map(|l| l.trim().strip_prefix("export KUBECONFIG="))
        .map(PathBuf::from)
        .collect();
    let control = summary
        .split_whitespace()
        .find_map(|word| word.strip_prefix("http://"))
        .map(|address| address.trim_end_matches(')').to_owned())
        .expect("the summary names the server's control API");
    let statuses: Vec<Output> = kubeconfigs
        .iter()
        .map(|kubeconfig| {
            Shell::new(kubeconfig, &plugin_dir).kubectl(&["nauthera", "status", "-A"])
        })
        .collect();
    let audit = http_get(&control, "/v1/audit");

    let (status, stdout, stderr) = sandbox.stop();
    let context = format!("the sandbox printed:\n{stdout}\n{stderr}");
    assert!(
        status.is_some_and(|s| s.success()),
        "the sandbox did not stop cleanly ({status:?}):\n{context}"
    );
    assert_eq!(
        kubeconfigs,
        [
            dir.path().join("sandbox/prod-eu/kubeconfig"),
            dir.path().join("sandbox/prod-us/kubeconfig")
        ],
        "a kubeconfig per cluster:\n{context}"
    );
    let clusters = [
        (
            "prod-eu",
            "nauthera-reconciler/prod-eu",
            "dns:nauthera-reconciler.nauthera-system.prod-eu.svc",
        ),
        (
            "prod-us",
            "nauthera-reconciler/prod-us",
            "dns:nauthera-reconciler.nauthera-system.prod-us.svc",
        ),
    ];
    for (name, manager, identity) in clusters {
        assert!(
            stdout.contains(&format!(
                "{identity}: {name}/nauthera-examples, {name}/team-a"
            )),
            "the summary lists {name}'s grant in the server's names:\n{context}"
        );
        assert!(
            stdout.contains(&format!("manager {manager}, identity {identity}")),
            "the summary names {name}'s manager and identity:\n{context}"
        );
    }
    // The first cluster declares the Organization; every example registers in both.
    let section = |name: &str| -> String {
        stdout
            .split(&format!("The examples in {name}:"))
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .unwrap_or_default()
            .to_owned()
    };
    for (name, _, _) in clusters {
        let examples = section(name);
        for (kind, example) in [
            ("Branding", "acme-sign-in"),
            ("IdentityProvider", "github"),
            ("OIDCClient", "billing-web"),
        ] {
            assert!(
                examples
                    .lines()
                    .any(|l| l.contains(kind) && l.contains(example) && l.ends_with("Registered")),
                "{kind} {example} is not shown Registered in {name}:\n{context}"
            );
        }
    }
    assert!(section("prod-eu").contains("Organization"), "{context}");
    assert!(!section("prod-us").contains("Organization"), "{context}");

    for ((name, _, identity), output) in clusters.iter().zip(&statuses) {
        let text = text(output);
        assert!(
            output.status.success(),
            "kubectl nauthera status -A in {name} failed ({}):\n{text}",
            output.status
        );
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("Cluster:") && l.contains(name)),
            "the plugin in {name} names its cluster:\n{text}"
        );
        assert!(
            text.contains(identity),
            "the plugin in {name} shows its identity:\n{text}"
        );
        assert!(
            !text.contains("outside the reconciler's grant"),
            "every resource in {name} is inside its grant:\n{text}"
        );
    }

    // On the server: one object per cluster for each example, each written by its own manager
    // and identity, none under the unmapped namespace.
    let (code, body) = audit.expect("the control API answers");
    assert_eq!(code, 200, "{body}");
    let events: Vec<serde_json::Value> = serde_json::from_str(&body).expect("the audit log");
    let applied: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| {
            e["outcome"] == "AUDIT_OUTCOME_APPLIED" && e["kind"] != "OBJECT_KIND_ORGANIZATION"
        })
        .collect();
    assert!(!applied.is_empty(), "no write recorded: {body}");
    for event in &applied {
        let namespace = event["namespace"].as_str().unwrap_or_default();
        let (name, manager, identity) = clusters
            .iter()
            .find(|(name, _, _)| namespace == format!("{name}/nauthera-examples"))
            .unwrap_or_else(|| panic!("a write outside the mapped namespaces: {event}"));
        assert_eq!(
            (event["manager"].as_str(), event["actor"].as_str()),
            (Some(*manager), Some(*identity)),
            "a write into {name}'s namespace by another reconciler: {event}"
        );
    }
    for (name, _, _) in clusters {
        assert!(
            applied.iter().any(|e| e["name"] == "billing-web"
                && e["namespace"] == format!("{name}/nauthera-examples")),
            "billing-web of {name} is an object of its own on the server: {body}"
        );
    }
    assert_listeners_closed(&stdout, 8);
}

/// Every address the summary announced is closed again: no process was left behind.
/// Every example of every kind is shown Registered in the sandbox's summary: what depends on the
/// Organization and the Branding waited for them instead of being refused.
fn assert_examples_registered(stdout: &str) {
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
}

fn assert_listeners_closed(stdout: &str, at_least: usize) {
    let addresses: Vec<&str> = stdout
        .split_whitespace()
        .filter_map(|word| {
            let word = word
                .trim_start_matches("https://")
                .trim_start_matches("http://");
            let address = word.split('/').next()?.trim_end_matches([')', ',']);
            address.starts_with("127.0.0.1:").then_some(address)
        })
        .collect();
    assert!(
        addresses.len() >= at_least,
        "the summary names every listener: {stdout}"
    );
    for address in addresses {
        assert!(
            std::net::TcpStream::connect(address).is_err(),
            "{address} still accepts connections after the sandbox stopped"
        );
    }
}

/// The plugin's folder. Built here, before the sandbox builds it too (a no-op then), so that it
/// is known.
fn plugin_dir() -> PathBuf {
    Binary::Plugin
        .path()
        .expect("the plugin builds")
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A running sandbox, once it printed its summary; it does not outlive the test.
struct Running {
    child: KillOnDrop,
    /// The summary up to its last line.
    summary: String,
    received: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
    stderr: std::thread::JoinHandle<String>,
}

impl Running {
    /// Starts the sandbox in `dir` with `args` and waits for its summary.
    fn start(dir: &Path, args: &[&str]) -> Running {
        let sandbox = Command::new(env!("CARGO_BIN_EXE_nauthera-sandbox"))
            .arg("--dir")
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the sandbox starts");
        // Whatever fails below, the sandbox does not outlive the test.
        let mut child = KillOnDrop(sandbox);
        let stderr = child.0.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            text
        });
        let (lines, received) = mpsc::channel();
        let stdout = child.0.stdout.take().unwrap();
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
                    let _ = child.0.kill();
                    let _ = child.0.wait();
                    panic!(
                        "the sandbox printed no summary:\n{summary}\n{}",
                        stderr.join().unwrap_or_default()
                    );
                }
            }
        }
        Running {
            child,
            summary,
            received,
            reader,
            stderr,
        }
    }

    /// SIGTERM, as Ctrl-C would: how the sandbox ended (`None`: not within [`STOP_TIMEOUT`]),
    /// everything it printed on stdout, and its stderr.
    fn stop(mut self) -> (Option<std::process::ExitStatus>, String, String) {
        let stopped = Command::new("kill")
            .arg(self.child.0.id().to_string())
            .status()
            .expect("kill runs");
        assert!(stopped.success());
        let status = wait_with_timeout(&mut self.child.0, STOP_TIMEOUT);
        self.reader.join().unwrap();
        let rest: Vec<String> = self.received.try_iter().collect();
        let stdout = format!("{}{}", self.summary, rest.join("\n"));
        let stderr = self.stderr.join().unwrap_or_default();
        (status, stdout, stderr)
    }
}

/// A plain HTTP/1.1 GET on loopback: the status code and the body.
fn http_get(address: &str, path: &str) -> std::io::Result<(u16, String)> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(address)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_default();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((code, body))
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

/// `--control-plane real`: the same sandbox on a real kube-apiserver, etcd and
/// kube-controller-manager (built on first use): the install and the examples are accepted there,
/// every example registers, the plugin shows the reconciler ready, and it stops cleanly.
#[test]
fn sandbox_on_the_real_control_plane_registers_the_examples() {
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = plugin_dir();
    let sandbox = Running::start(&dir.path().join("sandbox"), &["--control-plane", "real"]);
    let kubeconfig = sandbox
        .summary
        .lines()
        .find_map(|l| l.trim().strip_prefix("export KUBECONFIG="))
        .map(PathBuf::from)
        .expect("the summary says where the kubeconfig is");
    let shell = Shell::new(&kubeconfig, &plugin_dir);
    let status = shell.kubectl(&["nauthera", "status", "-A"]);
    let version = shell.kubectl(&["version", "-o", "json"]);

    let (stopped, stdout, stderr) = sandbox.stop();
    assert!(
        stopped.is_some_and(|s| s.success()),
        "the sandbox did not stop cleanly ({stopped:?}):\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("kube-apiserver (real)"),
        "the summary names the real API server:\n{stdout}"
    );
    let version: serde_json::Value =
        serde_json::from_slice(&version.stdout).expect("kubectl version -o json");
    assert_eq!(
        version["serverVersion"]["gitVersion"], "v1.34.4",
        "/version tells the release built"
    );
    let status_text = text(&status);
    assert!(
        status.status.success() && status_text.contains("1/1 ready"),
        "kubectl nauthera status -A:\n{status_text}"
    );
    assert_examples_registered(&stdout);
}
