//! The CEL rules of structural schemas (`x-kubernetes-validations`): compiled when a
//! CustomResourceDefinition is written (a rule that does not compile refuses the definition, as
//! the API server does) and evaluated on every write of a custom resource. Transition rules
//! (those reading `oldSelf`) apply only on an update that has the old value, unless the rule sets
//! `optionalOldSelf`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use crate::cel::{self, Program};
use crate::status::Cause;

const DECLARED: &[&str] = &["self", "oldSelf"];

/// An expression, or why it does not compile.
type Compiled = Arc<Result<Program, String>>;

/// A rule's expressions, compiled once per text.
fn compiled(source: &str) -> Compiled {
    static CACHE: OnceLock<Mutex<HashMap<String, Compiled>>> = OnceLock::new();
    let compile = || Arc::new(Program::compile(source, DECLARED));
    let Ok(mut cache) = CACHE.get_or_init(Mutex::default).lock() else {
        return compile();
    };
    // Random rule texts (fuzzing, hostile clients) must not grow it without end.
    if cache.len() > 4096 {
        cache.clear();
    }
    cache
        .entry(source.to_owned())
        .or_insert_with(compile)
        .clone()
}

/// Whether a schema holds any rule.
pub fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.contains_key("x-kubernetes-validations") || map.values().any(has_rules)
        }
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

/// Why the rules of a CustomResourceDefinition's schemas do not compile, by field.
pub fn check_definition(crd: &Value) -> Vec<Cause> {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let schemas: Vec<(usize, &Value)> = versions
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.pointer("/schema/openAPIV3Schema").map(|s| (i, s)))
        .collect();
    if !schemas.iter().any(|(_, s)| has_rules(s)) {
        return Vec::new();
    }
    // The API server keeps one schema shared by every version as `spec.validation` and names
    // its fields from there.
    let shared = schemas.len() == versions.len() && schemas.windows(2).all(|w| w[0].1 == w[1].1);
    let roots: Vec<(String, &Value)> = if shared {
        schemas
            .first()
            .map(|(_, s)| ("spec.validation.openAPIV3Schema".to_owned(), *s))
            .into_iter()
            .collect()
    } else {
        schemas
            .iter()
            .map(|(i, s)| (format!("spec.versions[{i}].schema.openAPIV3Schema"), *s))
            .collect()
    };
    cel::sandbox(|| {
        let mut causes = Vec::new();
        for (path, schema) in roots {
            check_schema(schema, &path, None, &mut causes);
        }
        causes
    })
    .unwrap_or_else(|error| {
        vec![Cause {
            kind: "InternalError",
            message: format!("Internal error: {error}"),
            field: "spec.validation.openAPIV3Schema".into(),
        }]
    })
}

/// `uncorrelatable`: the path of the outermost enclosing list that is not a `map` list, whose
/// items an update cannot pair with the stored ones, so no rule under it may read `oldSelf`.
fn check_schema(schema: &Value, path: &str, uncorrelatable: Option<&str>, causes: &mut Vec<Cause>) {
    // Children first, as the API server reports them.
    if let Some(properties) = schema["properties"].as_object() {
        for (key, child) in properties {
            check_schema(
                child,
                &format!("{path}.properties[{key}]"),
                uncorrelatable,
                causes,
            );
        }
    }
    if let Some(child) = schema.get("items").filter(|c| c.is_object()) {
        // Only the items of a `map` list are paired by key.
        let unpaired = (schema["x-kubernetes-list-type"].as_str() != Some("map")).then_some(path);
        check_schema(
            child,
            &format!("{path}.items"),
            uncorrelatable.or(unpaired),
            causes,
        );
    }
    if let Some(child) = schema.get("additionalProperties").filter(|c| c.is_object()) {
        check_schema(
            child,
            &format!("{path}.additionalProperties"),
            uncorrelatable,
            causes,
        );
    }
    if let Some(rules) = schema["x-kubernetes-validations"].as_array() {
        for (i, rule) in rules.iter().enumerate() {
            let field = |child: &str| format!("{path}.x-kubernetes-validations[{i}].{child}");
            let text = rule["rule"].as_str().unwrap_or_default();
            if text.trim().is_empty() {
                causes.push(Cause {
                    kind: "FieldValueRequired",
                    message: "Required value: rule is not specified".into(),
                    field: field("rule"),
                });
                continue;
            }
            let uses_old_self = match compiled(text).as_ref() {
                Err(error) => {
                    causes.push(Cause {
                        kind: "FieldValueInvalid",
                        message: format!(
                            "Invalid value: {}: compilation failed: {error}",
                            go_rule(rule)
                        ),
                        field: field("rule"),
                    });
                    false
                }
                Ok(program) => program.uses("oldSelf"),
            };
            match (uses_old_self, uncorrelatable) {
                (true, Some(list)) => causes.push(Cause {
                    kind: "FieldValueInvalid",
                    message: format!(
                        "Invalid value: {}: oldSelf cannot be used on the uncorrelatable portion of the schema within {list}",
                        crate::schema::quoted(&rule["rule"])
                    ),
                    field: field("rule"),
                }),
                (false, _) => {
                    if let Some(optional) = rule.get("optionalOldSelf").filter(|v| !v.is_null()) {
                        causes.push(Cause {
                            kind: "FieldValueInvalid",
                            message: format!(
                                "Invalid value: {optional}: may not be set if oldSelf is not used in rule"
                            ),
                            field: field("optionalOldSelf"),
                        });
                    }
                }
                (true, None) => {}
            }
            if let Some(expression) = rule["messageExpression"]
                .as_str()
                .filter(|e| !e.trim().is_empty())
                && let Err(error) = compiled(expression).as_ref()
            {
                causes.push(Cause {
                    kind: "FieldValueInvalid",
                    message: format!(
                        "Invalid value: {}: messageExpression compilation failed: {error}",
                        go_rule(rule)
                    ),
                    field: field("messageExpression"),
                });
            }
        }
    }
}

