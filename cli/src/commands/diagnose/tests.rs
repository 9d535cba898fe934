//! Diagnoses over plain facts, with a fixed clock and no colours.

use nauthera_shared::catalog::{Cause, DiagnoseCheck, Reason, unknown_placeholders};

use super::check_status::CheckStatus;
use super::evaluate::{DiagnoseFacts, diagnose, evaluate};
use super::render::render;
use crate::cli::kinds::Kind;
use crate::cluster::control_plane::fixtures::facts as control_plane;
use crate::cluster::facts::{AccessVerdict, EventFact, Owner, SecretFacts};
use crate::model::view::fixtures::{at, drifted, view};
use crate::model::view::{ResourceView, SecretUse};
use crate::output::Painter;
use crate::output::snapshot::assert_snapshot;
use nauthera_shared::resources::PolicyHold;
use nauthera_shared::workloads::Consumer;

const NOW: i64 = 1_800_000_000;

fn facts_for(view: ResourceView) -> DiagnoseFacts {
    DiagnoseFacts {
        view,
        control_plane: control_plane(),
        organization: Some("acme".into()),
        secret: None,
        access: Vec::new(),
        events: Ok(Vec::new()),
        consumers: Ok(Vec::new()),
        drifted: Vec::new(),
        logs: Err("cannot read the logs of pod nauthera-reconciler-0: forbidden".into()),
        policy: None,
        approvals: None,
        now: at(NOW),
    }
}

#[test]
fn drifted_snapshot() {
    let mut client = drifted("team-a", "billing", NOW - 600);
    client.secret = SecretUse::Generated {
        name: "billing-oidc".into(),
    };
    if let Some(status) = client.status.as_mut() {
        status.client_id = Some("c-billing-1".into());
    }
    let mut facts = facts_for(client.clone());
    facts.drifted = vec![
        client,
        drifted("team-b", "web", NOW - 500),
        drifted("team-c", "api", NOW - 420),
    ];
    facts.events = Ok(vec![EventFact {
        time: Some(at(NOW - 570)),
        type_: "Warning".into(),
        reason: "Drifted".into(),
        message: "revision r9 on the server, changed by dashboard".into(),
        count: 1,
    }]);
    let diagnosis = diagnose(&facts);
    assert!(diagnosis.attention);
    assert_snapshot(
        "diagnose-drifted.txt",
        &render(&[diagnosis], Painter::PLAIN),
    );
}

#[test]
fn secret_undeliverable_snapshot() {
    let mut client = view(
        Kind::OidcClient,
        "team-a",
        "shop",
        Reason::SecretUndeliverable,
        NOW - 120,
    );
    client.secret = SecretUse::Generated {
        name: "shop".into(),
    };
    let mut facts = facts_for(client);
    facts.secret = Some(Ok(SecretFacts {
        name: "shop".into(),
        exists: true,
        owners: vec![Owner {
            kind: "HelmRelease".into(),
            name: "shop".into(),
            uid: "other".into(),
        }],
        keys: vec!["clientSecret".into()],
        empty_keys: Vec::new(),
    }));
    facts.access = vec![
        AccessVerdict {
            verb: "get".into(),
            allowed: Some(true),
            detail: String::new(),
        },
        AccessVerdict {
            verb: "create".into(),
            allowed: Some(false),
            detail: "no RBAC rule".into(),
        },
    ];
    facts.consumers = Ok(vec![Consumer {
        kind: "Deployment".into(),
        name: "shop-web".into(),
        uses: vec!["volume creds".into()],
    }]);
    let diagnosis = diagnose(&facts);
    let by_check = |check| {
        diagnosis
            .steps
            .iter()
            .find(|step| step.check == check)
            .map(|step| step.status)
    };
    assert_eq!(
        by_check(DiagnoseCheck::SecretOwner),
        Some(CheckStatus::Failed)
    );
    assert_eq!(
        by_check(DiagnoseCheck::ReconcilerCanI),
        Some(CheckStatus::Failed)
    );
    assert_snapshot(
        "diagnose-secret-undeliverable.txt",
        &render(&[diagnosis], Painter::PLAIN),
    );
}

