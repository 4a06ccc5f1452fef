//! [`TrunkSubports`]: `[kubernetes] pod_vif_driver = nested-vlan` with `vif_pool_driver =
//! nested` — pods of nodes that are VMs get VLAN subports of the VM's trunk. The node's trunk is
//! the one whose parent port has the Node's InternalIP on a `[pod_vif_nested]
//! worker_nodes_subnets` subnet; a pool's bulk of new ports is added to it in ONE
//! `add_subports` call with VLAN IDs reserved in memory first (never two of this controller's
//! subports with one ID); pooled ports stay on the trunk; a port leaves the trunk before it is
//! deleted. After a restart everything is read back from the trunks ([`TrunkSubports::refresh`]):
//! which port is a subport of which node, with which VLAN ID.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use k8s_openapi::api::core::v1::Node;
use kube::{Api, ResourceExt};
use kuryr_core::nested::{NestedError, Subport, TrunkView, VlanIds, node_trunk};
use kuryr_openstack::{BoxFuture, Neutron, Port, PortCreate, PortFilter, ResourceFilter, SubPort, Trunk};
use kuryr_types::{constants::DEVICE_OWNER, vif::Vif};
use tracing::{info, warn};

use super::Attachment;
use crate::pool::{Error, lock, netcache::NetCache};

/// `device_owner` Neutron's trunk plugin gives a port it made a subport.
pub const SUBPORT_OWNER: &str = "trunk:subport";

#[derive(Default)]
struct Books {
    /// Node → its trunk.
    trunk_of_host: HashMap<String, String>,
    /// Trunk → its node (trunks of no node of the cluster are absent).
    host_of_trunk: HashMap<String, String>,
    /// Port → (trunk, VLAN ID), for every subport of every trunk seen.
    subports: HashMap<String, (String, u16)>,
    vlans: VlanIds,
}

impl Books {
    fn learn(&mut self, trunk: &TrunkView, host: Option<&str>) {
        self.vlans.observe(trunk);
        self.subports.retain(|_, (t, _)| t != &trunk.trunk_id);
        for s in &trunk.subports {
            self.subports
                .insert(s.port_id.clone(), (trunk.trunk_id.clone(), s.segmentation_id));
        }
        if let Some(h) = host {
            self.trunk_of_host.insert(h.to_string(), trunk.trunk_id.clone());
            self.host_of_trunk.insert(trunk.trunk_id.clone(), h.to_string());
        }
    }
}

/// Where nodes' InternalIPs come from (Kubernetes; a table in unit tests).
pub trait NodeAddresses: Send + Sync {
    /// The InternalIP of `node`.
    fn internal_ip<'a>(&'a self, node: &'a str) -> BoxFuture<'a, Result<String, Error>>;
    /// Every node's, IP → node.
    fn all(&self) -> BoxFuture<'_, Result<HashMap<String, String>, Error>>;
}

/// The Nodes of the cluster.
pub struct KubeNodes(pub Api<Node>);

impl NodeAddresses for KubeNodes {
    fn internal_ip<'a>(&'a self, node: &'a str) -> BoxFuture<'a, Result<String, Error>> {
        Box::pin(async move {
            let n = self.0.get(node).await.map_err(|source| Error::Kube {
                what: format!("reading Node {node} (its InternalIP finds its trunk)"),
                source,
            })?;
            internal_ip(&n).ok_or_else(|| Error::NodeAddress {
                node: node.to_string(),
            })
        })
    }

    fn all(&self) -> BoxFuture<'_, Result<HashMap<String, String>, Error>> {
        Box::pin(async move {
            let nodes = self
                .0
                .list(&Default::default())
                .await
                .map_err(|source| Error::Kube {
                    what: "listing Nodes (their InternalIPs find their trunks)".into(),
                    source,
                })?;
            Ok(nodes
                .items
                .iter()
                .filter_map(|n| Some((internal_ip(n)?, n.name_any())))
                .collect())
        })
    }
}

/// A fixed table node → IP.
impl NodeAddresses for HashMap<String, String> {
    fn internal_ip<'a>(&'a self, node: &'a str) -> BoxFuture<'a, Result<String, Error>> {
        let ip = self.get(node).cloned();
        Box::pin(async move {
            ip.ok_or_else(|| Error::NodeAddress {
                node: node.to_string(),
            })
        })
    }

