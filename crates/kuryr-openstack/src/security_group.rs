//! Neutron security groups and their rules (what NetworkPolicies become): response models,
//! create bodies and list filters.

use crate::model::Query;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A security group as Neutron returns it (the fields kuryr-rs reads; its rules are listed
/// separately, [`SecurityGroupRuleFilter`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct SecurityGroup {
    /// ID.
    pub id: String,
    /// Name (upstream: `sg/<namespace>-<policy>`).
    #[serde(default)]
    pub name: String,
    /// Description.
    #[serde(default)]
    pub description: String,
    /// Project.
    #[serde(default)]
    pub project_id: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A security-group rule as Neutron returns it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct SecurityGroupRule {
    /// ID.
    pub id: String,
    /// The group it belongs to.
    pub security_group_id: String,
    /// `ingress` / `egress`.
    pub direction: String,
    /// `IPv4` / `IPv6`.
    pub ethertype: String,
    /// `tcp`, `udp`, `sctp`, … (`None`: any).
    #[serde(default)]
    pub protocol: Option<String>,
    /// First port.
    #[serde(default)]
    pub port_range_min: Option<u16>,
    /// Last port.
    #[serde(default)]
    pub port_range_max: Option<u16>,
    /// Remote CIDR.
    #[serde(default)]
    pub remote_ip_prefix: Option<String>,
    /// Remote group (kuryr-rs writes none; other writers' rules are read as they are).
    #[serde(default)]
    pub remote_group_id: Option<String>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
}

/// Body of `POST /v2.0/security-groups`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityGroupCreate {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Project.
    pub project_id: Option<String>,
    /// Tags (set after creation on Neutron without `tag-creation`).
    pub tags: Vec<String>,
}

impl SecurityGroupCreate {
    /// `{"security_group": {...}}`; `with_tags` adds `tags`.
    pub fn to_json(&self, with_tags: bool) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert("description".into(), json!(self.description));
        if let Some(p) = &self.project_id {
            m.insert("project_id".into(), json!(p));
        }
        if with_tags && !self.tags.is_empty() {
            m.insert("tags".into(), json!(self.tags));
        }
        json!({ "security_group": Value::Object(m) })
    }
}

/// One rule to create (an element of the bulk `POST /v2.0/security-group-rules`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecurityGroupRuleCreate {
    /// The group.
    pub security_group_id: String,
    /// `ingress` / `egress`.
    pub direction: String,
    /// `IPv4` / `IPv6`.
    pub ethertype: String,
    /// Protocol (`None`: any).
    pub protocol: Option<String>,
    /// First port.
    pub port_range_min: Option<u16>,
    /// Last port.
    pub port_range_max: Option<u16>,
    /// Remote CIDR.
    pub remote_ip_prefix: Option<String>,
    /// Description.
    pub description: Option<String>,
}

impl SecurityGroupRuleCreate {
    /// The rule object (without the `security_group_rule` wrapper).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("security_group_id".into(), json!(self.security_group_id));
        m.insert("direction".into(), json!(self.direction));
        m.insert("ethertype".into(), json!(self.ethertype));
        for (k, v) in [
            ("protocol", &self.protocol),
            ("remote_ip_prefix", &self.remote_ip_prefix),
            ("description", &self.description),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        for (k, v) in [
            ("port_range_min", self.port_range_min),
            ("port_range_max", self.port_range_max),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        Value::Object(m)
    }
}

/// Filter of `GET /v2.0/security-groups`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityGroupFilter {
    /// IDs (any of them).
    pub ids: Vec<String>,
    /// This name.
    pub name: Option<String>,
    /// In this project.
    pub project_id: Option<String>,
    /// All of these tags.
    pub tags: Vec<String>,
}

impl SecurityGroupFilter {
    /// The query parameters.
    pub fn query(&self) -> Query {
        let mut q: Query = self.ids.iter().map(|id| ("id".to_string(), id.clone())).collect();
        for (k, v) in [("name", &self.name), ("project_id", &self.project_id)] {
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

/// Filter of `GET /v2.0/security-group-rules`: the rules of any of these groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityGroupRuleFilter {
    /// Group IDs.
    pub security_group_ids: Vec<String>,
}

impl SecurityGroupRuleFilter {
    /// The query parameters.
    pub fn query(&self) -> Query {
        self.security_group_ids
            .iter()
            .map(|id| ("security_group_id".to_string(), id.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_body_leaves_out_what_is_unset() {
        let r = SecurityGroupRuleCreate {
            security_group_id: "sg".into(),
            direction: "ingress".into(),
            ethertype: "IPv4".into(),
            protocol: Some("tcp".into()),
            port_range_min: Some(80),
            port_range_max: Some(81),
            ..Default::default()
        };
        assert_eq!(
            r.to_json(),
            json!({"security_group_id": "sg", "direction": "ingress", "ethertype": "IPv4",
                   "protocol": "tcp", "port_range_min": 80, "port_range_max": 81})
        );
    }

    #[test]
    fn decodes_an_any_protocol_rule() {
        let r: SecurityGroupRule = serde_json::from_value(json!({
            "id": "r", "security_group_id": "sg", "direction": "egress", "ethertype": "IPv6",
            "protocol": null, "port_range_min": null, "port_range_max": null,
            "remote_ip_prefix": null, "remote_group_id": null, "description": ""
        }))
        .expect("decodes");
        assert_eq!(
            (r.protocol, r.port_range_min, r.remote_ip_prefix),
            (None, None, None)
        );
    }

    #[test]
    fn filters() {
        let f = SecurityGroupFilter {
            name: Some("sg/x-np".into()),
            tags: vec!["k".into()],
            ..Default::default()
        };
        assert_eq!(
            f.query(),
            vec![
                ("name".to_string(), "sg/x-np".to_string()),
                ("tags".to_string(), "k".to_string())
            ]
        );
        let f = SecurityGroupRuleFilter {
            security_group_ids: vec!["a".into(), "b".into()],
        };
        assert_eq!(f.query().len(), 2);
    }
}
