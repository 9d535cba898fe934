//! Several reconcilers on one server: two emulators stand for two clusters calling one fake
//! server, each reconciler with its own certificate identity and manager. With cluster names the
//! same namespace and name become two server objects; without, the second is a named collision
//! (`ManagedElsewhere`), never an overwrite; a handover moves an object from one manager to the
//! other, and the one that gave it up sees it managed elsewhere, not drifted.

use kube::api::{Api, Patch, PatchParams};
use nauthera_fake_server::grant_everything;
use nauthera_proto::v1;
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::grants::GrantEntry;
use nauthera_shared::resources::OIDCClient;
use nauthera_tests::e2e::{
    ISSUER, RECONCILER_IDENTITY, Stack, StackOptions, generated_client, secret_value, status_of,
};

/// The second cluster's reconciler.
const EAST_IDENTITY: &str = "dns:nauthera-reconciler.nauthera-system.east.svc";

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Everything granted to both identities, in the namespaces given (`*` when none).
fn grants(namespaces: [Vec<String>; 2]) -> Vec<GrantEntry> {
    [RECONCILER_IDENTITY, EAST_IDENTITY]
        .into_iter()
        .zip(namespaces)
        .map(|(identity, namespaces)| {
            let mut grant = grant_everything(identity);
            if !namespaces.is_empty() {
                grant.namespaces = namespaces;
            }
            grant
        })
        .collect()
}

/// The first cluster, and a second calling the same server; `None` off the emulator.
async fn two_clusters(
    west_env: &[(&str, &str)],
    east_env: &[(&str, &str)],
    namespaces: impl Fn(&str) -> [Vec<String>; 2],
) -> Option<(Stack, Stack)> {
    if std::env::var_os(nauthera_tests::cluster::KUBECONFIG_ENV).is_some() {
        eprintln!("two clusters need two emulators: skipped on a real cluster");
        return None;
    }
    let mut west = Stack::start_with(StackOptions {
        start_reconciler: false,
        reconciler_env: env(west_env),
        ..StackOptions::default()
    })
    .await;
    west.server
        .set_allowed_clients(grants(namespaces(west.namespace())));
    let reconciler = west.start_replica("replica-a").await.unwrap();
    reconciler.wait_ready().await.unwrap();
    west.reconciler = Some(reconciler);
    west.show_deployment_ready(1).await.unwrap();
    let east = west.downstream(EAST_IDENTITY, east_env).await.unwrap();
    Some((west, east))
}

