//! The Kubernetes NetworkPolicy specification, evaluated directly: is this connection allowed.
//! The reference the translation is held to (property tests compare the two on generated
//! clusters); written from the API documentation, sharing no matching code with the translator
//! except the label-selector and CIDR primitives.
//!
//! Assumptions stated once: a pod never reaches itself through its port (its own address is
//! local), so self-traffic is not a question here; `ipBlock` matches any address in it, pods'
//! included; a named port names nothing on a non-pod address; a connection to a ClusterIP is
//! let out when the client may reach at least one backend on the target port.

use std::net::IpAddr;

use crate::cidr::block_contains;
use crate::model::{Cluster, Pod, Proto, Service, ServicePort};
use crate::policy::{Namespaces, Peer, Policy, Ports, Rule};

/// The other end of a connection.
#[derive(Clone, Copy, Debug)]
pub enum Endpoint<'a> {
    /// A pod of the cluster.
    Pod(&'a Pod),
    /// An address outside every pod.
    External(IpAddr),
}

impl Endpoint<'_> {
    fn ip(&self) -> Option<IpAddr> {
        match self {
            Endpoint::Pod(p) => p.ip,
            Endpoint::External(ip) => Some(*ip),
        }
    }
}

fn peer_matches(peer: &Peer, policy: &Policy, cluster: &Cluster, who: Endpoint<'_>) -> bool {
    match peer {
        Peer::Block { cidr, except } => who.ip().is_some_and(|ip| block_contains(*cidr, except, ip)),
        Peer::Pods { namespaces, pods } => {
            let Endpoint::Pod(p) = who else { return false };
            let ns_ok = match namespaces {
                Namespaces::Own => p.key.namespace == policy.namespace,
                Namespaces::Matching(sel) => cluster
                    .namespace_labels(&p.key.namespace)
                    .is_some_and(|l| sel.matches(l)),
            };
            ns_ok && pods.matches(&p.labels)
        }
    }
}

/// Whether a rule's `ports` admit `proto`/`port` on the destination `dst`.
fn port_matches(rule: &Rule, dst: Endpoint<'_>, proto: Proto, port: u16) -> bool {
    let Some(specs) = &rule.ports else { return true };
    specs.iter().any(|s| {
        s.proto == proto
            && match &s.ports {
                Ports::All => true,
                Ports::Range(lo, hi) => *lo <= port && port <= *hi,
                Ports::Named(name) => match dst {
                    Endpoint::Pod(p) => p.resolve(name, proto) == Some(port),
                    Endpoint::External(_) => false,
                },
            }
    })
}

fn rule_matches(
    rule: &Rule,
    policy: &Policy,
    cluster: &Cluster,
    peer: Endpoint<'_>,
    dst: Endpoint<'_>,
    proto: Proto,
    port: u16,
) -> bool {
    let peer_ok = rule
        .peers
        .as_ref()
        .is_none_or(|ps| ps.iter().any(|p| peer_matches(p, policy, cluster, peer)));
    peer_ok && port_matches(rule, dst, proto, port)
}

/// Whether `dst` admits a connection from `src` to its `port`.
pub fn ingress_allowed(
    cluster: &Cluster,
    policies: &[Policy],
    src: Endpoint<'_>,
    dst: &Pod,
    proto: Proto,
    port: u16,
) -> bool {
    if src
        .ip()
        .is_some_and(|ip| cluster.always_allowed_sources.iter().any(|n| n.contains(&ip)))
    {
        return true;
    }
    let isolating: Vec<&Policy> = policies
        .iter()
        .filter(|p| p.ingress.is_some() && p.selects(&dst.key.namespace, &dst.labels))
        .collect();
    if isolating.is_empty() {
        return true;
    }
    isolating.iter().any(|p| {
        p.ingress
            .iter()
            .flatten()
            .any(|r| rule_matches(r, p, cluster, src, Endpoint::Pod(dst), proto, port))
    })
}

/// Whether `src` may open a connection to `dst`'s `port`.
pub fn egress_allowed(
    cluster: &Cluster,
    policies: &[Policy],
    src: &Pod,
    dst: Endpoint<'_>,
    proto: Proto,
    port: u16,
) -> bool {
    let isolating: Vec<&Policy> = policies
        .iter()
        .filter(|p| p.egress.is_some() && p.selects(&src.key.namespace, &src.labels))
        .collect();
    if isolating.is_empty() {
        return true;
    }
    isolating.iter().any(|p| {
        p.egress
            .iter()
            .flatten()
            .any(|r| rule_matches(r, p, cluster, dst, dst, proto, port))
    })
}

/// Whether a pod-to-pod (or outside-to-pod, pod-to-outside) connection is allowed end to end.
pub fn connection_allowed(
    cluster: &Cluster,
    policies: &[Policy],
    src: Endpoint<'_>,
    dst: Endpoint<'_>,
    proto: Proto,
    port: u16,
) -> bool {
    let out_ok = match src {
        Endpoint::Pod(s) => egress_allowed(cluster, policies, s, dst, proto, port),
        Endpoint::External(_) => true,
    };
    let in_ok = match dst {
        Endpoint::Pod(d) => ingress_allowed(cluster, policies, src, d, proto, port),
        Endpoint::External(_) => true,
    };
    out_ok && in_ok
}

/// Whether `src` may send to a Service's ClusterIP port (the egress half; the backend chosen
/// then applies its own ingress).
pub fn service_egress_allowed(
    cluster: &Cluster,
    policies: &[Policy],
    src: &Pod,
    svc: &Service,
    sp: &ServicePort,
) -> bool {
    let isolated = policies
        .iter()
        .any(|p| p.egress.is_some() && p.selects(&src.key.namespace, &src.labels));
    if !isolated {
        return true;
    }
    // The ClusterIP itself named by a rule (an ipBlock holding it) …
    if egress_allowed(
        cluster,
        policies,
        src,
        Endpoint::External(svc.cluster_ip),
        sp.proto,
        sp.port,
    ) {
        return true;
    }
    // … or one backend reachable on its target port.
    cluster.backends(svc).any(|b| {
        let target = sp.target_on(b);
        b.ip.is_some()
            && target.is_some_and(|t| egress_allowed(cluster, policies, src, Endpoint::Pod(b), sp.proto, t))
    })
}
