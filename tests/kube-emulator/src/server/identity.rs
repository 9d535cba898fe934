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
                self.app.add_token(token.clone(), identity.clone())?;
                Ok(value_response(
                    StatusCode::OK,
                    &json!({"token": token, "user": identity.name, "groups": identity.groups}),
                ))
            }
            _ => Err(not_found_path()),
        }
    }

    /// TokenRequest (`serviceaccounts/<name>/token`): mints a bearer token for the account.
    pub(super) fn token_request(
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
