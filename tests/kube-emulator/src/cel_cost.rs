//! The runtime cost of a CEL evaluation, as the API server charges it: cel-go's cost tracker
//! with the Kubernetes estimator (`k8s.io/apiserver/pkg/cel/library/cost.go`), against the
//! per-call limit (`PerCallLimit`, 1,000,000) and the per-policy budget (`RuntimeCELCostBudget`,
//! 10,000,000) of `k8s.io/apiserver/pkg/apis/cel`.
//!
//! The `cel` crate tracks no cost, so the emulator measures it apart: [`measure`] walks the
//! expression as the interpreter evaluates it (short-circuits, comprehensions iterating the real
//! lists and maps, each function called on the real values through the crate) and charges each
//! step what cel-go charges for it:
//!
//! - a variable, a field selection, an index or an optional selection: 1; a presence test
//!   (`has`) and a constant: 0;
//! - a list or map literal built at run time: 10 or 30 (constant ones cost nothing, folded);
//! - a function call: 1, except those whose cost grows with their input: `startsWith` and
//!   `endsWith` a tenth of the string's length, `contains` a tenth of each length multiplied,
//!   `matches` (and `find`, `findAll`) a tenth of the string's length plus one times a quarter of
//!   the pattern's, `==`/`!=` a tenth of the shorter operand (1 for scalars), `lowerAscii`,
//!   `upperAscii`, `trim`, `substring`, `url`, `quantity` a tenth of the string, `replace` and
//!   `split` a fifth, `join` a fifth of the result, `indexOf`, `lastIndexOf`, `sum`, `min`,
//!   `max`, `isSorted` a tenth of every string traversed, and an authorization `check`
//!   350,000; sizes count characters of strings, bytes, and items of lists and maps, each rounded
//!   up as cel-go rounds it.
//!
//! Where cel-go's charge depends on the overload its checker resolves for `dyn` arguments
//! (string concatenation, comparisons, `in` on a list that is not a literal), the emulator
//! charges what cel-go charges when it cannot resolve one, the least: 1. The estimate is thus
//! meant to be the server's or below it, never above, so the emulator refuses only what a real
//! server refuses, and refuses the expressions that walk long strings and lists many times over.
//! Against cel-go 0.26 with the Kubernetes environment it is exact on the admission policies the
//! project generates and within a few units elsewhere (see the tests).

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, SelectExpr};
use cel::objects::{Key, OptionalValue};
use cel::{Context, Value};
use std::collections::HashMap;

/// The most one evaluation of one expression may cost.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// The most the expressions of one policy binding may cost together for one request.
pub const RUNTIME_BUDGET: u64 = 10_000_000;
/// cel-go's error when an evaluation goes over the per-call limit.
pub const LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";
/// The API server's error when the expressions of a binding go over the budget.
pub const BUDGET_EXCEEDED: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_LENGTH: f64 = 0.25;

/// An evaluation went over its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exceeded;

/// What the checker knows of a value's type without evaluating (arguments are `dyn` to the
/// API server, so little): it decides which overloads cel-go resolves and so how it charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Static {
    Str,
    Bytes,
    List,
    Map,
    Other,
    Dyn,
}

/// The static kinds of the `variables` an expression may read, by name.
pub type Statics = HashMap<String, Static>;

/// The cost of evaluating `expr` in `context`, or [`Exceeded`] as soon as it passes `limit`.
/// Call within the CEL sandbox.
pub fn measure(
    expr: &IdedExpr,
    context: &Context,
    statics: &Statics,
    limit: u64,
) -> Result<u64, Exceeded> {
    let mut meter = Meter {
        spent: 0,
        limit,
        statics,
    };
    meter.walk(expr, context, &mut Vec::new())?.ok();
    Ok(meter.spent)
}

