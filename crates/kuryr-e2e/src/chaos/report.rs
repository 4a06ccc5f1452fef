//! The chaos suite's report: a line per iteration while it runs, then a table per scenario and
//! the machine-readable last line
//! `chaos scenarios=S iterations=I leaked=… stuck=… duplicates=… max_probe_loss_ms=… max_converge_s=…`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{ChaosReport, IterationResult, faults::Scenario};

/// One iteration in one line (for the log).
pub fn iteration_line(r: &IterationResult) -> String {
    format!(
        "{} #{}: {}{}; churn +{} pods +{} services ({} API errors); probe loss {} ms (of {} probes {} unanswered); {}; leaked {} stuck {} duplicates {}{}",
        r.scenario.name(),
        r.iteration,
        r.fault,
        r.fault_error
            .as_deref()
            .map(|e| format!(" (FAULT ERROR: {e})"))
            .unwrap_or_default(),
        r.churn.pods_created,
        r.churn.services_created,
        r.churn.api_errors,
        r.links.max_outage.as_millis(),
        r.links.probes,
        r.links.failures,
        match (r.converged_after, &r.held_by) {
            (Some(d), Some((at, what))) => format!(
                "converged after {:.1} s (until {:.1} s: {what})",
                d.as_secs_f64(),
                at.as_secs_f64()
            ),
            (Some(d), None) => format!("converged after {:.1} s", d.as_secs_f64()),
            (None, _) => "NOT converged".into(),
        },
        r.findings.leaked.len(),
        r.findings.stuck.len() + r.findings.pools_over_max.len(),
        r.findings.duplicates.len(),
        if r.controller_crashed {
            "; CONTROLLER CRASHED"
        } else {
            ""
        },
    )
}

/// Totals of one scenario.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Iterations.
    pub iterations: u32,
    /// Pods created by the churn.
    pub pods: u64,
    /// Services created by the churn.
    pub services: u64,
    /// Leaks at the end of iterations.
    pub leaked: usize,
    /// Stuck things (pools over max included).
    pub stuck: usize,
    /// Duplicates.
    pub duplicates: usize,
    /// Longest connectivity loss (ms).
    pub max_probe_loss_ms: u128,
    /// Longest convergence (s); `f64::INFINITY` when one did not converge.
    pub max_converge_s: f64,
    /// Controller crashes.
    pub controller_crashes: usize,
    /// Faults that could not be injected or undone.
    pub fault_errors: usize,
}

/// Totals per scenario, in the order they ran.
pub fn totals(report: &ChaosReport) -> Vec<(Scenario, Totals)> {
    let mut by: BTreeMap<Scenario, Totals> = BTreeMap::new();
    let mut order = Vec::new();
    for r in &report.iterations {
        if !order.contains(&r.scenario) {
            order.push(r.scenario);
        }
        let t = by.entry(r.scenario).or_default();
        t.iterations += 1;
        t.pods += r.churn.pods_created;
        t.services += r.churn.services_created;
        t.leaked += r.findings.leaked.len();
        t.stuck += r.findings.stuck.len() + r.findings.pools_over_max.len();
        t.duplicates += r.findings.duplicates.len();
        t.max_probe_loss_ms = t.max_probe_loss_ms.max(r.links.max_outage.as_millis());
        let c = r.converged_after.map_or(f64::INFINITY, |d| d.as_secs_f64());
        t.max_converge_s = t.max_converge_s.max(c);
        t.controller_crashes += usize::from(r.controller_crashed);
        t.fault_errors += usize::from(r.fault_error.is_some());
    }
    order
        .into_iter()
        .map(|s| (s, by.remove(&s).unwrap_or_default()))
        .collect()
}

fn secs(s: f64) -> String {
    if s.is_finite() {
        format!("{s:.1}")
    } else {
        "never".into()
    }
}

