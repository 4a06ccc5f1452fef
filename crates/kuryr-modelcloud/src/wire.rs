//! Neutron's wire format read back into `kuryr-openstack`'s request types: list filters from
//! query parameters and create/update bodies from JSON — the inverse of the client's
//! `query()`/`to_json()`. A body that is not what Neutron documents is a [`WireError`] naming the
//! field, answered as Neutron answers it (400 `HTTPBadRequest`).

use kuryr_core::pairs::AddressPair;
use kuryr_openstack::{
    NetworkCreate, PortCreate, PortFilter, PortUpdate, ResourceFilter, SubPort, SubnetCreate, TrunkCreate,
    security_group::{
        SecurityGroupCreate, SecurityGroupFilter, SecurityGroupRuleCreate, SecurityGroupRuleFilter,
    },
};
use serde_json::Value;

/// A request the model cannot read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct WireError(pub String);

type Result<T> = std::result::Result<T, WireError>;

/// Query parameters in order (keys repeat).
pub type Query = [(String, String)];

fn all<'a>(q: &'a Query, key: &'a str) -> impl Iterator<Item = &'a String> + 'a {
    q.iter().filter(move |(k, _)| k == key).map(|(_, v)| v)
}

fn one(q: &Query, key: &str) -> Option<String> {
    all(q, key).next().cloned()
}

fn tags(q: &Query, key: &str) -> Vec<String> {
    all(q, key)
        .flat_map(|v| v.split(','))
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

/// `GET /v2.0/ports`.
pub fn port_filter(q: &Query) -> PortFilter {
    let mut f = PortFilter {
        ids: all(q, "id").cloned().collect(),
        network_id: one(q, "network_id"),
        project_id: one(q, "project_id").or_else(|| one(q, "tenant_id")),
        device_owner: one(q, "device_owner"),
        device_id: one(q, "device_id"),
        tags: tags(q, "tags"),
        tags_any: tags(q, "tags-any"),
        not_tags: tags(q, "not-tags"),
        status: one(q, "status"),
        binding_host_id: one(q, "binding:host_id"),
        name: one(q, "name"),
        fields: all(q, "fields").cloned().collect(),
        ..Default::default()
    };
    for v in all(q, "fixed_ips") {
        if let Some(ip) = v.strip_prefix("ip_address=") {
            f.fixed_ip_address = Some(ip.to_string());
        } else if let Some(s) = v.strip_prefix("subnet_id=") {
            f.fixed_ip_subnet = Some(s.to_string());
        }
    }
    f
}

/// `GET /v2.0/networks|subnets|trunks`.
pub fn resource_filter(q: &Query) -> ResourceFilter {
    ResourceFilter {
        ids: all(q, "id").cloned().collect(),
        name: one(q, "name"),
        project_id: one(q, "project_id").or_else(|| one(q, "tenant_id")),
        network_id: one(q, "network_id"),
        subnetpool_id: one(q, "subnetpool_id"),
        tags: tags(q, "tags"),
        tags_any: tags(q, "tags-any"),
    }
}

/// `GET /v2.0/security-groups`.
pub fn sg_filter(q: &Query) -> SecurityGroupFilter {
    SecurityGroupFilter {
        ids: all(q, "id").cloned().collect(),
        name: one(q, "name"),
        project_id: one(q, "project_id").or_else(|| one(q, "tenant_id")),
        tags: tags(q, "tags"),
    }
}

/// `GET /v2.0/security-group-rules`.
pub fn sg_rule_filter(q: &Query) -> SecurityGroupRuleFilter {
    SecurityGroupRuleFilter {
        security_group_ids: all(q, "security_group_id").cloned().collect(),
    }
}

/// `{"<key>": {...}}` → the inner object.
pub fn unwrap<'a>(body: &'a Value, key: &str) -> Result<&'a Value> {
    body.get(key).filter(|v| v.is_object()).ok_or_else(|| {
        WireError(format!(
            "Resource body required: no '{key}' object in the request body"
        ))
    })
}

