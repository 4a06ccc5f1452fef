//! What to wire for one VIF, computed from the os-vif VIF and the CNI request with no I/O:
//! device names, MAC, MTU, addresses, routes, bridge and the OVS external IDs.
//!
//! Names the daemon creates or deletes on the host never come from a KuryrPort's text: the host
//! device is `tap` + the port ID (checked to be an ID, not a name), the bridge is the configured
//! `[neutron_defaults] ovs_bridge` (a VIF naming another is refused). A KuryrPort whose VIF said
//! `vif_name: eth0` used to make the daemon delete the host's `eth0` on a name clash.

use std::net::IpAddr;

use ipnet::IpNet;
use kuryr_types::{Vif, VifKind};
use serde::{Deserialize, Serialize};

/// Linux interface name limit (IFNAMSIZ - 1).
pub const IFNAME_MAX: usize = 15;
/// Host-side device name length upstream uses (`tap` + 11 characters of the port ID).
const HOST_DEV_LEN: usize = 14;

/// Why a VIF cannot be wired.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The VIF has no Neutron port ID.
    #[error("VIF has no port id")]
    MissingPortId,
    /// The VIF has no MAC address or it is malformed.
    #[error("VIF MAC address {0:?} is missing or malformed")]
    BadMac(String),
    /// A fixed IP or subnet CIDR cannot be parsed.
    #[error("VIF address {address:?} (subnet {cidr:?}) cannot be parsed")]
    BadAddress {
        /// The fixed IP.
        address: String,
        /// Its subnet CIDR.
        cidr: String,
    },
    /// A route cannot be parsed.
    #[error("VIF route {0:?} cannot be parsed")]
    BadRoute(String),
    /// No bridge in the VIF and none configured.
    #[error("VIF names no bridge and [neutron_defaults] ovs_bridge is not set")]
    MissingBridge,
    /// The VIF class has no binding driver yet.
    #[error("no binding driver for VIF class {0}")]
    UnsupportedVif(String),
    /// A `VIFVlanNested` without a VLAN ID from 1 to 4094.
    #[error("VIFVlanNested VLAN ID {0:?} is missing or out of 1..=4094")]
    BadVlan(Option<i64>),
    /// The port ID is not an ID (letters, digits, `-`, `_`; at most 64).
    #[error("VIF port id {0:?} is not a Neutron port ID")]
    BadPortId(String),
    /// The VIF names a bridge other than the configured one.
    #[error("VIF names bridge {vif:?}, not [neutron_defaults] ovs_bridge = {configured:?}: refused")]
    OtherBridge {
        /// The VIF's bridge.
        vif: String,
        /// The configured bridge.
        configured: String,
    },
}

/// Whether `id` can be a Neutron port ID: the host device name is made of it.
pub fn valid_port_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A route to install in the pod namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSpec {
    /// Destination.
    pub dst: IpNet,
    /// Next hop.
    pub gateway: IpAddr,
}

/// Everything needed to wire one VIF (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireSpec {
    /// Neutron port ID (`external_ids:iface-id`).
    pub port_id: String,
    /// Host end of the veth, plugged into the bridge (`tap` + port ID, 14 characters).
    pub host_dev: String,
    /// Interface name in the pod (`CNI_IFNAME` for the default VIF).
    pub ifname: String,
    /// MAC of the pod end (the port's MAC).
    pub mac: [u8; 6],
    /// MTU of both ends, when known.
    pub mtu: Option<u32>,
    /// Addresses of the pod end with the subnet prefix length.
    pub addresses: Vec<IpNet>,
    /// Subnet host routes, plus the default route(s) for the default VIF.
    pub routes: Vec<RouteSpec>,
    /// Integration bridge (empty for a nested VLAN VIF: no bridge on the VM).
    pub bridge: String,
    /// The trunk subport's VLAN ID (`VIFVlanNested`); `None` for the Open vSwitch binding.
    #[serde(default)]
    pub vlan_id: Option<u16>,
    /// Pod UID (`external_ids:vm-uuid`).
    pub pod_uid: String,
}

impl WireSpec {
    /// The MAC as `aa:bb:cc:dd:ee:ff`.
    pub fn mac_string(&self) -> String {
        format_mac(&self.mac)
    }

    /// `external_ids` of the OVS Interface, as Neutron/OVN expect them.
    pub fn external_ids(&self) -> Vec<(String, String)> {
        vec![
            ("iface-id".into(), self.port_id.clone()),
            ("iface-status".into(), "active".into()),
            ("attached-mac".into(), self.mac_string()),
            ("vm-uuid".into(), self.pod_uid.clone()),
        ]
    }
}

