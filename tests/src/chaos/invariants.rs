//! The invariants checked at the end of every scenario, each a pure function of what the run read
//! (the manifests and Secrets of the namespace, what the server holds, its audit log, the
//! recorded leaderships), so each is tested with plain values.

use std::collections::{BTreeMap, BTreeSet};

use nauthera_fake_server::HeldObject;
use nauthera_proto::v1::{AuditEvent, AuditOutcome};
use serde::Serialize;

use super::observe::{Leadership, leader_at};
use super::world::{CollectedDeletion, Declared, HeldKey, Kind, Policy, Propagation, World};
use crate::e2e::{MANAGER, sha256_hex};

/// One manifest as the cluster shows it.
#[derive(Clone, Debug, Default)]
pub struct Shown {
    pub reason: Option<String>,
    pub observed_generation: Option<i64>,
    pub generation: Option<i64>,
    pub client_id: Option<String>,
    /// The status message, to say why a resource has not settled.
    pub message: Option<String>,
    /// `nauthera.io/rotate` is still set: a rotation request not answered.
    pub rotation_pending: bool,
}

/// One Secret of the namespace.
#[derive(Clone, Debug, Default)]
pub struct SecretShown {
    pub name: String,
    /// The OIDCClient that owns it, if one does.
    pub owner_client: Option<String>,
    /// Labelled `nauthera.io/released=true`: released from a manifest deleted with `Orphan`.
    pub released: bool,
    pub data: BTreeMap<String, String>,
}

/// Everything the checks read, at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub namespace: String,
    pub shown: BTreeMap<(Kind, String), Shown>,
    pub secrets: Vec<SecretShown>,
    pub held: Vec<HeldObject>,
    /// The sha-256 of each client's secret in force, by name (clients of the namespace).
    pub client_hashes: BTreeMap<String, String>,
    /// The sha-256 of each identity provider's upstream secret, by name.
    pub provider_hashes: BTreeMap<String, String>,
    pub audit: Vec<AuditEvent>,
}

/// The outcome of one invariant.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub invariant: &'static str,
    pub holds: bool,
    /// How many things broke it.
    pub violations: usize,
    /// What broke it (at most a few examples), empty when it holds.
    pub problems: Vec<String>,
}

/// Every rotation request (`nauthera.io/rotate`) was carried out or answered, and its
/// annotation removed.
pub fn every_rotation_answered(snapshot: &Snapshot) -> Verdict {
    let problems = snapshot
        .shown
        .iter()
        .filter(|(_, shown)| shown.rotation_pending)
        .map(|((kind, name), _)| {
            format!("{} {name}: a rotation request is not answered", kind.name())
        })
        .collect();
    verdict("every rotation request is answered", problems)
}

/// Every state-based invariant of a snapshot, with `leaderships` since `since`; `identities`
/// are the replicas whose client certificates tell which of them wrote.
pub fn state_verdicts(
    world: &World,
    snapshot: &Snapshot,
    organizations_at_start: &BTreeSet<String>,
    leaderships: &[Leadership],
    since: jiff::Timestamp,
    identities: &[&str],
) -> Vec<Verdict> {
    let replica_of = |actor: &str| {
        identities
            .iter()
            .find(|identity| super::replicas::certificate_identity(identity) == actor)
            .map(|identity| (*identity).to_owned())
    };
    vec![
        every_resource_settled(world, snapshot),
        server_holds_exactly_the_manifests(world, snapshot, organizations_at_start),
        no_duplicate_clients(snapshot),
        delivered_secrets_are_in_force(world, snapshot),
        no_dead_values(snapshot),
        every_rotation_answered(snapshot),
        only_the_leader_wrote(snapshot, leaderships, since, replica_of),
        no_deleted_manifest_stays(world, snapshot),
        no_secret_owned_by_a_deleted_manifest(world, snapshot),
        orphan_policy_keeps_its_secret(world, snapshot),
        foreground_deletes_the_secret(world, snapshot),
        delete_policy_leaves_no_dead_value(world, snapshot),
    ]
}

pub fn verdict(invariant: &'static str, problems: Vec<String>) -> Verdict {
    Verdict {
        invariant,
        holds: problems.is_empty(),
        violations: problems.len(),
        problems: problems.into_iter().take(8).collect(),
    }
}

