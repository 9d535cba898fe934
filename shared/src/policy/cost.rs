//! The worst-case cost of a CEL expression, as the API server counts it while it evaluates a
//! ValidatingAdmissionPolicy: cel-go's runtime cost tracker with the settings
//! `k8s.io/apiserver/pkg/cel/environment` gives it (constant folding, presence tests free), and
//! the limits of `k8s.io/apiserver/pkg/apis/cel`. The API server cancels an expression whose
//! cost passes [`PER_CALL_LIMIT`] and, with `failurePolicy: Fail`, denies the write with a cost
//! error instead of the rule's message; so a policy whose generated expression could cost more
//! is refused before it is generated.
//!
//! The estimate walks the parsed expression once with the largest value each variable can hold
//! ([`Bound`]: a string's `maxLength`, a list's `maxItems`, from the CRD's schema), charging
//! what the runtime tracker charges:
//!
//! - 1 for an identifier and for each field selected (a presence test `has()` adds nothing);
//! - 1 for a call without a cost of its own (`!`, `size`, `@not_strictly_false`, ...), nothing
//!   for `&&`, `||` and `?:` themselves;
//! - `ceil(0.1 * min(len a, len b))` for `==` and `!=`, `ceil(0.1 * len)` for `startsWith` and
//!   `endsWith`, the list's length for `in`;
//! - `ceil(0.1 * (1 + len s)) * ceil(0.25 * len pattern)` for `s.matches(pattern)`;
//! - a comprehension (`all`, `exists`) its range, then every iteration its condition and step.
//!
//! Worst case means every branch of `&&` and `||` runs, the longer branch of `?:`, and every
//! iteration of a comprehension; list literals of constants are free (folded), others cost 10.
//! A variable the bounds do not bound is as large as a request may be (3 MiB), as the API
//! server's estimator assumes, which makes any traversal of it too expensive.

use std::collections::BTreeMap;

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use serde_json::Value;

/// The most an expression may cost in one evaluation (`PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// The most the validations of one binding may cost together for one object
/// (`RuntimeCELCostBudget`).
pub const RUNTIME_BUDGET: u64 = 10_000_000;
/// The largest request the API server takes, the size it assumes for what nothing bounds
/// (`MaxRequestSizeBytes`).
pub const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_LENGTH: f64 = 0.25;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;

/// The largest value a variable or field can hold.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    /// A number, boolean or null: size 1.
    Scalar,
    /// A string of at most this many characters (code points, as CEL's `size` counts).
    String(u64),
    /// A list of at most this many items, each within the item bound.
    List(u64, Box<Bound>),
    /// An object with these fields, and (for a map) any other key within the last bound.
    Object(BTreeMap<String, Bound>, Option<Box<Bound>>),
    /// Nothing bounds it (the field named, when known): as large as a request.
    Unbounded(String),
}

impl Bound {
    /// The size CEL's `size()` and the cost tracker see.
    fn size(&self) -> u64 {
        match self {
            Bound::Scalar => 1,
            Bound::String(chars) => *chars,
            Bound::List(items, _) => *items,
            Bound::Object(fields, other) => {
                if other.is_some() {
                    MAX_REQUEST_BYTES
                } else {
                    fields.len() as u64
                }
            }
            Bound::Unbounded(_) => MAX_REQUEST_BYTES,
        }
    }

    /// A field of an object (an unknown field of a closed object is absent: `Scalar`).
    fn field(&self, name: &str, path: &str) -> Bound {
        match self {
            Bound::Object(fields, other) => match (fields.get(name), other) {
                (Some(bound), _) => bound.clone(),
                (None, Some(other)) => (**other).clone(),
                (None, None) => Bound::Scalar,
            },
            Bound::Unbounded(_) => Bound::Unbounded(path.to_owned()),
            _ => Bound::Scalar,
        }
    }

    /// The items of a list, or the keys of a map.
    fn items(&self, path: &str) -> (u64, Bound) {
        match self {
            Bound::List(items, item) => (*items, (**item).clone()),
            Bound::Object(fields, None) => {
                let longest = fields.keys().map(|k| k.chars().count() as u64).max();
                (fields.len() as u64, Bound::String(longest.unwrap_or(0)))
            }
            // The list itself is what nothing bounds; its items are named with it.
            Bound::Unbounded(list) => (MAX_REQUEST_BYTES, Bound::Unbounded(list.clone())),
            other => (other.size(), Bound::Unbounded(format!("{path}[*]"))),
        }
    }

