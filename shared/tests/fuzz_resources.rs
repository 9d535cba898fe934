//! Property-based fuzzing of manifest decoding through the resource types (`OIDCClient`,
//! `Branding`, `IdentityProvider`, `Organization`) and of the admission checks
//! (`nauthera_shared::resources::admission_violations`); see docs/fuzzing.md.
//!
//! Documents are generated structurally: the examples in `examples/` (valid manifests of every
//! kind) with random mutations (values of the wrong type, removed and unknown fields, field names
//! of the schemas in the wrong places, other enum values, deep nesting, huge lists, control
//! characters and any unicode), plus documents built from nothing. YAML texts are the examples
//! with hostile text spliced in (anchors, aliases, tags, deep nesting).
//!
//! Properties: decoding with serde_json and serde-saphyr never panics; whatever decodes
//! re-serializes (JSON and YAML) and decodes to the same value; decoding a value and decoding its
//! JSON text agree; the admission checks never panic, give every violation a field (one the
//! document holds, or the parent of a missing required one) and a message; and a manifest that
//! would be admitted decodes into its type, and so does what that type serializes to.
//!
//! `NAUTHERA_FUZZ_CASES` sets the number of cases (64 by default); nothing is persisted.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::LazyLock;

use nauthera_shared::resources::{
    Branding, IdentityProvider, OIDCClient, Organization, Violation, admission_violations, crds,
};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;
use serde::Serialize;
use serde::de::DeserializeOwned;
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

const KINDS: [&str; 4] = ["OIDCClient", "Branding", "IdentityProvider", "Organization"];

fn examples_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

/// The YAML texts of the examples, one document each, of this project's kinds.
static EXAMPLE_TEXTS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut files: Vec<_> = std::fs::read_dir(examples_dir())
        .expect("examples/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut texts = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("an example");
        for document in text.split("\n---") {
            if KINDS
                .iter()
                .any(|kind| document.contains(&format!("kind: {kind}\n")))
            {
                texts.push(document.to_owned());
            }
        }
    }
    assert!(texts.len() >= 4, "the examples hold every kind");
    texts
});

/// The examples as JSON values, plus minimal manifests of every kind.
static TEMPLATES: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let mut templates: Vec<Value> = EXAMPLE_TEXTS
        .iter()
        .map(|text| serde_saphyr::from_str(text).expect("an example is YAML"))
        .collect();
    let envelope = |kind: &str, spec: Value| {
        json!({
            "apiVersion": "nauthera.io/v1alpha1",
            "kind": kind,
            "metadata": {"name": "m", "namespace": "team-a"},
            "spec": spec,
        })
    };
    let issuer = "https://login.example.test/acme";
    templates.extend([
        envelope("OIDCClient", json!({"issuer": issuer, "redirectUris": ["https://a.example/cb"], "secret": {"generate": true}})),
        envelope("Branding", json!({"issuer": issuer, "branding": {}})),
        envelope("IdentityProvider", json!({"issuer": issuer, "kind": "saml", "upstreamUrl": issuer})),
        envelope("Organization", json!({"slug": "acme", "issuer": issuer})),
    ]);
    templates
});

