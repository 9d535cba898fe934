//! The Kubernetes edges of the pipeline: finalizers, the restore annotation, status by server-side
//! apply under the manager's name, and Secrets. Nothing here decides anything.

use std::fmt::Debug;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ManagedFieldsEntry, ObjectMeta, OwnerReference,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use nauthera_shared::resources::ResourceStatus;
use nauthera_shared::topology::TAKE_OVER_ANNOTATION;
use nauthera_shared::{
    ADOPT_ANNOTATION, ADOPT_SECRET_ANNOTATION, FINALIZER, RESTORE_ANNOTATION,
    RESTORE_REQUEST_ANNOTATION, ROTATE_ANNOTATION, ROTATION_REQUEST_ANNOTATION,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::kubernetes::caches::{CLIENT_ID_KEY, SecretSummary};
use crate::kubernetes::secret_shape;
use crate::process::memory::SecretValue;
use crate::reconcile::decide::{
    AdoptRequest, RotationRequest, SecretHeld, SecretRefProblem, SecretState, SecretWriteFailure,
};
use nauthera_shared::secret_render::RenderedSecret;

pub mod restart;
pub mod unread;

/// The label on every Secret the reconciler writes, so it watches only those.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "nauthera-reconciler";

/// A resource kind the pipeline handles.
pub trait NamespacedResource:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> NamespacedResource for K where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// Adds the finalizer (or removes it), checking the resourceVersion so that a concurrent change
/// is not lost.
pub async fn set_finalizer<K: NamespacedResource>(
    api: &Api<K>,
    resource: &K,
    present: bool,
) -> Result<(), kube::Error> {
    let finalizers = finalizers_with_ours(resource.finalizers(), present);
    let metadata = serde_json::json!({
        "finalizers": finalizers,
        "resourceVersion": resource.resource_version(),
    });
    patch_metadata(api, resource, metadata).await
}

/// The finalizers with the reconciler's own added or removed and everybody else's kept as they
/// are (the garbage collector's `orphan` and `foregroundDeletion` among them).
fn finalizers_with_ours(finalizers: &[String], present: bool) -> Vec<String> {
    let mut finalizers = finalizers.to_vec();
    finalizers.retain(|f| f != FINALIZER);
    if present {
        finalizers.push(FINALIZER.to_owned());
    }
    finalizers
}

/// A merge patch of the resource's metadata (the reconciler's own marks: finalizer, answered
/// annotations).
async fn patch_metadata<K: NamespacedResource>(
    api: &Api<K>,
    resource: &K,
    metadata: serde_json::Value,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({ "metadata": metadata });
    unread::patch(
        api,
        &resource.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
}

/// Whether the restore annotation asks for a restore.
pub fn restore_requested<K: Resource>(resource: &K) -> bool {
    resource
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(RESTORE_ANNOTATION))
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"))
}

/// The request the restore annotation came with (`nauthera.io/restore-request`), if any.
pub fn restore_request<K: Resource>(resource: &K) -> Option<String> {
    resource
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(RESTORE_REQUEST_ANNOTATION))
        .filter(|value| !value.is_empty())
        .cloned()
}

/// Who set the restore annotation: the field manager whose managedFields entry owns it (the
/// newest, should several). The API server keeps it; nothing the requester writes can change it.
pub fn restore_requester(meta: &ObjectMeta) -> Option<String> {
    annotation_setter(meta, RESTORE_ANNOTATION).and_then(|entry| entry.manager.clone())
}

/// The newest managedFields entry that owns an annotation.
fn annotation_setter<'a>(meta: &'a ObjectMeta, annotation: &str) -> Option<&'a ManagedFieldsEntry> {
    meta.managed_fields
        .as_deref()?
        .iter()
        .filter(|entry| owns_annotation(entry, annotation))
        .max_by_key(|entry| entry.time.as_ref().map(|time| time.0))
}

/// Whether a managedFields entry owns the restore annotation.
pub fn owns_restore_annotation(entry: &ManagedFieldsEntry) -> bool {
    owns_annotation(entry, RESTORE_ANNOTATION)
}

