//! The control-plane state the reconciler's leader publishes for the kubectl plugin.
//!
//! The leader writes it as JSON under [`STATE_KEY`] of the ConfigMap [`STATE_CONFIGMAP`] in its own
//! namespace, so the plugin can show the server build, the identity and grants the server reported,
//! the probe's outcome and the certificate's expiry without holding server credentials itself.
//!
//! The document changes only when something a reader sees changes (the probe's outcome, the server's
//! facts, the certificate, the leader), so a steady state writes nothing: its times say since when
//! things hold, not when they were last looked at. How fresh it is comes from the leader Lease
//! it names ([`ControlPlaneState::lease_name`]), which the leader renews every few seconds: while
//! the state's leader holds that Lease and renews it, the state holds as of the last renewal.
//!
//! A reconciler limited to a shard of the cluster ([`Scope`]) publishes into a ConfigMap of its
//! own ([`state_configmap_name`]) with the same label, and names there the other shards whose
//! scopes overlap its own ([`ShardOverlap`]).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::catalog::Reason;
use crate::grants::GrantEntry;
use crate::kinds::Kind;
use crate::topology::{Overlap, OverlapNamespaces, Scope};

/// The ConfigMap the leader publishes the state into (a shard's carries its name after it).
pub const STATE_CONFIGMAP: &str = "nauthera-reconciler-state";
/// At most this many namespaces of an overlap are named; the rest are counted.
pub const MAX_OVERLAP_NAMESPACES: usize = 20;

/// The ConfigMap a reconciler publishes its state into: [`STATE_CONFIGMAP`], and
/// `nauthera-reconciler-state-<shard>` for a shard.
pub fn state_configmap_name(shard: Option<&str>) -> String {
    match shard {
        Some(shard) => format!("{STATE_CONFIGMAP}-{shard}"),
        None => STATE_CONFIGMAP.to_owned(),
    }
}

/// Another shard whose scope overlaps the publisher's: what both reconcile. Both keep running;
/// the server's managers keep each from writing over the other's objects, which show as
/// `ManagedElsewhere` in the shard that did not write them first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardOverlap {
    /// The other shard's name ([`crate::topology::UNSHARDED`] for a reconciler without one).
    pub shard: String,
    /// The kinds both reconcile.
    pub kinds: Vec<Kind>,
    /// Neither is limited by namespace: both reconcile every namespace.
    #[serde(default)]
    pub every_namespace: bool,
    /// The namespaces both reconcile, in name order (at most [`MAX_OVERLAP_NAMESPACES`]).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// How many more namespaces both reconcile.
    #[serde(default)]
    pub more_namespaces: usize,
}

impl ShardOverlap {
    /// The published form of an overlap with `shard`.
    pub fn new(shard: &str, overlap: &Overlap) -> ShardOverlap {
        let (every_namespace, mut namespaces) = match &overlap.namespaces {
            OverlapNamespaces::Every => (true, Vec::new()),
            OverlapNamespaces::These(namespaces) => (false, namespaces.clone()),
        };
        let more_namespaces = namespaces.len().saturating_sub(MAX_OVERLAP_NAMESPACES);
        namespaces.truncate(MAX_OVERLAP_NAMESPACES);
        ShardOverlap {
            shard: shard.to_owned(),
            kinds: overlap.kinds.clone(),
            every_namespace,
            namespaces,
            more_namespaces,
        }
    }

    /// How many namespaces both reconcile (`None`: every namespace).
    pub fn namespace_count(&self) -> Option<usize> {
        (!self.every_namespace).then_some(self.namespaces.len() + self.more_namespaces)
    }

    /// The overlap in a sentence: `shard b also reconciles OIDCClient in namespaces team-a,
    /// team-b and 3 more`.
    pub fn describe(&self) -> String {
        let kinds: Vec<&str> = self.kinds.iter().map(|kind| kind.as_str()).collect();
        let namespaces = if self.every_namespace {
            "every namespace".to_owned()
        } else {
            let mut named = format!(
                "namespace{} {}",
                if self.namespace_count() == Some(1) {
                    ""
                } else {
                    "s"
                },
                self.namespaces.join(", ")
            );
            if self.more_namespaces > 0 {
                named.push_str(&format!(" and {} more", self.more_namespaces));
            }
            named
        };
        format!(
            "shard {} also reconciles {} in {namespaces}",
            self.shard,
            kinds.join(", ")
        )
    }
}
/// The key of the JSON document inside the ConfigMap's data.
pub const STATE_KEY: &str = "state.json";
/// The ConfigMap's label, so the plugin can find it in any namespace.
pub const STATE_LABEL: (&str, &str) = ("app.kubernetes.io/component", "nauthera-reconciler-state");

