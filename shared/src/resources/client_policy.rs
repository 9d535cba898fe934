//! `ClientPolicy` (cluster-scoped, owned by the security team): rules on what teams may register,
//! enforced at `kubectl apply` (a generated ValidatingAdmissionPolicy), by the reconciler and by
//! `kubectl nauthera diagnose -f`. `ClientApproval` (namespaced) approves one generation of an
//! OIDCClient that a policy holds for approval; only the security role may create one.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::identity_provider::IdentityProviderKind;
use super::oidc_client::{GrantType, ResponseType, TokenEndpointAuthMethod};

/// A host pattern: a DNS name, or `*.` followed by one (any name below it, not the name itself).
const HOST_PATTERN: &str =
    r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A path prefix: starts with `/`, printable ASCII without `?` and `#`.
const PATH_PREFIX_PATTERN: &str = r"^/[\x21\x22\x24-\x3e\x40-\x7e]*$";

/// An issuer URL, as the kinds' `spec.issuer` has it.
const ISSUER_PATTERN: &str = super::common::ISSUER_PATTERN;

/// Rules on what the resources it covers may declare.
// Clippy takes kube's repeated `printcolumn(type_ = ...)` items for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nauthera.io",
    version = "v1alpha1",
    kind = "ClientPolicy",
    plural = "clientpolicies",
    singular = "clientpolicy",
    shortname = "cpol",
    category = "nauthera",
    status = "ClientPolicyStatus",
    derive = "PartialEq",
    doc = "Rules of the security team on what teams may register with nauthera-server.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Stalled",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Stalled\")].status"
    ),
    printcolumn(
        name = "Violations",
        type_ = "integer",
        json_path = ".status.violations"
    ),
    printcolumn(
        name = "Awaiting approval",
        type_ = "integer",
        json_path = ".status.awaitingApproval"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClientPolicySpec {
    /// Which resources the rules cover; every OIDCClient, Branding and IdentityProvider when
    /// empty.
    #[serde(default, rename = "match")]
    pub coverage: PolicyMatch,
    /// The rules; a rule left out allows anything.
    #[serde(default)]
    pub rules: PolicyRules,
}

/// Which resources a policy covers: all the conditions hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyMatch {
    /// The namespaces, by their labels; every namespace when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// The kinds; all three when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    pub kinds: Vec<PolicyKind>,
    /// The issuers (`spec.issuer`); every issuer when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50), inner(length(max = 512), regex(pattern = ISSUER_PATTERN)))]
    pub issuers: Vec<String>,
}

/// A kind a policy can cover.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum PolicyKind {
    #[serde(rename = "OIDCClient")]
    OidcClient,
    Branding,
    IdentityProvider,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 3] = [
        PolicyKind::OidcClient,
        PolicyKind::Branding,
        PolicyKind::IdentityProvider,
    ];

    /// The kind, as manifests spell it.
    pub const fn as_str(self) -> &'static str {
        self.kind().as_str()
    }

    /// The resource's plural, as admission rules name it.
    pub const fn plural(self) -> &'static str {
        self.kind().plural()
    }

    /// The kind's row in the table of kinds.
    pub const fn kind(self) -> crate::kinds::Kind {
        crate::kinds::Kind::of_policy_kind(self)
    }

    pub fn from_kind(kind: &str) -> Option<PolicyKind> {
        PolicyKind::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

/// The rules of a policy. Each names the field it constrains; one left out allows anything.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRules {
    /// What an OIDCClient's `spec.redirectUris` may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uris: Option<UriRule>,
    /// What an OIDCClient's `spec.postLogoutRedirectUris` may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_logout_redirect_uris: Option<UriRule>,
    /// The grant types an OIDCClient may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_types: Option<Vec<GrantType>>,
    /// The response types an OIDCClient may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_types: Option<Vec<ResponseType>>,
    /// The token endpoint authentication methods an OIDCClient may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_methods: Option<Vec<TokenEndpointAuthMethod>>,
    /// The scopes an OIDCClient or IdentityProvider may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 100), inner(length(max = 128)))]
    pub scopes: Option<Vec<String>>,
    /// An OIDCClient must set `spec.requirePkce: true` (the default).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_pkce: bool,
    /// How many OIDCClients a namespace may hold under this policy; the ones created later wait
    /// as `PolicyViolation` until others are deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100000))]
    pub max_clients_per_namespace: Option<u32>,
    /// The kinds of upstream an IdentityProvider may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_provider_kinds: Option<Vec<IdentityProviderKind>>,
    /// Whether a Branding may carry `spec.branding.customCss`; allowed when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_custom_css: Option<bool>,
    /// Where a confidential OIDCClient's secret must come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_source: Option<SecretSource>,
    /// A new OIDCClient, or a change to one of the listed fields, waits until a ClientApproval
    /// approves its generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalRule>,
}

/// What a list of redirect URIs may hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UriRule {
    /// The schemes allowed on hosts other than loopback; `https` when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    pub schemes: Vec<UriScheme>,
    /// The hosts: a DNS name, or `*.example.com` for any name below `example.com`. Any host when
    /// empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50), inner(length(max = 253), regex(pattern = HOST_PATTERN)))]
    pub hosts: Vec<String>,
    /// The paths must start with one of these; a prefix not ending in `/` matches whole path
    /// segments (`/cb` matches `/cb` and `/cb/x`, not `/cbx`). Any path when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50), inner(length(max = 512), regex(pattern = PATH_PREFIX_PATTERN)))]
    pub path_prefixes: Vec<String>,
    /// Whether `http://` on a loopback address (127.0.0.1, [::1], localhost), for native
    /// applications, is allowed. A loopback host is refused otherwise, whatever its scheme.
    #[serde(default)]
    pub allow_loopback: bool,
}

