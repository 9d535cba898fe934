//! A published state, its Lease and the control-plane facts of a healthy install, for the
//! tests of the commands that read them, at a fixed clock ([`NOW`]).

use nauthera_shared::catalog::Reason;
use nauthera_shared::control_plane::ControlPlaneState;
use nauthera_shared::grants::{GrantEntry, Operation};

use super::{ControlPlaneFacts, LeaseFacts, LeaseRead, Replicas};
use crate::model::view::fixtures::at;

/// The tests' clock, in seconds since the epoch.
pub const NOW: i64 = 1_800_000_000;

pub fn state() -> ControlPlaneState {
    ControlPlaneState {
        leader: "nauthera-reconciler-6d5f7-x2k4p".into(),
        reconciler_version: "0.1.0".into(),
        manager: "nauthera-reconciler".into(),
        cluster_name: None,
        namespace_mapping: Default::default(),
        scope: None,
        overlaps: Vec::new(),
        server_address: "https://nauthera-server.nauthera.svc:8443".into(),
        server_build: "nauthera-server 1.4.2".into(),
        api_version: "nauthera.admin.v1".into(),
        features: vec!["watch_changes".into()],
        identity: "dns:nauthera-operator.nauthera.svc".into(),
        grants: vec![GrantEntry {
            identity: "dns:nauthera-operator.nauthera.svc".into(),
            operations: vec![Operation::Clients, Operation::Organizations],
            organizations: vec!["acme".into()],
            namespaces: vec!["team-a".into(), "ops".into()],
        }],
        probe_reason: Some(Reason::Registered),
        probe_message: String::new(),
        probe_since: Some(at(NOW - 3 * 3600)),
        last_success_time: None,
        certificate_not_after: Some(at(NOW + 5 * 86_400)),
        certificate_identities: vec!["dns:nauthera-operator.nauthera.svc".into()],
        lease_name: Some("nauthera-reconciler".into()),
        tls_secret: None,
        changed_at: Some(at(NOW - 3 * 3600)),
    }
}

/// The Lease as the state's leader renews it: last renewed `renewed` seconds before now.
pub fn lease(holder: &str, renewed: i64) -> LeaseRead {
    LeaseRead::Found(LeaseFacts {
        holder: Some(holder.into()),
        acquire_time: Some(at(NOW - 86_400)),
        renew_time: Some(at(NOW - renewed)),
        duration_seconds: Some(15),
    })
}

pub fn facts() -> ControlPlaneFacts {
    ControlPlaneFacts {
        namespace: "nauthera-system".into(),
        state: Some(state()),
        state_problem: None,
        replicas: Some(Replicas {
            desired: 2,
            ready: 2,
        }),
        replicas_problem: None,
        lease: lease("nauthera-reconciler-6d5f7-x2k4p", 2),
        shards: Vec::new(),
    }
}
