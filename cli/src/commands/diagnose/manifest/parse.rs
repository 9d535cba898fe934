//! `diagnose -f`'s reading of a manifest: the documents of a YAML stream, each parsed as far as
//! it goes into the typed resource, with what the API server, the reconciler or the server would
//! refuse of it before any check compares it with the cluster.

use nauthera_shared::branding;
use nauthera_shared::resources::{
    Branding, IdentityProvider, OIDCClient, Organization, admission_violations,
};
use serde_json::Value;

use crate::cli::kinds::Kind;
use crate::model::policies::BrokenPolicy;
use crate::model::view::ResourceView;

/// One document of the file, parsed as far as it goes.
#[derive(Clone, Debug)]
pub struct ParsedDocument {
    /// The file it comes from (`-` for standard input).
    pub file: String,
    /// 1-based position in the file.
    pub index: usize,
    pub api_version: String,
    pub kind_name: String,
    pub kind: Option<Kind>,
    pub name: String,
    pub namespace: String,
    /// The typed resource, or why it does not deserialize.
    pub view: Result<ResourceView, String>,
    /// What the API server would refuse: the CRD's schema and rules, from the CRD itself.
    pub admission: Vec<String>,
    /// What the reconciler or the server would refuse of a manifest the API server admits.
    pub rule_violations: Vec<String>,
    /// An OIDCClient's `spec.brandingRef`.
    pub branding_ref: Option<String>,
    /// The typed resource as JSON, defaults filled in: what the API server would store and
    /// the policies judge.
    pub object: Option<Value>,
    /// 0-based position among every document checked (the order `kubectl apply` creates them).
    pub position: usize,
    /// A ClientPolicy of the files, compiled as the reconciler compiles it: its checks, or why
    /// the reconciler refuses it (`None` for the other kinds).
    pub client_policy: Option<Result<PolicyCompiled, BrokenPolicy>>,
}

/// A ClientPolicy that compiles: what it generates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyCompiled {
    /// The rules checked on one object, as `rule (kind)`.
    pub checks: Vec<String>,
    /// The ValidatingAdmissionPolicy generated from it, if any check is one of one object.
    pub admission_policy: Option<String>,
}

