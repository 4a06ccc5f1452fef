//! The Namespace handler (upstream's `NamespaceHandler`, `enabled_handlers` name
//! `namespace`): creates the namespace's KuryrNetwork (same name, with its finalizer, the
//! project of `[kubernetes] namespace_project_driver` and the namespace labels) once the
//! namespace has a pod that needs a port, and keeps `spec.nsLabels` equal to the labels.
//! Deletion needs nothing here: the namespace's deletion deletes its KuryrNetwork, whose
//! finalizer the KuryrNetwork handler releases.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::{Controller, reflector::ObjectRef, watcher},
};
use kuryr_types::{KuryrNetwork, KuryrNetworkSpec, constants::KURYRNETWORK_FINALIZER};
use serde_json::json;
use tracing::{debug, error, info};

use super::scaffold::{self, ErrorKind, Flow, Handler, HandlerError, Plan, Then, api_code, kube_kind};
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

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Project { source, .. } if source.is_transient() => ErrorKind::Transient,
            Error::Project { .. } => ErrorKind::Invalid,
            Error::NotSynced => ErrorKind::Transient,
            Error::ListPods { source, .. }
            | Error::Create { source, .. }
            | Error::UpdateLabels { source, .. } => kube_kind(source),
        }
    }

    fn metric_label(&self) -> &'static str {
        match self {
            Error::Project { .. } => "project",
            Error::ListPods { .. } => "list_pods",
            Error::NotSynced => "not_synced",
            Error::Create { .. } => "create_kuryrnetwork",
            Error::UpdateLabels { .. } => "update_labels",
        }
    }

    fn event_reason(&self) -> Option<&'static str> {
        match self {
            Error::NotSynced => None,
            _ if self.kind() == ErrorKind::Conflict => None,
            _ => Some("FailedToCreateKuryrNetworkCRD"),
        }
    }
}

/// One step of the namespace handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A pod needs a port: create the namespace's KuryrNetwork.
    CreateKuryrNetwork,
    /// Set the KuryrNetwork's `spec.nsLabels` to these (the namespace's labels).
    UpdateLabels(BTreeMap<String, String>),
}

/// What the namespace plan looks at.
pub struct NsObserved {
    /// The namespace.
    pub ns: Arc<Namespace>,
    /// Its KuryrNetwork (from the cache).
    pub kn: Option<Arc<KuryrNetwork>>,
    /// Whether one of its pods needs a port (read only when there is no KuryrNetwork).
    pub pods_need_port: bool,
}

