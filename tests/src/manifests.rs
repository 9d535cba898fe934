//! Manifests applied the way a user applies them: YAML files, server-side apply, CRDs first and
//! only then the objects of their kinds.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope};

use crate::binaries::workspace_root;

/// The field manager of everything the harness applies.
pub const FIELD_MANAGER: &str = "nauthera-harness";

/// The YAML documents of `text` as values, empty ones left out.
pub fn documents(text: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    Ok(serde_saphyr::from_multiple::<serde_json::Value>(text)
        .context("not YAML")?
        .into_iter()
        .filter(|document| !document.is_null())
        .collect())
}

/// `dir` as `kubectl kustomize` renders it.
pub fn kustomize(dir: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let output = std::process::Command::new(crate::e2e::kubectl())
        .arg("kustomize")
        .arg(dir)
        .output()
        .context("cannot run kubectl kustomize")?;
    if !output.status.success() {
        bail!(
            "kubectl kustomize {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    documents(&String::from_utf8(output.stdout)?)
}

/// Every YAML document of the `.yaml` files in `dir` (sorted by file name), skipping
/// `kustomization.yaml`.
pub fn load_dir(dir: &Path) -> anyhow::Result<Vec<DynamicObject>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension().is_some_and(|e| e == "yaml" || e == "yml")
                && path.file_name().is_some_and(|n| n != "kustomization.yaml")
        })
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        objects.extend(load_file(&file)?);
    }
    Ok(objects)
}

/// Every YAML document of one file.
pub fn load_file(file: &Path) -> anyhow::Result<Vec<DynamicObject>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("{} is not valid YAML", file.display()))?;
    documents
        .into_iter()
        .filter(|doc| !doc.is_null())
        .map(|doc| {
            serde_json::from_value(doc).with_context(|| {
                format!("{} holds a document that is not an object", file.display())
            })
        })
        .collect()
}

/// Applies the project's CRDs (`deploy/crds/`) and waits until the API serves them.
pub async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
    install_crds_from(client, &workspace_root().join("deploy/crds")).await
}

/// Applies the CRDs of `dir` (another release's `deploy/crds`) and waits until the API serves
/// them.
pub async fn install_crds_from(client: &kube::Client, dir: &Path) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for object in load_dir(dir)? {
        let name = object
            .metadata
            .name
            .clone()
            .context("a CRD without a name")?;
        crds.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .with_context(|| format!("cannot apply the CRD {name}"))?;
    }
    wait_for_group(client, nauthera_shared::GROUP, 4).await
}

/// Waits until discovery serves at least `kinds` kinds of `group` (a CRD is served a moment after
/// it is applied), both from the group's own endpoint and from the aggregated discovery kubectl
/// reads: a real API server updates the latter a moment later, and a `kubectl apply` in between
/// answers "no matches for kind".
pub async fn wait_for_group(
    client: &kube::Client,
    group: &str,
    kinds: usize,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let serves = |discovery: kube::Result<Discovery>| {
        discovery.is_ok_and(|discovery| {
            discovery
                .groups()
                .map(|g| g.recommended_resources().len())
                .sum::<usize>()
                >= kinds
        })
    };
    loop {
        let discovery = || Discovery::new(client.clone()).filter(&[group]);
        if serves(discovery().run().await) && serves(discovery().run_aggregated().await) {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("the API does not serve the {group} kinds 30 s after their CRDs were applied");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Applies objects with server-side apply, each into `namespace` when its kind is namespaced and
/// it names none.
/// The annotation `kubectl apply` keeps the applied manifest in, to compute its next patch.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manifests as `kubectl apply` leaves them: each carries its own JSON in
/// [`LAST_APPLIED_ANNOTATION`], so that a person who applies the same files again with kubectl
/// gets a clean three-way patch, not a warning that the annotation is missing.
pub fn as_kubectl_applies(objects: &[DynamicObject]) -> anyhow::Result<Vec<DynamicObject>> {
    objects
        .iter()
        .map(|object| {
            let mut applied = object.clone();
            let mut recorded = serde_json::to_value(object)?;
            if let Some(annotations) = recorded
                .pointer_mut("/metadata/annotations")
                .and_then(serde_json::Value::as_object_mut)
            {
                annotations.remove(LAST_APPLIED_ANNOTATION);
            }
            let mut text = serde_json::to_string(&recorded)?;
            text.push('\n');
            applied
                .metadata
                .annotations
                .get_or_insert_default()
                .insert(LAST_APPLIED_ANNOTATION.to_owned(), text);
            Ok(applied)
        })
        .collect()
}

/// How often a kind the discovery does not list is looked up again, half a second apart.
const DISCOVERY_RETRIES: u32 = 20;

pub async fn apply_all(
    client: &kube::Client,
    objects: &[DynamicObject],
    namespace: Option<&str>,
) -> anyhow::Result<()> {
    let mut discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("API discovery failed")?;
    for object in objects {
        let types = object
            .types
            .as_ref()
            .context("a manifest without apiVersion and kind")?;
        let gvk = GroupVersionKind::try_from(types)?;
        // A group whose CRDs were just established can be missing from the discovery for a
        // moment when `wait_for_group` was not asked first.
        let mut attempts = 0;
        while discovery.resolve_gvk(&gvk).is_none() && attempts < DISCOVERY_RETRIES {
            attempts += 1;
            tokio::time::sleep(Duration::from_millis(500)).await;
            discovery = Discovery::new(client.clone())
                .run()
                .await
                .context("API discovery failed")?;
        }
        let (resource, capabilities) = discovery.resolve_gvk(&gvk).with_context(|| {
            format!(
                "the API does not serve {}/{}",
                types.api_version, types.kind
            )
        })?;
        let name = object
            .metadata
            .name
            .clone()
            .context("a manifest without a name")?;
        let api = api_for(client, &resource, &capabilities, object, namespace);
        let mut object = object.clone();
        if capabilities.scope == Scope::Namespaced && object.metadata.namespace.is_none() {
            object.metadata.namespace = namespace.map(str::to_string);
        }
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .with_context(|| format!("cannot apply {} {name}", types.kind))?;
    }
    Ok(())
}

fn api_for(
    client: &kube::Client,
    resource: &ApiResource,
    capabilities: &ApiCapabilities,
    object: &DynamicObject,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match capabilities.scope {
        Scope::Cluster => Api::all_with(client.clone(), resource),
        Scope::Namespaced => {
            let ns = object
                .metadata
                .namespace
                .as_deref()
                .or(namespace)
                .unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, resource)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applied_manifests_carry_their_own_json_as_kubectl_apply_keeps_it() {
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "x", "annotations": {"team": "a"}},
            "data": {"k": "v"}
        }))
        .unwrap();
        let applied = as_kubectl_applies(&[object]).unwrap();
        let annotations = applied[0].metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations["team"], "a");
        let recorded: serde_json::Value =
            serde_json::from_str(&annotations[LAST_APPLIED_ANNOTATION]).unwrap();
        assert_eq!(recorded["data"]["k"], "v");
        assert_eq!(recorded["metadata"]["annotations"]["team"], "a");
        assert!(
            recorded["metadata"]["annotations"]
                .get(LAST_APPLIED_ANNOTATION)
                .is_none()
        );
    }
}
