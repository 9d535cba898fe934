//! The kubectl plugin end to end: real `kubectl nauthera` (the plugin on PATH) against the stack the
//! real reconciler runs in: `status` in every view with its exit codes, `restore` (one, several
//! with confirmation, `--all-drifted`, `--dry-run`), `diagnose` on real Refused,
//! SecretUndeliverable and Drifted resources, `diagnose -f` on a good and a bad manifest; and no
//! output or reconciler log line ever holds a generated secret.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_fake_server::Actor;
use nauthera_shared::RESTORE_ANNOTATION;
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::resources::RestoreOutcome;
use nauthera_tests::e2e::{ISSUER, PluginRun, Stack, generated_client, secret_value};
use serde_json::Value;

fn json(run: &PluginRun) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", run.all()))
}

/// Every generated secret in the namespace; none may appear in any output or log.
async fn generated_secrets(stack: &Stack, names: &[&str]) -> Vec<String> {
    let mut values = Vec::new();
    for name in names {
        if let Some(secret) = stack.secret(name).await
            && let Some(value) = secret_value(&secret, "clientSecret")
        {
            values.push(value);
        }
    }
    values
}

fn assert_no_secret(secrets: &[String], runs: &[&PluginRun], log: &str) {
    assert!(!secrets.is_empty(), "the test saw generated secrets");
    for secret in secrets {
        for run in runs {
            assert!(
                !run.all().contains(secret.as_str()),
                "a plugin output holds a generated secret"
            );
        }
        assert!(
            !log.contains(secret.as_str()),
            "the reconciler log holds a generated secret"
        );
    }
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

async fn status_shows_the_control_plane_and_every_resource_with_exit_codes() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;
    // The leader publishes its state; wait until the plugin finds it.
    let mut report = Value::Null;
    stack
        .eventually("the plugin reads the published state", async || {
            let run = stack.plugin(&["status", "-o", "json"]).await;
            report = serde_json::from_str(&run.stdout).unwrap_or(Value::Null);
            run.code == 0 && report["controlPlane"]["stateFound"] == true
        })
        .await;
    assert_eq!(report["kind"], "StatusReport");
    assert_eq!(report["apiVersion"], "kubectl-nauthera/v1");
    assert_eq!(report["attention"], false);
    let control = &report["controlPlane"];
    assert_eq!(control["leader"], "replica-a");
    assert!(
        control["serverBuild"]
            .as_str()
            .unwrap_or_default()
            .contains("fake"),
        "{control}"
    );
    assert_eq!(
        control["identity"],
        nauthera_tests::e2e::RECONCILER_IDENTITY
    );
    assert!(!control["grants"].as_array().unwrap().is_empty());
    let web = &report["resources"][0];
    assert_eq!(web["name"], "web");
    assert_eq!(web["phase"], "Registered");
    assert_eq!(web["reason"], "Registered");
    assert_eq!(web["grant"]["status"], "covered", "{web}");
    assert_eq!(web["declaredRevision"], web["serverRevision"], "{web}");

    let table = stack.plugin(&["status"]).await;
    assert_eq!(table.code, 0, "{}", table.all());
    for part in ["web", "Registered", "OIDCClient"] {
        assert!(table.stdout.contains(part), "{part}: {}", table.stdout);
    }
    let client_id = report["resources"][0]["clientId"]
        .as_str()
        .unwrap()
        .to_owned();
    let wide = stack.plugin(&["status", "-o", "wide"]).await;
    assert_eq!(wide.code, 0, "{}", wide.all());
    assert!(wide.stdout.contains(&client_id), "{}", wide.stdout);
    let one = stack.plugin(&["status", "oidcclient/web"]).await;
    assert_eq!(one.code, 0, "{}", one.all());

    // A refused resource needs attention: exit 1.
    stack
        .apply(&generated_client("bad").replace(ISSUER, "https://login.example.com/nobody"))
        .await;
    stack.wait_reason("bad", Reason::Refused).await;
    let attention = stack.plugin(&["status", "-o", "json"]).await;
    assert_eq!(attention.code, 1, "{}", attention.all());
    let report = json(&attention);
    assert_eq!(report["attention"], true);
    let bad = report["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "bad")
        .unwrap();
    assert_eq!(bad["phase"], "Error");
    assert_eq!(bad["reason"], "Refused");
    // A resource that does not exist is an error: exit 2.
    let missing = stack.plugin(&["status", "oidcclient/nope"]).await;
    assert_eq!(missing.code, 2, "{}", missing.all());

    let secrets = generated_secrets(&stack, &["web"]).await;
    assert_no_secret(
        &secrets,
        &[&table, &wide, &one, &attention, &missing],
        &stack.reconciler().log(),
    );
}
nauthera_tests::e2e_test!(status_shows_the_control_plane_and_every_resource_with_exit_codes);

async fn diagnose_explains_real_refused_undeliverable_and_drifted_resources() {
    let stack = Stack::start().await;
    stack
        .apply(&generated_client("bad").replace(ISSUER, "https://login.example.com/nobody"))
        .await;
    stack
        .apply(
            "apiVersion: v1
kind: Secret
metadata:
  name: taken
stringData:
  note: the team's own
",
        )
        .await;
    stack.apply(&generated_client("taken")).await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("bad", Reason::Refused).await;
    stack
        .wait_reason("taken", Reason::SecretUndeliverable)
        .await;
    stack.wait_reason("web", Reason::Registered).await;
    drift(&stack, "web").await;

    let refused = stack.plugin(&["diagnose", "oidcclient/bad"]).await;
    assert_eq!(refused.code, 1, "{}", refused.all());
    for part in ["Refused", "UNKNOWN_ISSUER", "FailedPrecondition"] {
        assert!(refused.stdout.contains(part), "{part}: {}", refused.stdout);
    }

    let undeliverable = stack
        .plugin(&["diagnose", "oidcclient/taken", "-o", "json"])
        .await;
    assert_eq!(undeliverable.code, 1, "{}", undeliverable.all());
    let report = json(&undeliverable);
    assert_eq!(report["kind"], "DiagnoseReport");
    let diagnosis = &report["diagnoses"][0];
    assert_eq!(diagnosis["reason"], "SecretUndeliverable");
    let steps = diagnosis["steps"].as_array().unwrap();
    let owner = steps
        .iter()
        .find(|s| s["check"] == "SecretOwner")
        .expect("a SecretOwner step");
    assert_eq!(owner["status"], "failed", "{owner}");
    let can_i = steps
        .iter()
        .find(|s| s["check"] == "ReconcilerCanI")
        .expect("a ReconcilerCanI step");
    assert_eq!(
        can_i["status"], "passed",
        "a real SubjectAccessReview: the shipped role may write Secrets: {can_i}"
    );

    let drifted = stack
        .plugin(&["diagnose", "oidcclient/web", "-o", "json"])
        .await;
    assert_eq!(drifted.code, 1, "{}", drifted.all());
    let text = drifted.stdout.clone();
    assert!(text.contains("alice@example.com"), "{text}");
    let drifted_table = stack.plugin(&["diagnose", "oidcclient/web"]).await;
    assert!(
        drifted_table.stdout.contains("Drifted"),
        "{}",
        drifted_table.stdout
    );

    let all = stack.plugin(&["diagnose", "--all"]).await;
    assert_eq!(all.code, 1, "{}", all.all());
    for name in ["bad", "taken", "web"] {
        assert!(all.stdout.contains(name), "{name}: {}", all.stdout);
    }
    let secrets = generated_secrets(&stack, &["web"]).await;
    assert_no_secret(
        &secrets,
        &[&refused, &undeliverable, &drifted, &drifted_table, &all],
        &stack.reconciler().log(),
    );
}
nauthera_tests::e2e_test!(diagnose_explains_real_refused_undeliverable_and_drifted_resources);

async fn restore_one_several_all_drifted_and_dry_run() {
    let stack = Stack::start().await;
    let names = ["one", "two", "three", "four"];
    for name in names {
        stack.apply(&generated_client(name)).await;
    }
    for name in names {
        stack.wait_reason(name, Reason::Registered).await;
    }
    for name in names {
        drift(&stack, name).await;
    }

    // --dry-run changes nothing and says something needs restoring.
    let dry = stack
        .plugin(&["restore", "oidcclient/one", "--dry-run"])
        .await;
    assert_eq!(dry.code, 1, "{}", dry.all());
    assert!(dry.all().contains("alice@example.com"), "{}", dry.all());
    let one = stack.oidc_client("one").await.unwrap();
    assert_eq!(one.status.unwrap().reason, Some(Reason::Drifted));
    assert!(
        !one.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(RESTORE_ANNOTATION)
    );

    // One, confirmed with --yes: restored, the event recorded, the annotation removed.
    let restored = stack
        .plugin(&["restore", "oidcclient/one", "--yes", "--timeout", "60s"])
        .await;
    assert_eq!(restored.code, 0, "{}", restored.all());
    let one = stack.oidc_client("one").await.unwrap();
    assert_eq!(one.status.as_ref().unwrap().phase, Some(Phase::Registered));
    stack.wait_event("one", "Restored").await;

    // The same resource drifts again and is restored again at once: the wait ends on the
    // status naming this request, not on the first restore's event.
    drift(&stack, "one").await;
    let again = stack
        .plugin(&[
            "restore",
            "oidcclient/one",
            "--yes",
            "--timeout",
            "60s",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(again.code, 0, "{}", again.all());
    let result = &json(&again)["results"][0];
    assert_eq!(result["outcome"], "restored", "{}", again.all());
    let request = result["request"]
        .as_str()
        .expect("the request id")
        .to_owned();
    let record = stack
        .oidc_client("one")
        .await
        .unwrap()
        .status
        .unwrap()
        .last_restore
        .expect("the status names the restore");
    assert_eq!(record.request.as_deref(), Some(request.as_str()));
    assert_eq!(record.outcome, RestoreOutcome::Restored);
    assert!(record.completed_at.is_some());

    // A restore asked for by hand when nothing drifted is answered too, and writes nothing.
    kube::Api::<nauthera_shared::resources::OIDCClient>::namespaced(
        stack.client(),
        stack.namespace(),
    )
    .patch(
        "one",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"annotations": {
            "nauthera.io/restore": "true", "nauthera.io/restore-request": "by-hand"
        }}})),
    )
    .await
    .expect("the annotations are set");
    stack
        .eventually("the request by hand answered", async || {
            stack
                .oidc_client("one")
                .await
                .and_then(|c| c.status?.last_restore)
                .is_some_and(|r| {
                    r.request.as_deref() == Some("by-hand")
                        && r.outcome == RestoreOutcome::NotDrifted
                })
        })
        .await;

    // Several without an answer: refused, nothing changed.
    let unanswered = stack
        .plugin(&["restore", "oidcclient/two", "oidcclient/three"])
        .await;
    assert_eq!(unanswered.code, 2, "{}", unanswered.all());
    for name in ["two", "three"] {
        let client = stack.oidc_client(name).await.unwrap();
        assert_eq!(client.status.unwrap().reason, Some(Reason::Drifted));
    }
    // Several, confirmed on standard input.
    let confirmed = stack
        .plugin_with_input(
            &[
                "restore",
                "oidcclient/two",
                "oidcclient/three",
                "--timeout",
                "60s",
            ],
            Some("y\n"),
        )
        .await;
    assert_eq!(confirmed.code, 0, "{}", confirmed.all());
    for name in ["two", "three"] {
        stack.wait_event(name, "Restored").await;
    }

    // Everything still drifted.
    let all = stack
        .plugin(&[
            "restore",
            "--all-drifted",
            "--yes",
            "--timeout",
            "60s",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(all.code, 0, "{}", all.all());
    let report = json(&all);
    assert_eq!(report["kind"], "RestoreReport");
    let results = report["results"].as_array().unwrap();
    assert!(
        results
            .iter()
            .any(|r| r["name"] == "four" && r["outcome"] == "restored"),
        "{report}"
    );
    for name in names {
        let client = stack.oidc_client(name).await.unwrap();
        assert_eq!(
            client.status.unwrap().phase,
            Some(Phase::Registered),
            "{name}"
        );
    }
    let status = stack.plugin(&["status"]).await;
    assert_eq!(status.code, 0, "{}", status.all());

    let secrets = generated_secrets(&stack, &names).await;
    assert_no_secret(
        &secrets,
        &[&dry, &restored, &unanswered, &confirmed, &all, &status],
        &stack.reconciler().log(),
    );
}
nauthera_tests::e2e_test!(restore_one_several_all_drifted_and_dry_run);

async fn diagnose_checks_a_good_and_a_bad_manifest_before_they_are_applied() {
    let stack = Stack::start().await;
    // The issuer is known to the plugin through an Organization resource.
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: Organization
metadata:
  name: acme
spec:
  slug: acme
  issuer: {ISSUER}
  displayName: Acme
"
        ))
        .await;
    stack
        .eventually("the plugin reads the published state", async || {
            let run = stack.plugin(&["status", "-o", "json"]).await;
            serde_json::from_str::<Value>(&run.stdout)
                .map(|r| r["controlPlane"]["stateFound"] == true)
                .unwrap_or(false)
        })
        .await;
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(
        &good,
        generated_client("fresh").replace(
            "  name: fresh\n",
            &format!("  name: fresh\n  namespace: {}\n", stack.namespace()),
        ),
    )
    .unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        generated_client("broken")
            .replace(ISSUER, "https://login.example.com/nobody")
            .replace(
                "tokenEndpointAuthMethod: client_secret_basic",
                "tokenEndpointAuthMethod: none",
            ),
    )
    .unwrap();

    let good_run = stack
        .plugin(&["diagnose", "-f", good.to_str().unwrap()])
        .await;
    assert_eq!(good_run.code, 0, "{}", good_run.all());
    let bad_run = stack
        .plugin(&["diagnose", "-f", bad.to_str().unwrap(), "-o", "json"])
        .await;
    assert_eq!(bad_run.code, 1, "{}", bad_run.all());
    let report = json(&bad_run);
    assert_eq!(report["kind"], "ManifestReport");
    let checks = report["documents"][0]["checks"].as_array().unwrap();
    // An issuer no Organization resource declares may still be served by one made outside
    // Kubernetes: a warning, not a failure.
    let issuer = checks.iter().find(|c| c["name"] == "issuer").unwrap();
    assert_eq!(issuer["status"], "warning", "{issuer}");
    // The CRD's own rule, as the API server would apply it.
    let schema = checks.iter().find(|c| c["name"] == "schema").unwrap();
    assert_eq!(schema["status"], "failed", "{schema}");
    assert!(
        schema["findings"][0]
            .as_str()
            .unwrap_or_default()
            .contains("a public client"),
        "a public client with a secret: {schema}"
    );

    // A directory, and with -R the directories inside it, as kubectl apply reads them.
    let nested = dir.path().join("team");
    std::fs::create_dir(&nested).unwrap();
    std::fs::write(
        nested.join("admin.yaml"),
        generated_client("admin").replace(
            "  deletionPolicy: Delete\n",
            "  deletionPolicy: Delete\n  brandingRef: {name: missing}\n",
        ),
    )
    .unwrap();
    let flat = stack
        .plugin(&["diagnose", "-f", dir.path().to_str().unwrap(), "-o", "json"])
        .await;
    assert_eq!(json(&flat)["documents"].as_array().unwrap().len(), 2);
    let deep = stack
        .plugin(&[
            "diagnose",
            "-f",
            dir.path().to_str().unwrap(),
            "-R",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(deep.code, 1, "{}", deep.all());
    let report = json(&deep);
    let documents = report["documents"].as_array().unwrap();
    assert_eq!(documents.len(), 3, "{report}");
    let admin = documents
        .iter()
        .find(|d| d["name"] == "admin")
        .expect("the nested file is read");
    assert!(admin["file"].as_str().unwrap().ends_with("team/admin.yaml"));
    let check = |name: &str| {
        admin["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        check("rules")["status"],
        "failed",
        "a reserved name: {admin}"
    );
    assert_eq!(
        check("branding")["status"],
        "failed",
        "a missing Branding: {admin}"
    );
}
nauthera_tests::e2e_test!(diagnose_checks_a_good_and_a_bad_manifest_before_they_are_applied);

async fn the_plugin_takes_kubectl_output_and_connection_flags() {
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;

    // `-A` wins over `-n`, as in kubectl; `-o name` prints what `kubectl get -o name` does.
    let names = stack
        .plugin(&["status", "-n", "elsewhere", "-A", "-o", "name"])
        .await;
    // (Only this test's namespace holds a `web` on the emulator; a shared real cluster holds
    // other tests' too.)
    let listed: Vec<&str> = names.stdout.lines().collect();
    assert!(
        listed.contains(&"oidcclient.nauthera.io/web")
            && (stack.cluster.emulator().is_none() || listed.len() == 1),
        "{}",
        names.all()
    );
    // `-o jsonpath=` over the JSON report, ranges and literals as kubectl reads them.
    let names = stack
        .plugin(&[
            "status",
            "-o",
            r#"jsonpath={range .resources[*]}{.name}:{.phase}{"\n"}{end}"#,
        ])
        .await;
    assert_eq!(names.stdout, "web:Registered\n", "{}", names.all());
    let bad = stack
        .plugin(&["status", "-o", "jsonpath={.a[?(@.b)]}"])
        .await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("a filter"), "{}", bad.all());
    // `--no-headers`: the rows alone.
    let rows = stack.plugin(&["status", "--no-headers"]).await;
    let lines: Vec<&str> = rows.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", rows.all());
    assert!(
        lines[0].starts_with("OIDCClient") && lines[0].contains("web"),
        "{}",
        rows.stdout
    );
    // Durations in kubectl's form.
    let timed = stack
        .plugin(&["status", "--request-timeout", "1m30s", "-o", "name"])
        .await;
    assert_eq!(timed.code, 0, "{}", timed.all());
    let bad = stack.plugin(&["status", "--request-timeout", "soon"]).await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("90s, 1m30s or 2m"), "{}", bad.all());
    // Impersonation: a user without RBAC on the resources is refused by the API server.
    let denied = stack
        .plugin(&[
            "status",
            "--as",
            "nobody@example.test",
            "--as-group",
            "nobody",
        ])
        .await;
    assert_ne!(denied.code, 0, "{}", denied.all());
    assert!(
        denied.all().contains("forbidden") || denied.all().contains("Forbidden"),
        "{}",
        denied.all()
    );
}
nauthera_tests::e2e_test!(the_plugin_takes_kubectl_output_and_connection_flags);

