//! What adopting one resource will do, and where the adoption stands, as pure functions of the
//! resource's view (and the workloads that read its Secret).

use jiff::Timestamp;
use nauthera_shared::catalog::{Cause, Reason};
use nauthera_shared::resources::{AdoptSecret, AdoptedSecret, AdoptionRecord};
use nauthera_shared::topology::TAKE_OVER_ANNOTATION;
use nauthera_shared::workloads::Consumer;
use nauthera_shared::{ADOPT_ANNOTATION, ADOPT_SECRET_ANNOTATION};
use serde::Serialize;

use crate::cli::kinds::Kind;
use crate::model::view::{ResourceView, SecretUse};

/// What the adoption does with the secret of the object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum SecretPlan {
    /// No secret: another kind, a public client, `private_key_jwt`.
    None,
    /// A new generated client secret is minted with the adoption and delivered into `secret`.
    Mint { secret: String },
    /// The generated secret the server holds is kept; nothing is delivered until a rotation.
    KeepGenerated { secret: String },
    /// The team's secret is sent from `secret` (key `key`) with the adoption.
    Send { secret: String, key: String },
    /// The team's Secret is taken to hold the secret in force; sent once its value changes.
    KeepReferenced { secret: String, key: String },
}

impl SecretPlan {
    /// Whether the adoption writes the secret to the server.
    fn writes(&self) -> bool {
        matches!(self, SecretPlan::Mint { .. } | SecretPlan::Send { .. })
    }
}

/// What an adoption of one resource will do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdoptPlan {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// The revision the server holds, as the status shows it: the one adopted.
    pub revision: String,
    /// Who wrote it last.
    pub writer: String,
    pub written_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The fields where the manifest differs from the server: what the adoption writes.
    pub differences: Vec<String>,
    /// Whether the adoption writes to the server at all.
    pub writes: bool,
    pub secret: SecretPlan,
    /// The workloads that read the Secret a minted secret goes into.
    pub readers: Vec<Consumer>,
    /// `metadata.resourceVersion` of the resource as shown: the annotation is set only on it.
    #[serde(skip)]
    pub resource_version: Option<String>,
    /// Whether to annotate `nauthera.io/adopt-secret=Keep`.
    #[serde(skip)]
    pub set_keep: bool,
}

/// Whether the resource waits for a person to adopt the object the server holds, and if so, what
/// adopting it does; otherwise, in a sentence, why not and what to do instead.
pub fn adoptable(view: &ResourceView, keep_secret: bool) -> Result<AdoptPlan, String> {
    let target = format!("{} in namespace {}", view.reference(), view.namespace);
    let how = |what: &str| {
        format!(
            "{what}: kubectl nauthera diagnose {} -n {}",
            view.reference(),
            view.namespace
        )
    };
    if view.deleting {
        return Err(format!("{target} is being deleted: nothing to adopt"));
    }
    let observed = view.server_object();
    match view.reason() {
        Some(Reason::AdoptionRequired) => {}
        Some(Reason::Observed) => {
            let handover = match observed {
                Some(object) if !object.absent => format!(
                    "the reconciler takes the object over from revision {}, the one its status \
                     shows (written by {}), writing nothing when the manifest declares what the \
                     server holds",
                    object.revision,
                    object.writer()
                ),
                Some(_) => "the server holds no object of this name, so the reconciler creates \
                     it"
                .to_owned(),
                None => "the reconciler takes the object over from the revision its status \
                     shows"
                    .to_owned(),
            };
            return Err(format!(
                "{target} is observed (managementPolicy: Observe), not waiting for adoption: set \
                 managementPolicy: Manage in its manifest (or remove the field) and {handover}"
            ));
        }
        Some(Reason::ManagedElsewhere) => {
            let manager = view
                .status
                .as_ref()
                .and_then(|status| status.managed_elsewhere.as_deref())
                .map_or_else(|| "<manager>".to_owned(), |other| other.manager.clone());
            return Err(format!(
                "{target} names an object another reconciler manages (manager {manager}): adopt \
                 takes over only objects a person or a tool wrote; once that reconciler lets go \
                 of it, hand it over with kubectl -n {} annotate {} {}={manager}",
                view.namespace,
                view.reference(),
                TAKE_OVER_ANNOTATION
            ));
        }
        None => {
            return Err(format!(
                "{target} has no status yet: the reconciler has not looked at it; nothing to \
                 adopt until it reports AdoptionRequired"
            ));
        }
        Some(reason) => {
            return Err(how(&format!(
                "{target} is {reason}, not waiting for adoption (reason AdoptionRequired): \
                 nothing to adopt; see what it waits for"
            )));
        }
    }
    let Some(object) = observed.filter(|object| !object.absent && !object.revision.is_empty())
    else {
        return Err(how(&format!(
            "{target} waits for adoption but its status names no revision on the server \
             (status.observed); nothing is annotated blindly"
        )));
    };
    let choice = if keep_secret {
        AdoptSecret::Keep
    } else {
        view.annotations
            .get(ADOPT_SECRET_ANNOTATION)
            .and_then(|value| AdoptSecret::parse(value))
            .unwrap_or_default()
    };
    let secret = match (&view.secret, choice) {
        (SecretUse::None, _) => SecretPlan::None,
        (SecretUse::Generated { name }, AdoptSecret::Replace) => SecretPlan::Mint {
            secret: name.clone(),
        },
        (SecretUse::Generated { name }, AdoptSecret::Keep) => SecretPlan::KeepGenerated {
            secret: name.clone(),
        },
        (SecretUse::Referenced { name, key }, AdoptSecret::Replace) => SecretPlan::Send {
            secret: name.clone(),
            key: key.clone(),
        },
        (SecretUse::Referenced { name, key }, AdoptSecret::Keep) => SecretPlan::KeepReferenced {
            secret: name.clone(),
            key: key.clone(),
        },
    };
    Ok(AdoptPlan {
        kind: view.kind,
        namespace: view.namespace.clone(),
        name: view.name.clone(),
        revision: object.revision.clone(),
        writer: object.writer(),
        written_at: object.written_at.as_ref().map(|time| time.0),
        client_id: object.client_id.clone(),
        differences: object.differences.clone(),
        writes: !object.differences.is_empty() || secret.writes(),
        secret,
        readers: Vec::new(),
        resource_version: view.resource_version.clone(),
        set_keep: keep_secret,
    })
}

