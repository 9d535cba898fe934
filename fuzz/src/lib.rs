//! What the fuzz targets share: the declared specs that server answers are shown against (the
//! examples' own), and a way to cut one input into several texts.

use std::sync::OnceLock;

use nauthera_shared::resources::{
    Branding, IdentityProvider, OIDCClient, Organization, admission_violations,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The examples a server answer is shown against, as a person would have declared them.
pub struct Declared {
    pub client: OIDCClient,
    pub branding: Branding,
    pub identity_provider: IdentityProvider,
    pub organization: Organization,
}

/// The examples of `examples/`, read once (they are compiled in, so a target needs no files).
pub fn declared() -> &'static Declared {
    static DECLARED: OnceLock<Declared> = OnceLock::new();
    DECLARED.get_or_init(|| Declared {
        client: example(include_str!("../../examples/oidcclient-secret-ref.yaml")),
        branding: example(include_str!("../../examples/branding.yaml")),
        identity_provider: example(include_str!("../../examples/identityprovider-github.yaml")),
        organization: example(include_str!("../../examples/organization.yaml")),
    })
}

/// The example's document of the `nauthera.io` group (a file may hold a Secret before it).
fn example<K: DeserializeOwned>(yaml: &str) -> K {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("an example is YAML");
    let value = documents
        .into_iter()
        .find(|document| {
            document["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("nauthera.io/"))
        })
        .expect("an example holds a nauthera.io document");
    assert!(
        admission_violations(&value, None).is_empty(),
        "an example is admitted"
    );
    serde_json::from_value(value).expect("an example decodes into its type")
}

/// The input cut at NUL bytes into at most `N` texts (missing ones are empty), each read as
/// UTF-8 with invalid sequences replaced: most of what these targets parse is text.
pub fn texts<const N: usize>(data: &[u8]) -> [String; N] {
    let mut parts = data.splitn(N, |byte| *byte == 0);
    std::array::from_fn(|_| String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned())
}
