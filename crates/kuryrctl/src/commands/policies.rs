//! `kuryrctl policies`: every NetworkPolicy as kuryr-rs enforces it — KuryrNetworkPolicy →
//! security group → rules (wanted by the spec, applied per the status, present in Neutron) →
//! the pods it selects — plus the cluster's open-direction groups and the tagged groups no
//! KuryrNetworkPolicy owns (orphans).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use k8s_openapi::api::core::v1::Pod;
use kube::{Client, ResourceExt};
use kuryr_netpol::selector::Selector;
use kuryr_openstack::{Neutron, SecurityGroupFilter, SecurityGroupRuleFilter};
use kuryr_types::KuryrNetworkPolicy;
use serde::Serialize;

use super::list;
use crate::{
    Error,
    cli::Cli,
    output::{self, Row, dash},
};

/// How many selected pods a table cell names.
const NAMED_PODS: usize = 5;

/// One policy (or a group of the cluster's own).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PolicyRow {
    /// `namespace/name` of the policy; for other groups, the group's name.
    pub policy: String,
    /// Its security group (`status.securityGroupId`).
    pub security_group: Option<String>,
    /// The groups of its port variants (`status.portVariantGroups`: named ingress ports some
    /// selected pods resolve differently).
    pub port_variant_groups: Vec<String>,
    /// Rules the spec asks for (the ones one group holds).
    pub rules_wanted: Option<usize>,
    /// Rules the status records as applied.
    pub rules_applied: Option<usize>,
    /// Rules Neutron has in the group (`None`: not asked).
    pub rules_in_neutron: Option<usize>,
    /// Pods the policy selects, `namespace/name`.
    pub pods: Vec<String>,
    /// `ok`, `pending` (no group or rules not all applied yet), `missing` (the group is gone
    /// from Neutron), `rules differ` (Neutron's count is not the applied one), `orphan`,
    /// `open-direction` (the cluster's groups that keep a direction open), or why the selector
    /// cannot be read.
    pub state: String,
}

impl PolicyRow {
    /// Whether this row is a problem (exit code 1).
    pub fn is_problem(&self) -> bool {
        !matches!(self.state.as_str(), "ok" | "open-direction")
    }
}

impl Row for PolicyRow {
    fn headers() -> &'static [&'static str] {
        &[
            "POLICY",
            "SECURITY-GROUP",
            "RULES",
            "NEUTRON",
            "PODS",
            "SELECTED",
            "STATE",
        ]
    }
    fn cells(&self) -> Vec<String> {
        let count = |n: Option<usize>| n.map_or("-".to_string(), |n| n.to_string());
        let rules = match (self.rules_applied, self.rules_wanted) {
            (Some(a), Some(w)) if a != w => format!("{a}/{w}"),
            (a, w) => count(w.or(a)),
        };
        let mut named: Vec<&str> = self.pods.iter().take(NAMED_PODS).map(String::as_str).collect();
        let more = self.pods.len().saturating_sub(NAMED_PODS);
        let more = format!("+{more}");
        if self.pods.len() > NAMED_PODS {
            named.push(&more);
        }
        vec![
            self.policy.clone(),
            match (&self.security_group, self.port_variant_groups.len()) {
                (Some(g), n) if n > 0 => format!("{g} (+{n} port variants)"),
                (g, _) => dash(g.as_deref()),
            },
            rules,
            count(self.rules_in_neutron),
            self.pods.len().to_string(),
            if named.is_empty() {
                "-".into()
            } else {
                named.join(",")
            },
            self.state.clone(),
        ]
    }
}

fn running(p: &Pod) -> bool {
    let host = p.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
    !host && !matches!(phase, "Succeeded" | "Failed") && p.metadata.deletion_timestamp.is_none()
}