async fn status_watch_prints_a_row_for_each_change_until_stopped() {
    use tokio::io::AsyncBufReadExt;
    let stack = Stack::start().await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::Registered).await;

    let mut watch = stack.plugin_spawn(&["status", "oidcclient", "-w", "--no-headers"]);
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut next_line = async || {
        tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("a line within a minute")
            .expect("the output is read")
            .expect("the watch is still running")
    };
    // The current state first, then a row per change.
    let first = next_line().await;
    assert!(
        first.starts_with("OIDCClient") && first.contains("web"),
        "{first}"
    );
    stack.apply(&generated_client("shop")).await;
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|line: &String| line.contains("shop") && line.contains("Registered"))
    {
        seen.push(next_line().await);
    }
    assert!(
        seen.iter().all(|line| line.starts_with("OIDCClient")),
        "rows only: {seen:#?}"
    );
    // An update that changes nothing shown (the finalizer, a status of the same facts) prints
    // no second identical row.
    let mut rows = seen.clone();
    rows.sort();
    rows.dedup();
    assert_eq!(rows.len(), seen.len(), "a row printed twice: {seen:#?}");
    assert!(
        watch.try_wait().unwrap().is_none(),
        "it runs until it is stopped"
    );
    watch.kill().await.unwrap();
}
nauthera_tests::e2e_test!(status_watch_prints_a_row_for_each_change_until_stopped);
