//! The shape of a delivered Secret (`spec.secret.template`): what it holds as written, the marks
//! it carries (which key holds the client secret, the template's digest, the labels and
//! annotations the template set) and how an existing Secret is brought to a new shape. Deciding
//! whether to is `decide`'s; rendering is `nauthera_shared::secret_render`'s.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use nauthera_shared::resources::SecretTemplate;
use nauthera_shared::secret_render::{self, RenderedSecret, SecretFacts};
use nauthera_shared::{
    CLIENT_SECRET_KEY_ANNOTATION, ROTATION_REQUEST_ANNOTATION, SECRET_METADATA_ANNOTATION,
    SECRET_SHAPE_ANNOTATION,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::kubernetes::caches::{SecretSummary, client_secret_key};
use crate::kubernetes::kube_io::{
    MANAGED_BY, MANAGED_BY_LABEL, NamespacedResource, mark_rotation_request, new_secret,
    with_rotation_request, write_failure,
};
use crate::reconcile::decide::SecretWriteFailure;

/// The labels and annotations a template set on a Secret, recorded on it so that those the
/// template no longer declares are removed and those others set are left alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Declared {
    #[serde(default)]
    labels: BTreeSet<String>,
    #[serde(default)]
    annotations: BTreeSet<String>,
}

impl Declared {
    fn of(rendered: &RenderedSecret) -> Declared {
        Declared {
            labels: rendered.labels.keys().cloned().collect(),
            annotations: rendered.annotations.keys().cloned().collect(),
        }
    }

    fn recorded_on(secret: &Secret) -> Declared {
        secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SECRET_METADATA_ANNOTATION))
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }
}

/// Renders the Secret for these facts in the template's shape; a template that does not
/// render is a failure naming its field (never the rendered text).
pub fn render(
    template: Option<&SecretTemplate>,
    facts: &SecretFacts<'_>,
) -> Result<RenderedSecret, SecretWriteFailure> {
    secret_render::render(template, facts).map_err(|problem| SecretWriteFailure::Other {
        message: format!("spec.secret.template does not render: {problem}"),
    })
}

/// The data of a rendered Secret, as the API takes it.
pub fn secret_data(rendered: &RenderedSecret) -> BTreeMap<String, ByteString> {
    rendered
        .data
        .iter()
        .map(|(key, text)| (key.clone(), ByteString(text.as_bytes().to_vec())))
        .collect()
}

/// The labels of a rendered Secret: the managed-by label and those the template declares.
pub fn secret_labels(rendered: &RenderedSecret) -> BTreeMap<String, String> {
    let mut labels = rendered.labels.clone();
    labels.insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
    labels
}

/// The annotations of a rendered Secret: those the template declares and, for a templated
/// shape, the marks that say where the client secret is and which template it came from.
pub fn secret_annotations(rendered: &RenderedSecret) -> BTreeMap<String, String> {
    let mut annotations = rendered.annotations.clone();
    if let Some(shape) = &rendered.shape {
        annotations.insert(
            CLIENT_SECRET_KEY_ANNOTATION.to_owned(),
            rendered.client_secret_key.clone(),
        );
        annotations.insert(SECRET_SHAPE_ANNOTATION.to_owned(), shape.clone());
        annotations.insert(
            SECRET_METADATA_ANNOTATION.to_owned(),
            serde_json::to_string(&Declared::of(rendered)).unwrap_or_default(),
        );
    }
    annotations
}

/// Whether a Secret (as summarized) has the shape of the rendered one.
pub fn same_shape(summary: &SecretSummary, rendered: &RenderedSecret) -> bool {
    summary.shape.as_deref() == rendered.shape.as_deref()
}

/// The merge patch that brings a Secret to the rendered one. With the `existing` Secret (a
/// shape change), what it holds and the rendered one does not is removed: keys, the labels and
/// annotations the template set before, and the marks of a templated shape; whatever else others
/// set stays. Without it (the same shape), the same keys are written again.
pub fn shape_patch(
    existing: Option<&Secret>,
    rendered: &RenderedSecret,
    resource_version: Option<&str>,
) -> Value {
    let mut data = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    if let Some(existing) = existing {
        let before = Declared::recorded_on(existing);
        for key in existing.data.iter().flat_map(|data| data.keys()) {
            data.insert(key.clone(), Value::Null);
        }
        for key in before.labels {
            labels.insert(key, Value::Null);
        }
        for key in before.annotations {
            annotations.insert(key, Value::Null);
        }
        for mark in [
            CLIENT_SECRET_KEY_ANNOTATION,
            SECRET_SHAPE_ANNOTATION,
            SECRET_METADATA_ANNOTATION,
        ] {
            annotations.insert(mark.to_owned(), Value::Null);
        }
    }
    for (key, value) in secret_data(rendered) {
        data.insert(key, serde_json::to_value(value).unwrap_or(Value::Null));
    }
    for (key, value) in secret_labels(rendered) {
        labels.insert(key, Value::String(value));
    }
    for (key, value) in secret_annotations(rendered) {
        annotations.insert(key, Value::String(value));
    }
    serde_json::json!({
        "metadata": {
            "resourceVersion": resource_version,
            "labels": labels,
            "annotations": annotations,
        },
        "data": data,
    })
}