/// A rule the way the API server prints it in its message: its Go value as JSON, with the Go
/// field names (unset strings empty, unset pointers `null`).
fn go_rule(rule: &Value) -> String {
    // Go's encoder escapes what HTML would read.
    let go_json = |value: &Value| {
        value
            .to_string()
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
    };
    let text = |key: &str| go_json(&json!(rule[key].as_str().unwrap_or_default()));
    let pointer = |key: &str| go_json(rule.get(key).unwrap_or(&Value::Null));
    let fields = [
        ("Rule", text("rule")),
        ("Message", text("message")),
        ("MessageExpression", text("messageExpression")),
        ("Reason", pointer("reason")),
        ("FieldPath", text("fieldPath")),
        ("OptionalOldSelf", pointer("optionalOldSelf")),
    ];
    let parts: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("\"{name}\":{value}"))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// Evaluates a schema node's rules against its value (`old` is the stored value on an update),
/// in the CEL sandbox.
pub fn evaluate(
    value: &Value,
    schema: &Value,
    path: &str,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    let Some(rules) = schema["x-kubernetes-validations"].as_array() else {
        return;
    };
    run_in_sandbox(rules, schema, value, path, old, Rules::All, causes);
}

/// Evaluates a schema node's transition rules (those reading `oldSelf`) against a value an
/// update leaves as it was: ratcheting spares it every other check, never these.
pub fn evaluate_transitions(
    value: &Value,
    schema: &Value,
    path: &str,
    old: &Value,
    causes: &mut Vec<Cause>,
) {
    let Some(rules) = schema["x-kubernetes-validations"].as_array() else {
        return;
    };
    // Most rules do not mention it; those are not worth a trip to the sandbox.
    let mentions_old = |rule: &Value| rule["rule"].as_str().is_some_and(|r| r.contains("oldSelf"));
    if rules.iter().any(mentions_old) {
        run_in_sandbox(
            rules,
            schema,
            value,
            path,
            Some(old),
            Rules::Transitions,
            causes,
        );
    }
}

/// Which of a node's rules to evaluate.
#[derive(Clone, Copy, PartialEq)]
enum Rules {
    All,
    Transitions,
}

fn run_in_sandbox(
    rules: &[Value],
    schema: &Value,
    value: &Value,
    path: &str,
    old: Option<&Value>,
    which: Rules,
    causes: &mut Vec<Cause>,
) {
    // The API server names the node's schema type as the invalid value, never the value.
    let type_name = schema["type"].as_str().unwrap_or_default();
    match cel::sandbox(|| {
        let mut found = Vec::new();
        evaluate_rules(rules, type_name, value, path, old, which, &mut found);
        found
    }) {
        Ok(found) => causes.extend(found),
        Err(error) => causes.push(Cause {
            kind: "InternalError",
            message: format!("Internal error: {error}"),
            field: path.to_owned(),
        }),
    }
}

