//! Neutron trunks (nested mode: a node VM's port is a trunk's parent, each pod a VLAN subport):
//! the response model and the bodies of `POST /v2.0/trunks` and `PUT
//! /v2.0/trunks/{id}/add_subports|remove_subports`. Written by hand: openstack_sdk has no
//! trunk calls (`../shared/notes/rust-deps.md`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A subport of a trunk.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct SubPort {
    /// Its Neutron port.
    pub port_id: String,
    /// `vlan` (or `inherit`).
    #[serde(default = "vlan")]
    pub segmentation_type: String,
    /// The VLAN ID.
    #[serde(default)]
    pub segmentation_id: u16,
}

fn vlan() -> String {
    "vlan".into()
}

impl SubPort {
    /// A VLAN subport.
    pub fn vlan(port_id: impl Into<String>, segmentation_id: u16) -> Self {
        Self {
            port_id: port_id.into(),
            segmentation_type: vlan(),
            segmentation_id,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "port_id": self.port_id,
            "segmentation_type": self.segmentation_type,
            "segmentation_id": self.segmentation_id,
        })
    }
}

/// A trunk as Neutron returns it (the fields kuryr-rs reads).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct Trunk {
    /// ID.
    pub id: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// The parent port.
    pub port_id: String,
    /// `ACTIVE`, `DOWN`, `BUILD`, `DEGRADED`, `ERROR`.
    #[serde(default)]
    pub status: String,
    /// Project.
    #[serde(default)]
    pub project_id: String,
    /// Its subports.
    #[serde(default)]
    pub sub_ports: Vec<SubPort>,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// Body of `POST /v2.0/trunks`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrunkCreate {
    /// The parent port (the VM's).
    pub port_id: String,
    /// Name.
    pub name: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// Subports to start with.
    pub sub_ports: Vec<SubPort>,
    /// Tags (set after creation on Neutron without `tag-creation`).
    pub tags: Vec<String>,
}

impl TrunkCreate {
    /// `{"trunk": {...}}`; `with_tags` adds `tags`.
    pub fn to_json(&self, with_tags: bool) -> Value {
        let mut m = Map::new();
        m.insert("port_id".into(), json!(self.port_id));
        if let Some(n) = &self.name {
            m.insert("name".into(), json!(n));
        }
        if let Some(p) = &self.project_id {
            m.insert("project_id".into(), json!(p));
        }
        if !self.sub_ports.is_empty() {
            m.insert("sub_ports".into(), subports_json(&self.sub_ports));
        }
        if with_tags && !self.tags.is_empty() {
            m.insert("tags".into(), json!(self.tags));
        }
        json!({ "trunk": Value::Object(m) })
    }
}

fn subports_json(subs: &[SubPort]) -> Value {
    Value::Array(subs.iter().map(SubPort::to_json).collect())
}

/// Body of `PUT /v2.0/trunks/{id}/add_subports`: all of them in one request.
pub fn add_subports_body(subs: &[SubPort]) -> Value {
    json!({ "sub_ports": subports_json(subs) })
}

/// Body of `PUT /v2.0/trunks/{id}/remove_subports`.
pub fn remove_subports_body(port_ids: &[String]) -> Value {
    json!({ "sub_ports": port_ids.iter().map(|p| json!({"port_id": p})).collect::<Vec<_>>() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_neutrons() {
        let c = TrunkCreate {
            port_id: "parent".into(),
            name: Some("t".into()),
            tags: vec!["k".into()],
            ..TrunkCreate::default()
        };
        assert_eq!(
            c.to_json(true),
            json!({"trunk": {"port_id": "parent", "name": "t", "tags": ["k"]}})
        );
        assert_eq!(
            c.to_json(false),
            json!({"trunk": {"port_id": "parent", "name": "t"}})
        );
        assert_eq!(
            add_subports_body(&[SubPort::vlan("p1", 5)]),
            json!({"sub_ports": [{"port_id": "p1", "segmentation_type": "vlan", "segmentation_id": 5}]})
        );
        assert_eq!(
            remove_subports_body(&["p1".into()]),
            json!({"sub_ports": [{"port_id": "p1"}]})
        );
        let t: Trunk = serde_json::from_value(json!({"id": "t", "port_id": "p", "status": "ACTIVE",
            "sub_ports": [{"port_id": "s", "segmentation_type": "vlan", "segmentation_id": 101}]}))
        .unwrap();
        assert_eq!(t.sub_ports, vec![SubPort::vlan("s", 101)]);
    }
}
