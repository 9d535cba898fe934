//! Branding: a sign-in branding, encoded by the branding encoder before it is sent (what cannot
//! be encoded is refused here, naming the field and the limit).

use nauthera_client::convert::{
    apply_branding_request, branding_document, delete_branding_request, diff_branding_document,
    object_ref,
};
use nauthera_proto::v1;
use nauthera_shared::resources::{Branding, DeletionPolicy, ResourceStatus};

use crate::reconcile::managed::{Call, Held, Managed, WriteRequest, Written, found};
use crate::reconcile::prerequisites::Prerequisite;
use crate::server::admin::AdminApi;

impl Managed for Branding {
    const KIND: nauthera_shared::kinds::Kind = nauthera_shared::kinds::Kind::Branding;

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

    fn provides(&self) -> Option<Prerequisite> {
        let (_, namespace, name) = self.server_key();
        Some(Prerequisite::Branding { namespace, name })
    }

    async fn apply<A: AdminApi>(&self, admin: &A, write: WriteRequest<'_>) -> Call<Written> {
        let request = apply_branding_request(self, write.manager, write.if_revision)?;
        Ok(admin.apply_branding(request).await.map(|branding| Written {
            held: held(branding, Vec::new()),
            created: write.if_revision.is_none(),
            minted: None,
        }))
    }

    async fn get<A: AdminApi>(&self, admin: &A) -> Call<Option<Held>> {
        let reference = object_ref(self)?;
        let declared = branding_document(&self.spec.branding)?;
        Ok(found(admin.get_branding(reference).await, |branding| {
            let differs = diff_branding_document(
                &declared,
                branding
                    .document
                    .as_ref()
                    .unwrap_or(&v1::BrandingDocument::default()),
            );
            held(branding, differs)
        }))
    }

    async fn delete<A: AdminApi>(&self, admin: &A, manager: &str, if_revision: &str) -> Call<bool> {
        let request = delete_branding_request(self, manager, Some(if_revision))?;
        Ok(admin
            .delete_branding(request)
            .await
            .map(|response| response.deleted))
    }
}

fn held(branding: v1::Branding, differs: Vec<String>) -> Held {
    Held {
        organization: branding.organization,
        client_id: String::new(),
        revision: branding.revision,
        generation_in_force: branding.generation_in_force,
        last_write: branding.last_write.unwrap_or_default(),
        differs,
    }
}
