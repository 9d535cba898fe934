//! Object operations on the store: create, replace, patch (merge, JSON, strategic,
//! server-side apply) and delete, with resourceVersion preconditions, generation, the status
//! subresource, field ownership and finalizers. Deletion is in `deletion`.

mod deletion;
mod draft;
mod scale;

pub use deletion::{DeleteOptions, Deleted, FOREGROUND_DELETION, delete, remove_now};
pub use draft::{Access, Committed, Draft, commit as commit_draft};
pub use scale::{ScaleChange, to_scale, write as write_scale};

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::admission::{self, FieldValidation};
use crate::admission_policy::{self, Operation};
use crate::authz::UserInfo;
use crate::ids;
use crate::managed_fields::{self, Apply, ManagedEntry, Scope, UpdateOwnership};
use crate::registry::ResourceInfo;
use crate::status::{ApiError, ApiResult, ResourceName, StatusReason};
use crate::store::{Store, Stored};

/// Who writes and how, from the request's query parameters.
#[derive(Debug, Clone)]
pub struct WriteContext {
    pub manager: String,
    pub dry_run: bool,
    pub force: bool,
    pub validation: FieldValidation,
    /// The group and version the client addressed (`events.k8s.io` for Events written through
    /// that API, though stored as core Events).
    pub group: String,
    pub version: String,
    /// Who asks, for admission policies; `None` for the emulator's own writes (seeding), which
    /// no policy sees.
    pub requester: Option<UserInfo>,
}

/// A stored (or, for a dry run, computed) object and warnings for the client.
#[derive(Debug)]
pub struct Written {
    pub object: Arc<Stored>,
    pub created: bool,
    pub warnings: Vec<String>,
}

/// The kinds of PATCH the API server accepts, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    /// Strategic merge patch (keyed lists of well-known fields merged; see `strategic`).
    Strategic,
    Apply,
}

impl PatchKind {
    /// The kind of a PATCH by its Content-Type, as the API server accepts it for a resource:
    /// strategic merge patches only for built-in kinds (custom resources have no patch
    /// strategies), with the server's 415 otherwise (for built-in kinds its router's terse one).
    pub fn from_content_type(content_type: &str, custom: bool) -> ApiResult<Self> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        let kind = match media {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" if !custom => Some(Self::Strategic),
            "application/apply-patch+yaml" => Some(Self::Apply),
            _ => None,
        };
        kind.ok_or_else(|| {
            let message = if custom {
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            } else {
                "415: Unsupported Media Type"
            };
            ApiError::new(StatusReason::UnsupportedMediaType, message)
        })
    }
}

fn resource_name(info: &ResourceInfo) -> ResourceName<'_> {
    ResourceName {
        group: &info.group,
        plural: &info.plural,
    }
}

fn text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn ensure_metadata(object: &mut Value) -> ApiResult<()> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    Ok(())
}

/// The namespace must exist and not be terminating.
fn check_namespace(store: &mut dyn Access, info: &ResourceInfo, namespace: &str) -> ApiResult<()> {
    if !info.namespaced {
        return Ok(());
    }
    let namespaces = crate::registry::ResourceKey {
        group: String::new(),
        plural: "namespaces".into(),
    };
    let Some(ns) = store.get(&namespaces, "", namespace) else {
        return Err(ApiError::not_found(
            &ResourceName {
                group: "",
                plural: "namespaces",
            },
            namespace,
        ));
    };
    if ns.value.pointer("/metadata/deletionTimestamp").is_some() {
        let mut err = ApiError::new(
            StatusReason::Forbidden,
            format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                info.plural,
                text(&ns.value, "/metadata/name").unwrap_or_default()
            ),
        );
        err.causes.push(crate::status::Cause {
            kind: "NamespaceTerminating",
            message: format!("namespace {namespace} is being terminated"),
            field: "metadata.namespace".into(),
        });
        return Err(err);
    }
    Ok(())
}

/// How the field ownership of a write is decided.
enum Ownership {
    /// An ordinary write: changed fields move to the writer.
    Update,
    /// A server-side apply already computed the entries.
    Applied(Vec<ManagedEntry>),
}

/// Creates an object (POST).
pub fn create(
    store: &mut dyn Access,
    info: &ResourceInfo,
    namespace: &str,
    body: Value,
    ctx: &WriteContext,
) -> ApiResult<Written> {
    if info.converted() {
        let stored_as = storing(store, info);
        let body = crate::events::to_core(body);
        return create_with(store, &stored_as, namespace, body, ctx, Ownership::Update);
    }
    create_with(store, info, namespace, body, ctx, Ownership::Update)
}

