//! One malformed object never stops the watch of the others. A manifest stored while the CRD's
//! schema was looser (an older CRD, say) cannot be read as an OIDCClient; the reconciler logs it
//! and goes on registering the good ones.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use nauthera_shared::catalog::Reason;
use nauthera_tests::e2e::{Stack, generated_client, status_of};
use nauthera_tests::manifests;

const CRD: &str = "oidcclients.nauthera.io";

async fn a_malformed_manifest_does_not_stop_the_others() {
    let stack = Stack::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(stack.client());

    // Loosen the schema, store a manifest the reconciler's types cannot read, then put the
    // shipped CRD back: the stored object stays as it is, as on a real API server.
    let shipped = crds.get(CRD).await.unwrap();
    let mut loose = serde_json::to_value(&shipped).unwrap();
    let schema = &mut loose["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    schema["properties"]["spec"] =
        serde_json::json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
    if let Some(schema) = schema.as_object_mut() {
        schema.remove("x-kubernetes-validations");
    }
    let loose: CustomResourceDefinition = serde_json::from_value(loose).unwrap();
    crds.replace(CRD, &PostParams::default(), &loose)
        .await
        .unwrap();

    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("nauthera.io", "v1alpha1", "OIDCClient"),
        "oidcclients",
    );
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(stack.client(), stack.namespace(), &resource);
    let broken: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": "OIDCClient",
        "metadata": { "name": "broken" },
        "spec": { "issuer": 42, "redirectUris": "not a list" }
    }))
    .unwrap();
    // The API server may still be switching schemas; retry until the loose one takes it.
    stack
        .eventually(
            "the loose schema accepts the malformed manifest",
            async || {
                dynamic
                    .create(&PostParams::default(), &broken)
                    .await
                    .is_ok()
            },
        )
        .await;
    manifests::install_crds(&stack.client()).await.unwrap();

    stack.apply(&generated_client("good")).await;
    let good = stack.wait_reason("good", Reason::Registered).await;
    assert!(status_of(&good).client_id.is_some());

    let stored = dynamic.get("broken").await.unwrap();
    // The CRD's default (observedGeneration 0) is the API server's, not the reconciler's.
    let crd_default = serde_json::json!({ "observedGeneration": 0 });
    assert!(
        stored
            .data
            .get("status")
            .is_none_or(|status| *status == crd_default),
        "nothing is written to a manifest the reconciler cannot read: {stored:?}"
    );
    let reconciler = stack.reconciler();
    stack
        .eventually("the reconciler logs the malformed manifest", async || {
            reconciler.log().contains("cannot read the manifest")
        })
        .await;
    assert!(
        reconciler.log().contains("broken"),
        "{}",
        reconciler.log_tail()
    );
}
nauthera_tests::e2e_test!(a_malformed_manifest_does_not_stop_the_others);
