//! The endpoints handler (upstream's `EndpointsHandler`, `enabled_handlers` name `endpoints`):
//! keeps a KuryrLoadBalancer's `spec.endpointSlices` equal to its Service's EndpointSlices
//! (watched directly), or, for a selectorless Service without slices, to its hand-written
//! `Endpoints`. It writes only that field; the Service handler owns the rest of the spec.

pub mod convert;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams},
    runtime::{Controller, reflector::ObjectRef, watcher},
};
use kuryr_types::{KuryrLoadBalancer, kuryrloadbalancer as k};
use serde_json::json;
use tracing::{debug, error};

use super::scaffold::{self, Flow, Handler, Plan, Then, api_code};
use crate::{Context, drivers::Reflected};

/// Name of this handler in `[kubernetes] enabled_handlers` and in metrics.
pub const HANDLER: &str = "endpoints";

/// The label EndpointSlices name their Service with.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A failed step: the Service handler's error (both write the Service's KLB).
pub use super::service::Error;

/// What the plan looks at.
#[derive(Debug, Clone)]
pub struct EpObserved {
    /// The Service's KLB.
    pub klb: Option<Arc<KuryrLoadBalancer>>,
    /// The endpoints it should carry.
    pub slices: Vec<k::EndpointSlice>,
}

/// One step: write `spec.endpointSlices`.
#[derive(Debug, Clone, PartialEq)]
pub struct SetSlices(pub Vec<k::EndpointSlice>);

/// The plan (pure): only a live KLB whose slices differ is written.
pub fn plan(o: &EpObserved) -> Plan<SetSlices> {
    let Some(klb) = &o.klb else {
        // The cache may lag the KLB's creation, which is what triggered this pass: look live.
        return Plan::nothing("no KuryrLoadBalancer yet", Then::AwaitChange).confirmed_live();
    };
    if klb.metadata.deletion_timestamp.is_some() {
        return Plan::nothing("KuryrLoadBalancer being deleted", Then::AwaitChange);
    }
    let have = klb.spec.endpoint_slices.clone().unwrap_or_default();
    if have == o.slices {
        return Plan::nothing("endpoints up to date", Then::AwaitChange);
    }
    Plan::steps(
        "endpoints changed",
        vec![SetSlices(o.slices.clone())],
        Then::AwaitChange,
    )
}

/// The handler.
pub struct EpHandler {
    client: kube::Client,
    klbs: Reflected<KuryrLoadBalancer>,
}

impl Handler for EpHandler {
    type Object = Service;
    type Observed = (String, String, EpObserved);
    type Step = SetSlices;
    type Error = Error;
    const NAME: &'static str = HANDLER;

    async fn observe(&self, svc: &Arc<Service>, live: bool) -> Result<Self::Observed, Error> {
        if !self.klbs.is_synced() {
            return Err(Error::NotSynced);
        }
        let ns = svc.namespace().unwrap_or_default();
        let name = svc.name_any();
        let kerr = |what: &'static str| {
            let svc = format!("{ns}/{name}");
            move |source| Error::Kube { what, svc, source }
        };
        let klb = if live {
            Api::<KuryrLoadBalancer>::namespaced(self.client.clone(), &ns)
                .get_opt(&name)
                .await
                .map_err(kerr("reading the KuryrLoadBalancer"))?
                .map(Arc::new)
        } else {
            self.klbs.get(Some(&ns), &name)
        };
        // Read live, not from a cache: the change that triggered this pass arrives through the
        // controller's own watch, and a separate cache may not have it yet — the pass would then
        // see the old slices, write nothing, and wait for a change that already happened.
        let lp = ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}={name}"));
        let listed = Api::<EndpointSlice>::namespaced(self.client.clone(), &ns)
            .list(&lp)
            .await
            .map_err(kerr("listing the EndpointSlices"))?
            .items;
        let mine: Vec<&EndpointSlice> = listed.iter().collect();
        let selectorless = svc
            .spec
            .as_ref()
            .is_none_or(|s| s.selector.as_ref().is_none_or(|m| m.is_empty()));
        let slices = if mine.is_empty() && selectorless && klb.is_some() {
            let eps = Api::<Endpoints>::namespaced(self.client.clone(), &ns)
                .get_opt(&name)
                .await
                .map_err(kerr("reading the Endpoints"))?;
            eps.as_ref().map(convert::from_endpoints).unwrap_or_default()
        } else {
            convert::from_slices(&mine)
        };
        Ok((ns, name, EpObserved { klb, slices }))
    }

    fn plan(&self, o: &Self::Observed) -> Plan<SetSlices> {
        plan(&o.2)
    }

    async fn execute(&self, o: &Self::Observed, step: SetSlices) -> Result<Flow<Self::Observed>, Error> {
        let (ns, name, _) = o;
        let api: Api<KuryrLoadBalancer> = Api::namespaced(self.client.clone(), ns);
        let p = json!({"spec": {"endpointSlices": step.0}});
        match api.patch(name, &PatchParams::default(), &Patch::Merge(&p)).await {
            Ok(_) => debug!(svc = %format!("{ns}/{name}"), "endpoint slices recorded"),
            Err(e) if api_code(&e) == Some(404) => {}
            Err(source) => {
                return Err(Error::Kube {
                    what: "writing spec.endpointSlices",
                    svc: format!("{ns}/{name}"),
                    source,
                });
            }
        }
        Ok(Flow::Next)
    }
}

