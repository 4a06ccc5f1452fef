//! The load balancer janitor: every [`INTERVAL`], this cluster's load balancers (those
//! carrying every configured tag — without tags ownership cannot be proven and nothing runs)
//! whose KuryrLoadBalancer is gone, or that duplicate the one their KLB records, are deleted
//! (cascade). The same listing feeds `kuryr_load_balancers{provisioning_status}` and the
//! count of load balancers not ACTIVE that `/ready` reports.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

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
    let lbs = octavia
        .list_load_balancers(&LbFilter {
            tags: tags.to_vec(),
            ..LbFilter::default()
        })
        .await?;
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

/// Runs [`pass`] every [`INTERVAL`] once `store` has listed (never without tags).
pub async fn run(
    octavia: Arc<dyn Octavia>,
    tags: Vec<String>,
    store: Store<KuryrLoadBalancer>,
    metrics: Arc<Metrics>,
    health: Arc<crate::health::Health>,
) {
    if tags.is_empty() || !octavia.version().tags() {
        warn!(
            "no resource_tags/cluster_tag (or Octavia without tags): the load balancer janitor does not run"
        );
        return;
    }
    if store.wait_until_ready().await.is_err() {
        return;
    }
    loop {
        tokio::time::sleep(INTERVAL).await;
        match pass(octavia.as_ref(), &tags, &index(&store), &metrics).await {
            Ok(r) => health.set_load_balancers_not_active(r.not_active),
            Err(e) => warn!(error = %crate::error_chain(&e), "load balancer janitor pass failed"),
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
}
