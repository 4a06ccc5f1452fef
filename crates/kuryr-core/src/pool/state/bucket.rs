//! One pool's buckets: available ports grouped by SG set, least recently updated group first,
//! plus the pool's counters, population flag and back-off.

use std::{
    collections::{BTreeSet, VecDeque},
    time::{Duration, Instant},
};

use crate::pool::{PodKey, SgSet, TicketId};

/// Available ports of one SG set, oldest first.
#[derive(Debug, Clone, Default)]
pub(super) struct Group {
    pub(super) sgs: SgSet,
    pub(super) ports: VecDeque<String>,
}

/// One pool.
#[derive(Debug, Clone, Default)]
pub(super) struct Pool {
    /// SG groups, least recently updated first.
    pub(super) groups: Vec<Group>,
    /// The population in flight (never two).
    pub(super) populating: Option<TicketId>,
    /// Failed population: no new one before `.0`; `.1` is the current delay.
    pub(super) backoff: Option<(Instant, Duration)>,
    /// Pods that asked and got nothing since.
    pub(super) waiting: BTreeSet<PodKey>,
    /// SG set of the last request: what background populations create.
    pub(super) last_sgs: SgSet,
    pub(super) in_use: u32,
    pub(super) cooling: u32,
    /// Ports of a previous controller's bulk creation, not settled yet (see `settle.rs`).
    pub(super) deferred: BTreeSet<String>,
    /// This pool's unknown ports at the last settle look (`None`: no look yet, or busy).
    pub(super) last_look: Option<BTreeSet<String>>,
}

impl Pool {
    pub(super) fn available(&self) -> u32 {
        self.groups.iter().map(|g| g.ports.len() as u32).sum()
    }

    /// Group of `sgs`, created at the most-recent end when missing.
    pub(super) fn group_mut(&mut self, sgs: &SgSet) -> &mut Group {
        let idx = match self.groups.iter().position(|g| &g.sgs == sgs) {
            Some(i) => i,
            None => {
                self.groups.push(Group {
                    sgs: sgs.clone(),
                    ports: VecDeque::new(),
                });
                self.groups.len() - 1
            }
        };
        &mut self.groups[idx]
    }

    /// Moves the group of `sgs` to the most-recently-updated end.
    pub(super) fn touch(&mut self, sgs: &SgSet) {
        if let Some(i) = self.groups.iter().position(|g| &g.sgs == sgs) {
            let g = self.groups.remove(i);
            self.groups.push(g);
        }
    }

    /// Appends a port to its SG group and marks the group most recently updated.
    pub(super) fn push_available(&mut self, sgs: &SgSet, port_id: String) {
        self.group_mut(sgs).ports.push_back(port_id);
        self.touch(sgs);
    }

    /// Takes the oldest port of the exact group, else of the least recently updated
    /// non-empty group. Returns the port and the SG set it had.
    pub(super) fn take(&mut self, sgs: &SgSet) -> Option<(String, SgSet)> {
        if let Some(g) = self.groups.iter_mut().find(|g| &g.sgs == sgs)
            && let Some(p) = g.ports.pop_front()
        {
            return Some((p, sgs.clone()));
        }
        let g = self.groups.iter_mut().find(|g| !g.ports.is_empty())?;
        let p = g.ports.pop_front()?;
        Some((p, g.sgs.clone()))
    }

    /// Ports counted against `ports_pool_max`: available, cooling and deferred.
    pub(super) fn pooled(&self) -> u32 {
        self.available() + self.cooling + self.deferred.len() as u32
    }

    pub(super) fn is_idle(&self) -> bool {
        self.available() == 0
            && self.in_use == 0
            && self.cooling == 0
            && self.populating.is_none()
            && self.deferred.is_empty()
    }
}
