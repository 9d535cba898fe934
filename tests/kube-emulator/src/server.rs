//! HTTP routing: authentication, path parsing, authorization and dispatch of every request.

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
use crate::authz::{self, Attributes, Tokens, UserInfo};
use crate::discovery;
use crate::objects::{self, DeleteOptions, Deleted, PatchKind, WriteContext};
use crate::registry::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult, StatusReason};
use crate::store::{Store, object_key};
use crate::table::{self, IncludeObject};
use crate::watch::{self, Encoding, Filter, WatchRequest};

/// Shared state of a running emulator.
pub struct AppState {
    pub store: Arc<Mutex<Store>>,
    pub tokens: RwLock<Tokens>,
    pub compactions: tokio::sync::watch::Sender<u64>,
    pub bookmark_interval: Duration,
    pub address: String,
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

    pub fn add_token(&self, token: String, user: UserInfo) -> ApiResult<()> {
        self.tokens
            .write()
            .map_err(|_| ApiError::internal("the token table is unavailable"))?
            .insert(token, user);
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

    /// `Impersonate-User` / `Impersonate-Group`, allowed by the `impersonate` verb on users,
    /// groups or serviceaccounts, as the API server does.
    fn impersonate(&self, user: UserInfo) -> ApiResult<UserInfo> {
        let Some(target) = self
            .headers
            .get("Impersonate-User")
            .and_then(|v| v.to_str().ok())
        else {
            return Ok(user);
        };
        let groups: Vec<String> = self
            .headers
            .get_all("Impersonate-Group")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        let account = target
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'));
        let mut checks = vec![match account {
            Some((namespace, name)) => Attributes {
                verb: "impersonate".into(),
                resource: "serviceaccounts".into(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                ..Attributes::default()
            },
            None => Attributes {
                verb: "impersonate".into(),
                resource: "users".into(),
                name: target.to_owned(),
                ..Attributes::default()
            },
        }];
        checks.extend(groups.iter().map(|group| Attributes {
            verb: "impersonate".into(),
            resource: "groups".into(),
            name: group.clone(),
            ..Attributes::default()
        }));
        let store = self.app.lock()?;
        for attributes in &checks {
            if authz::authorize(&store, &user, attributes).is_none() {
                return Err(ApiError::new(
                    StatusReason::Forbidden,
                    authz::forbidden_message(&user, attributes),
                ));
            }
        }
        Ok(match (account, groups.is_empty()) {
            (Some((namespace, name)), true) => UserInfo::service_account(namespace, name),
            _ => {
                let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
                UserInfo::user(target, &groups)
            }
        })
    }

    fn authenticate(&self) -> ApiResult<UserInfo> {
        let token = self
            .header(header::AUTHORIZATION)
            .strip_prefix("Bearer ")
            .map(str::trim);
        let tokens = self
            .app
            .tokens
            .read()
            .map_err(|_| ApiError::internal("the token table is unavailable"))?;
        token
            .and_then(|t| tokens.user(t).cloned())
            .ok_or_else(|| ApiError::new(StatusReason::Unauthorized, "Unauthorized"))
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

    /// Test controls, for the superuser only.
    fn control(&self, user: &UserInfo, segments: &[&str]) -> ApiResult<Response> {
        if !user.is_superuser() {
            return Err(ApiError::new(
                StatusReason::Forbidden,
                "emulator controls are for the superuser",
            ));
        }
        match (self.method.clone(), segments) {
            (Method::POST, ["compact"]) => {
                let revision = self.app.compact()?;
                Ok(value_response(
                    StatusCode::OK,
                    &json!({"compactedAt": revision.to_string()}),
                ))
            }
            (Method::POST, ["tokens"]) => {
                let request: Value = serde_json::from_slice(&self.body).map_err(|e| {
                    ApiError::bad_request(format!("the token request is not JSON: {e}"))
                })?;
                let identity = if let Some(sa) = request.get("serviceAccount") {
                    let namespace = sa["namespace"].as_str().unwrap_or_default();
                    let name = sa["name"].as_str().unwrap_or_default();
                    if namespace.is_empty() || name.is_empty() {
                        return Err(ApiError::bad_request(
                            "serviceAccount needs a namespace and a name",
                        ));
                    }
                    UserInfo::service_account(namespace, name)
                } else if let Some(name) = request["user"].as_str() {
                    let groups: Vec<&str> = request["groups"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    UserInfo::user(name, &groups)
                } else {
                    return Err(ApiError::bad_request(
                        "give either serviceAccount {namespace, name} or user (and groups)",
                    ));
                };
                let token = crate::ids::new_token();
                self.app.add_token(token.clone(), identity.clone())?;
                Ok(value_response(
                    StatusCode::OK,
                    &json!({"token": token, "user": identity.name, "groups": identity.groups}),
                ))
            }
            _ => Err(not_found_path()),
        }
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
        match verb {
            "get" => self.get(&info, &path, &namespace),
            "list" => self.list(&info, &path),
            "watch" => self.watch(&info, &path),
            "create" => self.create(&info, &path, &namespace, user),
            "update" => self.update(&info, &path, &namespace, user),
            "patch" => self.patch(&info, &path, &namespace, user),
            "delete" => self.delete(&info, &path, &namespace),
            _ => self.delete_collection(&info, &path),
        }
    }

    /// TokenRequest (`serviceaccounts/<name>/token`): mints a bearer token for the account.
    fn token_request(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
    ) -> ApiResult<Response> {
        let name = path.name.as_deref().unwrap_or_default();
        if self.app.lock()?.get(&info.key(), namespace, name).is_none() {
            return Err(ApiError::not_found(
                &crate::status::ResourceName {
                    group: "",
                    plural: "serviceaccounts",
                },
                name,
            ));
        }
        let request = if self.body.is_empty() {
            json!({})
        } else {
            self.body_json()?
        };
        let token = crate::ids::new_token();
        self.app
            .add_token(token.clone(), UserInfo::service_account(namespace, name))?;
        let seconds = request
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(3600);
        let expires = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_secs(seconds))
            .unwrap_or_else(|_| jiff::Timestamp::now())
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let response = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": crate::ids::now_rfc3339()},
            "spec": request.get("spec").cloned().unwrap_or_else(|| json!({})),
            "status": {"token": token, "expirationTimestamp": expires},
        });
        Ok(value_response(StatusCode::CREATED, &response))
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
        }
    }

