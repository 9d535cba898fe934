//! The status report as text: a header for the control plane, a table of resources, a summary.

use std::fmt::Write as _;
use std::io::Write;

use nauthera_shared::catalog::Phase;
use nauthera_shared::grants::GrantEntry;

use super::policies::{Held, PoliciesReport, PolicyHolds};
use super::report::{StatusReport, Summary};
use super::rows::ResourceRow;
use crate::cluster::control_plane::Freshness;
use crate::cluster::control_plane::report::{CertificateState, ControlPlaneReport, ProbeReport};
use crate::model::drift::{DriftSummary, DriftVerdict};
use crate::model::grant_check::{GrantCheck, entry_yaml};
use crate::output::timefmt::short_duration;
use crate::output::{Painter, TableCell, Tone, shorten, write_table};

/// How many characters of a message the narrow table shows.
const MESSAGE_CHARS: usize = 60;

#[cfg(test)]
pub fn render(report: &StatusReport, wide: bool, painter: Painter) -> String {
    let mut out = Vec::new();
    // Writing into memory cannot fail.
    let _ = render_to(&mut out, report, wide, painter);
    String::from_utf8_lossy(&out).into_owned()
}

/// The report for people, written as it goes: the resources' table is never held whole.
pub fn render_to<W: Write + ?Sized>(
    out: &mut W,
    report: &StatusReport,
    wide: bool,
    painter: Painter,
) -> std::io::Result<()> {
    let mut head = String::new();
    control_plane(&mut head, &report.control_plane, painter);
    // Shards of one cluster: a block each.
    for shard in &report.shards {
        head.push('\n');
        control_plane(&mut head, shard, painter);
    }
    head.push('\n');
    if report.resources.is_empty() && report.observed.is_empty() {
        let _ = writeln!(
            head,
            "No nauthera resources found{}.",
            if report.scope == "*" {
                String::new()
            } else {
                format!(" in namespace {}", report.scope)
            }
        );
    }
    out.write_all(head.as_bytes())?;
    if !report.resources.is_empty() {
        write_resources(out, &report.resources, wide, true, painter)?;
    }
    if !report.observed.is_empty() {
        if !report.resources.is_empty() {
            out.write_all(b"\n")?;
        }
        write_observed(out, &report.observed, wide, painter)?;
    }
    let mut tail = String::new();
    for kind in &report.not_installed {
        let _ = writeln!(
            tail,
            "{} the CRD {}.nauthera.io is not installed: kubectl apply -k deploy/crds",
            painter.paint("warning:", Tone::Warn),
            kind.plural()
        );
    }
    if let Some(policies) = &report.policies {
        tail.push('\n');
        policies_section(&mut tail, policies, report.scope == "*", painter);
    }
    tail.push('\n');
    summary(
        &mut tail,
        &report.summary,
        &report.resources,
        &report.observed,
        painter,
    );
    out.write_all(tail.as_bytes())
}

/// The resources' rows alone, without the header, the control plane or the summary: what
/// scripts read (`--no-headers`), and each change `-w` prints.
pub fn write_rows<W: Write + ?Sized>(
    out: &mut W,
    rows: &[ResourceRow],
    wide: bool,
    painter: Painter,
) -> std::io::Result<()> {
    write_resources(out, rows, wide, false, painter)
}

