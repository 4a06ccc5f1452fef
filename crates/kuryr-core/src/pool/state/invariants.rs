//! Consistency checks of [`PoolState`], used by the tests after every step.

use std::collections::{BTreeSet, HashMap};

use crate::pool::{PoolKey, PoolState, PortState};

impl PoolState {
    /// Checks that every port is in exactly one place and all counters agree; `Err` names
    /// the first inconsistency. Cheap enough for tests and debug assertions, not the hot path.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut listed: HashMap<&str, &PoolKey> = HashMap::new();
        for (key, pool) in &self.pools {
            let mut seen_sgs = BTreeSet::new();
            for g in &pool.groups {
                if !seen_sgs.insert(&g.sgs) {
                    return Err(format!("pool {key}: two groups for {:?}", g.sgs));
                }
                for id in &g.ports {
                    if listed.insert(id, key).is_some() {
                        return Err(format!("port {id} listed twice"));
                    }
                    match self.ports.get(id) {
                        Some(e) if e.state == PortState::Available && &e.key == key && e.sgs == g.sgs => {}
                        other => return Err(format!("port {id} listed available in {key} but {other:?}")),
                    }
                }
            }
            let in_use = self
                .ports
                .values()
                .filter(|e| &e.key == key && matches!(e.state, PortState::InUse(_)));
            if in_use.count() as u32 != pool.in_use {
                return Err(format!("pool {key}: in_use counter {} is wrong", pool.in_use));
            }
            let cooling = self
                .cooling
                .iter()
                .filter(|(_, id)| self.ports.get(id).is_some_and(|e| &e.key == key));
            if cooling.count() as u32 != pool.cooling {
                return Err(format!("pool {key}: cooling counter {} is wrong", pool.cooling));
            }
            if let Some(t) = pool.populating
                && !self.tickets.contains_key(&t)
            {
                return Err(format!("pool {key}: populating with unknown ticket {t}"));
            }
        }
        for (id, e) in &self.ports {
            let ok = match &e.state {
                PortState::Available => listed.contains_key(id.as_str()),
                PortState::Cooling(t) => {
                    self.cooling.contains(&(*t, id.clone())) && !listed.contains_key(id.as_str())
                }
                PortState::InUse(_) | PortState::Deleting => !listed.contains_key(id.as_str()),
            };
            if !ok {
                return Err(format!("port {id} in state {:?} is misplaced", e.state));
            }
            if matches!(
                e.state,
                PortState::InUse(_) | PortState::Available | PortState::Cooling(_)
            ) && !self.pools.contains_key(&e.key)
            {
                return Err(format!("port {id} belongs to missing pool {}", e.key));
            }
        }
        if self.cooling.len()
            != self
                .ports
                .values()
                .filter(|e| matches!(e.state, PortState::Cooling(_)))
                .count()
        {
            return Err("cooling queue holds unknown or stale ports".into());
        }
        let held: usize = self.holders.values().map(Vec::len).sum();
        let in_use = self
            .ports
            .values()
            .filter(|e| matches!(e.state, PortState::InUse(_)))
            .count();
        if held != in_use {
            return Err(format!("{held} ports indexed by pod but {in_use} in use"));
        }
        for (pod, ids) in &self.holders {
            for id in ids {
                if !self
                    .ports
                    .get(id)
                    .is_some_and(|e| e.state == PortState::InUse(pod.clone()))
                {
                    return Err(format!("port {id} indexed for {pod} but not in use by it"));
                }
            }
        }
        let per_pool = self.pools.values().filter(|p| p.populating.is_some()).count();
        let live = self.tickets.values().filter(|t| !t.cancelled).count();
        if per_pool != live {
            return Err(format!("{per_pool} pools populating but {live} live tickets"));
        }
        if self.tickets.len() > self.cfg.max_concurrent_bulk as usize {
            return Err(format!(
                "{} tickets in flight above the bound",
                self.tickets.len()
            ));
        }
        Ok(())
    }
}
