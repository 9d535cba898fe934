//! A policy's CEL: compiled once per policy revision, then evaluated for each binding and
//! parameter object in force, with the API server's messages for what fails (`failed
//! expression: ...`, `expression '...' resulted in error: ...`, `compilation error: ...`), within
//! the API server's runtime cost limits (see `cel_cost`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cel::Context;
use cel::objects::{Key, Map};
use serde_json::Value;

use crate::cel::{self as expressions, Program};
use crate::cel_cost::{self, Statics};
use crate::status::StatusReason;
use crate::store::Stored;

/// The variables of every policy expression. `authorizer` is left out: the emulator has no
/// authorizer library, so an expression using it fails to compile here (never passes).
pub const VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "namespaceObject",
    "variables",
];

/// The longest `messageExpression` result the API server uses.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// One binding of a policy to evaluate, once per parameter object.
#[derive(Debug)]
pub struct Invocation {
    pub policy: Arc<Stored>,
    pub binding: Arc<Stored>,
    pub params: Vec<Option<Value>>,
}

/// The request's variables, as JSON.
#[derive(Debug)]
pub struct Inputs {
    pub object: Value,
    pub old_object: Value,
    pub request: Value,
    pub namespace_object: Value,
}

/// A validation that failed (or, with `failurePolicy: Fail`, could not be evaluated).
#[derive(Debug, Clone)]
pub struct Failure {
    pub message: String,
    pub reason: StatusReason,
}

/// Evaluates every invocation, in order; the error is one of the sandbox itself.
pub fn run(invocations: &[&Invocation], inputs: &Inputs) -> Result<Vec<Vec<Failure>>, String> {
    expressions::sandbox(|| {
        let mut root = Context::with_env(expressions::env());
        for (name, value) in [
            ("object", &inputs.object),
            ("oldObject", &inputs.old_object),
            ("request", &inputs.request),
            ("namespaceObject", &inputs.namespace_object),
        ] {
            expressions::bind(&mut root, name, expressions::to_value(value, false));
        }
        invocations
            .iter()
            .map(|invocation| {
                let policy = compiled(&invocation.policy.value);
                invocation
                    .params
                    .iter()
                    .flat_map(|params| policy.evaluate(&root, params.as_ref()))
                    .collect()
            })
            .collect()
    })
}

/// One expression, or why it does not compile.
#[derive(Debug)]
struct Compiled {
    source: String,
    program: Result<Program, String>,
}

/// Why an expression gave no value.
enum Error {
    Compile(String),
    Runtime(String),
}

impl Compiled {
    fn new(source: &str, declared: &[&str], variables: &[&str]) -> Self {
        let program = Program::compile(source, declared)
            .and_then(|program| {
                let undefined = program
                    .fields_of("variables")
                    .find(|field| !variables.contains(field))
                    .map(|field| format!("ERROR: <input>:1:1: undefined field '{field}'"));
                undefined.map_or(Ok(program), Err)
            })
            .map_err(|error| {
                let hint = if error.contains("undeclared reference to 'authorizer'") {
                    " (the emulator does not implement the authorizer library)"
                } else {
                    ""
                };
                format!("compilation failed: {error}{hint}")
            });
        Self {
            source: source.to_owned(),
            program,
        }
    }

    /// Evaluates within the per-call cost limit: the value and what it cost.
    fn run(
        &self,
        context: &Context,
        failed: &HashMap<String, String>,
        statics: &Statics,
    ) -> Result<(cel::Value, u64), Error> {
        let program = self
            .program
            .as_ref()
            .map_err(|e| Error::Compile(e.clone()))?;
        if let Some(error) = program
            .fields_of("variables")
            .find_map(|field| failed.get(field))
        {
            return Err(Error::Runtime(error.clone()));
        }
        let cost = program
            .cost(context, statics, cel_cost::PER_CALL_LIMIT)
            .map_err(|_| Error::Runtime(cel_cost::LIMIT_EXCEEDED.to_owned()))?;
        program
            .evaluate(context)
            .map(|value| (value, cost))
            .map_err(Error::Runtime)
    }

    /// As a validation or match condition reports it.
    fn error(&self, error: Error) -> String {
        match error {
            Error::Compile(e) => format!("compilation error: {e}"),
            Error::Runtime(e) => format!("expression '{}' resulted in error: {e}", self.source),
        }
    }
}

#[derive(Debug)]
struct Validation {
    expression: Compiled,
    message: String,
    message_expression: Option<Compiled>,
    reason: StatusReason,
}

/// A policy's expressions, compiled.
#[derive(Debug)]
pub struct CompiledPolicy {
    ignore_errors: bool,
    variables: Vec<(String, Compiled)>,
    /// What the checker knows of each variable's type (see `cel_cost`).
    statics: Statics,
    conditions: Vec<Compiled>,
    validations: Vec<Validation>,
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or_default()
}

