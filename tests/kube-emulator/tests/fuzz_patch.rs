//! Property-based fuzzing of the emulator's patch code: the strategic merge patch
//! (`src/strategic.rs`, compiled in here with `#[path]`, as it is private), the JSON merge patch
//! and JSON patch the emulator applies with the `json-patch` crate, and the whole PATCH path of a
//! running emulator (`objects::patch`: parsing, the `test`-of-null rule, resourceVersion checks,
//! no-op detection, storage); see docs/fuzzing.md.
//!
//! Inputs: random objects (any JSON, keys with `/` and `~`, the keyed lists strategic merge knows)
//! and random patches of each kind, mostly near-valid: merge patches with nulls, strategic patches
//! with `$patch`, `$setElementOrder` and `$retainKeys` directives, JSON patches whose paths mostly
//! exist.
//!
//! Properties: nothing panics; the merge patch laws (applying a patch twice is applying it once,
//! `{}` is the identity, `null` deletes) hold for both merge patches and strategic ones; a
//! strategic patch without keyed lists or directives is a merge patch; no directive is stored; a
//! JSON patch `add` followed by `remove` gives back the object; and the emulator over HTTPS
//! answers every patch as these models do (a no-op patch keeps the resourceVersion), refusing
//! only with a 4xx status (and a strategic merge patch of a custom resource always with 415, as
//! the API server does; the strategic model is checked on a built-in object instead).
//!
//! `NAUTHERA_FUZZ_CASES` sets the number of cases (64 by default; the HTTPS property runs a
//! quarter of them, each a few requests); nothing is persisted.

#![allow(clippy::unwrap_used)] // tests may unwrap

#[allow(dead_code)]
#[path = "../src/strategic.rs"]
mod strategic;

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Cluster, rand_u32};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};

