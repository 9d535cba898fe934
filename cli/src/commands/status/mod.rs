//! `kubectl nauthera status [KIND[/NAME]]`.

mod policies;
mod render;
mod report;
mod rows;
mod watch;

use jiff::Timestamp;

use crate::Outcome;
use crate::cli::kinds::{Kind, Target};
use crate::cli::{GlobalArgs, OutputFormat, StatusArgs};
use crate::cluster::control_plane::ControlPlaneFacts;
use crate::cluster::{Cluster, Scope};
use crate::error::CliError;
use crate::model::view::OrganizationDirectory;
use crate::output::{self, Painter};

pub async fn run(global: &GlobalArgs, args: &StatusArgs) -> Result<Outcome, CliError> {
    let target = args.target.as_deref().map(Target::parse).transpose()?;
    let cluster = Cluster::connect(global).await?;
    let facts = ControlPlaneFacts::gather(&cluster, &global.reconciler_namespace).await;
    // The organizations come first: each resource's row is made as its page is read.
    let organizations = OrganizationDirectory::from_views(&cluster.organizations().await);
    let mut rows = report::Rows::new(&facts, &organizations, Timestamp::now());
    let not_installed = match &target {
        Some(Target {
            kind,
            name: Some(name),
        }) => {
            rows.add(
                cluster
                    .require_view(*kind, &cluster.namespace, name)
                    .await?,
            );
            Vec::new()
        }
        Some(Target { kind, name: None }) => {
            let add = &mut |view| rows.add(view);
            cluster.visit_views(&[*kind], &cluster.scope, add).await?
        }
        None => {
            let add = &mut |view| rows.add(view);
            cluster.visit_views(&Kind::ALL, &cluster.scope, add).await?
        }
    };
    rows.sort();
    let watched_kinds: Vec<Kind> = match &target {
        Some(target) => vec![target.kind],
        None => Kind::ALL.to_vec(),
    }
    .into_iter()
    .filter(|kind| !not_installed.contains(kind))
    .collect();
    let scope = match (&cluster.scope, &target) {
        (Scope::All, None | Some(Target { name: None, .. })) => "*".to_owned(),
        _ => cluster.namespace.clone(),
    };
    let every_namespace = scope == "*";
    let mut report = rows.report(not_installed, scope);
    let listing = crate::cluster::policies::list_policies(&cluster).await;
    report.policies = policies::section(&listing, &report.resources, every_namespace);
    let wide = global.output.format == OutputFormat::Wide;
    let painter = Painter::detect(global.color);
    match global.output.format {
        OutputFormat::Table | OutputFormat::Wide if global.no_headers => {
            output::write_stdout(|out| {
                render::write_rows(out, &report.resources, wide, painter)?;
                render::write_rows(out, &report.observed, wide, painter)
            })?;
        }
        OutputFormat::Table | OutputFormat::Wide => {
            output::write_stdout(|out| render::render_to(out, &report, wide, painter))?;
        }
        OutputFormat::Name => output::write_stdout(|out| {
            report
                .resources
                .iter()
                .chain(&report.observed)
                .try_for_each(|row| {
                    out.write_all(output::resource_name(row.kind, &row.name).as_bytes())
                })
        })?,
        _ => output::emit(&report, &global.output)?,
    }
    if args.watch {
        let watched = watch::Watched {
            kinds: &watched_kinds,
            scope: match target.as_ref().and_then(|target| target.name.as_deref()) {
                Some(_) => Scope::Namespace(cluster.namespace.clone()),
                None => cluster.scope.clone(),
            },
            name: target.as_ref().and_then(|target| target.name.as_deref()),
        };
        watch::follow(&cluster, watched, &facts, &organizations, global).await?;
    }
    Ok(Outcome::from_attention(report.attention))
}

#[cfg(test)]
mod tests;
