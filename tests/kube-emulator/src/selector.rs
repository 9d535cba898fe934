//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!` not exists) and field selectors
//! (`=`, `==`, `!=` on dotted paths such as `metadata.name` or `involvedObject.uid`).

use serde_json::Value;

use crate::status::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (index, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn set_values(text: &str, selector: &str) -> Result<Vec<String>, ApiError> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| bad_selector(selector, "expected a parenthesised set of values"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

fn bad_selector(selector: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: {why} in selector \"{selector}\""
    ))
}

impl LabelSelector {
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in split_top_level(selector) {
            let requirement = if let Some(key) = part.strip_prefix('!') {
                LabelRequirement::NotExists(key.trim().to_owned())
            } else if let Some((key, value)) = part.split_once("!=") {
                LabelRequirement::NotEquals(key.trim().to_owned(), value.trim().to_owned())
            } else if let Some((key, value)) = part.split_once("==") {
                LabelRequirement::Equals(key.trim().to_owned(), value.trim().to_owned())
            } else if let Some((key, value)) = part.split_once('=') {
                LabelRequirement::Equals(key.trim().to_owned(), value.trim().to_owned())
            } else if let Some((key, values)) = part.split_once(" notin ") {
                LabelRequirement::NotIn(key.trim().to_owned(), set_values(values, selector)?)
            } else if let Some((key, values)) = part.split_once(" in ") {
                LabelRequirement::In(key.trim().to_owned(), set_values(values, selector)?)
            } else if part.contains(char::is_whitespace) || part.contains('(') {
                return Err(bad_selector(selector, "unknown operator"));
            } else {
                LabelRequirement::Exists(part.to_owned())
            };
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                LabelRequirement::Equals(key, value) => label(key) == Some(value.as_str()),
                LabelRequirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
                LabelRequirement::In(key, values) => {
                    label(key).is_some_and(|l| values.iter().any(|v| v == l))
                }
                LabelRequirement::NotIn(key, values) => {
                    !label(key).is_some_and(|l| values.iter().any(|v| v == l))
                }
                LabelRequirement::Exists(key) => label(key).is_some(),
                LabelRequirement::NotExists(key) => label(key).is_none(),
            })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    path: Vec<String>,
    value: String,
    negated: bool,
}

/// A parsed `fieldSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in split_top_level(selector) {
            let (field, value, negated) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{selector}'; can't understand '{part}'"
                )));
            };
            requirements.push(FieldRequirement {
                path: field.trim().split('.').map(str::to_owned).collect(),
                value: value.trim().to_owned(),
                negated,
            });
        }
        Ok(Self { requirements })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|requirement| {
            let mut current = Some(object);
            for segment in &requirement.path {
                current = current.and_then(|v| v.get(segment));
            }
            let actual = match current {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == requirement.value) != requirement.negated
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators() {
        let object = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let matches = |s: &str| LabelSelector::parse(s).unwrap().matches(&object);
        assert!(matches("app=web"));
        assert!(matches("app==web,tier"));
        assert!(matches("app!=db"));
        assert!(matches("app in (web, api)"));
        assert!(matches("app notin (db),!missing"));
        assert!(!matches("app in (db,api)"));
        assert!(!matches("missing"));
        assert!(!matches("tier!=front"));
        assert!(matches(""));
    }

    #[test]
    fn malformed_label_selector_is_a_bad_request() {
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selector_on_nested_paths() {
        let object =
            json!({"metadata": {"name": "a", "namespace": "ns"}, "involvedObject": {"kind": "X"}});
        let matches = |s: &str| FieldSelector::parse(s).unwrap().matches(&object);
        assert!(matches("metadata.name=a,metadata.namespace==ns"));
        assert!(matches("involvedObject.kind=X"));
        assert!(matches("metadata.name!=b"));
        assert!(!matches("metadata.name=b"));
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
