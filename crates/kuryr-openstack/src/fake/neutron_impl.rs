//! The fake's [`Neutron`] operations: each one runs under the state lock through
//! `FakeNeutron::run` (call counting, injected faults, observation).

use super::*;
use crate::security_group::{
    SecurityGroup, SecurityGroupCreate, SecurityGroupFilter, SecurityGroupRule, SecurityGroupRuleCreate,
    SecurityGroupRuleFilter,
};
use crate::trunk::{SubPort, Trunk, TrunkCreate};

/// Neutron's default `max_allowed_address_pair`.
pub const MAX_ALLOWED_ADDRESS_PAIRS: usize = 10;

fn create_port(st: &mut State, op: &'static str, req: &PortCreate) -> Result<Port> {
    let net = st
        .networks
        .get(&req.network_id)
        .cloned()
        .ok_or_else(|| not_found(op, "NetworkNotFound", &req.network_id))?;
    let subnet_ids: Vec<String> = if req.subnet_ids.is_empty() {
        st.subnets
            .values()
            .find(|s| s.network_id == net.id)
            .map(|s| vec![s.id.clone()])
            .unwrap_or_default()
    } else {
        req.subnet_ids.clone()
    };
    let mut fixed_ips = Vec::new();
    for sid in &subnet_ids {
        let subnet = st
            .subnets
            .get(sid)
            .ok_or_else(|| not_found(op, "SubnetNotFound", sid))?;
        if subnet.network_id != net.id {
            return Err(bad_request(
                op,
                format!("subnet {sid} is not on network {}", net.id),
            ));
        }
        let Some(cidr) = Cidr::parse(&subnet.cidr) else {
            continue;
        };
        // Amortized O(1): the subnet's used set and a cursor that moves past each allocation.
        let gw = subnet.gateway_ip.as_deref();
        let (used, cursor) = st.ipam.entry(sid.clone()).or_default();
        let ip = cidr
            .next_free_from(gw, used, *cursor)
            .ok_or_else(|| Error::Conflict {
                op,
                kind: "IpAddressGenerationFailure".into(),
                message: format!("No more IP addresses available on network {}.", net.id),
            })?;
        *cursor = u32::from(ip).wrapping_sub(cidr.net);
        fixed_ips.push(FixedIp {
            subnet_id: sid.clone(),
            ip_address: ip.to_string(),
        });
    }
    let secured = req.port_security_enabled.unwrap_or(true);
    if !secured && req.security_groups.as_ref().is_some_and(|g| !g.is_empty()) {
        return Err(Error::Conflict {
            op,
            kind: "PortSecurityAndIPRequiredForSecurityGroups".into(),
            message: "Port security must be enabled and port must have an IP address in order to use security groups."
                .into(),
        });
    }
    let id = st.new_id();
    let n = st.next_id;
    let host = req.binding_host_id.clone().unwrap_or_default();
    let project = req.project_id.clone().unwrap_or_else(|| net.project_id.clone());
    let port = Port {
        id: id.clone(),
        name: req.name.clone().unwrap_or_default(),
        network_id: net.id.clone(),
        project_id: project.clone(),
        tenant_id: project,
        mac_address: format!(
            "fa:16:3e:{:02x}:{:02x}:{:02x}",
            (n >> 16) & 0xff,
            (n >> 8) & 0xff,
            n & 0xff
        ),
        fixed_ips,
        security_groups: match (&req.security_groups, secured) {
            (Some(g), _) => g.clone(),
            (None, true) => vec!["default".into()],
            (None, false) => Vec::new(),
        },
        status: "DOWN".into(),
        device_owner: req.device_owner.clone().unwrap_or_default(),
        device_id: req.device_id.clone().unwrap_or_default(),
        binding_vif_type: if host.is_empty() { "unbound" } else { "ovs" }.into(),
        binding_vif_details: if host.is_empty() {
            Map::new()
        } else {
            let mut m = Map::new();
            m.insert("port_filter".into(), json!(true));
            m.insert("bridge_name".into(), json!("br-int"));
            m.extend(st.vif_details.clone());
            m
        },
        binding_host_id: host,
        tags: req.tags.clone(),
        admin_state_up: req.admin_state_up.unwrap_or(true),
        // As Neutron: seconds resolution, UTC.
        created_at: now_rfc3339(),
        updated_at: now_rfc3339(),
        ..Default::default()
    };
    let mut port = port;
    port.extra.insert("port_security_enabled".into(), json!(secured));
    st.insert_port(port.clone());
    Ok(port)
}

