//! Patterns as the API server reads them. CRD `pattern`s and CEL's `matches()` are Go regular
//! expressions (RE2 syntax with Perl flags); this project checks them in Rust with the `regex`
//! crate, whose syntax is close but not the same: `\s`, `\d`, `\w` and `\b` are Unicode in Rust
//! and ASCII in Go (`\s` is `[\t\n\f\r ]`, not even `\v`), `[` nests and `&&`, `--` and `~~`
//! are set operations inside a Rust class where Go reads them literally, `\<` and `\>` are word
//! boundaries in Rust and escaped punctuation in Go, `\Q...\E` and octal escapes exist only in
//! Go.
//!
//! [`translate`] rewrites a Go pattern into a Rust pattern that matches exactly the same texts:
//! Perl classes become their ASCII classes, every class is written out item by item, escaped
//! punctuation becomes a code point. What has no equal (a construct Go refuses, a flag Go does
//! not know, a repetition over Go's 1000) is refused with the reason. [`Translation::differs`]
//! names what reads otherwise in the two dialects, so that patterns this project generates can
//! be kept free of it.

use std::fmt::Write as _;

/// Go's largest repetition count (`{n}`, `{n,m}`).
const MAX_REPEAT: u32 = 1000;

/// A Go pattern rewritten for the `regex` crate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The same pattern in Rust's syntax.
    pub rust: String,
    /// What the original pattern spells that the two dialects read otherwise (`\s`, a `[` inside
    /// a class, ...), each once: empty for a pattern that means the same in both as written.
    pub differs: Vec<String>,
}

/// Rewrites a Go (RE2) pattern for the `regex` crate, or says why it cannot mean the same.
pub fn translate(pattern: &str) -> Result<Translation, String> {
    let mut reader = Reader {
        chars: pattern.chars().collect(),
        at: 0,
        out: String::with_capacity(pattern.len() + 8),
        differs: Vec::new(),
    };
    reader.pattern()?;
    let mut differs = reader.differs;
    differs.sort();
    differs.dedup();
    Ok(Translation {
        rust: reader.out,
        differs,
    })
}

/// Compiles a Go pattern into a `regex` that matches what Go's would.
pub fn compile(pattern: &str) -> Result<regex::Regex, String> {
    let translated = translate(pattern)?;
    regex::Regex::new(&translated.rust).map_err(|error| format!("not a valid pattern: {error}"))
}

struct Reader {
    chars: Vec<char>,
    at: usize,
    out: String,
    differs: Vec<String>,
}

/// A single character or a class written into a class: the text to emit, and the character
/// when it is one (a range's end).
enum ClassItem {
    Char(char),
    Text(String),
}

fn code_point(c: char) -> String {
    format!("\\x{{{:X}}}", c as u32)
}

