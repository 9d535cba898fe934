//! Which step comes next for a resource, from what is known about it.

use std::time::Duration;

use jiff::Timestamp;
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::catalog::{Phase, REFUSAL_RESEND_AFTER, Reason};
use nauthera_shared::resources::{
    AdoptSecret, AdoptedSecret, DeletionPolicy, Drift, ManagedElsewhere, Planned, ResourceStatus,
    ServerObject,
};

use super::{
    AdoptRefusal, AdoptRequest, MintCheck, PolicyGate, RotationRequest, ScheduledRotation,
    mint_check,
};

/// How the manifest wants the client secret made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretMode {
    /// A public client, or one that authenticates with `private_key_jwt`.
    None,
    /// The server generates it; the reconciler delivers it into the Secret of this name.
    Generate { secret_name: String },
    /// The team holds it in a Secret the reconciler reads and never writes.
    Provided,
}

impl SecretMode {
    /// The Secret a generated secret goes into, if the manifest generates one.
    pub fn generated_into(&self) -> Option<&str> {
        match self {
            SecretMode::Generate { secret_name } => Some(secret_name),
            _ => None,
        }
    }
}

/// The Secret a generated secret was last delivered into (`status.secretRef`), when the
/// manifest no longer generates into it: renamed, or no generated secret any more.
pub fn stale_secret<'a>(status: Option<&'a ResourceStatus>, mode: &SecretMode) -> Option<&'a str> {
    let delivered = status?.secret_ref.as_ref()?.name.as_str();
    (mode.generated_into() != Some(delivered)).then_some(delivered)
}

/// What the Secret a generated secret goes into holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretState {
    /// Not read (the manifest does not generate a secret).
    NotApplicable,
    /// Not read yet: read only when the next step depends on it.
    Unknown,
    /// No Secret of that name.
    Absent,
    /// A Secret this resource owns; `has_value` when it holds the client secret.
    Owned { has_value: bool },
    /// A Secret this resource owns, holding the client secret in another shape than the
    /// manifest declares (`spec.secret.template` changed): rewritten with that secret.
    OtherShape,
    /// A Secret someone else owns (or nobody), which the reconciler never writes over.
    Foreign { owner: Option<String> },
    /// A Secret released from an earlier manifest of this name (deleted with `Orphan`), owned by
    /// nobody, holding the client secret of `client_id`: taken back when that is the client in
    /// force.
    Released { client_id: String },
    /// The reconciler may not read it (its role lost `get` on secrets): whether the client
    /// secret is delivered cannot be told.
    Forbidden,
}

/// Why a write mints a new generated secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// The Secret it was delivered into was deleted.
    Deleted,
    /// The Secret it was delivered into lost its value (the key removed or emptied).
    Emptied,
    /// The manifest names another Secret (`spec.secret.secretName` changed): the one it was
    /// delivered into, `from`, holds a value the server no longer accepts once this is written.
    Renamed { from: String },
    /// The secret minted before never reached its Secret (a restart, or an answer lost on its
    /// way back): nobody holds it, so nothing needs a restart.
    NeverDelivered,
    /// The object was taken over from another reconciler, whose cluster holds the secret in
    /// force: this resource gets its own, and the other's workloads lose theirs.
    TakenOver { from_manager: String },
    /// An object somebody else wrote was adopted with `nauthera.io/adopt-secret: Replace`: the
    /// secret the server held is replaced by one this resource delivers.
    Adopted,
    /// Somebody asked for it (`nauthera.io/rotate`): who, as the managedFields record it, and
    /// when.
    Requested {
        by: Option<String>,
        at: Option<Timestamp>,
    },
    /// The secret in force grew older than `spec.secret.rotation.every` (as declared).
    Scheduled { every: String },
}

impl Rotation {
    /// Whether workloads held the secret this one replaces.
    pub fn replaces_a_delivered_secret(&self) -> bool {
        !matches!(self, Rotation::NeverDelivered | Rotation::Adopted)
    }
}

/// What the server's change-hint listing says about the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerView {
    /// No listing yet, or the listing does not cover the object's organization.
    Unknown,
    /// The server holds this revision.
    Holds { revision: String },
    /// The listing is complete and the object is not in it.
    Absent,
    /// A kind the server does not list, and no change or read told of it since the start: read
    /// it once to notice what changed while the reconciler was away.
    Unchecked,
}

impl ServerView {
    /// The server holds a revision other than `written`, the one this resource recorded: its
    /// own write whose answer was lost, or somebody's change.
    pub fn holds_other_than(&self, written: Option<&str>) -> bool {
        matches!(self, ServerView::Holds { revision } if Some(revision.as_str()) != written)
    }
}

/// A manifest: its kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Manifest {
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
}

