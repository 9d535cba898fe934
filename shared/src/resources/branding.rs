//! `Branding`: a sign-in branding of an organization, and the branding content Organization
//! shares.
//!
//! The schema checks shapes and sizes at admission; `crate::branding::encode` checks the content
//! (image bytes, colours, texts, CSS) before anything reaches the server.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DeletionPolicy, ISSUER_PATTERN, ManagementPolicy};
use super::status::ResourceStatus;

/// The limits of a branding: the schema states the ones it can express, the encoder
/// (`crate::branding::encode`) enforces them all.
pub mod branding_limits {
    /// The largest logo, decoded: 128 KiB.
    pub const LOGO_MAX_BYTES: usize = 128 * 1024;
    /// The longest `logo.data` the schema admits: base64 of 128 KiB with line breaks.
    pub const LOGO_BASE64_MAX_CHARS: usize = 192 * 1024;
    /// The longest title, in characters.
    pub const TITLE_MAX_CHARS: usize = 100;
    /// The longest welcome text, in characters.
    pub const WELCOME_MAX_CHARS: usize = 1000;
    /// The longest footer, in characters.
    pub const FOOTER_MAX_CHARS: usize = 1000;
    /// The longest support text, in characters.
    pub const SUPPORT_MAX_CHARS: usize = 200;
    /// The largest custom CSS, in bytes (UTF-8).
    pub const CUSTOM_CSS_MAX_BYTES: usize = 16 * 1024;
}

/// The declared state of a sign-in branding.
// Clippy takes kube's repeated `printcolumn(type_ = ...)` items for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nauthera.io",
    version = "v1alpha1",
    kind = "Branding",
    plural = "brandings",
    singular = "branding",
    shortname = "nbrand",
    category = "nauthera",
    namespaced,
    status = "ResourceStatus",
    derive = "PartialEq",
    doc = "A sign-in branding of an organization of nauthera-server, declared by this manifest.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.reason"),
    printcolumn(
        name = "Stalled",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Stalled\")].status"
    ),
    printcolumn(
        name = "Reconciling",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Reconciling\")].status",
        priority = 1
    ),
    printcolumn(name = "Issuer", type_ = "string", json_path = ".spec.issuer"),
    printcolumn(name = "Revision", type_ = "string", json_path = ".status.revision"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BrandingSpec {
    /// The issuer URL of the organization the branding belongs to.
    #[schemars(length(max = 512), regex(pattern = ISSUER_PATTERN))]
    pub issuer: String,
    /// The branding itself.
    pub branding: SignInBranding,
    /// What deleting this manifest does to the branding on the server.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// `Observe`: the reconciler only reads the object on the server and reports how it differs
    /// from this manifest, never writing it; `Manage` (the default) writes it.
    #[serde(default, skip_serializing_if = "ManagementPolicy::is_manage")]
    pub management_policy: ManagementPolicy,
}

/// What the sign-in pages look like: logo, colours, texts and custom CSS. Every part is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignInBranding {
    /// The logo image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo: Option<Logo>,
    /// Colours by role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colors: Option<Colors>,
    /// Texts by role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub texts: Option<Texts>,
    /// CSS appended to the sign-in pages' stylesheet. No `@import`, `expression(`, `javascript:`,
    /// `behavior:`, `-moz-binding`, `</style`, backslash escapes, nor `url(` other than
    /// `url(data:image/...)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = branding_limits::CUSTOM_CSS_MAX_BYTES))]
    pub custom_css: Option<String>,
}

/// A logo image, inline.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Logo {
    /// The image bytes in standard base64 (line breaks allowed); at most 128 KiB decoded.
    #[schemars(length(min = 1, max = branding_limits::LOGO_BASE64_MAX_CHARS))]
    pub data: String,
    /// The image's media type; must match the bytes.
    pub media_type: LogoMediaType,
}

/// The image formats a logo may have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum LogoMediaType {
    #[default]
    #[serde(rename = "image/png")]
    Png,
    #[serde(rename = "image/jpeg")]
    Jpeg,
    #[serde(rename = "image/webp")]
    Webp,
    #[serde(rename = "image/svg+xml")]
    Svg,
}

impl LogoMediaType {
    /// Every media type.
    pub const ALL: [Self; 4] = [Self::Png, Self::Jpeg, Self::Webp, Self::Svg];

    /// The media type's name, as in the manifest and the server's branding format.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Webp => "image/webp",
            Self::Svg => "image/svg+xml",
        }
    }

    /// The media type of a name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// A colour: `#rgb` or `#rrggbb`.
const COLOR_PATTERN: &str = "^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$";

/// Colours by role, each `#rgb` or `#rrggbb`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Colors {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = COLOR_PATTERN))]
    pub primary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = COLOR_PATTERN))]
    pub background: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = COLOR_PATTERN))]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = COLOR_PATTERN))]
    pub accent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = COLOR_PATTERN))]
    pub error: Option<String>,
}

/// Texts by role. No control characters; `welcome` and `footer` may hold line breaks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Texts {
    /// The page title, at most 100 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = branding_limits::TITLE_MAX_CHARS))]
    pub title: Option<String>,
    /// The greeting above the sign-in form, at most 1000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = branding_limits::WELCOME_MAX_CHARS))]
    pub welcome: Option<String>,
    /// The footer, at most 1000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = branding_limits::FOOTER_MAX_CHARS))]
    pub footer: Option<String>,
    /// Where users get help (an address or a sentence), at most 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = branding_limits::SUPPORT_MAX_CHARS))]
    pub support: Option<String>,
}
