//! The Neutron side of a namespace network: find-or-create the network and its subnet (from
//! the configured subnet pool), attach it to the pod router, and tear it all down. Every call
//! is idempotent so that a crash between a Neutron write and the status patch that records
//! it never creates a second resource or leaks one.

use kuryr_openstack::{Error, NetworkCreate, Neutron, PortFilter, ResourceFilter, SubnetCreate};
use kuryr_openstack::{Network, Subnet};
use tracing::{debug, info, warn};

use super::plan;

/// Settings of the namespace subnet driver the Neutron side needs.
#[derive(Debug, Clone, Default)]
pub struct NetSettings {
    /// `[namespace_subnet] pod_subnet_pool`.
    pub subnet_pool: Option<String>,
    /// `[namespace_subnet] pod_router`.
    pub router: Option<String>,
    /// `[neutron_defaults] network_device_mtu` (0: Neutron's default).
    pub mtu: u32,
    /// `resource_tags` plus the cluster tag.
    pub tags: Vec<String>,
}

/// An existing network of the namespace (tagged as ours when tags are configured), found by
/// the names it may have.
pub async fn find_network(
    neutron: &dyn Neutron,
    s: &NetSettings,
    project_id: &str,
    names: &[String],
) -> Result<Option<Network>, Error> {
    for name in names {
        let filter = ResourceFilter {
            name: Some(name.clone()),
            project_id: Some(project_id.to_owned()),
            tags: s.tags.clone(),
            ..Default::default()
        };
        if let Some(n) = neutron.list_networks(&filter).await?.into_iter().next() {
            return Ok(Some(n));
        }
    }
    Ok(None)
}

/// A network of namespace `ns` whose UID is no longer known (the namespace is gone): one of
/// ours (only when tags prove ownership) named `<some UID>/<ns>`.
pub async fn find_orphaned_network(
    neutron: &dyn Neutron,
    s: &NetSettings,
    project_id: &str,
    ns: &str,
) -> Result<Option<Network>, Error> {
    if s.tags.is_empty() {
        return Ok(None);
    }
    let filter = ResourceFilter {
        project_id: Some(project_id.to_owned()),
        tags: s.tags.clone(),
        ..Default::default()
    };
    Ok(neutron
        .list_networks(&filter)
        .await?
        .into_iter()
        .find(|n| plan::is_namespace_network_name(&n.name, ns)))
}

/// The namespace's network: the existing one, else a new one.
pub async fn ensure_network(
    neutron: &dyn Neutron,
    s: &NetSettings,
    project_id: &str,
    ns_uid: Option<&str>,
    ns: &str,
) -> Result<(Network, bool), Error> {
    let names = plan::candidate_network_names(ns_uid, ns);
    if let Some(n) = find_network(neutron, s, project_id, &names).await? {
        debug!(%ns, network = %n.id, "reusing existing network");
        return Ok((n, false));
    }
    let req = NetworkCreate {
        name: plan::resource_name(ns_uid, ns),
        project_id: Some(project_id.to_owned()),
        description: plan::description(&s.tags),
        mtu: (s.mtu > 0).then_some(s.mtu),
        tags: s.tags.clone(),
    };
    let n = neutron.create_network(&req).await?;
    info!(%ns, network = %n.id, name = %n.name, "network created");
    Ok((n, true))
}

/// The network's subnet: its first existing subnet, else a new one from the subnet pool.
pub async fn ensure_subnet(
    neutron: &dyn Neutron,
    s: &NetSettings,
    project_id: &str,
    network_id: &str,
    ns_uid: Option<&str>,
    ns: &str,
) -> Result<(Subnet, bool), Error> {
    let existing = neutron
        .list_subnets(&ResourceFilter {
            network_id: Some(network_id.to_owned()),
            ..Default::default()
        })
        .await?;
    if let Some(sub) = existing.into_iter().next() {
        debug!(%ns, subnet = %sub.id, "reusing existing subnet");
        return Ok((sub, false));
    }
    // The subnet has the pool's IP version (an IPv6 pool gives IPv6 namespaces); DHCP is off as
    // upstream has it: pods get their addresses from their ports, never from a DHCP agent.
    let ip_version = match &s.subnet_pool {
        Some(pool) => neutron.get_subnet_pool(pool).await?.ip_version,
        None => None,
    };
    let req = SubnetCreate {
        network_id: network_id.to_owned(),
        name: plan::resource_name(ns_uid, ns),
        project_id: Some(project_id.to_owned()),
        subnetpool_id: s.subnet_pool.clone(),
        ip_version,
        enable_dhcp: Some(false),
        description: plan::description(&s.tags),
        tags: s.tags.clone(),
        ..Default::default()
    };
    let sub = neutron.create_subnet(&req).await?;
    info!(%ns, subnet = %sub.id, cidr = %sub.cidr, "subnet created");
    Ok((sub, true))
}

/// Attaches `subnet_id` to `router_id`; "already attached" (400) is success.
pub async fn attach(neutron: &dyn Neutron, router_id: &str, subnet_id: &str) -> Result<(), Error> {
    match neutron.add_router_interface(router_id, subnet_id).await {
        Ok(port) => {
            info!(router = %router_id, subnet = %subnet_id, %port, "subnet attached to router");
            Ok(())
        }
        Err(Error::BadRequest { message, .. }) if message.contains("already has a port") => Ok(()),
        Err(e) => Err(e),
    }
}

