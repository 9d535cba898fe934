//! Inputs a real kube-apiserver refuses, or reads otherwise than Rust would, get the API server's
//! verdict everywhere: in the reconciler's status, at `kubectl apply` and in `diagnose -f`.
//!
//! - A ClientPolicy whose namespace selector holds label text the API server refuses, or whose
//!   generated check could cost more CEL units than the API server allows, is refused
//!   (`PolicyRefused`) naming the field, the rule and the limit; `diagnose -f` says the same.
//! - An explicit `null` in a nullable field counts as the field left out, at apply time and in
//!   the reconciler alike.
//! - A pattern's `\s` is Go's ASCII one: an issuer with a no-break space is admitted, as the API
//!   server admits it, and `diagnose -f` agrees.
//! - A manager or shard name that would make every Event (or every server-side apply) a 422 stops
//!   the reconciler at start, naming the flag and the limit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::{Branding, ClientPolicy};
use nauthera_tests::binaries::Binary;
use nauthera_tests::e2e::{
    ISSUER, Stack, StackOptions, client_manifest, generated_client, kubectl, status_of,
};
use serde_json::Value;

/// A ClientPolicy named `name` with this `spec` (YAML, indented by two).
fn policy_yaml(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: {name}
spec:
{spec}"
    )
}

/// `match:` covering only the test's namespace, so that nothing else on a shared cluster is
/// judged by the policy.
fn only_namespace(stack: &Stack) -> String {
    format!(
        "  match:
    namespaceSelector:
      matchLabels: {{kubernetes.io/metadata.name: {}}}
",
        stack.namespace()
    )
}

/// Waits until the reconciler reports the policy's current generation with this `Ready` reason;
/// returns the condition's message.
async fn wait_policy_reason(stack: &Stack, name: &str, reason: &str) -> String {
    let api: Api<ClientPolicy> = Api::all(stack.client());
    let mut message = String::new();
    stack
        .eventually(&format!("ClientPolicy {name} {reason}"), async || {
            let Some(policy) = api.get_opt(name).await.unwrap() else {
                return false;
            };
            let Some(status) = policy.status.as_ref() else {
                return false;
            };
            let found = status.conditions.iter().find(|c| {
                c.type_ == "Ready"
                    && c.reason == reason
                    && c.observed_generation == policy.metadata.generation
            });
            if let Some(condition) = found {
                message = condition.message.clone();
            }
            found.is_some()
        })
        .await;
    message
}

/// The part of a refusal's condition message both the status and `diagnose -f` give: the field
/// and what is wrong.
fn verdict_of(message: &str, cause: Cause) -> String {
    let start = format!("refused (cause {cause}): ");
    let rest = message
        .strip_prefix(&start)
        .unwrap_or_else(|| panic!("not a {cause} refusal: {message}"));
    let end = rest
        .find("; the policy enforces nothing until it is fixed")
        .unwrap_or_else(|| panic!("no end: {message}"));
    rest[..end].to_owned()
}

/// The Warning events `PolicyRefused` recorded on a ClientPolicy (cluster-scoped: in `default`).
async fn refusal_events(stack: &Stack, name: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(stack.client(), "default");
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some("PolicyRefused")
        })
        .collect()
}

/// `kubectl nauthera diagnose -f FILE -o json` on a file holding `text`: the exit code and the
/// report.
async fn diagnose_file(stack: &Stack, text: &str) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("manifest.yaml");
    std::fs::write(&file, text).unwrap();
    let run = stack
        .plugin(&["diagnose", "-f", file.to_str().unwrap(), "-o", "json"])
        .await;
    let report = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", run.all()));
    (run.code, report)
}

