//! The branding encoder: a manifest's `spec.branding` into the server's format, refusing what
//! the server must not serve.
//!
//! The reconciler refuses a branding that cannot be encoded before it calls the server (reason
//! `Refused`), and `kubectl nauthera diagnose -f` runs the same checks on a local file. The limits
//! (see [`limits`] and `docs/branding.md`):
//!
//! - **logo**: standard base64 (line breaks allowed), at most 128 KiB decoded, and the bytes must
//!   be what `mediaType` says (PNG, JPEG, WebP by their magic numbers; SVG by its root element).
//!   An SVG must not carry scripts (`<script>`, `javascript:`, `<foreignObject>`), event handler
//!   attributes (`onload=`...), a DOCTYPE or entity declarations, nor references to anything but
//!   its own fragments (`#id`) or inline raster images (`data:image/png;...`).
//! - **colours**: `#rgb` or `#rrggbb`, normalized to lower-case `#rrggbb`.
//! - **texts**: not empty, at most 100 (title), 1000 (welcome, footer) or 200 (support)
//!   characters, no control characters except line breaks in `welcome` and `footer`.
//! - **custom CSS**: at most 16 KiB, no control characters but whitespace, no backslash escapes
//!   (they can spell any forbidden word), and none of `@import`, `expression(`, `javascript:`,
//!   `behavior:`, `-moz-binding`, `</style`, `image-set(`, nor `url(` other than
//!   `url(data:image/...)`. Comments and whitespace are ignored when looking for these, so
//!   `ex/**/pression (` is refused too.

mod css;
mod image;
mod text;

use std::collections::HashMap;

use base64::Engine as _;

use crate::resources::{Colors, Logo, SignInBranding, Texts, branding_limits as limits};

/// The manifest path every field path starts with (`Branding` and `Organization` alike).
const ROOT: &str = "spec.branding";

/// What is wrong with a branding, for callers that act on it (and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BrandingErrorKind {
    /// `logo.data` is not standard base64.
    LogoNotBase64,
    /// `logo.data` decodes to nothing.
    LogoEmpty,
    /// The decoded logo is larger than `limits::LOGO_MAX_BYTES`.
    LogoTooLarge,
    /// The bytes are not an image of `logo.mediaType`.
    LogoMediaTypeMismatch,
    /// An SVG logo carries a script, a `javascript:` URL or foreign (HTML) content.
    SvgScript,
    /// An SVG logo carries an event handler attribute (`onload=`, `onclick=`...).
    SvgEventHandler,
    /// An SVG logo references something outside itself.
    SvgExternalReference,
    /// An SVG logo carries a DOCTYPE or entity declarations.
    SvgDoctype,
    /// A colour is not `#rgb` or `#rrggbb`.
    ColorInvalid,
    /// A text is empty (leave it out instead).
    TextEmpty,
    /// A text is longer than its role allows.
    TextTooLong,
    /// A text holds a control character.
    TextControlCharacter,
    /// The custom CSS is larger than `limits::CUSTOM_CSS_MAX_BYTES`.
    CssTooLarge,
    /// The custom CSS holds a control character other than whitespace.
    CssControlCharacter,
    /// The custom CSS holds a forbidden construct.
    CssForbidden,
}

/// A branding that cannot be encoded: the manifest field, what is wrong and what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {detail}")]
pub struct BrandingError {
    /// The manifest field, for example `spec.branding.colors.primary`.
    pub field: String,
    /// What is wrong, for callers.
    pub kind: BrandingErrorKind,
    /// What is wrong and what to do, for people. Never holds more than a short excerpt of the
    /// offending value.
    pub detail: String,
}

impl BrandingError {
    pub(crate) fn new(
        field: impl Into<String>,
        kind: BrandingErrorKind,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            field: field.into(),
            kind,
            detail: detail.into(),
        }
    }
}

/// A branding in the server's format: the fields of the contract's `BrandingDocument`, which
/// the client builds from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedBranding {
    /// The decoded logo; empty without one.
    pub logo: Vec<u8>,
    /// The logo's media type; empty without a logo.
    pub logo_media_type: String,
    /// The colors by role.
    pub colors: HashMap<String, String>,
    /// The texts by role.
    pub texts: HashMap<String, String>,
    /// The custom stylesheet; empty without one.
    pub custom_css: String,
}

