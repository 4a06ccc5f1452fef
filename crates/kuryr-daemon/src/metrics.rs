//! Prometheus metrics of the daemon (`[prometheus_exporter] cni_exporter_port`, `GET /metrics`).
//!
//! Stable names (the `bench/pod-burst` harness reads them):
//! `kuryr_cni_request_duration_seconds{command,outcome,error}` — every request, by CNI verb, `ok`
//! / error kind, and upstream's `error` label (`True`/`False`, as upstream's exporter wrote the
//! Python boolean), so upstream's dashboards and alerts keep working (upstream's buckets started
//! at 10 s; ours resolve milliseconds);
//! `kuryr_cni_wire_duration_seconds` — the binding of one VIF (veth, addresses, routes, OVS port),
//! excluding the waits for the KuryrPort and for activation;
//! `kuryr_cni_active_wait_seconds{signal}` — ADD's wait for activation after wiring, by what
//! ended it (`neutron`, `ovn_installed`, `timeout`).

use std::{sync::Arc, time::Duration};

use axum::Router;
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::Registry,
};

/// Buckets of the request histogram, seconds (dense below a second, where a warm-pool ADD
/// lands, so its p99 is not smeared across a 0.1-0.25 s bucket).
pub const REQUEST_BUCKETS: [f64; 19] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0,
];
/// Buckets of the wiring histogram, seconds (dense around the 20 ms target).
pub const WIRE_BUCKETS: [f64; 17] = [
    0.001, 0.002, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0,
];

/// Labels of [`Metrics::requests`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `ADD`, `DEL`, `CHECK`, `GC`, `STATUS`.
    pub command: String,
    /// `ok` or the error kind.
    pub outcome: String,
    /// Upstream's label: `True` when the request failed, else `False`.
    pub error: String,
}

/// Labels of [`Metrics::active_wait`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignalLabels {
    /// `neutron`, `ovn_installed` or `timeout`.
    pub signal: String,
}

/// The daemon's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `kuryr_cni_request_duration_seconds{command,outcome,error}`.
    pub requests: Family<RequestLabels, Histogram>,
    /// `kuryr_cni_wire_duration_seconds`.
    pub wire: Histogram,
    /// `kuryr_cni_failures_total`: requests that failed inside the daemon (HTTP 500).
    pub failures: Counter,
    /// `kuryr_cni_active_wait_seconds{signal}`.
    pub active_wait: Family<SignalLabels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests =
            Family::<RequestLabels, Histogram>::new_with_constructor(|| Histogram::new(REQUEST_BUCKETS));
        registry.register(
            "kuryr_cni_request_duration_seconds",
            "Duration of CNI requests served by the daemon, by command and outcome",
            requests.clone(),
        );
        let wire = Histogram::new(WIRE_BUCKETS);
        registry.register(
            "kuryr_cni_wire_duration_seconds",
            "Duration of wiring one VIF (veth, addresses, routes, OVS port), without the waits",
            wire.clone(),
        );
        let failures = Counter::default();
        registry.register(
            "kuryr_cni_failures",
            "CNI requests that failed inside the daemon",
            failures.clone(),
        );
        let active_wait =
            Family::<SignalLabels, Histogram>::new_with_constructor(|| Histogram::new(REQUEST_BUCKETS));
        registry.register(
            "kuryr_cni_active_wait_seconds",
            "ADD's wait for activation after wiring, by the signal that ended it",
            active_wait.clone(),
        );
        Self {
            registry,
            requests,
            wire,
            failures,
            active_wait,
        }
    }
}

impl Metrics {
    /// Records one request.
    pub fn request(&self, command: &str, outcome: &str, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                command: command.to_owned(),
                outcome: outcome.to_owned(),
                error: if outcome == "ok" { "False" } else { "True" }.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// Records one wait for activation.
    pub fn observe_active_wait(&self, signal: &str, took: Duration) {
        self.active_wait
            .get_or_create(&SignalLabels {
                signal: signal.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// The text exposition.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

impl kuryr_runtime::http::Exposition for Metrics {
    fn encode(&self) -> Result<String, std::fmt::Error> {
        Metrics::encode(self)
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
    fn names_are_stable() {
        let m = Metrics::default();
        m.request("ADD", "ok", Duration::from_millis(12));
        m.wire.observe(0.004);
        m.observe_active_wait("ovn_installed", Duration::from_millis(40));
        let text = m.encode().unwrap();
        assert!(
            text.contains(
                "kuryr_cni_request_duration_seconds_bucket{le=\"0.025\",command=\"ADD\",outcome=\"ok\",error=\"False\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("kuryr_cni_wire_duration_seconds_count 1"), "{text}");
        assert!(text.contains("kuryr_cni_failures_total 0"), "{text}");
        assert!(
            text.contains("kuryr_cni_active_wait_seconds_count{signal=\"ovn_installed\"} 1"),
            "{text}"
        );
    }
}
