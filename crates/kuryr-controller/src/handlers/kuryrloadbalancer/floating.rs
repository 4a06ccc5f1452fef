//! The KuryrLoadBalancer handler's floating-IP I/O: reading what [`super::public_ip`] plans
//! from (Neutron's floating IPs, the Service's ingress) and performing its steps.

use k8s_openapi::api::core::v1::Service;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
};
use kuryr_openstack::{FloatingIpCreate, FloatingIpFilter};
use kuryr_types::KuryrLoadBalancer;
use serde_json::json;
use tracing::info;

use super::plan::LbObserved;
use super::public_ip::{FIP_DESCRIPTION, FipObserved, FipStep, PublicIp};
use super::{Error, KlbHandler};
use crate::handlers::scaffold::{Flow, Then};

impl KlbHandler {
    /// What Neutron and the Service show of a KLB's public IP: the floating IPs on the VIP
    /// port, the recorded one, the `loadBalancerIP` one, and the Service's ingress (read live:
    /// its status is written here, and a lagging cache would write it twice).
    pub(super) async fn observe_fips(
        &self,
        klb: &KuryrLoadBalancer,
        vip_port: Option<&str>,
        want: Option<&PublicIp>,
        status: &kuryr_types::KuryrLoadBalancerStatus,
    ) -> Result<FipObserved, Error> {
        let name = Self::key(klb);
        let list = |filter: FloatingIpFilter, what: &'static str| {
            let name = name.clone();
            async move {
                self.neutron
                    .list_floating_ips(&filter)
                    .await
                    .map_err(|source| Error::Neutron {
                        what,
                        lb: name,
                        source,
                    })
            }
        };
        let mut obs = FipObserved::default();
        if let Some(port) = vip_port {
            let f = FloatingIpFilter {
                port_id: Some(port.to_string()),
                ..Default::default()
            };
            obs.on_vip = list(f, "listing the VIP's floating IPs").await?;
        }
        if let Some(r) = status
            .service_pub_ip_info
            .as_ref()
            .filter(|r| !r.ip_id.is_empty())
        {
            obs.recorded = match obs.on_vip.iter().find(|f| f.id == r.ip_id) {
                Some(f) => Some(f.clone()),
                None => {
                    let f = FloatingIpFilter {
                        ids: vec![r.ip_id.clone()],
                        ..Default::default()
                    };
                    list(f, "reading the recorded floating IP")
                        .await?
                        .into_iter()
                        .next()
                }
            };
        }
        if let Some(PublicIp::User(addr)) = want {
            let f = FloatingIpFilter {
                floating_ip_address: Some(addr.clone()),
                ..Default::default()
            };
            obs.user = list(f, "finding the loadBalancerIP").await?.into_iter().next();
        }
        let svcs: Api<Service> = Api::namespaced(self.client.clone(), &klb.namespace().unwrap_or_default());
        obs.ingress = svcs
            .get_opt(&klb.name_any())
            .await
            .map_err(|source| Error::Kube {
                what: "reading the Service",
                klb: name.clone(),
                source,
            })?
            .map(|svc| ingress_ips(&svc));
        Ok(obs)
    }

    /// Performs one floating-IP step, then plans again from a fresh look at the floating IPs.
    pub(super) async fn execute_fip(&self, o: &LbObserved, step: FipStep) -> Result<Flow<LbObserved>, Error> {
        let klb = o.klb.as_ref();
        let name = Self::key(klb);
        let vip_port = o.lb.as_ref().map(|l| l.vip_port_id.clone()).unwrap_or_default();
        let nerr = |what: &'static str| {
            let lb = name.clone();
            move |source| Error::Neutron { what, lb, source }
        };
        let mut next = o.clone();
        match step {
            FipStep::Create => {
                let Some(net) = self.settings.external_net.clone() else {
                    return Ok(Flow::Stop(Then::AwaitChange));
                };
                let body = FloatingIpCreate {
                    floating_network_id: net,
                    subnet_id: self.settings.external_subnet.clone(),
                    port_id: Some(vip_port.clone()),
                    project_id: o.desired.as_ref().ok().map(|d| d.project_id.clone()),
                    description: Some(FIP_DESCRIPTION.into()),
                    tags: self.settings.tags.clone(),
                };
                let fip = self
                    .neutron
                    .create_floating_ip(&body)
                    .await
                    .map_err(nerr("allocating a floating IP"))?;
                info!(lb = %name, fip = %fip.floating_ip_address, id = %fip.id, "floating IP allocated on the VIP");
                self.events
                    .normal(
                        &Self::service_ref(klb),
                        "KuryrEnsureFIP",
                        format!(
                            "Floating IP {} allocated for load balancer {name}",
                            fip.floating_ip_address
                        ),
                        "Create",
                    )
                    .await;
            }
            FipStep::Associate(id) => {
                let fip = self
                    .neutron
                    .set_floating_ip_port(&id, Some(&vip_port))
                    .await
                    .map_err(nerr("associating the floating IP"))?;
                info!(lb = %name, fip = %fip.floating_ip_address, "floating IP associated with the VIP");
                self.events
                    .normal(
                        &Self::service_ref(klb),
                        "KuryrEnsureFIP",
                        format!(
                            "Floating IP {} associated with load balancer {name}",
                            fip.floating_ip_address
                        ),
                        "Create",
                    )
                    .await;
            }
            FipStep::Disassociate(id) => {
                match self.neutron.set_floating_ip_port(&id, None).await {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(nerr("disassociating the floating IP")(e)),
                }
                info!(lb = %name, %id, "floating IP (the user's) disassociated, kept");
            }
            FipStep::Delete(id) => {
                self.neutron
                    .delete_floating_ip(&id)
                    .await
                    .map_err(nerr("releasing the floating IP"))?;
                info!(lb = %name, %id, "floating IP released");
                self.events
                    .normal(
                        &Self::service_ref(klb),
                        "KuryrReleaseFIP",
                        format!("Floating IP of load balancer {name} released"),
                        "Delete",
                    )
                    .await;
            }
            FipStep::Record(info) => {
                let value = serde_json::to_value(&info).map_err(|e| Error::Status {
                    klb: name.clone(),
                    message: e.to_string(),
                })?;
                self.patch_status_fields(klb, json!({ "service_pub_ip_info": value }))
                    .await?;
                next.status.service_pub_ip_info = info;
                // Fall through: the floating IPs are looked at again for the new record (a
                // replan on the old observation would not find the recorded one).
            }
            FipStep::Ingress(addr) => {
                self.patch_ingress(klb, addr.as_deref()).await?;
                next.fip.ingress = Some(addr.into_iter().collect());
                return Ok(Flow::Replan(next));
            }
            FipStep::Warn(message) => {
                self.events
                    .warning(&Self::service_ref(klb), "KuryrEnsureFIPError", message, "Create")
                    .await;
                return Ok(Flow::Next);
            }
        }
        let want = o.desired.as_ref().ok().and_then(|d| d.public_ip.clone());
        let vip = o.lb.as_ref().map(|l| l.vip_port_id.as_str());
        next.fip = self.observe_fips(klb, vip, want.as_ref(), &o.status).await?;
        Ok(Flow::Replan(next))
    }

    /// Sets (or clears) the Service's `status.loadBalancer.ingress`; a Service already gone is
    /// fine.
    async fn patch_ingress(&self, klb: &KuryrLoadBalancer, addr: Option<&str>) -> Result<(), Error> {
        let svcs: Api<Service> = Api::namespaced(self.client.clone(), &klb.namespace().unwrap_or_default());
        let ingress = match addr {
            Some(a) => json!([{ "ip": a }]),
            None => json!(null),
        };
        let patch = json!({ "status": { "loadBalancer": { "ingress": ingress } } });
        match svcs
            .patch_status(&klb.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if crate::handlers::scaffold::api_code(&e) == Some(404) => Ok(()),
            Err(source) => Err(Error::Kube {
                what: "writing the Service's load balancer ingress",
                klb: Self::key(klb),
                source,
            }),
        }
    }
}

/// The IPs of a Service's `status.loadBalancer.ingress`.
fn ingress_ips(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .map(|i| i.iter().filter_map(|x| x.ip.clone()).collect())
        .unwrap_or_default()
}
