//! The network part of a VIF: os-vif `Network` with its `SubnetList` of `Subnet`s, each with a
//! `FixedIPList` of `FixedIP`s and a `RouteList` of `Route`s, read from and written to upstream's
//! primitives without loss.

use super::versions;
use crate::ovo::{self, Fields, OvoError, OvoMeta, Writer};
use serde_json::{Map, Value};

/// A network (os-vif `Network`).
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    /// Envelope metadata.
    pub meta: OvoMeta,
    /// Neutron network ID.
    pub id: Option<String>,
    /// Bridge (OVS integration bridge for OVS VIFs).
    pub bridge: Option<String>,
    /// Network name.
    pub label: Option<String>,
    /// Subnets (the `SubnetList`'s objects).
    pub subnets: Vec<Subnet>,
    /// Metadata of the `SubnetList`; `None` when `subnets` is absent.
    pub subnets_meta: Option<OvoMeta>,
    /// `multi_host`.
    pub multi_host: Option<bool>,
    /// `should_provide_bridge`.
    pub should_provide_bridge: Option<bool>,
    /// `should_provide_vlan`.
    pub should_provide_vlan: Option<bool>,
    /// `bridge_interface`.
    pub bridge_interface: Option<String>,
    /// Provider VLAN segmentation ID.
    pub vlan: Option<i64>,
    /// MTU.
    pub mtu: Option<i64>,
    /// Unknown fields and explicit `null`s, kept.
    pub extra: Map<String, Value>,
}

/// A subnet with the port's IPs in it (os-vif `Subnet`).
#[derive(Debug, Clone, PartialEq)]
pub struct Subnet {
    /// Envelope metadata.
    pub meta: OvoMeta,
    /// CIDR, e.g. `10.0.0.0/24`.
    pub cidr: Option<String>,
    /// DNS servers.
    pub dns: Option<Vec<String>>,
    /// Gateway IP.
    pub gateway: Option<String>,
    /// The port's fixed IPs in this subnet (the `FixedIPList`'s objects).
    pub ips: Vec<FixedIp>,
    /// Metadata of the `FixedIPList`; `None` when `ips` is absent.
    pub ips_meta: Option<OvoMeta>,
    /// Host routes (the `RouteList`'s objects).
    pub routes: Vec<Route>,
    /// Metadata of the `RouteList`; `None` when `routes` is absent.
    pub routes_meta: Option<OvoMeta>,
    /// DHCP server IP.
    pub dhcp_server: Option<String>,
    /// Unknown fields and explicit `null`s, kept.
    pub extra: Map<String, Value>,
}

/// A fixed IP (os-vif `FixedIP`).
#[derive(Debug, Clone, PartialEq)]
pub struct FixedIp {
    /// Envelope metadata.
    pub meta: OvoMeta,
    /// The IP address.
    pub address: Option<String>,
    /// Floating IPs.
    pub floating_ips: Option<Vec<String>>,
    /// Unknown fields and explicit `null`s, kept.
    pub extra: Map<String, Value>,
}

/// A host route (os-vif `Route`).
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Envelope metadata.
    pub meta: OvoMeta,
    /// Destination CIDR.
    pub cidr: Option<String>,
    /// Next hop.
    pub gateway: Option<String>,
    /// Outgoing interface.
    pub interface: Option<String>,
    /// Unknown fields and explicit `null`s, kept.
    pub extra: Map<String, Value>,
}

impl Network {
    /// A new network with only its ID.
    pub fn new(id: &str) -> Self {
        Network {
            meta: OvoMeta::os_vif(versions::NETWORK),
            id: Some(id.to_string()),
            bridge: None,
            label: None,
            subnets: Vec::new(),
            subnets_meta: Some(OvoMeta::os_vif(versions::LIST)),
            multi_host: None,
            should_provide_bridge: None,
            should_provide_vlan: None,
            bridge_interface: None,
            vlan: None,
            mtu: None,
            extra: Map::new(),
        }
    }

