//! The Open vSwitch binding (upstream's `VIFOpenVSwitchDriver` with os-vif's `ovs` plug): a
//! veth pair whose host end (`tap…`) is a port of the integration bridge with the external IDs
//! Neutron/OVN use to claim it, and whose pod end is renamed to the CNI interface name and given
//! the port's MAC, IPs, MTU and routes. On a `netdev` (userspace) bridge TX checksum offload is
//! turned off on the pod end, else TCP breaks.

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex},
};

use crate::{
    binding::{CheckReport, pod_end, spec::WireSpec},
    ethtool,
    netlink::{Netlink, NetlinkError},
    netns::{self, NetnsError},
    ovsdb::{Ovsdb, OvsdbError},
};

/// A failed OVS binding step.
#[derive(Debug, thiserror::Error)]
pub enum OvsBindingError {
    /// Namespace handling failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// Creating or configuring the veth pair failed.
    #[error("wiring the veth pair")]
    Netlink(#[source] NetlinkError),
    /// Turning TX checksum offload off failed.
    #[error("turning TX checksum offload off")]
    Ethtool(#[source] ethtool::EthtoolError),
    /// Plugging into or unplugging from the bridge failed.
    #[error("updating Open vSwitch")]
    Ovsdb(#[source] OvsdbError),
}

/// The OVS binding driver: the database to talk to, and the datapath type of each bridge
/// (read once: it does not change while a bridge exists).
#[derive(Debug, Clone)]
pub struct OvsBinding {
    ovsdb: Ovsdb,
    netdev: Arc<Mutex<HashMap<String, bool>>>,
}

impl OvsBinding {
    /// A driver using `ovsdb`.
    pub fn new(ovsdb: Ovsdb) -> Self {
        Self {
            ovsdb,
            netdev: Arc::default(),
        }
    }

    /// The database.
    pub fn ovsdb(&self) -> &Ovsdb {
        &self.ovsdb
    }

    async fn netdev(&self, bridge: &str) -> Result<bool, OvsBindingError> {
        if let Some(n) = self.netdev.lock().ok().and_then(|m| m.get(bridge).copied()) {
            return Ok(n);
        }
        let br = self.ovsdb.bridge(bridge).await.map_err(OvsBindingError::Ovsdb)?;
        let br = br.ok_or_else(|| OvsBindingError::Ovsdb(OvsdbError::NoBridge(bridge.to_owned())))?;
        let netdev = br.datapath_type == "netdev";
        if let Ok(mut m) = self.netdev.lock() {
            m.insert(bridge.to_owned(), netdev);
        }
        Ok(netdev)
    }

    /// Creates the veth pair, configures the pod end, then plugs the host end into the bridge.
    pub async fn connect(&self, spec: &WireSpec, netns: &Path) -> Result<(), OvsBindingError> {
        let t0 = std::time::Instant::now();
        let netdev = self.netdev(&spec.bridge).await?;
        let t1 = t0.elapsed();
        let s = spec.clone();
        let path = netns.to_owned();
        netns::on_thread(move || async move { wire_links(&s, &path, netdev).await }).await??;
        let t2 = t0.elapsed();
        self.ovsdb
            .add_port(&spec.bridge, &spec.host_dev, &spec.external_ids())
            .await
            .map_err(OvsBindingError::Ovsdb)?;
        tracing::debug!(
            host_dev = %spec.host_dev,
            bridge_ms = t1.as_secs_f64() * 1000.0,
            links_ms = (t2 - t1).as_secs_f64() * 1000.0,
            ovsdb_ms = (t0.elapsed() - t2).as_secs_f64() * 1000.0,
            "OVS binding phases"
        );
        Ok(())
    }

    /// Unplugs the host end and deletes the veth pair (which removes the pod end too). When the
    /// host end is already gone, the pod end is removed from `netns` if that still exists.
    pub async fn disconnect(&self, spec: &WireSpec, netns: &Path) -> Result<(), OvsBindingError> {
        let removal = self
            .ovsdb
            .del_port(&spec.host_dev, &spec.port_id)
            .await
            .map_err(OvsBindingError::Ovsdb)?;
        // A switch port of that name wired for another Neutron port: neither it nor its device
        // is ours to delete; only the pod end, in the pod's namespace, is.
        let host_end_ours = match removal {
            crate::ovsdb::Removal::NotOurs(found) => {
                tracing::warn!(host_dev = %spec.host_dev, port = %spec.port_id, their_iface_id = %found,
                    "the OVS port of this name is another port's: left alone");
                false
            }
            _ => true,
        };
        let s = spec.clone();
        let path = netns.to_owned();
        netns::on_thread(move || async move { unwire_links(&s, &path, host_end_ours).await }).await?
    }

    /// Verifies host end, bridge port, external IDs and the pod end (MAC, MTU, addresses).
    pub async fn check(&self, spec: &WireSpec, netns: &Path) -> Result<CheckReport, OvsBindingError> {
        let mut report = Vec::new();
        let on_bridge = self
            .ovsdb
            .port_on_bridge(&spec.bridge, &spec.host_dev)
            .await
            .map_err(OvsBindingError::Ovsdb)?;
        if !on_bridge {
            report.push(format!("port {} is not on bridge {}", spec.host_dev, spec.bridge));
        }
        let ids = self
            .ovsdb
            .interface_external_ids(&spec.host_dev)
            .await
            .map_err(OvsBindingError::Ovsdb)?
            .unwrap_or_default();
        for (k, v) in spec.external_ids() {
            if ids.get(&k) != Some(&v) {
                report.push(format!(
                    "interface {} external_ids:{k} is {:?}, want {v:?}",
                    spec.host_dev,
                    ids.get(&k)
                ));
            }
        }
        let s = spec.clone();
        let path = netns.to_owned();
        let mut links = netns::on_thread(move || async move { check_links(&s, &path).await }).await??;
        report.append(&mut links);
        Ok(report)
    }
}

async fn wire_links(spec: &WireSpec, netns_path: &Path, netdev: bool) -> Result<(), OvsBindingError> {
    let nl_err = OvsBindingError::Netlink;
    let t0 = std::time::Instant::now();
    let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1000.0;
    let pod_ns = netns::open(netns_path)?;
    // One socket per namespace: `host` opened before the thread moves into the pod's.
    let host = Netlink::connect().map_err(nl_err)?;
    netns::enter(&pod_ns, netns_path)?;
    let pod = Netlink::connect().map_err(nl_err)?;
    // The pair in one request, host end up. A name already taken is a leftover of an
    // earlier attempt for this port or this container: removed, then created again. (Trying
    // first saves two lookups on every ADD; under a burst each netlink round trip queues on
    // the kernel's RTNL lock.)
    let add = || host.add_veth_into(&spec.host_dev, &spec.ifname, spec.mac, spec.mtu, &pod_ns);
    match add().await {
        Err(e) if e.is_exists() => {
            tracing::info!(host_dev = %spec.host_dev, ifname = %spec.ifname, "removing leftover links");
            host.delete_link(&spec.host_dev).await.map_err(nl_err)?;
            pod.delete_link(&spec.ifname).await.map_err(nl_err)?;
            add().await.map_err(nl_err)?;
        }
        other => other.map_err(nl_err)?,
    }
    let veth_ms = ms(t0);
    pod_end::configure(&pod, spec).await.map_err(nl_err)?;
    let l3_ms = ms(t0);
    if netdev {
        // The thread is in the pod's namespace: the ioctl applies there.
        ethtool::tx_checksum_off(&spec.ifname).map_err(OvsBindingError::Ethtool)?;
    }
    tracing::debug!(host_dev = %spec.host_dev, veth_ms, l3_ms, end_ms = ms(t0),
        "link phases (cumulative: veth pair, pod end up with addresses and routes, checksum offload)");
    Ok(())
}

async fn unwire_links(
    spec: &WireSpec,
    netns_path: &Path,
    host_end_ours: bool,
) -> Result<(), OvsBindingError> {
    if host_end_ours {
        let nl = Netlink::connect().map_err(OvsBindingError::Netlink)?;
        let existed = nl
            .delete_link(&spec.host_dev)
            .await
            .map_err(OvsBindingError::Netlink)?;
        drop(nl);
        if existed {
            return Ok(());
        }
    }
    let Ok(pod_ns) = netns::open(netns_path) else {
        // The sandbox is gone, and with it the pod end.
        return Ok(());
    };
    netns::enter(&pod_ns, netns_path)?;
    let nl = Netlink::connect().map_err(OvsBindingError::Netlink)?;
    nl.delete_link(&spec.ifname)
        .await
        .map_err(OvsBindingError::Netlink)?;
    Ok(())
}

async fn check_links(spec: &WireSpec, netns_path: &Path) -> Result<CheckReport, OvsBindingError> {
    let mut report = Vec::new();
    let nl = Netlink::connect().map_err(OvsBindingError::Netlink)?;
    match nl.link(&spec.host_dev).await.map_err(OvsBindingError::Netlink)? {
        None => report.push(format!("host device {} is missing", spec.host_dev)),
        Some(l) if !l.up => report.push(format!("host device {} is down", spec.host_dev)),
        Some(_) => {}
    }
    drop(nl);
    let pod_ns = netns::open(netns_path)?;
    netns::enter(&pod_ns, netns_path)?;
    let nl = Netlink::connect().map_err(OvsBindingError::Netlink)?;
    report.append(
        &mut pod_end::check(&nl, spec, netns_path)
            .await
            .map_err(OvsBindingError::Netlink)?,
    );
    Ok(report)
}