#[test]
fn every_reason_renders_with_its_placeholders_filled() {
    for reason in Reason::ALL {
        let mut client = view(Kind::OidcClient, "team-a", "shop", reason, NOW - 60);
        client.secret = SecretUse::Generated {
            name: "shop".into(),
        };
        if let Some(status) = client.status.as_mut() {
            status.client_id = Some("c-1".into());
            status.policy = Some(Box::new(PolicyHold {
                policy: "web-rules".into(),
                rule: "approval".into(),
                field: None,
            }));
        }
        let diagnosis = diagnose(&facts_for(client));
        assert_eq!(diagnosis.reason, reason);
        assert_eq!(
            diagnosis.steps.len(),
            reason.entry().runbook.diagnosis.len()
        );
        let text = render(std::slice::from_ref(&diagnosis), Painter::PLAIN);
        assert!(unknown_placeholders(&text).is_empty(), "{reason}");
        for placeholder in [
            "<ns>",
            "<name>",
            "<kind>",
            "<audit-filter>",
            "<slug>",
            "<secret>",
            "<policy>",
            "<generation>",
        ] {
            assert!(!text.contains(placeholder), "{reason} leaves {placeholder}");
        }
        assert!(
            text.contains(&nauthera_shared::catalog::runbook_url(reason)),
            "{reason}"
        );
    }
}

#[test]
fn an_unreconciled_resource_gets_the_pending_runbook() {
    let mut client = view(Kind::OidcClient, "team-a", "shop", Reason::Registered, NOW);
    client.status = None;
    let diagnosis = diagnose(&facts_for(client));
    assert_eq!(diagnosis.reason, Reason::Pending);
    assert!(!diagnosis.reconciled);
    assert!(diagnosis.attention);
}

#[test]
fn a_registered_resource_with_passing_checks_needs_no_attention() {
    let client = view(
        Kind::OidcClient,
        "team-a",
        "shop",
        Reason::Registered,
        NOW - 60,
    );
    let diagnosis = diagnose(&facts_for(client));
    assert!(!diagnosis.attention, "{diagnosis:#?}");
}

#[test]
fn the_stable_reason_is_read_from_the_status_never_from_the_message() {
    let mut client = view(Kind::OidcClient, "team-z", "x", Reason::Refused, NOW);
    if let Some(status) = client.status.as_mut() {
        // A message that quotes a reason is prose: it names nothing.
        status.message = Some("refused: the dashboard user wrote OUTSIDE_GRANT in a note".into());
        status.server_reason = None;
    }
    let (_, findings) = evaluate(DiagnoseCheck::ConditionMessage, &facts_for(client.clone()));
    assert!(
        !findings.iter().any(|line| line.contains("stable reason")),
        "{findings:#?}"
    );
    if let Some(status) = client.status.as_mut() {
        status.server_reason = Some(nauthera_shared::catalog::ServerReason::OutsideGrant);
    }
    let (_, findings) = evaluate(DiagnoseCheck::ConditionMessage, &facts_for(client));
    assert!(
        findings
            .iter()
            .any(|line| line == "the server's stable reason: OUTSIDE_GRANT (cause outside_grant)"),
        "{findings:#?}"
    );
}

#[test]
fn a_deleting_organization_that_is_not_empty_shows_the_cause_and_the_manifests() {
    let message = "deletionPolicy Delete waits: DeleteOrganization refused: FailedPrecondition \
        (ORGANIZATION_NOT_EMPTY): organization acme still holds objects; delete them first; \
        retried with backoff; manifests that declare objects under its issuer: OIDCClient \
        team-a/shop";
    let mut organization = view(
        Kind::Organization,
        "platform",
        "acme",
        Reason::Deleting,
        NOW - 60,
    );
    if let Some(status) = organization.status.as_mut() {
        status.message = Some(message.into());
        status.conditions[0].message = message.into();
        status.server_reason = Some(nauthera_shared::catalog::ServerReason::OrganizationNotEmpty);
    }
    let (status, findings) = evaluate(DiagnoseCheck::ConditionMessage, &facts_for(organization));
    assert_eq!(status, CheckStatus::Warning);
    assert!(
        findings.iter().any(|line| line
            == "the server's stable reason: ORGANIZATION_NOT_EMPTY (cause organization_not_empty)"),
        "{findings:#?}"
    );
    assert!(
        findings
            .iter()
            .any(|line| line.contains("OIDCClient team-a/shop")),
        "{findings:#?}"
    );
}

