//! Label selectors, matched as the API server matches them, and read from the text form
//! `kubectl get -l` takes (`team in (a,b),tier=prod,!legacy`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::kube_names;

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

/// One thing the API server refuses in a selector: the field (`<at>.matchLabels.env`,
/// `<at>.matchExpressions[0].values[1]`) and apimachinery's message for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorProblem {
    pub field: String,
    pub message: String,
}

/// What the API server refuses of a selector (`ValidateLabelSelector` without options, as it
/// checks a ValidatingAdmissionPolicy's `namespaceSelector`), each under its field path below
/// `at`: label keys are qualified names, label values at most 63 characters of
/// `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`, an operator one of In, NotIn, Exists and
/// DoesNotExist, with values exactly for In and NotIn.
pub fn problems(selector: &LabelSelector, at: &str) -> Vec<SelectorProblem> {
    let mut problems = Vec::new();
    let mut add = |field: String, message: String| {
        problems.push(SelectorProblem { field, message });
    };
    for (key, value) in selector.match_labels.iter().flatten() {
        let field = format!("{at}.matchLabels{}", member(key));
        for message in kube_names::qualified_name(key) {
            add(field.clone(), format!("key {key:?}: {message}"));
        }
        for message in kube_names::label_value(value) {
            add(field.clone(), format!("value {value:?}: {message}"));
        }
    }
    for (index, e) in selector.match_expressions.iter().flatten().enumerate() {
        let values = e.values.as_deref().unwrap_or_default();
        let field = format!("{at}.matchExpressions[{index}]");
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => add(
                format!("{field}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'".to_owned(),
            ),
            "Exists" | "DoesNotExist" if !values.is_empty() => add(
                format!("{field}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'".to_owned(),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => add(
                format!("{field}.operator"),
                format!(
                    "{other:?}: not a valid selector operator (In, NotIn, Exists, DoesNotExist)"
                ),
            ),
        }
        for message in kube_names::qualified_name(&e.key) {
            add(format!("{field}.key"), format!("{:?}: {message}", e.key));
        }
        for (n, value) in values.iter().enumerate() {
            for message in kube_names::label_value(value) {
                add(
                    format!("{field}.values[{n}]"),
                    format!("{value:?}: {message}"),
                );
            }
        }
    }
    problems
}

/// A map key as a path shows it: `.env`, or `["app.kubernetes.io/name"]` when it is empty or
/// holds anything but letters, digits, `-` and `_`.
fn member(key: &str) -> String {
    let plain = key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if key.is_empty() || !plain {
        format!("[{key:?}]")
    } else {
        format!(".{key}")
    }
}

/// Reads a selector in the text form the API server's `labelSelector` parameter and `kubectl
/// get -l` take: requirements separated by commas, each `key`, `!key`, `key=value` (or `==`),
/// `key!=value`, `key in (v1,v2)` or `key notin (v1,v2)`. Every requirement becomes one
/// `matchExpressions` entry, so that [`matches`] judges it as the API server does (`key!=value`
/// also matches a namespace without the label). An empty text selects everything.
pub fn parse(text: &str) -> Result<LabelSelector, String> {
    let mut reader = Reader {
        text,
        chars: text.char_indices().peekable(),
    };
    let mut requirements = Vec::new();
    loop {
        reader.skip_spaces();
        if reader.peek().is_none() {
            if requirements.is_empty() {
                break;
            }
            return Err(format!("{text:?} ends with a comma; remove it"));
        }
        requirements.push(reader.requirement()?);
        reader.skip_spaces();
        match reader.next() {
            None => break,
            Some(',') => continue,
            Some(other) => {
                return Err(format!(
                    "{text:?}: unexpected {other:?} after a requirement; separate requirements \
                     with commas"
                ));
            }
        }
    }
    Ok(LabelSelector {
        match_expressions: (!requirements.is_empty()).then_some(requirements),
        match_labels: None,
    })
}

struct Reader<'a> {
    text: &'a str,
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
}

impl Reader<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().map(|(_, c)| *c)
    }

    fn next(&mut self) -> Option<char> {
        self.chars.next().map(|(_, c)| c)
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.next();
        }
    }

    /// A run of characters up to a space or an operator character.
    fn word(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek() {
            if c.is_whitespace() || "=!,()<>".contains(c) {
                break;
            }
            word.push(c);
            self.next();
        }
        word
    }

    fn key(&mut self) -> Result<String, String> {
        self.skip_spaces();
        let key = self.word();
        check_key(&key).map_err(|problem| format!("{:?}: {problem}", self.text))?;
        Ok(key)
    }

    fn value(&mut self) -> Result<String, String> {
        self.skip_spaces();
        let value = self.word();
        check_value(&value).map_err(|problem| format!("{:?}: {problem}", self.text))?;
        Ok(value)
    }

    fn requirement(&mut self) -> Result<LabelSelectorRequirement, String> {
        let requirement =
            |key: String, operator: &str, values: Vec<String>| LabelSelectorRequirement {
                key,
                operator: operator.to_owned(),
                values: (!values.is_empty()).then_some(values),
            };
        if self.peek() == Some('!') {
            self.next();
            return Ok(requirement(self.key()?, "DoesNotExist", Vec::new()));
        }
        let key = self.key()?;
        self.skip_spaces();
        match self.peek() {
            None | Some(',') => Ok(requirement(key, "Exists", Vec::new())),
            Some('=') => {
                self.next();
                if self.peek() == Some('=') {
                    self.next();
                }
                Ok(requirement(key, "In", vec![self.value()?]))
            }
            Some('!') => {
                self.next();
                if self.next() != Some('=') {
                    return Err(format!("{:?}: `!` after {key} must be `!=`", self.text));
                }
                Ok(requirement(key, "NotIn", vec![self.value()?]))
            }
            Some('<' | '>') => Err(format!(
                "{:?}: `<` and `>` do not select namespaces; use =, !=, in, notin, a key or \
                 !key",
                self.text
            )),
            Some(_) => {
                let operator = match self.word().as_str() {
                    "in" => "In",
                    "notin" => "NotIn",
                    other => {
                        return Err(format!(
                            "{:?}: {other:?} after {key} is not an operator (=, ==, !=, in, \
                             notin)",
                            self.text
                        ));
                    }
                };
                Ok(requirement(key, operator, self.values()?))
            }
        }
    }

    /// `(v1, v2, ...)`, not empty.
    fn values(&mut self) -> Result<Vec<String>, String> {
        self.skip_spaces();
        if self.next() != Some('(') {
            return Err(format!(
                "{:?}: in and notin take a list in parentheses, like in (a,b)",
                self.text
            ));
        }
        let mut values = Vec::new();
        loop {
            values.push(self.value()?);
            self.skip_spaces();
            match self.next() {
                Some(',') => continue,
                Some(')') => break,
                _ => return Err(format!("{:?}: a list of values lacks its `)`", self.text)),
            }
        }
        if values.iter().all(String::is_empty) {
            return Err(format!(
                "{:?}: in and notin need at least one value",
                self.text
            ));
        }
        Ok(values)
    }
}

