//! The branding encoder: a good branding encodes, and every refusal names its field and kind.

use base64::Engine as _;
use nauthera_shared::branding::{BrandingErrorKind, encode};
use nauthera_shared::resources::branding_limits as limits;
use nauthera_shared::resources::{Colors, Logo, LogoMediaType, SignInBranding, Texts};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF";
const WEBP: &[u8] = b"RIFF\x24\0\0\0WEBPVP8 ";
const SVG: &str = r##"<?xml version="1.0"?>
<!-- the ACME logo -->
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 10 10">
  <defs><linearGradient id="g"><stop offset="0" stop-color="#fff"/></linearGradient></defs>
  <rect width="10" height="10" fill="url(#g)"/>
  <use xlink:href="#g"/>
  <image href="data:image/png;base64,iVBORw0KGgo="/>
</svg>"##;

fn logo(bytes: &[u8], media_type: LogoMediaType) -> SignInBranding {
    SignInBranding {
        logo: Some(Logo {
            data: b64(bytes),
            media_type,
        }),
        ..SignInBranding::default()
    }
}

fn svg(text: &str) -> SignInBranding {
    logo(text.as_bytes(), LogoMediaType::Svg)
}

fn colors(primary: &str) -> SignInBranding {
    SignInBranding {
        colors: Some(Colors {
            primary: Some(primary.into()),
            ..Colors::default()
        }),
        ..SignInBranding::default()
    }
}

fn texts(texts: Texts) -> SignInBranding {
    SignInBranding {
        texts: Some(texts),
        ..SignInBranding::default()
    }
}

fn css(css: &str) -> SignInBranding {
    SignInBranding {
        custom_css: Some(css.into()),
        ..SignInBranding::default()
    }
}

/// Asserts a refusal of `kind` at `field`, with a message that starts with the field.
#[track_caller]
fn refused(branding: SignInBranding, field: &str, kind: BrandingErrorKind) {
    let error = encode(&branding).expect_err("should be refused");
    assert_eq!((error.field.as_str(), error.kind), (field, kind), "{error}");
    assert!(
        error.to_string().starts_with(&format!("{field}: ")),
        "{error}"
    );
}

#[test]
fn a_good_branding_encodes_and_normalizes_colours() {
    let branding = SignInBranding {
        logo: Some(Logo {
            // Line breaks, as `base64` wraps them, are allowed.
            data: b64(SVG.as_bytes()).as_bytes().chunks(76).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join("\n"),
            media_type: LogoMediaType::Svg,
        }),
        colors: Some(Colors {
            primary: Some("#1A73E8".into()),
            background: Some("#FfF".into()),
            text: Some("#202124".into()),
            accent: None,
            error: Some("#abc".into()),
        }),
        texts: Some(Texts {
            title: Some("Sign in to ACME — Zürich".into()),
            welcome: Some("Welcome.\nSign in below.".into()),
            footer: None,
            support: Some("help@example.test".into()),
        }),
        custom_css: Some(
            "/* card */\n.card {\n\tborder-radius: 12px;\n\tbackground: url(\"data:image/png;base64,iVBORw0KGgo=\");\n}\n".into(),
        ),
    };
    let document = encode(&branding).unwrap();
    assert_eq!(document.logo, SVG.as_bytes());
    assert_eq!(document.logo_media_type, "image/svg+xml");
    assert_eq!(document.colors["primary"], "#1a73e8");
    assert_eq!(document.colors["background"], "#ffffff");
    assert_eq!(document.colors["error"], "#aabbcc");
    assert!(!document.colors.contains_key("accent"));
    assert_eq!(document.texts["welcome"], "Welcome.\nSign in below.");
    assert_eq!(document.texts.len(), 3);
    assert_eq!(document.custom_css, branding.custom_css.unwrap());
}

#[test]
fn every_raster_format_is_recognized_by_its_bytes() {
    for (bytes, media_type) in [
        (PNG, LogoMediaType::Png),
        (JPEG, LogoMediaType::Jpeg),
        (WEBP, LogoMediaType::Webp),
    ] {
        let document = encode(&logo(bytes, media_type)).unwrap();
        assert_eq!(document.logo_media_type, media_type.as_str());
    }
}

#[test]
fn an_empty_branding_encodes_to_an_empty_document() {
    assert_eq!(
        encode(&SignInBranding::default()).unwrap(),
        Default::default()
    );
}

// ---- logo ------------------------------------------------------------------------------------

