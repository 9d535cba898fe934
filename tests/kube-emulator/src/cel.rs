//! A small subset of CEL for `x-kubernetes-validations` rules: `self` and `oldSelf` with field
//! access, `has()`, `size()`, literals and lists, `!`, `-`, `&&`, `||`, `==`, `!=`, `<`, `<=`,
//! `>`, `>=`, `in`, and `? :`. A rule using anything else does not parse and is skipped (never
//! refused for want of support); errors at evaluation fail the rule, as in the API server.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Literal(Value),
    Symbol(&'static str),
}

fn tokenize(text: &str) -> Option<Vec<Token>> {
    const SYMBOLS: &[&str] = &[
        "&&", "||", "==", "!=", "<=", ">=", "!", "<", ">", "(", ")", "[", "]", ",", ".", "-", "?",
        ":",
    ];
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' || c == '"' {
            let end = chars[i + 1..].iter().position(|&d| d == c)? + i + 1;
            tokens.push(Token::Literal(Value::String(
                chars[i + 1..end].iter().collect(),
            )));
            i = end + 1;
        } else if c.is_ascii_digit() {
            let end = chars[i..]
                .iter()
                .position(|d| !d.is_ascii_digit())
                .map_or(chars.len(), |p| p + i);
            let number: i64 = chars[i..end].iter().collect::<String>().parse().ok()?;
            tokens.push(Token::Literal(Value::from(number)));
            i = end;
        } else if c.is_alphabetic() || c == '_' {
            let end = chars[i..]
                .iter()
                .position(|d| !(d.is_alphanumeric() || *d == '_'))
                .map_or(chars.len(), |p| p + i);
            let word: String = chars[i..end].iter().collect();
            tokens.push(match word.as_str() {
                "true" => Token::Literal(Value::Bool(true)),
                "false" => Token::Literal(Value::Bool(false)),
                "null" => Token::Literal(Value::Null),
                "in" => Token::Symbol("in"),
                _ => Token::Ident(word),
            });
            i = end;
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let symbol = SYMBOLS.iter().find(|s| rest.starts_with(**s))?;
            tokens.push(Token::Symbol(symbol));
            i += symbol.len();
        }
    }
    Some(tokens)
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Literal(Value),
    Variable(String),
    List(Vec<Expr>),
    Member(Box<Expr>, String),
    Has(Box<Expr>, String),
    Size(Box<Expr>),
    Not(Box<Expr>),
    Negate(Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Conditional(Box<Expr>, Box<Expr>, Box<Expr>),
}

/// How deep a rule may nest (parentheses, `!` and `-`, each further `||`, `&&`, `?:` and field
/// access): deeper rules do not parse, so that neither parsing nor evaluating a rule can overflow
/// the stack. The API server's CEL refuses such rules too (its parser has a recursion limit).
const MAX_DEPTH: usize = 100;

struct Parser {
    tokens: Vec<Token>,
    position: usize,
    /// How deep the expression being parsed nests here.
    depth: usize,
}

impl Parser {
    /// One level deeper; `None` past `MAX_DEPTH`.
    fn deeper(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// Parses with `parse`, then returns to the depth of before.
    fn scoped(&mut self, parse: impl FnOnce(&mut Self) -> Option<Expr>) -> Option<Expr> {
        let depth = self.depth;
        let parsed = parse(self);
        self.depth = depth;
        parsed
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position)
    }

