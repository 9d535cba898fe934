//! The one reconcile pipeline, for every kind: observe → decide the next step → carry it out →
//! record the verdict. The finalizer, the deletion policy, the restore annotation, drift, the
//! refusal resend, backoff and the write gate are here, once; what differs per kind comes
//! through [`Managed`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use nauthera_client::convert::ConvertError;
use nauthera_client::wire::KindWire;
use nauthera_shared::FINALIZER;
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::{HeldResource, ManagedElsewhere, ResourceStatus, WorkloadRestart};
use nauthera_shared::secret_render::{self, shape_digest};
use nauthera_shared::workloads::PodTemplate;

use crate::kubernetes::kube_io::{self, ReadSecret};
use crate::kubernetes::secret_shape::{self, Reshaped};
use crate::process::memory::{Minted, SecretValue};
use crate::process::work_queue::Action;
use crate::reconcile::context::{Context, ReconcileError};
use crate::reconcile::decide::{AdoptRefusal, MintCheck, adoption_refused, requested_mint_check};
use crate::reconcile::decide::{
    AdoptRequest, AfterReleaseLook, Applied, DriftUpdate, Observed, PolicyGate, ProvidedSecret,
    Readers, ReleaseLook, Rotation, RotationRequest, ScheduledRotation, SecretFate, SecretMode,
    SecretRelease, SecretState, SentValue, StaleRemoval, Standing, Step, Update, ValueSent,
    Verdict, after_apply, after_release_look, after_secret_failure, awaiting_missing,
    awaiting_prerequisite, claimed_status, held_by_policy, in_organization,
    invalid_secret_template, naming_dependents, provided_value_changed, reference_missing,
    released, released_elsewhere, released_with_secret, resend_over, restart_plan,
    restore_not_needed, restored, rotated, rotation_answered, secret_delivered, secret_fate,
    secret_name_taken, secret_reclaimed, secret_ref_unavailable, secret_reshape_failed,
    secret_reshaped, secret_to_release, secret_unreadable, stale_secret, stale_secret_removed,
    superseding_drift, take_over_refused, taken_over, unencodable_branding, with_approval,
    with_removal_told, with_restarts, with_rotation_recorded, with_stale_removal, with_value_sent,
};
use crate::reconcile::managed::{Managed, WriteRequest};
use crate::reconcile::policies::Judged;
use crate::server::admin::AdminApi;
use crate::server::server_calls::{
    self, DriftFacts, Looked, WriteResult, check_drift, delete, look_before_create, server_object,
};

mod adoption;

use adoption::{Adoption, adopt, adopt_command_of};

/// The edges one reconcile works with.
struct Edges<'a, K: Managed, A> {
    ctx: &'a Context<A>,
    resource: &'a K,
    api: Api<K>,
    secrets: Api<Secret>,
    uid: String,
    namespace: String,
}

/// One reconcile of one resource. A replica that does not lead, or whose term ends on the way,
/// stops at the write gate and waits for a change.
pub async fn reconcile<K: Managed, A: AdminApi>(
    resource: &K,
    ctx: Arc<Context<A>>,
) -> Result<Action, ReconcileError> {
    let _timer = ctx.metrics.reconcile_timer(K::KIND.as_str());
    match reconcile_leading(resource, ctx).await {
        Err(ReconcileError::NotLeading(_)) => Ok(Action::await_change()),
        result => result,
    }
}

async fn reconcile_leading<K: Managed, A: AdminApi>(
    resource: &K,
    ctx: Arc<Context<A>>,
) -> Result<Action, ReconcileError> {
    // Only the leader reconciles: a follower reads nothing either.
    ctx.leadership.gate()?;
    let edges = Edges::of(ctx.as_ref(), resource)?;
    let remembered = ctx.memory.status_or(&edges.uid, resource.status());
    let take_over_from = kube_io::take_over_from(edges.resource);
    let remembered = match claimed_status(remembered, &ctx.manager, take_over_from.as_deref()) {
        Ok(remembered) => remembered,
        Err(manager) => {
            // An overlapping shard: its reconciler acts on the resource, this one never does.
            tracing::debug!(kind = K::KIND.as_str(), namespace = %edges.namespace, name = %resource.name_any(), manager = %manager, "left to another reconciler");
            return Ok(Action::await_change());
        }
    };
    let status = remembered.as_ref();
    let minted = ctx.memory.minted(&edges.uid);
    let (mut observed, provided) = observe(&edges, status, minted.is_some()).await?;
    let step = step_to_carry_out(&edges, &mut observed).await?;
    let taken = step.clone();
    let verdict = match carry_out(&edges, step, &observed, provided, minted).await? {
        Carried::Verdict(verdict) => *verdict,
        Carried::Done(action) => return Ok(action),
    };
    // In force, but a manifest it names is gone: said at once.
    let verdict = match &observed.prerequisites.missing {
        Some(missing) => reference_missing(verdict, missing),
        None => verdict,
    };
    record_hold(&edges, &verdict);
    let mut verdict = verdict;
    verdict.fields.next_rotation = next_rotation(&edges, status, &verdict);
    let action = ctx
        .record(K::KIND, &edges.api, edges.resource, status, &verdict, true)
        .await?;
    // A request waiting behind the step just taken is decided at once (the view is corrected
    // by `note_server_view`), not left for a watch event that never comes.
    let request = observed.rotation_request.as_ref();
    if crate::reconcile::decide::rotation_waits_after(&taken, request, &verdict) {
        return Ok(Action::requeue(std::time::Duration::ZERO));
    }
    Ok(action)
}

/// Where the schedule stands for the secret in force (set at `set_at`), if the manifest
/// declares one.
fn scheduled<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    set_at: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
) -> Option<ScheduledRotation> {
    let rotation = edges.resource.secret_rotation()?;
    // Refused by the schema already; an object that bypassed it rotates on no schedule.
    let schedule = rotation
        .schedule(edges.ctx.min_rotation_interval)
        .inspect_err(|why| tracing::warn!(kind = K::KIND.as_str(), namespace = %edges.namespace, name = %edges.resource.name_any(), why = %why, "rotation schedule ignored"))
        .ok()?;
    Some(ScheduledRotation {
        every: rotation.every.clone(),
        planned: schedule.planned(set_at?, &edges.uid, now),
    })
}

/// `status.nextRotation` after a verdict: from the time the secret in force was set (now, when
/// the verdict set it), in whole seconds as the status keeps time.
fn next_rotation<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    verdict: &Verdict,
) -> Update<jiff::Timestamp> {
    let now = (edges.ctx.clock)();
    let set_at = match verdict.fields.secret_set {
        true => Some(now),
        false => status.and_then(|s| s.secret_set_time.as_ref()).map(|t| t.0),
    };
    match scheduled(edges, set_at, now) {
        Some(scheduled) => {
            let next = scheduled.next(now);
            Update::Set(
                next.round(
                    jiff::TimestampRound::new()
                        .smallest(jiff::Unit::Second)
                        .mode(jiff::RoundMode::Ceil),
                )
                .unwrap_or(next),
            )
        }
        None => Update::Clear,
    }
}

