//! The pod garbage collector (kube-controller-manager's PodGC): a pod bound to a node that no
//! longer exists is marked `Failed` with the `DisruptionTarget` condition (reason
//! `DeletionByPodGC`) and deleted with grace period 0, as no kubelet will ever finish it; an
//! unscheduled pod that is being deleted is deleted with grace period 0 too.
//!
//! Garbage collection by ownerReferences (what deletes a Deployment's ReplicaSets and their pods,
//! with `propagationPolicy` Background, Foreground or Orphan) is done by the API server itself
//! (its lifecycle task), not here.
//!
//! Knowingly different: upstream waits 40 s (quarantine) before believing a node is gone and
//! checks every 20 s; here a missing node is confirmed with a direct GET (404) and its pods go at
//! once. Terminated pods beyond `--terminated-pod-gc-threshold` are not collected.

use std::{collections::HashSet, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
};
use serde_json::json;
use tracing::{info, warn};

use super::{Error, Outcome, workload::MANAGER};

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Pods bound to a node not in `nodes`.
pub fn orphaned(pods: &[Arc<Pod>], nodes: &HashSet<String>) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|p| node_of(p).is_some_and(|n| !nodes.contains(n)))
        .cloned()
        .collect()
}

/// Unscheduled pods that are being deleted.
pub fn unscheduled_terminating(pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|p| node_of(p).is_none() && p.metadata.deletion_timestamp.is_some())
        .cloned()
        .collect()
}

/// Runs the pod garbage collector forever.
pub(crate) async fn run(client: Client, caches: super::Caches) -> Result<(), Error> {
    let (pods, nodes, notify) = caches.pods_and_nodes();
    let node_api: Api<Node> = Api::all(client.clone());
    info!("pod garbage collector running");
    loop {
        let pass_started = std::time::Instant::now();
        let names: HashSet<String> = nodes.state().iter().map(|n| n.name_any()).collect();
        let all = pods.state();
        let mut outcome = Outcome::default();
        for pod in orphaned(&all, &names) {
            let node = node_of(&pod).unwrap_or_default().to_string();
            // The cache may lag a node that was just created: ask the API server.
            match node_api.get_opt(&node).await {
                Ok(None) => {}
                Ok(Some(_)) => continue,
                Err(e) => {
                    warn!(node = %node, error = %e, "cannot check node");
                    outcome.retry = true;
                    continue;
                }
            }
            info!(pod = %pod.name_any(), namespace = ?pod.namespace(), node = %node, "deleting pod of a node that is gone");
            if let Err(e) = fail_and_delete(&client, &pod).await {
                warn!(pod = %pod.name_any(), error = %e, "cannot collect orphaned pod");
                outcome.retry = true;
            }
        }
        for pod in unscheduled_terminating(&all) {
            if let Err(e) = force_delete(&client, &pod).await {
                warn!(pod = %pod.name_any(), error = %e, "cannot collect terminating unscheduled pod");
                outcome.retry = true;
            }
        }
        super::wait(&notify, outcome, pass_started.elapsed()).await;
        // Deletions come in bursts (a node with many pods): let them settle.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn fail_and_delete(client: &Client, pod: &Pod) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if !matches!(phase, Some("Succeeded" | "Failed")) {
        let body = json!({"status": {"phase": "Failed", "conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
            "message": "PodGC: node no longer exists", "lastTransitionTime": crate::k8s_now()}]}});
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        match api
            .patch_status(&pod.name_any(), &params, &Patch::Strategic(&body))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    force_delete(client, pod).await
}

async fn force_delete(client: &Client, pod: &Pod) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&pod.name_any(), &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, node: Option<&str>, deleting: bool) -> Arc<Pod> {
        let mut meta = json!({"name": name});
        if deleting {
            meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        let mut spec = json!({"containers": []});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        Arc::new(serde_json::from_value(json!({"metadata": meta, "spec": spec})).unwrap())
    }

    #[test]
    fn finds_pods_of_missing_nodes() {
        let pods = vec![
            pod("a", Some("n1"), false),
            pod("b", Some("gone"), false),
            pod("c", None, false),
            pod("d", None, true),
        ];
        let nodes = HashSet::from(["n1".to_string()]);
        let names = |v: Vec<Arc<Pod>>| v.iter().map(|p| p.name_any()).collect::<Vec<_>>();
        assert_eq!(names(orphaned(&pods, &nodes)), ["b"]);
        assert_eq!(names(unscheduled_terminating(&pods)), ["d"]);
    }
}
