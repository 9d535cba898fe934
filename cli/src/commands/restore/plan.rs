//! What a restore will write back, as a pure function of the resources and the workloads that
//! use their Secrets.

use jiff::Timestamp;
use nauthera_shared::catalog::Reason;
use serde::Serialize;

use crate::cli::kinds::Kind;
use crate::model::view::{ResourceView, SecretUse};
use nauthera_shared::workloads::Consumer;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestorePlan {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// Only drifted resources are restored; the others are named and skipped.
    pub drifted: bool,
    pub reason: Option<Reason>,
    pub declared_revision: Option<String>,
    pub server_revision: Option<String>,
    pub removed: bool,
    pub fields: Vec<String>,
    pub manager: Option<String>,
    pub actor: Option<String>,
    pub changed_at: Option<Timestamp>,
    /// The Secret that gets a new client secret (a removed client is created again).
    pub secret_to_change: Option<String>,
    /// The workloads that mount or read that Secret.
    pub consumers: Vec<Consumer>,
}

pub fn plan(view: &ResourceView, consumers: Vec<Consumer>) -> RestorePlan {
    let drift = view
        .status
        .as_ref()
        .and_then(|status| status.drift.as_ref());
    let (declared_revision, server_revision) = view.revisions();
    let removed = drift.is_some_and(|drift| drift.removed);
    let secret_to_change = match &view.secret {
        SecretUse::Generated { name } if removed && view.is_drifted() => Some(name.clone()),
        _ => None,
    };
    RestorePlan {
        kind: view.kind,
        namespace: view.namespace.clone(),
        name: view.name.clone(),
        drifted: view.is_drifted(),
        reason: view.reason(),
        declared_revision,
        server_revision,
        removed,
        fields: drift.map(|drift| drift.fields.clone()).unwrap_or_default(),
        manager: drift.and_then(|drift| drift.manager.clone()),
        actor: drift.and_then(|drift| drift.actor.clone()),
        changed_at: drift.and_then(|drift| drift.changed_at.as_ref().map(|time| time.0)),
        consumers: if secret_to_change.is_some() {
            consumers
        } else {
            Vec::new()
        },
        secret_to_change,
    }
}

/// Whether to ask before writing: always for more than one resource, and for one when a person
/// is at the terminal; never with `--yes` or `--dry-run`.
pub fn needs_confirmation(count: usize, yes: bool, dry_run: bool, interactive: bool) -> bool {
    !yes && !dry_run && (count > 1 || interactive)
}

/// A yes, in the words people type.
pub fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::view::fixtures::{drifted, view};

    #[test]
    fn a_removed_generated_client_changes_its_secret_and_names_its_workloads() {
        let mut client = drifted("team-a", "shop", 100);
        client.secret = SecretUse::Generated {
            name: "shop-oidc".into(),
        };
        if let Some(drift) = client.status.as_mut().and_then(|s| s.drift.as_mut()) {
            drift.removed = true;
        }
        let consumer = Consumer {
            kind: "Deployment".into(),
            name: "web".into(),
            uses: vec!["volume creds".into()],
        };
        let plan = plan(&client, vec![consumer.clone()]);
        assert!(plan.drifted && plan.removed);
        assert_eq!(plan.secret_to_change.as_deref(), Some("shop-oidc"));
        assert_eq!(plan.consumers, vec![consumer]);
        assert_eq!(plan.server_revision.as_deref(), Some("(removed)"));
    }

    #[test]
    fn an_edited_client_keeps_its_secret() {
        let mut client = drifted("team-a", "shop", 100);
        client.secret = SecretUse::Generated {
            name: "shop-oidc".into(),
        };
        let plan = plan(&client, Vec::new());
        assert_eq!(plan.secret_to_change, None);
        assert_eq!(plan.fields, vec!["spec.redirectUris"]);
        assert_eq!(plan.actor.as_deref(), Some("alice@example.com"));
    }

    #[test]
    fn a_registered_resource_is_not_restored() {
        let registered = view(Kind::OidcClient, "a", "b", Reason::Registered, 0);
        assert!(!plan(&registered, Vec::new()).drifted);
    }

    #[test]
    fn confirmation_rules() {
        assert!(needs_confirmation(1, false, false, true));
        assert!(!needs_confirmation(1, false, false, false));
        assert!(needs_confirmation(2, false, false, false));
        assert!(!needs_confirmation(2, true, false, true));
        assert!(!needs_confirmation(2, false, true, true));
        assert!(is_yes(" Yes\n") && is_yes("y") && !is_yes("") && !is_yes("no"));
    }
}
