//! CEL, on the `cel` crate, for ValidatingAdmissionPolicies and the `x-kubernetes-validations`
//! rules of custom resources: compiling with the checks the API server makes when it compiles
//! (syntax, undeclared variables and functions), evaluating, and converting JSON into CEL values.
//!
//! The interpreter recurses once per level of an expression, about 35 KB a level in a debug build:
//! a few dozen levels are more than a request's 2 MB stack holds, and a stack overflow aborts the
//! process. Every use therefore runs in [`sandbox`], on a thread with a large stack that also
//! contains panics, and expressions deeper than [`MAX_DEPTH`] do not compile.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::objects::{Key, Map, OptionalValue};
use cel::parser::PrattParser;
use cel::{Context, Env, ExecutionError, Value as CelValue};
use serde_json::Value;

/// The deepest expression that compiles (the parser stops nesting at 96 on its own; long
/// operator chains nest without it).
pub const MAX_DEPTH: usize = 100;
/// Parsed nodes at most: bounds the work of parsing and of dropping a tree.
const MAX_NODES: usize = 10_000;
/// Enough for `MAX_DEPTH` levels of the costliest nodes (comprehensions) in a debug build.
const STACK_BYTES: usize = 64 << 20;

/// Type names an expression may use as values (`type(x) == string`).
const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
];

/// Runs `work` on a thread with a stack deep enough for any expression that compiles, and
/// reports a panic as an error instead of taking the request (and the store's lock) with it.
///
/// The threads are a small pool kept for the life of the process: an API server does not start a
/// thread per write, and starting one (with its 64 MB stack mapped and unmapped) for every write
/// of a resource with validation rules took a tenth of a cold start's CPU.
pub fn sandbox<T: Send>(work: impl FnOnce() -> T + Send) -> Result<T, String> {
    let pool = pool()?;
    pool.install(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
        .map_err(|_| "internal error: the CEL evaluation panicked".to_owned())
}

/// The sandbox's threads: as many as the machine has cores, each with a deep stack.
fn pool() -> Result<&'static rayon::ThreadPool, String> {
    static POOL: OnceLock<Result<rayon::ThreadPool, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|_| "cel".to_owned())
            .stack_size(STACK_BYTES)
            .build()
            .map_err(|e| format!("cannot start the CEL evaluation threads: {e}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The standard library with the extensions Kubernetes also offers (strings, lists, math).
pub fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        for extension in [
            cel::extensions::strings,
            cel::extensions::lists,
            cel::extensions::math,
        ] {
            if let Err(error) = env.add_extension(extension) {
                tracing::error!(%error, "a CEL extension could not be added");
            }
        }
        Arc::new(env)
    })
    .clone()
}

/// Whether the environment declares a function (or a namespaced one such as `optional.of`).
pub fn declares_function(name: &str) -> bool {
    static KNOWN: OnceLock<std::sync::Mutex<HashMap<String, bool>>> = OnceLock::new();
    let probe = || {
        // Adding a function the environment already declares is refused: a lookup by name.
        Context::with_env(env())
            .add_function(name, |a: i64| a)
            .is_err()
    };
    let Ok(mut known) = KNOWN.get_or_init(Default::default).lock() else {
        return probe();
    };
    *known.entry(name.to_owned()).or_insert_with(probe)
}

/// A compiled expression.
#[derive(Debug)]
pub struct Program {
    expr: IdedExpr,
    /// Identifiers the expression reads that no macro binds (`self`, `object`, ...).
    free: BTreeSet<String>,
    /// Fields selected on each free identifier (`variables.foo` gives `variables` → `foo`).
    fields: HashMap<String, BTreeSet<String>>,
}