impl Manifest {
    pub fn new(kind: ObjectKind, namespace: &str, name: &str) -> Manifest {
        Manifest {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// `Kind namespace/name`, as messages name a manifest.
    pub fn describe(&self) -> String {
        format!("{} {}/{}", kind_name(self.kind), self.namespace, self.name)
    }
}

/// The manifest kind's name.
fn kind_name(kind: ObjectKind) -> &'static str {
    nauthera_client::wire::kind_of(kind).map_or("object", |kind| kind.as_str())
}

/// A manifest a resource names that does not exist (a Branding its `spec.brandingRef` names),
/// and how the last one of that name went, when this reconciler saw it go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    pub manifest: Manifest,
    /// The deletion outcome of the manifest that declared it (`Deleted`, `Orphaned`,
    /// `DeletionSkippedDrifted`); `None` when it never existed, or went unseen.
    pub went: Option<Reason>,
}

/// Where a resource stands with its prerequisites.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// A prerequisite declared by a manifest that is not registered yet: wait for it.
    pub waiting_for: Option<Manifest>,
    /// A manifest the resource names that does not exist: wait for it to be applied (and say
    /// so at once when the resource is registered already).
    pub missing: Option<Missing>,
    /// Since when this generation waits (filled in by the reconcile, which remembers it).
    pub waiting_since: Option<Timestamp>,
    /// The latest time one of its prerequisites' manifests registered: a refusal older than that
    /// (a missing reference, say) is sent again.
    pub ready_at: Option<Timestamp>,
}

/// Everything the next step depends on.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The reconciler's finalizer is on the resource.
    pub has_finalizer: bool,
    /// This reconciler already finished the resource's deletion and removed its finalizer: a
    /// resource still shown deleting with the finalizer is a watch cache that has not caught up.
    pub deletion_finished: bool,
    /// `nauthera.io/restore=true`.
    pub restore_requested: bool,
    /// `nauthera.io/rotate`: a rotation of the generated secret asked for, and by whom.
    pub rotation_request: Option<RotationRequest>,
    /// The rotation request whose secret the delivered Secret holds (its
    /// `nauthera.io/rotation-request`), read with the Secret.
    pub delivered_request: Option<String>,
    /// When `spec.secret.rotation` rotates the secret in force next; `None` without a schedule
    /// (or before the secret was first set).
    pub scheduled: Option<ScheduledRotation>,
    /// `nauthera.io/take-over-from`: the manager a person hands the object over from.
    pub take_over_from: Option<String>,
    /// `spec.managementPolicy: Observe`: the object is read, never written.
    pub observes: bool,
    /// `nauthera.io/adopt`: the revision of an object somebody else wrote that a person adopts.
    pub adopt_request: Option<AdoptRequest>,
    pub deletion_policy: DeletionPolicy,
    pub status: Option<&'a ResourceStatus>,
    pub secret_mode: SecretMode,
    /// A minted secret is held in memory, not yet delivered.
    pub secret_pending: bool,
    /// The delivered Secrets this resource owns, as their watch shows them. One other than the
    /// Secret the manifest names and the one the status records was written by a term that
    /// ended (or a process that stopped) before its status was written: it holds a dead value.
    pub unrecorded_secrets: Vec<String>,
    pub secret_state: SecretState,
    /// The value in the Secret named by `spec.secret.secretRef` differs from the one last sent.
    pub provided_secret_changed: bool,
    pub server: ServerView,
    /// A retried failure asked to wait until then (kept in memory, with the backoff).
    pub retry_not_before: Option<Timestamp>,
    /// Where the resource stands with the manifests it depends on.
    pub prerequisites: Standing,
    /// Where the declared generation stands with the ClientPolicies that cover it. A generation
    /// in force is judged too (a policy that came later says so), but only on its rules, not on
    /// approvals, and it keeps working.
    pub policy: PolicyGate,
    pub now: Timestamp,
}

