//! Placeholders in runbook text (`<ns>`, `<name>`, ...) and filling them with live facts.
//!
//! The generated pages fill only the reconciler's own namespace and ServiceAccount with the
//! defaults of the standard install; the plugin fills every placeholder it knows a fact for.

use std::collections::BTreeMap;
use std::fmt;

/// A placeholder the runbook text may use. The set is small and fixed so the plugin knows how to
/// fill every one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Placeholder {
    /// `<ns>`: the resource's namespace.
    Namespace,
    /// `<name>`: the resource's name.
    Name,
    /// `<kind>`: the resource's kind as kubectl takes it (`oidcclient`, `branding`, ...).
    Kind,
    /// `<secret>`: the resource's Secret (the client Secret or the referenced Secret).
    Secret,
    /// `<reconciler-tls-secret>`: the Secret the reconciler's client certificate comes from.
    ReconcilerTlsSecret,
    /// `<reconciler-ns>`: the reconciler's namespace.
    ReconcilerNamespace,
    /// `<reconciler-sa>`: the reconciler's ServiceAccount.
    ReconcilerServiceAccount,
    /// `<audit-filter>`: the fields that select the object's audit records.
    AuditFilter,
    /// `<slug>`: the organization's slug.
    Slug,
    /// `<policy>`: the ClientPolicy that holds the resource back.
    Policy,
    /// `<generation>`: the resource's `metadata.generation`.
    Generation,
    /// `<manager>`: the other reconciler's manager (`status.managedElsewhere.manager`).
    Manager,
}

impl Placeholder {
    pub const ALL: [Placeholder; 12] = [
        Placeholder::Namespace,
        Placeholder::Name,
        Placeholder::Kind,
        Placeholder::Secret,
        Placeholder::ReconcilerTlsSecret,
        Placeholder::ReconcilerNamespace,
        Placeholder::ReconcilerServiceAccount,
        Placeholder::AuditFilter,
        Placeholder::Slug,
        Placeholder::Policy,
        Placeholder::Generation,
        Placeholder::Manager,
    ];

    /// The placeholder as written in the text, angle brackets included.
    pub const fn token(self) -> &'static str {
        match self {
            Placeholder::Namespace => "<ns>",
            Placeholder::Name => "<name>",
            Placeholder::Kind => "<kind>",
            Placeholder::Secret => "<secret>",
            Placeholder::ReconcilerTlsSecret => "<reconciler-tls-secret>",
            Placeholder::ReconcilerNamespace => "<reconciler-ns>",
            Placeholder::ReconcilerServiceAccount => "<reconciler-sa>",
            Placeholder::AuditFilter => "<audit-filter>",
            Placeholder::Slug => "<slug>",
            Placeholder::Policy => "<policy>",
            Placeholder::Generation => "<generation>",
            Placeholder::Manager => "<manager>",
        }
    }

    /// What the placeholder stands for, for the legend of a runbook page.
    pub const fn meaning(self) -> &'static str {
        match self {
            Placeholder::Namespace => "the resource's namespace",
            Placeholder::Name => "the resource's name",
            Placeholder::Kind => {
                "the resource's kind: `oidcclient`, `branding`, `identityprovider` or `organization`"
            }
            Placeholder::Secret => {
                "the resource's Secret: the client Secret (`spec.secret.secretName`, else the \
                 resource's name) or the referenced Secret"
            }
            Placeholder::ReconcilerTlsSecret => {
                "the Secret the reconciler's client certificate is mounted from (its \
                 `--tls-secret` setting; `nauthera-reconciler-tls` in the standard install)"
            }
            Placeholder::ReconcilerNamespace => "the reconciler's namespace",
            Placeholder::ReconcilerServiceAccount => "the reconciler's ServiceAccount",
            Placeholder::AuditFilter => {
                "the fields that select the object's audit records: `\"clientId\": \"<id>\"` \
                 with the client id the server assigned (`status.clientId`) for an OIDCClient, \
                 `\"kind\": \"OBJECT_KIND_BRANDING\", \"name\": \"<name>\"` (or \
                 `OBJECT_KIND_IDENTITY_PROVIDER`, `OBJECT_KIND_ORGANIZATION`) for the other kinds"
            }
            Placeholder::Slug => "the organization's slug",
            Placeholder::Policy => {
                "the ClientPolicy that holds the resource back (`status.policy.policy`), or the \
                 one refused"
            }
            Placeholder::Generation => "the resource's `metadata.generation`",
            Placeholder::Manager => {
                "the manager of the reconciler that wrote the object last \
                 (`status.managedElsewhere.manager`)"
            }
        }
    }

    /// The value in the standard install, for the placeholders that have one.
    pub const fn install_default(self) -> Option<&'static str> {
        match self {
            Placeholder::ReconcilerNamespace => Some("nauthera-system"),
            Placeholder::ReconcilerServiceAccount => Some("nauthera-reconciler"),
            Placeholder::ReconcilerTlsSecret => Some("nauthera-reconciler-tls"),
            _ => None,
        }
    }
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