    fn all(&self) -> BoxFuture<'_, Result<HashMap<String, String>, Error>> {
        let m = self.iter().map(|(n, ip)| (ip.clone(), n.clone())).collect();
        Box::pin(async move { Ok(m) })
    }
}

/// [`Error::Nested`] of `host`.
pub(crate) fn nested_err(host: &str, source: NestedError) -> Error {
    Error::Nested {
        host: host.to_string(),
        source,
    }
}

/// `host`'s InternalIP and the ports that have it as a fixed IP (its VM's port among them).
pub(crate) async fn ports_of_node_ip(
    neutron: &dyn Neutron,
    nodes: &dyn NodeAddresses,
    host: &str,
) -> Result<(String, Vec<Port>), Error> {
    let ip = nodes.internal_ip(host).await?;
    let ports = neutron
        .list_ports(&PortFilter {
            fixed_ip_address: Some(ip.clone()),
            ..PortFilter::default()
        })
        .await
        .map_err(|source| Error::ListPorts {
            what: "the node VM's port",
            source,
        })?;
    Ok((ip, ports))
}

/// See the module documentation.
pub struct TrunkSubports {
    neutron: Arc<dyn Neutron>,
    nodes: Arc<dyn NodeAddresses>,
    worker_subnets: Vec<String>,
    books: Mutex<Books>,
}

/// A trunk as [`TrunkView`] (its VLAN subports).
fn view(t: &Trunk) -> TrunkView {
    TrunkView {
        trunk_id: t.id.clone(),
        parent_port_id: t.port_id.clone(),
        subports: t
            .sub_ports
            .iter()
            .filter(|s| s.segmentation_type == "vlan")
            .map(|s| Subport {
                port_id: s.port_id.clone(),
                segmentation_id: s.segmentation_id,
            })
            .collect(),
    }
}

/// Whether `port` is a trunk's parent (a VM's port, never a pool's).
fn is_trunk_parent(port: &Port) -> bool {
    port.extra.get("trunk_details").is_some_and(|v| !v.is_null())
}

