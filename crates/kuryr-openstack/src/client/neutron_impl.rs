//! [`Neutron`] for [`OpenStackNeutron`]: each operation is one of the client's request helpers.

use super::*;
use crate::security_group::{
    SecurityGroup, SecurityGroupCreate, SecurityGroupFilter, SecurityGroupRule, SecurityGroupRuleCreate,
    SecurityGroupRuleFilter,
};
use crate::trunk::{SubPort, Trunk, TrunkCreate};

impl Neutron for OpenStackNeutron {
    fn tag_mode(&self) -> TagMode {
        self.current_tag_mode()
    }

    fn extensions(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        Box::pin(self.fetch_extensions())
    }

    fn list_ports<'a>(&'a self, filter: &'a PortFilter) -> BoxFuture<'a, Result<Vec<Port>>> {
        Box::pin(async move {
            if filter.ids.len() <= MAX_IDS_PER_REQUEST {
                return self.list(ops::PORT_LIST, "ports", filter.query()).await;
            }
            // Neutron answers 414 past ~16 KB of URL (400 IDs on the sandbox): split.
            let mut all = Vec::with_capacity(filter.ids.len());
            for chunk in filter.ids.chunks(MAX_IDS_PER_REQUEST) {
                let part = PortFilter {
                    ids: chunk.to_vec(),
                    ..filter.clone()
                };
                all.extend(self.list::<Port>(ops::PORT_LIST, "ports", part.query()).await?);
            }
            Ok(all)
        })
    }

    fn get_port<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Port>> {
        Box::pin(self.get(ops::PORT_GET, "ports", "port", id))
    }

    fn create_ports_bulk<'a>(&'a self, ports: &'a [PortCreate]) -> BoxFuture<'a, Result<Vec<Port>>> {
        Box::pin(self.bulk_create(ports))
    }

