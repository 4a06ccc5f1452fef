//! The scheduler: binds pods without a node (and `schedulerName` default-scheduler) to a Ready,
//! schedulable node matching `nodeSelector` and the required node affinity (`matchExpressions`
//! on labels, `matchFields` on `metadata.name`, as DaemonSet pods carry) and tolerating its
//! taints, fewest pods first, through the `pods/binding` subresource; unschedulable pods get
//! `PodScheduled=False` (reason `Unschedulable`) and are retried whenever pods or nodes change.
//!
//! A NotReady node is treated as carrying the `node.kubernetes.io/not-ready:NoSchedule` taint
//! the node lifecycle controller would put on it: pods that tolerate it (such as CNI daemons)
//! may go there, others are refused with "node(s) were not ready".

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use tracing::{info, warn};

use super::{
    Error,
    predicates::{NOT_READY, UNSCHEDULABLE, fits_node_affinity, node_ready, node_taints, taint, tolerates},
};
use crate::events::{EventType, Recorder, reference};

/// The scheduler name this scheduler serves.
pub const SCHEDULER_NAME: &str = "default-scheduler";

/// Why nodes were rejected (for the Unschedulable message).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rejections {
    /// Reason → node count.
    pub reasons: BTreeMap<&'static str, usize>,
    /// Nodes considered.
    pub total: usize,
}

impl Rejections {
    /// `0/N nodes are available: ...` as the real scheduler words it.
    pub fn message(&self) -> String {
        let parts: Vec<String> = self.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        if parts.is_empty() {
            format!("0/{} nodes are available.", self.total)
        } else {
            format!("0/{} nodes are available: {}.", self.total, parts.join(", "))
        }
    }
}

/// Whether this scheduler should bind `pod`.
pub fn wants_scheduling(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    spec.node_name.as_deref().unwrap_or("").is_empty()
        && spec.scheduler_name.as_deref().unwrap_or(SCHEDULER_NAME) == SCHEDULER_NAME
        && pod.metadata.deletion_timestamp.is_none()
        && !matches!(phase, Some("Succeeded") | Some("Failed"))
}

/// Picks a node for `pod`: Ready (or NotReady with the not-ready taint tolerated), schedulable,
/// matching `nodeSelector` and required node affinity, taints tolerated, below its pod capacity;
/// fewest pods first, then by name.
pub fn choose_node(
    pod: &Pod,
    nodes: &[Arc<Node>],
    pod_counts: &HashMap<String, usize>,
    placed: &HashMap<String, Vec<super::interpod::Placed>>,
) -> Result<String, Rejections> {
    let spec = pod.spec.clone().unwrap_or_default();
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    let mut rej = Rejections {
        total: nodes.len(),
        ..Default::default()
    };
    let mut best: Option<(usize, String)> = None;
    for node in nodes {
        let name = node.name_any();
        let reason = if !node_ready(node) && !tolerates(&tolerations, &taint(NOT_READY, "NoSchedule")) {
            Some("node(s) were not ready")
        } else if node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
            && !tolerates(&tolerations, &taint(UNSCHEDULABLE, "NoSchedule"))
        {
            Some("node(s) were unschedulable")
        } else if !fits_node_affinity(&spec, node) {
            Some("node(s) didn't match Pod's node affinity/selector")
        } else if let Some(r) = super::interpod::conflict(pod, node, nodes, placed) {
            Some(r)
        } else if node_taints(node)
            .iter()
            .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            .any(|t| !tolerates(&tolerations, t))
        {
            Some("node(s) had untolerated taint(s)")
        } else {
            let cap = node
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| a.get("pods"))
                .and_then(|q| q.0.parse::<usize>().ok())
                .unwrap_or(110);
            let count = pod_counts.get(&name).copied().unwrap_or(0);
            if count >= cap {
                Some("Too many pods")
            } else {
                if best.as_ref().is_none_or(|(c, n)| (count, &name) < (*c, n)) {
                    best = Some((count, name));
                }
                None
            }
        };
        if let Some(r) = reason {
            *rej.reasons.entry(r).or_default() += 1;
        }
    }
    best.map(|(_, n)| n).ok_or(rej)
}

fn unschedulable_message(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.message.clone())
}

