//! The reason catalog: the single source of every condition reason, its Ready status, phase, event
//! reason, metric label, runbook page and the checks `kubectl nauthera diagnose` runs.

use serde::{Deserialize, Serialize};

/// Why a resource is in the state it is in. The string form (`as_str`) is what appears in
/// conditions, events, metric labels and runbook file names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Reason {
    /// The declared generation is in force on the server.
    Registered,
    /// Waiting: a transient failure is being retried, or the first reconcile has not finished.
    Pending,
    /// The server (or the reconciler itself, for an unencodable branding) refused the declared state.
    Refused,
    /// The client secret is minted but the Secret could not be written.
    SecretUndeliverable,
    /// The Secret named by `spec.secret.secretRef` is missing or lacks the key.
    SecretRefUnavailable,
    /// Changed or removed on the server by something else; not written over.
    Drifted,
    /// The declared state was written back over a drift on request (the restore annotation).
    Restored,
    /// The server cannot be reached.
    Unreachable,
    /// The client certificate or key cannot be read.
    CredentialUnavailable,
    /// The CA bundle cannot be read.
    TrustAnchorUnavailable,
    /// The manifest is being deleted and the deletion policy is being carried out.
    Deleting,
    /// `deletionPolicy: Delete` removed the object from the server.
    Deleted,
    /// `deletionPolicy: Orphan` left the object registered on the server.
    Orphaned,
    /// `deletionPolicy: Delete` left a drifted object in place on the server.
    DeletionSkippedDrifted,
}

/// The coarse state shown in `kubectl get` and summarised by the plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    Registered,
    Pending,
    Error,
}

/// The condition types the reconciler sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ConditionType {
    /// The declared state is in force on the server and delivered.
    Ready,
}