    fn update_port<'a>(&'a self, id: &'a str, update: &'a PortUpdate) -> BoxFuture<'a, Result<Port>> {
        Box::pin(async move {
            // Never beside a group deletion (see `sg_barrier`).
            let _barrier = match update.security_groups {
                Some(_) => Some(self.sg_barrier.read().await),
                None => None,
            };
            // Neutron's revision check: 412 when the port changed since `if_revision` was read.
            let headers = update.if_revision.map(|r| {
                let mut h = http::HeaderMap::new();
                if let Ok(v) = http::HeaderValue::from_str(&format!("revision_number={r}")) {
                    h.insert(http::header::IF_MATCH, v);
                }
                h
            });
            let body = self
                .transport
                .call_with_headers(
                    ops::PORT_UPDATE,
                    Method::PUT,
                    format!("ports/{}", seg(id)),
                    Query::new(),
                    Some(update.to_json()),
                    headers,
                )
                .await?;
            decode(ops::PORT_UPDATE, &body, "port")
        })
    }

    fn delete_port<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.delete(ops::PORT_DELETE, "ports", id))
    }

    fn set_port_tags<'a>(&'a self, id: &'a str, tags: &'a [String]) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.set_tags(ops::PORT_SET_TAGS, "ports", id, tags))
    }

    fn get_network<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Network>> {
        Box::pin(self.get(ops::NETWORK_GET, "networks", "network", id))
    }

    fn list_networks<'a>(&'a self, filter: &'a ResourceFilter) -> BoxFuture<'a, Result<Vec<Network>>> {
        Box::pin(self.list(ops::NETWORK_LIST, "networks", filter.query()))
    }

    fn create_network<'a>(&'a self, network: &'a NetworkCreate) -> BoxFuture<'a, Result<Network>> {
        Box::pin(self.create_tagged(
            (ops::NETWORK_CREATE, ops::NETWORK_SET_TAGS),
            "networks",
            "network",
            network.to_json(self.tag_creation),
            &network.tags,
        ))
    }

    fn delete_network<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.delete(ops::NETWORK_DELETE, "networks", id))
    }

    fn get_subnet<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Subnet>> {
        Box::pin(self.get(ops::SUBNET_GET, "subnets", "subnet", id))
    }

    fn quota_details<'a>(
        &'a self,
        project_id: &'a str,
    ) -> BoxFuture<'a, Result<std::collections::BTreeMap<String, QuotaUsage>>> {
        Box::pin(async move {
            let body = self
                .call(
                    ops::QUOTA_DETAILS,
                    Method::GET,
                    format!("quotas/{}/details", seg(project_id)),
                    Query::new(),
                    None,
                )
                .await?;
            decode(ops::QUOTA_DETAILS, &body, "quota")
        })
    }

    fn get_subnet_pool<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SubnetPool>> {
        Box::pin(self.get(ops::SUBNETPOOL_GET, "subnetpools", "subnetpool", id))
    }

    fn list_subnets<'a>(&'a self, filter: &'a ResourceFilter) -> BoxFuture<'a, Result<Vec<Subnet>>> {
        Box::pin(self.list(ops::SUBNET_LIST, "subnets", filter.query()))
    }

    fn create_subnet<'a>(&'a self, subnet: &'a SubnetCreate) -> BoxFuture<'a, Result<Subnet>> {
        Box::pin(self.create_tagged(
            (ops::SUBNET_CREATE, ops::SUBNET_SET_TAGS),
            "subnets",
            "subnet",
            subnet.to_json(self.tag_creation),
            &subnet.tags,
        ))
    }

    fn delete_subnet<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.delete(ops::SUBNET_DELETE, "subnets", id))
    }

    fn add_router_interface<'a>(
        &'a self,
        router_id: &'a str,
        subnet_id: &'a str,
    ) -> BoxFuture<'a, Result<String>> {
        Box::pin(async move {
            let body = self
                .call(
                    ops::ROUTER_ADD_INTERFACE,
                    Method::PUT,
                    format!("routers/{}/add_router_interface", seg(router_id)),
                    Query::new(),
                    Some(json!({ "subnet_id": subnet_id })),
                )
                .await?;
            let v: Value = serde_json::from_slice(&body).map_err(|e| Error::Decode {
                op: ops::ROUTER_ADD_INTERFACE,
                message: e.to_string(),
            })?;
            v.get("port_id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| Error::Decode {
                    op: ops::ROUTER_ADD_INTERFACE,
                    message: "no port_id in the answer".into(),
                })
        })
    }

    fn remove_router_interface<'a>(
        &'a self,
        router_id: &'a str,
        subnet_id: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.call_gone_ok(
            ops::ROUTER_REMOVE_INTERFACE,
            Method::PUT,
            format!("routers/{}/remove_router_interface", seg(router_id)),
            Some(json!({ "subnet_id": subnet_id })),
        ))
    }

    fn list_floating_ips<'a>(
        &'a self,
        filter: &'a FloatingIpFilter,
    ) -> BoxFuture<'a, Result<Vec<FloatingIp>>> {
        Box::pin(self.list(ops::FLOATINGIP_LIST, "floatingips", filter.query()))
    }

    fn create_floating_ip<'a>(&'a self, fip: &'a FloatingIpCreate) -> BoxFuture<'a, Result<FloatingIp>> {
        Box::pin(self.create_tagged(
            (ops::FLOATINGIP_CREATE, ops::FLOATINGIP_SET_TAGS),
            "floatingips",
            "floatingip",
            fip.to_json(self.tag_creation),
            &fip.tags,
        ))
    }

    fn set_floating_ip_port<'a>(
        &'a self,
        id: &'a str,
        port_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<FloatingIp>> {
        Box::pin(async move {
            let body = self
                .call(
                    ops::FLOATINGIP_UPDATE,
                    Method::PUT,
                    format!("floatingips/{}", seg(id)),
                    Query::new(),
                    Some(json!({ "floatingip": { "port_id": port_id } })),
                )
                .await?;
            decode(ops::FLOATINGIP_UPDATE, &body, "floatingip")
        })
    }

    fn delete_floating_ip<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.delete(ops::FLOATINGIP_DELETE, "floatingips", id))
    }

    fn list_security_groups<'a>(
        &'a self,
        filter: &'a SecurityGroupFilter,
    ) -> BoxFuture<'a, Result<Vec<SecurityGroup>>> {
        Box::pin(self.sg_list(filter))
    }

    fn create_security_group<'a>(
        &'a self,
        sg: &'a SecurityGroupCreate,
    ) -> BoxFuture<'a, Result<SecurityGroup>> {
        Box::pin(self.sg_create(sg))
    }

    fn delete_security_group<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.sg_delete(id))
    }

    fn list_security_group_rules<'a>(
        &'a self,
        filter: &'a SecurityGroupRuleFilter,
    ) -> BoxFuture<'a, Result<Vec<SecurityGroupRule>>> {
        Box::pin(self.sg_rule_list(filter))
    }

    fn create_security_group_rules<'a>(
        &'a self,
        rules: &'a [SecurityGroupRuleCreate],
    ) -> BoxFuture<'a, Result<Vec<SecurityGroupRule>>> {
        Box::pin(self.sg_rule_bulk_create(rules))
    }

    fn delete_security_group_rule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.sg_rule_delete(id))
    }

    fn create_trunk<'a>(&'a self, trunk: &'a TrunkCreate) -> BoxFuture<'a, Result<Trunk>> {
        Box::pin(self.create_tagged(
            (ops::TRUNK_CREATE, ops::TRUNK_SET_TAGS),
            "trunks",
            "trunk",
            trunk.to_json(self.tag_creation),
            &trunk.tags,
        ))
    }

    fn get_trunk<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Trunk>> {
        Box::pin(self.get(ops::TRUNK_GET, "trunks", "trunk", id))
    }

    fn list_trunks<'a>(&'a self, filter: &'a ResourceFilter) -> BoxFuture<'a, Result<Vec<Trunk>>> {
        Box::pin(self.list(ops::TRUNK_LIST, "trunks", filter.query()))
    }

    fn add_subports<'a>(
        &'a self,
        trunk_id: &'a str,
        subports: &'a [SubPort],
    ) -> BoxFuture<'a, Result<Trunk>> {
        Box::pin(self.trunk_action(
            ops::TRUNK_ADD_SUBPORTS,
            trunk_id,
            "add_subports",
            crate::trunk::add_subports_body(subports),
            subports.len(),
        ))
    }

    fn remove_subports<'a>(
        &'a self,
        trunk_id: &'a str,
        port_ids: &'a [String],
    ) -> BoxFuture<'a, Result<Trunk>> {
        Box::pin(self.trunk_action(
            ops::TRUNK_REMOVE_SUBPORTS,
            trunk_id,
            "remove_subports",
            crate::trunk::remove_subports_body(port_ids),
            port_ids.len(),
        ))
    }

    fn delete_trunk<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.delete(ops::TRUNK_DELETE, "trunks", id))
    }
}

impl OpenStackNeutron {
    /// `PUT /v2.0/trunks/{id}/<action>` for `items` subports (a bulk: see [`bulk_timeout`]);
    /// Neutron answers with the trunk itself, not wrapped in a key.
    async fn trunk_action(
        &self,
        op: &'static str,
        trunk_id: &str,
        action: &str,
        body: Value,
        items: usize,
    ) -> Result<Trunk> {
        let raw = self
            .transport
            .call_bulk(
                op,
                Method::PUT,
                format!("trunks/{}/{action}", seg(trunk_id)),
                body,
                items,
            )
            .await?;
        serde_json::from_slice(&raw).map_err(|e| Error::Decode {
            op,
            message: e.to_string(),
        })
    }
}
