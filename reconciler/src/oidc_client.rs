//! The OIDCClient pipeline: observe → decide the next step → carry it out → record the verdict.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use nauthera_shared::FINALIZER;
use nauthera_shared::convert::{apply_client_request, delete_client_request, object_ref};
use nauthera_shared::resources::{
    OIDCClient, ResourceStatus, SecretKeyRef, TokenEndpointAuthMethod,
};

use crate::admin::AdminApi;
use crate::client_calls::{DriftFacts, WriteResult, check_drift, delete_client, write_client};
use crate::context::{Context, ReconcileError};
use crate::decide::{
    Observed, SecretMode, SecretState, Step, Verdict, after_apply, after_secret_failure, released,
    secret_delivered, secret_ref_unavailable,
};
use crate::kube_io;
use crate::memory::Minted;

const KIND: &str = "OIDCClient";

/// How the manifest wants the client secret made, and the Secret's name for a generated one.
pub fn secret_mode(client: &OIDCClient) -> SecretMode {
    match &client.spec.secret {
        _ if client.spec.token_endpoint_auth_method == TokenEndpointAuthMethod::None => {
            SecretMode::None
        }
        Some(secret) if secret.secret_ref.is_some() => SecretMode::Provided,
        Some(secret) if secret.generate => SecretMode::Generate {
            secret_name: secret
                .secret_name
                .clone()
                .unwrap_or_else(|| client.name_any()),
        },
        _ => SecretMode::None,
    }
}

/// One reconcile of one OIDCClient.
pub async fn reconcile<A: AdminApi>(
    client: Arc<OIDCClient>,
    ctx: Arc<Context<A>>,
) -> Result<Action, ReconcileError> {
    let _timer = ctx.metrics.reconcile_timer(KIND);
    // Only the leader reconciles; a replica that lost the lease stops here.
    if !ctx.leadership.is_leader() {
        return Ok(Action::await_change());
    }
    let namespace = client
        .namespace()
        .ok_or(ReconcileError::MissingMetadata("namespace"))?;
    let uid = client.uid().ok_or(ReconcileError::MissingMetadata("uid"))?;
    let api: Api<OIDCClient> = Api::namespaced(ctx.client.clone(), &namespace);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let remembered = ctx.memory.status_or(&uid, client.status.as_ref());
    let status = remembered.as_ref();
    let mode = secret_mode(&client);
    let minted = ctx.memory.minted(&uid);
    let deleting = client.meta().deletion_timestamp.is_some();

    let secret_state = match (&mode, deleting, minted.is_some()) {
        // The watch cache answers for a Secret this reconciler delivered; anything else (absent,
        // somebody else's, not seen yet) is read.
        (SecretMode::Generate { secret_name }, false, false) => {
            let cached = ctx
                .delivered
                .get(&namespace, secret_name)
                .map(|secret| kube_io::state_of(&secret, &uid));
            match cached {
                Some(owned @ SecretState::Owned { .. }) => owned,
                _ => kube_io::secret_state(&secrets, secret_name, &uid).await?,
            }
        }
        _ => SecretState::NotApplicable,
    };
    // The secret the team holds, read when it may have changed since it was sent.
    let provided_secret_changed = match (&mode, &client.spec.secret, deleting) {
        (
            SecretMode::Provided,
            Some(nauthera_shared::resources::ClientSecret {
                secret_ref: Some(SecretKeyRef { name, key }),
                ..
            }),
            false,
        ) if status.is_some_and(|s| s.revision.is_some()) => {
            match kube_io::read_secret_ref(&secrets, name, key).await? {
                Ok(value) => ctx.memory.provided_changed(&uid, &value),
                // Reported when it is next sent.
                Err(_) => false,
            }
        }
        _ => false,
    };
    let server = ctx
        .revisions
        .view_of(&client.spec.issuer, &namespace, &client.name_any());
    let observed = Observed {
        generation: client.meta().generation.unwrap_or(0),
        deleting,
        has_finalizer: client.finalizers().iter().any(|f| f == FINALIZER),
        restore_requested: kube_io::restore_requested(client.as_ref()),
        deletion_policy: client.spec.deletion_policy,
        status,
        secret_mode: mode.clone(),
        secret_pending: minted.is_some(),
        secret_state,
        provided_secret_changed,
        server,
        retry_not_before: ctx
            .memory
            .retry_not_before(&uid, client.meta().generation.unwrap_or(0)),
        now: (ctx.clock)(),
    };
    let step = crate::decide::next_step(&observed);
    tracing::debug!(kind = KIND, namespace = %namespace, name = %client.name_any(), ?step, "next step");

    let verdict = match step {
        Step::Wait { after } => {
            return Ok(after.map_or_else(Action::await_change, Action::requeue));
        }
        Step::AddFinalizer => {
            kube_io::set_finalizer(&api, client.as_ref(), true).await?;
            return Ok(Action::await_change());
        }
        Step::ClearRestoreAnnotation => {
            kube_io::clear_restore_annotation(&api, client.as_ref()).await?;
            return Ok(Action::await_change());
        }
        Step::Apply {
            if_revision,
            rotate_secret,
            restore,
        } => {
            apply(
                &ctx,
                &api,
                &secrets,
                &client,
                status,
                &mode,
                if_revision,
                rotate_secret,
                restore,
            )
            .await?
        }
        Step::DeliverSecret => match minted {
            Some(minted) => deliver(&ctx, &secrets, &client, status, &uid, &minted).await,
            None => return Ok(Action::await_change()),
        },
        Step::CheckDrift => {
            let facts = drift_facts(&ctx, &client, status)?;
            check_drift(ctx.admin.as_ref(), &facts).await
        }
        Step::Delete { if_revision } => {
            let request = delete_client_request(&client, &ctx.manager, Some(&if_revision))?;
            let verdict = delete_client(ctx.admin.as_ref(), request).await;
            return finish_deletion(&ctx, &api, &client, status, &uid, &verdict).await;
        }
        Step::Release { reason } => {
            let verdict = released(reason);
            return finish_deletion(&ctx, &api, &client, status, &uid, &verdict).await;
        }
    };
    ctx.record(KIND, &api, client.as_ref(), status, &verdict, true)
        .await
}

