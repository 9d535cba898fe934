//! `diagnose -f FILE`: checks manifests before they are applied, the way `istioctl analyze` checks
//! local files against a live cluster. Parsing ([`parse`]) and every check are pure; the caller
//! gathers the cluster facts (Organizations, the published grant, Secrets) in between.

pub mod parse;
pub mod policy;
pub mod sources;

use std::collections::BTreeMap;

use nauthera_shared::catalog::Reason;
use nauthera_shared::control_plane::ControlPlaneState;
use serde::Serialize;
use serde_json::Value;

use self::parse::{ParsedDocument, PolicyCompiled};
use self::policy::ManifestPolicies;
use super::check_status::CheckStatus;
use super::policy_check::{Moment, policy_findings};
use crate::cli::kinds::Kind;
use crate::cluster::facts::SecretFacts;
use crate::model::grant_check::{self, GrantCheck, ReportedGrants, entry_yaml};
use crate::model::policies::{BrokenPolicy, PolicyOutcome};
use crate::model::view::{OrganizationDirectory, ResourceView, SecretUse};

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestCheck {
    /// `schema`, `rules`, `issuer`, `grant`, `secret`.
    pub name: &'static str,
    pub status: CheckStatus,
    pub findings: Vec<String>,
}

impl ManifestCheck {
    /// Failed with `problems` as its findings; passed when there are none.
    fn failed_by(name: &'static str, problems: &[String]) -> ManifestCheck {
        ManifestCheck {
            name,
            status: if problems.is_empty() {
                CheckStatus::Passed
            } else {
                CheckStatus::Failed
            },
            findings: problems.to_vec(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestReport {
    pub file: String,
    pub document: usize,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub checks: Vec<ManifestCheck>,
    /// The ClientPolicies' verdicts behind the `policy` check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyOutcome>,
    pub attention: bool,
}

/// The report on a ClientPolicy of the files: its schema, and whether the reconciler compiles it
/// or refuses it (`PolicyRefused`, with the cause and the field).
fn check_client_policy(
    parsed: &ParsedDocument,
    compiled: &Result<PolicyCompiled, BrokenPolicy>,
) -> Vec<ManifestCheck> {
    let schema = ManifestCheck::failed_by("schema", &parsed.admission);
    let compile = match compiled {
        Ok(compiled) => {
            let findings = vec![match &compiled.admission_policy {
                Some(name) => format!(
                    "the reconciler compiles it and generates the ValidatingAdmissionPolicy \
                     {name}: kubectl apply checks {}",
                    compiled.checks.join(", ")
                ),
                None => "the reconciler compiles it; its rules (a namespace limit, approvals) \
                         need more than one object, so the reconciler enforces them alone"
                    .to_owned(),
            }];
            ManifestCheck {
                name: "compile",
                status: CheckStatus::Passed,
                findings,
            }
        }
        Err(broken) => ManifestCheck {
            name: "compile",
            status: CheckStatus::Failed,
            findings: vec![format!(
                "the reconciler refuses it ({}, cause {}): {}; it would enforce nothing until \
                 fixed",
                broken.reason, broken.cause, broken.problem
            )],
        },
    };
    vec![schema, compile]
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
    /// Brandings of the files and of the cluster, by (namespace, name).
    pub brandings: BTreeMap<(String, String), BrandingStanding>,
    /// Checked without the cluster.
    pub local: bool,
    /// The ClientPolicies and what judging the manifests against them needs.
    pub policies: ManifestPolicies,
}

/// Where a Branding a client names stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BrandingStanding {
    /// The files declare it: applied together, the client waits for it to register.
    Declared,
    /// In the cluster, Registered.
    Registered,
    /// In the cluster, not Registered (its reason, if it has one yet).
    NotRegistered(Option<Reason>),
}

/// An OIDCClient's `spec.brandingRef`: a Branding the files declare or the cluster holds
/// registered is fine; one that is not registered yet makes the client wait; a missing one makes
/// the server refuse it.
fn branding_check(namespace: &str, branding: &str, context: &ManifestContext) -> ManifestCheck {
    let standing = context
        .brandings
        .get(&(namespace.to_owned(), branding.to_owned()));
    let (status, finding) = match standing {
        Some(BrandingStanding::Declared) => (
            CheckStatus::Passed,
            format!(
                "Branding {branding} is declared in the files: the client waits until it is \
                 registered, then is written"
            ),
        ),
        Some(BrandingStanding::Registered) => (
            CheckStatus::Passed,
            format!("Branding {branding} is registered"),
        ),
        Some(BrandingStanding::NotRegistered(reason)) => (
            CheckStatus::Warning,
            format!(
                "Branding {branding} exists but is not registered ({}): the client waits \
                 (Pending, cause reference_not_ready) until it is; see kubectl nauthera \
                 diagnose branding/{branding} -n {namespace}",
                reason.map_or("not reconciled yet", Reason::as_str)
            ),
        ),
        None if context.local => (
            CheckStatus::Info,
            format!("Branding {branding} is not in the files; the cluster was not asked (--local)"),
        ),
        None => (
            CheckStatus::Failed,
            format!(
                "no Branding {branding} in namespace {namespace}, in the files or the cluster: \
                 the client waits as Pending (reference_not_ready) and nothing is sent until it \
                 is applied and Registered; apply the Branding with it, or remove \
                 spec.brandingRef"
            ),
        ),
    };
    ManifestCheck {
        name: "branding",
        status,
        findings: vec![finding],
    }
}

/// Whether the API server would take the document as a resource of its kind.
fn schema_check(parsed: &ParsedDocument) -> ManifestCheck {
    match (&parsed.kind, &parsed.view) {
        (None, _) => ManifestCheck {
            name: "schema",
            status: CheckStatus::Info,
            findings: vec![format!(
                "{} {} is not a nauthera resource; skipped",
                parsed.api_version, parsed.kind_name
            )],
        },
        (Some(_), _) if !parsed.admission.is_empty() => {
            ManifestCheck::failed_by("schema", &parsed.admission)
        }
        (Some(_), Err(error)) => ManifestCheck {
            name: "schema",
            status: CheckStatus::Failed,
            findings: vec![format!(
                "does not match the {} schema: {error}",
                parsed.kind_name
            )],
        },
        (Some(_), Ok(_)) => ManifestCheck::failed_by("schema", &[]),
    }
}

/// Every check of one parsed document.
pub fn check_document(parsed: &ParsedDocument, context: &ManifestContext) -> ManifestReport {
    if let Some(compiled) = &parsed.client_policy {
        let checks = check_client_policy(parsed, compiled);
        let attention = checks.iter().any(|check| check.status.needs_attention());
        return ManifestReport {
            file: parsed.file.clone(),
            document: parsed.index,
            api_version: parsed.api_version.clone(),
            kind: parsed.kind_name.clone(),
            namespace: String::new(),
            name: parsed.name.clone(),
            checks,
            policy: None,
            attention,
        };
    }
    let mut checks = vec![schema_check(parsed)];
    let mut policy_outcome = None;
    if let Ok(view) = &parsed.view {
        checks.push(ManifestCheck::failed_by("rules", &parsed.rule_violations));
        let organization = context.organizations.organization_of(view);
        checks.push(issuer_check(view, organization.as_deref(), context));
        if !context.local {
            checks.push(grant_manifest_check(view, organization.as_deref(), context));
        }
        if let Some(check) = secret_check(view, context) {
            checks.push(check);
        }
        if let Some(branding) = &parsed.branding_ref {
            checks.push(branding_check(&view.namespace, branding, context));
        }
        policy_outcome = policy::outcome(parsed, view, &context.policies);
        if let Some(outcome) = &policy_outcome {
            let (status, findings) = policy_findings(outcome, Moment::BeforeApply);
            checks.push(ManifestCheck {
                name: "policy",
                status,
                findings,
            });
        }
    }
    let attention = checks.iter().any(|check| check.status.needs_attention());
    ManifestReport {
        file: parsed.file.clone(),
        document: parsed.index,
        api_version: parsed.api_version.clone(),
        kind: parsed.kind_name.clone(),
        namespace: parsed.namespace.clone(),
        name: parsed.name.clone(),
        checks,
        policy: policy_outcome,
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
    if view.observes() {
        // Nothing is delivered or sent while the object is only observed; the Secret matters
        // from the handover on.
        return Some(ManifestCheck {
            name: "secret",
            status: CheckStatus::Passed,
            findings: vec![format!(
                "managementPolicy: Observe: the reconciler writes no Secret and sends none; \
                 Secret {name} matters once the manifest says Manage"
            )],
        });
    }
    let key = (view.namespace.clone(), name.to_owned());
    let (status, finding) = match context.file_secrets.get(&key) {
        Some(keys) => declared_secret(view, keys)?,
        None => match context.secrets.get(&key)? {
            Ok(secret) => cluster_secret(view, secret)?,
            Err(problem) => (CheckStatus::Warning, problem.clone()),
        },
    };
    Some(ManifestCheck {
        name: "secret",
        status,
        findings: vec![finding],
    })
}

/// The resource's Secret as the files declare it, with its key names.
fn declared_secret(view: &ResourceView, keys: &[String]) -> Option<(CheckStatus, String)> {
    Some(match &view.secret {
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
    })
}

/// The resource's Secret as the cluster holds it.
fn cluster_secret(view: &ResourceView, secret: &SecretFacts) -> Option<(CheckStatus, String)> {
    Some(match &view.secret {
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
                "Secret {name} does not exist yet: the resource waits as Pending \
                 (reference_not_ready) and nothing is sent until it is created"
            ),
        ),
        SecretUse::Referenced { name, key } if !secret.keys.contains(key) => (
            CheckStatus::Warning,
            format!(
                "Secret {name} has no key {key} yet: the resource waits as Pending \
                 (reference_not_ready) and nothing is sent until the key is there"
            ),
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
    })
}

#[cfg(test)]
mod tests;
