//! ClientPolicies end to end: `kubectl apply` refuses what a policy forbids (the generated
//! ValidatingAdmissionPolicy, evaluated by the emulator with a real CEL implementation); the
//! reconciler holds back what was admitted before a policy, and a new client a namespace limit
//! leaves no room for; approvals only the security role may give; the plugin's policy facts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;

use kube::api::{Api, DeleteParams};
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::resources::{ClientPolicy, OIDCClient};
use nauthera_tests::e2e::{ISSUER, Stack, client_manifest, kubectl, status_of};

/// A ClientPolicy named `name` with these `spec.rules` (YAML, indented by four).
/// The security team's ClusterRole as deploy/base ships it.
const POLICY_ADMIN_ROLE: &str = "nauthera-client-policy-admin";

fn policy(name: &str, rules: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: {name}
spec:
  rules:
{rules}"
    )
}

/// A confidential web client with a generated secret.
fn web_client(name: &str, redirect: &str, scopes: &str) -> String {
    client_manifest(
        name,
        &format!(
            "  redirectUris: [\"{redirect}\"]
  scopes: [{scopes}]
  secret:
    generate: true
"
        ),
    )
}

/// What `kubectl apply -f -` said, run with a kubeconfig.
struct Applied {
    ok: bool,
    output: String,
}

async fn kubectl_apply(stack: &Stack, kubeconfig: &Path, yaml: &str) -> Applied {
    kubectl_with_manifest(stack, kubeconfig, &["apply"], yaml).await
}

