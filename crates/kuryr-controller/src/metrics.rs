//! Prometheus metrics of the controller (`[prometheus_exporter] controller_exporter_port`,
//! `GET /metrics`): reconcile outcomes per handler, the pod port latency histograms, Neutron
//! requests by operation, method and outcome (fed through kuryr-openstack's
//! [`RequestObserver`]; Octavia's requests too, under their own operation names `lb_*`,
//! `listener_*`, `pool_*`, `member_batch_update`), and the size of every port pool.
//!
//! Names are stable (the `bench/pod-burst` harness reads them):
//! `kuryr_reconcile_total{handler,outcome}`, `kuryr_pod_port_latency_seconds`,
//! `kuryr_kuryrport_vifs_latency_seconds`, `kuryr_port_activation_latency_seconds`,
//! `kuryr_neutron_requests_total{operation,method,outcome}`,
//! `kuryr_neutron_request_duration_seconds{operation}`, `kuryr_pool_ports{host,project,network,state}`,
//! `kuryr_pool_waiting_pods{host,project,network}`, `kuryr_pool_populations_total{outcome}`.
//!
//! Upstream's names exist beside ours, so that dashboards and alerts written for upstream keep
//! working: `kuryr_pod_creation_latency` (seconds from the pod's scheduling to its VIF active,
//! upstream's buckets 10..120 s), `kuryr_port_readiness` (ports not ACTIVE within the activation
//! timeout; upstream: retries given up on `PortNotReady`), `kuryr_load_balancer_readiness`
//! (0 until Services land), `kuryr_quota_free_count{resource}` and
//! `kuryr_port_quota_per_subnet{subnet_id,subnet_name}` (refreshed in the background: see
//! [`crate::quota`]). docs/metrics.md lists both sets.

use std::{sync::Arc, time::Duration};

use kuryr_openstack::{RequestObserver, ops};

use axum::Router;
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

/// Buckets of [`Metrics::pod_port_latency`] in seconds: upstream's histogram started at 10 s,
/// ours must resolve sub-second wiring.
pub const POD_PORT_LATENCY_BUCKETS: [f64; 11] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0];

/// Labels of [`Metrics::reconciles`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// Handler name as in `[kubernetes] enabled_handlers` (`vif`, `kuryrport`, …).
    pub handler: String,
    /// `ok` or the error's metric label.
    pub outcome: String,
}

/// Labels of [`Metrics::neutron_requests`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NeutronRequestLabels {
    /// kuryr-openstack operation name (`port_bulk_create`, `port_list`, …).
    pub operation: String,
    /// HTTP method: `GET` requests are reads, every other method is a write.
    pub method: String,
    /// `ok` or the error's metric label (`conflict`, `timeout`, …).
    pub outcome: String,
}

/// Labels of [`Metrics::neutron_duration`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// kuryr-openstack operation name.
    pub operation: String,
}

/// Labels of [`Metrics::load_balancers`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProvisioningLabels {
    /// `ACTIVE`, `PENDING_CREATE`, `ERROR`, …
    pub provisioning_status: String,
}

/// Labels of [`Metrics::pool_ports`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolPortLabels {
    /// Binding host (node).
    pub host: String,
    /// Project.
    pub project: String,
    /// Network.
    pub network: String,
    /// `available`, `in_use`, `cooling` or `creating`.
    pub state: String,
}

/// Labels of [`Metrics::pool_waiting`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// Binding host (node).
    pub host: String,
    /// Project.
    pub project: String,
    /// Network.
    pub network: String,
}

/// Labels of [`Metrics::populations`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `ok` or `failed`.
    pub outcome: String,
}

/// Upstream's buckets of `kuryr_pod_creation_latency` (10 s steps up to 120 s).
pub const UPSTREAM_POD_CREATION_BUCKETS: [f64; 12] = [
    10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 110.0, 120.0,
];

/// Labels of [`Metrics::quota_free`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// `ports`, `subnets`, `networks`, `security_groups`, `security_group_rules`.
    pub resource: String,
}

/// Labels of [`Metrics::port_quota_per_subnet`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SubnetLabels {
    /// Subnet ID.
    pub subnet_id: String,
    /// Subnet name.
    pub subnet_name: String,
}

