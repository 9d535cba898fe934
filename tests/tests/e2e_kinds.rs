//! Branding, IdentityProvider and Organization on the reconcile core, and the order between
//! kinds: what waits for what, what drifts, what a deletion says about those depending on it.

use std::time::{Duration, Instant};

use nauthera_fake_server::{Actor, Fault, FaultCode, Method};
use nauthera_shared::RESTORE_ANNOTATION;
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use nauthera_tests::e2e::{ISSUER, Stack, generated_client_with, sha256_hex};

/// The issuer of an organization the server does not hold until a manifest declares it.
const GLOBEX_ISSUER: &str = "https://login.example.com/globex";

fn branding(name: &str, title: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: {name}
spec:
  issuer: {ISSUER}
  branding:
    colors:
      primary: \"#112233\"
    texts:
      title: {title}
"
    )
}

fn primary_color(stack: &Stack, name: &str) -> Option<String> {
    stack
        .server
        .branding(&stack.object_ref(name))
        .and_then(|b| b.document)
        .and_then(|d| d.colors.get("primary").cloned())
}

async fn a_branding_registers_drifts_when_changed_on_the_server_and_is_restored_on_request() {
    let stack = Stack::start().await;
    stack.apply(&branding("sign-in", "Welcome to Acme")).await;
    let registered = stack
        .wait_reason_of::<Branding>("sign-in", Reason::Registered)
        .await;
    let status = registered.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(Phase::Registered));
    assert_eq!(status.slug.as_deref(), Some("acme"));
    let held = stack
        .server
        .branding(&stack.object_ref("sign-in"))
        .expect("the server holds the branding");
    assert_eq!(status.revision.as_deref(), Some(held.revision.as_str()));
    assert_eq!(primary_color(&stack, "sign-in").as_deref(), Some("#112233"));

    stack
        .server
        .edit_branding(
            &stack.object_ref("sign-in"),
            &Actor::dashboard("alice@example.com"),
            |document| {
                document.colors.insert("primary".into(), "#ff0000".into());
            },
        )
        .unwrap();
    let drifted = stack
        .wait_reason_of::<Branding>("sign-in", Reason::Drifted)
        .await;
    let drift = drifted
        .status
        .unwrap()
        .drift
        .expect("the drift is described");
    assert_eq!(drift.actor.as_deref(), Some("user:alice@example.com"));
    assert!(
        drift
            .fields
            .iter()
            .any(|f| f == "spec.branding.colors.primary"),
        "{:?}",
        drift.fields
    );
    // Not written over.
    assert_eq!(primary_color(&stack, "sign-in").as_deref(), Some("#ff0000"));
    // The runbook's audit query selects the Branding's records, not a client's.
    let diagnosis = stack.plugin(&["diagnose", "branding/sign-in"]).await;
    assert!(
        diagnosis
            .stdout
            .contains(r#""kind": "OBJECT_KIND_BRANDING", "name": "sign-in""#)
            && !diagnosis.stdout.contains("clientId"),
        "{}",
        diagnosis.stdout
    );

    stack.annotate_restore_of::<Branding>("sign-in").await;
    stack
        .wait_for_kind("sign-in", "restored", |b: &Branding| {
            // The reason is `Restored` until the next change; the phase is back.
            b.status
                .as_ref()
                .is_some_and(|s| s.phase == Some(Phase::Registered) && s.drift.is_none())
                && !b
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(RESTORE_ANNOTATION))
        })
        .await;
    assert_eq!(primary_color(&stack, "sign-in").as_deref(), Some("#112233"));
    stack.wait_event_of("Branding", "sign-in", "Restored").await;
    // `kubectl get events` shows when each was last seen (the events carry `eventTime`).
    let table = stack.kubectl(&["get", "events"]).await;
    assert_eq!(table.code, 0, "{}", table.stderr);
    let mut lines = table.stdout.lines();
    assert!(
        lines
            .next()
            .is_some_and(|header| header.starts_with("LAST SEEN")),
        "{}",
        table.stdout
    );
    for line in lines {
        let last_seen = line.split_whitespace().next().unwrap_or_default();
        assert!(
            last_seen.starts_with(|c: char| c.is_ascii_digit()) && !line.starts_with(' '),
            "no LAST SEEN in {line:?}:\n{}",
            table.stdout
        );
    }

    // The plugin diagnoses a Branding with its live facts, each event once (a real API server
    // serves every event through two APIs).
    let diagnosis = stack.plugin(&["diagnose", "branding/sign-in"]).await;
    assert_eq!(diagnosis.code, 0, "{}", diagnosis.all());
    let registered = diagnosis
        .stdout
        .lines()
        .filter(|line| line.contains("Normal  Registered  registered generation 1"))
        .count();
    assert_eq!(registered, 1, "{}", diagnosis.stdout);
}
nauthera_tests::e2e_test!(
    a_branding_registers_drifts_when_changed_on_the_server_and_is_restored_on_request
);

