//! What differs per kind. The pipeline ([`crate::reconcile::pipeline`]) is written once; a kind tells it
//! where its status and deletion policy are, how a secret goes with it, and makes its three
//! AdminService calls (apply, get, delete), answering in the terms below.

use std::future::Future;

use nauthera_client::CallError;
use nauthera_client::convert::ConvertError;
use nauthera_client::wire::KindWire;
use nauthera_proto::v1;
use nauthera_shared::resources::{
    DeletionPolicy, ManagementPolicy, ResourceStatus, SecretKeyRef, SecretRotation, WorkloadRestart,
};

use kube::ResourceExt;

use crate::kubernetes::kube_io::NamespacedResource;
use crate::process::memory::SecretValue;
use crate::reconcile::decide::{SecretMode, ServerView};
use crate::reconcile::prerequisites::{Prerequisite, Prerequisites};
use crate::server::admin::AdminApi;
use crate::server::changes::{RefKey, ServerRevisions};

/// What the server holds of one object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Held {
    /// The organization's slug.
    pub organization: String,
    /// The OAuth client id the server assigned; empty for the other kinds.
    pub client_id: String,
    pub revision: String,
    pub generation_in_force: i64,
    pub last_write: v1::WriteInfo,
    /// The fields that differ from the declared state, in the manifest's naming.
    pub differs: Vec<String>,
}

/// What a write came back with.
#[derive(Debug)]
pub struct Written {
    pub held: Held,
    /// The write created the object.
    pub created: bool,
    /// A secret the server minted (on creation or rotation), exactly once.
    pub minted: Option<SecretValue>,
}

/// One write of the declared state.
#[derive(Clone, Copy, Debug)]
pub struct WriteRequest<'a> {
    pub manager: &'a str,
    /// The revision the server must hold; `None`: it must hold nothing.
    pub if_revision: Option<&'a str>,
    /// Mint a new generated secret.
    pub rotate_secret: bool,
    /// The value of the Secret the manifest references, sent with the declared state.
    pub provided: Option<&'a SecretValue>,
}

/// A call's outcome: the outer error means the manifest cannot be put into a request (reported
/// by the error policy), the inner one is the server's answer.
pub type Call<T> = Result<Result<T, CallError>, ConvertError>;

/// A read's answer as what the server holds: `None` when it answered `NotFound`.
#[allow(clippy::result_large_err)] // `CallError` is the shared client's type.
pub fn found<T>(
    answer: Result<T, CallError>,
    held: impl FnOnce(T) -> Held,
) -> Result<Option<Held>, CallError> {
    match answer {
        Ok(object) => Ok(Some(held(object))),
        Err(CallError::Server(error)) if error.code == tonic::Code::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// A kind the pipeline reconciles.
pub trait Managed: NamespacedResource {
    /// The kind's row in the table of kinds: its name (in logs, metrics and events), its
    /// AdminService methods and kind, and the kind ClientPolicies cover it as.
    const KIND: nauthera_shared::kinds::Kind;

    fn status(&self) -> Option<&ResourceStatus>;
    fn status_mut(&mut self) -> Option<&mut ResourceStatus>;
    fn deletion_policy(&self) -> DeletionPolicy;
    /// `spec.managementPolicy`: whether the object is managed or only read.
    fn management_policy(&self) -> ManagementPolicy;
    /// The issuer URL the object is declared under.
    fn issuer(&self) -> &str;

    /// How a secret goes with the object.
    fn secret_mode(&self) -> SecretMode {
        SecretMode::None
    }

    /// The schedule a generated secret is rotated on (`spec.secret.rotation`).
    fn secret_rotation(&self) -> Option<&SecretRotation> {
        None
    }

    /// The Secret and key whose value is sent with the declared state.
    fn provided_secret(&self) -> Option<&SecretKeyRef> {
        None
    }

    /// The shape of the Secret a generated secret is delivered into; the four keys of old when
    /// absent.
    fn secret_template(&self) -> Option<&nauthera_shared::resources::SecretTemplate> {
        None
    }

    /// What happens to the workloads that read the delivered Secret when a new secret replaces
    /// the one they held.
    fn workload_restart(&self) -> Option<WorkloadRestart> {
        None
    }

    /// The field that names that Secret, as messages name it.
    const SECRET_REF_FIELD: &'static str = "spec.secretRef";
    /// What the value in that Secret is, as messages name it.
    const PROVIDED_SECRET: &'static str = "client secret";

    /// Where the server holds the object, as its change events name it: issuer, namespace and
    /// name.
    fn server_key(&self) -> RefKey {
        (
            self.issuer().to_owned(),
            self.namespace().unwrap_or_default(),
            self.name_any(),
        )
    }

    /// What the server's changes say about the object.
    fn server_view(&self, revisions: &ServerRevisions) -> ServerView {
        revisions.view_of_object(Self::KIND.object_kind(), &self.server_key())
    }

    /// The manifests that must be registered before this one is sent: by default the
    /// Organization manifest serving its issuer, if there is one.
    fn needs(&self) -> Vec<Prerequisite> {
        vec![Prerequisite::organization(self.issuer())]
    }

    /// What this manifest provides to others.
    fn provides(&self) -> Option<Prerequisite> {
        None
    }

    /// The organization slug an Organization manifest declares.
    fn slug(&self) -> Option<&str> {
        None
    }

    /// The manifest a server change of this kind names (by namespace and name; an organization
    /// by its slug).
    fn locate(
        _prerequisites: &Prerequisites,
        namespace: String,
        name: String,
    ) -> Option<(String, String)> {
        Some((namespace, name))
    }

    /// The audit records that name the object.
    fn audit_request(&self, organization: &str, _client_id: &str) -> v1::ListAuditEventsRequest {
        v1::ListAuditEventsRequest {
            organization: organization.to_owned(),
            kind: Self::KIND.object_kind() as i32,
            name: self.server_key().2,
            page_size: 5,
            ..v1::ListAuditEventsRequest::default()
        }
    }

    /// Writes the declared state.
    fn apply<A: AdminApi>(
        &self,
        admin: &A,
        write: WriteRequest<'_>,
    ) -> impl Future<Output = Call<Written>> + Send;

    /// Reads what the server holds; `None` when it holds nothing.
    fn get<A: AdminApi>(&self, admin: &A) -> impl Future<Output = Call<Option<Held>>> + Send;

    /// Deletes the object while the server holds `if_revision`; whether it was there.
    fn delete<A: AdminApi>(
        &self,
        admin: &A,
        manager: &str,
        if_revision: &str,
    ) -> impl Future<Output = Call<bool>> + Send;
}
