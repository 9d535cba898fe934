//! Leader election on a Lease. The leader renews every retry period and stops writing when it has
//! not renewed within the renew deadline, which is shorter than the lease: so it has stopped
//! before another replica may take the Lease, even when it lost only the Kubernetes API and still
//! reaches the server. Every write passes one gate ([`Leadership::gate`]), which checks the term's
//! end itself, so a renewal that hangs cannot stretch it.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// How long a Lease holds, when its holder stops writing, and how often it is tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long a Lease is held without renewal before another replica may take it.
    pub duration: Duration,
    /// How long the leader keeps writing without a renewal; shorter than `duration`.
    pub renew_deadline: Duration,
    /// How often the Lease is renewed, or tried by a replica that does not lead.
    pub retry_period: Duration,
}

impl Default for LeaseTiming {
    fn default() -> LeaseTiming {
        LeaseTiming {
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Which Lease, held as whom.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    pub identity: String,
    pub timing: LeaseTiming,
}

/// Where this replica stands, for `/readyz` and the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The Lease has not been read yet.
    Starting,
    /// This replica holds the Lease and may write until the instant.
    Leading { until: Instant },
    /// Another replica holds the Lease.
    Following { holder: String },
    /// The Lease could not be read or written; `stepped_down` when this replica led until then.
    Unsure { error: String, stepped_down: bool },
}

impl Standing {
    /// Whether this replica may write now.
    pub fn leads(&self) -> bool {
        matches!(self, Standing::Leading { until } if Instant::now() < *until)
    }

    /// Whether the replica knows where it stands (it reads the Lease).
    pub fn ready(&self) -> bool {
        !matches!(self, Standing::Unsure { .. })
    }

    /// The `/readyz` line.
    pub fn readiness_text(&self, settings: &LeaseSettings) -> String {
        let lease = format!("Lease {}/{}", settings.namespace, settings.name);
        match self {
            Standing::Starting => format!("leader election: {lease} not read yet\n"),
            Standing::Leading { .. } => format!("leader election: leading ({lease})\n"),
            Standing::Following { holder } => {
                format!("leader election: following {holder} ({lease})\n")
            }
            Standing::Unsure {
                error,
                stepped_down: true,
            } => format!(
                "leader election: stepped down: {lease} was not renewed within the renew deadline \
                 ({}s): {error}; nothing is written until the lease is won again\n",
                settings.timing.renew_deadline.as_secs()
            ),
            Standing::Unsure { error, .. } => {
                format!("leader election: cannot read {lease}: {error}\n")
            }
        }
    }
}

/// Whether this replica may write. Cheap to clone; every write passes its gate.
#[derive(Clone, Debug)]
pub struct Leadership(watch::Receiver<Standing>);

/// A write was not made: this replica does not lead, or its term ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("this replica does not lead")]
pub struct NotLeading;

impl Leadership {
    pub fn new(receiver: watch::Receiver<Standing>) -> Leadership {
        Leadership(receiver)
    }

    /// The write gate: the one place that asks whether this replica leads. Passed before each
    /// write rather than once, since a term can end while a reconcile runs.
    pub fn gate(&self) -> Result<(), NotLeading> {
        if self.0.borrow().leads() {
            Ok(())
        } else {
            Err(NotLeading)
        }
    }
}

/// The end of a term that never ends (leader election off).
pub fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

/// What to write to the Lease, from what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This replica holds it: renew.
    Renew,
    /// Nobody holds it, or its holder let it run out: take it.
    Take,
    /// Another replica holds it.
    Wait { holder: String },
}