#[test]
fn a_logo_that_is_not_base64_is_refused() {
    let branding = SignInBranding {
        logo: Some(Logo {
            data: "not base64!".into(),
            media_type: LogoMediaType::Png,
        }),
        ..SignInBranding::default()
    };
    refused(
        branding,
        "spec.branding.logo.data",
        BrandingErrorKind::LogoNotBase64,
    );
}

#[test]
fn an_empty_logo_is_refused() {
    let branding = SignInBranding {
        logo: Some(Logo {
            data: " \n".into(),
            media_type: LogoMediaType::Png,
        }),
        ..SignInBranding::default()
    };
    refused(
        branding,
        "spec.branding.logo.data",
        BrandingErrorKind::LogoEmpty,
    );
}

#[test]
fn a_logo_over_the_limit_is_refused_and_one_at_the_limit_is_not() {
    let mut at_limit = PNG.to_vec();
    at_limit.resize(limits::LOGO_MAX_BYTES, 0);
    assert!(encode(&logo(&at_limit, LogoMediaType::Png)).is_ok());
    at_limit.push(0);
    refused(
        logo(&at_limit, LogoMediaType::Png),
        "spec.branding.logo.data",
        BrandingErrorKind::LogoTooLarge,
    );
    let huge = "A".repeat(limits::LOGO_BASE64_MAX_CHARS * 2);
    let branding = SignInBranding {
        logo: Some(Logo {
            data: huge,
            media_type: LogoMediaType::Png,
        }),
        ..SignInBranding::default()
    };
    refused(
        branding,
        "spec.branding.logo.data",
        BrandingErrorKind::LogoTooLarge,
    );
}

#[test]
fn a_logo_whose_bytes_are_another_type_is_refused() {
    let field = "spec.branding.logo.mediaType";
    let kind = BrandingErrorKind::LogoMediaTypeMismatch;
    refused(logo(PNG, LogoMediaType::Jpeg), field, kind);
    refused(logo(JPEG, LogoMediaType::Webp), field, kind);
    refused(logo(SVG.as_bytes(), LogoMediaType::Png), field, kind);
    refused(logo(PNG, LogoMediaType::Svg), field, kind);
    refused(logo(b"GIF89a....", LogoMediaType::Png), field, kind);
    refused(svg("<html><svg></svg></html>"), field, kind);
    let error = encode(&logo(b"GIF89a", LogoMediaType::Png)).unwrap_err();
    assert!(
        error.detail.contains("not a PNG, JPEG, WebP or SVG image"),
        "{error}"
    );
}

#[test]
fn svg_scripts_are_refused() {
    let field = "spec.branding.logo.data";
    for text in [
        r#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#,
        r#"<svg><SCRIPT type="text/javascript">x()</SCRIPT></svg>"#,
        r#"<svg><a href="javascript:alert(1)"><text>x</text></a></svg>"#,
        r#"<svg><foreignObject><div>html</div></foreignObject></svg>"#,
    ] {
        refused(svg(text), field, BrandingErrorKind::SvgScript);
    }
}

#[test]
fn svg_event_handlers_are_refused() {
    for text in [
        r#"<svg onload="alert(1)"></svg>"#,
        r#"<svg><rect ONCLICK = 'x()'/></svg>"#,
        "<svg><g\nonmouseover=\"x()\"/></svg>",
        r#"<svg><rect x="1"/onfocus="x()"/></svg>"#,
    ] {
        refused(
            svg(text),
            "spec.branding.logo.data",
            BrandingErrorKind::SvgEventHandler,
        );
    }
}

#[test]
fn svg_external_references_are_refused() {
    for text in [
        r#"<svg><image href="https://evil.example/x.png"/></svg>"#,
        r#"<svg><use xlink:href="other.svg#icon"/></svg>"#,
        r#"<svg><image href=//evil.example/x.png /></svg>"#,
        r#"<svg><rect style="fill: url(https://evil.example/p)"/></svg>"#,
        r#"<svg><style>@import "https://evil.example/x.css";</style></svg>"#,
        r#"<svg><image href="data:image/svg+xml;base64,PHN2Zz4="/></svg>"#,
        r#"<svg><image src="https://evil.example/x.png"/></svg>"#,
    ] {
        refused(
            svg(text),
            "spec.branding.logo.data",
            BrandingErrorKind::SvgExternalReference,
        );
    }
}

#[test]
fn svg_doctypes_and_entities_are_refused() {
    let text = r#"<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg>&x;</svg>"#;
    refused(
        svg(text),
        "spec.branding.logo.data",
        BrandingErrorKind::SvgDoctype,
    );
}

// ---- colours ---------------------------------------------------------------------------------

