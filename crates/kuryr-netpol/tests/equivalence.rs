//! Property test: on generated clusters and policies, what the security groups admit (the
//! translation and group assignment, evaluated as Neutron evaluates groups) equals what the
//! NetworkPolicy specification allows (`semantics`), for every pod pair, outside address, port
//! and protocol, and for every ClusterIP port.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kuryr_netpol::semantics::{self, Endpoint};
use kuryr_netpol::{
    Cluster, ContainerPort, Direction, Namespace, Plan, Pod, PodKey, Policy, Proto, Service, ServicePort,
    TargetPort, plan,
};
use proptest::prelude::*;

const NAMESPACES: [&str; 3] = ["x", "y", "z"];

fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

// ---- clusters ----

fn container_ports() -> impl Strategy<Value = Vec<ContainerPort>> {
    let choices = vec![
        ContainerPort {
            name: "http".into(),
            port: 80,
            proto: Proto::Tcp,
        },
        ContainerPort {
            name: "http".into(),
            port: 81,
            proto: Proto::Tcp,
        },
        ContainerPort {
            name: "dns".into(),
            port: 53,
            proto: Proto::Udp,
        },
        ContainerPort {
            name: "dns".into(),
            port: 81,
            proto: Proto::Udp,
        },
        ContainerPort {
            name: "alt".into(),
            port: 82,
            proto: Proto::Tcp,
        },
    ];
    proptest::sample::subsequence(choices, 0..=3).prop_map(|mut v| {
        // One number per (name, protocol) on a pod, as the API server requires unique names.
        let mut seen = std::collections::BTreeSet::new();
        v.retain(|p| seen.insert((p.name.clone(), p.proto)));
        v
    })
}

fn pod(ns: usize, i: usize) -> impl Strategy<Value = Pod> {
    (
        0..3usize,
        proptest::option::of(0..2usize),
        container_ports(),
        proptest::bool::weighted(0.93),
    )
        .prop_map(move |(app, tier, ports, has_ip)| {
            let mut l = labels(&[("app", ["a", "b", "c"][app])]);
            if let Some(t) = tier {
                l.insert("tier".into(), ["front", "back"][t].into());
            }
            Pod {
                key: PodKey::new(NAMESPACES[ns], format!("p{i}")),
                labels: l,
                ip: has_ip.then(|| ip(&format!("10.1.{ns}.{}", i + 10))),
                ports,
            }
        })
}

fn cluster() -> impl Strategy<Value = Cluster> {
    let pods = (1..=3usize, 1..=3usize, 0..=2usize).prop_flat_map(|(a, b, c)| {
        let mut all = Vec::new();
        for (ns, n) in [a, b, c].into_iter().enumerate() {
            for i in 0..n {
                all.push(pod(ns, i).boxed());
            }
        }
        all
    });
    let teams = proptest::collection::vec(0..2usize, 3);
    let services = proptest::collection::vec(
        (0..3usize, 0..3usize, proptest::bool::ANY, proptest::bool::ANY),
        0..=2,
    );
    (pods, teams, services).prop_map(|(pods, teams, services)| Cluster {
        namespaces: NAMESPACES
            .iter()
            .zip(teams)
            .map(|(n, t)| Namespace {
                name: n.to_string(),
                labels: labels(&[("kubernetes.io/metadata.name", n), ("team", ["red", "blue"][t])]),
            })
            .collect(),
        pods,
        services: services
            .into_iter()
            .enumerate()
            .map(|(i, (ns, app, named, udp))| Service {
                namespace: NAMESPACES[ns].into(),
                name: format!("s{i}"),
                cluster_ip: ip(&format!("10.96.0.{}", i + 1)),
                selector: Some(labels(&[("app", ["a", "b", "c"][app])])),
                ports: vec![ServicePort {
                    proto: if udp { Proto::Udp } else { Proto::Tcp },
                    port: 8080,
                    target: if named {
                        TargetPort::Name(if udp { "dns" } else { "http" }.into())
                    } else {
                        TargetPort::Number(80)
                    },
                }],
            })
            .collect(),
        always_allowed_sources: vec!["192.168.100.0/24".parse().expect("node subnet")],
    })
}

// ---- policies ----

fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|s| s.to_string()).collect()),
    }
}

