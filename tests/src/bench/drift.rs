//! The drift measure, the same for the reconciler and the controller-runtime peer: one
//! out-of-band edit on the server at a time, the time until the benchmark's watches show the
//! client Drifted, and the reconciles and server calls each edit caused (counted until
//! `settle` after the drift shows, so trailing echoes count too).

use std::future::Future;
use std::time::{Duration, Instant};

use nauthera_fake_server::Actor;
use nauthera_shared::catalog::Reason;

use super::measure::difference;
use super::observer::Observer;
use super::report::Quantiles;
use super::workload::ClientItem;
use crate::e2e::Stack;

/// What the edits measured, one value per edit (latencies only of the edits seen as Drifted).
#[derive(Debug, Default)]
pub struct Edits {
    pub latencies: Vec<Duration>,
    pub reconciles: Vec<f64>,
    pub server_calls: Vec<f64>,
}

impl Edits {
    pub fn latency_ms(&self) -> Quantiles {
        Quantiles::of(
            self.latencies
                .iter()
                .map(|d| d.as_secs_f64() * 1000.0)
                .collect(),
        )
    }

    pub fn reconciles_per_edit(&self) -> Quantiles {
        Quantiles::of(self.reconciles.clone())
    }

    pub fn server_calls_per_edit(&self) -> Quantiles {
        Quantiles::of(self.server_calls.clone())
    }
}

/// Edits each client's display name on the server as a person would, one at a time, and
/// measures the controller whose reconcile count `reconciles` reads.
pub async fn edit_each<F, Counted>(
    stack: &Stack,
    observer: &Observer,
    clients: &[ClientItem],
    timeout: Duration,
    settle: Duration,
    reconciles: F,
) -> anyhow::Result<Edits>
where
    F: Fn() -> Counted,
    Counted: Future<Output = f64>,
{
    let mut edits = Edits::default();
    for client in clients {
        let key = &client.key;
        let reconciles_before = reconciles().await;
        let calls_before = stack.server.counters().calls;
        let edited = Instant::now();
        stack
            .server
            .edit_client(
                &client.object_ref(),
                &Actor::dashboard("bench@example.com"),
                |spec| spec.display_name.push_str(" (edited)"),
            )
            .map_err(|e| anyhow::anyhow!("cannot edit {}: {e}", key.name))?;
        let seen = observer
            .wait_until(edited + timeout, |seen| {
                seen.reason(key) == Some(Reason::Drifted)
            })
            .await;
        if let Some(at) = seen {
            edits.latencies.push(at - edited);
        }
        tokio::time::sleep(settle).await;
        edits
            .reconciles
            .push(reconciles().await - reconciles_before);
        let moved = difference(&stack.server.counters().calls, &calls_before);
        edits.server_calls.push(moved.values().sum::<u64>() as f64);
    }
    Ok(edits)
}
