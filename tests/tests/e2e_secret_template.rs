//! The Secret's shape, declared (`spec.secret.template`) end to end: each feature renders the
//! declared Secret, a template edit rewrites it without minting, and a template that does not
//! render sends nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_shared::catalog::{Cause, Phase, Reason};
use nauthera_tests::e2e::{ISSUER, Stack, client_manifest, secret_value, sha256_hex, status_of};

/// An OIDCClient whose generated secret is delivered in the shape `template` (YAML lines under
/// `template:`, indented by six).
fn templated_client(name: &str, template: &str) -> String {
    client_manifest(
        name,
        &format!(
            "  redirectUris:
    - https://{name}.example.test/oauth2/callback
  scopes: [openid, email]
  secret:
    generate: true
    template:
{template}"
        ),
    )
}

const FIRST: &str = r#"      keys:
        clientId: OAUTH2_PROXY_CLIENT_ID
        clientSecret: OAUTH2_PROXY_CLIENT_SECRET
      omit: [discoveryUrl]
      files:
        oauth2-proxy.cfg: |
          provider = "oidc"
          client_id = "{{ clientId }}"
          client_secret = "{{ clientSecret }}"
          oidc_issuer_url = "{{ issuer }}"
          redeem_url = "{{ tokenEndpoint }}"
      type: example.com/oauth2-proxy
      labels:
        team: web
      annotations:
        reflector.v1.k8s.emberstack.com/reflection-allowed: "true"
"#;

const SECOND: &str = r#"      keys:
        clientId: username
        clientSecret: password
      type: kubernetes.io/basic-auth
      labels:
        tier: frontend
"#;

async fn each_template_feature_renders_the_declared_secret_and_an_edit_mints_nothing() {
    let stack = Stack::start().await;
    stack.apply(&templated_client("web", FIRST)).await;
    let web = stack.wait_reason("web", Reason::Registered).await;
    let client_id = status_of(&web).client_id.clone().unwrap();
    let secret = stack.secret("web").await.unwrap();
    let data = secret.data.clone().unwrap();
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "OAUTH2_PROXY_CLIENT_ID",
            "OAUTH2_PROXY_CLIENT_SECRET",
            "issuer",
            "oauth2-proxy.cfg",
            "tokenEndpoint"
        ]
    );
    let value = secret_value(&secret, "OAUTH2_PROXY_CLIENT_SECRET").unwrap();
    let held = stack.server.client_secret_hash(&stack.object_ref("web"));
    assert_eq!(
        held,
        Some(sha256_hex(value.as_bytes())),
        "the rendered Secret holds the secret the server accepts"
    );
    assert_eq!(
        secret_value(&secret, "OAUTH2_PROXY_CLIENT_ID").as_deref(),
        Some(client_id.as_str())
    );
    assert_eq!(
        secret_value(&secret, "oauth2-proxy.cfg").unwrap(),
        format!(
            "provider = \"oidc\"\nclient_id = \"{client_id}\"\nclient_secret = \"{value}\"\n\
             oidc_issuer_url = \"{ISSUER}\"\nredeem_url = \"{ISSUER}/oauth2/token\"\n"
        )
    );
    assert_eq!(secret.type_.as_deref(), Some("example.com/oauth2-proxy"));
    let labels = secret.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("team").map(String::as_str), Some("web"));
    let annotations = secret.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations
            .get("reflector.v1.k8s.emberstack.com/reflection-allowed")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        annotations
            .get(nauthera_shared::CLIENT_SECRET_KEY_ANNOTATION)
            .map(String::as_str),
        Some("OAUTH2_PROXY_CLIENT_SECRET")
    );
    // The secret shows nowhere but in the Secret.
    let status_text = serde_json::to_string(&web.status).unwrap();
    assert!(!status_text.contains(&value));
    for event in stack.events_for("OIDCClient", "web").await {
        assert!(!event.message.contains(&value), "{event:?}");
    }

    // A copying tool labels the Secret; then the team edits the template: other keys, no file,
    // a new type (the Secret is replaced), other labels.
    let patch = serde_json::json!({ "metadata": { "labels": { "copied-by": "reflector" } } });
    stack
        .secrets()
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    stack.apply(&templated_client("web", SECOND)).await;
    stack.wait_event("web", "SecretReshaped").await;
    let web = stack.wait_reason("web", Reason::Registered).await;
    assert_eq!(status_of(&web).phase, Some(Phase::Registered));
    let secret = stack.secret("web").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/basic-auth"));
    let data = secret.data.clone().unwrap();
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "discoveryUrl",
            "issuer",
            "password",
            "tokenEndpoint",
            "username"
        ]
    );
    assert_eq!(
        secret_value(&secret, "password").as_deref(),
        Some(value.as_str()),
        "the same secret, in its new place"
    );
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        held,
        "the server's secret did not change"
    );
    let labels = secret.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("tier").map(String::as_str), Some("frontend"));
    assert!(
        !labels.contains_key("team"),
        "what the template no longer declares goes"
    );

    // A same-typed edit patches in place and keeps what others set.
    stack
        .secrets()
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let third = SECOND.replace("tier: frontend", "tier: backend");
    stack.apply(&templated_client("web", &third)).await;
    stack
        .eventually("the Secret carries the new label", async || {
            stack
                .secret("web")
                .await
                .and_then(|s| s.metadata.labels)
                .is_some_and(|l| l.get("tier").map(String::as_str) == Some("backend"))
        })
        .await;
    let secret = stack.secret("web").await.unwrap();
    let labels = secret.metadata.labels.clone().unwrap();
    assert_eq!(
        labels.get("copied-by").map(String::as_str),
        Some("reflector")
    );
    assert_eq!(
        secret_value(&secret, "password").as_deref(),
        Some(value.as_str())
    );
    assert_eq!(
        stack.server.client_secret_hash(&stack.object_ref("web")),
        held
    );
}
nauthera_tests::e2e_test!(
    each_template_feature_renders_the_declared_secret_and_an_edit_mints_nothing
);

