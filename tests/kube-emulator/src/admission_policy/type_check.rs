//! Type checking of policy expressions, as cel-go's checker does it for the API server in two
//! places:
//!
//! - **When a policy is written**, `request`, `namespaceObject` and `variables` have types
//!   (`object`, `oldObject` and `params` are `dyn`): selecting a field an AdmissionRequest or a
//!   Namespace does not have, a variable not declared, or a field of a scalar is a compilation
//!   error and the policy is refused ([`creation_errors`]).
//! - **After it is written**, the controller manager's status controller checks every
//!   validation and message expression again with `object` and `oldObject` typed by the schema
//!   of each kind the policy matches (at most ten, named by group, version and resource without
//!   wildcards) and `params` by its `paramKind`, and reports what fails as
//!   `status.typeChecking.expressionWarnings` ([`check`]); variables are `dyn` there.
//!
//! What is checked is field selection: a field an object type does not declare (`undefined field
//! 'x'`), a selection on a scalar or list (`type 'string' does not support field selection`), an
//! index of an object with a string (`found no matching overload for '_[_]' ...`). Types flow
//! through selections, indexes, list and map literals, conditionals and macros' iteration
//! variables; what the checker cannot follow is `dyn`, which checks nothing. Schemas are those of
//! custom resources: the emulator has no schema of built-in kinds, so a policy matching only
//! built-in kinds gets no warnings, where a real server would check those too, and a `paramKind`
//! of a built-in kind types `params` as `dyn` (a real server types it).
//!
//! Schema types follow the API server's `SchemaDeclType`: objects with `properties` are object
//! types with those fields (`x-kubernetes-preserve-unknown-fields` is ignored, so an object
//! without properties has no fields), `additionalProperties` make maps, `x-kubernetes-int-or-string`
//! is `dyn`, strings of format `date-time`/`date` are timestamps, `duration` durations and `byte`
//! bytes; a resource root also has `apiVersion`, `kind` and the ObjectMeta `metadata`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, SourceInfo};
use serde_json::{Value, json};

use crate::registry::ResourceInfo;
use crate::store::Store;

/// At most this many kinds are checked, as in the API server.
const MAX_TYPES: usize = 10;

/// One warning of a policy's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub field_ref: String,
    pub warning: String,
}

/// A CEL type as the checker sees it.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    Dyn,
    Bool,
    Int,
    Uint,
    Double,
    Str,
    Bytes,
    Null,
    Timestamp,
    Duration,
    List(Box<Ty>),
    /// A map with string keys.
    Map(Box<Ty>),
    Object(Arc<Object>),
}

#[derive(Debug, PartialEq)]
struct Object {
    name: String,
    fields: BTreeMap<String, Ty>,
}

impl Ty {
    fn name(&self) -> String {
        match self {
            Self::Dyn => "dyn".into(),
            Self::Bool => "bool".into(),
            Self::Int => "int".into(),
            Self::Uint => "uint".into(),
            Self::Double => "double".into(),
            Self::Str => "string".into(),
            Self::Bytes => "bytes".into(),
            Self::Null => "null_type".into(),
            Self::Timestamp => "timestamp".into(),
            Self::Duration => "duration".into(),
            Self::List(item) => format!("list({})", item.name()),
            Self::Map(value) => format!("map(string, {})", value.name()),
            Self::Object(object) => object.name.clone(),
        }
    }

    fn object(name: &str, fields: impl IntoIterator<Item = (String, Ty)>) -> Ty {
        Ty::Object(Arc::new(Object {
            name: name.to_owned(),
            fields: fields.into_iter().collect(),
        }))
    }
}

/// CEL keywords, which a field name may not be without escaping.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A property name as CEL expressions spell it (`a-b` is `a__dash__b`), or `None` when it cannot
/// be spelled.
fn escape(name: &str) -> Option<String> {
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let first = name.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    let mut escaped = String::new();
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            escaped.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => escaped.push_str("__dot__"),
            '-' => escaped.push_str("__dash__"),
            '/' => escaped.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => escaped.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(escaped)
}

