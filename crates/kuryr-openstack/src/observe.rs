//! Request observation: every Neutron call (real or fake) reports its operation, outcome and
//! duration to a [`RequestObserver`]; the controller implements it with its metrics registry.

use crate::error::Result;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Operation names (the `operation` label of request metrics).
pub mod ops {
    /// `GET /v2.0/extensions`.
    pub const EXTENSION_LIST: &str = "extension_list";
    /// `GET /v2.0/ports?...`.
    pub const PORT_LIST: &str = "port_list";
    /// `GET /v2.0/ports/{id}`.
    pub const PORT_GET: &str = "port_get";
    /// `POST /v2.0/ports` with `{"ports": [...]}`.
    pub const PORT_BULK_CREATE: &str = "port_bulk_create";
    /// `PUT /v2.0/ports/{id}`.
    pub const PORT_UPDATE: &str = "port_update";
    /// `DELETE /v2.0/ports/{id}`.
    pub const PORT_DELETE: &str = "port_delete";
    /// `PUT /v2.0/ports/{id}/tags`.
    pub const PORT_SET_TAGS: &str = "port_set_tags";
    /// `GET /v2.0/networks/{id}`.
    pub const NETWORK_GET: &str = "network_get";
    /// `GET /v2.0/networks?...`.
    pub const NETWORK_LIST: &str = "network_list";
    /// `POST /v2.0/networks`.
    pub const NETWORK_CREATE: &str = "network_create";
    /// `DELETE /v2.0/networks/{id}`.
    pub const NETWORK_DELETE: &str = "network_delete";
    /// `PUT /v2.0/networks/{id}/tags`.
    pub const NETWORK_SET_TAGS: &str = "network_set_tags";
    /// `GET /v2.0/subnets/{id}`.
    pub const SUBNET_GET: &str = "subnet_get";
    /// `GET /v2.0/quotas/{project}/details`.
    pub const QUOTA_DETAILS: &str = "quota_details";
    /// `GET /v2.0/subnetpools/{id}`.
    pub const SUBNETPOOL_GET: &str = "subnetpool_get";
    /// `GET /v2.0/subnets?...`.
    pub const SUBNET_LIST: &str = "subnet_list";
    /// `POST /v2.0/subnets`.
    pub const SUBNET_CREATE: &str = "subnet_create";
    /// `DELETE /v2.0/subnets/{id}`.
    pub const SUBNET_DELETE: &str = "subnet_delete";
    /// `PUT /v2.0/subnets/{id}/tags`.
    pub const SUBNET_SET_TAGS: &str = "subnet_set_tags";
    /// `PUT /v2.0/routers/{id}/add_router_interface`.
    pub const ROUTER_ADD_INTERFACE: &str = "router_add_interface";
    /// `PUT /v2.0/routers/{id}/remove_router_interface`.
    pub const ROUTER_REMOVE_INTERFACE: &str = "router_remove_interface";
    /// `POST /v2.0/trunks`.
    pub const TRUNK_CREATE: &str = "trunk_create";
    /// `GET /v2.0/trunks/{id}`.
    pub const TRUNK_GET: &str = "trunk_get";
    /// `GET /v2.0/trunks?...`.
    pub const TRUNK_LIST: &str = "trunk_list";
    /// `PUT /v2.0/trunks/{id}/add_subports`.
    pub const TRUNK_ADD_SUBPORTS: &str = "trunk_add_subports";
    /// `PUT /v2.0/trunks/{id}/remove_subports`.
    pub const TRUNK_REMOVE_SUBPORTS: &str = "trunk_remove_subports";
    /// `DELETE /v2.0/trunks/{id}`.
    pub const TRUNK_DELETE: &str = "trunk_delete";
    /// `PUT /v2.0/trunks/{id}/tags`.
    pub const TRUNK_SET_TAGS: &str = "trunk_set_tags";
    /// `GET /v2.0/floatingips?...`.
    pub const FLOATINGIP_LIST: &str = "floatingip_list";
    /// `POST /v2.0/floatingips`.
    pub const FLOATINGIP_CREATE: &str = "floatingip_create";
    /// `PUT /v2.0/floatingips/{id}` (association).
    pub const FLOATINGIP_UPDATE: &str = "floatingip_update";
    /// `DELETE /v2.0/floatingips/{id}`.
    pub const FLOATINGIP_DELETE: &str = "floatingip_delete";
    /// `PUT /v2.0/floatingips/{id}/tags`.
    pub const FLOATINGIP_SET_TAGS: &str = "floatingip_set_tags";
    /// `GET /v2.0/security-groups?...`.
    pub const SG_LIST: &str = "sg_list";
    /// `POST /v2.0/security-groups`.
    pub const SG_CREATE: &str = "sg_create";
    /// `DELETE /v2.0/security-groups/{id}`.
    pub const SG_DELETE: &str = "sg_delete";
    /// `PUT /v2.0/security-groups/{id}/tags`.
    pub const SG_SET_TAGS: &str = "sg_set_tags";
    /// `GET /v2.0/security-group-rules?...`.
    pub const SG_RULE_LIST: &str = "sg_rule_list";
    /// `POST /v2.0/security-group-rules` (bulk).
    pub const SG_RULE_BULK_CREATE: &str = "sg_rule_bulk_create";
    /// `DELETE /v2.0/security-group-rules/{id}`.
    pub const SG_RULE_DELETE: &str = "sg_rule_delete";
    /// Octavia `GET /` (version document).
    pub const LB_VERSIONS: &str = "lb_versions";
    /// `GET /v2/lbaas/loadbalancers?...`.
    pub const LB_LIST: &str = "lb_list";
    /// `GET /v2/lbaas/loadbalancers/{id}`.
    pub const LB_GET: &str = "lb_get";
    /// `POST /v2/lbaas/loadbalancers`.
    pub const LB_CREATE: &str = "lb_create";
    /// `DELETE /v2/lbaas/loadbalancers/{id}?cascade=true`.
    pub const LB_DELETE: &str = "lb_delete";
    /// `GET /v2/lbaas/loadbalancers/{id}/status`.
    pub const LB_STATUS: &str = "lb_status";
    /// `GET /v2/lbaas/listeners?loadbalancer_id=...`.
    pub const LISTENER_LIST: &str = "listener_list";
    /// `POST /v2/lbaas/listeners`.
    pub const LISTENER_CREATE: &str = "listener_create";
    /// `DELETE /v2/lbaas/listeners/{id}`.
    pub const LISTENER_DELETE: &str = "listener_delete";
    /// `PUT /v2/lbaas/listeners/{id}`.
    pub const LISTENER_UPDATE: &str = "listener_update";
    /// `GET /v2/lbaas/pools?loadbalancer_id=...`.
    pub const POOL_LIST: &str = "pool_list";
    /// `PUT /v2/lbaas/pools/{id}`.
    pub const POOL_UPDATE: &str = "pool_update";
    /// `POST /v2/lbaas/healthmonitors`.
    pub const HM_CREATE: &str = "healthmonitor_create";
    /// `GET /v2/lbaas/healthmonitors/{id}`.
    pub const HM_GET: &str = "healthmonitor_get";
    /// `DELETE /v2/lbaas/healthmonitors/{id}`.
    pub const HM_DELETE: &str = "healthmonitor_delete";
    /// `POST /v2/lbaas/pools`.
    pub const POOL_CREATE: &str = "pool_create";
    /// `DELETE /v2/lbaas/pools/{id}`.
    pub const POOL_DELETE: &str = "pool_delete";
    /// `PUT /v2/lbaas/pools/{id}/members` (batch update: the whole member set in one call).
    pub const MEMBER_BATCH_UPDATE: &str = "member_batch_update";
}

