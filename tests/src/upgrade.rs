//! What the rolling-upgrade test records while two releases take turns leading: each manifest's
//! `Ready` text over time (to catch a status flapping between the two releases' texts), the
//! rotations asked for, and the Secrets each client delivered into and the secret values they
//! held (to catch a secret minted twice). The checks are pure functions of the record, tested with plain values.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use nauthera_shared::resources::{Branding, IdentityProvider, OIDCClient, Organization};
use serde_json::Value;
use tokio::task::JoinHandle;

/// The key a client secret is delivered under.
const SECRET_KEY: &str = "clientSecret";

/// One `Ready` condition as a manifest showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadyText {
    /// The status's `observedGeneration`.
    pub generation: i64,
    pub reason: String,
    pub message: String,
}

/// Everything recorded, by manifest (`Kind/name`) or client name.
#[derive(Debug, Default)]
pub struct History {
    /// Each manifest's `Ready` texts, consecutive repeats dropped.
    pub ready: BTreeMap<String, Vec<ReadyText>>,
    /// Every value of `nauthera.io/rotate` each OIDCClient carried.
    pub rotations: BTreeMap<String, BTreeSet<String>>,
    /// Every secret value a Secret owned by each OIDCClient held.
    pub delivered: BTreeMap<String, BTreeSet<String>>,
    /// The names of the Secrets each OIDCClient owned.
    pub secret_names: BTreeMap<String, BTreeSet<String>>,
}

/// The running watches; they stop when dropped.
pub struct Recorder {
    history: Arc<Mutex<History>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Recorder {
    pub fn start(client: &kube::Client, namespace: &str) -> Recorder {
        let history = Arc::new(Mutex::new(History::default()));
        let resources = [
            ApiResource::erase::<OIDCClient>(&()),
            ApiResource::erase::<Branding>(&()),
            ApiResource::erase::<IdentityProvider>(&()),
            ApiResource::erase::<Organization>(&()),
        ];
        let mut tasks: Vec<JoinHandle<()>> = resources
            .iter()
            .map(|resource| {
                let api = Api::namespaced_with(client.clone(), namespace, resource);
                tokio::spawn(watch_manifests(api, resource.kind.clone(), history.clone()))
            })
            .collect();
        tasks.push(tokio::spawn(watch_secrets(
            Api::namespaced(client.clone(), namespace),
            history.clone(),
        )));
        Recorder { history, tasks }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, History> {
        self.history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn watch_manifests(api: Api<DynamicObject>, kind: String, history: Arc<Mutex<History>>) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) = event else {
            continue;
        };
        let name = object.metadata.name.clone().unwrap_or_default();
        let mut history = history.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(text) = ready_text(&object.data) {
            let texts = history.ready.entry(format!("{kind}/{name}")).or_default();
            if texts.last() != Some(&text) {
                texts.push(text);
            }
        }
        if let Some(rotation) = object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(nauthera_shared::ROTATE_ANNOTATION))
        {
            history
                .rotations
                .entry(name)
                .or_default()
                .insert(rotation.clone());
        }
    }
}

/// The `Ready` condition of a manifest's status, read as plain JSON (either release's shape).
fn ready_text(object: &Value) -> Option<ReadyText> {
    let status = object.get("status")?;
    let ready = status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    Some(ReadyText {
        generation: status.get("observedGeneration")?.as_i64()?,
        reason: ready["reason"].as_str().unwrap_or_default().to_owned(),
        message: ready["message"].as_str().unwrap_or_default().to_owned(),
    })
}

async fn watch_secrets(api: Api<Secret>, history: Arc<Mutex<History>>) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret)) = event else {
            continue;
        };
        let Some(owner) = secret
            .metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .find(|owner| owner.kind == "OIDCClient")
        else {
            continue;
        };
        let Some(value) = secret
            .data
            .as_ref()
            .and_then(|data| data.get(SECRET_KEY))
            .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
        else {
            continue;
        };
        let mut history = history.lock().unwrap_or_else(|p| p.into_inner());
        history
            .secret_names
            .entry(owner.name.clone())
            .or_default()
            .insert(secret.metadata.name.clone().unwrap_or_default());
        history
            .delivered
            .entry(owner.name)
            .or_default()
            .insert(value);
    }
}

