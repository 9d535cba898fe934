//! `OIDCClient`: an OAuth client registered in the organization its issuer selects.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::admission::RuleOutcome;
use super::common::{
    DISPLAY_NAME_PATTERN, DeletionPolicy, ISSUER_PATTERN, LocalRef, ManagementPolicy,
    OBJECT_NAME_PATTERN, REDIRECT_URI_PATTERN, SCOPE_PATTERN, SecretKeyRef,
};
use super::secret_rotation::SecretRotation;
use super::secret_template::SecretTemplate;
use super::status::ResourceStatus;

/// The CEL rules (`x-kubernetes-validations`) of the schema; `OIDCClientSpec::rule_outcomes`
/// mirrors them in Rust for local checks.
pub(crate) mod rules {
    pub const CONFIDENTIAL_NEEDS_SECRET: &str = "self.tokenEndpointAuthMethod in ['none', 'private_key_jwt'] || (has(self.secret) && (self.secret.generate || has(self.secret.secretRef)))";
    pub const PUBLIC_HAS_NO_SECRET: &str = "self.tokenEndpointAuthMethod != 'none' || !has(self.secret) || (!self.secret.generate && !has(self.secret.secretRef))";
    pub const AUTHORIZATION_CODE_NEEDS_REDIRECT: &str =
        "!('authorization_code' in self.grantTypes) || size(self.redirectUris) > 0";
    pub const SECRET_SOURCES_EXCLUSIVE: &str = "!(self.generate && has(self.secretRef))";
    pub const SECRET_NAME_NEEDS_GENERATE: &str = "!has(self.secretName) || self.generate";
    pub const TEMPLATE_NEEDS_GENERATE: &str = "!has(self.template) || self.generate";
    pub const RESTART_NEEDS_GENERATE: &str = "!has(self.restart) || self.generate";
    pub const ROTATION_NEEDS_GENERATE: &str = "!has(self.rotation) || self.generate";
    // `REDIRECT_URI_PATTERN` as a CEL string (each backslash doubled): a rule, not the schema's
    // `pattern`, so that a refusal says what is allowed instead of printing the expression.
    pub const REDIRECT_URIS_ALLOWED: &str = r"self.redirectUris.all(u, u.matches('^(https://[\\x21\\x22\\x24-\\x2e\\x30-\\x3e\\x40-\\x7e]+[\\x21\\x22\\x24-\\x7e]*|http://(127\\.0\\.0\\.1|\\[::1\\]|localhost)(:[0-9]{1,5})?([/?][\\x21\\x22\\x24-\\x7e]*)?)$'))";
    pub const POST_LOGOUT_REDIRECT_URIS_ALLOWED: &str = r"self.postLogoutRedirectUris.all(u, u.matches('^(https://[\\x21\\x22\\x24-\\x2e\\x30-\\x3e\\x40-\\x7e]+[\\x21\\x22\\x24-\\x7e]*|http://(127\\.0\\.0\\.1|\\[::1\\]|localhost)(:[0-9]{1,5})?([/?][\\x21\\x22\\x24-\\x7e]*)?)$'))";
}

/// What a redirect URI may be, in the words of the refusal (a macro so that `concat!` can join
/// it to each field's name).
macro_rules! redirect_uri_rule {
    () => {
        "must be https://, or http:// on a loopback address (127.0.0.1, [::1] or localhost) for \
         a native application, in printable ASCII without spaces or a fragment (#); a host with \
         letters beyond ASCII in its punycode form (xn--...)"
    };
}

/// Whether a redirect URI is one the rules allow: `REDIRECT_URI_PATTERN`, read as the API
/// server reads it.
fn redirect_uri_allowed(uri: &str) -> bool {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PATTERN
        .get_or_init(|| {
            crate::re2::compile(REDIRECT_URI_PATTERN).expect("the redirect URI pattern compiles")
        })
        .is_match(uri)
}

