//! `diagnose -f` checks over plain documents.

use std::collections::BTreeMap;

use super::*;
use crate::commands::status::tests::state;
use crate::view::fixtures::view;
use nauthera_shared::catalog::Reason;

const GOOD: &str = r#"
apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata:
  name: shop
spec:
  issuer: https://id.example.com/acme
  redirectUris: [https://shop.example.com/callback, "http://127.0.0.1:8080/cb"]
  tokenEndpointAuthMethod: client_secret_basic
  secret:
    generate: true
    secretName: shop-oidc
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: unrelated
"#;

const BAD: &str = r#"
apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata:
  name: broken
  namespace: team-z
spec:
  issuer: http://id.example.com/unknown
  redirectUri: [https://typo.example.com]
  tokenEndpointAuthMethod: client_secret_post
  secret:
    generate: true
    secretRef: {name: creds}
"#;

fn context() -> ManifestContext {
    let organization = view(Kind::Organization, "ops", "acme", Reason::Registered, 0);
    let mut secrets = BTreeMap::new();
    secrets.insert(
        ("team-a".to_owned(), "shop-oidc".to_owned()),
        Ok(SecretFacts {
            name: "shop-oidc".into(),
            exists: false,
            owners: Vec::new(),
            keys: Vec::new(),
            empty_keys: Vec::new(),
        }),
    );
    secrets.insert(
        ("team-z".to_owned(), "broken".to_owned()),
        Ok(SecretFacts {
            name: "broken".into(),
            exists: true,
            owners: Vec::new(),
            keys: vec!["x".into()],
            empty_keys: Vec::new(),
        }),
    );
    ManifestContext {
        organizations: OrganizationDirectory::from_views([&organization]),
        state: Some(state()),
        secrets,
        file_secrets: BTreeMap::new(),
        brandings: BTreeMap::new(),
        local: false,
    }
}

fn reports(text: &str) -> Vec<ManifestReport> {
    split_documents(text)
        .unwrap()
        .iter()
        .enumerate()
        .map(|(index, document)| {
            check_document(
                &parse_document("manifests.yaml", index + 1, document, "team-a"),
                &context(),
            )
        })
        .collect()
}

fn status_of(report: &ManifestReport, name: &str) -> Option<CheckStatus> {
    report
        .checks
        .iter()
        .find(|check| check.name == name)
        .map(|check| check.status)
}

#[test]
fn a_good_manifest_passes_every_check() {
    let reports = reports(GOOD);
    assert_eq!(reports.len(), 2);
    let client = &reports[0];
    assert_eq!(client.namespace, "team-a");
    assert!(!client.attention, "{client:#?}");
    for check in ["schema", "rules", "issuer", "grant", "secret"] {
        assert_eq!(
            status_of(client, check),
            Some(CheckStatus::Passed),
            "{check}"
        );
    }
    // Other kinds are skipped, not failed.
    assert!(!reports[1].attention);
    assert_eq!(status_of(&reports[1], "schema"), Some(CheckStatus::Info));
}

#[test]
fn a_bad_manifest_names_each_problem() {
    let reports = reports(BAD);
    let report = &reports[0];
    assert!(report.attention);
    let findings = |name: &str| {
        report
            .checks
            .iter()
            .find(|check| check.name == name)
            .map(|check| check.findings.join("\n"))
            .unwrap_or_default()
    };
    // The API server's checks, from the CRD: an unknown field (kubectl validates strictly) and
    // the issuer's pattern.
    let schema = findings("schema");
    assert!(
        schema.contains("spec.redirectUri: unknown field"),
        "{schema}"
    );
    assert!(schema.contains("spec.issuer:"), "{schema}");
    // Its rules, once the schema holds, from the same CRD.
    let fixed = BAD
        .replace("  redirectUri: [https://typo.example.com]\n", "")
        .replace("http://id.example.com", "https://id.example.com");
    let fixed_reports = super::tests::reports(&fixed);
    let schema = fixed_reports[0]
        .checks
        .iter()
        .find(|check| check.name == "schema")
        .map(|check| check.findings.join("\n"))
        .unwrap_or_default();
    assert!(schema.contains("spec.secret:"), "{schema}");
    assert!(
        schema.contains("authorization_code grant needs"),
        "{schema}"
    );
    let report = &reports[0];
    assert_eq!(status_of(report, "issuer"), Some(CheckStatus::Warning));
    assert_eq!(status_of(report, "grant"), Some(CheckStatus::Warning));
    assert_eq!(status_of(report, "secret"), Some(CheckStatus::Failed));
}

#[test]
fn secrets_declared_in_the_files_count() {
    let text = r#"
apiVersion: nauthera.io/v1alpha1
kind: IdentityProvider
metadata: {name: gh}
spec:
  issuer: https://id.example.com/acme
  kind: github
  clientId: abc
  secretRef: {name: gh-creds, key: clientSecret}
---
apiVersion: v1
kind: Secret
metadata: {name: gh-creds}
stringData: {clientSecret: not-printed}
---
apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata: {name: app}
spec:
  issuer: https://id.example.com/acme
  redirectUris: [https://app.example.com/cb]
  secret: {generate: true, secretName: gh-creds}
"#;
    let documents = split_documents(text).unwrap();
    let context = ManifestContext {
        file_secrets: declared_secrets(&documents, "team-a"),
        local: true,
        ..context()
    };
    let reports: Vec<ManifestReport> = documents
        .iter()
        .enumerate()
        .map(|(index, document)| {
            check_document(
                &parse_document("manifests.yaml", index + 1, document, "team-a"),
                &context,
            )
        })
        .collect();
    assert_eq!(status_of(&reports[0], "secret"), Some(CheckStatus::Passed));
    assert_eq!(status_of(&reports[2], "secret"), Some(CheckStatus::Failed));
    let text = serde_json::to_string(&reports).unwrap();
    assert!(!text.contains("not-printed"));
}

#[test]
fn a_wrong_type_fails_the_schema_check() {
    let text = "apiVersion: nauthera.io/v1alpha1\nkind: OIDCClient\nmetadata: {name: x}\nspec: {issuer: 5, requirePkce: maybe}\n";
    let reports = reports(text);
    assert_eq!(status_of(&reports[0], "schema"), Some(CheckStatus::Failed));
}

#[test]
fn what_the_api_server_and_the_server_refuse_is_found_before_apply() {
    let long_name = "x".repeat(10_000);
    let text = format!(
        "apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata: {{name: admin}}
spec:
  issuer: https://id.example.com/acme
  displayName: {long_name}
  redirectUris: [http://example.com/cb]
  tokenEndpointAuthMethod: none
"
    );
    let report = &reports(&text)[0];
    let schema = report
        .checks
        .iter()
        .find(|check| check.name == "schema")
        .unwrap();
    assert_eq!(schema.status, CheckStatus::Failed);
    let findings = schema.findings.join("\n");
    assert!(
        findings.contains("spec.displayName: 10000 characters, at most 200"),
        "{findings}"
    );
    assert!(findings.contains("spec.redirectUris[0]"), "{findings}");
    let admitted = text
        .replace(&long_name, "Admin console")
        .replace("http://example.com/cb", "https://admin.example.com/cb");
    let report = &reports(&admitted)[0];
    assert_eq!(
        status_of(report, "schema"),
        Some(CheckStatus::Passed),
        "{report:#?}"
    );
    let rules = report
        .checks
        .iter()
        .find(|check| check.name == "rules")
        .unwrap();
    assert_eq!(rules.status, CheckStatus::Failed);
    assert!(rules.findings[0].contains("RESERVED_NAME"), "{rules:?}");
}

#[test]
fn a_branding_ref_is_checked_against_the_files_and_the_cluster() {
    let client = |branding: &str| {
        format!(
            "apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata: {{name: shop}}
spec:
  issuer: https://id.example.com/acme
  redirectUris: [https://shop.example.com/cb]
  tokenEndpointAuthMethod: none
  brandingRef: {{name: {branding}}}
"
        )
    };
    let check = |text: &str, context: &ManifestContext| {
        let document = &split_documents(text).unwrap()[0];
        let report = check_document(
            &parse_document("client.yaml", 1, document, "team-a"),
            context,
        );
        report
            .checks
            .into_iter()
            .find(|check| check.name == "branding")
            .unwrap()
    };
    let mut context = context();
    let missing = check(&client("look"), &context);
    assert_eq!(missing.status, CheckStatus::Failed);
    assert!(
        missing.findings[0].contains("REFERENCE_NOT_FOUND"),
        "{missing:?}"
    );
    context.brandings.insert(
        ("team-a".into(), "look".into()),
        BrandingStanding::NotRegistered(Some(Reason::Refused)),
    );
    let waiting = check(&client("look"), &context);
    assert_eq!(waiting.status, CheckStatus::Warning);
    assert!(
        waiting.findings[0].contains("not registered (Refused)"),
        "{waiting:?}"
    );
    context
        .brandings
        .insert(("team-a".into(), "look".into()), BrandingStanding::Declared);
    assert_eq!(check(&client("look"), &context).status, CheckStatus::Passed);
}
