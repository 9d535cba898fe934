use nauthera_client::convert::{
    branding_document, comparable_client_spec, comparable_identity_provider_spec,
    diff_branding_document, diff_client, diff_identity_provider, diff_organization,
    organization_spec,
};
use nauthera_proto::v1::client_spec;

use super::*;

const ISSUER: &str = "https://login.example.com/acme";
const TEAM_SECRET: &str = "a-team-secret-never-exported";
const UPSTREAM_SECRET: &str = "an-upstream-secret-never-exported";

fn reference(namespace: &str, name: &str) -> Option<v1::ObjectRef> {
    Some(v1::ObjectRef {
        issuer: ISSUER.into(),
        namespace: namespace.into(),
        name: name.into(),
    })
}

fn written() -> Option<v1::WriteInfo> {
    Some(v1::WriteInfo {
        manager: String::new(),
        actor: "user:alice@example.com".into(),
        time: None,
        generation: 0,
    })
}

fn client(namespace: &str, name: &str, secret: Option<client_spec::Secret>) -> v1::Client {
    v1::Client {
        r#ref: reference(namespace, name),
        organization: "acme".into(),
        client_id: format!("id-{name}"),
        spec: Some(v1::ClientSpec {
            display_name: "Web".into(),
            redirect_uris: vec!["https://app.example.com/cb".into()],
            post_logout_redirect_uris: vec!["https://app.example.com/bye".into()],
            grant_types: vec!["authorization_code".into(), "refresh_token".into()],
            response_types: vec!["code".into()],
            scopes: vec!["openid".into(), "email".into()],
            token_endpoint_auth_method: "client_secret_basic".into(),
            require_pkce: true,
            secret,
            branding_ref: "blue".into(),
        }),
        revision: format!("r-{name}"),
        generation_in_force: 0,
        last_write: written(),
        secret_set_at: None,
    }
}

fn generated() -> Option<client_spec::Secret> {
    Some(client_spec::Secret::GenerateSecret(true))
}

fn provided() -> Option<client_spec::Secret> {
    // The server never returns a provided secret; a test that it would not leak if it did.
    Some(client_spec::Secret::ProvidedSecret(TEAM_SECRET.into()))
}

fn public_client(namespace: &str, name: &str) -> v1::Client {
    let mut client = client(namespace, name, None);
    if let Some(spec) = &mut client.spec {
        spec.token_endpoint_auth_method = "none".into();
    }
    client
}

fn branding(namespace: &str, name: &str) -> v1::Branding {
    v1::Branding {
        r#ref: reference(namespace, name),
        organization: "acme".into(),
        document: Some(v1::BrandingDocument {
            logo: b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
            logo_media_type: "image/png".into(),
            colors: [("primary".to_owned(), "#0000ff".to_owned())].into(),
            texts: [("title".to_owned(), "Welcome".to_owned())].into(),
            custom_css: "body { margin: 0 }".into(),
        }),
        revision: format!("r-{name}"),
        generation_in_force: 0,
        last_write: written(),
    }
}

fn identity_provider(
    namespace: &str,
    name: &str,
    kind: v1::IdentityProviderKind,
) -> v1::IdentityProvider {
    v1::IdentityProvider {
        r#ref: reference(namespace, name),
        organization: "acme".into(),
        spec: Some(v1::IdentityProviderSpec {
            kind: kind.into(),
            display_name: "GitHub".into(),
            upstream_url: String::new(),
            upstream_client_id: "gh-client".into(),
            upstream_client_secret: UPSTREAM_SECRET.into(),
            scopes: vec!["read:user".into()],
            claim_mapping: [("email".to_owned(), "mail".to_owned())].into(),
        }),
        revision: format!("r-{name}"),
        generation_in_force: 0,
        last_write: written(),
    }
}