/// ObjectMeta's published schema, for `metadata` at a resource's root.
fn object_meta_schema() -> &'static Value {
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let string = json!({"type": "string"});
        let time = json!({"type": "string", "format": "date-time"});
        let strings = json!({"type": "object", "additionalProperties": {"type": "string"}});
        json!({"type": "object", "properties": {
            "annotations": strings, "labels": strings,
            "creationTimestamp": time, "deletionTimestamp": time,
            "deletionGracePeriodSeconds": {"type": "integer"}, "generation": {"type": "integer"},
            "finalizers": {"type": "array", "items": string},
            "generateName": string, "name": string, "namespace": string,
            "resourceVersion": string, "selfLink": string, "uid": string,
            "managedFields": {"type": "array", "items": {"type": "object", "properties": {
                "apiVersion": string, "fieldsType": string, "fieldsV1": {"type": "object"},
                "manager": string, "operation": string, "subresource": string, "time": time}}},
            "ownerReferences": {"type": "array", "items": {"type": "object", "properties": {
                "apiVersion": string, "blockOwnerDeletion": {"type": "boolean"},
                "controller": {"type": "boolean"}, "kind": string, "name": string, "uid": string}}},
        }})
    })
}

/// The type of a structural schema node named `name` (`None`: a node CEL cannot see).
fn from_schema(schema: &Value, name: &str, root: bool) -> Option<Ty> {
    if schema["x-kubernetes-int-or-string"].as_bool() == Some(true) {
        return Some(Ty::Dyn);
    }
    let embedded = root || schema["x-kubernetes-embedded-resource"].as_bool() == Some(true);
    match schema["type"].as_str()? {
        "array" => {
            let items = schema.get("items").filter(|i| i.is_object())?;
            let item = from_schema(items, &format!("{name}.@idx"), false)?;
            Some(Ty::List(Box::new(item)))
        }
        "object" => {
            if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let value = from_schema(values, &format!("{name}.@elem"), false)?;
                return Some(Ty::Map(Box::new(value)));
            }
            let mut fields = BTreeMap::new();
            for (property, child) in schema["properties"].as_object().into_iter().flatten() {
                let Some(escaped) = escape(property) else {
                    continue;
                };
                if let Some(ty) = from_schema(child, &format!("{name}.{property}"), false) {
                    fields.insert(escaped, ty);
                }
            }
            if embedded {
                fields.insert("apiVersion".into(), Ty::Str);
                fields.insert("kind".into(), Ty::Str);
                let metadata = if root {
                    from_schema(object_meta_schema(), &format!("{name}.metadata"), false)
                } else {
                    Some(Ty::object(
                        &format!("{name}.metadata"),
                        [("name".into(), Ty::Str), ("generateName".into(), Ty::Str)],
                    ))
                };
                fields.extend(metadata.map(|m| ("metadata".to_owned(), m)));
            }
            Some(Ty::object(name, fields))
        }
        "string" => Some(match schema["format"].as_str() {
            Some("byte") => Ty::Bytes,
            Some("duration") => Ty::Duration,
            Some("date" | "date-time") => Ty::Timestamp,
            _ => Ty::Str,
        }),
        "boolean" => Some(Ty::Bool),
        "number" => Some(Ty::Double),
        "integer" => Some(Ty::Int),
        _ => None,
    }
}

