//! Request-side models of the [`Neutron`](crate::Neutron) trait: list filters (rendered as query
//! parameters) and create/update bodies. Response models (`Port`, `Network`, `Subnet`) are
//! `kuryr_core::neutron`'s, re-exported from the crate root.

use kuryr_core::pairs::AddressPair;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// Query parameters, in order; keys may repeat (`id=a&id=b`).
pub type Query = Vec<(String, String)>;

/// Filter of `GET /v2.0/ports`. Every set field narrows the result; an empty filter lists all
/// ports visible to the project. All of it goes into ONE request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortFilter {
    /// Port IDs (`id=a&id=b…`, any of them).
    pub ids: Vec<String>,
    /// Network.
    pub network_id: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// `device_owner` (`compute:kuryr`).
    pub device_owner: Option<String>,
    /// `device_id`.
    pub device_id: Option<String>,
    /// Ports carrying ALL of these tags (`tags=a,b`; tags must not contain commas).
    pub tags: Vec<String>,
    /// Ports carrying ANY of these tags (`tags-any=a,b`).
    pub tags_any: Vec<String>,
    /// Ports carrying none of these tags (`not-tags=a,b`).
    pub not_tags: Vec<String>,
    /// `ACTIVE`, `DOWN`, …
    pub status: Option<String>,
    /// `binding:host_id`.
    pub binding_host_id: Option<String>,
    /// Port name.
    pub name: Option<String>,
    /// Ports with this fixed IP address (`fixed_ips=ip_address=…`).
    pub fixed_ip_address: Option<String>,
    /// Ports with a fixed IP on this subnet (`fixed_ips=subnet_id=…`).
    pub fixed_ip_subnet: Option<String>,
    /// Only these fields in the answer (`fields=id&fields=status`); empty: all.
    pub fields: Vec<String>,
}

