//! Approval names and what `approve` says, over plain values.

use nauthera_shared::catalog::Reason;

use super::*;
use crate::model::view::fixtures::view;
use crate::output::snapshot::assert_snapshot;

#[test]
fn the_name_is_client_dash_generation_and_stays_a_valid_name() {
    assert_eq!(approval_name("shop", 3), "shop-3");
    let long = format!("{}.{}", "a".repeat(120), "b-".repeat(66));
    let long = long.trim_end_matches('-').to_owned();
    assert!(long.len() <= 253);
    let name = approval_name(&long, 1_234_567);
    assert!(name.len() <= 253, "{}", name.len());
    assert!(name.ends_with("-1234567"), "{name}");
    assert!(name.starts_with(&long[..100]), "{name}");
    // A DNS subdomain: lower-case alphanumerics, `-` and `.`, each label starting and ending
    // with an alphanumeric.
    for label in name.split('.') {
        assert!(!label.is_empty(), "{name}");
        assert!(
            label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert!(!label.starts_with('-') && !label.ends_with('-'), "{name}");
    }
    // Another long name with the same start gets another approval name.
    let other = format!("{}x", &long[..long.len() - 1]);
    assert_ne!(approval_name(&other, 1_234_567), name);
    // Stable: the same client and generation always name the same approval.
    assert_eq!(approval_name(&long, 1_234_567), name);
}

#[test]
fn an_approval_without_uid_or_with_the_same_uid_approves_the_same() {
    let wanted = ClientApprovalSpec {
        client: "shop".into(),
        generation: 2,
        uid: Some("u-1".into()),
    };
    assert!(same_approval(&wanted, &wanted));
    let any_uid = ClientApprovalSpec {
        uid: None,
        ..wanted.clone()
    };
    assert!(same_approval(&any_uid, &wanted));
    let recreated = ClientApprovalSpec {
        uid: Some("u-0".into()),
        ..wanted.clone()
    };
    assert!(!same_approval(&recreated, &wanted));
    let older = ClientApprovalSpec {
        generation: 1,
        ..wanted.clone()
    };
    assert!(!same_approval(&older, &wanted));
}

#[test]
fn what_approve_says_snapshot() {
    let mut waiting = view(
        Kind::OidcClient,
        "team-a",
        "shop",
        Reason::WaitingForApproval,
        0,
    );
    if let Some(status) = waiting.status.as_mut() {
        status.message = Some(
            "ClientPolicy web-rules, rule approval: a change to redirectUris needs an approval \
             of generation 2 (kubectl nauthera approve oidcclient/shop -n team-a); it is not \
             sent until then and the server keeps generation 1 in force"
                .into(),
        );
    }
    let registered = view(Kind::OidcClient, "team-a", "web", Reason::Registered, 0);
    let mut text = render(&report(&waiting, 2, "shop-2".into(), true));
    text.push_str(&render(&report(&waiting, 2, "shop-2".into(), false)));
    text.push_str(&render(&report(&registered, 2, "web-2".into(), true)));
    text.push_str(&render(&report(&registered, 1, "web-1".into(), true)));
    assert_snapshot("approve.txt", &text);
    let json = serde_json::to_value(report(&waiting, 2, "shop-2".into(), true)).unwrap();
    assert_eq!(json["kind"], "ApproveReport");
    assert_eq!(json["waiting"], true);
    assert_eq!(json["clientReason"], "WaitingForApproval");
}

#[test]
fn a_generation_in_force_or_older_is_refused_naming_the_generation_in_force() {
    let Err(CliError::Refused(message)) = refuse_in_force("web", 2, Some(2)) else {
        panic!("generation 2 is in force");
    };
    assert!(
        message.contains("generation 2 of oidcclient/web is already in force"),
        "{message}"
    );
    let Err(CliError::Refused(message)) = refuse_in_force("web", 1, Some(3)) else {
        panic!("generation 1 is older than the one in force");
    };
    assert!(
        message.contains("oidcclient/web has generation 3 in force"),
        "{message}"
    );
    // A later generation, or a client with nothing in force yet, may be approved.
    assert!(refuse_in_force("web", 3, Some(2)).is_ok());
    assert!(refuse_in_force("web", 1, None).is_ok());
}
