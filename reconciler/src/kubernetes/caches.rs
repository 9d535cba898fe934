//! Watch caches that reconciles read instead of asking the API server each time, and the keys
//! of a delivered Secret, which its cached summary reads and the delivery writes.

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher;
use nauthera_proto::v1::ObjectKind;
use nauthera_shared::kinds::Kind;
use nauthera_shared::{CLIENT_SECRET_KEY_ANNOTATION, SECRET_SHAPE_ANNOTATION};
use tokio::sync::watch;

use super::uid_key::UidKey;

/// The keys of a Secret delivered without a template (`spec.secret.template`).
pub use nauthera_shared::secret_render::{CLIENT_ID_KEY, CLIENT_SECRET_KEY};

/// What deciding needs of a Secret a generated secret goes into: who owns it, whether it holds
/// a client secret, and its version (an update of it names the version it read). A cached
/// Secret is kept in this form alone: ten thousand whole Secrets, even without their values,
/// held about fifteen MiB. Its texts are boxed (no spare capacity), as there is one per Secret.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretSummary {
    pub resource_version: Option<Box<str>>,
    /// The uids of its owners, 16 bytes each.
    pub owner_uids: Box<[UidKey]>,
    /// Its first owner.
    pub first_owner: Option<OwnerName>,
    /// Whether it holds a non-empty client secret, under the key recorded on it
    /// (`nauthera.io/client-secret-key`; `clientSecret` without).
    pub has_value: bool,
    /// The digest of the template it was written from (`nauthera.io/secret-shape`); `None` for
    /// a Secret of the four keys of no template.
    pub shape: Option<Box<str>>,
    /// The rotation request whose secret it holds (`nauthera.io/rotation-request`).
    pub rotation_request: Option<Box<str>>,
}

impl SecretSummary {
    /// Whether the resource with this uid owns the Secret.
    pub fn owned_by(&self, uid: &str) -> bool {
        self.owner_uids.contains(&UidKey::of(uid))
    }
}

/// An owner of a Secret by kind and name (shown as `Kind/name`). The kind is one of the
/// project's, kept unallocated, but for a Secret somebody else's resource owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerName {
    pub kind: Cow<'static, str>,
    pub name: Box<str>,
}

impl std::fmt::Display for OwnerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

impl From<&Secret> for SecretSummary {
    fn from(secret: &Secret) -> SecretSummary {
        let owners = secret
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default();
        SecretSummary {
            resource_version: secret.metadata.resource_version.as_deref().map(Box::from),
            owner_uids: owners.iter().map(|owner| UidKey::of(&owner.uid)).collect(),
            first_owner: owners.first().map(|owner| OwnerName {
                kind: Kind::ALL
                    .into_iter()
                    .find(|kind| kind.as_str() == owner.kind)
                    .map_or_else(
                        || Cow::Owned(owner.kind.clone()),
                        |kind| kind.as_str().into(),
                    ),
                name: owner.name.as_str().into(),
            }),
            has_value: secret
                .data
                .as_ref()
                .and_then(|data| data.get(client_secret_key(secret)))
                .is_some_and(|value| !value.0.is_empty()),
            shape: annotation(secret, SECRET_SHAPE_ANNOTATION).map(Box::from),
            rotation_request: secret
                .metadata
                .annotations
                .as_ref()
                .and_then(|annotations| {
                    annotations.get(nauthera_shared::ROTATION_REQUEST_ANNOTATION)
                })
                .map(|request| Box::from(request.as_str())),
        }
    }
}

/// The key of a delivered Secret that holds the client secret, as recorded on it.
pub fn client_secret_key(secret: &Secret) -> &str {
    annotation(secret, CLIENT_SECRET_KEY_ANNOTATION).unwrap_or(CLIENT_SECRET_KEY)
}

fn annotation<'a>(secret: &'a Secret, name: &str) -> Option<&'a str> {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(name))
        .map(String::as_str)
}

/// The summaries of one scope's Secrets by namespace, then name: a namespace's name is kept
/// once, not once per Secret.
type ByNamespace = HashMap<Box<str>, HashMap<Box<str>, SecretSummary>>;

/// The Secrets of one watched scope, as its watch last listed and changed them.
#[derive(Debug, Default)]
pub struct SecretSummaries {
    cache: RwLock<Listed>,
    /// The watch was refused (the reconciler's role lost `list`/`watch` on secrets): what the
    /// cache holds may be stale, so reconciles read instead, until a listing succeeds again.
    denied: AtomicBool,
}

