//! The control-plane state the leader publishes for `kubectl nauthera status`: the JSON of
//! [`ControlPlaneState`] in the ConfigMap `nauthera-reconciler-state` of the reconciler's
//! namespace, so the plugin needs no server credentials. Written by server-side apply, and only
//! when its content changes.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use nauthera_shared::catalog::Reason;
use nauthera_shared::control_plane::{ControlPlaneState, STATE_CONFIGMAP, STATE_KEY, STATE_LABEL};
use nauthera_shared::grants::GrantEntry;

use crate::probe::ProbeState;

/// Who publishes, besides what the probe found.
#[derive(Clone, Debug)]
pub struct Publisher<'a> {
    pub leader: &'a str,
    pub manager: &'a str,
    pub server_address: &'a str,
}

/// The state to publish: what the probe found, as of its last run.
pub fn control_plane_state(publisher: &Publisher<'_>, probe: &ProbeState) -> ControlPlaneState {
    let server = probe.server.as_ref();
    ControlPlaneState {
        leader: publisher.leader.to_owned(),
        reconciler_version: env!("CARGO_PKG_VERSION").to_owned(),
        manager: publisher.manager.to_owned(),
        server_address: publisher.server_address.to_owned(),
        server_build: server.map(|s| s.build.clone()).unwrap_or_default(),
        api_version: server.map(|s| s.api_version.clone()).unwrap_or_default(),
        features: server.map(|s| s.features.clone()).unwrap_or_default(),
        identity: server.map(|s| s.identity.clone()).unwrap_or_default(),
        grants: server
            .map(|s| s.grants.iter().map(GrantEntry::from_proto).collect())
            .unwrap_or_default(),
        // A probe that answered is reported with the reason a healthy resource carries.
        probe_reason: probe
            .checked_at
            .map(|_| probe.failure.unwrap_or(Reason::Registered)),
        probe_message: probe.message.clone(),
        probe_time: probe.checked_at,
        last_success_time: probe.last_success,
        certificate_not_after: probe.certificate.as_ref().map(|c| c.not_after),
        certificate_identities: probe
            .certificate
            .as_ref()
            .map(|c| c.identities.clone())
            .unwrap_or_default(),
        updated_at: probe.checked_at,
    }
}

/// Writes the ConfigMap by server-side apply.
pub async fn publish(
    api: &Api<ConfigMap>,
    manager: &str,
    state: &ControlPlaneState,
) -> Result<(), PublishError> {
    let (label, value) = STATE_LABEL;
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": STATE_CONFIGMAP,
            "labels": {
                "app.kubernetes.io/managed-by": "nauthera-reconciler",
                label: value,
            },
        },
        "data": { STATE_KEY: serde_json::to_string_pretty(state)? },
    });
    api.patch(
        STATE_CONFIGMAP,
        &PatchParams::apply(manager).force(),
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
    use jiff::Timestamp;
    use nauthera_proto::v1;
    use nauthera_shared::client::CertificateInfo;

    fn publisher() -> Publisher<'static> {
        Publisher {
            leader: "nauthera-reconciler-abc",
            manager: "nauthera-reconciler",
            server_address: "s:8443",
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn the_state_carries_what_the_plugin_shows() {
        let probe = ProbeState {
            checked_at: Some(at(1_800_000_000)),
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
                not_before: at(1_700_000_000),
                not_after: at(1_900_000_000),
            }),
        };
        let state = control_plane_state(&publisher(), &probe);
        assert_eq!(state.leader, "nauthera-reconciler-abc");
        assert_eq!(state.manager, "nauthera-reconciler");
        assert_eq!(state.probe_reason, Some(Reason::Unreachable));
        assert!(!state.is_up());
        assert_eq!(state.server_build, "nauthera-server 0.14.2");
        assert_eq!(state.identity, "dns:nauthera-operator.nauthera.svc");
        assert_eq!(state.features, ["watch_changes", "audit_events"]);
        assert_eq!(state.probe_time, Some(at(1_800_000_000)));
        assert_eq!(state.last_success_time, Some(at(1_799_999_940)));
        assert_eq!(state.certificate_not_after, Some(at(1_900_000_000)));
        assert_eq!(state.grants.len(), 1);
        assert_eq!(state.grants[0].organizations, ["acme"]);
    }

    #[test]
    fn an_answered_probe_is_up_and_a_missing_one_has_no_reason() {
        let answered = ProbeState {
            checked_at: Some(at(10)),
            last_success: Some(at(10)),
            ..ProbeState::default()
        };
        assert!(control_plane_state(&publisher(), &answered).is_up());
        let never = control_plane_state(&publisher(), &ProbeState::default());
        assert_eq!(never.probe_reason, None);
        assert!(!never.is_up());
    }
}
