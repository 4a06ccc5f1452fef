//! Examples of the translation, one per behaviour a reader may want to look up (the property
//! test in `tests/equivalence.rs` covers the general case).

use std::collections::BTreeSet;

use k8s_openapi::api::networking::v1::NetworkPolicy;

use crate::assign::{Group, PodGroups, plan};
use crate::model::{
    Cluster, ContainerPort, Labels, Namespace, Pod, PodKey, Proto, Service, ServicePort, TargetPort,
};
use crate::policy::Policy;
use crate::rule::{Direction, SgRule};
use crate::translate::translate;

fn labels(kv: &[(&str, &str)]) -> Labels {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn pod(ns: &str, name: &str, l: &[(&str, &str)], ip: &str, ports: Vec<ContainerPort>) -> Pod {
    Pod {
        key: PodKey::new(ns, name),
        labels: labels(l),
        ip: Some(ip.parse().expect("ip")),
        ports,
    }
}

fn http(port: u16) -> ContainerPort {
    ContainerPort {
        name: "http".into(),
        port,
        proto: Proto::Tcp,
    }
}

fn cluster() -> Cluster {
    Cluster {
        namespaces: ["x", "y", "z"]
            .iter()
            .map(|n| Namespace {
                name: n.to_string(),
                labels: labels(&[("team", if *n == "z" { "blue" } else { "red" })]),
            })
            .collect(),
        pods: vec![
            pod("x", "a", &[("app", "a")], "10.1.0.1", vec![http(80)]),
            pod("x", "b", &[("app", "b")], "10.1.0.2", vec![http(8080)]),
            pod("y", "a", &[("app", "a")], "10.1.1.1", vec![]),
            pod("y", "b", &[("app", "b")], "10.1.1.2", vec![]),
            pod("z", "a", &[("app", "a")], "10.1.2.1", vec![]),
        ],
        services: vec![Service {
            namespace: "x".into(),
            name: "web".into(),
            cluster_ip: "10.96.0.10".parse().expect("ip"),
            selector: Some(labels(&[("app", "a")])),
            ports: vec![ServicePort {
                proto: Proto::Tcp,
                port: 80,
                target: TargetPort::Name("http".into()),
            }],
        }],
        always_allowed_sources: vec!["192.168.100.0/24".parse().expect("cidr")],
    }
}

fn policy(yaml_like: serde_like::Value) -> Policy {
    let np: NetworkPolicy = serde_like::from(yaml_like);
    Policy::from_k8s(&np).expect("valid policy")
}

/// Examples are written as the JSON users send; k8s-openapi's own serde re-export reads them.
mod serde_like {
    pub type Value = &'static str;
    pub fn from<T: k8s_openapi::serde::de::DeserializeOwned>(json: Value) -> T {
        let mut de = k8s_openapi::serde_json::Deserializer::from_str(json);
        T::deserialize(&mut de).expect("example JSON")
    }
}

fn remotes(rules: &BTreeSet<SgRule>, dir: Direction) -> Vec<String> {
    rules
        .iter()
        .filter(|r| r.direction == dir)
        .map(|r| r.to_string())
        .collect()
}

#[test]
fn namespace_and_pod_selector_takes_pods_of_every_matching_namespace() {
    // Upstream kept only the last matching namespace's pods.
    let p = policy(
        r#"{"metadata":{"namespace":"x","name":"np"},"spec":{"podSelector":{},
            "ingress":[{"from":[{"namespaceSelector":{"matchLabels":{"team":"red"}},"podSelector":{"matchLabels":{"app":"a"}}}]}]}}"#,
    );
    let t = translate(&p, &cluster());
    let ingress: Vec<String> = t.ingress.iter().flatten().map(|e| e.rule.to_string()).collect();
    assert!(
        ingress.contains(&"ingress IPv4 any 10.1.0.1/32".to_string()),
        "{ingress:?}"
    );
    assert!(
        ingress.contains(&"ingress IPv4 any 10.1.1.1/32".to_string()),
        "{ingress:?}"
    );
    assert!(
        !ingress.iter().any(|r| r.contains("10.1.2.1")),
        "z is blue: {ingress:?}"
    );
    assert!(
        ingress.contains(&"ingress IPv4 any 192.168.100.0/24".to_string()),
        "nodes always admitted"
    );
    assert!(
        ingress.contains(&"ingress IPv4 any 10.96.0.10/32".to_string()),
        "hairpin through the VIP"
    );
    assert_eq!(t.egress, None, "an ingress policy holds no egress rules");
}