    /// The larger of two bounds (either branch of `?:`).
    fn join(self, other: Bound) -> Bound {
        match (self, other) {
            (Bound::Scalar, b) | (b, Bound::Scalar) => b,
            (Bound::String(a), Bound::String(b)) => Bound::String(a.max(b)),
            (Bound::List(a, x), Bound::List(b, y)) => Bound::List(a.max(b), Box::new(x.join(*y))),
            (Bound::Unbounded(path), _) | (_, Bound::Unbounded(path)) => Bound::Unbounded(path),
            (a, b) => {
                if a.size() >= b.size() {
                    a
                } else {
                    b
                }
            }
        }
    }

    /// The bound of a value the CRD's OpenAPI schema describes (`maxLength`, an `enum`'s longest
    /// value, `maxItems`, `properties`, `additionalProperties`); `path` names it in findings.
    pub fn of_schema(schema: &Value, path: &str) -> Bound {
        let limit = |key: &str| schema.get(key).and_then(Value::as_u64);
        match schema.get("type").and_then(Value::as_str) {
            Some("string") => {
                let longest_enum = schema.get("enum").and_then(Value::as_array).map(|values| {
                    values
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|v| v.chars().count() as u64)
                        .max()
                        .unwrap_or(0)
                });
                match limit("maxLength").or(longest_enum) {
                    Some(max) => Bound::String(max),
                    None => Bound::Unbounded(path.to_owned()),
                }
            }
            Some("array") => {
                let item = schema
                    .get("items")
                    .map_or(Bound::Unbounded(format!("{path}[*]")), |items| {
                        Bound::of_schema(items, &format!("{path}[*]"))
                    });
                match limit("maxItems") {
                    Some(max) => Bound::List(max, Box::new(item)),
                    None => Bound::Unbounded(path.to_owned()),
                }
            }
            Some("object") => {
                let fields = schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|properties| {
                        properties
                            .iter()
                            .map(|(name, property)| {
                                let at = if path.is_empty() {
                                    name.clone()
                                } else {
                                    format!("{path}.{name}")
                                };
                                (name.clone(), Bound::of_schema(property, &at))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let other = schema
                    .get("additionalProperties")
                    .filter(|a| a.is_object())
                    .map(|a| Box::new(Bound::of_schema(a, &format!("{path}[*]"))));
                Bound::Object(fields, other)
            }
            Some(_) => Bound::Scalar,
            None => Bound::Unbounded(path.to_owned()),
        }
    }
}

/// What evaluating an expression may cost at most, and which unbounded fields it traverses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    pub cost: u64,
    /// Fields no bound limits that the estimate had to take as large as a request.
    pub unbounded: Vec<String>,
}

/// The worst-case cost of `expression` with its variables within `variables`' bounds; `Err` when
/// it does not parse or calls a function whose cost is not known here.
pub fn estimate(expression: &str, variables: &BTreeMap<String, Bound>) -> Result<Estimate, String> {
    let parsed = cel::parser::Parser::new()
        .parse(expression)
        .map_err(|error| format!("does not parse: {error}"))?;
    let mut walker = Walker {
        scopes: vec![variables.clone()],
        unbounded: Vec::new(),
    };
    let found = walker.walk(&parsed)?;
    let mut unbounded = walker.unbounded;
    unbounded.sort();
    unbounded.dedup();
    Ok(Estimate {
        cost: found.cost,
        unbounded,
    })
}

/// An expression's cost and the bound of its value.
struct Walked {
    cost: u64,
    value: Bound,
    /// The expression is a literal (lists of literals are folded into constants).
    constant: bool,
}

impl Walked {
    fn new(cost: u64, value: Bound) -> Walked {
        Walked {
            cost,
            value,
            constant: false,
        }
    }
}

struct Walker {
    scopes: Vec<BTreeMap<String, Bound>>,
    unbounded: Vec<String>,
}

fn traversal(size: u64, factor: f64) -> u64 {
    // As cel-go computes it: uint64(math.Ceil(float64(size) * factor)).
    (size as f64 * factor).ceil() as u64
}

impl Walker {
    fn lookup(&self, name: &str) -> Bound {
        self.scopes
            .iter()
            .rev()
            .find_map(|scope| scope.get(name).cloned())
            .unwrap_or_else(|| Bound::Unbounded(name.to_owned()))
    }

    /// Notes an unbounded value that is traversed.
    fn size_of(&mut self, bound: &Bound) -> u64 {
        if let Bound::Unbounded(path) = bound {
            self.unbounded.push(path.clone());
        }
        bound.size()
    }

