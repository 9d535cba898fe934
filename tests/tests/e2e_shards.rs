//! Shards of one cluster end to end: two reconcilers on one server, each with its own `--shard`,
//! `--manager`, Lease and published state. With disjoint scopes each reconciles only its own
//! namespaces and kinds (a namespace that moves into a selector is taken up, one that moves out is
//! left alone); with overlapping selectors both keep running, the server's managers keep them
//! from writing over each other, and the overlap is reported in both published states, in the
//! gauge and by the plugin.
//!
//! The emulator only: on a real cluster the harness limits every replica to the test's one
//! namespace, which shards of several namespaces cannot live with.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use nauthera_shared::catalog::Reason;
use nauthera_shared::control_plane::{ControlPlaneState, STATE_KEY, state_configmap_name};
use nauthera_shared::kinds::Kind;
use nauthera_shared::resources::{Branding, ClientPolicy, OIDCClient};
use nauthera_tests::cluster::{Sharing, TEST_LABEL};
use nauthera_tests::e2e::{
    ISSUER, RECONCILER_ACCOUNT, Reconciler, Stack, StackOptions, generated_client,
    generated_client_with,
};
use nauthera_tests::manifests;

/// A stack with no reconciler of its own, alone on a shared real cluster (its shards select
/// namespaces by label and watch every namespace).
async fn shard_stack() -> Option<Stack> {
    Some(
        Stack::start_with(StackOptions {
            start_reconciler: false,
            sharing: Sharing::Alone,
            ..StackOptions::default()
        })
        .await,
    )
}

/// What an operator adds for each shard to the shipped Role: its own Lease and state ConfigMap.
async fn allow_shards(stack: &Stack, shards: &[&str]) {
    let leases: Vec<String> = shards
        .iter()
        .map(|s| format!("nauthera-reconciler-{s}"))
        .collect();
    let states: Vec<String> = shards
        .iter()
        .map(|s| state_configmap_name(Some(s)))
        .collect();
    let objects: Vec<DynamicObject> = [
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": { "name": "nauthera-reconciler-shards", "namespace": stack.reconciler_namespace() },
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": leases,
                    "verbs": ["get", "update", "patch"],
                },
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": states,
                    "verbs": ["get", "update", "patch"],
                },
            ],
        }),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": { "name": "nauthera-reconciler-shards", "namespace": stack.reconciler_namespace() },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "nauthera-reconciler-shards",
            },
            "subjects": [{
                "kind": "ServiceAccount",
                "name": RECONCILER_ACCOUNT,
                "namespace": stack.reconciler_namespace(),
            }],
        }),
    ]
    .into_iter()
    .map(|object| serde_json::from_value(object).unwrap())
    .collect();
    manifests::apply_all(
        &stack.client(),
        &objects,
        Some(stack.reconciler_namespace()),
    )
    .await
    .expect("the shards' Role applies");
}

async fn create_namespace(stack: &Stack, name: &str, labels: &[(&str, &str)]) {
    // Labelled as the test's, so that it goes when the test ends.
    let mut labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    labels.insert(TEST_LABEL, stack.namespace());
    let namespace: Namespace = serde_json::from_value(
        serde_json::json!({ "metadata": { "name": name, "labels": labels } }),
    )
    .unwrap();
    Api::<Namespace>::all(stack.client())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("the namespace is created");
}

async fn label_namespace(stack: &Stack, name: &str, key: &str, value: &str) {
    Api::<Namespace>::all(stack.client())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": { key: value } } })),
        )
        .await
        .expect("the namespace is labelled");
}

/// Starts shard `name` writing as manager `nauthera-<name>`, with `env` on top, and waits for
/// `/readyz`.
async fn start_shard(stack: &Stack, name: &str, env: &[(&str, &str)]) -> Reconciler {
    let mut all = vec![
        ("NAUTHERA_SHARD".to_owned(), name.to_owned()),
        ("NAUTHERA_MANAGER".to_owned(), format!("nauthera-{name}")),
    ];
    all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let reconciler = stack
        .start_replica_configured(&format!("shard-{name}"), &stack.reconciler_kubeconfig, &all)
        .await
        .expect("the shard starts");
    reconciler.wait_ready().await.expect("the shard is ready");
    reconciler
}

async fn client_in(stack: &Stack, namespace: &str, name: &str) -> OIDCClient {
    Api::<OIDCClient>::namespaced(stack.client(), namespace)
        .get(name)
        .await
        .expect("the OIDCClient exists")
}

