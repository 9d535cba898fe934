//! The server's field rules, as pure functions of the declared state.

use nauthera_proto::v1::{
    BrandingDocument, ClientSpec, FapiMode, FieldViolation, IdentityProviderKind,
    IdentityProviderSpec, OrganizationSpec, client_spec,
};

use crate::refusal::violation;

pub use nauthera_shared::is_reserved_client_name;

pub const GRANT_AUTHORIZATION_CODE: &str = "authorization_code";
pub const GRANT_REFRESH_TOKEN: &str = "refresh_token";
pub const GRANT_CLIENT_CREDENTIALS: &str = "client_credentials";
pub const GRANT_DEVICE_CODE: &str = "urn:ietf:params:oauth:grant-type:device_code";
pub const GRANT_IMPLICIT: &str = "implicit";

const GRANT_TYPES: [&str; 5] = [
    GRANT_AUTHORIZATION_CODE,
    GRANT_REFRESH_TOKEN,
    GRANT_CLIENT_CREDENTIALS,
    GRANT_DEVICE_CODE,
    GRANT_IMPLICIT,
];
const RESPONSE_TYPES: [&str; 5] = [
    "code",
    "id_token",
    "token",
    "id_token token",
    "code id_token",
];
const AUTH_METHODS: [&str; 4] = [
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
    "none",
];

/// The token endpoint auth method, `client_secret_basic` when none is declared.
pub fn auth_method(spec: &ClientSpec) -> &str {
    if spec.token_endpoint_auth_method.is_empty() {
        "client_secret_basic"
    } else {
        &spec.token_endpoint_auth_method
    }
}

/// Whether the client authenticates with a shared secret.
pub fn uses_secret(spec: &ClientSpec) -> bool {
    matches!(
        auth_method(spec),
        "client_secret_basic" | "client_secret_post"
    )
}

/// Checks one redirect URI: absolute, no fragment, https except http on a loopback host.
fn redirect_uri_problem(uri: &str) -> Option<String> {
    let parsed = match url::Url::parse(uri) {
        Ok(parsed) => parsed,
        Err(error) => return Some(format!("not an absolute URI: {error}")),
    };
    if parsed.fragment().is_some() {
        return Some("must not contain a fragment".to_owned());
    }
    match parsed.scheme() {
        "https" => None,
        "http" if is_loopback(&parsed) => None,
        "http" => {
            Some("must use https (http only for loopback: 127.0.0.1, [::1], localhost)".to_owned())
        }
        other => Some(format!("scheme {other} is not allowed; use https")),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(domain)) => domain == "localhost",
        Some(url::Host::Ipv4(address)) => address.is_loopback(),
        Some(url::Host::Ipv6(address)) => address.is_loopback(),
        None => false,
    }
}

