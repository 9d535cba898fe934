//! What GitOps tools read from the resources, checked with their own code: kstatus
//! (`sigs.k8s.io/cli-utils`) and Argo CD's Lua interpreter (gopher-lua), both built from the Go
//! module `tests/gitops/`; the Argo CD resource customizations under `deploy/argocd/`, their
//! captured test objects and test cases, the kustomize component generated from them, and the
//! table of `docs/gitops.md`.
//!
//! `cargo run -p nauthera-tests --bin nauthera-generate` writes the generated files
//! (`--check` lists the stale ones); `tests/tests/gitops.rs` fails while one is stale. The test
//! objects themselves come from the end-to-end runs:
//! [`CAPTURE_COMMAND`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::{Context, bail};
use nauthera_shared::catalog::{Cause, Progress, Reason, gitops_text};
use serde_json::{Value, json};

/// The command that writes the generated files.
pub use nauthera_shared::catalog::GENERATE_COMMAND;

/// The command that captures the test objects anew.
pub const CAPTURE_COMMAND: &str = "NAUTHERA_CAPTURE_FIXTURES=1 cargo test --workspace --test e2e_kstatus --test e2e_multi_cluster -- ::emulator";

/// The variable that makes the end-to-end test write the objects it captures.
pub const CAPTURE_ENV: &str = "NAUTHERA_CAPTURE_FIXTURES";

/// Argo CD's resource customizations of the group, one folder per kind.
pub const CUSTOMIZATIONS_DIR: &str = "deploy/argocd/resource_customizations/nauthera.io";

/// The kustomize component that patches `argocd-cm`.
pub const COMPONENT_DIR: &str = "deploy/components/argocd";

/// The page that shows both tools.
pub const DOC: &str = "docs/gitops.md";

/// The kinds with a status, so with a health check.
pub const KINDS: [&str; 5] = [
    "OIDCClient",
    "Branding",
    "IdentityProvider",
    "Organization",
    "ClientPolicy",
];

/// The actions of a kind: restore on every kind that can drift, approve on OIDCClients.
pub fn actions_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "OIDCClient" => &["restore", "approve"],
        "ClientPolicy" => &[],
        _ => &["restore"],
    }
}

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The folder of the built checkers (`bin/kstatus`, `bin/argocd-lua`), built on first use by
/// `tests/gitops/build.sh`.
pub fn checkers() -> anyhow::Result<&'static Path> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let output = Command::new("bash")
            .arg(root().join("tests/gitops/build.sh"))
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("running tests/gitops/build.sh: {e}"))?;
        if !output.status.success() {
            return Err(format!("tests/gitops/build.sh failed ({})", output.status));
        }
        Ok(PathBuf::from(
            String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        ))
    });
    match built {
        Ok(path) => Ok(path.as_path()),
        Err(error) => bail!("{error}"),
    }
}

fn run_checker(binary: &str, args: &[&Path], object: &Value) -> anyhow::Result<Value> {
    use std::io::Write as _;
    let mut child = Command::new(checkers()?.join("bin").join(binary))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {binary}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(object.to_string().as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "{binary} {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// What kstatus computes for an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KStatus {
    /// `Current`, `InProgress`, `Failed`, `Terminating`, ...
    pub status: String,
    pub message: String,
}

/// The kstatus result of `object`, computed by `sigs.k8s.io/cli-utils`.
pub fn kstatus(object: &Value) -> anyhow::Result<KStatus> {
    let result = run_checker("kstatus", &[], object)?;
    Ok(KStatus {
        status: result["status"].as_str().unwrap_or_default().to_owned(),
        message: result["message"].as_str().unwrap_or_default().to_owned(),
    })
}

/// Runs an Argo CD script against `object` with gopher-lua; the table it returns, as JSON.
pub fn run_lua(script: &Path, object: &Value) -> anyhow::Result<Value> {
    run_checker("argocd-lua", &[script], object)
}

/// The folder of a kind's customizations.
pub fn kind_dir(root: &Path, kind: &str) -> PathBuf {
    root.join(CUSTOMIZATIONS_DIR).join(kind)
}

/// What an object's status says, as GitOps tools should show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The kstatus result.
    pub kstatus: &'static str,
    /// Argo CD's health status.
    pub health: &'static str,
    /// Argo CD's health message.
    pub message: String,
}

