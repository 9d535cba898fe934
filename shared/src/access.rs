//! What the reconciler needs of the Kubernetes API on Secrets. The plugin's access check and the
//! test of the RBAC under `deploy/` read these, so the three cannot drift apart.

/// The verbs on Secrets the reconciler uses to deliver a generated client secret: it reads the
/// Secret, creates it, and patches the one it owns.
pub const GENERATED_SECRET_VERBS: [&str; 5] = ["get", "list", "watch", "create", "patch"];

/// The verbs on Secrets the reconciler uses to read a Secret named by `spec.secret.secretRef`.
pub const REFERENCED_SECRET_VERBS: [&str; 3] = ["get", "list", "watch"];
