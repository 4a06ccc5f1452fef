//! The health and metrics servers every kuryr-rs daemon runs: binding (upstream listens on
//! `[::]`; hosts without IPv6 fall back to `0.0.0.0`), serving an axum router in the
//! background, `GET /ready` and `GET /alive` answered by a [`Probe`], `GET /metrics` by an
//! [`Exposition`].

use std::{
    future::Future,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::get,
};
use tokio::{net::TcpListener, task::JoinHandle};

/// A listening socket could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("binding the {what} on {addr}")]
pub struct BindError {
    /// Which server.
    pub what: &'static str,
    /// The address tried last.
    pub addr: SocketAddr,
    /// Cause.
    #[source]
    pub source: std::io::Error,
}

/// Binds `addr`, or when it is `None` `[::]:port`, falling back to `0.0.0.0:port` on hosts
/// without IPv6.
pub async fn bind(what: &'static str, addr: Option<SocketAddr>, port: u16) -> Result<TcpListener, BindError> {
    let err = |addr, source| BindError { what, addr, source };
    match addr {
        Some(a) => TcpListener::bind(a).await.map_err(|e| err(a, e)),
        None => {
            let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
            match TcpListener::bind(v6).await {
                Ok(l) => Ok(l),
                Err(_) => {
                    let v4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
                    TcpListener::bind(v4).await.map_err(|e| err(v4, e))
                }
            }
        }
    }
}

/// Serves `router` on `listener` in the background; the task ends (logging why) only when the
/// server fails.
pub fn serve(what: &'static str, listener: TcpListener, router: Router) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(server = what, error = %e, "HTTP server failed");
        }
    })
}

/// What `/ready` and `/alive` answer: a status and a message (upstream's texts).
pub trait Probe: Send + Sync + 'static {
    /// `GET /ready`.
    fn ready(&self) -> impl Future<Output = (StatusCode, String)> + Send;
    /// `GET /alive`.
    fn alive(&self) -> impl Future<Output = (StatusCode, String)> + Send;
}

/// Router serving `GET /ready` and `GET /alive` from `probe`.
pub fn health_router<P: Probe>(probe: Arc<P>) -> Router {
    Router::new()
        .route(
            "/ready",
            get(|State(p): State<Arc<P>>| async move { p.ready().await }),
        )
        .route(
            "/alive",
            get(|State(p): State<Arc<P>>| async move { p.alive().await }),
        )
        .with_state(probe)
}

/// A Prometheus registry that can be rendered in the OpenMetrics text format.
pub trait Exposition: Send + Sync + 'static {
    /// The metrics as OpenMetrics text.
    fn encode(&self) -> Result<String, std::fmt::Error>;
}

/// Router serving `GET /metrics` from `metrics`.
pub fn metrics_router<M: Exposition>(metrics: Arc<M>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(m): State<Arc<M>>| async move {
                match m.encode() {
                    Ok(body) => (
                        StatusCode::OK,
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        body,
                    )
                        .into_response(),
                    Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "encoding failed").into_response(),
                }
            }),
        )
        .with_state(metrics)
}
