//! A model cloud for scale tests (issue 39), **for scale only**: every feature of kuryr-rs is
//! proven on the real sandbox cloud. It serves the Keystone and Neutron calls kuryr-rs makes
//! (same paths, JSON, error bodies and codes, tags, `fields`, `limit`/`marker` pagination, bulk
//! creates) over the in-memory [`FakeNeutron`]'s state, and makes each request wait and cost
//! what [`model::Model`] says the real one does. Octavia is next.
//!
//! Beside the OpenStack APIs: `POST /__model/plugged` (`{"port_id": …}`: a node plugged the
//! port; it goes ACTIVE after the model's delay, as ovn-controller's claim does) and
//! `GET /__model/stats` (requests, queueing and service time per operation).

pub mod keystone;
pub mod model;
pub mod neutron;
mod stats;
pub mod wire;

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Router, response::Response};
use kuryr_openstack::fake::FakeNeutron;
use tokio::sync::Semaphore;

pub use model::{Cost, Model};
pub use stats::{OpStats, Stats};

/// The shared state of one model cloud.
pub struct Cloud {
    /// The state behind the Neutron API (seed networks and subnet pools through it).
    pub neutron: FakeNeutron,
    model: Model,
    workers: Semaphore,
    /// Bulk port creations in flight per network (IPAM collisions).
    bulks: Mutex<HashMap<String, usize>>,
    stats: Mutex<Stats>,
    /// This server's URL (for the catalog and pagination links), set once bound.
    base: Mutex<String>,
    started: Instant,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Cloud {
    /// A cloud over `neutron` priced by `model`.
    pub fn new(neutron: FakeNeutron, model: Model) -> Arc<Self> {
        Arc::new(Cloud {
            neutron,
            workers: Semaphore::new(model.neutron_workers.max(1)),
            model,
            bulks: Mutex::default(),
            stats: Mutex::default(),
            base: Mutex::default(),
            started: Instant::now(),
        })
    }

    /// The model in use.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// This server's URL (empty before [`serve`] bound it).
    pub fn base(&self) -> String {
        lock(&self.base).clone()
    }

    /// Requests, queueing and service time so far, per operation.
    pub fn stats(&self) -> Stats {
        let mut s = lock(&self.stats).clone();
        s.uptime_s = self.started.elapsed().as_secs_f64();
        s
    }

    /// A node plugged `port_id`: it goes ACTIVE after the model's delay (false: unknown port).
    pub fn plugged(self: &Arc<Self>, port_id: &str) -> bool {
        if self.neutron.port(port_id).is_none() {
            return false;
        }
        let (lo, hi) = self.model.active_after_plug_ms;
        let delay = Duration::from_millis(lo + spread(port_id, hi.saturating_sub(lo)));
        let me = self.clone();
        let id = port_id.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            me.neutron.activate(&id);
        });
        true
    }
}

/// A stable pseudo-random value in `0..=span` from `key` (no RNG: runs repeat).
fn spread(key: &str, span: u64) -> u64 {
    if span == 0 {
        return 0;
    }
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    h % (span + 1)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Every route: Keystone under `/identity`, Neutron under `/network`, the model's own under
/// `/__model`.
pub fn router(cloud: Arc<Cloud>) -> Router {
    Router::new()
        .merge(keystone::routes())
        .merge(neutron::routes())
        .merge(stats::routes())
        .fallback(not_found)
        .with_state(cloud)
}

async fn not_found(uri: axum::http::Uri) -> Response {
    neutron::fault(
        axum::http::StatusCode::NOT_FOUND,
        "HTTPNotFound",
        &format!("The model cloud serves no {uri}"),
    )
}

/// A running model cloud.
#[derive(Debug)]
pub struct Running {
    /// Its URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// Its state.
    pub cloud: Arc<Cloud>,
    /// The server task.
    pub task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Keystone's URL, for `[neutron] auth_url`.
    pub fn auth_url(&self) -> String {
        format!("{}/identity/v3", self.url)
    }

    /// Password credentials for it, as `[neutron]`'s keystoneauth options give them (any
    /// password is taken).
    pub fn cloud_auth(&self) -> kuryr_config::CloudAuth {
        kuryr_config::CloudAuth::Neutron(kuryr_config::KeystoneAuth {
            auth_type: "password".into(),
            auth_url: Some(self.auth_url()),
            username: Some("kuryr".into()),
            password: Some("model".into()),
            project_name: Some("k8s".into()),
            user_domain_name: Some("Default".into()),
            project_domain_name: Some("Default".into()),
            ..Default::default()
        })
    }
}

/// Binds `addr` and serves `cloud` until the task is aborted.
pub async fn serve(cloud: Arc<Cloud>, addr: SocketAddr) -> std::io::Result<Running> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let url = format!("http://{}", listener.local_addr()?);
    *lock(&cloud.base) = url.clone();
    let app = router(cloud.clone());
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the model cloud stopped serving");
        }
    });
    Ok(Running { url, cloud, task })
}
