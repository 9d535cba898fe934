//! The control-plane probe: GetServerInfo every minute (every 15 s while it fails), connecting
//! anew each time so that the three TLS files are read again and a renewed certificate is used
//! without a restart. Its state feeds `/readyz`, the `control_plane_up` metric and the published
//! control-plane state.

use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use nauthera_client::{CallError, CertificateInfo, ConnectError, read_certificate_info};
use nauthera_proto::v1;
use nauthera_shared::catalog::Reason;
use tokio::sync::{Notify, watch};

use crate::process::metrics::Metrics;
use crate::server::admin::AdminApi;

/// What the last probe found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProbeState {
    /// When the probe last ran; `None` before the first probe.
    pub checked_at: Option<Timestamp>,
    /// Since when the probe finds its current outcome: the first of the probes in a row that
    /// found the server answering, or failing with the same reason.
    pub since: Option<Timestamp>,
    /// `None` while the server answers; else `Unreachable`, `Refused`, `CredentialUnavailable`
    /// or `TrustAnchorUnavailable`.
    pub failure: Option<Reason>,
    /// What failed, for people; empty while the server answers.
    pub message: String,
    /// What the server said about itself and the caller (kept from the last answer).
    pub server: Option<v1::ServerInfo>,
    /// When the server last answered.
    pub last_success: Option<Timestamp>,
    /// The client certificate's expiry and identities, if it can be read.
    pub certificate: Option<CertificateInfo>,
}

impl ProbeState {
    /// Whether the reconciler is ready: the probe ran and the server answered.
    pub fn ready(&self) -> bool {
        self.checked_at.is_some() && self.failure.is_none()
    }

    /// The `/readyz` body.
    pub fn readiness_text(&self) -> String {
        match (self.checked_at, self.failure) {
            (None, _) => "control plane: not probed yet\n".to_owned(),
            (Some(_), None) => "control plane: ok\n".to_owned(),
            (Some(_), Some(reason)) => format!("control plane: {reason}: {}\n", self.message),
        }
    }
}

/// The state after one probe, from its result. Keeps the last answer's server facts.
pub fn after_probe(
    previous: &ProbeState,
    result: Result<v1::ServerInfo, CallError>,
    certificate: Option<CertificateInfo>,
    now: Timestamp,
) -> ProbeState {
    let answered = result.is_ok();
    let (failure, message, server) = match result {
        Ok(info) => (None, String::new(), Some(info)),
        Err(error) => {
            let reason = match &error {
                CallError::Connect(ConnectError::Unreachable { .. }) => Reason::Unreachable,
                CallError::Connect(ConnectError::CredentialUnavailable { .. }) => {
                    Reason::CredentialUnavailable
                }
                CallError::Connect(ConnectError::TrustAnchorUnavailable { .. }) => {
                    Reason::TrustAnchorUnavailable
                }
                CallError::Server(server) if server.is_retryable() => Reason::Unreachable,
                CallError::Server(_) => Reason::Refused,
            };
            let message = match &error {
                CallError::Server(server) => {
                    crate::reconcile::decide::refusal_message(server, "GetServerInfo")
                }
                CallError::Connect(connect) => connect.to_string(),
            };
            (Some(reason), message, previous.server.clone())
        }
    };
    // The outcome goes on while the reason stays; a new message alone does not restart it.
    let since = match previous.since {
        Some(since) if previous.checked_at.is_some() && previous.failure == failure => since,
        _ => now,
    };
    ProbeState {
        checked_at: Some(now),
        since: Some(since),
        failure,
        message,
        server,
        last_success: if answered {
            Some(now)
        } else {
            previous.last_success
        },
        certificate,
    }
}

/// How long until the next probe.
pub fn next_probe_in(state: &ProbeState, interval: Duration, retry_interval: Duration) -> Duration {
    if state.failure.is_some() {
        retry_interval
    } else {
        interval
    }
}

