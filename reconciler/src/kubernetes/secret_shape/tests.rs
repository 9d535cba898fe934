//! A delivered Secret brought to a new shape: what the patch removes and keeps, and, against the
//! API emulator, a template change that keeps the secret and a type change that replaces the
//! Secret.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nauthera_shared::resources::{OIDCClient, SecretTemplate};

use super::*;
use crate::kubernetes::kube_io::{Delivery, deliver_secret, state_of};
use crate::process::memory::SecretValue;
use crate::reconcile::decide::SecretState;

const NAMESPACE: &str = "team-a";
const ISSUER: &str = "https://login.example.test/acme";

fn template(value: serde_json::Value) -> SecretTemplate {
    serde_json::from_value(value).unwrap()
}

fn facts(secret: &str) -> SecretFacts<'_> {
    SecretFacts {
        client_id: "cid",
        client_secret: secret,
        issuer: ISSUER,
    }
}

#[test]
fn a_new_shape_removes_what_the_old_one_declared_and_keeps_what_others_set() {
    let old = render(
        Some(&template(serde_json::json!({
            "files": { "app.env": "ID={{ clientId }}" },
            "labels": { "team": "web" },
            "annotations": { "note": "x" }
        }))),
        &facts("s3cr3t"),
    )
    .unwrap();
    let mut existing = Secret {
        data: Some(secret_data(&old)),
        ..Secret::default()
    };
    let mut labels = secret_labels(&old);
    labels.insert("copied-by".into(), "reflector".into());
    existing.metadata.labels = Some(labels);
    existing.metadata.annotations = Some(secret_annotations(&old));
    let new = render(None, &facts("s3cr3t")).unwrap();

    let patch = shape_patch(Some(&existing), &new, Some("7"));
    let data = &patch["data"];
    assert_eq!(data["app.env"], serde_json::Value::Null);
    assert_eq!(data["tokenEndpoint"], serde_json::Value::Null);
    assert!(data["clientSecret"].is_string());
    let metadata = &patch["metadata"];
    assert_eq!(metadata["labels"]["team"], serde_json::Value::Null);
    assert!(
        metadata["labels"].get("copied-by").is_none(),
        "others' labels untouched"
    );
    assert_eq!(metadata["labels"][MANAGED_BY_LABEL], MANAGED_BY);
    assert_eq!(metadata["annotations"]["note"], serde_json::Value::Null);
    assert_eq!(
        metadata["annotations"][SECRET_SHAPE_ANNOTATION],
        serde_json::Value::Null
    );
    assert_eq!(metadata["resourceVersion"], "7");
    assert!(!needs_replacement(&existing, &new));
    let basic = render(
        Some(&template(serde_json::json!({
            "type": "kubernetes.io/basic-auth", "keys": { "clientSecret": "password" }
        }))),
        &facts("s3cr3t"),
    )
    .unwrap();
    assert!(needs_replacement(&existing, &basic));
}

async fn create_client(api: &Api<OIDCClient>, name: &str) -> OIDCClient {
    let client: OIDCClient = serde_json::from_value(serde_json::json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": "OIDCClient",
        "metadata": { "name": name, "namespace": NAMESPACE },
        "spec": {
            "issuer": ISSUER,
            "redirectUris": ["https://app.example.test/cb"],
            "secret": { "generate": true }
        }
    }))
    .unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match api.create(&PostParams::default(), &client).await {
            Ok(created) => return created,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(error) => panic!("cannot create the OIDCClient: {error}"),
        }
    }
}

#[tokio::test]
async fn a_template_change_rewrites_the_secret_with_the_value_it_holds() {
    let (_emulator, client) = crate::kubernetes::test_cluster::cluster(
        NAMESPACE,
        crate::kubernetes::test_cluster::Crds::Project,
    )
    .await;
    let api: Api<OIDCClient> = Api::namespaced(client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let web = create_client(&api, "web").await;
    let uid = web.uid().unwrap();
    let first = template(serde_json::json!({
        "keys": { "clientSecret": "CLIENT_SECRET" },
        "files": { "app.env": "SECRET={{ clientSecret }}\n" },
        "labels": { "team": "web" }
    }));
    let value = SecretValue::new("minted-value".into());
    deliver_secret(
        &secrets,
        &web,
        Delivery {
            secret_name: "web",
            client_id: "cid",
            issuer: ISSUER,
            value: &value,
            template: Some(&first),
            rotation_request: None,
        },
        None,
    )
    .await
    .unwrap();
    let written = secrets.get("web").await.unwrap();
    let data = written.data.clone().unwrap();
    assert_eq!(data["CLIENT_SECRET"].0, b"minted-value");
    assert_eq!(data["app.env"].0, b"SECRET=minted-value\n");
    let summary = SecretSummary::from(&written);
    let first_shape = secret_render::shape_digest(&first);
    assert_eq!(
        state_of(&summary, &uid, Some(&first_shape)),
        SecretState::Owned { has_value: true }
    );
    // Somebody else labels the Secret (a copying tool).
    let patch = serde_json::json!({ "metadata": { "labels": { "copied-by": "reflector" } } });
    secrets
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    // The template changes: keys renamed, the file gone, a new type.
    let second = template(serde_json::json!({
        "type": "kubernetes.io/basic-auth",
        "keys": { "clientSecret": "password", "clientId": "username" },
        "labels": { "tier": "frontend" }
    }));
    let second_shape = secret_render::shape_digest(&second);
    assert_eq!(
        state_of(&summary, &uid, Some(&second_shape)),
        SecretState::OtherShape
    );
    let mut held = None;
    let reshaped = reshape_secret(&secrets, &web, "web", (Some(&second), "cid", ISSUER), |v| {
        held = Some(v);
    })
    .await
    .unwrap();
    assert_eq!(reshaped, Reshaped::Rewritten);
    assert_eq!(
        held.as_deref(),
        Some("minted-value"),
        "held in memory across the replacement"
    );
    let rewritten = secrets.get("web").await.unwrap();
    assert_eq!(rewritten.type_.as_deref(), Some("kubernetes.io/basic-auth"));
    let data = rewritten.data.clone().unwrap();
    assert_eq!(data["password"].0, b"minted-value");
    assert_eq!(data["username"].0, b"cid");
    assert!(!data.contains_key("CLIENT_SECRET") && !data.contains_key("app.env"));
    let labels = rewritten.labels();
    assert_eq!(labels.get("tier").map(String::as_str), Some("frontend"));
    assert!(!labels.contains_key("team"));

    // Back to Opaque with a same-typed change: patched in place, others' labels kept.
    let third = template(serde_json::json!({ "labels": { "tier": "frontend" } }));
    reshape_secret(&secrets, &web, "web", (Some(&third), "cid", ISSUER), |_| {})
        .await
        .unwrap();
    let fourth = template(serde_json::json!({ "labels": { "tier": "backend" } }));
    reshape_secret(
        &secrets,
        &web,
        "web",
        (Some(&fourth), "cid", ISSUER),
        |_| {},
    )
    .await
    .unwrap();
    let last = secrets.get("web").await.unwrap();
    assert_eq!(
        last.data.as_ref().unwrap()["clientSecret"].0,
        b"minted-value"
    );
    assert_eq!(
        last.labels().get("tier").map(String::as_str),
        Some("backend")
    );
    let summary = SecretSummary::from(&secrets.get("web").await.unwrap());
    assert_eq!(
        state_of(&summary, &uid, Some(&secret_render::shape_digest(&fourth))),
        SecretState::Owned { has_value: true }
    );
}
