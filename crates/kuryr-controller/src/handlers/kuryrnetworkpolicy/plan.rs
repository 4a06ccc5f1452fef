//! The KuryrNetworkPolicy handler's decisions (pure): the policy's group exists, holds exactly
//! the spec's rules for every selected pod (a diff: missing rules created in one bulk request,
//! extra ones deleted), each port variant ([`super::variants`]) has a group holding exactly its
//! rules, and the status says so; groups of variants no longer wanted are deleted once the
//! status no longer offers them; on deletion every group is released and both finalizers go.

use std::collections::BTreeSet;

use kuryr_openstack::{SecurityGroupRule, SecurityGroupRuleCreate};
use kuryr_types::{KuryrNetworkPolicySpec, PortVariantGroup, SecurityGroupRule as StatusRule, SgRuleSpec};

use super::variants;

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

    /// One line naming every field (what a port variant's key is computed over).
    pub fn canonical(&self) -> String {
        let o = |v: &Option<String>| v.clone().unwrap_or_default();
        let n = |v: Option<i64>| v.map(|p| p.to_string()).unwrap_or_default();
        format!(
            "{}|{}|{}|{}|{}|{}|{}",
            self.direction,
            self.ethertype,
            o(&self.protocol),
            n(self.port_range_min),
            n(self.port_range_max),
            o(&self.remote_ip_prefix),
            o(&self.remote_group_id)
        )
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
    /// `status.portVariantGroups` as recorded.
    pub recorded_variants: Vec<PortVariantGroup>,
    /// The groups of the spec's variants, by key (those not found in Neutron absent).
    pub variant_groups: std::collections::BTreeMap<String, VariantGroupSeen>,
    /// Recorded variant groups that still exist but whose variant the spec no longer has.
    pub stale_variant_groups: Vec<String>,
}

/// A port variant's group in Neutron.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantGroupSeen {
    /// Group ID.
    pub id: String,
    /// Its rules.
    pub rules: Vec<SecurityGroupRule>,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Put the finalizer on the KuryrNetworkPolicy.
    AddFinalizer,
    /// Create the group.
    CreateGroup,
    /// Create the group of the port variant with this key.
    CreateVariantGroup(String),
    /// Create these rules (one bulk request per 100).
    CreateRules(Vec<SecurityGroupRuleCreate>),
    /// Delete these rules.
    DeleteRules(Vec<String>),
    /// Write `status` from Neutron.
    WriteStatus,
    /// Take the group off pooled ports and delete it.
    ReleaseGroup(String),
    /// Take a no longer wanted variant's group off pooled ports and delete it (Neutron refuses
    /// while a pod still has it: retried until the `pod_label` handler moved them).
    ReleaseVariantGroup(String),
    /// Remove the NetworkPolicy's and then the KuryrNetworkPolicy's finalizer.
    RemoveFinalizers,
}

/// The rules the policy's group must hold: every spec rule except those resolved for some pods
/// only (`affectedPods`, named ingress ports that differ between the selected pods), which go to
/// the groups of the port variants.
pub fn wanted(spec: &KuryrNetworkPolicySpec) -> BTreeSet<RuleKey> {
    spec.ingress_sg_rules
        .iter()
        .chain(&spec.egress_sg_rules)
        .filter(|r| r.affected_pods.is_none())
        .map(RuleKey::of_spec)
        .collect()
}

/// The create bodies of the `missing` rules among `rules`, in group `sg`.
fn creates<'a>(
    rules: impl Iterator<Item = &'a SgRuleSpec>,
    sg: &str,
    missing: &BTreeSet<RuleKey>,
) -> Vec<SecurityGroupRuleCreate> {
    let mut seen = BTreeSet::new();
    rules
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

/// The steps that make group `sg`, holding `have`, hold exactly `want` (from `rules`): missing
/// ones created in one step, extra ones (and duplicates of wanted ones) deleted in one.
fn diff<'a>(
    rules: impl Iterator<Item = &'a SgRuleSpec>,
    want: &BTreeSet<RuleKey>,
    sg: &str,
    have: &[SecurityGroupRule],
) -> Vec<Step> {
    let have_set: BTreeSet<RuleKey> = have.iter().map(RuleKey::of_neutron).collect();
    let missing: BTreeSet<RuleKey> = want.iter().filter(|k| !have_set.contains(k)).cloned().collect();
    let mut kept = BTreeSet::new();
    let extra: Vec<String> = have
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
        steps.push(Step::CreateRules(creates(rules, sg, &missing)));
    }
    if !extra.is_empty() {
        steps.push(Step::DeleteRules(extra));
    }
    steps
}

