//! The Pod handler (upstream's `VIFHandler`, `enabled_handlers` name `vif`): keeps one
//! KuryrPort per scheduled, non-host-network pod, guarded by the pod finalizer, and deletes it
//! when the pod is deleted or completes. Decisions live in [`plan`]; this module executes them.

pub mod plan;

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, PostParams, Preconditions},
    runtime::{
        Controller, WatchStreamExt,
        controller::Action,
        events::{Event, EventType},
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use kuryr_types::{KuryrPort, constants::POD_FINALIZER};
use tracing::{debug, info, warn};

use crate::{Context, finalizer};
use kube::runtime::reflector::reflector;
use plan::Step;

/// How soon a pod whose KuryrPort is being deleted is looked at again.
const RELEASE_RECHECK: Duration = Duration::from_secs(1);

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "vif";

/// A failed step of the pod handler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pod has no namespace (the watch only yields namespaced pods: an invariant).
    #[error("pod {0} has no namespace")]
    MissingNamespace(String),
    /// Reading the pod's KuryrPort failed.
    #[error("getting KuryrPort {ns}/{name}")]
    GetPort {
        /// Namespace.
        ns: String,
        /// Pod and KuryrPort name.
        name: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Adding the pod finalizer failed.
    #[error("adding finalizer to pod {ns}/{name}")]
    AddFinalizer {
        /// Namespace.
        ns: String,
        /// Pod name.
        name: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Creating the KuryrPort failed.
    #[error("creating KuryrPort {ns}/{name}")]
    CreatePort {
        /// Namespace.
        ns: String,
        /// Pod and KuryrPort name.
        name: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Deleting the KuryrPort failed.
    #[error("deleting KuryrPort {ns}/{name}")]
    DeletePort {
        /// Namespace.
        ns: String,
        /// Pod and KuryrPort name.
        name: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Removing the pod finalizer failed.
    #[error("removing finalizer from pod {ns}/{name}")]
    RemoveFinalizer {
        /// Namespace.
        ns: String,
        /// Pod name.
        name: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Label of the `outcome` of `kuryr_reconcile_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::MissingNamespace(_) => "missing_namespace",
            Error::GetPort { .. } => "get_port",
            Error::AddFinalizer { .. } => "add_finalizer",
            Error::CreatePort { .. } => "create_port",
            Error::DeletePort { .. } => "delete_port",
            Error::RemoveFinalizer { .. } => "remove_finalizer",
        }
    }

    /// Reason of the Warning Event recorded on the pod (upstream's names where upstream had one).
    pub fn event_reason(&self) -> &'static str {
        match self {
            Error::AddFinalizer { .. } => "FailedToAddFinalizerToPod",
            Error::CreatePort { .. } => "FailedToCreateKuryrPortCRD",
            Error::DeletePort { .. } => "FailedToDeleteKuryrPortCRD",
            Error::RemoveFinalizer { .. } => "FailedToRemoveFinalizerFromPod",
            Error::GetPort { .. } | Error::MissingNamespace(_) => "FailedToGetKuryrPortCRD",
        }
    }

    fn kube_source(&self) -> Option<&kube::Error> {
        match self {
            Error::MissingNamespace(_) => None,
            Error::GetPort { source, .. }
            | Error::AddFinalizer { source, .. }
            | Error::CreatePort { source, .. }
            | Error::DeletePort { source, .. }
            | Error::RemoveFinalizer { source, .. } => Some(source),
        }
    }

    /// When to retry: soon after a write conflict (stale cache), later for other failures.
    pub fn requeue_after(&self) -> Duration {
        match self.kube_source() {
            Some(e) if finalizer::is_conflict(e) => Duration::from_millis(200),
            Some(_) => Duration::from_secs(2),
            None => Duration::from_secs(300),
        }
    }
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Runs the pod handler until the watch streams end: a kube-runtime `Controller` on Pods that
/// also reacts to changes of the KuryrPorts they own. Reports sync and death to
/// [`Context::health`].
pub async fn run(ctx: Arc<Context>) {
    let pods: Api<Pod> = Api::all(ctx.client.clone());
    let ports: Api<KuryrPort> = Api::all(ctx.client.clone());
    // The cache of KuryrPorts for reconcile; `.owns()` below keeps its own watch for the
    // triggers (sharing one needs kube's unstable stream API).
    let (ports_store, ports_writer) = reflector::store();
    let ports_cache = reflector(ports_writer, watcher(ports.clone(), watcher::Config::default()))
        .default_backoff()
        .for_each(|_| futures::future::ready(()));
    let controller =
        Controller::new(pods, watcher::Config::default()).owns(ports, watcher::Config::default());
    let (pods_store, ports_ready) = (controller.store(), ports_store.clone());
    let health = ctx.health.clone();
    let synced = async move {
        super::wait_ready(&pods_store, HANDLER).await;
        super::wait_ready(&ports_ready, HANDLER).await;
        info!(handler = HANDLER, "pod and KuryrPort watchers synced");
        health.synced();
        std::future::pending::<()>().await;
    };
    let handler_ctx = Arc::new(PodContext {
        ctx: ctx.clone(),
        ports: ports_store,
    });
    let reconciler = controller
        .run(reconcile, error_policy, handler_ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(ns = ?obj.namespace, pod = %obj.name, "reconciled"),
                Err(e) => warn!(error = %e, "pod controller error"),
            }
        });
    // All three are owned by this future: aborting the handler stops its watches too.
    tokio::select! {
        _ = reconciler => {}
        _ = ports_cache => {}
        _ = synced => {}
    }
    warn!(handler = HANDLER, "handler loop ended");
    ctx.health.handler_died(HANDLER);
}

/// The pod handler's context: the shared [`Context`] and the KuryrPort cache.
pub struct PodContext {
    /// Shared controller context.
    pub ctx: Arc<Context>,
    /// Every KuryrPort, as last seen by the watch.
    pub ports: Store<KuryrPort>,
}

/// Reconciles one pod; counts the outcome and records a Warning Event on the pod on failure.
pub async fn reconcile(pod: Arc<Pod>, hctx: Arc<PodContext>) -> Result<Action, Error> {
    let ctx = &hctx.ctx;
    let res = apply(&pod, ctx, &hctx.ports).await;
    match &res {
        Ok(_) => ctx.metrics.reconciled(HANDLER, "ok"),
        Err(e) => {
            ctx.metrics.reconciled(HANDLER, e.metric_label());
            let chain = crate::error_chain(e);
            warn!(ns = pod.namespace().unwrap_or_default(), pod = %pod.name_any(),
                error = %chain, "pod handler failed");
            if ctx.config.kubernetes.use_events {
                let event = Event {
                    type_: EventType::Warning,
                    reason: e.event_reason().into(),
                    note: Some(chain),
                    action: "Reconcile".into(),
                    secondary: None,
                };
                if let Err(err) = ctx.recorder.publish(&event, &pod.object_ref(&())).await {
                    debug!(error = %err, "recording event failed");
                }
            }
        }
    }
    res
}

/// Requeue policy of the pod handler.
pub fn error_policy(_pod: Arc<Pod>, error: &Error, _ctx: Arc<PodContext>) -> Action {
    Action::requeue(error.requeue_after())
}

async fn apply(pod: &Pod, ctx: &Context, cache: &Store<KuryrPort>) -> Result<Action, Error> {
    let name = pod.name_any();
    let ns = pod
        .namespace()
        .ok_or_else(|| Error::MissingNamespace(name.clone()))?;
    let ports: Api<KuryrPort> = Api::namespaced(ctx.client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    // The cache answers the steady state without API calls; decisions taken on the port's
    // absence (create it, drop the pod finalizer) are confirmed by a live read.
    let cached = cache
        .get(&ObjectRef::new(&name).within(&ns))
        .map(|p| KuryrPort::clone(&p));
    let mut port = cached;
    let mut plan = plan::plan(pod, port.as_ref());
    if plan.relies_on_absent_port() || plan.awaits_port_release() {
        port = ports.get_opt(&name).await.map_err(|source| Error::GetPort {
            ns: ns.clone(),
            name: name.clone(),
            source,
        })?;
        plan = plan::plan(pod, port.as_ref());
    }
    if !plan.steps.is_empty() {
        debug!(%ns, pod = %name, reason = plan.reason, steps = plan.steps.len(), "executing plan");
    }
    let awaits_release = plan.awaits_port_release();
    for step in plan.steps {
        match step {
            Step::AddPodFinalizer => {
                finalizer::add(&pods, pod, POD_FINALIZER)
                    .await
                    .map_err(|source| Error::AddFinalizer {
                        ns: ns.clone(),
                        name: name.clone(),
                        source,
                    })?;
                debug!(%ns, pod = %name, "pod finalizer added");
            }
            Step::CreatePort(kp) => match ports.create(&PostParams::default(), &kp).await {
                Ok(_) => info!(%ns, pod = %name, node = %kp.spec.pod_node_name, "KuryrPort created"),
                Err(e) if api_code(&e) == Some(409) => debug!(%ns, pod = %name, "KuryrPort exists"),
                Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("being terminated") => {
                    info!(%ns, pod = %name, "namespace terminating, KuryrPort not created");
                }
                Err(source) => {
                    return Err(Error::CreatePort {
                        ns: ns.clone(),
                        name: name.clone(),
                        source,
                    });
                }
            },
            Step::DeletePort => {
                let gone = delete_port(&ports, port.as_ref())
                    .await
                    .map_err(|source| Error::DeletePort {
                        ns: ns.clone(),
                        name: name.clone(),
                        source,
                    })?;
                info!(%ns, pod = %name, gone, "KuryrPort deleted");
                let releasing = pod.meta().deletion_timestamp.is_some() || plan::is_completed(pod);
                if gone && releasing && pod.finalizers().iter().any(|f| f == POD_FINALIZER) {
                    remove_pod_finalizer(&pods, pod, &ns, &name).await?;
                }
            }
            Step::RemovePodFinalizer => remove_pod_finalizer(&pods, pod, &ns, &name).await?,
        }
    }
    if awaits_release {
        // The KuryrPort's own deletion event may have been consumed before the port cache saw
        // it; do not rely on the next event, look again shortly.
        return Ok(Action::requeue(RELEASE_RECHECK));
    }
    let period = ctx.config.kubernetes.watch_reconcile_period;
    // Upstream re-lists every `watch_reconcile_period`; zero disables it.
    Ok(if period.is_zero() {
        Action::await_change()
    } else {
        Action::requeue(period)
    })
}

/// Deletes `port` (only that incarnation: UID precondition); `true` if it is gone already.
async fn delete_port(ports: &Api<KuryrPort>, port: Option<&KuryrPort>) -> Result<bool, kube::Error> {
    let Some(port) = port else { return Ok(true) };
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: port.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match ports.delete(&port.name_any(), &dp).await {
        Ok(either) => Ok(either.is_right()),
        Err(e) if api_code(&e) == Some(404) => Ok(true),
        // UID precondition failed: another KuryrPort took the name, this one is gone.
        Err(e) if api_code(&e) == Some(409) => Ok(true),
        Err(e) => Err(e),
    }
}

async fn remove_pod_finalizer(pods: &Api<Pod>, pod: &Pod, ns: &str, name: &str) -> Result<(), Error> {
    match finalizer::remove(pods, pod, POD_FINALIZER).await {
        Ok(()) => {
            info!(%ns, pod = %name, "pod finalizer removed");
            Ok(())
        }
        Err(e) if api_code(&e) == Some(404) => Ok(()),
        Err(source) => Err(Error::RemoveFinalizer {
            ns: ns.to_owned(),
            name: name.to_owned(),
            source,
        }),
    }
}
