//! The KuryrLoadBalancer handler (upstream's `KuryrLoadBalancerHandler`, `enabled_handlers`
//! name `kuryrloadbalancer`): a KLB becomes an Octavia load balancer with a listener and pool
//! per Service port and the ready endpoints as members (one batch call per pool); its status
//! records what exists. The plan ([`plan`]) picks one step at a time; after each write the
//! handler waits briefly for the load balancer to settle and plans again, or looks again later —
//! one slow load balancer never holds up another Service's reconcile.

pub mod desired;
mod execute;
mod floating;
pub mod janitor;
pub mod plan;
pub mod public_ip;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{Controller, watcher},
};
use kuryr_openstack::Neutron;
use kuryr_openstack::octavia::{LbFilter, Octavia, status};
use kuryr_types::{KuryrLoadBalancer, KuryrNetwork, constants::KURYRLB_FINALIZER};
use tracing::{error, warn};

use self::desired::{LbSettings, SubnetMap};
use self::plan::{LbObserved, LbOptions, PENDING_POLL, Step};
use self::public_ip::FipObserved;
use super::scaffold::{self, ErrorKind, Flow, Handler, HandlerError, Plan, Then, api_code, kube_kind};
use crate::{Context, drivers::Reflected};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "kuryrloadbalancer";

/// How long a step waits for the load balancer to settle before handing the object back to
/// the queue (the OVN provider settles in about a second; amphorae take minutes).
const SETTLE_WAIT: Duration = Duration::from_secs(4);
/// First look after a write (the OVN provider is ACTIVE again within tens of milliseconds),
/// doubling up to [`SETTLE_POLL_MAX`].
const SETTLE_POLL: Duration = Duration::from_millis(25);
const SETTLE_POLL_MAX: Duration = Duration::from_millis(400);

/// A failed observation or step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An Octavia call failed.
    #[error("Octavia: {what} of {lb}")]
    Octavia {
        /// What was done.
        what: &'static str,
        /// Load balancer name.
        lb: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Octavia could not give the load balancer its VIP: another Neutron port holds the address
    /// (Octavia's message names only the address).
    #[error("Octavia: creating the load balancer of {lb}: its VIP {vip} is held by {holder}")]
    VipTaken {
        /// Load balancer name.
        lb: String,
        /// The Service's ClusterIP.
        vip: String,
        /// The port holding it, described (`execute::vip_holder`).
        holder: String,
        /// Octavia's refusal (boxed: keeps the error small).
        #[source]
        source: Box<kuryr_openstack::Error>,
    },
    /// A Neutron call failed (floating IPs).
    #[error("Neutron: {what} of {lb}")]
    Neutron {
        /// What was done.
        what: &'static str,
        /// Load balancer name.
        lb: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// A Kubernetes call failed.
    #[error("{what} of {klb}")]
    Kube {
        /// What was done.
        what: &'static str,
        /// KLB namespace/name.
        klb: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// The status could not be rendered (a bug; never sent).
    #[error("rendering the status of {klb}: {message}")]
    Status {
        /// KLB namespace/name.
        klb: String,
        /// Why.
        message: String,
    },
    /// The KuryrNetwork cache has not listed yet (member subnets unknown).
    #[error("KuryrNetworks not listed yet")]
    NotSynced,
}

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            // 409: the load balancer is locked by a write in progress.
            Error::Octavia {
                source: kuryr_openstack::Error::Conflict { .. },
                ..
            } => ErrorKind::Transient,
            Error::Octavia { source, .. } if source.is_retryable() => ErrorKind::Transient,
            Error::Octavia { .. } => ErrorKind::Invalid,
            // Retried: the holder may be on its way out (an old load balancer being deleted).
            Error::VipTaken { .. } => ErrorKind::Transient,
            Error::Neutron {
                source: kuryr_openstack::Error::Conflict { .. },
                ..
            } => ErrorKind::Transient,
            Error::Neutron { source, .. } if source.is_retryable() => ErrorKind::Transient,
            Error::Neutron { .. } => ErrorKind::Invalid,
            Error::Kube { source, .. } => kube_kind(source),
            Error::NotSynced => ErrorKind::Transient,
            Error::Status { .. } => ErrorKind::Internal,
        }
    }

    fn metric_label(&self) -> &'static str {
        match self {
            Error::Status { .. } => "status",
            Error::Octavia { .. } | Error::VipTaken { .. } => "octavia",
            Error::Neutron { .. } => "neutron",
            Error::Kube { .. } => "kubernetes",
            Error::NotSynced => "not_synced",
        }
    }

    fn event_reason(&self) -> Option<&'static str> {
        match self {
            Error::NotSynced => None,
            _ if self.kind() == ErrorKind::Conflict => None,
            _ => Some("KuryrEnsureLBError"),
        }
    }
}

