//! What GitOps tools read, computed with their own code on every kind in every phase the real
//! reconciler brings it to: kstatus (`sigs.k8s.io/cli-utils`, through `tests/gitops/`) says
//! InProgress while the reconciler works or waits for something coming, Failed (Stalled) for what
//! needs a person, Current only when the generation is in force; a fresh object is InProgress;
//! after a restore or an approval it is Current again. `kubectl wait --for=condition=...` agrees.
//! Each phase's object is captured as the Argo CD test data (see `nauthera_tests::gitops`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kube::api::{Api, DeleteParams, PostParams};
use nauthera_fake_server::{Actor, Fault, FaultCode, Method};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::{Branding, ClientPolicy, IdentityProvider, Organization};
use nauthera_tests::e2e::{
    Declared, ISSUER, Stack, generated_client, kubectl, secret_ref_client, secret_value,
};
use nauthera_tests::gitops::{self, KStatus};
use serde_json::Value;

/// Checks what kstatus and `kubectl wait` say of an object against the catalog, and captures it
/// as `<stem>`; returns its kstatus.
async fn judged(stack: &Stack, object: &Value, stem: &str) -> KStatus {
    let expected = gitops::expected(object);
    let computed = gitops::kstatus(object).unwrap();
    let terminating = object["metadata"]["deletionTimestamp"].is_string();
    let wanted = if terminating {
        "Terminating"
    } else {
        expected.kstatus
    };
    assert_eq!(computed.status, wanted, "{stem}: {computed:?}\n{object:#}");
    let condition = match expected.kstatus {
        "Current" => "Ready",
        "Failed" => "Stalled",
        _ => "Reconciling",
    };
    let judged_now = object["status"]["observedGeneration"] == object["metadata"]["generation"];
    if judged_now && !terminating {
        wait_condition(stack, object, condition).await;
    }
    gitops::capture(stem, &gitops::fixture(object, stack.namespace())).unwrap();
    computed
}