/// The findings of one check of the report's first document, joined.
fn findings(report: &Value, check: &str) -> String {
    report["documents"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == check)
        .unwrap_or_else(|| panic!("no {check} check: {report}"))["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

/// What `kubectl apply -f -` (or with `--dry-run=server`) said, as the administrator.
struct Applied {
    ok: bool,
    output: String,
}

async fn kubectl_apply(stack: &Stack, yaml: &str, dry_run: bool) -> Applied {
    use tokio::io::AsyncWriteExt;
    let kubeconfig: &Path = stack.cluster.kubeconfig();
    let mut command = tokio::process::Command::new(kubectl());
    command
        .args(["apply", "-f", "-", "-n", stack.namespace(), "--kubeconfig"])
        .arg(kubeconfig);
    if dry_run {
        command.arg("--dry-run=server");
    }
    let mut child = command
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

/// Checks a refused policy's condition against `diagnose -f` of its file, its event, its counter
/// and the admission policy it does not have; returns the verdict.
async fn assert_refused_everywhere(stack: &Stack, name: &str, yaml: &str, cause: Cause) -> String {
    let message = wait_policy_reason(stack, name, Reason::PolicyRefused.as_str()).await;
    let verdict = verdict_of(&message, cause);
    let api: Api<ClientPolicy> = Api::all(stack.client());
    let held = api.get(name).await.unwrap();
    let status = held.status.unwrap();
    assert_eq!(status.admission_policy, None);
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    let generated: Api<ValidatingAdmissionPolicy> = Api::all(stack.client());
    assert!(
        generated
            .get_opt(&format!("nauthera-{name}"))
            .await
            .unwrap()
            .is_none()
    );

    // The same verdict before the file is applied.
    let (code, report) = diagnose_file(stack, yaml).await;
    assert_eq!(code, 1, "{report}");
    let said = findings(&report, "compile");
    assert!(
        said.contains(&format!("(PolicyRefused, cause {cause}): {verdict}")),
        "diagnose -f: {said}\nstatus: {message}"
    );

    // A Warning event on the policy, and the counter.
    let mut events = Vec::new();
    stack
        .eventually(&format!("a PolicyRefused event on {name}"), async || {
            events = refusal_events(stack, name).await;
            !events.is_empty()
        })
        .await;
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(
        events[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains(&verdict),
        "{:?}",
        events[0].note
    );
    let counted = stack
        .reconciler()
        .metric(
            "nauthera_operator_reconciles_total",
            &[
                ("kind", "ClientPolicy"),
                ("reason", "policy_refused"),
                ("cause", cause.as_str()),
            ],
        )
        .await;
    assert!(counted >= 1.0, "{counted}");
    verdict
}

async fn a_namespace_selector_the_api_server_refuses_is_refused_naming_the_field() {
    let stack = Stack::start_alone().await;
    let name = format!("selector-{}", stack.namespace());
    let refused = policy_yaml(
        &name,
        "  match:
    namespaceSelector:
      matchLabels: {env: \"prod eu\"}
  rules:
    scopes: [openid]
",
    );
    stack.apply(&refused).await;
    let verdict = assert_refused_everywhere(&stack, &name, &refused, Cause::InvalidSelector).await;
    assert!(
        verdict.starts_with(
            "spec.match.namespaceSelector.matchLabels.env: value \"prod eu\": a valid label must \
             be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must \
             start and end with an alphanumeric character"
        ),
        "{verdict}"
    );
    assert!(
        verdict
            .contains("regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'"),
        "{verdict}"
    );

    // Fixed, it compiles and its admission policy is accepted by the API server.
    stack
        .apply(&policy_yaml(
            &name,
            "  match:
    namespaceSelector:
      matchLabels: {env: prod-eu}
  rules:
    scopes: [openid]
",
        ))
        .await;
    wait_policy_reason(&stack, &name, "AdmissionPolicyInPlace").await;
}
nauthera_tests::e2e_test!(a_namespace_selector_the_api_server_refuses_is_refused_naming_the_field);

async fn a_uri_rule_over_the_cel_cost_limit_is_refused_with_the_estimate_and_the_limit() {
    let stack = Stack::start_alone().await;
    let name = format!("many-hosts-{}", stack.namespace());
    let hosts: Vec<String> = (0..20)
        .map(|n| format!("\"*.team-{n:02}.apps.example.com\""))
        .collect();
    let prefixes: Vec<String> = (0..10)
        .map(|n| format!("/oauth2/callback-{n:02}"))
        .collect();
    let refused = policy_yaml(
        &name,
        &format!(
            "{}  rules:
    redirectUris:
      hosts: [{}]
      pathPrefixes: [{}]
",
            only_namespace(&stack),
            hosts.join(", "),
            prefixes.join(", ")
        ),
    );
    stack.apply(&refused).await;
    let verdict = assert_refused_everywhere(&stack, &name, &refused, Cause::CostLimit).await;
    assert!(
        verdict.starts_with(
            "spec.rules.redirectUris: the generated check of spec.redirectUris could cost up to \
             3,669,715 CEL units on an OIDCClient the CRD admits, over the API server's limit of \
             1,000,000 per expression"
        ),
        "{verdict}"
    );

    // Fewer hosts fit.
    stack
        .apply(&policy_yaml(
            &name,
            &format!(
                "{}  rules:
    redirectUris:
      hosts: [{}]
      pathPrefixes: [{}]
",
                only_namespace(&stack),
                hosts[..5].join(", "),
                prefixes[..2].join(", ")
            ),
        ))
        .await;
    wait_policy_reason(&stack, &name, "AdmissionPolicyInPlace").await;
}
nauthera_tests::e2e_test!(
    a_uri_rule_over_the_cel_cost_limit_is_refused_with_the_estimate_and_the_limit
);

/// A confidential client whose `spec.secret.secretRef` is an explicit `null`.
fn null_secret_ref_client(name: &str) -> String {
    client_manifest(
        name,
        "  redirectUris: [\"https://app.example.com/cb\"]
  secret:
    generate: true
    secretRef: null
",
    )
}

async fn an_explicit_null_reads_as_a_field_left_out_at_apply_and_in_the_reconciler() {
    let stack = Stack::start_alone().await;
    let name = format!("nulls-{}", stack.namespace());
    stack
        .apply(&policy_yaml(
            &name,
            &format!(
                "{}  rules:
    secretSource: SecretRef
    allowCustomCss: false
",
                only_namespace(&stack)
            ),
        ))
        .await;
    wait_policy_reason(&stack, &name, "AdmissionPolicyInPlace").await;
    let rule_message = format!(
        "ClientPolicy {name}, rule secretSource: spec.secret must name a team-held secretRef for \
         a confidential client (not generate)"
    );

    // `secretRef: null` is no team-held secret: kubectl apply refuses it with the rule's message
    // (once the API server has loaded the admission policy), not with an evaluation error, and
    // not admitting it as if a secretRef were there.
    let client = null_secret_ref_client("web");
    let mut tried = kubectl_apply(&stack, &client, true).await;
    stack
        .eventually("the admission policy is enforced", async || {
            tried = kubectl_apply(&stack, &client, true).await;
            !tried.ok
        })
        .await;
    assert!(tried.output.contains(&rule_message), "{}", tried.output);
    let refused = kubectl_apply(&stack, &client, false).await;
    assert!(!refused.ok, "{}", refused.output);
    assert!(refused.output.contains(&rule_message), "{}", refused.output);
    assert!(
        !refused.output.contains("resulted in error"),
        "{}",
        refused.output
    );
    assert!(stack.oidc_client("web").await.is_none());
    // `diagnose -f` says the same of the file.
    let (code, report) = diagnose_file(&stack, &client).await;
    assert_eq!(code, 1, "{report}");
    let said = findings(&report, "policy");
    assert!(said.contains(&format!("refused: {rule_message}")), "{said}");

    // `customCss: null` is no custom CSS: admitted, registered, and `diagnose -f` agrees.
    let branding = format!(
        "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: plain
spec:
  issuer: {ISSUER}
  branding:
    colors:
      primary: \"#112233\"
    customCss: null
"
    );
    let (_, report) = diagnose_file(&stack, &branding).await;
    let said = findings(&report, "policy");
    assert!(!said.contains("refused"), "{said}");
    let applied = kubectl_apply(&stack, &branding, false).await;
    assert!(applied.ok, "{}", applied.output);
    let registered = stack
        .wait_reason_of::<Branding>("plain", Reason::Registered)
        .await;
    assert_eq!(
        registered.status.unwrap().policy,
        None,
        "no policy holds it"
    );
}
nauthera_tests::e2e_test!(
    an_explicit_null_reads_as_a_field_left_out_at_apply_and_in_the_reconciler
);

/// A confidential client of `issuer`, named `name`.
fn client_of(name: &str, issuer: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata:
  name: {name}
spec:
  issuer: \"{issuer}\"
  redirectUris: [\"https://app.example.com/cb\"]
  secret:
    generate: true
"
    )
}

async fn an_issuer_pattern_reads_spaces_as_the_api_server_does() {
    let stack = Stack::start().await;
    // A no-break space is no `\s` to the API server (Go's RE2 is ASCII): admitted.
    let spaced = client_of("nbsp", &format!("{ISSUER}\u{a0}eu"));
    let (_, report) = diagnose_file(&stack, &spaced).await;
    let schema = &report["documents"][0]["checks"][0];
    assert_eq!(schema["name"], "schema");
    assert_eq!(schema["findings"], serde_json::json!([]), "{report}");
    let issuer = findings(&report, "issuer");
    assert!(issuer.contains("UNKNOWN_ISSUER"), "{issuer}");
    let applied = kubectl_apply(&stack, &spaced, false).await;
    assert!(applied.ok, "{}", applied.output);
    // The server knows no such issuer: refused for the reason `diagnose -f` named.
    let refused = stack.wait_reason("nbsp", Reason::Refused).await;
    assert_eq!(status_of(&refused).cause, Some(Cause::UnknownIssuer));

    // A tab is one: refused by the API server and by `diagnose -f`, both on spec.issuer.
    let tabbed = client_of("tab", &format!("{ISSUER}\\teu"));
    let refused = kubectl_apply(&stack, &tabbed, false).await;
    assert!(!refused.ok, "{}", refused.output);
    assert!(refused.output.contains("spec.issuer"), "{}", refused.output);
    let (code, report) = diagnose_file(&stack, &tabbed).await;
    assert_eq!(code, 1);
    let schema = findings(&report, "schema");
    assert!(schema.contains("spec.issuer:"), "{schema}");
}
nauthera_tests::e2e_test!(an_issuer_pattern_reads_spaces_as_the_api_server_does);

/// Runs the reconciler with these flags and no cluster: a setting the API server would refuse
/// stops it at start, before it listens. Its exit code and what it wrote.
async fn reconciler_at_start(args: &[&str]) -> (i32, String) {
    let output = tokio::process::Command::new(Binary::Reconciler.path().unwrap())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env(
            "NAUTHERA_SERVER_ADDRESS",
            "nauthera-server.nauthera.svc:8443",
        )
        .env("NAUTHERA_TLS_DIR", "/nonexistent")
        .env("NAUTHERA_LEASE_NAMESPACE", "nauthera-system")
        .env("NAUTHERA_IDENTITY", "replica-a")
        // Were it to start, it would listen on ports of its own choosing, never on another's.
        .env("NAUTHERA_METRICS_ADDRESS", "127.0.0.1:0")
        .env("NAUTHERA_PROBE_ADDRESS", "127.0.0.1:0")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(30), output)
        .await
        .expect("the reconciler stops at once")
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

async fn a_manager_the_api_server_would_refuse_in_events_stops_the_reconciler_naming_the_flag() {
    // A shard name that makes the default manager 64 characters: every Event a 422.
    let (code, said) = reconciler_at_start(&["--shard", &"s".repeat(44)]).await;
    assert_eq!(code, 2, "{said}");
    assert!(
        said.contains("--shard (NAUTHERA_SHARD): the manager name made from it")
            && said.contains("name part must be no more than 63 characters")
            && said.contains("use a shard name of at most 43 characters"),
        "{said}"
    );
    assert!(!said.contains("listening"), "{said}");
    // A manager with a space: no qualified name.
    let (code, said) = reconciler_at_start(&["--manager", "nauthera reconciler"]).await;
    assert_eq!(code, 2, "{said}");
    assert!(
        said.contains("--manager (NAUTHERA_MANAGER): `nauthera reconciler` cannot be used")
            && said.contains("reportingController"),
        "{said}"
    );
    // A shard and a cluster name that make a field manager of more than 128 bytes.
    let (code, said) = reconciler_at_start(&[
        "--shard",
        &"s".repeat(63),
        "--cluster-name",
        &"c".repeat(63),
    ])
    .await;
    assert_eq!(code, 2, "{said}");
    assert!(
        said.contains("--shard (NAUTHERA_SHARD) with --cluster-name (NAUTHERA_CLUSTER_NAME)")
            && said.contains("may not be more than 128 bytes"),
        "{said}"
    );
    // An identity longer than an Event's reportingInstance.
    let (code, said) = reconciler_at_start(&["--identity", &"i".repeat(129)]).await;
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("--identity (NAUTHERA_IDENTITY)"), "{said}");

    // The longest manager an Event takes works: its events are accepted by the API server (which
    // validates them) and name it.
    let manager = format!("security.example.com/{}", "m".repeat(63));
    let stack = Stack::start_with(StackOptions {
        reconciler_env: vec![("NAUTHERA_MANAGER".to_owned(), manager.clone())],
        ..StackOptions::default()
    })
    .await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    let events: Api<Event> = Api::namespaced(stack.client(), stack.namespace());
    let mut reporters = Vec::new();
    stack
        .eventually("the Registered event is recorded", async || {
            reporters = events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web")
                        && e.reason.as_deref() == Some("Registered")
                })
                .map(|e| e.reporting_controller.unwrap_or_default())
                .collect();
            !reporters.is_empty()
        })
        .await;
    assert_eq!(reporters, vec![manager]);
}
nauthera_tests::e2e_test!(
    a_manager_the_api_server_would_refuse_in_events_stops_the_reconciler_naming_the_flag
);