fn control_plane(out: &mut String, cp: &ControlPlaneReport, painter: Painter) {
    let shard = cp
        .scope
        .as_ref()
        .and_then(|scope| scope.shard.as_deref())
        .map(|shard| format!(", shard {shard}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{} (namespace {}{shard})",
        painter.paint("Control plane", Tone::Strong),
        cp.namespace
    );
    if let Some(cluster) = &cp.cluster_name {
        let _ = writeln!(out, "  Cluster:      {cluster}");
    }
    if let Some(scope) = &cp.scope {
        let _ = writeln!(out, "  Scope:        {}", scope.describe());
    }
    let dash = || "-".to_owned();
    let reconciler = match &cp.reconciler {
        Some(replicas) => {
            let tone = if replicas.ready > 0 {
                Tone::Good
            } else {
                Tone::Bad
            };
            painter.paint(
                &format!("{}/{} ready", replicas.ready, replicas.desired),
                tone,
            )
        }
        None => painter.paint("not found", Tone::Bad),
    };
    let _ = writeln!(
        out,
        "  Reconciler:   {reconciler}, leader {}, version {}",
        cp.leader.clone().unwrap_or_else(dash),
        cp.reconciler_version.clone().unwrap_or_else(dash)
    );
    if !cp.state_found {
        for finding in &cp.findings {
            let _ = writeln!(out, "  {} {finding}", painter.paint("!", Tone::Bad));
        }
        return;
    }
    let _ = writeln!(
        out,
        "  Server:       {} at {}",
        cp.server_build
            .clone()
            .unwrap_or_else(|| "never answered".to_owned()),
        cp.server_address.clone().unwrap_or_else(dash)
    );
    let _ = writeln!(
        out,
        "  Identity:     {}",
        cp.identity.clone().unwrap_or_else(dash)
    );
    if cp.grants.is_empty() {
        let _ = writeln!(out, "  Grants:       none reported");
    }
    for (index, grant) in cp.grants.iter().enumerate() {
        let label = if index == 0 { "Grants:" } else { "" };
        let _ = writeln!(out, "  {label:<13} {}", grant_line(grant));
    }
    if let Some(probe) = &cp.probe {
        let _ = writeln!(out, "  Probe:        {}", probe_line(cp, probe, painter));
    }
    if let Some(certificate) = &cert_line(cp, painter) {
        let _ = writeln!(out, "  Certificate:  {certificate}");
    }
    for finding in &cp.findings {
        let _ = writeln!(out, "  {} {finding}", painter.paint("!", Tone::Bad));
    }
}

/// The probe's outcome, since when, as of when, and its message.
fn probe_line(cp: &ControlPlaneReport, probe: &ProbeReport, painter: Painter) -> String {
    let tone = if probe.reason == Some(nauthera_shared::catalog::Reason::Registered) {
        Tone::Good
    } else {
        Tone::Bad
    };
    let mut line = painter.paint(probe.outcome, tone);
    if let Some(since) = probe.since_seconds {
        let _ = write!(line, " since {} ago", short_duration(since));
    }
    // As of when: the Lease renewal while the leader publishes.
    match (&cp.freshness, probe.age_seconds) {
        (Some(Freshness::Unknown { why }), _) => {
            let _ = write!(
                line,
                " ({})",
                painter.paint(&format!("freshness unknown: {why}"), Tone::Dim)
            );
        }
        (_, Some(age)) => {
            let _ = write!(line, " (as of {} ago)", short_duration(age));
        }
        _ => {}
    }
    if let Some(message) = &probe.message {
        let _ = write!(line, ": {message}");
    }
    line
}

fn cert_line(cp: &ControlPlaneReport, painter: Painter) -> Option<String> {
    let certificate = cp.certificate.as_ref()?;
    let when = short_duration(certificate.expires_in_seconds.abs());
    let (text, tone) = match certificate.state {
        CertificateState::Valid => (format!("valid for {when}"), Tone::Good),
        CertificateState::Expiring => (format!("expires in {when}"), Tone::Warn),
        CertificateState::Expired => (format!("expired {when} ago"), Tone::Bad),
    };
    Some(format!(
        "{} (not after {})",
        painter.paint(&text, tone),
        certificate.not_after
    ))
}

fn grant_line(grant: &GrantEntry) -> String {
    let operations: Vec<&str> = grant.operations.iter().map(|op| op.as_str()).collect();
    format!(
        "{} on organizations {} in namespaces {}",
        operations.join(", "),
        grant.organizations.join(", "),
        grant.namespaces.join(", ")
    )
}

fn phase_tone(phase: Option<Phase>) -> Tone {
    match phase {
        Some(Phase::Registered) => Tone::Good,
        Some(Phase::Pending) | Some(Phase::Observed) | None => Tone::Warn,
        Some(Phase::Error) => Tone::Bad,
    }
}

fn revision_cell(row: &ResourceRow) -> String {
    match (&row.declared_revision, &row.server_revision) {
        (None, None) => "-".to_owned(),
        (Some(declared), Some(server)) if declared == server => declared.clone(),
        (declared, server) => format!(
            "{} (server {})",
            declared.as_deref().unwrap_or("-"),
            server.as_deref().unwrap_or("-")
        ),
    }
}

fn grant_tone(grant: &GrantCheck) -> Tone {
    match grant {
        GrantCheck::Covered => Tone::Good,
        GrantCheck::Outside { .. } => Tone::Bad,
        GrantCheck::Unknown { .. } => Tone::Dim,
    }
}

fn write_resources<W: Write + ?Sized>(
    out: &mut W,
    rows: &[ResourceRow],
    wide: bool,
    with_header: bool,
    painter: Painter,
) -> std::io::Result<()> {
    let header: &[&str] = if wide {
        &[
            "KIND",
            "NAMESPACE",
            "NAME",
            "PHASE",
            "REASON",
            "GENERATION",
            "REVISION",
            "SERVER REVISION",
            "CLIENT ID",
            "SECRET SET",
            "NEXT ROTATION",
            "ORGANIZATION",
            "GRANT",
            "AGE",
            "MESSAGE",
        ]
    } else {
        &[
            "KIND",
            "NAMESPACE",
            "NAME",
            "PHASE",
            "REASON",
            "REVISION",
            "GRANT",
            "AGE",
            "MESSAGE",
        ]
    };
    write_table(
        out,
        with_header.then_some(header),
        rows,
        |row| resource_cells(row, wide),
        painter,
    )
}

fn resource_cells(row: &ResourceRow, wide: bool) -> Vec<TableCell> {
    let opt = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".to_owned());
    let number = |value: Option<i64>| value.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let plain = |text: String| (text, None);
    let phase = row.phase.map_or("-", Phase::as_str);
    let reason = row.reason.map_or("-", |reason| reason.as_str());
    let age = row
        .condition_age_seconds
        .map_or_else(|| "-".to_owned(), short_duration);
    let message = row.message.as_deref().unwrap_or_default();
    let mut cells = vec![
        plain(row.kind.as_str().to_owned()),
        plain(row.namespace.clone()),
        plain(row.name.clone()),
        (phase.to_owned(), Some(phase_tone(row.phase))),
        plain(reason.to_owned()),
    ];
    if wide {
        cells.push(plain(format!(
            "{}/{}/{}",
            number(row.generation),
            number(row.observed_generation),
            number(row.generation_in_force)
        )));
        cells.push(plain(opt(&row.declared_revision)));
        cells.push(plain(opt(&row.server_revision)));
        cells.push(plain(opt(&row.client_id)));
        cells.push(plain(row.secret_set_age_seconds.map_or_else(
            || "-".to_owned(),
            |seconds| format!("{} ago", short_duration(seconds)),
        )));
        cells.push(plain(row.next_rotation_in_seconds.map_or_else(
            || "-".to_owned(),
            |seconds| match seconds {
                ..=0 => "due".to_owned(),
                _ => format!("in {}", short_duration(seconds)),
            },
        )));
        cells.push(plain(opt(&row.organization)));
    } else {
        cells.push(plain(revision_cell(row)));
    }
    cells.push((row.grant.label().to_owned(), Some(grant_tone(&row.grant))));
    cells.push(plain(age));
    cells.push(plain(if wide {
        shorten(message, usize::MAX)
    } else {
        shorten(message, MESSAGE_CHARS)
    }));
    cells
}

fn summary(
    out: &mut String,
    summary: &Summary,
    rows: &[ResourceRow],
    observed: &[ResourceRow],
    painter: Painter,
) {
    let phases: Vec<String> = summary
        .by_phase
        .iter()
        .map(|(phase, count)| format!("{count} {phase}"))
        .collect();
    let _ = writeln!(
        out,
        "{} {} resource{}{}",
        painter.paint("Summary:", Tone::Strong),
        summary.total,
        if summary.total == 1 { "" } else { "s" },
        if phases.is_empty() {
            String::new()
        } else {
            format!(": {}", phases.join(", "))
        }
    );
    if !summary.by_reason.is_empty() {
        let reasons: Vec<String> = summary
            .by_reason
            .iter()
            .map(|(reason, count)| format!("{reason} {count}"))
            .collect();
        let _ = writeln!(out, "  Reasons: {}", reasons.join(", "));
    }
    if summary.observed > 0 {
        let identical = observed
            .iter()
            .filter(|row| row.comparison() == "identical")
            .count();
        let _ = writeln!(
            out,
            "  Observed: {} resource{} under managementPolicy: Observe ({identical} identical to \
             the server); nothing is written for {}",
            summary.observed,
            if summary.observed == 1 { "" } else { "s" },
            if summary.observed == 1 { "it" } else { "them" },
        );
    }
    drift_line(out, &summary.drift, rows, painter);
    adoption_lines(out, summary.awaiting_adoption, rows, painter);
    resource_notes(out, rows, painter);
    let all: Vec<&ResourceRow> = rows.iter().chain(observed).collect();
    grant_lines(out, summary.outside_grant, &all, painter);
}

/// The resources observed only: what the server holds, who wrote it, and how the manifest
/// compares, apart from the resources the reconciler manages.
fn write_observed<W: Write + ?Sized>(
    out: &mut W,
    rows: &[ResourceRow],
    wide: bool,
    painter: Painter,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{} (managementPolicy: Observe; the reconciler reads and never writes)",
        painter.paint("Observed", Tone::Strong)
    )?;
    let header: &[&str] = if wide {
        &[
            "KIND",
            "NAMESPACE",
            "NAME",
            "REASON",
            "SERVER REVISION",
            "WRITTEN BY",
            "WRITTEN",
            "COMPARED",
            "DIFFERENCES",
            "GRANT",
        ]
    } else {
        &[
            "KIND",
            "NAMESPACE",
            "NAME",
            "REASON",
            "SERVER REVISION",
            "WRITTEN BY",
            "COMPARED",
            "GRANT",
        ]
    };
    write_table(
        out,
        Some(header),
        rows,
        |row| observed_cells(row, wide),
        painter,
    )
}

