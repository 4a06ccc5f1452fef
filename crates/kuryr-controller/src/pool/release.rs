//! Giving ports back: release after a pod (cool-down or deletion), deletions, and freeing the
//! pools of a network (before it is deleted) or of hosts (pool manager).

use std::{sync::Arc, time::Instant};

use kuryr_core::{
    config::POOL_PORT_NAME,
    pool::{PodKey, PortState},
};
use kuryr_openstack::PortUpdate;
use tracing::{debug, info, warn};

use super::{Error, VifPool, lock};

impl VifPool {
    /// Releases the pod's ports (`port_ids` from its KuryrPort, plus any port the pool handed
    /// it that the KuryrPort does not reference yet): each port cools down and returns to its
    /// pool, or is deleted when the pool is full or its network is going away. A port the pool
    /// does not know is deleted only when Neutron shows it is ours
    /// ([`kuryr_core::ownership::Ownership::accepts_referenced`]): a KuryrPort's text alone
    /// never makes the controller delete a port.
    pub async fn release(self: &Arc<Self>, pod: &PodKey, port_ids: &[String]) -> Result<(), Error> {
        let mut ids: Vec<String> = port_ids.to_vec();
        {
            let mut st = self.state();
            for id in st.held_by(pod) {
                if !ids.contains(id) {
                    ids.push(id.clone());
                }
            }
            st.forget_pod(pod);
        }
        let mut first_err = None;
        for id in &ids {
            if let Err(e) = self.release_one(pod, id).await {
                warn!(%pod, port = %id, error = %crate::error_chain(&e), "releasing port failed");
                first_err.get_or_insert(e);
            }
        }
        self.publish_stats();
        self.maintenance.notify_one();
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn release_one(&self, pod: &PodKey, id: &str) -> Result<(), Error> {
        let decision = self.state().release(id, Instant::now());
        match decision {
            Ok(kuryr_core::pool::ReleaseDecision::Cooldown { actions, .. }) => {
                debug!(%pod, port = %id, "port cooling down before reuse");
                if !actions.is_empty() {
                    let update = PortUpdate {
                        name: Some(POOL_PORT_NAME.to_string()),
                        device_id: Some(String::new()),
                        ..PortUpdate::default()
                    };
                    // Cosmetic (port_debug): a failure does not keep the port from the pool.
                    match self.neutron.update_port(id, &update).await {
                        Ok(p) => {
                            lock(&self.ports).insert(p.id.clone(), p);
                        }
                        Err(e) => warn!(port = %id, error = %e, "renaming released port failed"),
                    }
                }
                Ok(())
            }
            Ok(kuryr_core::pool::ReleaseDecision::Delete) => self.delete_port(id).await,
            Ok(kuryr_core::pool::ReleaseDecision::AlreadyReleased) => {
                // A retried release after a failed deletion: delete again.
                let deleting = self
                    .state()
                    .port(id)
                    .is_some_and(|p| p.state == PortState::Deleting);
                if deleting {
                    self.delete_port(id).await
                } else {
                    Ok(())
                }
            }
            Err(kuryr_core::pool::PoolError::UnknownPort { .. }) => {
                // A KuryrPort named it, but the pool never took it in: recovery refused it (not
                // ours), or it is gone. Deleted only when Neutron proves it ours.
                if super::owned_reference(&*self.neutron, &self.settings, id)
                    .await?
                    .may_delete(pod, id)
                {
                    info!(%pod, port = %id, "port unknown to the pool, ours: deleting it");
                    self.delete_port(id).await
                } else {
                    Ok(())
                }
            }
            Err(e) => {
                warn!(%pod, port = %id, error = %e, "port not released: not in use");
                Ok(())
            }
        }
    }

    /// Deletes a port (an already deleted one is fine) and forgets it.
    pub(super) async fn delete_port(&self, id: &str) -> Result<(), Error> {
        // Off its trunk first (nested): Neutron refuses to delete a subport.
        self.attach.detach(std::slice::from_ref(&id.to_string())).await?;
        super::delete_port_id(&*self.neutron, id).await?;
        self.state().confirm_deleted(id);
        lock(&self.ports).remove(id);
        debug!(port = %id, "port deleted");
        Ok(())
    }

    /// Deletes the available and cooling ports of the pools of `host` (all hosts if `None`);
    /// the pools stay usable (pool manager `freePool`). Returns how many ports were deleted.
    pub async fn free_pools(self: &Arc<Self>, host: Option<&str>) -> Result<usize, Error> {
        let ids = {
            let mut st = self.state();
            let hosts: Vec<String> = match host {
                Some(h) => vec![h.to_string()],
                None => {
                    let mut hs: Vec<String> = st.stats().into_keys().map(|k| k.host).collect();
                    hs.dedup();
                    hs
                }
            };
            let mut ids = Vec::new();
            for h in hosts {
                ids.extend(st.delete_host_pools(&h));
            }
            ids
        };
        let n = self.delete_many(&ids).await?;
        info!(host = host.unwrap_or("all"), deleted = n, "pools freed");
        Ok(n)
    }

    /// Uninstall (after [`VifPool::quiesce`]): deletes the pools' ports (available and
    /// cooling) and then every port tagged for this cluster that no pod uses: ones the pool
    /// does not know at all (a bulk creation cut off by an earlier crash, which the janitor
    /// would have found later) and ones back in a pool since it was freed.
    /// Ports in use by pods stay: they belong to their KuryrPorts. Without tags only the pools'
    /// ports are deleted (ownership cannot be proven); before recovery has finished nothing is
    /// (the state does not know which ports pods use). Returns how many ports were deleted.
    pub async fn release_for_uninstall(self: &Arc<Self>) -> Result<usize, Error> {
        // Before recovery the state knows no pod's port: every tagged port would look unused.
        if !self.is_recovered() {
            warn!(
                "uninstall: the pools were never recovered; no port is deleted (`kuryrctl ports --orphans` lists what is left)"
            );
            return Ok(0);
        }
        let mut deleted = self.free_pools(None).await?;
        if self.settings.tags.is_empty() {
            return Ok(deleted);
        }
        let ports = self.cluster_ports("uninstall").await?;
        // Ports unknown to the pool, and ports back in a pool since it was freed (a timed-out
        // bulk's ports adopted meanwhile by `adopt_lost_ports`): only ports in use stay.
        let leftover: Vec<String> = {
            let st = self.state();
            ports
                .iter()
                .filter(|p| {
                    st.port(&p.id)
                        .is_none_or(|i| !matches!(i.state, PortState::InUse(_)))
                })
                .map(|p| p.id.clone())
                .collect()
        };
        if !leftover.is_empty() {
            info!(ports = ?leftover, "uninstall: deleting tagged ports no pod uses");
            deleted += self.delete_many(&leftover).await?;
        }
        Ok(deleted)
    }

    /// Deletes every available and cooling pool port of `network_id` (before the network is
    /// deleted, upstream's `delete_network_pools`), cancels its populations, and refuses new
    /// ports on it; ports in use are deleted when released. Returns how many ports were
    /// deleted; on error the call can be repeated.
    pub async fn free_network(self: &Arc<Self>, network_id: &str) -> Result<usize, Error> {
        let ids = {
            let mut st = self.state();
            let mut ids = st.delete_network_pools(network_id);
            // Deletions that failed on an earlier call.
            let retry: Vec<String> = st
                .port_ids()
                .filter(|id| {
                    st.port(id)
                        .is_some_and(|p| p.state == PortState::Deleting && p.key.network_id == network_id)
                })
                .map(str::to_string)
                .collect();
            for id in retry {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            ids
        };
        let n = self.delete_many(&ids).await?;
        self.publish_stats();
        info!(network = %network_id, deleted = n, "network pools freed");
        Ok(n)
    }

    /// See [`super::PortSource::known_security_groups`].
    pub fn known_security_groups(&self, port_id: &str) -> Option<Vec<String>> {
        lock(&self.ports).get(port_id).map(|p| p.security_groups.clone())
    }

    /// See [`super::PortSource::port_updated`].
    pub fn port_updated(&self, port: &kuryr_openstack::Port) {
        lock(&self.ports).insert(port.id.clone(), port.clone());
        let sgs = kuryr_core::pool::SgSet::new(port.security_groups.iter().cloned());
        // A port the pool does not know (not pooled) has no books to keep.
        let _ = self.state().set_port_sgs(&port.id, sgs);
    }

    /// Takes `sg_id` off the pooled ports that carry it (see
    /// [`super::PortSource::remove_security_group`]). Neutron first, then the pool's books: a
    /// failed update leaves the books as they were, so a retry finds the same ports.
    pub async fn remove_security_group(self: &Arc<Self>, sg_id: &str) -> Result<usize, Error> {
        let ids: Vec<String> = {
            let st = self.state();
            st.port_ids()
                .filter(|id| {
                    st.port(id).is_some_and(|p| {
                        p.state != PortState::Deleting
                            && !matches!(p.state, PortState::InUse(_))
                            && p.sgs.contains(sg_id)
                    })
                })
                .map(str::to_string)
                .collect()
        };
        if ids.is_empty() {
            return Ok(0);
        }
        let update = PortUpdate {
            security_groups: Some(Vec::new()),
            ..PortUpdate::default()
        };
        for id in &ids {
            let p = self
                .neutron
                .update_port(id, &update)
                .await
                .map_err(|source| Error::UpdatePort {
                    port_id: id.clone(),
                    what: "security groups",
                    source,
                })?;
            lock(&self.ports).insert(p.id.clone(), p);
        }
        let moved = self.state().remove_sg(sg_id, None);
        info!(security_group_id = %sg_id, ports = moved.len(), "security group taken off pooled ports");
        self.publish_stats();
        Ok(ids.len())
    }
}
