//! The server side of the steps, for every kind: write, delete, and confirm a drift with who
//! changed what. Each makes the kind's call through [`Managed`] and returns plain values, so
//! tests answer with a fake AdminService.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use nauthera_client::CallError;
use nauthera_client::convert::ConvertError;
use nauthera_proto::v1;
use nauthera_shared::resources::{ManagedElsewhere, ServerObject};

use crate::process::memory::SecretValue;
use crate::reconcile::decide::{
    Applied, DeleteOutcome, DriftReport, LastWrite, ReleaseLook, Verdict, Writer, adopt_command,
    adopted, adopted_from, adoption_required, after_apply_failure, after_delete,
    after_delete_failure, after_drift_check_failure, drifted, elsewhere_gone, elsewhere_record,
    is_conflict, managed_elsewhere, no_drift, writer,
};
use crate::reconcile::managed::{Held, Managed, WriteRequest};
use crate::server::admin::AdminApi;

/// What a write came to.
#[derive(Debug)]
pub enum WriteResult {
    Written {
        applied: Applied,
        /// The organization's slug.
        organization: String,
        /// A secret the server minted (on creation or rotation), exactly once.
        minted: Option<SecretValue>,
    },
    /// The server holds another revision than the one named: check the drift.
    Conflict,
    Failed(Box<Verdict>),
}

/// Writes the declared state.
pub async fn write<K: Managed, A: AdminApi>(
    resource: &K,
    admin: &A,
    request: WriteRequest<'_>,
) -> Result<WriteResult, ConvertError> {
    Ok(match resource.apply(admin, request).await? {
        Ok(written) => WriteResult::Written {
            applied: applied(&written.held, written.created),
            organization: written.held.organization,
            minted: written.minted,
        },
        Err(error) if is_conflict(&error) => WriteResult::Conflict,
        Err(error) => WriteResult::Failed(Box::new(after_apply_failure(
            &error,
            K::KIND.methods().apply,
        ))),
    })
}

pub fn applied(held: &Held, created: bool) -> Applied {
    Applied {
        client_id: held.client_id.clone(),
        revision: held.revision.clone(),
        generation_in_force: held.generation_in_force,
        created,
    }
}

/// What a delete came to, and the revision the server holds when it refused for another one.
pub struct Deletion {
    pub verdict: Verdict,
    pub held_revision: Option<String>,
}

/// Deletes the object only while the server holds the revision last written.
pub async fn delete<K: Managed, A: AdminApi>(
    resource: &K,
    admin: &A,
    manager: &str,
    if_revision: &str,
) -> Result<Deletion, ConvertError> {
    let done = |verdict| Deletion {
        verdict,
        held_revision: None,
    };
    Ok(match resource.delete(admin, manager, if_revision).await? {
        Ok(was_there) => done(after_delete(&DeleteOutcome::Deleted { was_there })),
        Err(error) if is_conflict(&error) => {
            let held_revision = error.server().and_then(|s| s.held_revision.clone());
            // A mismatch against no revision at all means the object is gone already (a repeated
            // delete of an object still cached with its finalizer, say): nothing is left behind.
            match held_revision.as_deref() {
                None | Some("") => done(after_delete(&DeleteOutcome::Deleted { was_there: false })),
                Some(_) => Deletion {
                    verdict: after_delete(&DeleteOutcome::Conflict {
                        held_revision: held_revision.clone(),
                    }),
                    held_revision,
                },
            }
        }
        Err(CallError::Server(error)) if error.code == tonic::Code::NotFound => {
            done(after_delete(&DeleteOutcome::Deleted { was_there: false }))
        }
        Err(error) => done(after_delete_failure(&error, K::KIND.methods().delete)),
    })
}

