//! The reliability suite's bounded run: every chaos scenario at a small size, each followed by
//! the invariants, then the leak scan (which must find nothing, and must find a planted secret).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_tests::chaos::{self, Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_keeps_every_invariant_and_leaks_nothing() {
    let report = chaos::run(&Config::bounded()).await.unwrap();
    println!("{}", report.markdown());
    assert_eq!(report.scenarios.len(), chaos::Scenario::ALL.len());
    assert!(
        report.leaks.scan.sources > 5,
        "the scan looked at every source: {:?}",
        report.leaks.scan
    );
    assert!(report.leaks.scan.secrets_searched > 0);
    let failures = report.failures();
    assert!(failures.is_empty(), "broken:\n{}", failures.join("\n"));
}