/// The documents of a YAML stream (a `List` is opened into its items); empty documents are
/// skipped.
pub fn split_documents(text: &str) -> Result<Vec<Value>, String> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|error| format!("the file is not valid YAML: {error}"))?;
    let mut out = Vec::new();
    for document in documents {
        match document {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                out.extend(
                    map.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Parses one document into a typed resource and checks its schema and rules.
pub fn parse_document(
    file: &str,
    index: usize,
    document: &Value,
    default_namespace: &str,
) -> ParsedDocument {
    let text = |pointer: &str| text_at(document, pointer);
    let api_version = text("/apiVersion");
    let kind_name = text("/kind");
    let name = text("/metadata/name");
    let namespace = Some(text("/metadata/namespace"))
        .filter(|namespace| !namespace.is_empty())
        .unwrap_or_else(|| default_namespace.to_owned());
    let nauthera =
        api_version == format!("{}/{}", nauthera_shared::GROUP, nauthera_shared::VERSION);
    let kind = Kind::ALL
        .into_iter()
        .find(|kind| nauthera && kind.as_str() == kind_name);
    let mut parsed = ParsedDocument {
        file: file.to_owned(),
        index,
        api_version,
        kind_name,
        kind,
        name,
        namespace: namespace.clone(),
        view: Err(String::new()),
        admission: Vec::new(),
        rule_violations: Vec::new(),
        branding_ref: None,
        object: None,
        position: 0,
        client_policy: None,
    };
    if nauthera && parsed.kind_name == "ClientPolicy" {
        // Cluster-scoped: no namespace.
        parsed.namespace = String::new();
        parsed.view = Err("a ClientPolicy".to_owned());
        parsed.admission = admission(document);
        parsed.client_policy = Some(compile_client_policy(document));
        return parsed;
    }
    let Some(kind) = kind else {
        parsed.view = Err("not a nauthera resource".to_owned());
        return parsed;
    };
    let mut document = document.clone();
    if let Some(metadata) = document.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("namespace".to_owned(), Value::String(namespace));
    }
    parsed.admission = admission(&document);
    parsed.view = typed_view(kind, document, &mut parsed).map_err(|error| error.to_string());
    parsed
}

/// What the API server refuses of the document: the CRD's schema and rules.
fn admission(document: &Value) -> Vec<String> {
    admission_violations(document, None)
        .iter()
        .map(|violation| {
            format!("{violation}; the API server refuses the manifest (kubectl validates strictly)")
        })
        .collect()
}

/// The document as the typed resource of its kind, noting on `parsed` what the reconciler or the
/// server would refuse of it, its Branding and the object as the API server would store it.
fn typed_view(
    kind: Kind,
    document: Value,
    parsed: &mut ParsedDocument,
) -> Result<ResourceView, serde_json::Error> {
    match kind {
        Kind::OidcClient => serde_json::from_value::<OIDCClient>(document).map(|client| {
            parsed.rule_violations = server_client_rules(&client);
            parsed.rule_violations.extend(renderable_template(&client));
            parsed.branding_ref = client.spec.branding_ref.as_ref().map(|r| r.name.clone());
            parsed.object = serde_json::to_value(&client).ok();
            ResourceView::of_client(&client)
        }),
        Kind::Branding => serde_json::from_value::<Branding>(document).map(|branding| {
            parsed.rule_violations = encodable(&branding.spec.branding, "spec.branding");
            parsed.object = serde_json::to_value(&branding).ok();
            ResourceView::of_branding(&branding)
        }),
        Kind::IdentityProvider => {
            serde_json::from_value::<IdentityProvider>(document).map(|provider| {
                parsed.object = serde_json::to_value(&provider).ok();
                ResourceView::of_identity_provider(&provider)
            })
        }
        Kind::Organization => {
            serde_json::from_value::<Organization>(document).map(|organization| {
                if let Some(content) = &organization.spec.branding {
                    parsed.rule_violations = encodable(content, "spec.branding");
                }
                ResourceView::of_organization(&organization)
            })
        }
    }
}

/// A ClientPolicy compiled as the reconciler compiles it (`nauthera_shared::policy`): the same
/// verdict, reason, cause and words as its `Ready` condition once applied.
fn compile_client_policy(document: &Value) -> Result<PolicyCompiled, BrokenPolicy> {
    use nauthera_shared::policy::CompiledPolicy;
    use nauthera_shared::policy::admission::{admission_name, admission_objects};
    use nauthera_shared::resources::ClientPolicy;
    let typed: ClientPolicy =
        serde_json::from_value(document.clone()).map_err(|error| BrokenPolicy {
            policy: text_at(document, "/metadata/name"),
            reason: "Unreadable".to_owned(),
            cause: "schema".to_owned(),
            problem: format!("does not match the ClientPolicy schema: {error}"),
        })?;
    let compiled = CompiledPolicy::compile(&typed).map_err(|error| BrokenPolicy::of(&error))?;
    Ok(PolicyCompiled {
        checks: compiled
            .checks
            .iter()
            .map(|check| format!("{} ({})", check.rule, check.kind.as_str()))
            .collect(),
        admission_policy: admission_objects(&typed, &compiled)
            .map(|_| admission_name(&compiled.name)),
    })
}

fn text_at(document: &Value, pointer: &str) -> String {
    document
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// What the server refuses of a client the API server admits: a name it keeps for itself.
fn server_client_rules(client: &OIDCClient) -> Vec<String> {
    let name = client.metadata.name.as_deref().unwrap_or_default();
    if nauthera_shared::is_reserved_client_name(name) {
        vec![format!(
            "metadata.name `{name}` is a client name nauthera-server keeps for itself: it \
             refuses the client (RESERVED_NAME); choose another name"
        )]
    } else {
        Vec::new()
    }
}

/// A `spec.secret.template` whose files do not render (a syntax error, an unknown name), which
/// the reconciler refuses without sending anything: rendered here with placeholder facts, so
/// nothing of a real secret can show.
fn renderable_template(client: &OIDCClient) -> Vec<String> {
    let Some(template) = client
        .spec
        .secret
        .as_ref()
        .filter(|secret| secret.generate)
        .and_then(|secret| secret.template.as_ref())
    else {
        return Vec::new();
    };
    nauthera_shared::secret_render::check(template, &client.spec.issuer)
        .err()
        .map(|problem| {
            vec![format!(
                "{problem}; the reconciler refuses it (Refused, invalid_secret_template) and \
                 sends nothing"
            )]
        })
        .unwrap_or_default()
}

/// A branding the reconciler cannot encode, which it refuses without sending it.
fn encodable(content: &nauthera_shared::resources::SignInBranding, field: &str) -> Vec<String> {
    branding::encode(content)
        .err()
        .map(|error| vec![format!("{field}.{error}; the reconciler refuses it")])
        .unwrap_or_default()
}
