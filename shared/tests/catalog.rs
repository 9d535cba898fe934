//! The reason catalog as a whole: every entry complete, every string bounded and unique, every
//! placeholder known and renderable.

use std::collections::BTreeSet;

use nauthera_shared::catalog::{
    Cause, DiagnoseCheck, EventReason, EventType, Facts, Phase, Placeholder, ReadyStatus, Reason,
    runbook_page, runbook_path, runbook_url, unknown_placeholders,
};

/// Every piece of text of a reason's entry, with a label for failure messages.
fn texts(reason: Reason) -> Vec<(String, &'static str)> {
    let runbook = &reason.entry().runbook;
    let mut texts = vec![
        (format!("{reason} title"), runbook.title),
        (format!("{reason} summary"), runbook.summary),
    ];
    let sections = [
        ("meaning", runbook.meaning),
        ("impact", runbook.impact),
        ("mitigation", runbook.mitigation),
        ("escalation", runbook.escalation),
    ];
    for (name, paragraphs) in sections {
        texts.extend(paragraphs.iter().map(|p| (format!("{reason} {name}"), *p)));
    }
    for (n, step) in runbook.diagnosis.iter().enumerate() {
        texts.push((format!("{reason} diagnosis {} text", n + 1), step.text));
        texts.push((
            format!("{reason} diagnosis {} command", n + 1),
            step.command,
        ));
    }
    texts
}

/// Prose with the code spans taken out. A placeholder outside a code span would be read as an
/// HTML tag by markdown renderers and vanish.
fn outside_code_spans(text: &str) -> String {
    text.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

#[test]
fn every_reason_has_its_own_entry() {
    for reason in Reason::ALL {
        assert_eq!(reason.entry().reason, reason);
    }
    let unique: BTreeSet<Reason> = Reason::ALL.into_iter().collect();
    assert_eq!(unique.len(), Reason::ALL.len());
}

#[test]
fn reasons_round_trip_through_their_strings() {
    for reason in Reason::ALL {
        assert_eq!(reason.as_str().parse::<Reason>(), Ok(reason));
        assert_eq!(reason.to_string(), reason.as_str());
        // The serde form (status.reason) is the same string.
        assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
    }
    let error = "Drift".parse::<Reason>().unwrap_err();
    assert!(error.to_string().contains("`Drift`"), "{error}");
}

#[test]
fn every_runbook_has_all_sections_and_every_step_a_command() {
    for reason in Reason::ALL {
        let runbook = &reason.entry().runbook;
        assert!(!runbook.title.trim().is_empty(), "{reason}: title");
        assert!(!runbook.summary.trim().is_empty(), "{reason}: summary");
        for (name, section) in [
            ("meaning", runbook.meaning),
            ("impact", runbook.impact),
            ("mitigation", runbook.mitigation),
            ("escalation", runbook.escalation),
        ] {
            assert!(!section.is_empty(), "{reason}: {name} is empty");
            assert!(
                section.iter().all(|p| !p.trim().is_empty()),
                "{reason}: blank {name}"
            );
        }
        assert!(
            !runbook.diagnosis.is_empty(),
            "{reason}: diagnosis is empty"
        );
        for (n, step) in runbook.diagnosis.iter().enumerate() {
            assert!(
                !step.text.trim().is_empty(),
                "{reason}: step {} has no text",
                n + 1
            );
            assert!(
                !step.command.trim().is_empty(),
                "{reason}: step {} has no command",
                n + 1
            );
            assert!(
                !step.command.contains('\n'),
                "{reason}: step {} spans lines",
                n + 1
            );
        }
    }
}

#[test]
fn every_placeholder_is_known_and_inside_a_code_span() {
    for reason in Reason::ALL {
        for (label, text) in texts(reason) {
            assert_eq!(
                unknown_placeholders(text),
                Vec::<String>::new(),
                "{label}: {text}"
            );
            if !label.ends_with("command") {
                let prose = outside_code_spans(text);
                let bare: Vec<_> = Placeholder::ALL
                    .into_iter()
                    .filter(|p| prose.contains(p.token()))
                    .collect();
                assert!(
                    bare.is_empty(),
                    "{label}: {bare:?} outside a code span: {text}"
                );
            }
        }
    }
}

#[test]
fn rendering_with_every_fact_leaves_no_placeholder() {
    let facts = Placeholder::ALL
        .into_iter()
        .fold(Facts::new(), |facts, p| facts.with(p, "filled"));
    for reason in Reason::ALL {
        let page = runbook_page(reason.entry(), &facts);
        for placeholder in Placeholder::ALL {
            assert!(
                !page.contains(placeholder.token()),
                "{reason}: {placeholder}"
            );
        }
        assert!(
            !page.contains("Placeholders:"),
            "{reason}: legend without placeholders"
        );
    }
}

#[test]
fn commands_name_this_project() {
    let all: String = Reason::ALL
        .into_iter()
        .flat_map(texts)
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join("\n");
    for foreign in [
        "release-ns",
        "<release>",
        "-operator",
        "certManager.",
        "conditions.yaml",
    ] {
        assert!(!all.contains(foreign), "the catalog mentions `{foreign}`");
    }
    for ours in [
        "deploy/nauthera-reconciler",
        "nauthera_operator_reconciles_total",
        "nauthera_operator_server_calls_total",
        "kubectl nauthera restore",
        "grpc_call",
        "nauthera.io/restore=true",
        "dns:nauthera-reconciler.<reconciler-ns>.svc",
    ] {
        assert!(all.contains(ours), "the catalog never mentions `{ours}`");
    }
}

#[test]
fn ready_and_phase_follow_the_design() {
    let expect = [
        (
            Reason::Registered,
            ReadyStatus::True,
            Phase::Registered,
            None,
        ),
        // Retried codes are Pending, not Refused: a refusal waits for an edit or five minutes.
        (Reason::Refused, ReadyStatus::False, Phase::Error, None),
        (
            Reason::SecretUndeliverable,
            ReadyStatus::False,
            Phase::Error,
            Some(Phase::Pending),
        ),
        (Reason::Drifted, ReadyStatus::False, Phase::Error, None),
        (Reason::Restored, ReadyStatus::True, Phase::Registered, None),
        (
            Reason::Unreachable,
            ReadyStatus::False,
            Phase::Pending,
            None,
        ),
        (
            Reason::CredentialUnavailable,
            ReadyStatus::False,
            Phase::Pending,
            None,
        ),
        (
            Reason::TrustAnchorUnavailable,
            ReadyStatus::False,
            Phase::Pending,
            None,
        ),
    ];
    for (reason, ready, phase, retried) in expect {
        let entry = reason.entry();
        assert_eq!(entry.ready, ready, "{reason}");
        assert_eq!(reason.phase(false), phase, "{reason}");
        assert_eq!(reason.phase(true), retried.unwrap_or(phase), "{reason}");
    }
    assert_eq!(
        Reason::SecretUndeliverable.entry().phase_text(),
        "Error (Pending while retried)"
    );
    assert_eq!(Reason::Drifted.entry().phase_text(), "Error");
}

#[test]
fn event_strings_are_unique_bounded_camel_case() {
    let mut seen = BTreeSet::new();
    for event in EventReason::ALL {
        let name = event.as_str();
        assert!(seen.insert(name), "duplicate event reason {name}");
        // Kubernetes event reasons are short UpperCamelCase words.
        assert!(name.len() <= 64, "{name}");
        assert!(name.starts_with(|c: char| c.is_ascii_uppercase()), "{name}");
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric()), "{name}");
    }
    assert_eq!(seen.len(), EventReason::ALL.len());
    // The event-only reasons the design names exist and are Normal.
    for event in [EventReason::SecretDelivered, EventReason::Applied] {
        assert_eq!(event.event_type(), EventType::Normal);
    }
}

