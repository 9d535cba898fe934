//! The policies' verdicts over plain values: the shared compiled form decides, this module only
//! gathers its verdicts per policy and rule.

use std::collections::BTreeMap;

use nauthera_shared::resources::{ApprovalRecord, OIDCClient};
use serde_json::{Value, json};

use super::*;

pub const ISSUER: &str = "https://id.example.com/acme";

pub fn policy(name: &str, spec: Value) -> ClientPolicy {
    serde_json::from_value(json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": "ClientPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// A client as the API server stores it: the typed manifest, defaults filled in.
pub fn client(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["issuer"] = json!(ISSUER);
    let client: OIDCClient = serde_json::from_value(json!({
        "apiVersion": "nauthera.io/v1alpha1",
        "kind": "OIDCClient",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": spec,
    }))
    .unwrap();
    serde_json::to_value(client).unwrap()
}

pub fn counted(name: &str, created: Option<i64>) -> CountedClient {
    CountedClient {
        name: name.into(),
        issuer: ISSUER.into(),
        created: created.map(|s| Timestamp::from_second(s).unwrap()),
        order: 0,
        deleting: false,
    }
}

fn labels() -> NamespaceLabels {
    NamespaceLabels::of(
        "team-a",
        BTreeMap::from([("tier".to_owned(), "prod".to_owned())]),
    )
}

fn judge(
    set: &PolicySet,
    object: &Value,
    place: &CountedClient,
    clients: &[CountedClient],
) -> Evaluation {
    evaluate(
        set,
        &Judged {
            kind: PolicyKind::OidcClient,
            namespace: "team-a",
            issuer: ISSUER,
            object,
            place,
            generation: 1,
            written: false,
            recorded: None,
            approved: &[],
        },
        &labels(),
        Ok(clients),
    )
}

#[test]
fn every_rule_of_a_covering_policy_gets_a_verdict_with_the_policys_message() {
    let set = PolicySet::compile(&[
        policy(
            "web-rules",
            json!({"rules": {
                "redirectUris": {"hosts": ["app.example.com"]},
                "grantTypes": ["authorization_code"],
            }}),
        ),
        policy(
            "other-issuer",
            json!({"match": {"issuers": ["https://id.example.com/globex"]}, "rules": {"requirePkce": true}}),
        ),
        policy(
            "prod-only",
            json!({"match": {"namespaceSelector": {"matchLabels": {"tier": "dev"}}}, "rules": {"requirePkce": true}}),
        ),
    ]);
    let object = client(
        "shop",
        json!({"redirectUris": ["https://evil.example.net/cb"], "secret": {"generate": true}}),
    );
    let evaluation = judge(&set, &object, &counted("shop", None), &[]);
    assert_eq!(evaluation.policies, 3);
    assert_eq!(evaluation.verdicts.len(), 1, "{evaluation:#?}");
    let verdict = &evaluation.verdicts[0];
    assert_eq!(verdict.policy, "web-rules");
    assert!(verdict.violated());
    let refused: Vec<&RuleVerdict> = verdict.refused().collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].rule, "redirectUris");
    assert!(
        refused[0]
            .message
            .as_deref()
            .unwrap()
            .starts_with("ClientPolicy web-rules, rule redirectUris: spec.redirectUris may only"),
        "{refused:?}"
    );
    assert!(
        verdict
            .rules
            .iter()
            .any(|rule| rule.rule == "grantTypes" && rule.allowed)
    );
    assert_eq!(evaluation.approval, None);
}

#[test]
fn the_namespace_limit_counts_the_covered_clients_created_earlier() {
    let set = PolicySet::compile(&[policy(
        "limit",
        json!({"match": {"issuers": [ISSUER]}, "rules": {"maxClientsPerNamespace": 2}}),
    )]);
    let object = client(
        "new",
        json!({"tokenEndpointAuthMethod": "none", "redirectUris": ["https://a.test/cb"]}),
    );
    let mut others = vec![counted("a", Some(100)), counted("b", Some(200))];
    let mut deleting = counted("c", Some(50));
    deleting.deleting = true;
    others.push(deleting);
    // Another issuer: not covered, not counted.
    let mut elsewhere = counted("d", Some(10));
    elsewhere.issuer = "https://id.example.com/globex".into();
    others.push(elsewhere);
    // A new client comes last: two covered before it, two allowed.
    let new = judge(&set, &object, &counted("new", None), &others);
    let limit = new.verdicts[0].limit.clone().unwrap();
    assert_eq!(
        (limit.max, limit.covered, limit.earlier, limit.fits),
        (2, 2, 2, false)
    );
    assert!(
        limit
            .message
            .unwrap()
            .contains("namespace team-a may hold 2"),
        "{:?}",
        new.verdicts[0]
    );
    // One created between them keeps its place.
    let between = judge(&set, &object, &counted("new", Some(150)), &others);
    let limit = between.verdicts[0].limit.clone().unwrap();
    assert_eq!((limit.earlier, limit.fits), (1, true));
    // Its own name in the listing is not counted twice.
    let mut with_self = others.clone();
    with_self.push(counted("new", Some(150)));
    assert_eq!(
        judge(&set, &object, &counted("new", Some(150)), &with_self).verdicts[0]
            .limit
            .clone()
            .unwrap()
            .covered,
        2
    );
    // Clients not created yet count in the files' order.
    let mut first = counted("first", None);
    first.order = 1;
    let mut second = counted("new", None);
    second.order = 2;
    assert!(first.before(&second) && !second.before(&first));
}