/// Detaches `subnet_id` from `router_id` (when there is a router); not attached is fine.
pub async fn teardown_interface(
    neutron: &dyn Neutron,
    router_id: Option<&str>,
    subnet_id: &str,
) -> Result<(), Error> {
    let Some(r) = router_id else { return Ok(()) };
    match neutron.remove_router_interface(r, subnet_id).await {
        // Not attached (or the subnet is gone): nothing to detach.
        Ok(()) | Err(Error::NotFound { .. }) | Err(Error::BadRequest { status: 400, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whose network `id` is for a cluster whose identity is `tags`: `None` when it is gone.
pub async fn network_claim(
    neutron: &dyn Neutron,
    tags: &[String],
    id: &str,
) -> Result<Option<kuryr_core::ownership::Claim>, Error> {
    let found = neutron
        .list_networks(&ResourceFilter {
            ids: vec![id.to_owned()],
            ..Default::default()
        })
        .await?;
    Ok(found
        .iter()
        .find(|n| n.id == id)
        .map(|n| kuryr_core::ownership::claim_of(tags, &n.tags)))
}

/// Detaches the subnet (gone is fine) and deletes the network. A network still holding
/// leftover pod ports (409) gets those that are ours deleted ([`plan::is_deletable_leftover`])
/// and is deleted again, as upstream; a port that is not ours keeps the network (the conflict
/// is returned, the log names the ports).
pub async fn teardown(
    neutron: &dyn Neutron,
    router_id: Option<&str>,
    subnet_id: Option<&str>,
    network_id: &str,
    tags: &[String],
) -> Result<(), Error> {
    if let Some(sub) = subnet_id {
        teardown_interface(neutron, router_id, sub).await?;
    }
    match neutron.delete_network(network_id).await {
        Ok(()) => Ok(()),
        Err(Error::Conflict { .. }) => {
            let ports = neutron
                .list_ports(&PortFilter {
                    network_id: Some(network_id.to_owned()),
                    ..Default::default()
                })
                .await?;
            let (ours, theirs): (Vec<_>, Vec<_>) = ports
                .iter()
                .filter(|p| !p.device_owner.starts_with("network:"))
                .partition(|p| plan::is_deletable_leftover(p, tags));
            for p in ours {
                info!(network = %network_id, port = %p.id, owner = %p.device_owner, "deleting leftover port");
                neutron.delete_port(&p.id).await?;
            }
            if !theirs.is_empty() {
                let ids: Vec<&str> = theirs.iter().map(|p| p.id.as_str()).collect();
                warn!(network = %network_id, ports = ?ids, "ports that are not this cluster's keep the network: they are left alone");
            }
            neutron.delete_network(network_id).await
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_openstack::{PortCreate, fake::FakeNeutron};

    fn settings() -> NetSettings {
        NetSettings {
            subnet_pool: Some("pool".into()),
            router: Some("router".into()),
            mtu: 1400,
            tags: vec!["kuryr".into(), "kuryr-cluster=t".into()],
        }
    }

    #[tokio::test]
    async fn creation_is_idempotent_across_a_crash_before_the_status_patch() {
        let n = FakeNeutron::new();
        n.add_subnet_pool("pool", "10.20.0.0/16", 24);
        let s = settings();
        let uid = "581601bf-509c-4123-ad20-0c9968e20ccf";
        let (net, created) = ensure_network(&n, &s, "p", Some(uid), "ns1").await.unwrap();
        assert!(created);
        assert_eq!(net.name, format!("{uid}/ns1"));
        // Namespace gone (UID unknown): still found by tags and name shape.
        let orphan = find_orphaned_network(&n, &s, "p", "ns1").await.unwrap();
        assert_eq!(orphan.map(|o| o.id), Some(net.id.clone()));
        assert!(find_orphaned_network(&n, &s, "p", "ns2").await.unwrap().is_none());
        assert_eq!(net.tags, s.tags);
        assert_eq!(net.mtu, Some(1400));
        // The status patch was lost: the next pass finds the same network.
        let (again, created) = ensure_network(&n, &s, "p", Some(uid), "ns1").await.unwrap();
        assert!(!created);
        assert_eq!(again.id, net.id);
        // Another cluster's (differently tagged) network of the same name is not ours.
        let other = NetSettings {
            tags: vec!["other".into()],
            ..settings()
        };
        assert!(
            ensure_network(&n, &other, "p", Some("uid"), "ns1")
                .await
                .unwrap()
                .1
        );

        let (sub, created) = ensure_subnet(&n, &s, "p", &net.id, Some(uid), "ns1")
            .await
            .unwrap();
        assert!(created);
        assert!(sub.cidr.starts_with("10.20."), "{}", sub.cidr);
        let (sub2, created) = ensure_subnet(&n, &s, "p", &net.id, Some(uid), "ns1")
            .await
            .unwrap();
        assert!(!created);
        assert_eq!(sub2.id, sub.id);

        attach(&n, "router", &sub.id).await.unwrap();
        // Already attached (crash before the routerId patch): success.
        attach(&n, "router", &sub.id).await.unwrap();
        assert_eq!(n.router_interfaces().len(), 1);

        // A leftover pod port blocks deletion once; it is deleted and the network goes.
        n.create_ports_bulk(&[PortCreate {
            network_id: net.id.clone(),
            subnet_ids: vec![sub.id.clone()],
            device_owner: Some(kuryr_types::constants::DEVICE_OWNER.into()),
            ..Default::default()
        }])
        .await
        .unwrap();
        teardown(&n, Some("router"), Some(&sub.id), &net.id, &s.tags)
            .await
            .unwrap();
        assert!(n.router_interfaces().is_empty());
        assert!(n.networks().iter().all(|x| x.id != net.id));
        assert!(n.subnets().iter().all(|x| x.id != sub.id));
        assert!(n.ports().is_empty());
        // Tearing down again is harmless.
        teardown(&n, Some("router"), Some(&sub.id), &net.id, &s.tags)
            .await
            .unwrap();
    }
}
