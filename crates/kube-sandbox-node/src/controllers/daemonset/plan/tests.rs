//! Unit tests of the DaemonSet controller's decisions.

use serde_json::{Value, json};

use super::*;

fn now() -> Timestamp {
    "2026-01-01T00:10:00Z".parse().unwrap()
}

fn ds(strategy: Value, extra_spec: Value) -> DaemonSet {
    let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
    for (k, v) in extra_spec.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({
        "metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds1", "generation": 2,
                     "annotations": {TEMPLATE_GENERATION_ANNOTATION: "2"}},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "updateStrategy": strategy,
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec}}}))
    .unwrap()
}

fn rolling(unavailable: Value, surge: Value) -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": unavailable, "maxSurge": surge}})
}

fn node(name: &str, labels: Value, taints: Value) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
        .unwrap(),
    )
}

/// A daemon pod on `node`: `updated` carries the current generation, `ready` since 00:00.
fn pod(name: &str, node: &str, updated: bool, ready: bool, created: &str) -> Arc<Pod> {
    let mut status = json!({"phase": "Running"});
    if ready {
        status["conditions"] =
            json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
    }
    let generation = if updated { "2" } else { "1" };
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created,
                         "labels": {"app": "agent", TEMPLATE_GENERATION: generation, REVISION_HASH: "old"}},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]}, "status": status}))
        .unwrap(),
    )
}

fn names(pods: &[Arc<Pod>]) -> Vec<String> {
    pods.iter().map(|p| p.name_any()).collect()
}

fn by_node(pods: &[Arc<Pod>]) -> BTreeMap<String, Vec<Arc<Pod>>> {
    pods_by_node(pods)
}

#[test]
fn pod_template_pins_and_tolerates() {
    let d = ds(
        rolling(json!(1), json!(0)),
        json!({"hostNetwork": true,
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 5}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}}}),
    );
    let t = pod_template(&d, "h1");
    let labels = t.metadata.as_ref().unwrap().labels.as_ref().unwrap();
    assert_eq!(labels[REVISION_HASH], "h1");
    assert_eq!(labels[TEMPLATE_GENERATION], "2");
    let spec = t.spec.unwrap();
    let tol = spec.tolerations.as_ref().unwrap();
    assert_eq!(tol.len(), 7, "{tol:?}");
    let not_ready = tol.iter().find(|t| t.key.as_deref() == Some(NOT_READY)).unwrap();
    assert_eq!(not_ready.toleration_seconds, None, "replaced by the infinite one");
    assert!(
        tol.iter()
            .any(|t| t.key.as_deref() == Some("node.kubernetes.io/network-unavailable"))
    );
    let pinned = pin_to_node(spec.affinity, "n1");
    let mut p: Pod = serde_json::from_value(json!({"spec": {"containers": []}})).unwrap();
    p.spec.as_mut().unwrap().affinity = Some(pinned);
    assert_eq!(target_node(&p).as_deref(), Some("n1"));
    let terms = &p
        .spec
        .as_ref()
        .unwrap()
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms;
    assert_eq!(terms.len(), 1);
    assert!(terms[0].match_expressions.is_none());
    let plain = pod_template(&ds(rolling(json!(1), json!(0)), json!({})), "h");
    assert_eq!(plain.spec.unwrap().tolerations.unwrap().len(), 6);
}

