//! Plain serde models of the Neutron API objects the controller reads (ports, networks,
//! subnets), and how tags reach created ports ([`TagMode`]). Request bodies and filters belong
//! to the client layer (`kuryr-openstack`'s `PortCreate`, `PortUpdate`, `PortFilter`).
//!
//! Models are tolerant: every field has a default, `null` reads as the default, and unknown
//! fields are kept in `extra`.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// `device_owner` of every pod port (kuryr-lib's `DEVICE_OWNER`).
pub const DEVICE_OWNER: &str = "compute:kuryr";
/// `device_owner` Neutron shows on trunk subports (nested mode).
pub const DEVICE_OWNER_SUBPORT: &str = "trunk:subport";
/// Port `status` once the backend has wired it.
pub const STATUS_ACTIVE: &str = "ACTIVE";
/// `binding:vif_type` of a port not bound to a host.
pub const VIF_TYPE_UNBOUND: &str = "unbound";
/// `binding:vif_type` of a port whose binding failed.
pub const VIF_TYPE_BINDING_FAILED: &str = "binding_failed";
/// Extension alias (Ussuri+) allowing `tags` in a (bulk) port create body.
pub const EXT_TAG_PORTS_DURING_BULK_CREATION: &str = "tag-ports-during-bulk-creation";
/// Extension alias (2024.1+) allowing `tags` in the create body of any taggable resource.
pub const EXT_TAG_CREATION: &str = "tag-creation";

fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One fixed IP of a port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixedIp {
    /// Subnet the address belongs to.
    #[serde(default, deserialize_with = "nullable")]
    pub subnet_id: String,
    /// The address.
    #[serde(default, deserialize_with = "nullable")]
    pub ip_address: String,
}

/// A Neutron port (`GET /v2.0/ports/{id}`, `.../ports?...`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Port {
    /// Port ID.
    #[serde(default, deserialize_with = "nullable")]
    pub id: String,
    /// Name (`kuryr-pool-port` or `<ns>/<pod>` with `port_debug`).
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Network ID.
    #[serde(default, deserialize_with = "nullable")]
    pub network_id: String,
    /// Project ID.
    #[serde(default, deserialize_with = "nullable")]
    pub project_id: String,
    /// Legacy project ID (same as `project_id`).
    #[serde(default, deserialize_with = "nullable")]
    pub tenant_id: String,
    /// MAC address.
    #[serde(default, deserialize_with = "nullable")]
    pub mac_address: String,
    /// Fixed IPs.
    #[serde(default, deserialize_with = "nullable")]
    pub fixed_ips: Vec<FixedIp>,
    /// Security group IDs.
    #[serde(default, deserialize_with = "nullable")]
    pub security_groups: Vec<String>,
    /// `ACTIVE`, `DOWN`, `BUILD`, `ERROR`.
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// `compute:kuryr` for pod ports.
    #[serde(default, deserialize_with = "nullable")]
    pub device_owner: String,
    /// Pod UID (with `port_debug`) or empty.
    #[serde(default, deserialize_with = "nullable")]
    pub device_id: String,
    /// Host the port is bound to (empty: unbound).
    #[serde(rename = "binding:host_id", default, deserialize_with = "nullable")]
    pub binding_host_id: String,
    /// `ovs`, `unbound`, `binding_failed`, …
    #[serde(rename = "binding:vif_type", default, deserialize_with = "nullable")]
    pub binding_vif_type: String,
    /// Backend details (`port_filter`, `bridge_name`, `ovs_hybrid_plug`, …).
    #[serde(rename = "binding:vif_details", default, deserialize_with = "nullable")]
    pub binding_vif_details: Map<String, Value>,
    /// Tags.
    #[serde(default, deserialize_with = "nullable")]
    pub tags: Vec<String>,
    /// Administrative state.
    #[serde(default, deserialize_with = "nullable")]
    pub admin_state_up: bool,
    /// Creation time (`2024-01-01T00:00:00Z`).
    #[serde(default, deserialize_with = "nullable")]
    pub created_at: String,
    /// Last update time.
    #[serde(default, deserialize_with = "nullable")]
    pub updated_at: String,
    /// Everything else, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Port {
    /// `project_id`, falling back to the legacy `tenant_id`.
    pub fn project(&self) -> &str {
        if self.project_id.is_empty() {
            &self.tenant_id
        } else {
            &self.project_id
        }
    }

    /// `status == ACTIVE`.
    pub fn is_active(&self) -> bool {
        self.status == STATUS_ACTIVE
    }

    /// Bound to a host with a usable VIF type (upstream deletes recovered ports without one).
    pub fn is_bound(&self) -> bool {
        !self.binding_host_id.is_empty()
            && !self.binding_vif_type.is_empty()
            && self.binding_vif_type != VIF_TYPE_UNBOUND
            && self.binding_vif_type != VIF_TYPE_BINDING_FAILED
    }

    /// A `binding:vif_details` flag (`port_filter`, `ovs_hybrid_plug`), `false` when absent.
    pub fn vif_detail_flag(&self, key: &str) -> bool {
        self.binding_vif_details
            .get(key)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// A `binding:vif_details` string (`bridge_name`).
    pub fn vif_detail_str(&self, key: &str) -> Option<&str> {
        self.binding_vif_details.get(key).and_then(Value::as_str)
    }

    /// Parses `created_at` (falling back to `updated_at`); `None` when neither parses.
    pub fn created(&self) -> Option<jiff::Timestamp> {
        parse_time(&self.created_at).or_else(|| parse_time(&self.updated_at))
    }

    /// Parses `updated_at`.
    pub fn updated(&self) -> Option<jiff::Timestamp> {
        parse_time(&self.updated_at)
    }
}

