//! The AdminService's answers and change events as the wire carries them: decoded with prost,
//! then turned into what the reconciler and the plugin work with (specs shown against the
//! examples' manifests, grants, kinds, the cluster's namespaces). The first byte picks the
//! message.
//!
//! Properties: nothing panics; a decoded message encodes and decodes to itself; what is shown
//! as a spec converts back to what the server holds (no drift); no `Debug` of an answer shows a
//! client secret it holds.

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use nauthera_client::convert;
use nauthera_client::wire;
use nauthera_fuzz::declared;
use nauthera_proto::v1::{self, client_spec};
use nauthera_shared::topology::NamespaceMapping;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 10 {
        0 => each(decode::<v1::Client>(bytes), client),
        1 => each(decode::<v1::Branding>(bytes), branding),
        2 => each(decode::<v1::IdentityProvider>(bytes), identity_provider),
        3 => each(decode::<v1::Organization>(bytes), organization),
        4 => each(decode::<v1::ChangeEvent>(bytes), change_event),
        5 => each(decode::<v1::ServerInfo>(bytes), server_info),
        6 => each(decode::<v1::ApplyClientResponse>(bytes), |answer| {
            no_secret_shown(&answer, &answer.secret);
            each(answer.client, client);
        }),
        7 => each(decode::<v1::ListClientsResponse>(bytes), |page| {
            page.clients.into_iter().for_each(client)
        }),
        8 => each(decode::<v1::ListBrandingsResponse>(bytes), |page| {
            page.brandings.into_iter().for_each(branding)
        }),
        _ => each(decode::<v1::ListIdentityProvidersResponse>(bytes), |page| {
            page.identity_providers
                .into_iter()
                .for_each(identity_provider)
        }),
    }
});

fn each<T>(value: Option<T>, f: impl FnOnce(T)) {
    if let Some(value) = value {
        f(value);
    }
}

/// The message, when the bytes decode; a decoded message survives its own encoding.
fn decode<M: Message + Default + PartialEq>(bytes: &[u8]) -> Option<M> {
    let message = M::decode(bytes).ok()?;
    let again = M::decode(message.encode_to_vec().as_slice()).expect("an encoded message decodes");
    assert!(
        again == message,
        "a message changed through its own encoding"
    );
    Some(message)
}

/// A secret held by the message is not in its `Debug` (short values could occur by chance).
fn no_secret_shown(message: &impl std::fmt::Debug, secret: &str) {
    if secret.chars().count() >= 12 {
        let shown = format!("{message:?}");
        assert!(!shown.contains(secret), "a secret shows in {shown}");
    }
}

fn client(held: v1::Client) {
    let Some(spec) = held.spec.as_ref() else {
        return;
    };
    if let Some(client_spec::Secret::ProvidedSecret(secret)) = &spec.secret {
        no_secret_shown(&held, secret);
    }
    let declared = &declared().client;
    let _ = convert::secret_source(spec);
    let Ok(shown) = convert::oidc_client_spec_from_server(spec, &declared.spec) else {
        return;
    };
    // What the server holds, shown as a spec, is no drift from what it holds.
    let back = convert::comparable_client_spec(&shown);
    let mut held_spec = spec.clone();
    if let Some(client_spec::Secret::ProvidedSecret(_)) = &held_spec.secret {
        held_spec.secret = Some(client_spec::Secret::ProvidedSecret(String::new()));
    }
    let drift = convert::diff_client(&back, &held_spec);
    assert!(
        drift.is_empty(),
        "drift {drift:?} between {back:?} and {held_spec:?}"
    );
}

fn branding(held: v1::Branding) {
    let Some(document) = held.document.as_ref() else {
        return;
    };
    let Ok(shown) = convert::sign_in_branding_from_document(document) else {
        return;
    };
    // The encoder may refuse what the server holds (it holds what older versions allowed);
    // what it accepts is no drift, but for colours' spellings and roles this version does not
    // know.
    if let Ok(back) = convert::branding_document(&shown) {
        let drift = convert::diff_branding_document(&back, document);
        assert!(
            spellings_and_unknown_roles_only(&drift, Some(&back)),
            "drift {drift:?} between {back:?} and {document:?}"
        );
    }
}

/// Whether the drift names only colours and text roles this version does not know (`shown`
/// lacks them). Unknown roles are left out when a document is shown as a manifest's branding;
/// colours are shown as the server holds them and normalized when encoded again (`#1A73E8`,
/// `#fff`), so a colour the server holds in another spelling is drift (docs/reliability.md).
fn spellings_and_unknown_roles_only(
    drift: &[String],
    shown: Option<&v1::BrandingDocument>,
) -> bool {
    let empty = HashMap::new();
    let texts = shown.map_or(&empty, |d| &d.texts);
    drift.iter().all(|field| {
        field.starts_with("spec.branding.colors.")
            || field
                .strip_prefix("spec.branding.texts.")
                .is_some_and(|role| !texts.contains_key(role))
    })
}

fn identity_provider(held: v1::IdentityProvider) {
    let Some(spec) = held.spec.as_ref() else {
        return;
    };
    no_secret_shown(&held, &spec.upstream_client_secret);
    let declared = &declared().identity_provider;
    let Ok(shown) = convert::identity_provider_spec_from_server(spec, &declared.spec) else {
        return;
    };
    let back = convert::comparable_identity_provider_spec(&shown);
    let held_spec = v1::IdentityProviderSpec {
        upstream_client_secret: String::new(),
        ..spec.clone()
    };
    let drift = convert::diff_identity_provider(&back, &held_spec);
    assert!(
        drift.is_empty(),
        "drift {drift:?} between {back:?} and {held_spec:?}"
    );
}

fn organization(held: v1::Organization) {
    let Some(spec) = held.spec.as_ref() else {
        return;
    };
    let declared = &declared().organization;
    let Ok(shown) = convert::organization_spec_from_server(&held.slug, spec, &declared.spec) else {
        return;
    };
    if let Ok(back) = convert::organization_spec(&shown) {
        let drift = convert::diff_organization(&back, spec);
        assert!(
            spellings_and_unknown_roles_only(&drift, back.branding.as_ref()),
            "drift {drift:?} between {back:?} and {spec:?}"
        );
    }
}

fn change_event(event: v1::ChangeEvent) {
    let _ = wire::kind_of(event.kind());
    let Some(reference) = event.r#ref.as_ref() else {
        return;
    };
    // A server namespace is this cluster's when it maps back to the one it came from.
    for mapping in [
        NamespaceMapping::IDENTITY,
        NamespaceMapping::for_cluster(Some("prod-eu"), None),
    ] {
        if let Some(local) = mapping.from_server(&reference.namespace) {
            assert_eq!(mapping.to_server(local), reference.namespace);
        }
    }
}

fn server_info(info: v1::ServerInfo) {
    for grant in &info.grants {
        let entry = wire::grant_entry(grant);
        // Known operations survive the way back; unknown ones are dropped.
        let again = wire::grant_entry(&wire::grant(&entry));
        assert_eq!(again, entry);
    }
}
