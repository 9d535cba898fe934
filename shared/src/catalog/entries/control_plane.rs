//! The connection to the server: Unreachable, CredentialUnavailable, TrustAnchorUnavailable.
//! These come from the control-plane probe and fail the reconciler's `/readyz` with their name.

use super::{CLIENT_CERTIFICATE, GRPC_CALL_LOGS, STATUS};
use crate::catalog::{
    Cause, DiagnoseCheck, DiagnosisStep, Phase, Progress, ReadyStatus, Reason, ReasonEntry, Runbook,
};

/// The same for all three: the reconciler writes nothing while it cannot call the server.
const IMPACT: &[&str] = &[
    "Nothing is written while this lasts: new manifests stay Pending, edits wait, drift goes \
     unnoticed, deletions wait with their finalizer. Clients already registered keep working, \
     because end users talk to the server and not to the reconciler. The reconciler is not ready, \
     and `kubectl nauthera status` says why.",
];

/// Where the certificate files come from, for the two pages about reading them.
const CERT_MANAGER_DIAGNOSIS: DiagnosisStep = DiagnosisStep {
    text: "The cert-manager Certificate that produces the Secret, and whether it is ready and \
        issued by which issuer.",
    command: "kubectl -n <reconciler-ns> describe certificate",
    check: DiagnoseCheck::None,
};

const MOUNT_DIAGNOSIS: DiagnosisStep = DiagnosisStep {
    text: "How the Secret is mounted: a `subPath` mount never sees a renewal.",
    command: "kubectl -n <reconciler-ns> get deploy nauthera-reconciler -o jsonpath='{.spec.template.spec.containers[*].volumeMounts}'",
    check: DiagnoseCheck::None,
};

pub(in crate::catalog) static UNREACHABLE: ReasonEntry = ReasonEntry {
    reason: Reason::Unreachable,
    ready: ReadyStatus::False,
    phase: Phase::Pending,
    phase_while_retried: None,
    metric_label: "unreachable",
    causes: &[Cause::Transient, Cause::TlsHandshake],
    progress: Progress::Reconciling,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "The server cannot be reached",
        summary: "The reconciler read its certificate files but could not complete a call to \
            nauthera-server over mutual TLS; resources are Ready=False, phase Pending, and the \
            reconciler's readiness check fails with this reason.",
        meaning: &[
            "The reconciler probes the server with `GetServerInfo` every minute, and every 15 \
             seconds while that fails, reading `tls.crt`, `tls.key` and `ca.crt` afresh each \
             time. A call of any resource or of the change stream whose connection fails brings \
             the probe forward, and HTTP/2 keepalive pings find a connection that silently \
             stopped answering within seconds, so readiness turns within about 15 seconds of an \
             outage. This reason means the files were read but the call did not get through: no \
             connection (DNS, a NetworkPolicy, the server down, a partition), a timeout \
             (`transient`), or a TLS handshake that failed for another reason than the \
             reconciler's certificate (`tls_handshake`): the server's certificate has expired \
             or does not carry the server name the reconciler expects. A certificate the server \
             rejects is [CredentialUnavailable](CredentialUnavailable.md), a missing trust \
             anchor [TrustAnchorUnavailable](TrustAnchorUnavailable.md).",
            "The server does not reload its own gRPC certificate or its client CA. When its \
             certificate is renewed on disk it goes on serving the old one until it is \
             restarted, and once the old one expires every handshake fails with this reason.",
            "The reconciler retries with backoff and resumes by itself as soon as the probe \
             succeeds.",
        ],
        impact: IMPACT,
        diagnosis: &[
            DiagnosisStep {
                text: "The probe's reason and message, since when it holds, and the last \
                    server build that answered.",
                command: STATUS,
                check: DiagnoseCheck::ProbeState,
            },
            DiagnosisStep {
                text: "The code and error of each recent server call (the connection is every \
                    resource's, so these lines name no resource).",
                command: GRPC_CALL_LOGS,
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "Probe calls by code over the last quarter hour.",
                command: r#"sum by (code) (increase(nauthera_operator_server_calls_total{method="GetServerInfo"}[15m]))"#,
                check: DiagnoseCheck::ServerCallMetrics,
            },
            DiagnosisStep {
                text: "The reconciler's client certificate, from its Secret \
                    `<reconciler-tls-secret>`: identity and expiry.",
                command: CLIENT_CERTIFICATE,
                check: DiagnoseCheck::CertificateExpiry,
            },
            DiagnosisStep {
                text: "The certificate the server presents, with `SERVER` set to its gRPC \
                    address (host:port): subject and expiry.",
                command: r#"openssl s_client -connect "$SERVER" -showcerts </dev/null 2>/dev/null | openssl x509 -noout -subject -enddate"#,
                check: DiagnoseCheck::None,
            },
        ],
        mitigation: &[
            "The server is down or out of reach: bring it back or repair the path (Service, DNS, \
             NetworkPolicy); the reconciler resumes by itself.",
            "The server's certificate expired, or was renewed and is not in use: restart the \
             server. It does not reload its certificate or client CA, so restart it after every \
             renewal, before the old certificate expires.",
            "Not trusted after a CA rotation: distribute the old and the new CA together (for \
             example with trust-manager) until every certificate has been reissued, then drop \
             the old one.",
            "Something between the two ends TLS: pass TLS through, or the server sees no client \
             certificate.",
        ],
        escalation: &[
            "The server and the network path belong to whoever runs nauthera-server; the \
             reconciler's certificate to the platform team. Report with the probe message, the \
             `grpc_call` lines, and the subject and expiry of both certificates; never a key.",
        ],
    },
};