impl Program {
    /// Compiles `source` where only `declared` variables exist; the error is the API server's
    /// `ERROR: <input>:line:column: ...` text with the offending line. Call within [`sandbox`].
    pub fn compile(source: &str, declared: &[&str]) -> Result<Program, String> {
        let mut expr = PrattParser::new()
            .enable_optional_syntax(true)
            .max_expression_node_count(MAX_NODES)
            .error_reporting_limit(10)
            .parse(source)
            .map_err(|errors| parse_errors(&errors, source))?;
        if depth(&expr) > MAX_DEPTH {
            return Err(format!(
                "ERROR: <input>:1:1: expression recursion limit exceeded: {MAX_DEPTH}"
            ));
        }
        as_re2(&mut expr);
        let mut found = Found::default();
        collect(&expr, &mut Vec::new(), &mut found);
        let Found {
            free,
            fields,
            calls,
        } = found;
        let program = Program { expr, free, fields };
        if let Some(name) = program
            .free
            .iter()
            .find(|name| !declared.contains(&name.as_str()) && !TYPE_NAMES.contains(&name.as_str()))
        {
            return Err(undeclared(source, name));
        }
        if let Some(name) = calls.iter().find(|name| !declares_function(name)) {
            let short = name.rsplit('.').next().unwrap_or(name);
            return Err(undeclared(source, short));
        }
        Ok(program)
    }

    /// Whether the expression reads the variable `name`.
    pub fn uses(&self, name: &str) -> bool {
        self.free.contains(name)
    }

    /// The fields the expression selects on the variable `name`.
    pub fn fields_of(&self, name: &str) -> impl Iterator<Item = &str> {
        self.fields
            .get(name)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// Evaluates in `context`; the error is CEL's message. Call within [`sandbox`].
    pub fn evaluate(&self, context: &Context) -> Result<CelValue, String> {
        CelValue::resolve(&self.expr, context).map_err(|e| describe(&e))
    }

    /// What evaluating in `context` costs, as the API server charges it (see `cel_cost`), or
    /// `Exceeded` once past `limit`. Call within [`sandbox`].
    pub fn cost(
        &self,
        context: &Context,
        statics: &crate::cel_cost::Statics,
        limit: u64,
    ) -> Result<u64, crate::cel_cost::Exceeded> {
        crate::cel_cost::measure(&self.expr, context, statics, limit)
    }

    /// The parsed expression.
    pub fn expr(&self) -> &IdedExpr {
        &self.expr
    }
}

/// Rewrites the literal patterns of `matches` as RE2 reads them (see `re2`): the crate's
/// `matches` is Rust's `regex`, whose `\s`, `\d` and `\w` are Unicode. A pattern computed at
/// run time keeps Rust's reading. Recursive: only called on trees no deeper than `MAX_DEPTH`.
fn as_re2(node: &mut IdedExpr) {
    if let Expr::Call(call) = &mut node.expr
        && call.func_name == "matches"
    {
        let pattern = if call.target.is_some() {
            call.args.first_mut()
        } else {
            call.args.get_mut(1)
        };
        if let Some(IdedExpr {
            expr: Expr::Literal(LiteralValue::String(text)),
            ..
        }) = pattern
        {
            *text = crate::re2::translate(text.inner()).into();
        }
    }
    match &mut node.expr {
        Expr::Call(call) => {
            if let Some(target) = call.target.as_deref_mut() {
                as_re2(target);
            }
            call.args.iter_mut().for_each(as_re2);
        }
        Expr::Comprehension(c) => {
            for child in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                as_re2(child);
            }
        }
        Expr::List(list) => list.elements.iter_mut().for_each(as_re2),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(e) => {
                        as_re2(&mut e.key);
                        as_re2(&mut e.value);
                    }
                    EntryExpr::StructField(f) => as_re2(&mut f.value),
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &mut s.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(e) => {
                        as_re2(&mut e.key);
                        as_re2(&mut e.value);
                    }
                    EntryExpr::StructField(f) => as_re2(&mut f.value),
                }
            }
        }
        Expr::Select(select) => as_re2(&mut select.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The depth of a tree, walked without recursion (the tree may be deeper than a stack allows).
fn depth(root: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(root, 1usize)];
    while let Some((node, level)) = pending.pop() {
        deepest = deepest.max(level);
        if deepest > MAX_DEPTH {
            break;
        }
        pending.extend(children(node).into_iter().map(|child| (child, level + 1)));
    }
    deepest
}

