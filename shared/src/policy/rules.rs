//! A policy's rules as checks: one CEL expression over `object` per rule and kind, with the
//! message that names the policy, the rule and the field. The same text goes into the generated
//! ValidatingAdmissionPolicy and is evaluated by the reconciler and the plugin.

use std::fmt;

use serde::Serialize;

use super::cel_text::{is_set, regex_literal, spec_field_or, string, string_list};
use crate::resources::{
    ClientPolicy, PolicyKind, SecretSource, TokenEndpointAuthMethod, UriRule, UriScheme,
};

/// A rule of `spec.rules`, as the policy names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    RedirectUris,
    PostLogoutRedirectUris,
    GrantTypes,
    ResponseTypes,
    TokenEndpointAuthMethods,
    Scopes,
    RequirePkce,
    MaxClientsPerNamespace,
    IdentityProviderKinds,
    AllowCustomCss,
    SecretSource,
    Approval,
}

impl Rule {
    pub const fn as_str(self) -> &'static str {
        match self {
            Rule::RedirectUris => "redirectUris",
            Rule::PostLogoutRedirectUris => "postLogoutRedirectUris",
            Rule::GrantTypes => "grantTypes",
            Rule::ResponseTypes => "responseTypes",
            Rule::TokenEndpointAuthMethods => "tokenEndpointAuthMethods",
            Rule::Scopes => "scopes",
            Rule::RequirePkce => "requirePkce",
            Rule::MaxClientsPerNamespace => "maxClientsPerNamespace",
            Rule::IdentityProviderKinds => "identityProviderKinds",
            Rule::AllowCustomCss => "allowCustomCss",
            Rule::SecretSource => "secretSource",
            Rule::Approval => "approval",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule's check on one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub rule: Rule,
    pub kind: PolicyKind,
    /// The manifest field the rule constrains.
    pub field: &'static str,
    /// True when the object complies; the variable is `object`, as in admission.
    pub expression: String,
    /// What the rule allows, naming the policy, the rule and the field.
    pub message: String,
}

/// The checks of a policy's rules, in the order of `spec.rules`. The count limit and the
/// approval are not checks of one object: see [`super::CompiledPolicy`].
pub fn checks(policy: &ClientPolicy) -> Vec<Check> {
    let name = kube::ResourceExt::name_any(policy);
    let rules = &policy.spec.rules;
    let mut checks = Vec::new();
    let mut add =
        |rule: Rule, kind: PolicyKind, field: &'static str, expression: String, allows: String| {
            checks.push(Check {
                rule,
                kind,
                field,
                expression,
                message: format!("ClientPolicy {name}, rule {rule}: {field} {allows}"),
            });
        };
    use PolicyKind::{Branding, IdentityProvider, OidcClient};
    if let Some(uris) = &rules.redirect_uris {
        let (expression, allows) = uri_check("redirectUris", uris);
        add(
            Rule::RedirectUris,
            OidcClient,
            "spec.redirectUris",
            expression,
            allows,
        );
    }
    if let Some(uris) = &rules.post_logout_redirect_uris {
        let (expression, allows) = uri_check("postLogoutRedirectUris", uris);
        add(
            Rule::PostLogoutRedirectUris,
            OidcClient,
            "spec.postLogoutRedirectUris",
            expression,
            allows,
        );
    }
    if let Some(grants) = &rules.grant_types {
        let allowed = names(grants);
        add(
            Rule::GrantTypes,
            OidcClient,
            "spec.grantTypes",
            format!(
                "{}.all(g, g in {})",
                spec_field_or("grantTypes", "['authorization_code']"),
                string_list(allowed.iter().map(String::as_str))
            ),
            format!("may only hold {}", listed(&allowed)),
        );
    }
    if let Some(responses) = &rules.response_types {
        let allowed = names(responses);
        add(
            Rule::ResponseTypes,
            OidcClient,
            "spec.responseTypes",
            format!(
                "{}.all(r, r in {})",
                spec_field_or("responseTypes", "['code']"),
                string_list(allowed.iter().map(String::as_str))
            ),
            format!("may only hold {}", listed(&allowed)),
        );
    }
    if let Some(methods) = &rules.token_endpoint_auth_methods {
        let allowed = names(methods);
        add(
            Rule::TokenEndpointAuthMethods,
            OidcClient,
            "spec.tokenEndpointAuthMethod",
            format!(
                "{} in {}",
                auth_method(),
                string_list(allowed.iter().map(String::as_str))
            ),
            format!("must be one of {}", listed(&allowed)),
        );
    }
    if let Some(scopes) = &rules.scopes {
        let allowed = string_list(scopes.iter().map(String::as_str));
        let allows = format!("may only hold {}", listed(scopes));
        for kind in [OidcClient, IdentityProvider] {
            add(
                Rule::Scopes,
                kind,
                "spec.scopes",
                format!(
                    "!{} || object.spec.scopes.all(s, s in {allowed})",
                    is_set("scopes")
                ),
                allows.clone(),
            );
        }
    }
    if rules.require_pkce {
        add(
            Rule::RequirePkce,
            OidcClient,
            "spec.requirePkce",
            format!(
                "!{} || object.spec.requirePkce == true",
                is_set("requirePkce")
            ),
            "must be true (PKCE required)".to_owned(),
        );
    }
    if let Some(kinds) = &rules.identity_provider_kinds {
        let allowed = names(kinds);
        add(
            Rule::IdentityProviderKinds,
            IdentityProvider,
            "spec.kind",
            format!(
                "object.spec.kind in {}",
                string_list(allowed.iter().map(String::as_str))
            ),
            format!("must be one of {}", listed(&allowed)),
        );
    }
    if rules.allow_custom_css == Some(false) {
        add(
            Rule::AllowCustomCss,
            Branding,
            "spec.branding.customCss",
            format!(
                "!{} || !{} || object.spec.branding.customCss == ''",
                is_set("branding"),
                is_set("branding.customCss")
            ),
            "is not allowed: remove it".to_owned(),
        );
    }
    if let Some(source) = rules.secret_source {
        let public = format!("{} in ['none', 'private_key_jwt']", auth_method());
        let (held, allows) = match source {
            SecretSource::Generated => (
                format!(
                    "{} && {} && object.spec.secret.generate == true",
                    is_set("secret"),
                    is_set("secret.generate")
                ),
                "must be generate: true for a confidential client (no team-held secretRef)",
            ),
            SecretSource::SecretRef => (
                format!("{} && {}", is_set("secret"), is_set("secret.secretRef")),
                "must name a team-held secretRef for a confidential client (not generate)",
            ),
        };
        add(
            Rule::SecretSource,
            OidcClient,
            "spec.secret",
            format!("{public} || ({held})"),
            allows.to_owned(),
        );
    }
    checks
}

