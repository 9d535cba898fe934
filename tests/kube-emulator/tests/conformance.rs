//! Conformance of the emulator to the Kubernetes API, written against the API with kube-rs
//! only: set `NAUTHERA_TEST_KUBECONFIG` to run the same tests against a real cluster (the
//! history-compaction test then checks nothing emulator-specific and returns early).

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SubjectAccessReview};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::ObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
}

#[tokio::test]
async fn discovery_serves_builtins_and_registered_crds() {
    let cluster = Cluster::start().await;
    let group = test_group("disco");
    cluster.install_crd(widget_crd(&group)).await;
    let discovery = kube::Discovery::new(cluster.client.clone())
        .run()
        .await
        .unwrap();
    let groups: BTreeSet<String> = discovery.groups().map(|g| g.name().to_owned()).collect();
    for wanted in [
        "",
        "apps",
        "coordination.k8s.io",
        "events.k8s.io",
        "rbac.authorization.k8s.io",
        group.as_str(),
    ] {
        assert!(
            groups.contains(wanted),
            "group {wanted:?} missing from {groups:?}"
        );
    }
    let (resource, capabilities) = discovery
        .groups()
        .find(|g| g.name() == group)
        .unwrap()
        .recommended_kind("Widget")
        .unwrap();
    assert_eq!(resource.plural, "widgets");
    assert!(
        capabilities
            .subresources
            .iter()
            .any(|(r, _)| r.plural == "status"),
        "{capabilities:?}"
    );

    let version = cluster.client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
    // The API server publishes a new group's OpenAPI a moment after the CRD is established.
    let document_url = eventually(|| async {
        let index: Value = serde_json::from_str(
            &cluster
                .client
                .request_text(http::Request::get("/openapi/v3").body(vec![]).unwrap())
                .await
                .unwrap(),
        )
        .unwrap();
        index["paths"][format!("apis/{group}/v1")]["serverRelativeURL"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    let document: Value = serde_json::from_str(
        &cluster
            .client
            .request_text(http::Request::get(document_url).body(vec![]).unwrap())
            .await
            .unwrap(),
    )
    .unwrap();
    let schemas = document["components"]["schemas"].as_object().unwrap();
    let widget = schemas
        .values()
        .find(|s| s["x-kubernetes-group-version-kind"][0]["kind"] == "Widget")
        .unwrap();
    assert_eq!(widget["properties"]["spec"]["required"], json!(["size"]));
}

/// What kubectl reads, the aggregated discovery of `/api` and `/apis`, names the same kinds,
/// scopes and subresources as the per-version endpoints.
#[tokio::test]
async fn aggregated_discovery_agrees_with_the_per_version_endpoints() {
    let cluster = Cluster::start().await;
    let group = test_group("aggregated");
    cluster.install_crd(widget_crd(&group)).await;
    // Served as a set of (group, version, plural, namespaced, subresources) per discovery.
    let served = |discovery: &kube::Discovery| -> BTreeSet<String> {
        discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .map(|(resource, capabilities)| {
                let subresources: BTreeSet<&str> = capabilities
                    .subresources
                    .iter()
                    .map(|(sub, _)| sub.plural.as_str())
                    .collect();
                format!(
                    "{}/{} {} {:?} {subresources:?}",
                    resource.group, resource.version, resource.plural, capabilities.scope
                )
            })
            .collect()
    };
    // A real API server adds a new CRD to the aggregated discovery a moment after the CRD's own
    // endpoint.
    let (per_version, aggregated) = eventually(|| async {
        let per_version = served(
            &kube::Discovery::new(cluster.client.clone())
                .run()
                .await
                .ok()?,
        );
        let aggregated = served(
            &kube::Discovery::new(cluster.client.clone())
                .run_aggregated()
                .await
                .ok()?,
        );
        aggregated
            .iter()
            .any(|line| line.starts_with(&format!("{group}/")))
            .then_some((per_version, aggregated))
    })
    .await;
    assert_eq!(aggregated, per_version);
    for wanted in [
        "/v1 configmaps Namespaced {}",
        "apps/v1 deployments Namespaced {\"scale\", \"status\"}",
    ] {
        assert!(
            aggregated.contains(wanted),
            "{wanted:?} missing from {aggregated:#?}"
        );
    }
}
#[tokio::test]
async fn tables_use_printer_columns() {
    let cluster = Cluster::start().await;
    let (group, namespace, api) = widgets(&cluster, "table").await;
    api.create(
        &PostParams::default(),
        &widget(&group, "t", json!({"size": 7})),
    )
    .await
    .unwrap();
    api.patch_status(
        "t",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"conditions": [{"type": "Ready", "reason": "Registered"}]}}),
        ),
    )
    .await
    .unwrap();
    let request = http::Request::get(format!("/apis/{group}/v1/namespaces/{namespace}/widgets"))
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(vec![])
        .unwrap();
    let table: Value =
        serde_json::from_str(&cluster.client.request_text(request).await.unwrap()).unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Size", "Ready"]);
    assert_eq!(table["rows"][0]["cells"], json!(["t", 7, "Registered"]));
    assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "t");
}

#[tokio::test]
async fn structural_schema_validates_defaults_and_prunes() {
    let cluster = Cluster::start().await;
    let (_group, _ns, api) = widgets(&cluster, "schema").await;
    let group = _group;
    let missing = api
        .create(
            &PostParams::default(),
            &widget(&group, "a", json!({"color": "red"})),
        )
        .await
        .unwrap_err();
    let status = status_of(missing);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let causes = status.details.unwrap().causes;
    assert_eq!(causes[0].field, "spec.size");
    assert_eq!(causes[0].reason, "FieldValueRequired");
    assert!(
        status.message.contains("spec.size: Required value"),
        "{}",
        status.message
    );

    let wrong = api
        .create(
            &PostParams::default(),
            &widget(&group, "b", json!({"size": "big", "color": "green"})),
        )
        .await
        .unwrap_err();
    let status = status_of(wrong);
    let fields: BTreeSet<String> = status
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    // A wrong type or a value outside the enum blocks the schema's CEL rules, and the API
    // server says so in a cause of its own.
    assert_eq!(
        fields,
        BTreeSet::from([
            "spec.size".to_owned(),
            "spec.color".to_owned(),
            "<nil>".to_owned()
        ])
    );

    let created = api
        .create(
            &PostParams::default(),
            &widget(
                &group,
                "c",
                json!({"size": 1, "bogus": true, "extra": {"free": {"form": 1}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["color"], "red", "default applied");
    assert!(
        created.data["spec"].get("bogus").is_none(),
        "unknown field pruned"
    );
    assert_eq!(
        created.data["spec"]["extra"]["free"]["form"], 1,
        "preserved unknown fields kept"
    );

    let strict = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..PatchParams::apply("conformance")
    };
    let refused = api
        .patch(
            "d",
            &strict,
            &Patch::Apply(widget(&group, "d", json!({"size": 1, "bogus": true}))),
        )
        .await
        .unwrap_err();
    // A server-side apply types the configuration before the strict check could run: the API
    // server fails it as it cannot type the field, whatever the validation asked for.
    let status = status_of(refused);
    assert_eq!(status.code, 500);
    assert!(
        status
            .message
            .contains(".spec.bogus: field not declared in schema"),
        "{}",
        status.message
    );
    let warned = api
        .patch(
            "d",
            &PatchParams::apply("conformance"),
            &Patch::Apply(widget(&group, "d", json!({"size": 1, "bogus": true}))),
        )
        .await
        .unwrap_err();
    assert_eq!(status_of(warned).code, 500);
}

#[tokio::test]
async fn validation_rules_are_enforced() {
    let cluster = Cluster::start().await;
    let (group, _ns, api) = widgets(&cluster, "cel").await;
    let tagged = widget(
        &group,
        "t",
        json!({"size": 1, "tags": ["a", "b", "c", "d"]}),
    );
    let status = status_of(
        api.create(&PostParams::default(), &tagged)
            .await
            .unwrap_err(),
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let cause = &status.details.unwrap().causes[0];
    assert_eq!(cause.field, "spec");
    assert!(
        cause.message.contains("at most three tags"),
        "{}",
        cause.message
    );

    api.create(
        &PostParams::default(),
        &widget(&group, "c", json!({"size": 1, "color": "red"})),
    )
    .await
    .unwrap();
    let recolored = api
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "blue"}})),
        )
        .await;
    let status = status_of(recolored.unwrap_err());
    assert!(
        status.message.contains("color is immutable"),
        "{}",
        status.message
    );
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();
}