fn observed_cells(row: &ResourceRow, wide: bool) -> Vec<TableCell> {
    let plain = |text: String| (text, None);
    let object = row.server_object.as_ref();
    let revision = object
        .filter(|object| !object.absent)
        .map_or_else(|| "-".to_owned(), |object| object.revision.clone());
    let writer = object
        .filter(|object| !object.absent)
        .map_or_else(|| "-".to_owned(), |object| object.writer());
    let comparison = row.comparison();
    let tone = match comparison.as_str() {
        "identical" => Tone::Good,
        "-" => Tone::Dim,
        _ => Tone::Warn,
    };
    let mut cells = vec![
        plain(row.kind.as_str().to_owned()),
        plain(row.namespace.clone()),
        plain(row.name.clone()),
        (
            row.reason.map_or("-", |reason| reason.as_str()).to_owned(),
            Some(if row.attention { Tone::Bad } else { Tone::Dim }),
        ),
        plain(revision),
        plain(writer),
    ];
    if wide {
        cells.push(plain(
            object
                .and_then(|object| object.written_at.as_ref())
                .map_or_else(|| "-".to_owned(), |at| at.0.to_string()),
        ));
    }
    cells.push((comparison, Some(tone)));
    if wide {
        cells.push(plain(
            object
                .filter(|object| !object.differences.is_empty())
                .map_or_else(|| "-".to_owned(), |object| object.differences.join(", ")),
        ));
    }
    cells.push((row.grant.label().to_owned(), Some(grant_tone(&row.grant))));
    cells
}