fn opt_str(v: &Value, key: &str) -> Result<Option<String>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(WireError(format!(
            "Invalid input for {key}: '{other}' is not a string"
        ))),
    }
}

fn req_str(v: &Value, key: &str) -> Result<String> {
    opt_str(v, key)?.ok_or_else(|| {
        WireError(format!(
            "Failed to parse request. Required attribute '{key}' not specified"
        ))
    })
}

fn opt_bool(v: &Value, key: &str) -> Result<Option<bool>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(WireError(format!(
            "Invalid input for {key}: '{other}' is not a boolean"
        ))),
    }
}

fn str_list(v: &Value, key: &str) -> Result<Option<Vec<String>>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(String::from)
                    .ok_or_else(|| WireError(format!("Invalid input for {key}: '{x}' is not a string")))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(other) => Err(WireError(format!(
            "Invalid input for {key}: '{other}' is not a list"
        ))),
    }
}

fn opt_u16(v: &Value, key: &str) -> Result<Option<u16>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| WireError(format!("Invalid input for {key}: '{x}' is not a port number"))),
    }
}

/// One port of `POST /v2.0/ports` (`{"port": …}` or an item of `{"ports": […]}`).
pub fn port_create(p: &Value) -> Result<PortCreate> {
    if !p.is_object() {
        return Err(WireError(format!(
            "Invalid input for ports: '{p}' is not an object"
        )));
    }
    let subnet_ids = match p.get("fixed_ips") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|ip| {
                ip.get("subnet_id")
                    .and_then(Value::as_str)
                    .map(String::from)
                    .ok_or_else(|| WireError(format!("Invalid input for fixed_ips: '{ip}' names no subnet_id (the model allocates by subnet only)")))
            })
            .collect::<Result<_>>()?,
        Some(other) => return Err(WireError(format!("Invalid input for fixed_ips: '{other}' is not a list"))),
    };
    Ok(PortCreate {
        network_id: req_str(p, "network_id")?,
        project_id: opt_str(p, "project_id")?.or(opt_str(p, "tenant_id")?),
        subnet_ids,
        security_groups: str_list(p, "security_groups")?,
        device_owner: opt_str(p, "device_owner")?,
        device_id: opt_str(p, "device_id")?,
        binding_host_id: opt_str(p, "binding:host_id")?,
        name: opt_str(p, "name")?,
        description: opt_str(p, "description")?,
        admin_state_up: opt_bool(p, "admin_state_up")?,
        port_security_enabled: opt_bool(p, "port_security_enabled")?,
        tags: str_list(p, "tags")?.unwrap_or_default(),
    })
}

/// `PUT /v2.0/ports/{id}` with its `If-Match: revision_number=N` header.
pub fn port_update(body: &Value, if_match: Option<&str>) -> Result<PortUpdate> {
    let p = unwrap(body, "port")?;
    let pairs = match p.get("allowed_address_pairs") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            serde_json::from_value::<Vec<AddressPair>>(v.clone())
                .map_err(|e| WireError(format!("Invalid input for allowed_address_pairs: {e}")))?,
        ),
    };
    let if_revision = match if_match {
        None => None,
        Some(h) => Some(
            h.trim()
                .strip_prefix("revision_number=")
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| {
                    WireError(format!(
                        "Invalid If-Match header '{h}': expected revision_number=N"
                    ))
                })?,
        ),
    };
    Ok(PortUpdate {
        name: opt_str(p, "name")?,
        device_id: opt_str(p, "device_id")?,
        security_groups: str_list(p, "security_groups")?,
        binding_host_id: opt_str(p, "binding:host_id")?,
        description: opt_str(p, "description")?,
        allowed_address_pairs: pairs,
        if_revision,
    })
}

/// `PUT /v2.0/ports/{id}/tags`.
pub fn tags_body(body: &Value) -> Result<Vec<String>> {
    str_list(body, "tags")?
        .ok_or_else(|| WireError("Invalid input: no 'tags' list in the request body".into()))
}

