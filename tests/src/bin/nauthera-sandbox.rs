//! `cargo run -p nauthera-tests --bin nauthera-sandbox`: the product on loopback.
//!
//! Builds the workspace's binaries, starts the Kubernetes API emulator, the fake nauthera-server
//! and the reconciler as child processes, installs the CRDs, applies `examples/`, writes a
//! kubeconfig and prints how to use it. Ctrl-C (or SIGTERM) stops every child; none outlives the
//! sandbox, because each dies with its handle.
//!
//! The cluster looks like a real install: `deploy/base`'s Namespace, ServiceAccount, RBAC and
//! Deployment are applied, and since nothing runs Deployments in the emulator, the sandbox stores
//! the Deployment's one Pod itself and reports both ready once the reconciler is. The reconciler
//! runs on this machine but as that Pod: with the ServiceAccount's token (so under the shipped
//! RBAC), the Pod's name as its identity, and its log served as the Pod's (`kubectl logs`).
//!
//! `--clusters 2` (or 3) stands for downstream clusters configuring one central server: one
//! emulator and one reconciler per cluster, named `prod-eu`, `prod-us` (, `prod-ap`), each with
//! `--cluster-name`, its own manager and its own client certificate, and a grant per cluster on
//! the server listing its mapped namespaces (`prod-eu/nauthera-examples`, ...). The first cluster
//! declares the examples' Organization (one object per slug on the server); the others apply the
//! rest of the examples once it is registered.
//!
//! `--control-plane real` puts each cluster on a real kube-apiserver, etcd and
//! kube-controller-manager built from source (tests/control-plane; built on first use, then
//! cached) instead of the emulator. The same install and examples go there; the Pod stands for
//! the reconciler as on the emulator, but with no kubelet `kubectl logs` has nothing to show (the
//! reconciler's log is in the sandbox's folder).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kube::api::{Api, ListParams};
use nauthera_shared::catalog::Phase;
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use nauthera_tests::binaries::{Binary, workspace_root};
use nauthera_tests::cluster::client_from;
use nauthera_tests::control_plane::Plane;
use nauthera_tests::control_plane::real::{RealPlane, write_private};
use nauthera_tests::e2e::{self, Declared, RECONCILER_ACCOUNT};
use nauthera_tests::manifests;
use nauthera_tests::process::ChildProcess;

const START_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often the sandbox looks whether a reconciler exited.
const SUPERVISE_INTERVAL: Duration = Duration::from_secs(1);
/// How long the examples may take to register before the sandbox reports where they stand.
const EXAMPLES_TIMEOUT: Duration = Duration::from_secs(60);
/// The identity the fake server admits and the sandbox's reconciler certificate carries.
const RECONCILER_IDENTITY: &str = "dns:nauthera-reconciler.nauthera-system.svc";
const EXAMPLES_NAMESPACE: &str = "nauthera-examples";
/// The cluster names of `--clusters N`, in order.
const CLUSTER_NAMES: [&str; 3] = ["prod-eu", "prod-us", "prod-ap"];
/// The namespaces each named cluster's grant lists, as `<cluster>/<namespace>` on the server.
const GRANTED_NAMESPACES: [&str; 2] = [EXAMPLES_NAMESPACE, "team-a"];
const RECONCILER_NAMESPACE: &str = e2e::RECONCILER_NAMESPACE;
/// How long the reconciler's ServiceAccount token lasts; a sandbox is restarted well before.
const TOKEN_SECONDS: i64 = 7 * 24 * 3600;
/// The alphabet Kubernetes writes pod-template hashes and generated name suffixes in.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Runs the sandbox: a Kubernetes API emulator, a fake nauthera-server and the reconciler.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Where the sandbox keeps its kubeconfig, certificates and logs (emptied at start).
    #[arg(long, default_value = ".sandbox")]
    dir: PathBuf,
    /// Start everything, apply the examples, print the summary and stop again (a smoke check).
    #[arg(long)]
    once: bool,
    /// How many clusters call the server: 1, or 2 or 3 downstream clusters with cluster names
    /// (prod-eu, prod-us, prod-ap), each with its own emulator, reconciler, manager and identity.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
    clusters: u8,
    /// The Kubernetes under each cluster: `emulator` (the default, starts at once, nothing to
    /// build) or `real` (kube-apiserver, etcd and kube-controller-manager built from source on
    /// first use, about 6 minutes on 2 cores, then cached under target/).
    #[arg(long, default_value = "emulator", value_parser = parse_plane)]
    control_plane: Plane,
}

