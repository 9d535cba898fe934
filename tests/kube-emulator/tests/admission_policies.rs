//! ValidatingAdmissionPolicies over real sockets: kube-rs for the API and real kubectl for what
//! users see. Every test has its own emulator (policies are cluster-wide).
//!
//! As on a real API server, a policy or binding is in force a moment after it is written (the
//! server loads them through informers, about once a second): tests wait for enforcement by
//! trying a server-side dry run of a write the policy refuses until it is refused
//! ([`until_refused`]), and for a lifted policy until the write is admitted ([`until_admitted`]).

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use nauthera_kube_emulator::Emulator;
use serde_json::{Value, json};

const GROUP: &str = "admissionregistration.k8s.io";

async fn client_for(emulator: &Emulator, token: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(&emulator.kubeconfig(token, "default")).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// An emulator, a superuser client and a namespace `team` (labelled `env: prod`).
async fn start() -> (Emulator, Client) {
    let emulator = Emulator::start().await.unwrap();
    let client = client_for(&emulator, emulator.superuser_token()).await;
    namespace(&client, "team", json!({"env": "prod"})).await;
    (emulator, client)
}

async fn namespace(client: &Client, name: &str, labels: Value) {
    let namespaces: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("", "Namespace", "namespaces"));
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(namespace).unwrap(),
        )
        .await
        .unwrap();
}

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

fn policies(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource(
            GROUP,
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
        ),
    )
}

fn bindings(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource(
            GROUP,
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    )
}

/// Rules for ConfigMaps on create and update.
fn configmap_rules() -> Value {
    json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]})
}

async fn create_policy(client: &Client, name: &str, spec: Value) -> DynamicObject {
    let policy = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec});
    policies(client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(policy).unwrap(),
        )
        .await
        .unwrap()
}

/// Binds a policy (the binding has the policy's name) with actions and extra spec fields.
async fn bind(client: &Client, policy: &str, actions: &[&str], extra: Value) {
    let mut spec = json!({"policyName": policy, "validationActions": actions});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let binding = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy}, "spec": spec});
    bindings(client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).unwrap(),
        )
        .await
        .unwrap();
}

fn configmap(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
}

async fn create_configmap(
    client: &Client,
    namespace: &str,
    name: &str,
    data: Value,
) -> Result<ConfigMap, kube::core::Status> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    configmaps
        .create(&PostParams::default(), &configmap(name, data))
        .await
        .map_err(status_of)
}