/// A rule that does not compile refuses the definition (it is never skipped).
#[tokio::test]
async fn a_rule_that_does_not_compile_refuses_the_definition() {
    let cluster = Cluster::start().await;
    let group = test_group("badrule");
    let mut crd = widget_crd(&group);
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
        json!([{"rule": "self.size ==", "message": "broken"}]);
    let crds: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &crd_resource());
    let created = crds
        .create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await;
    let status = status_of(created.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let cause = &status.details.unwrap().causes[0];
    assert_eq!(
        cause.field,
        "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    );
    assert!(
        cause.message.starts_with(
            "Invalid value: {\"Rule\":\"self.size ==\",\"Message\":\"broken\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: compilation failed: "
        ) && cause
            .message
            .contains("compilation failed: ERROR: <input>:1:"),
        "{}",
        cause.message
    );
}

/// A rule reading `oldSelf` where an update's items cannot be paired with the stored ones (the
/// items of a list that is not a `map` list) is refused, and so is `optionalOldSelf` on a rule
/// that does not read `oldSelf`.
#[tokio::test]
async fn rules_that_cannot_see_an_old_value_refuse_the_definition() {
    let cluster = Cluster::start().await;
    let group = test_group("oldself");
    let mut crd = widget_crd(&group);
    let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["x-kubernetes-validations"] = json!([{"rule": "self.size >= 0", "optionalOldSelf": true}]);
    spec["properties"]["parts"] = json!({"type": "array", "maxItems": 10, "items": {
        "type": "object", "properties": {"name": {"type": "string", "maxLength": 10}},
        "x-kubernetes-validations": [{"rule": "self.name == oldSelf.name"}]}});
    let crds: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &crd_resource());
    let refused = crds
        .create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await
        .unwrap_err();
    let status = status_of(refused);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let causes: Vec<(String, String)> = status
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| (c.field, c.message))
        .collect();
    let root = "spec.validation.openAPIV3Schema.properties[spec]";
    assert_eq!(
        causes,
        [
            (
                format!("{root}.properties[parts].items.x-kubernetes-validations[0].rule"),
                format!(
                    "Invalid value: \"self.name == oldSelf.name\": oldSelf cannot be used on the uncorrelatable portion of the schema within {root}.properties[parts]"
                )
            ),
            (
                format!("{root}.x-kubernetes-validations[0].optionalOldSelf"),
                "Invalid value: true: may not be set if oldSelf is not used in rule".to_owned()
            ),
        ]
    );
}

/// Schema patterns and the patterns of CEL's `matches` are Go's RE2, whose `\s`, `\d` and
/// `\w` are ASCII: a no-break space is `\S` and not `\w`, `٣` is no digit.
#[tokio::test]
async fn patterns_read_perl_classes_as_re2_does() {
    let cluster = Cluster::start().await;
    let group = test_group("re2");
    let mut crd = widget_crd(&group);
    let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["properties"]["label"] = json!({"type": "string", "maxLength": 20, "pattern": "^\\S+$",
        "x-kubernetes-validations": [
            {"rule": "self.matches('^[\\\\w-]+$')", "message": "word characters only"},
            {"rule": "!self.matches('\\\\d')", "message": "no digits"}]});
    cluster.install_crd(crd).await;
    let namespace = cluster.namespace("re2").await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &namespace, &widget_resource(&group));
    let create = async |name: &str, label: &str| {
        let object = widget(&group, name, json!({"size": 1, "label": label}));
        api.create(&PostParams::default(), &object).await
    };
    let messages = |error: kube::Error| -> Vec<String> {
        status_of(error)
            .details
            .unwrap()
            .causes
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    };
    // The pattern takes a no-break space (not `\s` to RE2); the rule's `\w` does not.
    assert_eq!(
        messages(create("nbsp", "a\u{a0}b").await.unwrap_err()),
        ["spec.label: Invalid value: \"string\": word characters only"]
    );
    // An Arabic-Indic digit is no `\d` (nor `\w`); an ASCII one is.
    assert_eq!(
        messages(create("digit", "a٣b").await.unwrap_err()),
        ["spec.label: Invalid value: \"string\": word characters only"]
    );
    assert_eq!(
        messages(create("ascii", "a3b").await.unwrap_err()),
        ["spec.label: Invalid value: \"string\": no digits"]
    );
}

#[tokio::test]
async fn crud_with_resource_versions_and_conflicts() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("crud").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    let created = maps
        .create(
            &PostParams::default(),
            &config_map("one", json!({"k": "v"})),
        )
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    assert!(!uid.is_empty());
    assert!(created.metadata.creation_timestamp.is_some());
    let rv1: u64 = created.resource_version().unwrap().parse().unwrap();

    let duplicate = maps
        .create(&PostParams::default(), &config_map("one", json!({})))
        .await
        .unwrap_err();
    assert_eq!(status_of(duplicate).reason, "AlreadyExists");

    let mut changed = created.clone();
    changed.data = Some([("k".to_owned(), "w".to_owned())].into());
    let replaced = maps
        .replace("one", &PostParams::default(), &changed)
        .await
        .unwrap();
    let rv2: u64 = replaced.resource_version().unwrap().parse().unwrap();
    assert!(rv2 > rv1);

    let stale = maps
        .replace("one", &PostParams::default(), &changed)
        .await
        .unwrap_err();
    let status = status_of(stale);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );

    let list = maps.list(&ListParams::default()).await.unwrap();
    let list_rv: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
    assert!(list_rv >= rv2);
    assert_eq!(list.items.len(), 1);

    let answer = maps.delete("one", &DeleteParams::default()).await.unwrap();
    let success = answer
        .right()
        .expect("a deleted ConfigMap is answered with a Status");
    assert_eq!(success.details.unwrap().name, "one");
    let gone = maps.get("one").await.unwrap_err();
    let status = status_of(gone);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(status.message, "configmaps \"one\" not found");
}

