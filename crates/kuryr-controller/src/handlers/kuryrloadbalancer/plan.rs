//! The KuryrLoadBalancer plan (pure): from what Octavia has (the load balancer and its status
//! tree) and what the KLB asks for ([`DesiredLb`]), the ONE next step. Every Octavia write locks
//! the load balancer, so the handler performs a step, waits for ACTIVE (briefly, never blocking
//! other Services) and plans again: a state machine whose state is Octavia itself, so a killed
//! controller resumes from any partial state without duplicates.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kuryr_openstack::octavia::{
    HealthMonitorSettings, Listener, LoadBalancer, MemberSpec, Pool, StatusTree, TreePool, status,
};
use kuryr_types::kuryrloadbalancer as klb;

use super::desired::{DesiredLb, DesiredListener, SpecError};
use super::public_ip::{self, FipObserved, FipStep};
use crate::handlers::scaffold::{Plan, Then};

/// How soon to look again at a load balancer that is busy (`PENDING_*`).
pub const PENDING_POLL: Duration = Duration::from_secs(1);

/// What the plan looks at.
#[derive(Debug, Clone)]
pub struct LbObserved {
    /// The KuryrLoadBalancer.
    pub klb: Arc<kuryr_types::KuryrLoadBalancer>,
    /// The KLB is being deleted.
    pub deleting: bool,
    /// Finalizers the handler owns are still on the KLB.
    pub has_finalizer: bool,
    /// The load balancer (by the ID in status, else found by name: adoption).
    pub lb: Option<LoadBalancer>,
    /// Its tree, when the load balancer is ACTIVE.
    pub tree: Option<StatusTree>,
    /// What the spec asks for.
    pub desired: Result<DesiredLb, SpecError>,
    /// The KLB's status now.
    pub status: klb::KuryrLoadBalancerStatus,
    /// The listeners and pools as listed (for their ACLs and session persistence; read only
    /// when the provider applies them and the load balancer is ACTIVE).
    pub options: Option<LbOptions>,
    /// Floating IP and Service ingress (read only when a public IP is wanted or recorded).
    pub fip: FipObserved,
    /// What the handler last told the Service it cannot do ([`notes`]; Warning Events go out
    /// once per change of that list, not on every pass).
    pub warned: Vec<String>,
    /// Settings of the health monitors the desired listeners keep (by monitor ID; read only
    /// for Services that ask for one).
    pub health_monitors: BTreeMap<String, HealthMonitorSettings>,
    /// The tags kuryr puts on what it creates (to tell its floating IPs from a user's).
    pub tags: Arc<[String]>,
}

/// Listeners and pools as Octavia lists them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LbOptions {
    /// Listeners.
    pub listeners: Vec<Listener>,
    /// Pools.
    pub pools: Vec<Pool>,
}

/// One step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Put the handler's finalizer on the KLB.
    AddFinalizer,
    /// Create the load balancer.
    CreateLb,
    /// Delete the load balancer (cascade), for `reason`.
    DeleteLb {
        /// Its ID.
        id: String,
        /// Why (`ERROR`, provider changed, KLB deleted).
        reason: &'static str,
    },
    /// Delete a listener nothing asks for (and its pool first, Octavia wants that order).
    DeleteListener {
        /// Listener ID.
        id: String,
        /// Its pool, if any.
        pool_id: Option<String>,
        /// Name.
        name: String,
    },
    /// Create a listener.
    CreateListener(DesiredListener),
    /// Create the listener's pool.
    CreatePool {
        /// Listener ID.
        listener_id: String,
        /// The listener (its name and protocol name the pool).
        listener: DesiredListener,
    },
    /// Make the pool's members exactly these (one batch call).
    ReplaceMembers {
        /// Pool ID.
        pool_id: String,
        /// Pool name.
        pool_name: String,
        /// The members.
        members: Vec<MemberSpec>,
    },
    /// Set a listener's `allowed_cidrs` (`None`: every source).
    UpdateListenerCidrs {
        /// Listener ID.
        id: String,
        /// Listener name.
        name: String,
        /// The CIDRs.
        cidrs: Option<Vec<String>>,
    },
    /// Turn a pool's `SOURCE_IP` persistence on or off.
    UpdatePoolPersistence {
        /// Pool ID.
        id: String,
        /// Pool name.
        name: String,
        /// On.
        source_ip: bool,
    },
    /// Create the pool's health monitor.
    CreateHealthMonitor {
        /// Pool ID.
        pool_id: String,
        /// Pool name (the monitor's).
        name: String,
        /// Settings.
        settings: HealthMonitorSettings,
    },
    /// Delete a health monitor (not wanted, or to recreate it with other settings).
    DeleteHealthMonitor {
        /// Monitor ID.
        id: String,
        /// Pool name.
        name: String,
    },
    /// Write this status.
    WriteStatus(Box<klb::KuryrLoadBalancerStatus>),
    /// Tell the Service what the provider cannot do (Warning Events).
    WarnUnsupported(Vec<String>),
    /// Remove the finalizers of the KLB and of its Service.
    ReleaseFinalizers,
    /// A floating-IP step (`type: LoadBalancer`).
    PublicIp(FipStep),
}

