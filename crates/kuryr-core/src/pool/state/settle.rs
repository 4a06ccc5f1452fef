//! Settling the bulk creation a previous controller left in flight. Neutron finishes a bulk
//! request whose sender died (it does not notice), so ports of ours can appear after a restarted
//! controller listed them. Such ports are first *deferred* — counted against `ports_pool_max`,
//! never handed out, never deleted (deleting one of a bulk Neutron is still binding makes it
//! roll back the whole bulk) — and settled once the bulk is over: two looks in a row see the
//! same unknown ports in the pool and none of them is still being bound. Settled ports go where
//! the janitor would put them (usable ones in their pool, the others deleted).

use std::{collections::BTreeSet, time::Duration, time::Instant};

use super::PoolState;
use crate::{
    neutron::Port,
    ownership::Ownership,
    pool::{
        PoolKey,
        recovery::{pool_key, younger_than},
    },
};

impl PoolState {
    /// Records `id`, found at recovery in a pool whose bulk creation is still in flight.
    pub(in crate::pool) fn defer(&mut self, key: PoolKey, id: String) {
        self.pools.entry(key).or_default().deferred.insert(id);
    }

    /// Forgets `id` as deferred (the janitor adopted or deleted it).
    pub(in crate::pool) fn undefer(&mut self, key: &PoolKey, id: &str) {
        if let Some(pool) = self.pools.get_mut(key) {
            pool.deferred.remove(id);
        }
    }

    /// Whether any pool still holds deferred ports.
    pub fn has_deferred(&self) -> bool {
        self.pools.values().any(|p| !p.deferred.is_empty())
    }

