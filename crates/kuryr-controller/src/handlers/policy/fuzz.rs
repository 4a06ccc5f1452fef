//! Fuzzing of NetworkPolicy translation and its size bound: any policy a user may write,
//! translated against a small cluster, never panics; a refusal names the field; every rule
//! admits only what the cluster or the policy names (a pod's or a Service's address, a node
//! subnet, a prefix inside one of the policy's `ipBlock`s, or anywhere when the policy allows
//! anyone); and a translation over `max_sg_rules_per_policy` is never applied, not even in part.

use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kuryr_netpol::{Cluster, ContainerPort, Namespace, Pod, PodKey, Policy, Proto};
use serde_json::Value;

use super::plan::{NpObserved, Step, knp_spec, plan};

/// Three namespaces of six pods (two apps, named ports), a Service, a node subnet.
fn cluster() -> Cluster {
    let mut c = Cluster::default();
    for (n, ns) in ["default", "x", "y"].into_iter().enumerate() {
        c.namespaces.push(Namespace {
            name: ns.into(),
            labels: [
                ("kubernetes.io/metadata.name".to_string(), ns.to_string()),
                ("team".into(), "a".into()),
            ]
            .into_iter()
            .collect(),
        });
        for i in 0..6u8 {
            c.pods.push(Pod {
                key: PodKey::new(ns, format!("p{i}")),
                labels: [("app".to_string(), if i % 2 == 0 { "a" } else { "b" }.to_string())]
                    .into_iter()
                    .collect(),
                ip: (i != 5).then(|| IpAddr::from([10, 0, n as u8, 10 + i])),
                ports: vec![ContainerPort {
                    name: "http".into(),
                    port: 8000 + u16::from(i),
                    proto: Proto::Tcp,
                }],
            });
        }
    }
    c.always_allowed_sources
        .push("192.168.0.0/24".parse().expect("subnet"));
    c
}

/// The `ipBlock` CIDRs a policy names (wherever they are).
fn blocks(v: &Value, out: &mut Vec<IpNet>) {
    match v {
        Value::Object(m) => {
            if let Some(c) = m
                .get("ipBlock")
                .and_then(|b| b.get("cidr"))
                .and_then(Value::as_str)
                && let Ok(n) = c.parse::<IpNet>()
            {
                out.push(n);
            }
            m.values().for_each(|x| blocks(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| blocks(x, out)),
        _ => {}
    }
}

#[test]
fn network_policy_translation_and_its_bound() {
    let cluster = cluster();
    let known: Vec<IpNet> = cluster
        .pods
        .iter()
        .filter_map(|p| p.ip.map(IpNet::from))
        .chain(cluster.always_allowed_sources.iter().copied())
        .collect();
    let r = kuryr_fuzz::run("network_policy", vec![], |b| {
        let Ok(v) = serde_json::from_slice::<Value>(b) else {
            return false;
        };
        let Ok(np) = serde_json::from_value::<NetworkPolicy>(v.clone()) else {
            return false;
        };
        let policy = match Policy::from_k8s(&np) {
            Ok(p) => p,
            Err(e) => {
                assert!(!e.to_string().trim().is_empty(), "a refusal without words");
                return false;
            }
        };
        let t = kuryr_netpol::translate(&policy, &cluster);
        let spec = knp_spec(&np, &policy, &t, &cluster);
        let mut named = Vec::new();
        blocks(&v, &mut named);
        for r in spec.ingress_sg_rules.iter().chain(&spec.egress_sg_rules) {
            let Some(prefix) = &r.sg_rule.remote_ip_prefix else {
                continue;
            };
            let p: IpNet = prefix
                .parse()
                .unwrap_or_else(|e| panic!("rule prefix {prefix}: {e}"));
            assert!(
                known.iter().chain(&named).any(|k| k.contains(&p)) || p.prefix_len() == 0,
                "a rule admits {p}, which neither the cluster nor the policy names: {r:?}"
            );
        }
        let rules = spec.ingress_sg_rules.len() + spec.egress_sg_rules.len();
        for max in [0, 3, 1000] {
            let o = NpObserved {
                key: "x/np".into(),
                deleting: false,
                has_finalizer: true,
                knp: None,
                desired: Ok(spec.clone()),
                max_rules: max,
            };
            let steps = plan(&o).steps;
            if max > 0 && rules > max {
                assert_eq!(steps, vec![Step::TooLarge { rules, max }]);
            } else {
                for s in &steps {
                    if let Step::CreateKnp(k) | Step::UpdateKnp(k) = s {
                        assert_eq!(k.ingress_sg_rules.len() + k.egress_sg_rules.len(), rules);
                    }
                }
            }
        }
        true
    });
    eprintln!("network_policy: {r:?}");
    assert!(r.accepted > 0);
}