#[test]
fn checks_judge_their_facts() {
    let mut client = view(
        Kind::OidcClient,
        "team-a",
        "shop",
        Reason::SecretRefUnavailable,
        NOW,
    );
    client.secret = SecretUse::Referenced {
        name: "shop-creds".into(),
        key: "clientSecret".into(),
    };
    let mut facts = facts_for(client);
    facts.secret = Some(Ok(SecretFacts {
        name: "shop-creds".into(),
        exists: true,
        owners: Vec::new(),
        keys: vec!["password".into()],
        empty_keys: Vec::new(),
    }));
    let (status, findings) = evaluate(DiagnoseCheck::SecretRefPresent, &facts);
    assert_eq!(status, CheckStatus::Failed);
    assert!(findings[0].contains("has no key clientSecret (it has: password)"));
    if let Some(Ok(secret)) = facts.secret.as_mut() {
        secret.keys.push("clientSecret".into());
        secret.empty_keys.push("clientSecret".into());
    }
    let (status, findings) = evaluate(DiagnoseCheck::SecretRefPresent, &facts);
    assert_eq!(status, CheckStatus::Failed);
    assert!(
        findings[0].contains("key clientSecret of Secret shop-creds is empty"),
        "{findings:?}"
    );

    // A grant that leaves the namespace out fails with the entry that fixes it.
    let mut outside = facts_for(view(Kind::OidcClient, "team-z", "x", Reason::Refused, NOW));
    outside.organization = Some("acme".into());
    let (status, findings) = evaluate(DiagnoseCheck::GrantCovers, &outside);
    assert_eq!(status, CheckStatus::Failed);
    assert!(findings.iter().any(|line| line.contains("\"team-z\"")));

    // Readable logs are shown; unreadable ones leave the command for a person.
    let (status, findings) = evaluate(DiagnoseCheck::ReconcilerLogs, &outside);
    assert_eq!(status, CheckStatus::Manual);
    assert!(findings[0].contains("forbidden"));
    outside.logs = Ok(vec!["{\"msg\":\"grpc_call\",\"name\":\"x\"}".into()]);
    let (status, findings) = evaluate(DiagnoseCheck::ReconcilerLogs, &outside);
    assert_eq!(status, CheckStatus::Info);
    assert_eq!(findings.len(), 1);

    // A certificate within the warning threshold warns.
    let (status, _) = evaluate(DiagnoseCheck::CertificateExpiry, &outside);
    assert_eq!(status, CheckStatus::Warning);
}

/// The live policy facts of `client`: the policies' verdicts on `object`, with the namespace's
/// other OIDCClients.
fn judged(
    client: &ResourceView,
    policies: &[nauthera_shared::resources::ClientPolicy],
    object: &serde_json::Value,
    others: &[crate::model::policies::CountedClient],
) -> crate::model::policies::PolicyOutcome {
    use crate::model::policies::{self, CountedClient, Judged, NamespaceLabels, PolicySet};
    let place = CountedClient {
        name: client.name.clone(),
        issuer: client.issuer.clone(),
        created: client.created,
        order: 0,
        deleting: false,
    };
    let set = PolicySet::compile(policies);
    policies::PolicyOutcome::Evaluated(Box::new(policies::evaluate(
        &set,
        &Judged {
            kind: nauthera_shared::resources::PolicyKind::OidcClient,
            namespace: &client.namespace,
            issuer: &client.issuer,
            object,
            place: &place,
            generation: client.generation.unwrap_or(1),
            written: true,
            recorded: None,
            approved: &[],
        },
        &NamespaceLabels::of(&client.namespace, Default::default()),
        Ok(others),
    )))
}