    fn walk(&mut self, expr: &IdedExpr) -> Result<Walked, String> {
        Ok(match &expr.expr {
            Expr::Literal(literal) => Walked {
                cost: 0,
                value: match literal {
                    LiteralValue::String(text) => Bound::String(text.chars().count() as u64),
                    LiteralValue::Bytes(bytes) => Bound::String(bytes.len() as u64),
                    _ => Bound::Scalar,
                },
                constant: true,
            },
            Expr::Ident(name) => Walked::new(1, self.lookup(name)),
            Expr::Select(select) => {
                let operand = self.walk(&select.operand)?;
                let path = path_of(&select.operand)
                    .map_or_else(|| select.field.clone(), |p| format!("{p}.{}", select.field));
                if select.test {
                    Walked::new(operand.cost, Bound::Scalar)
                } else {
                    let value = operand.value.field(&select.field, &path);
                    Walked::new(operand.cost.saturating_add(1), value)
                }
            }
            Expr::List(list) => {
                let mut cost = 0u64;
                let mut item = Bound::Scalar;
                let mut constant = true;
                for element in &list.elements {
                    let walked = self.walk(element)?;
                    cost = cost.saturating_add(walked.cost);
                    constant &= walked.constant;
                    item = item.join(walked.value);
                }
                let value = Bound::List(list.elements.len() as u64, Box::new(item));
                if constant {
                    Walked {
                        cost: 0,
                        value,
                        constant: true,
                    }
                } else {
                    Walked::new(cost.saturating_add(LIST_CREATE), value)
                }
            }
            Expr::Map(map) => {
                let mut cost = MAP_CREATE;
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(entry) = &entry.expr {
                        cost = cost
                            .saturating_add(self.walk(&entry.key)?.cost)
                            .saturating_add(self.walk(&entry.value)?.cost);
                    }
                }
                Walked::new(cost, Bound::Unbounded("a map literal".to_owned()))
            }
            Expr::Struct(object) => {
                let mut cost = STRUCT_CREATE;
                for entry in &object.entries {
                    if let cel::common::ast::EntryExpr::StructField(field) = &entry.expr {
                        cost = cost.saturating_add(self.walk(&field.value)?.cost);
                    }
                }
                Walked::new(cost, Bound::Unbounded("a message literal".to_owned()))
            }
            Expr::Comprehension(comprehension) => {
                let range = self.walk(&comprehension.iter_range)?;
                let path = path_of(&comprehension.iter_range).unwrap_or_default();
                let (iterations, item) = range.value.items(&path);
                if matches!(range.value, Bound::Unbounded(_)) {
                    self.size_of(&range.value);
                }
                let init = self.walk(&comprehension.accu_init)?;
                let mut scope = BTreeMap::new();
                scope.insert(comprehension.iter_var.clone(), item);
                if let Some(second) = &comprehension.iter_var2 {
                    scope.insert(second.clone(), Bound::Unbounded(second.clone()));
                }
                scope.insert(comprehension.accu_var.clone(), init.value.clone());
                self.scopes.push(scope);
                let each = self.walk(&comprehension.loop_cond).and_then(|cond| {
                    Ok(cond
                        .cost
                        .saturating_add(self.walk(&comprehension.loop_step)?.cost))
                });
                self.scopes.pop();
                let each = each?;
                let mut scope = BTreeMap::new();
                scope.insert(comprehension.accu_var.clone(), init.value);
                self.scopes.push(scope);
                let result = self.walk(&comprehension.result);
                self.scopes.pop();
                let result = result?;
                Walked::new(
                    range
                        .cost
                        .saturating_add(init.cost)
                        .saturating_add(iterations.saturating_mul(each))
                        .saturating_add(result.cost),
                    result.value,
                )
            }
            Expr::Call(call) => self.call(call)?,
            Expr::Unspecified => return Err("holds an unspecified expression".to_owned()),
        })
    }