fn create_with(
    store: &mut dyn Access,
    info: &ResourceInfo,
    namespace: &str,
    mut object: Value,
    ctx: &WriteContext,
    ownership: Ownership,
) -> ApiResult<Written> {
    ensure_metadata(&mut object)?;
    let meta = &mut object["metadata"];
    if info.namespaced {
        match meta["namespace"].as_str() {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => meta["namespace"] = json!(namespace),
        }
    } else if let Some(map) = meta.as_object_mut() {
        map.remove("namespace");
    }
    let requested_name = meta["name"].as_str().unwrap_or_default().to_owned();
    let name = match (meta["name"].as_str(), meta["generateName"].as_str()) {
        (Some(name), _) if !name.is_empty() => name.to_owned(),
        (_, Some(prefix)) if !prefix.is_empty() => format!("{prefix}{}", ids::name_suffix()),
        _ => {
            return Err(ApiError::invalid(
                &info.kind,
                &info.group,
                "",
                vec![crate::status::Cause {
                    kind: "FieldValueRequired",
                    message: "Required value: name or generateName is required".into(),
                    field: "metadata.name".into(),
                }],
            ));
        }
    };
    if let Some(cause) = admission::validate_name(info, &name) {
        return Err(ApiError::invalid(
            &info.kind,
            &info.group,
            &name,
            vec![cause],
        ));
    }
    meta["name"] = json!(name);
    check_namespace(store, info, namespace)?;
    if store
        .get(
            &info.key(),
            if info.namespaced { namespace } else { "" },
            &name,
        )
        .is_some()
    {
        return Err(ApiError::already_exists(&resource_name(info), &name));
    }
    if info.status_subresource
        && let Some(map) = object.as_object_mut()
    {
        map.remove("status");
    }
    let meta = &mut object["metadata"];
    if let Some(map) = meta.as_object_mut() {
        for system in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "managedFields",
            "selfLink",
        ] {
            map.remove(system);
        }
    }
    meta["uid"] = json!(ids::new_uid());
    meta["creationTimestamp"] = json!(ids::now_rfc3339());
    if info.has_generation {
        meta["generation"] = json!(1);
    }
    object["apiVersion"] = json!(info.api_version(info.preferred_version()));
    object["kind"] = json!(info.kind);
    let mut admitted = admission::admit(info, &ctx.version, &mut object, None, ctx.validation)?;
    validate_event(info, ctx, &object, None)?;
    let scope = if info.status_subresource {
        Scope::MainWithoutStatus
    } else {
        Scope::Whole
    };
    let entries = match ownership {
        Ownership::Update => {
            let mut entries = Vec::new();
            let now = ids::now_rfc3339();
            let api_version = info.api_version(&ctx.version);
            UpdateOwnership {
                manager: &ctx.manager,
                api_version: &api_version,
                time: &now,
                scope,
            }
            .record(&mut entries, &json!({}), &object);
            entries
        }
        Ownership::Applied(entries) => entries,
    };
    managed_fields::write_entries(&mut object, &entries);
    let policy_warnings = admit_policies(
        store,
        info,
        ctx,
        Operation::Create,
        scope,
        &requested_name,
        &object,
        None,
    )?;
    admitted.warnings.extend(policy_warnings);
    object["metadata"]["resourceVersion"] = json!(store.next_revision().to_string());
    if ctx.dry_run {
        return Ok(Written {
            object: Stored::new(object),
            created: true,
            warnings: admitted.warnings,
        });
    }
    let stored = store.put(&info.key(), object);
    if let Some(defined) = admitted.defines {
        store.register(defined);
    }
    Ok(Written {
        object: stored,
        created: true,
        warnings: admitted.warnings,
    })
}

fn check_resource_version(
    info: &ResourceInfo,
    name: &str,
    body: &Value,
    live: &Value,
) -> ApiResult<()> {
    match text(body, "/metadata/resourceVersion") {
        Some(wanted)
            if !wanted.is_empty() && Some(wanted) != text(live, "/metadata/resourceVersion") =>
        {
            Err(ApiError::stale(&resource_name(info), name))
        }
        _ => Ok(()),
    }
}

