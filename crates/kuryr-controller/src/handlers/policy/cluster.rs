//! The cluster as NetworkPolicy translation sees it ([`kuryr_netpol::Cluster`]), built from the
//! watch caches: pods with their addresses and named ports (host-network and finished pods left
//! out), namespaces with their labels, Services with a ClusterIP.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kuryr_netpol as np;

/// A pod, unless it has no port of ours (host network) or has finished.
pub fn pod(p: &Pod) -> Option<np::Pod> {
    let spec = p.spec.as_ref()?;
    if spec.host_network == Some(true) {
        return None;
    }
    let status = p.status.as_ref();
    if matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        return None;
    }
    let ip = status
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse::<IpAddr>().ok());
    let ports = spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|cp| {
            let name = cp.name.clone().filter(|n| !n.is_empty())?;
            let port = u16::try_from(cp.container_port).ok()?;
            let proto = np::Proto::from_k8s(cp.protocol.as_deref().unwrap_or("TCP"))?;
            Some(np::ContainerPort { name, port, proto })
        })
        .collect();
    Some(np::Pod {
        key: np::PodKey::new(p.namespace().unwrap_or_default(), p.name_any()),
        labels: p.labels().clone(),
        ip,
        ports,
    })
}

/// A namespace.
pub fn namespace(n: &Namespace) -> np::Namespace {
    np::Namespace {
        name: n.name_any(),
        labels: n.labels().clone(),
    }
}

/// A Service with a ClusterIP.
pub fn service(s: &Service) -> Option<np::Service> {
    let spec = s.spec.as_ref()?;
    let cluster_ip = spec
        .cluster_ip
        .as_deref()
        .filter(|ip| *ip != "None")?
        .parse::<IpAddr>()
        .ok()?;
    let ports = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            let port = u16::try_from(p.port).ok()?;
            let proto = np::Proto::from_k8s(p.protocol.as_deref().unwrap_or("TCP"))?;
            let target = match &p.target_port {
                None => np::TargetPort::Number(port),
                Some(IntOrString::Int(n)) => np::TargetPort::Number(u16::try_from(*n).ok()?),
                Some(IntOrString::String(name)) => match name.parse::<u16>() {
                    Ok(n) => np::TargetPort::Number(n),
                    Err(_) => np::TargetPort::Name(name.clone()),
                },
            };
            Some(np::ServicePort { proto, port, target })
        })
        .collect();
    Some(np::Service {
        namespace: s.namespace().unwrap_or_default(),
        name: s.name_any(),
        cluster_ip,
        selector: spec.selector.clone().filter(|s| !s.is_empty()),
        ports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_keep_named_ports_and_addresses_and_host_network_pods_are_left_out() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "x", "name": "a", "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "ports": [
                {"name": "http", "containerPort": 8080},
                {"containerPort": 9000},
                {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
            "status": {"podIP": "10.0.0.7", "phase": "Running"}
        }))
        .expect("pod");
        let got = pod(&p).expect("kept");
        assert_eq!(got.ip, Some("10.0.0.7".parse().expect("ip")));
        assert_eq!(got.resolve("http", np::Proto::Tcp), Some(8080));
        assert_eq!(got.resolve("dns", np::Proto::Udp), Some(53));
        assert_eq!(got.ports.len(), 2, "unnamed ports cannot be named");
        let mut h = p.clone();
        h.spec.as_mut().expect("spec").host_network = Some(true);
        assert!(pod(&h).is_none());
        let mut done = p;
        done.status.as_mut().expect("status").phase = Some("Succeeded".into());
        assert!(pod(&done).is_none());
    }

    #[test]
    fn services_without_cluster_ip_are_left_out_and_target_ports_read() {
        let s: Service = serde_json::from_value(json!({
            "metadata": {"namespace": "x", "name": "web"},
            "spec": {"clusterIP": "10.96.0.9", "selector": {"app": "a"}, "ports": [
                {"port": 80, "targetPort": "http"}, {"port": 81, "targetPort": 8081},
                {"port": 82, "protocol": "UDP"}]}
        }))
        .expect("svc");
        let got = service(&s).expect("kept");
        assert_eq!(got.ports[0].target, np::TargetPort::Name("http".into()));
        assert_eq!(got.ports[1].target, np::TargetPort::Number(8081));
        assert_eq!(
            (got.ports[2].proto, &got.ports[2].target),
            (np::Proto::Udp, &np::TargetPort::Number(82))
        );
        let headless: Service =
            serde_json::from_value(json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}}))
                .expect("svc");
        assert!(service(&headless).is_none());
    }
}
