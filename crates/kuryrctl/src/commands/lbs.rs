//! `kuryrctl lbs`: every Service's load balancer — Service → KuryrLoadBalancer → Octavia load
//! balancer (VIP, provider, provisioning and operating status, listeners, members) — and the
//! load balancers carrying this cluster's tags that no KuryrLoadBalancer owns (orphans).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use kube::{Client, ResourceExt};
use kuryr_openstack::octavia::{LbFilter, Octavia, OpenStackOctavia};
use kuryr_types::KuryrLoadBalancer;
use serde::Serialize;

use super::list;
use crate::{
    Error,
    cli::Cli,
    output::{self, Row, dash},
};

/// One load balancer.
#[derive(Debug, Clone, Serialize)]
pub struct LbRow {
    /// `namespace/name` of the Service (orphans: the load balancer's name).
    pub service: String,
    /// Load balancer ID (`status.loadbalancer.id`, or Octavia's for orphans).
    pub id: Option<String>,
    /// VIP.
    pub vip: Option<String>,
    /// Floating IP of a LoadBalancer Service.
    pub fip: Option<String>,
    /// Provider.
    pub provider: Option<String>,
    /// Listeners as `PROTOCOL:port`.
    pub listeners: Vec<String>,
    /// Members as `ip:port`.
    pub members: Vec<String>,
    /// Octavia's provisioning status (`-` when not asked, `missing` when gone).
    pub provisioning: String,
    /// Octavia's operating status.
    pub operating: String,
    /// No KuryrLoadBalancer owns it.
    pub orphan: bool,
}

impl Row for LbRow {
    fn headers() -> &'static [&'static str] {
        &[
            "SERVICE",
            "LOADBALANCER",
            "VIP",
            "FIP",
            "PROVIDER",
            "LISTENERS",
            "MEMBERS",
            "PROVISIONING",
            "OPERATING",
        ]
    }
    fn cells(&self) -> Vec<String> {
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.join(",")
            }
        };
        vec![
            if self.orphan {
                format!("{} (orphan)", self.service)
            } else {
                self.service.clone()
            },
            dash(self.id.as_deref()),
            dash(self.vip.as_deref()),
            dash(self.fip.as_deref()),
            dash(self.provider.as_deref()),
            list(&self.listeners),
            list(&self.members),
            self.provisioning.clone(),
            self.operating.clone(),
        ]
    }
}

/// The rows of `klbs` (pure): what each KLB status records.
pub fn rows_of(klbs: &[KuryrLoadBalancer]) -> Vec<LbRow> {
    let mut rows: Vec<LbRow> = klbs
        .iter()
        .map(|k| {
            let st = k.status.clone().unwrap_or_default();
            let lb = st.loadbalancer.as_ref();
            LbRow {
                service: format!("{}/{}", k.namespace().unwrap_or_default(), k.name_any()),
                id: lb.map(|l| l.id.clone()).filter(|s| !s.is_empty()),
                vip: lb
                    .map(|l| l.ip.clone())
                    .filter(|s| !s.is_empty())
                    .or(k.spec.ip.clone()),
                fip: st.service_pub_ip_info.as_ref().map(|f| f.ip_addr.clone()),
                provider: lb
                    .map(|l| l.provider.clone())
                    .filter(|s| !s.is_empty())
                    .or(k.spec.provider.clone()),
                listeners: st
                    .listeners
                    .iter()
                    .flatten()
                    .map(|l| format!("{}:{}", l.protocol, l.port))
                    .collect(),
                members: st
                    .members
                    .iter()
                    .flatten()
                    .map(|m| format!("{}:{}", m.ip, m.port))
                    .collect(),
                provisioning: "-".into(),
                operating: "-".into(),
                orphan: false,
            }
        })
        .collect();
    rows.sort_by(|a, b| a.service.cmp(&b.service));
    rows
}

