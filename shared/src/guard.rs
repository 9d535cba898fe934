//! A manifest as a watch or a listing decodes it: the object, or, when it does not decode, its
//! metadata and why, so that one malformed manifest cannot stop the watch (the reconciler logs it
//! and waits for a change). The object is decoded once, straight from the text, without its
//! managed fields; kube's `DeserializeGuard` builds a generic tree of it, copies the tree and
//! decodes the copy, which was the larger part of what a watch event cost the reconciler.

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
        let text = without_managed_fields(raw.get());
        match serde_json::from_str::<K>(&text) {
            Ok(object) => Ok(Guarded(Ok(object))),
            Err(error) => {
                let PartialObjectMeta { metadata, .. } =
                    serde_json::from_str::<PartialObjectMeta<K>>(&text)
                        .map_err(D::Error::custom)?;
                Ok(Guarded(Err(InvalidObject {
                    error: error.to_string(),
                    metadata,
                })))
            }
        }
    }
}

/// Whether the annotations carry the restore annotation (a key of its own, not the text of
/// another annotation, where the quotes are escaped).
fn asks_for_restore(annotations: &str) -> bool {
    static KEY: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("\"{}\"", crate::RESTORE_ANNOTATION));
    annotations.contains(KEY.as_str())
}

/// Whether the annotations carry the rotate annotation (as a key, like the restore one).
fn asks_for_rotation(annotations: &str) -> bool {
    static KEY: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("\"{}\"", crate::ROTATE_ANNOTATION));
    annotations.contains(KEY.as_str())
}

/// Whether the annotations carry the adopt annotation (as a key) and the object records no
/// adoption yet: the annotation stays once carried out, and its managedFields are not needed
/// then.
fn asks_for_adoption(annotations: &str, text: &str) -> bool {
    static KEY: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("\"{}\"", crate::ADOPT_ANNOTATION));
    annotations.contains(KEY.as_str()) && !text.contains("\"lastAdoption\"")
}

/// The object's text to decode: without `metadata.managedFields`, which was more than half of
/// what decoding a manifest cost (each entry's field set is a tree of maps), unless the
/// manifest asks for a restore, a rotation or an adoption not yet carried out: who asked is
/// read from them. The one scan of the metadata finds both the managed fields and the
/// annotations, so only the annotations' text is searched for the keys. Text that does not
/// scan as expected is left as it is, to be decoded whole.
fn without_managed_fields(text: &str) -> Cow<'_, str> {
    let Some(spans) = metadata_spans(text.as_bytes()) else {
        return Cow::Borrowed(text);
    };
    let Some((start, end)) = spans.managed_fields else {
        return Cow::Borrowed(text);
    };
    let annotations = spans
        .annotations
        .and_then(|span| text.get(span))
        .unwrap_or_default();
    if asks_for_restore(annotations)
        || asks_for_rotation(annotations)
        || asks_for_adoption(annotations, text)
    {
        return Cow::Borrowed(text);
    }
    Cow::Owned([&text[..start], &text[end..]].concat())
}

/// Where two members of the object's metadata sit.
#[derive(Default)]
struct MetadataSpans {
    /// The annotations' value, braces included.
    annotations: Option<std::ops::Range<usize>>,
    /// `"managedFields": [...]` with the comma that separates it from a neighbour, so that
    /// cutting the span leaves valid JSON.
    managed_fields: Option<(usize, usize)>,
}

fn metadata_spans(bytes: &[u8]) -> Option<MetadataSpans> {
    let mut scan = Scan { bytes, at: 0 };
    let metadata = scan.member_value(b"metadata")?;
    let mut scan = Scan {
        bytes,
        at: metadata,
    };
    scan.expect(b'{')?;
    let mut spans = MetadataSpans::default();
    let mut previous_end = None;
    loop {
        scan.skip_whitespace();
        if scan.peek()? == b'}' {
            return Some(spans);
        }
        let key_start = scan.at;
        let key = scan.string()?;
        scan.skip_whitespace();
        scan.expect(b':')?;
        scan.skip_whitespace();
        let value_start = scan.at;
        scan.value()?;
        let value_end = scan.at;
        scan.skip_whitespace();
        let next = scan.peek()?;
        match key {
            b"managedFields" => {
                spans.managed_fields = Some(match (previous_end, next) {
                    // Cut from the end of the member before: its comma goes with it.
                    (Some(previous), _) => (previous, value_end),
                    // The first member: cut through the comma after it.
                    (None, b',') => (key_start, scan.at + 1),
                    (None, _) => (key_start, value_end),
                })
            }
            b"annotations" => spans.annotations = Some(value_start..value_end),
            _ => {}
        }
        match next {
            b',' => {
                previous_end = Some(value_end);
                scan.at += 1;
            }
            b'}' => return Some(spans),
            _ => return None,
        }
    }
}