/// Whether a managedFields entry owns the adopt annotation.
pub fn owns_adopt_annotation(entry: &ManagedFieldsEntry) -> bool {
    owns_annotation(entry, ADOPT_ANNOTATION)
}

/// Whether a managedFields entry owns the rotate annotation.
pub fn owns_rotate_annotation(entry: &ManagedFieldsEntry) -> bool {
    owns_annotation(entry, ROTATE_ANNOTATION)
}

fn owns_annotation(entry: &ManagedFieldsEntry, annotation: &str) -> bool {
    entry
        .fields_v1
        .as_ref()
        .and_then(|fields| fields.0.get("f:metadata"))
        .and_then(|metadata| metadata.get("f:annotations"))
        .is_some_and(|annotations| annotations.get(format!("f:{annotation}")).is_some())
}

/// The rotation `nauthera.io/rotate` asks for, with who set it and when (from the
/// managedFields, which the requester cannot forge).
pub fn rotation_request<K: Resource>(resource: &K) -> Option<RotationRequest> {
    let meta = resource.meta();
    let request = meta
        .annotations
        .as_ref()?
        .get(ROTATE_ANNOTATION)?
        .trim()
        .to_owned();
    if request.is_empty() {
        return None;
    }
    let setter = annotation_setter(meta, ROTATE_ANNOTATION);
    Some(RotationRequest {
        request,
        requested_by: setter.and_then(|entry| entry.manager.clone()),
        requested_at: setter.and_then(|entry| entry.time.as_ref().map(|time| time.0)),
    })
}

/// Removes the rotate annotation, only while it still carries the request answered: the
/// resourceVersion keeps a newer request set in between from being lost.
pub async fn clear_rotate_annotation<K: NamespacedResource>(
    api: &Api<K>,
    resource: &K,
) -> Result<(), kube::Error> {
    let metadata = serde_json::json!({
        "resourceVersion": resource.resource_version(),
        "annotations": { ROTATE_ANNOTATION: null },
    });
    patch_metadata(api, resource, metadata).await
}

/// The adoption `nauthera.io/adopt` asks for (with `nauthera.io/adopt-secret`), and who set it
/// (from the managedFields). The annotation stays once carried out: `status.lastAdoption`
/// answers it, so a manifest in Git can carry it.
pub fn adopt_request<K: Resource>(resource: &K) -> Option<AdoptRequest> {
    let meta = resource.meta();
    let annotations = meta.annotations.as_ref()?;
    let revision = annotations.get(ADOPT_ANNOTATION)?.trim().to_owned();
    if revision.is_empty() {
        return None;
    }
    let secret = match annotations.get(ADOPT_SECRET_ANNOTATION) {
        None => Ok(nauthera_shared::resources::AdoptSecret::default()),
        Some(value) => nauthera_shared::resources::AdoptSecret::parse(value)
            .ok_or_else(|| value.trim().to_owned()),
    };
    Some(AdoptRequest {
        revision,
        secret,
        requested_by: annotation_setter(meta, ADOPT_ANNOTATION)
            .and_then(|entry| entry.manager.clone()),
    })
}

/// The manager `nauthera.io/take-over-from` names, if set.
pub fn take_over_from<K: Resource>(resource: &K) -> Option<String> {
    resource
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(TAKE_OVER_ANNOTATION))
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// Removes the take-over annotation once the object is taken over.
pub async fn clear_take_over_annotation<K: NamespacedResource>(
    api: &Api<K>,
    resource: &K,
) -> Result<(), kube::Error> {
    let metadata = serde_json::json!({ "annotations": { TAKE_OVER_ANNOTATION: null } });
    patch_metadata(api, resource, metadata).await
}

/// Removes the restore annotation and the request beside it.
pub async fn clear_restore_annotation<K: NamespacedResource>(
    api: &Api<K>,
    resource: &K,
) -> Result<(), kube::Error> {
    let metadata = serde_json::json!({
        "annotations": { RESTORE_ANNOTATION: null, RESTORE_REQUEST_ANNOTATION: null }
    });
    patch_metadata(api, resource, metadata).await
}

