//! The KuryrPort handler (upstream's `KuryrPortHandler`, `enabled_handlers` name `kuryrport`):
//! gives every KuryrPort without VIFs a Neutron port from the pool and writes it to
//! `status.vifs` (`eth0`, `active: false` until [`activation`] sees the port ACTIVE); on
//! deletion releases the port to its pool (or deletes it) and removes the KuryrPort finalizer,
//! after which the pod handler drops the pod finalizer. Decisions live in [`plan`]; this module
//! observes and executes them under the handler [`scaffold`](super::scaffold).
//!
//! Before serving, the pools are recovered from the KuryrPorts and Neutron
//! ([`crate::pool::VifPool::recover`]); the pool maintenance loop, the janitor and the
//! activation loop run as long as the handler does.

pub mod activation;
mod error;
pub mod plan;
mod recover;

pub use error::Error;
pub use recover::RecoveryError;
use recover::{recover, track_inactive};

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
    runtime::{Controller, watcher},
};
use kube_lean::Lean;
use kuryr_core::pool::PodKey;
use kuryr_types::{
    KuryrPort,
    constants::{DEFAULT_IFNAME, KURYRPORT_FINALIZER},
    vif::VifEntry,
};
use serde_json::json;
use tracing::{debug, error, info, warn};

use super::scaffold::{self, Flow, Handler, Then, api_code};
use crate::{Context, OpenStack, drivers::DriverError, finalizer, pool::PortRequest};
use activation::{Activation, Owner, pod_ref};
use plan::{PodState, Step};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "kuryrport";

/// How long one reconcile waits for a pool being populated before requeueing.
const POOL_WAIT: Duration = Duration::from_secs(20);