    fn eat(&mut self, symbol: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Symbol(s)) if *s == symbol);
        if found {
            self.position += 1;
        }
        found
    }

    fn expect(&mut self, symbol: &str) -> Option<()> {
        self.eat(symbol).then_some(())
    }

    fn conditional(&mut self) -> Option<Expr> {
        self.scoped(|p| {
            p.deeper()?;
            let condition = p.or()?;
            if p.eat("?") {
                let then = p.conditional()?;
                p.expect(":")?;
                let otherwise = p.conditional()?;
                return Some(Expr::Conditional(
                    Box::new(condition),
                    Box::new(then),
                    Box::new(otherwise),
                ));
            }
            Some(condition)
        })
    }

    fn or(&mut self) -> Option<Expr> {
        self.scoped(|p| {
            let mut left = p.and()?;
            while p.eat("||") {
                p.deeper()?;
                left = Expr::Binary("||", Box::new(left), Box::new(p.and()?));
            }
            Some(left)
        })
    }

    fn and(&mut self) -> Option<Expr> {
        self.scoped(|p| {
            let mut left = p.relation()?;
            while p.eat("&&") {
                p.deeper()?;
                left = Expr::Binary("&&", Box::new(left), Box::new(p.relation()?));
            }
            Some(left)
        })
    }

    fn relation(&mut self) -> Option<Expr> {
        let left = self.unary()?;
        for op in ["==", "!=", "<=", ">=", "<", ">", "in"] {
            if self.eat(op) {
                return Some(Expr::Binary(op, Box::new(left), Box::new(self.unary()?)));
            }
        }
        Some(left)
    }

    fn unary(&mut self) -> Option<Expr> {
        self.scoped(|p| {
            if p.eat("!") {
                p.deeper()?;
                return Some(Expr::Not(Box::new(p.unary()?)));
            }
            if p.eat("-") {
                p.deeper()?;
                return Some(Expr::Negate(Box::new(p.unary()?)));
            }
            p.member()
        })
    }

    fn member(&mut self) -> Option<Expr> {
        self.scoped(|p| {
            let mut expr = p.primary()?;
            while p.eat(".") {
                p.deeper()?;
                let Some(Token::Ident(name)) = p.peek().cloned() else {
                    return None;
                };
                p.position += 1;
                if name == "size" && p.eat("(") {
                    p.expect(")")?;
                    expr = Expr::Size(Box::new(expr));
                } else {
                    expr = Expr::Member(Box::new(expr), name);
                }
            }
            Some(expr)
        })
    }

    fn primary(&mut self) -> Option<Expr> {
        match self.peek().cloned()? {
            Token::Literal(value) => {
                self.position += 1;
                Some(Expr::Literal(value))
            }
            Token::Ident(name) => {
                self.position += 1;
                match name.as_str() {
                    "has" => {
                        self.expect("(")?;
                        let Expr::Member(target, field) = self.member()? else {
                            return None;
                        };
                        self.expect(")")?;
                        Some(Expr::Has(target, field))
                    }
                    "size" => {
                        self.expect("(")?;
                        let inner = self.conditional()?;
                        self.expect(")")?;
                        Some(Expr::Size(Box::new(inner)))
                    }
                    "self" | "oldSelf" => Some(Expr::Variable(name)),
                    _ => None,
                }
            }
            Token::Symbol("(") => {
                self.position += 1;
                let inner = self.conditional()?;
                self.expect(")")?;
                Some(inner)
            }
            Token::Symbol("[") => {
                self.position += 1;
                let mut items = Vec::new();
                if !self.eat("]") {
                    loop {
                        items.push(self.conditional()?);
                        if self.eat("]") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Some(Expr::List(items))
            }
            Token::Symbol(_) => None,
        }
    }
}

/// A parsed rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule(Expr);

impl Rule {
    /// The parsed rule, parsed once per rule text (every write of a custom resource evaluates
    /// its schema's rules); `None` as for [`Rule::parse`].
    pub fn compiled(text: &str) -> Option<std::sync::Arc<Rule>> {
        use std::collections::HashMap;
        use std::sync::{Arc, Mutex, OnceLock};
        static COMPILED: OnceLock<Mutex<HashMap<String, Option<Arc<Rule>>>>> = OnceLock::new();
        let mut compiled = COMPILED.get_or_init(Mutex::default).lock().ok()?;
        compiled
            .entry(text.to_owned())
            .or_insert_with(|| Rule::parse(text).map(Arc::new))
            .clone()
    }

    /// `None` when the rule uses CEL this subset does not cover.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parser = Parser {
            tokens: tokenize(text)?,
            position: 0,
            depth: 0,
        };
        let expr = parser.conditional()?;
        (parser.position == parser.tokens.len()).then_some(Self(expr))
    }

    pub fn uses_old_self(&self) -> bool {
        fn uses(expr: &Expr) -> bool {
            match expr {
                Expr::Variable(name) => name == "oldSelf",
                Expr::Literal(_) => false,
                Expr::List(items) => items.iter().any(uses),
                Expr::Member(inner, _)
                | Expr::Has(inner, _)
                | Expr::Size(inner)
                | Expr::Not(inner)
                | Expr::Negate(inner) => uses(inner),
                Expr::Binary(_, a, b) => uses(a) || uses(b),
                Expr::Conditional(a, b, c) => uses(a) || uses(b) || uses(c),
            }
        }
        uses(&self.0)
    }

    /// Evaluates to a boolean, or says why it could not.
    pub fn evaluate(&self, this: &Value, old: Option<&Value>) -> Result<bool, String> {
        match eval(&self.0, this, old)? {
            Value::Bool(result) => Ok(result),
            other => Err(format!("rule evaluated to {other}, not a bool")),
        }
    }
}

fn number(value: &Value) -> Option<f64> {
    value.as_f64()
}

/// CEL's equality: numbers by value whatever their kind (`-1`, computed, is a double; `-1` read
/// from an object is an int), lists and maps by their entries.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => a == b || number(a) == number(b),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| equal(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

