//! Who is asking and what they may do: impersonation, TokenRequest, access reviews and the
//! emulator's test controls.

use super::*;

impl Call<'_> {
    /// `Impersonate-User` / `Impersonate-Group`, allowed by the `impersonate` verb on users,
    /// groups or serviceaccounts, as the API server does.
    pub(super) fn impersonate(&self, user: UserInfo) -> ApiResult<UserInfo> {
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

    /// Test controls, for the superuser only.
    pub(super) fn control(&self, user: &UserInfo, segments: &[&str]) -> ApiResult<Response> {
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
                self.app
                    .add_token(token.clone(), Credential::unlimited(identity.clone()))?;
                Ok(value_response(
                    StatusCode::OK,
                    &json!({"token": token, "user": identity.name, "groups": identity.groups}),
                ))
            }
            _ => Err(not_found_path()),
        }
    }

    /// TokenRequest (`serviceaccounts/<name>/token`): a token for the ServiceAccount that
    /// authenticates as it until it expires, while the account (and the object the request
    /// binds it to, if any) exists, for the API's audience.
    pub(super) fn token_request(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
    ) -> ApiResult<Response> {
        let name = path.name.as_deref().unwrap_or_default();
        let request = if self.body.is_empty() {
            json!({})
        } else {
            self.body_json()?
        };
        let spec = &request["spec"];
        let seconds = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => 3600,
            Some(value) => value.as_i64().ok_or_else(|| {
                ApiError::bad_request("spec.expirationSeconds must be an integer")
            })?,
        };
        let too = if seconds < 600 {
            Some("may not specify a duration less than 10 minutes")
        } else if seconds > 1 << 32 {
            Some("may not specify a duration larger than 2^32 seconds")
        } else {
            None
        };
        if let Some(problem) = too {
            return Err(ApiError::invalid(
                "TokenRequest",
                "authentication.k8s.io",
                name,
                vec![crate::status::Cause {
                    kind: "FieldValueInvalid",
                    message: format!("Invalid value: {seconds}: {problem}"),
                    field: "spec.expirationSeconds".into(),
                }],
            ));
        }
        let mut audiences: Vec<String> = spec["audiences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        if audiences.is_empty() {
            audiences.push(authz::API_AUDIENCE.to_owned());
        }
        let (account, bound) = {
            let store = self.app.lock()?;
            let account = store.get(&info.key(), namespace, name).ok_or_else(|| {
                ApiError::not_found(
                    &crate::status::ResourceName {
                        group: "",
                        plural: "serviceaccounts",
                    },
                    name,
                )
            })?;
            let bound = match spec.get("boundObjectRef").filter(|r| r.is_object()) {
                Some(reference) => Some(bound_object(&store, namespace, reference)?),
                None => None,
            };
            (account, bound)
        };
        let now = jiff::Timestamp::now().as_second();
        let expires = now + seconds;
        let mut bindings = vec![authz::Binding {
            resource: info.key(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: account.uid().to_owned(),
        }];
        let mut claims = json!({
            "aud": audiences,
            "exp": expires,
            "iat": now,
            "nbf": now,
            "iss": authz::API_AUDIENCE,
            "jti": crate::ids::new_uid(),
            "sub": format!("system:serviceaccount:{namespace}:{name}"),
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": name, "uid": account.uid()},
            },
        });
        if let Some((kind, binding)) = bound {
            claims["kubernetes.io"][kind] = json!({"name": binding.name, "uid": binding.uid});
            bindings.push(binding);
        }
        let token = crate::ids::token_like_jwt(&claims);
        self.app.add_token(
            token.clone(),
            Credential {
                user: UserInfo::service_account(namespace, name),
                expires: Some(expires),
                audiences: audiences.clone(),
                bindings,
            },
        )?;
        let expiration = jiff::Timestamp::from_second(expires)
            .map_err(|_| ApiError::internal("the expiration time is out of range"))?
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let mut spec = spec.clone();
        if !spec.is_object() {
            spec = json!({});
        }
        spec["audiences"] = json!(audiences);
        spec["expirationSeconds"] = json!(seconds);
        let response = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": expiration},
        });
        Ok(value_response(StatusCode::CREATED, &response))
    }

    /// SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview and
    /// SelfSubjectReview: answered from the same evaluation as every request, never stored.
    pub(super) fn review(
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

/// The object a TokenRequest binds its token to (`boundObjectRef`): a Pod or Secret of the
/// namespace, as the API server allows (it also allows Nodes, of which the emulator has none).
/// Returns the claim's name (`pod`, `secret`) and the binding.
fn bound_object(
    store: &Store,
    namespace: &str,
    reference: &Value,
) -> ApiResult<(&'static str, authz::Binding)> {
    let text = |key: &str| reference[key].as_str().unwrap_or_default();
    let api_version = match text("apiVersion") {
        "" => "v1",
        other => other,
    };
    let (claim, plural) = match (api_version, text("kind")) {
        ("v1", "Pod") => ("pod", "pods"),
        ("v1", "Secret") => ("secret", "secrets"),
        ("v1", "Node") => ("node", "nodes"),
        (_, kind) => {
            let group_version = if api_version.contains('/') {
                api_version.to_owned()
            } else {
                format!("/{api_version}")
            };
            return Err(ApiError::bad_request(format!(
                "cannot bind token for object of type {group_version}, Kind={kind}"
            )));
        }
    };
    let name = text("name");
    let resource = crate::registry::ResourceKey {
        group: String::new(),
        plural: plural.into(),
    };
    let object_namespace = if plural == "nodes" { "" } else { namespace };
    let live = store
        .get(&resource, object_namespace, name)
        .ok_or_else(|| {
            ApiError::not_found(&crate::status::ResourceName { group: "", plural }, name)
        })?;
    let uid = text("uid");
    if !uid.is_empty() && uid != live.uid() {
        return Err(ApiError::new(
            StatusReason::Conflict,
            format!(
                "Operation cannot be fulfilled on {plural} \"{name}\": the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok((
        claim,
        authz::Binding {
            resource,
            namespace: object_namespace.to_owned(),
            name: name.to_owned(),
            uid: live.uid().to_owned(),
        },
    ))
}
