//! OIDCClient: an OAuth client, with a generated secret delivered into a Secret or a secret the
//! team holds in one (`spec.secret.secretRef`).

use kube::ResourceExt;
use nauthera_client::convert::{
    apply_client_request, comparable_client_spec, delete_client_request, diff_client, object_ref,
};
use nauthera_client::wire::KindWire;
use nauthera_proto::v1;
use nauthera_shared::resources::{
    DeletionPolicy, OIDCClient, ResourceStatus, SecretKeyRef, SecretRotation,
    TokenEndpointAuthMethod, WorkloadRestart,
};

use crate::process::memory::SecretValue;
use crate::reconcile::decide::{SecretMode, ServerView};
use crate::reconcile::managed::{Call, Held, Managed, WriteRequest, Written, found};
use crate::reconcile::prerequisites::Prerequisite;
use crate::server::admin::AdminApi;
use crate::server::changes::ServerRevisions;

impl Managed for OIDCClient {
    const KIND: nauthera_shared::kinds::Kind = nauthera_shared::kinds::Kind::OidcClient;
    const SECRET_REF_FIELD: &'static str = "spec.secret.secretRef";

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

    fn secret_rotation(&self) -> Option<&SecretRotation> {
        self.spec
            .secret
            .as_ref()
            .filter(|secret| secret.generate)?
            .rotation
            .as_deref()
    }

    fn secret_mode(&self) -> SecretMode {
        match &self.spec.secret {
            _ if self.spec.token_endpoint_auth_method == TokenEndpointAuthMethod::None => {
                SecretMode::None
            }
            Some(secret) if secret.secret_ref.is_some() => SecretMode::Provided,
            Some(secret) if secret.generate => SecretMode::Generate {
                secret_name: secret
                    .secret_name
                    .clone()
                    .unwrap_or_else(|| self.name_any()),
            },
            _ => SecretMode::None,
        }
    }

    fn provided_secret(&self) -> Option<&SecretKeyRef> {
        self.spec.secret.as_ref()?.secret_ref.as_ref()
    }

    fn secret_template(&self) -> Option<&nauthera_shared::resources::SecretTemplate> {
        let secret = self.spec.secret.as_ref()?;
        secret.template.as_deref().filter(|_| secret.generate)
    }

    fn workload_restart(&self) -> Option<WorkloadRestart> {
        self.spec.secret.as_ref()?.restart
    }

    /// Clients are listed (`ListClientRevisions`), so the view covers every one of them.
    fn server_view(&self, revisions: &ServerRevisions) -> ServerView {
        revisions.view_of(
            &self.spec.issuer,
            self.metadata.namespace.as_deref().unwrap_or_default(),
            &self.name_any(),
        )
    }

    fn needs(&self) -> Vec<Prerequisite> {
        let mut needs = vec![Prerequisite::organization(&self.spec.issuer)];
        if let Some(branding) = &self.spec.branding_ref {
            needs.push(Prerequisite::Branding {
                namespace: self.namespace().unwrap_or_default(),
                name: branding.name.clone(),
            });
        }
        needs
    }

    fn audit_request(&self, organization: &str, client_id: &str) -> v1::ListAuditEventsRequest {
        v1::ListAuditEventsRequest {
            organization: organization.to_owned(),
            client_id: client_id.to_owned(),
            kind: Self::KIND.object_kind() as i32,
            page_size: 5,
            ..v1::ListAuditEventsRequest::default()
        }
    }

    async fn apply<A: AdminApi>(&self, admin: &A, write: WriteRequest<'_>) -> Call<Written> {
        let mut request = apply_client_request(
            self,
            write.provided.map(SecretValue::expose),
            write.manager,
            write.if_revision,
        )?;
        request.rotate_secret = write.rotate_secret;
        Ok(admin.apply_client(request).await.map(|response| {
            let client = response.client.unwrap_or_default();
            Written {
                held: held(client, Vec::new()),
                created: response.created,
                minted: (!response.secret.is_empty()).then(|| SecretValue::new(response.secret)),
            }
        }))
    }

    async fn get<A: AdminApi>(&self, admin: &A) -> Call<Option<Held>> {
        let reference = object_ref(self)?;
        Ok(found(admin.get_client(reference).await, |client| {
            let declared = comparable_client_spec(&self.spec);
            let differs = client
                .spec
                .as_ref()
                .map(|spec| diff_client(&declared, spec))
                .unwrap_or_default();
            held(client, differs)
        }))
    }

    async fn delete<A: AdminApi>(&self, admin: &A, manager: &str, if_revision: &str) -> Call<bool> {
        let request = delete_client_request(self, manager, Some(if_revision))?;
        Ok(admin
            .delete_client(request)
            .await
            .map(|response| response.deleted))
    }
}

fn held(client: v1::Client, differs: Vec<String>) -> Held {
    Held {
        organization: client.organization,
        client_id: client.client_id,
        revision: client.revision,
        generation_in_force: client.generation_in_force,
        last_write: client.last_write.unwrap_or_default(),
        differs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(spec: serde_json::Value) -> OIDCClient {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": "OIDCClient",
            "metadata": { "name": "web", "namespace": "team-a" },
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn the_secret_mode_follows_the_manifest() {
        let issuer = "https://login.example.test/acme";
        let cases = [
            (
                serde_json::json!({ "issuer": issuer, "secret": { "generate": true } }),
                SecretMode::Generate {
                    secret_name: "web".into(),
                },
            ),
            (
                serde_json::json!({
                    "issuer": issuer,
                    "secret": { "generate": true, "secretName": "web-oidc" }
                }),
                SecretMode::Generate {
                    secret_name: "web-oidc".into(),
                },
            ),
            (
                serde_json::json!({ "issuer": issuer, "secret": { "secretRef": { "name": "creds" } } }),
                SecretMode::Provided,
            ),
            (
                serde_json::json!({ "issuer": issuer, "tokenEndpointAuthMethod": "none" }),
                SecretMode::None,
            ),
            (
                serde_json::json!({ "issuer": issuer, "tokenEndpointAuthMethod": "private_key_jwt" }),
                SecretMode::None,
            ),
        ];
        for (spec, expected) in cases {
            let client = client(spec.clone());
            assert_eq!(client.secret_mode(), expected, "{spec}");
            assert_eq!(
                client.provided_secret().is_some(),
                expected == SecretMode::Provided,
                "{spec}"
            );
        }
    }
}
