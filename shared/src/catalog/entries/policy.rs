//! Held back by a ClientPolicy: PolicyViolation, WaitingForApproval; and a ClientPolicy the
//! reconciler refuses: PolicyRefused.

use super::{DESCRIBE, EVENTS};
use crate::catalog::{
    Cause, DiagnoseCheck, DiagnosisStep, Phase, Progress, ReadyStatus, Reason, ReasonEntry, Runbook,
};

/// The policy as the security team wrote it, with what it holds back.
const POLICY: &str = "kubectl get clientpolicy <policy> -o yaml";

pub(in crate::catalog) static POLICY_VIOLATION: ReasonEntry = ReasonEntry {
    reason: Reason::PolicyViolation,
    ready: ReadyStatus::False,
    phase: Phase::Error,
    phase_while_retried: None,
    metric_label: "policy_violation",
    causes: &[Cause::PolicyRule, Cause::NamespaceLimit],
    progress: Progress::Stalled,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "A ClientPolicy does not allow the manifest",
        summary: "A rule of a ClientPolicy that covers the resource does not allow what the \
            manifest declares, so the reconciler sends nothing of this generation to the \
            server; Ready=False, phase Error.",
        meaning: &[
            "The security team's ClientPolicies say what teams may register: redirect URI \
             hosts, schemes and paths, grant types, response types, token endpoint \
             authentication methods, scopes, PKCE, the secret's source, identity provider kinds, \
             custom CSS in brandings, and how many OIDCClients a namespace may hold. The \
             reconciler evaluates every policy that covers the resource (by kind, issuer and \
             namespace labels) before each write. A manifest that breaks a rule is not sent; \
             `status.policy` names the policy, the rule and the field, and the condition message \
             says what the rule allows.",
            "The `cause` metric label says which kind of rule:",
            "- `policy_rule`: a field's value is not allowed. `kubectl apply` refuses such a \
             manifest too (the reconciler keeps a ValidatingAdmissionPolicy generated from each \
             ClientPolicy), so this resource was admitted before the policy (or the rule) \
             existed, or while its admission policy was missing.\n\
             - `namespace_limit`: the namespace already holds as many OIDCClients under the \
             policy as `maxClientsPerNamespace` allows. The ones created first keep their place; \
             this one, created later, waits until others are deleted or the limit is raised, \
             and then proceeds by itself.",
        ],
        impact: &[
            "The declared generation is not in force. A client registered before keeps working at \
             `status.generationInForce` as it was; a new one does not exist on the server, so \
             nobody can sign in through it and no Secret is delivered.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The condition message names the policy, the rule and the field, and says \
                    what the rule allows.",
                command: DESCRIBE,
                check: DiagnoseCheck::ConditionMessage,
            },
            DiagnosisStep {
                text: "Every policy that covers the resource, each rule's verdict on the \
                    manifest as the cluster holds it, and the namespace's count against a limit.",
                command: "kubectl nauthera diagnose <kind>/<name> -n <ns>",
                check: DiagnoseCheck::PolicyRules,
            },
            DiagnosisStep {
                text: "The policy itself, and the resources it holds back (`status.held`).",
                command: POLICY,
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "The events: a `PolicyViolation` event whenever the rule that holds the \
                    resource back changes.",
                command: EVENTS,
                check: DiagnoseCheck::Events,
            },
        ],
        mitigation: &[
            "Change the manifest to comply and apply it: the reconciler sends the new \
             generation at once. Check a change before applying it with `kubectl nauthera \
             diagnose -f FILE`, which evaluates the policies that would cover it.",
            "`namespace_limit`: delete OIDCClients the namespace no longer needs, or ask the \
             security team to raise `maxClientsPerNamespace`; the waiting client proceeds by \
             itself.",
            "If the rule itself is wrong, the security team changes the ClientPolicy; every \
             resource it held back is evaluated again.",
        ],
        escalation: &[
            "A rule that blocks something the team needs goes to the security team that owns the \
             ClientPolicy (`kubectl get clientpolicy <policy>` shows it, and its owners usually \
             annotate it). The reconciler never overrides a policy.",
        ],
    },
};

