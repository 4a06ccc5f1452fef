//! The load balancer janitor: every [`INTERVAL`], this cluster's load balancers (those
//! carrying every configured tag — without tags ownership cannot be proven and nothing runs)
//! whose KuryrLoadBalancer is gone, or that duplicate the one their KLB records, are deleted
//! (cascade). The same listing feeds `kuryr_load_balancers{provisioning_status}` and the
//! count of load balancers not ACTIVE that `/ready` reports. Floating IPs carrying every tag,
//! free and recorded by no KLB on two passes in a row (a LoadBalancer Service deleted while the
//! controller was down, a cascade delete that took the VIP port) are deleted too.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use kuryr_openstack::{FloatingIp, FloatingIpFilter, Neutron};

use kube::{ResourceExt, runtime::reflector::Store};
use kuryr_openstack::octavia::{LbFilter, LoadBalancer, Octavia, status};
use kuryr_types::KuryrLoadBalancer;
use tracing::{info, warn};

use crate::metrics::Metrics;

/// Time between two passes.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// What the KLBs say: `namespace/name` → the load balancer ID their status records (`None`:
/// not created yet, or a create still being recorded).
pub type KlbIndex = BTreeMap<String, Option<String>>;

/// The IDs of the load balancers to delete (pure): not busy (`PENDING_*`), and either no KLB is
/// named like them, or their KLB records another load balancer.
pub fn orphans(lbs: &[LoadBalancer], klbs: &KlbIndex) -> Vec<String> {
    lbs.iter()
        .filter(|lb| !status::is_pending(&lb.provisioning_status))
        .filter(|lb| match klbs.get(&lb.name) {
            None => true,
            Some(Some(id)) => !id.is_empty() && id != &lb.id,
            Some(None) => false,
        })
        .map(|lb| lb.id.clone())
        .collect()
}

/// The KLB index of `store`.
pub fn index(store: &Store<KuryrLoadBalancer>) -> KlbIndex {
    store
        .state()
        .iter()
        .map(|k| {
            let id = k
                .status
                .as_ref()
                .and_then(|s| s.loadbalancer.as_ref())
                .map(|l| l.id.clone())
                .filter(|id| !id.is_empty());
            (
                format!("{}/{}", k.namespace().unwrap_or_default(), k.name_any()),
                id,
            )
        })
        .collect()
}

/// The floating IPs the KLBs record (`status.service_pub_ip_info`).
pub fn recorded_fips(store: &Store<KuryrLoadBalancer>) -> BTreeSet<String> {
    store
        .state()
        .iter()
        .filter_map(|k| {
            k.status
                .as_ref()?
                .service_pub_ip_info
                .as_ref()
                .map(|i| i.ip_id.clone())
        })
        .collect()
}

/// The floating IPs to delete (pure), and the suspects to remember for the next pass: a
/// floating IP is a suspect when it is free and no KLB records it; it is deleted when it was
/// one on the previous pass too (a pass apart: never one being re-associated right now).
pub fn fip_orphans(
    fips: &[FloatingIp],
    recorded: &BTreeSet<String>,
    suspects_before: &BTreeSet<String>,
) -> (Vec<String>, BTreeSet<String>) {
    let suspects: BTreeSet<String> = fips
        .iter()
        .filter(|f| f.port_id.is_none() && !recorded.contains(&f.id))
        .map(|f| f.id.clone())
        .collect();
    let delete = suspects.intersection(suspects_before).cloned().collect();
    (delete, suspects)
}

/// One floating-IP pass: lists the floating IPs carrying `tags` on `network`, deletes those
/// [`fip_orphans`] names; returns the deleted ones and the new suspects.
pub async fn fip_pass(
    neutron: &dyn Neutron,
    network: &str,
    tags: &[String],
    recorded: &BTreeSet<String>,
    suspects_before: &BTreeSet<String>,
) -> Result<(Vec<String>, BTreeSet<String>), kuryr_openstack::Error> {
    let fips = neutron
        .list_floating_ips(&FloatingIpFilter {
            floating_network_id: Some(network.to_string()),
            tags: tags.to_vec(),
            ..FloatingIpFilter::default()
        })
        .await?;
    let (delete, suspects) = fip_orphans(&fips, recorded, suspects_before);
    for id in &delete {
        let addr = fips
            .iter()
            .find(|f| &f.id == id)
            .map(|f| f.floating_ip_address.as_str())
            .unwrap_or_default();
        info!(fip = %addr, %id, "janitor: deleting a floating IP no KuryrLoadBalancer owns");
        neutron.delete_floating_ip(id).await?;
    }
    Ok((delete, suspects))
}

