//! Hostile manifests across the four kinds, one table: sizes at and over the limits, control
//! characters, homoglyphs, deep nesting, huge lists, colliding Secret names, wrong types, empty
//! strings and duplicate entries. Each row has exactly one outcome: the API server refuses the
//! apply and its error names the field, or the resource settles with a clear status (a catalog
//! reason and a message naming the field). The rows run together in one stack, beside ordinary
//! manifests that must all register; afterwards the reconciler is ready, its log has no panic, no
//! object was written more than once per generation, and no status message or event carries a raw
//! control character.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use nauthera_proto::v1::AuditOutcome;
use nauthera_shared::catalog::{Phase, Reason};
use nauthera_shared::resources::{
    Branding, IdentityProvider, OIDCClient, Organization, ResourceStatus,
};
use nauthera_tests::e2e::{Declared, ISSUER, MANAGER, Stack, secret_value, sha256_hex};
use nauthera_tests::manifests::FIELD_MANAGER;
use serde_json::{Value, json};

/// How long every row together may take to settle.
const SETTLE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(250);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Client,
    Branding,
    Provider,
    Organization,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Client => "OIDCClient",
            Kind::Branding => "Branding",
            Kind::Provider => "IdentityProvider",
            Kind::Organization => "Organization",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Kind::Client => "oidcclients",
            Kind::Branding => "brandings",
            Kind::Provider => "identityproviders",
            Kind::Organization => "organizations",
        }
    }

    fn of(object: &Value) -> Option<Kind> {
        match object["kind"].as_str()? {
            "OIDCClient" => Some(Kind::Client),
            "Branding" => Some(Kind::Branding),
            "IdentityProvider" => Some(Kind::Provider),
            "Organization" => Some(Kind::Organization),
            _ => None,
        }
    }
}

/// What a row must end in.
#[derive(Clone, Debug)]
enum Outcome {
    /// The API server refuses the row's last object, naming `field`; nothing is stored.
    Refused { field: &'static str },
    /// The row's last object settles at `reason`, its message naming every part of `mentions`.
    Settles {
        reason: Reason,
        mentions: Vec<String>,
    },
    /// Two OIDCClients deliver into one Secret: the first to create it owns it and is
    /// Registered; the other is SecretUndeliverable naming the Secret and the owner; the Secret
    /// holds the owner's client id and the secret the server holds for the owner.
    OneOwner {
        a: String,
        b: String,
        secret: String,
    },
}

struct Row {
    label: &'static str,
    objects: Vec<Value>,
    outcome: Outcome,
}

fn row(label: &'static str, objects: Vec<Value>, outcome: Outcome) -> Row {
    Row {
        label,
        objects,
        outcome,
    }
}

fn refused(field: &'static str) -> Outcome {
    Outcome::Refused { field }
}

fn settles(reason: Reason, mentions: &[&str]) -> Outcome {
    Outcome::Settles {
        reason,
        mentions: mentions.iter().map(|m| (*m).to_owned()).collect(),
    }
}

fn registered() -> Outcome {
    settles(Reason::Registered, &["is in force"])
}

/// Sets `value` at a dotted path (`spec.secret.secretName`), creating objects on the way; `null`
/// removes the field.
fn with(mut object: Value, path: &str, value: Value) -> Value {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap();
    let mut node = &mut object;
    for part in parts {
        node = node
            .as_object_mut()
            .unwrap()
            .entry(part)
            .or_insert_with(|| json!({}));
    }
    if value.is_null() {
        node.as_object_mut().unwrap().remove(last);
    } else {
        node[last] = value;
    }
    object
}

fn envelope(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": kind,
        "metadata": { "name": name },
        "spec": spec,
    })
}

/// A confidential web client whose secret the server generates.
fn client(name: &str) -> Value {
    envelope(
        "OIDCClient",
        name,
        json!({
            "issuer": ISSUER,
            "displayName": "Hostile row",
            "redirectUris": ["https://app.example.test/callback"],
            "grantTypes": ["authorization_code"],
            "responseTypes": ["code"],
            "scopes": ["openid", "profile"],
            "tokenEndpointAuthMethod": "client_secret_basic",
            "secret": { "generate": true },
        }),
    )
}

/// A confidential service client with the team's secret in `secret`.
fn team_secret_client(name: &str, secret: &str) -> Value {
    envelope(
        "OIDCClient",
        name,
        json!({
            "issuer": ISSUER,
            "displayName": "Team-held secret",
            "grantTypes": ["client_credentials"],
            "responseTypes": [],
            "scopes": ["reports.read"],
            "tokenEndpointAuthMethod": "client_secret_post",
            "secret": { "secretRef": { "name": secret, "key": "clientSecret" } },
        }),
    )
}

fn branding(name: &str) -> Value {
    envelope(
        "Branding",
        name,
        json!({
            "issuer": ISSUER,
            "branding": {
                "colors": { "primary": "#112233" },
                "texts": { "title": "Hostile row" },
            },
        }),
    )
}

fn provider(name: &str, secret: &str) -> Value {
    envelope(
        "IdentityProvider",
        name,
        json!({
            "issuer": ISSUER,
            "kind": "github",
            "displayName": "GitHub",
            "clientId": "Iv1.0123456789abcdef",
            "secretRef": { "name": secret, "key": "clientSecret" },
            "scopes": ["read:user"],
            "claimMapping": { "email": "email" },
        }),
    )
}

