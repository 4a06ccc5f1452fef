//! The janitor: periodically settles this cluster's tagged `compute:kuryr` ports that neither a
//! KuryrPort nor the pool owns and that are older than `ports_pool_janitor_min_age` (so ports
//! of a bulk creation still in flight are spared; no pass runs while a population is in flight):
//! usable ones (bound; ports of a bulk whose answer was lost, or deferred at recovery) go back
//! in their pools, the others are deleted. Without any tag configured it does nothing:
//! ownership cannot be proven. [`run_loop`] drives the pass of either driver (the `noop` one,
//! [`Direct`](super::direct::Direct), deletes what nothing owns).

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant},
};

use kube::{Api, Client, api::ListParams};
use kuryr_core::pool::orphans;
use kuryr_types::KuryrPort;
use tracing::{info, warn};

use super::{Error, VifPool};

/// Why a janitor pass failed.
#[derive(Debug, thiserror::Error)]
pub enum JanitorError {
    /// Listing the KuryrPorts failed.
    #[error("listing KuryrPorts")]
    ListKuryrPorts(#[source] kube::Error),
    /// A Neutron step failed.
    #[error("janitor")]
    Pool(#[source] Error),
}

impl VifPool {
    /// One pass: `kuryrport_ports` are the port IDs KuryrPorts reference, read BEFORE this
    /// call (a port handed out after that read is owned by the pool). Returns the deleted IDs
    /// (adopted ones are logged and counted in the pool gauges).
    pub async fn janitor_pass(&self, kuryrport_ports: &HashSet<String>) -> Result<Vec<String>, Error> {
        let tags = &self.settings.tags;
        if tags.is_empty() {
            return Ok(Vec::new());
        }
        // A bulk creation in flight has ports Neutron lists but the pool does not know yet; on
        // a slow Neutron it can outlast the minimum age. Try again at the next pass.
        if self.state().in_flight() > 0 {
            return Ok(Vec::new());
        }
        let ports = self.fresh_cluster_ports("janitor").await?;
        let owned = kuryrport_ports.clone();
        let (delete, adopted) = {
            let mut st = self.state();
            if st.in_flight() > 0 {
                return Ok(Vec::new());
            }
            let wall = jiff::Timestamp::now();
            let found: HashSet<String> = orphans(
                &owned,
                &st,
                &ports,
                self.settings.ownership(),
                wall,
                self.settings.janitor_min_age,
            )
            .into_iter()
            .collect();
            let found: Vec<&kuryr_openstack::Port> = ports.iter().filter(|p| found.contains(&p.id)).collect();
            st.adopt_orphans(&found, Instant::now(), wall)
        };
        self.take_in_adopted(&ports, &adopted, "janitor");
        if delete.is_empty() {
            return Ok(delete);
        }
        info!(ports = ?delete, "janitor: deleting unusable ports nothing owns");
        self.delete_many(&delete).await?;
        Ok(delete)
    }

    /// Runs [`VifPool::janitor_pass`] every `ports_pool_janitor_interval` (never if zero),
    /// reading the KuryrPorts through `client` first.
    pub async fn run_janitor(self: Arc<Self>, client: Client) {
        let (interval, tagged) = (self.settings.janitor_interval, !self.settings.tags.is_empty());
        run_loop(interval, tagged, client, move |ids| {
            let me = self.clone();
            async move { me.janitor_pass(&ids).await }
        })
        .await
    }

    /// One pass including the KuryrPort listing.
    pub async fn janitor_once(&self, client: &Client) -> Result<Vec<String>, JanitorError> {
        let ids = kuryrport_port_ids(client).await?;
        self.janitor_pass(&ids).await.map_err(JanitorError::Pool)
    }
}

/// The port IDs every KuryrPort references.
pub async fn kuryrport_port_ids(client: &Client) -> Result<HashSet<String>, JanitorError> {
    let api: Api<KuryrPort> = Api::all(client.clone());
    let kps = api
        .list(&ListParams::default())
        .await
        .map_err(JanitorError::ListKuryrPorts)?;
    Ok(super::recovery::in_use_refs(&kps.items)
        .into_iter()
        .map(|r| r.port_id)
        .collect())
}

/// Every `interval` (never if zero, or without tags: ownership cannot be proven), reads the
/// KuryrPorts' port IDs and runs `pass` with them, whichever driver it belongs to.
pub async fn run_loop<F, Fut>(interval: Duration, tagged: bool, client: Client, pass: F)
where
    F: Fn(HashSet<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<String>, Error>>,
{
    if interval.is_zero() || !tagged {
        info!("janitor disabled (no interval or no tags)");
        return;
    }
    loop {
        tokio::time::sleep(interval).await;
        let r = match kuryrport_port_ids(&client).await {
            Ok(ids) => pass(ids).await.map(|_| ()).map_err(JanitorError::Pool),
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            warn!(error = %crate::error_chain(&e), "janitor pass failed");
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
}
