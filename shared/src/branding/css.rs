//! Custom CSS: size, characters and forbidden constructs.

use super::{BrandingError, BrandingErrorKind};
use crate::resources::branding_limits as limits;

/// Constructs that run code, load outside resources or end the `<style>` element, as they appear
/// after lower-casing and removing comments and whitespace.
const FORBIDDEN: [&str; 7] = [
    "@import",
    "expression(",
    "javascript:",
    "behavior:",
    "-moz-binding",
    "</style",
    "image-set(",
];

/// Checks custom CSS.
pub(super) fn check(css: &str, field: &str) -> Result<(), BrandingError> {
    let refuse = |kind, detail: String| Err(BrandingError::new(field, kind, detail));
    if css.len() > limits::CUSTOM_CSS_MAX_BYTES {
        return refuse(
            BrandingErrorKind::CssTooLarge,
            format!(
                "{} bytes, at most {} allowed; keep only what the sign-in pages need",
                css.len(),
                limits::CUSTOM_CSS_MAX_BYTES
            ),
        );
    }
    if css
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\u{c}'))
    {
        return refuse(
            BrandingErrorKind::CssControlCharacter,
            String::from("holds a control character; only tabs and line breaks are allowed"),
        );
    }
    if css.contains('\\') {
        return refuse(
            BrandingErrorKind::CssForbidden,
            String::from(
                "holds a backslash escape, which can spell any forbidden word; write the characters themselves",
            ),
        );
    }
    // Without comments, so that `ex/**/pression(` is found; and with them, because nothing may
    // hide in one: the HTML parser ends the `<style>` element at a `</style` inside a comment,
    // and a `/*` inside a string or an unquoted `url(...)` starts no comment at all.
    for compact in [compact(css, true), compact(css, false)] {
        if let Some(word) = FORBIDDEN.iter().find(|word| compact.contains(*word)) {
            return refuse(
                BrandingErrorKind::CssForbidden,
                format!("holds `{word}`, which the sign-in pages do not allow; remove it"),
            );
        }
        let mut from = 0;
        while let Some(offset) = compact[from..].find("url(") {
            from += offset + "url(".len();
            if !compact[from..]
                .trim_start_matches(['"', '\''])
                .starts_with("data:image/")
            {
                return refuse(
                    BrandingErrorKind::CssForbidden,
                    String::from(
                        "holds `url(` with an outside address; only inline images (`url(data:image/...)`) are allowed",
                    ),
                );
            }
        }
    }
    Ok(())
}

/// Lower-cased, without whitespace and, if `without_comments`, without comments. An
/// unterminated comment runs to the end, as in CSS itself.
fn compact(css: &str, without_comments: bool) -> String {
    let lower = css.to_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut rest = lower.as_str();
    while let Some(start) = rest.find("/*").filter(|_| without_comments) {
        out.push_str(&rest[..start]);
        rest = match rest[start + 2..].find("*/") {
            Some(end) => &rest[start + 2 + end + 2..],
            None => "",
        };
    }
    out.push_str(rest);
    out.retain(|c| !c.is_whitespace());
    out
}
