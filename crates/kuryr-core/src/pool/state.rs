//! [`PoolState`]: the ports, pools and tickets, and the transitions between them.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    time::{Duration, Instant},
};

use super::{
    Decision, PodKey, PoolError, PoolKey, PoolStats, PopulateRequest, PopulationOutcome, PortAction,
    PortInfo, PortState, ReleaseDecision, SgSet, Take, TickOutcome, TicketId, WaitReason, plan,
};
use crate::config::PoolConfig;

mod bucket;
mod invariants;
mod maintenance;
mod settle;

use bucket::Pool;

/// First back-off after a failed population; doubled per failure.
const BACKOFF_INITIAL: Duration = Duration::from_secs(2);
/// Longest back-off after failed populations (quota errors last until an operator acts).
const BACKOFF_MAX: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct Entry {
    key: PoolKey,
    sgs: SgSet,
    state: PortState,
}

#[derive(Debug, Clone)]
struct Ticket {
    req: PopulateRequest,
    cancelled: bool,
}

/// The pools. See the [module docs](super) and the crate's life-cycle diagram.
#[derive(Debug, Clone)]
pub struct PoolState {
    cfg: PoolConfig,
    pools: BTreeMap<PoolKey, Pool>,
    ports: HashMap<String, Entry>,
    cooling: BTreeSet<(Instant, String)>,
    tickets: BTreeMap<TicketId, Ticket>,
    next_ticket: TicketId,
    closed_networks: BTreeSet<String>,
    /// Hosts whose node is gone: like closed networks, no port is handed out or created there.
    closed_hosts: BTreeSet<String>,
    /// Ports in use per pod (index for idempotent requests).
    holders: HashMap<PodKey, Vec<String>>,
}

