//! The reconciler's configuration: command-line flags, each with an environment fallback
//! (`NAUTHERA_*`), checked once at start so that a bad or missing setting fails with a message
//! that names it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use nauthera_client::{ConnectSettings, TlsFiles};
use nauthera_shared::control_plane::state_configmap_name;
use nauthera_shared::kinds::Kind;
use nauthera_shared::topology::{
    NamespaceMapping, NamespaceSelector, Scope, check_cluster_name, check_prefix,
};

use crate::kubernetes::leader::LeaseTiming;

/// Where a pod finds its own namespace.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Makes Kubernetes manifests (OIDCClient, Branding, IdentityProvider, Organization) the source
/// of truth for nauthera-server.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "nauthera-reconciler",
    version,
    about,
    after_help = "`nauthera-reconciler export --help`: the one-shot export of what the server holds into manifests (docs/export.md)."
)]
pub struct Args {
    /// Where the server is, how to authenticate and how namespaces are named on it.
    #[command(flatten)]
    pub server: ServerArgs,
    /// The manager name every write carries; the server records it in its audit log. Each
    /// reconciler of one server needs its own (its replicas share it): when not set,
    /// `nauthera-reconciler`, `nauthera-reconciler-<shard>` for a shard, and `/<cluster>` after
    /// either with a cluster name. It is also every Event's reportingController and every
    /// write's field manager, so the API server's rules apply: a qualified name (at most 63
    /// letters, digits, '-', '_' and '.' after an optional DNS subdomain prefix and '/') of at
    /// most 128 bytes.
    #[arg(long, env = "NAUTHERA_MANAGER", value_name = "NAME")]
    pub manager: Option<String>,
    /// Namespaces to watch (repeat or separate with commas); every namespace when not set.
    #[arg(
        long = "namespace",
        env = "NAUTHERA_NAMESPACES",
        value_delimiter = ',',
        value_name = "NS"
    )]
    pub namespaces: Vec<String>,
    /// This reconciler's shard of the cluster (a DNS label): it leads on the Lease
    /// `nauthera-reconciler-<shard>` unless --lease-name is given, publishes its state in the
    /// ConfigMap `nauthera-reconciler-state-<shard>`, and reports the other shards whose scopes
    /// overlap its own. Its manager defaults to `nauthera-reconciler-<shard>`, which limits a
    /// shard name to 43 characters unless --manager is given.
    #[arg(long, env = "NAUTHERA_SHARD", value_name = "NAME")]
    pub shard: Option<String>,
    /// Reconcile only the namespaces this label selector selects, written as for `kubectl get
    /// -l` (`team in (a,b),tier=prod`); with --namespace too, only the listed ones it selects.
    #[arg(long, env = "NAUTHERA_NAMESPACE_SELECTOR", value_name = "SELECTOR")]
    pub namespace_selector: Option<String>,
    /// The kinds to reconcile (repeat or separate with commas): OIDCClient, Branding,
    /// IdentityProvider, Organization; every kind when not set.
    #[arg(
        long,
        env = "NAUTHERA_KINDS",
        value_delimiter = ',',
        value_name = "KIND"
    )]
    pub kinds: Vec<String>,
    /// Whether to elect a leader on a Lease; only the leader writes.
    #[arg(
        long,
        env = "NAUTHERA_LEADER_ELECTION",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub leader_election: bool,
    /// The Lease the replicas elect a leader on: `nauthera-reconciler`, or
    /// `nauthera-reconciler-<shard>` with --shard, when not set.
    #[arg(long, env = "NAUTHERA_LEASE_NAME", value_name = "NAME")]
    pub lease_name: Option<String>,
    /// How long the Lease is held without renewal before another replica may take it.
    #[arg(
        long,
        env = "NAUTHERA_LEASE_DURATION",
        default_value = "15s",
        value_parser = nauthera_shared::duration::parse,
        value_name = "DURATION"
    )]
    pub lease_duration: Duration,
    /// How long the leader keeps writing without renewing the Lease,; shorter than
    /// the lease duration, so that it has stopped before another replica may take over.
    #[arg(
        long,
        env = "NAUTHERA_LEASE_RENEW_DEADLINE",
        default_value = "10s",
        value_parser = nauthera_shared::duration::parse,
        value_name = "DURATION"
    )]
    pub lease_renew_deadline: Duration,
    /// How often the leader renews the Lease and the other replicas try it.
    #[arg(
        long,
        env = "NAUTHERA_LEASE_RETRY_PERIOD",
        default_value = "2s",
        value_parser = nauthera_shared::duration::parse,
        value_name = "DURATION"
    )]
    pub lease_retry_period: Duration,
    /// The namespace of the Lease and of the published state; the pod's own namespace when not
    /// set (`POD_NAMESPACE`, or the service account's namespace file).
    #[arg(long, env = "NAUTHERA_LEASE_NAMESPACE", value_name = "NS")]
    pub lease_namespace: Option<String>,
    /// This replica's identity in the Lease (and its Events' reportingInstance, at most 128
    /// characters); the pod's name (`POD_NAME`, `HOSTNAME`) when not set.
    #[arg(long, env = "NAUTHERA_IDENTITY", value_name = "NAME")]
    pub identity: Option<String>,
    /// Where `/metrics` is served (`:8080` means every interface).
    #[arg(
        long,
        env = "NAUTHERA_METRICS_ADDRESS",
        default_value = ":8080",
        value_name = "ADDR"
    )]
    pub metrics_address: String,
    /// Where `/healthz` and `/readyz` are served.
    #[arg(
        long,
        env = "NAUTHERA_PROBE_ADDRESS",
        default_value = ":8081",
        value_name = "ADDR"
    )]
    pub probe_address: String,
    /// How many resources are reconciled at once.
    #[arg(
        long,
        env = "NAUTHERA_CONCURRENCY",
        default_value_t = 4,
        value_name = "N"
    )]
    pub concurrency: u16,
    /// The log format: `json` in a cluster, `text` for people.
    #[arg(
        long,
        env = "NAUTHERA_LOG_FORMAT",
        default_value = "json",
        value_name = "FORMAT"
    )]
    pub log_format: LogFormat,
    /// How often the control plane is probed while it answers.
    #[arg(
        long,
        env = "NAUTHERA_PROBE_INTERVAL",
        default_value = "60s",
        value_parser = nauthera_shared::duration::parse,
        value_name = "DURATION"
    )]
    pub probe_interval: Duration,
    /// How often the control plane is probed while it fails.
    #[arg(
        long,
        env = "NAUTHERA_PROBE_RETRY_INTERVAL",
        default_value = "15s",
        value_parser = nauthera_shared::duration::parse,
        value_name = "DURATION"
    )]
    pub probe_retry_interval: Duration,
    /// How often the change hint is polled when the server cannot stream changes.
    #[arg(
        long,
        env = "NAUTHERA_CHANGE_POLL_INTERVAL",
        default_value = "10s",
        value_parser = nauthera_shared::duration::parse,
        value_name = "DURATION"
    )]
    pub change_poll_interval: Duration,
    /// The longest wait before a failed reconcile is retried (the wait doubles from 1 s up to
    /// this).
    #[arg(
        long,
        env = "NAUTHERA_RETRY_BACKOFF_MAX",
        default_value = "5m",
        value_parser = nauthera_shared::duration::parse,
        value_name = "DURATION"
    )]
    pub retry_backoff_max: Duration,
    /// The shortest `spec.secret.rotation.every` the reconciler honours: a shorter one rotates
    /// at this interval. Lowered only for tests (rotations of a few seconds).
    #[arg(
        long,
        env = "NAUTHERA_MIN_ROTATION_INTERVAL",
        default_value = "1h",
        value_parser = nauthera_shared::duration::parse,
        value_name = "DURATION"
    )]
    pub min_rotation_interval: Duration,
}