/// The handler.
pub struct KlbHandler {
    client: kube::Client,
    octavia: Arc<dyn Octavia>,
    neutron: Arc<dyn Neutron>,
    settings: LbSettings,
    /// `settings.tags`, shared with every observation.
    tags: Arc<[String]>,
    /// What each KLB (`ns/name`) was last warned about (see `LbObserved::warned`).
    warned: std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>,
    networks: Reflected<KuryrNetwork>,
    /// `[neutron_defaults] pod_subnet` as (CIDR, ID), read once at start.
    pod_subnet: Option<(String, String)>,
    events: crate::events::Events,
    metrics: Arc<crate::metrics::Metrics>,
}

impl KlbHandler {
    /// The subnets pods live on: the namespace subnets of the KuryrNetworks and the default pod
    /// subnet.
    fn subnets(&self) -> SubnetMap {
        let mut m = SubnetMap::default();
        if let Some((cidr, id)) = &self.pod_subnet {
            m.add(cidr, id);
        }
        for kn in self.networks.store().state() {
            if let Some(st) = &kn.status
                && let (Some(cidr), Some(id)) = (&st.subnet_cidr, &st.subnet_id)
            {
                m.add(cidr, id);
            }
        }
        m
    }

    fn key(klb: &KuryrLoadBalancer) -> String {
        format!("{}/{}", klb.namespace().unwrap_or_default(), klb.name_any())
    }

    fn octavia_err<'a>(what: &'static str, lb: &'a str) -> impl FnOnce(kuryr_openstack::Error) -> Error + 'a {
        move |source| Error::Octavia {
            what,
            lb: lb.to_string(),
            source,
        }
    }

