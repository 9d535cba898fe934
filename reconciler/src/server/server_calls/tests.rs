//! The server side of the steps against a fake AdminService that answers with plain values.

use std::collections::HashMap;
use std::sync::Mutex;

use nauthera_client::convert::comparable_client_spec;
use nauthera_client::{ConnectError, ServerError};
use nauthera_proto::tonic_types::{ErrorDetails, StatusExt};
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::{Drift, OIDCClient, OIDCClientSpec};
use tonic::Code;

use super::*;
use crate::reconcile::decide::DriftUpdate;
use crate::server::admin::ChangeEvents;

/// Answers each method with a preset result and records the calls.
#[derive(Default)]
struct FakeAdmin {
    apply: Mutex<Option<Result<v1::ApplyClientResponse, CallError>>>,
    get: Mutex<Option<Result<v1::Client, CallError>>>,
    delete: Mutex<Option<Result<v1::DeleteClientResponse, CallError>>>,
    audit: Vec<v1::AuditEvent>,
    calls: Mutex<Vec<&'static str>>,
    /// GetClient answers only once ListAuditEvents was asked: a check that reads them one
    /// after the other never finishes.
    get_waits_for_audit: bool,
    audit_asked: tokio::sync::Notify,
}

#[allow(clippy::result_large_err)] // `CallError` is the shared client's type.
fn unanswered<T>() -> Result<T, CallError> {
    Err(CallError::Connect(ConnectError::Unreachable {
        address: "fake".into(),
        problem: nauthera_client::ConnectProblem::Transport,
        cause: "no answer set".into(),
    }))
}

impl FakeAdmin {
    fn called(&self, method: &'static str) {
        self.calls.lock().unwrap().push(method);
    }
}

impl AdminApi for FakeAdmin {
    async fn get_server_info(&self) -> Result<v1::ServerInfo, CallError> {
        self.called("GetServerInfo");
        unanswered()
    }
    async fn get_change_hint(&self) -> Result<v1::ChangeHint, CallError> {
        self.called("GetChangeHint");
        unanswered()
    }
    async fn watch_changes(
        &self,
        _since: Option<v1::ChangeHint>,
    ) -> Result<ChangeEvents, CallError> {
        self.called("WatchChanges");
        unanswered()
    }
    async fn apply_client(
        &self,
        _request: v1::ApplyClientRequest,
    ) -> Result<v1::ApplyClientResponse, CallError> {
        self.called("ApplyClient");
        self.apply.lock().unwrap().take().unwrap_or_else(unanswered)
    }
    async fn get_client(&self, _reference: v1::ObjectRef) -> Result<v1::Client, CallError> {
        self.called("GetClient");
        if self.get_waits_for_audit {
            self.audit_asked.notified().await;
        }
        self.get.lock().unwrap().take().unwrap_or_else(unanswered)
    }
    async fn delete_client(
        &self,
        _request: v1::DeleteClientRequest,
    ) -> Result<v1::DeleteClientResponse, CallError> {
        self.called("DeleteClient");
        self.delete
            .lock()
            .unwrap()
            .take()
            .unwrap_or_else(unanswered)
    }
    async fn list_client_revisions(
        &self,
        _request: v1::ListClientRevisionsRequest,
    ) -> Result<v1::ListClientRevisionsResponse, CallError> {
        self.called("ListClientRevisions");
        unanswered()
    }
    async fn list_audit_events(
        &self,
        _request: v1::ListAuditEventsRequest,
    ) -> Result<v1::ListAuditEventsResponse, CallError> {
        self.called("ListAuditEvents");
        self.audit_asked.notify_one();
        Ok(v1::ListAuditEventsResponse {
            events: self.audit.clone(),
            next_page_token: String::new(),
        })
    }
}

