//! The catalog's entries, one per reason, grouped by what they are about. The text is markdown;
//! placeholders (`<ns>`, `<name>`, ...) stay inside code spans so the pages render them.

mod adoption;
mod apply;
mod control_plane;
mod deletion;
mod drift;
mod elsewhere;
mod policy;
mod secret;

pub(super) use adoption::{ADOPTION_REQUIRED, OBSERVED};
pub(super) use apply::{PENDING, REFUSED, REGISTERED};
pub(super) use control_plane::{CREDENTIAL_UNAVAILABLE, TRUST_ANCHOR_UNAVAILABLE, UNREACHABLE};
pub(super) use deletion::{DELETED, DELETING, DELETION_SKIPPED_DRIFTED, ORPHANED};
pub(super) use drift::{DRIFTED, RESTORED};
pub(super) use elsewhere::MANAGED_ELSEWHERE;
pub(super) use policy::{POLICY_REFUSED, POLICY_VIOLATION, WAITING_FOR_APPROVAL};
pub(super) use secret::{SECRET_REF_UNAVAILABLE, SECRET_UNDELIVERABLE};

// Commands several pages share.

/// The resource with its conditions, status and recent events.
const DESCRIBE: &str = "kubectl -n <ns> describe <kind> <name>";

/// The resource's events.
const EVENTS: &str = "kubectl -n <ns> get events --field-selector involvedObject.name=<name>";

/// The control plane as the reconciler's leader published it.
const STATUS: &str = "kubectl nauthera status";

/// One line per server call, with method, code and duration; never a secret.
const GRPC_CALL_LOGS: &str =
    "kubectl -n <reconciler-ns> logs deploy/nauthera-reconciler --since=15m | grep grpc_call";

/// The reconciler's lines about one resource, found by their structured fields as the plugin
/// finds them: each attempt with its reason, cause and detail (the server's answer).
const RESOURCE_LOGS: &str = r#"kubectl -n <reconciler-ns> logs deploy/nauthera-reconciler --since=1h | grep -iF '"kind":"<kind>","namespace":"<ns>","name":"<name>"'"#;

/// The reconciler's client certificate: identity and expiry.
const CLIENT_CERTIFICATE: &str = r"kubectl -n <reconciler-ns> get secret <reconciler-tls-secret> -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl x509 -noout -subject -ext subjectAltName -enddate";

/// The pods that mount the Secret as a volume.
const SECRET_CONSUMERS: &str = r#"kubectl -n <ns> get pods -o jsonpath='{range .items[*]}{.metadata.name}{": "}{.spec.volumes[*].secret.secretName}{"\n"}{end}' | grep -w '<secret>'"#;

/// The organization's newest audit records for one object, straight from the server.
const AUDIT_OBJECT: &str = r#"grpcurl -cacert ca.crt -cert tls.crt -key tls.key -import-path proto -proto nauthera/admin/v1/admin.proto -d '{"organization": "<slug>", <audit-filter>}' "$SERVER" nauthera.admin.v1.AdminService/ListAuditEvents"#;

/// The organization's newest audit records.
const AUDIT_ORGANIZATION: &str = r#"grpcurl -cacert ca.crt -cert tls.crt -key tls.key -import-path proto -proto nauthera/admin/v1/admin.proto -d '{"organization": "<slug>", "pageSize": 20}' "$SERVER" nauthera.admin.v1.AdminService/ListAuditEvents"#;

/// How to run the audit commands, said in every step that uses them (a macro so that `concat!`
/// can join it to the step's own text).
macro_rules! audit_how {
    () => {
        " Run it from a checkout of this repository, with a certificate the server allows for \
         audit reads and `SERVER` set to the server's gRPC address."
    };
}
use audit_how;
