//! The pod-label handler (upstream's `PodLabelHandler`, `enabled_handlers` name `pod_label`):
//! each pod's port carries the security groups the `policy` driver says — looked at again when
//! the pod changes (labels), when its KuryrPort does, and (all pods) when a NetworkPolicy or a
//! KuryrNetworkPolicy changes. Only the default VIF's port is
//! changed (as upstream). The groups last written to a port are remembered, so an unchanged
//! answer costs no Neutron call; the first look at a port reads it once. (Upstream compared the
//! pod's labels with an annotation here and had the KuryrNetworkPolicy handler update the pods a
//! policy selects; one handler owning every port's groups keeps the two from racing.)

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    runtime::{Controller, watcher},
};
use kube_lean::Lean;
use kuryr_openstack::{Neutron, PortUpdate};
use kuryr_types::{KuryrPort, VifKind};
use tracing::{debug, info};

use super::scaffold::{self, ErrorKind, Flow, Handler, HandlerError, Plan, Then};
use crate::{
    Context,
    drivers::{
        DriverError, Reflected, SecurityGroupsDriver,
        policy_groups::{PolicyGroups, sorted},
    },
    pool::PortSource,
};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "pod_label";

/// How soon to look again when a selecting policy has no group yet.
const NOT_READY_POLL: Duration = Duration::from_secs(1);

/// A failed step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the pod's KuryrPort failed.
    #[error("reading the KuryrPort of pod {pod}")]
    Kube {
        /// namespace/name.
        pod: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Neutron failed.
    #[error("{what} of pod {pod}")]
    Neutron {
        /// What was done.
        what: &'static str,
        /// namespace/name.
        pod: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// The driver failed for good (not "not ready").
    #[error("security groups of pod {pod}")]
    Driver {
        /// namespace/name.
        pod: String,
        /// Cause.
        #[source]
        source: DriverError,
    },
}

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Kube { source, .. } => scaffold::kube_kind(source),
            Error::Neutron { source, .. } if !source.is_retryable() => ErrorKind::Invalid,
            _ => ErrorKind::Transient,
        }
    }
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Neutron { .. } => "neutron",
            Error::Driver { .. } => "driver",
            Error::Kube { .. } => "kubernetes",
        }
    }
    fn event_reason(&self) -> Option<&'static str> {
        Some("KuryrUpdatePortSecurityGroupsError")
    }
}

/// What the plan looks at.
#[derive(Debug, Clone)]
pub struct LabelObserved {
    /// namespace/name.
    pub key: String,
    /// The pod's UID.
    pub uid: String,
    /// The pod has (or will have) a port of ours: not host-network, not being deleted.
    pub eligible: bool,
    /// The default VIF's port, once the pod has one.
    pub port_id: Option<String>,
    /// The default VIF is a nested-macvlan one: its port is never bound and has no port
    /// security; the node VM's port (and its groups) carry and filter the pod's traffic.
    pub macvlan: bool,
    /// The groups the port must carry (`None`: a selecting policy has no group yet).
    pub desired: Option<Vec<String>>,
    /// The groups the port carries, as last written or read.
    pub current: Option<Vec<String>>,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Read the port's groups from Neutron (first look at it).
    ReadPort(String),
    /// Set the port's groups.
    SetGroups(String, Vec<String>),
}

/// The plan (pure).
pub fn plan(o: &LabelObserved) -> Plan<Step> {
    if o.macvlan {
        return Plan::nothing(
            "nested-macvlan: the node VM's port's groups filter this pod, not its own port's",
            Then::AwaitChange,
        );
    }
    let Some(port) = &o.port_id else {
        if !o.eligible {
            return Plan::nothing("no port of ours", Then::AwaitChange);
        }
        // The KuryrPort handler gives a new port its groups; a cache behind it is looked past.
        return Plan::nothing("no port yet", Then::AwaitChange).confirmed_live();
    };
    let Some(desired) = &o.desired else {
        return Plan::nothing(
            "a selecting policy has no group yet",
            Then::Requeue(NOT_READY_POLL),
        );
    };
    match &o.current {
        None => Plan::steps(
            "first look at the port",
            vec![Step::ReadPort(port.clone())],
            Then::AwaitChange,
        ),
        Some(c) if c == desired => Plan::nothing("port carries its groups", Then::AwaitChange),
        Some(_) => Plan::steps(
            "groups changed",
            vec![Step::SetGroups(port.clone(), desired.clone())],
            Then::AwaitChange,
        ),
    }
}

