//! The nested bindings of a VM node (upstream's `VlanDriver` and `MacvlanDriver`): the pod's
//! link is created on the VM's interface (`[binding] link_iface`) directly inside the pod's
//! namespace with the port's MAC and MTU, renamed to the CNI interface name, then given the
//! port's addresses and routes. [`VlanBinding`] (`nested-vlan`): a VLAN link with the trunk
//! subport's VLAN ID; Neutron/OVN strip and add the tag outside the VM. [`MacvlanBinding`]
//! (`nested-macvlan`): a macvlan link in bridge mode (pods of one VM reach each other inside
//! it); the VM port's allowed address pairs let the pod's MAC and IPs out. There is no bridge
//! on the VM; the link goes with the pod's namespace, so a deleted sandbox leaves nothing
//! behind.

use std::path::Path;

use crate::{
    binding::{CheckReport, pod_end, spec::WireSpec},
    netlink::{Netlink, NetlinkError},
    netns::{self, NetnsError},
};

/// The kind of link a nested binding creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NestedLink {
    /// An 802.1Q VLAN with this ID.
    Vlan(u16),
    /// A macvlan in bridge mode.
    Macvlan,
}

/// A failed nested binding step.
#[derive(Debug, thiserror::Error)]
pub enum VlanBindingError {
    /// Namespace handling failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// The spec is not a VLAN one (a bug of the caller: the class chose this driver).
    #[error("VIF of port {0} has no VLAN ID")]
    NoVlan(String),
    /// The VM's trunk interface is not there.
    #[error("[binding] link_iface {0}: no such interface on this node")]
    NoLinkIface(String),
    /// Creating or configuring the link failed.
    #[error("wiring the pod's link on the VM's interface")]
    Netlink(#[source] NetlinkError),
}

/// The VLAN binding driver of a VM node.
#[derive(Debug, Clone)]
pub struct VlanBinding {
    link_iface: String,
}

impl VlanBinding {
    /// A driver creating VLANs of `link_iface` (the VM's interface on the trunk's parent port).
    pub fn new(link_iface: impl Into<String>) -> Self {
        Self {
            link_iface: link_iface.into(),
        }
    }

    /// The trunk interface.
    pub fn link_iface(&self) -> &str {
        &self.link_iface
    }

    /// Creates the VLAN link inside the pod's namespace and configures it.
    pub async fn connect(&self, spec: &WireSpec, netns: &Path) -> Result<(), VlanBindingError> {
        let vlan = spec
            .vlan_id
            .ok_or_else(|| VlanBindingError::NoVlan(spec.port_id.clone()))?;
        connect(spec, netns, &self.link_iface, NestedLink::Vlan(vlan)).await
    }

    /// Deletes the pod's VLAN link (idempotent; nothing to do when the namespace is gone: the
    /// link went with it).
    pub async fn disconnect(&self, spec: &WireSpec, netns: &Path) -> Result<(), VlanBindingError> {
        disconnect(spec, netns).await
    }

    /// Verifies the trunk interface and the pod end (MAC, MTU, up, addresses).
    pub async fn check(&self, spec: &WireSpec, netns: &Path) -> Result<CheckReport, VlanBindingError> {
        check(spec, netns, &self.link_iface).await
    }
}

/// The nested macvlan binding driver of a VM node.
#[derive(Debug, Clone)]
pub struct MacvlanBinding {
    link_iface: String,
}

impl MacvlanBinding {
    /// A driver creating macvlans of `link_iface` (the VM's interface).
    pub fn new(link_iface: impl Into<String>) -> Self {
        Self {
            link_iface: link_iface.into(),
        }
    }

    /// Creates the macvlan link inside the pod's namespace and configures it.
    pub async fn connect(&self, spec: &WireSpec, netns: &Path) -> Result<(), VlanBindingError> {
        connect(spec, netns, &self.link_iface, NestedLink::Macvlan).await
    }

    /// Deletes the pod's macvlan link (idempotent).
    pub async fn disconnect(&self, spec: &WireSpec, netns: &Path) -> Result<(), VlanBindingError> {
        disconnect(spec, netns).await
    }

