//! Property-based fuzzing of the branding encoder (`nauthera_shared::branding::encode`, see
//! docs/branding.md and docs/fuzzing.md).
//!
//! Generated brandings are mostly near-valid (so that every check is reached) with hostile values
//! mixed in: any unicode, control characters, values at and just past every limit, huge values,
//! and the spellings attackers use (comments inside strings, character references, escapes).
//!
//! Properties: the encoder never panics and is deterministic; a refusal names a field of the
//! branding the input holds, a kind that belongs to that field and, for size refusals, the limit;
//! the first problem in manifest order is the one reported; and whatever encodes stays within the
//! documented limits, checked by oracles written independently of the encoder (for CSS and SVG a
//! small tokenizer of what a browser would load or run).
//!
//! `NAUTHERA_FUZZ_CASES` sets the number of cases (64 by default); nothing is persisted.

#![allow(clippy::unwrap_used)] // tests may unwrap

use base64::Engine as _;
use nauthera_shared::branding::{BrandingError, BrandingErrorKind, encode};
use nauthera_shared::resources::branding_limits as limits;
use nauthera_shared::resources::{Colors, Logo, LogoMediaType, SignInBranding, Texts};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config() -> Config {
    let cases = std::env::var("NAUTHERA_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.trim().parse().ok())
        .unwrap_or(64);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

/// Strings no manifest author means: empty, any unicode, control characters, format characters,
/// huge.
fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        any::<String>(),
        prop::collection::vec(any::<char>(), 0..200).prop_map(String::from_iter),
        "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}]{1,8}",
        "[\u{200b}\u{200e}\u{202e}\u{2028}\u{feff}\u{fffd} a]{1,20}",
        (0usize..40_000).prop_map(|n| "ä".repeat(n)),
        (0usize..40_000).prop_map(|n| "x".repeat(n)),
    ]
}

/// A character a text may hold: letters of several scripts and widths, emoji, punctuation.
fn text_char() -> impl Strategy<Value = char> {
    prop_oneof![
        8 => prop::char::range('a', 'z'),
        2 => Just(' '),
        1 => prop::sample::select(vec!['ü', 'ß', 'é', '中', '😀', '👍', '\u{301}', '<', '&', '"']),
        1 => any::<char>().prop_filter("printable", |c| !c.is_control()),
    ]
}

fn text_of(chars: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = String> {
    prop::collection::vec(text_char(), chars).prop_map(String::from_iter)
}

/// A text of a role: short and valid mostly, at and just past the limit, with a line break or a
/// control character, or hostile.
fn text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        6 => text_of(1..=40),
        1 => text_of(max..=max),
        1 => text_of(max + 1..=max + 1),
        1 => (text_of(1..=20), text_of(1..=20)).prop_map(|(a, b)| format!("{a}\n{b}")),
        1 => (text_of(0..=20), "[\\x00-\\x1f\\x7f\\u{85}]", text_of(0..=20))
            .prop_map(|(a, c, b)| format!("{a}{c}{b}")),
        2 => hostile_string(),
    ]
}

fn color() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "#[0-9a-fA-F]{6}",
        3 => "#[0-9a-fA-F]{3}",
        2 => "#[0-9a-fA-F]{0,9}",
        1 => "[0-9a-fA-F]{3,6}",
        1 => "#[0-9a-zA-Z]{3,6}",
        1 => prop::sample::select(vec![
            "#ＦＦＦ", "#١٢٣", "#fff\n", " #fff", "#fff ", "##fff", "#", "rgb(0,0,0)", "blue",
        ])
        .prop_map(String::from),
        1 => hostile_string(),
    ]
}

/// Pieces of CSS, harmless and hostile, and the spellings that hide the hostile ones.
const CSS_PIECES: &[&str] = &[
    ".card{color:#123}",
    "a{border-radius:4px}",
    " ",
    "\n",
    "\t",
    "\r\n",
    "\u{c}",
    "/*",
    "*/",
    "/* note */",
    "\"",
    "'",
    "url(",
    "URL(",
    "uRl (",
    "xurl(",
    "-url(",
    ")",
    "data:image/png;base64,AAAA",
    "\"data:image/png;base64,AAAA\"",
    "data:image/svg+xml,x",
    "data:text/html,x",
    "https://evil.example/t.png",
    "//evil.example/x",
    "#frag",
    "@import",
    "@IMPORT",
    "@im/**/port",
    "@font-face{src:",
    "expression(",
    "EX/**/PRESSION (",
    "javascript:",
    "JavaScript :",
    "behavior:",
    "behavior /**/:",
    "-moz-binding",
    "</style",
    "</STYLE>",
    "image-set(",
    "-webkit-image-set(",
    "\\",
    "\\75rl(",
    "\u{0}",
    "\u{b}",
    "\u{7f}",
    "İ",
    "ﬃ",
    "K",
    "background:",
    "content:",
    ";",
    "{",
    "}",
    ":",
    "a",
];

