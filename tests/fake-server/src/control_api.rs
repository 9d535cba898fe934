//! The test controls as JSON over HTTP on loopback, for the binary (the sandbox and end-to-end
//! tests that run the fake as a process). Routes are listed in `README.md`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use nauthera_proto::v1::{ObjectKind, ObjectRef};
use nauthera_shared::grants::GrantEntry;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::FapiModeSetting;
use crate::controls::{Fault, FaultCode};
use crate::core::Actor;
use crate::method::Method;
use crate::server::FakeServer;
use crate::state::Backup;

/// What the control API works on.
#[derive(Clone)]
pub struct ControlState {
    server: Arc<FakeServer>,
    backups: Arc<Mutex<Vec<Backup>>>,
}

impl std::fmt::Debug for ControlState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlState").finish_non_exhaustive()
    }
}

/// An error answer: `{"error": "..."}` with a status code.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, message.into())
}

/// The control API's routes.
pub fn router(server: Arc<FakeServer>) -> Router {
    let state = ControlState {
        server,
        backups: Arc::new(Mutex::new(Vec::new())),
    };
    Router::new()
        .route("/v1/state", get(get_state))
        .route("/v1/counters", get(get_counters))
        .route("/v1/secret-hashes", get(get_secret_hashes))
        .route("/v1/audit", get(get_audit))
        .route("/v1/counters/reset", post(reset_counters))
        .route("/v1/faults", post(add_fault))
        .route("/v1/faults", delete(clear_faults))
        .route("/v1/latency", post(set_latency))
        .route("/v1/hang", post(hang))
        .route("/v1/streams/break", post(break_streams))
        .route("/v1/unimplemented", post(set_unimplemented))
        .route("/v1/allowed-clients", put(set_allowed_clients))
        .route("/v1/clients/edit", post(edit_client))
        .route("/v1/brandings/edit", post(edit_branding))
        .route("/v1/identity-providers/edit", post(edit_identity_provider))
        .route("/v1/organizations/edit", post(edit_organization))
        .route("/v1/delete", post(delete_object))
        .route("/v1/backups", post(take_backup))
        .route("/v1/backups/{id}/restore", post(restore_backup))
        .route("/v1/unreachable", post(go_unreachable))
        .route("/v1/restart", post(restart))
        .with_state(state)
}

async fn get_state(State(state): State<ControlState>) -> Json<serde_json::Value> {
    let hint = state.server.change_hint();
    Json(json!({
        "grpc_address": state.server.address().to_string(),
        "listening": state.server.is_listening().await,
        "hung": state.server.is_hung(),
        "change_hint": { "epoch": hint.epoch, "sequence": hint.sequence },
        "counters": state.server.counters(),
    }))
}

async fn get_counters(State(state): State<ControlState>) -> Json<crate::controls::Counters> {
    Json(state.server.counters())
}

async fn get_secret_hashes(
    State(state): State<ControlState>,
) -> Json<Vec<crate::server::SecretHash>> {
    Json(state.server.secret_hashes())
}

/// The audit log, oldest first, with enum values by name.
async fn get_audit(State(state): State<ControlState>) -> Json<Vec<serde_json::Value>> {
    let events = state.server.audit_events();
    Json(
        events
            .into_iter()
            .map(|event| {
                let reference = event.r#ref.unwrap_or_default();
                json!({
                    "id": event.id,
                    "time": event.time.map(|t| {
                        jiff::Timestamp::new(t.seconds, t.nanos)
                            .map(|t| t.to_string())
                            .unwrap_or_default()
                    }),
                    "action": event.action,
                    "outcome": nauthera_proto::v1::AuditOutcome::try_from(event.outcome)
                        .map(|o| o.as_str_name())
                        .unwrap_or_default(),
                    "kind": ObjectKind::try_from(event.kind)
                        .map(|k| k.as_str_name())
                        .unwrap_or_default(),
                    "issuer": reference.issuer,
                    "namespace": reference.namespace,
                    "name": reference.name,
                    "organization": event.organization,
                    "client_id": event.client_id,
                    "manager": event.manager,
                    "actor": event.actor,
                    "cause": event.cause,
                    "revision": event.revision,
                    "generation": event.generation,
                    "reason": event.reason,
                })
            })
            .collect(),
    )
}