/// What the drift check knows besides the server.
#[derive(Clone, Debug)]
pub struct DriftFacts<'a> {
    pub generation: i64,
    /// The revision this resource last wrote.
    pub written_revision: Option<&'a str>,
    /// The generation the server kept in force after the last write.
    pub generation_in_force: Option<i64>,
    /// The organization slug, when known (for the audit log of a removed object).
    pub organization: Option<&'a str>,
    pub client_id: Option<&'a str>,
    /// The reconciler's own manager name.
    pub manager: &'a str,
    /// Whether this cluster's namespaces are mapped on the server (a cluster name).
    pub namespace_mapped: bool,
    /// The reconciler that managed the object when last looked at.
    pub managed_elsewhere: Option<&'a ManagedElsewhere>,
    /// The server's history restarted since the previous listing.
    pub history_restarted: bool,
    /// When the manifest was created: a write of this reconciler's made before is an earlier
    /// manifest's (an orphan declared again), not this one's.
    pub manifest_created: Option<jiff::Timestamp>,
    /// This process left the object on the server with `deletionPolicy: Orphan`.
    pub orphaned_here: bool,
    /// The server moved on from the revision this resource wrote (its listing or a change
    /// named another, or a write met another): a drift is likely.
    pub server_moved_on: bool,
}

impl DriftFacts<'_> {
    /// The organization and client id whose audit log is read beside the object, when a drift
    /// is likely and no other reconciler manages it: the check then waits for one round trip,
    /// not two, and reads the log for nothing only when the change was this reconciler's own
    /// write whose answer was lost.
    fn audit_beside_read(&self) -> Option<(&str, &str)> {
        if !self.server_moved_on
            || self.written_revision.is_none()
            || self.managed_elsewhere.is_some()
        {
            return None;
        }
        Some((self.organization?, self.client_id.unwrap_or_default()))
    }
}

/// An audit log read made beside the object's, and what it found.
struct AuditRead {
    request: v1::ListAuditEventsRequest,
    event: Option<v1::AuditEvent>,
}

/// What a look before creating found.
#[derive(Debug)]
pub enum Looked {
    /// The server holds nothing of that name: create it.
    Nothing,
    /// The read failed: its verdict.
    Failed(Box<Verdict>),
    /// What the server holds, and what [`check_drift`] makes of it.
    Found {
        held: Box<Held>,
        verdict: Box<Verdict>,
    },
}

/// Reads the object before the first write of a manifest that has recorded nothing: nothing
/// there is created, anything there is described as [`check_drift`] does (an earlier own write
/// adopted, another reconciler's said, anybody else's held for adoption).
pub async fn look_before_create<K: Managed, A: AdminApi>(
    resource: &K,
    admin: &A,
    facts: &DriftFacts<'_>,
) -> Result<Looked, ConvertError> {
    let held = match resource.get(admin).await? {
        Ok(held) => held,
        Err(error) => {
            return Ok(Looked::Failed(Box::new(after_drift_check_failure(
                &error,
                K::KIND.methods().get,
            ))));
        }
    };
    Ok(match held {
        None => Looked::Nothing,
        Some(held) => {
            let verdict = describe_held(resource, admin, facts, held.clone(), None).await;
            Looked::Found {
                held: Box::new(held),
                verdict: Box::new(verdict),
            }
        }
    })
}

/// Reads the object an observed manifest names: what the server holds, as it is, with no
/// judgement of drift or adoption.
pub async fn observe<K: Managed, A: AdminApi>(
    resource: &K,
    admin: &A,
) -> Result<Verdict, ConvertError> {
    Ok(match resource.get(admin).await? {
        Ok(held) => crate::reconcile::decide::observed(server_object(held.as_ref())),
        Err(error) => after_drift_check_failure(&error, K::KIND.methods().get),
    })
}