fn one(reason: &'static str, step: Step) -> Plan<Step> {
    Plan::steps(reason, vec![step], Then::Periodic)
}

/// The next floating-IP step of `o` as a plan (`deleting`: release only).
fn public_ip_step(o: &LbObserved, vip_port: Option<&str>, deleting: bool) -> Option<Plan<Step>> {
    let want = o.desired.as_ref().ok().and_then(|d| d.public_ip.as_ref());
    let step = public_ip::next(
        want,
        vip_port,
        o.status.service_pub_ip_info.as_ref(),
        &o.fip,
        &o.tags,
        deleting,
    )?;
    Some(match step {
        FipStep::Warn(_) => Plan::steps(
            "floating IP cannot be given",
            vec![Step::PublicIp(step)],
            Then::Periodic,
        ),
        _ => one("floating IP", Step::PublicIp(step)),
    })
}

/// The next step for `o` (see the module docs).
pub fn plan(o: &LbObserved) -> Plan<Step> {
    if o.deleting {
        // Floating IPs first: the cascade delete takes the VIP port and would leave an
        // allocated address behind, unowned.
        let settled =
            o.lb.as_ref()
                .is_none_or(|lb| !status::is_pending(&lb.provisioning_status));
        if o.has_finalizer
            && settled
            && let Some(p) = public_ip_step(o, o.lb.as_ref().map(|l| l.vip_port_id.as_str()), true)
        {
            return p;
        }
        return match &o.lb {
            Some(lb) if lb.provisioning_status == status::PENDING_DELETE => {
                one("load balancer being deleted", Step::ReleaseFinalizers)
            }
            Some(lb) if status::is_pending(&lb.provisioning_status) => Plan::nothing(
                "load balancer busy; delete when it settles",
                Then::Requeue(PENDING_POLL),
            ),
            Some(lb) => one(
                "KuryrLoadBalancer deleted",
                Step::DeleteLb {
                    id: lb.id.clone(),
                    reason: "KuryrLoadBalancer deleted",
                },
            ),
            None if o.has_finalizer => one("no load balancer left", Step::ReleaseFinalizers),
            None => Plan::nothing("nothing left", Then::AwaitChange),
        };
    }
    if !o.has_finalizer {
        return one("finalizer first", Step::AddFinalizer);
    }
    let want = match &o.desired {
        Ok(d) => d,
        Err(_) => return Plan::nothing("spec not complete yet", Then::AwaitChange),
    };
    let Some(lb) = &o.lb else {
        return one("no load balancer", Step::CreateLb);
    };
    let ps = lb.provisioning_status.as_str();
    if ps == status::PENDING_DELETE || ps == status::DELETED {
        return Plan::nothing(
            "old load balancer still being deleted",
            Then::Requeue(PENDING_POLL),
        );
    }
    if status::is_pending(ps) {
        return Plan::nothing("load balancer busy", Then::Requeue(PENDING_POLL));
    }
    if ps == status::ERROR {
        return one(
            "load balancer in ERROR",
            Step::DeleteLb {
                id: lb.id.clone(),
                reason: "load balancer in ERROR: recreating it",
            },
        );
    }
    if let Some(p) = &want.provider
        && !lb.provider.is_empty()
        && &lb.provider != p
    {
        return one(
            "provider changed",
            Step::DeleteLb {
                id: lb.id.clone(),
                reason: "endpoints_driver_octavia_provider changed: recreating it",
            },
        );
    }
    let Some(tree) = &o.tree else {
        return Plan::nothing("status tree not read", Then::Requeue(PENDING_POLL));
    };
    let wanted: BTreeMap<&str, &DesiredListener> =
        want.listeners.iter().map(|l| (l.name.as_str(), l)).collect();
    // Listeners nothing asks for go first (a port change frees the port for its successor).
    for l in &tree.listeners {
        if !wanted.contains_key(l.name.as_str()) {
            return one(
                "listener no longer wanted",
                Step::DeleteListener {
                    id: l.id.clone(),
                    pool_id: l.pools.first().map(|p| p.id.clone()),
                    name: l.name.clone(),
                },
            );
        }
    }
    for d in &want.listeners {
        let Some(l) = tree.listeners.iter().find(|l| l.name == d.name) else {
            return one("listener missing", Step::CreateListener(d.clone()));
        };
        let Some(pool) = l.pools.first() else {
            return one(
                "pool missing",
                Step::CreatePool {
                    listener_id: l.id.clone(),
                    listener: d.clone(),
                },
            );
        };
        let mut have: Vec<(&str, i32, &str)> = pool
            .members
            .iter()
            .map(|m| (m.address.as_str(), m.protocol_port, m.name.as_str()))
            .collect();
        have.sort_unstable();
        let mut wanted_members: Vec<(&str, i32, &str)> = d
            .members
            .iter()
            .map(|m| (m.address.as_str(), m.protocol_port, m.name.as_str()))
            .collect();
        wanted_members.sort_unstable();
        if have != wanted_members {
            return one(
                "members differ",
                Step::ReplaceMembers {
                    pool_id: pool.id.clone(),
                    pool_name: d.name.clone(),
                    members: d.members.clone(),
                },
            );
        }
        if let Some(step) = options_step(o.options.as_ref(), &l.id, &pool.id, d) {
            return one("listener or pool options differ", step);
        }
        if let Some(step) = health_monitor_step(pool, d, &o.health_monitors) {
            return one("health monitor differs", step);
        }
    }
    if let Some(p) = public_ip_step(o, Some(&lb.vip_port_id), false) {
        return p;
    }
    let st = status_of(lb, tree, want, &o.status);
    let mut steps = Vec::new();
    if st != o.status {
        steps.push(Step::WriteStatus(Box::new(st)));
    }
    let notes = notes(want, tree);
    if !notes.is_empty() && notes != o.warned {
        steps.push(Step::WarnUnsupported(notes));
    }
    if !steps.is_empty() {
        return Plan::steps("load balancer converged; recording it", steps, Then::Periodic);
    }
    Plan::nothing("load balancer up to date", Then::Periodic)
}

