//! `spec.secret.restart: Rollout`: which workloads a delivery of a new client secret restarts,
//! and what the restart tells people (status, events, message).

use nauthera_shared::catalog::EventReason;
use nauthera_shared::resources::{
    NotRestartedBecause, WorkloadNotRestarted, WorkloadRestartRecord,
};
use nauthera_shared::workloads::{Consumer, PodTemplate, consumers};

use super::{EventNote, Verdict};

/// What a restart does with one workload that reads the Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartPlan {
    /// Patch its pod template.
    Restart,
    /// Its pod template records this delivery already (a retried reconcile): not again.
    AlreadyRestarted,
    /// A Deployment whose rollout is paused: left alone.
    Paused,
}

/// What came of restarting one workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestartOutcome {
    Restarted,
    AlreadyRestarted,
    Paused,
    /// RBAC forbids the patch; `resource` as RBAC names it (`deployments`).
    Forbidden {
        resource: &'static str,
    },
    /// The patch failed otherwise.
    Failed(String),
}

/// At most this many workloads are named in the condition message; the rest are counted.
const NAMED: usize = 5;

/// The workloads of `templates` that read `secret`, each with what a restart for `delivery`
/// does with it.
pub fn restart_plan(
    templates: &[PodTemplate],
    secret: &str,
    delivery: &str,
) -> Vec<(Consumer, RestartPlan)> {
    consumers(templates, secret)
        .into_iter()
        .map(|consumer| {
            let template = templates
                .iter()
                .find(|t| t.kind == consumer.kind && t.name == consumer.name);
            let plan = match template {
                Some(t) if t.paused => RestartPlan::Paused,
                Some(t) if t.restarted_for.as_deref() == Some(delivery) => {
                    RestartPlan::AlreadyRestarted
                }
                _ => RestartPlan::Restart,
            };
            (consumer, plan)
        })
        .collect()
}

