//! Writes whose answer the reconciler does not read. The API server sends the written object
//! back; `Api`'s methods decode it into a typed object, managed fields and all, which was a
//! tenth of the reconciler's CPU in a cold start. Here the answer is only checked to be JSON.

use std::fmt::Debug;

use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::Request;
use serde::Serialize;
use serde::de::IgnoredAny;

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
    client.request::<IgnoredAny>(request).await.map(|_| ())
}
