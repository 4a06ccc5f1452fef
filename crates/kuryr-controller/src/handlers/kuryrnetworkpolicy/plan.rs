//! The KuryrNetworkPolicy handler's decisions (pure): the policy's group exists, holds exactly
//! the spec's rules (a diff: missing rules created in one bulk request, extra ones deleted), and
//! the status says so; on deletion the group is released and both finalizers go.

use std::collections::BTreeSet;

use kuryr_openstack::{SecurityGroupRule, SecurityGroupRuleCreate};
use kuryr_types::{KuryrNetworkPolicySpec, SecurityGroupRule as StatusRule, SgRuleSpec};

use crate::handlers::scaffold::{Plan, Then};

/// What makes two rules the same (upstream compared exactly these fields).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuleKey {
    direction: String,
    ethertype: String,
    protocol: Option<String>,
    port_range_min: Option<i64>,
    port_range_max: Option<i64>,
    remote_ip_prefix: Option<String>,
    remote_group_id: Option<String>,
}

impl RuleKey {
    /// The key of a spec rule.
    pub fn of_spec(r: &SgRuleSpec) -> Self {
        let s = &r.sg_rule;
        Self {
            direction: s.direction.clone().unwrap_or_default(),
            ethertype: s.ethertype.clone().unwrap_or_else(|| "IPv4".into()),
            protocol: s.protocol.clone().map(|p| p.to_lowercase()),
            port_range_min: s.port_range_min.map(i64::from),
            port_range_max: s.port_range_max.map(i64::from),
            remote_ip_prefix: s.remote_ip_prefix.clone(),
            remote_group_id: None,
        }
    }

    /// The key of a Neutron rule.
    pub fn of_neutron(r: &SecurityGroupRule) -> Self {
        Self {
            direction: r.direction.clone(),
            ethertype: r.ethertype.clone(),
            protocol: r.protocol.clone().map(|p| p.to_lowercase()),
            port_range_min: r.port_range_min.map(i64::from),
            port_range_max: r.port_range_max.map(i64::from),
            remote_ip_prefix: r.remote_ip_prefix.clone(),
            remote_group_id: r.remote_group_id.clone(),
        }
    }
}

/// The settings the plan and its steps use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnpSettings {
    /// Project of the groups.
    pub project_id: Option<String>,
    /// Tags of the groups.
    pub tags: Vec<String>,
}

/// What the plan looks at.
#[derive(Debug, Clone)]
pub struct KnpObserved {
    /// namespace/name.
    pub key: String,
    /// Being deleted.
    pub deleting: bool,
    /// Carries the finalizer.
    pub has_finalizer: bool,
    /// The spec.
    pub spec: KuryrNetworkPolicySpec,
    /// `status.securityGroupId`.
    pub recorded_group: Option<String>,
    /// `status.securityGroupRules` as recorded.
    pub recorded_rules: Vec<StatusRule>,
    /// `status.podSelector` as recorded equals the spec's.
    pub recorded_selector_current: bool,
    /// The group in Neutron (the recorded one, or one found by name).
    pub group: Option<String>,
    /// Its rules in Neutron.
    pub rules: Vec<SecurityGroupRule>,
    /// The NetworkPolicy still exists (its finalizer is ours to remove).
    pub policy_exists: bool,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Put the finalizer on the KuryrNetworkPolicy.
    AddFinalizer,
    /// Create the group.
    CreateGroup,
    /// Create these rules (one bulk request per 100).
    CreateRules(Vec<SecurityGroupRuleCreate>),
    /// Delete these rules.
    DeleteRules(Vec<String>),
    /// Write `status` from Neutron.
    WriteStatus,
    /// Take the group off pooled ports and delete it.
    ReleaseGroup(String),
    /// Remove the NetworkPolicy's and then the KuryrNetworkPolicy's finalizer.
    RemoveFinalizers,
}

/// The rules the group must hold: every spec rule except those resolved for some pods only
/// (`affectedPods`, named ingress ports that differ between the selected pods), which need a
/// group per resolution — not made yet: such pods do not get those ports opened.
pub fn wanted(spec: &KuryrNetworkPolicySpec) -> BTreeSet<RuleKey> {
    spec.ingress_sg_rules
        .iter()
        .chain(&spec.egress_sg_rules)
        .filter(|r| r.affected_pods.is_none())
        .map(RuleKey::of_spec)
        .collect()
}

