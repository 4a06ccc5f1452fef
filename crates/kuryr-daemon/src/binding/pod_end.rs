//! The pod's end of any binding, once its link is in the pod's namespace under the CNI
//! interface name with the port's MAC: brought up (with the namespace's loopback), given the
//! port's addresses and routes; and checked the same way. Shared by the Open vSwitch veth
//! binding and the nested VLAN binding. Runs on a thread inside the pod's namespace.

use std::path::Path;

use crate::{
    binding::{CheckReport, spec::WireSpec},
    netlink::{Netlink, NetlinkError},
};

/// Brings `spec.ifname` and the loopback up, then adds the addresses and routes.
pub async fn configure(pod: &Netlink, spec: &WireSpec) -> Result<(), NetlinkError> {
    let index = pod.index(&spec.ifname).await?;
    pod.set_up(index, &spec.ifname).await?;
    configure_up(pod, spec, index).await
}

/// With `spec.ifname` up as link `index`: brings the loopback up, adds the addresses and
/// routes.
pub async fn configure_up(pod: &Netlink, spec: &WireSpec, index: u32) -> Result<(), NetlinkError> {
    if spec.addresses.iter().any(|a| a.addr().is_ipv6()) {
        // Container runtimes may start namespaces with IPv6 disabled; /proc/sys/net is the
        // namespace of the opening thread, i.e. the pod's here. Best effort, as upstream.
        let _ = std::fs::write("/proc/sys/net/ipv6/conf/all/disable_ipv6", "0");
    }
    pod.loopback_up().await?;
    for a in &spec.addresses {
        pod.add_address(index, *a).await?;
    }
    for r in &spec.routes {
        pod.add_route(index, r).await?;
    }
    Ok(())
}

/// What is wrong with the pod end (`pod` is a connection in the pod's namespace at
/// `netns_path`): missing, wrong MAC or MTU, down, addresses missing.
pub async fn check(pod: &Netlink, spec: &WireSpec, netns_path: &Path) -> Result<CheckReport, NetlinkError> {
    let mut report = Vec::new();
    let Some(link) = pod.link(&spec.ifname).await? else {
        report.push(format!(
            "interface {} is missing in {}",
            spec.ifname,
            netns_path.display()
        ));
        return Ok(report);
    };
    if link.mac.as_deref() != Some(&spec.mac[..]) {
        report.push(format!(
            "interface {} has MAC {:?}, want {}",
            spec.ifname,
            link.mac,
            spec.mac_string()
        ));
    }
    if spec.mtu.is_some() && link.mtu != spec.mtu {
        report.push(format!(
            "interface {} has MTU {:?}, want {:?}",
            spec.ifname, link.mtu, spec.mtu
        ));
    }
    if !link.up {
        report.push(format!("interface {} is down", spec.ifname));
    }
    let addrs = pod.addresses(link.index).await?;
    for a in &spec.addresses {
        if !addrs.contains(&a.addr()) {
            report.push(format!("interface {} lacks address {a}", spec.ifname));
        }
    }
    Ok(report)
}