fn parse_plane(text: &str) -> Result<Plane, String> {
    Plane::parse(text).ok_or_else(|| format!("{text} is not a control plane: emulator or real"))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nauthera-sandbox: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let dir = prepare_dir(&args.dir)?;
    eprintln!("building the binaries ...");
    Binary::KubeEmulator.path()?;
    Binary::Reconciler.path()?;
    let plugin_dir = Binary::Plugin
        .path()?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let plans = ClusterPlan::all(&dir, args.clusters)?;
    let server = start_fake_server(&dir, &plans).await?;
    let mut clusters = Vec::new();
    // One after the other: the first declares the Organization the others' examples need.
    for (index, plan) in plans.into_iter().enumerate() {
        let cluster = Cluster::start(plan, index, args.control_plane, &server).await?;
        clusters.push(cluster);
    }
    let all_registered = clusters.iter().all(|c| c.examples.all_registered);

    match clusters.as_slice() {
        [single] => {
            println!("\nThe examples:\n{}", single.examples.lines.join("\n"));
            print_summary(&dir, &plugin_dir, &server, single)?;
        }
        several => print_clusters_summary(&dir, &plugin_dir, &server, several)?,
    }
    if args.once && !all_registered {
        anyhow::bail!("not every example registered within {EXAMPLES_TIMEOUT:?}");
    }
    if !args.once {
        supervise(&mut clusters, &server).await;
        eprintln!("stopping ...");
    }
    for cluster in clusters {
        cluster.reconciler.stop(STOP_GRACE).await;
        cluster.kubernetes.stop().await;
    }
    server.stop(STOP_GRACE).await;
    Ok(())
}

/// Until Ctrl-C or SIGTERM, restarts a reconciler that exits, as the kubelet restarts the
/// container of a Pod (`restartPolicy: Always`): its Pod shows it not ready meanwhile, then
/// running again with one restart more and the last exit code.
async fn supervise(clusters: &mut [Cluster], server: &ChildProcess) {
    let signal = wait_for_signal();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            () = &mut signal => return,
            () = tokio::time::sleep(SUPERVISE_INTERVAL) => {}
        }
        for cluster in clusters.iter_mut() {
            if let Err(problem) = cluster.restart_if_exited(server).await {
                eprintln!("warning: cannot restart the reconciler: {problem:#}");
            }
        }
    }
}

/// The Kubernetes API a cluster of the sandbox runs on.
enum Kubernetes {
    /// The emulator, a child process of the sandbox.
    Emulator(ChildProcess),
    /// A real control plane, whose processes end with the sandbox.
    Real(RealPlane),
}

impl Kubernetes {
    /// What it is, padded for the summary's column.
    fn kind(&self) -> &'static str {
        match self {
            Kubernetes::Emulator(_) => "Kubernetes API emulator",
            Kubernetes::Real(_) => "kube-apiserver (real)  ",
        }
    }

    /// Where its API listens.
    fn address(&self) -> anyhow::Result<String> {
        match self {
            Kubernetes::Emulator(emulator) => emulator.announced("listening"),
            Kubernetes::Real(plane) => Ok(plane.server.clone()),
        }
    }

    async fn stop(self) {
        match self {
            Kubernetes::Emulator(emulator) => emulator.stop(STOP_GRACE).await,
            // Its processes end with this process (a parent-death signal).
            Kubernetes::Real(_) => {}
        }
    }
}

