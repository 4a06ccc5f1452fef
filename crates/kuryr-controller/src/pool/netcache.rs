//! [`NetCache`]: each network and its subnets, read from Neutron once per network, so that
//! building a pod's VIF from a pooled port costs no request.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use kuryr_openstack::{Network, Neutron, Port, ResourceFilter, Subnet};
use kuryr_types::{
    from_neutron::FromNeutronError,
    vif::{Vif, VifKind},
};
use tokio::sync::OnceCell;

use super::{Error, lock};

type Entry = Arc<OnceCell<Arc<(Network, Vec<Subnet>)>>>;

/// Networks and their subnets by network ID.
pub struct NetCache {
    neutron: Arc<dyn Neutron>,
    nets: Mutex<HashMap<String, Entry>>,
}

impl NetCache {
    /// An empty cache.
    pub fn new(neutron: Arc<dyn Neutron>) -> Self {
        NetCache {
            neutron,
            nets: Mutex::default(),
        }
    }

    /// The network and its subnets (two requests the first time, concurrent callers share them).
    pub async fn get(&self, network_id: &str) -> Result<Arc<(Network, Vec<Subnet>)>, Error> {
        let cell = lock(&self.nets)
            .entry(network_id.to_string())
            .or_default()
            .clone();
        let v = cell
            .get_or_try_init(|| async {
                let err = |source| Error::Network {
                    network_id: network_id.to_string(),
                    source,
                };
                let net = self.neutron.get_network(network_id).await.map_err(err)?;
                let filter = ResourceFilter {
                    network_id: Some(network_id.to_string()),
                    ..ResourceFilter::default()
                };
                let subnets = self.neutron.list_subnets(&filter).await.map_err(err)?;
                Ok::<_, Error>(Arc::new((net, subnets)))
            })
            .await?;
        Ok(v.clone())
    }

    /// Forgets a network (its subnets changed).
    pub fn invalidate(&self, network_id: &str) {
        lock(&self.nets).remove(network_id);
    }

    /// The VIF of `port`; if the port's subnet is not among the cached ones, the network is
    /// read again once.
    pub async fn vif(&self, port: &Port, default_bridge: Option<&str>) -> Result<Vif, Error> {
        let mut refreshed = false;
        loop {
            let net = self.get(&port.network_id).await?;
            match kuryr_types::from_neutron::vif_from_port(port, &net.0, &net.1, default_bridge) {
                Ok(v) if v.kind == VifKind::Bridge => {
                    return Err(Error::UnsupportedBinding {
                        port_id: port.id.clone(),
                        binding: "VIFBridge",
                        why: "binding:vif_details ovs_hybrid_plug = true",
                    });
                }
                Ok(v) => return Ok(v),
                Err(FromNeutronError::NoValidSubnets { .. }) if !refreshed => {
                    refreshed = true;
                    self.invalidate(&port.network_id);
                }
                Err(source) => {
                    return Err(Error::Vif {
                        port_id: port.id.clone(),
                        source,
                    });
                }
            }
        }
    }

    /// The VIF of a nested subport `port` with VLAN ID `vlan` (`VIFVlanNested`).
    pub async fn vif_nested(&self, port: &Port, vlan: u16) -> Result<Vif, Error> {
        let net = self.get(&port.network_id).await?;
        kuryr_types::from_neutron::vif_vlan_nested(port, &net.0, &net.1, vlan).map_err(|source| Error::Vif {
            port_id: port.id.clone(),
            source,
        })
    }

    /// The `VIFMacvlanNested` of `port` (nested-macvlan).
    pub async fn vif_macvlan(&self, port: &Port) -> Result<Vif, Error> {
        let net = self.get(&port.network_id).await?;
        kuryr_types::from_neutron::vif_macvlan_nested(port, &net.0, &net.1).map_err(|source| Error::Vif {
            port_id: port.id.clone(),
            source,
        })
    }
}