fn ready_reason(client: &OIDCClient) -> Option<Reason> {
    client.status.as_ref().and_then(|status| status.reason)
}

/// Waits until the OIDCClient's current generation is registered.
async fn wait_registered(stack: &Stack, namespace: &str, name: &str) -> OIDCClient {
    stack
        .eventually(&format!("{namespace}/{name} is registered"), async || {
            let client = client_in(stack, namespace, name).await;
            ready_reason(&client) == Some(Reason::Registered)
                && client.status.as_ref().and_then(|s| s.observed_generation)
                    == client.metadata.generation
        })
        .await;
    client_in(stack, namespace, name).await
}

/// The managers the server's audit log names for writes to an object in `namespace`.
fn writers_in(stack: &Stack, namespace: &str) -> Vec<String> {
    let mut managers: Vec<String> = stack
        .server
        .audit_events()
        .into_iter()
        .filter(|event| {
            event
                .r#ref
                .as_ref()
                .is_some_and(|r| r.namespace == namespace)
        })
        .map(|event| event.manager)
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

async fn published(stack: &Stack, shard: &str) -> Option<ControlPlaneState> {
    let config_maps: Api<ConfigMap> = Api::namespaced(stack.client(), stack.reconciler_namespace());
    let config_map = config_maps
        .get_opt(&state_configmap_name(Some(shard)))
        .await
        .ok()??;
    serde_json::from_str(config_map.data?.get(STATE_KEY)?).ok()
}

async fn wait_published(
    stack: &Stack,
    shard: &str,
    what: &str,
    check: impl Fn(&ControlPlaneState) -> bool,
) -> ControlPlaneState {
    stack
        .eventually(what, async || {
            published(stack, shard)
                .await
                .is_some_and(|state| check(&state))
        })
        .await;
    published(stack, shard).await.unwrap()
}

async fn lease_holder(stack: &Stack, name: &str) -> Option<String> {
    Api::<Lease>::namespaced(stack.client(), stack.reconciler_namespace())
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|lease| lease.spec)
        .and_then(|spec| spec.holder_identity)
}

fn branding(name: &str) -> String {
    format!(
        "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: {name}
spec:
  issuer: {ISSUER}
  branding:
    colors:
      primary: \"#112233\"
"
    )
}

