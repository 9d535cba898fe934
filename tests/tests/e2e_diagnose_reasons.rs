//! `kubectl nauthera diagnose` on every reason of the catalog a live OIDCClient can show, each one
//! reached by the real reconciler under the shipped RBAC: the report names the reason, links its
//! runbook, runs exactly the runbook's diagnosis steps, exits 0 only for a healthy resource, and
//! never prints a generated secret.
//!
//! `Deleted`, `Orphaned` and `DeletionSkippedDrifted` are recorded as the object goes away, so no
//! live resource shows them; `e2e_deletion.rs` asserts their events.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::api::{Patch, PatchParams};
use nauthera_fake_server::{Actor, Fault, FaultCode, Method};
use nauthera_shared::catalog::{Reason, runbook_url};
use nauthera_tests::e2e::{
    ISSUER, PluginRun, RECONCILER_TLS_SECRET, Stack, generated_client, secret_ref_client,
    secret_value,
};
use serde_json::Value;

/// Runs `diagnose -o json` on one OIDCClient and checks the report against the catalog entry of
/// `reason`.
async fn diagnose(stack: &Stack, name: &str, reason: Reason) -> PluginRun {
    let target = format!("oidcclient/{name}");
    let run = stack
        .plugin(&["diagnose", &target, "-n", stack.namespace(), "-o", "json"])
        .await;
    let healthy = matches!(reason, Reason::Registered | Reason::Restored);
    assert_eq!(
        run.code,
        if healthy { 0 } else { 1 },
        "{name} ({reason}): {}",
        run.all()
    );
    let report: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{name}: not JSON ({e}):\n{}", run.all()));
    let diagnosis = &report["diagnoses"][0];
    assert_eq!(diagnosis["reason"], reason.as_str(), "{name}: {diagnosis}");
    assert_eq!(
        diagnosis["runbook"],
        runbook_url(reason).as_str(),
        "{name}: {diagnosis}"
    );
    assert_eq!(
        diagnosis["steps"].as_array().map(Vec::len),
        Some(reason.entry().runbook.diagnosis.len()),
        "{name} ({reason}): one step per runbook diagnosis step: {diagnosis}"
    );
    run
}

/// Changes the declared display name, so the reconciler calls the server again.
/// The log step's command, run over the reconciler's own log in place of `kubectl logs`, selects
/// the reconciler's lines about the resource (its attempts with their reason) and no other.
fn assert_log_step_selects_the_resource(stack: &Stack, run: &PluginRun, name: &str, reason: &str) {
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let step = report["diagnoses"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["check"] == "ReconcilerLogs")
        .unwrap_or_else(|| panic!("no log step: {report}"));
    let command = step["command"].as_str().unwrap();
    let (read, filter) = command
        .split_once(" | ")
        .unwrap_or_else(|| panic!("a log read and its filter: {command}"));
    assert!(
        read.contains(" logs deploy/nauthera-reconciler"),
        "{command}"
    );
    let log = stack.reconciler().log_path();
    let output = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("{filter} < '{}'", log.display()))
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|line| line["message"] == "reconciled" && line["reason"] == reason),
        "{command} selects no {reason} attempt:\n{}",
        stack.reconciler().log_tail()
    );
    for line in &lines {
        assert_eq!(
            line["name"], name,
            "{command} selects another resource's line"
        );
        assert_eq!(line["namespace"], stack.namespace(), "{command}");
    }
}