/// The table, the details of every finding, and the last line.
pub fn render(report: &ChaosReport) -> String {
    let mut out = String::new();
    let t = totals(report);
    let _ = writeln!(
        out,
        "{:<18} {:>5} {:>6} {:>6} {:>7} {:>6} {:>6} {:>14} {:>12} {:>10}",
        "SCENARIO",
        "ITER",
        "PODS",
        "SVCS",
        "LEAKED",
        "STUCK",
        "DUPS",
        "PROBE LOSS ms",
        "CONVERGE s",
        "CTRL CRASH"
    );
    for (s, x) in &t {
        let _ = writeln!(
            out,
            "{:<18} {:>5} {:>6} {:>6} {:>7} {:>6} {:>6} {:>14} {:>12} {:>10}",
            s.name(),
            x.iterations,
            x.pods,
            x.services,
            x.leaked,
            x.stuck,
            x.duplicates,
            x.max_probe_loss_ms,
            secs(x.max_converge_s),
            x.controller_crashes
        );
    }
    for r in &report.iterations {
        let f = &r.findings;
        let details: Vec<&String> = f
            .leaked
            .iter()
            .chain(&f.stuck)
            .chain(&f.duplicates)
            .chain(&f.pools_over_max)
            .collect();
        if !details.is_empty() || r.fault_error.is_some() {
            let _ = writeln!(out, "\n{} #{}:", r.scenario.name(), r.iteration);
            if let Some(e) = &r.fault_error {
                let _ = writeln!(out, "  fault error: {e}");
            }
            for d in details.iter().take(20) {
                let _ = writeln!(out, "  {d}");
            }
            if details.len() > 20 {
                let _ = writeln!(out, "  … {} more", details.len() - 20);
            }
            if !r.controller_log.is_empty() {
                let _ = writeln!(out, "  what the controller logged about them:");
                for l in &r.controller_log {
                    let _ = writeln!(out, "    {l}");
                }
            }
        }
        if r.links.failures > 0 {
            let _ = writeln!(
                out,
                "{} #{}: longest loss {} ms on {}",
                r.scenario.name(),
                r.iteration,
                r.links.max_outage.as_millis(),
                r.links.worst_pair.as_deref().unwrap_or("?")
            );
            for why in r.links.failures_why.iter().take(6) {
                let _ = writeln!(out, "  {why}");
            }
            if r.links.max_outage > super::LOSS_WORTH_A_LOOK {
                let _ = writeln!(
                    out,
                    "  fault from {} to {}; pairs that lost probes:",
                    clock(r.fault_span.0),
                    clock(r.fault_span.1)
                );
                for p in r.links.lost_pairs.iter().take(12) {
                    let span = p
                        .span
                        .map(|(a, b)| format!(" from {} to {}", clock(a), clock(b)))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "    {}: {} of {} unanswered, longest {} ms{span}",
                        p.pair,
                        p.failures,
                        p.probes,
                        p.longest.as_millis()
                    );
                }
                let _ = writeln!(
                    out,
                    "  the data plane's logs meanwhile (warnings, errors, daemons stopped or started):"
                );
                if r.data_plane_log.is_empty() {
                    let _ = writeln!(out, "    (nothing)");
                }
                for l in &r.data_plane_log {
                    let _ = writeln!(out, "    {l}");
                }
                for s in &r.snapshots {
                    let _ = writeln!(
                        out,
                        "  data plane snapshot at {} ({} dark for {} ms): {}",
                        clock(s.at),
                        s.pair,
                        s.dark_for.as_millis(),
                        s.path.display()
                    );
                }
            }
        }
    }
    if !report.sandbox_crashes.is_empty() {
        let _ = writeln!(out, "\nsandbox daemons crashed during the run:");
        for c in &report.sandbox_crashes {
            let _ = writeln!(out, "  {c}");
        }
    }
    for e in &report.probe_errors {
        let _ = writeln!(out, "probe setup error: {e}");
    }
    let _ = writeln!(out, "\n{}", last_line(report));
    out
}

/// The machine-readable last line.
pub fn last_line(report: &ChaosReport) -> String {
    let t = totals(report);
    let sum = |f: fn(&Totals) -> usize| t.iter().map(|(_, x)| f(x)).sum::<usize>();
    let max_loss = t.iter().map(|(_, x)| x.max_probe_loss_ms).max().unwrap_or(0);
    let max_conv = t.iter().map(|(_, x)| x.max_converge_s).fold(0.0, f64::max);
    format!(
        "chaos scenarios={} iterations={} leaked={} stuck={} duplicates={} max_probe_loss_ms={} max_converge_s={} controller_crashes={} sandbox_crashes={}",
        t.len(),
        report.iterations.len(),
        sum(|x| x.leaked),
        sum(|x| x.stuck),
        sum(|x| x.duplicates),
        max_loss,
        secs(max_conv),
        sum(|x| x.controller_crashes),
        report.sandbox_crashes.len()
    )
}

/// A wall-clock time as `HH:MM:SS.mmm` UTC.
fn clock(t: std::time::SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(|t| t.strftime("%H:%M:%S%.3f").to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_utc_with_milliseconds() {
        let t: jiff::Timestamp = "2026-11-27T13:03:12.345678Z".parse().expect("time");
        assert_eq!(clock(std::time::SystemTime::from(t)), "13:03:12.345");
    }
}
