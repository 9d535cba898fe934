//! `spec.secret.template`: the shape of the Secret a generated client secret is delivered into
//! (its keys, extra files rendered from the facts, its type, labels and annotations). How it is
//! rendered is `crate::secret_render`'s.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::admission::RuleOutcome;
use super::common::SECRET_KEY_PATTERN;
use crate::ANNOTATION_PREFIX;

/// The CEL rules of `spec.secret.template`; `SecretTemplate::rule_outcomes` mirrors them.
pub(crate) mod rules {
    pub const KEYS_DISTINCT: &str = "[self.keys.clientId, self.keys.clientSecret, self.keys.issuer, self.keys.discoveryUrl, self.keys.tokenEndpoint].all(k, [self.keys.clientId, self.keys.clientSecret, self.keys.issuer, self.keys.discoveryUrl, self.keys.tokenEndpoint].exists_one(x, x == k))";
    pub const FILES_APART_FROM_KEYS: &str = "!self.files.exists(f, f in [self.keys.clientId, self.keys.clientSecret, self.keys.issuer, self.keys.discoveryUrl, self.keys.tokenEndpoint])";
    // `SECRET_KEY_PATTERN` as a CEL string.
    pub const FILE_NAMES_VALID: &str =
        r"self.files.all(f, size(f) <= 253 && f.matches('^[-._a-zA-Z0-9]+$'))";
    pub const TYPE_ALLOWED: &str = "self.type == 'Opaque' || self.type == 'kubernetes.io/basic-auth' || !self.type.startsWith('kubernetes.io/')";
    pub const BASIC_AUTH_HAS_ITS_KEYS: &str = "self.type != 'kubernetes.io/basic-auth' || self.keys.clientSecret == 'password' || (self.keys.clientId == 'username' && !('clientId' in self.omit))";
    // A qualified name (an optional DNS subdomain prefix and `/`, then at most 63 characters).
    pub const LABEL_KEYS_VALID: &str = r"self.labels.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))";
    pub const LABEL_VALUES_VALID: &str = r"self.labels.all(k, self.labels[k].matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$'))";
    pub const ANNOTATION_KEYS_VALID: &str = r"self.annotations.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))";
    pub const LABELS_NOT_RESERVED: &str =
        "self.labels.all(k, !k.startsWith('nauthera.io/') && k != 'app.kubernetes.io/managed-by')";
    pub const ANNOTATIONS_NOT_RESERVED: &str =
        "self.annotations.all(k, !k.startsWith('nauthera.io/'))";
}

