//! OIDCClient <-> ClientSpec.

use nauthera_proto::v1::{
    ApplyClientRequest, ClientSpec, DeleteClientRequest, GetClientRequest, client_spec,
};

use super::{
    ConvertError, Differences, delete_precondition, generation, non_empty, object_ref, same_set,
    write_precondition,
};
use nauthera_shared::resources::{
    ClientSecret, GrantType, LocalRef, OIDCClient, OIDCClientSpec, ResponseType, SecretKeyRef,
    TokenEndpointAuthMethod,
};

const SECRET_REF_FIELD: &str = "spec.secret.secretRef";

/// How a client's secret is made, as far as the server tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretSource {
    /// The server generated it.
    Generated,
    /// The caller provided it (the server keeps its hash and never returns it).
    Provided,
    /// The client has no secret (a public client, or `private_key_jwt`).
    None,
}

/// How the secret of a proto spec is made. `generate_secret: false` and a provided secret (the
/// server returns it empty) both mean `Provided`.
pub fn secret_source(spec: &ClientSpec) -> SecretSource {
    match &spec.secret {
        Some(client_spec::Secret::GenerateSecret(true)) => SecretSource::Generated,
        Some(
            client_spec::Secret::GenerateSecret(false) | client_spec::Secret::ProvidedSecret(_),
        ) => SecretSource::Provided,
        None => SecretSource::None,
    }
}

/// The proto spec of a manifest. `provided_secret` is the value read from the Secret named by
/// `spec.secret.secretRef`: required when it is set, refused otherwise.
pub fn client_spec(
    spec: &OIDCClientSpec,
    provided_secret: Option<&str>,
) -> Result<ClientSpec, ConvertError> {
    let wants_provided = spec.secret.as_ref().is_some_and(|s| s.secret_ref.is_some());
    match (wants_provided, provided_secret) {
        (true, Some(value)) => Ok(client_spec_with(spec, value)),
        (true, None) => Err(ConvertError::SecretValueMissing {
            field: SECRET_REF_FIELD,
        }),
        (false, Some(_)) => Err(ConvertError::SecretValueUnused {
            field: SECRET_REF_FIELD,
        }),
        (false, None) => Ok(client_spec_with(spec, "")),
    }
}

/// The proto spec of a manifest for comparing with what the server holds (`diff_client`), without
/// reading any Secret: a provided secret is left empty, as the server returns it.
pub fn comparable_client_spec(spec: &OIDCClientSpec) -> ClientSpec {
    client_spec_with(spec, "")
}

fn client_spec_with(spec: &OIDCClientSpec, provided_secret: &str) -> ClientSpec {
    // Destructured so that a new field does not compile until it is converted (or named here as
    // manifest-only).
    let OIDCClientSpec {
        issuer: _,
        display_name,
        redirect_uris,
        post_logout_redirect_uris,
        grant_types,
        response_types,
        scopes,
        token_endpoint_auth_method,
        require_pkce,
        secret,
        deletion_policy: _,
        management_policy: _,
        branding_ref,
    } = spec;
    let secret = secret.as_ref().and_then(|secret| {
        if secret.secret_ref.is_some() {
            Some(client_spec::Secret::ProvidedSecret(
                provided_secret.to_owned(),
            ))
        } else if secret.generate {
            Some(client_spec::Secret::GenerateSecret(true))
        } else {
            None
        }
    });
    ClientSpec {
        display_name: display_name.clone().unwrap_or_default(),
        redirect_uris: redirect_uris.clone(),
        post_logout_redirect_uris: post_logout_redirect_uris.clone(),
        grant_types: grant_types.iter().map(|g| g.as_str().to_owned()).collect(),
        response_types: response_types
            .iter()
            .map(|r| r.as_str().to_owned())
            .collect(),
        scopes: scopes.clone(),
        token_endpoint_auth_method: token_endpoint_auth_method.as_str().to_owned(),
        require_pkce: *require_pkce,
        secret,
        branding_ref: branding_ref
            .as_ref()
            .map(|r| r.name.clone())
            .unwrap_or_default(),
    }
}

