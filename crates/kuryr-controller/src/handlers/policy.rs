//! The NetworkPolicy handler (upstream's `NetworkPolicyHandler`, `enabled_handlers` name
//! `policy`): each NetworkPolicy is translated ([`kuryr_netpol`]) against the cluster as the
//! caches show it — pods, namespaces, Services — into the spec of its KuryrNetworkPolicy (same
//! name, owned by the policy, upstream's finalizer and `networkPolicyLink`). Any change of a
//! pod, namespace or Service looks at every policy again (triggered by the caches the
//! translation reads, once they hold the change); an unchanged translation writes nothing. A deleted policy deletes its KuryrNetworkPolicy, whose handler releases the group
//! and both finalizers. Upstream instead "bumped" policies with an annotation from the other
//! handlers and recomputed them fully.

pub mod cluster;
#[cfg(test)]
mod fuzz;
pub mod plan;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::{Controller, watcher},
};
use kuryr_netpol::{Cluster, Policy};
use kuryr_types::{
    KuryrNetworkPolicy, KuryrNetworkPolicySpec, KuryrNetworkPolicyStatus,
    constants::{ANNOTATION_NETWORK_POLICY_LINK, NETWORKPOLICY_FINALIZER},
};
use serde_json::json;
use tracing::{debug, error, info};

use self::plan::{KnpSeen, NpObserved, Step};
use super::scaffold::{self, ErrorKind, Flow, Handler, HandlerError, Plan, api_code, kube_kind};
use crate::{Context, drivers::Reflected, finalizer};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "policy";

/// A failed step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes call failed.
    #[error("{what} for NetworkPolicy {policy}")]
    Kube {
        /// What was done.
        what: &'static str,
        /// namespace/name.
        policy: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// The policy cannot be translated (the API server should have refused it).
    #[error("NetworkPolicy {policy} is not valid")]
    Invalid {
        /// namespace/name.
        policy: String,
        /// What is wrong.
        #[source]
        source: kuryr_netpol::PolicyError,
    },
    /// A cache has not listed yet.
    #[error("caches not listed yet")]
    NotSynced,
    /// The translation has more rules than `[neutron_defaults] max_sg_rules_per_policy`.
    #[error(
        "NetworkPolicy {policy} translates to {rules} security-group rules, more than [neutron_defaults] \
         max_sg_rules_per_policy = {max}: not applied (select peers by namespace or CIDR, or raise the bound)"
    )]
    TooLarge {
        /// namespace/name.
        policy: String,
        /// Rules of the translation.
        rules: usize,
        /// The bound.
        max: usize,
    },
}

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Kube { source, .. } => kube_kind(source),
            Error::Invalid { .. } | Error::TooLarge { .. } => ErrorKind::Invalid,
            Error::NotSynced => ErrorKind::Transient,
        }
    }
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kubernetes",
            Error::Invalid { .. } => "invalid",
            Error::TooLarge { .. } => "too_large",
            Error::NotSynced => "not_synced",
        }
    }
    fn event_reason(&self) -> Option<&'static str> {
        match self {
            Error::NotSynced => None,
            Error::Invalid { .. } => Some("KuryrInvalidNetworkPolicy"),
            Error::TooLarge { .. } => Some("KuryrNetworkPolicyTooLarge"),
            _ if self.kind() == ErrorKind::Conflict => None,
            _ => Some("KuryrEnsureNetworkPolicyError"),
        }
    }
}

/// The handler.
pub struct PolicyHandler {
    client: kube::Client,
    pods: Reflected<Pod>,
    namespaces: Reflected<Namespace>,
    services: Reflected<Service>,
    knps: Reflected<KuryrNetworkPolicy>,
    /// Sources every isolated pod admits (`[pod_vif_nested] worker_nodes_subnets`' CIDRs).
    node_cidrs: Vec<ipnet::IpNet>,
    /// `[neutron_defaults] max_sg_rules_per_policy` (0: no bound).
    max_rules: usize,
}

impl PolicyHandler {
    fn synced(&self) -> bool {
        self.pods.is_synced()
            && self.namespaces.is_synced()
            && self.services.is_synced()
            && self.knps.is_synced()
    }