/// Parses a Neutron timestamp; Neutron omits the zone on some releases (`2024-01-01T00:00:00`),
/// which is UTC.
pub fn parse_time(s: &str) -> Option<jiff::Timestamp> {
    if s.is_empty() {
        return None;
    }
    s.parse::<jiff::Timestamp>().ok().or_else(|| {
        s.parse::<jiff::civil::DateTime>()
            .ok()?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp())
    })
}

/// A Neutron network.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// Network ID.
    #[serde(default, deserialize_with = "nullable")]
    pub id: String,
    /// Name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// MTU (`None` when the `net-mtu` extension is absent).
    #[serde(default)]
    pub mtu: Option<i64>,
    /// Tags.
    #[serde(default, deserialize_with = "nullable")]
    pub tags: Vec<String>,
    /// Project ID.
    #[serde(default, deserialize_with = "nullable")]
    pub project_id: String,
    /// `provider:network_type` (admin only).
    #[serde(rename = "provider:network_type", default)]
    pub provider_network_type: Option<String>,
    /// `provider:physical_network` (admin only).
    #[serde(rename = "provider:physical_network", default)]
    pub provider_physical_network: Option<String>,
    /// `provider:segmentation_id` (admin only).
    #[serde(rename = "provider:segmentation_id", default)]
    pub provider_segmentation_id: Option<i64>,
    /// Everything else, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One host route of a subnet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRoute {
    /// Destination CIDR.
    #[serde(default, deserialize_with = "nullable")]
    pub destination: String,
    /// Next hop.
    #[serde(default, deserialize_with = "nullable")]
    pub nexthop: String,
}

/// A Neutron subnet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Subnet {
    /// Subnet ID.
    #[serde(default, deserialize_with = "nullable")]
    pub id: String,
    /// Network ID.
    #[serde(default, deserialize_with = "nullable")]
    pub network_id: String,
    /// CIDR.
    #[serde(default, deserialize_with = "nullable")]
    pub cidr: String,
    /// Gateway (`None`: no gateway).
    #[serde(default)]
    pub gateway_ip: Option<String>,
    /// DNS servers.
    #[serde(default, deserialize_with = "nullable")]
    pub dns_nameservers: Vec<String>,
    /// Host routes.
    #[serde(default, deserialize_with = "nullable")]
    pub host_routes: Vec<HostRoute>,
    /// 4 or 6.
    #[serde(default)]
    pub ip_version: Option<u8>,
    /// Subnet pool it was allocated from.
    #[serde(default)]
    pub subnetpool_id: Option<String>,
    /// Tags.
    #[serde(default, deserialize_with = "nullable")]
    pub tags: Vec<String>,
    /// Everything else, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A Neutron subnet pool (`GET /v2.0/subnetpools/{id}`): what a namespace subnet taken from it
/// looks like.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubnetPool {
    /// Subnet pool ID.
    #[serde(default, deserialize_with = "nullable")]
    pub id: String,
    /// 4 or 6.
    #[serde(default)]
    pub ip_version: Option<u8>,
    /// The pool's prefixes (CIDRs).
    #[serde(default, deserialize_with = "nullable")]
    pub prefixes: Vec<String>,
    /// Everything else, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One resource of `GET /v2.0/quotas/{project}/details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaUsage {
    /// The limit (-1: unlimited).
    #[serde(default)]
    pub limit: i64,
    /// In use.
    #[serde(default)]
    pub used: i64,
    /// Reserved.
    #[serde(default)]
    pub reserved: i64,
}

impl QuotaUsage {
    /// What is left (-1: unlimited), as upstream's `kuryr_quota_free_count` reports it.
    pub fn free(&self) -> i64 {
        if self.limit < 0 {
            -1
        } else {
            (self.limit - self.used).max(0)
        }
    }
}

/// How tags reach newly created ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagMode {
    /// `tags` in the create body (extension `tag-ports-during-bulk-creation` or `tag-creation`).
    InCreateBody,
    /// `PUT /v2.0/ports/{id}/tags` per created port (older Neutron).
    AfterCreate,
}

