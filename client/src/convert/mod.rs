//! Conversions between the resources and the AdminService messages (`nauthera_proto::v1`).
//!
//! - `*_spec` functions turn a manifest's spec into the proto spec the server is sent; secret
//!   values (read by the caller from a Secret) are passed in separately and never stored in the
//!   resource types.
//! - `*_from_server` functions turn what the server holds back into spec fields, for showing it
//!   next to the manifest; fields only the manifest knows (issuer, deletion policy, Secret names)
//!   are taken from the declared spec.
//! - `apply_*_request`, `get_*_request` and `delete_*_request` build whole requests.
//! - `diff_*` functions list the fields in which the declared and the held specs differ, in the
//!   manifest's naming (`spec.redirectUris`), for drift messages. Lists compare as sets (the
//!   server may reorder them); secrets are never compared (the server never returns them), only
//!   how the secret is made.

mod branding;
mod client;
mod identity_provider;
mod organization;

use kube::Resource;
use nauthera_proto::v1::{ObjectRef, Precondition, precondition};

use nauthera_shared::branding::BrandingError;
use nauthera_shared::resources::IssuerScoped;

pub use branding::{
    apply_branding_request, branding_document, delete_branding_request, diff_branding_document,
    get_branding_request, sign_in_branding_from_document,
};
pub use client::{
    SecretSource, apply_client_request, client_spec, comparable_client_spec, delete_client_request,
    diff_client, get_client_request, oidc_client_spec_from_server, secret_source,
};
pub use identity_provider::{
    apply_identity_provider_request, comparable_identity_provider_spec,
    delete_identity_provider_request, diff_identity_provider, get_identity_provider_request,
    identity_provider_spec, identity_provider_spec_from_server,
};
pub use organization::{
    apply_organization_request, delete_organization_request, diff_organization,
    get_organization_request, organization_spec, organization_spec_from_server,
};

/// A resource that cannot be turned into a request, or a server answer that cannot be shown as a
/// spec. Never carries secret values.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The resource has no `metadata.name` or `metadata.namespace` (it was not read from the API).
    #[error(
        "{kind} has no metadata.{field}; only resources read from the Kubernetes API can be sent"
    )]
    MissingMetadata {
        kind: &'static str,
        field: &'static str,
    },
    /// The manifest names a Secret (at `field`) but the caller passed no value read from it.
    #[error("{field} names a Secret but no value was read from it")]
    SecretValueMissing { field: &'static str },
    /// The caller passed a secret value the manifest does not ask for (at `field`).
    #[error("a secret value was passed but {field} is not set; the value is not sent")]
    SecretValueUnused { field: &'static str },
    /// The branding cannot be encoded into the server's format.
    #[error(transparent)]
    Branding(#[from] BrandingError),
    /// The server holds a value the resource types cannot express (a newer server, say).
    #[error("{field}: the server holds {value:?}, which this version cannot show")]
    UnknownValue { field: &'static str, value: String },
}

/// The reference of a resource that lives in an organization: its issuer, namespace and name.
pub fn object_ref<K>(resource: &K) -> Result<ObjectRef, ConvertError>
where
    K: Resource<DynamicType = ()> + IssuerScoped,
{
    let kind = kind_of(resource);
    let meta = resource.meta();
    Ok(ObjectRef {
        issuer: resource.issuer().to_owned(),
        namespace: meta
            .namespace
            .clone()
            .ok_or(ConvertError::MissingMetadata {
                kind,
                field: "namespace",
            })?,
        name: meta.name.clone().ok_or(ConvertError::MissingMetadata {
            kind,
            field: "name",
        })?,
    })
}

/// The precondition of a write: the revision the reconciler last wrote, or, when it wrote none,
/// that the server holds nothing (so that a create never takes over an object someone else made).
pub fn write_precondition(last_written_revision: Option<&str>) -> Precondition {
    let condition = match last_written_revision {
        Some(revision) => precondition::Condition::Revision(revision.to_owned()),
        None => precondition::Condition::Absent(true),
    };
    Precondition {
        condition: Some(condition),
    }
}

/// The precondition of a delete: the revision the reconciler last wrote; none when it wrote none.
pub fn delete_precondition(last_written_revision: Option<&str>) -> Option<Precondition> {
    last_written_revision.map(|revision| Precondition {
        condition: Some(precondition::Condition::Revision(revision.to_owned())),
    })
}

/// The declared generation (`metadata.generation`); 0, "none", when the API server set none.
fn generation<K: Resource>(resource: &K) -> i64 {
    resource.meta().generation.unwrap_or(0)
}

fn kind_of<K: Resource<DynamicType = ()>>(_: &K) -> &'static str {
    // `K::kind` is a `Cow<'static, str>` borrowed from a constant for derived resources.
    match K::kind(&()) {
        std::borrow::Cow::Borrowed(kind) => kind,
        std::borrow::Cow::Owned(_) => "resource",
    }
}

/// `None` for an empty string, the proto's "unset".
fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

/// Whether two lists hold the same entries, in any order.
fn same_set(a: &[String], b: &[String]) -> bool {
    let mut a: Vec<&String> = a.iter().collect();
    let mut b: Vec<&String> = b.iter().collect();
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    a == b
}

/// Collects the manifest paths of differing fields.
#[derive(Default)]
struct Differences(Vec<String>);

impl Differences {
    fn check(&mut self, differs: bool, path: impl Into<String>) {
        if differs {
            self.0.push(path.into());
        }
    }
}
