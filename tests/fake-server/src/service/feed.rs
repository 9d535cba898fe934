//! One open WatchChanges stream: it sends the replayed changes, then every live one, each held
//! while the server is hung (so nothing is delivered during a hang, and everything in order
//! after). It ends when the server stops listening or the caller goes away (quietly), or with a
//! fault's status when a mid-stream fault hits or `break_streams` breaks every open stream.

use std::sync::Arc;

use nauthera_proto::v1::ChangeEvent;
use tokio::sync::{broadcast, mpsc, watch};
use tonic::Status;

use super::{Shared, fault_status};
use crate::controls::{FaultCode, Injected, Stage};
use crate::method::Method;
use crate::state::random_unit;

/// Where a stream's events go: tonic reads the other end.
pub(super) type Events = mpsc::Sender<Result<ChangeEvent, Status>>;

/// Why a stream ends.
enum End {
    /// The server stopped listening or the caller went away: nothing more to say.
    Quietly,
    /// A fault broke the stream: the caller gets this status last.
    Broken(Status),
}

/// What ends a stream whatever it is doing: waiting for a change, for a hang's end, or for room
/// to send.
struct Interruptions {
    stopped: watch::Receiver<u64>,
    breaks: watch::Receiver<Option<FaultCode>>,
}

impl Interruptions {
    /// Resolves when the stream must end. Cancel-safe, so it can race each step.
    async fn next(&mut self, shared: &Shared, sender: &Events) -> End {
        tokio::select! {
            _ = self.stopped.changed() => End::Quietly,
            () = sender.closed() => End::Quietly,
            changed = self.breaks.changed() => {
                let code = *self.breaks.borrow_and_update();
                match (changed, code) {
                    (Ok(()), Some(code)) => {
                        shared.controls().count_fault(Method::WatchChanges);
                        End::Broken(fault_status(Injected::broken_stream(code)))
                    }
                    // Only a dropped sender (the server is gone) gets here.
                    _ => End::Quietly,
                }
            }
        }
    }
}

/// An open stream's sending side.
pub(super) struct Feed {
    shared: Arc<Shared>,
    sender: Events,
    interruptions: Interruptions,
}

impl Feed {
    /// A stream that starts now: breaks and stops from before it do not end it.
    pub(super) fn new(shared: Arc<Shared>, sender: Events) -> Feed {
        let interruptions = Interruptions {
            stopped: shared.stopped.subscribe(),
            breaks: shared.breaks.subscribe(),
        };
        Feed {
            shared,
            sender,
            interruptions,
        }
    }

    /// Sends `first`, then every change, until the stream ends; a broken stream ends with its
    /// fault's status.
    pub(super) async fn run(
        mut self,
        first: Vec<ChangeEvent>,
        changes: broadcast::Receiver<ChangeEvent>,
    ) {
        if let End::Broken(status) = self.feed(first, changes).await {
            let _ = self.sender.send(Err(status)).await;
        }
    }

    async fn feed(
        &mut self,
        first: Vec<ChangeEvent>,
        mut changes: broadcast::Receiver<ChangeEvent>,
    ) -> End {
        for event in first {
            if let Err(end) = self.deliver(event).await {
                return end;
            }
        }
        loop {
            let event = tokio::select! {
                end = self.interruptions.next(&self.shared, &self.sender) => return end,
                received = changes.recv() => match received {
                    Ok(event) => event,
                    // Too slow a reader (or a long hang) missed changes: it must list again.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.shared.core().history.resync_event()
                    }
                    Err(broadcast::error::RecvError::Closed) => return End::Quietly,
                },
            };
            if let Err(end) = self.deliver(event).await {
                return end;
            }
        }
    }

    /// Sends one event once the server is not hung, unless a mid-stream fault breaks the stream
    /// first (it draws once per event, as other faults draw once per call).
    async fn deliver(&mut self, event: ChangeEvent) -> Result<(), End> {
        tokio::select! {
            end = self.interruptions.next(&self.shared, &self.sender) => return Err(end),
            () = self.shared.while_hung() => {}
        }
        let fault = self.shared.controls().take_fault(
            Method::WatchChanges,
            random_unit(),
            Stage::MidStream,
        );
        if let Some(fault) = fault {
            return Err(End::Broken(fault_status(fault)));
        }
        tokio::select! {
            end = self.interruptions.next(&self.shared, &self.sender) => Err(end),
            sent = self.sender.send(Ok(event)) => sent.map_err(|_| End::Quietly),
        }
    }
}
