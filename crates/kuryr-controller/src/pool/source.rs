//! [`PortSource`]: where a pod's port comes from. Two drivers, each its own implementation:
//! [`Pooled`] — warm pools per (host, project, network), `[kubernetes] vif_pool_driver = neutron`
//! (the executor [`VifPool`] of `kuryr-core`'s pure pool state) — and
//! [`Direct`](super::direct::Direct) — one port created per pod and deleted with it, upstream's
//! `noop`. The handlers see only this trait.

use std::{sync::Arc, time::Duration};

use kube::Client;
use kuryr_core::pool::{InUseRef, PodKey, RecoveryReport};
use kuryr_openstack::BoxFuture;

use super::{Acquired, Error, PoolSettings, PortRequest, VifPool};
use crate::drivers::PodTarget;

/// The supply of pods' ports.
pub trait PortSource: Send + Sync {
    /// The settings it was built from.
    fn settings(&self) -> &PoolSettings;

    /// A port for the pod (idempotent per pod: a retry after a failed status write gets the
    /// same port); `Ok(None)` when none could be had within `max_wait` (the caller requeues).
    fn acquire<'a>(
        &'a self,
        req: &'a PortRequest<'a>,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Option<Acquired>, Error>>;

    /// The pod's KuryrPort now references its port.
    fn committed(&self, pod: &PodKey);

    /// Gives the pod's ports back (`port_ids` from its KuryrPort, plus any port handed to it
    /// that the KuryrPort does not reference yet).
    fn release<'a>(&'a self, pod: &'a PodKey, port_ids: &'a [String]) -> BoxFuture<'a, Result<(), Error>>;

    /// [`PortSource::release`] of the ports of a pod of node `host` (the KuryrPort's
    /// `podNodeName`): the multi pool routes ports it does not know by the node's driver, as
    /// upstream routed them by their VIF's class.
    fn release_on<'a>(
        &'a self,
        pod: &'a PodKey,
        _host: &'a str,
        port_ids: &'a [String],
    ) -> BoxFuture<'a, Result<(), Error>> {
        self.release(pod, port_ids)
    }

    /// Rebuilds what it knows from the KuryrPorts' references and Neutron (at start).
    fn recover(&self, refs: Vec<InUseRef>) -> BoxFuture<'_, Result<RecoveryReport, Error>>;

    /// Pre-populates the pool of `(host, target)` (`count`: exactly that many); returns the
    /// ports created.
    fn populate<'a>(
        &'a self,
        host: &'a str,
        target: &'a PodTarget,
        count: Option<u32>,
    ) -> BoxFuture<'a, Result<u32, Error>>;

    /// Deletes the pooled ports of `network_id` (before the network goes); returns how many.
    fn free_network<'a>(&'a self, network_id: &'a str) -> BoxFuture<'a, Result<usize, Error>>;

    /// The security groups of a port as the pool last saw them in Neutron (`None`: not a port
    /// it knows): spares a read of a port it just handed out.
    fn known_security_groups(&self, port_id: &str) -> Option<Vec<String>>;

    /// Takes security group `sg_id` off every pooled (not in-use) port, before the group is
    /// deleted (upstream's `remove_sg_from_pools`); returns how many ports were changed. Such
    /// ports are left with no group (they admit nothing until taken, when they get a pod's).
    fn remove_security_group<'a>(&'a self, sg_id: &'a str) -> BoxFuture<'a, Result<usize, Error>>;

    /// A pod's port was changed by someone else (the policy driver set its security groups):
    /// the pool's books follow, so the port goes back to the right group when released.
    fn port_updated(&self, port: &kuryr_openstack::Port);

    /// The loops it needs while the KuryrPort handler runs (maintenance, janitor).
    fn run_background(self: Arc<Self>, client: Client) -> BoxFuture<'static, ()>;

    /// The warm pools this source has (the pool manager API serves them; shutdown quiesces
    /// them); none for the noop driver, one executor per pool driver of the multi pool.
    fn pools(&self) -> Vec<Arc<VifPool>>;
}

/// Warm pools.
pub struct Pooled(pub Arc<VifPool>);

impl PortSource for Pooled {
    fn settings(&self) -> &PoolSettings {
        self.0.settings()
    }

    fn acquire<'a>(
        &'a self,
        req: &'a PortRequest<'a>,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Option<Acquired>, Error>> {
        Box::pin(self.0.acquire(req, max_wait))
    }

    fn committed(&self, _pod: &PodKey) {}

    fn release<'a>(&'a self, pod: &'a PodKey, port_ids: &'a [String]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.0.release(pod, port_ids))
    }

    fn recover(&self, refs: Vec<InUseRef>) -> BoxFuture<'_, Result<RecoveryReport, Error>> {
        Box::pin(self.0.recover(refs))
    }

    fn populate<'a>(
        &'a self,
        host: &'a str,
        target: &'a PodTarget,
        count: Option<u32>,
    ) -> BoxFuture<'a, Result<u32, Error>> {
        Box::pin(self.0.populate(host, target, count))
    }

    fn free_network<'a>(&'a self, network_id: &'a str) -> BoxFuture<'a, Result<usize, Error>> {
        Box::pin(self.0.free_network(network_id))
    }

    fn known_security_groups(&self, port_id: &str) -> Option<Vec<String>> {
        self.0.known_security_groups(port_id)
    }

    fn port_updated(&self, port: &kuryr_openstack::Port) {
        self.0.port_updated(port);
    }

    fn remove_security_group<'a>(&'a self, sg_id: &'a str) -> BoxFuture<'a, Result<usize, Error>> {
        Box::pin(self.0.remove_security_group(sg_id))
    }

    fn run_background(self: Arc<Self>, client: Client) -> BoxFuture<'static, ()> {
        let pool = self.0.clone();
        Box::pin(async move {
            // The janitor may finish (off without tags); maintenance and the node watch run
            // forever.
            tokio::join!(
                pool.clone().run_maintenance(),
                pool.clone().run_janitor(client.clone()),
                pool.run_node_watch(client)
            );
        })
    }

    fn pools(&self) -> Vec<Arc<VifPool>> {
        vec![self.0.clone()]
    }
}
