//! `kubectl nauthera diagnose KIND/NAME | --all | -f FILE`.

mod check_status;
mod evaluate;
mod manifest;
mod policy_check;
mod render;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::PathBuf;

use jiff::Timestamp;
use nauthera_shared::access;
use nauthera_shared::catalog::{DiagnoseCheck, Phase, Reason};
use serde::Serialize;

use self::evaluate::{DiagnoseFacts, Diagnosis};
use self::manifest::{ManifestContext, ManifestReport};
use self::policy_check::ApprovalFacts;
use crate::Outcome;
use crate::cli::kinds::{Kind, Target};
use crate::cli::{DiagnoseArgs, GlobalArgs, OutputFormat};
use crate::cluster::control_plane::{ControlPlaneFacts, RECONCILER_NAME};
use crate::cluster::facts;
use crate::cluster::policies::{LiveReads, client_approvals, may_approve};
use crate::cluster::{Cluster, Scope};
use crate::error::CliError;
use crate::model::policies::{self, PolicyOutcome};
use crate::model::view::{OrganizationDirectory, ResourceView, SecretUse};
use crate::output::{self, Painter};
use nauthera_shared::workloads;

/// The document `diagnose -o json|yaml` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DiagnoseReport {
    api_version: &'static str,
    kind: &'static str,
    diagnoses: Vec<Diagnosis>,
    attention: bool,
}

/// The document `diagnose -f -o json|yaml` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestsReport {
    api_version: &'static str,
    kind: &'static str,
    files: Vec<String>,
    documents: Vec<ManifestReport>,
    attention: bool,
}

pub async fn run(global: &GlobalArgs, args: &DiagnoseArgs) -> Result<Outcome, CliError> {
    if !args.file.is_empty() {
        return run_manifests(global, &args.file, args.recursive, args.local).await;
    }
    if args.target.is_none() && !args.all {
        return Err(CliError::Usage(
            "name a resource (diagnose oidcclient/shop), or pass --all or -f FILE".to_owned(),
        ));
    }
    let cluster = Cluster::connect(global).await?;
    let control_plane = ControlPlaneFacts::gather(&cluster, &global.reconciler_namespace).await;
    let views = match &args.target {
        Some(target) => {
            let (kind, name) = Target::parse_named(target)?;
            vec![
                cluster
                    .require_view(kind, &cluster.namespace, &name)
                    .await?,
            ]
        }
        None => {
            let (views, _) = cluster.list_views(&Kind::ALL, &cluster.scope).await?;
            views
                .into_iter()
                .filter(|view| view.phase() != Some(Phase::Registered))
                .collect()
        }
    };
    let organizations = OrganizationDirectory::from_views(&cluster.organizations().await);
    let now = Timestamp::now();
    let mut diagnoses = Vec::new();
    let mut drifted: Option<Vec<ResourceView>> = None;
    let mut policy_reads = LiveReads::default();
    for view in views {
        let needed = needed_checks(&view);
        if needed.contains(&DiagnoseCheck::DriftCount) && drifted.is_none() {
            drifted = Some(all_drifted(&cluster).await);
        }
        let policy = gather_policy(&cluster, &mut policy_reads, &view, &needed).await;
        let mut gathered = gather(
            &cluster,
            &control_plane,
            &organizations,
            view,
            &needed,
            drifted.clone().unwrap_or_default(),
            now,
        )
        .await;
        (gathered.policy, gathered.approvals) = policy;
        diagnoses.push(evaluate::diagnose(&gathered));
    }
    let attention = diagnoses.iter().any(|diagnosis| diagnosis.attention);
    let text = match global.output.format {
        OutputFormat::Table | OutputFormat::Wide => {
            render::render(&diagnoses, Painter::detect(global.color))
        }
        OutputFormat::Name => diagnoses
            .iter()
            .map(|diagnosis| output::resource_name(diagnosis.kind, &diagnosis.name))
            .collect(),
        _ => output::encode(
            &DiagnoseReport {
                api_version: output::REPORT_API_VERSION,
                kind: "DiagnoseReport",
                diagnoses,
                attention,
            },
            &global.output,
        )?,
    };
    output::print(&text)?;
    Ok(Outcome::from_attention(attention))
}