/// One cluster as the sandbox configures it.
struct ClusterPlan {
    /// `--cluster-name`; none when the sandbox runs one cluster.
    name: Option<&'static str>,
    /// The SAN of its reconciler's client certificate.
    identity: String,
    /// Where its kubeconfig and logs go.
    dir: PathBuf,
}

impl ClusterPlan {
    /// The plans of `count` clusters: one without a name in `dir` itself (the default sandbox),
    /// or named ones, each in its own folder.
    fn all(dir: &Path, count: u8) -> anyhow::Result<Vec<ClusterPlan>> {
        if count <= 1 {
            return Ok(vec![ClusterPlan {
                name: None,
                identity: RECONCILER_IDENTITY.to_owned(),
                dir: dir.to_path_buf(),
            }]);
        }
        CLUSTER_NAMES
            .iter()
            .take(usize::from(count))
            .map(|name| {
                let cluster_dir = dir.join(name);
                std::fs::create_dir_all(&cluster_dir)
                    .with_context(|| format!("cannot create {}", cluster_dir.display()))?;
                Ok(ClusterPlan {
                    name: Some(name),
                    identity: format!("dns:nauthera-reconciler.{RECONCILER_NAMESPACE}.{name}.svc"),
                    dir: cluster_dir,
                })
            })
            .collect()
    }

    /// The manager its writes name.
    fn manager(&self) -> String {
        match self.name {
            Some(name) => format!("{RECONCILER_ACCOUNT}/{name}"),
            None => RECONCILER_ACCOUNT.to_owned(),
        }
    }

    /// The namespaces its grant lists, as the server names them.
    fn granted_namespaces(&self) -> Vec<String> {
        match self.name {
            Some(name) => GRANTED_NAMESPACES
                .iter()
                .map(|namespace| format!("{name}/{namespace}"))
                .collect(),
            None => vec!["*".to_owned()],
        }
    }

    /// The operations its grant lists: the first cluster declares the Organization.
    fn granted_operations(&self, first: bool) -> &'static str {
        if first {
            "[clients, brandings, identity_providers, organizations]"
        } else {
            "[clients, brandings, identity_providers]"
        }
    }
}

/// One running cluster: its emulator, its reconciler (as the Pod of the shipped Deployment) and
/// where its examples stand.
struct Cluster {
    plan: ClusterPlan,
    first: bool,
    kubeconfig: PathBuf,
    kubernetes: Kubernetes,
    client: kube::Client,
    reconciler_kubeconfig: PathBuf,
    reconciler: ChildProcess,
    pod: ReconcilerPod,
    /// How often the reconciler was restarted after it exited.
    restarts: u32,
    examples: Examples,
}