fn reference(namespace: &str, name: &str) -> v1::ObjectRef {
    v1::ObjectRef {
        issuer: ISSUER.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

/// The managers of the successful writes of one client name, in the order written.
fn writers(stack: &Stack, name: &str) -> Vec<String> {
    stack
        .server
        .audit_events()
        .into_iter()
        .filter(|event| {
            event.outcome != v1::AuditOutcome::Refused as i32
                && event.r#ref.as_ref().is_some_and(|r| r.name == name)
                && !event.revision.is_empty()
        })
        .map(|event| event.manager)
        .collect()
}

async fn with_cluster_names_the_same_namespace_and_name_are_two_server_objects() {
    let Some((west, east)) = two_clusters(
        &[("NAUTHERA_CLUSTER_NAME", "prod-eu")],
        &[("NAUTHERA_CLUSTER_NAME", "prod-us")],
        |namespace| {
            [
                vec![format!("prod-eu/{namespace}")],
                vec![format!("prod-us/{namespace}")],
            ]
        },
    )
    .await
    else {
        return;
    };
    west.apply(&generated_client("web")).await;
    east.apply(&generated_client("web")).await;
    west.wait_reason("web", Reason::Registered).await;
    east.wait_reason("web", Reason::Registered).await;

    let namespace = west.namespace();
    let eu = west
        .server
        .client(&reference(&format!("prod-eu/{namespace}"), "web"))
        .expect("prod-eu's object");
    let us = west
        .server
        .client(&reference(&format!("prod-us/{namespace}"), "web"))
        .expect("prod-us's object");
    assert_ne!(eu.client_id, us.client_id);
    assert_eq!(
        eu.last_write.unwrap().manager,
        "nauthera-reconciler/prod-eu"
    );
    assert_eq!(
        us.last_write.unwrap().manager,
        "nauthera-reconciler/prod-us"
    );
    assert!(west.server.client(&reference(namespace, "web")).is_none());
    // Each cluster holds its own secret, the one its server object accepts.
    let west_secret = secret_value(&west.secret("web").await.unwrap(), "clientSecret").unwrap();
    let east_secret = secret_value(&east.secret("web").await.unwrap(), "clientSecret").unwrap();
    assert_ne!(west_secret, east_secret);
    for (cluster, secret) in [("prod-eu", &west_secret), ("prod-us", &east_secret)] {
        assert_eq!(
            west.server
                .client_secret_hash(&reference(&format!("{cluster}/{namespace}"), "web"))
                .unwrap(),
            nauthera_tests::e2e::sha256_hex(secret.as_bytes()),
            "{cluster}'s Secret holds the secret its own object accepts"
        );
    }

    // The plugin names the cluster, and checks grants in the server's namespaces.
    let status = east.plugin(&["status"]).await;
    assert!(status.stdout.contains("prod-us"), "{}", status.all());
    assert!(!status.all().contains(&east_secret));
    let json = east.plugin(&["status", "-o", "json"]).await;
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let row = &report["resources"][0];
    assert_eq!(row["grant"]["status"], "covered", "{row}");
}
nauthera_tests::e2e_test!(with_cluster_names_the_same_namespace_and_name_are_two_server_objects);

/// The managers of the two clusters without cluster names.
const WEST: &str = "nauthera-reconciler/west";
const EAST: &str = "nauthera-reconciler/east";

/// Two clusters without cluster names, everything granted to both.
async fn unmapped_clusters() -> Option<(Stack, Stack)> {
    two_clusters(
        &[("NAUTHERA_MANAGER", WEST)],
        &[("NAUTHERA_MANAGER", EAST)],
        |_| [Vec::new(), Vec::new()],
    )
    .await
}

async fn without_cluster_names_a_collision_is_named_and_a_handover_moves_the_object() {
    let Some((west, east)) = unmapped_clusters().await else {
        return;
    };
    let namespace = west.namespace().to_owned();
    west.apply(&generated_client("web")).await;
    let registered = west.wait_reason("web", Reason::Registered).await;
    let revision = status_of(&registered).revision.clone().unwrap();

    // The same namespace and name in the second cluster: named, never written over.
    east.apply(&generated_client("web")).await;
    let claimed = east.wait_reason("web", Reason::ManagedElsewhere).await;
    // Only a person can move it on: kstatus reads it Failed (Stalled), and it is the captured
    // ManagedElsewhere case of the Argo CD health checks.
    let mut object = serde_json::to_value(&claimed).unwrap();
    object["apiVersion"] = "nauthera.io/v1alpha1".into();
    object["kind"] = "OIDCClient".into();
    let kstatus = nauthera_tests::gitops::kstatus(&object).unwrap();
    assert_eq!(kstatus.status, "Failed", "{kstatus:?}");
    nauthera_tests::gitops::capture(
        "ManagedElsewhere-claimed",
        &nauthera_tests::gitops::fixture(&object, east.namespace()),
    )
    .unwrap();
    let status = status_of(&claimed);
    assert_eq!(status.cause, Some(Cause::Claimed));
    let elsewhere = status.managed_elsewhere.as_deref().unwrap();
    assert_eq!(elsewhere.manager, WEST);
    assert_eq!(elsewhere.actor.as_deref(), Some(RECONCILER_IDENTITY));
    assert_eq!(elsewhere.revision, revision);
    let message = status.message.clone().unwrap();
    assert!(message.contains("--cluster-name"), "{message}");
    assert!(east.secret("web").await.is_none());
    let held = west.server.client(&reference(&namespace, "web")).unwrap();
    assert_eq!(held.revision, revision);
    assert_eq!(writers(&west, "web"), [WEST]);

    // The plugin in the second cluster names the other manager.
    let report = east.plugin(&["status"]).await;
    assert!(report.stdout.contains(WEST), "{}", report.all());
    let diagnosed = east.plugin(&["diagnose", "oidcclient/web"]).await;
    assert!(
        diagnosed.stdout.contains("ManagedElsewhere") && diagnosed.stdout.contains(WEST),
        "{}",
        diagnosed.all()
    );

    // A handover from the manager that wrote last.
    let api: Api<OIDCClient> = Api::namespaced(east.client(), &namespace);
    let annotate = |value: &str| serde_json::json!({"metadata": {"annotations": {"nauthera.io/take-over-from": value}}});
    // Naming another manager takes nothing.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&annotate("someone")),
    )
    .await
    .unwrap();
    east.eventually("the wrong name is refused", async || {
        east.oidc_client("web").await.is_some_and(|client| {
            status_of(&client)
                .message
                .as_deref()
                .is_some_and(|m| m.contains("names manager \"someone\""))
        })
    })
    .await;
    assert_eq!(writers(&west, "web"), [WEST]);
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&annotate(WEST)),
    )
    .await
    .unwrap();
    let taken = east.wait_reason("web", Reason::Registered).await;
    assert!(
        taken
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key("nauthera.io/take-over-from"))
    );
    let record = status_of(&taken).last_take_over.as_deref().unwrap();
    assert_eq!(
        (record.from_manager.as_str(), record.from_revision.as_str()),
        (WEST, revision.as_str())
    );
    let event = east.wait_event("web", "TakenOver").await;
    assert!(event.message.contains(WEST), "{}", event.message);
    // Its own secret, the one the server accepts now.
    let secret = secret_value(&east.secret("web").await.unwrap(), "clientSecret").unwrap();
    assert_eq!(
        west.server
            .client_secret_hash(&reference(&namespace, "web"))
            .unwrap(),
        nauthera_tests::e2e::sha256_hex(secret.as_bytes())
    );
    assert_eq!(writers(&west, "web"), [WEST, EAST]);

    // The cluster that gave it up sees it managed elsewhere, not drifted.
    let given_up = west.wait_reason("web", Reason::ManagedElsewhere).await;
    let status = status_of(&given_up);
    assert_eq!(status.cause, Some(Cause::TakenOver));
    assert_eq!(status.managed_elsewhere.as_deref().unwrap().manager, EAST);
    assert!(status.drift.is_none());
    let events = west.events_for("OIDCClient", "web").await;
    assert!(
        events.iter().all(|event| event.reason != "Drifted"),
        "{events:?}"
    );
    // Deleting it there leaves the object to its new manager.
    west.delete_oidc_client("web").await;
    west.wait_gone("web").await;
    assert!(west.server.client(&reference(&namespace, "web")).is_some());
    assert_eq!(writers(&west, "web"), [WEST, EAST]);
}
nauthera_tests::e2e_test!(
    without_cluster_names_a_collision_is_named_and_a_handover_moves_the_object
);

