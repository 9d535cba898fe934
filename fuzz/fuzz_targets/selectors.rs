//! Label selectors in the text form `kubectl get -l` takes (`team in (a,b),tier=prod,!legacy`),
//! as the reconciler's `--namespace-selector` and the plugin read them
//! (`policy::parse_label_selector`, `topology::NamespaceSelector`).
//!
//! Properties: nothing panics; whatever parses is a selector the API server admits (no
//! `selector_problems`); printed back in the text form it parses to the same selector; a
//! `NamespaceSelector` survives its JSON form; matching never panics, and labels built from an
//! `In` or `Exists` selector's own requirements match it.

#![no_main]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use libfuzzer_sys::fuzz_target;
use nauthera_shared::policy::{parse_label_selector, selector_matches, selector_problems};
use nauthera_shared::topology::NamespaceSelector;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = parse_label_selector(text) else {
        assert!(NamespaceSelector::parse(text).is_err());
        return;
    };
    let problems = selector_problems(&parsed, "spec.namespaceSelector");
    assert!(
        problems.is_empty(),
        "{text:?} parses to {parsed:?}, refused: {problems:?}"
    );

    let printed = print(&parsed);
    assert_eq!(
        parse_label_selector(&printed).as_ref(),
        Ok(&parsed),
        "{text:?} printed as {printed:?}"
    );

    let namespace_selector = NamespaceSelector::parse(text).expect("the same text parses");
    let json = serde_json::to_string(&namespace_selector).expect("a selector serializes");
    let again: NamespaceSelector = serde_json::from_str(&json).expect("its JSON reads back");
    assert_eq!(again, namespace_selector);

    let _ = selector_matches(&parsed, &BTreeMap::new());
    let requirements = parsed.match_expressions.as_deref().unwrap_or_default();
    let positive = requirements
        .iter()
        .all(|r| r.operator == "In" || r.operator == "Exists");
    let keys_once = requirements
        .iter()
        .map(|r| &r.key)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        == requirements.len();
    if positive && keys_once {
        let labels = requirements
            .iter()
            .map(|r| {
                let value = r
                    .values
                    .iter()
                    .flatten()
                    .next()
                    .cloned()
                    .unwrap_or_default();
                (r.key.clone(), value)
            })
            .collect();
        assert!(
            selector_matches(&parsed, &labels),
            "{text:?} misses {labels:?}"
        );
        assert!(namespace_selector.matches(&labels));
    }
});

/// The text form of a parsed selector, one requirement at a time.
fn print(selector: &LabelSelector) -> String {
    let requirement = |r: &LabelSelectorRequirement| {
        let values = r.values.as_deref().unwrap_or_default().join(",");
        let single = r.values.as_deref().unwrap_or_default().len() == 1;
        match r.operator.as_str() {
            "In" if single => format!("{}={values}", r.key),
            "NotIn" if single => format!("{}!={values}", r.key),
            "In" => format!("{} in ({values})", r.key),
            "NotIn" => format!("{} notin ({values})", r.key),
            "Exists" => r.key.clone(),
            "DoesNotExist" => format!("!{}", r.key),
            other => panic!("the parser made an operator {other:?}"),
        }
    };
    let expressions = selector.match_expressions.iter().flatten();
    expressions.map(requirement).collect::<Vec<_>>().join(",")
}
