//! The cluster under test: a fresh emulator, or a real cluster when
//! `NAUTHERA_TEST_KUBECONFIG` names a kubeconfig (then every test works in its own namespace
//! and the emulator-only controls are skipped).

#![allow(dead_code, clippy::unwrap_used)] // shared by several test binaries; tests may unwrap

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use nauthera_kube_emulator::Emulator;
use serde_json::{Value, json};

pub struct Cluster {
    pub emulator: Option<Emulator>,
    pub config: Config,
    pub client: Client,
    /// What a test made on a real cluster, deleted when it ends: (resource, name).
    created: std::sync::Mutex<Vec<(&'static str, String)>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let Ok(path) = std::env::var("NAUTHERA_TEST_KUBECONFIG") else {
            return;
        };
        let created = self.created.lock().map(|c| c.clone()).unwrap_or_default();
        for (resource, name) in created {
            // Drop cannot await; kubectl deletes without waiting.
            let _ = std::process::Command::new("kubectl")
                .args([
                    "--kubeconfig",
                    &path,
                    "delete",
                    resource,
                    &name,
                    "--wait=false",
                    "--ignore-not-found",
                ])
                .status();
        }
    }
}

impl Cluster {
    pub async fn start() -> Self {
        let (emulator, kubeconfig) = match std::env::var("NAUTHERA_TEST_KUBECONFIG") {
            Ok(path) => (None, Kubeconfig::read_from(path).unwrap()),
            Err(_) => {
                let emulator = Emulator::start().await.unwrap();
                let text = emulator.kubeconfig(emulator.superuser_token(), "default");
                (Some(emulator), Kubeconfig::from_yaml(&text).unwrap())
            }
        };
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap();
        let client = Client::try_from(config.clone()).unwrap();
        Self {
            emulator,
            config,
            client,
            created: std::sync::Mutex::default(),
        }
    }

    pub fn emulator(&self) -> Option<&Emulator> {
        self.emulator.as_ref()
    }

    /// A fresh namespace for one test.
    pub async fn namespace(&self, prefix: &str) -> String {
        let name = format!("{prefix}-{:08x}", rand_u32());
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
            )
            .await
            .unwrap();
        self.remember("namespace", &name);
        name
    }

    fn remember(&self, resource: &'static str, name: &str) {
        if let Ok(mut created) = self.created.lock() {
            created.push((resource, name.to_owned()));
        }
    }

    /// A client authenticating with a bearer token.
    pub fn client_with_token(&self, token: &str) -> Client {
        let mut config = self.config.clone();
        config.auth_info = serde_json::from_value::<AuthInfo>(json!({"token": token})).unwrap();
        Client::try_from(config).unwrap()
    }

    /// Creates a ServiceAccount and returns a client acting as it (TokenRequest API).
    pub async fn service_account_client(&self, namespace: &str, name: &str) -> Client {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        accounts
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
            )
            .await
            .unwrap();
        let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": []}});
        let response: Value = accounts
            .create_subresource("token", name, &PostParams::default(), &request)
            .await
            .unwrap();
        self.client_with_token(response["status"]["token"].as_str().unwrap())
    }

    /// Applies a CRD and waits until it is established and served.
    pub async fn install_crd(&self, crd: Value) {
        let crds: Api<DynamicObject> = Api::all_with(self.client.clone(), &crd_resource());
        let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
        self.remember("customresourcedefinition", &name);
        crds.patch(
            &name,
            &PatchParams::apply("conformance").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
        eventually(|| async {
            let crd = crds.get(&name).await.ok()?;
            let conditions = crd.data["status"]["conditions"].as_array()?.clone();
            conditions
                .iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
                .then_some(())
        })
        .await;
    }
}

pub fn crd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    )
}

pub fn rand_u32() -> u32 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    hasher.finish() as u32
}

/// Polls until `check` yields a value, for at most ten seconds.
pub async fn eventually<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within 10s"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The test kind: a namespaced `Widget` with a status subresource, a structural schema with
/// required fields, an enum, a default, a preserved free-form field and printer columns.
pub fn widget_crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wd"], "listKind": "WidgetList"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["size"],
                            "x-kubernetes-validations": [
                                {"rule": "!has(self.tags) || size(self.tags) <= 3", "message": "at most three tags"},
                                {"rule": "self.color == oldSelf.color", "message": "color is immutable"}
                            ],
                            "properties": {
                                "size": {"type": "integer", "minimum": 0},
                                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                                "tags": {"type": "array", "items": {"type": "string"}},
                                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                            }
                        },
                        "status": {
                            "type": "object",
                            "properties": {
                                "phase": {"type": "string"},
                                "observedGeneration": {"type": "integer"},
                                "conditions": {"type": "array", "items": {"type": "object",
                                    "x-kubernetes-preserve-unknown-fields": true}}
                            }
                        }
                    }
                }}
            }]
        }
    })
}

pub fn widget_resource(group: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Widget"), "widgets")
}

pub fn widget(group: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

/// A unique API group per test, so tests sharing a real cluster do not collide.
pub fn test_group(test: &str) -> String {
    format!(
        "{test}-{:06x}.conformance.nauthera.io",
        rand_u32() & 0xffffff
    )
}

/// Widgets API in a namespace after installing the CRD.
pub async fn widgets(cluster: &Cluster, test: &str) -> (String, String, Api<DynamicObject>) {
    let group = test_group(test);
    cluster.install_crd(widget_crd(&group)).await;
    let namespace = cluster.namespace(test).await;
    let api = Api::namespaced_with(cluster.client.clone(), &namespace, &widget_resource(&group));
    (group, namespace, api)
}

/// The `Status` of a failed call.
pub fn status_of(error: kube::Error) -> kube::core::Status {
    match error {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}