impl<'a, K: Managed, A> Edges<'a, K, A> {
    fn of(ctx: &'a Context<A>, resource: &'a K) -> Result<Edges<'a, K, A>, ReconcileError> {
        let namespace = resource
            .namespace()
            .ok_or(ReconcileError::MissingMetadata("namespace"))?;
        Ok(Edges {
            ctx,
            resource,
            api: Api::namespaced(ctx.client.clone(), &namespace),
            secrets: Api::namespaced(ctx.client.clone(), &namespace),
            uid: resource
                .uid()
                .ok_or(ReconcileError::MissingMetadata("uid"))?,
            namespace,
        })
    }
}

/// The next step that acts or reports: steps that only add a fact or the finalizer are taken
/// here and go straight on to the next decision. Every step that writes passes the write gate
/// first.
async fn step_to_carry_out<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    observed: &mut Observed<'_>,
) -> Result<Step, ReconcileError> {
    loop {
        let step = crate::reconcile::decide::next_step(observed);
        tracing::debug!(kind = K::KIND.as_str(), namespace = %edges.namespace, name = %edges.resource.name_any(), step = step.label(), "next step");
        if step.writes() {
            edges.ctx.leadership.gate()?;
        }
        match step {
            Step::AddFinalizer => {
                kube_io::set_finalizer(&edges.api, edges.resource, true).await?;
                observed.has_finalizer = true;
            }
            Step::RemoveFinalizer => {
                kube_io::set_finalizer(&edges.api, edges.resource, false).await?;
                observed.has_finalizer = false;
            }
            Step::ReadSecret => {
                (observed.secret_state, observed.delivered_request) =
                    generated_secret_state(edges).await?;
            }
            step => return Ok(step),
        }
    }
}

/// What carrying out a step came to.
enum Carried {
    /// A verdict to record (boxed: a verdict is large, the other variant small).
    Verdict(Box<Verdict>),
    /// The reconcile is done (recorded already, or nothing to record): look again then.
    Done(Action),
}

impl From<Verdict> for Carried {
    fn from(verdict: Verdict) -> Carried {
        Carried::Verdict(Box::new(verdict))
    }
}

/// Carries out one step that acts or reports.
async fn carry_out<K: Managed, A: AdminApi>(
    edges: &Edges<'_, K, A>,
    step: Step,
    observed: &Observed<'_>,
    provided: Option<ReadSecret>,
    minted: Option<Minted>,
) -> Result<Carried, ReconcileError> {
    let (ctx, resource, status) = (edges.ctx, edges.resource, observed.status);
    let wait = Carried::Done(Action::await_change());
    Ok(match step {
        Step::AddFinalizer | Step::RemoveFinalizer | Step::ReadSecret => {
            unreachable!("taken before a step is carried out")
        }
        Step::Observe => {
            let verdict = refused_if_unencodable(
                server_calls::observe(edges.resource, ctx.admin.as_ref()).await,
            )?;
            note_server_view(edges, &verdict);
            verdict.into()
        }
        Step::Adopt {
            revision,
            secret,
            handover,
        } => {
            let adoption = Adoption {
                revision: &revision,
                secret,
                handover,
                // A handover is the manifest's own doing: nobody annotated it.
                requested_by: observed
                    .adopt_request
                    .as_ref()
                    .filter(|_| !handover)
                    .and_then(|request| request.requested_by.clone()),
            };
            let verdict = adopt(edges, status, provided, &adoption, None).await?;
            with_approval(verdict, &observed.policy).into()
        }
        Step::RefuseAdoption { refusal } => match status.and_then(|s| s.observed.as_deref()) {
            Some(shown) => {
                adoption_refused(shown.clone(), &refusal, &adopt_command_of(edges)).into()
            }
            None => wait,
        },
        Step::AwaitPrerequisite { manifest } => awaiting_prerequisite(&manifest).into(),
        Step::AwaitMissing { missing } => awaiting_missing(&missing).into(),
        Step::HoldByPolicy => {
            let approve =
                nauthera_shared::policy::approve_command(&resource.name_any(), &edges.namespace);
            match held_by_policy(&observed.policy, observed.generation, status, &approve) {
                Some(verdict) => verdict.into(),
                None => wait,
            }
        }
        Step::Wait { after } => {
            // The gauge of resources by reason is filled from the cache too, not only after a
            // write: a restarted reconciler counts what it found.
            if let Some(status) = status {
                ctx.metrics
                    .resource_from_status(K::KIND, &edges.uid, status);
            }
            Carried::Done(after.map_or_else(Action::await_change, Action::requeue))
        }
        Step::ReportSecretForbidden => match resource.secret_mode() {
            SecretMode::Generate { secret_name } => secret_unreadable(&secret_name).into(),
            _ => wait,
        },
        Step::ReportSecretNameTaken { owner } => {
            let mode = resource.secret_mode();
            let (Some(secret_name), Some(delivered)) =
                (mode.generated_into(), stale_secret(status, &mode))
            else {
                return Ok(wait);
            };
            let written = status.and_then(|s| s.generation_in_force) == Some(observed.generation);
            secret_name_taken(secret_name, owner.as_deref(), delivered, written).into()
        }
        Step::RemoveStaleSecret { name } => remove_stale(edges, status, &name).await.into(),
        Step::ClearRestoreAnnotation => {
            answer_restore_not_needed(edges, status).await?;
            wait
        }
        Step::ClearRotateAnnotation => {
            if let Some(request) = &observed.rotation_request {
                answer_rotation(edges, status, request).await?;
            }
            wait
        }
        Step::Apply {
            if_revision,
            rotate,
            restore,
        } => {
            // The collector deletes the Secret first when the manifest is deleted in the
            // foreground (a namespace's deletion takes both): the Secret's deletion can reach
            // the cache before the manifest's. Minting then would change the secret the server
            // accepts for nothing, and write a Secret the collector has passed already. The
            // deletion's own watch event decides next.
            if rotate == Some(Rotation::Deleted)
                && kube_io::deletion_under_way_now(&edges.api, resource, &edges.uid).await?
            {
                return Ok(wait);
            }
            let purpose = if restore {
                Purpose::Restore
            } else {
                Purpose::Declared
            };
            let verdict = apply(
                edges,
                status,
                provided,
                if_revision.as_deref(),
                rotate,
                purpose,
            )
            .await?;
            with_approval(verdict, &observed.policy).into()
        }
        Step::LookBeforeCreate => {
            let adoption = observed
                .adopt_request
                .as_ref()
                .map(|request| (request, requested_mint_check(observed)));
            let verdict = look_then_create(edges, status, provided, adoption).await?;
            with_approval(verdict, &observed.policy).into()
        }
        Step::ReclaimSecret { name } => match reclaim(edges, status, &name).await? {
            Some(verdict) => verdict.into(),
            None => wait,
        },
        Step::TakeOver { from, rotate } => take_over(edges, status, provided, &from, rotate)
            .await?
            .into(),
        Step::RefuseTakeOver { named } => {
            let elsewhere = status.and_then(|s| s.managed_elsewhere.as_deref());
            let cause = status.and_then(|s| s.cause).unwrap_or(Cause::Claimed);
            match elsewhere {
                Some(elsewhere) => take_over_refused(elsewhere, &named, cause).into(),
                None => wait,
            }
        }
        Step::LetGo => {
            let Some(elsewhere) = status.and_then(|s| s.managed_elsewhere.as_deref()) else {
                return Ok(wait);
            };
            Carried::Done(finish_deletion(edges, status, &released_elsewhere(elsewhere)).await?)
        }
        Step::DeliverSecret => match minted {
            Some(minted) => deliver(edges, status, &minted).await.into(),
            None => wait,
        },
        Step::ReshapeSecret => match reshape(edges, status).await {
            Some(verdict) => verdict.into(),
            None => wait,
        },
        Step::CheckDrift => {
            let mut facts = drift_facts(edges, status);
            facts.server_moved_on = observed.server.holds_other_than(facts.written_revision);
            let checked = check_drift(edges.resource, ctx.admin.as_ref(), &facts).await;
            let verdict = refused_if_unencodable(checked)?;
            note_server_view(edges, &verdict);
            verdict.into()
        }
        Step::LookBeforeRelease => {
            let looked = server_calls::look_before_release(
                edges.resource,
                ctx.admin.as_ref(),
                &drift_facts(edges, status),
            )
            .await;
            let look = match looked {
                Ok(look) => look,
                Err(ConvertError::Branding(error)) => {
                    ReleaseLook::Held(Box::new(unencodable_branding(&error)))
                }
                Err(error) => return Err(error.into()),
            };
            match after_release_look(look, K::KIND.methods().get) {
                AfterReleaseLook::LetGo(verdict) => {
                    Carried::Done(finish_deletion(edges, status, &verdict).await?)
                }
                AfterReleaseLook::Record(verdict) => {
                    note_server_view(edges, &verdict);
                    verdict.into()
                }
            }
        }
        Step::Delete { if_revision } => {
            Carried::Done(delete_on_server(edges, status, &if_revision).await?)
        }
        Step::Release { reason } => {
            let verdict = match release_secret(edges, reason).await {
                Some(release) => released_with_secret(reason, &release),
                None => released(reason),
            };
            Carried::Done(finish_deletion(edges, status, &verdict).await?)
        }
    })
}

