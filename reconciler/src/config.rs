//! The reconciler's configuration: command-line flags, each with an environment fallback
//! (`NAUTHERA_*`), checked once at start so that a bad or missing setting fails with a message
//! that names it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use nauthera_shared::client::{ConnectSettings, TlsFiles};

use crate::leader::LeaseTiming;

/// Where a pod finds its own namespace.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Makes Kubernetes manifests (OIDCClient, Branding, IdentityProvider, Organization) the source
/// of truth for nauthera-server.
#[derive(Clone, Debug, Parser)]
#[command(name = "nauthera-reconciler", version, about)]
pub struct Args {
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
    /// The manager name every write carries; the server records it in its audit log.
    #[arg(
        long,
        env = "NAUTHERA_MANAGER",
        default_value = "nauthera-reconciler",
        value_name = "NAME"
    )]
    pub manager: String,
    /// Namespaces to watch (repeat or separate with commas); every namespace when not set.
    #[arg(
        long = "namespace",
        env = "NAUTHERA_NAMESPACES",
        value_delimiter = ',',
        value_name = "NS"
    )]
    pub namespaces: Vec<String>,
    /// Whether to elect a leader on a Lease; only the leader writes.
    #[arg(
        long,
        env = "NAUTHERA_LEADER_ELECTION",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub leader_election: bool,
    /// The Lease the replicas elect a leader on.
    #[arg(
        long,
        env = "NAUTHERA_LEASE_NAME",
        default_value = "nauthera-reconciler",
        value_name = "NAME"
    )]
    pub lease_name: String,
    /// How long the Lease is held without renewal before another replica may take it, in seconds.
    #[arg(
        long,
        env = "NAUTHERA_LEASE_DURATION",
        default_value_t = 15,
        value_name = "SECONDS"
    )]
    pub lease_duration: u64,
    /// How long the leader keeps writing without renewing the Lease, in seconds; shorter than
    /// the lease duration, so that it has stopped before another replica may take over.
    #[arg(
        long,
        env = "NAUTHERA_LEASE_RENEW_DEADLINE",
        default_value_t = 10,
        value_name = "SECONDS"
    )]
    pub lease_renew_deadline: u64,
    /// How often the leader renews the Lease and the other replicas try it, in seconds.
    #[arg(
        long,
        env = "NAUTHERA_LEASE_RETRY_PERIOD",
        default_value_t = 2,
        value_name = "SECONDS"
    )]
    pub lease_retry_period: u64,
    /// The namespace of the Lease and of the published state; the pod's own namespace when not
    /// set (`POD_NAMESPACE`, or the service account's namespace file).
    #[arg(long, env = "NAUTHERA_LEASE_NAMESPACE", value_name = "NS")]
    pub lease_namespace: Option<String>,
    /// This replica's identity in the Lease; the pod's name (`POD_NAME`, `HOSTNAME`) when not set.
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
    /// How often the control plane is probed while it answers, in seconds.
    #[arg(
        long,
        env = "NAUTHERA_PROBE_INTERVAL",
        default_value_t = 60,
        value_name = "SECONDS"
    )]
    pub probe_interval: u64,
    /// How often the control plane is probed while it fails, in seconds.
    #[arg(
        long,
        env = "NAUTHERA_PROBE_RETRY_INTERVAL",
        default_value_t = 15,
        value_name = "SECONDS"
    )]
    pub probe_retry_interval: u64,
    /// How often the change hint is polled when the server cannot stream changes, in seconds.
    #[arg(
        long,
        env = "NAUTHERA_CHANGE_POLL_INTERVAL",
        default_value_t = 10,
        value_name = "SECONDS"
    )]
    pub change_poll_interval: u64,
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
    Invalid {
        setting: &'static str,
        problem: String,
    },
}

fn invalid(setting: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        setting,
        problem: problem.into(),
    }
}

