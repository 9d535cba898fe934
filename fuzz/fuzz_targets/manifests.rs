//! Manifests as the reconciler receives them (a watch event's JSON) and as people write them
//! (YAML, read with serde-saphyr as the plugin reads `-f`): decoded into `OIDCClient`,
//! `Branding`, `IdentityProvider` and `Organization` directly and through the guard the
//! reconciler's watches decode with (`nauthera_shared::guard::Guarded`), checked as the API
//! server admits them (`admission_violations`), then what the reconciler checks before it sends
//! anything (the secret template, the rotation schedule, the branding encoder) and the
//! conversion to the server's requests.
//!
//! Properties: nothing panics; what decodes directly decodes through the guard too; what
//! decodes serializes and decodes to the same value; what is admitted decodes into its kind; a
//! conversion that fails names a `spec.` or `metadata.` field.

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use nauthera_client::convert;
use nauthera_shared::guard::Guarded;
use nauthera_shared::resources::{
    Branding, IdentityProvider, OIDCClient, Organization, admission_violations,
};
use nauthera_shared::secret_render;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const MANAGER: &str = "nauthera-reconciler";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let value: Value = if text.trim_start().starts_with('{') {
        match serde_json::from_str(text) {
            Ok(value) => value,
            Err(_) => return,
        }
    } else {
        match serde_saphyr::from_str(text) {
            Ok(value) => value,
            Err(_) => return,
        }
    };
    let json = serde_json::to_vec(&value).expect("a value serializes");
    let admitted = admission_violations(&value, None).is_empty();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let admitted_as = |name: &str| admitted && kind == name;

    if let Some(client) = decode::<OIDCClient>(&value, &json, admitted_as("OIDCClient")) {
        oidc_client(&client);
    }
    if let Some(branding) = decode::<Branding>(&value, &json, admitted_as("Branding")) {
        let _ = nauthera_shared::branding::encode(&branding.spec.branding);
        conversion(convert::apply_branding_request(&branding, MANAGER, None));
        conversion(convert::get_branding_request(&branding));
    }
    if let Some(provider) =
        decode::<IdentityProvider>(&value, &json, admitted_as("IdentityProvider"))
    {
        let secret = provider.spec.secret_ref.as_ref().map(|_| "upstream-secret");
        conversion(convert::identity_provider_spec(&provider.spec, secret));
        conversion(convert::apply_identity_provider_request(
            &provider, secret, MANAGER, None,
        ));
    }
    if let Some(organization) = decode::<Organization>(&value, &json, admitted_as("Organization")) {
        conversion(convert::organization_spec(&organization.spec));
        conversion(convert::apply_organization_request(
            &organization,
            MANAGER,
            Some("r1"),
        ));
    }
});

/// The object, when the document decodes into `K`; `must` when it is admitted as that kind.
fn decode<K>(value: &Value, json: &[u8], must: bool) -> Option<K>
where
    K: DeserializeOwned + Serialize + kube::Resource,
{
    let guarded = serde_json::from_slice::<Guarded<K>>(json);
    let decoded = match serde_json::from_value::<K>(value.clone()) {
        Ok(decoded) => decoded,
        Err(error) => {
            assert!(!must, "admitted but not decoded: {error}");
            return None;
        }
    };
    match guarded {
        Ok(Guarded(Ok(_))) => {}
        Ok(Guarded(Err(invalid))) => panic!("decodes, but not through the guard: {invalid:?}"),
        Err(error) => panic!("decodes, but not through the guard: {error}"),
    }
    let again = serde_json::to_value(&decoded).expect("an object serializes");
    let back: K = serde_json::from_value(again.clone()).expect("what serializes decodes");
    assert_eq!(serde_json::to_value(&back).expect("serializes"), again);
    Some(decoded)
}

fn oidc_client(client: &OIDCClient) {
    let secret = client.spec.secret.as_ref();
    let provided = secret
        .and_then(|s| s.secret_ref.as_ref())
        .map(|_| "provided-secret");
    conversion(convert::client_spec(&client.spec, provided));
    conversion(convert::apply_client_request(
        client,
        provided,
        MANAGER,
        Some("r7"),
    ));
    conversion(convert::delete_client_request(client, MANAGER, Some("r7")));
    let _ = convert::comparable_client_spec(&client.spec);
    if let Some(template) = secret.and_then(|s| s.template.as_deref()) {
        let _ = secret_render::check(template, &client.spec.issuer);
    }
    if let Some(rotation) = secret.and_then(|s| s.rotation.as_deref()) {
        if let Err(why) = rotation.schedule(Duration::from_secs(3600)) {
            assert!(why.starts_with("spec.secret.rotation."), "{why}");
        }
    }
}

/// A conversion either gives its message or an error that names the field.
fn conversion<T>(result: Result<T, convert::ConvertError>) {
    if let Err(error) = result {
        let message = error.to_string();
        assert!(
            message.contains("spec.") || message.contains("metadata."),
            "{message}"
        );
    }
}
