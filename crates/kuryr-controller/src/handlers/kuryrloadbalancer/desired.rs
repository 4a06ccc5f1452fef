//! What a KuryrLoadBalancer asks for (pure): from its spec (ports, IPs, endpoint slices) and
//! the controller's settings, the load balancer with upstream's names — `<ns>/<svc>`, a listener
//! and its pool `<ns>/<svc>:<PROTOCOL>:<port>` per Service port, members
//! `<pod ns>/<pod>:<targetPort>` — and each pool's member set.

use std::collections::BTreeSet;
use std::net::IpAddr;

use kube::ResourceExt;
use kuryr_openstack::octavia::{ApiVersion, HealthMonitorSettings, MemberSpec};
use kuryr_types::KuryrLoadBalancer;

use super::public_ip::PublicIp;

/// The Octavia provider that only knows `SOURCE_IP_PORT` and has no listener timeouts or ACLs.
pub const OVN: &str = "ovn";

/// What the controller's configuration says about load balancers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LbSettings {
    /// `[octavia_defaults] lb_algorithm` (forced to `SOURCE_IP_PORT` on the OVN provider).
    pub lb_algorithm: String,
    /// `[octavia_defaults] member_mode = L2`: members carry their subnet.
    pub member_mode_l2: bool,
    /// Tags on every Octavia object (`resource_tags` + the cluster tag).
    pub tags: Vec<String>,
    /// `[octavia_defaults] timeout_client_data` (ms), 0: Octavia's default.
    pub timeout_client_data: i64,
    /// `[octavia_defaults] timeout_member_data` (ms), 0: Octavia's default.
    pub timeout_member_data: i64,
    /// `[neutron_defaults] external_svc_net`: where LoadBalancer Services' floating IPs come
    /// from (`None`: they get none).
    pub external_net: Option<String>,
    /// `[neutron_defaults] external_svc_subnet`.
    pub external_subnet: Option<String>,
}

/// Subnets pods live on, to give L2 members their subnet: `(network, prefix, subnet id)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubnetMap(pub Vec<(IpAddr, u8, String)>);

impl SubnetMap {
    /// Adds `cidr` (`10.0.0.0/24`) as `subnet_id`; an unparsable CIDR is skipped.
    pub fn add(&mut self, cidr: &str, subnet_id: &str) {
        let Some((net, len)) = cidr.split_once('/') else {
            return;
        };
        if let (Ok(net), Ok(len)) = (net.parse::<IpAddr>(), len.parse::<u8>()) {
            self.0.push((net, len, subnet_id.to_string()));
        }
    }

    /// Every subnet's CIDR (`10.0.1.0/24`).
    pub fn cidrs(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|(net, len, _)| format!("{net}/{len}"))
    }

    /// The subnet containing `ip` (the longest prefix).
    pub fn subnet_of(&self, ip: &str) -> Option<&str> {
        let ip: IpAddr = ip.parse().ok()?;
        self.0
            .iter()
            .filter(|(net, len, _)| contains(*net, *len, ip))
            .max_by_key(|(_, len, _)| *len)
            .map(|(_, _, id)| id.as_str())
    }
}

/// Whether a load balancer can reach `addr` at all: loopback, link-local and unspecified
/// addresses (an API server endpoint on a host's 127.0.0.1) cannot be members.
fn routable(addr: &str) -> bool {
    match addr.parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => !(a.is_loopback() || a.is_link_local() || a.is_unspecified()),
        Ok(IpAddr::V6(a)) => !(a.is_loopback() || a.is_unspecified() || (a.segments()[0] & 0xffc0) == 0xfe80),
        Err(_) => false,
    }
}

fn contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) if len <= 32 => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) if len <= 128 => {
            let mask = if len == 0 { 0 } else { u128::MAX << (128 - len) };
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

/// One listener with its pool and members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredListener {
    /// Listener and pool name: `<ns>/<svc>:<PROTOCOL>:<port>`.
    pub name: String,
    /// `TCP`, `UDP`, `SCTP`.
    pub protocol: String,
    /// The Service port.
    pub port: i32,
    /// Members, sorted.
    pub members: Vec<MemberSpec>,
    /// `allowed_cidrs` (sorted; `None`: every source).
    pub allowed_cidrs: Option<Vec<String>>,
    /// `SOURCE_IP` session persistence on the pool.
    pub source_ip_persistence: bool,
    /// The pool's health monitor.
    pub health_monitor: Option<HealthMonitorSettings>,
}

