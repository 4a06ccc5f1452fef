//! Pod predicates of the workload controllers (`podutil.IsPodReady`/`IsPodAvailable`,
//! `controller.IsPodActive`) and the order in which a ReplicaSet gives up pods
//! (`ActivePodsWithRanks`).

use std::{cmp::Ordering, collections::HashMap, sync::Arc};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;

/// Annotation that orders pods for scale-down (lower cost goes first).
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// `Succeeded` or `Failed`.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Neither terminal nor being deleted (`controller.IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// The pod's `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// When the pod became ready (its `Ready` condition's `lastTransitionTime`), if it is.
pub fn available_since(pod: &Pod) -> Option<Timestamp> {
    ready_condition(pod)
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// Ready for more than `min_ready_seconds` (`podutil.IsPodAvailable`).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    available_since(pod).is_some_and(|t| t + SignedDuration::from_secs(i64::from(min_ready_seconds)) < now)
}

/// When a ready pod that is not available yet will become available (for a wake-up timer).
pub fn next_available_at(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<Timestamp> {
    if min_ready_seconds <= 0 || is_available(pod, min_ready_seconds, now) {
        return None;
    }
    available_since(pod).map(|t| t + SignedDuration::from_secs(i64::from(min_ready_seconds)))
}

fn phase_ordinal(pod: &Pod) -> u8 {
    match phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
}

/// `afterOrZero`: an absent time sorts first, then the later one.
fn later_first(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// Sorts `pods` so that the ones to delete first come first, as `ActivePodsWithRanks` does:
/// unscheduled before scheduled; Pending before Unknown before Running; not ready before ready;
/// lower `pod-deletion-cost` first; pods sharing their node with more `related` active pods
/// first; more recently ready first; more restarts first; newer first.
pub fn rank_for_deletion(mut pods: Vec<Arc<Pod>>, related: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for p in related.iter().filter(|p| is_active(p)) {
        *on_node.entry(node_name(p)).or_default() += 1;
    }
    let rank = |p: &Pod| on_node.get(node_name(p)).copied().unwrap_or(0);
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    pods.sort_by(|a, b| {
        let (na, nb) = (node_name(a), node_name(b));
        if na != nb && (na.is_empty() || nb.is_empty()) {
            return if na.is_empty() {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        phase_ordinal(a)
            .cmp(&phase_ordinal(b))
            .then_with(|| is_ready(a).cmp(&is_ready(b)))
            .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
            .then_with(|| rank(b).cmp(&rank(a)))
            .then_with(|| {
                if is_ready(a) && is_ready(b) {
                    later_first(available_since(a), available_since(b))
                } else {
                    Ordering::Equal
                }
            })
            .then_with(|| max_restarts(b).cmp(&max_restarts(a)))
            .then_with(|| later_first(created(a), created(b)))
    });
    pods
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, node: &str, phase: &str, ready_at: Option<&str>, created: &str) -> Arc<Pod> {
        let mut status = json!({"phase": phase});
        if let Some(t) = ready_at {
            status["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": t}]);
        }
        let mut spec = json!({"containers": [{"name": "c"}]});
        if !node.is_empty() {
            spec["nodeName"] = json!(node);
        }
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "creationTimestamp": created},
                "spec": spec, "status": status}))
            .unwrap(),
        )
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect()
    }

    #[test]
    fn availability_honours_min_ready_seconds() {
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let p = pod(
            "a",
            "n",
            "Running",
            Some("2026-01-01T00:00:00Z"),
            "2026-01-01T00:00:00Z",
        );
        assert!(is_available(&p, 0, now));
        assert!(is_available(&p, 9, now));
        assert!(!is_available(&p, 10, now));
        assert_eq!(
            next_available_at(&p, 10, now),
            Some("2026-01-01T00:00:10Z".parse().unwrap())
        );
        assert_eq!(next_available_at(&p, 5, now), None);
        let unready = pod("b", "n", "Running", None, "2026-01-01T00:00:00Z");
        assert!(!is_available(&unready, 0, now) && !is_ready(&unready));
    }

    #[test]
    fn deletion_prefers_unscheduled_pending_unready_then_newest() {
        let t0 = "2026-01-01T00:00:00Z";
        let pods = vec![
            pod("ready-old", "n1", "Running", Some("2026-01-01T00:00:01Z"), t0),
            pod("ready-new", "n2", "Running", Some("2026-01-01T00:00:05Z"), t0),
            pod("unready", "n3", "Running", None, t0),
            pod("pending", "n4", "Pending", None, t0),
            pod("unscheduled", "", "Pending", None, t0),
        ];
        let order = rank_for_deletion(pods.clone(), &pods);
        assert_eq!(
            names(&order),
            ["unscheduled", "pending", "unready", "ready-new", "ready-old"]
        );
        // Doubled-up pods go before lonely ones.
        let a = pod("a", "n1", "Running", Some(t0), t0);
        let b = pod("b", "n2", "Running", Some(t0), t0);
        let c = pod("c", "n2", "Running", Some(t0), t0);
        let order = rank_for_deletion(vec![a.clone(), b.clone()], &[a, b, c]);
        assert_eq!(names(&order), ["b", "a"]);
        // Newer pods go first when everything else is equal.
        let old = pod("old", "n1", "Pending", None, "2026-01-01T00:00:00Z");
        let new = pod("new", "n1", "Pending", None, "2026-01-01T00:01:00Z");
        assert_eq!(names(&rank_for_deletion(vec![old, new], &[])), ["new", "old"]);
    }
}