/// A status as it was written: its text, serialized once for the write's body and read back
/// by what the reconciler remembers of it.
#[derive(Debug)]
pub struct WrittenStatus(Box<serde_json::value::RawValue>);

impl WrittenStatus {
    pub fn of(status: &ResourceStatus) -> Result<WrittenStatus, serde_json::Error> {
        serde_json::value::to_raw_value(status).map(WrittenStatus)
    }

    pub fn text(&self) -> &str {
        self.0.get()
    }
}

/// Writes the status by server-side apply under the manager's name, forced: the status belongs
/// to the reconciler. With `if_version`, only over that resourceVersion of the object (a 409
/// Conflict otherwise). Returns the status as it was written.
pub async fn write_status<K: NamespacedResource>(
    api: &Api<K>,
    name: &str,
    status: &ResourceStatus,
    manager: &str,
    if_version: Option<&str>,
) -> Result<WrittenStatus, kube::Error> {
    let written = WrittenStatus::of(status).map_err(kube::Error::SerdeError)?;
    let patch = StatusApply {
        api_version: K::api_version(&()),
        kind: K::kind(&()),
        metadata: if_version.map(|resource_version| VersionOnly { resource_version }),
        status: &written.0,
    };
    unread::patch_status(
        api,
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(written)
}

/// The body of a status write, serialized straight from the status: a `json!` tree of it first
/// copied every field into a value of its own, an allocation per text.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusApply<'a> {
    api_version: std::borrow::Cow<'static, str>,
    kind: std::borrow::Cow<'static, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<VersionOnly<'a>>,
    status: &'a serde_json::value::RawValue,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct VersionOnly<'a> {
    resource_version: &'a str,
}

/// A Secret released from an earlier manifest of this kind and name (deleted with `Orphan`),
/// owned by nothing: the client id it holds, for a re-declared orphan to take it back.
fn released_for<K: NamespacedResource>(secret: &Secret, resource: &K) -> Option<String> {
    let labels = secret.metadata.labels.as_ref()?;
    let from = secret
        .metadata
        .annotations
        .as_ref()?
        .get(RELEASED_FROM_ANNOTATION)?;
    let owned = secret
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|owners| !owners.is_empty());
    let expected = format!("{}/{}", K::kind(&()), resource.name_any());
    if owned || labels.get(RELEASED_LABEL).map(String::as_str) != Some("true") || *from != expected
    {
        return None;
    }
    let data = secret.data.as_ref()?;
    let has_value = SecretSummary::from(secret).has_value;
    let client_id = String::from_utf8(data.get(CLIENT_ID_KEY)?.0.clone()).ok()?;
    (has_value && !client_id.is_empty()).then_some(client_id)
}

/// What the Secret a generated secret goes into holds for `resource`, read from the API
/// server (a Secret released from an earlier manifest of its name is told apart), with the
/// rotation request whose secret it holds.
pub async fn read_generated_secret<K: NamespacedResource>(
    secrets: &Api<Secret>,
    name: &str,
    resource: &K,
    shape: Option<&str>,
) -> Result<(SecretState, Option<String>), kube::Error> {
    let owner_uid = resource.uid().unwrap_or_default();
    Ok(match secrets.get_opt(name).await {
        Ok(Some(secret)) => match released_for(&secret, resource) {
            Some(client_id) => (SecretState::Released { client_id }, None),
            None => {
                let summary = SecretSummary::from(&secret);
                (
                    state_of(&summary, &owner_uid, shape),
                    summary.rotation_request.map(String::from),
                )
            }
        },
        Ok(None) => (SecretState::Absent, None),
        Err(kube::Error::Api(status)) if status.code == 403 => (SecretState::Forbidden, None),
        Err(error) => return Err(error),
    })
}