/// How to reach the server and name this cluster's namespaces on it: the reconciler's flags
/// that `nauthera-reconciler export` takes too, so the export runs where the certificate is.
#[derive(Clone, Debug, clap::Args)]
pub struct ServerArgs {
    /// The AdminService's `host:port`.
    #[arg(long, env = "NAUTHERA_SERVER_ADDRESS", value_name = "HOST:PORT")]
    pub server_address: String,
    /// The name the server's certificate must carry; the address's host when not set.
    #[arg(long, env = "NAUTHERA_TLS_SERVER_NAME", value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// The folder holding `tls.crt`, `tls.key` and `ca.crt` (a Secret mounted without subPath).
    #[arg(long, env = "NAUTHERA_TLS_DIR", value_name = "DIR")]
    pub tls_dir: Option<PathBuf>,
    /// The client certificate; overrides `<tls-dir>/tls.crt`.
    #[arg(long, env = "NAUTHERA_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's key; overrides `<tls-dir>/tls.key`.
    #[arg(long, env = "NAUTHERA_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// The CA bundle that signed the server's certificate; overrides `<tls-dir>/ca.crt`.
    #[arg(long, env = "NAUTHERA_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// The Secret (in the reconciler's namespace) the certificate files are mounted from, for the
    /// runbooks and `kubectl nauthera diagnose` to name; it is not read.
    #[arg(long, env = "NAUTHERA_TLS_SECRET", value_name = "NAME")]
    pub tls_secret: Option<String>,
    /// This cluster's name, when several clusters configure one server: every namespace is
    /// named `<cluster>/<namespace>` on the server (and in its grants), so that two clusters'
    /// `team-a` declare different objects.
    #[arg(long, env = "NAUTHERA_CLUSTER_NAME", value_name = "NAME")]
    pub cluster_name: Option<String>,
    /// Put this before every namespace on the server instead of `<cluster>/` (for example
    /// `eu-`); needs no cluster name.
    #[arg(long, env = "NAUTHERA_SERVER_NAMESPACE_PREFIX", value_name = "PREFIX")]
    pub server_namespace_prefix: Option<String>,
}

/// What [`ServerArgs`] come to once checked.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    pub connect: ConnectSettings,
    pub cluster_name: Option<String>,
    pub namespace_mapping: NamespaceMapping,
}

impl ServerArgs {
    /// Checks the address, the TLS files, the cluster name and the namespace prefix.
    pub fn into_settings(self) -> Result<ServerSettings, ConfigError> {
        let connect = connect_settings(
            &self.server_address,
            self.tls_dir.as_deref(),
            [self.tls_cert, self.tls_key, self.tls_ca],
            self.tls_server_name,
        )?;
        let cluster_name = trimmed(self.cluster_name);
        if let Some(name) = &cluster_name {
            check_cluster_name(name)
                .map_err(|problem| invalid(setting("cluster-name"), problem))?;
        }
        let prefix = trimmed(self.server_namespace_prefix);
        if let Some(prefix) = &prefix {
            check_prefix(prefix)
                .map_err(|problem| invalid(setting("server-namespace-prefix"), problem))?;
        }
        let namespace_mapping =
            NamespaceMapping::for_cluster(cluster_name.as_deref(), prefix.as_deref());
        Ok(ServerSettings {
            connect,
            cluster_name,
            namespace_mapping,
        })
    }
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// A setting that cannot be used; the message names the flag and its environment variable.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{setting}: {problem}")]
    Invalid { setting: String, problem: String },
}

fn invalid(setting: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        setting: setting.into(),
        problem: problem.into(),
    }
}

