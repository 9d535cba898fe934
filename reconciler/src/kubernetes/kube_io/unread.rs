//! Writes whose answer the reconciler does not read. The API server sends the written object
//! back; `Api`'s methods decode it into a typed object, managed fields and all, which was a
//! tenth of the reconciler's CPU in a cold start. Here a success is known by its status code
//! and its body is read off the connection unparsed; only a refusal's body is decoded, into
//! the `Status` that callers match on.

use std::fmt::Debug;

use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::client::Body;
use kube::core::{Request, Status};
use serde::Serialize;

/// Creates `object`.
pub async fn create<K: Resource + Clone + Serialize>(
    api: &Api<K>,
    params: &PostParams,
    object: &K,
) -> Result<(), kube::Error> {
    let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
    let request = Request::new(api.resource_url()).create(params, body);
    send(api, request).await
}

/// Patches the object `name`.
pub async fn patch<K: Resource + Clone, P: Serialize + Debug>(
    api: &Api<K>,
    name: &str,
    params: &PatchParams,
    patch: &Patch<P>,
) -> Result<(), kube::Error> {
    let request = Request::new(api.resource_url()).patch(name, params, patch);
    send(api, request).await
}

/// Patches the status of the object `name`.
pub async fn patch_status<K: Resource + Clone, P: Serialize + Debug>(
    api: &Api<K>,
    name: &str,
    params: &PatchParams,
    patch: &Patch<P>,
) -> Result<(), kube::Error> {
    let request = Request::new(api.resource_url()).patch_subresource("status", name, params, patch);
    send(api, request).await
}

async fn send<K: Resource + Clone>(
    api: &Api<K>,
    request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<(), kube::Error> {
    let request = request.map_err(kube::Error::BuildRequest)?;
    let client = api.clone().into_client();
    let answer = client.send(request.map(Body::from)).await?;
    let code = answer.status();
    // Read to its end even when unused: a connection with an answer left on it is not reused.
    let body = answer.into_body().collect_bytes().await?;
    outcome(code, &body).map_err(kube::Error::Api)
}

/// A write's outcome from its answer: any 2xx is done, whatever its body; otherwise the
/// `Status` the API server sent, or, when a proxy answered with something else, one made of
/// the code and the text, as kube's own requests report it.
fn outcome(code: http::StatusCode, body: &[u8]) -> Result<(), Box<Status>> {
    if code.is_success() {
        return Ok(());
    }
    match serde_json::from_slice::<Status>(body) {
        Ok(status) => Err(status.boxed()),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            Err(Status::failure(text.trim(), "Failed to parse error data")
                .with_code(code.as_u16())
                .boxed())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_is_known_by_its_code_and_its_body_is_not_read() {
        assert!(outcome(http::StatusCode::OK, b"{\"kind\":\"OIDCClient\"}").is_ok());
        assert!(outcome(http::StatusCode::CREATED, b"not json at all").is_ok());
    }

    #[test]
    fn a_refusal_gives_the_status_the_api_server_sent() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409}"#;
        let status = outcome(http::StatusCode::CONFLICT, body).unwrap_err();
        assert_eq!(status.code, 409);
        assert_eq!(status.reason, "Conflict");
        assert_eq!(status.message, "the object has been modified");
    }

    #[test]
    fn a_refusal_that_is_not_a_status_keeps_its_code_and_text() {
        let status =
            outcome(http::StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>\n").unwrap_err();
        assert_eq!(status.code, 502);
        assert_eq!(status.message, "<html>bad gateway</html>");
    }
}
