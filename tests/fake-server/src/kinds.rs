//! The kinds of object the server stores (clients, brandings, identity providers,
//! organizations): what each keeps and what differs between them, as one [`StoredKind`] each.
//! Each names its row in the project's table of kinds (`nauthera_shared::kinds`), which gives its
//! AdminService kind, grant operation, methods and audit name; the accessors every kind has alike
//! come from one macro. What they share — grants, preconditions and managers, revisions, change
//! events, audit records and refusals — is written once, in `core`.

use std::collections::BTreeMap;

use nauthera_proto::v1::{
    self, ApplyBrandingRequest, ApplyClientRequest, ApplyIdentityProviderRequest,
    ApplyOrganizationRequest, BrandingDocument, ClientSpec, DeleteBrandingRequest,
    DeleteClientRequest, DeleteIdentityProviderRequest, DeleteOrganizationRequest,
    ErrorMetadataKey, ErrorReason, FapiMode, FieldViolation, IdentityProviderSpec, ObjectRef,
    OrganizationSpec, client_spec,
};
use nauthera_shared::kinds::Kind;
use prost_types::Timestamp;
use tonic::Code;

use crate::core::{Target, Write};
use crate::refusal::{Refusal, violation};
use crate::rules;
use crate::state::{
    Meta, ObjectKey, Objects, now, organization_key, organization_ref, random_hex, secret_hash,
};

/// One kind of stored object: its row in the table of kinds, how its requests name it, what an
/// apply must satisfy beyond the common write rules, what is kept and what the API returns.
pub trait StoredKind: Sized {
    /// Its row: the AdminService's name of the kind, the `allowed_clients` operation its calls
    /// need and its methods (its audit name follows, [`audit_action`]).
    const KIND: Kind;
    type Apply;
    type Delete;
    /// What a person edits out of band.
    type Spec;
    /// The object as the API returns it.
    type Message;

    /// What an apply or delete request writes; the generation is 0 for a delete.
    fn apply_write(request: &Self::Apply) -> Write;
    fn delete_write(request: &Self::Delete) -> Write;
    /// Its map in `Objects`.
    fn map(objects: &Objects) -> &BTreeMap<ObjectKey, Self>;
    fn map_mut(objects: &mut Objects) -> &mut BTreeMap<ObjectKey, Self>;
    fn meta(&self) -> &Meta;
    fn meta_mut(&mut self) -> &mut Meta;
    fn spec_mut(&mut self) -> &mut Self::Spec;

    /// The client id change events and audit records carry; only clients have one.
    fn client_id(&self) -> &str {
        ""
    }

    /// The reference change events and out-of-band audit records carry.
    fn reference(objects: &Objects, key: &ObjectKey) -> ObjectRef {
        objects.reference(key)
    }

    /// The slug of the organization it belongs to.
    fn organization(key: &ObjectKey) -> &str {
        &key.0
    }

    /// What an apply must satisfy besides its precondition (checked after this).
    fn check_apply(
        objects: &Objects,
        key: &ObjectKey,
        request: &Self::Apply,
        held: Option<&Self>,
    ) -> Result<(), Refusal>;

    /// What a delete must satisfy besides its precondition (checked before this).
    fn check_delete(_objects: &Objects, _key: &ObjectKey) -> Result<(), Refusal> {
        Ok(())
    }

    /// The object an accepted apply stores, and a generated secret to return once (or empty).
    fn store(
        request: Self::Apply,
        held: Option<&Self>,
        key: &ObjectKey,
        meta: Meta,
    ) -> (Self, String);

    fn message(&self, objects: &Objects, key: &ObjectKey) -> Self::Message;
}

/// An audit action on an object of `kind` (`branding.applied`, `identity_provider.deleted`): the
/// AdminService's name of the kind (`OBJECT_KIND_IDENTITY_PROVIDER`) without its prefix, in lower
/// case, as the real server names it.
pub fn audit_action(kind: Kind, action: &str) -> String {
    format!("{}.{action}", audit_name(kind))
}

/// The kind's name in audit actions, `identity_provider`.
pub fn audit_name(kind: Kind) -> String {
    let name = kind.object_kind_name();
    name.strip_prefix("OBJECT_KIND_")
        .unwrap_or(name)
        .to_ascii_lowercase()
}