/// Takes back a Secret released from an earlier manifest of this name: owned by `owner` (its
/// controller) and labelled as delivered again, only while it is still released and holds
/// `client_id`. `false` when it is not (any more).
pub async fn reclaim_secret<K: NamespacedResource>(
    secrets: &Api<Secret>,
    owner: &K,
    name: &str,
    client_id: &str,
) -> Result<bool, kube::Error> {
    let Some(secret) = secrets.get_opt(name).await? else {
        return Ok(false);
    };
    if released_for(&secret, owner).as_deref() != Some(client_id) {
        return Ok(false);
    }
    let Some(owner_reference) = owner.controller_owner_ref(&()) else {
        return Ok(false);
    };
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": secret.metadata.resource_version,
            "ownerReferences": [OwnerReference {
                block_owner_deletion: Some(true),
                ..owner_reference
            }],
            "labels": { MANAGED_BY_LABEL: MANAGED_BY, RELEASED_LABEL: null },
            "annotations": { RELEASED_FROM_ANNOTATION: null },
        },
    });
    secrets
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(true)
}

/// What an existing Secret holds for the resource with `owner_uid`, whose manifest declares
/// the shape `shape` (the template's digest; `None` without a template).
pub fn state_of(secret: &SecretSummary, owner_uid: &str, shape: Option<&str>) -> SecretState {
    if secret.owned_by(owner_uid) {
        if secret.has_value && secret.shape.as_deref() != shape {
            return SecretState::OtherShape;
        }
        SecretState::Owned {
            has_value: secret.has_value,
        }
    } else {
        SecretState::Foreign {
            owner: secret.first_owner.as_ref().map(ToString::to_string),
        }
    }
}

/// The label and annotation a released Secret carries: it outlived the manifest that owned it.
pub const RELEASED_LABEL: &str = "nauthera.io/released";
pub const RELEASED_FROM_ANNOTATION: &str = "nauthera.io/released-from";

/// The finalizer the API server adds to an object deleted with `--cascade=foreground`
/// (`propagationPolicy: Foreground`): the garbage collector deletes its dependents first.
pub const FOREGROUND_DELETION_FINALIZER: &str = "foregroundDeletion";

/// Whether the resource is being deleted with its dependents first (`--cascade=foreground`).
pub fn deleted_in_foreground<K: Resource>(resource: &K) -> bool {
    resource
        .meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FOREGROUND_DELETION_FINALIZER))
}

/// Whether the manifest a reconcile decided on (`uid`) is being deleted or gone, as the API
/// server holds it now (`live`, read fresh, `None` when there is none of that name): the cache
/// the decision read may show that a little later.
pub fn deletion_under_way(live: Option<&ObjectMeta>, uid: &str) -> bool {
    live.is_none_or(|meta| meta.deletion_timestamp.is_some() || meta.uid.as_deref() != Some(uid))
}

/// Whether the manifest is being deleted or gone, read fresh from the API server (its metadata
/// only).
pub async fn deletion_under_way_now<K: NamespacedResource>(
    api: &Api<K>,
    resource: &K,
    uid: &str,
) -> Result<bool, kube::Error> {
    let live = api.get_metadata_opt(&resource.name_any()).await?;
    Ok(deletion_under_way(live.as_ref().map(|m| &m.metadata), uid))
}

/// How a Secret stands towards the resource a deletion releases it from (`owner_uid`).
pub fn secret_held(secret: Option<&Secret>, owner_uid: &str) -> SecretHeld {
    let Some(secret) = secret else {
        return SecretHeld::Absent;
    };
    let references = secret.owner_references();
    if references.iter().any(|r| r.uid == owner_uid) {
        return SecretHeld::Owned;
    }
    let labels = secret.labels();
    // The collector removes only the owner reference: the reconciler's label stays.
    if references.is_empty()
        && labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
        && !labels.contains_key(RELEASED_LABEL)
    {
        return SecretHeld::OrphanedByCollector;
    }
    SecretHeld::Other
}