fn eval(expr: &Expr, this: &Value, old: Option<&Value>) -> Result<Value, String> {
    let boolean = |e: &Expr| -> Result<bool, String> {
        eval(e, this, old)?
            .as_bool()
            .ok_or_else(|| "no such overload".to_owned())
    };
    Ok(match expr {
        Expr::Literal(value) => value.clone(),
        Expr::Variable(name) if name == "self" => this.clone(),
        Expr::Variable(_) => old.cloned().ok_or("oldSelf is not available on create")?,
        Expr::List(items) => Value::Array(
            items
                .iter()
                .map(|i| eval(i, this, old))
                .collect::<Result<_, _>>()?,
        ),
        Expr::Member(target, field) => {
            let target = eval(target, this, old)?;
            target
                .get(field)
                .cloned()
                .ok_or_else(|| format!("no such key: {field}"))?
        }
        Expr::Has(target, field) => {
            let target = eval(target, this, old)?;
            Value::Bool(target.get(field).is_some_and(|v| !v.is_null()))
        }
        Expr::Size(inner) => match eval(inner, this, old)? {
            Value::String(s) => Value::from(s.chars().count()),
            Value::Array(items) => Value::from(items.len()),
            Value::Object(map) => Value::from(map.len()),
            _ => return Err("no such overload: size".into()),
        },
        Expr::Not(inner) => Value::Bool(!boolean(inner)?),
        Expr::Negate(inner) => {
            let n = number(&eval(inner, this, old)?).ok_or("no such overload: -")?;
            serde_json::Number::from_f64(-n).map_or(Value::Null, Value::Number)
        }
        Expr::Conditional(condition, then, otherwise) => {
            if boolean(condition)? {
                eval(then, this, old)?
            } else {
                eval(otherwise, this, old)?
            }
        }
        // Logical operators absorb an error on one side when the other decides.
        Expr::Binary("||", a, b) => match (boolean(a), boolean(b)) {
            (Ok(true), _) | (_, Ok(true)) => Value::Bool(true),
            (Ok(false), Ok(false)) => Value::Bool(false),
            (Err(e), _) | (_, Err(e)) => return Err(e),
        },
        Expr::Binary("&&", a, b) => match (boolean(a), boolean(b)) {
            (Ok(false), _) | (_, Ok(false)) => Value::Bool(false),
            (Ok(true), Ok(true)) => Value::Bool(true),
            (Err(e), _) | (_, Err(e)) => return Err(e),
        },
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval(a, this, old)?, eval(b, this, old)?);
            match *op {
                "==" => Value::Bool(equal(&a, &b)),
                "!=" => Value::Bool(!equal(&a, &b)),
                "in" => match &b {
                    Value::Array(items) => Value::Bool(items.iter().any(|item| equal(&a, item))),
                    Value::Object(map) => {
                        Value::Bool(a.as_str().is_some_and(|k| map.contains_key(k)))
                    }
                    _ => return Err("no such overload: in".into()),
                },
                _ => {
                    let ordering = match (&a, &b) {
                        (Value::String(x), Value::String(y)) => x.partial_cmp(y),
                        _ => number(&a)
                            .zip(number(&b))
                            .and_then(|(x, y)| x.partial_cmp(&y)),
                    }
                    .ok_or_else(|| format!("no such overload: {op}"))?;
                    Value::Bool(match *op {
                        "<" => ordering.is_lt(),
                        "<=" => ordering.is_le(),
                        ">" => ordering.is_gt(),
                        _ => ordering.is_ge(),
                    })
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(rule: &str, this: Value) -> Result<bool, String> {
        Rule::parse(rule).expect("parses").evaluate(&this, None)
    }

    #[test]
    fn the_projects_rules_evaluate() {
        let rule = "self.tokenEndpointAuthMethod in ['none', 'private_key_jwt'] || (has(self.secret) && (self.secret.generate || has(self.secret.secretRef)))";
        assert_eq!(
            check(rule, json!({"tokenEndpointAuthMethod": "none"})),
            Ok(true)
        );
        assert_eq!(
            check(
                rule,
                json!({"tokenEndpointAuthMethod": "client_secret_basic"})
            ),
            Ok(false)
        );
        assert_eq!(
            check(
                rule,
                json!({"tokenEndpointAuthMethod": "client_secret_basic", "secret": {"generate": true}})
            ),
            Ok(true)
        );
        assert_eq!(
            check(
                "!(self.generate && has(self.secretRef))",
                json!({"generate": true, "secretRef": {}})
            ),
            Ok(false)
        );
        assert_eq!(
            check("!has(self.secretName) || self.generate", json!({})),
            Ok(true)
        );
        assert!(
            check(
                "!has(self.secretName) || self.generate",
                json!({"secretName": "x"})
            )
            .is_err()
        );
        let immutable = Rule::parse("self.slug == oldSelf.slug").unwrap();
        assert!(immutable.uses_old_self());
        assert_eq!(
            immutable.evaluate(&json!({"slug": "a"}), Some(&json!({"slug": "b"}))),
            Ok(false)
        );
        assert_eq!(
            check(
                "size(self.name) <= 3 && self.count > -1 ? true : false",
                json!({"name": "abc", "count": 0})
            ),
            Ok(true)
        );
    }

    #[test]
    fn unsupported_cel_does_not_parse() {
        assert!(Rule::parse("self.items.all(i, i > 0)").is_none());
        assert!(Rule::parse("self.name.startsWith('a')").is_none());
        assert!(Rule::parse("self.a ==").is_none());
    }
}