/// A declaration a stylesheet holds: mostly ordinary, some smuggling text in strings, comments
/// and unquoted URLs.
fn css_declaration() -> impl Strategy<Value = String> {
    let piece = || prop::sample::select(CSS_PIECES);
    let pieces = || prop::collection::vec(piece(), 0..4).prop_map(|p| p.concat());
    prop_oneof![
        3 => prop::sample::select(vec![
            "color:#202124", "margin:0 auto", "border-radius:12px", "font-family:\"Inter\",sans-serif",
        ])
        .prop_map(String::from),
        2 => pieces().prop_map(|p| format!("content:\"{p}\"")),
        1 => pieces().prop_map(|p| format!("content:'{p}'")),
        2 => pieces().prop_map(|p| format!("/*{p}*/")),
        2 => pieces().prop_map(|p| format!("background:url({p})")),
        2 => pieces().prop_map(|p| format!("background:url(\"{p}\")")),
        1 => pieces(),
    ]
}

fn custom_css() -> impl Strategy<Value = String> {
    let max = limits::CUSTOM_CSS_MAX_BYTES;
    prop_oneof![
        4 => prop::collection::vec(css_declaration(), 0..8)
            .prop_map(|declarations| format!(".card {{ {} }}", declarations.join("; "))),
        3 => prop::collection::vec(prop::sample::select(CSS_PIECES), 0..40).prop_map(|p| p.concat()),
        1 => (max - 2..=max + 2).prop_map(|n| "a".repeat(n)),
        1 => (max - 3..=max).prop_map(|n| format!("{}ü", "a".repeat(n - 1))),
        1 => hostile_string(),
    ]
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF";
const WEBP: &[u8] = b"RIFF\x24\0\0\0WEBPVP8 ";

/// Pieces of an SVG body, harmless and hostile.
const SVG_PIECES: &[&str] = &[
    "<rect width=\"10\" height=\"10\" fill=\"url(#g)\"/>",
    "<use xlink:href=\"#g\"/>",
    "<image href=\"data:image/png;base64,iVBORw0KGgo=\"/>",
    "<text>Hi &amp; bye</text>",
    "<linearGradient id=\"g\"><stop offset=\"0\"/></linearGradient>",
    "<g>",
    "</g>",
    " ",
    "\n",
    "<script>alert(1)</script>",
    "<SCRIPT>",
    "<rect onload=\"x()\"/>",
    "<rect/onclick = 'x()'/>",
    "<rect onion=\"x\"/>",
    "<a href=\"https://evil.example\">",
    "<a href = 'javascript:alert(1)'>",
    "<a href=\"java&#115;cript:alert(1)\">",
    "<image src=https://evil.example/x.png>",
    "<image href=\"data:image/svg+xml;base64,PHN2Zz4=\"/>",
    "<image xlink:href=\"&#104;ttps://evil.example\"/>",
    "<foreignObject><p>x</p></foreignObject>",
    "<!DOCTYPE svg [<!ENTITY x \"y\">]>",
    "<!ENTITY x SYSTEM \"file:///etc/passwd\">",
    "<style>@import url(https://evil.example/x.css);</style>",
    "<style>@&#105;mport 'https://evil.example/x.css';</style>",
    "<style>rect{fill:url( \"https://evil.example/x\")}</style>",
    "<rect style=\"fill:u&#114;l(https://evil.example/x)\"/>",
    "<rect style=\"fill:u&#x72;l(https://evil.example/x)\"/>",
    "<style>rect{fill:u\\72l(https://evil.example/x)}</style>",
    "<style>rect{fill:\\75 rl(https://evil.example/x)}</style>",
    "&#60;script&#62;",
    "on",
    "=",
    "\"",
    "'",
    ">",
    "href",
    "url(",
];

fn svg() -> impl Strategy<Value = String> {
    let prolog = prop::sample::select(vec![
        "",
        "\u{feff}",
        "<?xml version=\"1.0\"?>\n",
        "<!-- the logo -->\n",
        "<!DOCTYPE svg>\n",
        "<!DOCTYPE svg [ <!ENTITY a \">\"> ]>",
        "<?xml ",
        "<!-- unterminated",
        "  \n",
    ]);
    let root = prop::sample::select(vec![
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 10 10\">",
        "<svg>",
        "<SVG>",
        "<svg\n>",
        "<svg/>",
        "<svgx>",
        "<svg onload=\"alert(1)\">",
        "<svg xmlns:xlink=\"http://www.w3.org/1999/xlink\">",
        "<html>",
    ]);
    let body = prop::collection::vec(
        prop_oneof![
            6 => prop::sample::select(SVG_PIECES).prop_map(String::from),
            1 => "\\PC{0,20}",
        ],
        0..10,
    );
    (prolog, root, body)
        .prop_map(|(prolog, root, body)| format!("{prolog}{root}{}</svg>", body.concat()))
}

/// Logo bytes with the media type they are, if any.
fn logo_bytes() -> impl Strategy<Value = (Vec<u8>, Option<LogoMediaType>)> {
    let tail = || prop::collection::vec(any::<u8>(), 0..64);
    let with = |magic: &'static [u8], media_type| {
        tail().prop_map(move |tail| ([magic, &tail].concat(), Some(media_type)))
    };
    let max = limits::LOGO_MAX_BYTES;
    prop_oneof![
        2 => with(PNG, LogoMediaType::Png),
        1 => with(JPEG, LogoMediaType::Jpeg),
        1 => with(WEBP, LogoMediaType::Webp),
        5 => svg().prop_map(|text| (text.into_bytes(), Some(LogoMediaType::Svg))),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(|bytes| (bytes, None)),
        1 => Just((Vec::new(), None)),
        1 => (max - 1..=max + 1).prop_map(|n| {
            let mut bytes = PNG.to_vec();
            bytes.resize(n, 0);
            (bytes, Some(LogoMediaType::Png))
        }),
    ]
}

