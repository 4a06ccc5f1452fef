//! The KuryrLoadBalancer handler's steps: each [`Step`] performed against Octavia, Neutron
//! (through [`super::floating`]) or the Kubernetes API, then the load balancer left to settle
//! and the plan run again.

use k8s_openapi::api::core::v1::Service;
use kube::{Api, ResourceExt};
use kuryr_openstack::octavia::{ListenerCreate, PoolCreate, status};
use kuryr_openstack::{Port, PortFilter};
use kuryr_types::{
    KuryrLoadBalancer,
    constants::{KURYRLB_FINALIZER, SERVICE_FINALIZER},
};
use tracing::{info, warn};

use super::desired;
use super::plan::{self, LbObserved, PENDING_POLL, Step};
use super::{Error, KlbHandler};
use crate::finalizer;
use crate::handlers::scaffold::{Flow, Then};

impl KlbHandler {
    pub(super) async fn execute_step(&self, o: &LbObserved, step: Step) -> Result<Flow<LbObserved>, Error> {
        let klb = o.klb.as_ref();
        let name = Self::key(klb);
        let ns = klb.namespace().unwrap_or_default();
        let api: Api<KuryrLoadBalancer> = Api::namespaced(self.client.clone(), &ns);
        let kerr = |what: &'static str| {
            let klb = name.clone();
            move |source| Error::Kube { what, klb, source }
        };
        // The load balancer the Octavia steps below wait on after their write.
        let lb_id = o.lb.as_ref().map_or("", |l| l.id.as_str());
        match step {
            Step::AddFinalizer => {
                finalizer::add(&api, klb, KURYRLB_FINALIZER)
                    .await
                    .map_err(kerr("adding the finalizer"))?;
                let mut next = o.clone();
                next.has_finalizer = true;
                Ok(Flow::Replan(next))
            }
            Step::CreateLb => {
                let Ok(d) = &o.desired else {
                    return Ok(Flow::Stop(Then::AwaitChange));
                };
                // The whole tree in one call; a provider refusing that gets the load balancer
                // alone, and the plan adds the rest one step at a time.
                let full = desired::create_body(d, &self.settings.tags, true);
                let lb = match self.octavia.create_load_balancer(&full).await {
                    Ok(lb) => lb,
                    Err(e) if !full.listeners.is_empty() && refuses_full_create(&e) => {
                        warn!(lb = %name, error = %e, "fully populated create refused; creating the load balancer alone");
                        match self
                            .octavia
                            .create_load_balancer(&desired::create_body(d, &self.settings.tags, false))
                            .await
                        {
                            Ok(lb) => lb,
                            Err(e) => return Err(self.create_error(d, &name, e).await),
                        }
                    }
                    Err(e) => return Err(self.create_error(d, &name, e).await),
                };
                info!(lb = %name, id = %lb.id, vip = %lb.vip_address, provider = %lb.provider, "load balancer created");
                // Recorded at once: a controller killed now finds it by ID (and by name anyway).
                let mut st = o.status.clone();
                st.loadbalancer = Some(plan::lb_record(&lb, &o.status));
                self.patch_status(klb, &st).await?;
                let _ = self
                    .events
                    .normal(
                        &Self::service_ref(klb),
                        "KuryrEnsureLB",
                        format!("Creating load balancer {name}"),
                        "Create",
                    )
                    .await;
                self.settle(klb, &lb.id).await
            }
            Step::DeleteLb { id, reason } => {
                if o.lb
                    .as_ref()
                    .is_some_and(|l| l.provisioning_status == status::ERROR)
                {
                    self.metrics.load_balancer_readiness.inc();
                }
                self.octavia
                    .delete_load_balancer(&id)
                    .await
                    .map_err(Self::octavia_err("deleting the load balancer", &name))?;
                info!(lb = %name, %id, reason, "load balancer deleted");
                if o.deleting {
                    let mut next = o.clone();
                    if let Some(lb) = next.lb.as_mut() {
                        lb.provisioning_status = status::PENDING_DELETE.into();
                    }
                    return Ok(Flow::Replan(next));
                }
                self.events
                    .warning(
                        &Self::service_ref(klb),
                        "KuryrEnsureLBError",
                        reason.to_string(),
                        "Recreate",
                    )
                    .await;
                Ok(Flow::Stop(Then::Requeue(PENDING_POLL)))
            }
            Step::DeleteListener {
                id,
                pool_id,
                name: lname,
            } => {
                if let Some(pool) = pool_id {
                    self.octavia
                        .delete_pool(&pool)
                        .await
                        .map_err(Self::octavia_err("deleting a pool", &name))?;
                    return self.settle(klb, lb_id).await;
                }
                self.octavia
                    .delete_listener(&id)
                    .await
                    .map_err(Self::octavia_err("deleting a listener", &name))?;
                info!(lb = %name, listener = %lname, "listener deleted");
                self.settle(klb, lb_id).await
            }
            Step::CreateListener(d) => {
                let Some(lb) = &o.lb else {
                    return Ok(Flow::Stop(Then::Requeue(PENDING_POLL)));
                };
                let want = o.desired.as_ref().ok();
                let body = ListenerCreate {
                    loadbalancer_id: lb.id.clone(),
                    name: d.name.clone(),
                    protocol: d.protocol.clone(),
                    protocol_port: d.port,
                    timeout_client_data: want.and_then(|w| w.timeout_client_data),
                    timeout_member_data: want.and_then(|w| w.timeout_member_data),
                    allowed_cidrs: d.allowed_cidrs.clone(),
                    tags: self.settings.tags.clone(),
                };
                self.octavia
                    .create_listener(&body)
                    .await
                    .map_err(Self::octavia_err("creating a listener", &name))?;
                info!(lb = %name, listener = %d.name, "listener created");
                self.settle(klb, &lb.id).await
            }
            Step::CreatePool {
                listener_id,
                listener,
            } => {
                let algorithm = o
                    .desired
                    .as_ref()
                    .map(|d| d.lb_algorithm.clone())
                    .unwrap_or_default();
                let body = PoolCreate {
                    listener_id,
                    name: listener.name.clone(),
                    protocol: listener.protocol.clone(),
                    lb_algorithm: algorithm,
                    source_ip_persistence: listener.source_ip_persistence,
                    tags: self.settings.tags.clone(),
                };
                self.octavia
                    .create_pool(&body)
                    .await
                    .map_err(Self::octavia_err("creating a pool", &name))?;
                self.settle(klb, lb_id).await
            }
            Step::ReplaceMembers {
                pool_id,
                pool_name,
                members,
            } => {
                self.octavia
                    .replace_members(&pool_id, &members)
                    .await
                    .map_err(Self::octavia_err("updating members", &name))?;
                info!(lb = %name, pool = %pool_name, members = members.len(), "members updated");
                self.settle(klb, lb_id).await
            }
            Step::UpdateListenerCidrs {
                id,
                name: lname,
                cidrs,
            } => {
                self.octavia
                    .update_listener_allowed_cidrs(&id, cidrs.as_deref())
                    .await
                    .map_err(Self::octavia_err("setting a listener's allowed_cidrs", &name))?;
                info!(lb = %name, listener = %lname, ?cidrs, "listener allowed_cidrs set");
                self.settle(klb, lb_id).await
            }
            Step::UpdatePoolPersistence {
                id,
                name: pname,
                source_ip,
            } => {
                self.octavia
                    .update_pool_persistence(&id, source_ip)
                    .await
                    .map_err(Self::octavia_err("setting a pool's session persistence", &name))?;
                info!(lb = %name, pool = %pname, source_ip, "pool session persistence set");
                self.settle(klb, lb_id).await
            }
            Step::CreateHealthMonitor {
                pool_id,
                name: pname,
                settings,
            } => {
                let body = kuryr_openstack::octavia::HealthMonitorCreate {
                    pool_id,
                    name: pname.clone(),
                    settings,
                    tags: self.settings.tags.clone(),
                };
                self.octavia
                    .create_health_monitor(&body)
                    .await
                    .map_err(Self::octavia_err("creating a health monitor", &name))?;
                info!(lb = %name, pool = %pname, "health monitor created");
                self.settle(klb, lb_id).await
            }
            Step::DeleteHealthMonitor { id, name: pname } => {
                self.octavia
                    .delete_health_monitor(&id)
                    .await
                    .map_err(Self::octavia_err("deleting a health monitor", &name))?;
                info!(lb = %name, pool = %pname, "health monitor deleted");
                self.settle(klb, lb_id).await
            }
            Step::WriteStatus(st) => {
                self.patch_status(klb, &st).await?;
                if o.status.listeners.is_none() {
                    self.events
                        .normal(
                            &Self::service_ref(klb),
                            "KuryrEnsuredLB",
                            format!("Load balancer {name} is ready"),
                            "Create",
                        )
                        .await;
                }
                Ok(Flow::Next)
            }
            Step::WarnUnsupported(what) => {
                self.warned().insert(name.clone(), what.clone());
                for w in what {
                    // The Event recorder folds Events of the same object, reason and action
                    // into one series keeping the first note: one action per option keeps
                    // each note visible.
                    self.events
                        .warning(
                            &Self::service_ref(klb),
                            "KuryrUnsupportedLBOption",
                            format!("not applied: {w}"),
                            option_of(&w),
                        )
                        .await;
                }
                Ok(Flow::Next)
            }
            Step::PublicIp(step) => self.execute_fip(o, step).await,
            Step::ReleaseFinalizers => {
                let svcs: Api<Service> = Api::namespaced(self.client.clone(), &ns);
                match svcs.get_opt(&klb.name_any()).await {
                    Ok(Some(svc)) => finalizer::remove(&svcs, &svc, SERVICE_FINALIZER)
                        .await
                        .map_err(kerr("removing the Service finalizer"))?,
                    Ok(None) => {}
                    Err(source) => {
                        return Err(Error::Kube {
                            what: "reading the Service",
                            klb: name,
                            source,
                        });
                    }
                }
                finalizer::remove(&api, klb, KURYRLB_FINALIZER)
                    .await
                    .map_err(kerr("removing the finalizer"))?;
                self.warned().remove(&name);
                info!(lb = %name, "load balancer released");
                Ok(Flow::Stop(Then::AwaitChange))
            }
        }
    }
}

