//! The CNI API server (`[cni_daemon] bind_address`, TCP `host:port` or `unix:/path`): the
//! upstream endpoints `POST /addNetwork` (202 + VIF) and `POST /delNetwork` (204) and the
//! kuryr-rs extensions `POST /checkNetwork`, `POST /gcNetworks`, `GET /status`, exactly as
//! `kuryr-cni-api` describes them. Every error is a CNI error body `{code, msg, details}`; no
//! input makes the server panic or stop.

use std::{sync::Arc, time::Instant};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use kuryr_cni_api::{CniError, Verb, daemon::http_status_for};
use tracing::{info, warn};

use crate::{
    daemon::{Daemon, OpError, error_chain},
    request,
};

fn error_response(e: &CniError) -> Response {
    let status = StatusCode::from_u16(http_status_for(e.code)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_string(e).unwrap_or_else(|_| "{}".into());
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Serves one CNI verb with a request body, as the API does (metrics and the failure count of
/// health included): the VIF of an ADD, nothing for the other verbs, or the CNI error. Hollow
/// nodes call it in-process, without a socket.
pub async fn call(daemon: &Daemon, verb: Verb, body: &[u8]) -> Result<Option<serde_json::Value>, CniError> {
    let started = Instant::now();
    let settings_proc_dir = daemon_proc_dir(daemon);
    let result: Result<Option<serde_json::Value>, OpError> = async {
        let req = request::parse_body(body).map_err(OpError::Invalid)?;
        let call = request::validate(&req, verb, settings_proc_dir.as_deref()).map_err(OpError::Invalid)?;
        match verb {
            Verb::Add => daemon.add(&call).await.map(Some),
            Verb::Del => daemon.del(&call).await.map(|()| None),
            Verb::Check => daemon.check(&call).await.map(|()| None),
            _ => daemon.gc(&call).await.map(|_| None),
        }
    }
    .await;
    let took = started.elapsed();
    match result {
        Ok(done) => {
            daemon.metrics.request(verb.as_str(), "ok", took);
            Ok(done)
        }
        Err(e) => {
            daemon.metrics.request(verb.as_str(), e.kind(), took);
            if e.is_internal() {
                daemon.metrics.failures.inc();
                let n = daemon.health.as_ref().map_or(0, |h| h.failed());
                warn!(command = verb.as_str(), failures = n, error = %error_chain(&e), "CNI request failed");
            } else {
                info!(command = verb.as_str(), error = %error_chain(&e), "CNI request refused");
            }
            Err(e.to_cni())
        }
    }
}

async fn handle(daemon: Arc<Daemon>, verb: Verb, body: Bytes) -> Response {
    match call(&daemon, verb, &body).await {
        Ok(Some(vif)) => (
            StatusCode::ACCEPTED,
            [(header::CONTENT_TYPE, "application/json")],
            vif.to_string(),
        )
            .into_response(),
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error_response(&e),
    }
}

fn daemon_proc_dir(d: &Daemon) -> Option<String> {
    d.settings.netns_proc_dir.clone()
}

/// The router of the CNI API.
pub fn router(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .route(
            "/addNetwork",
            post(|State(d): State<Arc<Daemon>>, b: Bytes| handle(d, Verb::Add, b)),
        )
        .route(
            "/delNetwork",
            post(|State(d): State<Arc<Daemon>>, b: Bytes| handle(d, Verb::Del, b)),
        )
        .route(
            "/checkNetwork",
            post(|State(d): State<Arc<Daemon>>, b: Bytes| handle(d, Verb::Check, b)),
        )
        .route(
            "/gcNetworks",
            post(|State(d): State<Arc<Daemon>>, b: Bytes| handle(d, Verb::Gc, b)),
        )
        .route(
            "/status",
            get(|State(d): State<Arc<Daemon>>| async move {
                let started = Instant::now();
                let r = d.status().await;
                let outcome = if r.is_ok() { "ok" } else { "not_ready" };
                d.metrics.request("STATUS", outcome, started.elapsed());
                match r {
                    Ok(()) => StatusCode::OK.into_response(),
                    Err(e) => error_response(&e),
                }
            }),
        )
        .with_state(daemon)
}
