//! Property-based fuzzing of the emulator's CEL (`src/cel.rs`, on the `cel` crate: the
//! `x-kubernetes-validations` rules of custom resources and ValidatingAdmissionPolicies); see
//! docs/fuzzing.md.
//!
//! The module is private to the emulator, so it is compiled into this test as it is (`#[path]`),
//! which also runs its own unit tests once more.
//!
//! Inputs: random text from CEL's tokens and hostile characters; expressions printed from a
//! generated tree (so that they compile and reach evaluation); very deep nesting; and random
//! objects for `self` and `oldSelf`.
//!
//! Properties: compiling, evaluating and measuring the cost of an evaluation (`src/cel_cost.rs`,
//! which evaluates the expression again step by step) never panic (the sandbox reports a panic
//! as an error, so its `Ok` is checked) nor overflow the stack; every generated expression compiles;
//! evaluation yields a bool or an error message; and the laws of CEL hold where they are
//! defined: `!` negates, `==` is reflexive, `x == y` implies `x in [y]`, `||` and `&&` commute,
//! De Morgan, `size` of a list literal, `has` of a field.
//!
//! `NAUTHERA_FUZZ_CASES` sets the number of cases (64 by default); nothing is persisted.

#![allow(clippy::unwrap_used)] // tests may unwrap

#[allow(dead_code)]
#[path = "../src/cel.rs"]
mod cel;
#[allow(dead_code)]
#[path = "../src/cel_cost.rs"]
mod cel_cost;
#[allow(dead_code)]
#[path = "../src/re2.rs"]
mod re2;

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Value, json};

fn config() -> Config {
    let cases = std::env::var("NAUTHERA_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.trim().parse().ok())
        .unwrap_or(64);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

const FIELDS: &[&str] = &[
    "a", "b", "name", "items", "spec", "size", "generate", "slug",
];

fn object() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..4).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::num::f64::NORMAL.prop_map(Value::from),
        Just(json!(-1.0)),
        prop::sample::select(vec!["", "a", "none", "ü", "-1"]).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(FIELDS), inner), 0..5).prop_map(
                |entries| {
                    Value::Object(
                        entries
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v))
                            .collect(),
                    )
                }
            ),
        ]
    })
}

/// Tokens of CEL and of what the subset does not cover, and characters that are neither.
const TOKENS: &[&str] = &[
    "self",
    "oldSelf",
    "has",
    "size",
    "(",
    ")",
    "[",
    "]",
    ",",
    ".",
    "!",
    "-",
    "&&",
    "||",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "?",
    ":",
    "true",
    "false",
    "null",
    "'a'",
    "\"b\"",
    "''",
    "'unterminated",
    "\"",
    "0",
    "1",
    "42",
    "99999999999999999999",
    "a",
    "name",
    "items",
    "é",
    "中",
    "😀",
    "\\",
    "$",
    "#",
    "@",
    "=",
    "&",
    "|",
    "+",
    "*",
    "/",
    "%",
    "{",
    "}",
    "all",
    "x",
    "startsWith",
    "1.5",
    "0x10",
    "b'x'",
    "\u{0}",
    "\u{a0}",
    "\u{2028}",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            prop::sample::select(TOKENS),
            prop::sample::select(vec!["", " ", "\t", "\n"]),
        ),
        0..30,
    )
    .prop_map(|tokens| {
        tokens
            .into_iter()
            .map(|(token, separator)| format!("{token}{separator}"))
            .collect()
    })
}

