//! How a pool's ports reach their pods' nodes, the one thing the pod VIF drivers change in the
//! pools: [`Bound`] (`neutron-vif`: each port bound to its node as the binding host),
//! [`nested::TrunkSubports`] (`nested-vlan`: each port a VLAN subport of the node VM's trunk) or
//! [`macvlan::AddressPairs`] (`nested-macvlan`: each port's pairs allowed on the VM's port).
//! The executor ([`super::VifPool`]) asks the attachment for a create body, to attach new ports
//! before they are pooled, to detach ports before deleting them, how a listed port maps onto
//! the pools ([`Attachment::pool_view`]), and for a taken port's VIF.

pub mod macvlan;
pub mod nested;

use kuryr_openstack::{BoxFuture, Port, PortCreate};
use kuryr_types::vif::Vif;

use super::{Error, netcache::NetCache};
use crate::drivers::PodTarget;

/// See the module documentation.
pub trait Attachment: Send + Sync {
    /// The name of the VIF driver (`neutron-vif`, `nested-vlan`), for logs.
    fn name(&self) -> &'static str;

    /// Reads what [`Attachment::create_body`] needs for `host` (macvlan: the VM's port), before
    /// ports of `host` are created.
    fn prepare<'a>(&'a self, _host: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }

    /// What a port of `host`'s pods must be, when the driver decides it rather than the
    /// drivers of the target: macvlan puts it on the VM port's own subnet (the only one whose
    /// traffic the VM's interface carries untagged) with no security groups (its port has no
    /// port security). After [`Attachment::prepare`].
    fn place(&self, _host: &str, _target: &PodTarget) -> Option<PodTarget> {
        None
    }

    /// Adjusts the create body of a pool port of `host` (the executor fills in the rest).
    fn create_body(&self, host: &str, body: PortCreate) -> PortCreate;

    /// Makes newly created ports of `host`'s pool usable (nested: adds them to the trunk) and
    /// updates them to what Neutron now shows. On an error nothing stays attached: the caller
    /// deletes the ports.
    fn attach<'a>(&'a self, host: &'a str, ports: &'a mut [Port]) -> BoxFuture<'a, Result<(), Error>>;

    /// Undoes [`Attachment::attach`] before the ports are deleted (ports it does not know are
    /// left alone).
    fn detach<'a>(&'a self, port_ids: &'a [String]) -> BoxFuture<'a, Result<(), Error>>;

    /// Reads what it needs from Neutron and Kubernetes before the pools are rebuilt, and again
    /// before each janitor pass (nested: the trunks of the nodes and their subports).
    fn refresh(&self) -> BoxFuture<'_, Result<(), Error>>;

    /// `device_owner` of this cluster's ports in listings (`None`: filtered by
    /// [`Attachment::pool_view`] instead).
    fn listed_owner(&self) -> Option<&'static str>;

    /// A listed port as the pools see it (`None`: not one of the pools' kinds of port). The
    /// pure pool state keys pools by `binding_host_id` and recognises pool ports by
    /// `device_owner = compute:kuryr`: nested mode maps a subport onto its trunk's node.
    fn pool_view(&self, port: Port) -> Option<Port>;

    /// Its ports' VIFs are active from the start (never bound: Neutron keeps them DOWN, so
    /// nothing is waited for), and their `device_id` is the driver's (not a pod's with
    /// `port_debug`).
    fn unbound_ports(&self) -> bool {
        false
    }

    /// The VIF of a taken port.
    fn vif<'a>(
        &'a self,
        nets: &'a NetCache,
        port: &'a Port,
        ovs_bridge: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vif, Error>>;
}

/// `neutron-vif`: the port is bound to the pod's node (`binding:host_id`), where OVN or the
/// Open vSwitch agent plugs it.
pub struct Bound;

impl Attachment for Bound {
    fn name(&self) -> &'static str {
        "neutron-vif"
    }

    fn create_body(&self, host: &str, mut body: PortCreate) -> PortCreate {
        body.binding_host_id = Some(host.to_string());
        body
    }

    fn attach<'a>(&'a self, _host: &'a str, _ports: &'a mut [Port]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }

    fn detach<'a>(&'a self, _port_ids: &'a [String]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }

    fn refresh(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }

    fn listed_owner(&self) -> Option<&'static str> {
        Some(kuryr_types::constants::DEVICE_OWNER)
    }

    fn pool_view(&self, port: Port) -> Option<Port> {
        // Unbound and naming a device: a nested-macvlan pod's port (its VM's port), not ours.
        (!port.binding_host_id.is_empty() || port.device_id.is_empty()).then_some(port)
    }

    fn vif<'a>(
        &'a self,
        nets: &'a NetCache,
        port: &'a Port,
        ovs_bridge: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vif, Error>> {
        Box::pin(nets.vif(port, ovs_bridge))
    }
}
