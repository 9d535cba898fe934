//! Conversions between the resources and the AdminService messages: every spec field survives a
//! round trip, requests carry what the server needs, and diffs name the manifest's fields.
//!
//! The fully populated values below are struct literals without `..Default::default()`: a field
//! added to a spec does not compile here until it is given a value, and then the round trip fails
//! until it is converted.

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;
use kube::api::ObjectMeta;
use nauthera_client::convert::{self, ConvertError, SecretSource};
use nauthera_proto::v1 as proto;
use nauthera_proto::v1::{client_spec, precondition};
use nauthera_shared::resources::{
    Branding, BrandingSpec, ClientSecret, Colors, DeletionPolicy, FapiMode, GrantType,
    IdentityProvider, IdentityProviderKind, IdentityProviderSpec, LocalRef, Logo, LogoMediaType,
    OIDCClient, OIDCClientSpec, Organization, OrganizationSpec, ResponseType, SecretKeyRef,
    SignInBranding, Texts, TokenEndpointAuthMethod,
};

const ISSUER: &str = "https://login.example.test/acme";

fn meta(name: &str, generation: i64) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some("nauthera-examples".to_owned()),
        generation: Some(generation),
        ..ObjectMeta::default()
    }
}

fn png() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 13, b'I', b'H', b'D', b'R', 1, 2, 3]);
    bytes
}

/// Every field set, colours already normalized (the encoder normalizes them).
fn full_branding() -> SignInBranding {
    SignInBranding {
        logo: Some(Logo {
            data: base64::engine::general_purpose::STANDARD.encode(png()),
            media_type: LogoMediaType::Png,
        }),
        colors: Some(Colors {
            primary: Some("#1a73e8".into()),
            background: Some("#ffffff".into()),
            text: Some("#202124".into()),
            accent: Some("#fbbc04".into()),
            error: Some("#d93025".into()),
        }),
        texts: Some(Texts {
            title: Some("Sign in to ACME".into()),
            welcome: Some("Welcome back.\nUse your ACME account.".into()),
            footer: Some("ACME Corporation".into()),
            support: Some("help@example.test".into()),
        }),
        custom_css: Some(".card { border-radius: 12px; }".into()),
    }
}

fn full_client_spec(secret: Option<ClientSecret>) -> OIDCClientSpec {
    OIDCClientSpec {
        issuer: ISSUER.into(),
        display_name: Some("Billing".into()),
        redirect_uris: vec![
            "https://billing.example.test/cb".into(),
            "http://127.0.0.1:8400/cb".into(),
        ],
        post_logout_redirect_uris: vec!["https://billing.example.test/".into()],
        grant_types: GrantType::ALL.to_vec(),
        response_types: vec![ResponseType::Code],
        scopes: vec!["openid".into(), "profile".into(), "email".into()],
        token_endpoint_auth_method: TokenEndpointAuthMethod::ClientSecretPost,
        require_pkce: false,
        secret,
        deletion_policy: DeletionPolicy::Orphan,
        management_policy: Default::default(),
        branding_ref: Some(LocalRef {
            name: "acme-sign-in".into(),
        }),
    }
}

fn generated_secret() -> ClientSecret {
    ClientSecret {
        generate: true,
        secret_name: Some("billing-web-oidc".into()),
        secret_ref: None,
        rotation: None,
        template: None,
        restart: None,
    }
}

fn provided_secret() -> ClientSecret {
    ClientSecret {
        generate: false,
        secret_name: None,
        secret_ref: Some(SecretKeyRef {
            name: "billing-credentials".into(),
            key: "secret".into(),
        }),
        rotation: None,
        template: None,
        restart: None,
    }
}