fn request_type() -> Ty {
    let gvk = |name: &str, last: &str| {
        Ty::object(
            name,
            ["group", "version", last].map(|f| (f.to_owned(), Ty::Str)),
        )
    };
    let user = Ty::object(
        "kubernetes.UserInfo",
        [
            ("username".to_owned(), Ty::Str),
            ("uid".to_owned(), Ty::Str),
            ("groups".to_owned(), Ty::List(Box::new(Ty::Str))),
            (
                "extra".to_owned(),
                Ty::Map(Box::new(Ty::List(Box::new(Ty::Str)))),
            ),
        ],
    );
    let kind = gvk("kubernetes.GroupVersionKind", "kind");
    let resource = gvk("kubernetes.GroupVersionResource", "resource");
    Ty::object(
        "kubernetes.AdmissionRequest",
        [
            ("kind".to_owned(), kind.clone()),
            ("resource".to_owned(), resource.clone()),
            ("subResource".to_owned(), Ty::Str),
            ("requestKind".to_owned(), kind),
            ("requestResource".to_owned(), resource),
            ("requestSubResource".to_owned(), Ty::Str),
            ("name".to_owned(), Ty::Str),
            ("namespace".to_owned(), Ty::Str),
            ("operation".to_owned(), Ty::Str),
            ("userInfo".to_owned(), user),
            ("dryRun".to_owned(), Ty::Bool),
            ("options".to_owned(), Ty::Dyn),
        ],
    )
}

fn namespace_type() -> Ty {
    let strings = || Ty::List(Box::new(Ty::Str));
    let labels = || Ty::Map(Box::new(Ty::Str));
    let condition = Ty::object(
        "kubernetes.NamespaceCondition",
        [
            ("status".to_owned(), Ty::Str),
            ("type".to_owned(), Ty::Str),
            ("lastTransitionTime".to_owned(), Ty::Timestamp),
            ("message".to_owned(), Ty::Str),
            ("reason".to_owned(), Ty::Str),
        ],
    );
    // `UID`, not `uid`: as the API server declares it.
    let metadata = Ty::object(
        "kubernetes.NamespaceMetadata",
        [
            ("name".to_owned(), Ty::Str),
            ("generateName".to_owned(), Ty::Str),
            ("namespace".to_owned(), Ty::Str),
            ("labels".to_owned(), labels()),
            ("annotations".to_owned(), labels()),
            ("UID".to_owned(), Ty::Str),
            ("creationTimestamp".to_owned(), Ty::Timestamp),
            ("deletionGracePeriodSeconds".to_owned(), Ty::Int),
            ("deletionTimestamp".to_owned(), Ty::Timestamp),
            ("generation".to_owned(), Ty::Int),
            ("resourceVersion".to_owned(), Ty::Str),
            ("finalizers".to_owned(), strings()),
        ],
    );
    Ty::object(
        "kubernetes.Namespace",
        [
            ("metadata".to_owned(), metadata),
            (
                "spec".to_owned(),
                Ty::object(
                    "kubernetes.NamespaceSpec",
                    [("finalizers".to_owned(), strings())],
                ),
            ),
            (
                "status".to_owned(),
                Ty::object(
                    "kubernetes.NamespaceStatus",
                    [
                        ("conditions".to_owned(), Ty::List(Box::new(condition))),
                        ("phase".to_owned(), Ty::Str),
                    ],
                ),
            ),
        ],
    )
}

/// The variables an expression is checked with.
#[derive(Debug, Clone)]
struct Env {
    variables: BTreeMap<String, Ty>,
}

impl Env {
    /// `object`, `oldObject` and `params` as given; `request`, `namespaceObject` typed;
    /// `variables` an object of the given variables; `authorizer` untyped here.
    fn new(object: Ty, params: Option<Ty>, variables: Ty) -> Env {
        let mut map = BTreeMap::from([
            ("object".to_owned(), object.clone()),
            ("oldObject".to_owned(), object),
            ("request".to_owned(), request_type()),
            ("namespaceObject".to_owned(), namespace_type()),
            ("variables".to_owned(), variables),
            ("authorizer".to_owned(), Ty::Dyn),
        ]);
        if let Some(params) = params {
            map.insert("params".into(), params);
        }
        Env { variables: map }
    }
}

/// One expression's checker: its errors by source offset.
struct Checker<'a> {
    info: &'a SourceInfo,
    errors: Vec<(u32, String)>,
}

