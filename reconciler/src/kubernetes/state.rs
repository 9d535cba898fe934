//! The control-plane state the leader publishes for `kubectl nauthera status`: the JSON of
//! [`ControlPlaneState`] in the ConfigMap `nauthera-reconciler-state` (a shard's:
//! `nauthera-reconciler-state-<shard>`) of the reconciler's namespace, so the plugin needs no
//! server credentials. A shard's names its scope and the other shards it overlaps. Written by server-side apply, and only
//! when its content changes: a steady state writes nothing. Its freshness is the leader Lease's
//! (named in the state), which the leader renews anyway.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use nauthera_shared::catalog::Reason;
use nauthera_shared::control_plane::{ControlPlaneState, STATE_KEY, STATE_LABEL, ShardOverlap};
use nauthera_shared::topology::{NamespaceMapping, Scope};

use crate::process::probe::ProbeState;

/// Who publishes, besides what the probe found.
#[derive(Clone, Debug)]
pub struct Publisher<'a> {
    pub leader: &'a str,
    pub manager: &'a str,
    pub server_address: &'a str,
    /// The leader Lease (in the state's namespace); `None` without leader election.
    pub lease: Option<&'a str>,
    /// The Secret the client certificate is mounted from, as configured.
    pub tls_secret: Option<&'a str>,
    /// The cluster name and namespace mapping, as configured.
    pub cluster_name: Option<&'a str>,
    pub namespace_mapping: &'a NamespaceMapping,
    /// The scope, when the reconciler is limited or a shard.
    pub scope: Option<&'a Scope>,
    /// The ConfigMap to publish into.
    pub configmap: &'a str,
}

/// The content to publish: what the probe found, with since-when times only, so that another
/// probe with the same outcome gives the same content. `changed_at` is left for
/// [`next_publication`].
pub fn control_plane_state(
    publisher: &Publisher<'_>,
    probe: &ProbeState,
    overlaps: &[ShardOverlap],
) -> ControlPlaneState {
    let server = probe.server.as_ref();
    ControlPlaneState {
        leader: publisher.leader.to_owned(),
        reconciler_version: env!("CARGO_PKG_VERSION").to_owned(),
        manager: publisher.manager.to_owned(),
        cluster_name: publisher.cluster_name.map(str::to_owned),
        namespace_mapping: publisher.namespace_mapping.clone(),
        scope: publisher.scope.cloned(),
        overlaps: overlaps.to_vec(),
        server_address: publisher.server_address.to_owned(),
        server_build: server.map(|s| s.build.clone()).unwrap_or_default(),
        api_version: server.map(|s| s.api_version.clone()).unwrap_or_default(),
        features: server.map(|s| s.features.clone()).unwrap_or_default(),
        identity: server.map(|s| s.identity.clone()).unwrap_or_default(),
        grants: server
            .map(|s| {
                s.grants
                    .iter()
                    .map(nauthera_client::wire::grant_entry)
                    .collect()
            })
            .unwrap_or_default(),
        // A probe that answered is reported with the reason a healthy resource carries.
        probe_reason: probe
            .checked_at
            .map(|_| probe.failure.unwrap_or(Reason::Registered)),
        probe_message: probe.message.clone(),
        probe_since: probe.since,
        // While the server answers, the last success is the last probe: it would change the
        // content at every probe, and says nothing `probe_since` does not.
        last_success_time: probe.failure.and(probe.last_success),
        certificate_not_after: probe.certificate.as_ref().map(|c| c.not_after),
        certificate_identities: probe
            .certificate
            .as_ref()
            .map(|c| c.identities.clone())
            .unwrap_or_default(),
        lease_name: publisher.lease.map(str::to_owned),
        tls_secret: publisher.tls_secret.map(str::to_owned),
        changed_at: None,
    }
}

/// What to write after `published`: `current` stamped with `now` when a reader would see something
/// new in it, `None` when its content is what was published.
pub fn next_publication(
    published: Option<&ControlPlaneState>,
    current: ControlPlaneState,
    now: Timestamp,
) -> Option<ControlPlaneState> {
    if published.is_some_and(|published| published.same_content(&current)) {
        return None;
    }
    Some(ControlPlaneState {
        changed_at: Some(now),
        ..current
    })
}

