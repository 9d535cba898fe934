//! `spec.secret.restart: Rollout`: after a new client secret is delivered into a Secret
//! workloads held, the reconciler restarts exactly the workloads that read it, the way `kubectl
//! rollout restart` does, once for the delivery; on the real control plane its Deployment
//! controller starts a new ReplicaSet for each Deployment (a StatefulSet is checked by its pod
//! template, as everything is on the emulator, which runs no controller). A paused Deployment is left alone, and an
//! install without the permission says so instead of restarting nothing silently.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use kube::api::{Api, DynamicObject, ListParams};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::{NotRestartedBecause, OIDCClient, WorkloadRestartRecord};
use nauthera_shared::{RESTARTED_AT_ANNOTATION, RESTARTED_FOR_ANNOTATION};
use nauthera_tests::control_plane::Plane;
use nauthera_tests::control_plane::real::add_controllers;
use nauthera_tests::e2e::{Stack, client_manifest, status_of};

/// The real control plane runs the Deployment controller for this test binary, so that a
/// restart shows as the new ReplicaSet a cluster would start.
async fn start() -> Stack {
    add_controllers(&["deployment-controller"]).unwrap();
    Stack::start().await
}

/// A generated client whose secret goes into Secret `shop`, restarting its readers.
fn client(name: &str, display: &str) -> String {
    client_manifest(
        name,
        &format!(
            "  displayName: {display}
  redirectUris:
    - https://{name}.example.test/callback
  grantTypes: [authorization_code]
  responseTypes: [code]
  scopes: [openid]
  tokenEndpointAuthMethod: client_secret_basic
  secret:
    generate: true
    restart: Rollout
"
        ),
    )
}

/// A Deployment that reads Secret `secret` into its environment; `paused`: its rollout is
/// paused.
fn deployment_reading(name: &str, secret: &str, paused: bool) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  paused: {paused}
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: app
          image: registry.example.test/{name}:1
          env:
            - name: CLIENT_SECRET
              valueFrom:
                secretKeyRef: {{name: {secret}, key: clientSecret}}
"
    )
}

/// A StatefulSet that mounts Secret `secret` as a volume.
fn stateful_set_mounting(name: &str, secret: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {name}
spec:
  serviceName: {name}
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: app
          image: registry.example.test/{name}:1
          volumeMounts:
            - name: oidc
              mountPath: /etc/oidc
      volumes:
        - name: oidc
          secret:
            secretName: {secret}
"
    )
}

/// The permission of `deploy/components/workload-restart`, as this test's cluster takes it.
async fn grant_workload_restart(stack: &Stack) {
    let output = std::process::Command::new(nauthera_tests::e2e::kubectl())
        .arg("kustomize")
        .arg(nauthera_tests::binaries::workspace_root().join("deploy/overlays/workload-restart"))
        .output()
        .expect("kubectl kustomize runs");
    assert!(output.status.success(), "{output:?}");
    let rendered: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8(output.stdout).unwrap()).unwrap();
    let rbac: Vec<DynamicObject> = rendered
        .into_iter()
        .filter(|o| o["metadata"]["name"] == "nauthera-reconciler-workload-restart")
        .map(|o| serde_json::from_value(o).unwrap())
        .collect();
    assert_eq!(rbac.len(), 2, "the component's ClusterRole and binding");
    nauthera_tests::manifests::apply_all(&stack.client(), &stack.cluster.relocate(rbac), None)
        .await
        .expect("the administrator grants the permission");
}

fn deployments(stack: &Stack) -> Api<Deployment> {
    Api::namespaced(stack.client(), stack.namespace())
}

/// The pod template's annotations of a Deployment.
async fn template_annotations(stack: &Stack, name: &str) -> BTreeMap<String, String> {
    deployments(stack)
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|spec| spec.template.metadata)
        .and_then(|metadata| metadata.annotations)
        .unwrap_or_default()
}

