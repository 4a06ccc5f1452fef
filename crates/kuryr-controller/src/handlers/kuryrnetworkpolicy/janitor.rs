//! The security group janitor: a group carrying this cluster's tags and named like a policy's
//! (`sg/…`, the open-direction groups aside) that no KuryrNetworkPolicy owns — by the IDs its
//! status records (the policy's group and its port variants') or by name (a group made but
//! not recorded yet) — seen so on two passes in a row, is taken off pooled ports and deleted.
//! A group a pod's port still carries is refused by Neutron and tried again on the next pass.
//! Such groups are left by a KuryrNetworkPolicy deleted while kuryr-rs was not running with its
//! finalizer removed by hand, or by a crash between a group's creation and its first record
//! once the spec moved on. Only with tags (ownership must be provable), only in the running
//! (leader) controller, every `[vif_pool] ports_pool_janitor_interval` (zero: off), like the
//! port and network janitors.

use std::{
    collections::{BTreeSet, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use kube::{ResourceExt, runtime::reflector::Store};
use kuryr_openstack::{Neutron, SecurityGroup, SecurityGroupFilter};
use kuryr_types::KuryrNetworkPolicy;
use tracing::{debug, info, warn};

use super::{group_name, variant_group_name};
use crate::pool::PortSource;

/// Groups to delete now (orphans seen on the previous pass too), and every orphan seen now,
/// to confirm on the next pass (pure).
pub fn orphan_groups(
    groups: &[SecurityGroup],
    knps: &[KuryrNetworkPolicy],
    seen_before: &HashSet<String>,
) -> (Vec<SecurityGroup>, HashSet<String>) {
    let mut owned_ids: BTreeSet<&str> = BTreeSet::new();
    let mut owned_names: BTreeSet<String> = BTreeSet::new();
    let mut variant_prefixes: Vec<String> = Vec::new();
    for k in knps {
        let (ns, name) = (k.namespace().unwrap_or_default(), k.name_any());
        owned_names.insert(group_name(&ns, &name));
        // Every variant name of this policy: the name with an empty key, less the key.
        variant_prefixes.push(variant_group_name(&ns, &name, ""));
        if let Some(st) = &k.status {
            owned_ids.extend(st.security_group_id.as_deref());
            owned_ids.extend(
                st.port_variant_groups
                    .iter()
                    .map(|v| v.security_group_id.as_str()),
            );
        }
    }
    let open = [kuryr_netpol::OPEN_INGRESS_GROUP, kuryr_netpol::OPEN_EGRESS_GROUP];
    let mut now = HashSet::new();
    let mut delete = Vec::new();
    for g in groups {
        let ours = g.name.starts_with("sg/") && !open.contains(&g.name.as_str());
        let owned = owned_ids.contains(g.id.as_str())
            || owned_names.contains(&g.name)
            || variant_prefixes.iter().any(|p| g.name.starts_with(p.as_str()));
        if !ours || owned {
            continue;
        }
        // Remembered either way: one whose deletion fails (a port still has it) stays confirmed.
        now.insert(g.id.clone());
        if seen_before.contains(&g.id) {
            delete.push(g.clone());
        }
    }
    (delete, now)
}

/// The janitor and its memory between passes.
pub struct Janitor {
    /// Neutron.
    pub neutron: Arc<dyn Neutron>,
    /// The pool (a group goes off pooled ports before it is deleted).
    pub pool: Arc<dyn PortSource>,
    /// The cluster's tags (empty: the janitor does not run).
    pub tags: Vec<String>,
    /// Project of the groups.
    pub project_id: Option<String>,
    seen: Mutex<HashSet<String>>,
}

impl Janitor {
    /// A janitor with no memory yet.
    pub fn new(
        neutron: Arc<dyn Neutron>,
        pool: Arc<dyn PortSource>,
        tags: Vec<String>,
        project_id: Option<String>,
    ) -> Self {
        Self {
            neutron,
            pool,
            tags,
            project_id,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// One pass: lists the tagged groups, deletes the confirmed orphans; returns the deleted
    /// ones' IDs. Failures are logged and retried on the next pass.
    pub async fn sweep(&self, knps: &[KuryrNetworkPolicy]) -> Vec<String> {
        if self.tags.is_empty() {
            return Vec::new();
        }
        let filter = SecurityGroupFilter {
            tags: self.tags.clone(),
            project_id: self.project_id.clone(),
            ..Default::default()
        };
        let groups = match self.neutron.list_security_groups(&filter).await {
            Ok(g) => g,
            Err(e) => {
                warn!(error = %crate::error_chain(&e), "security group janitor: listing groups failed");
                return Vec::new();
            }
        };
        let (delete, candidates) = {
            let seen = self.seen.lock().map(|g| g.clone()).unwrap_or_default();
            orphan_groups(&groups, knps, &seen)
        };
        let mut deleted = Vec::new();
        for g in delete {
            if let Err(e) = self.pool.remove_security_group(&g.id).await {
                warn!(security_group_id = %g.id, error = %crate::error_chain(&e), "security group janitor: taking the group off pooled ports failed");
                continue;
            }
            match self.neutron.delete_security_group(&g.id).await {
                Ok(()) => {
                    info!(security_group_id = %g.id, name = %g.name, "security group janitor: group no KuryrNetworkPolicy owns deleted");
                    deleted.push(g.id);
                }
                Err(kuryr_openstack::Error::Conflict { .. }) => {
                    debug!(security_group_id = %g.id, name = %g.name, "security group janitor: a port still carries the group; next pass");
                }
                Err(e) => {
                    warn!(security_group_id = %g.id, error = %crate::error_chain(&e), "security group janitor: deleting failed");
                }
            }
        }
        if let Ok(mut seen) = self.seen.lock() {
            *seen = candidates;
        }
        deleted
    }

    /// Runs a pass every `interval` over the KuryrNetworkPolicies in `store` until dropped.
    pub async fn run(self, store: Store<KuryrNetworkPolicy>, interval: Duration) {
        if self.tags.is_empty() || interval.is_zero() {
            if self.tags.is_empty() {
                warn!("no resource_tags/cluster_tag: the security group janitor does not run");
            }
            return std::future::pending().await;
        }
        if store.wait_until_ready().await.is_err() {
            return;
        }
        loop {
            tokio::time::sleep(interval).await;
            let knps: Vec<KuryrNetworkPolicy> = store
                .state()
                .iter()
                .map(|k| KuryrNetworkPolicy::clone(k))
                .collect();
            self.sweep(&knps).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_types::{KuryrNetworkPolicySpec, KuryrNetworkPolicyStatus, PortVariantGroup};

    fn group(id: &str, name: &str) -> SecurityGroup {
        SecurityGroup {
            id: id.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    fn knp(ns: &str, name: &str, id: Option<&str>, variants: &[&str]) -> KuryrNetworkPolicy {
        let mut k = KuryrNetworkPolicy::new(
            name,
            KuryrNetworkPolicySpec {
                egress_sg_rules: vec![],
                ingress_sg_rules: vec![],
                pod_selector: Default::default(),
                policy_types: vec![],
            },
        );
        k.metadata.namespace = Some(ns.into());
        k.status = Some(KuryrNetworkPolicyStatus {
            security_group_id: id.map(Into::into),
            port_variant_groups: variants
                .iter()
                .map(|v| PortVariantGroup {
                    key: format!("key-{v}"),
                    security_group_id: (*v).into(),
                })
                .collect(),
            ..Default::default()
        });
        k
    }

    #[test]
    fn orphans_are_confirmed_on_the_second_pass_and_owned_groups_are_never_candidates() {
        let groups = [
            group("used", "sg/x-web"),
            group("renamed-but-recorded", "something else/sg"),
            group("variant", "sg/x-web/port-variant-0123456789ab"),
            group("recorded-variant", "sg/x-db/port-variant-aaaaaaaaaaaa"),
            group("unrecorded", "sg/x-new"),
            group("orphan", "sg/x-gone"),
            group("orphan-variant", "sg/x-gone/port-variant-0123456789ab"),
            group("open", kuryr_netpol::OPEN_INGRESS_GROUP),
            group("foreign", "default"),
        ];
        let knps = [
            knp("x", "web", Some("used"), &[]),
            knp("x", "db", Some("db-sg"), &["recorded-variant"]),
            knp("x", "new", None, &[]),
        ];
        let (delete, seen) = orphan_groups(&groups, &knps, &HashSet::new());
        assert!(delete.is_empty(), "one pass only makes candidates");
        assert_eq!(
            seen,
            HashSet::from(["orphan".to_string(), "orphan-variant".to_string()])
        );
        let (delete, seen) = orphan_groups(&groups, &knps, &seen);
        let ids: Vec<&str> = delete.iter().map(|g| g.id.as_str()).collect();
        assert_eq!(ids, ["orphan", "orphan-variant"]);
        assert_eq!(seen.len(), 2, "still remembered, should a deletion fail");
        // A policy named like the orphan appears meanwhile: kept.
        let more = [knps[0].clone(), knp("x", "gone", None, &[])];
        let (delete, _) = orphan_groups(&groups, &more, &HashSet::from(["orphan".to_string()]));
        assert!(delete.is_empty());
    }

    #[tokio::test]
    async fn a_sweep_deletes_confirmed_orphans_only() {
        use kuryr_openstack::{SecurityGroupCreate, fake::FakeNeutron};
        let fake = Arc::new(FakeNeutron::new());
        let tags = vec!["cluster".to_string()];
        let mut ids = Vec::new();
        for name in ["sg/x-web", "sg/x-gone"] {
            let g = fake
                .create_security_group(&SecurityGroupCreate {
                    name: name.into(),
                    description: String::new(),
                    project_id: None,
                    tags: tags.clone(),
                })
                .await
                .expect("create");
            ids.push(g.id);
        }
        let settings = crate::pool::PoolSettings {
            mode: crate::pool::PoolMode::Noop,
            pool: Default::default(),
            tags: kuryr_core::config::TagPolicy::new(vec![], None).expect("tags"),
            project: None,
            ovs_bridge: None,
            janitor_interval: Duration::ZERO,
            janitor_min_age: Duration::ZERO,
            nested: None,
            multi: None,
            activation: Default::default(),
            vif_driver: "neutron-vif".into(),
            pair_update_attempts: 3,
        };
        let pool = crate::pool::direct::Direct::new(settings, fake.clone());
        let j = Janitor::new(fake.clone(), pool, tags, None);
        let knps = [knp("x", "web", Some(&ids[0]), &[])];
        assert!(j.sweep(&knps).await.is_empty());
        assert_eq!(j.sweep(&knps).await, [ids[1].clone()]);
        let left = fake
            .list_security_groups(&SecurityGroupFilter::default())
            .await
            .expect("list");
        assert_eq!(
            left.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
            ["sg/x-web"]
        );
    }
}