/// An expression of the documented subset, printed with enough parentheses to be unambiguous.
#[derive(Clone, Debug)]
enum Expr {
    Int(u32),
    Str(String),
    Bool(bool),
    Null,
    Var(&'static str),
    Field(Box<Expr>, &'static str),
    Has(&'static str, Vec<&'static str>),
    Size(Box<Expr>),
    SizeMethod(Box<Expr>),
    Not(Box<Expr>),
    Negate(Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Conditional(Box<Expr>, Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
}

impl Expr {
    fn print(&self) -> String {
        match self {
            Expr::Int(n) => n.to_string(),
            Expr::Str(s) => format!("'{s}'"),
            Expr::Bool(b) => b.to_string(),
            Expr::Null => "null".into(),
            Expr::Var(name) => (*name).into(),
            Expr::Field(target, name) => format!("({}).{name}", target.print()),
            Expr::Has(root, path) => format!("has({root}.{})", path.join(".")),
            Expr::Size(inner) => format!("size({})", inner.print()),
            Expr::SizeMethod(inner) => format!("({}).size()", inner.print()),
            Expr::Not(inner) => format!("!({})", inner.print()),
            Expr::Negate(inner) => format!("-({})", inner.print()),
            Expr::Binary(op, a, b) => format!("({}) {op} ({})", a.print(), b.print()),
            Expr::Conditional(c, a, b) => {
                format!("({}) ? ({}) : ({})", c.print(), a.print(), b.print())
            }
            Expr::List(items) => format!(
                "[{}]",
                items.iter().map(Expr::print).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        (0u32..5).prop_map(Expr::Int),
        (0u32..3).prop_map(|n| Expr::Negate(Box::new(Expr::Int(n)))),
        prop::sample::select(FIELDS).prop_map(|f| Expr::Field(Box::new(Expr::Var("self")), f)),
        "[a-z ü]{0,4}".prop_map(Expr::Str),
        any::<bool>().prop_map(Expr::Bool),
        Just(Expr::Null),
        prop::sample::select(vec!["self", "oldSelf"]).prop_map(Expr::Var),
        (
            prop::sample::select(vec!["self", "oldSelf"]),
            prop::collection::vec(prop::sample::select(FIELDS), 1..3)
        )
            .prop_map(|(root, path)| Expr::Has(root, path)),
    ];
    leaf.prop_recursive(5, 40, 4, |inner| {
        let boxed = || inner.clone().prop_map(Box::new);
        prop_oneof![
            (boxed(), prop::sample::select(FIELDS)).prop_map(|(e, f)| Expr::Field(e, f)),
            boxed().prop_map(Expr::Size),
            boxed().prop_map(Expr::SizeMethod),
            boxed().prop_map(Expr::Not),
            boxed().prop_map(Expr::Negate),
            (
                prop::sample::select(vec!["&&", "||", "==", "!=", "<", "<=", ">", ">=", "in"]),
                boxed(),
                boxed()
            )
                .prop_map(|(op, a, b)| Expr::Binary(op, a, b)),
            (boxed(), boxed(), boxed()).prop_map(|(c, a, b)| Expr::Conditional(c, a, b)),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Expr::List),
        ]
    })
}

/// Compiles a rule and evaluates it: `None` when it does not compile. Fails the test when the
/// sandbox does (a panic).
fn evaluate(text: &str, this: &Value, old: Option<&Value>) -> Option<Result<bool, String>> {
    cel::sandbox(|| {
        let program = cel::Program::compile(text, &["self", "oldSelf"]).ok()?;
        let mut context = ::cel::Context::with_env(cel::env());
        cel::bind(&mut context, "self", cel::to_value(this, true));
        if let Some(old) = old {
            cel::bind(&mut context, "oldSelf", cel::to_value(old, true));
        }
        // Without a limit the measure always ends with a figure.
        let measured = program.cost(&context, &cel_cost::Statics::new(), u64::MAX);
        assert!(measured.is_ok(), "{text:?}: {measured:?}");
        Some(match program.evaluate(&context) {
            Ok(::cel::Value::Bool(truth)) => Ok(truth),
            Ok(other) => Err(format!("not a bool: {other:?}")),
            Err(message) => Err(message),
        })
    })
    .expect("compiling and evaluating never panic")
}

/// Whether a text compiles, and whether it reads `oldSelf`.
fn compiles(text: &str) -> Option<bool> {
    cel::sandbox(|| {
        cel::Program::compile(text, &["self", "oldSelf"])
            .ok()
            .map(|p| p.uses("oldSelf"))
    })
    .expect("compiling never panics")
}

/// Evaluates an expression that must compile.
fn must(
    text: &str,
    this: &Value,
    old: Option<&Value>,
) -> Result<Result<bool, String>, TestCaseError> {
    evaluate(text, this, old).ok_or_else(|| {
        TestCaseError::fail(format!("{text:?} is generated CEL but does not compile"))
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_text_parses_or_not_and_evaluates_without_panicking(
        text in prop_oneof![token_soup(), any::<String>(), expr().prop_map(|e| e.print())],
        this in object(),
        old in prop::option::of(object()),
    ) {
        if let Some(Err(message)) = evaluate(&text, &this, old.as_ref()) {
            prop_assert!(!message.is_empty());
        }
        // Compiling is a function of the text.
        prop_assert_eq!(compiles(&text), compiles(&text));
    }

    #[test]
    fn the_documented_subset_parses_and_obeys_the_laws_of_cel(
        a in expr(),
        b in expr(),
        c in expr(),
        this in object(),
        old in prop::option::of(object()),
        field in prop::sample::select(FIELDS),
    ) {
        let old = old.as_ref();
        let (a, b, c) = (a.print(), b.print(), c.print());
        let value_of = |text: &str| must(text, &this, old);
        let result = value_of(&a)?;
        prop_assert_eq!(compiles(&a), Some(a.contains("oldSelf")));
        if let Ok(truth) = result {
            prop_assert_eq!(value_of(&format!("!({a})"))?, Ok(!truth), "! does not negate {}", a);
        }
        // `==` is reflexive on whatever evaluates; `x == y` implies `x in [y]`.
        let equal = value_of(&format!("({a}) == ({b})"))?;
        if value_of(&format!("({a}) == ({a})"))?.is_ok() {
            prop_assert_eq!(value_of(&format!("({a}) == ({a})"))?, Ok(true), "{} != itself", a);
            prop_assert_eq!(value_of(&format!("({a}) in [({a})]"))?, Ok(true), "{} not in [itself]", a);
        }
        // Lists are equal when their items are.
        prop_assert_eq!(value_of(&format!("[({a})] == [({b})]"))?.ok(), equal.clone().ok(), "[{}] == [{}]", a, b);
        if equal == Ok(true) {
            prop_assert_eq!(
                value_of(&format!("({a}) in [({c}), ({b})]"))?.ok().or(Some(true)),
                Some(true),
                "{} == {} but not in a list of it", a, b
            );
            prop_assert_eq!(value_of(&format!("({a}) != ({b})"))?, Ok(false));
        }
        // The same with literals that are often equal to it: numbers of both kinds (`-(1)` is
        // computed, `1` is written), strings, booleans, null.
        for literal in ["0", "1", "2", "3", "-(0)", "-(1)", "-(2)", "'a'", "''", "true", "null"] {
            if value_of(&format!("({a}) == ({literal})"))? == Ok(true) {
                prop_assert_eq!(
                    value_of(&format!("({a}) in [({literal})]"))?,
                    Ok(true),
                    "{} == {} but not in [{}]", a, literal, literal
                );
                prop_assert_eq!(
                    value_of(&format!("({literal}) in [({a})]"))?,
                    Ok(true),
                    "{} == {} but not in [{}]", literal, a, a
                );
            }
        }
        // `||` and `&&` commute, errors included, and De Morgan holds.
        for op in ["||", "&&"] {
            let ab = value_of(&format!("({a}) {op} ({b})"))?;
            let ba = value_of(&format!("({b}) {op} ({a})"))?;
            prop_assert_eq!(ab.is_ok(), ba.is_ok(), "{} {} {}", a, op, b);
            prop_assert_eq!(ab.ok(), ba.ok(), "{} {} {}", a, op, b);
        }
        let left = value_of(&format!("!(({a}) && ({b}))"))?;
        let right = value_of(&format!("!({a}) || !({b})"))?;
        prop_assert_eq!(left.ok(), right.ok(), "De Morgan, {} and {}", a, b);
        // A conditional takes the branch its condition selects.
        if let Ok(truth) = value_of(&c)? {
            let chosen = if truth { &a } else { &b };
            let conditional = value_of(&format!("(({c}) ? ({a}) : ({b})) == ({chosen})"))?;
            if value_of(&format!("({chosen}) == ({chosen})"))?.is_ok() {
                prop_assert_eq!(conditional, Ok(true));
            }
        }
        // `size` of a list literal counts its items, evaluated or not.
        let list = format!("size([({a}), ({b}), ({c})]) == 3");
        let items_evaluate = [&a, &b, &c]
            .iter()
            .all(|e| value_of(&format!("({e}) == ({e})")).is_ok_and(|r| r.is_ok()));
        if items_evaluate {
            prop_assert_eq!(value_of(&list)?, Ok(true));
        }
        // `has` says whether the field is there and not null.
        if this.is_object() {
            let expected = this.get(field).is_some_and(|v| !v.is_null());
            let has = value_of(&format!("has(self.{field})"))?;
            prop_assert_eq!(has, Ok(expected));
        }
    }

    /// Deep nesting is refused or evaluated, never a stack overflow.
    #[test]
    fn deep_nesting_does_not_overflow(
        depth in prop_oneof![1usize..100, 100usize..2000, Just(20_000)],
        shape in 0usize..6,
    ) {
        let text = match shape {
            0 => format!("{}true{}", "(".repeat(depth), ")".repeat(depth)),
            1 => format!("{}true", "!".repeat(depth)),
            2 => format!("{}1 == 1", "-".repeat(depth)),
            3 => format!("true{}", " || false".repeat(depth)),
            4 => format!("size({}{}) == 1", "[".repeat(depth), "]".repeat(depth)),
            _ => format!("{}true{}", "true ? (".repeat(depth), ") : false".repeat(depth)),
        };
        let _ = evaluate(&text, &json!({}), None);
    }
}

/// What these properties found, kept as plain cases.
#[test]
fn what_fuzzing_found_stays_fixed() {
    let this = json!({"a": -1, "list": [-1]});
    // `-1` written in a rule is computed (a double), `-1` in an object is an int: equal in CEL.
    assert_eq!(evaluate("self.a in [-1]", &this, None), Some(Ok(true)));
    assert_eq!(evaluate("-(-(0)) in [0]", &this, None), Some(Ok(true)));
    assert_eq!(evaluate("self.list == [-1]", &this, None), Some(Ok(true)));
    // Nesting too deep for the stack does not compile (it used to overflow); a run of `!`
    // collapses, as in cel-go.
    assert_eq!(
        compiles(&format!("{}true", "!".repeat(20_000))),
        Some(false)
    );
    for text in [
        format!("true{}", " == true".repeat(20_000)),
        format!("self{}", ".a".repeat(20_000)),
        format!("{}1{}", "[".repeat(20_000), "]".repeat(20_000)),
    ] {
        assert_eq!(compiles(&text), None);
    }
    assert_eq!(compiles(&format!("{}true", "!".repeat(50))), Some(false));
}
