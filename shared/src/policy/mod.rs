//! ClientPolicies compiled once into CEL checks, and what they say about one resource. The same
//! compiled form is evaluated here (by the reconciler and the plugin, with the `cel` crate) and
//! by the API server (the generated ValidatingAdmissionPolicy, [`admission`]).

pub mod admission;
mod approval;
pub(crate) mod cel_text;
pub mod cost;
mod rules;
mod selector;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::catalog::Cause;
use crate::resources::{ApprovalField, ClientPolicy, PolicyKind, PolicyMatch};

pub use approval::{
    ApprovalStanding, Approvals, approval_standing, approve_command, digest_of, waiting_for,
};
pub use rules::{Check, Rule, checks};
pub use selector::{
    SelectorProblem, matches as selector_matches, parse as parse_label_selector,
    problems as selector_problems,
};

/// The label every namespace carries with its own name (set by the API server).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Why the reconciler refuses a ClientPolicy (reason `PolicyRefused`): the API server would not
/// enforce what it generates, so it enforces nothing until fixed. `cause` is one of
/// [`Cause::InvalidSelector`], [`Cause::CostLimit`] and [`Cause::UncompilableRule`]; `field`
/// names the ClientPolicy's field at fault (`spec.match.namespaceSelector.matchLabels.env`,
/// `spec.rules.redirectUris`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ClientPolicy {policy}: {field}: {problem}")]
pub struct PolicyError {
    pub policy: String,
    pub cause: Cause,
    pub field: String,
    pub problem: String,
}

impl PolicyError {
    /// The field and the problem, as a condition message or `diagnose` says them.
    pub fn describe(&self) -> String {
        format!("{}: {}", self.field, self.problem)
    }
}

