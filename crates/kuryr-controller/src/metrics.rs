//! Prometheus metrics of the controller (`[prometheus_exporter] controller_exporter_port`,
//! `GET /metrics`): reconcile outcomes per handler and the pod port latency histogram.

use std::sync::Arc;

use axum::{Router, extract::State, http::StatusCode, http::header, response::IntoResponse, routing::get};
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, histogram::Histogram},
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

/// The controller's metrics, registered in one [`Registry`].
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `kuryr_reconcile_total{handler, outcome}`.
    pub reconciles: Family<ReconcileLabels, Counter>,
    /// `kuryr_pod_port_latency_seconds`: from the pod's scheduling to its port being active
    /// (fed by the KuryrPort handler).
    pub pod_port_latency: Histogram,
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
            "Seconds from pod scheduling to its port being active",
            pod_port_latency.clone(),
        );
        Self {
            registry,
            reconciles,
            pod_port_latency,
        }
    }
}

impl Metrics {
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

/// Router serving `GET /metrics`.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new().route("/metrics", get(serve)).with_state(metrics)
}

async fn serve(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    match metrics.render() {
        Ok(body) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "encoding failed").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