async fn disjoint_shards_each_reconcile_only_their_own_namespaces_and_kinds() {
    let Some(stack) = shard_stack().await else {
        return;
    };
    let base = stack.namespace().to_owned();
    let (ns_a, ns_b, ns_c) = (
        format!("{base}-a"),
        format!("{base}-b"),
        format!("{base}-c"),
    );
    create_namespace(&stack, &ns_a, &[("team", "a")]).await;
    create_namespace(&stack, &ns_b, &[("team", "b")]).await;
    create_namespace(&stack, &ns_c, &[("team", "c")]).await;
    allow_shards(&stack, &["a", "b"]).await;
    // Shard a by a list of namespaces; shard b by a selector, and OIDCClients only.
    let a = start_shard(&stack, "a", &[("NAUTHERA_NAMESPACES", &ns_a)]).await;
    let b = start_shard(
        &stack,
        "b",
        &[
            ("NAUTHERA_NAMESPACE_SELECTOR", "team=b"),
            ("NAUTHERA_KINDS", "OIDCClient"),
        ],
    )
    .await;
    stack.show_deployment_ready(1).await.unwrap();
    for namespace in [&ns_a, &ns_b, &ns_c] {
        stack.apply_in(namespace, &generated_client("web")).await;
    }
    stack.apply_in(&ns_b, &branding("look")).await;

    let web_a = wait_registered(&stack, &ns_a, "web").await;
    let web_b = wait_registered(&stack, &ns_b, "web").await;
    assert_eq!(
        web_a.status.as_ref().unwrap().manager.as_deref(),
        Some("nauthera-a")
    );
    assert_eq!(
        web_b.status.as_ref().unwrap().manager.as_deref(),
        Some("nauthera-b")
    );
    assert_eq!(writers_in(&stack, &ns_a), ["nauthera-a"]);
    assert_eq!(writers_in(&stack, &ns_b), ["nauthera-b"]);
    let counters = stack.server.counters();
    assert_eq!(counters.writes_by("nauthera-a"), 1, "{counters:?}");
    assert_eq!(counters.writes_by("nauthera-b"), 1, "{counters:?}");

    // Each leads on its own Lease and publishes its own state, with no overlap.
    assert_eq!(
        lease_holder(&stack, "nauthera-reconciler-a")
            .await
            .as_deref(),
        Some("shard-a")
    );
    assert_eq!(
        lease_holder(&stack, "nauthera-reconciler-b")
            .await
            .as_deref(),
        Some("shard-b")
    );
    let state_b = wait_published(&stack, "b", "shard b published its state", |state| {
        state.scope.is_some()
    })
    .await;
    let scope_b = state_b.scope.unwrap();
    assert_eq!(scope_b.shard.as_deref(), Some("b"));
    assert_eq!(
        scope_b.namespace_selector.as_ref().map(|s| s.as_str()),
        Some("team=b")
    );
    assert_eq!(scope_b.kinds, [Kind::OidcClient]);
    assert_eq!(state_b.manager, "nauthera-b");
    assert_eq!(state_b.lease_name.as_deref(), Some("nauthera-reconciler-b"));
    let state_a = wait_published(&stack, "a", "shard a published its state", |state| {
        state.scope.is_some()
    })
    .await;
    assert_eq!(
        state_a.scope.unwrap().namespaces,
        std::slice::from_ref(&ns_a)
    );
    assert!(state_a.overlaps.is_empty() && state_b.overlaps.is_empty());
    assert_eq!(a.metric("nauthera_operator_shard_overlaps", &[]).await, 0.0);

    // Nobody's: the client in c, the branding in b (shard b reconciles no Brandings). Neither
    // is touched: no status but the schema's default, no finalizer.
    let orphan = client_in(&stack, &ns_c, "web").await;
    assert!(untouched(orphan.status.as_ref()), "{:?}", orphan.status);
    assert!(orphan.metadata.finalizers.unwrap_or_default().is_empty());
    let look = Api::<Branding>::namespaced(stack.client(), &ns_b)
        .get("look")
        .await
        .unwrap();
    assert!(untouched(look.status.as_ref()), "{:?}", look.status);
    assert!(look.metadata.finalizers.unwrap_or_default().is_empty());
    assert_eq!(writers_in(&stack, &ns_c), Vec::<String>::new());

    // c moves into b's selector: b takes its client up.
    label_namespace(&stack, &ns_c, "team", "b").await;
    let taken = wait_registered(&stack, &ns_c, "web").await;
    assert_eq!(
        taken.status.as_ref().unwrap().manager.as_deref(),
        Some("nauthera-b")
    );
    assert_eq!(writers_in(&stack, &ns_c), ["nauthera-b"]);

    // And out again: an edit of its client is left alone, its finalizer stays.
    label_namespace(&stack, &ns_c, "team", "c").await;
    let edit = |name: &str, uri: &str| {
        generated_client_with(
            name,
            "Delete",
            &format!("  postLogoutRedirectUris:\n    - https://{uri}.example.test/bye\n"),
        )
    };
    // An edit in b's own namespace, reconciled, shows that b has seen the move.
    stack.apply_in(&ns_b, &edit("web", "first")).await;
    wait_registered(&stack, &ns_b, "web").await;
    stack.apply_in(&ns_c, &edit("web", "left")).await;
    stack.apply_in(&ns_b, &edit("web", "second")).await;
    wait_registered(&stack, &ns_b, "web").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let left = client_in(&stack, &ns_c, "web").await;
    assert_eq!(left.metadata.generation, Some(2));
    assert_eq!(
        left.status.as_ref().and_then(|s| s.observed_generation),
        Some(1),
        "a namespace that left the selector is no longer reconciled"
    );
    assert!(
        !left.metadata.finalizers.unwrap_or_default().is_empty(),
        "its finalizer stays"
    );
    assert_eq!(stack.server.counters().writes_by("nauthera-a"), 1);

    // The plugin shows both shards, each with its scope.
    let run = stack.plugin(&["status", "-A", "-o", "json"]).await;
    let report: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}):\n{}", run.all()));
    assert_eq!(report["controlPlane"]["scope"]["shard"], "a", "{report:#}");
    assert_eq!(report["shards"][0]["scope"]["shard"], "b", "{report:#}");
    assert_eq!(report["shards"][0]["leader"], "shard-b");
    drop((a, b));
}
nauthera_tests::e2e_test!(disjoint_shards_each_reconcile_only_their_own_namespaces_and_kinds);