/// A forward scan over JSON text that only finds where things are.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// A string's raw content (escapes left as they are); `at` moves past its closing quote.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            let rest = self.bytes.get(self.at..)?;
            self.at += rest.iter().position(|b| matches!(b, b'"' | b'\\'))?;
            match self.peek()? {
                b'"' => break,
                _ => self.at += 2,
            }
        }
        let content = self.bytes.get(start..self.at)?;
        self.at += 1;
        Some(content)
    }

    /// Moves past one value of any kind.
    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.at += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.at += 1;
                }
            }
            _ => {
                while !matches!(
                    self.peek()?,
                    b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
                ) {
                    self.at += 1;
                }
                Some(())
            }
        }
    }

    /// Where the value of a top-level member starts.
    fn member_value(&mut self, wanted: &[u8]) -> Option<usize> {
        self.skip_whitespace();
        self.expect(b'{')?;
        loop {
            self.skip_whitespace();
            let key = self.string()?;
            self.skip_whitespace();
            self.expect(b':')?;
            self.skip_whitespace();
            if key == wanted {
                return Some(self.at);
            }
            self.value()?;
            self.skip_whitespace();
            self.expect(b',')?;
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
    use crate::resources::OIDCClient;
    use kube::ResourceExt;
    use kube::core::WatchEvent;

    use super::*;

    #[test]
    fn managed_fields_stay_only_on_a_manifest_that_asks_for_a_restore() {
        let object = |annotations: &str| {
            format!(
                r#"{{"apiVersion":"nauthera.io/v1alpha1","kind":"OIDCClient","metadata":{{
                "name":"web","annotations":{annotations},"managedFields":[{{"manager":"desk",
                "operation":"Update","fieldsType":"FieldsV1","fieldsV1":{{}}}}]}},
                "spec":{{"issuer":"https://login.example.test/acme"}}}}"#
            )
        };
        let managers = |text: &str| {
            let Guarded(decoded) = serde_json::from_str::<Guarded<OIDCClient>>(text).unwrap();
            decoded.unwrap().metadata.managed_fields.map(|m| m.len())
        };
        assert_eq!(
            managers(&object(r#"{"nauthera.io/restore":"true"}"#)),
            Some(1)
        );
        assert_eq!(
            managers(&object(r#"{"nauthera.io/restore-request":"r1"}"#)),
            None
        );
        // A rotation request too: who asked is read from them.
        assert_eq!(managers(&object(r#"{"nauthera.io/rotate":"n1"}"#)), Some(1));
        // An adoption until it is carried out (the annotation stays afterwards).
        assert_eq!(managers(&object(r#"{"nauthera.io/adopt":"r4"}"#)), Some(1));
        assert_eq!(
            managers(&object(r#"{"nauthera.io/adopt-secret":"Keep"}"#)),
            None
        );
        // The key quoted inside another annotation's text is not the annotation.
        let applied = r#"{"kubectl.kubernetes.io/last-applied-configuration":"{\"nauthera.io/restore\":\"true\"}"}"#;
        assert_eq!(managers(&object(applied)), None);
        // Nor is the key anywhere but among the annotations.
        let labelled = r#"{"apiVersion":"nauthera.io/v1alpha1","kind":"OIDCClient","metadata":{
            "name":"web","labels":{"nauthera.io/restore":"true"},"managedFields":[{"manager":"desk"}]},
            "spec":{"issuer":"https://login.example.test/acme"}}"#;
        assert_eq!(managers(labelled), None);
        // Annotations after the managed fields are read all the same.
        let after = r#"{"apiVersion":"nauthera.io/v1alpha1","kind":"OIDCClient","metadata":{
            "name":"web","managedFields":[{"manager":"desk"}],"annotations":{"nauthera.io/restore":"true"}},
            "spec":{"issuer":"https://login.example.test/acme"}}"#;
        assert_eq!(managers(after), Some(1));
    }

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
    fn managed_fields_are_cut_from_the_metadata_and_nothing_else() {
        let cases = [
            // Between two members, first, alone, pretty-printed, absent.
            r#"{"kind":"K","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}],"uid":"u"},"spec":{}}"#,
            r#"{"metadata":{"managedFields":[{"manager":"m"}],"name":"a"}}"#,
            r#"{"metadata":{"managedFields":[]}}"#,
            "{\n  \"metadata\" : {\n    \"name\": \"a\",\n    \"managedFields\" : [ {\"manager\": \"m\"} ]\n  }\n}",
            r#"{"metadata":{"name":"a"},"spec":{"managedFields":[1]}}"#,
            // Strings that look like the member, escaped quotes and brackets in values.
            r#"{"apiVersion":"v\"1]","metadata":{"annotations":{"x":"\"managedFields\":[","y":"}{]"},"managedFields":[{"a":"]\\"}],"labels":{"l":"v"}}}"#,
        ];
        for text in cases {
            let mut expected: serde_json::Value = serde_json::from_str(text).unwrap();
            if let Some(meta) = expected["metadata"].as_object_mut() {
                meta.remove("managedFields");
            }
            let cut = without_managed_fields(text);
            let got: serde_json::Value =
                serde_json::from_str(&cut).unwrap_or_else(|e| panic!("{cut} does not parse: {e}"));
            assert_eq!(got, expected, "{text}");
        }
        assert!(matches!(
            without_managed_fields(r#"{"metadata":{"name":"a"}}"#),
            Cow::Borrowed(_)
        ));
        // What does not scan is left whole.
        for broken in [
            r#"{"metadata":{"managedFields":[}"#,
            "[1,2]",
            "",
            r#"{"metadata""#,
        ] {
            assert_eq!(without_managed_fields(broken), broken);
        }
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