/// What the checker would type `expr` as, given the kinds of the variables.
pub fn static_kind(expr: &IdedExpr, statics: &Statics) -> Static {
    match &expr.expr {
        Expr::Literal(literal) => match literal {
            cel::common::ast::LiteralValue::String(_) => Static::Str,
            cel::common::ast::LiteralValue::Bytes(_) => Static::Bytes,
            _ => Static::Other,
        },
        Expr::List(_) => Static::List,
        Expr::Map(_) => Static::Map,
        Expr::Select(SelectExpr {
            operand,
            field,
            test: false,
        }) if matches!(&operand.expr, Expr::Ident(name) if name == "variables") => {
            statics.get(field).copied().unwrap_or(Static::Dyn)
        }
        Expr::Select(SelectExpr { test: true, .. }) => Static::Other,
        Expr::Call(call) => match (call.func_name.as_str(), call.args.as_slice()) {
            ("_+_", [a, b]) => {
                let (a, b) = (static_kind(a, statics), static_kind(b, statics));
                match (a, b) {
                    (Static::Str, _) | (_, Static::Str) => Static::Str,
                    (Static::Bytes, _) | (_, Static::Bytes) => Static::Bytes,
                    (Static::List, _) | (_, Static::List) => Static::List,
                    _ => Static::Dyn,
                }
            }
            ("_?_:_", [_, a, b]) => {
                let a = static_kind(a, statics);
                if a == static_kind(b, statics) {
                    a
                } else {
                    Static::Dyn
                }
            }
            (
                "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "join" | "string"
                | "format" | "charAt",
                _,
            ) => Static::Str,
            ("split" | "sort", _) => Static::List,
            ("_[_]" | "_[?_]", _) => Static::Dyn,
            _ => Static::Other,
        },
        Expr::Comprehension(c) => match &c.accu_init.expr {
            Expr::List(_) => Static::List,
            _ => Static::Dyn,
        },
        _ => Static::Dyn,
    }
}

/// Whether a literal is built from constants only (cel-go folds it: no cost).
fn constant(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Literal(_) => true,
        Expr::List(list) => list.elements.iter().all(constant),
        Expr::Map(map) => map.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => constant(&e.key) && constant(&e.value),
            EntryExpr::StructField(_) => false,
        }),
        _ => false,
    }
}

/// cel-go's `actualSize`: characters, bytes, items; 1 for anything else.
fn size(value: &Value) -> u64 {
    let n = match value {
        Value::String(s) => s.chars().count(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.map.len(),
        Value::Opaque(o) => match o.downcast_ref::<OptionalValue>().and_then(|o| o.value()) {
            Some(inner) => return size(inner),
            None => 1,
        },
        _ => 1,
    };
    n as u64
}

/// The Kubernetes estimator's `traversalCost`: a tenth of each string, rounded down, summed.
fn traversal(value: &Value) -> u64 {
    match value {
        Value::String(s) => (s.len() as f64 * STRING_TRAVERSAL) as u64,
        Value::Bytes(b) => (b.len() as f64 * STRING_TRAVERSAL) as u64,
        Value::List(items) => items.iter().map(traversal).sum(),
        Value::Map(map) => map
            .map
            .iter()
            .map(|(k, v)| traversal(&key_value(k)) + traversal(v))
            .sum(),
        _ => 1,
    }
}

fn key_value(key: &Key) -> Value {
    match key {
        Key::Int(i) => Value::Int(*i),
        Key::Uint(u) => Value::UInt(*u),
        Key::Bool(b) => Value::Bool(*b),
        Key::String(s) => Value::String(s.clone()),
    }
}

fn tenth(n: u64) -> u64 {
    (n as f64 * STRING_TRAVERSAL).ceil() as u64
}

/// A regex match's cost: the string (plus one) by the pattern.
fn regex(string: u64, pattern: u64) -> u64 {
    tenth(string + 1).saturating_mul((pattern as f64 * REGEX_LENGTH).ceil() as u64)
}

/// A value, or an error value (CEL errors flow through `&&`, `||` and macros).
type Eval = Result<Value, ()>;

struct Meter<'s> {
    spent: u64,
    limit: u64,
    statics: &'s Statics,
}

/// Names bound by enclosing comprehensions, innermost last.
type Bound = Vec<String>;