fn refusal(code: Code, reason: &str, metadata: &[(&str, &str)]) -> CallError {
    let details = ErrorDetails::with_error_info(
        reason,
        nauthera_proto::ERROR_DOMAIN,
        metadata
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<HashMap<_, _>>(),
    );
    CallError::Server(ServerError::from_status(
        &tonic::Status::with_error_details(code, "refused", details),
    ))
}

fn declared() -> OIDCClientSpec {
    serde_json::from_value(serde_json::json!({
        "issuer": "https://login.example.test/acme",
        "redirectUris": ["https://app.example.test/cb"],
        "scopes": ["openid"],
        "secret": { "generate": true }
    }))
    .unwrap()
}

fn reference() -> v1::ObjectRef {
    v1::ObjectRef {
        issuer: "https://login.example.test/acme".into(),
        namespace: "team-a".into(),
        name: "web".into(),
    }
}

fn client_of(declared: &OIDCClientSpec) -> OIDCClient {
    let mut client = OIDCClient::new("web", declared.clone());
    client.metadata.namespace = Some("team-a".into());
    client.metadata.generation = Some(2);
    client
}

fn write_request() -> WriteRequest<'static> {
    WriteRequest {
        manager: "nauthera-reconciler",
        if_revision: None,
        rotate_secret: false,
        provided: None,
    }
}

fn facts() -> DriftFacts<'static> {
    DriftFacts {
        generation: 2,
        written_revision: Some("r2"),
        generation_in_force: Some(2),
        organization: Some("acme"),
        client_id: Some("cid"),
        manager: "nauthera-reconciler",
        namespace_mapped: false,
        managed_elsewhere: None,
        history_restarted: false,
        manifest_created: None,
        orphaned_here: false,
        server_moved_on: false,
    }
}

fn held(revision: &str, redirect: &str, manager: &str, actor: &str) -> v1::Client {
    let mut spec = comparable_client_spec(&declared());
    spec.redirect_uris = vec![redirect.into()];
    v1::Client {
        r#ref: Some(reference()),
        organization: "acme".into(),
        client_id: "cid".into(),
        spec: Some(spec),
        revision: revision.into(),
        generation_in_force: 2,
        last_write: Some(v1::WriteInfo {
            manager: manager.into(),
            actor: actor.into(),
            time: Some(prost_types::Timestamp {
                seconds: 1_800_000_000,
                nanos: 0,
            }),
            generation: 0,
        }),
        secret_set_at: None,
    }
}