/// Every property name of the schemas, for unknown fields that are known somewhere else.
static FIELD_NAMES: LazyLock<Vec<String>> = LazyLock::new(|| {
    fn collect(schema: &Value, out: &mut BTreeSet<String>) {
        match schema {
            Value::Object(map) => {
                if let Some(Value::Object(properties)) = map.get("properties") {
                    out.extend(properties.keys().cloned());
                }
                map.values().for_each(|v| collect(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    let mut names = BTreeSet::new();
    for crd in crds() {
        collect(
            &serde_json::to_value(crd).expect("a CRD is JSON"),
            &mut names,
        );
    }
    names.extend(
        [
            "apiVersion",
            "kind",
            "metadata",
            "name",
            "namespace",
            "status",
        ]
        .map(String::from),
    );
    names.into_iter().collect()
});

/// Values the schemas enumerate, and the booleans YAML 1.1 would read.
const ENUM_VALUES: &[&str] = &[
    "none",
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
    "authorization_code",
    "refresh_token",
    "client_credentials",
    "urn:ietf:params:oauth:grant-type:device_code",
    "implicit",
    "code",
    "token",
    "oidc",
    "saml",
    "github",
    "google",
    "microsoft",
    "Oidc",
    "Disabled",
    "FAPI1Advanced",
    "FAPI2Security",
    "Off",
    "Delete",
    "Orphan",
    "image/png",
    "image/svg+xml",
    "image/gif",
    "Registered",
    "Pending",
    "Error",
    "Refused",
    "True",
    "nauthera.io/v1alpha1",
    "nauthera.io/v1",
    "v1",
];

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9.-]{0,12}",
        2 => "https://[a-z.]{1,12}(/[a-z]{0,6})?",
        1 => "http://(127\\.0\\.0\\.1|localhost|\\[::1\\])(:[0-9]{1,6})?/cb",
        1 => Just(String::new()),
        1 => any::<String>(),
        1 => "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\u{202e}\u{2066}\u{feff}]{1,6}",
        1 => "\\PC{0,30}",
        1 => (250usize..2100).prop_map(|n| "a".repeat(n)),
        1 => prop::sample::select(vec![
            "~", "null", "true", "yes", "off", "0x1f", "1e400", ".nan", "-.inf", "0o17", "12:30",
            "*alias", "&anchor x", "!!binary AAAA", "- item", "key: value", "#comment", "'", "\"",
            "{", "[", "|", ">", "%YAML 1.2", "---", "...", "\t", " leading", "trailing ",
        ])
        .prop_map(String::from),
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::num::f64::NORMAL.prop_map(Value::from),
        Just(json!(0.5)),
        Just(json!(-0.0)),
        hostile_string().prop_map(Value::String),
        prop::sample::select(ENUM_VALUES).prop_map(Value::from),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<Index>().prop_map(|i| FIELD_NAMES[i.index(FIELD_NAMES.len())].clone()),
        1 => hostile_string(),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

#[derive(Clone, Debug)]
enum Action {
    Replace(Value),
    Remove,
    Insert(String, Value),
    Text(String),
    Enum(&'static str),
    Nest(usize),
    Repeat(usize),
    Retype,
}

#[derive(Clone, Debug)]
struct Mutation {
    path: Vec<Index>,
    action: Action,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => json_value().prop_map(Action::Replace),
        3 => Just(Action::Remove),
        3 => (key(), json_value()).prop_map(|(k, v)| Action::Insert(k, v)),
        3 => hostile_string().prop_map(Action::Text),
        3 => prop::sample::select(ENUM_VALUES).prop_map(Action::Enum),
        1 => (1usize..200).prop_map(Action::Nest),
        1 => (1usize..2000).prop_map(Action::Repeat),
        2 => Just(Action::Retype),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    (prop::collection::vec(any::<Index>(), 0..6), action())
        .prop_map(|(path, action)| Mutation { path, action })
}

fn node_at<'a>(value: &'a mut Value, path: &[Index]) -> &'a mut Value {
    let Some((index, rest)) = path.split_first() else {
        return value;
    };
    let inner = match value {
        Value::Object(map) => !map.is_empty(),
        Value::Array(items) => !items.is_empty(),
        _ => false,
    };
    if !inner {
        return value;
    }
    match value {
        Value::Object(map) => {
            let i = index.index(map.len());
            node_at(map.values_mut().nth(i).expect("in range"), rest)
        }
        Value::Array(items) => {
            let i = index.index(items.len());
            node_at(&mut items[i], rest)
        }
        other => other,
    }
}

fn apply(document: &mut Value, mutation: &Mutation) {
    let node = node_at(document, &mutation.path);
    match &mutation.action {
        Action::Replace(value) => *node = value.clone(),
        Action::Remove => match node {
            Value::Object(map) if !map.is_empty() => {
                let i = mutation.path.last().map_or(0, |i| i.index(map.len()));
                let key = map.keys().nth(i).cloned().expect("in range");
                map.remove(&key);
            }
            Value::Array(items) if !items.is_empty() => {
                let i = mutation.path.last().map_or(0, |i| i.index(items.len()));
                items.remove(i);
            }
            other => *other = Value::Null,
        },
        Action::Insert(key, value) => match node {
            Value::Object(map) => {
                map.insert(key.clone(), value.clone());
            }
            Value::Array(items) => items.push(value.clone()),
            other => *other = json!({ key.clone(): value.clone() }),
        },
        Action::Text(text) => *node = Value::String(text.clone()),
        Action::Enum(text) => *node = Value::from(*text),
        Action::Nest(depth) => {
            for level in 0..*depth {
                let inner = node.take();
                *node = if level % 2 == 0 {
                    json!([inner])
                } else {
                    json!({ "spec": inner })
                };
            }
        }
        Action::Repeat(times) => match node {
            Value::Array(items) if !items.is_empty() => {
                let first = items[0].clone();
                items.extend(std::iter::repeat_n(first, *times));
            }
            Value::String(text) if text.len() < 64 => *text = text.repeat(*times),
            Value::Object(map) => {
                for i in 0..*times {
                    map.insert(format!("k{i}"), Value::from(i));
                }
            }
            _ => {}
        },
        Action::Retype => {
            *node = match node.take() {
                Value::Number(n) => Value::String(n.to_string()),
                Value::String(s) => serde_json::from_str::<Value>(&s)
                    .ok()
                    .filter(|v| !v.is_string())
                    .unwrap_or_else(|| json!([s])),
                Value::Bool(b) => Value::String(b.to_string()),
                Value::Null => json!({}),
                Value::Array(items) => items.into_iter().next().unwrap_or(Value::Null),
                Value::Object(map) => Value::Array(map.into_values().collect()),
            }
        }
    }
}

/// A manifest: mostly an example with a few mutations, sometimes one built from nothing.
fn document() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => (any::<Index>(), prop::collection::vec(mutation(), 0..5)).prop_map(|(template, mutations)| {
            let mut document = TEMPLATES[template.index(TEMPLATES.len())].clone();
            for mutation in &mutations {
                apply(&mut document, mutation);
            }
            document
        }),
        1 => (prop::sample::select(KINDS.to_vec()), json_value()).prop_map(|(kind, spec)| {
            json!({"apiVersion": "nauthera.io/v1alpha1", "kind": kind, "metadata": {"name": "x"}, "spec": spec})
        }),
        1 => json_value(),
    ]
}

/// YAML text spliced into an example at some place.
const YAML_PIECES: &[&str] = &[
    "\n  extra: &a [1, 2, 3]\n  again: *a\n",
    "\n  bomb: &b [&c [x, x, x, x, x, x, x, x], *c, *c, *c, *c, *c, *c, *c]\n  more: [*b, *b, *b, *b, *b, *b, *b, *b]\n",
    "\n  <<: {merged: true}\n",
    "\n  tagged: !!binary aGVsbG8=\n",
    "\n  custom: !custom {a: 1}\n",
    "\n  python: !!python/object:os.system ls\n",
    "\n  issuer: duplicate\n",
    "\n  number: 0x_1F\n",
    "\n  huge: 123456789012345678901234567890\n",
    "\n  nan: .nan\n",
    "\n  inf: -.inf\n",
    "\n  date: 2024-01-01\n",
    "\t",
    "\u{feff}",
    "\u{0}",
    "\r",
    "\n---\n",
    "\n...\n",
    "%YAML 1.1\n",
    "\n  ? complex key\n  : value\n",
    ": ",
    "- ",
    "'",
    "\"",
    "#",
    "{",
    "[",
    "\n  deep: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
];

fn yaml_text() -> impl Strategy<Value = String> {
    let splice = (
        any::<Index>(),
        prop_oneof![
            4 => prop::sample::select(YAML_PIECES).prop_map(String::from),
            1 => hostile_string(),
            1 => (1usize..5000).prop_map(|n| "[".repeat(n)),
            1 => (1usize..2000).prop_map(|n| "  - x\n".repeat(n)),
        ],
    );
    (any::<Index>(), prop::collection::vec(splice, 0..4)).prop_map(|(template, splices)| {
        let mut text = EXAMPLE_TEXTS[template.index(EXAMPLE_TEXTS.len())].clone();
        for (at, piece) in splices {
            let boundaries: Vec<usize> = (0..=text.len())
                .filter(|&i| text.is_char_boundary(i))
                .collect();
            let at = boundaries[at.index(boundaries.len())];
            text.insert_str(at, &piece);
        }
        text
    })
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// Decodes a value into `T` the ways the project does; whatever decodes must re-serialize (JSON
/// and YAML) and decode to the same value, and decoding the value and its text must agree.
fn check_decoding<T>(document: &Value) -> Result<Option<T>, TestCaseError>
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    let decoded = serde_json::from_value::<T>(document.clone());
    let text = serde_json::to_string(document).expect("a value is JSON");
    // serde_json refuses JSON nested deeper than 128 levels; below that, both ways agree.
    if let Ok(from_text) = serde_json::from_str::<T>(&text) {
        prop_assert_eq!(
            decoded.as_ref().ok(),
            Some(&from_text),
            "the value and its text disagree"
        );
    } else {
        prop_assert!(
            decoded.is_err() || depth(document) > 120,
            "the value decodes but its text does not"
        );
    }
    let Ok(decoded) = decoded else {
        return Ok(None);
    };
    let value = serde_json::to_value(&decoded).expect("a decoded value serializes");
    let again: T = serde_json::from_value(value.clone()).map_err(|e| {
        TestCaseError::fail(format!("re-serialized JSON does not decode: {e}\n{value}"))
    })?;
    prop_assert_eq!(&again, &decoded, "not the same after a JSON round trip");
    let text = serde_json::to_string(&decoded).expect("serializes");
    let again: T = serde_json::from_str(&text).expect("its own JSON text decodes");
    prop_assert_eq!(&again, &decoded);
    let yaml = serde_saphyr::to_string(&decoded)
        .map_err(|e| TestCaseError::fail(format!("does not serialize to YAML: {e}")))?;
    let again: T = serde_saphyr::from_str(&yaml)
        .map_err(|e| TestCaseError::fail(format!("its YAML does not decode: {e}\n{yaml}")))?;
    prop_assert_eq!(
        &again,
        &decoded,
        "not the same after a YAML round trip:\n{}",
        yaml
    );
    Ok(Some(decoded))
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The value at a violation's field (`spec.redirectUris[0]`), if the path can be read.
fn resolve<'a>(document: &'a Value, field: &str) -> Option<&'a Value> {
    let mut node = document;
    for segment in field.split('.') {
        let (name, indexes) = match segment.find('[') {
            Some(at) => (&segment[..at], &segment[at..]),
            None => (segment, ""),
        };
        if !name.is_empty() {
            node = node.get(name)?;
        }
        for index in indexes.split('[').skip(1) {
            let index: usize = index.strip_suffix(']')?.parse().ok()?;
            node = node.get(index)?;
        }
    }
    Some(node)
}

