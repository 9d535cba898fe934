//! Snapshots of the status report as table, wide and JSON, with a fixed clock and no colours.

use nauthera_shared::catalog::Reason;

use super::render::render;
use super::report::{self, StatusReport};
use crate::cli::kinds::Kind;
use crate::cluster::control_plane::fixtures::{NOW, facts, lease, state};
use crate::cluster::control_plane::report::{ControlPlaneReport, control_plane_report};
use crate::cluster::control_plane::{ControlPlaneFacts, LeaseRead};
use crate::model::view::OrganizationDirectory;
use crate::model::view::fixtures::{at, drifted, view};
use crate::output::Painter;
use crate::output::snapshot::assert_snapshot;

fn scenario() -> StatusReport {
    let organization = view(
        Kind::Organization,
        "ops",
        "acme",
        Reason::Registered,
        NOW - 86_400,
    );
    let mut registered = view(
        Kind::OidcClient,
        "team-a",
        "shop",
        Reason::Registered,
        NOW - 7200,
    );
    if let Some(status) = registered.status.as_mut() {
        status.client_id = Some("c-shop-1".into());
        status.secret_set_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(NOW - 3 * 86_400).unwrap(),
        ));
        status.next_rotation = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(NOW + 87 * 86_400).unwrap(),
        ));
    }
    let drifted = drifted("team-a", "billing", NOW - 600);
    let mut refused = view(Kind::Branding, "team-b", "look", Reason::Refused, NOW - 300);
    if let Some(status) = refused.status.as_mut() {
        status.message = Some(
            "the server refused the declared state: PermissionDenied OPERATION_NOT_GRANTED \
             (operation brandings is not granted); generation in force: none"
                .into(),
        );
    }
    let mut unreconciled = view(Kind::OidcClient, "team-b", "new", Reason::Pending, NOW);
    unreconciled.status = None;
    let views = vec![
        organization.clone(),
        registered,
        drifted,
        refused,
        unreconciled,
    ];
    let mut views = views;
    crate::cluster::sort_views(&mut views);
    report::build(
        &facts(),
        views,
        &OrganizationDirectory::from_views([&organization]),
        Vec::new(),
        "*".into(),
        at(NOW),
    )
}

#[test]
fn table_snapshot() {
    assert_snapshot(
        "status-table.txt",
        &render(&scenario(), false, Painter::PLAIN),
    );
}

#[test]
fn wide_snapshot() {
    assert_snapshot(
        "status-wide.txt",
        &render(&scenario(), true, Painter::PLAIN),
    );
}

#[test]
fn without_headers_only_the_rows_are_printed() {
    let report = scenario();
    let mut out = Vec::new();
    super::render::write_rows(&mut out, &report.resources, false, Painter::PLAIN).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), report.resources.len(), "{text}");
    assert!(
        !text.contains("KIND") && !text.contains("Summary"),
        "{text}"
    );
    assert!(text.lines().all(|line| !line.trim().is_empty()));
}

#[test]
fn json_snapshot() {
    let json = crate::output::encode(
        &scenario(),
        &crate::cli::Output::of(crate::cli::OutputFormat::Json),
    )
    .unwrap();
    assert_snapshot("status.json", &json);
}

#[test]
fn yaml_is_the_same_document() {
    let report = scenario();
    let yaml = crate::output::encode(
        &report,
        &crate::cli::Output::of(crate::cli::OutputFormat::Yaml),
    )
    .unwrap();
    let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(from_yaml, serde_json::to_value(&report).unwrap());
}

#[test]
fn the_scenario_needs_attention_and_names_what() {
    let report = scenario();
    assert!(report.attention);
    assert_eq!(report.summary.outside_grant, 2);
    assert_eq!(report.summary.drift.count, 1);
    // The certificate expires within the warning threshold.
    assert!(
        report
            .control_plane
            .findings
            .iter()
            .any(|finding| finding.contains("client certificate expires in 5d"))
    );
}