/// Buckets of the Neutron request duration histogram in seconds.
pub const NEUTRON_DURATION_BUCKETS: [f64; 10] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The HTTP method of a kuryr-openstack operation (`GET` = read).
pub fn method_of(operation: &str) -> &'static str {
    match operation {
        ops::EXTENSION_LIST
        | ops::PORT_LIST
        | ops::PORT_GET
        | ops::NETWORK_GET
        | ops::NETWORK_LIST
        | ops::SUBNET_GET
        | ops::SUBNETPOOL_GET
        | ops::SUBNET_LIST
        | ops::LB_VERSIONS
        | ops::LB_LIST
        | ops::LB_GET
        | ops::LB_STATUS
        | ops::LISTENER_LIST
        | ops::FLOATINGIP_LIST
        | ops::POOL_LIST
        | ops::HM_GET
        | ops::SG_LIST
        | ops::SG_RULE_LIST => "GET",
        ops::PORT_BULK_CREATE
        | ops::NETWORK_CREATE
        | ops::SUBNET_CREATE
        | ops::LB_CREATE
        | ops::LISTENER_CREATE
        | ops::POOL_CREATE
        | ops::FLOATINGIP_CREATE
        | ops::HM_CREATE
        | ops::SG_CREATE
        | ops::SG_RULE_BULK_CREATE => "POST",
        ops::PORT_DELETE
        | ops::NETWORK_DELETE
        | ops::SUBNET_DELETE
        | ops::LB_DELETE
        | ops::LISTENER_DELETE
        | ops::POOL_DELETE
        | ops::FLOATINGIP_DELETE
        | ops::HM_DELETE
        | ops::SG_DELETE
        | ops::SG_RULE_DELETE => "DELETE",
        ops::PORT_UPDATE
        | ops::PORT_SET_TAGS
        | ops::NETWORK_SET_TAGS
        | ops::SUBNET_SET_TAGS
        | ops::FLOATINGIP_UPDATE
        | ops::FLOATINGIP_SET_TAGS
        | ops::SG_SET_TAGS
        | ops::ROUTER_ADD_INTERFACE
        | ops::ROUTER_REMOVE_INTERFACE
        | ops::MEMBER_BATCH_UPDATE
        | ops::LISTENER_UPDATE
        | ops::POOL_UPDATE => "PUT",
        // Unknown operations count as writes: never under-report writes.
        _ => "OTHER",
    }
}