fn drift_facts<'a, A>(
    ctx: &'a Context<A>,
    client: &'a OIDCClient,
    status: Option<&'a ResourceStatus>,
) -> Result<DriftFacts<'a>, ReconcileError> {
    Ok(DriftFacts {
        declared: &client.spec,
        reference: object_ref(client)?,
        generation: client.meta().generation.unwrap_or(0),
        written_revision: status.and_then(|s| s.revision.as_deref()),
        generation_in_force: status.and_then(|s| s.generation_in_force),
        organization: status.and_then(|s| s.slug.as_deref()),
        client_id: status.and_then(|s| s.client_id.as_deref()),
        manager: &ctx.manager,
        history_restarted: ctx.revisions.history_restarted(),
    })
}

#[allow(clippy::too_many_arguments)]
async fn apply<A: AdminApi>(
    ctx: &Context<A>,
    api: &Api<OIDCClient>,
    secrets: &Api<Secret>,
    client: &OIDCClient,
    status: Option<&ResourceStatus>,
    mode: &SecretMode,
    if_revision: Option<String>,
    rotate_secret: bool,
    restore: bool,
) -> Result<Verdict, ReconcileError> {
    let provided = match (mode, &client.spec.secret) {
        (
            SecretMode::Provided,
            Some(nauthera_shared::resources::ClientSecret {
                secret_ref: Some(SecretKeyRef { name, key }),
                ..
            }),
        ) => match kube_io::read_secret_ref(secrets, name, key).await? {
            Ok(value) => Some(value),
            Err(problem) => return Ok(secret_ref_unavailable(name, key, problem)),
        },
        _ => None,
    };
    let mut request = apply_client_request(
        client,
        provided.as_ref().map(|v| v.expose()),
        &ctx.manager,
        if_revision.as_deref(),
    )?;
    request.rotate_secret = rotate_secret;
    if !ctx.leadership.is_leader() {
        return Ok(crate::decide::not_leader());
    }
    match write_client(ctx.admin.as_ref(), request).await {
        WriteResult::Written {
            applied,
            organization,
            minted,
        } => {
            let uid = client.uid().unwrap_or_default();
            let (secret_name, delivery) = match (mode, minted) {
                (SecretMode::Generate { secret_name }, Some(value)) => {
                    let minted = Minted {
                        value,
                        client_id: applied.client_id.clone(),
                        secret_name: secret_name.clone(),
                    };
                    // Kept in memory until the Secret is written, so a failed write is retried
                    // without minting again.
                    ctx.memory.remember_minted(&uid, minted.clone());
                    let result = kube_io::deliver_secret(
                        secrets,
                        client,
                        kube_io::Delivery {
                            secret_name,
                            client_id: &minted.client_id,
                            issuer: &client.spec.issuer,
                            value: &minted.value,
                        },
                    )
                    .await;
                    if result.is_ok() {
                        ctx.memory.forget_minted(&uid);
                    }
                    (Some(secret_name.as_str()), Some(result))
                }
                _ => (None, None),
            };
            if let Some(value) = &provided {
                ctx.memory.provided_sent(&uid, value);
            }
            if restore {
                kube_io::clear_restore_annotation(api, client).await?;
            }
            let mut verdict = after_apply(&applied, secret_name, delivery, restore, rotate_secret);
            verdict.fields.slug = Some(organization).filter(|s| !s.is_empty());
            Ok(verdict)
        }
        WriteResult::Conflict => {
            let facts = drift_facts(ctx, client, status)?;
            Ok(check_drift(ctx.admin.as_ref(), &facts).await)
        }
        WriteResult::Failed(verdict) => Ok(*verdict),
    }
}

