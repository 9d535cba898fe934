//! What the API server refuses in a ValidatingAdmissionPolicy or binding, and the defaults it
//! fills in (`failurePolicy: Fail`, `matchPolicy: Equivalent`, empty selectors, rule scope `*`).
//! Expressions must compile, with `authorizer` declared as the server declares it and the fields
//! of `request`, `namespaceObject` and `variables` checked against their types (`type_check`).

use serde_json::{Value, json};

use super::evaluate::VARIABLES;
use crate::cel::{self, Program};
use crate::status::Cause;

fn required(field: String, detail: &str) -> Cause {
    Cause {
        kind: "FieldValueRequired",
        message: if detail.is_empty() {
            "Required value".into()
        } else {
            format!("Required value: {detail}")
        },
        field,
    }
}

fn not_supported(field: String, value: &Value, supported: &[&str]) -> Cause {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause {
        kind: "FieldValueNotSupported",
        message: format!(
            "Unsupported value: {}: supported values: {}",
            value,
            supported.join(", ")
        ),
        field,
    }
}

fn invalid(field: String, value: &Value, detail: &str) -> Cause {
    Cause {
        kind: "FieldValueInvalid",
        message: format!("Invalid value: {value}: {detail}"),
        field,
    }
}

fn items(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

fn blank(value: &Value) -> bool {
    value.as_str().is_none_or(|s| s.trim().is_empty())
}

/// Checks one value against the allowed ones (absent passes when `optional`).
fn one_of(causes: &mut Vec<Cause>, value: &Value, field: String, allowed: &[&str]) {
    if !value.as_str().is_some_and(|v| allowed.contains(&v)) {
        causes.push(not_supported(field, value, allowed));
    }
}

fn default_match_resources(resources: &mut Value) {
    if !resources.is_object() {
        return;
    }
    for (key, default) in [
        ("matchPolicy", json!("Equivalent")),
        ("namespaceSelector", json!({})),
        ("objectSelector", json!({})),
    ] {
        if resources[key].is_null() {
            resources[key] = default;
        }
    }
    for rules in ["resourceRules", "excludeResourceRules"] {
        if let Some(rules) = resources[rules].as_array_mut() {
            for rule in rules
                .iter_mut()
                .filter(|r| r.is_object() && r["scope"].is_null())
            {
                rule["scope"] = json!("*");
            }
        }
    }
}

/// Label selectors: known operators, values where they belong.
fn check_selector(causes: &mut Vec<Cause>, selector: &Value, path: &str) {
    for (i, expression) in items(&selector["matchExpressions"]).iter().enumerate() {
        let field = |child: &str| format!("{path}.matchExpressions[{i}].{child}");
        let values = expression["values"].as_array().map_or(0, Vec::len);
        match expression["operator"].as_str() {
            Some("In" | "NotIn") if values == 0 => causes.push(required(
                field("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            Some("Exists" | "DoesNotExist") if values > 0 => causes.push(Cause {
                kind: "FieldValueForbidden",
                message:
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                        .into(),
                field: field("values"),
            }),
            Some("In" | "NotIn" | "Exists" | "DoesNotExist") => {}
            _ => causes.push(invalid(
                field("operator"),
                &expression["operator"],
                "not a valid selector operator",
            )),
        }
    }
}

fn check_match_resources(causes: &mut Vec<Cause>, resources: &Value, path: &str) {
    one_of(
        causes,
        &resources["matchPolicy"],
        format!("{path}.matchPolicy"),
        &["Equivalent", "Exact"],
    );
    for selector in ["namespaceSelector", "objectSelector"] {
        check_selector(causes, &resources[selector], &format!("{path}.{selector}"));
    }
    for rules in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in items(&resources[rules]).iter().enumerate() {
            let field = |child: &str| format!("{path}.{rules}[{i}].{child}");
            for list in ["apiGroups", "apiVersions", "resources", "operations"] {
                if items(&rule[list]).is_empty() {
                    causes.push(required(field(list), ""));
                }
            }
            for (j, operation) in items(&rule["operations"]).iter().enumerate() {
                one_of(
                    causes,
                    operation,
                    format!("{}[{j}]", field("operations")),
                    &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
                );
            }
            one_of(
                causes,
                &rule["scope"],
                field("scope"),
                &["*", "Cluster", "Namespaced"],
            );
        }
    }
}

/// An expression that must be there and compile: parse, declared names and then the types of
/// `request`, `namespaceObject` and `variables` (`typed`, the checker's errors by field).
fn check_expression(
    causes: &mut Vec<Cause>,
    value: &Value,
    field: String,
    declared: &[&str],
    detail: &str,
    typed: &[(String, String)],
) {
    let Some(source) = value.as_str().filter(|s| !s.trim().is_empty()) else {
        causes.push(required(field, detail));
        return;
    };
    let compiled = cel::sandbox(|| Program::compile(source, declared).map(|_| ()));
    match compiled {
        Ok(Ok(())) => {
            if let Some((_, errors)) = typed.iter().find(|(f, _)| *f == field) {
                causes.push(invalid(
                    field,
                    value,
                    &format!("compilation failed: {errors}"),
                ));
            }
        }
        Ok(Err(error)) => causes.push(invalid(
            field,
            value,
            &format!("compilation failed: {error}"),
        )),
        Err(error) => causes.push(invalid(field, value, &error)),
    }
}

fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Defaults and validates a policy; the causes are empty when it is accepted.
pub fn validate_policy(policy: &mut Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if !policy["spec"].is_object() {
        return vec![required("spec".into(), "")];
    }
    let spec = &mut policy["spec"];
    if spec["failurePolicy"].is_null() {
        spec["failurePolicy"] = json!("Fail");
    }
    default_match_resources(&mut spec["matchConstraints"]);
    let spec = &policy["spec"];
    one_of(
        &mut causes,
        &spec["failurePolicy"],
        "spec.failurePolicy".into(),
        &["Fail", "Ignore"],
    );
    let mut declared = VARIABLES.to_vec();
    declared.push("authorizer");
    if !spec["paramKind"].is_null() {
        declared.push("params");
        for key in ["apiVersion", "kind"] {
            if blank(&spec["paramKind"][key]) {
                causes.push(required(format!("spec.paramKind.{key}"), ""));
            }
        }
    }
    let typed = cel::sandbox(|| super::type_check::creation_errors(spec)).unwrap_or_default();
    let constraints = &spec["matchConstraints"];
    if constraints.is_null() {
        causes.push(required("spec.matchConstraints".into(), ""));
    } else {
        check_match_resources(&mut causes, constraints, "spec.matchConstraints");
        if items(&constraints["resourceRules"]).is_empty() {
            causes.push(required("spec.matchConstraints.resourceRules".into(), ""));
        }
    }
    for (i, condition) in items(&spec["matchConditions"]).iter().enumerate() {
        let path = format!("spec.matchConditions[{i}]");
        if blank(&condition["name"]) {
            causes.push(required(format!("{path}.name"), ""));
        }
        check_expression(
            &mut causes,
            &condition["expression"],
            format!("{path}.expression"),
            &declared,
            "",
            &typed,
        );
    }
    for (i, variable) in items(&spec["variables"]).iter().enumerate() {
        let path = format!("spec.variables[{i}]");
        match variable["name"].as_str().filter(|n| !n.trim().is_empty()) {
            None => causes.push(required(format!("{path}.name"), "name is not specified")),
            Some(name) if !is_cel_identifier(name) => causes.push(invalid(
                format!("{path}.name"),
                &variable["name"],
                "name is not a valid CEL identifier",
            )),
            Some(_) => {}
        }
        check_expression(
            &mut causes,
            &variable["expression"],
            format!("{path}.expression"),
            &declared,
            "expression is not specified",
            &typed,
        );
    }
    let validations = items(&spec["validations"]);
    if validations.is_empty() && items(&spec["auditAnnotations"]).is_empty() {
        let detail = "validations or auditAnnotations must contain at least one item";
        causes.push(required("spec.validations".into(), detail));
        causes.push(required("spec.auditAnnotations".into(), detail));
    }
    for (i, validation) in validations.iter().enumerate() {
        let path = format!("spec.validations[{i}]");
        check_expression(
            &mut causes,
            &validation["expression"],
            format!("{path}.expression"),
            &declared,
            "expression is not specified",
            &typed,
        );
        let message_expression = &validation["messageExpression"];
        if message_expression.as_str().is_some_and(|m| !m.is_empty()) {
            let without_authorizer: Vec<&str> = declared
                .iter()
                .copied()
                .filter(|d| *d != "authorizer")
                .collect();
            check_expression(
                &mut causes,
                message_expression,
                format!("{path}.messageExpression"),
                &without_authorizer,
                "",
                &typed,
            );
        }
        if let Some(message) = validation["message"].as_str().filter(|m| !m.is_empty()) {
            if message.trim().is_empty() {
                causes.push(invalid(
                    format!("{path}.message"),
                    &validation["message"],
                    "message must be non-empty if specified",
                ));
            } else if message.trim().contains('\n') {
                causes.push(invalid(
                    format!("{path}.message"),
                    &validation["message"],
                    "message must not contain line breaks",
                ));
            }
        }
        if !validation["reason"].is_null() {
            one_of(
                &mut causes,
                &validation["reason"],
                format!("{path}.reason"),
                &[
                    "Forbidden",
                    "Invalid",
                    "RequestEntityTooLarge",
                    "Unauthorized",
                ],
            );
        }
    }
    causes
}

/// Defaults and validates a binding; the causes are empty when it is accepted.
pub fn validate_binding(binding: &mut Value) -> Vec<Cause> {
    if !binding["spec"].is_object() {
        return vec![required("spec".into(), "")];
    }
    default_match_resources(&mut binding["spec"]["matchResources"]);
    let spec = &binding["spec"];
    let mut causes = Vec::new();
    if blank(&spec["policyName"]) {
        causes.push(required("spec.policyName".into(), ""));
    }
    let actions = items(&spec["validationActions"]);
    if actions.is_empty() {
        causes.push(required(
            "spec.validationActions".into(),
            "at least one validation action is required",
        ));
    }
    let mut seen = Vec::new();
    for (i, action) in actions.iter().enumerate() {
        let field = format!("spec.validationActions[{i}]");
        one_of(
            &mut causes,
            action,
            field.clone(),
            &["Audit", "Deny", "Warn"],
        );
        if seen.contains(&action) {
            causes.push(Cause {
                kind: "FieldValueDuplicate",
                message: format!("Duplicate value: {action}"),
                field,
            });
        }
        seen.push(action);
    }
    if seen.contains(&&json!("Deny")) && seen.contains(&&json!("Warn")) {
        causes.push(invalid(
            "spec.validationActions".into(),
            &spec["validationActions"],
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    let param_ref = &spec["paramRef"];
    if param_ref.is_object() {
        let named = !blank(&param_ref["name"]);
        let selected = !param_ref["selector"].is_null();
        if named && selected {
            causes.push(Cause {
                kind: "FieldValueForbidden",
                message: "Forbidden: name and selector are mutually exclusive".into(),
                field: "spec.paramRef.name".into(),
            });
        } else if !named && !selected {
            causes.push(required(
                "spec.paramRef.name".into(),
                "one of name or selector must be specified",
            ));
        }
        if selected {
            check_selector(
                &mut causes,
                &param_ref["selector"],
                "spec.paramRef.selector",
            );
        }
        let action = &param_ref["parameterNotFoundAction"];
        if action.is_null() {
            causes.push(required("spec.paramRef.parameterNotFoundAction".into(), ""));
        } else {
            one_of(
                &mut causes,
                action,
                "spec.paramRef.parameterNotFoundAction".into(),
                &["Allow", "Deny"],
            );
        }
    }
    if spec["matchResources"].is_object() {
        check_match_resources(&mut causes, &spec["matchResources"], "spec.matchResources");
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn a_good_policy_gets_the_defaults() {
        let mut p = policy(json!({
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "authorizer.group('').resource('x').check('get').allowed() || object.data.size() < 3"}]
        }));
        assert_eq!(validate_policy(&mut p), []);
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(
            p["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
            "*"
        );
    }

    #[test]
    fn malformed_policies_name_their_fields() {
        let mut p = policy(json!({
            "failurePolicy": "Sometimes",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["READ"], "resources": ["configmaps"]}]},
            "validations": [{"expression": ""}, {"expression": "object.x ==", "reason": "Teapot"}, {"expression": "params.x"}]
        }));
        let causes = validate_policy(&mut p);
        let found: Vec<(&str, &str)> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.message.as_str()))
            .collect();
        assert_eq!(
            found[0],
            (
                "spec.failurePolicy",
                "Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\""
            )
        );
        assert_eq!(
            found[1],
            (
                "spec.matchConstraints.resourceRules[0].operations[0]",
                "Unsupported value: \"READ\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\""
            )
        );
        assert_eq!(
            found[2],
            (
                "spec.validations[0].expression",
                "Required value: expression is not specified"
            )
        );
        assert_eq!(found[3].0, "spec.validations[1].expression");
        assert!(found[3].1.starts_with("Invalid value: \"object.x ==\": compilation failed: ERROR: <input>:1:12: Syntax error"), "{}", found[3].1);
        assert_eq!(found[4].0, "spec.validations[1].reason");
        assert_eq!(found[5].0, "spec.validations[2].expression");
        assert!(found[5].1.contains("undeclared reference to 'params'"));
    }

    #[test]
    fn bindings_need_a_policy_and_actions() {
        let mut b = json!({"spec": {"validationActions": ["Deny", "Warn", "Deny"], "paramRef": {"name": "x"}}});
        let causes = validate_binding(&mut b);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.policyName",
                "spec.validationActions[2]",
                "spec.validationActions",
                "spec.paramRef.parameterNotFoundAction"
            ]
        );
    }
}
