//! A watch resumed after etcd compacted the history it would resume from: the API server answers
//! 410 Gone, the reconciler lists again, and no change made in between is lost. A paged list
//! continued after the same compaction: 410 with a token for the rest, which the plugin's listing
//! goes on with.
//!
//! The API servers of this test binary serve watches from etcd (`--watch-cache=false`), so that a
//! resumed watch meets etcd's compaction (every 20 s here) rather than the watch cache's window;
//! only a real control plane has that history to lose.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchParams};
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

/// The server's side of the plugin's paged listing (`cli/src/cluster/paging.rs`): a continue
/// token whose snapshot etcd compacted away is answered with 410 Expired and a token for the rest
/// of the list, which reads each remaining object once.
async fn a_list_continued_past_compaction_gets_a_token_for_the_rest() {
    add_api_server_flags(&["--watch-cache=false"]).unwrap();
    let stack = Stack::start_with(StackOptions {
        start_reconciler: false,
        ..StackOptions::default()
    })
    .await;
    let maps: Api<ConfigMap> = Api::namespaced(stack.client(), stack.namespace());
    let map = |name: &str, labelled: bool| -> ConfigMap {
        let labels = if labelled {
            serde_json::json!({"listed": "yes"})
        } else {
            serde_json::json!({})
        };
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "labels": labels}}))
            .unwrap()
    };
    for name in ["a", "b", "c"] {
        maps.create(&PostParams::default(), &map(name, true))
            .await
            .unwrap();
    }
    let listed = ListParams::default().labels("listed=yes").limit(1);
    let first = maps.list(&listed).await.unwrap();
    let names = |list: &kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .iter()
            .map(|m| m.metadata.name.clone().unwrap())
            .collect()
    };
    assert_eq!(names(&first), ["a"]);
    let token = first.metadata.continue_.clone().unwrap();

    // Writes move etcd's revision on; the compactor then passes the first page's revision.
    let deadline = tokio::time::Instant::now() + COMPACTION_INTERVAL * 4;
    let mut ticks = 0;
    let expired = loop {
        match maps.list(&listed.clone().continue_token(&token)).await {
            Err(kube::Error::Api(status)) if status.code == 410 => break status,
            Ok(_) => {}
            Err(other) => panic!("{other}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the continue token still works after {:?}",
            COMPACTION_INTERVAL * 4
        );
        ticks += 1;
        maps.create(
            &PostParams::default(),
            &map(&format!("tick-{ticks}"), false),
        )
        .await
        .unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    assert_eq!(expired.reason, "Expired", "{expired:?}");
    let rest = expired
        .metadata
        .and_then(|list| list.continue_)
        .filter(|token| !token.is_empty())
        .expect("the 410 carries a token for the rest");

    let mut seen = Vec::new();
    let mut params = listed.continue_token(&rest);
    loop {
        let page = maps.list(&params).await.unwrap();
        seen.extend(names(&page));
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => break,
        }
    }
    assert_eq!(seen, ["b", "c"], "the rest, once each");
}
nauthera_tests::e2e_test!(real_only: a_list_continued_past_compaction_gets_a_token_for_the_rest);
