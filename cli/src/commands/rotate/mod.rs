//! `kubectl nauthera rotate oidcclient/NAME`: checks that the client's secret is one the
//! server generates, shows the Secret that will change and the workloads that read it, asks
//! when it should, sets `nauthera.io/rotate` to a new request id, and waits until the status
//! says the reconciler carried out that request (`status.lastRotation`).

use std::fmt::Write;
use std::io::{BufRead, IsTerminal};
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use nauthera_shared::ROTATE_ANNOTATION;
use nauthera_shared::resources::{OIDCClient, RotationOutcome as Carried};
use nauthera_shared::workloads::{self, Consumer};
use serde::Serialize;

use crate::Outcome;
use crate::cli::kinds::{Kind, Target};
use crate::cli::{GlobalArgs, OutputFormat, RotateArgs};
use crate::cluster::{Cluster, facts};
use crate::error::CliError;
use crate::model::view::{ResourceView, SecretUse};
use crate::output::timefmt::short_duration;
use crate::output::{self, Painter, Tone, progress};

/// How often the resource is read while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
enum RotateOutcome {
    Rotated,
    NotRotated,
    TimedOut,
    DryRun,
    Cancelled,
}

/// The document `rotate -o json|yaml` prints: never the secret, only where it goes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RotateReport {
    api_version: &'static str,
    kind: &'static str,
    namespace: String,
    name: String,
    secret: String,
    /// The value set on `nauthera.io/rotate`; absent when nothing was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<String>,
    readers: Vec<Consumer>,
    outcome: RotateOutcome,
    detail: String,
}

/// What a rotation of one client will do.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RotatePlan {
    namespace: String,
    name: String,
    /// The Secret the new secret is delivered into.
    secret: String,
    /// How long ago the secret in force was set.
    secret_age_seconds: Option<i64>,
    readers: Vec<Consumer>,
}

pub async fn run(global: &GlobalArgs, args: &RotateArgs) -> Result<Outcome, CliError> {
    let (kind, name) = Target::parse_named(&args.target)?;
    if kind != Kind::OidcClient {
        return Err(CliError::Usage(format!(
            "only an OIDCClient has a generated client secret to rotate; {} {name} has none",
            kind.as_str()
        )));
    }
    let cluster = Cluster::connect(global).await?;
    let view = cluster
        .require_view(kind, &cluster.namespace, &name)
        .await?;
    let secret = rotatable(&view).map_err(CliError::Refused)?;
    let readers = facts::pod_templates(&cluster, &view.namespace)
        .await
        .map(|templates| workloads::consumers(&templates, &secret))
        .unwrap_or_default();
    let plan = RotatePlan {
        namespace: view.namespace.clone(),
        name: view.name.clone(),
        secret_age_seconds: view
            .status
            .as_ref()
            .and_then(|s| s.secret_set_time.as_ref())
            .map(|t| t.0.duration_until(Timestamp::now()).as_secs()),
        secret,
        readers,
    };
    let painter = Painter::detect(global.color);
    let human = matches!(
        global.output.format,
        OutputFormat::Table | OutputFormat::Wide
    );
    let text = render_plan(&plan, painter);
    if human {
        output::print(&text)?;
    } else {
        progress(text.trim_end());
    }
    if args.dry_run {
        if human {
            output::print("Dry run: nothing was changed.\n")?;
        }
        return finish(
            global,
            &plan,
            None,
            RotateOutcome::DryRun,
            "dry run: nothing changed",
        );
    }
    let interactive = std::io::stdin().is_terminal();
    if !args.yes && interactive && !confirm(&plan)? {
        progress("Rotation cancelled; nothing was changed.");
        return finish(global, &plan, None, RotateOutcome::Cancelled, "cancelled");
    }
    let request = format!("rotate-{}", Timestamp::now());
    annotate(&cluster, &plan, &request).await?;
    progress(&format!(
        "annotated oidcclient/{} in {} with {ROTATE_ANNOTATION}={request}",
        plan.name, plan.namespace
    ));
    let (outcome, detail) = wait(&cluster, &plan, &request, args.timeout).await?;
    if human {
        output::print(&render_result(&plan, outcome, &detail, painter))?;
    }
    finish(global, &plan, Some(request), outcome, &detail)
}

