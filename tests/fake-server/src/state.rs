//! What the fake server holds: organizations and their objects, revisions, the change hint and
//! its history, and the audit log. Plain data with small helpers; the rules of each call live in
//! `core`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use nauthera_proto::v1::{
    AuditEvent, AuditOutcome, ChangeEvent, ChangeHint, FieldViolation, ObjectKind, ObjectRef,
    WriteInfo,
};
use prost_types::Timestamp;

use crate::kinds::{StoredBranding, StoredClient, StoredIdentityProvider, StoredOrganization};

/// The key of an object inside an organization: (organization slug, namespace, name); for an
/// organization itself see [`organization_key`].
pub type ObjectKey = (String, String, String);

/// What every stored object carries.
#[derive(Clone, Debug)]
pub struct Meta {
    pub revision: String,
    /// The declared generation of the write in force (0 for writes that named none).
    pub generation: i64,
    pub last_write: WriteInfo,
}

/// Every object the server holds, one map per kind (see `kinds`); what a backup captures.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    /// Keyed by [`organization_key`].
    pub organizations: BTreeMap<ObjectKey, StoredOrganization>,
    pub clients: BTreeMap<ObjectKey, StoredClient>,
    pub brandings: BTreeMap<ObjectKey, StoredBranding>,
    pub identity_providers: BTreeMap<ObjectKey, StoredIdentityProvider>,
}

/// The key of an organization: its slug in the place of a name.
pub fn organization_key(slug: &str) -> ObjectKey {
    (String::new(), String::new(), slug.to_owned())
}

/// How the API names an organization where it expects a reference: by its slug alone.
pub fn organization_ref(slug: &str) -> ObjectRef {
    ObjectRef {
        issuer: String::new(),
        namespace: String::new(),
        name: slug.to_owned(),
    }
}

impl Objects {
    /// The slug of the organization serving `issuer`.
    pub fn organization_for_issuer(&self, issuer: &str) -> Option<&str> {
        let wanted = issuer.trim_end_matches('/');
        self.organizations
            .iter()
            .find(|(_, org)| org.spec.issuer.trim_end_matches('/') == wanted)
            .map(|(key, _)| key.2.as_str())
    }

    /// The issuer of an organization; empty when it is gone.
    pub fn issuer_of(&self, slug: &str) -> String {
        self.organizations
            .get(&organization_key(slug))
            .map(|org| org.spec.issuer.clone())
            .unwrap_or_default()
    }

    /// The reference of an object, with its organization's current issuer.
    pub fn reference(&self, key: &ObjectKey) -> ObjectRef {
        ObjectRef {
            issuer: self.issuer_of(&key.0),
            namespace: key.1.clone(),
            name: key.2.clone(),
        }
    }
}

/// A snapshot of the server's objects, to restore later.
#[derive(Clone, Debug)]
pub struct Backup {
    pub(crate) objects: Objects,
    pub(crate) sequence: u64,
    /// The change hint when the backup was taken.
    pub hint: ChangeHint,
}

/// The change hint and the changes it still remembers.
#[derive(Debug)]
pub struct History {
    pub epoch: String,
    pub sequence: u64,
    /// Every change after this sequence is remembered.
    pub remembered_after: u64,
    pub events: VecDeque<ChangeEvent>,
    pub limit: usize,
}

impl History {
    pub fn new(limit: usize) -> History {
        History {
            epoch: new_epoch(),
            sequence: 0,
            remembered_after: 0,
            events: VecDeque::new(),
            limit: limit.max(1),
        }
    }

    pub fn hint(&self) -> ChangeHint {
        ChangeHint {
            epoch: self.epoch.clone(),
            sequence: self.sequence,
        }
    }

    /// Moves the hint by one and returns the revision a write gets.
    pub fn next_revision(&mut self) -> String {
        self.sequence += 1;
        format!("{}-{}", self.epoch, self.sequence)
    }

    /// Remembers a change (its hint must be the current one).
    pub fn remember(&mut self, event: ChangeEvent) {
        self.events.push_back(event);
        while self.events.len() > self.limit {
            if let Some(forgotten) = self.events.pop_front() {
                self.remembered_after = forgotten.hint.map_or(0, |hint| hint.sequence);
            }
        }
    }