/// The ReplicaSets the Deployment controller made for a Deployment.
async fn replica_sets_of(stack: &Stack, name: &str) -> Vec<String> {
    Api::<ReplicaSet>::namespaced(stack.client(), stack.namespace())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|set| {
            set.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|owner| owner.kind == "Deployment" && owner.name == name)
        })
        .filter_map(|set| set.metadata.name)
        .collect()
}

/// Whether this cluster runs a Deployment controller (the emulator stores Deployments only).
fn runs_deployments(stack: &Stack) -> bool {
    stack.cluster.plane() == Plane::Real
}

/// The restart the client records, once it does.
async fn restart_recorded(stack: &Stack, name: &str) -> WorkloadRestartRecord {
    let client: OIDCClient = stack
        .wait_for(name, "a workload restart recorded", |c| {
            c.status
                .as_ref()
                .is_some_and(|s| s.last_workload_restart.is_some())
        })
        .await;
    *status_of(&client).last_workload_restart.clone().unwrap()
}

/// Deleting the Secret mints a new secret into a new one: the Deployment that reads it is
/// restarted (a new ReplicaSet on the real control plane), one that reads another Secret is not,
/// a paused one is left alone and said so; a later write delivers nothing and restarts nothing.
async fn a_new_secret_restarts_exactly_the_workloads_that_read_it() {
    let stack = start().await;
    grant_workload_restart(&stack).await;
    stack.apply(&client("shop", "Shop")).await;
    stack.wait_reason("shop", Reason::Registered).await;
    stack
        .apply(&deployment_reading("reader", "shop", false))
        .await;
    stack
        .apply(&deployment_reading("other", "billing", false))
        .await;
    stack.apply(&deployment_reading("held", "shop", true)).await;
    stack.apply(&stateful_set_mounting("cache", "shop")).await;
    if runs_deployments(&stack) {
        stack
            .eventually("the first ReplicaSets", async || {
                replica_sets_of(&stack, "reader").await.len() == 1
                    && replica_sets_of(&stack, "other").await.len() == 1
            })
            .await;
    }

    stack
        .secrets()
        .delete("shop", &Default::default())
        .await
        .expect("the Secret is deleted");
    let record = restart_recorded(&stack, "shop").await;
    assert_eq!(record.secret, "shop");
    assert_eq!(
        record.restarted,
        vec!["Deployment/reader", "StatefulSet/cache"],
        "{record:?}"
    );
    assert_eq!(record.not_restarted.len(), 1, "{record:?}");
    assert_eq!(record.not_restarted[0].workload, "Deployment/held");
    assert_eq!(
        record.not_restarted[0].why,
        NotRestartedBecause::RolloutPaused
    );
    assert!(
        record.not_restarted[0]
            .message
            .contains("rollout resume deployment/held"),
        "{record:?}"
    );
    // The delivery is the new Secret as written.
    let secret = stack
        .secret("shop")
        .await
        .expect("a new Secret is delivered");
    assert_eq!(
        record.delivery,
        format!("shop@{}", secret.metadata.resource_version.unwrap())
    );

    let reader = template_annotations(&stack, "reader").await;
    assert!(reader.contains_key(RESTARTED_AT_ANNOTATION), "{reader:?}");
    assert_eq!(reader.get(RESTARTED_FOR_ANNOTATION), Some(&record.delivery));
    let cache = Api::<StatefulSet>::namespaced(stack.client(), stack.namespace())
        .get("cache")
        .await
        .unwrap()
        .spec
        .and_then(|spec| spec.template.metadata)
        .and_then(|metadata| metadata.annotations)
        .unwrap_or_default();
    assert_eq!(cache.get(RESTARTED_FOR_ANNOTATION), Some(&record.delivery));
    assert!(cache.contains_key(RESTARTED_AT_ANNOTATION), "{cache:?}");
    for untouched in ["other", "held"] {
        let annotations = template_annotations(&stack, untouched).await;
        assert!(
            !annotations.contains_key(RESTARTED_AT_ANNOTATION),
            "{untouched}: {annotations:?}"
        );
    }
    let restarted = stack.wait_event("shop", "WorkloadsRestarted").await;
    assert_eq!(restarted.type_, "Normal");
    assert!(
        restarted.message.contains("Deployment/reader"),
        "{restarted:?}"
    );
    assert!(
        !restarted.message.contains("Deployment/other"),
        "{restarted:?}"
    );
    let paused = stack.wait_event("shop", "WorkloadsNotRestarted").await;
    assert!(paused.message.contains("Deployment/held"), "{paused:?}");
    let rotated = stack.wait_event("shop", "SecretRotated").await;
    assert!(
        rotated
            .message
            .contains("spec.secret.restart: Rollout restarts them"),
        "{rotated:?}"
    );

    if runs_deployments(&stack) {
        stack
            .eventually("a new ReplicaSet for the reader", async || {
                replica_sets_of(&stack, "reader").await.len() == 2
            })
            .await;
        assert_eq!(replica_sets_of(&stack, "other").await.len(), 1);
        assert!(replica_sets_of(&stack, "held").await.len() <= 1);
    }

    // A write that delivers no new secret restarts nothing.
    let restarted_at = reader.get(RESTARTED_AT_ANNOTATION).cloned();
    stack.apply(&client("shop", "Shop renamed")).await;
    stack
        .wait_for("shop", "the new display name in force", |c| {
            c.metadata.generation.is_some_and(|g| g >= 2)
                && c.status.as_ref().and_then(|s| s.generation_in_force) == c.metadata.generation
        })
        .await;
    assert_eq!(
        template_annotations(&stack, "reader")
            .await
            .get(RESTARTED_AT_ANNOTATION)
            .cloned(),
        restarted_at
    );
    if runs_deployments(&stack) {
        assert_eq!(replica_sets_of(&stack, "reader").await.len(), 2);
    }
}
nauthera_tests::e2e_test!(a_new_secret_restarts_exactly_the_workloads_that_read_it);

