use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::resources::{ApprovalRecord, ClientPolicy, OIDCClient};

fn policy(name: &str, spec: Value) -> ClientPolicy {
    serde_json::from_value(json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": "ClientPolicy",
        "metadata": {"name": name, "uid": "policy-uid", "generation": 1},
        "spec": spec,
    }))
    .unwrap()
}

fn compiled(spec: Value) -> Arc<CompiledPolicy> {
    Arc::new(CompiledPolicy::compile(&policy("web-rules", spec)).unwrap())
}

/// A client as the API server stores it: the typed manifest with its defaults filled in.
fn client(spec: Value) -> Value {
    let mut spec = spec;
    spec["issuer"] = json!("https://login.example.test/acme");
    let client: OIDCClient = serde_json::from_value(json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": "OIDCClient",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": spec,
    }))
    .unwrap();
    serde_json::to_value(client).unwrap()
}

fn labels(namespace: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(NAMESPACE_NAME_LABEL.to_owned(), namespace.to_owned())])
}

fn broken(policy: &CompiledPolicy, object: &Value) -> Vec<Rule> {
    policy
        .violations(PolicyKind::OidcClient, &cel_object(object))
        .into_iter()
        .map(|v| v.rule)
        .collect()
}

#[test]
fn redirect_uris_are_held_to_hosts_schemes_paths_and_loopback() {
    let policy = compiled(json!({"rules": {"redirectUris": {
        "hosts": ["app.example.com", "*.corp.example.com"],
        "pathPrefixes": ["/callback"],
    }}}));
    let allowed = [
        "https://app.example.com/callback",
        "https://APP.example.com/callback?x=1",
        "https://a.b.corp.example.com:8443/callback/more",
    ];
    for uri in allowed {
        assert!(
            broken(&policy, &client(json!({"redirectUris": [uri]}))).is_empty(),
            "{uri}"
        );
    }
    let refused = [
        "http://app.example.com/callback",
        "https://corp.example.com/callback",
        "https://app.example.com/callbackx",
        "https://app.example.com.evil.test/callback",
        "https://app.example.com@evil.test/callback",
        "https://evil.test/x?https://app.example.com/callback",
        "http://127.0.0.1:8080/callback",
    ];
    for uri in refused {
        assert_eq!(
            broken(
                &policy,
                &client(json!({"redirectUris": ["https://app.example.com/callback", uri]}))
            ),
            vec![Rule::RedirectUris],
            "{uri}"
        );
    }
    let loopback = compiled(
        json!({"rules": {"redirectUris": {"hosts": ["app.example.com"], "allowLoopback": true}}}),
    );
    assert!(
        broken(
            &loopback,
            &client(json!({"redirectUris": ["http://127.0.0.1:8400/cb", "http://[::1]/"]}))
        )
        .is_empty()
    );
}

#[test]
fn an_open_host_list_still_refuses_loopback_unless_allowed() {
    let policy = compiled(json!({"rules": {"redirectUris": {}}}));
    assert!(
        broken(
            &policy,
            &client(json!({"redirectUris": ["https://anything.test/cb"]}))
        )
        .is_empty()
    );
    assert_eq!(
        broken(
            &policy,
            &client(json!({"redirectUris": ["http://localhost:3000/cb"]}))
        ),
        vec![Rule::RedirectUris]
    );
}

#[test]
fn enumerated_rules_apply_to_defaults_too() {
    let policy = compiled(json!({"rules": {
        "grantTypes": ["client_credentials"],
        "responseTypes": ["code"],
        "tokenEndpointAuthMethods": ["private_key_jwt"],
        "scopes": ["openid", "profile"],
        "requirePkce": true,
    }}));
    // The defaults: authorization_code, client_secret_basic, PKCE required.
    let defaults =
        client(json!({"redirectUris": ["https://a.test/cb"], "secret": {"generate": true}}));
    assert_eq!(
        broken(&policy, &defaults),
        vec![Rule::GrantTypes, Rule::TokenEndpointAuthMethods]
    );
    let compliant = client(json!({
        "grantTypes": ["client_credentials"], "responseTypes": [],
        "tokenEndpointAuthMethod": "private_key_jwt", "scopes": ["openid"],
    }));
    assert!(broken(&policy, &compliant).is_empty());
    let wider = client(json!({
        "grantTypes": ["client_credentials"], "responseTypes": [],
        "tokenEndpointAuthMethod": "private_key_jwt", "scopes": ["openid", "admin"],
        "requirePkce": false,
    }));
    assert_eq!(
        broken(&policy, &wider),
        vec![Rule::Scopes, Rule::RequirePkce]
    );
}