impl AdoptPlan {
    /// The Secret a minted secret goes into: the one whose readers are named.
    pub fn minted_into(&self) -> Option<&str> {
        match &self.secret {
            SecretPlan::Mint { secret } => Some(secret),
            _ => None,
        }
    }

    /// The merge patch that asks for the adoption: the annotation naming the revision shown
    /// (and `Keep` when asked), on the resource as it was shown (`metadata.resourceVersion`, a
    /// precondition the API server checks).
    pub fn patch(&self) -> serde_json::Value {
        let mut annotations = serde_json::Map::new();
        annotations.insert(ADOPT_ANNOTATION.into(), self.revision.clone().into());
        if self.set_keep {
            annotations.insert(
                ADOPT_SECRET_ANNOTATION.into(),
                AdoptSecret::Keep.as_str().into(),
            );
        }
        let mut metadata = serde_json::Map::new();
        metadata.insert("annotations".into(), annotations.into());
        if let Some(version) = &self.resource_version {
            metadata.insert("resourceVersion".into(), version.clone().into());
        }
        serde_json::json!({ "metadata": metadata })
    }
}

/// How an adoption ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AdoptOutcome {
    Adopted,
    /// The reconciler did not take the object: it changed after the revision named, or it is
    /// gone and the manifest was created as a new object.
    NotAdopted,
    TimedOut,
    DryRun,
    Cancelled,
}

/// Where the adoption stands, from the resource's status alone.
#[derive(Debug, PartialEq)]
pub enum Standing {
    /// Not carried out yet: what the status and annotation show.
    Waiting(String),
    Done(AdoptOutcome, String, Option<AdoptionRecord>),
}

pub fn standing(view: &ResourceView, plan: &AdoptPlan) -> Standing {
    let status = view.status.as_ref();
    if let Some(record) = status
        .and_then(|status| status.last_adoption.as_deref())
        .filter(|record| record.from_revision == plan.revision)
    {
        return Standing::Done(
            AdoptOutcome::Adopted,
            adopted(record, plan),
            Some(record.clone()),
        );
    }
    let named = view.annotations.get(ADOPT_ANNOTATION);
    let observed = view.server_object();
    if view.reason() == Some(Reason::AdoptionRequired)
        && view.cause() == Some(Cause::RevisionMismatch)
        && named == Some(&plan.revision)
        && let Some(object) = observed.filter(|object| object.revision != plan.revision)
    {
        return Standing::Done(
            AdoptOutcome::NotAdopted,
            format!(
                "the object changed after revision {} was shown: the server holds revision {} \
                 (written by {}); nothing was written; look at it again and run kubectl \
                 nauthera adopt {} -n {} once more",
                plan.revision,
                object.revision,
                object.writer(),
                view.reference(),
                view.namespace
            ),
            None,
        );
    }
    if observed.is_none()
        && matches!(view.reason(), Some(Reason::Registered))
        && status.is_some_and(|status| status.revision.is_some())
    {
        return Standing::Done(
            AdoptOutcome::NotAdopted,
            "the object was gone from the server: the manifest was created as a new object"
                .to_owned(),
            None,
        );
    }
    Standing::Waiting(view.request_state(ADOPT_ANNOTATION))
}

/// The adoption carried out, in a sentence: the revision in force, whether it wrote, the secret.
fn adopted(record: &AdoptionRecord, plan: &AdoptPlan) -> String {
    let from = match (&record.from_actor, &record.from_manager) {
        (Some(actor), _) if !actor.is_empty() => format!(" from {actor}"),
        (_, Some(manager)) if !manager.is_empty() => format!(" from manager {manager}"),
        _ => String::new(),
    };
    let written = if record.written {
        format!(
            "the declared state was written over it as revision {}",
            record.revision
        )
    } else {
        format!(
            "nothing was written: the manifest declares what the server holds; revision {} is \
             in force",
            record.revision
        )
    };
    let secret = match (record.secret, &plan.secret) {
        (AdoptedSecret::Minted, _) => format!(
            "; a new client secret was minted and delivered into Secret {}",
            plan.minted_into().unwrap_or("(the client's Secret)")
        ),
        (AdoptedSecret::Kept, _) => "; the client secret the server held was kept (none is \
             delivered until kubectl nauthera rotate)"
            .to_owned(),
        (AdoptedSecret::Provided, SecretPlan::Send { secret, .. })
        | (AdoptedSecret::Provided, SecretPlan::KeepReferenced { secret, .. }) => {
            format!("; the secret in Secret {secret} was sent")
        }
        (AdoptedSecret::Provided, _) => "; the team's secret was sent".to_owned(),
        (AdoptedSecret::None, _) => String::new(),
    };
    format!(
        "adopted revision {}{from}: {written}{secret}",
        record.from_revision
    )
}
