//! Branding <-> BrandingDocument.

use std::collections::{BTreeSet, HashMap};

use base64::Engine as _;
use nauthera_proto::v1::{
    ApplyBrandingRequest, BrandingDocument, DeleteBrandingRequest, GetBrandingRequest,
};

use super::{
    ConvertError, Differences, delete_precondition, generation, non_empty, object_ref,
    write_precondition,
};
use nauthera_shared::branding::EncodedBranding;
use nauthera_shared::resources::{Branding, Colors, Logo, LogoMediaType, SignInBranding, Texts};

/// The server's document of a manifest's branding (see `nauthera_shared::branding::encode`).
pub fn branding_document(branding: &SignInBranding) -> Result<BrandingDocument, ConvertError> {
    let EncodedBranding {
        logo,
        logo_media_type,
        colors,
        texts,
        custom_css,
    } = nauthera_shared::branding::encode(branding)?;
    Ok(BrandingDocument {
        logo,
        logo_media_type,
        colors,
        texts,
        custom_css,
    })
}

/// A server document as the manifest would write it: the logo in base64 without line breaks,
/// colours as the server holds them. Roles this version does not know are left out.
pub fn sign_in_branding_from_document(
    document: &BrandingDocument,
) -> Result<SignInBranding, ConvertError> {
    let BrandingDocument {
        logo,
        logo_media_type,
        colors,
        texts,
        custom_css,
    } = document;
    let logo = if logo.is_empty() && logo_media_type.is_empty() {
        None
    } else {
        let media_type = LogoMediaType::from_name(logo_media_type).ok_or_else(|| {
            ConvertError::UnknownValue {
                field: "spec.branding.logo.mediaType",
                value: logo_media_type.clone(),
            }
        })?;
        Some(Logo {
            data: base64::engine::general_purpose::STANDARD.encode(logo),
            media_type,
        })
    };
    let color = |role: &str| colors.get(role).cloned();
    let colors = (!colors.is_empty()).then(|| Colors {
        primary: color("primary"),
        background: color("background"),
        text: color("text"),
        accent: color("accent"),
        error: color("error"),
    });
    let text = |role: &str| texts.get(role).cloned();
    let texts = (!texts.is_empty()).then(|| Texts {
        title: text("title"),
        welcome: text("welcome"),
        footer: text("footer"),
        support: text("support"),
    });
    Ok(SignInBranding {
        logo,
        colors,
        texts,
        custom_css: non_empty(custom_css),
    })
}

/// The request that writes a branding's declared state, refused here when the branding cannot be
/// encoded. `last_written_revision` as for clients.
pub fn apply_branding_request(
    branding: &Branding,
    manager: &str,
    last_written_revision: Option<&str>,
) -> Result<ApplyBrandingRequest, ConvertError> {
    Ok(ApplyBrandingRequest {
        r#ref: Some(object_ref(branding)?),
        document: Some(branding_document(&branding.spec.branding)?),
        generation: generation(branding),
        manager: manager.to_owned(),
        if_revision: Some(write_precondition(last_written_revision)),
    })
}

/// The request that reads a branding.
pub fn get_branding_request(branding: &Branding) -> Result<GetBrandingRequest, ConvertError> {
    Ok(GetBrandingRequest {
        r#ref: Some(object_ref(branding)?),
    })
}

/// The request that deletes a branding, only while the server holds the revision last written.
pub fn delete_branding_request(
    branding: &Branding,
    manager: &str,
    last_written_revision: Option<&str>,
) -> Result<DeleteBrandingRequest, ConvertError> {
    Ok(DeleteBrandingRequest {
        r#ref: Some(object_ref(branding)?),
        if_revision: delete_precondition(last_written_revision),
        manager: manager.to_owned(),
    })
}

/// The fields in which two documents differ, as `spec.branding.*` paths (the same for Branding
/// and Organization).
pub fn diff_branding_document(declared: &BrandingDocument, held: &BrandingDocument) -> Vec<String> {
    let BrandingDocument {
        logo,
        logo_media_type,
        colors,
        texts,
        custom_css,
    } = declared;
    let mut diff = Differences::default();
    diff.check(*logo != held.logo, "spec.branding.logo.data");
    diff.check(
        *logo_media_type != held.logo_media_type,
        "spec.branding.logo.mediaType",
    );
    for role in differing_keys(colors, &held.colors) {
        diff.check(true, format!("spec.branding.colors.{role}"));
    }
    for role in differing_keys(texts, &held.texts) {
        diff.check(true, format!("spec.branding.texts.{role}"));
    }
    diff.check(*custom_css != held.custom_css, "spec.branding.customCss");
    diff.0
}

/// The keys whose values differ (or that only one map holds), sorted.
fn differing_keys<'a>(
    a: &'a HashMap<String, String>,
    b: &'a HashMap<String, String>,
) -> BTreeSet<&'a str> {
    a.keys()
        .chain(b.keys())
        .filter(|key| a.get(*key) != b.get(*key))
        .map(String::as_str)
        .collect()
}
