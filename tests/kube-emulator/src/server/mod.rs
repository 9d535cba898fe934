//! HTTP routing: authentication, path parsing, authorization and dispatch of every request.
//! Reads, writes and the identity endpoints are in the submodules.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use crate::admission::FieldValidation;
use crate::admission_policy;
use crate::authz::{self, Attributes, Credential, Tokens, UserInfo};
use crate::discovery;
use crate::objects::{self, DeleteOptions, Deleted, PatchKind, WriteContext};
use crate::registry::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult, StatusReason};
use crate::store::{Store, object_key};
use crate::table::{self, IncludeObject};
use crate::watch::{Encoding, Filter};

mod identity;
mod logs;
mod reads;
mod scale;
mod writes;

/// Shared state of a running emulator.
pub struct AppState {
    pub store: Arc<Mutex<Store>>,
    pub tokens: RwLock<Tokens>,
    pub compactions: tokio::sync::watch::Sender<u64>,
    pub bookmark_interval: Duration,
    pub address: String,
    pub requests: crate::requests::RequestTally,
    /// The files served as pods' logs, by (namespace, pod name).
    pub pod_logs: std::collections::BTreeMap<(String, String), std::path::PathBuf>,
    /// See [`crate::Options::compact_between_pages`].
    pub compact_between_pages: bool,
}

impl AppState {
    pub fn lock(&self) -> ApiResult<std::sync::MutexGuard<'_, Store>> {
        self.store
            .lock()
            .map_err(|_| ApiError::internal("the store is unavailable after a panic"))
    }

    /// Compacts history and ends every open watch, so watchers come back with an old
    /// resourceVersion and get 410 Gone.
    pub fn compact(&self) -> ApiResult<u64> {
        let revision = {
            let mut store = self.lock()?;
            store.compact();
            store.revision()
        };
        self.compactions.send_modify(|n| *n += 1);
        Ok(revision)
    }

    pub fn add_token(&self, token: String, credential: Credential) -> ApiResult<()> {
        self.tokens
            .write()
            .map_err(|_| ApiError::internal("the token table is unavailable"))?
            .insert_credential(token, credential);
        Ok(())
    }
}

const MAX_BODY: usize = 64 * 1024 * 1024;

/// The one handler behind every route.
pub async fn handle(State(app): State<Arc<AppState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(e) => {
            return error_response(&ApiError::bad_request(format!(
                "cannot read the request body: {e}"
            )));
        }
    };
    let query: HashMap<String, String> =
        url::form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    tracing::debug!(method = %parts.method, path = %parts.uri.path(), "request");
    let call = Call {
        app: &app,
        method: parts.method,
        headers: parts.headers,
        path: parts.uri.path().to_owned(),
        query,
        body,
    };
    match call.dispatch() {
        Ok(response) => response,
        Err(error) => error_response(&error),
    }
}