impl Checker<'_> {
    fn error(&mut self, node: &IdedExpr, message: String) {
        let offset = self.info.offset_for(node.id).map_or(0, |(start, _)| start);
        self.errors.push((offset, message));
    }

    /// The type of selecting `field` on `target` (a presence test's is `bool`).
    fn select(&mut self, node: &IdedExpr, target: &Ty, field: &str, test: bool) -> Ty {
        let selected = match target {
            Ty::Dyn => Ty::Dyn,
            Ty::Map(value) => (**value).clone(),
            Ty::Object(object) => match object.fields.get(field) {
                Some(ty) => ty.clone(),
                None => {
                    self.error(node, format!("undefined field '{field}'"));
                    Ty::Dyn
                }
            },
            other => {
                self.error(
                    node,
                    format!("type '{}' does not support field selection", other.name()),
                );
                Ty::Dyn
            }
        };
        if test { Ty::Bool } else { selected }
    }

    /// Recursive: only called on trees the compiler already bounded in depth.
    fn check(&mut self, node: &IdedExpr, env: &Env, scope: &[(String, Ty)]) -> Ty {
        match &node.expr {
            Expr::Literal(literal) => match literal {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::Str,
                LiteralValue::UInt(_) => Ty::Uint,
            },
            Expr::Ident(name) => scope
                .iter()
                .rev()
                .find(|(bound, _)| bound == name)
                .map(|(_, ty)| ty.clone())
                .or_else(|| env.variables.get(name).cloned())
                .unwrap_or(Ty::Dyn),
            Expr::Select(select) => {
                let target = self.check(&select.operand, env, scope);
                self.select(node, &target, &select.field, select.test)
            }
            Expr::Call(call) => self.call(node, call, env, scope),
            Expr::List(list) => {
                let items: Vec<Ty> = list
                    .elements
                    .iter()
                    .map(|e| self.check(e, env, scope))
                    .collect();
                Ty::List(Box::new(common(&items)))
            }
            Expr::Map(map) => {
                let mut values = Vec::new();
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.check(&entry.key, env, scope);
                        values.push(self.check(&entry.value, env, scope));
                    }
                }
                Ty::Map(Box::new(common(&values)))
            }
            Expr::Struct(_) | Expr::Unspecified => Ty::Dyn,
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range, env, scope);
                let (item, second) = match &range {
                    Ty::List(item) => ((**item).clone(), Ty::Dyn),
                    Ty::Map(value) => (Ty::Str, (**value).clone()),
                    _ => (Ty::Dyn, Ty::Dyn),
                };
                let (item, second) = match &c.iter_var2 {
                    // Two variables over a list: the index, then the item.
                    Some(_) if matches!(range, Ty::List(_)) => (Ty::Int, item),
                    _ => (item, second),
                };
                let accu = self.check(&c.accu_init, env, scope);
                let mut inner = scope.to_vec();
                inner.push((c.accu_var.clone(), accu));
                inner.push((c.iter_var.clone(), item));
                if let Some(var2) = &c.iter_var2 {
                    inner.push((var2.clone(), second));
                }
                self.check(&c.loop_cond, env, &inner);
                self.check(&c.loop_step, env, &inner);
                self.check(&c.result, env, &inner)
            }
        }
    }

    fn call(
        &mut self,
        node: &IdedExpr,
        call: &cel::common::ast::CallExpr,
        env: &Env,
        scope: &[(String, Ty)],
    ) -> Ty {
        let name = call.func_name.as_str();
        // A namespaced function (`optional.of`, `strings.quote`): its target is a name.
        let namespaced = call.target.as_deref().is_some_and(|t| {
            matches!(&t.expr, Expr::Ident(n) if !env.variables.contains_key(n) && !scope.iter().any(|(b, _)| b == n))
        });
        let target = match (&call.target, namespaced) {
            (Some(target), false) => Some(self.check(target, env, scope)),
            _ => None,
        };
        if name == "_?._" && call.args.len() == 2 {
            let operand = self.check(&call.args[0], env, scope);
            if let Expr::Literal(LiteralValue::String(field)) = &call.args[1].expr {
                self.select(node, &operand, field.as_ref(), false);
            }
            return Ty::Dyn;
        }
        let args: Vec<Ty> = call
            .args
            .iter()
            .map(|a| self.check(a, env, scope))
            .collect();
        match (name, args.as_slice()) {
            ("_[_]", [container, index]) => match container {
                Ty::List(item) => (**item).clone(),
                Ty::Map(value) => (**value).clone(),
                Ty::Object(object) if *index != Ty::Dyn => {
                    self.error(
                        node,
                        format!(
                            "found no matching overload for '_[_]' applied to '({}, {})'",
                            object.name,
                            index.name()
                        ),
                    );
                    Ty::Dyn
                }
                _ => Ty::Dyn,
            },
            ("_?_:_", [_, a, b]) if a == b => a.clone(),
            (
                "_==_"
                | "_!=_"
                | "_<_"
                | "_<=_"
                | "_>_"
                | "_>=_"
                | "_&&_"
                | "_||_"
                | "!_"
                | "@in"
                | "@not_strictly_false",
                _,
            ) => Ty::Bool,
            ("size", _) => Ty::Int,
            ("int", [_]) => Ty::Int,
            ("uint", [_]) => Ty::Uint,
            ("double", [_]) => Ty::Double,
            ("string", [_]) => Ty::Str,
            ("bool", [_]) => Ty::Bool,
            ("bytes", [_]) => Ty::Bytes,
            (
                "matches" | "startsWith" | "endsWith" | "contains" | "exists" | "all" | "hasValue",
                _,
            ) if target.is_some() => Ty::Bool,
            ("lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "join", _)
                if target.is_some() =>
            {
                Ty::Str
            }
            ("_+_" | "_-_" | "_*_" | "_/_" | "_%_", [a, b]) => arithmetic(name, a, b),
            ("-_", [a]) => a.clone(),
            _ => Ty::Dyn,
        }
    }
}