impl Cluster {
    /// Starts the cluster's emulator, installs the CRDs, the examples (the Organization only in
    /// the `first` cluster) and the shipped install, and starts its reconciler.
    async fn start(
        plan: ClusterPlan,
        index: usize,
        plane: Plane,
        server: &ChildProcess,
    ) -> anyhow::Result<Cluster> {
        let first = index == 0;
        let dir = plan.dir.clone();
        let deployment = e2e::shipped_deployment()?;
        let pod = ReconcilerPod::new(&deployment)?;
        // `ChildProcess` logs the reconciler (named "reconciler") to this file.
        let reconciler_log = dir.join("reconciler.log");

        let kubeconfig = dir.join("kubeconfig");
        let kubernetes = match plane {
            Plane::Emulator => Kubernetes::Emulator(
                ChildProcess::start(
                    "kube-emulator",
                    &Binary::KubeEmulator.path()?,
                    &[
                        "--kubeconfig".into(),
                        kubeconfig.display().to_string(),
                        "--namespace".into(),
                        EXAMPLES_NAMESPACE.into(),
                        "--pod-log".into(),
                        format!(
                            "{RECONCILER_NAMESPACE}/{}={}",
                            pod.name,
                            reconciler_log.display()
                        ),
                    ],
                    &[],
                    &dir,
                    START_TIMEOUT,
                )
                .await?,
            ),
            Plane::Real => {
                eprintln!("starting a real control plane (built from source on first use) ...");
                let plane = RealPlane::instance(index).await?;
                write_private(&kubeconfig, &plane.kubeconfig(EXAMPLES_NAMESPACE))?;
                Kubernetes::Real(plane)
            }
        };
        let client = client_from(&kubeconfig).await?;
        manifests::install_crds(&client).await?;
        let mut examples = manifests::load_dir(&workspace_root().join("examples"))?;
        if !first {
            // An organization is one object on the server, whatever the cluster: the first
            // cluster declares it.
            examples.retain(|o| o.types.as_ref().is_none_or(|t| t.kind != "Organization"));
        }
        // Namespaces before what lives in them.
        examples.sort_by_key(|o| o.types.as_ref().is_none_or(|t| t.kind != "Namespace"));
        // As `kubectl apply -f examples/` leaves them, so that applying them again is clean.
        manifests::apply_all(&client, &manifests::as_kubectl_applies(&examples)?, None).await?;
        // As deploy/base installs the reconciler: Namespace, ServiceAccount, RBAC, Deployment.
        manifests::apply_all(&client, &e2e::shipped_rbac()?, None).await?;
        let mut deployment = deployment;
        deployment.data["spec"]["replicas"] = 1.into();
        manifests::apply_all(&client, &[deployment], None).await?;
        pod.create(&client).await?;
        let reconciler_kubeconfig = dir.join("reconciler.kubeconfig");
        e2e::write_token_kubeconfig(
            &client,
            &kubeconfig,
            RECONCILER_NAMESPACE,
            &reconciler_kubeconfig,
            TOKEN_SECONDS,
        )
        .await?;

        let reconciler =
            start_reconciler(&plan, first, &reconciler_kubeconfig, server, &pod).await?;
        pod.show(&client, ContainerState::Running { last_exit: None }, 0)
            .await?;
        e2e::show_deployment_ready(&client, RECONCILER_NAMESPACE, 1).await?;
        let examples = wait_for_examples(&client).await?;
        Ok(Cluster {
            plan,
            first,
            kubeconfig,
            kubernetes,
            client,
            reconciler_kubeconfig,
            reconciler,
            pod,
            restarts: 0,
            examples,
        })
    }

    /// When the reconciler has exited: its Pod shows it terminated and not ready, and after a
    /// back-off that doubles with each restart (1 s to a minute, the kubelet's begins at 10 s)
    /// it runs again, its previous log kept beside the new one.
    async fn restart_if_exited(&mut self, server: &ChildProcess) -> anyhow::Result<()> {
        let Some(code) = self.reconciler.exit_code() else {
            return Ok(());
        };
        self.restarts += 1;
        eprintln!(
            "the reconciler (pod {}) exited with code {code}; restarting it (restart {}), as \
             the kubelet restarts a container; its log so far: reconciler.previous.log",
            self.pod.name, self.restarts
        );
        let exited = ContainerState::Exited { code };
        self.pod
            .show(&self.client, exited, self.restarts - 1)
            .await?;
        e2e::show_deployment_ready(&self.client, RECONCILER_NAMESPACE, 0).await?;
        let log = self.reconciler.log_path().to_path_buf();
        std::fs::copy(&log, log.with_file_name("reconciler.previous.log"))
            .context("cannot keep the reconciler's log")?;
        let backoff = Duration::from_secs(1 << (self.restarts - 1).min(6));
        tokio::time::sleep(backoff).await;
        self.reconciler = start_reconciler(
            &self.plan,
            self.first,
            &self.reconciler_kubeconfig,
            server,
            &self.pod,
        )
        .await?;
        let running = ContainerState::Running {
            last_exit: Some(code),
        };
        self.pod.show(&self.client, running, self.restarts).await?;
        e2e::show_deployment_ready(&self.client, RECONCILER_NAMESPACE, 1).await
    }
}

/// The reconciler container's state as the Pod shows it.
#[derive(Clone, Copy)]
enum ContainerState {
    /// Running and ready; `last_exit` is the code of the run before a restart.
    Running { last_exit: Option<i32> },
    /// Ended with `code`, waiting to be restarted.
    Exited { code: i32 },
}