/// The controller's metrics, registered in one [`Registry`].
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `kuryr_reconcile_total{handler, outcome}`.
    pub reconciles: Family<ReconcileLabels, Counter>,
    /// `kuryr_pod_port_latency_seconds`: from the pod's `creationTimestamp` to its KuryrPort
    /// `status.vifs` being written (fed by the KuryrPort handler). The timestamp has a
    /// resolution of one second, so this over-states by up to 1 s; see
    /// [`Metrics::kuryrport_vifs_latency`] for a precise controller-side figure.
    pub pod_port_latency: Histogram,
    /// `kuryr_kuryrport_vifs_latency_seconds`: from the KuryrPort handler first seeing a
    /// KuryrPort without VIFs to its `status.vifs` being written (monotonic clock).
    pub kuryrport_vifs_latency: Histogram,
    /// `kuryr_port_activation_latency_seconds`: from `status.vifs` written to the VIF marked
    /// active (the port went ACTIVE in Neutron, i.e. was plugged).
    pub port_activation_latency: Histogram,
    /// `kuryr_neutron_requests_total{operation, method, outcome}`.
    pub neutron_requests: Family<NeutronRequestLabels, Counter>,
    /// `kuryr_neutron_request_duration_seconds{operation}`.
    pub neutron_duration: Family<OperationLabels, Histogram>,
    /// `kuryr_pool_ports{host, project, network, state}`.
    pub pool_ports: Family<PoolPortLabels, Gauge>,
    /// `kuryr_pool_waiting_pods{host, project, network}`.
    pub pool_waiting: Family<PoolLabels, Gauge>,
    /// `kuryr_pool_populations_total{outcome}`: bulk creations executed.
    pub populations: Family<OutcomeLabels, Counter>,
    /// Upstream's `kuryr_pod_creation_latency`: seconds from `PodScheduled` to the VIF active.
    pub pod_creation_latency: Histogram,
    /// Upstream's `kuryr_port_readiness`: ports not ACTIVE within the activation timeout.
    pub port_readiness: Counter,
    /// Upstream's `kuryr_load_balancer_readiness`: load balancers found in ERROR (each is
    /// deleted and recreated).
    pub load_balancer_readiness: Counter,
    /// `kuryr_load_balancers{provisioning_status}`: this cluster's load balancers by Octavia
    /// provisioning status (the load balancer janitor's last listing).
    pub load_balancers: Family<ProvisioningLabels, Gauge>,
    /// Upstream's `kuryr_quota_free_count{resource}`: quota limit minus use for
    /// `[neutron_defaults] project` (-1: unlimited).
    pub quota_free: Family<ResourceLabels, Gauge>,
    /// Upstream's `kuryr_port_quota_per_subnet{subnet_id,subnet_name}`: addresses left in the
    /// allocation pools of the pod subnets.
    pub port_quota_per_subnet: Family<SubnetLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register(
            "kuryr_reconcile",
            "Reconciliations by handler and outcome",
            reconciles.clone(),
        );
        let pod_port_latency = Histogram::new(POD_PORT_LATENCY_BUCKETS);
        registry.register(
            "kuryr_pod_port_latency_seconds",
            "Seconds from pod creation (creationTimestamp, 1 s resolution) to its KuryrPort status.vifs being written",
            pod_port_latency.clone(),
        );
        let kuryrport_vifs_latency = Histogram::new(POD_PORT_LATENCY_BUCKETS);
        registry.register(
            "kuryr_kuryrport_vifs_latency_seconds",
            "Seconds from the KuryrPort handler first seeing a KuryrPort without VIFs to its status.vifs being written",
            kuryrport_vifs_latency.clone(),
        );
        let port_activation_latency = Histogram::new(POD_PORT_LATENCY_BUCKETS);
        registry.register(
            "kuryr_port_activation_latency_seconds",
            "Seconds from status.vifs written to the VIF marked active",
            port_activation_latency.clone(),
        );
        let neutron_requests = Family::<NeutronRequestLabels, Counter>::default();
        registry.register(
            "kuryr_neutron_requests",
            "Neutron requests by operation, HTTP method (GET = read) and outcome",
            neutron_requests.clone(),
        );
        let neutron_duration = Family::<OperationLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(NEUTRON_DURATION_BUCKETS)
        });
        registry.register(
            "kuryr_neutron_request_duration_seconds",
            "Duration of Neutron requests by operation",
            neutron_duration.clone(),
        );
        let pool_ports = Family::<PoolPortLabels, Gauge>::default();
        registry.register(
            "kuryr_pool_ports",
            "Ports per pool (host, project, network) and state (available, in_use, cooling, creating)",
            pool_ports.clone(),
        );
        let pool_waiting = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "kuryr_pool_waiting_pods",
            "Pods waiting for a port per pool",
            pool_waiting.clone(),
        );
        let populations = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "kuryr_pool_populations",
            "Bulk port creations (pool populations) by outcome",
            populations.clone(),
        );
        // Upstream's names (the exporter's prefix-free names; prometheus-client appends
        // `_total` to counters, as upstream's prometheus_client did).
        let pod_creation_latency = Histogram::new(UPSTREAM_POD_CREATION_BUCKETS);
        registry.register(
            "kuryr_pod_creation_latency",
            "Time taken for a pod to have Kuryr annotations set (upstream's: PodScheduled to VIF active, seconds)",
            pod_creation_latency.clone(),
        );
        let port_readiness = Counter::default();
        registry.register(
            "kuryr_port_readiness",
            "Amount of ports not ready (not ACTIVE within the activation timeout)",
            port_readiness.clone(),
        );
        let load_balancer_readiness = Counter::default();
        registry.register(
            "kuryr_load_balancer_readiness",
            "Amount of load balancers not ready (found in ERROR, then recreated)",
            load_balancer_readiness.clone(),
        );
        let load_balancers = Family::<ProvisioningLabels, Gauge>::default();
        registry.register(
            "kuryr_load_balancers",
            "This cluster's Octavia load balancers by provisioning status (not ACTIVE: being written, or failed)",
            load_balancers.clone(),
        );
        let quota_free = Family::<ResourceLabels, Gauge>::default();
        registry.register(
            "kuryr_quota_free_count",
            "Amount of free quota per Neutron resource for the Kuryr project (-1: unlimited)",
            quota_free.clone(),
        );
        let port_quota_per_subnet = Family::<SubnetLabels, Gauge>::default();
        registry.register(
            "kuryr_port_quota_per_subnet",
            "Amount of addresses left in the allocation pools of each pod subnet",
            port_quota_per_subnet.clone(),
        );
        Self {
            registry,
            pod_creation_latency,
            port_readiness,
            load_balancer_readiness,
            load_balancers,
            quota_free,
            port_quota_per_subnet,
            reconciles,
            pod_port_latency,
            kuryrport_vifs_latency,
            port_activation_latency,
            neutron_requests,
            neutron_duration,
            pool_ports,
            pool_waiting,
            populations,
        }
    }
}

