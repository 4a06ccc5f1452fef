//! Desired Endpoints subsets and EndpointSlice contents of a Service from its pods (pure): which
//! pods are selected, ready/terminating, and how each Service port (including named
//! `targetPort`s) resolves for each pod.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, ObjectReference, Pod, Service,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort as SlicePort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

/// Identity of a port set: (name, port, protocol), sorted.
pub(crate) type PortKey = Vec<(String, i32, String)>;
/// Ports, ready addresses, not-ready addresses of one Endpoints subset.
type SubsetParts = (Vec<EndpointPort>, Vec<EndpointAddress>, Vec<EndpointAddress>);
/// Ports and endpoints of one EndpointSlice.
pub type SliceContent = (Vec<SlicePort>, Vec<Endpoint>);

/// One selected pod as an endpoint (computed once per service and pass by [`pod_endpoints`],
/// then rendered both as Endpoints subsets and as EndpointSlices).
#[derive(Debug, Clone, PartialEq)]
pub struct PodEndpoint {
    ip: String,
    ready: bool,
    terminating: bool,
    node: Option<String>,
    hostname: Option<String>,
    target: ObjectReference,
    ports: Vec<EndpointPort>,
}

fn selects(svc: &Service, pod: &Pod) -> bool {
    let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    !sel.is_empty()
        && pod.namespace() == svc.namespace()
        && sel.iter().all(|(k, v)| pod.labels().get(k) == Some(v))
}

/// Whether the controller manages this service (has a non-empty selector, not ExternalName).
pub fn managed(svc: &Service) -> bool {
    let spec = svc.spec.as_ref();
    spec.and_then(|s| s.selector.as_ref())
        .is_some_and(|s| !s.is_empty())
        && spec.and_then(|s| s.type_.as_deref()) != Some("ExternalName")
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn pod_ipv4(pod: &Pod) -> Option<String> {
    let st = pod.status.as_ref()?;
    let mut ips: Vec<String> = st.pod_ips.iter().flatten().map(|p| p.ip.clone()).collect();
    if let Some(ip) = &st.pod_ip {
        ips.insert(0, ip.clone());
    }
    ips.into_iter()
        .find(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())
}

/// Resolves a service port's `targetPort` for a pod: numbers as given (default: the service
/// port), names looked up in the pod's container ports with the same protocol.
fn resolve_port(sp: &k8s_openapi::api::core::v1::ServicePort, pod: &Pod) -> Option<i32> {
    let proto = sp.protocol.as_deref().unwrap_or("TCP");
    match &sp.target_port {
        None => Some(sp.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(s)) => {
            if let Ok(n) = s.parse::<i32>() {
                return Some(n);
            }
            pod.spec
                .iter()
                .flat_map(|ps| ps.containers.iter())
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| p.name.as_deref() == Some(s) && p.protocol.as_deref().unwrap_or("TCP") == proto)
                .map(|p| p.container_port)
        }
    }
}

/// The pods `svc` selects, with their ports resolved (named target ports per pod).
pub fn pod_endpoints(svc: &Service, pods: &[Arc<Pod>]) -> Vec<PodEndpoint> {
    let spec = svc.spec.clone().unwrap_or_default();
    let svc_ports = spec.ports.unwrap_or_default();
    let svc_name = svc.name_any();
    let mut out = Vec::new();
    for pod in pods.iter().filter(|p| selects(svc, p)) {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded") | Some("Failed")) {
            continue;
        }
        let Some(ip) = pod_ipv4(pod) else { continue };
        let ports: Vec<EndpointPort> = svc_ports
            .iter()
            .filter_map(|sp| {
                resolve_port(sp, pod).map(|port| EndpointPort {
                    name: sp.name.clone().filter(|n| !n.is_empty()),
                    port,
                    protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                    app_protocol: sp.app_protocol.clone(),
                })
            })
            .collect();
        if !svc_ports.is_empty() && ports.is_empty() {
            continue;
        }
        let pspec = pod.spec.clone().unwrap_or_default();
        let hostname = pspec
            .hostname
            .clone()
            .filter(|_| pspec.subdomain.as_deref() == Some(svc_name.as_str()));
        out.push(PodEndpoint {
            ip,
            ready: pod_ready(pod),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            node: pspec.node_name.clone().filter(|n| !n.is_empty()),
            hostname,
            target: ObjectReference {
                kind: Some("Pod".into()),
                namespace: pod.namespace(),
                name: Some(pod.name_any()),
                uid: pod.uid(),
                ..Default::default()
            },
            ports,
        });
    }
    out.sort_by(|a, b| a.ip.cmp(&b.ip).then(a.target.name.cmp(&b.target.name)));
    out
}