/// What the server holds, as spec fields. `issuer`, `deletionPolicy` and the Secret names come
/// from `declared`, which the server does not know.
pub fn oidc_client_spec_from_server(
    held: &ClientSpec,
    declared: &OIDCClientSpec,
) -> Result<OIDCClientSpec, ConvertError> {
    let ClientSpec {
        display_name,
        redirect_uris,
        post_logout_redirect_uris,
        grant_types,
        response_types,
        scopes,
        token_endpoint_auth_method,
        require_pkce,
        secret: _,
        branding_ref,
    } = held;
    let grant_types = grant_types
        .iter()
        .map(|name| GrantType::from_name(name).ok_or_else(|| unknown("spec.grantTypes", name)))
        .collect::<Result<_, _>>()?;
    let response_types = response_types
        .iter()
        .map(|name| {
            ResponseType::from_name(name).ok_or_else(|| unknown("spec.responseTypes", name))
        })
        .collect::<Result<_, _>>()?;
    let token_endpoint_auth_method = TokenEndpointAuthMethod::from_name(token_endpoint_auth_method)
        .ok_or_else(|| unknown("spec.tokenEndpointAuthMethod", token_endpoint_auth_method))?;
    let declared_secret = declared.secret.clone().unwrap_or_default();
    let secret = match secret_source(held) {
        SecretSource::Generated => Some(ClientSecret {
            generate: true,
            secret_name: declared_secret
                .secret_name
                .clone()
                .filter(|_| declared_secret.generate),
            secret_ref: None,
            // The schedule is the reconciler's, not the server's: the declared one.
            rotation: declared_secret
                .rotation
                .filter(|_| declared_secret.generate),
            // The Secret's shape is the cluster's, not the server's: shown as declared.
            template: declared_secret
                .template
                .clone()
                .filter(|_| declared_secret.generate),
            // Kubernetes' side alone: the server knows nothing of it.
            restart: declared_secret.restart.filter(|_| declared_secret.generate),
        }),
        SecretSource::Provided => Some(ClientSecret {
            generate: false,
            secret_name: None,
            // The server does not know the Secret; show the declared one, or an unnamed one.
            secret_ref: Some(declared_secret.secret_ref.unwrap_or_else(|| SecretKeyRef {
                name: String::new(),
                key: SecretKeyRef::DEFAULT_KEY.to_owned(),
            })),
            rotation: None,
            template: None,
            restart: None,
        }),
        SecretSource::None => None,
    };
    Ok(OIDCClientSpec {
        issuer: declared.issuer.clone(),
        display_name: non_empty(display_name),
        redirect_uris: redirect_uris.clone(),
        post_logout_redirect_uris: post_logout_redirect_uris.clone(),
        grant_types,
        response_types,
        scopes: scopes.clone(),
        token_endpoint_auth_method,
        require_pkce: *require_pkce,
        secret,
        deletion_policy: declared.deletion_policy,
        management_policy: Default::default(),
        branding_ref: non_empty(branding_ref).map(|name| LocalRef { name }),
    })
}

fn unknown(field: &'static str, value: &str) -> ConvertError {
    ConvertError::UnknownValue {
        field,
        value: value.to_owned(),
    }
}

/// The request that writes a client's declared state. `last_written_revision` is the revision
/// the reconciler last wrote (`status.revision`): the write is made only while the server still
/// holds it, or, when there is none, only if the server holds no such client.
pub fn apply_client_request(
    client: &OIDCClient,
    provided_secret: Option<&str>,
    manager: &str,
    last_written_revision: Option<&str>,
) -> Result<ApplyClientRequest, ConvertError> {
    Ok(ApplyClientRequest {
        r#ref: Some(object_ref(client)?),
        spec: Some(client_spec(&client.spec, provided_secret)?),
        generation: generation(client),
        manager: manager.to_owned(),
        if_revision: Some(write_precondition(last_written_revision)),
        rotate_secret: false,
    })
}

/// The request that reads a client.
pub fn get_client_request(client: &OIDCClient) -> Result<GetClientRequest, ConvertError> {
    Ok(GetClientRequest {
        r#ref: Some(object_ref(client)?),
    })
}

/// The request that deletes a client, only while the server holds the revision last written.
pub fn delete_client_request(
    client: &OIDCClient,
    manager: &str,
    last_written_revision: Option<&str>,
) -> Result<DeleteClientRequest, ConvertError> {
    Ok(DeleteClientRequest {
        r#ref: Some(object_ref(client)?),
        if_revision: delete_precondition(last_written_revision),
        manager: manager.to_owned(),
    })
}

