//! Prometheus metrics under the `nauthera_operator_` prefix. Every label takes its value from a
//! closed set (kinds, catalog reasons and causes, gRPC codes, method names), never from a
//! resource's name or an error's text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nauthera_shared::catalog::{Cause, Phase, Reason};
use nauthera_shared::resources::ResourceStatus;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use sha2::{Digest, Sha256};

mod secret_ages;

use secret_ages::SecretAges;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    kind: &'static str,
    reason: &'static str,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    method: &'static str,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    kind: &'static str,
    phase: &'static str,
    reason: &'static str,
}

/// The other shard's name: one series per shard publishing in the reconciler's namespace.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShardLabels {
    shard: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

/// The reconciler's metrics. Cheap to clone; clones share the series.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciles: Family<ReconcileLabels, Counter>,
    server_calls: Family<CallLabels, Counter>,
    reconcile_duration: Family<KindLabels, Histogram>,
    resources: Family<ResourceLabels, Gauge>,
    control_plane_up: Gauge,
    shard_overlaps: Family<ShardLabels, Gauge>,
    /// The labels each resource (by uid) counts under in `resources`.
    counted: Arc<Mutex<HashMap<UidKey, ResourceLabels>>>,
    /// How old each resource's client secret in force is.
    secret_ages: SecretAges,
}

/// A resource's uid in 16 bytes: a uid is a UUID, whose digits are its value; anything else is
/// known by a digest. Every resource has an entry, so the key's size counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct UidKey(u128);

