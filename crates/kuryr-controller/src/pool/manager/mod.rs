//! The pool manager API (upstream §4.6, `[kubernetes] enable_manager`) on the unix socket
//! `[pool_manager] sock_file`, generalised to `(host, project, network)` pool keys and
//! answering JSON (upstream answered plain text without a status line):
//!
//! | request | body / query | answer |
//! |---|---|---|
//! | `GET /listPools` | `?host=\|trunk=&project_id=&network_id=&ports=true` (all optional: filters; `ports` adds each pool's port IDs by state) | `[{host, project_id, network_id, available, in_use, cooling, creating, waiting, ports?}]` |
//! | `GET /showPool?host=&project_id=&network_id=` | | `{available: [ids], in_use, cooling, deleting}` |
//! | `POST /populatePool` | `{host \| trunk, project_id?, network_id?, subnet_ids?, security_groups?, num_ports?, namespace?}` | `{host, project_id, network_id, created: n}` |
//! | `POST /freePool` | `{host? \| trunk?}` (all pools without) | `{host, deleted: n}` |
//!
//! A node is named by `host` (its name) or `trunk` (an address of it: a worker VM's IP names
//! its trunk, as in upstream's requests). `populatePool` defaults the project, network, subnets
//! and security groups to what the pod drivers give a pod of `namespace` (default `default`).
//! Unknown fields are refused ([`native`]).
//!
//! Errors are `{error: "..."}` with 400 (bad request) or 500/503 (Neutron). One request asks
//! for at most [`MAX_POPULATE_PORTS`] ports a node and names at most [`MAX_TRUNKS`] nodes.
//!
//! Upstream's request bodies are accepted too ([`upstream`]), so its recipes and
//! `subports.py`-style tools keep working: `populatePool`/`freePool` with `{"trunks": [...],
//! "num_ports": N}` (a trunk is a node's IP or name) and `showPool` with a `{"pool_key": [node,
//! project_id, [security group ids]]}` body; those are answered in upstream's plain-text
//! sentences.

use std::{path::Path, sync::Arc};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Query, State},
    http::{StatusCode, Uri},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use kuryr_core::pool::PoolKey;
use serde::Deserialize;
use serde_json::json;
use tokio::task::JoinHandle;
use tracing::{error, info};

use super::VifPool;
use crate::drivers::Drivers;

#[cfg(test)]
mod fuzz;
mod native;
mod upstream;

/// The most ports one `populatePool` asks for on one node: a request body is no way to spend
/// the project's port quota by accident (more takes several requests).
pub const MAX_POPULATE_PORTS: u32 = 1000;
/// The most nodes one upstream `populatePool` / `freePool` names.
pub const MAX_TRUNKS: usize = 1000;

pub use native::{FreeBody, ListQuery, ListRow, PopulateBody};

/// What the API serves from: the pools, and (for upstream's bodies) the drivers that choose
/// the default project, subnets and security groups, and a client to resolve node IPs.
#[derive(Clone)]
pub struct Manager {
    /// The pools' executors (one per pool driver: several with the multi pool).
    pub pools: Vec<Arc<VifPool>>,
    /// Where populations go: the source routes a node to its driver's pools (a VM node's pool
    /// is filled with subports of its trunk).
    pub source: Arc<dyn super::PortSource>,
    /// The pod drivers (upstream's `populatePool` uses the defaults of an empty pod).
    pub drivers: Option<Arc<Drivers>>,
    /// Kubernetes (node IP → node name).
    pub client: Option<kube::Client>,
}

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

pub(super) fn failure(e: &super::Error) -> Response {
    let code = if e.is_retryable() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    (code, Json(json!({"error": crate::error_chain(e)}))).into_response()
}

impl Manager {
    /// Every pool of every executor.
    fn summaries(&self) -> Vec<super::PoolSummary> {
        self.pools.iter().flat_map(|p| p.pools()).collect()
    }

    /// The ports of pool `key`, wherever it is kept.
    fn pool_ports(&self, key: &PoolKey) -> super::PoolPorts {
        let mut out = super::PoolPorts::default();
        for p in &self.pools {
            let one = p.pool_ports(key);
            out.available.extend(one.available);
            out.in_use.extend(one.in_use);
            out.cooling.extend(one.cooling);
            out.deleting.extend(one.deleting);
        }
        out
    }

    /// Available ports of `host`'s pools of `project_id` with exactly `sgs`.
    fn available_with(&self, host: &str, project_id: &str, sgs: &kuryr_core::pool::SgSet) -> Vec<String> {
        self.pools
            .iter()
            .flat_map(|p| p.available_with(host, project_id, sgs))
            .collect()
    }

    /// Frees the pools of `host` (all without) in every executor; ports deleted.
    async fn free_pools(&self, host: Option<&str>) -> Result<usize, super::Error> {
        let mut n = 0;
        for p in &self.pools {
            n += p.free_pools(host).await?;
        }
        Ok(n)
    }

    /// `ports_pool_batch`.
    fn batch(&self) -> u32 {
        self.source.settings().pool.batch
    }
}

async fn show_pool(State(m): State<Manager>, uri: Uri, body: Bytes) -> Response {
    if let Some(key) = upstream::pool_key(&body) {
        return upstream::show(&m, key).await;
    }
    let Ok(Query(q)) = Query::<PoolQuery>::try_from_uri(&uri) else {
        return bad_request(
            "showPool needs ?host=&project_id=&network_id= (or upstream's {\"pool_key\": [...]} body)",
        );
    };
    let key = PoolKey::new(q.host, q.project_id, q.network_id);
    Json(m.pool_ports(&key)).into_response()
}

pub(super) fn bad_request(msg: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": msg}))).into_response()
}

async fn populate_pool(State(m): State<Manager>, body: Bytes) -> Response {
    match upstream::trunks(&body) {
        Some(req) => upstream::populate(&m, req).await,
        None => native::populate(&m, &body).await,
    }
}

async fn free_pool(State(m): State<Manager>, body: Bytes) -> Response {
    match upstream::trunks(&body) {
        Some(req) => upstream::free(&m, req).await,
        None => native::free(&m, &body).await,
    }
}

/// The API's routes.
pub fn router(manager: Manager) -> Router {
    Router::new()
        .route("/listPools", get(native::list))
        .route("/showPool", get(show_pool))
        .route("/populatePool", post(populate_pool))
        .route("/freePool", post(free_pool))
        .with_state(manager)
}

/// Serves the API on `path` (an existing socket file is replaced, as upstream does).
pub fn serve(manager: Manager, path: &Path) -> std::io::Result<JoinHandle<()>> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    info!(socket = %path.display(), "pool manager listening");
    let router = router(manager);
    Ok(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            error!(error = %e, "pool manager failed");
        }
    }))
}
