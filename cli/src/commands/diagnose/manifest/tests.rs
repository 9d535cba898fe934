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
        local: false,
    }
}

fn reports(text: &str) -> Vec<ManifestReport> {
    split_documents(text)
        .unwrap()
        .iter()
        .enumerate()
        .map(|(index, document)| {
            check_document(&parse_document(index + 1, document, "team-a"), &context())
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
    assert!(findings("schema").contains("unknown field spec.redirectUri"));
    let rules = findings("rules");
    assert!(
        rules.contains("generate and spec.secret.secretRef are exclusive"),
        "{rules}"
    );
    assert!(
        rules.contains("spec.issuer `http://id.example.com/unknown`"),
        "{rules}"
    );
    assert!(rules.contains("authorization_code grant needs"), "{rules}");
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
            check_document(&parse_document(index + 1, document, "team-a"), &context)
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
fn redirect_uris_follow_the_server_rule() {
    for good in [
        "https://a.example/cb",
        "http://localhost/cb",
        "http://[::1]:8080",
        "http://127.0.0.1:53/x?y",
    ] {
        assert!(redirect_uri_ok(good), "{good}");
    }
    for bad in [
        "http://example.com/cb",
        "https://",
        "ftp://x",
        "https://a/#frag",
        "http://localhost:/",
    ] {
        assert!(!redirect_uri_ok(bad), "{bad}");
    }
}

#[test]
fn unknown_fields_are_found_at_any_depth() {
    let original =
        serde_json::json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 2}], "h": null});
    let back = serde_json::json!({"a": 1, "b": {"c": 2}, "e": [{"f": 1}]});
    assert_eq!(
        unknown_fields(&original, &back, "spec"),
        vec!["spec.b.d", "spec.e[0].g"]
    );
}
