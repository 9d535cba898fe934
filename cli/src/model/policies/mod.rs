//! ClientPolicies as the plugin sees them: listed from the cluster ([`crate::cluster::policies`])
//! and evaluated on one resource with the shared compiled form (`nauthera_shared::policy`), never
//! with rules of its own. `diagnose -f` judges a manifest before it is applied,
//! `diagnose KIND/NAME` the live object, and `status` groups what the policies hold back.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use nauthera_shared::policy::{
    ApprovalStanding, Approvals, CompiledPolicy, NAMESPACE_NAME_LABEL, Rule, Subject, Violation,
    approval_standing, covering, violations,
};
use nauthera_shared::resources::{ApprovalRecord, ClientPolicy, PolicyKind};
use serde::Serialize;
use serde_json::Value;

/// The plural and group `kubectl auth can-i` and the messages name.
pub const POLICIES_RESOURCE: &str = "clientpolicies.nauthera.io";
pub const APPROVALS_RESOURCE: &str = "clientapprovals.nauthera.io";

/// The ClusterRole the deploy folder ships for the security team: it may create
/// ClientApprovals.
pub const APPROVER_ROLE: &str = "nauthera-client-policy-admin";

/// The ClientPolicies of the cluster, as far as they could be read.
#[derive(Clone, Debug)]
pub enum PolicyListing {
    /// The ClientPolicy CRD is not installed: no policy applies.
    NotInstalled,
    /// The user may not list them (the sentence says so and what to do).
    Forbidden(String),
    /// Listing them failed otherwise.
    Failed(String),
    Listed(Vec<ClientPolicy>),
}

/// The listed policies, compiled once.
#[derive(Clone, Debug, Default)]
pub struct PolicySet {
    pub compiled: Vec<Arc<CompiledPolicy>>,
    /// Policies that do not compile: they enforce nothing until fixed.
    pub broken: Vec<BrokenPolicy>,
}

/// A policy the reconciler refuses (`PolicyRefused`), and why: the same verdict, cause and words.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokenPolicy {
    pub policy: String,
    /// `PolicyRefused`.
    pub reason: String,
    /// `invalid_selector`, `cost_limit` or `uncompilable_rule`.
    pub cause: String,
    /// The ClientPolicy's field at fault and what is wrong with it.
    pub problem: String,
}

impl BrokenPolicy {
    pub fn of(error: &nauthera_shared::policy::PolicyError) -> BrokenPolicy {
        BrokenPolicy {
            policy: error.policy.clone(),
            reason: nauthera_shared::catalog::Reason::PolicyRefused
                .as_str()
                .to_owned(),
            cause: error.cause.as_str().to_owned(),
            problem: error.describe(),
        }
    }
}

impl PolicySet {
    pub fn compile(policies: &[ClientPolicy]) -> PolicySet {
        let mut set = PolicySet::default();
        for policy in policies {
            match CompiledPolicy::compile(policy) {
                Ok(compiled) => set.compiled.push(Arc::new(compiled)),
                Err(error) => set.broken.push(BrokenPolicy::of(&error)),
            }
        }
        set.compiled.sort_by(|a, b| a.name.cmp(&b.name));
        set.broken.sort();
        set
    }

    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty() && self.broken.is_empty()
    }

    pub fn len(&self) -> usize {
        self.compiled.len() + self.broken.len()
    }
}

/// Where the policies stand for one evaluation.
#[derive(Clone, Debug, Default)]
pub enum Policies {
    /// `--local`: not asked.
    #[default]
    NotChecked,
    NotInstalled,
    /// Could not be listed: the sentence, naming the resource and what to do.
    Unlisted(String),
    Listed(PolicySet),
}

impl Policies {
    pub fn from_listing(listing: &PolicyListing) -> Policies {
        match listing {
            PolicyListing::NotInstalled => Policies::NotInstalled,
            PolicyListing::Forbidden(why) | PolicyListing::Failed(why) => {
                Policies::Unlisted(why.clone())
            }
            PolicyListing::Listed(policies) => Policies::Listed(PolicySet::compile(policies)),
        }
    }

    /// The outcome for a resource, given how to evaluate it once the policies are listed.
    pub fn outcome(
        &self,
        evaluate: impl FnOnce(&PolicySet) -> Evaluation,
    ) -> Option<PolicyOutcome> {
        match self {
            Policies::NotChecked => None,
            Policies::NotInstalled => Some(PolicyOutcome::NotInstalled),
            Policies::Unlisted(why) => Some(PolicyOutcome::Unlisted { why: why.clone() }),
            Policies::Listed(set) => Some(PolicyOutcome::Evaluated(Box::new(evaluate(set)))),
        }
    }