fn media_type() -> impl Strategy<Value = LogoMediaType> {
    prop::sample::select(LogoMediaType::ALL.to_vec())
}

fn logo() -> impl Strategy<Value = Logo> {
    let standard = base64::engine::general_purpose::STANDARD;
    let encoding = prop_oneof![
        6 => Just(0u8), // standard
        2 => Just(1),   // wrapped at 76 columns
        1 => Just(2),   // spaces between groups
        1 => Just(3),   // URL-safe alphabet
        1 => Just(4),   // no padding
        1 => Just(5),   // one character broken
    ];
    prop_oneof![
        8 => (logo_bytes(), media_type(), any::<bool>(), encoding, any::<prop::sample::Index>())
            .prop_map(move |((bytes, found), declared, honest, encoding, index)| {
                let media_type = match found {
                    Some(found) if honest => found,
                    _ => declared,
                };
                let encoded = standard.encode(&bytes);
                let data = match encoding {
                    1 => encoded
                        .as_bytes()
                        .chunks(76)
                        .map(|line| String::from_utf8_lossy(line).into_owned())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    2 => encoded
                        .as_bytes()
                        .chunks(4)
                        .map(|group| String::from_utf8_lossy(group).into_owned())
                        .collect::<Vec<_>>()
                        .join(" "),
                    3 => base64::engine::general_purpose::URL_SAFE.encode(&bytes),
                    4 => base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes),
                    5 if !encoded.is_empty() => {
                        let mut chars: Vec<char> = encoded.chars().collect();
                        let at = index.index(chars.len());
                        chars[at] = '!';
                        String::from_iter(chars)
                    }
                    _ => encoded,
                };
                Logo { data, media_type }
            }),
        1 => (hostile_string(), media_type()).prop_map(|(data, media_type)| Logo { data, media_type }),
    ]
}

fn colors() -> impl Strategy<Value = Colors> {
    let one = || prop::option::weighted(0.7, color());
    (one(), one(), one(), one(), one()).prop_map(|(primary, background, text, accent, error)| {
        Colors {
            primary,
            background,
            text,
            accent,
            error,
        }
    })
}

fn texts() -> impl Strategy<Value = Texts> {
    let one = |max| prop::option::weighted(0.7, text(max));
    (
        one(limits::TITLE_MAX_CHARS),
        one(limits::WELCOME_MAX_CHARS),
        one(limits::FOOTER_MAX_CHARS),
        one(limits::SUPPORT_MAX_CHARS),
    )
        .prop_map(|(title, welcome, footer, support)| Texts {
            title,
            welcome,
            footer,
            support,
        })
}

