//! The policy handler's decisions (pure): a NetworkPolicy's KuryrNetworkPolicy spec from its
//! translation, and the steps that bring the KuryrNetworkPolicy there.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kuryr_netpol::{Entry, Policy, PolicyError, Translation};
use kuryr_types::{AffectedPod, KuryrNetworkPolicySpec, SgRule, SgRuleSpec};

use crate::handlers::scaffold::{Plan, Then};
use crate::handlers::service::RECREATE_POLL;

/// Upstream's description of every rule it wrote.
pub const RULE_DESCRIPTION: &str = "Kuryr-Kubernetes NetPolicy SG rule";

/// What the plan looks at.
#[derive(Debug)]
pub struct NpObserved {
    /// The policy's namespace/name.
    pub key: String,
    /// The policy is being deleted.
    pub deleting: bool,
    /// It carries our finalizer.
    pub has_finalizer: bool,
    /// Its KuryrNetworkPolicy: `None` absent, `Some(true)` being deleted.
    pub knp: Option<KnpSeen>,
    /// The spec the KuryrNetworkPolicy should have, or why the policy cannot be translated.
    pub desired: Result<KuryrNetworkPolicySpec, PolicyError>,
    /// `[neutron_defaults] max_sg_rules_per_policy` (0: no bound).
    pub max_rules: usize,
}

/// What the plan needs of the KuryrNetworkPolicy.
#[derive(Debug, Clone, PartialEq)]
pub struct KnpSeen {
    /// Being deleted.
    pub deleting: bool,
    /// Its spec.
    pub spec: KuryrNetworkPolicySpec,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Put the NetworkPolicy finalizer on the policy.
    AddFinalizer,
    /// Create the KuryrNetworkPolicy.
    CreateKnp(Box<KuryrNetworkPolicySpec>),
    /// Replace its spec.
    UpdateKnp(Box<KuryrNetworkPolicySpec>),
    /// Delete it (its handler then releases the group and both finalizers).
    DeleteKnp,
    /// Remove the policy's finalizer (no KuryrNetworkPolicy is left to do it).
    RemoveFinalizer,
    /// The policy cannot be translated: say so.
    Invalid(PolicyError),
    /// The translation has more rules than the bound: say so, apply nothing of it.
    TooLarge {
        /// Rules of the translation.
        rules: usize,
        /// `max_sg_rules_per_policy`.
        max: usize,
    },
}

/// The plan.
pub fn plan(o: &NpObserved) -> Plan<Step> {
    if o.deleting {
        return match &o.knp {
            Some(k) if !k.deleting => Plan::steps("policy deleted", vec![Step::DeleteKnp], Then::AwaitChange),
            Some(_) => Plan::nothing(
                "waiting for the KuryrNetworkPolicy to release its group",
                Then::AwaitChange,
            ),
            None if o.has_finalizer => Plan::steps(
                "policy deleted, nothing left",
                vec![Step::RemoveFinalizer],
                Then::AwaitChange,
            )
            .confirmed_live(),
            None => Plan::nothing("policy deleted", Then::AwaitChange),
        };
    }
    let desired = match &o.desired {
        Ok(d) => d,
        Err(e) => {
            return Plan::steps(
                "policy cannot be translated",
                vec![Step::Invalid(e.clone())],
                Then::AwaitChange,
            );
        }
    };
    // Over the bound nothing of the translation is applied: the KuryrNetworkPolicy keeps what
    // it had (its group, its rules), none is created, and the policy's Warning Event says why.
    // A translation cut to the bound would admit or isolate an arbitrary part of the pods.
    let rules = desired.ingress_sg_rules.len() + desired.egress_sg_rules.len();
    if o.max_rules > 0 && rules > o.max_rules {
        return Plan::steps(
            "translation over max_sg_rules_per_policy",
            vec![Step::TooLarge {
                rules,
                max: o.max_rules,
            }],
            Then::AwaitChange,
        );
    }
    let mut steps = Vec::new();
    if !o.has_finalizer {
        steps.push(Step::AddFinalizer);
    }
    match &o.knp {
        None => {
            steps.push(Step::CreateKnp(Box::new(desired.clone())));
            return Plan::steps("new policy", steps, Then::AwaitChange).confirmed_live();
        }
        Some(k) if k.deleting => {
            return Plan::steps(
                "KuryrNetworkPolicy being deleted; recreated after",
                steps,
                Then::Requeue(RECREATE_POLL),
            );
        }
        Some(k) if k.spec != *desired => steps.push(Step::UpdateKnp(Box::new(desired.clone()))),
        Some(_) => {}
    }
    if steps.is_empty() {
        Plan::nothing("KuryrNetworkPolicy up to date", Then::AwaitChange)
    } else {
        Plan::steps("policy changed", steps, Then::AwaitChange)
    }
}

