//! The health server (`[cni_health_server] port`), upstream semantics:
//! `GET /ready` — 200 once the process has `CAP_NET_ADMIN`, the API server answers and both
//! watchers have listed; `GET /alive` — 500 once `[cni_daemon] cni_failures_count` requests
//! failed inside the daemon, a watcher died, netlink cannot be opened or the OVS bridge is
//! unreachable.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU32, Ordering},
};

use axum::{Router, http::StatusCode};

use crate::{binding::Bindings, registry::Registry};

/// `CAP_NET_ADMIN`'s bit in `CapEff`.
const CAP_NET_ADMIN: u32 = 12;

/// Shared health state.
pub struct Health {
    failures: AtomicU32,
    max_failures: u32,
    watcher_dead: AtomicBool,
    registry: Arc<Registry>,
    bindings: Arc<dyn Bindings>,
    bridge: Option<String>,
    client: kube::Client,
}

/// Whether `status` (the text of `/proc/self/status`) shows `CAP_NET_ADMIN` in `CapEff`.
pub fn has_net_admin(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_NET_ADMIN) != 0)
}

impl Health {
    /// New state; unhealthy after `max_failures` failures (0: never).
    pub fn new(
        max_failures: u32,
        registry: Arc<Registry>,
        bindings: Arc<dyn Bindings>,
        bridge: Option<String>,
        client: kube::Client,
    ) -> Self {
        Self {
            failures: AtomicU32::new(0),
            max_failures,
            watcher_dead: AtomicBool::new(false),
            registry,
            bindings,
            bridge,
            client,
        }
    }

    /// One request failed inside the daemon; returns the new count.
    pub fn failed(&self) -> u32 {
        self.failures.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Whether the failure budget is spent.
    pub fn failures_exhausted(&self) -> bool {
        self.max_failures > 0 && self.failures.load(Ordering::SeqCst) >= self.max_failures
    }

    /// A watcher loop ended.
    pub fn watcher_died(&self) {
        self.watcher_dead.store(true, Ordering::SeqCst);
    }

    /// `(status, message)` of `GET /ready`.
    pub async fn ready(&self) -> (StatusCode, String) {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        if !has_net_admin(&status) {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Process does not have CAP_NET_ADMIN.".into(),
            );
        }
        if let Err(e) = self.client.apiserver_version().await {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Kubernetes API not reachable: {e}"),
            );
        }
        if !self.registry.synced() {
            return (StatusCode::SERVICE_UNAVAILABLE, "Watchers not synced yet.".into());
        }
        (StatusCode::OK, "ok".into())
    }

    /// `(status, message)` of `GET /alive`.
    pub async fn alive(&self) -> (StatusCode, String) {
        if self.failures_exhausted() {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Maximum CNI failures reached.".into(),
            );
        }
        if self.watcher_dead.load(Ordering::SeqCst) {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Kuryr CNI components not healthy: a watcher died.".into(),
            );
        }
        if let Err(e) = rtnetlink::new_connection() {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Netlink is not usable: {e}"),
            );
        }
        if let Err(why) = self.bindings.datapath_ready(self.bridge.as_deref()).await {
            return (StatusCode::INTERNAL_SERVER_ERROR, format!("{why}."));
        }
        (StatusCode::OK, "ok".into())
    }
}

impl kuryr_runtime::http::Probe for Health {
    async fn ready(&self) -> (StatusCode, String) {
        Health::ready(self).await
    }

    async fn alive(&self) -> (StatusCode, String) {
        Health::alive(self).await
    }
}

/// Router serving `GET /ready` and `GET /alive`.
pub fn router(health: Arc<Health>) -> Router {
    kuryr_runtime::http::health_router(health)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_parsing() {
        assert!(has_net_admin("Name:\tx\nCapEff:\t000001ffffffffff\n"));
        assert!(has_net_admin("CapEff:\t0000000000001000\n"));
        assert!(!has_net_admin("CapEff:\t0000000000000000\n"));
        assert!(!has_net_admin("nothing"));
    }
}
