//! The KuryrNetwork handler (upstream's `KuryrNetworkHandler`, `enabled_handlers` name
//! `kuryrnetwork`): for each KuryrNetwork, the namespace's Neutron network, its subnet from
//! `[namespace_subnet] pod_subnet_pool` and its interface on `pod_router`, recorded step by
//! step in `status` (so a restart resumes where it stopped); on deletion, the network's
//! pools are freed, the subnet detached and the network deleted before the finalizer goes.
//! Decisions live in [`plan`], Neutron calls in [`neutron`], observation and execution here under
//! the handler [`scaffold`]; [`janitor`] deletes tagged namespace networks no KuryrNetwork
//! references (leaks).

pub mod janitor;
pub mod neutron;
pub mod plan;
pub mod pools;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{Controller, watcher},
};
use kuryr_core::config::TagPolicy;
use kuryr_openstack::Neutron;
use kuryr_types::{KuryrNetwork, constants::KURYRNETWORK_FINALIZER};
use serde_json::Value;
use tracing::{debug, error, info, warn};

use super::scaffold::{self, ErrorKind, Flow, Handler, HandlerError, Then, api_code, kube_kind};
use crate::{Context, finalizer};
use neutron::NetSettings;
use plan::Step;
pub use pools::{NetworkPools, NoPools, PoolAdapter, PoolsError};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "kuryrnetwork";

