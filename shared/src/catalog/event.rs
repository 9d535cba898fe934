//! The Kubernetes events the reconciler records. A closed set, so no event reason is made up at
//! the call site.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The `type` of a Kubernetes event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `reason` of a Kubernetes event. Most follow a condition reason (the transition into it);
/// `Applied`, `SecretDelivered`, `SecretRotated`, `SecretRemoved`, `SecretChanged`,
/// `ClientIdChanged`, `DriftSuperseded` and `DriftAdopted` are events only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventReason {
    /// A new generation of the manifest was written to the server.
    Applied,
    /// The resource became Registered: the declared generation is in force.
    Registered,
    /// The resource is waiting: first reconcile, or a transient failure retried with backoff.
    Pending,
    /// The server, or the reconciler for an unencodable branding, refused the declared state.
    Refused,
    /// A minted client secret was written into its Secret.
    SecretDelivered,
    /// A new client secret replaced one that workloads held (its Secret was deleted or emptied,
    /// or the manifest names another Secret): the workloads that read it must restart.
    SecretRotated,
    /// A Secret holding a generated client secret the server no longer accepts was removed.
    SecretRemoved,
    /// A new generation of the manifest was written over a drift: the change made on the
    /// server is discarded.
    DriftSuperseded,
    /// A new generation of the manifest declares what a drift changed on the server: the
    /// change is kept, adopted as the declared state.
    DriftAdopted,
    /// The value in the Secret the manifest references changed and was sent to the server.
    SecretChanged,
    /// A restore created a client the server no longer had, and the server gave it a new client
    /// id: the applications configured with the old one must be given the new one.
    ClientIdChanged,
    /// A minted client secret could not be written into its Secret.
    SecretUndeliverable,
    /// The Secret named by `spec.secret.secretRef` (or an identity provider's `secretRef`) is
    /// missing or lacks the key.
    SecretRefUnavailable,
    /// The object was changed or removed on the server by something else.
    Drifted,
    /// The declared state was written back over a drift on request.
    Restored,
    /// The server cannot be reached.
    Unreachable,
    /// The reconciler's client certificate or key cannot be read.
    CredentialUnavailable,
    /// The reconciler's CA bundle cannot be read.
    TrustAnchorUnavailable,
    /// The manifest is being deleted; the deletion policy is being carried out.
    Deleting,
    /// `deletionPolicy: Delete` removed the object from the server.
    Deleted,
    /// `deletionPolicy: Orphan` left the object registered on the server.
    Orphaned,
    /// `deletionPolicy: Delete` left a drifted object in place on the server.
    DeletionSkippedDrifted,
    /// A ClientPolicy holds the declared generation back.
    PolicyViolation,
    /// The declared generation waits for an approval a ClientPolicy requires.
    WaitingForApproval,
    /// The object on the server is another reconciler's.
    ManagedElsewhere,
    /// The object was taken over from another reconciler on request.
    TakenOver,
    /// The reconciler refuses a ClientPolicy the API server would not enforce as generated.
    PolicyRefused,
}

impl EventReason {
    pub const ALL: [EventReason; 27] = [
        EventReason::Applied,
        EventReason::DriftSuperseded,
        EventReason::DriftAdopted,
        EventReason::SecretChanged,
        EventReason::ClientIdChanged,
        EventReason::Registered,
        EventReason::Pending,
        EventReason::Refused,
        EventReason::SecretDelivered,
        EventReason::SecretRotated,
        EventReason::SecretRemoved,
        EventReason::SecretUndeliverable,
        EventReason::SecretRefUnavailable,
        EventReason::Drifted,
        EventReason::Restored,
        EventReason::Unreachable,
        EventReason::CredentialUnavailable,
        EventReason::TrustAnchorUnavailable,
        EventReason::Deleting,
        EventReason::Deleted,
        EventReason::Orphaned,
        EventReason::DeletionSkippedDrifted,
        EventReason::PolicyViolation,
        EventReason::WaitingForApproval,
        EventReason::ManagedElsewhere,
        EventReason::TakenOver,
        EventReason::PolicyRefused,
    ];

    /// The event's `reason`, CamelCase.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventReason::Applied => "Applied",
            EventReason::Registered => "Registered",
            EventReason::Pending => "Pending",
            EventReason::Refused => "Refused",
            EventReason::SecretDelivered => "SecretDelivered",
            EventReason::SecretRotated => "SecretRotated",
            EventReason::SecretRemoved => "SecretRemoved",
            EventReason::DriftSuperseded => "DriftSuperseded",
            EventReason::DriftAdopted => "DriftAdopted",
            EventReason::SecretChanged => "SecretChanged",
            EventReason::ClientIdChanged => "ClientIdChanged",
            EventReason::SecretUndeliverable => "SecretUndeliverable",
            EventReason::SecretRefUnavailable => "SecretRefUnavailable",
            EventReason::Drifted => "Drifted",
            EventReason::Restored => "Restored",
            EventReason::Unreachable => "Unreachable",
            EventReason::CredentialUnavailable => "CredentialUnavailable",
            EventReason::TrustAnchorUnavailable => "TrustAnchorUnavailable",
            EventReason::Deleting => "Deleting",
            EventReason::Deleted => "Deleted",
            EventReason::Orphaned => "Orphaned",
            EventReason::DeletionSkippedDrifted => "DeletionSkippedDrifted",
            EventReason::PolicyViolation => "PolicyViolation",
            EventReason::WaitingForApproval => "WaitingForApproval",
            EventReason::ManagedElsewhere => "ManagedElsewhere",
            EventReason::TakenOver => "TakenOver",
            EventReason::PolicyRefused => "PolicyRefused",
        }
    }

    /// Warning for what needs a person's attention, Normal for the expected course.
    pub const fn event_type(self) -> EventType {
        match self {
            EventReason::Applied
            | EventReason::Registered
            | EventReason::Pending
            | EventReason::SecretDelivered
            | EventReason::SecretRemoved
            | EventReason::Restored
            | EventReason::Deleting
            | EventReason::Deleted
            | EventReason::Orphaned
            | EventReason::TakenOver
            | EventReason::DriftAdopted
            | EventReason::SecretChanged => EventType::Normal,
            EventReason::Refused
            | EventReason::SecretUndeliverable
            | EventReason::SecretRefUnavailable
            | EventReason::Drifted
            | EventReason::Unreachable
            | EventReason::CredentialUnavailable
            | EventReason::TrustAnchorUnavailable
            | EventReason::DeletionSkippedDrifted
            | EventReason::PolicyViolation
            | EventReason::WaitingForApproval
            | EventReason::ManagedElsewhere
            | EventReason::DriftSuperseded
            | EventReason::SecretRotated
            | EventReason::ClientIdChanged
            | EventReason::PolicyRefused => EventType::Warning,
        }
    }
}

impl fmt::Display for EventReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