/// `POST /v2.0/networks`.
pub fn network_create(body: &Value) -> Result<NetworkCreate> {
    let n = unwrap(body, "network")?;
    Ok(NetworkCreate {
        name: opt_str(n, "name")?.unwrap_or_default(),
        project_id: opt_str(n, "project_id")?,
        description: opt_str(n, "description")?,
        mtu: n
            .get("mtu")
            .and_then(Value::as_u64)
            .and_then(|m| u32::try_from(m).ok()),
        tags: str_list(n, "tags")?.unwrap_or_default(),
    })
}

/// `POST /v2.0/subnets`.
pub fn subnet_create(body: &Value) -> Result<SubnetCreate> {
    let s = unwrap(body, "subnet")?;
    let small = |key: &str| -> Result<Option<u8>> {
        match s.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(x) => x
                .as_u64()
                .and_then(|n| u8::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| WireError(format!("Invalid input for {key}: '{x}'"))),
        }
    };
    Ok(SubnetCreate {
        network_id: req_str(s, "network_id")?,
        name: opt_str(s, "name")?.unwrap_or_default(),
        project_id: opt_str(s, "project_id")?,
        subnetpool_id: opt_str(s, "subnetpool_id")?,
        prefixlen: small("prefixlen")?,
        cidr: opt_str(s, "cidr")?,
        ip_version: small("ip_version")?,
        enable_dhcp: opt_bool(s, "enable_dhcp")?,
        description: opt_str(s, "description")?,
        tags: str_list(s, "tags")?.unwrap_or_default(),
    })
}

/// The `sub_ports` list of a trunk body.
pub fn subports(body: &Value) -> Result<Vec<SubPort>> {
    match body.get("sub_ports") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| WireError(format!("Invalid input for sub_ports: {e}"))),
    }
}

/// The port IDs of `PUT /v2.0/trunks/{id}/remove_subports`.
pub fn subport_ids(body: &Value) -> Result<Vec<String>> {
    subports_ids_of(body.get("sub_ports"))
}

fn subports_ids_of(v: Option<&Value>) -> Result<Vec<String>> {
    let Some(Value::Array(a)) = v else {
        return Err(WireError("Invalid input for sub_ports: not a list".into()));
    };
    a.iter()
        .map(|s| {
            s.get("port_id")
                .and_then(Value::as_str)
                .map(String::from)
                .ok_or_else(|| WireError(format!("Invalid input for sub_ports: '{s}' has no port_id")))
        })
        .collect()
}

/// `POST /v2.0/trunks`.
pub fn trunk_create(body: &Value) -> Result<TrunkCreate> {
    let t = unwrap(body, "trunk")?;
    Ok(TrunkCreate {
        port_id: req_str(t, "port_id")?,
        name: opt_str(t, "name")?,
        project_id: opt_str(t, "project_id")?,
        sub_ports: subports(t)?,
        tags: str_list(t, "tags")?.unwrap_or_default(),
    })
}

/// `POST /v2.0/security-groups`.
pub fn sg_create(body: &Value) -> Result<SecurityGroupCreate> {
    let g = unwrap(body, "security_group")?;
    Ok(SecurityGroupCreate {
        name: opt_str(g, "name")?.unwrap_or_default(),
        description: opt_str(g, "description")?.unwrap_or_default(),
        project_id: opt_str(g, "project_id")?,
        tags: str_list(g, "tags")?.unwrap_or_default(),
    })
}

