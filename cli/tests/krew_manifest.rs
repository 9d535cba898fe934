//! `krew/nauthera.yaml` against krew's rules for a plugin manifest (and the krew-index review
//! rules): name, `v`-prefixed semantic version matching the crate, homepage, a short description
//! of at most 50 characters, a description, one platform for each of linux and darwin on amd64
//! and arm64 with `selector.matchLabels`, an archive `uri`, a 64-hex `sha256` and `bin`.

// Tests may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use serde_json::Value;

fn manifest() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../krew/nauthera.yaml");
    let text = std::fs::read_to_string(path).expect("krew/nauthera.yaml exists");
    serde_saphyr::from_str(&text).expect("krew/nauthera.yaml is YAML")
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{pointer} is a string"))
}

#[test]
fn header_and_name_follow_krew() {
    let manifest = manifest();
    assert_eq!(
        text(&manifest, "/apiVersion"),
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(text(&manifest, "/kind"), "Plugin");
    let name = text(&manifest, "/metadata/name");
    assert_eq!(name, "nauthera");
    // krew: a safe name, lower-case words joined by dashes, and the binary is kubectl-<name>.
    assert!(name.split('-').all(|part| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    }));
}

#[test]
fn the_version_is_v_prefixed_semver_matching_the_crate() {
    let manifest = manifest();
    let version = text(&manifest, "/spec/version");
    let bare = version
        .strip_prefix('v')
        .expect("the version starts with v");
    let core = bare.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    assert_eq!(parts.len(), 3, "{version} is MAJOR.MINOR.PATCH");
    for part in parts {
        assert!(
            !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()),
            "{version}"
        );
        assert!(
            part == "0" || !part.starts_with('0'),
            "{version}: no leading zeros"
        );
    }
    assert_eq!(bare, env!("CARGO_PKG_VERSION"));
}

#[test]
fn descriptions_and_homepage_are_present_and_short_enough() {
    let manifest = manifest();
    let short = text(&manifest, "/spec/shortDescription");
    assert!(
        !short.is_empty() && short.chars().count() <= 50,
        "{short:?}"
    );
    assert!(
        !short.ends_with('.'),
        "krew-index: no full stop in the short description"
    );
    assert!(text(&manifest, "/spec/description").len() > short.len());
    assert!(text(&manifest, "/spec/homepage").starts_with("https://"));
}

#[test]
fn every_platform_is_complete_and_linux_and_darwin_on_both_arches_are_covered() {
    let manifest = manifest();
    let version = text(&manifest, "/spec/version").to_owned();
    let platforms = manifest
        .pointer("/spec/platforms")
        .and_then(Value::as_array)
        .expect("spec.platforms is a list");
    let mut covered = BTreeSet::new();
    for platform in platforms {
        let os = text(platform, "/selector/matchLabels/os");
        let arch = text(platform, "/selector/matchLabels/arch");
        assert!(
            covered.insert((os.to_owned(), arch.to_owned())),
            "{os}/{arch} twice"
        );
        let uri = text(platform, "/uri");
        assert!(uri.starts_with("https://"), "{uri}");
        assert!(
            uri.ends_with(".tar.gz") || uri.ends_with(".zip"),
            "{uri} is an archive"
        );
        assert!(uri.contains(&version), "{uri} names {version}");
        assert!(
            uri.contains(os) && uri.contains(arch),
            "{uri} names its platform"
        );
        let sha256 = text(platform, "/sha256");
        assert_eq!(sha256.len(), 64, "{os}/{arch}: sha256 has 64 hex digits");
        assert!(
            sha256
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(text(platform, "/bin"), "kubectl-nauthera");
    }
    let expected: BTreeSet<(String, String)> = ["linux", "darwin"]
        .into_iter()
        .flat_map(|os| ["amd64", "arm64"].map(|arch| (os.to_owned(), arch.to_owned())))
        .collect();
    assert_eq!(covered, expected);
}
