//! The `scale` subresource of Deployments, StatefulSets and custom resources that declare one:
//! GET, PUT and PATCH of an `autoscaling/v1` Scale.

use super::*;
use crate::objects::ScaleChange;

impl Call<'_> {
    pub(super) fn scale(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
        user: &UserInfo,
        verb: &str,
    ) -> ApiResult<Response> {
        let Some(scale) = &info.scale else {
            return Err(not_found_path());
        };
        let name = path.name.as_deref().unwrap_or_default();
        let written = match verb {
            "get" => {
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
                let value = objects::to_scale(scale, &stored.value);
                if self.table_request().is_some() {
                    return Ok(value_response(StatusCode::OK, &table::scale_table(&value)));
                }
                return Ok(value_response(StatusCode::OK, &value));
            }
            "update" => {
                let body = self.body_json()?;
                let ctx = self.write_context(path, user, None)?;
                self.prepared(|store| {
                    objects::write_scale(
                        store,
                        info,
                        namespace,
                        name,
                        ScaleChange::Replace(&body),
                        &ctx,
                    )
                })?
            }
            "patch" => {
                let kind =
                    PatchKind::from_content_type(self.header(header::CONTENT_TYPE), info.custom)?;
                let ctx = self.write_context(path, user, Some(kind))?;
                self.prepared(|store| {
                    objects::write_scale(
                        store,
                        info,
                        namespace,
                        name,
                        ScaleChange::Patch(kind, &self.body),
                        &ctx,
                    )
                })?
            }
            _ => {
                return Err(ApiError::new(
                    StatusReason::MethodNotAllowed,
                    format!(
                        "the server does not allow this method on the requested resource ({})",
                        self.method
                    ),
                ));
            }
        };
        Ok(value_response(
            StatusCode::OK,
            &objects::to_scale(scale, &written.object.value),
        ))
    }
}