async fn deliver<A: AdminApi>(
    ctx: &Context<A>,
    secrets: &Api<Secret>,
    client: &OIDCClient,
    status: Option<&ResourceStatus>,
    uid: &str,
    minted: &Minted,
) -> Verdict {
    let result = kube_io::deliver_secret(
        secrets,
        client,
        kube_io::Delivery {
            secret_name: &minted.secret_name,
            client_id: &minted.client_id,
            issuer: &client.spec.issuer,
            value: &minted.value,
        },
    )
    .await;
    match result {
        Ok(()) => {
            ctx.memory.forget_minted(uid);
            secret_delivered(
                status
                    .and_then(|s| s.generation_in_force)
                    .unwrap_or_default(),
                status.and_then(|s| s.revision.as_deref()).unwrap_or(""),
                &minted.secret_name,
            )
        }
        Err(failure) => after_secret_failure(&failure, &minted.secret_name),
    }
}

/// Records a deletion outcome and lets the manifest go; a retried failure keeps the finalizer.
async fn finish_deletion<A>(
    ctx: &Context<A>,
    api: &Api<OIDCClient>,
    client: &OIDCClient,
    status: Option<&ResourceStatus>,
    uid: &str,
    verdict: &Verdict,
) -> Result<Action, ReconcileError> {
    if !verdict.reason.is_deletion_outcome() {
        return ctx.record(KIND, api, client, status, verdict, true).await;
    }
    let action = ctx
        .record(KIND, api, client, status, verdict, false)
        .await?;
    if ctx.leadership.is_leader() {
        kube_io::set_finalizer(api, client, false).await?;
        ctx.memory.forget(uid);
    }
    Ok(action)
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
            assert_eq!(secret_mode(&client(spec.clone())), expected, "{spec}");
        }
    }

    #[test]
    fn only_a_true_restore_annotation_asks_for_a_restore() {
        let mut web = client(serde_json::json!({ "issuer": "https://login.example.test/acme" }));
        assert!(!kube_io::restore_requested(&web));
        for (value, expected) in [
            ("true", true),
            ("True", true),
            ("false", false),
            ("", false),
        ] {
            web.metadata.annotations = Some(
                [(
                    nauthera_shared::RESTORE_ANNOTATION.to_owned(),
                    value.to_owned(),
                )]
                .into(),
            );
            assert_eq!(kube_io::restore_requested(&web), expected, "{value}");
        }
    }
}