fn branding() -> impl Strategy<Value = SignInBranding> {
    (
        prop::option::weighted(0.5, logo()),
        prop::option::weighted(0.6, colors()),
        prop::option::weighted(0.6, texts()),
        prop::option::weighted(0.6, custom_css()),
    )
        .prop_map(|(logo, colors, texts, custom_css)| SignInBranding {
            logo,
            colors,
            texts,
            custom_css,
        })
}

// ---------------------------------------------------------------------------------------------
// Oracles, written from docs/branding.md and not from the encoder
// ---------------------------------------------------------------------------------------------

const COLOR_ROLES: [&str; 5] = ["primary", "background", "text", "accent", "error"];
/// Role, limit in characters, whether line breaks are allowed.
const TEXT_ROLES: [(&str, usize, bool); 4] = [
    ("title", limits::TITLE_MAX_CHARS, false),
    ("welcome", limits::WELCOME_MAX_CHARS, true),
    ("footer", limits::FOOTER_MAX_CHARS, true),
    ("support", limits::SUPPORT_MAX_CHARS, false),
];

fn color_of<'a>(colors: &'a Colors, role: &str) -> Option<&'a String> {
    match role {
        "primary" => colors.primary.as_ref(),
        "background" => colors.background.as_ref(),
        "text" => colors.text.as_ref(),
        "accent" => colors.accent.as_ref(),
        _ => colors.error.as_ref(),
    }
}

fn text_of_role<'a>(texts: &'a Texts, role: &str) -> Option<&'a String> {
    match role {
        "title" => texts.title.as_ref(),
        "welcome" => texts.welcome.as_ref(),
        "footer" => texts.footer.as_ref(),
        _ => texts.support.as_ref(),
    }
}

/// The fields of a branding, in manifest order, each as a branding holding only that field.
fn fields_in_order(branding: &SignInBranding) -> Vec<(String, SignInBranding)> {
    let mut out = Vec::new();
    if let Some(logo) = &branding.logo {
        out.push((
            "spec.branding.logo".to_owned(),
            SignInBranding {
                logo: Some(logo.clone()),
                ..SignInBranding::default()
            },
        ));
    }
    if let Some(colors) = &branding.colors {
        for role in COLOR_ROLES {
            if let Some(value) = color_of(colors, role) {
                let mut only = Colors::default();
                match role {
                    "primary" => only.primary = Some(value.clone()),
                    "background" => only.background = Some(value.clone()),
                    "text" => only.text = Some(value.clone()),
                    "accent" => only.accent = Some(value.clone()),
                    _ => only.error = Some(value.clone()),
                }
                out.push((
                    format!("spec.branding.colors.{role}"),
                    SignInBranding {
                        colors: Some(only),
                        ..SignInBranding::default()
                    },
                ));
            }
        }
    }
    if let Some(texts) = &branding.texts {
        for (role, _, _) in TEXT_ROLES {
            if let Some(value) = text_of_role(texts, role) {
                let mut only = Texts::default();
                match role {
                    "title" => only.title = Some(value.clone()),
                    "welcome" => only.welcome = Some(value.clone()),
                    "footer" => only.footer = Some(value.clone()),
                    _ => only.support = Some(value.clone()),
                }
                out.push((
                    format!("spec.branding.texts.{role}"),
                    SignInBranding {
                        texts: Some(only),
                        ..SignInBranding::default()
                    },
                ));
            }
        }
    }
    if let Some(css) = &branding.custom_css {
        out.push((
            "spec.branding.customCss".to_owned(),
            SignInBranding {
                custom_css: Some(css.clone()),
                ..SignInBranding::default()
            },
        ));
    }
    out
}

/// Whether a refusal's field belongs to the field the oracle split out (`logo` covers
/// `logo.data` and `logo.mediaType`).
fn belongs(error_field: &str, field: &str) -> bool {
    error_field == field || error_field.starts_with(&format!("{field}."))
}

