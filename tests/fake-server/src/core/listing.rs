//! The listings of whole objects (`ListClients`, `ListBrandings`, `ListIdentityProviders`,
//! `ListOrganizations`): read-only, so nothing is audited; the same grant as a get of each
//! object; paged by the key of a page's last object, so that a write between pages neither
//! repeats nor skips an object; and only the objects of one page are turned into messages, so a
//! page costs the same at 100,000 objects as at ten.

use std::ops::Bound;

use nauthera_proto::v1::{
    self, ChangeHint, ListBrandingsResponse, ListClientsResponse, ListIdentityProvidersResponse,
    ListObjectsRequest, ListOrganizationsResponse,
};
use nauthera_shared::grants::{self, GrantDecision, GrantEntry, Operation};

use super::{Caller, Core, denial};
use crate::kinds::{
    StoredBranding, StoredClient, StoredIdentityProvider, StoredKind, StoredOrganization,
};
use crate::refusal::Refusal;
use crate::state::ObjectKey;

/// The page size when a request names none, and the largest one served.
const DEFAULT_PAGE_SIZE: usize = 500;
const MAX_PAGE_SIZE: usize = 5000;

/// A kind whose objects are listed: the namespace a listing selects it by and its response.
pub trait Listed: StoredKind {
    type Page;

    /// The Kubernetes namespace of the manifest that declared it.
    fn declared_namespace<'a>(&'a self, key: &'a ObjectKey) -> &'a str {
        &key.1
    }

    /// The namespace its grant is checked for, as a get checks it.
    fn granted_namespace<'a>(&'a self, key: &'a ObjectKey) -> Option<&'a str> {
        Some(&key.1)
    }

    fn page(objects: Vec<Self::Message>, next_page_token: String, hint: ChangeHint) -> Self::Page;
}

impl Listed for StoredClient {
    type Page = ListClientsResponse;

    fn page(clients: Vec<v1::Client>, next_page_token: String, hint: ChangeHint) -> Self::Page {
        ListClientsResponse {
            clients,
            next_page_token,
            change_hint: Some(hint),
        }
    }
}

impl Listed for StoredBranding {
    type Page = ListBrandingsResponse;

    fn page(brandings: Vec<v1::Branding>, next_page_token: String, hint: ChangeHint) -> Self::Page {
        ListBrandingsResponse {
            brandings,
            next_page_token,
            change_hint: Some(hint),
        }
    }
}

impl Listed for StoredIdentityProvider {
    type Page = ListIdentityProvidersResponse;

    fn page(
        identity_providers: Vec<v1::IdentityProvider>,
        next_page_token: String,
        hint: ChangeHint,
    ) -> Self::Page {
        ListIdentityProvidersResponse {
            identity_providers,
            next_page_token,
            change_hint: Some(hint),
        }
    }
}

impl Listed for StoredOrganization {
    type Page = ListOrganizationsResponse;

    fn declared_namespace<'a>(&'a self, _key: &'a ObjectKey) -> &'a str {
        &self.namespace
    }

    /// A get of an organization names its slug alone.
    fn granted_namespace<'a>(&'a self, _key: &'a ObjectKey) -> Option<&'a str> {
        None
    }

    fn page(
        organizations: Vec<v1::Organization>,
        next_page_token: String,
        hint: ChangeHint,
    ) -> Self::Page {
        ListOrganizationsResponse {
            organizations,
            next_page_token,
            change_hint: Some(hint),
        }
    }
}

impl Core {
    /// One page of the objects of kind `K` the caller's grant covers, after the filters.
    pub fn list<K: Listed>(
        &self,
        caller: &Caller,
        request: &ListObjectsRequest,
    ) -> Result<K::Page, Refusal> {
        let operation = K::KIND.operation();
        self.require_operation(caller, operation)?;
        self.check_filters(
            caller,
            operation,
            &request.organizations,
            &request.namespaces,
        )?;
        let after = page_key(&request.page_token)?;
        let page_size = match request.page_size as usize {
            0 => DEFAULT_PAGE_SIZE,
            size => size.min(MAX_PAGE_SIZE),
        };
        let start = match &after {
            Some(key) => Bound::Excluded(key),
            None => Bound::Unbounded,
        };
        let mut listed = K::map(&self.objects)
            .range::<ObjectKey, _>((start, Bound::Unbounded))
            .filter(|(key, stored)| {
                let organization = K::organization(key);
                let namespace = stored.declared_namespace(key);
                (request.organizations.is_empty()
                    || request.organizations.iter().any(|o| o == organization))
                    && (request.namespaces.is_empty()
                        || request.namespaces.iter().any(|n| n == namespace))
                    && grants::decide(
                        &self.allowed,
                        &caller.identity,
                        operation,
                        organization,
                        stored.granted_namespace(key),
                    )
                    .is_covered()
            })
            .take(page_size + 1)
            .map(|(key, _)| key);
        let keys: Vec<&ObjectKey> = listed.by_ref().take(page_size).collect();
        let next_page_token = match (listed.next(), keys.last()) {
            (Some(_), Some(last)) => page_token(last),
            _ => String::new(),
        };
        let messages = keys
            .into_iter()
            .filter_map(|key| self.message::<K>(key))
            .collect();
        Ok(K::page(messages, next_page_token, self.history.hint()))
    }

