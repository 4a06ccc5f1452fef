//! Waiting for the machine to go quiet before a measured burst. The sandbox's cloud shares the
//! machine with the cluster it serves, and some of its work comes at its own times: Neutron's
//! periodic OVN maintenance takes 12–13 s of CPU every five minutes here, and the warm-up's
//! pool population keeps Neutron and OVN busy for a while after the ports are counted. A burst
//! that starts inside such a stretch measures the cloud's housekeeping (Ready p99 4.3 and 5.0 s
//! against 2.5–3.6 s for its neighbours in one series of VM-node bursts). Production pools are
//! warmed long before the pods that take from them, so the burst waits, bounded, until the
//! machine's CPU has been mostly idle for a moment.

use std::time::{Duration, Instant};

/// Cumulative CPU time of the whole machine (`/proc/stat`'s first line), in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Ticks not idle (everything but `idle` and `iowait`).
    pub busy: u64,
    /// All ticks.
    pub total: u64,
}

/// Reads `cpu  user nice system idle iowait irq softirq steal …` (the aggregate line of
/// `/proc/stat`); `None` for anything else.
pub fn parse_cpu_line(line: &str) -> Option<CpuTimes> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    // guest and guest_nice (fields 9 and 10) are already counted in user and nice.
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some(CpuTimes {
        busy: total.saturating_sub(idle),
        total,
    })
}

/// The busy fraction of all cores between two readings (0 when no time passed).
pub fn busy_fraction(a: CpuTimes, b: CpuTimes) -> f64 {
    let total = b.total.saturating_sub(a.total);
    if total == 0 {
        return 0.0;
    }
    b.busy.saturating_sub(a.busy) as f64 / total as f64
}

fn read() -> Option<CpuTimes> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(text.lines().next()?)
}

/// How the wait ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settled {
    /// Time waited.
    pub waited: Duration,
    /// The busy fraction of the last window.
    pub busy: f64,
    /// Whether the machine went quiet (false: `max` ran out, or `/proc/stat` is unreadable).
    pub quiet: bool,
}

/// Waits until the machine's CPU has been at most `threshold` busy (a fraction of all cores)
/// in `windows` consecutive one-second windows, or `max` has passed.
pub async fn wait_quiet(threshold: f64, windows: u32, max: Duration) -> Settled {
    let started = Instant::now();
    let mut quiet_windows = 0;
    let mut busy = 0.0;
    let Some(mut last) = read() else {
        return Settled {
            waited: Duration::ZERO,
            busy,
            quiet: false,
        };
    };
    while started.elapsed() < max {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(now) = read() else { break };
        busy = busy_fraction(last, now);
        last = now;
        quiet_windows = if busy <= threshold { quiet_windows + 1 } else { 0 };
        if quiet_windows >= windows {
            return Settled {
                waited: started.elapsed(),
                busy,
                quiet: true,
            };
        }
    }
    Settled {
        waited: started.elapsed(),
        busy,
        quiet: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_aggregate_line_only() {
        let t = parse_cpu_line("cpu  100 5 50 800 20 3 2 10 7 0").expect("cpu line");
        assert_eq!(t.total, 990);
        assert_eq!(t.busy, 990 - 820);
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4 5 6 7 8"), None);
        assert_eq!(parse_cpu_line("intr 1 2 3"), None);
        assert_eq!(parse_cpu_line("cpu  1 2 x 4"), None);
        assert_eq!(parse_cpu_line("cpu  1 2"), None);
        // Old kernels: only user nice system idle.
        assert_eq!(
            parse_cpu_line("cpu 1 1 1 7"),
            Some(CpuTimes { busy: 3, total: 10 })
        );
    }

    #[test]
    fn busy_fraction_between_readings() {
        let a = CpuTimes {
            busy: 100,
            total: 1000,
        };
        let b = CpuTimes {
            busy: 150,
            total: 1200,
        };
        assert!((busy_fraction(a, b) - 0.25).abs() < 1e-9);
        assert_eq!(busy_fraction(a, a), 0.0);
        // A counter going backwards (never on Linux) is not a negative load.
        assert_eq!(busy_fraction(b, a), 0.0);
    }
}
