//! What a reliability suite leans on: a hang (the server stops answering without closing
//! connections), streams broken mid-stream, faults on the listing and info methods, and lost
//! answers on every write.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use nauthera_client::{AdminClient, CallError, ChangeStream};
use nauthera_fake_server::{Actor, Fault, FaultCode, Method};
use nauthera_proto::v1::{self, ObjectRef};
use support::*;

const HANG: Duration = Duration::from_millis(300);

/// The next event of `stream`, or `None` if none comes within `wait`.
async fn next_within(
    stream: &mut ChangeStream,
    wait: Duration,
) -> Option<Result<Option<v1::ChangeEvent>, CallError>> {
    tokio::time::timeout(wait, stream.next()).await.ok()
}

/// An out-of-band edit: a change event that needs no call, so a hang does not hold it.
fn edit_web(harness: &Harness, display_name: &str) {
    harness
        .server
        .edit_client(
            &acme("team-a", "web"),
            &Actor::dashboard("ops@example.com"),
            |spec| spec.display_name = display_name.to_owned(),
        )
        .unwrap();
}

async fn create_web(client: &AdminClient) {
    client
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap();
}

// ----- the hang -------------------------------------------------------------------------------

#[tokio::test]
async fn a_call_made_during_a_hang_is_answered_and_takes_effect_only_after_it() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    client.get_server_info().await.unwrap();
    harness.server.reset_counters();
    let hint = harness.server.change_hint();

    let started = Instant::now();
    harness.server.hang_for(HANG);
    assert!(harness.server.is_hung());
    let write = tokio::spawn(async move {
        client
            .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
            .await
    });
    tokio::time::sleep(HANG / 2).await;
    assert!(!write.is_finished(), "no answer during the hang");
    assert!(harness.server.client(&acme("team-a", "web")).is_none());
    assert_eq!(
        harness.server.change_hint(),
        hint,
        "nothing took effect yet"
    );
    assert_eq!(harness.server.counters().calls_of(Method::ApplyClient), 0);

    write.await.unwrap().unwrap();
    assert!(started.elapsed() >= HANG, "{:?}", started.elapsed());
    assert!(!harness.server.is_hung());
    assert!(harness.server.client(&acme("team-a", "web")).is_some());
    assert_eq!(harness.server.counters().calls_of(Method::ApplyClient), 1);
}

#[tokio::test]
async fn a_hang_holds_a_delayed_write_before_its_effect_and_faults_apply_after_it() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    client.get_server_info().await.unwrap();
    harness
        .server
        .set_latency(Some(Method::ApplyClient), Some(Duration::from_millis(100)));
    harness.server.inject_fault(
        Some(Method::ApplyClient),
        Fault::times(FaultCode::Aborted, 1),
    );
    let write = tokio::spawn(async move {
        let faulted = client
            .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
            .await;
        (client, faulted)
    });
    // The call is counted and in its latency when the hang begins.
    assert!(
        eventually(Duration::from_secs(5), async || harness
            .server
            .counters()
            .calls_of(Method::ApplyClient)
            == 1)
        .await
    );
    let started = Instant::now();
    harness.server.hang_for(HANG);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !write.is_finished(),
        "the latency is over but the hang is not"
    );
    let (client, faulted) = write.await.unwrap();
    assert!(started.elapsed() >= HANG, "{:?}", started.elapsed());
    assert_eq!(
        faulted.unwrap_err().server().unwrap().code,
        tonic::Code::Aborted,
        "the fault acts once the hang is over"
    );
    harness.server.set_latency(Some(Method::ApplyClient), None);
    create_web(&client).await;
}

#[tokio::test]
async fn a_write_whose_caller_gave_up_during_the_hang_never_takes_effect() {
    let harness = Harness::start().await;
    let mut settings = harness.settings(&harness.client_dir(OPERATOR));
    settings.request_timeout = Some(Duration::from_millis(100));
    let impatient = AdminClient::connect(settings).await.unwrap();
    impatient.get_server_info().await.unwrap();
    harness.server.hang_for(HANG);
    let error = impatient
        .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
        .await
        .unwrap_err();
    assert!(error.is_retryable(), "{error:?}");
    // The cancellation reaches the server well before the hang's end.
    assert!(eventually(Duration::from_secs(5), async || !harness.server.is_hung()).await);
    impatient.get_server_info().await.unwrap();
    assert!(harness.server.client(&acme("team-a", "web")).is_none());
    assert_eq!(harness.server.counters().calls_of(Method::ApplyClient), 0);
}