/// The checks the runbook of the resource's reason runs.
fn needed_checks(view: &ResourceView) -> BTreeSet<DiagnoseCheck> {
    view.reason()
        .unwrap_or(Reason::Pending)
        .entry()
        .runbook
        .diagnosis
        .iter()
        .map(|step| step.check)
        .collect()
}

/// Every drifted resource the user may list (all namespaces when allowed).
async fn all_drifted(cluster: &Cluster) -> Vec<ResourceView> {
    let views = match cluster.list_views(&Kind::ALL, &Scope::All).await {
        Ok((views, _)) => views,
        Err(_) => cluster
            .list_views(&Kind::ALL, &cluster.scope)
            .await
            .map(|(views, _)| views)
            .unwrap_or_default(),
    };
    views.into_iter().filter(ResourceView::is_drifted).collect()
}

/// The policies' verdicts and the client's approvals, when the runbook checks them.
async fn gather_policy(
    cluster: &Cluster,
    reads: &mut LiveReads,
    view: &ResourceView,
    needed: &BTreeSet<DiagnoseCheck>,
) -> (Option<PolicyOutcome>, Option<ApprovalFacts>) {
    let rules = needed.contains(&DiagnoseCheck::PolicyRules);
    let approvals =
        if view.kind == Kind::OidcClient && (rules || needed.contains(&DiagnoseCheck::Approvals)) {
            let approvals = client_approvals(cluster, &view.namespace, &view.name).await;
            let may_approve = if needed.contains(&DiagnoseCheck::Approvals) {
                may_approve(cluster, &view.namespace).await
            } else {
                facts::AccessVerdict {
                    verb: "create".to_owned(),
                    allowed: None,
                    detail: "not asked".to_owned(),
                }
            };
            Some(ApprovalFacts {
                approvals,
                may_approve,
            })
        } else {
            None
        };
    let policy = if rules {
        let approved = approvals
            .as_ref()
            .and_then(|facts| facts.approvals.as_ref().ok())
            .map(|list| policies::approved_generations(list, &view.uid))
            .unwrap_or_default();
        reads.judge(cluster, view, &approved).await
    } else {
        None
    };
    (policy, approvals)
}

async fn gather(
    cluster: &Cluster,
    control_plane: &ControlPlaneFacts,
    organizations: &OrganizationDirectory,
    view: ResourceView,
    needed: &BTreeSet<DiagnoseCheck>,
    drifted: Vec<ResourceView>,
    now: Timestamp,
) -> DiagnoseFacts {
    let namespace = view.namespace.clone();
    let secret_name = view.secret.name().map(str::to_owned);
    let wants_secret = needed.contains(&DiagnoseCheck::SecretOwner)
        || needed.contains(&DiagnoseCheck::SecretRefPresent);
    let secret = match (&secret_name, wants_secret) {
        (Some(name), true) => Some(facts::secret(cluster, &namespace, name).await),
        _ => None,
    };
    let access = if needed.contains(&DiagnoseCheck::ReconcilerCanI) {
        let verbs: &[&str] = match view.secret {
            SecretUse::Referenced { .. } => &access::REFERENCED_SECRET_VERBS,
            _ => &access::GENERATED_SECRET_VERBS,
        };
        let user = format!(
            "system:serviceaccount:{}:{RECONCILER_NAME}",
            control_plane.namespace
        );
        facts::can_i_secrets(cluster, &user, &control_plane.namespace, &namespace, verbs).await
    } else {
        Vec::new()
    };
    let events = if needed.contains(&DiagnoseCheck::Events) {
        facts::events(cluster, view.kind, &namespace, &view.name).await
    } else {
        Ok(Vec::new())
    };
    let consumers = match (
        &secret_name,
        needed.contains(&DiagnoseCheck::SecretConsumers),
    ) {
        (Some(name), true) => facts::pod_templates(cluster, &namespace)
            .await
            .map(|templates| workloads::consumers(&templates, name)),
        _ => Ok(Vec::new()),
    };
    let logs = if needed.contains(&DiagnoseCheck::ReconcilerLogs) {
        let leader = control_plane
            .state
            .as_ref()
            .map(|state| state.leader.as_str());
        facts::reconciler_log_lines(
            cluster,
            &control_plane.namespace,
            leader,
            view.kind,
            &namespace,
            &view.name,
        )
        .await
    } else {
        Ok(Vec::new())
    };
    DiagnoseFacts {
        logs,
        organization: organizations.organization_of(&view),
        view,
        control_plane: control_plane.clone(),
        secret,
        access,
        events,
        consumers,
        drifted,
        policy: None,
        approvals: None,
        now,
    }
}

