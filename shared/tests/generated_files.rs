//! The committed CRDs and runbook pages are what the code generates, and the check notices when
//! they are not.

use std::fs;
use std::path::{Path, PathBuf};

use nauthera_shared::generate::{self, COMMAND, StaleFile, Staleness};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn committed_generated_files_are_up_to_date() {
    let stale = generate::stale_files(&repo_root()).unwrap();
    let list: Vec<String> = stale.iter().map(|file| format!("  {file}")).collect();
    assert!(
        stale.is_empty(),
        "generated files are stale:\n{}\nrun `{COMMAND}` and commit the result",
        list.join("\n")
    );
}

#[test]
fn the_check_catches_hand_edits_missing_and_extra_files() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    // Copy the generated tree as the code generates it.
    let files = generate::generated_files().unwrap();
    for file in &files {
        let path = root.join(&file.path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, &file.contents).unwrap();
    }
    assert_eq!(
        generate::stale_files(root).unwrap(),
        Vec::<StaleFile>::new()
    );

    // A CRD file (not the kustomization); the resource types always define some.
    let crd = files
        .iter()
        .map(|file| file.path.clone())
        .find(|path| path.starts_with(generate::CRD_DIR) && !path.ends_with("kustomization.yaml"))
        .expect("the code generates no CRD");
    let edited_crd = fs::read_to_string(root.join(&crd)).unwrap() + "  # a hand edit\n";
    fs::write(root.join(&crd), edited_crd).unwrap();
    let runbook = PathBuf::from("docs/runbooks/Drifted.md");
    let edited_runbook = fs::read_to_string(root.join(&runbook))
        .unwrap()
        .replace("## Mitigation", "## Mitigation\n\nJust restart everything.");
    fs::write(root.join(&runbook), edited_runbook).unwrap();
    let removed = PathBuf::from("docs/runbooks/README.md");
    fs::remove_file(root.join(&removed)).unwrap();
    let extra = PathBuf::from("deploy/crds/hand-written.yaml");
    fs::write(root.join(&extra), "kind: Nothing\n").unwrap();

    let mut expected = vec![
        StaleFile {
            path: crd,
            staleness: Staleness::Differs,
        },
        StaleFile {
            path: extra,
            staleness: Staleness::Extra,
        },
        StaleFile {
            path: runbook,
            staleness: Staleness::Differs,
        },
        StaleFile {
            path: removed,
            staleness: Staleness::Missing,
        },
    ];
    expected.sort();
    assert_eq!(generate::stale_files(root).unwrap(), expected);

    // Writing repairs all of it.
    assert_eq!(generate::write_all(root).unwrap(), expected);
    assert_eq!(
        generate::stale_files(root).unwrap(),
        Vec::<StaleFile>::new()
    );
}

#[test]
fn crd_yaml_reads_back_as_the_same_crd() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds = nauthera_shared::resources::crds();
    let files = generate::crd_files(&crds).unwrap();
    for (crd, file) in crds.iter().zip(&files) {
        let read: CustomResourceDefinition = serde_saphyr::from_str(&file.contents).unwrap();
        assert_eq!(&read, crd, "{}", file.path.display());
        let expected = format!(
            "deploy/crds/{}.{}.yaml",
            crd.spec.names.plural, crd.spec.group
        );
        assert_eq!(file.path, Path::new(&expected));
    }
}