#[tokio::test]
async fn end_hang_releases_the_held_calls_at_once() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    client.get_server_info().await.unwrap();
    harness.server.hang_for(Duration::from_secs(60));
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.get_change_hint().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(calls.iter().all(|call| !call.is_finished()));

    let ended = Instant::now();
    harness.server.end_hang();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert!(
        ended.elapsed() < Duration::from_millis(200),
        "{:?}",
        ended.elapsed()
    );
    assert_eq!(harness.server.counters().calls_of(Method::GetChangeHint), 3);
}

#[tokio::test]
async fn a_stream_delivers_nothing_during_a_hang_and_everything_after_in_order() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    create_web(&client).await;
    let start = client.get_change_hint().await.unwrap();
    let mut stream = client.watch_changes(Some(start.clone())).await.unwrap();

    let started = Instant::now();
    harness.server.hang_for(HANG);
    for name in ["one", "two", "three"] {
        edit_web(&harness, name);
    }
    assert!(
        next_within(&mut stream, HANG / 2).await.is_none(),
        "nothing is delivered during the hang"
    );
    for expected in 1..=3 {
        let event = stream.next().await.unwrap().unwrap();
        assert_eq!(event.hint.unwrap().sequence, start.sequence + expected);
    }
    assert!(started.elapsed() >= HANG, "{:?}", started.elapsed());
}

// ----- streams broken mid-stream --------------------------------------------------------------

#[tokio::test]
async fn a_mid_stream_fault_ends_an_open_stream_with_its_code_and_spares_opening_calls() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    create_web(&client).await;
    harness
        .server
        .inject_fault(None, Fault::breaking_streams(FaultCode::Aborted, 1.0));
    // Not a fault for calls, nor for the call that opens a stream.
    client.get_server_info().await.unwrap();
    let mut stream = client.watch_changes(None).await.unwrap();
    assert!(
        next_within(&mut stream, Duration::from_millis(50))
            .await
            .is_none()
    );

    edit_web(&harness, "by hand");
    let error = stream.next().await.unwrap_err();
    let server = error.server().unwrap();
    assert_eq!(server.code, tonic::Code::Aborted);
    assert!(
        server.message.contains("Aborted") && server.message.contains("mid-stream"),
        "{}",
        server.message
    );
    let counters = harness.server.counters();
    assert_eq!(counters.faults.get("WatchChanges"), Some(&1));
    assert_eq!(counters.faults.len(), 1, "{counters:?}");
}

#[tokio::test]
async fn a_mid_stream_fault_with_probability_zero_never_breaks_a_stream() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    create_web(&client).await;
    harness.server.inject_fault(
        Some(Method::WatchChanges),
        Fault::breaking_streams(FaultCode::Unavailable, 0.0),
    );
    let start = client.get_change_hint().await.unwrap();
    let mut stream = client.watch_changes(Some(start.clone())).await.unwrap();
    for round in 0..10 {
        edit_web(&harness, &format!("round {round}"));
    }
    for expected in 1..=10 {
        let event = stream.next().await.unwrap().unwrap();
        assert_eq!(event.hint.unwrap().sequence, start.sequence + expected);
    }
    assert!(harness.server.counters().faults.is_empty());
}

#[tokio::test]
async fn a_counted_mid_stream_fault_breaks_that_many_events() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    create_web(&client).await;
    harness.server.inject_fault(
        Some(Method::WatchChanges),
        Fault {
            count: Some(1),
            ..Fault::breaking_streams(FaultCode::Internal, 1.0)
        },
    );
    let mut first = client.watch_changes(None).await.unwrap();
    edit_web(&harness, "first");
    let error = first.next().await.unwrap_err();
    assert_eq!(error.server().unwrap().code, tonic::Code::Internal);
    // The count ran out: a new stream delivers.
    let mut second = client.watch_changes(None).await.unwrap();
    edit_web(&harness, "second");
    assert!(second.next().await.unwrap().is_some());
}

