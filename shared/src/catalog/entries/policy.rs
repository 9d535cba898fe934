//! Held back by a ClientPolicy: PolicyViolation, WaitingForApproval.

use super::{DESCRIBE, EVENTS};
use crate::catalog::{
    Cause, DiagnoseCheck, DiagnosisStep, EventReason, Phase, ReadyStatus, Reason, ReasonEntry,
    Runbook,
};

/// The policy as the security team wrote it, with what it holds back.
const POLICY: &str = "kubectl get clientpolicy <policy> -o yaml";

pub(in crate::catalog) static POLICY_VIOLATION: ReasonEntry = ReasonEntry {
    reason: Reason::PolicyViolation,
    ready: ReadyStatus::False,
    phase: Phase::Error,
    phase_while_retried: None,
    event: EventReason::PolicyViolation,
    metric_label: "policy_violation",
    causes: &[Cause::PolicyRule, Cause::NamespaceLimit],
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
    event: EventReason::WaitingForApproval,
    metric_label: "waiting_for_approval",
    causes: &[Cause::ApprovalRequired],
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
