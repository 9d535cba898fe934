//! The Argo CD resource customizations under `deploy/argocd/`, run with gopher-lua (the
//! interpreter Argo CD embeds) against the objects captured from the end-to-end runs: every test
//! case of every `health_test.yaml` and `action_test.yaml`; kstatus on the same objects against
//! the catalog; the coverage of the captured objects; and the generated files (the test cases,
//! the `argocd-cm` component, the table of `docs/gitops.md`) current.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

use nauthera_shared::catalog::Reason;
use nauthera_tests::e2e::kubectl;
use nauthera_tests::gitops::{self, KINDS};
use serde_json::Value;

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_generated_files_are_current() {
    let stale: Vec<String> = gitops::stale(&gitops::root())
        .unwrap()
        .into_iter()
        .map(|file| file.path.display().to_string())
        .collect();
    assert!(
        stale.is_empty(),
        "stale: {stale:?}; run {}",
        gitops::GENERATE_COMMAND
    );
}

#[test]
fn every_health_test_case_passes_under_gopher_lua() {
    let root = gitops::root();
    for kind in KINDS {
        let dir = gitops::kind_dir(&root, kind);
        let cases = yaml(&dir.join("health_test.yaml"));
        let cases = cases["tests"].as_array().unwrap();
        assert!(!cases.is_empty(), "{kind} has no health test case");
        for case in cases {
            let input = case["inputPath"].as_str().unwrap();
            let object = yaml(&dir.join(input));
            let health = gitops::run_lua(&dir.join("health.lua"), &object).unwrap();
            assert_eq!(
                health["status"], case["healthStatus"]["status"],
                "{kind} {input}: {health}"
            );
            assert_eq!(
                health["message"], case["healthStatus"]["message"],
                "{kind} {input}"
            );
        }
    }
}

#[test]
fn every_action_test_case_passes_under_gopher_lua() {
    let root = gitops::root();
    for kind in KINDS {
        let actions = gitops::actions_of(kind);
        let dir = gitops::kind_dir(&root, kind);
        if actions.is_empty() {
            assert!(!dir.join("actions").exists(), "{kind} has no actions");
            continue;
        }
        let tests = yaml(&dir.join("action_test.yaml"));
        for case in tests["discoveryTests"].as_array().unwrap() {
            let input = case["inputPath"].as_str().unwrap();
            let object = yaml(&dir.join(input));
            let found = gitops::run_lua(&dir.join("actions/discovery.lua"), &object).unwrap();
            for expected in case["result"].as_array().unwrap() {
                let name = expected["name"].as_str().unwrap();
                assert_eq!(
                    found[name]["disabled"], expected["disabled"],
                    "{kind} {input}: {name} in {found}"
                );
            }
            assert_eq!(
                found.as_object().map(|o| o.len()),
                Some(actions.len()),
                "{kind} {input}: {found}"
            );
        }
        let cases = tests["actionTests"].as_array().unwrap();
        for action in actions {
            assert!(
                cases.iter().any(|c| c["action"] == *action),
                "{kind}: no test case runs {action}"
            );
        }
        for case in cases {
            let action = case["action"].as_str().unwrap();
            let input = case["inputPath"].as_str().unwrap();
            let object = yaml(&dir.join(input));
            let script = dir.join(format!("actions/{action}/action.lua"));
            let output = gitops::run_lua(&script, &object).unwrap();
            let expected = yaml(&dir.join(case["expectedOutputPath"].as_str().unwrap()));
            // An object is a patch of it; a list names what to create, as Argo CD reads them.
            let produced = match &output {
                Value::Array(impacted) => {
                    assert_eq!(impacted.len(), 1, "{kind} {action} {input}: {output}");
                    assert_eq!(impacted[0]["operation"], "create");
                    impacted[0]["resource"].clone()
                }
                _ => gitops::argocd_cleaned(output, &object),
            };
            assert_eq!(produced, expected, "{kind} {action} {input}");
        }
    }
}

#[test]
fn kstatus_reads_every_captured_object_as_the_catalog_says() {
    let root = gitops::root();
    for kind in KINDS {
        for (path, object) in gitops::captured(&root, kind).unwrap() {
            let computed = gitops::kstatus(&object).unwrap();
            let wanted = if object["metadata"]["deletionTimestamp"].is_string() {
                "Terminating"
            } else {
                gitops::expected(&object).kstatus
            };
            assert_eq!(computed.status, wanted, "{kind} {path}: {computed:?}");
        }
    }
}

/// Reasons no captured object shows: the deletion outcomes are recorded as the object goes away
/// (kstatus says Terminating then, which the Deleting captures show).
const NOT_CAPTURED: [Reason; 3] = [
    Reason::Deleted,
    Reason::Orphaned,
    Reason::DeletionSkippedDrifted,
];

