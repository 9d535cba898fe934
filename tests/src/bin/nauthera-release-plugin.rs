//! `cargo run -p nauthera-tests --bin nauthera-release-plugin`: the kubectl plugin's release
//! archives, one per platform of `krew/nauthera.yaml`, and their sha256 written into it.
//!
//! Each archive holds `kubectl-nauthera` built in release mode for the platform's Rust target,
//! `kubectl_complete-nauthera` and `LICENSE`. The manifest is written only when every platform has
//! an archive: a platform whose Rust target this toolchain lacks is named with the command that
//! adds it, and nothing is written, so the manifest never carries a checksum of the wrong file.
//! The release rule the result must meet is in `nauthera_tests::krew` and `krew/README.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use clap::Parser;
use nauthera_tests::binaries::workspace_root;
use nauthera_tests::krew::{self, Platform};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Builds the plugin's release archives and writes their sha256 into the krew manifest.
///
/// Relative paths are taken from the repository root.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// The krew manifest to release.
    #[arg(long, default_value = "krew/nauthera.yaml")]
    manifest: PathBuf,
    /// Where the archives are written (and read, with --from-archives).
    #[arg(long, default_value = "target/krew")]
    out: PathBuf,
    /// Build only this platform (os/arch, repeatable), for a machine that can build some of them;
    /// the manifest is left alone, and --from-archives later hashes all archives together.
    #[arg(long = "platform", value_name = "OS/ARCH", value_parser = platform)]
    platforms: Vec<Platform>,
    /// Build a platform for another Rust target than the default (static musl on Linux),
    /// e.g. linux/amd64=x86_64-unknown-linux-gnu (repeatable).
    #[arg(long = "target", value_name = "OS/ARCH=TARGET", value_parser = target_override)]
    targets: Vec<(Platform, String)>,
    /// Build nothing: hash the archives already in --out (built elsewhere with --platform) and
    /// write the manifest.
    #[arg(long, conflicts_with_all = ["platforms", "targets"])]
    from_archives: bool,
}

fn platform(text: &str) -> Result<Platform, String> {
    Platform::parse(text).ok_or(format!("{text:?} is not OS/ARCH, e.g. linux/amd64"))
}

fn target_override(text: &str) -> Result<(Platform, String), String> {
    let (platform_text, target) = text
        .split_once('=')
        .ok_or(format!("{text:?} is not OS/ARCH=TARGET"))?;
    Ok((platform(platform_text)?, target.to_owned()))
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nauthera-release-plugin: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// What `cargo metadata` says: the plugin's version and where builds go.
struct Workspace {
    version: String,
    target_dir: PathBuf,
}

fn workspace() -> anyhow::Result<Workspace> {
    let output = Command::new(cargo())
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(workspace_root())
        .output()
        .context("cannot run cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)?;
    let version = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == "kubectl-nauthera")
        .and_then(|package| package["version"].as_str())
        .context("cargo metadata lists no kubectl-nauthera")?
        .to_owned();
    let target_dir = metadata["target_directory"]
        .as_str()
        .context("cargo metadata names no target directory")?
        .into();
    Ok(Workspace {
        version,
        target_dir,
    })
}

fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

fn from_root(path: &Path) -> PathBuf {
    workspace_root().join(path)
}

fn run(args: Args) -> anyhow::Result<()> {
    let manifest_path = from_root(&args.manifest);
    let out = from_root(&args.out);
    let text = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("cannot read {}", manifest_path.display()))?;
    let manifest: Value = serde_saphyr::from_str(&text)
        .with_context(|| format!("{} is not YAML", manifest_path.display()))?;
    let all: Vec<Platform> = krew::platforms(&manifest)
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .map(|(platform, _)| platform)
        .collect();
    for named in args
        .platforms
        .iter()
        .chain(args.targets.iter().map(|(p, _)| p))
    {
        if !all.contains(named) {
            bail!("{named} is not a platform of {}", manifest_path.display());
        }
    }
    let workspace = workspace()?;
    let version = workspace.version.as_str();

    let checksums = if args.from_archives {
        hash_archives(&all, &out, version)?
    } else {
        let selected = if args.platforms.is_empty() {
            all.clone()
        } else {
            args.platforms.clone()
        };
        let overrides: BTreeMap<Platform, String> = args.targets.into_iter().collect();
        let built = build_archives(&selected, &overrides, &workspace, &out)?;
        if selected.len() < all.len() {
            println!(
                "{} unchanged: it needs the archives of every platform; put them all in {} and \
                 run this command again with --from-archives",
                manifest_path.display(),
                out.display()
            );
            return Ok(());
        }
        built
    };

    let released = krew::release_text(&text, version, &checksums).map_err(anyhow::Error::msg)?;
    std::fs::write(&manifest_path, released)
        .with_context(|| format!("cannot write {}", manifest_path.display()))?;
    println!(
        "{}: v{version}, a sha256 for each of {} platforms. Publish the archives in {} at the \
         manifest's uri before the manifest.",
        manifest_path.display(),
        checksums.len(),
        out.display()
    );
    Ok(())
}