fn children(node: &IdedExpr) -> Vec<&IdedExpr> {
    match &node.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Select(select) => vec![&select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// The dotted name an expression spells (`a.b.c`), if it is one.
fn qualified_name(node: &IdedExpr) -> Option<String> {
    match &node.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => Some(format!(
            "{}.{}",
            qualified_name(&select.operand)?,
            select.field
        )),
        _ => None,
    }
}

/// The identifier a chain of selections and member calls starts from (`a` in `a.b().c`).
fn receiver_root(node: &IdedExpr) -> Option<&str> {
    let mut node = node;
    loop {
        match &node.expr {
            Expr::Ident(name) => return Some(name),
            Expr::Select(select) => node = &select.operand,
            Expr::Call(call) => node = call.target.as_deref()?,
            _ => return None,
        }
    }
}

/// What an expression refers to.
#[derive(Default)]
struct Found {
    free: BTreeSet<String>,
    fields: HashMap<String, BTreeSet<String>>,
    /// Functions called, by name (namespaced ones dotted).
    calls: Vec<String>,
}

/// Records the free identifiers, the fields selected on them and the functions called.
/// Recursive: only called on trees no deeper than `MAX_DEPTH`.
fn collect(node: &IdedExpr, bound: &mut Vec<String>, found: &mut Found) {
    match &node.expr {
        Expr::Ident(name) => {
            if !bound.contains(name) && !name.starts_with('@') {
                found.free.insert(name.clone());
            }
        }
        Expr::Select(select) => {
            if let Expr::Ident(root) = &select.operand.expr
                && !bound.contains(root)
            {
                found
                    .fields
                    .entry(root.clone())
                    .or_default()
                    .insert(select.field.clone());
            }
            collect(&select.operand, bound, found);
        }
        Expr::Call(call) => {
            let operator = !call
                .func_name
                .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                || call.func_name.starts_with('_');
            // `optional.of(x)`, `strings.quote(x)`: a namespaced function, not a member call on
            // a variable named `optional`.
            let namespace = call
                .target
                .as_deref()
                .and_then(qualified_name)
                .filter(|name| {
                    let root = name.split('.').next().unwrap_or_default();
                    !bound.iter().any(|b| b == root)
                        && declares_function(&format!("{name}.{}", call.func_name))
                });
            // The authorizer library is not in this environment: a call on `authorizer` is
            // left to whoever refuses `authorizer` itself.
            let on_authorizer =
                call.target.as_deref().and_then(receiver_root) == Some("authorizer");
            match namespace {
                Some(_) => {}
                None => {
                    if !operator && !on_authorizer {
                        found.calls.push(call.func_name.clone());
                    }
                    if let Some(target) = &call.target {
                        collect(target, bound, found);
                    }
                }
            }
            for arg in &call.args {
                collect(arg, bound, found);
            }
        }
        Expr::Comprehension(c) => {
            collect(&c.iter_range, bound, found);
            collect(&c.accu_init, bound, found);
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            collect(&c.loop_cond, bound, found);
            collect(&c.loop_step, bound, found);
            collect(&c.result, bound, found);
            bound.truncate(before);
        }
        Expr::List(_) | Expr::Map(_) | Expr::Struct(_) => {
            for child in children(node) {
                collect(child, bound, found);
            }
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Parse errors as cel-go prints them. Not the `cel` crate's `Display`: that panics on the
/// negative positions some errors carry.
fn parse_errors(errors: &cel::ParseErrors, source: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let described: Vec<String> = errors
        .errors
        .iter()
        .map(|error| {
            let (line, column) = error.pos;
            let mut text = format!("ERROR: <input>:{line}:{column}: {}", error.msg);
            let snippet = usize::try_from(line)
                .ok()
                .and_then(|l| l.checked_sub(1))
                .and_then(|l| lines.get(l));
            if let (Some(snippet), Ok(column @ 1..)) = (snippet, usize::try_from(column)) {
                let dots = ".".repeat((column - 1).min(snippet.chars().count()));
                text.push_str(&format!("\n | {snippet}\n | {dots}^"));
            }
            text
        })
        .collect();
    described.join("\n")
}

/// cel-go's message for a name nothing declares, pointing at its first use.
fn undeclared(source: &str, name: &str) -> String {
    let (line, column) = position_of(source, name).unwrap_or((1, 1));
    let text = source.lines().nth(line - 1).unwrap_or_default();
    format!(
        "ERROR: <input>:{line}:{column}: undeclared reference to '{name}' (in container '')\n | {text}\n | {}^",
        ".".repeat(column - 1)
    )
}

/// Where an identifier first occurs as a reference (outside string literals, not after a `.`),
/// as a 1-based line and column.
fn position_of(source: &str, name: &str) -> Option<(usize, usize)> {
    let chars: Vec<char> = source.chars().collect();
    let (mut line, mut column, mut i) = (1, 1, 0);
    let mut after_dot = false;
    let advance = |c: char, line: &mut usize, column: &mut usize| {
        if c == '\n' {
            *line += 1;
            *column = 1;
        } else {
            *column += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
            let quote_len = if triple { 3 } else { 1 };
            for _ in 0..quote_len {
                advance(chars[i], &mut line, &mut column);
                i += 1;
            }
            while i < chars.len() {
                if chars[i] == '\\' {
                    advance(chars[i], &mut line, &mut column);
                    i += 1;
                } else if chars[i] == c
                    && (!triple || (chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c)))
                {
                    for _ in 0..quote_len {
                        advance(c, &mut line, &mut column);
                        i += 1;
                    }
                    break;
                }
                if let Some(&d) = chars.get(i) {
                    advance(d, &mut line, &mut column);
                }
                i += 1;
            }
            after_dot = false;
        } else if c.is_alphabetic() || c == '_' {
            let start = (line, column);
            let begin = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                advance(chars[i], &mut line, &mut column);
                i += 1;
            }
            let word: String = chars[begin..i].iter().collect();
            if word == name && !after_dot {
                return Some(start);
            }
            after_dot = false;
        } else {
            if !c.is_whitespace() {
                after_dot = c == '.';
            }
            advance(c, &mut line, &mut column);
            i += 1;
        }
    }
    None
}

/// An evaluation error in cel-go's words where they differ.
pub fn describe(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::UndeclaredReference(name) => format!("undeclared reference to '{name}'"),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        other => other.to_string(),
    }
}

/// A JSON value as CEL sees it: integers stay `int` (`uint` only past `i64`), and with
/// `drop_nulls` an object's null fields are absent, as in CRD validation rules.
pub fn to_value(json: &Value, drop_nulls: bool) -> CelValue {
    match json {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => CelValue::Int(i),
            (None, Some(u)) => CelValue::UInt(u),
            _ => CelValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(
            items.iter().map(|i| to_value(i, drop_nulls)).collect(),
        )),
        Value::Object(map) => CelValue::Map(Map {
            map: Arc::new(
                map.iter()
                    .filter(|(_, v)| !(drop_nulls && v.is_null()))
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_value(v, drop_nulls)))
                    .collect(),
            ),
        }),
    }
}

