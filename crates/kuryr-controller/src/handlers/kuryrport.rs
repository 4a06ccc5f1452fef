//! The KuryrPort handler (upstream's `KuryrPortHandler`, `enabled_handlers` name `kuryrport`):
//! gives every KuryrPort without VIFs a Neutron port from the pool and writes it to
//! `status.vifs` (`eth0`, `active: false` until [`activation`] sees the port ACTIVE); on
//! deletion releases the port to its pool (or deletes it) and removes the KuryrPort finalizer,
//! after which the pod handler drops the pod finalizer.
//!
//! Before serving, the pools are recovered from the KuryrPorts and Neutron
//! ([`crate::pool::VifPool::recover`]); the pool maintenance loop, the janitor and the
//! activation loop run as long as the handler does.

pub mod activation;
mod error;
mod recover;

pub use error::Error;
pub use recover::RecoveryError;
use recover::{recover, track_inactive};

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
    runtime::{
        Controller,
        controller::Action,
        events::{Event, EventType},
        watcher,
    },
};
use kuryr_core::pool::PodKey;
use kuryr_types::{
    KuryrPort,
    constants::{DEFAULT_IFNAME, KURYRPORT_FINALIZER},
    vif::VifEntry,
};
use serde_json::json;
use tracing::{debug, error, info, warn};

use crate::{
    Context, OpenStack, drivers::DriverError, finalizer, handlers::pod::plan::is_completed, pool::PortRequest,
};
use activation::{Activation, Owner, pod_ref};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "kuryrport";

/// How long one reconcile waits for a pool being populated before requeueing.
const POOL_WAIT: Duration = Duration::from_secs(20);

/// The handler's context.
pub struct KpContext {
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

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Runs the handler: recovery (retried until it succeeds), then the KuryrPort controller, the
/// pool maintenance loop, the janitor and the activation loop, until the watch ends. Reports
/// sync (after recovery) and death to [`Context::health`].
pub async fn run(ctx: Arc<Context>) {
    let Some(os) = ctx.openstack.clone() else {
        error!(handler = HANDLER, "no OpenStack context: handler not started");
        ctx.health.handler_died(HANDLER);
        return;
    };
    let recorder = ctx.config.kubernetes.use_events.then(|| ctx.recorder.clone());
    let activation = Activation::new(
        os.pool.settings().activation.clone(),
        os.neutron.clone(),
        ctx.client.clone(),
        ctx.metrics.clone(),
        recorder,
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
    let kctx = Arc::new(KpContext {
        ctx: ctx.clone(),
        os: os.clone(),
        activation: activation.clone(),
        first_seen: Mutex::default(),
    });
    let controller = Controller::new(kps, watcher::Config::default());
    let store = controller.store();
    let health = ctx.health.clone();
    let synced = async move {
        super::wait_ready(&store, HANDLER).await;
        info!(handler = HANDLER, "KuryrPort watcher synced, pools recovered");
        health.synced();
        std::future::pending::<()>().await;
    };
    let reconciler = controller
        .run(reconcile, error_policy, kctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(ns = ?obj.namespace, kp = %obj.name, "reconciled"),
                Err(e) => debug!(error = %e, "KuryrPort controller error"),
            }
        });
    // The background loops may legitimately finish (the janitor is off without tags); they
    // must not end the select!, which would drop the reconciler with them.
    let janitor = async {
        os.pool.clone().run_janitor(ctx.client.clone()).await;
        std::future::pending::<()>().await
    };
    // Everything is owned by this future: aborting the handler stops it all.
    tokio::select! {
        _ = reconciler => {}
        _ = synced => {}
        _ = os.pool.clone().run_maintenance() => {}
        _ = janitor => {}
        _ = activation.clone().run() => {}
    }
    warn!(handler = HANDLER, "handler loop ended");
    ctx.health.handler_died(HANDLER);
}

/// Reconciles one KuryrPort; counts the outcome and records a Warning Event on the pod on
/// failure.
pub async fn reconcile(kp: Arc<KuryrPort>, kctx: Arc<KpContext>) -> Result<Action, Error> {
    let ctx = &kctx.ctx;
    let res = apply(&kp, &kctx).await;
    match &res {
        Ok(_) => ctx.metrics.reconciled(HANDLER, "ok"),
        Err(e) => {
            ctx.metrics.reconciled(HANDLER, e.metric_label());
            let chain = crate::error_chain(e);
            warn!(ns = kp.namespace().unwrap_or_default(), kp = %kp.name_any(), error = %chain, "KuryrPort handler failed");
            if ctx.config.kubernetes.use_events {
                let event = Event {
                    type_: EventType::Warning,
                    reason: e.event_reason().into(),
                    note: Some(chain),
                    action: "Reconcile".into(),
                    secondary: None,
                };
                let pod = pod_ref(
                    &kp.namespace().unwrap_or_default(),
                    &kp.name_any(),
                    &kp.spec.pod_uid,
                );
                if let Err(err) = ctx.recorder.publish(&event, &pod).await {
                    debug!(error = %err, "recording event failed");
                }
            }
        }
    }
    res
}

/// Requeue policy of the handler.
pub fn error_policy(_kp: Arc<KuryrPort>, error: &Error, _ctx: Arc<KpContext>) -> Action {
    Action::requeue(error.requeue_after())
}

fn port_ids(kp: &KuryrPort) -> Vec<String> {
    kp.status
        .iter()
        .flat_map(|s| s.vifs.values())
        .filter_map(|e| e.vif.id.clone())
        .collect()
}

