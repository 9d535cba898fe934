//! What a delivered Secret holds: the facts of a client (its id and secret, the issuer and the
//! URLs derived from it) in the shape `spec.secret.template` declares, rendered with MiniJinja.
//!
//! A template sees the five facts and nothing else (an unknown name is an error, not an empty
//! text), loads no other template, and its output goes into the Secret only. A rendering error
//! with the real facts names the file and line, never what was rendered; a check with
//! placeholder facts ([`check`]) may say more, since placeholders are no secret.

use std::collections::BTreeMap;
use std::fmt;

use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use sha2::{Digest, Sha256};

use crate::resources::{SecretFact, SecretTemplate};

/// The OpenID Connect discovery URL of an issuer.
pub fn discovery_url(issuer: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
}

/// The token endpoint of an issuer: `<issuer>/oauth2/token`, the path nauthera-server serves
/// it under. Derived, not read: the reconciler does not fetch the discovery document.
pub fn token_endpoint(issuer: &str) -> String {
    format!("{}/oauth2/token", issuer.trim_end_matches('/'))
}

/// The keys of a Secret delivered without a template.
pub const CLIENT_SECRET_KEY: &str = "clientSecret";
pub const CLIENT_ID_KEY: &str = "clientId";
pub const ISSUER_KEY: &str = "issuer";
pub const DISCOVERY_URL_KEY: &str = "discoveryUrl";

/// How much fuel (MiniJinja's count of instructions) one file may burn: plenty for a config
/// file, a stop for a loop that would run for ever.
const FUEL: u64 = 50_000;
/// The most text all files together may render to (a Secret holds at most 1 MiB).
const MAX_RENDERED: usize = 256 * 1024;

/// The facts a Secret is rendered from.
#[derive(Clone, Copy)]
pub struct SecretFacts<'a> {
    pub client_id: &'a str,
    pub client_secret: &'a str,
    pub issuer: &'a str,
}

impl fmt::Debug for SecretFacts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretFacts")
            .field("client_id", &self.client_id)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// A Secret's content as rendered: its data (which holds the secret: never shown, its `Debug`
/// names the keys only), type, and the metadata the template declares.
#[derive(Clone, PartialEq, Eq)]
pub struct RenderedSecret {
    pub type_: String,
    pub data: BTreeMap<String, String>,
    /// The key that holds the client secret.
    pub client_secret_key: String,
    /// The digest of the template (`None`: no template, the Secret of four keys).
    pub shape: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl fmt::Debug for RenderedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RenderedSecret")
            .field("type_", &self.type_)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .field("client_secret_key", &self.client_secret_key)
            .field("shape", &self.shape)
            .field("labels", &self.labels)
            .field("annotations", &self.annotations)
            .finish()
    }
}

/// Why a template cannot be rendered: the field, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateProblem {
    /// `spec.secret.template.files[NAME]`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for TemplateProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The digest of a template, recorded on the Secret written from it.
