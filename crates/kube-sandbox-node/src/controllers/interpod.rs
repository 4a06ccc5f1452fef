//! Scheduling predicates that look at the pods already on a node: host ports (two pods may not
//! bind the same `hostPort`/protocol/`hostIP` on one node; a host-network pod's container ports
//! are host ports) and required pod anti-affinity (no node whose `topologyKey` value is shared
//! with a node running a pod the term's selector matches, in the term's namespaces or the pod's
//! own), as the real scheduler's NodePorts and InterPodAffinity plugins. Knowingly left out:
//! pod affinity, preferred terms, `namespaceSelector`, and the symmetric check of existing
//! pods' anti-affinity against the incoming pod.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use kube::ResourceExt;

use super::workload::selector_matches;

/// What the predicates need to know about a pod already bound to a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placed {
    /// Its namespace.
    pub namespace: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// `(protocol, hostIP, hostPort)` it holds.
    pub host_ports: Vec<(String, String, i32)>,
}

impl Placed {
    /// The summary of `pod`.
    pub fn of(pod: &Pod) -> Self {
        Self {
            namespace: pod.namespace().unwrap_or_default(),
            labels: pod.labels().clone(),
            host_ports: pod.spec.as_ref().map(host_ports).unwrap_or_default(),
        }
    }
}

/// The host ports a pod spec asks for (a host-network pod's container ports count as host ports
/// even where `hostPort` is left out, as the API server defaults them).
pub fn host_ports(spec: &PodSpec) -> Vec<(String, String, i32)> {
    let host_net = spec.host_network.unwrap_or(false);
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p
                .host_port
                .filter(|h| *h > 0)
                .or(host_net.then_some(p.container_port))?;
            let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
            Some((proto, p.host_ip.clone().unwrap_or_default(), port))
        })
        .collect()
}

fn ip_overlaps(a: &str, b: &str) -> bool {
    let any = |s: &str| s.is_empty() || s == "0.0.0.0" || s == "::";
    any(a) || any(b) || a == b
}

/// Why `pod` cannot go to `node` given the pods already `placed` (node name → pods), if so.
pub fn conflict(
    pod: &Pod,
    node: &Node,
    nodes: &[Arc<Node>],
    placed: &HashMap<String, Vec<Placed>>,
) -> Option<&'static str> {
    let spec = pod.spec.as_ref()?;
    let name = node.name_any();
    let here = placed.get(&name).map(Vec::as_slice).unwrap_or_default();
    let wanted = host_ports(spec);
    let taken = here
        .iter()
        .flat_map(|p| p.host_ports.iter())
        .any(|(proto, ip, port)| {
            wanted
                .iter()
                .any(|(wp, wip, wport)| wp == proto && wport == port && ip_overlaps(ip, wip))
        });
    if taken {
        return Some("node(s) didn't have free ports for the requested pod ports");
    }
    let ns = pod.namespace().unwrap_or_default();
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    for term in terms.into_iter().flatten() {
        let Some(value) = node.labels().get(&term.topology_key) else {
            continue;
        };
        let namespaces = term
            .namespaces
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| vec![ns.clone()]);
        let sel = term.label_selector.clone().unwrap_or_default();
        let same_domain = nodes
            .iter()
            .filter(|n| n.labels().get(&term.topology_key) == Some(value))
            .flat_map(|n| placed.get(&n.name_any()).map(Vec::as_slice).unwrap_or_default());
        if same_domain
            .into_iter()
            .any(|p| namespaces.contains(&p.namespace) && selector_matches(&sel, &p.labels))
        {
            return Some("node(s) didn't match pod anti-affinity rules");
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}),
            )
            .unwrap(),
        )
    }

    fn controller_pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "kube-system", "labels": {"app": "ctl"}},
            "spec": {"hostNetwork": true, "containers": [{"name": "c", "ports": [{"containerPort": 8082}]}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "ctl"}}}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn host_ports_and_anti_affinity_keep_replicas_apart() {
        let nodes = vec![node("a"), node("b")];
        let p = controller_pod();
        let mut placed: HashMap<String, Vec<Placed>> = HashMap::new();
        assert_eq!(conflict(&p, &nodes[0], &nodes, &placed), None);
        placed.insert("a".into(), vec![Placed::of(&p)]);
        assert_eq!(
            conflict(&p, &nodes[0], &nodes, &placed),
            Some("node(s) didn't have free ports for the requested pod ports")
        );
        assert_eq!(conflict(&p, &nodes[1], &nodes, &placed), None);
        // Without ports, the anti-affinity term alone keeps them apart.
        let mut q = p.clone();
        q.spec.as_mut().unwrap().containers[0].ports = None;
        assert_eq!(
            conflict(&q, &nodes[0], &nodes, &placed),
            Some("node(s) didn't match pod anti-affinity rules")
        );
        // Another namespace's pod with the same labels does not count.
        placed.insert(
            "a".into(),
            vec![Placed {
                namespace: "other".into(),
                ..Placed::of(&q)
            }],
        );
        assert_eq!(conflict(&q, &nodes[0], &nodes, &placed), None);
    }
}
