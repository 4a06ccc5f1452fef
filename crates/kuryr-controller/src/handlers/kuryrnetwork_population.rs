//! The KuryrNetwork population handler (upstream's `KuryrNetworkPopulationHandler`,
//! `enabled_handlers` name `kuryrnetwork_population`): when a namespace's subnet appears
//! (`status.subnetId` set, `populated` not true), marks it `populated: true` first (so two
//! passes never populate twice), then fills the namespace network's pool on every Ready node;
//! on failure sets `populated: false` again and retries.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{Controller, controller::Action, watcher},
};
use kuryr_types::KuryrNetwork;
use tracing::{debug, error, info, warn};

use super::kuryrnetwork::{
    NetworkPools, PoolAdapter, PoolsError, plan,
    support::{self, Backoff, api_code, record},
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

impl Error {
    /// Label of the `outcome` of `kuryr_reconcile_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Patch { .. } => "patch",
            Error::NodesNotSynced => "nodes_not_synced",
            Error::Populate { .. } => "populate",
        }
    }
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

/// The handler's context.
pub struct PopContext {
    /// Shared controller context.
    pub ctx: Arc<Context>,
    /// The pools to fill.
    pub pools: Arc<dyn NetworkPools>,
    /// Security groups of the pre-created ports.
    pub security_groups: SecurityGroupsDriver,
    /// Nodes.
    pub nodes: Reflected<Node>,
    backoff: Backoff,
}

impl PopContext {
    /// A context; starts the node cache (needs a Tokio runtime).
    pub fn new(ctx: Arc<Context>, pools: Arc<dyn NetworkPools>) -> Result<Self, crate::drivers::DriverError> {
        let security_groups = SecurityGroupsDriver::from_config(&ctx.config)?;
        let nodes = Reflected::spawn(Api::all(ctx.client.clone()), "nodes")?;
        Ok(Self {
            ctx,
            pools,
            security_groups,
            nodes,
            backoff: Backoff::default(),
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
    match PopContext::new(ctx.clone(), pools) {
        Ok(p) => run(Arc::new(p)).await,
        Err(e) => {
            error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            ctx.health.handler_died(HANDLER);
        }
    }
}

/// Runs the handler until its watch ends.
pub async fn run(pctx: Arc<PopContext>) {
    let ctx = pctx.ctx.clone();
    let api: Api<KuryrNetwork> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watcher::Config::default());
    let store = controller.store();
    let health = ctx.health.clone();
    let synced = async move {
        support::wait_ready(&store, HANDLER).await;
        info!(handler = HANDLER, "KuryrNetwork (population) watcher synced");
        health.synced();
        std::future::pending::<()>().await;
    };
    let reconciler = controller
        .run(reconcile, error_policy, pctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                support::log_controller_error(HANDLER, &e);
            }
        });
    tokio::select! {
        _ = reconciler => {}
        _ = synced => {}
    }
    warn!(handler = HANDLER, "handler loop ended");
    ctx.health.handler_died(HANDLER);
}

fn key(kn: &KuryrNetwork) -> String {
    kn.namespace().unwrap_or_default()
}

/// Reconciles one KuryrNetwork.
pub async fn reconcile(kn: Arc<KuryrNetwork>, pctx: Arc<PopContext>) -> Result<Action, Error> {
    let ctx = &pctx.ctx;
    if !wants_population(&kn) {
        return Ok(Action::await_change());
    }
    if !pctx.nodes.is_synced() {
        // Startup: the node cache lags the KuryrNetwork watch; not worth an Event.
        return Ok(Action::requeue(std::time::Duration::from_millis(500)));
    }
    let res = populate(&kn, &pctx).await;
    match &res {
        Ok(_) => {
            ctx.metrics.reconciled(HANDLER, "ok");
            pctx.backoff.succeeded(&key(&kn));
        }
        Err(e) => {
            ctx.metrics.reconciled(HANDLER, e.metric_label());
            let chain = crate::error_chain(e);
            warn!(ns = %key(&kn), error = %chain, "population failed");
            record(ctx, kn.as_ref(), true, "FailToPopulateVIFPool", chain).await;
            // Let the next pass try again.
            if let Err(e2) = set_populated(ctx, &kn, false).await {
                warn!(ns = %key(&kn), error = %crate::error_chain(&e2), "resetting populated failed");
            }
        }
    }
    res
}

/// Retry policy: exponential per KuryrNetwork.
pub fn error_policy(kn: Arc<KuryrNetwork>, _error: &Error, pctx: Arc<PopContext>) -> Action {
    Action::requeue(pctx.backoff.failed(&key(&kn)))
}

async fn set_populated(ctx: &Context, kn: &KuryrNetwork, populated: bool) -> Result<bool, Error> {
    let ns = key(kn);
    let api: Api<KuryrNetwork> = Api::namespaced(ctx.client.clone(), &ns);
    match api
        .patch(
            &kn.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&plan::status_populated(populated)),
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

async fn populate(kn: &KuryrNetwork, pctx: &PopContext) -> Result<Action, Error> {
    if !pctx.nodes.is_synced() {
        return Err(Error::NodesNotSynced);
    }
    let ns = key(kn);
    if !set_populated(&pctx.ctx, kn, true).await? {
        return Ok(Action::await_change());
    }
    let target = target_of(kn, &pctx.security_groups);
    let mut hosts: Vec<String> = pctx
        .nodes
        .store()
        .state()
        .iter()
        .filter(|n| node_ready(n))
        .map(|n| n.name_any())
        .collect();
    hosts.sort();
    // All nodes at once: each is one bulk request, bounded by the pool's own limit.
    let results =
        futures::future::join_all(hosts.iter().map(|host| pctx.pools.populate(host, &target))).await;
    let mut created = 0;
    for r in results {
        created += r.map_err(|source| Error::Populate {
            ns: ns.clone(),
            source,
        })?;
    }
    info!(%ns, network = %target.network_id, nodes = hosts.len(), ports = created, "namespace pools populated");
    debug!(%ns, ?hosts, "populated nodes");
    Ok(Action::await_change())
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