/// A policy ready to evaluate.
pub struct CompiledPolicy {
    pub name: String,
    pub uid: Option<String>,
    pub generation: Option<i64>,
    pub coverage: PolicyMatch,
    pub checks: Vec<Check>,
    /// Each check as evaluated here: parsed once, `matches` read as Go's RE2 reads it.
    programs: Vec<cel::IdedExpr>,
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
    /// Compiles a policy, or refuses it when the API server would refuse or could not run what
    /// it generates: a namespace selector with label text the API server refuses, a generated
    /// expression whose worst-case cost is over the API server's limit, a rule that does not
    /// compile.
    pub fn compile(policy: &ClientPolicy) -> Result<CompiledPolicy, PolicyError> {
        let name = kube::ResourceExt::name_any(policy);
        let fail = |cause: Cause, field: String, problem: String| PolicyError {
            policy: name.clone(),
            cause,
            field,
            problem,
        };
        if let Some(selector) = &policy.spec.coverage.namespace_selector {
            let found = selector::problems(selector, "spec.match.namespaceSelector");
            if let Some(first) = found.first() {
                let said: Vec<String> = found
                    .iter()
                    .map(|p| {
                        if p.field == first.field {
                            p.message.clone()
                        } else {
                            format!("{}: {}", p.field, p.message)
                        }
                    })
                    .collect();
                return Err(fail(
                    Cause::InvalidSelector,
                    first.field.clone(),
                    format!(
                        "{}; the API server refuses this namespace selector in the \
                         ValidatingAdmissionPolicy generated from the policy",
                        said.join("; ")
                    ),
                ));
            }
        }
        let checks = checks(policy);
        let programs = checks
            .iter()
            .map(|check| {
                local_form(&check.expression).map_err(|error| {
                    fail(
                        Cause::UncompilableRule,
                        format!("spec.rules.{}", check.rule),
                        format!("the generated check does not compile: {error}"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some((field, problem)) = rules::pattern_problems(policy).into_iter().next() {
            return Err(fail(
                Cause::UncompilableRule,
                field,
                format!(
                    "{problem}; the API server (Go's RE2) and the reconciler (Rust) would read \
                     its pattern differently"
                ),
            ));
        }
        check_costs(&checks).map_err(|(rule, problem)| {
            fail(Cause::CostLimit, format!("spec.rules.{rule}"), problem)
        })?;
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
        // `matches` as the API server reads it (see `local_form`); the name is the project's
        // own, so it cannot clash with the crate's `matches`.
        let registered = context.add_function(RE2_MATCHES, cached_matches);
        self.checks
            .iter()
            .zip(&self.programs)
            .filter(|(check, _)| check.kind == kind)
            .filter_map(|(check, program)| {
                let outcome = match &registered {
                    Ok(()) => cel::Value::resolve(program, &context),
                    Err(error) => Err(cel::ExecutionError::function_error(
                        "matches",
                        error.to_string(),
                    )),
                };
                let message = match outcome {
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

/// What `matches` is called under in the checks as evaluated here.
const RE2_MATCHES: &str = "nautheraRe2Matches";

/// A check's expression as the reconciler and the plugin evaluate it: the same text, parsed,
/// with every `matches` call renamed to [`RE2_MATCHES`]. The `cel` crate's own `matches` uses
/// Rust's regex syntax, whose `\s`, `\d`, `\w` and `\b` are Unicode where the API server's are
/// ASCII (and which cannot be replaced: the crate refuses a second `matches`); the renamed call
/// reads every pattern as Go's RE2 does (`crate::re2`).
fn local_form(expression: &str) -> Result<cel::IdedExpr, cel::ParseErrors> {
    let mut parsed = cel::parser::Parser::new().parse(expression)?;
    rename_matches(&mut parsed);
    Ok(parsed)
}

fn rename_matches(expr: &mut cel::IdedExpr) {
    use cel::common::ast::{EntryExpr, Expr};
    match &mut expr.expr {
        Expr::Call(call) => {
            if call.func_name == "matches" {
                RE2_MATCHES.clone_into(&mut call.func_name);
            }
            if let Some(target) = call.target.as_mut() {
                rename_matches(target);
            }
            call.args.iter_mut().for_each(rename_matches);
        }
        Expr::Select(select) => rename_matches(&mut select.operand),
        Expr::List(list) => list.elements.iter_mut().for_each(rename_matches),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    rename_matches(&mut entry.key);
                    rename_matches(&mut entry.value);
                }
            }
        }
        Expr::Struct(object) => {
            for entry in &mut object.entries {
                if let EntryExpr::StructField(field) = &mut entry.expr {
                    rename_matches(&mut field.value);
                }
            }
        }
        Expr::Comprehension(comprehension) => {
            let c = comprehension.as_mut();
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                rename_matches(part);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
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
            // As the API server reads it: Go's RE2, whose \s, \d, \w and \b are ASCII.
            let regex = crate::re2::compile(&pattern).map_err(|error| {
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

/// Checks that the API server could run every generated expression within its cost limits,
/// given the bounds the CRDs put on what the expressions read: each one within
/// [`cost::PER_CALL_LIMIT`], and those one object of a kind runs within
/// [`cost::RUNTIME_BUDGET`]. `Err` names the rule and says the estimate and the limit.
fn check_costs(checks: &[Check]) -> Result<(), (Rule, String)> {
    use cost::{PER_CALL_LIMIT, RUNTIME_BUDGET};
    let shown = |n: u64| {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    for kind in PolicyKind::ALL {
        let variables = object_bounds(kind);
        let mut total = 0u64;
        for check in checks {
            let expression = admission::validation_expression(check);
            let found = if check.kind == kind {
                cost::estimate(&expression, &variables)
            } else {
                // Short-circuited on an object of another kind: only the kind is compared.
                cost::estimate(
                    &format!("object.kind != {}", cel_text::string(check.kind.as_str())),
                    &variables,
                )
            }
            .map_err(|problem| (check.rule, format!("the generated check {problem}")))?;
            if found.cost > PER_CALL_LIMIT {
                let unbounded = if found.unbounded.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({} of the {} CRD has no maxItems or maxLength, so the API server \
                         takes it as large as a request)",
                        found.unbounded.join(", "),
                        kind.as_str()
                    )
                };
                let hint = match check.rule {
                    Rule::RedirectUris | Rule::PostLogoutRedirectUris => {
                        ": allow fewer hosts or path prefixes (every URI is matched against a \
                         pattern of all of them)"
                    }
                    _ => "",
                };
                return Err((
                    check.rule,
                    format!(
                        "the generated check of {} could cost up to {} CEL units on an {} the CRD \
                         admits{unbounded}, over the API server's limit of {} per expression \
                         (it would deny such a write with a cost error instead of the rule's \
                         message){hint}",
                        check.field,
                        shown(found.cost),
                        kind.as_str(),
                        shown(PER_CALL_LIMIT)
                    ),
                ));
            }
            total = total.saturating_add(found.cost);
        }
        if total > RUNTIME_BUDGET {
            let rule = checks
                .iter()
                .find(|c| c.kind == kind)
                .map_or(Rule::RedirectUris, |c| c.rule);
            return Err((
                rule,
                format!(
                    "the generated checks of an {} could cost up to {} CEL units together, over \
                     the API server's budget of {} for one admission policy",
                    kind.as_str(),
                    shown(total),
                    shown(RUNTIME_BUDGET)
                ),
            ));
        }
    }
    Ok(())
}

/// What the expressions of a kind see as `object`, bounded by the kind's CRD schema.
fn object_bounds(kind: PolicyKind) -> BTreeMap<String, cost::Bound> {
    use std::sync::OnceLock;
    static BOUNDS: OnceLock<BTreeMap<PolicyKind, cost::Bound>> = OnceLock::new();
    let all = BOUNDS.get_or_init(|| {
        crate::resources::crds()
            .into_iter()
            .filter_map(|crd| {
                let kind = PolicyKind::from_kind(&crd.spec.names.kind)?;
                let schema = crd
                    .spec
                    .versions
                    .first()?
                    .schema
                    .as_ref()?
                    .open_api_v3_schema
                    .as_ref()?;
                let schema = serde_json::to_value(schema).ok()?;
                let spec = schema.pointer("/properties/spec")?;
                let object = cost::Bound::Object(
                    [
                        (
                            "apiVersion".to_owned(),
                            cost::Bound::String(
                                format!("{}/{}", crate::GROUP, crate::VERSION).len() as u64,
                            ),
                        ),
                        (
                            "kind".to_owned(),
                            cost::Bound::String(kind.as_str().len() as u64),
                        ),
                        (
                            "metadata".to_owned(),
                            cost::Bound::Unbounded("metadata".to_owned()),
                        ),
                        ("spec".to_owned(), cost::Bound::of_schema(spec, "spec")),
                    ]
                    .into(),
                    None,
                );
                Some((kind, object))
            })
            .collect()
    });
    let object = all
        .get(&kind)
        .cloned()
        .unwrap_or_else(|| cost::Bound::Unbounded("object".to_owned()));
    [("object".to_owned(), object)].into()
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
