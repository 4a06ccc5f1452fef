//! [`FakeNeutron`]: an in-memory [`Neutron`] for the controller's unit tests. It keeps networks,
//! subnets (with subnet pools) and ports, allocates MACs and IPs from the subnets, leaves ports
//! `DOWN` until [`FakeNeutron::activate`], applies filters like Neutron, reports every call to
//! its observer, and can be told to fail the next N calls of an operation.
//!
//! Simplifications: tags always ride in the create body (whatever [`Neutron::tag_mode`] says),
//! IPv4 only, no pagination, no policies or quotas (inject [`FaultKind::OverQuota`] instead).

mod ipam;
mod neutron_impl;
mod security_groups;
#[cfg(test)]
mod tests;
mod trunks;

use crate::api::{BoxFuture, Neutron};
use crate::error::{Error, Result};
use crate::floating_ip::{FloatingIp, FloatingIpCreate, FloatingIpFilter};
use crate::model::{NetworkCreate, PortCreate, PortFilter, PortUpdate, ResourceFilter, SubnetCreate};
use crate::observe::{NoopObserver, RequestObserver, observed, ops};
use ipam::Cidr;
use kuryr_core::neutron::{FixedIp, Network, Port, QuotaUsage, Subnet, SubnetPool, TagMode};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The error an injected fault produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// 404 with this Neutron type.
    NotFound(String),
    /// 409 with this Neutron type (`IpAddressAlreadyAllocated`, `PortInUse`, …).
    Conflict(String),
    /// 409 `OverQuota`.
    OverQuota,
    /// 400.
    BadRequest,
    /// 401.
    Unauthorized,
    /// This 5xx status.
    ServerError(u16),
    /// No answer.
    Timeout,
    /// Connection failure.
    Transport,
}

impl FaultKind {
    pub(crate) fn to_error(&self, op: &'static str) -> Error {
        let message = "injected fault".to_string();
        match self {
            FaultKind::NotFound(kind) => Error::NotFound {
                op,
                kind: kind.clone(),
                message,
            },
            FaultKind::Conflict(kind) => Error::Conflict {
                op,
                kind: kind.clone(),
                message,
            },
            FaultKind::OverQuota => Error::OverQuota { op, message },
            FaultKind::BadRequest => Error::BadRequest {
                op,
                status: 400,
                kind: "HTTPBadRequest".into(),
                message,
            },
            FaultKind::Unauthorized => Error::Unauthorized {
                op,
                status: 401,
                message,
            },
            FaultKind::ServerError(status) => Error::ServerError {
                op,
                status: *status,
                message,
            },
            FaultKind::Timeout => Error::Timeout {
                op,
                after: Duration::from_secs(30),
            },
            FaultKind::Transport => Error::Transport {
                op,
                source: Box::new(std::io::Error::new(std::io::ErrorKind::ConnectionReset, message)),
            },
        }
    }
}

#[derive(Debug)]
struct Fault {
    op: &'static str,
    remaining: u32,
    kind: FaultKind,
}

#[derive(Debug, Clone)]
struct Pool {
    cidr: Cidr,
    default_prefixlen: u8,
}

#[derive(Debug, Default)]
struct State {
    /// How long each call takes (0: answered at once).
    latency: std::time::Duration,
    networks: BTreeMap<String, Network>,
    subnets: BTreeMap<String, Subnet>,
    ports: BTreeMap<String, Port>,
    pools: BTreeMap<String, Pool>,
    /// `(router, subnet)` → router port ID.
    router_interfaces: BTreeMap<(String, String), String>,
    floating_ips: BTreeMap<String, FloatingIp>,
    security_groups: BTreeMap<String, crate::security_group::SecurityGroup>,
    sg_rules: BTreeMap<String, crate::security_group::SecurityGroupRule>,
    trunks: BTreeMap<String, crate::trunk::Trunk>,
    /// Host part of the next floating IP address (172.24.4.N).
    next_fip_host: u32,
    faults: Vec<Fault>,
    /// `binding:vif_details` of ports created from now on.
    vif_details: serde_json::Map<String, Value>,
    calls: BTreeMap<&'static str, u64>,
    next_id: u64,
    /// Addresses in use per subnet, and where the next search starts (an index kept by
    /// [`State::insert_port`] / [`State::remove_port`]: allocating scanned every port before).
    ipam: BTreeMap<String, (std::collections::HashSet<u32>, u32)>,
}

impl State {
    /// Stores a port, marking its addresses used.
    fn insert_port(&mut self, port: Port) {
        for ip in &port.fixed_ips {
            if let Ok(a) = ip.ip_address.parse::<std::net::Ipv4Addr>() {
                self.ipam
                    .entry(ip.subnet_id.clone())
                    .or_default()
                    .0
                    .insert(u32::from(a));
            }
        }
        self.ports.insert(port.id.clone(), port);
    }

