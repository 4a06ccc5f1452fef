//! Restart recovery: the pools are rebuilt from Neutron (this cluster's tagged `compute:kuryr`
//! ports, plus any port a KuryrPort references) and the KuryrPorts, before any request is
//! served. No in-memory state needs to survive a restart.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, atomic::Ordering},
    time::Instant,
};

use kube::ResourceExt;
use kuryr_core::pool::{InUseRef, PodKey, PoolState, RecoveryReport};
use kuryr_openstack::PortFilter;
use kuryr_types::KuryrPort;
use tracing::info;

use super::{Error, VifPool, lock};

/// The ports KuryrPorts reference: one per VIF in `status.vifs`, the pool host being
/// `spec.podNodeName`.
pub fn in_use_refs(kuryrports: &[KuryrPort]) -> Vec<InUseRef> {
    let mut out = Vec::new();
    for kp in kuryrports {
        let Some(status) = &kp.status else { continue };
        let pod = PodKey::new(kp.namespace().unwrap_or_default(), kp.name_any());
        // An unreadable entry naming a port still holds it: the pod may be wired with it.
        let ids = status.vifs.values().filter_map(|e| e.vif.id.clone()).chain(
            status
                .invalid
                .values()
                .filter_map(|e| e.port_id().map(String::from)),
        );
        for id in ids {
            out.push(InUseRef {
                port_id: id,
                pod: pod.clone(),
                host: kp.spec.pod_node_name.clone(),
            });
        }
    }
    out
}

impl VifPool {
    /// Rebuilds the pools from `refs` (see [`in_use_refs`]) and Neutron, deletes the unusable
    /// ports recovery finds (unbound, binding failed), and marks the pool recovered. The report
    /// lists KuryrPorts whose port is gone (`missing`) or shared (`conflicts`): the caller gives
    /// those pods new ports.
    pub async fn recover(self: &Arc<Self>, refs: Vec<InUseRef>) -> Result<RecoveryReport, Error> {
        let started = Instant::now();
        self.attach.refresh().await?;
        let mut ports = self.cluster_ports("this cluster's ports").await?;
        let listed: HashSet<String> = ports.iter().map(|p| p.id.clone()).collect();
        let extra: Vec<String> = refs
            .iter()
            .map(|r| r.port_id.clone())
            .filter(|id| !listed.contains(id))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if !extra.is_empty() {
            let more = self
                .neutron
                .list_ports(&PortFilter::ids(extra))
                .await
                .map_err(|source| Error::ListPorts {
                    what: "ports KuryrPorts reference",
                    source,
                })?;
            ports.extend(more.into_iter().filter_map(|p| self.attach.pool_view(p)));
        }
        let was_busy = super::settle::recently_active(&ports, jiff::Timestamp::now());
        let (mut state, report) = PoolState::recover(
            self.settings.pool.clone(),
            refs,
            &ports,
            self.settings.ownership(),
            (Instant::now(), jiff::Timestamp::now()),
            self.settings.janitor_min_age,
        );
        {
            let known: HashMap<String, _> = ports
                .into_iter()
                .filter(|p| state.port(&p.id).is_some())
                .map(|p| (p.id.clone(), p))
                .collect();
            *lock(&self.ports) = known;
            let mut current = self.state();
            // Bulk creations sent before recovery (a KuryrNetwork population can start as soon
            // as its watch syncs) complete into their own pools.
            state.adopt_in_flight(&mut current);
            *current = state;
        }
        let to_delete: Vec<String> = report.to_delete.iter().map(|(id, _)| id.clone()).collect();
        if !to_delete.is_empty() {
            let me = self.clone();
            tokio::spawn(async move {
                let _ = me.delete_many(&to_delete).await;
            });
        }
        self.recovered.store(true, Ordering::SeqCst);
        // Ports of the previous controller's bulk creation still in flight, if it was busy.
        if was_busy || !report.deferred.is_empty() {
            tokio::spawn(self.clone().settle_after_restart());
        }
        // Pools of nodes deleted while no controller ran.
        let me = self.clone();
        tokio::spawn(async move { me.free_pools_of_missing_nodes().await });
        self.publish_stats();
        self.changed.send_modify(|v| *v += 1);
        info!(
            in_use = report.in_use.len(),
            available = report.available.len(),
            cooling = report.cooling.len(),
            deleting = report.to_delete.len(),
            missing = report.missing.len(),
            conflicts = report.conflicts.len(),
            deferred = report.deferred.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "pools recovered"
        );
        Ok(report)
    }
}
