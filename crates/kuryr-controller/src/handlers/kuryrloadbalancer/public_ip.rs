//! The floating IP of a `type: LoadBalancer` Service (pure): from what the KLB asks
//! ([`PublicIp`]), what its status records (`service_pub_ip_info`) and what Neutron and the
//! Service show ([`FipObserved`]), the ONE next step. Upstream's rules (`lb_public_ip.py`),
//! re-derived: a `loadBalancerIP` must be an existing floating IP, free or already on the VIP,
//! and is only ever disassociated (`alloc_method: user`); otherwise one is allocated on
//! `[neutron_defaults] external_svc_net` and deleted with the Service (`alloc_method: pool`).
//!
//! Beyond upstream: a floating IP found on the VIP port that kuryr did not allocate (no cluster
//! tag, not `kuryr_lb`) is recorded as `user`, so it is kept — upstream recorded it as `pool`
//! and deleted someone else's address. A recorded `pool` address whose load balancer was
//! recreated (ERROR, provider change) is re-associated, so the Service keeps its public IP.

use kuryr_openstack::FloatingIp;
use kuryr_types::kuryrloadbalancer::ServicePubIpInfo;

/// Description upstream Kuryr writes on the floating IPs it allocates.
pub const FIP_DESCRIPTION: &str = "kuryr_lb";
/// `alloc_method` of an address kuryr allocated (deleted with the Service).
pub const ALLOC_POOL: &str = "pool";
/// `alloc_method` of a user's address (`loadBalancerIP`; kept).
pub const ALLOC_USER: &str = "user";

/// The public IP a KuryrLoadBalancer asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicIp {
    /// Allocate one from the external network.
    Pool,
    /// This existing floating IP (`spec.lb_ip`, the Service's `loadBalancerIP`).
    User(String),
}

/// What Neutron and the Service show, read only for KLBs that want or record a public IP.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FipObserved {
    /// Floating IPs on the VIP port.
    pub on_vip: Vec<FloatingIp>,
    /// The recorded floating IP (`None`: gone, or nothing recorded).
    pub recorded: Option<FloatingIp>,
    /// The floating IP with the `loadBalancerIP` address, when one is asked for.
    pub user: Option<FloatingIp>,
    /// The Service's `status.loadBalancer.ingress` IPs (`None`: the Service is gone).
    pub ingress: Option<Vec<String>>,
}

/// One floating-IP step.
#[derive(Debug, Clone, PartialEq)]
pub enum FipStep {
    /// Allocate a floating IP on the external network, on the VIP port.
    Create,
    /// Put this floating IP on the VIP port.
    Associate(String),
    /// Take this floating IP off its port (a user's: kept).
    Disassociate(String),
    /// Delete this floating IP (one kuryr allocated).
    Delete(String),
    /// Record this in `status.service_pub_ip_info`.
    Record(Option<ServicePubIpInfo>),
    /// Make the Service's `status.loadBalancer.ingress` this address (or empty).
    Ingress(Option<String>),
    /// Tell the Service why its address cannot be given (a Warning Event); look again later.
    Warn(String),
}

/// Whether this cluster's kuryr allocated `f`: every tag of our identity, or no tag at all and
/// upstream's description (upstream Kuryr's, switched over). Another cluster's floating IP,
/// which has the same description, is never ours.
pub fn allocated_by_kuryr(f: &FloatingIp, tags: &[String]) -> bool {
    match kuryr_core::ownership::claim_of(tags, &f.tags) {
        kuryr_core::ownership::Claim::Ours => true,
        kuryr_core::ownership::Claim::Untagged => f.description == FIP_DESCRIPTION,
        kuryr_core::ownership::Claim::Foreign => false,
    }
}

fn info(f: &FloatingIp, method: &str) -> ServicePubIpInfo {
    ServicePubIpInfo {
        ip_id: f.id.clone(),
        ip_addr: f.floating_ip_address.clone(),
        alloc_method: method.to_string(),
    }
}

/// The recorded floating IP as observed (looked up by ID, or seen on the VIP port).
fn recorded<'a>(obs: &'a FipObserved, r: &ServicePubIpInfo) -> Option<&'a FloatingIp> {
    obs.recorded
        .as_ref()
        .filter(|f| f.id == r.ip_id)
        .or_else(|| obs.on_vip.iter().find(|f| f.id == r.ip_id))
}

