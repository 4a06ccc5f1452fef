//! Builds the os-vif VIF of a pod from its Neutron port, network and subnets — upstream's
//! `neutron-vif` translation (`os_vif_util.neutron_to_osvif_vif_ovs`): a `VIFOpenVSwitch`
//! (or `VIFBridge` with `ovs_hybrid_plug`) with plugin `ovs`, device `tap` + the port ID cut to
//! 14 characters, the bridge from `binding:vif_details.bridge_name` else
//! `[neutron_defaults]ovs_bridge`, the network's MTU and every subnet of the port's fixed IPs
//! with CIDR, gateway, DNS servers and host routes. And the nested translation of a trunk
//! subport (`nested-vlan`, upstream's `VlanPodVIFDriver`): a `VIFVlanNested` with plugin `noop`,
//! the subport's VLAN ID and the same network without a bridge (there is none on the VM).

use kuryr_core::neutron::{self, Port};

use crate::vif::{FixedIp, Network, PortProfile, Route, Subnet, Vif, VifKind};

/// Linux interface name limit kuryr uses (`NIC_NAME_LEN`).
const NIC_NAME_LEN: usize = 14;

/// Why a port cannot be turned into a VIF.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FromNeutronError {
    /// The port is on another network than the one given.
    #[error("port {port_id} belongs to network {port_network}, but network {network} was given")]
    NetworkMismatch {
        /// The port.
        port_id: String,
        /// Its network.
        port_network: String,
        /// The network given.
        network: String,
    },
    /// None of the port's fixed IPs is in a given subnet.
    #[error("no valid subnets found for port {port_id}")]
    NoValidSubnets {
        /// The port.
        port_id: String,
    },
    /// No bridge in `binding:vif_details` and no `[neutron_defaults]ovs_bridge`.
    #[error(
        "port {port_id}: no bridge_name in binding:vif_details and [neutron_defaults] ovs_bridge is not set"
    )]
    MissingOvsBridge {
        /// The port.
        port_id: String,
    },
    /// The port is bound with a VIF type this translation does not handle.
    #[error("port {port_id}: binding:vif_type {vif_type:?} is not an Open vSwitch binding")]
    UnsupportedVifType {
        /// The port.
        port_id: String,
        /// Its `binding:vif_type`.
        vif_type: String,
    },
}

/// `tap` + port ID, cut to 14 characters (kuryr-lib `get_veth_pair_names`).
pub fn vif_name(port_id: &str) -> String {
    truncate(format!("tap{port_id}"))
}

fn truncate(mut s: String) -> String {
    if let Some((i, _)) = s.char_indices().nth(NIC_NAME_LEN) {
        s.truncate(i);
    }
    s
}

/// The VIF of `port` (see the module docs). `subnets` may hold more subnets than the port
/// uses; fixed IPs in subnets not given are skipped, as upstream does.
pub fn vif_from_port(
    port: &Port,
    network: &neutron::Network,
    subnets: &[neutron::Subnet],
    default_ovs_bridge: Option<&str>,
) -> Result<Vif, FromNeutronError> {
    match port.binding_vif_type.as_str() {
        "ovs" | "" | neutron::VIF_TYPE_UNBOUND => {}
        other => {
            return Err(FromNeutronError::UnsupportedVifType {
                port_id: port.id.clone(),
                vif_type: other.to_string(),
            });
        }
    }
    let bridge = port
        .vif_detail_str("bridge_name")
        .filter(|b| !b.is_empty())
        .or(default_ovs_bridge.filter(|b| !b.is_empty()))
        .ok_or_else(|| FromNeutronError::MissingOvsBridge {
            port_id: port.id.clone(),
        })?;

    let mut net = vif_network(port, network, subnets)?;
    net.bridge = Some(bridge.to_string());

    let hybrid = port.vif_detail_flag("ovs_hybrid_plug");
    let kind = if hybrid {
        VifKind::Bridge
    } else {
        VifKind::OpenVSwitch
    };
    let mut vif = Vif::new(kind, &port.id);
    vif.address = Some(port.mac_address.clone());
    vif.network = Some(net);
    vif.has_traffic_filtering = Some(port.vif_detail_flag("port_filter"));
    vif.preserve_on_delete = Some(false);
    vif.active = Some(port.is_active());
    vif.port_profile = Some(PortProfile::open_vswitch(&port.id));
    vif.plugin = Some("ovs".into());
    vif.vif_name = Some(vif_name(&port.id));
    vif.bridge_name = Some(if hybrid {
        truncate(format!("qbr{}", port.id))
    } else {
        bridge.to_string()
    });
    Ok(vif)
}

