//! The type of the Kubernetes events the reconciler records; their reasons are declared with
//! the condition reasons (`reasons.rs`).

use serde::{Deserialize, Serialize};

use super::words::words;

words! {
    /// The `type` of a Kubernetes event.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum EventType {
        Normal = "Normal",
        Warning = "Warning",
    }
}