/// The next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Put the finalizer on before anything is written to the server.
    AddFinalizer,
    /// An observed resource holds nothing on the server: its finalizer (from `Manage`) goes.
    RemoveFinalizer,
    /// Read the object an observed manifest names, and say what the server holds.
    Observe,
    /// Take the object somebody else wrote at this revision: nothing written when the manifest
    /// declares what it holds and no secret is sent, else one write over exactly it.
    /// `handover`: from `managementPolicy: Observe` (a later change is reported, not refused).
    Adopt {
        revision: String,
        secret: AdoptSecret,
        handover: bool,
    },
    /// An adoption asked for that is not carried out: say why, and write nothing.
    RefuseAdoption { refusal: AdoptRefusal },
    /// Write the declared state. `if_revision`: the revision the server must hold (`None`: it
    /// must hold nothing). `restore`: this writes over a drift on request.
    Apply {
        if_revision: Option<String>,
        /// Mint a new generated secret, and why.
        rotate: Option<Rotation>,
        restore: bool,
    },
    /// Write the minted secret held in memory into its Secret.
    DeliverSecret,
    /// Rewrite the Secret in the shape the manifest declares, with the client secret it holds:
    /// nothing is minted.
    ReshapeSecret,
    /// The next step depends on the Secret a generated secret goes into: read it, then decide
    /// again.
    ReadSecret,
    /// The listing disagrees with the revision last written: read the object to confirm and
    /// describe the drift (or find the listing was stale).
    CheckDrift,
    /// A restore was asked for but nothing drifted: remove the annotation.
    ClearRestoreAnnotation,
    /// A rotation was asked for that is carried out already (its secret is delivered) or cannot
    /// be (the secret is not generated): answer it and remove the annotation.
    ClearRotateAnnotation,
    /// The Secret a generated secret goes into may not be read: say so.
    ReportSecretForbidden,
    /// `spec.secret.secretName` names a Secret this resource does not own: nothing is minted
    /// (the one in force stays in the Secret it was delivered into) until the name is free.
    ReportSecretNameTaken { owner: Option<String> },
    /// A Secret this resource delivered a generated secret into, which the manifest no longer
    /// names: it holds a value the server no longer accepts, so it is removed.
    RemoveStaleSecret { name: String },
    /// Delete the object on the server, only if it still holds this revision.
    Delete { if_revision: String },
    /// Leave the object on the server and let the manifest go (`Orphan`, or nothing registered).
    Release { reason: Reason },
    /// A manifest this one depends on is not registered yet: say so, and write nothing.
    AwaitPrerequisite { manifest: Manifest },
    /// A manifest this one names does not exist: say so, and write nothing.
    AwaitMissing { missing: Missing },
    /// A ClientPolicy holds the declared generation back: say so, and write nothing.
    HoldByPolicy,
    /// Nothing recorded, and the server holds an object of this name (or has not been asked):
    /// read it before creating anything, so that an earlier write is adopted rather than
    /// refused by the server.
    LookBeforeCreate,
    /// A manifest with `deletionPolicy: Delete` and no revision recorded is deleted: read the
    /// object before letting go, so that an own write whose answer was lost is deleted too.
    LookBeforeRelease,
    /// The Secret a re-declared orphan's secret was released into holds the client secret in
    /// force: own it again.
    ReclaimSecret { name: String },
    /// Write the declared state over another reconciler's revision, on request.
    TakeOver {
        from: Box<ManagedElsewhere>,
        rotate: Option<Rotation>,
    },
    /// The take-over annotation names another manager than the one that wrote last.
    RefuseTakeOver { named: String },
    /// The manifest of an object another reconciler manages is deleted: let it go, untouched.
    LetGo,
    /// Nothing to do now; look again after the delay, if any.
    Wait { after: Option<Duration> },
}

impl Step {
    /// The step's name, for log lines.
    pub fn label(&self) -> &'static str {
        match self {
            Step::AddFinalizer => "add_finalizer",
            Step::RemoveFinalizer => "remove_finalizer",
            Step::Observe => "observe",
            Step::Adopt { .. } => "adopt",
            Step::RefuseAdoption { .. } => "refuse_adoption",
            Step::Apply { restore: true, .. } => "restore",
            Step::Apply { .. } => "apply",
            Step::DeliverSecret => "deliver_secret",
            Step::ReshapeSecret => "reshape_secret",
            Step::ReadSecret => "read_secret",
            Step::CheckDrift => "check_drift",
            Step::ClearRestoreAnnotation => "clear_restore_annotation",
            Step::ClearRotateAnnotation => "clear_rotate_annotation",
            Step::ReportSecretForbidden => "report_secret_forbidden",
            Step::ReportSecretNameTaken { .. } => "report_secret_name_taken",
            Step::RemoveStaleSecret { .. } => "remove_stale_secret",
            Step::Delete { .. } => "delete",
            Step::Release { .. } => "release",
            Step::AwaitPrerequisite { .. } => "await_prerequisite",
            Step::AwaitMissing { .. } => "await_missing",
            Step::LookBeforeCreate => "look_before_create",
            Step::LookBeforeRelease => "look_before_release",
            Step::ReclaimSecret { .. } => "reclaim_secret",
            Step::HoldByPolicy => "hold_by_policy",
            Step::TakeOver { .. } => "take_over",
            Step::RefuseTakeOver { .. } => "refuse_take_over",
            Step::LetGo => "let_go",
            Step::Wait { .. } => "wait",
        }
    }

    /// Whether carrying the step out writes to Kubernetes or the server (beyond the status of
    /// its verdict, which is recorded behind the write gate anyway): such a step passes the write
    /// gate first.
    pub fn writes(&self) -> bool {
        match self {
            Step::AddFinalizer
            | Step::RemoveFinalizer
            | Step::Adopt { .. }
            | Step::Apply { .. }
            | Step::DeliverSecret
            | Step::ReshapeSecret
            | Step::ClearRestoreAnnotation
            | Step::ClearRotateAnnotation
            | Step::RemoveStaleSecret { .. }
            | Step::Delete { .. }
            | Step::Release { .. }
            | Step::LookBeforeCreate
            | Step::LookBeforeRelease
            | Step::ReclaimSecret { .. }
            | Step::TakeOver { .. }
            | Step::LetGo => true,
            Step::ReadSecret
            | Step::Observe
            | Step::RefuseAdoption { .. }
            | Step::CheckDrift
            | Step::ReportSecretForbidden
            | Step::ReportSecretNameTaken { .. }
            | Step::AwaitPrerequisite { .. }
            | Step::AwaitMissing { .. }
            | Step::HoldByPolicy
            | Step::RefuseTakeOver { .. }
            | Step::Wait { .. } => false,
        }
    }
}

