//! The runbook pages as markdown: one page per reason, and the index.

use std::fmt::Write as _;

use super::{
    ALERTS, AlertRunbook, EventReason, Facts, Progress, Reason, ReasonEntry, placeholders_in,
    render,
};

/// The command that regenerates the pages, named in their footers.
pub const GENERATE_COMMAND: &str = "cargo run -p nauthera-tests --bin nauthera-generate";

/// The runbook page of one reason, with the placeholders `facts` know filled in.
pub fn runbook_page(entry: &ReasonEntry, facts: &Facts) -> String {
    let runbook = &entry.runbook;
    let mut body = String::new();
    // `write!` into a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(body, "# {}: {}\n", entry.reason, runbook.title);
    let _ = writeln!(body, "{}\n", runbook.summary);
    let _ = writeln!(
        body,
        "| Ready | Phase | Event | Metric labels | GitOps tools |"
    );
    let _ = writeln!(body, "|---|---|---|---|---|");
    let causes: Vec<String> = entry.causes.iter().map(|c| format!("`{c}`")).collect();
    let _ = writeln!(
        body,
        "| {} | {} | `{}` ({}) | `reason=\"{}\"`, `cause`: {} | {} |\n",
        entry.ready,
        entry.phase_text(),
        entry.reason.event(),
        entry.reason.event().event_type(),
        entry.metric_label,
        causes.join(", "),
        gitops_text(entry),
    );

    section(&mut body, "Meaning", runbook.meaning);
    section(&mut body, "Impact", runbook.impact);

    let _ = writeln!(body, "## Diagnosis\n");
    if entry.reason.is_policy_own() {
        let _ = writeln!(
            body,
            "`kubectl nauthera diagnose -f FILE` compiles a ClientPolicy of the file as the \
             reconciler does and gives the same verdict, cause and message.\n"
        );
    } else {
        let _ = writeln!(
            body,
            "`kubectl nauthera diagnose <kind>/<name> -n <ns>` runs the steps marked *checked* \
             with the live facts filled in.\n"
        );
    }
    for (number, step) in runbook.diagnosis.iter().enumerate() {
        let _ = writeln!(body, "{}. {}\n", number + 1, step.text);
        let _ = writeln!(body, "   ```sh\n   {}\n   ```\n", step.command);
        if let Some(what) = step.check.describe() {
            let _ = writeln!(body, "   *Checked:* the plugin {what}.\n");
        }
    }

    finished_page(
        body,
        runbook.mitigation,
        runbook.escalation,
        facts,
        "reasons",
    )
}

/// The end of a runbook page: its mitigation and escalation, the facts filled in, the legend of
/// the placeholders left and the footer linking back to the index of `all`.
fn finished_page(
    mut body: String,
    mitigation: &[&str],
    escalation: &[&str],
    facts: &Facts,
    all: &str,
) -> String {
    let _ = writeln!(body, "## Mitigation\n");
    for bullet in mitigation {
        let _ = writeln!(body, "- {}", indent_continuation(bullet, "  "));
    }
    body.push('\n');
    section(&mut body, "Escalation", escalation);

    let mut page = render(&body, facts);
    let _ = writeln!(page, "---\n");
    let legend: Vec<String> = placeholders_in(&page)
        .into_iter()
        .map(|p| format!("`{}` {}", p.token(), p.meaning()))
        .collect();
    if !legend.is_empty() {
        let _ = writeln!(page, "Placeholders: {}.\n", legend.join("; "));
    }
    let _ = writeln!(page, "{}", footer(&format!("[All {all}](README.md) · ")));
    page
}

