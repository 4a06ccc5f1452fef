//! CNI success results and their rendering per spec version, plus the VIF → result conversion.
//!
//! Differences by version: 0.3.1/0.4.0 `ips[]` carry `"version": "4"|"6"`, removed in 1.0.0;
//! 1.1.0 adds `interfaces[].mtu` (we fill it from the network MTU when known).
//!
//! Conversion as upstream (kuryr-kubernetes `cni/api.py`, kuryr_cni `main.go`): one interface
//! (`CNI_IFNAME`, the VIF MAC); per subnet every fixed IP as `ip/prefixlen` of the subnet CIDR
//! with the subnet gateway and `interface: 0`; subnet host routes as `routes`; subnet DNS servers
//! as `dns.nameservers`. No default route (the daemon configures it in the netns).
//! Deliberate fix: `interfaces[0].sandbox` is the netns path (`CNI_NETNS`) as the spec says,
//! where upstream put the container ID.

use std::net::IpAddr;

use serde_json::{Map, Value, json};

use crate::error::{CniError, ErrorCode};
use crate::version::CniVersion;
use crate::vif::{CODE_BAD_ADDRESS, VifInfo};

/// An interface of the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Interface name.
    pub name: String,
    /// MAC address.
    pub mac: Option<String>,
    /// Netns path, `None` for host interfaces.
    pub sandbox: Option<String>,
    /// MTU (rendered from 1.1.0 on).
    pub mtu: Option<u32>,
}

/// An IP configuration of the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpConfig {
    /// Address in CIDR notation (`10.0.0.87/26`).
    pub address: String,
    /// Gateway.
    pub gateway: Option<String>,
    /// Index into `interfaces`.
    pub interface: Option<usize>,
    /// Whether IPv6 (for `version` in 0.3.x/0.4.0).
    pub is_v6: bool,
}

/// A route of the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination CIDR.
    pub dst: String,
    /// Next hop.
    pub gw: Option<String>,
}

/// The CNI success result of ADD, independent of version until rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniResult {
    /// Interfaces.
    pub interfaces: Vec<Interface>,
    /// IP configurations.
    pub ips: Vec<IpConfig>,
    /// Routes.
    pub routes: Vec<Route>,
    /// DNS nameservers.
    pub nameservers: Vec<String>,
}

fn bad_addr(msg: String) -> CniError {
    CniError::new(ErrorCode::Other(CODE_BAD_ADDRESS), "invalid address in VIF").with_details(msg)
}

/// `ip/prefix` from an address and the CIDR of its subnet.
fn with_prefix(ip: &str, cidr: &str) -> Result<(String, bool), CniError> {
    let addr: IpAddr = ip.parse().map_err(|_| bad_addr(format!("bad IP {ip:?}")))?;
    let (net, prefix) = cidr
        .split_once('/')
        .ok_or_else(|| bad_addr(format!("bad CIDR {cidr:?}")))?;
    let net: IpAddr = net.parse().map_err(|_| bad_addr(format!("bad CIDR {cidr:?}")))?;
    let prefix: u8 = prefix
        .parse()
        .map_err(|_| bad_addr(format!("bad CIDR {cidr:?}")))?;
    let max = if net.is_ipv6() { 128 } else { 32 };
    if prefix > max || net.is_ipv6() != addr.is_ipv6() {
        return Err(bad_addr(format!("IP {ip} does not fit CIDR {cidr}")));
    }
    Ok((format!("{addr}/{prefix}"), addr.is_ipv6()))
}

impl CniResult {
    /// Builds the ADD result from the daemon's VIF as upstream did (see module docs).
    pub fn from_vif(vif: &VifInfo, ifname: &str, netns: &str) -> Result<Self, CniError> {
        let mut r = CniResult {
            interfaces: vec![Interface {
                name: ifname.to_owned(),
                mac: vif.mac.clone(),
                sandbox: Some(netns.to_owned()),
                mtu: vif.mtu,
            }],
            ..Default::default()
        };
        for s in &vif.subnets {
            for ip in &s.ips {
                let (address, is_v6) = with_prefix(ip, &s.cidr)?;
                r.ips.push(IpConfig {
                    address,
                    gateway: s.gateway.clone(),
                    interface: Some(0),
                    is_v6,
                });
            }
            for route in &s.routes {
                r.routes.push(Route {
                    dst: route.cidr.clone(),
                    gw: route.gateway.clone(),
                });
            }
            for ns in &s.dns {
                if !r.nameservers.contains(ns) {
                    r.nameservers.push(ns.clone());
                }
            }
        }
        Ok(r)
    }

