//! What the server holds, turned back into manifests: pure, so every rule here is tested with
//! plain values. The specs come from the client's from-wire conversions
//! (`nauthera_client::convert::*_from_server`), the same ones the reconciler compares with, so
//! an exported manifest is one the reconciler finds identical to what the server holds. Secrets
//! never appear: the server returns none, and a secret a manifest needs is a `secretRef`
//! placeholder named in a comment above it.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use nauthera_client::convert::{
    ConvertError, SecretSource, identity_provider_spec_from_server, oidc_client_spec_from_server,
    organization_spec_from_server, secret_source, sign_in_branding_from_document,
};
use nauthera_proto::v1;
use nauthera_shared::kinds::Kind;
use nauthera_shared::resources::{
    AdoptSecret, Branding, BrandingSpec, ClientSecret, DeletionPolicy, IdentityProvider,
    IdentityProviderKind, IdentityProviderSpec, ManagementPolicy, OIDCClient, OIDCClientSpec,
    Organization, OrganizationSpec, SecretKeyRef,
};
use nauthera_shared::topology::NamespaceMapping;
use nauthera_shared::{ADOPT_ANNOTATION, ADOPT_SECRET_ANNOTATION};
use serde::Serialize;

pub use super::args::SecretsChoice;

/// How the manifests are written.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `Manage` with the adopt annotations; otherwise `Observe`.
    pub manage: bool,
    pub secrets: SecretsChoice,
    /// Where organizations no manifest declared go.
    pub organization_namespace: Option<String>,
    /// How this cluster's namespaces are named on the server.
    pub mapping: NamespaceMapping,
}

/// What the listings returned.
#[derive(Clone, Debug, Default)]
pub struct Held {
    pub organizations: Vec<v1::Organization>,
    pub brandings: Vec<v1::Branding>,
    pub identity_providers: Vec<v1::IdentityProvider>,
    pub clients: Vec<v1::Client>,
}

/// One manifest: its kind, place, the comment above it and the object.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// Lines written above the manifest as YAML comments.
    pub comment: Vec<String>,
    /// The object as YAML, its fields in the resource's order.
    pub yaml: String,
}

/// The manifests, and what was left out.
#[derive(Clone, Debug, Default)]
pub struct Exported {
    /// Ordered so that applying them in turn works: Organizations, Brandings,
    /// IdentityProviders, OIDCClients, each by namespace and name.
    pub manifests: Vec<Manifest>,
    /// Objects of other clusters' namespaces, left out.
    pub other_clusters: usize,
    /// Objects the resource types cannot express (a newer server), left out, with why.
    pub unconvertible: Vec<String>,
}

/// Why nothing can be written.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    #[error(
        "the server holds {count} organization(s) no manifest declared ({slugs}); say which \
         namespace their Organization manifests go to with --organization-namespace NS, or \
         leave them out with --organization"
    )]
    UndeclaredOrganizations { count: usize, slugs: String },
}

/// The manifests of everything held, in the order they apply.
pub fn manifests(held: &Held, options: &Options) -> Result<Exported, ExportError> {
    let mut exported = Exported::default();
    let undeclared: Vec<&str> = held
        .organizations
        .iter()
        .filter(|org| org.namespace.is_empty())
        .map(|org| org.slug.as_str())
        .collect();
    if !undeclared.is_empty() && options.organization_namespace.is_none() {
        return Err(ExportError::UndeclaredOrganizations {
            count: undeclared.len(),
            slugs: undeclared.join(", "),
        });
    }
    for organization in &held.organizations {
        let namespace = if organization.namespace.is_empty() {
            options.organization_namespace.clone()
        } else {
            cluster_namespace(&options.mapping, &organization.namespace)
        };
        let Some(namespace) = namespace else {
            exported.other_clusters += 1;
            continue;
        };
        match organization_manifest(organization, &namespace, options) {
            Ok(manifest) => exported.manifests.push(manifest),
            Err(error) => exported
                .unconvertible
                .push(format!("Organization {}: {error}", organization.slug)),
        }
    }
    place_all(&held.brandings, options, &mut exported);
    place_all(&held.identity_providers, options, &mut exported);
    place_all(&held.clients, options, &mut exported);
    exported.manifests.sort_by(|a, b| {
        (kind_rank(a.kind), &a.namespace, &a.name).cmp(&(kind_rank(b.kind), &b.namespace, &b.name))
    });
    Ok(exported)
}

