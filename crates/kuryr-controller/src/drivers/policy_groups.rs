//! The `policy` security-groups driver's index: which NetworkPolicies select a pod, the groups
//! that implement them (the KuryrNetworkPolicies' `status.securityGroupId`), and the cluster's
//! two open-direction groups. The rule of [`kuryr_netpol::assign`] decides: no policy selects
//! the pod → the default groups; else every selecting policy's group, plus open-ingress when none
//! isolates ingress and open-egress when none isolates egress; a pod whose named ingress ports
//! resolve differently from the other selected pods' also carries its port variant's group
//! (`status.portVariantGroups`). A selecting policy whose group does not exist yet, or does not
//! hold its rules yet, makes the pod wait (no port without the groups it needs, no group on a
//! port before its rules); a variant group not made yet only leaves the pod's own named ports
//! closed for a moment (it only ever adds).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::{Api, ResourceExt};
use kuryr_netpol::{Direction, Policy, SgRule};
use kuryr_openstack::{
    Neutron, SecurityGroupCreate, SecurityGroupFilter, SecurityGroupRuleCreate, SecurityGroupRuleFilter,
};
use kuryr_types::KuryrNetworkPolicy;
use tokio::sync::OnceCell;

use super::{DriverError, Reflected};
use crate::handlers::kuryrnetworkpolicy::variants;

use kuryr_netpol::{OPEN_EGRESS_GROUP as OPEN_EGRESS_NAME, OPEN_INGRESS_GROUP as OPEN_INGRESS_NAME};

/// The cluster's open-direction groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenGroups {
    /// Admits all ingress.
    pub ingress: String,
    /// Admits all egress.
    pub egress: String,
}

/// What the decision needs to know of one policy selecting the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selecting {
    /// `namespace/name` (for the not-ready message).
    pub key: String,
    /// It isolates ingress.
    pub ingress: bool,
    /// It isolates egress.
    pub egress: bool,
    /// Its group, once the KuryrNetworkPolicy handler made it.
    pub group: Option<String>,
    /// The group of the pod's port variant of the policy, if it has one and it is made.
    pub variant_group: Option<String>,
}

/// The groups of a pod's port (sorted, deduplicated); `Err`: the policy whose group is missing.
pub fn groups_for(
    selecting: &[Selecting],
    defaults: &[String],
    open: &OpenGroups,
) -> Result<Vec<String>, String> {
    if selecting.is_empty() {
        return Ok(sorted(defaults.to_vec()));
    }
    let mut out = Vec::with_capacity(selecting.len() + 1);
    for s in selecting {
        out.push(s.group.clone().ok_or_else(|| s.key.clone())?);
        out.extend(s.variant_group.clone());
    }
    if !selecting.iter().any(|s| s.ingress) {
        out.push(open.ingress.clone());
    }
    if !selecting.iter().any(|s| s.egress) {
        out.push(open.egress.clone());
    }
    Ok(sorted(out))
}

/// The recorded group of the port variant of `knp` the pod `(namespace, ip)` needs.
pub fn variant_group(knp: &KuryrNetworkPolicy, namespace: &str, ip: &str) -> Option<String> {
    let key = variants::key_for_pod(&knp.spec, namespace, ip)?;
    knp.status
        .as_ref()?
        .port_variant_groups
        .iter()
        .find(|v| v.key == key)
        .map(|v| v.security_group_id.clone())
}

/// Group IDs sorted and deduplicated (how a port's set is compared).
pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// The driver's state.
pub struct PolicyGroups {
    defaults: Vec<String>,
    policies: Reflected<NetworkPolicy>,
    knps: Reflected<KuryrNetworkPolicy>,
    open: OnceCell<OpenGroups>,
    neutron: Arc<dyn Neutron>,
    client: kube::Client,
    project_id: Option<String>,
    tags: Vec<String>,
}

impl PolicyGroups {
    /// Starts the NetworkPolicy and KuryrNetworkPolicy caches.
    pub fn spawn(
        config: &kuryr_config::Config,
        client: kube::Client,
        neutron: Arc<dyn Neutron>,
    ) -> Result<Self, DriverError> {
        let nd = &config.neutron_defaults;
        let tags = kuryr_core::config::TagPolicy::from_neutron_defaults(nd)
            .map_err(DriverError::Tags)?
            .tags();
        Ok(Self {
            defaults: nd.pod_security_groups.clone(),
            policies: Reflected::spawn(client.clone(), "networkpolicies")?,
            knps: Reflected::spawn(client.clone(), "kuryrnetworkpolicies")?,
            open: OnceCell::new(),
            neutron,
            client,
            project_id: nd.project.clone(),
            tags,
        })
    }

    /// The default groups (`[neutron_defaults] pod_security_groups`).
    pub fn defaults(&self) -> &[String] {
        &self.defaults
    }

