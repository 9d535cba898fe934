//! Identities and authorization: bearer tokens name users and service accounts, and requests
//! are allowed by evaluating the RBAC objects in the store, the way the RBAC authorizer does.

use std::collections::HashMap;

use serde_json::Value;

use crate::registry::ResourceKey;
use crate::store::Store;

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    pub fn user(name: &str, groups: &[&str]) -> Self {
        let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        Self {
            name: name.to_owned(),
            groups,
        }
    }

    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    pub fn is_superuser(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// The audience of the emulator's API (the API server's default `--api-audiences`, its issuer).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// An object a token is bound to: the token is valid while it exists with this uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub resource: ResourceKey,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What a bearer token stands for and the limits on it. Tokens the test helpers mint have
/// none; those of the TokenRequest API expire, name their audiences and are bound to their
/// ServiceAccount (and any object the request named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub user: UserInfo,
    /// Unix seconds after which the token no longer authenticates.
    pub expires: Option<i64>,
    /// Empty: any; otherwise the API's audience must be among them.
    pub audiences: Vec<String>,
    pub bindings: Vec<Binding>,
}

impl Credential {
    pub fn unlimited(user: UserInfo) -> Self {
        Self {
            user,
            expires: None,
            audiences: Vec::new(),
            bindings: Vec::new(),
        }
    }

    /// Whether the token is valid at `now` (Unix seconds) for the API, its bound objects
    /// aside.
    pub fn valid_at(&self, now: i64) -> bool {
        self.expires.is_none_or(|expires| now < expires)
            && (self.audiences.is_empty() || self.audiences.iter().any(|a| a == API_AUDIENCE))
    }

    /// Whether every object the token is bound to still exists as the same object.
    pub fn bindings_hold(&self, store: &Store) -> bool {
        self.bindings.iter().all(|b| {
            store
                .get(&b.resource, &b.namespace, &b.name)
                .is_some_and(|live| live.uid() == b.uid)
        })
    }
}

/// Bearer tokens and what they stand for. Tokens never appear in Debug output.
#[derive(Default)]
pub struct Tokens {
    by_token: HashMap<String, Credential>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("count", &self.by_token.len())
            .finish()
    }
}

impl Tokens {
    pub fn insert(&mut self, token: String, user: UserInfo) {
        self.insert_credential(token, Credential::unlimited(user));
    }

    pub fn insert_credential(&mut self, token: String, credential: Credential) {
        self.by_token.insert(token, credential);
    }

    pub fn credential(&self, token: &str) -> Option<&Credential> {
        self.by_token.get(token)
    }
}

/// What a request asks to do, in RBAC terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl Attributes {
    fn resource_with_subresource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// The strings of a rule's list field.
fn strings<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a str> {
    value[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The items of a list.
fn items(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_array().into_iter().flatten()
}

fn contains_or_star(value: &Value, key: &str, wanted: &str) -> bool {
    strings(value, key).any(|item| item == "*" || item == wanted)
}

/// Whether one PolicyRule allows the request. Every request is authorized, so nothing here
/// copies a rule.
pub fn rule_allows(rule: &Value, attributes: &Attributes) -> bool {
    if !contains_or_star(rule, "verbs", &attributes.verb)
        || !contains_or_star(rule, "apiGroups", &attributes.group)
    {
        return false;
    }
    let resource_ok = strings(rule, "resources").any(|r| {
        if r == "*" {
            return true;
        }
        match r.split_once('/') {
            None => attributes.subresource.is_empty() && r == attributes.resource,
            Some((resource, subresource)) => {
                !attributes.subresource.is_empty()
                    && subresource == attributes.subresource
                    && (resource == "*" || resource == attributes.resource)
            }
        }
    });
    if !resource_ok {
        return false;
    }
    let mut names = strings(rule, "resourceNames").peekable();
    names.peek().is_none()
        || (!attributes.name.is_empty() && names.any(|name| name == attributes.name))
}

fn subject_matches(subject: &Value, user: &UserInfo, binding_namespace: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => name == user.name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let namespace = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            user.name
                .strip_prefix("system:serviceaccount:")
                .and_then(|rest| rest.split_once(':'))
                == Some((namespace, name))
        }
        _ => false,
    }
}

