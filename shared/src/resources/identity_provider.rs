//! `IdentityProvider`: an upstream identity provider users of an organization can sign in with.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::admission::RuleOutcome;
use super::common::{
    DISPLAY_NAME_PATTERN, DeletionPolicy, ISSUER_PATTERN, ManagementPolicy, SCOPE_PATTERN,
    SecretKeyRef,
};
use super::status::ResourceStatus;

/// The CEL rules of the schema; `IdentityProviderSpec::rule_outcomes` mirrors them in Rust.
pub(crate) mod rules {
    pub const URL_FOR_OIDC_AND_SAML: &str =
        "!(self.kind in ['oidc', 'saml']) || has(self.upstreamUrl)";
    pub const OAUTH_NEEDS_CLIENT: &str =
        "self.kind == 'saml' || (has(self.clientId) && has(self.secretRef))";
}

/// The declared state of an upstream identity provider.
// Clippy takes kube's repeated `printcolumn(type_ = ...)` items for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nauthera.io",
    version = "v1alpha1",
    kind = "IdentityProvider",
    plural = "identityproviders",
    singular = "identityprovider",
    shortname = "nidp",
    category = "nauthera",
    namespaced,
    status = "ResourceStatus",
    derive = "PartialEq",
    doc = "An upstream identity provider of an organization of nauthera-server, declared by this manifest.",
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
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.kind"),
    printcolumn(name = "Issuer", type_ = "string", json_path = ".spec.issuer"),
    printcolumn(name = "Revision", type_ = "string", json_path = ".status.revision"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": rules::URL_FOR_OIDC_AND_SAML,
        "message": "an oidc or saml provider needs spec.upstreamUrl (the upstream issuer or metadata URL)"
    },
    {
        "rule": rules::OAUTH_NEEDS_CLIENT,
        "message": "an OAuth provider needs spec.clientId and spec.secretRef (its upstream client secret)"
    }
]))]
pub struct IdentityProviderSpec {
    /// The issuer URL of the organization the provider belongs to.
    #[schemars(length(max = 512), regex(pattern = ISSUER_PATTERN))]
    pub issuer: String,
    /// The kind of upstream provider.
    pub kind: IdentityProviderKind,
    /// Shown on the sign-in page's button. No control or bidirectional formatting characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100), regex(pattern = DISPLAY_NAME_PATTERN))]
    pub display_name: Option<String>,
    /// The upstream issuer URL (oidc) or metadata URL (saml); not used by github, google and
    /// microsoft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = ISSUER_PATTERN))]
    pub upstream_url: Option<String>,
    /// The client id registered at the upstream provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub client_id: Option<String>,
    /// The Secret holding the client secret registered at the upstream provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyRef>,
    /// Scopes requested upstream.
    #[serde(default)]
    #[schemars(length(max = 50), inner(length(max = 128), regex(pattern = SCOPE_PATTERN)))]
    pub scopes: Vec<String>,
    /// Upstream claim names keyed by the server's claim names, for example `email: mail`.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 64))]
    pub claim_mapping: BTreeMap<String, String>,
    /// What deleting this manifest does to the provider on the server.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// `Observe`: the reconciler only reads the object on the server and reports how it differs
    /// from this manifest, never writing it; `Manage` (the default) writes it.
    #[serde(default, skip_serializing_if = "ManagementPolicy::is_manage")]
    pub management_policy: ManagementPolicy,
}

impl IdentityProviderSpec {
    /// The CEL rules evaluated in Rust on this spec.
    pub(crate) fn rule_outcomes(&self) -> Vec<RuleOutcome> {
        use IdentityProviderKind as Kind;
        vec![
            RuleOutcome::new(
                "spec",
                rules::URL_FOR_OIDC_AND_SAML,
                !matches!(self.kind, Kind::Oidc | Kind::Saml) || self.upstream_url.is_some(),
            ),
            RuleOutcome::new(
                "spec",
                rules::OAUTH_NEEDS_CLIENT,
                self.kind == Kind::Saml || (self.client_id.is_some() && self.secret_ref.is_some()),
            ),
        ]
    }
}

/// The kinds of upstream identity provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IdentityProviderKind {
    Oidc,
    Github,
    Google,
    Microsoft,
    Saml,
}