impl Neutron for FakeNeutron {
    fn tag_mode(&self) -> TagMode {
        self.tag_mode
    }

    fn extensions(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        let mode = self.tag_mode;
        self.run(ops::EXTENSION_LIST, move |_| {
            let mut v = vec!["standard-attr-tag".to_string(), "trunk".into(), "binding".into()];
            if mode == TagMode::InCreateBody {
                v.push("tag-ports-during-bulk-creation".into());
            }
            Ok(v)
        })
    }

    fn list_ports<'a>(&'a self, f: &'a PortFilter) -> BoxFuture<'a, Result<Vec<Port>>> {
        self.run(ops::PORT_LIST, move |st| {
            // By ID: look them up (O(ids)), not a scan of every port for each.
            let candidates: Box<dyn Iterator<Item = &Port>> = if f.ids.is_empty() {
                Box::new(st.ports.values())
            } else {
                let ids: std::collections::BTreeSet<&String> = f.ids.iter().collect();
                Box::new(ids.into_iter().filter_map(|id| st.ports.get(id)))
            };
            Ok(candidates
                .filter(|p| eq_opt(&f.network_id, &p.network_id) && eq_opt(&f.project_id, &p.project_id))
                .filter(|p| eq_opt(&f.device_owner, &p.device_owner) && eq_opt(&f.device_id, &p.device_id))
                .filter(|p| eq_opt(&f.status, &p.status) && eq_opt(&f.binding_host_id, &p.binding_host_id))
                .filter(|p| eq_opt(&f.name, &p.name))
                .filter(|p| {
                    f.fixed_ip_address
                        .as_ref()
                        .is_none_or(|ip| p.fixed_ips.iter().any(|x| &x.ip_address == ip))
                })
                .filter(|p| {
                    f.fixed_ip_subnet
                        .as_ref()
                        .is_none_or(|s| p.fixed_ips.iter().any(|x| &x.subnet_id == s))
                })
                .filter(|p| tags_match(&p.tags, &f.tags, &f.tags_any, &f.not_tags))
                .map(|p| project_fields(p, &f.fields))
                .collect())
        })
    }

    fn get_port<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Port>> {
        self.run(ops::PORT_GET, move |st| {
            st.ports
                .get(id)
                .cloned()
                .ok_or_else(|| not_found(ops::PORT_GET, "PortNotFound", id))
        })
    }

    fn create_ports_bulk<'a>(&'a self, ports: &'a [PortCreate]) -> BoxFuture<'a, Result<Vec<Port>>> {
        self.run(ops::PORT_BULK_CREATE, move |st| {
            let mut created: Vec<Port> = Vec::with_capacity(ports.len());
            for req in ports {
                match create_port(st, ops::PORT_BULK_CREATE, req) {
                    Ok(p) => created.push(p),
                    Err(e) => {
                        // Neutron's bulk create is all or nothing.
                        for p in &created {
                            st.remove_port(&p.id);
                        }
                        return Err(e);
                    }
                }
            }
            Ok(created)
        })
    }

