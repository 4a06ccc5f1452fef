//! CNI plugin output: success results (spec 0.1.0–1.1.0, normalised) and error objects.

use std::net::IpAddr;

use serde_json::Value;

/// One interface of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Interface name.
    pub name: String,
    /// MAC address, when reported.
    pub mac: Option<String>,
    /// Netns path for container-side interfaces (empty for host-side ones).
    pub sandbox: Option<String>,
}

/// One IP configuration of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpConfig {
    /// The address without prefix.
    pub address: IpAddr,
    /// Prefix length.
    pub prefix: u8,
    /// Gateway, when reported.
    pub gateway: Option<IpAddr>,
    /// Index into `interfaces`, when reported.
    pub interface: Option<usize>,
}

/// A normalised CNI success result; `raw` keeps the plugin's JSON for caching and `prevResult`.
#[derive(Debug, Clone, PartialEq)]
pub struct CniResult {
    /// `cniVersion` of the result.
    pub cni_version: String,
    /// Interfaces.
    pub interfaces: Vec<Interface>,
    /// IP configurations.
    pub ips: Vec<IpConfig>,
    /// The JSON as printed by the plugin.
    pub raw: Value,
}

/// A CNI error object (`code`, `msg`, `details`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniError {
    /// Error code (1–99 reserved by the spec).
    pub code: u64,
    /// Short message.
    pub msg: String,
    /// Longer details.
    pub details: String,
}

impl std::fmt::Display for CniError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.details.is_empty() {
            write!(f, "{}", self.msg)
        } else {
            write!(f, "{}; {}", self.msg, self.details)
        }
    }
}

fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, prefix) = s.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let prefix: u8 = prefix.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some((ip, prefix))
}

fn parse_ip_entry(v: &Value, key: &str) -> Result<IpConfig, String> {
    let addr = v
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("ip entry without {key}"))?;
    let (address, prefix) = parse_cidr(addr).ok_or_else(|| format!("invalid address {addr:?}"))?;
    let gateway = match v.get("gateway").and_then(Value::as_str) {
        Some(g) => Some(g.parse().map_err(|_| format!("invalid gateway {g:?}"))?),
        None => None,
    };
    let interface = v
        .get("interface")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok());
    Ok(IpConfig {
        address,
        prefix,
        gateway,
        interface,
    })
}

/// Parses a success result of any version from 0.1.0 to 1.1.0.
pub fn parse_result(bytes: &[u8]) -> Result<CniResult, String> {
    let raw: Value = serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}"))?;
    if !raw.is_object() {
        return Err("result is not a JSON object".into());
    }
    let cni_version = raw
        .get("cniVersion")
        .and_then(Value::as_str)
        .unwrap_or("0.1.0")
        .to_string();
    let mut interfaces = Vec::new();
    let mut ips = Vec::new();
    if cni_version.starts_with("0.1.") || cni_version.starts_with("0.2.") {
        for key in ["ip4", "ip6"] {
            if let Some(v) = raw.get(key) {
                ips.push(parse_ip_entry(v, "ip")?);
            }
        }
    } else {
        for i in raw
            .get("interfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = i
                .get("name")
                .and_then(Value::as_str)
                .ok_or("interface without name")?;
            let s = |k: &str| {
                i.get(k)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            };
            interfaces.push(Interface {
                name: name.to_string(),
                mac: s("mac"),
                sandbox: s("sandbox"),
            });
        }
        for ip in raw.get("ips").and_then(Value::as_array).into_iter().flatten() {
            let cfg = parse_ip_entry(ip, "address")?;
            if cfg.interface.is_some_and(|i| i >= interfaces.len()) {
                return Err("ip entry refers to a missing interface".into());
            }
            ips.push(cfg);
        }
    }
    Ok(CniResult {
        cni_version,
        interfaces,
        ips,
        raw,
    })
}

/// Parses an error object; `None` when the bytes are not one.
pub fn parse_error(bytes: &[u8]) -> Option<CniError> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let code = v.get("code")?.as_u64()?;
    Some(CniError {
        code,
        msg: v
            .get("msg")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        details: v
            .get("details")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

impl CniResult {
    /// Pod IPs as a CRI runtime reports them: the addresses on container-side interfaces named
    /// `ifname` (all addresses when the result names no interfaces), IPv4 first.
    pub fn pod_ips(&self, ifname: &str) -> Vec<IpAddr> {
        let on_pod_if = |c: &&IpConfig| match c.interface.and_then(|i| self.interfaces.get(i)) {
            Some(i) => i.name == ifname && i.sandbox.is_some(),
            None => true,
        };
        let mut out: Vec<IpAddr> = self.ips.iter().filter(on_pod_if).map(|c| c.address).collect();
        if out.is_empty() {
            out = self.ips.iter().map(|c| c.address).collect();
        }
        out.sort_by_key(|ip| ip.is_ipv6());
        out.dedup();
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn parses_1_x_results_and_selects_pod_interface() {
        for v in ["1.0.0", "1.1.0"] {
            let r = parse_result(&b(json!({"cniVersion": v,
                "interfaces":[{"name":"veth1","mac":"aa:bb:cc:dd:ee:ff"},{"name":"eth0","sandbox":"/var/run/netns/x"}],
                "ips":[{"address":"10.0.0.1/24","interface":0},{"address":"fd00::5/64","interface":1},
                       {"address":"10.244.0.5/24","gateway":"10.244.0.1","interface":1}],
                "routes":[{"dst":"0.0.0.0/0"}],"dns":{"nameservers":["10.96.0.10"]}})))
            .unwrap();
            assert_eq!(r.cni_version, v);
            assert_eq!(r.interfaces.len(), 2);
            assert_eq!(r.ips[2].gateway, Some("10.244.0.1".parse().unwrap()));
            assert_eq!(
                r.pod_ips("eth0"),
                vec![
                    "10.244.0.5".parse::<IpAddr>().unwrap(),
                    "fd00::5".parse().unwrap()
                ]
            );
        }
    }

    #[test]
    fn parses_0_3_and_0_4_results_with_version_field() {
        for v in ["0.3.0", "0.3.1", "0.4.0"] {
            let r = parse_result(&b(json!({"cniVersion": v,
                "ips":[{"version":"4","address":"10.1.2.3/32"}]})))
            .unwrap();
            assert_eq!(r.ips[0].prefix, 32);
            assert_eq!(r.pod_ips("eth0"), vec!["10.1.2.3".parse::<IpAddr>().unwrap()]);
        }
    }

    #[test]
    fn parses_legacy_0_2_results() {
        let r = parse_result(&b(
            json!({"cniVersion":"0.2.0","ip4":{"ip":"10.9.0.2/16","gateway":"10.9.0.1"}}),
        ))
        .unwrap();
        assert_eq!(r.pod_ips("eth0"), vec!["10.9.0.2".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn rejects_bad_results() {
        assert!(parse_result(b"nope").is_err());
        assert!(parse_result(&b(json!({"cniVersion":"1.0.0","ips":[{"address":"10.0.0.1"}]}))).is_err());
        assert!(
            parse_result(&b(
                json!({"cniVersion":"1.0.0","ips":[{"address":"10.0.0.1/8","interface":3}]})
            ))
            .is_err()
        );
    }

    #[test]
    fn parses_error_objects() {
        let e = parse_error(&b(
            json!({"cniVersion":"1.0.0","code":7,"msg":"bad","details":"more"}),
        ))
        .unwrap();
        assert_eq!(e.code, 7);
        assert_eq!(e.to_string(), "bad; more");
        assert!(parse_error(b"{}").is_none());
        assert!(parse_error(b"garbage").is_none());
    }
}