/// Inputs of [`wire_spec`] that do not come from the VIF.
#[derive(Debug, Clone, Copy)]
pub struct SpecContext<'a> {
    /// Interface name in the pod.
    pub ifname: &'a str,
    /// This VIF carries the pod's default route.
    pub default: bool,
    /// Pod UID.
    pub pod_uid: &'a str,
    /// `[neutron_defaults] ovs_bridge`.
    pub default_bridge: Option<&'a str>,
    /// `[neutron_defaults] network_device_mtu` (0: unset).
    pub network_device_mtu: u32,
}

/// `tap` + the port ID, cut to 14 characters (upstream's naming).
pub fn host_dev_name(port_id: &str) -> String {
    format!("tap{port_id}").chars().take(HOST_DEV_LEN).collect()
}

/// Whether `name` is a usable Linux interface name.
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= IFNAME_MAX
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':')
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// Formats a MAC as lower-case `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The effective MTU: the network's, capped by `network_device_mtu` when that is set.
pub fn effective_mtu(network_mtu: Option<i64>, network_device_mtu: u32) -> Option<u32> {
    let net = network_mtu.and_then(|m| u32::try_from(m).ok()).filter(|m| *m > 0);
    let dev = (network_device_mtu > 0).then_some(network_device_mtu);
    match (net, dev) {
        (Some(n), Some(d)) => Some(n.min(d)),
        (n, d) => n.or(d),
    }
}