    /// The compiled policies, when listed and any.
    pub fn listed(&self) -> Option<&PolicySet> {
        match self {
            Policies::Listed(set) if !set.is_empty() => Some(set),
            _ => None,
        }
    }
}

/// A namespace's labels, as the policies' namespace selectors see them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceLabels {
    /// With the `kubernetes.io/metadata.name` label the API server sets on every namespace.
    pub labels: BTreeMap<String, String>,
    /// Why the Namespace could not be read: only its name label is known then.
    pub problem: Option<String>,
}

impl NamespaceLabels {
    /// Labels as read from the Namespace, with its name label added when missing.
    pub fn of(namespace: &str, labels: BTreeMap<String, String>) -> NamespaceLabels {
        let mut labels = labels;
        labels
            .entry(NAMESPACE_NAME_LABEL.to_owned())
            .or_insert_with(|| namespace.to_owned());
        NamespaceLabels {
            labels,
            problem: None,
        }
    }

    /// Only the name label, and why nothing else is known.
    pub fn unknown(namespace: &str, problem: String) -> NamespaceLabels {
        NamespaceLabels {
            problem: Some(problem),
            ..NamespaceLabels::of(namespace, BTreeMap::new())
        }
    }
}

/// An OIDCClient of the namespace, as the namespace limit counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountedClient {
    pub name: String,
    pub issuer: String,
    /// `None`: not created yet (declared in the files); it comes after every existing one, in
    /// the order of the files.
    pub created: Option<Timestamp>,
    /// The position in the files of one not created yet.
    pub order: usize,
    pub deleting: bool,
}

impl CountedClient {
    /// Whether this client keeps its place before `subject`: by creation time, then name, as
    /// the reconciler counts; clients not created yet come last, in the files' order.
    fn before(&self, subject: &CountedClient) -> bool {
        match (self.created, subject.created) {
            (Some(mine), Some(theirs)) => {
                (mine, self.name.as_str()) < (theirs, subject.name.as_str())
            }
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => self.order < subject.order,
        }
    }
}

/// One resource to judge.
#[derive(Clone, Copy, Debug)]
pub struct Judged<'a> {
    pub kind: PolicyKind,
    pub namespace: &'a str,
    pub issuer: &'a str,
    /// The object as the API server stores it (the typed resource, defaults filled in).
    pub object: &'a Value,
    /// Its place among the namespace's OIDCClients (its name, creation time or file order).
    pub place: &'a CountedClient,
    /// The generation judged for approvals.
    pub generation: i64,
    /// Something of the client is on the server (`status.revision`).
    pub written: bool,
    /// `status.approval`.
    pub recorded: Option<&'a ApprovalRecord>,
    /// The generations ClientApprovals approve for this client.
    pub approved: &'a [i64],
}

/// One rule of a covering policy, judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleVerdict {
    pub rule: String,
    pub field: String,
    pub allowed: bool,
    /// The policy's message, as `kubectl apply` and the status print it, when not allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A policy's namespace limit, judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitVerdict {
    pub max: u32,
    /// The other OIDCClients of the namespace the policy covers (not being deleted).
    pub covered: usize,
    /// Those of them created before this one.
    pub earlier: usize,
    pub fits: bool,
    /// The reconciler's message when it does not fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Whether the policy covers the resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum Coverage {
    Covers,
    /// The namespace's labels could not be read and the policy selects namespaces by label.
    Unknown {
        why: String,
    },
}

/// One policy that covers (or may cover) the resource, and its verdict on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyVerdict {
    pub policy: String,
    pub coverage: Coverage,
    pub rules: Vec<RuleVerdict>,
    pub limit: Option<LimitVerdict>,
    /// The fields whose change needs an approval, when the policy requires approvals.
    pub approval_fields: Option<Vec<String>>,
}

impl PolicyVerdict {
    pub fn refused(&self) -> impl Iterator<Item = &RuleVerdict> {
        self.rules.iter().filter(|rule| !rule.allowed)
    }

    /// Whether the policy holds the resource back (a rule, or the namespace limit).
    pub fn violated(&self) -> bool {
        self.refused().next().is_some() || self.limit.as_ref().is_some_and(|limit| !limit.fits)
    }
}

/// Where the client stands with the covering policies' approval rules.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum ApprovalVerdict {
    /// The listed fields are what was last written: no approval needed.
    Unchanged,
    /// A ClientApproval approves this generation.
    Approved { generation: i64 },
    /// It waits for an approval of this generation.
    Required {
        generation: i64,
        policies: Vec<String>,
        fields: Vec<String>,
        new_client: bool,
    },
}