/// The whole load balancer a KuryrLoadBalancer asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredLb {
    /// `<ns>/<svc>`.
    pub name: String,
    /// VIP (the ClusterIP).
    pub vip: String,
    /// VIP subnet.
    pub subnet_id: String,
    /// Project.
    pub project_id: String,
    /// Provider; `None`: Octavia's default.
    pub provider: Option<String>,
    /// Pool algorithm.
    pub lb_algorithm: String,
    /// Listener client timeout (ms).
    pub timeout_client_data: Option<i64>,
    /// Listener member timeout (ms).
    pub timeout_member_data: Option<i64>,
    /// Listeners by name, sorted.
    pub listeners: Vec<DesiredListener>,
    /// The floating IP (`type: LoadBalancer` with an external network configured).
    pub public_ip: Option<PublicIp>,
    /// Listener ACLs and session persistence are the provider's to apply (not `ovn`): the
    /// handler reads the listeners and pools to compare them.
    pub options_apply: bool,
    /// What the spec asks that the provider cannot do (one Warning Event each).
    pub unsupported: Vec<String>,
}

/// Why a spec cannot become a load balancer yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A field the service handler fills is missing.
    #[error("spec.{0} is not set yet")]
    Missing(&'static str),
}

/// The listener (and pool) name of a Service port.
pub fn listener_name(lb_name: &str, protocol: &str, port: i32) -> String {
    format!("{lb_name}:{protocol}:{port}")
}

/// The desired load balancer of `klb` (pure).
pub fn desired(
    klb: &KuryrLoadBalancer,
    s: &LbSettings,
    version: ApiVersion,
    subnets: &SubnetMap,
) -> Result<DesiredLb, SpecError> {
    let spec = &klb.spec;
    let ns = klb.namespace().unwrap_or_default();
    let name = format!("{ns}/{}", klb.name_any());
    let vip = spec.ip.clone().ok_or(SpecError::Missing("ip"))?;
    let subnet_id = spec.subnet_id.clone().ok_or(SpecError::Missing("subnet_id"))?;
    let project_id = spec.project_id.clone().ok_or(SpecError::Missing("project_id"))?;
    let provider = spec.provider.clone().filter(|p| !p.is_empty());
    let ovn = provider.as_deref() == Some(OVN);
    let mut unsupported = Vec::new();
    let lb_algorithm = if ovn && s.lb_algorithm != "SOURCE_IP_PORT" {
        "SOURCE_IP_PORT".to_string()
    } else {
        s.lb_algorithm.clone()
    };
    let positive = |v: Option<i64>, default: i64| v.filter(|t| *t > 0).or((default > 0).then_some(default));
    let mut timeout_client_data = positive(spec.timeout_client_data, s.timeout_client_data);
    let mut timeout_member_data = positive(spec.timeout_member_data, s.timeout_member_data);
    if ovn && (timeout_client_data.is_some() || timeout_member_data.is_some()) {
        unsupported.push("listener timeouts (the ovn provider has none)".to_string());
        timeout_client_data = None;
        timeout_member_data = None;
    }
    let (allowed_cidrs, source_ip_persistence) = options(klb, ovn, version, subnets, &mut unsupported);
    let mut listeners = Vec::new();
    let mut seen_ports = BTreeSet::new();
    for p in spec.ports.iter().flatten() {
        let protocol = p.protocol.to_ascii_uppercase();
        if protocol == "SCTP" && !version.sctp() {
            unsupported.push(format!("port {} SCTP (Octavia {version} < v2.23)", p.port));
            continue;
        }
        if !seen_ports.insert(p.port) && !version.same_port_protocols() {
            unsupported.push(format!(
                "port {} on two protocols (Octavia {version} < v2.13)",
                p.port
            ));
            continue;
        }
        let health_monitor = health_monitor(klb, &protocol, &mut unsupported);
        listeners.push(DesiredListener {
            name: listener_name(&name, &protocol, p.port),
            members: members_of(klb, p.name.as_deref(), &protocol, s, subnets),
            protocol,
            port: p.port,
            allowed_cidrs: allowed_cidrs.clone(),
            source_ip_persistence,
            health_monitor,
        });
    }
    listeners.sort_by(|a, b| a.name.cmp(&b.name));
    let public_ip = if spec.type_.as_deref() == Some("LoadBalancer") {
        if s.external_net.is_some() {
            Some(
                match spec.lb_ip.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
                    Some(addr) => PublicIp::User(addr.to_string()),
                    None => PublicIp::Pool,
                },
            )
        } else {
            unsupported.push(
                "type LoadBalancer: no [neutron_defaults] external_svc_net is configured, so no floating IP; \
                 the Service answers on its ClusterIP only"
                    .to_string(),
            );
            None
        }
    } else {
        None
    };
    Ok(DesiredLb {
        name,
        vip,
        subnet_id,
        project_id,
        provider,
        lb_algorithm,
        timeout_client_data,
        timeout_member_data,
        listeners,
        public_ip,
        options_apply: !ovn,
        unsupported,
    })
}

