//! IdentityProvider: an upstream identity provider, with its upstream client secret read from
//! the team's Secret (`spec.secretRef`) and sent with the declared state, never written back.

use nauthera_client::convert::{
    apply_identity_provider_request, comparable_identity_provider_spec,
    delete_identity_provider_request, diff_identity_provider, object_ref,
};
use nauthera_proto::v1;
use nauthera_shared::resources::{DeletionPolicy, IdentityProvider, ResourceStatus, SecretKeyRef};

use crate::process::memory::SecretValue;
use crate::reconcile::decide::SecretMode;
use crate::reconcile::managed::{Call, Held, Managed, WriteRequest, Written, found};
use crate::server::admin::AdminApi;

impl Managed for IdentityProvider {
    const KIND: nauthera_shared::kinds::Kind = nauthera_shared::kinds::Kind::IdentityProvider;
    const PROVIDED_SECRET: &'static str = "upstream client secret";

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

    fn secret_mode(&self) -> SecretMode {
        // A SAML provider needs none, but one named is sent like any other.
        match self.spec.secret_ref {
            Some(_) => SecretMode::Provided,
            None => SecretMode::None,
        }
    }

    fn provided_secret(&self) -> Option<&SecretKeyRef> {
        self.spec.secret_ref.as_ref()
    }

    async fn apply<A: AdminApi>(&self, admin: &A, write: WriteRequest<'_>) -> Call<Written> {
        let request = apply_identity_provider_request(
            self,
            write.provided.map(SecretValue::expose),
            write.manager,
            write.if_revision,
        )?;
        Ok(admin
            .apply_identity_provider(request)
            .await
            .map(|provider| Written {
                held: held(provider, Vec::new()),
                created: write.if_revision.is_none(),
                minted: None,
            }))
    }

    async fn get<A: AdminApi>(&self, admin: &A) -> Call<Option<Held>> {
        let reference = object_ref(self)?;
        let declared = comparable_identity_provider_spec(&self.spec);
        Ok(found(
            admin.get_identity_provider(reference).await,
            |provider| {
                let differs = provider
                    .spec
                    .as_ref()
                    .map(|spec| diff_identity_provider(&declared, spec))
                    .unwrap_or_default();
                held(provider, differs)
            },
        ))
    }

    async fn delete<A: AdminApi>(&self, admin: &A, manager: &str, if_revision: &str) -> Call<bool> {
        let request = delete_identity_provider_request(self, manager, Some(if_revision))?;
        Ok(admin
            .delete_identity_provider(request)
            .await
            .map(|response| response.deleted))
    }
}

fn held(provider: v1::IdentityProvider, differs: Vec<String>) -> Held {
    Held {
        organization: provider.organization,
        client_id: String::new(),
        revision: provider.revision,
        generation_in_force: provider.generation_in_force,
        last_write: provider.last_write.unwrap_or_default(),
        differs,
    }
}
