//! `diagnose -f FILE`: checks manifests before they are applied, the way `istioctl analyze` checks
//! local files against a live cluster. Parsing and every check are pure; the caller gathers the
//! cluster facts (Organizations, the published grant, Secrets) in between.

use std::collections::BTreeMap;

use nauthera_shared::branding;
use nauthera_shared::control_plane::ControlPlaneState;
use nauthera_shared::resources::{
    Branding, GrantType, IdentityProvider, IdentityProviderKind, OIDCClient, Organization,
    TokenEndpointAuthMethod,
};
use serde::Serialize;
use serde_json::Value;

use super::evaluate::CheckStatus;
use crate::facts::SecretFacts;
use crate::grant_check::{self, GrantCheck, ReportedGrants, entry_yaml};
use crate::kinds::Kind;
use crate::view::{OrganizationDirectory, ResourceView, SecretUse};

/// One document of the file, parsed as far as it goes.
#[derive(Clone, Debug)]
pub struct ParsedDocument {
    /// 1-based position in the file.
    pub index: usize,
    pub api_version: String,
    pub kind_name: String,
    pub kind: Option<Kind>,
    pub name: String,
    pub namespace: String,
    /// The typed resource, or why it does not deserialize.
    pub view: Result<ResourceView, String>,
    pub unknown_fields: Vec<String>,
    pub rule_violations: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestCheck {
    /// `schema`, `rules`, `issuer`, `grant`, `secret`.
    pub name: &'static str,
    pub status: CheckStatus,
    pub findings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestReport {
    pub document: usize,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub checks: Vec<ManifestCheck>,
    pub attention: bool,
}

/// The documents of a YAML stream (a `List` is opened into its items); empty documents are
/// skipped.
pub fn split_documents(text: &str) -> Result<Vec<Value>, String> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|error| format!("the file is not valid YAML: {error}"))?;
    let mut out = Vec::new();
    for document in documents {
        match document {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                out.extend(
                    map.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Parses one document into a typed resource and checks its schema and rules.
pub fn parse_document(index: usize, document: &Value, default_namespace: &str) -> ParsedDocument {
    let text = |pointer: &str| {
        document
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let api_version = text("/apiVersion");
    let kind_name = text("/kind");
    let name = text("/metadata/name");
    let namespace = Some(text("/metadata/namespace"))
        .filter(|namespace| !namespace.is_empty())
        .unwrap_or_else(|| default_namespace.to_owned());
    let nauthera =
        api_version == format!("{}/{}", nauthera_shared::GROUP, nauthera_shared::VERSION);
    let kind = Kind::ALL
        .into_iter()
        .find(|kind| nauthera && kind.as_str() == kind_name);
    let mut parsed = ParsedDocument {
        index,
        api_version,
        kind_name,
        kind,
        name,
        namespace: namespace.clone(),
        view: Err(String::new()),
        unknown_fields: Vec::new(),
        rule_violations: Vec::new(),
    };
    let Some(kind) = kind else {
        parsed.view = Err("not a nauthera resource".to_owned());
        return parsed;
    };
    let mut document = document.clone();
    if let Some(metadata) = document.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("namespace".to_owned(), Value::String(namespace));
    }
    let typed = match kind {
        Kind::OIDCClient => typed::<OIDCClient>(&document).map(|(client, back)| {
            parsed.rule_violations = client_rules(&client);
            (ResourceView::of_client(&client), back)
        }),
        Kind::Branding => typed::<Branding>(&document).map(|(branding, back)| {
            parsed.rule_violations = branding::encode(&branding.spec.branding)
                .err()
                .map(|error| vec![format!("spec.branding.{error}")])
                .unwrap_or_default();
            (ResourceView::of_branding(&branding), back)
        }),
        Kind::IdentityProvider => typed::<IdentityProvider>(&document).map(|(provider, back)| {
            parsed.rule_violations = identity_provider_rules(&provider);
            (ResourceView::of_identity_provider(&provider), back)
        }),
        Kind::Organization => typed::<Organization>(&document).map(|(organization, back)| {
            parsed.rule_violations = organization_rules(&organization);
            (ResourceView::of_organization(&organization), back)
        }),
    };
    match typed {
        Ok((view, back)) => {
            if view.name.is_empty() {
                parsed
                    .rule_violations
                    .push("metadata.name is required".to_owned());
            }
            parsed.unknown_fields = unknown_fields(
                document.get("spec").unwrap_or(&Value::Null),
                back.get("spec").unwrap_or(&Value::Null),
                "spec",
            );
            parsed.view = Ok(view);
        }
        Err(error) => parsed.view = Err(error),
    }
    parsed
}

fn typed<K>(document: &Value) -> Result<(K, Value), String>
where
    K: serde::de::DeserializeOwned + Serialize,
{
    let typed: K = serde_json::from_value(document.clone()).map_err(|error| error.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|error| error.to_string())?;
    Ok((typed, back))
}

/// Keys of `original` that did not survive a round trip through the typed resource: fields the
/// CRD does not know, which the API server would prune (or refuse with strict validation).
pub fn unknown_fields(original: &Value, round_trip: &Value, path: &str) -> Vec<String> {
    match (original, round_trip) {
        (Value::Object(original), Value::Object(back)) => original
            .iter()
            .flat_map(|(key, value)| {
                let child = format!("{path}.{key}");
                match back.get(key) {
                    None if !value.is_null() => vec![child],
                    None => Vec::new(),
                    Some(back_value) => unknown_fields(value, back_value, &child),
                }
            })
            .collect(),
        (Value::Array(original), Value::Array(back)) => original
            .iter()
            .zip(back)
            .enumerate()
            .flat_map(|(index, (value, back_value))| {
                unknown_fields(value, back_value, &format!("{path}[{index}]"))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The CRD's validation rules and patterns of OIDCClient, checked locally.
pub fn client_rules(client: &OIDCClient) -> Vec<String> {
    let spec = &client.spec;
    let mut violations = Vec::new();
    issuer_rule(&spec.issuer, &mut violations);
    let has_secret = spec
        .secret
        .as_ref()
        .is_some_and(|secret| secret.generate || secret.secret_ref.is_some());
    match spec.token_endpoint_auth_method {
        TokenEndpointAuthMethod::ClientSecretBasic | TokenEndpointAuthMethod::ClientSecretPost
            if !has_secret =>
        {
            violations.push(
                "a confidential client (tokenEndpointAuthMethod client_secret_basic or \
                 client_secret_post) needs spec.secret.generate: true or spec.secret.secretRef"
                    .to_owned(),
            )
        }
        TokenEndpointAuthMethod::None if has_secret => violations.push(
            "a public client (tokenEndpointAuthMethod none) has no secret: remove spec.secret"
                .to_owned(),
        ),
        _ => {}
    }
    if spec.grant_types.contains(&GrantType::AuthorizationCode) && spec.redirect_uris.is_empty() {
        violations.push(
            "the authorization_code grant needs at least one entry in spec.redirectUris".to_owned(),
        );
    }
    if let Some(secret) = &spec.secret {
        if secret.generate && secret.secret_ref.is_some() {
            violations.push(
                "spec.secret.generate and spec.secret.secretRef are exclusive: choose one"
                    .to_owned(),
            );
        }
        if secret.secret_name.is_some() && !secret.generate {
            violations.push(
                "spec.secret.secretName names the Secret a generated secret is delivered into: \
                 it needs spec.secret.generate: true"
                    .to_owned(),
            );
        }
    }
    for (field, uris) in [
        ("spec.redirectUris", &spec.redirect_uris),
        (
            "spec.postLogoutRedirectUris",
            &spec.post_logout_redirect_uris,
        ),
    ] {
        for (index, uri) in uris.iter().enumerate() {
            if !redirect_uri_ok(uri) {
                violations.push(format!(
                    "{field}[{index}] `{uri}` must be https://, or http:// on 127.0.0.1, [::1] or \
                     localhost"
                ));
            }
        }
    }
    for (index, scope) in spec.scopes.iter().enumerate() {
        let valid = !scope.is_empty()
            && scope
                .chars()
                .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\');
        if !valid {
            violations.push(format!(
                "spec.scopes[{index}] `{scope}` is not a scope token (printable ASCII, no spaces, \
                 quotes or backslashes)"
            ));
        }
    }
    violations
}

fn identity_provider_rules(provider: &IdentityProvider) -> Vec<String> {
    let spec = &provider.spec;
    let mut violations = Vec::new();
    issuer_rule(&spec.issuer, &mut violations);
    if matches!(
        spec.kind,
        IdentityProviderKind::Oidc | IdentityProviderKind::Saml
    ) && spec.upstream_url.is_none()
    {
        violations.push(
            "an oidc or saml provider needs spec.upstreamUrl (the upstream issuer or metadata URL)"
                .to_owned(),
        );
    }
    if spec.kind != IdentityProviderKind::Saml
        && (spec.client_id.is_none() || spec.secret_ref.is_none())
    {
        violations.push(
            "an OAuth provider needs spec.clientId and spec.secretRef (its upstream client secret)"
                .to_owned(),
        );
    }
    violations
}

fn organization_rules(organization: &Organization) -> Vec<String> {
    let spec = &organization.spec;
    let mut violations = Vec::new();
    issuer_rule(&spec.issuer, &mut violations);
    let slug_ok = !spec.slug.is_empty()
        && spec.slug.len() <= 63
        && spec
            .slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !spec.slug.starts_with('-')
        && !spec.slug.ends_with('-');
    if !slug_ok {
        violations.push(format!(
            "spec.slug `{}` must be lower-case letters, digits and dashes (at most 63), not \
             starting or ending with a dash",
            spec.slug
        ));
    }
    if let Some(content) = &spec.branding
        && let Err(error) = branding::encode(content)
    {
        violations.push(format!("spec.branding.{error}"));
    }
    violations
}

fn issuer_rule(issuer: &str, violations: &mut Vec<String>) {
    let valid = issuer.strip_prefix("https://").is_some_and(|rest| {
        !rest.is_empty()
            && !rest.starts_with('/')
            && !rest.contains(|c: char| c.is_whitespace() || c == '?' || c == '#')
    });
    if !valid {
        violations.push(format!(
            "spec.issuer `{issuer}` must be an https:// URL without query or fragment"
        ));
    }
}

fn redirect_uri_ok(uri: &str) -> bool {
    if uri.contains(|c: char| c.is_whitespace() || c == '#') {
        return false;
    }
    if let Some(rest) = uri.strip_prefix("https://") {
        return !rest.is_empty() && !rest.starts_with('/');
    }
    let Some(rest) = uri.strip_prefix("http://") else {
        return false;
    };
    let host_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..host_end];
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if !authority.ends_with(']') => {
            if port.is_empty() || port.len() > 5 || !port.chars().all(|c| c.is_ascii_digit()) {
                return false;
            }
            host
        }
        _ => authority,
    };
    matches!(host, "127.0.0.1" | "[::1]" | "localhost")
}

/// What the checks compare a manifest against.
#[derive(Clone, Debug, Default)]
pub struct ManifestContext {
    /// Organizations of the cluster and of the files.
    pub organizations: OrganizationDirectory,
    /// The slugs the reported grants name, to help when no Organization resource is known.
    pub state: Option<ControlPlaneState>,
    /// Secrets by (namespace, name).
    pub secrets: BTreeMap<(String, String), Result<SecretFacts, String>>,
    /// Secrets the files themselves declare, by (namespace, name), with their key names.
    pub file_secrets: BTreeMap<(String, String), Vec<String>>,
    /// Checked without the cluster.
    pub local: bool,
}

/// Every check of one parsed document.
pub fn check_document(parsed: &ParsedDocument, context: &ManifestContext) -> ManifestReport {
    let mut checks = Vec::new();
    let schema = match (&parsed.kind, &parsed.view) {
        (None, _) => ManifestCheck {
            name: "schema",
            status: CheckStatus::Info,
            findings: vec![format!(
                "{} {} is not a nauthera resource; skipped",
                parsed.api_version, parsed.kind_name
            )],
        },
        (Some(_), Err(error)) => ManifestCheck {
            name: "schema",
            status: CheckStatus::Failed,
            findings: vec![format!(
                "does not match the {} schema: {error}",
                parsed.kind_name
            )],
        },
        (Some(_), Ok(_)) if !parsed.unknown_fields.is_empty() => ManifestCheck {
            name: "schema",
            status: CheckStatus::Failed,
            findings: parsed
                .unknown_fields
                .iter()
                .map(|field| {
                    format!(
                        "unknown field {field}: the API server would drop it; check its spelling"
                    )
                })
                .collect(),
        },
        (Some(_), Ok(_)) => ManifestCheck {
            name: "schema",
            status: CheckStatus::Passed,
            findings: Vec::new(),
        },
    };
    checks.push(schema);
    if let Ok(view) = &parsed.view {
        checks.push(if parsed.rule_violations.is_empty() {
            ManifestCheck {
                name: "rules",
                status: CheckStatus::Passed,
                findings: Vec::new(),
            }
        } else {
            ManifestCheck {
                name: "rules",
                status: CheckStatus::Failed,
                findings: parsed.rule_violations.clone(),
            }
        });
        let organization = context.organizations.organization_of(view);
        checks.push(issuer_check(view, organization.as_deref(), context));
        if !context.local {
            checks.push(grant_manifest_check(view, organization.as_deref(), context));
        }
        if let Some(check) = secret_check(view, context) {
            checks.push(check);
        }
    }
    let attention = checks.iter().any(|check| check.status.needs_attention());
    ManifestReport {
        document: parsed.index,
        api_version: parsed.api_version.clone(),
        kind: parsed.kind_name.clone(),
        namespace: parsed.namespace.clone(),
        name: parsed.name.clone(),
        checks,
        attention,
    }
}

fn issuer_check(
    view: &ResourceView,
    organization: Option<&str>,
    context: &ManifestContext,
) -> ManifestCheck {
    if view.kind == Kind::Organization {
        return ManifestCheck {
            name: "issuer",
            status: CheckStatus::Passed,
            findings: vec![format!(
                "declares organization {}",
                organization.unwrap_or("-")
            )],
        };
    }
    match organization {
        Some(slug) => ManifestCheck {
            name: "issuer",
            status: CheckStatus::Passed,
            findings: vec![format!("{} is served by organization {slug}", view.issuer)],
        },
        None => {
            let granted: Vec<String> = context
                .state
                .iter()
                .flat_map(|state| state.grants.iter())
                .flat_map(|grant| grant.organizations.iter().cloned())
                .collect();
            let mut findings = vec![format!(
                "no Organization resource {}declares issuer {}; the server answers \
                 UNKNOWN_ISSUER unless an organization created outside Kubernetes serves it",
                if context.local { "in the files " } else { "" },
                view.issuer
            )];
            if !granted.is_empty() {
                findings.push(format!(
                    "the reconciler's grant names organizations: {}",
                    granted.join(", ")
                ));
            }
            ManifestCheck {
                name: "issuer",
                status: CheckStatus::Warning,
                findings,
            }
        }
    }
}

fn grant_manifest_check(
    view: &ResourceView,
    organization: Option<&str>,
    context: &ManifestContext,
) -> ManifestCheck {
    match grant_check::check(
        ReportedGrants::from_state(context.state.as_ref()),
        view.kind.operation(),
        organization,
        &view.namespace,
    ) {
        GrantCheck::Covered => ManifestCheck {
            name: "grant",
            status: CheckStatus::Passed,
            findings: vec![format!(
                "the reconciler's grant covers {} in organization {} and namespace {}",
                view.kind.operation(),
                organization.unwrap_or("-"),
                view.namespace
            )],
        },
        GrantCheck::Unknown { why } => ManifestCheck {
            name: "grant",
            status: CheckStatus::Warning,
            findings: vec![format!("cannot check the grant: {why}")],
        },
        GrantCheck::Outside {
            reason,
            cause,
            proposed_entry,
        } => {
            let mut findings = vec![
                format!("the server would refuse it: {reason}: {cause}"),
                "this allowedClients entry would cover it:".to_owned(),
            ];
            findings.extend(
                entry_yaml(&proposed_entry)
                    .lines()
                    .map(|line| format!("  {line}")),
            );
            ManifestCheck {
                name: "grant",
                status: CheckStatus::Failed,
                findings,
            }
        }
    }
}

/// The Secrets a file declares (`v1` `Secret`), by (namespace, name), with their key names.
pub fn declared_secrets(
    documents: &[Value],
    default_namespace: &str,
) -> BTreeMap<(String, String), Vec<String>> {
    documents
        .iter()
        .filter(|document| {
            document.get("apiVersion").and_then(Value::as_str) == Some("v1")
                && document.get("kind").and_then(Value::as_str) == Some("Secret")
        })
        .filter_map(|document| {
            let name = document.pointer("/metadata/name")?.as_str()?.to_owned();
            let namespace = document
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(default_namespace)
                .to_owned();
            let mut keys: Vec<String> = ["data", "stringData"]
                .iter()
                .filter_map(|field| document.get(*field)?.as_object())
                .flat_map(|map| map.keys().cloned())
                .collect();
            keys.sort();
            keys.dedup();
            Some(((namespace, name), keys))
        })
        .collect()
}

fn secret_check(view: &ResourceView, context: &ManifestContext) -> Option<ManifestCheck> {
    let name = view.secret.name()?;
    let key = (view.namespace.clone(), name.to_owned());
    if let Some(keys) = context.file_secrets.get(&key) {
        let (status, finding) = match &view.secret {
            SecretUse::Generated { name } => (
                CheckStatus::Failed,
                format!(
                    "the files also declare Secret {name}, which {} would not own: the \
                     reconciler will not write the generated secret into it; drop it from the \
                     files or choose another spec.secret.secretName",
                    view.reference()
                ),
            ),
            SecretUse::Referenced { name, key } if keys.contains(key) => (
                CheckStatus::Passed,
                format!("Secret {name} is declared in the files with key {key}"),
            ),
            SecretUse::Referenced { name, key } => (
                CheckStatus::Failed,
                format!("Secret {name} is declared in the files without key {key}"),
            ),
            SecretUse::None => return None,
        };
        return Some(ManifestCheck {
            name: "secret",
            status,
            findings: vec![finding],
        });
    }
    let facts = context.secrets.get(&key)?;
    let secret = match facts {
        Ok(secret) => secret,
        Err(problem) => {
            return Some(ManifestCheck {
                name: "secret",
                status: CheckStatus::Warning,
                findings: vec![problem.clone()],
            });
        }
    };
    let (status, finding) = match &view.secret {
        SecretUse::Generated { name } if !secret.exists => (
            CheckStatus::Passed,
            format!("Secret {name} is free: the reconciler will create it"),
        ),
        SecretUse::Generated { name } if secret.owned_by(view.kind, &view.name, &view.uid) => (
            CheckStatus::Passed,
            format!("Secret {name} is already owned by {}", view.reference()),
        ),
        SecretUse::Generated { name } => (
            CheckStatus::Failed,
            format!(
                "Secret {name} exists and is not owned by {}: the reconciler will not write over \
                 it (SecretUndeliverable); choose another spec.secret.secretName",
                view.reference()
            ),
        ),
        SecretUse::Referenced { name, .. } if !secret.exists => (
            CheckStatus::Warning,
            format!(
                "Secret {name} does not exist yet; create it before applying (else SecretRefUnavailable)"
            ),
        ),
        SecretUse::Referenced { name, key } if !secret.keys.contains(key) => (
            CheckStatus::Failed,
            format!("Secret {name} has no key {key}"),
        ),
        SecretUse::Referenced { name, key } if secret.empty_keys.contains(key) => (
            CheckStatus::Failed,
            format!("key {key} of Secret {name} is empty; put the secret's value in it"),
        ),
        SecretUse::Referenced { name, key } => (
            CheckStatus::Passed,
            format!("Secret {name} exists and holds key {key}"),
        ),
        SecretUse::None => return None,
    };
    Some(ManifestCheck {
        name: "secret",
        status,
        findings: vec![finding],
    })
}

#[cfg(test)]
mod tests;