#[derive(Debug, Default)]
struct Listed {
    current: ByNamespace,
    /// A listing under way (after a start or a lost watch): it replaces `current` when done.
    listing: Option<ByNamespace>,
    /// The names of the Secrets of `current` by owner: keyed by a digest of the owner's uid and
    /// the namespace, so that no uid is held twice (a uid and a set per Secret cost more than its
    /// summary). Two owners sharing a digest never mix: a lookup keeps only the Secrets whose
    /// summary names the uid.
    by_owner: HashMap<u64, Vec<Box<str>>>,
    owner_keys: RandomState,
}

/// The key of an owner's Secrets in a namespace in [`Listed::by_owner`].
fn owner_key(keys: &RandomState, namespace: &str, uid: UidKey) -> u64 {
    keys.hash_one((namespace, uid))
}

/// Adds a Secret's name to its owner's entry; most owners own one Secret: no spare capacity.
fn index(by_owner: &mut HashMap<u64, Vec<Box<str>>>, key: u64, name: Box<str>) {
    let names = by_owner.entry(key).or_default();
    names.reserve_exact(1);
    names.push(name);
}

impl Listed {
    fn apply(&mut self, secret: &Secret) {
        self.unindex(secret);
        insert(&mut self.current, secret);
        let (Some(namespace), Some(name)) = (&secret.metadata.namespace, &secret.metadata.name)
        else {
            return;
        };
        for owner in secret.metadata.owner_references.iter().flatten() {
            let key = owner_key(&self.owner_keys, namespace, UidKey::of(&owner.uid));
            index(&mut self.by_owner, key, name.as_str().into());
        }
    }

    fn delete(&mut self, secret: &Secret) {
        self.unindex(secret);
        remove(&mut self.current, secret);
    }

    /// Drops the owners the cached copy of this Secret names from the index.
    fn unindex(&mut self, secret: &Secret) {
        let (Some(namespace), Some(name)) = (&secret.metadata.namespace, &secret.metadata.name)
        else {
            return;
        };
        let Some(cached) = self
            .current
            .get(namespace.as_str())
            .and_then(|names| names.get(name.as_str()))
        else {
            return;
        };
        for uid in &cached.owner_uids {
            let key = owner_key(&self.owner_keys, namespace, *uid);
            if let Some(names) = self.by_owner.get_mut(&key) {
                if let Some(at) = names.iter().position(|indexed| **indexed == **name) {
                    names.swap_remove(at);
                }
                if names.is_empty() {
                    self.by_owner.remove(&key);
                }
            }
        }
    }

    fn reindex(&mut self) {
        self.by_owner.clear();
        for (namespace, names) in &self.current {
            for (name, summary) in names {
                for uid in &summary.owner_uids {
                    let key = owner_key(&self.owner_keys, namespace, *uid);
                    index(&mut self.by_owner, key, name.clone());
                }
            }
        }
    }

    /// The names of the Secrets in a namespace that the owner with this uid owns.
    fn owned_by(&self, namespace: &str, uid: &str) -> Vec<String> {
        let Some(names) = self.current.get(namespace) else {
            return Vec::new();
        };
        self.by_owner
            .get(&owner_key(&self.owner_keys, namespace, UidKey::of(uid)))
            .into_iter()
            .flatten()
            .filter(|name| {
                names
                    .get(&***name)
                    .is_some_and(|summary| summary.owned_by(uid))
            })
            .map(|name| name.to_string())
            .collect()
    }
}

fn insert(map: &mut ByNamespace, secret: &Secret) {
    let (Some(namespace), Some(name)) = (&secret.metadata.namespace, &secret.metadata.name) else {
        return;
    };
    // Looked up first, so that a namespace's name is boxed only once.
    let names = match map.get_mut(namespace.as_str()) {
        Some(names) => names,
        None => map.entry(namespace.as_str().into()).or_default(),
    };
    names.insert(name.as_str().into(), SecretSummary::from(secret));
}

fn remove(map: &mut ByNamespace, secret: &Secret) {
    let (Some(namespace), Some(name)) = (&secret.metadata.namespace, &secret.metadata.name) else {
        return;
    };
    if let Some(names) = map.get_mut(namespace.as_str()) {
        names.remove(name.as_str());
        if names.is_empty() {
            map.remove(namespace.as_str());
        }
    }
}

