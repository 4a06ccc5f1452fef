//! Which security groups each pod's port carries, and what each group holds.
//!
//! Neutron admits a packet when *any* group on the port has a rule for it; Kubernetes admits it
//! in a direction when the pod is selected by no policy isolating that direction, or when some
//! policy isolating it allows the packet. The two agree when a pod carries:
//! * nothing of ours when no policy selects it: `[neutron_defaults] pod_security_groups`;
//! * otherwise the group of every policy selecting it (holding only the directions that policy
//!   isolates), plus the cluster's *open-ingress* group when none of them isolates ingress and
//!   the *open-egress* group when none isolates egress.
//!
//! Upstream instead wrote allow-all egress rules into the group of an ingress-only policy, so a
//! pod selected by that and by an egress-only policy had its egress open. A policy whose named
//! ingress ports resolve differently on different pods gets one group per resolution
//! ([`Variant`]); the common case is one group per policy.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Cluster, PodKey};
use crate::policy::Policy;
use crate::rule::{Direction, SgRule};
use crate::translate::{Translation, translate};

/// The resolution-specific ingress rules that set a policy's group for some pods apart; the
/// empty variant is the policy's main group.
pub type Variant = BTreeSet<SgRule>;

/// A security group kuryr-rs manages.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// The group of a policy (one variant of it).
    Policy {
        /// Policy namespace.
        namespace: String,
        /// Policy name.
        name: String,
        /// Which resolution of its named ports.
        variant: Variant,
    },
    /// Admits all ingress.
    OpenIngress,
    /// Admits all egress.
    OpenEgress,
}

/// The groups of one pod's port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodGroups {
    /// No policy selects the pod: the configured default groups.
    Default,
    /// These groups.
    Groups(BTreeSet<Group>),
}

/// Every policy of the cluster translated, and every pod's groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Rules of each group.
    pub groups: BTreeMap<Group, BTreeSet<SgRule>>,
    /// Groups of each pod.
    pub pods: BTreeMap<PodKey, PodGroups>,
    /// The translations, by (namespace, name).
    pub translations: BTreeMap<(String, String), Translation>,
}

/// The variant of a policy's group a selected pod needs.
pub fn variant_of(t: &Translation, pod: &PodKey) -> Variant {
    t.ingress
        .iter()
        .flatten()
        .filter(|e| e.only_for.as_ref().is_some_and(|s| s.contains(pod)))
        .map(|e| e.rule.clone())
        .collect()
}

/// The rules of one variant of a policy's group.
pub fn group_rules(t: &Translation, variant: &Variant) -> BTreeSet<SgRule> {
    let general = t
        .ingress
        .iter()
        .chain(t.egress.iter())
        .flatten()
        .filter(|e| e.only_for.is_none());
    general
        .map(|e| e.rule.clone())
        .chain(variant.iter().cloned())
        .collect()
}

/// The rules of the open-direction groups.
pub fn open_rules(direction: Direction) -> BTreeSet<SgRule> {
    SgRule::anywhere(direction, None, None).into_iter().collect()
}

/// Translates every policy and assigns groups to every pod.
pub fn plan(cluster: &Cluster, policies: &[Policy]) -> Plan {
    let mut out = Plan::default();
    for p in policies {
        out.translations
            .insert((p.namespace.clone(), p.name.clone()), translate(p, cluster));
    }
    for pod in &cluster.pods {
        let selecting: Vec<&Policy> = policies
            .iter()
            .filter(|p| p.selects(&pod.key.namespace, &pod.labels))
            .collect();
        if selecting.is_empty() {
            out.pods.insert(pod.key.clone(), PodGroups::Default);
            continue;
        }
        let mut groups = BTreeSet::new();
        for p in &selecting {
            let Some(t) = out.translations.get(&(p.namespace.clone(), p.name.clone())) else {
                continue;
            };
            let variant = variant_of(t, &pod.key);
            let rules = group_rules(t, &variant);
            let g = Group::Policy {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                variant,
            };
            out.groups.entry(g.clone()).or_insert(rules);
            groups.insert(g);
        }
        if !selecting.iter().any(|p| p.ingress.is_some()) {
            out.groups
                .entry(Group::OpenIngress)
                .or_insert_with(|| open_rules(Direction::Ingress));
            groups.insert(Group::OpenIngress);
        }
        if !selecting.iter().any(|p| p.egress.is_some()) {
            out.groups
                .entry(Group::OpenEgress)
                .or_insert_with(|| open_rules(Direction::Egress));
            groups.insert(Group::OpenEgress);
        }
        out.pods.insert(pod.key.clone(), PodGroups::Groups(groups));
    }
    out
}

impl Plan {
    /// Whether Neutron lets a packet through `pod`'s port in `direction` with these groups
    /// (`Default` groups are taken to admit everything, as upstream asked of them).
    pub fn admits(
        &self,
        pod: &PodKey,
        direction: Direction,
        remote: std::net::IpAddr,
        proto: crate::Proto,
        port: u16,
    ) -> bool {
        match self.pods.get(pod) {
            None | Some(PodGroups::Default) => true,
            Some(PodGroups::Groups(gs)) => gs.iter().any(|g| {
                self.groups
                    .get(g)
                    .is_some_and(|rules| rules.iter().any(|r| r.admits(direction, remote, proto, port)))
            }),
        }
    }
}