/// What the Service is told it does not get: what the provider cannot do from the spec, and
/// health monitors the provider left in ERROR.
pub fn notes(want: &DesiredLb, tree: &StatusTree) -> Vec<String> {
    let mut out = want.unsupported.clone();
    for l in &tree.listeners {
        for p in &l.pools {
            if p.health_monitor
                .as_ref()
                .is_some_and(|h| h.provisioning_status == status::ERROR)
            {
                out.push(format!(
                    "health monitor of {}: the provider left it in ERROR, members are not probed (the ovn \
                     provider before 2023.2 needs a network:distributed port with an address on the member \
                     subnet; Kuryr's subnets have DHCP off, so Neutron makes none)",
                    l.name
                ));
            }
        }
    }
    out
}

/// The step bringing a pool's health monitor to what `d` asks, if any. One in ERROR is left
/// alone (recreating it would fail the same way; [`notes`] tells the Service).
fn health_monitor_step(
    pool: &TreePool,
    d: &DesiredListener,
    known: &BTreeMap<String, HealthMonitorSettings>,
) -> Option<Step> {
    match (&pool.health_monitor, &d.health_monitor) {
        (None, None) => None,
        (None, Some(want)) => Some(Step::CreateHealthMonitor {
            pool_id: pool.id.clone(),
            name: d.name.clone(),
            settings: want.clone(),
        }),
        (Some(have), None) => Some(Step::DeleteHealthMonitor {
            id: have.id.clone(),
            name: d.name.clone(),
        }),
        (Some(have), Some(_)) if have.provisioning_status == status::ERROR => None,
        (Some(have), Some(want)) => {
            known
                .get(&have.id)
                .filter(|s| *s != want)
                .map(|_| Step::DeleteHealthMonitor {
                    id: have.id.clone(),
                    name: d.name.clone(),
                })
        }
    }
}