#[tokio::test]
async fn merge_json_and_strategic_patches() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("patch").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    maps.create(
        &PostParams::default(),
        &config_map("p", json!({"a": "1", "b": "2"})),
    )
    .await
    .unwrap();
    let merged = maps
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.data.unwrap(),
        [
            ("b".to_owned(), "2".to_owned()),
            ("c".to_owned(), "3".to_owned())
        ]
        .into()
    );
    let operations: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/data/b", "value": "20"}]))
            .unwrap();
    let patched = maps
        .patch("p", &PatchParams::default(), &Patch::Json::<()>(operations))
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["b"], "20");
    let strategic = maps
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(strategic.labels()["x"], "y");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/b", "value": "nope"}]))
            .unwrap();
    assert!(
        maps.patch("p", &PatchParams::default(), &Patch::Json::<()>(failing))
            .await
            .is_err()
    );
    let missing = maps
        .patch("nope", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .unwrap_err();
    assert_eq!(status_of(missing).code, 404);
}

/// Custom resources have no patch strategies: the API server refuses a strategic merge patch of
/// one (its main resource or a subresource, stored or not) with 415 and the media types it takes.
#[tokio::test]
async fn strategic_merge_patches_of_custom_resources_are_unsupported() {
    let cluster = Cluster::start().await;
    let (group, _namespace, api) = widgets(&cluster, "smp").await;
    api.create(
        &PostParams::default(),
        &widget(&group, "w", json!({"size": 1})),
    )
    .await
    .unwrap();
    let expected = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
    let strategic = Patch::Strategic(json!({"spec": {"size": 2}}));
    for refused in [
        api.patch("w", &PatchParams::default(), &strategic).await,
        api.patch_status("w", &PatchParams::default(), &strategic)
            .await,
        api.patch("absent", &PatchParams::default(), &strategic)
            .await,
    ] {
        let status = status_of(refused.unwrap_err());
        assert_eq!(
            (status.code, status.reason.as_str(), status.message.as_str()),
            (415, "UnsupportedMediaType", expected)
        );
    }
    assert_eq!(api.get("w").await.unwrap().data["spec"]["size"], 1);
    // A built-in kind takes it; what it does not take its router refuses tersely.
    let namespace = cluster.namespace("smp-builtin").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    maps.create(&PostParams::default(), &config_map("m", json!({"a": "1"})))
        .await
        .unwrap();
    maps.patch(
        "m",
        &PatchParams::default(),
        &Patch::Strategic(json!({"data": {"b": "2"}})),
    )
    .await
    .unwrap();
    let request = http::Request::patch(format!("/api/v1/namespaces/{namespace}/configmaps/m"))
        .header("Content-Type", "application/xml")
        .body(b"<x/>".to_vec())
        .unwrap();
    let status = status_of(
        cluster
            .client
            .request::<ConfigMap>(request)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status.code, status.message.as_str()),
        (415, "415: Unsupported Media Type")
    );
}