/// Prints every KLB's load balancer, with Octavia's statuses and the orphans unless
/// `no_octavia`. Exit code 1 when a load balancer is missing, not ACTIVE, or orphaned.
pub async fn run(
    cli: &Cli,
    client: &Client,
    cluster_tag: Option<&str>,
    no_octavia: bool,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let klbs: Vec<KuryrLoadBalancer> = list(client, None, None, "KuryrLoadBalancers").await?;
    let mut rows = rows_of(&klbs);
    let mut code = 0;
    if !no_octavia {
        let config = crate::access::config(&cli.config_file)?;
        let neutron = crate::access::neutron(&config).await?;
        let octavia: Arc<dyn Octavia> = Arc::new(
            OpenStackOctavia::from_session(
                kuryr_openstack::OpenStackNeutron::session(&neutron).clone(),
                kuryr_openstack::ConnectOptions::from_env(config.neutron.timeout).request_timeout,
                Arc::new(kuryr_openstack::NoopObserver),
            )
            .await
            .map_err(|source| Error::Neutron {
                what: "an Octavia connection",
                source,
            })?,
        );
        let tags = crate::access::tags(&config, cluster_tag, client).await?;
        let tagged = if tags.is_empty() {
            Vec::new()
        } else {
            octavia
                .list_load_balancers(&LbFilter {
                    tags: tags.clone(),
                    ..LbFilter::default()
                })
                .await
                .map_err(|source| Error::Neutron {
                    what: "load balancers",
                    source,
                })?
        };
        let owned: BTreeMap<String, ()> = rows
            .iter()
            .filter_map(|r| r.id.clone())
            .map(|id| (id, ()))
            .collect();
        for r in &mut rows {
            let Some(id) = &r.id else { continue };
            match octavia.get_load_balancer(id).await {
                Ok(lb) => {
                    r.provisioning = lb.provisioning_status;
                    r.operating = lb.operating_status;
                }
                Err(e) if e.is_not_found() => r.provisioning = "missing".into(),
                Err(source) => {
                    return Err(Error::Neutron {
                        what: "a load balancer",
                        source,
                    });
                }
            }
            if r.provisioning != "ACTIVE" {
                code = 1;
            }
        }
        for lb in tagged.into_iter().filter(|l| !owned.contains_key(&l.id)) {
            code = 1;
            rows.push(LbRow {
                service: lb.name.clone(),
                id: Some(lb.id),
                vip: Some(lb.vip_address),
                fip: None,
                provider: Some(lb.provider),
                listeners: Vec::new(),
                members: Vec::new(),
                provisioning: lb.provisioning_status,
                operating: lb.operating_status,
                orphan: true,
            });
        }
    }
    output::print(out, cli.output, &rows, Default::default())?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_types::kuryrloadbalancer as k;

    #[test]
    fn rows_record_what_the_status_says() {
        let mut klb = KuryrLoadBalancer::new(
            "web",
            k::KuryrLoadBalancerSpec {
                ip: Some("10.96.0.9".into()),
                provider: Some("ovn".into()),
                ..Default::default()
            },
        );
        klb.metadata.namespace = Some("ns".into());
        let pending = rows_of(std::slice::from_ref(&klb));
        assert_eq!(pending[0].id, None);
        assert_eq!(pending[0].vip.as_deref(), Some("10.96.0.9"));
        klb.status = Some(k::KuryrLoadBalancerStatus {
            loadbalancer: Some(k::LoadBalancer {
                id: "lb1".into(),
                ip: "10.96.0.9".into(),
                provider: "ovn".into(),
                ..Default::default()
            }),
            listeners: Some(vec![k::Listener {
                protocol: "TCP".into(),
                port: 80,
                ..Default::default()
            }]),
            members: Some(vec![k::Member {
                ip: "10.0.0.5".into(),
                port: 8080,
                ..Default::default()
            }]),
            ..Default::default()
        });
        let r = &rows_of(&[klb])[0];
        assert_eq!(r.cells()[0], "ns/web");
        assert_eq!(r.listeners, ["TCP:80"]);
        assert_eq!(r.members, ["10.0.0.5:8080"]);
    }
}
