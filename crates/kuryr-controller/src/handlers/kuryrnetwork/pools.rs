//! [`NetworkPools`]: what the KuryrNetwork handlers need from the port pools — pre-populate a
//! new namespace network's pools on a node, and free a network's pooled ports before the
//! network is deleted. Implemented over the controller's [`PortSource`] ([`PoolAdapter`]);
//! [`NoPools`] for tests.

use std::sync::Arc;

use kuryr_openstack::BoxFuture;

use crate::{drivers::PodTarget, pool::PortSource};

/// A failed pool operation (the pool's own error, boxed to keep this seam small).
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct PoolsError {
    /// What failed.
    pub what: String,
    /// Cause.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// The pool operations of the namespace network lifecycle.
pub trait NetworkPools: Send + Sync {
    /// Fills the pool of `(host, target)` up to `ports_pool_min`; returns the ports created.
    fn populate<'a>(&'a self, host: &'a str, target: &'a PodTarget)
    -> BoxFuture<'a, Result<u32, PoolsError>>;

    /// Deletes the pooled ports of `network_id` and refuses new ones; returns how many.
    fn free_network<'a>(&'a self, network_id: &'a str) -> BoxFuture<'a, Result<usize, PoolsError>>;
}

/// No pools: nothing to populate or free.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPools;

impl NetworkPools for NoPools {
    fn populate<'a>(
        &'a self,
        _host: &'a str,
        _target: &'a PodTarget,
    ) -> BoxFuture<'a, Result<u32, PoolsError>> {
        Box::pin(async { Ok(0) })
    }

    fn free_network<'a>(&'a self, _network_id: &'a str) -> BoxFuture<'a, Result<usize, PoolsError>> {
        Box::pin(async { Ok(0) })
    }
}

/// The controller's port source.
pub struct PoolAdapter(pub Arc<dyn PortSource>);

impl NetworkPools for PoolAdapter {
    fn populate<'a>(
        &'a self,
        host: &'a str,
        target: &'a PodTarget,
    ) -> BoxFuture<'a, Result<u32, PoolsError>> {
        Box::pin(async move {
            self.0.populate(host, target, None).await.map_err(|e| PoolsError {
                what: format!("populating the pool of network {} on {host}", target.network_id),
                source: Box::new(e),
            })
        })
    }

    fn free_network<'a>(&'a self, network_id: &'a str) -> BoxFuture<'a, Result<usize, PoolsError>> {
        Box::pin(async move {
            self.0.free_network(network_id).await.map_err(|e| PoolsError {
                what: format!("freeing the pools of network {network_id}"),
                source: Box::new(e),
            })
        })
    }
}