#[tokio::test]
async fn server_side_apply_tracks_ownership_and_conflicts() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("ssa").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    let apply = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": data});

    let created = maps
        .patch(
            "s",
            &PatchParams::apply("alice"),
            &Patch::Apply(apply(json!({"a": "1", "b": "2"}))),
        )
        .await
        .unwrap();
    let managers: Vec<String> = created
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["alice"]);
    assert_eq!(
        created.managed_fields()[0].operation.as_deref(),
        Some("Apply")
    );

    // A field alice stops applying is removed.
    let shrunk = maps
        .patch(
            "s",
            &PatchParams::apply("alice"),
            &Patch::Apply(apply(json!({"a": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        shrunk.data.unwrap(),
        [("a".to_owned(), "1".to_owned())].into()
    );

    // bob changing alice's field conflicts, naming the field and the manager.
    let conflict = maps
        .patch(
            "s",
            &PatchParams::apply("bob"),
            &Patch::Apply(apply(json!({"a": "9"}))),
        )
        .await
        .unwrap_err();
    let status = status_of(conflict);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    let cause = &status.details.unwrap().causes[0];
    assert_eq!(cause.reason, "FieldManagerConflict");
    assert_eq!(cause.field, ".data.a");
    assert!(cause.message.contains("alice"), "{}", cause.message);

    // Forced, bob takes the field over.
    let forced = maps
        .patch(
            "s",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(apply(json!({"a": "9"}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "9");
    assert!(
        forced
            .managed_fields()
            .iter()
            .all(|m| m.manager.as_deref() == Some("bob"))
    );

    // An ordinary update moves ownership of what it changed to its manager.
    let updated = maps
        .patch(
            "s",
            &PatchParams {
                field_manager: Some("carol".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"data": {"c": "3"}})),
        )
        .await
        .unwrap();
    let carol = updated
        .managed_fields()
        .iter()
        .find(|m| m.manager.as_deref() == Some("carol"))
        .unwrap();
    assert_eq!(carol.operation.as_deref(), Some("Update"));

    // A no-op apply does not move the resourceVersion.
    let again = maps
        .patch(
            "s",
            &PatchParams::apply("bob"),
            &Patch::Apply(apply(json!({"a": "9"}))),
        )
        .await
        .unwrap();
    assert_eq!(again.resource_version(), updated.resource_version());
}

#[tokio::test]
async fn status_subresource_isolation_and_generation() {
    let cluster = Cluster::start().await;
    let (group, _ns, api) = widgets(&cluster, "status").await;
    let created = api
        .create(
            &PostParams::default(),
            &widget(&group, "w", json!({"size": 1})),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    // Status in a main-resource write is ignored.
    let main = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Hacked"}, "metadata": {"labels": {"l": "1"}}}),
            ),
        )
        .await
        .unwrap();
    assert!(main.data.get("status").is_none());
    assert_eq!(
        main.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );

    // Anything but status in a status write is ignored; status writes keep the generation.
    let status = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 99}, "status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["phase"], "Ready");
    assert_eq!(status.data["spec"]["size"], 1);
    assert_eq!(status.metadata.generation, Some(1));

    // A spec change bumps the generation.
    let spec = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(spec.metadata.generation, Some(2));
    assert_eq!(
        spec.data["status"]["phase"], "Ready",
        "status survives a main write"
    );

    // Status by server-side apply with its own manager.
    let applied = api
        .patch_status(
            "w",
            &PatchParams::apply("reconciler").force(),
            &Patch::Apply(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "status": {"observedGeneration": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["status"]["observedGeneration"], 2);
    let entry = applied
        .managed_fields()
        .iter()
        .find(|m| m.manager.as_deref() == Some("reconciler"))
        .unwrap();
    assert_eq!(entry.subresource.as_deref(), Some("status"));
    let fetched = api.get_status("w").await.unwrap();
    assert_eq!(fetched.data["status"]["observedGeneration"], 2);
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let cluster = Cluster::start().await;
    let (group, _ns, api) = widgets(&cluster, "final").await;
    let mut object = widget(&group, "f", json!({"size": 1}));
    object.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    api.create(&PostParams::default(), &object).await.unwrap();

    let pending = api.delete("f", &DeleteParams::default()).await.unwrap();
    assert!(
        pending.is_left(),
        "an object held by finalizers is answered with the object"
    );
    let held = api.get("f").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(
        held.metadata.generation,
        Some(2),
        "marking for deletion bumps the generation"
    );

    // A replace of a custom resource must name the resourceVersion it replaces.
    let mut unconditional = held.clone();
    unconditional.metadata.resource_version = None;
    let refused = api
        .replace("f", &PostParams::default(), &unconditional)
        .await
        .unwrap_err();
    let status = status_of(refused);
    assert_eq!(status.code, 422);
    assert_eq!(
        status.details.unwrap().causes[0].field,
        "metadata.resourceVersion"
    );

    let adding = api
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/cleanup", "more"]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_of(adding).code, 422);

    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let gone = api.get("f").await.unwrap_err();
    assert_eq!(status_of(gone).code, 404);
}

#[tokio::test]
async fn kube_runtime_finalizer_helper_adds_and_removes_its_finalizer() {
    use kube::runtime::finalizer::{Event as Finalizer, finalizer};
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("helper").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    maps.create(&PostParams::default(), &config_map("guarded", json!({})))
        .await
        .unwrap();
    let run = |object: ConfigMap| {
        let maps = maps.clone();
        async move {
            finalizer(
                &maps,
                "example.com/guard",
                Arc::new(object),
                |event| async move {
                    Ok::<_, kube::Error>(match event {
                        Finalizer::Apply(_) => Action::await_change(),
                        Finalizer::Cleanup(_) => Action::await_change(),
                    })
                },
            )
            .await
            .unwrap()
        }
    };
    run(maps.get("guarded").await.unwrap()).await;
    let guarded = maps.get("guarded").await.unwrap();
    assert_eq!(guarded.finalizers(), ["example.com/guard"]);
    run(guarded).await;
    maps.delete("guarded", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = maps.get("guarded").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    run(deleting).await;
    assert!(maps.get_opt("guarded").await.unwrap().is_none());
}

#[tokio::test]
async fn owner_references_are_garbage_collected() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("gc").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), &namespace);
    let owner = maps
        .create(&PostParams::default(), &config_map("owner", json!({})))
        .await
        .unwrap();
    let reference = owner.controller_owner_ref(&()).unwrap();
    for name in ["dependent", "orphan"] {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                owner_references: Some(vec![reference.clone()]),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        };
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
    // A second owner keeps "orphan" alive: it only loses the dangling reference.
    let other = maps
        .create(&PostParams::default(), &config_map("other", json!({})))
        .await
        .unwrap();
    let mut second = other.controller_owner_ref(&()).unwrap();
    second.controller = Some(false);
    secrets
        .patch(
            "orphan",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": [reference, second]}})),
        )
        .await
        .unwrap();

    maps.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(|| async {
        secrets
            .get_opt("dependent")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let survivor = eventually(|| async {
        let secret = secrets.get("orphan").await.unwrap();
        (secret.owner_references().len() == 1).then_some(secret)
    })
    .await;
    assert_eq!(survivor.owner_references()[0].name, "other");

    // Orphan propagation leaves dependents in place without the reference.
    let kept = Secret {
        metadata: ObjectMeta {
            name: Some("kept".into()),
            owner_references: Some(vec![other.controller_owner_ref(&()).unwrap()]),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    secrets.create(&PostParams::default(), &kept).await.unwrap();
    maps.delete(
        "other",
        &DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    eventually(|| async { maps.get_opt("other").await.unwrap().is_none().then_some(()) }).await;
    let kept = eventually(|| async {
        let secret = secrets.get("kept").await.unwrap();
        secret.owner_references().is_empty().then_some(secret)
    })
    .await;
    assert_eq!(kept.name_any(), "kept");
}

#[tokio::test]
async fn a_foreground_deletion_holds_the_owner_until_its_dependents_are_gone() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("fg").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), &namespace);
    let mut owner = config_map("owner", json!({}));
    owner.metadata.finalizers = Some(vec!["example.com/guard".into()]);
    let owner = maps.create(&PostParams::default(), &owner).await.unwrap();
    let dependent = Secret {
        metadata: ObjectMeta {
            name: Some("dependent".into()),
            owner_references: Some(vec![owner.controller_owner_ref(&()).unwrap()]),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &dependent)
        .await
        .unwrap();

    maps.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    // The dependent goes first, then the collector's finalizer; the owner's own one stays.
    eventually(|| async {
        secrets
            .get_opt("dependent")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let held = eventually(|| async {
        let owner = maps.get("owner").await.unwrap();
        (owner.finalizers() == ["example.com/guard"]).then_some(owner)
    })
    .await;
    assert!(held.metadata.deletion_timestamp.is_some());
    maps.patch(
        "owner",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(|| async { maps.get_opt("owner").await.unwrap().is_none().then_some(()) }).await;
}

#[tokio::test]
async fn label_and_field_selectors_and_cluster_wide_lists() {
    let cluster = Cluster::start().await;
    let first = cluster.namespace("sel").await;
    let second = cluster.namespace("sel").await;
    for (namespace, name, labels) in [
        (&first, "a", json!({"app": "web", "tier": "front"})),
        (&first, "b", json!({"app": "db"})),
        (&second, "c", json!({"app": "web"})),
    ] {
        let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), namespace);
        let map: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        maps.create(&PostParams::default(), &map).await.unwrap();
    }
    let everywhere: Api<ConfigMap> = Api::all(cluster.client.clone());
    let names = |selector: &'static str, fields: &'static str| {
        let everywhere = everywhere.clone();
        async move {
            let mut params = ListParams::default();
            if !selector.is_empty() {
                params = params.labels(selector);
            }
            if !fields.is_empty() {
                params = params.fields(fields);
            }
            let mut names: Vec<String> = everywhere
                .list(&params)
                .await
                .unwrap()
                .items
                .iter()
                .map(|m| m.name_any())
                .filter(|n| ["a", "b", "c"].contains(&n.as_str()))
                .collect();
            names.sort();
            names
        }
    };
    assert_eq!(names("app=web", "").await, ["a", "c"]);
    assert_eq!(names("app!=web,app", "").await, ["b"]);
    assert_eq!(names("app in (db,web),tier", "").await, ["a"]);
    assert_eq!(names("app notin (web),app", "").await, ["b"]);
    assert_eq!(names("", "metadata.name=c").await, ["c"]);
    let in_first = format!("metadata.namespace={first}");
    let in_first: &'static str = Box::leak(in_first.into_boxed_str());
    assert_eq!(names("", in_first).await, ["a", "b"]);
    let namespaced: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &first);
    assert_eq!(
        namespaced
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // Pagination with limit and continue.
    let page = namespaced
        .list(&ListParams::default().limit(1))
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    let token = page.metadata.continue_.clone().unwrap();
    let rest = namespaced
        .list(&ListParams::default().limit(5).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert!(rest.metadata.continue_.is_none());
    assert_ne!(page.items[0].name_any(), rest.items[0].name_any());

    // A later page shows the first page's snapshot and its resourceVersion, so a watch from that
    // resourceVersion misses nothing changed while the pages were read.
    let rest_name = rest.items[0].name_any();
    let changed = serde_json::json!({"data": {"changed": "after the first page"}});
    namespaced
        .patch(&rest_name, &PatchParams::default(), &Patch::Merge(&changed))
        .await
        .unwrap();
    let rest = namespaced
        .list(&ListParams::default().limit(5).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        rest.metadata.resource_version,
        page.metadata.resource_version
    );
    assert_eq!(rest.items[0].name_any(), rest_name);
    assert!(
        rest.items[0]
            .data
            .as_ref()
            .is_none_or(|d| !d.contains_key("changed")),
        "a later page showed a change made after the first page"
    );
}

#[tokio::test]
async fn watch_streams_changes_bookmarks_and_expires_old_versions() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("watch").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    let start = maps
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    maps.create(&PostParams::default(), &config_map("w", json!({"k": "1"})))
        .await
        .unwrap();
    maps.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    maps.delete("w", &DeleteParams::default()).await.unwrap();

    let params = WatchParams::default().timeout(10);
    let mut stream = maps.watch(&params, &start).await.unwrap().boxed();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(_) => kinds.push("ADDED"),
            WatchEvent::Modified(m) => {
                assert_eq!(m.data.unwrap()["k"], "2");
                kinds.push("MODIFIED");
            }
            WatchEvent::Deleted(_) => kinds.push("DELETED"),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("unexpected error {e:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    // Bookmarks arrive while nothing changes: the emulator sends one every second, the API
    // server about a minute apart and shortly before a watch's deadline (here 10 s).
    let bookmark = tokio::time::timeout(Duration::from_secs(9), async {
        loop {
            if let WatchEvent::Bookmark(b) = stream.try_next().await.unwrap().unwrap() {
                return b;
            }
        }
    })
    .await
    .unwrap();
    assert!(!bookmark.metadata.resource_version.is_empty());

    // A label selector turns leaving objects into DELETED.
    let selected = WatchParams::default().labels("keep=yes").timeout(10);
    let now = maps
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut filtered = maps.watch(&selected, &now).await.unwrap().boxed();
    let labelled: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "l", "labels": {"keep": "yes"}}}))
            .unwrap();
    maps.create(&PostParams::default(), &labelled)
        .await
        .unwrap();
    maps.patch(
        "l",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"keep": "no"}}})),
    )
    .await
    .unwrap();
    assert!(matches!(
        filtered.try_next().await.unwrap().unwrap(),
        WatchEvent::Added(_)
    ));
    assert!(matches!(
        filtered.try_next().await.unwrap().unwrap(),
        WatchEvent::Deleted(_)
    ));

    let Some(emulator) = cluster.emulator() else {
        return;
    };
    emulator.compact_history();
    let mut expired = maps
        .watch(&WatchParams::default(), &start)
        .await
        .unwrap()
        .boxed();
    match expired.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(error) => {
            assert_eq!(error.code, 410);
            assert_eq!(error.reason, "Expired");
        }
        other => panic!("expected 410 Gone, got {other:?}"),
    }
}