fn port_key(ports: &[EndpointPort]) -> PortKey {
    let mut k: Vec<_> = ports
        .iter()
        .map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.port,
                p.protocol.clone().unwrap_or_default(),
            )
        })
        .collect();
    k.sort();
    k
}

fn sorted_ports(mut ports: Vec<EndpointPort>) -> Vec<EndpointPort> {
    ports.sort_by(|a, b| (&a.name, a.port).cmp(&(&b.name, b.port)));
    ports
}

/// The desired `subsets` of the service's Endpoints: pods grouped by identical resolved ports;
/// Ready pods in `addresses`, others in `notReadyAddresses`; terminating pods left out (unless
/// `publishNotReadyAddresses`).
pub fn desired_subsets(svc: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    subsets_from(svc, &pod_endpoints(svc, pods))
}

/// [`desired_subsets`] from already computed [`pod_endpoints`].
pub fn subsets_from(svc: &Service, endpoints: &[PodEndpoint]) -> Vec<EndpointSubset> {
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let mut groups: BTreeMap<PortKey, SubsetParts> = BTreeMap::new();
    for ep in endpoints.iter().cloned() {
        if ep.terminating && !publish {
            continue;
        }
        let addr = EndpointAddress {
            ip: ep.ip.clone(),
            hostname: ep.hostname.clone(),
            node_name: ep.node.clone(),
            target_ref: Some(ep.target.clone()),
        };
        let entry = groups
            .entry(port_key(&ep.ports))
            .or_insert_with(|| (sorted_ports(ep.ports.clone()), Vec::new(), Vec::new()));
        if ep.ready || publish {
            entry.1.push(addr);
        } else {
            entry.2.push(addr);
        }
    }
    groups
        .into_values()
        .map(|(ports, ready, not_ready)| EndpointSubset {
            addresses: Some(ready).filter(|v| !v.is_empty()),
            not_ready_addresses: Some(not_ready).filter(|v| !v.is_empty()),
            ports: Some(ports).filter(|v| !v.is_empty()),
        })
        .collect()
}

/// The desired slice contents: one (ports, endpoints) per distinct port set; a service with no
/// endpoints gets one empty placeholder.
pub fn desired_slices(svc: &Service, pods: &[Arc<Pod>]) -> Vec<SliceContent> {
    slices_from(&pod_endpoints(svc, pods))
}

/// [`desired_slices`] from already computed [`pod_endpoints`].
pub fn slices_from(endpoints: &[PodEndpoint]) -> Vec<SliceContent> {
    let mut groups: BTreeMap<PortKey, SliceContent> = BTreeMap::new();
    for ep in endpoints.iter().cloned() {
        let entry = groups.entry(port_key(&ep.ports)).or_insert_with(|| {
            let ports = sorted_ports(ep.ports.clone())
                .into_iter()
                .map(|p| SlicePort {
                    name: Some(p.name.unwrap_or_default()),
                    port: Some(p.port),
                    protocol: p.protocol,
                    app_protocol: p.app_protocol,
                })
                .collect();
            (ports, Vec::new())
        });
        entry.1.push(Endpoint {
            addresses: vec![ep.ip.clone()],
            conditions: Some(EndpointConditions {
                ready: Some(ep.ready && !ep.terminating),
                serving: Some(ep.ready),
                terminating: Some(ep.terminating),
            }),
            hostname: ep.hostname.clone(),
            node_name: ep.node.clone(),
            target_ref: Some(ep.target.clone()),
            ..Default::default()
        });
    }
    let mut out: Vec<_> = groups.into_values().collect();
    if out.is_empty() {
        out.push((Vec::new(), Vec::new()));
    }
    out
}

pub(crate) fn slice_port_key(ports: &[SlicePort]) -> PortKey {
    let mut k: Vec<_> = ports
        .iter()
        .map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.port.unwrap_or(0),
                p.protocol.clone().unwrap_or_default(),
            )
        })
        .collect();
    k.sort();
    k
}

pub(crate) fn labels_for(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.labels().clone();
    let headless = svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None");
    if headless {
        labels.insert("service.kubernetes.io/headless".into(), String::new());
    }
    labels
}