/// The `VIFVlanNested` of a trunk subport `port` with `vlan_id` (see the module docs): the pod
/// end is a VLAN of the VM's trunk interface, so no bridge, no port profile, plugin `noop`.
pub fn vif_vlan_nested(
    port: &Port,
    network: &neutron::Network,
    subnets: &[neutron::Subnet],
    vlan_id: u16,
) -> Result<Vif, FromNeutronError> {
    let mut vif = Vif::new(VifKind::VlanNested, &port.id);
    vif.address = Some(port.mac_address.clone());
    vif.network = Some(vif_network(port, network, subnets)?);
    vif.has_traffic_filtering = Some(false);
    vif.preserve_on_delete = Some(false);
    vif.active = Some(port.is_active());
    vif.plugin = Some("noop".into());
    vif.vif_name = Some(vif_name(&port.id));
    vif.vlan_id = Some(i64::from(vlan_id));
    Ok(vif)
}

/// The `VIFMacvlanNested` of `port` (`nested-macvlan`): the pod end is a macvlan of the VM's
/// interface with the port's MAC; the port is never bound (the VM's port carries its traffic,
/// its pairs in the VM port's `allowed_address_pairs`), so Neutron keeps it DOWN and the VIF is
/// active from the start, as upstream's driver made it.
pub fn vif_macvlan_nested(
    port: &Port,
    network: &neutron::Network,
    subnets: &[neutron::Subnet],
) -> Result<Vif, FromNeutronError> {
    let mut vif = Vif::new(VifKind::MacvlanNested, &port.id);
    vif.address = Some(port.mac_address.clone());
    vif.network = Some(vif_network(port, network, subnets)?);
    vif.has_traffic_filtering = Some(false);
    vif.preserve_on_delete = Some(false);
    vif.active = Some(true);
    vif.plugin = Some("noop".into());
    vif.vif_name = Some(vif_name(&port.id));
    Ok(vif)
}

/// The VIF's network: every subnet of the port's fixed IPs (those given), without a bridge.
fn vif_network(
    port: &Port,
    network: &neutron::Network,
    subnets: &[neutron::Subnet],
) -> Result<Network, FromNeutronError> {
    if port.network_id != network.id {
        return Err(FromNeutronError::NetworkMismatch {
            port_id: port.id.clone(),
            port_network: port.network_id.clone(),
            network: network.id.clone(),
        });
    }
    let mut vif_subnets: Vec<(&str, Subnet)> = Vec::new();
    for ip in &port.fixed_ips {
        let Some(ns) = subnets.iter().find(|s| s.id == ip.subnet_id) else {
            continue;
        };
        let idx = match vif_subnets.iter().position(|(id, _)| *id == ns.id) {
            Some(i) => i,
            None => {
                vif_subnets.push((ns.id.as_str(), subnet(ns)));
                vif_subnets.len() - 1
            }
        };
        vif_subnets[idx].1.ips.push(FixedIp::new(&ip.ip_address));
    }
    if vif_subnets.is_empty() {
        return Err(FromNeutronError::NoValidSubnets {
            port_id: port.id.clone(),
        });
    }

    let mut net = Network::new(&network.id);
    net.label = Some(network.name.clone());
    net.mtu = network.mtu;
    net.subnets = vif_subnets.into_iter().map(|(_, s)| s).collect();
    Ok(net)
}