/// `status.portVariantGroups` as it should read: the spec's variants' groups, then the stale
/// ones still to delete (sorted by key, then ID).
pub fn status_variants(o: &KnpObserved) -> Vec<PortVariantGroup> {
    let mut out: Vec<PortVariantGroup> = o
        .variant_groups
        .iter()
        .map(|(key, g)| PortVariantGroup {
            key: key.clone(),
            security_group_id: g.id.clone(),
        })
        .collect();
    out.extend(
        o.recorded_variants
            .iter()
            .filter(|r| o.stale_variant_groups.contains(&r.security_group_id))
            .cloned(),
    );
    out.sort_by(|a, b| (&a.key, &a.security_group_id).cmp(&(&b.key, &b.security_group_id)));
    out.dedup();
    out
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
        let mut steps: Vec<Step> = o
            .variant_groups
            .values()
            .map(|g| g.id.clone())
            .chain(o.stale_variant_groups.iter().cloned())
            .map(Step::ReleaseVariantGroup)
            .collect();
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
    let main_rules = || {
        o.spec
            .ingress_sg_rules
            .iter()
            .chain(&o.spec.egress_sg_rules)
            .filter(|r| r.affected_pods.is_none())
    };
    let steps = diff(main_rules(), &wanted(&o.spec), group, &o.rules);
    if !steps.is_empty() {
        return Plan::steps("rules differ from the spec", steps, Then::Periodic);
    }
    let mut steps = Vec::new();
    for (key, v) in variants::variants(&o.spec) {
        match o.variant_groups.get(&key) {
            None => steps.push(Step::CreateVariantGroup(key)),
            Some(g) => steps.extend(diff(v.rules.iter(), &v.keys(), &g.id, &g.rules)),
        }
    }
    if !steps.is_empty() {
        return Plan::steps("port variant groups differ from the spec", steps, Then::Periodic);
    }
    let recorded_ok = o.recorded_group.as_deref() == Some(group.as_str())
        && o.recorded_rules == status_rules(&o.rules)
        && o.recorded_selector_current
        && o.recorded_variants == status_variants(o);
    if !recorded_ok {
        return Plan::steps("status behind Neutron", vec![Step::WriteStatus], Then::Periodic);
    }
    // Only once the status no longer offers them to pods (above) are stale groups deleted.
    if !o.stale_variant_groups.is_empty() {
        let steps = o
            .stale_variant_groups
            .iter()
            .map(|g| Step::ReleaseVariantGroup(g.clone()))
            .collect();
        return Plan::steps("port variant groups no longer wanted", steps, Then::Periodic);
    }
    Plan::nothing("security group matches the spec", Then::Periodic)
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
            recorded_variants: vec![],
            variant_groups: Default::default(),
            stale_variant_groups: vec![],
        }
    }

    fn for_pod(mut r: SgRuleSpec, ip: &str) -> SgRuleSpec {
        r.affected_pods = Some(vec![AffectedPod {
            pod_ip: ip.into(),
            pod_namespace: "x".into(),
        }]);
        r
    }

    #[test]
    fn a_port_variant_gets_its_group_its_rules_then_the_status() {
        let main = neutron_rule("r1", "ingress", "10.0.0.1/32", Some(22));
        let mut o = observed(
            vec![
                spec_rule("ingress", "10.0.0.1/32", Some(22)),
                for_pod(spec_rule("ingress", "0.0.0.0/0", Some(8080)), "10.0.0.5"),
            ],
            vec![main],
        );
        let key = variants::key_for_pod(&o.spec, "x", "10.0.0.5").unwrap();
        assert_eq!(plan(&o).steps, vec![Step::CreateVariantGroup(key.clone())]);
        o.variant_groups.insert(
            key.clone(),
            VariantGroupSeen {
                id: "sg-v".into(),
                rules: vec![],
            },
        );
        let p = plan(&o);
        let [Step::CreateRules(c)] = p.steps.as_slice() else {
            panic!("{:?}", p.steps)
        };
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].security_group_id.as_str(), c[0].port_range_min),
            ("sg-v", Some(8080))
        );
        let mut v_rule = neutron_rule("r2", "ingress", "0.0.0.0/0", Some(8080));
        v_rule.security_group_id = "sg-v".into();
        o.variant_groups.get_mut(&key).unwrap().rules = vec![v_rule];
        assert_eq!(plan(&o).steps, vec![Step::WriteStatus]);
        o.recorded_variants = status_variants(&o);
        assert_eq!(
            o.recorded_variants,
            vec![PortVariantGroup {
                key,
                security_group_id: "sg-v".into()
            }]
        );
        assert!(plan(&o).steps.is_empty());
    }

    #[test]
    fn a_variant_no_longer_wanted_leaves_the_status_before_its_group_goes() {
        let mut o = observed(vec![], vec![]);
        let old = PortVariantGroup {
            key: "0123456789ab".into(),
            security_group_id: "sg-old".into(),
        };
        o.recorded_variants = vec![old.clone()];
        o.stale_variant_groups = vec!["sg-old".into()];
        // Still recorded (it exists): nothing to write; the group goes.
        assert_eq!(status_variants(&o), vec![old]);
        assert_eq!(plan(&o).steps, vec![Step::ReleaseVariantGroup("sg-old".into())]);
        // Gone: the status forgets it.
        o.stale_variant_groups.clear();
        assert_eq!(plan(&o).steps, vec![Step::WriteStatus]);
    }

    #[test]
    fn deletion_releases_the_variant_groups_too() {
        let mut o = observed(vec![], vec![]);
        o.deleting = true;
        o.variant_groups.insert(
            "k".into(),
            VariantGroupSeen {
                id: "sg-v".into(),
                rules: vec![],
            },
        );
        o.stale_variant_groups = vec!["sg-old".into()];
        assert_eq!(
            plan(&o).steps,
            vec![
                Step::ReleaseVariantGroup("sg-v".into()),
                Step::ReleaseVariantGroup("sg-old".into()),
                Step::ReleaseGroup("sg".into()),
                Step::RemoveFinalizers
            ]
        );
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