/// The `INVALID_FIELD` objections to a client spec.
pub fn client_violations(spec: &ClientSpec) -> Vec<FieldViolation> {
    let mut violations = Vec::new();
    for (field, uris) in [
        ("spec.redirect_uris", &spec.redirect_uris),
        (
            "spec.post_logout_redirect_uris",
            &spec.post_logout_redirect_uris,
        ),
    ] {
        for (index, uri) in uris.iter().enumerate() {
            if let Some(problem) = redirect_uri_problem(uri) {
                violations.push(violation(format!("{field}[{index}]"), problem));
            }
        }
    }
    for (index, grant) in spec.grant_types.iter().enumerate() {
        if !GRANT_TYPES.contains(&grant.as_str()) {
            violations.push(violation(
                format!("spec.grant_types[{index}]"),
                format!("unknown grant type {grant:?}"),
            ));
        }
    }
    for (index, response) in spec.response_types.iter().enumerate() {
        if !RESPONSE_TYPES.contains(&response.as_str()) {
            violations.push(violation(
                format!("spec.response_types[{index}]"),
                format!("unknown response type {response:?}"),
            ));
        }
    }
    let method = auth_method(spec);
    if !AUTH_METHODS.contains(&method) {
        violations.push(violation(
            "spec.token_endpoint_auth_method",
            format!(
                "unknown method {method:?}; use one of {}",
                AUTH_METHODS.join(", ")
            ),
        ));
    }
    let has_grant = |grant: &str| spec.grant_types.iter().any(|g| g == grant);
    let has_response = |response: &str| spec.response_types.iter().any(|r| r == response);
    if has_grant(GRANT_AUTHORIZATION_CODE) {
        if !spec
            .response_types
            .iter()
            .any(|r| r.split(' ').any(|t| t == "code"))
        {
            violations.push(violation(
                "spec.response_types",
                "authorization_code needs the response type code",
            ));
        }
        if spec.redirect_uris.is_empty() {
            violations.push(violation(
                "spec.redirect_uris",
                "authorization_code needs at least one redirect URI",
            ));
        }
    } else if has_response("code") || has_response("code id_token") {
        violations.push(violation(
            "spec.grant_types",
            "the response type code needs the grant type authorization_code",
        ));
    }
    if has_grant(GRANT_IMPLICIT) && spec.redirect_uris.is_empty() {
        violations.push(violation(
            "spec.redirect_uris",
            "implicit needs at least one redirect URI",
        ));
    }
    if has_grant(GRANT_CLIENT_CREDENTIALS) && method == "none" {
        violations.push(violation(
            "spec.token_endpoint_auth_method",
            "client_credentials needs a confidential client (not none)",
        ));
    }
    if has_grant(GRANT_REFRESH_TOKEN)
        && !(has_grant(GRANT_AUTHORIZATION_CODE) || has_grant(GRANT_DEVICE_CODE))
    {
        violations.push(violation(
            "spec.grant_types",
            "refresh_token needs authorization_code or device_code",
        ));
    }
    match &spec.secret {
        Some(client_spec::Secret::ProvidedSecret(secret)) if secret.is_empty() => {
            violations.push(violation("spec.provided_secret", "must not be empty"))
        }
        Some(client_spec::Secret::ProvidedSecret(_)) if method == "none" => {
            violations.push(violation(
                "spec.provided_secret",
                "a public client (none) has no secret",
            ))
        }
        None | Some(client_spec::Secret::GenerateSecret(false)) if uses_secret(spec) => violations
            .push(violation(
                "spec.secret",
                format!("{method} needs generate_secret or provided_secret"),
            )),
        _ => {}
    }
    violations
}

/// The `FAPI_REQUIREMENTS` objections to a client spec in an organization of `mode`.
pub fn fapi_violations(spec: &ClientSpec, mode: FapiMode) -> Vec<FieldViolation> {
    if matches!(mode, FapiMode::Unspecified | FapiMode::Off) {
        return Vec::new();
    }
    let mut violations = Vec::new();
    if auth_method(spec) != "private_key_jwt" {
        violations.push(violation(
            "spec.token_endpoint_auth_method",
            "FAPI requires private_key_jwt",
        ));
    }
    if !spec.require_pkce {
        violations.push(violation("spec.require_pkce", "FAPI requires PKCE"));
    }
    for (index, uri) in spec.redirect_uris.iter().enumerate() {
        if !uri.starts_with("https://") {
            violations.push(violation(
                format!("spec.redirect_uris[{index}]"),
                "FAPI requires https redirect URIs",
            ));
        }
    }
    for (index, grant) in spec.grant_types.iter().enumerate() {
        if grant == GRANT_IMPLICIT {
            violations.push(violation(
                format!("spec.grant_types[{index}]"),
                "FAPI forbids the implicit grant",
            ));
        }
        if grant == GRANT_REFRESH_TOKEN && mode == FapiMode::Fapi2Security {
            violations.push(violation(
                format!("spec.grant_types[{index}]"),
                "FAPI 2.0 forbids refresh_token without sender constraint",
            ));
        }
    }
    for (index, response) in spec.response_types.iter().enumerate() {
        if response.split(' ').any(|t| t == "token") {
            violations.push(violation(
                format!("spec.response_types[{index}]"),
                "FAPI forbids access tokens from the authorization endpoint",
            ));
        }
    }
    violations
}

const COLOR_ROLES: [&str; 5] = ["primary", "background", "text", "accent", "error"];
const TEXT_ROLES: [&str; 4] = ["title", "welcome", "footer", "support"];
const LOGO_TYPES: [&str; 4] = ["image/png", "image/svg+xml", "image/jpeg", "image/webp"];
/// The claims the server issues, which an identity provider's claim mapping may fill.
const SERVER_CLAIMS: [&str; 10] = [
    "sub",
    "email",
    "email_verified",
    "name",
    "given_name",
    "family_name",
    "preferred_username",
    "picture",
    "locale",
    "groups",
];