async fn apply(kp: &KuryrPort, kctx: &KpContext) -> Result<Action, Error> {
    let name = kp.name_any();
    let ns = kp
        .namespace()
        .ok_or_else(|| Error::MissingNamespace(name.clone()))?;
    if kp.metadata.deletion_timestamp.is_some() {
        return finalize(kp, kctx, &ns, &name).await;
    }
    let has_vifs = kp.status.as_ref().is_some_and(|s| !s.vifs.is_empty());
    if has_vifs {
        track_inactive(&kctx.activation, kp);
        return Ok(Action::await_change());
    }
    assign(kp, kctx, &ns, &name).await
}

/// Gets the pod, asks the drivers and the pool, writes `status.vifs`.
async fn assign(kp: &KuryrPort, kctx: &KpContext, ns: &str, name: &str) -> Result<Action, Error> {
    let ctx = &kctx.ctx;
    let key = PodKey::new(ns, name);
    let seen = *lock(&kctx.first_seen)
        .entry(key.clone())
        .or_insert_with(Instant::now);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let pod = pods.get_opt(name).await.map_err(|source| Error::GetPod {
        ns: ns.into(),
        name: name.into(),
        source,
    })?;
    let pod = match pod {
        Some(p) if p.uid().as_deref() == Some(kp.spec.pod_uid.as_str()) => p,
        _ => {
            // Upstream: the pod is gone (or is another pod now): delete the KuryrPort.
            info!(%ns, pod = %name, "pod of KuryrPort missing: deleting the KuryrPort");
            delete_kuryrport(ctx, kp, ns, name).await?;
            return Ok(Action::await_change());
        }
    };
    if pod.metadata.deletion_timestamp.is_some() || is_completed(&pod) {
        // The pod handler deletes the KuryrPort.
        return Ok(Action::await_change());
    }
    let target = match kctx.os.drivers.pod_target(&pod).await {
        Ok(t) => t,
        Err(DriverError::NotReady(why)) => {
            debug!(%ns, pod = %name, %why, "pod target not ready");
            return Ok(Action::requeue(Duration::from_secs(1)));
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
    let acquired = kctx
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
        return Ok(Action::requeue(Duration::from_millis(100)));
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
            kctx.os
                .pool
                .release(&key, std::slice::from_ref(&port_id))
                .await
                .map_err(|source| Error::ReleasePort {
                    ns: ns.into(),
                    name: name.into(),
                    source,
                })?;
            return Ok(Action::await_change());
        }
        Err(source) => {
            return Err(Error::PatchStatus {
                ns: ns.into(),
                name: name.into(),
                source,
            });
        }
    }
    kctx.os.pool.committed(&key);
    lock(&kctx.first_seen).remove(&key);
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
        kctx.activation.track(
            &port_id,
            Owner {
                namespace: ns.into(),
                name: name.into(),
                ifname: DEFAULT_IFNAME.into(),
                pod_uid: kp.spec.pod_uid.clone(),
            },
        );
    }
    Ok(Action::await_change())
}

/// Deletes `kp` (that incarnation only).
async fn delete_kuryrport(ctx: &Context, kp: &KuryrPort, ns: &str, name: &str) -> Result<(), Error> {
    let api: Api<KuryrPort> = Api::namespaced(ctx.client.clone(), ns);
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

/// The KuryrPort is being deleted: release its ports, then drop its finalizer. A KuryrPort
/// deleted by hand while its pod still runs keeps its finalizer (upstream's `NoKuryrPort`).
async fn finalize(kp: &KuryrPort, kctx: &KpContext, ns: &str, name: &str) -> Result<Action, Error> {
    let ctx = &kctx.ctx;
    if !kp.finalizers().iter().any(|f| f == KURYRPORT_FINALIZER) {
        return Ok(Action::await_change());
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let pod = pods.get_opt(name).await.map_err(|source| Error::GetPod {
        ns: ns.into(),
        name: name.into(),
        source,
    })?;
    if let Some(pod) = &pod
        && pod.uid().as_deref() == Some(kp.spec.pod_uid.as_str())
        && pod.metadata.deletion_timestamp.is_none()
        && !is_completed(pod)
    {
        warn!(%ns, pod = %name, "KuryrPort deleted while its pod runs: keeping the port");
        if ctx.config.kubernetes.use_events {
            let event = Event {
                type_: EventType::Warning,
                reason: "NoKuryrPort".into(),
                note: Some("KuryrPort was deleted while its pod is running; its port is kept".into()),
                action: "Finalize".into(),
                secondary: None,
            };
            let _ = ctx
                .recorder
                .publish(&event, &pod_ref(ns, name, &kp.spec.pod_uid))
                .await;
        }
        return Ok(Action::requeue(Duration::from_secs(60)));
    }
    let key = PodKey::new(ns, name);
    let ids = port_ids(kp);
    for id in &ids {
        kctx.activation.untrack(id);
    }
    kctx.os
        .pool
        .release(&key, &ids)
        .await
        .map_err(|source| Error::ReleasePort {
            ns: ns.into(),
            name: name.into(),
            source,
        })?;
    lock(&kctx.first_seen).remove(&key);
    let api: Api<KuryrPort> = Api::namespaced(ctx.client.clone(), ns);
    match finalizer::remove(&api, kp, KURYRPORT_FINALIZER).await {
        Ok(_) => {}
        Err(e) if api_code(&e) == Some(404) => {}
        Err(source) => {
            return Err(Error::RemoveFinalizer {
                ns: ns.into(),
                name: name.into(),
                source,
            });
        }
    }
    info!(%ns, pod = %name, ports = ?ids, "port released, KuryrPort finalizer removed");
    Ok(Action::await_change())
}
