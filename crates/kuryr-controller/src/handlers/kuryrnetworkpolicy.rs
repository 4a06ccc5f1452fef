//! The KuryrNetworkPolicy handler (upstream's `KuryrNetworkPolicyHandler`, `enabled_handlers`
//! name `kuryrnetworkpolicy`): one Neutron security group per policy (`sg/<ns>-<name>`, found by
//! name again after a crash or when upstream made it), holding exactly the spec's rules — the
//! missing ones created in bulk, the extra ones deleted — and a status that says which group
//! and which rules. Named ingress ports that resolve differently on different selected pods get
//! one more group per resolution (`sg/<ns>-<name>/port-variant-<key>`, recorded in
//! `status.portVariantGroups`, a kuryr-rs addition). Which pods carry which group is the
//! `pod_label` handler's business. On deletion the groups are taken off pooled ports and deleted
//! (Neutron refuses while a pod's port still has one: retried until the `pod_label` handler has
//! moved every pod), then the NetworkPolicy's and the KuryrNetworkPolicy's finalizers go.

pub mod janitor;
mod lookup;
pub mod plan;
pub mod variants;

pub use lookup::{group_name, variant_group_name};

use std::sync::Arc;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{Controller, watcher},
};
use kuryr_openstack::{Neutron, SecurityGroupCreate, SecurityGroupRuleFilter};
use kuryr_types::{KuryrNetworkPolicy, constants::NETWORKPOLICY_FINALIZER};
use serde_json::json;
use tracing::info;

use self::plan::{KnpObserved, KnpSettings, Step, VariantGroupSeen};
use super::scaffold::{self, ErrorKind, Flow, Handler, HandlerError, Plan, kube_kind};
use crate::{Context, finalizer, pool::PortSource};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "kuryrnetworkpolicy";

/// Neutron's limit on names.
const MAX_NAME: usize = 255;

/// A failed step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes call failed.
    #[error("{what} for KuryrNetworkPolicy {policy}")]
    Kube {
        /// What was done.
        what: &'static str,
        /// namespace/name.
        policy: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// A Neutron call failed.
    #[error("{what} for KuryrNetworkPolicy {policy}")]
    Neutron {
        /// What was done.
        what: &'static str,
        /// namespace/name.
        policy: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Taking the group off pooled ports failed.
    #[error("taking the group of KuryrNetworkPolicy {policy} off pooled ports")]
    Pool {
        /// namespace/name.
        policy: String,
        /// Cause.
        #[source]
        source: crate::pool::Error,
    },
}

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Kube { source, .. } => kube_kind(source),
            // "In use" while pods still carry the group is the expected wait: retried soon,
            // logged at debug.
            Error::Neutron {
                source: kuryr_openstack::Error::Conflict { .. },
                ..
            } => ErrorKind::Conflict,
            Error::Neutron { source, .. } if source.is_retryable() => ErrorKind::Transient,
            Error::Neutron { .. } => ErrorKind::Invalid,
            Error::Pool { .. } => ErrorKind::Transient,
        }
    }
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kubernetes",
            Error::Neutron { .. } => "neutron",
            Error::Pool { .. } => "pool",
        }
    }
    fn event_reason(&self) -> Option<&'static str> {
        match self {
            Error::Neutron {
                source: kuryr_openstack::Error::Conflict { .. },
                ..
            } => None,
            _ if self.kind() == ErrorKind::Conflict => None,
            _ => Some("KuryrEnsureNetworkPolicyError"),
        }
    }
}

/// The handler.
pub struct KnpHandler {
    client: kube::Client,
    neutron: Arc<dyn Neutron>,
    pool: Arc<dyn PortSource>,
    settings: KnpSettings,
}

impl KnpHandler {
    /// Takes group `id` off pooled ports and deletes it (Neutron refuses while a pod's port
    /// still has it: a `Conflict`, retried).
    async fn release(&self, policy: &str, id: &str, what: &'static str) -> Result<(), Error> {
        self.pool
            .remove_security_group(id)
            .await
            .map_err(|source| Error::Pool {
                policy: policy.to_string(),
                source,
            })?;
        self.neutron
            .delete_security_group(id)
            .await
            .map_err(|source| Error::Neutron {
                what,
                policy: policy.to_string(),
                source,
            })
    }
}

