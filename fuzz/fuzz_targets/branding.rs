//! The branding encoder (`nauthera_shared::branding::encode`, docs/branding.md) on what a
//! manifest declares, and the conversion of its result into the server's document. The first
//! byte picks what the rest is: an SVG, PNG, JPEG or WebP logo's bytes (base64-encoded here, so
//! that the image checks see them), a logo's base64 text as written, custom CSS, or colours or
//! texts (cut at NUL bytes, one per role).
//!
//! Properties: nothing panics; a refusal names a field under `spec.branding`; what encodes
//! converts into a document, which shown back as a manifest's branding encodes to the same
//! document.

#![no_main]

use base64::Engine;
use libfuzzer_sys::fuzz_target;
use nauthera_client::convert;
use nauthera_fuzz::texts;
use nauthera_shared::branding;
use nauthera_shared::resources::{Colors, Logo, LogoMediaType, SignInBranding, Texts};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let logo = |media_type, data| SignInBranding {
        logo: Some(Logo { data, media_type }),
        ..SignInBranding::default()
    };
    let encoded = || base64::engine::general_purpose::STANDARD.encode(rest);
    let text = || String::from_utf8_lossy(rest).into_owned();
    let manifest = match which % 8 {
        0 => logo(LogoMediaType::Svg, encoded()),
        1 => logo(LogoMediaType::Png, encoded()),
        2 => logo(LogoMediaType::Jpeg, encoded()),
        3 => logo(LogoMediaType::Webp, encoded()),
        4 => logo(LogoMediaType::Svg, text()),
        5 => SignInBranding {
            custom_css: Some(text()),
            ..SignInBranding::default()
        },
        6 => {
            let [primary, background, text, accent, error] = texts::<5>(rest).map(Some);
            SignInBranding {
                colors: Some(Colors {
                    primary,
                    background,
                    text,
                    accent,
                    error,
                }),
                ..SignInBranding::default()
            }
        }
        _ => {
            let [title, welcome, footer, support] = texts::<4>(rest).map(Some);
            SignInBranding {
                texts: Some(Texts {
                    title,
                    welcome,
                    footer,
                    support,
                }),
                ..SignInBranding::default()
            }
        }
    };
    match branding::encode(&manifest) {
        Err(refusal) => {
            assert!(refusal.field.starts_with("spec.branding."), "{refusal:?}");
            let _ = refusal.to_string();
            assert!(convert::branding_document(&manifest).is_err());
        }
        Ok(_) => {
            let document = convert::branding_document(&manifest).expect("what encodes converts");
            let shown = convert::sign_in_branding_from_document(&document)
                .expect("an encoded document shows as a branding");
            let again = convert::branding_document(&shown).expect("what was shown encodes");
            assert_eq!(again, document, "{manifest:?} shown as {shown:?}");
        }
    }
});