pub(in crate::catalog) static WAITING_FOR_APPROVAL: ReasonEntry = ReasonEntry {
    reason: Reason::WaitingForApproval,
    ready: ReadyStatus::False,
    phase: Phase::Pending,
    phase_while_retried: None,
    metric_label: "waiting_for_approval",
    causes: &[Cause::ApprovalRequired],
    progress: Progress::AwaitsDecision,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "Waiting for the security team's approval",
        summary: "A ClientPolicy requires an approval of this generation (a new OIDCClient, or \
            a change to a field the policy lists) and none is there yet; nothing is sent until \
            a ClientApproval approves it. Ready=False, phase Pending.",
        meaning: &[
            "The policy's `approval` rule holds every new OIDCClient, and every change to the \
             fields it lists (`spec.rules.approval.fields`), until someone allowed to approve \
             creates a ClientApproval for the client and its `metadata.generation`. Only the \
             security team's role may create ClientApprovals; a team that can edit its \
             OIDCClients cannot approve them. A change to a field the policy does not list needs \
             no new approval: the reconciler keeps a digest of the listed fields of the last \
             approved write in `status.approval`.",
            "An approval is for one generation: editing the manifest again before the approved \
             generation is sent asks for a new one.",
        ],
        impact: &[
            "The declared generation is not in force. A client registered before keeps working at \
             `status.generationInForce`; a new one does not exist on the server yet.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The condition message names the policy and the generation waiting.",
                command: DESCRIBE,
                check: DiagnoseCheck::ConditionMessage,
            },
            DiagnosisStep {
                text: "The client's ClientApprovals, the generation waiting, and whether you \
                    may approve it.",
                command: "kubectl -n <ns> get clientapprovals.nauthera.io && kubectl auth can-i create clientapprovals.nauthera.io -n <ns>",
                check: DiagnoseCheck::Approvals,
            },
            DiagnosisStep {
                text: "Every policy that covers the resource, and each rule's verdict.",
                command: "kubectl nauthera diagnose <kind>/<name> -n <ns>",
                check: DiagnoseCheck::PolicyRules,
            },
        ],
        mitigation: &[
            "Ask the security team to review the change and approve it: `kubectl nauthera \
             approve <kind>/<name> -n <ns>` creates the ClientApproval for the current \
             generation `<generation>`. The reconciler sends it at once.",
            "Nothing to do on the resource itself: it proceeds by itself once approved.",
        ],
        escalation: &[
            "An approval that does not arrive goes to the security team that owns the \
             ClientPolicy `<policy>`.",
        ],
    },
};