/// Removes a Secret this resource delivered a generated secret into and no longer names, and
/// says which workloads still read it.
async fn remove_stale<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    name: &str,
) -> Verdict {
    let removal = remove_stale_secret(edges, name).await;
    let readers = match removal {
        StaleRemoval::Removed => readers_of(edges, name).await,
        _ => Readers::Found(Vec::new()),
    };
    let mode = edges.resource.secret_mode();
    stale_secret_removed(
        status
            .and_then(|s| s.generation_in_force)
            .unwrap_or_default(),
        status.and_then(|s| s.revision.as_deref()).unwrap_or(""),
        name,
        &removal,
        &readers,
        mode.generated_into(),
        &edges.namespace,
    )
}

/// A restore asked for where nothing drifted: the annotation is removed, and the request is
/// answered in the status, so whoever waits for it knows.
async fn answer_restore_not_needed<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
) -> Result<(), ReconcileError> {
    let ctx = edges.ctx;
    let request = kube_io::restore_request(edges.resource);
    let requested_by = kube_io::restore_requester(edges.resource.meta());
    kube_io::clear_restore_annotation(&edges.api, edges.resource).await?;
    let answered = restore_not_needed(status, request, requested_by, (ctx.clock)());
    ctx.write_status(&edges.api, edges.resource, &edges.uid, &answered, None)
        .await?;
    Ok(())
}

/// A rotation request carried out already (its secret is in the Secret) or impossible here
/// (no generated secret): the request is answered in the status, if it is not yet, and the
/// annotation removed.
async fn answer_rotation<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    request: &RotationRequest,
) -> Result<(), ReconcileError> {
    let ctx = edges.ctx;
    let generated = edges.resource.secret_mode().generated_into().is_some();
    // The annotation first: its removal is checked against the resourceVersion read, which
    // the status write would move.
    kube_io::clear_rotate_annotation(&edges.api, edges.resource).await?;
    if let Some(answered) = rotation_answered(status, request, generated, (ctx.clock)()) {
        ctx.leadership.gate()?;
        ctx.write_status(&edges.api, edges.resource, &edges.uid, &answered, None)
            .await?;
    }
    Ok(())
}

/// Reads what the server holds under the name before creating anything: an earlier write is
/// adopted; nothing there is created now (the step passed the write gate). Somebody else's
/// object that `nauthera.io/adopt` names at the revision read is adopted at once, from that
/// read.
async fn look_then_create<K: Managed, A: AdminApi>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    provided: Option<ReadSecret>,
    adoption: Option<(&AdoptRequest, MintCheck)>,
) -> Result<Verdict, ReconcileError> {
    let ctx = edges.ctx;
    let facts = drift_facts(edges, status);
    match look_before_create(edges.resource, ctx.admin.as_ref(), &facts).await {
        Ok(Looked::Found { held, verdict }) => {
            if verdict.fields.revision.is_some() {
                ctx.memory
                    .was_orphaned(K::KIND.object_kind(), &edges.resource.server_key(), true);
            }
            note_server_view(edges, &verdict);
            let named = adoption.filter(|(request, _)| {
                verdict.reason == Reason::AdoptionRequired && request.revision == held.revision
            });
            match named {
                Some((_, MintCheck::Refused(refusal))) => Ok(adoption_refused(
                    server_object(Some(&held)),
                    &refusal,
                    &adopt_command_of(edges),
                )),
                Some((
                    AdoptRequest {
                        secret: Ok(secret),
                        requested_by,
                        ..
                    },
                    _,
                )) => {
                    let revision = held.revision.clone();
                    let adoption = Adoption {
                        revision: &revision,
                        secret: *secret,
                        handover: false,
                        requested_by: requested_by.clone(),
                    };
                    adopt(edges, status, provided, &adoption, Some(*held)).await
                }
                Some((
                    AdoptRequest {
                        secret: Err(value), ..
                    },
                    _,
                )) => Ok(adoption_refused(
                    server_object(Some(&held)),
                    &AdoptRefusal::SecretChoice {
                        value: value.clone(),
                    },
                    &adopt_command_of(edges),
                )),
                None => Ok(*verdict),
            }
        }
        Ok(Looked::Failed(verdict)) => Ok(*verdict),
        Ok(Looked::Nothing) => apply(edges, status, provided, None, None, Purpose::Declared).await,
        Err(ConvertError::Branding(error)) => Ok(unencodable_branding(&error)),
        Err(error) => Err(error.into()),
    }
}