#[test]
fn the_captured_objects_cover_every_reason_and_a_fresh_object_of_every_kind() {
    let root = gitops::root();
    let mut shown = BTreeSet::new();
    for kind in KINDS {
        let objects = gitops::captured(&root, kind).unwrap();
        if kind != "ClientPolicy" {
            assert!(
                objects
                    .iter()
                    .any(|(path, _)| path == "testdata/unjudged.yaml"),
                "{kind}: no fresh object captured"
            );
        }
        for (_, object) in objects {
            let reason = gitops::condition(&object, "Ready")["reason"].clone();
            if let Some(reason) = reason.as_str().and_then(|r| r.parse::<Reason>().ok()) {
                shown.insert(reason);
            }
        }
    }
    for reason in Reason::ALL {
        assert!(
            shown.contains(&reason) || NOT_CAPTURED.contains(&reason),
            "no captured object shows {reason}: add a phase to tests/tests/e2e_kstatus.rs and \
             run {}",
            gitops::CAPTURE_COMMAND
        );
    }
}

#[test]
fn no_captured_object_holds_a_secret() {
    let root = gitops::root();
    for kind in KINDS {
        for (path, object) in gitops::captured(&root, kind).unwrap() {
            assert_ne!(object["kind"], "Secret", "{path}");
            let text = object.to_string();
            for word in ["clientSecret\":\"", "stringData", "BEGIN "] {
                assert!(!text.contains(word), "{kind} {path} holds {word}");
            }
        }
    }
}

#[test]
fn every_kind_runs_the_same_scripts() {
    let root = gitops::root();
    let read = |kind: &str, file: &str| {
        std::fs::read_to_string(gitops::kind_dir(&root, kind).join(file)).unwrap()
    };
    for kind in KINDS {
        assert_eq!(
            read(kind, "health.lua"),
            read("OIDCClient", "health.lua"),
            "{kind}"
        );
        if !gitops::actions_of(kind).is_empty() {
            assert_eq!(
                read(kind, "actions/discovery.lua"),
                read("OIDCClient", "actions/discovery.lua"),
                "{kind}"
            );
            assert_eq!(
                read(kind, "actions/restore/action.lua"),
                read("OIDCClient", "actions/restore/action.lua"),
                "{kind}"
            );
        }
    }
}

#[test]
fn the_component_patches_argocd_cm_with_every_script() {
    let root = gitops::root();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("argocd-cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n  namespace: argocd\n\
         data:\n  url: https://argocd.example.test\n",
    )
    .unwrap();
    // A component is named by a relative path: a copy of it beside the installation.
    let component = dir.path().join("argocd");
    std::fs::create_dir(&component).unwrap();
    for file in ["kustomization.yaml", "argocd-cm.yaml"] {
        std::fs::copy(
            root.join(gitops::COMPONENT_DIR).join(file),
            component.join(file),
        )
        .unwrap();
    }
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "resources:\n- argocd-cm.yaml\ncomponents:\n- argocd\n",
    )
    .unwrap();
    let output = std::process::Command::new(kubectl())
        .arg("kustomize")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rendered: Value = serde_saphyr::from_str(&String::from_utf8_lossy(&output.stdout)).unwrap();
    let data = &rendered["data"];
    assert_eq!(
        data["url"], "https://argocd.example.test",
        "kept: {rendered}"
    );
    for kind in KINDS {
        let health =
            std::fs::read_to_string(gitops::kind_dir(&root, kind).join("health.lua")).unwrap();
        assert_eq!(
            data[format!("resource.customizations.health.nauthera.io_{kind}")],
            health.as_str(),
            "{kind}"
        );
        let actions = &data[format!("resource.customizations.actions.nauthera.io_{kind}")];
        if gitops::actions_of(kind).is_empty() {
            assert!(actions.is_null(), "{kind}");
            continue;
        }
        let actions: Value = serde_saphyr::from_str(actions.as_str().unwrap()).unwrap();
        for action in gitops::actions_of(kind) {
            let script = std::fs::read_to_string(
                gitops::kind_dir(&root, kind).join(format!("actions/{action}/action.lua")),
            )
            .unwrap();
            let definition = actions["definitions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["name"] == *action)
                .unwrap_or_else(|| panic!("{kind}: no {action}"));
            assert_eq!(definition["action.lua"], script.as_str(), "{kind} {action}");
        }
    }
}

/// The one command that writes every generated file: in a tree holding only its inputs (the
/// Argo CD scripts with their captured objects, and `docs/gitops.md`), `--check` exits 1 naming
/// what is missing, writing makes the check pass, and an unknown argument exits 2.
#[test]
fn the_generate_command_writes_everything_and_its_check_exits_1_naming_stale_files() {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let tree = tempfile::tempdir().unwrap();
    let root = gitops::root();
    copy(
        &root.join("deploy/argocd"),
        &tree.path().join("deploy/argocd"),
    );
    std::fs::create_dir_all(tree.path().join("docs")).unwrap();
    std::fs::copy(
        root.join("docs/gitops.md"),
        tree.path().join("docs/gitops.md"),
    )
    .unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_nauthera-generate"))
            .args(args)
            .arg("--root")
            .arg(tree.path())
            .output()
            .unwrap()
    };

    let check = run(&["--check"]);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("docs/runbooks/Drifted.md (missing)")
            && stderr.contains("deploy/components/argocd")
            && stderr.contains(gitops::GENERATE_COMMAND),
        "{stderr}"
    );
    let write = run(&[]);
    assert!(
        write.status.success(),
        "{}",
        String::from_utf8_lossy(&write.stderr)
    );
    let check = run(&["--check"]);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let wrong = run(&["--frobnicate"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("unknown argument `--frobnicate`"));
}
