//! The health server (`[health_server] port`, upstream's health manager): `GET /ready` answers
//! 200 once the KuryrPort CRD is served and the watchers have synced, `GET /alive` answers 200
//! until a handler loop has died. `GET /healthz` (a kuryr-rs addition, the readiness probe of
//! the Deployment) is `/ready` for a leader and `/alive` for a replica standing by for the Lease:
//! a healthy standby counts as ready, so rolling updates of two replicas can progress, while
//! `/ready` keeps upstream's meaning.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use axum::{Router, http::StatusCode};
use kube::{Api, Client, api::ListParams};
use kuryr_types::KuryrPort;

/// Readiness and liveness state shared by the handlers and the health server.
pub struct Health {
    client: Client,
    /// Handlers whose watchers have not synced yet.
    unsynced: AtomicUsize,
    /// Handlers whose loop has ended.
    dead: Mutex<Vec<String>>,
    /// This cluster's load balancers not ACTIVE at the last janitor pass (`usize::MAX`: not
    /// known). Reported by `/ready`, never failing it: a broken load balancer is the Service's
    /// problem, not the controller's.
    lbs_not_active: AtomicUsize,
    /// Waiting for the leader-election Lease.
    standby: AtomicBool,
}

impl Health {
    /// New state expecting `watchers` watchers to report [`Health::synced`].
    pub fn new(client: Client, watchers: usize) -> Self {
        Self {
            client,
            unsynced: AtomicUsize::new(watchers),
            dead: Mutex::new(Vec::new()),
            lbs_not_active: AtomicUsize::new(usize::MAX),
            standby: AtomicBool::new(false),
        }
    }

    /// One watcher has listed everything once.
    pub fn synced(&self) {
        // Saturating: a restarted handler reporting twice must not wrap around.
        let _ = self
            .unsynced
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| Some(n.saturating_sub(1)));
    }

    /// `handler`'s loop has ended: `/alive` fails from now on.
    pub fn handler_died(&self, handler: &str) {
        if let Ok(mut dead) = self.dead.lock() {
            dead.push(handler.to_owned());
        }
    }

    /// How many of this cluster's load balancers are not ACTIVE (the load balancer janitor).
    pub fn set_load_balancers_not_active(&self, n: usize) {
        self.lbs_not_active.store(n, Ordering::SeqCst);
    }

    /// This replica waits for the Lease (`true`) or leads / runs alone (`false`).
    pub fn set_standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::SeqCst);
    }

    /// `(status, message)` of `GET /healthz`.
    pub async fn healthz(&self) -> (StatusCode, String) {
        if self.standby.load(Ordering::SeqCst) {
            let (code, msg) = self.alive();
            return (code, format!("{msg} (standing by for the leader-election Lease)"));
        }
        self.ready().await
    }

    /// Names of the handlers whose loop has ended.
    pub fn dead_handlers(&self) -> Vec<String> {
        self.dead.lock().map(|d| d.clone()).unwrap_or_default()
    }

    /// `(status, message)` of `GET /ready`.
    pub async fn ready(&self) -> (StatusCode, String) {
        let api: Api<KuryrPort> = Api::all(self.client.clone());
        match api.list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {
                return (
                    StatusCode::NOT_FOUND,
                    "KuryrPort CRD (kuryrports.openstack.org) is not installed.".into(),
                );
            }
            Err(e) => {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("Error when processing k8s healthz request: {e}"),
                );
            }
        }
        let unsynced = self.unsynced.load(Ordering::SeqCst);
        if unsynced > 0 {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{unsynced} watcher(s) not synced yet."),
            );
        }
        match self.lbs_not_active.load(Ordering::SeqCst) {
            usize::MAX => (StatusCode::OK, "ok".into()),
            n => (StatusCode::OK, format!("ok ({n} load balancer(s) not ACTIVE)")),
        }
    }

    /// `(status, message)` of `GET /alive`.
    pub fn alive(&self) -> (StatusCode, String) {
        let dead = self.dead_handlers();
        if dead.is_empty() {
            (StatusCode::OK, "ok".into())
        } else {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("handler(s) not alive: {}", dead.join(", ")),
            )
        }
    }
}

impl kuryr_runtime::http::Probe for Health {
    async fn ready(&self) -> (StatusCode, String) {
        Health::ready(self).await
    }

    async fn alive(&self) -> (StatusCode, String) {
        Health::alive(self)
    }
}

/// Router serving `GET /ready`, `GET /alive` and `GET /healthz`.
pub fn router(health: Arc<Health>) -> Router {
    let h = health.clone();
    kuryr_runtime::http::health_router(health).route(
        "/healthz",
        axum::routing::get(move || {
            let h = h.clone();
            async move { h.healthz().await }
        }),
    )
}
