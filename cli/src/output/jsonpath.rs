//! `-o jsonpath=TEMPLATE`, as kubectl reads it: text with `{...}` expressions over the report's
//! JSON, `{range EXPR}...{end}` to repeat a part for each result, and quoted literals such as
//! `{"\n"}`. Paths are `.field`, `['field']`, `[n]` (negative from the end) and `[*]`;
//! several results of one expression are joined by spaces, strings printed as they are and
//! anything else as JSON. Filters (`[?(...)]`) and recursive descent (`..`) are refused by name.

use serde_json::Value;

/// A parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Path(Vec<Step>),
    Range(Vec<Step>, Vec<Part>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(i64),
    All,
}

impl Template {
    /// Reads a template; the error names what is not understood.
    pub fn parse(template: &str) -> Result<Template, String> {
        let mut stack: Vec<(Vec<Step>, Vec<Part>)> = Vec::new();
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                parts.push(Part::Text(rest.to_owned()));
                break;
            };
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let close = rest[open..]
                .find('}')
                .map(|at| open + at)
                .ok_or_else(|| format!("jsonpath: unclosed {{ in `{template}`"))?;
            let expression = rest[open + 1..close].trim();
            rest = &rest[close + 1..];
            if let Some(path) = expression.strip_prefix("range ") {
                stack.push((steps(path.trim())?, std::mem::take(&mut parts)));
            } else if expression == "end" {
                let (path, outer) = stack.pop().ok_or_else(|| {
                    format!("jsonpath: {{end}} without {{range}} in `{template}`")
                })?;
                let body = std::mem::replace(&mut parts, outer);
                parts.push(Part::Range(path, body));
            } else if let Some(literal) = quoted(expression) {
                parts.push(Part::Text(unescape(literal)));
            } else {
                parts.push(Part::Path(steps(expression)?));
            }
        }
        if !stack.is_empty() {
            return Err(format!(
                "jsonpath: {{range}} without {{end}} in `{template}`"
            ));
        }
        Ok(Template { parts })
    }

    /// The text the template makes of `data`.
    pub fn render(&self, data: &Value) -> String {
        let mut out = String::new();
        render_parts(&self.parts, data, &mut out);
        out
    }
}

fn render_parts(parts: &[Part], data: &Value, out: &mut String) {
    for part in parts {
        match part {
            Part::Text(text) => out.push_str(text),
            Part::Path(path) => {
                let found: Vec<String> = select(data, path).into_iter().map(show).collect();
                out.push_str(&found.join(" "));
            }
            Part::Range(path, body) => {
                for item in select(data, path) {
                    render_parts(body, item, out);
                }
            }
        }
    }
}

fn show(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn select<'a>(data: &'a Value, path: &[Step]) -> Vec<&'a Value> {
    let mut current = vec![data];
    for step in path {
        current = current
            .into_iter()
            .flat_map(|value| -> Vec<&Value> {
                match (step, value) {
                    (Step::Field(name), Value::Object(map)) => map.get(name).into_iter().collect(),
                    (Step::Index(index), Value::Array(items)) => {
                        let at = if *index < 0 {
                            i64::try_from(items.len()).unwrap_or(i64::MAX) + index
                        } else {
                            *index
                        };
                        usize::try_from(at)
                            .ok()
                            .and_then(|at| items.get(at))
                            .into_iter()
                            .collect()
                    }
                    (Step::All, Value::Array(items)) => items.iter().collect(),
                    (Step::All, Value::Object(map)) => map.values().collect(),
                    _ => Vec::new(),
                }
            })
            .collect();
    }
    current
}

/// `.a.b[0]['c'][*]`, with an optional leading `$` or `@`.
fn steps(expression: &str) -> Result<Vec<Step>, String> {
    let unsupported = |what: &str| format!("jsonpath: {what} is not supported in `{expression}`");
    let mut rest = expression
        .strip_prefix('$')
        .or_else(|| expression.strip_prefix('@'))
        .unwrap_or(expression);
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if rest.starts_with("..") {
            return Err(unsupported("recursive descent (..)"));
        }
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return Err(format!("jsonpath: an empty field name in `{expression}`"));
            }
            steps.push(Step::Field(after[..end].to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after
                .find(']')
                .ok_or_else(|| format!("jsonpath: unclosed [ in `{expression}`"))?;
            let inside = after[..end].trim();
            steps.push(match inside {
                "*" => Step::All,
                _ if inside.starts_with('?') => return Err(unsupported("a filter ([?(...)])")),
                _ => match quoted(inside) {
                    Some(name) => Step::Field(name.to_owned()),
                    None => Step::Index(inside.parse().map_err(|_| {
                        format!("jsonpath: `[{inside}]` is not an index, * or a quoted name")
                    })?),
                },
            });
            rest = &after[end + 1..];
        } else {
            return Err(format!(
                "jsonpath: `{expression}` must start with . or [ (for example {{.resources[*].name}})"
            ));
        }
    }
    Ok(steps)
}

fn quoted(text: &str) -> Option<&str> {
    ['"', '\'']
        .into_iter()
        .find_map(|quote| text.strip_prefix(quote)?.strip_suffix(quote))
}

fn unescape(text: &str) -> String {
    text.replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace("\\r", "\r")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(template: &str, data: &Value) -> String {
        Template::parse(template).unwrap().render(data)
    }

    #[test]
    fn paths_ranges_and_literals_render_as_kubectl_renders_them() {
        let data = serde_json::json!({
            "kind": "StatusReport",
            "resources": [
                {"name": "web", "phase": "Registered", "generation": 2},
                {"name": "shop", "phase": "Error", "generation": 1}
            ],
            "summary": {"total": 2}
        });
        assert_eq!(render("{.kind}", &data), "StatusReport");
        assert_eq!(render("{.resources[*].name}", &data), "web shop");
        assert_eq!(render("{.resources[-1].name}", &data), "shop");
        assert_eq!(render("{$.summary['total']}", &data), "2");
        assert_eq!(
            render(r#"{range .resources[*]}{.name}={.phase}{"\n"}{end}"#, &data),
            "web=Registered\nshop=Error\n"
        );
        assert_eq!(render("total: {.summary.total}", &data), "total: 2");
        assert_eq!(render("{.summary}", &data), r#"{"total":2}"#);
        assert_eq!(render("{.missing}", &data), "");
    }

    #[test]
    fn what_is_not_understood_is_named() {
        for (template, expected) in [
            ("{.a", "unclosed {"),
            ("{range .a[*]}{.b}", "without {end}"),
            ("{end}", "without {range}"),
            ("{..name}", "recursive descent"),
            ("{.a[?(@.b==1)]}", "a filter"),
            ("{.a[x]}", "is not an index"),
            ("{name}", "must start with"),
        ] {
            let error = Template::parse(template).unwrap_err();
            assert!(error.contains(expected), "{template}: {error}");
        }
    }
}