fn organization(slug: &str, namespace: &str) -> v1::Organization {
    v1::Organization {
        slug: slug.into(),
        spec: Some(v1::OrganizationSpec {
            issuer: format!("https://login.example.com/{slug}"),
            display_name: "Acme".into(),
            branding: Some(v1::BrandingDocument {
                colors: [("accent".to_owned(), "#ff0000".to_owned())].into(),
                ..Default::default()
            }),
            fapi_mode: v1::FapiMode::Off.into(),
        }),
        revision: format!("r-{slug}"),
        generation_in_force: 0,
        last_write: written(),
        namespace: namespace.into(),
    }
}

fn only(held: Held, options: &Options) -> Manifest {
    let exported = manifests(&held, options).unwrap();
    assert_eq!(exported.manifests.len(), 1, "{:?}", exported.manifests);
    exported.manifests.into_iter().next().unwrap()
}

fn parsed<T: serde::de::DeserializeOwned>(manifest: &Manifest) -> T {
    serde_saphyr::from_str(&manifest.yaml).unwrap()
}

#[test]
fn a_client_with_a_generated_secret_is_identical_to_what_the_server_holds() {
    let held = client("team-a", "web", generated());
    let manifest = only(
        Held {
            clients: vec![held.clone()],
            ..Held::default()
        },
        &Options::default(),
    );
    let resource: OIDCClient = parsed(&manifest);
    assert_eq!(resource.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(resource.metadata.name.as_deref(), Some("web"));
    assert_eq!(resource.metadata.annotations, None);
    assert_eq!(resource.spec.issuer, ISSUER);
    assert_eq!(resource.spec.management_policy, ManagementPolicy::Observe);
    assert_eq!(resource.spec.deletion_policy, DeletionPolicy::Orphan);
    let secret = resource.spec.secret.clone().unwrap();
    assert!(secret.generate && secret.secret_ref.is_none());
    assert_eq!(resource.spec.branding_ref.as_ref().unwrap().name, "blue");
    assert_eq!(
        diff_client(
            &comparable_client_spec(&resource.spec),
            held.spec.as_ref().unwrap()
        ),
        Vec::<String>::new()
    );
    assert!(
        manifest
            .comment
            .iter()
            .any(|line| line.contains("No secret was exported"))
    );
    assert!(!manifest.yaml.contains("status"), "{}", manifest.yaml);
    assert!(
        manifest
            .yaml
            .starts_with("apiVersion: nauthera.io/v1alpha1\nkind: OIDCClient\n"),
        "{}",
        manifest.yaml
    );
    assert!(
        manifest.yaml.contains("spec:\n  issuer: "),
        "the resource's order: {}",
        manifest.yaml
    );
}

#[test]
fn a_provided_secret_becomes_a_placeholder_and_is_never_written() {
    let held = client("team-a", "api", provided());
    let manifest = only(
        Held {
            clients: vec![held.clone()],
            ..Held::default()
        },
        &Options::default(),
    );
    let resource: OIDCClient = parsed(&manifest);
    let secret_ref = resource.spec.secret.clone().unwrap().secret_ref.unwrap();
    assert_eq!(secret_ref.name, "api-client-secret");
    assert_eq!(secret_ref.key, "clientSecret");
    assert_eq!(
        diff_client(
            &comparable_client_spec(&resource.spec),
            held.spec.as_ref().unwrap()
        ),
        Vec::<String>::new()
    );
    let comment = manifest.comment.join(" ");
    assert!(comment.contains("team-a/api-client-secret"), "{comment}");
    assert!(!render(&[manifest]).contains(TEAM_SECRET));
}

#[test]
fn secret_ref_turns_a_generated_secret_into_a_placeholder_which_differs_in_how_it_is_made() {
    let held = client("team-a", "web", generated());
    let options = Options {
        secrets: SecretsChoice::SecretRef,
        ..Options::default()
    };
    let manifest = only(
        Held {
            clients: vec![held.clone()],
            ..Held::default()
        },
        &options,
    );
    let resource: OIDCClient = parsed(&manifest);
    let secret = resource.spec.secret.clone().unwrap();
    assert!(!secret.generate);
    assert_eq!(secret.secret_ref.unwrap().name, "web-client-secret");
    assert_eq!(
        diff_client(
            &comparable_client_spec(&resource.spec),
            held.spec.as_ref().unwrap()
        ),
        ["spec.secret"]
    );
}

#[test]
fn manage_adopts_the_revision_and_keeps_the_secret_where_there_is_one() {
    let options = Options {
        manage: true,
        ..Options::default()
    };
    let exported = manifests(
        &Held {
            clients: vec![
                client("team-a", "web", generated()),
                public_client("team-a", "spa"),
            ],
            brandings: vec![branding("team-a", "blue")],
            ..Held::default()
        },
        &options,
    )
    .unwrap();
    let annotations = |name: &str| {
        let manifest = exported.manifests.iter().find(|m| m.name == name).unwrap();
        assert!(
            !manifest.yaml.contains("managementPolicy"),
            "Manage is the default"
        );
        let object: serde_json::Value = serde_saphyr::from_str(&manifest.yaml).unwrap();
        let meta: ObjectMeta = serde_json::from_value(object["metadata"].clone()).unwrap();
        meta.annotations.unwrap_or_default()
    };
    let web = annotations("web");
    assert_eq!(web[ADOPT_ANNOTATION], "r-web");
    assert_eq!(web[ADOPT_SECRET_ANNOTATION], "Keep");
    let spa = annotations("spa");
    assert_eq!(spa[ADOPT_ANNOTATION], "r-spa");
    assert!(!spa.contains_key(ADOPT_SECRET_ANNOTATION));
    assert!(!annotations("blue").contains_key(ADOPT_SECRET_ANNOTATION));
}

#[test]
fn an_identity_provider_expects_its_upstream_secret_and_never_shows_it() {
    let held = identity_provider("team-a", "github", v1::IdentityProviderKind::Github);
    let manifest = only(
        Held {
            identity_providers: vec![held.clone()],
            ..Held::default()
        },
        &Options::default(),
    );
    let resource: IdentityProvider = parsed(&manifest);
    assert_eq!(
        resource.spec.secret_ref.as_ref().unwrap().name,
        "github-upstream-client-secret"
    );
    assert_eq!(resource.spec.client_id.as_deref(), Some("gh-client"));
    let mut server_view = held.spec.clone().unwrap();
    server_view.upstream_client_secret.clear();
    assert_eq!(
        diff_identity_provider(
            &comparable_identity_provider_spec(&resource.spec),
            &server_view
        ),
        Vec::<String>::new()
    );
    assert!(!render(&[manifest]).contains(UPSTREAM_SECRET));

    let saml = only(
        Held {
            identity_providers: vec![identity_provider(
                "team-a",
                "corp",
                v1::IdentityProviderKind::Saml,
            )],
            ..Held::default()
        },
        &Options::default(),
    );
    assert!(parsed::<IdentityProvider>(&saml).spec.secret_ref.is_none());
}

#[test]
fn a_branding_and_an_organization_are_identical_to_what_the_server_holds() {
    let held_branding = branding("team-a", "blue");
    let held_organization = organization("acme", "platform");
    let exported = manifests(
        &Held {
            brandings: vec![held_branding.clone()],
            organizations: vec![held_organization.clone()],
            ..Held::default()
        },
        &Options::default(),
    )
    .unwrap();
    let branding: Branding = parsed(&exported.manifests[1]);
    assert_eq!(
        diff_branding_document(
            &branding_document(&branding.spec.branding).unwrap(),
            held_branding.document.as_ref().unwrap()
        ),
        Vec::<String>::new()
    );
    let organization: Organization = parsed(&exported.manifests[0]);
    assert_eq!(organization.metadata.namespace.as_deref(), Some("platform"));
    assert_eq!(organization.metadata.name.as_deref(), Some("acme"));
    assert_eq!(organization.spec.slug, "acme");
    assert_eq!(
        diff_organization(
            &organization_spec(&organization.spec).unwrap(),
            held_organization.spec.as_ref().unwrap()
        ),
        Vec::<String>::new()
    );
}

#[test]
fn an_organization_no_manifest_declared_needs_the_organization_namespace() {
    let held = Held {
        organizations: vec![organization("acme", ""), organization("globex", "platform")],
        ..Held::default()
    };
    let error = manifests(&held, &Options::default()).unwrap_err();
    assert!(
        error.to_string().contains("--organization-namespace"),
        "{error}"
    );
    assert!(error.to_string().contains("acme"), "{error}");
    let options = Options {
        organization_namespace: Some("tenants".into()),
        ..Options::default()
    };
    let exported = manifests(&held, &options).unwrap();
    let places: Vec<_> = exported
        .manifests
        .iter()
        .map(|m| format!("{}/{}", m.namespace, m.name))
        .collect();
    assert_eq!(places, ["platform/globex", "tenants/acme"]);
}

#[test]
fn manifests_come_in_the_order_they_apply() {
    let held = Held {
        clients: vec![
            client("team-b", "a", generated()),
            client("team-a", "z", generated()),
        ],
        identity_providers: vec![identity_provider(
            "team-a",
            "gh",
            v1::IdentityProviderKind::Github,
        )],
        brandings: vec![branding("team-b", "blue")],
        organizations: vec![organization("acme", "platform")],
    };
    let exported = manifests(&held, &Options::default()).unwrap();
    let order: Vec<_> = exported
        .manifests
        .iter()
        .map(|m| format!("{} {}/{}", kind_name(m.kind), m.namespace, m.name))
        .collect();
    assert_eq!(
        order,
        [
            "Organization platform/acme",
            "Branding team-b/blue",
            "IdentityProvider team-a/gh",
            "OIDCClient team-a/z",
            "OIDCClient team-b/a",
        ]
    );
}

#[test]
fn server_namespaces_are_mapped_back_and_other_clusters_are_skipped_and_counted() {
    let held = Held {
        clients: vec![
            client("prod-eu/team-a", "web", generated()),
            client("prod-us/team-a", "web", generated()),
        ],
        organizations: vec![organization("acme", "prod-us/platform")],
        ..Held::default()
    };
    let options = Options {
        mapping: NamespaceMapping::for_cluster(Some("prod-eu"), None),
        ..Options::default()
    };
    let exported = manifests(&held, &options).unwrap();
    assert_eq!(exported.manifests.len(), 1);
    assert_eq!(exported.manifests[0].namespace, "team-a");
    assert_eq!(exported.other_clusters, 2);

    // Without a mapping, a server namespace no Kubernetes namespace can have is another
    // cluster's.
    let exported = manifests(&held, &Options::default()).unwrap();
    assert_eq!(exported.manifests.len(), 0);
    assert_eq!(exported.other_clusters, 3);
}

#[test]
fn the_stream_is_separated_commented_and_reads_back_as_the_resources() {
    let exported = manifests(
        &Held {
            clients: vec![
                client("team-a", "web", generated()),
                client("team-a", "api", provided()),
            ],
            ..Held::default()
        },
        &Options::default(),
    )
    .unwrap();
    let yaml = render(&exported.manifests);
    assert_eq!(yaml.matches("---\n").count(), 2, "{yaml}");
    assert!(
        yaml.starts_with("---\n# OIDCClient team-a/api: revision r-api"),
        "{yaml}"
    );
    assert!(!yaml.contains("status"), "{yaml}");
    assert!(!yaml.contains(TEAM_SECRET), "{yaml}");
    for (document, manifest) in yaml.split("---\n").skip(1).zip(&exported.manifests) {
        let read: OIDCClient = serde_saphyr::from_str(document).unwrap();
        assert_eq!(read, parsed::<OIDCClient>(manifest));
    }
}

#[test]
fn an_object_this_version_cannot_express_is_left_out_and_named() {
    let mut odd = client("team-a", "odd", generated());
    if let Some(spec) = &mut odd.spec {
        spec.grant_types = vec!["urn:example:new-grant".into()];
    }
    let exported = manifests(
        &Held {
            clients: vec![odd, client("team-a", "web", generated())],
            ..Held::default()
        },
        &Options::default(),
    )
    .unwrap();
    assert_eq!(exported.manifests.len(), 1);
    assert_eq!(exported.unconvertible.len(), 1);
    assert!(exported.unconvertible[0].contains("OIDCClient team-a/odd"));
}