    fn call(&mut self, call: &cel::common::ast::CallExpr) -> Result<Walked, String> {
        // The receiver of a member call comes first, as cel-go passes it.
        let mut operands = Vec::new();
        if let Some(target) = &call.target {
            operands.push(target.as_ref());
        }
        operands.extend(call.args.iter());
        let walked: Vec<Walked> = operands
            .iter()
            .map(|operand| self.walk(operand))
            .collect::<Result<_, _>>()?;
        let arguments: u64 = walked
            .iter()
            .fold(0u64, |sum, w| sum.saturating_add(w.cost));
        let value_of = |n: usize| {
            walked
                .get(n)
                .map(|w| w.value.clone())
                .unwrap_or(Bound::Scalar)
        };
        let (own, value) = match call.func_name.as_str() {
            "_&&_" | "_||_" => (0, Bound::Scalar),
            "_?_:_" => {
                // The condition, then the dearer branch.
                let condition = walked.first().map_or(0, |w| w.cost);
                let then = walked.get(1).map_or(0, |w| w.cost);
                let otherwise = walked.get(2).map_or(0, |w| w.cost);
                let value = value_of(1).join(value_of(2));
                return Ok(Walked::new(
                    condition.saturating_add(then.max(otherwise)),
                    value,
                ));
            }
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
                let left = self.size_of(&value_of(0));
                let right = self.size_of(&value_of(1));
                (traversal(left.min(right), STRING_TRAVERSAL), Bound::Scalar)
            }
            "@in" => (self.size_of(&value_of(1)), Bound::Scalar),
            "matches" => {
                let text = self.size_of(&value_of(0));
                let pattern = self.size_of(&value_of(1));
                (
                    traversal(text.saturating_add(1), STRING_TRAVERSAL)
                        .saturating_mul(traversal(pattern, REGEX_LENGTH)),
                    Bound::Scalar,
                )
            }
            "contains" => {
                let text = self.size_of(&value_of(0));
                let part = self.size_of(&value_of(1));
                (
                    traversal(text, STRING_TRAVERSAL)
                        .saturating_mul(traversal(part, STRING_TRAVERSAL)),
                    Bound::Scalar,
                )
            }
            "startsWith" | "endsWith" => {
                let text = self.size_of(&value_of(0));
                (traversal(text, STRING_TRAVERSAL), Bound::Scalar)
            }
            "_+_" => {
                let joined = match (value_of(0), value_of(1)) {
                    (Bound::String(a), Bound::String(b)) => Bound::String(a.saturating_add(b)),
                    (Bound::List(a, x), Bound::List(b, y)) => {
                        Bound::List(a.saturating_add(b), Box::new(x.join(*y)))
                    }
                    _ => Bound::Scalar,
                };
                let own = match &joined {
                    Bound::String(chars) => traversal(*chars, STRING_TRAVERSAL),
                    _ => 1,
                };
                (own, joined)
            }
            "!_"
            | "-_"
            | "@not_strictly_false"
            | "size"
            | "_-_"
            | "_*_"
            | "_/_"
            | "_%_"
            | "_[_]"
            | "int"
            | "uint"
            | "double"
            | "string"
            | "bool"
            | "type"
            | "dyn" => {
                let value = match call.func_name.as_str() {
                    "_[_]" => match value_of(0) {
                        Bound::List(_, item) => *item,
                        other => other.field("*", "an index"),
                    },
                    // `dyn(x)` is `x`, typed otherwise.
                    "dyn" => value_of(0),
                    _ => Bound::Scalar,
                };
                (1, value)
            }
            other => {
                return Err(format!(
                    "calls {other}, whose cost the estimator does not know"
                ));
            }
        };
        Ok(Walked::new(arguments.saturating_add(own), value))
    }
}

