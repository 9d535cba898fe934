//! The control-plane state the reconciler's leader publishes for the kubectl plugin.
//!
//! The leader writes it as JSON under [`STATE_KEY`] of the ConfigMap [`STATE_CONFIGMAP`] in its own
//! namespace, so the plugin can show the server build, the identity and grants the server reported,
//! the probe's outcome and the certificate's expiry without holding server credentials itself.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::catalog::Reason;
use crate::grants::GrantEntry;

/// The ConfigMap the leader publishes the state into.
pub const STATE_CONFIGMAP: &str = "nauthera-reconciler-state";
/// The key of the JSON document inside the ConfigMap's data.
pub const STATE_KEY: &str = "state.json";
/// The ConfigMap's label, so the plugin can find it in any namespace.
pub const STATE_LABEL: (&str, &str) = ("app.kubernetes.io/component", "nauthera-reconciler-state");

/// What the leader knows about the control plane, as of `updated_at`.
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
    /// When the probe last ran.
    pub probe_time: Option<Timestamp>,
    /// When the server last answered.
    pub last_success_time: Option<Timestamp>,
    /// When the client certificate (`tls.crt`) expires, as read at the last probe.
    pub certificate_not_after: Option<Timestamp>,
    /// The SAN identities in the client certificate.
    #[serde(default)]
    pub certificate_identities: Vec<String>,
    /// When this document was written.
    pub updated_at: Option<Timestamp>,
}

impl ControlPlaneState {
    /// Whether the last probe reached the server and was accepted.
    pub fn is_up(&self) -> bool {
        self.probe_reason == Some(Reason::Registered)
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
            probe_time: Some(Timestamp::from_second(1_800_000_000).unwrap()),
            ..ControlPlaneState::default()
        };
        let json = serde_json::to_value(&state).unwrap();
        assert_eq!(json["probeReason"], "Unreachable");
        assert_eq!(json["leader"], "nauthera-reconciler-0");
        let back: ControlPlaneState = serde_json::from_value(json).unwrap();
        assert_eq!(back, state);
        assert!(!back.is_up());
    }
}