/// `POST /v2.0/security-group-rules`, one rule or a bulk (`security_group_rules`).
pub fn sg_rules_create(body: &Value) -> Result<Vec<SecurityGroupRuleCreate>> {
    let items: Vec<&Value> = match (body.get("security_group_rules"), body.get("security_group_rule")) {
        (Some(Value::Array(a)), _) => a.iter().collect(),
        (_, Some(r)) if r.is_object() => vec![r],
        _ => {
            return Err(WireError(
                "Resource body required: no 'security_group_rule' object or 'security_group_rules' list"
                    .into(),
            ));
        }
    };
    items
        .into_iter()
        .map(|r| {
            Ok(SecurityGroupRuleCreate {
                security_group_id: req_str(r, "security_group_id")?,
                direction: req_str(r, "direction")?,
                ethertype: opt_str(r, "ethertype")?.unwrap_or_else(|| "IPv4".into()),
                protocol: opt_str(r, "protocol")?,
                port_range_min: opt_u16(r, "port_range_min")?,
                port_range_max: opt_u16(r, "port_range_max")?,
                remote_ip_prefix: opt_str(r, "remote_ip_prefix")?,
                description: opt_str(r, "description")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(q: Vec<(String, String)>) -> Vec<(String, String)> {
        q
    }

    #[test]
    fn filters_read_back_what_the_client_writes() {
        let f = PortFilter {
            ids: vec!["a".into(), "b".into()],
            device_owner: Some("compute:kuryr".into()),
            tags: vec!["kuryr".into(), "cluster=c".into()],
            not_tags: vec!["x".into()],
            binding_host_id: Some("vm".into()),
            fixed_ip_subnet: Some("s".into()),
            fields: vec!["id".into(), "status".into()],
            ..Default::default()
        };
        assert_eq!(port_filter(&pairs(f.query())), f);
        let r = ResourceFilter {
            ids: vec!["n".into()],
            tags: vec!["t".into()],
            network_id: Some("net".into()),
            ..Default::default()
        };
        assert_eq!(resource_filter(&r.query()), r);
    }

    #[test]
    fn bodies_read_back_what_the_client_writes() {
        let p = PortCreate {
            network_id: "n".into(),
            subnet_ids: vec!["s".into()],
            security_groups: Some(vec!["sg".into()]),
            binding_host_id: Some("vm".into()),
            device_owner: Some("compute:kuryr".into()),
            admin_state_up: Some(true),
            tags: vec!["t".into()],
            ..Default::default()
        };
        assert_eq!(port_create(&p.to_json(true)), Ok(p));
        let u = PortUpdate {
            name: Some("ns/pod".into()),
            device_id: Some(String::new()),
            if_revision: Some(7),
            ..Default::default()
        };
        assert_eq!(port_update(&u.to_json(), Some("revision_number=7")), Ok(u));
        let s = SubnetCreate {
            network_id: "n".into(),
            name: "x".into(),
            subnetpool_id: Some("pool".into()),
            ip_version: Some(4),
            enable_dhcp: Some(false),
            ..Default::default()
        };
        assert_eq!(subnet_create(&s.to_json(true)), Ok(s));
        let t = TrunkCreate {
            port_id: "p".into(),
            sub_ports: vec![SubPort::vlan("s", 101)],
            ..Default::default()
        };
        assert_eq!(trunk_create(&t.to_json(false)), Ok(t));
        let rule = SecurityGroupRuleCreate {
            security_group_id: "g".into(),
            direction: "ingress".into(),
            ethertype: "IPv4".into(),
            protocol: Some("tcp".into()),
            port_range_min: Some(80),
            port_range_max: Some(80),
            ..Default::default()
        };
        let bulk = json!({"security_group_rules": [rule.to_json(), rule.to_json()]});
        assert_eq!(sg_rules_create(&bulk), Ok(vec![rule.clone(), rule]));
    }

    #[test]
    fn bad_bodies_name_what_is_wrong() {
        let e = port_create(&json!({"name": "x"})).expect_err("no network");
        assert!(e.0.contains("network_id"), "{e}");
        let e = port_update(&json!({"port": {"name": 3}}), None).expect_err("not a string");
        assert!(e.0.contains("name"), "{e}");
        let e = port_update(&json!({"port": {}}), Some("etag")).expect_err("bad header");
        assert!(e.0.contains("If-Match"), "{e}");
        let e = network_create(&json!([])).expect_err("no wrapper");
        assert!(e.0.contains("network"), "{e}");
        let e = sg_rules_create(&json!({"security_group_rules": [{"direction": "ingress"}]}))
            .expect_err("no group");
        assert!(e.0.contains("security_group_id"), "{e}");
    }
}
