//! One policy + the cluster → the security-group rules that implement it.
//!
//! Remotes are prefixes (`remote_ip_prefix`, as upstream): a pod peer is its address as a /32 (or
//! /128), an `ipBlock` its CIDR minus every `except`, "anyone" a rule without remote per family.
//! A policy's group holds only the directions the policy isolates; which groups a pod gets
//! (and the open-direction groups that keep the other direction open) is [`crate::assign`]'s job.
//!
//! Named ports resolve on the *destination* pod. For egress that is the peer, so each resolved
//! rule names the peer's address and port. For ingress it is the selected pod itself, and pods
//! may give one name different numbers: such rules carry `only_for`, the selected pods they were
//! resolved for, and [`crate::assign`] gives pods with different resolutions different groups
//! (upstream put every resolution into the one group, opening each number on every pod).
//!
//! Extras no Kubernetes rule names but the platform needs:
//! * ingress from [`Cluster::always_allowed_sources`] (nodes: kubelet probes);
//! * ingress from the ClusterIP of each Service that sends to a selected pod: the OVN load
//!   balancer rewrites the source of hairpin traffic (a pod reaching itself through its Service)
//!   to the VIP, and only hairpin traffic carries that source;
//! * egress to a Service's ClusterIP and port when the policy lets the pod reach one of its
//!   backends on the target port: OVN applies a port's egress rules before the load balancer
//!   rewrites the destination, so the rules must name the VIP.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;

use crate::cidr;
use crate::model::{Cluster, Pod, PodKey, Proto};
use crate::policy::{Namespaces, Peer, Policy, Ports, Rule};
use crate::rule::{Direction, SgRule};

/// A rule with what it was derived from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// The Neutron rule.
    pub rule: SgRule,
    /// Namespace of the peer pod(s) the remote came from (upstream's KNP `namespace`).
    pub namespace: Option<String>,
    /// For ingress rules whose port came from a name: the selected pods it was resolved for.
    /// `None`: every selected pod.
    pub only_for: Option<BTreeSet<PodKey>>,
}

/// The rules of one policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Translation {
    /// Pods the policy selects (with or without an address yet).
    pub selected: Vec<PodKey>,
    /// Ingress rules; `None`: the policy does not isolate ingress.
    pub ingress: Option<Vec<Entry>>,
    /// Egress rules; `None`: the policy does not isolate egress.
    pub egress: Option<Vec<Entry>>,
}

/// Collects entries: one per (rule, namespace), `only_for` sets merged, a rule for every pod
/// absorbing the same rule for some.
#[derive(Default)]
struct Collector(BTreeMap<(SgRule, Option<String>), Option<BTreeSet<PodKey>>>);

impl Collector {
    fn add(&mut self, rule: SgRule, namespace: Option<&str>, only_for: Option<&PodKey>) {
        let slot = self
            .0
            .entry((rule, namespace.map(str::to_owned)))
            .or_insert_with(|| Some(BTreeSet::new()));
        match (slot.as_mut(), only_for) {
            (Some(set), Some(pod)) => {
                set.insert(pod.clone());
            }
            (Some(_), None) => *slot = None,
            (None, _) => {}
        }
    }

    fn finish(self, selected: &[PodKey]) -> Vec<Entry> {
        let everyone: BTreeSet<&PodKey> = selected.iter().collect();
        self.0
            .into_iter()
            .map(|((rule, namespace), only_for)| {
                // Resolved the same on every selected pod: a rule for all.
                let only_for = only_for.filter(|s| s.iter().collect::<BTreeSet<_>>() != everyone);
                Entry {
                    rule,
                    namespace,
                    only_for,
                }
            })
            .collect()
    }

    fn admits(&self, direction: Direction, ip: IpAddr, proto: Proto, port: u16) -> bool {
        self.0.keys().any(|(r, _)| r.admits(direction, ip, proto, port))
    }
}

/// A resolved remote of a rule.
enum Remote<'a> {
    /// Anyone.
    Anywhere,
    /// A pod peer (its address, namespace, and itself for named ports).
    Pod(&'a Pod, IpAddr),
    /// An `ipBlock`, already split into prefixes, with its definition for named ports.
    Block(Vec<IpNet>, IpNet, &'a [IpNet]),
}

/// Translates one policy.
pub fn translate(policy: &Policy, cluster: &Cluster) -> Translation {
    let selected_pods: Vec<&Pod> = cluster
        .pods
        .iter()
        .filter(|p| policy.selects(&p.key.namespace, &p.labels))
        .collect();
    let selected: Vec<PodKey> = selected_pods.iter().map(|p| p.key.clone()).collect();
    let ingress = policy.ingress.as_ref().map(|rules| {
        let mut out = Collector::default();
        for r in rules {
            ingress_rule(r, policy, cluster, &selected_pods, &mut out);
        }
        for src in &cluster.always_allowed_sources {
            out.add(
                SgRule::to_prefix(Direction::Ingress, *src, None, None),
                None,
                None,
            );
        }
        for svc in &cluster.services {
            if cluster.backends(svc).any(|b| selected.contains(&b.key)) {
                out.add(
                    SgRule::to_prefix(Direction::Ingress, IpNet::from(svc.cluster_ip), None, None),
                    None,
                    None,
                );
            }
        }
        out.finish(&selected)
    });
    let egress = policy.egress.as_ref().map(|rules| {
        let mut out = Collector::default();
        for r in rules {
            egress_rule(r, policy, cluster, &mut out);
        }
        service_egress(cluster, &mut out);
        out.finish(&selected)
    });
    Translation {
        selected,
        ingress,
        egress,
    }
}

/// The pods (with an address) a peer stands for.
fn peer_pods<'a>(
    peer: &'a Peer,
    policy: &'a Policy,
    cluster: &'a Cluster,
) -> impl Iterator<Item = (&'a Pod, IpAddr)> + 'a {
    cluster.pods.iter().filter_map(move |p| {
        let ip = p.ip?;
        let Peer::Pods { namespaces, pods } = peer else {
            return None;
        };
        let in_scope = match namespaces {
            Namespaces::Own => p.key.namespace == policy.namespace,
            Namespaces::Matching(sel) => cluster
                .namespace_labels(&p.key.namespace)
                .is_some_and(|l| sel.matches(l)),
        };
        (in_scope && pods.matches(&p.labels)).then_some((p, ip))
    })
}

fn remotes<'a>(rule: &'a Rule, policy: &'a Policy, cluster: &'a Cluster) -> Vec<Remote<'a>> {
    let Some(peers) = &rule.peers else {
        return vec![Remote::Anywhere];
    };
    let mut out = Vec::new();
    for peer in peers {
        match peer {
            Peer::Pods { .. } => {
                out.extend(peer_pods(peer, policy, cluster).map(|(p, ip)| Remote::Pod(p, ip)))
            }
            Peer::Block { cidr, except } => {
                out.push(Remote::Block(cidr::subtract(*cidr, except), *cidr, except))
            }
        }
    }
    out
}

