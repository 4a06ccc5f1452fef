//! Read-only views of the pools for the pool manager and `kuryrctl`.

use kuryr_core::pool::{PoolKey, PortState, SgSet};

use super::VifPool;

/// One pool and its counters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PoolSummary {
    /// Binding host.
    pub host: String,
    /// Project.
    pub project_id: String,
    /// Network.
    pub network_id: String,
    /// Ports ready.
    pub available: u32,
    /// Ports assigned to pods.
    pub in_use: u32,
    /// Released ports cooling down.
    pub cooling: u32,
    /// Ports being created.
    pub creating: u32,
    /// Pods waiting.
    pub waiting: u32,
}

/// The ports of one pool by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PoolPorts {
    /// Ready.
    pub available: Vec<String>,
    /// Assigned to pods.
    pub in_use: Vec<String>,
    /// Cooling down.
    pub cooling: Vec<String>,
    /// Being deleted.
    pub deleting: Vec<String>,
}

impl VifPool {
    /// Every pool with its counters (pool manager `listPools`, `kuryrctl`).
    pub fn pools(&self) -> Vec<PoolSummary> {
        self.state()
            .stats()
            .into_iter()
            .map(|(key, s)| PoolSummary {
                host: key.host,
                project_id: key.project_id,
                network_id: key.network_id,
                available: s.available,
                in_use: s.in_use,
                cooling: s.cooling,
                creating: s.populating,
                waiting: s.waiting,
            })
            .collect()
    }

    /// The ports of one pool by state (pool manager `showPool`).
    pub fn pool_ports(&self, key: &PoolKey) -> PoolPorts {
        let st = self.state();
        let mut out = PoolPorts::default();
        for id in st.port_ids() {
            let Some(info) = st.port(id) else { continue };
            if &info.key != key {
                continue;
            }
            let list = match info.state {
                PortState::Available => &mut out.available,
                PortState::InUse(_) => &mut out.in_use,
                PortState::Cooling(_) => &mut out.cooling,
                PortState::Deleting => &mut out.deleting,
            };
            list.push(id.to_string());
        }
        for l in [
            &mut out.available,
            &mut out.in_use,
            &mut out.cooling,
            &mut out.deleting,
        ] {
            l.sort();
        }
        out
    }

    /// The available ports of `host`'s pools of `project_id` whose security groups are `sgs`
    /// (upstream's `showPool` key), sorted.
    pub fn available_with(&self, host: &str, project_id: &str, sgs: &SgSet) -> Vec<String> {
        let st = self.state();
        let mut ids: Vec<String> = st
            .port_ids()
            .filter_map(|id| {
                let info = st.port(id)?;
                (info.key.host == host
                    && info.key.project_id == project_id
                    && &info.sgs == sgs
                    && info.state == PortState::Available)
                    .then(|| id.to_string())
            })
            .collect();
        ids.sort();
        ids
    }
}