/// The kinds a refusal of a field may have.
fn kind_fits(field: &str, kind: BrandingErrorKind) -> bool {
    use BrandingErrorKind as K;
    match field {
        "spec.branding.logo.data" => matches!(
            kind,
            K::LogoNotBase64
                | K::LogoEmpty
                | K::LogoTooLarge
                | K::SvgScript
                | K::SvgEventHandler
                | K::SvgExternalReference
                | K::SvgDoctype
        ),
        "spec.branding.logo.mediaType" => kind == K::LogoMediaTypeMismatch,
        "spec.branding.customCss" => {
            matches!(
                kind,
                K::CssTooLarge | K::CssControlCharacter | K::CssForbidden
            )
        }
        f if f.starts_with("spec.branding.colors.") => {
            COLOR_ROLES.contains(&&f["spec.branding.colors.".len()..]) && kind == K::ColorInvalid
        }
        f if f.starts_with("spec.branding.texts.") => {
            TEXT_ROLES
                .iter()
                .any(|(role, _, _)| f == format!("spec.branding.texts.{role}"))
                && matches!(
                    kind,
                    K::TextEmpty | K::TextTooLong | K::TextControlCharacter
                )
        }
        _ => false,
    }
}

/// A refusal is for people: it names its field, says what is wrong, never quotes much of the
/// value, and a size refusal names the limit.
fn check_refusal(error: &BrandingError) -> Result<(), TestCaseError> {
    prop_assert!(
        kind_fits(&error.field, error.kind),
        "{:?} does not fit {}",
        error.kind,
        error.field
    );
    prop_assert!(!error.detail.trim().is_empty(), "no detail: {error:?}");
    prop_assert!(
        error.detail.chars().count() <= 300,
        "the detail quotes too much: {} characters",
        error.detail.chars().count()
    );
    let limit = match error.kind {
        BrandingErrorKind::LogoTooLarge => Some(format!("{} KiB", limits::LOGO_MAX_BYTES / 1024)),
        BrandingErrorKind::CssTooLarge => Some(limits::CUSTOM_CSS_MAX_BYTES.to_string()),
        BrandingErrorKind::TextTooLong => TEXT_ROLES
            .iter()
            .find(|(role, _, _)| error.field.ends_with(role))
            .map(|(_, max, _)| format!("at most {max}")),
        _ => None,
    };
    if let Some(limit) = limit {
        prop_assert!(
            error.detail.contains(&limit),
            "the detail does not name the limit {limit}: {}",
            error.detail
        );
    }
    Ok(())
}

/// `#rgb` / `#rrggbb` as lower-case `#rrggbb`, by the documentation.
fn documented_color(value: &str) -> Option<String> {
    let hex = value.strip_prefix('#')?;
    if !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let hex = hex.to_ascii_lowercase();
    match hex.len() {
        3 => Some(format!(
            "#{}",
            hex.chars().flat_map(|c| [c, c]).collect::<String>()
        )),
        6 => Some(format!("#{hex}")),
        _ => None,
    }
}

fn documented_text(value: &str, max: usize, line_breaks: bool) -> bool {
    !value.is_empty()
        && value.chars().count() <= max
        && value
            .chars()
            .all(|c| !c.is_control() || (line_breaks && c == '\n'))
}

/// A CSS name code point (CSS Syntax 3, 4.2), after lower-casing.
fn is_name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' || !c.is_ascii()
}

fn is_css_newline(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{c}')
}