/// Where each kind goes in the stream: what others refer to comes first.
fn kind_rank(kind: Kind) -> u8 {
    match kind {
        Kind::Organization => 0,
        Kind::Branding => 1,
        Kind::IdentityProvider => 2,
        Kind::OidcClient => 3,
    }
}

/// The Kubernetes `kind` of a kind.
pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Organization => "Organization",
        Kind::Branding => "Branding",
        Kind::IdentityProvider => "IdentityProvider",
        Kind::OidcClient => "OIDCClient",
    }
}

/// This cluster's namespace of a server namespace; `None` for another cluster's (another
/// prefix, or, without one, a name no Kubernetes namespace can have).
pub fn cluster_namespace(mapping: &NamespaceMapping, server_namespace: &str) -> Option<String> {
    let namespace = mapping.from_server(server_namespace)?;
    is_dns_label(namespace).then(|| namespace.to_owned())
}

/// A Kubernetes namespace's name: a DNS label.
pub fn is_dns_label(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-')
}

/// An object the server holds in a namespace: its kind, reference and how its manifest is made.
trait InNamespace {
    const KIND: Kind;
    fn reference(&self) -> v1::ObjectRef;
    fn manifest(&self, namespace: &str, options: &Options) -> Result<Manifest, ConvertError>;
}

impl InNamespace for v1::Branding {
    const KIND: Kind = Kind::Branding;
    fn reference(&self) -> v1::ObjectRef {
        self.r#ref.clone().unwrap_or_default()
    }
    fn manifest(&self, namespace: &str, options: &Options) -> Result<Manifest, ConvertError> {
        branding_manifest(self, namespace, options)
    }
}

impl InNamespace for v1::IdentityProvider {
    const KIND: Kind = Kind::IdentityProvider;
    fn reference(&self) -> v1::ObjectRef {
        self.r#ref.clone().unwrap_or_default()
    }
    fn manifest(&self, namespace: &str, options: &Options) -> Result<Manifest, ConvertError> {
        identity_provider_manifest(self, namespace, options)
    }
}

impl InNamespace for v1::Client {
    const KIND: Kind = Kind::OidcClient;
    fn reference(&self) -> v1::ObjectRef {
        self.r#ref.clone().unwrap_or_default()
    }
    fn manifest(&self, namespace: &str, options: &Options) -> Result<Manifest, ConvertError> {
        client_manifest(self, namespace, options)
    }
}

/// The manifests of `held` in this cluster's namespaces; the others counted or named.
fn place_all<T: InNamespace>(held: &[T], options: &Options, exported: &mut Exported) {
    for object in held {
        let reference = object.reference();
        let Some(namespace) = cluster_namespace(&options.mapping, &reference.namespace) else {
            exported.other_clusters += 1;
            continue;
        };
        match object.manifest(&namespace, options) {
            Ok(manifest) => exported.manifests.push(manifest),
            Err(error) => exported.unconvertible.push(format!(
                "{} {namespace}/{}: {error}",
                kind_name(T::KIND),
                reference.name
            )),
        }
    }
}

/// The policy every exported manifest carries.
fn management_policy(options: &Options) -> ManagementPolicy {
    if options.manage {
        ManagementPolicy::Manage
    } else {
        ManagementPolicy::Observe
    }
}

/// The metadata of an exported manifest: its place, and with `--manage` the annotations that
/// adopt the revision exported (keeping the secret in force where it has one).
fn metadata(
    name: &str,
    namespace: &str,
    revision: &str,
    has_secret: bool,
    options: &Options,
) -> ObjectMeta {
    let mut annotations = BTreeMap::new();
    if options.manage {
        annotations.insert(ADOPT_ANNOTATION.to_owned(), revision.to_owned());
        if has_secret {
            annotations.insert(
                ADOPT_SECRET_ANNOTATION.to_owned(),
                AdoptSecret::Keep.as_str().to_owned(),
            );
        }
    }
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        annotations: (!annotations.is_empty()).then_some(annotations),
        ..ObjectMeta::default()
    }
}