/// Runs the scheduler forever.
pub(crate) async fn run(client: Client, caches: super::Caches) -> Result<(), Error> {
    let (pods, nodes, notify) = caches.pods_and_nodes();
    let recorder = Recorder::new(client.clone(), "default-scheduler", None);
    // Bindings we made that the cache may not show yet: pod uid → node.
    let mut bound: HashMap<String, String> = HashMap::new();
    info!("scheduler running");
    loop {
        let pass_started = std::time::Instant::now();
        let all_pods = pods.state();
        let all_nodes = nodes.state();
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut placed: HashMap<String, Vec<super::interpod::Placed>> = HashMap::new();
        for p in &all_pods {
            let uid = p.uid().unwrap_or_default();
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty())
                .or_else(|| bound.get(&uid).cloned());
            let terminal = matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded") | Some("Failed")
            );
            if let Some(n) = node.filter(|_| !terminal) {
                *counts.entry(n.clone()).or_default() += 1;
                placed.entry(n).or_default().push(super::interpod::Placed::of(p));
            }
        }
        // Forget bindings the cache now reflects (or whose pods are gone).
        bound.retain(|uid, _| {
            all_pods
                .iter()
                .any(|p| p.uid().as_deref() == Some(uid.as_str()) && wants_scheduling(p))
        });
        // The scheduling cycle decides one pod at a time (each decision counts the ones
        // before it); the binding cycle runs concurrently, as the real scheduler's does
        // (its bindings run in goroutines and its Events go out asynchronously): a burst is
        // bound in about one API round trip instead of one per pod.
        let mut bindings = Vec::new();
        for pod in all_pods.iter().filter(|p| wants_scheduling(p)) {
            let uid = pod.uid().unwrap_or_default();
            if bound.contains_key(&uid) {
                continue;
            }
            match choose_node(pod, &all_nodes, &counts, &placed) {
                Ok(node) => {
                    *counts.entry(node.clone()).or_default() += 1;
                    placed
                        .entry(node.clone())
                        .or_default()
                        .push(super::interpod::Placed::of(pod));
                    bound.insert(uid.clone(), node.clone());
                    let (client, recorder) = (&client, &recorder);
                    bindings.push(async move {
                        let res = bind(client, pod, &node).await;
                        match &res {
                            Ok(()) => {
                                info!(pod = %pod.name_any(), namespace = ?pod.namespace(), node = %node, "pod scheduled");
                                let msg = format!(
                                    "Successfully assigned {}/{} to {}",
                                    pod.namespace().unwrap_or_default(),
                                    pod.name_any(),
                                    node
                                );
                                recorder
                                    .record(reference(pod.as_ref()), EventType::Normal, "Scheduled", &msg)
                                    .await;
                            }
                            Err(e) => warn!(pod = %pod.name_any(), error = %e, "binding failed"),
                        }
                        (uid, res.is_ok())
                    });
                }
                Err(rej) => {
                    let msg = rej.message();
                    if unschedulable_message(pod).as_deref() != Some(msg.as_str()) {
                        info!(pod = %pod.name_any(), namespace = ?pod.namespace(), reason = %msg, "pod unschedulable");
                        mark_unschedulable(&client, pod, &msg).await;
                        recorder
                            .record(
                                reference(pod.as_ref()),
                                EventType::Warning,
                                "FailedScheduling",
                                &msg,
                            )
                            .await;
                    }
                }
            }
        }
        let mut retry = false;
        for (uid, ok) in futures::future::join_all(bindings).await {
            if !ok {
                // Not bound after all: its node's count is recomputed on the next pass.
                bound.remove(&uid);
                retry = true;
            }
        }
        let took = pass_started.elapsed();
        if retry {
            tokio::select! {
                _ = notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        } else {
            notify.notified().await;
        }
        // Coalesce bursts of changes.
        tokio::time::sleep(super::settle(took)).await;
    }
}