pub(in crate::catalog) static CREDENTIAL_UNAVAILABLE: ReasonEntry = ReasonEntry {
    reason: Reason::CredentialUnavailable,
    ready: ReadyStatus::False,
    phase: Phase::Pending,
    phase_while_retried: None,
    metric_label: "credential_unavailable",
    causes: &[
        Cause::Unreadable,
        Cause::Malformed,
        Cause::Expired,
        Cause::Revoked,
        Cause::Rejected,
    ],
    progress: Progress::Stalled,
    progress_by_cause: &[(Cause::Unreadable, Progress::Reconciling)],
    runbook: Runbook {
        title: "The client certificate or key cannot be read",
        summary: "The reconciler's `tls.crt` or `tls.key` is missing, unreadable, malformed, \
            mismatched or expired, so no call is made; resources are Ready=False, phase Pending, \
            and the reconciler's readiness check fails with this reason.",
        meaning: &[
            "The reconciler reads `tls.crt` and `tls.key` from its mounted certificate Secret \
             before every probe and every new connection. They are missing or cannot be read \
             (`unreadable`), are not PEM or do not belong together (`malformed`), or the \
             certificate has expired (`expired`). Without them no call to the server is \
             attempted.",
            "The server can also refuse the certificate during the TLS handshake, with an alert \
             the reconciler names: `certificate_expired` (`expired`), `certificate_revoked` \
             (`revoked`), or `bad_certificate`, `unsupported_certificate`, `certificate_unknown` \
             (`rejected`). The message names the certificate's subject, its issuer and its \
             expiry, as the reconciler read them from `tls.crt`.",
            "With cert-manager, a Certificate in the reconciler's namespace produces a \
             `kubernetes.io/tls` Secret with exactly the three files the reconciler reads: \
             `tls.crt`, `tls.key` and `ca.crt`. Mounted without `subPath`, the kubelet swaps the \
             files when cert-manager renews them and the next probe uses the new pair without a \
             restart; a `subPath` mount never sees a renewal.",
            "The Certificate's issuer must be able to issue into the reconciler's namespace. A \
             namespaced Issuer, such as an internal CA in the server's namespace, cannot; a \
             ClusterIssuer can.",
        ],
        impact: IMPACT,
        diagnosis: &[
            DiagnosisStep {
                text: "The probe's reason and message.",
                command: STATUS,
                check: DiagnoseCheck::ProbeState,
            },
            DiagnosisStep {
                text: "The certificate's identity and expiry, from the reconciler's \
                    certificate Secret `<reconciler-tls-secret>`.",
                command: CLIENT_CERTIFICATE,
                check: DiagnoseCheck::CertificateExpiry,
            },
            CERT_MANAGER_DIAGNOSIS,
            MOUNT_DIAGNOSIS,
        ],
        mitigation: &[
            "The Secret is missing or empty: look at the Certificate and its CertificateRequest. \
             An issuer that cannot reach the reconciler's namespace never issues: use a \
             ClusterIssuer, or run the reconciler in the server's namespace.",
            "Expired although cert-manager renewed it: the Secret is mounted with `subPath`; \
             mount it as a whole directory.",
            "Not PEM, or key and certificate do not match: have the certificate issued again, \
             for instance by deleting the Secret so that cert-manager issues a new one.",
            "Without cert-manager: put the PEM certificate and key under the keys `tls.crt` and \
             `tls.key` of the Secret the Deployment mounts.",
        ],
        escalation: &[
            "The certificate and its issuer belong to the platform team. Report with the probe \
             message, the Certificate's status, and the certificate's subject and expiry; never \
             the key.",
        ],
    },
};