fn scope_for(info: &ResourceInfo, subresource: Option<&str>) -> ApiResult<Scope> {
    match subresource {
        None if info.status_subresource => Ok(Scope::MainWithoutStatus),
        None => Ok(Scope::Whole),
        Some("status") if info.status_subresource => Ok(Scope::Status),
        Some(other) => Err(ApiError::not_found(
            &ResourceName {
                group: &info.group,
                plural: &format!("{}/{other}", info.plural),
            },
            "",
        )),
    }
}

/// Whether two states of an object differ in what generation follows: everything but the
/// metadata (and the status, where a subresource holds it). Compared in place: a copy of each
/// would cost more than the write.
fn generation_moves(info: &ResourceInfo, before: &Value, after: &Value) -> bool {
    let followed = |key: &str| key != "metadata" && !(info.status_subresource && key == "status");
    let (Some(before), Some(after)) = (before.as_object(), after.as_object()) else {
        return before != after;
    };
    let differs = |a: &Map<String, Value>, b: &Map<String, Value>| {
        a.iter()
            .filter(|(key, _)| followed(key))
            .any(|(key, value)| b.get(key) != Some(value))
    };
    differs(before, after) || differs(after, before)
}

/// Whether a write leaves the object as it was: equal but for the resourceVersion and the
/// times of its ownership entries.
fn unchanged(before: &Value, after: &Value) -> bool {
    same_but(before, after, None, &|key, a, b| match key {
        "metadata" => same_but(a, b, Some("resourceVersion"), &|key, a, b| match key {
            "managedFields" => same_entries(a, b),
            _ => a == b,
        }),
        _ => a == b,
    })
}

/// Ownership entries compared without their times.
fn same_entries(before: &Value, after: &Value) -> bool {
    let (Some(before), Some(after)) = (before.as_array(), after.as_array()) else {
        return before == after;
    };
    before.len() == after.len()
        && before
            .iter()
            .zip(after)
            .all(|(a, b)| same_but(a, b, Some("time"), &|_, a, b| a == b))
}

/// Whether two objects have the same keys, `skipped` aside, with values that `same` finds equal.
fn same_but(
    before: &Value,
    after: &Value,
    skipped: Option<&str>,
    same: &dyn Fn(&str, &Value, &Value) -> bool,
) -> bool {
    let (Some(before), Some(after)) = (before.as_object(), after.as_object()) else {
        return before == after;
    };
    let kept = |key: &String| Some(key.as_str()) != skipped;
    before.keys().filter(|key| kept(key)).count() == after.keys().filter(|key| kept(key)).count()
        && before
            .iter()
            .filter(|(key, _)| kept(key))
            .all(|(key, value)| after.get(key).is_some_and(|other| same(key, value, other)))
}

