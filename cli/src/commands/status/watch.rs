//! `status -w`: after the report, one row for each change of a resource, as `kubectl get -w`
//! prints them, until interrupted.

use futures::StreamExt;
use jiff::Timestamp;

use super::render;
use super::report::resource_row;
use crate::cli::{GlobalArgs, OutputFormat};
use crate::cluster::{Cluster, Scope};
use crate::control_plane::ControlPlaneFacts;
use crate::error::CliError;
use crate::kinds::Kind;
use crate::output::{self, Painter};
use crate::view::OrganizationDirectory;

/// What the watch looks at.
pub struct Watched<'a> {
    pub kinds: &'a [Kind],
    pub scope: Scope,
    pub name: Option<&'a str>,
}

/// Prints a row for every change, in the report's output format; runs until interrupted (or
/// until standard output is closed).
pub async fn follow(
    cluster: &Cluster,
    watched: Watched<'_>,
    facts: &ControlPlaneFacts,
    organizations: &OrganizationDirectory,
    global: &GlobalArgs,
) -> Result<(), CliError> {
    let streams = watched
        .kinds
        .iter()
        .map(|kind| cluster.watch_views(*kind, &watched.scope, watched.name));
    let mut changes = futures::stream::select_all(streams);
    let painter = Painter::detect(global.color);
    while let Some(change) = changes.next().await {
        let view = match change {
            Ok(view) => view,
            Err(problem) => {
                output::progress(&format!("warning: {problem}"));
                continue;
            }
        };
        let row = resource_row(&view, facts, organizations, Timestamp::now());
        match global.output.format {
            OutputFormat::Table | OutputFormat::Wide => output::write_stdout(|out| {
                render::write_rows(
                    out,
                    std::slice::from_ref(&row),
                    global.output.format == OutputFormat::Wide,
                    painter,
                )
            })?,
            OutputFormat::Name => output::print(&output::resource_name(row.kind, &row.name))?,
            _ => output::emit(&row, &global.output)?,
        }
    }
    Ok(())
}