/// `optional.of(value)`, or `optional.none()` (`optionalOldSelf` rules).
pub fn optional(value: Option<CelValue>) -> CelValue {
    CelValue::Opaque(Arc::new(match value {
        Some(value) => OptionalValue::of(value),
        None => OptionalValue::none(),
    }))
}

/// Binds a variable in a context.
pub fn bind(context: &mut Context, name: &str, value: CelValue) {
    match value.try_into() {
        Ok(val) => context.add_variable_as_val(name, val),
        Err(_) => context.add_variable_from_value(name, CelValue::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(source: &str, this: Value) -> Result<CelValue, String> {
        sandbox(|| {
            let program = Program::compile(source, &["self"])?;
            let mut context = Context::with_env(env());
            bind(&mut context, "self", to_value(&this, true));
            program.evaluate(&context)
        })
        .and_then(|r| r)
    }

    #[test]
    fn the_projects_rules_evaluate() {
        let rule = "self.tokenEndpointAuthMethod in ['none', 'private_key_jwt'] || (has(self.secret) && (self.secret.generate || has(self.secret.secretRef)))";
        let t = |v| eval(rule, v);
        assert_eq!(
            t(json!({"tokenEndpointAuthMethod": "none"})),
            Ok(true.into())
        );
        assert_eq!(
            t(json!({"tokenEndpointAuthMethod": "client_secret_basic"})),
            Ok(false.into())
        );
        assert_eq!(
            t(
                json!({"tokenEndpointAuthMethod": "client_secret_basic", "secret": {"generate": true}})
            ),
            Ok(true.into())
        );
        assert_eq!(
            eval("!has(self.secretName) || self.generate", json!({})),
            Ok(true.into())
        );
        assert_eq!(
            eval(
                "!has(self.secretName) || self.generate",
                json!({"secretName": "x"})
            ),
            Err("no such key: generate".into())
        );
        // Null fields are absent, as the API server treats them.
        assert_eq!(eval("has(self.a)", json!({"a": null})), Ok(false.into()));
        assert_eq!(
            eval("self.n == 3 && self.n > 2.5", json!({"n": 3})),
            Ok(true.into())
        );
    }

    #[test]
    fn literal_patterns_read_as_re2() {
        // A no-break space is not `\s` to the API server, nor `٣` a digit.
        assert_eq!(
            eval("self.s.matches('^\\\\s$')", json!({"s": "\u{a0}"})),
            Ok(false.into())
        );
        assert_eq!(
            eval("self.s.matches('^\\\\s$')", json!({"s": " "})),
            Ok(true.into())
        );
        assert_eq!(
            eval("matches(self.s, '^\\\\d$')", json!({"s": "٣"})),
            Ok(false.into())
        );
    }

    #[test]
    fn macros_and_string_functions_work() {
        let object = json!({"items": [1, 2, 3], "name": "web-1"});
        for rule in [
            "self.items.all(i, i > 0)",
            "self.items.exists(i, i == 2)",
            "self.items.exists_one(i, i == 3)",
            "self.items.map(i, i * 2) == [2, 4, 6]",
            "self.items.filter(i, i > 1).size() == 2",
            "self.name.startsWith('web') && self.name.endsWith('1') && self.name.contains('-')",
            "self.name.matches('^[a-z]+-[0-9]$')",
            "size(self.name) == 5 && 'name' in self",
            "self.name.split('-')[0].upperAscii() == 'WEB'",
        ] {
            assert_eq!(eval(rule, object.clone()), Ok(true.into()), "{rule}");
        }
    }

    #[test]
    fn what_does_not_compile_says_where() {
        let compile = |source: &str| sandbox(|| Program::compile(source, &["self"]).map(|_| ()));
        let error = compile("self.a ==").unwrap().unwrap_err();
        assert!(
            error.starts_with("ERROR: <input>:1:10: Syntax error"),
            "{error}"
        );
        assert!(error.contains("\n | self.a =="), "{error}");
        let error = compile("self.a == 'x' && object.b").unwrap().unwrap_err();
        assert_eq!(
            error,
            "ERROR: <input>:1:18: undeclared reference to 'object' (in container '')\n | self.a == 'x' && object.b\n | .................^"
        );
        let error = compile("self.nosuchfunction()").unwrap().unwrap_err();
        assert!(
            error.contains("undeclared reference to 'nosuchfunction'"),
            "{error}"
        );
        // Bound by a macro, a namespace, a type name or in a string: all fine.
        for fine in [
            "self.all(x, x != 'object')",
            "optional.of(1).hasValue() && strings.quote('a') != ''",
            "type(self) == map",
        ] {
            assert!(compile(fine).unwrap().is_ok(), "{fine}");
        }
        let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        assert!(compile(&deep).unwrap().is_err());
        let long = format!("1{}", " + 1".repeat(5000));
        assert!(compile(&long).unwrap().is_err());
    }

    #[test]
    fn free_variables_and_their_fields_are_known() {
        let program = sandbox(|| {
            Program::compile(
                "variables.a > 0 && object.items.all(x, x > variables.b) && has(variables.c)",
                &["object", "variables"],
            )
        })
        .unwrap()
        .unwrap();
        assert!(program.uses("object") && program.uses("variables") && !program.uses("x"));
        assert_eq!(
            program.fields_of("variables").collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
    }
}