impl PortFilter {
    /// Ports with these IDs.
    pub fn ids<I: IntoIterator<Item = S>, S: Into<String>>(ids: I) -> Self {
        PortFilter {
            ids: ids.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// Ports with all of these tags.
    pub fn tagged<I: IntoIterator<Item = S>, S: Into<String>>(tags: I) -> Self {
        PortFilter {
            tags: tags.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// The query parameters.
    pub fn query(&self) -> Query {
        let mut q = Query::new();
        for id in &self.ids {
            q.push(("id".into(), id.clone()));
        }
        push_opt(&mut q, "network_id", &self.network_id);
        push_opt(&mut q, "project_id", &self.project_id);
        push_opt(&mut q, "device_owner", &self.device_owner);
        push_opt(&mut q, "device_id", &self.device_id);
        push_opt(&mut q, "status", &self.status);
        push_opt(&mut q, "binding:host_id", &self.binding_host_id);
        push_opt(&mut q, "name", &self.name);
        if let Some(ip) = &self.fixed_ip_address {
            q.push(("fixed_ips".into(), format!("ip_address={ip}")));
        }
        if let Some(s) = &self.fixed_ip_subnet {
            q.push(("fixed_ips".into(), format!("subnet_id={s}")));
        }
        push_tags(&mut q, &self.tags, &self.tags_any, &self.not_tags);
        for f in &self.fields {
            q.push(("fields".into(), f.clone()));
        }
        q
    }
}

/// Filter of `GET /v2.0/networks` and `GET /v2.0/subnets`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceFilter {
    /// IDs (any of them).
    pub ids: Vec<String>,
    /// Name.
    pub name: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// Network (subnets only).
    pub network_id: Option<String>,
    /// Subnet pool (subnets only).
    pub subnetpool_id: Option<String>,
    /// All of these tags.
    pub tags: Vec<String>,
    /// Any of these tags.
    pub tags_any: Vec<String>,
}

impl ResourceFilter {
    /// Resources with all of these tags.
    pub fn tagged<I: IntoIterator<Item = S>, S: Into<String>>(tags: I) -> Self {
        ResourceFilter {
            tags: tags.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// The query parameters.
    pub fn query(&self) -> Query {
        let mut q = Query::new();
        for id in &self.ids {
            q.push(("id".into(), id.clone()));
        }
        push_opt(&mut q, "name", &self.name);
        push_opt(&mut q, "project_id", &self.project_id);
        push_opt(&mut q, "network_id", &self.network_id);
        push_opt(&mut q, "subnetpool_id", &self.subnetpool_id);
        push_tags(&mut q, &self.tags, &self.tags_any, &[]);
        q
    }
}

fn push_opt(q: &mut Query, key: &str, v: &Option<String>) {
    if let Some(v) = v {
        q.push((key.into(), v.clone()));
    }
}

fn push_tags(q: &mut Query, all: &[String], any: &[String], not: &[String]) {
    for (key, tags) in [("tags", all), ("tags-any", any), ("not-tags", not)] {
        if !tags.is_empty() {
            q.push((key.into(), tags.join(",")));
        }
    }
}

/// One port of a (bulk) create. `tags` go into the create body when Neutron has the
/// `tag-ports-during-bulk-creation` extension, else the client sets them right after creating.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortCreate {
    /// Network.
    pub network_id: String,
    /// Project (admin credentials creating for another project).
    pub project_id: Option<String>,
    /// Subnets to take one address from each (`fixed_ips: [{subnet_id}]`).
    pub subnet_ids: Vec<String>,
    /// Security groups; `None`: Neutron's default group.
    pub security_groups: Option<Vec<String>>,
    /// `device_owner` (`compute:kuryr`).
    pub device_owner: Option<String>,
    /// `device_id`.
    pub device_id: Option<String>,
    /// `binding:host_id`.
    pub binding_host_id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// `admin_state_up` (Neutron's default: true).
    pub admin_state_up: Option<bool>,
    /// `port_security_enabled` (Neutron's default: the network's, true).
    pub port_security_enabled: Option<bool>,
    /// Tags (upstream's `resource_tags` plus the cluster tag).
    pub tags: Vec<String>,
}

impl PortCreate {
    /// The port object of the create body; `with_tags` adds `tags`.
    pub fn to_json(&self, with_tags: bool) -> Value {
        let mut m = Map::new();
        m.insert("network_id".into(), json!(self.network_id));
        let mut opt = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        };
        opt("project_id", &self.project_id);
        opt("device_owner", &self.device_owner);
        opt("device_id", &self.device_id);
        opt("binding:host_id", &self.binding_host_id);
        opt("name", &self.name);
        opt("description", &self.description);
        if !self.subnet_ids.is_empty() {
            let ips: Vec<Value> = self
                .subnet_ids
                .iter()
                .map(|s| json!({ "subnet_id": s }))
                .collect();
            m.insert("fixed_ips".into(), Value::Array(ips));
        }
        if let Some(sgs) = &self.security_groups {
            m.insert("security_groups".into(), json!(sgs));
        }
        if let Some(up) = self.admin_state_up {
            m.insert("admin_state_up".into(), json!(up));
        }
        if let Some(ps) = self.port_security_enabled {
            m.insert("port_security_enabled".into(), json!(ps));
        }
        if with_tags && !self.tags.is_empty() {
            m.insert("tags".into(), json!(self.tags));
        }
        Value::Object(m)
    }
}

/// Body of `PUT /v2.0/ports/{id}`: only set fields are sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PortUpdate {
    /// New name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New `device_id` (`""` clears it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    /// New security groups (`[]` removes all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_groups: Option<Vec<String>>,
    /// New `binding:host_id`.
    #[serde(rename = "binding:host_id", skip_serializing_if = "Option::is_none")]
    pub binding_host_id: Option<String>,
    /// New description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// New `allowed_address_pairs` (the whole list; `[]` removes all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_address_pairs: Option<Vec<AddressPair>>,
    /// Apply only if the port's `revision_number` is still this (`If-Match`; a 412, i.e. a
    /// [`Conflict`](crate::Error::Conflict), otherwise). Not part of the body.
    #[serde(skip)]
    pub if_revision: Option<u64>,
}

impl PortUpdate {
    /// `{"port": {...}}`.
    pub fn to_json(&self) -> Value {
        json!({ "port": self })
    }
}

/// Body of `POST /v2.0/networks` (namespace subnet driver).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkCreate {
    /// Name (upstream: `ns/<namespace>-net`).
    pub name: String,
    /// Project.
    pub project_id: Option<String>,
    /// Description (upstream puts the comma-joined tags here for its GC).
    pub description: Option<String>,
    /// MTU.
    pub mtu: Option<u32>,
    /// Tags (set after creation on Neutron without `tag-creation`).
    pub tags: Vec<String>,
}

impl NetworkCreate {
    /// `{"network": {...}}`; `with_tags` adds `tags`.
    pub fn to_json(&self, with_tags: bool) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert("admin_state_up".into(), json!(true));
        if let Some(p) = &self.project_id {
            m.insert("project_id".into(), json!(p));
        }
        if let Some(d) = &self.description {
            m.insert("description".into(), json!(d));
        }
        if let Some(mtu) = self.mtu {
            m.insert("mtu".into(), json!(mtu));
        }
        if with_tags && !self.tags.is_empty() {
            m.insert("tags".into(), json!(self.tags));
        }
        json!({ "network": Value::Object(m) })
    }
}