#[test]
fn end_port_makes_one_ranged_rule() {
    let p = policy(
        r#"{"metadata":{"namespace":"x","name":"np"},"spec":{"podSelector":{},"policyTypes":["Egress"],
            "egress":[{"ports":[{"protocol":"UDP","port":5000,"endPort":5010}]}]}}"#,
    );
    let t = translate(&p, &cluster());
    let egress: Vec<String> = t.egress.iter().flatten().map(|e| e.rule.to_string()).collect();
    assert_eq!(
        egress,
        [
            "egress IPv4 udp:5000-5010 anywhere",
            "egress IPv6 udp:5000-5010 anywhere"
        ]
    );
}

#[test]
fn named_ingress_port_resolved_differently_gives_each_resolution_its_group() {
    let p = policy(
        r#"{"metadata":{"namespace":"x","name":"np"},"spec":{"podSelector":{"matchExpressions":[{"key":"app","operator":"In","values":["a","b"]}]},
            "ingress":[{"ports":[{"port":"http"}]}]}}"#,
    );
    let c = cluster();
    let plan = plan(&c, std::slice::from_ref(&p));
    let group_of = |name: &str| match plan.pods.get(&PodKey::new("x", name)) {
        Some(PodGroups::Groups(gs)) => gs
            .iter()
            .find(|g| matches!(g, Group::Policy { .. }))
            .cloned()
            .expect("policy group"),
        other => panic!("{name}: {other:?}"),
    };
    let (ga, gb) = (group_of("a"), group_of("b"));
    assert_ne!(ga, gb, "80 on a, 8080 on b: two groups");
    assert!(
        remotes(&plan.groups[&ga], Direction::Ingress).contains(&"ingress IPv4 tcp:80 anywhere".to_string())
    );
    assert!(
        !remotes(&plan.groups[&ga], Direction::Ingress)
            .iter()
            .any(|r| r.contains("8080"))
    );
    assert!(
        remotes(&plan.groups[&gb], Direction::Ingress)
            .contains(&"ingress IPv4 tcp:8080 anywhere".to_string())
    );
    // Egress stays open: no policy isolates it.
    for name in ["a", "b"] {
        let Some(PodGroups::Groups(gs)) = plan.pods.get(&PodKey::new("x", name)) else {
            panic!("groups")
        };
        assert!(
            gs.contains(&Group::OpenEgress) && !gs.contains(&Group::OpenIngress),
            "{gs:?}"
        );
    }
    assert_eq!(
        plan.pods[&PodKey::new("y", "a")],
        PodGroups::Default,
        "selected by nothing"
    );
}

#[test]
fn egress_to_a_backend_opens_its_cluster_ip() {
    let p = policy(
        r#"{"metadata":{"namespace":"y","name":"np"},"spec":{"podSelector":{},"policyTypes":["Egress"],
            "egress":[{"to":[{"namespaceSelector":{},"podSelector":{"matchLabels":{"app":"a"}}}],"ports":[{"port":80}]}]}}"#,
    );
    let t = translate(&p, &cluster());
    let egress: Vec<String> = t.egress.iter().flatten().map(|e| e.rule.to_string()).collect();
    assert!(
        egress.contains(&"egress IPv4 tcp:80 10.96.0.10/32".to_string()),
        "{egress:?}"
    );
    assert!(
        egress.contains(&"egress IPv4 tcp:80 10.1.0.1/32".to_string()),
        "{egress:?}"
    );
    let entry = t
        .egress
        .iter()
        .flatten()
        .find(|e| e.rule.to_string() == "egress IPv4 tcp:80 10.1.1.1/32");
    assert_eq!(
        entry.and_then(|e| e.namespace.as_deref()),
        Some("y"),
        "upstream's namespace field"
    );
}

