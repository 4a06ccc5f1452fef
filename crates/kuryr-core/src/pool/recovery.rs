//! Rebuilding the pools after a restart from what Kubernetes and Neutron hold (KuryrPort CRs
//! and the cluster's tagged `compute:kuryr` ports) — no in-memory state survives a restart —
//! and the janitor's orphan detection.
//!
//! Rules (upstream `sync_pools`, `_cleanup_leftover_ports`, `_recover_precreated_ports`, with
//! the ownership rule of [`crate::ownership`] upstream lacked):
//! * a port referenced by a KuryrPort is in use by that pod when it is ours, or untagged with
//!   kuryr's device owner (ports made by upstream Kuryr without tags keep working after a
//!   switch-over); a port with another cluster's tags, or a user's untagged port, is refused
//!   whatever the KuryrPort says (`refused`: the pod gets a port of ours);
//! * other ports are ours only with device owner `compute:kuryr`, every tag of our identity and
//!   our project; nothing is ours without an identity;
//! * ours and bound (binding host set, VIF type neither `unbound` nor `binding_failed`) → back
//!   in the pool of `(binding host, project, network)` under their SG set; ours and unbound → delete;
//! * a port updated less than `cooldown` ago (or still ACTIVE: a pod may still be plugged) may
//!   have been released just before the restart, so it cools down for the rest of the period;
//! * kuryr-rs addition — a pool with an unbound port younger than the settle age (the janitor's
//!   minimum age) has a bulk creation in flight, sent by the process that died: Neutron binds a
//!   bulk's ports one by one before answering. Its young ports are *deferred* (neither adopted
//!   nor deleted): deleting one makes Neutron fail the whole bulk and roll it back (which would
//!   also delete the ones adopted), and on the sandbox the failed bulk kept retrying its address
//!   allocations for minutes, stalling every other port creation. The janitor settles them once
//!   they are old enough ([`PoolState::adopt_orphans`]).

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use super::{PodKey, PoolKey, PoolState, PortState, SgSet};
use crate::{
    config::PoolConfig,
    neutron::{Port, VIF_TYPE_BINDING_FAILED},
    ownership::{Ownership, Refusal, Verdict},
};

/// A port a KuryrPort references (`status.vifs[*].vif.id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InUseRef {
    /// The port.
    pub port_id: String,
    /// The KuryrPort's pod.
    pub pod: PodKey,
    /// The pool host (`spec.podNodeName`; nested: the trunk parent's IP).
    pub host: String,
}

/// Why recovery wants a port deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Not bound to a host (upstream deletes those).
    Unbound,
    /// Binding failed.
    BindingFailed,
}

/// What recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Ports in use by a KuryrPort's pod.
    pub in_use: Vec<String>,
    /// Ports back in a pool, ready.
    pub available: Vec<String>,
    /// Ports back in a pool after a cool-down.
    pub cooling: Vec<String>,
    /// Ports to delete, then [`PoolState::confirm_deleted`].
    pub to_delete: Vec<(String, DeleteReason)>,
    /// KuryrPorts referencing a port Neutron does not list (deleted behind our back): the
    /// controller must give these pods new ports.
    pub missing: Vec<InUseRef>,
    /// A port referenced by more than one KuryrPort: only the first keeps it.
    pub conflicts: Vec<InUseRef>,
    /// KuryrPorts referencing a port that is not ours (another cluster's, a user's): left
    /// alone in Neutron; the controller gives these pods ports of ours.
    pub refused: Vec<(InUseRef, Refusal)>,
    /// Untagged ports taken over because a KuryrPort references them (upstream's switch-over).
    pub adopted_untagged: Vec<String>,
    /// Young ports of pools with a bulk creation still in flight: left for the janitor.
    pub deferred: Vec<String>,
}

/// Where an unreferenced port of ours goes (recovery and the janitor agree on it).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Placement {
    /// Not usable: delete it.
    Delete(DeleteReason),
    /// Back in its pool, in this state (`Available` or `Cooling`).
    Pool(PortState),
}

