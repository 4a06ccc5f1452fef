//! Measures taken from outside any Kuryr implementation, so that kuryr-rs and upstream
//! Kuryr-Kubernetes are measured the same way (`bench/compare-upstream`): the requests a
//! Keystone user made to Neutron, from neutron-server's own access log; memory and CPU of
//! process trees, from `/proc`; pool ports, from Neutron.

use std::{
    collections::{BTreeMap, HashMap},
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
};

use crate::error::{Error, Result};

/// A position in neutron-server's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogMark(pub u64);

/// Requests counted in the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NeutronCounts {
    /// Every request.
    pub all: u64,
    /// Requests other than GET.
    pub writes: u64,
}

/// The log's length now.
pub fn log_mark(log: &Path) -> LogMark {
    LogMark(std::fs::metadata(log).map_or(0, |m| m.len()))
}

/// Counts the API requests of `user_id` logged after `mark` (neutron-server's `neutron.wsgi`
/// access lines: `[... req-<id> <user id> <project id> ...] <client> "GET /v2.0/ports?... HTTP/1.1" status: 200`).
pub fn count_requests(log: &Path, mark: LogMark, user_id: &str) -> Result<NeutronCounts> {
    let mut f = std::fs::File::open(log).map_err(|source| Error::Read {
        path: log.to_owned(),
        source,
    })?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    // A log shorter than the mark was rotated: count all of it.
    let start = if mark.0 <= len { mark.0 } else { 0 };
    f.seek(SeekFrom::Start(start)).map_err(|source| Error::Read {
        path: log.to_owned(),
        source,
    })?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(|source| Error::Read {
        path: log.to_owned(),
        source,
    })?;
    Ok(count_lines(&String::from_utf8_lossy(&bytes), user_id))
}

/// [`count_requests`] over text (pure).
pub fn count_lines(text: &str, user_id: &str) -> NeutronCounts {
    let mut c = NeutronCounts::default();
    for line in text
        .lines()
        .filter(|l| l.contains("neutron.wsgi") && l.contains(user_id))
    {
        let Some((_, req)) = line.split_once(" \"") else {
            continue;
        };
        let Some(method) = req.split_whitespace().next() else {
            continue;
        };
        if !req.contains(" /v2.0/") {
            continue;
        }
        c.all += 1;
        if method != "GET" {
            c.writes += 1;
        }
    }
    c
}

/// Memory and CPU of a process and its descendants.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TreeUsage {
    /// Processes in the tree.
    pub processes: usize,
    /// Sum of their resident sets (VmRSS), MiB.
    pub rss_mib: f64,
    /// Sum of their peaks (VmHWM), MiB.
    pub peak_rss_mib: f64,
    /// Sum of their proportional set sizes (`Pss` of `smaps_rollup`), MiB: pages shared
    /// between forked workers counted once, which a sum of RSS would count per process.
    pub pss_mib: f64,
    /// CPU seconds they used (user + system).
    pub cpu_s: f64,
}

/// A `<field> <n> kB` line of a `/proc` file, in KiB.
fn proc_kib(path: &str, field: &str) -> Option<f64> {
    let s = std::fs::read_to_string(path).ok()?;
    s.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`), KiB.
pub fn status_kib(pid: u32, field: &str) -> Option<f64> {
    proc_kib(&format!("/proc/{pid}/status"), field)
}

fn pss_kib(pid: u32) -> Option<f64> {
    proc_kib(&format!("/proc/{pid}/smaps_rollup"), "Pss:")
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces and parentheses: fields start after the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the command.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Every process's parent (`/proc/*/stat`).
fn parents() -> HashMap<u32, u32> {
    let mut m = HashMap::new();
    let Ok(d) = std::fs::read_dir("/proc") else {
        return m;
    };
    for e in d.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            && let Some(i) = s.rfind(')')
            && let Some(ppid) = s[i + 2..].split_whitespace().nth(1).and_then(|p| p.parse().ok())
        {
            m.insert(pid, ppid);
        }
    }
    m
}

/// `root` and its descendants now.
pub fn tree(root: u32) -> Vec<u32> {
    let parents = parents();
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (pid, ppid) in parents {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c);
        }
        i += 1;
    }
    out
}

/// Usage of the trees of `roots` (CPU seconds: since the processes started).
pub fn usage(roots: &[u32]) -> TreeUsage {
    let tick = 100.0; // USER_HZ on Linux
    let mut u = TreeUsage::default();
    for &r in roots {
        for pid in tree(r) {
            u.processes += 1;
            u.rss_mib += status_kib(pid, "VmRSS:").unwrap_or(0.0) / 1024.0;
            u.peak_rss_mib += status_kib(pid, "VmHWM:").unwrap_or(0.0) / 1024.0;
            u.pss_mib += pss_kib(pid).unwrap_or(0.0) / 1024.0;
            u.cpu_s += cpu_ticks(pid).unwrap_or(0) as f64 / tick;
        }
    }
    u
}

const USER_SCRIPT: &str = r#"
import json, os, openstack
conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "kuryr-sandbox"))
print(json.dumps([conn.current_user_id]))
"#;

/// The Keystone user ID of cloud `kuryr-sandbox` (the one Kuryr's controller authenticates as).
pub fn kuryr_user_id() -> Result<String> {
    crate::neutron::sdk_query::<String>("current user", USER_SCRIPT, &[])?
        .into_iter()
        .next()
        .ok_or_else(|| Error::Parse {
            what: "current user".into(),
            detail: "no user ID".into(),
        })
}

/// neutron-server's log of the sandbox cloud.
pub fn neutron_log() -> PathBuf {
    sandbox_guard::sandbox_home().join("logs/neutron.log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_users_api_requests_only() {
        let text = r#"2026-11-27 07:22:55.367 20433 INFO neutron.wsgi [None req-1 u-kuryr p - - default default] 127.0.0.1 "GET /v2.0/ports?id=a HTTP/1.1" status: 200  len: 1209 time: 0.78
2026-11-27 07:22:55.400 20433 INFO neutron.wsgi [None req-2 u-kuryr p - - default default] 127.0.0.1 "POST /v2.0/ports HTTP/1.1" status: 201  len: 9 time: 3.1
2026-11-27 07:22:55.500 20433 INFO neutron.wsgi [None req-3 u-octavia p - - default default] 127.0.0.1 "PUT /v2.0/ports/x HTTP/1.1" status: 200  len: 9 time: 0.1
2026-11-27 07:22:55.600 20433 INFO neutron.wsgi [None req-4 u-kuryr p - - default default] 127.0.0.1 "GET / HTTP/1.1" status: 200  len: 9 time: 0.1
2026-11-27 07:22:55.700 20433 DEBUG neutron.db [req-5 u-kuryr p] something "PUT /v2.0/x"
"#;
        assert_eq!(count_lines(text, "u-kuryr"), NeutronCounts { all: 2, writes: 1 });
    }

    #[test]
    fn this_process_is_its_own_tree() {
        let me = std::process::id();
        assert!(tree(me).contains(&me));
        let u = usage(&[me]);
        assert!(u.processes >= 1 && u.rss_mib > 0.0 && u.peak_rss_mib >= u.rss_mib);
        assert!(u.pss_mib > 0.0 && u.pss_mib <= u.rss_mib + 1.0, "{u:?}");
    }
}