/// The declared state of an OAuth client.
// Clippy takes kube's repeated `printcolumn(type_ = ...)` items for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nauthera.io",
    version = "v1alpha1",
    kind = "OIDCClient",
    plural = "oidcclients",
    singular = "oidcclient",
    shortname = "oidcc",
    category = "nauthera",
    namespaced,
    status = "ResourceStatus",
    derive = "PartialEq",
    doc = "An OAuth client of nauthera-server, declared by this manifest.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.reason"),
    printcolumn(
        name = "Stalled",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Stalled\")].status"
    ),
    printcolumn(
        name = "Reconciling",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Reconciling\")].status",
        priority = 1
    ),
    printcolumn(name = "Client ID", type_ = "string", json_path = ".status.clientId"),
    printcolumn(name = "Revision", type_ = "string", json_path = ".status.revision"),
    printcolumn(
        name = "Issuer",
        type_ = "string",
        json_path = ".spec.issuer",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": rules::CONFIDENTIAL_NEEDS_SECRET,
        "message": "a confidential client (tokenEndpointAuthMethod client_secret_basic or client_secret_post) needs spec.secret.generate: true or spec.secret.secretRef"
    },
    {
        "rule": rules::PUBLIC_HAS_NO_SECRET,
        "message": "a public client (tokenEndpointAuthMethod none) has no secret: remove spec.secret"
    },
    {
        "rule": rules::AUTHORIZATION_CODE_NEEDS_REDIRECT,
        "message": "the authorization_code grant needs at least one entry in spec.redirectUris"
    },
    {
        "rule": rules::REDIRECT_URIS_ALLOWED,
        "fieldPath": ".redirectUris",
        "message": concat!("every redirect URI ", redirect_uri_rule!())
    },
    {
        "rule": rules::POST_LOGOUT_REDIRECT_URIS_ALLOWED,
        "fieldPath": ".postLogoutRedirectUris",
        "message": concat!("every post-logout redirect URI ", redirect_uri_rule!())
    }
]))]
pub struct OIDCClientSpec {
    /// The issuer URL of the organization the client belongs to, for example
    /// `https://login.example.com/acme`. It selects the organization.
    #[schemars(length(max = 512), regex(pattern = ISSUER_PATTERN))]
    pub issuer: String,
    /// Shown to end users on the consent page. No control or bidirectional formatting
    /// characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200), regex(pattern = DISPLAY_NAME_PATTERN))]
    pub display_name: Option<String>,
    /// Allowed redirect URIs: `https://`, or `http://` on a loopback address (127.0.0.1, [::1],
    /// localhost) for native applications.
    #[serde(default)]
    #[schemars(length(max = 50), inner(length(max = 2048)))]
    pub redirect_uris: Vec<String>,
    /// Allowed post-logout redirect URIs; same rules as `redirectUris`.
    #[serde(default)]
    #[schemars(length(max = 50), inner(length(max = 2048)))]
    pub post_logout_redirect_uris: Vec<String>,
    /// OAuth grant types.
    #[serde(default = "OIDCClientSpec::default_grant_types")]
    #[schemars(length(max = 4))]
    pub grant_types: Vec<GrantType>,
    /// OAuth response types: `code`, or none (`[]`) for clients without redirects.
    #[serde(default = "OIDCClientSpec::default_response_types")]
    #[schemars(length(max = 1))]
    pub response_types: Vec<ResponseType>,
    /// Scopes the client may request, for example `openid`, `profile`, `email`.
    #[serde(default)]
    #[schemars(length(max = 50), inner(length(max = 128), regex(pattern = SCOPE_PATTERN)))]
    pub scopes: Vec<String>,
    /// How the client authenticates at the token endpoint; `none` makes a public client.
    #[serde(default)]
    pub token_endpoint_auth_method: TokenEndpointAuthMethod,
    /// Whether PKCE (S256) is required on the authorization code flow.
    #[serde(default = "default_true")]
    pub require_pkce: bool,
    /// Where the client secret comes from; required for confidential clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ClientSecret>,
    /// What deleting this manifest does to the client on the server.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// `Observe`: the reconciler only reads the object on the server and reports how it differs
    /// from this manifest, never writing it; `Manage` (the default) writes it.
    #[serde(default, skip_serializing_if = "ManagementPolicy::is_manage")]
    pub management_policy: ManagementPolicy,
    /// A Branding in this namespace shown on the client's sign-in pages; the organization's
    /// default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branding_ref: Option<LocalRef>,
}