/// A failed step of the KuryrNetwork handler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configured tags are not valid Neutron tags.
    #[error("invalid [neutron_defaults] resource_tags/cluster_tag")]
    Tags(#[source] kuryr_core::config::ConfigError),
    /// A KuryrNetwork without a namespace (the watch only yields namespaced ones: invariant).
    #[error("KuryrNetwork {0} has no namespace")]
    MissingNamespace(String),
    /// An option the namespace subnet driver needs is not set.
    #[error("[namespace_subnet] {0} is not set")]
    MissingOption(&'static str),
    /// Reading the namespace (for its UID) failed.
    #[error("reading namespace {ns}")]
    GetNamespace {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Writing the KuryrNetwork failed.
    #[error("updating {what} of KuryrNetwork {kn}")]
    Patch {
        /// What was written.
        what: &'static str,
        /// `namespace/name`.
        kn: String,
        /// Cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// Finding or creating the network failed.
    #[error("creating the network of namespace {ns}")]
    CreateNetwork {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Finding or creating the subnet failed.
    #[error("creating the subnet of namespace {ns}")]
    CreateSubnet {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Attaching the subnet to the router failed.
    #[error("attaching the subnet of namespace {ns} to router {router}")]
    AttachRouter {
        /// Namespace.
        ns: String,
        /// Router.
        router: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Freeing the network's pools failed.
    #[error("freeing the pools of namespace {ns}")]
    FreePools {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: PoolsError,
    },
    /// Detaching or deleting the network failed.
    #[error("deleting the network of namespace {ns}")]
    DeleteNetwork {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
}

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        let neutron = |e: &kuryr_openstack::Error| {
            if e.is_retryable() {
                ErrorKind::Transient
            } else {
                ErrorKind::Invalid
            }
        };
        match self {
            Error::Tags(_) | Error::MissingOption(_) => ErrorKind::Invalid,
            Error::MissingNamespace(_) => ErrorKind::Internal,
            Error::GetNamespace { source, .. } => kube_kind(source),
            Error::Patch { source, .. } => kube_kind(source),
            Error::CreateNetwork { source, .. }
            | Error::CreateSubnet { source, .. }
            | Error::AttachRouter { source, .. }
            | Error::DeleteNetwork { source, .. } => neutron(source),
            Error::FreePools { .. } => ErrorKind::Transient,
        }
    }

    fn metric_label(&self) -> &'static str {
        match self {
            Error::Tags(_) => "tags",
            Error::MissingNamespace(_) => "missing_namespace",
            Error::MissingOption(_) => "missing_option",
            Error::GetNamespace { .. } => "get_namespace",
            Error::Patch { .. } => "patch",
            Error::CreateNetwork { .. } => "create_network",
            Error::CreateSubnet { .. } => "create_subnet",
            Error::AttachRouter { .. } => "attach_router",
            Error::FreePools { .. } => "free_pools",
            Error::DeleteNetwork { .. } => "delete_network",
        }
    }

    /// Upstream's names where it had one.
    fn event_reason(&self) -> Option<&'static str> {
        if self.kind() == ErrorKind::Conflict {
            return None;
        }
        Some(match self {
            Error::CreateNetwork { .. } | Error::Tags(_) => "CreateNetworkFailed",
            Error::CreateSubnet { .. } | Error::MissingOption(_) => "CreateSubnetFailed",
            Error::AttachRouter { .. } => "AddingSubnetToRouterFailed",
            Error::FreePools { .. } | Error::DeleteNetwork { .. } => "DeleteNetworkFailed",
            Error::GetNamespace { .. } | Error::MissingNamespace(_) | Error::Patch { .. } => {
                "UpdateKuryrNetworkFailed"
            }
        })
    }
}

/// The handler: Neutron, the pools to free, the namespace subnet driver's settings.
pub struct KnHandler {
    /// Shared controller context.
    pub ctx: Arc<Context>,
    /// Neutron.
    pub neutron: Arc<dyn Neutron>,
    /// Port pools (freed before a network is deleted).
    pub pools: Arc<dyn NetworkPools>,
    /// Subnet pool, router, MTU and tags.
    pub settings: NetSettings,
}

impl KnHandler {
    /// The handler from the configuration in `ctx`.
    pub fn new(
        ctx: Arc<Context>,
        neutron: Arc<dyn Neutron>,
        pools: Arc<dyn NetworkPools>,
    ) -> Result<Self, Error> {
        let settings = net_settings(&ctx.config)?;
        Ok(Self {
            ctx,
            neutron,
            pools,
            settings,
        })
    }
}

/// The Neutron settings of the namespace subnet driver from `config`.
pub fn net_settings(config: &kuryr_config::Config) -> Result<NetSettings, Error> {
    let nd = &config.neutron_defaults;
    let tags = TagPolicy::from_neutron_defaults(nd).map_err(Error::Tags)?;
    Ok(NetSettings {
        subnet_pool: config.namespace_subnet.pod_subnet_pool.clone(),
        router: config.namespace_subnet.pod_router.clone(),
        mtu: nd.network_device_mtu,
        tags: tags.tags(),
    })
}

/// Runs the handler with the Neutron client and pools of [`Context::openstack`] (what
/// `cli::spawn_handlers` starts), with its janitor beside it; without them, or with invalid
/// settings, the handler is reported dead at once.
pub async fn start(ctx: Arc<Context>) {
    let Some(os) = ctx.openstack.clone() else {
        error!(handler = HANDLER, "no OpenStack connection in the context");
        return ctx.health.handler_died(HANDLER);
    };
    let pools: Arc<dyn NetworkPools> = Arc::new(PoolAdapter(os.pool.clone()));
    let handler = match KnHandler::new(ctx.clone(), os.neutron.clone(), pools) {
        Ok(k) => Arc::new(k),
        Err(e) => {
            error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            return ctx.health.handler_died(HANDLER);
        }
    };
    let api: Api<KuryrNetwork> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watcher::Config::default());
    let janitor = {
        let (store, h) = (controller.store(), handler.clone());
        async move {
            let interval = h.ctx.config.vif_pool.ports_pool_janitor_interval;
            janitor::Janitor::default()
                .run(h.neutron.as_ref(), &h.settings, store, interval)
                .await
        }
    };
    scaffold::run(ctx, handler, controller, async {}, janitor).await;
}

fn key(kn: &KuryrNetwork) -> String {
    format!("{}/{}", kn.namespace().unwrap_or_default(), kn.name_any())
}

/// What the KuryrNetwork plan looks at: the object as last written (each step records its
/// result in `status`), and the namespace's UID once read.
pub struct KnObserved {
    /// The KuryrNetwork.
    pub kn: KuryrNetwork,
    /// Its namespace.
    pub ns: String,
    /// The namespace's name as recorded in `spec.nsName` (else the KuryrNetwork's namespace).
    pub ns_name: String,
    /// The namespace's UID: not read yet / read (`None` once the namespace is gone).
    pub ns_uid: Option<Option<String>>,
    /// The network is complete in `status` but Neutron says its subnet does not exist.
    pub subnet_missing: bool,
}

impl Handler for KnHandler {
    type Object = KuryrNetwork;
    type Observed = KnObserved;
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, kn: &Arc<KuryrNetwork>, _live: bool) -> Result<KnObserved, Error> {
        let ns = kn
            .namespace()
            .ok_or_else(|| Error::MissingNamespace(kn.name_any()))?;
        let ns_name = if kn.spec.ns_name.is_empty() {
            ns.clone()
        } else {
            kn.spec.ns_name.clone()
        };
        // A complete network is checked against Neutron (one read): its subnet may have been
        // deleted behind our back, or the status may come from another cloud.
        let mut subnet_missing = false;
        if matches!(plan::next_step(kn), Step::Done | Step::SyncLabels)
            && let Some(id) = kn.status.as_ref().and_then(|st| st.subnet_id.clone())
        {
            match self.neutron.get_subnet(&id).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => subnet_missing = true,
                // Neutron unreachable: nothing to conclude; the next pass looks again.
                Err(e) => debug!(ns = %ns, subnet = %id, error = %e, "cannot check the namespace subnet"),
            }
        }
        Ok(KnObserved {
            kn: KuryrNetwork::clone(kn),
            ns,
            ns_name,
            ns_uid: None,
            subnet_missing,
        })
    }

    fn plan(&self, o: &KnObserved) -> scaffold::Plan<Step> {
        plan::plan(&o.kn, o.subnet_missing)
    }

    async fn execute(&self, o: &KnObserved, step: Step) -> Result<Flow<KnObserved>, Error> {
        let (ctx, neutron, s) = (&self.ctx, self.neutron.as_ref(), &self.settings);
        let (kn, ns) = (&o.kn, &o.ns);
        let api: Api<KuryrNetwork> = Api::namespaced(ctx.client.clone(), ns);
        let target = kn.object_ref(&());
        let mut ns_uid = o.ns_uid.clone();
        let updated = match step {
            Step::Done | Step::Gone => return Ok(Flow::Stop(Then::Periodic)),
            Step::AddFinalizer => {
                match finalizer::add(&api, kn, KURYRNETWORK_FINALIZER).await {
                    Ok(()) => {}
                    Err(e) if api_code(&e) == Some(404) => return Ok(Flow::Stop(Then::AwaitChange)),
                    Err(source) => {
                        return Err(Error::Patch {
                            what: "finalizers",
                            kn: key(kn),
                            source: Box::new(source),
                        });
                    }
                }
                let mut k = kn.clone();
                k.metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .push(KURYRNETWORK_FINALIZER.to_owned());
                Some(k)
            }
            Step::CreateNetwork => {
                if ns_uid.is_none() {
                    ns_uid = Some(namespace_uid(ctx, ns).await?);
                }
                let uid = ns_uid.clone().flatten();
                let (net, created) =
                    neutron::ensure_network(neutron, s, &kn.spec.project_id, uid.as_deref(), &o.ns_name)
                        .await
                        .map_err(|source| Error::CreateNetwork {
                            ns: ns.clone(),
                            source,
                        })?;
                if created {
                    let note = format!("network {} created", net.id);
                    ctx.events
                        .normal(&target, "CreateNetworkSucceed", note, "Reconcile")
                        .await;
                }
                patch(&api, kn, "status.netId", &plan::status_net(&net.id)).await?
            }
            Step::CreateSubnet => {
                if s.subnet_pool.is_none() {
                    return Err(Error::MissingOption("pod_subnet_pool"));
                }
                if ns_uid.is_none() {
                    ns_uid = Some(namespace_uid(ctx, ns).await?);
                }
                let uid = ns_uid.clone().flatten();
                let net_id = kn
                    .status
                    .as_ref()
                    .and_then(|st| st.net_id.clone())
                    .unwrap_or_default();
                let (sub, created) = neutron::ensure_subnet(
                    neutron,
                    s,
                    &kn.spec.project_id,
                    &net_id,
                    uid.as_deref(),
                    &o.ns_name,
                )
                .await
                .map_err(|source| Error::CreateSubnet {
                    ns: ns.clone(),
                    source,
                })?;
                if created {
                    let note = format!("subnet {} ({}) created", sub.id, sub.cidr);
                    ctx.events
                        .normal(&target, "CreateSubnetSucceed", note, "Reconcile")
                        .await;
                }
                patch(
                    &api,
                    kn,
                    "status.subnetId",
                    &plan::status_subnet(&sub.id, &sub.cidr),
                )
                .await?
            }
            Step::AttachRouter => {
                let router = s.router.clone().ok_or(Error::MissingOption("pod_router"))?;
                let sub_id = kn
                    .status
                    .as_ref()
                    .and_then(|st| st.subnet_id.clone())
                    .unwrap_or_default();
                neutron::attach(neutron, &router, &sub_id)
                    .await
                    .map_err(|source| Error::AttachRouter {
                        ns: ns.clone(),
                        router: router.clone(),
                        source,
                    })?;
                let note = format!("subnet {sub_id} attached to router {router}");
                ctx.events
                    .normal(&target, "AddingSubnetToRouterSucceed", note, "Reconcile")
                    .await;
                patch(&api, kn, "status.routerId", &plan::status_router(&router)).await?
            }
            Step::SyncLabels => patch(&api, kn, "status.nsLabels", &plan::status_labels(kn)).await?,
            Step::Rebuild => {
                let st = kn.status.clone().unwrap_or_default();
                let (net, sub) = (st.net_id.unwrap_or_default(), st.subnet_id.unwrap_or_default());
                let note = format!(
                    "subnet {sub} of network {net} no longer exists in Neutron: building the namespace network again"
                );
                warn!(%ns, network = %net, subnet = %sub, "namespace subnet missing: rebuilding");
                ctx.events
                    .warning(&target, "NamespaceSubnetMissing", note, "Reconcile")
                    .await;
                // The network gone too: its pools are of no use (the steps make a new one). A
                // network still there is found again by name and its pools serve on.
                let net_gone =
                    !net.is_empty() && matches!(neutron.get_network(&net).await, Err(e) if e.is_not_found());
                if net_gone && let Err(e) = self.pools.free_network(&net).await {
                    warn!(%ns, network = %net, error = %crate::error_chain(&e), "freeing the old network's pools failed");
                }
                patch(&api, kn, "status", &plan::status_cleared()).await?
            }
            Step::Finalize => {
                finalize(kn, self, ns, &o.ns_name).await?;
                match finalizer::remove(&api, kn, KURYRNETWORK_FINALIZER).await {
                    Ok(()) => {}
                    Err(e) if api_code(&e) == Some(404) => {}
                    Err(source) => {
                        return Err(Error::Patch {
                            what: "finalizers",
                            kn: key(kn),
                            source: Box::new(source),
                        });
                    }
                }
                info!(%ns, "KuryrNetwork released");
                return Ok(Flow::Stop(Then::AwaitChange));
            }
        };
        Ok(match updated {
            Some(kn) => Flow::Replan(KnObserved {
                kn,
                ns: o.ns.clone(),
                ns_name: o.ns_name.clone(),
                ns_uid,
                // Rebuilt or just written: what Neutron has was decided by this pass.
                subnet_missing: false,
            }),
            None => Flow::Stop(Then::AwaitChange),
        })
    }
}