#[tokio::test]
async fn break_streams_ends_every_open_stream_now_and_spares_later_ones() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    create_web(&client).await;
    let mut open = vec![
        client.watch_changes(None).await.unwrap(),
        client.watch_changes(None).await.unwrap(),
    ];
    // A stream held by a hang is broken too.
    harness.server.hang_for(Duration::from_secs(60));
    edit_web(&harness, "held");
    harness.server.break_streams(FaultCode::Unavailable);
    for stream in &mut open {
        let error = next_within(stream, Duration::from_secs(1))
            .await
            .expect("ended at once")
            .unwrap_err();
        let server = error.server().unwrap();
        assert_eq!(server.code, tonic::Code::Unavailable);
        assert!(server.message.contains("mid-stream"), "{}", server.message);
    }
    harness.server.end_hang();
    assert_eq!(
        harness.server.counters().faults.get("WatchChanges"),
        Some(&2)
    );

    let mut later = client.watch_changes(None).await.unwrap();
    edit_web(&harness, "after");
    assert!(later.next().await.unwrap().is_some());
}

// ----- faults on the listing and info methods, lost answers on every write ------------------

#[tokio::test]
async fn before_effect_faults_act_on_the_listing_and_info_methods() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let methods = [
        Method::GetServerInfo,
        Method::GetChangeHint,
        Method::ListClientRevisions,
        Method::ListAuditEvents,
        Method::WatchChanges,
    ];
    for method in methods {
        harness
            .server
            .inject_fault(Some(method), Fault::times(FaultCode::Unavailable, 1));
        let faulted = call(&client, method).await.unwrap_err();
        assert_eq!(
            faulted.server().unwrap().code,
            tonic::Code::Unavailable,
            "{method}"
        );
        call(&client, method).await.unwrap();
    }
    let counters = harness.server.counters();
    for method in methods {
        assert_eq!(counters.faults.get(method.as_str()), Some(&1), "{method}");
        assert_eq!(counters.calls_of(method), 2, "{method}");
    }
}

/// One call of a listing or info method (a stream only opens).
async fn call(client: &AdminClient, method: Method) -> Result<(), CallError> {
    match method {
        Method::GetServerInfo => client.get_server_info().await.map(drop),
        Method::GetChangeHint => client.get_change_hint().await.map(drop),
        Method::ListClientRevisions => client
            .list_client_revisions(Default::default())
            .await
            .map(drop),
        Method::ListAuditEvents => client
            .list_audit_events(v1::ListAuditEventsRequest {
                organization: "acme".into(),
                ..Default::default()
            })
            .await
            .map(drop),
        Method::WatchChanges => client.watch_changes(None).await.map(drop),
        other => panic!("{other} is not a listing or info method"),
    }
}

fn initech() -> ObjectRef {
    ObjectRef {
        issuer: String::new(),
        namespace: String::new(),
        name: "initech".into(),
    }
}

/// Whether a write's effect is on the server.
type TookEffect = fn(&Harness) -> bool;

/// Each write of every kind, in an order where each one can take effect, with a check that it
/// did.
fn writes() -> Vec<(Method, TookEffect)> {
    vec![
        (Method::ApplyOrganization, |h| {
            h.server.organization("initech").is_some()
        }),
        (Method::ApplyBranding, |h| {
            h.server.branding(&acme("team-a", "default")).is_some()
        }),
        (Method::ApplyIdentityProvider, |h| {
            h.server
                .identity_provider(&acme("team-a", "github"))
                .is_some()
        }),
        (Method::ApplyClient, |h| {
            h.server.client(&acme("team-a", "web")).is_some()
        }),
        (Method::DeleteClient, |h| {
            h.server.client(&acme("team-a", "web")).is_none()
        }),
        (Method::DeleteIdentityProvider, |h| {
            h.server
                .identity_provider(&acme("team-a", "github"))
                .is_none()
        }),
        (Method::DeleteBranding, |h| {
            h.server.branding(&acme("team-a", "default")).is_none()
        }),
        (Method::DeleteOrganization, |h| {
            h.server.organization(&initech().name).is_none()
        }),
    ]
}