/// The manifests whose status flapped: at one observed generation, once a settled text
/// (`settled` reasons) was shown, a text shown before came back after another one (A, B, A); or
/// the observed generation went back (a stale status written over a newer one).
pub fn flapping(history: &History, settled: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for (manifest, texts) in &history.ready {
        if let Some(pair) = texts.windows(2).find(|w| w[1].generation < w[0].generation) {
            problems.push(format!(
                "{manifest}: observed generation went back from {} ({}) to {} ({})",
                pair[0].generation, pair[0].reason, pair[1].generation, pair[1].reason
            ));
            continue;
        }
        let mut by_generation: BTreeMap<i64, Vec<&ReadyText>> = BTreeMap::new();
        for text in texts {
            by_generation.entry(text.generation).or_default().push(text);
        }
        for (generation, texts) in by_generation {
            let Some(first_settled) = texts
                .iter()
                .position(|t| settled.contains(&t.reason.as_str()))
            else {
                continue;
            };
            let after = &texts[first_settled..];
            let returned = after.iter().enumerate().find(|(i, text)| {
                after[..*i]
                    .iter()
                    .rev()
                    .skip(1)
                    .any(|earlier| earlier == *text)
            });
            if let Some((_, text)) = returned {
                problems.push(format!(
                    "{manifest}: at generation {generation} the status went back to {} {:?}; \
                     its texts since it settled: {:?}",
                    text.reason,
                    text.message,
                    after
                        .iter()
                        .map(|t| format!("{}: {}", t.reason, t.message))
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    problems
}

/// The clients whose Secrets held more secret values than they had reasons to mint one: the
/// first, one per rotation asked for, and one per move to another Secret (`secretName` changed:
/// the value left behind is replaced). More is a secret minted twice.
pub fn minted_twice(history: &History) -> Vec<String> {
    history
        .delivered
        .iter()
        .filter_map(|(client, values)| {
            let asked = history.rotations.get(client).map_or(0, BTreeSet::len);
            let secrets = history.secret_names.get(client).map_or(1, BTreeSet::len);
            (values.len() > secrets + asked).then(|| {
                format!(
                    "client {client}: its Secrets held {} secret values, with {asked} rotations \
                     asked and {secrets} Secrets",
                    values.len()
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(generation: i64, reason: &str, message: &str) -> ReadyText {
        ReadyText {
            generation,
            reason: reason.to_owned(),
            message: message.to_owned(),
        }
    }

    fn history_of(texts: Vec<ReadyText>) -> History {
        History {
            ready: BTreeMap::from([("OIDCClient/app".to_owned(), texts)]),
            ..History::default()
        }
    }

    const SETTLED: &[&str] = &["Registered", "Refused"];

    #[test]
    fn a_status_alternating_between_two_texts_flaps() {
        let old = text(1, "Registered", "in force (old words)");
        let new = text(1, "Registered", "in force (new words)");
        let flapped = history_of(vec![old.clone(), new.clone(), old]);
        assert_eq!(flapping(&flapped, SETTLED).len(), 1);
        let changed_once = history_of(vec![text(1, "Pending", "creating"), new]);
        assert!(flapping(&changed_once, SETTLED).is_empty());
    }

    #[test]
    fn texts_before_settling_and_across_generations_do_not_flap() {
        let history = history_of(vec![
            text(1, "Pending", "a"),
            text(1, "Unreachable", "b"),
            text(1, "Pending", "a"),
            text(1, "Registered", "in force at 1"),
            text(2, "Registered", "in force at 1"),
            text(2, "Registered", "in force at 2"),
        ]);
        assert!(flapping(&history, SETTLED).is_empty());
    }

    #[test]
    fn an_observed_generation_going_back_is_named() {
        let history = history_of(vec![
            text(1, "Registered", "x"),
            text(2, "Registered", "y"),
            text(1, "Registered", "x"),
        ]);
        let problems = flapping(&history, SETTLED);
        assert!(problems[0].contains("went back from 2"), "{problems:?}");
    }

    #[test]
    fn a_secret_value_beyond_the_rotations_and_moves_is_a_second_mint() {
        let mut history = History::default();
        history.delivered.insert(
            "app".to_owned(),
            BTreeSet::from(["s1".to_owned(), "s2".to_owned(), "s3".to_owned()]),
        );
        history
            .secret_names
            .insert("app".to_owned(), BTreeSet::from(["app".to_owned()]));
        assert_eq!(minted_twice(&history).len(), 1);
        history
            .rotations
            .insert("app".to_owned(), BTreeSet::from(["r1".to_owned()]));
        assert_eq!(
            minted_twice(&history).len(),
            1,
            "one rotation, three values"
        );
        history.secret_names.insert(
            "app".to_owned(),
            BTreeSet::from(["app".to_owned(), "app-s1".to_owned()]),
        );
        assert!(minted_twice(&history).is_empty());
    }
}
