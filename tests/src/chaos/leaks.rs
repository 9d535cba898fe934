//! The leak scanner: searches everything a person or a tool can read (logs, Events, statuses,
//! metrics, plugin output) for every secret value and private key of a run, raw, in base64 and by
//! prefix.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use serde::Serialize;

/// How long a prefix of a secret is searched for (shorter ones would match by chance).
pub const PREFIX_LENGTH: usize = 12;

/// One text a person or a tool can read, and where it came from.
#[derive(Clone, Debug)]
pub struct Source {
    /// For example `reconciler replica-a log`, `Events`, `status -A -o json`.
    pub name: String,
    pub text: String,
}

/// A secret the run knows, and what it is (never printed: only its kind and a hash).
#[derive(Clone, Debug)]
pub struct Known {
    pub what: String,
    pub value: String,
}

/// One secret found in one source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Leak {
    pub source: String,
    pub what: String,
    /// `raw`, `base64`, `base64url` or `prefix`.
    pub form: &'static str,
}

/// What the scan covered and found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Scan {
    pub sources: usize,
    pub bytes_scanned: usize,
    pub secrets_searched: usize,
    pub leaks: Vec<Leak>,
}

/// The forms a secret can show up in: the value, its base64 encodings, its prefix; for a PEM
/// key, each line of its body (any one of them is key material).
fn needles(value: &str) -> Vec<(&'static str, String)> {
    let mut needles = Vec::new();
    if value.contains("-----BEGIN") {
        for line in value.lines() {
            let line = line.trim();
            if line.len() >= 16 && !line.starts_with("-----") {
                needles.push(("raw", line.to_owned()));
            }
        }
        return needles;
    }
    needles.push(("raw", value.to_owned()));
    needles.push(("base64", STANDARD.encode(value)));
    needles.push(("base64", STANDARD_NO_PAD.encode(value)));
    needles.push(("base64url", URL_SAFE_NO_PAD.encode(value)));
    if value.len() > PREFIX_LENGTH
        && let Some(prefix) = value.get(..PREFIX_LENGTH)
    {
        needles.push(("prefix", prefix.to_owned()));
    }
    needles
}

/// Searches every source for every known secret.
pub fn scan(sources: &[Source], known: &[Known]) -> Scan {
    let searched: Vec<(&Known, Vec<(&'static str, String)>)> =
        known.iter().map(|k| (k, needles(&k.value))).collect();
    let mut leaks = Vec::new();
    for source in sources {
        for (secret, needles) in &searched {
            // The strongest form found is reported once per source and secret.
            if let Some((form, _)) = needles
                .iter()
                .find(|(_, n)| source.text.contains(n.as_str()))
            {
                leaks.push(Leak {
                    source: source.name.clone(),
                    what: secret.what.clone(),
                    form,
                });
            }
        }
    }
    Scan {
        sources: sources.len(),
        bytes_scanned: sources.iter().map(|s| s.text.len()).sum(),
        secrets_searched: known.len(),
        leaks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Vec<Source> {
        vec![Source {
            name: "log".to_owned(),
            text: text.to_owned(),
        }]
    }

    fn known(value: &str) -> Vec<Known> {
        vec![Known {
            what: "client secret".to_owned(),
            value: value.to_owned(),
        }]
    }

    #[test]
    fn each_form_of_a_secret_is_found() {
        let value = "s3cr3t-value-of-forty-characters-0123456";
        for (text, form) in [
            (format!("x {value} y"), "raw"),
            (format!("data: {}", STANDARD.encode(value)), "base64"),
            (URL_SAFE_NO_PAD.encode(value), "base64"),
            (format!("starts {}...", &value[..PREFIX_LENGTH]), "prefix"),
        ] {
            let found = scan(&source(&text), &known(value));
            assert_eq!(found.leaks.len(), 1, "{text}");
            assert_eq!(found.leaks[0].form, form, "{text}");
        }
        assert!(
            scan(&source("nothing here"), &known(value))
                .leaks
                .is_empty()
        );
    }

    #[test]
    fn a_line_of_a_private_key_is_found() {
        let key = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n";
        let found = scan(
            &source("oops MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg"),
            &known(key),
        );
        assert_eq!(found.leaks.len(), 1);
        assert!(
            scan(&source("-----BEGIN PRIVATE KEY-----"), &known(key))
                .leaks
                .is_empty()
        );
    }
}