#[test]
fn the_secret_source_binds_confidential_clients_only() {
    let generated = compiled(json!({"rules": {"secretSource": "Generated"}}));
    let team_held = client(
        json!({"grantTypes": ["client_credentials"], "responseTypes": [],
        "secret": {"secretRef": {"name": "creds", "key": "secret"}}}),
    );
    assert_eq!(broken(&generated, &team_held), vec![Rule::SecretSource]);
    let public =
        client(json!({"redirectUris": ["https://a.test/cb"], "tokenEndpointAuthMethod": "none"}));
    assert!(broken(&generated, &public).is_empty());
    let by_ref = compiled(json!({"rules": {"secretSource": "SecretRef"}}));
    assert!(broken(&by_ref, &team_held).is_empty());
}

#[test]
fn coverage_by_kind_issuer_and_namespace_labels() {
    let policy = compiled(json!({"match": {
        "kinds": ["OIDCClient"],
        "issuers": ["https://login.example.test/acme"],
        "namespaceSelector": {"matchLabels": {"tier": "prod"}},
    }, "rules": {"requirePkce": true}}));
    let mut prod = labels("team-a");
    prod.insert("tier".to_owned(), "prod".to_owned());
    let acme = "https://login.example.test/acme";
    assert!(policy.covers(PolicyKind::OidcClient, &prod, acme));
    assert!(!policy.covers(PolicyKind::OidcClient, &labels("team-a"), acme));
    assert!(!policy.covers(
        PolicyKind::OidcClient,
        &prod,
        "https://login.example.test/other"
    ));
    assert!(!policy.covers(PolicyKind::Branding, &prod, acme));
}

#[test]
fn the_namespace_limit_holds_back_the_clients_created_later() {
    let policy = compiled(json!({"rules": {"maxClientsPerNamespace": 2}}));
    let object =
        client(json!({"redirectUris": ["https://a.test/cb"], "secret": {"generate": true}}));
    let subject = Subject {
        kind: PolicyKind::OidcClient,
        namespace: "team-a",
        namespace_labels: &labels("team-a"),
        issuer: "https://login.example.test/acme",
        object: &object,
    };
    let covering = covering(std::slice::from_ref(&policy), &subject);
    assert!(violations(&covering, &subject, &|_| 1).is_empty());
    let over = violations(&covering, &subject, &|_| 2);
    assert_eq!(over.len(), 1);
    assert_eq!(over[0].rule, Rule::MaxClientsPerNamespace);
    assert!(
        over[0].message.contains("namespace team-a may hold 2"),
        "{}",
        over[0].message
    );
}

#[test]
fn other_kinds_have_their_own_rules() {
    let policy = compiled(
        json!({"rules": {"identityProviderKinds": ["oidc"], "allowCustomCss": false, "scopes": ["openid"]}}),
    );
    let provider = cel_object(
        &json!({"kind": "IdentityProvider", "spec": {"issuer": "https://x.test/a", "kind": "github", "scopes": ["repo"]}}),
    );
    let rules: Vec<Rule> = policy
        .violations(PolicyKind::IdentityProvider, &provider)
        .into_iter()
        .map(|v| v.rule)
        .collect();
    assert_eq!(rules, vec![Rule::Scopes, Rule::IdentityProviderKinds]);
    let branding = cel_object(
        &json!({"spec": {"issuer": "https://x.test/a", "branding": {"customCss": "body{}"}}}),
    );
    let rules: Vec<Rule> = policy
        .violations(PolicyKind::Branding, &branding)
        .into_iter()
        .map(|v| v.rule)
        .collect();
    assert_eq!(rules, vec![Rule::AllowCustomCss]);
    let plain = cel_object(&json!({"spec": {"issuer": "https://x.test/a", "branding": {}}}));
    assert!(policy.violations(PolicyKind::Branding, &plain).is_empty());
}

#[test]
fn hostile_values_cannot_change_the_expression() {
    let policy = policy(
        "odd",
        json!({"rules": {"scopes": ["x') || true || ('", "a\\'b"]}}),
    );
    let compiled = CompiledPolicy::compile(&policy).unwrap();
    let object = client(
        json!({"grantTypes": ["client_credentials"], "responseTypes": [], "scopes": ["other"], "tokenEndpointAuthMethod": "private_key_jwt"}),
    );
    assert_eq!(broken(&compiled, &object), vec![Rule::Scopes]);
}