    /// The load balancer the KLB records (or, when none or gone, the one named like it:
    /// adoption of upstream's or of a create whose answer was lost).
    async fn find_lb(
        &self,
        klb: &KuryrLoadBalancer,
    ) -> Result<Option<kuryr_openstack::octavia::LoadBalancer>, Error> {
        let name = Self::key(klb);
        if let Some(id) = klb
            .status
            .as_ref()
            .and_then(|s| s.loadbalancer.as_ref())
            .map(|l| l.id.clone())
            && !id.is_empty()
        {
            match self.octavia.get_load_balancer(&id).await {
                // The status names it: ours, or untagged (upstream's, switched over). One with
                // another cluster's tags is never taken, whatever the CR says.
                Ok(lb)
                    if self.octavia.version().tags()
                        && kuryr_core::ownership::claim_of(&self.settings.tags, &lb.tags)
                            == kuryr_core::ownership::Claim::Foreign =>
                {
                    warn!(lb = %name, id = %lb.id, "KuryrLoadBalancer names a load balancer that is not this cluster's: not used");
                }
                Ok(lb) => return Ok(Some(lb)),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Self::octavia_err("reading the load balancer", &name)(e)),
            }
        }
        let filter = LbFilter {
            name: Some(name.clone()),
            project_id: klb.spec.project_id.clone(),
            ..LbFilter::default()
        };
        let mut found = self
            .octavia
            .list_load_balancers(&filter)
            .await
            .map_err(Self::octavia_err("looking up the load balancer", &name))?;
        // By name, only ours: with tags configured (the cluster tag) a load balancer of another
        // cluster sharing the project is never taken. Upstream's are found by the ID their KLB
        // status records, above.
        if self.octavia.version().tags() {
            found.retain(|lb| self.settings.tags.iter().all(|t| lb.tags.contains(t)));
        }
        // A live one first (an old one may still be PENDING_DELETE during a recreation).
        found.sort_by_key(|lb| lb.provisioning_status == status::PENDING_DELETE);
        Ok(found.into_iter().next())
    }

    async fn observe_klb(&self, klb: &Arc<KuryrLoadBalancer>) -> Result<LbObserved, Error> {
        if !self.networks.is_synced() {
            return Err(Error::NotSynced);
        }
        let name = Self::key(klb);
        let lb = self.find_lb(klb).await?;
        let tree = match &lb {
            Some(lb) if lb.provisioning_status == status::ACTIVE => Some(
                self.octavia
                    .status_tree(&lb.id)
                    .await
                    .map_err(Self::octavia_err("reading the status tree", &name))?,
            ),
            _ => None,
        };
        let desired = desired::desired(klb, &self.settings, self.octavia.version(), &self.subnets());
        let options = match (&lb, &desired) {
            (Some(lb), Ok(d)) if d.options_apply && lb.provisioning_status == status::ACTIVE => {
                let listeners = self
                    .octavia
                    .list_listeners(&lb.id)
                    .await
                    .map_err(Self::octavia_err("listing listeners", &name))?;
                let pools = self
                    .octavia
                    .list_pools(&lb.id)
                    .await
                    .map_err(Self::octavia_err("listing pools", &name))?;
                Some(LbOptions { listeners, pools })
            }
            _ => None,
        };
        let status = klb.status.clone().unwrap_or_default();
        let want_public = desired.as_ref().ok().and_then(|d| d.public_ip.clone());
        let fip = if want_public.is_some() || status.service_pub_ip_info.is_some() {
            self.observe_fips(
                klb,
                lb.as_ref().map(|l| l.vip_port_id.as_str()),
                want_public.as_ref(),
                &status,
            )
            .await?
        } else {
            FipObserved::default()
        };
        let health_monitors = self.health_monitors(&name, tree.as_ref(), &desired).await?;
        let warned = self.warned().get(&name).cloned().unwrap_or_default();
        Ok(LbObserved {
            warned,
            health_monitors,
            klb: klb.clone(),
            deleting: klb.metadata.deletion_timestamp.is_some(),
            has_finalizer: klb.finalizers().iter().any(|f| f == KURYRLB_FINALIZER),
            lb,
            tree,
            desired,
            status,
            options,
            fip,
            tags: self.tags.clone(),
        })
    }

    /// What each KLB was last warned about (a poisoned lock still holds a usable map).
    fn warned(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Vec<String>>> {
        self.warned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The settings of the health monitors that desired listeners keep (one `GET` each; only
    /// for Services asking for one, and not for monitors in ERROR, which are left alone).
    async fn health_monitors(
        &self,
        name: &str,
        tree: Option<&kuryr_openstack::octavia::StatusTree>,
        desired: &Result<desired::DesiredLb, desired::SpecError>,
    ) -> Result<std::collections::BTreeMap<String, kuryr_openstack::octavia::HealthMonitorSettings>, Error>
    {
        let mut out = std::collections::BTreeMap::new();
        let (Some(tree), Ok(d)) = (tree, desired) else {
            return Ok(out);
        };
        for l in &tree.listeners {
            if !d
                .listeners
                .iter()
                .any(|w| w.name == l.name && w.health_monitor.is_some())
            {
                continue;
            }
            for hm in l.pools.iter().filter_map(|p| p.health_monitor.as_ref()) {
                if hm.provisioning_status == status::ERROR {
                    continue;
                }
                let s = self
                    .octavia
                    .get_health_monitor(&hm.id)
                    .await
                    .map_err(Self::octavia_err("reading a health monitor", name))?;
                out.insert(hm.id.clone(), s);
            }
        }
        Ok(out)
    }

    /// After a write: waits up to [`SETTLE_WAIT`] for the load balancer to leave `PENDING_*`,
    /// then plans again from a fresh observation; still busy: look again later.
    async fn settle(&self, klb: &KuryrLoadBalancer, lb_id: &str) -> Result<Flow<LbObserved>, Error> {
        let name = Self::key(klb);
        let started = tokio::time::Instant::now();
        let mut poll = SETTLE_POLL;
        loop {
            tokio::time::sleep(poll).await;
            poll = (poll * 2).min(SETTLE_POLL_MAX);
            let lb = match self.octavia.get_load_balancer(lb_id).await {
                Ok(lb) => lb,
                Err(e) if e.is_not_found() => break,
                Err(e) => return Err(Self::octavia_err("waiting for the load balancer", &name)(e)),
            };
            if !status::is_pending(&lb.provisioning_status) {
                break;
            }
            if started.elapsed() >= SETTLE_WAIT {
                return Ok(Flow::Stop(Then::Requeue(PENDING_POLL)));
            }
        }
        let fresh = Arc::new(self.live_klb(klb).await?);
        Ok(Flow::Replan(self.observe_klb(&fresh).await?))
    }

    async fn live_klb(&self, klb: &KuryrLoadBalancer) -> Result<KuryrLoadBalancer, Error> {
        let api: Api<KuryrLoadBalancer> =
            Api::namespaced(self.client.clone(), &klb.namespace().unwrap_or_default());
        api.get(&klb.name_any()).await.map_err(|source| Error::Kube {
            what: "reading",
            klb: Self::key(klb),
            source,
        })
    }

    /// Writes the given members of the KLB's status (a JSON merge patch on the object: upstream's
    /// CRD has no status subresource). Only the fields a step owns are sent, so a write planned
    /// from a lagging cache never erases another field written meanwhile (the floating IP's
    /// record, written by its own steps). A KLB already gone is fine.
    async fn patch_status_fields(
        &self,
        klb: &KuryrLoadBalancer,
        fields: serde_json::Value,
    ) -> Result<(), Error> {
        let api: Api<KuryrLoadBalancer> =
            Api::namespaced(self.client.clone(), &klb.namespace().unwrap_or_default());
        let patch = serde_json::json!({ "status": fields });
        match api
            .patch(&klb.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if api_code(&e) == Some(404) => Ok(()),
            Err(source) => Err(Error::Kube {
                what: "writing the status",
                klb: Self::key(klb),
                source,
            }),
        }
    }

    /// Writes what the load-balancer steps own of `st`: the load balancer, listeners, pools and
    /// members (not the floating IP's record).
    async fn patch_status(
        &self,
        klb: &KuryrLoadBalancer,
        st: &kuryr_types::KuryrLoadBalancerStatus,
    ) -> Result<(), Error> {
        let render = |v: serde_json::Result<serde_json::Value>| {
            v.map_err(|e| Error::Status {
                klb: Self::key(klb),
                message: e.to_string(),
            })
        };
        let fields = serde_json::json!({
            "loadbalancer": render(serde_json::to_value(&st.loadbalancer))?,
            "listeners": render(serde_json::to_value(&st.listeners))?,
            "pools": render(serde_json::to_value(&st.pools))?,
            "members": render(serde_json::to_value(&st.members))?,
        });
        self.patch_status_fields(klb, fields).await
    }

    fn service_ref(klb: &KuryrLoadBalancer) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Service".into()),
            namespace: klb.namespace(),
            name: Some(klb.name_any()),
            uid: klb
                .owner_references()
                .iter()
                .find(|o| o.kind == "Service")
                .map(|o| o.uid.clone()),
            ..ObjectReference::default()
        }
    }
}