fn key(group: &str, plural: &str) -> ResourceKey {
    ResourceKey {
        group: group.to_owned(),
        plural: plural.to_owned(),
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";

/// Why a request is allowed, in the RBAC authorizer's words, or `None` when it is not.
pub fn authorize(store: &Store, user: &UserInfo, attributes: &Attributes) -> Option<String> {
    if user.is_superuser() {
        return Some("allowed by the system:masters group".into());
    }
    let allows = |role_kind: &str, role_namespace: &str, role_name: &str| -> bool {
        let role = match role_kind {
            "ClusterRole" => store.get(&key(RBAC, "clusterroles"), "", role_name),
            "Role" => store.get(&key(RBAC, "roles"), role_namespace, role_name),
            _ => None,
        };
        role.is_some_and(|role| {
            items(&role.value["rules"]).any(|rule| rule_allows(rule, attributes))
        })
    };
    let check = |binding: &Value, binding_kind: &str, binding_namespace: &str| -> Option<String> {
        let subjects = binding["subjects"].as_array()?;
        let subject = subjects
            .iter()
            .find(|s| subject_matches(s, user, binding_namespace))?;
        let role_kind = binding
            .pointer("/roleRef/kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let role_name = binding
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        allows(role_kind, binding_namespace, role_name).then(|| {
            let binding_name = binding.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            let place = if binding_namespace.is_empty() { String::new() } else { format!(" in namespace {binding_namespace:?}") };
            format!(
                "RBAC: allowed by {binding_kind} {binding_name:?} of {role_kind} {role_name:?} to {} {:?}{place}",
                subject["kind"].as_str().unwrap_or_default(),
                subject["name"].as_str().unwrap_or_default(),
            )
        })
    };
    for binding in store.list(&key(RBAC, "clusterrolebindings"), None, None) {
        if let Some(reason) = check(&binding.value, "ClusterRoleBinding", "") {
            return Some(reason);
        }
    }
    if !attributes.namespace.is_empty() {
        for binding in store.list(
            &key(RBAC, "rolebindings"),
            Some(&attributes.namespace),
            None,
        ) {
            if let Some(reason) = check(&binding.value, "RoleBinding", &attributes.namespace) {
                return Some(reason);
            }
        }
    }
    None
}

/// The API server's message for a denied request.
pub fn forbidden_message(user: &UserInfo, attributes: &Attributes) -> String {
    let subject = if attributes.name.is_empty() {
        attributes.resource_with_subresource()
    } else {
        format!(
            "{} {:?}",
            attributes.resource_with_subresource(),
            attributes.name
        )
    };
    let place = if attributes.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace {:?}", attributes.namespace)
    };
    format!(
        "{subject} is forbidden: User {:?} cannot {} resource {:?} in API group {:?} {place}",
        user.name,
        attributes.verb,
        attributes.resource_with_subresource(),
        attributes.group
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attributes(verb: &str, resource: &str, subresource: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: "nauthera.io".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: "team".into(),
            name: name.into(),
        }
    }

    #[test]
    fn rules_match_verbs_groups_subresources_and_names() {
        let rule = json!({"apiGroups": ["nauthera.io"], "resources": ["oidcclients/status"], "verbs": ["patch"]});
        assert!(rule_allows(
            &rule,
            &attributes("patch", "oidcclients", "status", "a")
        ));
        assert!(!rule_allows(
            &rule,
            &attributes("patch", "oidcclients", "", "a")
        ));
        let star = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(rule_allows(
            &star,
            &attributes("delete", "oidcclients", "status", "")
        ));
        let named = json!({"apiGroups": ["nauthera.io"], "resources": ["oidcclients"], "verbs": ["get", "list"], "resourceNames": ["a"]});
        assert!(rule_allows(
            &named,
            &attributes("get", "oidcclients", "", "a")
        ));
        assert!(!rule_allows(
            &named,
            &attributes("get", "oidcclients", "", "b")
        ));
        assert!(!rule_allows(
            &named,
            &attributes("list", "oidcclients", "", "")
        ));
    }

    #[test]
    fn credentials_expire_name_audiences_and_follow_their_bound_objects() {
        let user = UserInfo::service_account("ops", "bot");
        assert!(Credential::unlimited(user.clone()).valid_at(i64::MAX));
        let mut credential = Credential {
            expires: Some(1_000),
            audiences: vec![API_AUDIENCE.to_owned(), "vault".to_owned()],
            ..Credential::unlimited(user)
        };
        assert!(credential.valid_at(999));
        assert!(!credential.valid_at(1_000), "expired at its expiry");
        credential.audiences = vec!["vault".to_owned()];
        assert!(!credential.valid_at(999), "not for the API");

        let mut store = Store::default();
        let accounts = key("", "serviceaccounts");
        store.put(
            &accounts,
            json!({"metadata": {"namespace": "ops", "name": "bot", "uid": "u1"}}),
        );
        credential.bindings = vec![Binding {
            resource: accounts.clone(),
            namespace: "ops".into(),
            name: "bot".into(),
            uid: "u1".into(),
        }];
        assert!(credential.bindings_hold(&store));
        store.remove(&accounts, "ops", "bot");
        assert!(!credential.bindings_hold(&store));
        store.put(
            &accounts,
            json!({"metadata": {"namespace": "ops", "name": "bot", "uid": "u2"}}),
        );
        assert!(
            !credential.bindings_hold(&store),
            "a new account is not the old one"
        );
    }

    #[test]
    fn forbidden_message_reads_like_the_api_server() {
        let user = UserInfo::service_account("ops", "bot");
        let message = forbidden_message(&user, &attributes("list", "oidcclients", "", ""));
        assert_eq!(
            message,
            "oidcclients is forbidden: User \"system:serviceaccount:ops:bot\" cannot list resource \"oidcclients\" in API group \"nauthera.io\" in the namespace \"team\""
        );
    }
}