/// The checksums of archives built elsewhere; refuses when one is missing.
fn hash_archives(
    platforms: &[Platform],
    out: &Path,
    version: &str,
) -> anyhow::Result<BTreeMap<Platform, String>> {
    let missing: Vec<String> = platforms
        .iter()
        .map(|platform| out.join(platform.archive_name(version)))
        .filter(|archive| !archive.is_file())
        .map(|archive| archive.display().to_string())
        .collect();
    if !missing.is_empty() {
        bail!(
            "no manifest written: missing archives: {}",
            missing.join(", ")
        );
    }
    platforms
        .iter()
        .map(|platform| {
            let archive = out.join(platform.archive_name(version));
            let checksum = sha256_of(&archive)?;
            println!("{platform}: {} {checksum}", archive.display());
            Ok((platform.clone(), checksum))
        })
        .collect()
}

/// Builds and packs every platform whose Rust target is installed, then refuses if any is not.
fn build_archives(
    platforms: &[Platform],
    overrides: &BTreeMap<Platform, String>,
    workspace: &Workspace,
    out: &Path,
) -> anyhow::Result<BTreeMap<Platform, String>> {
    let installed = installed_targets()?;
    let mut buildable = Vec::new();
    let mut refusals = Vec::new();
    for platform in platforms {
        let target = overrides
            .get(platform)
            .map(String::as_str)
            .or_else(|| platform.rust_target());
        match target {
            None => refusals.push(format!(
                "{platform}: no Rust target is known for it; name one with --target \
                 {platform}=TARGET"
            )),
            Some(target) if !installed.contains(&target.to_owned()) => {
                refusals.push(missing_target(platform, target))
            }
            Some(target) => buildable.push((platform.clone(), target.to_owned())),
        }
    }
    if !refusals.is_empty() && !buildable.is_empty() {
        let names: Vec<String> = platforms
            .iter()
            .filter(|p| !buildable.iter().any(|(b, _)| b == *p))
            .map(Platform::to_string)
            .collect();
        eprintln!(
            "{} cannot be built here (why, at the end); building the others",
            names.join(", ")
        );
    }

    if !buildable.is_empty() {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    }
    let mut checksums = BTreeMap::new();
    for (platform, target) in &buildable {
        eprintln!("building kubectl-nauthera for {platform} ({target})");
        let status = Command::new(cargo())
            .args(["build", "--release", "--locked", "-p", "kubectl-nauthera"])
            .args(["--target", target])
            .current_dir(workspace_root())
            .status()
            .context("cannot run cargo build")?;
        if !status.success() {
            bail!(
                "cargo build for {platform} ({target}) failed; no manifest written (a target \
                 other than the host's may need a linker: CARGO_TARGET_{}_LINKER)",
                target.to_uppercase().replace('-', "_")
            );
        }
        let binary = workspace
            .target_dir
            .join(target)
            .join("release/kubectl-nauthera");
        let archive = out.join(platform.archive_name(&workspace.version));
        pack(&binary, &archive)?;
        let checksum = sha256_of(&archive)?;
        println!("{platform}: {} {checksum}", archive.display());
        checksums.insert(platform.clone(), checksum);
    }

    if !refusals.is_empty() {
        bail!(
            "no manifest written: {} of {} platforms cannot be built here, and a release \
             manifest needs the checksum of every platform's archive:\n  {}",
            refusals.len(),
            platforms.len(),
            refusals.join("\n  ")
        );
    }
    Ok(checksums)
}