/// The Secret a rotation delivers into, or why this client's secret is not rotated here.
fn rotatable(view: &ResourceView) -> Result<String, String> {
    let target = format!("oidcclient/{} in namespace {}", view.name, view.namespace);
    let secret = match &view.secret {
        SecretUse::Generated { name } => name.clone(),
        SecretUse::Referenced { name, key } => {
            return Err(format!(
                "{target}: its client secret comes from spec.secret.secretRef (Secret {name}, \
                 key {key}), which the reconciler reads and never writes: put a new value into \
                 that Secret (or where it comes from) and the reconciler sends it to the server"
            ));
        }
        SecretUse::None => {
            return Err(format!(
                "{target} has no client secret (a public client, or private_key_jwt): nothing \
                 to rotate"
            ));
        }
    };
    if view.deleting {
        return Err(format!("{target} is being deleted: nothing to rotate"));
    }
    if view.observes() || view.reason() == Some(nauthera_shared::catalog::Reason::Observed) {
        return Err(format!(
            "{target} is observed (managementPolicy: Observe): the reconciler writes nothing to \
             the server, so it mints no secret; set managementPolicy: Manage to hand it over, \
             then rotate"
        ));
    }
    if view.reason() == Some(nauthera_shared::catalog::Reason::AdoptionRequired) {
        return Err(format!(
            "{target} waits for adoption: the server's object is somebody else's until it is \
             adopted; kubectl nauthera adopt oidcclient/{} -n {} mints and delivers a new \
             secret with the adoption",
            view.name, view.namespace
        ));
    }
    if view.is_drifted() {
        return Err(format!(
            "{target} is drifted: the reconciler rotates nothing over a change it did not make; \
             restore it first (kubectl nauthera restore oidcclient/{} -n {}) or put the change \
             in the manifest",
            view.name, view.namespace
        ));
    }
    Ok(secret)
}

/// Asks on standard error and reads the answer from standard input.
fn confirm(plan: &RotatePlan) -> Result<bool, CliError> {
    progress(&format!(
        "Rotate the client secret of oidcclient/{} (Secret {})? [y/N]",
        plan.name, plan.secret
    ));
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|source| CliError::ReadFile {
            path: "standard input".into(),
            source,
        })?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// The merge patch that asks the reconciler for a rotation, naming the request.
fn rotate_patch(request: &str) -> serde_json::Value {
    serde_json::json!({ "metadata": { "annotations": { ROTATE_ANNOTATION: request } } })
}

async fn annotate(cluster: &Cluster, plan: &RotatePlan, request: &str) -> Result<(), CliError> {
    let api: Api<OIDCClient> = Api::namespaced(cluster.client.clone(), &plan.namespace);
    api.patch(
        &plan.name,
        &PatchParams::default(),
        &Patch::Merge(rotate_patch(request)),
    )
    .await
    .map_err(|error| {
        CliError::kube(
            format!(
                "annotating oidcclient/{} in namespace {}",
                plan.name, plan.namespace
            ),
            &error,
        )
    })?;
    Ok(())
}

/// Where the request stands, from the resource's status alone.
#[derive(Debug, PartialEq, Eq)]
enum Standing {
    /// Not carried out yet: what the status and annotation show.
    Waiting(String),
    Done(RotateOutcome, String),
}

fn standing(view: &ResourceView, request: &str, secret: &str) -> Standing {
    let status = view.status.as_ref();
    let carried = status
        .and_then(|status| status.last_rotation.as_ref())
        .filter(|record| record.request.as_deref() == Some(request));
    match carried {
        Some(record) if record.outcome == Carried::NotGenerated => Standing::Done(
            RotateOutcome::NotRotated,
            "the reconciler found no generated client secret to rotate; nothing was minted"
                .to_owned(),
        ),
        Some(record) => Standing::Done(
            RotateOutcome::Rotated,
            format!(
                "a new client secret is in Secret {secret}{}; the server no longer accepts the \
                 one before",
                record
                    .time
                    .as_ref()
                    .map(|time| format!(" (set at {})", time.0))
                    .unwrap_or_default()
            ),
        ),
        None => Standing::Waiting(view.request_state(ROTATE_ANNOTATION)),
    }
}

