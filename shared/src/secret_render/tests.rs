use super::*;

const ISSUER: &str = "https://login.example.test/acme";

fn facts() -> SecretFacts<'static> {
    SecretFacts {
        client_id: "cid-1",
        client_secret: "s3cr3t-value",
        issuer: ISSUER,
    }
}

fn template(value: serde_json::Value) -> SecretTemplate {
    serde_json::from_value(value).unwrap()
}

#[test]
fn without_a_template_the_secret_has_its_four_keys_of_old() {
    let rendered = render(None, &facts()).unwrap();
    assert_eq!(
        rendered.data.keys().collect::<Vec<_>>(),
        ["clientId", "clientSecret", "discoveryUrl", "issuer"]
    );
    assert_eq!(rendered.type_, "Opaque");
    assert_eq!(rendered.shape, None);
    assert_eq!(rendered.client_secret_key, "clientSecret");
}

#[test]
fn a_template_names_the_keys_leaves_facts_out_and_renders_files() {
    let declared = template(serde_json::json!({
        "keys": { "clientId": "CLIENT_ID", "clientSecret": "CLIENT_SECRET" },
        "omit": ["discoveryUrl"],
        "files": {
            "oauth2-proxy.cfg": "client_id = \"{{ clientId }}\"\nclient_secret = \"{{ clientSecret }}\"\noidc_issuer_url = \"{{ issuer }}\"\n",
            ".env": "TOKEN_URL={{ tokenEndpoint }}\n"
        },
        "type": "example.com/oidc",
        "labels": { "team": "web" },
        "annotations": { "reflector.v1.k8s.emberstack.com/reflection-allowed": "true" }
    }));
    let rendered = render(Some(&declared), &facts()).unwrap();
    assert_eq!(
        rendered.data.keys().collect::<Vec<_>>(),
        [
            ".env",
            "CLIENT_ID",
            "CLIENT_SECRET",
            "issuer",
            "oauth2-proxy.cfg",
            "tokenEndpoint"
        ]
    );
    assert_eq!(rendered.data["CLIENT_SECRET"], "s3cr3t-value");
    assert_eq!(
        rendered.data["oauth2-proxy.cfg"],
        "client_id = \"cid-1\"\nclient_secret = \"s3cr3t-value\"\noidc_issuer_url = \"https://login.example.test/acme\"\n"
    );
    assert_eq!(
        rendered.data[".env"],
        "TOKEN_URL=https://login.example.test/acme/oauth2/token\n"
    );
    assert_eq!(rendered.client_secret_key, "CLIENT_SECRET");
    assert_eq!(rendered.type_, "example.com/oidc");
    assert_eq!(rendered.shape, Some(shape_digest(&declared)));
    assert_eq!(rendered.labels["team"], "web");
    // The secret never shows in what is printed of it.
    assert!(!format!("{rendered:?}").contains("s3cr3t"));
}

#[test]
fn the_shape_digest_changes_with_the_template_only() {
    let a = template(serde_json::json!({ "labels": { "team": "web" } }));
    let b = template(serde_json::json!({ "labels": { "team": "api" } }));
    assert_eq!(shape_digest(&a), shape_digest(&a.clone()));
    assert_ne!(shape_digest(&a), shape_digest(&b));
    assert_eq!(shape_digest(&a).len(), 16);
    // Defaults written out by the API server make the same shape.
    let defaulted = template(serde_json::json!({
        "keys": { "clientId": "clientId" }, "type": "Opaque", "labels": { "team": "web" }
    }));
    assert_eq!(shape_digest(&a), shape_digest(&defaulted));
}

#[test]
fn an_unknown_name_or_a_syntax_error_names_the_file_and_never_the_secret() {
    let unknown = template(serde_json::json!({ "files": { "app.env": "X={{ password }}" } }));
    let problem = check(&unknown, ISSUER).unwrap_err();
    assert_eq!(problem.field, "spec.secret.template.files[app.env]");
    assert!(problem.message.contains("undefined"), "{problem}");
    assert!(problem.message.contains("clientSecret"), "{problem}");
    assert!(render(Some(&unknown), &facts()).is_err());

    let broken = template(serde_json::json!({ "files": { "app.env": "X={{ clientId " } }));
    let problem = check(&broken, ISSUER).unwrap_err();
    assert_eq!(problem.field, "spec.secret.template.files[app.env]");
    assert!(problem.message.contains("syntax error"), "{problem}");

    // A failure with the real facts does not quote them.
    let failing = template(
        serde_json::json!({ "files": { "n": "{{ clientSecret | int + 1 }}{{ clientSecret[100] }}" } }),
    );
    if let Err(problem) = render(Some(&failing), &facts()) {
        assert!(!problem.to_string().contains("s3cr3t"), "{problem}");
    }
    let looping = template(serde_json::json!({
        "files": { "n": "{% for a in range(10000) %}{% for b in range(10000) %}x{% endfor %}{% endfor %}" }
    }));
    assert!(render(Some(&looping), &facts()).is_err());
}

#[test]
fn a_template_loads_nothing_else() {
    let including = template(serde_json::json!({ "files": { "n": "{% include 'other' %}" } }));
    assert!(check(&including, ISSUER).is_err());
}
