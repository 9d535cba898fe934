//! Prometheus metrics under the `nauthera_operator_` prefix. Every label takes its value from a
//! closed set (kinds, catalog reasons and causes, gRPC codes, method names), never from a
//! resource's name or an error's text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nauthera_shared::catalog::{Cause, Phase, Reason};
use nauthera_shared::kinds::Kind;
use nauthera_shared::resources::ResourceStatus;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod secret_ages;

use secret_ages::SecretAges;

use crate::kubernetes::uid_key::UidKey;

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
    /// What each resource (by uid) counts under in `resources`.
    counted: Arc<Mutex<HashMap<UidKey, Counted>>>,
    /// How old each resource's client secret in force is.
    secret_ages: SecretAges,
}

/// The labels a resource counts under in `resources`, in three bytes rather than the labels'
/// three texts: every resource has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counted {
    kind: Kind,
    phase: Phase,
    reason: Reason,
}

impl Counted {
    fn labels(self) -> ResourceLabels {
        ResourceLabels {
            kind: self.kind.as_str(),
            phase: self.phase.as_str(),
            reason: self.reason.entry().metric_label,
        }
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
    pub fn resource_state(&self, kind: Kind, uid: &str, phase: Phase, reason: Reason) {
        let now = Counted {
            kind,
            phase,
            reason,
        };
        let Ok(mut counted) = self.counted.lock() else {
            return;
        };
        match counted.insert(UidKey::of(uid), now) {
            Some(previous) if previous == now => {}
            Some(previous) => {
                self.resources.get_or_create(&previous.labels()).dec();
                self.resources.get_or_create(&now.labels()).inc();
            }
            None => {
                self.resources.get_or_create(&now.labels()).inc();
            }
        }
    }

    /// Counts a resource under the phase and reason its status shows (a resource found in the
    /// cache, with nothing to do).
    pub fn resource_from_status(&self, kind: Kind, uid: &str, status: &ResourceStatus) {
        if let (Some(phase), Some(reason)) = (status.phase, status.reason) {
            self.resource_state(kind, uid, phase, reason);
        }
        self.secret_from_status(kind, uid, status);
    }

    /// Keeps when the resource's client secret in force was set and is rotated next.
    pub fn secret_from_status(&self, kind: Kind, uid: &str, status: &ResourceStatus) {
        self.secret_ages.follow(kind, uid, status);
    }

    /// Stops counting a resource that is gone.
    pub fn resource_gone(&self, uid: &str) {
        self.secret_ages.forget(uid);
        let Ok(mut counted) = self.counted.lock() else {
            return;
        };
        if let Some(previous) = counted.remove(&UidKey::of(uid)) {
            self.resources.get_or_create(&previous.labels()).dec();
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
        metrics.resource_state(Kind::OidcClient, "u1", Phase::Pending, Reason::Pending);
        metrics.resource_state(
            Kind::OidcClient,
            "u1",
            Phase::Registered,
            Reason::Registered,
        );
        metrics.resource_state(
            Kind::OidcClient,
            "u2",
            Phase::Registered,
            Reason::Registered,
        );
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