#[test]
fn each_reason_records_its_own_event_with_a_fitting_type() {
    let mut events = BTreeSet::new();
    for reason in Reason::ALL {
        let entry = reason.entry();
        assert!(events.insert(reason.event()), "{reason} shares its event");
        assert_eq!(reason.event().as_str(), reason.as_str(), "{reason}");
        // Anything that leaves Ready False in the Error phase needs a person: a Warning.
        if entry.phase == Phase::Error {
            assert_eq!(reason.event().event_type(), EventType::Warning, "{reason}");
        }
        if entry.ready == ReadyStatus::True {
            assert_eq!(reason.event().event_type(), EventType::Normal, "{reason}");
        }
    }
}

#[test]
fn metric_labels_are_unique_bounded_snake_case_of_the_reason() {
    let mut seen = BTreeSet::new();
    for reason in Reason::ALL {
        let label = reason.entry().metric_label;
        assert!(seen.insert(label), "duplicate metric label {label}");
        assert!(label.len() <= 32, "{label}");
        assert!(
            label.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{label}"
        );
        assert_eq!(label, snake_case(reason.as_str()), "{reason}");
    }
}

#[test]
fn causes_of_each_reason_are_listed_once_and_refusals_cover_every_server_reason() {
    for reason in Reason::ALL {
        let causes = reason.entry().causes;
        assert!(!causes.is_empty(), "{reason} lists no cause");
        let unique: BTreeSet<Cause> = causes.iter().copied().collect();
        assert_eq!(unique.len(), causes.len(), "{reason} lists a cause twice");
    }
    // Every cause a refusal can map to is one the Refused page explains.
    let refused = Reason::Refused.entry().causes;
    for cause in [
        Cause::FieldViolation,
        Cause::IdentityNotAllowed,
        Cause::OperationNotGranted,
        Cause::OutsideGrant,
        Cause::UnknownIssuer,
        Cause::ReservedName,
        Cause::FapiRequirements,
        Cause::ReferenceNotFound,
        Cause::ManagerConflict,
        Cause::Unimplemented,
        Cause::ServerObjection,
        Cause::UnencodableBranding,
    ] {
        assert!(refused.contains(&cause), "{cause}");
        let page = runbook_page(Reason::Refused.entry(), &Facts::new());
        assert!(
            page.contains(&format!("`{cause}`")),
            "the Refused page never explains {cause}"
        );
    }
}