/// The placement of `p` (unreferenced, ours). `now` and `wall_now` as in [`PoolState::recover`].
fn placement(p: &Port, cooldown: Duration, now: Instant, wall_now: jiff::Timestamp) -> Placement {
    if !p.is_bound() {
        return Placement::Delete(if p.binding_vif_type == VIF_TYPE_BINDING_FAILED {
            DeleteReason::BindingFailed
        } else {
            DeleteReason::Unbound
        });
    }
    let remaining = if p.is_active() {
        Some(cooldown)
    } else {
        match p.updated() {
            Some(t) => {
                let age = Duration::try_from(wall_now.duration_since(t)).unwrap_or(Duration::ZERO);
                cooldown.checked_sub(age).filter(|d| !d.is_zero())
            }
            None => Some(cooldown),
        }
    };
    Placement::Pool(match remaining {
        Some(d) => PortState::Cooling(now + d),
        None => PortState::Available,
    })
}

/// Younger than `age` (creation time unreadable: treated as young, the safe side).
pub(super) fn younger_than(p: &Port, age: Duration, wall_now: jiff::Timestamp) -> bool {
    p.created()
        .is_none_or(|c| Duration::try_from(wall_now.duration_since(c)).map_or(true, |a| a < age))
}

impl PoolState {
    /// Rebuilds the state from KuryrPorts (`in_use`) and Neutron's ports (`ports`: the list
    /// filtered by device owner and tags, plus any ports the KuryrPorts reference). `owner`
    /// decides what is ours ([`crate::ownership`]). `now` is
    /// the monotonic clock, `wall_now` the wall clock Neutron's `updated_at` is compared with;
    /// `settle` is the age below which a port may belong to a bulk creation still in flight.
    pub fn recover(
        cfg: PoolConfig,
        in_use: impl IntoIterator<Item = InUseRef>,
        ports: &[Port],
        owner: Ownership<'_>,
        (now, wall_now): (Instant, jiff::Timestamp),
        settle: Duration,
    ) -> (PoolState, RecoveryReport) {
        let cooldown = cfg.cooldown;
        let mut state = PoolState::new(cfg);
        let mut report = RecoveryReport::default();
        let by_id: HashMap<&str, &Port> = ports.iter().map(|p| (p.id.as_str(), p)).collect();
        let mut referenced: HashSet<String> = HashSet::new();
        for r in in_use {
            if !referenced.insert(r.port_id.clone()) {
                report.conflicts.push(r);
                continue;
            }
            match by_id.get(r.port_id.as_str()) {
                Some(p) => match owner.accepts_referenced(p) {
                    Verdict::Refused(why) => report.refused.push((r, why)),
                    verdict => {
                        let key = PoolKey::new(r.host.clone(), p.project(), &p.network_id);
                        let sgs = SgSet::new(p.security_groups.iter().cloned());
                        state.adopt(&p.id, key, sgs, PortState::InUse(r.pod.clone()));
                        if verdict == Verdict::Adopted {
                            report.adopted_untagged.push(p.id.clone());
                        }
                        report.in_use.push(p.id.clone());
                    }
                },
                None => report.missing.push(r),
            }
        }
        let ours: Vec<&Port> = ports
            .iter()
            .filter(|p| !referenced.contains(&p.id) && owner.owns_pool_port(p))
            .collect();
        // Pools with a bulk creation in flight: an unbound port that is still young.
        let busy: HashSet<PoolKey> = ours
            .iter()
            .filter(|p| !p.is_bound() && younger_than(p, settle, wall_now))
            .map(|p| pool_key(p))
            .collect();
        for p in ours {
            if busy.contains(&pool_key(p)) && younger_than(p, settle, wall_now) {
                report.deferred.push(p.id.clone());
                state.defer(pool_key(p), p.id.clone());
                continue;
            }
            match placement(p, cooldown, now, wall_now) {
                Placement::Delete(reason) => {
                    if state.adopt(&p.id, pool_key(p), SgSet::default(), PortState::Deleting) {
                        report.to_delete.push((p.id.clone(), reason));
                    }
                }
                Placement::Pool(st) => {
                    let list = match st {
                        PortState::Cooling(_) => &mut report.cooling,
                        _ => &mut report.available,
                    };
                    let sgs = SgSet::new(p.security_groups.iter().cloned());
                    if state.adopt(&p.id, pool_key(p), sgs, st) {
                        list.push(p.id.clone());
                    }
                }
            }
        }
        (state, report)
    }
}