#[test]
fn all_registered_and_covered_needs_no_attention() {
    let mut state = state();
    state.certificate_not_after = Some(at(NOW + 90 * 86_400));
    let facts = ControlPlaneFacts {
        state: Some(state),
        ..facts()
    };
    let organization = view(Kind::Organization, "ops", "acme", Reason::Registered, NOW);
    let client = view(Kind::OidcClient, "team-a", "shop", Reason::Registered, NOW);
    let report = report::build(
        &facts,
        vec![organization.clone(), client],
        &OrganizationDirectory::from_views([&organization]),
        Vec::new(),
        "*".into(),
        at(NOW),
    );
    assert!(!report.attention, "{:?}", report.control_plane.findings);
}

fn control_plane_of(facts: &ControlPlaneFacts) -> ControlPlaneReport {
    control_plane_report(facts, at(NOW))
}

#[test]
fn a_steady_state_written_hours_ago_is_current_as_of_the_lease() {
    let mut state = state();
    state.certificate_not_after = Some(at(NOW + 90 * 86_400));
    let facts = ControlPlaneFacts {
        state: Some(state),
        ..facts()
    };
    let report = control_plane_of(&facts);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let probe = report.probe.as_ref().unwrap();
    assert_eq!(probe.since, Some(at(NOW - 3 * 3600)));
    assert_eq!(probe.time, Some(at(NOW - 2)), "as of the Lease renewal");
    assert_eq!(probe.age_seconds, Some(2));
    assert_eq!(report.state_updated_at, Some(at(NOW - 3 * 3600)));
    let text = render(
        &report::build(
            &facts,
            Vec::new(),
            &OrganizationDirectory::default(),
            Vec::new(),
            "*".into(),
            at(NOW),
        ),
        false,
        Painter::PLAIN,
    );
    assert!(
        text.contains("Probe:        ok since 3h ago (as of 2s ago)"),
        "{text}"
    );
}

#[test]
fn a_lease_nobody_renews_makes_the_state_stale() {
    for (lease, why) in [
        (
            lease("nauthera-reconciler-6d5f7-x2k4p", 600),
            "its leader nauthera-reconciler-6d5f7-x2k4p last renewed",
        ),
        (
            lease("nauthera-reconciler-6d5f7-y7z8q", 2),
            "is held by nauthera-reconciler-6d5f7-y7z8q, which has not published",
        ),
        (LeaseRead::NotFound, "does not exist"),
    ] {
        let facts = ControlPlaneFacts { lease, ..facts() };
        let report = control_plane_of(&facts);
        let stale: Vec<&String> = report
            .findings
            .iter()
            .filter(|finding| finding.contains("no leader is publishing it"))
            .collect();
        assert_eq!(stale.len(), 1, "{:?}", report.findings);
        assert!(stale[0].contains(why), "{}", stale[0]);
    }
}

#[test]
fn a_lease_the_user_may_not_read_leaves_freshness_unknown_without_a_finding() {
    let mut state = state();
    state.certificate_not_after = Some(at(NOW + 90 * 86_400));
    let facts = ControlPlaneFacts {
        state: Some(state),
        lease: LeaseRead::Forbidden("leases.coordination.k8s.io is forbidden (403)".into()),
        ..facts()
    };
    let report = control_plane_of(&facts);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert!(matches!(
        report.freshness,
        Some(crate::cluster::control_plane::Freshness::Unknown { .. })
    ));
    let probe = report.probe.as_ref().unwrap();
    assert_eq!(
        probe.time,
        Some(at(NOW - 3 * 3600)),
        "as of its last change"
    );
}