fn json_response(status: StatusCode, body: impl Into<Bytes>) -> Response {
    let mut response = Response::new(Body::from(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn value_response(status: StatusCode, value: &Value) -> Response {
    json_response(status, serde_json::to_vec(value).unwrap_or_default())
}

pub fn error_response(error: &ApiError) -> Response {
    let status = StatusCode::from_u16(error.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    value_response(status, &error.to_status())
}

fn not_found_path() -> ApiError {
    ApiError::new(
        StatusReason::NotFound,
        "the server could not find the requested resource",
    )
}

/// A request addressed to a resource.
#[derive(Debug, Clone)]
struct ResourcePath {
    group: String,
    version: String,
    plural: String,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_resource_path(group: &str, version: &str, rest: &[&str]) -> Option<ResourcePath> {
    let namespaced = rest.first() == Some(&"namespaces")
        && rest.len() >= 3
        && !(rest.len() == 3 && matches!(rest[2], "status" | "finalize"));
    let (namespace, rest) = if namespaced {
        (Some(rest[1].to_owned()), &rest[2..])
    } else {
        (None, rest)
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return None,
    };
    Some(ResourcePath {
        group: group.to_owned(),
        version: version.to_owned(),
        plural: plural.to_owned(),
        namespace,
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
    })
}

struct Call<'a> {
    app: &'a Arc<AppState>,
    method: Method,
    headers: http::HeaderMap,
    path: String,
    query: HashMap<String, String>,
    body: Bytes,
}

impl Call<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true") | Some("1"))
    }

    fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The bearer token's identity: unknown, expired or wrong-audience tokens and tokens
    /// whose bound objects are gone answer 401, as the API server does.
    fn authenticate(&self) -> ApiResult<UserInfo> {
        let unauthorized = || ApiError::new(StatusReason::Unauthorized, "Unauthorized");
        let token = self
            .header(header::AUTHORIZATION)
            .strip_prefix("Bearer ")
            .map(str::trim)
            .ok_or_else(unauthorized)?;
        let credential = self
            .app
            .tokens
            .read()
            .map_err(|_| ApiError::internal("the token table is unavailable"))?
            .credential(token)
            .cloned()
            .ok_or_else(unauthorized)?;
        if !credential.valid_at(jiff::Timestamp::now().as_second()) {
            return Err(unauthorized());
        }
        if !credential.bindings.is_empty() && !credential.bindings_hold(&*self.app.lock()?) {
            return Err(unauthorized());
        }
        Ok(credential.user)
    }

    fn dispatch(&self) -> ApiResult<Response> {
        let path = self.path.trim_end_matches('/').to_owned();
        if matches!(path.as_str(), "/healthz" | "/livez" | "/readyz") {
            return Ok(json_response(StatusCode::OK, "ok"));
        }
        let user = self.impersonate(self.authenticate()?)?;
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if self.method == Method::GET
            && let Some(response) = self.discovery(&segments)?
        {
            return Ok(response);
        }
        if segments.first() == Some(&"emulator") {
            return self.control(&user, &segments[1..]);
        }
        let resource = match segments.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => {
                parse_resource_path("", version, rest)
            }
            ["apis", group, version, rest @ ..] if !rest.is_empty() => {
                parse_resource_path(group, version, rest)
            }
            _ => None,
        }
        .ok_or_else(not_found_path)?;
        self.resource(&user, resource)
    }

    fn discovery(&self, segments: &[&str]) -> ApiResult<Option<Response>> {
        let store = self.app.lock()?;
        let registry = &store.registry;
        if matches!(segments, ["api"] | ["apis"])
            && discovery::wants_aggregated(self.header(header::ACCEPT))
        {
            let value = discovery::aggregated(registry, segments == ["api"]);
            let mut response = value_response(StatusCode::OK, &value);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(discovery::AGGREGATED_MEDIA_TYPE),
            );
            return Ok(Some(response));
        }
        let value = match segments {
            ["version"] => Some(discovery::version()),
            ["api"] => Some(discovery::core_versions(&self.app.address)),
            ["apis"] => Some(discovery::group_list(registry)),
            ["apis", group] => Some(discovery::group(registry, group).ok_or_else(not_found_path)?),
            ["api", version] => {
                Some(discovery::resource_list(registry, "", version).ok_or_else(not_found_path)?)
            }
            ["apis", group, version] => Some(
                discovery::resource_list(registry, group, version).ok_or_else(not_found_path)?,
            ),
            ["openapi", "v3"] => Some(discovery::openapi_index(registry, store.revision())),
            ["openapi", "v3", rest @ ..] => Some(
                discovery::openapi_document(registry, &rest.join("/"))
                    .ok_or_else(not_found_path)?,
            ),
            ["openapi", "v2"] => return Err(not_found_path()),
            _ => None,
        };
        Ok(value.map(|v| value_response(StatusCode::OK, &v)))
    }

    fn verb(&self, path: &ResourcePath) -> ApiResult<&'static str> {
        let named = path.name.is_some();
        Ok(match (self.method.clone(), named) {
            (Method::GET, true) => "get",
            (Method::GET, false) if self.flag("watch") => "watch",
            (Method::GET, false) => "list",
            (Method::POST, false) => "create",
            (Method::POST, true) if path.subresource.is_some() => "create",
            (Method::PUT, true) => "update",
            (Method::PATCH, true) => "patch",
            (Method::DELETE, true) => "delete",
            (Method::DELETE, false) => "deletecollection",
            _ => {
                return Err(ApiError::new(
                    StatusReason::MethodNotAllowed,
                    format!(
                        "the server does not allow this method on the requested resource ({})",
                        self.method
                    ),
                ));
            }
        })
    }

    fn resource(&self, user: &UserInfo, path: ResourcePath) -> ApiResult<Response> {
        let info = {
            let store = self.app.lock()?;
            store
                .registry
                .find(&path.group, &path.version, &path.plural)
                .cloned()
        }
        .ok_or_else(not_found_path)?;
        if (info.namespaced && path.name.is_some() && path.namespace.is_none())
            || (!info.namespaced && path.namespace.is_some())
        {
            return Err(not_found_path());
        }
        let verb = self.verb(&path)?;
        self.app
            .requests
            .record(&user.name, verb, &info.plural, path.subresource.as_deref());
        let attributes = Attributes {
            verb: verb.to_owned(),
            group: info.group.clone(),
            resource: info.plural.clone(),
            subresource: path.subresource.clone().unwrap_or_default(),
            namespace: path.namespace.clone().unwrap_or_default(),
            name: path.name.clone().unwrap_or_default(),
        };
        if info.review_only {
            return self.review(user, &info, &path);
        }
        {
            let store = self.app.lock()?;
            if authz::authorize(&store, user, &attributes).is_none() {
                let mut error = ApiError::new(
                    StatusReason::Forbidden,
                    authz::forbidden_message(user, &attributes),
                );
                error.name = path.name.clone();
                error.group = Some(info.group.clone());
                error.kind = Some(info.plural.clone());
                return Err(error);
            }
        }
        let namespace = path.namespace.clone().unwrap_or_default();
        if verb == "create"
            && path.subresource.as_deref() == Some("token")
            && info.plural == "serviceaccounts"
        {
            return self.token_request(&info, &path, &namespace);
        }
        if verb == "get" && path.subresource.as_deref() == Some("log") && info.plural == "pods" {
            return self.pod_log(&info, &path, &namespace);
        }
        if path.subresource.as_deref() == Some("scale") && info.scale.is_some() {
            return self.scale(&info, &path, &namespace, user, verb);
        }
        match verb {
            "get" => self.get(&info, &path, &namespace),
            "list" => self.list(&info, &path),
            "watch" => self.watch(&info, &path),
            "create" => self.create(&info, &path, &namespace, user),
            "update" => self.update(&info, &path, &namespace, user),
            "patch" => self.patch(&info, &path, &namespace, user),
            "delete" => self.delete(&info, &path, &namespace, user),
            _ => self.delete_collection(&info, &path, user),
        }
    }

    fn table_request(&self) -> Option<IncludeObject> {
        let accept = self.header(header::ACCEPT);
        accept
            .contains("as=Table")
            .then(|| IncludeObject::parse(self.param("includeObject")))
    }

    fn encoding(&self, info: &ResourceInfo, path: &ResourcePath) -> Encoding {
        Encoding {
            info: info.clone(),
            version: path.version.clone(),
            table: self.table_request(),
            metadata_only: self
                .header(header::ACCEPT)
                .contains("as=PartialObjectMetadata"),
        }
    }

    fn filter(&self, path: &ResourcePath) -> ApiResult<Filter> {
        Ok(Filter {
            namespace: path.namespace.clone(),
            labels: LabelSelector::parse(self.param("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(self.param("fieldSelector").unwrap_or_default())?,
        })
    }

    fn body_json(&self) -> ApiResult<Value> {
        let content_type = self.header(header::CONTENT_TYPE);
        if content_type.contains("yaml") {
            let text = std::str::from_utf8(&self.body)
                .map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
            return serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")));
        }
        if content_type.contains("protobuf") {
            return crate::protobuf::decode(&self.body);
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_namespace_resource_name_and_subresource() {
        let p = parse_resource_path(
            "nauthera.io",
            "v1alpha1",
            &["namespaces", "team", "oidcclients", "a", "status"],
        )
        .unwrap();
        assert_eq!(
            (
                p.namespace.as_deref(),
                p.plural.as_str(),
                p.name.as_deref(),
                p.subresource.as_deref()
            ),
            (Some("team"), "oidcclients", Some("a"), Some("status"))
        );
        let ns = parse_resource_path("", "v1", &["namespaces", "team"]).unwrap();
        assert_eq!(
            (ns.namespace, ns.plural.as_str(), ns.name.as_deref()),
            (None, "namespaces", Some("team"))
        );
        let ns_status = parse_resource_path("", "v1", &["namespaces", "team", "status"]).unwrap();
        assert_eq!(ns_status.subresource.as_deref(), Some("status"));
        let all = parse_resource_path("", "v1", &["secrets"]).unwrap();
        assert!(all.namespace.is_none() && all.name.is_none());
    }
}