#[test]
fn colours_that_are_not_hex_are_refused() {
    for value in [
        "1a73e8",
        "#1a73e",
        "#12345g",
        "red",
        "#",
        "#1a73e8ff",
        "rgb(0,0,0)",
    ] {
        refused(
            colors(value),
            "spec.branding.colors.primary",
            BrandingErrorKind::ColorInvalid,
        );
    }
    let branding = SignInBranding {
        colors: Some(Colors {
            error: Some("#ggg".into()),
            ..Colors::default()
        }),
        ..SignInBranding::default()
    };
    refused(
        branding,
        "spec.branding.colors.error",
        BrandingErrorKind::ColorInvalid,
    );
}

// ---- texts -----------------------------------------------------------------------------------

#[test]
fn texts_over_their_limits_are_refused_and_at_their_limits_are_not() {
    let cases = [
        ("title", limits::TITLE_MAX_CHARS),
        ("welcome", limits::WELCOME_MAX_CHARS),
        ("footer", limits::FOOTER_MAX_CHARS),
        ("support", limits::SUPPORT_MAX_CHARS),
    ];
    for (role, max) in cases {
        let set = |value: String| {
            let mut t = Texts::default();
            *match role {
                "title" => &mut t.title,
                "welcome" => &mut t.welcome,
                "footer" => &mut t.footer,
                _ => &mut t.support,
            } = Some(value);
            texts(t)
        };
        // Characters, not bytes.
        assert!(encode(&set("ü".repeat(max))).is_ok(), "{role}");
        refused(
            set("ü".repeat(max + 1)),
            &format!("spec.branding.texts.{role}"),
            BrandingErrorKind::TextTooLong,
        );
    }
}

#[test]
fn empty_texts_are_refused() {
    refused(
        texts(Texts {
            footer: Some(String::new()),
            ..Texts::default()
        }),
        "spec.branding.texts.footer",
        BrandingErrorKind::TextEmpty,
    );
}

#[test]
fn control_characters_in_texts_are_refused() {
    let kind = BrandingErrorKind::TextControlCharacter;
    refused(
        texts(Texts {
            title: Some("A\nB".into()),
            ..Texts::default()
        }),
        "spec.branding.texts.title",
        kind,
    );
    refused(
        texts(Texts {
            support: Some("a\u{7}".into()),
            ..Texts::default()
        }),
        "spec.branding.texts.support",
        kind,
    );
    refused(
        texts(Texts {
            welcome: Some("a\r\nb".into()),
            ..Texts::default()
        }),
        "spec.branding.texts.welcome",
        kind,
    );
    refused(
        texts(Texts {
            footer: Some("a\u{1b}[31m".into()),
            ..Texts::default()
        }),
        "spec.branding.texts.footer",
        kind,
    );
}

// ---- custom CSS ------------------------------------------------------------------------------

#[test]
fn css_over_the_limit_is_refused() {
    let at_limit = "a".repeat(limits::CUSTOM_CSS_MAX_BYTES);
    assert!(encode(&css(&at_limit)).is_ok());
    refused(
        css(&format!("{at_limit}a")),
        "spec.branding.customCss",
        BrandingErrorKind::CssTooLarge,
    );
}

#[test]
fn css_control_characters_are_refused() {
    refused(
        css("a { color: red; }\u{0}"),
        "spec.branding.customCss",
        BrandingErrorKind::CssControlCharacter,
    );
}

#[test]
fn forbidden_css_constructs_are_refused_however_they_are_spelled() {
    for text in [
        "@import url(data:image/png;base64,x);",
        "@IMPORT 'https://evil.example/x.css';",
        "a { width: expression(alert(1)); }",
        "a { width: ex/* hidden */pression (alert(1)); }",
        "a { background: url(javascript:alert(1)); }",
        "a { background: url(https://evil.example/track.png); }",
        "a { background: URL( 'https://evil.example/t.png' ); }",
        "a { background: url(data:text/html,hi); }",
        "a { behavior: url(x.htc); }",
        "a { behavior : x; }",
        "a { -moz-binding: url(x.xml#b); }",
        "a {} </style><script>alert(1)</script>",
        "a { background: image-set('https://evil.example/x.png' 1x); }",
        r"a { background: \75rl(https://evil.example/x); }",
    ] {
        refused(
            css(text),
            "spec.branding.customCss",
            BrandingErrorKind::CssForbidden,
        );
    }
}

#[test]
fn errors_quote_at_most_an_excerpt() {
    let long = format!("#{}", "z".repeat(5000));
    let error = encode(&colors(&long)).unwrap_err();
    assert!(error.to_string().len() < 300, "{error}");
}
