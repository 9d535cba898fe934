//! Applying the declared state: Registered, Pending, Refused.

use super::{AUDIT_ORGANIZATION, DESCRIBE, EVENTS, RESOURCE_LOGS, STATUS, audit_how};
use crate::catalog::{
    Cause, DiagnoseCheck, DiagnosisStep, Phase, Progress, ReadyStatus, Reason, ReasonEntry, Runbook,
};

pub(in crate::catalog) static REGISTERED: ReasonEntry = ReasonEntry {
    reason: Reason::Registered,
    ready: ReadyStatus::True,
    phase: Phase::Registered,
    phase_while_retried: None,
    metric_label: "registered",
    causes: &[Cause::None, Cause::SecretChanged, Cause::DriftKept],
    progress: Progress::Settled,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "The declared state is in force",
        summary: "The server holds the generation the manifest declares and any client secret \
            is delivered; Ready=True, phase Registered.",
        meaning: &[
            "The reconciler wrote the manifest's current generation to the server, recorded the \
             revision the server returned in `status.revision` and the generation in \
             `status.generationInForce`, and delivered the client secret where the manifest asks \
             for one. It keeps following the server's change hint, so a change made anywhere \
             else turns the resource `Drifted`.",
            "The `cause` says what the last write was for, when it was more than a new \
             generation: `secret_changed` when the value in the Secret the manifest references \
             (`spec.secret.secretRef`, an IdentityProvider's `secretRef`) changed and was sent \
             (a `SecretChanged` event names the Secret and key, never the value; a change of the \
             Secret's labels or annotations alone sends nothing), `drift_kept` when a new \
             generation declared what a drift had changed on the server (a `DriftAdopted` \
             event names the fields kept).",
        ],
        impact: &[
            "None: this is the healthy state. End users sign in with the client as declared.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The generation in force should equal `metadata.generation`, and \
                    `status.revision` is the revision the reconciler wrote.",
                command: "kubectl -n <ns> get <kind> <name> -o jsonpath='{.metadata.generation} {.status.generationInForce} {.status.revision}'",
                check: DiagnoseCheck::ConditionMessage,
            },
            DiagnosisStep {
                text: "The events say when each generation was written and where its secret was \
                    delivered: `Registered` for a write that brings the resource into \
                    `Registered` (its first generation, or one that ends a drift or a failure), \
                    `Applied` for every other write (a later generation while it is registered, \
                    a restore), `SecretRotated` when a secret was replaced.",
                command: EVENTS,
                check: DiagnoseCheck::Events,
            },
        ],
        mitigation: &[
            "Nothing to do. To change the object, edit the manifest: the new generation is \
             written and the condition comes back to `Registered` once it is in force.",
        ],
        escalation: &[
            "None needed. If the client behaves differently from its manifest while it reports \
             `Registered`, compare the server's revision with `status.revision` and treat a \
             difference as drift (see [Drifted](Drifted.md)).",
        ],
    },
};