fn organization(name: &str, slug: &str) -> Value {
    envelope(
        "Organization",
        name,
        json!({
            "slug": slug,
            "issuer": format!("https://login.example.com/{slug}"),
            "displayName": "Hostile row",
            "fapiMode": "Disabled",
        }),
    )
}

fn plain_secret(name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name },
        "type": "Opaque",
        "stringData": { "clientSecret": value },
    })
}

/// `{"a": {"a": ... "deep" ...}}`, `depth` objects deep.
fn nested_object(depth: usize) -> Value {
    (0..depth).fold(json!("deep"), |inner, _| json!({ "a": inner }))
}

/// `[[[...]]]` as text, `depth` arrays deep.
fn nested_json_text(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// A DNS subdomain of `length` characters: `prefix`, then labels of at most 62 characters.
fn long_name(prefix: &str, length: usize) -> String {
    let mut name = prefix.to_owned();
    while name.len() < length {
        let label = name.len() - name.rfind('.').map_or(0, |dot| dot + 1);
        if label >= 62 && length - name.len() > 1 {
            name.push('.');
        } else {
            name.push('x');
        }
    }
    name
}

/// Every row. Names are unique across rows; a row's last object is the one its outcome is about.
fn rows() -> Vec<Row> {
    let name_253 = long_name("limit-name-", 253);
    let name_254 = long_name("over-name-", 254);
    // Slugs are DNS labels: no dots.
    let slug_63 = format!("limit-slug-{}", "x".repeat(63 - 11));
    let slug_64 = format!("over-slug-{}", "x".repeat(64 - 10));
    let secret_253 = long_name("limit-secret-", 253);
    let secret_254 = long_name("over-secret-", 254);
    let long_issuer = format!("https://login.example.com/{}", "p".repeat(512 - 26));
    let many_uris: Vec<String> = (0..10_000)
        .map(|i| format!("https://app.example.test/cb/{i}"))
        .collect();
    let fifty_uris: Vec<String> = (0..50)
        .map(|i| {
            let base = format!("https://app.example.test/cb/{i}/");
            format!("{base}{}", "p".repeat(2048 - base.len()))
        })
        .collect();
    let fifty_scopes: Vec<String> = (0..50)
        .map(|i| format!("{i:02}{}", "s".repeat(126)))
        .collect();
    let many_scopes: Vec<String> = (0..10_000).map(|i| format!("scope.{i}")).collect();
    // 16 KiB of CSS, exactly the limit; the same number of two-byte characters is twice that.
    let css_rule = ".sign-in-card { border-radius: 12px; }\n";
    let mut css_at_limit = css_rule.repeat(16 * 1024 / css_rule.len());
    css_at_limit.push_str(&"/".repeat(16 * 1024 - css_at_limit.len()));
    let css_wide = format!("/*{}*/", "é".repeat(16 * 1024 - 4));
    let css_mib = format!("/*{}*/", "x".repeat(1024 * 1024));
    for (text, length) in [
        (&name_253, 253),
        (&name_254, 254),
        (&slug_63, 63),
        (&slug_64, 64),
        (&secret_253, 253),
        (&secret_254, 254),
        (&long_issuer, 512),
        (&css_at_limit, 16 * 1024),
    ] {
        assert_eq!(text.len(), length, "{text}");
    }

    vec![
        // --- limits
        row(
            "name at 253 characters",
            vec![client(&name_253)],
            registered(),
        ),
        row(
            "name at 254 characters",
            vec![client(&name_254)],
            refused("metadata.name"),
        ),
        row(
            "Branding name at 253 characters",
            vec![branding(&long_name("limit-branding-", 253))],
            registered(),
        ),
        row(
            "slug at 63, issuer at 512, display name at 200",
            vec![with(
                with(
                    organization("limit-org", &slug_63),
                    "spec.issuer",
                    json!(long_issuer),
                ),
                "spec.displayName",
                json!("d".repeat(200)),
            )],
            registered(),
        ),
        row(
            "slug at 64 characters",
            vec![organization("over-org", &slug_64)],
            refused("spec.slug"),
        ),
        row(
            "secretName at 253 characters",
            vec![with(
                client("limit-secret-name"),
                "spec.secret.secretName",
                json!(secret_253),
            )],
            registered(),
        ),
        row(
            "secretName at 254 characters",
            vec![with(
                client("over-secret-name"),
                "spec.secret.secretName",
                json!(secret_254),
            )],
            refused("spec.secret.secretName"),
        ),
        row(
            "50 redirect URIs of 2048 characters, 50 scopes of 128, display name of 200",
            vec![with(
                with(
                    with(
                        client("limit-lists"),
                        "spec.redirectUris",
                        json!(fifty_uris),
                    ),
                    "spec.scopes",
                    json!(fifty_scopes),
                ),
                "spec.displayName",
                json!("d".repeat(200)),
            )],
            registered(),
        ),
        row(
            "10,000 redirect URIs",
            vec![with(
                client("over-redirects"),
                "spec.redirectUris",
                json!(many_uris),
            )],
            refused("spec.redirectUris"),
        ),
        row(
            "display name of 100 KB",
            vec![with(
                client("over-display-name"),
                "spec.displayName",
                json!("d".repeat(100 * 1024)),
            )],
            refused("spec.displayName"),
        ),
        row(
            "texts at their limits, custom CSS of 16 KiB",
            vec![with(
                with(
                    branding("limit-texts"),
                    "spec.branding.texts",
                    json!({
                        "title": "t".repeat(100),
                        "welcome": format!("{}\n{}", "w".repeat(499), "w".repeat(500)),
                        "footer": "f".repeat(1000),
                        "support": "s".repeat(200),
                    }),
                ),
                "spec.branding.customCss",
                json!(css_at_limit),
            )],
            registered(),
        ),
        row(
            "custom CSS of 1 MiB",
            vec![with(
                branding("over-css"),
                "spec.branding.customCss",
                json!(css_mib),
            )],
            refused("spec.branding.customCss"),
        ),
        row(
            "custom CSS of 16 Ki characters, 32 KiB",
            vec![with(
                branding("wide-css"),
                "spec.branding.customCss",
                json!(css_wide),
            )],
            settles(
                Reason::Refused,
                &["spec.branding.customCss", "at most 16384 allowed"],
            ),
        ),
        row(
            "title of 101 characters",
            vec![with(
                branding("over-title"),
                "spec.branding.texts.title",
                json!("t".repeat(101)),
            )],
            refused("spec.branding.texts.title"),
        ),
        // --- control characters
        row(
            "NUL in a display name",
            vec![with(
                client("nul-display-name"),
                "spec.displayName",
                json!("Billing\u{0}admin"),
            )],
            refused("spec.displayName"),
        ),
        row(
            "ESC sequences in a display name",
            vec![with(
                client("esc-display-name"),
                "spec.displayName",
                json!("\u{1b}[2J\u{1b}[31mBilling\u{1b}[0m"),
            )],
            refused("spec.displayName"),
        ),
        row(
            "CR/LF in a display name",
            vec![with(
                provider("crlf-display-name", "hostile-idp"),
                "spec.displayName",
                json!("GitHub\r\nSet-Cookie: session=1"),
            )],
            refused("spec.displayName"),
        ),
        row(
            "bidi override U+202E in a display name",
            vec![with(
                organization("bidi-display-name", "bidi-org"),
                "spec.displayName",
                json!("Acme \u{202e}nimda"),
            )],
            refused("spec.displayName"),
        ),
        row(
            "CR/LF in a redirect URI",
            vec![with(
                client("crlf-redirect"),
                "spec.redirectUris",
                json!(["https://app.example.test/cb\r\nLocation: https://evil.test/"]),
            )],
            refused("spec.redirectUris"),
        ),
        row(
            "NUL in a redirect URI",
            vec![with(
                client("nul-redirect"),
                "spec.redirectUris",
                json!(["https://app.example.test/cb\u{0}.evil.test"]),
            )],
            refused("spec.redirectUris"),
        ),
        row(
            "ESC in a post-logout redirect URI",
            vec![with(
                client("esc-redirect"),
                "spec.postLogoutRedirectUris",
                json!(["https://app.example.test/\u{1b}]8;;https://evil.test\u{7}"]),
            )],
            refused("spec.postLogoutRedirectUris"),
        ),
        row(
            "bidi override U+202E in a redirect host",
            vec![with(
                client("bidi-redirect"),
                "spec.redirectUris",
                json!(["https://\u{202e}tset.live.app.example.test/cb"]),
            )],
            refused("spec.redirectUris"),
        ),
        row(
            "control character in a branding title",
            vec![with(
                branding("esc-title"),
                "spec.branding.texts.title",
                json!("Welcome\u{1b}[31m"),
            )],
            settles(
                Reason::Refused,
                &["spec.branding.texts.title", "control character"],
            ),
        ),
        row(
            "ESC in an issuer the server does not serve",
            vec![with(
                client("esc-issuer"),
                "spec.issuer",
                json!("https://login.example.com/acme\u{1b}[8m"),
            )],
            settles(Reason::Refused, &["UNKNOWN_ISSUER", "\\u{1b}[8m"]),
        ),
        row(
            "ESC in a claim mapping key the server refuses",
            vec![with(
                provider("esc-claim", "hostile-idp"),
                "spec.claimMapping",
                json!({ "email\u{1b}[2K": "mail" }),
            )],
            settles(
                Reason::Refused,
                &["INVALID_FIELD", "spec.claim_mapping[email\\u{1b}[2K]"],
            ),
        ),
        // --- homoglyphs
        row(
            "Cyrillic а in a redirect host",
            vec![with(
                client("homoglyph-redirect"),
                "spec.redirectUris",
                json!(["https://p\u{0430}yments.example.test/callback"]),
            )],
            refused("spec.redirectUris"),
        ),
        row(
            "punycode of that host",
            vec![with(
                client("punycode-redirect"),
                "spec.redirectUris",
                json!(["https://xn--pyments-2fg.example.test/callback"]),
            )],
            registered(),
        ),
        row(
            "a name with a Cyrillic а that looks like another's",
            vec![client("homoglyph-w\u{0430}b")],
            refused("metadata.name"),
        ),
        row(
            "brandingRef with a Cyrillic і",
            vec![with(
                client("homoglyph-branding-ref"),
                "spec.brandingRef",
                json!({ "name": "s\u{0456}gn-in" }),
            )],
            refused("spec.brandingRef.name"),
        ),
        row(
            "secretName with a Cyrillic о",
            vec![with(
                client("homoglyph-secret-name"),
                "spec.secret.secretName",
                json!("ok-web-\u{043e}idc"),
            )],
            refused("spec.secret.secretName"),
        ),
        row(
            "names that differ in 1 and l stay apart",
            vec![client("lookalike-web-1"), client("lookalike-web-l")],
            registered(),
        ),
        // --- deep nesting
        row(
            "an undeclared field nested 100 deep",
            vec![with(
                client("deep-unknown"),
                "spec.extra",
                nested_object(100),
            )],
            // A server-side apply cannot type a field the schema does not declare.
            refused("spec.extra"),
        ),
        row(
            "JSON nested 500 deep in a text",
            vec![with(
                branding("deep-text"),
                "spec.branding.texts.welcome",
                json!(nested_json_text(500)),
            )],
            registered(),
        ),
        row(
            "JSON nested 2000 deep in a claim name",
            vec![with(
                provider("deep-claim", "hostile-idp"),
                "spec.claimMapping",
                json!({ "name": nested_json_text(2000) }),
            )],
            registered(),
        ),
        // --- huge lists
        row(
            "10,000 scopes",
            vec![with(
                client("many-scopes"),
                "spec.scopes",
                json!(many_scopes),
            )],
            refused("spec.scopes"),
        ),
        row(
            "a grant type repeated 10,000 times",
            vec![with(
                client("many-grants"),
                "spec.grantTypes",
                json!(vec!["authorization_code"; 10_000]),
            )],
            refused("spec.grantTypes"),
        ),
        row(
            "10,000 upstream scopes",
            vec![with(
                provider("many-upstream-scopes", "hostile-idp"),
                "spec.scopes",
                json!(many_scopes),
            )],
            refused("spec.scopes"),
        ),
        // --- colliding Secret names
        row(
            "two clients with one secretName",
            vec![
                with(
                    client("collide-a"),
                    "spec.secret.secretName",
                    json!("shared-oidc"),
                ),
                with(
                    client("collide-b"),
                    "spec.secret.secretName",
                    json!("shared-oidc"),
                ),
            ],
            Outcome::OneOwner {
                a: "collide-a".into(),
                b: "collide-b".into(),
                secret: "shared-oidc".into(),
            },
        ),
        row(
            "secretName of a Secret another tool owns",
            vec![with(
                client("grab-tool-secret"),
                "spec.secret.secretName",
                json!("tool-owned"),
            )],
            settles(
                Reason::SecretUndeliverable,
                &[
                    "Secret tool-owned",
                    "ConfigMap/other-tool",
                    "spec.secret.secretName",
                ],
            ),
        ),
        row(
            "secretName of another client's team-held secretRef",
            vec![
                team_secret_client("team-holder", "team-creds"),
                with(
                    client("grab-team-secret"),
                    "spec.secret.secretName",
                    json!("team-creds"),
                ),
            ],
            settles(
                Reason::SecretUndeliverable,
                &[
                    "Secret team-creds",
                    "it has no owner",
                    "spec.secret.secretName",
                ],
            ),
        ),
        // --- wrong types
        row(
            "redirectUris as a string",
            vec![with(
                client("wrong-redirects"),
                "spec.redirectUris",
                json!("https://app.example.test/callback"),
            )],
            refused("spec.redirectUris"),
        ),
        row(
            "requirePkce as a string",
            vec![with(client("wrong-pkce"), "spec.requirePkce", json!("yes"))],
            refused("spec.requirePkce"),
        ),
        row(
            "a colour as a number",
            vec![with(
                branding("wrong-colour"),
                "spec.branding.colors.primary",
                json!(112233),
            )],
            refused("spec.branding.colors.primary"),
        ),
        row(
            "claimMapping as a list",
            vec![with(
                provider("wrong-claims", "hostile-idp"),
                "spec.claimMapping",
                json!(["email"]),
            )],
            refused("spec.claimMapping"),
        ),
        row(
            "fapiMode as a boolean",
            vec![with(
                organization("wrong-fapi", "wrong-fapi"),
                "spec.fapiMode",
                json!(false),
            )],
            refused("spec.fapiMode"),
        ),
        // --- empty strings
        row(
            "empty issuer",
            vec![with(client("empty-issuer"), "spec.issuer", json!(""))],
            refused("spec.issuer"),
        ),
        row(
            "empty display name",
            vec![with(
                client("empty-display-name"),
                "spec.displayName",
                json!(""),
            )],
            refused("spec.displayName"),
        ),
        row(
            "empty redirect URI",
            vec![with(
                client("empty-redirect"),
                "spec.redirectUris",
                json!([""]),
            )],
            refused("spec.redirectUris"),
        ),
        row(
            "empty scope",
            vec![with(
                client("empty-scope"),
                "spec.scopes",
                json!(["openid", ""]),
            )],
            refused("spec.scopes[1]"),
        ),
        row(
            "empty title",
            vec![with(
                branding("empty-title"),
                "spec.branding.texts.title",
                json!(""),
            )],
            refused("spec.branding.texts.title"),
        ),
        row(
            "empty upstream client id",
            vec![with(
                provider("empty-client-id", "hostile-idp"),
                "spec.clientId",
                json!(""),
            )],
            refused("spec.clientId"),
        ),
        row(
            "empty claim name",
            vec![with(
                provider("empty-claim", "hostile-idp"),
                "spec.claimMapping",
                json!({ "": "mail" }),
            )],
            settles(Reason::Refused, &["INVALID_FIELD", "spec.claim_mapping[]"]),
        ),
        row(
            "empty slug",
            vec![organization("empty-slug", "")],
            refused("spec.slug"),
        ),
        // --- duplicate list entries
        row(
            "duplicate redirect URIs, scopes and grant types",
            vec![with(
                with(
                    with(
                        client("duplicates"),
                        "spec.redirectUris",
                        json!([
                            "https://dup.example.test/callback",
                            "https://dup.example.test/callback"
                        ]),
                    ),
                    "spec.scopes",
                    json!(["openid", "openid", "profile"]),
                ),
                "spec.grantTypes",
                json!(["authorization_code", "authorization_code"]),
            )],
            registered(),
        ),
        row(
            "duplicate upstream scopes",
            vec![with(
                provider("duplicate-upstream-scopes", "hostile-idp"),
                "spec.scopes",
                json!(["read:user", "read:user"]),
            )],
            registered(),
        ),
    ]
}

/// Ordinary manifests applied beside the rows: every one must register.
fn ordinary() -> Vec<Value> {
    vec![
        plain_secret("ok-worker-credentials", "ok-worker-value-0123456789"),
        plain_secret("ok-github", "ok-github-value"),
        organization("ok-globex", "globex"),
        branding("ok-branding"),
        with(
            client("ok-web"),
            "spec.brandingRef",
            json!({ "name": "ok-branding" }),
        ),
        with(
            with(
                with(
                    client("ok-spa"),
                    "spec.tokenEndpointAuthMethod",
                    json!("none"),
                ),
                "spec.secret",
                Value::Null,
            ),
            "spec.redirectUris",
            json!(["http://127.0.0.1:8400/callback"]),
        ),
        team_secret_client("ok-worker", "ok-worker-credentials"),
        provider("ok-github", "ok-github"),
        with(
            client("ok-globex-web"),
            "spec.issuer",
            json!("https://login.example.com/globex"),
        ),
    ]
}

/// Applies one object as `kubectl apply --server-side` would, returning the API's refusal.
async fn apply(stack: &Stack, object: &Value) -> Result<(), kube::Error> {
    let api = dynamic_api(stack, object);
    let name = object["metadata"]["name"].as_str().unwrap();
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map(|_| ())
}

fn dynamic_api(stack: &Stack, object: &Value) -> Api<DynamicObject> {
    let resource = match Kind::of(object) {
        Some(kind) => ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("nauthera.io", "v1alpha1", kind.name()),
            kind.plural(),
        ),
        None => {
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Secret"), "secrets")
        }
    };
    Api::namespaced_with(stack.client(), stack.namespace(), &resource)
}

