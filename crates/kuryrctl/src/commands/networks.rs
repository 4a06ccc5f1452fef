//! `kuryrctl networks`: KuryrNetworks and their Neutron resources.

use std::io::Write;

use kube::{Client, ResourceExt};
use kuryr_openstack::Neutron;
use kuryr_types::KuryrNetwork;
use serde::Serialize;

use super::list;
use crate::{
    Error,
    cli::Cli,
    output::{self, Row, dash},
};

/// One namespace network.
#[derive(Debug, Clone, Serialize)]
pub struct NetworkRow {
    /// Namespace.
    pub namespace: String,
    /// Project.
    pub project_id: String,
    /// `status.netId`.
    pub network_id: Option<String>,
    /// `status.subnetId`.
    pub subnet_id: Option<String>,
    /// `status.subnetCIDR`.
    pub cidr: Option<String>,
    /// `status.routerId`.
    pub router_id: Option<String>,
    /// `status.populated`.
    pub populated: Option<bool>,
    /// Being deleted.
    pub deleting: bool,
    /// What Neutron says: `ok`, `network missing`, `subnet missing`, or `-` when not asked.
    pub neutron: String,
}

impl Row for NetworkRow {
    fn headers() -> &'static [&'static str] {
        &[
            "NAMESPACE",
            "NETWORK",
            "SUBNET",
            "CIDR",
            "ROUTER",
            "POPULATED",
            "NEUTRON",
        ]
    }
    fn cells(&self) -> Vec<String> {
        let ns = if self.deleting {
            format!("{} (deleting)", self.namespace)
        } else {
            self.namespace.clone()
        };
        vec![
            ns,
            dash(self.network_id.as_deref()),
            dash(self.subnet_id.as_deref()),
            dash(self.cidr.as_deref()),
            dash(self.router_id.as_deref()),
            self.populated
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
            self.neutron.clone(),
        ]
    }
}

/// Prints every KuryrNetwork, checked in Neutron unless `no_neutron`.
pub async fn run(cli: &Cli, client: &Client, no_neutron: bool, out: &mut dyn Write) -> Result<u8, Error> {
    let kns: Vec<KuryrNetwork> = list(client, None, None, "KuryrNetworks").await?;
    let neutron = if no_neutron {
        None
    } else {
        let config = crate::access::config(&cli.config_file)?;
        Some(crate::access::neutron(&config).await?)
    };
    let mut rows = Vec::new();
    for kn in &kns {
        let st = kn.status.clone().unwrap_or_default();
        let mut row = NetworkRow {
            namespace: kn.namespace().unwrap_or_default(),
            project_id: kn.spec.project_id.clone(),
            network_id: st.net_id.clone(),
            subnet_id: st.subnet_id.clone(),
            cidr: st.subnet_cidr.clone(),
            router_id: st.router_id.clone(),
            populated: st.populated,
            deleting: kn.metadata.deletion_timestamp.is_some(),
            neutron: "-".into(),
        };
        if let Some(n) = &neutron {
            row.neutron = check(n.as_ref(), st.net_id.as_deref(), st.subnet_id.as_deref()).await?;
        }
        rows.push(row);
    }
    rows.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    output::print(out, cli.output, &rows, Default::default())?;
    Ok(0)
}

async fn check(n: &dyn Neutron, net: Option<&str>, subnet: Option<&str>) -> Result<String, Error> {
    let Some(net) = net else { return Ok("-".into()) };
    match n.get_network(net).await {
        Ok(_) => {}
        Err(e) if e.is_not_found() => return Ok("network missing".into()),
        Err(source) => {
            return Err(Error::Neutron {
                what: "a network",
                source,
            });
        }
    }
    let Some(subnet) = subnet else {
        return Ok("ok".into());
    };
    match n.get_subnet(subnet).await {
        Ok(s) if s.network_id == net => Ok("ok".into()),
        Ok(_) => Ok("subnet on another network".into()),
        Err(e) if e.is_not_found() => Ok("subnet missing".into()),
        Err(source) => Err(Error::Neutron {
            what: "a subnet",
            source,
        }),
    }
}
