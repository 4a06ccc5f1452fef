//! The ReplicaSet controller's decisions, without I/O: which pods a ReplicaSet owns, adopts or
//! releases, how many to create, which to delete, and its status.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::{
    api::{
        apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus},
        core::v1::Pod,
    },
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::ResourceExt;

use super::super::workload::{
    Claim, claim, is_active, is_available, is_ready, labels_match, next_available_at, rank_for_deletion,
    selector_matches,
};

/// At most this many pods are created or deleted per ReplicaSet and pass (`burstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// What to do for one ReplicaSet.
#[derive(Debug, Default)]
pub struct Plan {
    /// Active pods it controls (owned, and the orphans it adopts).
    pub active: Vec<Arc<Pod>>,
    /// Orphans to adopt.
    pub adopt: Vec<Arc<Pod>>,
    /// Owned pods its selector no longer matches.
    pub release: Vec<Arc<Pod>>,
    /// Pods to create.
    pub create: usize,
    /// Pods to delete, in this order.
    pub delete: Vec<Arc<Pod>>,
}

fn desired(rs: &ReplicaSet) -> usize {
    rs.spec
        .as_ref()
        .and_then(|s| s.replicas)
        .map_or(1, |r| usize::try_from(r).unwrap_or(0))
}

fn min_ready(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
}

/// Plans one pass for `rs` over the pods of its namespace; `related` are the pods of the
/// ReplicaSets that share its controller (used to spread deletions, as upstream).
pub fn plan(rs: &ReplicaSet, ns_pods: &[Arc<Pod>], related: &[Arc<Pod>]) -> Plan {
    let mut p = Plan::default();
    let uid = rs.uid().unwrap_or_default();
    let deleting = rs.metadata.deletion_timestamp.is_some();
    let Some(selector) = rs.spec.as_ref().map(|s| &s.selector) else {
        return p;
    };
    // An empty selector matches nothing for ReplicaSets (validation refuses it anyway).
    let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    for pod in ns_pods.iter().filter(|p| is_active(p)) {
        let matches = !empty && selector_matches(selector, pod.labels());
        match claim(&pod.metadata, &uid, matches, deleting) {
            Claim::Owned => p.active.push(pod.clone()),
            Claim::Adopt => {
                p.active.push(pod.clone());
                p.adopt.push(pod.clone());
            }
            Claim::Release => p.release.push(pod.clone()),
            Claim::Ignore => {}
        }
    }
    if deleting {
        return p;
    }
    let want = desired(rs);
    let have = p.active.len();
    if have < want {
        p.create = (want - have).min(BURST_REPLICAS);
    } else if have > want {
        let n = (have - want).min(BURST_REPLICAS);
        p.delete = rank_for_deletion(p.active.clone(), related)
            .into_iter()
            .take(n)
            .collect();
    }
    p
}

/// The status after a pass (`calculateStatus`): counts over the active pods, the
/// `ReplicaFailure` condition while creating or deleting fails, the observed generation.
pub fn status(
    rs: &ReplicaSet,
    active: &[Arc<Pod>],
    manage_error: Option<&str>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let mut st = rs.status.clone().unwrap_or_default();
    let template_labels = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    let mut fully = 0;
    let mut ready = 0;
    let mut available = 0;
    for pod in active {
        if labels_match(template_labels, pod.labels()) {
            fully += 1;
        }
        if is_ready(pod) {
            ready += 1;
            if is_available(pod, min_ready(rs), now) {
                available += 1;
            }
        }
    }
    let mut conditions = st.conditions.take().unwrap_or_default();
    let has_failure = conditions.iter().any(|c| c.type_ == "ReplicaFailure");
    match manage_error {
        Some(msg) if !has_failure => {
            let reason = if active.len() < desired(rs) {
                "FailedCreate"
            } else {
                "FailedDelete"
            };
            conditions.push(ReplicaSetCondition {
                type_: "ReplicaFailure".into(),
                status: "True".into(),
                reason: Some(reason.into()),
                message: Some(msg.into()),
                last_transition_time: Some(Time(now)),
            });
        }
        None if has_failure => conditions.retain(|c| c.type_ != "ReplicaFailure"),
        _ => {}
    }
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let nonzero = |n: usize| (n > 0).then(|| count(n));
    ReplicaSetStatus {
        replicas: count(active.len()),
        fully_labeled_replicas: nonzero(fully),
        ready_replicas: nonzero(ready),
        available_replicas: nonzero(available),
        observed_generation: rs.metadata.generation,
        conditions: (!conditions.is_empty()).then_some(conditions),
        terminating_replicas: st.terminating_replicas,
    }
}