/// The handler: the shared context, Neutron with drivers and pools, the activation loop.
pub struct KpHandler {
    /// Shared controller context.
    pub ctx: Arc<Context>,
    /// Neutron, drivers, pools.
    pub os: OpenStack,
    /// The activation loop.
    pub activation: Arc<Activation>,
    /// When a KuryrPort without VIFs was first seen (for `kuryr_kuryrport_vifs_latency_seconds`).
    first_seen: Mutex<HashMap<PodKey, Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Runs the handler: recovery (retried until it succeeds), then the KuryrPort controller, the
/// pool maintenance loop, the janitor and the activation loop, until the watch ends. Ready
/// once recovery ran and the watch listed.
pub async fn run(ctx: Arc<Context>) {
    let Some(os) = ctx.openstack.clone() else {
        error!(handler = HANDLER, "no OpenStack context: handler not started");
        ctx.health.handler_died(HANDLER);
        return;
    };
    let activation = Activation::new(
        os.pool.settings().activation.clone(),
        os.neutron.clone(),
        ctx.client.clone(),
        ctx.metrics.clone(),
        ctx.events.clone(),
    );
    let kps: Api<KuryrPort> = Api::all(ctx.client.clone());
    let mut delay = Duration::from_secs(1);
    loop {
        match recover(&ctx, &os, &activation, &kps).await {
            Ok(()) => break,
            Err(e) => {
                warn!(handler = HANDLER, error = %e, retry_in = ?delay, "recovery failed");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
    info!(handler = HANDLER, "pools recovered");
    let handler = Arc::new(KpHandler {
        ctx: ctx.clone(),
        os: os.clone(),
        activation: activation.clone(),
        first_seen: Mutex::default(),
    });
    // Decoded without managedFields (kube_lean): no step reads them.
    let controller = Controller::new(
        Api::<Lean<KuryrPort>>::all(ctx.client.clone()),
        watcher::Config::default(),
    );
    let background = {
        let client = ctx.client.clone();
        async move {
            tokio::join!(os.pool.clone().run_background(client), activation.run());
        }
    };
    scaffold::run(ctx, handler, controller, async {}, background).await;
}

/// What the KuryrPort plan looks at.
pub struct KpObserved {
    /// The KuryrPort.
    pub kp: Arc<Lean<KuryrPort>>,
    /// Its namespace.
    pub ns: String,
    /// Its (and its pod's) name.
    pub name: String,
    /// The pod, when the decision needs it ([`plan::needs_pod`]).
    pub pod: Option<Pod>,
    /// The pod's state for the plan.
    pub state: PodState,
}

impl Handler for KpHandler {
    type Object = Lean<KuryrPort>;
    type Observed = KpObserved;
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, kp: &Arc<Lean<KuryrPort>>, _live: bool) -> Result<KpObserved, Error> {
        let name = kp.name_any();
        let ns = kp
            .namespace()
            .ok_or_else(|| Error::MissingNamespace(name.clone()))?;
        let (pod, state) = if plan::needs_pod(kp) {
            let pod = Api::<Pod>::namespaced(self.ctx.client.clone(), &ns)
                .get_opt(&name)
                .await
                .map_err(|source| Error::GetPod {
                    ns: ns.clone(),
                    name: name.clone(),
                    source,
                })?;
            let state = PodState::of(kp, pod.as_ref());
            (pod, state)
        } else {
            (None, PodState::NotRead)
        };
        Ok(KpObserved {
            kp: kp.clone(),
            ns,
            name,
            pod,
            state,
        })
    }

    fn plan(&self, o: &KpObserved) -> plan::Plan {
        plan::plan(&o.kp, o.state)
    }

    async fn execute(&self, o: &KpObserved, step: Step) -> Result<Flow<KpObserved>, Error> {
        let (ns, name) = (o.ns.as_str(), o.name.as_str());
        let key = PodKey::new(ns, name);
        match step {
            Step::TrackInactive => track_inactive(&self.activation, &o.kp),
            Step::AssignPort => {
                let Some(pod) = &o.pod else {
                    return Ok(Flow::Stop(Then::AwaitChange));
                };
                return self.assign(&o.kp, pod, ns, name).await;
            }
            Step::DeleteKuryrPort => {
                info!(%ns, pod = %name, "pod of KuryrPort missing: deleting the KuryrPort");
                self.delete_kuryrport(&o.kp, ns, name).await?;
            }
            Step::WarnPortKept => {
                warn!(%ns, pod = %name, "KuryrPort deleted while its pod runs: keeping the port");
                let note = "KuryrPort was deleted while its pod is running; its port is kept".to_string();
                self.ctx
                    .events
                    .warning(&self.event_target(&o.kp), "NoKuryrPort", note, "Finalize")
                    .await;
            }
            Step::ReleasePorts(ids) => {
                for id in &ids {
                    self.activation.untrack(id);
                }
                self.os
                    .pool
                    .release_on(&key, &o.kp.spec.pod_node_name, &ids)
                    .await
                    .map_err(|source| Error::ReleasePort {
                        ns: ns.into(),
                        name: name.into(),
                        source,
                    })?;
                lock(&self.first_seen).remove(&key);
                info!(%ns, pod = %name, ports = ?ids, "ports released");
            }
            Step::WarnInvalidVifs(what) => {
                let note = format!("unreadable entries in KuryrPort {ns}/{name}: {}", what.join("; "));
                warn!(%ns, pod = %name, problems = ?what, "KuryrPort has unreadable VIFs");
                self.ctx
                    .events
                    .warning(&self.event_target(&o.kp), "InvalidVIF", note, "Reconcile")
                    .await;
            }
            Step::RemoveFinalizer => {
                let api: Api<KuryrPort> = Api::namespaced(self.ctx.client.clone(), ns);
                match finalizer::remove(&api, &o.kp, KURYRPORT_FINALIZER).await {
                    Ok(_) => info!(%ns, pod = %name, "KuryrPort finalizer removed"),
                    Err(e) if api_code(&e) == Some(404) => {}
                    Err(source) => {
                        return Err(Error::RemoveFinalizer {
                            ns: ns.into(),
                            name: name.into(),
                            source,
                        });
                    }
                }
            }
        }
        Ok(Flow::Next)
    }

    /// Events about a KuryrPort go to its pod, where users look.
    fn event_target(&self, kp: &Lean<KuryrPort>) -> ObjectReference {
        pod_ref(
            &kp.namespace().unwrap_or_default(),
            &kp.name_any(),
            &kp.spec.pod_uid,
        )
    }
}

impl KpHandler {
    /// Asks the drivers where the port goes, takes one from the pool, writes `status.vifs`.
    async fn assign(
        &self,
        kp: &KuryrPort,
        pod: &Pod,
        ns: &str,
        name: &str,
    ) -> Result<Flow<KpObserved>, Error> {
        let ctx = &self.ctx;
        let key = PodKey::new(ns, name);
        let seen = *lock(&self.first_seen)
            .entry(key.clone())
            .or_insert_with(Instant::now);
        let target = match self.os.drivers.pod_target(pod).await {
            Ok(t) => t,
            Err(DriverError::NotReady(why)) => {
                debug!(%ns, pod = %name, %why, "pod target not ready");
                return Ok(Flow::Stop(Then::Requeue(Duration::from_secs(1))));
            }
            Err(source) => {
                return Err(Error::Drivers {
                    ns: ns.into(),
                    name: name.into(),
                    source,
                });
            }
        };
        let req = PortRequest {
            pod: key.clone(),
            pod_uid: &kp.spec.pod_uid,
            host: &kp.spec.pod_node_name,
            target: &target,
        };
        let acquired = self
            .os
            .pool
            .acquire(&req, POOL_WAIT)
            .await
            .map_err(|source| Error::RequestPort {
                ns: ns.into(),
                name: name.into(),
                source,
            })?;
        let Some(acquired) = acquired else {
            debug!(%ns, pod = %name, "pool still empty: requeue");
            return Ok(Flow::Stop(Then::Requeue(Duration::from_millis(100))));
        };
        let port_id = acquired.port.id.clone();
        let active = acquired.vif.active == Some(true);
        let entry = VifEntry {
            default: true,
            vif: acquired.vif,
        };
        let patch = json!({"status": {"vifs": {DEFAULT_IFNAME: entry}}});
        let api: Api<KuryrPort> = Api::namespaced(ctx.client.clone(), ns);
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if api_code(&e) == Some(404) => {
                info!(%ns, pod = %name, port = %port_id, "KuryrPort gone before its VIF was written: releasing the port");
                self.os
                    .pool
                    .release(&key, std::slice::from_ref(&port_id))
                    .await
                    .map_err(|source| Error::ReleasePort {
                        ns: ns.into(),
                        name: name.into(),
                        source,
                    })?;
                return Ok(Flow::Stop(Then::AwaitChange));
            }
            Err(source) => {
                return Err(Error::PatchStatus {
                    ns: ns.into(),
                    name: name.into(),
                    source,
                });
            }
        }
        self.os.pool.committed(&key);
        lock(&self.first_seen).remove(&key);
        ctx.metrics
            .kuryrport_vifs_latency
            .observe(seen.elapsed().as_secs_f64());
        if let Some(created) = pod.metadata.creation_timestamp.as_ref() {
            let since = jiff::Timestamp::now().duration_since(created.0);
            ctx.metrics.pod_port_latency.observe(since.as_secs_f64().max(0.0));
        }
        info!(%ns, pod = %name, port = %port_id, node = %kp.spec.pod_node_name,
            elapsed_ms = seen.elapsed().as_millis() as u64, "VIF written");
        if !active {
            self.activation.track(
                &port_id,
                Owner {
                    namespace: ns.into(),
                    name: name.into(),
                    ifname: DEFAULT_IFNAME.into(),
                    pod_uid: kp.spec.pod_uid.clone(),
                    scheduled: scheduled_at(pod),
                },
            );
        }
        Ok(Flow::Next)
    }

    /// Deletes `kp` (that incarnation only).
    async fn delete_kuryrport(&self, kp: &KuryrPort, ns: &str, name: &str) -> Result<(), Error> {
        let api: Api<KuryrPort> = Api::namespaced(self.ctx.client.clone(), ns);
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: kp.uid(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => Ok(()),
            Err(e) if matches!(api_code(&e), Some(404 | 409)) => Ok(()),
            Err(source) => Err(Error::DeleteKuryrPort {
                ns: ns.into(),
                name: name.into(),
                source,
            }),
        }
    }
}

/// When `pod` was scheduled: its `PodScheduled` condition's transition, else its creation.
fn scheduled_at(pod: &Pod) -> Option<jiff::Timestamp> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .or(pod.metadata.creation_timestamp.as_ref())
        .map(|t| t.0)
}