/// Adds `remote` × (proto, ports) rules.
fn emit(
    out: &mut Collector,
    dir: Direction,
    remote: &Remote<'_>,
    proto: Option<Proto>,
    ports: Option<(u16, u16)>,
    only_for: Option<&PodKey>,
) {
    match remote {
        Remote::Anywhere => {
            for r in SgRule::anywhere(dir, proto, ports) {
                out.add(r, None, only_for);
            }
        }
        Remote::Pod(p, ip) => out.add(
            SgRule::to_prefix(dir, IpNet::from(*ip), proto, ports),
            Some(&p.key.namespace),
            only_for,
        ),
        Remote::Block(prefixes, _, _) => {
            for n in prefixes {
                out.add(SgRule::to_prefix(dir, *n, proto, ports), None, only_for);
            }
        }
    }
}

fn range(p: &Ports) -> Option<(u16, u16)> {
    match p {
        Ports::Range(lo, hi) => Some((*lo, *hi)),
        Ports::All | Ports::Named(_) => None,
    }
}

fn ingress_rule(rule: &Rule, policy: &Policy, cluster: &Cluster, selected: &[&Pod], out: &mut Collector) {
    let remotes = remotes(rule, policy, cluster);
    let dir = Direction::Ingress;
    for remote in &remotes {
        let Some(specs) = &rule.ports else {
            emit(out, dir, remote, None, None, None);
            continue;
        };
        for spec in specs {
            match &spec.ports {
                Ports::Named(name) => {
                    for target in selected {
                        if let Some(n) = target.resolve(name, spec.proto) {
                            emit(
                                out,
                                dir,
                                remote,
                                Some(spec.proto),
                                Some((n, n)),
                                Some(&target.key),
                            );
                        }
                    }
                }
                p => emit(out, dir, remote, Some(spec.proto), range(p), None),
            }
        }
    }
}

fn egress_rule(rule: &Rule, policy: &Policy, cluster: &Cluster, out: &mut Collector) {
    let remotes = remotes(rule, policy, cluster);
    let dir = Direction::Egress;
    for remote in &remotes {
        let Some(specs) = &rule.ports else {
            emit(out, dir, remote, None, None, None);
            continue;
        };
        for spec in specs {
            let Ports::Named(name) = &spec.ports else {
                emit(out, dir, remote, Some(spec.proto), range(&spec.ports), None);
                continue;
            };
            // A name only means something on a pod: the pods this remote covers that have it.
            let covered: Vec<(&Pod, IpAddr)> = match remote {
                Remote::Pod(p, ip) => vec![(*p, *ip)],
                Remote::Anywhere => cluster.pods.iter().filter_map(|p| Some((p, p.ip?))).collect(),
                Remote::Block(_, cidr, except) => cluster
                    .pods
                    .iter()
                    .filter_map(|p| {
                        p.ip.filter(|ip| cidr::block_contains(*cidr, except, *ip))
                            .map(|ip| (p, ip))
                    })
                    .collect(),
            };
            for (p, ip) in covered {
                if let Some(n) = p.resolve(name, spec.proto) {
                    emit(
                        out,
                        dir,
                        &Remote::Pod(p, ip),
                        Some(spec.proto),
                        Some((n, n)),
                        None,
                    );
                }
            }
        }
    }
}

/// Egress to each ClusterIP port that leads to a backend the rules so far let the pod reach.
fn service_egress(cluster: &Cluster, out: &mut Collector) {
    let mut extra = Vec::new();
    for svc in &cluster.services {
        for sp in &svc.ports {
            if out.admits(Direction::Egress, svc.cluster_ip, sp.proto, sp.port) {
                continue;
            }
            let reachable = cluster.backends(svc).any(|b| {
                let target = sp.target_on(b);
                match (b.ip, target) {
                    (Some(ip), Some(port)) => out.admits(Direction::Egress, ip, sp.proto, port),
                    _ => false,
                }
            });
            if reachable {
                let vip = IpNet::from(svc.cluster_ip);
                extra.push(SgRule::to_prefix(
                    Direction::Egress,
                    vip,
                    Some(sp.proto),
                    Some((sp.port, sp.port)),
                ));
            }
        }
    }
    for r in extra {
        out.add(r, None, None);
    }
}