/// Owns again the Secret a re-declared orphan's secret was released into; `None` when there is
/// nothing to reclaim.
async fn reclaim<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    name: &str,
) -> Result<Option<Verdict>, ReconcileError> {
    let (Some(revision), Some(client_id)) = (
        status.and_then(|s| s.revision.as_deref()),
        status.and_then(|s| s.client_id.as_deref()),
    ) else {
        return Ok(None);
    };
    if !kube_io::reclaim_secret(&edges.secrets, edges.resource, name, client_id).await? {
        return Ok(None);
    }
    Ok(Some(secret_reclaimed(
        status
            .and_then(|s| s.generation_in_force)
            .unwrap_or_default(),
        revision,
        name,
        client_id,
    )))
}

/// Writes the declared state over another reconciler's revision; once written, the take-over
/// annotation is removed.
async fn take_over<K: Managed, A: AdminApi>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    provided: Option<ReadSecret>,
    from: &ManagedElsewhere,
    rotate: Option<Rotation>,
) -> Result<Verdict, ReconcileError> {
    let verdict = apply(
        edges,
        status,
        provided,
        Some(from.revision.as_str()),
        rotate,
        Purpose::TakeOver,
    )
    .await?;
    if verdict.fields.revision.is_none() {
        return Ok(verdict);
    }
    kube_io::clear_take_over_annotation(&edges.api, edges.resource).await?;
    Ok(taken_over(verdict, from))
}

/// Deletes the object on the server if it still holds the revision, and records the outcome
/// with the manifests that still depend on it.
async fn delete_on_server<K: Managed, A: AdminApi>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    if_revision: &str,
) -> Result<Action, ReconcileError> {
    let ctx = edges.ctx;
    let deletion = delete(
        edges.resource,
        ctx.admin.as_ref(),
        &ctx.manager,
        if_revision,
    )
    .await?;
    // The revision the server answered with is what the next step looks at.
    if let Some(held) = deletion.held_revision {
        ctx.revisions.note(
            K::KIND.object_kind(),
            edges.resource.server_key(),
            Some(held),
        );
    }
    let dependents = edges
        .resource
        .provides()
        .map(|provided| ctx.prerequisites.dependents(&provided))
        .unwrap_or_default();
    let verdict = naming_dependents(deletion.verdict, &dependents);
    finish_deletion(edges, status, &verdict).await
}

/// Tells the policy caches whether a policy holds the resource back, for the policy's status.
fn record_hold<K: Managed, A>(edges: &Edges<'_, K, A>, verdict: &Verdict) {
    if K::KIND.policy_kind().is_none() {
        return;
    }
    let held = verdict.fields.policy.as_ref().map(|hold| {
        (
            hold.policy.clone(),
            HeldResource {
                kind: K::KIND.as_str().to_owned(),
                namespace: edges.namespace.clone(),
                name: edges.resource.name_any(),
                reason: verdict.reason.as_str().to_owned(),
                rule: hold.rule.clone(),
            },
        )
    });
    edges.ctx.policies.record_hold(
        (
            K::KIND.object_kind(),
            edges.namespace.clone(),
            edges.resource.name_any(),
        ),
        held,
    );
}

/// Where the declared generation stands with the policies, unless the manifest is being
/// deleted. A generation in force is judged on the rules only: it needs no approval.
fn policy_gate<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    generation: i64,
    deleting: bool,
) -> PolicyGate {
    let Some(kind) = K::KIND.policy_kind() else {
        return PolicyGate::Open;
    };
    let written = status.is_some_and(|s| s.revision.is_some());
    let in_force = written && status.and_then(|s| s.generation_in_force) == Some(generation);
    if deleting || !edges.ctx.policies.any() {
        return PolicyGate::Open;
    }
    let resource = edges.resource;
    let Ok(object) = serde_json::to_value(resource) else {
        return PolicyGate::Open;
    };
    let name = resource.name_any();
    edges.ctx.policies.gate(&Judged {
        kind,
        namespace: &edges.namespace,
        name: &name,
        uid: Some(edges.uid.as_str()),
        created: resource.meta().creation_timestamp.as_ref().map(|t| t.0),
        issuer: resource.issuer(),
        generation,
        written,
        in_force,
        recorded: status.and_then(|s| s.approval.as_deref()),
        object: &object,
    })
}

/// Everything the first decision depends on, and the Secret the team holds when it was read for
/// that. The Secret of a generated secret is read later, only if a decision depends on it.
async fn observe<'s, K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&'s ResourceStatus>,
    secret_pending: bool,
) -> Result<(Observed<'s>, Option<ReadSecret>), ReconcileError> {
    let resource = edges.resource;
    let ctx = edges.ctx;
    let deleting = resource.meta().deletion_timestamp.is_some();
    let secret_mode = resource.secret_mode();
    let generation = resource.meta().generation.unwrap_or(0);
    let secret_state = match (&secret_mode, deleting, secret_pending) {
        (SecretMode::Generate { .. }, false, false) => SecretState::Unknown,
        _ => SecretState::NotApplicable,
    };
    let (provided_secret_changed, provided) =
        provided_secret_changed(edges, status, &secret_mode, deleting).await?;
    // The owner index of the delivered Secrets' cache; the decision keeps those not recorded.
    let unrecorded_secrets = match secret_mode.generated_into() {
        Some(_) if !deleting => ctx.delivered.owned_by(&edges.namespace, &edges.uid),
        _ => Vec::new(),
    };
    let now = (ctx.clock)();
    let observed = Observed {
        generation,
        deleting,
        has_finalizer: resource.finalizers().iter().any(|f| f == FINALIZER),
        deletion_finished: deleting && ctx.memory.deletion_finished(&edges.uid),
        restore_requested: kube_io::restore_requested(resource),
        rotation_request: kube_io::rotation_request(resource).filter(|_| !deleting),
        delivered_request: None,
        scheduled: scheduled(
            edges,
            status.and_then(|s| s.secret_set_time.as_ref()).map(|t| t.0),
            now,
        ),
        take_over_from: kube_io::take_over_from(resource),
        observes: resource.management_policy().observes(),
        adopt_request: kube_io::adopt_request(resource),
        deletion_policy: resource.deletion_policy(),
        status,
        provided_secret_changed,
        secret_mode,
        secret_pending,
        unrecorded_secrets,
        secret_state,
        server: resource.server_view(&ctx.revisions),
        retry_not_before: ctx.memory.retry_not_before(&edges.uid, generation),
        prerequisites: standing(edges, generation, now),
        policy: policy_gate(edges, status, generation, deleting),
        now,
    };
    Ok((observed, provided))
}

/// Where the resource stands with the manifests it depends on, and since when it waits.
fn standing<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    generation: i64,
    now: jiff::Timestamp,
) -> Standing {
    let ctx = edges.ctx;
    let mut standing = ctx.prerequisites.standing(&edges.resource.needs());
    let waiting = standing.waiting_for.is_some() || standing.missing.is_some();
    standing.waiting_since = ctx
        .memory
        .waiting_since(&edges.uid, generation, waiting, now);
    standing
}

