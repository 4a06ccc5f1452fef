//! The Pod handler (upstream's `VIFHandler`, `enabled_handlers` name `vif`): keeps one
//! KuryrPort per scheduled, non-host-network pod, guarded by the pod finalizer, and deletes it
//! when the pod is deleted or completes. Decisions live in [`plan`]; this module observes and
//! executes them under the handler [`scaffold`].

pub mod plan;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, PostParams, Preconditions},
    runtime::{
        Controller, WatchStreamExt,
        reflector::{self, ObjectRef, Store, reflector},
        watcher,
    },
};
use kube_lean::Lean;
use kuryr_types::{KuryrPort, constants::POD_FINALIZER};
use tracing::{debug, info};

use super::scaffold::{self, ErrorKind, Flow, Handler, HandlerError, api_code};
use crate::{Context, finalizer};
use plan::Step;

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
}

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        match self.kube_source() {
            Some(e) => scaffold::kube_kind(e),
            None => ErrorKind::Internal,
        }
    }

    fn metric_label(&self) -> &'static str {
        match self {
            Error::MissingNamespace(_) => "missing_namespace",
            Error::GetPort { .. } => "get_port",
            Error::AddFinalizer { .. } => "add_finalizer",
            Error::CreatePort { .. } => "create_port",
            Error::DeletePort { .. } => "delete_port",
            Error::RemoveFinalizer { .. } => "remove_finalizer",
        }
    }

    /// Upstream's reasons where upstream had one; none for a lost race retried at once.
    fn event_reason(&self) -> Option<&'static str> {
        if self.kind() == ErrorKind::Conflict {
            return None;
        }
        Some(match self {
            Error::AddFinalizer { .. } => "FailedToAddFinalizerToPod",
            Error::CreatePort { .. } => "FailedToCreateKuryrPortCRD",
            Error::DeletePort { .. } => "FailedToDeleteKuryrPortCRD",
            Error::RemoveFinalizer { .. } => "FailedToRemoveFinalizerFromPod",
            Error::GetPort { .. } | Error::MissingNamespace(_) => "FailedToGetKuryrPortCRD",
        })
    }
}

/// Runs the pod handler until the watch streams end: a kube-runtime `Controller` on Pods that
/// also reacts to changes of the KuryrPorts they own, under the [`scaffold`].
pub async fn run(ctx: Arc<Context>) {
    // Pods and KuryrPorts are decoded without managedFields (kube_lean): no step reads them.
    let pods: Api<Lean<Pod>> = Api::all(ctx.client.clone());
    let ports: Api<Lean<KuryrPort>> = Api::all(ctx.client.clone());
    // The cache of KuryrPorts for observation; `.owns()` below keeps its own watch for the
    // triggers (sharing one needs kube's unstable stream API).
    let (ports_store, ports_writer) = reflector::store();
    let ports_cache = reflector(
        ports_writer,
        kube_lean::watcher(ports.clone(), watcher::Config::default()),
    )
    .default_backoff()
    .for_each(|_| futures::future::ready(()));
    let controller =
        Controller::new(pods, watcher::Config::default()).owns(ports, watcher::Config::default());
    let ready_store = ports_store.clone();
    let ready = async move { super::wait_ready(&ready_store, HANDLER).await };
    let handler = Arc::new(PodHandler {
        client: ctx.client.clone(),
        ports: ports_store,
    });
    scaffold::run(ctx, handler, controller, ready, ports_cache).await;
}

/// The pod handler: the Kubernetes client and the KuryrPort cache.
pub struct PodHandler {
    /// Kubernetes.
    pub client: kube::Client,
    /// Every KuryrPort, as last seen by the watch.
    pub ports: Store<KuryrPort>,
}

/// What the pod plan looks at: the pod and its KuryrPort (same name and namespace).
pub struct PodObserved {
    /// The pod.
    pub pod: Arc<Lean<Pod>>,
    /// Its namespace.
    pub ns: String,
    /// Its KuryrPort, from the cache or (live) from the API server.
    pub port: Option<KuryrPort>,
}

impl Handler for PodHandler {
    type Object = Lean<Pod>;
    type Observed = PodObserved;
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, pod: &Arc<Lean<Pod>>, live: bool) -> Result<PodObserved, Error> {
        let name = pod.name_any();
        let ns = pod
            .namespace()
            .ok_or_else(|| Error::MissingNamespace(name.clone()))?;
        // The cache answers the steady state without API calls; decisions taken on the port's
        // absence (create it, drop the pod finalizer) are confirmed by a live read.
        let port = if live {
            Api::<KuryrPort>::namespaced(self.client.clone(), &ns)
                .get_opt(&name)
                .await
                .map_err(|source| Error::GetPort {
                    ns: ns.clone(),
                    name: name.clone(),
                    source,
                })?
        } else {
            self.ports
                .get(&ObjectRef::new(&name).within(&ns))
                .map(|p| KuryrPort::clone(&p))
        };
        Ok(PodObserved {
            pod: pod.clone(),
            ns,
            port,
        })
    }

    fn plan(&self, o: &PodObserved) -> plan::Plan {
        plan::plan(&o.pod, o.port.as_ref())
    }

    async fn execute(&self, o: &PodObserved, step: Step) -> Result<Flow<PodObserved>, Error> {
        let (pod, ns, name) = (&o.pod.0, &o.ns, o.pod.name_any());
        let ports: Api<KuryrPort> = Api::namespaced(self.client.clone(), ns);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
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
                        name,
                        source,
                    });
                }
            },
            Step::DeletePort => {
                let gone =
                    delete_port(&ports, o.port.as_ref())
                        .await
                        .map_err(|source| Error::DeletePort {
                            ns: ns.clone(),
                            name: name.clone(),
                            source,
                        })?;
                info!(%ns, pod = %name, gone, "KuryrPort deleted");
                let releasing = pod.meta().deletion_timestamp.is_some() || plan::is_completed(pod);
                if gone && releasing && pod.finalizers().iter().any(|f| f == POD_FINALIZER) {
                    remove_pod_finalizer(&pods, pod, ns, &name).await?;
                }
            }
            Step::RemovePodFinalizer => remove_pod_finalizer(&pods, pod, ns, &name).await?,
        }
        Ok(Flow::Next)
    }
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
