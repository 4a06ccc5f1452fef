//! Upstream's capacity gauges, kept current in the background: `kuryr_quota_free_count{resource}`
//! (quota limit minus use of `[neutron_defaults] project`, -1 when unlimited) and
//! `kuryr_port_quota_per_subnet{subnet_id,subnet_name}` (addresses left in each pod subnet's
//! allocation pools). Upstream recomputed them at every scrape (several Neutron requests per
//! scrape); here they are refreshed every [`REFRESH`], so a scrape costs nothing. The pod
//! subnets are the default pod subnet and every KuryrNetwork's subnet. (Upstream matched subnets
//! whose name contains `ns/`, which its newer `<uid>/<ns>` names no longer do.)

use std::{collections::BTreeMap, net::IpAddr, sync::Arc, time::Duration};

use kube::{Api, Client, api::ListParams};
use kuryr_openstack::{Neutron, PortFilter, Subnet};
use kuryr_types::KuryrNetwork;
use serde_json::Value;
use tracing::{debug, warn};

use crate::metrics::{Metrics, ResourceLabels, SubnetLabels};

/// How often the gauges are refreshed.
pub const REFRESH: Duration = Duration::from_secs(60);

/// Upstream's resource labels and the Neutron quota keys they come from.
const RESOURCES: &[(&str, &str)] = &[
    ("ports", "port"),
    ("subnets", "subnet"),
    ("networks", "network"),
    ("security_groups", "security_group"),
    ("security_group_rules", "security_group_rule"),
];

/// The number of addresses in the inclusive range `start`..=`end` (0 when malformed or
/// reversed; saturating for IPv6).
pub fn range_size(start: &str, end: &str) -> i64 {
    let (Ok(a), Ok(b)) = (start.parse::<IpAddr>(), end.parse::<IpAddr>()) else {
        return 0;
    };
    let (a, b) = match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b))),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
        _ => return 0,
    };
    if b < a {
        return 0;
    }
    i64::try_from((b - a).saturating_add(1)).unwrap_or(i64::MAX)
}

/// Addresses in the subnet's `allocation_pools`.
pub fn pool_size(subnet: &Subnet) -> i64 {
    subnet
        .extra
        .get("allocation_pools")
        .and_then(Value::as_array)
        .map(|pools| {
            pools
                .iter()
                .map(|p| {
                    range_size(
                        p.get("start").and_then(Value::as_str).unwrap_or_default(),
                        p.get("end").and_then(Value::as_str).unwrap_or_default(),
                    )
                })
                .fold(0i64, i64::saturating_add)
        })
        .unwrap_or(0)
}

/// Refreshes the gauges every [`REFRESH`] until the task is dropped.
pub async fn run(
    neutron: Arc<dyn Neutron>,
    client: Client,
    metrics: Arc<Metrics>,
    project_id: String,
    default_subnet: Option<String>,
) {
    loop {
        refresh_quota(neutron.as_ref(), &metrics, &project_id).await;
        let mut subnets: Vec<String> = default_subnet.iter().cloned().collect();
        match Api::<KuryrNetwork>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => subnets.extend(
                list.items
                    .iter()
                    .filter_map(|kn| kn.status.as_ref().and_then(|s| s.subnet_id.clone()))
                    .filter(|s| !s.is_empty()),
            ),
            Err(e) => debug!(error = %e, "listing KuryrNetworks for the subnet gauges failed"),
        }
        subnets.sort();
        subnets.dedup();
        refresh_subnets(neutron.as_ref(), &metrics, &subnets).await;
        tokio::time::sleep(REFRESH).await;
    }
}

async fn refresh_quota(neutron: &dyn Neutron, metrics: &Metrics, project_id: &str) {
    match neutron.quota_details(project_id).await {
        Ok(q) => {
            for (label, key) in RESOURCES {
                if let Some(u) = q.get(*key) {
                    metrics
                        .quota_free
                        .get_or_create(&ResourceLabels {
                            resource: (*label).to_string(),
                        })
                        .set(u.free());
                }
            }
        }
        Err(e) => warn!(project = %project_id, error = %e, "reading the project's quota failed"),
    }
}

async fn refresh_subnets(neutron: &dyn Neutron, metrics: &Metrics, subnet_ids: &[String]) {
    let mut by_network: BTreeMap<String, Vec<Subnet>> = BTreeMap::new();
    for id in subnet_ids {
        match neutron.get_subnet(id).await {
            Ok(s) => by_network.entry(s.network_id.clone()).or_default().push(s),
            Err(e) => debug!(subnet = %id, error = %e, "reading a pod subnet failed"),
        }
    }
    for (network, subnets) in by_network {
        let filter = PortFilter {
            network_id: Some(network.clone()),
            fields: vec!["id".into(), "fixed_ips".into()],
            ..PortFilter::default()
        };
        let ports = match neutron.list_ports(&filter).await {
            Ok(p) => p,
            Err(e) => {
                debug!(%network, error = %e, "listing the ports of a pod network failed");
                continue;
            }
        };
        for s in subnets {
            let used = ports
                .iter()
                .filter(|p| p.fixed_ips.iter().any(|ip| ip.subnet_id == s.id))
                .count();
            let used = i64::try_from(used).unwrap_or(i64::MAX);
            let name = s
                .extra
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            metrics
                .port_quota_per_subnet
                .get_or_create(&SubnetLabels {
                    subnet_id: s.id.clone(),
                    subnet_name: name,
                })
                .set(pool_size(&s).saturating_sub(used).max(0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_count_inclusive_addresses() {
        assert_eq!(range_size("10.0.0.2", "10.0.0.254"), 253);
        assert_eq!(range_size("10.0.0.5", "10.0.0.5"), 1);
        assert_eq!(range_size("10.0.0.9", "10.0.0.5"), 0);
        assert_eq!(range_size("bogus", "10.0.0.5"), 0);
        assert_eq!(range_size("10.0.0.1", "fd00::1"), 0);
        assert_eq!(range_size("fd00::", "fd00::ffff:ffff:ffff:ffff"), i64::MAX);
    }

    #[test]
    fn pool_size_sums_the_allocation_pools() {
        let s: Subnet = serde_json::from_value(serde_json::json!({
            "id": "s", "network_id": "n", "cidr": "10.0.0.0/24",
            "allocation_pools": [{"start": "10.0.0.2", "end": "10.0.0.101"}, {"start": "10.0.0.200", "end": "10.0.0.209"}]
        }))
        .expect("subnet");
        assert_eq!(pool_size(&s), 110);
    }

    #[tokio::test]
    async fn gauges_come_from_neutron() {
        let fake = kuryr_openstack::fake::FakeNeutron::new();
        let (_, subnet) = fake.add_network("pods", "10.0.0.0/24");
        let metrics = Metrics::default();
        refresh_quota(&fake, &metrics, "proj").await;
        refresh_subnets(&fake, &metrics, std::slice::from_ref(&subnet.id)).await;
        let text = metrics.render().expect("render");
        // The fake has no quotas: unlimited.
        assert!(
            text.contains("kuryr_quota_free_count{resource=\"ports\"} -1"),
            "{text}"
        );
        assert!(text.contains("kuryr_port_quota_per_subnet{subnet_id="), "{text}");
    }

    #[test]
    fn free_quota_is_limit_minus_use_or_unlimited() {
        let q = |limit, used| kuryr_openstack::QuotaUsage {
            limit,
            used,
            reserved: 0,
        };
        assert_eq!(q(500, 120).free(), 380);
        assert_eq!(q(-1, 120).free(), -1);
        assert_eq!(q(10, 12).free(), 0);
    }
}