    fn get(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
    ) -> ApiResult<Response> {
        let name = path.name.as_deref().unwrap_or_default();
        if let Some(sub) = path
            .subresource
            .as_deref()
            .filter(|s| *s != "status" || !info.status_subresource)
        {
            return Err(ApiError::new(
                StatusReason::NotFound,
                format!("the server could not find the requested resource ({sub})"),
            ));
        }
        let stored = self.app.lock()?.get(&info.key(), namespace, name);
        let stored = stored.ok_or_else(|| {
            ApiError::not_found(
                &crate::status::ResourceName {
                    group: &info.group,
                    plural: &info.plural,
                },
                name,
            )
        })?;
        let encoding = self.encoding(info, path);
        if encoding.table.is_some() {
            let revision = stored
                .value
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let table = table::table(
                info,
                &path.version,
                std::iter::once(&stored.value),
                encoding.table.unwrap_or_default(),
                &revision,
                None,
            );
            return Ok(value_response(StatusCode::OK, &table));
        }
        Ok(json_response(
            StatusCode::OK,
            encoding.object_bytes(&stored),
        ))
    }

    fn filter(&self, path: &ResourcePath) -> ApiResult<Filter> {
        Ok(Filter {
            namespace: path.namespace.clone(),
            labels: LabelSelector::parse(self.param("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(self.param("fieldSelector").unwrap_or_default())?,
        })
    }

    fn list(&self, info: &ResourceInfo, path: &ResourcePath) -> ApiResult<Response> {
        let filter = self.filter(path)?;
        let limit = self
            .param("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        let after = self.param("continue").map(decode_continue).transpose()?;
        let encoding = self.encoding(info, path);
        let store = self.app.lock()?;
        let revision = store.revision().to_string();
        let mut matching = store
            .list(&info.key(), path.namespace.as_deref(), after.as_ref())
            .filter(|s| filter.matches(&s.value));
        let mut items = Vec::new();
        let mut next = None;
        for stored in matching.by_ref() {
            if limit.is_some_and(|l| items.len() == l) {
                next = items.last().map(|last: &&Arc<crate::store::Stored>| {
                    encode_continue(&object_key(&last.value))
                });
                break;
            }
            items.push(stored);
        }
        if let Some(include) = encoding.table {
            let table = table::table(
                info,
                &path.version,
                items.iter().map(|s| &s.value),
                include,
                &revision,
                next.as_deref(),
            );
            return Ok(value_response(StatusCode::OK, &table));
        }
        let mut metadata = json!({"resourceVersion": revision});
        if let Some(token) = &next {
            metadata["continue"] = json!(token);
        }
        let head = json!({"kind": info.list_kind, "apiVersion": info.api_version(&path.version), "metadata": metadata});
        let head = serde_json::to_vec(&head).unwrap_or_default();
        let size: usize = items.iter().map(|s| s.json.len() + 1).sum();
        let mut body = BytesMut::with_capacity(head.len() + size + 16);
        body.put_slice(&head[..head.len() - 1]);
        body.put_slice(b",\"items\":[");
        for (index, stored) in items.iter().enumerate() {
            if index > 0 {
                body.put_u8(b',');
            }
            body.put_slice(&encoding.object_bytes(stored));
        }
        body.put_slice(b"]}");
        Ok(json_response(StatusCode::OK, body.freeze()))
    }

    fn watch(&self, info: &ResourceInfo, path: &ResourcePath) -> ApiResult<Response> {
        let resource_version = match self.param("resourceVersion") {
            None | Some("0") => None,
            Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "resourceVersion {rv:?} is not a resourceVersion this server issued"
                ))
            })?),
        };
        let timeout = self
            .param("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(1800);
        let request = WatchRequest {
            filter: self.filter(path)?,
            encoding: self.encoding(info, path),
            resource_version,
            send_initial_events: self.flag("sendInitialEvents"),
            bookmarks: self.flag("allowWatchBookmarks"),
            timeout: Duration::from_secs(timeout),
            bookmark_interval: self.app.bookmark_interval,
        };
        let chunks = watch::start(
            self.app.store.clone(),
            request,
            self.app.compactions.subscribe(),
        );
        let stream = futures::StreamExt::map(
            tokio_stream::wrappers::ReceiverStream::new(chunks),
            Ok::<_, std::convert::Infallible>,
        );
        let mut response = Response::new(Body::from_stream(stream));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
        Ok(response)
    }

    fn write_context(
        &self,
        path: &ResourcePath,
        user: &UserInfo,
        patch: Option<PatchKind>,
    ) -> ApiResult<WriteContext> {
        let manager = match self.param("fieldManager") {
            Some(manager) => manager.to_owned(),
            None if patch == Some(PatchKind::Apply) => String::new(),
            None => {
                let agent = self.header(header::USER_AGENT);
                let prefix = agent.split('/').next().unwrap_or_default();
                if prefix.is_empty() {
                    user.name.clone()
                } else {
                    prefix.to_owned()
                }
            }
        };
        Ok(WriteContext {
            manager,
            dry_run: self.param("dryRun") == Some("All"),
            force: self.flag("force"),
            validation: FieldValidation::parse(self.param("fieldValidation"))?,
            version: path.version.clone(),
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

    fn written(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        written: objects::Written,
    ) -> Response {
        let status = if written.created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        let encoding = Encoding {
            info: info.clone(),
            version: path.version.clone(),
            table: None,
        };
        let mut response = json_response(status, encoding.object_bytes(&written.object));
        for warning in &written.warnings {
            let text = format!(
                "299 - {}",
                serde_json::to_string(warning).unwrap_or_default()
            );
            if let Ok(value) = HeaderValue::from_str(&text) {
                response.headers_mut().append("Warning", value);
            }
        }
        response
    }

    fn create(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
        user: &UserInfo,
    ) -> ApiResult<Response> {
        if path.subresource.is_some() {
            return Err(not_found_path());
        }
        let body = self.body_json()?;
        let ctx = self.write_context(path, user, None)?;
        let written = objects::create(&mut *self.app.lock()?, info, namespace, body, &ctx)?;
        Ok(self.written(info, path, written))
    }

    fn update(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
        user: &UserInfo,
    ) -> ApiResult<Response> {
        let body = self.body_json()?;
        let ctx = self.write_context(path, user, None)?;
        let name = path.name.as_deref().unwrap_or_default();
        let written = objects::update(
            &mut *self.app.lock()?,
            info,
            namespace,
            name,
            path.subresource.as_deref(),
            body,
            &ctx,
        )?;
        Ok(self.written(info, path, written))
    }

    fn patch(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
        user: &UserInfo,
    ) -> ApiResult<Response> {
        let kind = PatchKind::from_content_type(self.header(header::CONTENT_TYPE))?;
        let ctx = self.write_context(path, user, Some(kind))?;
        let name = path.name.as_deref().unwrap_or_default();
        let written = objects::patch(
            &mut *self.app.lock()?,
            info,
            namespace,
            name,
            path.subresource.as_deref(),
            kind,
            &self.body,
            &ctx,
        )?;
        Ok(self.written(info, path, written))
    }

    fn delete_options(&self) -> ApiResult<DeleteOptions> {
        let body = if self.body.is_empty() {
            json!({})
        } else {
            self.body_json()?
        };
        DeleteOptions::from_body(
            &body,
            self.param("propagationPolicy"),
            self.param("dryRun") == Some("All"),
        )
    }

    fn delete(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
    ) -> ApiResult<Response> {
        if path.subresource.is_some() {
            return Err(not_found_path());
        }
        let options = self.delete_options()?;
        let name = path.name.as_deref().unwrap_or_default();
        let deleted = objects::delete(&mut *self.app.lock()?, info, namespace, name, &options)?;
        let encoding = Encoding {
            table: None,
            ..self.encoding(info, path)
        };
        // Like the API server: custom resources, namespaces and pods answer with the object;
        // other kinds deleted at once answer with a success Status naming it.
        let returns_object = info.custom
            || (info.group.is_empty() && matches!(info.plural.as_str(), "namespaces" | "pods"));
        match deleted {
            Deleted::Removed(stored) if !returns_object => {
                let mut details = json!({"name": name, "kind": info.plural, "uid": stored.uid()});
                if !info.group.is_empty() {
                    details["group"] = json!(info.group);
                }
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details});
                Ok(value_response(StatusCode::OK, &status))
            }
            Deleted::Removed(stored) | Deleted::Pending(stored) => Ok(json_response(
                StatusCode::OK,
                encoding.object_bytes(&stored),
            )),
        }
    }

    fn delete_collection(&self, info: &ResourceInfo, path: &ResourcePath) -> ApiResult<Response> {
        let filter = self.filter(path)?;
        let options = self.delete_options()?;
        let mut store = self.app.lock()?;
        let doomed: Vec<(String, String)> = store
            .list(&info.key(), path.namespace.as_deref(), None)
            .filter(|s| filter.matches(&s.value))
            .map(|s| object_key(&s.value))
            .collect();
        let mut items = Vec::new();
        for (namespace, name) in doomed {
            match objects::delete(&mut store, info, &namespace, &name, &options) {
                Ok(Deleted::Removed(stored) | Deleted::Pending(stored)) => {
                    items.push(stored.value.clone())
                }
                Err(error) if error.reason == StatusReason::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        let list = json!({"kind": info.list_kind, "apiVersion": info.api_version(&path.version),
            "metadata": {"resourceVersion": store.revision().to_string()}, "items": items});
        Ok(value_response(StatusCode::OK, &list))
    }

    /// SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview and
    /// SelfSubjectReview: answered from the same evaluation as every request, never stored.
    fn review(
        &self,
        user: &UserInfo,
        info: &ResourceInfo,
        path: &ResourcePath,
    ) -> ApiResult<Response> {
        if self.method != Method::POST || path.name.is_some() {
            return Err(ApiError::new(
                StatusReason::MethodNotAllowed,
                format!("{} only supports create", info.plural),
            ));
        }
        let mut review = self.body_json()?;
        review["apiVersion"] = json!(info.api_version(&path.version));
        review["kind"] = json!(info.kind);
        let store = self.app.lock()?;
        if info.plural == "selfsubjectreviews" {
            review["status"] = json!({"userInfo": {"username": user.name, "groups": user.groups}});
            return Ok(value_response(StatusCode::CREATED, &review));
        }
        let subject = if info.plural == "selfsubjectaccessreviews" {
            user.clone()
        } else {
            let attributes = Attributes {
                verb: "create".into(),
                group: info.group.clone(),
                resource: info.plural.clone(),
                namespace: path.namespace.clone().unwrap_or_default(),
                ..Attributes::default()
            };
            if authz::authorize(&store, user, &attributes).is_none() {
                return Err(ApiError::new(
                    StatusReason::Forbidden,
                    authz::forbidden_message(user, &attributes),
                ));
            }
            let name = review
                .pointer("/spec/user")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let groups: Vec<String> = review
                .pointer("/spec/groups")
                .and_then(Value::as_array)
                .map(|g| {
                    g.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            UserInfo {
                name: name.to_owned(),
                groups,
            }
        };
        let status = if let Some(resource) = review.pointer("/spec/resourceAttributes") {
            let text = |key: &str| resource[key].as_str().unwrap_or_default().to_owned();
            let mut namespace = text("namespace");
            if info.plural == "localsubjectaccessreviews" {
                namespace = path.namespace.clone().unwrap_or_default();
            }
            let attributes = Attributes {
                verb: text("verb"),
                group: text("group"),
                resource: text("resource"),
                subresource: text("subresource"),
                namespace,
                name: text("name"),
            };
            match authz::authorize(&store, &subject, &attributes) {
                Some(reason) => json!({"allowed": true, "reason": reason}),
                None => json!({"allowed": false}),
            }
        } else if review.pointer("/spec/nonResourceAttributes").is_some() {
            // Discovery, version and health paths are open to every authenticated user.
            let path = review
                .pointer("/spec/nonResourceAttributes/path")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let open = [
                "/api", "/apis", "/version", "/healthz", "/livez", "/readyz", "/openapi",
            ]
            .iter()
            .any(|p| path.starts_with(p));
            json!({"allowed": subject.is_superuser() || open})
        } else {
            return Err(ApiError::invalid(&info.kind, &info.group, "", vec![crate::status::Cause {
                kind: "FieldValueRequired",
                message: "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
                field: "spec.resourceAttributes".into(),
            }]));
        };
        review["status"] = status;
        Ok(value_response(StatusCode::CREATED, &review))
    }
}

fn encode_continue(key: &(String, String)) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{}\n{}", key.0, key.1))
}

fn decode_continue(token: &str) -> ApiResult<(String, String)> {
    use base64::Engine;
    let bad = || ApiError::bad_request("the continue token is not one this server issued");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (namespace, name) = text.split_once('\n').ok_or_else(bad)?;
    Ok((namespace.to_owned(), name.to_owned()))
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

    #[test]
    fn continue_tokens_round_trip() {
        let key = ("ns".to_owned(), "name".to_owned());
        assert_eq!(decode_continue(&encode_continue(&key)).unwrap(), key);
        assert!(decode_continue("???").is_err());
    }
}
