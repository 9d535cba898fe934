//! A hostile tenant: team A, whose Role lets it edit the four kinds and Secrets in its own
//! namespace only (judged by the API server's RBAC authorizer), tries to reach team B's objects
//! through the reconciler. Every path tried is a row of [`PATHS`], and the same rows are the
//! tenants table of `docs/security.md`. Each is refused with a stable reason (the API server's
//! 403 or schema error, or a catalog reason and cause in the status), and nothing crosses: B's
//! Secrets are never written (same resourceVersion) nor sent (the server holds no hash of their
//! values), B's objects on the server are untouched (same revisions, no audit record of any call
//! on them after A began, not even a refused one), and nothing of B shows in A's statuses or
//! events.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use nauthera_fake_server::OrganizationConfig;
use nauthera_proto::v1::ObjectRef;
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::grants::{GrantEntry, Operation};
use nauthera_shared::resources::{Branding, OIDCClient};
use nauthera_tests::e2e::{
    ISSUER, ORGANIZATION, PluginRun, RECONCILER_IDENTITY, Stack, StackOptions, client_manifest,
    generated_client_with, kubectl_as, sha256_hex, status_of,
};
use serde_json::json;

/// Every path team A tries, by the name `docs/security.md` gives it in its tenants table.
const PATHS: [&str; 13] = [
    "secretRef to another namespace's Secret by name",
    "secretRef naming a namespace",
    "secretRef with namespace/name",
    "brandingRef to another namespace's Branding",
    "secret name with namespace/name",
    "issuer of an organization not granted",
    "client name another namespace uses",
    "adopt naming another namespace's revision",
    "annotation on another namespace's resource",
    "manifest echoing another namespace's data",
    "editing another namespace's manifest or Secret",
    "secret template reading another Secret",
    "rotation naming another namespace's workloads",
];

/// The organization only namespace B is granted.
const GLOBEX_ISSUER: &str = "https://login.example.com/globex";
/// The value of B's own Secret: it must never leave B.
const B_SECRET_VALUE: &str = "team-b-upstream-value-7f3a";
const TEAM_GROUP: &str = "team-a-developers";

fn client_with(name: &str, issuer: &str, extra_spec: &str) -> String {
    generated_client_with(name, "Delete", extra_spec).replace(ISSUER, issuer)
}

fn secret_ref_spec(name: &str, extra: &str) -> String {
    format!(
        "  grantTypes: [client_credentials]\n  responseTypes: []\n  scopes: [reports.read]\n  \
         tokenEndpointAuthMethod: client_secret_post\n  secret:\n    secretRef:\n      name: \
         {name}\n      key: clientSecret\n{extra}"
    )
}

/// A client that names a Secret it holds (not one generated), in namespace-local YAML.
fn secret_ref_client(name: &str, secret: &str, extra: &str) -> String {
    client_manifest(
        name,
        &format!("  displayName: {name}\n{}", secret_ref_spec(secret, extra)),
    )
}

/// A path that must fail: `run` was refused, and what it printed names `expected` (a field, or
/// "forbidden"), in any case.
fn refused(path: &str, tried: &str, run: &PluginRun, expected: &str) {
    assert!(!run.ok(), "{path} {tried}: accepted: {}", run.all());
    assert!(
        run.all().to_lowercase().contains(&expected.to_lowercase()),
        "{path} {tried}: {}",
        run.all()
    );
}