#[test]
fn policy_violation_snapshot() {
    use crate::model::policies::tests::{client as stored, policy};
    let mut client = view(
        Kind::OidcClient,
        "team-a",
        "shop",
        Reason::PolicyViolation,
        NOW - 300,
    );
    let message = "ClientPolicy web-rules, rule redirectUris: spec.redirectUris may only hold \
        https URIs on hosts app.example.com; no loopback hosts; generation 2 is not sent and the \
        server keeps generation 1 in force";
    if let Some(status) = client.status.as_mut() {
        status.message = Some(message.into());
        status.conditions[0].message = message.into();
        status.cause = Some(Cause::PolicyRule);
        status.generation_in_force = Some(1);
        status.policy = Some(Box::new(PolicyHold {
            policy: "web-rules".into(),
            rule: "redirectUris".into(),
            field: Some("spec.redirectUris".into()),
        }));
    }
    let policies = [
        policy(
            "web-rules",
            serde_json::json!({"rules": {
                "redirectUris": {"hosts": ["app.example.com"]},
                "grantTypes": ["authorization_code"],
                "maxClientsPerNamespace": 3,
            }}),
        ),
        policy(
            "globex-only",
            serde_json::json!({"match": {"issuers": ["https://id.example.com/globex"]}}),
        ),
    ];
    let object = stored(
        "shop",
        serde_json::json!({"redirectUris": ["https://shop.example.net/cb"], "secret": {"generate": true}}),
    );
    let older = crate::model::policies::CountedClient {
        name: "billing".into(),
        issuer: client.issuer.clone(),
        created: Some(at(NOW - 90_000)),
        order: 0,
        deleting: false,
    };
    let mut facts = facts_for(client.clone());
    facts.policy = Some(judged(&client, &policies, &object, &[older]));
    facts.events = Ok(vec![EventFact {
        time: Some(at(NOW - 300)),
        type_: "Warning".into(),
        reason: "PolicyViolation".into(),
        message: message.into(),
        count: 1,
    }]);
    let diagnosis = diagnose(&facts);
    assert!(diagnosis.attention);
    let step = diagnosis
        .steps
        .iter()
        .find(|step| step.check == DiagnoseCheck::PolicyRules)
        .unwrap();
    assert_eq!(step.status, CheckStatus::Failed);
    let text = render(&[diagnosis], Painter::PLAIN);
    assert!(
        text.contains("kubectl get clientpolicy web-rules -o yaml"),
        "{text}"
    );
    assert_snapshot("diagnose-policy-violation.txt", &text);
}

