//! The janitor: periodically deletes this cluster's tagged `compute:kuryr` ports that neither a
//! KuryrPort nor the pool owns and that are older than `ports_pool_janitor_min_age` (so ports
//! of a bulk creation still in flight are spared; no pass runs while a population is in flight).
//! Without any tag configured it does nothing: ownership cannot be proven.

use std::{collections::HashSet, sync::Arc, time::Duration};

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
    /// call (a port handed out after that read is owned by the pool). Returns the deleted IDs.
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
        let found = {
            let st = self.state();
            if st.in_flight() > 0 {
                return Ok(Vec::new());
            }
            orphans(
                &owned,
                &st,
                &ports,
                tags,
                jiff::Timestamp::now(),
                self.settings.janitor_min_age,
            )
        };
        if found.is_empty() {
            return Ok(found);
        }
        info!(ports = ?found, "janitor: deleting ports nothing owns");
        self.delete_many(&found).await?;
        Ok(found)
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