/// The live facts known for a resource, keyed by placeholder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    values: BTreeMap<Placeholder, String>,
}

impl Facts {
    /// No facts: rendering leaves every placeholder in place.
    pub fn new() -> Self {
        Self::default()
    }

    /// The defaults of the standard install (the reconciler's namespace and ServiceAccount).
    pub fn install_defaults() -> Self {
        Placeholder::ALL
            .into_iter()
            .fold(Self::new(), |facts, placeholder| {
                match placeholder.install_default() {
                    Some(value) => facts.with(placeholder, value),
                    None => facts,
                }
            })
    }

    /// These facts with one more (or a replaced one).
    pub fn with(mut self, placeholder: Placeholder, value: impl Into<String>) -> Self {
        self.set(placeholder, value);
        self
    }

    pub fn set(&mut self, placeholder: Placeholder, value: impl Into<String>) {
        self.values.insert(placeholder, value.into());
    }

    pub fn get(&self, placeholder: Placeholder) -> Option<&str> {
        self.values.get(&placeholder).map(String::as_str)
    }
}

/// The text with every placeholder that has a fact replaced by it; the others stay as written.
/// A value is inserted as is and never scanned again, so a fact that looks like a placeholder
/// stays what it is.
pub fn render(text: &str, facts: &Facts) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let filled = Placeholder::ALL.into_iter().find_map(|placeholder| {
            let token = placeholder.token();
            let value = facts.get(placeholder)?;
            tail.starts_with(token).then_some((token.len(), value))
        });
        match filled {
            Some((len, value)) => {
                out.push_str(value);
                rest = &tail[len..];
            }
            None => {
                out.push('<');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every `<word>` in the text (lower-case letters and dashes between angle brackets) that is not a
/// known placeholder. Runbook text must have none.
pub fn unknown_placeholders(text: &str) -> Vec<String> {
    tokens(text)
        .filter(|token| Placeholder::ALL.iter().all(|p| p.token() != *token))
        .map(str::to_owned)
        .collect()
}

/// The known placeholders the text uses, in order of first use.
pub fn placeholders_in(text: &str) -> Vec<Placeholder> {
    let mut used = Vec::new();
    for token in tokens(text) {
        if let Some(placeholder) = Placeholder::ALL.into_iter().find(|p| p.token() == token)
            && !used.contains(&placeholder)
        {
            used.push(placeholder);
        }
    }
    used
}

fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices('<').filter_map(move |(start, _)| {
        let tail = &text[start + 1..];
        let end = tail.find(|c: char| !(c.is_ascii_lowercase() || c == '-'))?;
        (end > 0 && tail[end..].starts_with('>')).then(|| &text[start..start + end + 2])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_fills_known_facts_and_keeps_the_rest() {
        let facts = Facts::new()
            .with(Placeholder::Namespace, "team-a")
            .with(Placeholder::Name, "shop");
        assert_eq!(
            render("kubectl -n <ns> describe <kind> <name> # <ns>", &facts),
            "kubectl -n team-a describe <kind> shop # team-a"
        );
    }

    #[test]
    fn render_leaves_other_angle_brackets_alone() {
        let facts = Facts::install_defaults();
        assert_eq!(render("a < b, <b>x</b>, <", &facts), "a < b, <b>x</b>, <");
        assert_eq!(
            render("-n <reconciler-ns> --as=<reconciler-sa>", &facts),
            "-n nauthera-system --as=nauthera-reconciler"
        );
    }

    #[test]
    fn a_value_that_looks_like_a_placeholder_is_not_filled_again() {
        let facts = Facts::new()
            .with(Placeholder::Name, "<ns>")
            .with(Placeholder::Namespace, "team-a");
        assert_eq!(render("<name>/<ns>", &facts), "<ns>/team-a");
    }

    #[test]
    fn unknown_placeholders_are_found() {
        assert_eq!(
            unknown_placeholders("<ns> <release-ns> <name> <b>x</b> a<b <Bad> <x-y>"),
            vec!["<release-ns>", "<b>", "<x-y>"]
        );
        assert!(unknown_placeholders("<ns>/<audit-filter> <slug>").is_empty());
    }

    #[test]
    fn placeholders_in_lists_each_once_in_order() {
        assert_eq!(
            placeholders_in("<name> <ns> <name> <other>"),
            vec![Placeholder::Name, Placeholder::Namespace]
        );
    }

    #[test]
    fn tokens_are_distinct_and_install_defaults_cover_only_the_reconciler() {
        let tokens: std::collections::BTreeSet<_> =
            Placeholder::ALL.iter().map(|p| p.token()).collect();
        assert_eq!(tokens.len(), Placeholder::ALL.len());
        let defaults = Facts::install_defaults();
        for placeholder in Placeholder::ALL {
            let expected = matches!(
                placeholder,
                Placeholder::ReconcilerNamespace
                    | Placeholder::ReconcilerServiceAccount
                    | Placeholder::ReconcilerTlsSecret
            );
            assert_eq!(
                defaults.get(placeholder).is_some(),
                expected,
                "{placeholder}"
            );
        }
    }
}