pub(in crate::catalog) static TRUST_ANCHOR_UNAVAILABLE: ReasonEntry = ReasonEntry {
    reason: Reason::TrustAnchorUnavailable,
    ready: ReadyStatus::False,
    phase: Phase::Pending,
    phase_while_retried: None,
    metric_label: "trust_anchor_unavailable",
    causes: &[Cause::Unreadable, Cause::Malformed, Cause::Untrusted],
    progress: Progress::Stalled,
    progress_by_cause: &[(Cause::Unreadable, Progress::Reconciling)],
    runbook: Runbook {
        title: "The CA bundle cannot be read",
        summary: "The reconciler's `ca.crt` is missing, unreadable or holds no certificate, so it \
            cannot verify the server; resources are Ready=False, phase Pending, and the \
            reconciler's readiness check fails with this reason.",
        meaning: &[
            "The reconciler verifies the server's certificate against `ca.crt`, read afresh \
             before every probe. The file is missing or cannot be read (`unreadable`), or holds \
             no PEM certificate (`malformed`). Without a trust anchor no call is attempted.",
            "A trust anchor can also be missing on either side of the handshake (`untrusted`): \
             the server answers `unknown_ca` because it does not trust the CA that issued the \
             reconciler's client certificate (the message names that issuer), or the server's \
             certificate is not signed by any CA in `ca.crt`.",
            "cert-manager fills `ca.crt` only for CA-type issuers (CA or self-signed). An ACME \
             issuer leaves it empty, so the trust anchor has to come from another Secret.",
            "While the CA itself is rotated, the bundle must hold the old and the new CA \
             together until every certificate has been reissued; otherwise the reconciler turns \
             `Unreachable` as soon as one side moves.",
        ],
        impact: IMPACT,
        diagnosis: &[
            DiagnosisStep {
                text: "The probe's reason and message.",
                command: STATUS,
                check: DiagnoseCheck::ProbeState,
            },
            DiagnosisStep {
                text: "What `ca.crt` holds in the reconciler's certificate Secret \
                    `<reconciler-tls-secret>`: \
                    subject and expiry of the first CA, or an error when it holds none.",
                command: r"kubectl -n <reconciler-ns> get secret <reconciler-tls-secret> -o jsonpath='{.data.ca\.crt}' | base64 -d | openssl x509 -noout -subject -enddate",
                check: DiagnoseCheck::None,
            },
            CERT_MANAGER_DIAGNOSIS,
            MOUNT_DIAGNOSIS,
        ],
        mitigation: &[
            "An ACME or other issuer that is not CA-type: take the server's CA from another \
             Secret (trust-manager can distribute it) and mount it as `ca.crt` beside the \
             certificate.",
            "Empty or wrong after a CA rotation: distribute the old and the new CA together until \
             every certificate has been reissued.",
            "Mounted with `subPath`: mount the whole Secret so that updates show up.",
        ],
        escalation: &[
            "The trust anchor and its distribution belong to the platform team. Report with the \
             probe message and the subjects of the CAs the bundle should hold.",
        ],
    },
};