/// The [`StoredKind`] methods that are alike for every kind: what its requests write (`target`
/// makes what a request names; without it, the request's `ref`), its map in `Objects` and where
/// its meta and spec are kept.
macro_rules! stored_alike {
    (map: $map:ident, spec: $spec:ident $(,)?) => {
        stored_alike! {
            map: $map,
            spec: $spec,
            target: |request| Target::Object(request.r#ref.clone().unwrap_or_default()),
        }
    };
    (map: $map:ident, spec: $spec:ident, target: |$request:ident| $target:expr $(,)?) => {
        fn apply_write($request: &Self::Apply) -> Write {
            Write {
                target: $target,
                manager: $request.manager.clone(),
                generation: $request.generation,
                if_revision: $request.if_revision.clone(),
            }
        }

        fn delete_write($request: &Self::Delete) -> Write {
            Write {
                target: $target,
                manager: $request.manager.clone(),
                generation: 0,
                if_revision: $request.if_revision.clone(),
            }
        }

        fn map(objects: &Objects) -> &BTreeMap<ObjectKey, Self> {
            &objects.$map
        }

        fn map_mut(objects: &mut Objects) -> &mut BTreeMap<ObjectKey, Self> {
            &mut objects.$map
        }

        fn meta(&self) -> &Meta {
            &self.meta
        }

        fn meta_mut(&mut self) -> &mut Meta {
            &mut self.meta
        }

        fn spec_mut(&mut self) -> &mut Self::Spec {
            &mut self.$spec
        }
    };
}

/// `INVALID_FIELD` when there are violations.
fn invalid_fields(violations: Vec<FieldViolation>) -> Result<(), Refusal> {
    if violations.is_empty() {
        Ok(())
    } else {
        Err(Refusal::invalid_fields(violations))
    }
}

// ----- clients --------------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct StoredClient {
    pub client_id: String,
    /// The spec in force, with the secret replaced by `generate_secret` true/false.
    pub spec: ClientSpec,
    /// The sha-256 of the current secret, hex; the secret itself is never kept.
    pub secret_hash: Option<String>,
    pub secret_generated: bool,
    pub secret_set_at: Option<Timestamp>,
    pub meta: Meta,
}

impl StoredKind for StoredClient {
    const KIND: Kind = Kind::OidcClient;
    type Apply = ApplyClientRequest;
    type Delete = DeleteClientRequest;
    type Spec = ClientSpec;
    type Message = v1::Client;

    stored_alike! {
        map: clients,
        spec: spec,
    }

    fn client_id(&self) -> &str {
        &self.client_id
    }

    /// A reserved name; the field rules, and `rotate_secret` only for a generated secret; the
    /// organization's FAPI mode; a `branding_ref` the namespace holds.
    fn check_apply(
        objects: &Objects,
        key: &ObjectKey,
        request: &ApplyClientRequest,
        held: Option<&Self>,
    ) -> Result<(), Refusal> {
        let (organization, namespace, name) = key;
        if rules::is_reserved_client_name(name) {
            return Err(Refusal::new(
                Code::InvalidArgument,
                ErrorReason::ReservedName,
                format!("the client name {name} is reserved by the server"),
            )
            .with(ErrorMetadataKey::Name, name)
            .with_violations(vec![violation("ref.name", "reserved by the server")]));
        }
        let spec = request.spec.clone().unwrap_or_default();
        let mut violations = rules::client_violations(&spec);
        let generates = matches!(spec.secret, Some(client_spec::Secret::GenerateSecret(true)));
        if request.rotate_secret && !(generates && held.is_some_and(|c| c.secret_generated)) {
            violations.push(violation(
                "rotate_secret",
                "only an existing client with a generated secret can rotate it",
            ));
        }
        invalid_fields(violations)?;
        let fapi_mode = objects
            .organizations
            .get(&organization_key(organization))
            .map(|org| FapiMode::try_from(org.spec.fapi_mode).unwrap_or_default())
            .unwrap_or_default();
        let fapi = rules::fapi_violations(&spec, fapi_mode);
        if !fapi.is_empty() {
            return Err(Refusal::new(
                Code::FailedPrecondition,
                ErrorReason::FapiRequirements,
                format!(
                    "organization {organization} runs {}; the client does not meet it",
                    fapi_mode.as_str_name()
                ),
            )
            .with(ErrorMetadataKey::FapiMode, fapi_mode.as_str_name())
            .with(ErrorMetadataKey::Organization, organization)
            .with_violations(fapi));
        }
        let branding = (
            organization.clone(),
            namespace.clone(),
            spec.branding_ref.clone(),
        );
        if !spec.branding_ref.is_empty() && !objects.brandings.contains_key(&branding) {
            return Err(Refusal::new(
                Code::FailedPrecondition,
                ErrorReason::ReferenceNotFound,
                format!("no branding {} in namespace {namespace}", spec.branding_ref),
            )
            .with(ErrorMetadataKey::Reference, &spec.branding_ref));
        }
        Ok(())
    }

