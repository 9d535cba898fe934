//! The rules of every AdminService call, on the in-memory state, without I/O: access control,
//! issuers, field rules, preconditions and managers, revisions, change hints and audit records.

use nauthera_proto::v1::{
    self, ApplyBrandingRequest, ApplyClientRequest, ApplyClientResponse,
    ApplyIdentityProviderRequest, ApplyOrganizationRequest, AuditOutcome, ChangeEvent, ChangeHint,
    ClientRevision, DeleteBrandingRequest, DeleteClientRequest, DeleteClientResponse,
    DeleteIdentityProviderRequest, DeleteObjectResponse, DeleteOrganizationRequest,
    ErrorMetadataKey, ErrorReason, FapiMode, ListAuditEventsRequest, ListAuditEventsResponse,
    ListClientRevisionsRequest, ListClientRevisionsResponse, ObjectKind, ObjectRef, Precondition,
    ServerInfo, WriteInfo, client_spec, precondition,
};
use nauthera_shared::grants::{self, GrantDecision, GrantEntry, Operation};
use tokio::sync::broadcast;
use tonic::Code;

use crate::refusal::{Refusal, violation};
use crate::rules;
use crate::state::{
    AuditLog, AuditRecord, Backup, History, Meta, ObjectKey, Objects, StoredBranding, StoredClient,
    StoredIdentityProvider, StoredOrganization, now, random_hex, secret_hash,
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
    fn new(
        kind: ObjectKind,
        action: &str,
        manager: &str,
        caller: &Caller,
        generation: i64,
    ) -> Self {
        WriteContext {
            kind,
            action: action.to_owned(),
            manager: manager.to_owned(),
            actor: caller.identity.clone(),
            generation,
            ..Default::default()
        }
    }

    fn found(&mut self, meta: &Meta) {
        self.generation_in_force = Some(meta.generation);
    }
}

