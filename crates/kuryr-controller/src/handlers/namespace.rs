//! The Namespace handler (upstream's `NamespaceHandler`, `enabled_handlers` name
//! `namespace`): creates the namespace's KuryrNetwork (same name, with its finalizer, the
//! project of `[kubernetes] namespace_project_driver` and the namespace labels) once the
//! namespace has a pod that needs a port, and keeps `spec.nsLabels` equal to the labels.
//! Deletion needs nothing here: the namespace's deletion deletes its KuryrNetwork, whose
//! finalizer the KuryrNetwork handler releases.

use std::{collections::BTreeMap, sync::Arc};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::{Controller, controller::Action, reflector::ObjectRef, watcher},
};
use kuryr_types::{KuryrNetwork, KuryrNetworkSpec, constants::KURYRNETWORK_FINALIZER};
use serde_json::json;
use tracing::{debug, error, info, warn};

use super::kuryrnetwork::support::{self, Backoff, api_code, record};
use crate::{
    Context,
    drivers::{DriverError, NamespaceProjectDriver, Reflected},
};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "namespace";

/// A failed step of the namespace handler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The namespace project driver could not answer.
    #[error("choosing the project of namespace {ns}")]
    Project {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: DriverError,
    },
    /// Listing the namespace's pods failed.
    #[error("listing the pods of namespace {ns}")]
    ListPods {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// The KuryrNetwork cache has not listed them yet.
    #[error("KuryrNetworks not listed yet")]
    NotSynced,
    /// Creating the KuryrNetwork failed.
    #[error("creating KuryrNetwork {ns}/{ns}")]
    Create {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Updating the KuryrNetwork's labels failed.
    #[error("updating the labels of KuryrNetwork {ns}/{ns}")]
    UpdateLabels {
        /// Namespace.
        ns: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Label of the `outcome` of `kuryr_reconcile_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Project { .. } => "project",
            Error::ListPods { .. } => "list_pods",
            Error::NotSynced => "not_synced",
            Error::Create { .. } => "create_kuryrnetwork",
            Error::UpdateLabels { .. } => "update_labels",
        }
    }
}

/// What the handler does with a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Being deleted: the namespace deletion removes the KuryrNetwork.
    Nothing,
    /// No KuryrNetwork: create one if a pod needs it.
    CreateIfPods,
    /// The KuryrNetwork's `spec.nsLabels` differ from the namespace's labels.
    UpdateLabels(BTreeMap<String, String>),
}

/// The decision for `ns` given its KuryrNetwork.
pub fn decide(ns: &Namespace, kn: Option<&KuryrNetwork>) -> Decision {
    if ns.metadata.deletion_timestamp.is_some() {
        return Decision::Nothing;
    }
    match kn {
        None => Decision::CreateIfPods,
        Some(kn) if kn.metadata.deletion_timestamp.is_some() => Decision::Nothing,
        Some(kn) if &kn.spec.ns_labels != ns.labels() => Decision::UpdateLabels(ns.labels().clone()),
        Some(_) => Decision::Nothing,
    }
}

/// Whether `pod` needs a port (so its namespace needs a network): not host-network and not
/// finished.
pub fn needs_port(pod: &Pod) -> bool {
    let host = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
    !host && !matches!(phase, "Succeeded" | "Failed")
}

/// The KuryrNetwork of `ns` in `project_id`.
pub fn new_network(ns: &Namespace, project_id: String) -> KuryrNetwork {
    let name = ns.name_any();
    let mut kn = KuryrNetwork::new(
        &name,
        KuryrNetworkSpec {
            ns_name: name.clone(),
            project_id,
            ns_labels: ns.labels().clone(),
        },
    );
    kn.metadata.namespace = Some(name);
    kn.metadata.finalizers = Some(vec![KURYRNETWORK_FINALIZER.to_owned()]);
    kn
}

/// The handler's context.
pub struct NsContext {
    /// Shared controller context.
    pub ctx: Arc<Context>,
    /// `[kubernetes] namespace_project_driver`.
    pub project: NamespaceProjectDriver,
    /// KuryrNetworks, read from a watch-fed cache (no GET per namespace event; a stale miss
    /// only costs a create answered 409).
    pub networks: Reflected<KuryrNetwork>,
    backoff: Backoff,
}

impl NsContext {
    /// A context from the configuration in `ctx`; starts the KuryrNetwork cache (needs a
    /// Tokio runtime).
    pub fn new(ctx: Arc<Context>) -> Result<Self, DriverError> {
        let project = NamespaceProjectDriver::from_config(&ctx.config)?;
        let networks = Reflected::spawn(Api::all(ctx.client.clone()), "kuryrnetworks")?;
        Ok(Self {
            ctx,
            project,
            networks,
            backoff: Backoff::default(),
        })
    }
}

/// Runs the handler from the configuration in `ctx` (what `cli::spawn_handlers` starts).
pub async fn start(ctx: Arc<Context>) {
    match NsContext::new(ctx.clone()) {
        Ok(n) => run(Arc::new(n)).await,
        Err(e) => {
            error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            ctx.health.handler_died(HANDLER);
        }
    }
}

/// Runs the handler: Namespaces, re-examined when a pod needing a port appears in them or
/// when their KuryrNetwork changes.
pub async fn run(nctx: Arc<NsContext>) {
    let ctx = nctx.ctx.clone();
    let client = ctx.client.clone();
    let controller = Controller::new(Api::<Namespace>::all(client.clone()), watcher::Config::default())
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default(),
            |pod: Pod| {
                needs_port(&pod)
                    .then(|| pod.namespace().map(|ns| ObjectRef::<Namespace>::new(&ns)))
                    .flatten()
            },
        )
        .watches(
            Api::<KuryrNetwork>::all(client),
            watcher::Config::default(),
            |kn: KuryrNetwork| kn.namespace().map(|ns| ObjectRef::<Namespace>::new(&ns)),
        );
    let store = controller.store();
    let health = ctx.health.clone();
    let synced = async move {
        support::wait_ready(&store, HANDLER).await;
        info!(handler = HANDLER, "namespace watcher synced");
        health.synced();
        std::future::pending::<()>().await;
    };
    let reconciler = controller
        .run(reconcile, error_policy, nctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(ns = %obj.name, "reconciled"),
                Err(e) => support::log_controller_error(HANDLER, &e),
            }
        });
    tokio::select! {
        _ = reconciler => {}
        _ = synced => {}
    }
    warn!(handler = HANDLER, "handler loop ended");
    ctx.health.handler_died(HANDLER);
}

/// Reconciles one namespace.
pub async fn reconcile(ns: Arc<Namespace>, nctx: Arc<NsContext>) -> Result<Action, Error> {
    let ctx = &nctx.ctx;
    let res = apply(&ns, &nctx).await;
    match &res {
        Ok(_) => {
            ctx.metrics.reconciled(HANDLER, "ok");
            nctx.backoff.succeeded(&ns.name_any());
        }
        Err(e) => {
            ctx.metrics.reconciled(HANDLER, e.metric_label());
            let chain = crate::error_chain(e);
            warn!(ns = %ns.name_any(), error = %chain, "namespace handler failed");
            if !matches!(e, Error::NotSynced) {
                record(ctx, ns.as_ref(), true, "FailedToCreateKuryrNetworkCRD", chain).await;
            }
        }
    }
    res
}

/// Retry policy: exponential per namespace.
pub fn error_policy(ns: Arc<Namespace>, _error: &Error, nctx: Arc<NsContext>) -> Action {
    Action::requeue(nctx.backoff.failed(&ns.name_any()))
}

async fn apply(ns: &Namespace, nctx: &NsContext) -> Result<Action, Error> {
    let ctx = &nctx.ctx;
    let name = ns.name_any();
    let kns: Api<KuryrNetwork> = Api::namespaced(ctx.client.clone(), &name);
    if !nctx.networks.is_synced() {
        return Err(Error::NotSynced);
    }
    let kn = nctx.networks.get(Some(&name), &name);
    match decide(ns, kn.as_deref()) {
        Decision::Nothing => {}
        Decision::UpdateLabels(labels) => {
            // Replace the whole map: keys removed from the namespace are nulled.
            let mut m = serde_json::Map::new();
            for k in kn.iter().flat_map(|k| k.spec.ns_labels.keys()) {
                m.insert(k.clone(), serde_json::Value::Null);
            }
            for (k, v) in labels {
                m.insert(k, json!(v));
            }
            let p = json!({"spec": {"nsLabels": m}});
            match kns.patch(&name, &PatchParams::default(), &Patch::Merge(&p)).await {
                Ok(_) => info!(ns = %name, "KuryrNetwork labels updated"),
                Err(e) if api_code(&e) == Some(404) => {}
                Err(source) => return Err(Error::UpdateLabels { ns: name, source }),
            }
        }
        Decision::CreateIfPods => {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &name);
            let list = pods
                .list(&ListParams::default())
                .await
                .map_err(|source| Error::ListPods {
                    ns: name.clone(),
                    source,
                })?;
            if list.items.iter().any(needs_port) {
                let project = nctx
                    .project
                    .namespace_project(ns)
                    .map_err(|source| Error::Project {
                        ns: name.clone(),
                        source,
                    })?;
                let kn = new_network(ns, project);
                match kns.create(&PostParams::default(), &kn).await {
                    Ok(_) => info!(ns = %name, "KuryrNetwork created"),
                    Err(e) if api_code(&e) == Some(409) => debug!(ns = %name, "KuryrNetwork exists"),
                    Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("being terminated") => {
                        debug!(ns = %name, "namespace terminating, KuryrNetwork not created");
                    }
                    Err(source) => return Err(Error::Create { ns: name, source }),
                }
            } else {
                debug!(ns = %name, "no pod needs a port, no KuryrNetwork yet");
            }
        }
    }
    let period = ctx.config.kubernetes.watch_reconcile_period;
    Ok(if period.is_zero() {
        Action::await_change()
    } else {
        Action::requeue(period)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ns(labels: &[(&str, &str)]) -> Namespace {
        let mut n = Namespace::default();
        n.metadata.name = Some("n1".into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n
    }

    #[test]
    fn decisions() {
        let n = ns(&[("a", "b")]);
        assert_eq!(decide(&n, None), Decision::CreateIfPods);
        let kn = new_network(&n, "p".into());
        assert_eq!(kn.namespace().as_deref(), Some("n1"));
        assert_eq!(kn.spec.ns_name, "n1");
        assert_eq!(kn.finalizers(), [KURYRNETWORK_FINALIZER]);
        assert_eq!(decide(&n, Some(&kn)), Decision::Nothing);
        let n2 = ns(&[("a", "c")]);
        assert_eq!(
            decide(&n2, Some(&kn)),
            Decision::UpdateLabels(BTreeMap::from([("a".into(), "c".into())]))
        );
        let mut gone = n2.clone();
        gone.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(decide(&gone, Some(&kn)), Decision::Nothing);
    }

    #[test]
    fn pods_needing_ports() {
        let mut p = Pod::default();
        assert!(needs_port(&p));
        p.spec = Some(Default::default());
        p.spec.as_mut().unwrap().host_network = Some(true);
        assert!(!needs_port(&p));
        p.spec.as_mut().unwrap().host_network = Some(false);
        p.status = Some(Default::default());
        p.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert!(!needs_port(&p));
    }
}