    /// Yields after a NetworkPolicy or KuryrNetworkPolicy change is in the caches.
    pub fn changes(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        futures::stream::select(self.policies.changes(), self.knps.changes())
    }

    /// The policies among `nps` that select a pod of `namespace` with `labels` (policies being
    /// deleted and invalid ones select nothing; the policy handler reports the latter).
    pub fn selecting<'a>(
        nps: impl IntoIterator<Item = &'a NetworkPolicy>,
        namespace: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Vec<Policy> {
        nps.into_iter()
            .filter(|np| {
                np.namespace().as_deref() == Some(namespace) && np.metadata.deletion_timestamp.is_none()
            })
            .filter_map(|np| Policy::from_k8s(np).ok())
            .filter(|p| p.selects(namespace, labels))
            .collect()
    }

    /// The groups `pod`'s port must carry. `live` reads the namespace's NetworkPolicies from the
    /// API server instead of the cache: a port about to be handed to a new pod must not miss a
    /// policy created just before the pod (no window); the KuryrNetworkPolicies' groups come
    /// from the cache (one missing there makes the pod wait).
    pub async fn pod_groups(&self, pod: &Pod, live: bool) -> Result<Vec<String>, DriverError> {
        if !self.policies.is_synced() || !self.knps.is_synced() {
            return Err(DriverError::NotReady(
                "the NetworkPolicy caches have not listed yet".into(),
            ));
        }
        let ns = pod.namespace().unwrap_or_default();
        let nps: Vec<NetworkPolicy> = if live {
            Api::<NetworkPolicy>::namespaced(self.client.clone(), &ns)
                .list(&Default::default())
                .await
                .map_err(|source| DriverError::Kube {
                    what: format!("NetworkPolicies of namespace {ns}"),
                    source,
                })?
                .items
        } else {
            self.policies
                .store()
                .state()
                .iter()
                .map(|np| np.as_ref().clone())
                .collect()
        };
        // As the policy handler wrote it into `affectedPods` (parsed and printed again).
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
            .map(|ip| ip.to_string());
        let selecting: Vec<Selecting> = Self::selecting(&nps, &ns, pod.labels())
            .into_iter()
            .map(|p| {
                let knp = self.knps.get(Some(&p.namespace), &p.name);
                Selecting {
                    key: format!("{}/{}", p.namespace, p.name),
                    ingress: p.ingress.is_some(),
                    egress: p.egress.is_some(),
                    // The group once its rules are in (`status.podSelector` is written after
                    // the first full apply): a pod given it earlier would lose the traffic the
                    // policy allows for a moment.
                    group: knp.as_ref().and_then(|k| {
                        let st = k.status.as_ref()?;
                        st.pod_selector.as_ref()?;
                        st.security_group_id.clone()
                    }),
                    variant_group: knp.as_ref().and_then(|k| variant_group(k, &ns, ip.as_deref()?)),
                }
            })
            .collect();
        if selecting.is_empty() {
            // The default groups: no open-direction group needed.
            return Ok(sorted(self.defaults.clone()));
        }
        let open = self.open_groups().await?;
        groups_for(&selecting, &self.defaults, &open).map_err(|policy| {
            DriverError::NotReady(format!("NetworkPolicy {policy} has no security group yet"))
        })
    }

    /// The open-direction groups, found or made once per process.
    pub async fn open_groups(&self) -> Result<OpenGroups, DriverError> {
        self.open
            .get_or_try_init(|| async {
                Ok(OpenGroups {
                    ingress: self.ensure_open(OPEN_INGRESS_NAME, Direction::Ingress).await?,
                    egress: self.ensure_open(OPEN_EGRESS_NAME, Direction::Egress).await?,
                })
            })
            .await
            .cloned()
    }