/// What a browser would load or run from a stylesheet without backslashes, by a tokenizer that
/// follows CSS Syntax 3 for comments, strings, `url(` tokens, functions and at-keywords; `None`
/// when nothing.
fn css_threat(css: &str) -> Option<String> {
    if css.contains('\\') {
        return Some("a backslash escape".into());
    }
    let lower = css.to_lowercase();
    if lower.contains("</style") {
        return Some("</style".into());
    }
    let chars: Vec<char> = lower.chars().collect();
    let mut i = 0;
    // The name of the ident just read, and whether it was followed by a colon (a property).
    let mut last_ident = String::new();
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            let rest: String = chars[i + 2..].iter().collect();
            i = match rest.find("*/") {
                Some(end) => i + 2 + rest[..end].chars().count() + 2,
                None => chars.len(),
            };
            continue;
        }
        if c == '"' || c == '\'' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != c && !is_css_newline(chars[j]) {
                j += 1;
            }
            let value: String = chars[i + 1..j.min(chars.len())].iter().collect();
            if value.contains("javascript:") {
                return Some(format!("a string {value:?}"));
            }
            i = j + 1;
            last_ident.clear();
            continue;
        }
        if c == '@' {
            let mut j = i + 1;
            while j < chars.len() && is_name_char(chars[j]) {
                j += 1;
            }
            let name: String = chars[i + 1..j].iter().collect();
            if name == "import" {
                return Some("@import".into());
            }
            i = j;
            continue;
        }
        if is_name_char(c) {
            let mut j = i;
            while j < chars.len() && is_name_char(chars[j]) {
                j += 1;
            }
            let name: String = chars[i..j].iter().collect();
            if chars.get(j) == Some(&'(') {
                let start = j + 1;
                if name == "url" {
                    let mut k = start;
                    while k < chars.len() && chars[k].is_whitespace() {
                        k += 1;
                    }
                    if !matches!(chars.get(k), Some('"' | '\'')) {
                        // An unquoted URL runs to `)`; comments are not comments inside it.
                        let mut end = k;
                        while end < chars.len() && chars[end] != ')' {
                            end += 1;
                        }
                        let value: String = chars[k..end].iter().collect();
                        if !value.trim().starts_with("data:image/") {
                            return Some(format!("url({value})"));
                        }
                        i = end + 1;
                        continue;
                    }
                    // `url(` followed by a string: the string is the URL.
                    let quote = chars[k];
                    let mut end = k + 1;
                    while end < chars.len() && chars[end] != quote && !is_css_newline(chars[end]) {
                        end += 1;
                    }
                    let value: String = chars[k + 1..end.min(chars.len())].iter().collect();
                    // `url("")` loads nothing (CSS Values 4: an invalid resource).
                    if !value.trim().is_empty() && !value.trim().starts_with("data:image/") {
                        return Some(format!("url({value:?})"));
                    }
                    i = end + 1;
                    continue;
                }
                if name == "expression" || name.ends_with("image-set") {
                    return Some(format!("{name}("));
                }
                i = start;
                continue;
            }
            if name == "-moz-binding" {
                return Some(name);
            }
            last_ident = name;
            i = j;
            continue;
        }
        if c == ':' && last_ident == "behavior" {
            return Some("behavior:".into());
        }
        if !c.is_whitespace() {
            last_ident.clear();
        }
        i += 1;
    }
    None
}

/// Decodes XML character references (`&#106;`, `&#x6a;`), as an XML parser does before a
/// browser sees an attribute value or a style sheet.
fn decode_references(text: &str) -> String {
    let re = regex::Regex::new(r"&#(x[0-9a-fA-F]+|[0-9]+);").unwrap();
    re.replace_all(text, |caps: &regex::Captures<'_>| {
        let code = &caps[1];
        let value = match code.strip_prefix('x') {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => code.parse().ok(),
        };
        value
            .and_then(char::from_u32)
            .map(String::from)
            .unwrap_or_default()
    })
    .into_owned()
}

fn is_local(value: &str) -> bool {
    let value = value.trim();
    value.starts_with('#')
        || (value.starts_with("data:image/") && !value.starts_with("data:image/svg"))
}

/// What an SVG would run or load from outside, as a browser sees it after XML decoding; `None`
/// when nothing.
fn svg_threat(svg: &str) -> Option<String> {
    let decoded = decode_references(svg).to_lowercase();
    if decoded.contains('\\') {
        return Some("a backslash escape (CSS can spell anything with it)".into());
    }
    for word in [
        "<script",
        "javascript:",
        "<foreignobject",
        "<!doctype",
        "<!entity",
        "@import",
    ] {
        if decoded.contains(word) {
            return Some(word.into());
        }
    }
    let handler = regex::Regex::new(r#"[ \t\r\n"'/]on[a-z0-9_-]+[ \t\r\n]*="#).unwrap();
    if let Some(found) = handler.find(&decoded) {
        return Some(found.as_str().into());
    }
    let reference = regex::Regex::new(
        r#"(?:^|[ \t\r\n:])(?:href|src)[ \t\r\n]*=[ \t\r\n]*("[^"]*"|'[^']*'|[^ \t\r\n>]*)"#,
    )
    .unwrap();
    for caps in reference.captures_iter(&decoded) {
        let value = caps[1].trim_matches(['"', '\'']);
        if !is_local(value) {
            return Some(format!("reference {value:?}"));
        }
    }
    let url = regex::Regex::new(r#"url\([ \t\r\n]*["']?([^)"']*)"#).unwrap();
    for caps in url.captures_iter(&decoded) {
        if !is_local(&caps[1]) {
            return Some(format!("url({})", &caps[1]));
        }
    }
    None
}

fn sniffed(bytes: &[u8]) -> Option<LogoMediaType> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(LogoMediaType::Png)
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(LogoMediaType::Jpeg)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(LogoMediaType::Webp)
    } else {
        std::str::from_utf8(bytes)
            .ok()
            .filter(|text| text.to_lowercase().contains("<svg"))
            .map(|_| LogoMediaType::Svg)
    }
}