pub(crate) fn owner(svc: &Service) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Service".into(),
        name: svc.name_any(),
        uid: svc.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "d", "uid": "s1", "labels": {"app": "web"}}, "spec": spec})).unwrap()
    }

    fn pod(
        name: &str,
        ip: Option<&str>,
        ready: bool,
        terminating: bool,
        ports: serde_json::Value,
    ) -> Arc<Pod> {
        let mut meta =
            json!({"name": name, "namespace": "d", "uid": format!("u-{name}"), "labels": {"app": "web"}});
        if terminating {
            meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        let mut status = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]});
        if let Some(ip) = ip {
            status["podIP"] = json!(ip);
            status["podIPs"] = json!([{"ip": ip}]);
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": meta,
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": ports}]},
                "status": status,
            }))
            .unwrap(),
        )
    }

    #[test]
    fn named_target_ports_ready_and_not_ready() {
        let s = svc(json!({"selector": {"app": "web"}, "ports": [
            {"name": "http", "port": 80, "targetPort": "web"},
            {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}]}));
        let pods = vec![
            pod(
                "a",
                Some("10.0.0.2"),
                true,
                false,
                json!([{"name": "web", "containerPort": 8080}]),
            ),
            pod(
                "b",
                Some("10.0.0.3"),
                false,
                false,
                json!([{"name": "web", "containerPort": 8080}]),
            ),
            pod(
                "c",
                Some("10.0.0.4"),
                true,
                false,
                json!([{"name": "other", "containerPort": 9090}]),
            ),
            pod(
                "d",
                None,
                true,
                false,
                json!([{"name": "web", "containerPort": 8080}]),
            ),
            pod(
                "e",
                Some("10.0.0.5"),
                true,
                true,
                json!([{"name": "web", "containerPort": 8080}]),
            ),
        ];
        let subsets = desired_subsets(&s, &pods);
        assert_eq!(subsets.len(), 2);
        // c resolves only the numeric UDP port → its own subset.
        let with_http = subsets
            .iter()
            .find(|s| s.ports.as_ref().unwrap().len() == 2)
            .unwrap();
        let ports = with_http.ports.as_ref().unwrap();
        assert_eq!(
            ports
                .iter()
                .find(|p| p.name.as_deref() == Some("http"))
                .unwrap()
                .port,
            8080
        );
        let ips =
            |v: &Option<Vec<EndpointAddress>>| v.iter().flatten().map(|a| a.ip.clone()).collect::<Vec<_>>();
        assert_eq!(ips(&with_http.addresses), ["10.0.0.2"]);
        assert_eq!(ips(&with_http.not_ready_addresses), ["10.0.0.3"]);
        let only_udp = subsets
            .iter()
            .find(|s| s.ports.as_ref().unwrap().len() == 1)
            .unwrap();
        assert_eq!(ips(&only_udp.addresses), ["10.0.0.4"]);
        assert_eq!(
            with_http.addresses.as_ref().unwrap()[0]
                .target_ref
                .as_ref()
                .unwrap()
                .name
                .as_deref(),
            Some("a")
        );

        let slices = desired_slices(&s, &pods);
        assert_eq!(slices.len(), 2);
        let (ports, eps) = slices.iter().find(|(p, _)| p.len() == 2).unwrap();
        assert_eq!(
            ports
                .iter()
                .find(|p| p.name.as_deref() == Some("http"))
                .unwrap()
                .port,
            Some(8080)
        );
        assert_eq!(eps.len(), 3);
        let term = eps.iter().find(|e| e.addresses == ["10.0.0.5"]).unwrap();
        assert_eq!(
            term.conditions,
            Some(EndpointConditions {
                ready: Some(false),
                serving: Some(true),
                terminating: Some(true)
            })
        );
        let nr = eps.iter().find(|e| e.addresses == ["10.0.0.3"]).unwrap();
        assert_eq!(nr.conditions.as_ref().unwrap().ready, Some(false));
        assert_eq!(nr.node_name.as_deref(), Some("n1"));
    }

    #[test]
    fn headless_without_ports_and_selectorless() {
        let s = svc(json!({"selector": {"app": "web"}, "clusterIP": "None"}));
        let pods = vec![pod("a", Some("10.0.0.2"), true, false, json!([]))];
        let subsets = desired_subsets(&s, &pods);
        assert_eq!(subsets.len(), 1);
        assert!(subsets[0].ports.is_none());
        assert_eq!(
            labels_for(&s)
                .get("service.kubernetes.io/headless")
                .map(String::as_str),
            Some("")
        );
        assert!(managed(&s));
        let none = svc(json!({"ports": [{"port": 80}]}));
        assert!(!managed(&none));
        assert!(desired_subsets(&none, &pods).is_empty());
        let empty = svc(json!({"selector": {"app": "nothing"}, "ports": [{"port": 80}]}));
        assert_eq!(desired_slices(&empty, &pods), vec![(vec![], vec![])]);
    }

    #[test]
    fn default_target_port_is_service_port() {
        let s = svc(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}));
        let pods = vec![pod("a", Some("10.0.0.2"), true, false, json!([]))];
        let subsets = desired_subsets(&s, &pods);
        assert_eq!(subsets[0].ports.as_ref().unwrap()[0].port, 80);
        assert_eq!(subsets[0].ports.as_ref().unwrap()[0].name, None);
    }
}
