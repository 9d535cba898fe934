//! The two small HTTP servers: `/metrics` on the metrics address, `/healthz` (liveness only) and
//! `/readyz` (the control-plane probe) on the probe address. Kept out of request tracing.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::kubernetes::leader::{LeaseSettings, Standing};
use crate::process::metrics::Metrics;
use crate::process::probe::ProbeState;

/// Binds both listeners, so that an address in use fails at start with its name.
pub async fn bind(address: SocketAddr, setting: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|error| anyhow::anyhow!("{setting}: cannot listen on {address}: {error}"))
}

/// Serves `/metrics`.
pub async fn serve_metrics(listener: TcpListener, metrics: Metrics) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .with_state(metrics);
    axum::serve(listener, app).await
}

async fn metrics_text(State(metrics): State<Metrics>) -> impl IntoResponse {
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

/// Whether the process still does its work: `None` while it does, else which task stopped.
/// A stopped task is not coming back, so the kubelet should restart the container.
pub type Liveness = watch::Receiver<Option<String>>;

/// What `/healthz` and `/readyz` answer from.
#[derive(Clone)]
pub struct ProbeSources {
    pub probe: watch::Receiver<ProbeState>,
    pub standing: watch::Receiver<Standing>,
    pub lease: LeaseSettings,
    pub liveness: Liveness,
}

/// Serves `/healthz` and `/readyz`.
pub async fn serve_probes(listener: TcpListener, sources: ProbeSources) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(sources);
    axum::serve(listener, app).await
}

async fn healthz(State(routes): State<ProbeSources>) -> impl IntoResponse {
    match routes.liveness.borrow().clone() {
        None => (StatusCode::OK, "ok\n".to_owned()),
        Some(stopped) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("stopped: {stopped}\n"),
        ),
    }
}

/// Ready when the control plane answers and the replica knows where it stands in the election:
/// a leader that stepped down because it could not renew is not.
async fn readyz(State(sources): State<ProbeSources>) -> impl IntoResponse {
    let probe = sources.probe.borrow().clone();
    let standing = sources.standing.borrow().clone();
    let status = if probe.ready() && standing.ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let text = probe.readiness_text() + &standing.readiness_text(&sources.lease);
    (status, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nauthera_shared::catalog::Reason;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get_text(address: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).await.unwrap();
        text
    }

    #[tokio::test]
    async fn readiness_follows_the_probe_and_liveness_does_not() {
        let listener = bind("127.0.0.1:0".parse().unwrap(), "--probe-address")
            .await
            .unwrap();
        let address = listener.local_addr().unwrap();
        let (sender, receiver) = watch::channel(ProbeState::default());
        let (alive, liveness) = watch::channel(None);
        let (standing_sender, standing) = watch::channel(Standing::Following {
            holder: "replica-b".into(),
        });
        let lease = LeaseSettings {
            name: "nauthera-reconciler".into(),
            namespace: "nauthera-system".into(),
            identity: "replica-a".into(),
            timing: crate::kubernetes::leader::LeaseTiming::default(),
        };
        tokio::spawn(serve_probes(
            listener,
            ProbeSources {
                probe: receiver,
                standing,
                lease,
                liveness,
            },
        ));

        let text = get_text(address, "/readyz").await;
        assert!(text.starts_with("HTTP/1.1 503"), "{text}");
        assert!(text.contains("not probed yet"), "{text}");
        sender.send_replace(ProbeState {
            checked_at: Some(jiff::Timestamp::UNIX_EPOCH),
            failure: Some(Reason::CredentialUnavailable),
            message: "client certificate or key unavailable".into(),
            ..ProbeState::default()
        });
        let text = get_text(address, "/readyz").await;
        assert!(text.starts_with("HTTP/1.1 503"), "{text}");
        assert!(
            text.contains("control plane: CredentialUnavailable: client certificate"),
            "{text}"
        );
        assert!(
            get_text(address, "/healthz")
                .await
                .starts_with("HTTP/1.1 200")
        );
        sender.send_replace(ProbeState {
            checked_at: Some(jiff::Timestamp::UNIX_EPOCH),
            ..ProbeState::default()
        });
        let text = get_text(address, "/readyz").await;
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("following replica-b"), "{text}");
        // A leader that could not renew its Lease says so and is not ready.
        standing_sender.send_replace(Standing::Unsure {
            error: "no answer within 2s".into(),
            stepped_down: true,
        });
        let text = get_text(address, "/readyz").await;
        assert!(text.starts_with("HTTP/1.1 503"), "{text}");
        assert!(text.contains("leader election: stepped down"), "{text}");
        // Liveness fails only when a task the process needs has stopped.
        alive.send_replace(Some("the control-plane probe".into()));
        let text = get_text(address, "/healthz").await;
        assert!(text.starts_with("HTTP/1.1 503"), "{text}");
        assert!(text.contains("stopped: the control-plane probe"), "{text}");
    }

    #[tokio::test]
    async fn metrics_are_served_and_a_taken_port_is_named() {
        let listener = bind("127.0.0.1:0".parse().unwrap(), "--metrics-address")
            .await
            .unwrap();
        let address = listener.local_addr().unwrap();
        let error = bind(address, "--metrics-address")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("--metrics-address: cannot listen on"),
            "{error}"
        );
        let metrics = Metrics::new();
        metrics.set_control_plane_up(true);
        tokio::spawn(serve_metrics(listener, metrics));
        let text = get_text(address, "/metrics").await;
        assert!(
            text.contains("nauthera_operator_control_plane_up 1"),
            "{text}"
        );
    }
}
