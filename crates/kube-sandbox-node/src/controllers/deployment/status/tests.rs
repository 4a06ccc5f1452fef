//! Unit tests of Deployment status and conditions.

use serde_json::json;

use super::*;
use crate::controllers::deployment::rollout::params;

fn deploy(replicas: i32, generation: i64) -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": "web", "generation": generation},
        "spec": {"replicas": replicas, "selector": {}, "template": {}, "progressDeadlineSeconds": 600,
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}))
    .unwrap()
}

fn rs(name: &str, spec: i32, status: serde_json::Value) -> ReplicaSet {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"replicas": spec, "selector": {}},
        "status": status}),
    )
    .unwrap()
}

fn reason(st: &DeploymentStatus, t: &str) -> Option<String> {
    get(st, t).and_then(|c| c.reason.clone())
}

#[test]
fn counts_and_available_condition() {
    let now = Timestamp::UNIX_EPOCH;
    let d = deploy(2, 3);
    let old = rs(
        "old",
        1,
        json!({"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}),
    );
    let new = rs("new", 1, json!({"replicas": 1}));
    let st = calculate(
        &d,
        &DeploymentStatus::default(),
        &[&old, &new],
        Some(&new),
        &params(&d),
        now,
    );
    assert_eq!(st.replicas, Some(3));
    assert_eq!(st.updated_replicas, Some(1));
    assert_eq!(st.ready_replicas, Some(2));
    assert_eq!(st.available_replicas, Some(2));
    assert_eq!(st.unavailable_replicas, None, "spec 2 - available 2");
    assert_eq!(st.observed_generation, Some(3));
    assert_eq!(
        reason(&st, "Available").as_deref(),
        Some("MinimumReplicasAvailable")
    );
    let st = calculate(
        &d,
        &DeploymentStatus::default(),
        &[&new],
        Some(&new),
        &params(&d),
        now,
    );
    assert_eq!(
        reason(&st, "Available").as_deref(),
        Some("MinimumReplicasUnavailable")
    );
    assert_eq!(st.unavailable_replicas, Some(1));
}

#[test]
fn progressing_condition_through_a_rollout() {
    let t0 = Timestamp::UNIX_EPOCH;
    let d = deploy(1, 2);
    let p = params(&d);
    let mut base = DeploymentStatus::default();
    set(
        &mut base,
        condition(
            "Progressing",
            "True",
            NEW_RS_CREATED,
            "Created new replica set \"new\"".into(),
            t0,
        ),
    );
    // A new pod comes up: progress, transition time kept.
    let new = rs("new", 1, json!({"replicas": 1, "readyReplicas": 1}));
    let old = rs(
        "old",
        1,
        json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}),
    );
    let t1 = t0 + SignedDuration::from_secs(5);
    let st = rollout(&d, &base, &[&old, &new], Some(&new), &p, t1);
    let c = get(&st, "Progressing").unwrap();
    assert_eq!(c.reason.as_deref(), Some(RS_UPDATED));
    assert_eq!(c.message.as_deref(), Some("ReplicaSet \"new\" is progressing."));
    assert_eq!(c.last_transition_time.as_ref().unwrap().0, t0);
    assert_eq!(c.last_update_time.as_ref().unwrap().0, t1);
    // Done: NewReplicaSetAvailable.
    let new = rs(
        "new",
        1,
        json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}),
    );
    let st = rollout(&d, &st, &[&new], Some(&new), &p, t1);
    assert_eq!(reason(&st, "Progressing").as_deref(), Some(NEW_RS_AVAILABLE));
    assert!(complete(&d, &st));
    assert_eq!(deadline_at(&d, &st), None);
}

#[test]
fn times_out_without_progress() {
    let t0 = Timestamp::UNIX_EPOCH;
    let d = deploy(1, 1);
    let p = params(&d);
    let mut base = DeploymentStatus {
        replicas: Some(1),
        updated_replicas: Some(1),
        ..Default::default()
    };
    set(
        &mut base,
        condition("Progressing", "True", RS_UPDATED, "x".into(), t0),
    );
    let new = rs("new", 1, json!({"replicas": 1}));
    let before = t0 + SignedDuration::from_secs(600);
    let st = rollout(&d, &base, &[&new], Some(&new), &p, before);
    assert_eq!(reason(&st, "Progressing").as_deref(), Some(RS_UPDATED));
    assert_eq!(deadline_at(&d, &st), Some(before));
    let st = rollout(
        &d,
        &base,
        &[&new],
        Some(&new),
        &p,
        before + SignedDuration::from_secs(1),
    );
    assert_eq!(reason(&st, "Progressing").as_deref(), Some(TIMED_OUT));
    assert_eq!(get(&st, "Progressing").unwrap().status, "False");
}

#[test]
fn paused_and_failures() {
    let now = Timestamp::UNIX_EPOCH;
    let mut d = deploy(1, 1);
    let mut st = DeploymentStatus::default();
    assert!(!paused_condition(&d, &mut st, now));
    d.spec.as_mut().unwrap().paused = Some(true);
    assert!(paused_condition(&d, &mut st, now));
    assert_eq!(reason(&st, "Progressing").as_deref(), Some(PAUSED));
    assert!(!paused_condition(&d, &mut st, now));
    d.spec.as_mut().unwrap().paused = Some(false);
    assert!(paused_condition(&d, &mut st, now));
    assert_eq!(reason(&st, "Progressing").as_deref(), Some(RESUMED));
    let failing = rs(
        "new",
        1,
        json!({"replicas": 0, "conditions": [{"type": "ReplicaFailure",
        "status": "True", "reason": "FailedCreate", "message": "quota"}]}),
    );
    let st = rollout(&d, &st, &[&failing], Some(&failing), &params(&d), now);
    assert_eq!(reason(&st, "ReplicaFailure").as_deref(), Some("FailedCreate"));
}
