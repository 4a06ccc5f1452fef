//! Port variants of a policy (pure): the rules of its spec meant for some selected pods only
//! (`affectedPods`: named ingress ports that resolve differently on different pods) grouped by
//! pod, each distinct set a *variant* with a stable key. A pod carries the policy's group plus
//! its variant's group, so it opens exactly the numbers its own containers give the name.
//! Upstream put every resolution into the one group and so opened each number on every pod.

use std::collections::{BTreeMap, BTreeSet};

use kuryr_types::{KuryrNetworkPolicySpec, SgRuleSpec};
use sha2::{Digest, Sha256};

use super::plan::RuleKey;

/// Hex digits of a variant key (48 bits of SHA-256: a collision among one policy's handful of
/// variants is not a practical concern).
const KEY_LEN: usize = 12;

/// One variant: its rules and the pods (namespace, IP) that need it.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// Its rules, one per [`RuleKey`].
    pub rules: Vec<SgRuleSpec>,
    /// The pods, as `(namespace, IP)`.
    pub pods: BTreeSet<(String, String)>,
}

impl Variant {
    /// The rule keys (what the group must hold).
    pub fn keys(&self) -> BTreeSet<RuleKey> {
        self.rules.iter().map(RuleKey::of_spec).collect()
    }
}

fn per_pod(spec: &KuryrNetworkPolicySpec) -> BTreeMap<(String, String), BTreeMap<RuleKey, &SgRuleSpec>> {
    let mut pods: BTreeMap<(String, String), BTreeMap<RuleKey, &SgRuleSpec>> = BTreeMap::new();
    for r in spec.ingress_sg_rules.iter().chain(&spec.egress_sg_rules) {
        for p in r.affected_pods.iter().flatten() {
            pods.entry((p.pod_namespace.clone(), p.pod_ip.clone()))
                .or_default()
                .insert(RuleKey::of_spec(r), r);
        }
    }
    pods
}

fn key_of<'a>(keys: impl Iterator<Item = &'a RuleKey>) -> String {
    let mut h = Sha256::new();
    for k in keys {
        h.update(k.canonical().as_bytes());
        h.update(b"\n");
    }
    h.finalize()
        .iter()
        .take(KEY_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every variant of `spec`, by key.
pub fn variants(spec: &KuryrNetworkPolicySpec) -> BTreeMap<String, Variant> {
    let mut out: BTreeMap<String, Variant> = BTreeMap::new();
    for (pod, rules) in per_pod(spec) {
        let key = key_of(rules.keys());
        out.entry(key)
            .or_insert_with(|| Variant {
                rules: rules.values().map(|r| (*r).clone()).collect(),
                pods: BTreeSet::new(),
            })
            .pods
            .insert(pod);
    }
    out
}

/// The key of the variant the pod `(namespace, ip)` needs, if any.
pub fn key_for_pod(spec: &KuryrNetworkPolicySpec, namespace: &str, ip: &str) -> Option<String> {
    let rules: BTreeSet<RuleKey> = spec
        .ingress_sg_rules
        .iter()
        .chain(&spec.egress_sg_rules)
        .filter(|r| {
            r.affected_pods
                .iter()
                .flatten()
                .any(|p| p.pod_namespace == namespace && p.pod_ip == ip)
        })
        .map(RuleKey::of_spec)
        .collect();
    (!rules.is_empty()).then(|| key_of(rules.iter()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_types::{AffectedPod, SgRule};

    fn rule(port: i32, pods: &[&str]) -> SgRuleSpec {
        SgRuleSpec {
            affected_pods: (!pods.is_empty()).then(|| {
                pods.iter()
                    .map(|ip| AffectedPod {
                        pod_ip: (*ip).into(),
                        pod_namespace: "x".into(),
                    })
                    .collect()
            }),
            namespace: None,
            sg_rule: SgRule {
                direction: Some("ingress".into()),
                ethertype: Some("IPv4".into()),
                protocol: Some("tcp".into()),
                port_range_min: Some(port),
                port_range_max: Some(port),
                ..Default::default()
            },
        }
    }

    fn spec(rules: Vec<SgRuleSpec>) -> KuryrNetworkPolicySpec {
        KuryrNetworkPolicySpec {
            ingress_sg_rules: rules,
            egress_sg_rules: vec![],
            pod_selector: Default::default(),
            policy_types: vec!["Ingress".into()],
        }
    }

    #[test]
    fn pods_with_the_same_resolution_share_a_variant_and_others_get_their_own() {
        // "web" is 80 on .1 and .2, 81 on .3; 22 is for every pod (no variant).
        let s = spec(vec![
            rule(22, &[]),
            rule(80, &["10.0.0.1", "10.0.0.2"]),
            rule(81, &["10.0.0.3"]),
        ]);
        let v = variants(&s);
        assert_eq!(v.len(), 2);
        let k1 = key_for_pod(&s, "x", "10.0.0.1").unwrap();
        assert_eq!(key_for_pod(&s, "x", "10.0.0.2").as_ref(), Some(&k1));
        let k3 = key_for_pod(&s, "x", "10.0.0.3").unwrap();
        assert_ne!(k1, k3);
        assert_eq!(k1.len(), KEY_LEN);
        assert_eq!(v[&k1].rules.len(), 1);
        assert_eq!(v[&k1].rules[0].sg_rule.port_range_min, Some(80));
        assert_eq!(v[&k1].pods.len(), 2);
        assert_eq!(v[&k3].rules[0].sg_rule.port_range_min, Some(81));
        assert_eq!(key_for_pod(&s, "x", "10.0.0.9"), None);
        assert_eq!(
            key_for_pod(&s, "y", "10.0.0.1"),
            None,
            "the namespace is part of the pod"
        );
    }

    #[test]
    fn keys_do_not_depend_on_rule_order_or_descriptions() {
        let a = spec(vec![rule(80, &["10.0.0.1"]), rule(8080, &["10.0.0.1"])]);
        let mut swapped = vec![rule(8080, &["10.0.0.1"]), rule(80, &["10.0.0.1"])];
        swapped[0].sg_rule.description = Some("other words".into());
        let b = spec(swapped);
        assert_eq!(
            variants(&a).keys().collect::<Vec<_>>(),
            variants(&b).keys().collect::<Vec<_>>()
        );
        assert_eq!(key_for_pod(&a, "x", "10.0.0.1"), key_for_pod(&b, "x", "10.0.0.1"));
        // A pod in two variants' worth of rules is one variant: the set is the key.
        assert_eq!(variants(&a).len(), 1);
    }

    #[test]
    fn a_spec_without_per_pod_rules_has_no_variants() {
        assert!(variants(&spec(vec![rule(80, &[])])).is_empty());
    }
}
