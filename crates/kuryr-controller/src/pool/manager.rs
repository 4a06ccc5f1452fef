//! The pool manager API (upstream §4.6, `[kubernetes] enable_manager`) on the unix socket
//! `[pool_manager] sock_file`, generalised to `(host, project, network)` pool keys and
//! answering JSON (upstream answered plain text without a status line):
//!
//! | request | body / query | answer |
//! |---|---|---|
//! | `GET /listPools` | | `[{host, project_id, network_id, available, in_use, cooling, creating, waiting}]` |
//! | `GET /showPool?host=&project_id=&network_id=` | | `{available: [ids], in_use, cooling, deleting}` |
//! | `POST /populatePool` | `{host, project_id, network_id, subnet_ids?, security_groups?, num_ports?}` | `{created: n}` |
//! | `POST /freePool` | `{host?}` (all pools without) | `{deleted: n}` |
//!
//! Errors are `{error: "..."}` with 400 (bad request) or 500/503 (Neutron).

use std::{path::Path, sync::Arc};

use axum::{
    Json, Router,
    extract::{Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use kuryr_core::pool::PoolKey;
use serde::Deserialize;
use serde_json::json;
use tokio::task::JoinHandle;
use tracing::{error, info};

use super::VifPool;
use crate::drivers::PodTarget;

/// `showPool` query.
#[derive(Debug, Deserialize)]
pub struct PoolQuery {
    /// Binding host.
    pub host: String,
    /// Project.
    pub project_id: String,
    /// Network.
    pub network_id: String,
}

/// `populatePool` body.
#[derive(Debug, Deserialize)]
pub struct PopulateBody {
    /// Binding host.
    pub host: String,
    /// Project.
    pub project_id: String,
    /// Network.
    pub network_id: String,
    /// Subnets (Neutron chooses when empty).
    #[serde(default)]
    pub subnet_ids: Vec<String>,
    /// Security groups.
    #[serde(default)]
    pub security_groups: Vec<String>,
    /// Ports to create (default `ports_pool_batch`).
    pub num_ports: Option<u32>,
}

/// `freePool` body.
#[derive(Debug, Default, Deserialize)]
pub struct FreeBody {
    /// Only this host's pools.
    pub host: Option<String>,
}

fn failure(e: &super::Error) -> Response {
    let code = if e.is_retryable() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    (code, Json(json!({"error": crate::error_chain(e)}))).into_response()
}

async fn list_pools(State(pool): State<Arc<VifPool>>) -> Response {
    Json(pool.pools()).into_response()
}

async fn show_pool(State(pool): State<Arc<VifPool>>, Query(q): Query<PoolQuery>) -> Response {
    let key = PoolKey::new(q.host, q.project_id, q.network_id);
    Json(pool.pool_ports(&key)).into_response()
}

async fn populate_pool(State(pool): State<Arc<VifPool>>, Json(b): Json<PopulateBody>) -> Response {
    let mut sgs = b.security_groups;
    sgs.sort();
    sgs.dedup();
    let target = PodTarget {
        project_id: b.project_id,
        network_id: b.network_id,
        subnet_ids: b.subnet_ids,
        security_groups: sgs,
    };
    let n = b.num_ports.unwrap_or(pool.settings().pool.batch);
    match pool.populate(&b.host, &target, Some(n)).await {
        Ok(created) => Json(json!({"created": created})).into_response(),
        Err(e) => failure(&e),
    }
}

async fn free_pool(State(pool): State<Arc<VifPool>>, body: Option<Json<FreeBody>>) -> Response {
    let host = body.and_then(|Json(b)| b.host);
    match pool.free_pools(host.as_deref()).await {
        Ok(deleted) => Json(json!({"deleted": deleted})).into_response(),
        Err(e) => failure(&e),
    }
}

/// The API's routes.
pub fn router(pool: Arc<VifPool>) -> Router {
    Router::new()
        .route("/listPools", get(list_pools))
        .route("/showPool", get(show_pool))
        .route("/populatePool", post(populate_pool))
        .route("/freePool", post(free_pool))
        .with_state(pool)
}

/// Serves the API on `path` (an existing socket file is replaced, as upstream does).
pub fn serve(pool: Arc<VifPool>, path: &Path) -> std::io::Result<JoinHandle<()>> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    info!(socket = %path.display(), "pool manager listening");
    let router = router(pool);
    Ok(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            error!(error = %e, "pool manager failed");
        }
    }))
}