pub(in crate::catalog) static PENDING: ReasonEntry = ReasonEntry {
    reason: Reason::Pending,
    ready: ReadyStatus::Unknown,
    phase: Phase::Pending,
    phase_while_retried: None,
    metric_label: "pending",
    causes: &[Cause::None, Cause::Transient, Cause::ReferenceNotReady],
    progress: Progress::Reconciling,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "Waiting for the server to confirm",
        summary: "The declared generation is not confirmed yet: the first reconcile is under way, \
            a transient failure is retried with backoff, or a manifest it depends on is not \
            Registered yet; Ready=Unknown, phase Pending.",
        meaning: &[
            "A new manifest, or a new generation of one, has not been confirmed by the server \
             yet. The `cause` metric label says why:",
            "- `none`: the reconciler has not got to it yet (start-up, leader election, a long \
             queue).\n\
             - `transient`: its call failed with a code the reconciler retries on its own: \
             `Aborted`, `Internal`, `Unknown`, `ResourceExhausted` or `Unavailable`. Retries \
             wait with exponential backoff and jitter, so many resources failing together do \
             not hit the server in step.\n\
             - `reference_not_ready`: something this resource names is not there yet: the \
             Organization manifest that serves its issuer or the Branding its `spec.brandingRef` \
             names exists but is not `Registered` yet, or the Branding or the Secret it names \
             (`spec.brandingRef`, `spec.secret.secretRef`, an IdentityProvider's `secretRef`) \
             does not exist at all, or that Secret exists without the key the reference names \
             (yet). The reconciler sends nothing of this resource to the server until it is \
             there (it registers nothing and mints nothing), and this resource proceeds by itself \
             within a second of that manifest registering or that Secret being created or given \
             the key. An issuer no Organization \
             manifest declares is the server's own organization and is not waited for.",
            "A resource already `Registered` whose Branding goes away (its manifest deleted) \
             turns `Pending` with `reference_not_ready` at once, without a write: the message \
             says how the Branding went and what the server does now (with `deletionPolicy: \
             Delete` the server keeps the client's reference to a branding it no longer holds \
             and shows the organization's default sign-in pages; with `Orphan` it still shows \
             the branding, which no manifest declares any more). It is `Registered` again as \
             soon as a Branding of that name registers.",
            "The condition message names the last failure, if there was one, or what the \
             resource waits for, by kind and namespace/name (for example `waiting for \
             Organization platform/acme to be Registered`, or `waiting for Branding \
             team-a/acme-sign-in, which spec.brandingRef names and does not exist`, or \
             `waiting for the key clientSecret in Secret worker-credentials, which \
             spec.secret.secretRef names`).",
        ],
        impact: &[
            "The change is not applied yet; the server keeps the last generation in force, or \
             holds nothing for a new manifest. A short spell is normal; one that lasts for \
             minutes means the retries keep failing.",
            "With `reference_not_ready` the resource waits as long as the manifest it depends on \
             is not `Registered`: a refused Organization or Branding holds up every resource \
             that depends on it, however long it stays refused.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The condition message: the last failure, or the manifest the resource \
                    waits for (kind, namespace/name).",
                command: DESCRIBE,
                check: DiagnoseCheck::ConditionMessage,
            },
            DiagnosisStep {
                text: "For `reference_not_ready`: the phase and reason of the Organization \
                    manifests and of the Brandings in the namespace; find the one the message \
                    names. For why it is not `Registered`, run `kubectl nauthera diagnose` on \
                    it: `kubectl nauthera diagnose KIND/NAME -n NAMESPACE` with the kind, name \
                    and namespace from the message.",
                command: "kubectl get organizations.nauthera.io -A && kubectl -n <ns> get brandings.nauthera.io",
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "Whether the reconciler is ready, which replica leads, and whether the \
                    control-plane probe reaches the server.",
                command: STATUS,
                check: DiagnoseCheck::ProbeState,
            },
            DiagnosisStep {
                text: "Server calls by method and code; a run of retried codes points at the \
                    server, not at the manifest.",
                command: "sum by (method, code) (increase(nauthera_operator_server_calls_total[15m]))",
                check: DiagnoseCheck::ServerCallMetrics,
            },
            DiagnosisStep {
                text: "The reconciler's lines about the resource: each attempt with its reason, \
                    cause and the server's answer.",
                command: RESOURCE_LOGS,
                check: DiagnoseCheck::ReconcilerLogs,
            },
        ],
        mitigation: &[
            "Nothing, if it clears within a few minutes: retried codes need no action unless \
             they persist.",
            "`ResourceExhausted` that persists: the server limits the reconciler's rate. Spread \
             out mass edits, or raise the server's limit for the reconciler.",
            "`Unavailable` or `Internal` that persists: look at the server's health and logs; \
             connection problems are covered by [Unreachable](Unreachable.md).",
            "No leader in `kubectl nauthera status`: check the reconciler's pods and its Lease \
             with `kubectl -n <reconciler-ns> get pods,leases`.",
            "`reference_not_ready` naming something that does not exist: apply the Branding, or \
             create the Secret (or put the key in it), that the message names (or correct the \
             reference); this resource proceeds by itself once it is there.",
            "`reference_not_ready`: nothing to do on this resource. Look at the manifest the \
             message names, with `kubectl nauthera diagnose KIND/NAME -n NAMESPACE` (its kind, \
             name and namespace from the message). Once it is `Registered`, this resource \
             proceeds within a second, by itself. If it is `Refused`, fix that manifest as its \
             message says (see [Refused](Refused.md)); if it is Pending too, it waits for one of \
             the causes on this page. If this resource should not depend on it at all, correct \
             its `spec.issuer` or `spec.brandingRef`.",
        ],
        escalation: &[
            "When it lasts longer than about fifteen minutes with retried codes, hand it to \
             whoever runs nauthera-server, with the reconciler's `grpc_call` lines for the \
             resource. Those lines never carry secrets and can be shared as they are.",
            "A resource still `reference_not_ready` a minute after the manifest it names became \
             `Registered` is a fault of the reconciler: report it with the status of both \
             resources and the reconciler's lines about them.",
        ],
    },
};