#[test]
fn waiting_for_approval_snapshot() {
    use crate::commands::diagnose::policy_check::ApprovalFacts;
    use crate::model::policies::ApprovalFact;
    use crate::model::policies::tests::{client as stored, policy};
    let mut client = view(
        Kind::OidcClient,
        "team-a",
        "shop",
        Reason::WaitingForApproval,
        NOW - 600,
    );
    client.generation = Some(3);
    if let Some(status) = client.status.as_mut() {
        status.cause = Some(Cause::ApprovalRequired);
        // An older reconciler names no policy: the live evaluation does.
        status.policy = None;
    }
    let policies = [policy(
        "review",
        serde_json::json!({"rules": {"approval": {"fields": ["redirectUris", "scopes"]}}}),
    )];
    let object = stored(
        "shop",
        serde_json::json!({"redirectUris": ["https://shop.example.com/cb"], "secret": {"generate": true}}),
    );
    let mut facts = facts_for(client.clone());
    facts.policy = Some(judged(&client, &policies, &object, &[]));
    facts.approvals = Some(ApprovalFacts {
        approvals: Ok(vec![
            ApprovalFact {
                name: "shop-1".into(),
                generation: 1,
                uid: Some("uid-shop".into()),
                created: Some(at(NOW - 86_400 * 3)),
            },
            ApprovalFact {
                name: "shop-2".into(),
                generation: 2,
                uid: Some("uid-before".into()),
                created: Some(at(NOW - 7200)),
            },
        ]),
        may_approve: AccessVerdict {
            verb: "create".into(),
            allowed: Some(false),
            detail: String::new(),
        },
    });
    let diagnosis = diagnose(&facts);
    let text = render(std::slice::from_ref(&diagnosis), Painter::PLAIN);
    for expected in [
        "kubectl nauthera approve oidcclient/shop -n team-a",
        "generation 3 (metadata.generation) waits for an approval",
        "it names another uid",
        "nauthera-client-policy-admin",
        "ClientPolicy `review`",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(
        !text.contains("<policy>") && !text.contains("<generation>"),
        "{text}"
    );
    assert_snapshot("diagnose-waiting-for-approval.txt", &text);

    // The approval is there: the check passes, and says so.
    if let Some(approvals) = facts.approvals.as_mut() {
        approvals.approvals = Ok(vec![ApprovalFact {
            name: "shop-3".into(),
            generation: 3,
            uid: None,
            created: Some(at(NOW - 5)),
        }]);
    }
    let (status, findings) = evaluate(DiagnoseCheck::Approvals, &facts);
    assert_eq!(status, CheckStatus::Passed, "{findings:?}");
    assert!(
        findings
            .iter()
            .any(|f| f.contains("generation 3 (metadata.generation) is approved"))
    );
}

#[test]
fn managed_elsewhere_snapshot() {
    use nauthera_shared::resources::ManagedElsewhere;
    let mut client = view(
        Kind::OidcClient,
        "team-a",
        "web",
        Reason::ManagedElsewhere,
        NOW - 600,
    );
    let message = "the object on the server is managed by another reconciler: manager \
        nauthera-reconciler/prod-us (dns:us.example) wrote revision r7 (its generation 3); this \
        resource never wrote it: two manifests declare one object (in two clusters, give each \
        its own --cluster-name so their namespaces differ on the server); not written over: \
        annotate nauthera.io/take-over-from=nauthera-reconciler/prod-us to take it over";
    if let Some(status) = client.status.as_mut() {
        status.message = Some(message.into());
        status.conditions[0].message = message.into();
        status.cause = Some(Cause::Claimed);
        status.revision = None;
        status.managed_elsewhere = Some(Box::new(ManagedElsewhere {
            manager: "nauthera-reconciler/prod-us".into(),
            actor: Some("dns:us.example".into()),
            revision: "r7".into(),
            generation: 3,
            written_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(
                NOW - 700,
            ))),
        }));
    }
    let diagnosis = diagnose(&facts_for(client));
    assert!(diagnosis.attention);
    let step = diagnosis
        .steps
        .iter()
        .find(|step| step.check == DiagnoseCheck::OtherManager)
        .unwrap();
    assert_eq!(step.status, CheckStatus::Failed);
    assert!(
        step.findings[1].starts_with("this reconciler writes as manager nauthera-reconciler"),
        "{:?}",
        step.findings
    );
    let text = render(&[diagnosis], Painter::PLAIN);
    assert!(
        text.contains("nauthera.io/take-over-from=nauthera-reconciler/prod-us"),
        "{text}"
    );
    assert_snapshot("diagnose-managed-elsewhere.txt", &text);
}

#[test]
fn a_missing_namespace_is_named_once_and_not_counted_as_covered_by_none() {
    use crate::model::policies::tests::{client, counted, policy};
    use crate::model::policies::{Judged, NamespaceLabels, PolicyOutcome, PolicySet, evaluate};
    use nauthera_shared::resources::PolicyKind;
    use serde_json::json;

    let set = PolicySet::compile(&[
        policy(
            "by-label",
            json!({"match": {"namespaceSelector": {"matchLabels": {"tier": "prod"}}}, "rules": {"requirePkce": true}}),
        ),
        policy(
            "other-issuer",
            json!({"match": {"issuers": ["https://elsewhere.example.test"]}, "rules": {"requirePkce": true}}),
        ),
    ]);
    let object = client("shop", json!({"redirectUris": ["https://a.test/cb"]}));
    let evaluation = evaluate(
        &set,
        &Judged {
            kind: PolicyKind::OidcClient,
            namespace: "team-x",
            issuer: crate::model::policies::tests::ISSUER,
            object: &object,
            place: &counted("shop", None),
            generation: 1,
            written: false,
            recorded: None,
            approved: &[],
        },
        &NamespaceLabels::unknown(
            "team-x",
            "namespace team-x does not exist yet, so only its name label is known".into(),
        ),
        Ok(&[]),
    );
    let (status, findings) = super::policy_check::policy_findings(
        &PolicyOutcome::Evaluated(Box::new(evaluation)),
        super::policy_check::Moment::BeforeApply,
    );
    assert_eq!(status, CheckStatus::Warning);
    assert_eq!(
        findings[..2],
        [
            "namespace team-x does not exist yet, so only its name label is known: cannot tell \
             whether ClientPolicy by-label covers it, since it selects namespaces by label"
                .to_owned(),
            "none of the 1 other ClientPolicy covers it (OIDCClient, issuer \
             https://id.example.com/acme, namespace team-x with labels \
             kubernetes.io/metadata.name=team-x)"
                .to_owned(),
        ],
        "{findings:#?}"
    );
}