/// Whether some key of the document could make a field path ambiguous.
fn has_odd_keys(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(key, value)| {
            key.is_empty() || key.contains(['.', '[', ']']) || has_odd_keys(value)
        }),
        Value::Array(items) => items.iter().any(has_odd_keys),
        _ => false,
    }
}

fn check_violations(document: &Value, violations: &[Violation]) -> Result<(), TestCaseError> {
    let odd = has_odd_keys(document);
    for violation in violations {
        prop_assert!(
            !violation.field.trim().is_empty(),
            "a violation without a field: {:?}",
            violation
        );
        prop_assert!(
            !violation.message.trim().is_empty(),
            "no message: {violation:?}"
        );
        if odd {
            continue;
        }
        let envelope = matches!(
            violation.field.as_str(),
            "kind" | "apiVersion" | "metadata.name"
        );
        let found = resolve(document, &violation.field).is_some();
        let parent_found = violation.message == "required"
            && violation
                .field
                .rsplit_once('.')
                .is_none_or(|(parent, _)| resolve(document, parent).is_some());
        prop_assert!(
            envelope || found || parent_found,
            "{} names no field of the document",
            violation
        );
    }
    Ok(())
}

/// Decodes a document into the type of its kind, if it is one of the four.
fn check_kind(document: &Value, kind: &str) -> Result<Option<Value>, TestCaseError> {
    fn reserialized<T: Serialize>(value: Option<T>) -> Option<Value> {
        value.map(|v| serde_json::to_value(v).expect("serializes"))
    }
    Ok(match kind {
        "OIDCClient" => reserialized(check_decoding::<OIDCClient>(document)?),
        "Branding" => reserialized(check_decoding::<Branding>(document)?),
        "IdentityProvider" => reserialized(check_decoding::<IdentityProvider>(document)?),
        "Organization" => reserialized(check_decoding::<Organization>(document)?),
        _ => None,
    })
}