fn full_provider_spec() -> IdentityProviderSpec {
    IdentityProviderSpec {
        issuer: ISSUER.into(),
        kind: IdentityProviderKind::Oidc,
        display_name: Some("Corporate SSO".into()),
        upstream_url: Some("https://sso.example.test".into()),
        client_id: Some("acme-login".into()),
        secret_ref: Some(SecretKeyRef {
            name: "sso".into(),
            key: "clientSecret".into(),
        }),
        scopes: vec!["openid".into(), "email".into()],
        claim_mapping: BTreeMap::from([
            ("email".into(), "mail".into()),
            ("name".into(), "cn".into()),
        ]),
        deletion_policy: DeletionPolicy::Orphan,
        management_policy: Default::default(),
    }
}

fn full_organization_spec() -> OrganizationSpec {
    OrganizationSpec {
        slug: "acme".into(),
        issuer: ISSUER.into(),
        display_name: Some("ACME Corporation".into()),
        branding: Some(full_branding()),
        fapi_mode: FapiMode::Fapi2Security,
        deletion_policy: DeletionPolicy::Delete,
        management_policy: Default::default(),
    }
}

// ---- round trips -----------------------------------------------------------------------------

#[test]
fn a_client_with_a_generated_secret_round_trips() {
    let declared = full_client_spec(Some(generated_secret()));
    let proto = convert::client_spec(&declared, None).unwrap();
    assert_eq!(
        proto.secret,
        Some(client_spec::Secret::GenerateSecret(true))
    );
    assert_eq!(
        convert::oidc_client_spec_from_server(&proto, &declared).unwrap(),
        declared
    );
}

#[test]
fn a_client_with_a_provided_secret_round_trips() {
    let declared = full_client_spec(Some(provided_secret()));
    let proto = convert::client_spec(&declared, Some("value-from-the-secret")).unwrap();
    assert_eq!(
        proto.secret,
        Some(client_spec::Secret::ProvidedSecret(
            "value-from-the-secret".into()
        ))
    );
    // The server never returns the value.
    let mut held = proto.clone();
    held.secret = Some(client_spec::Secret::ProvidedSecret(String::new()));
    assert_eq!(
        convert::oidc_client_spec_from_server(&held, &declared).unwrap(),
        declared
    );
}

#[test]
fn a_public_client_and_an_empty_one_round_trip() {
    let mut public = full_client_spec(None);
    public.token_endpoint_auth_method = TokenEndpointAuthMethod::None;
    let proto = convert::client_spec(&public, None).unwrap();
    assert_eq!(convert::secret_source(&proto), SecretSource::None);
    assert_eq!(
        convert::oidc_client_spec_from_server(&proto, &public).unwrap(),
        public
    );

    let minimal: OIDCClientSpec =
        serde_json::from_value(serde_json::json!({ "issuer": ISSUER })).unwrap();
    let proto = convert::client_spec(&minimal, None).unwrap();
    assert_eq!(
        convert::oidc_client_spec_from_server(&proto, &minimal).unwrap(),
        minimal
    );
}

#[test]
fn the_proto_client_spec_carries_every_field() {
    let proto = convert::client_spec(&full_client_spec(Some(generated_secret())), None).unwrap();
    assert_eq!(
        proto,
        proto::ClientSpec {
            display_name: "Billing".into(),
            redirect_uris: vec![
                "https://billing.example.test/cb".into(),
                "http://127.0.0.1:8400/cb".into()
            ],
            post_logout_redirect_uris: vec!["https://billing.example.test/".into()],
            grant_types: vec![
                "authorization_code".into(),
                "refresh_token".into(),
                "client_credentials".into(),
                "urn:ietf:params:oauth:grant-type:device_code".into(),
            ],
            response_types: vec!["code".into()],
            scopes: vec!["openid".into(), "profile".into(), "email".into()],
            token_endpoint_auth_method: "client_secret_post".into(),
            require_pkce: false,
            secret: Some(client_spec::Secret::GenerateSecret(true)),
            branding_ref: "acme-sign-in".into(),
        }
    );
}

