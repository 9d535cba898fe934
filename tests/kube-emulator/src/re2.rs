//! Regular expressions read as the API server reads them: Go's RE2, whose Perl classes are
//! ASCII (`\d` is `[0-9]`, `\s` is `[\t\n\f\r ]`, `\w` is `[0-9A-Za-z_]`, `\b` an ASCII word
//! boundary), where Rust's `regex` makes them Unicode (a no-break space is `\s` there, `٣` is
//! `\d`). [`translate`] writes a pattern's Perl classes out as RE2 means them, for schema
//! `pattern`s and the literal patterns of CEL's `matches`; the rest of the two dialects agree on
//! what the API server accepts.

/// `pattern` with its Perl classes written out as RE2's ASCII ones.
pub fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    // Inside a bracketed class (`[...]`), where a class is written without its brackets.
    let mut in_class = false;
    // Right after `[` or `[^`, where `]` is a literal.
    let mut class_start = false;
    while let Some(c) = chars.next() {
        let at_start = std::mem::take(&mut class_start);
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let class = match next {
                    'd' => Some(("0-9", false)),
                    'D' => Some(("0-9", true)),
                    's' => Some(("\\t\\n\\f\\r ", false)),
                    'S' => Some(("\\t\\n\\f\\r ", true)),
                    'w' => Some(("0-9A-Za-z_", false)),
                    'W' => Some(("0-9A-Za-z_", true)),
                    _ => None,
                };
                match (class, in_class) {
                    (Some((members, false)), false) => {
                        out.push('[');
                        out.push_str(members);
                        out.push(']');
                    }
                    (Some((members, true)), false) => {
                        out.push_str("[^");
                        out.push_str(members);
                        out.push(']');
                    }
                    (Some((members, false)), true) => out.push_str(members),
                    // A negated class inside a class: Rust's nested class keeps its meaning.
                    (Some((members, true)), true) => {
                        out.push_str("[^");
                        out.push_str(members);
                        out.push(']');
                    }
                    (None, false) if next == 'b' || next == 'B' => {
                        out.push_str("(?-u:\\");
                        out.push(next);
                        out.push(')');
                    }
                    (None, _) => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
            }
            '[' if in_class && chars.peek() == Some(&':') => {
                // `[:alpha:]`: ASCII in both dialects; copied whole.
                out.push('[');
                for d in chars.by_ref() {
                    out.push(d);
                    if d == ']' {
                        break;
                    }
                }
            }
            ']' if in_class && !at_start => {
                in_class = false;
                out.push(']');
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_match(pattern: &str, text: &str) -> bool {
        regex::Regex::new(&translate(pattern))
            .unwrap()
            .is_match(text)
    }

    #[test]
    fn perl_classes_are_ascii_as_in_re2() {
        assert!(!is_match(r"^\s$", "\u{a0}"));
        assert!(is_match(r"^\s+$", " \t\n\r\x0c"));
        assert!(
            !is_match(r"^\s$", "\x0b"),
            "RE2's \\s leaves out the vertical tab"
        );
        assert!(!is_match(r"^\d$", "٣"));
        assert!(is_match(r"^\d+$", "0123456789"));
        assert!(!is_match(r"^\w$", "é"));
        assert!(is_match(r"^\S+$", "é"));
        assert!(is_match(r"^[\w.-]+$", "a_b.c-d"));
        assert!(!is_match(r"^[\w.-]+$", "é"));
        assert!(is_match(r"^[^\s]+$", "a\u{a0}b"));
        assert!(is_match(r"\bab\b", "x ab y"));
        assert!(is_match(r"^[]a]+$", "]a"));
        assert!(is_match(r"^[[:alpha:]\d]+$", "ab12"));
        assert!(is_match(r"^a\.b\\s$", r"a.b\s"));
        assert_eq!(
            translate(r"^https://[^\s/?#]+$"),
            r"^https://[^\t\n\f\r /?#]+$"
        );
    }
}
