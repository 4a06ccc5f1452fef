//! The controller's handlers, one module per watched kind (upstream's `enabled_handlers`), all
//! written on the one [`scaffold`], and [`HANDLERS`]: the one list of what kuryr-controller runs.

pub mod endpoints;
pub mod kuryrloadbalancer;
pub mod kuryrnetwork;
pub mod kuryrnetwork_population;
pub mod kuryrnetworkpolicy;
pub mod kuryrport;
pub mod namespace;
pub mod pod;
pub mod pod_label;
pub mod policy;
pub mod scaffold;
pub mod service;

use std::{sync::Arc, time::Duration};

use futures::future::BoxFuture;

use crate::Context;

/// A handler kuryr-controller can run.
pub struct HandlerSpec {
    /// Its name in `[kubernetes] enabled_handlers`.
    pub name: &'static str,
    /// It talks to Neutron (the controller connects only when an enabled handler does).
    pub needs_openstack: bool,
    /// Runs it until its watches end.
    pub start: fn(Arc<Context>) -> BoxFuture<'static, ()>,
}

/// Every handler kuryr-controller implements, in the order they start. (kuryr-config's
/// `supported::IMPLEMENTED_HANDLERS` must name the same ones: a test checks it.)
pub const HANDLERS: &[HandlerSpec] = &[
    HandlerSpec {
        name: pod::HANDLER,
        needs_openstack: false,
        start: |ctx| Box::pin(pod::run(ctx)),
    },
    HandlerSpec {
        name: kuryrport::HANDLER,
        needs_openstack: true,
        start: |ctx| Box::pin(kuryrport::run(ctx)),
    },
    HandlerSpec {
        name: namespace::HANDLER,
        needs_openstack: true,
        start: |ctx| Box::pin(namespace::start(ctx)),
    },
    HandlerSpec {
        name: kuryrnetwork::HANDLER,
        needs_openstack: true,
        start: |ctx| Box::pin(kuryrnetwork::start(ctx)),
    },
    HandlerSpec {
        name: kuryrnetwork_population::HANDLER,
        needs_openstack: true,
        start: |ctx| Box::pin(kuryrnetwork_population::start(ctx)),
    },
    HandlerSpec {
        name: service::HANDLER,
        needs_openstack: false,
        start: |ctx| Box::pin(service::start(ctx)),
    },
    HandlerSpec {
        name: endpoints::HANDLER,
        needs_openstack: false,
        start: |ctx| Box::pin(endpoints::start(ctx)),
    },
    HandlerSpec {
        name: kuryrloadbalancer::HANDLER,
        needs_openstack: true,
        start: |ctx| Box::pin(kuryrloadbalancer::start(ctx)),
    },
    HandlerSpec {
        name: policy::HANDLER,
        needs_openstack: true,
        start: |ctx| Box::pin(policy::start(ctx)),
    },
    HandlerSpec {
        name: kuryrnetworkpolicy::HANDLER,
        needs_openstack: true,
        start: |ctx| Box::pin(kuryrnetworkpolicy::start(ctx)),
    },
    HandlerSpec {
        name: pod_label::HANDLER,
        needs_openstack: true,
        start: |ctx| Box::pin(pod_label::start(ctx)),
    },
];

/// The object of kind `K` with the same namespace and name as `o` (a KuryrLoadBalancer's
/// Service, a KuryrPort's Pod, a KuryrNetworkPolicy's NetworkPolicy): the mapper of a
/// `Controller::watches` on the CRD that mirrors `K`.
pub fn same_name<K, O>(o: &O) -> Option<kube::runtime::reflector::ObjectRef<K>>
where
    K: kube::Resource<DynamicType = ()>,
    O: kube::ResourceExt,
{
    o.namespace()
        .map(|ns| kube::runtime::reflector::ObjectRef::<K>::new(&o.name_any()).within(&ns))
}

/// Whether `config` enables a handler that talks to Octavia.
pub fn needs_octavia(config: &kuryr_config::Config) -> bool {
    config
        .kubernetes
        .enabled_handlers
        .iter()
        .any(|h| h == kuryrloadbalancer::HANDLER)
}

/// The spec of handler `name`, if kuryr-controller implements it.
pub fn find(name: &str) -> Option<&'static HandlerSpec> {
    HANDLERS.iter().find(|h| h.name == name)
}

use kube::{Resource, runtime::reflector::Store};
use tracing::warn;

/// Waits until `store` has listed everything once (never returns if its watcher stops first).
///
/// kube-runtime's readiness future keeps only the last poller's waker and a controller polls it
/// too, so it is polled with a timeout instead of relying on a wake-up.
pub(crate) async fn wait_ready<K>(store: &Store<K>, handler: &'static str)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(200), store.wait_until_ready()).await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => {
                warn!(handler, error = %e, "watcher stopped before syncing");
                std::future::pending::<()>().await;
            }
            Err(_elapsed) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_handler_list_is_the_one_kuryr_config_accepts() {
        let ours: Vec<&str> = super::HANDLERS.iter().map(|h| h.name).collect();
        let mut a = ours.clone();
        let mut b = kuryr_config::supported::IMPLEMENTED_HANDLERS.to_vec();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
    }
}