fn prepare_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        workspace_root().join(dir)
    };
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot empty the sandbox folder {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the sandbox folder {}", dir.display()))?;
    Ok(dir)
}

async fn start_fake_server(dir: &Path, plans: &[ClusterPlan]) -> anyhow::Result<ChildProcess> {
    let config = dir.join("fake-server.yaml");
    std::fs::write(&config, fake_server_config(plans))
        .with_context(|| format!("cannot write {}", config.display()))?;
    ChildProcess::start(
        "fake-server",
        &Binary::FakeServer.path()?,
        &["--config".into(), config.display().to_string()],
        &[],
        dir,
        START_TIMEOUT,
    )
    .await
}

/// The fake server's configuration: a client certificate and a grant per cluster.
fn fake_server_config(plans: &[ClusterPlan]) -> String {
    let mut config = String::from(
        "# The sandbox's nauthera-server: empty (the examples' Organization manifest declares\n\
         # acme, and everything under its issuer waits for it)",
    );
    if plans.len() > 1 {
        config.push_str(
            ", one grant per cluster, listing\n# that cluster's namespaces as the server names them.\n",
        );
    } else {
        config.push_str(", the reconciler allowed everything.\n");
    }
    config.push_str("certificate_dir: certs\n");
    let (first, others) = plans
        .split_first()
        .map_or((None, &[][..]), |(f, o)| (Some(f), o));
    if let Some(first) = first {
        config.push_str(&format!("client_identity: {}\n", first.identity));
    }
    if !others.is_empty() {
        config.push_str("client_identities:\n");
        for plan in others {
            config.push_str(&format!(
                "- label: {}\n  identity: {}\n",
                plan.name.unwrap_or_default(),
                plan.identity
            ));
        }
    }
    config.push_str("allowed_clients:\n");
    for (index, plan) in plans.iter().enumerate() {
        let namespaces: Vec<String> = plan
            .granted_namespaces()
            .iter()
            .map(|namespace| format!("'{namespace}'"))
            .collect();
        config.push_str(&format!(
            "- identity: {}\n  operations: {}\n  organizations: ['*']\n  namespaces: [{}]\n",
            plan.identity,
            plan.granted_operations(index == 0),
            namespaces.join(", ")
        ));
    }
    config
}

/// The folder of the client certificate the fake server generated for `plan`.
fn client_tls_dir(
    server: &ChildProcess,
    plan: &ClusterPlan,
    first: bool,
) -> anyhow::Result<String> {
    if first {
        return server.announced("client_tls_dir");
    }
    let label = plan.name.unwrap_or_default();
    server.announcement["client_identities"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|client| client["label"] == label)
        .and_then(|client| client["tls_dir"].as_str())
        .map(str::to_owned)
        .with_context(|| {
            format!(
                "the fake server announced no client certificate for {label}: {}",
                server.announcement
            )
        })
}

async fn start_reconciler(
    plan: &ClusterPlan,
    first: bool,
    kubeconfig: &Path,
    server: &ChildProcess,
    pod: &ReconcilerPod,
) -> anyhow::Result<ChildProcess> {
    let mut env = vec![
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("NAUTHERA_SERVER_ADDRESS", server.announced("grpc_address")?),
        ("NAUTHERA_TLS_SERVER_NAME", server.announced("server_name")?),
        ("NAUTHERA_TLS_DIR", client_tls_dir(server, plan, first)?),
        ("NAUTHERA_LEASE_NAMESPACE", RECONCILER_NAMESPACE.to_string()),
        // What the Pod's environment would hold: its name (the leader identity, as deploy/base
        // sets it from metadata.name) and the container's own settings.
        ("POD_NAME", pod.name.clone()),
        ("NAUTHERA_IDENTITY", pod.name.clone()),
        ("NAUTHERA_TLS_SECRET", pod.tls_secret.clone()),
        // Port 0, then the addresses it logs: nothing else can take them in between.
        ("NAUTHERA_PROBE_ADDRESS", "127.0.0.1:0".to_string()),
        ("NAUTHERA_METRICS_ADDRESS", "127.0.0.1:0".to_string()),
    ];
    if let Some(name) = plan.name {
        // A downstream cluster: its namespaces are `<name>/<namespace>` on the server, and its
        // writes name its own manager.
        env.push(("NAUTHERA_CLUSTER_NAME", name.to_owned()));
        env.push(("NAUTHERA_MANAGER", plan.manager()));
    }
    let env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let reconciler = ChildProcess::start_logging(
        "reconciler",
        &Binary::Reconciler.path()?,
        &env,
        &plan.dir,
        "listening",
        START_TIMEOUT,
    )
    .await?;
    wait_until_ready(&reconciler.announced("probes")?, &reconciler).await?;
    Ok(reconciler)
}