/// Whether the recorded address is still what `want` asks for. Any address serves a Service
/// that names none: `loadBalancerIP` removed keeps the address it had (as
/// cloud-provider-openstack does) rather than swapping it under the Service's clients.
fn recorded_still_wanted(want: Option<&PublicIp>, rec: &ServicePubIpInfo) -> bool {
    match want {
        None => false,
        Some(PublicIp::Pool) => true,
        Some(PublicIp::User(addr)) => rec.alloc_method == ALLOC_USER && &rec.ip_addr == addr,
    }
}

/// The next floating-IP step, `None` when all is in place. `vip_port` is the load balancer's
/// VIP port (`None`: no load balancer yet); `deleting`: the KLB is going away (release only).
pub fn next(
    want: Option<&PublicIp>,
    vip_port: Option<&str>,
    rec: Option<&ServicePubIpInfo>,
    obs: &FipObserved,
    tags: &[String],
    deleting: bool,
) -> Option<FipStep> {
    let want = if deleting { None } else { want };
    let ingress_set = obs.ingress.as_ref().is_some_and(|i| !i.is_empty());
    // 1. A recorded address nothing asks for any more: release it, then forget it.
    if let Some(r) = rec
        && !recorded_still_wanted(want, r)
    {
        if let Some(f) = recorded(obs, r) {
            // Deleted only when Neutron shows it ours: the CR's `alloc_method` alone is text.
            if r.alloc_method != ALLOC_USER && allocated_by_kuryr(f, tags) {
                return Some(FipStep::Delete(f.id.clone()));
            }
            if f.port_id.is_some() && f.port_id.as_deref() == vip_port {
                return Some(FipStep::Disassociate(f.id.clone()));
            }
        }
        if want.is_none() && !deleting && ingress_set {
            return Some(FipStep::Ingress(None));
        }
        return Some(FipStep::Record(None));
    }
    // 2. Nothing wanted: an unrecorded address kuryr put on the VIP (a controller stopped
    //    between allocating and recording it) goes too.
    let Some(want) = want else {
        if let Some(f) = obs
            .on_vip
            .iter()
            .find(|f| allocated_by_kuryr(f, tags) && rec.is_none_or(|r| r.ip_id != f.id))
        {
            return Some(FipStep::Delete(f.id.clone()));
        }
        return (!deleting && ingress_set).then_some(FipStep::Ingress(None));
    };
    let vip_port = vip_port?;
    // 3. The wanted address on the VIP and recorded.
    match (want, rec) {
        (PublicIp::Pool, Some(r)) => match recorded(obs, r) {
            Some(f) if f.port_id.as_deref() == Some(vip_port) => {}
            // Its load balancer was recreated: the address stays the Service's.
            Some(f) if f.port_id.is_none() => return Some(FipStep::Associate(f.id.clone())),
            // Gone, or taken by another port: allocate anew.
            _ => return Some(FipStep::Record(None)),
        },
        (PublicIp::Pool, None) => {
            return Some(match obs.on_vip.first() {
                Some(f) => FipStep::Record(Some(info(
                    f,
                    if allocated_by_kuryr(f, tags) {
                        ALLOC_POOL
                    } else {
                        ALLOC_USER
                    },
                ))),
                None => FipStep::Create,
            });
        }
        (PublicIp::User(addr), _) => match &obs.user {
            None => {
                return Some(FipStep::Warn(format!(
                    "loadBalancerIP {addr} is not a floating IP this project can use; allocate it first \
                     (openstack floating ip create --floating-ip-address {addr} <external network>)"
                )));
            }
            Some(f) if f.port_id.as_deref() == Some(vip_port) => {
                if rec.is_none() {
                    return Some(FipStep::Record(Some(info(f, ALLOC_USER))));
                }
            }
            Some(f) if f.port_id.is_none() => {
                if let Some(other) = obs.on_vip.iter().find(|o| o.id != f.id) {
                    return Some(FipStep::Warn(format!(
                        "loadBalancerIP {addr}: the VIP port already has floating IP {} that kuryr did not \
                         allocate; disassociate it first",
                        other.floating_ip_address
                    )));
                }
                return Some(FipStep::Associate(f.id.clone()));
            }
            Some(f) => {
                return Some(FipStep::Warn(format!(
                    "loadBalancerIP {addr} is in use by port {}",
                    f.port_id.as_deref().unwrap_or_default()
                )));
            }
        },
    }
    // 4. The Service shows it.
    let addr = rec.map(|r| r.ip_addr.clone())?;
    match &obs.ingress {
        Some(i) if i.len() == 1 && i[0] == addr => None,
        Some(_) => Some(FipStep::Ingress(Some(addr))),
        None => None,
    }
}

#[cfg(test)]
mod tests;