/// Writes the ConfigMap by server-side apply.
pub async fn publish(
    api: &Api<ConfigMap>,
    publisher: &Publisher<'_>,
    state: &ControlPlaneState,
) -> Result<(), PublishError> {
    let name = publisher.configmap;
    let (label, value) = STATE_LABEL;
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "labels": {
                "app.kubernetes.io/managed-by": "nauthera-reconciler",
                label: value,
            },
        },
        "data": { STATE_KEY: serde_json::to_string_pretty(state)? },
    });
    api.patch(
        name,
        &PatchParams::apply(publisher.manager).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// Why the state could not be published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("cannot encode the state: {0}")]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    Kubernetes(#[from] kube::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use nauthera_client::CertificateInfo;
    use nauthera_proto::v1;

    static IDENTITY: NamespaceMapping = NamespaceMapping::IDENTITY;

    fn publisher() -> Publisher<'static> {
        Publisher {
            leader: "nauthera-reconciler-abc",
            manager: "nauthera-reconciler",
            server_address: "s:8443",
            lease: Some("nauthera-reconciler"),
            tls_secret: Some("nauthera-reconciler-tls"),
            cluster_name: None,
            namespace_mapping: &IDENTITY,
            scope: None,
            configmap: "nauthera-reconciler-state",
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn the_state_carries_what_the_plugin_shows() {
        let probe = ProbeState {
            checked_at: Some(at(1_800_000_000)),
            since: Some(at(1_799_999_970)),
            failure: Some(Reason::Unreachable),
            message: "server s:8443 unreachable: connection refused".into(),
            server: Some(v1::ServerInfo {
                build: "nauthera-server 0.14.2".into(),
                api_version: "nauthera.admin.v1".into(),
                features: vec!["watch_changes".into(), "audit_events".into()],
                identity: "dns:nauthera-operator.nauthera.svc".into(),
                grants: vec![v1::Grant {
                    identity: "dns:nauthera-operator.nauthera.svc".into(),
                    operations: vec![v1::Operation::Clients as i32],
                    organizations: vec!["acme".into()],
                    namespaces: vec!["*".into()],
                }],
                change_hint: None,
            }),
            last_success: Some(at(1_799_999_940)),
            certificate: Some(CertificateInfo {
                identities: vec!["dns:nauthera-operator.nauthera.svc".into()],
                subject: "CN=nauthera-operator".into(),
                issuer: "CN=nauthera-ca".into(),
                not_before: at(1_700_000_000),
                not_after: at(1_900_000_000),
            }),
        };
        let state = control_plane_state(&publisher(), &probe, &[]);
        assert_eq!(state.leader, "nauthera-reconciler-abc");
        assert_eq!(state.manager, "nauthera-reconciler");
        assert_eq!(state.probe_reason, Some(Reason::Unreachable));
        assert!(!state.is_up());
        assert_eq!(state.server_build, "nauthera-server 0.14.2");
        assert_eq!(state.identity, "dns:nauthera-operator.nauthera.svc");
        assert_eq!(state.features, ["watch_changes", "audit_events"]);
        assert_eq!(state.probe_since, Some(at(1_799_999_970)));
        assert_eq!(state.last_success_time, Some(at(1_799_999_940)));
        assert_eq!(state.lease_name.as_deref(), Some("nauthera-reconciler"));
        assert_eq!(state.changed_at, None, "stamped when published");
        assert_eq!(state.certificate_not_after, Some(at(1_900_000_000)));
        assert_eq!(state.grants.len(), 1);
        assert_eq!(state.grants[0].organizations, ["acme"]);
    }

    #[test]
    fn an_answered_probe_is_up_and_a_missing_one_has_no_reason() {
        let answered = ProbeState {
            checked_at: Some(at(10)),
            since: Some(at(10)),
            last_success: Some(at(10)),
            ..ProbeState::default()
        };
        let up = control_plane_state(&publisher(), &answered, &[]);
        assert!(up.is_up());
        assert_eq!(up.probe_since, Some(at(10)));
        assert_eq!(
            up.last_success_time, None,
            "it answers every probe since probeSince"
        );
        let never = control_plane_state(&publisher(), &ProbeState::default(), &[]);
        assert_eq!(never.probe_reason, None);
        assert!(!never.is_up());
    }

    fn up_since(since: i64, checked: i64) -> ProbeState {
        ProbeState {
            checked_at: Some(at(checked)),
            since: Some(at(since)),
            last_success: Some(at(checked)),
            server: Some(v1::ServerInfo {
                build: "nauthera-server 0.14.2".into(),
                ..v1::ServerInfo::default()
            }),
            ..ProbeState::default()
        }
    }

    #[test]
    fn a_steady_state_publishes_once_and_a_change_of_outcome_again() {
        let first = next_publication(
            None,
            control_plane_state(&publisher(), &up_since(100, 100), &[]),
            at(101),
        )
        .expect("the first state is published");
        assert_eq!(first.changed_at, Some(at(101)));

        // Probe after probe with the same outcome: nothing to write.
        for checked in [160, 220, 280] {
            let current = control_plane_state(&publisher(), &up_since(100, checked), &[]);
            assert_eq!(next_publication(Some(&first), current, at(checked)), None);
        }

        // The server goes away: written, with since when and the last answer.
        let failing = ProbeState {
            checked_at: Some(at(340)),
            since: Some(at(340)),
            failure: Some(Reason::Unreachable),
            message: "server s:8443 unreachable: connection refused".into(),
            ..up_since(100, 280)
        };
        let down = next_publication(
            Some(&first),
            control_plane_state(&publisher(), &failing, &[]),
            at(341),
        )
        .expect("a new outcome is published");
        assert_eq!(down.changed_at, Some(at(341)));
        assert_eq!(down.probe_since, Some(at(340)));
        assert_eq!(down.last_success_time, Some(at(280)));
        let retried = ProbeState {
            checked_at: Some(at(355)),
            ..failing.clone()
        };
        assert_eq!(
            next_publication(
                Some(&down),
                control_plane_state(&publisher(), &retried, &[]),
                at(356)
            ),
            None,
            "a retry with the same outcome writes nothing"
        );

        // Another server build, another leader: a reader sees them, so they are written.
        let upgraded = ProbeState {
            server: Some(v1::ServerInfo {
                build: "nauthera-server 0.15.0".into(),
                ..v1::ServerInfo::default()
            }),
            ..up_since(100, 400)
        };
        assert!(
            next_publication(
                Some(&first),
                control_plane_state(&publisher(), &upgraded, &[]),
                at(401)
            )
            .is_some()
        );
        let other = Publisher {
            leader: "nauthera-reconciler-def",
            ..publisher()
        };
        assert!(
            next_publication(
                Some(&first),
                control_plane_state(&other, &up_since(100, 400), &[]),
                at(401)
            )
            .is_some()
        );
    }

    #[test]
    fn a_shard_publishes_its_scope_and_a_new_overlap_is_a_new_content() {
        let scope = Scope {
            shard: Some("team-a".into()),
            namespaces: vec!["team-a".into()],
            ..Scope::everything()
        };
        let shard = Publisher {
            scope: Some(&scope),
            configmap: "nauthera-reconciler-state-team-a",
            ..publisher()
        };
        let first = next_publication(
            None,
            control_plane_state(&shard, &up_since(100, 100), &[]),
            at(101),
        )
        .unwrap();
        assert_eq!(first.scope.as_ref(), Some(&scope));
        assert!(first.overlaps.is_empty());
        let overlap = ShardOverlap {
            shard: "team-b".into(),
            kinds: vec![nauthera_shared::kinds::Kind::OidcClient],
            namespaces: vec!["team-a".into()],
            ..ShardOverlap::default()
        };
        let overlapping =
            control_plane_state(&shard, &up_since(100, 160), std::slice::from_ref(&overlap));
        let next = next_publication(Some(&first), overlapping, at(161)).unwrap();
        assert_eq!(next.overlaps, vec![overlap]);
        assert_eq!(
            next_publication(
                Some(&next),
                control_plane_state(&shard, &up_since(100, 220), &next.overlaps),
                at(221)
            ),
            None
        );
    }
}
