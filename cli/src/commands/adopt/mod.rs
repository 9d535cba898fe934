//! `kubectl nauthera adopt KIND/NAME`: checks that the resource waits for a person to adopt the
//! object the server holds (`AdoptionRequired`), shows that object (revision, writer, the fields
//! that differ) and what adopting it does (a write or none, the secret), asks when it should,
//! sets `nauthera.io/adopt=<revision shown>` on the resource as it was shown, and waits until the
//! status says the reconciler carried it out (`status.lastAdoption`).

mod plan;

use std::fmt::Write;
use std::io::BufRead;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use nauthera_shared::ADOPT_ANNOTATION;
use nauthera_shared::resources::AdoptionRecord;
use nauthera_shared::workloads::{self, Consumer};
use serde::Serialize;

use self::plan::{AdoptOutcome, AdoptPlan, SecretPlan, Standing};
use crate::Outcome;
use crate::cli::kinds::Target;
use crate::cli::{AdoptArgs, GlobalArgs, OutputFormat};
use crate::cluster::{Cluster, facts};
use crate::commands::restore::api_resource;
use crate::error::{CliError, api_code};
use crate::output::timefmt::short_duration;
use crate::output::{self, Painter, Tone, progress};

/// How often the resource is read while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The document `adopt -o json|yaml` prints: never a secret, only where it goes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AdoptReport {
    api_version: &'static str,
    kind: &'static str,
    plan: AdoptPlan,
    /// The value set on `nauthera.io/adopt`; absent when nothing was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<String>,
    outcome: AdoptOutcome,
    detail: String,
    /// `status.lastAdoption` once the reconciler carried it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    adoption: Option<AdoptionRecord>,
}

pub async fn run(global: &GlobalArgs, args: &AdoptArgs) -> Result<Outcome, CliError> {
    let (kind, name) = Target::parse_named(&args.target)?;
    let cluster = Cluster::connect(global).await?;
    let view = cluster
        .require_view(kind, &cluster.namespace, &name)
        .await?;
    let mut plan = plan::adoptable(&view, args.keep_secret).map_err(CliError::Refused)?;
    if let Some(secret) = plan.minted_into() {
        plan.readers = facts::pod_templates(&cluster, &plan.namespace)
            .await
            .map(|templates| workloads::consumers(&templates, secret))
            .unwrap_or_default();
    }
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
        let done = (AdoptOutcome::DryRun, "dry run: nothing changed".to_owned());
        return finish(global, plan, None, done, None);
    }
    if !args.yes && !confirm(&plan)? {
        progress("Adoption cancelled; nothing was changed.");
        let done = (AdoptOutcome::Cancelled, "cancelled".to_owned());
        return finish(global, plan, None, done, None);
    }
    annotate(&cluster, &plan).await?;
    progress(&format!(
        "annotated {}/{} in {} with {ADOPT_ANNOTATION}={}",
        plan.kind.singular(),
        plan.name,
        plan.namespace,
        plan.revision
    ));
    let (outcome, detail, record) = wait(&cluster, &plan, args.timeout).await?;
    if human {
        output::print(&render_result(&plan, outcome, &detail, painter))?;
    }
    let request = Some(plan.revision.clone());
    finish(global, plan, request, (outcome, detail), record)
}

/// Asks on standard error and reads the answer from standard input; no answer at all (a closed
/// standard input) is an error that names `--yes`.
fn confirm(plan: &AdoptPlan) -> Result<bool, CliError> {
    progress(&format!(
        "Adopt revision {} of {}/{} ({})? [y/N]",
        plan.revision,
        plan.kind.singular(),
        plan.name,
        if plan.writes {
            "one write"
        } else {
            "nothing is written"
        }
    ));
    let mut answer = String::new();
    let read = std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|source| CliError::ReadFile {
            path: "standard input".into(),
            source,
        })?;
    if read == 0 {
        return Err(CliError::NotConfirmed(
            "an adoption needs a confirmation and standard input gave none; pass --yes to \
             adopt without asking"
                .to_owned(),
        ));
    }
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

async fn annotate(cluster: &Cluster, plan: &AdoptPlan) -> Result<(), CliError> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &plan.namespace,
        &api_resource(plan.kind),
    );
    let what = || {
        format!(
            "annotating {}/{} in namespace {}",
            plan.kind.singular(),
            plan.name,
            plan.namespace
        )
    };
    match api
        .patch(
            &plan.name,
            &PatchParams::default(),
            &Patch::Merge(plan.patch()),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(error) if api_code(&error) == Some(409) => Err(CliError::Refused(format!(
            "{}/{} in namespace {} changed after it was shown (its resourceVersion moved): \
             nothing was annotated, so nothing is adopted blindly; run kubectl nauthera adopt \
             {}/{} -n {} again to see what it shows now",
            plan.kind.singular(),
            plan.name,
            plan.namespace,
            plan.kind.singular(),
            plan.name,
            plan.namespace
        ))),
        Err(error) => Err(CliError::kube(what(), &error)),
    }
}

