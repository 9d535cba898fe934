//! The Kubernetes edges against the API emulator on loopback: status by server-side apply,
//! finalizers, the restore annotation, Secret delivery (never over a foreign Secret) and reading
//! a referenced Secret.

use kube::api::{Api, PostParams};
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::resources::OIDCClient;

use super::*;
use crate::kubernetes::caches::CLIENT_SECRET_KEY;
use nauthera_shared::secret_render::{CLIENT_ID_KEY, DISCOVERY_URL_KEY, ISSUER_KEY};

const NAMESPACE: &str = "team-a";
const ISSUER: &str = "https://login.example.test/acme";

fn delivery<'a>(secret_name: &'a str, value: &'a SecretValue) -> Delivery<'a> {
    Delivery {
        secret_name,
        client_id: "cid",
        issuer: ISSUER,
        value,
        template: None,
        rotation_request: None,
    }
}

async fn cluster() -> (nauthera_kube_emulator::Emulator, kube::Client) {
    crate::kubernetes::test_cluster::cluster(
        NAMESPACE,
        crate::kubernetes::test_cluster::Crds::Project,
    )
    .await
}

/// Creates an OIDCClient, retrying while the CRD is being established.
async fn create_client(api: &Api<OIDCClient>, name: &str) -> OIDCClient {
    let client: OIDCClient = serde_json::from_value(serde_json::json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": "OIDCClient",
        "metadata": { "name": name, "namespace": NAMESPACE },
        "spec": {
            "issuer": "https://login.example.test/acme",
            "redirectUris": ["https://app.example.test/cb"],
            "secret": { "generate": true }
        }
    }))
    .unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match api.create(&PostParams::default(), &client).await {
            Ok(created) => return created,
            Err(error) if tokio::time::Instant::now() < deadline => {
                let _ = error;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(error) => panic!("cannot create the OIDCClient: {error}"),
        }
    }
}

#[tokio::test]
async fn status_finalizer_and_annotation_edges() {
    let (_emulator, client) = cluster().await;
    let api: Api<OIDCClient> = Api::namespaced(client.clone(), NAMESPACE);
    let web = create_client(&api, "web").await;

    set_finalizer(&api, &web, true).await.unwrap();
    let web = api.get("web").await.unwrap();
    assert_eq!(web.finalizers(), [nauthera_shared::FINALIZER.to_owned()]);

    let status = ResourceStatus {
        observed_generation: Some(1),
        phase: Some(Phase::Registered),
        reason: Some(Reason::Registered),
        revision: Some("r1".into()),
        ..ResourceStatus::default()
    };
    let written = write_status(&api, "web", &status, "nauthera-reconciler", None)
        .await
        .unwrap();
    let read = api.get("web").await.unwrap().status.unwrap();
    assert_eq!(read.revision.as_deref(), Some("r1"));
    // The text returned is the one written: it reads back as the status the server keeps.
    let written: ResourceStatus = serde_json::from_str(written.text()).unwrap();
    assert_eq!(written, read);
    assert_eq!(read.phase, Some(Phase::Registered));
    // A field left out of the next apply is removed: the status belongs to the reconciler.
    let without_revision = ResourceStatus {
        revision: None,
        ..status.clone()
    };
    let read_before = api.get("web").await.unwrap();
    write_status(&api, "web", &without_revision, "nauthera-reconciler", None)
        .await
        .unwrap();
    assert_eq!(api.get("web").await.unwrap().status.unwrap().revision, None);
    // Written only over the version named: a status read before another write is refused.
    let stale = read_before.metadata.resource_version.as_deref();
    let refused = write_status(&api, "web", &status, "nauthera-shard-a", stale).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(answer)) if answer.code == 409),
        "{refused:?}"
    );
    assert_eq!(api.get("web").await.unwrap().status.unwrap().revision, None);
    let current = api.get("web").await.unwrap().metadata.resource_version;
    write_status(
        &api,
        "web",
        &status,
        "nauthera-reconciler",
        current.as_deref(),
    )
    .await
    .unwrap();
    assert_eq!(
        api.get("web")
            .await
            .unwrap()
            .status
            .unwrap()
            .revision
            .as_deref(),
        Some("r1")
    );
    write_status(&api, "web", &without_revision, "nauthera-reconciler", None)
        .await
        .unwrap();

    let patch = serde_json::json!({
        "metadata": { "annotations": { nauthera_shared::RESTORE_ANNOTATION: "true" } }
    });
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let web = api.get("web").await.unwrap();
    assert!(restore_requested(&web));
    clear_restore_annotation(&api, &web).await.unwrap();
    let web = api.get("web").await.unwrap();
    assert!(!restore_requested(&web));

    set_finalizer(&api, &web, false).await.unwrap();
    assert!(api.get("web").await.unwrap().finalizers().is_empty());
}