impl SecretSummaries {
    /// Takes in one event of the scope's watch.
    pub fn follow(&self, event: &watcher::Event<Secret>) {
        let Ok(mut cache) = self.cache.write() else {
            return;
        };
        match event {
            watcher::Event::Init => {
                cache.listing = Some(HashMap::new());
            }
            watcher::Event::InitApply(secret) => {
                insert(cache.listing.get_or_insert_default(), secret);
            }
            watcher::Event::InitDone => {
                if let Some(listed) = cache.listing.take() {
                    cache.current = listed;
                    cache.reindex();
                }
                self.denied.store(false, Ordering::Relaxed);
            }
            watcher::Event::Apply(secret) => cache.apply(secret),
            watcher::Event::Delete(secret) => cache.delete(secret),
        }
    }

    /// Marks the watch refused; returns the owners (in a namespace) of the Secrets cached until
    /// then, the first time, so that they are looked at again.
    pub fn deny(&self) -> Vec<(String, OwnerName)> {
        if self.denied.swap(true, Ordering::Relaxed) {
            return Vec::new();
        }
        let Ok(cache) = self.cache.read() else {
            return Vec::new();
        };
        cache
            .current
            .iter()
            .flat_map(|(namespace, names)| {
                names.values().filter_map(|summary| {
                    Some((namespace.to_string(), summary.first_owner.clone()?))
                })
            })
            .collect()
    }

    /// The names of the cached Secrets in a namespace that the owner with this uid owns.
    fn owned_by(&self, namespace: &str, uid: &str) -> Vec<String> {
        if self.denied.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let Ok(cache) = self.cache.read() else {
            return Vec::new();
        };
        cache.owned_by(namespace, uid)
    }

    fn get(&self, namespace: &str, name: &str) -> Option<SecretSummary> {
        if self.denied.load(Ordering::Relaxed) {
            return None;
        }
        self.cache
            .read()
            .ok()?
            .current
            .get(namespace)?
            .get(name)
            .cloned()
    }
}

/// The Secrets this reconciler delivered (those with its managed-by label), as its watches last
/// saw them: one cache per watched scope (all namespaces, or each configured namespace).
#[derive(Clone, Debug, Default)]
pub struct DeliveredSecrets {
    scopes: Vec<Arc<SecretSummaries>>,
}

impl DeliveredSecrets {
    pub fn new(scopes: Vec<Arc<SecretSummaries>>) -> DeliveredSecrets {
        DeliveredSecrets { scopes }
    }

