//! IdentityProvider <-> IdentityProviderSpec.

use nauthera_proto::v1 as proto;
use nauthera_proto::v1::{
    ApplyIdentityProviderRequest, DeleteIdentityProviderRequest, GetIdentityProviderRequest,
};

use super::{
    ConvertError, Differences, delete_precondition, generation, non_empty, object_ref, same_set,
    write_precondition,
};
use nauthera_shared::resources::{IdentityProvider, IdentityProviderKind, IdentityProviderSpec};

const SECRET_REF_FIELD: &str = "spec.secretRef";

fn kind_to_proto(kind: IdentityProviderKind) -> proto::IdentityProviderKind {
    match kind {
        IdentityProviderKind::Oidc => proto::IdentityProviderKind::Oidc,
        IdentityProviderKind::Github => proto::IdentityProviderKind::Github,
        IdentityProviderKind::Google => proto::IdentityProviderKind::Google,
        IdentityProviderKind::Microsoft => proto::IdentityProviderKind::Microsoft,
        IdentityProviderKind::Saml => proto::IdentityProviderKind::Saml,
    }
}

fn kind_from_proto(kind: i32) -> Result<IdentityProviderKind, ConvertError> {
    match proto::IdentityProviderKind::try_from(kind) {
        Ok(proto::IdentityProviderKind::Oidc) => Ok(IdentityProviderKind::Oidc),
        Ok(proto::IdentityProviderKind::Github) => Ok(IdentityProviderKind::Github),
        Ok(proto::IdentityProviderKind::Google) => Ok(IdentityProviderKind::Google),
        Ok(proto::IdentityProviderKind::Microsoft) => Ok(IdentityProviderKind::Microsoft),
        Ok(proto::IdentityProviderKind::Saml) => Ok(IdentityProviderKind::Saml),
        Ok(proto::IdentityProviderKind::Unspecified) | Err(_) => Err(ConvertError::UnknownValue {
            field: "spec.kind",
            value: kind.to_string(),
        }),
    }
}

/// The proto spec of a manifest. `upstream_secret` is the value read from the Secret named by
/// `spec.secretRef`: required when it is set, refused otherwise.
pub fn identity_provider_spec(
    spec: &IdentityProviderSpec,
    upstream_secret: Option<&str>,
) -> Result<proto::IdentityProviderSpec, ConvertError> {
    match (&spec.secret_ref, upstream_secret) {
        (Some(_), Some(value)) => Ok(identity_provider_spec_with(spec, value)),
        (Some(_), None) => Err(ConvertError::SecretValueMissing {
            field: SECRET_REF_FIELD,
        }),
        (None, Some(_)) => Err(ConvertError::SecretValueUnused {
            field: SECRET_REF_FIELD,
        }),
        (None, None) => Ok(identity_provider_spec_with(spec, "")),
    }
}

/// The proto spec of a manifest for comparing with what the server holds
/// (`diff_identity_provider`), without reading any Secret: the upstream secret is left empty, as
/// the server returns it.
pub fn comparable_identity_provider_spec(
    spec: &IdentityProviderSpec,
) -> proto::IdentityProviderSpec {
    identity_provider_spec_with(spec, "")
}

fn identity_provider_spec_with(
    spec: &IdentityProviderSpec,
    upstream_client_secret: &str,
) -> proto::IdentityProviderSpec {
    let IdentityProviderSpec {
        issuer: _,
        kind,
        display_name,
        upstream_url,
        client_id,
        secret_ref: _,
        scopes,
        claim_mapping,
        deletion_policy: _,
        management_policy: _,
    } = spec;
    proto::IdentityProviderSpec {
        kind: kind_to_proto(*kind).into(),
        display_name: display_name.clone().unwrap_or_default(),
        upstream_url: upstream_url.clone().unwrap_or_default(),
        upstream_client_id: client_id.clone().unwrap_or_default(),
        upstream_client_secret: upstream_client_secret.to_owned(),
        scopes: scopes.clone(),
        claim_mapping: claim_mapping
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// What the server holds, as spec fields. `issuer`, `secretRef` and `deletionPolicy` come from
/// `declared`.
pub fn identity_provider_spec_from_server(
    held: &proto::IdentityProviderSpec,
    declared: &IdentityProviderSpec,
) -> Result<IdentityProviderSpec, ConvertError> {
    let proto::IdentityProviderSpec {
        kind,
        display_name,
        upstream_url,
        upstream_client_id,
        upstream_client_secret: _,
        scopes,
        claim_mapping,
    } = held;
    Ok(IdentityProviderSpec {
        issuer: declared.issuer.clone(),
        kind: kind_from_proto(*kind)?,
        display_name: non_empty(display_name),
        upstream_url: non_empty(upstream_url),
        client_id: non_empty(upstream_client_id),
        secret_ref: declared.secret_ref.clone(),
        scopes: scopes.clone(),
        claim_mapping: claim_mapping
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        deletion_policy: declared.deletion_policy,
        management_policy: Default::default(),
    })
}

/// The request that writes an identity provider's declared state.
pub fn apply_identity_provider_request(
    provider: &IdentityProvider,
    upstream_secret: Option<&str>,
    manager: &str,
    last_written_revision: Option<&str>,
) -> Result<ApplyIdentityProviderRequest, ConvertError> {
    Ok(ApplyIdentityProviderRequest {
        r#ref: Some(object_ref(provider)?),
        spec: Some(identity_provider_spec(&provider.spec, upstream_secret)?),
        generation: generation(provider),
        manager: manager.to_owned(),
        if_revision: Some(write_precondition(last_written_revision)),
    })
}

/// The request that reads an identity provider.
pub fn get_identity_provider_request(
    provider: &IdentityProvider,
) -> Result<GetIdentityProviderRequest, ConvertError> {
    Ok(GetIdentityProviderRequest {
        r#ref: Some(object_ref(provider)?),
    })
}

/// The request that deletes an identity provider, only while the server holds the revision last
/// written.
pub fn delete_identity_provider_request(
    provider: &IdentityProvider,
    manager: &str,
    last_written_revision: Option<&str>,
) -> Result<DeleteIdentityProviderRequest, ConvertError> {
    Ok(DeleteIdentityProviderRequest {
        r#ref: Some(object_ref(provider)?),
        if_revision: delete_precondition(last_written_revision),
        manager: manager.to_owned(),
    })
}

/// The fields in which the server's provider differs from the declared one. The upstream secret
/// is not compared: the server never returns it.
pub fn diff_identity_provider(
    declared: &proto::IdentityProviderSpec,
    held: &proto::IdentityProviderSpec,
) -> Vec<String> {
    let proto::IdentityProviderSpec {
        kind,
        display_name,
        upstream_url,
        upstream_client_id,
        upstream_client_secret: _,
        scopes,
        claim_mapping,
    } = declared;
    let mut diff = Differences::default();
    diff.check(*kind != held.kind, "spec.kind");
    diff.check(*display_name != held.display_name, "spec.displayName");
    diff.check(*upstream_url != held.upstream_url, "spec.upstreamUrl");
    diff.check(
        *upstream_client_id != held.upstream_client_id,
        "spec.clientId",
    );
    diff.check(!same_set(scopes, &held.scopes), "spec.scopes");
    diff.check(*claim_mapping != held.claim_mapping, "spec.claimMapping");
    diff.0
}
