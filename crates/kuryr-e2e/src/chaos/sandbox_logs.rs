//! What the sandbox cloud's data plane logged while running pods lost connectivity: the
//! warnings and errors of every node's Open vSwitch, ovsdb and ovn-controller, and the
//! supervisor's record of daemons stopping and starting, within an outage's span — so that a
//! loss seen once (on a slow CI machine, say) comes with the evidence to explain it.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

/// Lines of known, harmless noise (ports of deleted pods, the nodes' underlay bridge port
/// ovn-controller does not manage, rate-limit notices).
const NOISE: [&str; 3] = [
    "could not open network device tap",
    "br-phy: could not open netdev",
    "log messages in last",
];

/// The sandbox's log directory (`$KURYR_SANDBOX_HOME/logs`).
pub fn log_dir() -> PathBuf {
    let home = std::env::var("KURYR_SANDBOX_HOME").unwrap_or_else(|_| "/var/lib/kuryr-sandbox".into());
    Path::new(&home).join("logs")
}

/// Whether a log file is one of the data plane's (or the supervisor's record).
fn relevant(name: &str) -> bool {
    name == "supervisor.log"
        || ["ovs-vswitchd-node-", "ovs-db-node-", "ovn-controller-node-"]
            .iter()
            .any(|p| name.starts_with(p) && name.ends_with(".log"))
}

/// The line's time (`2026-11-27T13:24:00Z…`, as Open vSwitch, OVN and the supervisor write).
fn line_time(line: &str) -> Option<jiff::Timestamp> {
    line.get(..20)?.parse().ok()
}

/// Whether a line is worth showing: a warning or error of OVS/OVN, or any supervisor line.
fn notable(file: &str, line: &str) -> bool {
    if NOISE.iter().any(|n| line.contains(n)) {
        return false;
    }
    file == "supervisor.log" || ["|WARN|", "|ERR|", "|EMER|"].iter().any(|l| line.contains(l))
}

/// Up to `max` notable lines, `file: line`, written from `slack` before `from` to `slack` after
/// `to`, in time order.
pub fn excerpt(dir: &Path, (from, to): (SystemTime, SystemTime), slack: Duration, max: usize) -> Vec<String> {
    let (Ok(from), Ok(to)) = (
        jiff::Timestamp::try_from(from - slack),
        jiff::Timestamp::try_from(to + slack),
    ) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![format!("(no sandbox logs in {})", dir.display())];
    };
    let mut files: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| relevant(n))
        .collect();
    files.sort();
    let mut lines: Vec<(jiff::Timestamp, String)> = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(dir.join(&f)) else {
            continue;
        };
        for line in text.lines() {
            // The logs have whole seconds: compare seconds.
            if let Some(t) = line_time(line)
                && (from.as_second()..=to.as_second()).contains(&t.as_second())
                && notable(&f, line)
            {
                lines.push((t, format!("{f}: {line}")));
            }
        }
    }
    lines.sort_by_key(|l| l.0);
    let n = lines.len();
    let mut out: Vec<String> = lines.into_iter().take(max).map(|(_, l)| l).collect();
    if n > max {
        out.push(format!("… and {} more", n - max));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_warnings_of_the_span_and_skips_noise() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(
            dir.path().join("ovs-vswitchd-node-2.log"),
            "2026-11-27T13:00:00Z|1|bridge|WARN|too early\n\
             2026-11-27T13:00:10Z|2|bridge|INFO|not a warning\n\
             2026-11-27T13:00:11Z|3|timeval|WARN|Unreasonably long 9000ms poll interval\n\
             2026-11-27T13:00:12Z|4|bridge|WARN|could not open network device tap1 (No such device)\n",
        )
        .expect("write");
        std::fs::write(
            dir.path().join("supervisor.log"),
            "2026-11-27T13:00:12Z\tovs-vswitchd-node-2\tstopped (exit 0)\n",
        )
        .expect("write");
        std::fs::write(
            dir.path().join("neutron.log"),
            "2026-11-27T13:00:11Z|x|WARN|not data plane\n",
        )
        .expect("write");
        let at = |s: &str| SystemTime::from(s.parse::<jiff::Timestamp>().expect("time"));
        let got = excerpt(
            dir.path(),
            (at("2026-11-27T13:00:09Z"), at("2026-11-27T13:00:12Z")),
            Duration::from_secs(1),
            10,
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].contains("Unreasonably long"));
        assert!(got[1].starts_with("supervisor.log:"));
        let one = excerpt(
            dir.path(),
            (at("2026-11-27T13:00:09Z"), at("2026-11-27T13:00:12Z")),
            Duration::from_secs(1),
            1,
        );
        assert_eq!(one[1], "… and 1 more");
    }
}