/// The qualified-name pattern of `LABEL_KEYS_VALID` and `ANNOTATION_KEYS_VALID`, as Rust reads it.
const QUALIFIED_KEY_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
/// The label-value pattern of `LABEL_VALUES_VALID`.
const LABEL_VALUE_PATTERN: &str = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$";
/// The label every delivered Secret carries, which a template may not set.
const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// The shape of the Secret a generated secret is delivered into. Without it the Secret holds
/// `clientId`, `clientSecret`, `issuer` and `discoveryUrl`, of type Opaque; with it, each fact
/// under the key `keys` names (the token endpoint too, as `tokenEndpoint`), less those `omit`
/// names, and a key for each of `files`, rendered from the facts. Changing it rewrites the Secret
/// with the secret it holds: nothing new is minted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": rules::KEYS_DISTINCT,
        "fieldPath": ".keys",
        "message": "the five keys of spec.secret.template.keys must differ from each other (an omitted fact's too)"
    },
    {
        "rule": rules::FILES_APART_FROM_KEYS,
        "fieldPath": ".files",
        "message": "a key of spec.secret.template.files must differ from the keys in spec.secret.template.keys"
    },
    {
        "rule": rules::FILE_NAMES_VALID,
        "fieldPath": ".files",
        "message": "every key of spec.secret.template.files must be a valid Secret key: at most 253 letters, digits, '-', '_' or '.'"
    },
    {
        "rule": rules::TYPE_ALLOWED,
        "fieldPath": ".type",
        "message": "spec.secret.template.type must be Opaque, kubernetes.io/basic-auth, or a type of your own outside kubernetes.io/"
    },
    {
        "rule": rules::BASIC_AUTH_HAS_ITS_KEYS,
        "fieldPath": ".type",
        "message": "a kubernetes.io/basic-auth Secret needs a username or password key: set spec.secret.template.keys.clientSecret to password (or keys.clientId to username)"
    },
    {
        "rule": rules::LABEL_KEYS_VALID,
        "fieldPath": ".labels",
        "message": "every key of spec.secret.template.labels must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    },
    {
        "rule": rules::LABEL_VALUES_VALID,
        "fieldPath": ".labels",
        "message": "every value of spec.secret.template.labels must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    },
    {
        "rule": rules::ANNOTATION_KEYS_VALID,
        "fieldPath": ".annotations",
        "message": "every key of spec.secret.template.annotations must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    },
    {
        "rule": rules::LABELS_NOT_RESERVED,
        "fieldPath": ".labels",
        "message": "spec.secret.template.labels may not set nauthera.io/ labels or app.kubernetes.io/managed-by: the reconciler sets them"
    },
    {
        "rule": rules::ANNOTATIONS_NOT_RESERVED,
        "fieldPath": ".annotations",
        "message": "spec.secret.template.annotations may not set nauthera.io/ annotations: the reconciler sets them"
    }
]))]
pub struct SecretTemplate {
    /// The key each fact is delivered under.
    #[serde(default)]
    pub keys: SecretKeys,
    /// Facts left out of the Secret (`clientId`, `issuer`, `discoveryUrl`, `tokenEndpoint`); the
    /// client secret is always delivered, under `keys.clientSecret`, and a file may still use
    /// an omitted fact.
    #[serde(default)]
    #[schemars(length(max = 4))]
    pub omit: Vec<SecretFact>,
    /// Extra keys, each rendered from a template (Jinja syntax, MiniJinja) over the facts
    /// `clientId`, `clientSecret`, `issuer`, `discoveryUrl` and `tokenEndpoint`, for example an
    /// `oauth2-proxy.cfg` or an `.env` file. Any other name is an error; nothing but the
    /// Secret ever holds the rendered text.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 16, "additionalProperties" = {"type": "string", "maxLength": 16384}))]
    pub files: BTreeMap<String, String>,
    /// The Secret's type: `Opaque`, `kubernetes.io/basic-auth`, or a type of your own.
    /// Kubernetes does not change the type of a Secret: a new type replaces the Secret (deleted
    /// and created again with the same secret).
    #[serde(rename = "type", default = "SecretTemplate::default_type")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$")
    )]
    pub type_: String,
    /// Labels of the Secret, for tools that copy or select it (Reflector, Kyverno). Labels
    /// others add to the Secret are left alone.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 32, "additionalProperties" = {"type": "string", "maxLength": 63}))]
    pub labels: BTreeMap<String, String>,
    /// Annotations of the Secret, for tools that copy it (Reflector's
    /// `reflector.v1.k8s.emberstack.com/reflection-allowed`, say). Annotations others add are
    /// left alone.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 32, "additionalProperties" = {"type": "string", "maxLength": 4096}))]
    pub annotations: BTreeMap<String, String>,
}

/// The key names of the facts a delivered Secret holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeys {
    /// The key of the client id.
    #[serde(default = "SecretKeys::client_id")]
    #[schemars(length(min = 1, max = 253), regex(pattern = SECRET_KEY_PATTERN))]
    pub client_id: String,
    /// The key of the client secret.
    #[serde(default = "SecretKeys::client_secret")]
    #[schemars(length(min = 1, max = 253), regex(pattern = SECRET_KEY_PATTERN))]
    pub client_secret: String,
    /// The key of the issuer URL.
    #[serde(default = "SecretKeys::issuer")]
    #[schemars(length(min = 1, max = 253), regex(pattern = SECRET_KEY_PATTERN))]
    pub issuer: String,
    /// The key of the OpenID discovery document's URL (`<issuer>/.well-known/openid-configuration`).
    #[serde(default = "SecretKeys::discovery_url")]
    #[schemars(length(min = 1, max = 253), regex(pattern = SECRET_KEY_PATTERN))]
    pub discovery_url: String,
    /// The key of the token endpoint's URL (`<issuer>/oauth2/token`).
    #[serde(default = "SecretKeys::token_endpoint")]
    #[schemars(length(min = 1, max = 253), regex(pattern = SECRET_KEY_PATTERN))]
    pub token_endpoint: String,
}

impl Default for SecretKeys {
    fn default() -> SecretKeys {
        SecretKeys {
            client_id: SecretKeys::client_id(),
            client_secret: SecretKeys::client_secret(),
            issuer: SecretKeys::issuer(),
            discovery_url: SecretKeys::discovery_url(),
            token_endpoint: SecretKeys::token_endpoint(),
        }
    }
}

