//! What every reconcile shares, and the machinery common to every kind: recording a verdict as
//! status, events and metrics, and turning it into the next requeue.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use nauthera_shared::catalog::{Phase, REFUSAL_RESEND_AFTER};
use nauthera_shared::resources::ResourceStatus;

use crate::kubernetes::caches::{DeliveredSecrets, SecretReferences};
use crate::kubernetes::events::EventQueue;
use crate::kubernetes::kube_io::{self, NamespacedResource};
use crate::kubernetes::leader::{Leadership, NotLeading};
use crate::process::memory::Memory;
use crate::process::metrics::Metrics;
use crate::process::work_queue::Action;
use crate::reconcile::decide::{Backoff, Update, Verdict, events_for, status_after};
use crate::reconcile::policies::Policies;
use crate::reconcile::prerequisites::Prerequisites;
use crate::server::changes::ServerRevisions;

/// Why a reconcile could not finish; retried with backoff by the error policy.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Convert(#[from] nauthera_client::convert::ConvertError),
    #[error("the resource has no metadata.{0}")]
    MissingMetadata(&'static str),
    #[error("the reconcile stopped unfinished: {0}")]
    Stopped(#[from] tokio::task::JoinError),
    /// Never reaches the error policy: the pipeline turns it into waiting for a change.
    #[error(transparent)]
    NotLeading(#[from] NotLeading),
}

/// Everything a reconcile needs.
pub struct Context<A> {
    pub client: kube::Client,
    pub admin: Arc<A>,
    pub manager: String,
    /// Whether the cluster's namespaces are mapped on the server (a cluster name or prefix).
    pub namespace_mapped: bool,
    pub events: EventQueue,
    pub metrics: Metrics,
    pub memory: Memory,
    pub revisions: Arc<ServerRevisions>,
    /// The delivered Secrets, from the watches that trigger on them.
    pub delivered: DeliveredSecrets,
    /// The Secrets manifests reference, and the versions the watches saw.
    pub references: Arc<SecretReferences>,
    /// The order between manifests.
    pub prerequisites: Arc<Prerequisites>,
    /// The ClientPolicies and what they hold back.
    pub policies: Arc<Policies>,
    pub leadership: Leadership,
    pub backoff: Backoff,
    pub clock: fn() -> Timestamp,
    pub jitter: fn() -> f64,
    /// The shortest `spec.secret.rotation.every` honoured (`--min-rotation-interval`).
    pub min_rotation_interval: Duration,
}

/// The system clock.
pub fn system_clock() -> Timestamp {
    Timestamp::now()
}

/// Random jitter in `[0, 1)`.
pub fn random_jitter() -> f64 {
    rand::random::<f64>()
}

impl<A> Context<A> {
    /// Records a verdict: the status (only when it changes), the events of the transition, the
    /// metrics; and returns when to look again. Records nothing unless the write gate lets it.
    pub async fn record<K>(
        &self,
        kind: nauthera_shared::kinds::Kind,
        api: &Api<K>,
        resource: &K,
        status: Option<&ResourceStatus>,
        verdict: &Verdict,
        write_status: bool,
    ) -> Result<Action, ReconcileError>
    where
        K: NamespacedResource,
    {
        // What the server answered and what manifests hold reach the message: escaped here,
        // once, for the status, the events and the log.
        let verdict = &*verdict.printable();
        let now = (self.clock)();
        let uid = resource.uid().unwrap_or_default();
        let generation = resource.meta().generation.unwrap_or(0);
        self.leadership.gate()?;
        let mut written_status = None;
        if write_status && let Some(mut new_status) = status_after(status, verdict, generation, now)
        {
            new_status.manager = Some(self.manager.clone());
            // A status naming another reconciler's object goes only over the status it was
            // decided on: that reconciler (an overlapping shard taking the resource over) may
            // have recorded its claim since, and the claim must stand.
            let if_version = new_status
                .managed_elsewhere
                .as_ref()
                .and(resource.meta().resource_version.as_deref());
            match self
                .write_status(api, resource, &uid, &new_status, if_version)
                .await
            {
                Err(kube::Error::Api(answer)) if if_version.is_some() && answer.code == 409 => {
                    tracing::debug!(kind = kind.as_str(), name = %resource.name_any(), "the status changed since it was read; deciding again");
                    return Ok(Action::requeue(Duration::ZERO));
                }
                written => written?,
            }
            written_status = Some(new_status);
        }
        // Queued, never awaited as written: an event must not hold up the reconcile.
        for event in events_for(status, verdict) {
            self.events
                .send(resource.object_ref(&()), event.reason, &event.note, now)
                .await;
        }
        self.metrics
            .reconciled(kind.as_str(), verdict.reason, verdict.cause);
        let phase = verdict.reason.phase(verdict.retried);
        if verdict.reason.is_deletion_outcome() {
            self.metrics.resource_gone(&uid);
        } else {
            self.metrics
                .resource_state(kind, &uid, phase, verdict.reason);
            // The status in force now: the one just written, else the one decided on.
            if let Some(current) = written_status.as_ref().or(status) {
                self.metrics.secret_from_status(kind, &uid, current);
            }
        }
        log_verdict(kind.as_str(), resource, verdict);
        if verdict.retried || verdict.keep_trying {
            let delay = self
                .memory
                .failed(&uid, generation, now, &self.backoff, (self.jitter)());
            return Ok(Action::requeue(delay));
        }
        self.memory.succeeded(&uid);
        if phase == Phase::Error && verdict.record_attempt {
            return Ok(Action::requeue(REFUSAL_RESEND_AFTER));
        }
        // A scheduled rotation is looked at when it falls (within a day): no watch event
        // comes then.
        if let Update::Set(next) = verdict.fields.next_rotation {
            let left = Duration::try_from(now.duration_until(next)).unwrap_or_default();
            return Ok(Action::requeue(
                left.clamp(Duration::from_secs(1), Duration::from_secs(86_400)),
            ));
        }
        Ok(Action::await_change())
    }

    /// Writes a status and remembers it as this reconciler's: when the watch shows it, it is
    /// known for the reconciler's own write, never for somebody else's change.
    pub async fn write_status<K: NamespacedResource>(
        &self,
        api: &Api<K>,
        resource: &K,
        uid: &str,
        status: &ResourceStatus,
        if_version: Option<&str>,
    ) -> Result<(), kube::Error> {
        let written =
            kube_io::write_status(api, &resource.name_any(), status, &self.manager, if_version)
                .await?;
        self.memory.remember_status(uid, &written);
        Ok(())
    }

    /// Requeue after a reconcile error, with the resource's backoff.
    pub fn requeue_after_error(&self, uid: &str, generation: i64) -> Duration {
        self.memory.failed(
            uid,
            generation,
            (self.clock)(),
            &self.backoff,
            (self.jitter)(),
        )
    }
}

fn log_verdict<K: Resource>(kind: &'static str, resource: &K, verdict: &Verdict) {
    let namespace = resource.meta().namespace.as_deref().unwrap_or_default();
    let name = resource.meta().name.as_deref().unwrap_or_default();
    tracing::info!(
        kind,
        namespace,
        name,
        reason = verdict.reason.as_str(),
        cause = verdict.cause.as_str(),
        detail = %verdict.message,
        "reconciled"
    );
}