/// The Node's InternalIP (upstream's `get_node_ip`: the first one).
fn internal_ip(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

impl TrunkSubports {
    /// The attachment of nested-vlan pools: nodes' addresses from `nodes`, their trunks'
    /// parents on `worker_subnets`.
    pub fn new(
        neutron: Arc<dyn Neutron>,
        nodes: Arc<dyn NodeAddresses>,
        worker_subnets: Vec<String>,
    ) -> Arc<Self> {
        Arc::new(Self {
            neutron,
            nodes,
            worker_subnets,
            books: Mutex::default(),
        })
    }

    /// The trunk of `host` (read once per node, and again after a conflict).
    async fn trunk_for(&self, host: &str) -> Result<String, Error> {
        if let Some(t) = lock(&self.books).trunk_of_host.get(host) {
            return Ok(t.clone());
        }
        let (ip, ports) = ports_of_node_ip(&*self.neutron, &*self.nodes, host).await?;
        let trunk = node_trunk(&ports, &ip, &self.worker_subnets).map_err(|e| nested_err(host, e))?;
        info!(host, ip, trunk = %trunk.trunk_id, subports = trunk.subports.len(), "node's trunk found");
        lock(&self.books).learn(&trunk, Some(host));
        Ok(trunk.trunk_id)
    }

    /// Forgets which trunk is `host`'s.
    fn forget_host(&self, host: &str) {
        let mut b = lock(&self.books);
        if let Some(t) = b.trunk_of_host.remove(host) {
            b.host_of_trunk.remove(&t);
        }
    }

    /// Reads the trunk again (after a conflict: another writer used IDs).
    async fn reread(&self, trunk_id: &str) -> Result<(), Error> {
        let t = self
            .neutron
            .get_trunk(trunk_id)
            .await
            .map_err(|source| Error::Trunk {
                op: "read",
                trunk_id: trunk_id.to_string(),
                source,
            })?;
        let host = lock(&self.books).host_of_trunk.get(trunk_id).cloned();
        lock(&self.books).learn(&view(&t), host.as_deref());
        Ok(())
    }

    /// One `add_subports` with freshly reserved IDs; the IDs used.
    async fn add(&self, host: &str, trunk_id: &str, ports: &[Port]) -> Result<Vec<u16>, Error> {
        let ids = lock(&self.books)
            .vlans
            .reserve(trunk_id, ports.len())
            .map_err(|e| nested_err(host, e))?;
        let subs: Vec<SubPort> = ports
            .iter()
            .zip(&ids)
            .map(|(p, id)| SubPort::vlan(p.id.clone(), *id))
            .collect();
        match self.neutron.add_subports(trunk_id, &subs).await {
            Ok(_) => {
                let mut b = lock(&self.books);
                b.vlans.confirm(trunk_id, &ids);
                for s in &subs {
                    b.subports
                        .insert(s.port_id.clone(), (trunk_id.to_string(), s.segmentation_id));
                }
                Ok(ids)
            }
            Err(source) => {
                let mut b = lock(&self.books);
                if source.answer_may_be_lost() {
                    // The answer was lost, maybe not the change: keep them as subports, so
                    // the deletion that follows takes them off the trunk first.
                    b.vlans.confirm(trunk_id, &ids);
                    for s in &subs {
                        b.subports
                            .insert(s.port_id.clone(), (trunk_id.to_string(), s.segmentation_id));
                    }
                } else {
                    b.vlans.release(trunk_id, &ids);
                }
                Err(Error::Trunk {
                    op: "add subports to",
                    trunk_id: trunk_id.to_string(),
                    source,
                })
            }
        }
    }
}

impl TrunkSubports {
    /// Takes `ids` off `trunk_id` in one call. Neutron's call is all or nothing: when one of
    /// them is no subport any more (a removal whose answer was lost), the trunk is read and
    /// only those still on it are removed. A trunk that is gone has no subports left.
    async fn remove(&self, trunk_id: &str, ids: &[String]) -> Result<(), kuryr_openstack::Error> {
        match self.neutron.remove_subports(trunk_id, ids).await {
            Ok(_) => Ok(()),
            Err(kuryr_openstack::Error::NotFound { .. }) => {
                let t = match self.neutron.get_trunk(trunk_id).await {
                    Ok(t) => t,
                    Err(kuryr_openstack::Error::NotFound { .. }) => return Ok(()),
                    Err(e) => return Err(e),
                };
                let still: Vec<String> = ids
                    .iter()
                    .filter(|id| t.sub_ports.iter().any(|s| &s.port_id == *id))
                    .cloned()
                    .collect();
                if still.is_empty() {
                    return Ok(());
                }
                match self.neutron.remove_subports(trunk_id, &still).await {
                    Ok(_) | Err(kuryr_openstack::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }
}

impl Attachment for TrunkSubports {
    fn name(&self) -> &'static str {
        "nested-vlan"
    }

    fn create_body(&self, _host: &str, mut body: PortCreate) -> PortCreate {
        // Neutron binds a subport where the trunk's parent is bound.
        body.binding_host_id = None;
        body
    }

    fn attach<'a>(&'a self, host: &'a str, ports: &'a mut [Port]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            if ports.is_empty() {
                return Ok(());
            }
            let trunk_id = self.trunk_for(host).await?;
            match self.add(host, &trunk_id, ports).await {
                Ok(_) => {}
                Err(e)
                    if e.neutron()
                        .is_some_and(|n| matches!(n, kuryr_openstack::Error::Conflict { .. })) =>
                {
                    // Another writer took an ID (or the trunk changed): read it, try once more.
                    warn!(host, trunk = %trunk_id, error = %crate::error_chain(&e), "subports conflict: reading the trunk again");
                    self.reread(&trunk_id).await?;
                    self.add(host, &trunk_id, ports).await?;
                }
                Err(e) => {
                    if e.neutron()
                        .is_some_and(|n| matches!(n, kuryr_openstack::Error::NotFound { .. }))
                    {
                        // The trunk is gone (deleted, or recreated under the node): find the
                        // node's trunk again next time.
                        self.forget_host(host);
                    }
                    return Err(e);
                }
            }
            // As Neutron's trunk plugin now shows them.
            for p in ports.iter_mut() {
                p.device_owner = SUBPORT_OWNER.into();
                p.binding_host_id = host.to_string();
                if p.binding_vif_type.is_empty() || p.binding_vif_type == "unbound" {
                    p.binding_vif_type = "ovs".into();
                }
            }
            Ok(())
        })
    }

    fn detach<'a>(&'a self, port_ids: &'a [String]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let mut by_trunk: HashMap<String, Vec<(String, u16)>> = HashMap::new();
            {
                let b = lock(&self.books);
                for id in port_ids {
                    if let Some((t, vlan)) = b.subports.get(id) {
                        by_trunk.entry(t.clone()).or_default().push((id.clone(), *vlan));
                    }
                }
            }
            let mut first = None;
            for (trunk_id, subs) in by_trunk {
                let ids: Vec<String> = subs.iter().map(|(p, _)| p.clone()).collect();
                let gone = match self.remove(&trunk_id, &ids).await {
                    Ok(()) => true,
                    Err(source) => {
                        first.get_or_insert(Error::Trunk {
                            op: "remove subports from",
                            trunk_id: trunk_id.clone(),
                            source,
                        });
                        false
                    }
                };
                if gone {
                    let mut b = lock(&self.books);
                    let vlans: Vec<u16> = subs.iter().map(|(_, v)| *v).collect();
                    b.vlans.release(&trunk_id, &vlans);
                    for (p, _) in &subs {
                        b.subports.remove(p);
                    }
                }
            }
            first.map_or(Ok(()), Err)
        })
    }

    fn refresh(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            let node_of_ip = self.nodes.all().await?;
            let trunks = self
                .neutron
                .list_trunks(&ResourceFilter::default())
                .await
                .map_err(|source| Error::Trunk {
                    op: "list",
                    trunk_id: "(all)".into(),
                    source,
                })?;
            let parents = if trunks.is_empty() {
                Vec::new()
            } else {
                self.neutron
                    .list_ports(&PortFilter::ids(trunks.iter().map(|t| t.port_id.clone())))
                    .await
                    .map_err(|source| Error::ListPorts {
                        what: "the trunks' parent ports",
                        source,
                    })?
            };
            let host_of_parent: HashMap<&str, &String> = parents
                .iter()
                .filter_map(|p| {
                    let ip = p
                        .fixed_ips
                        .iter()
                        .find(|ip| self.worker_subnets.contains(&ip.subnet_id))?;
                    Some((p.id.as_str(), node_of_ip.get(&ip.ip_address)?))
                })
                .collect();
            let mut b = lock(&self.books);
            b.trunk_of_host.clear();
            b.host_of_trunk.clear();
            for t in &trunks {
                b.learn(
                    &view(t),
                    host_of_parent.get(t.port_id.as_str()).map(|h| h.as_str()),
                );
            }
            info!(
                trunks = trunks.len(),
                of_nodes = b.host_of_trunk.len(),
                subports = b.subports.len(),
                "nested: trunks read"
            );
            Ok(())
        })
    }

    fn listed_owner(&self) -> Option<&'static str> {
        None
    }

    fn pool_view(&self, mut port: Port) -> Option<Port> {
        let b = lock(&self.books);
        match b.subports.get(&port.id) {
            Some((trunk, _)) => {
                // A subport of a trunk of no node: not a pool's (left alone).
                let host = b.host_of_trunk.get(trunk)?;
                port.binding_host_id = host.clone();
                port.device_owner = DEVICE_OWNER.into();
                Some(port)
            }
            // Tagged, not (or no longer) on a trunk, bound to no host: a pool port whose
            // attachment never happened or was undone (nested ports are created without a
            // binding host; a bound one belongs to the bare-metal pools of a mixed cluster).
            // Unbound as the pools see it: deferred while young, deleted when old. (An unbound
            // port naming a device is a nested-macvlan pod's: its VM's port.)
            None if (port.device_owner == DEVICE_OWNER || port.device_owner.is_empty())
                && port.binding_host_id.is_empty()
                && port.device_id.is_empty()
                && !is_trunk_parent(&port) =>
            {
                port.binding_host_id.clear();
                port.device_owner = DEVICE_OWNER.into();
                Some(port)
            }
            None => None,
        }
    }

    fn vif<'a>(
        &'a self,
        nets: &'a NetCache,
        port: &'a Port,
        _ovs_bridge: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vif, Error>> {
        Box::pin(async move {
            let vlan = lock(&self.books)
                .subports
                .get(&port.id)
                .map(|(_, v)| *v)
                .ok_or_else(|| Error::NotASubport {
                    port_id: port.id.clone(),
                })?;
            nets.vif_nested(port, vlan).await
        })
    }
}