/// Receives one call per request. Must be cheap and must not block.
pub trait RequestObserver: Send + Sync {
    /// `outcome` is `ok` or [`Error::metric_label`](crate::Error::metric_label).
    fn observe(&self, operation: &'static str, outcome: &'static str, elapsed: Duration);
}

/// Observer that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopObserver;

impl RequestObserver for NoopObserver {
    fn observe(&self, _: &'static str, _: &'static str, _: Duration) {}
}

/// What [`CountingObserver`] recorded: `(operation, outcome)` → `(count, total time)`.
pub type Observations = BTreeMap<(&'static str, &'static str), (u64, Duration)>;

/// In-memory observer for tests: counts and total time per `(operation, outcome)`.
#[derive(Debug, Default)]
pub struct CountingObserver {
    seen: Mutex<Observations>,
}

impl CountingObserver {
    /// Number of requests of `operation` that ended with `outcome`.
    pub fn count(&self, operation: &str, outcome: &str) -> u64 {
        self.snapshot()
            .iter()
            .filter(|((o, r), _)| *o == operation && *r == outcome)
            .map(|(_, (n, _))| n)
            .sum()
    }

    /// Number of requests of `operation`, any outcome.
    pub fn total(&self, operation: &str) -> u64 {
        self.snapshot()
            .iter()
            .filter(|((o, _), _)| *o == operation)
            .map(|(_, (n, _))| n)
            .sum()
    }

    /// Everything recorded so far.
    pub fn snapshot(&self) -> Observations {
        match self.seen.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

impl RequestObserver for CountingObserver {
    fn observe(&self, operation: &'static str, outcome: &'static str, elapsed: Duration) {
        let mut g = match self.seen.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let e = g.entry((operation, outcome)).or_default();
        e.0 += 1;
        e.1 += elapsed;
    }
}

/// Runs one request, then reports it to `observer` and logs it at debug level.
pub async fn observed<T, F>(observer: &dyn RequestObserver, operation: &'static str, fut: F) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let start = Instant::now();
    let result = fut.await;
    let elapsed = start.elapsed();
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.metric_label(),
    };
    observer.observe(operation, outcome, elapsed);
    match &result {
        Ok(_) => tracing::debug!(
            operation,
            outcome,
            elapsed_ms = elapsed.as_millis() as u64,
            "neutron request"
        ),
        Err(e) => tracing::debug!(
            operation,
            outcome,
            elapsed_ms = elapsed.as_millis() as u64,
            error = %e,
            "neutron request failed"
        ),
    }
    result
}