/// Tries a server-side dry-run create of `object` until the policies in force refuse it (for
/// at most ten seconds), and returns the refusal.
async fn until_refused<K>(api: &Api<K>, object: &K) -> kube::core::Status
where
    K: Resource + Clone + Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match api.create(&dry_run, object).await {
            Err(kube::Error::Api(status)) => return *status,
            Err(other) => panic!("a dry run failed: {other:?}"),
            Ok(_) => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the policy was not enforced within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Tries a server-side dry-run create of `object` until it is admitted (for at most ten
/// seconds): a policy changed or unbound stops refusing a moment later.
async fn until_admitted<K>(api: &Api<K>, object: &K)
where
    K: Resource + Clone + Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while let Err(error) = api.create(&dry_run, object).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still refused after 10 s: {error}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Repeats a dry-run `attempt` until the policies in force refuse it (for at most ten seconds),
/// and returns the refusal: `until_refused` for writes other than creates.
async fn until_attempt_refused<T, F, Fut>(mut attempt: F) -> kube::core::Status
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match attempt().await {
            Err(kube::Error::Api(status)) => return *status,
            Err(other) => panic!("a dry run failed: {other:?}"),
            Ok(_) => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the policy was not enforced within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `until_refused` for a ConfigMap in `namespace`.
async fn configmap_refused(
    client: &Client,
    namespace: &str,
    name: &str,
    data: Value,
) -> kube::core::Status {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    until_refused(&configmaps, &configmap(name, data)).await
}

/// `until_admitted` for a ConfigMap in `namespace`.
async fn configmap_admitted(client: &Client, namespace: &str, name: &str, data: Value) {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    until_admitted(&configmaps, &configmap(name, data)).await
}

/// Polls a policy until its status shows the generation (the controller manager's status
/// controller writes it a moment after each change).
async fn observed(client: &Client, name: &str, generation: i64) -> DynamicObject {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let policy = policies(client).get(name).await.unwrap();
        if policy.data["status"]["observedGeneration"] == generation {
            return policy;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "status.observedGeneration never became {generation}: {:?}",
            policy.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn status_of(error: kube::Error) -> kube::core::Status {
    match error {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_policy_denies_with_its_message_the_way_the_api_server_does() {
    let (_emulator, client) = start().await;
    let mut spec = json!({"matchConstraints": configmap_rules(), "validations": [
        {"expression": "object.data.all(k, size(object.data[k]) < 10)", "message": "values are short"},
        {"expression": "!('forbidden' in object.data)"}
    ]});
    create_policy(&client, "short-values", spec.clone()).await;
    bind(&client, "short-values", &["Deny"], json!({})).await;

    // The superuser is held to policies too: they are not RBAC. A moment after the binding is
    // written, as on any API server.
    configmap_refused(&client, "team", "big", json!({"k": "a very long value"})).await;
    let status = create_configmap(&client, "team", "big", json!({"k": "a very long value"}))
        .await
        .unwrap_err();
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let denial = "ValidatingAdmissionPolicy 'short-values' with binding 'short-values' denied request: values are short";
    assert_eq!(
        status.message,
        format!("configmaps \"big\" is forbidden: {denial}")
    );
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("big", "configmaps")
    );
    assert_eq!(details.causes.len(), 1);
    assert_eq!(
        (
            details.causes[0].message.as_str(),
            details.causes[0].field.as_str()
        ),
        (denial, "")
    );

    // Without a message: the expression.
    let status = create_configmap(&client, "team", "f", json!({"forbidden": "x"}))
        .await
        .unwrap_err();
    assert!(
        status
            .message
            .ends_with("denied request: failed expression: !('forbidden' in object.data)"),
        "{}",
        status.message
    );
    create_configmap(&client, "team", "small", json!({"k": "short"}))
        .await
        .unwrap();

    // Updates are checked too.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let update = configmaps
        .patch(
            "small",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "now far too long"}})),
        )
        .await;
    assert!(
        status_of(update.unwrap_err())
            .message
            .contains("values are short")
    );

    // Policies are listed and, a moment after they are written, have a status: the generation
    // type-checked (nothing to report for ConfigMaps, whose schema the emulator lacks).
    let listed = policies(&client).list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data["spec"]["failurePolicy"], "Fail");
    let policy = observed(&client, "short-values", 1).await;
    assert_eq!(policy.data["status"]["typeChecking"], json!({}));
    // Which is the reason a policy binding could not be written without one.
    spec["validations"] = json!([]);
    let refused = policies(&client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "empty"}, "spec": spec}),
            )
            .unwrap(),
        )
        .await;
    let status = status_of(refused.unwrap_err());
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("spec.validations: Required value: validations or auditAnnotations must contain at least one item"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn message_expressions_and_reasons_decide_what_the_client_gets() {
    let (_emulator, client) = start().await;
    create_policy(
        &client,
        "few-keys",
        json!({"matchConstraints": configmap_rules(), "validations": [
            {"expression": "size(object.data) <= 1", "reason": "Forbidden",
             "messageExpression": "'at most one key, not ' + string(size(object.data))"}
        ]}),
    )
    .await;
    bind(&client, "few-keys", &["Deny"], json!({})).await;
    configmap_refused(&client, "team", "many", json!({"a": "1", "b": "2"})).await;
    let status = create_configmap(&client, "team", "many", json!({"a": "1", "b": "2"}))
        .await
        .unwrap_err();
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert!(
        status
            .message
            .ends_with("denied request: at most one key, not 2"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn warn_sends_a_warning_header_and_stores_the_object() {
    let (_emulator, client) = start().await;
    create_policy(&client, "labelled", json!({"matchConstraints": configmap_rules(), "validations": [
        {"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels", "message": "label your ConfigMaps"}
    ]}))
    .await;
    bind(&client, "labelled", &["Warn", "Audit"], json!({})).await;
    let create = |query: &str| {
        let body = serde_json::to_vec(&json!({"metadata": {"name": "bare"}, "data": {}})).unwrap();
        let request = http::Request::post(format!("/api/v1/namespaces/team/configmaps{query}"))
            .header("Content-Type", "application/json")
            .body(kube::client::Body::from(body))
            .unwrap();
        let client = client.clone();
        async move {
            let response = client.send(request).await.unwrap();
            assert_eq!(response.status(), 201);
            let warnings: Vec<String> = response
                .headers()
                .get_all("Warning")
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_owned))
                .collect();
            warnings
        }
    };
    // A moment after the binding is written, dry runs start to warn.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while create("?dryRun=All").await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no warning within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let warnings = create("").await;
    assert_eq!(
        warnings,
        [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'labelled' with binding 'labelled': label your ConfigMaps\""
        ]
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    configmaps.get("bare").await.unwrap();
}

#[tokio::test]
async fn namespace_selectors_match_the_labels_of_the_namespace() {
    let (_emulator, client) = start().await;
    namespace(&client, "sandbox", json!({"env": "dev"})).await;
    let mut constraints = configmap_rules();
    constraints["namespaceSelector"] =
        json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]});
    create_policy(
        &client,
        "frozen-prod",
        json!({"matchConstraints": constraints, "validations": [
            {"expression": "false", "message": "prod is frozen"}
        ]}),
    )
    .await;
    bind(&client, "frozen-prod", &["Deny"], json!({})).await;
    configmap_refused(&client, "team", "c", json!({})).await;
    let status = create_configmap(&client, "team", "c", json!({}))
        .await
        .unwrap_err();
    assert!(status.message.contains("prod is frozen"));
    create_configmap(&client, "sandbox", "c", json!({}))
        .await
        .unwrap();

    // A binding narrows what its policy matches, with the same selectors.
    create_policy(
        &client,
        "no-x",
        json!({"matchConstraints": configmap_rules(), "validations": [
            {"expression": "!object.metadata.name.startsWith('x')", "message": "no x"}
        ]}),
    )
    .await;
    bind(
        &client,
        "no-x",
        &["Deny"],
        json!({"matchResources": {"namespaceSelector": {"matchLabels": {"env": "dev"}}}}),
    )
    .await;
    configmap_refused(&client, "sandbox", "x1", json!({})).await;
    let status = create_configmap(&client, "sandbox", "x1", json!({}))
        .await
        .unwrap_err();
    assert!(status.message.contains("no x"));
    // In `team` the other policy refuses anyway, for its own reason.
    let status = create_configmap(&client, "team", "x1", json!({}))
        .await
        .unwrap_err();
    assert!(status.message.contains("prod is frozen") && !status.message.contains("no x"));
}

