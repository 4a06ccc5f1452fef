//! [`Multi`]: one cluster with nodes of several kinds — `[kubernetes] vif_pool_driver =
//! multi_pool` with `[vif_pool] vif_pool_mapping` (or the deprecated `pools_vif_drivers`):
//! bare-metal-style nodes whose pods get ports bound to them (`neutron-vif` from `neutron` pools)
//! beside VM nodes whose pods get subports of their trunk (`nested-vlan` from `nested` pools). A
//! node's pod VIF driver is its label `pod_vif` (default `[kubernetes] pod_vif_driver`), read
//! once per `[node_driver_caching] cache_time` as upstream does; each driver has its own pools,
//! and every call goes to the pools of the pod's node — a release to the pools that handed the
//! port out.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::future::join_all;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};
use kuryr_core::pool::{InUseRef, PodKey, RecoveryReport};
use kuryr_openstack::BoxFuture;
use tracing::debug;

use super::{Acquired, Error, PoolSettings, PortRequest, PortSource, VifPool, lock};
use crate::drivers::PodTarget;

/// The node label naming a node's pod VIF driver.
pub const POD_VIF_LABEL: &str = "pod_vif";

/// Where a node's `pod_vif` label comes from (Kubernetes; a table in unit tests).
pub trait NodeLabels: Send + Sync {
    /// The `pod_vif` label of `node` (`None`: not set).
    fn pod_vif<'a>(&'a self, node: &'a str) -> BoxFuture<'a, Result<Option<String>, Error>>;
}

/// The Nodes of the cluster.
pub struct KubeNodeLabels(pub Api<Node>);

impl NodeLabels for KubeNodeLabels {
    fn pod_vif<'a>(&'a self, node: &'a str) -> BoxFuture<'a, Result<Option<String>, Error>> {
        Box::pin(async move {
            let n = self.0.get(node).await.map_err(|source| Error::Kube {
                what: format!("reading Node {node} (its {POD_VIF_LABEL} label names its pod VIF driver)"),
                source,
            })?;
            Ok(n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POD_VIF_LABEL))
                .cloned())
        })
    }
}

/// A fixed table node → label.
impl NodeLabels for HashMap<String, String> {
    fn pod_vif<'a>(&'a self, node: &'a str) -> BoxFuture<'a, Result<Option<String>, Error>> {
        let v = self.get(node).cloned();
        Box::pin(async move { Ok(v) })
    }
}

/// See the module documentation.
pub struct Multi {
    default_driver: String,
    sources: BTreeMap<String, Arc<dyn PortSource>>,
    nodes: Arc<dyn NodeLabels>,
    cache_time: Duration,
    cache: Mutex<HashMap<String, (String, Instant)>>,
    /// Which driver's pools served each pod.
    served: Mutex<HashMap<PodKey, String>>,
}

