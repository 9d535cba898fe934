//! The API emulator on loopback for unit tests of the Kubernetes edges: a superuser client and
//! one namespace to work in.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use nauthera_kube_emulator::Emulator;
use nauthera_shared::resources::crds;

/// Which custom resources the emulator serves.
pub enum Crds {
    None,
    Project,
}

/// A running emulator (stops when dropped), a client of it, and `namespace` created.
pub async fn cluster(namespace: &str, with: Crds) -> (Emulator, kube::Client) {
    let emulator = Emulator::start().await.unwrap();
    let kubeconfig =
        Kubeconfig::from_yaml(&emulator.kubeconfig(emulator.superuser_token(), namespace)).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    if let Crds::Project = with {
        let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in crds() {
            crd_api.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created: Namespace =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": namespace } })).unwrap();
    namespaces
        .create(&PostParams::default(), &created)
        .await
        .unwrap();
    (emulator, client)
}