#[tokio::test]
async fn watcher_with_streaming_lists_gets_initial_events() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("stream").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    maps.create(&PostParams::default(), &config_map("before", json!({})))
        .await
        .unwrap();
    let config = watcher::Config::default().streaming_lists();
    let mut events = watcher(maps.clone(), config).boxed();
    let mut seen = Vec::new();
    loop {
        match events.try_next().await.unwrap().unwrap() {
            watcher::Event::InitApply(map) => seen.push(map.name_any()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(seen, ["before"]);
}

/// A Controller over widgets that reports every reconcile.
async fn run_controller(
    api: Api<DynamicObject>,
    resource: kube::core::ApiResource,
) -> mpsc::UnboundedReceiver<(String, bool)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let context = Arc::new(tx);
    let controller = Controller::new_with(api, watcher::Config::default(), resource).run(
        |object: Arc<DynamicObject>, tx: Arc<mpsc::UnboundedSender<(String, bool)>>| async move {
            let _ = tx.send((
                object.name_any(),
                object.metadata.deletion_timestamp.is_some(),
            ));
            Ok::<_, kube::Error>(Action::await_change())
        },
        |_, _, _| Action::await_change(),
        context,
    );
    tokio::spawn(controller.for_each(|_| async {}));
    rx
}

async fn next_reconcile(rx: &mut mpsc::UnboundedReceiver<(String, bool)>, name: &str) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some((seen, _)) = rx.recv().await {
            if seen == name {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no reconcile of {name} within 10s"));
}

#[tokio::test]
async fn controller_sees_create_update_delete_and_relists_after_compaction() {
    let cluster = Cluster::start().await;
    let (group, namespace, api) = widgets(&cluster, "ctrl").await;
    let resource = widget_resource(&group);
    let mut reconciles = run_controller(api.clone(), resource).await;

    let mut object = widget(&group, "c1", json!({"size": 1}));
    object.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &object).await.unwrap();
    next_reconcile(&mut reconciles, "c1").await;

    api.patch(
        "c1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();
    next_reconcile(&mut reconciles, "c1").await;

    api.delete("c1", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some((name, deleting)) = reconciles.recv().await {
            if name == "c1" && deleting {
                return;
            }
        }
    })
    .await
    .expect("the controller saw the deletion timestamp");

    if let Some(emulator) = cluster.emulator() {
        // Watches end and resume from expired versions: the watcher must list again and
        // still see new objects.
        emulator.compact_history();
        emulator.compact_history();
    }
    api.create(
        &PostParams::default(),
        &widget(&group, "c2", json!({"size": 1})),
    )
    .await
    .unwrap();
    next_reconcile(&mut reconciles, "c2").await;
    let _ = namespace;
}

#[tokio::test]
async fn watcher_relists_after_410_when_history_is_compacted() {
    let cluster = Cluster::start().await;
    let Some(emulator) = cluster.emulator() else {
        return;
    };
    let namespace = cluster.namespace("relist").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    let mut events = watcher(maps.clone(), watcher::Config::default()).boxed();
    let mut inits = 0;
    // The first list.
    loop {
        if let watcher::Event::InitDone = events.try_next().await.unwrap().unwrap() {
            inits += 1;
            break;
        }
    }
    emulator.compact_history();
    maps.create(&PostParams::default(), &config_map("after", json!({})))
        .await
        .unwrap();
    // The watch ends, resumes from an expired version, gets 410 and lists again.
    let mut seen_after = false;
    tokio::time::timeout(Duration::from_secs(10), async {
        while inits < 2 || !seen_after {
            match events.try_next().await {
                Ok(Some(watcher::Event::InitDone)) => inits += 1,
                Ok(Some(watcher::Event::InitApply(m) | watcher::Event::Apply(m)))
                    if m.name_any() == "after" =>
                {
                    seen_after = true
                }
                Ok(_) => {}
                Err(error) => assert!(
                    error.to_string().contains("410") || error.to_string().contains("too old"),
                    "{error}"
                ),
            }
        }
    })
    .await
    .expect("a re-list after 410");
}

#[tokio::test]
async fn a_later_page_after_compaction_gets_410_with_a_token_for_the_rest() {
    let cluster = Cluster::start().await;
    let Some(emulator) = cluster.emulator() else {
        return;
    };
    let namespace = cluster.namespace("pages").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    for name in ["a", "b", "c", "d"] {
        maps.create(&PostParams::default(), &config_map(name, json!({})))
            .await
            .unwrap();
    }
    let first = maps.list(&ListParams::default().limit(2)).await.unwrap();
    let names = |list: &kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items.iter().map(ResourceExt::name_any).collect()
    };
    assert_eq!(names(&first), ["a", "b"]);
    let token = first.metadata.continue_.clone().unwrap();

    emulator.compact_history();
    // Changed after the first page: the rest shows them as they stand now.
    maps.create(&PostParams::default(), &config_map("e", json!({})))
        .await
        .unwrap();
    maps.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"late": "yes"}})),
    )
    .await
    .unwrap();
    let expired = status_of(
        maps.list(&ListParams::default().limit(2).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!((expired.code, expired.reason.as_str()), (410, "Expired"));
    assert!(
        expired
            .message
            .contains("use the continue token in this response"),
        "{}",
        expired.message
    );
    let rest = expired.metadata.and_then(|m| m.continue_).unwrap();
    assert!(!rest.is_empty());

    let mut seen = Vec::new();
    let mut params = ListParams::default().limit(2).continue_token(&rest);
    loop {
        let page = maps.list(&params).await.unwrap();
        seen.extend(page.items.iter().cloned());
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => break,
        }
    }
    let seen_names: Vec<String> = seen.iter().map(ResourceExt::name_any).collect();
    assert_eq!(seen_names, ["c", "d", "e"], "the rest, once each");
    assert_eq!(
        seen[0]
            .data
            .as_ref()
            .and_then(|d| d.get("late"))
            .map(String::as_str),
        Some("yes")
    );
}