/// How long a write waits quietly for a manifest it depends on before its status says so: when
/// everything is applied together, the Organization or Branding usually registers within this
/// time, and a `Pending` written and overwritten at once would only be noise.
pub const QUIET_WAIT: Duration = Duration::from_secs(3);

/// The next step for a resource. A write of a generation not in force is held by a policy
/// that does not allow it, and waits for the manifests it depends on.
pub fn next_step(observed: &Observed<'_>) -> Step {
    let in_force = observed
        .status
        .filter(|s| s.revision.is_some())
        .and_then(|s| s.generation_in_force)
        == Some(observed.generation);
    let prerequisites = &observed.prerequisites;
    let waits = prerequisites.waiting_for.is_some() || prerequisites.missing.is_some();
    match step_ignoring_prerequisites(observed) {
        // A look that adopts at once what `nauthera.io/adopt` names may mint: the Secret it
        // goes into is read first.
        Step::LookBeforeCreate if requested_mint_check(observed) == MintCheck::ReadFirst => {
            Step::ReadSecret
        }
        Step::Apply { .. } | Step::LookBeforeCreate | Step::Adopt { .. }
            if !in_force && observed.policy.holds() =>
        {
            Step::HoldByPolicy
        }
        Step::TakeOver { .. } if observed.policy.holds() => Step::HoldByPolicy,
        // Registered, and what it names went away: look at the server and say so at once.
        Step::Wait { after: None }
            if in_force
                && !observed.deleting
                && !observed.observes
                && prerequisites.missing.is_some()
                && observed
                    .status
                    .is_some_and(|s| s.drift.is_none() && s.managed_elsewhere.is_none()) =>
        {
            Step::CheckDrift
        }
        Step::Apply { .. } | Step::LookBeforeCreate | Step::Adopt { .. } if waits => {
            let quiet_left = observed
                .prerequisites
                .waiting_since
                .and_then(|since| {
                    let waited = Duration::try_from(since.duration_until(observed.now)).ok()?;
                    QUIET_WAIT.checked_sub(waited)
                })
                .filter(|left| !left.is_zero());
            match (
                quiet_left,
                &prerequisites.waiting_for,
                &prerequisites.missing,
            ) {
                (Some(left), _, _) => Step::Wait { after: Some(left) },
                (None, Some(manifest), _) => Step::AwaitPrerequisite {
                    manifest: manifest.clone(),
                },
                (None, None, Some(missing)) => Step::AwaitMissing {
                    missing: missing.clone(),
                },
                (None, None, None) => Step::Wait { after: None },
            }
        }
        step => step,
    }
}

fn step_ignoring_prerequisites(observed: &Observed<'_>) -> Step {
    let status = observed.status;
    let written = status.and_then(|s| s.revision.clone());
    let drift = status.and_then(|s| s.drift.as_deref());

    if observed.observes {
        return observe_step(observed);
    }
    if observed.deleting {
        return deletion_step(observed, written, drift);
    }
    if !observed.has_finalizer {
        return Step::AddFinalizer;
    }
    if let Some(wait) = still_backing_off(observed) {
        return wait;
    }

    let generation_seen = status.and_then(|s| s.observed_generation) == Some(observed.generation);
    if let Some(elsewhere) = status.and_then(|s| s.managed_elsewhere.as_deref()) {
        return elsewhere_step(observed, elsewhere);
    }
    if let Some(shown) = handed_over_from_observe(status) {
        return Step::Adopt {
            revision: shown.revision.clone(),
            secret: AdoptSecret::Keep,
            handover: true,
        };
    }
    if let Some(held) = held_for_adoption(status) {
        return adoption_step(observed, held, generation_seen);
    }
    if let Some(drift) = drift {
        return drift_step(observed, drift, generation_seen);
    }
    if observed.restore_requested {
        return Step::ClearRestoreAnnotation;
    }
    // A rotation that cannot be carried out, or that was (its answer recorded): answered.
    if let Some(request) = &observed.rotation_request {
        let answered = status
            .and_then(|s| s.last_rotation.as_ref())
            .is_some_and(|last| last.request.as_deref() == Some(request.request.as_str()));
        if answered || observed.secret_mode.generated_into().is_none() {
            return Step::ClearRotateAnnotation;
        }
    }
    if observed.secret_pending {
        return Step::DeliverSecret;
    }

    let in_force = written.is_some()
        && status.and_then(|s| s.generation_in_force) == Some(observed.generation);
    if in_force {
        in_force_step(observed, written)
    } else {
        not_in_force_step(observed, written, generation_seen)
    }
}

