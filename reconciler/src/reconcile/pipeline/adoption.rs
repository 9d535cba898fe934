//! Adoption at the edges: the object somebody else wrote is read once and taken at exactly the
//! revision a person named (or `managementPolicy: Observe` showed), through the one write path.

use kube::ResourceExt;
use nauthera_client::convert::ConvertError;
use nauthera_shared::resources::{AdoptSecret, ResourceStatus};

use super::{Edges, Purpose, apply, note_server_view};
use crate::kubernetes::kube_io::{self, ReadSecret};
use crate::reconcile::context::ReconcileError;
use crate::reconcile::decide::{
    AdoptRefusal, Rotation, SecretMode, SentValue, Verdict, adopt_command, adopted_in_place,
    adoption_plan, adoption_record, adoption_refused, after_drift_check_failure,
    handover_overtaken, in_organization, unencodable_branding, with_adoption,
};
use crate::reconcile::managed::{Held, Managed};
use crate::server::admin::AdminApi;
use crate::server::server_calls::{self, server_object};

/// The command that adopts this resource's object, as messages name it.
pub(super) fn adopt_command_of<K: Managed, A>(edges: &Edges<'_, K, A>) -> String {
    adopt_command(
        K::KIND.singular(),
        &edges.resource.name_any(),
        &edges.namespace,
    )
}

/// An adoption to carry out.
pub(super) struct Adoption<'r> {
    /// The revision named (or shown under `Observe`): the only one written over.
    pub revision: &'r str,
    pub secret: AdoptSecret,
    /// From `managementPolicy: Observe`.
    pub handover: bool,
    pub requested_by: Option<String>,
}

/// Takes the object somebody else wrote at exactly the revision named: reads it (unless the
/// caller just did), and when the server still holds that revision, writes nothing if the
/// manifest declares what it holds and no secret is to be sent, else writes once over that
/// revision. Another revision is refused (or, from `Observe`, reported as a drift); an object
/// gone meanwhile is created as any new manifest.
pub(super) async fn adopt<K: Managed, A: AdminApi>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    provided: Option<ReadSecret>,
    adoption: &Adoption<'_>,
    read: Option<Held>,
) -> Result<Verdict, ReconcileError> {
    let ctx = edges.ctx;
    let resource = edges.resource;
    let held = match read {
        Some(held) => Some(held),
        None => match resource.get(ctx.admin.as_ref()).await {
            Ok(Ok(held)) => held,
            Ok(Err(error)) => {
                return Ok(after_drift_check_failure(&error, K::KIND.methods().get));
            }
            Err(ConvertError::Branding(error)) => return Ok(unencodable_branding(&error)),
            Err(error) => return Err(error.into()),
        },
    };
    let Some(held) = held else {
        return apply(edges, status, provided, None, None, Purpose::Declared).await;
    };
    let object = server_object(Some(&held));
    if held.revision != adoption.revision {
        let verdict = match status.and_then(|s| s.observed.as_deref()) {
            Some(shown) if adoption.handover => handover_overtaken(shown, &object),
            _ => adoption_refused(
                object,
                &AdoptRefusal::Mismatch {
                    named: adoption.revision.to_owned(),
                },
                &adopt_command_of(edges),
            ),
        };
        note_server_view(edges, &verdict);
        return Ok(verdict);
    }
    let mode = resource.secret_mode();
    let plan = adoption_plan(!held.differs.is_empty(), &mode, adoption.secret);
    let record = adoption_record(&object, plan.secret, adoption.requested_by.clone());
    if !plan.write {
        let generation = resource.meta().generation.unwrap_or(0);
        let mut verdict = adopted_in_place(
            &server_calls::applied(&held, false),
            generation,
            &object,
            record,
        );
        verdict = in_organization(verdict, held.organization.clone());
        if let Some(kept) = keep_provided(edges).await? {
            verdict.fields.secret_version = Some(kept.version);
        }
        note_server_view(edges, &verdict);
        return Ok(verdict);
    }
    let purpose = Purpose::Adopt {
        send_provided: plan.send_provided,
    };
    let rotate = plan.rotate.then_some(Rotation::Adopted);
    let verdict = apply(
        edges,
        status,
        provided,
        Some(adoption.revision),
        rotate,
        purpose,
    )
    .await?;
    Ok(with_adoption(verdict, &object, record))
}

/// Adopted keeping the secret the server holds, with a team's Secret named: the value it
/// holds is taken as the one in force (remembered as sent, so only a later change is sent).
async fn keep_provided<K: Managed, A>(
    edges: &Edges<'_, K, A>,
) -> Result<Option<SentValue>, ReconcileError> {
    let (SecretMode::Provided, Some(reference)) = (
        edges.resource.secret_mode(),
        edges.resource.provided_secret(),
    ) else {
        return Ok(None);
    };
    Ok(
        match kube_io::read_secret_ref(&edges.secrets, &reference.name, &reference.key).await? {
            Ok(read) => {
                let value = SentValue {
                    version: read.version.clone(),
                    digest: read.value.digest(),
                };
                edges
                    .ctx
                    .memory
                    .remember_sent_value(&edges.uid, value.clone());
                Some(value)
            }
            // Unreadable now: its value is sent once it can be read and is seen to change.
            Err(_) => None,
        },
    )
}