impl UidKey {
    fn of(uid: &str) -> UidKey {
        let digits = uid.chars().filter(|c| *c != '-');
        let value = digits
            .take(33)
            .try_fold((0u128, 0u32), |(value, count), c| {
                Some(((value << 4) | u128::from(c.to_digit(16)?), count + 1))
            });
        if let Some((value, 32)) = value {
            return UidKey(value);
        }
        let digest = Sha256::digest(uid.as_bytes());
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        UidKey(u128::from_le_bytes(bytes))
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("nauthera_operator");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles that reached a verdict, by kind, reason and cause",
            reconciles.clone(),
        );
        let server_calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "server_calls",
            "Calls to the AdminService by method and gRPC code",
            server_calls.clone(),
        );
        let reconcile_duration = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        });
        registry.register(
            "reconcile_duration_seconds",
            "How long one reconcile took, by kind",
            reconcile_duration.clone(),
        );
        let resources = Family::<ResourceLabels, Gauge>::default();
        registry.register(
            "resources",
            "Resources by kind, phase and reason",
            resources.clone(),
        );
        let control_plane_up = Gauge::default();
        registry.register(
            "control_plane_up",
            "1 when the last control-plane probe reached the server and it answered",
            control_plane_up.clone(),
        );
        let shard_overlaps = Family::<ShardLabels, Gauge>::default();
        registry.register(
            "shard_overlaps",
            "Namespaces both this reconciler and another shard reconcile (for a kind both \
             reconcile), by the other shard's name; no series while they do not overlap",
            shard_overlaps.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("build_info", "The reconciler's build", build_info);
        let secret_ages = SecretAges::default();
        secret_ages.register(&mut registry);
        Metrics {
            registry: Arc::new(registry),
            reconciles,
            server_calls,
            reconcile_duration,
            resources,
            control_plane_up,
            shard_overlaps,
            counted: Arc::default(),
            secret_ages,
        }
    }

    /// Counts a reconcile that reached a verdict.
    pub fn reconciled(&self, kind: &'static str, reason: Reason, cause: Cause) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                kind,
                reason: reason.entry().metric_label,
                cause: cause.as_str(),
            })
            .inc();
    }

    /// Counts a server call; `code` is a gRPC code's CamelCase name.
    pub fn server_call(&self, method: &'static str, code: &'static str) {
        self.server_calls
            .get_or_create(&CallLabels { method, code })
            .inc();
    }

    /// Starts timing a reconcile; the time is recorded when the guard is dropped.
    pub fn reconcile_timer(&self, kind: &'static str) -> ReconcileTimer {
        ReconcileTimer {
            histogram: self
                .reconcile_duration
                .get_or_create(&KindLabels { kind })
                .clone(),
            start: Instant::now(),
        }
    }

    /// Counts a resource under its current phase and reason (moving it from the previous ones).
    pub fn resource_state(&self, kind: &'static str, uid: &str, phase: Phase, reason: Reason) {
        let labels = ResourceLabels {
            kind,
            phase: phase.as_str(),
            reason: reason.entry().metric_label,
        };
        let Ok(mut counted) = self.counted.lock() else {
            return;
        };
        match counted.insert(UidKey::of(uid), labels.clone()) {
            Some(previous) if previous == labels => {}
            Some(previous) => {
                self.resources.get_or_create(&previous).dec();
                self.resources.get_or_create(&labels).inc();
            }
            None => {
                self.resources.get_or_create(&labels).inc();
            }
        }
    }

    /// Counts a resource under the phase and reason its status shows (a resource found in the
    /// cache, with nothing to do).
    pub fn resource_from_status(&self, kind: &'static str, uid: &str, status: &ResourceStatus) {
        if let (Some(phase), Some(reason)) = (status.phase, status.reason) {
            self.resource_state(kind, uid, phase, reason);
        }
        self.secret_from_status(kind, uid, status);
    }

    /// Keeps when the resource's client secret in force was set and is rotated next.
    pub fn secret_from_status(&self, kind: &'static str, uid: &str, status: &ResourceStatus) {
        self.secret_ages.follow(kind, uid, status);
    }

    /// Stops counting a resource that is gone.
    pub fn resource_gone(&self, uid: &str) {
        self.secret_ages.forget(uid);
        let Ok(mut counted) = self.counted.lock() else {
            return;
        };
        if let Some(previous) = counted.remove(&UidKey::of(uid)) {
            self.resources.get_or_create(&previous).dec();
        }
    }

    pub fn set_control_plane_up(&self, up: bool) {
        self.control_plane_up.set(i64::from(up));
    }

    /// How many namespaces another shard also reconciles.
    pub fn shard_overlap(&self, shard: &str, namespaces: i64) {
        self.shard_overlaps
            .get_or_create(&ShardLabels {
                shard: shard.to_owned(),
            })
            .set(namespaces);
    }

    /// Another shard no longer overlaps: its series goes.
    pub fn shard_overlap_gone(&self, shard: &str) {
        self.shard_overlaps.remove(&ShardLabels {
            shard: shard.to_owned(),
        });
    }

    /// Forgets every overlap (a new term reports them afresh).
    pub fn shard_overlaps_reset(&self) {
        self.shard_overlaps.clear();
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        self.secret_ages.refresh(jiff::Timestamp::now());
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

/// Records a reconcile's duration when dropped, whichever way the reconcile ends.
pub struct ReconcileTimer {
    histogram: Histogram,
    start: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_is_keyed_by_its_digits_or_else_by_a_digest() {
        let uid = "0b6c1f4e-3a7d-4c2e-9f1a-5d8e7b6a4c3d";
        assert_eq!(
            UidKey::of(uid),
            UidKey(0x0b6c1f4e_3a7d_4c2e_9f1a_5d8e7b6a4c3d)
        );
        assert_ne!(
            UidKey::of(uid),
            UidKey::of("0b6c1f4e-3a7d-4c2e-9f1a-5d8e7b6a4c3e")
        );
        // Not a UUID: a short one, a longer one, other characters.
        let others = [
            "web",
            "0b6c1f4e3a7d4c2e9f1a5d8e7b6a4c3d0",
            "not-a-uuid-at-all-but-long-enough!",
        ];
        for other in others {
            assert_eq!(UidKey::of(other), UidKey::of(other));
            assert_ne!(UidKey::of(other), UidKey::of(uid));
        }
        assert_ne!(UidKey::of(others[0]), UidKey::of(others[1]));
    }

    #[test]
    fn series_use_the_documented_names_and_bounded_labels() {
        let metrics = Metrics::new();
        metrics.reconciled("OIDCClient", Reason::Refused, Cause::OutsideGrant);
        metrics.server_call("ApplyClient", "PermissionDenied");
        metrics.set_control_plane_up(true);
        metrics.shard_overlap("team-b", 3);
        metrics.shard_overlap("team-c", 1);
        metrics.shard_overlap_gone("team-c");
        drop(metrics.reconcile_timer("OIDCClient"));
        let text = metrics.encode();
        for line in [
            r#"nauthera_operator_reconciles_total{kind="OIDCClient",reason="refused",cause="outside_grant"} 1"#,
            r#"nauthera_operator_server_calls_total{method="ApplyClient",code="PermissionDenied"} 1"#,
            "nauthera_operator_control_plane_up 1",
            r#"nauthera_operator_build_info{version=""#,
            r#"nauthera_operator_reconcile_duration_seconds_count{kind="OIDCClient"} 1"#,
            r#"nauthera_operator_shard_overlaps{shard="team-b"} 3"#,
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
        assert!(!text.contains(r#"shard="team-c""#), "{text}");
    }

    #[test]
    fn a_resource_counts_once_under_its_current_state() {
        let metrics = Metrics::new();
        metrics.resource_state("OIDCClient", "u1", Phase::Pending, Reason::Pending);
        metrics.resource_state("OIDCClient", "u1", Phase::Registered, Reason::Registered);
        metrics.resource_state("OIDCClient", "u2", Phase::Registered, Reason::Registered);
        let text = metrics.encode();
        assert!(text.contains(
            r#"nauthera_operator_resources{kind="OIDCClient",phase="Registered",reason="registered"} 2"#
        ));
        assert!(text.contains(
            r#"nauthera_operator_resources{kind="OIDCClient",phase="Pending",reason="pending"} 0"#
        ));
        metrics.resource_gone("u1");
        assert!(metrics.encode().contains(
            r#"nauthera_operator_resources{kind="OIDCClient",phase="Registered",reason="registered"} 1"#
        ));
    }
}