/// Replaces an object (PUT) on the main resource or a subresource.
pub fn update(
    store: &mut dyn Access,
    info: &ResourceInfo,
    namespace: &str,
    name: &str,
    subresource: Option<&str>,
    mut body: Value,
    ctx: &WriteContext,
) -> ApiResult<Written> {
    let scope = scope_for(info, subresource)?;
    if info.converted() {
        let stored_as = storing(store, info);
        let body = crate::events::to_core(body);
        return update(store, &stored_as, namespace, name, subresource, body, ctx);
    }
    ensure_metadata(&mut body)?;
    if let Some(body_name) = text(&body, "/metadata/name").filter(|n| *n != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let live = store
        .get(&info.key(), namespace, name)
        .ok_or_else(|| ApiError::not_found(&resource_name(info), name))?;
    if info.custom && text(&body, "/metadata/resourceVersion").is_none_or(str::is_empty) {
        return Err(ApiError::invalid(
            &info.kind,
            &info.group,
            name,
            vec![crate::status::Cause {
                kind: "FieldValueInvalid",
                message: "Invalid value: 0x0: must be specified for an update".into(),
                field: "metadata.resourceVersion".into(),
            }],
        ));
    }
    check_resource_version(info, name, &body, &live.value)?;
    commit(
        store,
        info,
        &live.value,
        body,
        scope,
        ctx,
        Ownership::Update,
    )
}

/// Patches an object; a server-side apply creates it when absent.
#[allow(clippy::too_many_arguments)]
pub fn patch(
    store: &mut dyn Access,
    info: &ResourceInfo,
    namespace: &str,
    name: &str,
    subresource: Option<&str>,
    kind: PatchKind,
    body: &[u8],
    ctx: &WriteContext,
) -> ApiResult<Written> {
    let scope = scope_for(info, subresource)?;
    let stored_as = storing(store, info);
    let live = store.get(&stored_as.key(), namespace, name);
    if kind == PatchKind::Apply {
        let mut config = apply_configuration(info, name, body, ctx)?;
        if info.converted() {
            config = crate::events::to_core(config);
        }
        return apply(store, &stored_as, namespace, name, scope, live, config, ctx);
    }
    let live = live.ok_or_else(|| ApiError::not_found(&resource_name(info), name))?;
    let mut patched = if info.converted() {
        crate::events::from_core(live.value.clone())
    } else {
        live.value.clone()
    };
    match kind {
        PatchKind::Json => {
            let operations: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("the JSON patch is malformed: {e}")))?;
            apply_json_patch(&mut patched, operations)?;
        }
        PatchKind::Merge | PatchKind::Strategic => {
            let merge: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("the merge patch is not JSON: {e}")))?;
            check_resource_version(info, name, &merge, &live.value)?;
            if kind == PatchKind::Strategic {
                crate::strategic::apply(&mut patched, &merge);
            } else {
                json_patch::merge(&mut patched, &merge);
            }
        }
        PatchKind::Apply => {}
    }
    if info.converted() {
        patched = crate::events::to_core(patched);
    }
    check_resource_version(info, name, &patched, &live.value)?;
    if text(&patched, "/metadata/name") != Some(name) {
        return Err(ApiError::bad_request(
            "metadata.name may not be changed by a patch",
        ));
    }
    commit(
        store,
        &stored_as,
        &live.value,
        patched,
        scope,
        ctx,
        Ownership::Update,
    )
}

/// Applies a JSON patch the way the API server does: a `test` of a missing path against `null`
/// passes (kube-runtime's finalizer helper relies on it).
fn apply_json_patch(document: &mut Value, operations: json_patch::Patch) -> ApiResult<()> {
    for operation in operations.0 {
        if let json_patch::PatchOperation::Test(test) = &operation
            && test.value.is_null()
            && document.pointer(test.path.as_str()).is_none()
        {
            continue;
        }
        json_patch::patch(document, &[operation]).map_err(|e| {
            ApiError::new(
                StatusReason::Invalid,
                format!("the server rejected our request due to an error in our request: {e}"),
            )
        })?;
    }
    Ok(())
}

/// The resource that stores objects of `info`: itself, unless they are converted from another.
fn storing(store: &mut dyn Access, info: &ResourceInfo) -> ResourceInfo {
    if !info.converted() {
        return info.clone();
    }
    store.info(&info.key()).unwrap_or_else(|| info.clone())
}

/// Parses and checks an apply configuration addressed to `info`.
fn apply_configuration(
    info: &ResourceInfo,
    name: &str,
    body: &[u8],
    ctx: &WriteContext,
) -> ApiResult<Value> {
    if ctx.manager.is_empty() {
        return Err(ApiError::bad_request(
            "PATCH, application/apply-patch+yaml requests require fieldManager",
        ));
    }
    let text_body = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the apply configuration is not UTF-8"))?;
    // Clients send JSON (a subset of YAML) far more often than YAML; it is read as such first.
    let config: Value = match serde_json::from_str(text_body) {
        Ok(config) => config,
        Err(_) => serde_saphyr::from_str(text_body).map_err(|e| {
            ApiError::bad_request(format!(
                "the apply configuration is not valid YAML or JSON: {e}"
            ))
        })?,
    };
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the apply configuration must be an object",
        ));
    }
    let api_version = text(&config, "/apiVersion").unwrap_or_default();
    let kind = text(&config, "/kind").unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() {
        return Err(ApiError::bad_request(
            "apiVersion and kind must be set in an apply configuration",
        ));
    }
    if kind != info.kind || api_version != info.api_version(&ctx.version) {
        return Err(ApiError::bad_request(format!(
            "the apply configuration is a {kind} of {api_version}, but the request is for {} of {}",
            info.kind,
            info.api_version(&ctx.version)
        )));
    }
    if let Some(config_name) = text(&config, "/metadata/name").filter(|n| *n != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({config_name}) does not match the name on the URL ({name})"
        )));
    }
    undeclared_fields(info, &config, name, ctx)?;
    Ok(config)
}