/// The manifest is being deleted: the object is deleted on the server, or left there and the
/// manifest released, as its deletion policy says and what the server holds allows.
fn deletion_step(observed: &Observed<'_>, written: Option<String>, drift: Option<&Drift>) -> Step {
    let status = observed.status;
    if !observed.has_finalizer || observed.deletion_finished {
        return Step::Wait { after: None };
    }
    if status.is_some_and(|s| s.managed_elsewhere.is_some()) {
        return Step::LetGo;
    }
    // Somebody else's object, never adopted: nothing of this resource's is on the server.
    if held_for_adoption(status).is_some() {
        return Step::Release {
            reason: Reason::Deleted,
        };
    }
    if let Some(wait) = still_backing_off(observed) {
        return wait;
    }
    // The server holds a revision this resource did not record (its own write whose answer
    // was lost, or somebody's change): look before deleting or releasing anything. An own
    // write is adopted and then deleted; anyone else's is reported and left in place.
    let unrecorded = observed.server.holds_other_than(written.as_deref());
    if observed.deletion_policy == DeletionPolicy::Delete && drift.is_none() {
        match (&written, &observed.server) {
            // Nothing recorded is not nothing written (a status write can be lost): unless the
            // listing says the server holds nothing, read before letting go.
            (None, ServerView::Absent) => {}
            (None, _) => return Step::LookBeforeRelease,
            (Some(_), _) if unrecorded => return Step::CheckDrift,
            (Some(_), _) => {}
        }
    }
    match (observed.deletion_policy, written) {
        (DeletionPolicy::Orphan, _) => Step::Release {
            reason: Reason::Orphaned,
        },
        // The server holds nothing of it (the listing says so, or a drift check found it
        // removed): nothing to delete.
        (DeletionPolicy::Delete, None) => Step::Release {
            reason: Reason::Deleted,
        },
        (DeletionPolicy::Delete, Some(_)) if drift.is_some() => Step::Release {
            reason: Reason::DeletionSkippedDrifted,
        },
        (DeletionPolicy::Delete, Some(revision)) => Step::Delete {
            if_revision: revision,
        },
    }
}

/// A drift is reported: restored on request, written over by a new generation, looked at again
/// when the server moved on, and otherwise left as reported.
fn drift_step(observed: &Observed<'_>, drift: &Drift, generation_seen: bool) -> Step {
    let held = (!drift.removed).then(|| drift.server_revision.clone());
    if observed.restore_requested {
        return Step::Apply {
            if_revision: held,
            rotate: None,
            restore: true,
        };
    }
    // A new generation written after the drift was reported is a person's decision about
    // the declared state: write it over what the server holds.
    if !generation_seen {
        return Step::Apply {
            if_revision: held,
            rotate: None,
            restore: false,
        };
    }
    // The server moved on since the drift was reported (undone, changed again, removed):
    // look again, so the report names what the server holds now.
    let moved = match &observed.server {
        ServerView::Holds { revision } => drift.removed || *revision != drift.server_revision,
        ServerView::Absent => !drift.removed,
        ServerView::Unknown | ServerView::Unchecked => false,
    };
    if moved {
        return Step::CheckDrift;
    }
    Step::Wait { after: None }
}

/// The declared generation is not in force: written, unless a refusal stands, the server may
/// hold an object to look at first, or the Secret a new name generates into is not free.
fn not_in_force_step(
    observed: &Observed<'_>,
    written: Option<String>,
    generation_seen: bool,
) -> Step {
    if let Some(wait) = refusal_stands(observed, generation_seen) {
        return wait;
    }
    // Nothing recorded yet, and the server may hold the object (an orphan declared again, a
    // create whose answer was lost): look first, and write nothing it would refuse.
    if written.is_none()
        && matches!(
            observed.server,
            ServerView::Holds { .. } | ServerView::Unchecked
        )
    {
        return Step::LookBeforeCreate;
    }
    // A new Secret name rotates the secret with the same write, once the name is free.
    let rotate = match (
        &observed.secret_mode,
        stale_secret(observed.status, &observed.secret_mode),
    ) {
        (SecretMode::Generate { .. }, Some(from)) => match &observed.secret_state {
            SecretState::Unknown => return Step::ReadSecret,
            SecretState::Forbidden => return Step::ReportSecretForbidden,
            SecretState::Foreign { owner } => {
                return Step::ReportSecretNameTaken {
                    owner: owner.clone(),
                };
            }
            SecretState::Released { .. } => {
                return Step::ReportSecretNameTaken { owner: None };
            }
            _ => Some(Rotation::Renamed {
                from: from.to_owned(),
            }),
        },
        _ => None,
    };
    Step::Apply {
        if_revision: written,
        rotate,
        restore: false,
    }
}