/// Every covering policy's verdict on one resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evaluation {
    /// How many ClientPolicies the cluster holds.
    pub policies: usize,
    /// The kind, issuer and namespace labels the coverage was decided on.
    pub kind: String,
    pub name: String,
    pub issuer: String,
    pub namespace: String,
    /// Whether the resource is in the cluster already (a manifest may be new).
    pub exists: bool,
    pub namespace_labels: BTreeMap<String, String>,
    /// The covering policies, in name order (and those that may cover it).
    pub verdicts: Vec<PolicyVerdict>,
    /// Policies that do not compile: they enforce nothing until fixed.
    pub broken: Vec<BrokenPolicy>,
    /// `None` when no covering policy requires approvals (or the kind needs none).
    pub approval: Option<ApprovalVerdict>,
    /// Why the namespace's OIDCClients could not be counted, when a limit needed them.
    pub count_problem: Option<String>,
}

/// Judges one resource: which policies cover it (kind, issuer, namespace labels), every rule's
/// verdict, the namespace limit, and whether an approval is needed. `clients`: the namespace's
/// OIDCClients (the subject's own name among them is ignored), or why they could not be listed.
pub fn evaluate(
    set: &PolicySet,
    judged: &Judged<'_>,
    labels: &NamespaceLabels,
    clients: Result<&[CountedClient], &str>,
) -> Evaluation {
    let selects_by_label = |policy: &CompiledPolicy| policy.coverage.namespace_selector.is_some();
    let (certain, uncertain): (Vec<Arc<CompiledPolicy>>, Vec<Arc<CompiledPolicy>>) = set
        .compiled
        .iter()
        .cloned()
        .partition(|policy| labels.problem.is_none() || !selects_by_label(policy));
    let subject = Subject {
        kind: judged.kind,
        namespace: judged.namespace,
        namespace_labels: &labels.labels,
        issuer: judged.issuer,
        object: judged.object,
    };
    let covering = covering(&certain, &subject);
    let neighbours = Neighbours {
        others: match clients {
            Ok(clients) => clients
                .iter()
                .filter(|client| !client.deleting && client.name != judged.place.name)
                .collect(),
            Err(_) => Vec::new(),
        },
        labels: &labels.labels,
        place: judged.place,
    };
    let found = violations(&covering, &subject, &|policy| neighbours.earlier(policy));
    let counts_clients = judged.kind == PolicyKind::OidcClient;
    let mut verdicts: Vec<PolicyVerdict> = covering
        .iter()
        .map(|policy| {
            let mine: Vec<&Violation> = found.iter().filter(|v| v.policy == policy.name).collect();
            let limit = policy
                .max_clients_per_namespace
                .filter(|_| counts_clients && clients.is_ok())
                .map(|max| neighbours.limit_verdict(policy, max, &mine));
            PolicyVerdict {
                policy: policy.name.clone(),
                coverage: Coverage::Covers,
                rules: rule_verdicts(policy, judged.kind, &mine),
                limit,
                approval_fields: policy
                    .approval
                    .as_ref()
                    .filter(|_| counts_clients)
                    .map(|fields| fields.iter().map(|f| f.as_str().to_owned()).collect()),
            }
        })
        .collect();
    if let Some(why) = &labels.problem {
        verdicts.extend(unknown_coverage(&uncertain, judged, why));
        verdicts.sort_by(|a, b| a.policy.cmp(&b.policy));
    }
    let needs_count = counts_clients
        && covering
            .iter()
            .any(|policy| policy.max_clients_per_namespace.is_some());
    let approval = if counts_clients {
        approval_verdict(&covering, judged)
    } else {
        None
    };
    Evaluation {
        policies: set.len(),
        kind: judged.kind.as_str().to_owned(),
        name: judged.place.name.clone(),
        issuer: judged.issuer.to_owned(),
        namespace: judged.namespace.to_owned(),
        exists: judged.place.created.is_some(),
        namespace_labels: labels.labels.clone(),
        verdicts,
        broken: set.broken.clone(),
        approval,
        count_problem: match clients {
            Err(why) if needs_count => Some(why.to_owned()),
            _ => None,
        },
    }
}

/// The namespace's other OIDCClients, for the namespace limit: the judged client's own name and
/// clients being deleted do not count.
struct Neighbours<'a> {
    others: Vec<&'a CountedClient>,
    /// The namespace's labels, which the policies select namespaces by.
    labels: &'a BTreeMap<String, String>,
    /// The judged client's place among them.
    place: &'a CountedClient,
}