async fn reset_counters(State(state): State<ControlState>) -> StatusCode {
    state.server.reset_counters();
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultRequest {
    #[serde(default)]
    method: Option<Method>,
    code: FaultCode,
    #[serde(default)]
    count: Option<u32>,
    #[serde(default)]
    probability: Option<f64>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    lose_answer: bool,
    #[serde(default)]
    answer_delay_ms: Option<u64>,
    #[serde(default)]
    mid_stream: bool,
}

async fn add_fault(
    State(state): State<ControlState>,
    Json(request): Json<FaultRequest>,
) -> Result<StatusCode, ApiError> {
    if let Some(probability) = request.probability
        && !(0.0..=1.0).contains(&probability)
    {
        return Err(bad_request("probability must be between 0 and 1"));
    }
    if request.mid_stream && request.lose_answer {
        return Err(bad_request(
            "a fault breaks open streams (mid_stream) or loses answers (lose_answer), not both",
        ));
    }
    state.server.inject_fault(
        request.method,
        Fault {
            code: request.code,
            count: request.count,
            probability: request.probability,
            message: request.message,
            lose_answer: request.lose_answer,
            answer_delay_ms: request.answer_delay_ms,
            mid_stream: request.mid_stream,
        },
    );
    Ok(StatusCode::NO_CONTENT)
}

async fn clear_faults(State(state): State<ControlState>) -> StatusCode {
    state.server.clear_faults();
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyRequest {
    #[serde(default)]
    method: Option<Method>,
    /// 0 removes the latency.
    millis: u64,
}

async fn set_latency(
    State(state): State<ControlState>,
    Json(request): Json<LatencyRequest>,
) -> StatusCode {
    let latency = (request.millis > 0).then(|| Duration::from_millis(request.millis));
    state.server.set_latency(request.method, latency);
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HangRequest {
    /// 0 ends the hang.
    millis: u64,
}

async fn hang(State(state): State<ControlState>, Json(request): Json<HangRequest>) -> StatusCode {
    if request.millis == 0 {
        state.server.end_hang();
    } else {
        state.server.hang_for(Duration::from_millis(request.millis));
    }
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BreakRequest {
    code: FaultCode,
}

async fn break_streams(
    State(state): State<ControlState>,
    Json(request): Json<BreakRequest>,
) -> StatusCode {
    state.server.break_streams(request.code);
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnimplementedRequest {
    method: Method,
    #[serde(default = "yes")]
    unimplemented: bool,
}

fn yes() -> bool {
    true
}

async fn set_unimplemented(
    State(state): State<ControlState>,
    Json(request): Json<UnimplementedRequest>,
) -> StatusCode {
    state
        .server
        .set_unimplemented(request.method, request.unimplemented);
    StatusCode::NO_CONTENT
}

async fn set_allowed_clients(
    State(state): State<ControlState>,
    Json(entries): Json<Vec<GrantEntry>>,
) -> StatusCode {
    state.server.set_allowed_clients(entries);
    StatusCode::NO_CONTENT
}

/// Who edits, and which object (by issuer, namespace and name).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditTarget<C> {
    issuer: String,
    namespace: String,
    name: String,
    /// For example `user:alice@example.com`.
    actor: String,
    #[serde(default)]
    cause: String,
    changes: C,
}

impl<C> EditTarget<C> {
    fn reference(&self) -> ObjectRef {
        ObjectRef {
            issuer: self.issuer.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    fn actor(&self) -> Actor {
        Actor {
            actor: self.actor.clone(),
            cause: self.cause.clone(),
        }
    }
}

#[derive(Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
struct ClientChanges {
    display_name: Option<String>,
    redirect_uris: Option<Vec<String>>,
    post_logout_redirect_uris: Option<Vec<String>>,
    grant_types: Option<Vec<String>>,
    response_types: Option<Vec<String>>,
    scopes: Option<Vec<String>>,
    token_endpoint_auth_method: Option<String>,
    require_pkce: Option<bool>,
}

fn revision_answer(
    result: Result<String, crate::server::ControlError>,
) -> Result<Json<serde_json::Value>, ApiError> {
    result
        .map(|revision| Json(json!({ "revision": revision })))
        .map_err(|error| ApiError(StatusCode::NOT_FOUND, error.to_string()))
}

async fn edit_client(
    State(state): State<ControlState>,
    Json(request): Json<EditTarget<ClientChanges>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let changes = &request.changes;
    revision_answer(
        state
            .server
            .edit_client(&request.reference(), &request.actor(), |spec| {
                if let Some(value) = &changes.display_name {
                    spec.display_name = value.clone();
                }
                if let Some(value) = &changes.redirect_uris {
                    spec.redirect_uris = value.clone();
                }
                if let Some(value) = &changes.post_logout_redirect_uris {
                    spec.post_logout_redirect_uris = value.clone();
                }
                if let Some(value) = &changes.grant_types {
                    spec.grant_types = value.clone();
                }
                if let Some(value) = &changes.response_types {
                    spec.response_types = value.clone();
                }
                if let Some(value) = &changes.scopes {
                    spec.scopes = value.clone();
                }
                if let Some(value) = &changes.token_endpoint_auth_method {
                    spec.token_endpoint_auth_method = value.clone();
                }
                if let Some(value) = changes.require_pkce {
                    spec.require_pkce = value;
                }
            }),
    )
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct BrandingChanges {
    colors: Option<BTreeMap<String, String>>,
    texts: Option<BTreeMap<String, String>>,
    custom_css: Option<String>,
}

async fn edit_branding(
    State(state): State<ControlState>,
    Json(request): Json<EditTarget<BrandingChanges>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let changes = &request.changes;
    revision_answer(state.server.edit_branding(
        &request.reference(),
        &request.actor(),
        |document| {
            if let Some(colors) = &changes.colors {
                document.colors = colors.clone().into_iter().collect::<HashMap<_, _>>();
            }
            if let Some(texts) = &changes.texts {
                document.texts = texts.clone().into_iter().collect::<HashMap<_, _>>();
            }
            if let Some(css) = &changes.custom_css {
                document.custom_css = css.clone();
            }
        },
    ))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct IdentityProviderChanges {
    display_name: Option<String>,
    scopes: Option<Vec<String>>,
    upstream_client_id: Option<String>,
}

async fn edit_identity_provider(
    State(state): State<ControlState>,
    Json(request): Json<EditTarget<IdentityProviderChanges>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let changes = &request.changes;
    revision_answer(state.server.edit_identity_provider(
        &request.reference(),
        &request.actor(),
        |spec| {
            if let Some(value) = &changes.display_name {
                spec.display_name = value.clone();
            }
            if let Some(value) = &changes.scopes {
                spec.scopes = value.clone();
            }
            if let Some(value) = &changes.upstream_client_id {
                spec.upstream_client_id = value.clone();
            }
        },
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OrganizationEdit {
    slug: String,
    actor: String,
    #[serde(default)]
    cause: String,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    fapi_mode: Option<FapiModeSetting>,
}

async fn edit_organization(
    State(state): State<ControlState>,
    Json(request): Json<OrganizationEdit>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let actor = Actor {
        actor: request.actor.clone(),
        cause: request.cause.clone(),
    };
    revision_answer(
        state
            .server
            .edit_organization(&request.slug, &actor, |spec| {
                if let Some(value) = &request.display_name {
                    spec.display_name = value.clone();
                }
                if let Some(value) = request.fapi_mode {
                    spec.fapi_mode = value.to_proto() as i32;
                }
            }),
    )
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum KindName {
    Client,
    Branding,
    IdentityProvider,
    Organization,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteRequest {
    kind: KindName,
    #[serde(default)]
    issuer: String,
    #[serde(default)]
    namespace: String,
    /// The object's name; an organization's slug.
    name: String,
    actor: String,
    #[serde(default)]
    cause: String,
}

async fn delete_object(
    State(state): State<ControlState>,
    Json(request): Json<DeleteRequest>,
) -> Result<StatusCode, ApiError> {
    let kind = match request.kind {
        KindName::Client => ObjectKind::Client,
        KindName::Branding => ObjectKind::Branding,
        KindName::IdentityProvider => ObjectKind::IdentityProvider,
        KindName::Organization => ObjectKind::Organization,
    };
    let reference = ObjectRef {
        issuer: request.issuer,
        namespace: request.namespace,
        name: request.name,
    };
    let actor = Actor {
        actor: request.actor,
        cause: request.cause,
    };
    state
        .server
        .delete_object(kind, &reference, &actor)
        .map(|()| StatusCode::NO_CONTENT)
        .map_err(|error| ApiError(StatusCode::NOT_FOUND, error.to_string()))
}

fn lock_backups(state: &ControlState) -> std::sync::MutexGuard<'_, Vec<Backup>> {
    state
        .backups
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn take_backup(State(state): State<ControlState>) -> Json<serde_json::Value> {
    let backup = state.server.backup();
    let hint = backup.hint.clone();
    let mut backups = lock_backups(&state);
    backups.push(backup);
    Json(json!({
        "id": backups.len() - 1,
        "change_hint": { "epoch": hint.epoch, "sequence": hint.sequence },
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreRequest {
    actor: String,
    #[serde(default)]
    cause: String,
}

async fn restore_backup(
    State(state): State<ControlState>,
    Path(id): Path<usize>,
    Json(request): Json<RestoreRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let backup = lock_backups(&state)
        .get(id)
        .cloned()
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no backup {id}")))?;
    let actor = Actor {
        actor: request.actor,
        cause: request.cause,
    };
    let changed = state.server.restore(&backup, &actor);
    let hint = state.server.change_hint();
    Ok(Json(json!({
        "changed": changed,
        "change_hint": { "epoch": hint.epoch, "sequence": hint.sequence },
    })))
}

async fn go_unreachable(State(state): State<ControlState>) -> StatusCode {
    state.server.go_unreachable().await;
    StatusCode::NO_CONTENT
}

async fn restart(State(state): State<ControlState>) -> Result<StatusCode, ApiError> {
    state
        .server
        .restart()
        .await
        .map(|()| StatusCode::NO_CONTENT)
        .map_err(|error| ApiError(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))
}
