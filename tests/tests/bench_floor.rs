//! The benchmark's full floor makes exactly the writes a registration requires, per manifest and
//! per kind, and nothing else: a floor that silently skipped a write would flatter every ratio
//! measured against it. Run on a few manifests on the emulator, whose tally counts every request.

use nauthera_shared::FINALIZER;
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use nauthera_tests::bench::floor::{self, FloorWrites};
use nauthera_tests::bench::measure::{Calls, writes};
use nauthera_tests::bench::workload::{Workload, WorkloadKind};
use nauthera_tests::e2e::{Declared, RECONCILER_IDENTITY, Stack, StackOptions};

fn options(kind: WorkloadKind) -> StackOptions {
    let options = StackOptions {
        start_reconciler: false,
        ..StackOptions::default()
    };
    match kind {
        WorkloadKind::Mixed => StackOptions {
            organizations: Vec::new(),
            grants: Some(vec![nauthera_fake_server::grant_everything(
                RECONCILER_IDENTITY,
            )]),
            ..options
        },
        _ => options,
    }
}

fn calls(entries: &[(&str, u64)]) -> Calls {
    entries
        .iter()
        .map(|(key, count)| ((*key).to_owned(), *count))
        .collect()
}

/// Runs one floor on a fresh stack holding `size` manifests of `kind` in two namespaces.
async fn floor_on(
    kind: WorkloadKind,
    size: usize,
    writes_made: FloorWrites,
) -> (Stack, floor::ColdStartFloor) {
    let workload = Workload {
        kind,
        size,
        namespaces: 2,
    };
    let stack = Stack::start_with(options(kind)).await;
    workload.create(&stack.client()).await.unwrap();
    let measured = floor::cold_start(
        &stack,
        std::path::Path::new(env!("CARGO_BIN_EXE_nauthera-bench")),
        4,
        &workload.composition(),
        writes_made,
    )
    .await
    .unwrap();
    (stack, measured)
}

/// Every manifest of a kind carries the finalizer once the floor is done.
async fn finalized<K: Declared>(stack: &Stack) -> usize {
    let api: kube::Api<K> = kube::Api::all(stack.client());
    let listed = api.list(&Default::default()).await.unwrap().items;
    assert!(
        listed.iter().all(|m| m
            .meta()
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == FINALIZER))),
        "every {} carries the finalizer",
        K::kind(&())
    );
    listed.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_floor_makes_every_write_of_a_client_registration_once() {
    let (stack, measured) = floor_on(WorkloadKind::Clients, 6, FloorWrites::Full).await;
    assert_eq!(measured.server_calls, calls(&[("ApplyClient", 6)]));
    assert_eq!(
        writes(&measured.kube_requests),
        calls(&[
            ("create events", 6),
            ("create secrets", 6),
            ("patch oidcclients", 6),
            ("patch oidcclients/status", 6),
        ]),
        "all requests: {:?}",
        measured.kube_requests
    );
    assert_eq!(finalized::<OIDCClient>(&stack).await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registration_only_floor_leaves_out_the_finalizer_and_the_event() {
    let (_stack, measured) =
        floor_on(WorkloadKind::Clients, 6, FloorWrites::RegistrationOnly).await;
    assert_eq!(measured.server_calls, calls(&[("ApplyClient", 6)]));
    assert_eq!(
        writes(&measured.kube_requests),
        calls(&[("create secrets", 6), ("patch oidcclients/status", 6)]),
        "all requests: {:?}",
        measured.kube_requests
    );
}

/// The mixed workload at 12: one Organization, one Branding, one IdentityProvider, nine
/// OIDCClients; each kind gets its finalizer, server write, status and Event, and only clients a
/// Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_floor_makes_every_write_of_each_kind_once() {
    let (stack, measured) = floor_on(WorkloadKind::Mixed, 12, FloorWrites::Full).await;
    assert_eq!(
        measured.server_calls,
        calls(&[
            ("ApplyBranding", 1),
            ("ApplyClient", 9),
            ("ApplyIdentityProvider", 1),
            ("ApplyOrganization", 1),
        ])
    );
    assert_eq!(
        writes(&measured.kube_requests),
        calls(&[
            ("create events", 12),
            ("create secrets", 9),
            ("patch brandings", 1),
            ("patch brandings/status", 1),
            ("patch identityproviders", 1),
            ("patch identityproviders/status", 1),
            ("patch oidcclients", 9),
            ("patch oidcclients/status", 9),
            ("patch organizations", 1),
            ("patch organizations/status", 1),
        ]),
        "all requests: {:?}",
        measured.kube_requests
    );
    assert_eq!(finalized::<Organization>(&stack).await, 1);
    assert_eq!(finalized::<Branding>(&stack).await, 1);
    assert_eq!(finalized::<IdentityProvider>(&stack).await, 1);
    assert_eq!(finalized::<OIDCClient>(&stack).await, 9);
}