impl KlbHandler {
    /// The error of a refused create. When Octavia says the VIP address is taken ("IP address …
    /// already allocated": a load balancer of another cluster sharing the service subnet, or a
    /// VIP port a failed create left behind), the port holding it is looked up and named; an
    /// operator otherwise has to search Neutron for it.
    async fn create_error(
        &self,
        d: &desired::DesiredLb,
        name: &str,
        source: kuryr_openstack::Error,
    ) -> Error {
        if !source.to_string().contains("already allocated") {
            return Self::octavia_err("creating the load balancer", name)(source);
        }
        let filter = PortFilter {
            fixed_ip_address: Some(d.vip.clone()),
            fixed_ip_subnet: Some(d.subnet_id.clone()),
            ..PortFilter::default()
        };
        match self.neutron.list_ports(&filter).await {
            Ok(ports) if !ports.is_empty() => {
                let mut holders = Vec::new();
                for p in &ports {
                    let mut h = vip_holder(p);
                    if let Some(id) = lb_of_vip_port(p) {
                        h.push_str(&match self.octavia.get_load_balancer(id).await {
                            Ok(lb) => format!(
                                " ('{}', {}, tags {})",
                                lb.name,
                                lb.provisioning_status,
                                lb.tags.join(",")
                            ),
                            Err(e) if e.is_not_found() => {
                                " (which Octavia no longer has: a VIP port left behind, deleting it frees the address)"
                                    .to_string()
                            }
                            Err(_) => String::new(),
                        });
                    }
                    holders.push(h);
                }
                Error::VipTaken {
                    lb: name.to_string(),
                    vip: d.vip.clone(),
                    holder: holders.join("; "),
                    source: Box::new(source),
                }
            }
            Ok(_) => Self::octavia_err("creating the load balancer", name)(source),
            Err(e) => {
                warn!(lb = %name, vip = %d.vip, error = %e, "cannot look up the port holding the VIP");
                Self::octavia_err("creating the load balancer", name)(source)
            }
        }
    }
}