    pub(super) fn from_primitive_at(value: Value, path: &str) -> Result<Self, OvoError> {
        let (_, meta, data) = ovo::open(value, path)?;
        let mut f = Fields::new(&format!("{path}.{}", ovo::KEY_DATA), data);
        let (subnets, subnets_meta) = match f.object("subnets") {
            Some(v) => {
                let p = f.path_of("subnets");
                let (m, objs) = ovo::open_list(v, &p, "SubnetList")?;
                let subnets = objs
                    .into_iter()
                    .enumerate()
                    .map(|(i, o)| Subnet::from_primitive_at(o, &format!("{p}.objects[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                (subnets, Some(m))
            }
            None => (Vec::new(), None),
        };
        Ok(Network {
            meta,
            id: f.str("id")?,
            bridge: f.str("bridge")?,
            label: f.str("label")?,
            subnets,
            subnets_meta,
            multi_host: f.bool("multi_host")?,
            should_provide_bridge: f.bool("should_provide_bridge")?,
            should_provide_vlan: f.bool("should_provide_vlan")?,
            bridge_interface: f.str("bridge_interface")?,
            vlan: f.int("vlan")?,
            mtu: f.int("mtu")?,
            extra: f.rest(),
        })
    }

    pub(super) fn to_primitive(&self) -> Value {
        let subnets = (self.subnets_meta.is_some() || !self.subnets.is_empty()).then(|| {
            let meta = self
                .subnets_meta
                .clone()
                .unwrap_or_else(|| OvoMeta::os_vif(versions::LIST));
            ovo::close_list(
                "SubnetList",
                &meta,
                self.subnets.iter().map(Subnet::to_primitive).collect(),
            )
        });
        let data = Writer::new()
            .str("id", &self.id)
            .str("bridge", &self.bridge)
            .str("label", &self.label)
            .value("subnets", subnets)
            .bool("multi_host", self.multi_host)
            .bool("should_provide_bridge", self.should_provide_bridge)
            .bool("should_provide_vlan", self.should_provide_vlan)
            .str("bridge_interface", &self.bridge_interface)
            .int("vlan", self.vlan)
            .int("mtu", self.mtu)
            .finish(&self.extra);
        ovo::close("Network", &self.meta, data)
    }
}

impl Subnet {
    /// A new subnet with its CIDR, empty IP and route lists.
    pub fn new(cidr: &str) -> Self {
        Subnet {
            meta: OvoMeta::os_vif(versions::SUBNET),
            cidr: Some(cidr.to_string()),
            dns: Some(Vec::new()),
            gateway: None,
            ips: Vec::new(),
            ips_meta: Some(OvoMeta::os_vif(versions::LIST)),
            routes: Vec::new(),
            routes_meta: Some(OvoMeta::os_vif(versions::LIST)),
            dhcp_server: None,
            extra: Map::new(),
        }
    }

    pub(super) fn from_primitive_at(value: Value, path: &str) -> Result<Self, OvoError> {
        let (_, meta, data) = ovo::open(value, path)?;
        let mut f = Fields::new(&format!("{path}.{}", ovo::KEY_DATA), data);
        let (ips, ips_meta) = match f.object("ips") {
            Some(v) => {
                let p = f.path_of("ips");
                let (m, objs) = ovo::open_list(v, &p, "FixedIPList")?;
                let ips = objs
                    .into_iter()
                    .enumerate()
                    .map(|(i, o)| FixedIp::from_primitive_at(o, &format!("{p}.objects[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                (ips, Some(m))
            }
            None => (Vec::new(), None),
        };
        let (routes, routes_meta) = match f.object("routes") {
            Some(v) => {
                let p = f.path_of("routes");
                let (m, objs) = ovo::open_list(v, &p, "RouteList")?;
                let routes = objs
                    .into_iter()
                    .enumerate()
                    .map(|(i, o)| Route::from_primitive_at(o, &format!("{p}.objects[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                (routes, Some(m))
            }
            None => (Vec::new(), None),
        };
        Ok(Subnet {
            meta,
            cidr: f.str("cidr")?,
            dns: f.str_list("dns")?,
            gateway: f.str("gateway")?,
            ips,
            ips_meta,
            routes,
            routes_meta,
            dhcp_server: f.str("dhcp_server")?,
            extra: f.rest(),
        })
    }

    pub(super) fn to_primitive(&self) -> Value {
        let list = |name: &str, meta: &Option<OvoMeta>, items: Vec<Value>| {
            (meta.is_some() || !items.is_empty()).then(|| {
                let meta = meta.clone().unwrap_or_else(|| OvoMeta::os_vif(versions::LIST));
                ovo::close_list(name, &meta, items)
            })
        };
        let ips = list(
            "FixedIPList",
            &self.ips_meta,
            self.ips.iter().map(FixedIp::to_primitive).collect(),
        );
        let routes = list(
            "RouteList",
            &self.routes_meta,
            self.routes.iter().map(Route::to_primitive).collect(),
        );
        let data = Writer::new()
            .str("cidr", &self.cidr)
            .str_list("dns", &self.dns)
            .str("gateway", &self.gateway)
            .value("ips", ips)
            .value("routes", routes)
            .str("dhcp_server", &self.dhcp_server)
            .finish(&self.extra);
        ovo::close("Subnet", &self.meta, data)
    }
}

impl FixedIp {
    /// A fixed IP.
    pub fn new(address: &str) -> Self {
        FixedIp {
            meta: OvoMeta::os_vif(versions::FIXED_IP),
            address: Some(address.to_string()),
            floating_ips: None,
            extra: Map::new(),
        }
    }

    pub(super) fn from_primitive_at(value: Value, path: &str) -> Result<Self, OvoError> {
        let (_, meta, data) = ovo::open(value, path)?;
        let mut f = Fields::new(&format!("{path}.{}", ovo::KEY_DATA), data);
        Ok(FixedIp {
            meta,
            address: f.str("address")?,
            floating_ips: f.str_list("floating_ips")?,
            extra: f.rest(),
        })
    }

    pub(super) fn to_primitive(&self) -> Value {
        let data = Writer::new()
            .str("address", &self.address)
            .str_list("floating_ips", &self.floating_ips)
            .finish(&self.extra);
        ovo::close("FixedIP", &self.meta, data)
    }
}

impl Route {
    /// A host route.
    pub fn new(cidr: &str, gateway: &str) -> Self {
        Route {
            meta: OvoMeta::os_vif(versions::ROUTE),
            cidr: Some(cidr.to_string()),
            gateway: Some(gateway.to_string()),
            interface: None,
            extra: Map::new(),
        }
    }

    pub(super) fn from_primitive_at(value: Value, path: &str) -> Result<Self, OvoError> {
        let (_, meta, data) = ovo::open(value, path)?;
        let mut f = Fields::new(&format!("{path}.{}", ovo::KEY_DATA), data);
        Ok(Route {
            meta,
            cidr: f.str("cidr")?,
            gateway: f.str("gateway")?,
            interface: f.str("interface")?,
            extra: f.rest(),
        })
    }

    pub(super) fn to_primitive(&self) -> Value {
        let data = Writer::new()
            .str("cidr", &self.cidr)
            .str("gateway", &self.gateway)
            .str("interface", &self.interface)
            .finish(&self.extra);
        ovo::close("Route", &self.meta, data)
    }
}
