//! Resilience end to end: transient faults on every AdminService method converge to `Registered`
//! with no duplicate client and no lost secret; two replicas elect one writer, the other takes
//! over when it stops, and a leader cut off from the Kubernetes API stops writing before the
//! other may take over.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use nauthera_fake_server::{Fault, FaultCode, Method};
use nauthera_shared::catalog::Reason;
use nauthera_tests::e2e::{
    MANAGER, Stack, StackOptions, generated_client, secret_value, sha256_hex, short_lease,
    status_of,
};
use nauthera_tests::proxy::CuttableProxy;

const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];

async fn transient_faults_on_every_method_converge_without_duplicates_or_lost_secrets() {
    let stack = Stack::start().await;
    let codes = [
        FaultCode::Unavailable,
        FaultCode::Aborted,
        FaultCode::Internal,
        FaultCode::Unknown,
        FaultCode::ResourceExhausted,
    ];
    for (index, method) in Method::ALL.into_iter().enumerate() {
        stack
            .server
            .inject_fault(Some(method), Fault::times(codes[index % codes.len()], 2));
    }
    for name in NAMES {
        stack.apply(&generated_client(name)).await;
    }
    for name in NAMES {
        let client = stack.wait_reason(name, Reason::Registered).await;
        let held = stack.server.client(&stack.object_ref(name)).unwrap();
        assert_eq!(
            status_of(&client).client_id.as_deref(),
            Some(held.client_id.as_str())
        );
        let secret = stack.secret(name).await.unwrap();
        assert_eq!(
            secret_value(&secret, "clientId").as_deref(),
            Some(held.client_id.as_str()),
            "{name}: the Secret names the client the server holds"
        );
        let value = secret_value(&secret, "clientSecret").unwrap();
        assert_eq!(
            stack.server.client_secret_hash(&stack.object_ref(name)),
            Some(sha256_hex(value.as_bytes())),
            "{name}: the delivered secret is the one in force"
        );
    }
    let counters = stack.server.counters();
    assert!(
        counters.faults.get("ApplyClient").copied().unwrap_or(0) >= 2,
        "faults were answered: {counters:?}"
    );
    assert_eq!(
        counters.writes_by(MANAGER),
        NAMES.len() as u64,
        "one write per client: no duplicate and no re-minted secret: {counters:?}"
    );
    let created = stack
        .server
        .audit_events()
        .into_iter()
        .filter(|e| e.action == "client.applied" && e.manager == MANAGER)
        .count();
    assert_eq!(created, NAMES.len(), "one applied client per manifest");
    let retried = stack
        .reconciler()
        .metric(
            "nauthera_operator_server_calls_total",
            &[("method", "ApplyClient")],
        )
        .await;
    assert!(retried >= 3.0);
    stack.reconciler().wait_readyz(200, "ok").await;
}
nauthera_tests::e2e_test!(
    transient_faults_on_every_method_converge_without_duplicates_or_lost_secrets
);

async fn lease_holder(stack: &Stack) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(stack.client(), stack.reconciler_namespace());
    leases
        .get_opt("nauthera-reconciler")
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

async fn two_replicas_elect_one_writer_and_the_other_takes_over_when_it_stops() {
    let mut stack = Stack::start().await;
    let second = stack.start_replica("replica-b").await.unwrap();
    second.wait_ready().await.unwrap();
    stack
        .eventually("replica-a holds the lease", async || {
            lease_holder(&stack).await.as_deref() == Some("replica-a")
        })
        .await;

    stack.apply(&generated_client("alpha")).await;
    stack.wait_reason("alpha", Reason::Registered).await;
    let reconciles = "nauthera_operator_reconciles_total";
    stack
        .reconciler()
        .wait_metric(reconciles, &[], |count| count >= 1.0)
        .await;
    assert_eq!(
        second.metric(reconciles, &[]).await,
        0.0,
        "the replica that does not lead writes nothing"
    );

    // The leader stops; the other replica takes over within the lease duration.
    let first = stack.reconciler.take().unwrap();
    first.stop().await;
    assert_ne!(
        lease_holder(&stack).await.as_deref(),
        Some("replica-a"),
        "a leader that stops releases its Lease"
    );
    stack
        .eventually("replica-b holds the lease", async || {
            lease_holder(&stack).await.as_deref() == Some("replica-b")
        })
        .await;
    // The new leader counts what it found in its cache, with nothing written.
    second
        .wait_metric(
            "nauthera_operator_resources",
            &[("kind", "OIDCClient"), ("phase", "Registered")],
            |registered| registered == 1.0,
        )
        .await;
    assert_eq!(second.metric(reconciles, &[]).await, 0.0);
    stack.apply(&generated_client("beta")).await;
    stack.wait_reason("beta", Reason::Registered).await;
    second
        .wait_metric(reconciles, &[], |count| count >= 1.0)
        .await;
    assert_eq!(stack.server.counters().writes_by(MANAGER), 2);
}
nauthera_tests::e2e_test!(two_replicas_elect_one_writer_and_the_other_takes_over_when_it_stops);