fn pod_selector() -> impl Strategy<Value = LabelSelector> {
    prop_oneof![
        Just(LabelSelector::default()),
        (0..3usize).prop_map(|a| LabelSelector {
            match_labels: Some(labels(&[("app", ["a", "b", "c"][a])])),
            ..Default::default()
        }),
        Just(LabelSelector {
            match_expressions: Some(vec![expr("app", "In", &["a", "b"])]),
            ..Default::default()
        }),
        Just(LabelSelector {
            match_expressions: Some(vec![expr("app", "NotIn", &["a"])]),
            ..Default::default()
        }),
        Just(LabelSelector {
            match_expressions: Some(vec![expr("tier", "Exists", &[])]),
            ..Default::default()
        }),
        Just(LabelSelector {
            match_labels: Some(labels(&[("app", "b")])),
            match_expressions: Some(vec![expr("tier", "DoesNotExist", &[])]),
        }),
    ]
}

fn namespace_selector() -> impl Strategy<Value = LabelSelector> {
    prop_oneof![
        Just(LabelSelector::default()),
        Just(LabelSelector {
            match_labels: Some(labels(&[("team", "red")])),
            ..Default::default()
        }),
        Just(LabelSelector {
            match_expressions: Some(vec![expr("kubernetes.io/metadata.name", "In", &["x", "z"])]),
            ..Default::default()
        }),
    ]
}

fn block(cidr: &str, except: &[&str]) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.into(),
            except: (!except.is_empty()).then(|| except.iter().map(|s| s.to_string()).collect()),
        }),
        ..Default::default()
    }
}

fn peer() -> impl Strategy<Value = NetworkPolicyPeer> {
    prop_oneof![
        pod_selector().prop_map(|p| NetworkPolicyPeer {
            pod_selector: Some(p),
            ..Default::default()
        }),
        namespace_selector().prop_map(|n| NetworkPolicyPeer {
            namespace_selector: Some(n),
            ..Default::default()
        }),
        (namespace_selector(), pod_selector()).prop_map(|(n, p)| NetworkPolicyPeer {
            namespace_selector: Some(n),
            pod_selector: Some(p),
            ..Default::default()
        }),
        Just(block("10.1.0.0/16", &["10.1.1.0/24", "10.1.0.10/32"])),
        Just(block("10.1.0.0/23", &[])),
        Just(block("192.168.0.0/16", &["192.168.1.0/24"])),
        Just(block("0.0.0.0/0", &["10.1.2.0/24"])),
        Just(block("10.96.0.0/24", &[])),
    ]
}

fn port() -> impl Strategy<Value = NetworkPolicyPort> {
    let proto = prop_oneof![Just(None), Just(Some("TCP")), Just(Some("UDP"))];
    let which = prop_oneof![
        Just((None, None)),
        Just((Some(IntOrString::Int(80)), None)),
        Just((Some(IntOrString::Int(81)), None)),
        Just((Some(IntOrString::Int(53)), None)),
        Just((Some(IntOrString::Int(80)), Some(82))),
        Just((Some(IntOrString::String("http".into())), None)),
        Just((Some(IntOrString::String("dns".into())), None)),
        Just((Some(IntOrString::String("alt".into())), None)),
    ];
    (proto, which).prop_map(|(proto, (port, end_port))| NetworkPolicyPort {
        protocol: proto.map(str::to_owned),
        port,
        end_port,
    })
}

type RuleParts = (Option<Vec<NetworkPolicyPeer>>, Option<Vec<NetworkPolicyPort>>);

fn rule_parts() -> impl Strategy<Value = RuleParts> {
    (
        proptest::option::of(proptest::collection::vec(peer(), 0..=2)),
        proptest::option::of(proptest::collection::vec(port(), 0..=2)),
    )
}

