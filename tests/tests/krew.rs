//! The krew manifest's release rule (`nauthera_tests::krew`, krew/README.md): the checked-in
//! manifest is either the marked development manifest with placeholders or a release with a real
//! checksum for every platform; the release command's edit turns the first into the second and
//! nothing else. krew's own rules for the manifest are checked in cli/tests/krew_manifest.rs.

use std::collections::BTreeMap;

use nauthera_tests::binaries::workspace_root;
use nauthera_tests::krew::{
    PLACEHOLDER_SHA256, Platform, ReleaseState, UNRELEASED_ANNOTATION, is_placeholder, is_sha256,
    release_state, release_text,
};
use serde_json::{Value, json};

fn checked_in() -> String {
    std::fs::read_to_string(workspace_root().join("krew/nauthera.yaml")).unwrap()
}

/// A manifest with the given mark (`None` for none) and one sha256 per platform.
fn manifest(mark: Option<&str>, sha256: [&str; 2]) -> Value {
    let mut manifest = json!({
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "nauthera"},
        "spec": {
            "version": "v0.1.0",
            "platforms": [
                {"selector": {"matchLabels": {"os": "linux", "arch": "amd64"}},
                 "uri": "https://example.test/v0.1.0/kubectl-nauthera-v0.1.0-linux-amd64.tar.gz",
                 "sha256": sha256[0], "bin": "kubectl-nauthera"},
                {"selector": {"matchLabels": {"os": "darwin", "arch": "arm64"}},
                 "uri": "https://example.test/v0.1.0/kubectl-nauthera-v0.1.0-darwin-arm64.tar.gz",
                 "sha256": sha256[1], "bin": "kubectl-nauthera"},
            ],
        },
    });
    if let Some(mark) = mark {
        manifest["metadata"]["annotations"] = json!({ UNRELEASED_ANNOTATION: mark });
    }
    manifest
}

const REAL_A: &str = "9f2c0d8e4b7a61c35e0f1d2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e";
const REAL_B: &str = "0c1d2e3f405162738495a6b7c8d9eaf0b1c2d3e4f5061728394a5b6c7d8e9f00";

fn refusal(manifest: &Value) -> String {
    release_state(manifest)
        .expect_err("the manifest is refused")
        .join("\n")
}

#[test]
fn the_checked_in_manifest_follows_the_rule() {
    let manifest: Value = serde_saphyr::from_str(&checked_in()).unwrap();
    // Between releases the manifest says so; at a release it carries the archives' checksums.
    if let Err(problems) = release_state(&manifest) {
        panic!(
            "krew/nauthera.yaml breaks the release rule:\n{}",
            problems.join("\n")
        );
    }
}

#[test]
fn a_marked_manifest_with_placeholders_is_the_development_manifest() {
    let development = manifest(Some("true"), [PLACEHOLDER_SHA256; 2]);
    assert_eq!(release_state(&development), Ok(ReleaseState::Unreleased));
}

#[test]
fn a_release_with_a_checksum_for_every_platform_is_accepted() {
    let release = manifest(None, [REAL_A, REAL_B]);
    assert_eq!(release_state(&release), Ok(ReleaseState::Released));
}

#[test]
fn a_release_with_a_placeholder_is_refused() {
    let problem = refusal(&manifest(None, [REAL_A, PLACEHOLDER_SHA256]));
    assert!(
        problem.starts_with("darwin/arm64: sha256 0000"),
        "{problem}"
    );
    assert!(problem.contains("placeholder"), "{problem}");
    // Any digit repeated is a placeholder too.
    let problem = refusal(&manifest(None, [&"f".repeat(64), REAL_B]));
    assert!(problem.starts_with("linux/amd64:"), "{problem}");
}

#[test]
fn a_release_with_a_malformed_or_shared_checksum_is_refused() {
    let upper = REAL_A.to_uppercase();
    assert!(refusal(&manifest(None, [&upper, REAL_B])).contains("64 lower-case hex"));
    assert!(refusal(&manifest(None, [&REAL_A[1..], REAL_B])).contains("64 lower-case hex"));
    assert!(refusal(&manifest(None, [REAL_A, REAL_A])).contains("another platform's"));
    let mut missing = manifest(None, [REAL_A, REAL_B]);
    missing["spec"]["platforms"][1]
        .as_object_mut()
        .unwrap()
        .remove("sha256");
    assert_eq!(refusal(&missing), "darwin/arm64 has no sha256");
}