fn evaluate_rules(
    rules: &[Value],
    type_name: &str,
    value: &Value,
    path: &str,
    old: Option<&Value>,
    which: Rules,
    causes: &mut Vec<Cause>,
) {
    for rule in rules {
        let Some(text) = rule["rule"].as_str() else {
            continue;
        };
        let program = compiled(text);
        let transition = matches!(program.as_ref(), Ok(program) if program.uses("oldSelf"));
        if which == Rules::Transitions && !transition {
            continue;
        }
        let failure = match program.as_ref() {
            // Refused when the definition was written; a definition stored before that check
            // still gets the error, never a pass.
            Err(error) => format!("compilation failed: {error}"),
            Ok(program) => {
                let optional_old = rule["optionalOldSelf"].as_bool() == Some(true);
                if program.uses("oldSelf") && old.is_none() && !optional_old {
                    continue;
                }
                let mut context = ::cel::Context::with_env(cel::env());
                cel::bind(&mut context, "self", cel::to_value(value, true));
                let old_value = old.map(|o| cel::to_value(o, true));
                if optional_old {
                    cel::bind(&mut context, "oldSelf", cel::optional(old_value));
                } else if let Some(old_value) = old_value {
                    cel::bind(&mut context, "oldSelf", old_value);
                }
                match program.evaluate(&context) {
                    Ok(::cel::Value::Bool(true)) => continue,
                    Ok(::cel::Value::Bool(false)) => message(rule, text, &context),
                    Ok(other) => format!("rule evaluated to {other:?}, not a bool: {text}"),
                    Err(error) => format!("{error} evaluating rule: {text}"),
                }
            }
        };
        let mut field = path.to_owned();
        if let Some(extra) = rule["fieldPath"].as_str() {
            field.push_str(extra);
            field = field.trim_start_matches('.').to_owned();
        }
        let (kind, message) = match rule["reason"].as_str() {
            Some("FieldValueForbidden") => ("FieldValueForbidden", format!("Forbidden: {failure}")),
            Some("FieldValueRequired") => {
                ("FieldValueRequired", format!("Required value: {failure}"))
            }
            Some("FieldValueDuplicate") => {
                ("FieldValueDuplicate", format!("Duplicate value: {failure}"))
            }
            _ => (
                "FieldValueInvalid",
                format!("Invalid value: {type_name:?}: {failure}"),
            ),
        };
        causes.push(Cause {
            kind,
            message,
            field,
        });
    }
}

/// The message of a failed rule: its `messageExpression` when that yields a non-empty string,
/// else its `message`, else `failed rule: <rule>`.
fn message(rule: &Value, text: &str, context: &::cel::Context) -> String {
    let evaluated = rule["messageExpression"]
        .as_str()
        .and_then(|expression| {
            compiled(expression)
                .as_ref()
                .as_ref()
                .ok()
                .map(|p| p.evaluate(context))
        })
        .and_then(|result| match result {
            Ok(::cel::Value::String(s)) => Some(s.trim().to_owned()),
            _ => None,
        })
        .filter(|m| !m.is_empty() && !m.contains('\n'));
    evaluated
        .or_else(|| rule["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("failed rule: {text}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(rules: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {"spec": {"type": "object", "x-kubernetes-validations": rules}}
        }}}]}})
    }

    #[test]
    fn a_rule_that_does_not_compile_refuses_the_definition() {
        let causes = check_definition(&crd(json!([
            {"rule": "self.a == 1"},
            {"rule": "self.a ==", "message": "m"},
            {"rule": "object.a == 1"},
            {"rule": "self.a == 1", "messageExpression": "'a' +"},
        ])));
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule",
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[2].rule",
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[3].messageExpression",
            ]
        );
        assert!(
            causes[0].message.starts_with(
                "Invalid value: {\"Rule\":\"self.a ==\",\"Message\":\"m\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: compilation failed: ERROR: <input>:1:10: Syntax error"
            ),
            "{}",
            causes[0].message
        );
        assert!(
            causes[1]
                .message
                .contains("undeclared reference to 'object'")
        );
        assert!(check_definition(&crd(json!([{"rule": "self.a == oldSelf.a"}]))).is_empty());
    }

    #[test]
    fn the_projects_definitions_compile() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
        let mut checked = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let crd: Value = serde_saphyr::from_str(&text).unwrap();
            if crd["kind"] == "CustomResourceDefinition" {
                assert_eq!(check_definition(&crd), [], "{}", path.display());
                checked += 1;
            }
        }
        assert!(checked > 0);
    }

    #[test]
    fn transition_rules_apply_to_updates_only() {
        let schema = json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.slug == oldSelf.slug", "message": "slug is immutable"},
            {"rule": "!oldSelf.hasValue() || oldSelf.value().n <= self.n", "optionalOldSelf": true,
             "messageExpression": "'n may only grow, not to ' + string(self.n)"}
        ]});
        let run = |value: Value, old: Option<Value>| {
            cel::sandbox(|| {
                let mut causes = Vec::new();
                evaluate(&value, &schema, "spec", old.as_ref(), &mut causes);
                causes
            })
            .unwrap()
        };
        assert!(run(json!({"slug": "a", "n": 1}), None).is_empty());
        let causes = run(
            json!({"slug": "b", "n": 1}),
            Some(json!({"slug": "a", "n": 2})),
        );
        let messages: Vec<&str> = causes.iter().map(|c| c.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "Invalid value: \"object\": slug is immutable",
                "Invalid value: \"object\": n may only grow, not to 1"
            ]
        );
    }
}
