//! What the server holds of an object that a manifest observes or may adopt, and the adoptions
//! carried out: `status.observed` and `status.lastAdoption`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The object on the server as the reconciler last read it, and where it differs from the
/// manifest. Set under `managementPolicy: Observe` (`Observed`), and while a manifest waits for a
/// person to adopt an object somebody else wrote (`AdoptionRequired`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerObject {
    /// The revision the server holds; empty when it holds no object of this name.
    #[serde(default)]
    pub revision: String,
    /// Whether the server holds no object of this name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub absent: bool,
    /// The client id, for a client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The manager the last write named (empty for the dashboard or a tool that names none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
    /// Who wrote it last, as the server recorded the actor (`user:alice@example.com`, a
    /// certificate identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// When it was written last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_at: Option<Time>,
    /// The fields where the manifest and the server differ, in the manifest's naming
    /// (`spec.redirectUris`); empty when they agree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub differences: Vec<String>,
    /// When the reconciler read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<Time>,
}

impl ServerObject {
    /// Who wrote the object last, as well as it is known: the actor, else the manager, else
    /// "somebody".
    pub fn writer(&self) -> String {
        let named = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
        match (named(&self.actor), named(&self.manager)) {
            (Some(actor), Some(manager)) => format!("{actor} (manager {manager})"),
            (Some(actor), None) => actor,
            (None, Some(manager)) => format!("manager {manager}"),
            (None, None) => "somebody (no manager or actor recorded)".to_owned(),
        }
    }
}

/// What an adoption does with the secret the server holds for the object
/// (`nauthera.io/adopt-secret`): a client's secret, an identity provider's upstream secret.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AdoptSecret {
    /// Replace it: a generated secret is minted anew with the adoption and delivered into the
    /// manifest's Secret; a team's secret (`secretRef`) is sent.
    #[default]
    Replace,
    /// Keep the secret the server holds, so that what uses it keeps working: a generated secret
    /// is neither minted nor delivered until a rotation; the team's Secret is taken to hold the
    /// secret in force, and sent only once its value changes.
    Keep,
}

impl AdoptSecret {
    /// The annotation's value, `Replace` or `Keep`; `None` for anything else.
    pub fn parse(value: &str) -> Option<AdoptSecret> {
        match value.trim() {
            "Replace" => Some(AdoptSecret::Replace),
            "Keep" => Some(AdoptSecret::Keep),
            _ => None,
        }
    }

    /// The annotation's value.
    pub fn as_str(self) -> &'static str {
        match self {
            AdoptSecret::Replace => "Replace",
            AdoptSecret::Keep => "Keep",
        }
    }
}

/// How an adopted client came by its secret.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AdoptedSecret {
    /// The object has no client secret (another kind, a public client, `private_key_jwt`), or
    /// an identity provider's upstream secret was sent from its Secret.
    #[default]
    None,
    /// A new generated secret was minted with the adoption and delivered.
    Minted,
    /// The generated secret the server held was kept: none is delivered until a rotation
    /// (`kubectl nauthera rotate`).
    Kept,
    /// The team's secret (`secretRef`) was sent with the adoption.
    Provided,
}

/// An adoption this resource carried out: the object somebody else wrote, taken under
/// management at the revision a person named (`nauthera.io/adopt`), or handed over from
/// `managementPolicy: Observe` at the revision the status showed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdoptionRecord {
    /// The revision adopted (the one the annotation or the observation named).
    pub from_revision: String,
    /// Who had written it, as the server recorded the actor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_actor: Option<String>,
    /// The manager that write named, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_manager: Option<String>,
    /// The revision in force after the adoption: the one written, or `fromRevision` when the
    /// declared state was the server's already and nothing was written.
    pub revision: String,
    /// Whether the adoption wrote to the server.
    #[serde(default)]
    pub written: bool,
    /// What became of a client secret.
    #[serde(default)]
    pub secret: AdoptedSecret,
    /// Who asked: the field manager that set the annotation, as the API server's managedFields
    /// record it; absent for a handover from `Observe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
}
