//! A model cloud for scale tests (issue 39), **for scale only**: every feature of kuryr-rs is
//! proven on the real sandbox cloud. It serves the Keystone, Neutron and Octavia calls kuryr-rs
//! makes (same paths, JSON, error bodies and codes, tags, `fields`, `limit`/`marker`
//! pagination, bulk creates, fully populated load balancers, batch member updates) over the
//! in-memory [`FakeNeutron`]'s and [`FakeOctavia`]'s state, and makes each request wait and
//! cost what [`model::Model`] says the real one does; an Octavia write answers `PENDING_*` at
//! once and its load balancer turns `ACTIVE` when the model's provisioning is done.
//!
//! Beside the OpenStack APIs: `POST /__model/plugged` (`{"port_id": …}`: a node plugged the
//! port; it goes ACTIVE after the model's delay, as ovn-controller's claim does) and
//! `GET /__model/stats` (requests, queueing and service time per operation).

pub mod keystone;
pub mod model;
pub mod neutron;
pub mod octavia;
pub mod ovs;
mod stats;
pub mod wire;

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Router, response::Response};
use kuryr_openstack::{fake::FakeNeutron, octavia::fake::FakeOctavia};
use tokio::sync::Semaphore;

pub use model::{Cost, Model};
pub use stats::{OpStats, Stats};

/// The shared state of one model cloud.
pub struct Cloud {
    /// The state behind the Neutron API (seed networks and subnet pools through it).
    pub neutron: FakeNeutron,
    /// The state behind the Octavia API (load balancers stay `PENDING_*` until the model's
    /// provisioning of their last write is done).
    pub octavia: FakeOctavia,
    model: Model,
    workers: Semaphore,
    /// Neutron's handling of OVN's port-up events: serial, beside the API workers.
    port_up: Semaphore,
    octavia_api: Semaphore,
    provisioners: Semaphore,
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
            // Pending until the model says (`u32::MAX` reads never settle it by themselves).
            octavia: FakeOctavia::new().with_settle_reads(u32::MAX),
            workers: Semaphore::new(model.neutron_workers.max(1)),
            port_up: Semaphore::new(1),
            octavia_api: Semaphore::new(model.octavia_api_workers.max(1)),
            provisioners: Semaphore::new(model.provisioners.max(1)),
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
        self.plugged_then(port_id, Duration::ZERO, || {})
    }

    /// [`Cloud::plugged`], and `then` runs at ovn-controller's claim (when it would set the
    /// node's `ovn-installed` flag), before Neutron's worker turns the port ACTIVE.
    /// `queued`: how long the node's ovn-controller is still busy with earlier claims.
    pub fn plugged_then(
        self: &Arc<Self>,
        port_id: &str,
        queued: Duration,
        then: impl FnOnce() + Send + 'static,
    ) -> bool {
        if self.neutron.port(port_id).is_none() {
            return false;
        }
        let (lo, hi) = self.model.active_after_plug_ms;
        let delay = queued + Duration::from_millis(lo + spread(port_id, hi.saturating_sub(lo)));
        let me = self.clone();
        let id = port_id.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            // ovn-controller's claim: the node's own flag is set at once...
            then();
            // ...while Neutron hears of it from OVN's northbound database and writes the port's
            // status, one port after another (model::PORT_UP), beside its API worker: the
            // sandbox's ports turn ACTIVE at the same pace while pool refills keep that busy.
            let activated = me
                .priced(
                    Desk::PortUp,
                    model::PORT_UP,
                    0,
                    1.0,
                    async {
                        me.neutron.activate(&id);
                        Ok(())
                    },
                    |_| 0,
                )
                .await;
            if activated.is_none() {
                tracing::debug!(port = %id, "model stopping: port left DOWN");
            }
        });
        true
    }
}

/// Which API's workers a request queues for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Desk {
    /// Neutron's API workers ([`Model::neutron_workers`]).
    Neutron,
    /// Octavia's API workers ([`Model::octavia_api_workers`]).
    Octavia,
    /// Neutron's serial handling of OVN's port-up events ([`model::PORT_UP`]).
    PortUp,
}