/// What the server holds, as `status.observed` records it; `None`: nothing of that name.
pub fn server_object(held: Option<&Held>) -> ServerObject {
    let Some(held) = held else {
        return ServerObject {
            absent: true,
            ..ServerObject::default()
        };
    };
    let named = |value: &str| Some(value.to_owned()).filter(|v| !v.is_empty());
    ServerObject {
        revision: held.revision.clone(),
        absent: false,
        client_id: named(&held.client_id),
        manager: named(&held.last_write.manager),
        actor: named(&held.last_write.actor),
        // Whole seconds, as the status keeps time: the message then says what the field says.
        written_at: held
            .last_write
            .time
            .and_then(|time| jiff::Timestamp::from_second(time.seconds).ok())
            .map(Time),
        differences: held.differs.iter().take(64).cloned().collect(),
        observed_at: None,
    }
}

/// Reads the object to confirm a suspected drift, and describes it: the revision the server
/// holds, when and by whom it changed (from the audit log), and which fields differ. A write of
/// this reconciler's own manager that the status does not record is adopted instead.
pub async fn check_drift<K: Managed, A: AdminApi>(
    resource: &K,
    admin: &A,
    facts: &DriftFacts<'_>,
) -> Result<Verdict, ConvertError> {
    let beside = facts
        .audit_beside_read()
        .map(|(organization, client_id)| resource.audit_request(organization, client_id));
    let (held, early) = match beside {
        Some(request) => {
            let (held, event) = tokio::join!(
                resource.get(admin),
                last_audit_event(admin, request.clone())
            );
            (held?, Some(AuditRead { request, event }))
        }
        None => (resource.get(admin).await?, None),
    };
    let held = match held {
        Ok(held) => held,
        Err(error) => return Ok(after_drift_check_failure(&error, K::KIND.methods().get)),
    };
    let Some(held) = held else {
        if let Some(elsewhere) = facts.managed_elsewhere {
            return Ok(elsewhere_gone(elsewhere));
        }
        let mut report = DriftReport {
            removed: true,
            backup_restore: facts.history_restarted,
            ..DriftReport::default()
        };
        if let Some(organization) = facts.organization
            && let Some(event) = audit_event(
                admin,
                early,
                resource.audit_request(organization, facts.client_id.unwrap_or_default()),
            )
            .await
        {
            report.changed_at = event.time.and_then(timestamp);
            report.manager = Some(event.manager);
            report.actor = Some(event.actor);
        }
        return Ok(drifted(&report, facts.written_revision));
    };
    Ok(describe_held(resource, admin, facts, held, early).await)
}

/// Reads the object a Delete-policy deletion with no revision recorded is about to let go of.
pub async fn look_before_release<K: Managed, A: AdminApi>(
    resource: &K,
    admin: &A,
    facts: &DriftFacts<'_>,
) -> Result<ReleaseLook, ConvertError> {
    Ok(match resource.get(admin).await? {
        Ok(None) => ReleaseLook::Nothing,
        Ok(Some(held)) => ReleaseLook::Held(Box::new(
            describe_held(resource, admin, facts, held, None).await,
        )),
        Err(error) => ReleaseLook::Failed(error),
    })
}

