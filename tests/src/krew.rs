//! The krew manifest, `krew/nauthera.yaml`, between releases and at a release: the rule that
//! tells the two apart, and the edit `nauthera-release-plugin` makes to turn one into the other.
//!
//! The rule (krew/README.md says the same):
//!
//! - The development manifest is marked: its metadata carries the annotation
//!   `nauthera.io/unreleased: "true"`, and then every `sha256` is the placeholder, 64 zeros.
//!   Nothing can be installed from it, and it does not pretend otherwise.
//! - A manifest without the mark is a release: every `sha256` is the checksum of its platform's
//!   archive, 64 lower-case hex digits that are not a placeholder (one digit repeated), and no two
//!   platforms share one.
//! - Anything in between is refused: the mark beside a real checksum (half released), a
//!   placeholder without the mark (a release that would never install), another value of the
//!   annotation.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

/// The annotation that marks the development manifest.
pub const UNRELEASED_ANNOTATION: &str = "nauthera.io/unreleased";

/// The `sha256` of every platform in the development manifest.
pub const PLACEHOLDER_SHA256: &str =
    "0000000000000000000000000000000000000000000000000000000000000000";

/// What a manifest is, by the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseState {
    /// The marked development manifest: placeholders only.
    Unreleased,
    /// A release: a real checksum for every platform.
    Released,
}

/// A krew platform, as its selector names it (`linux/amd64`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Platform {
    pub os: String,
    pub arch: String,
}

impl Platform {
    pub fn new(os: &str, arch: &str) -> Platform {
        Platform {
            os: os.to_owned(),
            arch: arch.to_owned(),
        }
    }

    /// `os/arch`, as the release command's `--platform` takes it.
    pub fn parse(text: &str) -> Option<Platform> {
        let (os, arch) = text.split_once('/')?;
        (!os.is_empty() && !arch.is_empty() && !arch.contains('/')).then(|| Platform::new(os, arch))
    }

    /// The Rust target the release builds for this platform: static musl binaries on Linux, so
    /// the plugin runs on any distribution.
    pub fn rust_target(&self) -> Option<&'static str> {
        match (self.os.as_str(), self.arch.as_str()) {
            ("linux", "amd64") => Some("x86_64-unknown-linux-musl"),
            ("linux", "arm64") => Some("aarch64-unknown-linux-musl"),
            ("darwin", "amd64") => Some("x86_64-apple-darwin"),
            ("darwin", "arm64") => Some("aarch64-apple-darwin"),
            _ => None,
        }
    }

    /// The archive's file name for `version` (without its `v`), as the manifest's `uri` ends.
    pub fn archive_name(&self, version: &str) -> String {
        format!(
            "kubectl-nauthera-v{version}-{}-{}.tar.gz",
            self.os, self.arch
        )
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.arch)
    }
}

