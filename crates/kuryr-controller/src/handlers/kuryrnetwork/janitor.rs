//! The namespace-network janitor (upstream's `cleanup_dead_networks`, done safely): a network
//! carrying this cluster's tags and named like a namespace network (`<UID>/<namespace>`) that
//! no KuryrNetwork references, seen so in two passes in a row, is detached from the pod
//! router and deleted. Only with tags (ownership must be provable) and only in the running
//! (leader) controller; every `[vif_pool] ports_pool_janitor_interval` (zero: off), like the
//! port janitor.

use std::{collections::HashSet, sync::Mutex, time::Duration};

use kube::runtime::reflector::Store;
use kuryr_openstack::{Network, Neutron, ResourceFilter};
use kuryr_types::KuryrNetwork;
use tracing::{info, warn};

use super::{neutron as ops, neutron::NetSettings, plan};

/// Networks to delete now, and the candidates to confirm on the next pass.
pub fn orphan_networks(
    networks: &[Network],
    kns: &[KuryrNetwork],
    seen_before: &HashSet<String>,
) -> (Vec<Network>, HashSet<String>) {
    let referenced: HashSet<&str> = kns
        .iter()
        .filter_map(|k| k.status.as_ref()?.net_id.as_deref())
        .collect();
    // A KuryrNetwork still building (no netId yet) may own a network it has not recorded.
    let building: HashSet<String> = kns
        .iter()
        .filter(|k| k.status.as_ref().and_then(|s| s.net_id.as_ref()).is_none())
        .map(|k| k.spec.ns_name.clone())
        .collect();
    let mut now = HashSet::new();
    let mut delete = Vec::new();
    for n in networks {
        let Some((_, ns)) = n.name.split_once('/') else {
            continue;
        };
        if !plan::is_namespace_network_name(&n.name, ns)
            || referenced.contains(n.id.as_str())
            || building.contains(ns)
        {
            continue;
        }
        if seen_before.contains(&n.id) {
            delete.push(n.clone());
        } else {
            now.insert(n.id.clone());
        }
    }
    (delete, now)
}

/// The janitor's memory between passes.
#[derive(Debug, Default)]
pub struct Janitor {
    seen: Mutex<HashSet<String>>,
}

impl Janitor {
    /// One pass: lists the tagged networks, deletes the confirmed orphans; returns how many
    /// were deleted. Failures are logged and retried on the next pass.
    pub async fn sweep(&self, neutron: &dyn Neutron, s: &NetSettings, kns: &Store<KuryrNetwork>) -> usize {
        if s.tags.is_empty() {
            return 0;
        }
        let networks = match neutron
            .list_networks(&ResourceFilter::tagged(s.tags.clone()))
            .await
        {
            Ok(n) => n,
            Err(e) => {
                warn!(error = %e, "network janitor: listing networks failed");
                return 0;
            }
        };
        let kns: Vec<KuryrNetwork> = kns.state().iter().map(|k| KuryrNetwork::clone(k)).collect();
        let (delete, candidates) = {
            let seen = self.seen.lock().map(|g| g.clone()).unwrap_or_default();
            orphan_networks(&networks, &kns, &seen)
        };
        let mut deleted = 0;
        for n in delete {
            let subnets = neutron
                .list_subnets(&ResourceFilter {
                    network_id: Some(n.id.clone()),
                    ..Default::default()
                })
                .await
                .unwrap_or_default();
            let mut res = Ok(());
            for sub in subnets.iter() {
                res = ops::teardown_interface(neutron, s.router.as_deref(), &sub.id).await;
                if res.is_err() {
                    break;
                }
            }
            if res.is_ok() {
                res = ops::teardown(neutron, None, None, &n.id, &s.tags).await;
            }
            match res {
                Ok(()) => {
                    deleted += 1;
                    info!(network = %n.id, name = %n.name, "network janitor: orphaned namespace network deleted");
                }
                Err(e) => warn!(network = %n.id, error = %e, "network janitor: deleting failed"),
            }
        }
        if let Ok(mut seen) = self.seen.lock() {
            *seen = candidates;
        }
        deleted
    }

    /// Runs passes every `interval` until dropped.
    pub async fn run(
        &self,
        neutron: &dyn Neutron,
        s: &NetSettings,
        kns: Store<KuryrNetwork>,
        interval: Duration,
    ) {
        if s.tags.is_empty() || interval.is_zero() {
            return std::future::pending().await;
        }
        // Before the KuryrNetworks are listed every network of ours looks orphaned.
        if kns.wait_until_ready().await.is_err() {
            return;
        }
        loop {
            tokio::time::sleep(interval).await;
            self.sweep(neutron, s, &kns).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_types::{KuryrNetworkSpec, KuryrNetworkStatus};

    fn net(id: &str, name: &str) -> Network {
        Network {
            id: id.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    fn kn(ns: &str, net_id: Option<&str>) -> KuryrNetwork {
        let mut k = KuryrNetwork::new(
            ns,
            KuryrNetworkSpec {
                ns_name: ns.into(),
                project_id: "p".into(),
                ns_labels: Default::default(),
            },
        );
        k.status = Some(KuryrNetworkStatus {
            net_id: net_id.map(Into::into),
            ..Default::default()
        });
        k
    }

    #[test]
    fn orphans_are_confirmed_on_the_second_pass() {
        let uid = "581601bf-509c-4123-ad20-0c9968e20ccf";
        let nets = [
            net("used", &format!("{uid}/a")),
            net("orphan", &format!("{uid}/b")),
            net("building", &format!("{uid}/c")),
            net("foreign", "some-other-network"),
        ];
        let kns = [kn("a", Some("used")), kn("c", None)];
        let (delete, seen) = orphan_networks(&nets, &kns, &HashSet::new());
        assert!(delete.is_empty());
        assert_eq!(seen, HashSet::from(["orphan".to_string()]));
        let (delete, seen) = orphan_networks(&nets, &kns, &seen);
        assert_eq!(
            delete.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
            ["orphan"]
        );
        assert!(seen.is_empty());
        // Referenced meanwhile: kept.
        let kns2 = [kn("a", Some("used")), kn("b", Some("orphan"))];
        let (delete, _) = orphan_networks(&nets, &kns2, &HashSet::from(["orphan".to_string()]));
        assert!(delete.is_empty());
    }
}