/// The manager name of a reconciler that was given none: one per cluster.
pub fn default_manager(cluster: Option<&str>, shard: Option<&str>) -> String {
    let reconciler = match shard {
        Some(shard) => format!("{DEFAULT_MANAGER}-{shard}"),
        None => DEFAULT_MANAGER.to_owned(),
    };
    match cluster {
        Some(cluster) => format!("{reconciler}/{cluster}"),
        None => reconciler,
    }
}

/// The manager name of a reconciler in a cluster without a name.
pub const DEFAULT_MANAGER: &str = "nauthera-reconciler";

/// How messages name a setting: its flag and environment variable, as the flag defines them
/// (`--probe-interval (NAUTHERA_PROBE_INTERVAL)`).
pub fn setting(long: &str) -> String {
    use clap::CommandFactory;
    let command = Args::command();
    let Some(arg) = command
        .get_arguments()
        .find(|arg| arg.get_long() == Some(long))
    else {
        return format!("--{long}");
    };
    match arg.get_env() {
        Some(env) => format!("--{long} ({})", env.to_string_lossy()),
        None => format!("--{long}"),
    }
}

/// The checked configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub connect: ConnectSettings,
    /// The Secret the certificate files are mounted from, as configured.
    pub tls_secret: Option<String>,
    pub manager: String,
    /// The cluster's name, when given.
    pub cluster_name: Option<String>,
    /// How namespaces are named on the server.
    pub namespace_mapping: NamespaceMapping,
    /// Empty: every namespace.
    pub namespaces: Vec<String>,
    /// The part of the cluster this reconciler reconciles: its shard name, the namespaces above,
    /// the namespace selector and the kinds.
    pub scope: Scope,
    /// The ConfigMap the leader publishes its state into.
    pub state_configmap: String,
    pub leader_election: bool,
    pub lease_name: String,
    pub lease_timing: LeaseTiming,
    /// The namespace of the Lease and of the published state.
    pub own_namespace: String,
    pub identity: String,
    pub metrics_address: SocketAddr,
    pub probe_address: SocketAddr,
    pub concurrency: u16,
    pub log_format: LogFormat,
    pub probe_interval: Duration,
    pub probe_retry_interval: Duration,
    pub change_poll_interval: Duration,
    pub retry_backoff_max: Duration,
    pub min_rotation_interval: Duration,
}

/// What the process environment says about the pod, read by the caller so that tests pass
/// plain values.
#[derive(Clone, Debug, Default)]
pub struct PodFacts {
    /// `POD_NAMESPACE`, else the service account's namespace file.
    pub namespace: Option<String>,
    /// `POD_NAME`, else `HOSTNAME`.
    pub name: Option<String>,
}

impl PodFacts {
    /// Reads the pod's namespace and name from the environment and the service account mount.
    pub fn from_environment() -> PodFacts {
        let non_empty = |value: String| {
            let value = value.trim().to_owned();
            (!value.is_empty()).then_some(value)
        };
        let namespace = std::env::var("POD_NAMESPACE")
            .ok()
            .and_then(non_empty)
            .or_else(|| {
                std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE)
                    .ok()
                    .and_then(non_empty)
            });
        let name = std::env::var("POD_NAME")
            .ok()
            .and_then(non_empty)
            .or_else(|| std::env::var("HOSTNAME").ok().and_then(non_empty));
        PodFacts { namespace, name }
    }
}

impl Args {
    /// Checks every setting and fills in the pod's facts.
    pub fn into_config(self, pod: PodFacts) -> Result<Config, ConfigError> {
        let tls_secret = trimmed(self.server.tls_secret.clone());
        let ServerSettings {
            connect,
            cluster_name,
            namespace_mapping,
        } = self.server.into_settings()?;
        let shard = trimmed(self.shard);
        if let Some(shard) = &shard {
            check_shard_name(shard)?;
        }
        let given = self.manager.is_some();
        let manager = match self.manager {
            Some(manager) if manager.trim().is_empty() => {
                return Err(invalid(
                    setting("manager"),
                    "is empty; the server records it with every write",
                ));
            }
            Some(manager) => manager.trim().to_owned(),
            None => default_manager(cluster_name.as_deref(), shard.as_deref()),
        };
        check_manager(&manager, given, shard.as_deref(), cluster_name.as_deref())?;
        let namespaces = listed_namespaces(self.namespaces)?;
        let namespace_selector = self
            .namespace_selector
            .filter(|selector| !selector.trim().is_empty())
            .map(|selector| NamespaceSelector::parse(&selector))
            .transpose()
            .map_err(|problem| {
                invalid(
                    setting("namespace-selector"),
                    format!("{problem} (write it as for kubectl get -l)"),
                )
            })?;
        let kinds = scope_kinds(&self.kinds)?;
        let scope = Scope {
            shard: shard.clone(),
            namespaces: namespaces.clone(),
            namespace_selector,
            kinds,
        };
        let lease_name = match self.lease_name.filter(|name| !name.trim().is_empty()) {
            Some(name) => name.trim().to_owned(),
            None => default_lease_name(shard.as_deref()),
        };
        check_dns_subdomain(&setting("lease-name"), &lease_name)?;
        let own_namespace = self
            .lease_namespace
            .filter(|ns| !ns.trim().is_empty())
            .or(pod.namespace)
            .ok_or_else(|| {
                invalid(
                    setting("lease-namespace"),
                    format!(
                        "not set, and neither POD_NAMESPACE nor {SERVICE_ACCOUNT_NAMESPACE_FILE} \
                         says the pod's namespace; set one of them"
                    ),
                )
            })?;
        check_dns_label(&setting("lease-namespace"), &own_namespace)?;
        let identity = self
            .identity
            .filter(|id| !id.trim().is_empty())
            .or(pod.name)
            .ok_or_else(|| {
                invalid(
                    setting("identity"),
                    "not set, and neither POD_NAME nor HOSTNAME is set; set one of them",
                )
            })?;
        check_identity(&identity)?;
        let (metrics_address, probe_address) =
            listen_addresses(&self.metrics_address, &self.probe_address)?;
        if self.concurrency == 0 {
            return Err(invalid(setting("concurrency"), "must be at least 1"));
        }
        let lease_timing = lease_timing(LeaseTiming {
            duration: self.lease_duration,
            renew_deadline: self.lease_renew_deadline,
            retry_period: self.lease_retry_period,
        })?;
        Ok(Config {
            connect,
            tls_secret,
            manager,
            cluster_name,
            namespace_mapping,
            namespaces,
            state_configmap: state_configmap_name(scope.shard.as_deref()),
            scope,
            leader_election: self.leader_election,
            lease_name,
            lease_timing,
            own_namespace,
            identity,
            metrics_address,
            probe_address,
            concurrency: self.concurrency,
            log_format: self.log_format,
            probe_interval: positive("probe-interval", self.probe_interval)?,
            probe_retry_interval: positive("probe-retry-interval", self.probe_retry_interval)?,
            change_poll_interval: positive("change-poll-interval", self.change_poll_interval)?,
            retry_backoff_max: positive("retry-backoff-max", self.retry_backoff_max)?,
            min_rotation_interval: positive("min-rotation-interval", self.min_rotation_interval)?,
        })
    }
}