/// The plan for a namespace (pure): nothing while it or its KuryrNetwork is being deleted (the
/// namespace's deletion removes the KuryrNetwork); a KuryrNetwork once a pod needs a port; then
/// `spec.nsLabels` kept equal to the namespace's labels.
pub fn plan(o: &NsObserved) -> Plan<Step> {
    let then = Then::Periodic;
    if o.ns.metadata.deletion_timestamp.is_some() {
        return Plan::nothing("namespace being deleted", then);
    }
    match o.kn.as_deref() {
        None if o.pods_need_port => Plan::steps("a pod needs a port", vec![Step::CreateKuryrNetwork], then),
        None => Plan::nothing("no pod needs a port, no KuryrNetwork yet", then),
        Some(kn) if kn.metadata.deletion_timestamp.is_some() => {
            Plan::nothing("KuryrNetwork being deleted", then)
        }
        Some(kn) if &kn.spec.ns_labels != o.ns.labels() => Plan::steps(
            "namespace labels changed",
            vec![Step::UpdateLabels(o.ns.labels().clone())],
            then,
        ),
        Some(_) => Plan::nothing("KuryrNetwork up to date", then),
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

/// The handler: the namespace project driver and a KuryrNetwork cache.
pub struct NsHandler {
    /// Kubernetes.
    pub client: kube::Client,
    /// `[kubernetes] namespace_project_driver`.
    pub project: NamespaceProjectDriver,
    /// KuryrNetworks, read from a watch-fed cache (no GET per namespace event; a stale miss
    /// only costs a create answered 409).
    pub networks: Reflected<KuryrNetwork>,
}

impl NsHandler {
    /// The handler from the configuration in `ctx`; starts the KuryrNetwork cache (needs a
    /// Tokio runtime).
    pub fn new(ctx: &Context) -> Result<Self, DriverError> {
        Ok(Self {
            client: ctx.client.clone(),
            project: NamespaceProjectDriver::from_config(&ctx.config)?,
            networks: Reflected::spawn(ctx.client.clone(), "kuryrnetworks")?,
        })
    }
}

/// Runs the handler from the configuration in `ctx` (what `cli::spawn_handlers` starts):
/// Namespaces, re-examined when a pod needing a port appears in them or when their
/// KuryrNetwork changes.
pub async fn start(ctx: Arc<Context>) {
    let handler = match NsHandler::new(&ctx) {
        Ok(h) => Arc::new(h),
        Err(e) => {
            error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            return ctx.health.handler_died(HANDLER);
        }
    };
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
    scaffold::run(ctx, handler, controller, async {}, async {}).await;
}

impl Handler for NsHandler {
    type Object = Namespace;
    type Observed = NsObserved;
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, ns: &Arc<Namespace>, _live: bool) -> Result<NsObserved, Error> {
        if !self.networks.is_synced() {
            return Err(Error::NotSynced);
        }
        let name = ns.name_any();
        let kn = self.networks.get(Some(&name), &name);
        let pods_need_port = if kn.is_none() && ns.metadata.deletion_timestamp.is_none() {
            Api::<Pod>::namespaced(self.client.clone(), &name)
                .list(&ListParams::default())
                .await
                .map_err(|source| Error::ListPods {
                    ns: name.clone(),
                    source,
                })?
                .items
                .iter()
                .any(needs_port)
        } else {
            false
        };
        Ok(NsObserved {
            ns: ns.clone(),
            kn,
            pods_need_port,
        })
    }

    fn plan(&self, o: &NsObserved) -> Plan<Step> {
        plan(o)
    }

    async fn execute(&self, o: &NsObserved, step: Step) -> Result<Flow<NsObserved>, Error> {
        let name = o.ns.name_any();
        let kns: Api<KuryrNetwork> = Api::namespaced(self.client.clone(), &name);
        match step {
            Step::UpdateLabels(labels) => {
                // Replace the whole map: keys removed from the namespace are nulled.
                let mut m = serde_json::Map::new();
                for k in o.kn.iter().flat_map(|k| k.spec.ns_labels.keys()) {
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
            Step::CreateKuryrNetwork => {
                let project = self
                    .project
                    .namespace_project(&o.ns)
                    .map_err(|source| Error::Project {
                        ns: name.clone(),
                        source,
                    })?;
                let kn = new_network(&o.ns, project);
                match kns.create(&PostParams::default(), &kn).await {
                    Ok(_) => info!(ns = %name, "KuryrNetwork created"),
                    Err(e) if api_code(&e) == Some(409) => debug!(ns = %name, "KuryrNetwork exists"),
                    Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("being terminated") => {
                        debug!(ns = %name, "namespace terminating, KuryrNetwork not created");
                    }
                    Err(source) => return Err(Error::Create { ns: name, source }),
                }
            }
        }
        Ok(Flow::Next)
    }
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

    fn observed(n: &Namespace, kn: Option<&KuryrNetwork>, pods: bool) -> NsObserved {
        NsObserved {
            ns: Arc::new(n.clone()),
            kn: kn.cloned().map(Arc::new),
            pods_need_port: pods,
        }
    }

    #[test]
    fn plans() {
        let n = ns(&[("a", "b")]);
        assert_eq!(
            plan(&observed(&n, None, true)).steps,
            vec![Step::CreateKuryrNetwork]
        );
        assert!(plan(&observed(&n, None, false)).steps.is_empty());
        let kn = new_network(&n, "p".into());
        assert_eq!(kn.namespace().as_deref(), Some("n1"));
        assert_eq!(kn.spec.ns_name, "n1");
        assert_eq!(kn.finalizers(), [KURYRNETWORK_FINALIZER]);
        assert!(plan(&observed(&n, Some(&kn), true)).steps.is_empty());
        let n2 = ns(&[("a", "c")]);
        assert_eq!(
            plan(&observed(&n2, Some(&kn), true)).steps,
            vec![Step::UpdateLabels(BTreeMap::from([("a".into(), "c".into())]))]
        );
        let mut gone = n2.clone();
        gone.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert!(plan(&observed(&gone, Some(&kn), true)).steps.is_empty());
        assert_eq!(plan(&observed(&gone, Some(&kn), true)).then, Then::Periodic);
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