async fn run_manifests(
    global: &GlobalArgs,
    paths: &[PathBuf],
    recursive: bool,
    local: bool,
) -> Result<Outcome, CliError> {
    let sources = manifest::sources::read_sources(paths, recursive)?;
    let documents = split_sources(&sources)?;
    let cluster = if local {
        None
    } else {
        Some(Cluster::connect(global).await?)
    };
    let default_namespace = match (&cluster, &global.namespace) {
        (_, Some(namespace)) => namespace.clone(),
        (Some(cluster), None) => cluster.namespace.clone(),
        (None, None) => "default".to_owned(),
    };
    let parsed: Vec<_> = documents
        .iter()
        .enumerate()
        .map(
            |(position, (file, index, document))| manifest::parse::ParsedDocument {
                position,
                ..manifest::parse::parse_document(file, *index, document, &default_namespace)
            },
        )
        .collect();
    let documents: Vec<serde_json::Value> = documents
        .into_iter()
        .map(|(_, _, document)| document)
        .collect();
    let mut context = declared_context(&parsed, &documents, &default_namespace, local);
    let mut organizations: Vec<ResourceView> = parsed
        .iter()
        .filter_map(|document| document.view.as_ref().ok())
        .filter(|view| view.kind == Kind::Organization)
        .cloned()
        .collect();
    if let Some(cluster) = &cluster {
        organizations.extend(cluster.organizations().await);
        gather_cluster_context(cluster, global, &parsed, &mut context).await?;
    }
    context.organizations = OrganizationDirectory::from_views(&organizations);
    let reports: Vec<ManifestReport> = parsed
        .iter()
        .map(|document| manifest::check_document(document, &context))
        .collect();
    let attention = reports.iter().any(|report| report.attention);
    let painter = Painter::detect(global.color);
    let text = match global.output.format {
        OutputFormat::Table | OutputFormat::Wide => render_manifests(&reports, painter),
        _ => output::encode(
            &ManifestsReport {
                api_version: output::REPORT_API_VERSION,
                kind: "ManifestReport",
                files: sources
                    .iter()
                    .map(|source| source.path.display().to_string())
                    .collect(),
                documents: reports,
                attention,
            },
            &global.output,
        )?,
    };
    output::print(&text)?;
    Ok(Outcome::from_attention(attention))
}

/// Every document of the sources, with its file and its 1-based position in it.
fn split_sources(
    sources: &[manifest::sources::Source],
) -> Result<Vec<(String, usize, serde_json::Value)>, CliError> {
    let mut documents = Vec::new();
    for source in sources {
        let file = source.path.display().to_string();
        let split = manifest::parse::split_documents(&source.text)
            .map_err(|problem| CliError::Usage(format!("{file}: {problem}")))?;
        documents.extend(
            split
                .into_iter()
                .enumerate()
                .map(|(index, document)| (file.clone(), index + 1, document)),
        );
    }
    Ok(documents)
}

