//! A rolling upgrade on the real control plane: the previous release of the reconciler (built
//! from `tests/previous/COMMIT` by `tests/previous/build.sh`) and this one run side by side as two
//! replicas under the shipped RBAC, each acting with a token of the reconciler's ServiceAccount
//! and its own client certificate. The previous release's CRDs are installed first and every kind
//! is stored while it leads; a churn of creates, updates, rotations and deletes runs throughout;
//! this release's CRDs are applied over the stored objects; the leader is stopped twice, so the
//! Lease goes from the previous release to this one and back. Then: every resource converges,
//! the server holds exactly what the manifests declare (nothing lost, nothing created twice),
//! only the leader wrote, every Secret holds the value in force and no secret was minted twice,
//! nothing is written once converged, and no status flapped between the two releases' texts.
//!
//! Real plane only: the point is the real API server's storage, Lease API and RBAC.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use kube::api::{Api, ListParams};
use nauthera_fake_server::{ClientCertOptions, grant_everything, pki};
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use nauthera_tests::chaos::churn::{Churn, ChurnCounts, pause};
use nauthera_tests::chaos::invariants::{self, Snapshot, Verdict};
use nauthera_tests::chaos::observe::Observer;
use nauthera_tests::chaos::replicas::certificate_identity;
use nauthera_tests::chaos::snapshot;
use nauthera_tests::chaos::world::{Kind, World};
use nauthera_tests::e2e::{Reconciler, Stack, StackOptions, short_lease};
use nauthera_tests::manifests;
use nauthera_tests::previous::PreviousRelease;
use nauthera_tests::upgrade::{Recorder, flapping, minted_twice};
use tokio::time::Instant;

/// The Lease identities of the two replicas, named after the release each runs.
const PREVIOUS: &str = "replica-previous";
const CURRENT: &str = "replica-current";
/// Manifests the churn keeps around, and its pace.
const RESOURCES: usize = 16;
const CHURN_PER_SECOND: f64 = 3.0;
/// How long the churn runs under each leader.
const PHASE: Duration = Duration::from_secs(8);
/// How long a handover or convergence may take on a loaded machine before the test fails.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(90);
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(180);
/// How long nothing may be written once everything converged.
const STEADY_WINDOW: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(250);

/// One replica: the release it runs and its own certificate.
struct Replica {
    identity: &'static str,
    program: PathBuf,
    env: Vec<(String, String)>,
    process: Option<Reconciler>,
}

impl Replica {
    fn new(stack: &Stack, identity: &'static str, program: PathBuf) -> Replica {
        let tls_dir = stack.cluster.dir().join(format!("{identity}-tls"));
        let certificate = stack
            .pki
            .ca
            .issue_client(&ClientCertOptions::identity(&certificate_identity(
                identity,
            )))
            .unwrap();
        pki::write_tls_dir(&tls_dir, &certificate, &[stack.pki.ca.cert_pem()]).unwrap();
        Replica {
            identity,
            program,
            env: vec![
                ("NAUTHERA_TLS_DIR".to_owned(), tls_dir.display().to_string()),
                ("NAUTHERA_RETRY_BACKOFF_MAX".to_owned(), "4s".to_owned()),
            ],
            process: None,
        }
    }

    async fn start(&mut self, stack: &Stack) {
        let process = stack
            .start_replica_running(self.identity, &self.program, &self.env)
            .await
            .unwrap_or_else(|e| panic!("replica {} does not start: {e:#}", self.identity));
        self.process = Some(process);
    }

    /// Stops the process as a rollout stops a pod (SIGTERM).
    async fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            process.stop().await;
        }
    }
}

/// The stack, the two replicas and what watches them.
struct Upgrade {
    stack: Stack,
    previous: Replica,
    current: Replica,
    observer: Observer,
    recorder: Recorder,
    world: World,
    churn: Churn,
    churned: ChurnCounts,
    organizations_at_start: BTreeSet<String>,
    started: jiff::Timestamp,
}

impl Upgrade {
    fn leader(&self) -> Option<String> {
        self.observer
            .lock()
            .leaderships
            .last()
            .map(|l| l.holder.clone())
    }