#[tokio::test]
async fn match_conditions_and_variables_shape_what_is_checked() {
    let (_emulator, client) = start().await;
    create_policy(&client, "checked", json!({
        "matchConstraints": configmap_rules(),
        "matchConditions": [{"name": "only-checked", "expression": "object.metadata.name.startsWith('checked-')"}],
        "variables": [{"name": "keys", "expression": "object.data.map(k, k)"}, {"name": "count", "expression": "size(variables.keys)"}],
        "validations": [{"expression": "variables.count <= 1", "messageExpression": "'keys: ' + variables.keys.sort().join(',')"}]
    }))
    .await;
    bind(&client, "checked", &["Deny"], json!({})).await;
    let two = json!({"a": "1", "b": "2"});
    configmap_refused(&client, "team", "checked-1", two.clone()).await;
    create_configmap(&client, "team", "unchecked", two.clone())
        .await
        .unwrap();
    let status = create_configmap(&client, "team", "checked-1", two)
        .await
        .unwrap_err();
    assert!(
        status.message.ends_with("denied request: keys: a,b"),
        "{}",
        status.message
    );
    create_configmap(&client, "team", "checked-2", json!({"a": "1"}))
        .await
        .unwrap();
}

#[tokio::test]
async fn expressions_that_fail_follow_the_failure_policy() {
    let (_emulator, client) = start().await;
    // What does not compile is refused with the policy, as the API server refuses it.
    let refused = policies(&client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "broken"}, "spec": {"matchConstraints": configmap_rules(),
                    "validations": [{"expression": "object.data =="}]}}),
            )
            .unwrap(),
        )
        .await;
    let status = status_of(refused.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.starts_with(
            "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"broken\" is invalid: spec.validations[0].expression: Invalid value: \"object.data ==\": compilation failed: ERROR: <input>:1:15: Syntax error"
        ),
        "{}",
        status.message
    );

    // `authorizer` is accepted as the API server accepts it, but the emulator cannot evaluate
    // it: with failurePolicy Fail every matching request is refused, saying so.
    let authorizer = "authorizer.group('').resource('configmaps').check('delete').allowed()";
    create_policy(
        &client,
        "authz",
        json!({"matchConstraints": configmap_rules(),
        "validations": [{"expression": authorizer}]}),
    )
    .await;
    bind(&client, "authz", &["Deny"], json!({})).await;
    configmap_refused(&client, "team", "a", json!({})).await;
    let status = create_configmap(&client, "team", "a", json!({}))
        .await
        .unwrap_err();
    assert_eq!(status.code, 422);
    assert!(
        status.message.starts_with(
            "configmaps \"a\" is forbidden: ValidatingAdmissionPolicy 'authz' with binding 'authz' denied request: compilation error: compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer'"
        ),
        "{}",
        status.message
    );
    // With Ignore it is skipped (replace the policy: a new revision compiles again), a moment
    // later.
    let mut policy = policies(&client).get("authz").await.unwrap();
    policy.data["spec"]["failurePolicy"] = json!("Ignore");
    policies(&client)
        .replace("authz", &PostParams::default(), &policy)
        .await
        .unwrap();
    configmap_admitted(&client, "team", "a", json!({})).await;
    create_configmap(&client, "team", "a", json!({}))
        .await
        .unwrap();

    // Evaluation errors likewise.
    create_policy(
        &client,
        "strict",
        json!({"matchConstraints": configmap_rules(),
        "validations": [{"expression": "object.data.mode == 'x'"}]}),
    )
    .await;
    bind(&client, "strict", &["Deny"], json!({})).await;
    configmap_refused(&client, "team", "b", json!({})).await;
    let status = create_configmap(&client, "team", "b", json!({}))
        .await
        .unwrap_err();
    assert!(
        status.message.ends_with("denied request: expression 'object.data.mode == 'x'' resulted in error: no such key: mode"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn a_policy_is_recompiled_when_it_changes() {
    let (_emulator, client) = start().await;
    create_policy(
        &client,
        "toggle",
        json!({"matchConstraints": configmap_rules(),
        "validations": [{"expression": "false", "message": "closed"}]}),
    )
    .await;
    bind(&client, "toggle", &["Deny"], json!({})).await;
    assert!(
        configmap_refused(&client, "team", "a", json!({}))
            .await
            .message
            .contains("closed")
    );
    policies(&client)
        .patch(
            "toggle",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"validations": [{"expression": "true"}]}})),
        )
        .await
        .unwrap();
    // The new revision is in force a moment later, and the status follows it.
    configmap_admitted(&client, "team", "a", json!({})).await;
    create_configmap(&client, "team", "a", json!({}))
        .await
        .unwrap();
    observed(&client, "toggle", 2).await;
}