fn network_policy(i: usize) -> impl Strategy<Value = NetworkPolicy> {
    let types = prop_oneof![
        Just(None),
        Just(Some(vec!["Ingress"])),
        Just(Some(vec!["Egress"])),
        Just(Some(vec!["Ingress", "Egress"])),
    ];
    (
        0..3usize,
        pod_selector(),
        types,
        proptest::option::of(proptest::collection::vec(rule_parts(), 0..=2)),
        proptest::option::of(proptest::collection::vec(rule_parts(), 0..=2)),
    )
        .prop_map(move |(ns, pod_selector, types, ingress, egress)| NetworkPolicy {
            metadata: ObjectMeta {
                namespace: Some(NAMESPACES[ns].into()),
                name: Some(format!("np{i}")),
                ..Default::default()
            },
            spec: Some(NetworkPolicySpec {
                pod_selector: Some(pod_selector),
                policy_types: types.map(|t| t.into_iter().map(str::to_owned).collect()),
                ingress: ingress.map(|rs| {
                    rs.into_iter()
                        .map(|(from, ports)| NetworkPolicyIngressRule { from, ports })
                        .collect()
                }),
                egress: egress.map(|rs| {
                    rs.into_iter()
                        .map(|(to, ports)| NetworkPolicyEgressRule { to, ports })
                        .collect()
                }),
            }),
        })
}

fn policies() -> impl Strategy<Value = Vec<NetworkPolicy>> {
    (0..=3usize).prop_flat_map(|n| (0..n).map(network_policy).collect::<Vec<_>>())
}

// ---- the comparison ----

const EXTERNAL: [&str; 4] = ["192.168.1.5", "192.168.7.7", "10.1.1.200", "192.168.100.7"];
const PORTS: [u16; 5] = [53, 80, 81, 82, 443];

fn by_groups(plan: &Plan, src: Endpoint<'_>, dst: Endpoint<'_>, proto: Proto, port: u16) -> bool {
    let addr = |e: Endpoint<'_>| match e {
        Endpoint::Pod(p) => p.ip,
        Endpoint::External(ip) => Some(ip),
    };
    let (Some(src_ip), Some(dst_ip)) = (addr(src), addr(dst)) else {
        return false;
    };
    let out_ok = match src {
        Endpoint::Pod(p) => plan.admits(&p.key, Direction::Egress, dst_ip, proto, port),
        Endpoint::External(_) => true,
    };
    let in_ok = match dst {
        Endpoint::Pod(p) => plan.admits(&p.key, Direction::Ingress, src_ip, proto, port),
        Endpoint::External(_) => true,
    };
    out_ok && in_ok
}

fn check(cluster: &Cluster, nps: &[NetworkPolicy]) -> Result<(), TestCaseError> {
    let policies: Vec<Policy> = nps
        .iter()
        .map(|np| Policy::from_k8s(np).expect("generated policies are valid"))
        .collect();
    let plan = plan(cluster, &policies);
    let with_ip: Vec<&Pod> = cluster.pods.iter().filter(|p| p.ip.is_some()).collect();
    let mut flows: Vec<(Endpoint<'_>, Endpoint<'_>)> = Vec::new();
    for s in &with_ip {
        for d in &with_ip {
            if s.key != d.key {
                flows.push((Endpoint::Pod(s), Endpoint::Pod(d)));
            }
        }
        for e in EXTERNAL {
            flows.push((Endpoint::Pod(s), Endpoint::External(ip(e))));
            flows.push((Endpoint::External(ip(e)), Endpoint::Pod(s)));
        }
    }
    for (src, dst) in flows {
        for proto in [Proto::Tcp, Proto::Udp] {
            for port in PORTS {
                let want = semantics::connection_allowed(cluster, &policies, src, dst, proto, port);
                let got = by_groups(&plan, src, dst, proto, port);
                prop_assert_eq!(
                    got,
                    want,
                    "{:?} -> {:?} {:?}/{}\nplan: {:#?}",
                    src,
                    dst,
                    proto,
                    port,
                    plan
                );
            }
        }
    }
    for s in &with_ip {
        for svc in &cluster.services {
            for sp in &svc.ports {
                let want = semantics::service_egress_allowed(cluster, &policies, s, svc, sp);
                let got = plan.admits(&s.key, Direction::Egress, svc.cluster_ip, sp.proto, sp.port);
                prop_assert_eq!(
                    got,
                    want,
                    "{} -> service {}/{} {:?}\nplan: {:#?}",
                    s.key,
                    svc.namespace,
                    svc.name,
                    sp,
                    plan
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn security_groups_admit_exactly_what_the_policies_allow(cluster in cluster(), nps in policies()) {
        check(&cluster, &nps)?;
    }
}