/// Where the object comes from, for the comment above it.
fn origin(
    kind: Kind,
    namespace: &str,
    name: &str,
    revision: &str,
    written: Option<&v1::WriteInfo>,
) -> String {
    let by = match written {
        Some(written) if !written.manager.is_empty() => {
            format!(
                ", last written by {} through {}",
                written.actor, written.manager
            )
        }
        Some(written) if !written.actor.is_empty() => {
            format!(", last written by {}", written.actor)
        }
        _ => String::new(),
    };
    format!(
        "{} {namespace}/{name}: revision {revision} on the server{by}.",
        kind_name(kind)
    )
}

/// The object as it is committed, in its fields' order: a new resource has no status, and the
/// metadata holds only its place (and the adopt annotations).
fn object<T: Serialize>(resource: &T) -> Result<String, ConvertError> {
    serde_saphyr::to_string(resource).map_err(|error| ConvertError::UnknownValue {
        field: "manifest",
        value: error.to_string(),
    })
}

fn organization_manifest(
    organization: &v1::Organization,
    namespace: &str,
    options: &Options,
) -> Result<Manifest, ConvertError> {
    let held = organization.spec.clone().unwrap_or_default();
    let declared = OrganizationSpec {
        slug: organization.slug.clone(),
        issuer: held.issuer.clone(),
        display_name: None,
        branding: None,
        fapi_mode: Default::default(),
        deletion_policy: DeletionPolicy::Orphan,
        management_policy: ManagementPolicy::Observe,
    };
    let mut spec = organization_spec_from_server(&organization.slug, &held, &declared)?;
    spec.management_policy = management_policy(options);
    let name = organization.slug.clone();
    let mut resource = Organization::new(&name, spec);
    resource.metadata = metadata(&name, namespace, &organization.revision, false, options);
    let mut comment = vec![origin(
        Kind::Organization,
        namespace,
        &name,
        &organization.revision,
        organization.last_write.as_ref(),
    )];
    if organization.namespace.is_empty() {
        comment.push(format!(
            "No manifest declared it; placed in {namespace} by --organization-namespace."
        ));
    }
    Ok(Manifest {
        kind: Kind::Organization,
        namespace: namespace.to_owned(),
        name,
        comment,
        yaml: object(&resource)?,
    })
}

fn branding_manifest(
    branding: &v1::Branding,
    namespace: &str,
    options: &Options,
) -> Result<Manifest, ConvertError> {
    let reference = branding.r#ref.clone().unwrap_or_default();
    let document = branding.document.clone().unwrap_or_default();
    let spec = BrandingSpec {
        issuer: reference.issuer.clone(),
        branding: sign_in_branding_from_document(&document)?,
        deletion_policy: DeletionPolicy::Orphan,
        management_policy: management_policy(options),
    };
    let mut resource = Branding::new(&reference.name, spec);
    resource.metadata = metadata(
        &reference.name,
        namespace,
        &branding.revision,
        false,
        options,
    );
    Ok(Manifest {
        kind: Kind::Branding,
        namespace: namespace.to_owned(),
        name: reference.name.clone(),
        comment: vec![origin(
            Kind::Branding,
            namespace,
            &reference.name,
            &branding.revision,
            branding.last_write.as_ref(),
        )],
        yaml: object(&resource)?,
    })
}

/// The Secret a manifest expects for a secret the server keeps to itself.
fn placeholder(name: String) -> SecretKeyRef {
    SecretKeyRef {
        name,
        key: SecretKeyRef::DEFAULT_KEY.to_owned(),
    }
}

const NO_SECRET: &str = "No secret was exported.";

