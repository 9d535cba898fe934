//! What puts policies in force, a moment after they are written, as in the API server and its
//! controller manager:
//!
//! - The API server's admission plugin does not read policies and bindings from storage on each
//!   request: informers feed a cache that a loop compiles into the policies in force once a
//!   second, when something changed (`generic/policy_source.go`, `policyRefreshInterval`). A new
//!   policy or binding is therefore enforced up to a second after it was written, and a deleted
//!   one keeps refusing for as long. The emulator keeps the same snapshot ([`Loaded`]) and
//!   refreshes it on the same period ([`crate::Options::policy_refresh_interval`]); clients must
//!   wait for enforcement, as they must on a real server.
//! - The controller manager's `validatingadmissionpolicy-status` controller type-checks each new
//!   generation of a policy against the schemas of the kinds it matches and applies
//!   `status.observedGeneration` and `status.typeChecking` (field manager
//!   `validatingadmissionpolicy-status`, the status subresource). The emulator does the same as
//!   soon as it sees the write (see `type_check`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::{BINDINGS, GROUP, POLICIES, key};
use crate::admission::FieldValidation;
use crate::objects::{self, PatchKind, WriteContext};
use crate::store::{Store, Stored};

/// The field manager of the status the type checker writes.
pub const STATUS_MANAGER: &str = "validatingadmissionpolicy-status";

/// The policies and bindings in force, as last loaded.
#[derive(Debug, Default)]
pub struct Loaded {
    pub policies: Vec<Arc<Stored>>,
    pub bindings: Vec<Arc<Stored>>,
}

impl Loaded {
    fn is_current(&self, policies: &[Arc<Stored>], bindings: &[Arc<Stored>]) -> bool {
        let same = |a: &[Arc<Stored>], b: &[Arc<Stored>]| {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| Arc::ptr_eq(a, b))
        };
        same(&self.policies, policies) && same(&self.bindings, bindings)
    }
}

/// Loads the stored policies and bindings into force when they changed since the last load.
pub fn refresh(store: &mut Store) {
    let policies: Vec<Arc<Stored>> = store.list(&key(POLICIES), None, None).cloned().collect();
    let bindings: Vec<Arc<Stored>> = store.list(&key(BINDINGS), None, None).cloned().collect();
    if !store.admission.is_current(&policies, &bindings) {
        store.admission = Arc::new(Loaded { policies, bindings });
    }
}

/// Refreshes the policies in force every `interval` and writes each new policy generation's
/// status, until the store's event channel closes.
pub async fn run(store: Arc<Mutex<Store>>, interval: Duration) {
    let mut changes = match store.lock() {
        Ok(store) => store.subscribe(),
        Err(_) => return,
    };
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate: what was seeded is in force from the start.
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let Ok(mut store) = store.lock() else { return };
                refresh(&mut store);
            }
            change = changes.recv() => match change {
                Ok(event) if event.resource == key(POLICIES) => {
                    write_status(&store, &event.object).await;
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {
                    let policies: Vec<Arc<Stored>> = match store.lock() {
                        Ok(store) => store.list(&key(POLICIES), None, None).cloned().collect(),
                        Err(_) => return,
                    };
                    for policy in policies {
                        write_status(&store, &policy).await;
                    }
                }
                Err(RecvError::Closed) => return,
            }
        }
    }
}

fn generation(policy: &Value, pointer: &str) -> i64 {
    policy.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// Type-checks a policy generation the status does not show yet and applies the status.
async fn write_status(store: &Arc<Mutex<Store>>, policy: &Arc<Stored>) {
    let value = &policy.value;
    let observed = generation(value, "/status/observedGeneration");
    let current = generation(value, "/metadata/generation");
    if current <= observed || value.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let checked = {
        let store = store.clone();
        let policy = policy.clone();
        tokio::task::spawn_blocking(move || super::type_check::check(&store, &policy.value)).await
    };
    let Ok(warnings) = checked else {
        return;
    };
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut type_checking = json!({});
    if !warnings.is_empty() {
        type_checking["expressionWarnings"] = Value::Array(
            warnings
                .into_iter()
                .map(|w| json!({"fieldRef": w.field_ref, "warning": w.warning}))
                .collect(),
        );
    }
    let status = json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "status": {"observedGeneration": current, "typeChecking": type_checking},
    });
    let Ok(mut store) = store.lock() else {
        return;
    };
    let Some(info) = store.registry.get(&key(POLICIES)).cloned() else {
        return;
    };
    // Only for the generation checked: a newer one gets its own turn.
    let live = store.get(&key(POLICIES), "", name);
    if live.is_none_or(|live| generation(&live.value, "/metadata/generation") != current) {
        return;
    }
    let ctx = WriteContext {
        manager: STATUS_MANAGER.into(),
        dry_run: false,
        force: true,
        validation: FieldValidation::Ignore,
        group: GROUP.into(),
        version: "v1".into(),
        requester: None,
    };
    let body = serde_json::to_vec(&status).unwrap_or_default();
    if let Err(error) = objects::patch(
        &mut *store,
        &info,
        "",
        name,
        Some("status"),
        PatchKind::Apply,
        &body,
        &ctx,
    ) {
        tracing::warn!(%error, policy = name, "the policy status could not be written");
    }
}