impl Reader {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.at + offset).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        self.at += 1;
        c
    }

    fn differ(&mut self, what: &str) {
        self.differs.push(what.to_owned());
    }

    fn pattern(&mut self) -> Result<(), String> {
        while let Some(c) = self.next() {
            match c {
                '\\' => self.escape()?,
                '[' => self.class()?,
                '(' => self.group()?,
                '{' => self.repetition()?,
                // Literal in both, but a lone bracket or brace reads as syntax in Rust.
                ']' | '}' => self.out.push_str(&code_point(c)),
                _ => self.out.push(c),
            }
        }
        Ok(())
    }

    /// After `(`: a group, with the flags Go knows.
    fn group(&mut self) -> Result<(), String> {
        self.out.push('(');
        if self.peek() != Some('?') {
            return Ok(());
        }
        self.next();
        self.out.push('?');
        match self.peek() {
            Some(':') => {
                self.next();
                self.out.push(':');
                return Ok(());
            }
            Some('P') if self.peek_at(1) == Some('<') => {
                self.next();
                self.out.push('P');
                return self.group_name();
            }
            Some('<') => return self.group_name(),
            _ => {}
        }
        // Flags: (?flags) or (?flags:...), Go knows i, m, s and U.
        let mut seen = false;
        while let Some(c) = self.next() {
            match c {
                'i' | 'm' | 's' | 'U' | '-' => {
                    seen = true;
                    self.out.push(c);
                }
                ':' | ')' if seen => {
                    self.out.push(c);
                    return Ok(());
                }
                other => {
                    return Err(format!(
                        "(?{other}...) is not a group Go's RE2 knows (flags i, m, s, U; (?:...), \
                         (?P<name>...))"
                    ));
                }
            }
        }
        Err("a group is not closed".to_owned())
    }

    fn group_name(&mut self) -> Result<(), String> {
        // After `<`.
        self.next();
        self.out.push('<');
        while let Some(c) = self.next() {
            if c == '>' {
                self.out.push('>');
                return Ok(());
            }
            if !(c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("{c:?} is not allowed in a group name"));
            }
            self.out.push(c);
        }
        Err("a group name is not closed".to_owned())
    }

    /// After `{`: a repetition `{n}`, `{n,}` or `{n,m}` (n, m at most 1000 in Go), or else a
    /// literal brace as Go reads it.
    fn repetition(&mut self) -> Result<(), String> {
        let start = self.at;
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || c == ',' {
                text.push(c);
                self.next();
            } else {
                break;
            }
        }
        let closed = self.peek() == Some('}');
        let mut parts = text.splitn(2, ',');
        let low = parts.next().unwrap_or_default();
        let high = parts.next();
        let valid =
            closed && !low.is_empty() && high.is_none_or(|h| h.chars().all(|c| c.is_ascii_digit()));
        if !valid {
            // Not a repetition: Go takes the brace literally.
            self.at = start;
            self.out.push_str(&code_point('{'));
            return Ok(());
        }
        self.next();
        for count in std::iter::once(low).chain(high.filter(|h| !h.is_empty())) {
            let n: u32 = count.parse().unwrap_or(u32::MAX);
            if n > MAX_REPEAT {
                return Err(format!(
                    "a repetition of {count} is more than Go's RE2 allows ({MAX_REPEAT})"
                ));
            }
        }
        let _ = write!(self.out, "{{{text}}}");
        Ok(())
    }

    /// After `\` outside a class.
    fn escape(&mut self) -> Result<(), String> {
        let Some(c) = self.next() else {
            return Err("a pattern may not end with a backslash".to_owned());
        };
        match c {
            'd' | 'D' | 's' | 'S' | 'w' | 'W' => {
                self.differ(&format!("\\{c} (ASCII in Go, Unicode in Rust)"));
                let (class, negated) = perl_class(c);
                let _ = write!(self.out, "[{}{class}]", if negated { "^" } else { "" });
            }
            'b' | 'B' => {
                self.differ(&format!("\\{c} (ASCII in Go, Unicode in Rust)"));
                let _ = write!(self.out, "(?-u:\\{c})");
            }
            'A' | 'z' => {
                self.out.push('\\');
                self.out.push(c);
            }
            'Q' => {
                self.differ("\\Q...\\E (only Go has it)");
                while let Some(q) = self.next() {
                    if q == '\\' && self.peek() == Some('E') {
                        self.next();
                        return Ok(());
                    }
                    self.out.push_str(&code_point(q));
                }
            }
            other => {
                let item = self.escape_item(other, false)?;
                match item {
                    ClassItem::Char(c) => self.out.push_str(&code_point(c)),
                    ClassItem::Text(text) => self.out.push_str(&text),
                }
            }
        }
        Ok(())
    }

    /// An escape that stands for one character or a Unicode class, in or out of a class: `c` is
    /// the character after the backslash.
    fn escape_item(&mut self, c: char, in_class: bool) -> Result<ClassItem, String> {
        Ok(match c {
            'a' => ClassItem::Char('\x07'),
            'f' => ClassItem::Char('\x0C'),
            't' => ClassItem::Char('\t'),
            'n' => ClassItem::Char('\n'),
            'r' => ClassItem::Char('\r'),
            'v' => ClassItem::Char('\x0B'),
            'x' => ClassItem::Char(self.hex()?),
            '0'..='7' => {
                // Go: \0 and up to two more octal digits; \1-\7 only with more digits (a lone
                // one would be a backreference, which RE2 does not have).
                let mut digits = String::from(c);
                while digits.len() < 3 && self.peek().is_some_and(|d| ('0'..='7').contains(&d)) {
                    digits.push(self.next().unwrap_or('0'));
                }
                if c != '0' && digits.len() == 1 {
                    return Err(format!("\\{c} is a backreference, which Go's RE2 refuses"));
                }
                self.differ("an octal escape (only Go has them)");
                let code = u32::from_str_radix(&digits, 8).unwrap_or(0);
                ClassItem::Char(char::from_u32(code).unwrap_or('\0'))
            }
            'p' | 'P' => {
                let name = match self.next() {
                    Some('{') => {
                        let mut name = String::new();
                        loop {
                            match self.next() {
                                Some('}') => break,
                                Some(n) => name.push(n),
                                None => return Err("a \\p{...} class is not closed".to_owned()),
                            }
                        }
                        name
                    }
                    Some(n) => n.to_string(),
                    None => return Err("a pattern may not end with \\p".to_owned()),
                };
                let bare = name.strip_prefix('^').unwrap_or(&name);
                let known = bare == "Any"
                    || (bare.len() <= 2 && bare.chars().all(|n| n.is_ascii_alphabetic()))
                    || bare
                        .split('_')
                        .all(|part| part.starts_with(|n: char| n.is_ascii_uppercase()));
                if !known {
                    return Err(format!(
                        "\\{c}{{{name}}} is not a Unicode category or script Go's RE2 knows"
                    ));
                }
                ClassItem::Text(format!("\\{c}{{{name}}}"))
            }
            'd' | 'D' | 's' | 'S' | 'w' | 'W' if in_class => {
                self.differ(&format!("\\{c} (ASCII in Go, Unicode in Rust)"));
                let (class, negated) = perl_class(c);
                if negated {
                    ClassItem::Text(format!("[^{class}]"))
                } else {
                    ClassItem::Text(class.to_owned())
                }
            }
            c if c.is_ascii_punctuation() => {
                if matches!(c, '<' | '>' | '&' | '-' | '~' | '#' | ' ') {
                    self.differ(&format!("\\{c} (escaped punctuation in Go)"));
                }
                ClassItem::Char(c)
            }
            other => {
                return Err(format!("\\{other} is not an escape Go's RE2 knows"));
            }
        })
    }

    /// After `\x`: `HH` or `{H...}`.
    fn hex(&mut self) -> Result<char, String> {
        let digits: String = if self.peek() == Some('{') {
            self.next();
            let mut digits = String::new();
            loop {
                match self.next() {
                    Some('}') => break,
                    Some(d) => digits.push(d),
                    None => return Err("a \\x{...} escape is not closed".to_owned()),
                }
            }
            digits
        } else {
            [self.next(), self.next()].into_iter().flatten().collect()
        };
        u32::from_str_radix(&digits, 16)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| format!("\\x{digits} is not a character"))
    }

    /// After `[`: a class, written out item by item.
    fn class(&mut self) -> Result<(), String> {
        let mut out = String::from("[");
        if self.peek() == Some('^') {
            self.next();
            out.push('^');
        }
        let mut first = true;
        loop {
            let Some(c) = self.next() else {
                return Err("a class [...] is not closed".to_owned());
            };
            if c == ']' && !first {
                break;
            }
            first = false;
            let low = match c {
                '[' if self.peek() == Some(':') => {
                    let rest: String = self.chars[self.at..].iter().collect();
                    let Some(end) = rest.find(":]") else {
                        return Err("a [:class:] is not closed".to_owned());
                    };
                    let name: String = rest[1..end].to_owned();
                    let bare = name.strip_prefix('^').unwrap_or(&name);
                    const ASCII: [&str; 14] = [
                        "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower",
                        "print", "punct", "space", "upper", "word", "xdigit",
                    ];
                    if !ASCII.contains(&bare) {
                        return Err(format!("[:{name}:] is not a class Go's RE2 knows"));
                    }
                    self.at += rest[..end + 2].chars().count();
                    ClassItem::Text(format!("[:{name}:]"))
                }
                '[' => {
                    self.differ("[ inside a class (a nested class in Rust)");
                    ClassItem::Char('[')
                }
                '\\' => {
                    let Some(e) = self.next() else {
                        return Err("a class may not end with a backslash".to_owned());
                    };
                    self.escape_item(e, true)?
                }
                '&' | '~' | '-' if self.peek() == Some(c) => {
                    self.differ(&format!("{c}{c} inside a class (a set operation in Rust)"));
                    ClassItem::Char(c)
                }
                c => ClassItem::Char(c),
            };
            // A range: low-high, unless the dash ends the class.
            let range = matches!(low, ClassItem::Char(_))
                && self.peek() == Some('-')
                && self.peek_at(1).is_some_and(|n| n != ']');
            match low {
                ClassItem::Char(low) if range => {
                    self.next();
                    let high = match self.next() {
                        Some('\\') => {
                            let e = self.next().ok_or("a class may not end with a backslash")?;
                            match self.escape_item(e, true)? {
                                ClassItem::Char(high) => high,
                                ClassItem::Text(_) => {
                                    return Err("a range may not end with a class".to_owned());
                                }
                            }
                        }
                        Some(high) => high,
                        None => return Err("a class [...] is not closed".to_owned()),
                    };
                    if high < low {
                        return Err(format!(
                            "{low:?}-{high:?} is not a range: its end comes before its start"
                        ));
                    }
                    let _ = write!(out, "{}-{}", code_point(low), code_point(high));
                }
                ClassItem::Char(c) => out.push_str(&code_point(c)),
                ClassItem::Text(text) => out.push_str(&text),
            }
        }
        out.push(']');
        self.out.push_str(&out);
        Ok(())
    }
}