#[test]
fn a_branding_round_trips() {
    let declared = full_branding();
    let document = convert::branding_document(&declared).unwrap();
    assert_eq!(document.logo, png());
    assert_eq!(document.logo_media_type, "image/png");
    assert_eq!(document.colors.len(), 5);
    assert_eq!(document.texts.len(), 4);
    assert_eq!(
        convert::sign_in_branding_from_document(&document).unwrap(),
        declared
    );
    let empty = SignInBranding::default();
    let document = convert::branding_document(&empty).unwrap();
    assert_eq!(document, proto::BrandingDocument::default());
    assert_eq!(
        convert::sign_in_branding_from_document(&document).unwrap(),
        empty
    );
}

#[test]
fn an_identity_provider_round_trips() {
    let declared = full_provider_spec();
    let proto = convert::identity_provider_spec(&declared, Some("upstream-value")).unwrap();
    assert_eq!(proto.upstream_client_secret, "upstream-value");
    assert_eq!(proto.kind(), proto::IdentityProviderKind::Oidc);
    let mut held = proto.clone();
    held.upstream_client_secret = String::new();
    assert_eq!(
        convert::identity_provider_spec_from_server(&held, &declared).unwrap(),
        declared
    );
    for kind in [
        IdentityProviderKind::Oidc,
        IdentityProviderKind::Github,
        IdentityProviderKind::Google,
        IdentityProviderKind::Microsoft,
        IdentityProviderKind::Saml,
    ] {
        let spec = IdentityProviderSpec {
            kind,
            ..full_provider_spec()
        };
        let proto = convert::identity_provider_spec(&spec, Some("x")).unwrap();
        assert_eq!(
            convert::identity_provider_spec_from_server(&proto, &spec).unwrap(),
            spec
        );
    }
}

#[test]
fn an_identity_provider_secret_must_be_passed_exactly_when_named() {
    let declared = full_provider_spec();
    assert!(matches!(
        convert::identity_provider_spec(&declared, None),
        Err(ConvertError::SecretValueMissing {
            field: "spec.secretRef"
        })
    ));
    let without = IdentityProviderSpec {
        secret_ref: None,
        ..full_provider_spec()
    };
    assert!(matches!(
        convert::identity_provider_spec(&without, Some("x")),
        Err(ConvertError::SecretValueUnused {
            field: "spec.secretRef"
        })
    ));
}

#[test]
fn an_organization_round_trips() {
    let declared = full_organization_spec();
    let proto = convert::organization_spec(&declared).unwrap();
    assert_eq!(proto.fapi_mode(), proto::FapiMode::Fapi2Security);
    assert_eq!(
        convert::organization_spec_from_server("acme", &proto, &declared).unwrap(),
        declared
    );
    for fapi_mode in [
        FapiMode::Disabled,
        FapiMode::Fapi1Advanced,
        FapiMode::Fapi2Security,
    ] {
        let spec = OrganizationSpec {
            fapi_mode,
            branding: None,
            ..full_organization_spec()
        };
        let proto = convert::organization_spec(&spec).unwrap();
        assert_eq!(
            convert::organization_spec_from_server("acme", &proto, &spec).unwrap(),
            spec
        );
    }
}

#[test]
fn an_unencodable_organization_branding_is_refused_with_its_field() {
    let mut spec = full_organization_spec();
    spec.branding
        .as_mut()
        .unwrap()
        .colors
        .as_mut()
        .unwrap()
        .accent = Some("blue".into());
    let error = convert::organization_spec(&spec).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("spec.branding.colors.accent: "),
        "{error}"
    );
}

#[test]
fn values_the_server_holds_but_this_version_cannot_show_are_named() {
    let mut document = convert::branding_document(&full_branding()).unwrap();
    document.logo_media_type = "image/gif".into();
    let error = convert::sign_in_branding_from_document(&document).unwrap_err();
    assert!(matches!(
        error,
        ConvertError::UnknownValue {
            field: "spec.branding.logo.mediaType",
            ..
        }
    ));
    let mut provider = convert::identity_provider_spec(&full_provider_spec(), Some("x")).unwrap();
    provider.kind = 0;
    assert!(matches!(
        convert::identity_provider_spec_from_server(&provider, &full_provider_spec()),
        Err(ConvertError::UnknownValue {
            field: "spec.kind",
            ..
        })
    ));
}