    /// Verifies the VM's interface and the pod end (MAC, MTU, up, addresses).
    pub async fn check(&self, spec: &WireSpec, netns: &Path) -> Result<CheckReport, VlanBindingError> {
        check(spec, netns, &self.link_iface).await
    }
}

async fn connect(
    spec: &WireSpec,
    netns: &Path,
    parent: &str,
    link: NestedLink,
) -> Result<(), VlanBindingError> {
    let (s, path, parent) = (spec.clone(), netns.to_owned(), parent.to_owned());
    netns::on_thread(move || async move { wire(&s, &path, &parent, link).await }).await?
}

async fn disconnect(spec: &WireSpec, netns: &Path) -> Result<(), VlanBindingError> {
    let (ifname, path) = (spec.ifname.clone(), netns.to_owned());
    netns::on_thread(move || async move {
        let Ok(ns) = netns::open(&path) else {
            return Ok(());
        };
        netns::enter(&ns, &path)?;
        let nl = Netlink::connect().map_err(VlanBindingError::Netlink)?;
        nl.delete_link(&ifname).await.map_err(VlanBindingError::Netlink)?;
        Ok(())
    })
    .await?
}

async fn check(spec: &WireSpec, netns: &Path, parent: &str) -> Result<CheckReport, VlanBindingError> {
    let (s, path, parent) = (spec.clone(), netns.to_owned(), parent.to_owned());
    netns::on_thread(move || async move {
        let mut report = Vec::new();
        let host = Netlink::connect().map_err(VlanBindingError::Netlink)?;
        if host
            .link(&parent)
            .await
            .map_err(VlanBindingError::Netlink)?
            .is_none()
        {
            report.push(format!("VM interface {parent} is missing"));
        }
        drop(host);
        let ns = netns::open(&path)?;
        netns::enter(&ns, &path)?;
        let pod = Netlink::connect().map_err(VlanBindingError::Netlink)?;
        report.append(
            &mut pod_end::check(&pod, &s, &path)
                .await
                .map_err(VlanBindingError::Netlink)?,
        );
        Ok(report)
    })
    .await?
}

async fn wire(
    spec: &WireSpec,
    netns_path: &Path,
    parent: &str,
    link: NestedLink,
) -> Result<(), VlanBindingError> {
    let nl_err = VlanBindingError::Netlink;
    let pod_ns = netns::open(netns_path)?;
    // One socket per namespace: `host` opened before the thread moves into the pod's.
    let host = Netlink::connect().map_err(nl_err)?;
    let parent_index = host
        .link(parent)
        .await
        .map_err(nl_err)?
        .ok_or_else(|| VlanBindingError::NoLinkIface(parent.to_owned()))?
        .index;
    netns::enter(&pod_ns, netns_path)?;
    let pod = Netlink::connect().map_err(nl_err)?;
    // Leftovers of an earlier attempt for this container go first.
    for name in [spec.ifname.as_str(), spec.host_dev.as_str()] {
        if pod.delete_link(name).await.map_err(nl_err)? {
            tracing::info!(ifname = name, ?link, "removed a leftover link");
        }
    }
    // Created under the port's device name (no link of the VM has it; the kernel looks the
    // name up in the VM's namespace first, where `eth0` is the trunk interface itself), then
    // renamed to the CNI interface name inside the pod's namespace.
    match link {
        NestedLink::Vlan(vlan) => host
            .add_vlan_into(&spec.host_dev, parent_index, vlan, spec.mac, spec.mtu, &pod_ns)
            .await
            .map_err(nl_err)?,
        NestedLink::Macvlan => host
            .add_macvlan_into(&spec.host_dev, parent_index, spec.mac, spec.mtu, &pod_ns)
            .await
            .map_err(nl_err)?,
    }
    let index = pod
        .link(&spec.host_dev)
        .await
        .map_err(nl_err)?
        .ok_or_else(|| nl_err(NetlinkError::NoLink(spec.host_dev.clone())))?
        .index;
    if spec.host_dev != spec.ifname {
        pod.rename(index, &spec.host_dev, &spec.ifname)
            .await
            .map_err(nl_err)?;
    }
    pod_end::configure(&pod, spec).await.map_err(nl_err)
}
