//! A manifest as its watch decodes it: the object, or, when it does not decode, its metadata and
//! why, so that one malformed manifest cannot stop the watch (it is logged and waits for a
//! change). The object is decoded once, straight from the watch's text; kube's
//! `DeserializeGuard` builds a generic tree of it, copies the tree and decodes the copy, which
//! was the larger part of what a watch event cost the reconciler.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::PartialObjectMeta;
pub use kube::core::error_boundary::InvalidObject;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A decoded manifest, or the metadata of one that does not decode.
#[derive(Clone, Debug)]
pub struct Guarded<K>(pub Result<K, InvalidObject>);

impl<'de, K: Resource + DeserializeOwned> Deserialize<'de> for Guarded<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The object's text as it came (the API server's answers are always JSON).
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        match serde_json::from_str::<K>(raw.get()) {
            Ok(object) => Ok(Guarded(Ok(object))),
            Err(error) => {
                let PartialObjectMeta { metadata, .. } =
                    serde_json::from_str::<PartialObjectMeta<K>>(raw.get())
                        .map_err(D::Error::custom)?;
                Ok(Guarded(Err(InvalidObject {
                    error: error.to_string(),
                    metadata,
                })))
            }
        }
    }
}

impl<K: Resource> Resource for Guarded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0
            .as_ref()
            .map_or_else(|invalid| &invalid.metadata, K::meta)
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0
            .as_mut()
            .map_or_else(|invalid| &mut invalid.metadata, K::meta_mut)
    }
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt;
    use kube::core::WatchEvent;
    use nauthera_shared::resources::OIDCClient;

    use super::*;

    #[test]
    fn a_watch_event_decodes_a_manifest_or_keeps_the_metadata_of_a_malformed_one() {
        let event = r#"{"type":"MODIFIED","object":{"apiVersion":"nauthera.io/v1alpha1",
            "kind":"OIDCClient","metadata":{"name":"web","namespace":"team-a",
            "resourceVersion":"7"},"spec":{"issuer":"https://login.example.test/acme"}}}"#;
        let WatchEvent::Modified(guarded) =
            serde_json::from_str::<WatchEvent<Guarded<OIDCClient>>>(event).unwrap()
        else {
            panic!("a modification");
        };
        let client = guarded.0.as_ref().unwrap();
        assert_eq!(client.spec.issuer, "https://login.example.test/acme");
        assert_eq!(guarded.resource_version().as_deref(), Some("7"));

        let malformed = r#"{"type":"ADDED","object":{"apiVersion":"nauthera.io/v1alpha1",
            "kind":"OIDCClient","metadata":{"name":"bad","namespace":"team-a"},
            "spec":{"issuer":7}}}"#;
        let WatchEvent::Added(guarded) =
            serde_json::from_str::<WatchEvent<Guarded<OIDCClient>>>(malformed).unwrap()
        else {
            panic!("an addition");
        };
        assert_eq!(guarded.name_any(), "bad");
        assert_eq!(guarded.namespace().as_deref(), Some("team-a"));
        let invalid = guarded.0.unwrap_err();
        assert!(
            invalid.error.contains("issuer") || invalid.error.contains("integer"),
            "{invalid}"
        );
    }

    #[test]
    fn a_listing_with_a_malformed_manifest_still_decodes() {
        let list = r#"{"apiVersion":"nauthera.io/v1alpha1","kind":"OIDCClientList",
            "metadata":{"resourceVersion":"9"},"items":[
            {"metadata":{"name":"ok","namespace":"a"},"spec":{"issuer":"https://x.test/o"}},
            {"metadata":{"name":"bad","namespace":"a"},"spec":"no"}]}"#;
        let list: kube::core::ObjectList<Guarded<OIDCClient>> = serde_json::from_str(list).unwrap();
        assert!(list.items[0].0.is_ok());
        assert_eq!(list.items[1].name_any(), "bad");
        assert!(list.items[1].0.is_err());
    }
}