async fn an_unencodable_branding_is_refused_here_and_a_client_waiting_for_it_proceeds_once_it_registers()
 {
    let stack = Stack::start().await;
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
    let refused = stack
        .wait_reason_of::<Branding>("portal", Reason::Refused)
        .await;
    let message = refused.status.unwrap().message.unwrap();
    assert!(
        message.contains("spec.branding.logo.data") && message.contains("nothing was sent"),
        "{message}"
    );
    assert_eq!(
        stack.server.counters().calls_of(Method::ApplyBranding),
        0,
        "an unencodable branding never reaches the server"
    );

    stack
        .apply(&generated_client_with(
            "web",
            "Delete",
            "  brandingRef:\n    name: portal\n",
        ))
        .await;
    let waiting = stack
        .wait_for("web", "waiting for its Branding", |client| {
            client.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Pending)
                    && s.message.as_deref().is_some_and(|m| {
                        m.contains(&format!("Branding {}/portal", stack.namespace()))
                    })
            })
        })
        .await;
    assert_eq!(
        waiting.status.unwrap().revision,
        None,
        "nothing was written"
    );

    stack.apply(&branding("portal", "Portal")).await;
    stack
        .wait_reason_of::<Branding>("portal", Reason::Registered)
        .await;
    let registered_seen = Instant::now();
    stack.wait_reason("web", Reason::Registered).await;
    // Proceeding is driven by the Branding's registration, not by a periodic resend.
    assert!(
        registered_seen.elapsed() < Duration::from_secs(10),
        "the client took {:?} after its Branding registered",
        registered_seen.elapsed()
    );
    let events = stack.events_for("OIDCClient", "web").await;
    assert!(
        !events.iter().any(|e| e.reason == "Refused"),
        "the client was never refused: {events:#?}"
    );
    assert!(stack.server.client(&stack.object_ref("web")).is_some());
}
nauthera_tests::e2e_test!(
    an_unencodable_branding_is_refused_here_and_a_client_waiting_for_it_proceeds_once_it_registers
);

async fn an_organization_goes_first_and_is_not_deleted_while_it_holds_objects() {
    let stack = Stack::start().await;
    // The first writes of the organization fail and are retried, so what depends on it waits.
    stack.server.inject_fault(
        Some(Method::ApplyOrganization),
        Fault::times(FaultCode::Unavailable, 3),
    );
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: Organization
metadata:
  name: globex
spec:
  slug: globex
  issuer: {GLOBEX_ISSUER}
  displayName: Globex
  deletionPolicy: Delete
"
        ))
        .await;
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata:
  name: app
spec:
  issuer: {GLOBEX_ISSUER}
  displayName: Globex app
  redirectUris: [https://app.globex.test/callback]
  grantTypes: [authorization_code]
  responseTypes: [code]
  scopes: [openid]
  tokenEndpointAuthMethod: client_secret_basic
  secret:
    generate: true
"
        ))
        .await;
    stack
        .wait_for("app", "waiting for its Organization", |client| {
            client.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Pending)
                    && s.message.as_deref().is_some_and(|m| {
                        m.contains(&format!("Organization {}/globex", stack.namespace()))
                    })
            })
        })
        .await;
    let organization = stack
        .wait_reason_of::<Organization>("globex", Reason::Registered)
        .await;
    assert_eq!(organization.status.unwrap().slug.as_deref(), Some("globex"));
    stack.wait_reason("app", Reason::Registered).await;
    assert!(stack.server.organization("globex").is_some());
    let events = stack.events_for("OIDCClient", "app").await;
    assert!(!events.iter().any(|e| e.reason == "Refused"), "{events:#?}");

    // The server keeps an organization that still holds objects; the reason names them.
    stack.delete_manifest::<Organization>("globex").await;
    stack
        .wait_for_kind("globex", "waiting for its objects", |o: &Organization| {
            o.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Deleting)
                    && s.message.as_deref().is_some_and(|m| {
                        m.contains("ORGANIZATION_NOT_EMPTY")
                            && m.contains(&format!("OIDCClient {}/app", stack.namespace()))
                    })
            })
        })
        .await;
    assert!(stack.server.organization("globex").is_some());

    stack.delete_manifest::<OIDCClient>("app").await;
    stack.wait_gone_of::<OIDCClient>("app").await;
    stack.wait_gone_of::<Organization>("globex").await;
    assert!(stack.server.organization("globex").is_none());
}
nauthera_tests::e2e_test!(an_organization_goes_first_and_is_not_deleted_while_it_holds_objects);