/// A setting given as text, trimmed; blank is unset.
fn trimmed(value: Option<String>) -> Option<String> {
    value
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// How to reach the server: its address, the TLS files (from a folder, or the certificate, key
/// and CA each), and the name its certificate must carry when not the address's host.
fn connect_settings(
    address: &str,
    tls_dir: Option<&Path>,
    [cert, key, ca]: [Option<PathBuf>; 3],
    server_name: Option<String>,
) -> Result<ConnectSettings, ConfigError> {
    let address = address.trim();
    check_server_address(address)?;
    let tls = tls_files(tls_dir, cert, key, ca)?;
    let connect = ConnectSettings::new(address, tls);
    let Some(name) = server_name else {
        return Ok(connect);
    };
    if name.trim().is_empty() {
        return Err(invalid(
            setting("tls-server-name"),
            "is empty; leave it unset to use the address's host",
        ));
    }
    Ok(connect.with_server_name(name.trim()))
}

/// The namespaces given, each once and checked; blank ones are left out.
fn listed_namespaces(given: Vec<String>) -> Result<Vec<String>, ConfigError> {
    let mut namespaces = Vec::new();
    for namespace in given {
        let namespace = namespace.trim().to_owned();
        if namespace.is_empty() {
            continue;
        }
        check_dns_label(&setting("namespace"), &namespace)?;
        if !namespaces.contains(&namespace) {
            namespaces.push(namespace);
        }
    }
    Ok(namespaces)
}

/// The metrics and probe addresses, which must not be the same port.
fn listen_addresses(metrics: &str, probe: &str) -> Result<(SocketAddr, SocketAddr), ConfigError> {
    let metrics_address = listen_address(&setting("metrics-address"), metrics)?;
    let probe_address = listen_address(&setting("probe-address"), probe)?;
    if metrics_address.port() != 0 && metrics_address == probe_address {
        return Err(invalid(
            setting("probe-address"),
            format!("is the same as --metrics-address ({metrics_address}); use another port"),
        ));
    }
    Ok((metrics_address, probe_address))
}

/// A duration setting, which must be longer than zero.
fn positive(long: &str, value: Duration) -> Result<Duration, ConfigError> {
    if value.is_zero() {
        Err(invalid(
            setting(long),
            "must be longer than zero; write it like 15s",
        ))
    } else {
        Ok(value)
    }
}

/// The Lease timing given, in its order: a leader stops writing before another replica may take
/// the Lease, and tries to renew more than once before it stops.
fn lease_timing(given: LeaseTiming) -> Result<LeaseTiming, ConfigError> {
    let timing = LeaseTiming {
        duration: positive("lease-duration", given.duration)?,
        renew_deadline: positive("lease-renew-deadline", given.renew_deadline)?,
        retry_period: positive("lease-retry-period", given.retry_period)?,
    };
    let shown = nauthera_shared::duration::format;
    if timing.renew_deadline >= timing.duration {
        return Err(invalid(
            setting("lease-renew-deadline"),
            format!(
                "{} is not shorter than {} ({}): a leader that cannot renew must stop \
                 writing before another replica may take over",
                shown(timing.renew_deadline),
                setting("lease-duration"),
                shown(timing.duration),
            ),
        ));
    }
    if timing.retry_period >= timing.renew_deadline {
        return Err(invalid(
            setting("lease-retry-period"),
            format!(
                "{} is not shorter than {} ({}): the leader must try to renew more than \
                 once before it stops",
                shown(timing.retry_period),
                setting("lease-renew-deadline"),
                shown(timing.renew_deadline),
            ),
        ));
    }
    Ok(timing)
}

/// The Lease a reconciler leads on when none is named: one per shard.
pub fn default_lease_name(shard: Option<&str>) -> String {
    match shard {
        Some(shard) => format!("nauthera-reconciler-{shard}"),
        None => "nauthera-reconciler".to_owned(),
    }
}

/// A shard's name becomes part of its Lease's and ConfigMap's names: a DNS label.
fn check_shard_name(shard: &str) -> Result<(), ConfigError> {
    let valid = shard.len() <= 63
        && shard
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !shard.starts_with('-')
        && !shard.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(invalid(
            setting("shard"),
            format!(
                "`{shard}` is not a shard name: use up to 63 lower-case letters, digits and '-', \
                 starting and ending with a letter or digit (for example team-a)"
            ),
        ))
    }
}