/// The index of every runbook page, and of the events the reconciler records.
pub fn runbook_index() -> String {
    let mut page = String::new();
    let _ = writeln!(page, "# Runbooks\n");
    let _ = writeln!(
        page,
        "One page per reason the reconciler reports. The reason is the `Ready` condition's \
         reason and `status.reason` (so `kubectl get oidcclients -A` shows it), the `reason` \
         label of `nauthera_operator_reconciles_total`, and the reason of the event recorded when \
         a resource enters it. `kubectl nauthera diagnose <kind>/<name> -n <ns>` shows the page of \
         a resource's reason with its live facts filled in.\n"
    );
    let _ = writeln!(
        page,
        "Every resource also carries the conditions GitOps tools read (kstatus, as Flux, \
         `kubectl wait` and kustomize judge a custom resource): `Reconciling=True` while the \
         reconciler works on it or waits for something that comes by itself, `Stalled=True` when \
         only a person can move it on, neither when the generation is in force; each with the \
         reason and message of `Ready`, and `observedGeneration` saying which generation was \
         judged. The GitOps column says which, with the result kstatus and Argo CD's health \
         checks (`deploy/argocd/`) give; [GitOps](../gitops.md) shows how to use them.\n"
    );
    let _ = writeln!(
        page,
        "| Reason | Ready | Phase | GitOps tools | Summary | Page |"
    );
    let _ = writeln!(page, "|---|---|---|---|---|---|");
    for reason in Reason::ALL {
        let entry = reason.entry();
        let _ = writeln!(
            page,
            "| `{reason}` | {} | {} | {} | {} | [{reason}.md]({reason}.md) |",
            entry.ready,
            entry.phase_text(),
            gitops_text(entry),
            entry.runbook.summary,
        );
    }
    let _ = writeln!(page, "\n## Alerts\n");
    let _ = writeln!(
        page,
        "The PrometheusRule's alerts on a reason link the reason's page; these watch something \
         else.\n"
    );
    let _ = writeln!(page, "| Alert | Metric | Summary | Page |");
    let _ = writeln!(page, "|---|---|---|---|");
    for alert in &ALERTS {
        let _ = writeln!(
            page,
            "| `{}` | `{}` | {} | [{}.md]({}.md) |",
            alert.alert, alert.metric, alert.runbook.summary, alert.alert, alert.alert
        );
    }
    let _ = writeln!(page, "\n## Events\n");
    let _ = writeln!(page, "| Event reason | Type | Recorded when |");
    let _ = writeln!(page, "|---|---|---|");
    for event in EventReason::ALL {
        let _ = writeln!(
            page,
            "| `{event}` | {} | {} |",
            event.event_type(),
            event.recorded_when()
        );
    }
    let _ = writeln!(page, "\n---\n");
    let _ = writeln!(page, "{}", footer(""));
    page
}

/// The runbook page of an alert that watches something other than a reason.
pub fn alert_runbook_page(alert: &AlertRunbook, facts: &Facts) -> String {
    let runbook = &alert.runbook;
    let mut body = String::new();
    let _ = writeln!(body, "# {}: {}\n", alert.alert, runbook.title);
    let _ = writeln!(body, "{}\n", runbook.summary);
    let _ = writeln!(body, "| Alert | Metric |");
    let _ = writeln!(body, "|---|---|");
    let _ = writeln!(body, "| `{}` | `{}` |\n", alert.alert, alert.metric);
    section(&mut body, "Meaning", runbook.meaning);
    section(&mut body, "Impact", runbook.impact);
    let _ = writeln!(body, "## Diagnosis\n");
    for (number, step) in runbook.diagnosis.iter().enumerate() {
        let _ = writeln!(body, "{}. {}\n", number + 1, step.text);
        let _ = writeln!(body, "   ```sh\n   {}\n   ```\n", step.command);
    }
    finished_page(
        body,
        runbook.mitigation,
        runbook.escalation,
        facts,
        "runbooks",
    )
}

fn footer(prefix: &str) -> String {
    format!(
        "{prefix}Generated from `shared/src/catalog` by `{GENERATE_COMMAND}`; edit the catalog, \
         not this page."
    )
}