fn reference(issuer: &str, namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        issuer: issuer.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

async fn resource_version(stack: &Stack, namespace: &str, name: &str) -> String {
    Api::<Secret>::namespaced(stack.client(), namespace)
        .get(name)
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

/// Statuses and event notes of every OIDCClient and Branding in `namespace`, as one text.
async fn everything_told_in(stack: &Stack, namespace: &str) -> String {
    let clients: Api<OIDCClient> = Api::namespaced(stack.client(), namespace);
    let mut told = String::new();
    for client in clients.list(&ListParams::default()).await.unwrap() {
        told.push_str(&serde_json::to_string(&client.status).unwrap());
    }
    let events: Api<Event> = Api::namespaced(stack.client(), namespace);
    for event in events.list(&ListParams::default()).await.unwrap() {
        told.push_str(&event.message.unwrap_or_default());
        told.push_str(&event.reason.unwrap_or_default());
    }
    told
}

async fn a_team_reaches_nothing_of_another_namespace_through_the_reconciler() {
    let suffix = format!("{:x}", std::process::id());
    let selector = format!("nauthera.io/tenant-test={suffix}");
    let mut organizations = StackOptions::default().organizations;
    organizations.push(OrganizationConfig {
        slug: "globex".to_owned(),
        issuer: GLOBEX_ISSUER.to_owned(),
        display_name: "Globex".to_owned(),
        fapi_mode: Default::default(),
    });
    // The reconciler serves both teams' namespaces (a selector, so B can be made after it starts).
    let stack = Stack::start_with(StackOptions {
        organizations,
        reconciler_env: vec![("NAUTHERA_NAMESPACE_SELECTOR".to_owned(), selector.clone())],
        ..StackOptions::default()
    })
    .await;
    let team_a = stack.namespace().to_owned();
    let team_b = format!("{team_a}-b");
    let namespaces: Api<Namespace> = Api::all(stack.client());
    for namespace in [&team_a, &team_b] {
        let labelled = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": { "name": namespace, "labels": { "nauthera.io/tenant-test": suffix } },
        });
        namespaces
            .patch(
                namespace,
                &PatchParams::apply("tenants-test"),
                &Patch::Apply(&labelled),
            )
            .await
            .unwrap();
    }
    // acme for both teams, globex for B only.
    stack.server.set_allowed_clients(vec![
        GrantEntry {
            identity: RECONCILER_IDENTITY.to_owned(),
            operations: Operation::ALL.to_vec(),
            organizations: vec![ORGANIZATION.to_owned()],
            namespaces: vec![team_a.clone(), team_b.clone()],
        },
        GrantEntry {
            identity: RECONCILER_IDENTITY.to_owned(),
            operations: Operation::ALL.to_vec(),
            organizations: vec!["globex".to_owned()],
            namespaces: vec![team_b.clone()],
        },
    ]);

    // Team B's objects, as its own people make them.
    stack
        .apply_in(
            &team_b,
            &format!(
                "apiVersion: v1
kind: Secret
metadata:
  name: b-upstream
stringData:
  clientSecret: {B_SECRET_VALUE}
---
apiVersion: nauthera.io/v1alpha1
kind: Branding
metadata:
  name: b-branding
spec:
  issuer: {ISSUER}
  branding:
    colors:
      primary: \"#112233\"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: b-reader
spec:
  selector:
    matchLabels: {{app: b-reader}}
  template:
    metadata:
      labels: {{app: b-reader}}
    spec:
      containers:
      - name: app
        image: example.invalid/b-reader
        volumeMounts:
        - {{name: oidc, mountPath: /etc/oidc}}
      volumes:
      - name: oidc
        secret: {{secretName: shared-name}}
---
{}---
{}",
                client_with("shared-name", ISSUER, ""),
                client_with("b-globex", GLOBEX_ISSUER, ""),
            ),
        )
        .await;
    let b_clients: Api<OIDCClient> = Api::namespaced(stack.client(), &team_b);
    let b_deployments: Api<Deployment> = Api::namespaced(stack.client(), &team_b);
    for name in ["shared-name", "b-globex"] {
        stack
            .eventually(&format!("B's {name} is registered"), async || {
                b_clients
                    .get(name)
                    .await
                    .ok()
                    .and_then(|c| c.status?.reason)
                    == Some(Reason::Registered)
            })
            .await;
    }
    // B's Branding too: it is reconciled beside the clients, not before them, so its write
    // could otherwise land after the audit log below is read and count as one after A began.
    let b_brandings: Api<Branding> = Api::namespaced(stack.client(), &team_b);
    stack
        .eventually("B's b-branding is registered", async || {
            b_brandings
                .get("b-branding")
                .await
                .ok()
                .and_then(|b| b.status?.reason)
                == Some(Reason::Registered)
        })
        .await;
    let b_shared = reference(ISSUER, &team_b, "shared-name");
    let b_globex = reference(GLOBEX_ISSUER, &team_b, "b-globex");
    let b_branding = reference(ISSUER, &team_b, "b-branding");
    let b_objects_before = (
        stack.server.client(&b_shared).unwrap(),
        stack.server.client(&b_globex).unwrap(),
        stack.server.branding(&b_branding).unwrap(),
    );
    let b_secret_versions = (
        resource_version(&stack, &team_b, "b-upstream").await,
        resource_version(&stack, &team_b, "shared-name").await,
    );
    let audit_of_b = |events: &[nauthera_proto::v1::AuditEvent]| {
        events
            .iter()
            .filter(|e| e.r#ref.as_ref().is_some_and(|r| r.namespace == team_b))
            // Every call on B's objects, refused ones too: once B's three objects are written,
            // nothing has a reason to touch them.
            .map(|e| {
                format!(
                    "{} {:?} {} {} {}",
                    e.action,
                    e.outcome(),
                    e.actor,
                    e.cause,
                    e.revision
                )
            })
            .collect::<Vec<_>>()
    };
    let b_audit_before = audit_of_b(&stack.server.audit_events());

    // Team A: its own namespace's four kinds and Secrets, nothing else.
    stack
        .apply_in(
            &team_a,
            &format!(
                "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: team
rules:
- apiGroups: [nauthera.io]
  resources: [oidcclients, brandings, identityproviders, organizations]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: ['']
  resources: [secrets]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: team
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: team}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: {TEAM_GROUP}}}
"
            ),
        )
        .await;
    let developer = stack.user_kubeconfig("dev@team-a.example.test", &[TEAM_GROUP]);
    let apply_as_team = |yaml: String| {
        kubectl_as(
            &developer,
            &["apply", "-n", &team_a, "-f", "-"],
            Some(&yaml),
        )
    };
    let mut tried = BTreeSet::new();

    // 1. A secretRef naming B's Secret by its name: only A's namespace is looked in.
    let path = PATHS[0];
    let run = apply_as_team(secret_ref_client("steal-secret", "b-upstream", ""));
    assert!(run.ok(), "{path}: {}", run.all());
    let waiting = stack
        .wait_for(
            "steal-secret",
            "waiting for a Secret of its own namespace",
            |c| {
                c.status.as_ref().is_some_and(|s| {
                    s.reason == Some(Reason::Pending)
                        && s.cause == Some(Cause::ReferenceNotReady)
                        && s.message
                            .as_deref()
                            .is_some_and(|m| m.contains("b-upstream"))
                })
            },
        )
        .await;
    let message = status_of(&waiting).message.clone().unwrap();
    assert!(!message.contains(&team_b), "{path}: {message}");
    assert!(
        stack
            .server
            .client(&stack.object_ref("steal-secret"))
            .is_none()
    );
    tried.insert(path);

    // 2. A secretRef with a namespace of its own: the schema has no such field.
    let path = PATHS[1];
    let run = apply_as_team(secret_ref_client(
        "steal-secret-ns",
        "b-upstream",
        &format!("      namespace: {team_b}\n"),
    ));
    refused(path, "", &run, "secretRef.namespace");
    tried.insert(path);

    // 3. A secretRef written `namespace/name`: the name's pattern refuses it.
    let path = PATHS[2];
    let run = apply_as_team(secret_ref_client(
        "steal-secret-slash",
        &format!("{team_b}/b-upstream"),
        "",
    ));
    refused(path, "", &run, "secretRef.name");
    tried.insert(path);

    // 4. A brandingRef naming B's Branding: only A's namespace is looked in.
    let path = PATHS[3];
    let run = apply_as_team(generated_client_with(
        "steal-branding",
        "Delete",
        "  brandingRef:\n    name: b-branding\n",
    ));
    assert!(run.ok(), "{path}: {}", run.all());
    let named = format!("Branding {team_a}/b-branding");
    stack
        .wait_for(
            "steal-branding",
            "waiting for a Branding of its own namespace",
            |c| {
                c.status.as_ref().is_some_and(|s| {
                    s.reason == Some(Reason::Pending)
                        && s.cause == Some(Cause::ReferenceNotReady)
                        && s.message.as_deref().is_some_and(|m| m.contains(&named))
                })
            },
        )
        .await;
    assert!(
        stack
            .server
            .client(&stack.object_ref("steal-branding"))
            .is_none()
    );
    tried.insert(path);

    // 5. A generated secret delivered to `namespace/name`: the name's pattern refuses it.
    let path = PATHS[4];
    let run = apply_as_team(
        generated_client_with("steal-delivery", "Delete", "").replace(
            "    generate: true\n",
            &format!("    generate: true\n    secretName: {team_b}/shared-name\n"),
        ),
    );
    refused(path, "", &run, "secretName");
    tried.insert(path);

    // 6. The issuer of an organization only B is granted: refused by the server's grant.
    let path = PATHS[5];
    let run = apply_as_team(client_with("a-globex", GLOBEX_ISSUER, ""));
    assert!(run.ok(), "{path}: {}", run.all());
    stack
        .wait_for("a-globex", "refused outside the grant", |c| {
            c.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Refused) && s.cause == Some(Cause::OutsideGrant)
            })
        })
        .await;
    assert!(
        stack
            .server
            .client(&reference(GLOBEX_ISSUER, &team_a, "a-globex"))
            .is_none()
    );
    assert!(
        stack.secret("a-globex").await.is_none(),
        "{path}: a Secret was delivered"
    );
    tried.insert(path);

    // 7. The name B's client has: A's is an object of its own, with its own client id.
    let path = PATHS[6];
    let run = apply_as_team(client_with("shared-name", ISSUER, ""));
    assert!(run.ok(), "{path}: {}", run.all());
    let registered = stack.wait_reason("shared-name", Reason::Registered).await;
    let a_shared = stack
        .server
        .client(&stack.object_ref("shared-name"))
        .unwrap();
    assert_ne!(a_shared.client_id, b_objects_before.0.client_id, "{path}");
    assert_eq!(
        status_of(&registered).client_id.as_deref(),
        Some(a_shared.client_id.as_str())
    );
    tried.insert(path);

    // 8. Adopting with the revision of B's object: A's manifest maps to A's object only.
    let path = PATHS[7];
    let run = kubectl_as(
        &developer,
        &[
            "annotate",
            "-n",
            &team_a,
            "oidcclient/shared-name",
            &format!("nauthera.io/adopt={}", b_objects_before.0.revision),
        ],
        None,
    );
    assert!(run.ok(), "{path}: {}", run.all());
    tried.insert(path);

    // 9. The annotations that ask the reconciler for something, on B's manifest: 403.
    let path = PATHS[8];
    for annotation in [
        "nauthera.io/restore=true",
        "nauthera.io/rotate=now",
        "nauthera.io/adopt=any",
        "nauthera.io/take-over-from=nauthera-reconciler/elsewhere",
    ] {
        let run = kubectl_as(
            &developer,
            &[
                "annotate",
                "-n",
                &team_b,
                "oidcclient/shared-name",
                annotation,
            ],
            None,
        );
        refused(path, annotation, &run, "forbidden");
    }
    tried.insert(path);

    // 10. Names and fields that would echo B's data if the reconciler looked across: a display
    // name and Secret key naming B's namespace and Secret, a branding reference to B's.
    let path = PATHS[9];
    let run = apply_as_team(secret_ref_client("echo", "b-upstream", "").replace(
        "key: clientSecret",
        "key: clientSecret\n  brandingRef:\n    name: b-branding",
    ));
    assert!(run.ok(), "{path}: {}", run.all());
    stack
        .wait_for("echo", "waiting for references of its own namespace", |c| {
            c.status
                .as_ref()
                .is_some_and(|s| s.cause == Some(Cause::ReferenceNotReady))
        })
        .await;
    tried.insert(path);

    // 11. Editing B's manifest or Secret directly, or reading B's Secret: 403.
    let path = PATHS[10];
    for args in [
        vec!["get", "secret", "b-upstream", "-n", team_b.as_str()],
        vec!["delete", "oidcclient", "shared-name", "-n", team_b.as_str()],
        vec![
            "label",
            "secret",
            "shared-name",
            "-n",
            team_b.as_str(),
            "stolen=yes",
        ],
    ] {
        let run = kubectl_as(&developer, &args, None);
        refused(path, &format!("{args:?}"), &run, "forbidden");
    }
    tried.insert(path);

    // 12. A template that would read another Secret into the delivered one: a template sees
    // the client's five facts only and loads nothing.
    let path = PATHS[11];
    let run = apply_as_team(
        generated_client_with("steal-template", "Delete", "").replace(
            "    generate: true\n",
            "    generate: true\n    template:\n      files:\n        \
         stolen: '{% include \"b-upstream\" %}'\n",
        ),
    );
    assert!(run.ok(), "{path}: {}", run.all());
    stack
        .wait_for("steal-template", "refused as an invalid template", |c| {
            c.status.as_ref().is_some_and(|s| {
                s.reason == Some(Reason::Refused) && s.cause == Some(Cause::InvalidSecretTemplate)
            })
        })
        .await;
    assert!(
        stack
            .server
            .client(&stack.object_ref("steal-template"))
            .is_none()
    );
    assert!(stack.secret("steal-template").await.is_none());
    tried.insert(path);

    // 13. A's own rotation of a Secret whose name B's workload reads in B: the workloads named
    // (and restarted, with the permission) are A's namespace's only.
    let path = PATHS[12];
    let b_reader_template = b_deployments
        .get("b-reader")
        .await
        .unwrap()
        .spec
        .unwrap()
        .template;
    let run = kubectl_as(
        &developer,
        &[
            "annotate",
            "-n",
            &team_a,
            "oidcclient/shared-name",
            "nauthera.io/rotate=tenants-1",
        ],
        None,
    );
    assert!(run.ok(), "{path}: {}", run.all());
    let rotated = stack.wait_event("shared-name", "SecretRotated").await;
    assert!(
        !rotated.message.contains("b-reader"),
        "{path}: {}",
        rotated.message
    );
    assert_eq!(
        b_deployments
            .get("b-reader")
            .await
            .unwrap()
            .spec
            .unwrap()
            .template,
        b_reader_template,
        "{path}: B's workload was restarted"
    );
    tried.insert(path);

    assert_eq!(tried.len(), PATHS.len(), "every path is tried");
    assert_eq!(
        documented_paths(),
        PATHS
            .iter()
            .map(|p| (*p).to_owned())
            .collect::<BTreeSet<_>>(),
        "docs/security.md lists the paths this test tries"
    );

    // A's own client is reconciled once more after everything, so any crossing would have
    // happened by now: it stays registered and nothing of B moved.
    stack.wait_reason("shared-name", Reason::Registered).await;
    assert_eq!(
        (
            stack.server.client(&b_shared).unwrap(),
            stack.server.client(&b_globex).unwrap(),
            stack.server.branding(&b_branding).unwrap(),
        ),
        b_objects_before,
        "B's objects on the server changed"
    );
    assert_eq!(
        audit_of_b(&stack.server.audit_events()),
        b_audit_before,
        "the server recorded calls on B's objects after A began"
    );
    assert_eq!(
        (
            resource_version(&stack, &team_b, "b-upstream").await,
            resource_version(&stack, &team_b, "shared-name").await,
        ),
        b_secret_versions,
        "B's Secrets were written"
    );
    let b_hash = sha256_hex(B_SECRET_VALUE.as_bytes());
    assert!(
        !stack
            .server
            .secret_hashes()
            .iter()
            .any(|h| h.sha256 == b_hash),
        "B's Secret value reached the server"
    );
    let told = everything_told_in(&stack, &team_a).await;
    for foreign in [
        team_b.as_str(),
        B_SECRET_VALUE,
        b_objects_before.0.client_id.as_str(),
    ] {
        assert!(
            !told.contains(foreign),
            "A's statuses or events tell {foreign:?}: {told}"
        );
    }
    // B's namespace is named after A's, so A shows in B's by the names of A's manifests.
    let told_b = everything_told_in(&stack, &team_b).await;
    for foreign in ["steal-", "a-globex", "echo", a_shared.client_id.as_str()] {
        assert!(
            !told_b.contains(foreign),
            "B's statuses or events tell {foreign:?}: {told_b}"
        );
    }

    namespaces
        .delete(&team_b, &Default::default())
        .await
        .unwrap();
}
nauthera_tests::e2e_test!(a_team_reaches_nothing_of_another_namespace_through_the_reconciler);

/// The paths in the tenants table of `docs/security.md` (its first column, in backticks).
fn documented_paths() -> BTreeSet<String> {
    let path = nauthera_tests::binaries::workspace_root().join("docs/security.md");
    let text = std::fs::read_to_string(path).unwrap();
    let table = text
        .split("<!-- tenants:begin -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- tenants:end -->").next())
        .expect("docs/security.md holds the tenants table");
    table
        .lines()
        .filter_map(|line| line.trim().strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect()
}