async fn bind(client: &Client, pod: &Pod, node: &str) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod.name_any(), "namespace": ns, "uid": pod.uid()},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    match api
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &pod.name_any(),
            &PostParams::default(),
            &binding,
        )
        .await
    {
        Ok(_) => Ok(()),
        // Already bound or gone: nothing to do.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

async fn mark_unschedulable(client: &Client, pod: &Pod, msg: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let body = json!({"status": {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
        "lastTransitionTime": crate::k8s_now(), "lastProbeTime": null,
    }]}});
    if let Err(e) = api
        .patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        warn!(pod = %pod.name_any(), error = %e, "cannot mark pod unschedulable");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn node(name: &str, ready: bool, labels: serde_json::Value, extra_spec: serde_json::Value) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels},
                "spec": extra_spec,
                "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}],
                           "allocatable": {"pods": "2"}}
            }))
            .unwrap(),
        )
    }

    fn pod(spec_extra: serde_json::Value) -> Pod {
        let mut spec = json!({"containers": [{"name": "c"}]});
        for (k, v) in spec_extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "d"}, "spec": spec})).unwrap()
    }

    #[test]
    fn picks_ready_matching_node_with_fewest_pods() {
        let nodes = vec![
            node("a", true, json!({"zone": "x"}), json!({})),
            node("b", true, json!({"zone": "x"}), json!({})),
            node("c", false, json!({"zone": "x"}), json!({})),
            node("d", true, json!({"zone": "y"}), json!({})),
            node("e", true, json!({"zone": "x"}), json!({"unschedulable": true})),
            node(
                "f",
                true,
                json!({"zone": "x"}),
                json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}),
            ),
        ];
        let counts = HashMap::from([("a".to_string(), 1usize)]);
        let p = pod(json!({"nodeSelector": {"zone": "x"}}));
        assert_eq!(choose_node(&p, &nodes, &counts, &HashMap::new()).unwrap(), "b");
        let counts = HashMap::from([("a".to_string(), 1usize), ("b".to_string(), 2)]);
        assert_eq!(choose_node(&p, &nodes, &counts, &HashMap::new()).unwrap(), "a");
        let p =
            pod(json!({"nodeSelector": {"zone": "x"}, "tolerations": [{"key": "k", "operator": "Exists"}]}));
        let counts = HashMap::from([("a".to_string(), 2usize), ("b".to_string(), 2)]);
        assert_eq!(choose_node(&p, &nodes, &counts, &HashMap::new()).unwrap(), "f");
    }

    #[test]
    fn explains_unschedulable() {
        let nodes = vec![
            node("a", false, json!({}), json!({})),
            node("b", true, json!({}), json!({})),
        ];
        let p = pod(json!({"nodeSelector": {"zone": "z"}}));
        let rej = choose_node(&p, &nodes, &HashMap::new(), &HashMap::new()).unwrap_err();
        assert_eq!(
            rej.message(),
            "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were not ready."
        );
        assert_eq!(
            choose_node(&p, &[], &HashMap::new(), &HashMap::new())
                .unwrap_err()
                .message(),
            "0/0 nodes are available."
        );
    }

    #[test]
    fn required_node_affinity_and_not_ready_toleration() {
        let nodes = vec![
            node("a", true, json!({"zone": "x"}), json!({})),
            node("b", true, json!({"zone": "y"}), json!({})),
            node("c", false, json!({"zone": "y"}), json!({})),
        ];
        let pinned = pod(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}}),
        );
        assert_eq!(
            choose_node(&pinned, &nodes, &HashMap::new(), &HashMap::new()).unwrap(),
            "b"
        );
        let by_label = pod(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["y"]}]}]}}}}),
        );
        assert_eq!(
            choose_node(&by_label, &nodes, &HashMap::new(), &HashMap::new()).unwrap(),
            "a"
        );
        let nowhere = pod(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["zz"]}]}]}}}}),
        );
        assert_eq!(
            choose_node(&nowhere, &nodes, &HashMap::new(), &HashMap::new())
                .unwrap_err()
                .message(),
            "0/3 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 1 node(s) were not ready."
        );
        // Tolerating the not-ready taint lets a pod onto a NotReady node (a CNI daemon's case).
        let daemon = pod(json!({"tolerations": [{"operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]}}}}));
        assert_eq!(
            choose_node(&daemon, &nodes, &HashMap::new(), &HashMap::new()).unwrap(),
            "c"
        );
    }

    #[test]
    fn only_unbound_default_scheduler_pods() {
        assert!(wants_scheduling(&pod(json!({}))));
        assert!(!wants_scheduling(&pod(json!({"nodeName": "a"}))));
        assert!(!wants_scheduling(&pod(json!({"schedulerName": "other"}))));
        assert!(wants_scheduling(&pod(
            json!({"schedulerName": "default-scheduler"})
        )));
    }
}