/// Whether the Secret the team holds changed since its value was sent: its version, from the
/// watch of referenced Secrets, against the one the status records (so a change made while the
/// reconciler was down counts too). Read only when the watch has not seen it or says it moved,
/// and then handed on, so that a write sends what was read; a Secret that cannot be read is
/// reported when the value is next sent.
async fn provided_secret_changed<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    mode: &SecretMode,
    deleting: bool,
) -> Result<(bool, Option<ReadSecret>), ReconcileError> {
    let written = status.is_some_and(|s| s.revision.is_some());
    let Some(reference) = edges.resource.provided_secret() else {
        return Ok((false, None));
    };
    if *mode != SecretMode::Provided || deleting || !written {
        return Ok((false, None));
    }
    let sent = status.and_then(|s| s.secret_version.as_deref());
    let known = edges.ctx.memory.sent_value(&edges.uid);
    let cached = edges
        .ctx
        .references
        .version(&edges.namespace, &reference.name);
    let held_at = |version: Option<&str>| {
        version.is_some()
            && (version == sent || version == known.as_ref().map(|k| k.version.as_str()))
    };
    if known.is_some() && held_at(cached.as_deref()) {
        return Ok((false, None));
    }
    // Not in the watch cache, or it says the Secret moved, or this process does not know the
    // value yet: read it, since the cache may only lag behind the version the last write read
    // itself (which would send the same value again), and a new version may change only the
    // Secret's labels or annotations (which sends nothing).
    let moved = cached.is_some() && !held_at(cached.as_deref());
    Ok(
        match kube_io::read_secret_ref(&edges.secrets, &reference.name, &reference.key).await? {
            Ok(read) => {
                let value = SentValue {
                    version: read.version.clone(),
                    digest: read.value.digest(),
                };
                let changed = provided_value_changed(sent, known.as_ref(), &value);
                if !changed {
                    edges.ctx.memory.remember_sent_value(&edges.uid, value);
                }
                (changed, Some(read))
            }
            // Unreadable now: a change the cache saw is reported when the value is sent.
            Err(_) => (moved, None),
        },
    )
}

/// The Secret a generated secret goes into: from the watch cache when it holds one this
/// resource delivered, else read (absent, somebody else's, or not in the cache yet).
async fn generated_secret_state<K: Managed, A>(
    edges: &Edges<'_, K, A>,
) -> Result<(SecretState, Option<String>), ReconcileError> {
    let SecretMode::Generate { secret_name } = edges.resource.secret_mode() else {
        return Ok((SecretState::NotApplicable, None));
    };
    let shape = edges.resource.secret_template().map(shape_digest);
    let cached = edges
        .ctx
        .delivered
        .get(&edges.namespace, &secret_name)
        .map(|secret| {
            (
                kube_io::state_of(&secret, &edges.uid, shape.as_deref()),
                secret.rotation_request.map(String::from),
            )
        });
    Ok(match cached {
        Some(owned @ (SecretState::Owned { .. } | SecretState::OtherShape, _)) => owned,
        _ => {
            kube_io::read_generated_secret(
                &edges.secrets,
                &secret_name,
                edges.resource,
                shape.as_deref(),
            )
            .await?
        }
    })
}

fn drift_facts<'a, K: Managed, A>(
    edges: &'a Edges<'_, K, A>,
    status: Option<&'a ResourceStatus>,
) -> DriftFacts<'a> {
    DriftFacts {
        generation: edges.resource.meta().generation.unwrap_or(0),
        written_revision: status.and_then(|s| s.revision.as_deref()),
        generation_in_force: status.and_then(|s| s.generation_in_force),
        organization: status.and_then(|s| s.slug.as_deref()),
        client_id: status.and_then(|s| s.client_id.as_deref()),
        manager: &edges.ctx.manager,
        namespace_mapped: edges.ctx.namespace_mapped,
        managed_elsewhere: status.and_then(|s| s.managed_elsewhere.as_deref()),
        history_restarted: edges.ctx.revisions.history_restarted(),
        manifest_created: edges
            .resource
            .meta()
            .creation_timestamp
            .as_ref()
            .map(|t| t.0),
        orphaned_here: status.and_then(|s| s.revision.as_ref()).is_none()
            && edges.ctx.memory.was_orphaned(
                K::KIND.object_kind(),
                &edges.resource.server_key(),
                false,
            ),
        server_moved_on: false,
    }
}

/// Why a write is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    /// The declared state, over this resource's own last write (or nothing).
    Declared,
    /// Over a drift, on the restore annotation's request.
    Restore,
    /// Over another reconciler's write, on the take-over annotation's request.
    TakeOver,
    /// Over somebody else's write, adopting it: with the team's secret only when
    /// `send_provided` (kept otherwise).
    Adopt { send_provided: bool },
}

/// Writes the declared state, with the team's secret (`already_read` when observing read it).
async fn apply<K: Managed, A: AdminApi>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    already_read: Option<ReadSecret>,
    if_revision: Option<&str>,
    rotate: Option<Rotation>,
    purpose: Purpose,
) -> Result<Verdict, ReconcileError> {
    let ctx = edges.ctx;
    let resource = edges.resource;
    // A template that does not render would leave a minted secret undeliverable: nothing is
    // sent until it is fixed.
    if let Some(template) = resource.secret_template()
        && let Err(problem) = secret_render::check(template, resource.issuer())
    {
        return Ok(invalid_secret_template(&problem));
    }
    let provided = match provided_to_send(edges, already_read).await? {
        Ok(provided) => provided,
        Err(unavailable) => return Ok(unavailable),
    };
    // An adoption that keeps the secret the server holds sends none: the team's Secret is
    // taken to hold it, and only a later change of its value is sent.
    let (provided, kept) = match purpose {
        Purpose::Adopt {
            send_provided: false,
        } => (
            None,
            provided.map(|read| SentValue {
                version: read.version.clone(),
                digest: read.value.digest(),
            }),
        ),
        _ => (provided, None),
    };
    // Reading the team's Secret takes a while, in which the term may end.
    ctx.leadership.gate()?;
    let sent = status.and_then(|s| s.secret_version.as_deref());
    // The value sent, and whether it is new to the server (the first one, or a changed one).
    let sending = provided.as_ref().map(|read| SentValue {
        version: read.version.clone(),
        digest: read.value.digest(),
    });
    let known = ctx.memory.sent_value(&edges.uid);
    let request = rotate
        .as_ref()
        .and_then(|_| kube_io::rotation_request(resource));
    let mut write = Write {
        purpose,
        rotate,
        request,
        value_changed: sending
            .as_ref()
            .is_some_and(|value| provided_value_changed(sent, known.as_ref(), value)),
        registered_before: status.is_some_and(|s| s.revision.is_some()),
        still_differs: still_differing(edges, status, purpose).await,
        if_revision: if_revision.map(str::to_owned),
        provided,
    };
    let mut resent = false;
    loop {
        let request = WriteRequest {
            manager: &ctx.manager,
            if_revision: write.if_revision.as_deref(),
            rotate_secret: write.rotate.is_some(),
            provided: write.provided.as_ref().map(|read| &read.value),
        };
        let written = match server_calls::write(resource, ctx.admin.as_ref(), request).await {
            Ok(written) => written,
            Err(ConvertError::Branding(error)) => return Ok(unencodable_branding(&error)),
            Err(error) => return Err(error.into()),
        };
        return match written {
            WriteResult::Written {
                applied,
                organization,
                minted,
            } => {
                let verdict = after_written(edges, status, &write, &applied, minted).await?;
                let verdict = in_organization(verdict, organization);
                let mut verdict = with_value_sent(verdict, value_sent::<K>(&write, resource));
                if let Some(value) = sending.or_else(|| kept.clone()) {
                    if kept.is_some() {
                        verdict.fields.secret_version = Some(value.version.clone());
                    }
                    ctx.memory.remember_sent_value(&edges.uid, value);
                }
                note_server_view(edges, &verdict);
                Ok(verdict)
            }
            WriteResult::Conflict => {
                let facts = DriftFacts {
                    server_moved_on: true,
                    ..drift_facts(edges, status)
                };
                let checked = check_drift(resource, ctx.admin.as_ref(), &facts).await;
                let verdict = refused_if_unencodable(checked)?;
                let read_version = write.provided.as_ref().map(|read| read.version.as_str());
                if let Some(revision) = resend_over(&verdict, resent, read_version, sent) {
                    resent = true;
                    write.if_revision = Some(revision);
                    continue;
                }
                note_server_view(edges, &verdict);
                Ok(verdict)
            }
            WriteResult::Failed(verdict) => Ok(*verdict),
        };
    }
}