impl Meter<'_> {
    fn charge(&mut self, cost: u64) -> Result<(), Exceeded> {
        self.spent = self.spent.saturating_add(cost);
        if self.spent > self.limit {
            Err(Exceeded)
        } else {
            Ok(())
        }
    }

    /// Evaluates `node` in `context`, charging what cel-go charges. Recursive: only called on
    /// trees the compiler already bounded in depth.
    fn walk(
        &mut self,
        node: &IdedExpr,
        context: &Context,
        bound: &mut Bound,
    ) -> Result<Eval, Exceeded> {
        self.walk_attribute(node, context, bound, false)
    }

    /// [`Meter::walk`]; with `free_root`, the variable an attribute (a chain of selections and
    /// indexes on a variable) starts from is not charged, only its selections: cel-go resolves
    /// an attribute that is a conditional's branch or an index's key without observing its root.
    fn walk_attribute(
        &mut self,
        node: &IdedExpr,
        context: &Context,
        bound: &mut Bound,
        free_root: bool,
    ) -> Result<Eval, Exceeded> {
        match &node.expr {
            Expr::Literal(_) => Ok(resolve(node, context)),
            Expr::Ident(_) => {
                if !free_root {
                    self.charge(1)?;
                }
                Ok(resolve(node, context))
            }
            Expr::Select(select) => {
                let operand = self.walk_attribute(&select.operand, context, bound, free_root)?;
                if !select.test {
                    self.charge(1)?;
                }
                let Ok(operand) = operand else {
                    return Ok(Err(()));
                };
                let synthetic = IdedExpr {
                    id: 0,
                    expr: Expr::Select(SelectExpr {
                        operand: Box::new(ident("@operand")),
                        field: select.field.clone(),
                        test: select.test,
                    }),
                };
                Ok(resolve_with(&synthetic, context, &[("@operand", operand)]))
            }
            Expr::List(list) => {
                let mut items = Vec::with_capacity(list.elements.len());
                for element in &list.elements {
                    match self.walk(element, context, bound)? {
                        Ok(value) => items.push(value),
                        Err(()) => return Ok(Err(())),
                    }
                }
                if !constant(node) {
                    self.charge(10)?;
                }
                let names: Vec<String> = (0..items.len()).map(|i| format!("@item{i}")).collect();
                let synthetic = IdedExpr {
                    id: 0,
                    expr: Expr::List(cel::common::ast::ListExpr {
                        elements: names.iter().map(|n| ident(n)).collect(),
                        optional_indices: list.optional_indices.clone(),
                    }),
                };
                let bindings: Vec<(&str, Value)> =
                    names.iter().map(String::as_str).zip(items).collect();
                Ok(resolve_with(&synthetic, context, &bindings))
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr
                        && (self.walk(&entry.key, context, bound)?.is_err()
                            || self.walk(&entry.value, context, bound)?.is_err())
                    {
                        return Ok(Err(()));
                    }
                }
                if !constant(node) {
                    self.charge(30)?;
                }
                // Map literals are rare in policies: their value is taken from the crate whole.
                Ok(resolve(node, context))
            }
            Expr::Struct(_) | Expr::Unspecified => Ok(resolve(node, context)),
            Expr::Call(call) => self.call(call, context, bound, free_root),
            Expr::Comprehension(c) => {
                let Ok(range) = self.walk(&c.iter_range, context, bound)? else {
                    return Ok(Err(()));
                };
                let Ok(mut accu) = self.walk(&c.accu_init, context, bound)? else {
                    return Ok(Err(()));
                };
                let pairs: Vec<(Value, Value)> = match &range {
                    Value::List(items) => items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| match &c.iter_var2 {
                            Some(_) => (Value::Int(i as i64), v.clone()),
                            None => (v.clone(), Value::Null),
                        })
                        .collect(),
                    Value::Map(map) => map
                        .map
                        .iter()
                        .map(|(k, v)| (key_value(k), v.clone()))
                        .collect(),
                    _ => return Ok(Err(())),
                };
                let depth = bound.len();
                bound.push(c.accu_var.clone());
                bound.push(c.iter_var.clone());
                bound.extend(c.iter_var2.clone());
                let mut result = Ok(Err(()));
                let mut finished = true;
                for (first, second) in pairs {
                    let mut scope = context.new_inner_scope();
                    crate::cel::bind(&mut scope, &c.accu_var, accu.clone());
                    crate::cel::bind(&mut scope, &c.iter_var, first);
                    if let Some(var2) = &c.iter_var2 {
                        crate::cel::bind(&mut scope, var2, second);
                    }
                    match self.walk(&c.loop_cond, &scope, bound) {
                        Err(exceeded) => {
                            result = Err(exceeded);
                            finished = false;
                            break;
                        }
                        Ok(Ok(Value::Bool(false))) => break,
                        Ok(Ok(Value::Bool(true))) => {}
                        Ok(_) => {
                            result = Ok(Err(()));
                            finished = false;
                            break;
                        }
                    }
                    match self.walk(&c.loop_step, &scope, bound) {
                        Err(exceeded) => {
                            result = Err(exceeded);
                            finished = false;
                            break;
                        }
                        Ok(Ok(next)) => accu = next,
                        Ok(Err(())) => {
                            // An error accumulates on: `&&`/`||` steps may absorb it.
                            accu = Value::Null;
                        }
                    }
                }
                if finished {
                    let mut scope = context.new_inner_scope();
                    crate::cel::bind(&mut scope, &c.accu_var, accu);
                    result = self.walk(&c.result, &scope, bound);
                }
                bound.truncate(depth);
                result
            }
        }
    }

    fn call(
        &mut self,
        call: &CallExpr,
        context: &Context,
        bound: &mut Bound,
        free_root: bool,
    ) -> Result<Eval, Exceeded> {
        let name = call.func_name.as_str();
        match (name, call.args.as_slice()) {
            ("_&&_" | "_||_", [left, right]) => {
                let decisive = name == "_||_";
                let left = self.walk(left, context, bound)?;
                if left == Ok(Value::Bool(decisive)) {
                    return Ok(left);
                }
                let right = self.walk(right, context, bound)?;
                return Ok(match (left, right) {
                    (_, Ok(Value::Bool(b))) if b == decisive => Ok(Value::Bool(b)),
                    (Ok(Value::Bool(_)), Ok(Value::Bool(b))) => Ok(Value::Bool(b)),
                    _ => Err(()),
                });
            }
            ("_?_:_", [condition, yes, no]) => {
                let branch = match self.walk(condition, context, bound)? {
                    Ok(Value::Bool(true)) => yes,
                    Ok(Value::Bool(false)) => no,
                    _ => return Ok(Err(())),
                };
                return self.walk_attribute(branch, context, bound, is_attribute(branch));
            }
            ("@not_strictly_false", [argument]) => {
                let value = self.walk(argument, context, bound)?;
                self.charge(1)?;
                return Ok(Ok(Value::Bool(!matches!(value, Ok(Value::Bool(false))))));
            }
            ("_[_]" | "_[?_]" | "_?._", [container, key]) => {
                let container = self.walk_attribute(container, context, bound, free_root)?;
                let key = self.walk_attribute(key, context, bound, is_attribute(key))?;
                self.charge(1)?;
                let (Ok(container), Ok(key)) = (container, key) else {
                    return Ok(Err(()));
                };
                return Ok(self.apply(call, None, vec![container, key], context));
            }
            _ => {}
        }
        // A namespaced function (`optional.of`, `strings.quote`): its target is a name.
        let namespaced = call.target.as_deref().is_some_and(|target| {
            qualified(target).is_some_and(|prefix| {
                let root = prefix.split('.').next().unwrap_or_default();
                !bound.iter().any(|b| b == root)
                    && crate::cel::declares_function(&format!("{prefix}.{name}"))
            })
        });
        let target = match (&call.target, namespaced) {
            (Some(target), false) => Some(self.walk(target, context, bound)?),
            _ => None,
        };
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            args.push(self.walk(arg, context, bound)?);
        }
        let target = match target {
            Some(Ok(value)) => Some(value),
            Some(Err(())) => {
                self.charge(1)?;
                return Ok(Err(()));
            }
            None => None,
        };
        let Ok(args): Result<Vec<Value>, ()> = args.into_iter().collect() else {
            self.charge(1)?;
            return Ok(Err(()));
        };
        let result = self.apply(call, target.clone(), args.clone(), context);
        // cel-go's arguments: the receiver first.
        let all: Vec<&Value> = target.iter().chain(&args).collect();
        let cost = self.call_cost(name, call, &all, result.as_ref().ok());
        self.charge(cost)?;
        Ok(result)
    }

    /// What cel-go with the Kubernetes estimator charges for a call, given its arguments (the
    /// receiver first) and result.
    fn call_cost(
        &self,
        name: &str,
        call: &CallExpr,
        args: &[&Value],
        result: Option<&Value>,
    ) -> u64 {
        let arg = |i: usize| args.get(i).map_or(1, |v| size(v));
        let kind = |i: usize| {
            let node = match &call.target {
                Some(target) if i == 0 => Some(&**target),
                Some(_) => call.args.get(i - 1),
                None => call.args.get(i),
            };
            node.map_or(Static::Dyn, |n| static_kind(n, self.statics))
        };
        let textual = |k: Static| matches!(k, Static::Str | Static::Bytes);
        match name {
            // The Kubernetes estimator, by function name.
            "check" => 350_000,
            "lowerAscii" | "upperAscii" | "substring" | "trim" | "url" | "quantity"
            | "isQuantity" | "semver" | "isSemver" | "isIP" | "isCIDR" | "cidr" | "ip" => {
                tenth(arg(0))
            }
            "replace" | "split" => (arg(0) as f64 * 2.0 * STRING_TRAVERSAL).ceil() as u64,
            "join" => (result.map_or(1, size) as f64 * 2.0 * STRING_TRAVERSAL).ceil() as u64,
            "find" | "findAll" => regex(arg(0), arg(1)),
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" => {
                args.first().map_or(0, |v| traversal(v))
            }
            // cel-go's own, by the overload its checker resolves.
            "startsWith" | "endsWith" => tenth(arg(0)),
            "matches" => regex(arg(0), arg(1)),
            "contains" => tenth(arg(0)).saturating_mul(tenth(arg(1))),
            "_==_" | "_!=_" => tenth(arg(0).min(arg(1))),
            "_<_" | "_<=_" | "_>_" | "_>=_" if textual(kind(0)) && textual(kind(1)) => {
                tenth(arg(0).min(arg(1)))
            }
            "_+_" if textual(kind(0)) || textual(kind(1)) => tenth(arg(0) + arg(1)),
            "@in" => match call.args.get(1) {
                Some(list) if constant(list) => 0,
                Some(_) if kind(1) == Static::List => arg(1),
                _ => 1,
            },
            _ => 1,
        }
    }

    /// The crate's result of a call on evaluated arguments.
    fn apply(
        &self,
        call: &CallExpr,
        target: Option<Value>,
        args: Vec<Value>,
        context: &Context,
    ) -> Eval {
        let names: Vec<String> = (0..args.len()).map(|i| format!("@arg{i}")).collect();
        let synthetic_target = match (&call.target, &target) {
            (Some(_), Some(_)) => Some(Box::new(ident("@target"))),
            // A namespaced function keeps its name.
            (Some(original), None) => Some(original.clone()),
            _ => None,
        };
        let synthetic = IdedExpr {
            id: 0,
            expr: Expr::Call(CallExpr {
                func_name: call.func_name.clone(),
                target: synthetic_target,
                args: names.iter().map(|n| ident(n)).collect(),
            }),
        };
        let mut bindings: Vec<(&str, Value)> = names.iter().map(String::as_str).zip(args).collect();
        if let Some(target) = target {
            bindings.push(("@target", target));
        }
        resolve_with(&synthetic, context, &bindings)
    }
}