async fn edit_manifest(stack: &Stack, name: &str, display_name: &str) {
    let patch = serde_json::json!({ "spec": { "displayName": display_name } });
    stack
        .oidc_clients()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn drift(stack: &Stack, name: &str) {
    stack
        .server
        .edit_client(
            &stack.object_ref(name),
            &Actor::dashboard("alice@example.com").because("hotfix"),
            |spec| spec.display_name = format!("{name} (edited by hand)"),
        )
        .unwrap();
    stack.wait_reason(name, Reason::Drifted).await;
}

/// Reasons no live resource shows: the deletion outcomes are recorded as the object goes away
/// (their events are asserted in `e2e_deletion.rs`).
const NOT_ON_A_LIVE_RESOURCE: [Reason; 3] = [
    Reason::Deleted,
    Reason::Orphaned,
    Reason::DeletionSkippedDrifted,
];

/// Reasons that need a second reconciler, diagnosed where one runs; and a ClientPolicy's own
/// reason, which no OIDCClient shows, checked against `diagnose -f` where policies are refused.
const DIAGNOSED_ELSEWHERE: [(Reason, &str); 4] = [
    (Reason::ManagedElsewhere, "tests/tests/e2e_multi_cluster.rs"),
    (Reason::PolicyRefused, "tests/tests/e2e_refused_inputs.rs"),
    (Reason::AdoptionRequired, "tests/tests/e2e_adopt_plugin.rs"),
    (Reason::Observed, "tests/tests/e2e_adopt_plugin.rs"),
];

/// The resources whose secret the server generates; none of these secrets may be printed.
const GENERATED: [&str; 7] = [
    "registered",
    "drifted",
    "restored",
    "deleting",
    "unreachable",
    "credential",
    "trust-anchor",
];

async fn diagnose_reports_every_reason_a_live_resource_shows() {
    let stack = Stack::start_alone().await;
    stack
        .apply(
            "apiVersion: v1
kind: Secret
metadata:
  name: undeliverable
stringData:
  note: the team's own
",
        )
        .await;
    for name in GENERATED {
        stack.apply(&generated_client(name)).await;
    }
    stack.apply(&generated_client("undeliverable")).await;
    stack
        .apply(&generated_client("refused").replace(ISSUER, "https://login.example.com/nobody"))
        .await;
    // A Secret with the key the manifest names empty (a Secret or key that is not there at all
    // is waited for as Pending).
    stack
        .apply(
            "apiVersion: v1
kind: Secret
metadata:
  name: keyless-secret
stringData:
  clientSecret: \"\"
",
        )
        .await;
    stack
        .apply(&secret_ref_client("missing-ref", "keyless-secret"))
        .await;
    for name in GENERATED {
        stack.wait_reason(name, Reason::Registered).await;
    }
    let mut secrets = Vec::new();
    for name in GENERATED {
        let secret = stack.secret(name).await.unwrap();
        secrets.push(secret_value(&secret, "clientSecret").unwrap());
    }
    stack.wait_reason("refused", Reason::Refused).await;
    stack
        .wait_reason("undeliverable", Reason::SecretUndeliverable)
        .await;
    stack
        .wait_reason("missing-ref", Reason::SecretRefUnavailable)
        .await;
    drift(&stack, "drifted").await;
    drift(&stack, "restored").await;
    stack.annotate_restore("restored").await;
    stack.wait_event("restored", "Restored").await;

    let mut runs = vec![
        diagnose(&stack, "registered", Reason::Registered).await,
        diagnose(&stack, "refused", Reason::Refused).await,
        diagnose(&stack, "undeliverable", Reason::SecretUndeliverable).await,
        diagnose(&stack, "missing-ref", Reason::SecretRefUnavailable).await,
        diagnose(&stack, "drifted", Reason::Drifted).await,
    ];
    // The restore is written as the resource's reason, not only as an event.
    stack.wait_reason("restored", Reason::Restored).await;
    runs.push(diagnose(&stack, "restored", Reason::Restored).await);

    // Held back by ClientPolicies, while no fault is injected; the policies cover every client
    // of the namespace, so they go before the next cases do.
    stack
        .apply(&generated_client("over-scoped").replace(
            "scopes: [openid, profile]",
            "scopes: [openid, profile, admin]",
        ))
        .await;
    stack.wait_reason("over-scoped", Reason::Registered).await;
    stack
        .apply(
            "apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: scoped
spec:
  rules:
    scopes: [openid, profile]
---
apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: reviewed
spec:
  rules:
    approval: {}
",
        )
        .await;
    stack
        .wait_reason("over-scoped", Reason::PolicyViolation)
        .await;
    runs.push(diagnose(&stack, "over-scoped", Reason::PolicyViolation).await);
    stack.apply(&generated_client("awaiting")).await;
    stack
        .wait_reason("awaiting", Reason::WaitingForApproval)
        .await;
    runs.push(diagnose(&stack, "awaiting", Reason::WaitingForApproval).await);

    let policies: kube::Api<nauthera_shared::resources::ClientPolicy> =
        kube::Api::all(stack.client());
    for name in ["scoped", "reviewed"] {
        policies
            .delete(name, &kube::api::DeleteParams::default())
            .await
            .unwrap();
    }
    // Released once the reconciler has let the policies go.
    stack.wait_reason("awaiting", Reason::Registered).await;

    // Deleting: the finalizer holds the object while DeleteClient keeps failing.
    stack.server.inject_fault(
        Some(Method::DeleteClient),
        Fault::always(FaultCode::Unavailable),
    );
    stack.delete_oidc_client("deleting").await;
    stack.wait_reason("deleting", Reason::Deleting).await;
    let deleting = diagnose(&stack, "deleting", Reason::Deleting).await;
    assert_log_step_selects_the_resource(&stack, &deleting, "deleting", "Deleting");
    runs.push(deleting);

    // Pending: a retried code keeps the write waiting with backoff.
    stack.server.inject_fault(
        Some(Method::ApplyClient),
        Fault::always(FaultCode::Unavailable),
    );
    stack.apply(&generated_client("pending")).await;
    stack.wait_reason("pending", Reason::Pending).await;
    let pending = diagnose(&stack, "pending", Reason::Pending).await;
    // The probe still answers: the same word as in `status`'s header.
    let report: Value = serde_json::from_str(&pending.stdout).unwrap();
    let probe = report["diagnoses"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["check"] == "ProbeState")
        .unwrap_or_else(|| panic!("no probe step: {report}"));
    assert!(
        probe["findings"][0]
            .as_str()
            .is_some_and(|finding| finding.starts_with("probe: ok")),
        "{probe}"
    );
    runs.push(pending);

    // The control-plane reasons reach a resource when it is edited while the connection cannot
    // be made.
    stack.server.go_unreachable().await;
    edit_manifest(&stack, "unreachable", "edited while unreachable").await;
    stack.wait_reason("unreachable", Reason::Unreachable).await;
    let unreachable = diagnose(&stack, "unreachable", Reason::Unreachable).await;
    // The certificate step names the reconciler's own Secret, as configured, never the
    // client's Secret.
    assert!(
        unreachable
            .stdout
            .contains(&format!("get secret {RECONCILER_TLS_SECRET} -o jsonpath")),
        "{}",
        unreachable.all()
    );
    assert!(
        !unreachable.stdout.contains("get secret unreachable "),
        "{}",
        unreachable.all()
    );
    runs.push(unreachable);
    stack.server.restart().await.unwrap();
    stack.reconciler().wait_readyz(200, "ok").await;

    let key = stack.tls_dir.join("tls.key");
    let saved_key = std::fs::read(&key).unwrap();
    std::fs::remove_file(&key).unwrap();
    stack
        .reconciler()
        .wait_readyz(503, "CredentialUnavailable")
        .await;
    edit_manifest(&stack, "credential", "edited without a key").await;
    stack
        .wait_reason("credential", Reason::CredentialUnavailable)
        .await;
    runs.push(diagnose(&stack, "credential", Reason::CredentialUnavailable).await);
    std::fs::write(&key, &saved_key).unwrap();
    stack.reconciler().wait_readyz(200, "ok").await;

    let ca = stack.tls_dir.join("ca.crt");
    let saved_ca = std::fs::read(&ca).unwrap();
    std::fs::remove_file(&ca).unwrap();
    stack
        .reconciler()
        .wait_readyz(503, "TrustAnchorUnavailable")
        .await;
    edit_manifest(&stack, "trust-anchor", "edited without a CA").await;
    stack
        .wait_reason("trust-anchor", Reason::TrustAnchorUnavailable)
        .await;
    runs.push(diagnose(&stack, "trust-anchor", Reason::TrustAnchorUnavailable).await);
    std::fs::write(&ca, &saved_ca).unwrap();

    let covered = [
        Reason::PolicyViolation,
        Reason::WaitingForApproval,
        Reason::Registered,
        Reason::Refused,
        Reason::SecretUndeliverable,
        Reason::SecretRefUnavailable,
        Reason::Drifted,
        Reason::Restored,
        Reason::Deleting,
        Reason::Pending,
        Reason::Unreachable,
        Reason::CredentialUnavailable,
        Reason::TrustAnchorUnavailable,
    ];
    assert_eq!(runs.len(), covered.len());
    // A reason added to the catalog needs a case here, or a word on why no live resource shows it.
    for reason in Reason::ALL {
        assert!(
            covered.contains(&reason)
                || NOT_ON_A_LIVE_RESOURCE.contains(&reason)
                || DIAGNOSED_ELSEWHERE.iter().any(|(elsewhere, test)| {
                    *elsewhere == reason
                        && std::fs::read_to_string(
                            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                                .join("..")
                                .join(test),
                        )
                        .is_ok_and(|text| text.contains(&format!("Reason::{reason}")))
                }),
            "{reason} has no diagnose case"
        );
    }
    for secret in &secrets {
        for run in &runs {
            assert!(
                !run.all().contains(secret.as_str()),
                "a diagnose output holds a generated secret"
            );
        }
    }
}
nauthera_tests::e2e_test!(diagnose_reports_every_reason_a_live_resource_shows);