#[tokio::test]
async fn rbac_denies_and_allows_and_access_reviews_agree() {
    let cluster = Cluster::start().await;
    let group = test_group("rbac");
    cluster.install_crd(widget_crd(&group)).await;
    let namespace = cluster.namespace("rbac").await;
    let bot = cluster.service_account_client(&namespace, "bot").await;
    let bot_secrets: Api<Secret> = Api::namespaced(bot.clone(), &namespace);
    let denied = bot_secrets.list(&ListParams::default()).await.unwrap_err();
    let status = status_of(denied);
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        format!(
            "secrets is forbidden: User \"system:serviceaccount:{namespace}:bot\" cannot list resource \"secrets\" in API group \"\" in the namespace \"{namespace}\""
        )
    );

    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "widget-status"},
        "rules": [
            {"apiGroups": [group], "resources": ["widgets"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [group], "resources": ["widgets/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["allowed"]}
        ]
    }))
    .unwrap();
    Api::<Role>::namespaced(cluster.client.clone(), &namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "bot-widget-status"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "widget-status"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": namespace}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(cluster.client.clone(), &namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let admin_widgets: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &namespace, &widget_resource(&group));
    admin_widgets
        .create(
            &PostParams::default(),
            &widget(&group, "w", json!({"size": 1})),
        )
        .await
        .unwrap();
    let bot_widgets: Api<DynamicObject> =
        Api::namespaced_with(bot.clone(), &namespace, &widget_resource(&group));
    eventually(|| async { bot_widgets.list(&ListParams::default()).await.ok() }).await;
    bot_widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ok"}})),
        )
        .await
        .unwrap();
    let spec_denied = bot_widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap_err();
    let status = status_of(spec_denied);
    assert_eq!(status.code, 403);
    assert!(
        status.message.contains(&format!(
            "cannot patch resource \"widgets\" in API group \"{group}\""
        )),
        "{}",
        status.message
    );

    let named = bot_secrets.get("other").await.unwrap_err();
    assert_eq!(status_of(named).code, 403);
    assert_eq!(
        status_of(bot_secrets.get("allowed").await.unwrap_err()).code,
        404,
        "allowed by resourceNames, then not found"
    );

    let review = |verb: &str, resource: &str, subresource: &str| -> SelfSubjectAccessReview {
        serde_json::from_value(json!({"spec": {"resourceAttributes": {
            "namespace": namespace, "verb": verb, "group": group, "resource": resource, "subresource": subresource}}}))
        .unwrap()
    };
    let reviews: Api<SelfSubjectAccessReview> = Api::all(bot.clone());
    let allowed = reviews
        .create(
            &PostParams::default(),
            &review("patch", "widgets", "status"),
        )
        .await
        .unwrap();
    assert!(allowed.status.unwrap().allowed);
    let refused = reviews
        .create(&PostParams::default(), &review("delete", "widgets", ""))
        .await
        .unwrap();
    assert!(!refused.status.unwrap().allowed);

    let subject: SubjectAccessReview = serde_json::from_value(json!({"spec": {
        "user": format!("system:serviceaccount:{namespace}:bot"),
        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{namespace}")],
        "resourceAttributes": {"namespace": namespace, "verb": "list", "group": group, "resource": "widgets"}}}))
    .unwrap();
    let answer = Api::<SubjectAccessReview>::all(cluster.client.clone())
        .create(&PostParams::default(), &subject)
        .await
        .unwrap();
    assert!(answer.status.unwrap().allowed);
    // The bot may not ask about others.
    let forbidden = Api::<SubjectAccessReview>::all(bot)
        .create(&PostParams::default(), &subject)
        .await
        .unwrap_err();
    assert_eq!(status_of(forbidden).code, 403);
}

#[tokio::test]
async fn unauthenticated_requests_get_401() {
    let cluster = Cluster::start().await;
    let stranger = cluster.client_with_token("not-a-token");
    let error = Api::<ConfigMap>::namespaced(stranger, "default")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert_eq!(status_of(error).code, 401);
}

#[tokio::test]
async fn builtin_kinds_secrets_events_leases_and_workloads() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("builtin").await;
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), &namespace);
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}),
    )
    .unwrap();
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    assert_eq!(created.data.unwrap()["password"].0, b"hunter2");
    assert!(created.string_data.is_none());
    assert_eq!(created.type_.as_deref(), Some("Opaque"));

    let frozen: Secret = serde_json::from_value(
        json!({"metadata": {"name": "frozen"}, "immutable": true, "stringData": {"k": "v"}}),
    )
    .unwrap();
    secrets
        .create(&PostParams::default(), &frozen)
        .await
        .unwrap();
    let change = secrets
        .patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"k": "w"}})),
        )
        .await;
    assert_eq!(
        status_of(change.unwrap_err()).code,
        422,
        "an immutable Secret keeps its data"
    );
    secrets
        .patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"ok": "yes"}}})),
        )
        .await
        .unwrap();

    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), &namespace);
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})).unwrap();
    let lease = leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut taken = lease.clone();
    taken.spec.as_mut().unwrap().holder_identity = Some("b".into());
    leases
        .replace("leader", &PostParams::default(), &taken)
        .await
        .unwrap();
    assert_eq!(
        status_of(
            leases
                .replace("leader", &PostParams::default(), &lease)
                .await
                .unwrap_err()
        )
        .code,
        409
    );

    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), &namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap();
    let stored = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    assert_eq!(stored.metadata.generation, Some(1));

    // Events through kube-runtime's recorder (events.k8s.io/v1) and the core API.
    let reporter = kube::runtime::events::Reporter {
        controller: "conformance".into(),
        instance: None,
    };
    let recorder = kube::runtime::events::Recorder::new(cluster.client.clone(), reporter);
    let reference = stored.object_ref(&());
    recorder
        .publish(
            &kube::runtime::events::Event {
                type_: kube::runtime::events::EventType::Normal,
                reason: "Tested".into(),
                note: Some("a note".into()),
                action: "Test".into(),
                secondary: None,
            },
            &reference,
        )
        .await
        .unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), &namespace);
    let listed = events.list(&ListParams::default()).await.unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("Tested"))
    );
    let core_events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(cluster.client.clone(), &namespace);
    let core: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "e1"}, "reason": "Core", "message": "m", "type": "Normal",
        "involvedObject": {"kind": "Deployment", "name": "d", "namespace": namespace}
    }))
    .unwrap();
    core_events
        .create(&PostParams::default(), &core)
        .await
        .unwrap();
    // Both APIs show both events: they are one stored Event seen two ways.
    let by_object = core_events
        .list(&ListParams::default().fields("involvedObject.name=d,involvedObject.kind=Deployment"))
        .await
        .unwrap();
    assert_eq!(by_object.items.len(), 2);
    let recorded = by_object
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("Tested"))
        .unwrap();
    assert_eq!(recorded.message.as_deref(), Some("a note"));
    let as_new = events.get("e1").await.unwrap();
    assert_eq!(as_new.note.as_deref(), Some("m"));
    assert_eq!(as_new.regarding.unwrap().name.as_deref(), Some("d"));
}