/// Polls the resource until its status says the request was carried out, or the timeout
/// passes; progress goes to standard error.
async fn wait(
    cluster: &Cluster,
    plan: &RotatePlan,
    request: &str,
    timeout: Duration,
) -> Result<(RotateOutcome, String), CliError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let Some(view) = cluster
            .get_view(Kind::OidcClient, &plan.namespace, &plan.name)
            .await?
        else {
            return Ok((
                RotateOutcome::TimedOut,
                "the resource was deleted".to_owned(),
            ));
        };
        match standing(&view, request, &plan.secret) {
            Standing::Done(outcome, detail) => return Ok((outcome, detail)),
            Standing::Waiting(state) => {
                if tokio::time::Instant::now() >= deadline {
                    return Ok((
                        RotateOutcome::TimedOut,
                        format!(
                            "not rotated within {}: {state}; see kubectl nauthera diagnose \
                             oidcclient/{} -n {}",
                            short_duration(i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX)),
                            plan.name,
                            plan.namespace
                        ),
                    ));
                }
                if state != last {
                    progress(&format!(
                        "waiting for oidcclient/{} in {}: {state}",
                        plan.name, plan.namespace
                    ));
                    last = state;
                }
            }
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

fn finish(
    global: &GlobalArgs,
    plan: &RotatePlan,
    request: Option<String>,
    outcome: RotateOutcome,
    detail: &str,
) -> Result<Outcome, CliError> {
    match global.output.format {
        OutputFormat::Table | OutputFormat::Wide => {}
        OutputFormat::Name => {
            if outcome == RotateOutcome::Rotated {
                output::print(&output::resource_name(Kind::OidcClient, &plan.name))?;
            }
        }
        _ => output::emit(
            &RotateReport {
                api_version: output::REPORT_API_VERSION,
                kind: "RotateReport",
                namespace: plan.namespace.clone(),
                name: plan.name.clone(),
                secret: plan.secret.clone(),
                request,
                readers: plan.readers.clone(),
                outcome,
                detail: detail.to_owned(),
            },
            &global.output,
        )?,
    }
    Ok(Outcome::from_attention(outcome != RotateOutcome::Rotated))
}

fn render_plan(plan: &RotatePlan, painter: Painter) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}/{}",
        painter.paint("OIDCClient", Tone::Strong),
        plan.namespace,
        plan.name
    );
    let _ = writeln!(
        out,
        "  mints a new client secret into Secret {}{}; the server stops accepting the one in \
         force as soon as it is minted",
        plan.secret,
        plan.secret_age_seconds
            .map(|age| format!(" (the one in force was set {} ago)", short_duration(age)))
            .unwrap_or_default()
    );
    if plan.readers.is_empty() {
        let _ = writeln!(
            out,
            "  no Deployment, StatefulSet or DaemonSet in namespace {} reads Secret {}",
            plan.namespace, plan.secret
        );
    }
    for reader in &plan.readers {
        let _ = writeln!(
            out,
            "  {} {}/{} reads it ({}): {}",
            painter.paint("restart:", Tone::Warn),
            reader.kind,
            reader.name,
            reader.uses.join(", "),
            reader.restart_command(&plan.namespace)
        );
    }
    out
}

fn render_result(
    plan: &RotatePlan,
    outcome: RotateOutcome,
    detail: &str,
    painter: Painter,
) -> String {
    let (label, tone) = match outcome {
        RotateOutcome::Rotated => ("rotated", Tone::Good),
        RotateOutcome::NotRotated | RotateOutcome::TimedOut => ("not rotated", Tone::Bad),
        RotateOutcome::DryRun | RotateOutcome::Cancelled => ("not rotated", Tone::Dim),
    };
    let mut out = format!(
        "{} oidcclient/{} in {}: {detail}\n",
        painter.paint(label, tone),
        plan.name,
        plan.namespace
    );
    if outcome == RotateOutcome::Rotated && !plan.readers.is_empty() {
        let _ = writeln!(out, "Restart the workloads that read the new secret:");
        for reader in &plan.readers {
            let _ = writeln!(out, "  {}", reader.restart_command(&plan.namespace));
        }
    }
    out
}

#[cfg(test)]
mod tests;
