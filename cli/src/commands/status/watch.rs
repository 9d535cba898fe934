//! `status -w`: after the report, one row for each change of a resource, as `kubectl get -w`
//! prints them, until interrupted.

use std::collections::HashMap;

use futures::StreamExt;
use jiff::Timestamp;

use super::render;
use super::rows::{ResourceRow, resource_row};
use crate::cli::kinds::Kind;
use crate::cli::{GlobalArgs, OutputFormat};
use crate::cluster::control_plane::ControlPlaneFacts;
use crate::cluster::{Cluster, Scope};
use crate::error::CliError;
use crate::model::view::OrganizationDirectory;
use crate::output::{self, Painter};

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
    // A resource's row as last printed: an update that changes nothing shown (a status write
    // of the same facts, a label, a managedFields entry) prints no second identical row.
    let mut printed: HashMap<(Kind, String, String), String> = HashMap::new();
    while let Some(change) = changes.next().await {
        let view = match change {
            Ok(view) => view,
            Err(problem) => {
                output::progress(&format!("warning: {problem}"));
                continue;
            }
        };
        let row = resource_row(&view, facts, organizations, Timestamp::now());
        let shown = facts_shown(&row);
        let key = (row.kind, row.namespace.clone(), row.name.clone());
        if printed.get(&key) == Some(&shown) {
            continue;
        }
        printed.insert(key, shown);
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

/// What a row says, without the ages that only tell how long ago (they move with the clock).
fn facts_shown(row: &ResourceRow) -> String {
    let mut row = row.clone();
    row.secret_set_age_seconds = None;
    row.condition_age_seconds = None;
    serde_json::to_string(&row).unwrap_or_default()
}
