//! The previous release of the reconciler, for the rolling-upgrade test: the binary and the CRDs
//! of the commit `tests/previous/COMMIT` names, built once by `tests/previous/build.sh` and kept
//! under `target/previous/<commit>/`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, bail};

use crate::binaries::{without_package_env, workspace_root};

/// The previous release as the harness keeps it.
#[derive(Clone, Debug)]
pub struct PreviousRelease {
    /// The commit it was built from.
    pub commit: String,
    /// Its `nauthera-reconciler`.
    pub reconciler: PathBuf,
    /// Its CRDs (`deploy/crds` at that commit).
    pub crds: PathBuf,
}

impl PreviousRelease {
    /// The previous release, built first when it is not kept yet (once per process).
    ///
    /// Call it before [`crate::binaries::Binary::path`]: its build leaves this version's
    /// reconciler to be linked again by the next `cargo build`.
    pub fn get() -> anyhow::Result<PreviousRelease> {
        static BUILT: OnceLock<Result<PreviousRelease, String>> = OnceLock::new();
        BUILT
            .get_or_init(|| build().map_err(|e| format!("{e:#}")))
            .clone()
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

fn build() -> anyhow::Result<PreviousRelease> {
    let script = workspace_root().join("tests/previous/build.sh");
    let commit = std::fs::read_to_string(workspace_root().join("tests/previous/COMMIT"))
        .context("cannot read tests/previous/COMMIT")?
        .trim()
        .to_owned();
    let mut command = Command::new("bash");
    command.arg(&script).stderr(std::process::Stdio::inherit());
    without_package_env(&mut command);
    let output = command
        .output()
        .context("cannot run tests/previous/build.sh")?;
    if !output.status.success() {
        bail!(
            "tests/previous/build.sh could not build the previous release ({})",
            output.status
        );
    }
    let folder = PathBuf::from(String::from_utf8(output.stdout)?.trim());
    Ok(PreviousRelease {
        commit,
        reconciler: folder.join("nauthera-reconciler"),
        crds: folder.join("crds"),
    })
}