/// The rows of `knps` over `pods` (pure): spec and status, the pods each selects.
pub fn rows_of(knps: &[KuryrNetworkPolicy], pods: &[Pod]) -> Vec<PolicyRow> {
    let mut rows: Vec<PolicyRow> = knps
        .iter()
        .map(|k| {
            let ns = k.namespace().unwrap_or_default();
            let st = k.status.clone().unwrap_or_default();
            // Rules for particular pods (`affectedPods`: named ports resolved per pod) are in
            // the port variants' groups, not in the policy's own.
            let wanted = k
                .spec
                .ingress_sg_rules
                .iter()
                .chain(&k.spec.egress_sg_rules)
                .filter(|r| r.affected_pods.is_none())
                .count();
            let sel = st.pod_selector.as_ref().unwrap_or(&k.spec.pod_selector);
            let (selected, state) = match Selector::compile(sel, "spec.podSelector") {
                Ok(s) => {
                    let names: Vec<String> = pods
                        .iter()
                        .filter(|p| p.namespace().as_deref() == Some(ns.as_str()) && running(p))
                        .filter(|p| s.matches(&p.labels().clone()))
                        .map(|p| format!("{ns}/{}", p.name_any()))
                        .collect();
                    let state = if st.security_group_id.is_none() || st.security_group_rules.len() != wanted {
                        "pending"
                    } else {
                        "ok"
                    };
                    (names, state.to_string())
                }
                Err(e) => (Vec::new(), format!("invalid selector: {e}")),
            };
            PolicyRow {
                policy: format!("{ns}/{}", k.name_any()),
                security_group: st.security_group_id.clone(),
                port_variant_groups: st
                    .port_variant_groups
                    .iter()
                    .map(|v| v.security_group_id.clone())
                    .collect(),
                rules_wanted: Some(wanted),
                rules_applied: Some(st.security_group_rules.len()),
                rules_in_neutron: None,
                pods: selected,
                state,
            }
        })
        .collect();
    rows.sort_by(|a, b| a.policy.cmp(&b.policy));
    rows
}

/// Neutron's view (pure): rule counts of the policies' groups, `missing` for a gone group,
/// `rules differ` when Neutron's count is not the applied one; then the tagged groups no policy
/// owns — the open-direction ones by name, the others as orphans.
pub fn with_neutron(
    mut rows: Vec<PolicyRow>,
    tagged: &[(String, String)],
    rule_counts: &BTreeMap<String, usize>,
    existing: &BTreeSet<String>,
) -> Vec<PolicyRow> {
    for r in &mut rows {
        let Some(id) = &r.security_group else { continue };
        if !existing.contains(id) {
            r.state = "missing".into();
            continue;
        }
        let n = rule_counts.get(id).copied().unwrap_or(0);
        r.rules_in_neutron = Some(n);
        if r.state == "ok" && Some(n) != r.rules_applied {
            r.state = "rules differ".into();
        }
    }
    let owned: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.security_group.iter().chain(&r.port_variant_groups))
        .map(String::as_str)
        .collect();
    let mut extra: Vec<PolicyRow> = tagged
        .iter()
        .filter(|(id, _)| !owned.contains(id.as_str()))
        .map(|(id, name)| {
            let open =
                [kuryr_netpol::OPEN_INGRESS_GROUP, kuryr_netpol::OPEN_EGRESS_GROUP].contains(&name.as_str());
            PolicyRow {
                policy: name.clone(),
                security_group: Some(id.clone()),
                port_variant_groups: Vec::new(),
                rules_wanted: None,
                rules_applied: None,
                rules_in_neutron: Some(rule_counts.get(id).copied().unwrap_or(0)),
                pods: Vec::new(),
                state: if open { "open-direction" } else { "orphan" }.into(),
            }
        })
        .collect();
    extra.sort_by(|a, b| a.policy.cmp(&b.policy));
    rows.extend(extra);
    rows
}