/// The longest `reportingInstance` and `action` of an Event (`ReportingInstanceLengthLimit`
/// and `ActionLengthLimit` of k8s.io/kubernetes pkg/apis/core/validation/events.go).
pub const EVENT_REPORTING_INSTANCE_MAX: usize = 128;
pub const EVENT_ACTION_MAX: usize = 128;
// The action every Event carries is fixed; it fits.
const _: () = assert!(crate::kubernetes::events::ACTION.len() <= EVENT_ACTION_MAX);

/// The manager name is the `reportingController` of every Event the reconciler records (a
/// qualified name: at most 63 characters after an optional DNS subdomain prefix and `/`) and the
/// field manager of every write (at most 128 bytes, all printable). The API server refuses an
/// Event or a server-side apply that breaks either rule with a 422, which nobody would read:
/// every event would be lost and no status written. The message names the setting the name
/// comes from: `--manager`, or `--shard` (and `--cluster-name`) for the default name.
fn check_manager(
    manager: &str,
    given: bool,
    shard: Option<&str>,
    cluster: Option<&str>,
) -> Result<(), ConfigError> {
    use nauthera_shared::kube_names::{
        FIELD_MANAGER_MAX, QUALIFIED_NAME_MAX, field_manager, qualified_name,
    };
    let as_controller = qualified_name(manager);
    let as_field_manager = field_manager(manager);
    if as_controller.is_empty() && as_field_manager.is_empty() {
        return Ok(());
    }
    let mut refused = Vec::new();
    if !as_controller.is_empty() {
        refused.push(format!(
            "the API server would refuse every Event the reconciler records, whose \
             reportingController it is ({}; a qualified name is at most {QUALIFIED_NAME_MAX} \
             letters, digits, '-', '_' and '.', beginning and ending with a letter or digit, \
             after an optional DNS subdomain prefix and '/')",
            as_controller.join("; ")
        ));
    }
    if !as_field_manager.is_empty() {
        refused.push(format!(
            "the API server would refuse every write the reconciler makes, whose field manager \
             it is ({}; at most {FIELD_MANAGER_MAX} bytes)",
            as_field_manager.join("; ")
        ));
    }
    let refused = refused.join(", and ");
    if given {
        return Err(invalid(
            setting("manager"),
            format!("`{manager}` cannot be used: {refused}"),
        ));
    }
    let prefix = DEFAULT_MANAGER.len() + 1;
    let (blamed, from, shorter) = match (shard, cluster) {
        // `nauthera-reconciler-<shard>/<cluster>`: a field manager of 128 bytes at most.
        (Some(_), Some(cluster)) => (
            format!("{} with {}", setting("shard"), setting("cluster-name")),
            "them",
            format!(
                "use a shard name of at most {} characters",
                FIELD_MANAGER_MAX.saturating_sub(prefix + 1 + cluster.len())
            ),
        ),
        // `nauthera-reconciler-<shard>`: a qualified name of 63 characters at most.
        (Some(_), None) => (
            setting("shard"),
            "it",
            format!(
                "use a shard name of at most {} characters",
                QUALIFIED_NAME_MAX.saturating_sub(prefix)
            ),
        ),
        (None, _) => (
            setting("cluster-name"),
            "it",
            "use a shorter cluster name".to_owned(),
        ),
    };
    Err(invalid(
        blamed,
        format!(
            "the manager name made from {from}, `{manager}` ({} characters), cannot be used: \
             {refused}; {shorter}, or give this reconciler a {} of its own",
            manager.len(),
            setting("manager")
        ),
    ))
}

/// This replica's identity is the `reportingInstance` of every Event it records: at most 128
/// characters, or the API server refuses every one of them.
fn check_identity(identity: &str) -> Result<(), ConfigError> {
    if identity.len() <= EVENT_REPORTING_INSTANCE_MAX {
        return Ok(());
    }
    Err(invalid(
        setting("identity"),
        format!(
            "`{identity}` has {} characters; it is the reportingInstance of every Event the \
             reconciler records, and the API server refuses one of more than \
             {EVENT_REPORTING_INSTANCE_MAX} (the identity is the pod's name when not set): set a \
             shorter one",
            identity.len()
        ),
    ))
}

