//! Pools of nodes that are gone for good. A Node deleted from the cluster (a VM removed, a node
//! replaced) takes the pods of its pools with it, but its ports would stay bound to a host that
//! no longer exists, pooled forever. The pool watches Nodes: a deleted Node's
//! pools are freed at once, and so are the pools of hosts the first listing does not show (a
//! node deleted while no controller ran); ports released later for such a host are deleted
//! instead of cooling down. A Node that comes back (the same name) gets pools again on demand.
//! Upstream kept such pools until the controller restarted and its recovery skipped them.

use std::{collections::HashSet, sync::Arc};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use tracing::{info, warn};

use super::{VifPool, lock};

impl VifPool {
    /// Whether `host` is a node known to be gone.
    pub fn host_gone(&self, host: &str) -> bool {
        lock(&self.gone_hosts).contains(host)
    }

    /// `host`'s Node is gone: its pools are drained and closed (no port is created or handed
    /// out there; ports released later are deleted).
    pub async fn forget_host(self: &Arc<Self>, host: &str) {
        if !lock(&self.gone_hosts).insert(host.to_string()) {
            return;
        }
        let ids = self.state().close_host(host);
        self.publish_stats();
        match self.delete_many(&ids).await {
            Ok(n) => info!(host, deleted = n, "node gone: its pools are freed and closed"),
            Err(e) => {
                warn!(host, error = %crate::error_chain(&e), "node gone: deleting its pool ports failed (the janitor retries)")
            }
        }
    }

    fn host_back(&self, host: &str) {
        if lock(&self.gone_hosts).remove(host) {
            self.state().reopen_host(host);
            info!(host, "node back: its pools fill again on demand");
        }
    }

    /// Hosts that hold pool ports now.
    fn pooled_hosts(&self) -> HashSet<String> {
        self.state().stats().into_keys().map(|k| k.host).collect()
    }

    /// Frees the pools of every host that is not a node (once the nodes are listed): after the
    /// node listing, and after a recovery that may have rebuilt such pools.
    pub async fn free_pools_of_missing_nodes(self: &Arc<Self>) {
        let Some(live) = lock(&self.live_nodes).clone() else {
            return;
        };
        for host in self.pooled_hosts().difference(&live) {
            self.forget_host(host).await;
        }
    }

    /// Watches Nodes for ever (re-listing after errors, with back-off).
    pub async fn run_node_watch(self: Arc<Self>, client: Client) {
        let api: Api<Node> = Api::all(client);
        let mut listing: Option<HashSet<String>> = None;
        let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
        while let Some(ev) = events.next().await {
            match ev {
                Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
                Ok(watcher::Event::InitApply(n)) => {
                    if let Some(l) = listing.as_mut() {
                        l.insert(n.name_any());
                    }
                    self.host_back(&n.name_any());
                }
                Ok(watcher::Event::InitDone) => {
                    *lock(&self.live_nodes) = Some(listing.take().unwrap_or_default());
                    self.free_pools_of_missing_nodes().await;
                }
                Ok(watcher::Event::Apply(n)) => {
                    if let Some(l) = lock(&self.live_nodes).as_mut() {
                        l.insert(n.name_any());
                    }
                    self.host_back(&n.name_any());
                }
                Ok(watcher::Event::Delete(n)) => {
                    if let Some(l) = lock(&self.live_nodes).as_mut() {
                        l.remove(&n.name_any());
                    }
                    self.forget_host(&n.name_any()).await;
                }
                Err(e) => warn!(error = %e, "node watch failed (retrying)"),
            }
        }
    }
}