/// A URI scheme a policy can allow.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum UriScheme {
    Https,
    Http,
}

impl UriScheme {
    pub const fn as_str(self) -> &'static str {
        match self {
            UriScheme::Https => "https",
            UriScheme::Http => "http",
        }
    }
}

/// Where a confidential client's secret must come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SecretSource {
    /// Generated by the server (`spec.secret.generate: true`) and delivered by the reconciler.
    Generated,
    /// Held by the team in a Secret (`spec.secret.secretRef`).
    SecretRef,
}

/// Which changes need an approval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRule {
    /// The OIDCClient fields whose change needs an approval; only new clients need one when
    /// empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<ApprovalField>,
}

/// An OIDCClient field an approval can be required for, as `spec` names it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalField {
    Issuer,
    DisplayName,
    RedirectUris,
    PostLogoutRedirectUris,
    GrantTypes,
    ResponseTypes,
    Scopes,
    TokenEndpointAuthMethod,
    RequirePkce,
    Secret,
    BrandingRef,
}

impl ApprovalField {
    /// The field's name under `spec`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ApprovalField::Issuer => "issuer",
            ApprovalField::DisplayName => "displayName",
            ApprovalField::RedirectUris => "redirectUris",
            ApprovalField::PostLogoutRedirectUris => "postLogoutRedirectUris",
            ApprovalField::GrantTypes => "grantTypes",
            ApprovalField::ResponseTypes => "responseTypes",
            ApprovalField::Scopes => "scopes",
            ApprovalField::TokenEndpointAuthMethod => "tokenEndpointAuthMethod",
            ApprovalField::RequirePkce => "requirePkce",
            ApprovalField::Secret => "secret",
            ApprovalField::BrandingRef => "brandingRef",
        }
    }
}

/// What the reconciler found about a policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientPolicyStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: the policy compiled and its admission policy is in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The ValidatingAdmissionPolicy (and binding) generated from this policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_policy: Option<String>,
    /// How many resources this policy holds back as `PolicyViolation`.
    #[serde(default)]
    pub violations: u32,
    /// How many resources wait for an approval this policy requires.
    #[serde(default)]
    pub awaiting_approval: u32,
    /// The resources held back, by kind, namespace and name (the first hundred).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldResource>,
    /// What each shard of the cluster (a reconciler started with `--shard`) holds back, by shard
    /// name: each shard's leader writes only its own entry, so that shards never overwrite each
    /// other's counts. The counts above are the unsharded reconciler's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shards: BTreeMap<String, ShardHolds>,
}

impl ClientPolicyStatus {
    /// Resources held as `PolicyViolation`, by every reconciler of the cluster.
    pub fn total_violations(&self) -> u32 {
        self.violations + self.shards.values().map(|s| s.violations).sum::<u32>()
    }

    /// Resources waiting for an approval, by every reconciler of the cluster.
    pub fn total_awaiting_approval(&self) -> u32 {
        self.awaiting_approval
            + self
                .shards
                .values()
                .map(|s| s.awaiting_approval)
                .sum::<u32>()
    }
}

/// What one shard's reconciler holds back under a policy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShardHolds {
    #[serde(default)]
    pub violations: u32,
    #[serde(default)]
    pub awaiting_approval: u32,
    /// The first hundred, by kind, namespace and name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldResource>,
}

/// A resource a policy holds back.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeldResource {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `PolicyViolation` or `WaitingForApproval`.
    pub reason: String,
    /// The rule that holds it (`redirectUris`, `approval`, ...).
    pub rule: String,
}

/// How many held resources a policy's status lists by name.
pub const HELD_LISTED: usize = 100;

/// An approval of one generation of an OIDCClient that a policy holds for approval. Create it
/// with `kubectl nauthera approve`; the security team's role may create these, teams may not.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nauthera.io",
    version = "v1alpha1",
    kind = "ClientApproval",
    plural = "clientapprovals",
    singular = "clientapproval",
    shortname = "cappr",
    category = "nauthera",
    namespaced,
    derive = "PartialEq",
    doc = "An approval of one generation of an OIDCClient, by the security team.",
    printcolumn(name = "Client", type_ = "string", json_path = ".spec.client"),
    printcolumn(name = "Generation", type_ = "integer", json_path = ".spec.generation"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self == oldSelf",
        "message": "an approval is not edited: create another one for the new generation"
    }
]))]
pub struct ClientApprovalSpec {
    /// The OIDCClient in this namespace.
    #[schemars(length(min = 1, max = 253), regex(pattern = super::common::OBJECT_NAME_PATTERN))]
    pub client: String,
    /// The `metadata.generation` approved.
    #[schemars(range(min = 1))]
    pub generation: i64,
    /// The OIDCClient's `metadata.uid`, so that an approval does not carry over to a client
    /// deleted and created again under the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub uid: Option<String>,
}
