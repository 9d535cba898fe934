//! The rules of every AdminService call, on the in-memory state, without I/O: access control,
//! issuers, preconditions and managers, revisions, change hints and audit records. The write path
//! is written once for every kind of object; what differs between kinds is in `kinds`.

mod listing;

pub use listing::Listed;

use std::collections::BTreeSet;

use nauthera_client::causes::error_reason;
use nauthera_client::wire::KindWire;
use nauthera_proto::v1::{
    self, AuditOutcome, ChangeEvent, ChangeHint, ClientRevision, ErrorMetadataKey, ErrorReason,
    ListAuditEventsRequest, ListAuditEventsResponse, ListClientRevisionsRequest,
    ListClientRevisionsResponse, ObjectKind, ObjectRef, Precondition, ServerInfo, WriteInfo,
    precondition,
};
use nauthera_shared::grants::{self, GrantDecision, GrantEntry, Operation};
use tokio::sync::broadcast;
use tonic::Code;

use crate::kinds::{
    StoredBranding, StoredClient, StoredIdentityProvider, StoredKind, StoredOrganization,
    audit_action, audit_name,
};
use crate::refusal::{Refusal, violation};
use crate::state::{
    AuditLog, AuditRecord, Backup, History, Meta, ObjectKey, Objects, now, organization_key,
    organization_ref,
};

/// Who calls: the identities of the client certificate and the one the server goes by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The identity the server goes by: the first SAN listed in `allowed_clients`, else the first
    /// SAN; empty without a certificate.
    pub identity: String,
    pub identities: Vec<String>,
}

impl Caller {
    /// The caller for these certificate identities under these grants.
    pub fn from_identities(identities: Vec<String>, allowed: &[GrantEntry]) -> Caller {
        let identity = identities
            .iter()
            .find(|identity| allowed.iter().any(|entry| &entry.identity == *identity))
            .or_else(|| identities.first())
            .cloned()
            .unwrap_or_default();
        Caller {
            identity,
            identities,
        }
    }
}

/// Who makes an out-of-band change (the dashboard, a person).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    /// For example `user:alice@example.com`.
    pub actor: String,
    /// Why, recorded in the audit log.
    pub cause: String,
}

/// The state and its rules.
#[derive(Debug)]
pub struct Core {
    pub build: String,
    pub allowed: Vec<GrantEntry>,
    pub objects: Objects,
    pub history: History,
    pub audit: AuditLog,
    changes: broadcast::Sender<ChangeEvent>,
}

/// What a call names: an object by issuer, namespace and name, or an organization by slug.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Object(ObjectRef),
    Organization {
        slug: String,
        /// The namespace of the declaring object, checked against the grant when not empty.
        namespace: String,
    },
}