#[tokio::test]
async fn secrets_are_delivered_only_into_owned_secrets_and_references_are_read() {
    let (_emulator, client) = cluster().await;
    let api: Api<OIDCClient> = Api::namespaced(client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let web = create_client(&api, "web").await;
    let value = SecretValue::new("first-secret-value".into());

    assert_eq!(
        read_generated_secret(&secrets, "web", &web, None)
            .await
            .unwrap()
            .0,
        SecretState::Absent
    );
    deliver_secret(&secrets, &web, delivery("web", &value), None)
        .await
        .unwrap();
    assert_eq!(
        read_generated_secret(&secrets, "web", &web, None)
            .await
            .unwrap()
            .0,
        SecretState::Owned { has_value: true }
    );
    let written = secrets.get("web").await.unwrap();
    let owner = &written.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("OIDCClient", Some(true))
    );
    let data = written.data.as_ref().unwrap();
    assert_eq!(data[CLIENT_SECRET_KEY].0, b"first-secret-value");
    assert_eq!(data[CLIENT_ID_KEY].0, b"cid");
    assert_eq!(data[ISSUER_KEY].0, ISSUER.as_bytes());
    assert_eq!(
        data[DISCOVERY_URL_KEY].0,
        b"https://login.example.test/acme/.well-known/openid-configuration"
    );
    // Delivered again (a rotation): the owned Secret is replaced, found by a read or from the
    // cached copy; a stale cached copy fails rather than writing over a newer version.
    let rotated = SecretValue::new("second-secret-value".into());
    deliver_secret(&secrets, &web, delivery("web", &rotated), None)
        .await
        .unwrap();
    assert_eq!(
        secrets.get("web").await.unwrap().data.unwrap()[CLIENT_SECRET_KEY].0,
        b"second-secret-value"
    );
    let third = SecretValue::new("third-secret-value".into());
    let current = secrets.get("web").await.unwrap();
    deliver_secret(
        &secrets,
        &web,
        delivery("web", &third),
        Some(&(&written).into()),
    )
    .await
    .unwrap_err();
    deliver_secret(
        &secrets,
        &web,
        delivery("web", &third),
        Some(&(&current).into()),
    )
    .await
    .unwrap();
    assert_eq!(
        secrets.get("web").await.unwrap().data.unwrap()[CLIENT_SECRET_KEY].0,
        b"third-secret-value"
    );

    // A Secret someone else made is never written over.
    let foreign: Secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "taken", "namespace": NAMESPACE },
        "stringData": { "clientSecret": "theirs", "empty": "" }
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    assert_eq!(
        deliver_secret(&secrets, &web, delivery("taken", &value), None).await,
        Err(SecretWriteFailure::Foreign { owner: None })
    );
    assert_eq!(
        read_generated_secret(&secrets, "taken", &web, None)
            .await
            .unwrap()
            .0,
        SecretState::Foreign { owner: None }
    );
    assert_eq!(
        secrets.get("taken").await.unwrap().data.unwrap()[CLIENT_SECRET_KEY].0,
        b"theirs"
    );

    // A referenced Secret is read, never written.
    assert_eq!(
        read_secret_ref(&secrets, "missing", "clientSecret")
            .await
            .unwrap()
            .unwrap_err(),
        SecretRefProblem::Missing
    );
    assert_eq!(
        read_secret_ref(&secrets, "taken", "other-key")
            .await
            .unwrap()
            .unwrap_err(),
        SecretRefProblem::NoKey
    );
    assert_eq!(
        read_secret_ref(&secrets, "taken", "empty")
            .await
            .unwrap()
            .unwrap_err(),
        SecretRefProblem::EmptyKey
    );
    let read = read_secret_ref(&secrets, "taken", "clientSecret")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.value.expose(), "theirs");
    // The version is the one the cluster reports, so a later change is told apart.
    let cluster_version = secrets
        .get("taken")
        .await
        .unwrap()
        .metadata
        .resource_version;
    assert_eq!(Some(read.version), cluster_version);
}