/// Events are validated as the API server validates them: the legacy rules for both APIs, the
/// stricter ones for `events.k8s.io/v1` writes, with the field causes of a 422.
#[tokio::test]
async fn events_are_validated_as_the_api_server_validates_them() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("events").await;
    let events: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &namespace,
        &kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("events.k8s.io", "v1", "Event"),
            "events",
        ),
    );
    let core: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &namespace,
        &kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("", "v1", "Event"),
            "events",
        ),
    );
    let new_event = |name: &str, extra: Value| {
        let mut event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name}, "eventTime": "2025-01-01T00:00:00.000000Z",
            "reportingController": "nauthera-reconciler", "reportingInstance": "pod-1",
            "action": "Reconcile", "reason": "Registered", "type": "Normal", "note": "registered",
            "regarding": {"kind": "ConfigMap", "name": "c", "namespace": namespace}});
        if let (Some(event), Some(extra)) = (event.as_object_mut(), extra.as_object()) {
            event.extend(extra.clone());
        }
        serde_json::from_value::<DynamicObject>(event).unwrap()
    };
    let causes = |status: kube::core::Status| -> Vec<(String, String)> {
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        status
            .details
            .unwrap()
            .causes
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect()
    };
    let qualified = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    // A reporting controller with a space, or longer than 63 characters; a reporting instance
    // over 128; a type the API does not know; deprecated fields set.
    let refused = events
        .create(
            &PostParams::default(),
            &new_event(
                "bad",
                json!({"reportingController": "nauthera reconciler", "reportingInstance": "i".repeat(129),
                    "type": "Info", "deprecatedCount": 2, "series": {"count": 1}}),
            ),
        )
        .await
        .unwrap_err();
    let status = status_of(refused);
    assert!(
        status.message.starts_with("Event \"bad\" is invalid: ["),
        "{}",
        status.message
    );
    assert_eq!(
        causes(status),
        [
            (
                "reportingController".into(),
                format!("Invalid value: \"nauthera reconciler\": name part {qualified}")
            ),
            (
                "reportingInstance".into(),
                "Invalid value: \"\": can have at most 128 characters".into()
            ),
            (
                "series.count".into(),
                "Invalid value: \"\": should be at least 2".into()
            ),
            ("series.lastObservedTime".into(), "Required value".into()),
            (
                "type".into(),
                "Invalid value: \"\": has invalid value: Info".into()
            ),
            (
                "count".into(),
                "Invalid value: \"\": needs to be unset".into()
            ),
        ]
    );
    let long = "c".repeat(64);
    let refused = events
        .create(
            &PostParams::default(),
            &new_event("long", json!({"reportingController": long})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        causes(status_of(refused)),
        [(
            "reportingController".into(),
            format!("Invalid value: \"{long}\": name part must be no more than 63 characters")
        )]
    );
    // An event about a cluster-scoped object belongs in default (or kube-system).
    let refused = events
        .create(
            &PostParams::default(),
            &new_event(
                "cluster",
                json!({"regarding": {"kind": "Namespace", "name": "x"}}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(
        causes(status_of(refused)),
        [(
            "involvedObject.namespace".into(),
            "Invalid value: \"\": does not match event.namespace".into()
        )]
    );

    // Through the core API a new-style event needs the same, named as core names it; an
    // old-style one only needs its namespaces to agree.
    let refused = core
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "core-new"}, "eventTime": "2025-01-01T00:00:00.000000Z",
                "reason": "R", "action": "A", "reportingInstance": "i",
                "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": namespace}}))
            .unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        causes(status_of(refused)),
        [
            ("reportingComponent".into(), "Required value".into()),
            (
                "reportingComponent".into(),
                "Invalid value: \"\": name part must be non-empty".into()
            ),
            (
                "reportingComponent".into(),
                format!("Invalid value: \"\": name part {qualified}")
            ),
        ]
    );
    let refused = core
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "core-old"}, "reason": "R",
                "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "elsewhere"}}))
            .unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        causes(status_of(refused)),
        [(
            "involvedObject.namespace".into(),
            "Invalid value: \"elsewhere\": does not match event.namespace".into()
        )]
    );

    // A valid event; its series may grow, but through events.k8s.io what it recorded stays
    // (the core API allows the change).
    events
        .create(&PostParams::default(), &new_event("good", json!({})))
        .await
        .unwrap();
    let stored = core.get("good").await.unwrap();
    assert_eq!(stored.data["reportingComponent"], "nauthera-reconciler");
    assert_eq!(stored.data["source"], json!({}));
    assert!(stored.data["firstTimestamp"].is_null());
    let repeated = events
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"series": {"count": 2, "lastObservedTime": "2025-01-01T00:00:05.000000Z"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(repeated.data["series"]["count"], 2);
    let refused = events
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({"reason": "Other"})),
        )
        .await
        .unwrap_err();
    let status = status_of(refused);
    // The API server checks the reason twice: two causes, one line of the message.
    assert_eq!(
        status.message,
        "Event \"good\" is invalid: reason: Invalid value: \"Other\": field is immutable"
    );
    assert_eq!(
        causes(status),
        [
            (
                "reason".into(),
                "Invalid value: \"Other\": field is immutable".into()
            ),
            (
                "reason".into(),
                "Invalid value: \"Other\": field is immutable".into()
            ),
        ]
    );
    core.patch(
        "good",
        &PatchParams::default(),
        &Patch::Merge(json!({"reason": "Other"})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn namespace_deletion_removes_its_contents() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("nsdel").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    maps.create(&PostParams::default(), &config_map("inside", json!({})))
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
        .unwrap();
    eventually(|| async {
        namespaces
            .get_opt(&namespace)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let refused = maps
        .create(&PostParams::default(), &config_map("late", json!({})))
        .await
        .unwrap_err();
    assert_eq!(status_of(refused).code, 404);
}

/// Every namespace carries `kubernetes.io/metadata.name` with its name, set by the API server
/// on every write: a client can neither change nor remove it.
#[tokio::test]
async fn namespaces_carry_their_name_as_a_label_that_stays() {
    let cluster = Cluster::start().await;
    let name_label = "kubernetes.io/metadata.name";
    let namespace = cluster.namespace("nslabel").await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let created = namespaces.get(&namespace).await.unwrap();
    assert_eq!(created.labels()[name_label], namespace);
    assert_eq!(
        created.spec.unwrap().finalizers.unwrap(),
        ["kubernetes"],
        "the kubernetes finalizer"
    );
    let changed = namespaces
        .patch(
            &namespace,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {name_label: "other", "team": "a"}}})),
        )
        .await
        .unwrap();
    assert_eq!(changed.labels()[name_label], namespace);
    assert_eq!(changed.labels()["team"], "a");
    let removed = namespaces
        .patch(
            &namespace,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {name_label: null}}})),
        )
        .await
        .unwrap();
    assert_eq!(removed.labels()[name_label], namespace);
    // Selecting a namespace by its name label finds it, and only it.
    let selected = namespaces
        .list(&ListParams::default().labels(&format!("{name_label}={namespace}")))
        .await
        .unwrap();
    let names: Vec<String> = selected.items.iter().map(|n| n.name_any()).collect();
    assert_eq!(names, [namespace.as_str()]);
    // Seeded namespaces have it too.
    let default = namespaces.get("default").await.unwrap();
    assert_eq!(default.labels()[name_label], "default");
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_its_api() {
    let cluster = Cluster::start().await;
    let (group, _ns, api) = widgets(&cluster, "crddel").await;
    api.create(
        &PostParams::default(),
        &widget(&group, "x", json!({"size": 1})),
    )
    .await
    .unwrap();
    let crds: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &crd_resource());
    crds.delete(&format!("widgets.{group}"), &DeleteParams::default())
        .await
        .unwrap();
    eventually(|| async {
        api.list(&ListParams::default())
            .await
            .is_err()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn dry_run_writes_nothing() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("dry").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answer = maps
        .create(&params, &config_map("dry", json!({"k": "v"})))
        .await
        .unwrap();
    assert_eq!(answer.name_any(), "dry");
    assert!(maps.get_opt("dry").await.unwrap().is_none());
}

#[tokio::test]
async fn resources_of_crd_kind_resource_trait() {
    // Guards the test helpers themselves: the widget ApiResource matches the CRD.
    let resource = widget_resource("g.example.com");
    assert_eq!(resource.api_version, "g.example.com/v1");
    assert_eq!(<ConfigMap as Resource>::plural(&()), "configmaps");
}

#[tokio::test]
async fn metadata_only_lists_and_watches_carry_no_data() {
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("metadata").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &namespace);
    maps.create(
        &PostParams::default(),
        &config_map("one", json!({"secret-ish": "value"})),
    )
    .await
    .unwrap();
    let listed = maps.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata.name.as_deref(), Some("one"));
    let one = maps.get_metadata("one").await.unwrap();
    assert_eq!(one.types.as_ref().unwrap().kind, "PartialObjectMetadata");

    let mut watch = maps
        .watch_metadata(
            &WatchParams::default(),
            &listed.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    maps.create(
        &PostParams::default(),
        &config_map("two", json!({"k": "v"})),
    )
    .await
    .unwrap();
    match watch.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(partial) => {
            assert_eq!(partial.metadata.name.as_deref(), Some("two"));
            assert_eq!(partial.types.unwrap().kind, "PartialObjectMetadata");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn scale_subresource_reads_and_writes_replicas() {
    use k8s_openapi::api::autoscaling::v1::Scale;
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("scale").await;
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), &namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let scale = deployments.get_scale("d").await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(
        scale.status.as_ref().unwrap().selector.as_deref(),
        Some("app=d")
    );
    assert_eq!(scale.metadata.name.as_deref(), Some("d"));

    let patched = deployments
        .patch_scale(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(4));
    let live = deployments.get("d").await.unwrap();
    assert_eq!(live.spec.unwrap().replicas, Some(4));
    assert_eq!(live.metadata.generation, Some(2));
    assert_eq!(
        patched.metadata.resource_version,
        live.metadata.resource_version
    );

    // A replace carries the Scale's resourceVersion as a precondition.
    let mut stale = scale.clone();
    stale.spec.as_mut().unwrap().replicas = Some(1);
    let conflict = deployments
        .replace_scale("d", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(status_of(conflict).code, 409);
    let current = deployments.get_scale("d").await.unwrap();
    let mut wanted = current.clone();
    wanted.spec.as_mut().unwrap().replicas = Some(1);
    let replaced: Scale = deployments
        .replace_scale("d", &PostParams::default(), &wanted)
        .await
        .unwrap();
    assert_eq!(replaced.spec.unwrap().replicas, Some(1));
    let negative = deployments
        .patch_scale(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_of(negative).code, 422);
    let scaled_by = deployments
        .get("d")
        .await
        .unwrap()
        .metadata
        .managed_fields
        .unwrap();
    assert!(
        scaled_by
            .iter()
            .any(|entry| entry.subresource.as_deref() == Some("scale")),
        "{scaled_by:?}"
    );

    // Discovery names the subresource and its kind.
    let apps = cluster
        .client
        .list_api_group_resources("apps/v1")
        .await
        .unwrap();
    let entry = apps
        .resources
        .iter()
        .find(|r| r.name == "deployments/scale")
        .unwrap();
    assert_eq!(
        (
            entry.group.as_deref(),
            entry.version.as_deref(),
            entry.kind.as_str()
        ),
        (Some("autoscaling"), Some("v1"), "Scale")
    );
}

#[tokio::test]
async fn custom_resources_declare_a_scale_subresource() {
    let cluster = Cluster::start().await;
    let group = test_group("crdscale");
    let mut crd = widget_crd(&group);
    crd["spec"]["versions"][0]["subresources"]["scale"] = json!({
        "specReplicasPath": ".spec.size",
        "statusReplicasPath": ".status.observedGeneration",
        "labelSelectorPath": ".status.phase"
    });
    cluster.install_crd(crd).await;
    let namespace = cluster.namespace("crdscale").await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &namespace, &widget_resource(&group));
    widgets
        .create(
            &PostParams::default(),
            &widget(&group, "w", json!({"size": 2})),
        )
        .await
        .unwrap();
    widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": 1, "phase": "app=w"}})),
        )
        .await
        .unwrap();
    let scale = widgets.get_scale("w").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    let status = scale.status.unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (1, Some("app=w"))
    );
    widgets
        .patch_scale(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(widgets.get("w").await.unwrap().data["spec"]["size"], 5);
}