/// The result of an arithmetic operator, when its operands tell it.
fn arithmetic(name: &str, a: &Ty, b: &Ty) -> Ty {
    let scalar = |t: &Ty| matches!(t, Ty::Int | Ty::Uint | Ty::Double);
    match (a, b) {
        (Ty::Dyn, t) | (t, Ty::Dyn) if scalar(t) => t.clone(),
        (Ty::Dyn, Ty::Str) | (Ty::Str, Ty::Dyn) | (Ty::Str, Ty::Str) if name == "_+_" => Ty::Str,
        (a, b) if a == b && scalar(a) => a.clone(),
        (Ty::List(_), Ty::List(_)) if name == "_+_" && a == b => a.clone(),
        _ => Ty::Dyn,
    }
}

/// The type items share, or `dyn`.
fn common(items: &[Ty]) -> Ty {
    match items.split_first() {
        Some((first, rest)) if rest.iter().all(|t| t == first) => first.clone(),
        _ => Ty::Dyn,
    }
}

/// Checks `source` in `env`: cel-go's `ERROR: <input>:line:column: message` texts with the line
/// and a caret, in source order; empty when nothing is wrong or the source does not parse (which
/// the compiler reports).
fn check_source(source: &str, env: &Env) -> (Vec<String>, Ty) {
    let parsed = cel::parser::Parser::new()
        .enable_optional_syntax(true)
        .parse_with_source_info(source);
    let Ok((expr, info)) = parsed else {
        return (Vec::new(), Ty::Dyn);
    };
    let mut checker = Checker {
        info: &info,
        errors: Vec::new(),
    };
    let ty = checker.check(&expr, env, &[]);
    let mut errors = checker.errors;
    errors.sort_by_key(|(offset, _)| *offset);
    errors.dedup();
    let texts = errors
        .into_iter()
        .map(|(offset, message)| describe(source, offset as usize, &message))
        .collect();
    (texts, ty)
}