/// Encodes a manifest's branding into the server's format, refusing what the server must not
/// serve. Fields are checked in manifest order; the first problem is reported.
pub fn encode(branding: &SignInBranding) -> Result<EncodedBranding, BrandingError> {
    let SignInBranding {
        logo,
        colors,
        texts,
        custom_css,
    } = branding;
    let (logo, logo_media_type) = match logo {
        Some(logo) => encode_logo(logo)?,
        None => (Vec::new(), String::new()),
    };
    let colors = match colors {
        Some(colors) => encode_colors(colors)?,
        None => HashMap::new(),
    };
    let texts = match texts {
        Some(texts) => encode_texts(texts)?,
        None => HashMap::new(),
    };
    let custom_css = match custom_css {
        Some(css) => {
            css::check(css, &format!("{ROOT}.customCss"))?;
            css.clone()
        }
        None => String::new(),
    };
    Ok(EncodedBranding {
        logo,
        logo_media_type,
        colors,
        texts,
        custom_css,
    })
}

fn encode_logo(logo: &Logo) -> Result<(Vec<u8>, String), BrandingError> {
    let data_field = format!("{ROOT}.logo.data");
    let compact: Vec<u8> = logo
        .data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    // A length check before decoding keeps a huge value from being decoded at all.
    if compact.len() > limits::LOGO_MAX_BYTES.div_ceil(3) * 4 {
        return Err(too_large_logo(&data_field));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&compact)
        .map_err(|e| {
            BrandingError::new(
                &data_field,
                BrandingErrorKind::LogoNotBase64,
                format!(
                    "not standard base64 ({e}); encode the image file with `base64 -w0 logo.png`"
                ),
            )
        })?;
    if bytes.is_empty() {
        return Err(BrandingError::new(
            &data_field,
            BrandingErrorKind::LogoEmpty,
            "the logo is empty; remove spec.branding.logo or supply an image",
        ));
    }
    if bytes.len() > limits::LOGO_MAX_BYTES {
        return Err(too_large_logo(&data_field));
    }
    image::check(
        &bytes,
        logo.media_type,
        &format!("{ROOT}.logo.mediaType"),
        &data_field,
    )?;
    Ok((bytes, logo.media_type.as_str().to_owned()))
}

fn too_large_logo(field: &str) -> BrandingError {
    BrandingError::new(
        field,
        BrandingErrorKind::LogoTooLarge,
        format!(
            "the logo is larger than {} KiB decoded; scale or compress it",
            limits::LOGO_MAX_BYTES / 1024
        ),
    )
}

fn encode_colors(colors: &Colors) -> Result<HashMap<String, String>, BrandingError> {
    let Colors {
        primary,
        background,
        text,
        accent,
        error,
    } = colors;
    let roles = [
        ("primary", primary),
        ("background", background),
        ("text", text),
        ("accent", accent),
        ("error", error),
    ];
    let mut encoded = HashMap::new();
    for (role, value) in roles {
        if let Some(value) = value {
            let field = format!("{ROOT}.colors.{role}");
            encoded.insert(role.to_owned(), text::normalize_color(value, &field)?);
        }
    }
    Ok(encoded)
}

fn encode_texts(texts: &Texts) -> Result<HashMap<String, String>, BrandingError> {
    let Texts {
        title,
        welcome,
        footer,
        support,
    } = texts;
    let roles = [
        ("title", title, limits::TITLE_MAX_CHARS, false),
        ("welcome", welcome, limits::WELCOME_MAX_CHARS, true),
        ("footer", footer, limits::FOOTER_MAX_CHARS, true),
        ("support", support, limits::SUPPORT_MAX_CHARS, false),
    ];
    let mut encoded = HashMap::new();
    for (role, value, max_chars, line_breaks) in roles {
        if let Some(value) = value {
            let field = format!("{ROOT}.texts.{role}");
            text::check_text(value, &field, max_chars, line_breaks)?;
            encoded.insert(role.to_owned(), value.clone());
        }
    }
    Ok(encoded)
}