/// When a ready pod of `rs` becomes available (so the status can be refreshed then).
pub fn wake_at(rs: &ReplicaSet, active: &[Arc<Pod>], now: Timestamp) -> Option<Timestamp> {
    active
        .iter()
        .filter_map(|p| next_available_at(p, min_ready(rs), now))
        .min()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rs(replicas: i32, uid: &str) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web-abc", "namespace": "d", "uid": uid, "generation": 3},
            "spec": {"replicas": replicas, "minReadySeconds": 5,
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web", "tier": "x"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
        .unwrap()
    }

    fn pod(name: &str, labels: serde_json::Value, owner: Option<&str>, ready_at: Option<&str>) -> Arc<Pod> {
        let mut meta = json!({"name": name, "namespace": "d", "labels": labels,
            "creationTimestamp": "2026-01-01T00:00:00Z"});
        if let Some(o) = owner {
            meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "x", "uid": o, "controller": true}]);
        }
        let mut status = json!({"phase": "Running"});
        if let Some(t) = ready_at {
            status["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": t}]);
        }
        Arc::new(
            serde_json::from_value(json!({"metadata": meta,
                "spec": {"nodeName": "n", "containers": [{"name": "c"}]}, "status": status}))
            .unwrap(),
        )
    }

    #[test]
    fn creates_missing_and_adopts_orphans() {
        let pods = vec![
            pod("mine", json!({"app": "web"}), Some("u1"), None),
            pod("orphan", json!({"app": "web"}), None, None),
            pod("theirs", json!({"app": "web"}), Some("u2"), None),
            pod("unrelated", json!({"app": "db"}), None, None),
        ];
        let p = plan(&rs(4, "u1"), &pods, &pods);
        assert_eq!(p.active.len(), 2);
        assert_eq!(p.adopt.len(), 1);
        assert_eq!(p.create, 2);
        assert!(p.delete.is_empty() && p.release.is_empty());
    }

    #[test]
    fn deletes_surplus_unready_first_and_releases_mismatches() {
        let pods = vec![
            pod(
                "ready",
                json!({"app": "web"}),
                Some("u1"),
                Some("2026-01-01T00:00:00Z"),
            ),
            pod("unready", json!({"app": "web"}), Some("u1"), None),
            pod("relabelled", json!({"app": "other"}), Some("u1"), None),
        ];
        let p = plan(&rs(1, "u1"), &pods, &pods);
        assert_eq!(p.release.len(), 1);
        assert_eq!(p.delete.len(), 1);
        assert_eq!(p.delete[0].name_any(), "unready");
        let mut deleting = rs(1, "u1");
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let p = plan(&deleting, &pods, &pods);
        assert!(p.delete.is_empty() && p.create == 0 && p.release.is_empty());
    }

    #[test]
    fn status_counts_and_failure_condition() {
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let active = vec![
            pod(
                "a",
                json!({"app": "web", "tier": "x"}),
                Some("u1"),
                Some("2026-01-01T00:00:00Z"),
            ),
            pod(
                "b",
                json!({"app": "web"}),
                Some("u1"),
                Some("2026-01-01T00:00:08Z"),
            ),
            pod("c", json!({"app": "web", "tier": "x"}), Some("u1"), None),
        ];
        let r = rs(4, "u1");
        let st = status(&r, &active, None, now);
        assert_eq!(st.replicas, 3);
        assert_eq!(st.fully_labeled_replicas, Some(2));
        assert_eq!(st.ready_replicas, Some(2));
        assert_eq!(st.available_replicas, Some(1));
        assert_eq!(st.observed_generation, Some(3));
        assert!(st.conditions.is_none());
        assert_eq!(
            wake_at(&r, &active, now),
            Some("2026-01-01T00:00:13Z".parse().unwrap())
        );
        let st = status(&r, &active, Some("quota"), now);
        let c = &st.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.reason.as_deref()),
            ("ReplicaFailure", Some("FailedCreate"))
        );
        let mut failed = r.clone();
        failed.status = Some(st);
        assert!(status(&failed, &active, None, now).conditions.is_none());
        let none = status(&r, &[], None, now);
        assert_eq!(
            serde_json::to_value(&none).unwrap(),
            json!({"replicas": 0, "observedGeneration": 3})
        );
    }
}