#[test]
fn approvals_are_required_for_new_clients_and_listed_changes() {
    let set = PolicySet::compile(&[policy(
        "review",
        json!({"rules": {"approval": {"fields": ["redirectUris"]}}}),
    )]);
    let object = client(
        "shop",
        json!({"redirectUris": ["https://a.test/cb"], "secret": {"generate": true}}),
    );
    let place = counted("shop", None);
    let new = judge(&set, &object, &place, &[]);
    assert!(matches!(
        new.approval,
        Some(ApprovalVerdict::Required {
            new_client: true,
            ..
        })
    ));
    assert_eq!(
        new.verdicts[0].approval_fields,
        Some(vec!["redirectUris".to_owned()])
    );
    // Written before with the same listed fields: unchanged.
    let record = ApprovalRecord {
        generation: 1,
        fields: vec!["redirectUris".into()],
        digest: nauthera_shared::policy::digest_of(&object["spec"], &["redirectUris".into()]),
        field_digests: Default::default(),
    };
    let judged = |recorded: Option<&ApprovalRecord>, approved: &[i64]| {
        evaluate(
            &set,
            &Judged {
                kind: PolicyKind::OidcClient,
                namespace: "team-a",
                issuer: ISSUER,
                object: &object,
                place: &place,
                generation: 2,
                written: true,
                recorded,
                approved,
            },
            &labels(),
            Ok(&[]),
        )
        .approval
    };
    assert_eq!(judged(Some(&record), &[]), Some(ApprovalVerdict::Unchanged));
    assert!(matches!(
        judged(None, &[]),
        Some(ApprovalVerdict::Required {
            new_client: false,
            ..
        })
    ));
    assert_eq!(
        judged(None, &[2]),
        Some(ApprovalVerdict::Approved { generation: 2 })
    );
}

#[test]
fn unreadable_labels_make_label_selecting_policies_uncertain_and_broken_ones_are_named() {
    let set = PolicySet::compile(&[
        policy(
            "by-label",
            json!({"match": {"namespaceSelector": {"matchLabels": {"tier": "prod"}}}, "rules": {"requirePkce": true}}),
        ),
        policy(
            "odd",
            json!({"match": {"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}}}),
        ),
    ]);
    assert_eq!(set.broken.len(), 1);
    assert_eq!(set.broken[0].policy, "odd");
    let object = client(
        "shop",
        json!({"tokenEndpointAuthMethod": "none", "redirectUris": ["https://a.test/cb"]}),
    );
    let evaluation = evaluate(
        &set,
        &Judged {
            kind: PolicyKind::OidcClient,
            namespace: "team-a",
            issuer: ISSUER,
            object: &object,
            place: &counted("shop", None),
            generation: 1,
            written: false,
            recorded: None,
            approved: &[],
        },
        &NamespaceLabels::unknown("team-a", "forbidden".into()),
        Ok(&[]),
    );
    assert_eq!(evaluation.verdicts.len(), 1);
    assert_eq!(
        evaluation.verdicts[0].coverage,
        Coverage::Unknown {
            why: "forbidden".into()
        }
    );
    assert_eq!(
        evaluation
            .namespace_labels
            .get(NAMESPACE_NAME_LABEL)
            .map(String::as_str),
        Some("team-a")
    );
    assert_eq!(evaluation.broken.len(), 1);
}

#[test]
fn approvals_of_another_uid_do_not_count() {
    let approvals = [
        ApprovalFact {
            name: "shop-1".into(),
            generation: 1,
            uid: Some("old".into()),
            created: None,
        },
        ApprovalFact {
            name: "shop-2".into(),
            generation: 2,
            uid: None,
            created: None,
        },
        ApprovalFact {
            name: "shop-3".into(),
            generation: 3,
            uid: Some("new".into()),
            created: None,
        },
    ];
    assert_eq!(approved_generations(&approvals, "new"), vec![2, 3]);
}