/// Writes `patch` (merge) to `kn`; `None` when the KuryrNetwork is gone.
async fn patch(
    api: &Api<KuryrNetwork>,
    kn: &KuryrNetwork,
    what: &'static str,
    patch: &Value,
) -> Result<Option<KuryrNetwork>, Error> {
    match api
        .patch(&kn.name_any(), &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(k) => Ok(Some(k)),
        Err(e) if api_code(&e) == Some(404) => Ok(None),
        Err(source) => Err(Error::Patch {
            what,
            kn: key(kn),
            source: Box::new(source),
        }),
    }
}

/// The UID of namespace `ns` (`None` once it is gone).
async fn namespace_uid(ctx: &Context, ns: &str) -> Result<Option<String>, Error> {
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    match api.get_opt(ns).await {
        Ok(n) => Ok(n.and_then(|n| n.metadata.uid)),
        Err(source) => Err(Error::GetNamespace {
            ns: ns.to_owned(),
            source,
        }),
    }
}

/// Frees the pools and deletes the Neutron side of `kn`.
async fn finalize(kn: &KuryrNetwork, kctx: &KnHandler, ns: &str, ns_name: &str) -> Result<(), Error> {
    let neutron = kctx.neutron.as_ref();
    let s = &kctx.settings;
    let st = kn.status.clone().unwrap_or_default();
    let del_err = |source| Error::DeleteNetwork {
        ns: ns.to_owned(),
        source,
    };
    let router = st.router_id.clone().or_else(|| s.router.clone());
    let nets: Vec<(String, Option<String>)> = match st.net_id.filter(|n| !n.is_empty()) {
        // The status names the network: deleted only when it is ours (or untagged: upstream's,
        // switched over); a network with another cluster's tags is left alone whatever the CR says.
        Some(net) => match neutron::network_claim(neutron, &s.tags, &net)
            .await
            .map_err(del_err)?
        {
            Some(kuryr_core::ownership::Claim::Foreign) => {
                warn!(%ns, network = %net, "KuryrNetwork names a network that is not this cluster's: left alone");
                Vec::new()
            }
            _ => vec![(net, st.subnet_id.clone())],
        },
        None => {
            // Created but not recorded (crash before the status patch): find it by name.
            let uid = namespace_uid(&kctx.ctx, ns).await?;
            let names = plan::candidate_network_names(uid.as_deref(), ns_name);
            let mut found = neutron::find_network(neutron, s, &kn.spec.project_id, &names)
                .await
                .map_err(del_err)?;
            if found.is_none() && uid.is_none() {
                found = neutron::find_orphaned_network(neutron, s, &kn.spec.project_id, ns_name)
                    .await
                    .map_err(del_err)?;
            }
            match found {
                Some(n) => {
                    let subs = neutron
                        .list_subnets(&kuryr_openstack::ResourceFilter {
                            network_id: Some(n.id.clone()),
                            ..Default::default()
                        })
                        .await
                        .map_err(del_err)?;
                    vec![(n.id, subs.into_iter().next().map(|x| x.id))]
                }
                None => Vec::new(),
            }
        }
    };
    for (net, subnet) in nets {
        let freed = kctx
            .pools
            .free_network(&net)
            .await
            .map_err(|source| Error::FreePools {
                ns: ns.to_owned(),
                source,
            })?;
        neutron::teardown(neutron, router.as_deref(), subnet.as_deref(), &net, &s.tags)
            .await
            .map_err(del_err)?;
        info!(%ns, network = %net, pooled_ports_freed = freed, "network deleted");
    }
    Ok(())
}