/// Releases the Secret a resource owned (or that the garbage collector already orphaned) before
/// the resource goes while its object stays on the server: without the owner reference the
/// garbage collector keeps the only copy of a secret the server still accepts. The Secret is
/// labelled and annotated with where it came from, and no longer carries the managed-by label,
/// so the reconciler stops watching it. The resourceVersion read is a precondition, so a change
/// the collector made in between is read again, not written over.
pub async fn release_secret<K: NamespacedResource>(
    secrets: &Api<Secret>,
    owner: &K,
    secret: &Secret,
) -> Result<(), kube::Error> {
    let owner_uid = owner.uid().unwrap_or_default();
    let references = secret.metadata.owner_references.clone().unwrap_or_default();
    let remaining: Vec<&OwnerReference> =
        references.iter().filter(|r| r.uid != owner_uid).collect();
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": secret.metadata.resource_version,
            "ownerReferences": remaining,
            "labels": { MANAGED_BY_LABEL: null, RELEASED_LABEL: "true" },
            "annotations": {
                RELEASED_FROM_ANNOTATION: format!("{}/{}", K::kind(&()), owner.name_any()),
            },
        },
    });
    secrets
        .patch(
            &secret.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// Deletes a Secret if this resource (`owner_uid`) owns it, no matter what else changed in it
/// since; `false` when there is no such Secret of this resource's (gone, released, or someone
/// else's now). The preconditions keep a Secret recreated in between from being taken.
pub async fn remove_owned_secret(
    secrets: &Api<Secret>,
    name: &str,
    owner_uid: &str,
) -> Result<bool, kube::Error> {
    let Some(secret) = secrets.get_opt(name).await? else {
        return Ok(false);
    };
    if !SecretSummary::from(&secret).owned_by(owner_uid) {
        return Ok(false);
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: secret.metadata.uid.clone(),
            resource_version: secret.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match secrets.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// What a workload needs to use a client: its id and secret, the issuer and where to discover it.
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'a> {
    pub secret_name: &'a str,
    pub client_id: &'a str,
    pub issuer: &'a str,
    pub value: &'a SecretValue,
    /// The Secret's shape (`spec.secret.template`); the four keys of old when absent.
    pub template: Option<&'a nauthera_shared::resources::SecretTemplate>,
    /// The rotation request (`nauthera.io/rotate`) this value carries out, if any.
    pub rotation_request: Option<&'a str>,
}

/// The Secret's record of the rotation request its value carries out (`null` removes an
/// The Secret's record of the rotation request its value carries out, set in a patch (`null`
/// removes an earlier one's): written in the same write as the value, so the two never part.
pub(crate) fn mark_rotation_request(patch: &mut serde_json::Value, request: Option<&str>) {
    patch["metadata"]["annotations"][ROTATION_REQUEST_ANNOTATION] = serde_json::json!(request);
}

/// Writes a minted secret into a Secret owned by `owner`; never over a Secret it does not own.
/// A new Secret is created at once; `cached` (the watch cache's copy, if any) saves a read
/// before updating one this resource owns.
pub async fn deliver_secret<K: NamespacedResource>(
    secrets: &Api<Secret>,
    owner: &K,
    delivery: Delivery<'_>,
    cached: Option<&SecretSummary>,
) -> Result<(), SecretWriteFailure> {
    let owner_uid = owner.uid().unwrap_or_default();
    let rendered = rendered_secret(&delivery)?;
    let name = delivery.secret_name;
    let existing = match cached.filter(|secret| secret.owned_by(&owner_uid)) {
        Some(secret) => secret.clone(),
        None => match unread::create(
            secrets,
            &PostParams::default(),
            &with_rotation_request(
                new_secret(owner, name, &rendered)?,
                delivery.rotation_request,
            ),
        )
        .await
        {
            Ok(()) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                match secrets.get_opt(name).await.map_err(write_failure)? {
                    Some(secret) => SecretSummary::from(&secret),
                    // Gone again in between: written on the next attempt.
                    None => {
                        return Err(SecretWriteFailure::Other {
                            message: format!("Secret {name} was deleted while it was written"),
                        });
                    }
                }
            }
            Err(error) => return Err(write_failure(error)),
        },
    };
    if !existing.owned_by(&owner_uid) {
        return Err(SecretWriteFailure::Foreign {
            owner: existing.first_owner.as_ref().map(ToString::to_string),
        });
    }
    // Another shape (a template changed since): read whole, so that what it no longer
    // declares is removed, or the Secret replaced for a new type.
    if !secret_shape::same_shape(&existing, &rendered) {
        let Some(secret) = secrets.get_opt(name).await.map_err(write_failure)? else {
            return Err(SecretWriteFailure::Other {
                message: format!("Secret {name} was deleted while it was written"),
            });
        };
        return secret_shape::write_shape(
            secrets,
            owner,
            (name, &secret),
            &rendered,
            delivery.rotation_request,
        )
        .await;
    }
    // A merge patch rather than a replace: the reconciler's role has `patch` on Secrets, not
    // `update`, and the resourceVersion keeps it from racing another writer (a stale cached
    // copy fails and is retried).
    let mut patch =
        secret_shape::shape_patch(None, &rendered, existing.resource_version.as_deref());
    mark_rotation_request(&mut patch, delivery.rotation_request);
    unread::patch(
        secrets,
        name,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(write_failure)
}

/// What a delivered Secret holds: the facts in the declared shape.
fn rendered_secret(delivery: &Delivery<'_>) -> Result<RenderedSecret, SecretWriteFailure> {
    secret_shape::render(
        delivery.template,
        &nauthera_shared::secret_render::SecretFacts {
            client_id: delivery.client_id,
            client_secret: delivery.value.expose(),
            issuer: delivery.issuer,
        },
    )
}

/// A new Secret owned (as its controller) by `owner`, labelled as delivered by the reconciler.
pub(crate) fn new_secret<K: NamespacedResource>(
    owner: &K,
    name: &str,
    rendered: &RenderedSecret,
) -> Result<Secret, SecretWriteFailure> {
    let owner_reference =
        owner
            .controller_owner_ref(&())
            .ok_or_else(|| SecretWriteFailure::Other {
                message: "the resource has no uid yet".to_owned(),
            })?;
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: owner.namespace(),
            owner_references: Some(vec![OwnerReference {
                block_owner_deletion: Some(true),
                ..owner_reference
            }]),
            labels: Some(secret_shape::secret_labels(rendered)),
            annotations: Some(secret_shape::secret_annotations(rendered))
                .filter(|annotations| !annotations.is_empty()),
            ..ObjectMeta::default()
        },
        type_: Some(rendered.type_.clone()),
        data: Some(secret_shape::secret_data(rendered)),
        ..Secret::default()
    })
}