/// The fields in which the server's client differs from the declared one.
pub fn diff_client(declared: &ClientSpec, held: &ClientSpec) -> Vec<String> {
    let ClientSpec {
        display_name,
        redirect_uris,
        post_logout_redirect_uris,
        grant_types,
        response_types,
        scopes,
        token_endpoint_auth_method,
        require_pkce,
        secret: _,
        branding_ref,
    } = declared;
    let mut diff = Differences::default();
    diff.check(*display_name != held.display_name, "spec.displayName");
    diff.check(
        !same_set(redirect_uris, &held.redirect_uris),
        "spec.redirectUris",
    );
    diff.check(
        !same_set(post_logout_redirect_uris, &held.post_logout_redirect_uris),
        "spec.postLogoutRedirectUris",
    );
    diff.check(!same_set(grant_types, &held.grant_types), "spec.grantTypes");
    diff.check(
        !same_set(response_types, &held.response_types),
        "spec.responseTypes",
    );
    diff.check(!same_set(scopes, &held.scopes), "spec.scopes");
    diff.check(
        *token_endpoint_auth_method != held.token_endpoint_auth_method,
        "spec.tokenEndpointAuthMethod",
    );
    diff.check(*require_pkce != held.require_pkce, "spec.requirePkce");
    diff.check(
        secret_source(declared) != secret_source(held),
        "spec.secret",
    );
    diff.check(*branding_ref != held.branding_ref, "spec.brandingRef");
    diff.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> OIDCClientSpec {
        serde_json::from_value(serde_json::json!({
            "issuer": "https://login.example.test/acme",
            "redirectUris": ["https://app.example.test/cb"],
            "secret": { "secretRef": { "name": "creds" } }
        }))
        .unwrap()
    }

    #[test]
    fn a_secret_ref_needs_the_value() {
        assert!(matches!(
            client_spec(&spec(), None),
            Err(ConvertError::SecretValueMissing {
                field: "spec.secret.secretRef"
            })
        ));
        let converted = client_spec(&spec(), Some("s3cret")).unwrap();
        assert_eq!(
            converted.secret,
            Some(client_spec::Secret::ProvidedSecret("s3cret".into()))
        );
    }

    #[test]
    fn a_value_nobody_asked_for_is_refused() {
        let mut public = spec();
        public.secret = None;
        public.token_endpoint_auth_method = TokenEndpointAuthMethod::None;
        let error = client_spec(&public, Some("s3cret")).unwrap_err();
        assert!(matches!(error, ConvertError::SecretValueUnused { .. }));
        assert!(!error.to_string().contains("s3cret"));
    }

    #[test]
    fn generated_and_public_secrets() {
        let mut generated = spec();
        generated.secret = Some(ClientSecret {
            generate: true,
            secret_name: None,
            secret_ref: None,
            rotation: None,
            template: None,
            restart: None,
        });
        assert_eq!(
            client_spec(&generated, None).unwrap().secret,
            Some(client_spec::Secret::GenerateSecret(true))
        );
        let mut public = spec();
        public.secret = None;
        assert_eq!(client_spec(&public, None).unwrap().secret, None);
    }

    #[test]
    fn the_server_reports_a_provided_secret_either_way() {
        let mut held = ClientSpec {
            secret: Some(client_spec::Secret::GenerateSecret(false)),
            ..ClientSpec::default()
        };
        assert_eq!(secret_source(&held), SecretSource::Provided);
        held.secret = Some(client_spec::Secret::ProvidedSecret(String::new()));
        assert_eq!(secret_source(&held), SecretSource::Provided);
        held.secret = None;
        assert_eq!(secret_source(&held), SecretSource::None);
    }

    #[test]
    fn an_unknown_grant_type_from_the_server_is_named() {
        let mut held = client_spec(&spec(), Some("x")).unwrap();
        held.grant_types.push("implicit".into());
        let error = oidc_client_spec_from_server(&held, &spec()).unwrap_err();
        assert_eq!(
            error.to_string(),
            r#"spec.grantTypes: the server holds "implicit", which this version cannot show"#
        );
    }
}