impl SecretKeys {
    fn client_id() -> String {
        "clientId".to_owned()
    }
    fn client_secret() -> String {
        "clientSecret".to_owned()
    }
    fn issuer() -> String {
        "issuer".to_owned()
    }
    fn discovery_url() -> String {
        "discoveryUrl".to_owned()
    }
    fn token_endpoint() -> String {
        "tokenEndpoint".to_owned()
    }

    /// The five key names, in the order of the facts.
    pub fn all(&self) -> [&str; 5] {
        [
            &self.client_id,
            &self.client_secret,
            &self.issuer,
            &self.discovery_url,
            &self.token_endpoint,
        ]
    }
}

/// A fact a template may leave out of the Secret (the client secret is always delivered).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SecretFact {
    ClientId,
    Issuer,
    DiscoveryUrl,
    TokenEndpoint,
}

impl SecretTemplate {
    fn default_type() -> String {
        "Opaque".to_owned()
    }

    /// Whether the template leaves a fact out.
    pub fn omits(&self, fact: SecretFact) -> bool {
        self.omit.contains(&fact)
    }

    /// The CEL rules evaluated in Rust on this template (defaults applied).
    pub(crate) fn rule_outcomes(&self) -> Vec<RuleOutcome> {
        const AT: &str = "spec.secret.template";
        let keys = self.keys.all();
        let label_key =
            |k: &String| k.len() <= 317 && matches(&QUALIFIED_KEY, QUALIFIED_KEY_PATTERN, k);
        vec![
            RuleOutcome::new(
                AT,
                rules::KEYS_DISTINCT,
                keys.iter()
                    .all(|k| keys.iter().filter(|x| *x == k).count() == 1),
            ),
            RuleOutcome::new(
                AT,
                rules::FILES_APART_FROM_KEYS,
                !self.files.keys().any(|f| keys.contains(&f.as_str())),
            ),
            RuleOutcome::new(
                AT,
                rules::FILE_NAMES_VALID,
                self.files.keys().all(|f| {
                    f.chars().count() <= 253 && matches(&SECRET_KEY, SECRET_KEY_PATTERN, f)
                }),
            ),
            RuleOutcome::new(
                AT,
                rules::TYPE_ALLOWED,
                self.type_ == "Opaque"
                    || self.type_ == "kubernetes.io/basic-auth"
                    || !self.type_.starts_with("kubernetes.io/"),
            ),
            RuleOutcome::new(
                AT,
                rules::BASIC_AUTH_HAS_ITS_KEYS,
                self.type_ != "kubernetes.io/basic-auth"
                    || self.keys.client_secret == "password"
                    || (self.keys.client_id == "username" && !self.omits(SecretFact::ClientId)),
            ),
            RuleOutcome::new(
                AT,
                rules::LABEL_KEYS_VALID,
                self.labels.keys().all(label_key),
            ),
            RuleOutcome::new(
                AT,
                rules::LABEL_VALUES_VALID,
                self.labels
                    .values()
                    .all(|v| matches(&LABEL_VALUE, LABEL_VALUE_PATTERN, v)),
            ),
            RuleOutcome::new(
                AT,
                rules::ANNOTATION_KEYS_VALID,
                self.annotations.keys().all(label_key),
            ),
            RuleOutcome::new(
                AT,
                rules::LABELS_NOT_RESERVED,
                self.labels
                    .keys()
                    .all(|k| !k.starts_with(ANNOTATION_PREFIX) && k != MANAGED_BY_LABEL),
            ),
            RuleOutcome::new(
                AT,
                rules::ANNOTATIONS_NOT_RESERVED,
                self.annotations
                    .keys()
                    .all(|k| !k.starts_with(ANNOTATION_PREFIX)),
            ),
        ]
    }
}

static SECRET_KEY: OnceLock<regex::Regex> = OnceLock::new();
static QUALIFIED_KEY: OnceLock<regex::Regex> = OnceLock::new();
static LABEL_VALUE: OnceLock<regex::Regex> = OnceLock::new();

/// Whether a text matches one of this module's patterns, read as the API server reads it.
fn matches(cell: &'static OnceLock<regex::Regex>, pattern: &str, text: &str) -> bool {
    cell.get_or_init(|| crate::re2::compile(pattern).expect("the template patterns compile"))
        .is_match(text)
}
