//! The scenarios of the conformance suite, in our own words after the documented cases of the
//! Kubernetes e2e "Netpol" tests: deny-all and allow-all, pod and namespace selectors and their
//! combinations, matchExpressions, ports by number and name, endPort, protocols, egress, ipBlock
//! with excepts, several policies, updates, pod and namespace relabels, deletion. Each check
//! states the whole expected table as a predicate over (from, to); pairs it does not name are
//! open because no policy selects their pods.

use serde_json::{Value, json};

use super::{Action, Check, Peer, Proto, Scenario, Step};

const TCP: Proto = Proto::Tcp;
const UDP: Proto = Proto::Udp;

fn apply(ns: &'static str, name: &'static str, spec: Value) -> Action {
    Action::Apply { ns, name, spec }
}

fn step(what: &'static str, actions: Vec<Action>, checks: Vec<Check>) -> Step {
    Step {
        what,
        actions,
        checks,
    }
}

fn scenario(name: &'static str, steps: Vec<Step>) -> Scenario {
    Scenario { name, steps }
}

fn pod_a() -> Value {
    json!({"matchLabels": {"pod": "a"}})
}

fn is_xa(p: &Peer) -> bool {
    p.is("x", "a")
}

/// x/a admits ingress only from `from` (a policy on x/a, ingress rule `rule`).
fn xa_ingress(rule: Value) -> Value {
    json!({"podSelector": pod_a(), "policyTypes": ["Ingress"], "ingress": [rule]})
}

