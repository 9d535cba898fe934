//! `Debug` for the messages that carry client secrets: every field is shown except the secret,
//! which prints as `<redacted>` (or `<none>` when empty), so a `{:?}` in a log line or an error
//! can never leak one.

use std::fmt;

use crate::v1::{ApplyClientResponse, ClientSpec, IdentityProviderSpec, client_spec};

const REDACTED: &str = "<redacted>";
const NONE: &str = "<none>";

fn redacted(value: &str) -> &'static str {
    if value.is_empty() { NONE } else { REDACTED }
}

impl fmt::Debug for client_spec::Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            client_spec::Secret::GenerateSecret(generate) => {
                f.debug_tuple("GenerateSecret").field(generate).finish()
            }
            client_spec::Secret::ProvidedSecret(value) => f
                .debug_tuple("ProvidedSecret")
                .field(&redacted(value))
                .finish(),
        }
    }
}

impl fmt::Debug for ClientSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Destructured so that a field added to the contract must be added here too.
        let ClientSpec {
            display_name,
            redirect_uris,
            post_logout_redirect_uris,
            grant_types,
            response_types,
            scopes,
            token_endpoint_auth_method,
            require_pkce,
            secret,
            branding_ref,
        } = self;
        f.debug_struct("ClientSpec")
            .field("display_name", display_name)
            .field("redirect_uris", redirect_uris)
            .field("post_logout_redirect_uris", post_logout_redirect_uris)
            .field("grant_types", grant_types)
            .field("response_types", response_types)
            .field("scopes", scopes)
            .field("token_endpoint_auth_method", token_endpoint_auth_method)
            .field("require_pkce", require_pkce)
            .field("secret", secret)
            .field("branding_ref", branding_ref)
            .finish()
    }
}

impl fmt::Debug for ApplyClientResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ApplyClientResponse {
            client,
            created,
            secret,
        } = self;
        f.debug_struct("ApplyClientResponse")
            .field("client", client)
            .field("created", created)
            .field("secret", &redacted(secret))
            .finish()
    }
}

impl fmt::Debug for IdentityProviderSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let IdentityProviderSpec {
            kind,
            display_name,
            upstream_url,
            upstream_client_id,
            upstream_client_secret,
            scopes,
            claim_mapping,
        } = self;
        f.debug_struct("IdentityProviderSpec")
            .field("kind", kind)
            .field("display_name", display_name)
            .field("upstream_url", upstream_url)
            .field("upstream_client_id", upstream_client_id)
            .field("upstream_client_secret", &redacted(upstream_client_secret))
            .field("scopes", scopes)
            .field("claim_mapping", claim_mapping)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::ApplyClientRequest;

    const SECRET: &str = "s3cr3t-value-that-must-not-print";

    #[test]
    fn debug_output_never_contains_a_secret() {
        let spec = ClientSpec {
            display_name: "Shop".into(),
            secret: Some(client_spec::Secret::ProvidedSecret(SECRET.into())),
            ..ClientSpec::default()
        };
        let request = ApplyClientRequest {
            spec: Some(spec.clone()),
            ..Default::default()
        };
        let response = ApplyClientResponse {
            secret: SECRET.into(),
            ..Default::default()
        };
        let provider = IdentityProviderSpec {
            upstream_client_secret: SECRET.into(),
            ..Default::default()
        };
        for text in [
            format!("{spec:?}"),
            format!("{request:?}"),
            format!("{response:?}"),
            format!("{provider:#?}"),
        ] {
            assert!(!text.contains(SECRET), "leaked in {text}");
            assert!(text.contains(REDACTED), "no redaction marker in {text}");
        }
        assert!(
            format!("{spec:?}").contains("Shop"),
            "other fields still show"
        );
    }

    #[test]
    fn an_empty_secret_reads_as_none() {
        let response = ApplyClientResponse::default();
        assert!(format!("{response:?}").contains(NONE));
    }
}