#[test]
fn a_failing_probe_says_since_when_and_the_last_answer() {
    let mut state = state();
    state.probe_reason = Some(Reason::Unreachable);
    state.probe_message = "server s:8443 unreachable: connection refused".into();
    state.probe_since = Some(at(NOW - 300));
    state.last_success_time = Some(at(NOW - 320));
    state.changed_at = Some(at(NOW - 300));
    let facts = ControlPlaneFacts {
        state: Some(state),
        ..facts()
    };
    let report = report::build(
        &facts,
        Vec::new(),
        &OrganizationDirectory::default(),
        Vec::new(),
        "*".into(),
        at(NOW),
    );
    let probe = report.control_plane.probe.as_ref().unwrap();
    assert_eq!(probe.last_success_time, Some(at(NOW - 320)));
    let text = render(&report, false, Painter::PLAIN);
    assert!(
        text.contains(
            "Probe:        Unreachable since 5m ago (as of 2s ago): server s:8443 unreachable"
        ),
        "{text}"
    );
}

#[test]
fn a_missing_state_is_a_finding() {
    let facts = ControlPlaneFacts {
        namespace: "nauthera-system".into(),
        state_problem: Some("ConfigMap nauthera-reconciler-state not found".into()),
        replicas_problem: Some("Deployment nauthera-reconciler not found".into()),
        ..ControlPlaneFacts::default()
    };
    let report = report::build(
        &facts,
        Vec::new(),
        &OrganizationDirectory::default(),
        Vec::new(),
        "team-a".into(),
        at(NOW),
    );
    assert!(report.attention);
    let text = render(&report, false, Painter::PLAIN);
    assert!(text.contains("ConfigMap nauthera-reconciler-state not found"));
    assert!(text.contains("No nauthera resources found in namespace team-a."));
}