/// Every live manifest shows the reason it earns at its current generation (no manual restore
/// was made, so a Drifted one breaks this too).
pub fn every_resource_settled(world: &World, snapshot: &Snapshot) -> Verdict {
    let problems = world
        .live
        .iter()
        .filter_map(|(key, declared)| {
            let expected = declared.expected_reason().to_string();
            let shown = snapshot.shown.get(key);
            let settled = shown.is_some_and(|s| {
                s.reason.as_deref() == Some(expected.as_str())
                    && s.observed_generation.is_some()
                    && s.observed_generation == s.generation
            });
            (!settled).then(|| {
                format!(
                    "{} {}: expected {expected}, shows {:?} ({:?}) at observed generation {:?} of {:?}",
                    key.0.name(),
                    key.1,
                    shown.and_then(|s| s.reason.clone()),
                    shown.and_then(|s| s.message.clone()),
                    shown.and_then(|s| s.observed_generation),
                    shown.and_then(|s| s.generation),
                )
            })
        })
        .collect();
    verdict(
        "every resource shows the reason its manifest earns",
        problems,
    )
}

fn held_keys(snapshot: &Snapshot) -> BTreeSet<HeldKey> {
    snapshot
        .held
        .iter()
        .filter(|h| h.kind == "organization" || h.namespace == snapshot.namespace)
        .map(|h| {
            (
                h.kind,
                h.organization.clone(),
                h.namespace.clone(),
                h.name.clone(),
            )
        })
        .collect()
}

/// The server holds every live manifest's object, none of a manifest deleted with the Delete
/// policy, and nothing no manifest declared.
pub fn server_holds_exactly_the_manifests(
    world: &World,
    snapshot: &Snapshot,
    organizations_at_start: &BTreeSet<String>,
) -> Verdict {
    let expected = world.held_expectations(&snapshot.namespace);
    let held = held_keys(snapshot);
    let mut problems: Vec<String> = expected
        .must
        .difference(&held)
        .map(|k| format!("missing on the server: {} {}", k.0, k.3))
        .collect();
    problems.extend(expected.must_not.intersection(&held).map(|k| {
        format!(
            "left on the server after a Delete-policy delete: {} {}",
            k.0, k.3
        )
    }));
    problems.extend(
        held.iter()
            .filter(|k| !expected.must.contains(*k) && !expected.may.contains(*k))
            .filter(|k| !(k.0 == "organization" && organizations_at_start.contains(&k.3)))
            .filter(|k| !expected.must_not.contains(*k))
            .map(|k| format!("held with no manifest declaring it: {} {}", k.0, k.3)),
    );
    verdict(
        "the server holds exactly what the manifests declare",
        problems,
    )
}

/// How many objects live manifests declare that the server does not hold.
pub fn objects_missing(world: &World, snapshot: &Snapshot) -> u64 {
    let held = held_keys(snapshot);
    world
        .held_expectations(&snapshot.namespace)
        .must
        .difference(&held)
        .count() as u64
}

/// No manifest's client was created twice: every applied client write for a name carries one
/// client id, and the status shows that id.
pub fn no_duplicate_clients(snapshot: &Snapshot) -> Verdict {
    let mut ids: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for event in snapshot.audit.iter().filter(|e| {
        e.action == "client.applied"
            && e.outcome == AuditOutcome::Applied as i32
            && e.r#ref
                .as_ref()
                .is_some_and(|r| r.namespace == snapshot.namespace)
            && !e.client_id.is_empty()
    }) {
        if let Some(reference) = &event.r#ref {
            ids.entry(reference.name.as_str())
                .or_default()
                .insert(event.client_id.as_str());
        }
    }
    let mut problems: Vec<String> = ids
        .iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|(name, ids)| format!("client {name} was created {} times: {ids:?}", ids.len()))
        .collect();
    for ((kind, name), shown) in &snapshot.shown {
        if *kind != Kind::OIDCClient {
            continue;
        }
        if let (Some(shown_id), Some(held)) = (&shown.client_id, ids.get(name.as_str()))
            && !held.contains(shown_id.as_str())
        {
            problems.push(format!(
                "client {name} shows client id {shown_id}, the server wrote {held:?}"
            ));
        }
    }
    verdict("no duplicate object on the server", problems)
}