pub(super) fn pool_key(p: &Port) -> PoolKey {
    PoolKey::new(&p.binding_host_id, p.project(), &p.network_id)
}

impl PoolState {
    /// The janitor's second half: `orphans` (see [`orphans`]) are placed as recovery would
    /// place them — usable ones back in their pools (ports of a bulk creation whose answer was
    /// lost, or deferred at recovery, are worth reusing), the rest to be deleted. A port of a
    /// closed network is not adopted; one the state meanwhile knows is left alone, except a
    /// `deleting` one, whose failed deletion is retried. Returns the IDs to
    /// delete (in `deleting`; [`PoolState::confirm_deleted`] after) and the IDs adopted.
    pub fn adopt_orphans(
        &mut self,
        orphans: &[&Port],
        now: Instant,
        wall_now: jiff::Timestamp,
    ) -> (Vec<String>, Vec<String>) {
        let (mut delete, mut adopted) = (Vec::new(), Vec::new());
        for p in orphans {
            if let Some(known) = self.port(&p.id) {
                // A deletion that failed earlier is retried; anything else is owned.
                if known.state == PortState::Deleting {
                    delete.push(p.id.clone());
                }
                continue;
            }
            let key = pool_key(p);
            self.undefer(&key, &p.id);
            let st = match placement(p, self.config().cooldown, now, wall_now) {
                Placement::Pool(st) if !self.is_closed(&key.network_id, &key.host) => st,
                _ => {
                    if self.adopt(&p.id, key, SgSet::default(), PortState::Deleting) {
                        delete.push(p.id.clone());
                    }
                    continue;
                }
            };
            let sgs = SgSet::new(p.security_groups.iter().cloned());
            if self.adopt(&p.id, key, sgs, st) {
                adopted.push(p.id.clone());
            }
        }
        (delete, adopted)
    }
}