/// What GitOps tools read from a reason: the condition that is True, with kstatus's result and
/// Argo CD's health, and the causes that read otherwise.
pub fn gitops_text(entry: &ReasonEntry) -> String {
    let mut text = progress_words(entry.progress).to_owned();
    let mut others: Vec<(Progress, Vec<String>)> = Vec::new();
    for (cause, progress) in entry.progress_by_cause {
        match others.iter_mut().find(|(p, _)| p == progress) {
            Some((_, causes)) => causes.push(format!("`{cause}`")),
            None => others.push((*progress, vec![format!("`{cause}`")])),
        }
    }
    for (progress, causes) in others {
        let _ = write!(
            text,
            "; with {}: {}",
            causes.join(", "),
            progress_words(progress)
        );
    }
    text
}

fn progress_words(progress: Progress) -> &'static str {
    match progress {
        Progress::Settled => {
            "neither `Reconciling` nor `Stalled` (kstatus Current, Argo CD Healthy)"
        }
        Progress::Reconciling => "`Reconciling=True` (kstatus InProgress, Argo CD Progressing)",
        Progress::Stalled => "`Stalled=True` (kstatus Failed, Argo CD Degraded)",
        Progress::AwaitsDecision => "`Stalled=True` (kstatus Failed, Argo CD Suspended)",
        Progress::Observing => {
            "neither `Reconciling` nor `Stalled`, `Ready=False` (kstatus InProgress, as it reads \
             a False `Ready`; Argo CD Suspended)"
        }
    }
}

fn section(out: &mut String, heading: &str, paragraphs: &[&str]) {
    let _ = writeln!(out, "## {heading}\n");
    for paragraph in paragraphs {
        let _ = writeln!(out, "{paragraph}\n");
    }
}

/// Continuation lines of a list item indented under it.
fn indent_continuation(text: &str, indent: &str) -> String {
    text.replace('\n', &format!("\n{indent}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_has_every_section_in_order_and_the_footer() {
        let page = runbook_page(Reason::Refused.entry(), &Facts::install_defaults());
        let headings: Vec<&str> = page.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(
            headings,
            [
                "## Meaning",
                "## Impact",
                "## Diagnosis",
                "## Mitigation",
                "## Escalation"
            ]
        );
        assert!(page.starts_with("# Refused: "));
        assert!(page.contains("| False | Error | `Refused` (Warning) |"));
        assert!(page.contains(GENERATE_COMMAND));
        assert!(page.contains("dns:nauthera-reconciler.nauthera-system.svc"));
        assert!(!page.contains("<reconciler-ns>"));
    }

    #[test]
    fn live_facts_replace_placeholders_and_the_legend_lists_only_the_rest() {
        let facts = Facts::install_defaults()
            .with(super::super::Placeholder::Namespace, "team-a")
            .with(super::super::Placeholder::Name, "shop")
            .with(super::super::Placeholder::Kind, "oidcclient");
        let page = runbook_page(Reason::Drifted.entry(), &facts);
        assert!(page.contains("kubectl -n team-a describe oidcclient shop"));
        let legend = page
            .lines()
            .find(|l| l.starts_with("Placeholders:"))
            .unwrap();
        assert!(legend.contains("`<slug>`"), "{legend}");
        assert!(!legend.contains("`<ns>`"), "{legend}");
    }

    #[test]
    fn the_index_links_every_reason_and_lists_every_event() {
        let index = runbook_index();
        for reason in Reason::ALL {
            assert!(
                index.contains(&format!("[{reason}.md]({reason}.md)")),
                "{reason}"
            );
        }
        for event in EventReason::ALL {
            assert!(index.contains(&format!("| `{event}` |")), "{event}");
        }
        for alert in &ALERTS {
            assert!(index.contains(&format!("[{0}.md]({0}.md)", alert.alert)));
        }
    }

    #[test]
    fn an_alert_page_has_every_section_and_the_footer() {
        let page = alert_runbook_page(&ALERTS[0], &Facts::install_defaults());
        assert!(page.starts_with("# NautheraSecretRotationOverdue: "));
        assert!(page.contains("`nauthera_operator_secrets_rotation_overdue`"));
        assert!(page.contains("## Mitigation"));
        assert!(page.contains(GENERATE_COMMAND));
    }
}