/// `object.spec.redirectUris` for a chain of field selections on an identifier.
fn path_of(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => {
            path_of(&select.operand).map(|p| format!("{p}.{}", select.field))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(spec: Vec<(&str, Bound)>) -> BTreeMap<String, Bound> {
        let spec = Bound::Object(
            spec.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            None,
        );
        let object = Bound::Object(
            [
                ("kind".to_owned(), Bound::String(10)),
                ("spec".to_owned(), spec),
            ]
            .into(),
            None,
        );
        [("object".to_owned(), object)].into()
    }

    fn uris(items: u64, chars: u64) -> Bound {
        Bound::List(items, Box::new(Bound::String(chars)))
    }

    fn cost(expression: &str, variables: &BTreeMap<String, Bound>) -> u64 {
        estimate(expression, variables).unwrap().cost
    }

    /// Figures measured with the API server's own CEL (cel-go v0.26 with
    /// k8s.io/apiserver v0.34's environment) on objects that reach each bound.
    #[test]
    fn small_expressions_cost_what_the_api_server_counts() {
        let vars = object(vec![("l", uris(5, 2))]);
        assert_eq!(cost("object.spec.l.all(u, true)", &vars), 19);
        assert_eq!(cost("object.spec.l.all(u, u == 'ab')", &vars), 29);
        assert_eq!(cost("object.spec.l.all(u, u.matches('ab'))", &vars), 29);
        assert_eq!(
            cost(
                "object.spec.l.all(u, !u.matches('x') && u.matches('ab'))",
                &vars
            ),
            44
        );
        assert_eq!(cost("object.spec.l.all(u, !u.matches('x'))", &vars), 34);
        let vars = object(vec![("redirectUris", uris(10, 108)), ("x", Bound::Scalar)]);
        assert_eq!(
            cost(
                "object.spec.redirectUris.all(u, u.matches('^https://a+$'))",
                &vars
            ),
            374
        );
        assert_eq!(cost("object.spec.redirectUris.size() > 0", &vars), 5);
        assert_eq!(cost("object.kind != 'OIDCClient' || true", &vars), 3);
        assert_eq!(cost("has(object.spec.redirectUris)", &vars), 2);
        assert_eq!(cost("!has(object.spec.x)", &vars), 3);
        assert_eq!(cost("object.spec.x == null", &vars), 4);
        // dyn() costs a call and passes its operand's size on.
        assert_eq!(cost("dyn(object.spec.redirectUris) != null", &vars), 5);
        assert_eq!(cost("dyn(object.spec.redirectUris).size() > 0", &vars), 6);
    }

    #[test]
    fn a_constant_list_is_free_and_in_charges_its_length() {
        let vars = object(vec![("grantTypes", uris(3, 18))]);
        // The API server folds `g in [constants]` into a set lookup (16 measured); the
        // estimate charges the list's length, an upper bound.
        let found = cost("object.spec.grantTypes.all(g, g in ['a', 'b'])", &vars);
        assert!((16..=22).contains(&found), "{found}");
        assert_eq!(cost("['a', 'b'].size() == 2", &vars), 2);
    }

    #[test]
    fn matches_multiplies_the_text_by_the_pattern() {
        let vars = object(vec![("redirectUris", uris(50, 2048))]);
        let pattern = "x".repeat(1000);
        let expression = format!("object.spec.redirectUris.all(u, u.matches('{pattern}'))");
        // Per URI ceil(0.1 * 2049) * ceil(0.25 * 1000) = 205 * 250, and 5 for the loop.
        assert_eq!(cost(&expression, &vars), 3 + 50 * (3 + 1 + 205 * 250) + 1);
        let short = object(vec![("redirectUris", uris(50, 100))]);
        assert_eq!(cost(&expression, &short), 3 + 50 * (3 + 1 + 11 * 250) + 1);
    }

    #[test]
    fn both_sides_of_a_boolean_operator_and_the_dearer_branch_count() {
        let vars = object(vec![("s", Bound::String(1000)), ("t", Bound::String(10))]);
        let left = cost("object.spec.s.matches('abcd')", &vars);
        assert_eq!(left, 3 + 101);
        assert_eq!(
            cost(
                "object.spec.s.matches('abcd') || object.spec.s.matches('abcd')",
                &vars
            ),
            2 * left
        );
        assert_eq!(
            cost(
                "has(object.spec.s) ? object.spec.s.matches('abcd') : object.spec.t.matches('abcd')",
                &vars
            ),
            2 + left
        );
    }

    #[test]
    fn unbounded_fields_are_as_large_as_a_request_and_named() {
        let vars = object(vec![(
            "redirectUris",
            Bound::Unbounded("spec.redirectUris".into()),
        )]);
        let found = estimate("object.spec.redirectUris.all(u, u.matches('abcd'))", &vars).unwrap();
        assert!(found.cost > PER_CALL_LIMIT, "{found:?}");
        assert_eq!(found.unbounded, vec!["spec.redirectUris".to_owned()]);
    }

    #[test]
    fn schemas_give_their_bounds() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "uris": {"type": "array", "maxItems": 50, "items": {"type": "string", "maxLength": 2048}},
                "method": {"type": "string", "enum": ["none", "client_secret_basic"]},
                "free": {"type": "string"},
                "list": {"type": "array", "items": {"type": "string", "maxLength": 3}},
                "flag": {"type": "boolean"},
                "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 5}}
            }
        });
        let Bound::Object(fields, None) = Bound::of_schema(&schema, "spec") else {
            panic!("an object");
        };
        assert_eq!(fields["uris"], uris(50, 2048));
        assert_eq!(fields["method"], Bound::String(19));
        assert_eq!(fields["free"], Bound::Unbounded("spec.free".into()));
        assert_eq!(fields["list"], Bound::Unbounded("spec.list".into()));
        assert_eq!(fields["flag"], Bound::Scalar);
        assert!(matches!(&fields["labels"], Bound::Object(f, Some(_)) if f.is_empty()));
    }

    #[test]
    fn unknown_functions_and_bad_text_are_said() {
        let vars = object(vec![]);
        assert!(
            estimate("object.spec.x.frobnicate()", &vars)
                .unwrap_err()
                .contains("frobnicate")
        );
        assert!(
            estimate("object.spec.(", &vars)
                .unwrap_err()
                .contains("parse")
        );
    }
}