/// The checked configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub connect: ConnectSettings,
    /// The Secret the certificate files are mounted from, as configured.
    pub tls_secret: Option<String>,
    pub manager: String,
    /// Empty: every namespace.
    pub namespaces: Vec<String>,
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
        let address = self.server_address.trim();
        check_server_address(address)?;
        let tls = tls_files(
            self.tls_dir.as_deref(),
            self.tls_cert,
            self.tls_key,
            self.tls_ca,
        )?;
        let mut connect = ConnectSettings::new(address, tls);
        if let Some(name) = self.tls_server_name {
            if name.trim().is_empty() {
                return Err(invalid(
                    "--tls-server-name (NAUTHERA_TLS_SERVER_NAME)",
                    "is empty; leave it unset to use the address's host",
                ));
            }
            connect = connect.with_server_name(name.trim());
        }
        if self.manager.trim().is_empty() {
            return Err(invalid(
                "--manager (NAUTHERA_MANAGER)",
                "is empty; the server records it with every write",
            ));
        }
        let mut namespaces = Vec::new();
        for namespace in self.namespaces {
            let namespace = namespace.trim().to_owned();
            if namespace.is_empty() {
                continue;
            }
            check_dns_label("--namespace (NAUTHERA_NAMESPACES)", &namespace)?;
            if !namespaces.contains(&namespace) {
                namespaces.push(namespace);
            }
        }
        check_dns_subdomain("--lease-name (NAUTHERA_LEASE_NAME)", &self.lease_name)?;
        let own_namespace = self
            .lease_namespace
            .filter(|ns| !ns.trim().is_empty())
            .or(pod.namespace)
            .ok_or_else(|| {
                invalid(
                    "--lease-namespace (NAUTHERA_LEASE_NAMESPACE)",
                    format!(
                        "not set, and neither POD_NAMESPACE nor {SERVICE_ACCOUNT_NAMESPACE_FILE} \
                         says the pod's namespace; set one of them"
                    ),
                )
            })?;
        check_dns_label(
            "--lease-namespace (NAUTHERA_LEASE_NAMESPACE)",
            &own_namespace,
        )?;
        let identity = self
            .identity
            .filter(|id| !id.trim().is_empty())
            .or(pod.name)
            .ok_or_else(|| {
                invalid(
                    "--identity (NAUTHERA_IDENTITY)",
                    "not set, and neither POD_NAME nor HOSTNAME is set; set one of them",
                )
            })?;
        let metrics_address = listen_address(
            "--metrics-address (NAUTHERA_METRICS_ADDRESS)",
            &self.metrics_address,
        )?;
        let probe_address = listen_address(
            "--probe-address (NAUTHERA_PROBE_ADDRESS)",
            &self.probe_address,
        )?;
        if metrics_address.port() != 0 && metrics_address == probe_address {
            return Err(invalid(
                "--probe-address (NAUTHERA_PROBE_ADDRESS)",
                format!("is the same as --metrics-address ({metrics_address}); use another port"),
            ));
        }
        if self.concurrency == 0 {
            return Err(invalid(
                "--concurrency (NAUTHERA_CONCURRENCY)",
                "must be at least 1",
            ));
        }
        let seconds = |setting: &'static str, value: u64| {
            if value == 0 {
                Err(invalid(setting, "must be at least 1 second"))
            } else {
                Ok(Duration::from_secs(value))
            }
        };
        let lease_timing = LeaseTiming {
            duration: seconds(
                "--lease-duration (NAUTHERA_LEASE_DURATION)",
                self.lease_duration,
            )?,
            renew_deadline: seconds(
                "--lease-renew-deadline (NAUTHERA_LEASE_RENEW_DEADLINE)",
                self.lease_renew_deadline,
            )?,
            retry_period: seconds(
                "--lease-retry-period (NAUTHERA_LEASE_RETRY_PERIOD)",
                self.lease_retry_period,
            )?,
        };
        if lease_timing.renew_deadline >= lease_timing.duration {
            return Err(invalid(
                "--lease-renew-deadline (NAUTHERA_LEASE_RENEW_DEADLINE)",
                format!(
                    "{}s is not shorter than --lease-duration ({}s): a leader that cannot renew \
                     must stop writing before another replica may take over",
                    self.lease_renew_deadline, self.lease_duration
                ),
            ));
        }
        if lease_timing.retry_period >= lease_timing.renew_deadline {
            return Err(invalid(
                "--lease-retry-period (NAUTHERA_LEASE_RETRY_PERIOD)",
                format!(
                    "{}s is not shorter than --lease-renew-deadline ({}s): the leader must try \
                     to renew more than once before it stops",
                    self.lease_retry_period, self.lease_renew_deadline
                ),
            ));
        }
        Ok(Config {
            connect,
            tls_secret: self
                .tls_secret
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty()),
            manager: self.manager.trim().to_owned(),
            namespaces,
            leader_election: self.leader_election,
            lease_name: self.lease_name,
            lease_timing,
            own_namespace,
            identity,
            metrics_address,
            probe_address,
            concurrency: self.concurrency,
            log_format: self.log_format,
            probe_interval: seconds(
                "--probe-interval (NAUTHERA_PROBE_INTERVAL)",
                self.probe_interval,
            )?,
            probe_retry_interval: seconds(
                "--probe-retry-interval (NAUTHERA_PROBE_RETRY_INTERVAL)",
                self.probe_retry_interval,
            )?,
            change_poll_interval: seconds(
                "--change-poll-interval (NAUTHERA_CHANGE_POLL_INTERVAL)",
                self.change_poll_interval,
            )?,
        })
    }
}

