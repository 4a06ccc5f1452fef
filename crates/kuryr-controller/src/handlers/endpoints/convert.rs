//! Endpoints as a KuryrLoadBalancer carries them (pure): `discovery.k8s.io/v1` EndpointSlices
//! copied into `spec.endpointSlices` (upstream's shape), and the `Endpoints` of a selectorless
//! Service (written by hand, no slice mirrors them here) converted to the same shape.

use k8s_openapi::api::core::v1::{EndpointAddress, Endpoints, ObjectReference};
use k8s_openapi::api::discovery::v1 as d;
use kube::ResourceExt;
use kuryr_types::kuryrloadbalancer as k;

fn target(r: &ObjectReference) -> k::TargetRef {
    k::TargetRef {
        kind: r.kind.clone(),
        name: r.name.clone(),
        namespace: r.namespace.clone(),
        resource_version: None,
        uid: r.uid.clone(),
    }
}

/// The slices of one Service, in name order (FQDN slices carry no IPs and are skipped).
pub fn from_slices(slices: &[&d::EndpointSlice]) -> Vec<k::EndpointSlice> {
    let mut sorted: Vec<&d::EndpointSlice> = slices
        .iter()
        .copied()
        .filter(|s| s.address_type != "FQDN")
        .collect();
    sorted.sort_by_key(|s| s.name_any());
    sorted
        .into_iter()
        .map(|s| k::EndpointSlice {
            endpoints: Some(
                s.endpoints
                    .iter()
                    .map(|e| k::Endpoint {
                        addresses: Some(e.addresses.clone()),
                        conditions: e
                            .conditions
                            .as_ref()
                            .map(|c| k::EndpointConditions { ready: c.ready }),
                        hostname: e.hostname.clone(),
                        target_ref: e.target_ref.as_ref().map(target),
                        topology: None,
                    })
                    .collect(),
            ),
            ports: Some(
                s.ports
                    .iter()
                    .flatten()
                    .map(|p| k::EndpointPort {
                        name: p.name.clone().filter(|n| !n.is_empty()),
                        port: p.port,
                        protocol: p.protocol.clone(),
                    })
                    .collect(),
            ),
        })
        .filter(|s| s.endpoints.as_ref().is_some_and(|e| !e.is_empty()))
        .collect()
}

fn endpoint(a: &EndpointAddress, ready: bool) -> k::Endpoint {
    k::Endpoint {
        addresses: Some(vec![a.ip.clone()]),
        conditions: Some(k::EndpointConditions { ready: Some(ready) }),
        hostname: a.hostname.clone(),
        target_ref: a.target_ref.as_ref().map(target),
        topology: None,
    }
}

/// The subsets of a (hand-written) `Endpoints` object as slices, one per subset.
pub fn from_endpoints(eps: &Endpoints) -> Vec<k::EndpointSlice> {
    eps.subsets
        .iter()
        .flatten()
        .map(|s| k::EndpointSlice {
            endpoints: Some(
                s.addresses
                    .iter()
                    .flatten()
                    .map(|a| endpoint(a, true))
                    .chain(s.not_ready_addresses.iter().flatten().map(|a| endpoint(a, false)))
                    .collect(),
            ),
            ports: Some(
                s.ports
                    .iter()
                    .flatten()
                    .map(|p| k::EndpointPort {
                        name: p.name.clone().filter(|n| !n.is_empty()),
                        port: Some(p.port),
                        protocol: p.protocol.clone(),
                    })
                    .collect(),
            ),
        })
        .filter(|s| s.endpoints.as_ref().is_some_and(|e| !e.is_empty()))
        .collect()
}
