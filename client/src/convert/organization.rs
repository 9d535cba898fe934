//! Organization <-> OrganizationSpec.

use nauthera_proto::v1 as proto;
use nauthera_proto::v1::{
    ApplyOrganizationRequest, BrandingDocument, DeleteOrganizationRequest, GetOrganizationRequest,
};

use super::branding::{branding_document, diff_branding_document, sign_in_branding_from_document};
use super::{
    ConvertError, Differences, delete_precondition, generation, non_empty, write_precondition,
};
use nauthera_shared::resources::{FapiMode, Organization, OrganizationSpec};

fn fapi_mode_to_proto(mode: FapiMode) -> proto::FapiMode {
    match mode {
        FapiMode::Disabled => proto::FapiMode::Off,
        FapiMode::Fapi1Advanced => proto::FapiMode::Fapi1Advanced,
        FapiMode::Fapi2Security => proto::FapiMode::Fapi2Security,
    }
}

fn fapi_mode_from_proto(mode: i32) -> Result<FapiMode, ConvertError> {
    match proto::FapiMode::try_from(mode) {
        // An unspecified mode is the server's default: no FAPI requirements.
        Ok(proto::FapiMode::Off | proto::FapiMode::Unspecified) => Ok(FapiMode::Disabled),
        Ok(proto::FapiMode::Fapi1Advanced) => Ok(FapiMode::Fapi1Advanced),
        Ok(proto::FapiMode::Fapi2Security) => Ok(FapiMode::Fapi2Security),
        Err(_) => Err(ConvertError::UnknownValue {
            field: "spec.fapiMode",
            value: mode.to_string(),
        }),
    }
}

/// The proto spec of a manifest; refused when its branding cannot be encoded.
pub fn organization_spec(spec: &OrganizationSpec) -> Result<proto::OrganizationSpec, ConvertError> {
    let OrganizationSpec {
        slug: _,
        issuer,
        display_name,
        branding,
        fapi_mode,
        deletion_policy: _,
        management_policy: _,
    } = spec;
    Ok(proto::OrganizationSpec {
        issuer: issuer.clone(),
        display_name: display_name.clone().unwrap_or_default(),
        branding: branding.as_ref().map(branding_document).transpose()?,
        fapi_mode: fapi_mode_to_proto(*fapi_mode).into(),
    })
}

/// What the server holds, as spec fields. `slug` is the server's; `deletionPolicy` comes from
/// `declared`.
pub fn organization_spec_from_server(
    slug: &str,
    held: &proto::OrganizationSpec,
    declared: &OrganizationSpec,
) -> Result<OrganizationSpec, ConvertError> {
    let proto::OrganizationSpec {
        issuer,
        display_name,
        branding,
        fapi_mode,
    } = held;
    Ok(OrganizationSpec {
        slug: slug.to_owned(),
        issuer: issuer.clone(),
        display_name: non_empty(display_name),
        branding: branding
            .as_ref()
            .map(sign_in_branding_from_document)
            .transpose()?,
        fapi_mode: fapi_mode_from_proto(*fapi_mode)?,
        deletion_policy: declared.deletion_policy,
        management_policy: Default::default(),
    })
}

/// The request that writes an organization's declared state. The namespace is checked against
/// the caller's grant by the server.
pub fn apply_organization_request(
    organization: &Organization,
    manager: &str,
    last_written_revision: Option<&str>,
) -> Result<ApplyOrganizationRequest, ConvertError> {
    Ok(ApplyOrganizationRequest {
        slug: organization.spec.slug.clone(),
        spec: Some(organization_spec(&organization.spec)?),
        namespace: namespace(organization)?,
        generation: generation(organization),
        manager: manager.to_owned(),
        if_revision: Some(write_precondition(last_written_revision)),
    })
}

/// The request that reads an organization.
pub fn get_organization_request(organization: &Organization) -> GetOrganizationRequest {
    GetOrganizationRequest {
        slug: organization.spec.slug.clone(),
    }
}

/// The request that deletes an organization, only while the server holds the revision last
/// written.
pub fn delete_organization_request(
    organization: &Organization,
    manager: &str,
    last_written_revision: Option<&str>,
) -> Result<DeleteOrganizationRequest, ConvertError> {
    Ok(DeleteOrganizationRequest {
        slug: organization.spec.slug.clone(),
        if_revision: delete_precondition(last_written_revision),
        manager: manager.to_owned(),
        namespace: namespace(organization)?,
    })
}

fn namespace(organization: &Organization) -> Result<String, ConvertError> {
    organization
        .metadata
        .namespace
        .clone()
        .ok_or(ConvertError::MissingMetadata {
            kind: "Organization",
            field: "namespace",
        })
}

/// The fields in which the server's organization differs from the declared one. No branding and
/// an empty one are the same.
pub fn diff_organization(
    declared: &proto::OrganizationSpec,
    held: &proto::OrganizationSpec,
) -> Vec<String> {
    let proto::OrganizationSpec {
        issuer,
        display_name,
        branding,
        fapi_mode,
    } = declared;
    let mut diff = Differences::default();
    diff.check(*issuer != held.issuer, "spec.issuer");
    diff.check(*display_name != held.display_name, "spec.displayName");
    let empty = BrandingDocument::default();
    diff.0.extend(diff_branding_document(
        branding.as_ref().unwrap_or(&empty),
        held.branding.as_ref().unwrap_or(&empty),
    ));
    diff.check(
        effective_fapi_mode(*fapi_mode) != effective_fapi_mode(held.fapi_mode),
        "spec.fapiMode",
    );
    diff.0
}

/// A mode as it takes effect: unspecified is the server's default, off (as it is shown), so a
/// server that leaves the field unset holds what `fapiMode: Disabled` declares.
fn effective_fapi_mode(mode: i32) -> i32 {
    match proto::FapiMode::try_from(mode) {
        Ok(proto::FapiMode::Unspecified) => proto::FapiMode::Off.into(),
        _ => mode,
    }
}