/// `kubectl wait --for=condition=<type>` on the object, which must succeed at once.
async fn wait_condition(stack: &Stack, object: &Value, type_: &str) {
    let kind = object["kind"].as_str().unwrap().to_lowercase();
    let name = object["metadata"]["name"].as_str().unwrap();
    let mut command = tokio::process::Command::new(kubectl());
    command
        .arg("--kubeconfig")
        .arg(stack.cluster.kubeconfig())
        .arg("--cache-dir")
        .arg(stack.cluster.dir().join("kubectl-cache"))
        .args(["wait", &format!("--for=condition={type_}"), "--timeout=20s"])
        .arg(format!("{kind}.nauthera.io/{name}"))
        .env_remove("KUBECONFIG");
    if object["metadata"]["namespace"].is_string() {
        command.args(["-n", stack.namespace()]);
    }
    let output = command.output().await.unwrap();
    assert!(
        output.status.success(),
        "kubectl wait --for=condition={type_} {kind}/{name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The object of kind `K` as JSON, once its status names `reason` for its current generation.
async fn at_reason<K: Declared>(stack: &Stack, name: &str, reason: Reason) -> Value {
    let object = stack.wait_reason_of::<K>(name, reason).await;
    let mut value = serde_json::to_value(&object).unwrap();
    // kube's typed objects leave these out; the API server always sends them.
    value["apiVersion"] = "nauthera.io/v1alpha1".into();
    value["kind"] = K::kind(&()).as_ref().into();
    value
}

/// Creates the manifest as a client would and returns the API server's answer: the object
/// before the reconciler has seen it.
async fn fresh<K: Declared>(stack: &Stack, yaml: &str) -> Value {
    let object: K = serde_saphyr::from_str(yaml).unwrap();
    let api: Api<K> = Api::namespaced(stack.client(), stack.namespace());
    let created = api.create(&PostParams::default(), &object).await.unwrap();
    let mut value = serde_json::to_value(&created).unwrap();
    value["apiVersion"] = "nauthera.io/v1alpha1".into();
    value["kind"] = K::kind(&()).as_ref().into();
    value
}

type Client = nauthera_shared::resources::OIDCClient;

async fn client_at(stack: &Stack, name: &str, reason: Reason) -> Value {
    at_reason::<Client>(stack, name, reason).await
}

fn alice() -> Actor {
    Actor::dashboard("alice@example.com").because("hotfix")
}

async fn edit_display_name(stack: &Stack, name: &str, display_name: &str) {
    let patch = serde_json::json!({ "spec": { "displayName": display_name } });
    stack
        .oidc_clients()
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
}

async fn an_oidc_client_in_every_phase_reads_as_kstatus_and_kubectl_wait_expect() {
    let stack = Stack::start_alone().await;
    let mut captured = Vec::new();
    let mut secrets = Vec::new();

    // Fresh: the API server's answer to the create, before the reconciler looked.
    let created = fresh::<Client>(&stack, &generated_client("web")).await;
    assert_eq!(created["status"]["observedGeneration"], 0, "{created:#}");
    let computed = judged(&stack, &created, "unjudged").await;
    assert!(
        computed.message.contains("latest observed generation is 0"),
        "{computed:?}"
    );
    captured.push(Reason::Pending);
    let registered = client_at(&stack, "web", Reason::Registered).await;
    assert_eq!(
        judged(&stack, &registered, "Registered").await.status,
        "Current"
    );
    captured.push(Reason::Registered);
    secrets.push(secret_value(&stack.secret("web").await.unwrap(), "clientSecret").unwrap());

    // Waiting for a Branding that will come: InProgress.
    stack
        .apply(
            &generated_client("branded")
                .replace("spec:\n", "spec:\n  brandingRef:\n    name: not-yet\n"),
        )
        .await;
    let waiting = client_at(&stack, "branded", Reason::Pending).await;
    judged(&stack, &waiting, "Pending-reference_not_ready").await;

    // Refused with a field objection: Failed.
    stack
        .apply(
            &generated_client("refused")
                .replace(
                    "grantTypes: [authorization_code]",
                    "grantTypes: [authorization_code, client_credentials, refresh_token]\n  responseTypes: []",
                )
                .replace("  responseTypes: [code]\n", ""),
        )
        .await;
    let refused = client_at(&stack, "refused", Reason::Refused).await;
    judged(&stack, &refused, "Refused-field_violation").await;
    captured.push(Reason::Refused);

    // A Secret of someone else's where the secret goes: Failed.
    stack
        .apply("apiVersion: v1\nkind: Secret\nmetadata:\n  name: foreign\nstringData:\n  note: the team's own\n")
        .await;
    stack.apply(&generated_client("foreign")).await;
    let foreign = client_at(&stack, "foreign", Reason::SecretUndeliverable).await;
    judged(&stack, &foreign, "SecretUndeliverable-foreign_secret").await;
    captured.push(Reason::SecretUndeliverable);

    // A Secret whose key the manifest names is empty: Failed (a key not there yet is waited
    // for as Pending).
    stack
        .apply(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: keyless\nstringData:\n  clientSecret: \"\"\n",
        )
        .await;
    stack
        .apply(&secret_ref_client("keyless-ref", "keyless"))
        .await;
    let keyless = client_at(&stack, "keyless-ref", Reason::SecretRefUnavailable).await;
    judged(&stack, &keyless, "SecretRefUnavailable-secret_ref_missing").await;
    captured.push(Reason::SecretRefUnavailable);

    // Drifted: Failed until a person restores it, with the action Argo CD offers.
    stack
        .server
        .edit_client(&stack.object_ref("web"), &alice(), |spec| {
            spec.display_name = "edited by hand".to_owned();
        })
        .unwrap();
    let drifted = client_at(&stack, "web", Reason::Drifted).await;
    judged(&stack, &drifted, "Drifted-edited").await;
    captured.push(Reason::Drifted);
    let script = gitops::kind_dir(&gitops::root(), "OIDCClient").join("actions/restore/action.lua");
    let restored_request = gitops::run_lua(&script, &drifted).unwrap();
    assert_eq!(
        restored_request["metadata"]["annotations"]["nauthera.io/restore"],
        "true"
    );
    stack.annotate_restore("web").await;
    let restored = client_at(&stack, "web", Reason::Restored).await;
    assert_eq!(
        judged(&stack, &restored, "Restored-edited").await.status,
        "Current"
    );
    captured.push(Reason::Restored);

    // Held by ClientPolicies: Failed until fixed or approved.
    stack
        .apply(&generated_client("over-scoped").replace(
            "scopes: [openid, profile]",
            "scopes: [openid, profile, admin]",
        ))
        .await;
    client_at(&stack, "over-scoped", Reason::Registered).await;
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: scoped-{ns}
spec:
  match:
    namespaceSelector:
      matchLabels: {{kubernetes.io/metadata.name: {ns}}}
  rules:
    scopes: [openid, profile]
---
apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: reviewed-{ns}
spec:
  match:
    namespaceSelector:
      matchLabels: {{kubernetes.io/metadata.name: {ns}}}
  rules:
    approval: {{}}
",
            ns = stack.namespace()
        ))
        .await;
    let violation = client_at(&stack, "over-scoped", Reason::PolicyViolation).await;
    judged(&stack, &violation, "PolicyViolation-policy_rule").await;
    captured.push(Reason::PolicyViolation);
    stack.apply(&generated_client("awaiting")).await;
    let awaiting = client_at(&stack, "awaiting", Reason::WaitingForApproval).await;
    judged(&stack, &awaiting, "WaitingForApproval-approval_required").await;
    captured.push(Reason::WaitingForApproval);
    // The approve action's ClientApproval, created as Argo CD would: Current once let through.
    let script = gitops::kind_dir(&gitops::root(), "OIDCClient").join("actions/approve/action.lua");
    let impacted = gitops::run_lua(&script, &awaiting).unwrap();
    assert_eq!(impacted[0]["operation"], "create", "{impacted:#}");
    let approval: nauthera_shared::resources::ClientApproval =
        serde_json::from_value(impacted[0]["resource"].clone()).unwrap();
    let stored = Api::<nauthera_shared::resources::ClientApproval>::namespaced(
        stack.client(),
        stack.namespace(),
    )
    .create(&PostParams::default(), &approval)
    .await
    .unwrap();
    // An approval is a record with nothing of its own to reconcile (the client it lets through
    // carries the outcome): kstatus reads it Current as stored, so a rollout waits on the
    // client, not on the approval.
    let mut stored = serde_json::to_value(&stored).unwrap();
    stored["apiVersion"] = "nauthera.io/v1alpha1".into();
    stored["kind"] = "ClientApproval".into();
    assert_eq!(
        gitops::kstatus(&stored).unwrap().status,
        "Current",
        "{stored:#}"
    );
    let approved = client_at(&stack, "awaiting", Reason::Registered).await;
    assert_eq!(
        judged(&stack, &approved, "Registered-approved")
            .await
            .status,
        "Current"
    );
    secrets.push(secret_value(&stack.secret("awaiting").await.unwrap(), "clientSecret").unwrap());
    let policies: Api<ClientPolicy> = Api::all(stack.client());
    let in_place = policies
        .get(&format!("scoped-{}", stack.namespace()))
        .await
        .unwrap();
    let mut in_place = serde_json::to_value(&in_place).unwrap();
    in_place["apiVersion"] = "nauthera.io/v1alpha1".into();
    in_place["kind"] = "ClientPolicy".into();
    assert_eq!(
        judged(&stack, &in_place, "AdmissionPolicyInPlace")
            .await
            .status,
        "Current"
    );
    for name in ["scoped", "reviewed"] {
        policies
            .delete(
                &format!("{name}-{}", stack.namespace()),
                &DeleteParams::default(),
            )
            .await
            .unwrap();
    }
    client_at(&stack, "over-scoped", Reason::Registered).await;

    // A transient failure retried: InProgress.
    stack.server.inject_fault(
        Some(Method::ApplyClient),
        Fault::always(FaultCode::Unavailable),
    );
    stack.apply(&generated_client("retried")).await;
    let retried = client_at(&stack, "retried", Reason::Pending).await;
    judged(&stack, &retried, "Pending-transient").await;

    // Deleting while the server keeps failing: kstatus says Terminating.
    stack.server.inject_fault(
        Some(Method::DeleteClient),
        Fault::always(FaultCode::Unavailable),
    );
    stack.delete_oidc_client("over-scoped").await;
    let deleting = client_at(&stack, "over-scoped", Reason::Deleting).await;
    judged(&stack, &deleting, "Deleting-transient").await;
    captured.push(Reason::Deleting);
    stack.server.clear_faults();
    client_at(&stack, "retried", Reason::Registered).await;

    // The server out of reach: InProgress, it comes back by itself.
    stack.server.go_unreachable().await;
    edit_display_name(&stack, "web", "edited while unreachable").await;
    let unreachable = client_at(&stack, "web", Reason::Unreachable).await;
    judged(&stack, &unreachable, "Unreachable-transient").await;
    captured.push(Reason::Unreachable);
    stack.server.restart().await.unwrap();
    stack.reconciler().wait_readyz(200, "ok").await;
    let back = client_at(&stack, "web", Reason::Registered).await;
    assert_eq!(
        judged(&stack, &back, "Registered-after-unreachable")
            .await
            .status,
        "Current"
    );

    // The client key unreadable: InProgress (a file not there yet comes by itself).
    let key = stack.tls_dir.join("tls.key");
    let saved_key = std::fs::read(&key).unwrap();
    std::fs::remove_file(&key).unwrap();
    stack
        .reconciler()
        .wait_readyz(503, "CredentialUnavailable")
        .await;
    edit_display_name(&stack, "web", "edited without a key").await;
    let credential = client_at(&stack, "web", Reason::CredentialUnavailable).await;
    judged(&stack, &credential, "CredentialUnavailable-unreadable").await;
    captured.push(Reason::CredentialUnavailable);
    std::fs::write(&key, &saved_key).unwrap();
    stack.reconciler().wait_readyz(200, "ok").await;

    let ca = stack.tls_dir.join("ca.crt");
    let saved_ca = std::fs::read(&ca).unwrap();
    std::fs::remove_file(&ca).unwrap();
    stack
        .reconciler()
        .wait_readyz(503, "TrustAnchorUnavailable")
        .await;
    edit_display_name(&stack, "web", "edited without a CA").await;
    let anchor = client_at(&stack, "web", Reason::TrustAnchorUnavailable).await;
    judged(&stack, &anchor, "TrustAnchorUnavailable-unreadable").await;
    captured.push(Reason::TrustAnchorUnavailable);
    std::fs::write(&ca, &saved_ca).unwrap();
    stack.reconciler().wait_readyz(200, "ok").await;
    let again = client_at(&stack, "web", Reason::Registered).await;
    assert_eq!(judged(&stack, &again, "Registered").await.status, "Current");

    // Nothing captured holds a generated secret.
    if std::env::var_os(gitops::CAPTURE_ENV).is_some() {
        for (path, object) in gitops::captured(&gitops::root(), "OIDCClient").unwrap() {
            let text = object.to_string();
            for secret in &secrets {
                assert!(
                    !text.contains(secret.as_str()),
                    "{path} holds a client secret"
                );
            }
        }
    }
    assert!(captured.len() >= 13);
    // Give the reconciler a moment to finish the deletion before the stack goes.
    tokio::time::sleep(Duration::from_millis(200)).await;
}
nauthera_tests::e2e_test!(an_oidc_client_in_every_phase_reads_as_kstatus_and_kubectl_wait_expect);