    /// Churns until `identity` holds the Lease; how long that took.
    async fn churn_until_leader(&mut self, identity: &str) -> Duration {
        let began = Instant::now();
        let deadline = began + HANDOVER_TIMEOUT;
        while self.leader().as_deref() != Some(identity) {
            assert!(
                Instant::now() < deadline,
                "{identity} did not take the Lease within {HANDOVER_TIMEOUT:?}; leaderships: {:?}",
                self.observer.lock().leaderships
            );
            self.churn
                .step(&mut self.world, &mut self.churned)
                .await
                .unwrap();
            tokio::time::sleep(pause(CHURN_PER_SECOND)).await;
        }
        began.elapsed()
    }

    /// Churns for `how_long`.
    async fn churn_for(&mut self, how_long: Duration) {
        let end = Instant::now() + how_long;
        while Instant::now() < end {
            self.churn
                .step(&mut self.world, &mut self.churned)
                .await
                .unwrap();
            tokio::time::sleep(pause(CHURN_PER_SECOND)).await;
        }
    }

    fn verdicts(&self, snapshot: &Snapshot) -> Vec<Verdict> {
        let leaderships = self.observer.lock().leaderships.clone();
        invariants::state_verdicts(
            &self.world,
            snapshot,
            &self.organizations_at_start,
            &leaderships,
            self.started,
            &[PREVIOUS, CURRENT],
        )
    }