/// The declared generation is in force: a changed team secret is sent again, a generated
/// secret lost from its Secret minted again, a stale Secret removed, and the server's view
/// checked when it disagrees or the status is not settled.
fn in_force_step(observed: &Observed<'_>, written: Option<String>) -> Step {
    let status = observed.status;
    // The team changed the secret it holds: send it again.
    if observed.secret_mode == SecretMode::Provided && observed.provided_secret_changed {
        return Step::Apply {
            if_revision: written,
            rotate: None,
            restore: false,
        };
    }
    if let SecretMode::Generate { .. } = observed.secret_mode {
        match &observed.secret_state {
            SecretState::Unknown => return Step::ReadSecret,
            // Adopted keeping the secret the server held: nothing delivered until a rotation.
            SecretState::Absent if kept_undelivered(status) => {}
            SecretState::Absent | SecretState::Owned { has_value: false } => {
                return Step::Apply {
                    if_revision: written,
                    rotate: Some(rotation(observed)),
                    restore: false,
                };
            }
            SecretState::Forbidden => return Step::ReportSecretForbidden,
            SecretState::OtherShape => return Step::ReshapeSecret,
            SecretState::Released { client_id }
                if status.and_then(|s| s.client_id.as_deref()) == Some(client_id.as_str())
                    && stale_secret(observed.status, &observed.secret_mode).is_none() =>
            {
                if let SecretMode::Generate { secret_name } = &observed.secret_mode {
                    return Step::ReclaimSecret {
                        name: secret_name.clone(),
                    };
                }
            }
            SecretState::Released { .. }
                if stale_secret(observed.status, &observed.secret_mode).is_some() =>
            {
                return Step::ReportSecretNameTaken { owner: None };
            }
            SecretState::Foreign { owner }
                if stale_secret(observed.status, &observed.secret_mode).is_some() =>
            {
                return Step::ReportSecretNameTaken {
                    owner: owner.clone(),
                };
            }
            SecretState::Released { .. } => {}
            SecretState::Foreign { .. } | SecretState::Owned { has_value: true } => {}
            SecretState::NotApplicable => {}
        }
    }
    // The secret in force is where the manifest says (or the manifest no longer generates
    // one): the Secret delivered before holds a dead value.
    if let Some(name) = stale_secret(observed.status, &observed.secret_mode) {
        return Step::RemoveStaleSecret {
            name: name.to_owned(),
        };
    }
    if let Some(name) = unrecorded_secret(observed) {
        return Step::RemoveStaleSecret {
            name: name.to_owned(),
        };
    }
    // A check that failed (its read was retried) left a phase other than Registered in status
    // although the generation is in force: look again, so the status says what holds now.
    // A generation in force that a policy (made since) does not allow says so, and stays.
    let held = observed.policy.holds();
    let settled =
        status.is_some_and(|s| s.phase == Some(Phase::Registered) || (held && s.policy.is_some()));
    match &observed.server {
        server if server.holds_other_than(written.as_deref()) => Step::CheckDrift,
        ServerView::Absent | ServerView::Unchecked => Step::CheckDrift,
        _ if !settled => Step::CheckDrift,
        _ if held => Step::HoldByPolicy,
        _ => rotation_step(observed, written),
    }
}

/// A Secret of this resource's that the status never recorded, once the secret in force is
/// recorded as delivered into the Secret the manifest names: removed like a stale one.
fn unrecorded_secret<'a>(observed: &'a Observed<'_>) -> Option<&'a str> {
    let current = observed.secret_mode.generated_into()?;
    let recorded = observed
        .status
        .and_then(|s| s.secret_ref.as_ref())
        .map(|r| r.name.as_str());
    if recorded != Some(current) {
        return None;
    }
    observed
        .unrecorded_secrets
        .iter()
        .map(String::as_str)
        .find(|name| *name != current)
}