/// A label key: a qualified name (an optional DNS subdomain prefix and `/`, then a name of up
/// to 63 letters, digits, `-`, `_` and `.`, beginning and ending with a letter or digit).
fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("a requirement lacks its label key".to_owned());
    }
    let problems = kube_names::qualified_name(key);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{key:?} is not a label key: {}",
            problems.join("; ")
        ))
    }
}

/// A label value: empty, or up to 63 letters, digits, '-', '_' or '.', beginning and ending
/// with a letter or digit.
fn check_value(value: &str) -> Result<(), String> {
    let problems = kube_names::label_value(value);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not a label value: {}",
            problems.join("; ")
        ))
    }
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

    #[test]
    fn selector_text_the_api_server_refuses_is_named_by_its_field() {
        let at = "spec.match.namespaceSelector";
        let selector = LabelSelector {
            match_labels: Some(labels(&[
                ("env", "prod eu"),
                ("app.kubernetes.io/part-of", "shop"),
                ("tier", &"x".repeat(64)),
                ("bad key", "ok"),
            ])),
            match_expressions: Some(vec![
                requirement("team", "In", &["a", "-b"]),
                requirement("example.com/zone", "Exists", &[]),
                requirement("Example.com/zone", "DoesNotExist", &[]),
            ]),
        };
        let found: Vec<(String, String)> = problems(&selector, at)
            .into_iter()
            .map(|p| (p.field, p.message))
            .collect();
        let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "spec.match.namespaceSelector.matchLabels[\"bad key\"]",
                "spec.match.namespaceSelector.matchLabels.env",
                "spec.match.namespaceSelector.matchLabels.tier",
                "spec.match.namespaceSelector.matchExpressions[0].values[1]",
                "spec.match.namespaceSelector.matchExpressions[2].key",
            ],
            "{found:#?}"
        );
        let env = &found[1].1;
        assert!(
            env.starts_with("value \"prod eu\": a valid label must be an empty string"),
            "{env}"
        );
        assert!(
            env.contains(
                "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'"
            ),
            "{env}"
        );
        assert!(
            found[2].1.contains("must be no more than 63 characters"),
            "{found:#?}"
        );
        assert!(found[4].1.contains("prefix part"), "{found:#?}");

        // What a real namespace can carry is accepted.
        let fine = LabelSelector {
            match_labels: Some(labels(&[
                ("kubernetes.io/metadata.name", "team-a"),
                ("env", ""),
            ])),
            match_expressions: Some(vec![requirement("env", "NotIn", &["dev", "test_1"])]),
        };
        assert_eq!(problems(&fine, at), Vec::new());
    }

    #[test]
    fn the_text_form_reads_as_kubectl_writes_it() {
        let selector =
            parse("team in (a, b),tier=prod, !legacy,env!=dev,zone notin (x),owner").unwrap();
        let expressions = selector.match_expressions.clone().unwrap();
        let shown: Vec<(&str, &str, Vec<&str>)> = expressions
            .iter()
            .map(|e| {
                (
                    e.key.as_str(),
                    e.operator.as_str(),
                    e.values.iter().flatten().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            vec![
                ("team", "In", vec!["a", "b"]),
                ("tier", "In", vec!["prod"]),
                ("legacy", "DoesNotExist", vec![]),
                ("env", "NotIn", vec!["dev"]),
                ("zone", "NotIn", vec!["x"]),
                ("owner", "Exists", vec![]),
            ]
        );
        assert!(problems(&selector, "selector").is_empty());
        let wanted = labels(&[("team", "b"), ("tier", "prod"), ("owner", "ops")]);
        assert!(matches(&selector, &wanted));
        assert!(!matches(
            &selector,
            &labels(&[
                ("team", "b"),
                ("tier", "prod"),
                ("owner", "ops"),
                ("env", "dev")
            ])
        ));
        assert_eq!(parse("tier==prod").unwrap(), parse("tier=prod").unwrap());
        assert_eq!(parse("  ").unwrap(), LabelSelector::default());
        assert!(matches(
            &parse("example.com/team=a").unwrap(),
            &labels(&[("example.com/team", "a")])
        ));
    }

    #[test]
    fn a_bad_text_selector_says_what_is_wrong() {
        for (text, expected) in [
            ("team in a,b", "parentheses"),
            ("team in ()", "at least one value"),
            ("team in (a", "lacks its `)`"),
            ("team=a,", "ends with a comma"),
            ("team near a", "not an operator"),
            ("=a", "lacks its label key"),
            ("team=a b", "unexpected"),
            ("Team_=a", "not a label key"),
            ("-team=a", "not a label key"),
            ("UPPER.example/x=a", "prefix"),
            ("team=a*", "not a label value"),
            ("team=-a", "not a label value"),
            ("count>3", "do not select"),
            ("team!a", "must be `!=`"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
