//! [`Direct`]: upstream's `noop` pool driver — no pools: one port is created for each pod when
//! it needs one (the creations of pods starting at once go out as one bulk request:
//! [`Creates`]) and deleted when the pod releases it. A port created for
//! a pod whose KuryrPort does not reference it yet is remembered, so a retry gets the same port
//! and a release (or the janitor) does not leak it. The pod VIF driver's
//! [`Attachment`] makes a port usable on its node: bound to it (`neutron-vif`), or its pairs
//! allowed on the node VM's port (`nested-macvlan`, upstream's pairing with `noop`).

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use kube::Client;
use kuryr_core::pool::{InUseRef, PodKey, PoolKey, PoolState, RecoveryReport, orphans};
use kuryr_openstack::{BoxFuture, Neutron, Port};
use tracing::{info, warn};

use super::{
    Acquired, Error, PoolSettings, PortRequest, VifPool,
    attach::{Attachment, Bound},
    coalesce::Creates,
    delete_port_id, janitor, list_cluster_ports, lock,
    netcache::NetCache,
    owned_references, port_create,
    source::PortSource,
};
use crate::drivers::PodTarget;

/// The `noop` driver.
pub struct Direct {
    settings: PoolSettings,
    neutron: Arc<dyn Neutron>,
    nets: NetCache,
    attach: Arc<dyn Attachment>,
    /// Creations of pods starting at once go out together.
    creates: Creates,
    /// Ports created for pods whose KuryrPort does not reference them yet.
    pending: Mutex<HashMap<PodKey, Port>>,
}

impl Direct {
    /// The driver over `neutron`, ports bound to their nodes (`neutron-vif`).
    pub fn new(settings: PoolSettings, neutron: Arc<dyn Neutron>) -> Arc<Self> {
        Self::with_attachment(settings, neutron, Arc::new(Bound))
    }

    /// The driver with the pod VIF driver's `attach`.
    pub fn with_attachment(
        settings: PoolSettings,
        neutron: Arc<dyn Neutron>,
        attach: Arc<dyn Attachment>,
    ) -> Arc<Self> {
        Arc::new(Direct {
            nets: NetCache::new(neutron.clone()),
            settings,
            neutron,
            attach,
            creates: Creates::default(),
            pending: Mutex::default(),
        })
    }

    async fn acquire_one(&self, req: &PortRequest<'_>) -> Result<Acquired, Error> {
        self.attach.prepare(req.host).await?;
        let placed = self.attach.place(req.host, req.target);
        let target = placed.as_ref().unwrap_or(req.target);
        let (network_id, subnet_ids) = (target.network_id.clone(), target.subnet_ids.clone());
        let pending = lock(&self.pending).get(&req.pod).cloned();
        let port = match pending {
            Some(p) if p.network_id == network_id => p,
            _ => {
                let key = PoolKey::new(req.host, &req.target.project_id, &network_id);
                let debug = self.settings.pool.port_debug;
                let create = self.attach.create_body(
                    req.host,
                    port_create(
                        &self.settings,
                        &key,
                        &target.security_groups,
                        subnet_ids,
                        debug.then(|| req.pod.to_string()),
                        debug.then(|| req.pod_uid.to_string()),
                    ),
                );
                let mut port = self
                    .creates
                    .create(&*self.neutron, create)
                    .await
                    .map_err(|source| Error::CreatePort {
                        pool: key.to_string(),
                        source,
                    })?;
                if let Err(e) = self
                    .attach
                    .attach(req.host, std::slice::from_mut(&mut port))
                    .await
                {
                    // Not usable: nothing is left behind (the janitor retries a failed delete).
                    if let Err(d) = self.delete(&port.id).await {
                        warn!(pod = %req.pod, port = %port.id, error = %crate::error_chain(&d), "deleting an unattached port failed");
                    }
                    return Err(e);
                }
                info!(pod = %req.pod, port = %port.id, driver = self.attach.name(), "port created (noop driver)");
                lock(&self.pending).insert(req.pod.clone(), port.clone());
                port
            }
        };
        let vif = self
            .attach
            .vif(&self.nets, &port, self.settings.ovs_bridge.as_deref())
            .await?;
        Ok(Acquired { port, vif })
    }

    async fn delete(&self, id: &str) -> Result<(), Error> {
        self.delete_all(std::slice::from_ref(&id.to_string())).await
    }