/// The generated secret in force, settled in its Secret: rotated when somebody asked for it
/// (unless the Secret holds that request's secret already: then only answered) or when the
/// schedule says so; otherwise nothing to do until the next scheduled rotation.
fn rotation_step(observed: &Observed<'_>, written: Option<String>) -> Step {
    let kept = observed.secret_state == SecretState::Absent && kept_undelivered(observed.status);
    if observed.secret_state != (SecretState::Owned { has_value: true }) && !kept {
        return Step::Wait { after: None };
    }
    if let Some(request) = &observed.rotation_request {
        if observed.delivered_request.as_deref() == Some(request.request.as_str()) {
            return Step::ClearRotateAnnotation;
        }
        return Step::Apply {
            if_revision: written,
            rotate: Some(Rotation::Requested {
                by: request.requested_by.clone(),
                at: request.requested_at,
            }),
            restore: false,
        };
    }
    let Some(scheduled) = &observed.scheduled else {
        return Step::Wait { after: None };
    };
    match scheduled.planned {
        Planned::Due => Step::Apply {
            if_revision: written,
            rotate: Some(Rotation::Scheduled {
                every: scheduled.every.clone(),
            }),
            restore: false,
        },
        Planned::At(at) => Step::Wait {
            after: Duration::try_from(observed.now.duration_until(at))
                .ok()
                .map(|left| left.min(LONGEST_WAIT)),
        },
    }
}

/// The generated secret the server held was kept by an adoption and none was delivered since:
/// no Secret holds it, and that is no loss to make good.
fn kept_undelivered(status: Option<&ResourceStatus>) -> bool {
    status.is_some_and(|s| {
        s.secret_ref.is_none()
            && s.last_adoption
                .as_ref()
                .is_some_and(|adoption| adoption.secret == AdoptedSecret::Kept)
    })
}

/// `managementPolicy: Observe`: nothing is written to the server and no finalizer holds the
/// manifest; the object is read when nothing was read yet, the manifest changed, or the
/// server's changes say it moved from what the status shows.
fn observe_step(observed: &Observed<'_>) -> Step {
    if observed.has_finalizer && !observed.deletion_finished {
        return Step::RemoveFinalizer;
    }
    if observed.deleting {
        return Step::Wait { after: None };
    }
    if let Some(wait) = still_backing_off(observed) {
        return wait;
    }
    let status = observed.status;
    let settled = status.is_some_and(|s| {
        s.reason == Some(Reason::Observed) && s.observed_generation == Some(observed.generation)
    });
    let Some(shown) = status
        .and_then(|s| s.observed.as_deref())
        .filter(|_| settled)
    else {
        return Step::Observe;
    };
    if moved_from(&observed.server, shown) {
        Step::Observe
    } else {
        Step::Wait { after: None }
    }
}

/// Whether the server's changes say the object moved from what the status shows.
fn moved_from(server: &ServerView, shown: &ServerObject) -> bool {
    match server {
        ServerView::Holds { revision } => shown.absent || *revision != shown.revision,
        ServerView::Absent => !shown.absent,
        ServerView::Unchecked => true,
        ServerView::Unknown => false,
    }
}

/// The object the status showed under `managementPolicy: Observe`, now that the manifest says
/// `Manage`: adopted at that revision.
fn handed_over_from_observe(status: Option<&ResourceStatus>) -> Option<&ServerObject> {
    let status = status?;
    if status.reason != Some(Reason::Observed) || status.revision.is_some() {
        return None;
    }
    status.observed.as_deref().filter(|shown| !shown.absent)
}

/// The object somebody else wrote that this resource waits for a person to adopt.
fn held_for_adoption(status: Option<&ResourceStatus>) -> Option<&ServerObject> {
    let status = status?;
    if status.reason != Some(Reason::AdoptionRequired) || status.revision.is_some() {
        return None;
    }
    status.observed.as_deref().filter(|shown| !shown.absent)
}

/// Held for adoption: adopted when a person names the revision shown; looked at again when the
/// server moved or the manifest changed (a new generation is never written over it); created
/// when it is gone.
fn adoption_step(observed: &Observed<'_>, held: &ServerObject, generation_seen: bool) -> Step {
    match &observed.server {
        ServerView::Absent => {
            return Step::Apply {
                if_revision: None,
                rotate: None,
                restore: false,
            };
        }
        server if moved_from(server, held) => return Step::LookBeforeCreate,
        _ => {}
    }
    if let Some(request) = &observed.adopt_request {
        return match &request.secret {
            Err(value) => Step::RefuseAdoption {
                refusal: AdoptRefusal::SecretChoice {
                    value: value.clone(),
                },
            },
            Ok(_) if request.revision != held.revision => Step::RefuseAdoption {
                refusal: AdoptRefusal::Mismatch {
                    named: request.revision.clone(),
                },
            },
            Ok(secret) => match adoption_mint_check(observed, *secret) {
                MintCheck::ReadFirst => Step::ReadSecret,
                MintCheck::Refused(refusal) => Step::RefuseAdoption { refusal },
                MintCheck::Free => Step::Adopt {
                    revision: held.revision.clone(),
                    secret: *secret,
                    handover: false,
                },
            },
        };
    }
    if !generation_seen {
        return Step::LookBeforeCreate;
    }
    Step::Wait { after: None }
}