impl OIDCClientSpec {
    /// The CEL rules evaluated in Rust on this spec (defaults applied, as the API server does).
    pub(crate) fn rule_outcomes(&self) -> Vec<RuleOutcome> {
        use TokenEndpointAuthMethod as Method;
        let method = self.token_endpoint_auth_method;
        let secret = self.secret.as_ref();
        let mut outcomes = vec![
            RuleOutcome::new(
                "spec",
                rules::CONFIDENTIAL_NEEDS_SECRET,
                matches!(method, Method::None | Method::PrivateKeyJwt)
                    || secret.is_some_and(|s| s.generate || s.secret_ref.is_some()),
            ),
            RuleOutcome::new(
                "spec",
                rules::PUBLIC_HAS_NO_SECRET,
                method != Method::None
                    || secret.is_none_or(|s| !s.generate && s.secret_ref.is_none()),
            ),
            RuleOutcome::new(
                "spec",
                rules::AUTHORIZATION_CODE_NEEDS_REDIRECT,
                !self.grant_types.contains(&GrantType::AuthorizationCode)
                    || !self.redirect_uris.is_empty(),
            ),
            RuleOutcome::new(
                "spec",
                rules::REDIRECT_URIS_ALLOWED,
                self.redirect_uris
                    .iter()
                    .all(|uri| redirect_uri_allowed(uri)),
            ),
            RuleOutcome::new(
                "spec",
                rules::POST_LOGOUT_REDIRECT_URIS_ALLOWED,
                self.post_logout_redirect_uris
                    .iter()
                    .all(|uri| redirect_uri_allowed(uri)),
            ),
        ];
        // Rules of an object apply only when the object is there.
        if let Some(secret) = secret {
            outcomes.push(RuleOutcome::new(
                "spec.secret",
                rules::SECRET_SOURCES_EXCLUSIVE,
                !(secret.generate && secret.secret_ref.is_some()),
            ));
            outcomes.push(RuleOutcome::new(
                "spec.secret",
                rules::SECRET_NAME_NEEDS_GENERATE,
                secret.secret_name.is_none() || secret.generate,
            ));
            outcomes.push(RuleOutcome::new(
                "spec.secret",
                rules::TEMPLATE_NEEDS_GENERATE,
                secret.template.is_none() || secret.generate,
            ));
            if let Some(template) = &secret.template {
                outcomes.extend(template.rule_outcomes());
            }
            outcomes.push(RuleOutcome::new(
                "spec.secret",
                rules::RESTART_NEEDS_GENERATE,
                secret.restart.is_none() || secret.generate,
            ));
            outcomes.push(RuleOutcome::new(
                "spec.secret",
                rules::ROTATION_NEEDS_GENERATE,
                secret.rotation.is_none() || secret.generate,
            ));
            if let Some(rotation) = &secret.rotation {
                outcomes.extend(rotation.rule_outcomes());
            }
        }
        outcomes
    }

    fn default_grant_types() -> Vec<GrantType> {
        vec![GrantType::AuthorizationCode]
    }

    fn default_response_types() -> Vec<ResponseType> {
        vec![ResponseType::Code]
    }
}

fn default_true() -> bool {
    true
}

/// An OAuth grant type, serialized as its registered name.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum GrantType {
    #[serde(rename = "authorization_code")]
    AuthorizationCode,
    #[serde(rename = "refresh_token")]
    RefreshToken,
    #[serde(rename = "client_credentials")]
    ClientCredentials,
    #[serde(rename = "urn:ietf:params:oauth:grant-type:device_code")]
    DeviceCode,
}

