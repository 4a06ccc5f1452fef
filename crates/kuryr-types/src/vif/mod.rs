//! The VIFs of a KuryrPort (`status.vifs`), typed, with (de)serialization to and from exactly
//! the oslo.versionedobjects primitives upstream stores:
//! `{<ifname>: {"default": bool, "vif": <VIF primitive>}}`, where the VIF is an os-vif
//! `VIFOpenVSwitch`/`VIFBridge`/`VIFVHostUser` or a kuryr `VIFVlanNested`/`VIFMacvlanNested`/
//! `VIFDPDKNested` whose `network` is a `Network` primitive holding a `SubnetList` of `Subnet`s,
//! each with a `FixedIPList` and a `RouteList`.
//!
//! Every field of `versioned_object.data` is optional (oslo only serializes fields that were
//! set); unknown fields, explicit `null`s and the envelope metadata are kept so a document read
//! from upstream is written back unchanged.

use crate::ovo::{self, Fields, OvoError, OvoMeta, Writer};

mod network;
pub use network::{FixedIp, Network, Route, Subnet};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Object versions as os-vif (2024, the release upstream Kuryr last used) and kuryr declare them.
pub mod versions {
    /// `Network` (1.1 added `mtu`).
    pub const NETWORK: &str = "1.1";
    /// `Subnet`, `SubnetList`, `FixedIP`, `FixedIPList`, `Route`, `RouteList`.
    pub const SUBNET: &str = "1.0";
    /// See [`SUBNET`].
    pub const LIST: &str = "1.0";
    /// See [`SUBNET`].
    pub const FIXED_IP: &str = "1.0";
    /// See [`SUBNET`].
    pub const ROUTE: &str = "1.0";
    /// `VIFPortProfileOpenVSwitch` (1.3 in os-vif of 2024; 1.4 is newer than upstream Kuryr).
    pub const PORT_PROFILE_OVS: &str = "1.3";
    /// `VIFPortProfileK8sDPDK`.
    pub const PORT_PROFILE_K8S_DPDK: &str = "1.1";
}

/// The class of a VIF (`versioned_object.name`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VifKind {
    /// os-vif `VIFOpenVSwitch` (neutron-vif driver, OVS/OVN).
    OpenVSwitch,
    /// os-vif `VIFBridge` (OVS hybrid plug).
    Bridge,
    /// os-vif `VIFVHostUser`.
    VHostUser,
    /// kuryr `VIFVlanNested` (pod in VM, trunk subport).
    VlanNested,
    /// kuryr `VIFMacvlanNested`.
    MacvlanNested,
    /// kuryr `VIFDPDKNested`.
    DpdkNested,
    /// os-vif `VIFGeneric`.
    Generic,
    /// os-vif `VIFDirect`.
    Direct,
    /// os-vif `VIFHostDevice`.
    HostDevice,
    /// os-vif `VIFNestedDPDK`.
    NestedDpdk,
    /// Any other class name.
    Other(String),
}

impl VifKind {
    /// The class name as upstream writes it.
    pub fn as_str(&self) -> &str {
        match self {
            VifKind::OpenVSwitch => "VIFOpenVSwitch",
            VifKind::Bridge => "VIFBridge",
            VifKind::VHostUser => "VIFVHostUser",
            VifKind::VlanNested => "VIFVlanNested",
            VifKind::MacvlanNested => "VIFMacvlanNested",
            VifKind::DpdkNested => "VIFDPDKNested",
            VifKind::Generic => "VIFGeneric",
            VifKind::Direct => "VIFDirect",
            VifKind::HostDevice => "VIFHostDevice",
            VifKind::NestedDpdk => "VIFNestedDPDK",
            VifKind::Other(s) => s,
        }
    }

