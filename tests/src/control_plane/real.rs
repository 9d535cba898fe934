//! A real Kubernetes control plane on loopback, built from source (`tests/control-plane/`): etcd
//! (temporary data, no fsync), kube-apiserver (a self-signed serving certificate, RBAC, tokens for
//! the harness's users, service-account keys, the default admission plugins including
//! ValidatingAdmissionPolicy) and kube-controller-manager (the garbage collector, the namespace,
//! service-account, token and admission-policy status controllers).
//!
//! One control plane serves a whole test binary: it is started on first use and lives until the
//! process ends. Its processes are started from a thread that lives as long as the process, under
//! `setpriv --pdeathsig`, so the kernel ends them when the test binary exits, even after a panic
//! or a kill. Nothing that belongs to one test's async runtime is kept here, only addresses and
//! credentials: each test builds its own clients.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nauthera_fake_server::pki::TestCa;

use crate::binaries::workspace_root;

/// The administrator's token (group `system:masters`).
const ADMIN_TOKEN_USER: &str = "nauthera-test-admin";
/// How long the API server may take to answer `/readyz` with 200.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The etcd compaction interval: short, so that resumed watches meet compacted history as they do
/// on a busy cluster (and the compaction test need not wait long).
pub const COMPACTION_INTERVAL: Duration = Duration::from_secs(20);

