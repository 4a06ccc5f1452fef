//! The Service handler (upstream's `ServiceHandler`, `enabled_handlers` name `service`): a
//! Service that needs a load balancer gets the Service finalizer, then a KuryrLoadBalancer of
//! the same name (owned by it) whose spec follows the Service — ports, ClusterIP, type,
//! `loadBalancerIP`, timeout annotations — as a minimal merge patch. A deleted Service (or one
//! that became headless or ExternalName) has its KLB deleted; the KLB handler then releases the
//! load balancer and both finalizers.

pub mod plan;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::{Controller, watcher},
};
use kuryr_types::{KuryrLoadBalancer, constants::SERVICE_FINALIZER};
use serde_json::json;
use tracing::{debug, error, info};

use self::plan::{Step, SvcObserved, SvcSettings};
use super::scaffold::{self, ErrorKind, Flow, Handler, HandlerError, Plan, api_code, kube_kind};
use crate::{Context, drivers::Reflected, finalizer};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "service";

/// How long a new Service with a selector waits for its first EndpointSlice before its KLB is
/// created without endpoints.
const SLICE_WAIT_SECS: i64 = 3;

/// How soon to look again when a KLB being deleted must be recreated.
pub const RECREATE_POLL: Duration = Duration::from_secs(1);

/// A failed step (of this handler and of the endpoints handler).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes call failed.
    #[error("{what} for Service {svc}")]
    Kube {
        /// What was done.
        what: &'static str,
        /// Service namespace/name.
        svc: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// A cache (KLBs, EndpointSlices) has not listed yet.
    #[error("caches not listed yet")]
    NotSynced,
}

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Kube { source, .. } => kube_kind(source),
            Error::NotSynced => ErrorKind::Transient,
        }
    }
    fn metric_label(&self) -> &'static str {
        match self {
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
pub struct SvcHandler {
    client: kube::Client,
    settings: SvcSettings,
    klbs: Reflected<KuryrLoadBalancer>,
    slices: Reflected<EndpointSlice>,
}

impl SvcHandler {}

/// The Service settings from `kuryr.conf`.
pub fn settings(config: &kuryr_config::Config) -> SvcSettings {
    let nd = &config.neutron_defaults;
    let provider = config.kubernetes.endpoints_driver_octavia_provider.clone();
    SvcSettings {
        project_id: nd.project.clone().unwrap_or_default(),
        subnet_id: nd.service_subnet.clone().unwrap_or_default(),
        security_groups: nd.pod_security_groups.clone(),
        provider: (!provider.is_empty() && provider != "default").then_some(provider),
    }
}

impl Handler for SvcHandler {
    type Object = Service;
    type Observed = SvcObserved;
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, svc: &Arc<Service>, live: bool) -> Result<SvcObserved, Error> {
        if !self.klbs.is_synced() || !self.slices.is_synced() {
            return Err(Error::NotSynced);
        }
        let ns = svc.namespace().unwrap_or_default();
        let klb = if live {
            Api::<KuryrLoadBalancer>::namespaced(self.client.clone(), &ns)
                .get_opt(&svc.name_any())
                .await
                .map_err(|source| Error::Kube {
                    what: "reading the KuryrLoadBalancer",
                    svc: format!("{ns}/{}", svc.name_any()),
                    source,
                })?
        } else {
            self.klbs
                .get(Some(&ns), &svc.name_any())
                .map(|k| k.as_ref().clone())
        };
        let (slices, await_slices) = if klb.is_none() {
            let all = self.slices.store().state();
            let mine: Vec<&EndpointSlice> = all
                .iter()
                .map(AsRef::as_ref)
                .filter(|s| s.namespace().as_deref() == Some(ns.as_str()))
                .filter(|s| s.labels().get(super::endpoints::SERVICE_NAME_LABEL) == Some(&svc.name_any()))
                .collect();
            let selector = svc
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .is_some_and(|m| !m.is_empty());
            let young = svc
                .metadata
                .creation_timestamp
                .as_ref()
                .is_some_and(|t| jiff::Timestamp::now().duration_since(t.0).as_secs() < SLICE_WAIT_SECS);
            (
                super::endpoints::convert::from_slices(&mine),
                selector && mine.is_empty() && young,
            )
        } else {
            (Vec::new(), false)
        };
        Ok(SvcObserved {
            svc: svc.as_ref().clone(),
            klb,
            slices,
            await_slices,
            settings: self.settings.clone(),
        })
    }

    fn plan(&self, o: &SvcObserved) -> Plan<Step> {
        plan::plan(o)
    }

    async fn execute(&self, o: &SvcObserved, step: Step) -> Result<Flow<SvcObserved>, Error> {
        let ns = o.svc.namespace().unwrap_or_default();
        let name = o.svc.name_any();
        let key = format!("{ns}/{name}");
        let kerr = |what: &'static str| {
            let svc = key.clone();
            move |source| Error::Kube { what, svc, source }
        };
        let svcs: Api<Service> = Api::namespaced(self.client.clone(), &ns);
        let klbs: Api<KuryrLoadBalancer> = Api::namespaced(self.client.clone(), &ns);
        match step {
            Step::AddFinalizer => {
                finalizer::add(&svcs, &o.svc, SERVICE_FINALIZER)
                    .await
                    .map_err(kerr("adding the finalizer"))?;
                let mut next = o.clone();
                let mut f = next.svc.finalizers().to_vec();
                f.push(SERVICE_FINALIZER.into());
                next.svc.metadata.finalizers = Some(f);
                return Ok(Flow::Replan(next));
            }
            Step::CreateKlb(spec) => {
                let klb = plan::new_klb(&o.svc, *spec);
                match klbs.create(&PostParams::default(), &klb).await {
                    Ok(_) => info!(svc = %key, "KuryrLoadBalancer created"),
                    Err(e) if api_code(&e) == Some(409) => debug!(svc = %key, "KuryrLoadBalancer exists"),
                    Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("being terminated") => {
                        debug!(svc = %key, "namespace terminating, KuryrLoadBalancer not created");
                    }
                    Err(e) => return Err(kerr("creating the KuryrLoadBalancer")(e)),
                }
            }
            Step::UpdateKlb(spec) => {
                // Never a `spec: null` patch: a spec that does not render is skipped loudly.
                let mut v = match serde_json::to_value(&*spec) {
                    Ok(v) => v,
                    Err(e) => {
                        error!(svc = %key, error = %e, "KuryrLoadBalancer spec does not render; not updated");
                        return Ok(Flow::Next);
                    }
                };
                // Unset fields are removed (a merge patch nulls them); endpointSlices are not ours.
                if let Some(m) = v.as_object_mut() {
                    for k in [
                        "ip",
                        "lb_ip",
                        "ports",
                        "project_id",
                        "security_groups_ids",
                        "subnet_id",
                        "type",
                        "provider",
                        "timeout_client_data",
                        "timeout_member_data",
                        "source_ranges",
                        "session_affinity",
                        "health_monitor",
                    ] {
                        m.entry(k).or_insert(serde_json::Value::Null);
                    }
                }
                let p = json!({ "spec": v });
                match klbs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&p))
                    .await
                {
                    Ok(_) => info!(svc = %key, "KuryrLoadBalancer spec updated"),
                    Err(e) if api_code(&e) == Some(404) => {}
                    Err(e) => return Err(kerr("updating the KuryrLoadBalancer")(e)),
                }
            }
            Step::DeleteKlb => match klbs.delete(&name, &DeleteParams::default()).await {
                Ok(_) => info!(svc = %key, "KuryrLoadBalancer deleted"),
                Err(e) if api_code(&e) == Some(404) => {}
                Err(e) => return Err(kerr("deleting the KuryrLoadBalancer")(e)),
            },
            Step::RemoveFinalizer => finalizer::remove(&svcs, &o.svc, SERVICE_FINALIZER)
                .await
                .map_err(kerr("removing the finalizer"))?,
        }
        Ok(Flow::Next)
    }
}

/// Runs the handler: Services, and again when their KLB changes.
pub async fn start(ctx: Arc<Context>) {
    let caches = Reflected::spawn(ctx.client.clone(), "kuryrloadbalancers")
        .and_then(|k| Ok((k, Reflected::spawn(ctx.client.clone(), "endpointslices")?)));
    let (klbs, slices) = match caches {
        Ok(r) => r,
        Err(e) => {
            error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            return ctx.health.handler_died(HANDLER);
        }
    };
    let handler = Arc::new(SvcHandler {
        client: ctx.client.clone(),
        settings: settings(&ctx.config),
        klbs,
        slices,
    });
    let client = ctx.client.clone();
    let controller = Controller::new(Api::<Service>::all(client.clone()), watcher::Config::default())
        .watches(
            Api::<KuryrLoadBalancer>::all(client),
            watcher::Config::default(),
            |k: KuryrLoadBalancer| super::same_name::<Service, _>(&k),
        );
    scaffold::run(ctx, handler, controller, async {}, async {}).await;
}