/// One write of the declared state: what it sends, and what its verdict depends on.
struct Write {
    purpose: Purpose,
    /// Mint a new generated secret, and why.
    rotate: Option<Rotation>,
    /// The rotation request a minted secret carries out (any rotation does, while one waits).
    request: Option<RotationRequest>,
    /// The team's secret, as read for this write.
    provided: Option<ReadSecret>,
    /// Whether the team's value is new to the server (the first one, or a changed one).
    value_changed: bool,
    registered_before: bool,
    /// Over a drift: the fields in which the server's drifted state differs from the new
    /// generation.
    still_differs: Option<Vec<String>>,
    /// The revision the server must hold (`None`: nothing).
    if_revision: Option<String>,
}

/// The team's Secret a write sends: the one observing read, else read now; `Err` with the
/// verdict when it cannot be read. `None` when the manifest names none.
async fn provided_to_send<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    already_read: Option<ReadSecret>,
) -> Result<Result<Option<ReadSecret>, Verdict>, ReconcileError> {
    let (SecretMode::Provided, Some(reference)) = (
        edges.resource.secret_mode(),
        edges.resource.provided_secret(),
    ) else {
        return Ok(Ok(None));
    };
    if already_read.is_some() {
        return Ok(Ok(already_read));
    }
    Ok(
        match kube_io::read_secret_ref(&edges.secrets, &reference.name, &reference.key).await? {
            Ok(read) => Ok(Some(read)),
            Err(problem) => Err(secret_ref_unavailable(
                K::SECRET_REF_FIELD,
                &reference.name,
                &reference.key,
                problem,
            )),
        },
    )
}

/// Over a drift: which of its fields the new generation declares as the server holds them
/// (those are kept, not discarded), read before they are written over.
async fn still_differing<K: Managed, A: AdminApi>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    purpose: Purpose,
) -> Option<Vec<String>> {
    let drift = status.and_then(|s| s.drift.as_ref())?;
    if purpose != Purpose::Declared || drift.removed {
        return None;
    }
    match edges.resource.get(edges.ctx.admin.as_ref()).await {
        Ok(Ok(Some(held))) if held.revision == drift.server_revision => Some(held.differs),
        _ => None,
    }
}

/// The verdict of a write the server took: a minted secret delivered, the restore annotation
/// removed, a settled secret's stale Secret removed, a drift superseded, a restore answered.
async fn after_written<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    write: &Write,
    applied: &Applied,
    minted: Option<SecretValue>,
) -> Result<Verdict, ReconcileError> {
    let resource = edges.resource;
    let restore = write.purpose == Purpose::Restore;
    let mode = resource.secret_mode();
    let rotate = write.rotate.as_ref();
    let (secret_name, delivery) = match (&mode, minted) {
        (SecretMode::Generate { secret_name }, Some(value)) => {
            let minted = Minted {
                value,
                client_id: applied.client_id.clone(),
                secret_name: secret_name.clone(),
                rotation: write.rotate.clone(),
                request: write.request.clone(),
            };
            // Kept in memory until the Secret is written, so a failed write is retried
            // without minting again.
            edges.ctx.memory.remember_minted(&edges.uid, minted.clone());
            let result = deliver_minted(edges, &minted).await;
            (Some(secret_name.as_str()), Some(result))
        }
        _ => (None, None),
    };
    let request = kube_io::restore_request(resource);
    if restore {
        kube_io::clear_restore_annotation(&edges.api, resource).await?;
    }
    // The secret in force is settled: delivered, or not a generated one any more.
    let settled = match &mode {
        SecretMode::Generate { .. } => matches!(delivery, Some(Ok(()))),
        _ => true,
    };
    let mut verdict = after_apply(applied, secret_name, delivery, restore, rotate);
    if settled {
        verdict = after_settled(edges, status, verdict, rotate).await;
        verdict = rotation_carried_out(edges, verdict, rotate, write.request.as_ref()).await;
    }
    // A new generation over a drift (not a restore): what it declares as the server held it
    // is kept, the rest of the person's change is discarded.
    if let Some(drift) = status
        .and_then(|s| s.drift.as_ref())
        .filter(|_| write.purpose == Purpose::Declared)
    {
        verdict = superseding_drift(verdict, drift, write.still_differs.as_deref());
    }
    if restore {
        verdict = restored(
            verdict,
            request,
            kube_io::restore_requester(resource.meta()),
            status.and_then(|s| s.client_id.as_deref()),
            applied,
            write.if_revision.as_deref(),
        );
    }
    Ok(verdict)
}

/// The team's value a write sent, where the manifest names one.
fn value_sent<'a, K: Managed>(write: &'a Write, resource: &'a K) -> Option<ValueSent<'a>> {
    let read = write.provided.as_ref()?;
    let reference = resource.provided_secret()?;
    Some(ValueSent {
        version: &read.version,
        changed: write.value_changed,
        registered_before: write.registered_before,
        secret: ProvidedSecret {
            field: K::SECRET_REF_FIELD,
            secret: &reference.name,
            key: &reference.key,
            what: K::PROVIDED_SECRET,
        },
    })
}