/// The catalog's verdict on a captured object: unjudged (its status describes an older
/// generation) is InProgress/Progressing; otherwise the progress of its reason and cause (a
/// ClientPolicy's own `Ready` reasons other than `PolicyRefused` are in force).
pub fn expected(object: &Value) -> Expected {
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(0);
    let status = &object["status"];
    if status["observedGeneration"].as_i64() != Some(generation) {
        return Expected {
            kstatus: "InProgress",
            health: "Progressing",
            message: format!("waiting for the reconciler to judge generation {generation}"),
        };
    }
    let ready = condition(object, "Ready");
    let reason_word = ready["reason"].as_str().unwrap_or_default();
    let cause = status["cause"]
        .as_str()
        .and_then(|word| Cause::ALL.into_iter().find(|c| c.as_str() == word))
        .unwrap_or(Cause::None);
    let progress = match reason_word.parse::<Reason>() {
        Ok(reason) => reason.progress(cause),
        Err(_) => Progress::Settled,
    };
    let shown = match progress {
        Progress::Settled | Progress::Observing => ready,
        Progress::Reconciling => condition(object, "Reconciling"),
        Progress::Stalled | Progress::AwaitsDecision => condition(object, "Stalled"),
    };
    let reason = shown["reason"].as_str().unwrap_or_default();
    let message = match shown["message"].as_str().unwrap_or_default() {
        "" => reason.to_owned(),
        text => format!("{reason}: {text}"),
    };
    Expected {
        kstatus: progress.kstatus(),
        health: progress.argocd_health(),
        message,
    }
}

/// The condition of a type in an object's status (`Value::Null` when absent).
pub fn condition<'a>(object: &'a Value, type_: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    object["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == type_))
        .unwrap_or(&NULL)
}

/// An object as a test fixture: what the scripts read, in a stable form. Identity, times and
/// the bookkeeping of the API server are replaced or dropped; `namespace` becomes `team-a`
/// wherever it appears.
pub fn fixture(object: &Value, namespace: &str) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for field in [
            "managedFields",
            "resourceVersion",
            "creationTimestamp",
            "selfLink",
        ] {
            metadata.remove(field);
        }
        if metadata.contains_key("uid") {
            metadata.insert("uid".into(), json!("00000000-0000-4000-8000-000000000001"));
        }
        if metadata.contains_key("deletionTimestamp") {
            metadata.insert("deletionTimestamp".into(), json!("2026-01-01T00:00:00Z"));
        }
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
            if annotations.is_empty() {
                metadata.remove("annotations");
            }
        }
    }
    stabilise_times(&mut object);
    let text = object.to_string().replace(namespace, "team-a");
    serde_json::from_str(&text).unwrap_or(object)
}

/// Every RFC 3339 time becomes one fixed time, so a capture differs from the last only where the
/// status does.
fn stabilise_times(value: &mut Value) {
    match value {
        Value::Object(map) => map.values_mut().for_each(stabilise_times),
        Value::Array(items) => items.iter_mut().for_each(stabilise_times),
        Value::String(text) if looks_like_time(text) => *text = "2026-01-01T00:00:00Z".into(),
        _ => {}
    }
}

fn looks_like_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 20
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
        && bytes[13] == b':'
        && text.ends_with('Z')
        && text.parse::<jiff::Timestamp>().is_ok()
}

/// Writes a captured object as `testdata/<stem>.yaml` of its kind, when captures are asked for
/// ([`CAPTURE_ENV`]); returns whether it wrote.
pub fn capture(stem: &str, object: &Value) -> anyhow::Result<bool> {
    if std::env::var_os(CAPTURE_ENV).is_none() {
        return Ok(false);
    }
    let kind = object["kind"].as_str().unwrap_or_default();
    let dir = kind_dir(&root(), kind).join("testdata");
    std::fs::create_dir_all(&dir)?;
    let yaml = serde_saphyr::to_string(object)?;
    std::fs::write(
        dir.join(format!("{stem}.yaml")),
        format!("# Captured by {CAPTURE_COMMAND}; do not edit.\n{yaml}"),
    )?;
    Ok(true)
}