fn cases() -> u32 {
    std::env::var("NAUTHERA_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.trim().parse().ok())
        .unwrap_or(64)
}

fn config() -> Config {
    Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

/// Keyed list fields of strategic merge, their merge keys, and other names.
const KEYS: &[&str] = &[
    "containers",
    "env",
    "ports",
    "volumeMounts",
    "conditions",
    "ownerReferences",
    "name",
    "mountPath",
    "containerPort",
    "port",
    "uid",
    "type",
    "image",
    "value",
    "data",
    "a",
    "b",
    "a/b",
    "~0",
    "~1x",
    "",
    "ü",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(KEYS).prop_map(String::from),
        1 => "[a-z~/]{1,4}",
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        (-2i64..3).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Doubles that serde_json reads back exactly: without its `float_roundtrip` feature it
        // may read a printed double 1 ULP off (4.4573943722294926e-299), in the emulator and in
        // any client; that is serde_json's, not the patch code's.
        prop::num::f64::NORMAL
            .prop_filter("reads back exactly", |f| {
                serde_json::from_str::<f64>(&serde_json::to_string(f).unwrap()).ok() == Some(*f)
            })
            .prop_map(Value::from),
        prop::sample::select(vec!["", "x", "y", "app", "v1", "v2"]).prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ]
}

/// An item of a keyed list: an object with a merge key, mostly.
fn item(
    inner: impl Strategy<Value = Value> + Clone,
    directives: bool,
) -> impl Strategy<Value = Value> {
    let merge_key = prop::sample::select(vec![
        "name",
        "mountPath",
        "containerPort",
        "port",
        "uid",
        "type",
    ]);
    let key_value = prop_oneof![
        prop::sample::select(vec!["app", "sidecar", "x"]).prop_map(Value::from),
        (79i64..82).prop_map(Value::from),
    ];
    let directive = if directives {
        prop::option::weighted(
            0.3,
            prop::sample::select(vec!["delete", "replace", "merge"]),
        )
        .boxed()
    } else {
        Just(None).boxed()
    };
    (
        merge_key,
        key_value,
        prop::collection::vec((key(), inner), 0..3),
        directive,
    )
        .prop_map(|(merge_key, key_value, fields, directive)| {
            let mut map: Map<String, Value> = fields.into_iter().collect();
            map.insert(merge_key.to_owned(), key_value);
            if let Some(directive) = directive {
                map.insert("$patch".into(), Value::from(directive));
            }
            Value::Object(map)
        })
}

/// A JSON value; `nulls` for patches (where null deletes), `directives` for strategic patches.
fn value(nulls: bool, directives: bool) -> BoxedStrategy<Value> {
    let leaf = if nulls {
        prop_oneof![4 => scalar(), 1 => Just(Value::Null)].boxed()
    } else {
        scalar().boxed()
    };
    leaf.prop_recursive(4, 40, 5, move |inner| {
        let keyed_list = (
            prop::sample::select(vec![
                "containers",
                "env",
                "ports",
                "volumeMounts",
                "conditions",
            ]),
            prop::collection::vec(item(inner.clone(), directives), 0..4),
        )
            .prop_map(|(name, items)| (name.to_owned(), Value::Array(items)));
        let entry = prop_oneof![
            4 => (key(), inner.clone()),
            2 => keyed_list,
        ];
        let directive = if directives {
            prop::option::weighted(
                0.15,
                prop_oneof![
                    Just(("$patch".to_owned(), json!("replace"))),
                    Just(("$patch".to_owned(), json!("delete"))),
                    Just((
                        "$setElementOrder/containers".to_owned(),
                        json!([{"name": "app"}])
                    )),
                    Just(("$retainKeys".to_owned(), json!(["a"]))),
                ],
            )
            .boxed()
        } else {
            Just(None).boxed()
        };
        prop_oneof![
            1 => prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            3 => (prop::collection::vec(entry, 0..5), directive).prop_map(|(entries, directive)| {
                let mut map: Map<String, Value> = entries.into_iter().collect();
                if let Some((k, v)) = directive {
                    map.insert(k, v);
                }
                Value::Object(map)
            }),
        ]
    })
    .boxed()
}

fn object(nulls: bool, directives: bool) -> impl Strategy<Value = Value> {
    prop::collection::vec((key(), value(nulls, directives)), 0..6)
        .prop_map(|entries| Value::Object(entries.into_iter().collect()))
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn merge(target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    json_patch::merge(&mut out, patch);
    out
}

fn strategic(target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    strategic::apply(&mut out, patch);
    out
}

/// Whether any key starts with `$`.
fn has_directive(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.starts_with('$') || has_directive(v)),
        Value::Array(items) => items.iter().any(has_directive),
        _ => false,
    }
}

/// Whether a strategic patch would treat a list in `value` as keyed.
fn has_keyed_list_name(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(k, v)| {
            matches!(
                k.as_str(),
                "containers"
                    | "initContainers"
                    | "ephemeralContainers"
                    | "volumes"
                    | "env"
                    | "imagePullSecrets"
                    | "volumeDevices"
                    | "hostAliases"
                    | "volumeMounts"
                    | "ports"
                    | "ownerReferences"
                    | "conditions"
            ) || has_keyed_list_name(v)
        }),
        Value::Array(items) => items.iter().any(has_keyed_list_name),
        _ => false,
    }
}

/// Every JSON pointer of a value, the root aside.
fn pointers(value: &Value, prefix: &str, out: &mut Vec<String>) {
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let pointer = format!("{prefix}/{}", escape(key));
                out.push(pointer.clone());
                pointers(child, &pointer, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let pointer = format!("{prefix}/{i}");
                out.push(pointer.clone());
                pointers(child, &pointer, out);
            }
        }
        _ => {}
    }
}

/// A JSON patch operation on `document`, near-valid: its paths mostly exist (or are a new member
/// of one that does).
fn operation(
    document: &Value,
    op: usize,
    at: Index,
    from: Index,
    fresh: &str,
    value: &Value,
) -> Value {
    let mut all = Vec::new();
    pointers(document, "", &mut all);
    let pick = |index: Index| -> String {
        if all.is_empty() {
            format!("/{}", fresh.replace('~', "~0").replace('/', "~1"))
        } else {
            all[index.index(all.len())].clone()
        }
    };
    let path = pick(at);
    let new_member = format!("{path}/{}", fresh.replace('~', "~0").replace('/', "~1"));
    match op % 8 {
        0 => json!({"op": "add", "path": new_member, "value": value}),
        1 => json!({"op": "add", "path": format!("{path}/-"), "value": value}),
        2 => json!({"op": "remove", "path": path}),
        3 => json!({"op": "replace", "path": path, "value": value}),
        4 => json!({"op": "move", "from": pick(from), "path": path}),
        5 => json!({"op": "copy", "from": pick(from), "path": new_member}),
        6 => {
            json!({"op": "test", "path": path, "value": document.pointer(&path).cloned().unwrap_or(Value::Null)})
        }
        _ => json!({"op": "test", "path": new_member, "value": Value::Null}),
    }
}

