//! The port-pool executor ([`VifPool`]): owns the pure [`PoolState`] of `kuryr-core` behind a
//! mutex (never held across an `.await`) and performs what it decides with Neutron.
//!
//! ```text
//!  KuryrPort handler ── acquire(pod, host, target) ──► PoolState::request
//!        ▲                                               │ Take: cached Port ──► VIF (0 Neutron calls)
//!        │ woken (watch channel) when ports appear        │ Wait: PopulateRequest ──► one bulk POST /v2.0/ports
//!        └──────────────────────────────────────────────-┘        (spawned; ≤ max_concurrent_bulk, one per pool)
//!  release(pod, ports) ──► PoolState::release ──► cool-down, or DELETE /v2.0/ports/{id}
//!  maintenance loop (ports_pool_update_frequency, cool-down ends) ──► PoolState::tick ──► populate/trim
//!  recover(KuryrPort refs) at start ──► tagged compute:kuryr ports ──► PoolState::recover
//!  janitor (janitor.rs) ──► tagged ports nothing owns, older than the minimum age ──► delete
//! ```
//!
//! Where a pod's port comes from is a [`PortSource`]: these warm pools ([`source::Pooled`]), or
//! with `[kubernetes] vif_pool_driver = noop` [`direct::Direct`], upstream's noop pool (one
//! single-port create per pod, deleted on release) — its own implementation, not branches here.
//!
//! Submodules: [`settings`] (options), [`exec`] (populations, deletions, ticks, metrics),
//! [`gate`] (one bulk creation per network at a time),
//! `release` (release, deletion, freeing pools), `inspect` (views for the pool manager),
//! [`netcache`] (network and subnets per network for the VIFs), [`recovery`], [`janitor`],
//! [`manager`] (the pool manager API on a unix socket).

pub mod attach;
mod coalesce;
pub mod direct;
mod error;
pub mod exec;
pub mod gate;
mod inspect;
pub mod janitor;
pub mod manager;
pub mod multi;
pub mod netcache;
mod nodes;
pub mod recovery;
mod release;
pub mod settings;
mod settle;
pub mod source;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_coalesce;
#[cfg(test)]
mod tests_macvlan;
#[cfg(test)]
mod tests_nested;
#[cfg(test)]
mod tests_ownership;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard, atomic::AtomicBool},
    time::{Duration, Instant},
};

use kuryr_core::pool::{Decision, PodKey, PoolKey, PoolState, SgSet, WaitNext};
use kuryr_openstack::{Neutron, Port, PortCreate, PortFilter, PortUpdate};
use kuryr_types::{constants::DEVICE_OWNER, vif::Vif};
use tokio::sync::{Notify, watch};
use tracing::debug;

pub use error::Error;
pub use inspect::{PoolPorts, PoolSummary};
pub use settings::{MultiSettings, PoolMode, PoolSettings, SettingsError};
pub use source::PortSource;

use crate::{drivers::PodTarget, metrics::Metrics};

/// What the KuryrPort handler asks for: a port for `pod` bound to `host` as `target` says.
#[derive(Debug, Clone)]
pub struct PortRequest<'a> {
    /// The pod (KuryrPort namespace and name).
    pub pod: PodKey,
    /// The pod's UID (`device_id` with `port_debug`).
    pub pod_uid: &'a str,
    /// Binding host: the pod's node.
    pub host: &'a str,
    /// Project, network, subnets and security groups from the drivers.
    pub target: &'a PodTarget,
}

/// A port handed to a pod and its VIF.
#[derive(Debug, Clone)]
pub struct Acquired {
    /// The Neutron port.
    pub port: Port,
    /// Its VIF (`active` false until the activation loop sees the port ACTIVE).
    pub vif: Vif,
}