/// Body of `POST /v2.0/subnets`: from a subnet pool (namespace driver) or an explicit CIDR.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubnetCreate {
    /// Network.
    pub network_id: String,
    /// Name.
    pub name: String,
    /// Project.
    pub project_id: Option<String>,
    /// Subnet pool to allocate the CIDR from.
    pub subnetpool_id: Option<String>,
    /// Prefix length to take from the pool (`None`: the pool's default).
    pub prefixlen: Option<u8>,
    /// Explicit CIDR (without a pool).
    pub cidr: Option<String>,
    /// 4 or 6 (default 4).
    pub ip_version: Option<u8>,
    /// `enable_dhcp` (`None`: Neutron's default, true). Kuryr's namespace subnets have it off.
    pub enable_dhcp: Option<bool>,
    /// Description.
    pub description: Option<String>,
    /// Tags (set after creation on Neutron without `tag-creation`).
    pub tags: Vec<String>,
}

impl SubnetCreate {
    /// `{"subnet": {...}}`; `with_tags` adds `tags`.
    pub fn to_json(&self, with_tags: bool) -> Value {
        let mut m = Map::new();
        m.insert("network_id".into(), json!(self.network_id));
        m.insert("name".into(), json!(self.name));
        m.insert("ip_version".into(), json!(self.ip_version.unwrap_or(4)));
        if let Some(dhcp) = self.enable_dhcp {
            m.insert("enable_dhcp".into(), json!(dhcp));
        }
        let opt = |m: &mut Map<String, Value>, k: &str, v: &Option<String>| {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        };
        opt(&mut m, "project_id", &self.project_id);
        opt(&mut m, "subnetpool_id", &self.subnetpool_id);
        opt(&mut m, "cidr", &self.cidr);
        opt(&mut m, "description", &self.description);
        if let Some(p) = self.prefixlen {
            m.insert("prefixlen".into(), json!(p));
        }
        if with_tags && !self.tags.is_empty() {
            m.insert("tags".into(), json!(self.tags));
        }
        json!({ "subnet": Value::Object(m) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_filter_query_is_one_request_with_repeated_ids() {
        let f = PortFilter {
            ids: vec!["a".into(), "b".into()],
            device_owner: Some("compute:kuryr".into()),
            tags: vec!["kuryr".into(), "cluster=c".into()],
            tags_any: vec!["x".into()],
            binding_host_id: Some("vm".into()),
            fields: vec!["id".into(), "status".into()],
            ..Default::default()
        };
        let q = f.query();
        let s: Vec<String> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            s,
            [
                "id=a",
                "id=b",
                "device_owner=compute:kuryr",
                "binding:host_id=vm",
                "tags=kuryr,cluster=c",
                "tags-any=x",
                "fields=id",
                "fields=status"
            ]
        );
        assert!(PortFilter::default().query().is_empty());
    }

    #[test]
    fn create_bodies() {
        let p = PortCreate {
            network_id: "n".into(),
            subnet_ids: vec!["s".into()],
            security_groups: Some(vec!["sg".into()]),
            binding_host_id: Some("vm".into()),
            tags: vec!["t".into()],
            ..Default::default()
        };
        let v = p.to_json(true);
        assert_eq!(v["fixed_ips"][0]["subnet_id"], "s");
        assert_eq!(v["binding:host_id"], "vm");
        assert_eq!(v["tags"], json!(["t"]));
        assert!(p.to_json(false).get("tags").is_none());
        assert!(v.get("name").is_none());
        let u = PortUpdate {
            name: Some("ns/pod".into()),
            binding_host_id: Some("h".into()),
            ..Default::default()
        };
        assert_eq!(
            u.to_json(),
            json!({"port": {"name": "ns/pod", "binding:host_id": "h"}})
        );
        let s = SubnetCreate {
            network_id: "n".into(),
            name: "ns/x-subnet".into(),
            subnetpool_id: Some("pool".into()),
            ..Default::default()
        };
        let v = s.to_json(true);
        assert_eq!(v["subnet"]["ip_version"], 4);
        assert_eq!(v["subnet"]["subnetpool_id"], "pool");
        assert!(v["subnet"].get("cidr").is_none());
        let n = NetworkCreate {
            name: "ns/x-net".into(),
            tags: vec!["t".into()],
            ..Default::default()
        };
        assert!(n.to_json(false)["network"].get("tags").is_none());
        assert_eq!(n.to_json(true)["network"]["tags"], json!(["t"]));
    }
}