#[test]
fn a_marked_manifest_with_a_real_checksum_is_refused() {
    let problem = refusal(&manifest(Some("true"), [REAL_A, PLACEHOLDER_SHA256]));
    assert!(problem.starts_with("linux/amd64:"), "{problem}");
    assert!(problem.contains(UNRELEASED_ANNOTATION), "{problem}");
}

#[test]
fn another_value_of_the_mark_is_refused() {
    let problem = refusal(&manifest(Some("false"), [PLACEHOLDER_SHA256; 2]));
    assert!(problem.contains("is \"false\""), "{problem}");
}

#[test]
fn checksums_are_told_from_placeholders() {
    assert!(is_sha256(REAL_A) && !is_placeholder(REAL_A));
    assert!(is_sha256(PLACEHOLDER_SHA256) && is_placeholder(PLACEHOLDER_SHA256));
    assert!(!is_sha256("") && !is_placeholder(""));
    assert!(!is_sha256(&format!("{REAL_A}0")));
}

fn checksums_for(text: &str) -> BTreeMap<Platform, String> {
    let manifest: Value = serde_saphyr::from_str(text).unwrap();
    nauthera_tests::krew::platforms(&manifest)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(index, (platform, _))| (platform, format!("{index:x}{}", &REAL_A[1..])))
        .collect()
}

#[test]
fn the_release_edit_makes_a_release_and_changes_nothing_else() {
    let text = checked_in();
    let checksums = checksums_for(&text);
    let released = release_text(&text, "0.2.0", &checksums).unwrap_or_else(|e| panic!("{e}"));
    let manifest: Value = serde_saphyr::from_str(&released).unwrap();
    assert_eq!(release_state(&manifest), Ok(ReleaseState::Released));
    assert_eq!(manifest["spec"]["version"], "v0.2.0");
    assert!(
        manifest["metadata"].get("annotations").is_none(),
        "{released}"
    );
    for platform in manifest["spec"]["platforms"].as_array().unwrap() {
        let key = Platform::new(
            platform["selector"]["matchLabels"]["os"].as_str().unwrap(),
            platform["selector"]["matchLabels"]["arch"]
                .as_str()
                .unwrap(),
        );
        assert_eq!(platform["sha256"], checksums[&key].as_str());
        let uri = platform["uri"].as_str().unwrap();
        assert!(
            uri.ends_with(&format!("/v0.2.0/{}", key.archive_name("0.2.0"))),
            "{uri}"
        );
    }
    // The header comment stays; only the mark's lines go.
    assert!(released.starts_with(text.lines().next().unwrap()));
    assert_eq!(
        text.lines().count() - released.lines().count(),
        3,
        "the annotations block (key, comment, mark) is removed:\n{released}"
    );
    // A release of a release: only the checksums (and the version) change again.
    let again = release_text(&released, "0.2.0", &checksums).unwrap();
    assert_eq!(again, released);
}

#[test]
fn the_release_edit_refuses_a_missing_or_placeholder_checksum() {
    let text = checked_in();
    let mut checksums = checksums_for(&text);
    let (first, _) = checksums.pop_first().unwrap();
    let error = release_text(&text, "0.1.0", &checksums).unwrap_err();
    assert_eq!(error, format!("no archive checksum for {first}"));
    checksums.insert(first.clone(), PLACEHOLDER_SHA256.to_owned());
    let error = release_text(&text, "0.1.0", &checksums).unwrap_err();
    assert!(error.starts_with(&format!("{first}: ")), "{error}");
    checksums.insert(first, REAL_B.to_owned());
    checksums.insert(Platform::new("windows", "amd64"), REAL_A.to_owned());
    let error = release_text(&text, "0.1.0", &checksums).unwrap_err();
    assert_eq!(error, "windows/amd64 is not a platform of the manifest");
}

#[test]
fn the_archives_carry_the_licence_the_workspace_declares() {
    let cargo = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    assert!(cargo.contains("license = \"Apache-2.0\""));
    let licence = std::fs::read_to_string(workspace_root().join("LICENSE")).unwrap();
    assert!(
        licence.contains("Apache License\n                           Version 2.0, January 2004")
    );
    assert!(licence.contains("END OF TERMS AND CONDITIONS"));
}