/// Removes SGR colour sequences (`ESC [ ... m`).
fn strip_colours(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for next in chars.by_ref() {
                if next == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn colours_change_nothing_but_the_colours() {
    for wide in [false, true] {
        let coloured = render(&scenario(), wide, Painter { color: true });
        assert!(coloured.contains('\u{1b}'));
        assert_eq!(
            strip_colours(&coloured),
            render(&scenario(), wide, Painter::PLAIN)
        );
    }
}

/// Two policies: one holds a client back by a rule, the other keeps one waiting for an
/// approval while its status counts one more elsewhere; a third holds nothing.
fn policies_scenario() -> (super::policies::PoliciesReport, StatusReport) {
    use nauthera_shared::resources::{ClientPolicyStatus, PolicyHold};

    use crate::model::policies::PolicyListing;
    use crate::model::policies::tests::policy;

    let hold = |name: &str, reason: Reason, policy: &str, rule: &str, field: Option<&str>| {
        let mut held = view(Kind::OidcClient, "team-a", name, reason, NOW - 600);
        if let Some(status) = held.status.as_mut() {
            status.policy = Some(Box::new(PolicyHold {
                policy: policy.into(),
                rule: rule.into(),
                field: field.map(Into::into),
            }));
        }
        held
    };
    let views = vec![
        hold(
            "shop",
            Reason::PolicyViolation,
            "web-rules",
            "redirectUris",
            Some("spec.redirectUris"),
        ),
        hold(
            "billing",
            Reason::WaitingForApproval,
            "review",
            "approval",
            None,
        ),
        view(
            Kind::OidcClient,
            "team-a",
            "web",
            Reason::Registered,
            NOW - 600,
        ),
    ];
    let counted = |name: &str, violations: u32, awaiting: u32| {
        let mut listed = policy(name, serde_json::json!({}));
        listed.status = Some(ClientPolicyStatus {
            violations,
            awaiting_approval: awaiting,
            ..Default::default()
        });
        listed
    };
    let listing = PolicyListing::Listed(vec![
        counted("idle", 0, 0),
        counted("review", 0, 2),
        counted("web-rules", 1, 0),
    ]);
    let mut report = report::build(
        &facts(),
        views,
        &OrganizationDirectory::default(),
        Vec::new(),
        "team-a".into(),
        at(NOW),
    );
    let section = super::policies::section(&listing, &report.resources, false).unwrap();
    report.policies = Some(section.clone());
    (section, report)
}

#[test]
fn policies_name_what_they_hold_back_with_their_cluster_wide_counts() {
    let (section, report) = policies_scenario();
    let names: Vec<_> = section
        .items
        .iter()
        .map(|item| item.name.as_str())
        .collect();
    // Those holding something back first.
    assert_eq!(names, ["review", "web-rules", "idle"]);
    assert_eq!(section.items[0].held_awaiting(), 1);
    assert_eq!(section.items[1].held_violations(), 1);
    // One namespace in scope: the cluster-wide counts are not compared.
    assert!(section.items.iter().all(|item| item.counts_agree.is_none()));
    assert_snapshot(
        "status-policies.txt",
        &render(&report, false, Painter::PLAIN),
    );
}

#[test]
fn with_every_namespace_the_counts_are_checked_against_the_statuses() {
    use crate::model::policies::PolicyListing;
    let (_, report) = policies_scenario();
    let mut listed = crate::model::policies::tests::policy("web-rules", serde_json::json!({}));
    listed.status = Some(nauthera_shared::resources::ClientPolicyStatus {
        violations: 3,
        ..Default::default()
    });
    let section = super::policies::section(
        &PolicyListing::Listed(vec![listed]),
        &report.resources,
        true,
    )
    .unwrap();
    let web_rules = section
        .items
        .iter()
        .find(|i| i.name == "web-rules")
        .unwrap();
    assert_eq!(web_rules.counts_agree, Some(false));
    // The status names a policy that is not listed: said so, not dropped.
    let review = section.items.iter().find(|i| i.name == "review").unwrap();
    assert_eq!(review.found, Some(false));
    assert_eq!(review.held.len(), 1);
}

/// Two shards of cluster prod-eu publish in one namespace, and their selectors overlap in one
/// namespace: a block each, with its scope, and the overlap as a finding in both.
fn shards_scenario() -> StatusReport {
    use nauthera_shared::control_plane::ShardOverlap;
    use nauthera_shared::topology::{NamespaceSelector, Scope};

    let shard = |name: &str, selector: &str, other: &str, kinds: Vec<Kind>| {
        let mut state = state();
        state.certificate_not_after = Some(at(NOW + 90 * 86_400));
        state.leader = format!("nauthera-reconciler-{name}-7c9d-q2w3e");
        state.manager = format!("nauthera-{name}");
        state.cluster_name = Some("prod-eu".into());
        state.lease_name = Some(format!("nauthera-reconciler-{name}"));
        state.scope = Some(Scope {
            shard: Some(name.into()),
            namespace_selector: Some(NamespaceSelector::parse(selector).unwrap()),
            kinds,
            ..Scope::everything()
        });
        state.overlaps = vec![ShardOverlap {
            shard: other.into(),
            kinds: vec![Kind::OidcClient],
            namespaces: vec!["shared-tools".into()],
            ..ShardOverlap::default()
        }];
        ControlPlaneFacts {
            state: Some(state),
            lease: lease(&format!("nauthera-reconciler-{name}-7c9d-q2w3e"), 2),
            ..facts()
        }
    };
    let facts = ControlPlaneFacts {
        shards: vec![shard(
            "b",
            "team in (b, tools)",
            "a",
            vec![Kind::OidcClient],
        )],
        ..shard("a", "team in (a, tools)", "b", Kind::ALL.to_vec())
    };
    let client = view(Kind::OidcClient, "team-a", "shop", Reason::Registered, NOW);
    report::build(
        &facts,
        vec![client],
        &OrganizationDirectory::default(),
        Vec::new(),
        "*".into(),
        at(NOW),
    )
}

#[test]
fn shards_show_a_block_each_with_their_scope_and_overlaps() {
    let report = shards_scenario();
    assert_eq!(report.shards.len(), 1);
    assert!(report.attention, "an overlap needs attention");
    assert!(
        report.control_plane.findings[0]
            .starts_with("shard b also reconciles OIDCClient in namespace shared-tools:"),
        "{:?}",
        report.control_plane.findings
    );
    let text = render(&report, false, Painter::PLAIN);
    assert!(text.contains("Control plane (namespace nauthera-system, shard b)"));
    assert!(text.contains("Cluster:      prod-eu"));
    assert_snapshot("status-shards.txt", &text);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["controlPlane"]["clusterName"], "prod-eu");
    assert_eq!(json["controlPlane"]["scope"]["shard"], "a");
    assert_eq!(json["shards"][0]["overlaps"][0]["shard"], "a");
}

/// A managed client, one waiting for adoption, and three observed clients: one that differs, one
/// identical, one the server does not hold.
fn observed_scenario() -> StatusReport {
    use crate::model::view::fixtures::holding;
    use nauthera_shared::catalog::Cause;
    let organization = view(
        Kind::Organization,
        "ops",
        "acme",
        Reason::Registered,
        NOW - 86_400,
    );
    let managed = view(
        Kind::OidcClient,
        "team-a",
        "shop",
        Reason::Registered,
        NOW - 7200,
    );
    let waiting = holding(
        Kind::OidcClient,
        "legacy",
        Reason::AdoptionRequired,
        Cause::ForeignObject,
        &["spec.redirectUris", "spec.scopes"],
        NOW - 3600,
    );
    let differs = holding(
        Kind::OidcClient,
        "portal",
        Reason::Observed,
        Cause::Differs,
        &["spec.displayName"],
        NOW - 600,
    );
    let identical = holding(
        Kind::OidcClient,
        "reports",
        Reason::Observed,
        Cause::Identical,
        &[],
        NOW - 86_400,
    );
    let mut absent = holding(
        Kind::OidcClient,
        "retired",
        Reason::Observed,
        Cause::NotOnServer,
        &[],
        NOW - 60,
    );
    if let Some(object) = absent
        .status
        .as_mut()
        .and_then(|status| status.observed.as_mut())
    {
        **object = nauthera_shared::resources::ServerObject {
            absent: true,
            ..Default::default()
        };
    }
    let mut views = vec![
        organization.clone(),
        managed,
        waiting,
        differs,
        identical,
        absent,
    ];
    crate::cluster::sort_views(&mut views);
    report::build(
        &facts(),
        views,
        &OrganizationDirectory::from_views([&organization]),
        Vec::new(),
        "*".into(),
        at(NOW),
    )
}

#[test]
fn observed_resources_are_shown_apart_and_adoptions_are_named_as_needing_a_person() {
    let report = observed_scenario();
    assert_eq!(report.observed.len(), 3);
    assert_eq!(report.resources.len(), 3);
    assert_eq!(report.summary.observed, 3);
    assert_eq!(report.summary.awaiting_adoption, 1);
    assert_eq!(report.summary.total, 6);
    // Observing is what these manifests ask for; only the adoption needs a person.
    assert!(
        report.observed.iter().all(|row| !row.attention),
        "{:?}",
        report
            .observed
            .iter()
            .map(|row| (&row.name, &row.grant))
            .collect::<Vec<_>>()
    );
    assert!(
        report
            .resources
            .iter()
            .any(|row| row.attention && row.awaits_adoption())
    );
    let text = render(&report, false, Painter::PLAIN);
    assert!(
        text.contains("kubectl nauthera adopt oidcclient/legacy -n team-a"),
        "{text}"
    );
    let wide = render(&report, true, Painter::PLAIN);
    let json = crate::output::encode(
        &report,
        &crate::cli::Output::of(crate::cli::OutputFormat::Json),
    )
    .unwrap();
    assert_snapshot(
        "status-observed.txt",
        &format!("{text}---\n{wide}---\n{json}"),
    );
}