impl Handler for KnpHandler {
    type Object = KuryrNetworkPolicy;
    type Observed = (Arc<KuryrNetworkPolicy>, KnpObserved);
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    /// Failures (a quota, Neutron down) are told on the NetworkPolicy, where its author looks.
    fn event_target(&self, knp: &KuryrNetworkPolicy) -> k8s_openapi::api::core::v1::ObjectReference {
        k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("networking.k8s.io/v1".into()),
            kind: Some("NetworkPolicy".into()),
            namespace: knp.namespace(),
            name: Some(knp.name_any()),
            uid: knp
                .owner_references()
                .iter()
                .find(|o| o.kind == "NetworkPolicy")
                .map(|o| o.uid.clone()),
            ..Default::default()
        }
    }

    async fn observe(&self, knp: &Arc<KuryrNetworkPolicy>, _live: bool) -> Result<Self::Observed, Error> {
        let ns = knp.namespace().unwrap_or_default();
        let key = format!("{ns}/{}", knp.name_any());
        let group = self.find_group(knp, &key).await?;
        let status = knp.status.clone().unwrap_or_default();
        let (variant_ids, stale_variant_groups) = self.find_variant_groups(knp, &key).await?;
        let ids: Vec<String> = group.iter().chain(variant_ids.values()).cloned().collect();
        let mut rules = if ids.is_empty() {
            Vec::new()
        } else {
            self.neutron
                .list_security_group_rules(&SecurityGroupRuleFilter {
                    security_group_ids: ids,
                })
                .await
                .map_err(|source| Error::Neutron {
                    what: "listing the rules",
                    policy: key.clone(),
                    source,
                })?
        };
        let variant_groups = variant_ids
            .into_iter()
            .map(|(k, id)| {
                let (mine, rest) = rules.drain(..).partition(|r| r.security_group_id == id);
                rules = rest;
                (k, VariantGroupSeen { id, rules: mine })
            })
            .collect();
        let deleting = knp.metadata.deletion_timestamp.is_some();
        let policy_exists = deleting
            && Api::<NetworkPolicy>::namespaced(self.client.clone(), &ns)
                .get_opt(&knp.name_any())
                .await
                .map_err(|source| Error::Kube {
                    what: "reading the NetworkPolicy",
                    policy: key.clone(),
                    source,
                })?
                .is_some_and(|np| np.finalizers().iter().any(|f| f == NETWORKPOLICY_FINALIZER));
        let observed = KnpObserved {
            key,
            deleting,
            has_finalizer: knp.finalizers().iter().any(|f| f == NETWORKPOLICY_FINALIZER),
            spec: knp.spec.clone(),
            recorded_group: status.security_group_id.clone(),
            recorded_rules: status.security_group_rules.clone(),
            recorded_selector_current: status.pod_selector.as_ref() == Some(&knp.spec.pod_selector),
            group,
            rules,
            policy_exists,
            recorded_variants: status.port_variant_groups.clone(),
            variant_groups,
            stale_variant_groups,
        };
        Ok((knp.clone(), observed))
    }

    fn plan(&self, o: &Self::Observed) -> Plan<Step> {
        plan::plan(&o.1)
    }

    async fn execute(&self, o: &Self::Observed, step: Step) -> Result<Flow<Self::Observed>, Error> {
        let (knp, seen) = o;
        let ns = knp.namespace().unwrap_or_default();
        let key = seen.key.clone();
        let kerr = |what: &'static str| {
            let policy = key.clone();
            move |source| Error::Kube { what, policy, source }
        };
        let nerr = |what: &'static str| {
            let policy = key.clone();
            move |source| Error::Neutron { what, policy, source }
        };
        let knps: Api<KuryrNetworkPolicy> = Api::namespaced(self.client.clone(), &ns);
        match step {
            Step::AddFinalizer => {
                finalizer::add(&knps, knp.as_ref(), NETWORKPOLICY_FINALIZER)
                    .await
                    .map_err(kerr("adding the finalizer"))?;
            }
            Step::CreateGroup => {
                let g = self
                    .neutron
                    .create_security_group(&SecurityGroupCreate {
                        name: group_name(&ns, &knp.name_any()),
                        description: format!("Kuryr-Kubernetes Network Policy {key} SG"),
                        project_id: self.settings.project_id.clone(),
                        tags: self.settings.tags.clone(),
                    })
                    .await
                    .map_err(nerr("creating the security group"))?;
                info!(policy = %key, security_group_id = %g.id, "security group created");
                // Recorded at once: a crash before the next write still finds it by name.
                let p = json!({ "status": { "securityGroupId": g.id, "securityGroupRules": [] } });
                knps.patch(&knp.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                    .await
                    .map_err(kerr("recording the security group"))?;
                let mut next = seen.clone();
                next.group = Some(g.id.clone());
                next.recorded_group = Some(g.id);
                next.recorded_rules = Vec::new();
                next.rules = Vec::new();
                return Ok(Flow::Replan((knp.clone(), next)));
            }
            Step::CreateRules(rules) => {
                let created = self
                    .neutron
                    .create_security_group_rules(&rules)
                    .await
                    .map_err(nerr("creating security group rules"))?;
                info!(policy = %key, rules = created.len(), "security group rules created");
                let mut next = seen.clone();
                for r in created {
                    match next
                        .variant_groups
                        .values_mut()
                        .find(|g| g.id == r.security_group_id)
                    {
                        Some(g) => g.rules.push(r),
                        None => next.rules.push(r),
                    }
                }
                return Ok(Flow::Replan((knp.clone(), next)));
            }
            Step::DeleteRules(ids) => {
                let results = futures::future::join_all(
                    ids.iter().map(|id| self.neutron.delete_security_group_rule(id)),
                )
                .await;
                let mut next = seen.clone();
                let mut first_err = None;
                for (id, r) in ids.iter().zip(results) {
                    match r {
                        Ok(()) => {
                            next.rules.retain(|x| &x.id != id);
                            for g in next.variant_groups.values_mut() {
                                g.rules.retain(|x| &x.id != id);
                            }
                        }
                        Err(e) => {
                            first_err.get_or_insert(e);
                        }
                    }
                }
                if let Some(e) = first_err {
                    return Err(nerr("deleting security group rules")(e));
                }
                info!(policy = %key, rules = ids.len(), "security group rules deleted");
                return Ok(Flow::Replan((knp.clone(), next)));
            }
            Step::CreateVariantGroup(variant) => {
                let g = self
                    .neutron
                    .create_security_group(&SecurityGroupCreate {
                        name: variant_group_name(&ns, &knp.name_any(), &variant),
                        description: format!(
                            "kuryr-rs: Network Policy {key}, named ingress ports of the pods that resolve them as port variant {variant}"
                        ),
                        project_id: self.settings.project_id.clone(),
                        tags: self.settings.tags.clone(),
                    })
                    .await
                    .map_err(nerr("creating a port variant group"))?;
                info!(policy = %key, variant = %variant, security_group_id = %g.id, "port variant group created");
                let mut next = seen.clone();
                next.variant_groups.insert(
                    variant,
                    VariantGroupSeen {
                        id: g.id,
                        rules: Vec::new(),
                    },
                );
                // Recorded at once (a crash before the next write still finds it by name, but
                // not once the spec moved on): pods get it only when their variant wants it,
                // and a group with some of its rules only opens less.
                let p = json!({ "status": { "portVariantGroups": plan::status_variants(&next) } });
                knps.patch(&knp.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                    .await
                    .map_err(kerr("recording a port variant group"))?;
                next.recorded_variants = plan::status_variants(&next);
                return Ok(Flow::Replan((knp.clone(), next)));
            }
            Step::ReleaseVariantGroup(id) => {
                self.release(&key, &id, "deleting a port variant group").await?;
                info!(policy = %key, security_group_id = %id, "port variant group deleted");
                let mut next = seen.clone();
                next.variant_groups.retain(|_, g| g.id != id);
                next.stale_variant_groups.retain(|g| g != &id);
                return Ok(Flow::Replan((knp.clone(), next)));
            }
            Step::WriteStatus => {
                let p = json!({ "status": {
                    "securityGroupId": seen.group,
                    "securityGroupRules": plan::status_rules(&seen.rules),
                    "podSelector": knp.spec.pod_selector,
                    "portVariantGroups": plan::status_variants(seen),
                } });
                knps.patch(&knp.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                    .await
                    .map_err(kerr("writing the status"))?;
            }
            Step::ReleaseGroup(id) => {
                self.release(&key, &id, "deleting the security group").await?;
                info!(policy = %key, security_group_id = %id, "security group deleted");
            }
            Step::RemoveFinalizers => {
                let nps: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), &ns);
                if let Some(np) = nps
                    .get_opt(&knp.name_any())
                    .await
                    .map_err(kerr("reading the NetworkPolicy"))?
                {
                    finalizer::remove(&nps, &np, NETWORKPOLICY_FINALIZER)
                        .await
                        .map_err(kerr("removing the NetworkPolicy finalizer"))?;
                }
                finalizer::remove(&knps, knp.as_ref(), NETWORKPOLICY_FINALIZER)
                    .await
                    .map_err(kerr("removing the finalizer"))?;
            }
        }
        Ok(Flow::Next)
    }
}

