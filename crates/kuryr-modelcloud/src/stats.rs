//! What the model cloud counts (requests, queueing and service time per operation) and its own
//! routes: `GET /__model/stats`, `POST /__model/plugged`.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde::{Deserialize, Serialize};

use crate::{Cloud, lock};

/// Per operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpStats {
    /// Requests answered.
    pub requests: u64,
    /// Of which answered with an error.
    pub errors: u64,
    /// Requests whose client went away (its timeout) before they were answered — while queued
    /// for a worker or being served; not in `requests`.
    #[serde(default)]
    pub abandoned: u64,
    /// Items (ports of a bulk, rules, entries listed).
    pub items: u64,
    /// Time spent waiting for a worker, summed (ms).
    pub wait_ms: f64,
    /// Longest wait (ms).
    pub max_wait_ms: f64,
    /// Service time, summed (ms).
    pub service_ms: f64,
}

/// Everything counted since start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Seconds since the cloud started.
    pub uptime_s: f64,
    /// Per operation name (`kuryr_openstack::ops`).
    pub ops: BTreeMap<String, OpStats>,
    /// Ports reported plugged.
    pub plugged: u64,
}

impl Stats {
    /// Requests of every operation.
    pub fn requests(&self) -> u64 {
        self.ops.values().map(|o| o.requests).sum()
    }
}

impl Cloud {
    pub(crate) fn record(&self, op: &str, items: usize, wait: Duration, service: Duration, ok: bool) {
        let mut s = lock(&self.stats);
        let o = s.ops.entry(op.to_string()).or_default();
        o.requests += 1;
        o.errors += u64::from(!ok);
        o.items += items as u64;
        let w = wait.as_secs_f64() * 1000.0;
        o.wait_ms += w;
        o.max_wait_ms = o.max_wait_ms.max(w);
        o.service_ms += service.as_secs_f64() * 1000.0;
    }
}

impl Cloud {
    pub(crate) fn record_abandoned(&self, op: &str) {
        lock(&self.stats).ops.entry(op.to_string()).or_default().abandoned += 1;
    }
}

/// Counts its operation as abandoned when dropped before [`Pending::done`] (axum drops a
/// handler's future when its client disconnects).
pub(crate) struct Pending<'a> {
    pub(crate) cloud: &'a Cloud,
    pub(crate) op: &'static str,
    pub(crate) done: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.cloud.record_abandoned(self.op);
        }
    }
}

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    Router::new()
        .route("/__model/stats", get(stats))
        .route("/__model/plugged", post(plugged))
}

async fn stats(State(c): State<Arc<Cloud>>) -> Json<Stats> {
    Json(c.stats())
}

#[derive(Deserialize)]
struct Plugged {
    port_id: String,
}

async fn plugged(State(c): State<Arc<Cloud>>, body: axum::body::Bytes) -> Response {
    let p: Plugged = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("expected {{\"port_id\": \"…\"}}: {e}"),
            )
                .into_response();
        }
    };
    if c.plugged(&p.port_id) {
        lock(&c.stats).plugged += 1;
        StatusCode::ACCEPTED.into_response()
    } else {
        (StatusCode::NOT_FOUND, format!("no port {}", p.port_id)).into_response()
    }
}