/// Whether `value` has the form of a sha256 checksum: 64 lower-case hex digits.
pub fn is_sha256(value: &str) -> bool {
    value.len() == 64
        && value
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// Whether `value` is a placeholder rather than a checksum: the form of one, but a single digit
/// repeated (no archive hashes to that).
pub fn is_placeholder(value: &str) -> bool {
    is_sha256(value) && value.chars().all(|c| value.starts_with(c))
}

/// The platforms of a manifest with their `sha256` (`None` when absent or not a string).
pub fn platforms(manifest: &Value) -> Result<Vec<(Platform, Option<String>)>, String> {
    let list = manifest
        .pointer("/spec/platforms")
        .and_then(Value::as_array)
        .ok_or("spec.platforms is not a list")?;
    list.iter()
        .enumerate()
        .map(|(index, platform)| {
            let label = |key: &str| {
                platform
                    .pointer(&format!("/selector/matchLabels/{key}"))
                    .and_then(Value::as_str)
                    .ok_or(format!(
                        "spec.platforms[{index}] has no selector.matchLabels.{key}"
                    ))
            };
            let sha256 = platform["sha256"].as_str().map(str::to_owned);
            Ok((Platform::new(label("os")?, label("arch")?), sha256))
        })
        .collect()
}

/// The manifest's state by the rule, or every way it breaks the rule.
pub fn release_state(manifest: &Value) -> Result<ReleaseState, Vec<String>> {
    let mut problems = Vec::new();
    let mark = manifest
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(UNRELEASED_ANNOTATION));
    let state = match mark {
        None => ReleaseState::Released,
        Some(value) if value == "true" => ReleaseState::Unreleased,
        Some(value) => {
            problems.push(format!(
                "the annotation {UNRELEASED_ANNOTATION} is {value}: it is \"true\" on the \
                 development manifest and absent from a release"
            ));
            ReleaseState::Unreleased
        }
    };
    let platforms = match platforms(manifest) {
        Ok(platforms) => platforms,
        Err(problem) => return Err(vec![problem]),
    };
    if platforms.is_empty() {
        problems.push("spec.platforms is empty".to_owned());
    }
    let mut seen = BTreeSet::new();
    for (platform, sha256) in &platforms {
        let Some(sha256) = sha256 else {
            problems.push(format!("{platform} has no sha256"));
            continue;
        };
        match state {
            ReleaseState::Unreleased if sha256 != PLACEHOLDER_SHA256 => problems.push(format!(
                "{platform}: sha256 {sha256} in a manifest marked {UNRELEASED_ANNOTATION}: \
                 a released manifest drops the mark (the release command does), a development \
                 one keeps the placeholder {PLACEHOLDER_SHA256}"
            )),
            ReleaseState::Unreleased => {}
            ReleaseState::Released if is_placeholder(sha256) => problems.push(format!(
                "{platform}: sha256 {sha256} is a placeholder, but the manifest is not marked \
                 {UNRELEASED_ANNOTATION}: a release carries each archive's checksum \
                 (cargo run -p nauthera-tests --bin nauthera-release-plugin writes them)"
            )),
            ReleaseState::Released if !is_sha256(sha256) => problems.push(format!(
                "{platform}: sha256 {sha256:?} is not 64 lower-case hex digits"
            )),
            ReleaseState::Released if !seen.insert(sha256.clone()) => problems.push(format!(
                "{platform}: sha256 {sha256} is another platform's too: each archive differs"
            )),
            ReleaseState::Released => {}
        }
    }
    if problems.is_empty() {
        Ok(state)
    } else {
        Err(problems)
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The manifest `text` made the release of `version` (without its `v`): `spec.version` and the
/// version in each `uri` set to it, each platform's `sha256` set from `checksums`, the unreleased
/// mark removed, comments and layout kept. The result is checked: it must be a release by the
/// rule and differ from `text` in exactly those fields.
pub fn release_text(
    text: &str,
    version: &str,
    checksums: &BTreeMap<Platform, String>,
) -> Result<String, String> {
    let original: Value =
        serde_saphyr::from_str(text).map_err(|e| format!("the manifest is not YAML: {e}"))?;
    let listed = platforms(&original)?;
    for (platform, _) in &listed {
        let checksum = checksums
            .get(platform)
            .ok_or(format!("no archive checksum for {platform}"))?;
        if !is_sha256(checksum) || is_placeholder(checksum) {
            return Err(format!(
                "{platform}: {checksum:?} is not an archive's sha256"
            ));
        }
    }
    for platform in checksums.keys() {
        if !listed.iter().any(|(listed, _)| listed == platform) {
            return Err(format!("{platform} is not a platform of the manifest"));
        }
    }
    let old_version = original
        .pointer("/spec/version")
        .and_then(Value::as_str)
        .ok_or("spec.version is not a string")?
        .to_owned();
    let new_version = format!("v{version}");

    // The structure the edited text must parse to.
    let mut expected = original.clone();
    expected["spec"]["version"] = Value::from(new_version.clone());
    for platform in expected["spec"]["platforms"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let os = platform["selector"]["matchLabels"]["os"].as_str();
        let arch = platform["selector"]["matchLabels"]["arch"].as_str();
        let key = Platform::new(os.unwrap_or_default(), arch.unwrap_or_default());
        platform["sha256"] = Value::from(checksums[&key].clone());
        if let Some(uri) = platform["uri"].as_str() {
            platform["uri"] = Value::from(uri.replace(&old_version, &new_version));
        }
    }
    if let Some(annotations) = expected
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(UNRELEASED_ANNOTATION);
        if annotations.is_empty() {
            expected["metadata"]
                .as_object_mut()
                .map(|metadata| metadata.remove("annotations"));
        }
    }

    // The edit, line by line.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if let Some(mark) = lines.iter().position(|line| {
        line.trim_start()
            .starts_with(&format!("{UNRELEASED_ANNOTATION}:"))
    }) {
        let mut first = mark;
        while first > 0 && lines[first - 1].trim_start().starts_with('#') {
            first -= 1;
        }
        let block_ends = lines
            .get(mark + 1)
            .is_none_or(|next| indent(next) < indent(&lines[mark]));
        if first > 0 && lines[first - 1].trim() == "annotations:" && block_ends {
            first -= 1;
        }
        lines.drain(first..=mark);
    }
    let (mut os, mut arch) = (String::new(), String::new());
    for line in &mut lines {
        let depth = indent(line);
        let pad = &line[..depth];
        let trimmed = line.trim_start();
        let value = |key: &str| {
            trimmed
                .strip_prefix(key)
                .map(|rest| rest.trim().trim_matches('"').to_owned())
        };
        if let Some(found) = value("os:") {
            os = found;
        } else if let Some(found) = value("arch:") {
            arch = found;
        } else if depth == 2 && value("version:").is_some() {
            *line = format!("{pad}version: {new_version}");
        } else if trimmed.starts_with("uri:") {
            *line = line.replace(&old_version, &new_version);
        } else if trimmed.starts_with("sha256:") {
            let checksum = checksums.get(&Platform::new(&os, &arch)).ok_or(format!(
                "a sha256 line follows no known platform ({os}/{arch})"
            ))?;
            *line = format!("{pad}sha256: \"{checksum}\"");
        }
    }
    let mut edited = lines.join("\n");
    edited.push('\n');

    let parsed: Value = serde_saphyr::from_str(&edited)
        .map_err(|e| format!("the edited manifest is not YAML: {e}"))?;
    if parsed != expected {
        return Err(
            "the edited manifest differs from the release in more than version, uris and \
             checksums; edit krew/nauthera.yaml by hand"
                .to_owned(),
        );
    }
    for (platform, _) in &listed {
        let name = platform.archive_name(version);
        let uri = parsed["spec"]["platforms"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|entry| {
                entry["selector"]["matchLabels"]["os"] == platform.os.as_str()
                    && entry["selector"]["matchLabels"]["arch"] == platform.arch.as_str()
            })
            .and_then(|entry| entry["uri"].as_str())
            .unwrap_or_default();
        if !uri.ends_with(&format!("/{name}")) {
            return Err(format!(
                "{platform}: the uri {uri} does not end with its archive, {name}"
            ));
        }
    }
    match release_state(&parsed) {
        Ok(ReleaseState::Released) => Ok(edited),
        Ok(ReleaseState::Unreleased) => Err("the edited manifest is still marked".to_owned()),
        Err(problems) => Err(problems.join("; ")),
    }
}