fn items(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

pub fn reason(text: &str) -> StatusReason {
    match text {
        "Forbidden" => StatusReason::Forbidden,
        "Unauthorized" => StatusReason::Unauthorized,
        "RequestEntityTooLarge" => StatusReason::RequestEntityTooLarge,
        _ => StatusReason::Invalid,
    }
}

impl CompiledPolicy {
    pub fn compile(policy: &Value) -> Self {
        let spec = &policy["spec"];
        let mut declared = VARIABLES.to_vec();
        if !spec["paramKind"].is_null() {
            declared.push("params");
        }
        let mut names: Vec<&str> = Vec::new();
        let mut variables = Vec::new();
        for variable in items(&spec["variables"]) {
            let name = text(variable, "name");
            variables.push((
                name.to_owned(),
                Compiled::new(text(variable, "expression"), &declared, &names),
            ));
            names.push(name);
        }
        let conditions = items(&spec["matchConditions"])
            .map(|c| Compiled::new(text(c, "expression"), &declared, &names))
            .collect();
        let validations = items(&spec["validations"])
            .map(|v| Validation {
                expression: Compiled::new(text(v, "expression"), &declared, &names),
                message: text(v, "message").trim().to_owned(),
                message_expression: Some(text(v, "messageExpression"))
                    .filter(|e| !e.trim().is_empty())
                    .map(|e| Compiled::new(e, &declared, &names)),
                reason: reason(text(v, "reason")),
            })
            .collect();
        let statics =
            cel_cost::variable_statics(variables.iter().filter_map(|(name, compiled)| {
                compiled
                    .program
                    .as_ref()
                    .ok()
                    .map(|program| (name.as_str(), program.expr()))
            }));
        Self {
            ignore_errors: text(spec, "failurePolicy") == "Ignore",
            variables,
            statics,
            conditions,
            validations,
        }
    }

    /// The failures of one evaluation with `params`.
    fn evaluate(&self, root: &Context, params: Option<&Value>) -> Vec<Failure> {
        let error = |message: String| {
            (!self.ignore_errors).then_some(Failure {
                message,
                reason: StatusReason::Invalid,
            })
        };
        let mut scope = root.new_inner_scope();
        let params = params.map_or(cel::Value::Null, |p| expressions::to_value(p, false));
        expressions::bind(&mut scope, "params", params);
        // Variables in order, each seeing those before; one that fails only fails what reads it.
        // What each cost counts against the budget once a validation reads it (the API server
        // evaluates them lazily).
        let mut values = HashMap::new();
        let mut failed = HashMap::new();
        let mut variable_costs = HashMap::new();
        for (name, compiled) in &self.variables {
            bind_variables(&mut scope, &values);
            match compiled.run(&scope, &failed, &self.statics) {
                Ok((value, cost)) => {
                    values.insert(Key::String(Arc::new(name.clone())), value);
                    variable_costs.insert(name.as_str(), cost);
                }
                Err(Error::Compile(e)) => {
                    failed.insert(
                        name.clone(),
                        format!("composited variable \"{name}\" fails to compile: {e}"),
                    );
                }
                Err(Error::Runtime(e)) => {
                    failed.insert(
                        name.clone(),
                        format!("composited variable \"{name}\" fails to evaluate: {e}"),
                    );
                }
            }
        }
        bind_variables(&mut scope, &values);
        // Any false condition skips the policy; otherwise an error is a failure.
        let mut errors = Vec::new();
        for condition in &self.conditions {
            match condition
                .run(&scope, &failed, &self.statics)
                .map(|(v, _)| v)
            {
                Ok(cel::Value::Bool(false)) => return Vec::new(),
                Ok(_) => {}
                Err(e) => errors.push(condition.error(e)),
            }
        }
        if !errors.is_empty() {
            let message = match errors.len() {
                1 => errors.remove(0),
                _ => format!("[{}]", errors.join(", ")),
            };
            return error(message).into_iter().collect();
        }
        let mut failures = Vec::new();
        let mut budget = cel_cost::RUNTIME_BUDGET;
        for validation in &self.validations {
            let outcome = validation.expression.run(&scope, &failed, &self.statics);
            // The budget pays for the expression and, the first time, for the variables it reads.
            let cost = outcome.as_ref().map_or(0, |(_, cost)| *cost)
                + validation
                    .expression
                    .program
                    .as_ref()
                    .map(|p| {
                        p.fields_of("variables")
                            .filter_map(|v| variable_costs.remove(v))
                            .sum::<u64>()
                    })
                    .unwrap_or(0);
            // Over budget, the binding's evaluation as a whole is an error, whatever came before.
            if cost > budget {
                return error(cel_cost::BUDGET_EXCEEDED.to_owned())
                    .into_iter()
                    .collect();
            }
            budget -= cost;
            match outcome.map(|(value, _)| value) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(_) => failures.push(Failure {
                    message: self.message(validation, &scope, &failed),
                    reason: validation.reason,
                }),
                Err(e) => failures.extend(error(validation.expression.error(e))),
            }
        }
        failures
    }

    /// A failed validation's message: its `messageExpression` when that yields a usable string,
    /// else its `message`, else `failed expression: <expression>`.
    fn message(
        &self,
        validation: &Validation,
        scope: &Context,
        failed: &HashMap<String, String>,
    ) -> String {
        let evaluated = validation
            .message_expression
            .as_ref()
            .and_then(|m| m.run(scope, failed, &self.statics).ok())
            .and_then(|(value, _)| match value {
                cel::Value::String(s) => Some(s.trim().to_owned()),
                _ => None,
            })
            .filter(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'));
        evaluated
            .or_else(|| Some(validation.message.clone()).filter(|m| !m.is_empty()))
            .unwrap_or_else(|| {
                format!("failed expression: {}", validation.expression.source.trim())
            })
    }
}

fn bind_variables(scope: &mut Context, values: &HashMap<Key, cel::Value>) {
    let map = cel::Value::Map(Map {
        map: Arc::new(values.clone()),
    });
    expressions::bind(scope, "variables", map);
}

/// A policy's compiled expressions, compiled once per policy object and resourceVersion.
pub fn compiled(policy: &Value) -> Arc<CompiledPolicy> {
    type Cache = Mutex<HashMap<(String, String, String), Arc<CompiledPolicy>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let meta = |key: &str| {
        policy["metadata"][key]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let key = (meta("name"), meta("uid"), meta("resourceVersion"));
    let Ok(mut cache) = CACHE.get_or_init(Mutex::default).lock() else {
        return Arc::new(CompiledPolicy::compile(policy));
    };
    // Every emulator of a process shares it: bounded rather than pruned per store.
    if cache.len() > 1024 {
        cache.clear();
    }
    cache
        .entry(key)
        .or_insert_with(|| Arc::new(CompiledPolicy::compile(policy)))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(rv: &str, validations: Value) -> Value {
        json!({"metadata": {"name": "p", "uid": "u", "resourceVersion": rv},
            "spec": {"failurePolicy": "Fail", "validations": validations,
                "variables": [{"name": "count", "expression": "size(object.data)"},
                    {"name": "broken", "expression": "object.missing"}]}})
    }

    fn failures(policy: &Value, object: Value) -> Vec<String> {
        let invocation = Invocation {
            policy: Stored::new(policy.clone()),
            binding: Stored::new(json!({})),
            params: vec![None],
        };
        let inputs = Inputs {
            object,
            old_object: Value::Null,
            request: json!({"operation": "CREATE"}),
            namespace_object: Value::Null,
        };
        run(&[&invocation], &inputs).unwrap()[0]
            .iter()
            .map(|f| f.message.clone())
            .collect()
    }

    #[test]
    fn validations_say_why_they_failed() {
        let p = policy(
            "1",
            json!([
                {"expression": "variables.count < 2"},
                {"expression": "variables.count < 2", "message": "too much data"},
                {"expression": "variables.count < 2", "messageExpression": "'has ' + string(variables.count)"},
                {"expression": "variables.broken == 1"},
                {"expression": "authorizer.group('').resource('x').check('get').allowed()"},
                {"expression": "variables.count >= 2"},
            ]),
        );
        let messages = failures(&p, json!({"data": {"a": "1", "b": "2"}}));
        assert_eq!(messages[0], "failed expression: variables.count < 2");
        assert_eq!(messages[1], "too much data");
        assert_eq!(messages[2], "has 2");
        assert_eq!(
            messages[3],
            "expression 'variables.broken == 1' resulted in error: composited variable \"broken\" fails to evaluate: no such key: missing"
        );
        assert!(
            messages[4].starts_with("compilation error: compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer'"),
            "{}",
            messages[4]
        );
        assert_eq!(messages.len(), 5);
    }

    #[test]
    fn policies_compile_once_per_resource_version() {
        let first = compiled(&policy("7", json!([{"expression": "true"}])));
        let again = compiled(&policy("7", json!([{"expression": "true"}])));
        let updated = compiled(&policy("8", json!([{"expression": "false"}])));
        assert!(Arc::ptr_eq(&first, &again));
        assert!(!Arc::ptr_eq(&first, &updated));
    }
}
