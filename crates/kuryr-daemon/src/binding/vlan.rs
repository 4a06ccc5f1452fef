//! The nested bindings of a VM node (upstream's `VlanDriver` and `MacvlanDriver`): the pod's
//! link is created on the VM's interface (`[binding] link_iface`) directly inside the pod's
//! namespace under the CNI interface name with the port's MAC and MTU (under the port's device
//! name and renamed when a link of the VM has the CNI name), then given the port's addresses
//! and routes. [`VlanBinding`] (`nested-vlan`): a VLAN link with the trunk
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
    let create = |name: &str| {
        let name = name.to_owned();
        let (host, pod_ns) = (&host, &pod_ns);
        async move {
            match link {
                NestedLink::Vlan(vlan) => {
                    host.add_vlan_into(&name, parent_index, vlan, spec.mac, spec.mtu, pod_ns)
                        .await
                }
                NestedLink::Macvlan => {
                    host.add_macvlan_into(&name, parent_index, spec.mac, spec.mtu, pod_ns)
                        .await
                }
            }
        }
    };
    // Created directly under the CNI interface name: renaming a link waits for an RCU grace
    // period while holding RTNL (measured in the emulated VM nodes: 13 ms a rename, during
    // which every other link operation of the VM waits). The kernel looks the name up in the
    // VM's namespace first, though, and takes an existing link there for a change request: a
    // VM whose own interface is called like the pod's (`eth0`) answers EEXIST, and the link is
    // then created under the port's device name and renamed inside the pod's namespace.
    let index = match create(&spec.ifname).await {
        Ok(()) => {
            let index = pod.index(&spec.ifname).await.map_err(nl_err)?;
            pod.set_up(index, &spec.ifname).await.map_err(nl_err)?;
            index
        }
        Err(e) if e.is_exists() => create_and_rename(&pod, spec, link, create).await?,
        Err(e) => return Err(nl_err(e)),
    };
    pod_end::configure_up(&pod, spec, index).await.map_err(nl_err)
}

/// The fallback of [`wire`]: the link created as `spec.host_dev` and renamed to `spec.ifname`
/// (up); leftovers of an earlier attempt for this container are removed when they are in the
/// way (the common case, a fresh namespace, costs no lookups for them). Returns its index.
async fn create_and_rename<F, Fut>(
    pod: &Netlink,
    spec: &WireSpec,
    link: NestedLink,
    create: F,
) -> Result<u32, VlanBindingError>
where
    F: Fn(&str) -> Fut,
    Fut: std::future::Future<Output = Result<(), NetlinkError>>,
{
    let nl_err = VlanBindingError::Netlink;
    match create(&spec.host_dev).await {
        Err(e) if e.is_exists() => {
            remove_leftovers(pod, spec, link).await?;
            create(&spec.host_dev).await.map_err(nl_err)?;
        }
        other => other.map_err(nl_err)?,
    }
    let index = pod.index(&spec.host_dev).await.map_err(nl_err)?;
    if spec.host_dev == spec.ifname {
        pod.set_up(index, &spec.ifname).await.map_err(nl_err)?;
        return Ok(index);
    }
    match pod.rename_up(index, &spec.host_dev, &spec.ifname).await {
        Err(e) if e.is_exists() => {
            // An earlier attempt's link already has the interface name.
            if pod.delete_link(&spec.ifname).await.map_err(nl_err)? {
                tracing::info!(ifname = %spec.ifname, ?link, "removed a leftover link");
            }
            pod.rename_up(index, &spec.host_dev, &spec.ifname)
                .await
                .map_err(nl_err)?;
        }
        other => other.map_err(nl_err)?,
    }
    Ok(index)
}

/// Deletes the links an earlier attempt for this container may have left in the pod's
/// namespace (under the CNI interface name or the port's device name).
async fn remove_leftovers(pod: &Netlink, spec: &WireSpec, link: NestedLink) -> Result<(), VlanBindingError> {
    for name in [spec.ifname.as_str(), spec.host_dev.as_str()] {
        if pod.delete_link(name).await.map_err(VlanBindingError::Netlink)? {
            tracing::info!(ifname = name, ?link, "removed a leftover link");
        }
    }
    Ok(())
}
