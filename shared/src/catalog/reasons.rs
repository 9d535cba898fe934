//! The table of reasons and events: every condition reason with its event and catalog entry,
//! and the events that follow no reason. `Reason`, `EventReason` and everything that lists them
//! derive from it (see [`reasons_and_events`]).

use super::words::reasons_and_events;
use super::{EventType, ReasonEntry, entries};

reasons_and_events! {
    reasons {
        /// The declared generation is in force on the server.
        Registered: Normal => entries::REGISTERED,
            "the resource enters `Registered`; when a write brought it there, the note tells the \
             write (generation, revision, client id) and the Secret its secret went into";
        /// Waiting: a transient failure is being retried, or the first reconcile has not finished.
        Pending: Normal => entries::PENDING, "the resource enters `Pending`";
        /// The server (or the reconciler itself, for an unencodable branding) refused the
        /// declared state.
        Refused: Warning => entries::REFUSED, "the resource enters `Refused`";
        /// The client secret is minted but the Secret could not be written.
        SecretUndeliverable: Warning => entries::SECRET_UNDELIVERABLE,
            "the resource enters `SecretUndeliverable`";
        /// The Secret named by `spec.secret.secretRef` (or an identity provider's `secretRef`)
        /// holds no usable value under the key, or may not be read (a Secret or key not there
        /// yet is waited for as `Pending`).
        SecretRefUnavailable: Warning => entries::SECRET_REF_UNAVAILABLE,
            "the resource enters `SecretRefUnavailable`";
        /// Changed or removed on the server by something else; not written over.
        Drifted: Warning => entries::DRIFTED, "the resource enters `Drifted`";
        /// The declared state was written back over a drift on request (the restore annotation).
        Restored: Normal => entries::RESTORED, "a drifted object was written back on request";
        /// The server cannot be reached.
        Unreachable: Warning => entries::UNREACHABLE, "the resource enters `Unreachable`";
        /// The client certificate or key cannot be read.
        CredentialUnavailable: Warning => entries::CREDENTIAL_UNAVAILABLE,
            "the resource enters `CredentialUnavailable`";
        /// The CA bundle cannot be read.
        TrustAnchorUnavailable: Warning => entries::TRUST_ANCHOR_UNAVAILABLE,
            "the resource enters `TrustAnchorUnavailable`";
        /// The manifest is being deleted and the deletion policy is being carried out.
        Deleting: Normal => entries::DELETING, "the deletion of a manifest begins";
        /// `deletionPolicy: Delete` removed the object from the server.
        Deleted: Normal => entries::DELETED,
            "`deletionPolicy: Delete` removed the object from the server";
        /// `deletionPolicy: Orphan` left the object registered on the server.
        Orphaned: Normal => entries::ORPHANED,
            "`deletionPolicy: Orphan` left the object on the server";
        /// `deletionPolicy: Delete` left a drifted object in place on the server.
        DeletionSkippedDrifted: Warning => entries::DELETION_SKIPPED_DRIFTED,
            "`deletionPolicy: Delete` left a drifted object on the server";
        /// A ClientPolicy does not allow what the manifest declares: nothing of it is sent.
        PolicyViolation: Warning => entries::POLICY_VIOLATION,
            "the resource enters `PolicyViolation`, or another rule holds it back; the note names \
             the policy, the rule and the field";
        /// A ClientPolicy requires an approval of this generation before it is sent.
        WaitingForApproval: Warning => entries::WAITING_FOR_APPROVAL,
            "the resource enters `WaitingForApproval`; the note names the policy and the \
             generation waiting";
        /// The object on the server is another reconciler's: it is never written over.
        ManagedElsewhere: Warning => entries::MANAGED_ELSEWHERE,
            "the resource enters `ManagedElsewhere`, or another reconciler writes the object \
             again; the note names that reconciler's manager and identity";
        /// `managementPolicy: Observe`: the object on the server is read and reported, never
        /// written.
        Observed: Normal => entries::OBSERVED,
            "the resource enters `Observed`, or what the server holds changes while observed; the \
             note names the revision, who wrote it and the fields that differ";
        /// The server holds the object already, written by somebody else: held until a person
        /// adopts it (`nauthera.io/adopt`).
        AdoptionRequired: Warning => entries::ADOPTION_REQUIRED,
            "the resource enters `AdoptionRequired`; the note names who wrote the object, its \
             revision and the command that adopts it";
        /// A ClientPolicy the API server would not enforce as generated (a namespace selector it
        /// refuses, a check over its CEL cost limit): the reconciler refuses it, and it enforces
        /// nothing until fixed. A reason of ClientPolicies, not of the resources they cover.
        PolicyRefused: Warning => entries::POLICY_REFUSED,
            "a ClientPolicy enters `PolicyRefused` (recorded on the ClientPolicy, in the \
             `default` namespace), or is refused for another reason; the note names the cause, \
             the field and the limit";
    }
    events_only {
        Applied: Normal, "a new generation of a registered manifest was written to the server";
        SecretDelivered: Normal,
            "a minted client secret was written into its Secret after its write (a first \
             secret delivered with the write is told in that write's event)";
        SecretRotated: Warning,
            "a new client secret replaced one workloads held (its Secret deleted or emptied, \
             `spec.secret.secretName` changed, a rotation asked for with `nauthera.io/rotate`, \
             or one due on `spec.secret.rotation`); the note names the Secret, why (for a \
             request: who asked and when), the workloads that read it and the command that \
             restarts each";
        SecretReshaped: Normal,
            "the Secret of a generated client secret was rewritten in the shape \
             `spec.secret.template` declares now (keys, files, type, labels, annotations) with \
             the client secret it held: nothing was minted; the note names the Secret";
        WorkloadsRestarted: Normal,
            "with `spec.secret.restart: Rollout`, the workloads that read a Secret holding a new \
             client secret were restarted the way `kubectl rollout restart` does, once for the \
             delivery; the note names them (`status.lastWorkloadRestart` too)";
        WorkloadsNotRestarted: Warning,
            "with `spec.secret.restart: Rollout`, workloads that read a Secret holding a new \
             client secret were not restarted: the reconciler may not patch them (the \
             workload-restart permission is not installed), a Deployment's rollout is paused, or \
             the patch failed; the note names each with why and what to do";
        SecretRemoved: Normal,
            "a Secret holding a generated client secret the server no longer accepts was \
             removed (the manifest names another Secret, or generates none)";
        DriftSuperseded: Warning,
            "a new generation was written over a drift, discarding the changes made on the \
             server that it does not declare; the note names those fields (`status.lastDrift` \
             keeps who made the change and what it changed)";
        DriftAdopted: Normal,
            "a new generation declares what a drift changed on the server: those changes are \
             kept and adopted; the note names the fields and who made the change";
        SecretChanged: Normal,
            "the value in the Secret a manifest references (`spec.secret.secretRef`, an \
             IdentityProvider's `secretRef`) changed and was sent to the server; the note names \
             the Secret and key, never the value (a change of its labels or annotations alone \
             sends nothing)";
        ClientIdChanged: Warning,
            "a restore created a client the server no longer had, and the server gave it a new \
             client id; the note names both ids: every application configured with the old one \
             must be given the new one";
        Adopted: Normal,
            "an object somebody else wrote was taken under management, at the revision \
             `nauthera.io/adopt` named or `managementPolicy: Observe` showed; the note names whom \
             it was adopted from, the revision, whether anything was written and what became of \
             a client secret";
        TakenOver: Normal,
            "the object was taken over from the manager `nauthera.io/take-over-from` named; \
             the note names it and the revision written over";
    }
}