fn kind_name(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Client => "client",
        ObjectKind::Branding => "branding",
        ObjectKind::IdentityProvider => "identity_provider",
        ObjectKind::Organization => "organization",
        ObjectKind::Unspecified => "object",
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

fn refusal_of(decision: &GrantDecision, caller: &Caller) -> Option<Refusal> {
    let reason = decision.reason()?;
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
    Some(refusal)
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
        let revision = self.history.next_revision();
        let written = WriteInfo {
            manager: "config".to_owned(),
            actor: "system:config".to_owned(),
            time: Some(now()),
            generation: 0,
        };
        self.objects.organizations.insert(
            slug.to_owned(),
            StoredOrganization {
                spec,
                namespace: String::new(),
                meta: Meta {
                    revision: revision.clone(),
                    generation: 0,
                    last_write: written.clone(),
                },
            },
        );
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
            let mut refusal = refusal_of(&decision, caller).unwrap_or_else(|| {
                Refusal::new(Code::PermissionDenied, ErrorReason::IdentityNotAllowed, "")
            });
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
            Err(
                refusal_of(&GrantDecision::OperationNotGranted { operation }, caller)
                    .unwrap_or_else(|| {
                        Refusal::new(Code::PermissionDenied, ErrorReason::OperationNotGranted, "")
                    }),
            )
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
        match refusal_of(&decision, caller) {
            Some(refusal) => Err(refusal),
            None => Ok(()),
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

    /// Checks access to an object named by `reference` and returns its key.
    fn resolve(
        &self,
        caller: &Caller,
        operation: Operation,
        reference: &ObjectRef,
        context: Option<&mut WriteContext>,
    ) -> Result<ObjectKey, Refusal> {
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
            let key =
                nauthera_shared::client::metadata_key_name(ErrorMetadataKey::GenerationInForce);
            refusal
                .metadata
                .entry(key)
                .or_insert(generation.to_string());
        }
        self.audit.record(AuditRecord {
            action: context.action.clone(),
            outcome: AuditOutcome::Refused,
            kind: context.kind,
            reference: context.reference.clone(),
            organization: context.organization.clone(),
            client_id: context.client_id.clone(),
            manager: context.manager.clone(),
            actor: context.actor.clone(),
            cause: refusal.cause.clone(),
            violations: refusal.violations.clone(),
            revision: String::new(),
            generation: context.generation,
            reason: refusal.reason.as_str_name().to_owned(),
        });
        Err(refusal)
    }

    fn record_write(
        &mut self,
        context: &WriteContext,
        outcome: AuditOutcome,
        revision: &str,
        cause: &str,
    ) {
        self.audit.record(AuditRecord {
            action: context.action.clone(),
            outcome,
            kind: context.kind,
            reference: context.reference.clone(),
            organization: context.organization.clone(),
            client_id: context.client_id.clone(),
            manager: context.manager.clone(),
            actor: context.actor.clone(),
            cause: cause.to_owned(),
            violations: Vec::new(),
            revision: revision.to_owned(),
            generation: context.generation,
            reason: String::new(),
        });
    }

    fn write_info(&self, context: &WriteContext) -> WriteInfo {
        WriteInfo {
            manager: context.manager.clone(),
            actor: context.actor.clone(),
            time: Some(now()),
            generation: context.generation,
        }
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
                .map(GrantEntry::to_proto)
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

    // ----- clients --------------------------------------------------------------------------

    pub fn apply_client(
        &mut self,
        caller: &Caller,
        request: ApplyClientRequest,
    ) -> Result<ApplyClientResponse, Refusal> {
        let mut context = WriteContext::new(
            ObjectKind::Client,
            "client.applied",
            &request.manager,
            caller,
            request.generation,
        );
        let result = self.try_apply_client(caller, request, &mut context);
        self.finish(&context, result)
    }

    fn try_apply_client(
        &mut self,
        caller: &Caller,
        request: ApplyClientRequest,
        context: &mut WriteContext,
    ) -> Result<ApplyClientResponse, Refusal> {
        let reference = request.r#ref.clone().unwrap_or_default();
        context.reference = reference.clone();
        let key = self.resolve(caller, Operation::Clients, &reference, Some(context))?;
        let existing = self.objects.clients.get(&key).cloned();
        if let Some(existing) = &existing {
            context.client_id = existing.client_id.clone();
            context.found(&existing.meta);
        }
        if rules::is_reserved_client_name(&reference.name) {
            return Err(Refusal::new(
                Code::InvalidArgument,
                ErrorReason::ReservedName,
                format!(
                    "the client name {} is reserved by the server",
                    reference.name
                ),
            )
            .with(ErrorMetadataKey::Name, &reference.name)
            .with_violations(vec![violation("ref.name", "reserved by the server")]));
        }
        let spec = request.spec.clone().unwrap_or_default();
        let mut violations = rules::client_violations(&spec);
        let generates = matches!(spec.secret, Some(client_spec::Secret::GenerateSecret(true)));
        if request.rotate_secret
            && !(generates && existing.as_ref().is_some_and(|c| c.secret_generated))
        {
            violations.push(violation(
                "rotate_secret",
                "only an existing client with a generated secret can rotate it",
            ));
        }
        if !violations.is_empty() {
            return Err(Refusal::invalid_fields(violations));
        }
        let fapi_mode = self
            .objects
            .organizations
            .get(&key.0)
            .map(|org| FapiMode::try_from(org.spec.fapi_mode).unwrap_or_default())
            .unwrap_or_default();
        let fapi = rules::fapi_violations(&spec, fapi_mode);
        if !fapi.is_empty() {
            return Err(Refusal::new(
                Code::FailedPrecondition,
                ErrorReason::FapiRequirements,
                format!(
                    "organization {} runs {}; the client does not meet it",
                    key.0,
                    fapi_mode.as_str_name()
                ),
            )
            .with(ErrorMetadataKey::FapiMode, fapi_mode.as_str_name())
            .with(ErrorMetadataKey::Organization, &key.0)
            .with_violations(fapi));
        }
        if !spec.branding_ref.is_empty() {
            let branding_key = (key.0.clone(), key.1.clone(), spec.branding_ref.clone());
            if !self.objects.brandings.contains_key(&branding_key) {
                return Err(Refusal::new(
                    Code::FailedPrecondition,
                    ErrorReason::ReferenceNotFound,
                    format!("no branding {} in namespace {}", spec.branding_ref, key.1),
                )
                .with(ErrorMetadataKey::Reference, &spec.branding_ref));
            }
        }
        check_write(
            existing.as_ref().map(|c| &c.meta),
            request.if_revision.as_ref(),
            &context.manager,
            &context.actor,
        )?;

        // The write.
        let revision = self.history.next_revision();
        let written = self.write_info(context);
        let client_id = existing.as_ref().map_or_else(
            || format!("{}-{}", reference.name, random_hex(6)),
            |c| c.client_id.clone(),
        );
        context.client_id = client_id.clone();
        let mut secret = String::new();
        let mut stored_spec = spec.clone();
        let (mut secret_hash_kept, mut secret_set_at, mut secret_generated) = existing
            .as_ref()
            .map(|c| (c.secret_hash.clone(), c.secret_set_at, c.secret_generated))
            .unwrap_or((None, None, false));
        if !rules::uses_secret(&spec) {
            (secret_hash_kept, secret_set_at, secret_generated) = (None, None, false);
        } else {
            match &spec.secret {
                Some(client_spec::Secret::GenerateSecret(true))
                    if !secret_generated || request.rotate_secret || secret_hash_kept.is_none() =>
                {
                    secret = random_hex(32);
                    secret_hash_kept = Some(secret_hash(&secret));
                    secret_set_at = Some(now());
                    secret_generated = true;
                }
                Some(client_spec::Secret::ProvidedSecret(provided)) => {
                    let hash = secret_hash(provided);
                    if secret_hash_kept.as_deref() != Some(hash.as_str()) {
                        secret_set_at = Some(now());
                    }
                    secret_hash_kept = Some(hash);
                    secret_generated = false;
                }
                _ => {}
            }
        }
        // A client without a secret (public, private_key_jwt) is returned with no secret source.
        stored_spec.secret = rules::uses_secret(&spec)
            .then_some(client_spec::Secret::GenerateSecret(secret_generated));
        let stored = StoredClient {
            client_id: client_id.clone(),
            spec: stored_spec,
            secret_hash: secret_hash_kept,
            secret_generated,
            secret_set_at,
            meta: Meta {
                revision: revision.clone(),
                generation: request.generation,
                last_write: written.clone(),
            },
        };
        self.objects.clients.insert(key.clone(), stored);
        let reference = self.objects.reference(&key);
        self.publish(
            ObjectKind::Client,
            reference,
            client_id,
            revision.clone(),
            written,
        );
        self.record_write(context, AuditOutcome::Applied, &revision, "");
        Ok(ApplyClientResponse {
            client: self.client(&key),
            created: existing.is_none(),
            secret,
        })
    }

    /// A stored client as the API returns it.
    pub fn client(&self, key: &ObjectKey) -> Option<v1::Client> {
        let stored = self.objects.clients.get(key)?;
        Some(v1::Client {
            r#ref: Some(self.objects.reference(key)),
            organization: key.0.clone(),
            client_id: stored.client_id.clone(),
            spec: Some(stored.spec.clone()),
            revision: stored.meta.revision.clone(),
            generation_in_force: stored.meta.generation,
            last_write: Some(stored.meta.last_write.clone()),
            secret_set_at: stored.secret_set_at,
        })
    }

    pub fn get_client(
        &self,
        caller: &Caller,
        reference: &ObjectRef,
    ) -> Result<v1::Client, Refusal> {
        let key = self.resolve(caller, Operation::Clients, reference, None)?;
        self.client(&key)
            .ok_or_else(|| Refusal::not_found(&format!("client {}/{}", key.1, key.2)))
    }

    pub fn delete_client(
        &mut self,
        caller: &Caller,
        request: DeleteClientRequest,
    ) -> Result<DeleteClientResponse, Refusal> {
        let mut context = WriteContext::new(
            ObjectKind::Client,
            "client.deleted",
            &request.manager,
            caller,
            0,
        );
        let result = (|| {
            let reference = request.r#ref.clone().unwrap_or_default();
            context.reference = reference.clone();
            let key = self.resolve(caller, Operation::Clients, &reference, Some(&mut context))?;
            let held = self.objects.clients.get(&key).cloned();
            if let Some(held) = &held {
                context.client_id = held.client_id.clone();
                context.found(&held.meta);
            }
            if let Some(condition) = request
                .if_revision
                .as_ref()
                .and_then(|p| p.condition.as_ref())
            {
                check_precondition(held.as_ref().map(|c| &c.meta), condition)?;
            }
            Ok((key, held))
        })();
        let (key, held) = self.finish(&context, result)?;
        let Some(held) = held else {
            return Ok(DeleteClientResponse { deleted: false });
        };
        self.remove_client(&key, &held, &context, "");
        Ok(DeleteClientResponse { deleted: true })
    }

    fn remove_client(
        &mut self,
        key: &ObjectKey,
        held: &StoredClient,
        context: &WriteContext,
        cause: &str,
    ) {
        let reference = self.objects.reference(key);
        self.objects.clients.remove(key);
        self.history.next_revision();
        let written = self.write_info(context);
        self.publish(
            ObjectKind::Client,
            reference,
            held.client_id.clone(),
            String::new(),
            written,
        );
        self.record_write(context, AuditOutcome::Deleted, "", cause);
    }

    pub fn list_client_revisions(
        &self,
        caller: &Caller,
        request: &ListClientRevisionsRequest,
    ) -> Result<ListClientRevisionsResponse, Refusal> {
        self.require_operation(caller, Operation::Clients)?;
        let own = grants::entries_for(&self.allowed, &caller.identity);
        let granting: Vec<_> = own
            .iter()
            .filter(|entry| entry.operations.contains(&Operation::Clients))
            .collect();
        let covers = |list: &dyn Fn(&GrantEntry) -> &Vec<String>, value: &str| {
            granting.iter().any(|entry| {
                list(entry)
                    .iter()
                    .any(|item| item == grants::WILDCARD || item == value)
            })
        };
        for organization in &request.organizations {
            if !covers(&|entry| &entry.organizations, organization) {
                return Err(refusal_of(
                    &GrantDecision::OutsideGrant {
                        organization: Some(organization.clone()),
                        namespace: None,
                    },
                    caller,
                )
                .unwrap_or_else(|| {
                    Refusal::new(Code::PermissionDenied, ErrorReason::OutsideGrant, "")
                }));
            }
        }
        for namespace in &request.namespaces {
            if !covers(&|entry| &entry.namespaces, namespace) {
                return Err(refusal_of(
                    &GrantDecision::OutsideGrant {
                        organization: None,
                        namespace: Some(namespace.clone()),
                    },
                    caller,
                )
                .unwrap_or_else(|| {
                    Refusal::new(Code::PermissionDenied, ErrorReason::OutsideGrant, "")
                }));
            }
        }
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

    // ----- brandings ------------------------------------------------------------------------

    pub fn apply_branding(
        &mut self,
        caller: &Caller,
        request: ApplyBrandingRequest,
    ) -> Result<v1::Branding, Refusal> {
        let mut context = WriteContext::new(
            ObjectKind::Branding,
            "branding.applied",
            &request.manager,
            caller,
            request.generation,
        );
        let result = (|| {
            let reference = request.r#ref.clone().unwrap_or_default();
            context.reference = reference.clone();
            let key = self.resolve(caller, Operation::Brandings, &reference, Some(&mut context))?;
            let held = self.objects.brandings.get(&key).map(|b| b.meta.clone());
            if let Some(meta) = &held {
                context.found(meta);
            }
            let document = request.document.clone().unwrap_or_default();
            let violations = rules::branding_violations(&document, "document");
            if !violations.is_empty() {
                return Err(Refusal::invalid_fields(violations));
            }
            check_write(
                held.as_ref(),
                request.if_revision.as_ref(),
                &context.manager,
                &context.actor,
            )?;
            Ok((key, document))
        })();
        let (key, document) = self.finish(&context, result)?;
        let revision = self.history.next_revision();
        let written = self.write_info(&context);
        self.objects.brandings.insert(
            key.clone(),
            StoredBranding {
                document,
                meta: Meta {
                    revision: revision.clone(),
                    generation: request.generation,
                    last_write: written.clone(),
                },
            },
        );
        let reference = self.objects.reference(&key);
        self.publish(
            ObjectKind::Branding,
            reference,
            String::new(),
            revision.clone(),
            written,
        );
        self.record_write(&context, AuditOutcome::Applied, &revision, "");
        self.branding(&key)
            .ok_or_else(|| Refusal::not_found("the branding just written"))
    }

    pub fn branding(&self, key: &ObjectKey) -> Option<v1::Branding> {
        let stored = self.objects.brandings.get(key)?;
        Some(v1::Branding {
            r#ref: Some(self.objects.reference(key)),
            organization: key.0.clone(),
            document: Some(stored.document.clone()),
            revision: stored.meta.revision.clone(),
            generation_in_force: stored.meta.generation,
            last_write: Some(stored.meta.last_write.clone()),
        })
    }

    pub fn get_branding(
        &self,
        caller: &Caller,
        reference: &ObjectRef,
    ) -> Result<v1::Branding, Refusal> {
        let key = self.resolve(caller, Operation::Brandings, reference, None)?;
        self.branding(&key)
            .ok_or_else(|| Refusal::not_found(&format!("branding {}/{}", key.1, key.2)))
    }

    pub fn delete_branding(
        &mut self,
        caller: &Caller,
        request: DeleteBrandingRequest,
    ) -> Result<DeleteObjectResponse, Refusal> {
        let reference = request.r#ref.clone().unwrap_or_default();
        self.delete_keyed(
            caller,
            ObjectKind::Branding,
            Operation::Brandings,
            &reference,
            request.if_revision.as_ref(),
            &request.manager,
        )
    }

    // ----- identity providers ---------------------------------------------------------------

    pub fn apply_identity_provider(
        &mut self,
        caller: &Caller,
        request: ApplyIdentityProviderRequest,
    ) -> Result<v1::IdentityProvider, Refusal> {
        let mut context = WriteContext::new(
            ObjectKind::IdentityProvider,
            "identity_provider.applied",
            &request.manager,
            caller,
            request.generation,
        );
        let result = (|| {
            let reference = request.r#ref.clone().unwrap_or_default();
            context.reference = reference.clone();
            let key = self.resolve(
                caller,
                Operation::IdentityProviders,
                &reference,
                Some(&mut context),
            )?;
            let held = self
                .objects
                .identity_providers
                .get(&key)
                .map(|p| p.meta.clone());
            if let Some(meta) = &held {
                context.found(meta);
            }
            let spec = request.spec.clone().unwrap_or_default();
            let violations = rules::identity_provider_violations(&spec);
            if !violations.is_empty() {
                return Err(Refusal::invalid_fields(violations));
            }
            check_write(
                held.as_ref(),
                request.if_revision.as_ref(),
                &context.manager,
                &context.actor,
            )?;
            Ok((key, spec))
        })();
        let (key, mut spec) = self.finish(&context, result)?;
        let secret = std::mem::take(&mut spec.upstream_client_secret);
        let revision = self.history.next_revision();
        let written = self.write_info(&context);
        self.objects.identity_providers.insert(
            key.clone(),
            StoredIdentityProvider {
                spec,
                secret_hash: (!secret.is_empty()).then(|| secret_hash(&secret)),
                meta: Meta {
                    revision: revision.clone(),
                    generation: request.generation,
                    last_write: written.clone(),
                },
            },
        );
        let reference = self.objects.reference(&key);
        self.publish(
            ObjectKind::IdentityProvider,
            reference,
            String::new(),
            revision.clone(),
            written,
        );
        self.record_write(&context, AuditOutcome::Applied, &revision, "");
        self.identity_provider(&key)
            .ok_or_else(|| Refusal::not_found("the identity provider just written"))
    }

    pub fn identity_provider(&self, key: &ObjectKey) -> Option<v1::IdentityProvider> {
        let stored = self.objects.identity_providers.get(key)?;
        Some(v1::IdentityProvider {
            r#ref: Some(self.objects.reference(key)),
            organization: key.0.clone(),
            spec: Some(stored.spec.clone()),
            revision: stored.meta.revision.clone(),
            generation_in_force: stored.meta.generation,
            last_write: Some(stored.meta.last_write.clone()),
        })
    }

    pub fn get_identity_provider(
        &self,
        caller: &Caller,
        reference: &ObjectRef,
    ) -> Result<v1::IdentityProvider, Refusal> {
        let key = self.resolve(caller, Operation::IdentityProviders, reference, None)?;
        self.identity_provider(&key)
            .ok_or_else(|| Refusal::not_found(&format!("identity provider {}/{}", key.1, key.2)))
    }

    pub fn delete_identity_provider(
        &mut self,
        caller: &Caller,
        request: DeleteIdentityProviderRequest,
    ) -> Result<DeleteObjectResponse, Refusal> {
        let reference = request.r#ref.clone().unwrap_or_default();
        self.delete_keyed(
            caller,
            ObjectKind::IdentityProvider,
            Operation::IdentityProviders,
            &reference,
            request.if_revision.as_ref(),
            &request.manager,
        )
    }

    fn held_meta(&self, kind: ObjectKind, key: &ObjectKey) -> Option<Meta> {
        match kind {
            ObjectKind::Client => self.objects.clients.get(key).map(|o| o.meta.clone()),
            ObjectKind::Branding => self.objects.brandings.get(key).map(|o| o.meta.clone()),
            ObjectKind::IdentityProvider => self
                .objects
                .identity_providers
                .get(key)
                .map(|o| o.meta.clone()),
            ObjectKind::Organization => self
                .objects
                .organizations
                .get(&key.2)
                .map(|o| o.meta.clone()),
            ObjectKind::Unspecified => None,
        }
    }

    fn delete_keyed(
        &mut self,
        caller: &Caller,
        kind: ObjectKind,
        operation: Operation,
        reference: &ObjectRef,
        precondition: Option<&Precondition>,
        manager: &str,
    ) -> Result<DeleteObjectResponse, Refusal> {
        let action = format!("{}.deleted", kind_name(kind));
        let mut context = WriteContext::new(kind, &action, manager, caller, 0);
        context.reference = reference.clone();
        let result = (|| {
            let key = self.resolve(caller, operation, reference, Some(&mut context))?;
            let held = self.held_meta(kind, &key);
            if let Some(meta) = &held {
                context.found(meta);
            }
            if let Some(condition) = precondition.and_then(|p| p.condition.as_ref()) {
                check_precondition(held.as_ref(), condition)?;
            }
            Ok((key, held.is_some()))
        })();
        let (key, held) = self.finish(&context, result)?;
        if !held {
            return Ok(DeleteObjectResponse { deleted: false });
        }
        self.remove_object(kind, &key, &context, "");
        Ok(DeleteObjectResponse { deleted: true })
    }

    fn remove_object(
        &mut self,
        kind: ObjectKind,
        key: &ObjectKey,
        context: &WriteContext,
        cause: &str,
    ) {
        if kind == ObjectKind::Client {
            if let Some(held) = self.objects.clients.get(key).cloned() {
                self.remove_client(key, &held, context, cause);
            }
            return;
        }
        let reference = if kind == ObjectKind::Organization {
            organization_ref(&key.2)
        } else {
            self.objects.reference(key)
        };
        match kind {
            ObjectKind::Branding => {
                self.objects.brandings.remove(key);
            }
            ObjectKind::IdentityProvider => {
                self.objects.identity_providers.remove(key);
            }
            ObjectKind::Organization => {
                self.objects.organizations.remove(&key.2);
            }
            _ => {}
        }
        self.history.next_revision();
        let written = self.write_info(context);
        self.publish(kind, reference, String::new(), String::new(), written);
        self.record_write(context, AuditOutcome::Deleted, "", cause);
    }

    // ----- organizations --------------------------------------------------------------------

    pub fn apply_organization(
        &mut self,
        caller: &Caller,
        request: ApplyOrganizationRequest,
    ) -> Result<v1::Organization, Refusal> {
        let mut context = WriteContext::new(
            ObjectKind::Organization,
            "organization.applied",
            &request.manager,
            caller,
            request.generation,
        );
        context.reference = organization_ref(&request.slug);
        context.organization = request.slug.clone();
        let result = (|| {
            self.require_operation(caller, Operation::Organizations)?;
            let namespace = (!request.namespace.is_empty()).then_some(request.namespace.as_str());
            self.authorize(caller, Operation::Organizations, &request.slug, namespace)?;
            let held = self
                .objects
                .organizations
                .get(&request.slug)
                .map(|o| o.meta.clone());
            if let Some(meta) = &held {
                context.found(meta);
            }
            let spec = request.spec.clone().unwrap_or_default();
            let mut violations = rules::organization_violations(&request.slug, &spec);
            if let Some(other) = self.objects.organization_for_issuer(&spec.issuer)
                && other != request.slug
            {
                violations.push(violation(
                    "spec.issuer",
                    format!("already served by organization {other}"),
                ));
            }
            if !violations.is_empty() {
                return Err(Refusal::invalid_fields(violations));
            }
            check_write(
                held.as_ref(),
                request.if_revision.as_ref(),
                &context.manager,
                &context.actor,
            )?;
            Ok(spec)
        })();
        let spec = self.finish(&context, result)?;
        let revision = self.history.next_revision();
        let written = self.write_info(&context);
        self.objects.organizations.insert(
            request.slug.clone(),
            StoredOrganization {
                spec,
                namespace: request.namespace.clone(),
                meta: Meta {
                    revision: revision.clone(),
                    generation: request.generation,
                    last_write: written.clone(),
                },
            },
        );
        self.publish(
            ObjectKind::Organization,
            organization_ref(&request.slug),
            String::new(),
            revision.clone(),
            written,
        );
        self.record_write(&context, AuditOutcome::Applied, &revision, "");
        self.organization(&request.slug)
            .ok_or_else(|| Refusal::not_found("the organization just written"))
    }

    pub fn organization(&self, slug: &str) -> Option<v1::Organization> {
        let stored = self.objects.organizations.get(slug)?;
        Some(v1::Organization {
            slug: slug.to_owned(),
            spec: Some(stored.spec.clone()),
            revision: stored.meta.revision.clone(),
            generation_in_force: stored.meta.generation,
            last_write: Some(stored.meta.last_write.clone()),
            namespace: stored.namespace.clone(),
        })
    }

    pub fn get_organization(
        &self,
        caller: &Caller,
        slug: &str,
    ) -> Result<v1::Organization, Refusal> {
        self.require_operation(caller, Operation::Organizations)?;
        self.authorize(caller, Operation::Organizations, slug, None)?;
        self.organization(slug)
            .ok_or_else(|| Refusal::not_found(&format!("organization {slug}")))
    }

    pub fn delete_organization(
        &mut self,
        caller: &Caller,
        request: DeleteOrganizationRequest,
    ) -> Result<DeleteObjectResponse, Refusal> {
        let mut context = WriteContext::new(
            ObjectKind::Organization,
            "organization.deleted",
            &request.manager,
            caller,
            0,
        );
        context.reference = organization_ref(&request.slug);
        context.organization = request.slug.clone();
        let key = (String::new(), String::new(), request.slug.clone());
        let result = (|| {
            self.require_operation(caller, Operation::Organizations)?;
            let namespace = (!request.namespace.is_empty()).then_some(request.namespace.as_str());
            self.authorize(caller, Operation::Organizations, &request.slug, namespace)?;
            let held = self.held_meta(ObjectKind::Organization, &key);
            if let Some(meta) = &held {
                context.found(meta);
            }
            if let Some(condition) = request
                .if_revision
                .as_ref()
                .and_then(|p| p.condition.as_ref())
            {
                check_precondition(held.as_ref(), condition)?;
            }
            let holds = self.objects.clients.keys().any(|k| k.0 == request.slug)
                || self.objects.brandings.keys().any(|k| k.0 == request.slug)
                || self
                    .objects
                    .identity_providers
                    .keys()
                    .any(|k| k.0 == request.slug);
            if holds {
                return Err(Refusal::new(
                    Code::FailedPrecondition,
                    ErrorReason::OrganizationNotEmpty,
                    format!(
                        "organization {} still holds objects; delete them first",
                        request.slug
                    ),
                )
                .with(ErrorMetadataKey::Organization, &request.slug));
            }
            Ok(held.is_some())
        })();
        if !self.finish(&context, result)? {
            return Ok(DeleteObjectResponse { deleted: false });
        }
        self.remove_object(ObjectKind::Organization, &key, &context, "");
        Ok(DeleteObjectResponse { deleted: true })
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
            return Err(refusal_of(
                &GrantDecision::OutsideGrant {
                    organization: Some(request.organization.clone()),
                    namespace: None,
                },
                caller,
            )
            .unwrap_or_else(|| {
                Refusal::new(Code::PermissionDenied, ErrorReason::OutsideGrant, "")
            }));
        }
        let offset = page_offset(&request.page_token)?;
        let page_size = match request.page_size {
            0 => 100,
            size => size as usize,
        };
        let since = request.since.map(|t| (t.seconds, t.nanos));
        let matching: Vec<_> = self
            .audit
            .events()
            .iter()
            .rev()
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

    fn out_of_band_context(
        &self,
        kind: ObjectKind,
        action: &str,
        key: &ObjectKey,
        by: &Actor,
    ) -> WriteContext {
        WriteContext {
            kind,
            action: action.to_owned(),
            reference: if kind == ObjectKind::Organization {
                organization_ref(&key.2)
            } else {
                self.objects.reference(key)
            },
            organization: if kind == ObjectKind::Organization {
                key.2.clone()
            } else {
                key.0.clone()
            },
            client_id: self
                .objects
                .clients
                .get(key)
                .filter(|_| kind == ObjectKind::Client)
                .map(|c| c.client_id.clone())
                .unwrap_or_default(),
            manager: String::new(),
            actor: by.actor.clone(),
            generation: 0,
            generation_in_force: None,
        }
    }

    /// The key of an object named by issuer, namespace and name.
    pub fn key_of(&self, reference: &ObjectRef) -> Option<ObjectKey> {
        let organization = self.objects.organization_for_issuer(&reference.issuer)?;
        Some((
            organization.to_owned(),
            reference.namespace.clone(),
            reference.name.clone(),
        ))
    }

    /// Changes an object as a person would through the dashboard: no manager, no generation.
    /// `edit` changes the stored object; returns the new revision.
    pub fn edit_out_of_band(
        &mut self,
        kind: ObjectKind,
        key: &ObjectKey,
        by: &Actor,
        edit: OutOfBandEdit<'_>,
    ) -> Option<String> {
        // Nothing to edit: the hint must not move.
        self.held_meta(kind, key)?;
        let revision = self.history.next_revision();
        let written = WriteInfo {
            manager: String::new(),
            actor: by.actor.clone(),
            time: Some(now()),
            generation: 0,
        };
        let meta = Meta {
            revision: revision.clone(),
            generation: 0,
            last_write: written.clone(),
        };
        let mut client_id = String::new();
        match (kind, edit) {
            (ObjectKind::Client, OutOfBandEdit::Client(edit)) => {
                let stored = self.objects.clients.get_mut(key)?;
                edit(&mut stored.spec);
                stored.meta = meta;
                client_id = stored.client_id.clone();
            }
            (ObjectKind::Branding, OutOfBandEdit::Branding(edit)) => {
                let stored = self.objects.brandings.get_mut(key)?;
                edit(&mut stored.document);
                stored.meta = meta;
            }
            (ObjectKind::IdentityProvider, OutOfBandEdit::IdentityProvider(edit)) => {
                let stored = self.objects.identity_providers.get_mut(key)?;
                edit(&mut stored.spec);
                stored.meta = meta;
            }
            (ObjectKind::Organization, OutOfBandEdit::Organization(edit)) => {
                let stored = self.objects.organizations.get_mut(&key.2)?;
                edit(&mut stored.spec);
                stored.meta = meta;
            }
            _ => return None,
        }
        let context =
            self.out_of_band_context(kind, &format!("{}.applied", kind_name(kind)), key, by);
        self.publish(
            kind,
            context.reference.clone(),
            client_id,
            revision.clone(),
            written,
        );
        self.record_write(&context, AuditOutcome::Applied, &revision, &by.cause);
        Some(revision)
    }

    /// Deletes an object as a person would through the dashboard. Returns whether it existed.
    pub fn delete_out_of_band(&mut self, kind: ObjectKind, key: &ObjectKey, by: &Actor) -> bool {
        if self.held_meta(kind, key).is_none() {
            return false;
        }
        let context =
            self.out_of_band_context(kind, &format!("{}.deleted", kind_name(kind)), key, by);
        self.remove_object(kind, key, &context, &by.cause);
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
        let before = self.objects.revisions();
        let after = backup.objects.revisions();
        self.objects = backup.objects.clone();
        self.history.restart_epoch(backup.sequence);
        let mut changed = 0;
        let mut keys: Vec<_> = before.keys().chain(after.keys()).cloned().collect();
        keys.sort();
        keys.dedup();
        for (kind_number, key) in keys {
            let (old, new) = (
                before.get(&(kind_number, key.clone())),
                after.get(&(kind_number, key.clone())),
            );
            if old.map(|o| &o.0) == new.map(|n| &n.0) {
                continue;
            }
            changed += 1;
            let kind = ObjectKind::try_from(kind_number).unwrap_or_default();
            let (reference, organization) = if kind == ObjectKind::Organization {
                (organization_ref(&key.2), key.2.clone())
            } else {
                (self.objects.reference(&key), key.0.clone())
            };
            let client_id = new.or(old).map(|entry| entry.1.clone()).unwrap_or_default();
            let (action, outcome, revision) = match new {
                Some((revision, _)) => ("restored", AuditOutcome::Applied, revision.clone()),
                None => ("deleted", AuditOutcome::Deleted, String::new()),
            };
            self.audit.record(AuditRecord {
                action: format!("{}.{action}", kind_name(kind)),
                outcome,
                kind,
                reference,
                organization,
                client_id,
                manager: String::new(),
                actor: by.actor.clone(),
                cause: if by.cause.is_empty() {
                    "restore from backup".to_owned()
                } else {
                    by.cause.clone()
                },
                violations: Vec::new(),
                revision,
                generation: 0,
                reason: String::new(),
            });
        }
        let _ = self.changes.send(self.history.resync_event());
        changed
    }
}

/// An out-of-band change to one kind of object.
pub enum OutOfBandEdit<'a> {
    Client(&'a mut dyn FnMut(&mut v1::ClientSpec)),
    Branding(&'a mut dyn FnMut(&mut v1::BrandingDocument)),
    IdentityProvider(&'a mut dyn FnMut(&mut v1::IdentityProviderSpec)),
    Organization(&'a mut dyn FnMut(&mut v1::OrganizationSpec)),
}

fn organization_ref(slug: &str) -> ObjectRef {
    ObjectRef {
        issuer: String::new(),
        namespace: String::new(),
        name: slug.to_owned(),
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