/// Computes the [`WireSpec`] of `vif` (see the module docs).
pub fn wire_spec(vif: &Vif, cx: SpecContext<'_>) -> Result<WireSpec, SpecError> {
    let vlan_id = match vif.kind {
        VifKind::OpenVSwitch => None,
        VifKind::VlanNested => Some(
            vif.vlan_id
                .and_then(|v| u16::try_from(v).ok())
                .filter(|v| (1..=4094).contains(v))
                .ok_or(SpecError::BadVlan(vif.vlan_id))?,
        ),
        VifKind::MacvlanNested => None,
        _ => return Err(SpecError::UnsupportedVif(vif.kind.as_str().to_owned())),
    };
    let nested = matches!(vif.kind, VifKind::VlanNested | VifKind::MacvlanNested);
    let port_id = vif
        .id
        .clone()
        .or_else(|| {
            vif.port_profile
                .as_ref()
                .and_then(|p| p.interface_id().map(str::to_owned))
        })
        .filter(|s| !s.is_empty())
        .ok_or(SpecError::MissingPortId)?;
    if !valid_port_id(&port_id) {
        return Err(SpecError::BadPortId(port_id));
    }
    let mac_s = vif.address.clone().unwrap_or_default();
    let mac = parse_mac(&mac_s).ok_or(SpecError::BadMac(mac_s))?;
    let network = vif.network.as_ref();
    let bridge = if nested {
        String::new()
    } else {
        let named = network
            .and_then(|n| n.bridge.clone())
            .or_else(|| vif.bridge_name.clone())
            .filter(|b| !b.is_empty());
        match (cx.default_bridge.filter(|b| !b.is_empty()), named) {
            (Some(conf), Some(vif)) if vif != conf => {
                return Err(SpecError::OtherBridge {
                    vif,
                    configured: conf.to_owned(),
                });
            }
            (Some(conf), _) => conf.to_owned(),
            (None, Some(vif)) if valid_ifname(&vif) => vif,
            (None, _) => return Err(SpecError::MissingBridge),
        }
    };
    // Always from the port ID: upstream's `vif_name` is the same name, and any other is text of
    // a CR the daemon must not take as a host device to create or delete.
    let host_dev = host_dev_name(&port_id);

    let mut addresses = Vec::new();
    let mut routes = Vec::new();
    let mut default_v4 = false;
    let mut default_v6 = false;
    for subnet in network.map(|n| n.subnets.as_slice()).unwrap_or_default() {
        let cidr_s = subnet.cidr.clone().unwrap_or_default();
        let cidr: Option<IpNet> = cidr_s.parse().ok();
        for ip in &subnet.ips {
            let addr_s = ip.address.clone().unwrap_or_default();
            let bad = || SpecError::BadAddress {
                address: addr_s.clone(),
                cidr: cidr_s.clone(),
            };
            let addr: IpAddr = addr_s.parse().map_err(|_| bad())?;
            let net = cidr.ok_or_else(bad)?;
            if net.addr().is_ipv4() != addr.is_ipv4() {
                return Err(bad());
            }
            addresses.push(IpNet::new(addr, net.prefix_len()).map_err(|_| bad())?);
        }
        for r in &subnet.routes {
            let (Some(dst), Some(gw)) = (r.cidr.as_deref(), r.gateway.as_deref()) else {
                continue;
            };
            let dst: IpNet = dst.parse().map_err(|_| SpecError::BadRoute(dst.to_owned()))?;
            let gateway: IpAddr = gw.parse().map_err(|_| SpecError::BadRoute(gw.to_owned()))?;
            routes.push(RouteSpec { dst, gateway });
        }
        if cx.default && !subnet.ips.is_empty() {
            if let Some(gw) = subnet.gateway.as_deref().filter(|g| !g.is_empty()) {
                let gateway: IpAddr = gw.parse().map_err(|_| SpecError::BadRoute(gw.to_owned()))?;
                let (done, any) = if gateway.is_ipv4() {
                    (&mut default_v4, "0.0.0.0/0")
                } else {
                    (&mut default_v6, "::/0")
                };
                if !*done {
                    *done = true;
                    let dst = any.parse().map_err(|_| SpecError::BadRoute(any.to_owned()))?;
                    routes.push(RouteSpec { dst, gateway });
                }
            }
        }
    }
    Ok(WireSpec {
        port_id,
        host_dev,
        ifname: cx.ifname.to_owned(),
        mac,
        mtu: effective_mtu(vif.mtu(), cx.network_device_mtu),
        addresses,
        routes,
        bridge,
        vlan_id,
        pod_uid: cx.pod_uid.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_types::vif::{FixedIp, Network, Route, Subnet};

    fn vif() -> Vif {
        let mut v = Vif::new(VifKind::OpenVSwitch, "3e5f2a1b-7c8d-4e9f-a0b1-c2d3e4f5a6b7");
        v.address = Some("fa:16:3e:12:34:56".into());
        let mut s = Subnet::new("10.10.0.0/24");
        s.gateway = Some("10.10.0.1".into());
        s.ips.push(FixedIp::new("10.10.0.7"));
        s.routes.push(Route::new("169.254.169.254/32", "10.10.0.2"));
        let mut n = Network::new("net");
        n.mtu = Some(1442);
        n.bridge = Some("br-int".into());
        n.subnets.push(s);
        v.network = Some(n);
        v
    }

    fn cx(default: bool) -> SpecContext<'static> {
        SpecContext {
            ifname: "eth0",
            default,
            pod_uid: "uid-1",
            default_bridge: None,
            network_device_mtu: 0,
        }
    }

    #[test]
    fn names_follow_upstream() {
        assert_eq!(host_dev_name("3e5f2a1b-7c8d-4e9f"), "tap3e5f2a1b-7c");
        assert!(valid_ifname("eth0"));
        assert!(!valid_ifname(""));
        assert!(!valid_ifname("a/b"));
        assert!(!valid_ifname("abcdefghijklmnop"));
        assert!(!valid_ifname("with space"));
    }

    #[test]
    fn macs() {
        assert_eq!(
            parse_mac("fa:16:3e:12:34:56"),
            Some([0xfa, 0x16, 0x3e, 0x12, 0x34, 0x56])
        );
        assert_eq!(parse_mac("fa:16:3e:12:34"), None);
        assert_eq!(parse_mac("fa:16:3e:12:34:56:00"), None);
        assert_eq!(parse_mac("zz:16:3e:12:34:56"), None);
        assert_eq!(
            format_mac(&[0xfa, 0x16, 0x3e, 0x12, 0x34, 0x56]),
            "fa:16:3e:12:34:56"
        );
    }

    #[test]
    fn mtu_is_capped() {
        assert_eq!(effective_mtu(Some(1500), 1442), Some(1442));
        assert_eq!(effective_mtu(Some(1400), 1442), Some(1400));
        assert_eq!(effective_mtu(None, 1442), Some(1442));
        assert_eq!(effective_mtu(Some(1442), 0), Some(1442));
        assert_eq!(effective_mtu(None, 0), None);
    }

    #[test]
    fn spec_of_a_nested_macvlan_vif_has_no_vlan_and_no_bridge() {
        let mut v = vif();
        v.kind = VifKind::MacvlanNested;
        v.network.as_mut().unwrap().bridge = None;
        v.vlan_id = Some(101);
        let s = wire_spec(&v, cx(true)).unwrap();
        assert_eq!(s.vlan_id, None, "a macvlan has no tag");
        assert!(s.bridge.is_empty());
        assert_eq!(s.mac_string(), v.address.clone().unwrap().to_ascii_lowercase());
        assert_eq!(s.addresses, vec!["10.10.0.7/24".parse::<IpNet>().unwrap()]);
    }

    #[test]
    fn spec_of_a_nested_vlan_vif_has_its_vlan_and_no_bridge() {
        let mut v = vif();
        v.kind = VifKind::VlanNested;
        v.network.as_mut().unwrap().bridge = None;
        v.vlan_id = Some(101);
        let s = wire_spec(&v, cx(true)).unwrap();
        assert_eq!(s.vlan_id, Some(101));
        assert!(s.bridge.is_empty());
        assert_eq!(s.addresses, vec!["10.10.0.7/24".parse::<IpNet>().unwrap()]);
        assert!(s.routes.iter().any(|r| r.dst.prefix_len() == 0));
        for bad in [None, Some(0), Some(4095), Some(-1), Some(70000)] {
            v.vlan_id = bad;
            assert_eq!(wire_spec(&v, cx(true)), Err(SpecError::BadVlan(bad)));
        }
        // A stored spec from before VLANs reads as no VLAN.
        let mut json = serde_json::to_value(wire_spec(&vif(), cx(true)).unwrap()).unwrap();
        json.as_object_mut().unwrap().remove("vlan_id");
        let old: WireSpec = serde_json::from_value(json).unwrap();
        assert_eq!(old.vlan_id, None);
    }

    #[test]
    fn spec_of_default_vif() {
        let s = wire_spec(&vif(), cx(true)).unwrap();
        assert_eq!(s.host_dev, "tap3e5f2a1b-7c");
        assert_eq!(s.bridge, "br-int");
        assert_eq!(s.mtu, Some(1442));
        assert_eq!(s.addresses, vec!["10.10.0.7/24".parse::<IpNet>().unwrap()]);
        assert_eq!(
            s.routes,
            vec![
                RouteSpec {
                    dst: "169.254.169.254/32".parse().unwrap(),
                    gateway: "10.10.0.2".parse().unwrap()
                },
                RouteSpec {
                    dst: "0.0.0.0/0".parse().unwrap(),
                    gateway: "10.10.0.1".parse().unwrap()
                },
            ]
        );
        let ids = s.external_ids();
        assert!(ids.contains(&("iface-id".into(), "3e5f2a1b-7c8d-4e9f-a0b1-c2d3e4f5a6b7".into())));
        assert!(ids.contains(&("attached-mac".into(), "fa:16:3e:12:34:56".into())));
        assert!(ids.contains(&("vm-uuid".into(), "uid-1".into())));
        // A secondary VIF gets no default route.
        let s = wire_spec(&vif(), cx(false)).unwrap();
        assert_eq!(s.routes.len(), 1);
    }

    #[test]
    fn bad_vifs_are_errors() {
        let mut v = vif();
        v.address = Some("nope".into());
        assert!(matches!(wire_spec(&v, cx(true)), Err(SpecError::BadMac(_))));
        let mut v = vif();
        v.network.as_mut().unwrap().subnets[0].ips[0].address = Some("fd00::1".into());
        assert!(matches!(
            wire_spec(&v, cx(true)),
            Err(SpecError::BadAddress { .. })
        ));
        let mut v = vif();
        v.network.as_mut().unwrap().bridge = None;
        assert_eq!(wire_spec(&v, cx(true)), Err(SpecError::MissingBridge));
        let with_default = SpecContext {
            default_bridge: Some("br-x"),
            ..cx(true)
        };
        assert_eq!(wire_spec(&v, with_default).unwrap().bridge, "br-x");
        let v = Vif::new(VifKind::DpdkNested, "p");
        assert!(matches!(
            wire_spec(&v, cx(true)),
            Err(SpecError::UnsupportedVif(_))
        ));
        let mut v = vif();
        v.id = None;
        assert_eq!(wire_spec(&v, cx(true)), Err(SpecError::MissingPortId));
    }

    #[test]
    fn host_names_never_come_from_the_crs_text() {
        // A VIF naming a host link as its device: the name is the port's all the same.
        let mut v = vif();
        v.vif_name = Some("eth0".into());
        assert_eq!(wire_spec(&v, cx(true)).unwrap().host_dev, "tap3e5f2a1b-7c");
        // A port ID that is not an ID (it would become part of a device name).
        for id in ["../x", "a b", "eth0:1", &"a".repeat(65)] {
            let mut v = vif();
            v.id = Some(id.to_string());
            assert_eq!(
                wire_spec(&v, cx(true)),
                Err(SpecError::BadPortId(id.to_string())),
                "{id}"
            );
        }
        // A bridge other than the configured one is refused, the configured one is used.
        let conf = SpecContext {
            default_bridge: Some("br-int"),
            ..cx(true)
        };
        let mut v = vif();
        v.network.as_mut().unwrap().bridge = Some("br-ex".into());
        assert_eq!(
            wire_spec(&v, conf),
            Err(SpecError::OtherBridge {
                vif: "br-ex".into(),
                configured: "br-int".into()
            })
        );
        assert_eq!(wire_spec(&vif(), conf).unwrap().bridge, "br-int");
        // Without a configured bridge the VIF's must at least be a device name.
        let mut v = vif();
        v.network.as_mut().unwrap().bridge = Some("br/../x".into());
        assert_eq!(wire_spec(&v, cx(true)), Err(SpecError::MissingBridge));
    }
}
