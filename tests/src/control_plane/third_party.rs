//! The CRDs of the projects the production install relies on (cert-manager's Certificate and
//! ClusterIssuer, the Prometheus Operator's ServiceMonitor and PrometheusRule), taken at test time
//! from those projects' own Go modules at a pinned version, through the Go module proxy: never
//! copied into this repository, never a download of anything but a module.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use kube::api::DynamicObject;

/// A project whose module ships CRD manifests.
#[derive(Clone, Copy, Debug)]
pub struct CrdSource {
    pub module: &'static str,
    pub version: &'static str,
    /// The folder inside the module that holds one CRD per YAML file.
    pub folder: &'static str,
}

/// cert-manager, whose Certificate `deploy/components/cert-manager` declares.
pub const CERT_MANAGER: CrdSource = CrdSource {
    module: "github.com/cert-manager/cert-manager",
    version: "v1.19.2",
    folder: "deploy/crds",
};

/// The Prometheus Operator, whose ServiceMonitor and PrometheusRule `deploy/components/monitoring`
/// declares.
pub const PROMETHEUS_OPERATOR: CrdSource = CrdSource {
    module: "github.com/prometheus-operator/prometheus-operator",
    version: "v0.85.0",
    folder: "example/prometheus-operator-crd",
};

impl CrdSource {
    /// The module's folder in the module cache, downloaded first if needed.
    pub fn module_dir(&self) -> anyhow::Result<PathBuf> {
        let output = Command::new("go")
            .args(["mod", "download", "-json"])
            .arg(format!("{}@{}", self.module, self.version))
            .stdin(Stdio::null())
            .output()
            .context("cannot run go (it fetches the CRDs' module)")?;
        if !output.status.success() {
            bail!(
                "go mod download {}@{} failed: {}{}",
                self.module,
                self.version,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let answer: serde_json::Value =
            serde_json::from_slice(&output.stdout).context("go mod download -json answered")?;
        let dir = answer["Dir"]
            .as_str()
            .context("go mod download -json names no Dir")?;
        Ok(PathBuf::from(dir))
    }

    /// Every CRD the module's folder holds.
    pub fn crds(&self) -> anyhow::Result<Vec<DynamicObject>> {
        let dir = self.module_dir()?.join(self.folder);
        let objects = crate::manifests::load_dir(&dir)
            .with_context(|| format!("cannot read the CRDs in {}", dir.display()))?;
        let crds: Vec<DynamicObject> = objects
            .into_iter()
            .filter(|o| {
                o.types
                    .as_ref()
                    .is_some_and(|t| t.kind == "CustomResourceDefinition")
            })
            .collect();
        if crds.is_empty() {
            bail!("{} holds no CRD", dir.display());
        }
        Ok(crds)
    }
}