#[tokio::test]
async fn a_write_returns_the_minted_secret_once_and_never_shows_it() {
    let admin = FakeAdmin::default();
    *admin.apply.lock().unwrap() = Some(Ok(v1::ApplyClientResponse {
        client: Some(held(
            "r1",
            "https://app.example.test/cb",
            "nauthera-reconciler",
            "",
        )),
        created: true,
        secret: "minted-s3cret".into(),
    }));
    let result = write(&client_of(&declared()), &admin, write_request())
        .await
        .unwrap();
    let text = format!("{result:?}");
    assert!(!text.contains("minted-s3cret"), "{text}");
    match result {
        WriteResult::Written {
            applied,
            organization,
            minted,
        } => {
            assert_eq!(applied.revision, "r1");
            assert!(applied.created);
            assert_eq!(organization, "acme");
            assert_eq!(minted.unwrap().expose(), "minted-s3cret");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_write_over_another_revision_is_a_conflict_and_a_grant_refusal_is_refused() {
    let admin = FakeAdmin::default();
    *admin.apply.lock().unwrap() = Some(Err(refusal(
        Code::FailedPrecondition,
        "REVISION_MISMATCH",
        &[("revision", "r9")],
    )));
    assert!(matches!(
        write(&client_of(&declared()), &admin, write_request())
            .await
            .unwrap(),
        WriteResult::Conflict
    ));
    *admin.apply.lock().unwrap() = Some(Err(refusal(
        Code::PermissionDenied,
        "OUTSIDE_GRANT",
        &[("cause", "namespace team-a is outside the grant")],
    )));
    match write(&client_of(&declared()), &admin, write_request())
        .await
        .unwrap()
    {
        WriteResult::Failed(verdict) => {
            assert_eq!(verdict.reason, Reason::Refused);
            assert_eq!(verdict.cause, Cause::OutsideGrant);
            assert!(verdict.record_attempt);
            assert!(
                verdict
                    .message
                    .contains("PermissionDenied (OUTSIDE_GRANT): namespace team-a")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_own_write_the_status_does_not_record_is_adopted_never_drift() {
    let declared = declared();
    let own = |revision: &str, redirect: &str| {
        held(
            revision,
            redirect,
            "nauthera-reconciler",
            "dns:nauthera-reconciler",
        )
    };
    // The write of generation 2 took effect but its answer was lost: the status names r1.
    let admin = FakeAdmin::default();
    *admin.get.lock().unwrap() = Some(Ok(own("r3", "https://app.example.test/cb")));
    let mut lost = facts();
    lost.written_revision = Some("r1");
    lost.generation_in_force = Some(1);
    let verdict = check_drift(&client_of(&declared), &admin, &lost)
        .await
        .unwrap();
    assert_eq!(verdict.reason, Reason::Registered, "{}", verdict.message);
    assert_eq!(verdict.fields.revision.as_deref(), Some("r3"));
    assert_eq!(verdict.fields.generation_in_force, Some(2));
    assert_eq!(verdict.fields.drift, DriftUpdate::Clear);
    assert!(
        verdict
            .events
            .iter()
            .any(|e| e.note.contains("adopted revision r3")),
        "{:?}",
        verdict.events
    );

    // A write of another state (an earlier generation, or before the manifest was declared
    // again): taken as this resource's revision, and written over rather than called in force.
    *admin.get.lock().unwrap() = Some(Ok(own("r3", "https://old.example.test/cb")));
    let mut redeclared = facts();
    redeclared.written_revision = None;
    redeclared.generation_in_force = None;
    let verdict = check_drift(&client_of(&declared), &admin, &redeclared)
        .await
        .unwrap();
    assert_eq!(verdict.reason, Reason::Pending, "{}", verdict.message);
    assert!(verdict.retried);
    assert_eq!(verdict.fields.revision.as_deref(), Some("r3"));
    assert_eq!(verdict.fields.generation_in_force, None);
    assert!(
        verdict.message.contains("written over it"),
        "{}",
        verdict.message
    );

    // The same write by another manager is a drift.
    *admin.get.lock().unwrap() = Some(Ok(held(
        "r3",
        "https://app.example.test/cb",
        "dashboard",
        "user:alice@example.com",
    )));
    assert_eq!(
        check_drift(&client_of(&declared), &admin, &lost)
            .await
            .unwrap()
            .reason,
        Reason::Drifted
    );
}

#[tokio::test]
async fn a_drift_names_revision_time_author_and_fields() {
    let declared = declared();
    let admin = FakeAdmin {
        audit: vec![v1::AuditEvent {
            revision: "r7".into(),
            actor: "user:alice@example.com".into(),
            manager: String::new(),
            outcome: v1::AuditOutcome::Applied as i32,
            ..v1::AuditEvent::default()
        }],
        ..FakeAdmin::default()
    };
    *admin.get.lock().unwrap() = Some(Ok(held(
        "r7",
        "https://evil.example.test/cb",
        "",
        "dns:dashboard",
    )));
    let verdict = check_drift(&client_of(&declared), &admin, &facts())
        .await
        .unwrap();
    assert_eq!(verdict.reason, Reason::Drifted);
    assert_eq!(verdict.cause, Cause::Edited);
    let DriftUpdate::Set(Drift {
        server_revision,
        actor,
        fields,
        changed_at,
        ..
    }) = &verdict.fields.drift
    else {
        panic!("{:?}", verdict.fields.drift);
    };
    assert_eq!(server_revision, "r7");
    assert_eq!(actor.as_deref(), Some("user:alice@example.com"));
    assert_eq!(fields, &vec!["spec.redirectUris".to_owned()]);
    assert!(changed_at.is_some());
    assert!(verdict.message.contains("holds revision r7, not r2"));
    assert_eq!(
        *admin.calls.lock().unwrap(),
        vec!["GetClient", "ListAuditEvents"]
    );
}

#[tokio::test]
async fn when_the_server_moved_on_the_audit_log_is_read_beside_the_object() {
    let edited = || held("r7", "https://evil.example.test/cb", "", "dns:dashboard");
    let admin = FakeAdmin {
        audit: vec![v1::AuditEvent {
            revision: "r7".into(),
            actor: "user:alice@example.com".into(),
            outcome: v1::AuditOutcome::Applied as i32,
            ..v1::AuditEvent::default()
        }],
        get_waits_for_audit: true,
        ..FakeAdmin::default()
    };
    *admin.get.lock().unwrap() = Some(Ok(edited()));
    let moved_on = DriftFacts {
        server_moved_on: true,
        ..facts()
    };
    let verdict = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        check_drift(&client_of(&declared()), &admin, &moved_on),
    )
    .await
    .expect("the two reads are made side by side")
    .unwrap();
    assert_eq!(verdict.reason, Reason::Drifted);
    let DriftUpdate::Set(drift) = &verdict.fields.drift else {
        panic!("{:?}", verdict.fields.drift);
    };
    assert_eq!(drift.actor.as_deref(), Some("user:alice@example.com"));
    // Read once: the early answer is the one used.
    assert_eq!(
        *admin.calls.lock().unwrap(),
        vec!["GetClient", "ListAuditEvents"]
    );

    // The object is gone: the same early read names who removed it.
    let admin = FakeAdmin {
        audit: admin.audit.clone(),
        get_waits_for_audit: true,
        ..FakeAdmin::default()
    };
    *admin.get.lock().unwrap() = Some(Err(refusal(Code::NotFound, "OBJECT_NOT_FOUND", &[])));
    let verdict = check_drift(&client_of(&declared()), &admin, &moved_on)
        .await
        .unwrap();
    assert_eq!(verdict.cause, Cause::Removed);
    assert_eq!(admin.calls.lock().unwrap().len(), 2);

    // The server holds it under another client id than the status says: read again for that.
    let admin = FakeAdmin {
        audit: admin.audit.clone(),
        ..FakeAdmin::default()
    };
    let mut renamed = edited();
    renamed.client_id = "cid-2".into();
    *admin.get.lock().unwrap() = Some(Ok(renamed));
    check_drift(&client_of(&declared()), &admin, &moved_on)
        .await
        .unwrap();
    assert_eq!(
        *admin.calls.lock().unwrap(),
        vec!["GetClient", "ListAuditEvents", "ListAuditEvents"]
    );

    // Another reconciler's object, or nothing written yet: no drift is likely, no early read.
    for facts in [
        DriftFacts {
            written_revision: None,
            ..moved_on.clone()
        },
        DriftFacts {
            server_moved_on: false,
            ..moved_on.clone()
        },
    ] {
        let admin = FakeAdmin::default();
        *admin.get.lock().unwrap() = Some(Ok(held(
            "r2",
            "https://app.example.test/cb",
            "nauthera-reconciler",
            "dns:op",
        )));
        check_drift(&client_of(&declared()), &admin, &facts)
            .await
            .unwrap();
        assert_eq!(*admin.calls.lock().unwrap(), vec!["GetClient"]);
    }
}

#[tokio::test]
async fn a_stale_listing_is_no_drift_and_a_missing_client_is_removed() {
    let declared = declared();
    let admin = FakeAdmin::default();
    *admin.get.lock().unwrap() = Some(Ok(held(
        "r2",
        "https://app.example.test/cb",
        "nauthera-reconciler",
        "dns:op",
    )));
    let verdict = check_drift(&client_of(&declared), &admin, &facts())
        .await
        .unwrap();
    assert_eq!(verdict.reason, Reason::Registered);
    assert_eq!(verdict.fields.drift, DriftUpdate::Clear);

    *admin.get.lock().unwrap() = Some(Err(refusal(Code::NotFound, "OBJECT_NOT_FOUND", &[])));
    let verdict = check_drift(&client_of(&declared), &admin, &facts())
        .await
        .unwrap();
    assert_eq!(verdict.reason, Reason::Drifted);
    assert_eq!(verdict.cause, Cause::Removed);
}

#[tokio::test]
async fn our_own_older_write_back_in_force_is_a_backup_restore() {
    let declared = declared();
    let admin = FakeAdmin::default();
    let mut old = held(
        "r1",
        "https://app.example.test/cb",
        "nauthera-reconciler",
        "dns:op",
    );
    old.generation_in_force = 1;
    *admin.get.lock().unwrap() = Some(Ok(old));
    let verdict = check_drift(&client_of(&declared), &admin, &facts())
        .await
        .unwrap();
    assert_eq!(verdict.cause, Cause::BackupRestore);
}

#[tokio::test]
async fn deletion_honours_the_precondition() {
    let admin = FakeAdmin::default();
    *admin.delete.lock().unwrap() = Some(Ok(v1::DeleteClientResponse { deleted: true }));
    assert_eq!(
        delete(&client_of(&declared()), &admin, "nauthera-reconciler", "r2")
            .await
            .unwrap()
            .verdict
            .reason,
        Reason::Deleted
    );
    *admin.delete.lock().unwrap() = Some(Err(refusal(
        Code::FailedPrecondition,
        "REVISION_MISMATCH",
        &[("revision", "r9")],
    )));
    let deletion = delete(&client_of(&declared()), &admin, "nauthera-reconciler", "r2")
        .await
        .unwrap();
    // Another revision is looked at before anything is deleted or left in place.
    assert_eq!(deletion.verdict.reason, Reason::Deleting);
    assert!(deletion.verdict.retried);
    assert!(deletion.verdict.message.contains("revision r9"));
    assert_eq!(deletion.held_revision.as_deref(), Some("r9"));
    // A mismatch against no revision: the client is gone already, nothing was left in place.
    *admin.delete.lock().unwrap() = Some(Err(refusal(
        Code::FailedPrecondition,
        "REVISION_MISMATCH",
        &[("revision", "")],
    )));
    let verdict = delete(&client_of(&declared()), &admin, "nauthera-reconciler", "r2")
        .await
        .unwrap()
        .verdict;
    assert_eq!(verdict.reason, Reason::Deleted);
    assert!(verdict.message.contains("no longer held"));
    *admin.delete.lock().unwrap() = Some(Err(refusal(Code::Unavailable, "", &[])));
    let verdict = delete(&client_of(&declared()), &admin, "nauthera-reconciler", "r2")
        .await
        .unwrap()
        .verdict;
    assert!(verdict.retried);
    assert_eq!(verdict.reason, Reason::Deleting);
    *admin.delete.lock().unwrap() = Some(Err(refusal(
        Code::PermissionDenied,
        "OPERATION_NOT_GRANTED",
        &[("operation", "clients")],
    )));
    let verdict = delete(&client_of(&declared()), &admin, "nauthera-reconciler", "r2")
        .await
        .unwrap()
        .verdict;
    assert_eq!(
        (verdict.reason, verdict.cause),
        (Reason::Refused, Cause::OperationNotGranted)
    );
}

#[tokio::test]
async fn a_public_client_is_not_reported_for_its_secret() {
    let mut declared = declared();
    declared.secret = None;
    declared.token_endpoint_auth_method = nauthera_shared::resources::TokenEndpointAuthMethod::None;
    let admin = FakeAdmin::default();
    let mut edited = held("r7", "https://evil.example.test/cb", "", "user:bob");
    let spec = edited.spec.as_mut().unwrap();
    *spec = comparable_client_spec(&declared);
    spec.redirect_uris = vec!["https://evil.example.test/cb".into()];
    *admin.get.lock().unwrap() = Some(Ok(edited));
    let verdict = check_drift(&client_of(&declared), &admin, &facts())
        .await
        .unwrap();
    let DriftUpdate::Set(drift) = &verdict.fields.drift else {
        panic!("{:?}", verdict.fields.drift);
    };
    assert_eq!(drift.fields, vec!["spec.redirectUris".to_owned()]);
}

#[tokio::test]
async fn only_the_servers_restore_cause_makes_a_drift_a_restore() {
    for (cause, expected) in [
        ("restore from backup", Cause::BackupRestore),
        ("Restore from backup ", Cause::BackupRestore),
        ("restored the old redirect from my notes", Cause::Edited),
        ("", Cause::Edited),
    ] {
        let admin = FakeAdmin {
            audit: vec![v1::AuditEvent {
                revision: "r7".into(),
                actor: "user:alice@example.com".into(),
                cause: cause.into(),
                outcome: v1::AuditOutcome::Applied as i32,
                ..v1::AuditEvent::default()
            }],
            ..FakeAdmin::default()
        };
        *admin.get.lock().unwrap() = Some(Ok(held(
            "r7",
            "https://evil.example.test/cb",
            "",
            "dns:dashboard",
        )));
        let verdict = check_drift(&client_of(&declared()), &admin, &facts())
            .await
            .unwrap();
        assert_eq!(verdict.cause, expected, "audit cause {cause:?}");
    }
}

/// A client whose last write names `manager` and a declared generation, as a reconciler's does.
fn written_by_reconciler(revision: &str, manager: &str, actor: &str) -> v1::Client {
    let mut client = held(revision, "https://app.example.test/cb", manager, actor);
    if let Some(write) = client.last_write.as_mut() {
        write.generation = 4;
    }
    client
}

#[tokio::test]
async fn another_reconcilers_write_is_managed_elsewhere_never_drift_or_adopted() {
    let admin = FakeAdmin::default();
    *admin.get.lock().unwrap() = Some(Ok(written_by_reconciler(
        "r7",
        "nauthera-reconciler/prod-us",
        "dns:us.example",
    )));
    let mut never_wrote = facts();
    never_wrote.written_revision = None;
    let verdict = check_drift(&client_of(&declared()), &admin, &never_wrote)
        .await
        .unwrap();
    assert_eq!(verdict.reason, Reason::ManagedElsewhere);
    assert_eq!(verdict.cause, Cause::Claimed);
    let elsewhere = verdict.fields.managed_elsewhere.unwrap();
    assert_eq!(
        (
            elsewhere.manager.as_str(),
            elsewhere.actor.as_deref(),
            elsewhere.revision.as_str()
        ),
        ("nauthera-reconciler/prod-us", Some("dns:us.example"), "r7")
    );
    assert_eq!(elsewhere.generation, 4);
    assert!(
        verdict.message.contains("--cluster-name"),
        "{}",
        verdict.message
    );

    // Over this resource's own write: a handover.
    *admin.get.lock().unwrap() = Some(Ok(written_by_reconciler(
        "r8",
        "nauthera-reconciler/prod-us",
        "dns:us.example",
    )));
    let verdict = check_drift(&client_of(&declared()), &admin, &facts())
        .await
        .unwrap();
    assert_eq!(verdict.cause, Cause::TakenOver);

    // This reconciler's manager from another replica's certificate: its own write (an answer
    // the replica before a failover never recorded), adopted.
    *admin.get.lock().unwrap() = Some(Ok(written_by_reconciler(
        "r9",
        "nauthera-reconciler",
        "dns:replica-b.example",
    )));
    let verdict = check_drift(&client_of(&declared()), &admin, &facts())
        .await
        .unwrap();
    assert_eq!(verdict.reason, Reason::Registered, "{}", verdict.message);
    assert_eq!(verdict.fields.revision.as_deref(), Some("r9"));
}

#[tokio::test]
async fn an_object_another_reconciler_managed_that_is_gone_is_declared_next() {
    let admin = FakeAdmin::default();
    *admin.get.lock().unwrap() = Some(Err(refusal(Code::NotFound, "OBJECT_NOT_FOUND", &[])));
    let elsewhere = nauthera_shared::resources::ManagedElsewhere {
        manager: "nauthera-reconciler/prod-us".into(),
        revision: "r7".into(),
        ..Default::default()
    };
    let mut facts = facts();
    facts.managed_elsewhere = Some(&elsewhere);
    let verdict = check_drift(&client_of(&declared()), &admin, &facts)
        .await
        .unwrap();
    assert_eq!(verdict.reason, Reason::Pending);
    assert!(verdict.retried);
    assert_eq!(verdict.fields.managed_elsewhere.as_ref(), Some(&elsewhere));
}

#[tokio::test]
async fn a_dashboard_object_the_resource_never_wrote_is_held_for_adoption_never_drift() {
    let admin = FakeAdmin::default();
    *admin.get.lock().unwrap() = Some(Ok(held(
        "r3",
        "https://elsewhere.example.test/cb",
        "dashboard",
        "user:alice@example.com",
    )));
    let mut never_wrote = facts();
    never_wrote.written_revision = None;
    let Looked::Found {
        held: found,
        verdict,
    } = look_before_create(&client_of(&declared()), &admin, &never_wrote)
        .await
        .unwrap()
    else {
        panic!("nothing found");
    };
    assert_eq!(found.revision, "r3");
    assert_eq!(verdict.reason, Reason::AdoptionRequired);
    assert_eq!(verdict.cause, Cause::ForeignObject);
    assert_eq!(verdict.fields.drift, DriftUpdate::Clear);
    assert_eq!(verdict.fields.revision, None);
    let crate::reconcile::decide::Update::Set(object) = &verdict.fields.observed else {
        panic!("{:?}", verdict.fields.observed);
    };
    assert_eq!(object.revision, "r3");
    assert_eq!(object.actor.as_deref(), Some("user:alice@example.com"));
    assert_eq!(object.differences, vec!["spec.redirectUris".to_owned()]);
    assert!(
        verdict
            .message
            .contains("kubectl nauthera adopt oidcclient/"),
        "{}",
        verdict.message
    );
    // Nothing written, nothing listed: one read, and the audit log is not needed.
    assert!(!admin.calls.lock().unwrap().contains(&"ApplyClient"));
}

#[tokio::test]
async fn observing_reads_what_the_server_holds_and_judges_nothing() {
    let admin = FakeAdmin::default();
    // Even this reconciler's own write is only shown: nothing is adopted under Observe.
    *admin.get.lock().unwrap() = Some(Ok(held(
        "r3",
        "https://app.example.test/cb",
        "nauthera-reconciler",
        "dns:reconciler",
    )));
    let verdict = observe(&client_of(&declared()), &admin).await.unwrap();
    assert_eq!(verdict.reason, Reason::Observed);
    assert_eq!(verdict.cause, Cause::Identical);
    assert_eq!(verdict.fields.revision, None);

    *admin.get.lock().unwrap() = Some(Err(refusal(Code::NotFound, "OBJECT_NOT_FOUND", &[])));
    let verdict = observe(&client_of(&declared()), &admin).await.unwrap();
    assert_eq!(verdict.cause, Cause::NotOnServer);
    assert_eq!(
        admin.calls.lock().unwrap().as_slice(),
        &["GetClient", "GetClient"]
    );
}