/// A server-side apply types its configuration against the schema before it merges anything: a
/// field the schema does not declare cannot be typed, so the API server fails the request (500,
/// whatever the field validation asked for) where another write would prune the field.
fn undeclared_fields(
    info: &ResourceInfo,
    config: &Value,
    name: &str,
    ctx: &WriteContext,
) -> ApiResult<()> {
    let Some(schema) = info.schema(&ctx.version) else {
        return Ok(());
    };
    let mut typed = config.clone();
    let undeclared = crate::schema::prune_root(&mut typed, schema);
    if undeclared.is_empty() {
        return Ok(());
    }
    let namespace = text(config, "/metadata/namespace").unwrap_or_default();
    let problems: Vec<String> = undeclared
        .iter()
        .map(|field| format!(".{field}: field not declared in schema"))
        .collect();
    Err(ApiError::internal(format!(
        "failed to create typed patch object ({namespace}/{name}; {}, Kind={}): {}",
        info.api_version(&ctx.version),
        info.kind,
        problems.join(", ")
    )))
}

#[allow(clippy::too_many_arguments)]
fn apply(
    store: &mut dyn Access,
    info: &ResourceInfo,
    namespace: &str,
    name: &str,
    scope: Scope,
    live: Option<Arc<Stored>>,
    config: Value,
    ctx: &WriteContext,
) -> ApiResult<Written> {
    let api_version = text(&config, "/apiVersion").unwrap_or_default();
    let kind = text(&config, "/kind").unwrap_or_default();
    let now = ids::now_rfc3339();
    let plan = Apply {
        manager: &ctx.manager,
        force: ctx.force,
        api_version,
        time: &now,
        scope,
    };
    let base = match &live {
        Some(live) => {
            check_resource_version(info, name, &config, &live.value)?;
            live.value.clone()
        }
        None if scope == Scope::Status => {
            return Err(ApiError::not_found(&resource_name(info), name));
        }
        None => json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}),
    };
    let applied = plan.merge(&base, &config).map_err(|causes| {
        let fields: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.message, c.field))
            .collect();
        let message = match fields.len() {
            1 => format!("Apply failed with 1 conflict: {}", fields[0]),
            n => format!("Apply failed with {n} conflicts: {}", fields.join("\n")),
        };
        let mut err = ApiError::new(StatusReason::Conflict, message);
        err.causes = causes;
        err
    })?;
    match live {
        Some(live) => commit(
            store,
            info,
            &live.value,
            applied.object,
            scope,
            ctx,
            Ownership::Applied(applied.entries),
        ),
        None => create_with(
            store,
            info,
            namespace,
            applied.object,
            ctx,
            Ownership::Applied(applied.entries),
        ),
    }
}