/// Every scenario; `peers` gives the pods' IPs for the ipBlock cases.
pub fn all(peers: &[Peer]) -> Vec<Scenario> {
    let ip = |ns: &str, name: &str| {
        peers
            .iter()
            .find(|p| p.is(ns, name))
            .map(|p| format!("{}/32", p.ip))
            .unwrap_or_default()
    };
    let (yb, zc, xb) = (ip("y", "b"), ip("z", "c"), ip("x", "b"));
    vec![
        scenario(
            "default-deny ingress",
            vec![step(
                "podSelector {} with policyTypes [Ingress] in x",
                vec![apply(
                    "x",
                    "deny-ingress",
                    json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
                )],
                vec![
                    Check::new(TCP, 80, |_, t| t.ns != "x"),
                    Check::new(UDP, 81, |_, t| t.ns != "x"),
                ],
            )],
        ),
        scenario(
            "default-deny egress",
            vec![step(
                "podSelector {} with policyTypes [Egress] in x",
                vec![apply(
                    "x",
                    "deny-egress",
                    json!({"podSelector": {}, "policyTypes": ["Egress"]}),
                )],
                vec![
                    Check::new(TCP, 80, |f, _| f.ns != "x"),
                    Check::new(UDP, 80, |f, _| f.ns != "x"),
                ],
            )],
        ),
        scenario(
            "default-deny both directions",
            vec![step(
                "policyTypes [Ingress, Egress] in x",
                vec![apply(
                    "x",
                    "deny-all",
                    json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
                )],
                vec![Check::new(TCP, 81, |f, t| f.ns != "x" && t.ns != "x")],
            )],
        ),
        scenario(
            "allow-all ingress adds up with a deny",
            vec![
                step(
                    "deny ingress in x",
                    vec![apply(
                        "x",
                        "deny-ingress",
                        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
                    )],
                    vec![Check::new(TCP, 80, |_, t| t.ns != "x")],
                ),
                step(
                    "plus ingress [{}] in x",
                    vec![apply(
                        "x",
                        "allow-ingress",
                        json!({"podSelector": {}, "ingress": [{}]}),
                    )],
                    vec![Check::new(TCP, 80, |_, _| true)],
                ),
            ],
        ),
        scenario(
            "allow-all egress adds up with a deny",
            vec![
                step(
                    "deny egress in x",
                    vec![apply(
                        "x",
                        "deny-egress",
                        json!({"podSelector": {}, "policyTypes": ["Egress"]}),
                    )],
                    vec![Check::new(TCP, 80, |f, _| f.ns != "x")],
                ),
                step(
                    "plus egress [{}] in x",
                    vec![apply(
                        "x",
                        "allow-egress",
                        json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]}),
                    )],
                    vec![Check::new(TCP, 80, |_, _| true)],
                ),
            ],
        ),
        scenario(
            "pod selector",
            vec![step(
                "x/a from pod=b (its namespace only; x/b, x/c stay open)",
                vec![apply(
                    "x",
                    "a-from-b",
                    xa_ingress(json!({"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]})),
                )],
                vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.is("x", "b"))],
            )],
        ),
        scenario(
            "empty pod selector",
            vec![step(
                "x/a from podSelector {} (its whole namespace)",
                vec![apply(
                    "x",
                    "a-from-x",
                    xa_ingress(json!({"from": [{"podSelector": {}}]})),
                )],
                vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.ns == "x")],
            )],
        ),
        scenario(
            "namespace selector",
            vec![step(
                "x/a from ns=y",
                vec![apply(
                    "x",
                    "a-from-y",
                    xa_ingress(json!({"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]})),
                )],
                vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.ns == "y")],
            )],
        ),
        scenario(
            "empty namespace selector",
            vec![step(
                "deny ingress in x, x/a from namespaceSelector {} (every namespace)",
                vec![
                    apply(
                        "x",
                        "deny-ingress",
                        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
                    ),
                    apply(
                        "x",
                        "a-from-all",
                        xa_ingress(json!({"from": [{"namespaceSelector": {}}]})),
                    ),
                ],
                vec![Check::new(TCP, 80, |_, t| t.ns != "x" || is_xa(t))],
            )],
        ),
        scenario(
            "namespace AND pod selector in one peer",
            vec![step(
                "x/a from {ns=y and pod=b}",
                vec![apply(
                    "x",
                    "a-from-yb",
                    xa_ingress(json!({"from": [{
                        "namespaceSelector": {"matchLabels": {"ns": "y"}},
                        "podSelector": {"matchLabels": {"pod": "b"}}}]})),
                )],
                vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.is("y", "b"))],
            )],
        ),
        scenario(
            "namespace OR pod selector in two peers",
            vec![step(
                "x/a from [ns=y] or [pod=b]",
                vec![apply(
                    "x",
                    "a-from-y-or-b",
                    xa_ingress(json!({"from": [
                        {"namespaceSelector": {"matchLabels": {"ns": "y"}}},
                        {"podSelector": {"matchLabels": {"pod": "b"}}}]})),
                )],
                vec![Check::new(TCP, 80, |f, t| {
                    !is_xa(t) || f.ns == "y" || f.is("x", "b")
                })],
            )],
        ),
        scenario(
            "several namespaces in one selector",
            vec![step(
                "x/a from pod=c in ns In [y, z] (upstream kept only the last namespace)",
                vec![apply(
                    "x",
                    "a-from-yz-c",
                    xa_ingress(json!({"from": [{
                        "namespaceSelector": {"matchExpressions": [{"key": "ns", "operator": "In", "values": ["y", "z"]}]},
                        "podSelector": {"matchLabels": {"pod": "c"}}}]})),
                )],
                vec![Check::new(TCP, 80, |f, t| {
                    !is_xa(t) || (f.ns != "x" && f.name == "c")
                })],
            )],
        ),
        scenario(
            "matchExpressions NotIn on namespaces",
            vec![step(
                "x/a from ns NotIn [y]",
                vec![apply(
                    "x",
                    "a-not-from-y",
                    xa_ingress(json!({"from": [{"namespaceSelector": {"matchExpressions": [
                        {"key": "ns", "operator": "NotIn", "values": ["y"]}]}}]})),
                )],
                vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.ns != "y")],
            )],
        ),
        scenario(
            "matchExpressions In on pods across namespaces",
            vec![step(
                "x/a from pod In [b, c] in every namespace",
                vec![apply(
                    "x",
                    "a-from-bc",
                    xa_ingress(
                        json!({"from": [{"namespaceSelector": {}, "podSelector": {"matchExpressions": [
                        {"key": "pod", "operator": "In", "values": ["b", "c"]}]}}]}),
                    ),
                )],
                vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.name != "a")],
            )],
        ),
        scenario(
            "matchExpressions Exists and a pod relabel",
            vec![
                step(
                    "x/a from pods with label role (none yet)",
                    vec![apply(
                        "x",
                        "a-from-role",
                        xa_ingress(
                            json!({"from": [{"namespaceSelector": {}, "podSelector": {"matchExpressions": [
                            {"key": "role", "operator": "Exists"}]}}]}),
                        ),
                    )],
                    vec![Check::new(TCP, 80, |_, t| !is_xa(t))],
                ),
                step(
                    "y/c gets role=client",
                    vec![Action::LabelPod {
                        ns: "y",
                        pod: "c",
                        key: "role",
                        value: Some("client"),
                    }],
                    vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.is("y", "c"))],
                ),
                step(
                    "y/c loses the label",
                    vec![Action::LabelPod {
                        ns: "y",
                        pod: "c",
                        key: "role",
                        value: None,
                    }],
                    vec![Check::new(TCP, 80, |_, t| !is_xa(t))],
                ),
            ],
        ),
        scenario(
            "namespace relabel",
            vec![
                step(
                    "x/a from namespaces with team=blue (none yet)",
                    vec![apply(
                        "x",
                        "a-from-blue",
                        xa_ingress(
                            json!({"from": [{"namespaceSelector": {"matchLabels": {"team": "blue"}}}]}),
                        ),
                    )],
                    vec![Check::new(TCP, 80, |_, t| !is_xa(t))],
                ),
                step(
                    "z gets team=blue",
                    vec![Action::LabelNs {
                        ns: "z",
                        key: "team",
                        value: Some("blue"),
                    }],
                    vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.ns == "z")],
                ),
                step(
                    "z loses it",
                    vec![Action::LabelNs {
                        ns: "z",
                        key: "team",
                        value: None,
                    }],
                    vec![Check::new(TCP, 80, |_, t| !is_xa(t))],
                ),
            ],
        ),
        scenario(
            "port by number",
            vec![step(
                "x/a admits TCP 81 only, from everywhere",
                vec![apply(
                    "x",
                    "a-81",
                    xa_ingress(json!({"ports": [{"port": 81, "protocol": "TCP"}]})),
                )],
                vec![
                    Check::new(TCP, 81, |_, _| true),
                    Check::new(TCP, 80, |_, t| !is_xa(t)),
                    Check::new(UDP, 81, |_, t| !is_xa(t)),
                ],
            )],
        ),
        scenario(
            "named port",
            vec![step(
                "x/a admits port tcp-81 (by name)",
                vec![apply(
                    "x",
                    "a-named",
                    xa_ingress(json!({"ports": [{"port": "tcp-81"}]})),
                )],
                vec![
                    Check::new(TCP, 81, |_, _| true),
                    Check::new(TCP, 80, |_, t| !is_xa(t)),
                ],
            )],
        ),
        scenario(
            "named port is per protocol",
            vec![step(
                "x/a admits udp-80 over UDP",
                vec![apply(
                    "x",
                    "a-named-udp",
                    xa_ingress(json!({"ports": [{"port": "udp-80", "protocol": "UDP"}]})),
                )],
                vec![
                    Check::new(UDP, 80, |_, _| true),
                    Check::new(TCP, 80, |_, t| !is_xa(t)),
                ],
            )],
        ),
        scenario(
            "named port resolved per pod",
            vec![
                step(
                    "pods of x admit `serve` (TCP 80 on a, 81 on b, none on c; upstream opened both on a and b)",
                    vec![apply(
                        "x",
                        "serve",
                        json!({"podSelector": {}, "policyTypes": ["Ingress"],
                            "ingress": [{"ports": [{"port": super::SERVE_PORT}]}]}),
                    )],
                    vec![
                        Check::new(TCP, 80, |_, t| t.ns != "x" || t.name == "a"),
                        Check::new(TCP, 81, |_, t| t.ns != "x" || t.name == "b"),
                    ],
                ),
                step(
                    "narrowed to x/a (one resolution: no per-pod group left)",
                    vec![apply(
                        "x",
                        "serve",
                        json!({"podSelector": pod_a(), "policyTypes": ["Ingress"],
                            "ingress": [{"ports": [{"port": super::SERVE_PORT}]}]}),
                    )],
                    vec![
                        Check::new(TCP, 80, |_, _| true),
                        Check::new(TCP, 81, |_, t| !is_xa(t)),
                    ],
                ),
            ],
        ),
        scenario(
            "endPort",
            vec![
                step(
                    "x/a admits 80-81",
                    vec![apply(
                        "x",
                        "a-range",
                        xa_ingress(json!({"ports": [{"port": 80, "endPort": 81}]})),
                    )],
                    vec![Check::new(TCP, 80, |_, _| true), Check::new(TCP, 81, |_, _| true)],
                ),
                step(
                    "updated to 81-82",
                    vec![apply(
                        "x",
                        "a-range",
                        xa_ingress(json!({"ports": [{"port": 81, "endPort": 82}]})),
                    )],
                    vec![
                        Check::new(TCP, 80, |_, t| !is_xa(t)),
                        Check::new(TCP, 81, |_, _| true),
                    ],
                ),
            ],
        ),
        scenario(
            "UDP only",
            vec![step(
                "x/a admits UDP 81 only",
                vec![apply(
                    "x",
                    "a-udp",
                    xa_ingress(json!({"ports": [{"port": 81, "protocol": "UDP"}]})),
                )],
                vec![
                    Check::new(UDP, 81, |_, _| true),
                    Check::new(TCP, 81, |_, t| !is_xa(t)),
                ],
            )],
        ),
        scenario(
            "egress to a pod selector",
            vec![step(
                "x/a may reach pod=b in x only",
                vec![apply(
                    "x",
                    "a-to-b",
                    json!({"podSelector": pod_a(), "policyTypes": ["Egress"],
                        "egress": [{"to": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}]}),
                )],
                vec![Check::new(TCP, 80, |f, t| !is_xa(f) || t.is("x", "b"))],
            )],
        ),
        scenario(
            "egress to a namespace on one port",
            vec![step(
                "x/a may reach ns=y on 80",
                vec![apply(
                    "x",
                    "a-to-y-80",
                    json!({"podSelector": pod_a(), "policyTypes": ["Egress"],
                        "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}], "ports": [{"port": 80}]}]}),
                )],
                vec![
                    Check::new(TCP, 80, |f, t| !is_xa(f) || t.ns == "y"),
                    Check::new(TCP, 81, |f, _| !is_xa(f)),
                ],
            )],
        ),
        scenario(
            "egress ipBlock with two excepts",
            vec![step(
                "x/a may reach 0.0.0.0/0 except y/b and z/c (upstream intersected excepts)",
                vec![apply(
                    "x",
                    "a-to-cidr",
                    json!({"podSelector": pod_a(), "policyTypes": ["Egress"],
                        "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [yb, zc]}}]}]}),
                )],
                vec![Check::new(TCP, 80, |f, t| {
                    !is_xa(f) || !(t.is("y", "b") || t.is("z", "c"))
                })],
            )],
        ),
        scenario(
            "ingress ipBlock with except",
            vec![step(
                "x/a from 0.0.0.0/0 except x/b",
                vec![apply(
                    "x",
                    "a-from-cidr",
                    xa_ingress(json!({"from": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [xb]}}]})),
                )],
                vec![Check::new(TCP, 80, |f, t| !is_xa(t) || !f.is("x", "b"))],
            )],
        ),
        scenario(
            "several policies add up",
            vec![step(
                "x/a from pod=b and, in another policy, from ns=z",
                vec![
                    apply(
                        "x",
                        "a-from-b",
                        xa_ingress(json!({"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]})),
                    ),
                    apply(
                        "x",
                        "a-from-z",
                        xa_ingress(json!({"from": [{"namespaceSelector": {"matchLabels": {"ns": "z"}}}]})),
                    ),
                ],
                vec![Check::new(TCP, 80, |f, t| {
                    !is_xa(t) || f.is("x", "b") || f.ns == "z"
                })],
            )],
        ),
        scenario(
            "ingress and egress in one policy",
            vec![step(
                "x/a from pod=b anywhere, to pod=c anywhere",
                vec![apply(
                    "x",
                    "a-both",
                    json!({"podSelector": pod_a(), "policyTypes": ["Ingress", "Egress"],
                        "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"pod": "b"}}}]}],
                        "egress": [{"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"pod": "c"}}}]}]}),
                )],
                vec![Check::new(TCP, 80, |f, t| {
                    (!is_xa(t) || f.name == "b") && (!is_xa(f) || t.name == "c")
                })],
            )],
        ),
        scenario(
            "policy update",
            vec![
                step(
                    "x/a from pod=b",
                    vec![apply(
                        "x",
                        "a-from",
                        xa_ingress(json!({"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]})),
                    )],
                    vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.is("x", "b"))],
                ),
                step(
                    "updated: from pod=c",
                    vec![apply(
                        "x",
                        "a-from",
                        xa_ingress(json!({"from": [{"podSelector": {"matchLabels": {"pod": "c"}}}]})),
                    )],
                    vec![Check::new(TCP, 80, |f, t| !is_xa(t) || f.is("x", "c"))],
                ),
            ],
        ),
        scenario(
            "policy selects pods by relabel",
            vec![
                step(
                    "deny ingress to pods with isolated=yes (none yet)",
                    vec![apply(
                        "y",
                        "deny-isolated",
                        json!({"podSelector": {"matchLabels": {"isolated": "yes"}}, "policyTypes": ["Ingress"]}),
                    )],
                    vec![Check::new(TCP, 80, |_, _| true)],
                ),
                step(
                    "y/b gets isolated=yes",
                    vec![Action::LabelPod {
                        ns: "y",
                        pod: "b",
                        key: "isolated",
                        value: Some("yes"),
                    }],
                    vec![Check::new(TCP, 80, |_, t| !t.is("y", "b"))],
                ),
            ],
        ),
        scenario(
            "policy deletion",
            vec![
                step(
                    "deny ingress in z",
                    vec![apply(
                        "z",
                        "deny-ingress",
                        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
                    )],
                    vec![Check::new(TCP, 80, |_, t| t.ns != "z")],
                ),
                step(
                    "deleted",
                    vec![Action::Delete {
                        ns: "z",
                        name: "deny-ingress",
                    }],
                    vec![Check::new(TCP, 80, |_, _| true)],
                ),
            ],
        ),
    ]
}