/// The janitor: `compute:kuryr` ports of ours ([`Ownership::owns_pool_port`]) that neither a
/// KuryrPort (`kuryrport_port_ids`) nor the pool owns, created at least `min_age` ago (so
/// populations in flight, whose ports the pool does not know yet, are spared). Without an
/// identity nothing is an orphan: ownership cannot be proven. Ports whose creation time cannot
/// be read are spared.
pub fn orphans(
    kuryrport_port_ids: &HashSet<String>,
    state: &PoolState,
    ports: &[Port],
    owner: Ownership<'_>,
    wall_now: jiff::Timestamp,
    min_age: Duration,
) -> Vec<String> {
    if owner.tags.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = ports
        .iter()
        .filter(|p| owner.owns_pool_port(p))
        .filter(|p| !kuryrport_port_ids.contains(&p.id) && !state.owns(&p.id))
        .filter(|p| {
            p.created().is_some_and(|c| {
                Duration::try_from(wall_now.duration_since(c)).is_ok_and(|age| age >= min_age)
            })
        })
        .map(|p| p.id.clone())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        config::TagPolicy,
        pool::{Decision, PortState},
    };

    fn port(id: &str, host: &str, vif_type: &str, status: &str, updated: &str) -> Port {
        serde_json::from_value(serde_json::json!({
            "id": id, "network_id": "net", "project_id": "proj", "device_owner": "compute:kuryr",
            "binding:host_id": host, "binding:vif_type": vif_type, "status": status,
            "security_groups": ["sg-b", "sg-a"], "tags": ["kuryr", "cluster=c1"],
            "created_at": "2026-11-22T05:00:00Z", "updated_at": updated,
        }))
        .unwrap()
    }

    fn tags() -> TagPolicy {
        TagPolicy::new(vec!["kuryr".into()], Some("cluster=c1".into())).unwrap()
    }

    fn wall() -> jiff::Timestamp {
        "2026-11-22T06:00:00Z".parse().unwrap()
    }

    /// Recovery of `ports` with `refs` by a cluster of `tags` in `project` (defaults otherwise).
    fn recover_as(
        refs: Vec<InUseRef>,
        ports: &[Port],
        tags: &TagPolicy,
        project: Option<&str>,
    ) -> (PoolState, RecoveryReport) {
        PoolState::recover(
            PoolConfig::default(),
            refs,
            ports,
            Ownership::new(tags, project),
            (Instant::now(), wall()),
            Duration::from_secs(600),
        )
    }

    #[test]
    fn recovery_sorts_ports_by_upstream_rules() {
        let now = Instant::now();
        let mut foreign = port("foreign", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z");
        foreign.tags = vec!["kuryr".into()]; // other cluster
        let mut untagged_in_use = port("legacy", "w0", "ovs", "ACTIVE", "2026-11-22T05:00:00Z");
        untagged_in_use.tags.clear();
        let ports = vec![
            port("used", "w0", "ovs", "ACTIVE", "2026-11-22T05:00:00Z"),
            untagged_in_use,
            port("old", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z"),
            port("fresh", "w0", "ovs", "DOWN", "2026-11-22T05:59:50Z"),
            port("plugged", "w1", "ovs", "ACTIVE", "2026-11-22T05:00:00Z"),
            port("unbound", "", "unbound", "DOWN", "2026-11-22T05:00:00Z"),
            port("failed", "w0", "binding_failed", "DOWN", "2026-11-22T05:00:00Z"),
            foreign,
        ];
        let refs = vec![
            InUseRef {
                port_id: "used".into(),
                pod: PodKey::new("ns", "a"),
                host: "w0".into(),
            },
            InUseRef {
                port_id: "legacy".into(),
                pod: PodKey::new("ns", "b"),
                host: "w0".into(),
            },
            InUseRef {
                port_id: "gone".into(),
                pod: PodKey::new("ns", "c"),
                host: "w0".into(),
            },
            InUseRef {
                port_id: "used".into(),
                pod: PodKey::new("ns", "d"),
                host: "w0".into(),
            },
        ];
        let cfg = PoolConfig {
            cooldown: Duration::from_secs(30),
            ..PoolConfig::default()
        };
        let (mut st, rep) = PoolState::recover(
            cfg,
            refs,
            &ports,
            Ownership::new(&tags(), Some("proj")),
            (now, wall()),
            Duration::from_secs(600),
        );
        st.check_invariants().unwrap();
        assert_eq!(rep.in_use, vec!["used", "legacy"]);
        assert_eq!(rep.available, vec!["old"]);
        assert_eq!(rep.cooling, vec!["fresh", "plugged"]);
        assert_eq!(
            rep.to_delete,
            vec![
                ("unbound".to_string(), DeleteReason::Unbound),
                ("failed".into(), DeleteReason::BindingFailed)
            ]
        );
        assert_eq!(rep.missing.len(), 1);
        assert_eq!(rep.conflicts[0].pod, PodKey::new("ns", "d"));
        assert!(st.port("foreign").is_none());
        // "fresh" was updated 10 s ago: 20 s of cool-down left.
        assert_eq!(
            st.port("fresh").unwrap().state,
            PortState::Cooling(now + Duration::from_secs(20))
        );
        // The pool keeps serving: the recovered port, with SGs sorted.
        let key = PoolKey::new("w0", "proj", "net");
        let sgs = SgSet::new(["sg-a", "sg-b"]);
        match st.request(&PodKey::new("ns", "e"), &key, &sgs, now) {
            Decision::Take(t) => {
                assert_eq!(t.port_id, "old");
                assert!(t.actions.is_empty());
            }
            d => panic!("{d:?}"),
        }
        // The pod already holding "used" gets it again.
        match st.request(&PodKey::new("ns", "a"), &key, &sgs, now) {
            Decision::Take(t) => assert!(t.already_assigned && t.port_id == "used"),
            d => panic!("{d:?}"),
        }
        assert!(st.confirm_deleted("unbound"));
        st.check_invariants().unwrap();
    }

    #[test]
    fn janitor_finds_only_old_unowned_tagged_ports() {
        let now = Instant::now();
        let mut young = port("young", "w0", "ovs", "DOWN", "2026-11-22T05:59:00Z");
        young.created_at = "2026-11-22T05:59:00Z".into();
        let mut untagged = port("untagged", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z");
        untagged.tags.clear();
        let ports = vec![
            port("kp", "w0", "ovs", "ACTIVE", "2026-11-22T05:00:00Z"),
            port("pooled", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z"),
            port("orphan", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z"),
            young,
            untagged,
        ];
        let mut st = PoolState::new(PoolConfig::default());
        let key = PoolKey::new("w0", "proj", "net");
        assert!(st.adopt("pooled", key, SgSet::default(), PortState::Available));
        let kps: HashSet<String> = ["kp".to_string()].into();
        let found = orphans(
            &kps,
            &st,
            &ports,
            Ownership::new(&tags(), Some("proj")),
            wall(),
            Duration::from_secs(600),
        );
        assert_eq!(found, vec!["orphan"]);
        assert!(
            orphans(
                &kps,
                &st,
                &ports,
                Ownership::new(&TagPolicy::default(), None),
                wall(),
                Duration::ZERO
            )
            .is_empty()
        );
        let _ = now;
    }

    #[test]
    fn recovery_defers_young_ports_of_a_pool_with_a_bulk_in_flight() {
        let now = Instant::now();
        let young = |id: &str, host: &str, vif: &str| {
            let mut p = port(id, host, vif, "DOWN", "2026-11-22T05:59:50Z");
            p.created_at = "2026-11-22T05:59:50Z".into();
            p
        };
        // w0: a bulk in flight (one port bound, one not yet); w1: a young, settled pool.
        let mut unbound_w0 = young("w0-unbound", "w0", "unbound");
        unbound_w0.binding_host_id = "w0".into();
        let ports = vec![
            young("w0-bound", "w0", "ovs"),
            unbound_w0,
            port("w0-old", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z"),
            young("w1-bound", "w1", "ovs"),
        ];
        let (st, rep) = PoolState::recover(
            PoolConfig::default(),
            Vec::new(),
            &ports,
            Ownership::new(&tags(), Some("proj")),
            (now, wall()),
            Duration::from_secs(60),
        );
        st.check_invariants().unwrap();
        let mut deferred = rep.deferred.clone();
        deferred.sort();
        assert_eq!(deferred, vec!["w0-bound", "w0-unbound"]);
        assert!(rep.to_delete.is_empty());
        assert!(st.port("w0-bound").is_none() && st.port("w0-unbound").is_none());
        assert_eq!(st.port("w0-old").unwrap().state, PortState::Available);
        // w1's young port was updated 10 s ago: it cools down (no bulk in flight there).
        assert!(matches!(
            st.port("w1-bound").unwrap().state,
            PortState::Cooling(_)
        ));
        // Without a young unbound port nothing is deferred.
        let (_, rep) = PoolState::recover(
            PoolConfig::default(),
            Vec::new(),
            &ports[..1],
            Ownership::new(&tags(), Some("proj")),
            (now, wall()),
            Duration::from_secs(60),
        );
        assert!(rep.deferred.is_empty() && rep.cooling == vec!["w0-bound"]);
    }

    #[test]
    fn ports_of_a_cut_bulk_unbound_or_of_a_gone_node_are_deleted() {
        // A bulk creation cut by a Neutron outage: some of its ports bound, some never.
        let now = Instant::now();
        let mut st = PoolState::new(PoolConfig::default());
        let bound = port("bound", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z");
        let failed = port(
            "failed",
            "w0",
            VIF_TYPE_BINDING_FAILED,
            "DOWN",
            "2026-11-22T05:00:00Z",
        );
        let unbound = port("unbound", "w0", "unbound", "DOWN", "2026-11-22T05:00:00Z");
        let (delete, adopted) = st.adopt_orphans(&[&bound, &failed, &unbound], now, wall());
        assert_eq!(adopted, vec!["bound"]);
        assert_eq!(delete, vec!["failed", "unbound"]);
        // Its node is then deleted: another such port is deleted even though bound.
        let mut gone = st.close_host("w0");
        assert_eq!(gone, vec!["bound"]);
        let late = port("late", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z");
        let (d2, a2) = st.adopt_orphans(&[&late], now, wall());
        assert!(a2.is_empty());
        assert_eq!(d2, vec!["late"]);
        gone.extend(delete.into_iter().chain(d2));
        for id in &gone {
            assert!(st.confirm_deleted(id), "{id}");
        }
        st.check_invariants().unwrap();
    }

    #[test]
    fn janitor_adopts_usable_orphans_and_deletes_the_rest() {
        let now = Instant::now();
        let mut st = PoolState::new(PoolConfig::default());
        let bound = port("bound", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z");
        let unbound = port("unbound", "", "unbound", "DOWN", "2026-11-22T05:00:00Z");
        let mut closed = port("closed", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z");
        closed.network_id = "gone-net".into();
        st.delete_network_pools("gone-net");
        let (delete, adopted) = st.adopt_orphans(&[&bound, &unbound, &closed], now, wall());
        assert_eq!(adopted, vec!["bound"]);
        assert_eq!(delete, vec!["unbound", "closed"]);
        assert_eq!(st.port("bound").unwrap().state, PortState::Available);
        // Known ports are left alone; a deletion not yet confirmed is retried.
        let (d2, a2) = st.adopt_orphans(&[&bound, &unbound], now, wall());
        assert!(a2.is_empty());
        assert_eq!(d2, vec!["unbound"]);
        assert!(st.confirm_deleted("unbound") && st.confirm_deleted("closed"));
        st.check_invariants().unwrap();
        let key = PoolKey::new("w0", "proj", "net");
        match st.request(&PodKey::new("ns", "p"), &key, &SgSet::new(["sg-a", "sg-b"]), now) {
            Decision::Take(t) => assert_eq!(t.port_id, "bound"),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn referenced_ports_that_are_not_ours_are_refused() {
        // Another cluster's pooled port on a node named like ours, referenced by a forged or
        // stale KuryrPort; a user's untagged port; an upstream port (untagged, compute:kuryr).
        let mut theirs = port("theirs", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z");
        theirs.tags = vec!["kuryr-cluster=other".into()];
        let mut user = port("user", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z");
        user.tags.clear();
        user.device_owner = String::new();
        let mut upstream = port("upstream", "w0", "ovs", "ACTIVE", "2026-11-22T05:00:00Z");
        upstream.tags.clear();
        let mut elsewhere = port("elsewhere", "w0", "ovs", "ACTIVE", "2026-11-22T05:00:00Z");
        elsewhere.project_id = "other-proj".into();
        let ports = vec![theirs, user, upstream, elsewhere];
        let r = |id: &str, pod: &str| InUseRef {
            port_id: id.into(),
            pod: PodKey::new("ns", pod),
            host: "w0".into(),
        };
        let refs = vec![
            r("theirs", "a"),
            r("user", "b"),
            r("upstream", "c"),
            r("elsewhere", "d"),
        ];
        let (st, rep) = recover_as(refs, &ports, &tags(), Some("proj"));
        st.check_invariants().unwrap();
        assert_eq!(rep.in_use, vec!["upstream"]);
        assert_eq!(rep.adopted_untagged, vec!["upstream"]);
        let refused: Vec<(&str, Refusal)> = rep
            .refused
            .iter()
            .map(|(r, w)| (r.port_id.as_str(), *w))
            .collect();
        assert_eq!(
            refused,
            vec![
                ("theirs", Refusal::Foreign),
                ("user", Refusal::NotKuryrOwner),
                ("elsewhere", Refusal::OtherProject)
            ]
        );
        for id in ["theirs", "user", "elsewhere"] {
            assert!(st.port(id).is_none(), "{id} must not be in any pool");
        }
        assert!(rep.to_delete.is_empty());
    }

    #[test]
    fn without_an_identity_nothing_is_pooled_or_deleted() {
        // The data-loss defect of 9972c9b: with no tag configured every compute:kuryr port of
        // the project was "ours" — another cluster's pooled ports were adopted, unbound ones
        // deleted.
        let mut bound = port("bound", "w0", "ovs", "DOWN", "2026-11-22T05:00:00Z");
        bound.tags = vec!["kuryr-cluster=other".into()];
        let mut unbound = port("unbound", "", "unbound", "DOWN", "2026-11-22T05:00:00Z");
        unbound.tags.clear();
        let ports = vec![bound, unbound];
        let none = TagPolicy::default();
        let (st, rep) = recover_as(Vec::new(), &ports, &none, None);
        assert!(rep.available.is_empty() && rep.cooling.is_empty() && rep.to_delete.is_empty());
        assert!(st.port("bound").is_none() && st.port("unbound").is_none());
        // With our identity the other cluster's ports are still not ours, in or out of project.
        let (_, rep) = recover_as(Vec::new(), &ports, &tags(), None);
        assert!(rep.available.is_empty() && rep.cooling.is_empty() && rep.to_delete.is_empty());
    }
}