/// A branding the reconciler cannot encode is refused here, as a verdict; any other conversion
/// failure is an error of the reconcile.
fn refused_if_unencodable(
    checked: Result<Verdict, ConvertError>,
) -> Result<Verdict, ReconcileError> {
    match checked {
        Ok(verdict) => Ok(verdict),
        Err(ConvertError::Branding(error)) => Ok(unencodable_branding(&error)),
        Err(error) => Err(error.into()),
    }
}

/// Keeps what a write or a read found the server holding, for the kinds the server does not
/// list: the next reconcile compares against it instead of reading again.
fn note_server_view<K: Managed, A>(edges: &Edges<'_, K, A>, verdict: &Verdict) {
    let held = match (&verdict.fields.drift, &verdict.fields.observed) {
        (DriftUpdate::Set(_), _) | (_, Update::Keep | Update::Clear) => noted_revision(verdict),
        (_, Update::Set(object)) if object.absent => Some(None),
        (_, Update::Set(object)) => Some(Some(object.revision.clone())),
    };
    let Some(held) = held else {
        return;
    };
    edges
        .ctx
        .revisions
        .note(K::KIND.object_kind(), edges.resource.server_key(), held);
}

/// The revision a write or a drift check found the server holding (`Some(None)`: nothing);
/// `None` when the verdict says nothing of it.
fn noted_revision(verdict: &Verdict) -> Option<Option<String>> {
    let held = match &verdict.fields.drift {
        DriftUpdate::Set(drift) if drift.removed => None,
        DriftUpdate::Set(drift) => Some(drift.server_revision.clone()),
        _ => Some(verdict.fields.revision.clone()?),
    };
    Some(held)
}

/// Writes a minted secret into its Secret; forgets it once written.
async fn deliver_minted<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    minted: &Minted,
) -> Result<(), crate::reconcile::decide::SecretWriteFailure> {
    let cached = edges
        .ctx
        .delivered
        .get(&edges.namespace, &minted.secret_name);
    let result = kube_io::deliver_secret(
        &edges.secrets,
        edges.resource,
        kube_io::Delivery {
            secret_name: &minted.secret_name,
            client_id: &minted.client_id,
            issuer: edges.resource.issuer(),
            value: &minted.value,
            template: edges.resource.secret_template(),
            rotation_request: minted.request.as_ref().map(|r| r.request.as_str()),
        },
        cached.as_ref(),
    )
    .await;
    if result.is_ok() {
        edges.ctx.memory.forget_minted(&edges.uid);
    }
    result
}

/// Rewrites the Secret of the generated secret in the declared shape, with the client secret
/// it holds; `None` when there is nothing to rewrite (the watch tells what became of it).
async fn reshape<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
) -> Option<Verdict> {
    let SecretMode::Generate { secret_name } = edges.resource.secret_mode() else {
        return None;
    };
    let client_id = status.and_then(|s| s.client_id.as_deref())?;
    let hold = |value: String| {
        edges.ctx.memory.remember_minted(
            &edges.uid,
            Minted {
                value: SecretValue::new(value),
                client_id: client_id.to_owned(),
                secret_name: secret_name.clone(),
                rotation: None,
                request: None,
            },
        );
    };
    let outcome = secret_shape::reshape_secret(
        &edges.secrets,
        edges.resource,
        &secret_name,
        (
            edges.resource.secret_template(),
            client_id,
            edges.resource.issuer(),
        ),
        hold,
    )
    .await;
    // Written (or not replaced): the value held for a replacement is not needed any more; after
    // a failed replacement it stays, and is delivered from memory.
    if outcome.is_ok() {
        edges.ctx.memory.forget_minted(&edges.uid);
    }
    match outcome {
        Ok(Reshaped::Rewritten) => Some(secret_reshaped(
            status
                .and_then(|s| s.generation_in_force)
                .unwrap_or_default(),
            status.and_then(|s| s.revision.as_deref()).unwrap_or(""),
            &secret_name,
        )),
        Ok(Reshaped::Nothing) => None,
        Err(failure) => Some(secret_reshape_failed(&failure, &secret_name)),
    }
}

/// Writes the minted secret held in memory (a delivery that failed before).
async fn deliver<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    minted: &Minted,
) -> Verdict {
    match deliver_minted(edges, minted).await {
        Ok(()) => {
            let verdict = secret_delivered(
                status
                    .and_then(|s| s.generation_in_force)
                    .unwrap_or_default(),
                status.and_then(|s| s.revision.as_deref()).unwrap_or(""),
                &minted.secret_name,
            );
            let verdict = after_settled(edges, status, verdict, minted.rotation.as_ref()).await;
            rotation_carried_out(
                edges,
                verdict,
                minted.rotation.as_ref(),
                minted.request.as_ref(),
            )
            .await
        }
        Err(failure) => after_secret_failure(&failure, &minted.secret_name),
    }
}

/// A rotation delivered: recorded in the status, and the request it carried out (if any)
/// answered by removing its annotation. A removal that fails is not the verdict's failure: the
/// Secret holds the request's secret, so the next reconcile (which the verdict asks for) only
/// removes the annotation.
async fn rotation_carried_out<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    verdict: Verdict,
    rotation: Option<&Rotation>,
    request: Option<&RotationRequest>,
) -> Verdict {
    let mut verdict = with_rotation_recorded(verdict, rotation, request);
    if request.is_some() && verdict.fields.last_rotation.is_some() {
        let cleared = match edges.ctx.leadership.gate() {
            Ok(()) => kube_io::clear_rotate_annotation(&edges.api, edges.resource)
                .await
                .map_err(|error| error.to_string()),
            Err(error) => Err(error.to_string()),
        };
        if let Err(error) = cleared {
            tracing::warn!(kind = K::KIND.as_str(), namespace = %edges.namespace, name = %edges.resource.name_any(), error = %error, "the rotate annotation stays until the next reconcile");
            // Nothing else brings that reconcile: the status write that records the request
            // is the reconciler's own, whose watch event wakes nobody.
            verdict.keep_trying = true;
        }
    }
    verdict
}

