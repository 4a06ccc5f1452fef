//! `bench/compare-upstream`'s figures: one burst measured from outside the implementation
//! (the same way for upstream Kuryr-Kubernetes and for kuryr-rs), saved per run as JSON, and
//! the side-by-side table with the ratios (upstream ÷ kuryr-rs: larger is better for us).

use serde::{Deserialize, Serialize};

use crate::burst::{BurstResult, percentile};

/// What one implementation did in one burst.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    /// `upstream` or `kuryr-rs`.
    pub implementation: String,
    /// Pods in the burst.
    pub pods: usize,
    /// Pod create → Ready, p50, ms.
    pub ready_p50_ms: Option<f64>,
    /// Pod create → Ready, p99, ms.
    pub ready_p99_ms: Option<f64>,
    /// Pod create → KuryrPort `status.vifs`, p99, ms.
    pub vifs_p99_ms: Option<f64>,
    /// Pod create → CNI ADD returned, p99, ms.
    pub cni_p99_ms: Option<f64>,
    /// First create → last pod Ready, ms.
    pub total_ms: f64,
    /// Neutron requests of the controller's Keystone user over the burst (neutron-server's log).
    pub neutron_calls: u64,
    /// Of which writes (not GET).
    pub neutron_writes: u64,
    /// Controller peak RSS (VmHWM summed over its processes), MiB.
    pub controller_peak_rss_mib: f64,
    /// Controller CPU seconds over the burst.
    pub controller_cpu_s: f64,
    /// Controller processes.
    pub controller_processes: usize,
    /// Daemons' RSS after the burst (all nodes), MiB.
    pub daemon_rss_mib: f64,
    /// Daemons' PSS after the burst (all nodes), MiB.
    #[serde(default)]
    pub daemon_pss_mib: f64,
    /// Daemon processes (all nodes).
    pub daemon_processes: usize,
    /// Pods that did not get to Ready in time.
    pub failures: usize,
}

impl RunFigures {
    /// The figures of a burst run with [`crate::burst::BurstConfig::outside`] (`None` without).
    pub fn from_burst(implementation: &str, r: &BurstResult) -> Option<Self> {
        let o = r.outside.as_ref()?;
        Some(Self {
            implementation: implementation.to_string(),
            pods: r.pods,
            ready_p50_ms: percentile(&r.ready_ms, 50.0),
            ready_p99_ms: percentile(&r.ready_ms, 99.0),
            vifs_p99_ms: percentile(&r.vifs_ms, 99.0),
            cni_p99_ms: percentile(&r.cni_ms, 99.0),
            total_ms: r.total_ms,
            neutron_calls: o.neutron.all,
            neutron_writes: o.neutron.writes,
            controller_peak_rss_mib: o.controller_peak_rss_mib,
            controller_cpu_s: o.controller_cpu_s,
            controller_processes: o.controller_processes,
            daemon_rss_mib: o.daemon_rss_mib,
            daemon_pss_mib: o.daemon_pss_mib,
            daemon_processes: o.daemon_processes,
            failures: r.pods.saturating_sub(r.ready_ms.len()),
        })
    }

    fn per_pod(&self, n: u64) -> Option<f64> {
        (self.pods > 0).then(|| n as f64 / self.pods as f64)
    }

    /// One line of figures.
    pub fn line(&self) -> String {
        format!(
            "{} pods={} ready_p50_ms={} ready_p99_ms={} vifs_p99_ms={} neutron_calls_per_pod={} neutron_writes_per_pod={} controller_rss_mib={:.1} controller_cpu_s={:.2} daemon_pss_mib={:.1} failures={}",
            self.implementation,
            self.pods,
            fmt(self.ready_p50_ms, 0),
            fmt(self.ready_p99_ms, 0),
            fmt(self.vifs_p99_ms, 0),
            fmt(self.per_pod(self.neutron_calls), 2),
            fmt(self.per_pod(self.neutron_writes), 2),
            self.controller_peak_rss_mib,
            self.controller_cpu_s,
            self.daemon_pss_mib,
            self.failures,
        )
    }
}

fn fmt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.decimals$}"))
}

/// `upstream ÷ ours`, when both are known and ours is not zero.
pub fn ratio(upstream: Option<f64>, ours: Option<f64>) -> Option<f64> {
    match (upstream, ours) {
        (Some(u), Some(o)) if o > 0.0 => Some(u / o),
        _ => None,
    }
}