    fn update_port<'a>(&'a self, id: &'a str, u: &'a PortUpdate) -> BoxFuture<'a, Result<Port>> {
        self.run(ops::PORT_UPDATE, move |st| {
            let p = st
                .ports
                .get_mut(id)
                .ok_or_else(|| not_found(ops::PORT_UPDATE, "PortNotFound", id))?;
            let revision = p.extra.get("revision_number").and_then(Value::as_u64).unwrap_or(0);
            if let Some(want) = u.if_revision
                && want != revision
            {
                return Err(Error::Conflict {
                    op: ops::PORT_UPDATE,
                    kind: "RevisionNumberConstraintFailed".into(),
                    message: format!("Constrained to {want}, but current revision is {revision}"),
                });
            }
            if let Some(pairs) = &u.allowed_address_pairs
                && pairs.len() > MAX_ALLOWED_ADDRESS_PAIRS
            {
                return Err(Error::BadRequest {
                    op: ops::PORT_UPDATE,
                    status: 400,
                    kind: "AllowedAddressPairExhausted".into(),
                    message: format!(
                        "The number of allowed address pair exceeds the maximum {MAX_ALLOWED_ADDRESS_PAIRS}."
                    ),
                });
            }
            if let Some(v) = &u.name {
                p.name = v.clone();
            }
            if let Some(v) = &u.device_id {
                p.device_id = v.clone();
            }
            if let Some(v) = &u.security_groups {
                let secured = p.extra.get("port_security_enabled").and_then(Value::as_bool) != Some(false);
                if !secured && !v.is_empty() {
                    return Err(Error::Conflict {
                        op: ops::PORT_UPDATE,
                        kind: "PortSecurityAndIPRequiredForSecurityGroups".into(),
                        message: "Port security must be enabled and port must have an IP address in order to use security groups.".into(),
                    });
                }
                p.security_groups = v.clone();
            }
            if let Some(v) = &u.binding_host_id {
                p.binding_host_id = v.clone();
                p.binding_vif_type = if v.is_empty() { "unbound" } else { "ovs" }.into();
            }
            if let Some(v) = &u.description {
                p.extra.insert("description".into(), json!(v));
            }
            if let Some(v) = &u.allowed_address_pairs {
                let filled: Vec<Value> = v
                    .iter()
                    .map(|a| {
                        let mac = if a.mac_address.is_empty() { &p.mac_address } else { &a.mac_address };
                        json!({"ip_address": a.ip_address, "mac_address": mac})
                    })
                    .collect();
                p.extra.insert("allowed_address_pairs".into(), Value::Array(filled));
            }
            p.extra.insert("revision_number".into(), json!(revision + 1));
            Ok(p.clone())
        })
    }

    fn delete_port<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        self.run(ops::PORT_DELETE, move |st| {
            trunks::check_port_delete(st, id)?;
            st.remove_port(id);
            // Neutron frees the floating IPs of a deleted port.
            for f in st.floating_ips.values_mut() {
                if f.port_id.as_deref() == Some(id) {
                    f.port_id = None;
                    f.fixed_ip_address = None;
                    f.status = "DOWN".into();
                }
            }
            Ok(())
        })
    }

    fn set_port_tags<'a>(&'a self, id: &'a str, tags: &'a [String]) -> BoxFuture<'a, Result<()>> {
        self.run(ops::PORT_SET_TAGS, move |st| {
            let p = st
                .ports
                .get_mut(id)
                .ok_or_else(|| not_found(ops::PORT_SET_TAGS, "PortNotFound", id))?;
            p.tags = tags.to_vec();
            Ok(())
        })
    }

    fn get_network<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Network>> {
        self.run(ops::NETWORK_GET, move |st| {
            st.networks
                .get(id)
                .cloned()
                .ok_or_else(|| not_found(ops::NETWORK_GET, "NetworkNotFound", id))
        })
    }

    fn list_networks<'a>(&'a self, f: &'a ResourceFilter) -> BoxFuture<'a, Result<Vec<Network>>> {
        self.run(ops::NETWORK_LIST, move |st| {
            Ok(st
                .networks
                .values()
                .filter(|n| f.ids.is_empty() || f.ids.contains(&n.id))
                .filter(|n| eq_opt(&f.name, &n.name) && eq_opt(&f.project_id, &n.project_id))
                .filter(|n| tags_match(&n.tags, &f.tags, &f.tags_any, &[]))
                .cloned()
                .collect())
        })
    }

    fn create_network<'a>(&'a self, req: &'a NetworkCreate) -> BoxFuture<'a, Result<Network>> {
        self.run(ops::NETWORK_CREATE, move |st| {
            let mut net = Network {
                id: st.new_id(),
                name: req.name.clone(),
                mtu: Some(req.mtu.map_or(1442, i64::from)),
                tags: req.tags.clone(),
                project_id: req.project_id.clone().unwrap_or_else(|| "fake-project".into()),
                ..Default::default()
            };
            if let Some(d) = &req.description {
                net.extra.insert("description".into(), json!(d));
            }
            st.networks.insert(net.id.clone(), net.clone());
            Ok(net)
        })
    }

    fn delete_network<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        self.run(ops::NETWORK_DELETE, move |st| {
            if st.ports.values().any(|p| p.network_id == id) {
                return Err(Error::Conflict {
                    op: ops::NETWORK_DELETE,
                    kind: "NetworkInUse".into(),
                    message: format!("Unable to complete operation on network {id}. There are one or more ports still in use on the network."),
                });
            }
            st.subnets.retain(|_, s| s.network_id != id);
            st.networks.remove(id);
            Ok(())
        })
    }

    fn get_subnet<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Subnet>> {
        self.run(ops::SUBNET_GET, move |st| {
            st.subnets
                .get(id)
                .cloned()
                .ok_or_else(|| not_found(ops::SUBNET_GET, "SubnetNotFound", id))
        })
    }

    fn quota_details<'a>(
        &'a self,
        _project_id: &'a str,
    ) -> BoxFuture<'a, Result<std::collections::BTreeMap<String, QuotaUsage>>> {
        self.run(ops::QUOTA_DETAILS, move |st| {
            let used = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
            // The fake has no quotas: every limit is -1 (unlimited).
            Ok([
                (
                    "port".to_string(),
                    QuotaUsage {
                        limit: -1,
                        used: used(st.ports.len()),
                        reserved: 0,
                    },
                ),
                (
                    "network".to_string(),
                    QuotaUsage {
                        limit: -1,
                        used: used(st.networks.len()),
                        reserved: 0,
                    },
                ),
                (
                    "subnet".to_string(),
                    QuotaUsage {
                        limit: -1,
                        used: used(st.subnets.len()),
                        reserved: 0,
                    },
                ),
            ]
            .into_iter()
            .collect())
        })
    }

    fn get_subnet_pool<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SubnetPool>> {
        self.run(ops::SUBNETPOOL_GET, move |st| {
            let pool = st
                .pools
                .get(id)
                .ok_or_else(|| not_found(ops::SUBNETPOOL_GET, "SubnetPoolNotFound", id))?;
            Ok(SubnetPool {
                id: id.to_owned(),
                // The fake allocates IPv4 only.
                ip_version: Some(4),
                prefixes: vec![pool.cidr.to_string()],
                ..Default::default()
            })
        })
    }

    fn list_subnets<'a>(&'a self, f: &'a ResourceFilter) -> BoxFuture<'a, Result<Vec<Subnet>>> {
        self.run(ops::SUBNET_LIST, move |st| {
            Ok(st
                .subnets
                .values()
                .filter(|s| f.ids.is_empty() || f.ids.contains(&s.id))
                .filter(|s| eq_opt(&f.network_id, &s.network_id))
                .filter(|s| eq_opt(&f.subnetpool_id, s.subnetpool_id.as_deref().unwrap_or_default()))
                .filter(|s| {
                    eq_opt(
                        &f.name,
                        s.extra.get("name").and_then(Value::as_str).unwrap_or_default(),
                    )
                })
                .filter(|s| tags_match(&s.tags, &f.tags, &f.tags_any, &[]))
                .cloned()
                .collect())
        })
    }

    fn create_subnet<'a>(&'a self, req: &'a SubnetCreate) -> BoxFuture<'a, Result<Subnet>> {
        self.run(ops::SUBNET_CREATE, move |st| {
            let op = ops::SUBNET_CREATE;
            if !st.networks.contains_key(&req.network_id) {
                return Err(not_found(op, "NetworkNotFound", &req.network_id));
            }
            let taken: Vec<Cidr> = st.subnets.values().filter_map(|s| Cidr::parse(&s.cidr)).collect();
            let cidr = match (&req.cidr, &req.subnetpool_id) {
                (Some(c), _) => Cidr::parse(c).ok_or_else(|| bad_request(op, format!("invalid cidr {c}")))?,
                (None, Some(pool_id)) => {
                    let pool = st
                        .pools
                        .get(pool_id)
                        .cloned()
                        .ok_or_else(|| not_found(op, "SubnetPoolNotFound", pool_id))?;
                    pool.cidr
                        .carve(req.prefixlen.unwrap_or(pool.default_prefixlen), &taken)
                        .ok_or_else(|| Error::Conflict {
                            op,
                            kind: "SubnetAllocationError".into(),
                            message: format!("no free prefix in subnet pool {pool_id}"),
                        })?
                }
                (None, None) => return Err(bad_request(op, "a cidr or a subnetpool_id is required".into())),
            };
            let mut subnet = Subnet {
                id: st.new_id(),
                network_id: req.network_id.clone(),
                cidr: cidr.to_string(),
                gateway_ip: Some(cidr.first_host().to_string()),
                ip_version: Some(4),
                subnetpool_id: req.subnetpool_id.clone(),
                tags: req.tags.clone(),
                ..Default::default()
            };
            subnet.extra.insert("name".into(), json!(req.name));
            subnet
                .extra
                .insert("enable_dhcp".into(), json!(req.enable_dhcp.unwrap_or(true)));
            st.subnets.insert(subnet.id.clone(), subnet.clone());
            Ok(subnet)
        })
    }

    fn delete_subnet<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        self.run(ops::SUBNET_DELETE, move |st| {
            let in_use = st.ports.values().any(|p| p.fixed_ips.iter().any(|ip| ip.subnet_id == id))
                || st.router_interfaces.keys().any(|(_, s)| s == id);
            if in_use {
                return Err(Error::Conflict {
                    op: ops::SUBNET_DELETE,
                    kind: "SubnetInUse".into(),
                    message: format!("Unable to complete operation on subnet {id}: One or more ports have an IP allocation from this subnet."),
                });
            }
            st.subnets.remove(id);
            Ok(())
        })
    }

    fn add_router_interface<'a>(
        &'a self,
        router_id: &'a str,
        subnet_id: &'a str,
    ) -> BoxFuture<'a, Result<String>> {
        self.run(ops::ROUTER_ADD_INTERFACE, move |st| {
            let op = ops::ROUTER_ADD_INTERFACE;
            if !st.subnets.contains_key(subnet_id) {
                return Err(not_found(op, "SubnetNotFound", subnet_id));
            }
            let key = (router_id.to_string(), subnet_id.to_string());
            if st.router_interfaces.contains_key(&key) {
                return Err(bad_request(
                    op,
                    format!("Router {router_id} already has a port on subnet {subnet_id}."),
                ));
            }
            let port_id = st.new_id();
            st.router_interfaces.insert(key, port_id.clone());
            Ok(port_id)
        })
    }

    fn remove_router_interface<'a>(
        &'a self,
        router_id: &'a str,
        subnet_id: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        self.run(ops::ROUTER_REMOVE_INTERFACE, move |st| {
            st.router_interfaces
                .remove(&(router_id.to_string(), subnet_id.to_string()));
            Ok(())
        })
    }

    fn list_floating_ips<'a>(&'a self, f: &'a FloatingIpFilter) -> BoxFuture<'a, Result<Vec<FloatingIp>>> {
        self.run(ops::FLOATINGIP_LIST, move |st| {
            Ok(st
                .floating_ips
                .values()
                .filter(|x| f.ids.is_empty() || f.ids.contains(&x.id))
                .filter(|x| f.port_id.is_none() || x.port_id == f.port_id)
                .filter(|x| eq_opt(&f.floating_ip_address, &x.floating_ip_address))
                .filter(|x| eq_opt(&f.floating_network_id, &x.floating_network_id))
                .filter(|x| tags_match(&x.tags, &f.tags, &[], &[]))
                .cloned()
                .collect())
        })
    }

    fn create_floating_ip<'a>(&'a self, req: &'a FloatingIpCreate) -> BoxFuture<'a, Result<FloatingIp>> {
        self.run(ops::FLOATINGIP_CREATE, move |st| {
            let fixed = match &req.port_id {
                Some(p) => fip_target(st, ops::FLOATINGIP_CREATE, None, p)?,
                None => None,
            };
            st.next_fip_host += 1;
            let fip = FloatingIp {
                id: st.new_id(),
                floating_ip_address: format!("172.24.4.{}", 9 + st.next_fip_host),
                floating_network_id: req.floating_network_id.clone(),
                port_id: req.port_id.clone(),
                fixed_ip_address: fixed,
                project_id: req.project_id.clone().unwrap_or_else(|| "fake-project".into()),
                description: req.description.clone().unwrap_or_default(),
                tags: req.tags.clone(),
                status: if req.port_id.is_some() { "ACTIVE" } else { "DOWN" }.into(),
                created_at: None,
            };
            st.floating_ips.insert(fip.id.clone(), fip.clone());
            Ok(fip)
        })
    }

    fn set_floating_ip_port<'a>(
        &'a self,
        id: &'a str,
        port_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<FloatingIp>> {
        self.run(ops::FLOATINGIP_UPDATE, move |st| {
            let fixed = match port_id {
                Some(p) => fip_target(st, ops::FLOATINGIP_UPDATE, Some(id), p)?,
                None => None,
            };
            let f = st
                .floating_ips
                .get_mut(id)
                .ok_or_else(|| not_found(ops::FLOATINGIP_UPDATE, "FloatingIPNotFound", id))?;
            if let (Some(have), Some(want)) = (&f.port_id, port_id)
                && have != want
            {
                return Err(Error::Conflict {
                    op: ops::FLOATINGIP_UPDATE,
                    kind: "FloatingIPPortAlreadyAssociated".into(),
                    message: format!("floating IP {id} is already associated with port {have}"),
                });
            }
            f.port_id = port_id.map(str::to_string);
            f.fixed_ip_address = fixed;
            f.status = if port_id.is_some() { "ACTIVE" } else { "DOWN" }.into();
            Ok(f.clone())
        })
    }

    fn delete_floating_ip<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        self.run(ops::FLOATINGIP_DELETE, move |st| {
            st.floating_ips.remove(id);
            Ok(())
        })
    }

    fn list_security_groups<'a>(
        &'a self,
        f: &'a SecurityGroupFilter,
    ) -> BoxFuture<'a, Result<Vec<SecurityGroup>>> {
        self.run(ops::SG_LIST, move |st| Ok(security_groups::list(st, f)))
    }

    fn create_security_group<'a>(
        &'a self,
        req: &'a SecurityGroupCreate,
    ) -> BoxFuture<'a, Result<SecurityGroup>> {
        self.run(ops::SG_CREATE, move |st| Ok(security_groups::create(st, req)))
    }

    fn delete_security_group<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        self.run(ops::SG_DELETE, move |st| security_groups::delete(st, id))
    }

    fn list_security_group_rules<'a>(
        &'a self,
        f: &'a SecurityGroupRuleFilter,
    ) -> BoxFuture<'a, Result<Vec<SecurityGroupRule>>> {
        self.run(ops::SG_RULE_LIST, move |st| {
            Ok(security_groups::list_rules(st, f))
        })
    }

    fn create_security_group_rules<'a>(
        &'a self,
        rules: &'a [SecurityGroupRuleCreate],
    ) -> BoxFuture<'a, Result<Vec<SecurityGroupRule>>> {
        self.run(ops::SG_RULE_BULK_CREATE, move |st| {
            security_groups::create_rules(st, rules)
        })
    }

    fn delete_security_group_rule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        self.run(ops::SG_RULE_DELETE, move |st| {
            st.sg_rules.remove(id);
            Ok(())
        })
    }

    fn create_trunk<'a>(&'a self, req: &'a TrunkCreate) -> BoxFuture<'a, Result<Trunk>> {
        self.run(ops::TRUNK_CREATE, move |st| trunks::create(st, req))
    }

    fn get_trunk<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Trunk>> {
        self.run(ops::TRUNK_GET, move |st| trunks::get(st, ops::TRUNK_GET, id))
    }

    fn list_trunks<'a>(&'a self, f: &'a ResourceFilter) -> BoxFuture<'a, Result<Vec<Trunk>>> {
        self.run(ops::TRUNK_LIST, move |st| Ok(trunks::list(st, f)))
    }

    fn add_subports<'a>(
        &'a self,
        trunk_id: &'a str,
        subports: &'a [SubPort],
    ) -> BoxFuture<'a, Result<Trunk>> {
        self.run(ops::TRUNK_ADD_SUBPORTS, move |st| {
            trunks::add(st, trunk_id, subports)
        })
    }

    fn remove_subports<'a>(
        &'a self,
        trunk_id: &'a str,
        port_ids: &'a [String],
    ) -> BoxFuture<'a, Result<Trunk>> {
        self.run(ops::TRUNK_REMOVE_SUBPORTS, move |st| {
            trunks::remove(st, trunk_id, port_ids)
        })
    }

    fn delete_trunk<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        self.run(ops::TRUNK_DELETE, move |st| {
            trunks::delete(st, id);
            Ok(())
        })
    }
}

/// Now, as Neutron writes timestamps (`2026-11-24T17:40:12Z`).
fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The fixed IP a floating IP (`fip_id`, `None` when being created) on port `port_id` maps to.
/// A port with another floating IP is a conflict, as in Neutron. A port this fake does not
/// know (a VIP port of `FakeOctavia`) maps to no fixed IP: the fakes are not linked.
fn fip_target(st: &State, op: &'static str, fip_id: Option<&str>, port_id: &str) -> Result<Option<String>> {
    if st
        .floating_ips
        .values()
        .any(|f| f.port_id.as_deref() == Some(port_id) && Some(f.id.as_str()) != fip_id)
    {
        return Err(Error::Conflict {
            op,
            kind: "FloatingIPSetupException".into(),
            message: format!("port {port_id} already has a floating IP"),
        });
    }
    Ok(st
        .ports
        .get(port_id)
        .and_then(|p| p.fixed_ips.first())
        .map(|f| f.ip_address.clone()))
}