/// A manifest's status and generation, whatever its kind.
async fn status_of(stack: &Stack, kind: Kind, name: &str) -> Option<(ResourceStatus, i64)> {
    async fn get<K: Declared>(stack: &Stack, name: &str) -> Option<(ResourceStatus, i64)> {
        let resource = stack.manifest::<K>(name).await?;
        let status = resource.declared_status()?.clone();
        Some((status, resource.meta().generation.unwrap_or_default()))
    }
    match kind {
        Kind::Client => get::<OIDCClient>(stack, name).await,
        Kind::Branding => get::<Branding>(stack, name).await,
        Kind::Provider => get::<IdentityProvider>(stack, name).await,
        Kind::Organization => get::<Organization>(stack, name).await,
    }
}

/// Waits until the manifest's reason for its current generation is `reason`; the status last
/// seen either way.
async fn settle(
    stack: &Stack,
    kind: Kind,
    name: &str,
    reason: Reason,
    deadline: Instant,
) -> Result<ResourceStatus, String> {
    loop {
        let seen = status_of(stack, kind, name).await;
        if let Some((status, generation)) = &seen
            && status.reason == Some(reason)
            && status.observed_generation == Some(*generation)
        {
            return Ok(status.clone());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} {name} is not {reason} after {SETTLE:?}: {}",
                kind.name(),
                seen.map(|(s, _)| serde_json::to_string(&s).unwrap())
                    .unwrap_or_else(|| "(no status)".to_owned())
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether a text holds a character a terminal or a renderer acts on: C0 and C1 controls, DEL,
/// and the bidirectional formatting characters.
fn has_raw_control(text: &str) -> bool {
    let bidi = |c: char| {
        matches!(
            c,
            '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
    };
    text.chars().any(|c| c.is_control() || bidi(c))
}

fn excerpt(text: &str) -> String {
    let shown: String = text.chars().take(300).collect();
    format!("{shown:?}")
}

/// What the rows found: the row's label, the outcome seen, and a failure if it was not the one
/// expected.
struct Seen {
    label: &'static str,
    outcome: String,
    failure: Option<String>,
}

async fn run_row(stack: &Stack, row: &Row, deadline: Instant) -> Seen {
    let seen = |outcome: String, failure: Option<String>| Seen {
        label: row.label,
        outcome,
        failure,
    };
    let (last, before) = row.objects.split_last().unwrap();
    for object in before {
        if let Err(error) = apply(stack, object).await {
            return seen(
                "refused early".into(),
                Some(format!("an object before the last was refused: {error}")),
            );
        }
    }
    let kind = Kind::of(last).unwrap();
    let name = last["metadata"]["name"].as_str().unwrap().to_owned();
    let applied = apply(stack, last).await;
    match (&row.outcome, applied) {
        (Outcome::Refused { field }, Err(kube::Error::Api(error))) => {
            let named = error.message.contains(field);
            let stored = dynamic_api(stack, last).get_opt(&name).await.ok().flatten();
            let outcome = format!("API {} ({})", error.code, error.reason);
            match (named, stored) {
                (true, None) => seen(format!("{outcome}, names {field}"), None),
                (false, _) => seen(
                    outcome,
                    Some(format!(
                        "the refusal does not name {field}: {}",
                        excerpt(&error.message)
                    )),
                ),
                (true, Some(_)) => seen(outcome, Some("refused, yet stored".into())),
            }
        }
        (Outcome::Refused { field }, Err(error)) => seen(
            "error".into(),
            Some(format!(
                "expected the API to refuse naming {field}, got: {error}"
            )),
        ),
        (Outcome::Refused { field }, Ok(())) => {
            // Admitted: say what became of it, for the report.
            tokio::time::sleep(Duration::from_secs(5)).await;
            let status = status_of(stack, kind, &name).await;
            seen(
                "admitted".into(),
                Some(format!(
                    "admitted, though {field} should be refused; status: {}",
                    status
                        .map(|(s, _)| excerpt(&serde_json::to_string(&s).unwrap()))
                        .unwrap_or_default()
                )),
            )
        }
        (_, Err(error)) => seen(
            "API refused".into(),
            Some(format!("expected admission, got: {error}")),
        ),
        (Outcome::Settles { reason, mentions }, Ok(())) => {
            let mut failures = Vec::new();
            // Every object of the row settles; the last one as the row says, the others
            // Registered.
            for object in before.iter().filter(|o| Kind::of(o).is_some()) {
                let other = object["metadata"]["name"].as_str().unwrap();
                if let Err(failure) = settle(
                    stack,
                    Kind::of(object).unwrap(),
                    other,
                    Reason::Registered,
                    deadline,
                )
                .await
                {
                    failures.push(failure);
                }
            }
            match settle(stack, kind, &name, *reason, deadline).await {
                Ok(status) => {
                    let message = status.message.clone().unwrap_or_default();
                    let missing: Vec<&String> =
                        mentions.iter().filter(|m| !message.contains(*m)).collect();
                    if !missing.is_empty() {
                        failures.push(format!("{missing:?} missing from {}", excerpt(&message)));
                    }
                    let phase = status.phase;
                    let expected_phase = match reason {
                        Reason::Registered => Phase::Registered,
                        _ => Phase::Error,
                    };
                    if phase != Some(expected_phase) {
                        failures.push(format!("phase {phase:?}, not {expected_phase:?}"));
                    }
                }
                Err(failure) => failures.push(failure),
            }
            seen(
                format!("{}", reason),
                (!failures.is_empty()).then(|| failures.join("; ")),
            )
        }
        (Outcome::OneOwner { a, b, secret }, Ok(())) => {
            one_owner(stack, row, a, b, secret, deadline).await
        }
    }
}

/// Two clients deliver into one Secret: one owns it, the other is told, nothing is overwritten.
async fn one_owner(
    stack: &Stack,
    row: &Row,
    a: &str,
    b: &str,
    secret: &str,
    deadline: Instant,
) -> Seen {
    let fail = |failure: String| Seen {
        label: row.label,
        outcome: "?".into(),
        failure: Some(failure),
    };
    // Whichever created the Secret owns it.
    let owner = loop {
        if let Some(found) = stack.secret(secret).await {
            let owners = found.metadata.owner_references.clone().unwrap_or_default();
            break owners.first().map(|o| o.name.clone());
        }
        if Instant::now() > deadline {
            return fail(format!("Secret {secret} was never written"));
        }
        tokio::time::sleep(POLL).await;
    };
    let Some(owner) = owner else {
        return fail(format!("Secret {secret} has no owner"));
    };
    let loser = if owner == a { b } else { a };
    let won = match settle(stack, Kind::Client, &owner, Reason::Registered, deadline).await {
        Ok(status) => status,
        Err(failure) => return fail(failure),
    };
    let lost = match settle(
        stack,
        Kind::Client,
        loser,
        Reason::SecretUndeliverable,
        deadline,
    )
    .await
    {
        Ok(status) => status,
        Err(failure) => return fail(failure),
    };
    let mut failures = Vec::new();
    let message = lost.message.unwrap_or_default();
    for part in [
        format!("Secret {secret}"),
        format!("OIDCClient/{owner}"),
        "spec.secret.secretName".to_owned(),
    ] {
        if !message.contains(&part) {
            failures.push(format!("{part:?} missing from {}", excerpt(&message)));
        }
    }
    let delivered = stack.secret(secret).await.unwrap();
    let value = secret_value(&delivered, "clientSecret").unwrap_or_default();
    if secret_value(&delivered, "clientId") != won.client_id {
        failures.push(format!(
            "Secret {secret} holds client id {:?}, not the owner's {:?}",
            secret_value(&delivered, "clientId"),
            won.client_id
        ));
    }
    if stack.server.client_secret_hash(&stack.object_ref(&owner))
        != Some(sha256_hex(value.as_bytes()))
    {
        failures.push(format!(
            "Secret {secret} does not hold the secret the server holds for {owner}"
        ));
    }
    if stack.server.client_secret_hash(&stack.object_ref(loser))
        == Some(sha256_hex(value.as_bytes()))
    {
        failures.push(format!("Secret {secret} holds {loser}'s secret"));
    }
    Seen {
        label: row.label,
        outcome: format!("{owner} Registered, {loser} SecretUndeliverable"),
        failure: (!failures.is_empty()).then(|| failures.join("; ")),
    }
}

/// Whether a row's settled outcome has changed since: its reason, or the generation it is for.
async fn changed_since(stack: &Stack, row: &Row) -> Option<String> {
    let last = row.objects.last()?;
    let kind = Kind::of(last)?;
    let name = last["metadata"]["name"].as_str()?;
    let expected: Vec<(&str, Vec<Reason>)> = match &row.outcome {
        Outcome::Refused { .. } => return None,
        Outcome::Settles { reason, .. } => vec![(name, vec![*reason])],
        Outcome::OneOwner { a, b, .. } => {
            let either = vec![Reason::Registered, Reason::SecretUndeliverable];
            vec![(a.as_str(), either.clone()), (b.as_str(), either)]
        }
    };
    for (name, reasons) in expected {
        let Some((status, generation)) = status_of(stack, kind, name).await else {
            return Some(format!("{name} lost its status"));
        };
        let reason = status.reason?;
        if !reasons.contains(&reason) || status.observed_generation != Some(generation) {
            return Some(format!(
                "{name} moved on to {reason} (generation {:?} of {generation})",
                status.observed_generation
            ));
        }
    }
    None
}

async fn hostile_manifests_each_get_one_clear_outcome_and_the_others_keep_working() {
    let stack = Stack::start().await;
    let started = Instant::now();

    // What the rows collide with: a Secret another tool owns, the team's Secret a client reads,
    // the upstream secret of the identity providers.
    let configmaps: Api<ConfigMap> = Api::namespaced(stack.client(), stack.namespace());
    let tool = configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "other-tool" } })).unwrap(),
        )
        .await
        .unwrap();
    let tool_secret: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": "tool-owned",
            "labels": { "app.kubernetes.io/managed-by": "other-tool" },
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": "other-tool",
                "uid": tool.metadata.uid.clone().unwrap(),
                "controller": true,
            }],
        },
        "stringData": { "clientSecret": "the-other-tools-value" },
    }))
    .unwrap();
    stack
        .secrets()
        .create(&PostParams::default(), &tool_secret)
        .await
        .unwrap();
    for secret in [
        plain_secret("team-creds", "team-held-value-0123456789"),
        plain_secret("hostile-idp", "upstream-value"),
    ] {
        apply(&stack, &secret).await.unwrap();
    }

    let rows = rows();
    let ordinary = ordinary();
    let deadline = Instant::now() + SETTLE;
    let ordinary_applied = async {
        for object in &ordinary {
            apply(&stack, object).await.unwrap();
        }
    };
    let (seen, ()) = tokio::join!(
        futures::future::join_all(rows.iter().map(|row| run_row(&stack, row, deadline))),
        ordinary_applied,
    );

    // The others keep working.
    let mut failures: Vec<String> = Vec::new();
    for object in ordinary.iter().filter(|o| Kind::of(o).is_some()) {
        let name = object["metadata"]["name"].as_str().unwrap();
        if let Err(failure) = settle(
            &stack,
            Kind::of(object).unwrap(),
            name,
            Reason::Registered,
            deadline,
        )
        .await
        {
            failures.push(format!("ordinary: {failure}"));
        }
    }

    eprintln!("{:<75} outcome", "row");
    for seen in &seen {
        eprintln!(
            "{:<75} {}{}",
            seen.label,
            seen.outcome,
            if seen.failure.is_some() {
                "  FAILED"
            } else {
                ""
            }
        );
        if let Some(failure) = &seen.failure {
            failures.push(format!("{}: {failure}", seen.label));
        }
    }

    // Each outcome stays what it was: nothing flaps once settled.
    for row in &rows {
        if let Some(failure) = changed_since(&stack, row).await {
            failures.push(format!("{}: {failure}", row.label));
        }
    }

    // Nothing was written over: the other tool's Secret and the team's Secret hold their values.
    let tool_after = stack.secret("tool-owned").await.unwrap();
    assert_eq!(
        secret_value(&tool_after, "clientSecret").as_deref(),
        Some("the-other-tools-value")
    );
    assert_eq!(
        tool_after.metadata.owner_references.as_ref().map(Vec::len),
        Some(1),
        "{tool_after:?}"
    );
    let team_after = stack.secret("team-creds").await.unwrap();
    assert_eq!(
        secret_value(&team_after, "clientSecret").as_deref(),
        Some("team-held-value-0123456789")
    );
    assert!(
        team_after.metadata.owner_references.is_none(),
        "{team_after:?}"
    );
    assert_eq!(
        stack
            .server
            .client_secret_hash(&stack.object_ref("team-holder")),
        Some(sha256_hex(b"team-held-value-0123456789")),
        "the team's client keeps its own secret"
    );
    // Look-alike names stay two clients with two Secrets.
    let one = stack.secret("lookalike-web-1").await;
    let ell = stack.secret("lookalike-web-l").await;
    match (one, ell) {
        (Some(one), Some(ell)) => assert_ne!(
            secret_value(&one, "clientId"),
            secret_value(&ell, "clientId")
        ),
        other => failures.push(format!("look-alike names: Secrets {other:?}")),
    }

    // No status message and no event carries a raw control character.
    for kind in [
        Kind::Client,
        Kind::Branding,
        Kind::Provider,
        Kind::Organization,
    ] {
        let api = dynamic_api(&stack, &json!({ "kind": kind.name() }));
        for object in api.list(&ListParams::default()).await.unwrap() {
            let status = &object.data["status"];
            let mut texts: Vec<&str> = vec![status["message"].as_str().unwrap_or_default()];
            for condition in status["conditions"].as_array().into_iter().flatten() {
                texts.push(condition["message"].as_str().unwrap_or_default());
            }
            for text in texts.into_iter().filter(|t| has_raw_control(t)) {
                failures.push(format!(
                    "{} {}: a raw control character in its status: {}",
                    kind.name(),
                    object.metadata.name.clone().unwrap_or_default(),
                    excerpt(text)
                ));
            }
        }
    }
    let events: Api<Event> = Api::namespaced(stack.client(), stack.namespace());
    for event in events.list(&ListParams::default()).await.unwrap() {
        let message = event.message.clone().unwrap_or_default();
        if has_raw_control(&message) {
            failures.push(format!(
                "event on {:?}: a raw control character: {}",
                event.involved_object.name,
                excerpt(&message)
            ));
        }
    }

    // At most one write per object and generation (refused writes count).
    let mut writes: BTreeMap<(i32, String, String, String, i64), u32> = BTreeMap::new();
    let mut applied = 0;
    for event in stack.server.audit_events() {
        if event.manager != MANAGER {
            continue;
        }
        let outcome = AuditOutcome::try_from(event.outcome).unwrap_or_default();
        if outcome == AuditOutcome::Applied {
            applied += 1;
        }
        if !matches!(outcome, AuditOutcome::Applied | AuditOutcome::Refused) {
            continue;
        }
        let reference = event.r#ref.clone().unwrap_or_default();
        *writes
            .entry((
                event.kind,
                reference.namespace,
                reference.name,
                event.organization.clone(),
                event.generation,
            ))
            .or_default() += 1;
    }
    for ((kind, namespace, name, organization, generation), count) in &writes {
        if *count > 1 {
            failures.push(format!(
                "{count} writes of kind {kind} {namespace}/{name} ({organization}) generation \
                 {generation}"
            ));
        }
    }
    assert_eq!(
        stack.server.counters().writes_by(MANAGER),
        applied,
        "the server counts the writes the audit log shows"
    );

    // The reconciler never crashed.
    let reconciler = stack.reconciler();
    assert!(reconciler.pid().is_some());
    let (code, body) = reconciler.readyz().await;
    assert_eq!(code, 200, "/readyz: {body}");
    let log = reconciler.log();
    assert!(
        !log.contains("panicked"),
        "the reconciler panicked:\n{}",
        reconciler.log_tail()
    );

    eprintln!(
        "{} rows, {} writes, settled in {:?}",
        seen.len(),
        applied,
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
nauthera_tests::e2e_test!(hostile_manifests_each_get_one_clear_outcome_and_the_others_keep_working);

/// A plain-http redirect URI is refused with a sentence that says what is allowed, not with the
/// expression behind the check.
async fn an_http_redirect_is_refused_in_words() {
    let stack = Stack::start().await;
    let mut object = client("plain-http");
    object["spec"]["redirectUris"] = json!(["http://app.example.test/callback"]);
    let Err(kube::Error::Api(error)) = apply(&stack, &object).await else {
        panic!("a plain-http redirect URI is admitted");
    };
    assert_eq!(error.code, 422, "{error:?}");
    assert!(
        error.message.contains("spec.redirectUris: Invalid value: ")
            && error
                .message
                .contains("every redirect URI must be https://, or http:// on a loopback address")
            && !error.message.contains("x21"),
        "{}",
        error.message
    );
    // Loopback http stays allowed for native applications.
    object["spec"]["redirectUris"] = json!(["http://127.0.0.1:8400/callback"]);
    apply(&stack, &object).await.unwrap();
}
nauthera_tests::e2e_test!(an_http_redirect_is_refused_in_words);