/// A new Secret with the record of the rotation request its value carries out.
pub(crate) fn with_rotation_request(mut secret: Secret, request: Option<&str>) -> Secret {
    if let Some(request) = request {
        secret
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(ROTATION_REQUEST_ANNOTATION.to_owned(), request.to_owned());
    }
    secret
}
pub(crate) fn write_failure(error: kube::Error) -> SecretWriteFailure {
    match &error {
        kube::Error::Api(status) if status.code == 403 => SecretWriteFailure::Forbidden {
            message: status.message.clone(),
        },
        _ => SecretWriteFailure::Other {
            message: error.to_string(),
        },
    }
}

/// The value of a Secret the team holds, and the version it was read at.
#[derive(Debug)]
pub struct ReadSecret {
    pub value: SecretValue,
    /// The Secret's `resourceVersion`.
    pub version: String,
}

/// Reads the value of a Secret the team holds (`spec.secret.secretRef`); never writes it. The
/// outer error is a failed read, retried; the inner one a problem the team fixes.
pub async fn read_secret_ref(
    secrets: &Api<Secret>,
    name: &str,
    key: &str,
) -> Result<Result<ReadSecret, SecretRefProblem>, kube::Error> {
    let secret = match secrets.get_opt(name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => return Ok(Err(SecretRefProblem::Missing)),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            return Ok(Err(SecretRefProblem::Forbidden));
        }
        Err(error) => return Err(error),
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| v.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|v| v.clone().into_bytes())
        });
    let version = secret.metadata.resource_version.clone().unwrap_or_default();
    Ok(match bytes {
        None => Err(SecretRefProblem::NoKey),
        Some(bytes) if bytes.is_empty() => Err(SecretRefProblem::EmptyKey),
        Some(bytes) => String::from_utf8(bytes)
            .map(|value| ReadSecret {
                value: SecretValue::new(value),
                version,
            })
            .map_err(|_| SecretRefProblem::NotText),
    })
}

#[cfg(test)]
mod tests;
