//! The workspace's binaries, built once per process with the same cargo that runs the tests.
//!
//! Integration tests only get `CARGO_BIN_EXE_*` for their own package; the end-to-end tests and
//! the sandbox need the reconciler, the plugin and the harness servers from other packages, so
//! they ask cargo to build them (a no-op when they are fresh).
//!
//! The build selects the whole workspace, as the README's `cargo test --workspace` does: cargo
//! unifies dependency features over the selected packages, so naming only the four packages
//! resolved other features, rebuilt every dependency a second time under new hashes (about a
//! gigabyte of artifacts and a minute and a half on two cores) and ran a machine out of disk.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, bail};

/// A binary of the workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    Reconciler,
    Plugin,
    FakeServer,
    KubeEmulator,
}

impl Binary {
    pub const ALL: [Binary; 4] = [
        Binary::Reconciler,
        Binary::Plugin,
        Binary::FakeServer,
        Binary::KubeEmulator,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Binary::Reconciler => "nauthera-reconciler",
            Binary::Plugin => "kubectl-nauthera",
            Binary::FakeServer => "nauthera-fake-server",
            Binary::KubeEmulator => "nauthera-kube-emulator",
        }
    }

    /// The path of the binary, building every workspace binary first (once per process), in the
    /// profile this harness was built with: a release benchmark runs release binaries.
    pub fn path(self) -> anyhow::Result<PathBuf> {
        if let Some(dir) = std::env::var_os(PREBUILT_ENV) {
            return Ok(PathBuf::from(dir).join(self.name()));
        }
        static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        let dir = BUILT
            .get_or_init(|| build_all().map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(dir.join(self.name()))
    }
}

/// Names a folder holding the four binaries, built earlier, to run instead of building them (a
/// release build to profile, or a snapshot that edits in progress cannot break).
pub const PREBUILT_ENV: &str = "NAUTHERA_TEST_BINARIES";

/// The root of the workspace (the folder with the top-level Cargo.toml).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives inside the workspace")
}

/// Removes what cargo sets for the test's own package (`CARGO_PKG_*`, `CARGO_MANIFEST_DIR`, ...)
/// from a cargo `command` run inside a test: some dependencies' build scripts watch those (ring
/// reruns when `CARGO_PKG_NAME` changes), so passing them on made this build and the next
/// `cargo test` from a shell each rebuild them and everything above them (about two minutes on
/// a shared 2-core machine).
pub fn without_package_env(command: &mut Command) {
    const SET_FOR_THE_PACKAGE: [&str; 6] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_BIN_NAME",
    ];
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("CARGO_PKG_")
            || text.starts_with("CARGO_BIN_EXE_")
            || SET_FOR_THE_PACKAGE.contains(&text.as_ref())
        {
            command.env_remove(&name);
        }
    }
}

/// Whether this harness is a release build (then so are the binaries it runs).
const RELEASE: bool = !cfg!(debug_assertions);

fn build_all() -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    without_package_env(&mut command);
    command
        .current_dir(workspace_root())
        .args(["build", "--quiet", "--workspace", "--bins"]);
    if RELEASE {
        command.arg("--release");
    }
    let status = command
        .status()
        .context("cannot run cargo to build the workspace's binaries")?;
    if !status.success() {
        bail!("cargo build of the workspace's binaries failed ({status})");
    }
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    };
    Ok(target.join(if RELEASE { "release" } else { "debug" }))
}