/// Polls `/readyz` until it answers 200.
async fn wait_until_ready(probe: &str, reconciler: &ChildProcess) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(200) = nauthera_tests::process::http_get_status(probe, "/readyz").await {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!(
                "the reconciler is not ready after {START_TIMEOUT:?}; its log:\n{}",
                reconciler.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn print_summary(
    dir: &Path,
    plugin_dir: &Path,
    server: &ChildProcess,
    cluster: &Cluster,
) -> anyhow::Result<()> {
    let (kubernetes, reconciler, pod) = (&cluster.kubernetes, &cluster.reconciler, &cluster.pod);
    println!(
        "\nThe sandbox runs:\n\
         \x20 {kubernetes_kind}  {api}\n\
         \x20 fake nauthera-server     {grpc} (control API http://{control})\n\
         \x20 nauthera-reconciler      probes http://{probe}/readyz, metrics http://{metrics}/metrics\n\
         \x20                          as pod {namespace}/{pod} of deploy/{deployment}, pid {pid}\n\
         \x20                          (restarted when it exits, as the kubelet would)\n\
         \x20 logs                     {dir}\n\n\
         In another terminal:\n\n\
         \x20 export KUBECONFIG={kubeconfig}\n\
         \x20 export PATH={plugin}:$PATH\n\
         \x20 kubectl get oidcclients -A\n\
         \x20 kubectl nauthera status -A\n\
         \x20 kubectl logs -n {namespace} deploy/{deployment}\n\n\
         Ctrl-C stops everything.",
        kubernetes_kind = kubernetes.kind(),
        api = kubernetes.address()?,
        grpc = server.announced("grpc_address")?,
        control = server.announced("control_address")?,
        probe = reconciler.announced("probes")?,
        metrics = reconciler.announced("metrics")?,
        pid = reconciler.pid().unwrap_or_default(),
        dir = dir.display(),
        kubeconfig = cluster.kubeconfig.display(),
        plugin = plugin_dir.display(),
        namespace = RECONCILER_NAMESPACE,
        pod = pod.name,
        deployment = RECONCILER_ACCOUNT,
    );
    Ok(())
}

/// The summary of several clusters: each one's emulator, reconciler, examples and kubeconfig,
/// and the server's grants in its namespaces.
fn print_clusters_summary(
    dir: &Path,
    plugin_dir: &Path,
    server: &ChildProcess,
    clusters: &[Cluster],
) -> anyhow::Result<()> {
    for cluster in clusters {
        println!(
            "\nThe examples in {}:\n{}",
            cluster.plan.name.unwrap_or_default(),
            cluster.examples.lines.join("\n")
        );
    }
    println!(
        "\nThe sandbox runs {count} clusters calling one server:\n\
         \x20 fake nauthera-server     {grpc} (control API http://{control})\n\
         \x20 logs                     {dir}",
        count = clusters.len(),
        grpc = server.announced("grpc_address")?,
        control = server.announced("control_address")?,
        dir = dir.display(),
    );
    for cluster in clusters {
        println!(
            "\n\x20 cluster {name}\n\
             \x20   {kubernetes_kind}  {api}\n\
             \x20   nauthera-reconciler      manager {manager}, identity {identity}\n\
             \x20                            probes http://{probe}/readyz, metrics http://{metrics}/metrics\n\
             \x20                            as pod {namespace}/{pod} of deploy/{deployment}",
            name = cluster.plan.name.unwrap_or_default(),
            kubernetes_kind = cluster.kubernetes.kind(),
            api = cluster.kubernetes.address()?,
            manager = cluster.plan.manager(),
            identity = cluster.plan.identity,
            probe = cluster.reconciler.announced("probes")?,
            metrics = cluster.reconciler.announced("metrics")?,
            namespace = RECONCILER_NAMESPACE,
            pod = cluster.pod.name,
            deployment = RECONCILER_ACCOUNT,
        );
    }
    println!("\nThe server's grants (allowed_clients), in the server's namespace names:");
    for cluster in clusters {
        println!(
            "\x20 {identity}: {namespaces}",
            identity = cluster.plan.identity,
            namespaces = cluster.plan.granted_namespaces().join(", ")
        );
    }
    println!("\nIn another terminal, one cluster at a time:");
    for cluster in clusters {
        println!(
            "\n\x20 # cluster {name}\n\
             \x20 export KUBECONFIG={kubeconfig}\n\
             \x20 export PATH={plugin}:$PATH\n\
             \x20 kubectl get oidcclients -A\n\
             \x20 kubectl nauthera status -A",
            name = cluster.plan.name.unwrap_or_default(),
            kubeconfig = cluster.kubeconfig.display(),
            plugin = plugin_dir.display(),
        );
    }
    println!(
        "\nThe same namespace and name in two clusters are two objects on the server \
         (`<cluster>/<namespace>`).\n\nCtrl-C stops everything."
    );
    Ok(())
}

/// The Pod the Deployment controller would have made for the reconciler, stored by the sandbox.
struct ReconcilerPod {
    /// `nauthera-reconciler-<template hash>-<suffix>`, as a ReplicaSet names its pods.
    name: String,
    template_hash: String,
    /// The Deployment's pod template.
    template: serde_json::Value,
    /// The container's `NAUTHERA_TLS_SECRET`.
    tls_secret: String,
}

impl ReconcilerPod {
    fn new(deployment: &kube::api::DynamicObject) -> anyhow::Result<ReconcilerPod> {
        let template = deployment.data["spec"]["template"].clone();
        let template_hash = name_part(&serde_json::to_vec(&template)?, 10);
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let seed = format!("{}:{}", std::process::id(), started.as_nanos());
        let suffix = name_part(seed.as_bytes(), 5);
        let tls_secret = template["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["env"].as_array().into_iter().flatten())
            .find(|e| e["name"] == "NAUTHERA_TLS_SECRET")
            .and_then(|e| e["value"].as_str())
            .context("deploy/base's container sets no NAUTHERA_TLS_SECRET")?
            .to_owned();
        Ok(ReconcilerPod {
            name: format!("{RECONCILER_ACCOUNT}-{template_hash}-{suffix}"),
            template_hash,
            template,
            tls_secret,
        })
    }

    /// Stores the Pod, pending: the template's labels (which the Deployment selects) and spec.
    async fn create(&self, client: &kube::Client) -> anyhow::Result<()> {
        let mut labels = self.template["metadata"]["labels"].clone();
        labels["pod-template-hash"] = self.template_hash.clone().into();
        let mut spec = self.template["spec"].clone();
        spec["nodeName"] = "sandbox".into();
        let pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name,
                "namespace": RECONCILER_NAMESPACE,
                "labels": labels,
            },
            "spec": spec,
        }))?;
        manifests::apply_all(client, &[pod], None).await
    }

    /// Reports the Pod's container as the kubelet would: running and ready once its readiness
    /// probe passes, or terminated and not ready, with its restarts and last exit code.
    async fn show(
        &self,
        client: &kube::Client,
        state: ContainerState,
        restarts: u32,
    ) -> anyhow::Result<()> {
        let now = jiff::Timestamp::now()
            .round(jiff::Unit::Second)?
            .to_string();
        let ready = matches!(state, ContainerState::Running { .. });
        let terminated = |code: i32| {
            serde_json::json!({"terminated": {
                "exitCode": code,
                "reason": if code == 0 { "Completed" } else { "Error" },
                "finishedAt": now,
            }})
        };
        let (current, last) = match state {
            ContainerState::Running { last_exit } => (
                serde_json::json!({"running": {"startedAt": now}}),
                last_exit.map_or(serde_json::json!({}), terminated),
            ),
            ContainerState::Exited { code } => (terminated(code), serde_json::json!({})),
        };
        let readiness = if ready { "True" } else { "False" };
        let condition = |kind: &str, status: &str| serde_json::json!({"type": kind, "status": status, "lastTransitionTime": now});
        let containers = self.template["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                serde_json::json!({
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": ready,
                    "started": ready,
                    "restartCount": restarts,
                    "state": current,
                    "lastState": last,
                })
            })
            .collect::<Vec<_>>();
        let status = serde_json::json!({ "status": {
            "phase": "Running",
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "startTime": now,
            "conditions": [
                condition("PodScheduled", "True"),
                condition("Initialized", "True"),
                condition("ContainersReady", readiness),
                condition("Ready", readiness),
            ],
            "containerStatuses": containers,
        }});
        Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), RECONCILER_NAMESPACE)
            .patch_status(
                &self.name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&status),
            )
            .await
            .context("cannot set the reconciler Pod's status")?;
        Ok(())
    }
}