const WIDGETS: &str = "widgets.policies.example.com";

/// A Widget CRD with a status subresource.
async fn widgets(client: &Client) -> Api<DynamicObject> {
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": WIDGETS},
        "spec": {"group": "policies.example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}});
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let gvk = GroupVersionKind::gvk("policies.example.com", "v1", "Widget");
    Api::namespaced_with(
        client.clone(),
        "team",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    )
}

fn widget_rules(resources: &[&str]) -> Value {
    json!({"resourceRules": [{"apiGroups": ["policies.example.com"], "apiVersions": ["*"],
        "operations": ["CREATE", "UPDATE"], "resources": resources}]})
}

#[tokio::test]
async fn custom_resources_and_their_status_subresource_are_matched_apart() {
    let (_emulator, client) = start().await;
    let widgets = widgets(&client).await;
    create_policy(
        &client,
        "small-widgets",
        json!({"matchConstraints": widget_rules(&["widgets"]),
        "validations": [{"expression": "object.spec.size < 10", "message": "widgets are small"}]}),
    )
    .await;
    bind(&client, "small-widgets", &["Deny"], json!({})).await;
    let widget = |size: i64| {
        serde_json::from_value::<DynamicObject>(
            json!({"apiVersion": "policies.example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "spec": {"size": size}}),
        )
        .unwrap()
    };
    until_refused(&widgets, &widget(20)).await;
    let status = status_of(
        widgets
            .create(&PostParams::default(), &widget(20))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status.message,
        "widgets.policies.example.com \"w\" is forbidden: ValidatingAdmissionPolicy 'small-widgets' with binding 'small-widgets' denied request: widgets are small"
    );
    widgets
        .create(&PostParams::default(), &widget(5))
        .await
        .unwrap();

    // A rule naming only `widgets` does not see `widgets/status` writes.
    create_policy(
        &client,
        "frozen-main",
        json!({"matchConstraints": widget_rules(&["widgets"]),
        "matchConditions": [{"name": "updates", "expression": "request.operation == 'UPDATE'"}],
        "validations": [{"expression": "false", "message": "the main resource is frozen"}]}),
    )
    .await;
    bind(&client, "frozen-main", &["Deny"], json!({})).await;
    let dry_run = PatchParams::default().dry_run();
    let grow = Patch::Merge(json!({"spec": {"size": 6}}));
    until_attempt_refused(|| widgets.patch("w", &dry_run, &grow)).await;
    let status_patch = Patch::Merge(json!({"status": {"phase": "Ready"}}));
    widgets
        .patch_status("w", &PatchParams::default(), &status_patch)
        .await
        .unwrap();
    let main = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 6}})),
        )
        .await;
    assert!(
        status_of(main.unwrap_err())
            .message
            .contains("the main resource is frozen")
    );

    // One naming `widgets/status` does, and sees the subresource in the request.
    create_policy(&client, "status-rules", json!({"matchConstraints": widget_rules(&["widgets/status"]),
        "validations": [{"expression": "request.subResource == 'status' && object.status.phase != 'Broken'",
            "message": "no broken widgets"}]}))
    .await;
    bind(&client, "status-rules", &["Deny"], json!({})).await;
    let break_it = Patch::Merge(json!({"status": {"phase": "Broken"}}));
    until_attempt_refused(|| widgets.patch_status("w", &dry_run, &break_it)).await;
    let broken = widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Broken"}})),
        )
        .await;
    let status = status_of(broken.unwrap_err());
    assert!(
        status
            .message
            .starts_with("widgets.policies.example.com \"w\" is forbidden"),
        "{}",
        status.message
    );
    assert!(status.message.contains("no broken widgets"));
}