/// Every registered client's Secret holds the secret in force; every identity provider's server
/// copy is the value its team's Secret holds.
pub fn delivered_secrets_are_in_force(world: &World, snapshot: &Snapshot) -> Verdict {
    let secrets: BTreeMap<&str, &SecretShown> = snapshot
        .secrets
        .iter()
        .map(|s| (s.name.as_str(), s))
        .collect();
    let mut problems = Vec::new();
    for declared in world.live.values() {
        match declared.kind {
            Kind::OIDCClient => {
                if let Some(problem) = client_secret_problem(declared, &secrets, snapshot) {
                    problems.push(problem);
                }
            }
            Kind::IdentityProvider => {
                let expected = declared
                    .upstream_secret
                    .as_deref()
                    .map(|v| sha256_hex(v.as_bytes()));
                let held = snapshot.provider_hashes.get(&declared.name);
                if expected.as_ref() != held {
                    problems.push(format!(
                        "identity provider {}: the server holds another upstream secret than its Secret",
                        declared.name
                    ));
                }
            }
            _ => {}
        }
    }
    verdict("every delivered Secret holds the value in force", problems)
}

fn client_secret_problem(
    declared: &Declared,
    secrets: &BTreeMap<&str, &SecretShown>,
    snapshot: &Snapshot,
) -> Option<String> {
    let secret_name = declared.delivered_secret()?;
    let name = &declared.name;
    let Some(secret) = secrets.get(secret_name.as_str()) else {
        return Some(format!("client {name}: no Secret {secret_name}"));
    };
    let Some(value) = secret.data.get("clientSecret") else {
        return Some(format!(
            "client {name}: Secret {secret_name} has no clientSecret"
        ));
    };
    let held = snapshot.client_hashes.get(name);
    (held != Some(&sha256_hex(value.as_bytes()))).then(|| {
        format!("client {name}: Secret {secret_name} holds a secret the server does not hold")
    })
}

/// No Secret an OIDCClient owns holds a secret that is not in force.
pub fn no_dead_values(snapshot: &Snapshot) -> Verdict {
    let problems = snapshot
        .secrets
        .iter()
        .filter_map(|secret| {
            let owner = secret.owner_client.as_ref()?;
            let value = secret.data.get("clientSecret")?;
            let in_force = snapshot.client_hashes.get(owner) == Some(&sha256_hex(value.as_bytes()));
            (!in_force).then(|| format!("Secret {} (of {owner}) holds a dead secret", secret.name))
        })
        .collect();
    verdict("no owned Secret holds a dead value", problems)
}

/// The Secret a deleted client's generated secret was delivered into, as the snapshot shows it.
fn delivered_secret_of<'a>(
    deletion: &CollectedDeletion,
    snapshot: &'a Snapshot,
) -> Option<&'a SecretShown> {
    let name = deletion.declared.delivered_secret()?;
    snapshot.secrets.iter().find(|s| s.name == name)
}

fn described(deletion: &CollectedDeletion) -> String {
    format!(
        "{} {} (deletionPolicy {}, {:?} propagation)",
        deletion.declared.kind.name(),
        deletion.declared.name,
        deletion.declared.policy.as_str(),
        deletion.propagation
    )
}

/// Every manifest deleted with a propagation policy is gone: no finalizer, the reconciler's or
/// the garbage collector's (`orphan`, `foregroundDeletion`), keeps it.
pub fn no_deleted_manifest_stays(world: &World, snapshot: &Snapshot) -> Verdict {
    let problems = world
        .collected
        .iter()
        .filter(|d| {
            snapshot
                .shown
                .contains_key(&(d.declared.kind, d.declared.name.clone()))
        })
        .map(|d| format!("{} is still there", described(d)))
        .collect();
    verdict(
        "no manifest deleted with a propagation policy stays",
        problems,
    )
}

/// No Secret is owned by a manifest deleted with a propagation policy: the reconciler neither
/// re-created one for it nor kept one from the garbage collector.
pub fn no_secret_owned_by_a_deleted_manifest(world: &World, snapshot: &Snapshot) -> Verdict {
    let problems = world
        .collected
        .iter()
        .flat_map(|d| {
            snapshot
                .secrets
                .iter()
                .filter(|s| s.owner_client.as_deref() == Some(d.declared.name.as_str()))
                .map(move |s| format!("Secret {} is owned by {}", s.name, described(d)))
        })
        .collect();
    verdict("no Secret is owned by a deleted manifest", problems)
}