/// `length` characters of Kubernetes' name alphabet derived from `seed`.
fn name_part(seed: &[u8], length: usize) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(seed)
        .iter()
        .take(length)
        .map(|byte| char::from(NAME_ALPHABET[usize::from(*byte) % NAME_ALPHABET.len()]))
        .collect()
}

/// Where the examples stand once they all registered, or the time ran out.
struct Examples {
    lines: Vec<String>,
    all_registered: bool,
}

/// Waits until every example manifest is `Registered`, at most [`EXAMPLES_TIMEOUT`]; a line
/// each, with the reason and message of any that is not.
async fn wait_for_examples(client: &kube::Client) -> anyhow::Result<Examples> {
    let deadline = tokio::time::Instant::now() + EXAMPLES_TIMEOUT;
    loop {
        let mut lines = Vec::new();
        lines.extend(example_lines::<Organization>(client).await?);
        lines.extend(example_lines::<Branding>(client).await?);
        lines.extend(example_lines::<IdentityProvider>(client).await?);
        lines.extend(example_lines::<OIDCClient>(client).await?);
        let all_registered = lines.iter().all(|(registered, _)| *registered);
        if all_registered || tokio::time::Instant::now() > deadline {
            return Ok(Examples {
                lines: lines.into_iter().map(|(_, line)| line).collect(),
                all_registered,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn example_lines<K: Declared>(client: &kube::Client) -> anyhow::Result<Vec<(bool, String)>> {
    let listed = Api::<K>::namespaced(client.clone(), EXAMPLES_NAMESPACE)
        .list(&ListParams::default())
        .await
        .with_context(|| format!("cannot list the example {}s", K::kind(&())))?;
    Ok(listed
        .items
        .iter()
        .map(|resource| {
            let status = resource.declared_status();
            let phase = status.and_then(|s| s.phase);
            let registered = phase == Some(Phase::Registered);
            let mut line = format!(
                "  {:<17} {:<22} {}",
                K::kind(&()),
                resource.meta().name.as_deref().unwrap_or_default(),
                phase.map_or("not reconciled yet".to_owned(), |p| p.to_string())
            );
            if !registered && let Some(status) = status {
                line.push_str(&format!(
                    " ({}: {})",
                    status.reason.map(|r| r.to_string()).unwrap_or_default(),
                    status.message.as_deref().unwrap_or_default()
                ));
            }
            (registered, line)
        })
        .collect())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