/// The verdict of a delivery with the restart it made: `status.lastWorkloadRestart`, a
/// `WorkloadsRestarted` event naming the restarted workloads, and for those not restarted a
/// `WorkloadsNotRestarted` event and a sentence in the message saying why and what to do.
pub fn with_restarts(
    mut verdict: Verdict,
    secret: &str,
    delivery: &str,
    namespace: &str,
    outcomes: &[(Consumer, RestartOutcome)],
) -> Verdict {
    let label = |c: &Consumer| format!("{}/{}", c.kind, c.name);
    let restarted: Vec<String> = outcomes
        .iter()
        .filter(|(_, o)| {
            matches!(
                o,
                RestartOutcome::Restarted | RestartOutcome::AlreadyRestarted
            )
        })
        .map(|(c, _)| label(c))
        .collect();
    let not_restarted: Vec<WorkloadNotRestarted> = outcomes
        .iter()
        .filter_map(|(consumer, outcome)| {
            let command = consumer.restart_command(namespace);
            let (why, message) = match outcome {
                RestartOutcome::Restarted | RestartOutcome::AlreadyRestarted => return None,
                RestartOutcome::Paused => (
                    NotRestartedBecause::RolloutPaused,
                    format!(
                        "its rollout is paused (spec.paused), so it was left alone: `kubectl -n \
                         {namespace} rollout resume {}/{}` rolls out the new secret",
                        consumer.kind.to_ascii_lowercase(),
                        consumer.name
                    ),
                ),
                RestartOutcome::Forbidden { resource } => (
                    NotRestartedBecause::Forbidden,
                    format!(
                        "the reconciler may not patch {resource}: grant it with the kustomize \
                         component deploy/components/workload-restart or the Helm value \
                         rbac.workloadRestart=true; until then restart it yourself \
                         ({command})"
                    ),
                ),
                RestartOutcome::Failed(error) => (
                    NotRestartedBecause::PatchFailed,
                    format!("the patch failed ({error}): restart it yourself ({command})"),
                ),
            };
            Some(WorkloadNotRestarted {
                workload: label(consumer),
                why,
                message,
            })
        })
        .collect();
    if !restarted.is_empty() {
        verdict.events.push(EventNote {
            reason: EventReason::WorkloadsRestarted,
            note: format!(
                "restarted {} for the new client secret in Secret {secret} (delivery {delivery}), \
                 as kubectl rollout restart does",
                restarted.join(", ")
            ),
        });
    }
    if !not_restarted.is_empty() {
        let each = not_restarted
            .iter()
            .map(|n| format!("{}: {}", n.workload, n.message))
            .collect::<Vec<_>>();
        verdict.events.push(EventNote {
            reason: EventReason::WorkloadsNotRestarted,
            note: format!(
                "not restarted for the new client secret in Secret {secret}: {}",
                each.join("; ")
            ),
        });
        let named = each
            .iter()
            .take(NAMED)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        let more = match each.len().saturating_sub(NAMED) {
            0 => String::new(),
            rest => format!(" (and {rest} more in status.lastWorkloadRestart)"),
        };
        verdict.message.push_str(&format!(
            "; workloads that read Secret {secret} were not restarted for the new client secret: \
             {named}{more}"
        ));
    }
    verdict.fields.last_workload_restart = Some(WorkloadRestartRecord {
        secret: secret.to_owned(),
        delivery: delivery.to_owned(),
        restarted,
        not_restarted,
        completed_at: None,
    });
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::decide::secret_delivered;

    fn reading(kind: &'static str, name: &str, secret: &str) -> PodTemplate {
        PodTemplate {
            kind,
            name: name.into(),
            spec: Some(
                serde_json::from_value(serde_json::json!({
                    "containers": [{"name": "app", "envFrom": [{"secretRef": {"name": secret}}]}]
                }))
                .unwrap(),
            ),
            paused: false,
            restarted_for: None,
        }
    }

    fn consumer(kind: &str, name: &str) -> Consumer {
        Consumer {
            kind: kind.into(),
            name: name.into(),
            uses: vec!["envFrom (container app)".into()],
        }
    }

    #[test]
    fn only_readers_are_planned_paused_ones_are_left_and_a_delivery_restarts_once() {
        let mut paused = reading("Deployment", "paused", "shop");
        paused.paused = true;
        let mut done = reading("StatefulSet", "done", "shop");
        done.restarted_for = Some("shop@42".into());
        let mut earlier = reading("DaemonSet", "earlier", "shop");
        earlier.restarted_for = Some("shop@7".into());
        let templates = vec![
            reading("Deployment", "web", "shop"),
            reading("Deployment", "other", "billing"),
            paused,
            done,
            earlier,
        ];
        let plan: Vec<(String, RestartPlan)> = restart_plan(&templates, "shop", "shop@42")
            .into_iter()
            .map(|(c, p)| (format!("{}/{}", c.kind, c.name), p))
            .collect();
        assert_eq!(
            plan,
            vec![
                ("Deployment/web".into(), RestartPlan::Restart),
                ("Deployment/paused".into(), RestartPlan::Paused),
                ("StatefulSet/done".into(), RestartPlan::AlreadyRestarted),
                ("DaemonSet/earlier".into(), RestartPlan::Restart),
            ]
        );
    }

    #[test]
    fn the_rotation_says_its_readers_are_restarted_instead_of_asking_for_it() {
        use crate::reconcile::decide::{Applied, Readers, Rotation, after_apply, rotated};
        let applied = Applied {
            client_id: "cid".into(),
            revision: "r2".into(),
            generation_in_force: 1,
            created: false,
        };
        let delivered = after_apply(
            &applied,
            Some("shop"),
            Some(Ok(())),
            false,
            Some(&Rotation::Deleted),
        );
        let verdict = rotated(
            delivered,
            &Rotation::Deleted,
            "shop",
            "team-a",
            &Readers::Restarting(vec![consumer("Deployment", "web")]),
            None,
        );
        let note = &verdict
            .events
            .iter()
            .find(|e| e.reason == EventReason::SecretRotated)
            .expect("a SecretRotated event")
            .note;
        assert!(
            note.contains("read by Deployment/web: spec.secret.restart: Rollout restarts them"),
            "{note}"
        );
        assert!(
            !note.contains("kubectl -n team-a rollout restart"),
            "{note}"
        );
    }

    #[test]
    fn restarted_workloads_are_told_and_recorded_and_the_message_stays() {
        let verdict = secret_delivered(3, "r3", "shop");
        let before = verdict.message.clone();
        let verdict = with_restarts(
            verdict,
            "shop",
            "shop@42",
            "team-a",
            &[
                (consumer("Deployment", "web"), RestartOutcome::Restarted),
                (
                    consumer("StatefulSet", "db"),
                    RestartOutcome::AlreadyRestarted,
                ),
            ],
        );
        assert_eq!(verdict.message, before);
        let record = verdict.fields.last_workload_restart.clone().unwrap();
        assert_eq!(record.restarted, vec!["Deployment/web", "StatefulSet/db"]);
        assert!(record.not_restarted.is_empty());
        assert_eq!(record.delivery, "shop@42");
        let told: Vec<_> = verdict.events.iter().map(|e| e.reason).collect();
        assert!(told.contains(&EventReason::WorkloadsRestarted), "{told:?}");
        assert!(!told.contains(&EventReason::WorkloadsNotRestarted));
        // The status records it, with when.
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let status = crate::reconcile::decide::status_after(None, &verdict, 3, now).unwrap();
        let recorded = status.last_workload_restart.unwrap();
        assert_eq!(recorded.restarted, record.restarted);
        assert_eq!(
            recorded.completed_at,
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now))
        );
    }

    #[test]
    fn a_missing_permission_and_a_paused_rollout_say_why_and_what_to_do() {
        let verdict = with_restarts(
            secret_delivered(3, "r3", "shop"),
            "shop",
            "shop@42",
            "team-a",
            &[
                (
                    consumer("Deployment", "web"),
                    RestartOutcome::Forbidden {
                        resource: "deployments",
                    },
                ),
                (consumer("Deployment", "held"), RestartOutcome::Paused),
            ],
        );
        let record = verdict.fields.last_workload_restart.clone().unwrap();
        assert!(record.restarted.is_empty());
        let whys: Vec<_> = record.not_restarted.iter().map(|n| n.why).collect();
        assert_eq!(
            whys,
            vec![
                NotRestartedBecause::Forbidden,
                NotRestartedBecause::RolloutPaused
            ]
        );
        assert!(
            verdict.message.contains("may not patch deployments")
                && verdict
                    .message
                    .contains("deploy/components/workload-restart")
                && verdict.message.contains("rbac.workloadRestart=true")
                && verdict
                    .message
                    .contains("kubectl -n team-a rollout restart deployment/web")
                && verdict
                    .message
                    .contains("kubectl -n team-a rollout resume deployment/held"),
            "{}",
            verdict.message
        );
        let told: Vec<_> = verdict.events.iter().map(|e| e.reason).collect();
        assert!(
            told.contains(&EventReason::WorkloadsNotRestarted),
            "{told:?}"
        );
        assert!(!told.contains(&EventReason::WorkloadsRestarted));
    }
}
