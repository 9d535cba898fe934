//! How old the client secrets in force are, per kind: the oldest one's age, and how many a
//! schedule (`spec.secret.rotation`) should have rotated already. Each resource's two times
//! are kept by uid; the two gauges are worked out when the metrics are read, so that an age
//! grows between reconciles. The only label is the kind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use nauthera_shared::kinds::Kind;
use nauthera_shared::resources::ResourceStatus;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::KindLabels;
use crate::kubernetes::uid_key::UidKey;

/// A rotation this long past `status.nextRotation` counts as overdue: a due rotation is
/// carried out within seconds, so only one that cannot be (the server refuses, the Secret
/// cannot be written, the reconciler is away) stays past it.
const OVERDUE_AFTER_SECONDS: i64 = 15 * 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SecretTimes {
    kind: Kind,
    /// `status.secretSetTime`, in seconds.
    set_at: i64,
    /// `status.nextRotation`, in seconds.
    next_rotation: Option<i64>,
}

#[derive(Clone, Default)]
pub(super) struct SecretAges {
    times: Arc<Mutex<HashMap<UidKey, SecretTimes>>>,
    oldest: Family<KindLabels, Gauge>,
    overdue: Family<KindLabels, Gauge>,
}

impl SecretAges {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "secret_oldest_age_seconds",
            "The age of the oldest client secret in force (status.secretSetTime), by kind",
            self.oldest.clone(),
        );
        registry.register(
            "secrets_rotation_overdue",
            "Client secrets whose scheduled rotation (status.nextRotation) is more than 15 \
             minutes past, by kind",
            self.overdue.clone(),
        );
    }

    /// Keeps what the status says of a resource's secret.
    pub(super) fn follow(&self, kind: Kind, uid: &str, status: &ResourceStatus) {
        let Ok(mut times) = self.times.lock() else {
            return;
        };
        match &status.secret_set_time {
            Some(set_at) => {
                times.insert(
                    UidKey::of(uid),
                    SecretTimes {
                        kind,
                        set_at: set_at.0.as_second(),
                        next_rotation: status.next_rotation.as_ref().map(|t| t.0.as_second()),
                    },
                );
            }
            None => {
                times.remove(&UidKey::of(uid));
            }
        }
    }

    pub(super) fn forget(&self, uid: &str) {
        if let Ok(mut times) = self.times.lock() {
            times.remove(&UidKey::of(uid));
        }
    }

    /// Works the gauges out as of `now`; a kind with no secret left reads zero.
    pub(super) fn refresh(&self, now: Timestamp) {
        let now = now.as_second();
        let Ok(times) = self.times.lock() else {
            return;
        };
        let mut oldest: HashMap<Kind, i64> = HashMap::new();
        let mut overdue: HashMap<Kind, i64> = HashMap::new();
        for times in times.values() {
            let age = (now - times.set_at).max(0);
            let entry = oldest.entry(times.kind).or_default();
            *entry = (*entry).max(age);
            let late = times
                .next_rotation
                .is_some_and(|next| now - next > OVERDUE_AFTER_SECONDS);
            *overdue.entry(times.kind).or_default() += i64::from(late);
        }
        for (family, values) in [(&self.oldest, &oldest), (&self.overdue, &overdue)] {
            family.clear();
            for (kind, value) in values {
                family
                    .get_or_create(&KindLabels {
                        kind: kind.as_str(),
                    })
                    .set(*value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn status(set_at: i64, next: Option<i64>) -> ResourceStatus {
        ResourceStatus {
            secret_set_time: Some(Time(at(set_at))),
            next_rotation: next.map(|n| Time(at(n))),
            ..ResourceStatus::default()
        }
    }

    #[test]
    fn the_oldest_age_and_the_overdue_count_are_per_kind() {
        let ages = SecretAges::default();
        ages.follow(Kind::OidcClient, "u1", &status(0, Some(1_000)));
        ages.follow(Kind::OidcClient, "u2", &status(500, Some(10_000)));
        ages.follow(Kind::IdentityProvider, "u3", &status(900, None));
        ages.refresh(at(1_000 + OVERDUE_AFTER_SECONDS + 1));
        let oldest = |kind| ages.oldest.get_or_create(&KindLabels { kind }).get();
        let overdue = |kind| ages.overdue.get_or_create(&KindLabels { kind }).get();
        assert_eq!(oldest("OIDCClient"), 1_000 + OVERDUE_AFTER_SECONDS + 1);
        assert_eq!(overdue("OIDCClient"), 1);
        assert_eq!(overdue("IdentityProvider"), 0);
        // Rotated: younger, and no longer overdue.
        ages.follow(Kind::OidcClient, "u1", &status(2_000, Some(90_000)));
        ages.forget("u3");
        ages.refresh(at(2_000));
        assert_eq!(oldest("OIDCClient"), 1_500);
        assert_eq!(overdue("OIDCClient"), 0);
    }
}