/// The emulator's JSON patch: operations in order, a `test` of a missing path against `null`
/// passes; `None` when the patch fails.
fn json_patch_model(document: &Value, operations: &[Value]) -> Option<Value> {
    let mut out = document.clone();
    for operation in operations {
        if operation["op"] == "test"
            && operation["value"].is_null()
            && out.pointer(operation["path"].as_str()?).is_none()
        {
            continue;
        }
        let operation: json_patch::PatchOperation =
            serde_json::from_value(operation.clone()).ok()?;
        json_patch::patch(&mut out, &[operation]).ok()?;
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// In-process properties
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn merge_patch_laws_hold(target in object(false, false), patch in object(true, false), key in key()) {
        let once = merge(&target, &patch);
        prop_assert_eq!(&merge(&once, &patch), &once, "applying twice is not applying once");
        prop_assert_eq!(&merge(&target, &json!({})), &target, "{{}} is not the identity");
        let deleted = merge(&target, &json!({ key.clone(): null }));
        prop_assert!(deleted.get(&key).is_none(), "null does not delete {}", key);
    }

    #[test]
    fn strategic_merge_patch_laws_hold(
        target in object(false, false),
        patch in object(true, true),
        plain in object(true, false),
        key in key(),
    ) {
        let once = strategic(&target, &patch);
        prop_assert_eq!(
            &strategic(&once, &patch),
            &once,
            "applying twice is not applying once; after once: {}",
            once
        );
        prop_assert_eq!(&strategic(&target, &json!({})), &target, "{{}} is not the identity");
        let deleted = strategic(&target, &json!({ key.clone(): null }));
        prop_assert!(deleted.get(&key).is_none(), "null does not delete {}", key);
        prop_assert!(!has_directive(&once), "a directive is stored: {}", once);
        // Without keyed lists and directives, a strategic merge patch is a merge patch.
        if !has_keyed_list_name(&plain) && !has_keyed_list_name(&target) {
            prop_assert_eq!(strategic(&target, &plain), merge(&target, &plain));
        }
    }

    #[test]
    fn json_patch_add_then_remove_gives_the_object_back(
        document in object(false, false),
        at in any::<Index>(),
        fresh in "[a-z~/]{1,4}",
        inserted in value(false, false),
    ) {
        let mut all = Vec::new();
        pointers(&document, "", &mut all);
        let escaped = fresh.replace('~', "~0").replace('/', "~1");
        let parent = if all.is_empty() { String::new() } else { all[at.index(all.len())].clone() };
        let target = match document.pointer(&parent) {
            Some(Value::Array(items)) => Some(format!("{parent}/{}", at.index(items.len() + 1))),
            Some(Value::Object(map)) if !map.contains_key(&fresh) => Some(format!("{parent}/{escaped}")),
            _ => None,
        };
        let Some(path) = target else { return Ok(()) };
        let added = json_patch_model(&document, &[json!({"op": "add", "path": path, "value": inserted})])
            .ok_or_else(|| TestCaseError::fail(format!("add at {path} failed")))?;
        prop_assert_eq!(added.pointer(&path), Some(&inserted));
        let removed = json_patch_model(&added, &[json!({"op": "remove", "path": path})])
            .ok_or_else(|| TestCaseError::fail(format!("remove at {path} failed")))?;
        prop_assert_eq!(removed, document);
    }
}

// ---------------------------------------------------------------------------------------------
// The emulator over HTTPS
// ---------------------------------------------------------------------------------------------

fn blob_crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("blobs.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Blob", "plural": "blobs", "singular": "blob", "listKind": "BlobList"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                }}
            }]
        }
    })
}