/// What the files themselves declare for the checks: their Secrets and their Brandings.
fn declared_context(
    parsed: &[manifest::parse::ParsedDocument],
    documents: &[serde_json::Value],
    default_namespace: &str,
    local: bool,
) -> ManifestContext {
    let mut context = ManifestContext {
        local,
        file_secrets: manifest::declared_secrets(documents, default_namespace),
        ..ManifestContext::default()
    };
    for view in parsed
        .iter()
        .filter_map(|document| document.view.as_ref().ok())
    {
        if view.kind == Kind::Branding {
            context.brandings.insert(
                (view.namespace.clone(), view.name.clone()),
                manifest::BrandingStanding::Declared,
            );
        }
    }
    context
}

/// What the cluster holds for the checks: the published state, the Secrets the manifests name,
/// the ClientPolicies, and the Brandings the clients name that the files do not declare.
async fn gather_cluster_context(
    cluster: &Cluster,
    global: &GlobalArgs,
    parsed: &[manifest::parse::ParsedDocument],
    context: &mut ManifestContext,
) -> Result<(), CliError> {
    context.state = ControlPlaneFacts::gather(cluster, &global.reconciler_namespace)
        .await
        .state;
    let mut secrets = BTreeMap::new();
    for view in parsed
        .iter()
        .filter_map(|document| document.view.as_ref().ok())
    {
        if let Some(name) = view.secret.name() {
            let key = (view.namespace.clone(), name.to_owned());
            if let Entry::Vacant(slot) = secrets.entry(key) {
                slot.insert(facts::secret(cluster, &view.namespace, name).await);
            }
        }
    }
    context.secrets = secrets;
    context.policies = manifest::policy::gather(cluster, parsed).await;
    for document in parsed {
        let (Some(branding), Ok(view)) = (&document.branding_ref, &document.view) else {
            continue;
        };
        let key = (view.namespace.clone(), branding.clone());
        if context.brandings.contains_key(&key) {
            continue;
        }
        if let Some(held) = cluster
            .get_view(Kind::Branding, &view.namespace, branding)
            .await?
        {
            let standing = match held.reason() {
                Some(Reason::Registered) => manifest::BrandingStanding::Registered,
                reason => manifest::BrandingStanding::NotRegistered(reason),
            };
            context.brandings.insert(key, standing);
        }
    }
    Ok(())
}

fn render_manifests(reports: &[ManifestReport], painter: Painter) -> String {
    let mut out = String::new();
    if reports.is_empty() {
        let _ = writeln!(out, "no documents to check");
        return out;
    }
    for report in reports {
        let name = if report.name.is_empty() {
            "(no name)"
        } else {
            &report.name
        };
        // A cluster-scoped object (a ClientPolicy) has no namespace.
        let _ = if report.namespace.is_empty() {
            writeln!(
                out,
                "{}#{} {} {name}",
                report.file, report.document, report.kind
            )
        } else {
            writeln!(
                out,
                "{}#{} {} {}/{name}",
                report.file, report.document, report.kind, report.namespace
            )
        };
        for check in &report.checks {
            let first = check.findings.first().map(String::as_str).unwrap_or("");
            let _ = writeln!(
                out,
                "  {} {:<7} {first}",
                render::status_label(check.status, painter),
                check.name
            );
            for finding in check.findings.iter().skip(1) {
                let _ = writeln!(out, "                      {finding}");
            }
        }
    }
    let failing = reports.iter().filter(|report| report.attention).count();
    let _ = writeln!(
        out,
        "\n{} document{} checked, {failing} need{} attention",
        reports.len(),
        if reports.len() == 1 { "" } else { "s" },
        if failing == 1 { "s" } else { "" }
    );
    out
}

#[cfg(test)]
mod tests;