/// The ASCII class of a Perl escape, and whether it is negated.
fn perl_class(c: char) -> (&'static str, bool) {
    match c {
        'd' => ("0-9", false),
        'D' => ("0-9", true),
        's' => ("\\t\\n\\x0C\\r ", false),
        'S' => ("\\t\\n\\x0C\\r ", true),
        'w' => ("0-9A-Za-z_", false),
        _ => ("0-9A-Za-z_", true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(pattern: &str) -> regex::Regex {
        compile(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"))
    }

    #[test]
    fn perl_classes_are_ascii_as_in_go() {
        let space = go(r"^a\sb$");
        assert!(space.is_match("a b") && space.is_match("a\tb") && space.is_match("a\u{c}b"));
        // Go's \s is [\t\n\f\r ]: no vertical tab, no non-breaking or other Unicode space.
        let unicode = regex::Regex::new(r"^a\sb$").unwrap();
        for other in ["a\u{b}b", "a\u{a0}b", "a\u{2003}b", "a\u{3000}b"] {
            assert!(!space.is_match(other), "{other:?}");
            assert!(unicode.is_match(other), "{other:?}");
        }
        let not_space = go(r"^[^\s/?#]+$");
        assert!(not_space.is_match("login.example.com\u{a0}x"));
        assert!(!not_space.is_match("a b"));
        assert!(go(r"^\d+$").is_match("0123") && !go(r"^\d+$").is_match("١٢"));
        assert!(go(r"^\w+$").is_match("a_1") && !go(r"^\w+$").is_match("é"));
        assert!(!go(r"^\S$").is_match(" ") && go(r"^\S$").is_match("\u{a0}"));
        assert!(go(r"^[\d\s]+$").is_match("1 2") && !go(r"^[\d\s]+$").is_match("1\u{a0}2"));
        assert!(go(r"^[a\D]$").is_match("x") && !go(r"^[a\D]$").is_match("1"));
        // \b between an ASCII letter and é: a boundary in Go, none in Rust's Unicode \b.
        assert!(go(r"a\b").is_match("aé"));
        assert!(!regex::Regex::new(r"a\b").unwrap().is_match("aé"));
        assert_eq!(translate(r"\s\d").unwrap().differs.len(), 2);
    }

    #[test]
    fn classes_read_as_go_reads_them() {
        // `[` inside a class is literal in Go, a nested class in Rust.
        let bracket = go(r"^[[a]$");
        assert!(bracket.is_match("[") && bracket.is_match("a"));
        // `&&`, `--` and `~~` are literal in Go.
        let ops = go(r"^[a&&b]+$");
        assert!(ops.is_match("a&b") && !ops.is_match("c"));
        assert!(go(r"^[+--]$").is_match(","));
        assert!(go(r"^[a-c-e]$").is_match("-") && go(r"^[a-c-e]$").is_match("e"));
        assert!(go(r"^[]a]$").is_match("]"));
        assert!(go(r"^[^]a]$").is_match("b") && !go(r"^[^]a]$").is_match("]"));
        assert!(go(r"^[[:alpha:][:digit:]]+$").is_match("a1"));
        assert!(go(r"^[\x21\x22\x24-\x7e]+$").is_match("!~"));
        assert!(
            go(r"^[^\x00-\x1f\x{61c}]*$").is_match("ok")
                && !go(r"^[^\x{61c}]$").is_match("\u{61c}")
        );
        assert!(go(r"(?i)^[a-z]+$").is_match("ABC"));
        assert!(translate(r"[\x21-\x7e]").unwrap().differs.is_empty());
    }

    #[test]
    fn escapes_and_braces_read_as_go_reads_them() {
        // `\<` is an escaped `<` in Go and a word boundary in Rust.
        assert!(go(r"^\<a\>$").is_match("<a>"));
        assert!(go(r"^\Qa.b\E$").is_match("a.b") && !go(r"^\Qa.b\E$").is_match("axb"));
        assert!(go(r"^\101$").is_match("A"));
        assert!(go(r"^a{$").is_match("a{") && go(r"^a{,2}$").is_match("a{,2}"));
        assert!(go(r"^a{2}}$").is_match("aa}"));
        assert!(go(r"^a]$").is_match("a]"));
        assert!(go(r"^\.\+$").is_match(".+"));
        assert!(go(r"(?i:LOCALHOST)").is_match("localhost"));
        assert!(go(r"^(?P<x>a)(?:b)$").is_match("ab"));
    }

    #[test]
    fn what_go_refuses_is_refused() {
        for (pattern, said) in [
            (r"a{1001}", "1000"),
            (r"(a)\1", "backreference"),
            (r"\e", "not an escape"),
            (r"(?x)a", "not a group"),
            (r"[[:words:]]", "[:words:]"),
            (r"\p{alpha}", "not a Unicode category"),
            (r"[z-a]", "before its start"),
            ("a\\", "backslash"),
            (r"[\b]", "not an escape"),
        ] {
            match translate(pattern) {
                Err(error) => assert!(error.contains(said), "{pattern}: {error}"),
                Ok(found) => panic!("{pattern} was translated: {found:?}"),
            }
        }
        for unicode in [r"\p{Greek}+", r"\pL\PN", r"[\p{Lu}\d]"] {
            compile(unicode).unwrap();
        }
    }

    #[test]
    fn the_project_s_own_patterns_translate_unchanged_in_meaning() {
        for pattern in [
            r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            r"^/[\x21\x22\x24-\x3e\x40-\x7e]*$",
            r#"^[!#-\[\]-~]+$"#,
            r"^[a-zA-Z][a-zA-Z0-9+.-]*://(?i:127\.0\.0\.1|\[::1\]|localhost)(:[0-9]{1,5})?([/?#].*)?$",
        ] {
            let found = translate(pattern).unwrap();
            assert!(found.differs.is_empty(), "{pattern}: {:?}", found.differs);
            regex::Regex::new(&found.rust).unwrap();
        }
    }
}
