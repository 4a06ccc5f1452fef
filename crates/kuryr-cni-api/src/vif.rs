//! A minimal reader of the os-vif VIF primitive (`versioned_object.*` JSON) the daemon returns
//! for ADD: only what the CNI result needs (MAC, subnets with CIDR, gateway, DNS, routes, fixed
//! IPs, MTU).
//!
//! Why not `kuryr_types::vif::Vif`: kuryr-types pulls kube and k8s-openapi, which would make the
//! per-call plugin executable several times larger and slower to start. Like upstream's Go
//! plugin (`ovo.go`), this reader unwraps `versioned_object.data` and list `objects` levels and
//! also accepts already-unwrapped objects.

use serde_json::Value;

use crate::error::{CniError, ErrorCode};

/// Upstream's code for a VIF that cannot be decoded.
pub const CODE_BAD_VIF: u32 = 899;
/// Upstream's code for an IP address or CIDR that cannot be parsed.
pub const CODE_BAD_ADDRESS: u32 = 799;

/// A route of a subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    /// Destination CIDR.
    pub cidr: String,
    /// Next hop.
    pub gateway: Option<String>,
}

/// A subnet of the VIF's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetInfo {
    /// Subnet CIDR.
    pub cidr: String,
    /// Gateway IP.
    pub gateway: Option<String>,
    /// DNS nameservers.
    pub dns: Vec<String>,
    /// Host routes.
    pub routes: Vec<RouteInfo>,
    /// Fixed IPs of the port in this subnet.
    pub ips: Vec<String>,
}

/// The parts of a VIF the CNI result is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VifInfo {
    /// os-vif class (`versioned_object.name`), when wrapped.
    pub class: Option<String>,
    /// MAC address (`address`).
    pub mac: Option<String>,
    /// Host-side device name (`vif_name`).
    pub vif_name: Option<String>,
    /// Network MTU.
    pub mtu: Option<u32>,
    /// Subnets in order.
    pub subnets: Vec<SubnetInfo>,
}

fn bad(msg: impl Into<String>) -> CniError {
    CniError::new(ErrorCode::Other(CODE_BAD_VIF), "invalid VIF from kuryr-daemon").with_details(msg)
}

/// `versioned_object.data` of a wrapped object, or the object itself.
fn data(v: &Value) -> &Value {
    v.get("versioned_object.data").unwrap_or(v)
}

/// Items of an os-vif list object (`{data: {objects: [...]}}`), a bare `{objects}`, or an array.
fn list(v: Option<&Value>) -> Result<&[Value], CniError> {
    let Some(v) = v else { return Ok(&[]) };
    if v.is_null() {
        return Ok(&[]);
    }
    let d = data(v);
    let arr = match d {
        Value::Array(a) => a,
        Value::Object(o) => match o.get("objects") {
            Some(Value::Array(a)) => a,
            None | Some(Value::Null) => return Ok(&[]),
            Some(_) => return Err(bad("list 'objects' is not an array")),
        },
        _ => return Err(bad("expected a list object")),
    };
    Ok(arr)
}

fn opt_str(v: &Value, key: &str) -> Result<Option<String>, CniError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(format!("field {key:?} is not a string"))),
    }
}

fn req_str(v: &Value, key: &str, what: &str) -> Result<String, CniError> {
    opt_str(v, key)?.ok_or_else(|| bad(format!("{what} has no {key:?}")))
}

impl VifInfo {
    /// Reads a VIF primitive (wrapped or already unwrapped).
    pub fn from_primitive(v: &Value) -> Result<Self, CniError> {
        if !v.is_object() {
            return Err(bad("VIF is not a JSON object"));
        }
        let class = opt_str(v, "versioned_object.name")?;
        let d = data(v);
        if !d.is_object() {
            return Err(bad("versioned_object.data is not an object"));
        }
        let mut out = VifInfo {
            class,
            mac: opt_str(d, "address")?,
            vif_name: opt_str(d, "vif_name")?,
            mtu: None,
            subnets: Vec::new(),
        };
        let Some(net) = d.get("network").filter(|n| !n.is_null()) else {
            return Ok(out);
        };
        let net = data(net);
        out.mtu = match net.get("mtu") {
            Some(Value::Number(n)) => n.as_u64().and_then(|m| u32::try_from(m).ok()),
            _ => None,
        };
        for s in list(net.get("subnets"))? {
            let s = data(s);
            let mut subnet = SubnetInfo {
                cidr: req_str(s, "cidr", "subnet")?,
                gateway: opt_str(s, "gateway")?,
                dns: Vec::new(),
                routes: Vec::new(),
                ips: Vec::new(),
            };
            match s.get("dns") {
                None | Some(Value::Null) => {}
                Some(Value::Array(a)) => {
                    for x in a {
                        let ns = x.as_str().ok_or_else(|| bad("dns entry is not a string"))?;
                        subnet.dns.push(ns.to_owned());
                    }
                }
                Some(_) => return Err(bad("subnet dns is not a list")),
            }
            for r in list(s.get("routes"))? {
                let r = data(r);
                subnet.routes.push(RouteInfo {
                    cidr: req_str(r, "cidr", "route")?,
                    gateway: opt_str(r, "gateway")?,
                });
            }
            for ip in list(s.get("ips"))? {
                subnet.ips.push(req_str(data(ip), "address", "fixed IP")?);
            }
            out.subnets.push(subnet);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_realistic_ovs_vif() {
        let v: Value = serde_json::from_str(include_str!("../tests/data/vif_ovs.json")).unwrap();
        let vif = VifInfo::from_primitive(&v).unwrap();
        assert_eq!(vif.class.as_deref(), Some("VIFOpenVSwitch"));
        assert_eq!(vif.mac.as_deref(), Some("fa:16:3e:12:34:56"));
        assert_eq!(vif.vif_name.as_deref(), Some("tap3e5f2a1b-7c"));
        assert_eq!(vif.mtu, Some(1442));
        assert_eq!(
            vif.subnets,
            vec![SubnetInfo {
                cidr: "10.0.0.64/26".into(),
                gateway: Some("10.0.0.65".into()),
                dns: vec!["10.0.0.2".into()],
                routes: vec![RouteInfo {
                    cidr: "169.254.169.254/32".into(),
                    gateway: Some("10.0.0.66".into())
                }],
                ips: vec!["10.0.0.87".into()],
            }]
        );
    }

    #[test]
    fn accepts_unwrapped_and_rejects_garbage() {
        let v = serde_json::json!({"address": "fa:16:3e:00:00:01", "network": {"subnets": [
            {"cidr": "fd00::/64", "ips": [{"address": "fd00::5"}], "routes": []}]}});
        let vif = VifInfo::from_primitive(&v).unwrap();
        assert_eq!(vif.subnets[0].ips, vec!["fd00::5".to_string()]);
        for bad in [
            serde_json::json!(1),
            serde_json::json!({"versioned_object.data": 3}),
            serde_json::json!({"address": 5}),
            serde_json::json!({"network": {"subnets": {"objects": 7}}}),
            serde_json::json!({"network": {"subnets": [{"gateway": "1.1.1.1"}]}}),
        ] {
            assert_eq!(
                VifInfo::from_primitive(&bad).unwrap_err().code.code(),
                CODE_BAD_VIF
            );
        }
    }
}
