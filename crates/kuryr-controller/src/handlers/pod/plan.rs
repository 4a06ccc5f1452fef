//! The pod handler's decisions, without I/O: given a Pod and its KuryrPort (if any), which
//! steps bring them to the state upstream's `VIFHandler` maintains.

use std::{collections::BTreeMap, time::Duration};

use crate::handlers::scaffold::Then;
use k8s_openapi::api::core::v1::Pod;
use kube::{Resource, ResourceExt, api::ObjectMeta};
use kuryr_types::{
    KuryrPort, KuryrPortSpec, KuryrPortStatus,
    constants::{ANNOTATION_CONFIG_SOURCE, KURYRPORT_FINALIZER, KURYRPORT_LABEL, POD_FINALIZER},
};

/// One step of a [`Plan`], executed in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Add [`POD_FINALIZER`] to the pod (before anything is created for it).
    AddPodFinalizer,
    /// Create this KuryrPort.
    CreatePort(Box<KuryrPort>),
    /// Delete the pod's KuryrPort (its own finalizer keeps it until its port is released).
    DeletePort,
    /// Remove [`POD_FINALIZER`]: the KuryrPort is gone.
    RemovePodFinalizer,
}

/// What to do for one pod: the scaffold's plan of [`Step`]s.
pub type Plan = crate::handlers::scaffold::Plan<Step>;

/// How soon a pod whose KuryrPort is being deleted is looked at again: the KuryrPort's own
/// deletion event may have been consumed before the port cache saw it, so the next event is
/// not relied upon.
pub const RELEASE_RECHECK: Duration = Duration::from_secs(1);

/// The plan acts on the KuryrPort being absent (creates it, or drops the pod finalizer): when
/// it was computed from a cache, the absence is confirmed with a live read first.
pub fn relies_on_absent_port(steps: &[Step]) -> bool {
    steps
        .iter()
        .any(|s| matches!(s, Step::CreatePort(_) | Step::RemovePodFinalizer))
}

/// Builds the plan: periodic re-list after it, a live confirmation when it relies on an absent
/// KuryrPort, and a prompt re-check while a KuryrPort is being released (also confirmed live:
/// the cache can lag behind the KuryrPort watch that triggered the reconcile).
fn new_plan(reason: &'static str, steps: Vec<Step>) -> Plan {
    let awaiting = steps.is_empty() && reason == AWAITING_RELEASE;
    let then = if awaiting {
        Then::Requeue(RELEASE_RECHECK)
    } else {
        Then::Periodic
    };
    let confirm = awaiting || relies_on_absent_port(&steps);
    let plan = Plan::steps(reason, steps, then);
    if confirm { plan.confirmed_live() } else { plan }
}

/// Reason of the plan that waits for a deleting KuryrPort to go.
const AWAITING_RELEASE: &str = "waiting for the KuryrPort to release its port";

/// `spec.hostNetwork` is set: kuryr does not wire the pod.
pub fn is_host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false)
}

/// Phase `Succeeded` or `Failed`: the pod's port can be released.
pub fn is_completed(pod: &Pod) -> bool {
    matches!(phase(pod), Some("Succeeded" | "Failed"))
}

/// Upstream's `is_pod_scheduled`: a node is set and the pod is still `Pending` (a missing phase
/// counts as `Pending`: the API server sets it on creation).
pub fn is_scheduled(pod: &Pod) -> bool {
    node_name(pod).is_some() && matches!(phase(pod), None | Some("Pending"))
}

/// A static pod (mirror of a kubelet manifest): `kubernetes.io/config.source` is set and is not
/// `api`.
pub fn is_static(pod: &Pod) -> bool {
    pod.annotations()
        .get(ANNOTATION_CONFIG_SOURCE)
        .is_some_and(|source| source != "api")
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn has_finalizer(meta: &ObjectMeta, name: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == name)
}