    /// Keeps the client id; generates a secret on creation, on `rotate_secret` or when switching
    /// to `generate_secret`, and keeps only the sha-256 of any secret.
    fn store(
        request: ApplyClientRequest,
        held: Option<&Self>,
        key: &ObjectKey,
        meta: Meta,
    ) -> (Self, String) {
        let mut spec = request.spec.unwrap_or_default();
        let mut stored = StoredClient {
            client_id: held.map_or_else(
                || format!("{}-{}", key.2, random_hex(6)),
                |c| c.client_id.clone(),
            ),
            spec: ClientSpec::default(),
            secret_hash: None,
            secret_generated: false,
            secret_set_at: None,
            meta,
        };
        let mut secret = String::new();
        if rules::uses_secret(&spec) {
            if let Some(held) = held {
                stored.secret_hash = held.secret_hash.clone();
                stored.secret_set_at = held.secret_set_at;
                stored.secret_generated = held.secret_generated;
            }
            match &spec.secret {
                Some(client_spec::Secret::GenerateSecret(true))
                    if !stored.secret_generated
                        || request.rotate_secret
                        || stored.secret_hash.is_none() =>
                {
                    secret = random_hex(32);
                    stored.secret_hash = Some(secret_hash(&secret));
                    stored.secret_set_at = Some(now());
                    stored.secret_generated = true;
                }
                Some(client_spec::Secret::ProvidedSecret(provided)) => {
                    let hash = secret_hash(provided);
                    if stored.secret_hash.as_deref() != Some(hash.as_str()) {
                        stored.secret_set_at = Some(now());
                    }
                    stored.secret_hash = Some(hash);
                    stored.secret_generated = false;
                }
                _ => {}
            }
            spec.secret = Some(client_spec::Secret::GenerateSecret(stored.secret_generated));
        } else {
            // A client without a secret (public, private_key_jwt) is returned with no source.
            spec.secret = None;
        }
        stored.spec = spec;
        (stored, secret)
    }

    fn message(&self, objects: &Objects, key: &ObjectKey) -> v1::Client {
        v1::Client {
            r#ref: Some(objects.reference(key)),
            organization: key.0.clone(),
            client_id: self.client_id.clone(),
            spec: Some(self.spec.clone()),
            revision: self.meta.revision.clone(),
            generation_in_force: self.meta.generation,
            last_write: Some(self.meta.last_write.clone()),
            secret_set_at: self.secret_set_at,
        }
    }
}

// ----- brandings ------------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct StoredBranding {
    pub document: BrandingDocument,
    pub meta: Meta,
}

impl StoredKind for StoredBranding {
    const KIND: Kind = Kind::Branding;
    type Apply = ApplyBrandingRequest;
    type Delete = DeleteBrandingRequest;
    type Spec = BrandingDocument;
    type Message = v1::Branding;

    stored_alike! {
        map: brandings,
        spec: document,
    }

    fn check_apply(
        _objects: &Objects,
        _key: &ObjectKey,
        request: &ApplyBrandingRequest,
        _held: Option<&Self>,
    ) -> Result<(), Refusal> {
        let document = request.document.clone().unwrap_or_default();
        invalid_fields(rules::branding_violations(&document, "document"))
    }

    fn store(
        request: ApplyBrandingRequest,
        _held: Option<&Self>,
        _key: &ObjectKey,
        meta: Meta,
    ) -> (Self, String) {
        let document = request.document.unwrap_or_default();
        (StoredBranding { document, meta }, String::new())
    }

    fn message(&self, objects: &Objects, key: &ObjectKey) -> v1::Branding {
        v1::Branding {
            r#ref: Some(objects.reference(key)),
            organization: key.0.clone(),
            document: Some(self.document.clone()),
            revision: self.meta.revision.clone(),
            generation_in_force: self.meta.generation,
            last_write: Some(self.meta.last_write.clone()),
        }
    }
}

// ----- identity providers ---------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct StoredIdentityProvider {
    /// The spec in force, with `upstream_client_secret` empty.
    pub spec: IdentityProviderSpec,
    /// The sha-256 of the upstream client secret, hex.
    pub secret_hash: Option<String>,
    pub meta: Meta,
}

impl StoredKind for StoredIdentityProvider {
    const KIND: Kind = Kind::IdentityProvider;
    type Apply = ApplyIdentityProviderRequest;
    type Delete = DeleteIdentityProviderRequest;
    type Spec = IdentityProviderSpec;
    type Message = v1::IdentityProvider;

    stored_alike! {
        map: identity_providers,
        spec: spec,
    }