    /// Parses a class name.
    pub fn from_name(name: &str) -> Self {
        match name {
            "VIFOpenVSwitch" => VifKind::OpenVSwitch,
            "VIFBridge" => VifKind::Bridge,
            "VIFVHostUser" => VifKind::VHostUser,
            "VIFVlanNested" => VifKind::VlanNested,
            "VIFMacvlanNested" => VifKind::MacvlanNested,
            "VIFDPDKNested" => VifKind::DpdkNested,
            "VIFGeneric" => VifKind::Generic,
            "VIFDirect" => VifKind::Direct,
            "VIFHostDevice" => VifKind::HostDevice,
            "VIFNestedDPDK" => VifKind::NestedDpdk,
            other => VifKind::Other(other.to_string()),
        }
    }

    /// The object version upstream writes for this class.
    pub fn version(&self) -> &'static str {
        match self {
            VifKind::VHostUser => "1.1",
            _ => "1.0",
        }
    }
}

/// One entry of `status.vifs`: the VIF and whether it is the pod's default interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VifEntry {
    /// `true` for the pod's main interface (`eth0`).
    pub default: bool,
    /// The VIF.
    pub vif: Vif,
}

/// A VIF (os-vif `VIFBase` and subclasses).
#[derive(Debug, Clone, PartialEq)]
pub struct Vif {
    /// Class.
    pub kind: VifKind,
    /// Envelope metadata.
    pub meta: OvoMeta,
    /// Neutron port ID.
    pub id: Option<String>,
    /// MAC address.
    pub address: Option<String>,
    /// The network, its subnets and the port's IPs.
    pub network: Option<Network>,
    /// os-vif plugin (`ovs`, `noop`, …).
    pub plugin: Option<String>,
    /// Port is ACTIVE in Neutron.
    pub active: Option<bool>,
    /// Keep the port when the VIF is unplugged.
    pub preserve_on_delete: Option<bool>,
    /// The backend filters traffic (Neutron `port_filter`).
    pub has_traffic_filtering: Option<bool>,
    /// Port profile (e.g. `VIFPortProfileOpenVSwitch` with `interface_id`).
    pub port_profile: Option<PortProfile>,
    /// Host-side device name (`tap…`, or the VLAN/macvlan device to create).
    pub vif_name: Option<String>,
    /// Bridge to plug into (`VIFOpenVSwitch`, `VIFBridge`, `VIFVHostUser`).
    pub bridge_name: Option<String>,
    /// VLAN ID on the trunk (`VIFVlanNested`).
    pub vlan_id: Option<i64>,
    /// vhost-user socket path (`VIFVHostUser`).
    pub path: Option<String>,
    /// vhost-user mode (`VIFVHostUser`).
    pub mode: Option<String>,
    /// PCI address (`VIFNestedDPDK`, `VIFDPDKNested`).
    pub pci_address: Option<String>,
    /// Device driver (`VIFNestedDPDK`, `VIFDPDKNested`).
    pub dev_driver: Option<String>,
    /// Unknown fields and explicit `null`s, kept.
    pub extra: Map<String, Value>,
}

/// A port profile (os-vif `VIFPortProfile*`), kept generic: class name, metadata and fields.
#[derive(Debug, Clone, PartialEq)]
pub struct PortProfile {
    /// Class name, e.g. `VIFPortProfileOpenVSwitch`.
    pub name: String,
    /// Envelope metadata.
    pub meta: OvoMeta,
    /// Fields.
    pub data: Map<String, Value>,
}

impl PortProfile {
    /// A `VIFPortProfileOpenVSwitch` with `interface_id` = the Neutron port ID (what upstream's
    /// OVS translator builds).
    pub fn open_vswitch(interface_id: &str) -> Self {
        let mut data = Map::new();
        data.insert("interface_id".into(), Value::String(interface_id.into()));
        PortProfile {
            name: "VIFPortProfileOpenVSwitch".into(),
            meta: OvoMeta::os_vif(versions::PORT_PROFILE_OVS),
            data,
        }
    }

    /// `interface_id`, when present.
    pub fn interface_id(&self) -> Option<&str> {
        self.data.get("interface_id").and_then(Value::as_str)
    }
}