fn identity_provider_manifest(
    provider: &v1::IdentityProvider,
    namespace: &str,
    options: &Options,
) -> Result<Manifest, ConvertError> {
    let reference = provider.r#ref.clone().unwrap_or_default();
    let held = provider.spec.clone().unwrap_or_default();
    let declared: IdentityProviderSpec = serde_json::from_value(serde_json::json!({
        "issuer": reference.issuer,
        "kind": "oidc",
        "deletionPolicy": "Orphan",
    }))
    .map_err(|error| ConvertError::UnknownValue {
        field: "spec",
        value: error.to_string(),
    })?;
    let mut spec = identity_provider_spec_from_server(&held, &declared)?;
    spec.management_policy = management_policy(options);
    let mut comment = vec![origin(
        Kind::IdentityProvider,
        namespace,
        &reference.name,
        &provider.revision,
        provider.last_write.as_ref(),
    )];
    let has_secret = spec.kind != IdentityProviderKind::Saml;
    if has_secret {
        let secret = placeholder(format!("{}-upstream-client-secret", reference.name));
        comment.push(format!(
            "{NO_SECRET} It expects Secret {namespace}/{} (key {}) holding the client secret \
             registered at the upstream provider; create it before the manifest is managed.",
            secret.name, secret.key
        ));
        spec.secret_ref = Some(secret);
    }
    let mut resource = IdentityProvider::new(&reference.name, spec);
    resource.metadata = metadata(
        &reference.name,
        namespace,
        &provider.revision,
        has_secret,
        options,
    );
    Ok(Manifest {
        kind: Kind::IdentityProvider,
        namespace: namespace.to_owned(),
        name: reference.name.clone(),
        comment,
        yaml: object(&resource)?,
    })
}

fn client_manifest(
    client: &v1::Client,
    namespace: &str,
    options: &Options,
) -> Result<Manifest, ConvertError> {
    let reference = client.r#ref.clone().unwrap_or_default();
    let held = client.spec.clone().unwrap_or_default();
    let declared: OIDCClientSpec = serde_json::from_value(serde_json::json!({
        "issuer": reference.issuer,
        "deletionPolicy": "Orphan",
    }))
    .map_err(|error| ConvertError::UnknownValue {
        field: "spec",
        value: error.to_string(),
    })?;
    let mut spec = oidc_client_spec_from_server(&held, &declared)?;
    spec.management_policy = management_policy(options);
    let mut comment = vec![origin(
        Kind::OidcClient,
        namespace,
        &reference.name,
        &client.revision,
        client.last_write.as_ref(),
    )];
    let team_secret = placeholder(format!("{}-client-secret", reference.name));
    let expects = format!(
        "{NO_SECRET} It expects Secret {namespace}/{} (key {}) holding the client secret in \
         force; create it (for example from a SealedSecret) before the manifest is managed.",
        team_secret.name, team_secret.key
    );
    let source = secret_source(&held);
    match (source, options.secrets) {
        (SecretSource::Generated, SecretsChoice::Generate) => comment.push(format!(
            "{NO_SECRET} The server keeps the secret it generated; the reconciler delivers one \
             into Secret {namespace}/{} only when it mints one (kubectl nauthera rotate).",
            reference.name
        )),
        (SecretSource::Generated, SecretsChoice::SecretRef) | (SecretSource::Provided, _) => {
            spec.secret = Some(ClientSecret {
                secret_ref: Some(team_secret.clone()),
                ..ClientSecret::default()
            });
            comment.push(expects);
        }
        (SecretSource::None, _) => {}
    }
    let has_secret = source != SecretSource::None;
    let mut resource = OIDCClient::new(&reference.name, spec);
    resource.metadata = metadata(
        &reference.name,
        namespace,
        &client.revision,
        has_secret,
        options,
    );
    Ok(Manifest {
        kind: Kind::OidcClient,
        namespace: namespace.to_owned(),
        name: reference.name.clone(),
        comment,
        yaml: object(&resource)?,
    })
}

/// The manifests as one YAML stream, each after `---` and its comment.
pub fn render(manifests: &[Manifest]) -> String {
    let mut out = String::new();
    for manifest in manifests {
        out.push_str("---\n");
        for line in &manifest.comment {
            for wrapped in wrap(line, 98) {
                out.push_str("# ");
                out.push_str(&wrapped);
                out.push('\n');
            }
        }
        out.push_str(manifest.yaml.trim_start_matches("---\n"));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// A comment line broken at spaces to fit `width`.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests;
