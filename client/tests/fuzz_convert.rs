//! Property-based fuzzing of the conversions to the contract (`nauthera_client::convert`: resource
//! specs to `nauthera_proto` messages, and what the server holds back to spec fields for the drift
//! comparison); see docs/fuzzing.md.
//!
//! Specs are generated with the types' own shapes (every field, any value: the conversions see
//! what decoding admitted, which need not have passed admission), metadata with and without name
//! and namespace, secret values passed or not, and server answers with values this version does
//! not know.
//!
//! Properties: no conversion panics; each either succeeds or returns an error whose message names
//! a field (and never a secret value); what the server holds after a write of a spec gives no
//! drift for that spec, also when the server reorders or repeats list entries; converting the
//! server's object back to a spec and converting again gives the same message; a change of one
//! field is reported as drift of exactly that field; requests carry the object's reference,
//! generation and preconditions.
//!
//! `NAUTHERA_FUZZ_CASES` sets the number of cases (64 by default); nothing is persisted.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::collections::HashMap;

use base64::Engine as _;
use kube::api::ObjectMeta;
use nauthera_client::convert::{self, ConvertError};
use nauthera_proto::v1 as proto;
use nauthera_proto::v1::{client_spec, precondition};
use nauthera_shared::resources::{
    Branding, BrandingSpec, ClientSecret, Colors, DeletionPolicy, FapiMode, GrantType,
    IdentityProvider, IdentityProviderKind, IdentityProviderSpec, LocalRef, Logo, LogoMediaType,
    OIDCClient, OIDCClientSpec, Organization, OrganizationSpec, ResponseType, SecretKeyRef,
    SignInBranding, Texts, TokenEndpointAuthMethod,
};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