#[test]
fn deny_all_is_an_empty_group_and_allow_all_is_anywhere() {
    let deny = policy(r#"{"metadata":{"namespace":"z","name":"deny"},"spec":{"podSelector":{}}}"#);
    let t = translate(&deny, &cluster());
    let only_extras: Vec<String> = t.ingress.iter().flatten().map(|e| e.rule.to_string()).collect();
    assert_eq!(only_extras, ["ingress IPv4 any 192.168.100.0/24"]);
    let allow =
        policy(r#"{"metadata":{"namespace":"z","name":"allow"},"spec":{"podSelector":{},"ingress":[{}]}}"#);
    let t = translate(&allow, &cluster());
    let rules: Vec<String> = t.ingress.iter().flatten().map(|e| e.rule.to_string()).collect();
    assert!(
        rules.contains(&"ingress IPv4 any anywhere".to_string())
            && rules.contains(&"ingress IPv6 any anywhere".to_string())
    );
}

#[test]
fn bad_policies_name_the_field() {
    for (json, want) in [
        (r#"{"spec":{"podSelector":{}}}"#, "metadata.namespace: missing"),
        (
            r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"policyTypes":["Sideways"]}}"#,
            "spec.policyTypes[0]: unknown policy type",
        ),
        (
            r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"ingress":[{"ports":[{"protocol":"ICMP"}]}]}}"#,
            "spec.ingress[0].ports[0].protocol: unknown protocol \"ICMP\"",
        ),
        (
            r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"ingress":[{"ports":[{"port":90,"endPort":80}]}]}}"#,
            "spec.ingress[0].ports[0].endPort: 80 is below port 90",
        ),
        (
            r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"ingress":[{"ports":[{"port":"http","endPort":80}]}]}}"#,
            "endPort needs a numeric port",
        ),
        (
            r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"ingress":[{"ports":[{"port":70000}]}]}}"#,
            "70000 is not a port number",
        ),
        (
            r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"egress":[{"to":[{"ipBlock":{"cidr":"10.0.0/8"}}]}]}}"#,
            "spec.egress[0].to[0].ipBlock.cidr: \"10.0.0/8\" is not a CIDR",
        ),
        (
            r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"egress":[{"to":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["11.0.0.0/8"]}}]}]}}"#,
            "except[0]: 11.0.0.0/8 is not inside",
        ),
        (
            r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"egress":[{"to":[{}]}]}}"#,
            "spec.egress[0].to[0]: a peer needs",
        ),
        (
            r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"egress":[{"to":[{"ipBlock":{"cidr":"10.0.0.0/8"},"podSelector":{}}]}]}}"#,
            "cannot be combined",
        ),
    ] {
        let np: NetworkPolicy = serde_like::from(json);
        let err = Policy::from_k8s(&np).expect_err(json).to_string();
        assert!(err.contains(want), "{json}: {err}");
    }
}

#[test]
fn policy_types_default_as_the_api_server_defaults_them() {
    let p = policy(r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"egress":[{}]}}"#);
    assert!(p.ingress.is_some() && p.egress.is_some());
    let p = policy(r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"egress":[]}}"#);
    assert!(
        p.ingress.is_some() && p.egress.is_none(),
        "an empty egress list does not make an Egress policy"
    );
    let p = policy(
        r#"{"metadata":{"namespace":"x","name":"n"},"spec":{"policyTypes":["Egress"],"ingress":[{}]}}"#,
    );
    assert!(
        p.ingress.is_none(),
        "ingress rules of a policy whose types lack Ingress are ignored"
    );
}
