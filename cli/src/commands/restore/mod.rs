//! `kubectl nauthera restore KIND/NAME... | --all-drifted`: shows what will be written back,
//! asks when it should, applies `nauthera.io/restore=true` with a request id beside it, and waits
//! until the status says the reconciler carried out that request (`status.lastRestore`).

mod plan;

use std::fmt::Write;
use std::io::{BufRead, IsTerminal};
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use nauthera_shared::catalog::Reason;
use nauthera_shared::resources::{
    Branding, IdentityProvider, OIDCClient, Organization, RestoreOutcome as Carried,
};
use nauthera_shared::{RESTORE_ANNOTATION, RESTORE_REQUEST_ANNOTATION};
use serde::Serialize;

use self::plan::RestorePlan;
use crate::Outcome;
use crate::cli::kinds::{Kind, Target};
use crate::cli::{GlobalArgs, OutputFormat, RestoreArgs};
use crate::cluster::Cluster;
use crate::cluster::facts;
use crate::error::CliError;
use crate::model::view::ResourceView;
use crate::output::timefmt::short_duration;
use crate::output::{self, Painter, Tone, progress};
use nauthera_shared::workloads;

/// How often the resources are read while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
enum RestoreOutcome {
    Restored,
    TimedOut,
    Skipped,
    DryRun,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RestoreResult {
    kind: Kind,
    namespace: String,
    name: String,
    outcome: RestoreOutcome,
    reason: Option<Reason>,
    revision: Option<String>,
    /// The request id set beside the restore annotation (`nauthera.io/restore-request`).
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<String>,
    detail: String,
}

/// The document `restore -o json|yaml` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RestoreReport {
    api_version: &'static str,
    kind: &'static str,
    dry_run: bool,
    plans: Vec<RestorePlan>,
    results: Vec<RestoreResult>,
    attention: bool,
}

pub async fn run(global: &GlobalArgs, args: &RestoreArgs) -> Result<Outcome, CliError> {
    if args.targets.is_empty() && !args.all_drifted {
        return Err(CliError::Usage(
            "name what to restore (restore oidcclient/shop ...), or pass --all-drifted".to_owned(),
        ));
    }
    let targets = args
        .targets
        .iter()
        .map(|target| Target::parse_named(target))
        .collect::<Result<Vec<_>, _>>()?;
    let cluster = Cluster::connect(global).await?;
    let views = if args.all_drifted {
        let (views, _) = cluster.list_views(&Kind::ALL, &cluster.scope).await?;
        views.into_iter().filter(ResourceView::is_drifted).collect()
    } else {
        named_views(&cluster, &targets).await?
    };
    let plans = plans(&cluster, &views).await;
    let painter = Painter::detect(global.color);
    let human = matches!(
        global.output.format,
        OutputFormat::Table | OutputFormat::Wide
    );
    let to_restore: Vec<&RestorePlan> = plans.iter().filter(|plan| plan.drifted).collect();
    let text = render_plans(&plans, painter);
    if human {
        output::print(&text)?;
    } else {
        // The plan still goes to the person, on standard error.
        progress(text.trim_end());
    }
    let mut results: Vec<RestoreResult> = plans
        .iter()
        .filter(|plan| !plan.drifted)
        .map(|plan| {
            RestoreResult::unsent(
                plan,
                RestoreOutcome::Skipped,
                "not drifted; nothing to restore",
            )
        })
        .collect();
    if to_restore.is_empty() {
        if human {
            output::print("Nothing to restore: no drifted resource was named or found.\n")?;
        }
        return finish(global, args.dry_run, plans, results, false);
    }
    if args.dry_run {
        results.extend(to_restore.iter().map(|plan| {
            RestoreResult::unsent(plan, RestoreOutcome::DryRun, "dry run: nothing changed")
        }));
        if human {
            output::print(&format!(
                "Dry run: {} resource{} would be restored; nothing was changed.\n",
                to_restore.len(),
                if to_restore.len() == 1 { "" } else { "s" }
            ))?;
        }
        return finish(global, true, plans, results, true);
    }
    let interactive = std::io::stdin().is_terminal();
    if plan::needs_confirmation(to_restore.len(), args.yes, args.dry_run, interactive)
        && !confirm(to_restore.len())?
    {
        progress("Restore cancelled; nothing was changed.");
        return Ok(Outcome::Attention);
    }
    let request = request_restores(&cluster, &to_restore).await?;
    let waited = wait(&cluster, &to_restore, &request, args.timeout).await?;
    let attention = waited
        .iter()
        .any(|result| result.outcome != RestoreOutcome::Restored);
    results.extend(waited);
    if human {
        output::print(&render_results(&results, &to_restore, painter))?;
    }
    finish(global, false, plans, results, attention)
}