/// The KuryrPort upstream creates for `pod`: same name and namespace, label
/// `kuryr.openstack.org/nodeName`, [`KURYRPORT_FINALIZER`], owned by the pod, no VIFs yet.
/// `None` if the pod lacks a name, namespace, UID or node.
pub fn desired_port(pod: &Pod) -> Option<KuryrPort> {
    let node = node_name(pod)?;
    let uid = pod.uid()?;
    let namespace = pod.namespace()?;
    let owner = pod.owner_ref(&())?;
    let mut port = KuryrPort::new(
        &pod.name_any(),
        KuryrPortSpec {
            pod_uid: uid,
            pod_node_name: node.to_owned(),
            pod_static: Some(is_static(pod)),
        },
    );
    port.metadata.namespace = Some(namespace);
    port.metadata.labels = Some(BTreeMap::from([(KURYRPORT_LABEL.to_owned(), node.to_owned())]));
    port.metadata.finalizers = Some(vec![KURYRPORT_FINALIZER.to_owned()]);
    port.metadata.owner_references = Some(vec![owner]);
    port.status = Some(KuryrPortStatus::default());
    Some(port)
}

/// Decides what to do for `pod` given its KuryrPort `port` (same name and namespace).
///
/// * Pods being deleted, and completed pods, release their port: the KuryrPort is deleted, and
///   the pod finalizer is removed only once the KuryrPort is gone (so a port is neither leaked
///   nor released while in use).
/// * Host-network pods and pods not scheduled yet are ignored.
/// * Otherwise the pod finalizer is ensured first, then the KuryrPort.
/// * A KuryrPort left by an earlier pod of the same name (other `podUid`) is deleted first.
pub fn plan(pod: &Pod, port: Option<&KuryrPort>) -> Plan {
    let pod_finalized = has_finalizer(&pod.metadata, POD_FINALIZER);
    let port_deleting = port.is_some_and(|p| p.metadata.deletion_timestamp.is_some());
    if pod.metadata.deletion_timestamp.is_some() || is_completed(pod) {
        let reason = if pod.metadata.deletion_timestamp.is_none() {
            "pod completed"
        } else {
            "pod deleted"
        };
        return match port {
            Some(_) if port_deleting => new_plan(AWAITING_RELEASE, vec![]),
            Some(_) => new_plan(reason, vec![Step::DeletePort]),
            None if pod_finalized => new_plan(reason, vec![Step::RemovePodFinalizer]),
            None => new_plan(reason, vec![]),
        };
    }
    if is_host_network(pod) {
        return new_plan("host network pod", vec![]);
    }
    if !is_scheduled(pod) {
        return new_plan("pod not scheduled or not pending", vec![]);
    }
    let mut steps = Vec::new();
    if !pod_finalized {
        steps.push(Step::AddPodFinalizer);
    }
    match port {
        Some(_) if port_deleting => {
            return new_plan("waiting for the previous KuryrPort to be released", steps);
        }
        Some(p) if pod.uid().is_some_and(|uid| uid != p.spec.pod_uid) => {
            steps.push(Step::DeletePort);
            return new_plan("KuryrPort belongs to an earlier pod of this name", steps);
        }
        Some(_) => {}
        None => match desired_port(pod) {
            Some(p) => steps.push(Step::CreatePort(Box::new(p))),
            None => return new_plan("pod lacks name, namespace or uid", vec![]),
        },
    }
    new_plan("pod scheduled", steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn mk_pod(extra: serde_json::Value) -> Pod {
        let mut base = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "ns1", "uid": "u-1"},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"},
        });
        merge(&mut base, extra);
        serde_json::from_value(base).expect("pod")
    }

    fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn finalized() -> serde_json::Value {
        json!({"metadata": {"finalizers": [POD_FINALIZER]}})
    }

    fn deleted() -> Option<Time> {
        Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
    }

    #[test]
    fn new_pod_gets_finalizer_then_port() {
        let pod = mk_pod(json!({}));
        let p = plan(&pod, None);
        assert_eq!(p.steps.len(), 2);
        assert!(
            p.confirm_live,
            "creating the KuryrPort rests on its absence: confirm live"
        );
        assert_eq!(p.then, Then::Periodic);
        assert_eq!(p.steps[0], Step::AddPodFinalizer);
        let Step::CreatePort(port) = &p.steps[1] else {
            panic!("{p:?}")
        };
        assert_eq!(port.name_any(), "p1");
        assert_eq!(port.namespace().as_deref(), Some("ns1"));
        assert_eq!(port.spec.pod_uid, "u-1");
        assert_eq!(port.spec.pod_node_name, "node-a");
        assert_eq!(port.spec.pod_static, Some(false));
        assert_eq!(
            port.labels().get(KURYRPORT_LABEL).map(String::as_str),
            Some("node-a")
        );
        assert_eq!(port.finalizers(), [KURYRPORT_FINALIZER.to_owned()]);
        let owner = &port.owner_references()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Pod", "u-1"));
    }

    #[test]
    fn finalized_pod_with_port_needs_nothing() {
        let pod = mk_pod(finalized());
        let port = desired_port(&pod).expect("port");
        let p = plan(&pod, Some(&port));
        assert!(p.steps.is_empty());
        assert!(!p.confirm_live, "the steady state needs no live read");
    }

    #[test]
    fn ignored_pods() {
        let host = mk_pod(json!({"spec": {"hostNetwork": true}}));
        assert!(plan(&host, None).steps.is_empty());
        let unscheduled = mk_pod(json!({"spec": {"nodeName": null}}));
        assert!(plan(&unscheduled, None).steps.is_empty());
        let running = mk_pod(json!({"status": {"phase": "Running"}}));
        assert!(plan(&running, None).steps.is_empty());
    }

    #[test]
    fn static_pod_detection() {
        let api = mk_pod(json!({"metadata": {"annotations": {ANNOTATION_CONFIG_SOURCE: "api"}}}));
        assert!(!is_static(&api));
        let file = mk_pod(json!({"metadata": {"annotations": {ANNOTATION_CONFIG_SOURCE: "file"}}}));
        assert!(is_static(&file));
        assert_eq!(desired_port(&file).expect("port").spec.pod_static, Some(true));
    }

    #[test]
    fn deleted_pod_deletes_port_then_drops_finalizer() {
        let mut pod = mk_pod(finalized());
        pod.metadata.deletion_timestamp = deleted();
        let mut port = desired_port(&mk_pod(json!({}))).expect("port");
        assert_eq!(plan(&pod, Some(&port)).steps, vec![Step::DeletePort]);
        port.metadata.deletion_timestamp = deleted();
        let waiting = plan(&pod, Some(&port));
        assert!(waiting.steps.is_empty());
        assert!(waiting.confirm_live);
        assert_eq!(waiting.then, Then::Requeue(RELEASE_RECHECK));
        assert_eq!(plan(&pod, None).steps, vec![Step::RemovePodFinalizer]);
        pod.metadata.finalizers = None;
        assert!(plan(&pod, None).steps.is_empty());
    }

    #[test]
    fn completed_pod_releases_port() {
        let pod =
            mk_pod(json!({"metadata": {"finalizers": [POD_FINALIZER]}, "status": {"phase": "Succeeded"}}));
        let port = desired_port(&mk_pod(json!({}))).expect("port");
        assert_eq!(plan(&pod, Some(&port)).steps, vec![Step::DeletePort]);
        assert_eq!(plan(&pod, None).steps, vec![Step::RemovePodFinalizer]);
    }

    #[test]
    fn stale_port_of_earlier_pod_is_deleted() {
        let pod = mk_pod(finalized());
        let mut port = desired_port(&pod).expect("port");
        port.spec.pod_uid = "old".into();
        assert_eq!(plan(&pod, Some(&port)).steps, vec![Step::DeletePort]);
    }
}