async fn write(client: &AdminClient, method: Method) -> Result<(), CallError> {
    let manager = || MANAGER.to_owned();
    match method {
        Method::ApplyOrganization => client
            .apply_organization(v1::ApplyOrganizationRequest {
                slug: initech().name,
                spec: Some(v1::OrganizationSpec {
                    issuer: "https://login.example.com/initech".into(),
                    fapi_mode: v1::FapiMode::Off as i32,
                    ..Default::default()
                }),
                namespace: "platform".into(),
                generation: 1,
                manager: manager(),
                if_revision: if_absent(),
            })
            .await
            .map(drop),
        Method::ApplyBranding => client
            .apply_branding(v1::ApplyBrandingRequest {
                r#ref: Some(acme("team-a", "default")),
                document: Some(v1::BrandingDocument {
                    colors: [("primary".to_owned(), "#0044ff".to_owned())].into(),
                    ..Default::default()
                }),
                generation: 1,
                manager: manager(),
                if_revision: if_absent(),
            })
            .await
            .map(drop),
        Method::ApplyIdentityProvider => client
            .apply_identity_provider(v1::ApplyIdentityProviderRequest {
                r#ref: Some(acme("team-a", "github")),
                spec: Some(v1::IdentityProviderSpec {
                    kind: v1::IdentityProviderKind::Github as i32,
                    upstream_client_id: "abc".into(),
                    upstream_client_secret: "upstream-secret".into(),
                    ..Default::default()
                }),
                generation: 1,
                manager: manager(),
                if_revision: if_absent(),
            })
            .await
            .map(drop),
        Method::ApplyClient => client
            .apply_client(apply(acme("team-a", "web"), web_spec(), 1))
            .await
            .map(drop),
        Method::DeleteClient => client
            .delete_client(v1::DeleteClientRequest {
                r#ref: Some(acme("team-a", "web")),
                if_revision: None,
                manager: manager(),
            })
            .await
            .map(drop),
        Method::DeleteIdentityProvider => client
            .delete_identity_provider(v1::DeleteIdentityProviderRequest {
                r#ref: Some(acme("team-a", "github")),
                if_revision: None,
                manager: manager(),
            })
            .await
            .map(drop),
        Method::DeleteBranding => client
            .delete_branding(v1::DeleteBrandingRequest {
                r#ref: Some(acme("team-a", "default")),
                if_revision: None,
                manager: manager(),
            })
            .await
            .map(drop),
        Method::DeleteOrganization => client
            .delete_organization(v1::DeleteOrganizationRequest {
                slug: initech().name,
                if_revision: None,
                manager: manager(),
                namespace: "platform".into(),
            })
            .await
            .map(drop),
        other => panic!("{other} is not a write"),
    }
}

#[tokio::test]
async fn a_lost_answer_acts_on_every_write_of_every_kind_after_it_took_effect() {
    let harness = Harness::start().await;
    let client = harness.operator().await;
    let writes = writes();
    let start = harness.server.change_hint();
    for (method, took_effect) in &writes {
        harness.server.inject_fault(
            Some(*method),
            Fault::losing_answers(FaultCode::Unavailable, 1),
        );
        let lost = write(&client, *method).await.unwrap_err();
        let server = lost.server().unwrap();
        assert_eq!(server.code, tonic::Code::Unavailable, "{method}");
        assert!(
            server.message.contains("answer was lost"),
            "{method}: {}",
            server.message
        );
        assert!(took_effect(&harness), "{method} took effect");
    }
    let counters = harness.server.counters();
    assert_eq!(counters.writes_by(MANAGER), writes.len() as u64);
    assert_eq!(
        harness.server.change_hint().sequence,
        start.sequence + writes.len() as u64
    );
    for (method, _) in &writes {
        assert_eq!(counters.faults.get(method.as_str()), Some(&1), "{method}");
    }
}