/// The token endpoint auth method with its default.
fn auth_method() -> String {
    spec_field_or(
        "tokenEndpointAuthMethod",
        &string(&name_of(&TokenEndpointAuthMethod::default())),
    )
}

/// The expression and the description of a URI rule on one list field.
fn uri_check(field: &str, rule: &UriRule) -> (String, String) {
    let general = string(&uri_pattern(rule));
    let loopback = string(LOOPBACK_PATTERN);
    let each = if rule.allow_loopback {
        format!("u.matches({loopback}) || u.matches({general})")
    } else if hosts_exclude_loopback(&rule.hosts) {
        // No listed host can be a loopback host, so the general pattern refuses loopback by
        // itself: matching every URI against the loopback pattern too would only cost (about a
        // fifth of what the API server lets the check cost, with 50 long URIs).
        format!("u.matches({general})")
    } else {
        format!("!u.matches({loopback}) && u.matches({general})")
    };
    let expression = format!("!{} || object.spec.{field}.all(u, {each})", is_set(field));
    (expression, describe_uris(rule))
}

/// The patterns the URI rules generate that would not mean the same to the API server (Go's
/// RE2) and to the reconciler, by the rule's field: none, as they are built from escaped
/// literals and classes both dialects read alike; checked all the same, so that a change here
/// cannot make the two disagree unseen.
pub(super) fn pattern_problems(policy: &ClientPolicy) -> Vec<(String, String)> {
    let rules = &policy.spec.rules;
    let mut problems = Vec::new();
    for (field, rule) in [
        ("redirectUris", &rules.redirect_uris),
        ("postLogoutRedirectUris", &rules.post_logout_redirect_uris),
    ] {
        let Some(rule) = rule else { continue };
        for pattern in [LOOPBACK_PATTERN.to_owned(), uri_pattern(rule)] {
            let problem = match crate::re2::translate(&pattern) {
                Err(error) => Some(error),
                Ok(found) if !found.differs.is_empty() => {
                    Some(format!("it uses {}", found.differs.join(", ")))
                }
                Ok(_) => None,
            };
            if let Some(problem) = problem {
                problems.push((format!("spec.rules.{field}"), problem));
            }
        }
    }
    problems
}

