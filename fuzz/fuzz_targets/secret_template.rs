//! The files of `spec.secret.template` (MiniJinja templates a team writes) rendered as the
//! reconciler renders them: checked with placeholder facts, then rendered with a real client
//! secret. The input is two files and the issuer, cut at NUL bytes.
//!
//! Properties: nothing panics, loops stop (fuel) and output is bounded; a refusal names the
//! file's field; an error with the real facts never quotes the secret; the secret is delivered
//! under its key.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use nauthera_fuzz::texts;
use nauthera_shared::resources::SecretTemplate;
use nauthera_shared::secret_render::{self, SecretFacts};

const SECRET: &str = "Zq8vN3kPwX2mR7tY5bLc";

fuzz_target!(|data: &[u8]| {
    let [first, second, issuer] = texts::<3>(data);
    let files = BTreeMap::from([("app.env".to_owned(), first), ("cfg".to_owned(), second)]);
    // Built the way a manifest declares it: the other fields take their defaults.
    let template: SecretTemplate = serde_json::from_value(serde_json::json!({ "files": files }))
        .expect("a template of files decodes");
    if let Err(problem) = secret_render::check(&template, &issuer) {
        assert!(
            problem.field.starts_with("spec.secret.template.files["),
            "{problem}"
        );
    }
    let facts = SecretFacts {
        client_id: "billing-web",
        client_secret: SECRET,
        issuer: &issuer,
    };
    match secret_render::render(Some(&template), &facts) {
        Ok(rendered) => {
            assert_eq!(
                rendered
                    .data
                    .get(&rendered.client_secret_key)
                    .map(String::as_str),
                Some(SECRET)
            );
            let size: usize = rendered.data.values().map(String::len).sum();
            assert!(size <= 1024 * 1024, "{size} bytes rendered");
        }
        Err(problem) => {
            let typed = template.files.values().any(|file| file.contains(SECRET))
                || issuer.contains(SECRET);
            assert!(typed || !problem.to_string().contains(SECRET), "{problem}");
        }
    }
});
