//! The reliability suite's bounded run on the Kubernetes side: every Kubernetes-side chaos
//! scenario (etcd stopped, the API server restarted, compaction under resumed watches, throttling,
//! the leader's path to the API cut, the garbage collector racing deletions), each on a real
//! control plane of its own, small and short, each followed by the invariants, then the leak scan.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_tests::chaos::{self, Config, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubernetes_side_scenario_keeps_every_invariant_and_leaks_nothing() {
    let report = chaos::run(&Config::bounded_kubernetes()).await.unwrap();
    println!("{}", report.markdown());
    assert_eq!(report.scenarios.len(), Scenario::KUBERNETES.len());
    let faults = |name: &str| {
        report
            .scenarios
            .iter()
            .find(|s| s.scenario.name() == name)
            .map(|s| s.disruption.clone())
            .unwrap()
    };
    // Each scenario did what it says, so that none passes for having done nothing.
    assert!(faults("etcd-stopped").etcd_stops > 0);
    assert!(faults("api-server-restarted").api_server_restarts > 0);
    assert!(
        faults("compaction").gone > 0,
        "a watch resuming after a break met 410 Gone"
    );
    assert!(
        faults("throttled").throttled > 0,
        "the API server answered 429"
    );
    assert!(
        faults("api-cut").lease_handovers > 0,
        "the other replica took the Lease over"
    );
    let deletions = faults("gc-orphan").deletions;
    assert!(
        deletions.background > 0 && deletions.foreground > 0 && deletions.orphan > 0,
        "manifests were deleted with each propagation policy: {deletions:?}"
    );
    assert!(report.leaks.scan.secrets_searched > 0);
    let failures = report.failures();
    assert!(failures.is_empty(), "broken:\n{}", failures.join("\n"));
}