#[tokio::test]
async fn delete_is_checked_against_the_stored_object() {
    let (_emulator, client) = start().await;
    create_policy(&client, "keep", json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["DELETE"], "resources": ["configmaps"]}]},
        "validations": [{"expression": "object == null && oldObject.metadata.name != 'keep'", "message": "keep stays"}]
    }))
    .await;
    bind(&client, "keep", &["Deny"], json!({})).await;
    create_configmap(&client, "team", "keep", json!({}))
        .await
        .unwrap();
    create_configmap(&client, "team", "drop", json!({}))
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    until_attempt_refused(|| configmaps.delete("keep", &dry_run)).await;
    let status = status_of(
        configmaps
            .delete("keep", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status.message,
        "configmaps \"keep\" is forbidden: ValidatingAdmissionPolicy 'keep' with binding 'keep' denied request: keep stays"
    );
    configmaps
        .delete("drop", &DeleteParams::default())
        .await
        .unwrap();
    configmaps.get("keep").await.unwrap();
    // Deleting a collection is one delete per object.
    let collection = configmaps
        .delete_collection(&DeleteParams::default(), &Default::default())
        .await;
    assert!(
        status_of(collection.unwrap_err())
            .message
            .contains("keep stays")
    );
}

#[tokio::test]
async fn request_user_info_names_who_asks() {
    let (emulator, client) = start().await;
    let rbac = "rbac.authorization.k8s.io";
    let role: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "team",
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(rbac, "v1", "Role"), "roles"),
    );
    role.create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": format!("{rbac}/v1"), "kind": "Role",
        "metadata": {"name": "configmaps"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]})).unwrap())
        .await
        .unwrap();
    let binding: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "team",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(rbac, "v1", "RoleBinding"),
            "rolebindings",
        ),
    );
    binding.create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": format!("{rbac}/v1"), "kind": "RoleBinding",
        "metadata": {"name": "devs"}, "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "configmaps"},
        "subjects": [{"apiGroup": rbac, "kind": "Group", "name": "devs"}]})).unwrap())
        .await
        .unwrap();
    create_policy(&client, "own-names", json!({"matchConstraints": configmap_rules(), "validations": [{
        "expression": "!('devs' in request.userInfo.groups) || object.metadata.name.startsWith(request.userInfo.username + '-')",
        "messageExpression": "request.userInfo.username + ' may only create ' + request.userInfo.username + '-* in ' + request.namespace"
    }]}))
    .await;
    bind(&client, "own-names", &["Deny"], json!({})).await;
    let alice = client_for(&emulator, &emulator.token_for_user("alice", &["devs"])).await;
    configmap_refused(&alice, "team", "shared", json!({})).await;
    let status = create_configmap(&alice, "team", "shared", json!({}))
        .await
        .unwrap_err();
    assert!(
        status
            .message
            .ends_with("denied request: alice may only create alice-* in team"),
        "{}",
        status.message
    );
    create_configmap(&alice, "team", "alice-notes", json!({}))
        .await
        .unwrap();
    create_configmap(&client, "team", "shared", json!({}))
        .await
        .unwrap();
}

