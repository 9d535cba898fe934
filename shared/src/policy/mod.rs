//! ClientPolicies compiled once into CEL checks, and what they say about one resource. The same
//! compiled form is evaluated here (by the reconciler and the plugin, with the `cel` crate) and
//! by the API server (the generated ValidatingAdmissionPolicy, [`admission`]).

pub mod admission;
mod approval;
mod cel_text;
mod rules;
mod selector;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::resources::{ApprovalField, ClientPolicy, PolicyKind, PolicyMatch};

pub use approval::{ApprovalStanding, Approvals, approval_standing, digest_of, waiting_for};
pub use rules::{Check, Rule, checks};
pub use selector::{matches as selector_matches, parse as parse_label_selector};

/// The label every namespace carries with its own name (set by the API server).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A policy that cannot be compiled: its status says why, and it enforces nothing until fixed
/// (the API server refuses such a policy's fields at admission, so this is rare).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ClientPolicy {policy}: {problem}")]
pub struct PolicyError {
    pub policy: String,
    pub problem: String,
}

/// A policy ready to evaluate.
pub struct CompiledPolicy {
    pub name: String,
    pub uid: Option<String>,
    pub generation: Option<i64>,
    pub coverage: PolicyMatch,
    pub checks: Vec<Check>,
    programs: Vec<cel::Program>,
    pub max_clients_per_namespace: Option<u32>,
    /// The fields whose change needs an approval, when the policy requires approvals.
    pub approval: Option<Vec<ApprovalField>>,
}

impl fmt::Debug for CompiledPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledPolicy")
            .field("name", &self.name)
            .field("generation", &self.generation)
            .field("checks", &self.checks)
            .finish_non_exhaustive()
    }
}

/// A rule a resource breaks.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub policy: String,
    pub rule: Rule,
    pub field: String,
    pub message: String,
}

