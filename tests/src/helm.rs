//! The Helm the tests render and install the chart with: `helm.sh/helm/v4` at the release
//! `tests/helm/go.mod` pins, built from source on first use (`tests/helm/build.sh`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::binaries::workspace_root;

/// The `helm` built from `tests/helm/`, building it first if needed (once per test binary; the
/// script's lock keeps other binaries waiting for the same build).
pub fn helm_path() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| {
        let script = workspace_root().join("tests/helm/build.sh");
        let output = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "{} failed ({}); its progress and error are above",
            script.display(),
            output.status
        );
        let dir = String::from_utf8_lossy(&output.stdout).into_owned();
        PathBuf::from(dir.trim()).join("bin/helm")
    })
}