impl Target {
    pub fn organization(slug: &str, namespace: &str) -> Target {
        Target::Organization {
            slug: slug.to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    /// The object of `kind` that `reference` names; for an organization, `reference.name` is its
    /// slug.
    pub fn named(kind: ObjectKind, reference: &ObjectRef) -> Target {
        match kind {
            ObjectKind::Organization => Target::organization(&reference.name, ""),
            _ => Target::Object(reference.clone()),
        }
    }
}

/// What every apply and delete request carries.
#[derive(Clone, Debug)]
pub struct Write {
    pub target: Target,
    pub manager: String,
    /// The declared generation; 0 for a delete.
    pub generation: i64,
    pub if_revision: Option<Precondition>,
}

/// An apply that took effect.
#[derive(Clone, Debug)]
pub struct Applied<M> {
    pub message: M,
    pub created: bool,
    /// A generated secret, returned this once; empty when none was generated.
    pub secret: String,
}

/// Facts about a write, gathered as the call is checked, for its audit record.
#[derive(Clone, Debug, Default)]
struct WriteContext {
    kind: ObjectKind,
    action: String,
    reference: ObjectRef,
    organization: String,
    client_id: String,
    manager: String,
    actor: String,
    generation: i64,
    generation_in_force: Option<i64>,
}

impl WriteContext {
    /// A write of kind `K` by `caller`; `action` is `applied` or `deleted`.
    fn new<K: StoredKind>(action: &str, write: &Write, caller: &Caller) -> Self {
        WriteContext {
            kind: K::KIND.object_kind(),
            action: audit_action(K::KIND, action),
            manager: write.manager.clone(),
            actor: caller.identity.clone(),
            generation: write.generation,
            ..Default::default()
        }
    }

    fn found<K: StoredKind>(&mut self, held: &K) {
        self.client_id = held.client_id().to_owned();
        self.generation_in_force = Some(held.meta().generation);
    }

    /// The write's audit record, without violations or a refusal's reason.
    fn audit_record(&self, outcome: AuditOutcome, revision: &str, cause: &str) -> AuditRecord {
        AuditRecord {
            action: self.action.clone(),
            outcome,
            kind: self.kind,
            reference: self.reference.clone(),
            organization: self.organization.clone(),
            client_id: self.client_id.clone(),
            manager: self.manager.clone(),
            actor: self.actor.clone(),
            cause: cause.to_owned(),
            violations: Vec::new(),
            revision: revision.to_owned(),
            generation: self.generation,
            reason: String::new(),
        }
    }
}

/// Checks a write's precondition and, without one, that it overwrites no other manager's change.
fn check_write(
    held: Option<&Meta>,
    precondition: Option<&Precondition>,
    manager: &str,
    actor: &str,
) -> Result<(), Refusal> {
    match precondition.and_then(|p| p.condition.as_ref()) {
        Some(condition) => check_precondition(held, condition),
        None => match held {
            Some(meta) if overwrites_another(meta, manager, actor) => Err(Refusal::new(
                Code::FailedPrecondition,
                ErrorReason::ManagerConflict,
                format!(
                    "the object was last written by {} ({}); name its revision to replace it",
                    if meta.last_write.manager.is_empty() {
                        "a person"
                    } else {
                        meta.last_write.manager.as_str()
                    },
                    meta.last_write.actor
                ),
            )
            .with(ErrorMetadataKey::Manager, &meta.last_write.manager)
            .with(ErrorMetadataKey::Actor, &meta.last_write.actor)
            .with(ErrorMetadataKey::Revision, &meta.revision)),
            _ => Ok(()),
        },
    }
}

fn overwrites_another(meta: &Meta, manager: &str, actor: &str) -> bool {
    if meta.last_write.manager.is_empty() || manager.is_empty() {
        // A person's (or an unnamed tool's) change belongs to that actor alone.
        meta.last_write.manager != manager || meta.last_write.actor != actor
    } else {
        meta.last_write.manager != manager
    }
}

fn check_precondition(
    held: Option<&Meta>,
    condition: &precondition::Condition,
) -> Result<(), Refusal> {
    let held_revision = held.map(|meta| meta.revision.as_str()).unwrap_or_default();
    let satisfied = match condition {
        precondition::Condition::Revision(expected) => held.is_some() && held_revision == expected,
        precondition::Condition::Absent(absent) => *absent == held.is_none(),
    };
    if satisfied {
        return Ok(());
    }
    let cause = match (condition, held) {
        (precondition::Condition::Revision(expected), Some(_)) => {
            format!("expected revision {expected}, the server holds {held_revision}")
        }
        (precondition::Condition::Revision(expected), None) => {
            format!("expected revision {expected}, the server holds none")
        }
        (precondition::Condition::Absent(_), _) => {
            format!("expected no object, the server holds revision {held_revision}")
        }
    };
    Err(Refusal::new(
        Code::FailedPrecondition,
        ErrorReason::RevisionMismatch,
        cause,
    )
    .with(ErrorMetadataKey::Revision, held_revision))
}

fn validate_ref(reference: &ObjectRef) -> Result<(), Refusal> {
    let mut violations = Vec::new();
    if reference.issuer.is_empty() {
        violations.push(violation("ref.issuer", "must not be empty"));
    }
    if reference.namespace.is_empty() {
        violations.push(violation("ref.namespace", "must not be empty"));
    }
    if reference.name.is_empty() {
        violations.push(violation("ref.name", "must not be empty"));
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(Refusal::invalid_fields(violations))
    }
}

/// The refusal of a call the grant does not cover: the decision's reason and cause, and what it
/// names as metadata. Every grant refusal is made here.
fn denial(decision: &GrantDecision, caller: &Caller) -> Refusal {
    let reason = decision
        .reason()
        .map_or(ErrorReason::Unspecified, error_reason);
    let mut refusal = Refusal::new(Code::PermissionDenied, reason, decision.cause())
        .with(ErrorMetadataKey::Identity, &caller.identity);
    match decision {
        GrantDecision::OperationNotGranted { operation } => {
            refusal = refusal.with(ErrorMetadataKey::Operation, operation.as_str());
        }
        GrantDecision::OutsideGrant {
            organization,
            namespace,
        } => {
            if let Some(organization) = organization {
                refusal = refusal.with(ErrorMetadataKey::Organization, organization);
            }
            if let Some(namespace) = namespace {
                refusal = refusal.with(ErrorMetadataKey::Namespace, namespace);
            }
        }
        _ => {}
    }
    refusal
}

fn page_offset(token: &str) -> Result<usize, Refusal> {
    if token.is_empty() {
        return Ok(0);
    }
    token
        .parse()
        .map_err(|_| Refusal::invalid_field("page_token", "not a token this server issued"))
}

impl Core {
    pub fn new(
        build: String,
        allowed: Vec<GrantEntry>,
        history_limit: usize,
        changes: broadcast::Sender<ChangeEvent>,
    ) -> Core {
        Core {
            build,
            allowed,
            objects: Objects::default(),
            history: History::new(history_limit),
            audit: AuditLog::default(),
            changes,
        }
    }

    /// Seeds an organization from the configuration (manager `config`, actor `system:config`).
    pub fn seed_organization(&mut self, slug: &str, spec: v1::OrganizationSpec) {
        let context = WriteContext {
            manager: "config".to_owned(),
            actor: "system:config".to_owned(),
            ..Default::default()
        };
        let meta = self.next_meta(&context);
        let (revision, written) = (meta.revision.clone(), meta.last_write.clone());
        let stored = StoredOrganization {
            spec,
            namespace: String::new(),
            meta,
        };
        self.objects
            .organizations
            .insert(organization_key(slug), stored);
        self.publish(
            ObjectKind::Organization,
            organization_ref(slug),
            String::new(),
            revision,
            written,
        );
    }

    // ----- access control -------------------------------------------------------------------

    fn require_identity(&self, caller: &Caller) -> Result<(), Refusal> {
        if grants::entries_for(&self.allowed, &caller.identity).is_empty() {
            let decision = GrantDecision::IdentityNotAllowed {
                identity: caller.identity.clone(),
            };
            let mut refusal = denial(&decision, caller);
            if caller.identity.is_empty() {
                refusal.cause = "the client certificate carries no identity (SAN)".to_owned();
            }
            return Err(refusal);
        }
        Ok(())
    }

    fn require_operation(&self, caller: &Caller, operation: Operation) -> Result<(), Refusal> {
        self.require_identity(caller)?;
        let granted = grants::entries_for(&self.allowed, &caller.identity)
            .iter()
            .any(|entry| entry.operations.contains(&operation));
        if granted {
            Ok(())
        } else {
            Err(denial(
                &GrantDecision::OperationNotGranted { operation },
                caller,
            ))
        }
    }

    fn authorize(
        &self,
        caller: &Caller,
        operation: Operation,
        organization: &str,
        namespace: Option<&str>,
    ) -> Result<(), Refusal> {
        let decision = grants::decide(
            &self.allowed,
            &caller.identity,
            operation,
            organization,
            namespace,
        );
        if decision.is_covered() {
            Ok(())
        } else {
            Err(denial(&decision, caller))
        }
    }

    fn organization_for(&self, issuer: &str) -> Result<String, Refusal> {
        self.objects
            .organization_for_issuer(issuer)
            .map(str::to_owned)
            .ok_or_else(|| {
                Refusal::new(
                    Code::FailedPrecondition,
                    ErrorReason::UnknownIssuer,
                    format!("no organization serves the issuer {issuer}"),
                )
                .with(ErrorMetadataKey::Issuer, issuer)
            })
    }

    /// Checks access to what `target` names and returns its key. With a context, fills in the
    /// reference and organization its audit record names, as far as they are known.
    fn resolve(
        &self,
        caller: &Caller,
        operation: Operation,
        target: &Target,
        mut context: Option<&mut WriteContext>,
    ) -> Result<ObjectKey, Refusal> {
        match target {
            Target::Object(reference) => {
                if let Some(context) = context.as_deref_mut() {
                    context.reference = reference.clone();
                }
                self.require_operation(caller, operation)?;
                validate_ref(reference)?;
                let organization = self.organization_for(&reference.issuer)?;
                if let Some(context) = context {
                    context.organization = organization.clone();
                }
                self.authorize(caller, operation, &organization, Some(&reference.namespace))?;
                Ok((
                    organization,
                    reference.namespace.clone(),
                    reference.name.clone(),
                ))
            }
            Target::Organization { slug, namespace } => {
                if let Some(context) = context {
                    context.reference = organization_ref(slug);
                    context.organization = slug.clone();
                }
                self.require_operation(caller, operation)?;
                let namespace = (!namespace.is_empty()).then_some(namespace.as_str());
                self.authorize(caller, operation, slug, namespace)?;
                Ok(organization_key(slug))
            }
        }
    }

    /// The key of what `target` names, without access checks.
    fn key_of(&self, target: &Target) -> Option<ObjectKey> {
        match target {
            Target::Object(reference) => {
                let organization = self.objects.organization_for_issuer(&reference.issuer)?;
                Some((
                    organization.to_owned(),
                    reference.namespace.clone(),
                    reference.name.clone(),
                ))
            }
            Target::Organization { slug, .. } => Some(organization_key(slug)),
        }
    }

    // ----- hints, changes, audit ------------------------------------------------------------

    /// Records a change: remembers it and sends it to watchers.
    fn publish(
        &mut self,
        kind: ObjectKind,
        reference: ObjectRef,
        client_id: String,
        revision: String,
        written: WriteInfo,
    ) {
        let event = ChangeEvent {
            hint: Some(self.history.hint()),
            resync_required: false,
            kind: kind as i32,
            r#ref: Some(reference),
            client_id,
            revision,
            written: Some(written),
        };
        self.history.remember(event.clone());
        // No watcher is not an error.
        let _ = self.changes.send(event);
    }

    fn finish<T>(
        &mut self,
        context: &WriteContext,
        result: Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let mut refusal = match result {
            Ok(value) => return Ok(value),
            Err(refusal) => refusal,
        };
        if let Some(generation) = context.generation_in_force {
            let key = nauthera_client::metadata_key_name(ErrorMetadataKey::GenerationInForce);
            refusal
                .metadata
                .entry(key)
                .or_insert(generation.to_string());
        }
        self.audit.record(AuditRecord {
            violations: refusal.violations.clone(),
            reason: refusal.reason.as_str_name().to_owned(),
            ..context.audit_record(AuditOutcome::Refused, "", &refusal.cause)
        });
        Err(refusal)
    }

    fn write_info(&self, context: &WriteContext) -> WriteInfo {
        WriteInfo {
            manager: context.manager.clone(),
            actor: context.actor.clone(),
            time: Some(now()),
            generation: context.generation,
        }
    }

    /// Moves the change hint: the revision and write information of a write in `context`.
    fn next_meta(&mut self, context: &WriteContext) -> Meta {
        Meta {
            revision: self.history.next_revision(),
            generation: context.generation,
            last_write: self.write_info(context),
        }
    }

    /// Publishes a write of kind `K` that took effect and records it in the audit log.
    fn announce<K: StoredKind>(
        &mut self,
        key: &ObjectKey,
        context: &WriteContext,
        outcome: AuditOutcome,
        revision: &str,
        written: WriteInfo,
        cause: &str,
    ) {
        let reference = K::reference(&self.objects, key);
        self.publish(
            K::KIND.object_kind(),
            reference,
            context.client_id.clone(),
            revision.to_owned(),
            written,
        );
        self.audit
            .record(context.audit_record(outcome, revision, cause));
    }

    // ----- server information and hints -----------------------------------------------------

    pub fn server_info(
        &self,
        caller: &Caller,
        features: Vec<String>,
    ) -> Result<ServerInfo, Refusal> {
        self.require_identity(caller)?;
        Ok(ServerInfo {
            build: self.build.clone(),
            api_version: nauthera_proto::API_VERSION.to_owned(),
            features,
            identity: caller.identity.clone(),
            grants: grants::entries_for(&self.allowed, &caller.identity)
                .into_iter()
                .map(nauthera_client::wire::grant)
                .collect(),
            change_hint: Some(self.history.hint()),
        })
    }

    pub fn change_hint(&self, caller: &Caller) -> Result<ChangeHint, Refusal> {
        self.require_identity(caller)?;
        Ok(self.history.hint())
    }

    /// The events a new watcher gets first, and a receiver of later changes, taken together so
    /// no change falls between them.
    pub fn watch(
        &self,
        caller: &Caller,
        since: Option<&ChangeHint>,
    ) -> Result<(Vec<ChangeEvent>, broadcast::Receiver<ChangeEvent>), Refusal> {
        self.require_identity(caller)?;
        let first = match since {
            None => Vec::new(),
            Some(since) => self
                .history
                .replay_after(since)
                .unwrap_or_else(|| vec![self.history.resync_event()]),
        };
        Ok((first, self.changes.subscribe()))
    }

    // ----- objects of every kind ------------------------------------------------------------

    /// Applies a request of kind `K`: access, the kind's rules, then the precondition (or the
    /// manager check); then stores the object under a new revision, publishes the change and
    /// records it. A refusal is recorded too.
    pub fn apply<K: StoredKind>(
        &mut self,
        caller: &Caller,
        request: K::Apply,
    ) -> Result<Applied<K::Message>, Refusal> {
        let write = K::apply_write(&request);
        let mut context = WriteContext::new::<K>("applied", &write, caller);
        let result = (|| {
            let (key, held) = self.find::<K>(caller, &write, &mut context)?;
            K::check_apply(&self.objects, &key, &request, held)?;
            check_write(
                held.map(K::meta),
                write.if_revision.as_ref(),
                &context.manager,
                &context.actor,
            )?;
            Ok(key)
        })();
        let key = self.finish(&context, result)?;
        let meta = self.next_meta(&context);
        let (revision, written) = (meta.revision.clone(), meta.last_write.clone());
        let held = K::map_mut(&mut self.objects).remove(&key);
        let (stored, secret) = K::store(request, held.as_ref(), &key, meta);
        context.client_id = stored.client_id().to_owned();
        let message = stored.message(&self.objects, &key);
        K::map_mut(&mut self.objects).insert(key.clone(), stored);
        self.announce::<K>(
            &key,
            &context,
            AuditOutcome::Applied,
            &revision,
            written,
            "",
        );
        Ok(Applied {
            message,
            created: held.is_none(),
            secret,
        })
    }

    /// Checks access to what a write of kind `K` names and finds what is held there; notes both
    /// in `context` for the audit record.
    fn find<K: StoredKind>(
        &self,
        caller: &Caller,
        write: &Write,
        context: &mut WriteContext,
    ) -> Result<(ObjectKey, Option<&K>), Refusal> {
        let operation = K::KIND.operation();
        let key = self.resolve(caller, operation, &write.target, Some(context))?;
        let held = K::map(&self.objects).get(&key);
        if let Some(held) = held {
            context.found(held);
        }
        Ok((key, held))
    }

    pub fn get<K: StoredKind>(
        &self,
        caller: &Caller,
        target: &Target,
    ) -> Result<K::Message, Refusal> {
        let key = self.resolve(caller, K::KIND.operation(), target, None)?;
        self.message::<K>(&key).ok_or_else(|| {
            let what = audit_name(K::KIND).replace('_', " ");
            Refusal::not_found(&match target {
                Target::Object(_) => format!("{what} {}/{}", key.1, key.2),
                Target::Organization { slug, .. } => format!("{what} {slug}"),
            })
        })
    }

    /// Deletes what a request of kind `K` names: access, the precondition, then the kind's
    /// rules. Returns whether there was something to delete.
    pub fn delete<K: StoredKind>(
        &mut self,
        caller: &Caller,
        request: &K::Delete,
    ) -> Result<bool, Refusal> {
        let write = K::delete_write(request);
        let mut context = WriteContext::new::<K>("deleted", &write, caller);
        let result = (|| {
            let (key, held) = self.find::<K>(caller, &write, &mut context)?;
            if let Some(condition) = write
                .if_revision
                .as_ref()
                .and_then(|p| p.condition.as_ref())
            {
                check_precondition(held.map(K::meta), condition)?;
            }
            K::check_delete(&self.objects, &key)?;
            Ok((key, held.is_some()))
        })();
        let (key, held) = self.finish(&context, result)?;
        if held {
            self.remove::<K>(&key, &context, "");
        }
        Ok(held)
    }

    fn remove<K: StoredKind>(&mut self, key: &ObjectKey, context: &WriteContext, cause: &str) {
        K::map_mut(&mut self.objects).remove(key);
        let written = self.next_meta(context).last_write;
        self.announce::<K>(key, context, AuditOutcome::Deleted, "", written, cause);
    }

    fn message<K: StoredKind>(&self, key: &ObjectKey) -> Option<K::Message> {
        let stored = K::map(&self.objects).get(key)?;
        Some(stored.message(&self.objects, key))
    }

    /// An object of kind `K` as the API returns it, without access checks.
    pub fn read<K: StoredKind>(&self, target: &Target) -> Option<K::Message> {
        self.message::<K>(&self.key_of(target)?)
    }

    /// An object of kind `K` as the server keeps it.
    pub fn stored<K: StoredKind>(&self, target: &Target) -> Option<&K> {
        K::map(&self.objects).get(&self.key_of(target)?)
    }

    // ----- clients --------------------------------------------------------------------------

    /// The revision of every client the caller may see. Only clients are listed, so this stays
    /// outside the generic calls above.
    pub fn list_client_revisions(
        &self,
        caller: &Caller,
        request: &ListClientRevisionsRequest,
    ) -> Result<ListClientRevisionsResponse, Refusal> {
        self.require_operation(caller, Operation::Clients)?;
        self.check_filters(
            caller,
            Operation::Clients,
            &request.organizations,
            &request.namespaces,
        )?;
        let offset = page_offset(&request.page_token)?;
        let page_size = match request.page_size {
            0 => 1000,
            size => size as usize,
        };
        let matching: Vec<ClientRevision> = self
            .objects
            .clients
            .iter()
            .filter(|(key, _)| {
                (request.organizations.is_empty() || request.organizations.contains(&key.0))
                    && (request.namespaces.is_empty() || request.namespaces.contains(&key.1))
                    && grants::decide(
                        &self.allowed,
                        &caller.identity,
                        Operation::Clients,
                        &key.0,
                        Some(&key.1),
                    )
                    .is_covered()
            })
            .map(|(key, client)| ClientRevision {
                r#ref: Some(self.objects.reference(key)),
                client_id: client.client_id.clone(),
                revision: client.meta.revision.clone(),
                last_write: Some(client.meta.last_write.clone()),
            })
            .collect();
        let end = (offset + page_size).min(matching.len());
        let clients = matching
            .get(offset..end)
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        Ok(ListClientRevisionsResponse {
            clients,
            next_page_token: if end < matching.len() {
                end.to_string()
            } else {
                String::new()
            },
            change_hint: Some(self.history.hint()),
        })
    }

    // ----- audit ----------------------------------------------------------------------------

    pub fn list_audit_events(
        &self,
        caller: &Caller,
        request: &ListAuditEventsRequest,
    ) -> Result<ListAuditEventsResponse, Refusal> {
        self.require_identity(caller)?;
        if request.organization.is_empty() {
            return Err(Refusal::invalid_field(
                "organization",
                "must name an organization slug",
            ));
        }
        // Audit events of an organization are visible to any grant that reaches it.
        let reaches = Operation::ALL.into_iter().any(|operation| {
            grants::decide(
                &self.allowed,
                &caller.identity,
                operation,
                &request.organization,
                None,
            )
            .is_covered()
        });
        if !reaches {
            return Err(denial(
                &GrantDecision::OutsideGrant {
                    organization: Some(request.organization.clone()),
                    namespace: None,
                },
                caller,
            ));
        }
        let offset = page_offset(&request.page_token)?;
        let page_size = match request.page_size {
            0 => 100,
            size => size as usize,
        };
        let since = request.since.map(|t| (t.seconds, t.nanos));
        let matching: Vec<_> = self
            .audit
            .newest_first(&request.organization, &request.client_id, &request.name)
            .filter(|event| {
                event.organization == request.organization
                    && (request.client_id.is_empty() || event.client_id == request.client_id)
                    && (request.kind == 0 || event.kind == request.kind)
                    && (request.name.is_empty()
                        || event.r#ref.as_ref().is_some_and(|r| r.name == request.name))
                    && since.is_none_or(|since| {
                        event.time.is_some_and(|t| (t.seconds, t.nanos) >= since)
                    })
            })
            .cloned()
            .collect();
        let end = (offset + page_size).min(matching.len());
        Ok(ListAuditEventsResponse {
            events: matching
                .get(offset..end)
                .map(<[_]>::to_vec)
                .unwrap_or_default(),
            next_page_token: if end < matching.len() {
                end.to_string()
            } else {
                String::new()
            },
        })
    }

    // ----- out-of-band changes (test controls) ----------------------------------------------

    fn out_of_band_context<K: StoredKind>(
        &self,
        action: &str,
        key: &ObjectKey,
        by: &Actor,
    ) -> WriteContext {
        WriteContext {
            kind: K::KIND.object_kind(),
            action: audit_action(K::KIND, action),
            reference: K::reference(&self.objects, key),
            organization: K::organization(key).to_owned(),
            client_id: K::map(&self.objects)
                .get(key)
                .map(|stored| stored.client_id().to_owned())
                .unwrap_or_default(),
            manager: String::new(),
            actor: by.actor.clone(),
            generation: 0,
            generation_in_force: None,
        }
    }

    /// Changes an object as a person would through the dashboard: no manager, no generation.
    /// `edit` changes the stored spec; returns the new revision, or `None` when there is no
    /// such object.
    pub fn edit_out_of_band<K: StoredKind>(
        &mut self,
        target: &Target,
        by: &Actor,
        edit: impl FnOnce(&mut K::Spec),
    ) -> Option<String> {
        let key = self.key_of(target)?;
        // Nothing to edit: the hint must not move.
        K::map(&self.objects).get(&key)?;
        let context = self.out_of_band_context::<K>("applied", &key, by);
        let meta = self.next_meta(&context);
        let (revision, written) = (meta.revision.clone(), meta.last_write.clone());
        let stored = K::map_mut(&mut self.objects).get_mut(&key)?;
        edit(stored.spec_mut());
        *stored.meta_mut() = meta;
        self.announce::<K>(
            &key,
            &context,
            AuditOutcome::Applied,
            &revision,
            written,
            &by.cause,
        );
        Some(revision)
    }

    /// Deletes an object as a person would through the dashboard. Returns whether it existed.
    pub fn delete_out_of_band<K: StoredKind>(&mut self, target: &Target, by: &Actor) -> bool {
        let Some(key) = self.key_of(target) else {
            return false;
        };
        if !K::map(&self.objects).contains_key(&key) {
            return false;
        }
        let context = self.out_of_band_context::<K>("deleted", &key, by);
        self.remove::<K>(&key, &context, &by.cause);
        true
    }

    /// A snapshot of every object.
    pub fn backup(&self) -> Backup {
        Backup {
            objects: self.objects.clone(),
            sequence: self.history.sequence,
            hint: self.history.hint(),
        }
    }

    /// Restores a backup: every object returns to its state in the backup at once, the history
    /// starts a new epoch, watchers are told to list again, and the audit log records each object
    /// that changed. Returns how many objects changed.
    pub fn restore(&mut self, backup: &Backup, by: &Actor) -> usize {
        let before = std::mem::replace(&mut self.objects, backup.objects.clone());
        self.history.restart_epoch(backup.sequence);
        // The audit records come kind by kind, in the order of the kinds' numbers.
        let changed = self.record_restore::<StoredClient>(&before, by)
            + self.record_restore::<StoredBranding>(&before, by)
            + self.record_restore::<StoredIdentityProvider>(&before, by)
            + self.record_restore::<StoredOrganization>(&before, by);
        let _ = self.changes.send(self.history.resync_event());
        changed
    }

    /// Records each object of kind `K` whose revision a restore changed; returns how many.
    fn record_restore<K: StoredKind>(&mut self, before: &Objects, by: &Actor) -> usize {
        let (old_map, new_map) = (K::map(before), K::map(&self.objects));
        let keys: BTreeSet<&ObjectKey> = old_map.keys().chain(new_map.keys()).collect();
        let mut changed = 0;
        for key in keys {
            let (old, new) = (old_map.get(key), new_map.get(key));
            if old.map(|o| &o.meta().revision) == new.map(|n| &n.meta().revision) {
                continue;
            }
            changed += 1;
            let (action, outcome, revision) = match new {
                Some(new) => (
                    "restored",
                    AuditOutcome::Applied,
                    new.meta().revision.clone(),
                ),
                None => ("deleted", AuditOutcome::Deleted, String::new()),
            };
            let context = WriteContext {
                // A deleted object's record names the client id it had.
                client_id: new
                    .or(old)
                    .map(|o| o.client_id().to_owned())
                    .unwrap_or_default(),
                ..self.out_of_band_context::<K>(action, key, by)
            };
            let cause = if by.cause.is_empty() {
                "restore from backup"
            } else {
                &by.cause
            };
            self.audit
                .record(context.audit_record(outcome, &revision, cause));
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(manager: &str, actor: &str) -> Meta {
        Meta {
            revision: "e1-4".to_owned(),
            generation: 3,
            last_write: WriteInfo {
                manager: manager.to_owned(),
                actor: actor.to_owned(),
                time: None,
                generation: 3,
            },
        }
    }

    fn revision(value: &str) -> Precondition {
        Precondition {
            condition: Some(precondition::Condition::Revision(value.to_owned())),
        }
    }

    fn absent() -> Precondition {
        Precondition {
            condition: Some(precondition::Condition::Absent(true)),
        }
    }

    const OPERATOR: &str = "dns:op";

    #[test]
    fn a_matching_revision_or_an_absent_object_passes() {
        let held = meta("nauthera-reconciler", OPERATOR);
        assert!(check_write(Some(&held), Some(&revision("e1-4")), "x", "y").is_ok());
        assert!(check_write(None, Some(&absent()), "x", "y").is_ok());
    }

    #[test]
    fn another_revision_or_none_is_a_mismatch_naming_the_held_one() {
        let held = meta("nauthera-reconciler", OPERATOR);
        let other = check_write(Some(&held), Some(&revision("e1-2")), "m", OPERATOR).unwrap_err();
        assert_eq!(other.reason, ErrorReason::RevisionMismatch);
        assert_eq!(
            other.metadata_value(ErrorMetadataKey::Revision),
            Some("e1-4")
        );
        let none = check_write(None, Some(&revision("e1-2")), "m", OPERATOR).unwrap_err();
        assert_eq!(none.metadata_value(ErrorMetadataKey::Revision), Some(""));
        let exists = check_write(Some(&held), Some(&absent()), "m", OPERATOR).unwrap_err();
        assert_eq!(exists.reason, ErrorReason::RevisionMismatch);
    }

    #[test]
    fn without_a_precondition_only_the_same_manager_may_overwrite() {
        let held = meta("nauthera-reconciler", OPERATOR);
        assert!(check_write(Some(&held), None, "nauthera-reconciler", "dns:other").is_ok());
        let conflict = check_write(Some(&held), None, "terraform", OPERATOR).unwrap_err();
        assert_eq!(conflict.reason, ErrorReason::ManagerConflict);
        assert_eq!(
            conflict.metadata_value(ErrorMetadataKey::Manager),
            Some("nauthera-reconciler")
        );
        let person = meta("", "user:alice@example.com");
        let conflict =
            check_write(Some(&person), None, "nauthera-reconciler", OPERATOR).unwrap_err();
        assert_eq!(
            conflict.metadata_value(ErrorMetadataKey::Actor),
            Some("user:alice@example.com")
        );
        assert!(check_write(Some(&person), None, "", "user:alice@example.com").is_ok());
        assert!(check_write(None, None, "anyone", "anything").is_ok());
    }

    #[test]
    fn the_caller_goes_by_its_first_listed_identity() {
        let allowed = vec![crate::config::grant_everything("dns:b")];
        let caller = Caller::from_identities(vec!["dns:a".into(), "dns:b".into()], &allowed);
        assert_eq!(caller.identity, "dns:b");
        let unknown = Caller::from_identities(vec!["dns:a".into(), "dns:c".into()], &allowed);
        assert_eq!(unknown.identity, "dns:a");
        assert_eq!(Caller::from_identities(vec![], &allowed).identity, "");
    }
}