impl RequestObserver for Metrics {
    fn observe(&self, operation: &'static str, outcome: &'static str, elapsed: Duration) {
        self.neutron_requests
            .get_or_create(&NeutronRequestLabels {
                operation: operation.to_owned(),
                method: method_of(operation).to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
        self.neutron_duration
            .get_or_create(&OperationLabels {
                operation: operation.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }
}

impl Metrics {
    /// Replaces `kuryr_load_balancers` with the counts of `statuses` (every known status is
    /// reset, so a status nobody has any more reads 0).
    pub fn record_load_balancers<'a>(&self, statuses: impl Iterator<Item = &'a str>) {
        let mut counts: std::collections::BTreeMap<&str, i64> = [
            "ACTIVE",
            "PENDING_CREATE",
            "PENDING_UPDATE",
            "PENDING_DELETE",
            "ERROR",
        ]
        .into_iter()
        .map(|s| (s, 0))
        .collect();
        for s in statuses {
            *counts.entry(s).or_default() += 1;
        }
        for (s, n) in counts {
            self.load_balancers
                .get_or_create(&ProvisioningLabels {
                    provisioning_status: s.to_owned(),
                })
                .set(n);
        }
    }

    /// Counts one reconciliation of `handler` ending with `outcome`.
    pub fn reconciled(&self, handler: &str, outcome: &str) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                handler: handler.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// The text exposition format of every metric.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

impl kuryr_runtime::http::Exposition for Metrics {
    fn encode(&self) -> Result<String, std::fmt::Error> {
        self.render()
    }
}

/// Router serving `GET /metrics`.
pub fn router(metrics: Arc<Metrics>) -> Router {
    kuryr_runtime::http::metrics_router(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_metric_names_exist_beside_ours() {
        let m = Metrics::default();
        m.pod_creation_latency.observe(12.0);
        m.port_readiness.inc();
        m.quota_free
            .get_or_create(&ResourceLabels {
                resource: "ports".into(),
            })
            .set(380);
        m.port_quota_per_subnet
            .get_or_create(&SubnetLabels {
                subnet_id: "s1".into(),
                subnet_name: "ns/default".into(),
            })
            .set(250);
        let text = m.render().expect("render");
        for needle in [
            "kuryr_pod_creation_latency_bucket{le=\"20.0\"} 1",
            "kuryr_pod_creation_latency_bucket{le=\"10.0\"} 0",
            "kuryr_port_readiness_total 1",
            "kuryr_load_balancer_readiness_total 0",
            "kuryr_quota_free_count{resource=\"ports\"} 380",
            "kuryr_port_quota_per_subnet{subnet_id=\"s1\",subnet_name=\"ns/default\"} 250",
        ] {
            assert!(text.contains(needle), "missing {needle} in:\n{text}");
        }
    }

    #[test]
    fn renders_counter_and_latency_histogram() {
        let m = Metrics::default();
        m.reconciled("vif", "ok");
        m.pod_port_latency.observe(0.2);
        let text = m.render().expect("render");
        assert!(
            text.contains("kuryr_reconcile_total{handler=\"vif\",outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kuryr_pod_port_latency_seconds_bucket{le=\"0.25\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kuryr_pod_port_latency_seconds_bucket{le=\"0.1\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn neutron_requests_carry_the_method() {
        let m = Metrics::default();
        m.observe(ops::PORT_LIST, "ok", Duration::from_millis(20));
        m.observe(ops::PORT_BULK_CREATE, "conflict", Duration::from_millis(200));
        let text = m.render().expect("render");
        assert!(
            text.contains(
                "kuryr_neutron_requests_total{operation=\"port_list\",method=\"GET\",outcome=\"ok\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("operation=\"port_bulk_create\",method=\"POST\",outcome=\"conflict\"} 1"),
            "{text}"
        );
        assert_eq!(method_of(ops::ROUTER_ADD_INTERFACE), "PUT");
        assert_eq!(method_of("something_new"), "OTHER");
    }
}