/// What the leader knows about the control plane. It holds as of `changed_at`, and as of the last
/// renewal of the Lease `lease_name` while `leader` holds it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneState {
    /// The pod that holds the leader Lease and wrote this state.
    pub leader: String,
    /// The reconciler's own build.
    pub reconciler_version: String,
    /// The manager name the reconciler writes with (the server's audit log shows it).
    #[serde(default)]
    pub manager: String,
    /// The cluster name the reconciler was given, when it is one of several clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// How the cluster's namespaces are named on the server (and in its grants).
    #[serde(
        default,
        skip_serializing_if = "crate::topology::NamespaceMapping::is_identity"
    )]
    pub namespace_mapping: crate::topology::NamespaceMapping,
    /// The part of the cluster the reconciler reconciles, when it is limited or a shard;
    /// absent: every kind in every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// The other shards (publishing in the same namespace) whose scopes overlap this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlaps: Vec<ShardOverlap>,
    /// The server address the reconciler calls.
    pub server_address: String,
    /// The server build that last answered `GetServerInfo`; empty if none ever did.
    #[serde(default)]
    pub server_build: String,
    /// The AdminService version the server reported.
    #[serde(default)]
    pub api_version: String,
    /// The optional capabilities the server reported.
    #[serde(default)]
    pub features: Vec<String>,
    /// The identity the server saw in the client certificate.
    #[serde(default)]
    pub identity: String,
    /// The grants the server reported for that identity.
    #[serde(default)]
    pub grants: Vec<GrantEntry>,
    /// The probe's outcome: `Registered` when the server answered, else the reason it failed
    /// (`Unreachable`, `Refused`, `CredentialUnavailable`, `TrustAnchorUnavailable`).
    pub probe_reason: Option<Reason>,
    /// The probe's message for a failure; never secret material.
    #[serde(default)]
    pub probe_message: String,
    /// Since when the probe finds its current reason: the first probe that found it (the server
    /// answering, or failing with this reason). Documents of older reconcilers carry `probeTime`,
    /// the last probe's time, instead.
    #[serde(alias = "probeTime")]
    pub probe_since: Option<Timestamp>,
    /// While the probe fails: when the server last answered, before the failure began (absent if
    /// it never did). Absent while the server answers: it then answers every probe since
    /// `probe_since`.
    pub last_success_time: Option<Timestamp>,
    /// When the client certificate (`tls.crt`) expires, as read at the last probe.
    pub certificate_not_after: Option<Timestamp>,
    /// The SAN identities in the client certificate.
    #[serde(default)]
    pub certificate_identities: Vec<String>,
    /// The Secret the client certificate is mounted from, in the reconciler's namespace, as
    /// its configuration names it (absent when it does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_secret: Option<String>,
    /// The leader Lease, in this ConfigMap's namespace, whose renewals say how fresh this state
    /// is; absent when the reconciler runs without leader election.
    #[serde(default)]
    pub lease_name: Option<String>,
    /// When the content last changed, which is when this document was written. Documents of
    /// older reconcilers carry `updatedAt`, the last probe's time, instead.
    #[serde(alias = "updatedAt")]
    pub changed_at: Option<Timestamp>,
}

impl ControlPlaneState {
    /// Whether the last probe reached the server and was accepted.
    pub fn is_up(&self) -> bool {
        self.probe_reason == Some(Reason::Registered)
    }

    /// The part of the cluster the reconciler reconciles (every kind in every namespace for a
    /// document without a scope).
    pub fn scope_or_everything(&self) -> Scope {
        self.scope.clone().unwrap_or_default()
    }