    /// Refuses a filter outside the caller's grant for `operation`, as a get of an object there
    /// would be refused.
    pub(super) fn check_filters(
        &self,
        caller: &Caller,
        operation: Operation,
        organizations: &[String],
        namespaces: &[String],
    ) -> Result<(), Refusal> {
        let own = grants::entries_for(&self.allowed, &caller.identity);
        let granting: Vec<&&GrantEntry> = own
            .iter()
            .filter(|entry| entry.operations.contains(&operation))
            .collect();
        let covers = |list: &dyn Fn(&GrantEntry) -> &Vec<String>, value: &str| {
            granting.iter().any(|entry| {
                list(entry)
                    .iter()
                    .any(|item| item == grants::WILDCARD || item == value)
            })
        };
        for organization in organizations {
            if !covers(&|entry| &entry.organizations, organization) {
                let decision = GrantDecision::OutsideGrant {
                    organization: Some(organization.clone()),
                    namespace: None,
                };
                return Err(denial(&decision, caller));
            }
        }
        for namespace in namespaces {
            if !covers(&|entry| &entry.namespaces, namespace) {
                let decision = GrantDecision::OutsideGrant {
                    organization: None,
                    namespace: Some(namespace.clone()),
                };
                return Err(denial(&decision, caller));
            }
        }
        Ok(())
    }
}

/// The token of the page after `key`: its three parts, hex-encoded, so it is opaque and cannot
/// be confused with a name.
fn page_token(key: &ObjectKey) -> String {
    let joined = format!("{}\u{1f}{}\u{1f}{}", key.0, key.1, key.2);
    joined.bytes().map(|byte| format!("{byte:02x}")).collect()
}

/// The key a page token names; `None` for the first page.
fn page_key(token: &str) -> Result<Option<ObjectKey>, Refusal> {
    if token.is_empty() {
        return Ok(None);
    }
    let invalid = || Refusal::invalid_field("page_token", "not a token this server issued");
    if !token.len().is_multiple_of(2) {
        return Err(invalid());
    }
    let bytes = (0..token.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(token.get(at..at + 2).unwrap_or(""), 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let mut parts = text.split('\u{1f}');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(organization), Some(namespace), Some(name), None) => Ok(Some((
            organization.to_owned(),
            namespace.to_owned(),
            name.to_owned(),
        ))),
        _ => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use nauthera_proto::v1::client_spec;
    use tokio::sync::broadcast;

    use super::*;
    use crate::config::grant_everything;

    const IDENTITY: &str = "dns:nauthera-operator.nauthera.svc";

    /// A server holding `count` clients in one namespace, made by copying one applied client.
    fn holding(count: usize) -> (Core, Caller) {
        let allowed = vec![grant_everything(IDENTITY)];
        let mut core = Core::new("test".into(), allowed.clone(), 16, broadcast::channel(16).0);
        core.seed_organization(
            "acme",
            v1::OrganizationSpec {
                issuer: "https://login.example.com/acme".into(),
                ..Default::default()
            },
        );
        let caller = Caller::from_identities(vec![IDENTITY.into()], &allowed);
        let reference = v1::ObjectRef {
            issuer: "https://login.example.com/acme".into(),
            namespace: "team-a".into(),
            name: "web-0".into(),
        };
        let spec = v1::ClientSpec {
            redirect_uris: vec!["https://app.example.com/callback".into()],
            grant_types: vec!["authorization_code".into()],
            response_types: vec!["code".into()],
            token_endpoint_auth_method: "client_secret_basic".into(),
            secret: Some(client_spec::Secret::GenerateSecret(true)),
            ..Default::default()
        };
        let request = v1::ApplyClientRequest {
            r#ref: Some(reference),
            spec: Some(spec),
            generation: 1,
            manager: "test".into(),
            if_revision: None,
            rotate_secret: false,
        };
        core.apply::<StoredClient>(&caller, request).unwrap();
        let key = ("acme".to_owned(), "team-a".to_owned(), "web-0".to_owned());
        let stored = core.objects.clients[&key].clone();
        for index in 1..count {
            let key = (
                "acme".to_owned(),
                "team-a".to_owned(),
                format!("web-{index}"),
            );
            core.objects.clients.insert(key, stored.clone());
        }
        (core, caller)
    }

    #[test]
    fn a_hundred_thousand_objects_are_walked_page_by_page_at_the_cost_of_a_page() {
        let (core, caller) = holding(100_000);
        let started = Instant::now();
        let mut request = ListObjectsRequest::default();
        let mut listed = 0;
        let mut pages = 0;
        let mut slowest = Duration::ZERO;
        loop {
            let page_started = Instant::now();
            let page = core.list::<StoredClient>(&caller, &request).unwrap();
            slowest = slowest.max(page_started.elapsed());
            listed += page.clients.len();
            pages += 1;
            if page.next_page_token.is_empty() {
                break;
            }
            request.page_token = page.next_page_token;
        }
        assert_eq!(listed, 100_000);
        assert_eq!(pages, 200);
        // A page that walked or cloned the whole map would take a good part of a second in a
        // debug build; one page of 500 takes milliseconds.
        assert!(
            slowest < Duration::from_millis(250),
            "slowest page {slowest:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_page_token_names_the_key_it_was_made_of() {
        let key = ("acme".to_owned(), "team-a".to_owned(), "web".to_owned());
        assert_eq!(page_key(&page_token(&key)).unwrap(), Some(key));
        assert_eq!(page_key("").unwrap(), None);
        assert!(page_key("zz").is_err());
        assert!(page_key("61").is_err());
    }
}
