//! The daemon's shared state for the CNI verbs (upstream `k8s_cni_registry`): settings, the
//! registry the watchers fill, the state files, the node's binding drivers, metrics, the
//! per-pod locks that serialize wiring with DEL/GC, and the memory of recent DELs. The verbs
//! themselves live in [`crate::verbs`], one module each.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crate::{
    binding::Bindings,
    health::Health,
    metrics::Metrics,
    registry::{Registry, WaitReason},
    state::StateStore,
};

pub use crate::error::{DEL_TIMEOUT, OpError, error_chain};

/// Settings of the operations (from kuryr.conf).
#[derive(Debug, Clone)]
pub struct Settings {
    /// `[cni_daemon] vif_annotation_timeout`: bound of each of ADD's waits.
    pub vif_timeout: Duration,
    /// `[neutron_defaults] ovs_bridge`.
    pub default_bridge: Option<String>,
    /// `[neutron_defaults] network_device_mtu`.
    pub network_device_mtu: u32,
    /// `[cni_daemon] netns_proc_dir` when `docker_mode` is on.
    pub netns_proc_dir: Option<String>,
}

/// The daemon's operations and shared state.
pub struct Daemon {
    /// Settings.
    pub settings: Settings,
    /// The registry.
    pub registry: Arc<Registry>,
    /// The state files.
    pub state: StateStore,
    /// The node's binding drivers.
    pub bindings: Arc<dyn Bindings>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Health (counts the daemon's own failures; absent in unit tests).
    pub health: Option<Arc<Health>>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Container IDs DEL has seen recently (bounded), so a slow ADD does not wire them after.
    deleted: Mutex<VecDeque<String>>,
}

/// How many recently deleted container IDs are remembered.
const DELETED_MEMORY: usize = 1024;

impl Daemon {
    /// Assembles the daemon.
    pub fn new(
        settings: Settings,
        registry: Arc<Registry>,
        state: StateStore,
        bindings: Arc<dyn Bindings>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            settings,
            registry,
            state,
            bindings,
            metrics,
            health: None,
            locks: Mutex::new(HashMap::new()),
            deleted: Mutex::new(VecDeque::new()),
        }
    }

    /// Counts the daemon's own failures into `health` (`[cni_daemon] cni_failures_count`).
    pub fn with_health(mut self, health: Arc<Health>) -> Self {
        self.health = Some(health);
        self
    }

    pub(crate) fn remember_deleted(&self, container_id: &str) {
        let mut d = self.deleted.lock().unwrap_or_else(|p| p.into_inner());
        if !d.iter().any(|c| c == container_id) {
            if d.len() >= DELETED_MEMORY {
                d.pop_front();
            }
            d.push_back(container_id.to_owned());
        }
    }

    pub(crate) fn forget_deleted(&self, container_id: &str) {
        self.deleted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|c| c != container_id);
    }

    pub(crate) fn was_deleted(&self, container_id: &str) -> bool {
        self.deleted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|c| c == container_id)
    }

    pub(crate) fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut g = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        if g.len() > 4096 {
            g.retain(|_, l| Arc::strong_count(l) > 1);
        }
        g.entry(key.to_owned()).or_default().clone()
    }

    /// Waits (bounded) until `ready` returns `Ok`, re-checking on every registry update of
    /// `key` (the pod's `<namespace>/<name>`).
    pub(crate) async fn wait_registry<T>(
        &self,
        key: &str,
        deadline: Instant,
        mut ready: impl FnMut() -> Result<T, WaitReason>,
    ) -> Result<T, WaitReason> {
        let mut rx = self.registry.changed_for(key);
        let timeout = tokio::time::sleep_until(deadline.into());
        tokio::pin!(timeout);
        loop {
            rx.borrow_and_update();
            let reason = match ready() {
                Ok(v) => return Ok(v),
                Err(r) => r,
            };
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Err(reason) },
                _ = &mut timeout => return Err(reason),
            }
        }
    }
}