fn check_server_address(address: &str) -> Result<(), ConfigError> {
    const SETTING: &str = "--server-address (NAUTHERA_SERVER_ADDRESS)";
    let authority = address
        .strip_prefix("https://")
        .unwrap_or(address)
        .trim_end_matches('/');
    if address.starts_with("http://") {
        return Err(invalid(
            SETTING,
            format!("`{address}` is plain http; the AdminService needs mutual TLS: give host:port"),
        ));
    }
    let (host, port) = authority.rsplit_once(':').ok_or_else(|| {
        invalid(
            SETTING,
            format!("`{address}` has no port; give host:port, for example nauthera-server.nauthera.svc:8443"),
        )
    })?;
    if host.is_empty() || host.contains('/') {
        return Err(invalid(
            SETTING,
            format!("`{address}` has no host; give host:port"),
        ));
    }
    match port.parse::<u16>() {
        Ok(port) if port != 0 => Ok(()),
        _ => Err(invalid(
            SETTING,
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
                setting: &'static str|
     -> Result<PathBuf, ConfigError> {
        given.or(from_dir).ok_or_else(|| {
            invalid(
                setting,
                "not set; give --tls-dir (NAUTHERA_TLS_DIR), the folder of a mounted \
                 kubernetes.io/tls Secret, or the file itself",
            )
        })
    };
    Ok(TlsFiles {
        cert: pick(
            cert,
            in_dir.as_ref().map(|f| f.cert.clone()),
            "--tls-cert (NAUTHERA_TLS_CERT)",
        )?,
        key: pick(
            key,
            in_dir.as_ref().map(|f| f.key.clone()),
            "--tls-key (NAUTHERA_TLS_KEY)",
        )?,
        ca: pick(
            ca,
            in_dir.as_ref().map(|f| f.ca.clone()),
            "--tls-ca (NAUTHERA_TLS_CA)",
        )?,
    })
}

/// `:8080` (every interface), `127.0.0.1:8080` or `[::1]:8080`.
fn listen_address(setting: &'static str, value: &str) -> Result<SocketAddr, ConfigError> {
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

fn check_dns_label(setting: &'static str, value: &str) -> Result<(), ConfigError> {
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

fn check_dns_subdomain(setting: &'static str, value: &str) -> Result<(), ConfigError> {
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