/// What a pass found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Deleted load balancers.
    pub deleted: Vec<String>,
    /// Load balancers not ACTIVE.
    pub not_active: usize,
}

/// One pass: lists this cluster's load balancers, records them by status in `metrics`, and
/// deletes the orphans.
pub async fn pass(
    octavia: &dyn Octavia,
    tags: &[String],
    klbs: &KlbIndex,
    metrics: &Metrics,
) -> Result<PassReport, kuryr_openstack::Error> {
    if tags.is_empty() {
        return Ok(PassReport::default());
    }
    let mut lbs = octavia
        .list_load_balancers(&LbFilter {
            tags: tags.to_vec(),
            ..LbFilter::default()
        })
        .await?;
    // The server filtered by tags; checked again here, since a deletion rests on it.
    lbs.retain(|lb| tags.iter().all(|t| lb.tags.contains(t)));
    metrics.record_load_balancers(lbs.iter().map(|l| l.provisioning_status.as_str()));
    let not_active = lbs
        .iter()
        .filter(|l| l.provisioning_status != status::ACTIVE)
        .count();
    let found = orphans(&lbs, klbs);
    for id in &found {
        let name = lbs
            .iter()
            .find(|l| &l.id == id)
            .map(|l| l.name.as_str())
            .unwrap_or_default();
        info!(lb = %name, %id, "janitor: deleting a load balancer no KuryrLoadBalancer owns");
        octavia.delete_load_balancer(id).await?;
    }
    Ok(PassReport {
        deleted: found,
        not_active,
    })
}

/// What the janitor works with.
pub struct Janitor {
    /// Octavia.
    pub octavia: Arc<dyn Octavia>,
    /// Neutron (floating IPs).
    pub neutron: Arc<dyn Neutron>,
    /// `[neutron_defaults] external_svc_net` (`None`: no floating-IP pass).
    pub external_net: Option<String>,
    /// What proves ownership.
    pub tags: Vec<String>,
    /// The KLBs.
    pub store: Store<KuryrLoadBalancer>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// `/ready`.
    pub health: Arc<crate::health::Health>,
}

