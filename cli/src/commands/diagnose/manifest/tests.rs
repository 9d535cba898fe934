//! `diagnose -f` checks over plain documents.

use std::collections::BTreeMap;

use super::parse::{parse_document, split_documents};
use super::*;
use crate::cluster::control_plane::fixtures::state;
use crate::model::view::fixtures::view;
use crate::output::snapshot::assert_snapshot;
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
        policies: policy::ManifestPolicies::default(),
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
    // The API server checks the rules once nothing blocks them, as here: the redirect URI's
    // refusal is a sentence, not the expression behind it.
    let report = &reports(&text.replace(&long_name, "Admin console"))[0];
    let findings = report
        .checks
        .iter()
        .find(|check| check.name == "schema")
        .unwrap()
        .findings
        .join("\n");
    assert!(
        findings.contains(
            "spec.redirectUris: every redirect URI must be https://, or http:// on a loopback \
             address"
        ) && !findings.contains("x21"),
        "{findings}"
    );
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
fn a_secret_template_is_rendered_with_placeholders_and_its_field_named() {
    let client = |file: &str, labels: &str| {
        format!(
            "apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata: {{name: proxy}}
spec:
  issuer: https://id.example.com/acme
  redirectUris: [https://proxy.example.com/oauth2/callback]
  secret:
    generate: true
    template:
      files:
        oauth2-proxy.cfg: {file:?}
      labels: {labels}
"
        )
    };
    let findings = |text: &str, check: &str| {
        reports(text)[0]
            .checks
            .iter()
            .find(|c| c.name == check)
            .map(|c| c.findings.join("\n"))
            .unwrap_or_default()
    };
    let good = client("client_secret = \"{{ clientSecret }}\"", "{team: web}");
    let report = &reports(&good)[0];
    assert_eq!(
        status_of(report, "rules"),
        Some(CheckStatus::Passed),
        "{report:#?}"
    );
    assert!(!format!("{report:?}").contains("placeholder-client-secret"));

    let unknown = client("password = {{ password }}", "{team: web}");
    let found = findings(&unknown, "rules");
    assert!(
        found.contains("spec.secret.template.files[oauth2-proxy.cfg]")
            && found.contains("undefined")
            && found.contains("invalid_secret_template"),
        "{found}"
    );
    let broken = client("{{ clientId ", "{team: web}");
    assert!(findings(&broken, "rules").contains("syntax error"));
    // A rule of the schema: the project's own labels are the reconciler's.
    let reserved = client("x", "{app.kubernetes.io/managed-by: me}");
    let found = findings(&reserved, "schema");
    assert!(
        found.contains("spec.secret.template.labels")
            && found.contains("app.kubernetes.io/managed-by"),
        "{found}"
    );
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
        missing.findings[0].contains("waits as Pending"),
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

fn with_policies(policies: &[nauthera_shared::resources::ClientPolicy]) -> ManifestContext {
    use crate::model::policies::{CountedClient, Policies, PolicySet};
    let mut context = context();
    context.policies.policies = Policies::Listed(PolicySet::compile(policies));
    let existing = |name: &str, created: i64| CountedClient {
        name: name.into(),
        issuer: "https://id.example.com/acme".into(),
        created: Some(jiff::Timestamp::from_second(created).unwrap()),
        order: 0,
        deleting: false,
    };
    context.policies.clients.insert(
        "team-a".into(),
        Ok(vec![existing("billing", 100), existing("web", 200)]),
    );
    context
}

fn policy_check(text: &str, context: &ManifestContext) -> (ManifestCheck, ManifestReport) {
    let document = &split_documents(text).unwrap()[0];
    let report = check_document(
        &parse_document("client.yaml", 1, document, "team-a"),
        context,
    );
    let check = report
        .checks
        .iter()
        .find(|check| check.name == "policy")
        .cloned()
        .unwrap_or_else(|| panic!("no policy check in {report:#?}"));
    (check, report)
}

const SHOP: &str = r#"
apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata: {name: shop}
spec:
  issuer: https://id.example.com/acme
  redirectUris: [https://shop.example.com/callback]
  secret: {generate: true, secretName: shop-oidc}
"#;

#[test]
fn a_manifest_is_judged_by_the_policies_that_would_cover_it() {
    use crate::model::policies::tests::policy;
    let context = with_policies(&[
        policy(
            "web-rules",
            serde_json::json!({"rules": {"redirectUris": {"hosts": ["app.example.com"]}}}),
        ),
        policy(
            "dev-only",
            serde_json::json!({"match": {"namespaceSelector": {"matchLabels": {"tier": "dev"}}},
                               "rules": {"scopes": []}}),
        ),
    ]);
    let (check, report) = policy_check(SHOP, &context);
    assert_eq!(check.status, CheckStatus::Failed, "{check:#?}");
    assert!(report.attention);
    let text = check.findings.join("\n");
    assert!(
        text.contains(
            "refused: ClientPolicy web-rules, rule redirectUris: spec.redirectUris may only hold \
             https URIs on hosts app.example.com; no loopback hosts (kubectl apply refuses it"
        ),
        "{text}"
    );
    assert!(!text.contains("dev-only"), "{text}");
    assert!(
        text.contains("kubernetes.io/metadata.name=team-a"),
        "{text}"
    );
    // The JSON carries the verdicts.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["policy"]["status"], "evaluated");
    assert_eq!(json["policy"]["verdicts"][0]["rules"][0]["allowed"], false);

    let compliant = SHOP.replace("shop.example.com", "app.example.com");
    let (check, report) = policy_check(&compliant, &context);
    assert_eq!(check.status, CheckStatus::Passed, "{check:#?}");
    assert!(!report.attention, "{report:#?}");
    assert!(
        check
            .findings
            .join("\n")
            .contains("allowed by rules redirectUris")
    );
}

#[test]
fn the_limit_counts_the_namespace_and_approvals_are_announced() {
    use crate::model::policies::tests::policy;
    let limited = with_policies(&[policy(
        "quota",
        serde_json::json!({"rules": {"maxClientsPerNamespace": 2, "approval": {}}}),
    )]);
    let (check, _) = policy_check(SHOP, &limited);
    assert_eq!(check.status, CheckStatus::Failed);
    let text = check.findings.join("\n");
    assert!(
        text.contains(
            "rule maxClientsPerNamespace (2 allowed): namespace team-a holds 2 other covered \
             OIDCClients and a new client is counted last: it does not fit"
        ),
        "{text}"
    );
    assert!(
        text.contains("approval required: a new client needs an approval (ClientPolicy quota)"),
        "{text}"
    );
    assert!(
        text.contains("kubectl nauthera approve oidcclient/shop -n team-a"),
        "{text}"
    );
    let roomy = with_policies(&[policy(
        "quota",
        serde_json::json!({"rules": {"maxClientsPerNamespace": 3}}),
    )]);
    let (check, _) = policy_check(SHOP, &roomy);
    assert_eq!(check.status, CheckStatus::Passed);
    assert!(check.findings.join("\n").contains(": it fits"));
}

#[test]
fn policies_that_cannot_be_listed_are_said_not_checked_and_local_skips_them() {
    let mut unlisted = context();
    unlisted.policies.policies = crate::model::policies::Policies::Unlisted(
        "cannot list clientpolicies.nauthera.io: forbidden (403)".into(),
    );
    let (check, report) = policy_check(SHOP, &unlisted);
    assert_eq!(check.status, CheckStatus::Warning);
    assert!(
        check.findings[0].starts_with(
            "cannot list clientpolicies.nauthera.io: forbidden (403); the policies were not checked"
        ),
        "{check:?}"
    );
    // The other checks ran.
    assert_eq!(status_of(&report, "secret"), Some(CheckStatus::Passed));
    let local = ManifestContext {
        local: true,
        ..context()
    };
    let document = &split_documents(SHOP).unwrap()[0];
    let report = check_document(&parse_document("c.yaml", 1, document, "team-a"), &local);
    assert_eq!(status_of(&report, "policy"), None);
}

#[test]
fn manifest_policy_snapshot() {
    use crate::model::policies::tests::policy;
    let context = with_policies(&[
        policy(
            "web-rules",
            serde_json::json!({"rules": {
                "redirectUris": {"hosts": ["app.example.com"]},
                "tokenEndpointAuthMethods": ["client_secret_basic", "private_key_jwt"],
                "maxClientsPerNamespace": 2,
                "approval": {"fields": ["redirectUris"]},
            }}),
        ),
        policy(
            "broken",
            serde_json::json!({"match": {"namespaceSelector": {"matchExpressions": [
                {"key": "tier", "operator": "Near", "values": ["x"]}]}}}),
        ),
    ]);
    let reports: Vec<ManifestReport> = split_documents(SHOP)
        .unwrap()
        .iter()
        .enumerate()
        .map(|(index, document)| {
            check_document(
                &parse_document("client.yaml", index + 1, document, "team-a"),
                &context,
            )
        })
        .collect();
    assert_snapshot(
        "diagnose-manifest-policy.txt",
        &super::super::render_manifests(&reports, crate::output::Painter::PLAIN),
    );
}

#[test]
fn a_client_policy_gets_the_reconcilers_verdict() {
    let hosts: Vec<String> = (0..20)
        .map(|n| format!("\"*.team-{n:02}.apps.example.com\""))
        .collect();
    let prefixes: Vec<String> = (0..10)
        .map(|n| format!("/oauth2/callback-{n:02}"))
        .collect();
    let text = format!(
        r#"
apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: prod-eu
spec:
  match:
    namespaceSelector:
      matchLabels: {{env: "prod eu"}}
  rules:
    scopes: [openid]
---
apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: many-hosts
spec:
  rules:
    redirectUris:
      hosts: [{}]
      pathPrefixes: [{}]
---
apiVersion: nauthera.io/v1alpha1
kind: ClientPolicy
metadata:
  name: fine
spec:
  match:
    namespaceSelector:
      matchLabels: {{env: prod-eu}}
  rules:
    redirectUris:
      hosts: ["*.example.com"]
    maxClientsPerNamespace: 3
"#,
        hosts.join(", "),
        prefixes.join(", ")
    );
    let reports = reports(&text);
    let compile = |report: &ManifestReport| {
        report
            .checks
            .iter()
            .find(|check| check.name == "compile")
            .map(|check| (check.status, check.findings.join("\n")))
            .unwrap()
    };
    let (status, finding) = compile(&reports[0]);
    assert_eq!(status, CheckStatus::Failed);
    assert!(reports[0].attention);
    assert_eq!(reports[0].namespace, "");
    assert!(
        finding.starts_with(
            "the reconciler refuses it (PolicyRefused, cause invalid_selector): \
             spec.match.namespaceSelector.matchLabels.env: value \"prod eu\": a valid label"
        ),
        "{finding}"
    );
    let (status, finding) = compile(&reports[1]);
    assert_eq!(status, CheckStatus::Failed);
    assert!(
        finding.contains(
            "(PolicyRefused, cause cost_limit): spec.rules.redirectUris: the generated check of \
             spec.redirectUris could cost up to 3,669,715 CEL units"
        ) && finding.contains("limit of 1,000,000 per expression"),
        "{finding}"
    );
    let (status, finding) = compile(&reports[2]);
    assert_eq!(status, CheckStatus::Passed, "{finding}");
    assert!(!reports[2].attention);
    assert!(
        finding.contains("ValidatingAdmissionPolicy nauthera-fine: kubectl apply checks redirectUris (OIDCClient)"),
        "{finding}"
    );
    assert_eq!(
        reports[2].checks.iter().map(|c| c.name).collect::<Vec<_>>(),
        ["schema", "compile"]
    );
}

#[test]
fn an_observed_manifest_needs_no_secret() {
    let text = r#"
apiVersion: nauthera.io/v1alpha1
kind: OIDCClient
metadata: {name: app}
spec:
  managementPolicy: Observe
  issuer: https://id.example.com/acme
  redirectUris: [https://app.example.com/cb]
  secret: {generate: true, secretName: taken}
---
apiVersion: v1
kind: Secret
metadata: {name: taken}
stringData: {other: x}
"#;
    let documents = split_documents(text).unwrap();
    let context = ManifestContext {
        file_secrets: declared_secrets(&documents, "team-a"),
        local: true,
        ..context()
    };
    let report = check_document(
        &parse_document("manifests.yaml", 1, &documents[0], "team-a"),
        &context,
    );
    assert_eq!(status_of(&report, "secret"), Some(CheckStatus::Passed));
    // The same manifest managing the client would not get its Secret.
    let managed = text.replace("  managementPolicy: Observe\n", "");
    let documents = split_documents(&managed).unwrap();
    let report = check_document(
        &parse_document("manifests.yaml", 1, &documents[0], "team-a"),
        &context,
    );
    assert_eq!(status_of(&report, "secret"), Some(CheckStatus::Failed));
}