/// The step bringing a listener's ACL or its pool's persistence to what `d` asks, if any.
fn options_step(
    opts: Option<&LbOptions>,
    listener_id: &str,
    pool_id: &str,
    d: &DesiredListener,
) -> Option<Step> {
    let opts = opts?;
    if let Some(l) = opts.listeners.iter().find(|l| l.id == listener_id) {
        let mut have: Vec<String> = l.allowed_cidrs.clone().unwrap_or_default();
        have.sort();
        if have != d.allowed_cidrs.clone().unwrap_or_default() {
            return Some(Step::UpdateListenerCidrs {
                id: l.id.clone(),
                name: d.name.clone(),
                cidrs: d.allowed_cidrs.clone(),
            });
        }
    }
    let p = opts.pools.iter().find(|p| p.id == pool_id)?;
    (p.source_ip_persistence() != d.source_ip_persistence).then(|| Step::UpdatePoolPersistence {
        id: p.id.clone(),
        name: d.name.clone(),
        source_ip: d.source_ip_persistence,
    })
}

/// The status recording `lb` and `tree` (`current`'s floating IP kept).
pub fn status_of(
    lb: &LoadBalancer,
    tree: &StatusTree,
    want: &DesiredLb,
    current: &klb::KuryrLoadBalancerStatus,
) -> klb::KuryrLoadBalancerStatus {
    let mut listeners = Vec::new();
    let mut pools = Vec::new();
    let mut members = Vec::new();
    for d in &want.listeners {
        let Some(l) = tree.listeners.iter().find(|l| l.name == d.name) else {
            continue;
        };
        listeners.push(klb::Listener {
            id: l.id.clone(),
            loadbalancer_id: lb.id.clone(),
            name: l.name.clone(),
            port: d.port,
            project_id: lb.project_id.clone(),
            protocol: d.protocol.clone(),
            timeout_client_data: want.timeout_client_data,
            timeout_member_data: want.timeout_member_data,
        });
        let Some(p) = l.pools.first() else { continue };
        pools.push(klb::Pool {
            id: p.id.clone(),
            listener_id: l.id.clone(),
            loadbalancer_id: lb.id.clone(),
            name: d.name.clone(),
            project_id: lb.project_id.clone(),
            protocol: d.protocol.clone(),
        });
        for m in &p.members {
            let subnet = d
                .members
                .iter()
                .find(|w| w.address == m.address && w.protocol_port == m.protocol_port)
                .and_then(|w| w.subnet_id.clone())
                .unwrap_or_else(|| lb.vip_subnet_id.clone());
            members.push(klb::Member {
                id: m.id.clone(),
                ip: m.address.clone(),
                name: m.name.clone(),
                pool_id: p.id.clone(),
                port: m.protocol_port,
                project_id: lb.project_id.clone(),
                subnet_id: subnet,
            });
        }
    }
    klb::KuryrLoadBalancerStatus {
        loadbalancer: Some(lb_record(lb, current)),
        listeners: Some(listeners),
        pools: Some(pools),
        members: Some(members),
        service_pub_ip_info: current.service_pub_ip_info.clone(),
    }
}

/// `status.loadbalancer` for `lb` (security groups kept from `current`).
pub fn lb_record(lb: &LoadBalancer, current: &klb::KuryrLoadBalancerStatus) -> klb::LoadBalancer {
    klb::LoadBalancer {
        id: lb.id.clone(),
        ip: lb.vip_address.clone(),
        name: lb.name.clone(),
        port_id: lb.vip_port_id.clone(),
        project_id: lb.project_id.clone(),
        provider: lb.provider.clone(),
        security_groups: current
            .loadbalancer
            .as_ref()
            .map(|l| l.security_groups.clone())
            .unwrap_or_default(),
        subnet_id: lb.vip_subnet_id.clone(),
    }
}
