//! Colours and texts.

use super::{BrandingError, BrandingErrorKind};

/// `#rgb` or `#rrggbb` (any case) as lower-case `#rrggbb`.
pub(super) fn normalize_color(value: &str, field: &str) -> Result<String, BrandingError> {
    let invalid = || {
        BrandingError::new(
            field,
            BrandingErrorKind::ColorInvalid,
            format!(
                "{:?} is not a colour; write `#rgb` or `#rrggbb`, for example #1a73e8",
                excerpt(value)
            ),
        )
    };
    let hex = value.strip_prefix('#').ok_or_else(invalid)?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid());
    }
    let hex = hex.to_ascii_lowercase();
    match hex.len() {
        3 => Ok(hex.chars().fold(String::from("#"), |mut out, c| {
            out.push(c);
            out.push(c);
            out
        })),
        6 => Ok(format!("#{hex}")),
        _ => Err(invalid()),
    }
}

/// A text of one role: not empty, not too long, no control characters (line breaks only where
/// the role allows them).
pub(super) fn check_text(
    value: &str,
    field: &str,
    max_chars: usize,
    line_breaks: bool,
) -> Result<(), BrandingError> {
    if value.is_empty() {
        return Err(BrandingError::new(
            field,
            BrandingErrorKind::TextEmpty,
            "the text is empty; leave the field out instead",
        ));
    }
    let chars = value.chars().count();
    if chars > max_chars {
        return Err(BrandingError::new(
            field,
            BrandingErrorKind::TextTooLong,
            format!("{chars} characters, at most {max_chars} allowed; shorten it"),
        ));
    }
    let allowed = |c: char| line_breaks && c == '\n';
    if let Some(position) = value.chars().position(|c| c.is_control() && !allowed(c)) {
        let what = if line_breaks {
            "other than line breaks"
        } else {
            "or line breaks"
        };
        return Err(BrandingError::new(
            field,
            BrandingErrorKind::TextControlCharacter,
            format!(
                "a control character at character {position}; no control characters {what} are allowed"
            ),
        ));
    }
    Ok(())
}

/// At most 40 characters of a value, for messages.
pub(super) fn excerpt(value: &str) -> String {
    let mut out: String = value.chars().take(40).collect();
    if value.chars().nth(40).is_some() {
        out.push('…');
    }
    out
}