/// Stores a new state of an existing object.
fn commit(
    store: &mut dyn Access,
    info: &ResourceInfo,
    live: &Value,
    mut object: Value,
    scope: Scope,
    ctx: &WriteContext,
    ownership: Ownership,
) -> ApiResult<Written> {
    ensure_metadata(&mut object)?;
    // The status subresource isolates status from everything else, both ways.
    match scope {
        Scope::Status => {
            let status = object.get("status").cloned();
            object = live.clone();
            match status {
                Some(status) => object["status"] = status,
                None => {
                    if let Some(map) = object.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
        }
        Scope::MainWithoutStatus => match live.get("status") {
            Some(status) => object["status"] = status.clone(),
            None => {
                if let Some(map) = object.as_object_mut() {
                    map.remove("status");
                }
            }
        },
        // A scale write starts from the live object and changes only its replicas.
        Scope::Whole | Scope::Scale => {}
    }
    let meta = &mut object["metadata"];
    for system in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
    ] {
        match live["metadata"].get(system) {
            Some(value) => meta[system] = value.clone(),
            None => {
                if let Some(map) = meta.as_object_mut() {
                    map.remove(system);
                }
            }
        }
    }
    object["apiVersion"] = live["apiVersion"].clone();
    object["kind"] = live["kind"].clone();
    let name = text(live, "/metadata/name").unwrap_or_default().to_owned();
    let deleting = live.pointer("/metadata/deletionTimestamp").is_some();
    if deleting {
        let before = finalizers(live);
        if finalizers(&object).iter().any(|f| !before.contains(f)) {
            return Err(ApiError::invalid(
                &info.kind,
                &info.group,
                &name,
                vec![crate::status::Cause {
                    kind: "FieldValueForbidden",
                    message:
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                            .into(),
                    field: "metadata.finalizers".into(),
                }],
            ));
        }
    }
    let mut admitted =
        admission::admit(info, &ctx.version, &mut object, Some(live), ctx.validation)?;
    validate_event(info, ctx, &object, Some(live))?;
    if info.has_generation && generation_moves(info, live, &object) {
        let generation = live
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        object["metadata"]["generation"] = json!(generation + 1);
    }
    let entries = match ownership {
        Ownership::Update => {
            let mut entries = managed_fields::read_entries(live);
            let now = ids::now_rfc3339();
            let api_version = info.api_version(&ctx.version);
            let effective_scope = if matches!(scope, Scope::Status | Scope::Scale) {
                scope
            } else if info.status_subresource {
                Scope::MainWithoutStatus
            } else {
                Scope::Whole
            };
            UpdateOwnership {
                manager: &ctx.manager,
                api_version: &api_version,
                time: &now,
                scope: effective_scope,
            }
            .record(&mut entries, live, &object);
            entries
        }
        Ownership::Applied(entries) => entries,
    };
    managed_fields::write_entries(&mut object, &entries);
    object["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
    // Admission sees every update, a no-op one too.
    let policy_warnings = admit_policies(
        store,
        info,
        ctx,
        Operation::Update,
        scope,
        &name,
        &object,
        Some(live),
    )?;
    admitted.warnings.extend(policy_warnings);
    if unchanged(&object, live) {
        return Ok(Written {
            object: Stored::new(live.clone()),
            created: false,
            warnings: admitted.warnings,
        });
    }
    object["metadata"]["resourceVersion"] = json!(store.next_revision().to_string());
    if ctx.dry_run {
        return Ok(Written {
            object: Stored::new(object),
            created: false,
            warnings: admitted.warnings,
        });
    }
    let finished = deleting && finalizers(&object).is_empty();
    let stored = store.put(&info.key(), object);
    if let Some(defined) = admitted.defines {
        store.register(defined);
    }
    if finished {
        let namespace = text(&stored.value, "/metadata/namespace")
            .unwrap_or_default()
            .to_owned();
        store.remove_now(info, &namespace, &name);
    }
    Ok(Written {
        object: stored,
        created: false,
        warnings: admitted.warnings,
    })
}

/// An Event's validation, by the API it was written through (see `event_validation`).
fn validate_event(
    info: &ResourceInfo,
    ctx: &WriteContext,
    event: &Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    use crate::event_validation::{EventApi, validate_create, validate_update};
    if !(info.group.is_empty() && info.plural == "events") {
        return Ok(());
    }
    let api = if ctx.group == "events.k8s.io" {
        EventApi::EventsV1
    } else {
        EventApi::Core
    };
    let causes = match old {
        None => validate_create(event, api),
        Some(old) => validate_update(event, old, api),
    };
    if causes.is_empty() {
        return Ok(());
    }
    let name = text(event, "/metadata/name").unwrap_or_default();
    Err(ApiError::invalid(&info.kind, "", name, causes))
}

fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The admission policies in force for a create or update through the API; a write through
/// the scale subresource shows them the Scale, as the API server does.
#[allow(clippy::too_many_arguments)]
fn admit_policies(
    store: &mut dyn Access,
    info: &ResourceInfo,
    ctx: &WriteContext,
    operation: Operation,
    scope: Scope,
    name: &str,
    object: &Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let Some(user) = &ctx.requester else {
        return Ok(Vec::new());
    };
    let scaled = match (scope, &info.scale) {
        (Scope::Scale, Some(scale)) => {
            Some((to_scale(scale, object), old.map(|o| to_scale(scale, o))))
        }
        _ => None,
    };
    let namespace = text(object, "/metadata/namespace").unwrap_or_default();
    let (object, old) = match &scaled {
        Some((object, old)) => (object, old.as_ref()),
        None => (object, old),
    };
    let request = admission_policy::Request {
        operation,
        info,
        version: &ctx.version,
        subresource: scope.subresource().unwrap_or_default(),
        namespace: admission_policy::Request::namespace_of(info, namespace, name),
        name,
        object: Some(object),
        old_object: old,
        user,
        dry_run: ctx.dry_run,
        kind: scaled.is_some().then_some(["autoscaling", "v1", "Scale"]),
    };
    admission_policy::admit(store, &request)
}
