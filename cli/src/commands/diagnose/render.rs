//! Diagnoses as text: the runbook's heading and summary, each step with its outcome, command,
//! findings and link, then mitigation and escalation.

use std::fmt::Write;

use super::check_status::CheckStatus;
use super::evaluate::Diagnosis;
use crate::output::{Painter, Tone};

pub fn status_label(status: CheckStatus, painter: Painter) -> String {
    let (text, tone) = match status {
        CheckStatus::Passed => ("passed ", Tone::Good),
        CheckStatus::Warning => ("warning", Tone::Warn),
        CheckStatus::Failed => ("failed ", Tone::Bad),
        CheckStatus::Info => ("info   ", Tone::Dim),
        CheckStatus::Manual => ("manual ", Tone::Dim),
    };
    format!("[{}]", painter.paint(text, tone))
}

pub fn render(diagnoses: &[Diagnosis], painter: Painter) -> String {
    let mut out = String::new();
    if diagnoses.is_empty() {
        out.push_str("Nothing to diagnose: every resource in scope is Registered.\n");
        return out;
    }
    for (index, diagnosis) in diagnoses.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        one(&mut out, diagnosis, painter);
    }
    if diagnoses.len() > 1 {
        let attention = diagnoses.iter().filter(|d| d.attention).count();
        let _ = writeln!(
            out,
            "\n{} {} resources diagnosed, {attention} need attention",
            painter.paint("Summary:", Tone::Strong),
            diagnoses.len()
        );
    }
    out
}

fn one(out: &mut String, diagnosis: &Diagnosis, painter: Painter) {
    let reason_tone = if diagnosis.attention {
        Tone::Bad
    } else {
        Tone::Good
    };
    let _ = writeln!(
        out,
        "{} {}/{}: {} ({})",
        painter.paint(diagnosis.kind.as_str(), Tone::Strong),
        diagnosis.namespace,
        diagnosis.name,
        painter.paint(diagnosis.reason.as_str(), reason_tone),
        diagnosis.title
    );
    if !diagnosis.reconciled {
        let _ = writeln!(
            out,
            "  The resource has no status yet; showing the Pending runbook."
        );
    }
    let _ = writeln!(out, "  {}", diagnosis.summary);
    if let Some(message) = &diagnosis.message {
        let _ = writeln!(out, "  Message: {message}");
    }
    let _ = writeln!(out, "  Runbook: {}", diagnosis.runbook);
    let _ = writeln!(out, "\n{}", painter.paint("Diagnosis", Tone::Strong));
    for step in &diagnosis.steps {
        let _ = writeln!(
            out,
            "{} {}. {}",
            status_label(step.status, painter),
            step.number,
            step.text
        );
        let indent = "          ";
        if !step.command.is_empty() {
            let _ = writeln!(out, "{indent}$ {}", step.command);
        }
        for finding in &step.findings {
            let _ = writeln!(out, "{indent}{finding}");
        }
        // Every judged check links its runbook section; facts and manual steps need none.
        if matches!(
            step.status,
            CheckStatus::Passed | CheckStatus::Warning | CheckStatus::Failed
        ) {
            let _ = writeln!(out, "{indent}runbook: {}", step.runbook);
        }
    }
    let _ = writeln!(out, "\n{}", painter.paint("Mitigation", Tone::Strong));
    for item in &diagnosis.mitigation {
        let _ = writeln!(out, "  - {item}");
    }
    let _ = writeln!(out, "\n{}", painter.paint("Escalation", Tone::Strong));
    for item in &diagnosis.escalation {
        let _ = writeln!(out, "  {item}");
    }
}