impl Multi {
    /// The pools of each driver in `sources` (by pod VIF driver name); nodes without the
    /// label use `default_driver`'s.
    pub fn new(
        default_driver: &str,
        sources: BTreeMap<String, Arc<dyn PortSource>>,
        nodes: Arc<dyn NodeLabels>,
        cache_time: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            default_driver: default_driver.to_string(),
            sources,
            nodes,
            cache_time,
            cache: Mutex::default(),
            served: Mutex::default(),
        })
    }

    /// A Kubernetes-backed [`Multi`].
    pub fn with_client(
        default_driver: &str,
        sources: BTreeMap<String, Arc<dyn PortSource>>,
        client: Client,
        cache_time: Duration,
    ) -> Arc<Self> {
        Self::new(
            default_driver,
            sources,
            Arc::new(KubeNodeLabels(Api::all(client))),
            cache_time,
        )
    }

    /// The pod VIF driver of `node`.
    async fn driver_of(&self, node: &str) -> Result<String, Error> {
        if let Some((d, at)) = lock(&self.cache).get(node)
            && at.elapsed() < self.cache_time
        {
            return Ok(d.clone());
        }
        let driver = self
            .nodes
            .pod_vif(node)
            .await?
            .unwrap_or_else(|| self.default_driver.clone());
        if !self.sources.contains_key(&driver) {
            return Err(Error::NoPoolForDriver {
                node: node.to_string(),
                driver,
                mapped: self.sources.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        }
        lock(&self.cache).insert(node.to_string(), (driver.clone(), Instant::now()));
        Ok(driver)
    }

    fn default_source(&self) -> &Arc<dyn PortSource> {
        // `new`'s callers always map the default driver (settings validate it).
        self.sources
            .get(&self.default_driver)
            .or_else(|| self.sources.values().next())
            .expect("Multi has at least one pool")
    }

    async fn source_of(&self, node: &str) -> Result<&Arc<dyn PortSource>, Error> {
        let d = self.driver_of(node).await?;
        Ok(self.sources.get(&d).unwrap_or_else(|| self.default_source()))
    }

    /// The source a release goes to: the one that knows the ports, else the one that served
    /// the pod, else (after a restart) the node's driver's when the node is known, else the
    /// default driver's.
    async fn releasing(&self, pod: &PodKey, host: Option<&str>, port_ids: &[String]) -> &Arc<dyn PortSource> {
        let served = lock(&self.served).remove(pod);
        if let Some(s) = self
            .knowing(port_ids)
            .or_else(|| served.and_then(|d| self.sources.get(&d)))
        {
            return s;
        }
        match host {
            Some(h) => self.source_of(h).await.unwrap_or_else(|_| self.default_source()),
            None => self.default_source(),
        }
    }

    /// The pools that know one of `port_ids` (hand it out or pool it).
    fn knowing(&self, port_ids: &[String]) -> Option<&Arc<dyn PortSource>> {
        self.sources
            .values()
            .find(|s| port_ids.iter().any(|id| s.known_security_groups(id).is_some()))
    }
}

fn merge(into: &mut RecoveryReport, r: RecoveryReport) {
    into.in_use.extend(r.in_use);
    into.available.extend(r.available);
    into.cooling.extend(r.cooling);
    into.to_delete.extend(r.to_delete);
    into.missing.extend(r.missing);
    into.conflicts.extend(r.conflicts);
    into.refused.extend(r.refused);
    into.adopted_untagged.extend(r.adopted_untagged);
    into.deferred.extend(r.deferred);
}

impl PortSource for Multi {
    fn settings(&self) -> &PoolSettings {
        self.default_source().settings()
    }

    fn acquire<'a>(
        &'a self,
        req: &'a PortRequest<'a>,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Option<Acquired>, Error>> {
        Box::pin(async move {
            let driver = self.driver_of(req.host).await?;
            lock(&self.served).insert(req.pod.clone(), driver.clone());
            let source = self.sources.get(&driver).unwrap_or_else(|| self.default_source());
            source.acquire(req, max_wait).await
        })
    }

    fn committed(&self, pod: &PodKey) {
        let driver = lock(&self.served).get(pod).cloned();
        match driver.and_then(|d| self.sources.get(&d)) {
            Some(s) => s.committed(pod),
            None => self.sources.values().for_each(|s| s.committed(pod)),
        }
    }

    fn release<'a>(&'a self, pod: &'a PodKey, port_ids: &'a [String]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.releasing(pod, None, port_ids)
                .await
                .release(pod, port_ids)
                .await
        })
    }

    fn release_on<'a>(
        &'a self,
        pod: &'a PodKey,
        host: &'a str,
        port_ids: &'a [String],
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.releasing(pod, Some(host), port_ids)
                .await
                .release(pod, port_ids)
                .await
        })
    }

    fn recover(&self, refs: Vec<InUseRef>) -> BoxFuture<'_, Result<RecoveryReport, Error>> {
        Box::pin(async move {
            let mut by_driver: BTreeMap<String, Vec<InUseRef>> = BTreeMap::new();
            for r in refs {
                let d = match self.driver_of(&r.host).await {
                    Ok(d) => d,
                    Err(e) => {
                        // A node gone (or unreadable): its pods' ports are in the default pools'
                        // books until they are released.
                        debug!(node = %r.host, error = %crate::error_chain(&e), "recovery: node's driver unknown");
                        self.default_driver.clone()
                    }
                };
                by_driver.entry(d).or_default().push(r);
            }
            let mut report = RecoveryReport::default();
            for (driver, source) in &self.sources {
                let refs = by_driver.remove(driver).unwrap_or_default();
                merge(&mut report, source.recover(refs).await?);
            }
            Ok(report)
        })
    }

    fn populate<'a>(
        &'a self,
        host: &'a str,
        target: &'a PodTarget,
        count: Option<u32>,
    ) -> BoxFuture<'a, Result<u32, Error>> {
        Box::pin(async move { self.source_of(host).await?.populate(host, target, count).await })
    }

    fn free_network<'a>(&'a self, network_id: &'a str) -> BoxFuture<'a, Result<usize, Error>> {
        Box::pin(async move {
            let mut n = 0;
            for s in self.sources.values() {
                n += s.free_network(network_id).await?;
            }
            Ok(n)
        })
    }

    fn known_security_groups(&self, port_id: &str) -> Option<Vec<String>> {
        self.sources
            .values()
            .find_map(|s| s.known_security_groups(port_id))
    }

    fn remove_security_group<'a>(&'a self, sg_id: &'a str) -> BoxFuture<'a, Result<usize, Error>> {
        Box::pin(async move {
            let mut n = 0;
            for s in self.sources.values() {
                n += s.remove_security_group(sg_id).await?;
            }
            Ok(n)
        })
    }

    fn port_updated(&self, port: &kuryr_openstack::Port) {
        match self.knowing(std::slice::from_ref(&port.id)) {
            Some(s) => s.port_updated(port),
            None => debug!(port = %port.id, "a port no pool knows was updated"),
        }
    }

    fn run_background(self: Arc<Self>, client: Client) -> BoxFuture<'static, ()> {
        let all: Vec<_> = self
            .sources
            .values()
            .map(|s| s.clone().run_background(client.clone()))
            .collect();
        Box::pin(async move {
            join_all(all).await;
        })
    }

    fn pools(&self) -> Vec<Arc<VifPool>> {
        self.sources.values().flat_map(|s| s.pools()).collect()
    }
}