fn check_document(document: &Value, old: &Value) -> Result<(), TestCaseError> {
    let kind = document
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    // Every type is tried on every document: a manifest of one kind read as another must be
    // refused cleanly too.
    let mut own = None;
    for other in KINDS {
        let decoded = check_kind(document, other)?;
        if other == kind {
            own = decoded;
        }
    }
    let violations = admission_violations(document, None);
    check_violations(document, &violations)?;
    // Only organizations have a rule that compares with the old object (each check generates
    // the CRD schemas, which takes a while in a debug build).
    if kind == "Organization" {
        check_violations(document, &admission_violations(document, Some(old)))?;
    }
    if violations.is_empty() {
        prop_assert!(
            KINDS.contains(&kind.as_str()),
            "a document of kind {kind:?} was admitted"
        );
        let Some(reserialized) = own else {
            return Err(TestCaseError::fail(format!(
                "admitted, but does not decode into {kind}: {document}"
            )));
        };
        let again = admission_violations(&reserialized, None);
        prop_assert!(
            again.is_empty(),
            "admitted, decoded and re-serialized, it is refused: {:?}\n{}",
            again,
            reserialized
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn manifests_decode_round_trip_and_are_checked_with_named_fields(
        document in document(),
        old in document(),
    ) {
        check_document(&document, &old)?;
    }

    #[test]
    fn yaml_texts_decode_without_panicking_and_round_trip(text in yaml_text()) {
        if let Ok(document) = serde_saphyr::from_str::<Value>(&text) {
            check_document(&document, &Value::Null)?;
        }
        // Straight from the text into the types, as a YAML manifest is read.
        for result in [
            serde_saphyr::from_str::<OIDCClient>(&text).map(|_| ()),
            serde_saphyr::from_str::<Branding>(&text).map(|_| ()),
            serde_saphyr::from_str::<IdentityProvider>(&text).map(|_| ()),
            serde_saphyr::from_str::<Organization>(&text).map(|_| ()),
        ] {
            if let Err(error) = result {
                prop_assert!(!error.to_string().is_empty());
            }
        }
        if let Ok(client) = serde_saphyr::from_str::<OIDCClient>(&text) {
            let yaml = serde_saphyr::to_string(&client).expect("serializes");
            let again: OIDCClient = serde_saphyr::from_str(&yaml).expect("its YAML decodes");
            prop_assert_eq!(again, client);
        }
    }
}

/// JSON nested far past serde_json's limit is refused, not overflowing the stack.
#[test]
fn deeply_nested_text_is_refused() {
    let deep = format!(
        "{{\"kind\":\"OIDCClient\",\"spec\":{}1{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(serde_json::from_str::<OIDCClient>(&deep).is_err());
    assert!(serde_json::from_str::<Value>(&deep).is_err());
    let yaml = format!(
        "kind: OIDCClient\nspec: {}1{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(serde_saphyr::from_str::<OIDCClient>(&yaml).is_err());
}

/// What these properties found, kept as plain cases.
#[test]
fn what_fuzzing_found_stays_refused() {
    let mut document = TEMPLATES[0].clone();
    document["metadata"]["namespace"] = json!(["team-a"]);
    let violations = admission_violations(&document, None);
    assert!(
        violations.iter().any(|v| v.field == "metadata.namespace"),
        "{violations:?}"
    );
    let mut document = TEMPLATES[0].clone();
    document[""] = json!(1);
    document["spec"]["a.b"] = json!(1);
    let fields: Vec<String> = admission_violations(&document, None)
        .into_iter()
        .map(|v| v.field)
        .collect();
    assert!(fields.contains(&"[\"\"]".to_owned()), "{fields:?}");
    assert!(fields.contains(&"spec[\"a.b\"]".to_owned()), "{fields:?}");
}
