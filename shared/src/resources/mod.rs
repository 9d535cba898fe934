//! The custom resources (group `nauthera.io`, version `v1alpha1`): the namespaced `OIDCClient`,
//! `Branding`, `IdentityProvider` and `Organization`; and the security team's `ClientPolicy`
//! (cluster-scoped) and `ClientApproval`. `spec` belongs to the manifest and `status`
//! (`ResourceStatus`, shared by every kind) to the reconciler.

mod admission;
mod adoption;
mod branding;
mod client_policy;
mod common;
mod identity_provider;
mod oidc_client;
mod organization;
mod secret_rotation;
mod secret_template;
mod status;
mod workload_restart;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use admission::{Violation, admission_violations};
pub use adoption::{AdoptSecret, AdoptedSecret, AdoptionRecord, ServerObject};
pub use branding::{
    Branding, BrandingSpec, Colors, Logo, LogoMediaType, SignInBranding, Texts, branding_limits,
};
pub use client_policy::{
    ApprovalField, ApprovalRule, ClientApproval, ClientApprovalSpec, ClientPolicy,
    ClientPolicySpec, ClientPolicyStatus, HELD_LISTED, HeldResource, PolicyKind, PolicyMatch,
    PolicyRules, SecretSource, ShardHolds, UriRule, UriScheme,
};
pub use common::{DeletionPolicy, LocalRef, ManagementPolicy, SecretKeyRef};
pub use identity_provider::{IdentityProvider, IdentityProviderKind, IdentityProviderSpec};
pub use oidc_client::{
    ClientSecret, GrantType, OIDCClient, OIDCClientSpec, ResponseType, TokenEndpointAuthMethod,
};
pub use organization::{FapiMode, Organization, OrganizationSpec};
pub use secret_rotation::{
    Day, Planned, RotationWindow, Schedule, SecretRotation, Window, parse_every,
};
pub use secret_template::{SecretFact, SecretKeys, SecretTemplate};
pub use status::{
    Abridged, ApprovalRecord, Drift, ManagedElsewhere, PolicyHold, ResourceStatus, RestoreOutcome,
    RestoreRecord, RotationOutcome, RotationRecord, SupersededDrift, TakeOverRecord,
    progress_conditions, ready_condition, reason_conditions, set_condition, set_conditions,
};
pub use workload_restart::{
    NotRestartedBecause, WorkloadNotRestarted, WorkloadRestart, WorkloadRestartRecord,
};

/// The CustomResourceDefinitions of every kind, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        OIDCClient::crd(),
        Branding::crd(),
        IdentityProvider::crd(),
        Organization::crd(),
        ClientPolicy::crd(),
        ClientApproval::crd(),
    ];
    crds.iter_mut().for_each(default_unjudged_status);
    crds
}

/// `status.observedGeneration` of an object the reconciler has not judged yet: no generation
/// (they start at 1).
pub const UNJUDGED_GENERATION: i64 = 0;

/// Gives a kind with a status a default one, `{observedGeneration: 0}`, which the API server
/// fills in on every read of an object whose status nobody wrote yet. A fresh object then reads
/// as InProgress to kstatus (`observedGeneration` differs from `metadata.generation`) instead of
/// Current, until the reconciler has judged it and written its conditions.
fn default_unjudged_status(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        let status = version
            .schema
            .as_mut()
            .and_then(|schema| schema.open_api_v3_schema.as_mut())
            .and_then(|schema| schema.properties.as_mut())
            .and_then(|properties| properties.get_mut("status"));
        if let Some(status) = status {
            status.default = Some(
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON(
                    serde_json::json!({ "observedGeneration": UNJUDGED_GENERATION }),
                ),
            );
        }
    }
}

/// The kinds that live in an organization named by `spec.issuer`.
pub trait IssuerScoped {
    /// The organization's issuer URL the manifest names.
    fn issuer(&self) -> &str;
}

impl IssuerScoped for OIDCClient {
    fn issuer(&self) -> &str {
        &self.spec.issuer
    }
}

impl IssuerScoped for Branding {
    fn issuer(&self) -> &str {
        &self.spec.issuer
    }
}

impl IssuerScoped for IdentityProvider {
    fn issuer(&self) -> &str {
        &self.spec.issuer
    }
}

impl IssuerScoped for Organization {
    fn issuer(&self) -> &str {
        &self.spec.issuer
    }
}

#[cfg(test)]
mod tests;
