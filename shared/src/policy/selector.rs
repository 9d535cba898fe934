//! Label selectors, matched as the API server matches them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether the labels satisfy the selector: every `matchLabels` pair and every
/// `matchExpressions` requirement. An empty selector matches everything.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector.match_labels.iter().flatten();
    let by_labels = pairs
        .into_iter()
        .all(|(key, value)| labels.get(key) == Some(value));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let present = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => present.is_some_and(|v| values.contains(v)),
            "NotIn" => present.is_none_or(|v| !values.contains(v)),
            "Exists" => present.is_some(),
            "DoesNotExist" => present.is_none(),
            // An operator the API server refuses at admission: it matches nothing.
            _ => false,
        }
    });
    by_labels && by_expressions
}

/// The problems the API server reports for a selector, by field path under `field`.
pub fn problems(selector: &LabelSelector, field: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (index, e) in selector.match_expressions.iter().flatten().enumerate() {
        let values = e.values.as_deref().unwrap_or_default();
        let at = format!("{field}.matchExpressions[{index}]");
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => problems.push(format!(
                "{at}.values: must be specified when `operator` is 'In' or 'NotIn'"
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => problems.push(format!(
                "{at}.values: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => problems.push(format!(
                "{at}.operator: \"{other}\" is not a valid label selector operator (In, NotIn, Exists, DoesNotExist)"
            )),
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn labels_and_expressions_must_all_hold() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("tier", "prod")])),
            match_expressions: Some(vec![
                requirement("team", "In", &["a", "b"]),
                requirement("legacy", "DoesNotExist", &[]),
            ]),
        };
        assert!(matches(
            &selector,
            &labels(&[("tier", "prod"), ("team", "a")])
        ));
        assert!(!matches(
            &selector,
            &labels(&[("tier", "dev"), ("team", "a")])
        ));
        assert!(!matches(
            &selector,
            &labels(&[("tier", "prod"), ("team", "c")])
        ));
        assert!(!matches(
            &selector,
            &labels(&[("tier", "prod"), ("team", "a"), ("legacy", "y")])
        ));
        assert!(matches(&LabelSelector::default(), &labels(&[])));
    }

    #[test]
    fn not_in_matches_a_missing_label_and_unknown_operators_match_nothing() {
        let not_in = LabelSelector {
            match_expressions: Some(vec![requirement("team", "NotIn", &["a"])]),
            ..LabelSelector::default()
        };
        assert!(matches(&not_in, &labels(&[])));
        assert!(!matches(&not_in, &labels(&[("team", "a")])));
        let odd = LabelSelector {
            match_expressions: Some(vec![requirement("team", "Near", &["a"])]),
            ..LabelSelector::default()
        };
        assert!(!matches(&odd, &labels(&[("team", "a")])));
        assert_eq!(problems(&odd, "spec.match.namespaceSelector").len(), 1);
    }
}