/// An encoded branding holds exactly what the manifest said, normalized as documented, within
/// every documented limit.
fn check_encoded(
    branding: &SignInBranding,
    document: &nauthera_shared::branding::EncodedBranding,
) -> Result<(), TestCaseError> {
    match &branding.logo {
        Some(logo) => {
            let compact: String = logo
                .data
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            let decoded = base64::engine::general_purpose::STANDARD.decode(compact);
            prop_assert_eq!(decoded.as_ref().ok(), Some(&document.logo));
            prop_assert!(!document.logo.is_empty());
            prop_assert!(document.logo.len() <= limits::LOGO_MAX_BYTES);
            prop_assert_eq!(&document.logo_media_type, logo.media_type.as_str());
            prop_assert_eq!(sniffed(&document.logo), Some(logo.media_type));
            if logo.media_type == LogoMediaType::Svg {
                let text = std::str::from_utf8(&document.logo).unwrap_or_default();
                let threat = svg_threat(text);
                prop_assert!(
                    threat.is_none(),
                    "an SVG logo with {:?} was accepted: {:?}",
                    threat,
                    text
                );
            }
        }
        None => {
            prop_assert!(document.logo.is_empty() && document.logo_media_type.is_empty());
        }
    }
    let colors = branding.colors.clone().unwrap_or_default();
    for role in COLOR_ROLES {
        let declared = color_of(&colors, role);
        let expected = declared.map(|value| documented_color(value));
        prop_assert!(
            !matches!(expected, Some(None)),
            "colour {role} {declared:?} was accepted"
        );
        let expected = expected.flatten();
        prop_assert_eq!(document.colors.get(role), expected.as_ref());
    }
    prop_assert!(document.colors.len() <= COLOR_ROLES.len());
    let texts = branding.texts.clone().unwrap_or_default();
    for (role, max, line_breaks) in TEXT_ROLES {
        let declared = text_of_role(&texts, role);
        if let Some(value) = declared {
            prop_assert!(
                documented_text(value, max, line_breaks),
                "text {role} {value:?} was accepted"
            );
        }
        prop_assert_eq!(document.texts.get(role), declared);
    }
    prop_assert!(document.texts.len() <= TEXT_ROLES.len());
    match &branding.custom_css {
        Some(css) => {
            prop_assert_eq!(&document.custom_css, css);
            prop_assert!(css.len() <= limits::CUSTOM_CSS_MAX_BYTES);
            prop_assert!(
                css.chars()
                    .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r' | '\u{c}')),
                "CSS with a control character was accepted: {css:?}"
            );
            let threat = css_threat(css);
            prop_assert!(
                threat.is_none(),
                "CSS with {:?} was accepted: {:?}",
                threat,
                css
            );
        }
        None => prop_assert!(document.custom_css.is_empty()),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Never panics, is deterministic, refuses with a field and a limit, reports the first
    /// problem in manifest order, and what it encodes is within the documented limits.
    #[test]
    fn the_encoder_encodes_or_names_the_first_problem(branding in branding()) {
        let first = encode(&branding);
        prop_assert_eq!(&first, &encode(&branding.clone()), "not deterministic");
        let mut first_problem = None;
        for (field, only) in fields_in_order(&branding) {
            if let Err(error) = encode(&only) {
                prop_assert!(
                    belongs(&error.field, &field),
                    "{} refused for {}",
                    error.field,
                    field
                );
                first_problem.get_or_insert(error);
            }
        }
        match (&first, first_problem) {
            (Ok(document), None) => check_encoded(&branding, document)?,
            (Err(error), Some(expected)) => {
                check_refusal(error)?;
                prop_assert_eq!(error, &expected, "not the first problem in manifest order");
            }
            (Ok(_), Some(expected)) => {
                prop_assert!(false, "encoded, but {} alone is refused", expected);
            }
            (Err(error), None) => {
                prop_assert!(false, "refused with {}, but every field alone encodes", error);
            }
        }
    }

    /// Custom CSS on its own, where most of the hostile spellings are.
    #[test]
    fn custom_css_encodes_only_without_threats(css in custom_css()) {
        let branding = SignInBranding {
            custom_css: Some(css),
            ..SignInBranding::default()
        };
        match encode(&branding) {
            Ok(document) => check_encoded(&branding, &document)?,
            Err(error) => check_refusal(&error)?,
        }
    }

    /// An SVG logo on its own, declared as SVG.
    #[test]
    fn svg_logos_encode_only_without_threats(text in svg()) {
        let branding = SignInBranding {
            logo: Some(Logo {
                data: base64::engine::general_purpose::STANDARD.encode(&text),
                media_type: LogoMediaType::Svg,
            }),
            ..SignInBranding::default()
        };
        match encode(&branding) {
            Ok(document) => check_encoded(&branding, &document)?,
            Err(error) => check_refusal(&error)?,
        }
    }
}

/// The oracles themselves find what they are meant to find (so that a property that passes is
/// not passing because its oracle sees nothing).
#[test]
fn the_oracles_see_the_threats() {
    for threat in [
        "a{background:url(https://evil.example/x)}",
        "a{background:URL( 'https://evil.example/x' )}",
        "@import 'x.css';",
        "a{width:expression(alert(1))}",
        "a{behavior :url(x.htc)}",
        "a{content:\"/*\"} b{background:url(https://evil.example/x)} c{content:\"*/\"}",
        "a{background:url(data:image//*)} b{background:url(https://evil.example/x)} c{x:\"*/\"}",
    ] {
        assert!(css_threat(threat).is_some(), "{threat}");
    }
    for harmless in [
        ".card{border-radius:12px}",
        "a{background:url(\"data:image/png;base64,AAAA\")}",
        "/* url(https://x) */ a{color:red}",
        "a{content:\"url(https://x)\"}",
        "xurl(https://x)",
    ] {
        assert_eq!(css_threat(harmless), None, "{harmless}");
    }
    for threat in [
        "<svg><rect style=\"fill:u&#114;l(https://evil.example/x)\"/></svg>",
        "<svg><style>@&#105;mport 'x.css';</style></svg>",
        "<svg><a href=\"java&#115;cript:alert(1)\"/></svg>",
        "<svg onload=\"x()\">",
        "<svg><image src=https://x/></svg>",
        "<svg><style>rect{fill:u\\72l(https://evil.example/x)}</style></svg>",
    ] {
        assert!(svg_threat(threat).is_some(), "{threat}");
    }
    assert_eq!(
        svg_threat(
            "<svg><rect fill=\"url(#g)\"/><use xlink:href=\"#g\"/><text>a &amp; b</text></svg>"
        ),
        None
    );
}

/// What these properties found, kept as plain cases.
#[test]
fn what_fuzzing_found_stays_refused() {
    let css = |text: &str| SignInBranding {
        custom_css: Some(text.into()),
        ..SignInBranding::default()
    };
    for text in [
        // The HTML parser ends the <style> element inside a CSS comment.
        "a{} /*</style><script>alert(1)</script>*/",
        // `/*` inside a string starts no comment: the URL between is live.
        "a{content:\"/*\"} b{background:url(https://evil.example/x)} c{content:\"*/\"}",
        // Nor inside an unquoted url(...).
        "a{background:url(data:image//*)} b{background:url(https://evil.example/x)} c{x:\"*/\"}",
    ] {
        let error = encode(&css(text)).unwrap_err();
        assert_eq!(error.kind, BrandingErrorKind::CssForbidden, "{text}");
    }
    let svg = |text: &str| SignInBranding {
        logo: Some(Logo {
            data: base64::engine::general_purpose::STANDARD.encode(text),
            media_type: LogoMediaType::Svg,
        }),
        ..SignInBranding::default()
    };
    for text in [
        // Character references spell what the checks look for.
        "<svg><rect style=\"fill:u&#114;l(https://evil.example/x)\"/></svg>",
        "<svg><style>@&#x69;mport 'https://evil.example/x.css';</style></svg>",
        "<svg><a href=\"#\" o&#110;click=\"x()\"/></svg>",
        "<svg><rect onload&#61;\"x()\"/></svg>",
        // So do CSS escapes.
        "<svg><style>rect{fill:u\\72l(https://evil.example/x)}</style></svg>",
    ] {
        let error = encode(&svg(text)).unwrap_err();
        assert_eq!(error.field, "spec.branding.logo.data", "{text}");
    }
    // What stays allowed.
    encode(&svg(
        "<svg><text>a &amp; b &#169; 2024</text><rect fill=\"url(#g)\"/></svg>",
    ))
    .unwrap();
    encode(&css(
        ".card { content: \"a /* b */ c\"; background: url(data:image/png;base64,AAAA) }",
    ))
    .unwrap();
}