/// The leader loses the Kubernetes API but still reaches the server, while its writes to the
/// server fail and are retried: it stops writing once it cannot renew within the renew deadline,
/// which is before the other replica may take the Lease, and says so in `/readyz`. The other
/// replica then registers every client once; the old leader never calls the server again.
async fn a_leader_cut_off_from_the_kubernetes_api_stops_writing_before_another_takes_over() {
    const CLIENTS: [&str; 4] = ["one", "two", "three", "four"];
    let mut stack = Stack::start_with(StackOptions {
        start_reconciler: false,
        // A lease of 8 s that its leader stops using after 4 s without a renewal.
        reconciler_env: short_lease(8, 4),
        ..StackOptions::default()
    })
    .await;
    let proxy = CuttableProxy::start(stack.cluster.api_address().unwrap())
        .await
        .unwrap();
    let first = stack
        .start_replica_through("replica-a", &proxy)
        .await
        .unwrap();
    first.wait_ready().await.unwrap();
    stack
        .eventually("replica-a holds the lease", async || {
            lease_holder(&stack).await.as_deref() == Some("replica-a")
        })
        .await;
    let second = stack.start_replica("replica-b").await.unwrap();
    second.wait_readyz(200, "following replica-a").await;

    // Every write fails and is retried by the leader.
    stack.server.inject_fault(
        Some(Method::ApplyClient),
        Fault::always(FaultCode::Unavailable),
    );
    for name in CLIENTS {
        stack.apply(&generated_client(name)).await;
    }
    let apply_calls = async |replica: &nauthera_tests::e2e::Reconciler| {
        replica
            .metric(
                "nauthera_operator_server_calls_total",
                &[("method", "ApplyClient")],
            )
            .await
    };
    stack
        .eventually("the leader retries every client", async || {
            apply_calls(&first).await >= CLIENTS.len() as f64
        })
        .await;

    proxy.cut();
    let body = first
        .wait_readyz(503, "leader election: stepped down")
        .await;
    assert!(body.contains("renew deadline"), "{body}");
    // Stepped down while the Lease still names it: nobody else could lead yet.
    assert_eq!(
        lease_holder(&stack).await.as_deref(),
        Some("replica-a"),
        "the old leader stepped down before its Lease ran out"
    );
    let calls_when_stepped_down = apply_calls(&first).await;
    let reconciles = |text: &str| {
        nauthera_tests::e2e::metric_sum(text, "nauthera_operator_reconciles_total", &[])
    };
    let reconciles_when_stepped_down = reconciles(&first.metrics().await);

    stack
        .eventually("replica-b holds the lease", async || {
            lease_holder(&stack).await.as_deref() == Some("replica-b")
        })
        .await;
    stack
        .eventually("the new leader retries too", async || {
            apply_calls(&second).await >= 1.0
        })
        .await;
    stack.server.clear_faults();
    for name in CLIENTS {
        stack.wait_reason(name, Reason::Registered).await;
    }
    assert_eq!(
        stack.server.counters().writes_by(MANAGER),
        CLIENTS.len() as u64,
        "one write per client, by the new leader"
    );
    assert_eq!(
        apply_calls(&first).await,
        calls_when_stepped_down,
        "the old leader called the server after it stepped down"
    );

    // Back on the network, it follows the new leader and still writes nothing.
    proxy.heal();
    first.wait_readyz(200, "following replica-b").await;
    assert_eq!(apply_calls(&first).await, calls_when_stepped_down);
    assert_eq!(
        reconciles(&first.metrics().await),
        reconciles_when_stepped_down,
        "the old leader recorded nothing after it stepped down"
    );
    stack.reconciler = Some(second);
}
nauthera_tests::e2e_test!(
    a_leader_cut_off_from_the_kubernetes_api_stops_writing_before_another_takes_over
);

/// A secret minted but not yet delivered lives only in memory; a reconciler that restarts meanwhile
/// mints a new one, as the SecretUndeliverable runbook says, and the Secret gets the one in force.
async fn a_restart_before_delivery_mints_a_new_secret_and_delivers_it() {
    let mut stack = Stack::start().await;
    stack
        .apply(
            "apiVersion: v1
kind: Secret
metadata:
  name: web
stringData:
  note: the team's own
",
        )
        .await;
    stack.apply(&generated_client("web")).await;
    stack.wait_reason("web", Reason::SecretUndeliverable).await;
    let first_hash = stack
        .server
        .client_secret_hash(&stack.object_ref("web"))
        .unwrap();

    // The process stops with the minted secret in memory; the foreign Secret goes away while no
    // reconciler runs; a new one starts and can only mint a new secret.
    stack.reconciler.take().unwrap().stop().await;
    stack
        .secrets()
        .delete("web", &Default::default())
        .await
        .unwrap();
    let next = stack.start_replica("replica-c").await.unwrap();
    next.wait_ready().await.unwrap();
    stack.reconciler = Some(next);

    stack.wait_reason("web", Reason::Registered).await;
    let secret = stack.secret("web").await.unwrap();
    let value = secret_value(&secret, "clientSecret").unwrap();
    let hash = stack
        .server
        .client_secret_hash(&stack.object_ref("web"))
        .unwrap();
    assert_ne!(hash, first_hash, "a new secret was minted");
    assert_eq!(
        hash,
        sha256_hex(value.as_bytes()),
        "the Secret holds the secret in force"
    );
}
nauthera_tests::e2e_test!(a_restart_before_delivery_mints_a_new_secret_and_delivers_it);