/// The health monitor of a `protocol` pool: Octavia's type for the protocol (`TCP`,
/// `UDP-CONNECT`, `SCTP`), a timeout no longer than the delay.
fn health_monitor(
    klb: &KuryrLoadBalancer,
    protocol: &str,
    unsupported: &mut Vec<String>,
) -> Option<HealthMonitorSettings> {
    let hm = klb.spec.health_monitor.as_ref()?;
    let type_ = match protocol {
        "UDP" => "UDP-CONNECT",
        "SCTP" => "SCTP",
        _ => "TCP",
    };
    let mut timeout = hm.timeout;
    if timeout > hm.delay {
        let note = format!(
            "health monitor timeout {timeout} s > delay {} s: the delay is used as timeout",
            hm.delay
        );
        if !unsupported.contains(&note) {
            unsupported.push(note);
        }
        timeout = hm.delay;
    }
    Some(HealthMonitorSettings {
        type_: type_.into(),
        delay: hm.delay,
        timeout,
        max_retries: hm.max_retries,
        max_retries_down: hm.max_retries_down,
    })
}

/// Whether `s` is an IPv4 or IPv6 CIDR (`192.0.2.0/24`).
fn is_cidr(s: &str) -> bool {
    let Some((ip, len)) = s.split_once('/') else {
        return false;
    };
    match (ip.parse::<IpAddr>(), len.parse::<u8>()) {
        (Ok(IpAddr::V4(_)), Ok(l)) => l <= 32,
        (Ok(IpAddr::V6(_)), Ok(l)) => l <= 128,
        _ => false,
    }
}

/// The listeners' `allowed_cidrs` and the pools' `SOURCE_IP` persistence `klb` asks for, where
/// the provider has them (else a line in `unsupported` saying so). Kubernetes restricts only
/// the load balancer's external clients with `loadBalancerSourceRanges`; here the listener
/// also serves the ClusterIP, so the pod subnets are always allowed too (host-network clients,
/// whose node addresses kuryr does not know, are not).
fn options(
    klb: &KuryrLoadBalancer,
    ovn: bool,
    version: ApiVersion,
    subnets: &SubnetMap,
    unsupported: &mut Vec<String>,
) -> (Option<Vec<String>>, bool) {
    let spec = &klb.spec;
    let mut allowed = None;
    let ranges: Vec<&str> = spec.source_ranges.iter().flatten().map(|r| r.trim()).collect();
    if !ranges.is_empty() {
        let (good, bad): (Vec<&str>, Vec<&str>) = ranges.into_iter().partition(|r| is_cidr(r));
        if !bad.is_empty() {
            unsupported.push(format!("loadBalancerSourceRanges {bad:?}: not CIDRs, ignored"));
        }
        if ovn {
            unsupported.push(
                "loadBalancerSourceRanges: the ovn provider has no listener ACLs (allowed_cidrs); every \
                 source can connect (restrict it with security groups or a NetworkPolicy)"
                    .to_string(),
            );
        } else if !version.allowed_cidrs() {
            unsupported.push(format!(
                "loadBalancerSourceRanges: Octavia {version} < v2.12 has no listener allowed_cidrs; every \
                 source can connect"
            ));
        } else if !good.is_empty() {
            let mut all: BTreeSet<String> = good.into_iter().map(str::to_string).collect();
            all.extend(subnets.cidrs());
            allowed = Some(all.into_iter().collect());
        }
    }
    let mut persistence = spec.session_affinity.as_deref() == Some("ClientIP");
    if persistence && ovn {
        unsupported.push(
            "sessionAffinity ClientIP: the ovn provider has no session persistence; connections are \
             spread by source address and port"
                .to_string(),
        );
        persistence = false;
    }
    (allowed, persistence)
}