fn missing_target(platform: &Platform, target: &str) -> String {
    let mut refusal = format!(
        "{platform}: this toolchain lacks the Rust target {target}; add it with `rustup target \
         add {target}`"
    );
    if platform.os == "darwin" {
        refusal.push_str(
            " (linking for macOS also needs its SDK: on a Mac, run this command with --platform \
             for the darwin platforms, and hash all archives together with --from-archives)",
        );
    } else if !target.starts_with(std::env::consts::ARCH) {
        refusal.push_str(" and a linker for it (CARGO_TARGET_<TARGET>_LINKER)");
    }
    refusal
}

/// The Rust targets whose standard library this toolchain has.
fn installed_targets() -> anyhow::Result<Vec<String>> {
    let output = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .context("cannot run rustc")?;
    if !output.status.success() {
        bail!("rustc --print sysroot failed");
    }
    let sysroot = PathBuf::from(String::from_utf8(output.stdout)?.trim());
    let rustlib = sysroot.join("lib/rustlib");
    let entries = std::fs::read_dir(&rustlib)
        .with_context(|| format!("cannot list {}", rustlib.display()))?;
    let mut targets = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.path().join("lib").is_dir() {
            targets.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    Ok(targets)
}

/// Packs the binary, the completion helper and the licence into `archive` (`.tar.gz`), with
/// fixed owners, modes and times so the same binary gives the same checksum.
fn pack(binary: &Path, archive: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;

    let stage = archive.with_extension("").with_extension("stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    std::fs::create_dir_all(&stage)?;
    let root = workspace_root();
    let files = [
        (binary.to_path_buf(), "kubectl-nauthera", 0o755),
        (
            root.join("cli/kubectl_complete-nauthera"),
            "kubectl_complete-nauthera",
            0o755,
        ),
        (root.join("LICENSE"), "LICENSE", 0o644),
    ];
    let time = source_date();
    for (source, name, mode) in &files {
        let staged = stage.join(name);
        std::fs::copy(source, &staged)
            .with_context(|| format!("cannot copy {}", source.display()))?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(*mode))?;
        std::fs::File::options()
            .write(true)
            .open(&staged)?
            .set_modified(time)?;
    }

    let tar = archive.with_extension("");
    let gnu = Command::new("tar")
        .arg("--version")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).contains("GNU tar"));
    let mut command = Command::new("tar");
    command.arg("--format=ustar");
    if gnu {
        command.args(["--owner=0", "--group=0", "--numeric-owner"]);
    } else {
        command.args(["--uid", "0", "--gid", "0", "--numeric-owner"]);
    }
    command
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(&stage)
        .args(files.iter().map(|(_, name, _)| name));
    run_tool(&mut command)?;
    run_tool(Command::new("gzip").args(["-n", "-9", "-f"]).arg(&tar))?;
    std::fs::remove_dir_all(&stage)?;
    Ok(())
}

fn run_tool(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("cannot run {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed");
    }
    Ok(())
}

/// The archive's file times: `SOURCE_DATE_EPOCH` when set, else the last commit's time.
fn source_date() -> SystemTime {
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .or_else(|| {
            let output = Command::new("git")
                .args(["log", "-1", "--format=%ct"])
                .current_dir(workspace_root())
                .output()
                .ok()?;
            Some(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        })
        .and_then(|text| text.parse::<u64>().ok())
        .unwrap_or(0);
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn sha256_of(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(format!("{:x}", Sha256::digest(&bytes)))
}
