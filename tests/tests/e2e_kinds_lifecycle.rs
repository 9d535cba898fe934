//! The life of a Branding, an IdentityProvider and an Organization, each through the same steps:
//! registered; changed on the server (drifted, not written over), shown by the plugin and restored
//! through it; refused while the grant lacks the kind's operation; deleted with `Orphan` (left on
//! the server) and with `Delete` (removed from it).

use nauthera_fake_server::{Actor, grant_everything};
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::grants::Operation;
use nauthera_shared::resources::{Branding, IdentityProvider, Organization};
use nauthera_tests::e2e::{Declared, ISSUER, RECONCILER_IDENTITY, Stack};

/// What differs per kind in the steps below.
struct Case {
    operation: Operation,
    /// The manifest (and what it needs, such as a Secret) with a deletion policy.
    manifest: fn(name: &str, deletion_policy: &str) -> String,
    /// The revision the server holds for the manifest of this name.
    held: fn(&Stack, &str) -> Option<String>,
    /// Changes the object on the server as a person in the dashboard would.
    edit: fn(&Stack, &str, &Actor),
}

async fn lifecycle<K: Declared>(case: Case) {
    let stack = Stack::start().await;
    let revision = |resource: &K| resource.declared_status().and_then(|s| s.revision.clone());

    // Registered: the server holds the revision the status records.
    stack.apply(&(case.manifest)("kept", "Delete")).await;
    let registered = stack.wait_reason_of::<K>("kept", Reason::Registered).await;
    assert_eq!(revision(&registered), (case.held)(&stack, "kept"));

    // Changed on the server: drifted and left as it is, until a person asks for the restore.
    (case.edit)(&stack, "kept", &Actor::dashboard("carol@example.com"));
    let drifted = stack.wait_reason_of::<K>("kept", Reason::Drifted).await;
    let drift = drifted.declared_status().unwrap().drift.clone().unwrap();
    assert_eq!(drift.actor.as_deref(), Some("user:carol@example.com"));
    assert_eq!(
        Some(drift.server_revision.clone()),
        (case.held)(&stack, "kept")
    );
    // The plugin shows it, and restores it as it does a client.
    let status = stack.plugin(&["status"]).await;
    assert!(
        status.stdout.lines().any(|l| {
            l.contains(K::kind(&()).as_ref()) && l.contains("kept") && l.contains("Drifted")
        }),
        "{}",
        status.all()
    );
    let target = format!("{}/kept", K::kind(&()).to_lowercase());
    let restore = stack
        .plugin(&["restore", &target, "--yes", "--timeout", "60s"])
        .await;
    assert_eq!(restore.code, 0, "{}", restore.all());
    let restored = stack
        .wait_for_kind("kept", "restored", |resource: &K| {
            resource
                .declared_status()
                .is_some_and(|s| s.phase == Some(Phase::Registered) && s.drift.is_none())
        })
        .await;
    assert_ne!(revision(&restored), Some(drift.server_revision));
    assert_eq!(revision(&restored), (case.held)(&stack, "kept"));

    // Refused while the grant lacks the operation; nothing is written.
    let mut narrow = grant_everything(RECONCILER_IDENTITY);
    narrow
        .operations
        .retain(|operation| *operation != case.operation);
    stack.server.set_allowed_clients(vec![narrow]);
    stack.apply(&(case.manifest)("denied", "Delete")).await;
    let refused = stack.wait_reason_of::<K>("denied", Reason::Refused).await;
    let message = refused.declared_status().unwrap().message.clone().unwrap();
    assert!(message.contains("OPERATION_NOT_GRANTED"), "{message}");
    assert_eq!((case.held)(&stack, "denied"), None);
    stack
        .server
        .set_allowed_clients(vec![grant_everything(RECONCILER_IDENTITY)]);
    stack.delete_manifest::<K>("denied").await;
    stack.wait_gone_of::<K>("denied").await;

    // Orphan: the manifest goes, the object stays on the server.
    stack.apply(&(case.manifest)("orphaned", "Orphan")).await;
    stack
        .wait_reason_of::<K>("orphaned", Reason::Registered)
        .await;
    stack.delete_manifest::<K>("orphaned").await;
    stack.wait_gone_of::<K>("orphaned").await;
    assert!((case.held)(&stack, "orphaned").is_some());

    // Delete: removed from the server as well.
    stack.delete_manifest::<K>("kept").await;
    stack.wait_gone_of::<K>("kept").await;
    assert_eq!((case.held)(&stack, "kept"), None);
    // Events are written by their own tasks, after the finalizer may be gone: wait for each.
    for expected in ["Registered", "Drifted", "Restored", "Deleted"] {
        stack
            .wait_event_of(K::kind(&()).as_ref(), "kept", expected)
            .await;
    }
}