    /// The cluster as the caches show it now.
    pub fn cluster(&self) -> Cluster {
        Cluster {
            namespaces: self
                .namespaces
                .store()
                .state()
                .iter()
                .map(|n| cluster::namespace(n))
                .collect(),
            pods: self
                .pods
                .store()
                .state()
                .iter()
                .filter_map(|p| cluster::pod(p))
                .collect(),
            services: self
                .services
                .store()
                .state()
                .iter()
                .filter_map(|s| cluster::service(s))
                .collect(),
            always_allowed_sources: self.node_cidrs.clone(),
        }
    }
}

fn knp_seen(k: &KuryrNetworkPolicy) -> KnpSeen {
    KnpSeen {
        deleting: k.metadata.deletion_timestamp.is_some(),
        spec: k.spec.clone(),
    }
}

/// The KuryrNetworkPolicy of `np` with `spec`.
pub fn new_knp(np: &NetworkPolicy, spec: KuryrNetworkPolicySpec) -> KuryrNetworkPolicy {
    let ns = np.namespace().unwrap_or_default();
    let name = np.name_any();
    KuryrNetworkPolicy {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            annotations: Some(
                [(
                    ANNOTATION_NETWORK_POLICY_LINK.to_string(),
                    format!("/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}"),
                )]
                .into(),
            ),
            finalizers: Some(vec![NETWORKPOLICY_FINALIZER.into()]),
            owner_references: Some(vec![OwnerReference {
                api_version: NetworkPolicy::api_version(&()).into(),
                kind: NetworkPolicy::kind(&()).into(),
                name,
                uid: np.uid().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        spec,
        status: Some(KuryrNetworkPolicyStatus::default()),
    }
}

impl Handler for PolicyHandler {
    type Object = NetworkPolicy;
    type Observed = (Arc<NetworkPolicy>, NpObserved);
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, np: &Arc<NetworkPolicy>, live: bool) -> Result<Self::Observed, Error> {
        if !self.synced() {
            return Err(Error::NotSynced);
        }
        let ns = np.namespace().unwrap_or_default();
        let key = format!("{ns}/{}", np.name_any());
        let knp = if live {
            Api::<KuryrNetworkPolicy>::namespaced(self.client.clone(), &ns)
                .get_opt(&np.name_any())
                .await
                .map_err(|source| Error::Kube {
                    what: "reading the KuryrNetworkPolicy",
                    policy: key.clone(),
                    source,
                })?
                .map(|k| knp_seen(&k))
        } else {
            self.knps.get(Some(&ns), &np.name_any()).map(|k| knp_seen(&k))
        };
        let desired = Policy::from_k8s(np).map(|policy| {
            let cluster = self.cluster();
            let t = kuryr_netpol::translate(&policy, &cluster);
            plan::knp_spec(np, &policy, &t, &cluster)
        });
        let observed = NpObserved {
            key,
            deleting: np.metadata.deletion_timestamp.is_some(),
            has_finalizer: np.finalizers().iter().any(|f| f == NETWORKPOLICY_FINALIZER),
            knp,
            desired,
            max_rules: self.max_rules,
        };
        Ok((np.clone(), observed))
    }

    fn plan(&self, o: &Self::Observed) -> Plan<Step> {
        plan::plan(&o.1)
    }

    async fn execute(&self, o: &Self::Observed, step: Step) -> Result<Flow<Self::Observed>, Error> {
        let (np, seen) = o;
        let ns = np.namespace().unwrap_or_default();
        let key = seen.key.clone();
        let kerr = |what: &'static str| {
            let policy = key.clone();
            move |source| Error::Kube { what, policy, source }
        };
        let nps: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), &ns);
        let knps: Api<KuryrNetworkPolicy> = Api::namespaced(self.client.clone(), &ns);
        match step {
            Step::AddFinalizer => {
                finalizer::add(&nps, np.as_ref(), NETWORKPOLICY_FINALIZER)
                    .await
                    .map_err(kerr("adding the finalizer"))?;
            }
            Step::CreateKnp(spec) => match knps.create(&PostParams::default(), &new_knp(np, *spec)).await {
                Ok(_) => info!(policy = %key, "KuryrNetworkPolicy created"),
                Err(e) if api_code(&e) == Some(409) => debug!(policy = %key, "KuryrNetworkPolicy exists"),
                Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("being terminated") => {
                    debug!(policy = %key, "namespace terminating, KuryrNetworkPolicy not created");
                }
                Err(e) => return Err(kerr("creating the KuryrNetworkPolicy")(e)),
            },
            Step::UpdateKnp(spec) => {
                // The whole spec is ours: a merge patch replacing each list.
                let p = json!({ "spec": &*spec });
                match knps
                    .patch(&np.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                    .await
                {
                    Ok(_) => info!(
                        policy = %key,
                        ingress = spec.ingress_sg_rules.len(),
                        egress = spec.egress_sg_rules.len(),
                        "KuryrNetworkPolicy spec updated"
                    ),
                    Err(e) if api_code(&e) == Some(404) => {}
                    Err(e) => return Err(kerr("updating the KuryrNetworkPolicy")(e)),
                }
            }
            Step::DeleteKnp => match knps.delete(&np.name_any(), &DeleteParams::default()).await {
                Ok(_) => info!(policy = %key, "KuryrNetworkPolicy deleted"),
                Err(e) if api_code(&e) == Some(404) => {}
                Err(e) => return Err(kerr("deleting the KuryrNetworkPolicy")(e)),
            },
            Step::RemoveFinalizer => finalizer::remove(&nps, np.as_ref(), NETWORKPOLICY_FINALIZER)
                .await
                .map_err(kerr("removing the finalizer"))?,
            Step::Invalid(source) => return Err(Error::Invalid { policy: key, source }),
            Step::TooLarge { rules, max } => {
                return Err(Error::TooLarge {
                    policy: key,
                    rules,
                    max,
                });
            }
        }
        Ok(Flow::Next)
    }
}

