//! Bulk changes to the pools: a security group removed, a network's or a node's pools deleted.

use std::{collections::HashSet, time::Instant};

use crate::pool::{PodKey, PoolKey, PoolState, PortState, SgSet};

impl PoolState {
    /// Upstream `remove_sg_from_pools`: on pools of `network_id` (all pools if `None`), every
    /// SG group containing `sg_id` is dissolved; its ports move to the no-SG group, placed
    /// first (reused first). Cooling ports with that SG are moved to no SG too. Returns the
    /// ports whose security groups the executor must clear.
    pub fn remove_sg(&mut self, sg_id: &str, network_id: Option<&str>) -> Vec<String> {
        let mut cleared = Vec::new();
        let empty = SgSet::default();
        for (key, pool) in self.pools.iter_mut() {
            if network_id.is_some_and(|n| n != key.network_id) {
                continue;
            }
            let mut moved: Vec<String> = Vec::new();
            pool.groups.retain_mut(|g| {
                if g.sgs.contains(sg_id) {
                    moved.extend(g.ports.drain(..));
                    false
                } else {
                    true
                }
            });
            if moved.is_empty() {
                continue;
            }
            pool.group_mut(&empty);
            if let Some(i) = pool.groups.iter().position(|g| g.sgs.is_empty()) {
                let mut g = pool.groups.remove(i);
                g.ports.extend(moved.iter().cloned());
                pool.groups.insert(0, g);
            }
            for id in &moved {
                if let Some(e) = self.ports.get_mut(id) {
                    e.sgs = empty.clone();
                }
            }
            cleared.extend(moved);
        }
        for (_, id) in &self.cooling {
            if let Some(e) = self.ports.get_mut(id)
                && network_id.is_none_or(|n| n == e.key.network_id)
                && e.sgs.contains(sg_id)
            {
                e.sgs = empty.clone();
                cleared.push(id.clone());
            }
        }
        cleared.sort();
        cleared
    }

    /// Upstream `delete_network_pools` (KuryrNetwork finalizer): every available and cooling
    /// port of the network's pools is to be deleted, populations in flight are cancelled
    /// (their ports will be deleted on completion), ports in use are deleted when released,
    /// and no new port is handed out on the network.
    pub fn delete_network_pools(&mut self, network_id: &str) -> Vec<String> {
        self.closed_networks.insert(network_id.to_string());
        self.drain(|k| k.network_id == network_id)
    }

    /// The node is gone for good: its pools are drained ([`PoolState::delete_host_pools`]) and
    /// closed as a deleted network's are — no port is handed out or created there, ports
    /// released later are deleted after their cool-down — until [`PoolState::reopen_host`].
    pub fn close_host(&mut self, host: &str) -> Vec<String> {
        self.closed_hosts.insert(host.to_string());
        self.delete_host_pools(host)
    }

    /// A node of that name is back: its pools fill again on demand.
    pub fn reopen_host(&mut self, host: &str) -> bool {
        self.closed_hosts.remove(host)
    }

    /// A node was removed: its pools' available and cooling ports are to be deleted and
    /// populations cancelled. Pools come back on demand if the node does.
    pub fn delete_host_pools(&mut self, host: &str) -> Vec<String> {
        let out = self.drain(|k| k.host == host);
        self.pools.retain(|k, p| k.host != host || !p.is_idle());
        out
    }

    fn drain(&mut self, pred: impl Fn(&PoolKey) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        for (_, pool) in self.pools.iter_mut().filter(|(k, _)| pred(k)) {
            for g in pool.groups.drain(..) {
                out.extend(g.ports);
            }
            pool.cooling = 0;
            pool.waiting.clear();
            if let Some(t) = pool.populating.take()
                && let Some(t) = self.tickets.get_mut(&t)
            {
                t.cancelled = true;
            }
        }
        let cooling: Vec<(Instant, String)> = self
            .cooling
            .iter()
            .filter(|(_, id)| self.ports.get(id).is_some_and(|e| pred(&e.key)))
            .cloned()
            .collect();
        for c in cooling {
            self.cooling.remove(&c);
            out.push(c.1);
        }
        for id in &out {
            if let Some(e) = self.ports.get_mut(id) {
                e.state = PortState::Deleting;
            }
        }
        out.sort();
        out
    }

    /// Ports in use by pods that no longer have a KuryrPort (`live_pods`: the pods of all
    /// KuryrPorts). Upstream leaked these when a user removed a finalizer; the executor
    /// releases them. Keyed by pod, not by port ID, so a take whose KuryrPort status patch
    /// has not landed yet is not mistaken for a leak (the KuryrPort exists before the request).
    pub fn in_use_without(&self, live_pods: &HashSet<PodKey>) -> Vec<(String, PodKey)> {
        let mut out: Vec<(String, PodKey)> = self
            .holders
            .iter()
            .filter(|(pod, _)| !live_pods.contains(*pod))
            .flat_map(|(pod, ids)| ids.iter().map(move |id| (id.clone(), pod.clone())))
            .collect();
        out.sort();
        out
    }
}