async fn an_identity_provider_sends_its_upstream_secret_again_when_it_changes_also_while_the_reconciler_is_down()
 {
    let mut stack = Stack::start().await;
    let upstream_secret = |value: &str| {
        format!(
            "apiVersion: v1
kind: Secret
metadata:
  name: corp-idp
stringData:
  clientSecret: {value}
"
        )
    };
    stack.apply(&upstream_secret("first-upstream-value")).await;
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: IdentityProvider
metadata:
  name: corp
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
"
        ))
        .await;
    let registered = stack
        .wait_reason_of::<IdentityProvider>("corp", Reason::Registered)
        .await;
    let server = stack.server.clone();
    let corp = stack.object_ref("corp");
    let held_secret = || server.identity_provider_secret_hash(&corp);
    assert_eq!(held_secret(), Some(sha256_hex(b"first-upstream-value")));
    let status = serde_json::to_string(&registered.status).unwrap();
    assert!(!status.contains("first-upstream-value"), "{status}");

    stack.apply(&upstream_secret("second-upstream-value")).await;
    stack
        .eventually("the changed secret is sent", async || {
            held_secret() == Some(sha256_hex(b"second-upstream-value"))
        })
        .await;

    // Changed while no reconciler runs: sent by the next one.
    stack.reconciler.take().unwrap().stop().await;
    stack.apply(&upstream_secret("third-upstream-value")).await;
    let next = stack.start_replica("replica-b").await.unwrap();
    next.wait_ready().await.unwrap();
    stack.reconciler = Some(next);
    stack
        .eventually("the secret changed while down is sent", async || {
            held_secret() == Some(sha256_hex(b"third-upstream-value"))
        })
        .await;
    let provider = stack
        .wait_reason_of::<IdentityProvider>("corp", Reason::Registered)
        .await;
    let status = serde_json::to_string(&provider.status).unwrap();
    assert!(!status.contains("upstream-value"), "{status}");
    assert!(!stack.reconciler().log().contains("upstream-value"));
}
nauthera_tests::e2e_test!(an_identity_provider_sends_its_upstream_secret_again_when_it_changes_also_while_the_reconciler_is_down);

async fn brandings_changed_on_the_server_while_the_reconciler_was_down_are_drifted_not_written_over()
 {
    let mut stack = Stack::start().await;
    stack.apply(&branding("kept", "Kept")).await;
    stack.apply(&branding("edited", "Edited")).await;
    for name in ["kept", "edited"] {
        stack
            .wait_reason_of::<Branding>(name, Reason::Registered)
            .await;
    }
    stack.reconciler.take().unwrap().stop().await;
    let bob = Actor::dashboard("bob@example.com");
    for name in ["kept", "edited"] {
        stack
            .server
            .edit_branding(&stack.object_ref(name), &bob, |document| {
                document.texts.insert("title".into(), "Bob's".into());
            })
            .unwrap();
    }
    // A new generation of one of them: its write names the revision it last wrote, which the
    // server no longer holds.
    stack.apply(&branding("edited", "Edited again")).await;
    let next = stack.start_replica("replica-b").await.unwrap();
    next.wait_ready().await.unwrap();
    stack.reconciler = Some(next);
    for name in ["kept", "edited"] {
        let drifted = stack
            .wait_reason_of::<Branding>(name, Reason::Drifted)
            .await;
        let drift = drifted.status.unwrap().drift.unwrap();
        assert_eq!(
            drift.actor.as_deref(),
            Some("user:bob@example.com"),
            "{name}"
        );
        let title = stack
            .server
            .branding(&stack.object_ref(name))
            .and_then(|b| b.document)
            .and_then(|d| d.texts.get("title").cloned());
        assert_eq!(title.as_deref(), Some("Bob's"), "{name} was written over");
    }
    assert!(
        stack
            .server
            .counters()
            .refusals
            .contains_key("REVISION_MISMATCH"),
        "the edited one met the server's revision check: {:?}",
        stack.server.counters().refusals
    );
}
nauthera_tests::e2e_test!(
    brandings_changed_on_the_server_while_the_reconciler_was_down_are_drifted_not_written_over
);