/// The CIDRs of `[pod_vif_nested] worker_nodes_subnets` (nodes' kubelets probe pods from there).
async fn node_cidrs(ctx: &Context) -> Vec<ipnet::IpNet> {
    let ids = &ctx.config.pod_vif_nested.worker_nodes_subnets;
    let Some(os) = ctx.openstack.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for id in ids {
        match os.neutron.get_subnet(id).await {
            Ok(s) => match s.cidr.parse() {
                Ok(c) => out.push(c),
                Err(_) => error!(subnet = %id, cidr = %s.cidr, "worker node subnet has an unreadable CIDR"),
            },
            Err(e) => {
                error!(subnet = %id, error = %crate::error_chain(&e), "worker node subnet not readable; its nodes are not admitted by policies")
            }
        }
    }
    out
}

/// Runs the handler: NetworkPolicies, and all of them again when a pod, namespace or Service
/// changes (and one when its KuryrNetworkPolicy does).
pub async fn start(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let caches = (|| -> Result<_, crate::drivers::DriverError> {
        Ok((
            Reflected::spawn(client.clone(), "pods")?,
            Reflected::spawn(client.clone(), "namespaces")?,
            Reflected::spawn(client.clone(), "services")?,
            Reflected::spawn(client.clone(), "kuryrnetworkpolicies")?,
        ))
    })();
    let (pods, namespaces, services, knps) = match caches {
        Ok(c) => c,
        Err(e) => {
            error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            return ctx.health.handler_died(HANDLER);
        }
    };
    let handler = Arc::new(PolicyHandler {
        client: client.clone(),
        pods,
        namespaces,
        services,
        knps,
        node_cidrs: node_cidrs(&ctx).await,
        max_rules: ctx.config.neutron_defaults.max_sg_rules_per_policy as usize,
    });
    // Every policy again after a pod, namespace or Service change, triggered by the very caches
    // the translation reads (a second watch could fire before they have the change).
    let changes = futures::stream::select(
        handler.pods.changes(),
        futures::stream::select(handler.namespaces.changes(), handler.services.changes()),
    );
    let controller = Controller::new(
        Api::<NetworkPolicy>::all(client.clone()),
        watcher::Config::default(),
    )
    .reconcile_all_on(changes)
    .watches(
        Api::<KuryrNetworkPolicy>::all(client),
        watcher::Config::default(),
        |k: KuryrNetworkPolicy| super::same_name::<NetworkPolicy, _>(&k),
    );
    scaffold::run(ctx, handler, controller, async {}, async {}).await;
}