    /// Renders the result JSON for `version`.
    pub fn to_json(&self, version: CniVersion) -> Value {
        let interfaces: Vec<Value> = self
            .interfaces
            .iter()
            .map(|i| {
                let mut m = Map::new();
                m.insert("name".into(), json!(i.name));
                if let Some(mac) = &i.mac {
                    m.insert("mac".into(), json!(mac));
                }
                if let (Some(mtu), true) = (i.mtu, version >= CniVersion::V1_1_0) {
                    m.insert("mtu".into(), json!(mtu));
                }
                if let Some(sb) = &i.sandbox {
                    m.insert("sandbox".into(), json!(sb));
                }
                Value::Object(m)
            })
            .collect();
        let ips: Vec<Value> = self
            .ips
            .iter()
            .map(|ip| {
                let mut m = Map::new();
                if version.ips_have_version() {
                    m.insert("version".into(), json!(if ip.is_v6 { "6" } else { "4" }));
                }
                if let Some(i) = ip.interface {
                    m.insert("interface".into(), json!(i));
                }
                m.insert("address".into(), json!(ip.address));
                if let Some(gw) = &ip.gateway {
                    m.insert("gateway".into(), json!(gw));
                }
                Value::Object(m)
            })
            .collect();
        let routes: Vec<Value> = self
            .routes
            .iter()
            .map(|r| match &r.gw {
                Some(gw) => json!({"dst": r.dst, "gw": gw}),
                None => json!({"dst": r.dst}),
            })
            .collect();
        let dns = if self.nameservers.is_empty() {
            json!({})
        } else {
            json!({"nameservers": self.nameservers})
        };
        let mut out = Map::new();
        out.insert("cniVersion".into(), json!(version.as_str()));
        out.insert("interfaces".into(), Value::Array(interfaces));
        out.insert("ips".into(), Value::Array(ips));
        if !routes.is_empty() {
            out.insert("routes".into(), Value::Array(routes));
        }
        out.insert("dns".into(), dns);
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vif::{SubnetInfo, VifInfo};

    fn ovs() -> VifInfo {
        let v: Value = serde_json::from_str(include_str!("../tests/data/vif_ovs.json")).unwrap();
        VifInfo::from_primitive(&v).unwrap()
    }

    #[test]
    fn renders_0_3_1_like_upstream_with_sandbox_fix() {
        let r = CniResult::from_vif(&ovs(), "eth0", "/var/run/netns/cni-1").unwrap();
        assert_eq!(
            r.to_json(CniVersion::V0_3_1),
            json!({
                "cniVersion": "0.3.1",
                "interfaces": [{"name": "eth0", "mac": "fa:16:3e:12:34:56", "sandbox": "/var/run/netns/cni-1"}],
                "ips": [{"version": "4", "interface": 0, "address": "10.0.0.87/26", "gateway": "10.0.0.65"}],
                "routes": [{"dst": "169.254.169.254/32", "gw": "10.0.0.66"}],
                "dns": {"nameservers": ["10.0.0.2"]}
            })
        );
    }

    #[test]
    fn renders_each_version() {
        let r = CniResult::from_vif(&ovs(), "eth0", "/ns").unwrap();
        let v040 = r.to_json(CniVersion::V0_4_0);
        assert_eq!(v040["ips"][0]["version"], "4");
        assert!(v040["interfaces"][0].get("mtu").is_none());
        let v100 = r.to_json(CniVersion::V1_0_0);
        assert_eq!(v100["cniVersion"], "1.0.0");
        assert!(v100["ips"][0].get("version").is_none());
        assert!(v100["interfaces"][0].get("mtu").is_none());
        let v110 = r.to_json(CniVersion::V1_1_0);
        assert_eq!(v110["interfaces"][0]["mtu"], 1442);
        assert!(v110["ips"][0].get("version").is_none());
    }

    #[test]
    fn dual_stack_and_bad_addresses() {
        let vif = VifInfo {
            class: None,
            mac: None,
            vif_name: None,
            mtu: None,
            subnets: vec![
                SubnetInfo {
                    cidr: "10.1.0.0/24".into(),
                    gateway: None,
                    dns: vec!["8.8.8.8".into()],
                    routes: vec![],
                    ips: vec!["10.1.0.9".into()],
                },
                SubnetInfo {
                    cidr: "fd00:1::/64".into(),
                    gateway: Some("fd00:1::1".into()),
                    dns: vec!["8.8.8.8".into()],
                    routes: vec![],
                    ips: vec!["fd00:1::9".into()],
                },
            ],
        };
        let j = CniResult::from_vif(&vif, "eth0", "/ns")
            .unwrap()
            .to_json(CniVersion::V0_3_1);
        assert_eq!(
            j["ips"][1],
            json!({"version": "6", "interface": 0, "address": "fd00:1::9/64", "gateway": "fd00:1::1"})
        );
        assert_eq!(j["dns"]["nameservers"], json!(["8.8.8.8"]));
        assert!(j.get("routes").is_none());
        for (ip, cidr) in [
            ("x", "10.0.0.0/8"),
            ("10.0.0.1", "10.0.0.0"),
            ("10.0.0.1", "10.0.0.0/33"),
            ("fd00::1", "10.0.0.0/8"),
        ] {
            let vif = VifInfo {
                subnets: vec![SubnetInfo {
                    cidr: cidr.into(),
                    gateway: None,
                    dns: vec![],
                    routes: vec![],
                    ips: vec![ip.into()],
                }],
                ..vif.clone()
            };
            assert_eq!(
                CniResult::from_vif(&vif, "eth0", "/ns").unwrap_err().code.code(),
                CODE_BAD_ADDRESS
            );
        }
    }
}