impl TagMode {
    /// Chooses from the aliases of `GET /v2.0/extensions`.
    pub fn from_extensions<'a>(aliases: impl IntoIterator<Item = &'a str>) -> Self {
        if aliases
            .into_iter()
            .any(|a| a == EXT_TAG_PORTS_DURING_BULK_CREATION || a == EXT_TAG_CREATION)
        {
            TagMode::InCreateBody
        } else {
            TagMode::AfterCreate
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port as Neutron (Zed, ML2/OVN) returns it, trimmed of nothing.
    const PORT_JSON: &str = r#"{
        "id": "3e5f2a1b-7c8d-4e9f-a0b1-c2d3e4f5a6b7",
        "name": "",
        "network_id": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d",
        "tenant_id": "5d1c2a3b4c5d6e7f8a9b0c1d2e3f4a5b",
        "mac_address": "fa:16:3e:12:34:56",
        "admin_state_up": true,
        "status": "ACTIVE",
        "device_id": "",
        "device_owner": "compute:kuryr",
        "fixed_ips": [{"subnet_id": "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b", "ip_address": "10.0.0.87"}],
        "allowed_address_pairs": [],
        "extra_dhcp_opts": [],
        "security_groups": ["b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e"],
        "description": "",
        "binding:vnic_type": "normal",
        "binding:profile": {},
        "binding:host_id": "worker-0",
        "binding:vif_type": "ovs",
        "binding:vif_details": {"port_filter": true, "connectivity": "l2", "bridge_name": "br-int", "datapath_type": "netdev", "bound_drivers": {"0": "ovn"}},
        "port_security_enabled": true,
        "qos_policy_id": null,
        "qos_network_policy_id": null,
        "resource_request": null,
        "ip_allocation": "immediate",
        "tags": ["kuryr", "kuryr-cluster=test"],
        "created_at": "2026-11-22T05:59:01Z",
        "updated_at": "2026-11-22T06:00:12Z",
        "revision_number": 4,
        "project_id": "5d1c2a3b4c5d6e7f8a9b0c1d2e3f4a5b",
        "dns_name": null
    }"#;

    #[test]
    fn port_parses_and_keeps_unknown_fields() {
        let p: Port = serde_json::from_str(PORT_JSON).unwrap();
        assert_eq!(p.id, "3e5f2a1b-7c8d-4e9f-a0b1-c2d3e4f5a6b7");
        assert_eq!(p.binding_host_id, "worker-0");
        assert!(p.is_bound() && p.is_active());
        assert!(p.vif_detail_flag("port_filter"));
        assert_eq!(p.vif_detail_str("bridge_name"), Some("br-int"));
        assert_eq!(p.fixed_ips[0].ip_address, "10.0.0.87");
        assert_eq!(p.extra["revision_number"], 4);
        assert_eq!(p.created().unwrap().to_string(), "2026-11-22T05:59:01Z");
        let back = serde_json::to_value(&p).unwrap();
        assert_eq!(back["binding:vif_type"], "ovs");
        assert_eq!(back["revision_number"], 4);
    }

    #[test]
    fn port_tolerates_missing_and_null_fields() {
        let p: Port = serde_json::from_str(
            r#"{"id": "x", "binding:host_id": null, "security_groups": null, "name": null, "tenant_id": "t"}"#,
        )
        .unwrap();
        assert_eq!(p.binding_host_id, "");
        assert!(p.security_groups.is_empty());
        assert!(!p.is_bound());
        assert_eq!(p.project(), "t");
        assert!(p.created().is_none());
        let p: Port =
            serde_json::from_str(r#"{"id":"x","binding:host_id":"h","binding:vif_type":"unbound"}"#).unwrap();
        assert!(!p.is_bound());
        assert_eq!(
            parse_time("2024-05-01T10:00:00").unwrap().to_string(),
            "2024-05-01T10:00:00Z"
        );
    }

    #[test]
    fn network_and_subnet_parse() {
        let n: Network = serde_json::from_str(
            r#"{"id":"n","name":"pods","mtu":1442,"provider:network_type":"geneve","provider:segmentation_id":7,"router:external":false}"#,
        )
        .unwrap();
        assert_eq!(n.mtu, Some(1442));
        assert_eq!(n.provider_network_type.as_deref(), Some("geneve"));
        assert_eq!(n.extra["router:external"], false);
        let s: Subnet = serde_json::from_str(
            r#"{"id":"s","network_id":"n","cidr":"10.0.0.64/26","gateway_ip":null,"dns_nameservers":["10.0.0.2"],
               "host_routes":[{"destination":"169.254.169.254/32","nexthop":"10.0.0.66"}],"ip_version":4,"subnetpool_id":null}"#,
        )
        .unwrap();
        assert_eq!(s.gateway_ip, None);
        assert_eq!(s.host_routes[0].nexthop, "10.0.0.66");
        assert_eq!(s.ip_version, Some(4));
    }

    #[test]
    fn tag_mode_from_extensions() {
        assert_eq!(
            TagMode::from_extensions(["trunk", "tag-ports-during-bulk-creation"]),
            TagMode::InCreateBody
        );
        assert_eq!(TagMode::from_extensions(["tag-creation"]), TagMode::InCreateBody);
        assert_eq!(
            TagMode::from_extensions(["standard-attr-tag"]),
            TagMode::AfterCreate
        );
    }
}