async fn overlapping_reconcilers_never_write_over_each_others_objects() {
    let Some((west, east)) = unmapped_clusters().await else {
        return;
    };
    let names = ["alpha", "bravo", "charlie", "delta"];
    // Both clusters declare every one at once: one reconciler wins each create.
    for name in names {
        west.apply(&generated_client(name)).await;
        east.apply(&generated_client(name)).await;
    }
    for name in names {
        let in_west = settled(&west, name).await;
        let in_east = settled(&east, name).await;
        let registered = [in_west, in_east]
            .iter()
            .filter(|r| **r == Reason::Registered)
            .count();
        assert_eq!(
            registered, 1,
            "{name}: {in_west} in west, {in_east} in east"
        );
        let written = writers(&west, name);
        let winner = if in_west == Reason::Registered {
            WEST
        } else {
            EAST
        };
        assert!(
            !written.is_empty() && written.iter().all(|manager| manager == winner),
            "{name}: written by {written:?}"
        );
    }
}
nauthera_tests::e2e_test!(overlapping_reconcilers_never_write_over_each_others_objects);

/// Waits until the client is Registered or ManagedElsewhere, and says which.
async fn settled(stack: &Stack, name: &str) -> Reason {
    let mut outcome = None;
    stack
        .eventually("the client settles", async || {
            outcome = stack.oidc_client(name).await.and_then(|client| {
                client
                    .status
                    .as_ref()
                    .and_then(|status| status.reason)
                    .filter(|r| matches!(r, Reason::Registered | Reason::ManagedElsewhere))
            });
            outcome.is_some()
        })
        .await;
    outcome.unwrap()
}
