//! Child processes of the harness: each announces where it listens with one JSON line on stdout;
//! its stderr goes to a log file so a failing test can show it. Children die with their handle.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running child process.
#[derive(Debug)]
pub struct ChildProcess {
    name: String,
    child: Child,
    log: PathBuf,
    /// The JSON line the child printed when it was ready.
    pub announcement: serde_json::Value,
}

impl ChildProcess {
    /// Starts `program` with `args` (and `env`), waits up to `timeout` for its JSON announcement.
    pub async fn start(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        log_dir: &Path,
        timeout: Duration,
    ) -> anyhow::Result<ChildProcess> {
        let log = log_dir.join(format!("{name}.log"));
        let stderr = std::fs::File::create(&log)
            .with_context(|| format!("cannot create the log file {}", log.display()))?;
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        let stdout = child
            .stdout
            .take()
            .context("the child's stdout is not captured")?;
        let mut lines = BufReader::new(stdout).lines();
        let announcement = tokio::time::timeout(timeout, async {
            while let Some(line) = lines.next_line().await? {
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line)
                    && value.is_object()
                {
                    return Ok::<_, anyhow::Error>(Some(value));
                }
            }
            Ok(None)
        })
        .await;
        let announcement = match announcement {
            Ok(Ok(Some(value))) => value,
            Ok(Ok(None)) => bail!(
                "{name} exited before saying where it listens; its log:\n{}",
                tail(&log)
            ),
            Ok(Err(error)) => return Err(error.context(format!("cannot read {name}'s output"))),
            Err(_) => bail!(
                "{name} did not say where it listens within {timeout:?}; its log:\n{}",
                tail(&log)
            ),
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(ChildProcess {
            name: name.to_string(),
            child,
            log,
            announcement,
        })
    }

    /// Starts a child that announces nothing on stdout; `announcement` says what the caller
    /// already knows of it (the addresses it was told to listen on).
    pub fn start_silent(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        log_dir: &Path,
        announcement: serde_json::Value,
    ) -> anyhow::Result<ChildProcess> {
        let log = log_dir.join(format!("{name}.log"));
        let output = std::fs::File::create(&log)
            .with_context(|| format!("cannot create the log file {}", log.display()))?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(output.try_clone()?))
            .stderr(Stdio::from(output))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        Ok(ChildProcess {
            name: name.to_string(),
            child,
            log,
            announcement,
        })
    }

    /// Starts a child that logs JSON lines and takes `message`'s record (its first log line with
    /// that message) as its announcement: how a reconciler told to listen on port 0 says where.
    pub async fn start_logging(
        name: &str,
        program: &Path,
        env: &[(String, String)],
        log_dir: &Path,
        message: &str,
        timeout: Duration,
    ) -> anyhow::Result<ChildProcess> {
        let mut process =
            ChildProcess::start_silent(name, program, &[], env, log_dir, serde_json::Value::Null)?;
        process.announcement = process.logged(message, timeout).await?;
        Ok(process)
    }

    /// A string field of the announcement.
    pub fn announced(&self, field: &str) -> anyhow::Result<String> {
        self.announcement
            .get(field)
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .with_context(|| {
                format!(
                    "{} did not announce {field:?}: {}",
                    self.name, self.announcement
                )
            })
    }

    /// Waits up to `timeout` for the first JSON log line whose `message` is `message` and returns
    /// it; fails at once when the child ends first.
    pub async fn logged(
        &mut self,
        message: &str,
        timeout: Duration,
    ) -> anyhow::Result<serde_json::Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(record) = text
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .find(|record| record["message"] == message)
            {
                return Ok(record);
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} ended ({status}) before it logged {message:?}; its log:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "{} did not log {message:?} within {timeout:?}; its log:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The last lines of the child's log.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The child's exit code once it has ended (128 + the signal for one killed by a signal,
    /// as a container runtime reports it); `None` while it runs.
    pub fn exit_code(&mut self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.try_wait().ok()??;
        Some(
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        )
    }

    /// Kills the child (SIGKILL) and waits for it.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// Asks the child to stop (SIGTERM through `kill`), then kills it after `grace`.
    pub async fn stop(mut self, grace: Duration) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The status code of a plain HTTP GET on loopback (probes and metrics servers).
pub async fn http_get_status(address: &str, path: &str) -> anyhow::Result<u16> {
    Ok(http_get(address, path).await?.0)
}

/// A plain HTTP/1.1 GET on loopback: the status code and the body.
pub async fn http_get(address: &str, path: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("cannot connect to {address}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("{address}{path} did not answer HTTP"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    Ok((status, body))
}
