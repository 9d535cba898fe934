//! `kubectl nauthera approve oidcclient/NAME [--generation N]`: creates the ClientApproval a
//! ClientPolicy's approval rule waits for (`<client>-<generation>`, with the client's uid so that
//! it does not carry over to a client created again under the same name), and says what it
//! approved and whether the client was waiting for it. Only the security team's role may create
//! ClientApprovals; anyone else gets a 403, said plainly.

use std::fmt::Write;

use kube::api::{Api, PostParams};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::{ClientApproval, ClientApprovalSpec};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::Outcome;
use crate::cli::kinds::{Kind, Target};
use crate::cli::{ApproveArgs, GlobalArgs, OutputFormat};
use crate::cluster::Cluster;
use crate::error::{CliError, api_code, describe_kube_error};
use crate::model::policies::{APPROVALS_RESOURCE, APPROVER_ROLE};
use crate::model::view::ResourceView;
use crate::output;

/// The field manager the plugin writes approvals with, so `managedFields` names it.
const FIELD_MANAGER: &str = "kubectl-nauthera";

/// The longest object name (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The document `approve -o json|yaml` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct ApproveReport {
    api_version: &'static str,
    kind: &'static str,
    namespace: String,
    client: String,
    /// The generation approved.
    generation: i64,
    /// The client's `metadata.generation` when it was approved.
    current_generation: Option<i64>,
    /// The ClientApproval's name.
    approval: String,
    /// `false` when an approval of this generation was already there.
    created: bool,
    /// The client's reason, as its status gives it.
    client_reason: Option<Reason>,
    /// Whether the client was waiting for an approval.
    waiting: bool,
    notes: Vec<String>,
}

pub async fn run(global: &GlobalArgs, args: &ApproveArgs) -> Result<Outcome, CliError> {
    let (kind, name) = Target::parse_named(&args.target)?;
    if kind != Kind::OidcClient {
        return Err(CliError::Usage(format!(
            "only OIDCClients are approved: a ClientPolicy's approval rule holds new OIDCClients \
             and changes to them, so {}/{name} needs no approval",
            kind.singular()
        )));
    }
    let cluster = Cluster::connect(global).await?;
    let namespace = cluster.namespace.clone();
    let view = cluster.require_view(kind, &namespace, &name).await?;
    let current = view.generation;
    let generation = args.generation.or(current).unwrap_or(1);
    if let Some(current) = current
        && generation > current
    {
        return Err(CliError::Usage(format!(
            "oidcclient/{name} is at generation {current}: generation {generation} does not \
             exist yet, and only what exists can be reviewed; approve it once it is applied"
        )));
    }
    let in_force = view.status.as_ref().and_then(|s| s.generation_in_force);
    refuse_in_force(&name, generation, in_force)?;
    let approval_name = approval_name(&name, generation);
    let spec = ClientApprovalSpec {
        client: name.clone(),
        generation,
        uid: Some(view.uid.clone()).filter(|uid| !uid.is_empty()),
    };
    let created = create(&cluster, &namespace, &approval_name, &spec, generation).await?;
    let report = report(&view, generation, approval_name, created);
    let text = match global.output.format {
        OutputFormat::Table | OutputFormat::Wide => render(&report),
        OutputFormat::Name => format!("clientapproval.nauthera.io/{}\n", report.approval),
        _ => output::encode(&report, &global.output)?,
    };
    output::print(&text)?;
    Ok(Outcome::AllGood)
}

/// An approval of a generation the server already has in force, or of an older one, could
/// never be used (the reconciler only ever sends a newer generation): refused, naming the
/// generation in force, rather than created to no effect.
fn refuse_in_force(name: &str, generation: i64, in_force: Option<i64>) -> Result<(), CliError> {
    match in_force {
        Some(in_force) if generation == in_force => Err(CliError::Refused(format!(
            "generation {generation} of oidcclient/{name} is already in force on the server: it \
             needs no approval, and one would never be used; approve a later generation once it \
             is applied and waits (WaitingForApproval)"
        ))),
        Some(in_force) if generation < in_force => Err(CliError::Refused(format!(
            "oidcclient/{name} has generation {in_force} in force on the server: generation \
             {generation} is older and will never be sent, so an approval of it would never be \
             used; approve a later generation once it is applied and waits (WaitingForApproval)"
        ))),
        _ => Ok(()),
    }
}