pub(in crate::catalog) static REFUSED: ReasonEntry = ReasonEntry {
    reason: Reason::Refused,
    ready: ReadyStatus::False,
    phase: Phase::Error,
    phase_while_retried: None,
    metric_label: "refused",
    causes: &[
        Cause::FieldViolation,
        Cause::IdentityNotAllowed,
        Cause::OperationNotGranted,
        Cause::OutsideGrant,
        Cause::UnknownIssuer,
        Cause::ReservedName,
        Cause::FapiRequirements,
        Cause::ReferenceNotFound,
        Cause::ManagerConflict,
        Cause::Unimplemented,
        Cause::ServerObjection,
        Cause::UnencodableBranding,
        Cause::InvalidSecretTemplate,
    ],
    progress: Progress::Stalled,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "The declared state was refused",
        summary: "The server answered and refused the write, or the reconciler refused an \
            unencodable branding itself; Ready=False, phase Error. A refused control-plane probe \
            makes the reconciler unready.",
        meaning: &[
            "The condition message carries the gRPC code, every field the server objected to, \
             the server's stable reason in parentheses, its cause in words, and the generation \
             the server keeps in force. The `cause` metric label sorts the refusal:",
            "- `identity_not_allowed` (`IDENTITY_NOT_ALLOWED`, or `PermissionDenied` without a \
             stable reason): the server found no entry for the reconciler's certificate identity \
             in `server.grpc.tls.allowed_clients`, or something between the two ended TLS and \
             the server saw no client certificate at all.\n\
             - `operation_not_granted`, `outside_grant`: the identity is allowed, but its entry \
             lacks the operation (`clients`, `brandings`, `identity_providers`, \
             `organizations`), the organization, or the namespace.\n\
             - `field_violation`, `unknown_issuer`, `reserved_name`, `fapi_requirements`, \
             `reference_not_found`, `server_objection`: the server objects to the spec: an \
             invalid field, an issuer no organization serves, a name the server reserves, a FAPI \
             mode the client does not satisfy, a referenced object that does not exist, or \
             another objection.\n\
             - `manager_conflict`: the write would replace a change another manager or a person \
             made on the server.\n\
             - `unimplemented`: the server is older than the call.\n\
             - `unencodable_branding`: `spec.branding` cannot be encoded into the server's \
             format; the reconciler did not call the server.\n\
             - `invalid_secret_template`: a file of an OIDCClient's `spec.secret.template` does \
             not render (a syntax error, or a name other than the five facts `clientId`, \
             `clientSecret`, `issuer`, `discoveryUrl` and `tokenEndpoint`); the message names \
             the file and line. The reconciler did not call the server, so nothing was minted.",
            "Calls failing with `Aborted`, `Internal`, `Unknown`, `ResourceExhausted` or \
             `Unavailable` are no refusal: they are retried with exponential backoff and jitter \
             and show as [Pending](Pending.md). A refusal waits: the declared state is sent \
             again on the next edit of the manifest, or after five minutes; a missing reference \
             (`reference_not_found`) is also sent again as soon as a manifest the resource \
             depends on registers. A Branding or Secret that does not exist in the cluster, or a \
             Secret without the key the manifest names, is never sent and refused: the resource \
             waits for it as [Pending](Pending.md).",
        ],
        impact: &[
            "The team's change is not in force. An object registered before stays at the \
             generation the server keeps, which the message names; a new manifest has no object \
             on the server, so for a client its end users cannot sign in through it.",
            "An identity or grant cause refuses every resource in its scope, and when the \
             control-plane probe is refused too the reconciler's pod is not ready: nothing the \
             reconciler manages is written until the platform team acts.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The message: code, field violations, stable reason in parentheses, cause \
                    and the generation in force.",
                command: DESCRIBE,
                check: DiagnoseCheck::ConditionMessage,
            },
            DiagnosisStep {
                text: "Refusals by kind and cause over the last hour: one cause across every \
                    kind is the grant; a single resource is its manifest.",
                command: r#"sum by (kind, cause) (increase(nauthera_operator_reconciles_total{reason="refused"}[1h]))"#,
                check: DiagnoseCheck::ReconcileMetrics,
            },
            DiagnosisStep {
                text: "Calls the server denied; any at all points at the identity or the grant.",
                command: r#"sum by (method) (increase(nauthera_operator_server_calls_total{code="PermissionDenied"}[1h]))"#,
                check: DiagnoseCheck::ServerCallMetrics,
            },
            DiagnosisStep {
                text: "The identity and grants the server reported to the reconciler, and \
                    whether they cover the resource's operation, organization and namespace.",
                command: "kubectl nauthera status -n <ns> -o wide",
                check: DiagnoseCheck::GrantCovers,
            },
            DiagnosisStep {
                text: concat!(
                    "The server's audit records of the refused write (`client.applied`, \
                     `branding.applied`, `identity_provider.applied`, `organization.applied`) \
                     carry its cause and violations.",
                    audit_how!()
                ),
                command: AUDIT_ORGANIZATION,
                check: DiagnoseCheck::AuditLog,
            },
        ],
        mitigation: &[
            "A field objection (`field_violation`): fix the manifest as the message says. It is \
             sent again on the next edit, or after five minutes.",
            "A server state the message names: a FAPI mode (`fapi_requirements`) needs a spec \
             that meets it, such as `private_key_jwt` with PKCE; a reserved name \
             (`reserved_name`) needs another name; an issuer no organization serves \
             (`unknown_issuer`: a typo, or a deleted organization) needs the issuer of one that \
             exists; a missing reference (`reference_not_found`) needs the referenced object \
             first.",
            "The identity or the grant (`identity_not_allowed`, `operation_not_granted`, \
             `outside_grant`): the platform team lists the reconciler in the server's \
             `server.grpc.tls.allowed_clients`, or widens its entry, for example \
             `{identity: dns:nauthera-reconciler.<reconciler-ns>.svc, operations: [clients], \
             organizations: [<slug>], namespaces: [<ns>]}`. When the identity is already \
             listed, make sure nothing between the reconciler and the server ends TLS.",
            "`manager_conflict`: someone changed the object on the server; decide whether to \
             keep their change as for [Drifted](Drifted.md).",
            "`unimplemented`: upgrade the server to a version that serves the call.",
            "`unencodable_branding`: fix `spec.branding` as the message says (a supported logo \
             type, colours as `#rrggbb`, known colour and text roles).",
            "`invalid_secret_template`: fix the file the message names; `kubectl nauthera \
             diagnose -f` on the manifest's file renders the template with placeholder facts \
             before it is applied. The Secret delivered before keeps its shape and the client secret in force \
             until a template that renders is applied.",
            "Retried codes need nothing unless they persist; see [Pending](Pending.md).",
        ],
        escalation: &[
            "Objections to the spec go to the application team that owns the manifest; identity \
             and grant causes go to the platform team that owns the server's configuration.",
            "If the server refuses a spec its documentation allows, or answers `Internal` again \
             and again, report it to the server's maintainers with the condition message, both \
             versions (`kubectl nauthera status` shows the server build) and the reconciler's \
             `grpc_call` line for the call. None of these carry secrets; add none.",
        ],
    },
};