impl Handler for KlbHandler {
    type Object = KuryrLoadBalancer;
    type Observed = LbObserved;
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, klb: &Arc<KuryrLoadBalancer>, _live: bool) -> Result<LbObserved, Error> {
        self.observe_klb(klb).await
    }

    fn plan(&self, o: &LbObserved) -> Plan<Step> {
        plan::plan(o)
    }

    async fn execute(&self, o: &LbObserved, step: Step) -> Result<Flow<LbObserved>, Error> {
        self.execute_step(o, step).await
    }

    fn event_target(&self, obj: &KuryrLoadBalancer) -> ObjectReference {
        Self::service_ref(obj)
    }
}

/// The load-balancer settings from `[octavia_defaults]` and `[neutron_defaults]`.
pub fn settings(config: &kuryr_config::Config) -> LbSettings {
    let od = &config.octavia_defaults;
    let nd = &config.neutron_defaults;
    let mut tags = nd.resource_tags.clone();
    if let Some(t) = &nd.cluster_tag
        && !tags.contains(t)
    {
        tags.push(t.clone());
    }
    LbSettings {
        lb_algorithm: if od.lb_algorithm.is_empty() {
            "ROUND_ROBIN".into()
        } else {
            od.lb_algorithm.clone()
        },
        member_mode_l2: od.member_mode.eq_ignore_ascii_case("L2"),
        tags,
        timeout_client_data: i64::try_from(od.timeout_client_data.as_millis()).unwrap_or(0),
        timeout_member_data: i64::try_from(od.timeout_member_data.as_millis()).unwrap_or(0),
        external_net: nd.external_svc_net.clone(),
        external_subnet: nd.external_svc_subnet.clone(),
    }
}

