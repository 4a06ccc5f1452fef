//! The KuryrNetwork population handler (upstream's `KuryrNetworkPopulationHandler`,
//! `enabled_handlers` name `kuryrnetwork_population`): when a namespace's subnet appears
//! (`status.subnetId` set, `populated` not true), marks it `populated: true` first (so two
//! passes never populate twice), then fills the namespace network's pool on every Ready node;
//! on failure sets `populated: false` again and retries.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{Controller, watcher},
};
use kuryr_types::KuryrNetwork;
use tracing::{debug, error, info, warn};

use super::{
    kuryrnetwork::{NetworkPools, PoolAdapter, PoolsError, plan::status_populated},
    scaffold::{self, ErrorKind, Flow, Handler, HandlerError, Plan, Then, api_code, kube_kind},
};
use crate::{
    Context,
    drivers::{PodTarget, Reflected, SecurityGroupsDriver},
};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "kuryrnetwork_population";

/// A failed step of the population handler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing `status.populated` failed.
    #[error("setting populated={populated} on KuryrNetwork {ns}")]
    Patch {
        /// Namespace.
        ns: String,
        /// The value written.
        populated: bool,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// The node cache has not listed the nodes yet.
    #[error("nodes not listed yet")]
    NodesNotSynced,
    /// Populating a node's pool failed.
    #[error("populating the pools of namespace {ns}")]
    Populate {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: PoolsError,
    },
}

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Patch { source, .. } => kube_kind(source),
            Error::NodesNotSynced | Error::Populate { .. } => ErrorKind::Transient,
        }
    }

    fn metric_label(&self) -> &'static str {
        match self {
            Error::Patch { .. } => "patch",
            Error::NodesNotSynced => "nodes_not_synced",
            Error::Populate { .. } => "populate",
        }
    }

    fn event_reason(&self) -> Option<&'static str> {
        match self {
            // Startup: the node cache lags the KuryrNetwork watch; not worth an Event.
            Error::NodesNotSynced => None,
            _ if self.kind() == ErrorKind::Conflict => None,
            _ => Some("FailToPopulateVIFPool"),
        }
    }
}

/// One step of the population handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Mark `status.populated = true` first, so two passes never populate twice.
    MarkPopulated,
    /// Fill the namespace network's pool on these nodes (on failure `populated` goes back to
    /// false and the pass is retried).
    Populate(Vec<String>),
}

/// What the population plan looks at.
pub struct PopObserved {
    /// The KuryrNetwork.
    pub kn: Arc<KuryrNetwork>,
    /// Ready, schedulable nodes (read only when a population is wanted).
    pub hosts: Vec<String>,
}

/// The plan (pure): mark, then populate every ready node, once the network is complete and
/// not populated yet.
pub fn plan(o: &PopObserved) -> Plan<Step> {
    if !wants_population(&o.kn) {
        return Plan::nothing("nothing to populate", Then::AwaitChange);
    }
    Plan::steps(
        "namespace network ready, not populated",
        vec![Step::MarkPopulated, Step::Populate(o.hosts.clone())],
        Then::AwaitChange,
    )
}

/// Whether `kn` is to be populated now: its network, subnet and router interface exist (the
/// router step resets `populated` to false, so waiting for it avoids populating twice), it is
/// not being deleted, and it is not marked populated.
pub fn wants_population(kn: &KuryrNetwork) -> bool {
    let st = kn.status.clone().unwrap_or_default();
    kn.metadata.deletion_timestamp.is_none()
        && st.subnet_id.is_some_and(|s| !s.is_empty())
        && st.net_id.is_some_and(|s| !s.is_empty())
        && st.router_id.is_some_and(|s| !s.is_empty())
        && st.populated != Some(true)
}

/// The pool target of a namespace network (what a pod of that namespace would get).
pub fn target_of(kn: &KuryrNetwork, sgs: &SecurityGroupsDriver) -> PodTarget {
    let st = kn.status.clone().unwrap_or_default();
    PodTarget {
        project_id: kn.spec.project_id.clone(),
        network_id: st.net_id.unwrap_or_default(),
        subnet_ids: st.subnet_id.into_iter().collect(),
        security_groups: sgs.namespace_security_groups(&kn.spec.ns_name, &kn.spec.project_id),
    }
}

/// Whether `node` is Ready and schedulable (its pools would serve pods).
pub fn node_ready(node: &Node) -> bool {
    let unschedulable = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    ready && !unschedulable
}

/// The handler: the pools to fill, the security groups of the pre-created ports, the nodes.
pub struct PopHandler {
    /// Kubernetes.
    pub client: kube::Client,
    /// The pools to fill.
    pub pools: Arc<dyn NetworkPools>,
    /// Security groups of the pre-created ports.
    pub security_groups: SecurityGroupsDriver,
    /// Nodes.
    pub nodes: Reflected<Node>,
}

impl PopHandler {
    /// The handler; starts the node cache (needs a Tokio runtime).
    pub fn new(ctx: &Context, pools: Arc<dyn NetworkPools>) -> Result<Self, crate::drivers::DriverError> {
        Ok(Self {
            client: ctx.client.clone(),
            pools,
            security_groups: SecurityGroupsDriver::defaults(&ctx.config),
            nodes: Reflected::spawn(ctx.client.clone(), "nodes")?,
        })
    }
}