/// The resources the user named, each required to exist.
async fn named_views(
    cluster: &Cluster,
    targets: &[(Kind, String)],
) -> Result<Vec<ResourceView>, CliError> {
    let mut views = Vec::new();
    for (kind, name) in targets {
        views.push(
            cluster
                .require_view(*kind, &cluster.namespace, name)
                .await?,
        );
    }
    Ok(views)
}

/// What restoring each resource writes back, with the workloads that use a drifted one's Secret.
async fn plans(cluster: &Cluster, views: &[ResourceView]) -> Vec<RestorePlan> {
    let mut plans = Vec::new();
    for view in views {
        let consumers = match view.secret.name() {
            Some(secret) if view.is_drifted() => facts::pod_templates(cluster, &view.namespace)
                .await
                .map(|templates| workloads::consumers(&templates, secret))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        plans.push(plan::plan(view, consumers));
    }
    plans
}

impl RestoreResult {
    /// A plan whose restore was not requested: not drifted, or a dry run.
    fn unsent(plan: &RestorePlan, outcome: RestoreOutcome, detail: &str) -> RestoreResult {
        RestoreResult {
            kind: plan.kind,
            namespace: plan.namespace.clone(),
            name: plan.name.clone(),
            outcome,
            reason: plan.reason,
            revision: plan.declared_revision.clone(),
            request: None,
            detail: detail.to_owned(),
        }
    }
}

/// Annotates each resource to restore, all with one request id for this run (what the status
/// names once each is carried out), and returns that id.
async fn request_restores(
    cluster: &Cluster,
    to_restore: &[&RestorePlan],
) -> Result<String, CliError> {
    let request = format!("restore-{}", Timestamp::now());
    for plan in to_restore {
        annotate(cluster, plan, &request).await?;
        progress(&format!(
            "annotated {}/{} in {} with {RESTORE_ANNOTATION}=true ({RESTORE_REQUEST_ANNOTATION}={request})",
            plan.kind.singular(),
            plan.name,
            plan.namespace
        ));
    }
    Ok(request)
}

fn finish(
    global: &GlobalArgs,
    dry_run: bool,
    plans: Vec<RestorePlan>,
    results: Vec<RestoreResult>,
    attention: bool,
) -> Result<Outcome, CliError> {
    if global.output.format == OutputFormat::Name {
        let names: String = results
            .iter()
            .filter(|result| {
                matches!(
                    result.outcome,
                    RestoreOutcome::Restored | RestoreOutcome::DryRun
                )
            })
            .map(|result| output::resource_name(result.kind, &result.name))
            .collect();
        output::print(&names)?;
    } else if !matches!(
        global.output.format,
        OutputFormat::Table | OutputFormat::Wide
    ) {
        output::emit(
            &RestoreReport {
                api_version: output::REPORT_API_VERSION,
                kind: "RestoreReport",
                dry_run,
                plans,
                results,
                attention,
            },
            &global.output,
        )?;
    }
    Ok(Outcome::from_attention(attention))
}

/// Asks on standard error and reads the answer from standard input.
fn confirm(count: usize) -> Result<bool, CliError> {
    progress(&format!(
        "Write the declared state back over {count} resource{}? [y/N]",
        if count == 1 { "" } else { "s" }
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
            "a restore of several resources needs a confirmation and standard input gave none; \
             pass --yes to restore without asking"
                .to_owned(),
        ));
    }
    Ok(plan::is_yes(&answer))
}