    /// Waits until every invariant holds; fails with those that do not.
    async fn converge(&self, when: &str) -> Snapshot {
        let began = Instant::now();
        let deadline = began + CONVERGE_TIMEOUT;
        loop {
            let snapshot = snapshot::take(&self.stack).await.unwrap();
            let failing: Vec<Verdict> = self
                .verdicts(&snapshot)
                .into_iter()
                .filter(|v| !v.holds)
                .collect();
            if failing.is_empty() {
                eprintln!(
                    "rolling upgrade: {when}: converged in {:?}",
                    began.elapsed()
                );
                return snapshot;
            }
            if Instant::now() > deadline {
                panic!("{when}: not converged within {CONVERGE_TIMEOUT:?}: {failing:#?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Every manifest of each kind reads back as this release's type, as many as the churn keeps.
async fn every_manifest_reads_as_this_release(upgrade: &Upgrade) {
    let client = upgrade.stack.client();
    let namespace = upgrade.stack.namespace();
    let lp = ListParams::default();
    let read = [
        (
            Kind::OIDCClient,
            Api::<OIDCClient>::namespaced(client.clone(), namespace)
                .list(&lp)
                .await
                .map(|l| l.items.len()),
        ),
        (
            Kind::Branding,
            Api::<Branding>::namespaced(client.clone(), namespace)
                .list(&lp)
                .await
                .map(|l| l.items.len()),
        ),
        (
            Kind::IdentityProvider,
            Api::<IdentityProvider>::namespaced(client.clone(), namespace)
                .list(&lp)
                .await
                .map(|l| l.items.len()),
        ),
        (
            Kind::Organization,
            Api::<Organization>::namespaced(client, namespace)
                .list(&lp)
                .await
                .map(|l| l.items.len()),
        ),
    ];
    for (kind, listed) in read {
        let listed = listed.unwrap_or_else(|e| panic!("{} do not read: {e}", kind.name()));
        let live = upgrade.world.live_of(kind).len();
        // Deleted manifests may still be there, held by their finalizer.
        assert!(
            listed >= live,
            "{}: {listed} read, {live} declared",
            kind.name()
        );
    }
}

async fn the_previous_release_hands_over_to_this_one_and_back() {
    // First: its build leaves this release's reconciler for the harness's build to link again.
    let release = PreviousRelease::get().unwrap();
    let grants = [PREVIOUS, CURRENT]
        .iter()
        .map(|identity| grant_everything(&certificate_identity(identity)))
        .collect();
    let stack = Stack::try_start(StackOptions {
        grants: Some(grants),
        start_reconciler: false,
        reconciler_env: short_lease(6, 4),
        crds: Some(release.crds.clone()),
        ..StackOptions::default()
    })
    .await
    .unwrap();
    let client = stack.client();
    let observer = Observer::start(&client, stack.namespace(), stack.reconciler_namespace());
    let recorder = Recorder::start(&client, stack.namespace());
    let this_release = nauthera_tests::binaries::Binary::Reconciler.path().unwrap();
    let mut previous = Replica::new(&stack, PREVIOUS, release.reconciler.clone());
    let current = Replica::new(&stack, CURRENT, this_release);
    let organizations_at_start = stack
        .server
        .held_objects()
        .into_iter()
        .filter(|h| h.kind == "organization")
        .map(|h| h.name)
        .collect();
    let churn = Churn::new(client.clone(), stack.namespace(), 36, RESOURCES);
    previous.start(&stack).await;
    let mut upgrade = Upgrade {
        stack,
        previous,
        current,
        observer,
        recorder,
        world: World::default(),
        churn,
        churned: ChurnCounts::default(),
        organizations_at_start,
        started: jiff::Timestamp::now(),
    };

    // The previous release leads and stores every kind.
    upgrade.churn_until_leader(PREVIOUS).await;
    upgrade.current.start(&upgrade.stack).await;
    upgrade.stack.show_deployment_ready(2).await.unwrap();
    upgrade.churn.populate(&mut upgrade.world).await.unwrap();
    let census = upgrade.world.census();
    assert_eq!(census.len(), 4, "every kind is stored: {census:?}");
    upgrade.converge("stored by the previous release").await;
    upgrade.churn_for(PHASE).await;

    // This release's CRDs over the objects the previous one stored: accepted, and every object
    // still reads.
    manifests::install_crds(&client)
        .await
        .expect("this release's CRDs are accepted over the previous release's objects");
    every_manifest_reads_as_this_release(&upgrade).await;

    // The previous release's leader stops: this release takes over, during the churn.
    upgrade.previous.stop().await;
    let took = upgrade.churn_until_leader(CURRENT).await;
    eprintln!("rolling upgrade: the previous release to this one in {took:?}");
    upgrade.previous.start(&upgrade.stack).await;
    upgrade.churn_for(PHASE).await;

    // And back: this release's leader stops, the previous one takes over.
    upgrade.current.stop().await;
    let took = upgrade.churn_until_leader(PREVIOUS).await;
    eprintln!("rolling upgrade: this release back to the previous one in {took:?}");
    upgrade.current.start(&upgrade.stack).await;
    upgrade.churn_for(PHASE).await;

    let snapshot = upgrade.converge("after both handovers").await;
    every_manifest_reads_as_this_release(&upgrade).await;

    // Nothing written once converged.
    upgrade.stack.server.reset_counters();
    tokio::time::sleep(STEADY_WINDOW).await;
    let steady_writes = upgrade.stack.server.counters().total_writes();
    assert_eq!(
        steady_writes, 0,
        "writes in {STEADY_WINDOW:?} after converging"
    );

    // Both releases wrote on the server (each led in turn, as the handovers above waited for).
    for identity in [PREVIOUS, CURRENT] {
        let actor = certificate_identity(identity);
        assert!(
            snapshot.audit.iter().any(|e| e.actor == actor),
            "{identity} wrote nothing on the server"
        );
    }

    let history = upgrade.recorder.lock();
    let flapped = flapping(&history, &["Registered", "Refused"]);
    assert!(flapped.is_empty(), "statuses flapped: {flapped:#?}");
    let minted = minted_twice(&history);
    assert!(minted.is_empty(), "secrets minted twice: {minted:#?}");
    assert!(
        history.ready.len() >= RESOURCES,
        "the recorder saw {} statuses",
        history.ready.len()
    );
    eprintln!(
        "rolling upgrade: {} operations ({:?}), {} manifests live, {} statuses recorded, {} Ready texts",
        upgrade.churned.operations(),
        upgrade.churned,
        upgrade.world.live.len(),
        history.ready.len(),
        history.ready.values().map(Vec::len).sum::<usize>(),
    );
}

nauthera_tests::e2e_test!(real_only: the_previous_release_hands_over_to_this_one_and_back);