/// Runs the handler (what `cli::spawn_handlers` starts): KuryrLoadBalancers, and again when a
/// KuryrNetwork changes nothing (member subnets come from their cache).
pub async fn start(ctx: Arc<Context>) {
    let Some(os) = ctx.openstack.clone() else {
        error!(handler = HANDLER, "no OpenStack connection");
        return ctx.health.handler_died(HANDLER);
    };
    let Some(octavia) = os.octavia.clone() else {
        error!(handler = HANDLER, "no Octavia connection");
        return ctx.health.handler_died(HANDLER);
    };
    let mut pod_subnet = None;
    if let Some(id) = ctx.config.neutron_defaults.pod_subnet.clone() {
        loop {
            match os.neutron.get_subnet(&id).await {
                Ok(s) => {
                    pod_subnet = Some((s.cidr.clone(), id));
                    break;
                }
                Err(e) if e.is_retryable() => {
                    warn!(handler = HANDLER, error = %crate::error_chain(&e), "reading the pod subnet; retrying");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                Err(e) => {
                    warn!(handler = HANDLER, error = %crate::error_chain(&e), "pod subnet unreadable: members on it get no subnet");
                    break;
                }
            }
        }
    }
    run_with(ctx, octavia, os.neutron.clone(), pod_subnet).await;
}

/// Runs the handler with `octavia` and `neutron` (what [`start`] does once connected; tests give
/// fakes):
/// `pod_subnet` is `[neutron_defaults] pod_subnet` as (CIDR, ID).
pub async fn run_with(
    ctx: Arc<Context>,
    octavia: Arc<dyn Octavia>,
    neutron: Arc<dyn Neutron>,
    pod_subnet: Option<(String, String)>,
) {
    let networks = match Reflected::spawn(ctx.client.clone(), "kuryrnetworks") {
        Ok(r) => r,
        Err(e) => {
            error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            return ctx.health.handler_died(HANDLER);
        }
    };
    let settings = settings(&ctx.config);
    let handler = Arc::new(KlbHandler {
        client: ctx.client.clone(),
        octavia,
        neutron,
        tags: settings.tags.clone().into(),
        warned: Default::default(),
        settings,
        networks,
        pod_subnet,
        events: ctx.events.clone(),
        metrics: ctx.metrics.clone(),
    });
    let controller = Controller::new(
        Api::<KuryrLoadBalancer>::all(ctx.client.clone()),
        watcher::Config::default(),
    );
    let janitor = janitor::run(janitor::Janitor {
        octavia: handler.octavia.clone(),
        neutron: handler.neutron.clone(),
        external_net: handler.settings.external_net.clone(),
        tags: handler.settings.tags.clone(),
        store: controller.store(),
        metrics: ctx.metrics.clone(),
        health: ctx.health.clone(),
    });
    scaffold::run(ctx, handler, controller, async {}, janitor).await;
}

#[cfg(test)]
mod tests;