/// The KuryrNetworkPolicy spec of a translated policy. Rules resolved for some selected pods only
/// (named ingress ports) carry those pods in `affectedPods`, as upstream did.
pub fn knp_spec(
    np: &NetworkPolicy,
    policy: &Policy,
    t: &Translation,
    cluster: &kuryr_netpol::Cluster,
) -> KuryrNetworkPolicySpec {
    let rules = |entries: &Option<Vec<Entry>>| -> Vec<SgRuleSpec> {
        entries
            .iter()
            .flatten()
            .filter_map(|e| rule_spec(e, cluster))
            .collect()
    };
    let mut policy_types = Vec::new();
    if policy.ingress.is_some() {
        policy_types.push("Ingress".to_string());
    }
    if policy.egress.is_some() {
        policy_types.push("Egress".to_string());
    }
    KuryrNetworkPolicySpec {
        ingress_sg_rules: rules(&t.ingress),
        egress_sg_rules: rules(&t.egress),
        pod_selector: np
            .spec
            .as_ref()
            .and_then(|s| s.pod_selector.clone())
            .unwrap_or_default(),
        policy_types,
    }
}

fn rule_spec(e: &Entry, cluster: &kuryr_netpol::Cluster) -> Option<SgRuleSpec> {
    let affected_pods = match &e.only_for {
        None => None,
        Some(pods) => {
            let list: Vec<AffectedPod> = pods
                .iter()
                .filter_map(|k| {
                    let ip = cluster.pod(k)?.ip?;
                    Some(AffectedPod {
                        pod_ip: ip.to_string(),
                        pod_namespace: k.namespace.clone(),
                    })
                })
                .collect();
            if list.is_empty() {
                // Resolved only for pods without an address yet: no port to apply it to.
                return None;
            }
            Some(list)
        }
    };
    let r = &e.rule;
    Some(SgRuleSpec {
        affected_pods,
        namespace: e.namespace.clone(),
        sg_rule: SgRule {
            description: Some(RULE_DESCRIPTION.into()),
            direction: Some(r.direction.neutron().into()),
            ethertype: Some(r.ethertype.neutron().into()),
            port_range_max: r.ports.map(|(_, hi)| i32::from(hi)),
            port_range_min: r.ports.map(|(lo, _)| i32::from(lo)),
            protocol: r.protocol.map(|p| p.neutron().into()),
            remote_ip_prefix: r.remote.map(|n| n.to_string()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(rules: usize) -> KuryrNetworkPolicySpec {
        KuryrNetworkPolicySpec {
            ingress_sg_rules: (0..rules)
                .map(|_| SgRuleSpec {
                    affected_pods: None,
                    namespace: None,
                    sg_rule: SgRule::default(),
                })
                .collect(),
            egress_sg_rules: vec![],
            pod_selector: Default::default(),
            policy_types: vec!["Ingress".into()],
        }
    }

    fn observed(knp: Option<KnpSeen>, deleting: bool, has_finalizer: bool) -> NpObserved {
        NpObserved {
            key: "x/np".into(),
            deleting,
            has_finalizer,
            knp,
            desired: Ok(spec(1)),
            max_rules: 1000,
        }
    }

    #[test]
    fn a_translation_over_the_bound_is_told_and_nothing_of_it_applied() {
        let old = Some(KnpSeen {
            deleting: false,
            spec: spec(1),
        });
        let mut o = observed(old, false, true);
        o.desired = Ok(spec(5));
        o.max_rules = 4;
        assert_eq!(plan(&o).steps, vec![Step::TooLarge { rules: 5, max: 4 }]);
        // At the bound, or without one, it is applied.
        o.max_rules = 5;
        assert_eq!(plan(&o).steps, vec![Step::UpdateKnp(Box::new(spec(5)))]);
        o.max_rules = 0;
        assert_eq!(plan(&o).steps, vec![Step::UpdateKnp(Box::new(spec(5)))]);
        // A new policy over the bound gets no KuryrNetworkPolicy.
        let mut o = observed(None, false, false);
        o.desired = Ok(spec(5));
        o.max_rules = 4;
        assert_eq!(plan(&o).steps, vec![Step::TooLarge { rules: 5, max: 4 }]);
    }

    #[test]
    fn a_new_policy_gets_the_finalizer_then_its_knp_after_a_live_look() {
        let p = plan(&observed(None, false, false));
        assert_eq!(
            p.steps,
            vec![Step::AddFinalizer, Step::CreateKnp(Box::new(spec(1)))]
        );
        assert!(p.confirm_live);
    }

    #[test]
    fn a_changed_translation_updates_the_spec_and_an_equal_one_does_nothing() {
        let old = Some(KnpSeen {
            deleting: false,
            spec: spec(2),
        });
        assert_eq!(
            plan(&observed(old, false, true)).steps,
            vec![Step::UpdateKnp(Box::new(spec(1)))]
        );
        let same = Some(KnpSeen {
            deleting: false,
            spec: spec(1),
        });
        assert!(plan(&observed(same, false, true)).steps.is_empty());
    }

    #[test]
    fn deletion_goes_through_the_knp_and_the_finalizer_goes_last() {
        let knp = Some(KnpSeen {
            deleting: false,
            spec: spec(1),
        });
        assert_eq!(plan(&observed(knp, true, true)).steps, vec![Step::DeleteKnp]);
        let going = Some(KnpSeen {
            deleting: true,
            spec: spec(1),
        });
        assert!(plan(&observed(going, true, true)).steps.is_empty());
        let p = plan(&observed(None, true, true));
        assert_eq!(p.steps, vec![Step::RemoveFinalizer]);
        assert!(
            p.confirm_live,
            "a cache missing the KNP is confirmed before the finalizer goes"
        );
    }

    #[test]
    fn an_untranslatable_policy_is_reported() {
        let mut o = observed(None, false, true);
        o.desired = Err(PolicyError::new("spec.policyTypes[0]", "unknown policy type"));
        assert!(matches!(plan(&o).steps.as_slice(), [Step::Invalid(_)]));
    }

    #[test]
    fn spec_rules_are_upstreams_fields() {
        let np: NetworkPolicy = serde_json::from_value(json!({
            "metadata": {"namespace": "x", "name": "np"},
            "spec": {"podSelector": {"matchLabels": {"app": "a"}},
                     "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 80}]}]}
        }))
        .expect("np");
        let policy = Policy::from_k8s(&np).expect("valid");
        let cluster = kuryr_netpol::Cluster {
            pods: vec![kuryr_netpol::Pod {
                key: kuryr_netpol::PodKey::new("x", "b"),
                labels: Default::default(),
                ip: Some("10.0.0.5".parse().expect("ip")),
                ports: vec![],
            }],
            ..Default::default()
        };
        let t = kuryr_netpol::translate(&policy, &cluster);
        let s = knp_spec(&np, &policy, &t, &cluster);
        assert_eq!(s.policy_types, ["Ingress"]);
        assert_eq!(s.ingress_sg_rules.len(), 1);
        let v = serde_json::to_value(&s.ingress_sg_rules[0]).expect("json");
        assert_eq!(
            v,
            json!({"namespace": "x", "sgRule": {"description": RULE_DESCRIPTION, "direction": "ingress",
                   "ethertype": "IPv4", "port_range_max": 80, "port_range_min": 80, "protocol": "tcp",
                   "remote_ip_prefix": "10.0.0.5/32"}})
        );
    }
}