async fn deleting_a_branding_that_clients_reference_says_which() {
    let stack = Stack::start().await;
    stack.apply(&branding("shared", "Shared")).await;
    stack
        .apply(&generated_client_with(
            "one",
            "Delete",
            "  brandingRef:\n    name: shared\n",
        ))
        .await;
    stack
        .wait_reason_of::<Branding>("shared", Reason::Registered)
        .await;
    stack.wait_reason("one", Reason::Registered).await;

    stack.delete_manifest::<Branding>("shared").await;
    stack.wait_gone_of::<Branding>("shared").await;
    assert!(stack.server.branding(&stack.object_ref("shared")).is_none());
    // Events are written by their own tasks, after the finalizer may be gone: wait for it.
    let deleted = stack.wait_event_of("Branding", "shared", "Deleted").await;
    assert!(
        deleted
            .message
            .contains(&format!("OIDCClient {}/one", stack.namespace())),
        "{}",
        deleted.message
    );
}
nauthera_tests::e2e_test!(deleting_a_branding_that_clients_reference_says_which);

async fn a_changed_upstream_secret_whose_answer_was_lost_is_sent_once_more_and_then_rests() {
    let stack = Stack::start().await;
    let upstream_secret = |value: &str| {
        format!(
            "apiVersion: v1
kind: Secret
metadata:
  name: corp-idp
stringData:
  clientSecret: {value}
"
        )
    };
    stack.apply(&upstream_secret("first-upstream-value")).await;
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: IdentityProvider
metadata:
  name: corp
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
"
        ))
        .await;
    stack
        .wait_reason_of::<IdentityProvider>("corp", Reason::Registered)
        .await;
    let server = stack.server.clone();
    let corp = stack.object_ref("corp");
    let held_secret = || server.identity_provider_secret_hash(&corp);

    // The write that sends the new value takes effect and its answer is lost.
    stack.server.inject_fault(
        Some(Method::ApplyIdentityProvider),
        Fault {
            lose_answer: true,
            ..Fault::times(FaultCode::Unavailable, 1)
        },
    );
    stack.server.reset_counters();
    stack.apply(&upstream_secret("second-upstream-value")).await;
    stack
        .eventually("the changed secret is in force and recorded", async || {
            held_secret() == Some(sha256_hex(b"second-upstream-value"))
                && stack
                    .server
                    .counters()
                    .calls_of(Method::ApplyIdentityProvider)
                    >= 2
                && stack
                    .manifest::<IdentityProvider>("corp")
                    .await
                    .and_then(|p| p.status)
                    .is_some_and(|s| s.reason == Some(Reason::Registered))
        })
        .await;
    // Settled: the lost write, a retry refused for its stale revision, one write over the
    // adopted revision with the value read now (waits a few debounces for anything more).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let counters = stack.server.counters();
    assert_eq!(
        counters.calls_of(Method::ApplyIdentityProvider),
        3,
        "{counters:?}"
    );
    assert_eq!(counters.writes_by("nauthera-reconciler"), 2, "{counters:?}");
    // Registered once, with the value it sent recorded: never first "Registered" over the
    // adopted write and then a write after it.
    let logs = stack.reconciler().log();
    let after_fault: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("\"name\":\"corp\"") && l.contains("\"message\":\"reconciled\""))
        .skip_while(|l| !l.contains("the answer was lost"))
        .collect();
    let registered = after_fault
        .iter()
        .filter(|l| l.contains("\"reason\":\"Registered\""))
        .count();
    assert_eq!(registered, 1, "{after_fault:#?}");
}
nauthera_tests::e2e_test!(
    a_changed_upstream_secret_whose_answer_was_lost_is_sent_once_more_and_then_rests
);