async fn overlapping_selectors_are_reported_by_both_shards_which_keep_running() {
    let Some(stack) = shard_stack().await else {
        return;
    };
    let base = stack.namespace().to_owned();
    let (ns_a, ns_b, ns_shared) = (
        format!("{base}-a"),
        format!("{base}-b"),
        format!("{base}-tools"),
    );
    create_namespace(&stack, &ns_a, &[("team", "a")]).await;
    create_namespace(&stack, &ns_b, &[("team", "b")]).await;
    create_namespace(&stack, &ns_shared, &[("team", "tools")]).await;
    allow_shards(&stack, &["a", "b"]).await;
    let a = start_shard(
        &stack,
        "a",
        &[("NAUTHERA_NAMESPACE_SELECTOR", "team in (a, tools)")],
    )
    .await;
    let b = start_shard(
        &stack,
        "b",
        &[
            ("NAUTHERA_NAMESPACE_SELECTOR", "team in (b,tools)"),
            ("NAUTHERA_KINDS", "OIDCClient,Branding"),
        ],
    )
    .await;
    stack.show_deployment_ready(1).await.unwrap();

    // Each names the other, the kinds both reconcile and the one namespace both select.
    for (shard, other) in [("a", "b"), ("b", "a")] {
        let state = wait_published(
            &stack,
            shard,
            &format!("shard {shard} reports its overlap with {other}"),
            |state| !state.overlaps.is_empty(),
        )
        .await;
        assert_eq!(state.overlaps.len(), 1, "{:?}", state.overlaps);
        let overlap = &state.overlaps[0];
        assert_eq!(overlap.shard, other);
        assert_eq!(overlap.kinds, [Kind::OidcClient, Kind::Branding]);
        assert_eq!(overlap.namespaces, std::slice::from_ref(&ns_shared));
        assert!(!overlap.every_namespace);
    }
    for (reconciler, other) in [(&a, "b"), (&b, "a")] {
        assert_eq!(
            reconciler
                .metric("nauthera_operator_shard_overlaps", &[("shard", other)])
                .await,
            1.0
        );
        let warnings = reconciler
            .log()
            .lines()
            .filter(|line| line.contains(&format!("shard {other} also reconciles")))
            .count();
        assert_eq!(warnings, 1, "one warning per change:\n{}", reconciler.log());
    }

    // The plugin shows a block per shard, the overlap a finding in each.
    let run = stack.plugin(&["status", "-A", "-o", "json"]).await;
    let report: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}):\n{}", run.all()));
    assert_eq!(run.code, 1, "an overlap needs attention:\n{}", run.all());
    for (block, other) in [(&report["controlPlane"], "b"), (&report["shards"][0], "a")] {
        let findings = block["findings"].as_array().unwrap();
        assert!(
            findings
                .iter()
                .any(|f| f.as_str().unwrap().starts_with(&format!(
                    "shard {other} also reconciles OIDCClient, Branding in namespace {ns_shared}:"
                ))),
            "{report:#}"
        );
    }

    // Both keep running: each registers its own namespace's client, and the shared one is
    // written once, by one manager, and left to it by the other.
    for namespace in [&ns_a, &ns_b, &ns_shared] {
        stack.apply_in(namespace, &generated_client("web")).await;
    }
    wait_registered(&stack, &ns_a, "web").await;
    wait_registered(&stack, &ns_b, "web").await;
    let shared = wait_registered(&stack, &ns_shared, "web").await;
    let owner = shared.status.as_ref().unwrap().manager.clone().unwrap();
    assert_eq!(writers_in(&stack, &ns_shared), std::slice::from_ref(&owner));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let counters = stack.server.counters();
    assert_eq!(
        counters.writes_by("nauthera-a") + counters.writes_by("nauthera-b"),
        3,
        "{counters:?}"
    );
    assert_eq!(
        client_in(&stack, &ns_shared, "web")
            .await
            .status
            .unwrap()
            .manager,
        Some(owner)
    );

    // The overlap ends when the shared namespace leaves a's selector.
    label_namespace(&stack, &ns_shared, "team", "b").await;
    wait_published(&stack, "a", "shard a reports no overlap", |state| {
        state.overlaps.is_empty()
    })
    .await;
    stack
        .eventually("shard a's gauge drops the overlap", async || {
            !a.metrics()
                .await
                .contains("nauthera_operator_shard_overlaps{")
        })
        .await;

    wait_published(&stack, "b", "shard b reports no overlap", |state| {
        state.overlaps.is_empty()
    })
    .await;

    // Back in both selectors, then shard b is stopped (its Deployment removed): the state it
    // leaves behind is no overlap once its Lease has no leader renewing it.
    label_namespace(&stack, &ns_shared, "team", "tools").await;
    wait_published(&stack, "a", "shard a reports the overlap again", |state| {
        state.overlaps.len() == 1
    })
    .await;
    b.stop().await;
    wait_published(
        &stack,
        "a",
        "shard a no longer counts the stopped shard",
        |state| state.overlaps.is_empty(),
    )
    .await;
    assert!(
        published(&stack, "b").await.is_some(),
        "b's state is left behind"
    );
    assert!(
        a.log()
            .contains("a published state whose Lease no leader renews"),
        "{}",
        a.log()
    );
    drop(a);
}
nauthera_tests::e2e_test!(overlapping_selectors_are_reported_by_both_shards_which_keep_running);