    fn check_apply(
        _objects: &Objects,
        _key: &ObjectKey,
        request: &ApplyIdentityProviderRequest,
        _held: Option<&Self>,
    ) -> Result<(), Refusal> {
        let spec = request.spec.clone().unwrap_or_default();
        invalid_fields(rules::identity_provider_violations(&spec))
    }

    /// Keeps only the sha-256 of the upstream client secret.
    fn store(
        request: ApplyIdentityProviderRequest,
        _held: Option<&Self>,
        _key: &ObjectKey,
        meta: Meta,
    ) -> (Self, String) {
        let mut spec = request.spec.unwrap_or_default();
        let secret = std::mem::take(&mut spec.upstream_client_secret);
        let secret_hash = (!secret.is_empty()).then(|| secret_hash(&secret));
        let stored = StoredIdentityProvider {
            spec,
            secret_hash,
            meta,
        };
        (stored, String::new())
    }

    fn message(&self, objects: &Objects, key: &ObjectKey) -> v1::IdentityProvider {
        v1::IdentityProvider {
            r#ref: Some(objects.reference(key)),
            organization: key.0.clone(),
            spec: Some(self.spec.clone()),
            revision: self.meta.revision.clone(),
            generation_in_force: self.meta.generation,
            last_write: Some(self.meta.last_write.clone()),
        }
    }
}

// ----- organizations --------------------------------------------------------------------------

/// An organization, named by its slug and keyed by [`organization_key`].
#[derive(Clone, Debug)]
pub struct StoredOrganization {
    pub spec: OrganizationSpec,
    /// The namespace of the Organization object that declares it; empty for seeded ones.
    pub namespace: String,
    pub meta: Meta,
}

impl StoredKind for StoredOrganization {
    const KIND: Kind = Kind::Organization;
    type Apply = ApplyOrganizationRequest;
    type Delete = DeleteOrganizationRequest;
    type Spec = OrganizationSpec;
    type Message = v1::Organization;

    stored_alike! {
        map: organizations,
        spec: spec,
        target: |request| Target::organization(&request.slug, &request.namespace),
    }

    fn reference(_objects: &Objects, key: &ObjectKey) -> ObjectRef {
        organization_ref(&key.2)
    }

    fn organization(key: &ObjectKey) -> &str {
        &key.2
    }

    /// The field rules, and an issuer no other organization serves.
    fn check_apply(
        objects: &Objects,
        _key: &ObjectKey,
        request: &ApplyOrganizationRequest,
        _held: Option<&Self>,
    ) -> Result<(), Refusal> {
        let spec = request.spec.clone().unwrap_or_default();
        let mut violations = rules::organization_violations(&request.slug, &spec);
        if let Some(other) = objects.organization_for_issuer(&spec.issuer)
            && other != request.slug
        {
            violations.push(violation(
                "spec.issuer",
                format!("already served by organization {other}"),
            ));
        }
        invalid_fields(violations)
    }

    /// `ORGANIZATION_NOT_EMPTY` while it holds objects.
    fn check_delete(objects: &Objects, key: &ObjectKey) -> Result<(), Refusal> {
        let slug = &key.2;
        let holds = objects.clients.keys().any(|k| &k.0 == slug)
            || objects.brandings.keys().any(|k| &k.0 == slug)
            || objects.identity_providers.keys().any(|k| &k.0 == slug);
        if holds {
            return Err(Refusal::new(
                Code::FailedPrecondition,
                ErrorReason::OrganizationNotEmpty,
                format!("organization {slug} still holds objects; delete them first"),
            )
            .with(ErrorMetadataKey::Organization, slug));
        }
        Ok(())
    }

    fn store(
        request: ApplyOrganizationRequest,
        _held: Option<&Self>,
        _key: &ObjectKey,
        meta: Meta,
    ) -> (Self, String) {
        let stored = StoredOrganization {
            spec: request.spec.unwrap_or_default(),
            namespace: request.namespace,
            meta,
        };
        (stored, String::new())
    }

    fn message(&self, _objects: &Objects, key: &ObjectKey) -> v1::Organization {
        v1::Organization {
            slug: key.2.clone(),
            spec: Some(self.spec.clone()),
            revision: self.meta.revision.clone(),
            generation_in_force: self.meta.generation,
            last_write: Some(self.meta.last_write.clone()),
            namespace: self.namespace.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names the real server's audit actions carry.
    #[test]
    fn audit_actions_name_the_kind_as_the_server_does() {
        let names = Kind::ALL.map(audit_name);
        assert_eq!(
            names,
            ["client", "branding", "identity_provider", "organization"]
        );
        assert_eq!(
            audit_action(Kind::IdentityProvider, "deleted"),
            "identity_provider.deleted"
        );
    }
}
