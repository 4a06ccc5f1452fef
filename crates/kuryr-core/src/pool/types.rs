//! The vocabulary of the pool state machine: keys, security-group sets, decisions, tickets,
//! actions, statistics and errors.

use std::{fmt, time::Instant};

/// A pool: ports bound to one host, of one project, on one network (upstream's pool key).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PoolKey {
    /// Node name (`spec.nodeName`; nested mode: the trunk parent's IP).
    pub host: String,
    /// Neutron project.
    pub project_id: String,
    /// Neutron network.
    pub network_id: String,
}

impl PoolKey {
    /// A key.
    pub fn new(
        host: impl Into<String>,
        project_id: impl Into<String>,
        network_id: impl Into<String>,
    ) -> Self {
        PoolKey {
            host: host.into(),
            project_id: project_id.into(),
            network_id: network_id.into(),
        }
    }
}

impl fmt::Display for PoolKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.host, self.project_id, self.network_id)
    }
}

/// A set of security group IDs, sorted and deduplicated (upstream's `tuple(sorted(sgs))`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SgSet(Vec<String>);

impl SgSet {
    /// A set from any IDs.
    pub fn new<I, S>(ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut v: Vec<String> = ids.into_iter().map(Into::into).collect();
        v.sort();
        v.dedup();
        SgSet(v)
    }

    /// The IDs, sorted.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// Contains `sg_id`.
    pub fn contains(&self, sg_id: &str) -> bool {
        self.0.iter().any(|s| s == sg_id)
    }

    /// No security group.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The pod a port is assigned to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl PodKey {
    /// A pod key.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        PodKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Identifies one population (bulk creation) in flight.
pub type TicketId = u64;

/// A population the executor must perform with one bulk `POST /v2.0/ports` of `count` ports
/// with security groups `sgs` in pool `key`, then report with
/// [`super::PoolState::complete_population`] or [`super::PoolState::fail_population`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PopulateRequest {
    /// The ticket.
    pub ticket: TicketId,
    /// The pool.
    pub key: PoolKey,
    /// Ports to create.
    pub count: u32,
    /// Their security groups.
    pub sgs: SgSet,
}

/// A Neutron write the executor must make on a port before handing it out or pooling it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortAction {
    /// Set the port's security groups (taken from a group with other SGs, or SG removed).
    SetSecurityGroups(SgSet),
    /// `port_debug`: rename the port `<ns>/<pod>` (and set `device_id` to the pod UID).
    RenameForPod(PodKey),
    /// `port_debug`: rename the port back to `kuryr-pool-port`, clear `device_id`.
    ResetName,
}

/// A port handed to a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Take {
    /// The port.
    pub port_id: String,
    /// Writes to make before the port is usable (empty on the hot path).
    pub actions: Vec<PortAction>,
    /// The pod already had this port (a retried reconcile): nothing changed.
    pub already_assigned: bool,
    /// A refill to start in the background (pool below `ports_pool_min`).
    pub populate: Option<PopulateRequest>,
}

impl Take {
    /// The port's security groups must be updated first.
    pub fn needs_sg_update(&self) -> bool {
        self.actions
            .iter()
            .any(|a| matches!(a, PortAction::SetSecurityGroups(_)))
    }

    /// The port must be renamed after the pod (`port_debug`).
    pub fn needs_rename(&self) -> bool {
        self.actions
            .iter()
            .any(|a| matches!(a, PortAction::RenameForPod(_)))
    }
}

/// Why a request got no port now; the caller retries later (upstream: `ResourceNotReady`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitReason {
    /// A population was started by this request: execute the attached ticket.
    Populating,
    /// The pool is already being populated.
    PopulationInFlight,
    /// `max_concurrent_bulk` bulk requests are in flight; a later `tick` starts this pool's.
    ConcurrencyLimit,
    /// The last population failed; no new one before `until`.
    Backoff {
        /// Earliest next attempt.
        until: Instant,
    },
    /// `ports_pool_max` pooled ports exist, all cooling down; the first is ready at `until`.
    AtMax {
        /// When the next cooling port becomes available, if any.
        until: Option<Instant>,
    },
    /// The network's pools were deleted ([`super::PoolState::delete_network_pools`]).
    NetworkClosed,
    /// The node is gone from the cluster ([`super::PoolState::close_host`]).
    HostClosed,
}

/// What a request that got no port does next ([`WaitReason::next`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitNext {
    /// Give up now: the network is closed (no port will ever come).
    NetworkClosed,
    /// Give up now: the node is gone (no port is made for it until it is back).
    HostClosed,
    /// Give up now: populations of this pool back off until `until` (the caller tells why).
    BackedOff {
        /// Earliest next attempt.
        until: Instant,
    },
    /// Wait for a change of the pools until `until` (never past the caller's deadline); with
    /// `tick_first`, run a pool tick first (cool-downs may have ended: a port at `ports_pool_max`
    /// comes back only through a tick).
    Wait {
        /// Latest wake-up.
        until: Instant,
        /// Tick before looking again.
        tick_first: bool,
    },
}