/// `deletionPolicy: Orphan` under background or orphan propagation: a client the server still
/// holds keeps its Secret, owned by nobody, labelled released, holding the secret the server
/// holds.
pub fn orphan_policy_keeps_its_secret(world: &World, snapshot: &Snapshot) -> Verdict {
    let problems = world
        .collected
        .iter()
        .filter(|d| d.declared.policy == Policy::Orphan && d.propagation != Propagation::Foreground)
        .filter_map(|d| {
            let held = snapshot.client_hashes.get(&d.declared.name)?;
            let problem = match delivered_secret_of(d, snapshot) {
                None => "its Secret is gone".to_owned(),
                Some(s) if s.owner_client.is_some() => format!("Secret {} is still owned", s.name),
                Some(s) if !s.released => format!("Secret {} is not labelled released", s.name),
                Some(s)
                    if s.data.get("clientSecret").map(|v| sha256_hex(v.as_bytes()))
                        != Some(held.clone()) =>
                {
                    format!("Secret {} holds another secret than the server", s.name)
                }
                Some(_) => return None,
            };
            Some(format!("{}: {problem}", described(d)))
        })
        .collect();
    verdict(
        "an orphan keeps its secret under background and orphan propagation",
        problems,
    )
}

/// Foreground propagation, either deletion policy: the Secret went with the manifest, as asked.
pub fn foreground_deletes_the_secret(world: &World, snapshot: &Snapshot) -> Verdict {
    let problems = world
        .collected
        .iter()
        .filter(|d| d.propagation == Propagation::Foreground)
        .filter_map(|d| {
            let secret = delivered_secret_of(d, snapshot)?;
            Some(format!("{}: Secret {} stays", described(d), secret.name))
        })
        .collect();
    verdict(
        "a foreground deletion deletes the Secret with the manifest",
        problems,
    )
}

/// `deletionPolicy: Delete` under background propagation leaves no Secret (its value died with
/// the server's client); under orphan propagation the person asked to keep dependents, so the
/// Secret stays, owned by nobody ([`no_secret_owned_by_a_deleted_manifest`]).
pub fn delete_policy_leaves_no_dead_value(world: &World, snapshot: &Snapshot) -> Verdict {
    let problems = world
        .collected
        .iter()
        .filter(|d| d.declared.policy == Policy::Delete && d.propagation == Propagation::Background)
        .filter_map(|d| {
            let secret = delivered_secret_of(d, snapshot)?;
            Some(format!(
                "{}: Secret {} stays with a dead value",
                described(d),
                secret.name
            ))
        })
        .collect();
    verdict(
        "a Delete-policy deletion leaves no Secret unless asked to orphan dependents",
        problems,
    )
}

