//! The model the reconciler, the kubectl plugin and the test harness agree on: the resource types
//! (and their CRDs), the reason catalog (and its runbooks), the table of kinds, the branding
//! encoder, policies, the grant model and the topology. It knows no gRPC and no TLS: the
//! AdminService client and the conversions into its messages are `nauthera-client`'s, so the
//! plugin, which never calls the server, builds without them.

pub mod access;
pub mod branding;
pub mod catalog;
pub mod control_plane;
pub mod duration;
pub mod generate;
pub mod grants;
pub mod guard;
pub mod kinds;
pub mod kube_names;
pub mod policy;
pub mod re2;
pub mod resources;
pub mod secret_render;
pub mod topology;
pub mod workloads;

/// The API group of every resource.
pub const GROUP: &str = "nauthera.io";
/// The API version of every resource.
pub const VERSION: &str = "v1alpha1";
/// The annotation that asks the reconciler to write the declared state over a drifted object.
pub const RESTORE_ANNOTATION: &str = "nauthera.io/restore";
/// Every annotation and label of the project starts with this.
pub const ANNOTATION_PREFIX: &str = "nauthera.io/";
/// Set beside the restore annotation to tell one restore request from another: the reconciler
/// names it in `status.lastRestore.request` once the request is carried out.
pub const RESTORE_REQUEST_ANNOTATION: &str = "nauthera.io/restore-request";
/// Adopts an object the server already holds that somebody else wrote: its value is the revision
/// the person saw (as `status.observed.revision` shows it), and the reconciler writes the declared
/// state over exactly that revision, never over a later one. Left in place once carried out
/// (`status.lastAdoption` answers it), so that a manifest in Git may carry it.
pub const ADOPT_ANNOTATION: &str = "nauthera.io/adopt";
/// Beside `ADOPT_ANNOTATION`: `Keep` keeps the secret the server holds for the object (the
/// applications that use it keep working; a generated secret is delivered only by a rotation),
/// `Replace` (the default) mints a generated secret anew and delivers it, or sends the team's.
pub const ADOPT_SECRET_ANNOTATION: &str = "nauthera.io/adopt-secret";
/// Asks the reconciler to rotate a generated client secret now; its value is the request (a
/// nonce), which the reconciler names in `status.lastRotation.request` once carried out, and
/// removes.
pub const ROTATE_ANNOTATION: &str = "nauthera.io/rotate";
/// On a delivered Secret: the rotation request (the `nauthera.io/rotate` value) whose secret it
/// holds. Written with the value itself, so that a request whose answer or clean-up was lost is
/// seen as done and never minted twice.
pub const ROTATION_REQUEST_ANNOTATION: &str = "nauthera.io/rotation-request";
/// On a delivered Secret of a templated shape: the key that holds the client secret (without
/// it, `clientSecret`).
pub const CLIENT_SECRET_KEY_ANNOTATION: &str = "nauthera.io/client-secret-key";
/// On a delivered Secret of a templated shape: the digest of `spec.secret.template` it was
/// written from, so that a changed template is seen without reading the Secret's data.
pub const SECRET_SHAPE_ANNOTATION: &str = "nauthera.io/secret-shape";
/// On a delivered Secret of a templated shape: the labels and annotations the template set
/// (JSON), so that those it no longer declares are removed and those others set are kept.
pub const SECRET_METADATA_ANNOTATION: &str = "nauthera.io/secret-template-metadata";
/// The pod-template annotation `kubectl rollout restart` sets (to the time of the restart): a
/// new value makes the workload's controller roll out new pods.
pub const RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";
/// The pod-template annotation the reconciler sets beside `RESTARTED_AT_ANNOTATION` when it
/// restarts a workload for a new client secret (`spec.secret.restart: Rollout`): the delivery it
/// restarted for (`SECRET@RESOURCEVERSION`), so that one delivery restarts a workload once.
pub const RESTARTED_FOR_ANNOTATION: &str = "nauthera.io/restarted-for";
/// Client names nauthera-server keeps for itself; it refuses a client of such a name
/// (`RESERVED_NAME`), in any case.
pub const RESERVED_CLIENT_NAMES: [&str; 6] = [
    "admin",
    "nauthera",
    "dashboard",
    "system",
    "root",
    "internal",
];

/// Whether nauthera-server keeps this client name for itself.
pub fn is_reserved_client_name(name: &str) -> bool {
    RESERVED_CLIENT_NAMES.contains(&name.to_ascii_lowercase().as_str())
}

/// The finalizer the reconciler puts on every resource it registers.
pub const FINALIZER: &str = "nauthera.io/finalizer";