#[cfg(test)]
mod tests {
    /// A new reason is one row of the table and its catalog entry: the enum, its wire string,
    /// its event, the event's type and text follow, in a table of its own here.
    mod throwaway {
        use crate::catalog::EventType;
        use crate::catalog::words::reasons_and_events;

        pub struct ReasonEntry(pub &'static str);
        static FIRST: ReasonEntry = ReasonEntry("first");
        static FRESH: ReasonEntry = ReasonEntry("fresh");

        reasons_and_events! {
            reasons {
                First: Normal => FIRST, "the resource enters `First`";
                /// A reason added by one row.
                Fresh: Warning => FRESH, "the resource enters `Fresh`";
            }
            events_only {
                Noted: Normal, "something was noted";
            }
        }
    }

    #[test]
    fn a_reason_added_by_one_row_has_its_event_and_entry() {
        use throwaway::{EventReason, Reason};
        assert_eq!(Reason::ALL, [Reason::First, Reason::Fresh]);
        assert_eq!(Reason::Fresh.as_str(), "Fresh");
        assert_eq!(Reason::Fresh.entry().0, "fresh");
        assert_eq!(Reason::Fresh.event(), EventReason::Fresh);
        assert_eq!(
            EventReason::ALL,
            [EventReason::Noted, EventReason::First, EventReason::Fresh]
        );
        assert_eq!(
            EventReason::Fresh.event_type(),
            crate::catalog::EventType::Warning
        );
        assert_eq!(
            EventReason::Fresh.recorded_when(),
            "the resource enters `Fresh`"
        );
        assert_eq!(EventReason::Noted.to_string(), "Noted");
    }
}
