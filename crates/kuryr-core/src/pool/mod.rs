//! Port-pool accounting as a pure state machine ([`PoolState`]): which Neutron ports are
//! available, in use, cooling down after release or being deleted, per pool key
//! `(host, project, network)` and security-group set; which populations (bulk creations) are in
//! flight. The executor in the controller performs the returned tickets and actions and
//! reports back; nothing here does I/O or reads a clock.
//!
//! Upstream semantics kept (inventory §4): an exact SG-set match is preferred, else a port is
//! taken from the least-recently-updated SG group and must get its SGs updated; populations use
//! `max(ports_pool_batch, ports_pool_min - size)`; beyond `ports_pool_max` released ports are
//! deleted. Added: cool-down before reuse, one population per pool at a time, a global bound
//! on bulk requests in flight, back-off after a failed population.
//!
//! The executor's loop, in short:
//!
//! ```
//! use std::time::Instant;
//! use kuryr_core::{PoolConfig, pool::{Decision, PodKey, PoolKey, PoolState, ReleaseDecision, SgSet}};
//!
//! let now = Instant::now();
//! let mut pools = PoolState::new(PoolConfig::default());
//! let key = PoolKey::new("worker-0", "project", "pod-net");
//! let sgs = SgSet::new(["sg-default"]);
//! let pod = PodKey::new("default", "web-0");
//! // Empty pool: the request starts a population and the pod waits (requeue).
//! let Decision::Wait { populate: Some(ticket), .. } = pools.request(&pod, &key, &sgs, now) else {
//!     unreachable!()
//! };
//! // The executor POSTs `ticket.count` ports in one bulk request and reports their IDs.
//! let ids = (0..ticket.count).map(|i| format!("port-{i}"));
//! pools.complete_population(ticket.ticket, ids).unwrap();
//! // The retry is served from the pool with no Neutron write.
//! let Decision::Take(take) = pools.request(&pod, &key, &sgs, now) else { unreachable!() };
//! assert!(take.actions.is_empty());
//! // Pod deleted: the port cools down, then `tick` makes it available again.
//! let ReleaseDecision::Cooldown { until, .. } = pools.release(&take.port_id, now).unwrap() else {
//!     unreachable!()
//! };
//! assert_eq!(pools.tick(until).ready, vec![take.port_id]);
//! ```

mod plan;
mod recovery;
mod state;
#[cfg(test)]
mod tests;
mod types;

pub use plan::{PoolPlan, plan};
pub use recovery::{DeleteReason, InUseRef, RecoveryReport, orphans};
pub use state::PoolState;
pub use types::{
    Decision, PodKey, PoolError, PoolKey, PoolStats, PopulateRequest, PopulationOutcome, PortAction,
    PortInfo, PortState, ReleaseDecision, SgSet, Take, TickOutcome, TicketId, WaitNext, WaitReason,
};