    async fn ensure_open(&self, name: &str, direction: Direction) -> Result<String, DriverError> {
        let neutron_err = |what: &str| {
            let what = format!("{what} {name}");
            move |source| DriverError::Neutron { what, source }
        };
        let filter = SecurityGroupFilter {
            name: Some(name.into()),
            project_id: self.project_id.clone(),
            tags: self.tags.clone(),
            ..Default::default()
        };
        let found = self
            .neutron
            .list_security_groups(&filter)
            .await
            .map_err(neutron_err("listing"))?;
        let id = match found.into_iter().next() {
            Some(g) => g.id,
            None => {
                let g = self
                    .neutron
                    .create_security_group(&SecurityGroupCreate {
                        name: name.into(),
                        description: format!(
                            "kuryr-rs: admits all {} of pods whose NetworkPolicies isolate only the other direction",
                            direction.neutron()
                        ),
                        project_id: self.project_id.clone(),
                        tags: self.tags.clone(),
                    })
                    .await
                    .map_err(neutron_err("creating"))?;
                tracing::info!(security_group_id = %g.id, name, "open-direction security group created");
                g.id
            }
        };
        let have = self
            .neutron
            .list_security_group_rules(&SecurityGroupRuleFilter {
                security_group_ids: vec![id.clone()],
            })
            .await
            .map_err(neutron_err("listing the rules of"))?;
        let missing: Vec<SecurityGroupRuleCreate> = SgRule::anywhere(direction, None, None)
            .iter()
            .filter(|r| {
                !have.iter().any(|h| {
                    h.direction == r.direction.neutron()
                        && h.ethertype == r.ethertype.neutron()
                        && h.protocol.is_none()
                        && h.remote_ip_prefix.is_none()
                        && h.remote_group_id.is_none()
                        && h.port_range_min.is_none()
                })
            })
            .map(|r| SecurityGroupRuleCreate {
                security_group_id: id.clone(),
                direction: r.direction.neutron().into(),
                ethertype: r.ethertype.neutron().into(),
                description: Some("kuryr-rs open direction".into()),
                ..Default::default()
            })
            .collect();
        if !missing.is_empty() {
            self.neutron
                .create_security_group_rules(&missing)
                .await
                .map_err(neutron_err("adding rules to"))?;
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(key: &str, ingress: bool, egress: bool, group: Option<&str>) -> Selecting {
        Selecting {
            key: key.into(),
            ingress,
            egress,
            group: group.map(str::to_owned),
            variant_group: None,
        }
    }

    fn open() -> OpenGroups {
        OpenGroups {
            ingress: "open-in".into(),
            egress: "open-out".into(),
        }
    }

    #[test]
    fn no_policy_means_the_default_groups() {
        let d = vec!["b".to_string(), "a".to_string(), "a".to_string()];
        assert_eq!(
            groups_for(&[], &d, &open()),
            Ok(vec!["a".to_string(), "b".to_string()])
        );
    }

    #[test]
    fn the_other_direction_stays_open_only_when_no_policy_isolates_it() {
        let ingress_only = [sel("x/a", true, false, Some("sg-a"))];
        assert_eq!(
            groups_for(&ingress_only, &[], &open()),
            Ok(vec!["open-out".into(), "sg-a".into()])
        );
        let both = [
            sel("x/a", true, false, Some("sg-a")),
            sel("x/b", false, true, Some("sg-b")),
        ];
        assert_eq!(
            groups_for(&both, &[], &open()),
            Ok(vec!["sg-a".into(), "sg-b".into()])
        );
        let egress_only = [sel("x/b", false, true, Some("sg-b"))];
        assert_eq!(
            groups_for(&egress_only, &[], &open()),
            Ok(vec!["open-in".into(), "sg-b".into()])
        );
    }

    #[test]
    fn a_port_variant_adds_its_group() {
        let mut a = sel("x/a", true, false, Some("sg-a"));
        a.variant_group = Some("sg-a-v".into());
        assert_eq!(
            groups_for(&[a], &[], &open()),
            Ok(vec!["open-out".into(), "sg-a".into(), "sg-a-v".into()])
        );
    }

    #[test]
    fn the_pod_finds_its_variant_by_namespace_and_address() {
        use kuryr_types::{AffectedPod, KuryrNetworkPolicySpec, PortVariantGroup, SgRule, SgRuleSpec};
        let rule = SgRuleSpec {
            affected_pods: Some(vec![AffectedPod {
                pod_ip: "10.0.0.5".into(),
                pod_namespace: "x".into(),
            }]),
            namespace: None,
            sg_rule: SgRule {
                direction: Some("ingress".into()),
                port_range_min: Some(8080),
                port_range_max: Some(8080),
                protocol: Some("tcp".into()),
                ..Default::default()
            },
        };
        let spec = KuryrNetworkPolicySpec {
            ingress_sg_rules: vec![rule],
            egress_sg_rules: vec![],
            pod_selector: Default::default(),
            policy_types: vec!["Ingress".into()],
        };
        let key = variants::key_for_pod(&spec, "x", "10.0.0.5").unwrap_or_default();
        let mut knp = KuryrNetworkPolicy::new("np", spec);
        assert_eq!(variant_group(&knp, "x", "10.0.0.5"), None, "not made yet");
        knp.status = Some(kuryr_types::KuryrNetworkPolicyStatus {
            port_variant_groups: vec![PortVariantGroup {
                key,
                security_group_id: "sg-v".into(),
            }],
            ..Default::default()
        });
        assert_eq!(variant_group(&knp, "x", "10.0.0.5").as_deref(), Some("sg-v"));
        assert_eq!(variant_group(&knp, "x", "10.0.0.6"), None);
    }

    #[test]
    fn a_policy_without_its_group_makes_the_pod_wait() {
        let s = [
            sel("x/a", true, false, Some("sg-a")),
            sel("x/late", true, false, None),
        ];
        assert_eq!(groups_for(&s, &["d".into()], &open()), Err("x/late".to_string()));
    }
}