/// What the server holding `held` means for the resource: no drift, an own write adopted,
/// another reconciler's object, or a drift with who changed what.
async fn describe_held<K: Managed, A: AdminApi>(
    resource: &K,
    admin: &A,
    facts: &DriftFacts<'_>,
    held: Held,
    early: Option<AuditRead>,
) -> Verdict {
    if facts.written_revision == Some(held.revision.as_str()) {
        return no_drift(
            facts.generation_in_force.unwrap_or(facts.generation),
            &held.revision,
        );
    }
    let last_write = &held.last_write;
    let last = LastWrite {
        manager: &last_write.manager,
        actor: &last_write.actor,
        generation: last_write.generation,
    };
    let writer = writer(&last, facts.manager);
    // Another reconciler's write is theirs, unless the server went back in time (a restore
    // brings back whoever wrote then).
    if writer == Writer::OtherReconciler && !facts.history_restarted {
        let elsewhere =
            elsewhere_record(&last, &held.revision, last_write.time.and_then(timestamp));
        return managed_elsewhere(&elsewhere, facts.written_revision, facts.namespace_mapped);
    }
    // Somebody else's object, and nothing of this resource's was ever on the server: held until
    // a person adopts it, never written over.
    if writer == Writer::Other && facts.written_revision.is_none() && !facts.history_restarted {
        let namespace = resource.namespace().unwrap_or_default();
        let command = adopt_command(K::KIND.singular(), &resource.name_any(), &namespace);
        let mut verdict = adoption_required(server_object(Some(&held)), &command);
        verdict.fields.slug = Some(held.organization.clone()).filter(|s| !s.is_empty());
        return verdict;
    }
    // Our own older write back in force means the server went back in time (a restore).
    let own_write = writer == Writer::Own;
    let went_back = own_write
        && facts
            .generation_in_force
            .is_some_and(|g| held.generation_in_force < g);
    if own_write && !went_back && !facts.history_restarted {
        let from = adopted_from(
            facts.written_revision,
            last_write.time.and_then(timestamp),
            facts.manifest_created,
            facts.orphaned_here,
        );
        let mut verdict = adopted(
            &applied(&held, false),
            facts.generation,
            held.differs.is_empty(),
            from,
        );
        verdict.fields.slug = Some(held.organization.clone()).filter(|s| !s.is_empty());
        return verdict;
    }
    let mut report = DriftReport {
        server_revision: held.revision.clone(),
        removed: false,
        changed_at: last_write.time.and_then(timestamp),
        manager: Some(last_write.manager.clone()),
        actor: Some(last_write.actor.clone()).filter(|a| !a.is_empty()),
        fields: held.differs.clone(),
        backup_restore: facts.history_restarted || went_back,
    };
    if let Some(event) = audit_event(
        admin,
        early,
        resource.audit_request(&held.organization, &held.client_id),
    )
    .await
        && (event.revision == held.revision || event.revision.is_empty())
    {
        // The audit record of the change says who made it and when; the held write's own
        // facts can be older (a restore brings back an old write).
        report.actor = Some(event.actor).filter(|a| !a.is_empty()).or(report.actor);
        report.manager = Some(event.manager);
        if let Some(time) = event.time.and_then(timestamp) {
            report.changed_at = Some(time);
        }
        if is_restore_cause(&event.cause) {
            report.backup_restore = true;
        }
    }
    drifted(&report, facts.written_revision)
}

/// The cause the server's audit log gives a write that a restore from a backup made (the
/// AdminService documents it; the field is free text, so only this exact value counts: a
/// person's own words never make an edit a restore).
const RESTORE_CAUSE: &str = "restore from backup";

fn is_restore_cause(cause: &str) -> bool {
    cause.trim().eq_ignore_ascii_case(RESTORE_CAUSE)
}

/// The newest audit record `request` finds: the one read beside the object when it asked the
/// same, else read now.
async fn audit_event<A: AdminApi>(
    admin: &A,
    early: Option<AuditRead>,
    request: v1::ListAuditEventsRequest,
) -> Option<v1::AuditEvent> {
    match early {
        Some(read) if read.request == request => read.event,
        _ => last_audit_event(admin, request).await,
    }
}

/// The newest audit record the request finds, if the server keeps an audit log we may read.
async fn last_audit_event<A: AdminApi>(
    admin: &A,
    request: v1::ListAuditEventsRequest,
) -> Option<v1::AuditEvent> {
    let response = admin.list_audit_events(request).await.ok()?;
    response
        .events
        .into_iter()
        .find(|e| e.outcome != v1::AuditOutcome::Refused as i32)
}

fn timestamp(time: prost_types::Timestamp) -> Option<jiff::Timestamp> {
    jiff::Timestamp::new(time.seconds, time.nanos).ok()
}

#[cfg(test)]
mod tests;