/// Every write by the reconciler's manager came from the replica that led at that moment.
/// `replica_of` maps the audit log's actor (a certificate identity) to a Lease identity.
pub fn only_the_leader_wrote(
    snapshot: &Snapshot,
    leaderships: &[Leadership],
    since: jiff::Timestamp,
    replica_of: impl Fn(&str) -> Option<String>,
) -> Verdict {
    let mut problems = Vec::new();
    for event in &snapshot.audit {
        let applied = event.outcome == AuditOutcome::Applied as i32
            || event.outcome == AuditOutcome::Deleted as i32;
        if !applied || event.manager != MANAGER {
            continue;
        }
        let Some(time) = event
            .time
            .as_ref()
            .and_then(|t| jiff::Timestamp::new(t.seconds, t.nanos).ok())
        else {
            continue;
        };
        if time < since {
            continue;
        }
        let writer = replica_of(&event.actor);
        let leader = leader_at(leaderships, time);
        if writer.as_deref() != leader {
            problems.push(format!(
                "{} at {time} by {} while {} led",
                event.action,
                event.actor,
                leader.unwrap_or("nobody")
            ));
        }
    }
    verdict("no write by a replica that was not the leader", problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::world::{Policy, SERVER_ISSUER};

    fn client(name: &str) -> Declared {
        Declared {
            kind: Kind::OIDCClient,
            name: name.to_owned(),
            issuer: SERVER_ISSUER.to_owned(),
            policy: Policy::Delete,
            version: 1,
            secret_name: None,
            upstream_secret: None,
            earns_refusal: false,
        }
    }

    fn world_of(declared: Vec<Declared>) -> World {
        let mut world = World::default();
        for d in declared {
            world.live.insert((d.kind, d.name.clone()), d);
        }
        world
    }

    fn secret(name: &str, owner: Option<&str>, value: &str) -> SecretShown {
        SecretShown {
            name: name.to_owned(),
            owner_client: owner.map(str::to_owned),
            released: false,
            data: BTreeMap::from([("clientSecret".to_owned(), value.to_owned())]),
        }
    }

    #[test]
    fn a_resource_behind_its_generation_is_not_settled() {
        let world = world_of(vec![client("app-1")]);
        let mut snapshot = Snapshot::default();
        snapshot.shown.insert(
            (Kind::OIDCClient, "app-1".to_owned()),
            Shown {
                reason: Some("Registered".to_owned()),
                observed_generation: Some(1),
                generation: Some(2),
                client_id: None,
                message: None,
                rotation_pending: false,
            },
        );
        assert!(!every_resource_settled(&world, &snapshot).holds);
        snapshot
            .shown
            .values_mut()
            .for_each(|s| s.generation = Some(1));
        assert!(every_resource_settled(&world, &snapshot).holds);
    }

    #[test]
    fn a_secret_not_in_force_is_caught_both_ways() {
        let world = world_of(vec![client("app-1")]);
        let mut snapshot = Snapshot {
            secrets: vec![
                secret("app-1", Some("app-1"), "old-value"),
                secret("other", None, "x"),
            ],
            ..Snapshot::default()
        };
        snapshot
            .client_hashes
            .insert("app-1".to_owned(), sha256_hex(b"new-value"));
        assert!(!delivered_secrets_are_in_force(&world, &snapshot).holds);
        assert!(!no_dead_values(&snapshot).holds);
        snapshot.secrets[0]
            .data
            .insert("clientSecret".to_owned(), "new-value".to_owned());
        assert!(delivered_secrets_are_in_force(&world, &snapshot).holds);
        assert!(
            no_dead_values(&snapshot).holds,
            "a Secret nobody owns is not checked"
        );
    }

    #[test]
    fn a_server_object_without_a_manifest_is_named() {
        let world = world_of(vec![client("app-1")]);
        let held = |name: &str| HeldObject {
            kind: "client",
            organization: "acme".to_owned(),
            namespace: "ns".to_owned(),
            name: name.to_owned(),
        };
        let snapshot = Snapshot {
            namespace: "ns".to_owned(),
            held: vec![held("app-1"), held("app-9")],
            ..Snapshot::default()
        };
        let verdict = server_holds_exactly_the_manifests(&world, &snapshot, &BTreeSet::new());
        assert!(!verdict.holds);
        assert!(
            verdict.problems[0].contains("app-9"),
            "{:?}",
            verdict.problems
        );
    }

    fn write(actor: &str, seconds: i64) -> AuditEvent {
        AuditEvent {
            action: "client.applied".to_owned(),
            outcome: AuditOutcome::Applied as i32,
            manager: MANAGER.to_owned(),
            actor: actor.to_owned(),
            time: Some(prost_types::Timestamp { seconds, nanos: 0 }),
            ..AuditEvent::default()
        }
    }

    #[test]
    fn a_write_after_another_replica_took_the_lease_is_caught() {
        let at = |s: i64| jiff::Timestamp::from_second(s).unwrap();
        let leaderships = vec![
            Leadership {
                holder: "a".to_owned(),
                acquired: at(10),
            },
            Leadership {
                holder: "b".to_owned(),
                acquired: at(20),
            },
        ];
        let replica_of = |actor: &str| Some(actor.to_owned());
        let good = Snapshot {
            audit: vec![write("a", 15), write("b", 25)],
            ..Snapshot::default()
        };
        assert!(only_the_leader_wrote(&good, &leaderships, at(0), replica_of).holds);
        let bad = Snapshot {
            audit: vec![write("a", 21)],
            ..Snapshot::default()
        };
        assert!(!only_the_leader_wrote(&bad, &leaderships, at(0), replica_of).holds);
    }

    fn collected(name: &str, policy: Policy, propagation: Propagation) -> CollectedDeletion {
        CollectedDeletion {
            declared: Declared {
                policy,
                ..client(name)
            },
            propagation,
        }
    }

    fn world_deleting(deletions: Vec<CollectedDeletion>) -> World {
        let mut world = World::default();
        world.collected = deletions;
        world
    }

    #[test]
    fn a_deleted_manifest_still_there_is_stuck() {
        let world = world_deleting(vec![collected(
            "app-1",
            Policy::Orphan,
            Propagation::Orphan,
        )]);
        let mut snapshot = Snapshot::default();
        assert!(no_deleted_manifest_stays(&world, &snapshot).holds);
        snapshot
            .shown
            .insert((Kind::OIDCClient, "app-1".to_owned()), Shown::default());
        assert!(!no_deleted_manifest_stays(&world, &snapshot).holds);
    }

    #[test]
    fn a_secret_owned_by_a_deleted_manifest_is_a_fight_with_the_collector() {
        let world = world_deleting(vec![collected(
            "app-1",
            Policy::Delete,
            Propagation::Foreground,
        )]);
        let mut snapshot = Snapshot {
            secrets: vec![secret("app-1", Some("app-1"), "v")],
            ..Snapshot::default()
        };
        assert!(!no_secret_owned_by_a_deleted_manifest(&world, &snapshot).holds);
        snapshot.secrets[0].owner_client = None;
        assert!(no_secret_owned_by_a_deleted_manifest(&world, &snapshot).holds);
    }

    #[test]
    fn an_orphan_keeps_its_released_secret_holding_the_servers_value() {
        let world = world_deleting(vec![
            collected("app-1", Policy::Orphan, Propagation::Background),
            collected("app-2", Policy::Orphan, Propagation::Orphan),
            // Foreground: the person asked for dependents to go; not this check's.
            collected("app-3", Policy::Orphan, Propagation::Foreground),
        ]);
        let mut snapshot = Snapshot::default();
        for name in ["app-1", "app-2", "app-3"] {
            snapshot
                .client_hashes
                .insert(name.to_owned(), sha256_hex(b"in-force"));
        }
        let broken = orphan_policy_keeps_its_secret(&world, &snapshot);
        assert_eq!(broken.violations, 2, "{:?}", broken.problems);
        let mut released = secret("app-1", None, "in-force");
        released.released = true;
        snapshot.secrets = vec![released.clone(), secret("app-2", None, "in-force")];
        let unlabelled = orphan_policy_keeps_its_secret(&world, &snapshot);
        assert_eq!(unlabelled.violations, 1, "{:?}", unlabelled.problems);
        released.name = "app-2".to_owned();
        released
            .data
            .insert("clientSecret".to_owned(), "dead".to_owned());
        snapshot.secrets[1] = released.clone();
        assert!(!orphan_policy_keeps_its_secret(&world, &snapshot).holds);
        released
            .data
            .insert("clientSecret".to_owned(), "in-force".to_owned());
        snapshot.secrets[1] = released;
        assert!(orphan_policy_keeps_its_secret(&world, &snapshot).holds);
        // A client the server does not hold (deleted before it registered) has nothing to keep.
        snapshot.client_hashes.clear();
        snapshot.secrets.clear();
        assert!(orphan_policy_keeps_its_secret(&world, &snapshot).holds);
    }

    #[test]
    fn foreground_and_background_deletions_leave_no_secret_and_orphan_propagation_may() {
        let world = world_deleting(vec![
            collected("app-1", Policy::Orphan, Propagation::Foreground),
            collected("app-2", Policy::Delete, Propagation::Background),
            collected("app-3", Policy::Delete, Propagation::Orphan),
        ]);
        let mut snapshot = Snapshot {
            secrets: vec![
                secret("app-1", None, "a"),
                secret("app-2", None, "b"),
                secret("app-3", None, "c"),
            ],
            ..Snapshot::default()
        };
        assert_eq!(
            foreground_deletes_the_secret(&world, &snapshot).violations,
            1
        );
        assert_eq!(
            delete_policy_leaves_no_dead_value(&world, &snapshot).violations,
            1
        );
        snapshot.secrets.retain(|s| s.name == "app-3");
        assert!(foreground_deletes_the_secret(&world, &snapshot).holds);
        assert!(delete_policy_leaves_no_dead_value(&world, &snapshot).holds);
    }
}