impl CompiledPolicy {
    pub fn compile(policy: &ClientPolicy) -> Result<CompiledPolicy, PolicyError> {
        let name = kube::ResourceExt::name_any(policy);
        let fail = |problem: String| PolicyError {
            policy: name.clone(),
            problem,
        };
        if let Some(selector) = &policy.spec.coverage.namespace_selector
            && let Some(problem) = selector::problems(selector, "spec.match.namespaceSelector")
                .into_iter()
                .next()
        {
            return Err(fail(problem));
        }
        let checks = checks(policy);
        let programs = checks
            .iter()
            .map(|check| {
                cel::Program::compile(&check.expression)
                    .map_err(|error| fail(format!("rule {} does not compile: {error}", check.rule)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rules = &policy.spec.rules;
        Ok(CompiledPolicy {
            uid: policy.metadata.uid.clone(),
            generation: policy.metadata.generation,
            coverage: policy.spec.coverage.clone(),
            checks,
            programs,
            max_clients_per_namespace: rules.max_clients_per_namespace,
            approval: rules.approval.as_ref().map(|a| {
                let mut fields = a.fields.clone();
                fields.sort();
                fields.dedup();
                fields
            }),
            name,
        })
    }

    /// Whether the policy covers a resource of this kind and issuer in a namespace with these
    /// labels.
    pub fn covers(
        &self,
        kind: PolicyKind,
        namespace_labels: &BTreeMap<String, String>,
        issuer: &str,
    ) -> bool {
        let coverage = &self.coverage;
        (coverage.kinds.is_empty() || coverage.kinds.contains(&kind))
            && (coverage.issuers.is_empty() || coverage.issuers.iter().any(|i| i == issuer))
            && coverage
                .namespace_selector
                .as_ref()
                .is_none_or(|selector| selector::matches(selector, namespace_labels))
    }

    /// The checks of this kind the object fails. An expression that cannot be evaluated counts
    /// as failed, as the admission policy's `failurePolicy: Fail` has it.
    pub fn violations(&self, kind: PolicyKind, object: &cel::Value) -> Vec<Violation> {
        let mut context = cel::Context::default();
        context.add_variable_from_value("object", object.clone());
        // The crate compiles a `matches` pattern on every call; a policy's patterns are few and
        // fixed, so they are compiled once.
        let _ = context.add_function("matches", cached_matches);
        self.checks
            .iter()
            .zip(&self.programs)
            .filter(|(check, _)| check.kind == kind)
            .filter_map(|(check, program)| {
                let message = match program.execute(&context) {
                    Ok(cel::Value::Bool(true)) => return None,
                    Ok(cel::Value::Bool(false)) => check.message.clone(),
                    Ok(other) => {
                        format!("{}: evaluated to {other:?}, not a boolean", check.message)
                    }
                    Err(error) => format!("{} (could not be evaluated: {error})", check.message),
                };
                Some(Violation {
                    policy: self.name.clone(),
                    rule: check.rule,
                    field: check.field.to_owned(),
                    message,
                })
            })
            .collect()
    }
}

/// The patterns `matches` was called with, compiled; bounded, as patterns come from policies.
fn cached_matches(
    cel::extractors::This(text): cel::extractors::This<std::sync::Arc<String>>,
    pattern: std::sync::Arc<String>,
) -> cel::ResolveResult {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    const KEPT: usize = 512;
    static COMPILED: OnceLock<Mutex<HashMap<String, regex::Regex>>> = OnceLock::new();
    let cache = COMPILED.get_or_init(Mutex::default);
    let known = cache
        .lock()
        .ok()
        .and_then(|c| c.get(pattern.as_str()).cloned());
    let regex = match known {
        Some(regex) => regex,
        None => {
            let regex = regex::Regex::new(&pattern).map_err(|error| {
                cel::ExecutionError::function_error(
                    "matches",
                    format!("'{pattern}' not a valid regex: {error}"),
                )
            })?;
            if let Ok(mut cache) = cache.lock() {
                if cache.len() >= KEPT {
                    cache.clear();
                }
                cache.insert(pattern.as_str().to_owned(), regex.clone());
            }
            regex
        }
    };
    Ok(cel::Value::Bool(regex.is_match(&text)))
}

/// A resource as the policies see it.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    pub kind: PolicyKind,
    pub namespace: &'a str,
    /// The namespace's labels (with its name label).
    pub namespace_labels: &'a BTreeMap<String, String>,
    pub issuer: &'a str,
    /// The whole object, as the API server stores it (defaults filled in).
    pub object: &'a Value,
}

/// The object as CEL sees it; `Null` if it cannot be converted (never for JSON).
pub fn cel_object(object: &Value) -> cel::Value {
    cel::to_value(object).unwrap_or(cel::Value::Null)
}

/// The policies that cover a subject, in name order.
pub fn covering<'p>(
    policies: &'p [std::sync::Arc<CompiledPolicy>],
    subject: &Subject<'_>,
) -> Vec<&'p CompiledPolicy> {
    let mut covering: Vec<&CompiledPolicy> = policies
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| p.covers(subject.kind, subject.namespace_labels, subject.issuer))
        .collect();
    covering.sort_by(|a, b| a.name.cmp(&b.name));
    covering
}

/// Every rule of the covering policies the subject breaks, including the namespace limit:
/// `earlier` counts, for a policy, the OIDCClients in the namespace that it covers and that were
/// created before this one (they keep their place; this one is over the limit).
pub fn violations(
    covering: &[&CompiledPolicy],
    subject: &Subject<'_>,
    earlier: &dyn Fn(&CompiledPolicy) -> usize,
) -> Vec<Violation> {
    let object = cel_object(subject.object);
    let mut found = Vec::new();
    for policy in covering {
        found.extend(policy.violations(subject.kind, &object));
        if subject.kind == PolicyKind::OidcClient
            && let Some(max) = policy.max_clients_per_namespace
        {
            let before = earlier(policy);
            if before >= max as usize {
                found.push(Violation {
                    policy: policy.name.clone(),
                    rule: Rule::MaxClientsPerNamespace,
                    field: "metadata.namespace".to_owned(),
                    message: format!(
                        "ClientPolicy {}, rule {}: namespace {} may hold {max} OIDCClient(s) under this policy and {before} were created before this one",
                        policy.name,
                        Rule::MaxClientsPerNamespace,
                        subject.namespace
                    ),
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests;