// ---- requests --------------------------------------------------------------------------------

#[test]
fn an_apply_client_request_carries_ref_generation_manager_and_precondition() {
    let client = OIDCClient {
        metadata: meta("billing-web", 7),
        spec: full_client_spec(Some(generated_secret())),
        status: None,
    };
    let request =
        convert::apply_client_request(&client, None, "nauthera-reconciler", None).unwrap();
    assert_eq!(
        request.r#ref,
        Some(proto::ObjectRef {
            issuer: ISSUER.into(),
            namespace: "nauthera-examples".into(),
            name: "billing-web".into(),
        })
    );
    assert_eq!(request.generation, 7);
    assert_eq!(request.manager, "nauthera-reconciler");
    assert!(!request.rotate_secret);
    assert_eq!(
        request.if_revision.unwrap().condition,
        Some(precondition::Condition::Absent(true))
    );
    let request = convert::apply_client_request(&client, None, "m", Some("r-12")).unwrap();
    assert_eq!(
        request.if_revision.unwrap().condition,
        Some(precondition::Condition::Revision("r-12".into()))
    );
}

#[test]
fn delete_requests_name_the_revision_last_written() {
    let client = OIDCClient::new("billing-web", full_client_spec(None));
    assert!(matches!(
        convert::delete_client_request(&client, "m", Some("r-1")),
        Err(ConvertError::MissingMetadata {
            kind: "OIDCClient",
            field: "namespace"
        })
    ));
    let client = OIDCClient {
        metadata: meta("billing-web", 1),
        ..client
    };
    let request = convert::delete_client_request(&client, "m", Some("r-1")).unwrap();
    assert_eq!(
        request.if_revision.unwrap().condition,
        Some(precondition::Condition::Revision("r-1".into()))
    );
    assert_eq!(
        convert::delete_client_request(&client, "m", None)
            .unwrap()
            .if_revision,
        None
    );
    assert_eq!(
        convert::get_client_request(&client)
            .unwrap()
            .r#ref
            .unwrap()
            .name,
        "billing-web"
    );
}