    /// Undoes the attachment of `ids` (one call per VM port for macvlan), then deletes them.
    async fn delete_all(&self, ids: &[String]) -> Result<(), Error> {
        self.attach.detach(ids).await?;
        for id in ids {
            delete_port_id(&*self.neutron, id).await?;
        }
        Ok(())
    }

    /// One janitor pass: this cluster's tagged ports that neither a KuryrPort (`kuryrport_ports`,
    /// read before the call) nor a pending pod owns, older than the minimum age, are deleted
    /// (without pools nothing is adopted). Returns the deleted IDs.
    pub async fn janitor_pass(&self, kuryrport_ports: &HashSet<String>) -> Result<Vec<String>, Error> {
        let tags = &self.settings.tags;
        if tags.is_empty() {
            return Ok(Vec::new());
        }
        self.attach.refresh().await?;
        let ports: Vec<Port> = list_cluster_ports(
            &*self.neutron,
            &self.settings,
            self.attach.listed_owner(),
            "janitor",
        )
        .await?
        .into_iter()
        .filter_map(|p| self.attach.pool_view(p))
        .collect();
        let mut owned = kuryrport_ports.clone();
        owned.extend(lock(&self.pending).values().map(|p| p.id.clone()));
        // No pools: an empty pool state owns nothing.
        let empty = PoolState::new(self.settings.pool.clone());
        let found = orphans(
            &owned,
            &empty,
            &ports,
            self.settings.ownership(),
            jiff::Timestamp::now(),
            self.settings.janitor_min_age,
        );
        if !found.is_empty() {
            info!(ports = ?found, "janitor: deleting ports nothing owns");
        }
        self.delete_all(&found).await?;
        Ok(found)
    }
}

impl PortSource for Direct {
    fn settings(&self) -> &PoolSettings {
        &self.settings
    }

    fn acquire<'a>(
        &'a self,
        req: &'a PortRequest<'a>,
        _max_wait: Duration,
    ) -> BoxFuture<'a, Result<Option<Acquired>, Error>> {
        Box::pin(async move { self.acquire_one(req).await.map(Some) })
    }

    fn committed(&self, pod: &PodKey) {
        lock(&self.pending).remove(pod);
    }

    fn release<'a>(&'a self, pod: &'a PodKey, port_ids: &'a [String]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            // The KuryrPort's ports are deleted only when Neutron proves them ours; the one
            // created for the pod and not recorded yet is ours by construction.
            let mut ids: Vec<String> = Vec::new();
            for (id, owned) in owned_references(&*self.neutron, &self.settings, port_ids).await? {
                if owned.may_delete(pod, &id) {
                    ids.push(id);
                }
            }
            if let Some(p) = lock(&self.pending).remove(pod)
                && !ids.contains(&p.id)
            {
                ids.push(p.id);
            }
            self.delete_all(&ids).await
        })
    }

    fn recover(&self, _refs: Vec<InUseRef>) -> BoxFuture<'_, Result<RecoveryReport, Error>> {
        // Nothing to rebuild: each pod's port is in its KuryrPort, leftovers are the janitor's.
        Box::pin(async { Ok(RecoveryReport::default()) })
    }

    fn populate<'a>(
        &'a self,
        _host: &'a str,
        _target: &'a PodTarget,
        _count: Option<u32>,
    ) -> BoxFuture<'a, Result<u32, Error>> {
        Box::pin(async { Ok(0) })
    }

    fn free_network<'a>(&'a self, _network_id: &'a str) -> BoxFuture<'a, Result<usize, Error>> {
        Box::pin(async { Ok(0) })
    }

    fn port_updated(&self, _port: &kuryr_openstack::Port) {}

    fn known_security_groups(&self, _port_id: &str) -> Option<Vec<String>> {
        None
    }

    fn remove_security_group<'a>(&'a self, _sg_id: &'a str) -> BoxFuture<'a, Result<usize, Error>> {
        // No pool: every port belongs to a pod, whose groups the policy driver sets.
        Box::pin(async { Ok(0) })
    }

    fn run_background(self: Arc<Self>, client: Client) -> BoxFuture<'static, ()> {
        let (interval, tagged) = (self.settings.janitor_interval, !self.settings.tags.is_empty());
        Box::pin(janitor::run_loop(interval, tagged, client, move |ids| {
            let me = self.clone();
            async move { me.janitor_pass(&ids).await }
        }))
    }

    fn pools(&self) -> Vec<Arc<VifPool>> {
        Vec::new()
    }
}