/// The API resource of a kind, for a patch of any kind's metadata.
pub(crate) fn api_resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::OidcClient => ApiResource::erase::<OIDCClient>(&()),
        Kind::Branding => ApiResource::erase::<Branding>(&()),
        Kind::IdentityProvider => ApiResource::erase::<IdentityProvider>(&()),
        Kind::Organization => ApiResource::erase::<Organization>(&()),
    }
}

/// The merge patch that asks the reconciler to write the declared state back, naming the request.
fn restore_patch(request: &str) -> serde_json::Value {
    serde_json::json!({ "metadata": { "annotations": {
        RESTORE_ANNOTATION: "true",
        RESTORE_REQUEST_ANNOTATION: request,
    } } })
}

async fn annotate(cluster: &Cluster, plan: &RestorePlan, request: &str) -> Result<(), CliError> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &plan.namespace,
        &api_resource(plan.kind),
    );
    api.patch(
        &plan.name,
        &PatchParams::default(),
        &Patch::Merge(restore_patch(request)),
    )
    .await
    .map_err(|error| {
        CliError::kube(
            format!(
                "annotating {}/{} in namespace {}",
                plan.kind.singular(),
                plan.name,
                plan.namespace
            ),
            &error,
        )
    })?;
    Ok(())
}

/// Where one restore request stands, from the resource's status alone.
#[derive(Debug, PartialEq, Eq)]
enum Standing {
    /// Not carried out yet: what the status and annotation show.
    Waiting(String),
    Done(RestoreOutcome, String),
}

fn standing(view: &ResourceView, request: &str) -> Standing {
    let status = view.status.as_ref();
    let carried = status
        .and_then(|status| status.last_restore.as_ref())
        .filter(|record| record.request.as_deref() == Some(request));
    match carried {
        Some(record) if record.outcome == Carried::NotDrifted => Standing::Done(
            RestoreOutcome::Skipped,
            "nothing had drifted when the reconciler took the request; nothing was written"
                .to_owned(),
        ),
        Some(record) => Standing::Done(
            RestoreOutcome::Restored,
            format!(
                "the declared state was written back over {}",
                match record.overwritten_revision.as_deref() {
                    None | Some("") => "the removed object".to_owned(),
                    Some(revision) => format!("revision {revision}"),
                }
            ),
        ),
        None => Standing::Waiting(view.request_state(RESTORE_ANNOTATION)),
    }
}

