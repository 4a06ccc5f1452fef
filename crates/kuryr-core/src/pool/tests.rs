//! Scenario tests and a randomised test of the pool state machine: random sequences of
//! request/release/tick/complete/fail/SG removal/pool deletion never lose or duplicate a port.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use super::*;
use crate::config::PoolConfig;

fn cfg() -> PoolConfig {
    PoolConfig {
        min: 2,
        max: 0,
        batch: 3,
        cooldown: Duration::from_secs(30),
        ..PoolConfig::default()
    }
}

fn key(host: &str) -> PoolKey {
    PoolKey::new(host, "proj", "net")
}

fn pod(n: u32) -> PodKey {
    PodKey::new("ns", format!("p{n}"))
}

fn sgs(ids: &[&str]) -> SgSet {
    SgSet::new(ids.iter().copied())
}

fn ids(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Requests for `pod` until it gets a port, completing populations with fresh IDs.
fn take(st: &mut PoolState, p: &PodKey, k: &PoolKey, s: &SgSet, now: Instant) -> Take {
    match st.request(p, k, s, now) {
        Decision::Take(t) => t,
        d => panic!("expected a port, got {d:?}"),
    }
}

#[test]
fn empty_pool_populates_then_serves_without_actions() {
    let now = Instant::now();
    let mut st = PoolState::new(cfg());
    let k = key("w0");
    let s = sgs(&["sg1"]);
    let req = match st.request(&pod(1), &k, &s, now) {
        Decision::Wait {
            reason: WaitReason::Populating,
            populate: Some(r),
        } => r,
        d => panic!("{d:?}"),
    };
    assert_eq!((req.count, &req.sgs), (3, &s));
    // A second pod while populating: no second population.
    assert_eq!(
        st.request(&pod(2), &k, &s, now),
        Decision::Wait {
            reason: WaitReason::PopulationInFlight,
            populate: None
        }
    );
    assert_eq!(
        st.pool_stats(&k),
        PoolStats {
            available: 0,
            in_use: 0,
            cooling: 0,
            populating: 3,
            waiting: 2,
            deferred: 0,
        }
    );
    let out = st.complete_population(req.ticket, ids("a", 3)).unwrap();
    assert_eq!(out.added.len(), 3);
    let t = take(&mut st, &pod(1), &k, &s, now);
    assert_eq!(t.port_id, "a0");
    assert!(t.actions.is_empty() && !t.needs_rename() && !t.needs_sg_update());
    assert!(t.populate.is_none(), "2 left = min");
    let t = take(&mut st, &pod(2), &k, &s, now);
    // 1 left < min 2: background refill of max(batch, min - size) = 3.
    assert_eq!(t.populate.as_ref().map(|r| r.count), Some(3));
    assert_eq!(st.pool_stats(&k).waiting, 0);
    st.check_invariants().unwrap();
    // A pod that waited and went away stops counting.
    let k2 = key("w9");
    st.request(&pod(7), &k2, &s, now);
    assert_eq!(st.pool_stats(&k2).waiting, 1);
    st.forget_pod(&pod(7));
    assert_eq!(st.pool_stats(&k2).waiting, 0);
    assert!(st.complete_population(999, vec![]).is_err());
}

#[test]
fn the_queue_behind_a_population_is_served_by_the_next_bulk_at_once() {
    let now = Instant::now();
    let mut st = PoolState::new(cfg());
    let k = key("w0");
    let s = sgs(&["sg1"]);
    let first = match st.request(&pod(0), &k, &s, now) {
        Decision::Wait {
            populate: Some(r), ..
        } => r,
        d => panic!("{d:?}"),
    };
    assert_eq!(first.count, 3, "one pod waiting: a batch");
    // Twelve pods in all queue behind it (a pod a second for the 15-35 s of a busy bulk).
    for i in 1..12 {
        st.request(&pod(i), &k, &s, now);
    }
    assert_eq!(st.pool_stats(&k).waiting, 12);
    st.complete_population(first.ticket, ids("a", 3)).unwrap();
    // The woken pods take the three ports; the take that leaves the pool below its minimum
    // starts one bulk for the nine still waiting plus the minimum, not another batch of 3.
    let mut next = None;
    for i in 0..3 {
        let t = take(&mut st, &pod(i), &k, &s, now);
        next = next.or(t.populate);
    }
    let next = next.expect("a refill");
    assert_eq!(next.count, 9 + 2);
    st.complete_population(next.ticket, ids("b", 11)).unwrap();
    for i in 3..12 {
        take(&mut st, &pod(i), &k, &s, now);
    }
    assert_eq!(st.pool_stats(&k).available, 2);
    st.check_invariants().unwrap();
    // A pod that waits on another pool now (its namespace got its own network) no longer
    // counts in the first.
    let k2 = PoolKey::new("w0", "proj", "net2");
    st.request(&pod(20), &key("w1"), &s, now);
    st.request(&pod(20), &k2, &s, now);
    assert_eq!(
        (st.pool_stats(&key("w1")).waiting, st.pool_stats(&k2).waiting),
        (0, 1)
    );
}

/// Populates an empty pool for `s` through a waiting pod and completes it with `n` ports.
fn fill(st: &mut PoolState, k: &PoolKey, s: &SgSet, prefix: &str, n: u32, now: Instant) {
    let r = match st.request(&pod(1000), k, s, now) {
        Decision::Wait {
            populate: Some(r), ..
        } => r,
        d => panic!("{d:?}"),
    };
    st.complete_population(r.ticket, ids(prefix, n)).unwrap();
}

/// Takes a port for `p` with `s` and releases it, then lets it cool down: it is pooled under `s`.
fn recycle_as(st: &mut PoolState, p: &PodKey, k: &PoolKey, s: &SgSet, now: Instant) -> (String, Instant) {
    let id = take(st, p, k, s, now).port_id;
    st.release(&id, now).unwrap();
    let later = now + Duration::from_secs(30);
    assert!(st.tick(later).ready.contains(&id));
    (id, later)
}

#[test]
fn exact_sg_match_preferred_else_lru_group_with_sg_update() {
    let t0 = Instant::now();
    let mut st = PoolState::new(PoolConfig { min: 0, ..cfg() });
    let k = key("w0");
    let (a, b, c) = (sgs(&["a"]), sgs(&["b"]), sgs(&["c"]));
    assert!(
        st.prepopulate(&k, &a, t0).is_none(),
        "min 0: nothing to prepopulate"
    );
    fill(&mut st, &k, &a, "a", 3, t0);
    // Only group "a": a pod with "c" gets a0 and must update its SGs.
    let t = take(&mut st, &pod(1), &k, &c, t0);
    assert_eq!(t.port_id, "a0");
    assert_eq!(t.actions, vec![PortAction::SetSecurityGroups(c.clone())]);
    st.release("a0", t0).unwrap();
    let t1 = t0 + Duration::from_secs(30);
    assert_eq!(st.tick(t1).ready, vec!["a0"]);
    assert_eq!(st.port("a0").unwrap().sgs, c);
    // Groups now [a: a1 a2] (least recent), [c: a0]. Exact match wins.
    let t = take(&mut st, &pod(2), &k, &c, t1);
    assert_eq!((t.port_id.as_str(), t.actions.len()), ("a0", 0));
    // No "b" group: the least recently updated non-empty group is "a".
    let t = take(&mut st, &pod(3), &k, &b, t1);
    assert_eq!(t.port_id, "a1");
    assert!(t.needs_sg_update());
    st.check_invariants().unwrap();
}

#[test]
fn port_debug_renames_on_take_and_release() {
    let now = Instant::now();
    let mut st = PoolState::new(PoolConfig {
        port_debug: true,
        ..cfg()
    });
    let k = key("w0");
    let s = sgs(&["a"]);
    let r = st.prepopulate(&k, &s, now).unwrap();
    st.complete_population(r.ticket, ids("x", 3)).unwrap();
    let t = take(&mut st, &pod(1), &k, &s, now);
    assert_eq!(t.actions, vec![PortAction::RenameForPod(pod(1))]);
    match st.release(&t.port_id, now).unwrap() {
        ReleaseDecision::Cooldown { actions, .. } => assert_eq!(actions, vec![PortAction::ResetName]),
        d => panic!("{d:?}"),
    }
}

#[test]
fn released_ports_cool_down_before_reuse() {
    let t0 = Instant::now();
    let mut st = PoolState::new(PoolConfig { min: 0, ..cfg() });
    let k = key("w0");
    let s = sgs(&["a"]);
    let r = match st.request(&pod(1), &k, &s, t0) {
        Decision::Wait {
            populate: Some(r), ..
        } => r,
        d => panic!("{d:?}"),
    };
    st.complete_population(r.ticket, vec!["only".into()]).unwrap();
    let t = take(&mut st, &pod(1), &k, &s, t0);
    assert_eq!(
        st.release(&t.port_id, t0).unwrap(),
        ReleaseDecision::Cooldown {
            until: t0 + Duration::from_secs(30),
            actions: vec![]
        }
    );
    assert_eq!(
        st.release(&t.port_id, t0).unwrap(),
        ReleaseDecision::AlreadyReleased
    );
    // Not reused during the cool-down; a new population is started instead.
    match st.request(&pod(2), &k, &s, t0 + Duration::from_secs(1)) {
        Decision::Wait {
            reason: WaitReason::Populating,
            populate: Some(r),
        } => st.fail_population(r.ticket, t0 + Duration::from_secs(1)).unwrap(),
        d => panic!("{d:?}"),
    }
    // Back-off after the failure.
    assert!(matches!(
        st.request(&pod(2), &k, &s, t0 + Duration::from_secs(2)),
        Decision::Wait {
            reason: WaitReason::Backoff { .. },
            ..
        }
    ));
    let out = st.tick(t0 + Duration::from_secs(29));
    assert!(out.ready.is_empty());
    let out = st.tick(t0 + Duration::from_secs(30));
    assert_eq!(out.ready, vec!["only"]);
    assert_eq!(
        take(&mut st, &pod(2), &k, &s, t0 + Duration::from_secs(30)).port_id,
        "only"
    );
    st.check_invariants().unwrap();
}

#[test]
fn max_deletes_on_release_and_trims() {
    let t0 = Instant::now();
    let c = PoolConfig {
        min: 1,
        max: 3,
        batch: 3,
        ..cfg()
    };
    let mut st = PoolState::new(c);
    let k = key("w0");
    let s = sgs(&[]);
    let r = st.prepopulate(&k, &s, t0).unwrap();
    st.complete_population(r.ticket, ids("p", 3)).unwrap();
    let taken: Vec<Take> = (0..3).map(|i| take(&mut st, &pod(i), &k, &s, t0)).collect();
    // Pool empty (< min): a refill of 3 was attached to the take that emptied it.
    let refill = taken.iter().find_map(|t| t.populate.clone()).unwrap();
    st.complete_population(refill.ticket, ids("q", 3)).unwrap();
    // 3 pooled = max: releases are deletions.
    assert_eq!(st.release("p0", t0).unwrap(), ReleaseDecision::Delete);
    assert_eq!(st.port("p0").unwrap().state, PortState::Deleting);
    assert!(!st.owns("p0"));
    assert!(st.confirm_deleted("p0"));
    assert!(!st.confirm_deleted("p0"));
    st.check_invariants().unwrap();
    // Overshoot: a refill in flight while pods release their ports; the tick trims it.
    let a = take(&mut st, &pod(10), &k, &s, t0).port_id;
    let a2 = take(&mut st, &pod(11), &k, &s, t0).port_id;
    let b = take(&mut st, &pod(12), &k, &s, t0);
    let refill = b.populate.clone().expect("pool empty: refill");
    assert_eq!(refill.count, 3);
    let others: Vec<String> = vec![a, a2, b.port_id, "p1".into(), "p2".into()];
    let mut cooled = 0;
    for id in &others {
        match st.release(id, t0).unwrap() {
            ReleaseDecision::Cooldown { .. } => cooled += 1,
            ReleaseDecision::Delete => assert!(st.confirm_deleted(id)),
            d => panic!("{d:?}"),
        }
    }
    assert_eq!(cooled, 3, "max 3 pooled");
    st.complete_population(refill.ticket, ids("r", 3)).unwrap();
    assert_eq!(st.pool_stats(&k).available + st.pool_stats(&k).cooling, 6);
    let out = st.tick(t0 + Duration::from_secs(1));
    assert_eq!(out.delete.len(), 3, "{out:?}");
    assert!(out.populate.is_empty());
    let s2 = st.pool_stats(&k);
    assert_eq!((s2.available, s2.cooling), (0, 3));
    let out = st.tick(t0 + Duration::from_secs(30));
    assert_eq!(out.ready.len(), 3);
    st.check_invariants().unwrap();
}

#[test]
fn tick_populates_within_the_concurrency_bound_waiting_pools_first() {
    let t0 = Instant::now();
    let mut st = PoolState::new(PoolConfig {
        max_concurrent_bulk: 2,
        min: 0,
        ..cfg()
    });
    let s = sgs(&["a"]);
    let mut tickets = Vec::new();
    for (i, h) in (0..).zip(["w0", "w1", "w2", "w3"]) {
        match st.request(&pod(i), &key(h), &s, t0) {
            Decision::Wait {
                reason: WaitReason::Populating,
                populate: Some(r),
            } => tickets.push(r),
            Decision::Wait {
                reason: WaitReason::ConcurrencyLimit,
                populate: None,
            } => {}
            d => panic!("{d:?}"),
        }
    }
    assert_eq!(tickets.len(), 2);
    assert_eq!(st.in_flight(), 2);
    assert!(st.tick(t0).populate.is_empty(), "bound reached");
    st.complete_population(tickets[0].ticket, ids("x", 3)).unwrap();
    let out = st.tick(t0);
    assert_eq!(out.populate.len(), 1);
    assert_eq!(out.populate[0].key, key("w2"));
    st.check_invariants().unwrap();
}

#[test]
fn remove_sg_moves_ports_to_the_no_sg_group_reused_first() {
    let t0 = Instant::now();
    let mut st = PoolState::new(PoolConfig { min: 0, ..cfg() });
    let k = key("w0");
    let (np, other) = (sgs(&["np", "def"]), sgs(&["def"]));
    fill(&mut st, &k, &other, "o", 3, t0);
    let first = take(&mut st, &pod(1), &k, &np, t0).port_id;
    let (second, t2) = recycle_as(&mut st, &pod(2), &k, &np, t0);
    st.release(&first, t0).unwrap();
    st.tick(t2);
    // Groups: [other: o2], [np: o1 o0]; o1 goes to a pod.
    let held = take(&mut st, &pod(3), &k, &np, t2).port_id;
    assert_eq!(held, second);
    let second = first;
    let cleared = st.remove_sg("np", Some("net"));
    assert_eq!(cleared, vec![second.clone()]);
    assert_eq!(st.remove_sg("np", Some("other-net")), Vec::<String>::new());
    assert_eq!(st.port(&second).unwrap().sgs, SgSet::default());
    assert_eq!(
        st.port(&held).unwrap().sgs,
        np,
        "ports in use are the policy driver's business"
    );
    // The no-SG group is placed first: a pod with unknown SGs gets o1 before o2.
    let t = take(&mut st, &pod(4), &k, &sgs(&["z"]), t2);
    assert_eq!(t.port_id, second);
    assert!(t.needs_sg_update());
    st.check_invariants().unwrap();
}

#[test]
fn in_use_ports_of_vanished_kuryrports_are_found() {
    let t0 = Instant::now();
    let mut st = PoolState::new(cfg());
    let k = key("w0");
    let s = sgs(&["a"]);
    let r = st.prepopulate(&k, &s, t0).unwrap();
    st.complete_population(r.ticket, ids("x", 3)).unwrap();
    let a = take(&mut st, &pod(1), &k, &s, t0).port_id;
    take(&mut st, &pod(2), &k, &s, t0);
    let live: std::collections::HashSet<PodKey> = [pod(2)].into();
    assert_eq!(st.in_use_without(&live), vec![(a.clone(), pod(1))]);
    st.release(&a, t0).unwrap();
    assert!(st.in_use_without(&live).is_empty());
}

#[test]
fn delete_network_pools_drains_and_closes() {
    let t0 = Instant::now();
    let mut st = PoolState::new(PoolConfig { min: 2, ..cfg() });
    let k = key("w0");
    let s = sgs(&["a"]);
    let r = st.prepopulate(&k, &s, t0).unwrap();
    st.complete_population(r.ticket, ids("x", 3)).unwrap();
    let used = take(&mut st, &pod(1), &k, &s, t0).port_id;
    let cooled = take(&mut st, &pod(2), &k, &s, t0);
    let inflight = cooled.populate.clone().unwrap();
    st.release(&cooled.port_id, t0).unwrap();
    let mut del = st.delete_network_pools("net");
    del.sort();
    assert_eq!(del, vec!["x1".to_string(), "x2".to_string()]);
    assert_eq!(
        st.request(&pod(3), &k, &s, t0),
        Decision::Wait {
            reason: WaitReason::NetworkClosed,
            populate: None
        }
    );
    // The population in flight is cancelled: its ports are to be deleted.
    let out = st.complete_population(inflight.ticket, ids("y", 3)).unwrap();
    assert_eq!(out.delete.len(), 3);
    assert!(out.added.is_empty());
    assert_eq!(st.release(&used, t0).unwrap(), ReleaseDecision::Delete);
    for id in del.iter().chain(out.delete.iter()).chain([&used]) {
        assert!(st.confirm_deleted(id), "{id}");
    }
    st.check_invariants().unwrap();
    st.tick(t0);
    assert!(
        st.stats().is_empty(),
        "idle pools of a deleted network are dropped"
    );
}

#[test]
fn a_closed_host_gets_no_port_and_no_population_and_deletes_what_comes_back() {
    let t0 = Instant::now();
    let mut st = PoolState::new(PoolConfig { min: 2, ..cfg() });
    let k = key("w0");
    let s = sgs(&["a"]);
    let r = st.prepopulate(&k, &s, t0).unwrap();
    st.complete_population(r.ticket, ids("x", 3)).unwrap();
    let used = take(&mut st, &pod(1), &k, &s, t0).port_id;
    let mut del = st.close_host(&k.host);
    del.sort();
    assert_eq!(del.len(), 2, "the available ports go: {del:?}");
    assert!(matches!(
        st.request(&pod(3), &k, &s, t0),
        Decision::Wait {
            reason: WaitReason::HostClosed,
            populate: None
        }
    ));
    // The pod of the lost node goes: its port is deleted, not pooled.
    assert_eq!(st.release(&used, t0).unwrap(), ReleaseDecision::Delete);
    for id in del.iter().chain([&used]) {
        assert!(st.confirm_deleted(id), "{id}");
    }
    // No population for it on the next passes, and its idle pool is dropped.
    let out = st.tick(t0 + Duration::from_secs(600));
    assert!(out.populate.is_empty(), "{out:?}");
    assert!(st.stats().is_empty());
    st.check_invariants().unwrap();
    // A node of that name comes back: pools fill on demand again.
    assert!(st.reopen_host(&k.host));
    assert!(matches!(
        st.request(&pod(4), &k, &s, t0),
        Decision::Wait {
            populate: Some(_),
            ..
        }
    ));
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn random_sequences_never_lose_or_duplicate_a_port() {
    // (takes, takes with SG update, cool-downs ended, deletions confirmed, failures): the
    // sequences must actually exercise these paths.
    let mut seen = [0u32; 5];
    for seed in 1..=120u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let c = PoolConfig {
            min: rng.below(4) as u32,
            max: [0, 6, 10][rng.below(3) as usize],
            batch: 4 + rng.below(3) as u32,
            cooldown: Duration::from_secs(rng.below(5)),
            max_concurrent_bulk: 1 + rng.below(3) as u32,
            port_debug: rng.below(2) == 0,
            ..PoolConfig::default()
        };
        let mut st = PoolState::new(c.clone());
        let t0 = Instant::now();
        let mut now = t0;
        let keys = [key("w0"), key("w1"), PoolKey::new("w0", "proj", "net2")];
        let sg_sets = [sgs(&["a"]), sgs(&["b"]), sgs(&["a", "b"]), sgs(&[])];
        let mut tickets: Vec<PopulateRequest> = Vec::new();
        let mut deleting: BTreeSet<String> = BTreeSet::new();
        let mut in_use: Vec<String> = Vec::new();
        let mut created: BTreeSet<String> = BTreeSet::new();
        let mut forgotten: BTreeSet<String> = BTreeSet::new();
        let mut next_id = 0u32;
        for step in 0..400 {
            let ctx = format!("seed {seed} step {step} cfg {c:?}");
            match rng.below(10) {
                0..=2 => {
                    let k = &keys[rng.below(3) as usize];
                    let s = &sg_sets[rng.below(4) as usize];
                    let p = pod(rng.below(12) as u32);
                    match st.request(&p, k, s, now) {
                        Decision::Take(t) => {
                            seen[0] += 1;
                            seen[1] += u32::from(t.needs_sg_update());
                            if !t.already_assigned {
                                assert!(!in_use.contains(&t.port_id), "{ctx}: handed out twice");
                                in_use.push(t.port_id.clone());
                            }
                            assert_eq!(st.port(&t.port_id).unwrap().state, PortState::InUse(p), "{ctx}");
                            tickets.extend(t.populate);
                        }
                        Decision::Wait { populate, .. } => tickets.extend(populate),
                    }
                }
                3 | 4 if !in_use.is_empty() => {
                    let id = in_use.swap_remove(rng.below(in_use.len() as u64) as usize);
                    match st.release(&id, now).unwrap() {
                        ReleaseDecision::Delete => {
                            deleting.insert(id);
                        }
                        ReleaseDecision::Cooldown { until, .. } => {
                            assert_eq!(until, now + c.cooldown, "{ctx}")
                        }
                        ReleaseDecision::AlreadyReleased => panic!("{ctx}: double release"),
                    }
                }
                5 if !tickets.is_empty() => {
                    let t = tickets.swap_remove(rng.below(tickets.len() as u64) as usize);
                    if rng.below(4) == 0 {
                        seen[4] += 1;
                        st.fail_population(t.ticket, now).unwrap();
                    } else {
                        let n = 1 + rng.below(t.count as u64) as u32;
                        let new: Vec<String> = (0..n)
                            .map(|_| {
                                next_id += 1;
                                format!("port{next_id}")
                            })
                            .collect();
                        created.extend(new.iter().cloned());
                        let out = st.complete_population(t.ticket, new).unwrap();
                        deleting.extend(out.delete);
                        assert!(out.duplicates.is_empty(), "{ctx}");
                    }
                }
                6 => {
                    now += Duration::from_secs(rng.below(3));
                    let out = st.tick(now);
                    seen[2] += out.ready.len() as u32;
                    tickets.extend(out.populate);
                    deleting.extend(out.delete);
                }
                7 if !deleting.is_empty() => {
                    let id = deleting.pop_first().unwrap();
                    assert!(st.confirm_deleted(&id), "{ctx}: {id} was not deleting");
                    forgotten.insert(id);
                    seen[3] += 1;
                }
                8 if rng.below(10) == 0 => {
                    let removed = st.remove_sg(["a", "b"][rng.below(2) as usize], None);
                    for id in removed {
                        assert!(!in_use.contains(&id), "{ctx}: SGs of an in-use port cleared");
                    }
                }
                9 if rng.below(20) == 0 => {
                    let drained = if rng.below(2) == 0 {
                        st.delete_host_pools("w1")
                    } else {
                        st.delete_network_pools("net2")
                    };
                    for id in drained {
                        assert!(!in_use.contains(&id), "{ctx}: in-use port drained");
                        deleting.insert(id);
                    }
                }
                _ => {}
            }
            if let Err(e) = st.check_invariants() {
                panic!("{ctx}: {e}");
            }
            assert!(st.in_flight() <= c.max_concurrent_bulk as usize, "{ctx}");
            // Conservation: every created port is known to the state or was confirmed deleted.
            let known: BTreeSet<String> = st.port_ids().map(str::to_string).collect();
            for id in &created {
                assert!(
                    known.contains(id) ^ forgotten.contains(id),
                    "{ctx}: {id} lost or resurrected"
                );
            }
            for id in &deleting {
                assert_eq!(st.port(id).map(|p| p.state), Some(PortState::Deleting), "{ctx}");
            }
            for k in &keys {
                let s = st.pool_stats(k);
                // Overshoot above max is bounded by one population (trimmed by the next tick).
                if c.max != 0 {
                    assert!(
                        s.available + s.cooling <= c.max + c.batch.max(c.min),
                        "{ctx}: {s:?}"
                    );
                }
            }
        }
        // Liveness: whatever happened, a new pod on any open pool gets a port once the
        // executor completes what it was asked to and time passes.
        let mut next = 0u32;
        for k in &keys {
            let p = PodKey::new("live", k.to_string());
            let mut served = false;
            for _ in 0..12 {
                match st.request(&p, k, &sg_sets[0], now) {
                    Decision::Take(_) => {
                        served = true;
                        break;
                    }
                    Decision::Wait {
                        reason: WaitReason::NetworkClosed | WaitReason::HostClosed,
                        ..
                    } => {
                        served = true;
                        break;
                    }
                    Decision::Wait { populate, .. } => tickets.extend(populate),
                }
                for t in tickets.drain(..) {
                    let new: Vec<String> = (0..t.count)
                        .map(|_| {
                            next += 1;
                            format!("live{next}")
                        })
                        .collect();
                    st.complete_population(t.ticket, new).unwrap();
                }
                now += Duration::from_secs(61);
                tickets.extend(st.tick(now).populate);
            }
            assert!(served, "seed {seed}: pool {k} starved: {:?}", st.pool_stats(k));
            st.check_invariants().unwrap();
        }
    }
    assert!(seen.iter().all(|&n| n > 20), "paths not exercised: {seen:?}");
}

#[test]
fn populate_now_forces_a_count_within_bounds() {
    let now = Instant::now();
    let cfg = PoolConfig {
        min: 1,
        max: 6,
        batch: 2,
        ..PoolConfig::default()
    };
    let mut st = PoolState::new(cfg);
    let key = PoolKey::new("h", "p", "n");
    let sgs = SgSet::new(["sg"]);
    let t = st.populate_now(&key, &sgs, 10, now).expect("ticket");
    assert_eq!(t.count, 6, "capped by ports_pool_max");
    assert!(st.populate_now(&key, &sgs, 1, now).is_none(), "one per pool");
    st.complete_population(t.ticket, (0..6).map(|i| format!("p{i}")))
        .unwrap();
    assert!(st.populate_now(&key, &sgs, 1, now).is_none(), "pool at max");
    let pod = PodKey::new("ns", "a");
    let Decision::Take(take) = st.request(&pod, &key, &sgs, now) else {
        panic!("take")
    };
    assert_eq!(st.held_by(&pod), std::slice::from_ref(&take.port_id));
    assert!(st.held_by(&PodKey::new("ns", "b")).is_empty());
    st.check_invariants().unwrap();
}

#[test]
fn adopt_available_adds_unknown_ports_only() {
    let now = Instant::now();
    let mut st = PoolState::new(cfg());
    let key = PoolKey::new("h", "p", "n");
    let sgs = SgSet::new(["sg"]);
    assert!(st.adopt_available("x", key.clone(), sgs.clone()));
    assert!(!st.adopt_available("x", key.clone(), sgs.clone()), "known");
    assert_eq!(st.pool_stats(&key).available, 1);
    let Decision::Take(t) = st.request(&PodKey::new("ns", "a"), &key, &sgs, now) else {
        panic!("take")
    };
    assert_eq!(t.port_id, "x");
    st.delete_network_pools("n");
    assert!(!st.adopt_available("y", key, sgs), "closed network");
    st.check_invariants().unwrap();
}

#[test]
fn a_state_rebuilt_while_a_bulk_is_in_flight_keeps_its_pool() {
    let now = Instant::now();
    let s = sgs(&["sg1"]);
    let mut old = PoolState::new(cfg());
    let a = old.prepopulate(&key("w0"), &s, now).expect("w0 population");
    // Recovery rebuilds the state while w0's bulk is under way; then w1 populates.
    let mut st = PoolState::new(cfg());
    st.adopt_in_flight(&mut old);
    let b = st.prepopulate(&key("w1"), &s, now).expect("w1 population");
    assert_ne!(a.ticket, b.ticket, "no ticket number is used twice");
    assert!(
        st.prepopulate(&key("w0"), &s, now).is_none(),
        "w0 is still populating"
    );
    // w0's bulk completes first: its ports join w0's pool, not w1's.
    st.complete_population(a.ticket, ids("a", 3))
        .expect("w0's ticket");
    st.complete_population(b.ticket, ids("b", 3))
        .expect("w1's ticket");
    assert!(
        take(&mut st, &pod(1), &key("w1"), &s, now)
            .port_id
            .starts_with('b')
    );
    assert!(
        take(&mut st, &pod(2), &key("w0"), &s, now)
            .port_id
            .starts_with('a')
    );
}
