//! Types and schema fragments more than one kind shares.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An `https://` URL without query or fragment, the form of every issuer URL. No whitespace as
/// the API server reads `\s` (Go's RE2: `[\t\n\f\r ]`, ASCII only), written out so that the
/// pattern means the same to every reader: Rust's `\s` would also refuse `\v` and Unicode spaces
/// the API server admits.
pub(crate) const ISSUER_PATTERN: &str = r"^https://[^\t\n\f\r /?#]+(/[^\t\n\f\r ?#]*)?$";

/// A redirect URI: `https://`, or `http://` on a loopback address for native applications (the
/// rule the server applies, checked here so that a typo is refused at `kubectl apply`). Printable
/// ASCII without `#`, as RFC 3986 has it: no control characters or whitespace, and a host with
/// letters beyond ASCII in its punycode form (`xn--...`), so that no look-alike letter (a
/// Cyrillic `а` for a Latin `a`) or bidirectional override hides in it. The classes are
/// `[^\s/?#]` and `[^\s#]` of printable ASCII (`\x21`-`\x7e`).
pub(crate) const REDIRECT_URI_PATTERN: &str = r"^(https://[\x21\x22\x24-\x2e\x30-\x3e\x40-\x7e]+[\x21\x22\x24-\x7e]*|http://(127\.0\.0\.1|\[::1\]|localhost)(:[0-9]{1,5})?([/?][\x21\x22\x24-\x7e]*)?)$";

/// A name shown to people (a display name): no control characters (C0, DEL, C1), which a
/// terminal or a page acts on, and no bidirectional formatting characters (U+061C, U+200E,
/// U+200F, U+202A-U+202E, U+2066-U+2069), which make a name read otherwise than it is written.
pub(crate) const DISPLAY_NAME_PATTERN: &str =
    r"^[^\x00-\x1f\x7f-\x9f\x{61c}\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}]*$";

/// An OAuth scope token (RFC 6749, section 3.3): printable ASCII except space, `"` and `\`.
pub(crate) const SCOPE_PATTERN: &str = r#"^[!#-\[\]-~]+$"#;

/// A Kubernetes object name (DNS subdomain).
pub(crate) const OBJECT_NAME_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A key of a Secret's data.
pub(crate) const SECRET_KEY_PATTERN: &str = r"^[-._a-zA-Z0-9]+$";

/// What deleting the manifest does to the object on the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete the object on the server, but only when the server still holds the revision the
    /// reconciler wrote (a drifted object is left in place and the deletion reports it).
    #[default]
    Delete,
    /// Leave the object registered on the server.
    Orphan,
}

impl DeletionPolicy {
    /// The default of organizations (serde needs a function).
    pub(crate) fn orphan() -> Self {
        Self::Orphan
    }
}

/// Whether the reconciler manages the object on the server or only looks at it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ManagementPolicy {
    /// Write the declared state, deliver generated secrets, delete as `deletionPolicy` says.
    #[default]
    Manage,
    /// Never write to the server (no apply, no delete, no secret minted): read the object this
    /// manifest names and report in `status.observed` what the server holds and where it differs
    /// from the manifest. Setting `Manage` (or removing the field) hands the object to the
    /// reconciler from the revision the status showed.
    Observe,
}

impl ManagementPolicy {
    /// Whether the reconciler only looks at the object.
    pub fn observes(self) -> bool {
        self == ManagementPolicy::Observe
    }

    /// For serde's `skip_serializing_if`: a manifest that manages says nothing about it.
    pub(crate) fn is_manage(policy: &ManagementPolicy) -> bool {
        *policy == ManagementPolicy::Manage
    }
}

/// A reference to an object of another kind in the same namespace, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalRef {
    /// The object's name.
    #[schemars(length(min = 1, max = 253), regex(pattern = OBJECT_NAME_PATTERN))]
    pub name: String,
}

/// A key of a Secret in the resource's namespace that the team holds (for example one a
/// SealedSecret produces). The reconciler reads it and never writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253), regex(pattern = OBJECT_NAME_PATTERN))]
    pub name: String,
    /// The key in the Secret's data that holds the secret value.
    #[serde(default = "SecretKeyRef::default_key")]
    #[schemars(length(min = 1, max = 253), regex(pattern = SECRET_KEY_PATTERN))]
    pub key: String,
}

impl SecretKeyRef {
    /// The key read when the manifest names none.
    pub const DEFAULT_KEY: &str = "clientSecret";

    fn default_key() -> String {
        Self::DEFAULT_KEY.to_owned()
    }
}