#[derive(Clone, Debug)]
struct HttpCase {
    spec: Value,
    merge: Value,
    strategic: Value,
    operations: Vec<(usize, Index, Index, String, Value)>,
    deleted: Index,
}

fn http_case() -> impl Strategy<Value = HttpCase> {
    (
        object(false, false),
        object(true, false),
        object(true, true),
        prop::collection::vec(
            (
                0usize..8,
                any::<Index>(),
                any::<Index>(),
                "[a-z~/]{1,3}",
                value(false, false),
            ),
            0..4,
        ),
        any::<Index>(),
    )
        .prop_map(|(spec, merge, strategic, operations, deleted)| HttpCase {
            spec,
            merge,
            strategic,
            operations,
            deleted,
        })
}

/// An answer of the emulator: the object's spec and resourceVersion, or a 4xx status.
async fn answer(
    result: Result<DynamicObject, kube::Error>,
) -> Result<Result<(Value, String), u16>, TestCaseError> {
    match result {
        Ok(object) => Ok(Ok((
            object.data["spec"].clone(),
            object.metadata.resource_version.unwrap_or_default(),
        ))),
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) => Ok(Err(status.code)),
        Err(other) => Err(TestCaseError::fail(format!(
            "the emulator answered neither the object nor a 4xx status: {other:?}"
        ))),
    }
}

async fn check_http_case(
    api: &Api<DynamicObject>,
    pods: &Api<DynamicObject>,
    group: &str,
    name: &str,
    case: &HttpCase,
) -> Result<(), TestCaseError> {
    let created: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"),
        "kind": "Blob",
        "metadata": {"name": name},
        "spec": case.spec,
    }))
    .unwrap();
    let created = api
        .create(&PostParams::default(), &created)
        .await
        .map_err(|e| TestCaseError::fail(format!("create: {e}")))?;
    let stored = created.data["spec"].clone();
    prop_assert_eq!(&stored, &case.spec, "stored differently");
    let params = PatchParams::default();

    // A merge patch, as the model merges; applied again it changes nothing, not even the
    // resourceVersion; `{}` neither.
    let expected = merge(&stored, &case.merge);
    let patch = json!({"spec": case.merge});
    let (spec, version) = answer(api.patch(name, &params, &Patch::Merge(&patch)).await)
        .await?
        .map_err(|code| TestCaseError::fail(format!("merge patch refused with {code}")))?;
    prop_assert_eq!(&spec, &expected, "merge patch");
    let (again, version_again) = answer(api.patch(name, &params, &Patch::Merge(&patch)).await)
        .await?
        .map_err(|code| TestCaseError::fail(format!("merge patch again refused with {code}")))?;
    prop_assert_eq!(&again, &expected, "applying twice is not applying once");
    prop_assert_eq!(
        &version_again,
        &version,
        "a no-op patch moved the resourceVersion"
    );
    let (same, version_same) = answer(api.patch(name, &params, &Patch::Merge(json!({}))).await)
        .await?
        .map_err(|code| TestCaseError::fail(format!("{{}} refused with {code}")))?;
    prop_assert_eq!(&same, &expected);
    prop_assert_eq!(&version_same, &version);

    // null deletes.
    let mut current = expected;
    if let Some(key) = current
        .as_object()
        .filter(|m| !m.is_empty())
        .map(|m| m.keys().nth(case.deleted.index(m.len())).unwrap().clone())
    {
        let (spec, _) = answer(
            api.patch(
                name,
                &params,
                &Patch::Merge(json!({"spec": {key.clone(): null}})),
            )
            .await,
        )
        .await?
        .map_err(|code| TestCaseError::fail(format!("deleting {key} refused with {code}")))?;
        prop_assert!(spec.get(&key).is_none(), "null did not delete {}", key);
        current = spec;
    }

    // A strategic merge patch: refused for the custom resource, as the API server refuses it
    // (415), and applied as the module does it to a built-in object holding the same spec (a Pod,
    // whose spec the emulator stores as it is sent).
    let patch = Patch::Strategic(json!({"spec": case.strategic}));
    let refused = answer(api.patch(name, &params, &patch).await).await?;
    prop_assert_eq!(
        refused,
        Err(415),
        "a strategic merge patch of a custom resource"
    );
    let pod: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": current,
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .map_err(|e| TestCaseError::fail(format!("create the pod: {e}")))?;
    let expected = strategic(&current, &case.strategic);
    let (spec, _) = answer(pods.patch(name, &params, &patch).await)
        .await?
        .map_err(|code| {
            TestCaseError::fail(format!("strategic merge patch refused with {code}"))
        })?;
    prop_assert_eq!(&spec, &expected, "strategic merge patch");

    // A JSON patch of near-valid operations under /spec, as the model applies it.
    let document = json!({"spec": current});
    let spec_only = |pointer: &str| pointer.starts_with("/spec/");
    let mut operations = Vec::new();
    for (op, at, from, fresh, value) in &case.operations {
        let mut operation = operation(&document, *op, *at, *from, fresh, value);
        for field in ["path", "from"] {
            if let Some(pointer) = operation.get(field).and_then(Value::as_str)
                && !spec_only(pointer)
            {
                operation[field] =
                    Value::from(format!("/spec/{}", pointer.trim_start_matches('/')));
            }
        }
        operations.push(operation);
    }
    let expected = json_patch_model(&document, &operations)
        .map(|doc| doc["spec"].clone())
        .filter(Value::is_object);
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(operations.clone()))
        .map_err(|e| TestCaseError::fail(format!("the operations are not a JSON patch: {e}")))?;
    let answered = answer(api.patch(name, &params, &Patch::Json::<()>(patch)).await).await?;
    match (answered, expected) {
        (Ok((spec, _)), Some(expected)) => {
            prop_assert_eq!(spec, expected, "JSON patch {:?}", operations)
        }
        (Err(_), None) => {}
        (answered, expected) => prop_assert!(
            false,
            "JSON patch {:?}: the emulator answered {:?}, the model {:?}",
            operations,
            answered,
            expected
        ),
    }
    Ok(())
}