fn subnet(s: &neutron::Subnet) -> Subnet {
    let mut out = Subnet::new(&s.cidr);
    out.dns = Some(s.dns_nameservers.clone());
    out.gateway = s.gateway_ip.clone().filter(|g| !g.is_empty());
    out.routes = s
        .host_routes
        .iter()
        .map(|r| Route::new(&r.destination, &r.nexthop))
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The port, network and subnet behind `tests/data/kuryrport_ovs.json`, as Neutron
    /// (ML2/OVN, Zed) returns them.
    fn neutron_objects() -> (Port, neutron::Network, Vec<neutron::Subnet>) {
        let port = serde_json::from_value(json!({
            "id": "3e5f2a1b-7c8d-4e9f-a0b1-c2d3e4f5a6b7", "name": "", "status": "ACTIVE",
            "network_id": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d",
            "tenant_id": "5d1c2a3b4c5d6e7f8a9b0c1d2e3f4a5b", "project_id": "5d1c2a3b4c5d6e7f8a9b0c1d2e3f4a5b",
            "mac_address": "fa:16:3e:12:34:56", "admin_state_up": true,
            "device_owner": "compute:kuryr", "device_id": "",
            "fixed_ips": [{"subnet_id": "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b", "ip_address": "10.0.0.87"}],
            "security_groups": ["b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e"],
            "binding:host_id": "worker-0", "binding:vif_type": "ovs", "binding:vnic_type": "normal",
            "binding:profile": {},
            "binding:vif_details": {"port_filter": true, "connectivity": "l2", "bridge_name": "br-int",
                                    "datapath_type": "netdev", "bound_drivers": {"0": "ovn"}},
            "allowed_address_pairs": [], "extra_dhcp_opts": [], "port_security_enabled": true,
            "tags": ["kuryr"], "revision_number": 5,
            "created_at": "2026-11-22T05:59:01Z", "updated_at": "2026-11-22T06:00:12Z"
        }))
        .unwrap();
        let net = serde_json::from_value(json!({
            "id": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d", "name": "k8s-pod-net", "mtu": 1442,
            "status": "ACTIVE", "subnets": ["1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b"],
            "provider:network_type": "geneve", "provider:segmentation_id": 12, "tags": []
        }))
        .unwrap();
        let subnets = serde_json::from_value(json!([
            {"id": "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b", "network_id": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d",
             "cidr": "10.0.0.64/26", "gateway_ip": "10.0.0.65", "dns_nameservers": ["10.0.0.2"],
             "host_routes": [{"destination": "169.254.169.254/32", "nexthop": "10.0.0.66"}],
             "ip_version": 4, "subnetpool_id": null, "enable_dhcp": true, "tags": []},
            {"id": "other", "network_id": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d", "cidr": "fd00::/64",
             "gateway_ip": null, "dns_nameservers": [], "host_routes": [], "ip_version": 6}
        ]))
        .unwrap();
        (port, net, subnets)
    }

    fn strip_changes(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("versioned_object.changes");
                m.values_mut().for_each(strip_changes);
            }
            Value::Array(a) => a.iter_mut().for_each(strip_changes),
            _ => {}
        }
    }

    #[test]
    fn builds_the_vif_upstream_stores() {
        let (port, net, subnets) = neutron_objects();
        let vif = vif_from_port(&port, &net, &subnets, None).unwrap();
        let path = format!("{}/tests/data/kuryrport_ovs.json", env!("CARGO_MANIFEST_DIR"));
        let kp: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut expected = kp["status"]["vifs"]["eth0"]["vif"].clone();
        let mut got = vif.to_primitive();
        strip_changes(&mut expected);
        strip_changes(&mut got);
        assert_eq!(got, expected);
        assert_eq!(vif.vif_name.as_deref(), Some("tap3e5f2a1b-7c"));
    }

    #[test]
    fn hybrid_plug_inactive_and_default_bridge() {
        let (mut port, net, subnets) = neutron_objects();
        port.status = "DOWN".into();
        port.binding_vif_details = serde_json::from_value(json!({"ovs_hybrid_plug": true})).unwrap();
        let vif = vif_from_port(&port, &net, &subnets, Some("br-int")).unwrap();
        assert_eq!(vif.kind, VifKind::Bridge);
        assert_eq!(vif.bridge_name.as_deref(), Some("qbr3e5f2a1b-7c"));
        assert_eq!(vif.network.as_ref().unwrap().bridge.as_deref(), Some("br-int"));
        assert_eq!(vif.active, Some(false));
        assert_eq!(vif.has_traffic_filtering, Some(false));
    }

    #[test]
    fn errors() {
        let (port, net, subnets) = neutron_objects();
        let mut no_bridge = port.clone();
        no_bridge.binding_vif_details.clear();
        assert!(matches!(
            vif_from_port(&no_bridge, &net, &subnets, None),
            Err(FromNeutronError::MissingOvsBridge { .. })
        ));
        let other = neutron::Network {
            id: "x".into(),
            ..net.clone()
        };
        assert!(matches!(
            vif_from_port(&port, &other, &subnets, None),
            Err(FromNeutronError::NetworkMismatch { .. })
        ));
        assert!(matches!(
            vif_from_port(&port, &net, &subnets[1..], None),
            Err(FromNeutronError::NoValidSubnets { .. })
        ));
        let mut vhu = port.clone();
        vhu.binding_vif_type = "vhostuser".into();
        let err = vif_from_port(&vhu, &net, &subnets, None).unwrap_err();
        assert!(err.to_string().contains("vhostuser"));
    }

    #[test]
    fn a_trunk_subport_is_a_vlan_nested_vif_without_bridge() {
        let (mut port, net, subnets) = neutron_objects();
        port.device_owner = "trunk:subport".into();
        port.binding_vif_details = Default::default();
        let vif = vif_vlan_nested(&port, &net, &subnets, 101).unwrap();
        assert_eq!(vif.kind, VifKind::VlanNested);
        assert_eq!(vif.vlan_id, Some(101));
        assert_eq!(vif.plugin.as_deref(), Some("noop"));
        assert_eq!(vif.vif_name.as_deref(), Some("tap3e5f2a1b-7c"));
        assert!(vif.port_profile.is_none() && vif.bridge_name.is_none());
        let n = vif.network.as_ref().unwrap();
        assert!(n.bridge.is_none());
        assert_eq!(n.mtu, Some(1442));
        assert_eq!(n.subnets.len(), 1);
        assert_eq!(n.subnets[0].ips[0].address.as_deref(), Some("10.0.0.87"));
        // Upstream's versioned object carries the VLAN ID.
        let stored = vif.to_primitive();
        assert_eq!(stored["versioned_object.name"], "VIFVlanNested");
        assert_eq!(stored["versioned_object.data"]["vlan_id"], 101);
        let back = Vif::from_primitive(stored).unwrap();
        assert_eq!((back.kind, back.vlan_id), (VifKind::VlanNested, Some(101)));
        let mut other = net.clone();
        other.id = "elsewhere".into();
        assert!(matches!(
            vif_vlan_nested(&port, &other, &subnets, 101),
            Err(FromNeutronError::NetworkMismatch { .. })
        ));
    }

    #[test]
    fn multiple_ips_in_one_subnet_share_it() {
        let (mut port, net, subnets) = neutron_objects();
        let mut second = port.fixed_ips[0].clone();
        second.ip_address = "10.0.0.88".into();
        port.fixed_ips.push(second);
        let vif = vif_from_port(&port, &net, &subnets, None).unwrap();
        let ips: Vec<_> = vif.ips().map(|(_, ip)| ip.to_string()).collect();
        assert_eq!(ips, vec!["10.0.0.87", "10.0.0.88"]);
        assert_eq!(vif.network.unwrap().subnets.len(), 1);
        assert_eq!(vif_name("ab"), "tapab");
    }
}