/// Polls every resource until its status says the request was carried out, or the timeout
/// passes; progress goes to standard error.
async fn wait(
    cluster: &Cluster,
    plans: &[&RestorePlan],
    request: &str,
    timeout: Duration,
) -> Result<Vec<RestoreResult>, CliError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pending: Vec<(&RestorePlan, String)> =
        plans.iter().map(|plan| (*plan, String::new())).collect();
    let mut done = Vec::new();
    loop {
        let mut still = Vec::new();
        for (plan, last) in pending {
            let view = cluster
                .get_view(plan.kind, &plan.namespace, &plan.name)
                .await?;
            let Some(view) = view else {
                done.push(result(
                    plan,
                    None,
                    RestoreOutcome::TimedOut,
                    "the resource was deleted",
                ));
                continue;
            };
            match standing(&view, request) {
                Standing::Done(outcome, detail) => {
                    let mut finished = result(plan, Some(&view), outcome, &detail);
                    finished.request = Some(request.to_owned());
                    done.push(finished);
                }
                Standing::Waiting(state) => {
                    if state != last {
                        progress(&format!(
                            "waiting for {}/{} in {}: {state}",
                            plan.kind.singular(),
                            plan.name,
                            plan.namespace
                        ));
                    }
                    still.push((plan, state));
                }
            }
        }
        pending = still;
        if pending.is_empty() {
            return Ok(done);
        }
        if tokio::time::Instant::now() >= deadline {
            for (plan, state) in pending {
                let mut timed_out = result(
                    plan,
                    None,
                    RestoreOutcome::TimedOut,
                    &format!(
                        "not restored within {}: {state}; see kubectl nauthera diagnose {}/{} -n {}",
                        short_duration(i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX)),
                        plan.kind.singular(),
                        plan.name,
                        plan.namespace
                    ),
                );
                timed_out.request = Some(request.to_owned());
                done.push(timed_out);
            }
            return Ok(done);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

fn result(
    plan: &RestorePlan,
    view: Option<&ResourceView>,
    outcome: RestoreOutcome,
    detail: &str,
) -> RestoreResult {
    RestoreResult {
        kind: plan.kind,
        namespace: plan.namespace.clone(),
        name: plan.name.clone(),
        outcome,
        reason: view.and_then(ResourceView::reason),
        revision: view
            .and_then(|view| view.status.as_ref())
            .and_then(|status| status.revision.clone()),
        request: None,
        detail: detail.to_owned(),
    }
}

fn render_plans(plans: &[RestorePlan], painter: Painter) -> String {
    let mut out = String::new();
    for plan in plans {
        let _ = writeln!(
            out,
            "{} {}/{}",
            painter.paint(plan.kind.as_str(), Tone::Strong),
            plan.namespace,
            plan.name
        );
        if !plan.drifted {
            let _ = writeln!(
                out,
                "  not drifted (reason {}); nothing to restore",
                plan.reason.map_or("-", |reason| reason.as_str())
            );
            continue;
        }
        let server = if plan.removed {
            "removed from the server".to_owned()
        } else {
            format!(
                "server holds revision {}",
                plan.server_revision.as_deref().unwrap_or("-")
            )
        };
        let _ = writeln!(
            out,
            "  {server}; writes back the declared state (last written revision {})",
            plan.declared_revision.as_deref().unwrap_or("-")
        );
        if !plan.fields.is_empty() {
            let _ = writeln!(out, "  fields that differ: {}", plan.fields.join(", "));
        }
        let _ = writeln!(
            out,
            "  changed by manager {}, actor {}{}",
            plan.manager.as_deref().unwrap_or("(none named)"),
            plan.actor.as_deref().unwrap_or("(unknown)"),
            plan.changed_at
                .map(|time| format!(", at {time}"))
                .unwrap_or_default()
        );
        if let Some(secret) = &plan.secret_to_change {
            let _ = writeln!(
                out,
                "  {} the client is created again with a new secret in Secret {secret}",
                painter.paint("note:", Tone::Warn)
            );
            if plan.consumers.is_empty() {
                let _ = writeln!(out, "  no Deployment, StatefulSet or DaemonSet uses it");
            }
            for consumer in &plan.consumers {
                let _ = writeln!(
                    out,
                    "  restart {}/{} ({}): {}",
                    consumer.kind,
                    consumer.name,
                    consumer.uses.join(", "),
                    consumer.restart_command(&plan.namespace)
                );
            }
        }
    }
    out
}

fn render_results(results: &[RestoreResult], plans: &[&RestorePlan], painter: Painter) -> String {
    let mut out = String::new();
    for result in results {
        let (label, tone) = match result.outcome {
            RestoreOutcome::Restored => ("restored", Tone::Good),
            RestoreOutcome::TimedOut => ("not restored", Tone::Bad),
            RestoreOutcome::Skipped => ("skipped", Tone::Dim),
            RestoreOutcome::DryRun => ("dry run", Tone::Dim),
        };
        let _ = writeln!(
            out,
            "{} {}/{} in {}: {}{}",
            painter.paint(label, tone),
            result.kind.singular(),
            result.name,
            result.namespace,
            result.detail,
            result
                .revision
                .as_ref()
                .filter(|_| result.outcome == RestoreOutcome::Restored)
                .map(|revision| format!(" (revision {revision})"))
                .unwrap_or_default()
        );
    }
    let restarts: Vec<String> = plans
        .iter()
        .flat_map(|plan| {
            plan.consumers
                .iter()
                .map(|consumer| consumer.restart_command(&plan.namespace))
        })
        .collect();
    if !restarts.is_empty() {
        let _ = writeln!(out, "Restart the workloads that read the new secret:");
        for command in restarts {
            let _ = writeln!(out, "  {command}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::view::SecretUse;
    use crate::model::view::fixtures::{drifted, view};
    use crate::output::snapshot::assert_snapshot;
    use nauthera_shared::workloads::Consumer;

    #[test]
    fn plan_and_results_snapshot() {
        let mut removed = drifted("team-a", "billing", 1_800_000_000);
        removed.secret = SecretUse::Generated {
            name: "billing-oidc".into(),
        };
        if let Some(drift) = removed.status.as_mut().and_then(|s| s.drift.as_mut()) {
            drift.removed = true;
            drift.server_revision = String::new();
        }
        let consumer = Consumer {
            kind: "Deployment".into(),
            name: "billing-web".into(),
            uses: vec!["volume creds".into()],
        };
        let plans = vec![
            plan::plan(&removed, vec![consumer]),
            plan::plan(&drifted("team-a", "web", 1_800_000_100), Vec::new()),
            plan::plan(
                &view(Kind::Branding, "team-b", "look", Reason::Registered, 0),
                Vec::new(),
            ),
        ];
        let restored: Vec<&RestorePlan> = plans.iter().filter(|p| p.drifted).collect();
        let results = vec![
            result(
                restored[0],
                None,
                RestoreOutcome::Restored,
                "Registered again",
            ),
            result(
                restored[1],
                None,
                RestoreOutcome::TimedOut,
                "not restored within 2m",
            ),
        ];
        let text = format!(
            "{}---\n{}",
            render_plans(&plans, Painter::PLAIN),
            render_results(&results, &restored, Painter::PLAIN)
        );
        assert_snapshot("restore.txt", &text);
    }

    #[test]
    fn the_patch_sets_only_the_annotations() {
        assert_eq!(
            restore_patch("restore-1"),
            serde_json::json!({"metadata": {"annotations": {
                "nauthera.io/restore": "true",
                "nauthera.io/restore-request": "restore-1",
            }}})
        );
    }

    #[test]
    fn only_the_status_naming_this_request_ends_the_wait() {
        use nauthera_shared::resources::RestoreRecord;
        let mut resource = view(Kind::OidcClient, "team-a", "web", Reason::Restored, 0);
        let record = |request: &str, outcome| RestoreRecord {
            request: Some(request.to_owned()),
            requested_by: None,
            outcome,
            revision: Some("r3".into()),
            overwritten_revision: Some("r2".into()),
            completed_at: None,
        };
        // An earlier request carried out long ago is not this one.
        resource.status.as_mut().unwrap().last_restore =
            Some(Box::new(record("restore-1", Carried::Restored)));
        assert!(matches!(
            standing(&resource, "restore-2"),
            Standing::Waiting(_)
        ));
        resource.status.as_mut().unwrap().last_restore =
            Some(Box::new(record("restore-2", Carried::Restored)));
        assert_eq!(
            standing(&resource, "restore-2"),
            Standing::Done(
                RestoreOutcome::Restored,
                "the declared state was written back over revision r2".into()
            )
        );
        resource.status.as_mut().unwrap().last_restore =
            Some(Box::new(record("restore-2", Carried::NotDrifted)));
        assert!(matches!(
            standing(&resource, "restore-2"),
            Standing::Done(RestoreOutcome::Skipped, _)
        ));
    }
}