/// The handler.
pub struct PodLabelHandler {
    client: kube::Client,
    neutron: Arc<dyn Neutron>,
    pool: Arc<dyn PortSource>,
    groups: Arc<PolicyGroups>,
    kps: Reflected<KuryrPort>,
    /// (pod UID, port) → groups the port carries (sorted), as last written or read. Keyed by
    /// the pod too: a pooled port handed to another pod got that pod's groups from the pool.
    applied: Mutex<HashMap<(String, String), Vec<String>>>,
}

impl PodLabelHandler {
    fn applied(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Vec<String>>> {
        self.applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Handler for PodLabelHandler {
    type Object = Lean<Pod>;
    type Observed = LabelObserved;
    type Step = Step;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, pod: &Arc<Lean<Pod>>, live: bool) -> Result<LabelObserved, Error> {
        let ns = pod.namespace().unwrap_or_default();
        let key = format!("{ns}/{}", pod.name_any());
        let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
        let port_of = |kp: &KuryrPort| {
            let vif = kp.status.as_ref()?.default_vif()?.1;
            Some((vif.id.clone()?, vif.kind == VifKind::MacvlanNested))
        };
        let eligible = !host_network && pod.metadata.deletion_timestamp.is_none();
        let default_port = if !eligible {
            None
        } else if live {
            // The KuryrPort watch that triggered this may be ahead of the cache.
            Api::<KuryrPort>::namespaced(self.client.clone(), &ns)
                .get_opt(&pod.name_any())
                .await
                .map_err(|source| Error::Kube {
                    pod: key.clone(),
                    source,
                })?
                .and_then(|kp| port_of(&kp))
        } else {
            self.kps
                .get(Some(&ns), &pod.name_any())
                .and_then(|kp| port_of(&kp))
        };
        let (port_id, macvlan) = match default_port {
            Some((id, macvlan)) => (Some(id), macvlan),
            None => (None, false),
        };
        let desired = match &port_id {
            Some(_) if macvlan => None,
            None => None,
            Some(_) => match self.groups.pod_groups(pod, false).await {
                Ok(g) => Some(sorted(g)),
                Err(DriverError::NotReady(why)) => {
                    debug!(pod = %key, %why, "groups not ready");
                    None
                }
                Err(source) => return Err(Error::Driver { pod: key, source }),
            },
        };
        let uid = pod.uid().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            // Going: nothing of it to remember.
            self.applied().retain(|(u, _), _| *u != uid);
        }
        let current = port_id
            .as_ref()
            .and_then(|p| self.applied().get(&(uid.clone(), p.clone())).cloned());
        Ok(LabelObserved {
            key,
            uid,
            eligible,
            port_id,
            macvlan,
            desired,
            current,
        })
    }

    fn plan(&self, o: &LabelObserved) -> Plan<Step> {
        plan(o)
    }

    async fn execute(&self, o: &LabelObserved, step: Step) -> Result<Flow<LabelObserved>, Error> {
        match step {
            Step::ReadPort(id) => {
                // A port the pool handed out is known to it: no read.
                let known = match self.pool.known_security_groups(&id) {
                    Some(g) => g,
                    None => {
                        self.neutron
                            .get_port(&id)
                            .await
                            .map_err(|source| Error::Neutron {
                                what: "reading the port",
                                pod: o.key.clone(),
                                source,
                            })?
                            .security_groups
                    }
                };
                let have = sorted(known);
                self.applied().insert((o.uid.clone(), id), have.clone());
                let mut next = o.clone();
                next.current = Some(have);
                Ok(Flow::Replan(next))
            }
            Step::SetGroups(id, groups) => {
                let update = PortUpdate {
                    security_groups: Some(groups.clone()),
                    ..PortUpdate::default()
                };
                let p = self
                    .neutron
                    .update_port(&id, &update)
                    .await
                    .map_err(|source| Error::Neutron {
                        what: "setting the security groups",
                        pod: o.key.clone(),
                        source,
                    })?;
                self.pool.port_updated(&p);
                info!(pod = %o.key, port = %id, groups = ?groups, "port security groups set");
                self.applied().insert((o.uid.clone(), id), groups);
                Ok(Flow::Next)
            }
        }
    }
}

/// Runs the handler: pods, and the pods of a namespace again when one of its NetworkPolicies or
/// KuryrNetworkPolicies changes.
pub async fn start(ctx: Arc<Context>) {
    let Some(os) = ctx.openstack.as_ref() else {
        tracing::error!(handler = HANDLER, "cannot start without OpenStack");
        return ctx.health.handler_died(HANDLER);
    };
    let SecurityGroupsDriver::Policy(groups) = &os.drivers.security_groups else {
        tracing::error!(
            handler = HANDLER,
            "needs [kubernetes] pod_security_groups_driver = policy"
        );
        return ctx.health.handler_died(HANDLER);
    };
    let kps = match Reflected::spawn(ctx.client.clone(), "kuryrports") {
        Ok(k) => k,
        Err(e) => {
            tracing::error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            return ctx.health.handler_died(HANDLER);
        }
    };
    let handler = Arc::new(PodLabelHandler {
        client: ctx.client.clone(),
        neutron: os.neutron.clone(),
        pool: os.pool.clone(),
        groups: groups.clone(),
        kps,
        applied: Mutex::default(),
    });
    let client = ctx.client.clone();
    // Every pod again after a NetworkPolicy or KuryrNetworkPolicy change, triggered by the
    // driver's own caches once they hold it.
    // Pods and KuryrPorts decoded without managedFields (kube_lean): nothing here reads them.
    let controller = Controller::new(Api::<Lean<Pod>>::all(client.clone()), watcher::Config::default())
        .reconcile_all_on(groups.changes())
        .watches(
            Api::<Lean<KuryrPort>>::all(client),
            watcher::Config::default(),
            |kp: Lean<KuryrPort>| super::same_name::<Lean<Pod>, _>(&kp),
        );
    // The open-direction groups made at start, not when the first policy waits for them.
    let open = groups.clone();
    let prepare = async move {
        while let Err(e) = open.open_groups().await {
            tracing::warn!(error = %crate::error_chain(&e), "open-direction security groups not ready; retrying");
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    };
    scaffold::run(ctx, handler, controller, async {}, prepare).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(port: Option<&str>, desired: Option<&[&str]>, current: Option<&[&str]>) -> LabelObserved {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        LabelObserved {
            key: "x/a".into(),
            uid: "u".into(),
            eligible: true,
            port_id: port.map(str::to_owned),
            macvlan: false,
            desired: desired.map(v),
            current: current.map(v),
        }
    }

    #[test]
    fn a_macvlan_pods_port_is_left_alone() {
        let mut m = o(Some("p"), Some(&["a"]), Some(&["b"]));
        m.macvlan = true;
        let p = plan(&m);
        assert!(p.steps.is_empty(), "no groups on a port without port security");
        assert_eq!(p.then, Then::AwaitChange);
    }

    #[test]
    fn the_port_follows_the_driver() {
        assert!(plan(&o(None, Some(&["a"]), None)).steps.is_empty());
        let wait = plan(&o(Some("p"), None, Some(&["a"])));
        assert!(wait.steps.is_empty() && wait.then == Then::Requeue(NOT_READY_POLL));
        assert_eq!(
            plan(&o(Some("p"), Some(&["a"]), None)).steps,
            vec![Step::ReadPort("p".into())]
        );
        assert!(plan(&o(Some("p"), Some(&["a"]), Some(&["a"]))).steps.is_empty());
        assert_eq!(
            plan(&o(Some("p"), Some(&["a", "b"]), Some(&["a"]))).steps,
            vec![Step::SetGroups("p".into(), vec!["a".into(), "b".into()])]
        );
    }
}