/// Without the workload-restart permission (the default install), the client still gets its
/// new secret, and says which workloads were not restarted, that the permission is missing and
/// how to grant it; nothing is patched.
async fn a_missing_restart_permission_is_reported_clearly() {
    let stack = start().await;
    stack.apply(&client("shop", "Shop")).await;
    stack.wait_reason("shop", Reason::Registered).await;
    stack
        .apply(&deployment_reading("reader", "shop", false))
        .await;
    if runs_deployments(&stack) {
        stack
            .eventually("the first ReplicaSet", async || {
                replica_sets_of(&stack, "reader").await.len() == 1
            })
            .await;
    }

    stack
        .secrets()
        .delete("shop", &Default::default())
        .await
        .expect("the Secret is deleted");
    let record = restart_recorded(&stack, "shop").await;
    assert!(record.restarted.is_empty(), "{record:?}");
    assert_eq!(record.not_restarted.len(), 1, "{record:?}");
    assert_eq!(record.not_restarted[0].workload, "Deployment/reader");
    assert_eq!(record.not_restarted[0].why, NotRestartedBecause::Forbidden);
    let shop = stack.wait_reason("shop", Reason::Registered).await;
    let message = status_of(&shop).message.clone().unwrap();
    for part in [
        "Deployment/reader",
        "may not patch deployments",
        "deploy/components/workload-restart",
        "rbac.workloadRestart=true",
        "rollout restart deployment/reader",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    let event = stack.wait_event("shop", "WorkloadsNotRestarted").await;
    assert_eq!(event.type_, "Warning");
    assert!(
        event.message.contains("may not patch deployments"),
        "{event:?}"
    );
    assert!(
        stack.secret("shop").await.is_some(),
        "the secret is delivered"
    );
    let reader = template_annotations(&stack, "reader").await;
    assert!(!reader.contains_key(RESTARTED_AT_ANNOTATION), "{reader:?}");
    if runs_deployments(&stack) {
        assert_eq!(replica_sets_of(&stack, "reader").await.len(), 1);
    }
}
nauthera_tests::e2e_test!(a_missing_restart_permission_is_reported_clearly);