#[test]
fn where_daemon_pods_run() {
    let d = ds(
        rolling(json!(1), json!(0)),
        json!({"nodeSelector": {"role": "worker"}}),
    );
    assert_eq!(
        should_run(&d, &node("a", json!({"role": "worker"}), json!([]))),
        (true, true)
    );
    assert_eq!(should_run(&d, &node("b", json!({}), json!([]))), (false, false));
    let no_schedule = node(
        "c",
        json!({"role": "worker"}),
        json!([{"key": "k", "effect": "NoSchedule"}]),
    );
    assert_eq!(should_run(&d, &no_schedule), (false, true), "keeps a running pod");
    let no_execute = node(
        "d",
        json!({"role": "worker"}),
        json!([{"key": "k", "effect": "NoExecute"}]),
    );
    assert_eq!(should_run(&d, &no_execute), (false, false));
    // Automatic tolerations: cordoned and not-ready (NoExecute) nodes still get a pod.
    let cordoned = node(
        "e",
        json!({"role": "worker"}),
        json!([
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
    );
    assert_eq!(should_run(&d, &cordoned), (true, true));
}

#[test]
fn manage_creates_and_prunes() {
    let d = ds(
        rolling(json!(1), json!(0)),
        json!({"nodeSelector": {"role": "worker"}}),
    );
    let nodes = vec![
        node("a", json!({"role": "worker"}), json!([])),
        node("b", json!({"role": "worker"}), json!([])),
        node("c", json!({}), json!([])),
    ];
    let mut failed = (*pod("failed", "b", true, false, "2026-01-01T00:00:00Z")).clone();
    failed.status.as_mut().unwrap().phase = Some("Failed".into());
    let mut orphan_unscheduled: Pod = (*pod("lost", "", true, false, "2026-01-01T00:00:00Z")).clone();
    orphan_unscheduled.spec.as_mut().unwrap().affinity = Some(pin_to_node(None, "gone"));
    let pods = vec![
        pod("a-old", "a", true, true, "2026-01-01T00:00:00Z"),
        pod("a-dup", "a", true, true, "2026-01-01T00:01:00Z"),
        Arc::new(failed),
        pod("c-pod", "c", true, true, "2026-01-01T00:00:00Z"),
        Arc::new(orphan_unscheduled),
    ];
    let c = manage(&d, &nodes, &by_node(&pods), "h", now());
    assert!(
        c.create_on.is_empty(),
        "b has a (failed) pod: it is deleted first, then recreated"
    );
    assert_eq!(names(&c.delete_failed), ["failed"]);
    assert_eq!(names(&c.delete), ["a-dup", "c-pod", "lost"]);
    let c = manage(&d, &nodes, &BTreeMap::new(), "h", now());
    assert_eq!(c.create_on, ["a", "b"]);
}

#[test]
fn rolling_update_within_max_unavailable() {
    let d = ds(rolling(json!(1), json!(0)), json!({}));
    let nodes = vec![
        node("a", json!({}), json!([])),
        node("b", json!({}), json!([])),
        node("c", json!({}), json!([])),
    ];
    let t = "2026-01-01T00:00:00Z";
    let all_old = vec![
        pod("pa", "a", false, true, t),
        pod("pb", "b", false, true, t),
        pod("pc", "c", false, true, t),
    ];
    let c = rolling_update(&d, &nodes, &by_node(&all_old), "h", now());
    assert_eq!(names(&c.delete), ["pa"], "one at a time");
    // a's new pod is not available yet: nothing more.
    let mid = vec![
        pod("pa2", "a", true, false, t),
        pod("pb", "b", false, true, t),
        pod("pc", "c", false, true, t),
    ];
    assert!(
        rolling_update(&d, &nodes, &by_node(&mid), "h", now())
            .delete
            .is_empty()
    );
    // A node being replaced (no pod yet) counts as unavailable too.
    let gap = vec![pod("pb", "b", false, true, t), pod("pc", "c", false, true, t)];
    assert!(
        rolling_update(&d, &nodes, &by_node(&gap), "h", now())
            .delete
            .is_empty()
    );
    // Unavailable old pods are replaced without using the budget; 50% of 3 rounds up to 2.
    let d = ds(rolling(json!("50%"), json!(0)), json!({}));
    let broken = vec![
        pod("pa", "a", false, false, t),
        pod("pb", "b", false, true, t),
        pod("pc", "c", false, true, t),
    ];
    let c = rolling_update(&d, &nodes, &by_node(&broken), "h", now());
    assert_eq!(names(&c.delete), ["pa", "pb", "pc"]);
}

#[test]
fn rolling_update_with_surge() {
    let d = ds(rolling(json!(0), json!(1)), json!({}));
    let nodes = vec![node("a", json!({}), json!([])), node("b", json!({}), json!([]))];
    let t = "2026-01-01T00:00:00Z";
    let old = vec![pod("pa", "a", false, true, t), pod("pb", "b", false, true, t)];
    let c = rolling_update(&d, &nodes, &by_node(&old), "h", now());
    assert_eq!(c.create_on, ["a"]);
    assert!(c.delete.is_empty());
    let surged = vec![
        pod("pa", "a", false, true, t),
        pod("pa2", "a", true, true, t),
        pod("pb", "b", false, true, t),
    ];
    let c = rolling_update(&d, &nodes, &by_node(&surged), "h", now());
    assert_eq!(names(&c.delete), ["pa"], "a's new pod is available");
    assert_eq!(c.create_on, ["b"], "a no longer surges: b's turn");
    let waiting = vec![
        pod("pa", "a", false, true, t),
        pod("pa2", "a", true, false, t),
        pod("pb", "b", false, true, t),
    ];
    let c = rolling_update(&d, &nodes, &by_node(&waiting), "h", now());
    assert!(
        c.delete.is_empty() && c.create_on.is_empty(),
        "surge budget used by a"
    );
}

#[test]
fn status_counts() {
    let d = ds(
        rolling(json!(1), json!(0)),
        json!({"nodeSelector": {"role": "worker"}}),
    );
    let nodes = vec![
        node("a", json!({"role": "worker"}), json!([])),
        node("b", json!({"role": "worker"}), json!([])),
        node("c", json!({"role": "worker"}), json!([])),
        node("x", json!({}), json!([])),
    ];
    let t = "2026-01-01T00:00:00Z";
    let pods = vec![
        pod("pa", "a", true, true, t),
        pod("pb", "b", false, false, t),
        pod("px", "x", true, true, t),
    ];
    let st = status(&d, &nodes, &by_node(&pods), "h", now());
    assert_eq!(st.desired_number_scheduled, 3);
    assert_eq!(st.current_number_scheduled, 2);
    assert_eq!(st.number_misscheduled, 1);
    assert_eq!(st.number_ready, 1);
    assert_eq!(st.number_available, Some(1));
    assert_eq!(st.number_unavailable, Some(2));
    assert_eq!(st.updated_number_scheduled, Some(1));
    assert_eq!(st.observed_generation, Some(2));
    assert!(is_updated(&pod("p", "a", false, true, t), "old", None), "by hash");
}