/// Prints every policy; asks Neutron unless `no_neutron`. Exit code 1 when a policy is not
/// (yet) enforced as its spec says, its group is missing or differs, or a group is orphaned.
pub async fn run(
    cli: &Cli,
    client: &Client,
    cluster_tag: Option<&str>,
    no_neutron: bool,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let knps: Vec<KuryrNetworkPolicy> = list(client, None, None, "KuryrNetworkPolicies").await?;
    let pods: Vec<Pod> = list(client, None, None, "pods").await?;
    let mut rows = rows_of(&knps, &pods);
    if !no_neutron {
        let config = crate::access::config(&cli.config_file)?;
        let neutron = crate::access::neutron(&config).await?;
        let tags = crate::access::tags(&config, cluster_tag, client).await?;
        let nerr = |what| move |source| Error::Neutron { what, source };
        let mut ids: BTreeSet<String> = rows.iter().filter_map(|r| r.security_group.clone()).collect();
        let tagged: Vec<(String, String)> = if tags.is_empty() {
            Vec::new()
        } else {
            neutron
                .list_security_groups(&SecurityGroupFilter {
                    tags,
                    ..Default::default()
                })
                .await
                .map_err(nerr("security groups"))?
                .into_iter()
                .map(|g| (g.id, g.name))
                .collect()
        };
        ids.extend(tagged.iter().map(|(id, _)| id.clone()));
        let existing: BTreeSet<String> = if ids.is_empty() {
            BTreeSet::new()
        } else {
            neutron
                .list_security_groups(&SecurityGroupFilter {
                    ids: ids.iter().cloned().collect(),
                    ..Default::default()
                })
                .await
                .map_err(nerr("security groups"))?
                .into_iter()
                .map(|g| g.id)
                .collect()
        };
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        if !existing.is_empty() {
            let rules = neutron
                .list_security_group_rules(&SecurityGroupRuleFilter {
                    security_group_ids: existing.iter().cloned().collect(),
                })
                .await
                .map_err(nerr("security group rules"))?;
            for r in rules {
                *counts.entry(r.security_group_id).or_default() += 1;
            }
        }
        rows = with_neutron(rows, &tagged, &counts, &existing);
    }
    output::print(out, cli.output, &rows, Default::default())?;
    Ok(u8::from(rows.iter().any(PolicyRow::is_problem)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kuryr_types::kuryrnetworkpolicy as k;
    use serde_json::json;

    fn pod(ns: &str, name: &str, app: &str) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
            "status": {"phase": "Running"}}),
        )
        .unwrap()
    }

    fn knp(applied: usize) -> KuryrNetworkPolicy {
        let rule = k::SgRuleSpec {
            affected_pods: None,
            namespace: None,
            sg_rule: k::SgRule::default(),
        };
        let mut p = KuryrNetworkPolicy::new(
            "web",
            k::KuryrNetworkPolicySpec {
                egress_sg_rules: vec![],
                ingress_sg_rules: vec![rule.clone(), rule],
                pod_selector: serde_json::from_value(json!({"matchLabels": {"app": "web"}})).unwrap(),
                policy_types: vec!["Ingress".into()],
            },
        );
        p.metadata.namespace = Some("x".into());
        p.status = Some(k::KuryrNetworkPolicyStatus {
            security_group_id: Some("sg1".into()),
            security_group_rules: vec![k::SecurityGroupRule::default(); applied],
            pod_selector: None,
            port_variant_groups: vec![k::PortVariantGroup {
                key: "0123456789ab".into(),
                security_group_id: "sg1-v".into(),
            }],
        });
        p
    }

    #[test]
    fn a_policy_names_its_group_rules_and_selected_pods() {
        let pods = [pod("x", "w1", "web"), pod("x", "db", "db"), pod("y", "w2", "web")];
        let r = &rows_of(&[knp(2)], &pods)[0];
        assert_eq!(r.policy, "x/web");
        assert_eq!(r.pods, ["x/w1"], "its namespace only, by its selector");
        assert_eq!(r.state, "ok");
        assert_eq!(r.cells()[2], "2");
        assert_eq!(r.cells()[1], "sg1 (+1 port variants)");
        let r = &rows_of(&[knp(1)], &pods)[0];
        assert_eq!((r.state.as_str(), r.cells()[2].as_str()), ("pending", "1/2"));
    }

    #[test]
    fn neutron_tells_missing_differing_open_and_orphan_groups() {
        let rows = rows_of(&[knp(2)], &[]);
        let tagged = vec![
            ("sg1".to_string(), "sg/x-web".to_string()),
            (
                "sg1-v".to_string(),
                "sg/x-web/port-variant-0123456789ab".to_string(),
            ),
            ("o1".to_string(), kuryr_netpol::OPEN_INGRESS_GROUP.to_string()),
            ("z9".to_string(), "sg/gone-policy".to_string()),
        ];
        let existing: BTreeSet<String> = ["sg1", "o1", "z9"].map(String::from).into();
        let counts = BTreeMap::from([("sg1".to_string(), 2), ("o1".to_string(), 2)]);
        let r = with_neutron(rows.clone(), &tagged, &counts, &existing);
        let states: Vec<(&str, &str)> = r.iter().map(|r| (r.policy.as_str(), r.state.as_str())).collect();
        assert_eq!(
            states,
            [
                ("x/web", "ok"),
                ("kuryr-rs/open-ingress", "open-direction"),
                ("sg/gone-policy", "orphan")
            ]
        );
        assert!(r[2].is_problem() && !r[1].is_problem() && !r[0].is_problem());
        let fewer = BTreeMap::from([("sg1".to_string(), 1)]);
        assert_eq!(
            with_neutron(rows.clone(), &[], &fewer, &existing)[0].state,
            "rules differ"
        );
        assert_eq!(
            with_neutron(rows, &[], &counts, &BTreeSet::new())[0].state,
            "missing"
        );
    }
}