    /// The changes after `since`, or `None` when they cannot all be replayed (another epoch,
    /// too old, or from the future).
    pub fn replay_after(&self, since: &ChangeHint) -> Option<Vec<ChangeEvent>> {
        if since.epoch != self.epoch
            || since.sequence < self.remembered_after
            || since.sequence > self.sequence
        {
            return None;
        }
        Some(
            self.events
                .iter()
                .filter(|event| {
                    event
                        .hint
                        .as_ref()
                        .is_some_and(|h| h.sequence > since.sequence)
                })
                .cloned()
                .collect(),
        )
    }

    /// Starts a new epoch at `sequence`, forgetting every change (a restore).
    pub fn restart_epoch(&mut self, sequence: u64) {
        self.epoch = new_epoch();
        self.sequence = sequence;
        self.remembered_after = sequence;
        self.events.clear();
    }

    /// The event that tells a watcher to list again.
    pub fn resync_event(&self) -> ChangeEvent {
        ChangeEvent {
            hint: Some(self.hint()),
            resync_required: true,
            ..Default::default()
        }
    }
}

/// The audit log. It survives a backup restore, the way a separate audit store would, and is
/// indexed the way one is: a listing of one client's or one object's records reads those, not
/// the whole log (a scan made each drift check cost time growing with every record ever kept).
#[derive(Debug, Default)]
pub struct AuditLog {
    next_id: u64,
    events: Vec<AuditEvent>,
    /// Positions in `events`, oldest first, by organization and client id.
    by_client: HashMap<(String, String), Vec<usize>>,
    /// Positions by organization and object name.
    by_name: HashMap<(String, String), Vec<usize>>,
    /// Positions by organization.
    by_organization: HashMap<String, Vec<usize>>,
}

/// The facts of one audit record, before it gets an id and a time.
#[derive(Clone, Debug, Default)]
pub struct AuditRecord {
    pub action: String,
    pub outcome: AuditOutcome,
    pub kind: ObjectKind,
    pub reference: ObjectRef,
    pub organization: String,
    pub client_id: String,
    pub manager: String,
    pub actor: String,
    pub cause: String,
    pub violations: Vec<FieldViolation>,
    pub revision: String,
    pub generation: i64,
    pub reason: String,
}

impl AuditLog {
    pub fn record(&mut self, record: AuditRecord) {
        self.next_id += 1;
        let at = self.events.len();
        let organization = &record.organization;
        if !record.client_id.is_empty() {
            self.by_client
                .entry((organization.clone(), record.client_id.clone()))
                .or_default()
                .push(at);
        }
        if !record.reference.name.is_empty() {
            self.by_name
                .entry((organization.clone(), record.reference.name.clone()))
                .or_default()
                .push(at);
        }
        self.by_organization
            .entry(organization.clone())
            .or_default()
            .push(at);
        self.events.push(AuditEvent {
            id: format!("{:012}", self.next_id),
            time: Some(now()),
            action: record.action,
            outcome: record.outcome as i32,
            kind: record.kind as i32,
            r#ref: Some(record.reference),
            organization: record.organization,
            client_id: record.client_id,
            manager: record.manager,
            actor: record.actor,
            cause: record.cause,
            violations: record.violations,
            revision: record.revision,
            generation: record.generation,
            reason: record.reason,
        });
    }

    /// Every event, oldest first.
    pub fn events(&self) -> &[AuditEvent] {
        &self.events
    }

    /// The events of an organization, newest first, narrowed by the index to those of one
    /// client or one object name when the listing names one; the caller applies its whole filter.
    pub fn newest_first<'a>(
        &'a self,
        organization: &str,
        client_id: &str,
        name: &str,
    ) -> impl Iterator<Item = &'a AuditEvent> + 'a {
        let positions = if !client_id.is_empty() {
            self.by_client
                .get(&(organization.to_owned(), client_id.to_owned()))
        } else if !name.is_empty() {
            self.by_name
                .get(&(organization.to_owned(), name.to_owned()))
        } else {
            self.by_organization.get(organization)
        };
        positions
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .rev()
            .map(|&at| &self.events[at])
    }
}