    /// The cached Secret, if a watch has shown it. A miss says nothing: the Secret may be
    /// somebody else's (unlabelled) or not seen yet, so the caller reads it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<SecretSummary> {
        self.scopes
            .iter()
            .find_map(|scope| scope.get(namespace, name))
    }

    /// The delivered Secrets in a namespace that the resource with this uid owns, as the
    /// watches last saw them (none while a watch is refused).
    pub fn owned_by(&self, namespace: &str, uid: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .scopes
            .iter()
            .flat_map(|scope| scope.owned_by(namespace, uid))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Which manifests reference which Secret (`spec.secret.secretRef`, an identity provider's
/// `secretRef`), kept from the manifests' watches so that a changed Secret finds them without a
/// scan.
#[derive(Debug)]
pub struct SecretReferences {
    index: RwLock<References>,
    /// The namespaces where some manifest references a Secret: the only ones whose Secrets are
    /// watched.
    namespaces: watch::Sender<BTreeSet<String>>,
}

impl Default for SecretReferences {
    fn default() -> SecretReferences {
        SecretReferences {
            index: RwLock::default(),
            namespaces: watch::channel(BTreeSet::new()).0,
        }
    }
}

#[derive(Debug, Default)]
struct References {
    /// (namespace, Secret) → the manifests that reference it.
    by_secret: HashMap<(String, String), BTreeSet<(ObjectKind, String)>>,
    /// (kind, namespace, manifest) → the Secret it references.
    by_manifest: HashMap<(ObjectKind, String, String), String>,
    /// namespace → how many manifests in it reference a Secret.
    per_namespace: HashMap<String, usize>,
    /// (namespace, Secret) → its `resourceVersion`, for the Secrets of the watched namespaces.
    versions: HashMap<(String, String), String>,
}

impl SecretReferences {
    /// Records the Secret a manifest references now (or none).
    pub fn record(&self, kind: ObjectKind, namespace: &str, name: &str, secret: Option<&str>) {
        let Ok(mut index) = self.index.write() else {
            return;
        };
        let manifest = (kind, namespace.to_owned(), name.to_owned());
        if index.by_manifest.get(&manifest).map(String::as_str) == secret {
            return;
        }
        if let Some(previous) = index.by_manifest.remove(&manifest) {
            let key = (namespace.to_owned(), previous);
            if let Some(set) = index.by_secret.get_mut(&key) {
                set.remove(&(kind, name.to_owned()));
                if set.is_empty() {
                    index.by_secret.remove(&key);
                }
            }
            if let Some(count) = index.per_namespace.get_mut(namespace) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    index.per_namespace.remove(namespace);
                }
            }
        }
        if let Some(secret) = secret {
            index
                .by_secret
                .entry((namespace.to_owned(), secret.to_owned()))
                .or_default()
                .insert((kind, name.to_owned()));
            index.by_manifest.insert(manifest, secret.to_owned());
            *index.per_namespace.entry(namespace.to_owned()).or_default() += 1;
        }
        let referenced = index.per_namespace.contains_key(namespace);
        self.namespaces.send_if_modified(|namespaces| {
            if referenced {
                namespaces.insert(namespace.to_owned())
            } else {
                namespaces.remove(namespace)
            }
        });
    }

    /// The namespaces where some manifest references a Secret, as they change.
    pub fn namespaces(&self) -> watch::Receiver<BTreeSet<String>> {
        self.namespaces.subscribe()
    }

    /// The `resourceVersion` of a Secret in a namespace whose Secrets are watched; `None` when
    /// the watch has not seen it (not there, or not listed yet).
    pub fn version(&self, namespace: &str, secret: &str) -> Option<String> {
        self.index
            .read()
            .ok()?
            .versions
            .get(&(namespace.to_owned(), secret.to_owned()))
            .cloned()
    }

    /// Records the `resourceVersion` the watch saw of a Secret (`None`: gone).
    pub fn seen(&self, namespace: &str, secret: &str, version: Option<String>) {
        let Ok(mut index) = self.index.write() else {
            return;
        };
        let key = (namespace.to_owned(), secret.to_owned());
        match version {
            Some(version) => index.versions.insert(key, version),
            None => index.versions.remove(&key),
        };
    }

    /// Forgets the versions of a namespace whose Secrets are no longer watched.
    pub fn forget_namespace(&self, namespace: &str) {
        if let Ok(mut index) = self.index.write() {
            index.versions.retain(|(ns, _), _| ns != namespace);
        }
    }

    /// The manifests that reference a Secret.
    pub fn referencing(&self, namespace: &str, secret: &str) -> Vec<(ObjectKind, String)> {
        self.index
            .read()
            .ok()
            .and_then(|index| {
                index
                    .by_secret
                    .get(&(namespace.to_owned(), secret.to_owned()))
                    .map(|set| set.iter().cloned().collect())
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(name: &str, owner_uid: &str, value: &str) -> Secret {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name,
                "namespace": "team",
                "resourceVersion": "7",
                "ownerReferences": [{
                    "apiVersion": "nauthera.io/v1alpha1", "kind": "OIDCClient",
                    "name": name, "uid": owner_uid,
                }],
                "labels": { "app.kubernetes.io/managed-by": "nauthera-reconciler" },
            },
            "data": { CLIENT_SECRET_KEY: base64(value), "clientId": "Y2lk" },
        }))
        .unwrap()
    }

    fn base64(text: &str) -> String {
        use k8s_openapi::ByteString;
        serde_json::to_value(ByteString(text.as_bytes().to_vec()))
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_summary_keeps_what_deciding_reads_and_no_value() {
        let summary = SecretSummary::from(&secret("web", "uid-1", "s3cr3t"));
        assert_eq!(
            summary,
            SecretSummary {
                resource_version: Some("7".into()),
                owner_uids: Box::new([UidKey::of("uid-1")]),
                first_owner: Some(OwnerName {
                    kind: "OIDCClient".into(),
                    name: "web".into(),
                }),
                has_value: true,
                shape: None,
                rotation_request: None,
            }
        );
        assert!(!format!("{summary:?}").contains("s3cr3t"));
        assert!(!SecretSummary::from(&secret("web", "uid-1", "")).has_value);
    }

    #[test]
    fn a_summary_knows_its_owners_by_uid_and_names_a_foreign_owner_by_its_own_kind() {
        let mut secret = secret("web", "0b6c1f4e-3a7d-4c2e-9f1a-5d8e7b6a4c3d", "s");
        let summary = SecretSummary::from(&secret);
        assert!(summary.owned_by("0b6c1f4e-3a7d-4c2e-9f1a-5d8e7b6a4c3d"));
        assert!(!summary.owned_by("0b6c1f4e-3a7d-4c2e-9f1a-5d8e7b6a4c3e"));
        assert!(matches!(
            summary.first_owner.map(|owner| owner.kind),
            Some(Cow::Borrowed("OIDCClient"))
        ));
        secret.metadata.owner_references.as_mut().unwrap()[0].kind = "Deployment".into();
        let foreign = SecretSummary::from(&secret);
        assert_eq!(
            foreign.first_owner.map(|owner| owner.to_string()),
            Some("Deployment/web".to_owned())
        );
    }

    #[test]
    fn a_templated_secret_is_summarized_by_the_key_and_shape_recorded_on_it() {
        let mut templated = secret("web", "uid-1", "");
        let annotations = templated.metadata.annotations.get_or_insert_default();
        annotations.insert(CLIENT_SECRET_KEY_ANNOTATION.into(), "CLIENT_SECRET".into());
        annotations.insert(SECRET_SHAPE_ANNOTATION.into(), "0123456789abcdef".into());
        let summary = SecretSummary::from(&templated);
        assert!(
            !summary.has_value,
            "clientSecret is empty, and not the key recorded"
        );
        assert_eq!(summary.shape.as_deref(), Some("0123456789abcdef"));
        templated.data.get_or_insert_default().insert(
            "CLIENT_SECRET".into(),
            k8s_openapi::ByteString(b"s".to_vec()),
        );
        assert!(SecretSummary::from(&templated).has_value);
    }

    #[test]
    fn a_listing_replaces_what_was_cached_and_changes_follow_it() {
        let summaries = Arc::new(SecretSummaries::default());
        let cache = DeliveredSecrets::new(vec![summaries.clone()]);
        summaries.follow(&watcher::Event::Apply(secret("gone", "uid-0", "x")));
        summaries.follow(&watcher::Event::Init);
        summaries.follow(&watcher::Event::InitApply(secret("web", "uid-1", "x")));
        // Until the listing is done, the cache answers from what it had.
        assert!(cache.get("team", "web").is_none());
        assert!(cache.get("team", "gone").is_some());
        summaries.follow(&watcher::Event::InitDone);
        assert!(cache.get("team", "gone").is_none());
        assert_eq!(
            cache.get("team", "web").map(|s| s.owner_uids),
            Some(Box::from([UidKey::of("uid-1")]))
        );
        summaries.follow(&watcher::Event::Apply(secret("web", "uid-1", "")));
        assert_eq!(cache.get("team", "web").map(|s| s.has_value), Some(false));
        summaries.follow(&watcher::Event::Delete(secret("web", "uid-1", "")));
        assert!(cache.get("team", "web").is_none());
        assert!(cache.get("elsewhere", "web").is_none());
    }

    #[test]
    fn the_secrets_an_owner_owns_follow_the_listing_and_the_changes() {
        let summaries = Arc::new(SecretSummaries::default());
        let cache = DeliveredSecrets::new(vec![summaries.clone()]);
        summaries.follow(&watcher::Event::Apply(secret("gone", "uid-1", "x")));
        summaries.follow(&watcher::Event::Init);
        summaries.follow(&watcher::Event::InitApply(secret("web", "uid-1", "x")));
        summaries.follow(&watcher::Event::InitApply(secret("web-s2", "uid-1", "x")));
        summaries.follow(&watcher::Event::InitApply(secret("api", "uid-2", "x")));
        assert_eq!(cache.owned_by("team", "uid-1"), vec!["gone".to_owned()]);
        summaries.follow(&watcher::Event::InitDone);
        assert_eq!(cache.owned_by("team", "uid-1"), vec!["web", "web-s2"]);
        assert!(cache.owned_by("elsewhere", "uid-1").is_empty());
        summaries.follow(&watcher::Event::Delete(secret("web-s2", "uid-1", "x")));
        assert_eq!(cache.owned_by("team", "uid-1"), vec!["web"]);
        // A Secret that changes owner (taken over) leaves the first owner's list.
        summaries.follow(&watcher::Event::Apply(secret("web", "uid-3", "x")));
        assert!(cache.owned_by("team", "uid-1").is_empty());
        assert_eq!(cache.owned_by("team", "uid-3"), vec!["web"]);
        assert_eq!(cache.owned_by("team", "uid-2"), vec!["api"]);
        // The same owner and name in another namespace is another Secret: each goes alone.
        let mut elsewhere = secret("web", "uid-3", "x");
        elsewhere.metadata.namespace = Some("elsewhere".into());
        summaries.follow(&watcher::Event::Apply(elsewhere.clone()));
        assert_eq!(cache.owned_by("elsewhere", "uid-3"), vec!["web"]);
        summaries.follow(&watcher::Event::Delete(secret("web", "uid-3", "x")));
        assert!(cache.owned_by("team", "uid-3").is_empty());
        assert_eq!(cache.owned_by("elsewhere", "uid-3"), vec!["web"]);
        // A Secret with two owners is found under each, and leaves both when deleted.
        let mut shared = secret("shared", "uid-4", "x");
        if let Some(owners) = shared.metadata.owner_references.as_mut() {
            let mut second = owners[0].clone();
            second.uid = "uid-5".into();
            owners.push(second);
        }
        summaries.follow(&watcher::Event::Apply(shared.clone()));
        assert_eq!(cache.owned_by("team", "uid-4"), vec!["shared"]);
        assert_eq!(cache.owned_by("team", "uid-5"), vec!["shared"]);
        summaries.follow(&watcher::Event::Delete(shared));
        assert!(cache.owned_by("team", "uid-4").is_empty());
        assert!(cache.owned_by("team", "uid-5").is_empty());
        summaries.follow(&watcher::Event::Delete(elsewhere));
        assert!(cache.owned_by("elsewhere", "uid-3").is_empty());
        // Nothing of a deleted Secret stays in the index: only `api` is left.
        assert_eq!(summaries.cache.read().unwrap().by_owner.len(), 1);
    }

    #[test]
    fn a_refused_watch_names_the_owners_once_and_reads_go_past_the_cache_until_a_listing() {
        let summaries = SecretSummaries::default();
        summaries.follow(&watcher::Event::Apply(secret("web", "u1", "s")));
        assert!(summaries.get("team", "web").is_some());
        assert_eq!(
            summaries.deny(),
            vec![(
                "team".to_owned(),
                OwnerName {
                    kind: "OIDCClient".into(),
                    name: "web".into()
                }
            )]
        );
        assert!(summaries.deny().is_empty(), "named once per refusal");
        assert!(
            summaries.get("team", "web").is_none(),
            "a stale cache is not read"
        );
        summaries.follow(&watcher::Event::Init);
        summaries.follow(&watcher::Event::InitApply(secret("web", "u1", "s")));
        summaries.follow(&watcher::Event::InitDone);
        assert!(
            summaries.get("team", "web").is_some(),
            "trusted again after a listing"
        );
    }

    #[test]
    fn a_changed_reference_moves_the_manifest_to_its_new_secret() {
        let references = SecretReferences::default();
        references.record(ObjectKind::Client, "team-a", "web", Some("creds"));
        references.record(ObjectKind::Client, "team-a", "api", Some("creds"));
        references.record(
            ObjectKind::IdentityProvider,
            "team-a",
            "corp",
            Some("creds"),
        );
        assert_eq!(
            references.referencing("team-a", "creds"),
            vec![
                (ObjectKind::Client, "api".to_owned()),
                (ObjectKind::Client, "web".to_owned()),
                (ObjectKind::IdentityProvider, "corp".to_owned()),
            ]
        );
        assert!(references.referencing("team-b", "creds").is_empty());

        let namespaces = references.namespaces();
        assert_eq!(*namespaces.borrow(), BTreeSet::from(["team-a".to_owned()]));
        references.record(ObjectKind::Client, "team-a", "web", Some("web-creds"));
        references.record(ObjectKind::Client, "team-a", "api", None);
        assert_eq!(
            references.referencing("team-a", "creds"),
            vec![(ObjectKind::IdentityProvider, "corp".to_owned())]
        );
        assert_eq!(
            references.referencing("team-a", "web-creds"),
            vec![(ObjectKind::Client, "web".to_owned())]
        );
        // The last reference in a namespace gone: its Secrets are no longer watched.
        references.record(ObjectKind::Client, "team-a", "web", None);
        references.record(ObjectKind::IdentityProvider, "team-a", "corp", None);
        assert!(references.namespaces().borrow().is_empty());
    }
}