#[test]
fn diagnose_checks_are_used_and_described() {
    let used: BTreeSet<DiagnoseCheck> = Reason::ALL
        .into_iter()
        .flat_map(|r| r.entry().runbook.diagnosis.iter().map(|s| s.check))
        .collect();
    for check in DiagnoseCheck::ALL {
        assert!(used.contains(&check), "no step uses {check}");
        assert_eq!(
            check.describe().is_none(),
            check == DiagnoseCheck::None,
            "{check}"
        );
    }
}

#[test]
fn runbook_links_are_relative_paths_and_absolute_urls() {
    assert_eq!(runbook_path(Reason::Drifted), "docs/runbooks/Drifted.md");
    assert_eq!(
        runbook_url(Reason::SecretUndeliverable),
        "https://github.com/nauthera/nauthera-kubernetes/blob/main/docs/runbooks/SecretUndeliverable.md"
    );
}

fn snake_case(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn control_plane_reasons_are_the_probe_reasons_and_start_with_the_probe() {
    let control_plane: Vec<Reason> = Reason::ALL
        .into_iter()
        .filter(|r| r.is_control_plane())
        .collect();
    assert_eq!(
        control_plane,
        [
            Reason::Unreachable,
            Reason::CredentialUnavailable,
            Reason::TrustAnchorUnavailable
        ]
    );
    for reason in control_plane {
        assert_eq!(
            reason.entry().runbook.diagnosis[0].check,
            DiagnoseCheck::ProbeState,
            "{reason}"
        );
        assert_eq!(reason.event().as_str(), reason.as_str());
        assert_eq!(reason.metric_label(), snake_case(reason.as_str()));
    }
    let outcomes: Vec<Reason> = Reason::ALL
        .into_iter()
        .filter(|r| r.is_deletion_outcome())
        .collect();
    assert_eq!(
        outcomes,
        [
            Reason::Deleted,
            Reason::Orphaned,
            Reason::DeletionSkippedDrifted
        ]
    );
}

#[test]
fn summaries_state_the_ready_status_and_phase_of_the_entry() {
    for reason in Reason::ALL {
        if reason.is_deletion_outcome() || reason == Reason::Restored {
            continue; // events first of all; their summaries say which event
        }
        let entry = reason.entry();
        let summary = entry.runbook.summary;
        assert!(
            summary.contains(&format!("Ready={}", entry.ready)),
            "{reason}: {summary}"
        );
        assert!(
            summary.contains(&format!("phase {}", entry.phase)),
            "{reason}: {summary}"
        );
    }
}

#[test]
fn links_between_pages_point_at_pages_that_exist() {
    for reason in Reason::ALL {
        for (label, text) in texts(reason) {
            for (start, _) in text.match_indices("](") {
                let target = &text[start + 2..];
                let target = &target[..target.find(')').expect("an unclosed link")];
                let page = target.strip_suffix(".md").unwrap_or(target);
                assert!(
                    page == "README" || page.parse::<Reason>().is_ok(),
                    "{label}: link to `{target}`"
                );
            }
        }
    }
}

#[test]
fn every_cause_is_listed_by_some_reason() {
    for cause in Cause::ALL {
        assert!(
            Reason::ALL
                .into_iter()
                .any(|reason| reason.entry().causes.contains(&cause)),
            "no reason lists {cause}"
        );
    }
}

#[test]
fn the_waiting_and_deletion_causes_sit_with_their_reasons_and_are_explained() {
    for (reason, cause, label) in [
        (
            Reason::Pending,
            Cause::ReferenceNotReady,
            "reference_not_ready",
        ),
        (
            Reason::Deleting,
            Cause::OrganizationNotEmpty,
            "organization_not_empty",
        ),
    ] {
        assert_eq!(cause.as_str(), label);
        let entry = reason.entry();
        assert!(entry.causes.contains(&cause), "{reason} lacks {cause}");
        let runbook = &entry.runbook;
        for (section, paragraphs) in [
            ("meaning", runbook.meaning),
            ("impact", runbook.impact),
            ("mitigation", runbook.mitigation),
        ] {
            assert!(
                paragraphs.iter().any(|p| p.contains(&format!("`{label}`"))),
                "the {reason} page's {section} never names {label}"
            );
        }
        assert!(
            runbook
                .diagnosis
                .iter()
                .any(|step| step.text.contains(&format!("`{label}`"))),
            "no {reason} diagnosis step is about {label}"
        );
    }
}