fn is_hex_color(value: &str) -> bool {
    value.len() == 7 && value.starts_with('#') && value[1..].chars().all(|c| c.is_ascii_hexdigit())
}

/// The objections to a branding document, with fields under `prefix` (`document` or
/// `spec.branding`).
pub fn branding_violations(document: &BrandingDocument, prefix: &str) -> Vec<FieldViolation> {
    let mut violations = Vec::new();
    if !document.logo.is_empty() && !LOGO_TYPES.contains(&document.logo_media_type.as_str()) {
        violations.push(violation(
            format!("{prefix}.logo_media_type"),
            format!("use one of {}", LOGO_TYPES.join(", ")),
        ));
    }
    let mut colors: Vec<_> = document.colors.iter().collect();
    colors.sort();
    for (role, color) in colors {
        if !COLOR_ROLES.contains(&role.as_str()) {
            violations.push(violation(
                format!("{prefix}.colors[{role}]"),
                format!("unknown role; use one of {}", COLOR_ROLES.join(", ")),
            ));
        } else if !is_hex_color(color) {
            violations.push(violation(
                format!("{prefix}.colors[{role}]"),
                "must be #rrggbb",
            ));
        }
    }
    let mut text_roles: Vec<_> = document.texts.keys().collect();
    text_roles.sort();
    for role in text_roles {
        if !TEXT_ROLES.contains(&role.as_str()) {
            violations.push(violation(
                format!("{prefix}.texts[{role}]"),
                format!("unknown role; use one of {}", TEXT_ROLES.join(", ")),
            ));
        }
    }
    violations
}

/// The objections to an identity provider spec.
pub fn identity_provider_violations(spec: &IdentityProviderSpec) -> Vec<FieldViolation> {
    let mut violations = Vec::new();
    let kind = IdentityProviderKind::try_from(spec.kind).unwrap_or_default();
    if kind == IdentityProviderKind::Unspecified {
        violations.push(violation("spec.kind", "must be set"));
    }
    if matches!(
        kind,
        IdentityProviderKind::Oidc | IdentityProviderKind::Saml
    ) && !spec.upstream_url.starts_with("https://")
    {
        violations.push(violation(
            "spec.upstream_url",
            "oidc and saml need an https upstream URL",
        ));
    }
    if kind != IdentityProviderKind::Saml && spec.upstream_client_id.is_empty() {
        violations.push(violation("spec.upstream_client_id", "must not be empty"));
    }
    let mut claims: Vec<_> = spec.claim_mapping.keys().collect();
    claims.sort();
    for claim in claims {
        if !SERVER_CLAIMS.contains(&claim.as_str()) {
            violations.push(violation(
                format!("spec.claim_mapping[{claim}]"),
                format!(
                    "not a claim the server issues; use one of {}",
                    SERVER_CLAIMS.join(", ")
                ),
            ));
        }
    }
    violations
}