impl Neighbours<'_> {
    /// The other clients `policy` covers.
    fn covered_by(&self, policy: &CompiledPolicy) -> Vec<&CountedClient> {
        self.others
            .iter()
            .copied()
            .filter(|client| policy.covers(PolicyKind::OidcClient, self.labels, &client.issuer))
            .collect()
    }

    /// How many of them come before the judged client.
    fn earlier(&self, policy: &CompiledPolicy) -> usize {
        self.covered_by(policy)
            .into_iter()
            .filter(|client| client.before(self.place))
            .count()
    }

    /// Whether the judged client fits `policy`'s limit of `max`, by its violations (`mine`).
    fn limit_verdict(
        &self,
        policy: &CompiledPolicy,
        max: u32,
        mine: &[&Violation],
    ) -> LimitVerdict {
        let over = mine.iter().find(|v| v.rule == Rule::MaxClientsPerNamespace);
        LimitVerdict {
            max,
            covered: self.covered_by(policy).len(),
            earlier: self.earlier(policy),
            fits: over.is_none(),
            message: over.map(|v| v.message.clone()),
        }
    }
}

/// Every check of `policy` on the judged kind: refused when one of the policy's violations
/// (`mine`) names its rule and field.
fn rule_verdicts(
    policy: &CompiledPolicy,
    kind: PolicyKind,
    mine: &[&Violation],
) -> Vec<RuleVerdict> {
    policy
        .checks
        .iter()
        .filter(|check| check.kind == kind)
        .map(|check| {
            let broken = mine
                .iter()
                .find(|v| v.rule == check.rule && v.field == check.field);
            RuleVerdict {
                rule: check.rule.as_str().to_owned(),
                field: check.field.to_owned(),
                allowed: broken.is_none(),
                message: broken.map(|v| v.message.clone()),
            }
        })
        .collect()
}

/// The policies that select namespaces by label and would cover the resource but for its
/// namespace's labels, which could not be read (`why`).
fn unknown_coverage<'a>(
    uncertain: &'a [Arc<CompiledPolicy>],
    judged: &'a Judged<'_>,
    why: &'a str,
) -> impl Iterator<Item = PolicyVerdict> + 'a {
    uncertain
        .iter()
        .filter(|policy| {
            let coverage = &policy.coverage;
            (coverage.kinds.is_empty() || coverage.kinds.contains(&judged.kind))
                && (coverage.issuers.is_empty()
                    || coverage.issuers.iter().any(|i| i == judged.issuer))
        })
        .map(|policy| PolicyVerdict {
            policy: policy.name.clone(),
            coverage: Coverage::Unknown {
                why: why.to_owned(),
            },
            rules: Vec::new(),
            limit: None,
            approval_fields: None,
        })
}

/// Whether the covering policies want an approval of the judged client, and whether it has one.
fn approval_verdict(covering: &[&CompiledPolicy], judged: &Judged<'_>) -> Option<ApprovalVerdict> {
    let spec = judged.object.get("spec").unwrap_or(&Value::Null);
    match approval_standing(
        covering,
        spec,
        judged.generation,
        judged.written,
        judged.recorded,
        Approvals {
            generations: judged.approved,
        },
    ) {
        ApprovalStanding::NotRequired => None,
        ApprovalStanding::Unchanged { .. } => Some(ApprovalVerdict::Unchanged),
        ApprovalStanding::Approved { .. } => Some(ApprovalVerdict::Approved {
            generation: judged.generation,
        }),
        ApprovalStanding::Waiting {
            policies,
            fields,
            new_client,
        } => Some(ApprovalVerdict::Required {
            generation: judged.generation,
            policies,
            fields,
            new_client,
        }),
    }
}

/// What the policies say about one resource, as far as they could be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum PolicyOutcome {
    /// The ClientPolicy CRD is not installed: no policy applies.
    NotInstalled,
    /// The policies could not be listed: they were not checked.
    Unlisted {
        why: String,
    },
    Evaluated(Box<Evaluation>),
}

/// An approval as `diagnose` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalFact {
    pub name: String,
    pub generation: i64,
    pub uid: Option<String>,
    pub created: Option<Timestamp>,
}

impl ApprovalFact {
    /// Whether it counts for the client with this uid: it names no uid, or this one.
    pub fn counts_for(&self, uid: &str) -> bool {
        self.uid.as_deref().is_none_or(|mine| mine == uid)
    }
}

/// The generations the approvals approve for a client with this uid.
pub fn approved_generations(approvals: &[ApprovalFact], uid: &str) -> Vec<i64> {
    approvals
        .iter()
        .filter(|approval| approval.counts_for(uid))
        .map(|approval| approval.generation)
        .collect()
}

#[cfg(test)]
pub mod tests;