impl WaitReason {
    /// What a request that waits for this reason does next, given the caller's `deadline`.
    pub fn next(&self, deadline: Instant) -> WaitNext {
        match self {
            WaitReason::NetworkClosed => WaitNext::NetworkClosed,
            WaitReason::HostClosed => WaitNext::HostClosed,
            WaitReason::Backoff { until } => WaitNext::BackedOff { until: *until },
            WaitReason::AtMax { until } => WaitNext::Wait {
                until: until.map_or(deadline, |u| u.min(deadline)),
                tick_first: true,
            },
            WaitReason::Populating | WaitReason::PopulationInFlight | WaitReason::ConcurrencyLimit => {
                WaitNext::Wait {
                    until: deadline,
                    tick_first: false,
                }
            }
        }
    }
}

/// The answer to [`super::PoolState::request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A port for the pod.
    Take(Take),
    /// No port now.
    Wait {
        /// Why.
        reason: WaitReason,
        /// A population to execute (with [`WaitReason::Populating`]).
        populate: Option<PopulateRequest>,
    },
}

/// The answer to [`super::PoolState::release`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseDecision {
    /// Pooled again after the cool-down; make `actions` (rename with `port_debug`) now.
    Cooldown {
        /// When it becomes available.
        until: Instant,
        /// Writes to make.
        actions: Vec<PortAction>,
    },
    /// Delete the port (pool at `ports_pool_max`, or its network's pools were deleted), then
    /// call [`super::PoolState::confirm_deleted`].
    Delete,
    /// The port was already released (a retried finalizer): nothing to do.
    AlreadyReleased,
}

/// What a [`super::PoolState::tick`] decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickOutcome {
    /// Ports whose cool-down ended and are available again.
    pub ready: Vec<String>,
    /// Populations to execute.
    pub populate: Vec<PopulateRequest>,
    /// Ports to delete (trimmed above `ports_pool_max`), then confirm.
    pub delete: Vec<String>,
}

/// What [`super::PoolState::complete_population`] did with the created ports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PopulationOutcome {
    /// Ports now available.
    pub added: Vec<String>,
    /// Ports to delete: their pool was deleted while they were being created.
    pub delete: Vec<String>,
    /// IDs the state already knew (ignored).
    pub duplicates: Vec<String>,
}

/// Counters of one pool, for metrics and for [`super::plan`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Ports ready to hand out.
    pub available: u32,
    /// Ports assigned to pods.
    pub in_use: u32,
    /// Released ports waiting for their cool-down.
    pub cooling: u32,
    /// Ports being created (the in-flight ticket's count; 0 when none).
    pub populating: u32,
    /// Pods that asked and got no port since the last take.
    pub waiting: u32,
    /// Ports of a bulk creation a previous controller left in flight, seen but not settled
    /// yet (see [`super::PoolState::settle_look`]): not usable, counted against
    /// `ports_pool_max`.
    pub deferred: u32,
}

/// Where a known port is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortState {
    /// In its pool, ready.
    Available,
    /// Assigned to a pod.
    InUse(PodKey),
    /// Released, available again at the deadline.
    Cooling(Instant),
    /// To be deleted by the executor; forgotten on [`super::PoolState::confirm_deleted`].
    Deleting,
}

/// A known port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Its pool.
    pub key: PoolKey,
    /// Its security groups.
    pub sgs: SgSet,
    /// Where it is.
    pub state: PortState,
}

/// A call the state machine cannot honour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The port is not known.
    #[error("port {port_id} is not known to the pool")]
    UnknownPort {
        /// The port.
        port_id: String,
    },
    /// Release of a port that is not in use.
    #[error("port {port_id} is not in use (it is {state:?})")]
    NotInUse {
        /// The port.
        port_id: String,
        /// Where it is.
        state: PortState,
    },
    /// Completion/failure of a ticket that is not in flight.
    #[error("population ticket {ticket} is not in flight")]
    UnknownTicket {
        /// The ticket.
        ticket: TicketId,
    },
}

#[cfg(test)]
mod wait_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn each_wait_reason_has_one_next_step() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(20);
        assert_eq!(WaitReason::NetworkClosed.next(deadline), WaitNext::NetworkClosed);
        assert_eq!(WaitReason::HostClosed.next(deadline), WaitNext::HostClosed);
        let until = now + Duration::from_secs(5);
        assert_eq!(
            WaitReason::Backoff { until }.next(deadline),
            WaitNext::BackedOff { until }
        );
        for r in [
            WaitReason::Populating,
            WaitReason::PopulationInFlight,
            WaitReason::ConcurrencyLimit,
        ] {
            assert_eq!(
                r.next(deadline),
                WaitNext::Wait {
                    until: deadline,
                    tick_first: false
                }
            );
        }
        // At the maximum: wake when the first cool-down ends (never past the deadline), tick.
        assert_eq!(
            WaitReason::AtMax { until: Some(until) }.next(deadline),
            WaitNext::Wait {
                until,
                tick_first: true
            }
        );
        let late = now + Duration::from_secs(60);
        assert_eq!(
            WaitReason::AtMax { until: Some(late) }.next(deadline),
            WaitNext::Wait {
                until: deadline,
                tick_first: true
            }
        );
        assert_eq!(
            WaitReason::AtMax { until: None }.next(deadline),
            WaitNext::Wait {
                until: deadline,
                tick_first: true
            }
        );
    }
}