/// The objections to an organization.
pub fn organization_violations(slug: &str, spec: &OrganizationSpec) -> Vec<FieldViolation> {
    let mut violations = Vec::new();
    if slug.is_empty()
        || !slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        violations.push(violation(
            "slug",
            "must be lower-case letters, digits and dashes",
        ));
    }
    match url::Url::parse(&spec.issuer) {
        Ok(url) if url.scheme() == "https" => {}
        _ => violations.push(violation("spec.issuer", "must be an https URL")),
    }
    if let Some(branding) = &spec.branding {
        violations.extend(branding_violations(branding, "spec.branding"));
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn web_client() -> ClientSpec {
        ClientSpec {
            display_name: "Web".into(),
            redirect_uris: vec!["https://app.example.com/callback".into()],
            grant_types: vec![GRANT_AUTHORIZATION_CODE.into(), GRANT_REFRESH_TOKEN.into()],
            response_types: vec!["code".into()],
            scopes: vec!["openid".into()],
            token_endpoint_auth_method: "client_secret_basic".into(),
            require_pkce: true,
            secret: Some(client_spec::Secret::GenerateSecret(true)),
            ..Default::default()
        }
    }

    fn fields(violations: &[FieldViolation]) -> Vec<&str> {
        violations.iter().map(|v| v.field.as_str()).collect()
    }

    #[test]
    fn a_plain_web_client_is_valid() {
        assert!(client_violations(&web_client()).is_empty());
    }

    #[test]
    fn redirect_uris_need_https_except_loopback() {
        let mut spec = web_client();
        spec.redirect_uris = vec![
            "http://app.example.com/cb".into(),
            "http://127.0.0.1:8080/cb".into(),
            "http://[::1]/cb".into(),
            "http://localhost/cb".into(),
            "custom:/cb".into(),
            "not a uri".into(),
        ];
        assert_eq!(
            fields(&client_violations(&spec)),
            vec![
                "spec.redirect_uris[0]",
                "spec.redirect_uris[4]",
                "spec.redirect_uris[5]"
            ]
        );
    }

    #[test]
    fn authorization_code_needs_code_and_a_redirect_uri() {
        let mut spec = web_client();
        spec.response_types.clear();
        spec.redirect_uris.clear();
        assert_eq!(
            fields(&client_violations(&spec)),
            vec!["spec.response_types", "spec.redirect_uris"]
        );
    }

    #[test]
    fn client_credentials_needs_a_confidential_client() {
        let spec = ClientSpec {
            grant_types: vec![GRANT_CLIENT_CREDENTIALS.into()],
            token_endpoint_auth_method: "none".into(),
            ..Default::default()
        };
        assert_eq!(
            fields(&client_violations(&spec)),
            vec!["spec.token_endpoint_auth_method"]
        );
    }

    #[test]
    fn a_confidential_client_needs_a_secret_source() {
        let mut spec = web_client();
        spec.secret = None;
        assert_eq!(fields(&client_violations(&spec)), vec!["spec.secret"]);
    }

    #[test]
    fn fapi_requires_private_key_jwt_pkce_and_no_implicit() {
        let mut spec = web_client();
        spec.require_pkce = false;
        spec.grant_types.push(GRANT_IMPLICIT.into());
        let violations = fapi_violations(&spec, FapiMode::Fapi1Advanced);
        assert_eq!(
            fields(&violations),
            vec![
                "spec.token_endpoint_auth_method",
                "spec.require_pkce",
                "spec.grant_types[2]"
            ]
        );
        assert!(fapi_violations(&spec, FapiMode::Off).is_empty());
    }

    #[test]
    fn fapi2_also_forbids_refresh_tokens() {
        let mut spec = web_client();
        spec.token_endpoint_auth_method = "private_key_jwt".into();
        spec.secret = None;
        assert!(fapi_violations(&spec, FapiMode::Fapi1Advanced).is_empty());
        assert_eq!(
            fields(&fapi_violations(&spec, FapiMode::Fapi2Security)),
            vec!["spec.grant_types[1]"]
        );
    }

    #[test]
    fn reserved_names_are_recognised_in_any_case() {
        assert!(is_reserved_client_name("admin"));
        assert!(is_reserved_client_name("Dashboard"));
        assert!(!is_reserved_client_name("web"));
    }

    #[test]
    fn branding_colors_must_be_hex_and_roles_known() {
        let document = BrandingDocument {
            colors: [
                ("primary".to_owned(), "#12ab4f".to_owned()),
                ("text".to_owned(), "red".to_owned()),
                ("shadow".to_owned(), "#000000".to_owned()),
            ]
            .into(),
            ..Default::default()
        };
        assert_eq!(
            fields(&branding_violations(&document, "document")),
            vec!["document.colors[shadow]", "document.colors[text]"]
        );
    }

    #[test]
    fn a_claim_mapping_fills_only_claims_the_server_issues() {
        let mut spec = IdentityProviderSpec {
            kind: IdentityProviderKind::Github as i32,
            upstream_client_id: "app".into(),
            ..IdentityProviderSpec::default()
        };
        spec.claim_mapping.insert("email".into(), "email".into());
        assert!(identity_provider_violations(&spec).is_empty());
        spec.claim_mapping.insert("shoe_size".into(), "size".into());
        assert_eq!(
            fields(&identity_provider_violations(&spec)),
            vec!["spec.claim_mapping[shoe_size]"]
        );
    }
}