/// The current time as a protobuf timestamp.
pub fn now() -> Timestamp {
    timestamp(jiff::Timestamp::now())
}

/// A protobuf timestamp of a jiff one.
pub fn timestamp(time: jiff::Timestamp) -> Timestamp {
    Timestamp {
        seconds: time.as_second(),
        nanos: time.subsec_nanosecond(),
    }
}

/// Random bytes as hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    // Without an operating system random source no test can run; fall back to the clock so
    // the fake still starts (its secrets are test values).
    if getrandom::fill(&mut buffer).is_err() {
        let nanos = jiff::Timestamp::now().as_nanosecond();
        for (index, byte) in buffer.iter_mut().enumerate() {
            *byte = (nanos >> ((index % 16) * 8)) as u8;
        }
    }
    buffer.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A random number in [0, 1).
pub fn random_unit() -> f64 {
    let mut buffer = [0u8; 8];
    if getrandom::fill(&mut buffer).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(buffer) >> 11) as f64 / (1u64 << 53) as f64
}

fn new_epoch() -> String {
    format!("e{}", random_hex(4))
}

/// The sha-256 of a secret, hex.
pub fn secret_hash(secret: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(secret.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(history: &mut History) -> ChangeEvent {
        history.next_revision();
        let event = ChangeEvent {
            hint: Some(history.hint()),
            ..Default::default()
        };
        history.remember(event.clone());
        event
    }

    #[test]
    fn replay_returns_the_changes_after_a_remembered_hint() {
        let mut history = History::new(10);
        let start = history.hint();
        let first = event(&mut history);
        let second = event(&mut history);
        assert_eq!(
            history.replay_after(&start),
            Some(vec![first.clone(), second.clone()])
        );
        assert_eq!(
            history.replay_after(first.hint.as_ref().unwrap()),
            Some(vec![second])
        );
        assert_eq!(history.replay_after(&history.hint()), Some(vec![]));
    }

    #[test]
    fn a_forgotten_hint_or_another_epoch_needs_a_resync() {
        let mut history = History::new(2);
        let start = history.hint();
        for _ in 0..3 {
            event(&mut history);
        }
        assert_eq!(history.replay_after(&start), None);
        let current = history.hint();
        history.restart_epoch(current.sequence);
        assert_eq!(history.replay_after(&current), None);
        assert!(history.resync_event().resync_required);
    }

    #[test]
    fn the_audit_index_narrows_a_listing_to_its_client_or_object_newest_first() {
        let mut log = AuditLog::default();
        let record = |organization: &str, client_id: &str, name: &str, action: &str| AuditRecord {
            action: action.into(),
            organization: organization.into(),
            client_id: client_id.into(),
            reference: ObjectRef {
                name: name.into(),
                ..Default::default()
            },
            ..Default::default()
        };
        log.record(record("acme", "c1", "web", "create"));
        log.record(record("acme", "c2", "api", "create"));
        log.record(record("other", "c1", "web", "create"));
        log.record(record("acme", "", "brand", "create"));
        log.record(record("acme", "c1", "web", "update"));
        let actions = |events: Vec<&AuditEvent>| -> Vec<String> {
            events.iter().map(|e| e.action.clone()).collect()
        };
        assert_eq!(
            actions(log.newest_first("acme", "c1", "").collect()),
            ["update", "create"]
        );
        assert_eq!(
            actions(log.newest_first("acme", "", "brand").collect()),
            ["create"]
        );
        assert_eq!(log.newest_first("acme", "", "").count(), 4);
        assert_eq!(log.newest_first("other", "c1", "").count(), 1);
        assert_eq!(log.newest_first("nobody", "", "").count(), 0);
        assert_eq!(log.events().len(), 5);
    }

    #[test]
    fn secrets_are_hashed_and_random_values_differ() {
        assert_eq!(secret_hash("s").len(), 64);
        assert_ne!(random_hex(16), random_hex(16));
        let unit = random_unit();
        assert!((0.0..1.0).contains(&unit));
    }
}