async fn a_template_that_does_not_render_sends_nothing_and_names_the_field() {
    let stack = Stack::start().await;
    let broken = "      files:\n        app.env: |\n          PASSWORD={{ password }}\n";
    stack.apply(&templated_client("web", broken)).await;
    let web = stack.wait_reason("web", Reason::Refused).await;
    let status = status_of(&web);
    assert_eq!(
        status.cause,
        Some(Cause::InvalidSecretTemplate),
        "{status:?}"
    );
    let message = status.message.as_deref().unwrap();
    assert!(
        message.contains("spec.secret.template.files[app.env]") && message.contains("undefined"),
        "{message}"
    );
    assert!(stack.server.client(&stack.object_ref("web")).is_none());
    assert!(stack.secret("web").await.is_none());

    // Fixed: registered and delivered.
    let fixed = "      files:\n        app.env: |\n          PASSWORD={{ clientSecret }}\n";
    stack.apply(&templated_client("web", fixed)).await;
    stack.wait_reason("web", Reason::Registered).await;
    let secret = stack.secret("web").await.unwrap();
    let value = secret_value(&secret, "clientSecret").unwrap();
    assert_eq!(
        secret_value(&secret, "app.env").unwrap(),
        format!("PASSWORD={value}\n")
    );
}
nauthera_tests::e2e_test!(a_template_that_does_not_render_sends_nothing_and_names_the_field);

/// Applies a manifest; the API server's refusal as text.
async fn try_apply(stack: &Stack, yaml: &str) -> Result<(), String> {
    let document: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
    let object: kube::api::DynamicObject = serde_json::from_value(document).unwrap();
    nauthera_tests::manifests::apply_all(&stack.client(), &[object], Some(stack.namespace()))
        .await
        .map_err(|error| format!("{error:#}"))
}

async fn the_api_server_refuses_a_template_that_breaks_its_rules() {
    let stack = Stack::start().await;
    let reserved = "      labels:\n        app.kubernetes.io/managed-by: me\n";
    let error = try_apply(&stack, &templated_client("web", reserved))
        .await
        .unwrap_err();
    assert!(error.contains("managed-by"), "{error}");
    let clash = "      keys:\n        clientId: same\n        issuer: same\n";
    let error = try_apply(&stack, &templated_client("web", clash))
        .await
        .unwrap_err();
    assert!(error.contains("must differ"), "{error}");
}
nauthera_tests::e2e_test!(the_api_server_refuses_a_template_that_breaks_its_rules);