    /// Removes a port, freeing its addresses.
    fn remove_port(&mut self, id: &str) -> Option<Port> {
        let port = self.ports.remove(id)?;
        for ip in &port.fixed_ips {
            if let (Ok(a), Some((used, _))) = (
                ip.ip_address.parse::<std::net::Ipv4Addr>(),
                self.ipam.get_mut(&ip.subnet_id),
            ) {
                used.remove(&u32::from(a));
            }
        }
        Some(port)
    }

    /// IDs in creation order, unique in their first 11 characters as well: what a node names
    /// a port's devices after (`tap` + 11 characters), so the model cloud's ports can be wired
    /// by real daemons (the first model-cloud run against real nodes found every port named
    /// `tap00000000-00`).
    fn new_id(&mut self) -> String {
        self.next_id += 1;
        format!("{:08x}-0000-4000-8000-{:012x}", self.next_id, self.next_id)
    }
}

fn not_found(op: &'static str, kind: &str, id: &str) -> Error {
    Error::NotFound {
        op,
        kind: kind.into(),
        message: format!("{} {id} could not be found.", kind.trim_end_matches("NotFound")),
    }
}

fn bad_request(op: &'static str, message: String) -> Error {
    Error::BadRequest {
        op,
        status: 400,
        kind: "BadRequest".into(),
        message,
    }
}

fn tags_match(tags: &[String], all: &[String], any: &[String], not: &[String]) -> bool {
    all.iter().all(|t| tags.contains(t))
        && (any.is_empty() || any.iter().any(|t| tags.contains(t)))
        && !not.iter().any(|t| tags.contains(t))
}

fn eq_opt(want: &Option<String>, have: &str) -> bool {
    want.as_deref().is_none_or(|w| w == have)
}

/// Keeps only `fields` of a port, as `?fields=` does.
fn project_fields(port: &Port, fields: &[String]) -> Port {
    if fields.is_empty() {
        return port.clone();
    }
    let Ok(Value::Object(full)) = serde_json::to_value(port) else {
        return port.clone();
    };
    let kept: Map<String, Value> = full.into_iter().filter(|(k, _)| fields.contains(k)).collect();
    serde_json::from_value(Value::Object(kept)).unwrap_or_default()
}

/// In-memory Neutron. Cheap to clone (shared state).
#[derive(Clone)]
pub struct FakeNeutron {
    state: Arc<Mutex<State>>,
    observer: Arc<dyn RequestObserver>,
    tag_mode: TagMode,
}

impl Default for FakeNeutron {
    fn default() -> Self {
        FakeNeutron::new()
    }
}

impl std::fmt::Debug for FakeNeutron {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeNeutron").finish_non_exhaustive()
    }
}

// The controller holds an `Arc<dyn Neutron>`: the fake must stay usable that way.
const _: fn() = || {
    fn assert_neutron<T: Neutron + Clone + 'static>() {}
    assert_neutron::<FakeNeutron>();
    fn assert_dyn(_: &std::sync::Arc<dyn Neutron>) {}
    let _ = assert_dyn;
};

impl FakeNeutron {
    /// An empty cloud that reports [`TagMode::InCreateBody`].
    pub fn new() -> Self {
        FakeNeutron {
            state: Arc::default(),
            observer: Arc::new(NoopObserver),
            tag_mode: TagMode::InCreateBody,
        }
    }

