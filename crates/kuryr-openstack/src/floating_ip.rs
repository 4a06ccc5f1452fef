//! Neutron floating IPs (the public addresses of `type: LoadBalancer` Services): the response
//! model, the create body and the list filter.

use crate::model::Query;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A floating IP as Neutron returns it (the fields kuryr-rs reads).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct FloatingIp {
    /// ID.
    pub id: String,
    /// The public address.
    pub floating_ip_address: String,
    /// The external network it belongs to.
    #[serde(default)]
    pub floating_network_id: String,
    /// The port it is associated with (`None`: free).
    #[serde(default)]
    pub port_id: Option<String>,
    /// The fixed IP it maps to.
    #[serde(default)]
    pub fixed_ip_address: Option<String>,
    /// Project.
    #[serde(default)]
    pub project_id: String,
    /// Description (upstream Kuryr writes `kuryr_lb` on the ones it allocates).
    #[serde(default)]
    pub description: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// `ACTIVE`, `DOWN`, `ERROR`.
    #[serde(default)]
    pub status: String,
    /// Creation time (RFC 3339), when Neutron reports it.
    #[serde(default)]
    pub created_at: Option<String>,
}

/// Body of `POST /v2.0/floatingips`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FloatingIpCreate {
    /// External network (`[neutron_defaults] external_svc_net`).
    pub floating_network_id: String,
    /// Subnet of it to take the address from (`external_svc_subnet`).
    pub subnet_id: Option<String>,
    /// Associate with this port at once (one request instead of two).
    pub port_id: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// Tags (set after creation on Neutron without `tag-creation`).
    pub tags: Vec<String>,
}

impl FloatingIpCreate {
    /// `{"floatingip": {...}}`; `with_tags` adds `tags`.
    pub fn to_json(&self, with_tags: bool) -> Value {
        let mut m = Map::new();
        m.insert("floating_network_id".into(), json!(self.floating_network_id));
        for (k, v) in [
            ("subnet_id", &self.subnet_id),
            ("port_id", &self.port_id),
            ("project_id", &self.project_id),
            ("description", &self.description),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        if with_tags && !self.tags.is_empty() {
            m.insert("tags".into(), json!(self.tags));
        }
        json!({ "floatingip": Value::Object(m) })
    }
}

/// Filter of `GET /v2.0/floatingips`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FloatingIpFilter {
    /// IDs (any of them).
    pub ids: Vec<String>,
    /// Associated with this port.
    pub port_id: Option<String>,
    /// This address.
    pub floating_ip_address: Option<String>,
    /// On this external network.
    pub floating_network_id: Option<String>,
    /// All of these tags.
    pub tags: Vec<String>,
}

impl FloatingIpFilter {
    /// The query parameters.
    pub fn query(&self) -> Query {
        let mut q = Query::new();
        for id in &self.ids {
            q.push(("id".into(), id.clone()));
        }
        for (k, v) in [
            ("port_id", &self.port_id),
            ("floating_ip_address", &self.floating_ip_address),
            ("floating_network_id", &self.floating_network_id),
        ] {
            if let Some(v) = v {
                q.push((k.into(), v.clone()));
            }
        }
        if !self.tags.is_empty() {
            q.push(("tags".into(), self.tags.join(",")));
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_body_carries_only_what_is_set() {
        let c = FloatingIpCreate {
            floating_network_id: "ext".into(),
            port_id: Some("vip".into()),
            tags: vec!["k8s".into()],
            ..Default::default()
        };
        assert_eq!(
            c.to_json(true),
            json!({"floatingip": {"floating_network_id": "ext", "port_id": "vip", "tags": ["k8s"]}})
        );
        assert_eq!(
            c.to_json(false),
            json!({"floatingip": {"floating_network_id": "ext", "port_id": "vip"}})
        );
    }

    #[test]
    fn filter_query() {
        let f = FloatingIpFilter {
            floating_ip_address: Some("172.24.4.10".into()),
            tags: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        assert_eq!(
            f.query(),
            vec![
                ("floating_ip_address".to_string(), "172.24.4.10".to_string()),
                ("tags".to_string(), "a,b".to_string())
            ]
        );
    }

    #[test]
    fn decodes_a_free_floating_ip() {
        let f: FloatingIp = serde_json::from_value(json!({
            "id": "f", "floating_ip_address": "172.24.4.10", "port_id": null,
            "floating_network_id": "ext", "project_id": "p", "tags": []
        }))
        .expect("decodes");
        assert_eq!(f.port_id, None);
        assert_eq!(f.floating_ip_address, "172.24.4.10");
    }
}