/// `kubectl <verb...> -f -` of a manifest in the test's namespace.
async fn kubectl_with_manifest(
    stack: &Stack,
    kubeconfig: &Path,
    verb: &[&str],
    yaml: &str,
) -> Applied {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(kubectl())
        .args(verb)
        .args(["-f", "-", "-n", stack.namespace(), "--kubeconfig"])
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(yaml.as_bytes()).await.unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    Applied {
        ok: output.status.success(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

fn policies(stack: &Stack) -> Api<ClientPolicy> {
    Api::all(stack.client())
}

/// Waits until the API server enforces the admission policies in place: it loads a new policy
/// and its binding a moment after they are written (about a second), so a server-side dry-run
/// create of `violating` is tried until it is refused.
async fn wait_enforced(stack: &Stack, kubeconfig: &Path, violating: &str) {
    stack
        .eventually("the admission policy enforced", async || {
            let tried = kubectl_with_manifest(
                stack,
                kubeconfig,
                &["create", "--dry-run=server"],
                violating,
            )
            .await;
            !tried.ok && tried.output.contains("denied request")
        })
        .await;
}

/// Waits until the reconciler reports the policy compiled and its admission policy in place.
async fn wait_policy_in_place(stack: &Stack, name: &str) -> ClientPolicy {
    let api = policies(stack);
    let mut found = None;
    stack
        .eventually(&format!("ClientPolicy {name} in place"), async || {
            let Some(policy) = api.get_opt(name).await.unwrap() else {
                return false;
            };
            let ready = policy.status.as_ref().is_some_and(|s| {
                s.observed_generation == policy.metadata.generation
                    && s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
            });
            if ready {
                found = Some(policy);
            }
            ready
        })
        .await;
    found.unwrap()
}

async fn kubectl_apply_refuses_what_a_policy_forbids_with_its_message() {
    let stack = Stack::start_alone().await;
    stack
        .apply(&policy(
            "web-rules",
            "    redirectUris:
      hosts: [\"*.example.com\"]
    grantTypes: [authorization_code, refresh_token]
",
        ))
        .await;
    let placed = wait_policy_in_place(&stack, "web-rules").await;
    assert_eq!(
        placed.status.unwrap().admission_policy.as_deref(),
        Some("nauthera-web-rules")
    );
    let admin = stack.cluster.kubeconfig().to_path_buf();

    // A loopback http redirect: the schema allows it, the policy does not (once the API server
    // has loaded it).
    let loopback = web_client("native", "http://127.0.0.1:8400/cb", "openid");
    wait_enforced(&stack, &admin, &loopback).await;
    let refused = kubectl_apply(&stack, &admin, &loopback).await;
    assert!(!refused.ok, "{}", refused.output);
    assert!(
        refused.output.contains(
            "ClientPolicy web-rules, rule redirectUris: spec.redirectUris may only hold https URIs on hosts *.example.com"
        ),
        "{}",
        refused.output
    );
    assert!(
        refused.output.contains("nauthera-web-rules"),
        "{}",
        refused.output
    );

    // A forbidden grant type.
    let machine = format!(
        "apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata:
  name: batch
spec:
  issuer: {ISSUER}
  grantTypes: [client_credentials]
  responseTypes: []
  tokenEndpointAuthMethod: client_secret_post
  secret:
    generate: true
"
    );
    let refused = kubectl_apply(&stack, &admin, &machine).await;
    assert!(!refused.ok, "{}", refused.output);
    assert!(
        refused
            .output
            .contains("ClientPolicy web-rules, rule grantTypes: spec.grantTypes may only hold authorization_code, refresh_token"),
        "{}",
        refused.output
    );
    assert!(stack.oidc_client("native").await.is_none());
    assert!(stack.oidc_client("batch").await.is_none());

    // What complies goes through and registers.
    let compliant = web_client("web", "https://app.example.com/cb", "openid");
    let accepted = kubectl_apply(&stack, &admin, &compliant).await;
    assert!(accepted.ok, "{}", accepted.output);
    stack.wait_reason("web", Reason::Registered).await;

    // The policy gone, so is its admission policy (owned by it): the same manifest goes through
    // once the garbage collector has deleted it and the API server has unloaded it, which on a
    // real control plane takes seconds.
    policies(&stack)
        .delete("web-rules", &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually("the manifest accepted without the policy", async || {
            kubectl_apply(&stack, &admin, &loopback).await.ok
        })
        .await;
    stack.wait_reason("native", Reason::Registered).await;
}
nauthera_tests::e2e_test!(kubectl_apply_refuses_what_a_policy_forbids_with_its_message);

async fn a_client_admitted_before_a_policy_is_held_at_its_generation_until_it_complies() {
    let mut stack = Stack::start_alone().await;
    stack
        .apply(&web_client(
            "web",
            "https://app.example.com/cb",
            "openid, admin",
        ))
        .await;
    let first = stack.wait_reason("web", Reason::Registered).await;
    let revision = status_of(&first).revision.clone().unwrap();

    // The policy arrives while no reconciler runs, and so does an edit it does not allow: nothing
    // refused the edit at admission.
    stack.reconciler.take().unwrap().stop().await;
    stack
        .apply(&policy("scoped", "    scopes: [openid, profile]\n"))
        .await;
    stack
        .apply(&web_client(
            "web",
            "https://app.example.com/callback",
            "openid, admin",
        ))
        .await;
    let next = stack.start_replica("replica-b").await.unwrap();
    next.wait_ready().await.unwrap();
    stack.reconciler = Some(next);

    let held = stack.wait_reason("web", Reason::PolicyViolation).await;
    let status = status_of(&held);
    assert_eq!(status.phase, Some(Phase::Error));
    let message = status.message.clone().unwrap();
    assert!(
        message.contains(
            "ClientPolicy scoped, rule scopes: spec.scopes may only hold openid, profile"
        ),
        "{message}"
    );
    assert!(
        message.contains("generation 2 is not sent and the server keeps generation 1 in force"),
        "{message}"
    );
    let hold = status.policy.as_deref().unwrap();
    assert_eq!(
        (hold.policy.as_str(), hold.rule.as_str()),
        ("scoped", "scopes")
    );
    assert_eq!(status.generation_in_force, Some(1));
    let on_server = stack.server.client(&stack.object_ref("web")).unwrap();
    assert_eq!(on_server.revision, revision);
    assert_eq!(on_server.generation_in_force, 1);
    let event = stack.wait_event("web", "PolicyViolation").await;
    assert_eq!(event.type_, "Warning");
    assert!(event.message.contains("rule scopes"), "{}", event.message);
    stack
        .reconciler()
        .wait_metric(
            "nauthera_operator_reconciles_total",
            &[
                ("kind", "OIDCClient"),
                ("reason", "policy_violation"),
                ("cause", "policy_rule"),
            ],
            |counted| counted >= 1.0,
        )
        .await;

    // The policy counts what it holds back.
    let api = policies(&stack);
    stack
        .eventually("the policy counts the held client", async || {
            let policy = api.get("scoped").await.unwrap();
            policy.status.is_some_and(|s| {
                s.violations == 1
                    && s.held.len() == 1
                    && s.held[0].name == "web"
                    && s.held[0].rule == "scopes"
            })
        })
        .await;

    // The plugin groups the hold under its policy, and `diagnose` names the rule.
    let report = stack.plugin(&["status"]).await;
    assert!(
        report
            .stdout
            .contains("scoped holds back 1: 1 PolicyViolation"),
        "{}",
        report.all()
    );
    assert!(report.stdout.contains("rule scopes"), "{}", report.all());
    let diagnosed = stack.plugin(&["diagnose", "oidcclient/web"]).await;
    assert!(
        diagnosed
            .stdout
            .contains("ClientPolicy scoped covers it and holds it back"),
        "{}",
        diagnosed.all()
    );

    // From now on kubectl apply refuses an edit that still breaks the rule, and `diagnose -f`
    // says so before it is applied.
    wait_policy_in_place(&stack, "scoped").await;
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("web.yaml");
    std::fs::write(
        &manifest,
        web_client("web", "https://app.example.com/other", "openid, admin"),
    )
    .unwrap();
    let checked = stack
        .plugin(&["diagnose", "-f", manifest.to_str().unwrap()])
        .await;
    assert_eq!(checked.code, 1, "{}", checked.all());
    assert!(
        checked.stdout.contains(
            "refused: ClientPolicy scoped, rule scopes: spec.scopes may only hold openid, profile"
        ),
        "{}",
        checked.all()
    );
    let admin = stack.cluster.kubeconfig().to_path_buf();
    wait_enforced(
        &stack,
        &admin,
        &web_client("probe", "https://app.example.com/other", "openid, admin"),
    )
    .await;
    let still = web_client("web", "https://app.example.com/other", "openid, admin");
    let refused = kubectl_apply(&stack, &admin, &still).await;
    assert!(!refused.ok, "{}", refused.output);
    assert!(refused.output.contains("rule scopes"), "{}", refused.output);

    // Complying sends the new generation.
    let fixed = web_client("web", "https://app.example.com/callback", "openid");
    let accepted = kubectl_apply(&stack, &admin, &fixed).await;
    assert!(accepted.ok, "{}", accepted.output);
    let registered = stack.wait_reason("web", Reason::Registered).await;
    let status = status_of(&registered);
    assert_eq!(status.generation_in_force, registered.metadata.generation);
    assert!(status.policy.is_none());
    stack
        .eventually("the policy holds nothing back", async || {
            let policy = api.get("scoped").await.unwrap();
            policy
                .status
                .is_some_and(|s| s.violations == 0 && s.held.is_empty())
        })
        .await;
}
nauthera_tests::e2e_test!(
    a_client_admitted_before_a_policy_is_held_at_its_generation_until_it_complies
);

async fn a_policy_made_later_marks_a_registered_client_and_leaves_it_working() {
    let stack = Stack::start_alone().await;
    stack
        .apply(&web_client(
            "legacy",
            "https://app.example.com/cb",
            "openid, admin",
        ))
        .await;
    let registered = stack.wait_reason("legacy", Reason::Registered).await;
    let secret = stack.secret("legacy").await.unwrap();
    stack
        .apply(&policy("scoped", "    scopes: [openid]\n"))
        .await;
    let held = stack.wait_reason("legacy", Reason::PolicyViolation).await;
    let message = status_of(&held).message.clone().unwrap();
    assert!(
        message.contains("generation 1 stays in force on the server"),
        "{message}"
    );
    assert_eq!(status_of(&held).revision, status_of(&registered).revision);
    // Nothing was written: the client and its secret keep working.
    assert_eq!(stack.secret("legacy").await.unwrap().data, secret.data);

    // The policy deleted: back to Registered without a write.
    policies(&stack)
        .delete("scoped", &DeleteParams::default())
        .await
        .unwrap();
    let back = stack.wait_reason("legacy", Reason::Registered).await;
    assert_eq!(status_of(&back).revision, status_of(&registered).revision);
}
nauthera_tests::e2e_test!(a_policy_made_later_marks_a_registered_client_and_leaves_it_working);

async fn a_namespace_limit_keeps_the_first_clients_and_lets_the_next_in_when_one_goes() {
    let stack = Stack::start_alone().await;
    stack
        .apply(&policy("two-per-team", "    maxClientsPerNamespace: 2\n"))
        .await;
    let placed = wait_policy_in_place(&stack, "two-per-team").await;
    // A limit is no check of one object: the reconciler enforces it alone.
    assert_eq!(placed.status.unwrap().admission_policy, None);
    for name in ["alpha", "beta"] {
        stack
            .apply(&web_client(name, "https://app.example.com/cb", "openid"))
            .await;
        stack.wait_reason(name, Reason::Registered).await;
    }
    stack
        .apply(&web_client("gamma", "https://app.example.com/cb", "openid"))
        .await;
    let held = stack.wait_reason("gamma", Reason::PolicyViolation).await;
    let status = status_of(&held);
    assert_eq!(
        status.cause,
        Some(nauthera_shared::catalog::Cause::NamespaceLimit)
    );
    let message = status.message.clone().unwrap();
    assert!(
        message.contains(&format!(
            "namespace {} may hold 2 OIDCClient(s) under this policy and 2 were created before this one",
            stack.namespace()
        )),
        "{message}"
    );
    assert!(stack.server.client(&stack.object_ref("gamma")).is_none());
    assert!(stack.secret("gamma").await.is_none());

    // One goes: the one waiting takes its place by itself.
    stack.delete_oidc_client("alpha").await;
    stack.wait_gone("alpha").await;
    stack.wait_reason("gamma", Reason::Registered).await;
    let clients: Api<OIDCClient> = stack.oidc_clients();
    let beta = clients.get("beta").await.unwrap();
    assert_eq!(status_of(&beta).reason, Some(Reason::Registered));
}
nauthera_tests::e2e_test!(
    a_namespace_limit_keeps_the_first_clients_and_lets_the_next_in_when_one_goes
);

/// `kubectl nauthera ARGS` as the user of `kubeconfig`.
async fn plugin_as(stack: &Stack, kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let plugin = nauthera_tests::binaries::Binary::Plugin.path().unwrap();
    let path = format!(
        "{}:{}",
        plugin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = tokio::process::Command::new(kubectl())
        .arg("nauthera")
        .args(args)
        .args(["-n", stack.namespace(), "--kubeconfig"])
        .arg(kubeconfig)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

async fn an_approval_policy_holds_a_client_until_the_security_role_approves_it() {
    let stack = Stack::start_alone().await;
    let namespace = stack.namespace().to_owned();
    let admin_role = stack.cluster.cluster_name(POLICY_ADMIN_ROLE);
    let test_label = nauthera_tests::cluster::TEST_LABEL;
    // The team may do anything with its OIDCClients; the security group has the shipped role.
    stack
        .apply(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: team
rules:
- apiGroups: [nauthera.io]
  resources: [oidcclients]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [nauthera.io]
  resources: [clientapprovals]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: team
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: team}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: team-a-developers}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: security-{namespace}
  labels: {{{test_label}: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {admin_role}}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: security}}
"
        ))
        .await;
    // Shipped with the base, applied with the rest of its RBAC; applied again all the same so
    // that this test names what it relies on.
    stack
        .apply_cluster_role(&stack.shipped_cluster_role_named(POLICY_ADMIN_ROLE))
        .await;
    stack
        .apply(&policy(
            "reviewed",
            "    approval:\n      fields: [redirectUris, scopes]\n",
        ))
        .await;
    wait_policy_in_place(&stack, "reviewed").await;
    let developer = stack.user_kubeconfig("dev@example.com", &["team-a-developers"]);
    let security = stack.user_kubeconfig("sec@example.com", &["security"]);

    // A new client waits.
    let applied = kubectl_apply(
        &stack,
        &developer,
        &web_client("web", "https://app.example.com/cb", "openid"),
    )
    .await;
    assert!(applied.ok, "{}", applied.output);
    let waiting = stack.wait_reason("web", Reason::WaitingForApproval).await;
    let message = status_of(&waiting).message.clone().unwrap();
    assert!(
        message.contains(
            "ClientPolicy reviewed, rule approval: a new client needs an approval of generation 1"
        ),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "kubectl nauthera approve oidcclient/web -n {namespace}"
        )),
        "{message}"
    );
    assert!(stack.server.client(&stack.object_ref("web")).is_none());
    stack.wait_event("web", "WaitingForApproval").await;

    // The team cannot approve its own client.
    let (approved, output) = plugin_as(&stack, &developer, &["approve", "oidcclient/web"]).await;
    assert!(!approved, "{output}");
    assert!(output.contains("nauthera-client-policy-admin"), "{output}");
    assert_eq!(
        status_of(&stack.oidc_client("web").await.unwrap()).reason,
        Some(Reason::WaitingForApproval)
    );

    // The security team can.
    let (approved, output) = plugin_as(&stack, &security, &["approve", "oidcclient/web"]).await;
    assert!(approved, "{output}");
    let registered = stack.wait_reason("web", Reason::Registered).await;
    assert!(stack.secret("web").await.is_some());
    let record = status_of(&registered).approval.as_deref().unwrap();
    assert_eq!(record.fields, vec!["redirectUris", "scopes"]);

    // A change elsewhere needs no new approval.
    let renamed = format!(
        "{}  displayName: Web\n",
        web_client("web", "https://app.example.com/cb", "openid")
    );
    assert!(kubectl_apply(&stack, &developer, &renamed).await.ok);
    let again = stack.wait_reason("web", Reason::Registered).await;
    assert_eq!(status_of(&again).generation_in_force, Some(2));

    // A change to a listed field does, and only the field that changed is named; the server
    // keeps generation 2 until it is approved.
    let moved = format!(
        "{}  displayName: Web\n",
        web_client("web", "https://other.example.com/cb", "openid")
    );
    assert!(kubectl_apply(&stack, &developer, &moved).await.ok);
    let waiting = stack.wait_reason("web", Reason::WaitingForApproval).await;
    let message = status_of(&waiting).message.clone().unwrap();
    assert!(
        message.contains("a change to redirectUris needs an approval of generation 3"),
        "{message}"
    );
    assert!(
        message.contains("the server keeps generation 2 in force"),
        "{message}"
    );
    let (approved, output) = plugin_as(&stack, &security, &["approve", "oidcclient/web"]).await;
    assert!(approved, "{output}");
    let registered = stack.wait_reason("web", Reason::Registered).await;
    assert_eq!(status_of(&registered).generation_in_force, Some(3));

    // Approving the generation in force again is refused: such an approval could never be used.
    let (approved, output) = plugin_as(&stack, &security, &["approve", "oidcclient/web"]).await;
    assert!(!approved, "{output}");
    assert!(
        output.contains("generation 3 of oidcclient/web is already in force"),
        "{output}"
    );
}
nauthera_tests::e2e_test!(an_approval_policy_holds_a_client_until_the_security_role_approves_it);