/// Probes forever, publishing each state into `sender`. A failed connection of any call
/// (`connection_failed`) brings the next probe forward while the control plane looks healthy,
/// so an outage a reconcile or the change stream noticed shows in readiness within seconds.
pub async fn run<A: AdminApi>(
    admin: &A,
    certificate: &Path,
    interval: Duration,
    retry_interval: Duration,
    metrics: &Metrics,
    sender: &watch::Sender<ProbeState>,
    connection_failed: &Notify,
) {
    loop {
        admin.reconnect().await;
        let result = admin.get_server_info().await;
        let certificate = read_certificate_info(certificate).ok();
        let previous = sender.borrow().clone();
        let state = after_probe(&previous, result, certificate, Timestamp::now());
        metrics.set_control_plane_up(state.failure.is_none());
        match (&state.failure, &state.server) {
            (None, Some(info)) => {
                if previous.failure.is_some()
                    || previous.server.as_ref().map(|s| &s.build) != Some(&info.build)
                    || previous.checked_at.is_none()
                {
                    tracing::info!(
                        build = %info.build,
                        api_version = %info.api_version,
                        identity = %info.identity,
                        "the control plane answered"
                    );
                }
            }
            (Some(reason), _) => tracing::warn!(
                reason = reason.as_str(),
                detail = %state.message,
                "the control-plane probe failed"
            ),
            (None, None) => {}
        }
        let wait = next_probe_in(&state, interval, retry_interval);
        let healthy = state.failure.is_none();
        sender.send_replace(state);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = connection_failed.notified(), if healthy => {
                tracing::info!("a call's connection failed: probing now");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nauthera_client::{ConnectProblem, ServerError};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn info() -> v1::ServerInfo {
        v1::ServerInfo {
            build: "nauthera-server 0.14.2 (3f2a9c1)".into(),
            identity: "dns:nauthera-operator.nauthera.svc".into(),
            ..v1::ServerInfo::default()
        }
    }

    #[test]
    fn readiness_starts_false_and_follows_the_probe() {
        let start = ProbeState::default();
        assert!(!start.ready());
        let ok = after_probe(&start, Ok(info()), None, at(0));
        assert!(ok.ready());
        assert_eq!(ok.readiness_text(), "control plane: ok\n");
        assert_eq!(
            next_probe_in(&ok, Duration::from_secs(60), Duration::from_secs(15)),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn each_failure_has_its_reason_and_keeps_the_last_answer() {
        let ok = after_probe(&ProbeState::default(), Ok(info()), None, at(0));
        let cases = [
            (
                CallError::Connect(ConnectError::Unreachable {
                    address: "server:8443".into(),
                    problem: ConnectProblem::Transport,
                    cause: "connection refused".into(),
                }),
                Reason::Unreachable,
            ),
            (
                CallError::Connect(ConnectError::CredentialUnavailable {
                    path: "/tls/tls.key".into(),
                    problem: ConnectProblem::Unreadable,
                    cause: "missing".into(),
                }),
                Reason::CredentialUnavailable,
            ),
            (
                CallError::Connect(ConnectError::TrustAnchorUnavailable {
                    path: "/tls/ca.crt".into(),
                    problem: ConnectProblem::Unreadable,
                    cause: "missing".into(),
                }),
                Reason::TrustAnchorUnavailable,
            ),
            (
                CallError::Server(ServerError::from_status(&tonic::Status::permission_denied(
                    "identity not allowed",
                ))),
                Reason::Refused,
            ),
        ];
        for (error, reason) in cases {
            let state = after_probe(&ok, Err(error), None, at(60));
            assert_eq!(state.failure, Some(reason));
            assert!(!state.ready());
            assert!(
                state
                    .readiness_text()
                    .starts_with(&format!("control plane: {reason}: ")),
                "{}",
                state.readiness_text()
            );
            assert_eq!(state.server, ok.server);
            assert_eq!(
                next_probe_in(&state, Duration::from_secs(60), Duration::from_secs(15)),
                Duration::from_secs(15)
            );
        }
    }

    #[test]
    fn the_outcome_holds_since_its_first_probe_and_the_last_answer_stays_while_failing() {
        let unreachable = || {
            CallError::Connect(ConnectError::Unreachable {
                address: "server:8443".into(),
                problem: ConnectProblem::Transport,
                cause: "connection refused".into(),
            })
        };
        let first = after_probe(&ProbeState::default(), Ok(info()), None, at(0));
        assert_eq!(first.since, Some(at(0)));
        let again = after_probe(&first, Ok(info()), None, at(60));
        assert_eq!(again.since, Some(at(0)));
        assert_eq!(again.last_success, Some(at(60)));

        let failing = after_probe(&again, Err(unreachable()), None, at(120));
        assert_eq!(failing.since, Some(at(120)));
        assert_eq!(failing.last_success, Some(at(60)));
        let still = after_probe(&failing, Err(unreachable()), None, at(135));
        assert_eq!(still.since, Some(at(120)));
        assert_eq!(still.last_success, Some(at(60)));
        let refused = after_probe(
            &still,
            Err(CallError::Server(ServerError::from_status(
                &tonic::Status::permission_denied("identity not allowed"),
            ))),
            None,
            at(150),
        );
        assert_eq!(
            refused.since,
            Some(at(150)),
            "another reason is another outcome"
        );

        let back = after_probe(&refused, Ok(info()), None, at(165));
        assert_eq!(back.since, Some(at(165)));
        assert_eq!(back.last_success, Some(at(165)));
    }
}