/// Whether the Secret must be replaced to take the rendered shape: Kubernetes does not change
/// a Secret's type.
pub fn needs_replacement(existing: &Secret, rendered: &RenderedSecret) -> bool {
    existing.type_.as_deref().unwrap_or("Opaque") != rendered.type_
}

/// Brings an existing Secret `owner` owns to the rendered shape: patched, or replaced (deleted,
/// only if unchanged since read, and created again) when its type changes. `rotation_request`:
/// the rotation request whose secret it holds after the write.
pub async fn write_shape<K: NamespacedResource>(
    secrets: &Api<Secret>,
    owner: &K,
    (name, existing): (&str, &Secret),
    rendered: &RenderedSecret,
    rotation_request: Option<&str>,
) -> Result<(), SecretWriteFailure> {
    if needs_replacement(existing, rendered) {
        let replacement =
            with_rotation_request(new_secret(owner, name, rendered)?, rotation_request);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: existing.metadata.uid.clone(),
                resource_version: existing.metadata.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        secrets.delete(name, &params).await.map_err(write_failure)?;
        return secrets
            .create(&PostParams::default(), &replacement)
            .await
            .map(|_| ())
            .map_err(write_failure);
    }
    let mut patch = shape_patch(
        Some(existing),
        rendered,
        existing.metadata.resource_version.as_deref(),
    );
    mark_rotation_request(&mut patch, rotation_request);
    secrets
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(write_failure)
}

/// What rewriting a Secret in the declared shape came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reshaped {
    /// Rewritten with the client secret it held.
    Rewritten,
    /// Nothing to rewrite: gone, not this resource's, or without a client secret (the next
    /// look mints one).
    Nothing,
}

/// Rewrites the Secret `owner` owns in the declared shape, with the client secret it holds
/// (read under the key recorded on it): nothing is minted. Before a Secret is replaced (a new
/// type), its value is handed to `hold`, so that a create that fails after the delete is
/// retried from memory rather than minting a new secret.
pub async fn reshape_secret<K: NamespacedResource>(
    secrets: &Api<Secret>,
    owner: &K,
    name: &str,
    facts: (Option<&SecretTemplate>, &str, &str),
    hold: impl FnOnce(String),
) -> Result<Reshaped, SecretWriteFailure> {
    let (template, client_id, issuer) = facts;
    let owner_uid = kube::ResourceExt::uid(owner).unwrap_or_default();
    let Some(existing) = secrets.get_opt(name).await.map_err(write_failure)? else {
        return Ok(Reshaped::Nothing);
    };
    let owned = SecretSummary::from(&existing).owned_by(&owner_uid);
    let value = existing
        .data
        .as_ref()
        .and_then(|data| data.get(client_secret_key(&existing)))
        .and_then(|value| String::from_utf8(value.0.clone()).ok())
        .filter(|value| !value.is_empty());
    let (true, Some(value)) = (owned, value) else {
        return Ok(Reshaped::Nothing);
    };
    let rendered = render(
        template,
        &SecretFacts {
            client_id,
            client_secret: &value,
            issuer,
        },
    )?;
    // Already in that shape (a watch cache that lags behind the last rewrite): nothing to write.
    if same_shape(&SecretSummary::from(&existing), &rendered)
        && !needs_replacement(&existing, &rendered)
    {
        return Ok(Reshaped::Nothing);
    }
    if needs_replacement(&existing, &rendered) {
        hold(value);
    }
    // The rotation request it holds stays recorded: the value is the same.
    let rotation_request = existing
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(ROTATION_REQUEST_ANNOTATION))
        .cloned();
    write_shape(
        secrets,
        owner,
        (name, &existing),
        &rendered,
        rotation_request.as_deref(),
    )
    .await?;
    Ok(Reshaped::Rewritten)
}

#[cfg(test)]
mod tests;
