//! `nauthera-reconciler export` against a server holding objects of all four kinds that people
//! made: the output is accepted by the API server's CRD validation as it is, holds no secret,
//! and applied back it is all Observed-identical with no write to the server; exported with
//! `--manage` and applied, every object is adopted without a write. An older server without the
//! listings gets a message saying so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use nauthera_client::{AdminClient, ConnectSettings, TlsFiles};
use nauthera_fake_server::{Actor, Method, grant_everything};
use nauthera_proto::v1::{self, client_spec};
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::{
    AdoptedSecret, Branding, IdentityProvider, ManagementPolicy, OIDCClient, Organization,
};
use nauthera_tests::binaries::Binary;
use nauthera_tests::e2e::{
    Declared, ISSUER, MANAGER, ORGANIZATION, RECONCILER_IDENTITY, Stack, StackOptions,
};

/// The certificate identity of the dashboard the people of this test work through.
const DASHBOARD: &str = "dns:dashboard.nauthera.example";
const PROVIDED_SECRET: &str = "a-team-secret-that-must-never-be-exported";
const UPSTREAM_SECRET: &str = "an-upstream-secret-that-must-never-be-exported";

/// What an export run printed.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `nauthera-reconciler export ARGS` with the reconciler's server settings, as in its pod.
async fn export(stack: &Stack, args: &[&str]) -> Run {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(Binary::Reconciler.path().unwrap())
            .arg("export")
            .args(args)
            .env(
                "NAUTHERA_SERVER_ADDRESS",
                stack.server.address().to_string(),
            )
            .env("NAUTHERA_TLS_SERVER_NAME", &stack.pki.server_name)
            .env("NAUTHERA_TLS_DIR", &stack.tls_dir)
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("the export ends within a minute")
    .expect("the export runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The dashboard's AdminService client: no manager on its writes.
async fn dashboard(stack: &Stack) -> AdminClient {
    let dir = tempfile::tempdir().unwrap().keep();
    stack.pki.write_client_dir(&dir, DASHBOARD).unwrap();
    let settings = ConnectSettings::new(stack.server.address().to_string(), TlsFiles::in_dir(&dir))
        .with_server_name(&stack.pki.server_name);
    AdminClient::connect(settings).await.unwrap()
}

fn reference(stack: &Stack, name: &str) -> Option<v1::ObjectRef> {
    Some(v1::ObjectRef {
        issuer: ISSUER.into(),
        namespace: stack.namespace().into(),
        name: name.into(),
    })
}

fn client_spec(method: &str, secret: Option<client_spec::Secret>) -> v1::ClientSpec {
    v1::ClientSpec {
        display_name: "Shop".into(),
        redirect_uris: vec!["https://shop.example.com/callback".into()],
        post_logout_redirect_uris: vec!["https://shop.example.com/".into()],
        grant_types: vec!["authorization_code".into(), "refresh_token".into()],
        response_types: vec!["code".into()],
        scopes: vec!["openid".into(), "email".into()],
        token_endpoint_auth_method: method.into(),
        require_pkce: true,
        secret,
        branding_ref: String::new(),
    }
}

/// Objects of all four kinds made by people: through the dashboard, then one edited by hand.
async fn made_by_people(stack: &Stack) {
    let dashboard = dashboard(stack).await;
    dashboard
        .apply_branding(v1::ApplyBrandingRequest {
            r#ref: reference(stack, "blue"),
            document: Some(v1::BrandingDocument {
                colors: [("primary".to_owned(), "#0044ff".to_owned())].into(),
                texts: [("title".to_owned(), "Welcome to the shop".to_owned())].into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    dashboard
        .apply_identity_provider(v1::ApplyIdentityProviderRequest {
            r#ref: reference(stack, "github"),
            spec: Some(v1::IdentityProviderSpec {
                kind: v1::IdentityProviderKind::Github.into(),
                display_name: "GitHub".into(),
                upstream_client_id: "gh-client-id".into(),
                upstream_client_secret: UPSTREAM_SECRET.into(),
                scopes: vec!["read:user".into(), "user:email".into()],
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut shop = client_spec(
        "client_secret_basic",
        Some(client_spec::Secret::GenerateSecret(true)),
    );
    shop.branding_ref = "blue".into();
    for (name, spec) in [
        ("shop", shop),
        (
            "billing",
            client_spec(
                "client_secret_post",
                Some(client_spec::Secret::ProvidedSecret(PROVIDED_SECRET.into())),
            ),
        ),
        ("spa", client_spec("none", None)),
    ] {
        dashboard
            .apply_client(v1::ApplyClientRequest {
                r#ref: reference(stack, name),
                spec: Some(spec),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    stack
        .server
        .edit_client(
            reference(stack, "shop").as_ref().unwrap(),
            &Actor::dashboard("alice@example.com").because("more scopes"),
            |spec| spec.scopes.push("profile".into()),
        )
        .unwrap();
}

/// Writes made under the reconciler's manager, from the server's audit log.
fn reconciler_writes(stack: &Stack) -> Vec<String> {
    stack
        .server
        .audit_events()
        .into_iter()
        .filter(|event| event.manager == MANAGER)
        .map(|event| format!("{} {:?} {}", event.action, event.r#ref, event.reason))
        .collect()
}

async fn apply_file(stack: &Stack, path: &Path) {
    let applied = stack
        .kubectl(&["apply", "-f", path.to_str().unwrap()])
        .await;
    assert_eq!(applied.code, 0, "kubectl apply: {}", applied.all());
}

/// Waits until a manifest is Observed with cause `identical` for its generation.
async fn wait_identical<K: Declared>(stack: &Stack, name: &str) {
    stack
        .wait_for_kind(name, "Observed and identical", |resource: &K| {
            resource.declared_status().is_some_and(|s| {
                s.reason == Some(Reason::Observed)
                    && s.cause == Some(Cause::Identical)
                    && s.observed_generation == resource.meta().generation
            })
        })
        .await;
}

/// Waits until a manifest is Registered by an adoption that wrote nothing.
async fn wait_adopted_unwritten<K: Declared>(stack: &Stack, name: &str) -> K {
    stack
        .wait_for_kind(name, "adopted without a write", |resource: &K| {
            resource.declared_status().is_some_and(|s| {
                s.reason == Some(Reason::Registered)
                    && s.observed_generation == resource.meta().generation
                    && s.last_adoption.as_ref().is_some_and(|a| !a.written)
            })
        })
        .await
}

async fn an_export_applied_back_is_observed_identical_and_a_managed_one_adopts_without_a_write() {
    let stack = Stack::start_with(StackOptions {
        grants: Some(vec![
            grant_everything(RECONCILER_IDENTITY),
            grant_everything(DASHBOARD),
        ]),
        ..StackOptions::default()
    })
    .await;
    let namespace = stack.namespace().to_owned();
    made_by_people(&stack).await;

    // The organization was made by the server's configuration, not by a manifest: it needs a
    // namespace, and the export says which flag gives one.
    let refused = export(&stack, &[]).await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--organization-namespace"),
        "{}",
        refused.stderr
    );
    assert!(refused.stdout.is_empty());

    let run = export(&stack, &["--organization-namespace", &namespace]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let yaml = run.stdout;
    assert!(
        run.stderr.contains(
            "exported 1 Organization(s), 1 Branding(s), 1 IdentityProvider(s), 3 OIDCClient(s)"
        ),
        "{}",
        run.stderr
    );
    for secret in [PROVIDED_SECRET, UPSTREAM_SECRET] {
        assert!(!yaml.contains(secret), "a secret in the export:\n{yaml}");
    }
    let kinds: Vec<&str> = yaml
        .lines()
        .filter_map(|line| line.strip_prefix("kind: "))
        .collect();
    assert_eq!(
        kinds,
        [
            "Organization",
            "Branding",
            "IdentityProvider",
            "OIDCClient",
            "OIDCClient",
            "OIDCClient"
        ],
        "{yaml}"
    );
    assert_eq!(
        yaml.matches("managementPolicy: Observe").count(),
        6,
        "{yaml}"
    );
    assert!(!yaml.contains("nauthera.io/adopt"), "{yaml}");
    assert!(!yaml.contains("status"), "{yaml}");
    assert!(
        yaml.contains(&format!("Secret {namespace}/billing-client-secret")),
        "{yaml}"
    );
    assert!(
        yaml.contains(&format!("Secret {namespace}/github-upstream-client-secret")),
        "{yaml}"
    );

    // Accepted by the API server's validation of the CRDs as it is.
    let observe_file = stack.cluster.dir().join("export-observe.yaml");
    std::fs::write(&observe_file, &yaml).unwrap();
    let writes_before = reconciler_writes(&stack);
    apply_file(&stack, &observe_file).await;
    let shop = stack.manifest::<OIDCClient>("shop").await.unwrap();
    assert_eq!(shop.spec.management_policy, ManagementPolicy::Observe);
    assert!(shop.spec.secret.as_ref().unwrap().generate);
    assert_eq!(shop.spec.scopes, ["openid", "email", "profile"]);
    assert_eq!(shop.spec.branding_ref.as_ref().unwrap().name, "blue");
    let billing = stack.manifest::<OIDCClient>("billing").await.unwrap();
    let secret_ref = billing
        .spec
        .secret
        .as_ref()
        .unwrap()
        .secret_ref
        .clone()
        .unwrap();
    assert_eq!(secret_ref.name, "billing-client-secret");
    let organization = stack.manifest::<Organization>(ORGANIZATION).await.unwrap();
    assert_eq!(organization.spec.slug, ORGANIZATION);
    assert_eq!(organization.spec.issuer, ISSUER);
    assert!(stack.manifest::<Branding>("blue").await.is_some());
    assert!(stack.manifest::<IdentityProvider>("github").await.is_some());

    // Applied back, every object is Observed and identical, and nothing was written.
    wait_identical::<Organization>(&stack, ORGANIZATION).await;
    wait_identical::<Branding>(&stack, "blue").await;
    wait_identical::<IdentityProvider>(&stack, "github").await;
    for name in ["shop", "billing", "spa"] {
        wait_identical::<OIDCClient>(&stack, name).await;
    }
    assert_eq!(reconciler_writes(&stack), writes_before, "{}", stack.logs());
    assert_eq!(stack.server.counters().writes_by(MANAGER), 0);

    // Exported with --manage: applied over the observed manifests, each adopts the revision
    // it names and, the manifest declaring what the server holds, writes nothing. The Secrets
    // the placeholders name are the team's to make first.
    for name in ["billing-client-secret", "github-upstream-client-secret"] {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name },
            "stringData": { "clientSecret": "the-secret-in-force" },
        }))
        .unwrap();
        Api::<Secret>::namespaced(stack.client(), &namespace)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
    let managed_file = stack.cluster.dir().join("export-manage.yaml");
    let run = export(
        &stack,
        &[
            "--manage",
            "--organization-namespace",
            &namespace,
            "--output",
            managed_file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "--output writes the file alone");
    let managed = std::fs::read_to_string(&managed_file).unwrap();
    assert!(
        !managed.contains("managementPolicy"),
        "Manage is the default:\n{managed}"
    );
    assert_eq!(
        managed.matches("nauthera.io/adopt:").count(),
        6,
        "{managed}"
    );
    // The shop, billing and GitHub secrets are kept; the public client and the others have none.
    assert_eq!(
        managed.matches("nauthera.io/adopt-secret: Keep").count(),
        3,
        "{managed}"
    );
    apply_file(&stack, &managed_file).await;
    wait_adopted_unwritten::<Organization>(&stack, ORGANIZATION).await;
    wait_adopted_unwritten::<Branding>(&stack, "blue").await;
    wait_adopted_unwritten::<IdentityProvider>(&stack, "github").await;
    let shop = wait_adopted_unwritten::<OIDCClient>(&stack, "shop").await;
    assert_eq!(
        shop.status.unwrap().last_adoption.unwrap().secret,
        AdoptedSecret::Kept
    );
    for name in ["billing", "spa"] {
        wait_adopted_unwritten::<OIDCClient>(&stack, name).await;
    }
    assert_eq!(reconciler_writes(&stack), writes_before, "{}", stack.logs());
    assert_eq!(stack.server.counters().writes_by(MANAGER), 0);
}
nauthera_tests::e2e_test!(
    an_export_applied_back_is_observed_identical_and_a_managed_one_adopts_without_a_write
);

async fn an_older_server_without_the_listings_is_named_and_nothing_is_written() {
    let stack = Stack::start_with(StackOptions {
        unimplemented: vec![Method::ListBrandings],
        start_reconciler: false,
        ..StackOptions::default()
    })
    .await;
    let namespace = stack.namespace().to_owned();
    let run = export(&stack, &["--organization-namespace", &namespace]).await;
    assert_eq!(run.code, 5, "{}", run.stderr);
    let message = run.stderr.trim();
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(message.contains("older than the export"), "{message}");
    assert!(message.contains("ListBrandings"), "{message}");
    assert!(message.contains("list_objects"), "{message}");
    assert!(run.stdout.is_empty(), "half an export: {}", run.stdout);

    // And a server that cannot be reached is named as that.
    let unreachable = tokio::process::Command::new(Binary::Reconciler.path().unwrap())
        .args(["export", "--server-address", "127.0.0.1:1"])
        .env("NAUTHERA_TLS_DIR", &stack.tls_dir)
        .output()
        .await
        .unwrap();
    assert_eq!(unreachable.status.code(), Some(3));
    let message = String::from_utf8_lossy(&unreachable.stderr);
    assert!(message.contains("unreachable"), "{message}");
    assert!(message.contains("--server-address"), "{message}");
}
nauthera_tests::e2e_test!(an_older_server_without_the_listings_is_named_and_nothing_is_written);

/// `kubectl nauthera ARGS` as the person whose kubeconfig this is.
async fn plugin_as(kubeconfig: &Path, args: &[&str]) -> Run {
    let plugin = Binary::Plugin.path().unwrap();
    let path = format!(
        "{}:{}",
        plugin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = tokio::process::Command::new(nauthera_tests::e2e::kubectl())
        .arg("nauthera")
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn the_plugin_names_a_missing_reconciler_and_an_exec_it_may_not_do() {
    let stack = Stack::start_with(StackOptions {
        start_reconciler: false,
        ..StackOptions::default()
    })
    .await;
    let missing = stack
        .plugin(&["export", "--reconciler-namespace", "no-reconciler-here"])
        .await;
    assert_eq!(missing.code, 2, "{}", missing.all());
    assert!(
        missing
            .stderr
            .contains("no Deployment no-reconciler-here/nauthera-reconciler"),
        "{}",
        missing.stderr
    );
    assert!(missing.stdout.is_empty());

    // A person without `create pods/exec` in the reconciler's namespace is told so before
    // kubectl exec says it in its own words.
    let nobody = stack.user_kubeconfig("nobody@example.com", &[]);
    let refused = plugin_as(
        &nobody,
        &[
            "export",
            "--reconciler-namespace",
            stack.reconciler_namespace(),
        ],
    )
    .await;
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains("create pods/exec"),
        "{}",
        refused.stderr
    );
    assert!(refused.stdout.is_empty());
}
nauthera_tests::e2e_test!(the_plugin_names_a_missing_reconciler_and_an_exec_it_may_not_do);