/// Polls the resource until its status says the adoption was carried out or stopped, or the
/// timeout passes; progress goes to standard error.
async fn wait(
    cluster: &Cluster,
    plan: &AdoptPlan,
    timeout: Duration,
) -> Result<(AdoptOutcome, String, Option<AdoptionRecord>), CliError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let Some(view) = cluster
            .get_view(plan.kind, &plan.namespace, &plan.name)
            .await?
        else {
            return Ok((
                AdoptOutcome::TimedOut,
                "the resource was deleted".to_owned(),
                None,
            ));
        };
        match plan::standing(&view, plan) {
            Standing::Done(outcome, detail, record) => return Ok((outcome, detail, record)),
            Standing::Waiting(state) => {
                if tokio::time::Instant::now() >= deadline {
                    return Ok((
                        AdoptOutcome::TimedOut,
                        format!(
                            "not adopted within {}: {state}; see kubectl nauthera diagnose {}/{} \
                             -n {}",
                            short_duration(i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX)),
                            plan.kind.singular(),
                            plan.name,
                            plan.namespace
                        ),
                        None,
                    ));
                }
                if state != last {
                    progress(&format!(
                        "waiting for {}/{} in {}: {state}",
                        plan.kind.singular(),
                        plan.name,
                        plan.namespace
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
    plan: AdoptPlan,
    request: Option<String>,
    (outcome, detail): (AdoptOutcome, String),
    adoption: Option<AdoptionRecord>,
) -> Result<Outcome, CliError> {
    match global.output.format {
        OutputFormat::Table | OutputFormat::Wide => {}
        OutputFormat::Name => {
            if outcome == AdoptOutcome::Adopted {
                output::print(&output::resource_name(plan.kind, &plan.name))?;
            }
        }
        _ => output::emit(
            &AdoptReport {
                api_version: output::REPORT_API_VERSION,
                kind: "AdoptReport",
                plan,
                request,
                outcome,
                detail,
                adoption,
            },
            &global.output,
        )?,
    }
    Ok(Outcome::from_attention(outcome != AdoptOutcome::Adopted))
}

fn render_plan(plan: &AdoptPlan, painter: Painter) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}/{}",
        painter.paint(plan.kind.as_str(), Tone::Strong),
        plan.namespace,
        plan.name
    );
    let _ = writeln!(
        out,
        "  the server holds revision {}{}, written by {}{}",
        plan.revision,
        plan.client_id
            .as_ref()
            .map(|id| format!(" (client id {id})"))
            .unwrap_or_default(),
        plan.writer,
        plan.written_at
            .map(|at| format!(" at {at}"))
            .unwrap_or_default()
    );
    if plan.differences.is_empty() {
        let _ = writeln!(out, "  the manifest declares what the server holds");
    } else {
        let _ = writeln!(
            out,
            "  fields the manifest changes: {}",
            plan.differences.join(", ")
        );
    }
    let _ = writeln!(out, "  {}", secret_line(&plan.secret));
    let verdict = if plan.writes {
        format!(
            "one write of the declared state, over revision {} only",
            plan.revision
        )
    } else {
        "nothing is written: the revision is recorded as the one in force".to_owned()
    };
    let _ = writeln!(
        out,
        "  {} {verdict}",
        painter.paint(
            "adoption:",
            if plan.writes { Tone::Warn } else { Tone::Good }
        )
    );
    if plan.minted_into().is_some() {
        readers_lines(&mut out, plan, painter);
    }
    out
}

fn secret_line(secret: &SecretPlan) -> String {
    match secret {
        SecretPlan::None => "no client secret to deliver".to_owned(),
        SecretPlan::Mint { secret } => format!(
            "a new client secret is minted and delivered into Secret {secret}; the server stops \
             accepting the one it holds (--keep-secret keeps it)"
        ),
        SecretPlan::KeepGenerated { secret } => format!(
            "the client secret the server holds is kept: nothing goes into Secret {secret} \
             until kubectl nauthera rotate"
        ),
        SecretPlan::Send { secret, key } => {
            format!("the secret in Secret {secret} (key {key}) is sent to the server")
        }
        SecretPlan::KeepReferenced { secret, key } => format!(
            "Secret {secret} (key {key}) is taken to hold the secret in force; it is sent once \
             its value changes"
        ),
    }
}

fn readers_lines(out: &mut String, plan: &AdoptPlan, painter: Painter) {
    let secret = plan.minted_into().unwrap_or_default();
    if plan.readers.is_empty() {
        let _ = writeln!(
            out,
            "  no Deployment, StatefulSet or DaemonSet in namespace {} reads Secret {secret}",
            plan.namespace
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
}

fn render_result(
    plan: &AdoptPlan,
    outcome: AdoptOutcome,
    detail: &str,
    painter: Painter,
) -> String {
    let (label, tone) = match outcome {
        AdoptOutcome::Adopted => ("adopted", Tone::Good),
        AdoptOutcome::NotAdopted | AdoptOutcome::TimedOut => ("not adopted", Tone::Bad),
        AdoptOutcome::DryRun | AdoptOutcome::Cancelled => ("not adopted", Tone::Dim),
    };
    let mut out = format!(
        "{} {}/{} in {}: {detail}\n",
        painter.paint(label, tone),
        plan.kind.singular(),
        plan.name,
        plan.namespace
    );
    let restarts: Vec<&Consumer> = if outcome == AdoptOutcome::Adopted {
        plan.readers.iter().collect()
    } else {
        Vec::new()
    };
    if !restarts.is_empty() {
        let _ = writeln!(out, "Restart the workloads that read the new secret:");
        for reader in restarts {
            let _ = writeln!(out, "  {}", reader.restart_command(&plan.namespace));
        }
    }
    out
}

#[cfg(test)]
mod tests;