/// Once the secret in force is settled (delivered, or no longer generated): the Secret left
/// with a dead value is removed, and a rotation is told with the workloads that must restart.
async fn after_settled<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    mut verdict: Verdict,
    rotation: Option<&Rotation>,
) -> Verdict {
    let mode = edges.resource.secret_mode();
    let current = mode.generated_into();
    let stale = stale_secret(status, &mode);
    let removal = match stale {
        Some(stale) => Some(remove_stale_secret(edges, stale).await),
        None => None,
    };
    // The workloads of the removed Secret are named only when it is gone.
    let old = match (stale, &removal) {
        (Some(stale), Some(removal @ StaleRemoval::Removed)) => {
            Some((stale, readers_of(edges, stale).await, removal))
        }
        (Some(stale), Some(removal)) => Some((stale, Readers::Found(Vec::new()), removal)),
        _ => None,
    };
    let told_rotation = match (rotation, current) {
        (Some(rotation), Some(current)) if rotation.replaces_a_delivered_secret() => {
            let (readers, templates) = readers_and_templates(edges, current).await;
            let rollout = edges.resource.workload_restart() == Some(WorkloadRestart::Rollout);
            let readers = match (readers, templates.as_deref()) {
                (Readers::Found(found), Some(_)) if rollout && !found.is_empty() => {
                    Readers::Restarting(found)
                }
                (readers, _) => readers,
            };
            if let (Readers::Restarting(_), Some(templates)) = (&readers, &templates) {
                verdict = restart_readers(edges, verdict, current, templates).await;
            }
            verdict = rotated(
                verdict,
                rotation,
                current,
                &edges.namespace,
                &readers,
                old.as_ref()
                    .map(|(_, readers, removal)| (readers, *removal)),
            );
            true
        }
        _ => false,
    };
    if let Some((stale, readers, removal)) = &old {
        if !told_rotation {
            verdict =
                with_removal_told(verdict, stale, removal, readers, current, &edges.namespace);
        }
        verdict = with_stale_removal(verdict, stale, removal, current);
    }
    verdict
}

/// The workloads in the resource's namespace that read the Secret: three listings, made only
/// when a secret was rotated or a Secret removed.
async fn readers_of<K: Managed, A>(edges: &Edges<'_, K, A>, secret: &str) -> Readers {
    readers_and_templates(edges, secret).await.0
}

/// Restarts the workloads that read the Secret a new client secret was just delivered into
/// (`spec.secret.restart: Rollout`), once for the delivery, and tells how it went. Only the
/// leader patches.
async fn restart_readers<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    verdict: Verdict,
    secret: &str,
    templates: &[PodTemplate],
) -> Verdict {
    use crate::kubernetes::kube_io::restart::{delivery_of, restart_planned};
    if edges.ctx.leadership.gate().is_err() {
        return verdict;
    }
    let restarted_at = (edges.ctx.clock)()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    // The Secret's version right after the write names the delivery; unreadable, the time does.
    let delivery = delivery_of(&edges.secrets, secret)
        .await
        .unwrap_or_else(|| format!("{secret}@{restarted_at}"));
    let planned = restart_plan(templates, secret, &delivery);
    let outcomes = restart_planned(
        &edges.ctx.client,
        &edges.namespace,
        planned,
        &restarted_at,
        &delivery,
    )
    .await;
    for (consumer, outcome) in &outcomes {
        tracing::info!(kind = K::KIND.as_str(), namespace = %edges.namespace, name = %edges.resource.name_any(), workload = %format!("{}/{}", consumer.kind, consumer.name), outcome = ?outcome, "workload restart");
    }
    with_restarts(verdict, secret, &delivery, &edges.namespace, &outcomes)
}

/// The workloads that read the Secret, with the pod templates they were found in (`None` when
/// they could not be listed).
async fn readers_and_templates<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    secret: &str,
) -> (Readers, Option<Vec<PodTemplate>>) {
    match nauthera_shared::workloads::pod_templates(&edges.ctx.client, &edges.namespace).await {
        Ok(templates) => (
            Readers::Found(nauthera_shared::workloads::consumers(&templates, secret)),
            Some(templates),
        ),
        Err(failure) => (
            Readers::Unlisted(match &failure.error {
                kube::Error::Api(status) if status.code == 403 => format!(
                    "listing {} is forbidden; grant the reconciler list on deployments, \
                 statefulsets and daemonsets",
                    failure.resource
                ),
                error => format!("listing {}: {error}", failure.resource),
            }),
            None,
        ),
    }
}

/// Removes a Secret this resource delivered a generated secret into and no longer uses.
async fn remove_stale_secret<K: Managed, A>(edges: &Edges<'_, K, A>, name: &str) -> StaleRemoval {
    match kube_io::remove_owned_secret(&edges.secrets, name, &edges.uid).await {
        Ok(true) => StaleRemoval::Removed,
        Ok(false) => StaleRemoval::Nothing,
        Err(error) => StaleRemoval::Failed {
            forbidden: matches!(&error, kube::Error::Api(status) if status.code == 403),
            message: error.to_string(),
        },
    }
}

/// Releases the Secret a deletion that leaves the object on the server releases
/// ([`secret_to_release`]), unless a foreground deletion leaves it to the garbage collector
/// ([`secret_fate`]); `None` when there is no such Secret of this resource's.
async fn release_secret<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    reason: Reason,
) -> Option<SecretRelease> {
    let registered = edges
        .ctx
        .memory
        .status_or(&edges.uid, edges.resource.status())
        .is_some_and(|status| status.revision.is_some());
    let secret_name = secret_to_release(reason, edges.resource.secret_mode(), registered)?;
    let failed = |error: kube::Error, secret_name: String| SecretRelease::Failed {
        forbidden: matches!(&error, kube::Error::Api(status) if status.code == 403),
        message: error.to_string(),
        secret_name,
    };
    let secret = match edges.secrets.get_opt(&secret_name).await {
        Ok(secret) => secret,
        Err(error) => return Some(failed(error, secret_name)),
    };
    let held = kube_io::secret_held(secret.as_ref(), &edges.uid);
    match (
        secret_fate(held, kube_io::deleted_in_foreground(edges.resource)),
        secret,
    ) {
        (SecretFate::Release, Some(secret)) => {
            match kube_io::release_secret(&edges.secrets, edges.resource, &secret).await {
                Ok(()) => Some(SecretRelease::Released { secret_name }),
                Err(error) => Some(failed(error, secret_name)),
            }
        }
        (SecretFate::LeaveToCollector, _) => Some(SecretRelease::LeftToCollector { secret_name }),
        (SecretFate::Absent, _) => Some(SecretRelease::Absent { secret_name }),
        (SecretFate::Release | SecretFate::NotOurs, _) => None,
    }
}

/// Records a deletion outcome and lets the manifest go; a retried failure keeps the finalizer.
async fn finish_deletion<K: Managed, A>(
    edges: &Edges<'_, K, A>,
    status: Option<&ResourceStatus>,
    verdict: &Verdict,
) -> Result<Action, ReconcileError> {
    let ctx = edges.ctx;
    record_hold(edges, verdict);
    if !verdict.reason.is_deletion_outcome() {
        return ctx
            .record(K::KIND, &edges.api, edges.resource, status, verdict, true)
            .await;
    }
    if verdict.reason == Reason::Orphaned {
        ctx.memory
            .orphaned(K::KIND.object_kind(), edges.resource.server_key());
    }
    // The manifests that name this one say how it went.
    if let Some(provided) = edges.resource.provides() {
        ctx.prerequisites.record_gone(provided, verdict.reason);
    }
    let action = ctx
        .record(K::KIND, &edges.api, edges.resource, status, verdict, false)
        .await?;
    ctx.leadership.gate()?;
    kube_io::set_finalizer(&edges.api, edges.resource, false).await?;
    ctx.memory.finished_deletion(&edges.uid, (ctx.clock)());
    Ok(action)
}