impl Vif {
    /// A new VIF of `kind` for Neutron port `id`, with nothing else set.
    pub fn new(kind: VifKind, id: &str) -> Self {
        Vif {
            meta: OvoMeta::os_vif(kind.version()),
            kind,
            id: Some(id.to_string()),
            address: None,
            network: None,
            plugin: None,
            active: None,
            preserve_on_delete: None,
            has_traffic_filtering: None,
            port_profile: None,
            vif_name: None,
            bridge_name: None,
            vlan_id: None,
            path: None,
            mode: None,
            pci_address: None,
            dev_driver: None,
            extra: Map::new(),
        }
    }

    /// `active`, with os-vif's default (`true`) when unset.
    pub fn is_active(&self) -> bool {
        self.active.unwrap_or(true)
    }

    /// MTU of the network, if known.
    pub fn mtu(&self) -> Option<i64> {
        self.network.as_ref().and_then(|n| n.mtu)
    }

    /// All fixed IP addresses with their subnet, in order.
    pub fn ips(&self) -> impl Iterator<Item = (&Subnet, &str)> {
        self.network.iter().flat_map(|n| n.subnets.iter()).flat_map(|s| {
            s.ips
                .iter()
                .filter_map(move |ip| Some((s, ip.address.as_deref()?)))
        })
    }

    /// Reads a VIF primitive.
    pub fn from_primitive(value: Value) -> Result<Self, OvoError> {
        Self::from_primitive_at(value, "vif")
    }

    fn from_primitive_at(value: Value, path: &str) -> Result<Self, OvoError> {
        let (name, meta, data) = ovo::open(value, path)?;
        let dpath = format!("{path}.{}", ovo::KEY_DATA);
        let mut f = Fields::new(&dpath, data);
        let network = match f.object("network") {
            Some(v) => Some(Network::from_primitive_at(v, &f.path_of("network"))?),
            None => None,
        };
        let port_profile = match f.object("port_profile") {
            Some(v) => {
                let (name, meta, data) = ovo::open(v, &f.path_of("port_profile"))?;
                Some(PortProfile { name, meta, data })
            }
            None => None,
        };
        Ok(Vif {
            kind: VifKind::from_name(&name),
            meta,
            id: f.str("id")?,
            address: f.str("address")?,
            network,
            plugin: f.str("plugin")?,
            active: f.bool("active")?,
            preserve_on_delete: f.bool("preserve_on_delete")?,
            has_traffic_filtering: f.bool("has_traffic_filtering")?,
            port_profile,
            vif_name: f.str("vif_name")?,
            bridge_name: f.str("bridge_name")?,
            vlan_id: f.int("vlan_id")?,
            path: f.str("path")?,
            mode: f.str("mode")?,
            pci_address: f.str("pci_address")?,
            dev_driver: f.str("dev_driver")?,
            extra: f.rest(),
        })
    }

    /// Writes the VIF primitive.
    pub fn to_primitive(&self) -> Value {
        let data = Writer::new()
            .str("id", &self.id)
            .str("address", &self.address)
            .value("network", self.network.as_ref().map(Network::to_primitive))
            .str("plugin", &self.plugin)
            .bool("active", self.active)
            .bool("preserve_on_delete", self.preserve_on_delete)
            .bool("has_traffic_filtering", self.has_traffic_filtering)
            .value(
                "port_profile",
                self.port_profile
                    .as_ref()
                    .map(|p| ovo::close(&p.name, &p.meta, p.data.clone())),
            )
            .str("vif_name", &self.vif_name)
            .str("bridge_name", &self.bridge_name)
            .int("vlan_id", self.vlan_id)
            .str("path", &self.path)
            .str("mode", &self.mode)
            .str("pci_address", &self.pci_address)
            .str("dev_driver", &self.dev_driver)
            .finish(&self.extra);
        ovo::close(self.kind.as_str(), &self.meta, data)
    }
}

impl Serialize for Vif {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_primitive().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Vif {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Vif::from_primitive(v).map_err(serde::de::Error::custom)
    }
}