    /// Whether the two say the same to a reader: everything but `changed_at` is equal.
    pub fn same_content(&self, other: &ControlPlaneState) -> bool {
        ControlPlaneState {
            changed_at: None,
            ..self.clone()
        } == ControlPlaneState {
            changed_at: None,
            ..other.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json_with_camel_case_keys() {
        let state = ControlPlaneState {
            leader: "nauthera-reconciler-0".into(),
            probe_reason: Some(Reason::Unreachable),
            probe_since: Some(Timestamp::from_second(1_800_000_000).unwrap()),
            lease_name: Some("nauthera-reconciler".into()),
            changed_at: Some(Timestamp::from_second(1_800_000_001).unwrap()),
            ..ControlPlaneState::default()
        };
        let json = serde_json::to_value(&state).unwrap();
        assert_eq!(json["probeReason"], "Unreachable");
        assert_eq!(json["leader"], "nauthera-reconciler-0");
        assert_eq!(json["probeSince"], "2027-01-15T08:00:00Z");
        assert_eq!(json["leaseName"], "nauthera-reconciler");
        assert_eq!(json["changedAt"], "2027-01-15T08:00:01Z");
        let back: ControlPlaneState = serde_json::from_value(json).unwrap();
        assert_eq!(back, state);
        assert!(!back.is_up());
    }

    #[test]
    fn a_document_of_an_older_reconciler_is_read() {
        let old = serde_json::json!({
            "leader": "nauthera-reconciler-0",
            "reconcilerVersion": "0.1.0",
            "serverAddress": "s:8443",
            "probeReason": "Registered",
            "probeTime": "2027-01-15T08:00:00Z",
            "lastSuccessTime": "2027-01-15T08:00:00Z",
            "updatedAt": "2027-01-15T08:00:00Z",
        });
        let state: ControlPlaneState = serde_json::from_value(old).unwrap();
        let at = Some(Timestamp::from_second(1_800_000_000).unwrap());
        assert_eq!(state.probe_since, at);
        assert_eq!(state.changed_at, at);
        assert_eq!(state.lease_name, None);
        assert!(state.is_up());
    }

    #[test]
    fn the_content_is_everything_but_when_it_changed() {
        let state = ControlPlaneState {
            leader: "a".into(),
            probe_reason: Some(Reason::Registered),
            changed_at: Some(Timestamp::from_second(10).unwrap()),
            ..ControlPlaneState::default()
        };
        let later = ControlPlaneState {
            changed_at: Some(Timestamp::from_second(70).unwrap()),
            ..state.clone()
        };
        assert!(state.same_content(&later));
        for other in [
            ControlPlaneState {
                leader: "b".into(),
                ..state.clone()
            },
            ControlPlaneState {
                probe_reason: Some(Reason::Unreachable),
                ..state.clone()
            },
            ControlPlaneState {
                probe_message: "timeout".into(),
                ..state.clone()
            },
            ControlPlaneState {
                server_build: "nauthera-server 1.5.0".into(),
                ..state.clone()
            },
        ] {
            assert!(!state.same_content(&other), "{other:?}");
        }
    }

    #[test]
    fn a_shard_publishes_its_scope_and_overlaps_and_an_older_document_has_none() {
        assert_eq!(state_configmap_name(None), "nauthera-reconciler-state");
        assert_eq!(
            state_configmap_name(Some("a")),
            "nauthera-reconciler-state-a"
        );
        let overlap = Overlap {
            kinds: vec![Kind::OidcClient],
            namespaces: OverlapNamespaces::These((0..23).map(|i| format!("ns-{i:02}")).collect()),
        };
        let published = ShardOverlap::new("b", &overlap);
        assert_eq!(published.namespaces.len(), MAX_OVERLAP_NAMESPACES);
        assert_eq!(published.more_namespaces, 3);
        assert_eq!(published.namespace_count(), Some(23));
        assert!(
            published
                .describe()
                .starts_with("shard b also reconciles OIDCClient in namespaces ns-00, ns-01,")
        );
        assert!(published.describe().ends_with("ns-19 and 3 more"));
        let every = ShardOverlap::new(
            "(unsharded)",
            &Overlap {
                kinds: vec![Kind::Branding, Kind::Organization],
                namespaces: OverlapNamespaces::Every,
            },
        );
        assert_eq!(
            every.describe(),
            "shard (unsharded) also reconciles Branding, Organization in every namespace"
        );
        let state = ControlPlaneState {
            leader: "a-0".into(),
            scope: Some(Scope {
                shard: Some("a".into()),
                ..Scope::everything()
            }),
            overlaps: vec![published, every],
            ..ControlPlaneState::default()
        };
        let json = serde_json::to_value(&state).unwrap();
        assert_eq!(json["scope"]["shard"], "a");
        assert_eq!(json["overlaps"][0]["moreNamespaces"], 3);
        assert_eq!(json["overlaps"][1]["everyNamespace"], true);
        assert_eq!(json["overlaps"][1]["namespaces"], serde_json::json!([]));
        assert_eq!(
            serde_json::from_value::<ControlPlaneState>(json).unwrap(),
            state
        );
        let unlimited = serde_json::to_value(ControlPlaneState::default()).unwrap();
        assert!(unlimited.get("scope").is_none() && unlimited.get("overlaps").is_none());
        let old: ControlPlaneState = serde_json::from_value(serde_json::json!({
            "leader": "p", "reconcilerVersion": "0.1.0", "serverAddress": "s:8443",
            "probeReason": null, "probeSince": null, "lastSuccessTime": null,
            "certificateNotAfter": null, "changedAt": null,
        }))
        .unwrap();
        assert_eq!(old.scope, None);
        assert_eq!(old.scope_or_everything(), Scope::everything());
        assert!(old.overlaps.is_empty());
    }
}