async fn shards_count_what_a_policy_holds_each_in_its_own_entry_without_a_fight() {
    let Some(stack) = shard_stack().await else {
        return;
    };
    let base = stack.namespace().to_owned();
    let (ns_a, ns_b) = (format!("{base}-a"), format!("{base}-b"));
    create_namespace(&stack, &ns_a, &[("team", "a")]).await;
    create_namespace(&stack, &ns_b, &[("team", "b")]).await;
    allow_shards(&stack, &["a", "b"]).await;
    // Approvals only: nothing to check at admission, every new client waits in its shard. Stored
    // before the shards start, so that each has it from its first listing on (a policy and a
    // client stored moments apart reach a reconciler through two watches, in either order).
    stack
        .apply(
            "apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: reviewed
spec:
  rules:
    approval:
      fields: [redirectUris]
",
        )
        .await;
    let _a = start_shard(&stack, "a", &[("NAUTHERA_NAMESPACES", &ns_a)]).await;
    let _b = start_shard(&stack, "b", &[("NAUTHERA_NAMESPACE_SELECTOR", "team=b")]).await;
    stack.apply_in(&ns_a, &generated_client("web")).await;
    stack.apply_in(&ns_b, &generated_client("web")).await;
    stack.apply_in(&ns_b, &generated_client("api")).await;

    let policies: Api<ClientPolicy> = Api::all(stack.client());
    let counted = async || {
        let status = policies.get("reviewed").await.unwrap().status?;
        let a = status.shards.get("a")?;
        let b = status.shards.get("b")?;
        (a.awaiting_approval == 1 && b.awaiting_approval == 2).then_some(status)
    };
    stack
        .eventually("each shard counts its own holds", async || {
            counted().await.is_some()
        })
        .await;
    let status = counted().await.unwrap();
    assert_eq!(status.total_awaiting_approval(), 3);
    // No unsharded reconciler runs: nobody writes the counts at the top.
    assert_eq!((status.violations, status.awaiting_approval), (0, 0));
    assert!(status.held.is_empty(), "{status:?}");
    let held_b: Vec<&str> = status.shards["b"]
        .held
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(held_b, ["api", "web"]);
    assert!(status.shards["a"].held.iter().all(|h| h.namespace == ns_a));
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "{status:?}"
    );

    // Settled: neither shard writes the status again over the other's entry (a fight would
    // write it at every debounce).
    let version = policies
        .get("reviewed")
        .await
        .unwrap()
        .metadata
        .resource_version;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        policies
            .get("reviewed")
            .await
            .unwrap()
            .metadata
            .resource_version,
        version
    );
}
nauthera_tests::e2e_test!(shards_count_what_a_policy_holds_each_in_its_own_entry_without_a_fight);