/// The side-by-side table, both lines, and the last line with the ratios.
pub fn render(upstream: &RunFigures, ours: &RunFigures) -> String {
    let rows: [(&str, Option<f64>, Option<f64>, usize); 14] = [
        (
            "pod create -> Ready p50 (ms)",
            upstream.ready_p50_ms,
            ours.ready_p50_ms,
            0,
        ),
        (
            "pod create -> Ready p99 (ms)",
            upstream.ready_p99_ms,
            ours.ready_p99_ms,
            0,
        ),
        (
            "pod create -> status.vifs p99 (ms)",
            upstream.vifs_p99_ms,
            ours.vifs_p99_ms,
            0,
        ),
        (
            "pod create -> CNI ADD p99 (ms)",
            upstream.cni_p99_ms,
            ours.cni_p99_ms,
            0,
        ),
        (
            "burst total (ms)",
            Some(upstream.total_ms),
            Some(ours.total_ms),
            0,
        ),
        (
            "Neutron requests per pod",
            upstream.per_pod(upstream.neutron_calls),
            ours.per_pod(ours.neutron_calls),
            2,
        ),
        (
            "Neutron writes per pod",
            upstream.per_pod(upstream.neutron_writes),
            ours.per_pod(ours.neutron_writes),
            2,
        ),
        (
            "controller peak RSS (MiB)",
            Some(upstream.controller_peak_rss_mib),
            Some(ours.controller_peak_rss_mib),
            1,
        ),
        (
            "controller CPU over the burst (s)",
            Some(upstream.controller_cpu_s),
            Some(ours.controller_cpu_s),
            2,
        ),
        (
            "controller processes",
            Some(upstream.controller_processes as f64),
            Some(ours.controller_processes as f64),
            0,
        ),
        (
            "daemons' RSS, all nodes (MiB)",
            Some(upstream.daemon_rss_mib),
            Some(ours.daemon_rss_mib),
            1,
        ),
        (
            "daemons' PSS, all nodes (MiB)",
            Some(upstream.daemon_pss_mib),
            Some(ours.daemon_pss_mib),
            1,
        ),
        (
            "daemon processes, all nodes",
            Some(upstream.daemon_processes as f64),
            Some(ours.daemon_processes as f64),
            0,
        ),
        (
            "pods not Ready in time",
            Some(upstream.failures as f64),
            Some(ours.failures as f64),
            0,
        ),
    ];
    let mut s = format!(
        "{:<36} {:>12} {:>12} {:>16}\n",
        "", "upstream", "kuryr-rs", "upstream/ours"
    );
    for (what, u, o, d) in rows {
        s += &format!(
            "{what:<36} {:>12} {:>12} {:>16}\n",
            fmt(u, d),
            fmt(o, d),
            fmt(ratio(u, o), 1)
        );
    }
    s += &format!("{}\n{}\n", upstream.line(), ours.line());
    s += &format!(
        "compare pods={} ready_p99_ratio={} vifs_p99_ratio={} neutron_calls_ratio={} controller_rss_ratio={} controller_cpu_ratio={}\n",
        ours.pods,
        fmt(ratio(upstream.ready_p99_ms, ours.ready_p99_ms), 1),
        fmt(ratio(upstream.vifs_p99_ms, ours.vifs_p99_ms), 1),
        fmt(
            ratio(
                upstream.per_pod(upstream.neutron_calls),
                ours.per_pod(ours.neutron_calls)
            ),
            1
        ),
        fmt(
            ratio(
                Some(upstream.controller_peak_rss_mib),
                Some(ours.controller_peak_rss_mib)
            ),
            1
        ),
        fmt(
            ratio(Some(upstream.controller_cpu_s), Some(ours.controller_cpu_s)),
            1
        ),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::burst::OutsideResult;

    fn figures(name: &str, ready: f64, calls: u64, rss: f64, cpu: f64) -> RunFigures {
        RunFigures {
            implementation: name.into(),
            pods: 10,
            ready_p50_ms: Some(ready / 2.0),
            ready_p99_ms: Some(ready),
            vifs_p99_ms: Some(ready / 4.0),
            cni_p99_ms: Some(ready),
            total_ms: ready,
            neutron_calls: calls,
            neutron_writes: calls / 2,
            controller_peak_rss_mib: rss,
            controller_cpu_s: cpu,
            controller_processes: 1,
            daemon_rss_mib: 10.0,
            daemon_pss_mib: 8.0,
            daemon_processes: 2,
            failures: 0,
        }
    }

    #[test]
    fn ratios_are_upstream_over_ours() {
        let text = render(
            &figures("upstream", 20000.0, 40, 300.0, 9.0),
            &figures("kuryr-rs", 1000.0, 10, 30.0, 0.5),
        );
        let last = text.lines().last().unwrap();
        assert_eq!(
            last,
            "compare pods=10 ready_p99_ratio=20.0 vifs_p99_ratio=20.0 neutron_calls_ratio=4.0 controller_rss_ratio=10.0 controller_cpu_ratio=18.0"
        );
        assert!(text.contains("upstream pods=10 ready_p50_ms=10000"), "{text}");
    }

    #[test]
    fn a_missing_or_zero_figure_gives_no_ratio() {
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        let mut ours = figures("kuryr-rs", 1000.0, 0, 30.0, 0.0);
        ours.ready_p99_ms = None;
        let text = render(&figures("upstream", 2000.0, 4, 60.0, 1.0), &ours);
        assert!(
            text.ends_with("ready_p99_ratio=n/a vifs_p99_ratio=2.0 neutron_calls_ratio=n/a controller_rss_ratio=2.0 controller_cpu_ratio=n/a\n"),
            "{text}"
        );
    }

    #[test]
    fn figures_come_from_a_burst_measured_outside() {
        let mut r = BurstResult {
            pods: 3,
            ready_ms: vec![100.0, 300.0],
            ..BurstResult::default()
        };
        assert_eq!(RunFigures::from_burst("x", &r), None);
        r.outside = Some(OutsideResult {
            controller_cpu_s: 1.5,
            ..OutsideResult::default()
        });
        let f = RunFigures::from_burst("x", &r).unwrap();
        assert_eq!(
            (f.failures, f.ready_p99_ms, f.controller_cpu_s),
            (1, Some(300.0), 1.5)
        );
        let back: RunFigures = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }
}