impl PoolState {
    /// An empty state (a fresh cluster, or tests). After a restart use [`PoolState::recover`].
    pub fn new(cfg: PoolConfig) -> Self {
        PoolState {
            cfg,
            pools: BTreeMap::new(),
            ports: HashMap::new(),
            cooling: BTreeSet::new(),
            tickets: BTreeMap::new(),
            next_ticket: 1,
            closed_networks: BTreeSet::new(),
            closed_hosts: BTreeSet::new(),
            holders: HashMap::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PoolConfig {
        &self.cfg
    }

    /// A port for `pod` in pool `key` with security groups `sgs`.
    ///
    /// # Guarantees
    /// * A port with exactly `sgs` is taken with no action unless `port_debug` (rename) — zero
    ///   Neutron writes on the hot path.
    /// * Idempotent: a pod that already holds a port of this pool gets the same port back.
    /// * At most one population per pool and `max_concurrent_bulk` overall are in flight.
    pub fn request(&mut self, pod: &PodKey, key: &PoolKey, sgs: &SgSet, now: Instant) -> Decision {
        let held = self.holders.get(pod).into_iter().flatten();
        if let Some(id) = held
            .into_iter()
            .find(|id| self.ports.get(*id).is_some_and(|e| &e.key == key))
        {
            return Decision::Take(Take {
                port_id: id.clone(),
                actions: Vec::new(),
                already_assigned: true,
                populate: None,
            });
        }
        if self.closed_networks.contains(&key.network_id) {
            return Decision::Wait {
                reason: WaitReason::NetworkClosed,
                populate: None,
            };
        }
        if self.closed_hosts.contains(&key.host) {
            return Decision::Wait {
                reason: WaitReason::HostClosed,
                populate: None,
            };
        }
        let port_debug = self.cfg.port_debug;
        let pool = self.pools.entry(key.clone()).or_default();
        pool.last_sgs = sgs.clone();
        if let Some((port_id, had)) = pool.take(sgs) {
            pool.waiting.remove(pod);
            pool.in_use += 1;
            let mut actions = Vec::new();
            if &had != sgs {
                actions.push(PortAction::SetSecurityGroups(sgs.clone()));
            }
            if port_debug {
                actions.push(PortAction::RenameForPod(pod.clone()));
            }
            if let Some(e) = self.ports.get_mut(&port_id) {
                e.sgs = sgs.clone();
                e.state = PortState::InUse(pod.clone());
            }
            self.holders.entry(pod.clone()).or_default().push(port_id.clone());
            let populate = self.maybe_populate(key, now);
            return Decision::Take(Take {
                port_id,
                actions,
                already_assigned: false,
                populate,
            });
        }
        let (newly_waiting, populating, backoff) = (
            pool.waiting.insert(pod.clone()),
            pool.populating.is_some(),
            pool.backoff,
        );
        if newly_waiting {
            // Waiting here now: not in a pool it waited on before (its pod moved networks).
            for (k, other) in self.pools.iter_mut() {
                if k != key {
                    other.waiting.remove(pod);
                }
            }
        }
        if populating {
            return Decision::Wait {
                reason: WaitReason::PopulationInFlight,
                populate: None,
            };
        }
        if let Some((until, _)) = backoff
            && until > now
        {
            return Decision::Wait {
                reason: WaitReason::Backoff { until },
                populate: None,
            };
        }
        if self.tickets.len() >= self.cfg.max_concurrent_bulk as usize {
            return Decision::Wait {
                reason: WaitReason::ConcurrencyLimit,
                populate: None,
            };
        }
        match self.maybe_populate(key, now) {
            Some(req) => Decision::Wait {
                reason: WaitReason::Populating,
                populate: Some(req),
            },
            None => {
                let until = self
                    .cooling
                    .iter()
                    .find(|(_, id)| self.ports.get(id).is_some_and(|e| &e.key == key))
                    .map(|(t, _)| *t);
                Decision::Wait {
                    reason: WaitReason::AtMax { until },
                    populate: None,
                }
            }
        }
    }

    /// Issues a population for `key` if [`plan`] asks for one and the bounds allow it.
    fn maybe_populate(&mut self, key: &PoolKey, now: Instant) -> Option<PopulateRequest> {
        if self.tickets.len() >= self.cfg.max_concurrent_bulk as usize
            || self.is_closed(&key.network_id, &key.host)
        {
            return None;
        }
        let stats = self.pool_stats(key);
        let pool = self.pools.get_mut(key)?;
        if pool.populating.is_some() || pool.backoff.is_some_and(|(until, _)| until > now) {
            return None;
        }
        let p = plan(&stats, &self.cfg);
        if p.create == 0 {
            return None;
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        pool.populating = Some(ticket);
        let req = PopulateRequest {
            ticket,
            key: key.clone(),
            count: p.create,
            sgs: pool.last_sgs.clone(),
        };
        self.tickets.insert(
            ticket,
            Ticket {
                req: req.clone(),
                cancelled: false,
            },
        );
        Some(req)
    }

    /// Takes over the populations `old` has in flight, for a state rebuilt (by recovery) while
    /// bulk creations this process sent are still under way: each ticket keeps its number and
    /// its pool, and new tickets are numbered after them. Without this the rebuilt state
    /// numbered its tickets from 1 again, and a bulk sent before the rebuild completed an
    /// unrelated new ticket: its ports, bound to one node, went into another node's pool (seen
    /// in CI: pods whose ports OVN would not bind on their node).
    pub fn adopt_in_flight(&mut self, old: &mut PoolState) {
        self.next_ticket = self.next_ticket.max(old.next_ticket);
        for (id, t) in std::mem::take(&mut old.tickets) {
            let pool = self.pools.entry(t.req.key.clone()).or_default();
            if pool.populating.is_none() {
                pool.populating = Some(id);
            }
            self.next_ticket = self.next_ticket.max(id + 1);
            self.tickets.insert(id, t);
        }
    }

    /// Starts populating `key` with `sgs` ahead of any pod (upstream's KuryrNetwork
    /// population / pool manager), if the pool is below its minimum.
    pub fn prepopulate(&mut self, key: &PoolKey, sgs: &SgSet, now: Instant) -> Option<PopulateRequest> {
        if self.is_closed(&key.network_id, &key.host) {
            return None;
        }
        let pool = self.pools.entry(key.clone()).or_default();
        pool.last_sgs = sgs.clone();
        self.maybe_populate(key, now)
    }

    /// Starts a population of exactly `count` ports for `key` with `sgs` whatever the pool's
    /// size (upstream's `force_populate_pool`, the pool manager's `populatePool`), still never
    /// two per pool, never beyond `max_concurrent_bulk`, never beyond `ports_pool_max` pooled
    /// ports, never on a closed network. `None` when one of those bounds refuses it.
    pub fn populate_now(
        &mut self,
        key: &PoolKey,
        sgs: &SgSet,
        count: u32,
        now: Instant,
    ) -> Option<PopulateRequest> {
        if count == 0
            || self.is_closed(&key.network_id, &key.host)
            || self.tickets.len() >= self.cfg.max_concurrent_bulk as usize
        {
            return None;
        }
        let stats = self.pool_stats(key);
        let pool = self.pools.entry(key.clone()).or_default();
        if pool.populating.is_some() || pool.backoff.is_some_and(|(until, _)| until > now) {
            return None;
        }
        let count = if self.cfg.max == 0 {
            count
        } else {
            count.min(
                self.cfg
                    .max
                    .saturating_sub(stats.available + stats.cooling + stats.deferred),
            )
        };
        if count == 0 {
            return None;
        }
        pool.last_sgs = sgs.clone();
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        pool.populating = Some(ticket);
        let req = PopulateRequest {
            ticket,
            key: key.clone(),
            count,
            sgs: sgs.clone(),
        };
        self.tickets.insert(
            ticket,
            Ticket {
                req: req.clone(),
                cancelled: false,
            },
        );
        Some(req)
    }

    /// Adds a port the executor found in Neutron but the state does not know (a bulk creation
    /// whose answer was lost to a timeout created it after all) as available in `key` under
    /// `sgs`. Returns `false` if the port is already known or its network is closed.
    pub fn adopt_available(&mut self, port_id: &str, key: PoolKey, sgs: SgSet) -> bool {
        if self.is_closed(&key.network_id, &key.host) {
            return false;
        }
        self.adopt(port_id, key, sgs, PortState::Available)
    }

    /// Ports in use by `pod` (normally one).
    pub fn held_by(&self, pod: &PodKey) -> &[String] {
        self.holders.get(pod).map_or(&[], Vec::as_slice)
    }

    /// The ports a population created. They become available under the ticket's SG set,
    /// marked most recently updated; if the pool was deleted meanwhile they are to be deleted.
    pub fn complete_population(
        &mut self,
        ticket: TicketId,
        port_ids: impl IntoIterator<Item = String>,
    ) -> Result<PopulationOutcome, PoolError> {
        let t = self
            .tickets
            .remove(&ticket)
            .ok_or(PoolError::UnknownTicket { ticket })?;
        let key = t.req.key;
        let mut out = PopulationOutcome::default();
        let pool = self.pools.get_mut(&key);
        let cancelled = t.cancelled || pool.is_none();
        if let Some(pool) = pool
            && pool.populating == Some(ticket)
        {
            pool.populating = None;
            pool.backoff = None;
            // Waiting pods are woken, retry and take the new ports; until each has, it still
            // counts as waiting, so the population that a take starts is sized to all of
            // them (`plan`). A pod that goes away meanwhile is forgotten by `forget_pod`.
        }
        for id in port_ids {
            if self.ports.contains_key(&id) {
                out.duplicates.push(id);
                continue;
            }
            let state = if cancelled {
                PortState::Deleting
            } else {
                PortState::Available
            };
            self.ports.insert(
                id.clone(),
                Entry {
                    key: key.clone(),
                    sgs: t.req.sgs.clone(),
                    state,
                },
            );
            if cancelled {
                out.delete.push(id);
            } else {
                if let Some(pool) = self.pools.get_mut(&key) {
                    pool.push_available(&t.req.sgs, id.clone());
                }
                out.added.push(id);
            }
        }
        Ok(out)
    }

    /// The population failed (nothing was created): the pool backs off, doubling the delay.
    pub fn fail_population(&mut self, ticket: TicketId, now: Instant) -> Result<(), PoolError> {
        let t = self
            .tickets
            .remove(&ticket)
            .ok_or(PoolError::UnknownTicket { ticket })?;
        if let Some(pool) = self.pools.get_mut(&t.req.key)
            && pool.populating == Some(ticket)
        {
            pool.populating = None;
            let delay = match pool.backoff {
                Some((_, d)) => (d * 2).min(BACKOFF_MAX),
                None => BACKOFF_INITIAL,
            };
            pool.backoff = Some((now + delay, delay));
        }
        Ok(())
    }

    /// A pod's port is released (upstream `release_vif`: no Neutron call). It cools down
    /// before reuse, or is deleted if the pool already holds `ports_pool_max` ports.
    pub fn release(&mut self, port_id: &str, now: Instant) -> Result<ReleaseDecision, PoolError> {
        let e = self.ports.get(port_id).ok_or_else(|| PoolError::UnknownPort {
            port_id: port_id.to_string(),
        })?;
        match &e.state {
            PortState::InUse(pod) => {
                if let Some(v) = self.holders.get_mut(pod) {
                    v.retain(|p| p != port_id);
                    if v.is_empty() {
                        self.holders.remove(pod);
                    }
                }
            }
            PortState::Cooling(_) | PortState::Deleting => return Ok(ReleaseDecision::AlreadyReleased),
            s @ PortState::Available => {
                return Err(PoolError::NotInUse {
                    port_id: port_id.to_string(),
                    state: s.clone(),
                });
            }
        }
        let key = e.key.clone();
        let closed = self.is_closed(&key.network_id, &key.host);
        let pool = self.pools.entry(key).or_default();
        pool.in_use = pool.in_use.saturating_sub(1);
        let full = self.cfg.max != 0 && pool.pooled() >= self.cfg.max;
        let e = self
            .ports
            .get_mut(port_id)
            .ok_or_else(|| PoolError::UnknownPort {
                port_id: port_id.into(),
            })?;
        if closed || full {
            e.state = PortState::Deleting;
            return Ok(ReleaseDecision::Delete);
        }
        let until = now + self.cfg.cooldown;
        e.state = PortState::Cooling(until);
        pool.cooling += 1;
        self.cooling.insert((until, port_id.to_string()));
        let actions = if self.cfg.port_debug {
            vec![PortAction::ResetName]
        } else {
            Vec::new()
        };
        Ok(ReleaseDecision::Cooldown { until, actions })
    }

    /// The security groups of an in-use port were changed by the caller (policy updates).
    pub fn set_port_sgs(&mut self, port_id: &str, sgs: SgSet) -> Result<(), PoolError> {
        let e = self
            .ports
            .get_mut(port_id)
            .ok_or_else(|| PoolError::UnknownPort {
                port_id: port_id.to_string(),
            })?;
        match e.state {
            PortState::InUse(_) | PortState::Cooling(_) | PortState::Deleting => {
                e.sgs = sgs;
                Ok(())
            }
            PortState::Available => Err(PoolError::NotInUse {
                port_id: port_id.into(),
                state: e.state.clone(),
            }),
        }
    }

    /// A pod went away without a port (its KuryrPort was deleted while it waited): it no
    /// longer counts as waiting in any pool.
    pub fn forget_pod(&mut self, pod: &PodKey) {
        for pool in self.pools.values_mut() {
            pool.waiting.remove(pod);
        }
    }

    /// The executor deleted the port (or found it gone): forget it. Returns whether it was
    /// known and in `deleting`.
    pub fn confirm_deleted(&mut self, port_id: &str) -> bool {
        if self
            .ports
            .get(port_id)
            .is_some_and(|e| e.state == PortState::Deleting)
        {
            self.ports.remove(port_id);
            true
        } else {
            false
        }
    }

    /// The periodic pass (`ports_pool_update_frequency`): cooled-down ports become available
    /// (or are deleted above `ports_pool_max`), pools below `ports_pool_min` get populations
    /// (pools with waiting pods first, then by deficit, within `max_concurrent_bulk`), pools
    /// above `ports_pool_max` are trimmed, idle pools of deleted networks are dropped.
    pub fn tick(&mut self, now: Instant) -> TickOutcome {
        let mut out = TickOutcome::default();
        while let Some((until, id)) = self.cooling.first().cloned() {
            if until > now {
                break;
            }
            self.cooling.pop_first();
            let Some(e) = self.ports.get_mut(&id) else {
                continue;
            };
            let key = e.key.clone();
            let sgs = e.sgs.clone();
            let closed =
                self.closed_networks.contains(&key.network_id) || self.closed_hosts.contains(&key.host);
            let pool = self.pools.entry(key).or_default();
            pool.cooling = pool.cooling.saturating_sub(1);
            let full = self.cfg.max != 0 && pool.pooled() >= self.cfg.max;
            if closed || full {
                e.state = PortState::Deleting;
                out.delete.push(id);
            } else {
                e.state = PortState::Available;
                pool.push_available(&sgs, id.clone());
                out.ready.push(id);
            }
        }
        // Trim and rank populations.
        let mut candidates: Vec<(u32, u32, PoolKey)> = Vec::new();
        let keys: Vec<PoolKey> = self.pools.keys().cloned().collect();
        for key in keys {
            let stats = self.pool_stats(&key);
            let p = plan(&stats, &self.cfg);
            if p.trim > 0 {
                let pool = self.pools.get_mut(&key).expect("key listed above");
                let mut trimmed = Vec::new();
                'outer: for g in pool.groups.iter_mut() {
                    while let Some(id) = g.ports.pop_front() {
                        trimmed.push(id);
                        if trimmed.len() as u32 == p.trim {
                            break 'outer;
                        }
                    }
                }
                for id in trimmed {
                    if let Some(e) = self.ports.get_mut(&id) {
                        e.state = PortState::Deleting;
                    }
                    out.delete.push(id);
                }
            }
            // A pool of no host holds the unbound ports a settle look or recovery tracks (the
            // nested pools create theirs unbound): there is no node to create ports for.
            if p.create > 0 && !key.host.is_empty() {
                let deficit = self.cfg.min.saturating_sub(stats.available + stats.populating);
                candidates.push((stats.waiting, deficit, key));
            }
        }
        candidates.sort_by(|a, b| (b.0, b.1).cmp(&(a.0, a.1)).then_with(|| a.2.cmp(&b.2)));
        for (_, _, key) in candidates {
            if let Some(req) = self.maybe_populate(&key, now) {
                out.populate.push(req);
            }
        }
        let (nets, hosts) = (&self.closed_networks, &self.closed_hosts);
        self.pools.retain(|k, p| {
            let gone = nets.contains(&k.network_id) || hosts.contains(&k.host) || k.host.is_empty();
            !(gone && p.is_idle())
        });
        out
    }

    /// Counters of one pool (zeros for an unknown pool).
    pub fn pool_stats(&self, key: &PoolKey) -> PoolStats {
        let Some(pool) = self.pools.get(key) else {
            return PoolStats::default();
        };
        PoolStats {
            available: pool.available(),
            in_use: pool.in_use,
            cooling: pool.cooling,
            populating: pool
                .populating
                .and_then(|t| self.tickets.get(&t))
                .map_or(0, |t| t.req.count),
            waiting: pool.waiting.len() as u32,
            deferred: pool.deferred.len() as u32,
        }
    }

    /// Counters of every pool, for metrics.
    pub fn stats(&self) -> BTreeMap<PoolKey, PoolStats> {
        self.pools
            .keys()
            .map(|k| (k.clone(), self.pool_stats(k)))
            .collect()
    }

    /// When the first cooling port's cool-down ends (the executor ticks then).
    pub fn next_cooldown_end(&self) -> Option<Instant> {
        self.cooling.first().map(|(t, _)| *t)
    }

    /// No port is handed out on this network any more (its pools were deleted).
    pub fn network_closed(&self, network_id: &str) -> bool {
        self.closed_networks.contains(network_id)
    }

    /// Whether the pool of `(network, host)` is closed (its network deleted or its node gone).
    pub fn is_closed(&self, network_id: &str, host: &str) -> bool {
        self.closed_networks.contains(network_id) || self.closed_hosts.contains(host)
    }

    /// Populations in flight.
    pub fn in_flight(&self) -> usize {
        self.tickets.len()
    }

    /// Where a port is, if known.
    pub fn port(&self, port_id: &str) -> Option<PortInfo> {
        self.ports.get(port_id).map(|e| PortInfo {
            key: e.key.clone(),
            sgs: e.sgs.clone(),
            state: e.state.clone(),
        })
    }

    /// The pool holds this port (available, in use or cooling); `deleting` ports are not
    /// owned any more, so the janitor retries their deletion if the executor's failed.
    pub fn owns(&self, port_id: &str) -> bool {
        self.ports
            .get(port_id)
            .is_some_and(|e| e.state != PortState::Deleting)
    }

    /// IDs of all ports known, in any state.
    pub fn port_ids(&self) -> impl Iterator<Item = &str> {
        self.ports.keys().map(String::as_str)
    }

    /// Adds a port in a given state (recovery). Returns `false` if already known.
    pub(super) fn adopt(&mut self, id: &str, key: PoolKey, sgs: SgSet, state: PortState) -> bool {
        if self.ports.contains_key(id) {
            return false;
        }
        let pool = self.pools.entry(key.clone()).or_default();
        match &state {
            PortState::Available => pool.push_available(&sgs, id.to_string()),
            PortState::InUse(pod) => {
                pool.in_use += 1;
                self.holders.entry(pod.clone()).or_default().push(id.to_string());
            }
            PortState::Cooling(t) => {
                pool.cooling += 1;
                self.cooling.insert((*t, id.to_string()));
            }
            PortState::Deleting => {}
        }
        if pool.last_sgs.is_empty() {
            pool.last_sgs = sgs.clone();
        }
        self.ports.insert(id.to_string(), Entry { key, sgs, state });
        true
    }
}
