//! Organization: a tenant of the server, named by its slug, serving one issuer URL. The other
//! kinds declared under that issuer wait for it to be registered.

use nauthera_client::convert::{
    apply_organization_request, delete_organization_request, diff_organization,
    get_organization_request, organization_spec,
};
use nauthera_client::wire::KindWire;
use nauthera_proto::v1;
use nauthera_shared::resources::{DeletionPolicy, Organization, ResourceStatus};

use crate::reconcile::managed::{Call, Held, Managed, WriteRequest, Written, found};
use crate::reconcile::prerequisites::{Prerequisite, Prerequisites};
use crate::server::admin::AdminApi;
use crate::server::changes::RefKey;

impl Managed for Organization {
    const KIND: nauthera_shared::kinds::Kind = nauthera_shared::kinds::Kind::Organization;

    fn status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }

    fn status_mut(&mut self) -> Option<&mut ResourceStatus> {
        self.status.as_mut()
    }

    fn deletion_policy(&self) -> DeletionPolicy {
        self.spec.deletion_policy
    }

    fn management_policy(&self) -> nauthera_shared::resources::ManagementPolicy {
        self.spec.management_policy
    }

    fn issuer(&self) -> &str {
        &self.spec.issuer
    }

    /// The server names an organization by its slug alone.
    fn server_key(&self) -> RefKey {
        (String::new(), String::new(), self.spec.slug.clone())
    }

    fn needs(&self) -> Vec<Prerequisite> {
        Vec::new()
    }

    fn slug(&self) -> Option<&str> {
        Some(&self.spec.slug)
    }

    fn provides(&self) -> Option<Prerequisite> {
        Some(Prerequisite::organization(&self.spec.issuer))
    }

    fn locate(
        prerequisites: &Prerequisites,
        _namespace: String,
        slug: String,
    ) -> Option<(String, String)> {
        prerequisites
            .organization(&slug)
            .map(|manifest| (manifest.namespace, manifest.name))
    }

    fn audit_request(&self, _organization: &str, _client_id: &str) -> v1::ListAuditEventsRequest {
        v1::ListAuditEventsRequest {
            organization: self.spec.slug.clone(),
            kind: Self::KIND.object_kind() as i32,
            name: self.spec.slug.clone(),
            page_size: 5,
            ..v1::ListAuditEventsRequest::default()
        }
    }

    async fn apply<A: AdminApi>(&self, admin: &A, write: WriteRequest<'_>) -> Call<Written> {
        let request = apply_organization_request(self, write.manager, write.if_revision)?;
        Ok(admin
            .apply_organization(request)
            .await
            .map(|organization| Written {
                held: held(organization, Vec::new()),
                created: write.if_revision.is_none(),
                minted: None,
            }))
    }

    async fn get<A: AdminApi>(&self, admin: &A) -> Call<Option<Held>> {
        let declared = organization_spec(&self.spec)?;
        let request = get_organization_request(self);
        Ok(found(
            admin.get_organization(request.slug).await,
            |organization| {
                let differs = organization
                    .spec
                    .as_ref()
                    .map(|spec| diff_organization(&declared, spec))
                    .unwrap_or_default();
                held(organization, differs)
            },
        ))
    }

    async fn delete<A: AdminApi>(&self, admin: &A, manager: &str, if_revision: &str) -> Call<bool> {
        let request = delete_organization_request(self, manager, Some(if_revision))?;
        Ok(admin
            .delete_organization(request)
            .await
            .map(|response| response.deleted))
    }
}

fn held(organization: v1::Organization, differs: Vec<String>) -> Held {
    Held {
        organization: organization.slug,
        client_id: String::new(),
        revision: organization.revision,
        generation_in_force: organization.generation_in_force,
        last_write: organization.last_write.unwrap_or_default(),
        differs,
    }
}