#[test]
fn the_restore_requester_is_the_manager_that_set_the_annotation() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
    let entry = |manager: &str, fields: serde_json::Value, second: i64| ManagedFieldsEntry {
        manager: Some(manager.to_owned()),
        fields_v1: Some(FieldsV1(fields)),
        time: Some(Time(jiff::Timestamp::from_second(second).unwrap())),
        ..ManagedFieldsEntry::default()
    };
    let annotation = serde_json::json!({
        "f:metadata": { "f:annotations": { "f:nauthera.io/restore": {} } }
    });
    let meta = ObjectMeta {
        managed_fields: Some(vec![
            entry(
                "kubectl-client-side-apply",
                serde_json::json!({"f:spec": {}}),
                30,
            ),
            entry("kubectl-annotate", annotation.clone(), 10),
            entry("kubectl-nauthera", annotation, 20),
        ]),
        ..ObjectMeta::default()
    };
    assert_eq!(
        restore_requester(&meta).as_deref(),
        Some("kubectl-nauthera")
    );
    assert_eq!(restore_requester(&ObjectMeta::default()), None);
}

#[test]
fn a_restart_patches_the_pod_template_as_kubectl_rollout_restart_does_and_names_the_delivery() {
    use super::restart::{WorkloadKind, restart_patch};
    let patch = restart_patch("2026-12-04T23:00:00Z", "shop@42");
    let annotations = &patch["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        annotations["kubectl.kubernetes.io/restartedAt"],
        "2026-12-04T23:00:00Z"
    );
    assert_eq!(annotations["nauthera.io/restarted-for"], "shop@42");
    assert_eq!(
        WorkloadKind::of("StatefulSet").map(WorkloadKind::resource),
        Some("statefulsets")
    );
    assert_eq!(WorkloadKind::of("CronJob"), None);
}

#[tokio::test]
async fn a_delivery_carries_the_rotation_request_it_carries_out_and_only_that() {
    let (_emulator, client) = cluster().await;
    let api: Api<OIDCClient> = Api::namespaced(client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let web = create_client(&api, "web").await;
    let first = SecretValue::new("first-secret-value".into());
    let requested = Delivery {
        rotation_request: Some("rotate-1"),
        ..delivery("web", &first)
    };
    deliver_secret(&secrets, &web, requested, None)
        .await
        .unwrap();
    assert_eq!(
        read_generated_secret(&secrets, "web", &web, None)
            .await
            .unwrap(),
        (
            SecretState::Owned { has_value: true },
            Some("rotate-1".to_owned())
        ),
        "created with the request"
    );
    // A later delivery for another reason (a deleted Secret's value minted again, say) says
    // it carries out no request.
    let second = SecretValue::new("second-secret-value".into());
    let cached = SecretSummary::from(&secrets.get("web").await.unwrap());
    assert_eq!(cached.rotation_request.as_deref(), Some("rotate-1"));
    deliver_secret(&secrets, &web, delivery("web", &second), Some(&cached))
        .await
        .unwrap();
    assert_eq!(
        read_generated_secret(&secrets, "web", &web, None)
            .await
            .unwrap()
            .1,
        None
    );

    // The rotate annotation: who asked is read from the managed fields, and it is removed.
    let patch = serde_json::json!({
        "metadata": { "annotations": { nauthera_shared::ROTATE_ANNOTATION: "rotate-2" } }
    });
    let params = PatchParams {
        field_manager: Some("desk".to_owned()),
        ..PatchParams::default()
    };
    api.patch("web", &params, &Patch::Merge(&patch))
        .await
        .unwrap();
    let web = api.get("web").await.unwrap();
    let request = rotation_request(&web).unwrap();
    assert_eq!(request.request, "rotate-2");
    assert_eq!(request.requested_by.as_deref(), Some("desk"));
    clear_rotate_annotation(&api, &web).await.unwrap();
    assert_eq!(rotation_request(&api.get("web").await.unwrap()), None);
}

#[test]
fn an_adoption_request_names_its_revision_secret_choice_and_who_set_it() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
    use nauthera_shared::resources::AdoptSecret;
    let mut client = OIDCClient::new(
        "web",
        serde_json::from_value(serde_json::json!({
            "issuer": "https://login.example.test/acme",
        }))
        .unwrap(),
    );
    client.metadata.annotations = Some(
        [
            ("nauthera.io/adopt".to_owned(), " r4 ".to_owned()),
            ("nauthera.io/adopt-secret".to_owned(), "Keep".to_owned()),
        ]
        .into(),
    );
    client.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("platform-oncall".to_owned()),
        fields_v1: Some(FieldsV1(serde_json::json!({
            "f:metadata": { "f:annotations": { "f:nauthera.io/adopt": {} } }
        }))),
        time: Some(Time(jiff::Timestamp::from_second(10).unwrap())),
        ..ManagedFieldsEntry::default()
    }]);
    let request = adopt_request(&client).unwrap();
    assert_eq!(request.revision, "r4");
    assert_eq!(request.secret, Ok(AdoptSecret::Keep));
    assert_eq!(request.requested_by.as_deref(), Some("platform-oncall"));

    client
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("nauthera.io/adopt-secret".to_owned(), "keep it".to_owned());
    assert_eq!(
        adopt_request(&client).unwrap().secret,
        Err("keep it".to_owned())
    );
    client.metadata.annotations = None;
    assert_eq!(adopt_request(&client), None);
}

