//! Logo bytes: the media type by magic number, and what an SVG must not carry.

use super::text::excerpt;
use super::{BrandingError, BrandingErrorKind};
use crate::resources::LogoMediaType;

/// Checks that `bytes` are an image of `declared`, and a safe one if it is an SVG.
pub(super) fn check(
    bytes: &[u8],
    declared: LogoMediaType,
    media_type_field: &str,
    data_field: &str,
) -> Result<(), BrandingError> {
    let found = sniff(bytes);
    if found != Some(declared) {
        let found = found.map_or("not a PNG, JPEG, WebP or SVG image", LogoMediaType::as_str);
        return Err(BrandingError::new(
            media_type_field,
            BrandingErrorKind::LogoMediaTypeMismatch,
            format!(
                "says {} but the bytes are {found}; set the media type of the image, or supply one of that type",
                declared.as_str()
            ),
        ));
    }
    if declared == LogoMediaType::Svg {
        // `sniff` found an SVG, so the bytes are UTF-8. The checks read it as a browser does,
        // with character references decoded (`u&#114;l(` is `url(`).
        let svg = decode_character_references(&String::from_utf8_lossy(bytes)).to_lowercase();
        check_svg(&svg, data_field)?;
    }
    Ok(())
}

/// The media type the bytes say they are.
fn sniff(bytes: &[u8]) -> Option<LogoMediaType> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(LogoMediaType::Png)
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(LogoMediaType::Jpeg)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(LogoMediaType::Webp)
    } else if is_svg(bytes) {
        Some(LogoMediaType::Svg)
    } else {
        None
    }
}

/// UTF-8 text whose first element, after the prolog (XML declaration, comments, DOCTYPE), is
/// `<svg`.
fn is_svg(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let mut rest = text.trim_start_matches('\u{feff}');
    loop {
        rest = rest.trim_start();
        let end = if rest.starts_with("<?") {
            rest.find("?>").map(|end| end + 2)
        } else if rest.starts_with("<!--") {
            rest.find("-->").map(|end| end + 3)
        } else if rest.starts_with("<!") {
            // A DOCTYPE, possibly with an internal subset (`[...]`) holding `>` characters.
            let subset = rest
                .find('[')
                .filter(|&open| rest.find('>').is_some_and(|gt| open < gt));
            let from = subset.and_then(|open| rest[open..].find(']').map(|close| open + close));
            rest[from.unwrap_or(0)..]
                .find('>')
                .map(|end| from.unwrap_or(0) + end + 1)
        } else {
            break;
        };
        match end {
            Some(end) => rest = &rest[end..],
            None => return false,
        }
    }
    rest.strip_prefix("<svg")
        .and_then(|after| after.chars().next())
        .is_some_and(|c| c.is_whitespace() || c == '>' || c == '/')
}

/// The text with its XML character references (`&#114;`, `&#x72;`) replaced by their characters,
/// as an XML parser reads attribute values and text. A malformed reference is left as it is.
fn decode_character_references(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("&#") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let (digits, radix) = match after.strip_prefix(['x', 'X']) {
            Some(hex) => (hex, 16),
            None => (after, 10),
        };
        let decoded = digits.find(';').and_then(|end| {
            let code = u32::from_str_radix(&digits[..end], radix).ok()?;
            Some((char::from_u32(code)?, &digits[end + 1..]))
        });
        match decoded {
            Some((c, after_reference)) => {
                out.push(c);
                rest = after_reference;
            }
            None => {
                out.push_str("&#");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What a lower-cased SVG must not carry.
fn check_svg(svg: &str, field: &str) -> Result<(), BrandingError> {
    let refuse = |kind, what: &str| {
        Err(BrandingError::new(
            field,
            kind,
            format!(
                "the SVG logo {what}; remove it (a logo needs no scripts, handlers or outside resources)"
            ),
        ))
    };
    if svg.contains("<!doctype") || svg.contains("<!entity") {
        return refuse(
            BrandingErrorKind::SvgDoctype,
            "carries a DOCTYPE or entity declaration",
        );
    }
    if svg.contains("<script") {
        return refuse(BrandingErrorKind::SvgScript, "carries a <script> element");
    }
    if svg.contains("<foreignobject") {
        return refuse(
            BrandingErrorKind::SvgScript,
            "carries a <foreignObject> (HTML content)",
        );
    }
    if svg.contains("javascript:") {
        return refuse(BrandingErrorKind::SvgScript, "carries a javascript: URL");
    }
    if let Some(name) = event_handler(svg) {
        return refuse(
            BrandingErrorKind::SvgEventHandler,
            &format!("carries the event handler attribute {name}"),
        );
    }
    // A CSS escape (in a `<style>`, a `style` or a presentation attribute) spells anything:
    // `u\72l(` is `url(`.
    if svg.contains('\\') {
        return refuse(
            BrandingErrorKind::SvgExternalReference,
            "carries a backslash, which in its styles can spell `url(` or `@import`",
        );
    }
    if let Some(reference) = external_reference(svg) {
        return refuse(
            BrandingErrorKind::SvgExternalReference,
            &format!("references {:?} outside itself", excerpt(&reference)),
        );
    }
    Ok(())
}

/// The first `on...=` attribute, if any.
fn event_handler(svg: &str) -> Option<String> {
    let bytes = svg.as_bytes();
    let mut from = 0;
    while let Some(offset) = svg[from..].find("on") {
        let start = from + offset;
        from = start + 2;
        let preceded = start > 0
            && matches!(
                bytes[start - 1],
                b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'/'
            );
        if !preceded {
            continue;
        }
        let name_end = svg[start + 2..]
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
            .map_or(svg.len(), |n| start + 2 + n);
        if name_end == start + 2 {
            continue;
        }
        if svg[name_end..].trim_start().starts_with('=') {
            return Some(svg[start..name_end].to_owned());
        }
    }
    None
}

/// The first reference to anything but a fragment of the SVG or an inline raster image: the values
/// of `href`, `xlink:href` and `src` attributes, `url(...)` and `@import`.
fn external_reference(svg: &str) -> Option<String> {
    if svg.contains("@import") {
        return Some(String::from("@import"));
    }
    for attribute in ["href", "src"] {
        let mut from = 0;
        while let Some(offset) = svg[from..].find(attribute) {
            let start = from + offset;
            from = start + attribute.len();
            let preceded = start > 0
                && matches!(
                    svg.as_bytes()[start - 1],
                    b' ' | b'\t' | b'\n' | b'\r' | b':'
                );
            let Some(after_eq) = svg[from..].trim_start().strip_prefix('=') else {
                continue;
            };
            if !preceded {
                continue;
            }
            let value = after_eq.trim_start();
            let value = match value.chars().next() {
                Some(quote @ ('"' | '\'')) => value[1..].split(quote).next().unwrap_or_default(),
                _ => value
                    .split(|c: char| c.is_whitespace() || c == '>')
                    .next()
                    .unwrap_or_default(),
            };
            if !is_local_reference(value) {
                return Some(value.to_owned());
            }
        }
    }
    let mut from = 0;
    while let Some(offset) = svg[from..].find("url(") {
        let start = from + offset + "url(".len();
        from = start;
        let value = svg[start..].trim_start().trim_start_matches(['"', '\'']);
        if !is_local_reference(value) {
            return Some(value.split(')').next().unwrap_or_default().to_owned());
        }
    }
    None
}

/// A fragment of the document itself, or an inline raster image.
fn is_local_reference(value: &str) -> bool {
    let value = value.trim();
    value.starts_with('#')
        || (value.starts_with("data:image/") && !value.starts_with("data:image/svg"))
}