/// The emulator answers random merge, strategic and JSON patches as the models do.
#[test]
fn the_emulator_patches_as_the_models_do() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let cluster = runtime.block_on(Cluster::start());
    // The models here are the emulator's, and a real API server validates Pods.
    if cluster.emulator().is_none() {
        return;
    }
    let group = format!("fuzz-{:06x}.nauthera.io", rand_u32() & 0xffffff);
    runtime.block_on(cluster.install_crd(blob_crd(&group)));
    let namespace = runtime.block_on(cluster.namespace("fuzz-patch"));
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Blob"), "blobs");
    let api: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &namespace, &resource);
    let pods: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &namespace,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods"),
    );
    let counter = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: (cases() / 4).max(1),
        ..config()
    });
    let result = runner.run(&http_case(), |case| {
        let name = format!("blob-{}", counter.fetch_add(1, Ordering::Relaxed));
        runtime.block_on(check_http_case(&api, &pods, &group, &name, &case))
    });
    if let Err(error) = result {
        panic!("{error}");
    }
}

/// What these properties found, kept as plain cases.
#[test]
fn what_fuzzing_found_stays_fixed() {
    // A new item of a keyed list is stored without its nulls (it kept them, and the next
    // application of the same patch removed them).
    let patch = json!({"spec": {"containers": [{"name": "app", "image": null, "x": 1}]}});
    let once = strategic(&json!({}), &patch);
    assert_eq!(
        once,
        json!({"spec": {"containers": [{"name": "app", "x": 1}]}})
    );
    assert_eq!(strategic(&once, &patch), once);
    // A `$patch: delete` item where there is no list adds nothing (it added the item).
    let patch = json!({"containers": [{"name": "app", "$patch": "delete"}]});
    assert_eq!(strategic(&json!({}), &patch), json!({"containers": []}));
    // A merge key that is not a string, number or boolean makes the list a plain one.
    let patch = json!({"containers": [{"name": {"$patch": "replace"}}]});
    let once = strategic(&json!({}), &patch);
    assert_eq!(strategic(&once, &patch), once);
}