async fn a_client_waits_for_the_organization_another_shard_reconciles() {
    let Some(stack) = shard_stack().await else {
        return;
    };
    allow_shards(&stack, &["clients", "orgs"]).await;
    let _clients = start_shard(&stack, "clients", &[("NAUTHERA_KINDS", "OIDCClient")]).await;
    let issuer = "https://login.example.com/globex";
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: Organization
metadata:
  name: globex
spec:
  slug: globex
  issuer: {issuer}
  displayName: Globex
---
apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata:
  name: app
spec:
  issuer: {issuer}
  displayName: Globex app
  redirectUris: [https://app.globex.test/callback]
  grantTypes: [authorization_code]
  responseTypes: [code]
  scopes: [openid]
  tokenEndpointAuthMethod: client_secret_basic
  secret:
    generate: true
"
        ))
        .await;
    // The organization's shard is not running yet: the client waits for it, naming it.
    stack
        .wait_for("app", "waiting for its Organization", |client| {
            client.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Pending)
                    && s.message.as_deref().is_some_and(|m| {
                        m.contains(&format!("Organization {}/globex", stack.namespace()))
                    })
            })
        })
        .await;
    assert!(stack.server.organization("globex").is_none());

    // Once the other shard registers it, the client proceeds. The two kinds come through two
    // watches: when the client's event comes first, its one write is refused for the unknown
    // issuer, and it waits as soon as the Organization is seen; never any other refusal.
    let _orgs = start_shard(&stack, "orgs", &[("NAUTHERA_KINDS", "Organization")]).await;
    stack.wait_reason("app", Reason::Registered).await;
    assert!(stack.server.organization("globex").is_some());
    let events = stack.events_for("OIDCClient", "app").await;
    let refusals: Vec<_> = events.iter().filter(|e| e.reason == "Refused").collect();
    assert!(
        refusals.len() <= 1
            && refusals
                .iter()
                .all(|e| e.message.contains("UNKNOWN_ISSUER")),
        "{events:#?}"
    );
    // Each wrote what it reconciles: the client by one shard, the organization by the other.
    assert_eq!(writers_in(&stack, stack.namespace()), ["nauthera-clients"]);
    let counters = stack.server.counters();
    assert_eq!(counters.writes_by("nauthera-orgs"), 1, "{counters:?}");
}
nauthera_tests::e2e_test!(a_client_waits_for_the_organization_another_shard_reconciles);

async fn an_overlapping_shard_takes_a_resource_over_only_when_a_person_names_its_writer() {
    let Some(stack) = shard_stack().await else {
        return;
    };
    let base = stack.namespace().to_owned();
    let shared = format!("{base}-tools");
    create_namespace(&stack, &shared, &[("team", "tools")]).await;
    allow_shards(&stack, &["a", "b"]).await;
    // Shard a alone first, so that it is the writer; then b, whose selector overlaps.
    let _a = start_shard(
        &stack,
        "a",
        &[("NAUTHERA_NAMESPACE_SELECTOR", "team=tools")],
    )
    .await;
    stack.apply_in(&shared, &generated_client("web")).await;
    let registered = wait_registered(&stack, &shared, "web").await;
    let status = registered.status.as_ref().unwrap();
    assert_eq!(status.manager.as_deref(), Some("nauthera-a"));
    let revision = status.revision.clone().unwrap();
    let _b = start_shard(
        &stack,
        "b",
        &[("NAUTHERA_NAMESPACE_SELECTOR", "team=tools")],
    )
    .await;
    wait_published(&stack, "b", "shard b reports the overlap", |state| {
        state.overlaps.len() == 1
    })
    .await;
    assert_eq!(writers_in(&stack, &shared), ["nauthera-a"]);

    // A person hands it to shard b by naming the writer.
    Api::<OIDCClient>::namespaced(stack.client(), &shared)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                "nauthera.io/take-over-from": "nauthera-a"
            }}})),
        )
        .await
        .unwrap();
    stack
        .eventually("shard b took the resource over", async || {
            let client = client_in(&stack, &shared, "web").await;
            client.status.as_ref().is_some_and(|s| {
                s.manager.as_deref() == Some("nauthera-b")
                    && s.reason == Some(Reason::Registered)
                    && s.last_take_over.is_some()
            })
        })
        .await;
    let taken = client_in(&stack, &shared, "web").await;
    assert!(
        taken
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key("nauthera.io/take-over-from")),
        "the annotation is removed once done"
    );
    let record = taken
        .status
        .as_ref()
        .unwrap()
        .last_take_over
        .as_deref()
        .unwrap();
    assert_eq!(
        (record.from_manager.as_str(), record.from_revision.as_str()),
        ("nauthera-a", revision.as_str())
    );
    // The server's last write is b's, and a never wrote again.
    assert_eq!(writers_in(&stack, &shared), ["nauthera-a", "nauthera-b"]);
    let counters = stack.server.counters();
    assert_eq!(counters.writes_by("nauthera-a"), 1, "{counters:?}");
}
nauthera_tests::e2e_test!(
    an_overlapping_shard_takes_a_resource_over_only_when_a_person_names_its_writer
);

/// A status no reconciler has written: absent, or only what the CRD's schema defaults (generation
/// 0 observed, so that GitOps tools wait for a reconciler).
fn untouched(status: Option<&nauthera_shared::resources::ResourceStatus>) -> bool {
    status.is_none_or(|s| {
        s.reason.is_none() && s.phase.is_none() && s.observed_generation.unwrap_or(0) == 0
    })
}