async fn a_branding_lives_through_drift_restore_a_missing_grant_and_both_deletion_policies() {
    lifecycle::<Branding>(Case {
        operation: Operation::Brandings,
        manifest: |name, deletion_policy| {
            format!(
                "apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: {name}
spec:
  issuer: {ISSUER}
  branding:
    colors:
      primary: \"#123456\"
    texts:
      title: {name}
  deletionPolicy: {deletion_policy}
"
            )
        },
        held: |stack, name| {
            stack
                .server
                .branding(&stack.object_ref(name))
                .map(|b| b.revision)
        },
        edit: |stack, name, by| {
            stack
                .server
                .edit_branding(&stack.object_ref(name), by, |document| {
                    document.colors.insert("primary".into(), "#654321".into());
                })
                .unwrap();
        },
    })
    .await;
}
nauthera_tests::e2e_test!(
    a_branding_lives_through_drift_restore_a_missing_grant_and_both_deletion_policies
);

async fn an_identity_provider_lives_through_drift_restore_a_missing_grant_and_both_deletion_policies()
 {
    lifecycle::<IdentityProvider>(Case {
        operation: Operation::IdentityProviders,
        manifest: |name, deletion_policy| {
            format!(
                "apiVersion: v1
kind: Secret
metadata:
  name: {name}-upstream
stringData:
  clientSecret: upstream-value-of-{name}
---
apiVersion: nauthera.io/v1alpha1
kind: IdentityProvider
metadata:
  name: {name}
spec:
  issuer: {ISSUER}
  kind: oidc
  displayName: {name}
  upstreamUrl: https://sso.example.test/{name}
  clientId: nauthera-{name}
  secretRef:
    name: {name}-upstream
    key: clientSecret
  deletionPolicy: {deletion_policy}
"
            )
        },
        held: |stack, name| {
            stack
                .server
                .identity_provider(&stack.object_ref(name))
                .map(|p| p.revision)
        },
        edit: |stack, name, by| {
            stack
                .server
                .edit_identity_provider(&stack.object_ref(name), by, |spec| {
                    spec.display_name = "Changed in the dashboard".into();
                })
                .unwrap();
        },
    })
    .await;
}
nauthera_tests::e2e_test!(
    an_identity_provider_lives_through_drift_restore_a_missing_grant_and_both_deletion_policies
);

async fn an_organization_lives_through_drift_restore_a_missing_grant_and_both_deletion_policies() {
    lifecycle::<Organization>(Case {
        operation: Operation::Organizations,
        manifest: |name, deletion_policy| {
            format!(
                "apiVersion: nauthera.io/v1alpha1
kind: Organization
metadata:
  name: {name}
spec:
  slug: lifecycle-{name}
  issuer: https://login.example.com/lifecycle-{name}
  displayName: {name}
  deletionPolicy: {deletion_policy}
"
            )
        },
        held: |stack, name| {
            stack
                .server
                .organization(&format!("lifecycle-{name}"))
                .map(|o| o.revision)
        },
        edit: |stack, name, by| {
            stack
                .server
                .edit_organization(&format!("lifecycle-{name}"), by, |spec| {
                    spec.display_name = "Changed in the dashboard".into();
                })
                .unwrap();
        },
    })
    .await;
}
nauthera_tests::e2e_test!(
    an_organization_lives_through_drift_restore_a_missing_grant_and_both_deletion_policies
);

async fn an_organization_whose_issuer_another_serves_is_refused_naming_the_field() {
    let stack = Stack::start().await;
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: Organization
metadata:
  name: twin
spec:
  slug: twin
  issuer: {ISSUER}
"
        ))
        .await;
    let refused = stack
        .wait_reason_of::<Organization>("twin", Reason::Refused)
        .await;
    let message = refused.status.unwrap().message.unwrap();
    assert!(
        message.contains("INVALID_FIELD") && message.contains("spec.issuer"),
        "{message}"
    );
    assert!(stack.server.organization("twin").is_none());
}
nauthera_tests::e2e_test!(an_organization_whose_issuer_another_serves_is_refused_naming_the_field);

async fn an_identity_provider_mapping_a_claim_the_server_does_not_issue_is_refused_naming_the_field()
 {
    let stack = Stack::start().await;
    stack
        .apply(&format!(
            "apiVersion: nauthera.io/v1alpha1
kind: IdentityProvider
metadata:
  name: saml
spec:
  issuer: {ISSUER}
  kind: saml
  upstreamUrl: https://saml.example.test/metadata
  claimMapping:
    email: mail
    shoe_size: size
"
        ))
        .await;
    let refused = stack
        .wait_reason_of::<IdentityProvider>("saml", Reason::Refused)
        .await;
    let message = refused.status.unwrap().message.unwrap();
    assert!(
        message.contains("INVALID_FIELD") && message.contains("spec.claim_mapping[shoe_size]"),
        "{message}"
    );
    assert!(
        stack
            .server
            .identity_provider(&stack.object_ref("saml"))
            .is_none()
    );
}
nauthera_tests::e2e_test!(
    an_identity_provider_mapping_a_claim_the_server_does_not_issue_is_refused_naming_the_field
);