/// Runs [`pass`] (and [`fip_pass`]) every [`INTERVAL`] once the KLBs have listed (never without
/// tags).
pub async fn run(j: Janitor) {
    let Janitor {
        octavia,
        neutron,
        external_net,
        tags,
        store,
        metrics,
        health,
    } = j;
    if tags.is_empty() || !octavia.version().tags() {
        warn!(
            "no resource_tags/cluster_tag (or Octavia without tags): the load balancer janitor does not run"
        );
        return;
    }
    if store.wait_until_ready().await.is_err() {
        return;
    }
    let mut suspects = BTreeSet::new();
    loop {
        tokio::time::sleep(INTERVAL).await;
        match pass(octavia.as_ref(), &tags, &index(&store), &metrics).await {
            Ok(r) => health.set_load_balancers_not_active(r.not_active),
            Err(e) => warn!(error = %crate::error_chain(&e), "load balancer janitor pass failed"),
        }
        if let Some(net) = &external_net {
            match fip_pass(neutron.as_ref(), net, &tags, &recorded_fips(&store), &suspects).await {
                Ok((_, now)) => suspects = now,
                Err(e) => warn!(error = %crate::error_chain(&e), "floating IP janitor pass failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lb(id: &str, name: &str, ps: &str) -> LoadBalancer {
        LoadBalancer {
            id: id.into(),
            name: name.into(),
            provisioning_status: ps.into(),
            ..LoadBalancer::default()
        }
    }

    #[test]
    fn only_unowned_settled_load_balancers_are_orphans() {
        let lbs = [
            lb("a", "ns/kept", "ACTIVE"),
            lb("b", "ns/gone", "ACTIVE"),
            lb("c", "ns/gone-busy", "PENDING_CREATE"),
            lb("d", "ns/kept", "ERROR"),
            lb("e", "ns/being-recorded", "ACTIVE"),
        ];
        let klbs = KlbIndex::from([
            ("ns/kept".to_string(), Some("a".to_string())),
            ("ns/being-recorded".to_string(), None),
        ]);
        assert_eq!(orphans(&lbs, &klbs), ["b", "d"]);
    }

    #[tokio::test]
    async fn a_pass_deletes_orphans_and_counts_by_status() {
        use kuryr_openstack::octavia::{LbCreate, fake::FakeOctavia};
        let fake = FakeOctavia::new();
        let tags = vec!["cluster".to_string()];
        for name in ["ns/a", "ns/b"] {
            fake.create_load_balancer(&LbCreate {
                name: name.into(),
                tags: tags.clone(),
                ..LbCreate::default()
            })
            .await
            .expect("create");
        }
        // Another cluster's (other tags) is never touched.
        fake.create_load_balancer(&LbCreate {
            name: "ns/other".into(),
            ..LbCreate::default()
        })
        .await
        .expect("create");
        let metrics = Metrics::default();
        let klbs = KlbIndex::from([("ns/a".to_string(), None)]);
        let report = pass(&fake, &tags, &klbs, &metrics).await.expect("pass");
        assert_eq!(report.deleted.len(), 1);
        assert_eq!(report.not_active, 0);
        let names: Vec<String> = fake.load_balancers().into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["ns/a", "ns/other"]);
        let text = metrics.render().expect("render");
        assert!(
            text.contains("kuryr_load_balancers{provisioning_status=\"ACTIVE\"} 2"),
            "{text}"
        );
    }

    fn fip(id: &str, port: Option<&str>) -> FloatingIp {
        FloatingIp {
            id: id.into(),
            port_id: port.map(str::to_string),
            ..FloatingIp::default()
        }
    }

    #[test]
    fn a_floating_ip_goes_only_when_free_and_unrecorded_on_two_passes() {
        let fips = [
            fip("on-vip", Some("p")),
            fip("recorded", None),
            fip("orphan", None),
        ];
        let recorded = BTreeSet::from(["recorded".to_string()]);
        let (delete, suspects) = fip_orphans(&fips, &recorded, &BTreeSet::new());
        assert!(delete.is_empty(), "first sight: suspect only");
        assert_eq!(suspects, BTreeSet::from(["orphan".to_string()]));
        let (delete, _) = fip_orphans(&fips, &recorded, &suspects);
        assert_eq!(delete, ["orphan"]);
        // Re-associated in between: not deleted.
        let fips = [fip("orphan", Some("vip"))];
        let (delete, suspects) = fip_orphans(&fips, &recorded, &suspects);
        assert!(delete.is_empty() && suspects.is_empty());
    }

    #[tokio::test]
    async fn a_floating_ip_pass_deletes_only_tagged_orphans_on_the_network() {
        use kuryr_openstack::{FloatingIpCreate, fake::FakeNeutron};
        let neutron = FakeNeutron::new();
        let tags = vec!["cluster".to_string()];
        let ours = neutron
            .create_floating_ip(&FloatingIpCreate {
                floating_network_id: "ext".into(),
                tags: tags.clone(),
                ..FloatingIpCreate::default()
            })
            .await
            .expect("create");
        let users = neutron.add_floating_ip("ext", "172.24.4.200");
        let none = BTreeSet::new();
        let (deleted, suspects) = fip_pass(&neutron, "ext", &tags, &none, &none)
            .await
            .expect("pass");
        assert!(deleted.is_empty());
        let (deleted, _) = fip_pass(&neutron, "ext", &tags, &none, &suspects)
            .await
            .expect("pass");
        assert_eq!(deleted, [ours.id]);
        let left: Vec<String> = neutron.floating_ips().into_iter().map(|f| f.id).collect();
        assert_eq!(left, [users.id], "a user's address is never touched");
    }
}