#[test]
fn branding_provider_and_organization_requests() {
    let branding = Branding {
        metadata: meta("acme-sign-in", 2),
        spec: BrandingSpec {
            issuer: ISSUER.into(),
            branding: full_branding(),
            deletion_policy: DeletionPolicy::Delete,
            management_policy: Default::default(),
        },
        status: None,
    };
    let request = convert::apply_branding_request(&branding, "m", Some("b-1")).unwrap();
    assert_eq!(request.generation, 2);
    assert_eq!(request.document.unwrap().logo, png());
    assert_eq!(request.r#ref.unwrap().name, "acme-sign-in");
    assert!(convert::get_branding_request(&branding).is_ok());
    assert!(
        convert::delete_branding_request(&branding, "m", Some("b-1"))
            .unwrap()
            .if_revision
            .is_some()
    );

    let provider = IdentityProvider {
        metadata: meta("sso", 3),
        spec: full_provider_spec(),
        status: None,
    };
    let request =
        convert::apply_identity_provider_request(&provider, Some("x"), "m", None).unwrap();
    assert_eq!(request.generation, 3);
    assert_eq!(request.spec.unwrap().upstream_client_id, "acme-login");
    assert!(convert::get_identity_provider_request(&provider).is_ok());
    assert!(convert::delete_identity_provider_request(&provider, "m", None).is_ok());

    let organization = Organization {
        metadata: meta("acme", 4),
        spec: full_organization_spec(),
        status: None,
    };
    let request = convert::apply_organization_request(&organization, "m", None).unwrap();
    assert_eq!(
        (
            request.slug.as_str(),
            request.namespace.as_str(),
            request.generation
        ),
        ("acme", "nauthera-examples", 4)
    );
    assert_eq!(
        convert::get_organization_request(&organization).slug,
        "acme"
    );
    let delete = convert::delete_organization_request(&organization, "m", Some("o-1")).unwrap();
    assert_eq!(delete.namespace, "nauthera-examples");
}

// ---- diffs -----------------------------------------------------------------------------------

#[test]
fn identical_specs_have_no_diff() {
    let client = convert::client_spec(&full_client_spec(Some(generated_secret())), None).unwrap();
    assert!(convert::diff_client(&client, &client).is_empty());
    let provider = convert::identity_provider_spec(&full_provider_spec(), Some("x")).unwrap();
    assert!(convert::diff_identity_provider(&provider, &provider).is_empty());
    let organization = convert::organization_spec(&full_organization_spec()).unwrap();
    assert!(convert::diff_organization(&organization, &organization).is_empty());
}

#[test]
fn a_client_diff_names_every_changed_field_and_ignores_order_and_the_secret_value() {
    let declared =
        convert::client_spec(&full_client_spec(Some(provided_secret())), Some("a")).unwrap();
    let mut held = declared.clone();
    held.redirect_uris.reverse();
    held.scopes.reverse();
    held.secret = Some(client_spec::Secret::ProvidedSecret(String::new()));
    assert!(
        convert::diff_client(&declared, &held).is_empty(),
        "order and secret value are not drift"
    );

    let changed = proto::ClientSpec {
        display_name: "Other".into(),
        redirect_uris: vec!["https://evil.example.test/cb".into()],
        post_logout_redirect_uris: vec![],
        grant_types: vec!["authorization_code".into()],
        response_types: vec![],
        scopes: vec!["openid".into()],
        token_endpoint_auth_method: "none".into(),
        require_pkce: true,
        secret: None,
        branding_ref: String::new(),
    };
    assert_eq!(
        convert::diff_client(&declared, &changed),
        [
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
        ]
    );
}

#[test]
fn comparable_specs_need_no_secret_and_match_what_the_server_returns() {
    let declared = full_client_spec(Some(provided_secret()));
    let sent = convert::client_spec(&declared, Some("value")).unwrap();
    let comparable = convert::comparable_client_spec(&declared);
    assert_eq!(
        comparable.secret,
        Some(client_spec::Secret::ProvidedSecret(String::new()))
    );
    assert_eq!(
        proto::ClientSpec {
            secret: None,
            ..comparable.clone()
        },
        proto::ClientSpec {
            secret: None,
            ..sent
        }
    );
    assert!(convert::diff_client(&comparable, &comparable).is_empty());
    let generated = full_client_spec(Some(generated_secret()));
    assert_eq!(
        convert::comparable_client_spec(&generated),
        convert::client_spec(&generated, None).unwrap()
    );

    let provider = full_provider_spec();
    let comparable = convert::comparable_identity_provider_spec(&provider);
    assert_eq!(comparable.upstream_client_secret, "");
    let sent = convert::identity_provider_spec(&provider, Some("value")).unwrap();
    assert_eq!(
        comparable,
        proto::IdentityProviderSpec {
            upstream_client_secret: String::new(),
            ..sent
        }
    );
}

#[test]
fn a_branding_diff_names_roles() {
    let declared = convert::branding_document(&full_branding()).unwrap();
    let mut held = declared.clone();
    held.logo.push(0);
    held.logo_media_type = "image/webp".into();
    held.colors.insert("primary".into(), "#000000".into());
    held.colors.remove("error");
    held.texts.insert("title".into(), "Hacked".into());
    held.custom_css = String::new();
    assert_eq!(
        convert::diff_branding_document(&declared, &held),
        [
            "spec.branding.logo.data",
            "spec.branding.logo.mediaType",
            "spec.branding.colors.error",
            "spec.branding.colors.primary",
            "spec.branding.texts.title",
            "spec.branding.customCss",
        ]
    );
}

#[test]
fn provider_and_organization_diffs_name_their_fields() {
    let declared = convert::identity_provider_spec(&full_provider_spec(), Some("x")).unwrap();
    let held = proto::IdentityProviderSpec {
        kind: proto::IdentityProviderKind::Saml.into(),
        display_name: String::new(),
        upstream_url: "https://other.example.test".into(),
        upstream_client_id: "other".into(),
        upstream_client_secret: String::new(),
        scopes: vec![],
        claim_mapping: HashMap::new(),
    };
    assert_eq!(
        convert::diff_identity_provider(&declared, &held),
        [
            "spec.kind",
            "spec.displayName",
            "spec.upstreamUrl",
            "spec.clientId",
            "spec.scopes",
            "spec.claimMapping"
        ]
    );

    let declared = convert::organization_spec(&full_organization_spec()).unwrap();
    let mut held = declared.clone();
    held.issuer = "https://login.example.test/other".into();
    held.display_name = String::new();
    held.branding.as_mut().unwrap().custom_css = String::new();
    held.fapi_mode = proto::FapiMode::Off.into();
    assert_eq!(
        convert::diff_organization(&declared, &held),
        [
            "spec.issuer",
            "spec.displayName",
            "spec.branding.customCss",
            "spec.fapiMode"
        ]
    );
    let mut no_branding = declared.clone();
    no_branding.branding = None;
    let mut empty_branding = declared;
    empty_branding.branding = Some(proto::BrandingDocument::default());
    assert!(convert::diff_organization(&no_branding, &empty_branding).is_empty());
}

/// Found by the `server_answers` fuzz target: a server that leaves `fapi_mode` unspecified (its
/// default, shown as `Disabled`) was drift from `fapiMode: Disabled`, for ever.
#[test]
fn an_unspecified_fapi_mode_is_no_drift_from_disabled() {
    let spec = OrganizationSpec {
        fapi_mode: FapiMode::Disabled,
        ..full_organization_spec()
    };
    let declared = convert::organization_spec(&spec).unwrap();
    let mut held = declared.clone();
    held.fapi_mode = proto::FapiMode::Unspecified.into();
    let shown = convert::organization_spec_from_server("acme", &held, &spec).unwrap();
    assert_eq!(shown.fapi_mode, FapiMode::Disabled);
    assert!(convert::diff_organization(&declared, &held).is_empty());
    held.fapi_mode = proto::FapiMode::Fapi1Advanced.into();
    assert_eq!(
        convert::diff_organization(&declared, &held),
        ["spec.fapiMode"]
    );
}

#[test]
fn the_examples_convert() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let read = |file: &str| -> Vec<serde_json::Value> {
        serde_saphyr::from_multiple(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap()
    };
    let find = |file: &str, kind: &str| {
        read(file)
            .into_iter()
            .find(|d| d["kind"] == kind)
            .unwrap_or_else(|| panic!("{file}: no {kind}"))
    };
    let client: OIDCClient =
        serde_json::from_value(find("oidcclient-generated-secret.yaml", "OIDCClient")).unwrap();
    assert!(convert::apply_client_request(&client, None, "m", None).is_ok());
    let client: OIDCClient =
        serde_json::from_value(find("oidcclient-secret-ref.yaml", "OIDCClient")).unwrap();
    assert!(convert::apply_client_request(&client, Some("v"), "m", None).is_ok());
    let client: OIDCClient =
        serde_json::from_value(find("oidcclient-public.yaml", "OIDCClient")).unwrap();
    assert!(convert::apply_client_request(&client, None, "m", None).is_ok());
    let branding: Branding = serde_json::from_value(find("branding.yaml", "Branding")).unwrap();
    let request = convert::apply_branding_request(&branding, "m", None).unwrap();
    assert_eq!(request.document.unwrap().colors["background"], "#ffffff");
    let provider: IdentityProvider =
        serde_json::from_value(find("identityprovider-github.yaml", "IdentityProvider")).unwrap();
    assert!(convert::apply_identity_provider_request(&provider, Some("v"), "m", None).is_ok());
    let organization: Organization =
        serde_json::from_value(find("organization.yaml", "Organization")).unwrap();
    assert!(convert::apply_organization_request(&organization, "m", None).is_ok());
}