/// A port holding a VIP address, described for an operator: its ID and name, and what owns it
/// (the OVN provider names its VIP ports `ovn-lb-vip-<load balancer ID>`, the amphora driver
/// sets `device_owner` Octavia and `device_id` `lb-<ID>`), with its tags.
pub fn vip_holder(p: &Port) -> String {
    let lb = lb_of_vip_port(p);
    let mut out = match lb {
        Some(id) => format!("the VIP port {} of load balancer {id}", p.id),
        None if p.name.is_empty() => format!("port {}", p.id),
        None => format!("port {} ({})", p.id, p.name),
    };
    if lb.is_none() && !p.device_owner.is_empty() {
        out.push_str(&format!(", device_owner {}", p.device_owner));
    }
    if !p.tags.is_empty() {
        out.push_str(&format!(", tags {}", p.tags.join(",")));
    }
    out
}

/// The load balancer whose VIP port `p` is, by the names Octavia's drivers give them.
pub fn lb_of_vip_port(p: &Port) -> Option<&str> {
    p.name
        .strip_prefix("ovn-lb-vip-")
        .or_else(|| (p.device_owner == "Octavia").then(|| p.device_id.trim_start_matches("lb-")))
        .filter(|id| !id.is_empty())
}

/// The option an "unsupported" line is about (its first word: `loadBalancerSourceRanges`,
/// `sessionAffinity`, `listener`, `port`, `type`), as an Event action.
fn option_of(line: &str) -> &str {
    line.split([' ', ':'])
        .next()
        .filter(|w| !w.is_empty())
        .unwrap_or("Create")
}

/// Whether Octavia (or its provider) refused a fully populated create as such (400, 501).
fn refuses_full_create(e: &kuryr_openstack::Error) -> bool {
    matches!(
        e,
        kuryr_openstack::Error::BadRequest { .. } | kuryr_openstack::Error::ServerError { status: 501, .. }
    )
}