pub(in crate::catalog) static POLICY_REFUSED: ReasonEntry = ReasonEntry {
    reason: Reason::PolicyRefused,
    ready: ReadyStatus::False,
    phase: Phase::Error,
    phase_while_retried: None,
    metric_label: "policy_refused",
    causes: &[
        Cause::InvalidSelector,
        Cause::CostLimit,
        Cause::UncompilableRule,
    ],
    progress: Progress::Stalled,
    progress_by_cause: &[],
    runbook: Runbook {
        title: "The reconciler refuses a ClientPolicy the API server would not enforce",
        summary: "A ClientPolicy holds something a real API server refuses in what is generated \
            from it (a namespace selector with invalid label text), or a rule whose generated \
            check could cost more than the API server lets one CEL expression cost. Its \
            condition is Ready=False (phase Error in the catalog: a person must fix it), no \
            admission policy is generated, and it enforces nothing until it is fixed.",
        meaning: &[
            "Every ClientPolicy is compiled into CEL checks and a ValidatingAdmissionPolicy that \
             the API server enforces at `kubectl apply`. Some policies are valid as a \
             ClientPolicy but not as what they generate: the API server would refuse the \
             admission policy (422) or could not run its checks. Rather than retry a write that \
             can never succeed and leave apply-time enforcement silently missing, the reconciler \
             refuses the policy when it compiles it: the `Ready` condition of the ClientPolicy \
             says `PolicyRefused` with the field at fault, the rule and the limit, a Warning \
             event `PolicyRefused` is recorded on it (in the `default` namespace, where events \
             of cluster-scoped objects go), and `nauthera_operator_reconciles_total{kind=\"ClientPolicy\",reason=\"policy_refused\"}` \
             counts it.",
            "The `cause` says what is refused:",
            "- `invalid_selector`: `spec.match.namespaceSelector` holds a label key that is not a \
             qualified name (an optional DNS subdomain prefix and `/`, then up to 63 letters, \
             digits, `-`, `_` and `.`, starting and ending with a letter or digit), a label value \
             longer than 63 characters or with other characters (`prod eu`: spaces are not \
             allowed), or an operator other than `In`, `NotIn`, `Exists` and `DoesNotExist`. \
             The message names the field, for example \
             `spec.match.namespaceSelector.matchLabels.env`, and the API server's own rule.\n\
             - `cost_limit`: a check generated from a rule could cost more than 1,000,000 CEL \
             units (the API server's limit per expression) on a resource its CRD admits, or the \
             checks of one resource more than 10,000,000 together. The estimate is the worst \
             case the CRDs allow: for `redirectUris` and `postLogoutRedirectUris`, 50 URIs of \
             2048 characters, each matched against one pattern made of every allowed host and \
             path prefix. The API server would cancel such a check and, the admission policy \
             failing closed, deny the write with a cost error instead of the rule's message. The \
             message names the rule, the estimated cost and the limit.\n\
             - `uncompilable_rule`: a generated check does not compile, or its pattern would not \
             mean the same to the API server (Go's RE2, where `\\s` and `\\d` are ASCII) and to \
             the reconciler. The generator never writes such a check; this is a defect to \
             report.",
        ],
        impact: &[
            "Nothing of the policy is enforced: no admission policy refuses violating manifests at \
             `kubectl apply`, the reconciler does not hold resources back, and `diagnose -f` \
             names the policy as refused. An admission policy generated from an earlier \
             generation of the policy is deleted, since it enforces rules the policy's owner has \
             changed. Resources are written to the server as if the policy did not exist.",
        ],
        diagnosis: &[
            DiagnosisStep {
                text: "The policy's `Ready` condition: the cause, the field at fault and the limit.",
                command: r#"kubectl get clientpolicy <policy> -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'"#,
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "The same verdict on the policy's file, before it is applied again.",
                command: "kubectl nauthera diagnose -f clientpolicy.yaml",
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "The `PolicyRefused` events, one each time the refusal changes.",
                command: "kubectl -n default get events --field-selector involvedObject.kind=ClientPolicy,involvedObject.name=<policy>",
                check: DiagnoseCheck::None,
            },
            DiagnosisStep {
                text: "Refused policies by cause over the last hour.",
                command: r#"sum by (cause) (increase(nauthera_operator_reconciles_total{kind="ClientPolicy",reason="policy_refused"}[1h]))"#,
                check: DiagnoseCheck::None,
            },
        ],
        mitigation: &[
            "`invalid_selector`: select namespaces by labels a namespace can carry, for example \
             `env: prod-eu` instead of `env: prod eu`; `kubernetes.io/metadata.name` selects one \
             namespace by name.",
            "`cost_limit`: allow fewer hosts or path prefixes in the rule the message names (a \
             wildcard such as `*.example.com` covers every name below it), or give the teams \
             that need different hosts policies of their own that cover their namespaces or \
             issuers: each policy's checks are costed alone (a resource two policies cover must \
             pass both, so splitting one list between two policies over the same namespaces does \
             not work).",
            "Apply the fixed policy: the reconciler compiles it at once, generates its admission \
             policy and reports `AdmissionPolicyInPlace`. `kubectl nauthera diagnose -f FILE` \
             says whether it would be refused before it is applied.",
        ],
        escalation: &[
            "The policy belongs to the security team that wrote it; `uncompilable_rule` is a \
             defect of the reconciler: report it with the policy and the condition message.",
        ],
    },
};