#[tokio::test]
async fn token_requests_mint_tokens_that_authenticate_as_the_account() {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let cluster = Cluster::start().await;
    let namespace = cluster.namespace("tokens").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), &namespace);
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "bot"}})).unwrap(),
        )
        .await
        .unwrap();
    let request = |spec: Value| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let issued: Value = accounts
        .create_subresource(
            "token",
            "bot",
            &PostParams::default(),
            &request(json!({"expirationSeconds": 1200})),
        )
        .await
        .unwrap();
    assert_eq!(issued["kind"], "TokenRequest");
    assert_eq!(issued["spec"]["expirationSeconds"], 1200);
    assert!(
        !issued["spec"]["audiences"].as_array().unwrap().is_empty(),
        "the API's audience is the default"
    );
    let expires: jiff::Timestamp = issued["status"]["expirationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let lifetime = expires.as_second() - jiff::Timestamp::now().as_second();
    assert!((1100..=1200).contains(&lifetime), "{lifetime}");

    let bot = cluster.client_with_token(issued["status"]["token"].as_str().unwrap());
    let review = Api::<SelfSubjectReview>::all(bot.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({})).unwrap(),
        )
        .await
        .unwrap();
    let user = review.status.unwrap().user_info.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some(format!("system:serviceaccount:{namespace}:bot").as_str())
    );
    let groups = user.groups.unwrap();
    for group in [
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_owned(),
    ] {
        assert!(groups.contains(&group), "{groups:?}");
    }

    let short = accounts
        .create_subresource::<Value, Value>(
            "token",
            "bot",
            &PostParams::default(),
            &request(json!({"expirationSeconds": 60})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_of(short).code, 422);
    let missing = accounts
        .create_subresource::<Value, Value>(
            "token",
            "nobody",
            &PostParams::default(),
            &request(json!({})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_of(missing).code, 404);

    // Deleting the account ends its tokens.
    accounts
        .delete("bot", &DeleteParams::default())
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(bot, &namespace);
    eventually(|| async {
        match configmaps.list(&ListParams::default()).await {
            Err(kube::Error::Api(status)) if status.code == 401 => Some(()),
            _ => None,
        }
    })
    .await;
}
