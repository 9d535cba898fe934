//! What the install tests share: the third-party CRDs an install needs first (cert-manager, the
//! Prometheus Operator), the reconciler run as its pod would run it under what was installed,
//! and `examples/` applied and waited for until every example is Registered.

use nauthera_shared::catalog::Phase;
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};

use crate::binaries::workspace_root;
use crate::control_plane::third_party::{CERT_MANAGER, PROMETHEUS_OPERATOR};
use crate::e2e::{Declared, RECONCILER_NAMESPACE, Reconciler, Stack, write_token_kubeconfig};
use crate::manifests;

/// The namespace of `examples/`.
pub const EXAMPLES_NAMESPACE: &str = "nauthera-examples";

/// Applies the cert-manager and Prometheus Operator CRDs (from those projects' own Go modules)
/// and waits until their kinds are served.
pub async fn install_third_party_crds(client: &kube::Client) {
    let mut crds = CERT_MANAGER.crds().expect("cert-manager's CRDs");
    crds.extend(
        PROMETHEUS_OPERATOR
            .crds()
            .expect("the Prometheus Operator's CRDs"),
    );
    manifests::apply_all(client, &crds, None)
        .await
        .expect("the third-party CRDs apply");
    for (group, kinds) in [("cert-manager.io", 4), ("monitoring.coreos.com", 2)] {
        manifests::wait_for_group(client, group, kinds)
            .await
            .expect("the third-party kinds are served");
    }
}

/// The reconciler as its pod would run it: a token of the installed ServiceAccount, the
/// installed RBAC, its Lease in nauthera-system, watching the examples' namespace; ready.
pub async fn start_installed_reconciler(stack: &Stack) -> Reconciler {
    let kubeconfig = stack.cluster.dir().join("installed.kubeconfig");
    write_token_kubeconfig(
        &stack.client(),
        stack.cluster.kubeconfig(),
        RECONCILER_NAMESPACE,
        &kubeconfig,
        3600,
    )
    .await
    .expect("a token of the installed ServiceAccount");
    let reconciler = stack
        .start_replica_configured(
            "installed",
            &kubeconfig,
            &[
                (
                    "NAUTHERA_LEASE_NAMESPACE".to_owned(),
                    RECONCILER_NAMESPACE.to_owned(),
                ),
                (
                    "NAUTHERA_NAMESPACES".to_owned(),
                    EXAMPLES_NAMESPACE.to_owned(),
                ),
            ],
        )
        .await
        .expect("the reconciler starts");
    reconciler
        .wait_ready()
        .await
        .expect("the reconciler is ready");
    reconciler
}

/// Applies `examples/` (its Namespace first) and waits until every example is Registered.
pub async fn apply_examples_and_wait_registered(stack: &Stack) {
    let mut examples =
        manifests::load_dir(&workspace_root().join("examples")).expect("examples/ loads");
    examples.sort_by_key(|o| o.types.as_ref().is_none_or(|t| t.kind != "Namespace"));
    manifests::apply_all(&stack.client(), &examples, None)
        .await
        .expect("the examples apply");
    wait_registered::<Organization>(stack).await;
    wait_registered::<Branding>(stack).await;
    wait_registered::<IdentityProvider>(stack).await;
    wait_registered::<OIDCClient>(stack).await;
}

async fn wait_registered<K: Declared>(stack: &Stack) {
    let api = kube::Api::<K>::namespaced(stack.client(), EXAMPLES_NAMESPACE);
    stack
        .eventually(
            &format!("every example {} Registered", K::kind(&())),
            async || {
                let listed = api
                    .list(&Default::default())
                    .await
                    .expect("the examples list")
                    .items;
                !listed.is_empty()
                    && listed.iter().all(|resource| {
                        resource.declared_status().and_then(|s| s.phase) == Some(Phase::Registered)
                    })
            },
        )
        .await;
}