/// The resources that wait for a person to adopt the object the server holds, each with the
/// command that does it.
fn adoption_lines(out: &mut String, waiting: usize, rows: &[ResourceRow], painter: Painter) {
    if waiting == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  {} {waiting} resource{} the server already holds, written by somebody else; not \
         written over until a person adopts {}:",
        painter.paint("Adoption:", Tone::Warn),
        if waiting == 1 {
            " names an object"
        } else {
            "s name objects"
        },
        if waiting == 1 { "it" } else { "each" },
    );
    for row in rows.iter().filter(|row| row.awaits_adoption()) {
        let held = row
            .server_object
            .as_ref()
            .filter(|object| !object.absent)
            .map(|object| {
                format!(
                    "revision {} by {}, {}; ",
                    object.revision,
                    object.writer(),
                    row.comparison()
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    {}/{} in {}: {held}kubectl nauthera adopt {}/{} -n {}",
            row.kind.singular(),
            row.name,
            row.namespace,
            row.kind.singular(),
            row.name,
            row.namespace
        );
    }
}

/// What the drift summary says, with where to look next.
fn drift_line(out: &mut String, drift: &DriftSummary, rows: &[ResourceRow], painter: Painter) {
    let drifted: Vec<&ResourceRow> = rows.iter().filter(|row| row.drift.is_some()).collect();
    match drift.verdict {
        DriftVerdict::None => {}
        DriftVerdict::OneChange => {
            let target = drifted
                .first()
                .map(|row| {
                    format!(
                        "; see kubectl nauthera diagnose {}/{} -n {}",
                        row.kind.as_str().to_ascii_lowercase(),
                        row.name,
                        row.namespace
                    )
                })
                .unwrap_or_default();
            let who = drift
                .describe_actors()
                .map(|actors| format!(" by {actors}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {} 1 resource drifted: changed on the server{who}{target}",
                painter.paint("Drift:", Tone::Warn)
            );
        }
        DriftVerdict::SeparateChanges => {
            let who = drift
                .describe_actors()
                .map(|actors| format!(" by {actors}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {} {} resources drifted: separate changes on the server{who}; check each \
                 with kubectl nauthera diagnose",
                painter.paint("Drift:", Tone::Warn),
                drift.count
            );
        }
        DriftVerdict::ServerRestore => {
            let _ = writeln!(
                out,
                "  {} {} resources drifted, {} by a restore of the server (its history \
                 restarted, or its audit log says so); once understood, kubectl nauthera \
                 restore --all-drifted",
                painter.paint("Drift:", Tone::Bad),
                drift.count,
                drift.by_restore
            );
        }
    }
}

/// The resources another reconciler manages on the server, and the drifts a new generation was
/// recently written over.
fn resource_notes(out: &mut String, rows: &[ResourceRow], painter: Painter) {
    for row in rows {
        if let Some(elsewhere) = &row.managed_elsewhere {
            let _ = writeln!(
                out,
                "  {} {}/{} in {}: the object on the server is managed by {} (revision {}); \
                 kubectl nauthera diagnose {}/{} -n {}",
                painter.paint("Managed elsewhere:", Tone::Warn),
                row.kind.singular(),
                row.name,
                row.namespace,
                elsewhere.writer(),
                elsewhere.revision,
                row.kind.singular(),
                row.name,
                row.namespace
            );
        }
        if let Some(superseded) = &row.recently_superseded {
            let _ = writeln!(
                out,
                "  {} {}/{} in {}: {superseded}",
                painter.paint("Superseded:", Tone::Warn),
                row.kind.singular(),
                row.name,
                row.namespace
            );
        }
    }
}

/// The resources outside the reconciler's grant, each with the allowedClients entry that would
/// cover it.
fn grant_lines(out: &mut String, outside_grant: usize, rows: &[&ResourceRow], painter: Painter) {
    if outside_grant > 0 {
        let _ = writeln!(
            out,
            "  {} {} resource{} outside the reconciler's grant; the server will refuse {}:",
            painter.paint("Grant:", Tone::Bad),
            outside_grant,
            if outside_grant == 1 { " is" } else { "s are" },
            if outside_grant == 1 { "it" } else { "them" },
        );
        for row in rows {
            if let GrantCheck::Outside {
                reason,
                cause,
                proposed_entry,
            } = &row.grant
            {
                let _ = writeln!(
                    out,
                    "    {} {}/{}: {reason}: {cause}; this allowedClients entry covers it:",
                    row.kind, row.namespace, row.name
                );
                for line in entry_yaml(proposed_entry).lines() {
                    let _ = writeln!(out, "      {line}");
                }
            }
        }
    }
}

/// Per ClientPolicy, the resources it holds back, and what its own status says about them.
fn policies_section(
    out: &mut String,
    report: &PoliciesReport,
    every_namespace: bool,
    painter: Painter,
) {
    let heading = painter.paint("ClientPolicies", Tone::Strong);
    if let Some(note) = &report.note {
        let _ = writeln!(out, "{heading}: {note}");
    } else {
        let _ = writeln!(out, "{heading}");
    }
    let mut idle = Vec::new();
    for item in &report.items {
        let name = if item.name.is_empty() {
            "(a policy the status does not name)"
        } else {
            &item.name
        };
        policy_warnings(out, item, name, painter);
        if item.held.is_empty() {
            let elsewhere =
                item.violations.unwrap_or_default() + item.awaiting_approval.unwrap_or_default();
            idle.push(if every_namespace || elsewhere == 0 {
                name.to_owned()
            } else {
                format!("{name} ({elsewhere} elsewhere, by its status)")
            });
            continue;
        }
        let counts = match (item.held_violations(), item.held_awaiting()) {
            (v, 0) => format!("{v} PolicyViolation"),
            (0, a) => format!("{a} WaitingForApproval"),
            (v, a) => format!("{v} PolicyViolation, {a} WaitingForApproval"),
        };
        let cluster_wide = match (every_namespace, item.violations, item.awaiting_approval) {
            (false, Some(v), Some(a)) => {
                format!(
                    " (cluster-wide, by its status: {}, {a} awaiting approval)",
                    violations(v)
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  {name} holds back {}: {counts}{cluster_wide}",
            item.held.len()
        );
        held_table(out, &item.held, painter);
        if item.counts_agree == Some(false) {
            let _ = writeln!(
                out,
                "  {} its status counts {} and {} awaiting approval, the resources' \
                 statuses {} and {}: its status may be behind (kubectl get clientpolicy {name} -o \
                 yaml)",
                painter.paint("!", Tone::Warn),
                violations(item.violations.unwrap_or_default()),
                item.awaiting_approval.unwrap_or_default(),
                item.held_violations(),
                item.held_awaiting()
            );
        }
    }
    if !idle.is_empty() {
        let _ = writeln!(
            out,
            "  Holding nothing back{}: {}",
            if every_namespace {
                ""
            } else {
                " in this namespace"
            },
            idle.join(", ")
        );
    }
}

/// A policy that is not in force, or that the statuses name but does not exist.
fn policy_warnings(out: &mut String, item: &PolicyHolds, name: &str, painter: Painter) {
    if let Some(false) = item.ready {
        let _ = writeln!(
            out,
            "  {} ClientPolicy {name} is not in force{}",
            painter.paint("!", Tone::Bad),
            item.ready_message
                .as_ref()
                .map(|message| format!(": {message}"))
                .unwrap_or_default()
        );
    }
    if item.found == Some(false) {
        let _ = writeln!(
            out,
            "  {} ClientPolicy {name} is named by the statuses below but does not exist \
             (deleted?): the reconciler evaluates them again",
            painter.paint("!", Tone::Warn)
        );
    }
}

/// The resources a policy holds back, as an indented table.
fn held_table(out: &mut String, held: &[Held], painter: Painter) {
    let mut table = Vec::new();
    let _ = write_table(
        &mut table,
        None,
        held,
        |held| {
            let rule = match &held.field {
                Some(field) => format!("rule {} ({field})", held.rule),
                None if held.rule.is_empty() => "-".to_owned(),
                None => format!("rule {}", held.rule),
            };
            let tone = if held.reason == nauthera_shared::catalog::Reason::PolicyViolation {
                Tone::Bad
            } else {
                Tone::Warn
            };
            vec![
                (held.kind.as_str().to_owned(), None),
                (held.namespace.clone(), None),
                (held.name.clone(), None),
                (held.reason.as_str().to_owned(), Some(tone)),
                (rule, None),
            ]
        },
        painter,
    );
    for line in String::from_utf8_lossy(&table).lines() {
        let _ = writeln!(out, "    {line}");
    }
}

/// "1 violation", "2 violations".
fn violations(count: u32) -> String {
    match count {
        1 => "1 violation".to_owned(),
        n => format!("{n} violations"),
    }
}
