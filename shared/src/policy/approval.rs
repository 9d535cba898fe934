//! Whether a generation of an OIDCClient waits for an approval: a new client does, and so does
//! a change to a field an approval policy lists. What was last written of those fields is kept
//! as a digest in status, so that a change elsewhere needs no approval.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::CompiledPolicy;
use crate::resources::ApprovalRecord;

/// The approvals of one OIDCClient.
#[derive(Clone, Copy, Debug, Default)]
pub struct Approvals<'a> {
    /// The generations a ClientApproval approves (for this client's uid, or for any uid).
    pub generations: &'a [i64],
}

/// Where a generation stands with the approval policies that cover it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalStanding {
    /// No covering policy requires approvals.
    NotRequired,
    /// The listed fields are what was written before: no approval needed. `record` is what the
    /// next write keeps in status.
    Unchanged { record: ApprovalRecord },
    /// A ClientApproval approves this generation.
    Approved { record: ApprovalRecord },
    /// Waits for a ClientApproval of this generation.
    Waiting {
        /// The policies that require it, in name order.
        policies: Vec<String>,
        /// The fields whose change needs it.
        fields: Vec<String>,
        /// Nothing was written for this client yet.
        new_client: bool,
    },
}

impl ApprovalStanding {
    /// The record the next write keeps in status, if approvals apply.
    pub fn record(&self) -> Option<&ApprovalRecord> {
        match self {
            ApprovalStanding::Unchanged { record } | ApprovalStanding::Approved { record } => {
                Some(record)
            }
            _ => None,
        }
    }
}

/// The standing of `generation` of an OIDCClient whose `spec` (as stored) is given. `written`:
/// something of this client is on the server; `recorded`: what status keeps of the last write.
pub fn approval_standing(
    covering: &[&CompiledPolicy],
    spec: &Value,
    generation: i64,
    written: bool,
    recorded: Option<&ApprovalRecord>,
    approvals: Approvals<'_>,
) -> ApprovalStanding {
    let requiring: Vec<&CompiledPolicy> = covering
        .iter()
        .copied()
        .filter(|p| p.approval.is_some())
        .collect();
    if requiring.is_empty() {
        return ApprovalStanding::NotRequired;
    }
    let mut fields: Vec<String> = requiring
        .iter()
        .flat_map(|p| p.approval.iter().flatten())
        .map(|f| f.as_str().to_owned())
        .collect();
    fields.sort();
    fields.dedup();
    let record = ApprovalRecord {
        generation,
        digest: digest_of(spec, &fields),
        field_digests: fields
            .iter()
            .map(|field| (field.clone(), digest_of(spec, std::slice::from_ref(field))))
            .collect(),
        fields: fields.clone(),
    };
    if approvals.generations.contains(&generation) {
        return ApprovalStanding::Approved { record };
    }
    // Without listed fields only a new client needs an approval.
    let unchanged = written
        && (fields.is_empty()
            || recorded.is_some_and(|r| r.fields == record.fields && r.digest == record.digest));
    if unchanged {
        return ApprovalStanding::Unchanged { record };
    }
    ApprovalStanding::Waiting {
        policies: requiring.iter().map(|p| p.name.clone()).collect(),
        fields: changed_fields(&record, recorded.filter(|_| written)),
        new_client: !written,
    }
}

/// The listed fields whose value differs from the last write: each one's digest compared with
/// the recorded one; every listed field when nothing, or no digest per field, was recorded.
fn changed_fields(record: &ApprovalRecord, recorded: Option<&ApprovalRecord>) -> Vec<String> {
    let Some(recorded) = recorded.filter(|r| !r.field_digests.is_empty()) else {
        return record.fields.clone();
    };
    let changed: Vec<String> = record
        .fields
        .iter()
        .filter(|field| recorded.field_digests.get(*field) != record.field_digests.get(*field))
        .cloned()
        .collect();
    // Same values under a different list of fields (a policy changed its list): name the list.
    if changed.is_empty() {
        return record.fields.clone();
    }
    changed
}

/// What waits for an approval, as the reconciler's condition and the plugin both say it:
/// `a new client`, or `a change to FIELD, ...`.
pub fn waiting_for(new_client: bool, fields: &[String]) -> String {
    if new_client || fields.is_empty() {
        "a new client".to_owned()
    } else {
        format!("a change to {}", fields.join(", "))
    }
}

/// The plugin's command that approves the current generation of an OIDCClient, as the
/// reconciler's condition, diagnose and the plugin's own refusals print it.
pub fn approve_command(client: &str, namespace: &str) -> String {
    format!("kubectl nauthera approve oidcclient/{client} -n {namespace}")
}

/// SHA-256 (hex) of the listed fields of `spec`, each as JSON under its name (absent: null).
pub fn digest_of(spec: &Value, fields: &[String]) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update(field.as_bytes());
        hasher.update(b"=");
        hasher.update(
            spec.get(field)
                .unwrap_or(&Value::Null)
                .to_string()
                .as_bytes(),
        );
        hasher.update(b"\n");
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