/// `ERROR: <input>:line:column: message` with the source line and a caret under the column.
fn describe(source: &str, offset: usize, message: &str) -> String {
    let before: String = source.chars().take(offset).collect();
    let line = before.matches('\n').count() + 1;
    let column = before.chars().rev().take_while(|c| *c != '\n').count() + 1;
    let text = source.lines().nth(line - 1).unwrap_or_default();
    format!(
        "ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {}^",
        ".".repeat(column - 1)
    )
}

fn items(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or_default()
}

/// The errors cel-go's compiler finds in a policy's expressions when the policy is written, by
/// field (`spec.validations[0].expression`), as `ERROR: ...` texts joined by newlines. Call
/// within the CEL sandbox.
pub fn creation_errors(spec: &Value) -> Vec<(String, String)> {
    let params = (!spec["paramKind"].is_null()).then_some(Ty::Dyn);
    let mut found = Vec::new();
    let mut report = |field: String, errors: Vec<String>| {
        if !errors.is_empty() {
            found.push((field, errors.join("\n")));
        }
    };
    // Each variable sees those before it, with the types their expressions have.
    let mut declared: Vec<(String, Ty)> = Vec::new();
    for (i, variable) in items(&spec["variables"]).enumerate() {
        let env = Env::new(
            Ty::Dyn,
            params.clone(),
            Ty::object("kubernetes.variables", declared.clone()),
        );
        let (errors, ty) = check_source(text(variable, "expression"), &env);
        report(format!("spec.variables[{i}].expression"), errors);
        declared.push((text(variable, "name").to_owned(), ty));
    }
    let env = Env::new(
        Ty::Dyn,
        params,
        Ty::object("kubernetes.variables", declared),
    );
    for (i, condition) in items(&spec["matchConditions"]).enumerate() {
        let (errors, _) = check_source(text(condition, "expression"), &env);
        report(format!("spec.matchConditions[{i}].expression"), errors);
    }
    for (i, validation) in items(&spec["validations"]).enumerate() {
        for key in ["expression", "messageExpression"] {
            let source = text(validation, key);
            if !source.trim().is_empty() {
                let (errors, _) = check_source(source, &env);
                report(format!("spec.validations[{i}].{key}"), errors);
            }
        }
    }
    found
}

/// The kinds a policy's rules name without wildcards, with their schemas (`None` when the
/// emulator has none), sorted by group, version and kind; at most [`MAX_TYPES`].
fn kinds_to_check(spec: &Value, store: &Store) -> Vec<(String, String, String, Option<Value>)> {
    let mut kinds: Vec<(String, String, String, Option<Value>)> = Vec::new();
    let strings = |rule: &Value, key: &str| -> Vec<String> {
        let mut values: Vec<String> = items(&rule[key])
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        values.sort();
        values
    };
    'rules: for rule in items(&spec["matchConstraints"]["resourceRules"]) {
        let groups = strings(rule, "apiGroups");
        let versions = strings(rule, "apiVersions");
        if groups.is_empty()
            || versions.is_empty()
            || groups.iter().chain(&versions).any(|g| g.contains('*'))
        {
            continue;
        }
        let resources: Vec<String> = strings(rule, "resources")
            .into_iter()
            .filter(|r| !r.contains(['*', '/']))
            .collect();
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let Some(info) = store.registry.find(group, version, resource) else {
                        continue;
                    };
                    let entry = (
                        group.clone(),
                        version.clone(),
                        info.kind.clone(),
                        schema_of(info, version),
                    );
                    if !kinds
                        .iter()
                        .any(|k| k.0 == entry.0 && k.1 == entry.1 && k.2 == entry.2)
                    {
                        kinds.push(entry);
                        if kinds.len() == MAX_TYPES {
                            break 'rules;
                        }
                    }
                }
            }
        }
    }
    kinds.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    kinds
}

fn schema_of(info: &ResourceInfo, version: &str) -> Option<Value> {
    info.custom.then(|| info.schema(version).cloned()).flatten()
}