pub fn shape_digest(template: &SecretTemplate) -> String {
    let canonical = serde_json::to_vec(template).unwrap_or_default();
    let digest = Sha256::digest(&canonical);
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Checks that a template renders, with placeholder facts and the manifest's issuer: the check
/// of `diagnose -f` and of the reconciler before anything is sent.
pub fn check(template: &SecretTemplate, issuer: &str) -> Result<(), TemplateProblem> {
    let placeholders = SecretFacts {
        client_id: "placeholder-client-id",
        client_secret: "placeholder-client-secret",
        issuer,
    };
    render_files(template, &placeholders, true).map(|_| ())
}

/// The Secret's content for these facts, in the template's shape (none: the four keys of old).
pub fn render(
    template: Option<&SecretTemplate>,
    facts: &SecretFacts<'_>,
) -> Result<RenderedSecret, TemplateProblem> {
    let Some(template) = template else {
        return Ok(RenderedSecret {
            type_: "Opaque".to_owned(),
            data: BTreeMap::from([
                (CLIENT_SECRET_KEY.to_owned(), facts.client_secret.to_owned()),
                (CLIENT_ID_KEY.to_owned(), facts.client_id.to_owned()),
                (ISSUER_KEY.to_owned(), facts.issuer.to_owned()),
                (DISCOVERY_URL_KEY.to_owned(), discovery_url(facts.issuer)),
            ]),
            client_secret_key: CLIENT_SECRET_KEY.to_owned(),
            shape: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        });
    };
    let mut data = render_files(template, facts, false)?;
    let keys = &template.keys;
    data.insert(keys.client_secret.clone(), facts.client_secret.to_owned());
    let facts_by_key = [
        (
            SecretFact::ClientId,
            &keys.client_id,
            facts.client_id.to_owned(),
        ),
        (SecretFact::Issuer, &keys.issuer, facts.issuer.to_owned()),
        (
            SecretFact::DiscoveryUrl,
            &keys.discovery_url,
            discovery_url(facts.issuer),
        ),
        (
            SecretFact::TokenEndpoint,
            &keys.token_endpoint,
            token_endpoint(facts.issuer),
        ),
    ];
    for (fact, key, value) in facts_by_key {
        if !template.omits(fact) {
            data.insert(key.clone(), value);
        }
    }
    Ok(RenderedSecret {
        type_: template.type_.clone(),
        data,
        client_secret_key: keys.client_secret.clone(),
        shape: Some(shape_digest(template)),
        labels: template.labels.clone(),
        annotations: template.annotations.clone(),
    })
}

/// Renders each file of the template. `explain`: the facts are placeholders, so an error may
/// say what MiniJinja says; otherwise it names the kind of error and the line only.
fn render_files(
    template: &SecretTemplate,
    facts: &SecretFacts<'_>,
    explain: bool,
) -> Result<BTreeMap<String, String>, TemplateProblem> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_fuel(Some(FUEL));
    // A file ends as written, its last newline too.
    env.set_keep_trailing_newline(true);
    let context = minijinja::context! {
        clientId => facts.client_id,
        clientSecret => facts.client_secret,
        issuer => facts.issuer,
        discoveryUrl => discovery_url(facts.issuer),
        tokenEndpoint => token_endpoint(facts.issuer),
    };
    let mut rendered = BTreeMap::new();
    let mut total = 0;
    for (name, source) in &template.files {
        let field = || format!("spec.secret.template.files[{name}]");
        // Parsing sees the manifest's text only: its errors may be told in full.
        let compiled =
            env.template_from_named_str(name, source)
                .map_err(|error| TemplateProblem {
                    field: field(),
                    message: format!("{error}; fix the template"),
                })?;
        let text = compiled.render(&context).map_err(|error| TemplateProblem {
            field: field(),
            message: render_error(&error, explain),
        })?;
        total += text.len();
        if total > MAX_RENDERED {
            return Err(TemplateProblem {
                field: field(),
                message: format!(
                    "the files render to more than {} KiB; a Secret holds at most 1 MiB",
                    MAX_RENDERED / 1024
                ),
            });
        }
        rendered.insert(name.clone(), text);
    }
    Ok(rendered)
}

/// What a failed rendering says: in full for placeholder facts; with the real facts, only the
/// kind of error and where, since MiniJinja's detail may quote a value.
fn render_error(error: &minijinja::Error, explain: bool) -> String {
    let known = "the facts are clientId, clientSecret, issuer, discoveryUrl and tokenEndpoint";
    let line = error
        .line()
        .map_or_else(String::new, |l| format!(" at line {l}"));
    match (explain, error.kind()) {
        (_, minijinja::ErrorKind::UndefinedError) => {
            format!("{}{line}: {known}", error.kind())
        }
        (true, _) => format!("{error}; fix the template"),
        (false, kind) => format!("{kind}{line}; fix the template"),
    }
}

#[cfg(test)]
mod tests;