/// Runs the handler on every KuryrNetworkPolicy.
pub async fn start(ctx: Arc<Context>) {
    let Some(os) = ctx.openstack.as_ref() else {
        tracing::error!(handler = HANDLER, "cannot start without OpenStack");
        return ctx.health.handler_died(HANDLER);
    };
    // Validated with the pool settings at start-up.
    let tags = os.pool.settings().tags.tags();
    let handler = Arc::new(KnpHandler {
        client: ctx.client.clone(),
        neutron: os.neutron.clone(),
        pool: os.pool.clone(),
        settings: KnpSettings {
            project_id: ctx.config.neutron_defaults.project.clone(),
            tags,
        },
    });
    let controller = Controller::new(
        Api::<KuryrNetworkPolicy>::all(ctx.client.clone()),
        watcher::Config::default(),
    );
    let janitor = janitor::Janitor::new(
        handler.neutron.clone(),
        handler.pool.clone(),
        handler.settings.tags.clone(),
        handler.settings.project_id.clone(),
    )
    .run(
        controller.store(),
        ctx.config.vif_pool.ports_pool_janitor_interval,
    );
    scaffold::run(ctx, handler, controller, async {}, janitor).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status naming another cluster's group (or another cluster's group named like ours):
    /// never taken, so its rules are never rewritten and it is never deleted with the policy;
    /// our own and an untagged recorded one (upstream's, switched over) are.
    #[tokio::test]
    async fn another_clusters_group_is_never_taken() {
        use kuryr_openstack::{SecurityGroupCreate, fake::FakeNeutron};
        let fake = FakeNeutron::new();
        let group = async |name: &str, tags: &[&str]| {
            fake.create_security_group(&SecurityGroupCreate {
                name: name.into(),
                description: String::new(),
                project_id: Some("proj".into()),
                tags: tags.iter().map(|t| t.to_string()).collect(),
            })
            .await
            .expect("group")
            .id
        };
        let theirs = group("sg/x-deny", &["kuryr-cluster=theirs"]).await;
        let untagged = group("sg/x-old", &[]).await;
        let ours = group("sg/x-mine", &["kuryr-cluster=ours"]).await;
        // Never contacted: the lookup only reads Neutron.
        let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().expect("url")))
            .expect("client");
        let fake_arc: Arc<dyn Neutron> = Arc::new(fake.clone());
        let h = KnpHandler {
            client,
            neutron: fake_arc.clone(),
            pool: crate::pool::direct::Direct::new(
                crate::pool::tests::settings(crate::pool::PoolMode::Noop),
                fake_arc,
            ),
            settings: KnpSettings {
                project_id: Some("proj".into()),
                tags: vec!["kuryr-cluster=ours".into()],
            },
        };
        let knp = |name: &str, recorded: Option<&str>| {
            let mut k: KuryrNetworkPolicy = serde_json::from_value(serde_json::json!({
                "apiVersion": "openstack.org/v1", "kind": "KuryrNetworkPolicy",
                "metadata": {"namespace": "x", "name": name},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                         "ingressSgRules": [], "egressSgRules": []}}))
            .expect("knp");
            if let Some(id) = recorded {
                k.status = serde_json::from_value(serde_json::json!({
                    "securityGroupId": id, "securityGroupRules": [], "podSelector": {}}))
                .expect("status");
            }
            k
        };
        // Recorded: theirs refused, then not found by name either (its tags are not ours).
        assert_eq!(
            h.find_group(&knp("deny", Some(&theirs)), "x/deny")
                .await
                .expect("find"),
            None
        );
        assert_eq!(
            h.find_group(&knp("deny", None), "x/deny").await.expect("find"),
            None
        );
        // Recorded and untagged: upstream's, taken over. Recorded and ours: ours.
        assert_eq!(
            h.find_group(&knp("old", Some(&untagged)), "x/old")
                .await
                .expect("find"),
            Some(untagged.clone())
        );
        assert_eq!(
            h.find_group(&knp("mine", None), "x/mine").await.expect("find"),
            Some(ours)
        );
        // By name only, an untagged group is not proof enough.
        assert_eq!(
            h.find_group(&knp("old", None), "x/old").await.expect("find"),
            None
        );
        assert!(
            fake.security_groups().iter().any(|g| g.id == theirs),
            "theirs is untouched"
        );
    }

    #[test]
    fn group_names_are_upstreams_and_fit_neutron() {
        assert_eq!(group_name("x", "deny"), "sg/x-deny");
        let long = "é".repeat(200);
        let n = group_name("x", &long);
        assert!(n.len() <= MAX_NAME && n.starts_with("sg/x-"));
        assert_eq!(
            variant_group_name("x", "web", "0123456789ab"),
            "sg/x-web/port-variant-0123456789ab"
        );
        let v = variant_group_name("x", &long, "0123456789ab");
        assert!(
            v.len() <= MAX_NAME && v.ends_with("/port-variant-0123456789ab"),
            "{v}"
        );
    }
}