/// Flags this test binary adds to its API servers, set before the first one starts.
static EXTRA_API_SERVER_FLAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Adds kube-apiserver flags to the control planes this test binary starts (for example
/// `--watch-cache=false`, so that watches are served by etcd and meet its compaction). Call it
/// before the first test starts a cluster; a test binary has one setting, and a later call with
/// other flags fails.
pub fn add_api_server_flags(flags: &[&str]) -> anyhow::Result<()> {
    let wanted: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
    let set = EXTRA_API_SERVER_FLAGS.get_or_init(|| wanted.clone());
    anyhow::ensure!(
        *set == wanted,
        "this test binary's API servers already run with {set:?}, not {wanted:?}"
    );
    Ok(())
}

/// Controllers this test binary adds to its controller managers, set before the first one
/// starts.
static EXTRA_CONTROLLERS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Adds controllers to the kube-controller-managers this test binary starts (for example
/// `deployment-controller`, so that a changed pod template starts a new ReplicaSet as in a
/// cluster). Call it before the first test starts a cluster; a test binary has one setting, and
/// a later call with others fails. The harness still reports the reconciler's own Deployment as
/// ready where it runs the reconciler outside the cluster.
pub fn add_controllers(controllers: &[&str]) -> anyhow::Result<()> {
    let wanted: Vec<String> = controllers.iter().map(|c| (*c).to_owned()).collect();
    let set = EXTRA_CONTROLLERS.get_or_init(|| wanted.clone());
    anyhow::ensure!(
        *set == wanted,
        "this test binary's controller managers already run {set:?}, not {wanted:?}"
    );
    Ok(())
}

/// What a test needs to reach the shared control plane: no handles, only facts.
#[derive(Clone, Debug)]
pub struct RealPlane {
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    /// The API server's serving CA, in PEM.
    pub ca_pem: String,
    /// A bearer token of the administrator (`system:masters`).
    pub admin_token: String,
    /// The folder with the processes' logs.
    pub dir: PathBuf,
    /// The versions `/version` and etcd report, for messages.
    pub version: String,
    /// The process IDs of etcd, kube-apiserver and kube-controller-manager, by name (their CPU
    /// time is read from `/proc`).
    pub processes: Vec<(String, u32)>,
    /// The flags kube-apiserver runs with (credentials' paths only, no secrets).
    pub api_server_flags: Vec<String>,
}

/// A control plane of its own for one user (a benchmark's stack), stopped and its folder
/// removed when dropped: nothing of an earlier stack is left for the next one to see.
pub struct FreshPlane {
    pub plane: RealPlane,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FreshPlane {
    /// Starts a new control plane (building it first when the build cache has none).
    pub async fn start() -> anyhow::Result<FreshPlane> {
        static NEXT_SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(3);
        let slot = NEXT_SLOT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        // The thread that starts the processes outlives them (the parent-death signal follows
        // it) and ends them when the plane is dropped.
        let thread = std::thread::Builder::new()
            .name(format!("control-plane-{slot}"))
            .spawn(move || match start_with_retries(slot) {
                Ok((plane, mut children)) => {
                    let dir = plane.dir.clone();
                    let _ = sender.send(Ok(plane));
                    let _ = stopped.recv();
                    for child in children.iter_mut().rev() {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                    let _ = std::fs::remove_dir_all(dir);
                }
                Err(error) => {
                    let _ = sender.send(Err(error));
                }
            })
            .context("cannot start the control plane's thread")?;
        let plane = receiver
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the control plane's thread ended")))?;
        Ok(FreshPlane {
            plane,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The CPU time etcd, kube-apiserver and kube-controller-manager have used so far, in
    /// seconds.
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        self.plane
            .processes
            .iter()
            .map(|(_, pid)| crate::bench::measure::cpu_seconds(*pid))
            .sum()
    }
}

impl Drop for FreshPlane {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl RealPlane {
    /// The control plane of this process, started on first use (building it first when the
    /// build cache has none).
    pub async fn shared() -> anyhow::Result<RealPlane> {
        RealPlane::instance(0).await
    }

    /// A second control plane of this process, for tests that need two clusters (a downstream
    /// cluster beside the first), started on first use.
    pub async fn second() -> anyhow::Result<RealPlane> {
        RealPlane::instance(1).await
    }

    /// The control plane of this process in `slot` (0 to 2), started on first use: the sandbox
    /// runs up to three clusters.
    pub async fn instance(slot: usize) -> anyhow::Result<RealPlane> {
        static PLANES: [tokio::sync::OnceCell<Result<RealPlane, String>>; 3] = [
            tokio::sync::OnceCell::const_new(),
            tokio::sync::OnceCell::const_new(),
            tokio::sync::OnceCell::const_new(),
        ];
        anyhow::ensure!(slot < PLANES.len(), "at most three control planes");
        PLANES[slot]
            .get_or_init(|| async move {
                let (sender, receiver) = tokio::sync::oneshot::channel();
                // The thread that starts the processes must outlive them: the parent-death
                // signal follows the thread that forked, not the process.
                let started = std::thread::Builder::new()
                    .name(format!("control-plane-{slot}"))
                    .spawn(move || match start_with_retries(slot) {
                        Ok((plane, children)) => {
                            // Never waited for: the kernel ends them with this thread, so
                            // with the process.
                            drop(children);
                            let _ = sender.send(Ok(plane));
                            loop {
                                std::thread::park();
                            }
                        }
                        Err(error) => {
                            let _ = sender.send(Err(format!("{error:#}")));
                        }
                    });
                if let Err(error) = started {
                    return Err(format!("cannot start the control plane's thread: {error}"));
                }
                receiver
                    .await
                    .unwrap_or_else(|_| Err("the control plane's thread ended".to_owned()))
            })
            .await
            .clone()
            .map_err(|e| anyhow::anyhow!("the real control plane is not available: {e}"))
    }

    /// A kubeconfig of the administrator, in `namespace`.
    pub fn kubeconfig(&self, namespace: &str) -> String {
        nauthera_kube_emulator::kubeconfig::render(
            &self.server,
            &self.ca_pem,
            &self.admin_token,
            namespace,
        )
    }

    /// An administrator's client (for the caller's runtime).
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig("default"))
            .context("the control plane's kubeconfig does not parse")?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .context("the control plane's kubeconfig is not usable")?;
        kube::Client::try_from(config).context("cannot build a Kubernetes client")
    }
}

/// The binaries folder, building the control plane once (cached under `target/`).
pub fn binaries() -> anyhow::Result<PathBuf> {
    let script = workspace_root().join("tests/control-plane/build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "{} failed ({}); its progress and error are above",
            script.display(),
            output.status
        );
    }
    let dir = String::from_utf8(output.stdout)?.trim().to_owned();
    Ok(PathBuf::from(dir).join("bin"))
}

/// How often a start is tried: a port chosen free may be taken before its process binds it.
const START_ATTEMPTS: usize = 3;

/// Starts the control plane in `slot`, again with fresh ports when a process exits at start;
/// the processes of a failed attempt are killed.
fn start_with_retries(slot: usize) -> anyhow::Result<(RealPlane, Vec<Child>)> {
    let bin = binaries()?;
    let mut attempt = 1;
    loop {
        let mut children = Vec::new();
        let extra_flags = EXTRA_API_SERVER_FLAGS.get().cloned().unwrap_or_default();
        match start(
            &bin,
            run_dir(&slot.to_string())?,
            &extra_flags,
            &mut children,
        ) {
            Ok(plane) => return Ok((plane, children)),
            Err(error) => {
                for child in &mut children {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                if attempt == START_ATTEMPTS {
                    return Err(error);
                }
                eprintln!("control plane: start attempt {attempt} failed, trying again: {error:#}");
                attempt += 1;
            }
        }
    }
}

/// Starts etcd, kube-apiserver (with `extra_api_server_flags` last) and
/// kube-controller-manager in `dir`, pushing them on `children` in that order.
fn start(
    bin: &Path,
    dir: PathBuf,
    extra_api_server_flags: &[String],
    children: &mut Vec<Child>,
) -> anyhow::Result<RealPlane> {
    let etcd_data = dir.join("etcd");
    let etcd_client = free_port()?;
    let etcd_peer = free_port()?;
    children.push(spawn(
        &bin.join("etcd"),
        &[
            "--name=nauthera-test".to_owned(),
            format!("--data-dir={}", etcd_data.display()),
            format!("--listen-client-urls=http://127.0.0.1:{etcd_client}"),
            format!("--advertise-client-urls=http://127.0.0.1:{etcd_client}"),
            format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}"),
            format!("--initial-cluster=nauthera-test=http://127.0.0.1:{etcd_peer}"),
            "--unsafe-no-fsync=true".to_owned(),
            "--log-level=warn".to_owned(),
        ],
        &dir.join("etcd.log"),
    )?);

    let ca = TestCa::new("nauthera-test-kubernetes-ca")?;
    let serving = ca.issue_server(&["localhost", "127.0.0.1"])?;
    let account_key = rcgen::KeyPair::generate().context("cannot make a service-account key")?;
    let files = PlaneFiles::write(&dir, &ca, &serving, &account_key)?;
    let admin_token = random_token()?;
    let manager_token = random_token()?;
    write_private(
        &files.tokens,
        &format!(
            "{admin_token},{ADMIN_TOKEN_USER},{ADMIN_TOKEN_USER},\"system:masters\"\n\
             {manager_token},system:kube-controller-manager,system:kube-controller-manager,\"system:masters\"\n"
        ),
    )?;

    let api_port = free_port()?;
    let server = format!("https://127.0.0.1:{api_port}");
    let api_server_flags: Vec<String> = [
        format!("--etcd-servers=http://127.0.0.1:{etcd_client}"),
        format!(
            "--etcd-compaction-interval={}s",
            COMPACTION_INTERVAL.as_secs()
        ),
        "--bind-address=127.0.0.1".to_owned(),
        "--advertise-address=127.0.0.1".to_owned(),
        format!("--secure-port={api_port}"),
        format!("--tls-cert-file={}", files.serving_cert.display()),
        format!("--tls-private-key-file={}", files.serving_key.display()),
        format!("--client-ca-file={}", files.ca.display()),
        format!("--token-auth-file={}", files.tokens.display()),
        "--authorization-mode=RBAC".to_owned(),
        format!("--service-account-issuer={server}"),
        format!(
            "--service-account-key-file={}",
            files.account_public.display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            files.account_private.display()
        ),
        "--service-cluster-ip-range=10.96.0.0/16".to_owned(),
        "--allow-privileged=false".to_owned(),
        "--profiling=false".to_owned(),
        "--v=1".to_owned(),
    ]
    .into_iter()
    .chain(extra_api_server_flags.iter().cloned())
    .collect();
    children.push(spawn(
        &bin.join("kube-apiserver"),
        &api_server_flags,
        &dir.join("kube-apiserver.log"),
    )?);
    let mut plane = RealPlane {
        server,
        ca_pem: ca.cert_pem().to_owned(),
        admin_token,
        dir,
        version: String::new(),
        processes: Vec::new(),
        api_server_flags,
    };
    plane.version = wait_ready(&plane, children)?;
    let RealPlane { server, dir, .. } = &plane;

    let manager_kubeconfig = dir.join("kube-controller-manager.kubeconfig");
    write_private(
        &manager_kubeconfig,
        &nauthera_kube_emulator::kubeconfig::render(
            server,
            ca.cert_pem(),
            &manager_token,
            "kube-system",
        ),
    )?;
    children.push(spawn(
        &bin.join("kube-controller-manager"),
        &[
            format!("--kubeconfig={}", manager_kubeconfig.display()),
            // The controllers a cluster's objects depend on; no Deployment or ReplicaSet
            // controller, so the harness reports the reconciler's Deployment as the kubelet
            // would for the processes it runs outside the cluster (a test binary may add the
            // Deployment controller: `add_controllers`).
            std::iter::once(
                "--controllers=garbage-collector-controller,namespace-controller,\
                 serviceaccount-controller,serviceaccount-token-controller,\
                 root-ca-certificate-publisher-controller,\
                 validatingadmissionpolicy-status-controller"
                    .to_owned(),
            )
            .chain(EXTRA_CONTROLLERS.get().cloned().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(","),
            format!(
                "--service-account-private-key-file={}",
                files.account_private.display()
            ),
            format!("--root-ca-file={}", files.ca.display()),
            "--leader-elect=false".to_owned(),
            "--bind-address=127.0.0.1".to_owned(),
            "--secure-port=0".to_owned(),
            "--v=1".to_owned(),
        ],
        &dir.join("kube-controller-manager.log"),
    )?);
    plane.processes = ["etcd", "kube-apiserver", "kube-controller-manager"]
        .iter()
        .zip(children.iter())
        .map(|(name, child)| ((*name).to_owned(), child.id()))
        .collect();
    Ok(plane)
}

/// The files the API server and the controller manager read.
struct PlaneFiles {
    ca: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    account_private: PathBuf,
    account_public: PathBuf,
    tokens: PathBuf,
}

impl PlaneFiles {
    fn write(
        dir: &Path,
        ca: &TestCa,
        serving: &nauthera_fake_server::pki::IssuedCert,
        account_key: &rcgen::KeyPair,
    ) -> anyhow::Result<PlaneFiles> {
        let files = PlaneFiles {
            ca: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            account_private: dir.join("service-account.key"),
            account_public: dir.join("service-account.pub"),
            tokens: dir.join("tokens.csv"),
        };
        write_private(&files.ca, ca.cert_pem())?;
        write_private(&files.serving_cert, &serving.cert_pem)?;
        write_private(&files.serving_key, &serving.key_pem)?;
        write_private(&files.account_private, &account_key.serialize_pem())?;
        write_private(&files.account_public, &account_key.public_key_pem())?;
        Ok(files)
    }
}

/// A folder for this process's control plane `name` under `target/control-plane/run/`; folders
/// of processes that are gone are removed first.
fn run_dir(name: &str) -> anyhow::Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let target = if target.is_relative() {
        workspace_root().join(target)
    } else {
        target
    };
    let runs = target.join("control-plane/run");
    std::fs::create_dir_all(&runs).with_context(|| format!("cannot create {}", runs.display()))?;
    for entry in std::fs::read_dir(&runs)?.flatten() {
        let alive = entry
            .file_name()
            .to_str()
            .and_then(|name| name.split('-').next()?.parse::<u32>().ok())
            .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let dir = runs.join(format!("{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Starts a process that the kernel kills when this thread (and so the test binary) ends.
fn spawn(program: &Path, args: &[String], log: &Path) -> anyhow::Result<Child> {
    let log_file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    Command::new("setpriv")
        .arg("--pdeathsig=KILL")
        .arg("--")
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .with_context(|| {
            format!(
                "cannot start {} (setpriv from util-linux runs it)",
                program.display()
            )
        })
}

/// Waits until `/readyz` answers 200 as the administrator; returns what `/version` says.
fn wait_ready(plane: &RealPlane, children: &mut [Child]) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build a runtime to wait for the API server")?;
    runtime.block_on(async {
        let client = plane.client().await?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            for child in children.iter_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    bail!(
                        "a control-plane process exited ({status}) before the API server was \
                         ready; logs in {}:\n{}",
                        plane.dir.display(),
                        log_tails(&plane.dir)
                    );
                }
            }
            let ready = client
                .request_text(http::Request::get("/readyz").body(Vec::new())?)
                .await;
            if matches!(ready.as_deref(), Ok("ok")) {
                let version = client
                    .apiserver_version()
                    .await
                    .context("cannot ask the API server's /version")?;
                return Ok(version.git_version);
            }
            if Instant::now() > deadline {
                bail!(
                    "the API server is not ready after {READY_TIMEOUT:?}; logs in {}:\n{}",
                    plane.dir.display(),
                    log_tails(&plane.dir)
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
}

fn log_tails(dir: &Path) -> String {
    ["etcd.log", "kube-apiserver.log"]
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            format!(
                "--- {name} (last 20 lines)\n{}",
                lines[lines.len().saturating_sub(20)..].join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A loopback port nothing listens on now (the process that takes it binds it a moment later).
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 24];
    let mut urandom = std::fs::File::open("/dev/urandom")?;
    std::io::Read::read_exact(&mut urandom, &mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes a file only its owner can read (keys and tokens).
pub fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

/// A process of an [`OwnedPlane`] a test can stop, continue, or kill and start again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaneProcess {
    Etcd,
    ApiServer,
}

impl PlaneProcess {
    /// Its place among the children [`start`] pushes.
    fn index(self) -> usize {
        match self {
            PlaneProcess::Etcd => 0,
            PlaneProcess::ApiServer => 1,
        }
    }

    fn name(self) -> &'static str {
        match self {
            PlaneProcess::Etcd => "etcd",
            PlaneProcess::ApiServer => "kube-apiserver",
        }
    }
}

/// What the thread of an [`OwnedPlane`] does on request.
#[derive(Clone, Copy, Debug)]
enum PlaneRequest {
    /// `SIGSTOP`: the process holds its sockets and answers nothing.
    Stop(PlaneProcess),
    /// `SIGCONT` after a stop.
    Continue(PlaneProcess),
    /// `kill -9`, then the same command line again (same ports, same etcd data); an API server
    /// is waited for until ready.
    Restart(PlaneProcess),
}

type PlaneReply = tokio::sync::oneshot::Sender<Result<(), String>>;

/// A control plane of one caller's own, outside the process's slots, with API-server flags of
/// its own (last on the command line, so they win): its etcd and kube-apiserver can be stopped,
/// continued, or killed and started again. Its processes end when it is dropped (their thread
/// ends, and the kernel's parent-death signal follows), and its folder is removed.
pub struct OwnedPlane {
    pub plane: RealPlane,
    requests: std::sync::mpsc::Sender<(PlaneRequest, PlaneReply)>,
}

impl OwnedPlane {
    /// Starts a control plane whose kube-apiserver also gets `api_server_flags`.
    pub async fn start(api_server_flags: &[&str]) -> anyhow::Result<OwnedPlane> {
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let number = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let flags: Vec<String> = api_server_flags.iter().map(|f| (*f).to_owned()).collect();
        let (started, started_receiver) = tokio::sync::oneshot::channel();
        let (requests, request_receiver) = std::sync::mpsc::channel();
        // The thread that starts the processes must outlive them (see `RealPlane::instance`).
        std::thread::Builder::new()
            .name(format!("owned-plane-{number}"))
            .spawn(move || serve_owned(&format!("own{number}"), &flags, started, request_receiver))
            .context("cannot start the control plane's thread")?;
        let plane = started_receiver
            .await
            .unwrap_or_else(|_| Err("the control plane's thread ended".to_owned()))
            .map_err(|e| anyhow::anyhow!("the control plane did not start: {e}"))?;
        Ok(OwnedPlane { plane, requests })
    }

    /// `SIGSTOP` to the process.
    pub async fn stop(&self, process: PlaneProcess) -> anyhow::Result<()> {
        self.ask(PlaneRequest::Stop(process)).await
    }

    /// `SIGCONT` to a stopped process.
    pub async fn resume(&self, process: PlaneProcess) -> anyhow::Result<()> {
        self.ask(PlaneRequest::Continue(process)).await
    }

    /// `kill -9` of the process and the same command again; returns once an API server is
    /// ready (etcd at once: the API server reconnects by itself).
    pub async fn restart(&self, process: PlaneProcess) -> anyhow::Result<()> {
        self.ask(PlaneRequest::Restart(process)).await
    }

    async fn ask(&self, request: PlaneRequest) -> anyhow::Result<()> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.requests
            .send((request, reply))
            .map_err(|_| anyhow::anyhow!("the control plane's thread ended"))?;
        answer
            .await
            .unwrap_or_else(|_| Err("the control plane's thread ended".to_owned()))
            .map_err(|e| anyhow::anyhow!("{request:?}: {e}"))
    }
}

/// The thread of an [`OwnedPlane`]: starts it, serves requests until the plane is dropped, then
/// ends its processes and removes its folder.
fn serve_owned(
    name: &str,
    flags: &[String],
    started: tokio::sync::oneshot::Sender<Result<RealPlane, String>>,
    requests: std::sync::mpsc::Receiver<(PlaneRequest, PlaneReply)>,
) {
    let mut children = Vec::new();
    let mut attempt = 1;
    let plane = loop {
        let result = binaries().and_then(|bin| start(&bin, run_dir(name)?, flags, &mut children));
        match result {
            Ok(plane) => break plane,
            Err(error) => {
                end_children(&mut children);
                if attempt == START_ATTEMPTS {
                    let _ = started.send(Err(format!("{error:#}")));
                    return;
                }
                attempt += 1;
            }
        }
    };
    let _ = started.send(Ok(plane.clone()));
    let mut restarts = 0;
    while let Ok((request, reply)) = requests.recv() {
        let result = match request {
            PlaneRequest::Stop(process) => signal(&children[process.index()], "STOP"),
            PlaneRequest::Continue(process) => signal(&children[process.index()], "CONT"),
            PlaneRequest::Restart(process) => {
                restarts += 1;
                restart_child(&plane, &mut children, process, restarts)
            }
        };
        let _ = reply.send(result.map_err(|e| format!("{e:#}")));
    }
    end_children(&mut children);
    let _ = std::fs::remove_dir_all(&plane.dir);
}

fn end_children(children: &mut Vec<Child>) {
    for child in children.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
    children.clear();
}

/// Sends `SIGname` to a child (`setpriv` execs the program, so the child is the program).
fn signal(child: &Child, name: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .context("cannot run kill")?;
    anyhow::ensure!(status.success(), "kill -{name} {} failed", child.id());
    Ok(())
}

/// Kills a child and starts its command line again, logging into a fresh file.
fn restart_child(
    plane: &RealPlane,
    children: &mut [Child],
    process: PlaneProcess,
    number: u32,
) -> anyhow::Result<()> {
    let child = &mut children[process.index()];
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id()))
        .with_context(|| format!("cannot read the command line of {}", process.name()))?;
    let mut words = cmdline
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned());
    let program = PathBuf::from(words.next().context("an empty command line")?);
    let args: Vec<String> = words.collect();
    // A stopped process dies of SIGKILL too.
    child.kill().context("cannot kill")?;
    child.wait().context("cannot wait for the killed process")?;
    *child = spawn(
        &program,
        &args,
        &plane.dir.join(format!("{}.{number}.log", process.name())),
    )?;
    if process == PlaneProcess::ApiServer {
        wait_ready(plane, children)?;
    }
    Ok(())
}

tokio::task_local! {
    static SCOPED: RealPlane;
}

impl RealPlane {
    /// Runs `work` with this plane as the one a test cluster starts on in place of the shared
    /// one (for an [`OwnedPlane`]).
    pub async fn scope<F: std::future::Future>(self, work: F) -> F::Output {
        SCOPED.scope(self, work).await
    }

    /// The plane [`RealPlane::scope`] set for the work running now.
    pub fn scoped() -> Option<RealPlane> {
        SCOPED.try_with(Clone::clone).ok()
    }
}