/// The claim on a Lease as of `now`.
pub fn claim(spec: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Claim {
    let Some(spec) = spec else {
        return Claim::Take;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() {
        return Claim::Take;
    }
    if holder == identity {
        return Claim::Renew;
    }
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0);
    let seconds = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    let expired = renewed
        .and_then(|at| {
            at.checked_add(jiff::SignedDuration::from_secs(seconds))
                .ok()
        })
        .is_none_or(|expiry| expiry <= now);
    if expired {
        Claim::Take
    } else {
        Claim::Wait {
            holder: holder.to_owned(),
        }
    }
}

/// The Lease's spec after a claim.
fn claimed_spec(
    old: Option<&LeaseSpec>,
    claim: &Claim,
    settings: &LeaseSettings,
    now: Timestamp,
) -> LeaseSpec {
    let old = old.cloned().unwrap_or_default();
    let duration = i32::try_from(settings.timing.duration.as_secs()).unwrap_or(i32::MAX);
    match claim {
        Claim::Renew => LeaseSpec {
            lease_duration_seconds: Some(duration),
            renew_time: Some(MicroTime(now)),
            acquire_time: old.acquire_time.clone().or(Some(MicroTime(now))),
            ..old
        },
        _ => LeaseSpec {
            holder_identity: Some(settings.identity.clone()),
            lease_duration_seconds: Some(duration),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(
                old.lease_transitions.unwrap_or(0) + i32::from(old.holder_identity.is_some()),
            ),
            ..old
        },
    }
}

/// One try: read the Lease and renew or take it when this replica may. Writes are conditional
/// on the version read, so two replicas never both take it.
async fn try_lead(api: &Api<Lease>, settings: &LeaseSettings) -> Result<Claim, kube::Error> {
    let now = Timestamp::now();
    match api.get_opt(&settings.name).await? {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(settings.name.clone()),
                    namespace: Some(settings.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(claimed_spec(None, &Claim::Take, settings, now)),
            };
            api.create(&PostParams::default(), &lease).await?;
            Ok(Claim::Take)
        }
        Some(mut lease) => {
            let claim = claim(lease.spec.as_ref(), &settings.identity, now);
            if matches!(claim, Claim::Wait { .. }) {
                return Ok(claim);
            }
            lease.spec = Some(claimed_spec(lease.spec.as_ref(), &claim, settings, now));
            lease.metadata.managed_fields = None;
            api.replace(&settings.name, &PostParams::default(), &lease)
                .await?;
            Ok(claim)
        }
    }
}

/// Takes part in the election until the process stops: publishes where this replica stands.
pub async fn elect(api: Api<Lease>, settings: LeaseSettings, standing: watch::Sender<Standing>) {
    let timing = settings.timing;
    loop {
        let started = Instant::now();
        let current = standing.borrow().clone();
        // A leader's try may take until its term ends; any other's, one retry period.
        let budget = match &current {
            Standing::Leading { until } if *until > started => {
                (*until - started).max(timing.retry_period)
            }
            _ => timing.retry_period,
        };
        let outcome = match tokio::time::timeout(budget, try_lead(&api, &settings)).await {
            Ok(Ok(claim)) => Ok(claim),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!("no answer within {}s", budget.as_secs_f32())),
        };
        let next = match outcome {
            Ok(Claim::Wait { holder }) => Standing::Following { holder },
            // The term counts from when the renewal was sent, never from its answer.
            Ok(_) => Standing::Leading {
                until: started + timing.renew_deadline,
            },
            Err(error) => match current {
                Standing::Leading { until } if Instant::now() < until => current.clone(),
                Standing::Leading { .. } => Standing::Unsure {
                    error,
                    stepped_down: true,
                },
                Standing::Unsure { stepped_down, .. } => Standing::Unsure {
                    error,
                    stepped_down,
                },
                _ => Standing::Unsure {
                    error,
                    stepped_down: false,
                },
            },
        };
        log_change(&current, &next, &settings);
        standing.send_if_modified(|old| {
            let changed = *old != next;
            *old = next;
            changed
        });
        tokio::time::sleep_until(started + timing.retry_period).await;
    }
}

fn log_change(old: &Standing, new: &Standing, settings: &LeaseSettings) {
    let lease = format!("{}/{}", settings.namespace, settings.name);
    match (old, new) {
        (Standing::Leading { .. }, Standing::Leading { .. }) => {}
        (_, Standing::Leading { .. }) => {
            tracing::info!(identity = %settings.identity, lease = %lease, "won the lease");
        }
        (
            _,
            Standing::Unsure {
                error,
                stepped_down: true,
            },
        ) if !matches!(
            old,
            Standing::Unsure {
                stepped_down: true,
                ..
            }
        ) =>
        {
            tracing::warn!(
                identity = %settings.identity,
                lease = %lease,
                renew_deadline_seconds = settings.timing.renew_deadline.as_secs(),
                error = %error,
                "stepped down: the lease was not renewed within the renew deadline; no writes until it is won again"
            );
        }
        (Standing::Following { holder: a }, Standing::Following { holder: b }) if a == b => {}
        (_, Standing::Following { holder }) => {
            tracing::info!(identity = %settings.identity, lease = %lease, holder = %holder, "another replica leads");
        }
        (Standing::Unsure { .. }, Standing::Unsure { .. }) => {}
        (_, Standing::Unsure { error, .. }) => {
            tracing::warn!(identity = %settings.identity, lease = %lease, error = %error, "cannot read the lease");
        }
        _ => {}
    }
}

