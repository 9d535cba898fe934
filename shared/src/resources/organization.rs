//! `Organization`: a tenant of nauthera-server, with its issuer URL, default branding and FAPI mode.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::admission::RuleOutcome;
use super::branding::SignInBranding;
use super::common::{DISPLAY_NAME_PATTERN, DeletionPolicy, ISSUER_PATTERN, ManagementPolicy};
use super::status::ResourceStatus;

/// The CEL rules of the schema; `OrganizationSpec::rule_outcomes` mirrors them in Rust.
pub(crate) mod rules {
    pub const SLUG_IMMUTABLE: &str = "self.slug == oldSelf.slug";
}

/// An organization slug: a DNS label.
const SLUG_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// The declared state of an organization.
// Clippy takes kube's repeated `printcolumn(type_ = ...)` items for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nauthera.io",
    version = "v1alpha1",
    kind = "Organization",
    plural = "organizations",
    singular = "organization",
    shortname = "norg",
    category = "nauthera",
    namespaced,
    status = "ResourceStatus",
    derive = "PartialEq",
    doc = "An organization (tenant) of nauthera-server, declared by this manifest.",
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
    printcolumn(name = "Slug", type_ = "string", json_path = ".spec.slug"),
    printcolumn(
        name = "Issuer",
        type_ = "string",
        json_path = ".spec.issuer",
        priority = 1
    ),
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
        "rule": rules::SLUG_IMMUTABLE,
        "message": "spec.slug is immutable: it names the organization on the server"
    }
]))]
pub struct OrganizationSpec {
    /// The organization's slug on the server, a DNS label.
    #[schemars(length(min = 1, max = 63), regex(pattern = SLUG_PATTERN))]
    pub slug: String,
    /// The issuer URL the organization serves.
    #[schemars(length(max = 512), regex(pattern = ISSUER_PATTERN))]
    pub issuer: String,
    /// The organization's name for people. No control or bidirectional formatting characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200), regex(pattern = DISPLAY_NAME_PATTERN))]
    pub display_name: Option<String>,
    /// The organization's default sign-in branding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branding: Option<SignInBranding>,
    /// The FAPI profile the organization enforces on its clients.
    #[serde(default)]
    pub fapi_mode: FapiMode,
    /// What deleting this manifest does to the organization on the server. `Orphan` by default:
    /// deleting an organization deletes every client, branding and provider in it and signs out
    /// all its users, which a stray `kubectl delete -f` or a pruned directory must not do. Set
    /// `Delete` explicitly to tie the tenant's life to the manifest.
    #[serde(default = "DeletionPolicy::orphan")]
    pub deletion_policy: DeletionPolicy,
    /// `Observe`: the reconciler only reads the object on the server and reports how it differs
    /// from this manifest, never writing it; `Manage` (the default) writes it.
    #[serde(default, skip_serializing_if = "ManagementPolicy::is_manage")]
    pub management_policy: ManagementPolicy,
}

impl OrganizationSpec {
    /// The CEL rules evaluated in Rust on this spec; the transition rule only with the old spec.
    pub(crate) fn rule_outcomes(&self, old: Option<&Self>) -> Vec<RuleOutcome> {
        old.map(|old| RuleOutcome::new("spec", rules::SLUG_IMMUTABLE, self.slug == old.slug))
            .into_iter()
            .collect()
    }
}

/// The FAPI profile an organization enforces. "No profile" is spelled `Disabled` rather than
/// `Off`, which YAML 1.1 (and so kubectl) reads as the boolean `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum FapiMode {
    /// No FAPI requirements (`FAPI_MODE_OFF` on the server).
    #[default]
    Disabled,
    /// FAPI 1.0 Advanced: confidential clients with `private_key_jwt`, PKCE, https redirects.
    #[serde(rename = "FAPI1Advanced")]
    Fapi1Advanced,
    /// FAPI 2.0 Security Profile: as above, and no `refresh_token` without sender constraint.
    #[serde(rename = "FAPI2Security")]
    Fapi2Security,
}
