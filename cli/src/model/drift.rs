//! How many resources drifted, and why: a restore of the server, or separate changes by the
//! people the audit log names. `status` sums it up; `diagnose` counts it for the DriftCount check.

use jiff::Timestamp;
use nauthera_shared::catalog::Cause;
use serde::Serialize;

use crate::model::view::ResourceView;

/// At most this many people are named in the drift summary.
const ACTORS_SHOWN: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DriftVerdict {
    /// Nothing drifted.
    None,
    /// One resource changed on the server.
    OneChange,
    /// Several, each a change of its own (by the people the audit log names).
    SeparateChanges,
    /// At least one drift comes from a restore of the server: its history restarted, or the
    /// audit log gives the write the restore cause. The reconciler says so in the drift's cause;
    /// how close together the drifts are says nothing about it.
    ServerRestore,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftSummary {
    pub count: usize,
    pub verdict: DriftVerdict,
    /// The drifts whose cause is a restore of the server (`backup_restore`).
    pub by_restore: usize,
    /// Who made the other changes, as the audit log names them (at most five, then a count).
    pub actors: Vec<String>,
    pub more_actors: usize,
    pub first: Option<Timestamp>,
    pub last: Option<Timestamp>,
}

/// How many drifted, and why: a restore of the server only where the reconciler found one (the
/// drift's cause), else separate changes by the people who made them.
pub fn drift_summary(views: &[ResourceView]) -> DriftSummary {
    let drifted: Vec<&ResourceView> = views.iter().filter(|view| view.is_drifted()).collect();
    let mut times: Vec<Timestamp> = drifted
        .iter()
        .filter_map(|view| view.drift_time())
        .collect();
    times.sort();
    let by_restore = drifted
        .iter()
        .filter(|view| view.cause() == Some(Cause::BackupRestore))
        .count();
    let mut actors: Vec<String> = drifted
        .iter()
        .filter(|view| view.cause() != Some(Cause::BackupRestore))
        .filter_map(|view| view.status.as_ref()?.drift.as_ref()?.actor.clone())
        .collect();
    actors.sort();
    actors.dedup();
    let more_actors = actors.len().saturating_sub(ACTORS_SHOWN);
    actors.truncate(ACTORS_SHOWN);
    let verdict = match drifted.len() {
        0 => DriftVerdict::None,
        _ if by_restore > 0 => DriftVerdict::ServerRestore,
        1 => DriftVerdict::OneChange,
        _ => DriftVerdict::SeparateChanges,
    };
    DriftSummary {
        count: drifted.len(),
        verdict,
        by_restore,
        actors,
        more_actors,
        first: times.first().copied(),
        last: times.last().copied(),
    }
}

impl DriftSummary {
    /// The people named, for a sentence: "alice, bob and 2 more".
    pub fn describe_actors(&self) -> Option<String> {
        if self.actors.is_empty() {
            return None;
        }
        let mut text = self.actors.join(", ");
        if self.more_actors > 0 {
            text.push_str(&format!(" and {} more", self.more_actors));
        }
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::view::fixtures::{at, drifted};

    #[test]
    fn only_a_restore_cause_makes_drifts_a_restore_however_close_together() {
        assert_eq!(drift_summary(&[]).verdict, DriftVerdict::None);
        let one = [drifted("a", "x", 1000)];
        assert_eq!(drift_summary(&one).verdict, DriftVerdict::OneChange);
        // Three edits by different people within a minute: separate changes, named.
        let mut close = [
            drifted("a", "x", 1000),
            drifted("b", "y", 1020),
            drifted("c", "z", 1040),
        ];
        for (view, actor) in close.iter_mut().zip(["alice", "bob", "carol"]) {
            if let Some(drift) = view.status.as_mut().and_then(|s| s.drift.as_mut()) {
                drift.actor = Some(actor.into());
            }
        }
        let summary = drift_summary(&close);
        assert_eq!(summary.verdict, DriftVerdict::SeparateChanges);
        assert_eq!(summary.by_restore, 0);
        assert_eq!(
            summary.describe_actors().as_deref(),
            Some("alice, bob, carol")
        );
        assert_eq!(summary.first, Some(at(1000)));
        assert_eq!(summary.last, Some(at(1040)));
        // One drift the reconciler attributes to a restore of the server makes it a restore.
        let mut restored = drifted("d", "w", 90_000);
        restored.status.as_mut().unwrap().cause = Some(Cause::BackupRestore);
        let mut all = close.to_vec();
        all.push(restored);
        let summary = drift_summary(&all);
        assert_eq!(summary.verdict, DriftVerdict::ServerRestore);
        assert_eq!(summary.by_restore, 1);
    }
}
