//! get, list (pages, tables) and watch.

use super::*;
use crate::watch::{self, WatchRequest};

impl Call<'_> {
    pub(super) fn get(
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
        if let Some(include) = encoding.table {
            let revision = stored
                .value
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let table = table::TableWriter::new(info, &path.version, include).table(
                std::iter::once(&*stored),
                revision,
                None,
            );
            return Ok(json_response(StatusCode::OK, table));
        }
        Ok(json_response(
            StatusCode::OK,
            encoding.object_bytes(&stored),
        ))
    }

    pub(super) fn list(&self, info: &ResourceInfo, path: &ResourcePath) -> ApiResult<Response> {
        let (page, more_to_come) = self.list_page(info, path)?;
        if more_to_come && self.app.compact_between_pages {
            self.app.compact()?;
        }
        Ok(page)
    }

    /// One page of a list, and whether more pages follow.
    fn list_page(&self, info: &ResourceInfo, path: &ResourcePath) -> ApiResult<(Response, bool)> {
        let filter = self.filter(path)?;
        let limit = self
            .param("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        let continued = self.param("continue").map(decode_continue).transpose()?;
        let encoding = self.encoding(info, path);
        let store = self.app.lock()?;
        // A later page shows the snapshot of the list's first page and says its resourceVersion.
        let (at, after) = match continued {
            Some(Continue { revision, after }) => (revision, Some(after)),
            None => (store.revision(), None),
        };
        let revision = at.to_string();
        let snapshot =
            match store.list_at(&info.key(), path.namespace.as_deref(), after.as_ref(), at) {
                Ok(snapshot) => snapshot,
                // A later page whose snapshot was compacted away: the rest as it stands now.
                Err(expired) => {
                    return Err(match &after {
                        Some(after) => ApiError::expired_continue(encode_continue(&Continue {
                            revision: store.revision(),
                            after: after.clone(),
                        })),
                        None => expired,
                    });
                }
            };
        let mut matching = snapshot.filter(|s| filter.matches(&s.value));
        let mut items = Vec::new();
        let mut next = None;
        for stored in matching.by_ref() {
            if limit.is_some_and(|l| items.len() == l) {
                next = items.last().map(|last: &&Arc<crate::store::Stored>| {
                    encode_continue(&Continue {
                        revision: at,
                        after: object_key(&last.value),
                    })
                });
                break;
            }
            items.push(stored);
        }
        if let Some(include) = encoding.table {
            let table = table::TableWriter::new(info, &path.version, include).table(
                items.iter().map(|s| s.as_ref()),
                &revision,
                next.as_deref(),
            );
            return Ok((json_response(StatusCode::OK, table), next.is_some()));
        }
        let mut metadata = json!({"resourceVersion": revision});
        if let Some(token) = &next {
            metadata["continue"] = json!(token);
        }
        let head = if encoding.metadata_only {
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
        } else {
            json!({"kind": info.list_kind, "apiVersion": info.api_version(&path.version), "metadata": metadata})
        };
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
        Ok((json_response(StatusCode::OK, body.freeze()), next.is_some()))
    }

    pub(super) fn watch(&self, info: &ResourceInfo, path: &ResourcePath) -> ApiResult<Response> {
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
}

/// Where a list goes on: the snapshot's revision and the last key served.
#[derive(Debug, PartialEq, Eq)]
struct Continue {
    revision: u64,
    after: (String, String),
}

fn encode_continue(token: &Continue) -> String {
    use base64::Engine;
    let (namespace, name) = &token.after;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(format!("{}\n{namespace}\n{name}", token.revision))
}

fn decode_continue(token: &str) -> ApiResult<Continue> {
    use base64::Engine;
    let bad = || ApiError::bad_request("the continue token is not one this server issued");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.splitn(3, '\n');
    let revision = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
    let (Some(namespace), Some(name)) = (parts.next(), parts.next()) else {
        return Err(bad());
    };
    Ok(Continue {
        revision,
        after: (namespace.to_owned(), name.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let key = ("ns".to_owned(), "name".to_owned());
        let token = Continue {
            revision: 42,
            after: key,
        };
        assert_eq!(decode_continue(&encode_continue(&token)).unwrap(), token);
        assert!(decode_continue("???").is_err());
    }
}
