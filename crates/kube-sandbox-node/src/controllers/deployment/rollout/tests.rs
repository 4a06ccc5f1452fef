//! Unit tests of the rollout arithmetic.

use serde_json::json;

use super::*;

fn rs(name: &str, replicas: i32, available: i32, created_min: i64) -> RsState {
    RsState {
        name: name.into(),
        replicas,
        available,
        created: Some(Timestamp::from_second(created_min * 60).unwrap()),
        max_replicas: None,
    }
}

fn rolling(replicas: i32, surge: i32, unavailable: i32) -> Params {
    Params {
        replicas,
        max_surge: surge,
        max_unavailable: unavailable,
        rolling: true,
    }
}

fn deploy(replicas: i32, strategy: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"replicas": replicas,
        "selector": {}, "template": {}, "strategy": strategy}}))
    .unwrap()
}

#[test]
fn budgets_round_like_kubernetes() {
    let d = deploy(
        10,
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
    );
    assert_eq!(params(&d), rolling(10, 3, 2));
    let d = deploy(
        2,
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
    );
    assert_eq!(params(&d), rolling(2, 1, 0));
    let d = deploy(
        1,
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "0%", "maxUnavailable": "10%"}}),
    );
    assert_eq!(params(&d), rolling(1, 0, 1), "both 0 → 1 unavailable");
    let d = deploy(
        3,
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 5}}),
    );
    assert_eq!(params(&d).max_unavailable, 3, "capped at replicas");
    let d = deploy(3, json!({"type": "Recreate"}));
    assert_eq!(
        params(&d),
        Params {
            replicas: 3,
            max_surge: 0,
            max_unavailable: 0,
            rolling: false
        }
    );
}

#[test]
fn new_replica_set_grows_within_surge() {
    let p = rolling(4, 1, 1);
    let old = rs("old", 4, 4, 0);
    let new = rs("new", 0, 0, 1);
    assert_eq!(reconcile_new(&p, &[old.clone(), new.clone()], &new), Some(1));
    let new = rs("new", 1, 0, 1);
    assert_eq!(
        reconcile_new(&p, &[old.clone(), new.clone()], &new),
        None,
        "at 5 = 4 + 1"
    );
    let old = rs("old", 2, 2, 0);
    assert_eq!(reconcile_new(&p, &[old, new.clone()], &new), Some(3));
    let too_big = rs("new", 6, 6, 1);
    assert_eq!(
        reconcile_new(&p, std::slice::from_ref(&too_big), &too_big),
        Some(4)
    );
    let recreate = Params { rolling: false, ..p };
    assert_eq!(new_rs_replicas(&recreate, &[], &rs("n", 0, 0, 0)), 4);
}

#[test]
fn old_replica_sets_shrink_within_unavailability() {
    // 2 replicas, surge 1, unavailable 0: the old one goes down only as new pods are available.
    let p = rolling(2, 1, 0);
    let old = rs("old", 2, 2, 0);
    assert!(reconcile_old(&p, std::slice::from_ref(&old), Some(&rs("new", 1, 0, 1))).is_empty());
    assert_eq!(
        reconcile_old(&p, std::slice::from_ref(&old), Some(&rs("new", 1, 1, 1))),
        [("old".to_string(), 1)]
    );
    // Unhealthy old replicas go first (4 pods, at least 3 available: 1 may go).
    let p = rolling(4, 0, 1);
    let old = [rs("a", 2, 0, 0), rs("b", 2, 2, 1)];
    assert_eq!(
        reconcile_old(&p, &old, Some(&rs("new", 0, 0, 2))),
        [("a".to_string(), 1)]
    );
    // More unavailability allowed: unhealthy ones first, then available ones.
    let p = rolling(4, 0, 3);
    assert_eq!(
        reconcile_old(&p, &old, Some(&rs("new", 0, 0, 2))),
        [("a".to_string(), 0), ("b".to_string(), 1)]
    );
    // Oldest first.
    let p = rolling(4, 1, 1);
    let old = [rs("newer", 2, 2, 5), rs("older", 2, 2, 1)];
    // 5 pods, 1 new one unavailable, at least 3 available: one old pod may go.
    assert_eq!(
        reconcile_old(&p, &old, Some(&rs("new", 1, 0, 9))),
        [("older".to_string(), 1)]
    );
}

#[test]
fn proportional_scaling_mid_rollout() {
    // 10 replicas, surge 3: old 8, new 5 = 13 = max. Scale to 20 (surge 5 → 25 allowed).
    let p = rolling(20, 5, 5);
    let mut old = rs("old", 8, 8, 0);
    old.max_replicas = Some(13);
    let mut new = rs("new", 5, 0, 1);
    new.max_replicas = Some(13);
    let out = scale(
        &p,
        ScaleInput {
            new: Some(&new),
            new_desired: Some(10),
            old: &[old],
            status_replicas: 13,
        },
    );
    let total: i32 = out.iter().map(|(_, s)| s).sum();
    assert_eq!(total, 25, "{out:?}");
    assert_eq!(out, [("old".to_string(), 15), ("new".to_string(), 10)]);
    // One active ReplicaSet takes the whole size.
    let out = scale(
        &p,
        ScaleInput {
            new: Some(&rs("new", 3, 3, 1)),
            new_desired: Some(3),
            old: &[rs("old", 0, 0, 0)],
            status_replicas: 3,
        },
    );
    assert_eq!(out, [("new".to_string(), 20)]);
    // A saturated new ReplicaSet: old ones to 0.
    let p = rolling(3, 1, 0);
    let out = scale(
        &p,
        ScaleInput {
            new: Some(&rs("new", 3, 3, 1)),
            new_desired: Some(3),
            old: &[rs("old", 1, 1, 0)],
            status_replicas: 4,
        },
    );
    assert_eq!(out, [("old".to_string(), 0)]);
}

#[test]
fn revision_history() {
    assert_eq!(append_revision_history("", "1", 2000).as_deref(), Some("1"));
    assert_eq!(
        append_revision_history("1,3", "4", 2000).as_deref(),
        Some("1,3,4")
    );
    assert_eq!(append_revision_history("1,3", "4", 4).as_deref(), Some("3,4"));
    assert_eq!(append_revision_history("1", "12345", 3), None);
}

#[test]
fn history_trimming_keeps_limit_and_busy_sets() {
    let mk = |name: &str, rev: i64, replicas: i32| -> ReplicaSet {
        serde_json::from_value(json!({"metadata": {"name": name, "generation": 1,
            "annotations": {REVISION: rev.to_string()}},
            "spec": {"replicas": replicas, "selector": {}},
            "status": {"replicas": replicas, "observedGeneration": 1}}))
        .unwrap()
    };
    let (a, b, c, d) = (mk("a", 1, 0), mk("b", 2, 1), mk("c", 3, 0), mk("d", 4, 0));
    let old = [&d, &b, &a, &c];
    let names = |v: Vec<&ReplicaSet>| v.iter().map(|r| r.name_any()).collect::<Vec<_>>();
    assert_eq!(names(history_to_delete(&old, 2)), ["a"], "b still has a replica");
    assert_eq!(names(history_to_delete(&old, 0)), ["a", "c", "d"]);
    assert!(history_to_delete(&old, 10).is_empty());
}