/// The kinds given, in [`Kind::ALL`]'s order; every kind when none is.
fn scope_kinds(given: &[String]) -> Result<Vec<Kind>, ConfigError> {
    let mut kinds = Vec::new();
    for text in given
        .iter()
        .map(|text| text.trim())
        .filter(|t| !t.is_empty())
    {
        let kind = Kind::named(text).ok_or_else(|| {
            let valid: Vec<&str> = Kind::ALL.iter().map(|kind| kind.as_str()).collect();
            invalid(
                setting("kinds"),
                format!("`{text}` is not a kind; give some of {}", valid.join(", ")),
            )
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        return Ok(Kind::ALL.to_vec());
    }
    kinds.sort();
    Ok(kinds)
}

fn check_server_address(address: &str) -> Result<(), ConfigError> {
    let setting = setting("server-address");
    let authority = address
        .strip_prefix("https://")
        .unwrap_or(address)
        .trim_end_matches('/');
    if address.starts_with("http://") {
        return Err(invalid(
            &setting,
            format!("`{address}` is plain http; the AdminService needs mutual TLS: give host:port"),
        ));
    }
    let (host, port) = authority.rsplit_once(':').ok_or_else(|| {
        invalid(
            &setting,
            format!("`{address}` has no port; give host:port, for example nauthera-server.nauthera.svc:8443"),
        )
    })?;
    if host.is_empty() || host.contains('/') {
        return Err(invalid(
            &setting,
            format!("`{address}` has no host; give host:port"),
        ));
    }
    match port.parse::<u16>() {
        Ok(port) if port != 0 => Ok(()),
        _ => Err(invalid(
            &setting,
            format!("`{port}` is not a port number (1-65535)"),
        )),
    }
}

/// The three files: each named on its own, or found in the folder.
fn tls_files(
    dir: Option<&Path>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
) -> Result<TlsFiles, ConfigError> {
    let in_dir = dir.map(TlsFiles::in_dir);
    let pick = |given: Option<PathBuf>,
                from_dir: Option<PathBuf>,
                long: &str|
     -> Result<PathBuf, ConfigError> {
        given.or(from_dir).ok_or_else(|| {
            invalid(
                setting(long),
                format!(
                    "not set; give {}, the folder of a mounted kubernetes.io/tls Secret, or the \
                     file itself",
                    setting("tls-dir")
                ),
            )
        })
    };
    Ok(TlsFiles {
        cert: pick(cert, in_dir.as_ref().map(|f| f.cert.clone()), "tls-cert")?,
        key: pick(key, in_dir.as_ref().map(|f| f.key.clone()), "tls-key")?,
        ca: pick(ca, in_dir.as_ref().map(|f| f.ca.clone()), "tls-ca")?,
    })
}

/// `:8080` (every interface), `127.0.0.1:8080` or `[::1]:8080`.
fn listen_address(setting: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    let value = value.trim();
    let full = match value.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => value.to_owned(),
    };
    full.parse().map_err(|_| {
        invalid(
            setting,
            format!("`{value}` is not a listen address; give :PORT or IP:PORT"),
        )
    })
}

fn check_dns_label(setting: &str, value: &str) -> Result<(), ConfigError> {
    let valid = !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(invalid(
            setting,
            format!(
                "`{value}` is not a Kubernetes namespace name (lower-case letters, digits, '-')"
            ),
        ))
    }
}