#[test]
fn adoption_required_shows_the_object_and_the_command_that_adopts_it() {
    use crate::model::view::fixtures::holding;
    let client = holding(
        Kind::OidcClient,
        "legacy",
        Reason::AdoptionRequired,
        Cause::ForeignObject,
        &["spec.redirectUris"],
        NOW - 3600,
    );
    let diagnosis = diagnose(&facts_for(client.clone()));
    assert!(diagnosis.attention);
    let step = diagnosis
        .steps
        .iter()
        .find(|step| step.check == DiagnoseCheck::ServerObject)
        .unwrap();
    assert_eq!(step.status, CheckStatus::Warning, "{:?}", step.findings);
    assert!(
        step.findings
            .iter()
            .any(|f| f.contains("kubectl nauthera adopt oidcclient/legacy -n team-a")),
        "{:?}",
        step.findings
    );
    let text = render(&[diagnosis], Painter::PLAIN);
    assert_snapshot("diagnose-adoption-required.txt", &text);

    // An annotation naming a revision the server no longer holds fails, naming both.
    let mut stale = client.clone();
    stale
        .annotations
        .insert(nauthera_shared::ADOPT_ANNOTATION.into(), "r3".into());
    let (status, findings) = evaluate(DiagnoseCheck::ServerObject, &facts_for(stale));
    assert_eq!(status, CheckStatus::Failed);
    assert!(
        findings.iter().any(
            |f| f.contains("names revision r3, which the server no longer holds")
                && f.contains("revision r4")
        ),
        "{findings:?}"
    );
    // A secret choice that is neither Replace nor Keep is named.
    let mut odd = client;
    odd.annotations.insert(
        nauthera_shared::ADOPT_SECRET_ANNOTATION.into(),
        "keep".into(),
    );
    let (status, findings) = evaluate(DiagnoseCheck::ServerObject, &facts_for(odd));
    assert_eq!(status, CheckStatus::Failed);
    assert!(
        findings
            .iter()
            .any(|f| f.contains("Replace (the default) or Keep")),
        "{findings:?}"
    );
}

#[test]
fn an_observed_object_needs_attention_only_when_it_differs() {
    use crate::model::view::fixtures::holding;
    let identical = holding(
        Kind::OidcClient,
        "portal",
        Reason::Observed,
        Cause::Identical,
        &[],
        NOW - 600,
    );
    let diagnosis = diagnose(&facts_for(identical));
    let step = diagnosis
        .steps
        .iter()
        .find(|step| step.check == DiagnoseCheck::ServerObject)
        .unwrap();
    assert_eq!(step.status, CheckStatus::Passed, "{:?}", step.findings);
    assert!(
        step.findings
            .iter()
            .any(|f| f.contains("set managementPolicy: Manage") && f.contains("writing nothing")),
        "{:?}",
        step.findings
    );
    let differs = holding(
        Kind::OidcClient,
        "portal",
        Reason::Observed,
        Cause::Differs,
        &["spec.displayName", "spec.scopes"],
        NOW - 600,
    );
    let diagnosis = diagnose(&facts_for(differs));
    assert!(diagnosis.attention);
    let text = render(&[diagnosis], Painter::PLAIN);
    assert!(text.contains("spec.displayName, spec.scopes"), "{text}");
    assert_snapshot("diagnose-observed.txt", &text);
}