#[tokio::test]
async fn params_come_from_the_object_the_binding_names() {
    let (_emulator, client) = start().await;
    create_policy(
        &client,
        "limited",
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["secrets"]}]},
            "validations": [{"expression": "size(object.data) <= int(params.data.max)",
                "messageExpression": "'at most ' + params.data.max + ' keys'"}]
        }),
    )
    .await;
    bind(
        &client,
        "limited",
        &["Deny"],
        json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}),
    )
    .await;
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "team", &resource("", "Secret", "secrets"));
    let secret = |name: &str| {
        serde_json::from_value::<DynamicObject>(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name}, "stringData": {"a": "1", "b": "2"}}))
        .unwrap()
    };
    until_refused(&secrets, &secret("s")).await;
    let missing = status_of(
        secrets
            .create(&PostParams::default(), &secret("s"))
            .await
            .unwrap_err(),
    );
    assert!(
        missing.message.ends_with(
            "denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        ),
        "{}",
        missing.message
    );
    create_configmap(&client, "team", "limits", json!({"max": "1"}))
        .await
        .unwrap();
    // Parameters come through an informer too: a moment later.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !status_of(secrets.create(&dry_run, &secret("s")).await.unwrap_err())
        .message
        .ends_with("at most 1 keys")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the parameters were never read"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = status_of(
        secrets
            .create(&PostParams::default(), &secret("s"))
            .await
            .unwrap_err(),
    );
    assert!(
        status.message.ends_with("denied request: at most 1 keys"),
        "{}",
        status.message
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    configmaps
        .patch(
            "limits",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"max": "2"}})),
        )
        .await
        .unwrap();
    until_admitted(&secrets, &secret("s")).await;
    secrets
        .create(&PostParams::default(), &secret("s"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_policy_refusing_everything_cannot_lock_out_its_removal() {
    let (_emulator, client) = start().await;
    create_policy(
        &client,
        "nothing",
        json!({
            "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                "operations": ["*"], "resources": ["*", "*/*"]}]},
            "validations": [{"expression": "false", "message": "nothing goes"}]
        }),
    )
    .await;
    bind(&client, "nothing", &["Deny"], json!({})).await;
    configmap_refused(&client, "team", "a", json!({})).await;
    assert!(
        create_configmap(&client, "team", "a", json!({}))
            .await
            .unwrap_err()
            .message
            .contains("nothing goes")
    );
    // Admission configuration is exempt: the policy can be changed and removed.
    policies(&client)
        .patch(
            "nothing",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"fixing": "yes"}}})),
        )
        .await
        .unwrap();
    bindings(&client)
        .delete("nothing", &DeleteParams::default())
        .await
        .unwrap();
    // Unbound, it stops refusing a moment later.
    configmap_admitted(&client, "team", "a", json!({})).await;
    create_configmap(&client, "team", "a", json!({}))
        .await
        .unwrap();
}

/// A policy and its binding are put in force by the API server's refresh loop, a moment after
/// they are written; deleting the binding lifts the policy as late. (A refresh period of three
/// seconds here, to tell "not yet" apart from "at once" without a race.)
#[tokio::test]
async fn policies_are_loaded_into_force_a_moment_after_they_are_written() {
    let emulator = Emulator::start_with(nauthera_kube_emulator::Options {
        policy_refresh_interval: Duration::from_secs(3),
        ..Default::default()
    })
    .await
    .unwrap();
    let client = client_for(&emulator, emulator.superuser_token()).await;
    namespace(&client, "team", json!({})).await;
    create_policy(
        &client,
        "closed",
        json!({"matchConstraints": configmap_rules(),
        "validations": [{"expression": "false", "message": "closed"}]}),
    )
    .await;
    bind(&client, "closed", &["Deny"], json!({})).await;
    let written = tokio::time::Instant::now();
    // Not yet: what the loader loaded at start had no policy.
    create_configmap(&client, "team", "early", json!({}))
        .await
        .unwrap();
    let status = configmap_refused(&client, "team", "late", json!({})).await;
    assert!(
        status.message.ends_with("denied request: closed"),
        "{}",
        status.message
    );
    let waited = written.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "enforced after {waited:?}, before the next refresh"
    );
    bindings(&client)
        .delete("closed", &DeleteParams::default())
        .await
        .unwrap();
    // Still refused right after the binding is gone, then lifted.
    assert!(
        create_configmap(&client, "team", "right-after", json!({}))
            .await
            .is_err()
    );
    configmap_admitted(&client, "team", "lifted", json!({})).await;
}

/// The controller manager's status controller type-checks each new generation against the
/// schemas of the kinds the policy matches and reports what fails in
/// `status.typeChecking.expressionWarnings`, in the API server's words (checked against a real
/// kube-apiserver and kube-controller-manager 1.34); the policy is in force all the same.
#[tokio::test]
async fn type_checking_warnings_name_fields_the_schema_does_not_have() {
    let (_emulator, client) = start().await;
    let widgets = widgets(&client).await;
    // Only rules without wildcards name kinds to check.
    let mut rules = widget_rules(&["widgets"]);
    rules["resourceRules"][0]["apiVersions"] = json!(["v1"]);
    create_policy(
        &client,
        "typed",
        json!({"matchConstraints": rules,
        "validations": [
            {"expression": "object.spec.size < 10"},
            {"expression": "object.spec.nosuch == 1", "messageExpression": "'x' + object.status.bogus"},
            {"expression": "has(object.spec.missing) || object.metadata.name.size() > 1 || object.metadata.bad == 'x'"},
            {"expression": "object.spec.size.foo == 1"}
        ]}),
    )
    .await;
    let policy = observed(&client, "typed", 1).await;
    let warnings = policy.data["status"]["typeChecking"]["expressionWarnings"]
        .as_array()
        .unwrap()
        .clone();
    let found: Vec<(&str, &str)> = warnings
        .iter()
        .map(|w| {
            (
                w["fieldRef"].as_str().unwrap(),
                w["warning"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "spec.validations[1].expression",
                "policies.example.com/v1, Kind=Widget: ERROR: <input>:1:12: undefined field 'nosuch'\n | object.spec.nosuch == 1\n | ...........^\n"
            ),
            (
                "spec.validations[1].messageExpression",
                "policies.example.com/v1, Kind=Widget: ERROR: <input>:1:20: undefined field 'bogus'\n | 'x' + object.status.bogus\n | ...................^\n"
            ),
            (
                "spec.validations[2].expression",
                "policies.example.com/v1, Kind=Widget: ERROR: <input>:1:4: undefined field 'missing'\n | has(object.spec.missing) || object.metadata.name.size() > 1 || object.metadata.bad == 'x'\n | ...^\nERROR: <input>:1:79: undefined field 'bad'\n | has(object.spec.missing) || object.metadata.name.size() > 1 || object.metadata.bad == 'x'\n | ..............................................................................^\n"
            ),
            (
                "spec.validations[3].expression",
                "policies.example.com/v1, Kind=Widget: ERROR: <input>:1:17: type 'int' does not support field selection\n | object.spec.size.foo == 1\n | ................^\n"
            ),
        ]
    );
    // The status controller applies it as its own field manager, on the status subresource.
    let entries = policy.metadata.managed_fields.unwrap_or_default();
    assert!(
        entries.iter().any(|e| {
            e.manager.as_deref() == Some("validatingadmissionpolicy-status")
                && e.operation.as_deref() == Some("Apply")
                && e.subresource.as_deref() == Some("status")
        }),
        "{entries:?}"
    );
    // A warning refuses nothing: the policy is bound and in force as written.
    bind(&client, "typed", &["Deny"], json!({})).await;
    let widget =
        serde_json::from_value::<DynamicObject>(json!({"apiVersion": "policies.example.com/v1",
        "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 20}}))
        .unwrap();
    let status = until_refused(&widgets, &widget).await;
    assert!(
        status
            .message
            .ends_with("denied request: failed expression: object.spec.size < 10"),
        "{}",
        status.message
    );

    // Fixing the policy clears the warnings at the next generation.
    policies(&client)
        .patch(
            "typed",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"validations": [{"expression": "object.spec.size < 10"}]}}),
            ),
        )
        .await
        .unwrap();
    let fixed = observed(&client, "typed", 2).await;
    assert_eq!(fixed.data["status"]["typeChecking"], json!({}));
}

/// Writing a policy, `request`, `namespaceObject` and `variables` are typed: a field they do not
/// have is a compilation error, and the policy is refused (as kube-apiserver 1.34 refuses it).
#[tokio::test]
async fn fields_request_and_namespace_object_lack_refuse_the_policy() {
    let (_emulator, client) = start().await;
    let refused = policies(&client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": format!("{GROUP}/v1"),
                "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "typos"},
                "spec": {"matchConstraints": configmap_rules(),
                    "variables": [{"name": "n", "expression": "size(object.data)"}],
                    "validations": [
                        {"expression": "request.foo == 1 || request.userInfo.username == 'x'"},
                        {"expression": "namespaceObject.metadata.uid == 'x'"},
                        {"expression": "variables.n.foo == 1 || variables.m == 2"}]}}))
            .unwrap(),
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
    assert_eq!(
        causes,
        [
            (
                "spec.validations[0].expression".to_owned(),
                "Invalid value: \"request.foo == 1 || request.userInfo.username == 'x'\": compilation failed: ERROR: <input>:1:8: undefined field 'foo'\n | request.foo == 1 || request.userInfo.username == 'x'\n | .......^".to_owned()
            ),
            (
                "spec.validations[1].expression".to_owned(),
                "Invalid value: \"namespaceObject.metadata.uid == 'x'\": compilation failed: ERROR: <input>:1:25: undefined field 'uid'\n | namespaceObject.metadata.uid == 'x'\n | ........................^".to_owned()
            ),
            (
                "spec.validations[2].expression".to_owned(),
                "Invalid value: \"variables.n.foo == 1 || variables.m == 2\": compilation failed: ERROR: <input>:1:12: type 'int' does not support field selection\n | variables.n.foo == 1 || variables.m == 2\n | ...........^\nERROR: <input>:1:34: undefined field 'm'\n | variables.n.foo == 1 || variables.m == 2\n | .................................^".to_owned()
            ),
        ]
    );
}

/// A pattern of 200 alternatives (2,800 characters: each match costs a quarter of that per
/// tenth of the string) that also matches runs of `x`.
fn costly_pattern() -> String {
    let alternatives: Vec<String> = (0..200).map(|i| format!("abcdefghij{i:03}")).collect();
    format!("^({}|x+)$", alternatives.join("|"))
}

/// The API server's runtime cost limits (1,000,000 per expression, 10,000,000 for a binding's
/// expressions together): what goes over is an evaluation error, `failurePolicy` decides, and
/// the messages are the server's (checked against kube-apiserver 1.34 with the same policies
/// and objects).
#[tokio::test]
async fn expressions_over_the_cost_limits_are_errors_as_on_the_api_server() {
    let (_emulator, client) = start().await;
    let pattern = costly_pattern();
    let each = format!("object.data.all(k, k == 'check' || object.data[k].matches('{pattern}'))");
    create_policy(
        &client,
        "costly",
        json!({"matchConstraints": configmap_rules(),
            "variables": [{"name": "long", "expression": format!("object.data.filter(k, object.data[k].matches('{pattern}'))")}],
            "validations": [
                {"expression": format!("!('check' in object.data) || {each}"), "message": "m1"},
                {"expression": "!('var' in object.data) || size(variables.long) == 0", "message": "m2"}]}),
    )
    .await;
    bind(&client, "costly", &["Deny"], json!({})).await;
    let long = "x".repeat(10_000);
    let five = |extra: &str| {
        let mut data = json!({extra: "1"});
        for i in 0..5 {
            data[format!("k{i}")] = json!(long);
        }
        data
    };
    // Five values of 10,000 characters: about 650,000 a match, over the limit at the second.
    let status = configmap_refused(&client, "team", "big", five("check")).await;
    assert_eq!(
        status.message,
        format!(
            "configmaps \"big\" is forbidden: ValidatingAdmissionPolicy 'costly' with binding 'costly' denied request: expression '!('check' in object.data) || {each}' resulted in error: operation cancelled: actual cost limit exceeded"
        )
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    // A variable has a limit of its own; what reads it fails with it.
    let status = create_configmap(&client, "team", "big", five("var"))
        .await
        .unwrap_err();
    assert!(
        status.message.ends_with("denied request: expression '!('var' in object.data) || size(variables.long) == 0' resulted in error: composited variable \"long\" fails to evaluate: operation cancelled: actual cost limit exceeded"),
        "{}",
        status.message
    );
    // One such value is within the limit: the policy judges it.
    create_configmap(&client, "team", "one", json!({"check": "1", "k0": long}))
        .await
        .unwrap();

    // Twelve validations of about 900,000 each: over the budget of the binding at the twelfth,
    // which makes the whole evaluation an error; at about 800,000 each they fit.
    let budget: Vec<Value> = (0..12)
        .map(|i| {
            json!({"message": format!("b{i}"), "expression": format!(
                "!('budget' in object.data) || object.data.all(k, k == 'budget' || object.data[k].matches('{pattern}'))")})
        })
        .collect();
    create_policy(
        &client,
        "budget",
        json!({"matchConstraints": configmap_rules(), "validations": budget}),
    )
    .await;
    bind(&client, "budget", &["Deny"], json!({})).await;
    let status = configmap_refused(
        &client,
        "team",
        "budget",
        json!({"budget": "1", "k0": "x".repeat(12_400)}),
    )
    .await;
    assert!(
        status.message.ends_with("ValidatingAdmissionPolicy 'budget' with binding 'budget' denied request: validation failed due to running out of cost budget, no further validation rules will be run"),
        "{}",
        status.message
    );
    create_configmap(
        &client,
        "team",
        "budget",
        json!({"budget": "1", "k0": "x".repeat(11_000)}),
    )
    .await
    .unwrap();

    // With failurePolicy Ignore an expression over the limit refuses nothing.
    let mut policy = policies(&client).get("costly").await.unwrap();
    policy.data["spec"]["failurePolicy"] = json!("Ignore");
    policies(&client)
        .replace("costly", &PostParams::default(), &policy)
        .await
        .unwrap();
    configmap_admitted(&client, "team", "big", five("check")).await;
}

// Real kubectl, as users meet policies.

const KUBECTL: &str = "/usr/bin/kubectl";

const POLICY_YAML: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-limit
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [configmaps]
  validations:
  - expression: "!has(object.data) || !('replicas' in object.data) || int(object.data.replicas) <= 5"
    message: at most 5 replicas
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replica-limit-binding
spec:
  policyName: replica-limit
  validationActions: [Deny]
"#;

const VIOLATING_YAML: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: too-many, namespace: team}
data: {replicas: "6"}
"#;

async fn kubectl(home: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::new(KUBECTL);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("KUBECONFIG", home.join("kubeconfig"))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn kubectl_applies_policies_and_prints_their_denials() {
    if !std::path::Path::new(KUBECTL).exists() {
        eprintln!("skipped: no {KUBECTL}");
        return;
    }
    let (emulator, _client) = start().await;
    let home = tempfile::tempdir().unwrap();
    emulator
        .write_kubeconfig(
            home.path().join("kubeconfig"),
            emulator.superuser_token(),
            "team",
        )
        .unwrap();
    let file = |name: &str, text: &str| {
        let path = home.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let policy = file("policy.yaml", POLICY_YAML);
    let applied = kubectl(home.path(), &["apply", "-f", &policy]).await;
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let stdout = String::from_utf8_lossy(&applied.stdout);
    assert!(
        stdout.contains(
            "validatingadmissionpolicy.admissionregistration.k8s.io/replica-limit created"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("validatingadmissionpolicybinding.admissionregistration.k8s.io/replica-limit-binding created"), "{stdout}");

    let listed = kubectl(home.path(), &["get", "validatingadmissionpolicies"]).await;
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success() && stdout.contains("replica-limit"),
        "{stdout}"
    );

    // In force a moment later: a user waits for a server-side dry run to be refused.
    let violating = file("violating.yaml", VIOLATING_YAML);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while kubectl(
        home.path(),
        &["apply", "--dry-run=server", "-f", &violating],
    )
    .await
    .status
    .success()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not enforced within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = kubectl(home.path(), &["apply", "-f", &violating]).await;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        // What kubectl prints for the API server's refusal (reason Invalid, one cause).
        stderr.contains("The configmaps \"too-many\" is invalid: : ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding' denied request: at most 5 replicas"),
        "{stderr}"
    );
    let created = kubectl(
        home.path(),
        &[
            "create",
            "configmap",
            "also-too-many",
            "--from-literal=replicas=9",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&created.stderr);
    assert!(
        stderr.contains("error: failed to create configmap: configmaps \"also-too-many\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding' denied request: at most 5 replicas"),
        "{stderr}"
    );
}