    /// Reports calls to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// Reports `mode` from [`Neutron::tag_mode`].
    pub fn with_tag_mode(mut self, mode: TagMode) -> Self {
        self.tag_mode = mode;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Adds a network (MTU 1442) with one IPv4 subnet (gateway `.1`); returns both.
    pub fn add_network(&self, name: &str, cidr: &str) -> (Network, Subnet) {
        let mut st = self.lock();
        let net = Network {
            id: st.new_id(),
            name: name.into(),
            mtu: Some(1442),
            project_id: "fake-project".into(),
            ..Default::default()
        };
        let gateway = Cidr::parse(cidr).map(|c| c.first_host().to_string());
        let subnet = Subnet {
            id: st.new_id(),
            network_id: net.id.clone(),
            cidr: cidr.into(),
            gateway_ip: gateway,
            ip_version: Some(4),
            ..Default::default()
        };
        st.networks.insert(net.id.clone(), net.clone());
        st.subnets.insert(subnet.id.clone(), subnet.clone());
        (net, subnet)
    }

    /// Adds a subnet pool (`cidr`, default prefix length) under `id`.
    pub fn add_subnet_pool(&self, id: &str, cidr: &str, default_prefixlen: u8) {
        if let Some(cidr) = Cidr::parse(cidr) {
            self.lock().pools.insert(
                id.into(),
                Pool {
                    cidr,
                    default_prefixlen,
                },
            );
        }
    }

    /// Every call from now on takes `latency` (a slow Neutron: lets concurrent callers meet).
    pub fn set_latency(&self, latency: std::time::Duration) {
        self.lock().latency = latency;
    }

    /// The next `count` calls of `op` (an [`ops`] name) fail with `kind`.
    pub fn fail_next(&self, op: &'static str, count: u32, kind: FaultKind) {
        self.lock().faults.push(Fault {
            op,
            remaining: count,
            kind,
        });
    }

    /// Marks a port ACTIVE (as the backend does once it is plugged); false if unknown.
    pub fn activate(&self, port_id: &str) -> bool {
        self.set_status(port_id, "ACTIVE")
    }

    /// Sets a port's status; false if unknown.
    pub fn set_status(&self, port_id: &str, status: &str) -> bool {
        match self.lock().ports.get_mut(port_id) {
            Some(p) => {
                p.status = status.into();
                true
            }
            None => false,
        }
    }

    /// Every port created from now on is bound with these `binding:vif_details` (what a
    /// mechanism driver reports, e.g. ML2/OVS's `ovs_hybrid_plug`).
    pub fn bind_with_vif_details(&self, details: serde_json::Map<String, Value>) {
        self.lock().vif_details = details;
    }

    /// Removes a port behind the controller's back (someone else deleted it).
    pub fn remove_port_externally(&self, port_id: &str) -> Option<Port> {
        self.lock().remove_port(port_id)
    }

    /// All ports, by ID.
    pub fn ports(&self) -> Vec<Port> {
        self.lock().ports.values().cloned().collect()
    }

    /// One port.
    pub fn port(&self, id: &str) -> Option<Port> {
        self.lock().ports.get(id).cloned()
    }

    /// All networks.
    pub fn networks(&self) -> Vec<Network> {
        self.lock().networks.values().cloned().collect()
    }

    /// All subnets.
    pub fn subnets(&self) -> Vec<Subnet> {
        self.lock().subnets.values().cloned().collect()
    }

    /// `(router, subnet)` pairs attached.
    pub fn router_interfaces(&self) -> Vec<(String, String)> {
        self.lock().router_interfaces.keys().cloned().collect()
    }

    /// Every security group.
    pub fn security_groups(&self) -> Vec<crate::security_group::SecurityGroup> {
        self.lock().security_groups.values().cloned().collect()
    }

    /// The rules of one security group.
    pub fn security_group_rules(&self, sg_id: &str) -> Vec<crate::security_group::SecurityGroupRule> {
        self.lock()
            .sg_rules
            .values()
            .filter(|r| r.security_group_id == sg_id)
            .cloned()
            .collect()
    }

    /// Every floating IP.
    pub fn floating_ips(&self) -> Vec<FloatingIp> {
        self.lock().floating_ips.values().cloned().collect()
    }

    /// Adds a floating IP owned by someone else (a user's `loadBalancerIP`), free.
    pub fn add_floating_ip(&self, network_id: &str, address: &str) -> FloatingIp {
        let mut st = self.lock();
        let fip = FloatingIp {
            id: st.new_id(),
            floating_ip_address: address.into(),
            floating_network_id: network_id.into(),
            project_id: "fake-project".into(),
            status: "DOWN".into(),
            ..Default::default()
        };
        st.floating_ips.insert(fip.id.clone(), fip.clone());
        fip
    }

    /// How many calls of `op` were made (failed ones included).
    pub fn calls(&self, op: &str) -> u64 {
        self.lock().calls.get(op).copied().unwrap_or(0)
    }

    /// Runs `f` on the state as operation `op`: counts it, applies faults, observes it.
    fn run<'a, T, F>(&'a self, op: &'static str, f: F) -> BoxFuture<'a, Result<T>>
    where
        T: Send + 'a,
        F: FnOnce(&mut State) -> Result<T> + Send + 'a,
    {
        Box::pin(observed(self.observer.as_ref(), op, async move {
            let latency = self.lock().latency;
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            let mut st = self.lock();
            *st.calls.entry(op).or_default() += 1;
            if let Some(i) = st.faults.iter().position(|f| f.op == op && f.remaining > 0) {
                let fault = &mut st.faults[i];
                fault.remaining -= 1;
                let err = fault.kind.to_error(op);
                st.faults.retain(|f| f.remaining > 0);
                return Err(err);
            }
            f(&mut st)
        }))
    }
}