fn check_dns_subdomain(setting: &str, value: &str) -> Result<(), ConfigError> {
    let valid = !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if valid {
        Ok(())
    } else {
        Err(invalid(
            setting,
            format!("`{value}` is not a Kubernetes object name"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> PodFacts {
        PodFacts {
            namespace: Some("nauthera".into()),
            name: Some("nauthera-reconciler-7d9f-abcde".into()),
        }
    }

    fn parse(extra: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["nauthera-reconciler", "--tls-dir", "/tls"];
        if !extra.contains(&"--server-address") {
            argv.extend(["--server-address", "nauthera-server.nauthera.svc:8443"]);
        }
        argv.extend_from_slice(extra);
        let args = Args::try_parse_from(argv).map_err(|e| e.to_string())?;
        args.into_config(pod()).map_err(|e| e.to_string())
    }

    #[test]
    fn a_cluster_name_maps_namespaces_and_names_the_manager() {
        let config = parse(&["--cluster-name", "prod-eu"]).unwrap();
        assert_eq!(config.manager, "nauthera-reconciler/prod-eu");
        assert_eq!(
            config.namespace_mapping.to_server("team-a"),
            "prod-eu/team-a"
        );
        let config = parse(&["--cluster-name", "prod-eu", "--manager", "eu-reconciler"]).unwrap();
        assert_eq!(config.manager, "eu-reconciler");
        let config = parse(&["--server-namespace-prefix", "eu-"]).unwrap();
        assert_eq!(config.namespace_mapping.to_server("team-a"), "eu-team-a");
        assert_eq!(config.manager, "nauthera-reconciler");
        for (argv, named) in [
            (
                ["--cluster-name", "Prod EU"],
                "--cluster-name (NAUTHERA_CLUSTER_NAME)",
            ),
            (
                ["--server-namespace-prefix", "eu"],
                "--server-namespace-prefix (NAUTHERA_SERVER_NAMESPACE_PREFIX)",
            ),
        ] {
            let error = parse(&argv).unwrap_err();
            assert!(error.starts_with(named), "{error}");
        }
    }

    #[test]
    fn defaults_follow_the_design() {
        let config = parse(&[]).unwrap();
        assert_eq!(config.manager, "nauthera-reconciler");
        assert!(config.namespaces.is_empty());
        assert!(config.leader_election);
        assert_eq!(config.lease_name, "nauthera-reconciler");
        assert_eq!(config.own_namespace, "nauthera");
        assert_eq!(config.identity, "nauthera-reconciler-7d9f-abcde");
        assert_eq!(config.metrics_address, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(config.probe_address, "0.0.0.0:8081".parse().unwrap());
        assert_eq!(config.log_format, LogFormat::Json);
        assert_eq!(config.probe_interval, Duration::from_secs(60));
        assert_eq!(config.probe_retry_interval, Duration::from_secs(15));
        assert_eq!(config.lease_timing, LeaseTiming::default());
        assert_eq!(config.connect.tls, TlsFiles::in_dir("/tls"));
        assert_eq!(config.connect.server_name, None);
    }

    #[test]
    fn single_files_override_the_folder_and_namespaces_split_on_commas() {
        let config = parse(&[
            "--tls-ca",
            "/trust/ca.pem",
            "--namespace",
            "team-a,team-b",
            "--namespace",
            "team-a",
            "--tls-server-name",
            "admin.nauthera.test",
            "--log-format",
            "text",
        ])
        .unwrap();
        assert_eq!(config.connect.tls.ca, PathBuf::from("/trust/ca.pem"));
        assert_eq!(config.connect.tls.cert, PathBuf::from("/tls/tls.crt"));
        assert_eq!(config.namespaces, vec!["team-a", "team-b"]);
        assert_eq!(
            config.connect.server_name.as_deref(),
            Some("admin.nauthera.test")
        );
        assert_eq!(config.log_format, LogFormat::Text);
    }

    #[test]
    fn each_bad_setting_is_named() {
        let cases: &[(&[&str], &str)] = &[
            (&["--server-address", "server"], "--server-address"),
            (&["--server-address", "http://server:80"], "plain http"),
            (&["--server-address", "server:http"], "not a port number"),
            (&["--metrics-address", "eighty"], "--metrics-address"),
            (&["--probe-address", ":8080"], "same as --metrics-address"),
            (&["--concurrency", "0"], "--concurrency"),
            (&["--namespace", "Team_A"], "--namespace"),
            (&["--lease-name=-x"], "--lease-name"),
            (&["--manager", " "], "--manager"),
            (&["--probe-interval", "0"], "--probe-interval"),
            (
                &["--probe-interval", "soon"],
                "`soon` is not a duration; write it like 90s, 1m30s or 2m",
            ),
            (
                &["--lease-renew-deadline", "20s"],
                "20s is not shorter than --lease-duration (NAUTHERA_LEASE_DURATION) (15s)",
            ),
            (&["--log-format", "xml"], "--log-format"),
            (
                &["--lease-renew-deadline", "15"],
                "not shorter than --lease-duration",
            ),
            (
                &["--lease-retry-period", "10"],
                "not shorter than --lease-renew-deadline",
            ),
            (&["--lease-duration", "0"], "--lease-duration"),
        ];
        for (argv, expected) in cases {
            let error = parse(argv).unwrap_err();
            assert!(error.contains(expected), "{argv:?}: {error}");
        }
    }

    #[test]
    fn durations_are_read_as_kubectl_writes_them() {
        let config = parse(&[
            "--probe-interval",
            "1m30s",
            "--probe-retry-interval",
            "20",
            "--change-poll-interval",
            "500ms",
            "--lease-duration",
            "1m",
            "--lease-renew-deadline",
            "40s",
            "--lease-retry-period",
            "5s",
            "--retry-backoff-max",
            "30s",
        ])
        .unwrap();
        assert_eq!(config.retry_backoff_max, Duration::from_secs(30));
        assert_eq!(config.probe_interval, Duration::from_secs(90));
        assert_eq!(config.probe_retry_interval, Duration::from_secs(20));
        assert_eq!(config.change_poll_interval, Duration::from_millis(500));
        assert_eq!(config.lease_timing.duration, Duration::from_secs(60));
        assert_eq!(config.lease_timing.renew_deadline, Duration::from_secs(40));
        assert_eq!(config.lease_timing.retry_period, Duration::from_secs(5));
    }

    #[test]
    fn a_shard_has_its_own_lease_and_state_and_an_explicit_lease_wins() {
        let unsharded = parse(&[]).unwrap();
        assert_eq!(unsharded.scope, Scope::everything());
        assert_eq!(unsharded.state_configmap, "nauthera-reconciler-state");
        assert_eq!(unsharded.manager, "nauthera-reconciler");
        let shard = parse(&[
            "--shard",
            "team-a",
            "--namespace",
            "team-a-web,team-a-api",
            "--manager",
            "nauthera-team-a",
        ])
        .unwrap();
        assert_eq!(shard.lease_name, "nauthera-reconciler-team-a");
        assert_eq!(shard.state_configmap, "nauthera-reconciler-state-team-a");
        assert_eq!(shard.scope.shard.as_deref(), Some("team-a"));
        assert_eq!(shard.scope.namespaces, vec!["team-a-web", "team-a-api"]);
        assert_eq!(shard.scope.kinds, Kind::ALL.to_vec());
        assert_eq!(shard.manager, "nauthera-team-a");
        let named = parse(&["--shard", "team-a", "--lease-name", "elect-here"]).unwrap();
        assert_eq!(named.lease_name, "elect-here");
        // Each shard writes as a manager of its own, so the server tells their writes apart.
        assert_eq!(named.manager, "nauthera-reconciler-team-a");
        let downstream = parse(&["--shard", "team-a", "--cluster-name", "prod-eu"]).unwrap();
        assert_eq!(downstream.manager, "nauthera-reconciler-team-a/prod-eu");
    }

    #[test]
    fn a_selector_and_kinds_limit_the_scope() {
        let config = parse(&[
            "--namespace-selector",
            "team in (a,b), tier=prod",
            "--kinds",
            "organization,OIDCClient",
            "--kinds",
            "oidcclient",
        ])
        .unwrap();
        let selector = config.scope.namespace_selector.as_ref().unwrap();
        assert_eq!(selector.as_str(), "team in (a,b), tier=prod");
        assert_eq!(
            selector.parsed().match_expressions.as_ref().unwrap().len(),
            2
        );
        assert_eq!(
            config.scope.kinds,
            vec![Kind::OidcClient, Kind::Organization]
        );
        assert_eq!(config.lease_name, "nauthera-reconciler");
        assert!(
            parse(&["--namespace-selector", " "])
                .unwrap()
                .scope
                .namespace_selector
                .is_none()
        );
    }

    #[test]
    fn a_bad_shard_selector_or_kind_is_named() {
        let cases: &[(&[&str], &str)] = &[
            (&["--shard", "Team_A"], "--shard (NAUTHERA_SHARD)"),
            (&["--shard=a-"], "not a shard name"),
            (
                &["--namespace-selector", "team in a"],
                "--namespace-selector (NAUTHERA_NAMESPACE_SELECTOR)",
            ),
            (&["--namespace-selector", "team=(a)"], "unexpected"),
            (
                &["--kinds", "OIDCClient,Secret"],
                "--kinds (NAUTHERA_KINDS): `Secret` is not a kind; give some of OIDCClient, \
                 Branding, IdentityProvider, Organization",
            ),
        ];
        for (argv, expected) in cases {
            let error = parse(argv).unwrap_err();
            assert!(error.contains(expected), "{argv:?}: {error}");
        }
    }

    #[test]
    fn a_manager_the_api_server_would_refuse_in_events_or_writes_is_named_at_start() {
        // 43 characters of shard make a manager of 63: the longest an Event takes.
        let longest = "s".repeat(43);
        let fits = parse(&["--shard", &longest]).unwrap();
        assert_eq!(fits.manager.len(), 63);
        let error = parse(&["--shard", &"s".repeat(44)]).unwrap_err();
        assert!(
            error.starts_with(
                "--shard (NAUTHERA_SHARD): the manager name made from it, `nauthera-reconciler-sss"
            ),
            "{error}"
        );
        assert!(
            error.contains("(64 characters)")
                && error.contains("name part must be no more than 63 characters")
                && error.contains("use a shard name of at most 43 characters")
                && error.contains("--manager (NAUTHERA_MANAGER)"),
            "{error}"
        );
        // With a cluster name the shard is a DNS prefix; the field manager's 128 bytes bound it.
        let cluster = "c".repeat(63);
        parse(&["--shard", &"s".repeat(43), "--cluster-name", &cluster]).unwrap();
        parse(&["--shard", &"s".repeat(44), "--cluster-name", &cluster]).unwrap();
        let error = parse(&["--shard", &"s".repeat(63), "--cluster-name", &cluster]).unwrap_err();
        assert!(
            error.starts_with(
                "--shard (NAUTHERA_SHARD) with --cluster-name (NAUTHERA_CLUSTER_NAME):"
            ) && error.contains("may not be more than 128 bytes")
                && error.contains("at most 44 characters")
                && !error.contains("reportingController"),
            "{error}"
        );
        // A manager given is checked as given.
        for (manager, said) in [
            (
                "nauthera reconciler",
                "name part must consist of alphanumeric characters",
            ),
            (
                "Team.Example/web",
                "prefix part a lowercase RFC 1123 subdomain",
            ),
            ("a/b/c", "a qualified name must consist of"),
        ] {
            let error = parse(&["--manager", manager]).unwrap_err();
            assert!(
                error.starts_with(&format!(
                    "--manager (NAUTHERA_MANAGER): `{manager}` cannot be used"
                )) && error.contains(said),
                "{error}"
            );
        }
        parse(&["--manager", &"m".repeat(63)]).unwrap();
        parse(&["--manager", "security.example.com/nauthera_eu-1"]).unwrap();
        parse(&["--cluster-name", &cluster]).unwrap();
    }

    #[test]
    fn an_identity_longer_than_an_events_reporting_instance_is_named() {
        parse(&["--identity", &"i".repeat(128)]).unwrap();
        let error = parse(&["--identity", &"i".repeat(129)]).unwrap_err();
        assert!(
            error.starts_with("--identity (NAUTHERA_IDENTITY):")
                && error.contains("has 129 characters")
                && error.contains("more than 128"),
            "{error}"
        );
        // The action every Event carries fits too.
        assert!(crate::kubernetes::events::ACTION.len() <= EVENT_ACTION_MAX);
    }

    #[test]
    fn messages_name_each_flag_as_it_is_defined() {
        assert_eq!(
            setting("probe-interval"),
            "--probe-interval (NAUTHERA_PROBE_INTERVAL)"
        );
        assert_eq!(setting("namespace"), "--namespace (NAUTHERA_NAMESPACES)");
    }

    /// Every flag a message names through `setting("...")` is one the command defines, so a
    /// misspelt name cannot slip into a message unnoticed.
    #[test]
    fn every_setting_named_in_a_message_is_a_defined_flag() {
        use clap::CommandFactory;
        let command = Args::command();
        let defined: Vec<&str> = command
            .get_arguments()
            .filter_map(clap::Arg::get_long)
            .collect();
        let sources = [include_str!("config.rs"), include_str!("run.rs")];
        let mut named = 0;
        for source in sources {
            for (at, call) in source.match_indices("setting(\"") {
                let rest = &source[at + call.len()..];
                let long = &rest[..rest.find('"').unwrap_or(0)];
                // A flag's name, not this test's own prose.
                if long.is_empty() || !long.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                    continue;
                }
                assert!(defined.contains(&long), "setting(\"{long}\") names no flag");
                named += 1;
            }
        }
        assert!(named > 20, "{named}");
    }

    #[test]
    fn a_missing_server_address_is_named() {
        let error = Args::try_parse_from(["nauthera-reconciler", "--tls-dir", "/tls"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("--server-address"), "{error}");
    }

    #[test]
    fn missing_tls_files_are_named() {
        let args = Args::try_parse_from(["nauthera-reconciler", "--server-address", "server:8443"])
            .unwrap();
        let error = args.into_config(pod()).unwrap_err().to_string();
        assert!(error.starts_with("--tls-cert"), "{error}");
        assert!(error.contains("--tls-dir"), "{error}");
    }

    #[test]
    fn the_pod_namespace_and_name_are_needed_when_not_given() {
        let args = || {
            Args::try_parse_from([
                "nauthera-reconciler",
                "--server-address",
                "server:8443",
                "--tls-dir",
                "/tls",
            ])
            .unwrap()
        };
        let error = args()
            .into_config(PodFacts {
                namespace: None,
                name: Some("pod".into()),
            })
            .unwrap_err()
            .to_string();
        assert!(error.contains("--lease-namespace") && error.contains("POD_NAMESPACE"));
        let error = args()
            .into_config(PodFacts {
                namespace: Some("ns".into()),
                name: None,
            })
            .unwrap_err()
            .to_string();
        assert!(error.contains("--identity") && error.contains("POD_NAME"));
    }
}
