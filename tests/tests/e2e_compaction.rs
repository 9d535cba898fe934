//! A watch resumed after etcd compacted the history it would resume from: the API server answers
//! 410 Gone, the reconciler lists again, and no change made in between is lost.
//!
//! The API servers of this test binary serve watches from etcd (`--watch-cache=false`), so that a
//! resumed watch meets etcd's compaction (every 20 s here) rather than the watch cache's window;
//! only a real control plane has that history to lose.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::api::WatchParams;
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::OIDCClient;
use nauthera_tests::control_plane::real::{COMPACTION_INTERVAL, add_api_server_flags};
use nauthera_tests::e2e::{Stack, StackOptions, generated_client, status_of};
use nauthera_tests::proxy::CuttableProxy;

async fn a_watch_resumed_after_compaction_relists_and_loses_no_change() {
    add_api_server_flags(&["--watch-cache=false"]).unwrap();
    let mut stack = Stack::start_with(StackOptions {
        start_reconciler: false,
        ..StackOptions::default()
    })
    .await;
    let proxy = CuttableProxy::start(stack.cluster.api_address().unwrap())
        .await
        .unwrap();
    let reconciler = stack
        .start_replica_through("replica-a", &proxy)
        .await
        .unwrap();
    reconciler.wait_ready().await.unwrap();
    stack.reconciler = Some(reconciler);
    stack.apply(&generated_client("web")).await;
    let registered = stack.wait_reason("web", Reason::Registered).await;
    let seen = registered.metadata.resource_version.clone().unwrap();

    // Cut off, the reconciler's watches hold what they saw last; the manifest changes meanwhile.
    proxy.cut();
    stack
        .apply(&generated_client("web").replace("displayName: web", "displayName: Web shop"))
        .await;
    // Until etcd has compacted past what the reconciler saw, a watch from there still works.
    let clients = stack.oidc_clients();
    let deadline = tokio::time::Instant::now() + COMPACTION_INTERVAL * 4;
    loop {
        let resumed = clients
            .watch(&WatchParams::default().timeout(1), &seen)
            .await;
        let gone = match resumed {
            Err(kube::Error::Api(status)) => status.code == 410,
            Ok(stream) => {
                use futures::StreamExt;
                let mut stream = Box::pin(stream);
                matches!(
                    stream.next().await,
                    Some(Ok(kube::api::WatchEvent::Error(status))) if status.code == 410
                )
            }
            Err(_) => false,
        };
        if gone {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "etcd has not compacted past revision {seen} after {:?}",
            COMPACTION_INTERVAL * 4
        );
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }

    // Healed, its watch resumes from a compacted revision, lists again and finds the change.
    proxy.heal();
    let web: OIDCClient = stack
        .wait_for("web", "registered at generation 2", |client| {
            client.metadata.generation == Some(2)
                && client.status.as_ref().is_some_and(|s| {
                    s.reason == Some(Reason::Registered) && s.observed_generation == Some(2)
                })
        })
        .await;
    assert_eq!(status_of(&web).generation_in_force, Some(2));
    let held = stack.server.client(&stack.object_ref("web")).unwrap();
    assert_eq!(
        held.spec.unwrap().display_name,
        "Web shop",
        "the change reached the server"
    );
}
nauthera_tests::e2e_test!(real_only: a_watch_resumed_after_compaction_relists_and_loses_no_change);