/// The captured objects of a kind: file name (`testdata/...`) and object, sorted by name.
pub fn captured(root: &Path, kind: &str) -> anyhow::Result<Vec<(String, Value)>> {
    let dir = kind_dir(root, kind).join("testdata");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(found);
    };
    for entry in entries {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        // Expected outputs of actions are not captured objects.
        if !name.ends_with(".yaml") || name.contains(".after-") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let object: Value =
            serde_saphyr::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
        found.push((format!("testdata/{name}"), object));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// The object an action returned, as Argo CD applies it: Lua cannot tell an empty table that was
/// an object from an empty list, so where the input held an object and the output an empty list,
/// Argo CD keeps the input's object (its `cleanReturnedObj`); the same here, for the test cases.
pub fn argocd_cleaned(output: Value, input: &Value) -> Value {
    match (output, input) {
        (Value::Object(mut fields), Value::Object(before)) => {
            for (key, value) in fields.iter_mut() {
                if let Some(old) = before.get(key) {
                    *value = argocd_cleaned(std::mem::take(value), old);
                }
            }
            Value::Object(fields)
        }
        (Value::Array(items), Value::Object(before)) if items.is_empty() => {
            Value::Object(before.clone())
        }
        (Value::Array(items), Value::Array(before)) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| match before.get(i) {
                    Some(old) => argocd_cleaned(item, old),
                    None => item,
                })
                .collect(),
        ),
        (output, _) => output,
    }
}

/// One generated file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    /// Relative to the repository root.
    pub path: PathBuf,
    pub contents: String,
}

fn header(comment: &str) -> String {
    format!("{comment} Generated by {GENERATE_COMMAND}; do not edit.\n")
}

/// Whether an action applies to a captured object (the discovery script's rule, said again as
/// the oracle of its test cases).
fn action_enabled(kind: &str, action: &str, object: &Value) -> bool {
    let judged = object["status"]["observedGeneration"] == object["metadata"]["generation"];
    let reason = object["status"]["reason"].as_str().unwrap_or_default();
    let requested = object["metadata"]["annotations"]["nauthera.io/restore"] == "true";
    match action {
        "restore" => judged && reason == "Drifted" && !requested,
        "approve" => kind == "OIDCClient" && judged && reason == "WaitingForApproval",
        _ => false,
    }
}

/// What an action makes of an object: the oracle of the action test cases.
pub fn action_output(action: &str, object: &Value) -> Value {
    match action {
        "restore" => {
            let mut restored = object.clone();
            restored["metadata"]["annotations"]["nauthera.io/restore"] = json!("true");
            restored
        }
        _ => {
            let metadata = &object["metadata"];
            let generation = metadata["generation"].as_i64().unwrap_or(0);
            let client = metadata["name"].as_str().unwrap_or_default();
            json!({
                "apiVersion": "nauthera.io/v1alpha1",
                "kind": "ClientApproval",
                "metadata": {
                    "name": format!("{client}-{generation}"),
                    "namespace": metadata["namespace"],
                },
                "spec": { "client": client, "generation": generation, "uid": metadata["uid"] },
            })
        }
    }
}