#[test]
fn a_secret_the_collector_orphaned_is_told_apart_from_somebody_elses() {
    let secret = |owners: &[&str], labels: &[(&str, &str)]| Secret {
        metadata: ObjectMeta {
            name: Some("web".into()),
            owner_references: Some(
                owners
                    .iter()
                    .map(|uid| OwnerReference {
                        uid: (*uid).to_owned(),
                        ..OwnerReference::default()
                    })
                    .collect(),
            ),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    let managed = [(MANAGED_BY_LABEL, MANAGED_BY)];
    assert_eq!(secret_held(None, "u1"), SecretHeld::Absent);
    assert_eq!(
        secret_held(Some(&secret(&["u1"], &managed)), "u1"),
        SecretHeld::Owned
    );
    assert_eq!(
        secret_held(Some(&secret(&[], &managed)), "u1"),
        SecretHeld::OrphanedByCollector
    );
    assert_eq!(
        secret_held(Some(&secret(&["u2"], &managed)), "u1"),
        SecretHeld::Other,
        "another manifest's"
    );
    assert_eq!(
        secret_held(Some(&secret(&[], &[])), "u1"),
        SecretHeld::Other,
        "a team's own Secret"
    );
    assert_eq!(
        secret_held(Some(&secret(&[], &[(RELEASED_LABEL, "true")])), "u1"),
        SecretHeld::Other,
        "released already"
    );
}

#[test]
fn only_a_foreground_deletion_leaves_dependents_to_the_collector() {
    let mut client = OIDCClient::new(
        "web",
        serde_json::from_value(serde_json::json!({
            "issuer": ISSUER, "redirectUris": ["https://web.example.test/cb"],
        }))
        .unwrap(),
    );
    client.metadata.finalizers = Some(vec![FINALIZER.to_owned(), "orphan".to_owned()]);
    assert!(!deleted_in_foreground(&client));
    client.metadata.finalizers = Some(vec![
        FINALIZER.to_owned(),
        FOREGROUND_DELETION_FINALIZER.to_owned(),
    ]);
    assert!(deleted_in_foreground(&client));
}

#[test]
fn the_reconciler_removes_only_its_own_finalizer() {
    let theirs = [
        "orphan".to_owned(),
        FOREGROUND_DELETION_FINALIZER.to_owned(),
    ];
    let mut all = vec![theirs[0].clone(), FINALIZER.to_owned(), theirs[1].clone()];
    assert_eq!(finalizers_with_ours(&all, false), theirs.to_vec());
    all = finalizers_with_ours(&theirs, true);
    assert_eq!(all.len(), 3);
    assert!(all.contains(&FINALIZER.to_owned()));
}

#[test]
fn a_deletion_is_under_way_when_the_live_manifest_is_marked_gone_or_another() {
    let live = |uid: &str, deleted: bool| ObjectMeta {
        uid: Some(uid.to_owned()),
        deletion_timestamp: deleted.then(|| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            )
        }),
        ..ObjectMeta::default()
    };
    assert!(!deletion_under_way(Some(&live("u1", false)), "u1"));
    assert!(deletion_under_way(Some(&live("u1", true)), "u1"));
    assert!(deletion_under_way(None, "u1"), "gone");
    assert!(
        deletion_under_way(Some(&live("u2", false)), "u1"),
        "deleted and created again under the same name"
    );
}

#[tokio::test]
async fn a_foreground_deletion_is_read_fresh_before_the_cache_shows_it() {
    let (_cluster, kube) = cluster().await;
    let api: Api<OIDCClient> = Api::namespaced(kube, NAMESPACE);
    let cached = create_client(&api, "web").await;
    let uid = cached.metadata.uid.clone().unwrap();
    set_finalizer(&api, &cached, true).await.unwrap();
    assert!(!deletion_under_way_now(&api, &cached, &uid).await.unwrap());
    api.delete("web", &kube::api::DeleteParams::foreground())
        .await
        .unwrap();
    // The copy read before the deletion, as a cache may still hold it, is told the truth.
    assert!(deletion_under_way_now(&api, &cached, &uid).await.unwrap());
}
