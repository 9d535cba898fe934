//! The control-plane state the leader publishes for `kubectl nauthera status`: a ConfigMap
//! `nauthera-reconciler-state` in the reconciler's namespace, so the plugin needs no server
//! credentials. Written by server-side apply, and only when its content changes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use nauthera_shared::grants::GrantEntry;

use crate::probe::ProbeState;

/// The ConfigMap's name.
pub const STATE_CONFIG_MAP: &str = "nauthera-reconciler-state";

/// The keys of the ConfigMap's data.
pub mod keys {
    pub const LEADER: &str = "leader";
    pub const MANAGER: &str = "manager";
    pub const RECONCILER_VERSION: &str = "reconcilerVersion";
    pub const SERVER_ADDRESS: &str = "serverAddress";
    pub const SERVER_BUILD: &str = "serverBuild";
    pub const API_VERSION: &str = "apiVersion";
    pub const FEATURES: &str = "features";
    pub const IDENTITY: &str = "identity";
    /// The grants as the server reported them, as JSON (a list of `GrantEntry`).
    pub const GRANTS: &str = "grants";
    /// `Ok`, or the probe's failure reason.
    pub const PROBE_REASON: &str = "probeReason";
    pub const PROBE_MESSAGE: &str = "probeMessage";
    pub const PROBE_TIME: &str = "probeTime";
    pub const CERTIFICATE_EXPIRY: &str = "certificateExpiry";
}

/// Who publishes, besides what the probe found.
#[derive(Clone, Debug)]
pub struct Publisher<'a> {
    pub leader: &'a str,
    pub manager: &'a str,
    pub server_address: &'a str,
}

/// The ConfigMap's data.
pub fn state_data(publisher: &Publisher<'_>, probe: &ProbeState) -> BTreeMap<String, String> {
    let mut data = BTreeMap::new();
    let mut put = |key: &str, value: String| {
        data.insert(key.to_owned(), value);
    };
    put(keys::LEADER, publisher.leader.to_owned());
    put(keys::MANAGER, publisher.manager.to_owned());
    put(
        keys::RECONCILER_VERSION,
        env!("CARGO_PKG_VERSION").to_owned(),
    );
    put(keys::SERVER_ADDRESS, publisher.server_address.to_owned());
    put(
        keys::PROBE_REASON,
        probe
            .failure
            .map_or_else(|| "Ok".to_owned(), |r| r.as_str().to_owned()),
    );
    put(keys::PROBE_MESSAGE, probe.message.clone());
    put(
        keys::PROBE_TIME,
        probe.checked_at.map(|t| t.to_string()).unwrap_or_default(),
    );
    put(
        keys::CERTIFICATE_EXPIRY,
        probe
            .certificate_expiry
            .map(|t| t.to_string())
            .unwrap_or_default(),
    );
    if let Some(server) = &probe.server {
        put(keys::SERVER_BUILD, server.build.clone());
        put(keys::API_VERSION, server.api_version.clone());
        put(keys::FEATURES, server.features.join(","));
        put(keys::IDENTITY, server.identity.clone());
        let grants: Vec<GrantEntry> = server.grants.iter().map(GrantEntry::from_proto).collect();
        put(
            keys::GRANTS,
            serde_json::to_string(&grants).unwrap_or_else(|_| "[]".to_owned()),
        );
    }
    data
}

/// Writes the ConfigMap by server-side apply.
pub async fn publish(
    api: &Api<ConfigMap>,
    manager: &str,
    data: &BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": STATE_CONFIG_MAP,
            "labels": { "app.kubernetes.io/managed-by": "nauthera-reconciler" },
        },
        "data": data,
    });
    api.patch(
        STATE_CONFIG_MAP,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use nauthera_proto::v1;
    use nauthera_shared::catalog::Reason;

    #[test]
    fn the_state_carries_what_the_plugin_shows() {
        let probe = ProbeState {
            checked_at: Some(Timestamp::from_second(1_800_000_000).unwrap()),
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
            certificate_expiry: Some(Timestamp::from_second(1_900_000_000).unwrap()),
        };
        let data = state_data(
            &Publisher {
                leader: "nauthera-reconciler-abc",
                manager: "nauthera-reconciler",
                server_address: "s:8443",
            },
            &probe,
        );
        assert_eq!(data[keys::LEADER], "nauthera-reconciler-abc");
        assert_eq!(data[keys::PROBE_REASON], "Unreachable");
        assert_eq!(data[keys::SERVER_BUILD], "nauthera-server 0.14.2");
        assert_eq!(data[keys::IDENTITY], "dns:nauthera-operator.nauthera.svc");
        assert_eq!(data[keys::FEATURES], "watch_changes,audit_events");
        assert_eq!(data[keys::PROBE_TIME], "2027-01-15T08:00:00Z");
        assert!(data[keys::CERTIFICATE_EXPIRY].starts_with("2030-"));
        let grants: serde_json::Value = serde_json::from_str(&data[keys::GRANTS]).unwrap();
        assert_eq!(grants.as_array().unwrap().len(), 1);
        assert!(data[keys::GRANTS].contains("acme"));
    }
}
