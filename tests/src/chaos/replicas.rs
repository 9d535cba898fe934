//! The two reconciler replicas of a run: each with its own certificate identity (so the audit
//! log says which one wrote), its own path to the Kubernetes API through a proxy the run can cut,
//! and the logs of every process it ran (for the leak scan).

use std::path::PathBuf;

use nauthera_fake_server::{ClientCertOptions, IssuedCert, pki};

use crate::e2e::{Reconciler, Stack};
use crate::proxy::CuttableProxy;

/// The Lease identities of the two replicas.
pub const IDENTITIES: [&str; 2] = ["replica-a", "replica-b"];

/// The SAN a replica's client certificate carries, as the audit log names it.
pub fn certificate_identity(identity: &str) -> String {
    format!("dns:{identity}.nauthera-reconciler.nauthera-system.svc")
}

/// One replica: a process that may be killed and started again.
pub struct Replica {
    pub identity: String,
    pub tls_dir: PathBuf,
    pub proxy: CuttableProxy,
    kubeconfig: PathBuf,
    /// Environment on top of the stack's (its own certificate, the run's retry cap).
    env: Vec<(String, String)>,
    pub process: Option<Reconciler>,
    /// The logs of the processes that ended.
    pub past_logs: Vec<String>,
    /// Every private key this replica's certificates had.
    pub private_keys: Vec<String>,
    pub starts: u64,
    pub kills: u64,
}

impl Replica {
    pub async fn new(
        stack: &Stack,
        identity: &str,
        retry_backoff_max: std::time::Duration,
    ) -> anyhow::Result<Replica> {
        let proxy = CuttableProxy::start(stack.cluster.api_address()?).await?;
        let kubeconfig = stack.kubeconfig_through(identity, &proxy)?;
        let tls_dir = stack.cluster.dir().join(format!("{identity}-tls"));
        let certificate =
            stack
                .pki
                .ca
                .issue_client(&ClientCertOptions::identity(&certificate_identity(
                    identity,
                )))?;
        pki::write_tls_dir(&tls_dir, &certificate, &[stack.pki.ca.cert_pem()])?;
        let env = vec![
            ("NAUTHERA_TLS_DIR".to_owned(), tls_dir.display().to_string()),
            (
                "NAUTHERA_RETRY_BACKOFF_MAX".to_owned(),
                format!("{}ms", retry_backoff_max.as_millis()),
            ),
        ];
        Ok(Replica {
            identity: identity.to_owned(),
            env,
            tls_dir,
            proxy,
            kubeconfig,
            process: None,
            past_logs: Vec::new(),
            private_keys: vec![certificate.key_pem],
            starts: 0,
            kills: 0,
        })
    }

    /// Starts the process (not waiting for readiness: a follower is not ready until it knows
    /// its leader).
    pub async fn start(&mut self, stack: &Stack) -> anyhow::Result<()> {
        let process = stack
            .start_replica_configured(&self.identity, &self.kubeconfig, &self.env)
            .await?;
        self.process = Some(process);
        self.starts += 1;
        Ok(())
    }

    /// `kill -9`, keeping the process's log.
    pub async fn kill(&mut self) {
        if let Some(process) = self.process.take() {
            let path = process.log_path();
            process.kill().await;
            self.past_logs
                .push(std::fs::read_to_string(path).unwrap_or_default());
            self.kills += 1;
        }
    }

    /// Replaces the certificate in place, as cert-manager renews it.
    pub fn install_certificate(&mut self, certificate: &IssuedCert) -> anyhow::Result<()> {
        pki::rotate_client_certificate(&self.tls_dir, certificate)?;
        self.private_keys.push(certificate.key_pem.clone());
        Ok(())
    }

    /// Every log line this replica's processes wrote.
    pub fn all_logs(&self) -> String {
        let mut logs = self.past_logs.join("\n");
        if let Some(process) = &self.process {
            logs.push('\n');
            logs.push_str(&process.log());
        }
        logs
    }
}