/// Whether an expression is an attribute: a variable, or selections and indexes on one.
fn is_attribute(node: &IdedExpr) -> bool {
    match &node.expr {
        Expr::Ident(_) => true,
        Expr::Select(select) => !select.test && is_attribute(&select.operand),
        Expr::Call(call) if call.func_name == "_[_]" => call.args.first().is_some_and(is_attribute),
        _ => false,
    }
}

fn ident(name: &str) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Ident(name.to_owned()),
    }
}

/// The dotted name an expression spells (`a.b`), if it is one.
fn qualified(node: &IdedExpr) -> Option<String> {
    match &node.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => {
            Some(format!("{}.{}", qualified(&select.operand)?, select.field))
        }
        _ => None,
    }
}

fn resolve(node: &IdedExpr, context: &Context) -> Eval {
    Value::resolve(node, context).map_err(|_| ())
}

fn resolve_with(node: &IdedExpr, context: &Context, bindings: &[(&str, Value)]) -> Eval {
    let mut scope = context.new_inner_scope();
    for (name, value) in bindings {
        crate::cel::bind(&mut scope, name, value.clone());
    }
    resolve(node, &scope)
}

/// The variables' kinds, from their expressions in order.
pub fn variable_statics<'a>(
    variables: impl IntoIterator<Item = (&'a str, &'a IdedExpr)>,
) -> Statics {
    let mut statics = Statics::new();
    for (name, expr) in variables {
        let kind = static_kind(expr, &statics);
        statics.insert(name.to_owned(), kind);
    }
    statics
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value as Json, json};

    /// The cost of `source` with `object` bound, as the emulator measures it.
    fn cost(source: &str, object: Json) -> u64 {
        crate::cel::sandbox(|| {
            let program = crate::cel::Program::compile(source, &["object"]).unwrap();
            let mut context = Context::with_env(crate::cel::env());
            crate::cel::bind(&mut context, "object", crate::cel::to_value(&object, false));
            program.cost(&context, &Statics::new(), u64::MAX).unwrap()
        })
        .unwrap()
    }

    /// Costs cel-go 0.26 charges with the Kubernetes environment of admission policies (an
    /// expression compiled with `object` as `dyn`), for the same inputs.
    #[test]
    fn costs_follow_cel_go() {
        let object = json!({"a": "x", "s": "abcdefghijklmnopqrstuvwxyzabcdefghij",
            "l": [1, 2, 3, 4], "m": {"k": "v", "k2": "vv"}, "l2": ["a", "b", "x"],
            "u": ["https://a.example.com/x", "http://127.0.0.1/cb", "https://b.example.com/yy"],
            "data": {"a": "hello", "b": "world!"}});
        for (source, expected) in [
            ("true", 0),
            ("object.a", 2),
            ("has(object.a)", 1),
            ("object.a == 'x'", 3),
            ("object.s.startsWith('ab')", 6),
            ("object.l.all(x, x > 0)", 23),
            ("object.l.exists(x, x > 5)", 27),
            ("object.s.matches('^[a-z]+$')", 10),
            ("size(object.l) > 1 && object.a == 'y'", 7),
            ("object.a == 'x' || object.a == 'y'", 3),
            ("[1,2,3]", 0),
            ("object.a + 'xyz'", 3),
            ("object.l[0]", 3),
            ("object.m['k']", 3),
            ("object.s.contains('bc')", 6),
            ("'x' in object.l2", 3),
            ("object.a in ['x','y','z']", 2),
            (
                "!has(object.q) || object.q.all(u, u.matches('^https://[a-z]+$'))",
                2,
            ),
            ("object.l.filter(x, x > 1)", 50),
            ("object.l.map(x, x + 1)", 59),
            ("object.l2.exists_one(x, x == 'a')", 12),
            (
                "object.u.all(u, u.matches('^https://[a-z.]+/') || u.matches('^http://127\\\\.0\\\\.0\\\\.1(:[0-9]+)?/'))",
                72,
            ),
            (
                "object.u.all(u, !u.matches('^http://127\\\\.0\\\\.0\\\\.1(:[0-9]+)?/') && u.matches('^https://[a-z.]+/'))",
                71,
            ),
            ("object.data.all(k, size(object.data[k]) < 10)", 19),
            (
                "object.u.all(u, ['a.example.com', 'b.example.com'].exists(h, u.startsWith('https://' + h + '/')))",
                59,
            ),
            ("object.s.lowerAscii() == object.s", 12),
            ("object.s.split('m').size() > 1", 12),
            ("object.l2.join(',') == 'a,b,x'", 4),
            ("object.a in object.l2", 5),
            ("object.s.size() > 3 ? object.s.startsWith('a') : false", 10),
            ("{'k': object.a}.k == 'x'", 34),
            ("object.s > 'abc'", 3),
            ("'p' + object.s + 'q' == 'x'", 11),
            ("object.l2.all(x, x in ['a', 'b', 'x'])", 15),
            ("!('forbidden' in object.data)", 4),
            ("object.s.indexOf('j') > 0", 6),
            ("object.m.all(k, object.m[k].size() > 0)", 19),
            ("object.l.size() > 0 ? object.a : object.s", 5),
            ("object.l.size() > 0 ? object.m.k : 'z'", 6),
            ("object.data[object.a]", 4),
            ("object.l.all(i, object.l[i - 1] > 0)", 39),
            ("[1,2].all(i, object.l[i] > 0)", 15),
        ] {
            assert_eq!(cost(source, object.clone()), expected, "{source}");
        }
    }

    /// The project's generated URI check over long URIs: what the API server refuses.
    #[test]
    fn a_regex_over_many_long_strings_goes_over_the_limit() {
        let uris: Vec<String> = (0..50)
            .map(|i| format!("https://app.example.com/{}{i}", "a".repeat(1000)))
            .collect();
        let pattern = format!(
            "^https://({})(/.*)?$",
            vec!["[a-z0-9-]+\\\\.example\\\\.com"; 60].join("|")
        );
        let source = format!("object.uris.all(u, u.matches('{pattern}'))");
        let spent = crate::cel::sandbox(|| {
            let program = crate::cel::Program::compile(&source, &["object"]).unwrap();
            let mut context = Context::with_env(crate::cel::env());
            crate::cel::bind(
                &mut context,
                "object",
                crate::cel::to_value(&json!({"uris": uris}), false),
            );
            program.cost(&context, &Statics::new(), PER_CALL_LIMIT)
        })
        .unwrap();
        assert_eq!(spent, Err(Exceeded));
    }
}
