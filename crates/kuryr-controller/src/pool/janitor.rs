//! The janitor: periodically settles this cluster's tagged `compute:kuryr` ports that neither a
//! KuryrPort nor the pool owns and that are older than `ports_pool_janitor_min_age` (so ports
//! of a bulk creation still in flight are spared; no pass runs while a population is in flight):
//! usable ones (bound; ports of a bulk whose answer was lost, or deferred at recovery) go back
//! in their pools, the others are deleted. Without any tag configured it does nothing:
//! ownership cannot be proven.

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant},
};

use kube::{Api, Client, api::ListParams};
use kuryr_core::pool::orphans;
use kuryr_openstack::PortFilter;
use kuryr_types::{KuryrPort, constants::DEVICE_OWNER};
use tracing::{info, warn};

use super::{Error, VifPool, lock};

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
        let filter = PortFilter {
            device_owner: Some(DEVICE_OWNER.to_string()),
            tags: tags.tags(),
            ..PortFilter::default()
        };
        let ports = self
            .neutron
            .list_ports(&filter)
            .await
            .map_err(|source| Error::ListPorts {
                what: "janitor",
                source,
            })?;
        let mut owned = kuryrport_ports.clone();
        owned.extend(lock(&self.noop_pending).values().map(|p| p.id.clone()));
        let (delete, adopted) = {
            let mut st = self.state();
            if st.in_flight() > 0 {
                return Ok(Vec::new());
            }
            let wall = jiff::Timestamp::now();
            let found: HashSet<String> =
                orphans(&owned, &st, &ports, tags, wall, self.settings.janitor_min_age)
                    .into_iter()
                    .collect();
            let found: Vec<&kuryr_openstack::Port> = ports.iter().filter(|p| found.contains(&p.id)).collect();
            st.adopt_orphans(&found, Instant::now(), wall)
        };
        if !adopted.is_empty() {
            let mut cache = lock(&self.ports);
            for p in ports.iter().filter(|p| adopted.contains(&p.id)) {
                cache.insert(p.id.clone(), p.clone());
            }
            drop(cache);
            info!(ports = ?adopted, "janitor: ports nothing owns are back in their pools");
            self.publish_stats();
            self.changed.send_modify(|v| *v += 1);
        }
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
        let interval = self.settings.janitor_interval;
        if interval.is_zero() || self.settings.tags.is_empty() {
            info!("janitor disabled (no interval or no tags)");
            return;
        }
        loop {
            tokio::time::sleep(interval).await;
            if let Err(e) = self.janitor_once(&client).await {
                warn!(error = %crate::error_chain(&e), "janitor pass failed");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }

    /// One pass including the KuryrPort listing.
    pub async fn janitor_once(&self, client: &Client) -> Result<Vec<String>, JanitorError> {
        let api: Api<KuryrPort> = Api::all(client.clone());
        let kps = api
            .list(&ListParams::default())
            .await
            .map_err(JanitorError::ListKuryrPorts)?;
        let ids: HashSet<String> = super::recovery::in_use_refs(&kps.items)
            .into_iter()
            .map(|r| r.port_id)
            .collect();
        self.janitor_pass(&ids).await.map_err(JanitorError::Pool)
    }
}