/// Runs the handler with the pools of [`Context::openstack`] (what `cli::spawn_handlers`
/// starts); without them the handler is reported dead at once.
pub async fn start(ctx: Arc<Context>) {
    let Some(os) = ctx.openstack.clone() else {
        error!(handler = HANDLER, "no OpenStack connection in the context");
        return ctx.health.handler_died(HANDLER);
    };
    let pools: Arc<dyn NetworkPools> = Arc::new(PoolAdapter(os.pool.clone()));
    let handler = match PopHandler::new(&ctx, pools) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            return ctx.health.handler_died(HANDLER);
        }
    };
    let api: Api<KuryrNetwork> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watcher::Config::default());
    scaffold::run(ctx, handler, controller, async {}, async {}).await;
}

fn key(kn: &KuryrNetwork) -> String {
    kn.namespace().unwrap_or_default()
}

impl PopHandler {
    async fn set_populated(&self, kn: &KuryrNetwork, populated: bool) -> Result<bool, Error> {
        let ns = key(kn);
        let api: Api<KuryrNetwork> = Api::namespaced(self.client.clone(), &ns);
        match api
            .patch(
                &kn.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&status_populated(populated)),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if api_code(&e) == Some(404) => Ok(false),
            Err(source) => Err(Error::Patch {
                ns,
                populated,
                source,
            }),
        }
    }
}

impl Handler for PopHandler {
    type Object = KuryrNetwork;
    type Observed = PopObserved;
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, kn: &Arc<KuryrNetwork>, _live: bool) -> Result<PopObserved, Error> {
        let mut hosts = Vec::new();
        if wants_population(kn) {
            if !self.nodes.is_synced() {
                return Err(Error::NodesNotSynced);
            }
            hosts = self
                .nodes
                .store()
                .state()
                .iter()
                .filter(|n| node_ready(n))
                .map(|n| n.name_any())
                .collect();
            hosts.sort();
        }
        Ok(PopObserved {
            kn: kn.clone(),
            hosts,
        })
    }

    fn plan(&self, o: &PopObserved) -> Plan<Step> {
        plan(o)
    }

    async fn execute(&self, o: &PopObserved, step: Step) -> Result<Flow<PopObserved>, Error> {
        let kn = o.kn.as_ref();
        let ns = key(kn);
        match step {
            Step::MarkPopulated => {
                if !self.set_populated(kn, true).await? {
                    return Ok(Flow::Stop(Then::AwaitChange));
                }
            }
            Step::Populate(hosts) => {
                let target = target_of(kn, &self.security_groups);
                // All nodes at once: each is one bulk request, bounded by the pool's own limit.
                let results =
                    futures::future::join_all(hosts.iter().map(|host| self.pools.populate(host, &target)))
                        .await;
                let mut created = 0;
                let mut failure = None;
                for r in results {
                    match r {
                        Ok(n) => created += n,
                        Err(source) => {
                            failure.get_or_insert(source);
                        }
                    }
                }
                if let Some(source) = failure {
                    // Let the next pass try again.
                    if let Err(e2) = self.set_populated(kn, false).await {
                        warn!(%ns, error = %crate::error_chain(&e2), "resetting populated failed");
                    }
                    return Err(Error::Populate { ns, source });
                }
                info!(%ns, network = %target.network_id, nodes = hosts.len(), ports = created, "namespace pools populated");
                debug!(%ns, ?hosts, "populated nodes");
            }
        }
        Ok(Flow::Next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    use kuryr_types::{KuryrNetworkSpec, KuryrNetworkStatus};

    #[test]
    fn population_wanted_once_subnet_exists_and_not_populated() {
        let mut kn = KuryrNetwork::new(
            "a",
            KuryrNetworkSpec {
                ns_name: "a".into(),
                project_id: "p".into(),
                ns_labels: Default::default(),
            },
        );
        assert!(!wants_population(&kn));
        kn.status = Some(KuryrNetworkStatus {
            net_id: Some("n".into()),
            subnet_id: Some("s".into()),
            ..Default::default()
        });
        assert!(!wants_population(&kn), "router interface not there yet");
        kn.status.as_mut().unwrap().router_id = Some("r".into());
        assert!(wants_population(&kn));
        kn.status.as_mut().unwrap().populated = Some(false);
        assert!(wants_population(&kn));
        kn.status.as_mut().unwrap().populated = Some(true);
        assert!(!wants_population(&kn));
        let sgs = SecurityGroupsDriver::Default {
            sg_ids: vec!["b".into(), "a".into(), "b".into()],
        };
        let t = target_of(&kn, &sgs);
        assert_eq!(t.network_id, "n");
        assert_eq!(t.subnet_ids, ["s"]);
        assert_eq!(t.project_id, "p");
        assert_eq!(t.security_groups, ["a", "b"]);
    }

    #[test]
    fn ready_nodes() {
        let mut n = Node::default();
        assert!(!node_ready(&n));
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert!(node_ready(&n));
        n.spec = Some(Default::default());
        n.spec.as_mut().unwrap().unschedulable = Some(true);
        assert!(!node_ready(&n));
    }
}