#[test]
fn approvals_hold_new_clients_and_changes_to_listed_fields() {
    let policy = compiled(json!({"rules": {"approval": {"fields": ["redirectUris", "scopes"]}}}));
    let covering = [policy.as_ref()];
    let spec =
        json!({"redirectUris": ["https://a.test/cb"], "scopes": ["openid"], "displayName": "A"});
    let none = Approvals::default();
    let waiting = approval_standing(&covering, &spec, 1, false, None, none);
    assert!(matches!(
        waiting,
        ApprovalStanding::Waiting {
            new_client: true,
            ..
        }
    ));
    let approved = approval_standing(
        &covering,
        &spec,
        1,
        false,
        None,
        Approvals { generations: &[1] },
    );
    let ApprovalStanding::Approved { record } = approved else {
        panic!("{approved:?}")
    };
    assert_eq!(record.fields, vec!["redirectUris", "scopes"]);

    // Another display name: not a listed field.
    let renamed =
        json!({"redirectUris": ["https://a.test/cb"], "scopes": ["openid"], "displayName": "B"});
    assert!(matches!(
        approval_standing(&covering, &renamed, 2, true, Some(&record), none),
        ApprovalStanding::Unchanged { .. }
    ));
    let widened =
        json!({"redirectUris": ["https://a.test/cb", "https://b.test/cb"], "scopes": ["openid"]});
    assert!(matches!(
        approval_standing(&covering, &widened, 3, true, Some(&record), none),
        ApprovalStanding::Waiting {
            new_client: false,
            ..
        }
    ));
    // An approval of another generation does not count.
    assert!(matches!(
        approval_standing(
            &covering,
            &widened,
            3,
            true,
            Some(&record),
            Approvals { generations: &[2] }
        ),
        ApprovalStanding::Waiting { .. }
    ));
    // Written before the policy: no record, so a change waits.
    let old = ApprovalRecord {
        generation: 1,
        fields: vec![],
        digest: String::new(),
    };
    assert!(matches!(
        approval_standing(&covering, &renamed, 2, true, Some(&old), none),
        ApprovalStanding::Waiting { .. }
    ));
    assert_eq!(
        approval_standing(&[], &spec, 1, false, None, none),
        ApprovalStanding::NotRequired
    );
}

#[test]
fn the_admission_policy_carries_every_check_guarded_by_kind() {
    let source = policy(
        "web-rules",
        json!({
            "match": {"issuers": ["https://login.example.test/acme"]},
            "rules": {"grantTypes": ["authorization_code"], "allowCustomCss": false, "maxClientsPerNamespace": 3},
        }),
    );
    let compiled = CompiledPolicy::compile(&source).unwrap();
    let (admission, binding) = admission::admission_objects(&source, &compiled).unwrap();
    assert_eq!(
        admission.metadata.name.as_deref(),
        Some("nauthera-web-rules")
    );
    let spec = admission.spec.unwrap();
    let rules = spec.match_constraints.unwrap().resource_rules.unwrap();
    assert_eq!(
        rules[0].resources.as_deref().unwrap(),
        ["oidcclients", "brandings"]
    );
    let validations = spec.validations.unwrap();
    assert_eq!(validations.len(), 2);
    assert!(
        validations[0]
            .expression
            .starts_with("object.kind != 'OIDCClient' || (")
    );
    assert!(
        validations[0]
            .message
            .as_deref()
            .unwrap()
            .starts_with("ClientPolicy web-rules, rule grantTypes: spec.grantTypes")
    );
    for v in &validations {
        cel::Program::compile(&v.expression).unwrap();
    }
    for c in spec.match_conditions.unwrap() {
        cel::Program::compile(&c.expression).unwrap();
    }
    assert_eq!(
        binding.spec.unwrap().policy_name.as_deref(),
        Some("nauthera-web-rules")
    );
    assert_eq!(
        admission.metadata.owner_references.unwrap()[0].uid,
        "policy-uid"
    );
    // A limit alone needs no admission policy.
    let limit_only = policy("limit", json!({"rules": {"maxClientsPerNamespace": 3}}));
    let compiled = CompiledPolicy::compile(&limit_only).unwrap();
    assert!(admission::admission_objects(&limit_only, &compiled).is_none());
}