/// Creates the approval; `Ok(false)` when the same approval is already there.
async fn create(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    spec: &ClientApprovalSpec,
    generation: i64,
) -> Result<bool, CliError> {
    let api: Api<ClientApproval> = cluster.namespaced(namespace);
    let approval = ClientApproval::new(name, spec.clone());
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let error = match api.create(&params, &approval).await {
        Ok(_) => return Ok(true),
        Err(error) => error,
    };
    match api_code(&error) {
        Some(403) => {
            let (detail, _) = describe_kube_error(&error);
            Err(CliError::Refused(format!(
                "you may not approve OIDCClients in namespace {namespace}: creating \
                 {APPROVALS_RESOURCE} needs the security team's role ({APPROVER_ROLE}); ask them \
                 to review it and run {} --generation {generation} (the API server said: \
                 {detail})",
                nauthera_shared::policy::approve_command(&spec.client, namespace)
            )))
        }
        Some(409) => {
            let existing = api.get(name).await.map_err(|error| {
                CliError::kube(format!("reading ClientApproval {name}"), &error)
            })?;
            if same_approval(&existing.spec, spec) {
                return Ok(false);
            }
            Err(CliError::Refused(format!(
                "ClientApproval {name} in namespace {namespace} already exists and approves \
                 something else (client {}, generation {}, uid {}); approvals are never edited: \
                 if it is stale, delete it (kubectl -n {namespace} delete clientapproval {name}) \
                 and run approve again",
                existing.spec.client,
                existing.spec.generation,
                existing.spec.uid.as_deref().unwrap_or("any")
            )))
        }
        Some(404) => Err(CliError::Refused(format!(
            "{APPROVALS_RESOURCE} is not served in this cluster: install the CRDs (kubectl apply \
             -k deploy/crds)"
        ))),
        _ => Err(CliError::kube(
            format!("creating ClientApproval {name} in namespace {namespace}"),
            &error,
        )),
    }
}

/// An approval already there approves the same: the same client and generation, and no uid or
/// the same one.
fn same_approval(existing: &ClientApprovalSpec, wanted: &ClientApprovalSpec) -> bool {
    existing.client == wanted.client
        && existing.generation == wanted.generation
        && (existing.uid.is_none() || existing.uid == wanted.uid)
}

/// `<client>-<generation>`; a name too long for an object keeps the start of the client's name
/// and a digest of all of it.
pub fn approval_name(client: &str, generation: i64) -> String {
    let suffix = format!("-{generation}");
    let plain = format!("{client}{suffix}");
    if plain.len() <= MAX_NAME {
        return plain;
    }
    let digest: String = Sha256::digest(client.as_bytes())
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let room = MAX_NAME - suffix.len() - digest.len() - 1;
    let mut end = room.min(client.len());
    while !client.is_char_boundary(end) {
        end -= 1;
    }
    let prefix = client[..end].trim_end_matches(['-', '.']);
    format!("{prefix}-{digest}{suffix}")
}

fn report(view: &ResourceView, generation: i64, approval: String, created: bool) -> ApproveReport {
    let reason = view.reason();
    let waiting = reason == Some(Reason::WaitingForApproval);
    let mut notes = Vec::new();
    let reference = format!("oidcclient/{}", view.name);
    match (view.generation, waiting) {
        (Some(current), _) if current > generation => notes.push(format!(
            "{reference} is at generation {current}: approving generation {generation} does not \
             let generation {current} through"
        )),
        (_, true) => notes.push(format!(
            "{reference} waits for this approval (WaitingForApproval): the reconciler sends \
             generation {generation} on its next pass"
        )),
        (_, false) => notes.push(format!(
            "{reference} is not waiting for an approval (its reason is {}): the approval counts \
             when a ClientPolicy asks for one of generation {generation}",
            reason.map_or("not reconciled yet", Reason::as_str)
        )),
    }
    if waiting && let Some(message) = view.message() {
        notes.push(format!("its condition said: {message}"));
    }
    ApproveReport {
        api_version: output::REPORT_API_VERSION,
        kind: "ApproveReport",
        namespace: view.namespace.clone(),
        client: view.name.clone(),
        generation,
        current_generation: view.generation,
        approval,
        created,
        client_reason: reason,
        waiting,
        notes,
    }
}

fn render(report: &ApproveReport) -> String {
    let mut out = String::new();
    if report.created {
        let _ = writeln!(
            out,
            "approved generation {} of oidcclient/{} in namespace {} (ClientApproval {})",
            report.generation, report.client, report.namespace, report.approval
        );
    } else {
        let _ = writeln!(
            out,
            "generation {} of oidcclient/{} in namespace {} is already approved (ClientApproval \
             {}); nothing was changed",
            report.generation, report.client, report.namespace, report.approval
        );
    }
    for note in &report.notes {
        let _ = writeln!(out, "  {note}");
    }
    out
}

#[cfg(test)]
mod tests;
