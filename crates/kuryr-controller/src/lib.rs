//! kuryr-controller: turns Kubernetes objects into Kuryr CRDs and OpenStack resources.
//!
//! * [`cli`] — command line, configuration loading and the process wiring used by `main`;
//! * [`handlers`] — one reconciler per watched kind ([`handlers::pod`], [`handlers::kuryrport`], …);
//! * [`drivers`] — project, subnets and security groups of a pod's port;
//! * [`pool`] — where pods' ports come from ([`pool::PortSource`]): warm pools
//!   ([`pool::VifPool`]) or one port per pod ([`pool::direct::Direct`]), and the janitor;
//! * [`health`] — `/ready` and `/alive`; [`metrics`] — `/metrics` (with upstream's names,
//!   [`quota`] keeping upstream's capacity gauges current).

pub mod cli;
pub mod drivers;
pub mod events;
pub mod finalizer;
pub mod handlers;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod pool;
pub mod quota;

use std::sync::Arc;

use kube::Client;

/// Name the controller reports itself as (Event source, field manager).
pub const COMPONENT: &str = "kuryr-controller";

/// The OpenStack side of the controller: Neutron, the drivers and the port pools. Absent in
/// contexts built for handlers that need no OpenStack (the pod handler's tests).
#[derive(Clone)]
pub struct OpenStack {
    /// Neutron client (reports every request to the metrics).
    pub neutron: Arc<dyn kuryr_openstack::Neutron>,
    /// Project, subnets and security-groups drivers.
    pub drivers: Arc<drivers::Drivers>,
    /// Where pods' ports come from: warm pools or one port per pod ([`pool::PortSource`]).
    pub pool: Arc<dyn pool::PortSource>,
    /// Octavia (same session as Neutron), when a Service handler is enabled.
    pub octavia: Option<Arc<dyn kuryr_openstack::Octavia>>,
}

/// What every handler needs: the client, the configuration, metrics, the Event recorder and
/// the health state; and for the OpenStack handlers [`Context::openstack`].
pub struct Context {
    /// Kubernetes client.
    pub client: Client,
    /// Loaded `kuryr.conf`.
    pub config: Arc<kuryr_config::Config>,
    /// Prometheus metrics.
    pub metrics: Arc<metrics::Metrics>,
    /// Records Events on the objects handled (the one recorder; `[kubernetes] use_events`).
    pub events: events::Events,
    /// Readiness and liveness.
    pub health: Arc<health::Health>,
    /// Neutron, drivers and pools ([`Context::with_openstack`]).
    pub openstack: Option<OpenStack>,
}

impl Context {
    /// A context for `client` and `config`, with fresh metrics and a health state expecting
    /// `watchers` watchers to sync.
    pub fn new(client: Client, config: Arc<kuryr_config::Config>, watchers: usize) -> Self {
        Self {
            events: events::Events::new(client.clone(), COMPONENT, config.kubernetes.use_events),
            health: Arc::new(health::Health::new(client.clone(), watchers)),
            metrics: Arc::new(metrics::Metrics::default()),
            client,
            config,
            openstack: None,
        }
    }

    /// Uses `metrics` (created first because the Neutron client reports to it).
    pub fn with_metrics(mut self, metrics: Arc<metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Adds Neutron, the drivers and the pools.
    pub fn with_openstack(mut self, openstack: OpenStack) -> Self {
        self.openstack = Some(openstack);
        self
    }
}

pub use kuryr_runtime::error_chain;
