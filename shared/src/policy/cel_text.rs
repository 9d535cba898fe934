//! CEL and RE2 text built from values: literals quoted so that no value of a policy can change
//! the expression it goes into.

/// A CEL string literal.
pub fn string(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        match c {
            '\\' => quoted.push_str("\\\\"),
            '\'' => quoted.push_str("\\'"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('\'');
    quoted
}

/// A CEL list of string literals.
pub fn string_list<'a>(values: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = values.into_iter().map(string).collect();
    format!("[{}]", items.join(", "))
}

/// Whether `object.spec.<path>` is set: present and not `null`. The API server hands an
/// admission policy the object as stored, where a nullable field may hold an explicit `null`
/// that `has()` counts as present (and that no selection or macro may be applied to); the typed
/// manifest the reconciler reads has no such field. Every read of a field goes through this, so
/// that an explicit `null` means what leaving the field out means, in both places. The field is
/// compared as `dyn`: the API server type-checks a policy's expressions against the resource's
/// schema, where a list, string or boolean is never `null` (`_!=_` on `(list(string), null)` has
/// no overload), and would report every such comparison in the policy's status.
pub fn is_set(path: &str) -> String {
    format!("(has(object.spec.{path}) && dyn(object.spec.{path}) != null)")
}

/// A field of `object.spec` with the default the schema gives it when the manifest leaves it out
/// (the API server fills defaults in before admission, a local file has none) or sets it to
/// `null`.
pub fn spec_field_or(field: &str, default: &str) -> String {
    format!("({} ? object.spec.{field} : {default})", is_set(field))
}

/// Text matched literally by an RE2 (and Rust `regex`) pattern.
pub fn regex_literal(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_backslashes_cannot_end_a_literal() {
        assert_eq!(string(r"a'b\c"), r"'a\'b\\c'");
        assert_eq!(string_list(["x", "y"]), "['x', 'y']");
    }

    #[test]
    fn regex_metacharacters_are_escaped() {
        let pattern = format!("^{}$", regex_literal("/cb.v1?(x)"));
        let re = regex::Regex::new(&pattern).unwrap();
        assert!(re.is_match("/cb.v1?(x)"));
        assert!(!re.is_match("/cbXv1(x)"));
    }
}
