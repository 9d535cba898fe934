//! create, replace, patch and delete.

use super::*;

impl Call<'_> {
    pub(super) fn write_context(
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
            group: path.group.clone(),
            version: path.version.clone(),
            requester: Some(user.clone()),
        })
    }

    /// Carries out a write: prepared outside the store's lock and committed under it (prepared
    /// again when what it read changed meanwhile), or, for what only the locked store can do
    /// and after too many changes meanwhile, carried out under the lock.
    pub(super) fn prepared(
        &self,
        write: impl Fn(&mut dyn objects::Access) -> ApiResult<objects::Written>,
    ) -> ApiResult<objects::Written> {
        const ATTEMPTS: usize = 8;
        for _ in 0..ATTEMPTS {
            let mut draft = objects::Draft::new(&self.app.store);
            let written = write(&mut draft)?;
            match objects::commit_draft(&mut *self.app.lock()?, draft, written) {
                objects::Committed::Done(written) => return Ok(written),
                objects::Committed::Stale => continue,
                objects::Committed::NeedsLock => break,
            }
        }
        write(&mut *self.app.lock()?)
    }

    pub(super) fn written(
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
            metadata_only: false,
        };
        let response = json_response(status, encoding.object_bytes(&written.object));
        with_warnings(response, &written.warnings)
    }

    /// The admission policies in force for deleting a stored object (none when it is absent:
    /// the delete answers 404).
    fn admit_delete(
        store: &mut Store,
        info: &ResourceInfo,
        version: &str,
        namespace: &str,
        name: &str,
        user: &UserInfo,
        dry_run: bool,
    ) -> ApiResult<Vec<String>> {
        let Some(live) = store.get(&info.key(), namespace, name) else {
            return Ok(Vec::new());
        };
        let request = admission_policy::Request {
            operation: admission_policy::Operation::Delete,
            info,
            version,
            subresource: "",
            namespace: admission_policy::Request::namespace_of(info, namespace, name),
            name,
            object: None,
            old_object: Some(&live.value),
            user,
            dry_run,
            kind: None,
        };
        admission_policy::admit(store, &request)
    }

    pub(super) fn create(
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
        let written =
            self.prepared(|store| objects::create(store, info, namespace, body.clone(), &ctx))?;
        Ok(self.written(info, path, written))
    }

    pub(super) fn update(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
        user: &UserInfo,
    ) -> ApiResult<Response> {
        let body = self.body_json()?;
        let ctx = self.write_context(path, user, None)?;
        let name = path.name.as_deref().unwrap_or_default();
        let written = self.prepared(|store| {
            objects::update(
                store,
                info,
                namespace,
                name,
                path.subresource.as_deref(),
                body.clone(),
                &ctx,
            )
        })?;
        Ok(self.written(info, path, written))
    }

    pub(super) fn patch(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
        user: &UserInfo,
    ) -> ApiResult<Response> {
        let kind = PatchKind::from_content_type(self.header(header::CONTENT_TYPE), info.custom)?;
        let ctx = self.write_context(path, user, Some(kind))?;
        let name = path.name.as_deref().unwrap_or_default();
        let written = self.prepared(|store| {
            objects::patch(
                store,
                info,
                namespace,
                name,
                path.subresource.as_deref(),
                kind,
                &self.body,
                &ctx,
            )
        })?;
        Ok(self.written(info, path, written))
    }

    pub(super) fn delete_options(&self) -> ApiResult<DeleteOptions> {
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

    pub(super) fn delete(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
        user: &UserInfo,
    ) -> ApiResult<Response> {
        if path.subresource.is_some() {
            return Err(not_found_path());
        }
        let options = self.delete_options()?;
        let name = path.name.as_deref().unwrap_or_default();
        let (deleted, warnings) = {
            let mut store = self.app.lock()?;
            let warnings = Self::admit_delete(
                &mut store,
                info,
                &path.version,
                namespace,
                name,
                user,
                options.dry_run,
            )?;
            let deleted = objects::delete(&mut store, info, namespace, name, &options)?;
            (deleted, warnings)
        };
        let encoding = Encoding {
            table: None,
            ..self.encoding(info, path)
        };
        // Like the API server: custom resources, namespaces and pods answer with the object;
        // other kinds deleted at once answer with a success Status naming it.
        let returns_object = info.custom
            || (info.group.is_empty() && matches!(info.plural.as_str(), "namespaces" | "pods"));
        let response = match deleted {
            Deleted::Removed(stored) if !returns_object => {
                let mut details = json!({"name": name, "kind": info.plural, "uid": stored.uid()});
                if !info.group.is_empty() {
                    details["group"] = json!(info.group);
                }
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details});
                value_response(StatusCode::OK, &status)
            }
            Deleted::Removed(stored) | Deleted::Pending(stored) => {
                json_response(StatusCode::OK, encoding.object_bytes(&stored))
            }
        };
        Ok(with_warnings(response, &warnings))
    }

    pub(super) fn delete_collection(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        user: &UserInfo,
    ) -> ApiResult<Response> {
        let filter = self.filter(path)?;
        let options = self.delete_options()?;
        let mut store = self.app.lock()?;
        let doomed: Vec<(String, String)> = store
            .list(&info.key(), path.namespace.as_deref(), None)
            .filter(|s| filter.matches(&s.value))
            .map(|s| object_key(&s.value))
            .collect();
        let mut items = Vec::new();
        let mut warnings = Vec::new();
        for (namespace, name) in doomed {
            // Each object is admitted as its own delete, as the API server does.
            warnings.extend(Self::admit_delete(
                &mut store,
                info,
                &path.version,
                &namespace,
                &name,
                user,
                options.dry_run,
            )?);
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
        Ok(with_warnings(
            value_response(StatusCode::OK, &list),
            &warnings,
        ))
    }
}

/// Adds `Warning` headers the way the API server writes them (`299 - "text"`).
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
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
