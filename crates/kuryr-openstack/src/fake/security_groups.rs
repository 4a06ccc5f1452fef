//! The fake's security groups: groups, rules (a duplicate rule is a Conflict, as in Neutron), a
//! group still on a port cannot be deleted. New groups start empty (the real client deletes
//! Neutron's default egress rules before returning, so callers see the same thing).

use super::*;
use crate::security_group::{
    SecurityGroup, SecurityGroupCreate, SecurityGroupFilter, SecurityGroupRule, SecurityGroupRuleCreate,
    SecurityGroupRuleFilter,
};

/// The fields Neutron compares to call two rules the same.
fn same_rule(a: &SecurityGroupRule, b: &SecurityGroupRuleCreate) -> bool {
    a.security_group_id == b.security_group_id
        && a.direction == b.direction
        && a.ethertype == b.ethertype
        && a.protocol == b.protocol
        && a.port_range_min == b.port_range_min
        && a.port_range_max == b.port_range_max
        && a.remote_ip_prefix == b.remote_ip_prefix
}

pub(super) fn list(st: &State, f: &SecurityGroupFilter) -> Vec<SecurityGroup> {
    st.security_groups
        .values()
        .filter(|g| f.ids.is_empty() || f.ids.contains(&g.id))
        .filter(|g| eq_opt(&f.name, &g.name))
        .filter(|g| eq_opt(&f.project_id, &g.project_id))
        .filter(|g| tags_match(&g.tags, &f.tags, &[], &[]))
        .cloned()
        .collect()
}

pub(super) fn create(st: &mut State, req: &SecurityGroupCreate) -> SecurityGroup {
    let g = SecurityGroup {
        id: st.new_id(),
        name: req.name.clone(),
        description: req.description.clone(),
        project_id: req.project_id.clone().unwrap_or_default(),
        tags: req.tags.clone(),
    };
    st.security_groups.insert(g.id.clone(), g.clone());
    g
}

pub(super) fn delete(st: &mut State, id: &str) -> Result<()> {
    if st
        .ports
        .values()
        .any(|p| p.security_groups.iter().any(|s| s == id))
    {
        return Err(Error::Conflict {
            op: ops::SG_DELETE,
            kind: "SecurityGroupInUse".into(),
            message: format!("Security Group {id} in use."),
        });
    }
    st.security_groups.remove(id);
    st.sg_rules.retain(|_, r| r.security_group_id != id);
    Ok(())
}

pub(super) fn list_rules(st: &State, f: &SecurityGroupRuleFilter) -> Vec<SecurityGroupRule> {
    st.sg_rules
        .values()
        .filter(|r| f.security_group_ids.is_empty() || f.security_group_ids.contains(&r.security_group_id))
        .cloned()
        .collect()
}

pub(super) fn create_rules(
    st: &mut State,
    rules: &[SecurityGroupRuleCreate],
) -> Result<Vec<SecurityGroupRule>> {
    let op = ops::SG_RULE_BULK_CREATE;
    for (i, r) in rules.iter().enumerate() {
        if !st.security_groups.contains_key(&r.security_group_id) {
            return Err(not_found(op, "SecurityGroupNotFound", &r.security_group_id));
        }
        let earlier = rules[..i].iter().any(|e| e == r);
        if earlier || st.sg_rules.values().any(|have| same_rule(have, r)) {
            return Err(Error::Conflict {
                op,
                kind: "SecurityGroupRuleExists".into(),
                message: format!("Security group rule already exists: {r:?}"),
            });
        }
    }
    let mut out = Vec::with_capacity(rules.len());
    for r in rules {
        let rule = SecurityGroupRule {
            id: st.new_id(),
            security_group_id: r.security_group_id.clone(),
            direction: r.direction.clone(),
            ethertype: r.ethertype.clone(),
            protocol: r.protocol.clone(),
            port_range_min: r.port_range_min,
            port_range_max: r.port_range_max,
            remote_ip_prefix: r.remote_ip_prefix.clone(),
            remote_group_id: None,
            description: r.description.clone(),
        };
        st.sg_rules.insert(rule.id.clone(), rule.clone());
        out.push(rule);
    }
    Ok(out)
}