/// Runs the handler: Services, again when their EndpointSlices, Endpoints or KLB change.
pub async fn start(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let klbs = match Reflected::spawn(client.clone(), "kuryrloadbalancers") {
        Ok(c) => c,
        Err(e) => {
            error!(handler = HANDLER, error = %crate::error_chain(&e), "cannot start");
            return ctx.health.handler_died(HANDLER);
        }
    };
    let handler = Arc::new(EpHandler {
        client: client.clone(),
        klbs,
    });
    let to_svc = |ns: Option<String>, name: String| ns.map(|ns| ObjectRef::<Service>::new(&name).within(&ns));
    let controller = Controller::new(Api::<Service>::all(client.clone()), watcher::Config::default())
        .watches(
            Api::<EndpointSlice>::all(client.clone()),
            watcher::Config::default(),
            move |s: EndpointSlice| {
                let svc = s.labels().get(SERVICE_NAME_LABEL).cloned()?;
                to_svc(s.namespace(), svc)
            },
        )
        .watches(
            Api::<Endpoints>::all(client.clone()),
            watcher::Config::default(),
            move |e: Endpoints| to_svc(e.namespace(), e.name_any()),
        )
        .watches(
            Api::<KuryrLoadBalancer>::all(client),
            watcher::Config::default(),
            move |k: KuryrLoadBalancer| to_svc(k.namespace(), k.name_any()),
        );
    scaffold::run(ctx, handler, controller, async {}, async {}).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset};
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort as SlicePort};

    fn eps_slice(name: &str, ips: &[(&str, bool)]) -> EndpointSlice {
        EndpointSlice {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: ips
                .iter()
                .map(|(ip, ready)| Endpoint {
                    addresses: vec![ip.to_string()],
                    conditions: Some(EndpointConditions {
                        ready: Some(*ready),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ports: Some(vec![SlicePort {
                name: Some(String::new()),
                port: Some(8080),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
        }
    }

    #[test]
    fn slices_are_copied_in_name_order_and_plans_write_only_changes() {
        let b = eps_slice("web-b", &[("10.0.0.2", true)]);
        let a = eps_slice("web-a", &[("10.0.0.1", false)]);
        let empty = eps_slice("web-c", &[]);
        let got = convert::from_slices(&[&b, &a, &empty]);
        assert_eq!(got.len(), 2, "an empty slice is dropped");
        let first = &got[0].endpoints.as_ref().expect("endpoints")[0];
        assert_eq!(first.addresses.as_deref(), Some(&["10.0.0.1".to_string()][..]));
        assert_eq!(first.conditions.as_ref().and_then(|c| c.ready), Some(false));
        assert_eq!(
            got[0].ports.as_ref().expect("ports")[0].name,
            None,
            "empty port name is no name"
        );

        let mut klb = KuryrLoadBalancer::new("web", Default::default());
        let o = EpObserved {
            klb: None,
            slices: got.clone(),
        };
        assert!(plan(&o).steps.is_empty());
        let o = EpObserved {
            klb: Some(Arc::new(klb.clone())),
            slices: got.clone(),
        };
        assert_eq!(plan(&o).steps, [SetSlices(got.clone())]);
        klb.spec.endpoint_slices = Some(got.clone());
        let o = EpObserved {
            klb: Some(Arc::new(klb)),
            slices: got,
        };
        assert!(plan(&o).steps.is_empty());
    }

    #[test]
    fn hand_written_endpoints_become_slices() {
        let eps = Endpoints {
            subsets: Some(vec![EndpointSubset {
                addresses: Some(vec![EndpointAddress {
                    ip: "192.0.2.10".into(),
                    ..Default::default()
                }]),
                not_ready_addresses: Some(vec![EndpointAddress {
                    ip: "192.0.2.11".into(),
                    ..Default::default()
                }]),
                ports: Some(vec![EndpointPort {
                    port: 9000,
                    protocol: Some("UDP".into()),
                    ..Default::default()
                }]),
            }]),
            ..Default::default()
        };
        let got = convert::from_endpoints(&eps);
        let e = got[0].endpoints.as_ref().expect("endpoints");
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].conditions.as_ref().and_then(|c| c.ready), Some(false));
        assert_eq!(got[0].ports.as_ref().expect("ports")[0].port, Some(9000));
    }
}