/// The create bodies of the `missing` rules of group `sg`.
fn creates(
    spec: &KuryrNetworkPolicySpec,
    sg: &str,
    missing: &BTreeSet<RuleKey>,
) -> Vec<SecurityGroupRuleCreate> {
    let mut seen = BTreeSet::new();
    spec.ingress_sg_rules
        .iter()
        .chain(&spec.egress_sg_rules)
        .filter(|r| r.affected_pods.is_none())
        .filter(|r| {
            let k = RuleKey::of_spec(r);
            missing.contains(&k) && seen.insert(k)
        })
        .map(|r| {
            let s = &r.sg_rule;
            SecurityGroupRuleCreate {
                security_group_id: sg.to_string(),
                direction: s.direction.clone().unwrap_or_default(),
                ethertype: s.ethertype.clone().unwrap_or_else(|| "IPv4".into()),
                protocol: s.protocol.clone().map(|p| p.to_lowercase()),
                port_range_min: s.port_range_min.and_then(|p| u16::try_from(p).ok()),
                port_range_max: s.port_range_max.and_then(|p| u16::try_from(p).ok()),
                remote_ip_prefix: s.remote_ip_prefix.clone(),
                description: s.description.clone(),
            }
        })
        .collect()
}

/// `status.securityGroupRules` for Neutron's `rules`.
pub fn status_rules(rules: &[SecurityGroupRule]) -> Vec<StatusRule> {
    let mut out: Vec<StatusRule> = rules
        .iter()
        .map(|r| StatusRule {
            id: r.id.clone(),
            description: r.description.clone().filter(|d| !d.is_empty()),
            direction: Some(r.direction.clone()),
            ethertype: Some(r.ethertype.clone()),
            port_range_max: r.port_range_max.map(i32::from),
            port_range_min: r.port_range_min.map(i32::from),
            protocol: r.protocol.clone(),
            remote_ip_prefix: r.remote_ip_prefix.clone(),
            security_group_id: Some(r.security_group_id.clone()),
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// The plan.
pub fn plan(o: &KnpObserved) -> Plan<Step> {
    if o.deleting {
        let mut steps = Vec::new();
        if let Some(g) = &o.group {
            steps.push(Step::ReleaseGroup(g.clone()));
        }
        if o.has_finalizer || o.policy_exists {
            steps.push(Step::RemoveFinalizers);
        }
        return Plan::steps("policy deleted", steps, Then::AwaitChange);
    }
    if !o.has_finalizer {
        return Plan::steps(
            "new KuryrNetworkPolicy",
            vec![Step::AddFinalizer],
            Then::AwaitChange,
        );
    }
    let Some(group) = &o.group else {
        return Plan::steps(
            "no security group yet",
            vec![Step::CreateGroup],
            Then::AwaitChange,
        );
    };
    let want = wanted(&o.spec);
    let have: Vec<RuleKey> = o.rules.iter().map(RuleKey::of_neutron).collect();
    let have_set: BTreeSet<&RuleKey> = have.iter().collect();
    let missing: BTreeSet<RuleKey> = want.iter().filter(|k| !have_set.contains(k)).cloned().collect();
    let mut kept = BTreeSet::new();
    let extra: Vec<String> = o
        .rules
        .iter()
        .filter(|r| {
            let k = RuleKey::of_neutron(r);
            // A duplicate of a wanted rule (another writer's) goes too.
            !(want.contains(&k) && kept.insert(k))
        })
        .map(|r| r.id.clone())
        .collect();
    let mut steps = Vec::new();
    if !missing.is_empty() {
        steps.push(Step::CreateRules(creates(&o.spec, group, &missing)));
    }
    if !extra.is_empty() {
        steps.push(Step::DeleteRules(extra));
    }
    if !steps.is_empty() {
        return Plan::steps("rules differ from the spec", steps, Then::Periodic);
    }
    let recorded_ok = o.recorded_group.as_deref() == Some(group.as_str())
        && o.recorded_rules == status_rules(&o.rules)
        && o.recorded_selector_current;
    if recorded_ok {
        Plan::nothing("security group matches the spec", Then::Periodic)
    } else {
        Plan::steps("status behind Neutron", vec![Step::WriteStatus], Then::Periodic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_types::{AffectedPod, SgRule};

    fn spec_rule(dir: &str, prefix: &str, port: Option<i32>) -> SgRuleSpec {
        SgRuleSpec {
            affected_pods: None,
            namespace: None,
            sg_rule: SgRule {
                description: Some("d".into()),
                direction: Some(dir.into()),
                ethertype: Some("IPv4".into()),
                port_range_min: port,
                port_range_max: port,
                protocol: port.map(|_| "tcp".into()),
                remote_ip_prefix: Some(prefix.into()),
            },
        }
    }

    fn neutron_rule(id: &str, dir: &str, prefix: &str, port: Option<u16>) -> SecurityGroupRule {
        SecurityGroupRule {
            id: id.into(),
            security_group_id: "sg".into(),
            direction: dir.into(),
            ethertype: "IPv4".into(),
            protocol: port.map(|_| "tcp".into()),
            port_range_min: port,
            port_range_max: port,
            remote_ip_prefix: Some(prefix.into()),
            remote_group_id: None,
            description: Some("d".into()),
        }
    }

    fn observed(spec_rules: Vec<SgRuleSpec>, rules: Vec<SecurityGroupRule>) -> KnpObserved {
        KnpObserved {
            key: "x/np".into(),
            deleting: false,
            has_finalizer: true,
            spec: KuryrNetworkPolicySpec {
                ingress_sg_rules: spec_rules,
                egress_sg_rules: vec![],
                pod_selector: Default::default(),
                policy_types: vec!["Ingress".into()],
            },
            recorded_group: Some("sg".into()),
            recorded_rules: status_rules(&rules),
            recorded_selector_current: true,
            group: Some("sg".into()),
            rules,
            policy_exists: true,
        }
    }

    #[test]
    fn the_diff_creates_what_is_missing_in_one_step_and_deletes_what_is_extra() {
        let o = observed(
            vec![
                spec_rule("ingress", "10.0.0.1/32", Some(80)),
                spec_rule("ingress", "10.0.0.2/32", Some(80)),
            ],
            vec![
                neutron_rule("r1", "ingress", "10.0.0.1/32", Some(80)),
                neutron_rule("r9", "ingress", "10.0.0.9/32", None),
            ],
        );
        let p = plan(&o);
        let [Step::CreateRules(c), Step::DeleteRules(d)] = p.steps.as_slice() else {
            panic!("{:?}", p.steps)
        };
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].remote_ip_prefix.as_deref(), Some("10.0.0.2/32"));
        assert_eq!(
            (c[0].port_range_min, c[0].protocol.as_deref()),
            (Some(80), Some("tcp"))
        );
        assert_eq!(d, &["r9".to_string()]);
    }

    #[test]
    fn in_sync_with_status_current_is_nothing_and_a_stale_status_is_written() {
        let rules = vec![neutron_rule("r1", "ingress", "10.0.0.1/32", Some(80))];
        let o = observed(vec![spec_rule("ingress", "10.0.0.1/32", Some(80))], rules);
        assert!(plan(&o).steps.is_empty());
        let mut stale = o.clone();
        stale.recorded_rules.clear();
        assert_eq!(plan(&stale).steps, vec![Step::WriteStatus]);
        let mut adopted = o;
        adopted.recorded_group = None;
        assert_eq!(plan(&adopted).steps, vec![Step::WriteStatus]);
    }

    #[test]
    fn duplicates_in_neutron_go_and_per_pod_rules_are_not_in_the_main_group() {
        let mut per_pod = spec_rule("ingress", "0.0.0.0/0", Some(8080));
        per_pod.affected_pods = Some(vec![AffectedPod {
            pod_ip: "10.0.0.5".into(),
            pod_namespace: "x".into(),
        }]);
        let o = observed(
            vec![spec_rule("ingress", "10.0.0.1/32", Some(80)), per_pod],
            vec![
                neutron_rule("r1", "ingress", "10.0.0.1/32", Some(80)),
                neutron_rule("r2", "ingress", "10.0.0.1/32", Some(80)),
            ],
        );
        assert_eq!(plan(&o).steps, vec![Step::DeleteRules(vec!["r2".into()])]);
    }

    #[test]
    fn lifecycle_ends() {
        let mut o = observed(vec![], vec![]);
        o.has_finalizer = false;
        assert_eq!(plan(&o).steps, vec![Step::AddFinalizer]);
        o.has_finalizer = true;
        o.group = None;
        assert_eq!(plan(&o).steps, vec![Step::CreateGroup]);
        o.deleting = true;
        assert_eq!(plan(&o).steps, vec![Step::RemoveFinalizers]);
        o.group = Some("sg".into());
        assert_eq!(
            plan(&o).steps,
            vec![Step::ReleaseGroup("sg".into()), Step::RemoveFinalizers]
        );
    }
}