fn config() -> Config {
    let cases = std::env::var("NAUTHERA_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.trim().parse().ok())
        .unwrap_or(64);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

/// Any string, mostly of the shape the field expects.
fn text(shape: &'static str) -> BoxedStrategy<String> {
    prop_oneof![
        6 => shape,
        1 => Just(String::new()),
        1 => any::<String>(),
        1 => "[\\x00-\\x1f\u{202e}\u{feff} a]{1,6}",
        1 => (200usize..3000).prop_map(|n| "ü".repeat(n)),
    ]
    .boxed()
}

fn maybe<T: std::fmt::Debug>(
    strategy: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop::option::weighted(0.6, strategy)
}

fn list(shape: &'static str) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(text(shape), 0..5)
}

const ISSUER: &str = "https://[a-z]{1,8}\\.example(/[a-z]{1,6})?";
const URI: &str = "(https://[a-z]{1,8}\\.example/[a-z]{0,6}|http://127\\.0\\.0\\.1:[0-9]{2,5}/cb)";
const NAME: &str = "[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?";
const WORDS: &str = "[A-Za-z][A-Za-z ]{0,20}";
const SCOPE: &str = "[a-z:_.]{1,12}";

fn secret_key_ref() -> impl Strategy<Value = SecretKeyRef> {
    (text(NAME), text("[-._a-zA-Z0-9]{1,12}")).prop_map(|(name, key)| SecretKeyRef { name, key })
}

fn client_secret() -> impl Strategy<Value = ClientSecret> {
    (any::<bool>(), maybe(text(NAME)), maybe(secret_key_ref())).prop_map(
        |(generate, secret_name, secret_ref)| ClientSecret {
            generate,
            secret_name,
            secret_ref,
            rotation: None,
            template: None,
            restart: None,
        },
    )
}

fn client_spec() -> BoxedStrategy<OIDCClientSpec> {
    (
        (
            text(ISSUER),
            maybe(text(WORDS)),
            list(URI),
            list(URI),
            prop::collection::vec(prop::sample::select(GrantType::ALL.to_vec()), 0..6),
            prop::collection::vec(prop::sample::select(ResponseType::ALL.to_vec()), 0..3),
        ),
        (
            list(SCOPE),
            prop::sample::select(TokenEndpointAuthMethod::ALL.to_vec()),
            any::<bool>(),
            maybe(client_secret()),
            prop::sample::select(vec![DeletionPolicy::Delete, DeletionPolicy::Orphan]),
            maybe(text(NAME).prop_map(|name| LocalRef { name })),
        ),
    )
        .prop_map(
            |(
                (
                    issuer,
                    display_name,
                    redirect_uris,
                    post_logout_redirect_uris,
                    grant_types,
                    response_types,
                ),
                (
                    scopes,
                    token_endpoint_auth_method,
                    require_pkce,
                    secret,
                    deletion_policy,
                    branding_ref,
                ),
            )| OIDCClientSpec {
                issuer,
                display_name,
                redirect_uris,
                post_logout_redirect_uris,
                grant_types,
                response_types,
                scopes,
                token_endpoint_auth_method,
                require_pkce,
                secret,
                deletion_policy,
                management_policy: Default::default(),
                branding_ref,
            },
        )
        .boxed()
}

fn provider_kind() -> impl Strategy<Value = IdentityProviderKind> {
    prop::sample::select(vec![
        IdentityProviderKind::Oidc,
        IdentityProviderKind::Github,
        IdentityProviderKind::Google,
        IdentityProviderKind::Microsoft,
        IdentityProviderKind::Saml,
    ])
}

fn provider_spec() -> BoxedStrategy<IdentityProviderSpec> {
    (
        text(ISSUER),
        provider_kind(),
        maybe(text(WORDS)),
        maybe(text(ISSUER)),
        maybe(text("[A-Za-z0-9.]{1,20}")),
        maybe(secret_key_ref()),
        list(SCOPE),
        prop::collection::btree_map(text("[a-z_]{1,10}"), text("[a-z_]{1,10}"), 0..5),
        prop::sample::select(vec![DeletionPolicy::Delete, DeletionPolicy::Orphan]),
    )
        .prop_map(
            |(
                issuer,
                kind,
                display_name,
                upstream_url,
                client_id,
                secret_ref,
                scopes,
                claim_mapping,
                deletion_policy,
            )| {
                IdentityProviderSpec {
                    issuer,
                    kind,
                    display_name,
                    upstream_url,
                    client_id,
                    secret_ref,
                    scopes,
                    claim_mapping,
                    deletion_policy,
                    management_policy: Default::default(),
                }
            },
        )
        .boxed()
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

/// A branding that mostly encodes, sometimes not.
fn branding() -> BoxedStrategy<SignInBranding> {
    let logo = prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..32).prop_map(|tail| Logo {
            data: base64::engine::general_purpose::STANDARD.encode([PNG, &tail].concat()),
            media_type: LogoMediaType::Png,
        }),
        2 => Just(Logo {
            data: base64::engine::general_purpose::STANDARD
                .encode("<svg xmlns=\"http://www.w3.org/2000/svg\"><rect fill=\"url(#g)\"/></svg>"),
            media_type: LogoMediaType::Svg,
        }),
        1 => (text("[A-Za-z0-9+/=]{0,12}"), prop::sample::select(LogoMediaType::ALL.to_vec()))
            .prop_map(|(data, media_type)| Logo { data, media_type }),
    ];
    let color = || maybe(text("#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})"));
    let colors = (color(), color(), color(), color(), color()).prop_map(
        |(primary, background, text, accent, error)| Colors {
            primary,
            background,
            text,
            accent,
            error,
        },
    );
    let line = || maybe(text("[A-Za-z][A-Za-z ]{0,30}"));
    let texts =
        (line(), line(), line(), line()).prop_map(|(title, welcome, footer, support)| Texts {
            title,
            welcome,
            footer,
            support,
        });
    (
        maybe(logo),
        maybe(colors),
        maybe(texts),
        maybe(text("\\.card\\{ ?color: ?#[0-9a-f]{3} ?\\}")),
    )
        .prop_map(|(logo, colors, texts, custom_css)| SignInBranding {
            logo,
            colors,
            texts,
            custom_css,
        })
        .boxed()
}

fn fapi_mode() -> impl Strategy<Value = FapiMode> {
    prop::sample::select(vec![
        FapiMode::Disabled,
        FapiMode::Fapi1Advanced,
        FapiMode::Fapi2Security,
    ])
}

fn organization_spec() -> BoxedStrategy<OrganizationSpec> {
    (
        text(NAME),
        text(ISSUER),
        maybe(text(WORDS)),
        maybe(branding()),
        fapi_mode(),
        prop::sample::select(vec![DeletionPolicy::Delete, DeletionPolicy::Orphan]),
    )
        .prop_map(
            |(slug, issuer, display_name, branding, fapi_mode, deletion_policy)| OrganizationSpec {
                slug,
                issuer,
                display_name,
                branding,
                fapi_mode,
                deletion_policy,
                management_policy: Default::default(),
            },
        )
        .boxed()
}

fn meta() -> impl Strategy<Value = ObjectMeta> {
    (maybe(text(NAME)), maybe(text(NAME)), maybe(any::<i64>())).prop_map(
        |(name, namespace, generation)| ObjectMeta {
            name,
            namespace,
            generation,
            ..ObjectMeta::default()
        },
    )
}

/// A secret value: distinctive, so that a message quoting it is found.
fn secret_value() -> impl Strategy<Value = Option<String>> {
    maybe("s3cret-[a-z0-9]{12}")
}

fn revision() -> impl Strategy<Value = Option<String>> {
    maybe(text("[0-9a-f]{1,12}"))
}

/// Shuffles and repeats the entries of a list, as a server may.
fn reordered(items: &[String], seed: &[Index]) -> Vec<String> {
    let mut out = items.to_vec();
    for (i, index) in seed.iter().enumerate() {
        if out.is_empty() {
            break;
        }
        let j = index.index(out.len());
        if i % 3 == 2 {
            out.push(out[j].clone());
        } else {
            out.swap(0, j);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/// A conversion error names a field of the manifest and never a secret value.
fn check_error(error: &ConvertError, secret: Option<&str>) -> Result<(), TestCaseError> {
    let message = error.to_string();
    prop_assert!(
        message.contains("spec.") || message.contains("metadata."),
        "the error names no field: {message}"
    );
    if let Some(secret) = secret {
        prop_assert!(
            !message.contains(secret),
            "the error carries the secret: {message}"
        );
    }
    Ok(())
}

/// The client as the server holds it after a write: the provided secret is never returned.
fn held_client(mut sent: proto::ClientSpec, blank: bool) -> proto::ClientSpec {
    if let Some(client_spec::Secret::ProvidedSecret(_)) = sent.secret {
        sent.secret = Some(if blank {
            client_spec::Secret::ProvidedSecret(String::new())
        } else {
            client_spec::Secret::GenerateSecret(false)
        });
    }
    sent
}

fn check_precondition(
    precondition: Option<&proto::Precondition>,
    revision: Option<&str>,
) -> Result<(), TestCaseError> {
    let expected = match revision {
        Some(revision) => precondition::Condition::Revision(revision.to_owned()),
        None => precondition::Condition::Absent(true),
    };
    prop_assert_eq!(
        precondition.and_then(|p| p.condition.clone()),
        Some(expected)
    );
    Ok(())
}

fn check_ref(
    reference: Option<&proto::ObjectRef>,
    issuer: &str,
    meta: &ObjectMeta,
) -> Result<(), TestCaseError> {
    let reference = reference.expect("a request carries its reference");
    prop_assert_eq!(&reference.issuer, issuer);
    prop_assert_eq!(Some(&reference.namespace), meta.namespace.as_ref());
    prop_assert_eq!(Some(&reference.name), meta.name.as_ref());
    Ok(())
}

fn expect_missing_metadata<T: std::fmt::Debug>(
    result: &Result<T, ConvertError>,
    meta: &ObjectMeta,
) -> Result<bool, TestCaseError> {
    let missing = meta.name.is_none() || meta.namespace.is_none();
    if missing {
        match result {
            Err(error @ ConvertError::MissingMetadata { .. }) => check_error(error, None)?,
            other => prop_assert!(false, "metadata is missing, yet {other:?}"),
        }
    }
    Ok(missing)
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// The fields `diff_client` compares, and a change of each.
const CLIENT_CHANGES: [&str; 10] = [
    "spec.displayName",
    "spec.redirectUris",
    "spec.postLogoutRedirectUris",
    "spec.grantTypes",
    "spec.responseTypes",
    "spec.scopes",
    "spec.tokenEndpointAuthMethod",
    "spec.requirePkce",
    "spec.secret",
    "spec.brandingRef",
];

fn change_client(held: &mut proto::ClientSpec, field: &str) {
    match field {
        "spec.displayName" => held.display_name.push('x'),
        "spec.redirectUris" => held.redirect_uris.push("https://other.example/cb".into()),
        "spec.postLogoutRedirectUris" => held
            .post_logout_redirect_uris
            .push("https://o.example".into()),
        "spec.grantTypes" => held.grant_types.push("implicit".into()),
        "spec.responseTypes" => held.response_types.push("token".into()),
        "spec.scopes" => held.scopes.push("other scope".into()),
        "spec.tokenEndpointAuthMethod" => held.token_endpoint_auth_method.push('x'),
        "spec.requirePkce" => held.require_pkce = !held.require_pkce,
        "spec.secret" => {
            held.secret = match held.secret {
                None => Some(client_spec::Secret::GenerateSecret(true)),
                Some(_) => None,
            }
        }
        _ => held.branding_ref.push('x'),
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn clients_convert_and_what_the_server_holds_shows_no_drift(
        spec in client_spec(),
        meta in meta(),
        secret in secret_value(),
        revision in revision(),
        blank in any::<bool>(),
        seed in prop::collection::vec(any::<Index>(), 0..8),
        change in prop::sample::select(CLIENT_CHANGES.to_vec()),
    ) {
        let wants_secret = spec.secret.as_ref().is_some_and(|s| s.secret_ref.is_some());
        let sent = convert::client_spec(&spec, secret.as_deref());
        let sent = match sent {
            Ok(sent) => {
                prop_assert_eq!(wants_secret, secret.is_some());
                sent
            }
            Err(error) => {
                prop_assert_ne!(wants_secret, secret.is_some(), "refused: {}", error);
                check_error(&error, secret.as_deref())?;
                return Ok(());
            }
        };
        prop_assert_eq!(&sent.display_name, &spec.display_name.clone().unwrap_or_default());
        prop_assert_eq!(&sent.redirect_uris, &spec.redirect_uris);
        prop_assert_eq!(&sent.scopes, &spec.scopes);
        if let Some(client_spec::Secret::ProvidedSecret(value)) = &sent.secret {
            prop_assert_eq!(Some(value), secret.as_ref());
        }
        let declared = convert::comparable_client_spec(&spec);
        let mut held = held_client(sent, blank);
        prop_assert_eq!(convert::diff_client(&declared, &held), Vec::<String>::new());
        // The server may reorder lists and repeat entries: not drift either.
        held.redirect_uris = reordered(&held.redirect_uris, &seed);
        held.grant_types = reordered(&held.grant_types, &seed);
        held.scopes = reordered(&held.scopes, &seed);
        prop_assert_eq!(convert::diff_client(&declared, &held), Vec::<String>::new());
        // Shown as a spec and converted again: the same message.
        let shown = convert::oidc_client_spec_from_server(&held, &spec)
            .map_err(|e| TestCaseError::fail(format!("the server's own answer cannot be shown: {e}")))?;
        prop_assert_eq!(convert::diff_client(&declared, &convert::comparable_client_spec(&shown)), Vec::<String>::new());
        prop_assert_eq!(shown.issuer.as_str(), spec.issuer.as_str());
        prop_assert_eq!(shown.deletion_policy, spec.deletion_policy);
        // One field changed on the server is drift of that field, and only that one.
        let mut changed = held.clone();
        change_client(&mut changed, change);
        prop_assert_eq!(convert::diff_client(&declared, &changed), vec![change.to_owned()]);
        // What the server holds and this version cannot show is named.
        if let Err(error) = convert::oidc_client_spec_from_server(&changed, &spec) {
            check_error(&error, None)?;
        }
        // The requests.
        let client = OIDCClient { metadata: meta.clone(), spec: spec.clone(), status: None };
        let apply = convert::apply_client_request(&client, secret.as_deref(), "fuzz", revision.as_deref());
        if !expect_missing_metadata(&apply, &meta)? {
            let apply = apply.map_err(|e| TestCaseError::fail(e.to_string()))?;
            check_ref(apply.r#ref.as_ref(), &spec.issuer, &meta)?;
            prop_assert_eq!(apply.generation, meta.generation.unwrap_or(0));
            check_precondition(apply.if_revision.as_ref(), revision.as_deref())?;
            let delete = convert::delete_client_request(&client, "fuzz", revision.as_deref())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(delete.if_revision.is_some(), revision.is_some());
            prop_assert!(convert::get_client_request(&client).is_ok());
        }
    }

    #[test]
    fn identity_providers_convert_and_show_no_drift(
        spec in provider_spec(),
        meta in meta(),
        secret in secret_value(),
        revision in revision(),
        seed in prop::collection::vec(any::<Index>(), 0..8),
        unknown_kind in prop_oneof![Just(0i32), 6i32..1000, Just(i32::MIN), Just(-1)],
    ) {
        let sent = match convert::identity_provider_spec(&spec, secret.as_deref()) {
            Ok(sent) => {
                prop_assert_eq!(spec.secret_ref.is_some(), secret.is_some());
                prop_assert_eq!(&sent.upstream_client_secret, &secret.clone().unwrap_or_default());
                sent
            }
            Err(error) => {
                prop_assert_ne!(spec.secret_ref.is_some(), secret.is_some(), "refused: {}", error);
                check_error(&error, secret.as_deref())?;
                return Ok(());
            }
        };
        let declared = convert::comparable_identity_provider_spec(&spec);
        let mut held = sent.clone();
        held.upstream_client_secret.clear();
        held.scopes = reordered(&held.scopes, &seed);
        prop_assert_eq!(convert::diff_identity_provider(&declared, &held), Vec::<String>::new());
        let shown = convert::identity_provider_spec_from_server(&held, &spec)
            .map_err(|e| TestCaseError::fail(format!("the server's own answer cannot be shown: {e}")))?;
        prop_assert_eq!(
            convert::diff_identity_provider(&declared, &convert::comparable_identity_provider_spec(&shown)),
            Vec::<String>::new()
        );
        prop_assert_eq!(shown.kind, spec.kind);
        prop_assert_eq!(&shown.claim_mapping, &spec.claim_mapping);
        // A kind this version does not know is named.
        held.kind = unknown_kind;
        match convert::identity_provider_spec_from_server(&held, &spec) {
            Err(error) => {
                check_error(&error, None)?;
                prop_assert!(error.to_string().contains("spec.kind"));
            }
            Ok(shown) => prop_assert!(false, "kind {} shown as {:?}", unknown_kind, shown.kind),
        }
        let provider = IdentityProvider { metadata: meta.clone(), spec: spec.clone(), status: None };
        let apply = convert::apply_identity_provider_request(&provider, secret.as_deref(), "fuzz", revision.as_deref());
        if !expect_missing_metadata(&apply, &meta)? {
            let apply = apply.map_err(|e| TestCaseError::fail(e.to_string()))?;
            check_ref(apply.r#ref.as_ref(), &spec.issuer, &meta)?;
            check_precondition(apply.if_revision.as_ref(), revision.as_deref())?;
        }
    }

    #[test]
    fn brandings_convert_and_the_server_document_shows_no_drift(
        branding in branding(),
        meta in meta(),
        revision in revision(),
    ) {
        let document = match convert::branding_document(&branding) {
            Ok(document) => document,
            Err(error) => {
                prop_assert!(matches!(error, ConvertError::Branding(_)), "{:?}", error);
                check_error(&error, None)?;
                prop_assert!(error.to_string().starts_with("spec.branding."), "{}", error);
                return Ok(());
            }
        };
        prop_assert_eq!(convert::diff_branding_document(&document, &document.clone()), Vec::<String>::new());
        let shown = convert::sign_in_branding_from_document(&document)
            .map_err(|e| TestCaseError::fail(format!("the server's own document cannot be shown: {e}")))?;
        let again = convert::branding_document(&shown)
            .map_err(|e| TestCaseError::fail(format!("what the server holds, shown, does not encode: {e}")))?;
        prop_assert_eq!(&again, &document);
        prop_assert_eq!(convert::diff_branding_document(&document, &again), Vec::<String>::new());
        let resource = Branding {
            metadata: meta.clone(),
            spec: BrandingSpec {
                issuer: "https://login.example.test/acme".into(),
                branding: branding.clone(),
                deletion_policy: DeletionPolicy::Delete,
                management_policy: Default::default(),
            },
            status: None,
        };
        let apply = convert::apply_branding_request(&resource, "fuzz", revision.as_deref());
        if !expect_missing_metadata(&apply, &meta)? {
            let apply = apply.map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(apply.document.as_ref(), Some(&document));
            check_precondition(apply.if_revision.as_ref(), revision.as_deref())?;
        }
    }

    /// Whatever document the server holds (another writer, a newer server) can be shown or is
    /// refused with a field, and every difference from the declared one is named.
    #[test]
    fn any_server_document_is_shown_or_named(
        logo in prop::collection::vec(any::<u8>(), 0..16),
        media_type in prop_oneof![
            Just(String::new()),
            prop::sample::select(LogoMediaType::ALL.map(|m| m.as_str().to_owned()).to_vec()),
            any::<String>(),
        ],
        colors in prop::collection::hash_map(
            prop_oneof![prop::sample::select(vec!["primary", "text", "error"]).prop_map(String::from), any::<String>()],
            any::<String>(),
            0..4,
        ),
        texts in prop::collection::hash_map(
            prop_oneof![prop::sample::select(vec!["title", "footer"]).prop_map(String::from), any::<String>()],
            any::<String>(),
            0..4,
        ),
        custom_css in any::<String>(),
        declared in branding(),
    ) {
        let held = proto::BrandingDocument { logo, logo_media_type: media_type, colors, texts, custom_css };
        match convert::sign_in_branding_from_document(&held) {
            Ok(shown) => {
                // Converting what is shown back gives the held values of the known roles.
                if let Ok(again) = convert::branding_document(&shown) {
                    let known: HashMap<String, String> = held
                        .colors
                        .iter()
                        .filter(|(role, _)| ["primary", "background", "text", "accent", "error"].contains(&role.as_str()))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    prop_assert_eq!(again.logo, held.logo.clone());
                    prop_assert_eq!(again.colors.len(), known.len());
                }
            }
            Err(error) => {
                check_error(&error, None)?;
                prop_assert!(error.to_string().contains("spec.branding.logo.mediaType"), "{}", error);
            }
        }
        if let Ok(declared) = convert::branding_document(&declared) {
            let differs = convert::diff_branding_document(&declared, &held);
            prop_assert_eq!(differs.is_empty(), declared == held);
            for field in differs {
                prop_assert!(field.starts_with("spec.branding."), "{}", field);
            }
        }
    }

    #[test]
    fn organizations_convert_and_show_no_drift(
        spec in organization_spec(),
        meta in meta(),
        revision in revision(),
        unknown_mode in prop_oneof![4i32..1000, Just(i32::MIN), Just(-1)],
    ) {
        let sent = match convert::organization_spec(&spec) {
            Ok(sent) => sent,
            Err(error) => {
                prop_assert!(matches!(error, ConvertError::Branding(_)), "{:?}", error);
                check_error(&error, None)?;
                return Ok(());
            }
        };
        prop_assert_eq!(&sent.issuer, &spec.issuer);
        prop_assert_eq!(sent.branding.is_some(), spec.branding.is_some());
        prop_assert_eq!(convert::diff_organization(&sent, &sent.clone()), Vec::<String>::new());
        let shown = convert::organization_spec_from_server(&spec.slug, &sent, &spec)
            .map_err(|e| TestCaseError::fail(format!("the server's own answer cannot be shown: {e}")))?;
        prop_assert_eq!(&shown.slug, &spec.slug);
        prop_assert_eq!(shown.fapi_mode, spec.fapi_mode);
        prop_assert_eq!(shown.deletion_policy, spec.deletion_policy);
        let again = convert::organization_spec(&shown)
            .map_err(|e| TestCaseError::fail(format!("what the server holds, shown, does not convert: {e}")))?;
        prop_assert_eq!(&again, &sent);
        prop_assert_eq!(convert::diff_organization(&sent, &again), Vec::<String>::new());
        // No branding and an empty one are the same.
        let mut empty = sent.clone();
        empty.branding = match &sent.branding {
            Some(document) if *document == proto::BrandingDocument::default() => None,
            None => Some(proto::BrandingDocument::default()),
            Some(document) => Some(document.clone()),
        };
        prop_assert_eq!(convert::diff_organization(&sent, &empty), Vec::<String>::new());
        let mut unknown = sent.clone();
        unknown.fapi_mode = unknown_mode;
        match convert::organization_spec_from_server(&spec.slug, &unknown, &spec) {
            Err(error) => {
                check_error(&error, None)?;
                prop_assert!(error.to_string().contains("spec.fapiMode"));
            }
            Ok(shown) => prop_assert!(false, "FAPI mode {} shown as {:?}", unknown_mode, shown.fapi_mode),
        }
        prop_assert_eq!(convert::diff_organization(&sent, &unknown), vec!["spec.fapiMode".to_owned()]);
        let organization = Organization { metadata: meta.clone(), spec: spec.clone(), status: None };
        let apply = convert::apply_organization_request(&organization, "fuzz", revision.as_deref());
        match (&apply, &meta.namespace) {
            (Ok(apply), Some(namespace)) => {
                prop_assert_eq!(&apply.namespace, namespace);
                prop_assert_eq!(&apply.slug, &spec.slug);
                check_precondition(apply.if_revision.as_ref(), revision.as_deref())?;
            }
            (Err(error @ ConvertError::MissingMetadata { .. }), None) => check_error(error, None)?,
            (other, namespace) => prop_assert!(false, "namespace {namespace:?}: {other:?}"),
        }
        prop_assert_eq!(convert::get_organization_request(&organization).slug, spec.slug);
    }
}

#[test]
fn the_changes_cover_every_compared_field() {
    let spec = OIDCClientSpec {
        issuer: "https://login.example.test/acme".into(),
        display_name: None,
        redirect_uris: Vec::new(),
        post_logout_redirect_uris: Vec::new(),
        grant_types: Vec::new(),
        response_types: Vec::new(),
        scopes: Vec::new(),
        token_endpoint_auth_method: TokenEndpointAuthMethod::None,
        require_pkce: true,
        secret: None,
        deletion_policy: DeletionPolicy::Delete,
        management_policy: Default::default(),
        branding_ref: None,
    };
    let declared = convert::comparable_client_spec(&spec);
    let mut everything = declared.clone();
    for field in CLIENT_CHANGES {
        change_client(&mut everything, field);
    }
    assert_eq!(
        convert::diff_client(&declared, &everything),
        CLIENT_CHANGES.map(String::from).to_vec()
    );
}