impl Cloud {
    /// Runs `call` as the model prices `op` on `desk`: waits for a worker, serves `before`
    /// items (and the fixed cost, times `weight`), runs the call, then serves the
    /// `after(result)` items (entries listed). `None`: the server is stopping.
    pub(crate) async fn priced<T, Fut>(
        &self,
        desk: Desk,
        op: &'static str,
        before: usize,
        weight: f64,
        call: Fut,
        after: impl Fn(&T) -> usize,
    ) -> Option<kuryr_openstack::Result<T>>
    where
        Fut: std::future::Future<Output = kuryr_openstack::Result<T>>,
    {
        let (workers, cost) = match desk {
            Desk::Neutron => (&self.workers, self.model.cost(op)),
            Desk::PortUp => (&self.port_up, self.model.cost(op)),
            Desk::Octavia => (&self.octavia_api, self.model.octavia_cost(op)),
        };
        let mut pending = stats::Pending {
            cloud: self,
            op,
            done: false,
        };
        let queued = Instant::now();
        let _worker = workers.acquire().await.ok()?;
        let wait = queued.elapsed();
        let mut service = cost.time(before).mul_f64(weight.max(0.0));
        self.serve(service).await;
        let r = call.await;
        let listed = r.as_ref().map(&after).unwrap_or(0);
        if listed > 0 {
            let more = Duration::from_secs_f64(cost.per_item_ms * listed as f64 / 1000.0);
            self.serve(more).await;
            service += more;
        }
        self.record(op, before + listed, wait, service, r.is_ok());
        pending.done = true;
        Some(r)
    }

    /// One server's work for `d`: a sleep, of which [`Model::cpu_share`] is spent on a CPU
    /// (spinning on a blocking thread), as the sandbox's cloud spends this machine's cores.
    async fn serve(&self, d: Duration) {
        let share = self.model.cpu_share;
        let share = if share.is_finite() {
            share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let burn = d.mul_f64(share);
        if !burn.is_zero() {
            let spun = tokio::task::spawn_blocking(move || {
                let t = Instant::now();
                while t.elapsed() < burn {
                    std::hint::spin_loop();
                }
            })
            .await;
            if spun.is_err() {
                tracing::debug!("the model's CPU work was cancelled");
            }
        }
        tokio::time::sleep(d.saturating_sub(burn)).await;
    }

    /// Write `op` of `items` items left load balancer `lb_id` `PENDING_*`: it turns `ACTIVE`
    /// once a provisioner has worked on it for the model's time (queued FIFO behind other
    /// provisioning; counted as `provision:<op>`). A deletion's work occupies a provisioner
    /// with nothing to settle.
    pub(crate) fn provision(self: &Arc<Self>, op: &'static str, lb_id: Option<String>, items: usize) {
        let me = self.clone();
        tokio::spawn(async move {
            let queued = Instant::now();
            // The ovn provider works inside the API process: its provisioning queues with the
            // API's requests for the same server (Model::provision_in_api).
            let server = if me.model.provision_in_api {
                &me.octavia_api
            } else {
                &me.provisioners
            };
            let Ok(_p) = server.acquire().await else {
                return;
            };
            let wait = queued.elapsed();
            let service = me.model.provisioning_cost(op).time(items);
            me.serve(service).await;
            if let Some(id) = lb_id {
                me.octavia
                    .set_status(&id, kuryr_openstack::octavia::status::ACTIVE);
            }
            let name = format!("provision:{op}");
            me.record(&name, items, wait, service, true);
        });
    }
}

/// One page of `vals` as OpenStack APIs page (Neutron's and Octavia's alike): sorted by ID,
/// those after `marker` only, at most `limit`; returns the query of the `next` link (the
/// request's parameters with the page's last ID as `marker`) when more remain.
pub(crate) fn paginate(
    vals: &mut Vec<serde_json::Value>,
    q: &[(String, String)],
    limit: usize,
) -> Option<String> {
    let id = |v: &serde_json::Value| {
        v.get("id")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    vals.sort_by_key(id);
    if let Some((_, marker)) = q.iter().find(|(k, _)| k == "marker") {
        vals.retain(|v| id(v).as_str() > marker.as_str());
    }
    if vals.len() <= limit {
        return None;
    }
    vals.truncate(limit);
    let last = vals.last().map(id).unwrap_or_default();
    let rest: String = q
        .iter()
        .filter(|(k, _)| k != "marker")
        .map(|(k, v)| format!("{k}={v}&"))
        .collect();
    Some(format!("{rest}marker={last}"))
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

/// Every route: Keystone under `/identity`, Neutron under `/network`, Octavia under
/// `/load-balancer`, the model's own under `/__model`.
pub fn router(cloud: Arc<Cloud>) -> Router {
    let neutron_limit = axum::extract::DefaultBodyLimit::max(cloud.model.neutron_max_body_bytes);
    Router::new()
        .merge(keystone::routes())
        .merge(neutron::routes().layer(neutron_limit))
        .merge(octavia::routes())
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