    /// One look at this cluster's ports (`ports`: Neutron's list, filtered by device owner and
    /// tags or not) after a restart: in every pool with ports the state does not know and no
    /// population of its own in flight, those ports become deferred; a pool whose unknown
    /// ports are the same as at its previous look and none is still being bound (unbound and
    /// younger than `settle`) has them settled. Returns `(delete, adopted)` as
    /// [`PoolState::adopt_orphans`] does.
    pub fn settle_look(
        &mut self,
        ports: &[Port],
        owner: Ownership<'_>,
        settle: Duration,
        (now, wall_now): (Instant, jiff::Timestamp),
    ) -> (Vec<String>, Vec<String>) {
        let unknown: Vec<&Port> = ports
            .iter()
            .filter(|p| owner.owns_pool_port(p) && !self.ports.contains_key(&p.id))
            .collect();
        let mut keys: BTreeSet<PoolKey> = unknown.iter().map(|p| pool_key(p)).collect();
        keys.extend(
            self.pools
                .iter()
                .filter(|(_, p)| !p.deferred.is_empty() || p.last_look.is_some())
                .map(|(k, _)| k.clone()),
        );
        // Unbound ports are keyed by no host, whatever pool created them: the nested pools'
        // bulks create their ports unbound (a port is bound by becoming a trunk's subport).
        let any_populating = self.pools.values().any(|p| p.populating.is_some());
        let mut settled: Vec<&Port> = Vec::new();
        for key in keys {
            let here: Vec<&Port> = unknown.iter().copied().filter(|p| pool_key(p) == key).collect();
            let own_in_flight = key.host.is_empty() && any_populating;
            let pool = self.pools.entry(key).or_default();
            if pool.populating.is_some() || own_in_flight {
                // Our own bulk's ports are unknown until it answers (unbound ones may be any
                // in-flight bulk's): look again later.
                pool.last_look = None;
                continue;
            }
            let ids: BTreeSet<String> = here.iter().map(|p| p.id.clone()).collect();
            let busy = here
                .iter()
                .any(|p| !p.is_bound() && younger_than(p, settle, wall_now));
            if busy {
                pool.deferred = ids;
                pool.last_look = None;
            } else if ids.is_empty() || pool.last_look.as_ref() == Some(&ids) {
                pool.deferred.clear();
                pool.last_look = None;
                settled.extend(here);
            } else {
                pool.deferred = ids.clone();
                pool.last_look = Some(ids);
            }
        }
        self.adopt_orphans(&settled, now, wall_now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        config::PoolConfig,
        pool::{PodKey, PortState, SgSet},
    };
    use crate::{config::TagPolicy, neutron::DEVICE_OWNER};

    fn port(id: &str, host: &str, vif_type: &str) -> Port {
        serde_json::from_value(serde_json::json!({
            "id": id, "network_id": "net", "project_id": "proj", "device_owner": DEVICE_OWNER,
            "binding:host_id": host, "binding:vif_type": vif_type, "status": "DOWN",
            "security_groups": [], "tags": ["kuryr"],
            "created_at": "2026-11-22T05:59:50Z", "updated_at": "2026-11-22T05:59:50Z",
        }))
        .expect("port")
    }

    fn clocks() -> (Instant, jiff::Timestamp) {
        (Instant::now(), "2026-11-22T06:00:00Z".parse().expect("time"))
    }

    fn tags() -> TagPolicy {
        TagPolicy::new(vec!["kuryr".into()], None).expect("tags")
    }

    const SETTLE: Duration = Duration::from_secs(600);

    #[test]
    fn a_dead_controllers_bulk_is_deferred_counted_against_max_then_settled() {
        let cfg = PoolConfig {
            max: 2,
            cooldown: Duration::from_secs(30),
            ..PoolConfig::default()
        };
        let mut old = port("old", "w0", "ovs");
        old.created_at = "2026-11-22T05:00:00Z".into();
        old.updated_at = old.created_at.clone();
        // Recovery sees a bulk being bound: one port bound, one not yet.
        let at_recovery = vec![old.clone(), port("b1", "w0", "ovs"), port("b2", "w0", "unbound")];
        let (mut st, rep) = PoolState::recover(
            cfg,
            Vec::new(),
            &at_recovery,
            Ownership::new(&tags(), None),
            clocks(),
            SETTLE,
        );
        assert_eq!(rep.deferred.len(), 2);
        let key = PoolKey::new("w0", "proj", "net");
        assert_eq!(st.pool_stats(&key).deferred, 2);
        assert!(st.has_deferred());
        // The pod takes the one available port; 2 deferred = max: released, it is deleted.
        let pod = PodKey::new("ns", "p");
        assert!(matches!(
            st.request(&pod, &key, &SgSet::default(), Instant::now()),
            crate::pool::Decision::Take(_)
        ));
        assert_eq!(
            st.release("old", Instant::now()).expect("release"),
            crate::pool::ReleaseDecision::Delete
        );
        assert!(st.confirm_deleted("old"));

        // Still binding: nothing settles.
        let (d, a) = st.settle_look(&at_recovery[1..], Ownership::new(&tags(), None), SETTLE, clocks());
        assert!(d.is_empty() && a.is_empty());
        // Bound, and a third port of the bulk appeared: seen once, not settled yet.
        let done = vec![
            port("b1", "w0", "ovs"),
            port("b2", "w0", "ovs"),
            port("b3", "w0", "ovs"),
        ];
        let (d, a) = st.settle_look(&done, Ownership::new(&tags(), None), SETTLE, clocks());
        assert!(d.is_empty() && a.is_empty());
        assert_eq!(st.pool_stats(&key).deferred, 3);
        // The same again: settled, back in the pool (cooling: updated 10 s ago).
        let (d, mut a) = st.settle_look(&done, Ownership::new(&tags(), None), SETTLE, clocks());
        a.sort();
        assert!(d.is_empty());
        assert_eq!(a, vec!["b1", "b2", "b3"]);
        assert!(!st.has_deferred());
        assert!(matches!(st.port("b3").expect("b3").state, PortState::Cooling(_)));
        assert_eq!(st.pool_stats(&key).cooling, 3);
        st.check_invariants().expect("invariants");
    }

    #[test]
    fn a_rolled_back_bulk_leaves_nothing_deferred_and_own_populations_are_not_touched() {
        let at_recovery = vec![port("b1", "w0", "unbound")];
        let (mut st, _) = PoolState::recover(
            PoolConfig::default(),
            Vec::new(),
            &at_recovery,
            Ownership::new(&tags(), None),
            clocks(),
            SETTLE,
        );
        assert!(st.has_deferred());
        let (d, a) = st.settle_look(&[], Ownership::new(&tags(), None), SETTLE, clocks());
        assert!(d.is_empty() && a.is_empty());
        assert!(!st.has_deferred());

        // A pool with its own population in flight: its unknown ports are that population's.
        let key = PoolKey::new("w1", "proj", "net");
        let req = st
            .populate_now(&key, &SgSet::default(), 2, Instant::now())
            .expect("population");
        let mine = vec![port("m1", "w1", "ovs"), port("m2", "w1", "ovs")];
        for _ in 0..3 {
            let (d, a) = st.settle_look(&mine, Ownership::new(&tags(), None), SETTLE, clocks());
            assert!(d.is_empty() && a.is_empty());
        }
        assert_eq!(st.pool_stats(&key).deferred, 0);
        let out = st
            .complete_population(req.ticket, vec!["m1".into(), "m2".into()])
            .expect("complete");
        assert_eq!(out.added.len(), 2);
        st.check_invariants().expect("invariants");
    }

    #[test]
    fn unbound_ports_of_an_own_nested_bulk_are_not_taken_for_a_dead_controllers() {
        // A restarted controller (no deferred ports) populates a nested pool: Neutron creates
        // the bulk's ports unbound, so a settle look sees them in no host's pool.
        let cfg = PoolConfig {
            min: 1,
            ..PoolConfig::default()
        };
        let (mut st, _) = PoolState::recover(
            cfg,
            Vec::new(),
            &[],
            Ownership::new(&tags(), None),
            clocks(),
            SETTLE,
        );
        let key = PoolKey::new("vm-1", "proj", "net");
        let req = st
            .populate_now(&key, &SgSet::default(), 2, Instant::now())
            .expect("population");
        let in_flight = vec![port("n1", "", "unbound"), port("n2", "", "unbound")];
        for _ in 0..3 {
            let (d, a) = st.settle_look(&in_flight, Ownership::new(&tags(), None), SETTLE, clocks());
            assert!(d.is_empty() && a.is_empty());
        }
        let unbound = PoolKey::new("", "proj", "net");
        assert_eq!(st.pool_stats(&unbound).deferred, 0);
        assert!(!st.has_deferred());
        st.complete_population(req.ticket, vec!["n1".into(), "n2".into()])
            .expect("complete");
        // No pool of no host is ever populated (it has no node to bind ports to), even when
        // one was kept for ports a recovery deferred there and is below ports_pool_min.
        st.defer(unbound.clone(), "x".into());
        st.undefer(&unbound, "x");
        let out = st.tick(Instant::now());
        assert!(
            out.populate.iter().all(|r| !r.key.host.is_empty()),
            "{:?}",
            out.populate
        );
        assert!(
            !st.stats().contains_key(&unbound),
            "no bookkeeping pool left behind"
        );
        st.check_invariants().expect("invariants");
    }
}
