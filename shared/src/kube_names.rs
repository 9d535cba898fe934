//! The API server's rules for names and label text, as apimachinery's `validation` package states
//! them (`IsQualifiedName`, `IsValidLabelValue`, `IsDNS1123Subdomain`, `ValidateFieldManager`),
//! with its messages: what this project sends to the API server (label selectors, event
//! reporters, field managers) is checked here first, so that a refusal is said where it can be
//! fixed instead of as a 422 nobody reads. Each function returns the problems, none when valid.
//!
//! Lengths are counted in bytes, as Go's `len` counts them.

/// The longest name part of a qualified name (and the longest label value).
pub const QUALIFIED_NAME_MAX: usize = 63;
/// The longest DNS-1123 subdomain (a qualified name's prefix).
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// The longest label value.
pub const LABEL_VALUE_MAX: usize = 63;
/// The longest field manager a write may name (`metav1.FieldManagerMaxLength`).
pub const FIELD_MANAGER_MAX: usize = 128;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// apimachinery's `MaxLenError`.
fn max_len(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// apimachinery's `RegexError`.
fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{message} (regex used for validation is '{format}')");
    }
    let shown: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{message} (e.g. {}regex used for validation is '{format}')",
        shown.join("or ")
    )
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, whole.
fn is_qualified_text(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, whole.
fn is_dns1123_subdomain_text(text: &str) -> bool {
    text.split('.').all(|label| {
        let bytes = label.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        bytes.first().is_some_and(alnum)
            && bytes.last().is_some_and(alnum)
            && bytes.iter().all(|b| alnum(b) || *b == b'-')
    })
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        problems.push(max_len(DNS1123_SUBDOMAIN_MAX));
    }
    if !is_dns1123_subdomain_text(value) {
        problems.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    problems
}

/// `IsQualifiedName`: a name of at most 63 characters, with an optional DNS subdomain prefix and
/// `/` (`example.com/MyName`). Label keys and an Event's `reportingController` are qualified names.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_owned());
            } else {
                problems.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|problem| format!("prefix part {problem}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > QUALIFIED_NAME_MAX {
        problems.push(format!("name part {}", max_len(QUALIFIED_NAME_MAX)));
    }
    if !is_qualified_text(name) {
        problems.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    problems
}

/// `IsValidLabelValue`: empty, or at most 63 characters like a qualified name's name part.
pub fn label_value(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        problems.push(max_len(LABEL_VALUE_MAX));
    }
    if !value.is_empty() && !is_qualified_text(value) {
        problems.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    problems
}

/// `ValidateFieldManager`: at most 128 characters, every one printable. (An empty manager is
/// refused by server-side apply; that is the caller's check.)
pub fn field_manager(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > FIELD_MANAGER_MAX {
        problems.push(format!("may not be more than {FIELD_MANAGER_MAX} bytes"));
    }
    for (position, c) in value.char_indices() {
        if !is_print(c) {
            problems.push(format!(
                "invalid character U+{:04X} (at position {position})",
                c as u32
            ));
        }
    }
    problems
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
/// Rust has no general-category table, so this errs on the side of refusing: control,
/// format, separator (other than the space), private-use, surrogate and unassigned-looking
/// characters are not printable.
fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let code = c as u32;
    // Format characters (Cf) Go does not print: soft hyphen, bidi marks and isolates, zero
    // width characters, the BOM, interlinear annotation, tags; and private use.
    !matches!(
        code,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x180E
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0xE000..=0xF8FF
            | 0xE0000..=0xE007F
            | 0xF0000..=0x10FFFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_follow_apimachinery() {
        for valid in [
            "env",
            "app.kubernetes.io/name",
            "kubernetes.io/metadata.name",
            "a",
            "My_Name-1.x",
            &"a".repeat(63),
            &format!("{}/x", "a".repeat(253)),
            "nauthera-reconciler/prod-eu",
        ] {
            assert_eq!(qualified_name(valid), Vec::<String>::new(), "{valid}");
        }
        let too_long = "a".repeat(64);
        assert_eq!(
            qualified_name(&too_long),
            vec!["name part must be no more than 63 characters".to_owned()]
        );
        let spaced = qualified_name("prod eu");
        assert_eq!(spaced.len(), 1, "{spaced:?}");
        assert!(
            spaced[0].starts_with("name part must consist of alphanumeric characters"),
            "{spaced:?}"
        );
        assert!(
            spaced[0].contains(
                "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'"
            )
        );
        assert!(spaced[0].contains("(e.g. 'MyName', or 'my.name', or '123-abc', regex"));
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty"]);
        assert!(
            qualified_name("Example.com/x")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must consist of"));
        assert_eq!(qualified_name("x/").len(), 2);
        assert_eq!(qualified_name("").len(), 2);
        assert!(!qualified_name("-a").is_empty());
        assert!(!qualified_name("a_").is_empty());
        assert!(!qualified_name("é").is_empty());
    }

    #[test]
    fn label_values_may_be_empty_and_are_63_at_most() {
        for valid in ["", "prod", "prod-eu", "a.b_c", &"x".repeat(63)] {
            assert_eq!(label_value(valid), Vec::<String>::new(), "{valid}");
        }
        assert_eq!(
            label_value(&"x".repeat(64)),
            vec!["must be no more than 63 characters".to_owned()]
        );
        let spaced = label_value("prod eu");
        assert_eq!(spaced.len(), 1);
        assert!(spaced[0].starts_with("a valid label must be an empty string"));
        assert!(spaced[0].contains("'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'"));
        // Both problems, as Go reports both.
        assert_eq!(label_value(&format!("{} x", "y".repeat(63))).len(), 2);
        assert!(!label_value("-prod").is_empty());
    }

    #[test]
    fn subdomains_are_lower_case_labels_of_253_at_most() {
        assert!(dns1123_subdomain("example.com").is_empty());
        assert!(dns1123_subdomain("a-1.b").is_empty());
        for invalid in ["", "Example.com", "a..b", "-a", "a-", "a_b"] {
            assert_eq!(dns1123_subdomain(invalid).len(), 1, "{invalid}");
        }
        let long = format!("{}.{}", "a".repeat(200), "b".repeat(60));
        assert_eq!(dns1123_subdomain(&long), vec![max_len(253)]);
    }

    #[test]
    fn field_managers_are_128_printable_bytes() {
        assert!(field_manager("nauthera-reconciler/prod-eu").is_empty());
        assert!(field_manager("a manager with spaces").is_empty());
        assert!(field_manager(&"m".repeat(128)).is_empty());
        assert_eq!(
            field_manager(&"m".repeat(129)),
            vec!["may not be more than 128 bytes".to_owned()]
        );
        assert_eq!(
            field_manager("tab\there"),
            vec!["invalid character U+0009 (at position 3)".to_owned()]
        );
        assert_eq!(field_manager("bidi\u{202e}").len(), 1);
        assert!(field_manager("café").is_empty());
    }
}