/// Whether an adoption with `secret` may mint into the Secret of a generated secret: only an
/// adoption that replaces a generated secret mints, and only into a Secret that can take it.
fn adoption_mint_check(observed: &Observed<'_>, secret: AdoptSecret) -> MintCheck {
    match (observed.secret_mode.generated_into(), secret) {
        (Some(secret_name), AdoptSecret::Replace) => {
            mint_check(secret_name, &observed.secret_state)
        }
        _ => MintCheck::Free,
    }
}

/// Whether the adoption `nauthera.io/adopt` asks for may mint (see [`adoption_mint_check`]).
pub fn requested_mint_check(observed: &Observed<'_>) -> MintCheck {
    match observed
        .adopt_request
        .as_ref()
        .map(|request| &request.secret)
    {
        Some(Ok(secret)) => adoption_mint_check(observed, *secret),
        _ => MintCheck::Free,
    }
}

/// A scheduled rotation further away than this is decided again then (without a call to the
/// server): a long timer gains nothing over a daily look at the cache.
const LONGEST_WAIT: Duration = Duration::from_secs(86_400);

/// The object is another reconciler's: taken over when a person asks for it from the manager
/// that wrote last, looked at again when the server moved, written when it is gone, and
/// otherwise left alone (a new generation included: writing it would undo the other's).
fn elsewhere_step(observed: &Observed<'_>, elsewhere: &ManagedElsewhere) -> Step {
    // Gone: free to be declared here (a create, which fails if someone was quicker).
    if observed.server == ServerView::Absent {
        return Step::Apply {
            if_revision: None,
            rotate: None,
            restore: false,
        };
    }
    match observed.take_over_from.as_deref() {
        Some(named) if named.trim() == elsewhere.manager => {
            return Step::TakeOver {
                from: Box::new(elsewhere.clone()),
                rotate: observed
                    .secret_mode
                    .generated_into()
                    .map(|_| Rotation::TakenOver {
                        from_manager: elsewhere.manager.clone(),
                    }),
            };
        }
        Some(named) => {
            return Step::RefuseTakeOver {
                named: named.trim().to_owned(),
            };
        }
        None => {}
    }
    match &observed.server {
        ServerView::Holds { revision } if *revision != elsewhere.revision => Step::CheckDrift,
        _ => Step::Wait { after: None },
    }
}

/// Why the Secret of a generated secret needs a new one: it was delivered (the status names
/// it) and is gone or empty now, or it never arrived.
fn rotation(observed: &Observed<'_>) -> Rotation {
    if let Some(from) = stale_secret(observed.status, &observed.secret_mode) {
        return Rotation::Renamed {
            from: from.to_owned(),
        };
    }
    let delivered = observed.status.is_some_and(|s| s.secret_ref.is_some());
    match observed.secret_state {
        _ if !delivered => Rotation::NeverDelivered,
        SecretState::Absent => Rotation::Deleted,
        _ => Rotation::Emptied,
    }
}

fn still_backing_off(observed: &Observed<'_>) -> Option<Step> {
    let until = observed.retry_not_before?;
    let left = observed.now.duration_until(until);
    let left = Duration::try_from(left).ok()?;
    (!left.is_zero()).then_some(Step::Wait { after: Some(left) })
}

/// A refusal of this generation waits for the next edit, for a manifest it depends on to
/// register, or five minutes after the attempt.
fn refusal_stands(observed: &Observed<'_>, generation_seen: bool) -> Option<Step> {
    let status = observed.status?;
    let refused = status.reason == Some(Reason::Refused) && status.phase == Some(Phase::Error);
    if !refused || !generation_seen {
        return None;
    }
    // A manifest it depends on is declared and not registered yet (its watch event came after
    // this resource's, when both were applied together): wait for it rather than stand by a
    // refusal its absence likely caused.
    if observed.prerequisites.waiting_for.is_some() {
        return None;
    }
    let attempted = status.last_attempt_time.as_ref()?.0;
    // A manifest it depends on registered since: the refusal (a missing reference) may be gone.
    // Status times are whole seconds, so one in the same second may have come after as well.
    if observed
        .prerequisites
        .ready_at
        .is_some_and(|ready| ready >= attempted)
    {
        return None;
    }
    let resend_at = attempted
        .checked_add(jiff::SignedDuration::try_from(REFUSAL_RESEND_AFTER).ok()?)
        .ok()?;
    let left = Duration::try_from(observed.now.duration_until(resend_at)).ok()?;
    (!left.is_zero()).then_some(Step::Wait { after: Some(left) })
}