const GLOBEX_ISSUER: &str = "https://login.example.com/globex";

async fn brandings_identity_providers_organizations_and_policies_read_as_kstatus_expects() {
    let stack = Stack::start_alone().await;
    let organization = format!(
        "apiVersion: nauthera.io/v1alpha1
kind: Organization
metadata:
  name: globex
  namespace: {}
spec:
  slug: globex
  issuer: {GLOBEX_ISSUER}
  displayName: Globex
",
        stack.namespace()
    );
    let created = fresh::<Organization>(&stack, &organization).await;
    assert_eq!(
        judged(&stack, &created, "unjudged").await.status,
        "InProgress"
    );
    let registered = at_reason::<Organization>(&stack, "globex", Reason::Registered).await;
    assert_eq!(
        judged(&stack, &registered, "Registered").await.status,
        "Current"
    );
    // The reconciler here is limited to the test's namespace on the real control plane: an
    // organization's change, which names no namespace, reaches it all the same.
    stack
        .server
        .edit_organization("globex", &alice(), |spec| {
            spec.display_name = "Globex (edited)".to_owned();
        })
        .unwrap();
    let drifted = at_reason::<Organization>(&stack, "globex", Reason::Drifted).await;
    assert_eq!(
        judged(&stack, &drifted, "Drifted-edited").await.status,
        "Failed"
    );
    stack.annotate_restore_of::<Organization>("globex").await;
    let restored = at_reason::<Organization>(&stack, "globex", Reason::Restored).await;
    assert_eq!(
        judged(&stack, &restored, "Restored-edited").await.status,
        "Current"
    );

    let branding = |name: &str, primary: &str| {
        format!(
            "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: {name}
  namespace: {}
spec:
  issuer: {ISSUER}
  branding:
    colors:
      primary: \"{primary}\"
    texts:
      title: Welcome
",
            stack.namespace()
        )
    };
    let created = fresh::<Branding>(&stack, &branding("sign-in", "#112233")).await;
    judged(&stack, &created, "unjudged").await;
    let registered = at_reason::<Branding>(&stack, "sign-in", Reason::Registered).await;
    assert_eq!(
        judged(&stack, &registered, "Registered").await.status,
        "Current"
    );
    stack
        .server
        .edit_branding(&stack.object_ref("sign-in"), &alice(), |document| {
            document.colors.insert("primary".into(), "#000000".into());
        })
        .unwrap();
    let drifted = at_reason::<Branding>(&stack, "sign-in", Reason::Drifted).await;
    assert_eq!(
        judged(&stack, &drifted, "Drifted-edited").await.status,
        "Failed"
    );
    stack.annotate_restore_of::<Branding>("sign-in").await;
    let restored = at_reason::<Branding>(&stack, "sign-in", Reason::Restored).await;
    judged(&stack, &restored, "Restored-edited").await;
    // The reconciler cannot encode this logo: refused without a call, Failed.
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: portal
spec:
  issuer: {ISSUER}
  branding:
    logo:
      data: \"not base64 at all!\"
      mediaType: image/png
"
        ))
        .await;
    let refused = at_reason::<Branding>(&stack, "portal", Reason::Refused).await;
    assert_eq!(
        judged(&stack, &refused, "Refused-unencodable_branding")
            .await
            .status,
        "Failed"
    );

    let provider = format!(
        "apiVersion: nauthera.io/v1alpha1
kind: IdentityProvider
metadata:
  name: corp
  namespace: {}
spec:
  issuer: {ISSUER}
  kind: oidc
  displayName: Corp SSO
  upstreamUrl: https://sso.corp.example.test
  clientId: nauthera
  secretRef:
    name: corp-idp
    key: clientSecret
  scopes: [openid, email]
",
        stack.namespace()
    );
    let created = fresh::<IdentityProvider>(&stack, &provider).await;
    judged(&stack, &created, "unjudged").await;
    // Its Secret is not there yet: waited for, InProgress.
    let waiting = at_reason::<IdentityProvider>(&stack, "corp", Reason::Pending).await;
    assert_eq!(
        judged(&stack, &waiting, "Pending-reference_not_ready")
            .await
            .status,
        "InProgress"
    );
    stack
        .apply("apiVersion: v1\nkind: Secret\nmetadata:\n  name: corp-idp\nstringData:\n  clientSecret: upstream-value-not-in-fixtures\n")
        .await;
    let registered = at_reason::<IdentityProvider>(&stack, "corp", Reason::Registered).await;
    assert_eq!(
        judged(&stack, &registered, "Registered").await.status,
        "Current"
    );
    stack
        .server
        .edit_identity_provider(&stack.object_ref("corp"), &alice(), |spec| {
            spec.display_name = "Corp (edited)".to_owned();
        })
        .unwrap();
    let drifted = at_reason::<IdentityProvider>(&stack, "corp", Reason::Drifted).await;
    judged(&stack, &drifted, "Drifted-edited").await;
    stack.annotate_restore_of::<IdentityProvider>("corp").await;
    let restored = at_reason::<IdentityProvider>(&stack, "corp", Reason::Restored).await;
    judged(&stack, &restored, "Restored-edited").await;

    // A ClientPolicy the API server would not enforce: refused, Failed.
    let name = format!("refused-{}", stack.namespace());
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: {name}
spec:
  match:
    namespaceSelector:
      matchLabels: {{env: \"prod eu\"}}
  rules:
    scopes: [openid]
"
        ))
        .await;
    let policies: Api<ClientPolicy> = Api::all(stack.client());
    let mut refused = Value::Null;
    for _ in 0..200 {
        let policy = serde_json::to_value(policies.get(&name).await.unwrap()).unwrap();
        if gitops::condition(&policy, "Ready")["reason"] == "PolicyRefused" {
            refused = policy;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    refused["apiVersion"] = "nauthera.io/v1alpha1".into();
    refused["kind"] = "ClientPolicy".into();
    assert_eq!(
        judged(&stack, &refused, "PolicyRefused-invalid_selector")
            .await
            .status,
        "Failed"
    );
    policies
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    for (path, object) in gitops::captured(&gitops::root(), "IdentityProvider").unwrap() {
        assert!(
            !object
                .to_string()
                .contains("upstream-value-not-in-fixtures"),
            "{path} holds the upstream secret"
        );
    }
}
nauthera_tests::e2e_test!(
    brandings_identity_providers_organizations_and_policies_read_as_kstatus_expects
);

/// An observed client and a manifest for a client somebody else wrote: the first is settled
/// without being managed (Argo CD Suspended, as the catalog says for kstatus), the second waits
/// for a person (Failed, Suspended). Neither is written to the server.
async fn observed_and_foreign_objects_read_as_gitops_tools_expect() {
    let stack = Stack::start_alone().await;
    // A client whose last write was a person's: made through a manifest that orphans it, which
    // is then deleted, and edited by hand.
    for name in ["portal", "legacy"] {
        stack
            .apply(&nauthera_tests::e2e::generated_client_with(
                name, "Orphan", "",
            ))
            .await;
        client_at(&stack, name, Reason::Registered).await;
        stack.delete_oidc_client(name).await;
        stack.wait_gone(name).await;
        stack
            .server
            .edit_client(&stack.object_ref(name), &alice(), |spec| {
                spec.display_name = format!("{name} (dashboard)");
            })
            .unwrap();
    }
    let written = |stack: &Stack| {
        stack
            .server
            .audit_events()
            .iter()
            .filter(|event| !event.revision.is_empty())
            .count()
    };
    let writes = written(&stack);

    stack
        .apply(&nauthera_tests::e2e::generated_client_with(
            "portal",
            "Delete",
            "  managementPolicy: Observe\n",
        ))
        .await;
    let observed = client_at(&stack, "portal", Reason::Observed).await;
    let expected = gitops::expected(&observed);
    let computed = gitops::kstatus(&observed).unwrap();
    assert_eq!(
        computed.status, expected.kstatus,
        "{computed:?}\n{observed:#}"
    );
    assert_eq!(expected.health, "Suspended");
    gitops::capture(
        "Observed-differs",
        &gitops::fixture(&observed, stack.namespace()),
    )
    .unwrap();

    stack.apply(&generated_client("legacy")).await;
    let foreign = client_at(&stack, "legacy", Reason::AdoptionRequired).await;
    assert_eq!(
        judged(&stack, &foreign, "AdoptionRequired-foreign_object")
            .await
            .status,
        "Failed"
    );
    assert_eq!(gitops::expected(&foreign).health, "Suspended");
    assert_eq!(written(&stack), writes, "nothing is written for either");
}
nauthera_tests::e2e_test!(observed_and_foreign_objects_read_as_gitops_tools_expect);