/// Lets the Lease go at shutdown, so another replica takes over within a retry period.
pub async fn release(api: &Api<Lease>, settings: &LeaseSettings) {
    let result = tokio::time::timeout(settings.timing.retry_period, async {
        let Some(mut lease) = api.get_opt(&settings.name).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(settings.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        lease.metadata.managed_fields = None;
        api.replace(&settings.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    })
    .await;
    match result {
        Ok(Ok(())) => tracing::info!(identity = %settings.identity, "released the lease"),
        Ok(Err(error)) => tracing::warn!(error = %error, "releasing the lease failed"),
        Err(_) => tracing::warn!("releasing the lease took too long"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn held_by(holder: &str, renewed: i64, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(at(renewed))),
            lease_duration_seconds: Some(seconds),
            ..LeaseSpec::default()
        }
    }

    fn settings() -> LeaseSettings {
        LeaseSettings {
            name: "nauthera-reconciler".into(),
            namespace: "nauthera-system".into(),
            identity: "a".into(),
            timing: LeaseTiming::default(),
        }
    }

    #[test]
    fn a_lease_is_taken_only_when_free_or_run_out() {
        assert_eq!(claim(None, "a", at(100)), Claim::Take);
        let released = LeaseSpec {
            holder_identity: None,
            ..held_by("", 100, 1)
        };
        assert_eq!(claim(Some(&released), "a", at(100)), Claim::Take);
        assert_eq!(
            claim(Some(&held_by("a", 10, 15)), "a", at(100)),
            Claim::Renew
        );
        assert_eq!(
            claim(Some(&held_by("b", 90, 15)), "a", at(104)),
            Claim::Wait { holder: "b".into() }
        );
        assert_eq!(
            claim(Some(&held_by("b", 90, 15)), "a", at(105)),
            Claim::Take
        );
        let never_renewed = LeaseSpec {
            holder_identity: Some("b".into()),
            ..LeaseSpec::default()
        };
        assert_eq!(claim(Some(&never_renewed), "a", at(100)), Claim::Take);
    }

    #[test]
    fn taking_counts_a_transition_and_renewing_keeps_the_acquire_time() {
        let old = LeaseSpec {
            acquire_time: Some(MicroTime(at(50))),
            lease_transitions: Some(3),
            ..held_by("b", 90, 15)
        };
        let taken = claimed_spec(Some(&old), &Claim::Take, &settings(), at(120));
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(4));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(120))));
        assert_eq!(taken.lease_duration_seconds, Some(15));
        let mine = LeaseSpec {
            holder_identity: Some("a".into()),
            ..taken
        };
        let renewed = claimed_spec(Some(&mine), &Claim::Renew, &settings(), at(122));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(120))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(122))));
        assert_eq!(renewed.lease_transitions, Some(4));
        let first = claimed_spec(None, &Claim::Take, &settings(), at(1));
        assert_eq!(first.lease_transitions, Some(0));
    }

    #[test]
    fn a_term_ends_on_its_own_without_a_renewal() {
        let now = Instant::now();
        let (sender, receiver) = watch::channel(Standing::Leading {
            until: now + Duration::from_secs(3600),
        });
        let leadership = Leadership::new(receiver);
        assert_eq!(leadership.gate(), Ok(()));
        // The same term, past its end: no write, though no message said so.
        sender.send_replace(Standing::Leading { until: now });
        assert_eq!(
            leadership.gate(),
            Err(NotLeading),
            "no write after the renew deadline"
        );
        sender.send_replace(Standing::Following { holder: "b".into() });
        assert_eq!(leadership.gate(), Err(NotLeading));
    }

    #[test]
    fn readiness_says_why_a_leader_stepped_down() {
        let standing = Standing::Unsure {
            error: "no answer within 2s".into(),
            stepped_down: true,
        };
        assert!(!standing.ready());
        let text = standing.readiness_text(&settings());
        assert!(text.contains("stepped down"), "{text}");
        assert!(
            text.contains("nauthera-system/nauthera-reconciler"),
            "{text}"
        );
        assert!(text.contains("10s"), "{text}");
        assert!(Standing::Following { holder: "b".into() }.ready());
    }
}