/// The members of the Service port named `port_name` (`None`/empty: the unnamed port) on
/// `protocol`: every ready address of every slice × the slice port of that name and protocol.
fn members_of(
    klb: &KuryrLoadBalancer,
    port_name: Option<&str>,
    protocol: &str,
    s: &LbSettings,
    subnets: &SubnetMap,
) -> Vec<MemberSpec> {
    let svc_ns = klb.namespace().unwrap_or_default();
    let want = port_name.unwrap_or("");
    let mut out: Vec<MemberSpec> = Vec::new();
    for slice in klb.spec.endpoint_slices.iter().flatten() {
        let Some(target) = slice.ports.iter().flatten().find(|sp| {
            sp.name.as_deref().unwrap_or("") == want
                && sp
                    .protocol
                    .as_deref()
                    .unwrap_or("TCP")
                    .eq_ignore_ascii_case(protocol)
        }) else {
            continue;
        };
        let Some(port) = target.port else { continue };
        for ep in slice.endpoints.iter().flatten() {
            // Kubernetes: an unknown readiness counts as ready.
            if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            let owner = match &ep.target_ref {
                Some(t) if t.kind.as_deref() == Some("Pod") => format!(
                    "{}/{}",
                    t.namespace.as_deref().unwrap_or(&svc_ns),
                    t.name.as_deref().unwrap_or_default()
                ),
                _ => format!("{svc_ns}/{}", klb.name_any()),
            };
            for addr in ep.addresses.iter().flatten() {
                if !routable(addr) {
                    continue;
                }
                let subnet_id = if s.member_mode_l2 {
                    subnets.subnet_of(addr).map(str::to_string)
                } else {
                    None
                };
                out.push(MemberSpec {
                    address: addr.clone(),
                    protocol_port: port,
                    name: format!("{owner}:{port}"),
                    subnet_id,
                });
            }
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.address == b.address && a.protocol_port == b.protocol_port);
    out
}

/// The create body of `d`: the load balancer with its whole tree when `full` (one Octavia
/// write for a new Service), else the load balancer alone (listeners, pools and members then
/// follow one step at a time).
pub fn create_body(d: &DesiredLb, tags: &[String], full: bool) -> kuryr_openstack::octavia::LbCreate {
    use kuryr_openstack::octavia::{FullListener, LbCreate, ListenerCreate, PoolCreate};
    let listeners = if full {
        d.listeners
            .iter()
            .map(|l| FullListener {
                listener: ListenerCreate {
                    loadbalancer_id: String::new(),
                    name: l.name.clone(),
                    protocol: l.protocol.clone(),
                    protocol_port: l.port,
                    timeout_client_data: d.timeout_client_data,
                    timeout_member_data: d.timeout_member_data,
                    allowed_cidrs: l.allowed_cidrs.clone(),
                    tags: tags.to_vec(),
                },
                pool: PoolCreate {
                    listener_id: String::new(),
                    name: l.name.clone(),
                    protocol: l.protocol.clone(),
                    lb_algorithm: d.lb_algorithm.clone(),
                    source_ip_persistence: l.source_ip_persistence,
                    tags: tags.to_vec(),
                },
                members: l.members.clone(),
            })
            .collect()
    } else {
        Vec::new()
    };
    LbCreate {
        name: d.name.clone(),
        description: format!("kuryr-rs: Service {}", d.name),
        project_id: d.project_id.clone(),
        vip_subnet_id: d.subnet_id.clone(),
        vip_address: Some(d.vip.clone()),
        provider: d.provider.clone(),
        tags: tags.to_vec(),
        listeners,
    }
}