impl GrantType {
    /// Every grant type, in declaration order.
    pub const ALL: [Self; 4] = [
        Self::AuthorizationCode,
        Self::RefreshToken,
        Self::ClientCredentials,
        Self::DeviceCode,
    ];

    /// The registered name, as in the manifest and the AdminService.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuthorizationCode => "authorization_code",
            Self::RefreshToken => "refresh_token",
            Self::ClientCredentials => "client_credentials",
            Self::DeviceCode => "urn:ietf:params:oauth:grant-type:device_code",
        }
    }

    /// The grant type of a registered name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.as_str() == name)
    }
}

/// An OAuth response type.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum ResponseType {
    #[serde(rename = "code")]
    Code,
}

impl ResponseType {
    /// Every response type.
    pub const ALL: [Self; 1] = [Self::Code];

    /// The registered name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Code => "code",
        }
    }

    /// The response type of a registered name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// How a client authenticates at the token endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum TokenEndpointAuthMethod {
    #[default]
    #[serde(rename = "client_secret_basic")]
    ClientSecretBasic,
    #[serde(rename = "client_secret_post")]
    ClientSecretPost,
    #[serde(rename = "private_key_jwt")]
    PrivateKeyJwt,
    /// A public client, without a secret.
    #[serde(rename = "none")]
    None,
}

impl TokenEndpointAuthMethod {
    /// Every method.
    pub const ALL: [Self; 4] = [
        Self::ClientSecretBasic,
        Self::ClientSecretPost,
        Self::PrivateKeyJwt,
        Self::None,
    ];

    /// The registered name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClientSecretBasic => "client_secret_basic",
            Self::ClientSecretPost => "client_secret_post",
            Self::PrivateKeyJwt => "private_key_jwt",
            Self::None => "none",
        }
    }

    /// The method of a registered name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// Where the client secret comes from: generated by the server (and delivered into a Secret the
/// reconciler owns), or read from a Secret the team holds. Exactly one of the two.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": rules::SECRET_SOURCES_EXCLUSIVE,
        "message": "spec.secret.generate and spec.secret.secretRef are exclusive: choose one"
    },
    {
        "rule": rules::SECRET_NAME_NEEDS_GENERATE,
        "message": "spec.secret.secretName names the Secret a generated secret is delivered into: it needs spec.secret.generate: true"
    },
    {
        "rule": rules::TEMPLATE_NEEDS_GENERATE,
        "message": "spec.secret.template shapes the Secret a generated secret is delivered into: it needs spec.secret.generate: true"
    },
    {
        "rule": rules::RESTART_NEEDS_GENERATE,
        "message": "spec.secret.restart restarts the workloads that read a generated secret's Secret when a new one is delivered: it needs spec.secret.generate: true"
    },
    {
        "rule": rules::ROTATION_NEEDS_GENERATE,
        "message": "spec.secret.rotation rotates a generated secret: it needs spec.secret.generate: true (a secret from secretRef is rotated by whoever holds it)"
    }
]))]
pub struct ClientSecret {
    /// The server generates the secret; the reconciler writes it into a Secret it owns.
    #[serde(default)]
    pub generate: bool,
    /// The name of the Secret a generated secret is delivered into; the resource's name when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = OBJECT_NAME_PATTERN))]
    pub secret_name: Option<String>,
    /// A Secret the team holds the client secret in; the reconciler reads it and never writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyRef>,
    /// The shape of the Secret a generated secret is delivered into: key names, extra files
    /// rendered from the facts, type, labels and annotations. Needs `generate: true`.
    // Boxed: most clients have none, and every cached client would carry its room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Box<SecretTemplate>>,
    /// Rotates a generated secret on a schedule (needs `generate: true`).
    // Boxed, as the template: most clients have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<Box<SecretRotation>>,
    /// What happens to the workloads that read the delivered Secret when a new client secret
    /// replaces the one they held: `Rollout` restarts them (see `WorkloadRestart`); absent, the
    /// `SecretRotated` event names them with the command that restarts each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<super::WorkloadRestart>,
}