/// Whether no URI the general pattern allows on these hosts can have a loopback host: the list
/// is not empty (any host, loopback included, when it is) and no host is `localhost` or
/// `127.0.0.1` or a `*.` domain below which `127.0.0.1` is a name (`*.0.0.1`, `*.0.1`, `*.1`).
/// A host is matched whole, between `://` and a port, a path or the end, and `[::1]` is no host
/// a rule can list.
fn hosts_exclude_loopback(hosts: &[String]) -> bool {
    !hosts.is_empty()
        && hosts.iter().all(|host| {
            let host = host.to_ascii_lowercase();
            match host.strip_prefix("*.") {
                Some(domain) => !"127.0.0.1".ends_with(&format!(".{domain}")),
                None => host != "localhost" && host != "127.0.0.1",
            }
        })
}

/// A loopback redirect URI (RFC 8252, section 7.3).
const LOOPBACK_PATTERN: &str =
    r"^[a-zA-Z][a-zA-Z0-9+.-]*://(?i:127\.0\.0\.1|\[::1\]|localhost)(:[0-9]{1,5})?([/?#].*)?$";

/// The URIs a rule allows on hosts other than loopback.
fn uri_pattern(rule: &UriRule) -> String {
    let schemes: Vec<&str> = if rule.schemes.is_empty() {
        vec![UriScheme::Https.as_str()]
    } else {
        rule.schemes.iter().map(|s| s.as_str()).collect()
    };
    let hosts = if rule.hosts.is_empty() {
        r"[^/?#@:\[\]]+|\[[0-9a-fA-F:.]+\]".to_owned()
    } else {
        rule.hosts
            .iter()
            .map(|host| match host.strip_prefix("*.") {
                Some(domain) => format!(r"[a-z0-9-]+(\.[a-z0-9-]+)*\.{}", regex_literal(domain)),
                None => regex_literal(host),
            })
            .collect::<Vec<_>>()
            .join("|")
    };
    let paths = if rule.path_prefixes.is_empty() {
        "([/?#].*)?".to_owned()
    } else {
        let prefixes: Vec<String> = rule
            .path_prefixes
            .iter()
            .map(|prefix| {
                let literal = regex_literal(prefix);
                if prefix.ends_with('/') {
                    format!("{literal}.*")
                } else {
                    format!("{literal}([/?#].*)?")
                }
            })
            .collect();
        format!("({})", prefixes.join("|"))
    };
    format!(
        "^({})://(?i:{hosts})(:[0-9]{{1,5}})?{paths}$",
        schemes.join("|")
    )
}

fn describe_uris(rule: &UriRule) -> String {
    let schemes: Vec<String> = if rule.schemes.is_empty() {
        vec!["https".to_owned()]
    } else {
        rule.schemes.iter().map(|s| s.as_str().to_owned()).collect()
    };
    let mut text = format!("may only hold {} URIs", schemes.join(" or "));
    if !rule.hosts.is_empty() {
        text.push_str(&format!(" on hosts {}", rule.hosts.join(", ")));
    }
    if !rule.path_prefixes.is_empty() {
        text.push_str(&format!(" under paths {}", rule.path_prefixes.join(", ")));
    }
    text.push_str(if rule.allow_loopback {
        "; loopback (http://127.0.0.1, [::1], localhost) allowed"
    } else {
        "; no loopback hosts"
    });
    text
}

/// The wire names of enum values, as manifests spell them.
fn names<T: Serialize>(values: &[T]) -> Vec<String> {
    values.iter().map(name_of).collect()
}

fn name_of<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::new(),
    }
}

fn listed(values: &[String]) -> String {
    if values.is_empty() {
        "nothing".to_owned()
    } else {
        values.join(", ")
    }
}