/// The generated files: each kind's `health_test.yaml` and `action_test.yaml` with the expected
/// outputs of its actions (from the captured objects and the catalog), the component patching
/// `argocd-cm` (from the scripts), and the table of the docs page (from the catalog).
pub fn generated_files(root: &Path) -> anyhow::Result<Vec<Generated>> {
    let mut files = Vec::new();
    let mut config = BTreeMap::new();
    for kind in KINDS {
        let dir = Path::new(CUSTOMIZATIONS_DIR).join(kind);
        let objects = captured(root, kind)?;
        let mut health = header("#");
        health.push_str("tests:\n");
        for (path, object) in &objects {
            let expected = expected(object);
            health.push_str(&format!(
                "- healthStatus:\n    status: {}\n    message: {}\n  inputPath: {path}\n",
                expected.health,
                serde_json::to_string(&expected.message)?
            ));
        }
        files.push(Generated {
            path: dir.join("health_test.yaml"),
            contents: health,
        });
        let health_lua = read(root, &dir.join("health.lua"))?;
        config.insert(
            format!("resource.customizations.health.nauthera.io_{kind}"),
            health_lua,
        );
        let actions = actions_of(kind);
        if actions.is_empty() {
            continue;
        }
        let mut tests = header("#");
        tests.push_str("discoveryTests:\n");
        for (path, object) in &objects {
            tests.push_str(&format!("- inputPath: {path}\n  result:\n"));
            for action in actions {
                tests.push_str(&format!(
                    "  - name: {action}\n    disabled: {}\n",
                    !action_enabled(kind, action, object)
                ));
            }
        }
        tests.push_str("actionTests:\n");
        for (path, object) in &objects {
            for action in actions {
                if !action_enabled(kind, action, object) {
                    continue;
                }
                let stem = path
                    .trim_start_matches("testdata/")
                    .trim_end_matches(".yaml");
                let output = format!("testdata/{stem}.after-{action}.yaml");
                tests.push_str(&format!(
                    "- action: {action}\n  inputPath: {path}\n  expectedOutputPath: {output}\n"
                ));
                files.push(Generated {
                    path: dir.join(&output),
                    contents: format!(
                        "{}{}",
                        header("#"),
                        serde_saphyr::to_string(&action_output(action, object))?
                    ),
                });
            }
        }
        files.push(Generated {
            path: dir.join("action_test.yaml"),
            contents: tests,
        });
        let mut definitions = String::from("definitions:\n");
        for action in actions {
            let script = read(root, &dir.join(format!("actions/{action}/action.lua")))?;
            definitions.push_str(&format!(
                "- name: {action}\n  action.lua: |\n{}",
                indent(&script, "    ")
            ));
        }
        let discovery = read(root, &dir.join("actions/discovery.lua"))?;
        config.insert(
            format!("resource.customizations.actions.nauthera.io_{kind}"),
            format!(
                "discovery.lua: |\n{}{definitions}",
                indent(&discovery, "  ")
            ),
        );
    }
    files.push(Generated {
        path: Path::new(COMPONENT_DIR).join("argocd-cm.yaml"),
        contents: argocd_cm(&config),
    });
    files.push(Generated {
        path: Path::new(COMPONENT_DIR).join("kustomization.yaml"),
        contents: format!(
            "{}# Argo CD's health checks and actions for the nauthera.io kinds: include this \
             component in the\n# kustomization that installs Argo CD (it patches its ConfigMap \
             argocd-cm). The scripts are\n# deploy/argocd/resource_customizations; see \
             docs/gitops.md.\napiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n\
             patches:\n- path: argocd-cm.yaml\n  target:\n    kind: ConfigMap\n    name: argocd-cm\n",
            header("#")
        ),
    });
    let doc = root.join(DOC);
    let page = std::fs::read_to_string(&doc).with_context(|| format!("reading {DOC}"))?;
    files.push(Generated {
        path: PathBuf::from(DOC),
        contents: with_table(&page)?,
    });
    Ok(files)
}

fn read(root: &Path, path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(root.join(path)).with_context(|| format!("reading {}", path.display()))
}

fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|line| {
            if line.is_empty() {
                "\n".to_owned()
            } else {
                format!("{by}{line}\n")
            }
        })
        .collect()
}

fn argocd_cm(config: &BTreeMap<String, String>) -> String {
    let mut text = header("#");
    text.push_str("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\ndata:\n");
    for (key, value) in config {
        text.push_str(&format!("  {key}: |\n{}", indent(value, "    ")));
    }
    text
}

const TABLE_START: &str = "<!-- reasons: generated by nauthera-generate -->";
const TABLE_END: &str = "<!-- end of reasons -->";

/// The page with the table of what each tool shows for each reason written between its markers.
pub fn with_table(page: &str) -> anyhow::Result<String> {
    let (Some(start), Some(end)) = (page.find(TABLE_START), page.find(TABLE_END)) else {
        bail!("{DOC} lacks the markers {TABLE_START} and {TABLE_END}");
    };
    let mut table = format!("{TABLE_START}\n\n");
    table.push_str("| Reason | Ready | Conditions, kstatus and Argo CD |\n|---|---|---|\n");
    for reason in Reason::ALL {
        let entry = reason.entry();
        table.push_str(&format!(
            "| [`{reason}`](runbooks/{reason}.md) | {} | {} |\n",
            entry.ready,
            gitops_text(entry)
        ));
    }
    table.push('\n');
    Ok(format!("{}{table}{}", &page[..start], &page[end..]))
}

/// Writes every generated file; returns the paths written.
pub fn write_all(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for file in stale(root)? {
        let path = root.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &file.contents)?;
        written.push(file.path);
    }
    Ok(written)
}

/// The generated files whose contents on disk differ.
pub fn stale(root: &Path) -> anyhow::Result<Vec<Generated>> {
    Ok(generated_files(root)?
        .into_iter()
        .filter(|file| {
            std::fs::read_to_string(root.join(&file.path))
                .ok()
                .as_deref()
                != Some(file.contents.as_str())
        })
        .collect())
}