/// A unique-looking name for a kind's object type, as the API server makes one (the kind and
/// the nanoseconds of the clock).
fn type_name(kind: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{kind}{nanos}")
}

/// The warnings of a policy's status: each validation and message expression checked against
/// every kind it matches that has a schema.
pub fn check(store: &Arc<Mutex<Store>>, policy: &Value) -> Vec<Warning> {
    let spec = &policy["spec"];
    let (kinds, params) = {
        let Ok(store) = store.lock() else {
            return Vec::new();
        };
        let kinds = kinds_to_check(spec, &store);
        let params = (!spec["paramKind"].is_null()).then(|| {
            let api_version = text(&spec["paramKind"], "apiVersion");
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            store
                .registry
                .find_kind(group, version, text(&spec["paramKind"], "kind"))
                .and_then(|info| schema_of(info, version))
                .and_then(|schema| {
                    from_schema(&schema, &type_name(text(&spec["paramKind"], "kind")), true)
                })
                .unwrap_or(Ty::Dyn)
        });
        (kinds, params)
    };
    let typed: Vec<(String, Ty)> = kinds
        .into_iter()
        .filter_map(|(group, version, kind, schema)| {
            let ty = from_schema(schema.as_ref()?, &type_name(&kind), true)?;
            let gvk = if group.is_empty() {
                format!("/{version}, Kind={kind}")
            } else {
                format!("{group}/{version}, Kind={kind}")
            };
            Some((gvk, ty))
        })
        .collect();
    if typed.is_empty() {
        return Vec::new();
    }
    let variables = Ty::object(
        "kubernetes.variables",
        items(&spec["variables"]).map(|v| (text(v, "name").to_owned(), Ty::Dyn)),
    );
    let checked = crate::cel::sandbox(|| {
        let mut warnings = Vec::new();
        for (i, validation) in items(&spec["validations"]).enumerate() {
            for key in ["expression", "messageExpression"] {
                let source = text(validation, key);
                if source.trim().is_empty() {
                    continue;
                }
                let results: Vec<String> = typed
                    .iter()
                    .filter_map(|(gvk, ty)| {
                        let env = Env::new(ty.clone(), params.clone(), variables.clone());
                        let (errors, _) = check_source(source, &env);
                        (!errors.is_empty()).then(|| format!("{gvk}: {}\n", errors.join("\n")))
                    })
                    .collect();
                if !results.is_empty() {
                    warnings.push(Warning {
                        field_ref: format!("spec.validations[{i}].{key}"),
                        warning: results.join("\n"),
                    });
                }
            }
        }
        warnings
    });
    checked.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget() -> Ty {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"}, "color": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": true},
                "when": {"type": "string", "format": "date-time"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}},
            "status": {"type": "object", "properties": {
                "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}});
        from_schema(&schema, "Widget1", true).unwrap()
    }

    fn errors(source: &str) -> Vec<String> {
        let env = Env::new(widget(), None, Ty::object("kubernetes.variables", []));
        crate::cel::sandbox(|| check_source(source, &env).0).unwrap()
    }

    /// The API server's warnings for the same expressions (kube-apiserver 1.34).
    #[test]
    fn fields_are_checked_as_the_api_server_checks_them() {
        assert!(errors("object.metadata.labels['a'] == 'b' && object.metadata.uid != '' && object.spec.port.foo == 1").is_empty());
        assert_eq!(
            errors("object.spec.nosuch == 1"),
            [
                "ERROR: <input>:1:12: undefined field 'nosuch'\n | object.spec.nosuch == 1\n | ...........^"
            ]
        );
        assert_eq!(
            errors("object.status.conditions.exists(c, c.type == 'Ready')"),
            [
                "ERROR: <input>:1:37: undefined field 'type'\n | object.status.conditions.exists(c, c.type == 'Ready')\n | ....................................^"
            ]
        );
        assert_eq!(
            errors("object.spec.labels.anything == 'x' && object.spec.labels.foo.bar == 'y'"),
            [
                "ERROR: <input>:1:61: type 'string' does not support field selection\n | object.spec.labels.anything == 'x' && object.spec.labels.foo.bar == 'y'\n | ............................................................^"
            ]
        );
        assert_eq!(
            errors("object.spec.when.foo == 1")[0],
            "ERROR: <input>:1:17: type 'timestamp' does not support field selection\n | object.spec.when.foo == 1\n | ................^"
        );
        assert_eq!(
            errors("object.spec.items.foo == 1 || object.spec.items.all(i, i.nom == 'x')"),
            [
                "ERROR: <input>:1:18: type 'list(Widget1.spec.items.@idx)' does not support field selection\n | object.spec.items.foo == 1 || object.spec.items.all(i, i.nom == 'x')\n | .................^",
                "ERROR: <input>:1:57: undefined field 'nom'\n | object.spec.items.foo == 1 || object.spec.items.all(i, i.nom == 'x')\n | ........................................................^"
            ]
        );
        let found = errors("has(object.spec.missing) || object.metadata.bad == 'x'");
        assert_eq!(
            found,
            [
                "ERROR: <input>:1:4: undefined field 'missing'\n | has(object.spec.missing) || object.metadata.bad == 'x'\n | ...^",
                "ERROR: <input>:1:44: undefined field 'bad'\n | has(object.spec.missing) || object.metadata.bad == 'x'\n | ...........................................^"
            ]
        );
        assert_eq!(
            errors("object.spec.?nosuch.orValue(1) == 1")[0],
            "ERROR: <input>:1:12: undefined field 'nosuch'\n | object.spec.?nosuch.orValue(1) == 1\n | ...........^"
        );
        assert_eq!(
            errors("object.spec['nosuch'] == 1")[0],
            "ERROR: <input>:1:12: found no matching overload for '_[_]' applied to '(Widget1.spec, string)'\n | object.spec['nosuch'] == 1\n | ...........^"
        );
        assert_eq!(
            errors("[object.spec][0].nosuch == 1 || {'a': object.spec}.a.nosuch2 == 1").len(),
            2
        );
        assert_eq!(
            errors("(true ? object.spec : object.spec).nosuch3 == 1").len(),
            1
        );
        assert_eq!(
            errors("object.spec.tags.map(t, t.foo).size() > 0")[0],
            "ERROR: <input>:1:26: type 'string' does not support field selection\n | object.spec.tags.map(t, t.foo).size() > 0\n | .........................^"
        );
    }

    /// What the API server refuses when a policy is written.
    #[test]
    fn typed_variables_are_checked_when_a_policy_is_written() {
        let spec = json!({"variables": [{"name": "sp", "expression": "object.spec"}, {"name": "n", "expression": "object.spec.size + 1"}],
            "validations": [
                {"expression": "request.foo == 1 || request.userInfo.username == 'x' || request.kind.bad == 1"},
                {"expression": "namespaceObject.metadata.uid == 'x' || namespaceObject.metadata.UID == 'y'"},
                {"expression": "variables.sp.nosuch == 1 || variables.n.foo == 1"},
                {"expression": "object.spec.anything == variables.undeclared"}]});
        let found = crate::cel::sandbox(|| creation_errors(&spec)).unwrap();
        let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.validations[0].expression",
                "spec.validations[1].expression",
                "spec.validations[2].expression",
                "spec.validations[3].expression"
            ]
        );
        assert_eq!(
            found[0].1,
            "ERROR: <input>:1:8: undefined field 'foo'\n | request.foo == 1 || request.userInfo.username == 'x' || request.kind.bad == 1\n | .......^\nERROR: <input>:1:69: undefined field 'bad'\n | request.foo == 1 || request.userInfo.username == 'x' || request.kind.bad == 1\n | ....................................................................^"
        );
        assert_eq!(
            found[2].1,
            "ERROR: <input>:1:40: type 'int' does not support field selection\n | variables.sp.nosuch == 1 || variables.n.foo == 1\n | .......................................^"
        );
    }
}
