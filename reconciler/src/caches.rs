//! Watch caches that reconciles read instead of asking the API server each time.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::reflector::{ObjectRef, Store};

/// The Secrets this reconciler delivered (those with its managed-by label), as its watches last
/// saw them: one store per watched scope (all namespaces, or each configured namespace).
#[derive(Clone, Default)]
pub struct DeliveredSecrets {
    stores: Vec<Store<Secret>>,
}

impl std::fmt::Debug for DeliveredSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveredSecrets")
            .field("stores", &self.stores.len())
            .finish()
    }
}

impl DeliveredSecrets {
    pub fn new(stores: Vec<Store<Secret>>) -> DeliveredSecrets {
        DeliveredSecrets { stores }
    }

    /// The cached Secret, if a watch has shown it. A miss says nothing: the Secret may be
    /// somebody else's (unlabelled) or not seen yet, so the caller reads it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Secret>> {
        let key = ObjectRef::new(name).within(namespace);
        self.stores.iter().find_map(|store| store.get(&key))
    }
}
