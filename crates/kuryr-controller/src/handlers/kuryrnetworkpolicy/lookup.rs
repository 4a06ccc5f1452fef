//! Finding a policy's groups in Neutron: the policy's own (recorded, else by upstream's name)
//! and its port variants' (recorded, else by name; recorded ones the spec no longer wants are
//! reported stale), and the names both go by. A recorded group with another cluster's tags is
//! never used, a group found by name only when its tags prove it ours.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use kuryr_core::ownership::{Claim, claim_of};
use kuryr_openstack::SecurityGroupFilter;
use kuryr_types::KuryrNetworkPolicy;

use super::{Error, KnpHandler, MAX_NAME, variants};

/// Upstream's group name for a policy.
pub fn group_name(ns: &str, name: &str) -> String {
    truncated(format!("sg/{ns}-{name}"), MAX_NAME)
}

/// The name of a policy's port variant group: the policy's name (cut so the suffix fits) and
/// `/port-variant-<key>`.
pub fn variant_group_name(ns: &str, name: &str, key: &str) -> String {
    let suffix = format!("/port-variant-{key}");
    let base = truncated(group_name(ns, name), MAX_NAME.saturating_sub(suffix.len()));
    format!("{base}{suffix}")
}

fn truncated(mut n: String, max: usize) -> String {
    if n.len() > max {
        let mut cut = max;
        while !n.is_char_boundary(cut) {
            cut -= 1;
        }
        n.truncate(cut);
    }
    n
}

impl KnpHandler {
    pub(super) async fn find_group(
        &self,
        knp: &KuryrNetworkPolicy,
        key: &str,
    ) -> Result<Option<String>, Error> {
        let nerr = |what| {
            let policy = key.to_string();
            move |source| Error::Neutron { what, policy, source }
        };
        if let Some(id) = knp.status.as_ref().and_then(|s| s.security_group_id.clone()) {
            let f = SecurityGroupFilter {
                ids: vec![id.clone()],
                ..Default::default()
            };
            let found = self
                .neutron
                .list_security_groups(&f)
                .await
                .map_err(nerr("reading the security group"))?;
            match found.iter().find(|g| g.id == id) {
                Some(g) if self.recorded_usable(g) => return Ok(Some(id)),
                Some(g) => {
                    tracing::warn!(policy = %key, group = %g.id, "KuryrNetworkPolicy names a security group that is not this cluster's: not used");
                }
                None => {}
            }
        }
        let f = SecurityGroupFilter {
            name: Some(group_name(&knp.namespace().unwrap_or_default(), &knp.name_any())),
            project_id: self.settings.project_id.clone(),
            ..Default::default()
        };
        let found = self
            .neutron
            .list_security_groups(&f)
            .await
            .map_err(nerr("looking for the security group"))?;
        Ok(found.into_iter().find(|g| self.named_ours(g)).map(|g| g.id))
    }

    /// A group a KuryrNetworkPolicy's status names may be used (its rules rewritten, deleted
    /// with the policy): ours, or untagged (upstream's, switched over); never another cluster's.
    fn recorded_usable(&self, g: &kuryr_openstack::SecurityGroup) -> bool {
        claim_of(&self.settings.tags, &g.tags) != Claim::Foreign
    }

    /// A group found by name only (a creation whose record was lost) is taken only when its
    /// tags prove it ours: another cluster's policy of the same name in the project has a group
    /// of the same name.
    fn named_ours(&self, g: &kuryr_openstack::SecurityGroup) -> bool {
        claim_of(&self.settings.tags, &g.tags) == Claim::Ours
    }
}

impl KnpHandler {
    /// The groups of the spec's port variants (by key: the recorded one if it still exists,
    /// else one found by name) and the recorded groups of variants the spec no longer has that
    /// still exist.
    pub(super) async fn find_variant_groups(
        &self,
        knp: &KuryrNetworkPolicy,
        key: &str,
    ) -> Result<(BTreeMap<String, String>, Vec<String>), Error> {
        let nerr = |what| {
            let policy = key.to_string();
            move |source| Error::Neutron { what, policy, source }
        };
        let wanted = variants::variants(&knp.spec);
        let recorded = knp
            .status
            .as_ref()
            .map(|s| s.port_variant_groups.clone())
            .unwrap_or_default();
        let existing: BTreeSet<String> = if recorded.is_empty() {
            BTreeSet::new()
        } else {
            let f = SecurityGroupFilter {
                ids: recorded.iter().map(|r| r.security_group_id.clone()).collect(),
                ..Default::default()
            };
            self.neutron
                .list_security_groups(&f)
                .await
                .map_err(nerr("reading the port variant groups"))?
                .into_iter()
                .filter(|g| self.recorded_usable(g))
                .map(|g| g.id)
                .collect()
        };
        let mut found = BTreeMap::new();
        for k in wanted.keys() {
            let rec = recorded
                .iter()
                .find(|r| &r.key == k && existing.contains(&r.security_group_id));
            if let Some(r) = rec {
                found.insert(k.clone(), r.security_group_id.clone());
                continue;
            }
            // Made before a crash that lost its record, or not made yet.
            let f = SecurityGroupFilter {
                name: Some(variant_group_name(
                    &knp.namespace().unwrap_or_default(),
                    &knp.name_any(),
                    k,
                )),
                project_id: self.settings.project_id.clone(),
                ..Default::default()
            };
            let by_name = self
                .neutron
                .list_security_groups(&f)
                .await
                .map_err(nerr("looking for a port variant group"))?;
            if let Some(g) = by_name.into_iter().find(|g| self.named_ours(g)) {
                found.insert(k.clone(), g.id);
            }
        }
        let in_use: BTreeSet<&String> = found.values().collect();
        let stale = recorded
            .iter()
            .map(|r| &r.security_group_id)
            .filter(|id| existing.contains(*id) && !in_use.contains(id))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        Ok((found, stale))
    }
}