/// The executor. Share it as `Arc<VifPool>`.
pub struct VifPool {
    settings: PoolSettings,
    neutron: Arc<dyn Neutron>,
    metrics: Arc<Metrics>,
    state: Mutex<PoolState>,
    /// Every port the pool knows, as Neutron last returned it (a take needs no read).
    ports: Mutex<HashMap<String, Port>>,
    /// Subnets to allocate from, per network (learned from requests).
    subnets: Mutex<HashMap<String, Vec<String>>>,
    /// Last population failure per pool (surfaced to waiting pods as an Event).
    last_error: Mutex<HashMap<PoolKey, String>>,
    /// Pools published in the metrics (to zero the ones that went away).
    published: Mutex<HashSet<PoolKey>>,
    nets: netcache::NetCache,
    /// Bumped whenever ports may have become available (or a population failed).
    changed: watch::Sender<u64>,
    /// Wakes the maintenance loop (a cool-down started, a population ended).
    maintenance: Notify,
    recovered: AtomicBool,
    /// Shutting down: no new population starts ([`VifPool::quiesce`]).
    closing: AtomicBool,
    /// Bulk creations sent to Neutron and not answered yet (or queued behind one of their
    /// network).
    in_flight: std::sync::atomic::AtomicUsize,
    /// One bulk creation per network at a time ([`gate`]).
    gates: Arc<gate::NetworkGates>,
    /// Hosts whose Node is gone ([`nodes`]).
    gone_hosts: Mutex<HashSet<String>>,
    /// The nodes, once listed ([`nodes`]).
    live_nodes: Mutex<Option<HashSet<String>>>,
    /// How ports reach their nodes (the pod VIF driver: [`attach`]).
    attach: Arc<dyn attach::Attachment>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl VifPool {
    /// An executor with empty pools of ports bound to their nodes (`neutron-vif`); call
    /// [`VifPool::recover`] before serving requests.
    pub fn new(settings: PoolSettings, neutron: Arc<dyn Neutron>, metrics: Arc<Metrics>) -> Arc<Self> {
        Self::with_attachment(settings, neutron, metrics, Arc::new(attach::Bound))
    }

    /// An executor whose ports reach their nodes as `attach` says (`nested-vlan`: subports).
    pub fn with_attachment(
        settings: PoolSettings,
        neutron: Arc<dyn Neutron>,
        metrics: Arc<Metrics>,
        attach: Arc<dyn attach::Attachment>,
    ) -> Arc<Self> {
        let state = PoolState::new(settings.pool.clone());
        let (changed, _) = watch::channel(0);
        Arc::new(VifPool {
            nets: netcache::NetCache::new(neutron.clone()),
            settings,
            neutron,
            metrics,
            state: Mutex::new(state),
            ports: Mutex::default(),
            subnets: Mutex::default(),
            last_error: Mutex::default(),
            published: Mutex::default(),
            changed,
            maintenance: Notify::new(),
            recovered: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            gates: Arc::default(),
            gone_hosts: Mutex::new(HashSet::new()),
            live_nodes: Mutex::new(None),
            attach,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &PoolSettings {
        &self.settings
    }

    /// The Neutron client.
    pub fn neutron(&self) -> &Arc<dyn Neutron> {
        &self.neutron
    }

    fn state(&self) -> MutexGuard<'_, PoolState> {
        lock(&self.state)
    }

    /// Recovery has run: requests may be served (`/ready` waits for it).
    pub fn is_recovered(&self) -> bool {
        self.recovered.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn remember_subnets(&self, target: &PodTarget) {
        if target.subnet_ids.is_empty() {
            return;
        }
        let mut m = lock(&self.subnets);
        if m.get(&target.network_id) != Some(&target.subnet_ids) {
            m.insert(target.network_id.clone(), target.subnet_ids.clone());
        }
    }

    fn subnets_of(&self, network_id: &str) -> Vec<String> {
        lock(&self.subnets).get(network_id).cloned().unwrap_or_default()
    }

    /// The create body of one pool port of `key` with `sgs`.
    fn port_create(
        &self,
        key: &PoolKey,
        sgs: &[String],
        name: Option<String>,
        device_id: Option<String>,
    ) -> PortCreate {
        let body = port_create(
            &self.settings,
            key,
            sgs,
            self.subnets_of(&key.network_id),
            name,
            device_id,
        );
        self.attach.create_body(&key.host, body)
    }

    /// This cluster's pool ports in Neutron, as the pools see them
    /// ([`attach::Attachment::pool_view`]); `what` names the listing in errors.
    async fn cluster_ports(&self, what: &'static str) -> Result<Vec<Port>, Error> {
        let ports =
            list_cluster_ports(&*self.neutron, &self.settings, self.attach.listed_owner(), what).await?;
        // Neutron filtered by tags and project; checked again here, since recovery, the janitor,
        // the settle looks and the uninstall delete or pool what this returns.
        let owner = self.settings.ownership();
        Ok(ports
            .into_iter()
            .filter(|p| owner.owns(&p.tags, p.project()))
            .filter_map(|p| self.attach.pool_view(p))
            .collect())
    }

    /// [`VifPool::cluster_ports`] after the attachment read what it needs again (nested: ports
    /// a previous controller attached to trunks meanwhile).
    async fn fresh_cluster_ports(&self, what: &'static str) -> Result<Vec<Port>, Error> {
        self.attach.refresh().await?;
        self.cluster_ports(what).await
    }

    /// A port for the pod, served from the pool (no Neutron call when a port with the right
    /// security groups is available); an empty pool starts one bulk creation and the call waits
    /// up to `max_wait` for it, returning `Ok(None)` if it is still not there (the caller
    /// requeues).
    ///
    /// Idempotent per pod: a retry after a failed status write gets the same port.
    pub async fn acquire(
        self: &Arc<Self>,
        req: &PortRequest<'_>,
        max_wait: Duration,
    ) -> Result<Option<Acquired>, Error> {
        self.attach.prepare(req.host).await?;
        let placed = self.attach.place(req.host, req.target);
        let target = placed.as_ref().unwrap_or(req.target);
        self.remember_subnets(target);
        let key = PoolKey::new(req.host, &target.project_id, &target.network_id);
        let sgs = SgSet::new(target.security_groups.iter().cloned());
        let mut rx = self.changed.subscribe();
        let deadline = Instant::now() + max_wait;
        loop {
            let now = Instant::now();
            let decision = self.state().request(&req.pod, &key, &sgs, now);
            match decision {
                Decision::Take(take) => {
                    if let Some(p) = take.populate {
                        self.spawn_population(p);
                    }
                    self.publish_stats();
                    return self.finish_take(req, &take.port_id, &sgs).await.map(Some);
                }
                Decision::Wait { reason, populate } => {
                    if let Some(p) = populate {
                        self.spawn_population(p);
                    }
                    self.publish_stats();
                    // What to do next is the pool state's decision; this only carries it out.
                    let (wake, tick_first) = match reason.next(deadline) {
                        WaitNext::NetworkClosed => {
                            return Err(Error::NetworkClosed {
                                network_id: key.network_id.clone(),
                            });
                        }
                        WaitNext::HostClosed => {
                            return Err(Error::HostClosed {
                                host: key.host.clone(),
                            });
                        }
                        WaitNext::BackedOff { until } => {
                            let cause = lock(&self.last_error).get(&key).cloned();
                            return Err(Error::PopulationBackoff {
                                pool: key.to_string(),
                                retry_in: until.saturating_duration_since(now),
                                cause: cause.unwrap_or_else(|| "unknown".into()),
                            });
                        }
                        WaitNext::Wait { until, tick_first } => (until, tick_first),
                    };
                    debug!(pod = %req.pod, pool = %key, ?reason, "waiting for a pool port");
                    tokio::select! {
                        r = rx.changed() => {
                            if r.is_err() {
                                tokio::time::sleep_until(wake.into()).await;
                            }
                        }
                        _ = tokio::time::sleep_until(wake.into()) => {}
                    }
                    if Instant::now() >= deadline {
                        return Ok(None);
                    }
                    if tick_first {
                        self.tick_now();
                    }
                }
            }
        }
    }

    /// Makes a taken port fit the request (security groups, `port_debug` name), from the
    /// cached port: on the hot path nothing needs writing and nothing is read.
    async fn finish_take(
        &self,
        req: &PortRequest<'_>,
        port_id: &str,
        sgs: &SgSet,
    ) -> Result<Acquired, Error> {
        let cached = lock(&self.ports).get(port_id).cloned();
        let mut port = match cached {
            Some(p) => p,
            None => {
                let p = self
                    .neutron
                    .get_port(port_id)
                    .await
                    .map_err(|source| Error::GetPort {
                        port_id: port_id.into(),
                        source,
                    })?;
                lock(&self.ports).insert(p.id.clone(), p.clone());
                p
            }
        };
        let mut update = PortUpdate::default();
        if SgSet::new(port.security_groups.iter().cloned()) != *sgs {
            update.security_groups = Some(sgs.as_slice().to_vec());
        }
        if self.settings.pool.port_debug {
            let name = req.pod.to_string();
            if port.name != name {
                update.name = Some(name);
                if !self.attach.unbound_ports() {
                    update.device_id = Some(req.pod_uid.to_string());
                }
            }
        }
        if update != PortUpdate::default() {
            port = self
                .neutron
                .update_port(port_id, &update)
                .await
                .map_err(|source| Error::UpdatePort {
                    port_id: port_id.into(),
                    what: "security groups / name for the pod",
                    source,
                })?;
            lock(&self.ports).insert(port.id.clone(), port.clone());
        }
        let mut vif = self
            .attach
            .vif(&self.nets, &port, self.settings.ovs_bridge.as_deref())
            .await?;
        // A pooled port may have been ACTIVE for its previous pod: the activation loop decides
        // (unless its ports are never bound, and their VIFs active from the start).
        if !self.attach.unbound_ports() {
            vif.active = Some(false);
        }
        Ok(Acquired { port, vif })
    }

    /// Pre-populates the pool of `(host, target.project_id, target.network_id)` with
    /// `target.security_groups` (upstream's KuryrNetwork population and pool manager): with
    /// `count`, exactly that many ports (bounded by `ports_pool_max`); without, up to
    /// `ports_pool_min` if below it. Waits for the bulk creation; returns how many ports were
    /// created (0: nothing needed, or a population was already in flight).
    pub async fn populate(
        self: &Arc<Self>,
        host: &str,
        target: &PodTarget,
        count: Option<u32>,
    ) -> Result<u32, Error> {
        self.attach.prepare(host).await?;
        let placed = self.attach.place(host, target);
        let target = placed.as_ref().unwrap_or(target);
        self.remember_subnets(target);
        let key = PoolKey::new(host, &target.project_id, &target.network_id);
        let sgs = SgSet::new(target.security_groups.iter().cloned());
        let now = Instant::now();
        let req = {
            let mut st = self.state();
            match count {
                Some(n) => st.populate_now(&key, &sgs, n, now),
                None => st.prepopulate(&key, &sgs, now),
            }
        };
        match req {
            Some(r) => self.execute_population(r).await,
            None => Ok(0),
        }
    }
}

/// The create body of one port of `key` with `sgs` on `subnet_ids` (Neutron chooses when empty),
/// bound to the key's host, owned by kuryr, tagged as the settings say.
pub fn port_create(
    settings: &PoolSettings,
    key: &PoolKey,
    sgs: &[String],
    subnet_ids: Vec<String>,
    name: Option<String>,
    device_id: Option<String>,
) -> PortCreate {
    PortCreate {
        network_id: key.network_id.clone(),
        project_id: Some(key.project_id.clone()),
        subnet_ids,
        security_groups: Some(sgs.to_vec()),
        device_owner: Some(DEVICE_OWNER.to_string()),
        device_id,
        binding_host_id: Some(key.host.clone()),
        name,
        description: None,
        admin_state_up: Some(true),
        port_security_enabled: None,
        tags: settings.tags.tags(),
    }
}

/// This cluster's ports carrying the settings' tags, in its project when it has one, of
/// `device_owner` `owner` when given (`what` names the listing in errors). Without an identity
/// nothing is listed: no filter would make every port of the cloud a candidate.
async fn list_cluster_ports(
    neutron: &dyn Neutron,
    settings: &PoolSettings,
    owner: Option<&str>,
    what: &'static str,
) -> Result<Vec<Port>, Error> {
    if settings.tags.is_empty() {
        return Ok(Vec::new());
    }
    let filter = PortFilter {
        device_owner: owner.map(String::from),
        tags: settings.tags.tags(),
        project_id: settings.project.clone(),
        ..PortFilter::default()
    };
    neutron
        .list_ports(&filter)
        .await
        .map_err(|source| Error::ListPorts { what, source })
}

/// Whether a port a KuryrPort names is this cluster's ([`owned_reference`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owned {
    /// Ours (our tags), or untagged with kuryr's device owner (upstream's, switched over).
    Yes,
    /// Neutron does not have it.
    Gone,
    /// Not ours: left alone.
    No(kuryr_core::ownership::Refusal),
}

impl Owned {
    /// Whether the port a KuryrPort of `pod` names as `id` may be deleted; a port that is not
    /// ours is logged (the one place that says so) and left alone.
    pub(crate) fn may_delete(self, pod: &PodKey, id: &str) -> bool {
        match self {
            Owned::Yes => true,
            Owned::Gone => false,
            Owned::No(why) => {
                tracing::warn!(%pod, port = %id, reason = %why, "a KuryrPort named a port that is not this cluster's: left alone");
                false
            }
        }
    }
}

/// Reads port `id` (named by a KuryrPort, unknown to the pool) and tells whether it may be
/// released: one `GET` of the port, only off the hot path (a release of a port recovery refused).
pub(crate) async fn owned_reference(
    neutron: &dyn Neutron,
    settings: &PoolSettings,
    id: &str,
) -> Result<Owned, Error> {
    let mut found = owned_references(neutron, settings, std::slice::from_ref(&id.to_string())).await?;
    Ok(found.pop().map_or(Owned::Gone, |(_, o)| o))
}

/// [`owned_reference`] for many ports in one listing (IDs split in requests of 100 by the
/// client): each ID with its verdict, in the order given.
pub(crate) async fn owned_references(
    neutron: &dyn Neutron,
    settings: &PoolSettings,
    ids: &[String],
) -> Result<Vec<(String, Owned)>, Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let found = neutron
        .list_ports(&PortFilter::ids(ids.iter().cloned()))
        .await
        .map_err(|source| Error::ListPorts {
            what: "the ports a KuryrPort names",
            source,
        })?;
    let by_id: std::collections::HashMap<&str, &Port> = found.iter().map(|p| (p.id.as_str(), p)).collect();
    Ok(ids
        .iter()
        .map(|id| {
            let owned = match by_id.get(id.as_str()) {
                None => Owned::Gone,
                Some(p) => match settings.ownership().accepts_referenced(p) {
                    kuryr_core::ownership::Verdict::Refused(why) => Owned::No(why),
                    _ => Owned::Yes,
                },
            };
            (id.clone(), owned)
        })
        .collect())
}

/// Deletes port `id` (an already deleted one is fine).
async fn delete_port_id(neutron: &dyn Neutron, id: &str) -> Result<(), Error> {
    neutron.delete_port(id).await.map_err(|source| Error::DeletePort {
        port_id: id.into(),
        source,
    })
}
