//! The activation loop: VIFs written with `active: false` are marked active once their
//! Neutron port is ACTIVE (plugged by the daemon). All pending ports are checked together with
//! ONE filtered list per poll (`GET /v2.0/ports?id=…&fields=id&fields=status`, up to
//! `port_activation_batch` IDs each) — never one request per pod — at an interval that backs
//! off while nothing changes ([`kuryr_core::activation::ActivationTracker`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use kuryr_core::activation::{ActivationConfig, ActivationTracker};
use kuryr_openstack::{Neutron, PortFilter};
use kuryr_types::{KuryrPort, ovo::KEY_DATA};
use serde_json::json;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::{events::Events, metrics::Metrics};

/// The KuryrPort entry a pending port belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Namespace.
    pub namespace: String,
    /// KuryrPort (and pod) name.
    pub name: String,
    /// Interface name in `status.vifs` (`eth0`).
    pub ifname: String,
    /// The pod's UID (for Events).
    pub pod_uid: String,
    /// When the pod was scheduled (its `PodScheduled` condition, else its creation), for
    /// upstream's `kuryr_pod_creation_latency`; unknown for VIFs found at recovery.
    pub scheduled: Option<jiff::Timestamp>,
}

struct Pending {
    owner: Owner,
    since: Instant,
}

/// Pending ports and the loop that checks them.
pub struct Activation {
    tracker: Mutex<ActivationTracker>,
    owners: Mutex<HashMap<String, Pending>>,
    wake: Notify,
    neutron: Arc<dyn Neutron>,
    client: Client,
    metrics: Arc<Metrics>,
    events: Events,
    /// Consecutive failed polls (for the log).
    failures: std::sync::atomic::AtomicU32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Activation {
    /// A loop with nothing pending; `events` records `ActivatePortFailed` on pods.
    pub fn new(
        cfg: ActivationConfig,
        neutron: Arc<dyn Neutron>,
        client: Client,
        metrics: Arc<Metrics>,
        events: Events,
    ) -> Arc<Self> {
        Arc::new(Activation {
            tracker: Mutex::new(ActivationTracker::new(cfg)),
            owners: Mutex::default(),
            wake: Notify::new(),
            neutron,
            client,
            metrics,
            events,
            failures: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// Watches `port_id` until it is ACTIVE, then marks `owner`'s VIF active (idempotent).
    pub fn track(&self, port_id: &str, owner: Owner) {
        let now = Instant::now();
        lock(&self.owners)
            .entry(port_id.to_string())
            .or_insert(Pending { owner, since: now });
        if lock(&self.tracker).add(port_id, now) {
            self.wake.notify_one();
        }
    }

    /// Stops watching `port_id` (its KuryrPort is going away).
    pub fn untrack(&self, port_id: &str) {
        lock(&self.owners).remove(port_id);
        lock(&self.tracker).remove(port_id);
    }

    /// Ports pending.
    pub fn pending(&self) -> usize {
        lock(&self.tracker).len()
    }

    /// Runs forever.
    pub async fn run(self: Arc<Self>) {
        loop {
            let next = lock(&self.tracker).next_poll_at();
            let wake = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = self.wake.notified() => continue,
            }
            self.poll_once().await;
        }
    }

    /// The list requests due now, and their consequences.
    pub async fn poll_once(&self) {
        let queries = lock(&self.tracker).next_queries(Instant::now());
        for q in queries {
            let filter = PortFilter {
                ids: q.ids.clone(),
                fields: vec!["id".into(), "status".into()],
                ..PortFilter::default()
            };
            let ports = match self.neutron.list_ports(&filter).await {
                Ok(p) => {
                    let failed = self.failures.swap(0, std::sync::atomic::Ordering::Relaxed);
                    if failed > 0 {
                        info!(failed_polls = failed, "activation checks answered again");
                    }
                    p
                }
                Err(e) => {
                    // Neutron away: said once, then every 20th poll (about every 10 s), not
                    // twice a second.
                    let n = self.failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n % 20 == 0 {
                        warn!(ports = q.ids.len(), failed_polls = n + 1, error = %e, "activation check failed; retrying at the next poll");
                    } else {
                        debug!(ports = q.ids.len(), error = %e, "activation check failed again");
                    }
                    continue;
                }
            };
            let report = lock(&self.tracker).observe(&q, &ports, Instant::now());
            for id in &report.active {
                let pending = lock(&self.owners).remove(id);
                if let Some(p) = pending {
                    self.mark_active(id, p).await;
                }
            }
            for id in &report.missing {
                lock(&self.owners).remove(id);
                debug!(port = %id, "pending port deleted");
            }
            for id in &report.timed_out {
                let owner = lock(&self.owners).get(id).map(|p| p.owner.clone());
                if let Some(o) = owner {
                    self.metrics.port_readiness.inc();
                    warn!(port = %id, ns = %o.namespace, pod = %o.name, "port not ACTIVE after the activation timeout");
                    self.event(
                        &o,
                        "ActivatePortFailed",
                        format!("Neutron port {id} is not ACTIVE yet"),
                    )
                    .await;
                }
            }
        }
    }

    async fn mark_active(&self, port_id: &str, p: Pending) {
        let api: Api<KuryrPort> = Api::namespaced(self.client.clone(), &p.owner.namespace);
        let patch =
            json!({"status": {"vifs": {p.owner.ifname.clone(): {"vif": {KEY_DATA: {"active": true}}}}}});
        match api
            .patch(&p.owner.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.metrics
                    .port_activation_latency
                    .observe(p.since.elapsed().as_secs_f64());
                if let Some(at) = p.owner.scheduled {
                    let since = jiff::Timestamp::now().duration_since(at);
                    self.metrics
                        .pod_creation_latency
                        .observe(since.as_secs_f64().max(0.0));
                }
                info!(ns = %p.owner.namespace, pod = %p.owner.name, port = %port_id, "VIF active");
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                warn!(port = %port_id, error = %e, "marking VIF active failed; retrying");
                self.track(port_id, p.owner);
            }
        }
    }

    async fn event(&self, o: &Owner, reason: &str, note: String) {
        let pod = pod_ref(&o.namespace, &o.name, &o.pod_uid);
        self.events.warning(&pod, reason, note, "ActivatePort").await;
    }
}

/// A reference to the pod a KuryrPort belongs to (Events are recorded on the pod).
pub fn pod_ref(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        uid: (!uid.is_empty()).then(|| uid.into()),
        ..ObjectReference::default()
    }
}
